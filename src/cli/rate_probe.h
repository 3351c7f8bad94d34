// This machine's rates for `plan`'s time estimate, measured in about a
// second: a GEMM at the run's width in its weights' dtype (ops::linear,
// the kernel the transformer's projections and MLPs run on: what most of a
// step's time goes to) and the memory bandwidth (threads copying 64 MiB
// buffers, what the elementwise ops and the weights' reads are bound by).
// An estimate: the machine's load, caches and clocks change it, and
// attention kernels reach less than a GEMM.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace ditgen::cli {

struct MachineRates {
  double flops_per_second = 0;  // the GEMM's
  double bytes_per_second = 0;  // memory read plus written
  int threads = 1;
  double seconds = 0;  // the probe's own time
};

// `rows` (the token rows a rank's GEMMs take, M), `width` (the model's
// hidden size, K) and `inner` (its MLP width, N), each capped so the
// probe's buffers stay tens of MiB; `weights` the GEMM weights' dtype;
// `threads` the run's per rank.
MachineRates measure_rates(int64_t rows, int64_t width, int64_t inner, DType weights, int threads);

// One small GEMM of `width` in `weights` on `threads` threads: starts the
// thread pool and the GEMM library's kernels, what every run holds from
// its first step on, so the process's resident bytes measured after it
// count them (pipeline/run_memory.h's "the process itself"). Milliseconds.
void warm_up_compute(int64_t width, DType weights, int threads);

}  // namespace ditgen::cli
