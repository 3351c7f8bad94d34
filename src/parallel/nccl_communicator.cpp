// NcclCommunicator: each collective is one NCCL call, or one NCCL group of
// point-to-point sends and receives (the v-collectives), enqueued on
// cuda::stream(). A rank's own share never goes through NCCL: it is one
// device-to-device copy on the same stream.
#include "parallel/nccl_communicator.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"

// Any NCCL failure becomes a RuntimeFailure: the call as written, NCCL's
// message and its last error detail (which names the peer, the transport...).
#define DITGEN_NCCL_CHECK(call)                                                        \
  do {                                                                                 \
    const ncclResult_t ditgen_nccl_rc_ = (call);                                       \
    if (ditgen_nccl_rc_ != ncclSuccess) nccl_failure(#call, ditgen_nccl_rc_, __FILE__, __LINE__); \
  } while (0)

namespace ditgen::parallel {

namespace {

[[noreturn]] void nccl_failure(const char* call, ncclResult_t rc, const char* file, int line) {
  std::string message = ncclGetErrorString(rc);
  const char* detail = ncclGetLastError(nullptr);
  if (detail != nullptr && detail[0] != '\0') message += " (" + std::string(detail) + ")";
  cuda::throw_error("NCCL", call, message.c_str(), file, line);
}

std::vector<int64_t> prefix_sums(const std::vector<int64_t>& counts) {
  std::vector<int64_t> displs(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

size_t elements(int64_t count) { return static_cast<size_t>(count); }

// The rank's own share, device to device, in stream order with the NCCL
// calls around it.
void copy_own_share(float* dst, const float* src, int64_t count) {
  if (count == 0 || dst == src) return;
  DITGEN_CUDA_CHECK(cudaMemcpyAsync(dst, src, elements(count) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, cuda::stream()));
}

void check_own_share(int64_t sent, int64_t expected, int rank, const char* what) {
  if (sent != expected) {
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(rank) + " sends " +
                                std::to_string(sent) + " floats to itself but expects " +
                                std::to_string(expected));
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap)
    : rank_(bootstrap.rank()), size_(bootstrap.size()) {
  ncclUniqueId id{};
  if (rank_ == 0) DITGEN_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast_bytes(&id, sizeof id, 0);
  // NCCL attaches to the calling thread's current device: bind it first
  // (a no-op when set_device() was called, as it should be).
  cuda::current_device();
  DITGEN_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
  barrier_scratch_ = cuda::DeviceBuffer(sizeof(float));
  DITGEN_CUDA_CHECK(cudaMemsetAsync(barrier_scratch_.get(), 0, sizeof(float), cuda::stream()));
}

NcclCommunicator::~NcclCommunicator() {
  // Completes this rank's queued operations, then frees the communicator. A
  // failure cannot be reported from a destructor; the process is ending.
  if (comm_ != nullptr) ncclCommDestroy(comm_);
}

void NcclCommunicator::do_all_reduce_sum(float* data, int64_t count) {
  DITGEN_NCCL_CHECK(ncclAllReduce(data, data, elements(count), ncclFloat, ncclSum, comm_,
                                  cuda::stream()));
}

void NcclCommunicator::do_all_gather(const float* send, int64_t count, float* recv) {
  DITGEN_NCCL_CHECK(ncclAllGather(send, recv, elements(count), ncclFloat, comm_, cuda::stream()));
}

void NcclCommunicator::do_all_gather_v(const float* send, int64_t count, float* recv,
                                       const std::vector<int64_t>& counts) {
  if (std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == count; })) {
    if (count > 0) do_all_gather(send, count, recv);
    return;
  }
  // Uneven shards: the own shard to every other rank, theirs from each.
  const std::vector<int64_t> displs = prefix_sums(counts);
  DITGEN_NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    if (count > 0) {
      DITGEN_NCCL_CHECK(ncclSend(send, elements(count), ncclFloat, peer, comm_, cuda::stream()));
    }
    if (counts[peer] > 0) {
      DITGEN_NCCL_CHECK(ncclRecv(recv + displs[peer], elements(counts[peer]), ncclFloat, peer,
                                 comm_, cuda::stream()));
    }
  }
  DITGEN_NCCL_CHECK(ncclGroupEnd());
  copy_own_share(recv + displs[rank_], send, count);
}

void NcclCommunicator::do_all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                                       float* recv, const std::vector<int64_t>& recv_counts) {
  check_own_share(send_counts[rank_], recv_counts[rank_], rank_, "all_to_all_v");
  const std::vector<int64_t> send_displs = prefix_sums(send_counts);
  const std::vector<int64_t> recv_displs = prefix_sums(recv_counts);
  // Zero-count messages are skipped on both sides alike: recv_counts[j]
  // equals rank j's send_counts[rank] (the interface's contract).
  DITGEN_NCCL_CHECK(ncclGroupStart());
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    if (send_counts[peer] > 0) {
      DITGEN_NCCL_CHECK(ncclSend(send + send_displs[peer], elements(send_counts[peer]), ncclFloat,
                                 peer, comm_, cuda::stream()));
    }
    if (recv_counts[peer] > 0) {
      DITGEN_NCCL_CHECK(ncclRecv(recv + recv_displs[peer], elements(recv_counts[peer]), ncclFloat,
                                 peer, comm_, cuda::stream()));
    }
  }
  DITGEN_NCCL_CHECK(ncclGroupEnd());
  copy_own_share(recv + recv_displs[rank_], send + send_displs[rank_], send_counts[rank_]);
}

