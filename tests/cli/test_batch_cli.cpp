// Batch generation from the command line (docs/design.md §1-2: prompt_file,
// --prompt-file, --resume / output.skip_existing, the manifest), on the
// tiny PixArt fixture. Every check holds a batch against something made
// another way: each output against the same prompt run alone with its own
// seed (decoded pixels), a killed and resumed batch against an
// uninterrupted one (file bytes), the manifest against the directory
// listing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../io/stb_image_read.h"
#include "../models/fixture.h"
#include "interrupt.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The fixture's 4-step DPM-Solver++ config on the tiny PixArt model, with
// its outputs at `out`; batch_size 2, so six prompts make three model batches.
std::string batch_config(const testing::TempDir& tmp, const std::string& out, const std::string& generate_extra = "") {
  return tmp.write("run.json", R"({
  "model": {"path": ")" + testing::fixture_dir("pixart_tiny") + R"(", "dtype": "float32"},
  "generate": {"height": 80, "width": 80, "max_sequence_length": 16, "seed": 10, "steps": 4,
               "guidance_scale": 4.5, "scheduler": "dpmpp_2m", "batch_size": 2)" + generate_extra + R"(},
  "output": {"path": ")" + out + R"("}
})");
}

const std::vector<std::string> kPrompts = {"a red circle", "a blue square on the grass", "A Cat walking",
                                           "a green star", "a yellow cross", "a magenta triangle"};

std::string prompt_text_file(const testing::TempDir& tmp) {
  std::string text = "# six prompts, one per line\n\n";
  for (const auto& p : kPrompts) text += p + "\n";
  return tmp.write("prompts.txt", text);
}

testing::Run run_ditgen(const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " --device cpu --threads 2 " + args);
}

std::vector<uint8_t> pixels(const fs::path& path) {
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(path.string().c_str(), &w, &h, &n, 3);
  REQUIRE_MESSAGE(px, path);
  std::vector<uint8_t> out(px, px + static_cast<size_t>(w) * h * 3);
  stbi_image_free(px);
  return out;
}

// The largest difference of two same-size 8-bit images. A prompt run alone
// and in a batch agree to float rounding (a GEMM's last bits depend on its
// row count), so a decoded pixel may differ by one step; a wrong seed,
// prompt or negative prompt differs by tens.
int max_pixel_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(int(a[i]) - int(b[i])));
  return worst;
}

