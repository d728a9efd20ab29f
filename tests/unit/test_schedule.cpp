// The pipeline schedules, checked without MPI over a grid of (pp, m, v).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "parallel/pp/schedule.hpp"

using namespace pentad;

namespace {

void expect_valid(ScheduleKind kind, int pp, int v, int m) {
  SCOPED_TRACE(std::string(schedule_name(kind)) + " pp=" + std::to_string(pp) + " v=" + std::to_string(v) +
               " m=" + std::to_string(m));
  const Schedule s = make_schedule(kind, pp, v, m);
  const ScheduleCheck c = check_schedule(s);
  ASSERT_TRUE(c.ok()) << c.error << "\n" << describe_schedule(s);
  for (int r = 0; r < pp; ++r)
    EXPECT_EQ(c.peak_inflight[size_t(r)], expected_inflight(kind, pp, v, m, r)) << "rank " << r;
}

}  // namespace

TEST(Schedule, AllKindsValidOverGrid) {
  for (int pp : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 6, 8, 16}) {
      if (pp > 1 && m < pp) continue;
      expect_valid(ScheduleKind::afab, pp, 1, m);
      expect_valid(ScheduleKind::one_f_one_b, pp, 1, m);
      expect_valid(ScheduleKind::forward_only, pp, 1, m);
      for (int v : {2, 3, 4}) {
        expect_valid(ScheduleKind::forward_only, pp, v, m);
        if (m % pp == 0) expect_valid(ScheduleKind::interleaved, pp, v, m);
      }
    }
}

// afab holds every micro-batch, 1f1b at most pp (on the first rank).
TEST(Schedule, HighWaterMarks) {
  const ScheduleCheck a = check_schedule(make_schedule(ScheduleKind::afab, 4, 1, 8));
  const ScheduleCheck b = check_schedule(make_schedule(ScheduleKind::one_f_one_b, 4, 1, 8));
  ASSERT_TRUE(a.ok() && b.ok());
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(a.peak_inflight[size_t(r)], 8);
    EXPECT_EQ(b.peak_inflight[size_t(r)], 4 - r);
  }
}

// With uniform stages and t_b = 2 t_f, afab and 1f1b idle (pp-1)/m of their
// busy time on every rank; interleaving divides the bubble by v.
TEST(Schedule, TimedReplayMatchesBubbleFormula) {
  for (int pp : {2, 4})
    for (int m : {4, 8, 16}) {
      for (ScheduleKind k : {ScheduleKind::afab, ScheduleKind::one_f_one_b}) {
        const ScheduleCheck c = check_schedule(make_schedule(k, pp, 1, m));
        ASSERT_TRUE(c.ok()) << c.error;
        for (int r = 0; r < pp; ++r)
          EXPECT_NEAR(c.sim_bubble[size_t(r)], bubble_formula(k, pp, 1, m), 1e-12)
              << schedule_name(k) << " pp=" << pp << " m=" << m << " rank " << r;
      }
      for (int v : {2, 4}) {
        const ScheduleCheck c = check_schedule(make_schedule(ScheduleKind::interleaved, pp, v, m), 1.0 / v, 2.0 / v);
        ASSERT_TRUE(c.ok()) << c.error;
        for (int r = 0; r < pp; ++r)
          EXPECT_NEAR(c.sim_bubble[size_t(r)], bubble_formula(ScheduleKind::interleaved, pp, v, m), 1e-12)
              << "interleaved pp=" << pp << " v=" << v << " m=" << m << " rank " << r;
      }
    }
}

TEST(Schedule, BadParametersNameTheKeys) {
  EXPECT_NE(schedule_problem(ScheduleKind::one_f_one_b, 4, 1, 2).find("train.grad_accum"), std::string::npos);
  EXPECT_NE(schedule_problem(ScheduleKind::interleaved, 2, 2, 3).find("multiple of parallel.pp"), std::string::npos);
  EXPECT_NE(schedule_problem(ScheduleKind::interleaved, 2, 1, 4).find("virtual_stages"), std::string::npos);
  EXPECT_NE(schedule_problem(ScheduleKind::afab, 2, 2, 4).find("interleaved"), std::string::npos);
  EXPECT_THROW(make_schedule(ScheduleKind::one_f_one_b, 4, 1, 3), std::invalid_argument);
}

