#include "parallel/patch_pipeline.h"

#include <stdexcept>
#include <string>

#include "ops/ops.h"
#include "parallel/sequence_attention.h"
#include "parallel/tensor_collectives.h"
#include "parallel/token_shard.h"
#include "util/profile.h"

namespace ditgen::parallel {

Tensor& StaleKeyValues::buffer(std::vector<Tensor>& list, size_t local, const Shape& shape, Device device,
                               DType dtype) const {
  if (list.size() <= local) list.resize(local + 1);
  Tensor& t = list[local];
  if (t.shape() == shape && t.device() == device && t.dtype() == dtype) return t;
  // Made in the warm-up only (the first step of a generation is always one).
  if (!warming_up())
    throw std::logic_error("PipeFusion: key/value buffer of layer " + std::to_string(local) + " is " +
                           shape_str(t.shape()) + " after the warm-up, asked for " + shape_str(shape));
  t = Tensor::empty(shape, device, dtype);
  return t;
}

Tensor& StaleKeyValues::keys(size_t local, const Shape& shape, Device device, DType dtype) {
  return buffer(keys_, local, shape, device, dtype);
}

Tensor& StaleKeyValues::values(size_t local, const Shape& shape, Device device, DType dtype) {
  return buffer(values_, local, shape, device, dtype);
}

PatchPipeline::PatchPipeline(Communicator* pp, int64_t layers, PipelineSettings settings)
    : pp_(pp), settings_(settings) {
  if (settings.patches < 1 || settings.warmup_steps < 1)
    throw std::invalid_argument("PatchPipeline: patches " + std::to_string(settings.patches) + " and warm-up steps " +
                                std::to_string(settings.warmup_steps) + " must be >= 1");
  if (stages() > layers)
    throw std::invalid_argument("PatchPipeline: " + std::to_string(stages()) + " stages for " +
                                std::to_string(layers) + " layers");
  layers_ = settings_.layers.range(layers, stages(), stage());
  if (layers_.size() < 1)
    throw std::invalid_argument("PatchPipeline: stage " + std::to_string(stage()) + " holds no layer");
}

std::vector<Range> PatchPipeline::patches(int64_t n, const StaleKeyValues* state) const {
  if (stages() == 1 || !state || state->warming_up()) return {Range{0, n}};
  const int m = static_cast<int>(std::min<int64_t>(settings_.patches, n));
  std::vector<Range> out;
  for (int i = 0; i < m; ++i) out.push_back(even_shard(n, m, i));
  return out;
}

void PatchPipeline::receive(Tensor& hidden) const {
  if (first_stage()) return;
  profile::ScopedTimer t("pipeline_hop");
  recv(*pp_, hidden, stage() - 1);
}

void PatchPipeline::send(const Tensor& hidden) const {
  if (last_stage()) return;
  profile::ScopedTimer t("pipeline_hop");
  parallel::send(*pp_, hidden, stage() + 1);
}

void PatchPipeline::attention(int64_t layer, Range patch, int64_t n, const Tensor& q, const Tensor& k,
                              const Tensor& v, int64_t head_dim, Tensor& out, StaleKeyValues* state,
                              const SequenceParallelAttention& seq) const {
  if (!holds(layer)) throw std::logic_error("PipeFusion: layer " + std::to_string(layer) + " is not this stage's");
  if (stages() == 1) {
    seq.self_attention(q, k, v, head_dim, n, out);
    return;
  }
  if (!state && (patch.begin != 0 || patch.end != n))
    throw std::logic_error("PipeFusion: a patch without kept keys and values must be the whole image");
  const size_t local = static_cast<size_t>(layer - layers_.begin);
  // The patch's keys and values, (B, P, C') with all its tokens, into the
  // kept ones of the whole image, which the queries then read.
  const SequenceParallelAttention::KeyValueSource context = [&](const Tensor& pk, const Tensor& pv) {
    if (!state) return std::pair<Tensor, Tensor>(pk, pv);
    const int64_t b = pk.dim(0), p = patch.size(), c = pk.dim(2);
    const Shape whole{b, n, c};
    Tensor& keys = state->keys(local, whole, pk.device(), pk.dtype());
    Tensor& values = state->values(local, whole, pv.device(), pv.dtype());
    // This patch's rows of every sample: B rows of P*C elements, N*C apart.
    ops::copy_rows(pk, 0, p * c, keys, patch.begin * c, n * c, b, p * c);
    ops::copy_rows(pv, 0, p * c, values, patch.begin * c, n * c, b, p * c);
    return std::pair<Tensor, Tensor>(keys, values);
  };
  seq.self_attention(q, k, v, head_dim, patch.size(), out, context);
}

void PatchPipeline::collect_output(Communicator* sp, const Sharding& split, const Tensor& rows, Range patch, int64_t n,
                                   Tensor& out) const {
  Tensor whole = gather_tokens(sp, rows, patch.size(), split);  // (B, P, R)
  if (patch.begin == 0 && patch.end == n) {
    out = whole;
    return;
  }
  const int64_t b = whole.dim(0), r = whole.dim(2), p = patch.size();
  if (!out.defined()) out = Tensor::empty({b, n, r}, whole.device(), whole.dtype());
  ops::copy_rows(whole, 0, p * r, out, patch.begin * r, n * r, b, p * r);
}

void PatchPipeline::share_output(Tensor& out, const Shape& shape, Device device, DType dtype) const {
  if (stages() == 1) return;
  if (!last_stage()) out = Tensor::empty(shape, device, dtype);
  profile::ScopedTimer t("pipeline_hop");
  broadcast(*pp_, out, stages() - 1);
}

}  // namespace ditgen::parallel
