// MpiCommunicator: Communicator over an MPI communicator (the CPU backend of
// docs/design.md §4; NCCL takes this place on CUDA).
//
// Design: the communicator owns its MPI_Comm (freed in the destructor, except
// MPI_COMM_WORLD) and sets MPI_ERRORS_RETURN on it, so every MPI error comes
// back as a code and is thrown as RuntimeFailure ("MPI_Alltoallv failed:
// <MPI_Error_string>", exit 4) instead of killing the process from inside
// the library; main() then turns it into MPI_Abort (MpiRuntime::abort) so the
// whole job stops.
//
// Large counts: MPI takes int counts and int displacements. A message whose
// counts (or, for the v-collectives, whose total) fit in max_call_count()
// (INT_MAX by default) goes through the plain MPI collective; a bigger one is
// split into pieces of at most max_call_count() elements: in-place
// collectives (all-reduce, broadcast) loop over pieces, the gather/all-to-all
// family falls back to pairwise non-blocking sends and receives.
#pragma once
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"

namespace ditgen::parallel {

// Throws RuntimeFailure("<call> failed: <MPI_Error_string(rc)>") unless
// rc == MPI_SUCCESS.
void check_mpi(int rc, const char* call);

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (not of MPI_COMM_WORLD); MPI must be active.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MPI_Comm comm() const { return comm_; }

  // The largest count handed to one MPI call (elements; bytes for
  // broadcast_bytes). Tests lower it to run the large-count paths on small
  // buffers; 1 <= n <= INT_MAX.
  int64_t max_call_count() const { return max_call_count_; }
  void set_max_call_count(int64_t n);

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
  // The large-count fallback of the v-collectives: send_counts[j] floats at
  // the prefix-sum offsets go to rank j, recv_counts[j] come from rank j,
  // each message cut into pieces of at most max_call_count_ elements.
  void pairwise_exchange(const float* send, const std::vector<int64_t>& send_counts,
                         const std::vector<int64_t>& send_displs, float* recv,
                         const std::vector<int64_t>& recv_counts,
                         const std::vector<int64_t>& recv_displs, const char* what);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int64_t max_call_count_ = INT_MAX;
};

}  // namespace ditgen::parallel
