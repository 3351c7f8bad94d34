// The configs shipped in configs/: every one loads with load_config (the
// schema only: their model directories are fetched separately, see README
// "Getting the published text models"), and the text-model configs hold the
// settings the README promises (the models' own samplers, VideoSys's PAB
// defaults for Latte, WanPipeline's example for Wan 2.1 T2V-1.3B).
#include <algorithm>
#include <filesystem>

#include "config_test_support.h"

namespace ditgen::test {

namespace {

std::string shipped(const std::string& name) { return std::string(DITGEN_SOURCE_DIR) + "/configs/" + name; }
// A path the shipped configs write relative to the repository root (they
// say "../x": relative paths in a config resolve against its folder).
std::string in_repo(const std::string& path) { return std::string(DITGEN_SOURCE_DIR) + "/" + path; }

}  // namespace

TEST_CASE("every config in configs/ loads, with at least one output and an output path") {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DITGEN_SOURCE_DIR) + "/configs"))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  // The DiT configs and the text-model configs, at least.
  REQUIRE(files.size() >= 6);
  for (const auto& f : files) {
    CAPTURE(f.string());
    RunConfig c;
    try {
      c = load_config(f.string(), {});
    } catch (const Error& e) {
      FAIL_CHECK(f.string() << " does not load: " << std::string(e.what()));
      continue;
    }
    CHECK(c.generate.num_outputs() > 0);
    CHECK(c.generate.class_labels.empty() != c.generate.prompts.empty());  // one kind of conditioning
    CHECK_FALSE(c.output.path.empty());
    CHECK_FALSE(c.model.path.empty());
  }
}

// Issue 43: a real-model config run before its download says where the
// model comes from (cli/model_presence.h quotes model.source).
TEST_CASE("every config of a real model names its Hub source in model.source") {
  int real = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DITGEN_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    CAPTURE(entry.path().string());
    const RunConfig c = load_config(entry.path().string(), {});
    if (c.model.path.find("/samples/") != std::string::npos) {  // the shipped toys need no download
      CHECK(c.model.source.empty());
      continue;
    }
    ++real;
    const std::string& source = c.model.source;
    CHECK(std::count(source.begin(), source.end(), '/') == 1);  // owner/name, as the Hub spells it
    const std::string name = source.substr(source.find('/') + 1);
    CHECK(std::filesystem::path(c.model.path).filename() == name);  // downloaded into models/<name>
  }
  CHECK(real >= 8);
}

TEST_CASE("configs/wan2.1-t2v-1.3b.json: Wan 2.1 T2V-1.3B as diffusers' WanPipeline example runs it") {
  const RunConfig c = load_config(shipped("wan2.1-t2v-1.3b.json"), {});
  CHECK(c.model.path == in_repo("models/Wan2.1-T2V-1.3B-Diffusers"));
  CHECK(c.generate.prompts.size() == 1);
  CHECK_FALSE(c.generate.negative_prompt.empty());
  CHECK(c.generate.frames == 81);
  CHECK(c.generate.height == 480);
  CHECK(c.generate.width == 832);
  CHECK(c.generate.steps == 50);
  CHECK(c.generate.guidance_scale == 5.0);
  CHECK(c.generate.scheduler == sched::Sampler::kModelDefault);  // the model's UniPC, flow_shift 3.0
  CHECK(c.output.format == OutputFormat::kMp4);
  CHECK(c.output.fps == 16);
}

TEST_CASE("configs/wan2.1-t2v-14b-lightx2v-4step.json: a step- and CFG-distilled LoRA's 4 steps, guidance 1") {
  const RunConfig c = load_config(shipped("wan2.1-t2v-14b-lightx2v-4step.json"), {});
  CHECK(c.model.path == in_repo("models/Wan2.1-T2V-14B-Diffusers"));
  REQUIRE(c.lora.size() == 1);  // a placeholder path beside the models, or --lora
  CHECK(c.lora[0].path == in_repo("models/loras/Wan21_T2V_14B_lightx2v_cfg_step_distill_lora_rank64.safetensors"));
  CHECK(c.lora[0].scale == 1.0);
  CHECK(c.generate.steps == 4);
  CHECK(c.generate.guidance_scale == 1.0);  // one forward per step
  CHECK(c.generate.scheduler == sched::Sampler::kUnipc);
  REQUIRE(c.generate.shift);
  CHECK(*c.generate.shift == 3.0);  // the 14B's scheduler_config.json flow_shift
}

