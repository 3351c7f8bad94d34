// `ditgen plan` on the real CogVideoX models' published config files
// (configs/models/CogVideoX-2b and CogVideoX-5b, rebuilt by
// scripts/models/write_cogvideox_published_configs.py; no weights, no
// tokenizer/) through the shipped run configs (configs/cogvideox-2b.json,
// cogvideox-5b.json: 49 frames of 480 x 720, CFG): plan needs neither
// weights nor tokenizer and lists layouts for 1, 2, 4 and 8 ranks; the
// pipeline's defaults are the transformer's sample size (13 latent frames of
// 60 x 90, 30 x 45 tokens each after the 2 x 2 patch); the joint sequence is
// the 226 text tokens + 13 x 1350 video tokens; a layout the heads cannot
// split (the 2b's 30 heads over ulysses sp4 or tp4) exits 2 naming the rule,
// while the 5b's 48 heads take ulysses sp4.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "pipeline/pipeline.h"
#include "run_command.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const std::string kSrc = DITGEN_SOURCE_DIR;

// The shipped run config of `model` ("2b" / "5b") on its published directory.
testing::Run plan(const std::string& model, const std::string& args) {
  return testing::run_command(std::string(DITGEN_EXE) + " --device cpu plan --config " + kSrc + "/configs/cogvideox-" +
                              model + ".json --set model.path=" + kSrc + "/configs/models/CogVideoX-" + model + " " +
                              args);
}

}  // namespace

TEST_CASE("cogvideox plan on the published CogVideoX-2b and CogVideoX-5b configs for 1, 2, 4 and 8 ranks") {
  for (const std::string model : {"2b", "5b"}) {
    const std::string dir = kSrc + "/configs/models/CogVideoX-" + model;
    REQUIRE_FALSE(fs::exists(dir + "/tokenizer"));
    for (const auto& entry : fs::recursive_directory_iterator(dir))
      REQUIRE_MESSAGE(entry.path().extension() != ".safetensors", entry.path().string());
    for (const int ranks : {1, 2, 4, 8}) {
      CAPTURE(model);
      CAPTURE(ranks);
      const testing::Run r = plan(model, "--world-size " + std::to_string(ranks) + " --set model.dtype=bfloat16");
      REQUIRE_MESSAGE(r.code == 0, r.output);
      CHECK_MESSAGE(r.output.find("valid layouts for " + std::to_string(ranks) + " ranks") != std::string::npos,
                    r.output);
      // 49 frames of 480 x 720: (49 - 1) / 4 + 1 = 13 latent frames of 60 x 90, 30 x 45 tokens each.
      CHECK_MESSAGE(r.output.find("1 video of 13 frames x 1350 tokens, CFG, bfloat16") != std::string::npos, r.output);
      // The joint sequence: 226 text tokens + 13 x 1350 = 17776 rows, the CFG pair as a batch of 2.
      if (ranks == 1) CHECK_MESSAGE(r.output.find("single process  2 x 13 x 17776") != std::string::npos, r.output);
    }
  }
}

TEST_CASE("cogvideox plan: the published 2b's defaults are 13 latent frames of 60 x 90 and 226 + 13 x 1350 joint tokens") {
  const auto pipe = pipeline::Pipeline::open(kSrc + "/configs/models/CogVideoX-2b", pipeline::Pipeline::OpenFor::kPlan);
  const auto& model = pipe->transformer();
  // 0 = unset: CogVideoXPipeline's defaults, the transformer's sample_frames 49 and sample size 60 x 90 x VAE 8.
  CHECK(model.latent_shape(0, 0, 0, pipe->vae().factors(), "generate") == Shape{16, 13, 60, 90});
  CHECK(model.latent_shape(480, 720, 49, pipe->vae().factors(), "generate") == Shape{16, 13, 60, 90});

  const testing::Run r = plan("2b", "--set generate.frames=null --set generate.height=null --set generate.width=null");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK_MESSAGE(r.output.find("1 video of 13 frames x 1350 tokens") != std::string::npos, r.output);
  CHECK_MESSAGE(r.output.find("single process  2 x 13 x " + std::to_string(226 + 13 * 30 * 45)) != std::string::npos,
                r.output);
}

TEST_CASE("cogvideox plan: a layout the heads cannot split exits 2 naming the rule") {
  struct Case {
    std::string model, args, expect;
  };
  const Case refused[] = {
      {"2b", "--set parallel.sp=4 --set parallel.sp_mode=ulysses",
       "num_attention_heads 30 is not divisible by sp*tp = 4 (ulysses)"},
      {"2b", "--set parallel.tp=4", "num_attention_heads 30 is not divisible by tp = 4"},
  };
  for (const Case& c : refused) {
    CAPTURE(c.args);
    const testing::Run r = plan(c.model, c.args);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find(c.expect) != std::string::npos, r.output);
    // ... and lists what 4 ranks can run instead.
    CHECK_MESSAGE(r.output.find("Valid layouts for 4 ranks of this model (30 heads") != std::string::npos, r.output);
  }
  // The 5b's 48 heads split over ulysses sp4.
  const testing::Run ok = plan("5b", "--set parallel.sp=4 --set parallel.sp_mode=ulysses");
  REQUIRE_MESSAGE(ok.code == 0, ok.output);
  CHECK_MESSAGE(ok.output.find("sp4 ulysses  2 x 13 x 4444") != std::string::npos, ok.output);
}
