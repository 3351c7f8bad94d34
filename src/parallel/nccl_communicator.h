// NcclCommunicator: the Communicator of the CUDA backend (docs/design.md §4: MPI
// on CPU, NCCL on CUDA). Built only when CUDA and NCCL are found
// (DITGEN_WITH_NCCL).
//
// Same interface, same argument checks and bytes_sent() accounting (the base
// class does both), different memory and timing:
// - every float* / void* passed in is a DEVICE pointer on this rank's GPU
//   (cuda::device_alloc memory); host pointers are an error inside NCCL.
// - every call is enqueued on cuda::stream() and returns before data moves.
//   Kernels queued later on that stream see the result (stream order); the
//   host sees it after cuda::synchronize() or a blocking cuda::copy_to_host.
//   barrier() is the exception: it returns once every rank has reached it and
//   this rank's stream is drained.
// - no large-count splitting: NCCL counts are size_t.
// - send_recv to itself must also receive from itself (the MPI path would
//   block forever on the unmatched half; here it throws).
//
// Construction is collective over `bootstrap`, the (MPI) communicator of the
// same group (MpiRuntime::world() or a split of it): rank 0 makes the
// ncclUniqueId and bootstrap.broadcast_bytes hands it to the others; rank and
// size are the bootstrap's. Build a process's communicators in the same order
// on every rank. Bind the device first, one GPU per rank:
//   cuda::set_device(local_device_index(std::getenv, MpiRuntime::local_rank(),
//                                       cuda::device_count()));
// A size-1 bootstrap (SelfCommunicator) gives a valid one-rank communicator.
//
// Errors: NCCL failures throw RuntimeFailure naming the call, NCCL's message
// and its last error detail (exit 4; main() then aborts the MPI job).
#pragma once
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/communicator.h"
#include "kernels/cuda/device.h"

namespace ditgen::parallel {

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(Communicator& bootstrap);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool takes_device_memory() const override { return true; }
  ncclComm_t comm() const { return comm_; }

 protected:
  void do_all_reduce_sum(float* data, int64_t count) override;
  void do_all_gather(const float* send, int64_t count, float* recv) override;
  void do_all_gather_v(const float* send, int64_t count, float* recv,
                       const std::vector<int64_t>& counts) override;
  void do_all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                       float* recv, const std::vector<int64_t>& recv_counts) override;
  void do_send(const float* data, int64_t count, int dest) override;
  void do_recv(float* data, int64_t count, int source) override;
  void do_send_recv(const float* send, int64_t send_count, int dest, float* recv,
                    int64_t recv_count, int source) override;
  void do_broadcast_bytes(void* data, size_t nbytes, int root) override;
  void do_barrier() override;

 private:
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t comm_ = nullptr;
  cuda::DeviceBuffer barrier_scratch_;  // the one float barrier() all-reduces
};

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap);

}  // namespace ditgen::parallel
