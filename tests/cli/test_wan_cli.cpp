// Wan text-to-video from the command line (tests/fixtures/wan_tiny and
// wan22_tiny): the fixtures' run configs with --init-noise give diffusers'
// latents (UniPC, Euler, the A14B pair with guidance_scale_2) and write each
// video's 9 frames as PNGs or one MP4; what the run leaves unset takes
// WanPipeline's defaults (guidance 5.0, 50 steps, 81 frames of 480 x 832)
// and MP4s are 16 fps; `plan` runs on the published real-model configs
// (no tokenizer) for 1 to 8 ranks; bad inputs exit 2 naming the field
// (frame counts, sizes, dsp, temporal PAB, guidance_scale_2 on a
// one-expert model, PAB on A14B's two experts); under mpirun ulysses and ring shard the whole video's
// 45 tokens (uneven: 23 + 22, 15 x 3), and tp splits heads (each rank's q/k
// norm squared sums all-reduced), alone and with cp, and give the single
// process's latents (bit for bit for Ulysses and cp, within float rounding
// for ring and tp, as docs/parallel.md promises), rank 0 sending exactly
// the bytes per step `plan` computes; PipeFusion pp2 (alone and with
// ulysses sp2) with a warm-up over every step gives them bit for bit; PAB
// (spatial = the self-attention over all tokens, cross, mlp) computes and
// reuses exactly the outputs its schedule says, gives one process's PAB
// latents under ulysses sp2, and skips reuses x plan's per-branch bytes
// (against diffusers' PAB hook: test_pab_parity.cpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "io/safetensors.h"
#include "mp4_decode.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "fixture_runs.h"
#include "layout_checks.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

std::string ref_dir(const std::string& fixture) { return testing::reference_dir(fixture); }

testing::Run run_wan(const testing::TempDir& dir, const std::string& fixture, const std::string& config,
                     const std::string& args, int ranks = 1, const std::string& env = "",
                     const std::string& output = "video.png") {
  return testing::run_fixture(dir, fixture, config, args, ranks, env, output);
}

Tensor saved_latents(const std::string& file) { return testing::saved_latents(file); }

double error_to(const Tensor& got, const std::string& fixture, const std::string& name) {
  const Tensor ref = testing::fixture_tensor(fixture, "expected.safetensors", name);
  REQUIRE(got.shape() == ref.shape());
  return testing::rel_l2(got, ref);
}

}  // namespace

TEST_CASE("wan CLI: the fixture's UniPC and Euler run configs give diffusers' latents, frames as PNGs or an MP4") {
  testing::TempDir tmp("wan_cli");
  for (const std::string sampler : {"unipc", "euler"}) {
    CAPTURE(sampler);
    const std::string latents = tmp.file(sampler + ".safetensors");
    const testing::Run r = run_wan(tmp, "wan_tiny", "run_" + sampler + ".json",
                                   "--init-noise " + ref_dir("wan_tiny") + "noise.safetensors --save-latents " + latents);
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const double err = error_to(saved_latents(latents), "wan_tiny", "latents_" + sampler);
    MESSAGE("wan_tiny CLI latents_" << sampler << ": relative L2 to diffusers " << err);
    CHECK(err < 1e-4);
  }
  // Two videos of 9 frames (1 + 4 x 2 latent frames): video_0000_f000.png ... video_0001_f008.png.
  for (const char* name : {"video_0000_f000.png", "video_0000_f008.png", "video_0001_f004.png"}) {
    CAPTURE(name);
    CHECK(fs::exists(tmp.file(name)));
  }
  CHECK_FALSE(fs::exists(tmp.file("video_0000_f009.png")));
  const testing::Run mp4 = run_wan(tmp, "wan_tiny", "run_unipc.json",
                                   "--init-noise " + ref_dir("wan_tiny") + "noise.safetensors --set output.format=mp4", 1,
                                   "", "clip.mp4");
  REQUIRE_MESSAGE(mp4.code == 0, mp4.output);
  const testing::DecodedVideo v = testing::decode_mp4(tmp.file("clip_0000.mp4"));
  CHECK(v.rgb.size() == 9);
}

