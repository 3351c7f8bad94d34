// See run_memory.h.
#include "pipeline/run_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/error.h"
#include "util/strings.h"

namespace ditgen::pipeline {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

double StageMemory::peak() const { return std::max({text_encoding, denoising, decode}); }

const char* StageMemory::peak_stage() const {
  if (decode >= denoising && decode >= text_encoding) return "VAE decode";
  return denoising >= text_encoding ? "denoising" : "text encoding";
}

double RunMemory::peak() const { return std::max(output_rank.peak(), world_size > 1 ? other_ranks.peak() : 0.0); }

std::string RunMemory::peak_where() const {
  const bool other = world_size > 1 && other_ranks.peak() > output_rank.peak();
  const StageMemory& s = other ? other_ranks : output_rank;
  return std::string(other ? (world_size > 2 ? "ranks 1-" + std::to_string(world_size - 1) : "rank 1") : "rank 0") +
         ", " + s.peak_stage();
}

RunMemory plan_run_memory(const Pipeline& pipe, const RunMemoryInputs& in,
                          const std::optional<models::nn::TileGrid>& tiles) {
  const models::VaeSpec& vae = pipe.vae();
  RunMemory m;
  m.world_size = in.row.layout.world_size();
  m.process = in.process_bytes;
  m.transformer_weights = in.row.weight_bytes_per_rank;
  m.activations = in.row.activation_bytes_per_rank;
  const double compute_bytes = static_cast<double>(dtype_size(in.compute));
  m.vae_weights = static_cast<double>(vae.decoder_params()) * static_cast<double>(dtype_size(in.vae));
  if (const models::TextEncoderSpec* text = pipe.text_encoder()) {
    const double rows = static_cast<double>(in.texts) * static_cast<double>(in.text_tokens);
    const double width = static_cast<double>(text->hidden_size());
    m.text_encoder_weights = static_cast<double>(text->param_count()) * compute_bytes;
    m.text_activations = 16.0 * rows * width * sizeof(float);
    m.embeddings = rows * width * sizeof(float);
  }
  const double outputs = static_cast<double>(in.batch_outputs);
  m.latents = outputs * static_cast<double>(shape_numel(in.latent)) * sizeof(float);
  // The decoded frames (outputs, F, 3, H, W) float32.
  const bool video = in.latent.size() == 4;
  const int64_t h = in.latent.at(in.latent.size() - 2), w = in.latent.back(), f = vae.spatial_factor();
  const double frames = static_cast<double>(vae.frames_of(video ? in.latent[1] : 1));
  m.decoded_frames = outputs * frames * static_cast<double>(vae.out_channels()) * static_cast<double>(h * f) *
                     static_cast<double>(w * f) * sizeof(float);
  m.decode_work = tiles ? vae.decode_bytes(std::min(h, tiles->height.latent_size), std::min(w, tiles->width.latent_size))
                        : vae.decode_bytes(h, w);

  const double everywhere = m.process + m.transformer_weights;
  auto stages = [&](bool output_rank) {
    const double held = everywhere + (output_rank ? m.vae_weights : 0.0);
    StageMemory s;
    s.text_encoding = held + m.text_encoder_weights + m.text_activations + m.embeddings;
    s.denoising = held + m.embeddings + m.activations + 3 * m.latents;
    if (output_rank) s.decode = held + m.embeddings + m.latents + m.decode_work + m.decoded_frames;
    return s;
  };
  m.output_rank = stages(true);
  if (m.world_size > 1) m.other_ranks = stages(false);
  return m;
}

RunMemoryPlan plan_run(const Pipeline& pipe, const RunMemoryInputs& in, const VaeConfig& vae, double limit_bytes,
                       bool limit_given, const std::string& where) {
  check_given_tile_sizes(vae, pipe.vae(), where);
  RunMemoryPlan plan;
  plan.limit_bytes = limit_bytes;
  // What the output rank holds at the decode besides the decode's own
  // working memory: the decision weighs the untiled decode against the rest.
  const RunMemory untiled = plan_run_memory(pipe, in, std::nullopt);
  VaeTilingSettings settings;
  settings.vae = vae;
  settings.where = where;
  settings.memory_limit_bytes = limit_bytes;
  settings.held_bytes = untiled.output_rank.decode - untiled.decode_work;
  const int64_t h = in.latent.at(in.latent.size() - 2), w = in.latent.back();
  plan.tiling = decide_vae_tiling(settings, pipe.vae(), h, w);
  plan.memory = plan.tiling.grid ? plan_run_memory(pipe, in, plan.tiling.grid) : untiled;
  if (limit_given && plan.memory.peak() > limit_bytes) {
    // The smallest limit that works, rounded up to what the message shows.
    const double needed_gib = std::ceil(plan.memory.peak() / kGiB * 100.0) / 100.0;
    char text[64];
    std::snprintf(text, sizeof text, "%.2f", needed_gib);
    throw ConfigError("--memory-limit: " + format_bytes(limit_bytes) + " is below the " +
                      format_bytes(plan.memory.peak()) + " this run needs (" + plan.memory.peak_where() +
                      (plan.tiling.grid ? ", with a tiled VAE decode" : "") + "; ditgen plan --config " + where +
                      " shows each stage); the smallest limit that works is --memory-limit " + text);
  }
  return plan;
}

}  // namespace ditgen::pipeline
