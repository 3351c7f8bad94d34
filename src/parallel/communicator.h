// Communicator: the collectives the model code calls for the parallel layouts
// of docs/design.md §4 (tp all-reduce / all-gather, ulysses all-to-all, ring
// send/recv, cp exchange), on float32 payloads with counts in elements.
//
// Design: a non-virtual interface. The public calls check their arguments,
// add to the byte counter and then call one protected virtual per collective,
// so every implementation (SelfCommunicator, MpiCommunicator, later NCCL)
// shares the argument contract and, above all, the same byte accounting:
// `ditgen plan`'s communication figures and the PAB statistics are checked
// against bytes_sent(), so there must be one convention, defined here.
//
// bytes_sent() convention — the bytes this rank puts on the wire, 4 per
// float, n = size(); nothing is counted when n == 1 or for data a rank keeps:
//   all_reduce_sum   2*(n-1)/n * count*4   (ring reduce-scatter + all-gather,
//                                           integer division of the product)
//   all_gather       (n-1) * count*4       (its shard to every other rank)
//   all_gather_v     (n-1) * counts[rank]*4
//   all_to_all_v     sum of send_counts[j]*4 over j != rank
//   send_recv        send_count*4 when dest != rank, else 0
//   send             count*4 (dest != rank); recv 0
//   broadcast        root: (n-1) * count*4; other ranks 0
//   broadcast_bytes  root: (n-1) * nbytes;  other ranks 0
//   barrier          0
// These are the algorithm-independent figures (what a ring or direct
// algorithm moves); the library's internal choice of algorithm may differ.
//
// Thread use: one thread per communicator (MPI is initialised FUNNELED: only
// the main thread communicates; OpenMP threads do compute only).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ditgen::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether the pointers passed in are device (CUDA) memory: NCCL's are,
  // MPI's and the self communicator's are host memory. Tensor code goes
  // through parallel/tensor_collectives.h, which stages through the right
  // memory either way.
  virtual bool takes_device_memory() const { return false; }

  // Element-wise sum over all ranks, in place.
  void all_reduce_sum(float* data, int64_t count);
  // recv receives size()*count floats: rank r's `count` at offset r*count.
  void all_gather(const float* send, int64_t count, float* recv);
  // Uneven all-gather: counts has size() entries, counts[rank()] == count;
  // rank r's data lands at offset counts[0] + ... + counts[r-1].
  void all_gather_v(const float* send, int64_t count, float* recv,
                    const std::vector<int64_t>& counts);
  // send_counts[j] floats go to rank j, recv_counts[j] come from rank j;
  // displacements are the prefix sums of the counts (zeros allowed).
  // recv_counts[j] must equal rank j's send_counts[rank()].
  void all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                    float* recv, const std::vector<int64_t>& recv_counts);
  // One combined exchange (deadlock-free, e.g. around a ring): send to dest
  // and receive from source at once. recv_count must equal source's
  // send_count. send and recv must not overlap.
  void send_recv(const float* send, int64_t send_count, int dest, float* recv,
                 int64_t recv_count, int source);
  // Point to point, one direction (PipeFusion's stage-to-stage hops): a
  // send to `dest` is matched by that rank's recv from this one, of the same
  // count, in the order posted. A rank cannot send to itself (use
  // send_recv). May block until the matching recv is posted.
  void send(const float* data, int64_t count, int dest);
  void recv(float* data, int64_t count, int source);
  void broadcast(float* data, int64_t count, int root);
  void broadcast_bytes(void* data, size_t nbytes, int root);
  void barrier();

  // Bytes this rank sent through this communicator (convention above).
  int64_t bytes_sent() const { return bytes_sent_; }
  void reset_bytes_sent() { bytes_sent_ = 0; }

 protected:
  Communicator() = default;

  // Called after the arguments were checked and the bytes counted.
  virtual void do_all_reduce_sum(float* data, int64_t count) = 0;
  virtual void do_all_gather(const float* send, int64_t count, float* recv) = 0;
  virtual void do_all_gather_v(const float* send, int64_t count, float* recv,
                               const std::vector<int64_t>& counts) = 0;
  virtual void do_all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                               float* recv, const std::vector<int64_t>& recv_counts) = 0;
  virtual void do_send_recv(const float* send, int64_t send_count, int dest, float* recv,
                            int64_t recv_count, int source) = 0;
  virtual void do_send(const float* data, int64_t count, int dest) = 0;
  virtual void do_recv(float* data, int64_t count, int source) = 0;
  virtual void do_broadcast_bytes(void* data, size_t nbytes, int root) = 0;
  virtual void do_barrier() = 0;

 private:
  void check_rank(int r, const char* what) const;
  void check_counts(const std::vector<int64_t>& counts, const char* what) const;

  int64_t bytes_sent_ = 0;
};

// The size-1 communicator of a plain (non-mpirun) run: every collective is a
// copy or a no-op, so model code needs no "if parallel" branches.
class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

 protected:
  void do_all_reduce_sum(float*, int64_t) override {}
  void do_all_gather(const float* send, int64_t count, float* recv) override;
  void do_all_gather_v(const float* send, int64_t count, float* recv,
                       const std::vector<int64_t>& counts) override;
  void do_all_to_all_v(const float* send, const std::vector<int64_t>& send_counts,
                       float* recv, const std::vector<int64_t>& recv_counts) override;
  void do_send_recv(const float* send, int64_t send_count, int dest, float* recv,
                    int64_t recv_count, int source) override;
  // Unreachable: send and recv reject a peer equal to the own rank.
  void do_send(const float*, int64_t, int) override {}
  void do_recv(float*, int64_t, int) override {}
  void do_broadcast_bytes(void*, size_t, int) override {}
  void do_barrier() override {}
};

std::unique_ptr<Communicator> make_self_communicator();

}  // namespace ditgen::parallel