TEST_CASE("wan CLI: WanPipeline's defaults where the run sets nothing: guidance 5.0, 50 steps, MP4 at 16 fps") {
  testing::TempDir tmp("wan_defaults");
  // No guidance_scale: WanPipeline's 5.0, which the fixture's diffusers references used.
  const std::string latents = tmp.file("latents.safetensors");
  const testing::Run r = run_wan(tmp, "wan_tiny", "run_unipc.json",
                                 "--set generate.guidance_scale=null --init-noise " + ref_dir("wan_tiny") +
                                     "noise.safetensors --save-latents " + latents);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double err = error_to(saved_latents(latents), "wan_tiny", "latents_unipc");
  MESSAGE("wan_tiny without guidance_scale: relative L2 to diffusers (guidance 5.0) " << err);
  CHECK(err < 1e-4);
  // No steps and no fps: 50 steps, 16 fps (one frame, one prompt, to keep 50 steps cheap);
  // output.fps and generate.steps, when set, win.
  const std::string one = "--frames 1 --set 'generate.prompts=[\"a red cat\"]' --set output.format=mp4 ";
  struct Case {
    std::string args, steps;
    int fps;
  };
  for (const Case& c : {Case{"--set generate.steps=null", "Steps: 50,", 16}, Case{"--set output.fps=12", "Steps: 4,", 12}}) {
    CAPTURE(c.args);
    const testing::Run mp4 = run_wan(tmp, "wan_tiny", "run_unipc.json", one + c.args, 1, "", "clip.mp4");
    REQUIRE_MESSAGE(mp4.code == 0, mp4.output);
    testing::DecodedVideo v = testing::decode_mp4(tmp.file("clip.mp4"));
    CHECK(v.avg_frame_rate.num == c.fps * v.avg_frame_rate.den);
    const std::string& comment = v.metadata["comment"];
    CHECK_MESSAGE(comment.find(c.steps) != std::string::npos, comment);
    CHECK_MESSAGE(comment.find("CFG scale: 5,") != std::string::npos, comment);
  }
}

TEST_CASE("wan CLI: plan without frames, height or width gives WanPipeline's 81 frames of 480 x 832") {
  const std::string cmd = std::string(DITGEN_EXE) + " --device cpu plan --config " + ref_dir("wan_tiny") +
                          "run_unipc.json --set model.path=" + testing::fixture_dir("wan_tiny") +
                          " --set generate.frames=null --set generate.height=null --set generate.width=null";
  const testing::Run r = testing::run_command(cmd);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  // (81 - 1) / 4 + 1 = 21 latent frames of (480 / 16) x (832 / 16) = 30 x 52 tokens each.
  CHECK_MESSAGE(r.output.find("21 frames x 1560 tokens") != std::string::npos, r.output);
}

// The real models' published config files (configs/models/, no weights, no
// tokenizer/) through the shipped Wan config: plan needs neither, and
// lists layouts for 1, 2, 4 and 8 ranks at WanPipeline's 81 x 480 x 832.
TEST_CASE("wan plan on the published Wan 2.1 1.3B and 14B and Wan 2.2 A14B configs for 1, 2, 4 and 8 ranks") {
  const std::string src = DITGEN_SOURCE_DIR;
  for (const std::string model : {"Wan2.1-T2V-1.3B-Diffusers", "Wan2.1-T2V-14B-Diffusers", "Wan2.2-T2V-A14B-Diffusers"}) {
    REQUIRE_FALSE(fs::exists(src + "/configs/models/" + model + "/tokenizer"));
    for (const int ranks : {1, 2, 4, 8}) {
      CAPTURE(model);
      CAPTURE(ranks);
      const testing::Run r = testing::run_command(
          std::string(DITGEN_EXE) + " --device cpu plan --world-size " + std::to_string(ranks) + " --config " + src +
          "/configs/wan2.1-t2v-1.3b.json --set model.path=" + src + "/configs/models/" + model +
          " --set model.dtype=bfloat16");
      REQUIRE_MESSAGE(r.code == 0, r.output);
      CHECK_MESSAGE(r.output.find("valid layouts for " + std::to_string(ranks) + " ranks") != std::string::npos, r.output);
      CHECK_MESSAGE(r.output.find("1 video of 21 frames x 1560 tokens, CFG, bfloat16") != std::string::npos, r.output);
    }
  }
}

