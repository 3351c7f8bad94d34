// The collectives over real MPI, run as `mpirun -np N mpi_collectives` for
// N in {2, 3, 4} (tests/CMakeLists.txt). Every rank fills its buffers from a
// formula of (rank, index) with small integers (exact in float), so each
// result is checked against the same formula evaluated for the other ranks,
// never against another collective.
//
// Design: doctest with its own main. Every rank runs the same test cases in
// the same order (they are collective); only non-throwing CHECKs are used so
// a failure on one rank never skips a collective the others are waiting in.
// At the end the ranks agree on the worst result, so one failing rank fails
// the whole mpirun; mpirun --timeout (and the ctest TIMEOUT) catch a hang.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "util/error.h"
#include "mpi_test_main.h"

using ditgen::parallel::Communicator;
using ditgen::parallel::MpiCommunicator;
using ditgen::parallel::MpiRuntime;

namespace {

Communicator& world() { return MpiRuntime::world(); }

#define RANK_INFO(comm) INFO("world rank ", world().rank(), ", rank ", (comm).rank(), " of ", (comm).size())

// The value rank r holds at index i (small integers: sums stay exact).
float value(int r, int64_t i) { return static_cast<float>((r + 1) * 1000 + i % 997); }

// Uneven counts with zeros: rank r's shard in all_gather_v.
int64_t gather_count(int r) { return r % 3 == 1 ? 0 : 2 * r + 3; }
// Floats rank `from` sends to rank `to` in all_to_all_v (some zero).
int64_t a2a_count(int from, int to) { return (from + 2 * to) % 3 == 0 ? 0 : from + to + 1; }
// The k-th float of that message.
float a2a_value(int from, int to, int64_t k) { return static_cast<float>(from * 100 + to * 10 + k); }
// Floats rank r sends around the ring in send_recv.
int64_t ring_count(int r) { return 5 + 3 * r; }

// A copy of the world (same ranks, own MPI_Comm) whose MPI calls carry at
// most max_call_count elements: the large-count code paths on small buffers.
std::unique_ptr<Communicator> world_copy(int64_t max_call_count) {
  auto comm = MpiRuntime::split(world(), 0, world().rank());
  if (max_call_count > 0) dynamic_cast<MpiCommunicator&>(*comm).set_max_call_count(max_call_count);
  return comm;
}

void check_all_reduce(Communicator& comm, int64_t count) {
  RANK_INFO(comm);
  std::vector<float> data(count);
  for (int64_t i = 0; i < count; ++i) data[i] = value(comm.rank(), i);
  comm.all_reduce_sum(data.data(), count);
  int bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    float expect = 0;
    for (int r = 0; r < comm.size(); ++r) expect += value(r, i);
    bad += data[i] != expect;
  }
  CHECK(bad == 0);
}

void check_all_gather(Communicator& comm, int64_t count) {
  RANK_INFO(comm);
  std::vector<float> send(count), recv(count * comm.size(), -1.f);
  for (int64_t i = 0; i < count; ++i) send[i] = value(comm.rank(), i);
  comm.all_gather(send.data(), count, recv.data());
  int bad = 0;
  for (int r = 0; r < comm.size(); ++r) {
    for (int64_t i = 0; i < count; ++i) bad += recv[r * count + i] != value(r, i);
  }
  CHECK(bad == 0);
}

void check_all_gather_v(Communicator& comm, int64_t scale) {
  RANK_INFO(comm);
  std::vector<int64_t> counts(comm.size());
  for (int r = 0; r < comm.size(); ++r) counts[r] = gather_count(r) * scale;
  const int64_t mine = counts[comm.rank()];
  std::vector<float> send(mine);
  for (int64_t i = 0; i < mine; ++i) send[i] = value(comm.rank(), i);
  std::vector<float> recv(std::accumulate(counts.begin(), counts.end(), int64_t{0}), -1.f);
  comm.all_gather_v(send.data(), mine, recv.data(), counts);
  int bad = 0;
  int64_t offset = 0;
  for (int r = 0; r < comm.size(); ++r) {
    for (int64_t i = 0; i < counts[r]; ++i) bad += recv[offset + i] != value(r, i);
    offset += counts[r];
  }
  CHECK(bad == 0);
}