TEST_CASE("configs/pixart-alpha-512.json: PixArt-XL-2-512x512 with its own DPM-Solver++ at 512x512") {
  const RunConfig c = load_config(shipped("pixart-alpha-512.json"), {});
  CHECK(c.model.path == in_repo("models/PixArt-XL-2-512x512"));
  CHECK(c.generate.prompts.size() >= 2);
  CHECK(c.generate.negative_prompt.empty());
  CHECK(c.generate.steps == 20);
  CHECK(c.generate.guidance_scale == 4.5);
  CHECK(c.generate.scheduler == sched::Sampler::kDpmpp2m);
  CHECK(c.generate.height == 512);
  CHECK(c.generate.width == 512);
  CHECK(c.generate.frames == 0);
  CHECK_FALSE(c.pab.enabled());
  CHECK(c.output.path == in_repo("out/pixart.png"));
  CHECK(c.output.format == OutputFormat::kPng);
  CHECK(c.output.grid);
}

TEST_CASE("configs/latte-1.json: Latte-1, 16 frames at 512x512, DDIM 50 steps, VideoSys's PAB for Latte, mp4") {
  const RunConfig c = load_config(shipped("latte-1.json"), {});
  CHECK(c.model.path == in_repo("models/Latte-1"));
  CHECK(c.generate.prompts.size() >= 2);
  CHECK(c.generate.frames == 16);
  CHECK(c.generate.height == 512);
  CHECK(c.generate.width == 512);
  CHECK(c.generate.steps == 50);
  CHECK(c.generate.guidance_scale == 7.5);
  CHECK(c.generate.scheduler == sched::Sampler::kDdim);
  // VideoSys's LattePABConfig defaults (videosys/pipelines/latte/pipeline_latte.py).
  REQUIRE(c.pab.spatial);
  CHECK(c.pab.spatial->range == 2);
  CHECK(c.pab.spatial->threshold == std::array<double, 2>{100, 800});
  REQUIRE(c.pab.temporal);
  CHECK(c.pab.temporal->range == 3);
  CHECK(c.pab.temporal->threshold == std::array<double, 2>{100, 800});
  REQUIRE(c.pab.cross);
  CHECK(c.pab.cross->range == 6);
  CHECK(c.pab.cross->threshold == std::array<double, 2>{100, 800});
  // VideoSys's MLP broadcast (blocks 0-4, computed at t = 720, 640, 560, 480,
  // 400 and reused for the next 2 steps) in ditgen's range/window rule: 10
  // reuses per block over t = 720 ... 360 at 50 DDIM steps, as VideoSys.
  REQUIRE(c.pab.mlp);
  CHECK(c.pab.mlp->range == 2);
  CHECK(c.pab.mlp->threshold == std::array<double, 2>{340, 740});
  CHECK(c.pab.mlp->blocks == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(c.output.format == OutputFormat::kMp4);
  CHECK(c.output.fps == 8);
  CHECK(c.output.grid);
}

TEST_CASE("configs/latte-1-pab-off.json is latte-1.json without PAB (and its own output name)") {
  const RunConfig on = load_config(shipped("latte-1.json"), {});
  const RunConfig off = load_config(shipped("latte-1-pab-off.json"), {});
  CHECK_FALSE(off.pab.enabled());
  CHECK(off.model == on.model);
  CHECK(off.generate == on.generate);
  CHECK(off.parallel == on.parallel);
  CHECK(off.output.format == on.output.format);
  CHECK(off.output.fps == on.output.fps);
  CHECK(off.output.crf == on.output.crf);
  CHECK(off.output.grid == on.output.grid);
  CHECK(off.output.path != on.output.path);  // both runs side by side
}

}  // namespace ditgen::test
