// The pipeline schedules, checked without MPI over a grid of (pp, m, v).
#include <gtest/gtest.h>

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
