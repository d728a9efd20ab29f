// Rank <-> grid-coordinate math, without MPI.
#include <gtest/gtest.h>

#include <set>

#include "comm/topology.hpp"

using namespace pentad;

TEST(Topology, RoundTripAndTpFastest) {
  const GridShape s{2, 4, 2, 3, 2};  // pp dp ep cp tp -> dims (2, 2, 2, 3, 2)
  ASSERT_EQ(s.size(), 2 * 4 * 3 * 2);
  std::set<int> seen;
  for (int r = 0; r < s.size(); ++r) {
    const GridCoords c = coords_of(s, r);
    EXPECT_EQ(rank_of(s, c), r);
    EXPECT_GE(c.dp(s), 0);
    EXPECT_LT(c.dp(s), s.dp);
    seen.insert(r);
  }
  EXPECT_EQ(int(seen.size()), s.size());
  // tp varies fastest: consecutive ranks are TP neighbours.
  EXPECT_EQ(coords_of(s, 0).tp, 0);
  EXPECT_EQ(coords_of(s, 1).tp, 1);
  EXPECT_EQ(coords_of(s, 1).cp, 0);
  EXPECT_EQ(coords_of(s, 2).cp, 1);
  // pp varies slowest.
  EXPECT_EQ(coords_of(s, s.size() / 2).pp, 1);
  EXPECT_EQ(coords_of(s, s.size() / 2 - 1).pp, 0);
}

TEST(Topology, DpIndexCoversEpInsideDp) {
  const GridShape s{1, 4, 2, 1, 1};
  std::set<int> dps;
  for (int r = 0; r < s.size(); ++r) dps.insert(coords_of(s, r).dp(s));
  EXPECT_EQ(dps, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(coords_of(s, 1).ep, 1);
  EXPECT_EQ(coords_of(s, 2).dp_outer, 1);
}

TEST(Topology, SingleRank) {
  const GridShape s{};
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(coords_of(s, 0), GridCoords{});
}