TEST_CASE("wan CLI: Wan 2.2 A14B's run config (guidance_scale 4, guidance_scale_2 3) gives diffusers' latents") {
  testing::TempDir tmp("wan22_cli");
  const std::string latents = tmp.file("latents.safetensors");
  const testing::Run r = run_wan(tmp, "wan22_tiny", "run_unipc.json",
                                 "--init-noise " + ref_dir("wan22_tiny") + "noise.safetensors --save-latents " + latents);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const double err = error_to(saved_latents(latents), "wan22_tiny", "latents_unipc");
  MESSAGE("wan22_tiny CLI latents_unipc: relative L2 to diffusers " << err);
  CHECK(err < 1e-4);
}

TEST_CASE("wan CLI: bad inputs exit 2 naming the field, before any weight is read") {
  testing::TempDir tmp("wan_bad");
  struct Case {
    std::string args, fixture, expect;
  };
  const Case cases[] = {
      {"--frames 10", "wan_tiny", "generate.frames: 10 frames: this autoencoder_kl_wan VAE makes 1 + 4k frames (the nearest: 9 or 13)"},
      {"--set generate.height=40", "wan_tiny", "generate.height/width: 40x80: height and width must be positive multiples of 16 (VAE factor 8 x patch_size 2); the nearest to 40: 32 or 48"},
      {"--set generate.scheduler=ddim", "wan_tiny", "use unipc or euler"},
      {"--set generate.guidance_scale_2=3", "wan_tiny", "generate.guidance_scale_2: this model has one transformer"},
      {"--set 'pab.temporal={\"range\":2,\"threshold\":[100,800]}'", "wan_tiny", "pab.temporal"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const testing::Run r = run_wan(tmp, c.fixture, "run_unipc.json", c.args);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find(c.expect) != std::string::npos, r.output);
  }
  const testing::Run dsp = run_wan(tmp, "wan_tiny", "run_unipc.json", "--set parallel.sp=2 --set parallel.sp_mode=dsp", 2);
  CHECK(dsp.code == 2);
  CHECK_MESSAGE(dsp.output.find("spans every frame's tokens at once") != std::string::npos, dsp.output);
}

// PAB keeps one model's branches, and A14B's experts differ (docs/wan.md):
// refused with exit 2 naming what, no output written.
TEST_CASE("wan CLI: PAB on A14B's two experts is exit 2, nothing written") {
  testing::TempDir tmp("wan22_pab");
  for (const std::string pab : {"--set 'pab.spatial={\"range\":2,\"threshold\":[100,800]}'",
                                "--set 'pab.cross={\"range\":3,\"threshold\":[0,1000]}'"}) {
    CAPTURE(pab);
    const testing::Run r = run_wan(tmp, "wan22_tiny", "run_unipc.json",
                                   "--init-noise " + ref_dir("wan22_tiny") + "noise.safetensors " + pab);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.output.find("not supported yet: PAB") != std::string::npos, r.output);
    CHECK_MESSAGE(r.output.find("with a two-expert model (" + testing::fixture_dir("wan22_tiny") +
                                "/model_index.json: boundary_ratio)") != std::string::npos,
                  r.output);
    for (const auto& entry : fs::directory_iterator(tmp.path))
      CHECK_MESSAGE(false, "left behind: " << entry.path().filename().string());
  }
}