std::vector<json> manifest_lines(const fs::path& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

// The PNG files under `dir`, sorted.
std::vector<std::string> pngs_in(const fs::path& dir) {
  std::vector<std::string> files;
  if (!fs::exists(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".png") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The manifest says what is on disk: one line per output, its files exist,
// and every PNG in the directory is in exactly one line.
void check_manifest_matches_disk(const fs::path& dir, const fs::path& manifest) {
  std::vector<std::string> listed;
  std::map<int, int> lines_per_index;
  for (const json& line : manifest_lines(manifest)) {
    ++lines_per_index[line.at("index").get<int>()];
    for (const auto& f : line.at("files")) {
      CHECK_MESSAGE(fs::exists(f.get<std::string>()), f);
      listed.push_back(f.get<std::string>());
    }
  }
  for (const auto& [index, count] : lines_per_index) CHECK_MESSAGE(count == 1, "output " << index);
  std::sort(listed.begin(), listed.end());
  CHECK(listed == pngs_in(dir));
}

}  // namespace

TEST_CASE("a text prompt file: one output per line, each the prompt's own run with its seed, a manifest") {
  testing::TempDir tmp("batch_text");
  const std::string cfg = batch_config(tmp, tmp.file("out/b.png"));
  const testing::Run r = run_ditgen("--config " + cfg + " --prompt-file " + prompt_text_file(tmp));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  // One model load: the text encoder ran once, for every prompt.
  size_t encoder_runs = 0;
  for (size_t at = r.output.find("text encoder"); at != std::string::npos; at = r.output.find("text encoder", at + 1))
    ++encoder_runs;
  CHECK(encoder_runs == 1);
  const std::vector<json> lines = manifest_lines(tmp.file("out/b_manifest.jsonl"));
  REQUIRE(lines.size() == kPrompts.size());
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    CAPTURE(i);
    CHECK(lines[i].at("index") == i);
    CHECK(lines[i].at("prompt") == kPrompts[i]);
    CHECK(lines[i].at("line") == i + 3);  // after the comment and the blank line
    CHECK(lines[i].at("seed") == 10 + i);
    CHECK(lines[i].at("steps") == 4);
    CHECK(lines[i].at("seconds").get<double>() >= 0.0);
  }
  check_manifest_matches_disk(tmp.file("out"), tmp.file("out/b_manifest.jsonl"));
  // Outputs 1 and 4 alone, each with its own seed: the same pixels.
  for (const int i : {1, 4}) {
    CAPTURE(i);
    const std::string alone = tmp.file("alone_" + std::to_string(i) + ".png");
    const testing::Run a = run_ditgen("--config " + cfg + " --prompt '" + kPrompts[static_cast<size_t>(i)] +
                                      "' --seed " + std::to_string(10 + i) + " --output " + alone + " --quiet");
    REQUIRE_MESSAGE(a.code == 0, a.output);
    CHECK(max_pixel_diff(pixels(alone), pixels(tmp.file("out/b_000" + std::to_string(i) + ".png"))) <= 1);
    // A neighbour's seed is far off: the check can fail.
    CHECK(max_pixel_diff(pixels(alone), pixels(tmp.file("out/b_000" + std::to_string(i - 1) + ".png"))) > 8);
  }
}

TEST_CASE("a JSONL prompt file: each line's seed, negative prompt and file name") {
  testing::TempDir tmp("batch_jsonl");
  const std::string file = tmp.write("p.jsonl", R"({"prompt": "a red circle", "name": "circle"}
{"prompt": "a blue square", "seed": 77, "negative_prompt": "blurry"}
# a comment line
{"prompt": "a green star"}
)");
  const std::string cfg = batch_config(tmp, tmp.file("out/j.png"), R"(, "prompt_file": ")" + file + R"(")");
  const testing::Run r = run_ditgen("--config " + cfg + " --quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(fs::exists(tmp.file("out/circle.png")));
  CHECK(fs::exists(tmp.file("out/j_0001.png")));
  CHECK(fs::exists(tmp.file("out/j_0002.png")));
  const std::vector<json> lines = manifest_lines(tmp.file("out/j_manifest.jsonl"));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].at("seed") == 10);
  CHECK(lines[1].at("seed") == 77);
  CHECK(lines[1].at("negative_prompt") == "blurry");
  CHECK(lines[2].at("seed") == 12);  // seed + its index, whatever line 2 says
  CHECK(lines[2].at("line") == 4);
  CHECK(read_file(tmp.file("out/j_0001.png")).find("a blue square\nNegative prompt: blurry\n") != std::string::npos);
  check_manifest_matches_disk(tmp.file("out"), tmp.file("out/j_manifest.jsonl"));
  // Line 2 alone, with its seed and negative prompt: the same pixels; the
  // other outputs' negative ("") did not leak into it, nor its into them.
  const testing::Run a = run_ditgen("--config " + cfg + " --prompt 'a blue square' --negative-prompt blurry --seed 77 "
                                    "--output " + tmp.file("alone.png") + " --quiet");
  REQUIRE_MESSAGE(a.code == 0, a.output);
  CHECK(max_pixel_diff(pixels(tmp.file("alone.png")), pixels(tmp.file("out/j_0001.png"))) <= 1);
  const testing::Run b = run_ditgen("--config " + cfg + " --prompt 'a green star' --seed 12 --output " +
                                    tmp.file("star.png") + " --quiet");
  REQUIRE_MESSAGE(b.code == 0, b.output);
  CHECK(max_pixel_diff(pixels(tmp.file("star.png")), pixels(tmp.file("out/j_0002.png"))) <= 1);
}