void check_all_to_all_v(Communicator& comm) {
  RANK_INFO(comm);
  const int me = comm.rank(), n = comm.size();
  std::vector<int64_t> send_counts(n), recv_counts(n);
  std::vector<float> send;
  for (int j = 0; j < n; ++j) {
    send_counts[j] = a2a_count(me, j);
    recv_counts[j] = a2a_count(j, me);
    for (int64_t k = 0; k < send_counts[j]; ++k) send.push_back(a2a_value(me, j, k));
  }
  std::vector<float> recv(std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0}),
                          -1.f);
  comm.all_to_all_v(send.data(), send_counts, recv.data(), recv_counts);
  int bad = 0;
  int64_t offset = 0;
  for (int j = 0; j < n; ++j) {
    for (int64_t k = 0; k < recv_counts[j]; ++k) bad += recv[offset + k] != a2a_value(j, me, k);
    offset += recv_counts[j];
  }
  CHECK(bad == 0);
}

// Around the ring: K/V blocks of ring attention travel rank r -> r+1.
void check_ring(Communicator& comm) {
  RANK_INFO(comm);
  const int me = comm.rank(), n = comm.size();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<float> block(ring_count(me));
  for (size_t i = 0; i < block.size(); ++i) block[i] = value(me, i);
  // n-1 hops bring every block once to every rank.
  int owner = me, bad = 0;
  for (int hop = 1; hop < n; ++hop) {
    const int from = (owner + n - 1) % n;  // the block arriving now
    std::vector<float> incoming(ring_count(from), -1.f);
    comm.send_recv(block.data(), block.size(), next, incoming.data(), incoming.size(), prev);
    for (size_t i = 0; i < incoming.size(); ++i) bad += incoming[i] != value(from, i);
    block.swap(incoming);
    owner = from;
  }
  CHECK(bad == 0);
}

// Down a chain, as PipeFusion's stages pass a patch on: rank r receives
// from r-1 what it sent on, adds its mark, and sends it to r+1, twice in a
// row (messages between one pair arrive in the order sent).
void check_chain(Communicator& comm, int64_t count) {
  RANK_INFO(comm);
  const int me = comm.rank(), n = comm.size();
  int bad = 0;
  for (int round = 0; round < 2; ++round) {
    std::vector<float> data(count, 0.f);
    if (me > 0) comm.recv(data.data(), count, me - 1);
    for (int64_t i = 0; i < count; ++i) bad += data[i] != static_cast<float>(me * (round + 1) * (me - 1) / 2);
    for (int64_t i = 0; i < count; ++i) data[i] += static_cast<float>(me * (round + 1));
    if (me + 1 < n) comm.send(data.data(), count, me + 1);
  }
  CHECK(bad == 0);
}

void check_broadcast(Communicator& comm) {
  RANK_INFO(comm);
  const int root = comm.size() - 1;
  std::vector<float> data(11, -1.f);
  if (comm.rank() == root) {
    for (int i = 0; i < 11; ++i) data[i] = value(root, i);
  }
  comm.broadcast(data.data(), 11, root);
  int bad = 0;
  for (int i = 0; i < 11; ++i) bad += data[i] != value(root, i);
  CHECK(bad == 0);

  // Bytes: e.g. an NCCL unique id or a config string, odd length.
  char text[24] = {};
  if (comm.rank() == 1 % comm.size()) std::snprintf(text, sizeof text, "from rank %d!", comm.rank());
  comm.broadcast_bytes(text, 23, 1 % comm.size());
  CHECK(std::string(text) == "from rank " + std::to_string(1 % comm.size()) + "!");
  comm.barrier();
}

