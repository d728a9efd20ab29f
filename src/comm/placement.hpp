// Where the ranks of a job run: each rank's node (its shared-memory domain,
// MPI_Comm_split_type SHARED) and local rank, and the rule that keeps the
// grid's fast axes inside a node. The grid numbers ranks tp fastest, then
// cp, ep, dp, pp (topology.hpp), so once the job's ranks are numbered node
// by node a group of `span` consecutive ranks sits inside one node exactly
// when every node holds a multiple of `span` ranks: tp groups stay inside
// nodes, then cp, and pp and dp cross them. The planner uses the same rule
// (groups_inside_nodes) for its intra- and inter-node costs.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "comm/topology.hpp"

namespace pentad {

struct Placement {
  std::vector<std::string> hosts;  // per node, in node order (the order of each node's lowest rank)
  std::vector<int> node;           // per rank of the job: its node index
  std::vector<int> local_rank;     // per rank: its index among its node's ranks
  std::vector<int> ranks_on;       // per node: how many ranks it holds
  int nodes() const { return int(hosts.size()); }
};

// Collective over job; every rank gets the same answer.
Placement discover_placement(MPI_Comm job);

// True when consecutive groups of `span` ranks never cross a node, for nodes
// holding ranks_on[i] ranks each (numbered node by node).
bool groups_inside_nodes(const std::vector<int>& ranks_on, int span);
// The uniform case: every node holds ranks_per_node ranks (the last may hold
// fewer when the job is smaller: ranks = the job's size).
bool groups_inside_nodes(int ranks, int ranks_per_node, int span);

// The job's ranks renumbered node by node (node order as in Placement, local
// order kept). Rank 0 stays rank 0. Collective; the caller frees it. With the
// launcher's usual block distribution this is the identity.
MPI_Comm node_ordered(MPI_Comm job, const Placement& pl);
// The same placement as seen through node_ordered's numbering.
Placement node_ordered(const Placement& pl);

// An empty string, or why the layout's tp groups cannot sit inside the nodes
// of this placement (naming the keys and the node sizes).
std::string tp_placement_problem(const Placement& pl, const ParallelConfig& p);

// One line per rank (rank, node, local rank, grid coordinates; the first 64
// ranks, then a count), and which axes stay inside a node.
std::string describe_placement(const Placement& pl, const GridShape& s);

}  // namespace pentad
