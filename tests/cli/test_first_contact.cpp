// What a new user meets between the Quick start and a real model (issue
// 43), through the ditgen executable: a model that is not downloaded yet,
// switching an MP4 config to PNG from the command line, messages naming the
// flag typed, other tools' option names, `plan` on a machine with fewer
// cores than ranks, and a resumed batch's contact sheet.
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../io/stb_image_read.h"
#include "../models/fixture.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

testing::Run run_ditgen(const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " --device cpu --threads 2 " + args);
}

std::string repo(const std::string& path) { return std::string(DITGEN_SOURCE_DIR) + "/" + path; }

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool has(const testing::Run& r, const std::string& part) { return r.output.find(part) != std::string::npos; }

// The default video model (samples/latte-shapes) on one or two prompts, 2
// steps: a run of a fraction of a second.
std::string shapes_video_config(const testing::TempDir& tmp, const std::string& output, int prompts = 1,
                                int batch_size = 1) {
  std::string list;
  const char* all[] = {"a red circle moving right", "a yellow star moving up", "a green triangle moving left",
                       "a cyan square growing"};
  for (int i = 0; i < prompts; ++i) list += std::string(i ? ", " : "") + "\"" + all[i] + "\"";
  return tmp.write("video.json", R"({
  "model": {"path": ")" + repo("samples/latte-shapes") + R"("},
  "generate": {"prompts": [)" + list + R"(], "steps": 2, "guidance_scale": 5.0, "scheduler": "ddim",
               "batch_size": )" + std::to_string(batch_size) + R"(},
  "output": {"path": ")" + output + R"(", "format": "mp4", "fps": 8, "crf": 18, "grid": true}
})");
}

}  // namespace

TEST_CASE("a model not downloaded yet: exit 3 saying it is not there and where it comes from") {
  testing::TempDir tmp("first_missing");
  // A shipped real-model config as a user runs it before the download (its
  // model.path pointed into this test's folder, so a machine that has the
  // model does not run it).
  const std::string shipped = read_file(repo("configs/wan2.1-t2v-1.3b.json"));
  std::string config = shipped;
  const std::string from = "\"../models/Wan2.1-T2V-1.3B-Diffusers\"";
  REQUIRE(config.find(from) != std::string::npos);
  config.replace(config.find(from), from.size(), "\"models/Wan2.1-T2V-1.3B-Diffusers\"");
  const testing::Run r = run_ditgen("--config " + tmp.write("wan.json", config));
  CHECK(r.code == 3);
  INFO(r.output);
  CHECK(has(r, tmp.file("models/Wan2.1-T2V-1.3B-Diffusers") + ": the model is not there"));
  CHECK(has(r, "download Wan-AI/Wan2.1-T2V-1.3B-Diffusers (model.source)"));
  CHECK(has(r, "docs/real-models.md"));
  CHECK_FALSE(has(r, "not a directory"));
  // plan plans from the published config of that name and says so (issue 47).
  const testing::Run plan = run_ditgen("plan --no-calibrate --config " + tmp.file("wan.json"));
  CHECK(plan.code == 0);
  CHECK(has(plan, "model.path " + tmp.file("models/Wan2.1-T2V-1.3B-Diffusers") +
                      " does not exist yet: planning from the published config "));

  // A Hub id given as model.path: the download command.
  const testing::Run hub = run_ditgen("--config " + repo("configs/default.json") +
                                      " --set model.path=Wan-AI/Wan2.1-T2V-1.3B-Diffusers --output " + tmp.file("o.mp4"));
  CHECK(hub.code == 3);
  CHECK(has(hub, "it looks like a Hugging Face Hub id"));
  CHECK(has(hub, "huggingface-cli download Wan-AI/Wan2.1-T2V-1.3B-Diffusers --local-dir models/Wan2.1-T2V-1.3B-Diffusers"));
  const testing::Run encode = testing::run_command(std::string(DITGEN_EXE) + " encode --model THUDM/CogVideoX-2b " +
                                                   "--prompt a --output " + tmp.file("e.safetensors"));
  CHECK(encode.code == 3);
  CHECK(has(encode, "THUDM/CogVideoX-2b: --model names no folder here"));
  CHECK_FALSE(fs::exists(tmp.file("o.mp4")));
}