void NcclCommunicator::do_send_recv(const float* send, int64_t send_count, int dest, float* recv,
                                    int64_t recv_count, int source) {
  if (dest == rank_ || source == rank_) {
    if (dest != source) {
      throw std::invalid_argument("send_recv: rank " + std::to_string(rank_) + " sends to " +
                                  std::to_string(dest) + " but receives from " +
                                  std::to_string(source) +
                                  "; a rank exchanging with itself must do both halves");
    }
    check_own_share(send_count, recv_count, rank_, "send_recv");
    copy_own_share(recv, send, send_count);
    return;
  }
  DITGEN_NCCL_CHECK(ncclGroupStart());
  if (send_count > 0) {
    DITGEN_NCCL_CHECK(ncclSend(send, elements(send_count), ncclFloat, dest, comm_, cuda::stream()));
  }
  if (recv_count > 0) {
    DITGEN_NCCL_CHECK(ncclRecv(recv, elements(recv_count), ncclFloat, source, comm_, cuda::stream()));
  }
  DITGEN_NCCL_CHECK(ncclGroupEnd());
}

void NcclCommunicator::do_send(const float* data, int64_t count, int dest) {
  DITGEN_NCCL_CHECK(ncclSend(data, elements(count), ncclFloat, dest, comm_, cuda::stream()));
}

void NcclCommunicator::do_recv(float* data, int64_t count, int source) {
  DITGEN_NCCL_CHECK(ncclRecv(data, elements(count), ncclFloat, source, comm_, cuda::stream()));
}

void NcclCommunicator::do_broadcast_bytes(void* data, size_t nbytes, int root) {
  DITGEN_NCCL_CHECK(ncclBroadcast(data, data, nbytes, ncclUint8, root, comm_, cuda::stream()));
}

void NcclCommunicator::do_barrier() {
  // NCCL has no barrier: a one-float all-reduce completes only when every
  // rank has joined it, and draining the stream waits for that. (max, not
  // sum: the zero stays zero however many barriers run.)
  DITGEN_NCCL_CHECK(ncclAllReduce(barrier_scratch_.get(), barrier_scratch_.get(), 1, ncclFloat,
                                  ncclMax, comm_, cuda::stream()));
  cuda::synchronize();
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap) {
  return std::make_unique<NcclCommunicator>(bootstrap);
}

}  // namespace ditgen::parallel
