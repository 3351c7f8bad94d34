// Bad input around text-conditional models, through the ditgen executable
// (tests/fixtures/pixart_tiny, a PixArt model, and tests/fixtures/dit_odd, a
// class-conditional DiT): the conditioning that does not fit the model, a
// size the model cannot make, an unwritable output directory, and a model
// directory whose text encoder is missing, disagrees with the transformer or
// is corrupt. Each case: the exit code of docs/design.md §1 (2 for the config, 3
// for the model files), one message naming the field or the file, and
// nothing written: no output, no grid, no manifest, no temporary file.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../models/fixture.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

testing::Run run_ditgen(const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " --device cpu --threads 2 " + args);
}

// A small PixArt run of the fixture: 2 prompts at 80x80, 2 steps, a grid.
json pixart_config(const std::string& model, const std::string& out) {
  return {{"model", {{"path", model}, {"dtype", "float32"}}},
          {"generate",
           {{"prompts", {"a red circle", "a blue square"}},
            {"negative_prompt", ""},
            {"height", 80},
            {"width", 80},
            {"max_sequence_length", 16},
            {"seed", 0},
            {"steps", 2},
            {"guidance_scale", 4.5},
            {"scheduler", "dpmpp_2m"},
            {"batch_size", 2}}},
          {"output", {{"path", out}, {"format", "png"}, {"grid", true}}}};
}

// The same run on the class-conditional fixture.
json dit_config(const std::string& out) {
  return {{"model", {{"path", testing::fixture_dir("dit_odd")}, {"dtype", "float32"}}},
          {"generate", {{"class_labels", {1, 7}}, {"seed", 0}, {"steps", 2}, {"scheduler", "ddim"}}},
          {"output", {{"path", out}, {"format", "png"}, {"grid", true}}}};
}

std::string write_config(const testing::TempDir& dir, const json& config) {
  return dir.write("run.json", config.dump(2));
}

// Every file under `dir` (recursively), relative to it.
std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (!it->is_directory()) files.push_back(fs::relative(it->path(), dir).string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A copy of the PixArt fixture (without its reference/ outputs) to break.
std::string copy_pixart(const testing::TempDir& dir) {
  const fs::path to = dir.path / "pixart_tiny";
  fs::create_directories(to);
  for (const char* part : {"transformer", "vae", "scheduler", "text_encoder", "tokenizer"})
    fs::copy(fs::path(testing::fixture_dir("pixart_tiny")) / part, to / part, fs::copy_options::recursive);
  fs::copy_file(fs::path(testing::fixture_dir("pixart_tiny")) / "model_index.json", to / "model_index.json");
  return to.string();
}

// Runs `config` with its output in a fresh directory `out/`, and checks the
// exit code, that the message names every one of `names`, and that the
// output directory holds nothing afterwards (no image, grid, manifest or
// temporary file). `extra` is appended to the command line.
void expect_failure(const testing::TempDir& tmp, const json& config, int code, const std::vector<std::string>& names,
                    const std::string& extra = "") {
  const std::string cfg = write_config(tmp, config);
  const testing::Run r = run_ditgen("--config " + cfg + " --quiet " + extra);
  INFO("ditgen said: " << r.output);
  CHECK(r.code == code);
  for (const auto& n : names) CHECK_MESSAGE(has(r.output, n), "the message does not name '" << n << "'");
  // One line of diagnosis, not a stack of them.
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') <= 2);
  const fs::path out = tmp.path / "out";
  CHECK_MESSAGE(files_under(out).empty(), "left behind in out/: " << joined(files_under(out)));
  // Nothing beside the config and the model copy either (a temporary file
  // next to the config or the output directory).
  for (const auto& f : files_under(tmp.path))
    CHECK_MESSAGE((f == "run.json" || f.rfind("pixart_tiny/", 0) == 0), "unexpected file " << f);
}

}  // namespace