TEST_CASE("prompt file errors: the file and line, exit 2, nothing generated") {
  testing::TempDir tmp("batch_bad");
  const std::string out = tmp.file("out/x.png");
  struct Case {
    const char* file;
    const char* text;
    const char* message;
  };
  for (const Case& c : {
           Case{"bad.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": \"ok\"}\n{\"prompt\": 3}\n",
                "bad.jsonl:3: prompt: expected a string"},
           Case{"key.jsonl", "{\"prompt\": \"ok\", \"text\": \"x\"}\n", "key.jsonl:1: unknown key \"text\""},
           Case{"json.jsonl", "{\"prompt\": \"ok\"}\n{\"prompt\": \n", "json.jsonl:2: invalid JSON"},
           Case{"utf8.txt", "fine\nbad \xff byte\n", "utf8.txt:2: invalid UTF-8"},
           Case{"empty.txt", "# nothing\n\n", "empty.txt: no prompts"},
           Case{"names.jsonl", "{\"prompt\": \"a\", \"name\": \"x\"}\n{\"prompt\": \"b\", \"name\": \"x\"}\n",
                "names.jsonl:2: name: \"x\" is line 1's name too"},
           Case{"frames.jsonl", "{\"prompt\": \"a\", \"frames\": 4}\n",
                "frames.jsonl:1: frames: this is an image model"},
       }) {
    CAPTURE(c.file);
    const std::string file = tmp.write(c.file, c.text);
    const testing::Run r = run_ditgen("--config " + batch_config(tmp, out) + " --prompt-file " + file);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find(c.message) != std::string::npos, r.output);
    CHECK_FALSE(fs::exists(tmp.file("out")));
  }
  // A name equal to another output's numbered file.
  const std::string clash = tmp.write("clash.jsonl", "{\"prompt\": \"a\", \"name\": \"x_0001\"}\n{\"prompt\": \"b\"}\n");
  testing::Run c = run_ditgen("--config " + batch_config(tmp, out) + " --prompt-file " + clash);
  CHECK(c.code == 2);
  CHECK_MESSAGE(c.output.find("x_0001.png: outputs 0 and 1 would both write this file") != std::string::npos, c.output);
  CHECK(pngs_in(tmp.file("out")).empty());
  // A missing file, and both prompt sources in the config.
  testing::Run r = run_ditgen("--config " + batch_config(tmp, out) + " --prompt-file " + tmp.file("nope.txt"));
  CHECK(r.code == 2);
  CHECK(r.output.find("nope.txt: cannot read the prompt file") != std::string::npos);
  const std::string file = tmp.write("ok.txt", "a cat\n");
  r = run_ditgen("--config " + batch_config(tmp, out, R"(, "prompts": ["x"], "prompt_file": ")" + file + R"(")"));
  CHECK(r.code == 2);
  CHECK(r.output.find("generate.prompt_file: give generate.prompts or generate.prompt_file, not both") !=
        std::string::npos);
  // A class-conditional model has no use for prompts.
  const std::string dit = tmp.write("dit.json", R"({
  "model": {"path": ")" + testing::fixture_dir("dit_odd") + R"("},
  "generate": {"class_labels": [1], "steps": 2},
  "output": {"path": ")" + out + R"("}
})");
  r = run_ditgen("--config " + dit + " --prompt-file " + file);
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find("generate.prompt_file: a dit model is class-conditional") != std::string::npos, r.output);
  CHECK(pngs_in(tmp.file("out")).empty());
}