TEST_CASE("a model folder with its configs but not its weights or tokenizer names the part that is missing") {
  testing::TempDir tmp("first_partial");
  const fs::path model = fs::path(tmp.path) / "pixart";
  fs::copy(testing::fixture_dir("pixart_tiny"), model, fs::copy_options::recursive);
  const std::string config = testing::fixture_dir("pixart_tiny") + "/reference/run_dpm.json";
  // No tokenizer/: said of tokenizer/, not of the model folder.
  fs::rename(model / "tokenizer", fs::path(tmp.path) / "tokenizer.kept");
  testing::Run r = run_ditgen("--config " + config + " --set model.path=" + model.string() + " --output " +
                              tmp.file("o.png"));
  CHECK(r.code == 3);
  CHECK_MESSAGE(has(r, (model / "tokenizer").string() + ": missing (the model's tokenizer folder"), r.output);
  fs::rename(fs::path(tmp.path) / "tokenizer.kept", model / "tokenizer");
  // Configs but no weights (a download that fetched only the small files).
  for (const auto& e : fs::recursive_directory_iterator(model))
    if (e.path().extension() == ".safetensors") fs::remove(e.path());
  r = run_ditgen("--config " + config + " --set model.path=" + model.string() + " --output " + tmp.file("o.png"));
  CHECK(r.code == 3);
  INFO(r.output);
  CHECK(has(r, ": the weights are missing (no *.safetensors in this folder"));
  CHECK((has(r, (model / "transformer").string() + ":") || has(r, (model / "text_encoder").string() + ":") ||
         has(r, (model / "vae").string() + ":")));
  CHECK_FALSE(fs::exists(tmp.file("o.png")));
}

