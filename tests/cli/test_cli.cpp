// The ditgen executable as users run it: exit codes, error messages that
// name the file and field at fault, no output (and no temporary file) left
// by a failed or interrupted run, and a successful run's PNG metadata and
// saved latents (checked against diffusers' reference).
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ops/backend.h"
#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "io/contact_sheet.h"
#include "io/safetensors.h"
#include "interrupt.h"

namespace fs = std::filesystem;
using namespace ditgen;

namespace {

struct Run {
  int code;
  std::string output;  // stdout and stderr
};

// Runs ditgen on the CPU (these tests check CPU numerics and errors; on a
// machine with a GPU --device auto would pick CUDA) unless args name a device.
Run run_ditgen(const std::string& args) {
  const bool pinned = args.find("--device") != std::string::npos || args.find("--config") == std::string::npos;
  const std::string cmd = std::string(DITGEN_EXE) + " " + args + (pinned ? "" : " --device cpu") + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// Starts ditgen on `cfg` with its stderr into `stderr_file`, waits until
// that file holds `wait_for` (a line the run prints once it has reached the
// point the test needs), sends `sig` and returns the exit code (-1: not a
// normal exit). The wait is for the event, not for a time: the deadline only
// guards against a hang (the run is minutes long; the lines come within
// seconds even on a slow, loaded machine).
int exit_code_after_signal(const std::string& cfg, int sig, const std::string& stderr_file, const std::string& wait_for) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!freopen(stderr_file.c_str(), "w", stderr)) _exit(126);
    execl(DITGEN_EXE, DITGEN_EXE, "--device", "cpu", "--config", cfg.c_str(), (char*)nullptr);
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  bool seen = false, exited = false;
  int status = 0;
  while (!seen && !exited && std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(stderr_file);
    const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    seen = said.find(wait_for) != std::string::npos;
    if (!seen) {
      exited = waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the polling interval
    }
  }
  INFO("waited for '" << wait_for << "' on stderr");
  CHECK_MESSAGE(seen, (exited ? "the run ended first" : "not within 300 s"));
  if (exited) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  kill(pid, sig);
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// run_ditgen with `folder` as the current folder.
Run run_ditgen_in(const fs::path& folder, const std::string& args) {
  const fs::path here = fs::current_path();
  fs::current_path(folder);
  Run r = run_ditgen(args);
  fs::current_path(here);
  return r;
}

// A scratch directory per test, removed afterwards.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name) {
    dir = fs::temp_directory_path() / ("ditgen_cli_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& file, const std::string& text) const {
    std::ofstream(dir / file) << text;
    return (dir / file).string();
  }
  bool empty_of_outputs() const {
    for (auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (n.find(".png") != std::string::npos || n.find(".tmp") != std::string::npos) return false;
    }
    return true;
  }
};

// The tiny Latte fixture at 256x256, 16 frames, 1000 steps, its one clip
// written to `output`: minutes of work before its first output (the tiny
// DiT fixture runs 1000 steps in under a second, so it could finish one
// before a signal).
std::string long_video_config(const Scratch& s, const fs::path& output) {
  return s.write("run.json", R"({
  "model": {"path": ")" + testing::fixture_dir("latte_tiny") + R"("},
  "generate": {"prompts": ["a red circle moving left"], "frames": 16, "height": 256, "width": 256,
               "steps": 1000, "scheduler": "ddim", "batch_size": 1},
  "output": {"path": ")" + output.string() + R"("}
})");
}

