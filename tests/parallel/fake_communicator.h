// A communicator for single-process tests of code written for tp ranks.
#pragma once
#include <cstdint>
#include <vector>

#include "parallel/communicator.h"

namespace ditgen::testing {

// Rank `r` of `n` that moves no data: what is left to test is the shared
// front end (argument checks, byte accounting), or, all-reduce being a
// no-op, one rank's partial sums.
class FakeCommunicator final : public parallel::Communicator {
 public:
  FakeCommunicator(int r, int n) : r_(r), n_(n) {}
  int rank() const override { return r_; }
  int size() const override { return n_; }
  int calls = 0;

 protected:
  void do_all_reduce_sum(float*, int64_t) override { ++calls; }
  void do_all_gather(const float*, int64_t, float*) override { ++calls; }
  void do_all_gather_v(const float*, int64_t, float*, const std::vector<int64_t>&) override {
    ++calls;
  }
  void do_all_to_all_v(const float*, const std::vector<int64_t>&, float*,
                       const std::vector<int64_t>&) override {
    ++calls;
  }
  void do_send_recv(const float*, int64_t, int, float*, int64_t, int) override { ++calls; }
  void do_send(const float*, int64_t, int) override { ++calls; }
  void do_recv(float*, int64_t, int) override { ++calls; }
  void do_broadcast_bytes(void*, size_t, int) override { ++calls; }
  void do_barrier() override { ++calls; }

 private:
  int r_, n_;
};

}  // namespace ditgen::testing
