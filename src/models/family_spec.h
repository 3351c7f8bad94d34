// What every family's registry entry shares. FamilySpec<Config, Model>
// answers the TransformerSpec questions that its config's sizes
// (models/transformer_sizes.h) settle, holds the parsed
// config, loads the family's model class behind the generic Transformer
// interface (TransformerOf), and counts weights and builds the Workload from
// the tensors the model class declares (Model::stem_tensors, and
// Model::layer_tensors of layer 0, which stands for every layer's). A
// family's spec derives from it and answers the rest: its latent shapes and
// its layers' attention operations; make_spec<Spec> is its registry row's
// factory.
//
// A family's model class (DitTransformer, PixArtTransformer, ...) has:
//   static nn::TensorDecls stem_tensors(const Config&)   what it holds once,
//   static nn::TensorDecls layer_tensors(const Config&, int64_t layer)
//                                                      and layer i's, whole as stored;
//   static Model load(weights, cfg, shard = {}, place = {})
//     validates every tensor's name and shape against those lists before any
//     is read, then loads this rank's part onto `place`; the shard's
//     communicators must outlive the model;
//   Tensor forward(const ForwardArgs&) const
//     the prediction, host float32, on every rank of the shard.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/nn/tensor_decl.h"
#include "models/shard_groups.h"
#include "models/transformer.h"
#include "models/transformer_sizes.h"

namespace ditgen::models {

// The generic Transformer over a model class with forward(const ForwardArgs&).
template <class Model>
class TransformerOf final : public Transformer {
 public:
  explicit TransformerOf(Model model) : model_(std::move(model)) {}
  Tensor forward(const ForwardArgs& args) const override { return model_.forward(args); }

 private:
  Model model_;
};

// Parameters of a model whose layers each hold tensors like layer 0's.
template <class Model, class Config>
int64_t layered_param_count(const Config& cfg) {
  return static_cast<int64_t>(cfg.num_layers * nn::count_elements(Model::layer_tensors(cfg, 0)).total() +
                              nn::count_elements(Model::stem_tensors(cfg)).total());
}

template <class ConfigType, class Model>
class FamilySpec : public TransformerSpec {
 public:
  using Config = ConfigType;
  FamilySpec(Config cfg, FamilyTraits traits) : TransformerSpec(std::move(traits)), cfg_(std::move(cfg)) {}

  int64_t num_layers() const override { return cfg_.num_layers; }
  int64_t head_dim() const override { return cfg_.head_dim; }
  int64_t in_channels() const override { return cfg_.in_channels; }
  int64_t out_channels() const override { return cfg_.out_channels; }

  std::unique_ptr<Transformer> load(const io::WeightStore& weights, const ShardGroups& shard,
                                    const Placement& place) const override {
    return std::make_unique<TransformerOf<Model>>(Model::load(weights, cfg_, shard, place));
  }

  void check_weights(const io::WeightStore& weights) const override {
    nn::check_model_tensors(weights, Model::stem_tensors(cfg_), cfg_.num_layers,
                            [&](int64_t i) { return Model::layer_tensors(cfg_, i); }, {}, "");
  }

  const Config& config() const { return cfg_; }

 protected:
  // sized_workload over the model's declared tensors.
  parallel::Workload sized(const Shape& latent, const std::vector<parallel::AttentionKind>& attention,
                           int64_t feed_forwards) const {
    return sized_workload(cfg_, latent, attention, feed_forwards, Model::layer_tensors(cfg_, 0),
                          Model::stem_tensors(cfg_));
  }

  Config cfg_;
};

// What every family's Model::load checks before it reads any tensor: that
// the layout's shard fits the model (check_shard_fits: tp and Ulysses
// divide the heads and the MLP, dsp meets frames it can shard; `family`
// names the model) and that every tensor the model declares is in the
// store with its shape (nn::check_model_tensors over Model::stem_tensors and
// each layer's Model::layer_tensors; `lists` the layer lists' prefixes, and
// `probe` a tensor each layer holds, to catch layers past num_layers).
template <class Model, class Config>
void check_before_load(const io::WeightStore& weights, const Config& cfg, const ShardGroups& shard,
                       FrameSharding frames, const char* family, const std::vector<std::string>& lists,
                       const std::string& probe) {
  check_shard_fits(shard, cfg.num_heads, cfg.ff_inner_dim, frames, family);
  nn::check_model_tensors(weights, Model::stem_tensors(cfg), cfg.num_layers,
                          [&](int64_t i) { return Model::layer_tensors(cfg, i); }, lists, probe);
}

// A registry row's factory: the Spec of a parsed config.json.
template <class Spec>
std::unique_ptr<TransformerSpec> make_spec(const nlohmann::json& cfg, const std::string& path) {
  return std::make_unique<Spec>(Spec::Config::from_json(cfg, path));
}

}  // namespace ditgen::models