// `large`: a payload size past MPI's eager limit (the rendezvous protocol),
// smaller where every element is its own MPI call.
void check_everything(Communicator& comm, int64_t large = 100003) {
  check_all_reduce(comm, 1);
  check_all_reduce(comm, 1000);
  check_all_reduce(comm, large);
  check_all_gather(comm, 7);
  check_all_gather(comm, large / 3);
  check_all_gather_v(comm, 1);
  check_all_gather_v(comm, large / 20);
  check_all_to_all_v(comm);
  check_ring(comm);
  check_chain(comm, 5);
  check_chain(comm, large);
  check_broadcast(comm);
}

}  // namespace

TEST_CASE("world: MPI_COMM_WORLD with errors returned, node-local rank") {
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(world().rank() == rank);
  CHECK(world().size() == size);
  auto& mpi = dynamic_cast<MpiCommunicator&>(world());
  CHECK(mpi.comm() == MPI_COMM_WORLD);
  MPI_Errhandler handler;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler);
  CHECK(handler == MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&handler);
  // One node: every rank is local.
  CHECK(MpiRuntime::local_size() == size);
  CHECK(MpiRuntime::local_rank() == rank);
}

TEST_CASE("collectives on the world") { check_everything(world()); }

TEST_CASE("collectives in pieces: counts beyond max_call_count") {
  // Pieces of 1 and 3 elements on small payloads, of 1000 on large ones.
  for (int64_t max_count : {1, 3, 1000}) {
    CAPTURE(max_count);
    auto comm = world_copy(max_count);
    check_everything(*comm, max_count < 1000 ? 100 : 100003);
  }
}

TEST_CASE("bytes_sent follows the documented convention") {
  auto comm = world_copy(0);
  RANK_INFO(*comm);
  const int64_t n = comm->size(), me = comm->rank();

  std::vector<float> buf(4096 * n, 1.f), out(4096 * n);
  comm->all_reduce_sum(buf.data(), 1000);
  CHECK(comm->bytes_sent() == 2 * (n - 1) * 4000 / n);
  comm->reset_bytes_sent();

  comm->all_gather(buf.data(), 100, out.data());
  CHECK(comm->bytes_sent() == (n - 1) * 400);
  comm->reset_bytes_sent();

  std::vector<int64_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = gather_count(r);
  comm->all_gather_v(buf.data(), counts[me], out.data(), counts);
  CHECK(comm->bytes_sent() == (n - 1) * counts[me] * 4);
  comm->reset_bytes_sent();

  // All-to-all: sum what every rank says it sent to others and what every
  // rank received from others: the two totals must agree.
  check_all_to_all_v(*comm);
  int64_t to_others = 0, from_others = 0;
  for (int j = 0; j < n; ++j) {
    if (j != me) to_others += a2a_count(me, j) * 4, from_others += a2a_count(j, me) * 4;
  }
  CHECK(comm->bytes_sent() == to_others);
  int64_t totals[2] = {comm->bytes_sent(), from_others};
  MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK(totals[0] == totals[1]);
  comm->reset_bytes_sent();

  check_ring(*comm);  // n-1 hops of the own then the forwarded blocks
  int64_t ring = 0;
  for (int hop = 0; hop < n - 1; ++hop) ring += ring_count((me - hop + n) % n) * 4;
  CHECK(comm->bytes_sent() == ring);
  comm->reset_bytes_sent();

  check_chain(*comm, 6);  // two sends of 6 floats, except the last rank's
  CHECK(comm->bytes_sent() == (me + 1 < n ? 2 * 24 : 0));
  comm->reset_bytes_sent();

  comm->broadcast(buf.data(), 10, 0);
  CHECK(comm->bytes_sent() == (me == 0 ? (n - 1) * 40 : 0));
  comm->reset_bytes_sent();
  comm->barrier();
  CHECK(comm->bytes_sent() == 0);
}

