// DITGEN_HD marks per-element math shared by the CPU implementations and the
// CUDA kernels (__host__ __device__ under nvcc, plain inline otherwise), so
// the CPU tests check the very formulas the GPU runs.
#pragma once
#if defined(__CUDACC__)
#define DITGEN_HD __host__ __device__ __forceinline__
#else
#define DITGEN_HD inline
#endif