// The checker catches broken lists: a dropped receive, a swapped order that
// deadlocks, a backward before its forward.
TEST(Schedule, CheckerRejectsBrokenLists) {
  const Schedule good = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 4);
  ASSERT_TRUE(check_schedule(good).ok());

  Schedule dropped = good;
  auto& r1 = dropped.ranks[1];
  for (size_t i = 0; i < r1.size(); ++i)
    if (r1[i].kind == ActionKind::recv_act) {
      r1.erase(r1.begin() + long(i));
      break;
    }
  EXPECT_NE(check_schedule(dropped).error.find("receive"), std::string::npos);

  // Rank 0 waits for a gradient before sending the activation it depends on.
  Schedule dead;
  dead.kind = ScheduleKind::one_f_one_b;
  dead.pp = 2;
  dead.m = 1;
  dead.ranks = {{{ActionKind::recv_grad, 0, 0}, {ActionKind::forward, 0, 0}, {ActionKind::backward, 0, 0},
                 {ActionKind::send_act, 0, 0}},
                {{ActionKind::recv_act, 0, 1}, {ActionKind::forward, 0, 1}, {ActionKind::backward, 0, 1},
                 {ActionKind::send_grad, 0, 1}}};
  // As listed, rank 0 backward waits on rank 1's gradient, which waits on
  // rank 0's activation, sent only after the backward.
  const ScheduleCheck c = check_schedule(dead);
  EXPECT_NE(c.error.find("deadlock"), std::string::npos) << c.error;

  Schedule backwards = good;
  auto& r0 = backwards.ranks[0];
  auto f = std::find_if(r0.begin(), r0.end(), [](const Action& a) { return a.kind == ActionKind::forward; });
  auto b = std::find_if(r0.begin(), r0.end(), [](const Action& a) { return a.kind == ActionKind::backward && a.mb == 0; });
  std::iter_swap(f, b);
  EXPECT_FALSE(check_schedule(backwards).ok());
}

