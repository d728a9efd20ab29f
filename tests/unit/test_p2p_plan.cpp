// The pipeline's grouped message plan (parallel/pp/p2p_plan.hpp), replayed
// without MPI: every shipped schedule over a grid of (pp, v, m) gets a plan
// that pairs, arrives in time and finishes; and the replay catches the
// plans that would hang or mispair on NCCL.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "parallel/pp/p2p_plan.hpp"

using namespace pentad;

namespace {

std::string label(ScheduleKind k, int pp, int v, int m) {
  return std::string(schedule_name(k)) + " pp=" + std::to_string(pp) + " v=" + std::to_string(v) +
         " m=" + std::to_string(m);
}

// The plan of (k, pp, v, m): it replays, and returns the replay beside the
// schedule checker's eager one (sends buffered, the same unit costs).
struct Both {
  P2pCheck grouped;
  ScheduleCheck eager;
};
Both replay(ScheduleKind k, int pp, int v, int m) {
  const Schedule s = make_schedule(k, pp, v, m);
  const P2pPlan plan = make_p2p_plan(s);
  return {check_p2p_plan(s, plan), check_schedule(s)};
}

bool has_error(const P2pCheck& c, const std::string& part) { return c.error.find(part) != std::string::npos; }

}  // namespace

// Over the grid kinds x pps x vs x ms (the valid cases): the grouped plan
// loses nothing against buffered sends in the unit-cost replay (the same
// makespan on the same busy time, so the same bubble on every rank).
// Returns the number of cases.
static int expect_eager_timeline(const std::vector<ScheduleKind>& kinds, const std::vector<int>& pps,
                          const std::vector<int>& vs, const std::vector<int>& ms) {
  int cases = 0;
  for (ScheduleKind k : kinds)
    for (int pp : pps)
      for (int v : vs)
        for (int m : ms) {
          if (!schedule_problem(k, pp, v, m).empty()) continue;
          SCOPED_TRACE(label(k, pp, v, m));
          const Both b = replay(k, pp, v, m);
          EXPECT_TRUE(b.eager.ok()) << b.eager.error;
          EXPECT_TRUE(b.grouped.ok()) << b.grouped.error;
          if (!b.eager.ok() || !b.grouped.ok()) continue;
          EXPECT_DOUBLE_EQ(b.grouped.sim_makespan, b.eager.sim_makespan);
          for (int r = 0; r < pp; ++r)
            EXPECT_DOUBLE_EQ(b.grouped.sim_bubble[size_t(r)], b.eager.sim_bubble[size_t(r)]) << "rank " << r;
          ++cases;
        }
  return cases;
}

// afab, 1f1b, zbh1, zbv and evaluation.
TEST(P2pPlan, MatchesTheEagerTimeline) {
  EXPECT_GE(expect_eager_timeline({ScheduleKind::afab, ScheduleKind::one_f_one_b, ScheduleKind::zbh1,
                                   ScheduleKind::zbv, ScheduleKind::forward_only},
                                  {2, 3, 4, 8}, {1, 2, 3}, {1, 2, 4, 8, 16, 32}),
            100);
}

// Interleaved sends a rank activations and gradients of several chunks in
// one stream, and two ranks' action boundaries do not line up. The plan
// pairs them in order and, since training waits for a group only where an
// action needs it, loses nothing against buffered sends either: the same
// makespan and bubbles over the whole grid (the worst was 1.233x, pp 2 v 4
// m 32, while every group was waited for where it started).
TEST(P2pPlan, InterleavedMatchesTheEagerTimeline) {
  EXPECT_GE(expect_eager_timeline({ScheduleKind::interleaved}, {2, 3, 4, 8}, {2, 3, 4}, {2, 4, 8, 16, 32}), 30);
}

// The same plans replayed with every group waited for where it starts (as
// evaluation does) lose time at interleaved pp 2: a receive meets a send
// at the peer's next boundary. The deferred waits are what closes the gap.
TEST(P2pPlan, WaitingAtEveryGroupLosesTimeOnInterleaved) {
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 16);
  Schedule as_eval = s;
  as_eval.kind = ScheduleKind::forward_only;  // the replay then waits at every group
  ASSERT_FALSE(p2p_waits_deferred(as_eval));
  ASSERT_TRUE(p2p_waits_deferred(s));
  const P2pPlan plan = make_p2p_plan(s);
  const P2pCheck deferred = check_p2p_plan(s, plan), blocking = check_p2p_plan(as_eval, plan);
  ASSERT_TRUE(deferred.ok()) << deferred.error;
  ASSERT_TRUE(blocking.ok()) << blocking.error;
  EXPECT_DOUBLE_EQ(deferred.sim_makespan, check_schedule(s).sim_makespan);
  EXPECT_GT(blocking.sim_makespan, deferred.sim_makespan);
}

// zbv's turn of the V is a message rank pp - 1 sends itself: both halves
// sit in one group (the NCCL comm makes it a device copy and needs both;
// split over two groups the replay would call it a deadlock).
TEST(P2pPlan, ZbvTurnIsOneGroup) {
  const Schedule s = make_schedule(ScheduleKind::zbv, 4, 2, 8);
  const P2pPlan plan = make_p2p_plan(s);
  int turns = 0;
  for (const P2pGroup& g : plan.before[3])
    for (const P2pMessage& m : g.recvs)
      if (p2p_source(s, m) == 3) {
        EXPECT_NE(std::find(g.sends.begin(), g.sends.end(), m), g.sends.end()) << "a" << m.mb << "." << m.chunk;
        ++turns;
      }
  EXPECT_EQ(turns, 2 * 8);  // an activation and a gradient per micro-batch
}

