// Class-conditional generation (DiT), as diffusers' DiTPipeline does it:
// Philox noise per output (seed + i), the denoising loop with
// classifier-free guidance on the eps channels (learned sigma dropped; the
// unconditional half uses the null class, id num_classes), the scheduler
// step, then the shared VAE decode stage. Outputs are generated batch_size
// at a time (twice that with CFG); each output's result does not depend on
// the batch it falls into.
//
// Under a parallel layout every rank runs this loop in lockstep: with cp = 2
// each rank of a CFG pair runs one half of the guidance batch (cond on cp
// rank 0, the null class on cp rank 1) and the two exchange their eps, so
// both apply guidance and the scheduler step identically; tp and sp work
// inside the transformer. Only the output rank loads the VAE and decodes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pipeline/pipeline.h"

namespace ditgen::pipeline {

// A class id or name -> id (names via id2label, as DiTPipeline.get_label_ids;
// ids checked against num_classes). ConfigError naming `field` otherwise.
int64_t resolve_class_label(const std::variant<int64_t, std::string>& label,
                            const std::vector<std::pair<int, std::string>>& id2label, int64_t num_classes,
                            const std::string& field);

class ClassPipeline final : public Pipeline {
 public:
  explicit ClassPipeline(ModelParts parts);

  // Pipeline::open + load_weights, for callers that know the model is
  // class-conditional (tests, benchmarks).
  static ClassPipeline load(const std::string& model_dir, const ParallelRun& par = {},
                            const models::Placement& place = {});

  Request prepare(const GenerateConfig& generate, const std::string& where) const override;
  void load_weights(const ParallelRun& par, const models::Placement& place, DType vae_dtype = DType::kF32) override;
  // The class ids, checked against the model (a Request built by hand may
  // hold anything).
  Conditions condition(const Request& req) const override;
  Tensor denoise(const Request& req, const Conditions& cond, const StepCallback& on_step = {},
                 PabSummary* pab = nullptr) const override;

  // Class names or integer ids -> ids (names via model_index.json's id2label,
  // as DiTPipeline.get_label_ids; ids checked against num_classes).
  // ConfigError naming `config_field` for an unknown name or out-of-range id.
  int64_t label_id(const std::variant<int64_t, std::string>& label, const std::string& config_field) const;
  std::string label_name(int64_t id) const;  // id2label name, or the number
  Shape latent_shape() const;                // (C, h, w) of one output at the model's default size

 private:
  std::shared_ptr<models::Transformer> transformer_;
  std::vector<std::pair<int, std::string>> id2label_;
};

}  // namespace ditgen::pipeline
