// What a model folder does with input images (pipeline/video_task.h), told
// by its config files, on the committed tiny pipelines of every kind
// (scripts/fixtures/make_wan_i2v_pipeline_fixtures.py, make_wan_fixtures.py);
// the bad-input rules of the image-to-video issue on each kind; each
// output's images read, hashed and named in errors
// (pipeline/input_images.h); the frame size the images give.
#include <doctest/doctest.h>

#include <string>

#include "config/config.h"
#include "pipeline/input_images.h"
#include "pipeline/video_task.h"
#include "../models/fixture.h"
#include "../temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::pipeline;

namespace {

VideoKind kind_of(const std::string& fixture) { return read_video_kind(testing::fixture_dir(fixture)); }

std::string input(const std::string& name) { return testing::fixture_dir("wan_i2v_inputs") + "/" + name; }

// The message of check_image_fields, "" when it passes.
std::string image_rule(const VideoKind& kind, bool image, bool last) {
  try {
    check_image_fields(kind, image, last, "run.json", "generate.image", "generate.last_image", "m");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

RunConfig run_config(const std::string& fixture, const std::string& image, const std::string& last,
                     int outputs = 1) {
  RunConfig c;
  c.model.path = testing::fixture_dir(fixture);
  c.generate.image = image;
  c.generate.last_image = last;
  for (int i = 0; i < outputs; ++i) c.generate.prompts.push_back("a cat");
  return c;
}

std::string read_error(const RunConfig& c, const std::vector<config::PromptEntry>& entries, const VideoKind& kind) {
  try {
    read_run_images(c, entries, entries.empty() ? c.generate.num_outputs() : static_cast<int64_t>(entries.size()),
                    kind, "run.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("video task: each tiny pipeline's kind from model_index.json and transformer/config.json") {
  CHECK(kind_of("wan_tiny").task == VideoTask::kTextToVideo);
  CHECK(kind_of("wan22_tiny").task == VideoTask::kTextToVideo);
  CHECK(kind_of("wan_i2v_tiny").task == VideoTask::kImageToVideoClip);
  CHECK(kind_of("wan_flf2v_tiny").task == VideoTask::kFirstLastFrame);
  CHECK(kind_of("wan22_i2v_tiny").task == VideoTask::kImageToVideo);
  const VideoKind ti2v = kind_of("wan22_ti2v_tiny");
  CHECK(ti2v.task == VideoTask::kTextImageToVideo);
  CHECK(ti2v.expand_timesteps);
  CHECK(ti2v.pipeline_class == "WanPipeline");
  CHECK(kind_of("pixart_tiny").task == VideoTask::kNoImage);
  CHECK(kind_of("wan_i2v_tiny").patch == 2);
  CHECK(kind_of("wan_i2v_tiny").image_encoder());
  CHECK_FALSE(kind_of("wan22_i2v_tiny").image_encoder());
}

TEST_CASE("video task: from the files' values (no transformer config, a mistyped key, TI2V loaded as I2V)") {
  const nlohmann::json i2v = {{"_class_name", "WanImageToVideoPipeline"}, {"expand_timesteps", false}};
  CHECK(video_kind(i2v, "mi.json", nullptr, "t.json").task == VideoTask::kImageToVideo);
  const nlohmann::json expand = {{"_class_name", "WanImageToVideoPipeline"}, {"expand_timesteps", true}};
  CHECK(video_kind(expand, "mi.json", nullptr, "t.json").task == VideoTask::kTextImageToVideo);
  const nlohmann::json flf = {{"image_dim", 1280}, {"pos_embed_seq_len", 514}, {"patch_size", {1, 2, 2}}};
  CHECK(video_kind(i2v, "mi.json", &flf, "t.json").task == VideoTask::kFirstLastFrame);
  const nlohmann::json bad = {{"image_dim", "1280"}};
  CHECK_THROWS_WITH_AS(video_kind(i2v, "mi.json", &bad, "t.json"), doctest::Contains("t.json: image_dim"), ModelError);
  const nlohmann::json bad_patch = {{"patch_size", 2}};
  CHECK_THROWS_WITH_AS(video_kind(i2v, "mi.json", &bad_patch, "t.json"), doctest::Contains("t.json: patch_size"),
                       ModelError);
  const nlohmann::json bad_expand = {{"_class_name", "WanPipeline"}, {"expand_timesteps", "yes"}};
  CHECK_THROWS_AS(video_kind(bad_expand, "mi.json", nullptr, "t.json"), ModelError);
}

TEST_CASE("video task: the bad-input rules on every kind") {
  const VideoKind t2v = kind_of("wan_tiny"), i2v = kind_of("wan_i2v_tiny"), flf = kind_of("wan_flf2v_tiny"),
                  a14b = kind_of("wan22_i2v_tiny"), ti2v = kind_of("wan22_ti2v_tiny"), image = kind_of("pixart_tiny");
  // An image for a model that takes none.
  CHECK(contains(image_rule(t2v, true, false), "run.json: generate.image: m is a text-to-video model"));
  CHECK(contains(image_rule(t2v, true, false), "WanPipeline"));
  CHECK(contains(image_rule(image, true, false), "takes no input image"));
  // A last image for a model without first-last-frame.
  for (const VideoKind& k : {i2v, a14b, ti2v})
    CHECK(contains(image_rule(k, true, true), "generate.last_image: m is"));
  CHECK(contains(image_rule(t2v, false, true), "generate.last_image"));
  // No image for an image-to-video model; a first-last-frame model needs both.
  for (const VideoKind& k : {i2v, a14b, flf}) CHECK(contains(image_rule(k, false, false), "generate.image: required"));
  CHECK(contains(image_rule(flf, true, false), "generate.last_image: required"));
  // What each takes.
  CHECK(image_rule(t2v, false, false).empty());
  CHECK(image_rule(image, false, false).empty());
  CHECK(image_rule(ti2v, false, false).empty());  // TI2V-5B as text-to-video
  CHECK(image_rule(ti2v, true, false).empty());
  CHECK(image_rule(i2v, true, false).empty());
  CHECK(image_rule(a14b, true, false).empty());
  CHECK(image_rule(flf, true, true).empty());
}

TEST_CASE("input images: read once, hashed, per output from the config or its JSONL line") {
  const VideoKind flf = kind_of("wan_flf2v_tiny");
  const RunImages run = read_run_images(run_config("wan_flf2v_tiny", input("first.png"), input("last.png"), 2), {}, 2,
                                        flf, "run.json");
  REQUIRE(run.outputs.size() == 2u);
  CHECK(run.outputs[0].image == run.outputs[1].image);  // one file read once
  CHECK(run.outputs[0].image->image.rgb.width == 44);
  CHECK(run.outputs[0].image->image.rgb.height == 40);
  // sha256sum tests/fixtures/wan_i2v_inputs/*.png
  const nlohmann::json meta = image_metadata(run.outputs[1]);
  CHECK(meta["image"] == input("first.png"));
  CHECK(meta["image_sha256"] == "9da29ebca14d4610eaa8aef12b7912089e6c99c0b723629072f1e49d011d692c");
  CHECK(meta["last_image"] == input("last.png"));
  CHECK(meta["last_image_sha256"] == "ee5c3d2cc61b6eeffcc2a8b30dae4086563514d0844d3ac324b61fdee311df1f");

  // A JSONL line's image replaces the config's for that output only.
  RunConfig c = run_config("wan_i2v_tiny", input("first.png"), "", 0);
  c.generate.prompt_file = "p.jsonl";
  config::PromptEntry a, b;
  a.prompt = b.prompt = "a cat";
  a.line = 1;
  b.line = 2;
  b.image = input("last.png");
  const RunImages lines = read_run_images(c, {a, b}, 2, kind_of("wan_i2v_tiny"), "run.json");
  CHECK(lines.outputs[0].image->path == input("first.png"));
  CHECK(lines.outputs[1].image->path == input("last.png"));
  CHECK(lines.outputs[1].line == 2);
  // No image anywhere for an image-to-video model: the line is named.
  c.generate.image.clear();
  CHECK(contains(read_error(c, {a, b}, kind_of("wan_i2v_tiny")), "p.jsonl:1: image: required"));
  // A text-to-video run: no images, nothing read.
  CHECK_FALSE(read_run_images(run_config("wan_tiny", "", ""), {}, 1, kind_of("wan_tiny"), "run.json").any());
}

TEST_CASE("input images: unreadable files are exit 2 naming the field and the file") {
  const testing::TempDir tmp("input_images");
  const VideoKind i2v = kind_of("wan_i2v_tiny");
  const std::string missing = tmp.file("missing.png");
  CHECK(contains(read_error(run_config("wan_i2v_tiny", missing, ""), {}, i2v), "run.json: generate.image: " + missing));
  const std::string text = tmp.write("not_an_image.png", "hello");
  CHECK(contains(read_error(run_config("wan_i2v_tiny", text, ""), {}, i2v), "run.json: generate.image: " + text));
  const std::string empty = tmp.write("empty.jpg", "");
  CHECK(contains(read_error(run_config("wan_i2v_tiny", empty, ""), {}, i2v), empty));
  const std::string cmyk = testing::fixture_dir("images") + "/bad/cmyk_16x8.jpg";  // not RGB-convertible as Pillow's
  CHECK(contains(read_error(run_config("wan_i2v_tiny", cmyk, ""), {}, i2v), "generate.image: " + cmyk));
  const std::string dir = tmp.path.string();
  CHECK(contains(read_error(run_config("wan_i2v_tiny", dir, ""), {}, i2v), "generate.image: " + dir));
  // A JSONL line's file: the line is named.
  RunConfig c = run_config("wan_flf2v_tiny", input("first.png"), "", 0);
  c.generate.prompt_file = "p.jsonl";
  config::PromptEntry e;
  e.prompt = "x";
  e.line = 4;
  e.last_image = missing;
  CHECK(contains(read_error(c, {e}, kind_of("wan_flf2v_tiny")), "p.jsonl:4: last_image: " + missing));
  // Checked against the model before any file is read.
  CHECK(contains(read_error(run_config("wan_tiny", missing, ""), {}, kind_of("wan_tiny")), "text-to-video"));
}

TEST_CASE("input images: the frame size when height / width are not given") {
  const RunImages run =
      read_run_images(run_config("wan_i2v_tiny", input("first.png"), "", 1), {}, 1, kind_of("wan_i2v_tiny"), "r");
  // 40 x 44 (h x w) at 480 x 832's area in multiples of 16:
  // round(sqrt(399360 * 40 / 44)) = 603 -> 592; round(sqrt(399360 * 44 / 40)) = 663 -> 656.
  const auto size = image_frame_size(run, std::nullopt, std::nullopt, 480 * 832, 16, "r");
  REQUIRE(size);
  CHECK(size->height == 592);
  CHECK(size->width == 656);
  const auto width_given = image_frame_size(run, std::nullopt, 48, 480 * 832, 16, "r");
  CHECK(width_given->height == 592);
  CHECK(width_given->width == 48);
  CHECK_FALSE(image_frame_size(run, 32, 48, 480 * 832, 16, "r"));
  // Two outputs whose images give other sizes: one run makes one size.
  RunConfig c = run_config("wan_i2v_tiny", input("first.png"), "", 0);
  c.generate.prompt_file = "p.jsonl";
  config::PromptEntry a, b;
  a.prompt = b.prompt = "x";
  a.line = 1;
  b.line = 2;
  b.image = input("last.png");  // 30 x 36
  const RunImages two = read_run_images(c, {a, b}, 2, kind_of("wan_i2v_tiny"), "r");
  CHECK_THROWS_WITH_AS(image_frame_size(two, std::nullopt, std::nullopt, 480 * 832, 16, "r"),
                       doctest::Contains("give height and width"), ConfigError);
  CHECK(image_frame_size(two, 32, 48, 480 * 832, 16, "r") == std::nullopt);
}

TEST_CASE("video task: models that take images are 'not supported yet' until they join, text-to-video runs") {
  CHECK_NOTHROW(refuse_until_models_join(kind_of("wan_tiny"), "m"));
  CHECK_NOTHROW(refuse_until_models_join(kind_of("pixart_tiny"), "m"));
  for (const char* fixture : {"wan_i2v_tiny", "wan_flf2v_tiny", "wan22_i2v_tiny", "wan22_ti2v_tiny"}) {
    CAPTURE(fixture);
    CHECK_THROWS_WITH_AS(refuse_until_models_join(kind_of(fixture), "m"), doctest::Contains("not supported yet"),
                         ConfigError);
  }
}
