// The run's memory plan (pipeline/run_memory.h) on the Wan fixture, read
// from its config files: the VAE decoder's and text encoder's weights
// against the element counts of their safetensors files, each stage the
// sum of what it holds, which rank decodes, the tiling it decides against
// a limit, and a --memory-limit under the peak refused naming the
// smallest limit that works. (That the figures match a real run's peak:
// tests/cli/test_memory_plan_cli.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "../models/fixture.h"
#include "io/safetensors.h"
#include "parallel/plan.h"
#include "pipeline/pipeline.h"
#include "pipeline/run_memory.h"
#include "util/error.h"

using namespace ditgen;

namespace {

// Elements of the file's tensors whose names start with one of `prefixes`.
double file_elements(const std::string& path, const std::vector<std::string>& prefixes) {
  const auto file = io::SafetensorsFile::open(path);
  double n = 0;
  for (const std::string& name : file->names())
    for (const std::string& p : prefixes)
      if (name.rfind(p, 0) == 0) {
        double e = 1;
        for (const int64_t d : file->info(name).shape) e *= static_cast<double>(d);
        n += e;
      }
  return n;
}

constexpr double kMiB = 1024.0 * 1024.0;

pipeline::RunMemoryInputs fixture_inputs(int sp) {
  pipeline::RunMemoryInputs in;
  in.process_bytes = 100 * kMiB;
  in.row.layout = parallel::Layout{sp, 1, 1, parallel::SpMode::kUlysses};
  in.row.weight_bytes_per_rank = 3 * kMiB;
  in.row.activation_bytes_per_rank = 5 * kMiB;
  in.compute = DType::kBF16;
  in.vae = DType::kF32;
  in.latent = {16, 3, 60, 104};  // 9 frames of 480 x 832
  in.batch_outputs = 2;
  in.texts = 3;
  in.text_tokens = 16;
  return in;
}

}  // namespace

TEST_CASE("run memory: the parts from the configs, each stage their sum, rank 0 alone decodes") {
  const std::string dir = testing::fixture_dir("wan_tiny");
  const auto pipe = pipeline::Pipeline::open(dir, pipeline::Pipeline::OpenFor::kPlan);
  const pipeline::RunMemoryInputs in = fixture_inputs(2);
  const pipeline::RunMemory m = pipeline::plan_run_memory(*pipe, in, std::nullopt);

  // Weights: the files' own element counts (the decoder and post_quant_conv
  // of the VAE; every tensor of the encoder) times the placed dtype.
  CHECK(m.vae_weights ==
        4 * file_elements(dir + "/vae/diffusion_pytorch_model.safetensors", {"decoder.", "post_quant_conv."}));
  CHECK(m.text_encoder_weights == 2 * file_elements(dir + "/text_encoder/model.safetensors", {""}));
  // 16 x 9 x 60 x 104 latents per output, 2 outputs; 9 frames x 3 x 480 x 832 floats each.
  CHECK(m.latents == 2.0 * 16 * 3 * 60 * 104 * 4);
  CHECK(m.decoded_frames == 2.0 * 9 * 3 * 480 * 832 * 4);
  CHECK(m.decode_work == pipe->vae().decode_bytes(60, 104));

  const double everywhere = 100 * kMiB + 3 * kMiB;
  CHECK(m.other_ranks.text_encoding ==
        doctest::Approx(everywhere + m.text_encoder_weights + m.text_activations + m.embeddings));
  CHECK(m.other_ranks.denoising == doctest::Approx(everywhere + m.embeddings + 5 * kMiB + 3 * m.latents));
  CHECK(m.other_ranks.decode == 0);  // only the output rank decodes
  CHECK(m.output_rank.denoising == doctest::Approx(m.other_ranks.denoising + m.vae_weights));
  CHECK(m.output_rank.decode ==
        doctest::Approx(everywhere + m.vae_weights + m.embeddings + m.latents + m.decode_work + m.decoded_frames));
  CHECK(m.peak() == std::max({m.output_rank.text_encoding, m.output_rank.denoising, m.output_rank.decode}));
  CHECK(m.peak_where() == std::string("rank 0, ") + m.output_rank.peak_stage());

  // Tiled, the decode works in one tile's bytes and nothing else changes.
  const models::nn::TileGrid grid = pipeline::vae_tile_grid({}, pipe->vae(), "run.json");
  const pipeline::RunMemory tiled = pipeline::plan_run_memory(*pipe, in, grid);
  CHECK(tiled.decode_work == pipe->vae().decode_bytes(32, 32));  // 256 / 8
  CHECK(tiled.output_rank.decode == doctest::Approx(m.output_rank.decode - m.decode_work + tiled.decode_work));
  CHECK(tiled.output_rank.denoising == m.output_rank.denoising);
}

TEST_CASE("run memory: the tiling decided against the limit, a limit under the peak refused") {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("wan_tiny"), pipeline::Pipeline::OpenFor::kPlan);
  const pipeline::RunMemoryInputs in = fixture_inputs(1);
  const pipeline::RunMemory untiled = pipeline::plan_run_memory(*pipe, in, std::nullopt);
  const pipeline::RunMemory tiled =
      pipeline::plan_run_memory(*pipe, in, pipeline::vae_tile_grid({}, pipe->vae(), "run.json"));
  REQUIRE(tiled.peak() < untiled.peak());
  VaeConfig vae;  // auto
  CHECK_FALSE(pipeline::plan_run(*pipe, in, vae, untiled.peak(), true, "run.json").tiling.grid);
  const double between = (tiled.peak() + untiled.peak()) / 2;
  const pipeline::RunMemoryPlan plan = pipeline::plan_run(*pipe, in, vae, between, true, "run.json");
  CHECK(plan.tiling.grid);
  CHECK(plan.memory.peak() == tiled.peak());
  vae.tiling = VaeTiling::kOff;  // off: the untiled peak is over the limit
  try {
    pipeline::plan_run(*pipe, in, vae, between, true, "run.json");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.exit_code() == 2);
    const std::string what = e.what();
    CHECK(what.find("--memory-limit: ") == 0);
    const std::string tail = "the smallest limit that works is --memory-limit ";
    REQUIRE(what.find(tail) != std::string::npos);
    const double smallest = std::stod(what.substr(what.find(tail) + tail.size())) * 1024 * kMiB;
    CHECK(smallest >= untiled.peak());
    CHECK(smallest - 0.01 * 1024 * kMiB < untiled.peak());  // rounded up to the hundredth shown
    CHECK_NOTHROW(pipeline::plan_run(*pipe, in, vae, smallest, true, "run.json"));
  }
  CHECK_NOTHROW(pipeline::plan_run(*pipe, in, vae, between, false, "run.json"));  // no --memory-limit: no refusal
}
