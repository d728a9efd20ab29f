// Every named communicator of the grid holds exactly the ranks the pure
// coordinate math says it should, for several grids on 8 ranks.
#include <array>
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "comm/topology.hpp"

using namespace pentad;

namespace {

int failures = 0;

void expect(bool ok, const char* what, int grid) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "grid %d: %s\n", grid, what);
  }
}

// Ranks of `comm` as job ranks, in comm order.
std::vector<int> members(MPI_Comm comm, MPI_Comm job) {
  MPI_Group g, jg;
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(job, &jg);
  int n = 0;
  MPI_Group_size(g, &n);
  std::vector<int> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) in[size_t(i)] = i;
  MPI_Group_translate_ranks(g, n, in.data(), jg, out.data());
  MPI_Group_free(&g);
  MPI_Group_free(&jg);
  return out;
}

// The job ranks that share my coordinates except on the axes in `free`.
std::vector<int> expected(const GridShape& s, const GridCoords& me, bool pp, bool dpo, bool ep, bool cp,
                          bool tp) {
  std::vector<int> r;
  for (int k = 0; k < s.size(); ++k) {
    const GridCoords c = coords_of(s, k);
    if ((pp || c.pp == me.pp) && (dpo || c.dp_outer == me.dp_outer) && (ep || c.ep == me.ep) &&
        (cp || c.cp == me.cp) && (tp || c.tp == me.tp))
      r.push_back(k);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // {dp, tp, pp, cp, ep}
  const std::vector<std::array<int, 5>> grids = {
      {8, 1, 1, 1, 1}, {2, 2, 2, 1, 1}, {4, 2, 1, 1, 2},
      {2, 1, 2, 2, 1}, {1, 2, 2, 2, 1}, {1, 8, 1, 1, 1}};
  int grid = 0;
  for (const auto& g : grids) {
    ParallelConfig p;
    p.dp = g[0], p.tp = g[1], p.pp = g[2], p.cp = g[3], p.ep = g[4];
    ++grid;
    if (p.dp * p.tp * p.pp * p.cp != size) continue;
    Topology t(MPI_COMM_WORLD, p);
    expect(t.me == coords_of(t.shape, rank), "coords", grid);
    expect(members(t.tp, t.job) == expected(t.shape, t.me, 0, 0, 0, 0, 1), "tp group", grid);
    expect(members(t.cp, t.job) == expected(t.shape, t.me, 0, 0, 0, 1, 0), "cp group", grid);
    expect(members(t.ep, t.job) == expected(t.shape, t.me, 0, 0, 1, 0, 0), "ep group", grid);
    expect(members(t.dp, t.job) == expected(t.shape, t.me, 0, 1, 1, 0, 0), "dp group", grid);
    expect(members(t.dp_cp, t.job) == expected(t.shape, t.me, 0, 1, 1, 1, 0), "dp_cp group", grid);
    expect(members(t.expert_dp, t.job) == expected(t.shape, t.me, 0, 1, 0, 1, 0), "expert_dp group", grid);
    expect(members(t.pp, t.job) == expected(t.shape, t.me, 1, 0, 0, 0, 0), "pp group", grid);
    int dp_rank = -1;
    MPI_Comm_rank(t.dp, &dp_rank);
    expect(dp_rank == t.dp_rank(), "dp rank == dp coordinate", grid);
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    MPI_Comm_get_name(t.tp, name, &len);
    expect(std::string(name) == "pentad.tp", "tp communicator name", grid);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%d grids checked on %d ranks: %s\n", grid, size, total ? "FAILED" : "ok");
  MPI_Finalize();
  return total ? 1 : 0;
}
