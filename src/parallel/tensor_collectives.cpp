#include "parallel/tensor_collectives.h"

#include <numeric>
#include <stdexcept>
#include <string>

namespace ditgen::parallel {

namespace {

// Where and how the communicator wants its payloads.
Device comm_device(const Communicator& comm) { return comm.takes_device_memory() ? Device::kCUDA : Device::kCPU; }

bool direct(const Communicator& comm, const Tensor& t) {
  return t.device() == comm_device(comm) && t.dtype() == DType::kF32;
}

// The tensor as the communicator takes it: itself, or a float32 copy of its
// first n elements in the communicator's memory.
Tensor payload(const Communicator& comm, const Tensor& t, int64_t n) {
  Tensor flat = t.reshape({t.numel()}).slice0(0, n);
  return direct(comm, t) ? flat : flat.to(comm_device(comm), DType::kF32);
}

// A float32 buffer of n elements for comm to write into, standing in for t.
Tensor receiver(const Communicator& comm, Tensor& t, int64_t n) {
  Tensor flat = t.reshape({t.numel()}).slice0(0, n);
  return direct(comm, t) ? flat : Tensor::empty({n}, comm_device(comm), DType::kF32);
}

// Copies a staged result back into t's first n elements.
void deliver(const Communicator& comm, const Tensor& staged, Tensor& t, int64_t n) {
  if (direct(comm, t)) return;
  Tensor flat = t.reshape({t.numel()}).slice0(0, n);
  flat.copy_from(staged);
}

float* ptr(Tensor& t) { return static_cast<float*>(t.raw()); }
const float* ptr(const Tensor& t) { return static_cast<const float*>(t.raw()); }

void need(bool ok, const char* op, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

}  // namespace

void all_reduce_sum(Communicator& comm, Tensor& data) {
  const int64_t n = data.numel();
  Tensor buf = payload(comm, data, n);
  comm.all_reduce_sum(ptr(buf), n);
  deliver(comm, buf, data, n);
}

void all_gather(Communicator& comm, const Tensor& send, Tensor& recv) {
  const int64_t n = send.numel(), total = n * comm.size();
  need(recv.numel() >= total, "all_gather", "receive tensor " + shape_str(recv.shape()) + " holds fewer than " +
                                                std::to_string(total) + " elements");
  const Tensor s = payload(comm, send, n);
  Tensor r = receiver(comm, recv, total);
  comm.all_gather(ptr(s), n, ptr(r));
  deliver(comm, r, recv, total);
}

void all_gather_v(Communicator& comm, const Tensor& send, Tensor& recv, const std::vector<int64_t>& counts) {
  const int64_t n = send.numel(), total = sum(counts);
  need(recv.numel() >= total, "all_gather_v", "receive tensor " + shape_str(recv.shape()) + " holds fewer than " +
                                                  std::to_string(total) + " elements");
  const Tensor s = payload(comm, send, n);
  Tensor r = receiver(comm, recv, total);
  comm.all_gather_v(ptr(s), n, ptr(r), counts);
  deliver(comm, r, recv, total);
}

void all_to_all_v(Communicator& comm, const Tensor& send, const std::vector<int64_t>& send_counts, Tensor& recv,
                  const std::vector<int64_t>& recv_counts) {
  const int64_t ns = sum(send_counts), nr = sum(recv_counts);
  need(send.numel() >= ns && recv.numel() >= nr, "all_to_all_v",
       "counts (" + std::to_string(ns) + " out, " + std::to_string(nr) + " in) exceed the tensors " +
           shape_str(send.shape()) + " and " + shape_str(recv.shape()));
  const Tensor s = payload(comm, send, ns);
  Tensor r = receiver(comm, recv, nr);
  comm.all_to_all_v(ptr(s), send_counts, ptr(r), recv_counts);
  deliver(comm, r, recv, nr);
}

void send_recv(Communicator& comm, const Tensor& send, int64_t send_count, int dest, Tensor& recv,
               int64_t recv_count, int source) {
  need(send_count >= 0 && recv_count >= 0 && send.numel() >= send_count && recv.numel() >= recv_count, "send_recv",
       std::to_string(send_count) + " out of " + shape_str(send.shape()) + ", " + std::to_string(recv_count) +
           " into " + shape_str(recv.shape()));
  const Tensor s = payload(comm, send, send_count);
  Tensor r = receiver(comm, recv, recv_count);
  comm.send_recv(ptr(s), send_count, dest, ptr(r), recv_count, source);
  deliver(comm, r, recv, recv_count);
}

void send(Communicator& comm, const Tensor& data, int dest) {
  const int64_t n = data.numel();
  const Tensor s = payload(comm, data, n);
  comm.send(ptr(s), n, dest);
}

void recv(Communicator& comm, Tensor& data, int source) {
  const int64_t n = data.numel();
  Tensor r = receiver(comm, data, n);
  comm.recv(ptr(r), n, source);
  deliver(comm, r, data, n);
}

void broadcast(Communicator& comm, Tensor& data, int root) {
  const int64_t n = data.numel();
  Tensor buf = comm.rank() == root ? payload(comm, data, n) : receiver(comm, data, n);
  comm.broadcast(ptr(buf), n, root);
  deliver(comm, buf, data, n);
}

}  // namespace ditgen::parallel
