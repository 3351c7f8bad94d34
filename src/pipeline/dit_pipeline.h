// Class-conditional image generation with a DiT model directory, as
// diffusers' DiTPipeline does it: Philox noise per output (seed + i), the
// denoising loop with classifier-free guidance on the eps channels (learned
// sigma dropped), the scheduler step, then VAE decoding to [0, 1] images.
// Outputs are generated batch_size at a time (twice that with CFG); each
// output's result does not depend on the batch it falls into.
//
// Under a parallel layout every rank runs this loop in lockstep: with cp = 2
// each rank of a CFG pair runs one half of the guidance batch (cond on cp
// rank 0, the null class on cp rank 1) and the two exchange their eps, so
// both apply guidance and the scheduler step identically; tp and sp work
// inside the transformer (models::DitShard). Only the output rank loads the
// VAE and decodes.
#pragma once
#include <cstdint>
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "io/model_dir.h"
#include "models/dit.h"
#include "pab/change_recorder.h"
#include "models/vae.h"
#include "tensor/tensor.h"

namespace ditgen::pipeline {

struct DitRequest {
  std::vector<int64_t> labels;    // one output per label
  uint64_t seed = 0;              // output i uses seed + i
  int steps = 50;
  float guidance_scale = 4.0f;
  std::string scheduler;          // "" = the model's scheduler_config.json
  int batch_size = 4;
  std::optional<Tensor> init_noise;  // (outputs, C, h, w) instead of drawn noise
  pab::Schedule pab;                 // Pyramid Attention Broadcast; default off
  pab::ChangeRecorder* pab_analysis = nullptr;  // --pab-analyze: records every step's change
};

// PAB over a whole run (every batch's generation).
struct PabSummary {
  std::array<pab::KindStats, pab::kKinds> kinds{};
  int64_t cache_peak_bytes = 0;  // largest cache held at once, this rank
};

struct DitResult {
  Tensor latents;  // (outputs, C, h, w) final latents, before 1/scaling_factor
  Tensor images;   // (outputs, 3, H, W) in [0, 1]
  std::string scheduler;  // the scheduler actually used ("ddim", "dpmpp_2m")
  PabSummary pab;
};

// This rank's place in a parallel layout (DESIGN.md §4); the default is a
// single process. Communicators must outlive the pipeline.
struct ParallelRun {
  models::DitShard shard;            // tp and sp groups
  parallel::Communicator* cp = nullptr;  // the CFG pair (size 2), or null
  bool output_rank = true;           // loads the VAE, decodes and writes
};

// Called after each denoising step: (step index 0-based, steps, batch index, batches).
using StepCallback = std::function<void(int, int, int, int)>;

// A class id or name -> id (names via id2label, as DiTPipeline.get_label_ids;
// ids checked against num_classes). ConfigError naming `field` otherwise.
int64_t resolve_class_label(const std::variant<int64_t, std::string>& label,
                            const std::vector<std::pair<int, std::string>>& id2label, int64_t num_classes,
                            const std::string& field);

// The VAE's placement for a pipeline placed on `place`: the same, except
// float16 with force_upcast (vae/config.json, default true) decodes in float32.
models::Placement vae_placement(const models::Placement& place, const models::VaeConfig& vae);

class DitPipeline {
 public:
  // Reads model_index.json and the transformer/vae/scheduler parts;
  // validates every weight before any compute, then puts the weights on
  // `place` (device and compute dtype). The denoising loop's latents,
  // guidance and scheduler stay host float32 whatever the placement.
  static DitPipeline load(const std::string& model_dir, const ParallelRun& par = {},
                          const models::Placement& place = {});

  // Class names or integer ids -> ids (names via model_index.json's id2label,
  // as DiTPipeline.get_label_ids; ids checked against num_classes).
  // ConfigError naming `config_field` for an unknown name or out-of-range id.
  int64_t label_id(const std::variant<int64_t, std::string>& label, const std::string& config_field) const;
  std::string label_name(int64_t id) const;  // id2label name, or the number

  // The denoising loop alone: final latents (outputs, C, h, w).
  Tensor sample(const DitRequest& req, const StepCallback& on_step = {}, PabSummary* pab = nullptr) const;
  // Latents (before 1/scaling_factor) -> images in [0, 1]; output rank only.
  Tensor decode(const Tensor& latents) const;
  DitResult generate(const DitRequest& req, const StepCallback& on_step = {}) const;

  const models::DitTransformer& transformer() const { return *transformer_; }
  const models::VaeDecoder& vae() const { return *vae_; }  // output rank only
  const models::VaeConfig& vae_config() const { return vae_config_; }
  const io::ModelDir& model_dir() const { return dir_; }
  Shape latent_shape() const;  // (C, h, w) of one output
  const std::string& default_scheduler() const { return default_scheduler_; }  // from scheduler_config.json

 private:
  io::ModelDir dir_;
  std::shared_ptr<models::DitTransformer> transformer_;
  std::shared_ptr<models::VaeDecoder> vae_;
  models::VaeConfig vae_config_;
  ParallelRun par_;
  nlohmann::json scheduler_config_;
  std::string default_scheduler_;
  std::vector<std::pair<int, std::string>> id2label_;
};

}  // namespace ditgen::pipeline
