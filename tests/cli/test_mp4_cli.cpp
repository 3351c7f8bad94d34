// output.format "mp4" through the ditgen executable: the dit_odd fixture
// run (as in test_cli.cpp) writes one H.264 MP4 per output, decoded here
// with libav (tests/mp4_decode.h): one 20x20 frame, the webui parameters in
// `comment`, the effective config in `description`, luma matching the PNG
// run of the same seed; fps / crf / grid from the config; nothing printed
// under --quiet (libav's own logging is silenced); bad crf or an unwritable
// path fail before any weight is read; a signal during the MP4's write
// leaves no temporary file. The shipped default config (the video model of
// samples/) writes its six 16-frame clips and the filmstrip sheet.
#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../io/stb_image_read.h"
#include "../models/fixture.h"
#include "mp4_decode.h"

namespace fs = std::filesystem;
using namespace ditgen;

namespace {

struct Result {
  int code;
  std::string output;  // stdout and stderr
};

// ditgen on the CPU (as test_cli.cpp: the fixture's numerics are CPU ones).
Result run_ditgen(const std::string& args) {
  FILE* p = popen((std::string(DITGEN_EXE) + " " + args + " --device cpu 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name) {
    dir = fs::temp_directory_path() / ("ditgen_cli_mp4_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  // test_cli.cpp's fixture_config: two class labels of the dit_odd fixture,
  // 6 DDIM steps, output.path out/img.png (the format decides the extension).
  std::string config() const {
    const std::string path = (dir / "run.json").string();
    std::ofstream(path) << R"({
  "model": {"path": ")" + testing::fixture_dir("dit_odd") + R"("},
  "generate": {"class_labels": [1, "white heart"], "steps": 6, "guidance_scale": 4.0,
               "scheduler": "ddim", "batch_size": 2},
  "output": {"path": ")" + (dir / "out" / "img.png").string() + R"("}
})";
    return path;
  }
  std::vector<std::string> files(const std::string& sub = "out") const {
    std::vector<std::string> names;
    if (!fs::exists(dir / sub)) return names;
    for (const auto& e : fs::directory_iterator(dir / sub)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

std::vector<uint8_t> png_rgb(const fs::path& path, int* w, int* h) {
  int n = 0;
  unsigned char* px = stbi_load(path.string().c_str(), w, h, &n, 3);
  REQUIRE(px != nullptr);
  std::vector<uint8_t> rgb(px, px + static_cast<size_t>(*w) * *h * 3);
  stbi_image_free(px);
  return rgb;
}

// Y of BT.709, limited range, of 8-bit RGB: the plane the MP4 stores.
std::vector<uint8_t> bt709_luma(const std::vector<uint8_t>& rgb) {
  std::vector<uint8_t> y(rgb.size() / 3);
  for (size_t k = 0; k < y.size(); ++k)
    y[k] = static_cast<uint8_t>(
        std::lround(16 + 219 * (0.2126 * rgb[3 * k] + 0.7152 * rgb[3 * k + 1] + 0.0722 * rgb[3 * k + 2]) / 255));
  return y;
}

}  // namespace

TEST_CASE("mp4 cli: output.format=\"mp4\" writes img_NNNN.mp4 with the parameters, matching the PNG run") {
  Scratch s("run");
  const std::string cfg = s.config();
  Result r = run_ditgen("--config " + cfg + " --quiet --set output.format=\\\"mp4\\\"");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK_MESSAGE(r.output.empty(), r.output);  // --quiet: not a line from libav or x264 either
  CHECK(s.files() == std::vector<std::string>{"img_0000.mp4", "img_0001.mp4", "img_manifest.jsonl"});

  // The same run as PNG, for the pixels.
  r = run_ditgen("--config " + cfg + " --quiet --output " + (s.dir / "png" / "img.png").string());
  REQUIRE_MESSAGE(r.code == 0, r.output);

  const char* captions[] = {"blue star", "white heart, pale heart"};
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    const std::string name = "img_000" + std::to_string(i);
    auto v = testing::decode_mp4((s.dir / "out" / (name + ".mp4")).string());
    CHECK(v.codec == "h264");
    CHECK(v.pix_fmt == "yuv420p");
    CHECK(v.width == 20);
    CHECK(v.height == 20);
    CHECK(v.space == AVCOL_SPC_BT709);
    CHECK(v.avg_frame_rate.num == 8);  // output.fps default
    CHECK(v.avg_frame_rate.den == 1);
    REQUIRE(v.rgb.size() == 1);
    const std::string& comment = v.metadata["comment"];
    CHECK(comment.find("Steps: 6, Sampler: ddim, CFG scale: 4, Seed: " + std::to_string(i) + ", Size: 20x20, Model: dit_odd") !=
          std::string::npos);
    CHECK(v.metadata["title"] == captions[i]);
    CHECK(comment.rfind(std::string(captions[i]) + "\nSteps", 0) == 0);
    const auto config = nlohmann::json::parse(v.metadata["description"]);
    CHECK(config["output"]["format"] == "mp4");
    CHECK(config["output"]["crf"] == 18);

    int w = 0, h = 0;
    const auto png = png_rgb(s.dir / "png" / (name + ".png"), &w, &h);
    REQUIRE(w == 20);
    REQUIRE(h == 20);
    // Luma: the fixture's 20x20 images are noise-like, so 4:2:0 (one chroma
    // sample per 2x2 pixels) costs most of their RGB PSNR (~17-21 dB) before
    // the encoder does anything; the luma plane shows whether the MP4 holds
    // the PNG's image, within coding noise.
    const double luma_psnr = testing::psnr8(v.luma[0], bt709_luma(png));
    MESSAGE("dit_odd output " << i << ", MP4 (crf 18) vs PNG: luma PSNR " << luma_psnr << " dB, RGB PSNR "
                              << testing::psnr8(v.rgb[0], png) << " dB");
    CHECK(luma_psnr > 35);
  }
}

TEST_CASE("mp4 cli: fps, crf and grid from the config") {
  Scratch s("opts");
  const Result r = run_ditgen("--config " + s.config() +
                              " --quiet --set output.format=\\\"mp4\\\" --set output.fps=4 --set output.crf=40"
                              " --set output.grid=true");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(s.files() == std::vector<std::string>{"img_0000.mp4", "img_0001.mp4", "img_grid.png", "img_manifest.jsonl"});
  auto v = testing::decode_mp4((s.dir / "out" / "img_0001.mp4").string());
  CHECK(v.avg_frame_rate.num == 4);
  CHECK(v.avg_frame_rate.den == 1);
  CHECK(v.duration_s == doctest::Approx(0.25));
  CHECK(nlohmann::json::parse(v.metadata["description"])["output"]["crf"] == 40);
}

TEST_CASE("mp4 cli: a bad crf or an unwritable path fail with exit 2 before the run, writing nothing") {
  Scratch s("bad");
  const std::string cfg = s.config();
  Result r = run_ditgen("--config " + cfg + " --set output.format=\\\"mp4\\\" --set output.crf=60");
  CHECK(r.code == 2);
  CHECK(r.output.find("output.crf") != std::string::npos);
  CHECK(r.output.find("0..51") != std::string::npos);
  r = run_ditgen("--config " + cfg + " --set output.format=\\\"mp4\\\" --output /dev/null/clip.mp4");
  CHECK(r.code == 2);
  CHECK(r.output.find("/dev/null/clip_0000.mp4") != std::string::npos);
  CHECK(s.files().empty());
}

TEST_CASE("mp4 cli: SIGINT while the MP4 is being written leaves no temporary file") {
  Scratch s("sig");
  const std::string cfg = s.config();
  int err_pipe[2];
  REQUIRE(pipe(err_pipe) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(err_pipe[0]);
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[1]);
    // The atomic-file test hook: pause after the file is complete under its
    // temporary name, before the rename.
    setenv("DITGEN_TEST_PAUSE_IN_WRITE", "60", 1);
    execl(DITGEN_EXE, DITGEN_EXE, "--device", "cpu", "--config", cfg.c_str(), "--steps", "2", "--quiet", "--set",
          "output.format=\"mp4\"", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(err_pipe[1]);
  const std::string marker = "ditgen: test: pausing in write of ";
  std::string err, temp;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char buf[4096];
  while (temp.empty() && std::chrono::steady_clock::now() < deadline) {
    const size_t at = err.find(marker);
    if (at != std::string::npos && err.find('\n', at) != std::string::npos) {
      temp = err.substr(at + marker.size(), err.find('\n', at) - at - marker.size());
      break;
    }
    pollfd p{err_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = read(err_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    err.append(buf, static_cast<size_t>(n));
  }
  std::error_code ec;
  const bool temp_existed = !temp.empty() && fs::file_size(temp, ec) > 0 && !ec;  // the whole MP4, not yet renamed
  kill(pid, temp.empty() ? SIGKILL : SIGINT);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO("ditgen stderr: " << err);
  REQUIRE_MESSAGE(!temp.empty(), "no pause marker: the write window was never reached");
  CHECK(temp.rfind((s.dir / "out" / "img_0000.mp4").string() + ".tmp.", 0) == 0);
  CHECK(temp_existed);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK_FALSE(fs::exists(temp));
  CHECK(s.files().empty());
}

TEST_CASE("the shipped default config writes six 16-frame MP4s of its prompts and the filmstrip sheet") {
  Scratch s("default_video");
  const std::string src = DITGEN_SOURCE_DIR;
  // From the repository root, as the README's first command runs it; fewer
  // steps than shipped to keep the suite quick (the quality test runs 25).
  const Result r = run_ditgen("--config " + src + "/configs/default.json --set model.path=" + src +
                              "/samples/latte-shapes --steps 5 --output " + (s.dir / "d.mp4").string() + " --quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const std::vector<std::string> prompts = {"a red circle moving right", "a yellow star moving up",
                                            "a green triangle moving left", "a cyan square growing",
                                            "a blue cross moving down", "a magenta star shrinking"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string path = (s.dir / ("d_000" + std::to_string(i) + ".mp4")).string();
    REQUIRE_MESSAGE(fs::exists(path), path);
    const auto v = testing::decode_mp4(path);
    CHECK(v.rgb.size() == 16);
    CHECK(v.width == 32);
    CHECK(v.height == 32);
    CHECK(v.avg_frame_rate.num == 8 * v.avg_frame_rate.den);
    CHECK(v.metadata.at("title") == prompts[i]);
    CHECK(v.metadata.at("comment").find("Steps: 5, Sampler: ddim, CFG scale: 5, Seed: " + std::to_string(i)) !=
          std::string::npos);
  }
  int x, y, n;
  unsigned char* sheet = stbi_load((s.dir / "d_grid.png").string().c_str(), &x, &y, &n, 3);
  REQUIRE(sheet);
  stbi_image_free(sheet);
  CHECK(x > 16 * 32);  // a row of 16 frames per clip
  CHECK(y > 6 * 32);   // six rows
}

namespace {

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The default video model on two of its prompts, 5 steps, into `out`
// (d_0000.mp4, d_0001.mp4), with `redirect` appended to the shell command.
int run_default_video(const fs::path& out, const std::string& extra, const std::string& redirect) {
  const std::string src = DITGEN_SOURCE_DIR;
  const std::string cmd = std::string(DITGEN_EXE) + " --device cpu --config " + src +
                          "/configs/default.json --set model.path=" + src +
                          "/samples/latte-shapes --steps 5 --prompt 'a red circle moving right' "
                          "--prompt 'a yellow star moving up' --output " + (out / "d.mp4").string() + " " + extra +
                          " " + redirect;
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

// Issue 36: the same command wrote other H.264 bytes depending on --quiet
// and on where stdout and stderr went (x264's AVX-512 code and libswscale
// read memory whose content the heap's history decided; io/mp4_writer.cpp).
// Each arrangement is its own process; every one must give the first's
// stream bytes and decoded frames.
TEST_CASE("mp4 cli: the same MP4 bytes whatever --quiet and wherever stdout and stderr go") {
  Scratch s("mp4_same_bytes");
  const fs::path out = s.dir / "out";
  const std::vector<std::pair<std::string, std::string>> arrangements = {
      {"", "> /dev/null 2>&1"},
      {"", "2>&1 | cat > /dev/null"},
      {"", "> " + (s.dir / "log1").string() + " 2>&1"},
      {"--quiet", "> " + (s.dir / "log2").string() + " 2>&1"},
      {"--quiet", "2>&1 | cat > " + (s.dir / "log3").string()},
      {"", "2> " + (s.dir / "log4").string() + " | cat"},
  };
  std::vector<std::string> reference;
  std::vector<testing::DecodedVideo> reference_frames;
  for (size_t k = 0; k < arrangements.size(); ++k) {
    const auto& [flags, redirect] = arrangements[k];
    CAPTURE(flags);
    CAPTURE(redirect);
    fs::remove_all(out);
    REQUIRE(run_default_video(out, flags, redirect) == 0);
    for (int i = 0; i < 2; ++i) {
      const fs::path video = out / ("d_000" + std::to_string(i) + ".mp4");
      REQUIRE_MESSAGE(fs::exists(video), video);
      const std::string bytes = file_bytes(video);
      const testing::DecodedVideo decoded = testing::decode_mp4(video.string());
      if (k == 0) {
        reference.push_back(bytes);
        reference_frames.push_back(decoded);
        continue;
      }
      CAPTURE(i);
      CHECK(decoded.rgb == reference_frames[i].rgb);
      CHECK(bytes == reference[i]);
    }
  }
}

// A resumed batch remakes a missing video in a process whose history
// differs from the uninterrupted run's (one output instead of two): the
// same bytes.
TEST_CASE("mp4 cli: a resumed batch remakes a missing MP4 with the uninterrupted run's bytes") {
  Scratch s("mp4_resume");
  const fs::path out = s.dir / "out";
  REQUIRE(run_default_video(out, "--quiet", "") == 0);
  const std::string first = file_bytes(out / "d_0000.mp4"), second = file_bytes(out / "d_0001.mp4");
  fs::remove(out / "d_0000.mp4");
  REQUIRE(run_default_video(out, "--resume --quiet", "") == 0);
  CHECK(file_bytes(out / "d_0000.mp4") == first);
  CHECK(file_bytes(out / "d_0001.mp4") == second);
}

// Issue 36: the lines a run prints when stderr is not a terminal: one per
// output as it lands (and the contact sheet's), progress: each loop's first
// step, then at most every 5 s (how many depends on the machine), and its
// last, then the total; and the MP4's metadata records what ran beside the
// config.
TEST_CASE("mp4 cli: one line per output, few progress lines off a terminal, and what ran in the metadata") {
  Scratch s("lines");
  const std::string src = DITGEN_SOURCE_DIR;
  const Result r = run_ditgen("--config " + src + "/configs/default.json --steps 5 --threads 2 "
                              "--prompt 'a red circle moving right' --prompt 'a blue cross moving down' --output " +
                              (s.dir / "d.mp4").string());
  REQUIRE_MESSAGE(r.code == 0, r.output);
  // The lines, each loop's progress lines folded into one entry: a loop
  // prints its last step, and before it at most one line per 5 s (how many
  // depends on the machine's speed; the 5 s rule itself is
  // config/test_progress.cpp's, on a fake clock), each an earlier step of
  // the same loop.
  std::vector<std::string> lines, firsts;  // firsts: each entry's first line
  std::istringstream in(r.output);
  std::string loop;  // the label of the progress lines being folded, "" outside a loop
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(": step ");
    const std::string label = at == std::string::npos || line.rfind("ditgen:", 0) == 0 ? "" : line.substr(0, at);
    if (!label.empty() && label == loop) {
      lines.back() = line;  // a later line of the same loop
    } else {
      lines.push_back(line);
      firsts.push_back(line);
    }
    loop = label;
  }
  const std::vector<std::string> expected_tail = {
      "ditgen: wrote " + (s.dir / "d_0000.mp4").string(), "ditgen: wrote " + (s.dir / "d_0001.mp4").string(),
      "ditgen: wrote " + (s.dir / "d_grid.png").string() + " (the contact sheet)"};
  // The text encoder's loop, the denoising loop's (its first line with its
  // ETA, issue 43), 3 wrote, the peak memory (issue 47), made.
  REQUIRE_MESSAGE(lines.size() == 7, r.output);
  CHECK(lines[0].rfind("text encoder: step 1/1 ", 0) == 0);
  CHECK(firsts[1].rfind("outputs 0/2: step 1/5 ", 0) == 0);
  CHECK(firsts[1].find(", ETA ") != std::string::npos);
  CHECK(lines[1].rfind("outputs 0/2: step 5/5 ", 0) == 0);
  CHECK(std::vector<std::string>(lines.begin() + 2, lines.begin() + 5) == expected_tail);
  CHECK(lines[5].rfind("ditgen: peak memory (resident): rank 0 ", 0) == 0);
  CHECK(lines[6].rfind("ditgen: made 2 videos in ", 0) == 0);

  const auto v = testing::decode_mp4((s.dir / "d_0000.mp4").string());
  CHECK(v.metadata.at("comment").find(", Model: latte-shapes, Device: cpu, Dtype: ") != std::string::npos);
  CHECK(v.metadata.at("comment").find(", Threads: 2") != std::string::npos);
  const auto ran = nlohmann::json::parse(v.metadata.at("synopsis"));
  CHECK(ran.at("device") == "cpu");
  CHECK(ran.at("threads") == 2);
  CHECK(ran.at("layout") == "sp1 x cp1 x tp1 (dsp)");
  CHECK(ran.at("dtype") != "auto");
  CHECK(ran.at("vae_tiling").at("tiled") == false);  // and why: the VAE decode's tiling, as decided (issue 47)
  CHECK(ran.at("vae_tiling").at("why") == "one tile covers 32x32");
  CHECK(nlohmann::json::parse(v.metadata.at("description")).at("model").at("dtype") == "auto");  // as asked
}

// What a -DDITGEN_FFMPEG=OFF build makes (for a machine without FFmpeg's
// libraries, scripts/gpu/pack.sh): every build links the same command line
// without the MP4 writer as ditgen_without_ffmpeg, so this is checked
// without a second build tree. It links no libav library and refuses mp4
// before any work, exit 2.
TEST_CASE("mp4 cli: a build without FFmpeg links no libav and refuses mp4 with exit 2, writing nothing") {
  Scratch s("without_ffmpeg");
  const std::string exe = DITGEN_EXE_WITHOUT_FFMPEG;
  FILE* p = popen(("ldd " + exe + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string libs;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) libs.append(buf, n);
  pclose(p);
  CHECK(libs.find("libstdc++") != std::string::npos);  // ldd did list the libraries
  CHECK_MESSAGE(libs.find("libavcodec") == std::string::npos, libs);
  CHECK_MESSAGE(libs.find("libswscale") == std::string::npos, libs);

  const std::string cmd = exe + " --device cpu --config " + s.config() + " --set output.format=mp4 2>&1";
  p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_MESSAGE(out.find("built without FFmpeg") != std::string::npos, out);
  CHECK(s.files().empty());
  // PNG output still works.
  const std::string png = exe + " --device cpu --config " + s.config() + " --steps 2 --quiet 2>&1";
  CHECK(std::system(png.c_str()) == 0);
  CHECK(s.files() == std::vector<std::string>{"img_0000.png", "img_0001.png", "img_manifest.jsonl"});
}
