// The CUDA runtime of kernels/cuda/device.h on a real GPU (part of test_gpu,
// skipped where no device is visible): binding, the stream and cuBLAS
// handle, the caching allocator over cudaMalloc, blocking copies, and the
// error checks. The allocator's bookkeeping itself is tested on CPU
// (tests/cuda_host).
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"
#include "util/error.h"

namespace cuda = ditgen::cuda;

TEST_CASE("cuda runtime: binds device 0 with a non-blocking stream and a true-fp32 cuBLAS handle") {
  REQUIRE(cuda::device_count() > 0);
  cuda::set_device(0);
  cuda::set_device(0);  // the same device again: a no-op
  CHECK(cuda::current_device() == 0);
  const cuda::DeviceInfo& info = cuda::current_device_info();
  CHECK(info.major >= 7);
  CHECK(info.total_memory > 0);
  CHECK(info.multiprocessors > 0);
  CHECK(!info.name.empty());

  unsigned int flags = 0;
  REQUIRE(cudaStreamGetFlags(cuda::stream(), &flags) == cudaSuccess);
  CHECK((flags & cudaStreamNonBlocking) != 0);
  cudaStream_t bound = nullptr;
  REQUIRE(cublasGetStream(cuda::cublas(), &bound) == CUBLAS_STATUS_SUCCESS);
  CHECK(bound == cuda::stream());

  cublasMath_t mode{};
  REQUIRE(cublasGetMathMode(cuda::cublas(), &mode) == CUBLAS_STATUS_SUCCESS);
  constexpr unsigned kNoReducedReduction = CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  CHECK(unsigned(mode) == (unsigned(CUBLAS_DEFAULT_MATH) | kNoReducedReduction));
  cuda::set_allow_tf32(true);
  REQUIRE(cublasGetMathMode(cuda::cublas(), &mode) == CUBLAS_STATUS_SUCCESS);
  CHECK(unsigned(mode) == (unsigned(CUBLAS_TF32_TENSOR_OP_MATH) | kNoReducedReduction));
  CHECK(cuda::tf32_allowed());
  cuda::set_allow_tf32(false);
  CHECK(!cuda::tf32_allowed());

  if (cuda::device_count() > 1) CHECK_THROWS_AS(cuda::set_device(1), std::logic_error);
}

TEST_CASE("cuda runtime: copies round-trip and cuBLAS runs on the stream in float32") {
  const int n = 3;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, 9}, identity = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  cuda::DeviceBuffer da(a.size() * sizeof(float)), di(a.size() * sizeof(float)),
      dc(a.size() * sizeof(float));
  cuda::copy_to_device(da.get(), a.data(), a.size() * sizeof(float));
  cuda::copy_to_device(di.get(), identity.data(), identity.size() * sizeof(float));
  const float one = 1.0f, zero = 0.0f;
  DITGEN_CUBLAS_CHECK(cublasSgemm(cuda::cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                                  da.as<float>(), n, di.as<float>(), n, &zero, dc.as<float>(), n));
  std::vector<float> c(a.size());
  cuda::copy_to_host(c.data(), dc.get(), c.size() * sizeof(float));
  CHECK(c == a);
}

TEST_CASE("cuda runtime: the allocator reuses blocks and releases its cache") {
  // Bind the device first: binding takes cuBLAS's workspace (32 MiB on
  // Hopper) from this allocator, which would otherwise land inside the counts
  // below (seen on an H100: one driver allocation and 32 MiB in use too many).
  (void)cuda::cublas();
  cuda::release_cached();
  const auto start = cuda::allocator_stats();
  for (int step = 0; step < 3; ++step) {
    cuda::DeviceBuffer big(64 << 20), small(1000), medium(3 << 20);
    CHECK(reinterpret_cast<uintptr_t>(small.get()) % 256 == 0);
  }
  const auto after = cuda::allocator_stats();
  CHECK(after.driver_allocs == start.driver_allocs + 3);  // the first step only
  CHECK(after.in_use == start.in_use);
  CHECK(after.cached == (64u << 20) + 1024 + (4u << 20));
  CHECK(after.peak_in_use >= start.in_use + (68u << 20) + 1024);
  cuda::release_cached();
  CHECK(cuda::allocator_stats().cached == 0);

  int host_value = 0;
  CHECK_THROWS_AS(cuda::device_free(&host_value), std::invalid_argument);
}

TEST_CASE("cuda runtime: an impossible allocation is a RuntimeFailure, and the device stays usable") {
  const size_t too_much = cuda::current_device_info().total_memory * 2;
  CHECK_THROWS_WITH_AS(cuda::device_alloc(too_much), doctest::Contains("out of CUDA device memory"),
                       ditgen::RuntimeFailure);
  cuda::DeviceBuffer fine(1 << 20);
  cuda::synchronize();
}

TEST_CASE("cuda runtime: failing calls name the call, CUDA's message and the source line") {
  try {
    DITGEN_CUDA_CHECK(cudaSetDevice(-1));
    FAIL("expected RuntimeFailure");
  } catch (const ditgen::RuntimeFailure& e) {
    const std::string message = e.what();
    CHECK(message.rfind("CUDA error: cudaSetDevice(-1): ", 0) == 0);
    CHECK(message.find("(tests/gpu/test_device_runtime.cpp:") != std::string::npos);
  }
  cudaGetLastError();
  CHECK(cudaSetDevice(cuda::current_device()) == cudaSuccess);
}
