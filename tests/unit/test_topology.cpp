// Rank <-> grid-coordinate math, without MPI.
#include <gtest/gtest.h>

#include <set>

#include "comm/placement.hpp"
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

// ---- placement: the rule that keeps consecutive-rank groups inside nodes ----

TEST(Placement, GroupsInsideNodesEveryNodeAMultiple) {
  EXPECT_TRUE(groups_inside_nodes(std::vector<int>{4, 4}, 2));
  EXPECT_TRUE(groups_inside_nodes(std::vector<int>{4, 4}, 4));
  EXPECT_FALSE(groups_inside_nodes(std::vector<int>{4, 4}, 8));  // spans both nodes
  EXPECT_FALSE(groups_inside_nodes(std::vector<int>{3, 1}, 2));  // ranks 2,3 cross
  EXPECT_TRUE(groups_inside_nodes(std::vector<int>{2, 4, 2}, 2));
  EXPECT_FALSE(groups_inside_nodes(std::vector<int>{2, 2}, 4));
  EXPECT_TRUE(groups_inside_nodes(std::vector<int>{3, 5}, 1));
}

TEST(Placement, UniformRuleMatchesTheExplicitOne) {
  // ranks on nodes of rpn each (the last holds the rest): both forms agree.
  for (int ranks = 1; ranks <= 24; ++ranks)
    for (int rpn = 1; rpn <= 12; ++rpn) {
      std::vector<int> on;
      for (int left = ranks; left > 0; left -= rpn) on.push_back(std::min(left, rpn));
      for (int span = 1; span <= ranks; ++span) {
        if (ranks % span != 0) continue;
        EXPECT_EQ(groups_inside_nodes(ranks, rpn, span), groups_inside_nodes(on, span))
            << "ranks " << ranks << " rpn " << rpn << " span " << span;
      }
    }
}

TEST(Placement, NodeOrderedNumbering) {
  // A cyclic launch: ranks 0,2 on node a, 1,3 on node b.
  Placement pl;
  pl.hosts = {"a", "b"};
  pl.node = {0, 1, 0, 1};
  pl.local_rank = {0, 0, 1, 1};
  pl.ranks_on = {2, 2};
  const Placement o = node_ordered(pl);
  EXPECT_EQ(o.node, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(o.local_rank, (std::vector<int>{0, 1, 0, 1}));
  ParallelConfig p;
  p.dp = 2;
  p.tp = 2;
  EXPECT_EQ(tp_placement_problem(o, p), "");
  p.dp = 1;
  p.tp = 4;
  const std::string why = tp_placement_problem(o, p);
  EXPECT_NE(why.find("parallel.tp = 4"), std::string::npos) << why;
  EXPECT_NE(why.find("a: 2, b: 2"), std::string::npos) << why;
  EXPECT_NE(why.find("parallel.tp_across_nodes"), std::string::npos) << why;
  p.tp_across_nodes = true;
  EXPECT_EQ(tp_placement_problem(o, p), "");
  const std::string text = describe_placement(o, GridShape{1, 2, 1, 1, 2});
  EXPECT_NE(text.find("rank 2 -> b local 0 | pp 0 dp 1 ep 0 cp 0 tp 0"), std::string::npos) << text;
  EXPECT_NE(text.find("groups inside a node: tp | across nodes: dp"), std::string::npos) << text;
}