TEST_CASE("text bad input: prompts for a class-conditional model, exit 2 naming generate.class_labels") {
  testing::TempDir tmp("text_bad_prompts_for_dit");
  json c = dit_config(tmp.file("out/img.png"));
  c["generate"].erase("class_labels");
  c["generate"]["prompts"] = {"a red circle"};
  expect_failure(tmp, c, 2, {"run.json", "generate.class_labels", "class labels"});

  // --prompt on the command line, the config's class labels replaced: the same.
  testing::TempDir tmp2("text_bad_prompt_flag_for_dit");
  expect_failure(tmp2, dit_config(tmp2.file("out/img.png")), 2, {"generate.class_labels"}, "--prompt 'a red circle'");
}

// Issue 33: fields that do not apply to the run are errors naming the
// field, as unknown keys are; a class-label model reads no text.
TEST_CASE("text bad input: negative_prompt or max_sequence_length for a class-label model, exit 2 naming it") {
  testing::TempDir tmp("text_bad_negative_for_dit");
  json c = dit_config(tmp.file("out/img.png"));
  c["generate"]["negative_prompt"] = "";
  expect_failure(tmp, c, 2, {"run.json", "generate.negative_prompt", "class-conditional"});
  testing::TempDir tmp2("text_bad_max_length_for_dit");
  expect_failure(tmp2, dit_config(tmp2.file("out/img.png")), 2, {"generate.max_sequence_length", "reads no text"},
                 "--set generate.max_sequence_length=77");
  testing::TempDir tmp3("text_bad_negative_flag_for_dit");
  expect_failure(tmp3, dit_config(tmp3.file("out/img.png")), 2, {"generate.negative_prompt"},
                 "--negative-prompt blurry");
}

TEST_CASE("text bad input: class labels for a text model, exit 2 naming generate.prompts") {
  testing::TempDir tmp("text_bad_labels_for_pixart");
  json c = pixart_config(testing::fixture_dir("pixart_tiny"), tmp.file("out/img.png"));
  c["generate"].erase("prompts");
  c["generate"]["class_labels"] = {1};
  expect_failure(tmp, c, 2, {"run.json", "generate.prompts", "text-conditional"});

  // Both in one config: rejected by the config's own rule, before the model is read.
  testing::TempDir tmp2("text_bad_labels_and_prompts");
  json both = pixart_config(testing::fixture_dir("pixart_tiny"), tmp2.file("out/img.png"));
  both["generate"]["class_labels"] = {1};
  expect_failure(tmp2, both, 2, {"generate.prompts", "generate.class_labels"});
}

// Issue 36: an empty prompt (in the config or from --prompt) and an empty
// prompt list are exit 2 naming generate.prompts, nothing written.
TEST_CASE("text bad input: an empty prompt or an empty prompt list, exit 2 naming generate.prompts") {
  testing::TempDir tmp("text_bad_empty_prompt");
  json c = pixart_config(testing::fixture_dir("pixart_tiny"), tmp.file("out/img.png"));
  c["generate"]["prompts"] = {"a red circle", "   "};
  expect_failure(tmp, c, 2, {"run.json", "generate.prompts[1]", "only whitespace"});

  testing::TempDir tmp2("text_bad_empty_prompt_flag");
  expect_failure(tmp2, pixart_config(testing::fixture_dir("pixart_tiny"), tmp2.file("out/img.png")), 2,
                 {"generate.prompts[0]", "the prompt is empty"}, "--prompt ''");

  testing::TempDir prompts("text_bad_empty_prompt_jsonl_file"), tmp4("text_bad_empty_prompt_jsonl");
  prompts.write("p.jsonl", "{\"prompt\": \"a red circle\"}\n{\"prompt\": \" \"}\n");
  expect_failure(tmp4, pixart_config(testing::fixture_dir("pixart_tiny"), tmp4.file("out/img.png")), 2,
                 {"p.jsonl:2: prompt: the prompt is only whitespace"}, "--prompt-file " + prompts.file("p.jsonl"));

  testing::TempDir tmp3("text_bad_empty_prompt_list");
  json none = pixart_config(testing::fixture_dir("pixart_tiny"), tmp3.file("out/img.png"));
  none["generate"]["prompts"] = json::array();
  expect_failure(tmp3, none, 2, {"generate.prompts", "at least one prompt"});
}

