// The shared half of every communicator: argument checks and the byte
// accounting of communicator.h, then the implementation's do_* call. Also
// SelfCommunicator, where every collective degenerates to a copy. Under
// DITGEN_PROFILE every collective is timed as "communication" (waiting for
// peers included), so benchmarks can tell compute from communication.
#include "parallel/communicator.h"

#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "util/profile.h"

namespace ditgen::parallel {

namespace {

constexpr int64_t kFloatBytes = static_cast<int64_t>(sizeof(float));

void check_count(int64_t count, const char* what) {
  if (count < 0) {
    throw std::invalid_argument(std::string(what) + ": negative count " + std::to_string(count));
  }
}

}  // namespace

void Communicator::check_rank(int r, const char* what) const {
  if (r < 0 || r >= size()) {
    throw std::invalid_argument(std::string(what) + ": rank " + std::to_string(r) +
                                " outside a communicator of size " + std::to_string(size()));
  }
}

void Communicator::check_counts(const std::vector<int64_t>& counts, const char* what) const {
  if (counts.size() != static_cast<size_t>(size())) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(counts.size()) +
                                " counts for a communicator of size " + std::to_string(size()));
  }
  for (int64_t c : counts) check_count(c, what);
}

void Communicator::all_reduce_sum(float* data, int64_t count) {
  profile::ScopedTimer timer("communication");
  check_count(count, "all_reduce_sum");
  const int64_t n = size();
  bytes_sent_ += 2 * (n - 1) * count * kFloatBytes / n;
  if (n > 1 && count > 0) do_all_reduce_sum(data, count);
}

void Communicator::all_gather(const float* send, int64_t count, float* recv) {
  profile::ScopedTimer timer("communication");
  check_count(count, "all_gather");
  bytes_sent_ += (size() - 1) * count * kFloatBytes;
  if (count > 0) do_all_gather(send, count, recv);
}

void Communicator::all_gather_v(const float* send, int64_t count, float* recv,
                                const std::vector<int64_t>& counts) {
  profile::ScopedTimer timer("communication");
  check_counts(counts, "all_gather_v");
  if (counts[rank()] != count) {
    throw std::invalid_argument("all_gather_v: count " + std::to_string(count) +
                                " differs from counts[" + std::to_string(rank()) +
                                "] = " + std::to_string(counts[rank()]));
  }
  bytes_sent_ += (size() - 1) * count * kFloatBytes;
  do_all_gather_v(send, count, recv, counts);
}

void Communicator::all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                                float* recv, const std::vector<int64_t>& recv_counts) {
  profile::ScopedTimer timer("communication");
  check_counts(send_counts, "all_to_all_v send_counts");
  check_counts(recv_counts, "all_to_all_v recv_counts");
  const int64_t total = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
  bytes_sent_ += (total - send_counts[rank()]) * kFloatBytes;
  do_all_to_all_v(send, send_counts, recv, recv_counts);
}

void Communicator::send_recv(const float* send, int64_t send_count, int dest, float* recv,
                             int64_t recv_count, int source) {
  profile::ScopedTimer timer("communication");
  check_count(send_count, "send_recv");
  check_count(recv_count, "send_recv");
  check_rank(dest, "send_recv dest");
  check_rank(source, "send_recv source");
  if (dest != rank()) bytes_sent_ += send_count * kFloatBytes;
  do_send_recv(send, send_count, dest, recv, recv_count, source);
}

void Communicator::send(const float* data, int64_t count, int dest) {
  profile::ScopedTimer timer("communication");
  check_count(count, "send");
  check_rank(dest, "send dest");
  if (dest == rank()) throw std::invalid_argument("send: rank " + std::to_string(dest) + " sends to itself");
  bytes_sent_ += count * kFloatBytes;
  if (count > 0) do_send(data, count, dest);
}

void Communicator::recv(float* data, int64_t count, int source) {
  profile::ScopedTimer timer("communication");
  check_count(count, "recv");
  check_rank(source, "recv source");
  if (source == rank()) throw std::invalid_argument("recv: rank " + std::to_string(source) + " receives from itself");
  if (count > 0) do_recv(data, count, source);
}

void Communicator::broadcast(float* data, int64_t count, int root) {
  check_count(count, "broadcast");
  broadcast_bytes(data, static_cast<size_t>(count) * sizeof(float), root);
}

void Communicator::broadcast_bytes(void* data, size_t nbytes, int root) {
  check_rank(root, "broadcast root");
  if (rank() == root) bytes_sent_ += (size() - 1) * static_cast<int64_t>(nbytes);
  if (size() > 1 && nbytes > 0) do_broadcast_bytes(data, nbytes, root);
}

void Communicator::barrier() {
  if (size() > 1) do_barrier();
}

// --- SelfCommunicator: rank 0 of 1, so "gather" and "exchange" are copies.
// memmove: callers may legitimately pass the same buffer for send and recv.

void SelfCommunicator::do_all_gather(const float* send, int64_t count, float* recv) {
  std::memmove(recv, send, static_cast<size_t>(count) * sizeof(float));
}

void SelfCommunicator::do_all_gather_v(const float* send, int64_t count, float* recv,
                                       const std::vector<int64_t>&) {
  if (count > 0) std::memmove(recv, send, static_cast<size_t>(count) * sizeof(float));
}

void SelfCommunicator::do_all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                                       float* recv, const std::vector<int64_t>& recv_counts) {
  if (send_counts[0] != recv_counts[0]) {
    throw std::invalid_argument("all_to_all_v: rank 0 sends " + std::to_string(send_counts[0]) +
                                " floats to itself but expects " + std::to_string(recv_counts[0]));
  }
  if (send_counts[0] > 0) {
    std::memmove(recv, send, static_cast<size_t>(send_counts[0]) * sizeof(float));
  }
}

void SelfCommunicator::do_send_recv(const float* send, int64_t send_count, int, float* recv,
                                    int64_t recv_count, int) {
  if (send_count != recv_count) {
    throw std::invalid_argument("send_recv: rank 0 sends " + std::to_string(send_count) +
                                " floats to itself but expects " + std::to_string(recv_count));
  }
  if (send_count > 0) std::memmove(recv, send, static_cast<size_t>(send_count) * sizeof(float));
}

std::unique_ptr<Communicator> make_self_communicator() {
  return std::make_unique<SelfCommunicator>();
}

}  // namespace ditgen::parallel