namespace {

struct Outcome {
  Tensor latents;
  nlohmann::json comm;  // rank 0's bytes sent (DITGEN_TEST_COMM_STATS)
};

Outcome run_layout(const testing::TempDir& dir, const std::string& name, int ranks, const std::string& sets) {
  const std::string latents = dir.file(name + ".safetensors"), comm = dir.file(name + "_comm.json");
  const testing::Run r =
      run_wan(dir, "wan_tiny", "run_unipc.json",
              "--init-noise " + ref_dir("wan_tiny") + "noise.safetensors --save-latents " + latents + " " + sets, ranks,
              "DITGEN_TEST_COMM_STATS=" + comm);
  REQUIRE_MESSAGE(r.code == 0, sets << "\n" << r.output);
  return {saved_latents(latents), nlohmann::json::parse(std::ifstream(comm))};
}

const Tensor& single_process() {
  static testing::TempDir dir("wan_single");
  static const Tensor latents = run_layout(dir, "single", 1, "").latents;
  return latents;
}

// `plan`'s row for the fixture's run (2 videos of 9 frames of 48 x 80, CFG, float32).
parallel::PlanRow planned(const parallel::Layout& layout) {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("wan_tiny"));
  const auto& model = pipe->transformer();
  parallel::Workload work = model.workload(model.latent_shape(48, 80, 9, pipe->vae().factors(), ""));
  work.set_text_tokens(16);  // the cross-attention's text rows (max_sequence_length), as `plan` sets them
  return parallel::plan_layout(layout, work, 2, true, 4);
}

void check_layout(int ranks, const std::string& sets, const parallel::Layout& layout) {
  REQUIRE(layout.world_size() == ranks);
  testing::TempDir dir("wan_layout");
  const Outcome got = run_layout(dir, "parallel", ranks, sets);
  const double err = testing::rel_l2(got.latents, single_process());
  MESSAGE(sets << ": relative L2 vs single process " << err << ", vs diffusers "
               << error_to(got.latents, "wan_tiny", "latents_unipc"));
  CHECK(err < 1e-5);
  if (testing::promises_identical(layout))
    CHECK_MESSAGE(testing::differing(got.latents, single_process()) == 0, sets << ": not bit-identical");
  CHECK(error_to(got.latents, "wan_tiny", "latents_unipc") < 1e-4);
  // Rank 0's bytes per step (one forward per step) against plan, exactly.
  const double forwards = got.comm["forwards"].get<double>();
  REQUIRE(forwards == 4);
  const parallel::PlanRow plan = planned(layout);
  const double sent = testing::sent_per_step(got.comm);
  MESSAGE("  bytes per step sent by rank 0: " << sent << "; plan " << plan.comm_bytes_per_step_per_rank);
  CHECK(sent == plan.comm_bytes_per_step_per_rank);
}

}  // namespace

TEST_CASE("wan ulysses sp2 (the video's 45 tokens as 23 + 22)") {
  check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses", {2, 1, 1, parallel::SpMode::kUlysses});
}
TEST_CASE("wan ulysses sp3 (15 tokens each, 6 heads)") {
  check_layout(3, "--set parallel.sp=3 --set parallel.sp_mode=ulysses", {3, 1, 1, parallel::SpMode::kUlysses});
}
TEST_CASE("wan ring sp2") { check_layout(2, "--set parallel.sp=2 --set parallel.sp_mode=ring", {2, 1, 1, parallel::SpMode::kRing}); }
TEST_CASE("wan cp2") { check_layout(2, "--set parallel.cp=2", {1, 2, 1, parallel::SpMode::kUlysses}); }
TEST_CASE("wan tp2 (heads and the q/k norms' squared sums split)") {
  check_layout(2, "--set parallel.tp=2", {1, 1, 2, parallel::SpMode::kUlysses});
}
TEST_CASE("wan ring sp2 x tp2") {
  check_layout(4, "--set parallel.sp=2 --set parallel.tp=2 --set parallel.sp_mode=ring", {2, 1, 2, parallel::SpMode::kRing});
}
TEST_CASE("wan tp2 x cp2") { check_layout(4, "--set parallel.tp=2 --set parallel.cp=2", {1, 2, 2, parallel::SpMode::kUlysses}); }
TEST_CASE("wan ulysses sp2 x cp2") {
  check_layout(4, "--set parallel.sp=2 --set parallel.cp=2 --set parallel.sp_mode=ulysses", {2, 2, 1, parallel::SpMode::kUlysses});
}
// PipeFusion on a video: a patch is a band of the whole video's tokens
// (with its rows of the rotary tables); with a warm-up over all 4 steps the
// result is the single process's.
TEST_CASE("wan pp2 PipeFusion, warm-up over every step") {
  check_layout(2, "--set parallel.pp=2 --set parallel.warmup_steps=4", {1, 1, 1, parallel::SpMode::kUlysses, 2, 0, 4});
}
// 2 patches: plan's bytes are a patched step's (rank 0's sp share of each
// patch), a warm-up step sends the whole sequence's shard; with 2 patches
// of 23 and 22 tokens rank 0 holds 12 + 11 = 23 either way (3 patches:
// 8 + 8 + 8 = 24 against 23, docs/wan.md).
TEST_CASE("wan pp2 x sp2 ulysses PipeFusion, warm-up over every step") {
  check_layout(4, "--set parallel.pp=2 --set parallel.sp=2 --set parallel.sp_mode=ulysses --set parallel.warmup_steps=4",
               {2, 1, 1, parallel::SpMode::kUlysses, 2, 0, 4});
}

