// Single-process tests of the communicator layer: SelfCommunicator's copies,
// the shared argument checks, the bytes_sent convention (on a fake
// communicator of size > 1 whose transfers do nothing), and MpiRuntime
// without mpirun. The collectives over real MPI are in parallel/mpi/.
#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/mpi_runtime.h"
#include "fake_communicator.h"

using ditgen::parallel::Communicator;
using ditgen::parallel::MpiRuntime;
using ditgen::testing::FakeCommunicator;

namespace {

// Restores one environment variable when the test ends.
struct EnvGuard {
  explicit EnvGuard(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v, had_ = true;
  }
  ~EnvGuard() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("SelfCommunicator: rank 0 of 1, collectives are copies or no-ops") {
  auto comm = ditgen::parallel::make_self_communicator();
  CHECK(comm->rank() == 0);
  CHECK(comm->size() == 1);

  std::vector<float> data = {1.5f, -2.f, 3.f};
  comm->all_reduce_sum(data.data(), 3);
  CHECK(data == std::vector<float>{1.5f, -2.f, 3.f});

  std::vector<float> out(3, 0.f);
  comm->all_gather(data.data(), 3, out.data());
  CHECK(out == data);

  std::fill(out.begin(), out.end(), 0.f);
  comm->all_gather_v(data.data(), 2, out.data(), {2});
  CHECK(out == std::vector<float>{1.5f, -2.f, 0.f});

  std::fill(out.begin(), out.end(), 0.f);
  comm->all_to_all_v(data.data(), {3}, out.data(), {3});
  CHECK(out == data);

  std::fill(out.begin(), out.end(), 0.f);
  comm->send_recv(data.data(), 3, 0, out.data(), 3, 0);
  CHECK(out == data);

  comm->broadcast(data.data(), 3, 0);
  char text[] = "abc";
  comm->broadcast_bytes(text, sizeof text, 0);
  CHECK(std::string(text) == "abc");
  comm->barrier();
  comm->all_reduce_sum(nullptr, 0);  // empty payloads are fine
  comm->all_to_all_v(nullptr, {0}, nullptr, {0});

  CHECK(comm->bytes_sent() == 0);  // nothing ever leaves a size-1 rank
}

TEST_CASE("SelfCommunicator: in-place gather and mismatched self exchange") {
  ditgen::parallel::SelfCommunicator comm;
  std::vector<float> data = {4.f, 5.f};
  comm.all_gather(data.data(), 2, data.data());
  CHECK(data == std::vector<float>{4.f, 5.f});
  std::vector<float> out(4);
  CHECK_THROWS_AS(comm.all_to_all_v(data.data(), {2}, out.data(), {3}), std::invalid_argument);
  CHECK_THROWS_AS(comm.send_recv(data.data(), 2, 0, out.data(), 1, 0), std::invalid_argument);
}

TEST_CASE("Communicator: argument checks before any transfer") {
  FakeCommunicator comm(1, 3);
  float x[4] = {};
  CHECK_THROWS_AS(comm.all_reduce_sum(x, -1), std::invalid_argument);
  CHECK_THROWS_AS(comm.all_gather_v(x, 1, x, {1, 1}), std::invalid_argument);      // 2 counts
  CHECK_THROWS_AS(comm.all_gather_v(x, 2, x, {1, 1, 1}), std::invalid_argument);   // != counts[1]
  CHECK_THROWS_AS(comm.all_to_all_v(x, {1, -1, 1}, x, {1, 1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(comm.all_to_all_v(x, {1, 1, 1}, x, {1, 1}), std::invalid_argument);
  CHECK_THROWS_AS(comm.send_recv(x, 1, 3, x, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(comm.send_recv(x, 1, 0, x, 1, -1), std::invalid_argument);
  CHECK_THROWS_AS(comm.broadcast(x, 1, 5), std::invalid_argument);
  CHECK_THROWS_AS(comm.send(x, 1, 1), std::invalid_argument);  // to itself
  CHECK_THROWS_AS(comm.recv(x, 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(comm.send(x, 1, 3), std::invalid_argument);
  CHECK_THROWS_AS(comm.recv(x, -1, 0), std::invalid_argument);
  CHECK(comm.calls == 0);
  CHECK(comm.bytes_sent() == 0);
  // The message says what was wrong.
  try {
    comm.broadcast(x, 1, 5);
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "broadcast root: rank 5 outside a communicator of size 3");
  }
}

TEST_CASE("Communicator: bytes_sent convention") {
  const int n = 4;
  FakeCommunicator r0(0, n), r2(2, n);
  float x[1] = {};

  // Ring all-reduce: 2*(n-1)/n of the payload.
  r2.all_reduce_sum(x, 1000);
  CHECK(r2.bytes_sent() == 2 * 3 * 4000 / 4);
  r2.reset_bytes_sent();
  CHECK(r2.bytes_sent() == 0);

  // All-gather: the own shard to every other rank.
  r2.all_gather(x, 10, x);
  CHECK(r2.bytes_sent() == 3 * 40);
  r2.reset_bytes_sent();
  r2.all_gather_v(x, 7, x, {1, 0, 7, 2});
  CHECK(r2.bytes_sent() == 3 * 28);
  r2.reset_bytes_sent();

  // All-to-all: what goes to other ranks, not the part kept.
  r2.all_to_all_v(x, {1, 2, 100, 0}, x, {5, 5, 100, 5});
  CHECK(r2.bytes_sent() == (1 + 2 + 0) * 4);
  r2.reset_bytes_sent();

  // send_recv: only when the peer is another rank.
  r2.send_recv(x, 6, 3, x, 9, 1);
  CHECK(r2.bytes_sent() == 24);
  r2.send_recv(x, 6, 2, x, 6, 2);
  CHECK(r2.bytes_sent() == 24);
  r2.reset_bytes_sent();

  // Point to point: the sender counts, the receiver does not.
  r2.send(x, 7, 0);
  CHECK(r2.bytes_sent() == 28);
  r0.recv(x, 7, 2);
  CHECK(r0.bytes_sent() == 0);
  r2.reset_bytes_sent();

  // Broadcast: the root sends to n-1 ranks, the others send nothing.
  r0.broadcast(x, 5, 0);
  r2.broadcast(x, 5, 0);
  CHECK(r0.bytes_sent() == 3 * 20);
  CHECK(r2.bytes_sent() == 0);
  r0.broadcast_bytes(x, 3, 0);
  CHECK(r0.bytes_sent() == 3 * 20 + 3 * 3);

  r2.barrier();
  CHECK(r2.bytes_sent() == 0);

  // Counts beyond INT_MAX are counted in 64 bits.
  r2.all_gather(x, int64_t{3} << 31, x);
  CHECK(r2.bytes_sent() == 3 * (int64_t{3} << 31) * 4);
}

TEST_CASE("MpiRuntime: a plain run never starts MPI") {
  EnvGuard g1("OMPI_COMM_WORLD_SIZE"), g2("PMI_SIZE"), g3("PMIX_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_SIZE");
  unsetenv("PMIX_RANK");
  CHECK_FALSE(MpiRuntime::launched_by_mpirun());

  int argc = 1;
  char name[] = "test_dist";
  char* args[] = {name, nullptr};
  char** argv = args;
  MpiRuntime::init(&argc, &argv);
  CHECK_FALSE(MpiRuntime::active());

  Communicator& world = MpiRuntime::world();
  CHECK(world.size() == 1);
  CHECK(world.rank() == 0);
  auto sub = MpiRuntime::split(world, 3, 0);
  CHECK(sub->size() == 1);
  CHECK_THROWS_AS(MpiRuntime::split(world, -1, 0), std::invalid_argument);
  CHECK(MpiRuntime::local_rank() == 0);
  CHECK(MpiRuntime::local_size() == 1);
  MpiRuntime::finalize();  // nothing to finalise; must not start or fail
  MpiRuntime::finalize();

  // Each launcher variable alone counts.
  setenv("PMIX_RANK", "0", 1);
  CHECK(MpiRuntime::launched_by_mpirun());
  unsetenv("PMIX_RANK");
  setenv("PMI_SIZE", "2", 1);
  CHECK(MpiRuntime::launched_by_mpirun());
  unsetenv("PMI_SIZE");
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  CHECK(MpiRuntime::launched_by_mpirun());
}