// The eager executor's order on NCCL: every message in a group of its own,
// each receive where the schedule posts it (one compute action ahead of its
// use), each send where the schedule sends it. In 1f1b's steady state each
// neighbour's stream then holds a lone send the other's stream reaches only
// after its own send (the groups of one rank run in order: the reason NCCL
// needs a plan); the replay calls it a deadlock.
TEST(P2pPlan, LoneMessagesDeadlockOn1f1b) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 4);
  P2pPlan plan;
  plan.before.resize(2);
  for (int r = 0; r < 2; ++r) {
    const auto& list = s.ranks[size_t(r)];
    auto& steps = plan.before[size_t(r)];
    steps.resize(list.size() + 1);
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.kind == ActionKind::send_act) steps[i].sends.push_back({false, a.mb, a.chunk + 1});
      if (a.kind == ActionKind::send_grad) steps[i].sends.push_back({true, a.mb, a.chunk - 1});
      if (a.kind == ActionKind::recv_act) steps[i].recvs.push_back({false, a.mb, a.chunk});
      if (a.kind == ActionKind::recv_grad) steps[i].recvs.push_back({true, a.mb, a.chunk});
    }
  }
  const P2pCheck c = check_p2p_plan(s, plan);
  EXPECT_TRUE(has_error(c, "grouped messages deadlock")) << c.error << "\n" << describe_p2p_plan(s, plan);
  // Each rank named with the group its host waits for (an earlier one:
  // the receive it posted one action ahead).
  EXPECT_TRUE(has_error(c, "rank 0 before action 5 waits for its group before action 2 [ rg0.0 ]")) << c.error;
}

// A receive moved behind the action that needs it.
TEST(P2pPlan, CatchesAReceiveAfterItsUse) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 4);
  P2pPlan plan = make_p2p_plan(s);
  const auto& list = s.ranks[1];
  size_t f1 = 0;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].kind == ActionKind::forward && list[i].mb == 1) f1 = i;
  const P2pMessage need{false, 1, 1};
  bool moved = false;
  for (size_t i = 0; i <= f1 && !moved; ++i) {
    auto& recvs = plan.before[1][i].recvs;
    auto it = std::find(recvs.begin(), recvs.end(), need);
    if (it == recvs.end()) continue;
    recvs.erase(it);
    plan.before[1][f1 + 1].recvs.insert(plan.before[1][f1 + 1].recvs.begin(), need);
    moved = true;
  }
  ASSERT_TRUE(moved) << describe_p2p_plan(s, plan);
  const P2pCheck c = check_p2p_plan(s, plan);
  EXPECT_TRUE(has_error(c, "a1.1 is needed but not received before")) << c.error;
}

// Two receives from one peer swapped: NCCL would put the first message into
// the second's buffer (same size, no tags). The replay names the pairing.
TEST(P2pPlan, CatchesReceivesOutOfOrder) {
  const Schedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 4);
  P2pPlan plan = make_p2p_plan(s);
  bool swapped = false;
  for (auto& steps : plan.before)
    for (P2pGroup& g : steps)
      for (size_t a = 0; a + 1 < g.recvs.size() && !swapped; ++a)
        for (size_t b = a + 1; b < g.recvs.size() && !swapped; ++b)
          if (p2p_source(s, g.recvs[a]) == p2p_source(s, g.recvs[b])) {
            std::swap(g.recvs[a], g.recvs[b]);
            swapped = true;
          }
  ASSERT_TRUE(swapped) << "no group receives two messages from one peer:\n" << describe_p2p_plan(s, plan);
  const P2pCheck c = check_p2p_plan(s, plan);
  EXPECT_TRUE(has_error(c, "but is received as")) << c.error;
}

// A receive dropped: the two ranks disagree on how many messages pass.
TEST(P2pPlan, CatchesAMissingReceive) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 1, 8);
  P2pPlan plan = make_p2p_plan(s);
  for (P2pGroup& g : plan.before[2])
    if (!g.recvs.empty()) {
      g.recvs.pop_back();
      break;
    }
  const P2pCheck c = check_p2p_plan(s, plan);
  EXPECT_TRUE(has_error(c, "messages and rank 2 receives")) << c.error;
}

// An activation sent after the backward that frees its slot (the last
// one rank 0 sends, moved to the end: the pairing order stays).
TEST(P2pPlan, CatchesAnActivationSentAfterItsBackward) {
  const Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 4);
  P2pPlan plan = make_p2p_plan(s);
  auto& steps = plan.before[0];
  const P2pMessage last{false, 3, 1};
  bool moved = false;
  for (size_t i = 0; i + 1 < steps.size() && !moved; ++i) {
    auto it = std::find(steps[i].sends.begin(), steps[i].sends.end(), last);
    if (it == steps[i].sends.end()) continue;
    steps[i].sends.erase(it);
    steps.back().sends.push_back(last);
    moved = true;
  }
  ASSERT_TRUE(moved) << describe_p2p_plan(s, plan);
  const P2pCheck c = check_p2p_plan(s, plan);
  EXPECT_TRUE(has_error(c, "frees a3.1's activation before it is sent")) << c.error;
}

// A schedule that cannot run (a rank's forward moved ahead of the receive
// it needs) gets the checker's finding by name, not an index error from the
// plan's timeline.
TEST(P2pPlan, RefusesAnInvalidScheduleByName) {
  Schedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 4);
  auto& list = s.ranks[1];
  std::swap(list[0], list[1]);  // F0.1 before its recv
  try {
    make_p2p_plan(s);
    FAIL() << "no error for\n" << describe_schedule(s);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.schedule = 1f1b: no grouped message plan for an invalid schedule"),
              std::string::npos)
        << e.what();
  }
}