// PAB on Wan: spatial is the self-attention over every frame's tokens,
// cross the cross-attention, mlp the feed-forward. 6 UniPC steps, all inside
// (0, 1000): range 2 reuses at counts 1, 3, 5, range 3 at 1, 2, 4, 5.
TEST_CASE("wan PAB: outputs computed and reused exactly, ulysses sp2 equal to one process, skipped bytes = reuses x plan's per-branch bytes") {
  const std::string steps = "--steps 6 ";
  const std::string pab = steps +
                          "--set 'pab={\"spatial\":{\"range\":2,\"threshold\":[0,1000]},"
                          "\"cross\":{\"range\":3,\"threshold\":[0,1000]},"
                          "\"mlp\":{\"range\":2,\"threshold\":[0,1000],\"blocks\":[1]}}' --pab-stats ";
  testing::TempDir dir("wan_pab");
  const Tensor off = run_layout(dir, "off", 1, steps).latents;
  const Tensor single = run_layout(dir, "single", 1, pab + dir.file("single_pab.json")).latents;
  MESSAGE("wan_tiny PAB 2/3/mlp 2 over 6 steps: relative L2 to PAB off " << testing::rel_l2(single, off));
  CHECK(testing::differing(single, off) > 0);  // it reused (what it reuses against diffusers' hook: test_pab_parity.cpp)
  const parallel::Layout layout{2, 1, 1, parallel::SpMode::kUlysses};
  const Outcome got = run_layout(dir, "sp2", 2, "--set parallel.sp=2 --set parallel.sp_mode=ulysses " + pab +
                                                    dir.file("sp2_pab.json"));
  CHECK_MESSAGE(testing::differing(got.latents, single) == 0, "ulysses sp2 with PAB: not bit-identical to one process");
  const parallel::PlanRow plan = planned(layout);
  for (const std::string file : {"single_pab.json", "sp2_pab.json"}) {
    CAPTURE(file);
    const auto kinds = nlohmann::json::parse(std::ifstream(dir.file(file)))["kinds"];
    CHECK(kinds["spatial"]["reused"] == 6);  // 3 per block, 2 blocks
    CHECK(kinds["spatial"]["computed"] == 6);
    CHECK(kinds["cross"]["reused"] == 8);  // 4 per block
    CHECK(kinds["cross"]["computed"] == 4);
    CHECK(kinds["mlp"]["reused"] == 3);  // block 1 only
    CHECK(kinds["mlp"]["computed"] == 3);
    if (file == "sp2_pab.json") testing::check_pab_skipped_bytes(kinds, plan, {"spatial", "cross", "mlp"});
  }
  // Ulysses: the self-attention's all-to-alls are the only sp traffic of a block.
  CHECK(plan.branch_spatial > 0);
}