// The issue's scenario: a batch stopped by SIGTERM part-way and started
// again with --resume makes only what is missing, and every file equals
// the uninterrupted run's byte for byte (its noise depends on its own seed
// only, whatever ran before it in the process).
TEST_CASE("a batch killed part-way and resumed gives the uninterrupted run's files, byte for byte") {
  testing::TempDir tmp("batch_resume");
  const std::string cfg = batch_config(tmp, tmp.file("out/r.png"));
  const std::string prompts = prompt_text_file(tmp);
  const testing::Run whole = run_ditgen("--config " + cfg + " --prompt-file " + prompts + " --quiet");
  REQUIRE_MESSAGE(whole.code == 0, whole.output);
  std::map<std::string, std::string> reference;
  for (const auto& f : pngs_in(tmp.file("out"))) reference[f] = read_file(f);
  REQUIRE(reference.size() == kPrompts.size());
  fs::remove_all(tmp.file("out"));

  // Stopped while output 3 (the second model batch's second output) is
  // being written: 0-2 have landed with their manifest lines.
  const std::string fourth = tmp.file("out/r_0003.png");
  const testing::Interrupted stop = testing::interrupt_in_write(
      DITGEN_EXE, {"--device", "cpu", "--threads", "2", "--config", cfg, "--prompt-file", prompts, "--quiet"}, SIGTERM,
      [&](const std::string& temp) { return temp.rfind(fourth + ".tmp.", 0) == 0; }, 1.5);
  INFO("ditgen stderr: " << stop.stderr_text);
  REQUIRE_MESSAGE(!stop.temp.empty(), "the write of output 3 was never reached");
  CHECK(stop.exit_code == 143);
  // What is kept, said on stderr (issue 36).
  CHECK(stop.stderr_text.find("interrupted by SIGTERM during decode and write: 3 of 6 outputs are finished and "
                              "kept, listed in " + tmp.file("out/r_manifest.jsonl") +
                              "; run again with --resume to make the rest") != std::string::npos);
  CHECK(pngs_in(tmp.file("out")).size() == 3);
  CHECK(manifest_lines(tmp.file("out/r_manifest.jsonl")).size() == 3);
  check_manifest_matches_disk(tmp.file("out"), tmp.file("out/r_manifest.jsonl"));

  const testing::Run resumed = run_ditgen("--config " + cfg + " --prompt-file " + prompts + " --resume");
  REQUIRE_MESSAGE(resumed.code == 0, resumed.output);
  CHECK(resumed.output.find("3 of 6 outputs already on disk") != std::string::npos);
  CHECK(resumed.output.find("made 3 images in") != std::string::npos);
  for (const auto& [file, bytes] : reference) {
    CAPTURE(file);
    CHECK(read_file(file) == bytes);
  }
  check_manifest_matches_disk(tmp.file("out"), tmp.file("out/r_manifest.jsonl"));
  CHECK(manifest_lines(tmp.file("out/r_manifest.jsonl")).size() == kPrompts.size());

  // Resumed again with one file deleted: only that output is made (the
  // manifest drops its stale line and gains a fresh one), same bytes.
  fs::remove(tmp.file("out/r_0001.png"));
  const testing::Run again = run_ditgen("--config " + cfg + " --prompt-file " + prompts + " --resume");
  REQUIRE_MESSAGE(again.code == 0, again.output);
  CHECK(again.output.find("made 1 image in") != std::string::npos);
  CHECK(read_file(tmp.file("out/r_0001.png")) == reference[tmp.file("out/r_0001.png")]);
  check_manifest_matches_disk(tmp.file("out"), tmp.file("out/r_manifest.jsonl"));
  // Nothing left: nothing made, nothing rewritten.
  const testing::Run done = run_ditgen("--config " + cfg + " --prompt-file " + prompts + " --resume");
  REQUIRE_MESSAGE(done.code == 0, done.output);
  CHECK(done.output.find("nothing to make") != std::string::npos);
}