// docs/design.md §4: rank = (cp_rank * sp + sp_rank) * tp + tp_rank.
TEST_CASE("split into the tp / sp / cp groups of every layout") {
  const int n = world().size(), me = world().rank();
  for (int cp = 1; cp <= 2; ++cp) {
    for (int sp = 1; sp <= n; ++sp) {
      if (n % (cp * sp) != 0) continue;
      const int tp = n / (cp * sp);
      CAPTURE(sp);
      CAPTURE(cp);
      CAPTURE(tp);
      const int tp_rank = me % tp, sp_rank = me / tp % sp, cp_rank = me / (tp * sp);
      auto world_rank = [&](int c, int s, int t) { return (c * sp + s) * tp + t; };

      struct Group {
        const char* name;
        int color, key, size;
        std::vector<int> members;  // world ranks, in group-rank order
      };
      std::vector<Group> groups(3);
      groups[0] = {"tp", cp_rank * sp + sp_rank, tp_rank, tp, {}};
      for (int t = 0; t < tp; ++t) groups[0].members.push_back(world_rank(cp_rank, sp_rank, t));
      groups[1] = {"sp", cp_rank * tp + tp_rank, sp_rank, sp, {}};
      for (int s = 0; s < sp; ++s) groups[1].members.push_back(world_rank(cp_rank, s, tp_rank));
      groups[2] = {"cp", sp_rank * tp + tp_rank, cp_rank, cp, {}};
      for (int c = 0; c < cp; ++c) groups[2].members.push_back(world_rank(c, sp_rank, tp_rank));

      for (const Group& g : groups) {
        CAPTURE(g.name);
        auto comm = MpiRuntime::split(world(), g.color, g.key);
        CHECK(comm->size() == g.size);
        CHECK(comm->rank() == g.key);
        // Who is in the group, in order: gather the world ranks.
        const float mine = static_cast<float>(me);
        std::vector<float> ranks(comm->size(), -1.f);
        comm->all_gather(&mine, 1, ranks.data());
        for (int k = 0; k < g.size; ++k) CHECK(ranks[k] == static_cast<float>(g.members[k]));
        // Collectives inside the group see only the group.
        float sum = mine;
        comm->all_reduce_sum(&sum, 1);
        CHECK(sum == static_cast<float>(std::accumulate(g.members.begin(), g.members.end(), 0)));
        check_all_to_all_v(*comm);
        check_ring(*comm);
      }
    }
  }
}

TEST_CASE("split of a split, and a rank alone in its group") {
  // Halves of the world, then each half split by parity.
  auto half = MpiRuntime::split(world(), world().rank() < world().size() / 2 ? 0 : 1, 0);
  auto quarter = MpiRuntime::split(*half, half->rank() % 2, half->rank());
  RANK_INFO(*quarter);
  check_all_reduce(*quarter, 17);
  check_all_to_all_v(*quarter);

  auto alone = MpiRuntime::split(world(), world().rank(), 0);
  CHECK(alone->size() == 1);
  check_everything(*alone);
}

TEST_CASE("MPI errors become RuntimeFailure (exit 4) naming the call") {
  try {
    ditgen::parallel::check_mpi(MPI_ERR_TRUNCATE, "MPI_Alltoallv");
    CHECK(false);
  } catch (const ditgen::RuntimeFailure& e) {
    CHECK(e.exit_code() == ditgen::kExitRuntime);
    const std::string what = e.what();
    CHECK(what.rfind("MPI_Alltoallv failed: MPI_ERR_TRUNCATE", 0) == 0);
  }
  CHECK_NOTHROW(ditgen::parallel::check_mpi(MPI_SUCCESS, "MPI_Barrier"));

  // A real error from the library, returned instead of fatal: every rank
  // sends 5 floats around the ring but has room for only 3.
  auto comm = world_copy(0);
  const int me = comm->rank(), n = comm->size();
  float send[5] = {1, 2, 3, 4, 5}, recv[3] = {};
  std::string message;
  try {
    comm->send_recv(send, 5, (me + 1) % n, recv, 3, (me + n - 1) % n);
  } catch (const ditgen::RuntimeFailure& e) {
    message = e.what();
  }
  CHECK(message.rfind("MPI_Sendrecv failed: MPI_ERR_TRUNCATE", 0) == 0);
  comm->barrier();  // the communicator is still usable
}

int main(int argc, char** argv) { return ditgen::testing::run_mpi_doctest(argc, argv, "mpi_collectives"); }