TEST_CASE("--output x.png on an MP4 config writes PNG frames, dropping fps and crf with one note") {
  testing::TempDir tmp("first_png");
  const std::string cfg = shapes_video_config(tmp, tmp.file("out/clip.mp4"));
  const testing::Run r = run_ditgen("--config " + cfg + " --output " + tmp.file("png/clip.png"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(has(r, "ditgen: note: output.fps and output.crf are dropped: mp4 output only takes them, and --output " +
                   tmp.file("png/clip.png") + " writes png"));
  CHECK(fs::exists(tmp.file("png/clip_f000.png")));
  CHECK_FALSE(fs::exists(tmp.file("png/clip.mp4")));
  CHECK_FALSE(fs::exists(tmp.file("png/clip.png")));
  // --set output.format=png: the same, without removing fps and crf by hand.
  const testing::Run set = run_ditgen("--config " + cfg + " --set output.format=png --quiet");
  REQUIRE_MESSAGE(set.code == 0, set.output);
  CHECK(fs::exists(tmp.file("out/clip_f000.png")));
  // Both, disagreeing: exit 2, nothing written.
  const testing::Run clash = run_ditgen("--config " + cfg + " --set output.format=mp4 --output " + tmp.file("c/x.png"));
  CHECK(clash.code == 2);
  CHECK(has(clash, "output.format: \"mp4\" does not write a .png file"));
  CHECK_FALSE(fs::exists(tmp.file("c")));
}

TEST_CASE("command-line prompts replace the config's prompt file, and errors name the flag typed") {
  testing::TempDir tmp("first_prompts");
  const std::string prompts = tmp.write("p.txt", "a yellow star moving up\n");
  const std::string cfg = shapes_video_config(tmp, tmp.file("out/v.mp4"));
  const testing::Run file = run_ditgen("--config " + cfg + " --set generate.prompt_file=" + prompts + " --quiet");
  CHECK_MESSAGE(file.code == 0, file.output);
  const testing::Run empty = run_ditgen("--config " + cfg + " --prompt ''");
  CHECK(empty.code == 2);
  CHECK_MESSAGE(has(empty, "generate.prompts[0]: the prompt is empty"), empty.output);
  CHECK(has(empty, "(from --prompt \"\")"));
  CHECK_FALSE(has(empty, "--set generate.prompts"));
}

TEST_CASE("other tools' option names get one line and ditgen's name, and the shorthands work") {
  const testing::Run cfg = run_ditgen("--config " + repo("configs/default.json") + " --cfg 7");
  CHECK(cfg.code == 2);
  CHECK(cfg.output == "ditgen: error: --cfg: no such option; did you mean --guidance? (see ditgen --help)\n");
  testing::TempDir tmp("first_flags");
  const testing::Run ok = run_ditgen("--config " + shapes_video_config(tmp, tmp.file("v.mp4")) +
                                     " --cfg-scale 4 -H 32 --width 32 --quiet");
  CHECK_MESSAGE(ok.code == 0, ok.output);
  CHECK(fs::exists(tmp.file("v.mp4")));
  const testing::Run small = run_ditgen("--config " + shapes_video_config(tmp, tmp.file("w.mp4")) + " -H 30");
  CHECK(small.code == 2);  // the model's own size rule, reached through -H
  CHECK(has(small, "height"));
}

TEST_CASE("plan says when a layout needs more ranks than the machine has cores") {
  // One core for the process (taskset: the first CPU it may use), two ranks for the layout.
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
  const testing::Run r = testing::run_command("taskset -c " + std::to_string(cpu) + " " + std::string(DITGEN_EXE) +
                                              " plan --config " +
                                              repo("configs/shapes-image.json") + " --set parallel.cp=2");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(has(r, "this layout needs 2 ranks and this machine has 1 core: mpirun starts at most one rank per core unless "
               "given --oversubscribe (mpirun --oversubscribe -np 2 ...)"));
  const testing::Run fits = testing::run_command(std::string(DITGEN_EXE) + " plan --config " +
                                                 repo("configs/shapes-image.json"));
  CHECK_FALSE(has(fits, "--oversubscribe"));
}

// The contact sheet of a batch resumed after an interruption shows every
// output: the ones this run made, and the earlier run's read back from
// their files. PNG files read back exactly, so the sheet equals an
// uninterrupted run's byte for byte.
TEST_CASE("--resume writes the contact sheet from every output present") {
  testing::TempDir tmp("first_grid");
  const std::string cfg = tmp.write("run.json", R"({
  "model": {"path": ")" + repo("samples/dit-shapes") + R"("},
  "generate": {"class_labels": [0, 1, 2, 3, 4, 5], "steps": 2, "batch_size": 2},
  "output": {"path": ")" + tmp.file("out/s.png") + R"(", "grid": true}
})");
  const testing::Run whole = run_ditgen("--config " + cfg + " --quiet");
  REQUIRE_MESSAGE(whole.code == 0, whole.output);
  const std::string grid = tmp.file("out/s_grid.png");
  const std::string reference = read_file(grid);
  REQUIRE_FALSE(reference.empty());

  // As an interrupted run leaves it: outputs 0-2 made, no sheet. The resumed
  // run recomputes batch [2, 3] and reads 0 and 1 back.
  for (const char* f : {"s_0003.png", "s_0004.png", "s_0005.png", "s_grid.png"}) fs::remove(tmp.file(std::string("out/") + f));
  const testing::Run resumed = run_ditgen("--config " + cfg + " --resume");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.output);
  CHECK(has(resumed, "(the contact sheet, with the outputs an earlier run made)"));
  CHECK(read_file(grid) == reference);

  // Every output there, the sheet missing: written from the files alone.
  fs::remove(grid);
  const testing::Run done = run_ditgen("--config " + cfg + " --resume");
  REQUIRE_MESSAGE(done.code == 0, done.output);
  CHECK(has(done, "nothing to make"));
  CHECK(read_file(grid) == reference);
}

