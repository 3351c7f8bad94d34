// See cfg_combiner.h. The arithmetic is diffusers' (uncond + g * (cond -
// uncond), in float32, in that order), so the latents match its pipelines
// bit for bit where the forward does.
#include "pipeline/cfg_combiner.h"

#include <cstring>
#include <stdexcept>

namespace ditgen::pipeline {

CfgCombiner::CfgCombiner(bool guidance, parallel::Communicator* cp)
    : guidance_(guidance), cp_(cp && cp->size() == 2 ? cp : nullptr) {
  if (cp_ && !guidance_)
    throw std::logic_error("CfgCombiner: a CFG pair (cp = 2) without guidance (the layout check refuses it)");
  if (split()) halves_ = {cp_->rank() == 1};
  else if (guidance_) halves_ = {false, true};
  else halves_ = {false};
}

void CfgCombiner::combine(const Tensor& out, int64_t count, int64_t eps_values, int64_t out_stride, float g,
                          Tensor& eps) const {
  const int64_t n = eps_values;
  const float* cond_eps = out.data();
  const float* uncond_eps = guidance_ ? out.data() + count * out_stride : nullptr;
  int64_t stride = out_stride;
  Tensor both;  // cp: [cond, uncond] eps, (2, count, n)
  if (split()) {
    Tensor mine = Tensor::empty({count, n});
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(mine.data() + i * n, out.data() + i * out_stride, static_cast<size_t>(n) * sizeof(float));
    both = Tensor::empty({2, count, n});
    cp_->all_gather(mine.data(), mine.numel(), both.data());
    cond_eps = both.data();
    uncond_eps = both.data() + count * n;
    stride = n;
  }
  const int64_t per_output = eps.numel() / count;
  for (int64_t i = 0; i < count; ++i) {
    const float* cond = cond_eps + i * stride;
    float* e = eps.data() + i * per_output;
    if (guidance_) {
      const float* uncond = uncond_eps + i * stride;
      for (int64_t j = 0; j < n; ++j) e[j] = uncond[j] + g * (cond[j] - uncond[j]);
    } else {
      std::memcpy(e, cond, static_cast<size_t>(n) * sizeof(float));
    }
  }
}

}  // namespace ditgen::pipeline
