// Rank placement over two machines (issue 43, docs/parallel.md "Across
// machines"), with the environment Open MPI gives each rank emulated: four
// ranks, mpirun's default by-slot mapping, two per node (node A: world
// ranks 0 and 1, node B: 2 and 3), so OMPI_COMM_WORLD_LOCAL_RANK is 0, 1,
// 0, 1. Checked: each rank picks the GPU of its node-local rank (not its
// world rank, which would ask for GPU 2 or 3 on a two-GPU node); a node
// with fewer GPUs than its ranks fails naming the local rank; and the
// layouts the docs recommend keep their chatty groups inside a node (tp,
// then sp vary fastest in the rank order) while cp pairs span the nodes.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "parallel/device_index.h"
#include "parallel/layout.h"
#include "util/error.h"

namespace {

using ditgen::parallel::Layout;

constexpr int kNodes = 2;
constexpr int kRanksPerNode = 2;
constexpr int kWorld = kNodes * kRanksPerNode;

// What Open MPI 4 sets for world rank `rank` of a by-slot mapping over
// kNodes nodes of kRanksPerNode slots.
std::map<std::string, std::string> open_mpi_environment(int rank) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(kWorld)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank % kRanksPerNode)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(kRanksPerNode)},
          {"OMPI_COMM_WORLD_NODE_RANK", std::to_string(rank % kRanksPerNode)}};
}

int node_of(int rank) { return rank / kRanksPerNode; }

ditgen::parallel::EnvLookup lookup_in(const std::map<std::string, std::string>& vars) {
  return [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// True when every rank of each group lies on one node.
bool groups_within_nodes(const Layout& layout, std::vector<int> (*group)(const Layout&, int)) {
  for (int r = 0; r < layout.world_size(); ++r)
    for (const int peer : group(layout, r))
      if (node_of(peer) != node_of(r)) return false;
  return true;
}

bool groups_span_nodes(const Layout& layout, std::vector<int> (*group)(const Layout&, int)) {
  for (int r = 0; r < layout.world_size(); ++r) {
    bool other_node = false;
    for (const int peer : group(layout, r)) other_node = other_node || node_of(peer) != node_of(r);
    if (!other_node) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("two nodes: each rank binds the GPU of its node-local rank") {
  std::vector<int> devices;
  for (int rank = 0; rank < kWorld; ++rank) {
    const auto env = open_mpi_environment(rank);
    // The shared-memory split rank (the fallback) is deliberately wrong here:
    // the launcher's variable decides.
    devices.push_back(ditgen::parallel::local_device_index(lookup_in(env), /*shared_split_rank=*/rank,
                                                           /*device_count=*/kRanksPerNode));
  }
  CHECK(devices == std::vector<int>{0, 1, 0, 1});
}

TEST_CASE("two nodes: a node with fewer GPUs than its ranks fails, naming the local rank") {
  const auto env = open_mpi_environment(3);  // node B's second rank
  try {
    ditgen::parallel::local_device_index(lookup_in(env), 3, /*device_count=*/1);
    FAIL("expected a RuntimeFailure");
  } catch (const ditgen::RuntimeFailure& e) {
    CHECK(std::string(e.what()) == "local rank 1 needs CUDA device 1, but 1 is visible: run at most 1 rank per node "
                                   "(one GPU each)");
  }
}

TEST_CASE("two nodes: sp x cp keeps sp inside a node and sends only cp's exchange across") {
  Layout sp2_cp2;
  sp2_cp2.sp = 2;
  sp2_cp2.cp = 2;
  REQUIRE(sp2_cp2.world_size() == kWorld);
  CHECK(groups_within_nodes(sp2_cp2, ditgen::parallel::sp_group_ranks));
  CHECK(groups_span_nodes(sp2_cp2, ditgen::parallel::cp_group_ranks));
  // tp varies fastest: tp x cp keeps the all-reduces inside a node too.
  Layout tp2_cp2;
  tp2_cp2.tp = 2;
  tp2_cp2.cp = 2;
  CHECK(groups_within_nodes(tp2_cp2, ditgen::parallel::tp_group_ranks));
  CHECK(groups_span_nodes(tp2_cp2, ditgen::parallel::cp_group_ranks));
  // sp over all four ranks crosses the link with every all-to-all.
  Layout sp4;
  sp4.sp = 4;
  CHECK_FALSE(groups_within_nodes(sp4, ditgen::parallel::sp_group_ranks));
}