// A signal after an output's file is renamed into place but before its
// manifest line is written is held until the line is there.
TEST_CASE("a signal between an output's rename and its manifest line leaves both") {
  testing::TempDir tmp("batch_landing");
  const std::string cfg = batch_config(tmp, tmp.file("out/l.png"));
  // The first manifest line is written atomically (temporary + rename), so
  // the pause hook stops there, after output 0's PNG has landed.
  const std::string manifest = tmp.file("out/l_manifest.jsonl");
  const testing::Interrupted stop = testing::interrupt_in_write(
      DITGEN_EXE, {"--device", "cpu", "--config", cfg, "--prompt-file", prompt_text_file(tmp), "--quiet"}, SIGINT,
      [&](const std::string& temp) { return temp.rfind(manifest + ".tmp.", 0) == 0; }, 2);
  INFO("ditgen stderr: " << stop.stderr_text);
  REQUIRE(!stop.temp.empty());
  CHECK(stop.exit_code == 130);
  CHECK_FALSE(fs::exists(stop.temp));
  REQUIRE(manifest_lines(manifest).size() == 1);
  CHECK(pngs_in(tmp.file("out")) == std::vector<std::string>{tmp.file("out/l_0000.png")});
  check_manifest_matches_disk(tmp.file("out"), manifest);
}

TEST_CASE("--text-cache: a second run reads every prompt from the cache, the same files") {
  testing::TempDir tmp("batch_cache");
  const std::string prompts = prompt_text_file(tmp);
  const std::string plain = batch_config(tmp, tmp.file("plain/p.png"));
  REQUIRE(run_ditgen("--config " + plain + " --prompt-file " + prompts + " --quiet").code == 0);
  for (const char* run : {"first", "second"}) {
    CAPTURE(run);
    const testing::Run r = run_ditgen("--config " + plain + " --prompt-file " + prompts + " --output " +
                                      tmp.file(std::string(run) + "/p.png") + " --text-cache " + tmp.file("cache") +
                                      " --quiet");
    REQUIRE_MESSAGE(r.code == 0, r.output);
    CHECK(r.output.find("warning") == std::string::npos);
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      const std::string name = "/p_000" + std::to_string(i) + ".png";
      CHECK(pixels(tmp.file(run + name)) == pixels(tmp.file("plain" + name)));
    }
  }
  // Six prompts and the negative: seven entries.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.file("cache"))) entries += e.path().extension() == ".safetensors";
  CHECK(entries == 7);
}

// Under mpirun every rank reads the prompt file and agrees with rank 0 on
// the outputs to make; rank 0 alone writes them and the manifest. cp2
// splits the CFG halves: the pixels match the single process to rounding.
TEST_CASE("a prompt file batch under mpirun cp2: one writer, the single process's images, resume") {
  testing::TempDir tmp("batch_mpi");
  const std::string prompts = prompt_text_file(tmp);
  const std::string cfg = batch_config(tmp, tmp.file("one/m.png"));
  REQUIRE(run_ditgen("--config " + cfg + " --prompt-file " + prompts + " --quiet").code == 0);
  const std::string mpi = std::string(DITGEN_MPIEXEC) + " --oversubscribe -np 2 -x OMP_NUM_THREADS=1 " + DITGEN_EXE +
                          " --device cpu --threads 1 --config " + cfg + " --prompt-file " + prompts +
                          " --set parallel.cp=2 --output " + tmp.file("two/m.png");
  testing::Run r = testing::run_command(mpi + " --quiet");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const std::vector<json> lines = manifest_lines(tmp.file("two/m_manifest.jsonl"));
  CHECK(lines.size() == kPrompts.size());  // one writer: no line twice
  check_manifest_matches_disk(tmp.file("two"), tmp.file("two/m_manifest.jsonl"));
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const std::string name = "/m_000" + std::to_string(i) + ".png";
    CHECK(max_pixel_diff(pixels(tmp.file("one" + name)), pixels(tmp.file("two" + name))) <= 1);
  }
  // Resumed under mpirun with two outputs gone: both ranks make exactly those.
  const std::string before = read_file(tmp.file("two/m_0005.png"));
  fs::remove(tmp.file("two/m_0000.png"));
  fs::remove(tmp.file("two/m_0005.png"));
  r = testing::run_command(mpi + " --resume");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("4 of 6 outputs already on disk") != std::string::npos);
  CHECK(read_file(tmp.file("two/m_0005.png")) == before);
  check_manifest_matches_disk(tmp.file("two"), tmp.file("two/m_manifest.jsonl"));
}

