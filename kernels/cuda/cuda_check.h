// Error checks for the CUDA runtime, cuBLAS and NCCL: a failing call becomes
// ditgen::RuntimeFailure (exit code 4, docs/design.md §1) whose message names the
// call as written, the library's own message, and the source location, e.g.
//   CUDA error: cudaMalloc(&p, bytes): out of memory (kernels/cuda/device.cpp:42)
// NCCL's check lives with the NCCL communicator (src/parallel), the only NCCL user.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace ditgen::cuda {

[[noreturn]] void throw_error(const char* library, const char* call, const char* message, const char* file,
                              int line);

}  // namespace ditgen::cuda

#define DITGEN_CUDA_CHECK(call)                                                                 \
  do {                                                                                          \
    const cudaError_t ditgen_err_ = (call);                                                     \
    if (ditgen_err_ != cudaSuccess)                                                             \
      ::ditgen::cuda::throw_error("CUDA", #call, cudaGetErrorString(ditgen_err_), __FILE__, __LINE__); \
  } while (0)

// Checks the launch of the kernel just started on this thread (bad grid,
// missing image for this GPU); faults inside it surface at the next sync.
#define DITGEN_CUDA_CHECK_LAUNCH() DITGEN_CUDA_CHECK(cudaGetLastError())

#define DITGEN_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                              \
    const cublasStatus_t ditgen_st_ = (call);                                                       \
    if (ditgen_st_ != CUBLAS_STATUS_SUCCESS)                                                        \
      ::ditgen::cuda::throw_error("cuBLAS", #call, cublasGetStatusString(ditgen_st_), __FILE__, __LINE__); \
  } while (0)
