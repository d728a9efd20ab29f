// Node discovery (MPI_Comm_split_type), node-by-node numbering (MPI_Comm_split)
// and the placement report.
#include "comm/placement.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "comm/host.hpp"
#include "core/error.hpp"

namespace pentad {

namespace {
std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &len));
  return std::string(name, size_t(std::max(len, 0)));
}
}  // namespace

Placement discover_placement(MPI_Comm job) {
  const int me = host::rank(job), n = host::size(job);
  MPI_Comm shared = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(job, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &shared));
  const int local = host::rank(shared);
  // The node's lowest rank names it (its local rank 0, since the split keeps order).
  int leader = me;
  host::bcast(shared, &leader, 1, 0);
  MPI_CHECK(MPI_Comm_free(&shared));
  std::vector<int> leaders(static_cast<size_t>(n)), locals(static_cast<size_t>(n));
  host::allgather(job, &leader, 1, leaders.data());
  host::allgather(job, &local, 1, locals.data());
  const std::vector<std::string> names = host::allgather_strings(job, processor_name());

  Placement pl;
  std::map<int, int> index_of_leader;  // ordered by the leader's rank
  for (int l : leaders) index_of_leader.emplace(l, 0);
  int k = 0;
  for (auto& [l, idx] : index_of_leader) {
    idx = k++;
    pl.hosts.push_back(names[size_t(l)]);
  }
  pl.ranks_on.assign(size_t(k), 0);
  for (int r = 0; r < n; ++r) {
    const int node = index_of_leader.at(leaders[size_t(r)]);
    pl.node.push_back(node);
    pl.local_rank.push_back(locals[size_t(r)]);
    ++pl.ranks_on[size_t(node)];
  }
  return pl;
}

bool groups_inside_nodes(const std::vector<int>& ranks_on, int span) {
  if (span <= 1) return true;
  return std::all_of(ranks_on.begin(), ranks_on.end(), [span](int c) { return c % span == 0; });
}

bool groups_inside_nodes(int ranks, int ranks_per_node, int span) {
  std::vector<int> on;
  for (int left = ranks; left > 0; left -= ranks_per_node) on.push_back(std::min(left, ranks_per_node));
  return groups_inside_nodes(on, span);
}

MPI_Comm node_ordered(MPI_Comm job, const Placement& pl) {
  const int me = host::rank(job);
  const int key = pl.node[size_t(me)] * host::size(job) + pl.local_rank[size_t(me)];
  MPI_Comm out = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(job, 0, key, &out));
  MPI_CHECK(MPI_Comm_set_name(out, "pentad.job"));
  return out;
}

Placement node_ordered(const Placement& pl) {
  Placement out;
  out.hosts = pl.hosts;
  out.ranks_on = pl.ranks_on;
  for (int node = 0; node < pl.nodes(); ++node)
    for (int l = 0; l < pl.ranks_on[size_t(node)]; ++l) {
      out.node.push_back(node);
      out.local_rank.push_back(l);
    }
  return out;
}

std::string tp_placement_problem(const Placement& pl, const ParallelConfig& p) {
  if (p.tp_across_nodes || groups_inside_nodes(pl.ranks_on, p.tp)) return "";
  std::string sizes;
  for (int i = 0; i < pl.nodes(); ++i) {
    if (i == 8) {
      sizes += ", ...";
      break;
    }
    sizes += (i ? ", " : "") + pl.hosts[size_t(i)] + ": " + std::to_string(pl.ranks_on[size_t(i)]);
  }
  return "parallel.tp = " + std::to_string(p.tp) + " does not fit inside a node: the job's " +
         std::to_string(pl.nodes()) + " node(s) hold " + sizes +
         " rank(s), and a tp group must sit inside one node (every node's rank count a multiple of "
         "parallel.tp; its all-reduces run in every layer). Use a parallel.tp that divides the ranks per node, "
         "or set parallel.tp_across_nodes = true to allow it";
}

std::string describe_placement(const Placement& pl, const GridShape& s) {
  std::string out = "placement: " + std::to_string(pl.node.size()) + " rank(s) on " +
                    std::to_string(pl.nodes()) + " node(s):";
  for (int i = 0; i < pl.nodes(); ++i)
    out += " " + pl.hosts[size_t(i)] + " (" + std::to_string(pl.ranks_on[size_t(i)]) + ")";
  out += "\n";
  const int n = int(pl.node.size());
  for (int r = 0; r < std::min(n, 64); ++r) {
    const GridCoords c = coords_of(s, r);
    char line[200];
    std::snprintf(line, sizeof line, "  rank %d -> %s local %d | pp %d dp %d ep %d cp %d tp %d\n", r,
                  pl.hosts[size_t(pl.node[size_t(r)])].c_str(), pl.local_rank[size_t(r)], c.pp, c.dp(s), c.ep,
                  c.cp, c.tp);
    out += line;
  }
  if (n > 64) out += "  ... (" + std::to_string(n - 64) + " more ranks)\n";
  // A group of axis X spans the ranks of one block of `span` consecutive
  // ranks (tp fastest); it stays inside a node when that block does.
  struct Axis {
    const char* name;
    int size, span;
  };
  const Axis axes[] = {{"tp", s.tp, s.tp},
                       {"cp", s.cp, s.cp * s.tp},
                       {"ep", s.ep, s.ep * s.cp * s.tp},
                       {"dp", s.dp, s.dp * s.cp * s.tp},
                       {"pp", s.pp, s.size()}};
  std::string inside, across;
  for (const Axis& a : axes) {
    if (a.size <= 1) continue;
    (groups_inside_nodes(pl.ranks_on, a.span) ? inside : across) += std::string(" ") + a.name;
  }
  out += "  groups inside a node:" + (inside.empty() ? std::string(" (none)") : inside) +
         " | across nodes:" + (across.empty() ? std::string(" (none)") : across) + "\n";
  return out;
}

}  // namespace pentad