// The README's example batch (scripts/batch_example/), run from the
// repository root as documented, at 2 steps; the default model's batch
// config is checked by `plan` (its class labels against the model).
TEST_CASE("the scripts/batch_example configs run from the repository root") {
  testing::TempDir tmp("batch_example");
  const std::string root = DITGEN_SOURCE_DIR;
  testing::Run r = testing::run_command("cd " + root + " && " + DITGEN_EXE +
                                        " --device cpu --threads 2 --config scripts/batch_example/pixart_tiny_batch.json"
                                        " --steps 2 --quiet --output " + tmp.file("x/pixart.png"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  for (const char* name : {"red_circle", "blue_square", "cat", "star", "green_triangle", "magenta_cross", "two_shapes",
                           "dog"})
    CHECK_MESSAGE(fs::exists(tmp.file(std::string("x/") + name + ".png")), name);
  CHECK(manifest_lines(tmp.file("x/pixart_manifest.jsonl")).size() == 8);
  r = testing::run_command("cd " + root + " && " + DITGEN_EXE +
                           " --device cpu --config scripts/batch_example/pixart_tiny_batch.json --steps 2 --quiet"
                           " --prompt-file scripts/batch_example/prompts.txt --output " + tmp.file("y/t.png"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(pngs_in(tmp.file("y")).size() == 5 + 1);  // and the contact sheet
  r = testing::run_command("cd " + root + " && " + DITGEN_EXE +
                           " plan --config scripts/batch_example/shapes_image_batch.json");
  CHECK_MESSAGE(r.code == 0, r.output);
  // The default video model's example: eight named MP4s.
  r = testing::run_command("cd " + root + " && " + DITGEN_EXE +
                           " --device cpu --threads 2 --config scripts/batch_example/default_video_batch.json"
                           " --steps 2 --quiet --output " + tmp.file("v/video.mp4"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  for (const char* name : {"red_circle_left", "red_circle_right", "yellow_square_up", "green_triangle_down",
                           "cyan_star_growing", "blue_cross_shrinking", "magenta_circle_left", "blue_star_right"})
    CHECK_MESSAGE(fs::exists(tmp.file(std::string("v/") + name + ".mp4")), name);
  CHECK(manifest_lines(tmp.file("v/video_manifest.jsonl")).size() == 8);
}

// A rank that read other work (the test hook stands for a different prompt
// file on that rank's node) stops the job with exit 2 before the weights
// are loaded: nothing is written.
TEST_CASE("under mpirun a rank whose batch differs from rank 0's stops the job, exit 2, nothing written") {
  testing::TempDir tmp("batch_mpi_differs");
  const std::string cmd = std::string(DITGEN_MPIEXEC) + " --oversubscribe -np 2 -x OMP_NUM_THREADS=1 " +
                          "-x DITGEN_TEST_WORK_DIFFERS_ON_RANK=1 " + DITGEN_EXE + " --device cpu --threads 1 --config " +
                          batch_config(tmp, tmp.file("out/d.png")) + " --prompt-file " + prompt_text_file(tmp) +
                          " --set parallel.cp=2 --quiet";
  const testing::Run r = testing::run_command(cmd);
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.output.find("1 of 2 ranks read different work than rank 0") != std::string::npos, r.output);
  CHECK(pngs_in(tmp.file("out")).empty());
  CHECK_FALSE(fs::exists(tmp.file("out/d_manifest.jsonl")));
}