std::string fixture_config(const Scratch& s, const std::string& extra_generate = "") {
  return s.write("run.json", R"({
  "model": {"path": ")" + testing::fixture_dir("dit_odd") + R"("},
  "generate": {"class_labels": [1, "white heart"], "steps": 6, "guidance_scale": 4.0,
               "scheduler": "ddim", "batch_size": 2)" + extra_generate + R"(},
  "output": {"path": ")" + (s.dir / "out" / "img.png").string() + R"("}
})");
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("a run writes PNGs with webui metadata and latents matching diffusers") {
  Scratch s("ok");
  const std::string cfg = fixture_config(s);
  const std::string noise = testing::fixture_dir("dit_odd") + "/reference/noise.safetensors";
  const std::string latents = (s.dir / "latents.safetensors").string();
  const Tensor ref = testing::fixture_tensor("dit_odd", "expected.safetensors", "ddim_latents");
  // bfloat16 (model.dtype auto on CPUs with bf16 dot products) stays near
  // diffusers' float32; float32 matches it.
  Run r = run_ditgen("--config " + cfg + " --init-noise " + noise + " --save-latents " + latents +
                     " --quiet --set model.dtype=bfloat16");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double bf16_error = testing::rel_l2(io::SafetensorsFile::open(latents)->load("latents"), ref);
  MESSAGE("bfloat16 latents against diffusers' float32: relative L2 " << bf16_error);
  CHECK(bf16_error < 2e-2);
  r = run_ditgen("--config " + cfg + " --init-noise " + noise + " --save-latents " + latents +
                 " --quiet --set model.dtype=float32");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.empty());  // --quiet
  const Tensor got = io::SafetensorsFile::open(latents)->load("latents");
  CHECK(testing::rel_l2(got, ref) < 1e-4);
  for (const char* name : {"img_0000.png", "img_0001.png"}) {
    const std::string png = read_file(s.dir / "out" / name);
    REQUIRE(png.size() > 100);
    CHECK(png.compare(1, 3, "PNG") == 0);
    CHECK(png.find("tEXtparameters") != std::string::npos);
    CHECK(png.find("Steps: 6, Sampler: ddim, CFG scale: 4, Seed:") != std::string::npos);
    CHECK(png.find("Size: 20x20, Model: dit_odd") != std::string::npos);
    CHECK(png.find("ditgen_config") != std::string::npos);
    // Issue 36: beside what was asked, what ran (the config could say auto).
    CHECK(png.find("Model: dit_odd, Device: cpu, Dtype: float32, VAE dtype: float32, Threads: ") != std::string::npos);
    CHECK(png.find("tEXtditgen_run") != std::string::npos);
    CHECK(png.find(R"j({"device":"cpu","dtype":"float32","layout":"sp1 x cp1 x tp1 (ulysses)","threads":)j") !=
          std::string::npos);
  }
  CHECK(read_file(s.dir / "out" / "img_0001.png").find("white heart, pale heart\nSteps") != std::string::npos);
  for (auto& e : fs::directory_iterator(s.dir / "out"))
    CHECK_MESSAGE(e.path().filename().string().find(".tmp") == std::string::npos, e.path());
}

TEST_CASE("output.grid also writes a captioned contact sheet of all outputs") {
  Scratch s("grid");
  std::string cfg = read_file(fixture_config(s));
  cfg.replace(cfg.find(R"("output": {)"), 11, R"("output": {"grid": true, )");
  const std::string path = s.write("grid.json", cfg);
  Run r = run_ditgen("--config " + path + " --quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const std::string png = read_file(s.dir / "out" / "img_grid.png");
  REQUIRE(png.size() > 24);
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(png[at])) << 24) | (uint32_t(uint8_t(png[at + 1])) << 16) |
           (uint32_t(uint8_t(png[at + 2])) << 8) | uint32_t(uint8_t(png[at + 3]));
  };
  // Two 20x20 outputs side by side, as the sheet's layout says.
  const io::RgbImage tile{20, 20, std::vector<uint8_t>(20 * 20 * 3)};
  io::ContactSheetOptions o;
  o.columns = 2;
  const auto layout = io::layout_contact_sheet({{tile, "a"}, {tile, "b"}}, o);
  CHECK(be32(16) == uint32_t(layout.width));   // IHDR width
  CHECK(be32(20) == uint32_t(layout.height));  // IHDR height
  CHECK(layout.width > layout.height);
  CHECK(fs::exists(s.dir / "out" / "img_0000.png"));
  CHECK(fs::exists(s.dir / "out" / "img_0001.png"));
}