TEST_CASE("text bad input: a PixArt size that is not a multiple of patch x VAE factor, exit 2 naming height/width") {
  // pixart_tiny: patch 2, VAE factor 8, so sizes are multiples of 16.
  for (const auto& [h, w] : std::vector<std::pair<int, int>>{{72, 80}, {80, 88}, {84, 84}}) {
    CAPTURE(h);
    CAPTURE(w);
    testing::TempDir tmp("text_bad_size");
    json c = pixart_config(testing::fixture_dir("pixart_tiny"), tmp.file("out/img.png"));
    c["generate"]["height"] = h;
    c["generate"]["width"] = w;
    expect_failure(tmp, c, 2, {"run.json", "generate.height/width"});
  }
}

TEST_CASE("text bad input: an output directory that cannot be written, exit 2, nothing written") {
  testing::TempDir tmp("text_bad_output_dir");
  // out/ is a regular file: out/img.png can be neither created nor written.
  tmp.write("out", "not a directory");
  const std::string cfg = write_config(tmp, pixart_config(testing::fixture_dir("pixart_tiny"), tmp.file("out/img.png")));
  const testing::Run r = run_ditgen("--config " + cfg + " --quiet");
  INFO("ditgen said: " << r.output);
  CHECK(r.code == 2);
  CHECK(has(r.output, "output.path"));
  CHECK(has(r.output, tmp.file("out")));
  CHECK(files_under(tmp.path) == std::vector<std::string>{"out", "run.json"});
  std::ifstream f(tmp.file("out"));
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK(ss.str() == "not a directory");
}

TEST_CASE("text bad input: a text model without text_encoder/, exit 3 naming text_encoder/config.json") {
  testing::TempDir tmp("text_bad_no_encoder");
  const std::string model = copy_pixart(tmp);
  fs::remove_all(fs::path(model) / "text_encoder");
  expect_failure(tmp, pixart_config(model, tmp.file("out/img.png")), 3, {"text_encoder/config.json"});
}

TEST_CASE("text bad input: caption_channels that disagree with the encoder's d_model, exit 3 naming both") {
  testing::TempDir tmp("text_bad_caption_channels");
  const std::string model = copy_pixart(tmp);
  const fs::path config = fs::path(model) / "transformer" / "config.json";
  json t = json::parse(std::ifstream(config));
  REQUIRE(t["caption_channels"] == 40);
  t["caption_channels"] = 48;
  std::ofstream(config) << t.dump(2);
  expect_failure(tmp, pixart_config(model, tmp.file("out/img.png")), 3,
                 {"transformer/config.json", "caption_channels 48", "d_model 40", "text_encoder"});
}

TEST_CASE("text bad input: a corrupt text_encoder safetensors file, exit 3 naming the file") {
  const std::string file_name = "text_encoder/model.safetensors";
  SUBCASE("truncated (an interrupted download)") {
    testing::TempDir tmp("text_bad_encoder_truncated");
    const std::string model = copy_pixart(tmp);
    const fs::path weights = fs::path(model) / file_name;
    fs::resize_file(weights, fs::file_size(weights) / 2);
    expect_failure(tmp, pixart_config(model, tmp.file("out/img.png")), 3, {file_name});
  }
  SUBCASE("not a safetensors file at all") {
    testing::TempDir tmp("text_bad_encoder_garbage");
    const std::string model = copy_pixart(tmp);
    std::ofstream(fs::path(model) / file_name, std::ios::binary | std::ios::trunc)
        << "<html>404 Not Found</html>\n";
    expect_failure(tmp, pixart_config(model, tmp.file("out/img.png")), 3, {file_name});
  }
}
