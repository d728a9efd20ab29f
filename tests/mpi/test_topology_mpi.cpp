// Every named communicator of the grid holds exactly the ranks the pure
// coordinate math says it should, for several grids on 8 ranks (a grid of
// another size than the job's is skipped), and the tied-embedding pair group
// pp_ends holds the first and last stage of each pp group, on those stages
// only. GTest on every rank (tests/lib/gtest_mpi_main.cpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <string>
#include <vector>

#include "comm/topology.hpp"

using namespace pentad;

namespace {

// A non-fatal check naming the grid (the test's parameter name).
#define EXPECT_GRID(ok, what, grid) EXPECT_TRUE(ok) << "grid " << (grid) << ": " << (what)

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

// pp_ends: on the first and the head's stage (pp > 1: the last stage, or
// none with zbv, whose V ends on stage 0), exactly those two ranks of my pp
// group, first stage first; MPI_COMM_NULL on the middle stages and
// everywhere when pp = 1.
void expect_pp_ends(const Topology& t, const std::string& grid, bool v_shape) {
  EXPECT_GRID(t.head_stage == (t.shape.pp > 1 && !v_shape ? t.shape.pp - 1 : 0), "the head's stage", grid);
  const bool at_end = t.ends_apart() && (t.is_first_stage() || t.holds_head());
  if (!at_end) {
    EXPECT_GRID(t.pp_ends == MPI_COMM_NULL, "pp_ends is null off the end stages (pp=" + std::to_string(t.shape.pp) + ")",
                grid);
    return;
  }
  ASSERT_NE(t.pp_ends, MPI_COMM_NULL) << "grid " << grid << ": pp_ends missing on an end stage";
  GridCoords first = t.me, last = t.me;
  first.pp = 0;
  last.pp = t.head_stage;
  const std::vector<int> ends = {rank_of(t.shape, first), rank_of(t.shape, last)};
  EXPECT_GRID(members(t.pp_ends, t.job) == ends, "pp_ends group", grid);
  char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  MPI_Comm_get_name(t.pp_ends, name, &len);
  EXPECT_GRID(std::string(name) == "pentad.pp_ends", "pp_ends communicator name", grid);
}

// {dp, tp, pp, cp, ep}
using Grid = std::array<int, 5>;

class TopologyGroups : public ::testing::TestWithParam<Grid> {};

TEST_P(TopologyGroups, MatchCoordinateMath) {
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const Grid& g = GetParam();
  ParallelConfig p;
  p.dp = g[0], p.tp = g[1], p.pp = g[2], p.cp = g[3], p.ep = g[4];
  if (p.dp * p.tp * p.pp * p.cp != size) GTEST_SKIP() << "a grid of " << p.dp * p.tp * p.pp * p.cp << " ranks";
  const std::string grid = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  Topology t(MPI_COMM_WORLD, p);
  EXPECT_GRID(t.me == coords_of(t.shape, rank), "coords", grid);
  EXPECT_GRID(members(t.tp, t.job) == expected(t.shape, t.me, 0, 0, 0, 0, 1), "tp group", grid);
  EXPECT_GRID(members(t.cp, t.job) == expected(t.shape, t.me, 0, 0, 0, 1, 0), "cp group", grid);
  EXPECT_GRID(members(t.ep, t.job) == expected(t.shape, t.me, 0, 0, 1, 0, 0), "ep group", grid);
  EXPECT_GRID(members(t.dp, t.job) == expected(t.shape, t.me, 0, 1, 1, 0, 0), "dp group", grid);
  EXPECT_GRID(members(t.dp_cp, t.job) == expected(t.shape, t.me, 0, 1, 1, 1, 0), "dp_cp group", grid);
  EXPECT_GRID(members(t.expert_dp, t.job) == expected(t.shape, t.me, 0, 1, 0, 1, 0), "expert_dp group", grid);
  EXPECT_GRID(members(t.pp, t.job) == expected(t.shape, t.me, 1, 0, 0, 0, 0), "pp group", grid);
  int dp_rank = -1;
  MPI_Comm_rank(t.dp, &dp_rank);
  EXPECT_GRID(dp_rank == t.dp_rank(), "dp rank == dp coordinate", grid);
  char name[MPI_MAX_OBJECT_NAME];
  int len = 0;
  MPI_Comm_get_name(t.tp, name, &len);
  EXPECT_GRID(std::string(name) == "pentad.tp", "tp communicator name", grid);
  expect_pp_ends(t, grid, false);
  if (p.pp < 2) return;
  // The same grid under zbv: the head is on stage 0 and no stage pair exists.
  p.schedule = ScheduleKind::zbv;
  p.virtual_stages = 2;
  Topology v(MPI_COMM_WORLD, p);
  expect_pp_ends(v, grid + " (zbv)", true);
}

// e.g. dp2_tp2_pp2_cp1_ep1
INSTANTIATE_TEST_SUITE_P(Grids, TopologyGroups,
                         ::testing::Values(Grid{8, 1, 1, 1, 1}, Grid{2, 2, 2, 1, 1}, Grid{4, 2, 1, 1, 2},
                                           Grid{2, 1, 2, 2, 1}, Grid{1, 2, 2, 2, 1}, Grid{1, 8, 1, 1, 1},
                                           Grid{2, 1, 4, 1, 1}, Grid{1, 1, 8, 1, 1}),
                         [](const ::testing::TestParamInfo<Grid>& i) {
                           const Grid& g = i.param;
                           return "dp" + std::to_string(g[0]) + "_tp" + std::to_string(g[1]) + "_pp" +
                                  std::to_string(g[2]) + "_cp" + std::to_string(g[3]) + "_ep" + std::to_string(g[4]);
                         });

}  // namespace