TEST_CASE("the shipped shapes image config writes one image per class and the contact sheet") {
  Scratch s("default");
  const std::string src = DITGEN_SOURCE_DIR;
  Run r = run_ditgen("--config " + src + "/configs/shapes-image.json --set model.path=" + src +
                     "/samples/dit-shapes --output " + (s.dir / "d.png").string() + " --quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  int pngs = 0;
  for (auto& e : fs::directory_iterator(s.dir)) pngs += e.path().extension() == ".png";
  CHECK(pngs == 31);  // 30 classes + d_grid.png
  CHECK(read_file(s.dir / "d_0000.png").find("red circle\nSteps: 25, Sampler: ddim, CFG scale: 4, Seed: 0, Size: 32x32, Model: dit-shapes") !=
        std::string::npos);
  CHECK(read_file(s.dir / "d_0029.png").find("magenta cross\nSteps: 25") != std::string::npos);
  CHECK(fs::file_size(s.dir / "d_grid.png") > 10000);
}

TEST_CASE("bad arguments and configs exit 2 naming the file and field, writing nothing") {
  Scratch s("cfg");
  CHECK(run_ditgen("").code == 2);
  CHECK(run_ditgen("--config").code == 2);
  CHECK(run_ditgen("--config x.json --no-such-flag").code == 2);
  Run r = run_ditgen("--config " + (s.dir / "missing.json").string());
  CHECK(r.code == 2);
  CHECK(r.output.find("missing.json") != std::string::npos);

  const std::string cfg = fixture_config(s);
  r = run_ditgen("--config " + cfg + " --set generate.stpes=3");
  CHECK(r.code == 2);
  CHECK(r.output.find("generate.stpes") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --set generate.steps=\\\"many\\\"");
  CHECK(r.code == 2);
  CHECK(r.output.find("generate.steps") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --set 'generate.class_labels=[\"purple cow\"]'");
  CHECK(r.code == 2);
  CHECK(r.output.find("generate.class_labels[0]") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --set generate.height=64");
  CHECK(r.code == 2);
  CHECK(r.output.find("generate.height") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --set parallel.sp=2");  // one process, layout of two
  CHECK(r.code == 2);
  CHECK(r.output.find("world size 1") != std::string::npos);
  if (ops::cuda_device_count() == 0) {
    // No device here: exit 2 from a CPU-only build, 4 (device error) from a
    // CUDA build on a machine without a GPU; either way nothing is written.
    r = run_ditgen("--config " + cfg + " --device cuda");
    CHECK((r.code == (ops::cuda_built() ? 4 : 2)));
    CHECK(r.output.find("--device cuda") != std::string::npos);
  }
  r = run_ditgen("--config " + cfg + " --device cpu --attention flash");
  CHECK(r.code == 2);
  CHECK(r.output.find("--attention flash on CPU") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --device cpu --set model.dtype=float8");
  CHECK(r.code == 2);
  CHECK(r.output.find("model.dtype") != std::string::npos);
  CHECK(s.empty_of_outputs());
}

TEST_CASE("bad model files exit 3 naming the file and tensor, writing nothing") {
  Scratch s("model");
  // A copy of the fixture model whose transformer weights are truncated.
  const fs::path model = s.dir / "model";
  fs::copy(testing::fixture_dir("dit_odd"), model, fs::copy_options::recursive);
  const fs::path weights = model / "transformer" / "diffusion_pytorch_model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) - 1000);
  const std::string cfg = fixture_config(s);
  Run r = run_ditgen("--config " + cfg + " --set model.path=" + model.string());
  CHECK(r.code == 3);
  CHECK(r.output.find("diffusion_pytorch_model.safetensors") != std::string::npos);

  r = run_ditgen("--config " + cfg + " --set model.path=" + (s.dir / "nowhere").string());
  CHECK(r.code == 3);
  CHECK(r.output.find("nowhere") != std::string::npos);

  // A model whose VAE lacks a tensor.
  fs::remove_all(model);
  fs::copy(testing::fixture_dir("dit_odd"), model, fs::copy_options::recursive);
  {
    auto vae = io::SafetensorsFile::open((model / "vae" / "diffusion_pytorch_model.safetensors").string());
    std::vector<std::pair<std::string, Tensor>> kept;
    for (const auto& n : vae->names())
      if (n != "decoder.conv_out.weight") kept.emplace_back(n, vae->load(n).clone());
    io::write_safetensors((s.dir / "vae.safetensors").string(), kept);
  }
  fs::rename(s.dir / "vae.safetensors", model / "vae" / "diffusion_pytorch_model.safetensors");
  r = run_ditgen("--config " + cfg + " --set model.path=" + model.string());
  CHECK(r.code == 3);
  CHECK(r.output.find("decoder.conv_out.weight") != std::string::npos);
  CHECK(s.empty_of_outputs());
}

// The text encoder's progress line: the run is past its checks and setup
// (the output folder made, the weights loaded) and into its minutes of work.
TEST_CASE("SIGTERM stops a run with exit code 143 and leaves no output") {
  Scratch s("sig");
  CHECK(exit_code_after_signal(long_video_config(s, s.dir / "out" / "clip.png"), SIGTERM,
                               (s.dir / "stderr.txt").string(), "text encoder: step 1/1") == 143);
  CHECK(s.empty_of_outputs());
}

namespace {

// Every file under `dir` except the run config: outputs, partial or temporary.
std::vector<std::string> files_left(const fs::path& dir) {
  std::vector<std::string> left;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "run.json") left.push_back(e.path().string());
  return left;
}

}  // namespace

// A signal while a file is being written (the temporary file exists and
// holds data, the rename has not happened): the handler must remove it.
// At the first output's write the run leaves nothing behind; at the
// --save-latents file, written after the outputs have landed, exactly the
// outputs and their manifest.
TEST_CASE("SIGTERM / SIGINT during an output write leave no partial output and no temporary file") {
  struct Case {
    const char* what;
    int sig, code;
    bool save_latents;  // signal at the latents' write (after the outputs), not the first output's
  };
  for (const Case& c : {Case{"PNG, SIGTERM", SIGTERM, 143, false}, Case{"PNG, SIGINT", SIGINT, 130, false},
                        Case{"--save-latents, SIGTERM", SIGTERM, 143, true},
                        Case{"--save-latents, SIGINT", SIGINT, 130, true}}) {
    CAPTURE(c.what);
    Scratch s("sigwrite");
    const std::string cfg = fixture_config(s);
    const std::string latents = (s.dir / "latents.safetensors").string();
    std::vector<std::string> args = {"--device", "cpu", "--config", cfg, "--steps", "2", "--quiet"};
    if (c.save_latents) args.insert(args.end(), {"--save-latents", latents});
    // Writes before the latents' pause briefly on the way.
    const std::string final_path = c.save_latents ? latents : (s.dir / "out" / "img_0000.png").string();
    const testing::Interrupted r = testing::interrupt_in_write(
        DITGEN_EXE, args, c.sig, [&](const std::string& temp) { return temp.rfind(final_path + ".tmp.", 0) == 0; },
        c.save_latents ? 3 : 60);
    INFO("ditgen stderr: " << r.stderr_text);
    REQUIRE_MESSAGE(!r.temp.empty(), "no pause marker: the write window was never reached");
    CHECK(r.temp_existed);  // the signal really arrived inside the write
    CHECK(r.exit_code == c.code);
    CHECK_FALSE(fs::exists(r.temp));
    // Appended piece by piece: `" " + std::string&&` trips GCC 12's false
    // -Wrestrict (GCC PR 105329), and the build must print no warning.
    std::string landed;
    if (c.save_latents)
      for (const char* name : {"img_0000.png", "img_0001.png", "img_manifest.jsonl"}) {
        landed += ' ';
        landed += (s.dir / "out" / name).string();
      }
    std::vector<std::string> sorted = files_left(s.dir);
    std::sort(sorted.begin(), sorted.end());
    std::string left;
    for (const auto& f : sorted) left += " " + f;
    CHECK_MESSAGE(left == landed, "left behind:" << left);
  }
}

TEST_CASE("--pab-analyze writes the per-step change as CSV and a PNG plot, --pab-stats the summary") {
  Scratch s("pab");
  const std::string cfg = fixture_config(s);
  const std::string dir = (s.dir / "analysis").string();
  Run r = run_ditgen("--config " + cfg + " --steps 10 --quiet --pab-analyze " + dir + " --pab-stats " +
                     (s.dir / "pab.json").string() +
                     " --set 'pab.spatial={\"range\":2,\"threshold\":[100,800]}'");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const std::string csv = read_file(fs::path(dir) / "pab.csv");
  // One row per (step >= 1, block, kind) of computed outputs: 2 blocks x
  // (9 MLP rows + the spatial rows of steps whose previous output was computed too).
  CHECK(csv.rfind("generation,step,timestep,block,part,kind,rel_change\n", 0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') > 18);
  CHECK(csv.find(",1,0,mlp,") != std::string::npos);
  const std::string png = read_file(fs::path(dir) / "pab.png");
  CHECK(png.compare(1, 3, "PNG") == 0);
  const std::string stats = read_file(s.dir / "pab.json");
  CHECK(stats.find("\"spatial\"") != std::string::npos);
  CHECK(stats.find("\"reused\"") != std::string::npos);
  // A DiT has no temporal attention: a clear config error.
  r = run_ditgen("--config " + cfg + " --set 'pab.temporal={\"range\":2,\"threshold\":[100,800]}'");
  CHECK(r.code == 2);
  CHECK(r.output.find("pab.temporal") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --set 'pab.mlp={\"range\":2,\"threshold\":[100,800],\"blocks\":[2]}'");
  CHECK(r.code == 2);
  CHECK(r.output.find("pab.mlp.blocks[0]") != std::string::npos);
}

TEST_CASE("what can be checked without weights fails before loading them, with exit 2") {
  Scratch s("early");
  const std::string cfg = fixture_config(s);
  Run r = run_ditgen("--config " + cfg + " --output /dev/null/x.png");  // parent is not a directory
  CHECK(r.code == 2);
  CHECK(r.output.find("output.path") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --steps 5000");  // more than the 1000 training timesteps
  CHECK(r.code == 2);
  CHECK(r.output.find("scheduler_config.json") != std::string::npos);
  const std::string bad_noise = s.write("noise.safetensors", "not a safetensors file");
  r = run_ditgen("--config " + cfg + " --init-noise " + bad_noise);
  CHECK(r.code == 2);
  CHECK(r.output.find("--init-noise") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --init-noise " + testing::fixture_dir("dit_small_bf16") +
                 "/reference/noise.safetensors");  // another model's shape
  CHECK(r.code == 2);
  CHECK(r.output.find("expected [2, 4, 10, 10]") != std::string::npos);
  CHECK(s.empty_of_outputs());
}

// Issue 36: relative paths in a config file name places beside the file,
// so a config runs from any folder; --output stays relative to the
// current folder.
TEST_CASE("a config run from another folder reads its model and writes its outputs relative to the file") {
  Scratch s("config_folder");
  fs::create_directories(s.dir / "cfg");
  fs::create_directories(s.dir / "elsewhere");
  fs::create_directory_symlink(testing::fixture_dir("dit_odd"), s.dir / "model");
  s.write("cfg/run.json", R"({
  "model": {"path": "../model"},
  "generate": {"class_labels": [1], "steps": 2, "guidance_scale": 4.0, "scheduler": "ddim"},
  "output": {"path": "../out/img.png"}
})");
  const Run run = run_ditgen_in(s.dir / "elsewhere", "--config ../cfg/run.json --quiet");
  REQUIRE_MESSAGE(run.code == 0, run.output);
  CHECK(fs::exists(s.dir / "out/img.png"));
  CHECK(fs::is_empty(s.dir / "elsewhere"));

  // The shipped image config from another folder: its model is found
  // beside configs/, --output is relative to the current folder.
  const std::string shipped = std::string(DITGEN_SOURCE_DIR) + "/configs/shapes-image.json";
  const Run image = run_ditgen_in(s.dir / "elsewhere", "--config " + shipped +
                                                           " --steps 2 --output here/s.png --set output.grid=false --quiet");
  REQUIRE_MESSAGE(image.code == 0, image.output);
  CHECK(fs::exists(s.dir / "elsewhere/here/s_0000.png"));
}

// Issue 36: `--output /dev/full` wrote eight files into /dev. A target that
// exists and is not a regular file, or lies in a system folder, is refused
// with exit 2 naming it, before any work; nothing is written anywhere.
TEST_CASE("outputs that are devices, FIFOs or folders, or lie in /dev, are refused with exit 2, nothing written") {
  Scratch s("not_a_file");
  const std::string base = "--config " + fixture_config(s) + " --steps 2 --quiet";
  const std::string one = " --set 'generate.class_labels=[1]'";
  auto dev_entries = [] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator("/dev")) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> dev_before = dev_entries();
  REQUIRE(mkfifo((s.dir / "fifo.png").c_str(), 0600) == 0);
  fs::create_directories(s.dir / "folder.png");
  struct Case {
    std::string args, path, says;
  };
  for (const Case& c : {Case{"--output /dev/full", "/dev/full_0000", "in /dev, a system folder"},
                        Case{"--output /dev/full" + one, "/dev/full", "a character device"},
                        Case{"--output /dev/full --set output.format=mp4", "/dev/full_0000.mp4", "system folder"},
                        Case{"--output " + (s.dir / "fifo.png").string() + one, (s.dir / "fifo.png").string(),
                             "a FIFO"},
                        Case{"--output " + (s.dir / "folder.png").string() + one, (s.dir / "folder.png").string(),
                             "a folder"},
                        Case{"--save-latents /dev/null", "/dev/null", "a character device"}}) {
    CAPTURE(c.args);
    const Run r = run_ditgen(base + " " + c.args);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find("'" + c.path + "'") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find(c.says) != std::string::npos, r.output);
  }
  CHECK(dev_entries() == dev_before);
  CHECK(fs::is_empty(s.dir / "folder.png"));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(s.dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"fifo.png", "folder.png", "run.json"});  // not even out/ was created  // not even the configured output folder was created
}

// Issue 36: Ctrl-C printed nothing and left the empty output folder the
// run had created. Now it says what was interrupted and what is kept, and
// removes the folders it made and left empty (and only those).
TEST_CASE("SIGINT says what was interrupted and what is kept, and removes the empty folders the run created") {
  Scratch s("sigint_folders");
  fs::create_directories(s.dir / "kept");
  const std::string cfg = long_video_config(s, s.dir / "kept" / "new" / "deeper" / "clip.png");
  const std::string err = (s.dir / "stderr.txt").string();
  // The denoising loop's first progress line (lines come at most every 5 s
  // off a terminal): the run is inside a stage, its output folders made.
  CHECK(exit_code_after_signal(cfg, SIGINT, err, "outputs 0/1: step ") == 130);
  const std::string said = read_file(err);
  INFO("stderr: " << said);
  CHECK(said.find("ditgen: interrupted by SIGINT during ") != std::string::npos);
  CHECK(said.find("no output was finished") != std::string::npos);
  // A whole sentence: "..., and so is the empty folder X that the run created" (issue 43: it lacked its verb).
  CHECK(said.find("temporary files are removed, and so is the empty folder " + (s.dir / "kept" / "new").string() +
                  " that the run created") != std::string::npos);
  CHECK_FALSE(fs::exists(s.dir / "kept" / "new"));
  CHECK(fs::is_directory(s.dir / "kept"));  // there before the run: stays
}
