// When a pipeline's boundary messages move, for a comm whose sends and
// receives come in groups (NCCL). The schedule (schedule.hpp) says what each
// rank computes and sends; this plan says, before each action, which group
// of sends and receives the rank starts. Built once from the schedule, the
// same on every rank, and proven by a replay of every rank at once before
// any message moves.
//
// Why a plan: NCCL has no tags and no lone non-blocking calls to rely on. A
// send completes only when its peer has started the matching receive, the
// n-th message from one rank to another is the n-th receive that peer posts
// from it, and the groups a rank starts run one after another on its
// stream. The MPI executor posts receives early and sends eagerly; on NCCL
// that order deadlocks (two neighbours' streams each held by a send the
// other's stream reaches only later) or pairs the wrong messages
// (interleaved schedules send a rank activations and gradients of different
// chunks in an order it does not consume them in).
//
// The plan: both halves of a message go in the first group of their rank
// that starts no earlier than the message is sent in the schedule's eager
// timeline (its replay with sends buffered, check_schedule's unit costs):
// the send in the group right after the action that computed it, the
// receive never after the action that needs it. Between two ranks both
// halves keep the sender's order. Training waits for a group only where an
// action needs it (p2p_waits_deferred), so a half that comes before its
// peer's holds only its own rank's stream, not its compute. Evaluation waits
// at every group; there the send goes in the sender's first group that
// starts no earlier than the receive's, so a group waits at worst for a
// peer's next action boundary.
//
// The replay (check_p2p_plan) runs every rank at once, the groups of one
// rank in order, each done once the peers of all its messages have started
// theirs, and the host waiting as the executor does. It checks the pairing
// (the n-th send is the n-th receive, the same message), that every message
// arrives before its use and every activation leaves before its slot's
// backward frees it, and that no rank waits forever. A schedule whose plan
// fails it is refused by name before any message moves; none of the shipped
// ones does (test_p2p_plan runs them all over a grid of pp, v and m, and
// finds the eager timeline's makespan and bubbles in every case).
#pragma once

#include <string>
#include <vector>

#include "parallel/pp/schedule.hpp"

namespace pentad {

// A boundary message, keyed by the chunk that consumes it (as the MPI tags
// are): the activation into `chunk` (from chunk - 1) or the gradient into
// `chunk` (from chunk + 1), of micro-batch mb.
struct P2pMessage {
  bool grad = false;
  int mb = 0, chunk = 0;
  bool operator==(const P2pMessage&) const = default;
};

// One group, started at once and done together: sends go to the owner of the
// message's chunk, receives come from the owner of the chunk that produces it.
struct P2pGroup {
  std::vector<P2pMessage> sends, recvs;
  bool empty() const { return sends.empty() && recvs.empty(); }
};

struct P2pPlan {
  // [pp rank][i]: the group the rank starts before its action i; i == the
  // list's size: after its last action.
  std::vector<std::vector<P2pGroup>> before;
};

struct P2pCheck {
  std::string error;  // "" when every rank finishes and every message pairs
  // The timed replay (the schedule checker's costs, messages free): per-rank
  // idle / busy over the makespan, comparable with ScheduleCheck's.
  std::vector<double> sim_bubble;
  double sim_makespan = 0;
  bool ok() const { return error.empty(); }
};

// The producer and the consumer of a message, under s's placement.
int p2p_source(const Schedule& s, const P2pMessage& m);
int p2p_dest(const Schedule& s, const P2pMessage& m);

// How the executor waits for its groups. A training schedule's groups are
// started and left running: the host waits for one only where an action
// needs it (a received message; before a backward, the send of its chunk's
// output) and for all at the end of the step. Evaluation (forward_only)
// waits for each group where it starts it, and frees the slot it sent from.
bool p2p_waits_deferred(const Schedule& s);

// Replays plan with s: every rank at once, each group waiting until all its
// messages' peers have started their halves; checks the n-th send from a
// rank to another is that peer's n-th receive from it, the same message.
// Costs as check_schedule's (t_w < 0: t_b / 2).
P2pCheck check_p2p_plan(const Schedule& s, const P2pPlan& plan, double t_f = 1.0, double t_b = 2.0,
                        double t_w = -1.0);

// The plan above for a valid schedule (check_schedule). Throws
// std::invalid_argument naming parallel.schedule if its replay fails.
P2pPlan make_p2p_plan(const Schedule& s);

// "rank 0: [s a1.1 | r g0.1] F0.0 ..." style listing of one rank's plan.
std::string describe_p2p_plan(const Schedule& s, const P2pPlan& plan);

}  // namespace pentad