TEST(Partition, BalancedAndOverride) {
  EXPECT_EQ(partition_blocks(4, 2, ""), (std::vector<int>{0, 2, 4}));
  // The remainder goes to the middle chunks first, then the first, then the last.
  EXPECT_EQ(partition_blocks(5, 3, ""), (std::vector<int>{0, 2, 4, 5}));
  EXPECT_EQ(partition_blocks(4, 3, ""), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(partition_blocks(5, 2, ""), (std::vector<int>{0, 3, 5}));
  EXPECT_EQ(partition_blocks(7, 4, ""), (std::vector<int>{0, 2, 4, 6, 7}));
  EXPECT_EQ(partition_blocks(4, 2, "3,1"), (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(partition_blocks(4, 3, "0,2,2"), (std::vector<int>{0, 0, 2, 4}));
  auto message = [](int L, int G, const std::string& s) {
    try {
      partition_blocks(L, G, s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(2, 4, "").find("model.n_layers=2"), std::string::npos);
  EXPECT_NE(message(4, 2, "3,2").find("sums to 5"), std::string::npos);
  EXPECT_NE(message(4, 2, "4").find("1 counts for 2"), std::string::npos);
  EXPECT_NE(message(4, 2, "2,x").find("'x'"), std::string::npos);
  EXPECT_NE(message(4, 2, "2,-1").find("parallel.stage_layers"), std::string::npos);
}

// ZB-H1 (issue 22): valid over the grid; a slot lives from F to W, so every
// rank holds at most pp of them (1F1B's rank-0 bound); rank r defers at most
// r + 1 W actions.
TEST(ZeroBubble, H1ValidOverGrid) {
  for (int pp : {1, 2, 3, 4, 8})
    for (int m : {1, 2, 3, 4, 6, 8, 16}) {
      if (pp > 1 && m < pp) continue;
      expect_valid(ScheduleKind::zbh1, pp, 1, m);
      const ScheduleCheck z = check_schedule(make_schedule(ScheduleKind::zbh1, pp, 1, m));
      const ScheduleCheck b = check_schedule(make_schedule(ScheduleKind::one_f_one_b, pp, 1, m));
      ASSERT_TRUE(z.ok() && b.ok());
      const int b_peak = *std::max_element(b.peak_inflight.begin(), b.peak_inflight.end());
      for (int r = 0; r < pp; ++r) {
        EXPECT_EQ(z.peak_deferred_w[size_t(r)], expected_deferred_w(ScheduleKind::zbh1, pp, 1, m, r))
            << "pp=" << pp << " m=" << m << " rank " << r;
        EXPECT_LE(z.peak_inflight[size_t(r)], b_peak) << "pp=" << pp << " m=" << m << " rank " << r;
        EXPECT_EQ(b.peak_deferred_w[size_t(r)], 0);
      }
    }
}

// The paper's ZB-H1 bubble (Qi et al. 2024, section 3.1): (pp - 1)(t_F + t_B
// - t_W) idle per rank over m (t_F + t_B + t_W) busy; a third of 1F1B's with
// t_F = t_B = t_W (the fused backward then costs 2 t_F, as in 1F1B's test).
TEST(ZeroBubble, H1ReplayMatchesPaperFormula) {
  for (int pp : {2, 3, 4, 8})
    for (int m : {pp, 2 * pp, 16}) {
      const double t_f = 1.0, t_b = 1.0, t_w = 1.0;
      const ScheduleCheck c = check_schedule(make_schedule(ScheduleKind::zbh1, pp, 1, m), t_f, t_b + t_w, t_w);
      const ScheduleCheck ref = check_schedule(make_schedule(ScheduleKind::one_f_one_b, pp, 1, m), t_f, t_b + t_w);
      ASSERT_TRUE(c.ok() && ref.ok()) << c.error << ref.error;
      const double paper = (pp - 1) * (t_f + t_b - t_w) / (m * (t_f + t_b + t_w));
      EXPECT_NEAR(bubble_formula(ScheduleKind::zbh1, pp, 1, m), paper, 1e-12);
      for (int r = 0; r < pp; ++r) {
        EXPECT_NEAR(c.sim_bubble[size_t(r)], paper, 1e-12) << "pp=" << pp << " m=" << m << " rank " << r;
        EXPECT_NEAR(c.sim_bubble[size_t(r)] * 3, ref.sim_bubble[size_t(r)], 1e-12) << "a third of 1F1B's";
      }
      EXPECT_NEAR(c.sim_makespan, 3.0 * m + (pp - 1), 1e-12);
    }
}

// The checker's split-backward rules: a W before its B, a missing W, a fused
// backward in a zbh1 list are refused.
TEST(ZeroBubble, CheckerRejectsBrokenSplitLists) {
  const Schedule good = make_schedule(ScheduleKind::zbh1, 2, 1, 4);
  ASSERT_TRUE(check_schedule(good).ok());
  auto find = [](std::vector<Action>& l, ActionKind k, int mb) {
    return std::find_if(l.begin(), l.end(), [&](const Action& a) { return a.kind == k && a.mb == mb; });
  };
  Schedule early = good;  // rank 1's W of micro-batch 0 moved to the front
  auto& l1 = early.ranks[1];
  auto w = find(l1, ActionKind::backward_weight, 0);
  const Action wa = *w;
  l1.erase(w);
  l1.insert(l1.begin(), wa);
  EXPECT_NE(check_schedule(early).error.find("W before its B"), std::string::npos) << check_schedule(early).error;

  Schedule dropped = good;
  dropped.ranks[0].erase(find(dropped.ranks[0], ActionKind::backward_weight, 2));
  EXPECT_NE(check_schedule(dropped).error.find("W 0 times"), std::string::npos) << check_schedule(dropped).error;

  Schedule fused = good;
  find(fused.ranks[0], ActionKind::backward_input, 1)->kind = ActionKind::backward;
  EXPECT_FALSE(check_schedule(fused).ok());

  EXPECT_EQ(parse_schedule_kind("zbh1"), ScheduleKind::zbh1);
  EXPECT_NE(schedule_problem(ScheduleKind::zbh1, 4, 1, 3).find("train.grad_accum=3"), std::string::npos);
  EXPECT_NE(schedule_problem(ScheduleKind::zbh1, 2, 2, 4).find("parallel.virtual_stages=2"), std::string::npos);
}

// ZB-V (issue 22): chunk g < pp on rank g, chunk g >= pp on rank 2pp - 1 - g.
TEST(ZeroBubble, VPlacesChunksDownAndBackUp) {
  const std::vector<int> want = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(chunk_owner(ChunkPlacement::v_shape, 4, g), want[size_t(g)]) << "chunk " << g;
    EXPECT_EQ(chunk_owner(ChunkPlacement::round_robin, 4, g), g % 4) << "chunk " << g;
  }
  EXPECT_EQ(chunk_placement(ScheduleKind::zbv), ChunkPlacement::v_shape);
  EXPECT_EQ(chunk_placement(ScheduleKind::interleaved), ChunkPlacement::round_robin);
  EXPECT_EQ(make_schedule(ScheduleKind::zbv, 3, 2, 3).owner(5), 0);
  // Evaluation beside zbv runs on the V's placement.
  const Schedule eval = make_schedule(ScheduleKind::forward_only, 3, 2, 2, ChunkPlacement::v_shape);
  const ScheduleCheck c = check_schedule(eval);
  ASSERT_TRUE(c.ok()) << c.error;
  std::vector<Action> fwd;
  for (const Action& a : eval.ranks[0])
    if (a.kind == ActionKind::forward) fwd.push_back(a);
  const std::vector<Action> want_fwd = {{ActionKind::forward, 0, 0}, {ActionKind::forward, 0, 5},
                                        {ActionKind::forward, 1, 0}, {ActionKind::forward, 1, 5}};
  EXPECT_EQ(fwd, want_fwd);
  EXPECT_THROW(make_schedule(ScheduleKind::zbv, 3, 2, 3, ChunkPlacement::round_robin), std::invalid_argument);
}

// Valid over the grid; a rank's slots (F to W) never exceed 2 pp half-stage
// chunks (1F1B's rank-0 bound in bytes) and reach it; every W is deferred
// at most as far as that.
TEST(ZeroBubble, VValidOverGrid) {
  for (int pp = 2; pp <= 8; ++pp)
    for (int m = pp; m <= 4 * pp + 2; ++m) {
      SCOPED_TRACE("zbv pp=" + std::to_string(pp) + " m=" + std::to_string(m));
      const Schedule s = make_schedule(ScheduleKind::zbv, pp, 2, m);
      const ScheduleCheck c = check_schedule(s);
      ASSERT_TRUE(c.ok()) << c.error << "\n" << describe_schedule(s);
      for (int r = 0; r < pp; ++r) {
        EXPECT_EQ(c.peak_inflight[size_t(r)], std::min(2 * pp, 2 * m)) << "rank " << r;
        EXPECT_EQ(c.peak_inflight[size_t(r)], expected_inflight(ScheduleKind::zbv, pp, 2, m, r));
        EXPECT_GE(c.peak_deferred_w[size_t(r)], 1) << "rank " << r;
        EXPECT_LE(c.peak_deferred_w[size_t(r)], expected_deferred_w(ScheduleKind::zbv, pp, 2, m, r)) << "rank " << r;
      }
    }
  EXPECT_FALSE(deferred_w_exact(ScheduleKind::zbv));
  EXPECT_TRUE(deferred_w_exact(ScheduleKind::zbh1));
}

// With t_F = t_B = t_W per chunk the paper's ZB-V bubble beyond the fill,
// (pp - 1)(T_F + T_B - 2 T_W), is zero; a step that ends together on every
// rank still idles the fill of the V's first leg, pp - 1 chunk units, over
// a busy 6 m: the step takes 6 m + pp - 1 units. The generator reaches that
// bound for pp <= 4; deeper, it stays below ZB-H1's bubble.
TEST(ZeroBubble, VReplayMatchesFormula) {
  for (int pp = 2; pp <= 8; ++pp)
    for (int m : {pp, pp + 1, 2 * pp, 16}) {
      const ScheduleCheck c = check_schedule(make_schedule(ScheduleKind::zbv, pp, 2, m), 1.0, 2.0, 1.0);
      ASSERT_TRUE(c.ok()) << c.error;
      const double fill_only = double(pp - 1) / (6.0 * m);
      EXPECT_NEAR(bubble_formula(ScheduleKind::zbv, pp, 2, m), fill_only, 1e-12);
      if (pp <= 4) {
        EXPECT_NEAR(c.sim_makespan, 6.0 * m + pp - 1, 1e-12) << "pp=" << pp << " m=" << m;
        for (int r = 0; r < pp; ++r)
          EXPECT_NEAR(c.sim_bubble[size_t(r)], fill_only, 1e-12) << "pp=" << pp << " m=" << m << " rank " << r;
      } else {
        // ZB-H1 over the same stages: one stage is two chunks, t = 2 each.
        const ScheduleCheck h = check_schedule(make_schedule(ScheduleKind::zbh1, pp, 1, m), 2.0, 4.0, 2.0);
        ASSERT_TRUE(h.ok()) << h.error;
        for (int r = 0; r < pp; ++r) {
          EXPECT_GE(c.sim_bubble[size_t(r)], fill_only - 1e-12) << "pp=" << pp << " m=" << m << " rank " << r;
          EXPECT_LT(c.sim_bubble[size_t(r)], h.sim_bubble[size_t(r)]) << "pp=" << pp << " m=" << m << " rank " << r;
        }
      }
    }
}

// Refusals name the keys; the checker refuses a V list on the wrong placement.
TEST(ZeroBubble, VRefusals) {
  EXPECT_EQ(parse_schedule_kind("zbv"), ScheduleKind::zbv);
  EXPECT_EQ(schedule_problem(ScheduleKind::zbv, 4, 2, 4), "");
  for (int v : {1, 3}) {
    const std::string p = schedule_problem(ScheduleKind::zbv, 2, v, 4);
    EXPECT_NE(p.find("parallel.virtual_stages=" + std::to_string(v)), std::string::npos) << p;
    EXPECT_NE(p.find("parallel.schedule=zbv"), std::string::npos) << p;
  }
  EXPECT_NE(schedule_problem(ScheduleKind::zbv, 4, 2, 3).find("train.grad_accum=3"), std::string::npos);
  EXPECT_NE(schedule_problem(ScheduleKind::zbv, 1, 2, 4).find("parallel.pp=1"), std::string::npos);
  const std::string empty = stage_split_problem(ScheduleKind::zbv, {0, 1, 1, 2, 3});
  EXPECT_NE(empty.find("chunk 1 without blocks"), std::string::npos) << empty;
  EXPECT_NE(stage_split_problem(ScheduleKind::zbh1, {0, 0, 2}).find("chunk 0"), std::string::npos);
  EXPECT_EQ(stage_split_problem(ScheduleKind::interleaved, {0, 1, 1, 2, 3}), "");
  EXPECT_EQ(stage_split_problem(ScheduleKind::zbv, {0, 1, 2, 3, 4}), "");

  Schedule wrong = make_schedule(ScheduleKind::zbv, 2, 2, 4);
  wrong.placement = ChunkPlacement::round_robin;
  EXPECT_NE(check_schedule(wrong).error.find("for a chunk of rank 1"), std::string::npos) << check_schedule(wrong).error;
}