// MP4s are read back through the H.264 decoder: near the frames the earlier
// run encoded, not equal, so the sheet is compared by pixels.
TEST_CASE("--resume writes the contact sheet of an MP4 batch, its earlier videos decoded") {
  testing::TempDir tmp("first_grid_mp4");
  const std::string cfg = shapes_video_config(tmp, tmp.file("out/v.mp4"), /*prompts=*/3, /*batch_size=*/1);
  const testing::Run whole = run_ditgen("--config " + cfg + " --quiet");
  REQUIRE_MESSAGE(whole.code == 0, whole.output);
  const std::string grid = tmp.file("out/v_grid.png");
  int w = 0, h = 0, n = 0;
  unsigned char* ref = stbi_load(grid.c_str(), &w, &h, &n, 3);
  REQUIRE(ref);
  const std::vector<unsigned char> reference(ref, ref + static_cast<size_t>(w) * h * 3);
  stbi_image_free(ref);
  fs::remove(tmp.file("out/v_0002.mp4"));
  fs::remove(grid);
  const testing::Run resumed = run_ditgen("--config " + cfg + " --resume");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.output);
  int w2 = 0, h2 = 0;
  unsigned char* got = stbi_load(grid.c_str(), &w2, &h2, &n, 3);
  REQUIRE_MESSAGE(got, resumed.output);
  CHECK(w2 == w);
  CHECK(h2 == h);
  // Per filmstrip row (one per output): rows 0 and 1 were read back from
  // their MP4s, row 2 made again. 4:2:0 chroma on 32 x 32 frames of
  // saturated shapes costs a few levels on average (tens at edges); a
  // missing or wrong cell costs tens on average.
  const size_t row_bytes = reference.size() / 3;
  std::vector<double> mean(3, 0.0);
  for (size_t i = 0; i < reference.size() && w2 == w && h2 == h; ++i)
    mean[i / row_bytes] += std::abs(int(reference[i]) - int(got[i])) / static_cast<double>(row_bytes);
  stbi_image_free(got);
  CAPTURE(mean[0]);
  CAPTURE(mean[1]);
  CHECK(mean[0] < 8.0);
  CHECK(mean[1] < 8.0);
  CHECK(mean[0] > 0.0);  // read back through the lossy codec, not recomputed
  CHECK(mean[2] == 0.0);  // made again by this run: exactly the earlier run's
}

// Several machines (docs/parallel.md, "Across machines"): each rank may
// keep the model and the prompt file at a path of its own. Emulated here
// by Open MPI's one-command-per-rank form, each rank given other copies:
// cp2 across the two "machines" gives the single process's latents
// exactly. A rank whose model differs (another model_index.json) still
// stops the job before the weights are read.
TEST_CASE("under mpirun each rank may read the model and the prompt file at a path of its own") {
  testing::TempDir tmp("first_nodes");
  for (const char* node : {"a", "b"}) {
    fs::create_directories(fs::path(tmp.path) / node);
    fs::copy(testing::fixture_dir("pixart_tiny"), fs::path(tmp.path) / node / "model", fs::copy_options::recursive);
    tmp.write(std::string(node) + "/prompts.txt", "a red circle\na blue square on the grass\n");
  }
  const std::string cfg = tmp.write("run.json", R"({
  "model": {"path": ")" + tmp.file("a/model") + R"(", "dtype": "float32"},
  "generate": {"height": 80, "width": 80, "max_sequence_length": 16, "seed": 10, "steps": 3,
               "guidance_scale": 4.5, "scheduler": "dpmpp_2m", "batch_size": 2},
  "output": {"path": ")" + tmp.file("out/m.png") + R"("}
})");
  const testing::Run one = run_ditgen("--config " + cfg + " --prompt-file " + tmp.file("a/prompts.txt") +
                                      " --save-latents " + tmp.file("one.safetensors") + " --output " +
                                      tmp.file("one/m.png") + " --quiet");
  REQUIRE_MESSAGE(one.code == 0, one.output);
  auto rank = [&](const char* node) {
    return std::string(" -np 1 -x OMP_NUM_THREADS=1 ") + DITGEN_EXE + " --device cpu --threads 1 --config " + cfg +
           " --set model.path=" + tmp.file(std::string(node) + "/model") + " --prompt-file " +
           tmp.file(std::string(node) + "/prompts.txt") + " --set parallel.cp=2 --save-latents " +
           tmp.file("two.safetensors") + " --output " + tmp.file("two/m.png") + " --quiet";
  };
  const std::string mpmd = std::string(DITGEN_MPIEXEC) + " --oversubscribe" + rank("a") + " :" + rank("b");
  const testing::Run two = testing::run_command(mpmd);
  REQUIRE_MESSAGE(two.code == 0, two.output);
  CHECK(read_file(tmp.file("two.safetensors")) == read_file(tmp.file("one.safetensors")));
  CHECK(fs::exists(tmp.file("two/m_0001.png")));
  // Another model on rank 1: the agreement fails, nothing written.
  std::ofstream(tmp.file("b/model/model_index.json"), std::ios::app) << "\n";
  fs::remove_all(tmp.file("two"));
  const testing::Run differs = testing::run_command(mpmd);
  CHECK(differs.code == 2);
  CHECK_MESSAGE(has(differs, "1 of 2 ranks read different work than rank 0"), differs.output);
  CHECK_FALSE(fs::exists(tmp.file("two/m_0000.png")));
}
