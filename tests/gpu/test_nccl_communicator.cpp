// NcclCommunicator on one GPU, as a one-rank communicator bootstrapped from a
// SelfCommunicator: every collective and the own-share copies run for real
// (device pointers, stream order), and the shared front end keeps its checks
// and byte accounting. Multi-rank runs need a GPU per rank (not in CI).
#ifdef DITGEN_WITH_NCCL
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/nccl_communicator.h"
#include "kernels/cuda/device.h"

namespace cuda = ditgen::cuda;
using ditgen::parallel::NcclCommunicator;
using ditgen::parallel::SelfCommunicator;

namespace {

cuda::DeviceBuffer upload(const std::vector<float>& values) {
  cuda::DeviceBuffer buffer(values.size() * sizeof(float));
  cuda::copy_to_device(buffer.get(), values.data(), values.size() * sizeof(float));
  return buffer;
}

std::vector<float> download(const cuda::DeviceBuffer& buffer, size_t count) {
  std::vector<float> values(count);
  cuda::copy_to_host(values.data(), buffer.get(), count * sizeof(float));
  return values;
}

}  // namespace

TEST_CASE("nccl communicator: one rank, every collective on device memory") {
  cuda::set_device(0);
  SelfCommunicator bootstrap;
  NcclCommunicator comm(bootstrap);
  CHECK(comm.rank() == 0);
  CHECK(comm.size() == 1);

  const std::vector<float> values = {1, 2, 3, 4};
  cuda::DeviceBuffer data = upload(values);
  cuda::DeviceBuffer out(values.size() * sizeof(float));

  comm.all_reduce_sum(data.as<float>(), 4);
  CHECK(download(data, 4) == values);

  comm.all_gather(data.as<float>(), 4, out.as<float>());
  CHECK(download(out, 4) == values);

  cuda::DeviceBuffer zeros = upload({0, 0, 0, 0});
  comm.all_gather_v(data.as<float>(), 4, zeros.as<float>(), {4});
  CHECK(download(zeros, 4) == values);

  cuda::DeviceBuffer a2a = upload({0, 0, 0, 0});
  comm.all_to_all_v(data.as<float>(), {4}, a2a.as<float>(), {4});
  CHECK(download(a2a, 4) == values);

  cuda::DeviceBuffer exchanged = upload({0, 0, 0, 0});
  comm.send_recv(data.as<float>(), 4, 0, exchanged.as<float>(), 4, 0);
  CHECK(download(exchanged, 4) == values);

  comm.broadcast(data.as<float>(), 4, 0);
  comm.barrier();
  CHECK(download(data, 4) == values);
  CHECK(comm.bytes_sent() == 0);  // nothing leaves a one-rank communicator

  CHECK_THROWS_AS(comm.send_recv(data.as<float>(), 4, 0, out.as<float>(), 3, 0),
                  std::invalid_argument);
}
#endif  // DITGEN_WITH_NCCL
