// The grouped message plan and its replay (see p2p_plan.hpp).
#include "parallel/pp/p2p_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace pentad {
namespace {

bool is_compute(ActionKind k) {
  return k == ActionKind::forward || k == ActionKind::backward || k == ActionKind::backward_input ||
         k == ActionKind::backward_weight;
}

// The message a send action puts on the wire.
P2pMessage sent_by(const Action& a) {
  if (a.kind == ActionKind::send_act) return {false, a.mb, a.chunk + 1};
  return {true, a.mb, a.chunk - 1};
}

// The message a compute action waits for, if any (as the executor's arrive).
bool needed_by(const Schedule& s, const Action& a, P2pMessage* m) {
  if (a.kind == ActionKind::forward && a.chunk > 0) {
    *m = {false, a.mb, a.chunk};
    return true;
  }
  if ((a.kind == ActionKind::backward || a.kind == ActionKind::backward_input) && a.chunk < s.n_chunks() - 1) {
    *m = {true, a.mb, a.chunk};
    return true;
  }
  return false;
}

std::string message_str(const P2pMessage& m) {
  return std::string(m.grad ? "g" : "a") + std::to_string(m.mb) + "." + std::to_string(m.chunk);
}

// " [ sa1.1 rg0.1 ]": a group's sends, then its receives.
void append_group(std::string& out, const P2pGroup& g) {
  out += " [";
  for (const P2pMessage& m : g.sends) {
    out += " s";
    out += message_str(m);
  }
  for (const P2pMessage& m : g.recvs) {
    out += " r";
    out += message_str(m);
  }
  out += " ]";
}

using SendKey = std::tuple<int, bool, int, int>;  // (rank, grad, mb, chunk)
SendKey send_key(int rank, const P2pMessage& m) { return {rank, m.grad, m.mb, m.chunk}; }

// [rank][peer] -> the messages rank sends peer, in its list's order.
std::vector<std::vector<std::vector<P2pMessage>>> send_orders(const Schedule& s) {
  std::vector<std::vector<std::vector<P2pMessage>>> out(size_t(s.pp), std::vector<std::vector<P2pMessage>>(size_t(s.pp)));
  for (int r = 0; r < s.pp; ++r)
    for (const Action& a : s.ranks[size_t(r)])
      if (a.kind == ActionKind::send_act || a.kind == ActionKind::send_grad) {
        const P2pMessage m = sent_by(a);
        out[size_t(r)][size_t(p2p_dest(s, m))].push_back(m);
      }
  return out;
}

double compute_cost(const Action& a, double t_f, double t_b, double t_w) {
  switch (a.kind) {
    case ActionKind::forward: return t_f;
    case ActionKind::backward_input: return t_b - t_w;
    case ActionKind::backward_weight: return t_w;
    case ActionKind::backward: return t_b;
    default: return 0.0;
  }
}

// The eager timeline (check_schedule's replay: sends buffered, unit costs):
// when each message is sent, and when each action of each rank starts.
struct Timeline {
  std::map<SendKey, double> sent;          // (producer rank, message) -> time
  std::vector<std::vector<double>> start;  // [rank][action]
};

Timeline eager_timeline(const Schedule& s, const ScheduleCheck& replay) {
  Timeline tl;
  tl.start = replay.start;
  for (size_t r = 0; r < size_t(s.pp); ++r)
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      if (a.kind == ActionKind::send_act || a.kind == ActionKind::send_grad)
        tl.sent[send_key(int(r), sent_by(a))] = tl.start[r][i];
    }
  return tl;
}

// The first of `computes` (action indices of one rank, in order) at or after
// index `from` in it that starts no earlier than t.
size_t first_at(const std::vector<size_t>& computes, const std::vector<double>& start, size_t from, double t) {
  while (from < computes.size() && start[computes[from]] < t) ++from;
  return from;
}

// The plan. The receive goes in the group before the receiver's first
// compute action that starts no earlier than the message is sent in the
// eager timeline (and no later than the action that needs it). The send
// goes in the sender's group before its first compute action that starts no
// earlier than that too where training defers its waits, else no earlier
// than the receive (both halves then meet at one time). Between two ranks
// both halves keep the sender's order.
P2pPlan build(const Schedule& s, const Timeline& tl) {
  const auto orders = send_orders(s);
  const size_t P = size_t(s.pp);
  std::vector<std::vector<size_t>> computes(P);  // [rank] -> its compute actions' indices
  for (size_t r = 0; r < P; ++r)
    for (size_t i = 0; i < s.ranks[r].size(); ++i)
      if (is_compute(s.ranks[r][i].kind)) computes[r].push_back(i);
  auto at_index = [&](size_t r, size_t c) { return c < computes[r].size() ? computes[r][c] : s.ranks[r].size(); };
  P2pPlan plan;
  plan.before.resize(P);
  for (size_t r = 0; r < P; ++r) plan.before[r].resize(s.ranks[r].size() + 1);
  // Placed sends: [rank] -> (group index, message) in the rank's send order.
  std::vector<std::vector<std::pair<size_t, P2pMessage>>> placed(P);
  for (size_t from = 0; from < P; ++from)
    for (size_t to = 0; to < P; ++to) {
      size_t rc = 0, sc = 0;  // monotone positions in computes[to] / computes[from]
      for (const P2pMessage& m : orders[from][to]) {
        const double t = tl.sent.at(send_key(int(from), m));
        rc = first_at(computes[to], tl.start[to], rc, t);
        const size_t ri = at_index(to, rc);
        plan.before[to][ri].recvs.push_back(m);
        const double meet = ri < s.ranks[to].size() ? tl.start[to][ri] : t;
        // (no earlier than t: never before the send action, whose output exists from there)
        sc = first_at(computes[from], tl.start[from], sc, p2p_waits_deferred(s) ? t : std::max(t, meet));
        placed[from].push_back({at_index(from, sc), m});
      }
    }
  // Sends into groups, in the rank's send order per peer (placed is
  // monotone per peer, so a stable sort keeps it).
  for (size_t r = 0; r < P; ++r) {
    std::stable_sort(placed[r].begin(), placed[r].end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [i, m] : placed[r]) plan.before[r][i].sends.push_back(m);
  }
  return plan;
}

class GroupReplay {
 public:
  GroupReplay(const Schedule& s, const P2pPlan& plan, double t_f, double t_b, double t_w)
      : s_(s), plan_(plan), t_f_(t_f), t_b_(t_b), t_w_(t_w < 0 ? t_b / 2 : t_w) {}

  P2pCheck run() {
    P2pCheck out;
    if (!pair_messages(out.error) || !in_time(out.error)) return out;
    if (p2p_waits_deferred(s_) ? !run_deferred(out.error) : !run_blocking(out.error)) return out;
    const size_t P = size_t(s_.pp);
    for (size_t r = 0; r < P; ++r) out.sim_makespan = std::max(out.sim_makespan, clock_[r]);
    out.sim_bubble.assign(P, 0.0);
    for (size_t r = 0; r < P; ++r)
      out.sim_bubble[r] = busy_[r] > 0 ? (out.sim_makespan - busy_[r]) / busy_[r] : 0;
    return out;
  }

 private:
  // Runs rank r's action at pc (its compute at the replay's cost) and steps on.
  void run_action(size_t r) {
    const double dur = compute_cost(s_.ranks[r][pc_[r]], t_f_, t_b_, t_w_);
    clock_[r] += dur;
    busy_[r] += dur;
    ++pc_[r];
    in_group_[r] = true;
  }

  // Sweeps the ranks, each advanced as far as it can go (advance(r): did it
  // move?), until all finish (true) or none can move (false, error set;
  // waiting: the group each host waits for, if the mode knows it).
  template <class Advance>
  bool sweep(Advance advance, std::string& error, const std::vector<size_t>* waiting = nullptr) {
    const size_t P = size_t(s_.pp);
    pc_.assign(P, 0);
    in_group_.assign(P, true);
    clock_.assign(P, 0.0);
    busy_.assign(P, 0.0);
    for (;;) {
      bool progress = false, all_done = true;
      for (size_t r = 0; r < P; ++r) {
        if (advance(r)) progress = true;
        if (pc_[r] <= s_.ranks[r].size()) all_done = false;
      }
      if (all_done) return true;
      if (!progress) {
        error = deadlock_message(pc_, waiting);
        return false;
      }
    }
  }

  // Evaluation: the host starts each group and waits for it there.
  bool run_blocking(std::string& error) {
    const size_t P = size_t(s_.pp);
    std::vector<bool> posted(P, false);
    std::vector<double> post_time(P, 0.0);
    auto advance = [&](size_t r) {
      bool moved = false;
      const size_t n = s_.ranks[r].size();
      while (pc_[r] <= n) {
        if (!in_group_[r]) {
          run_action(r);
          moved = true;
          continue;
        }
        if (!plan_.before[r][pc_[r]].empty()) {
          if (!posted[r]) {
            posted[r] = true;
            post_time[r] = clock_[r];
          }
          if (!complete(int(r), pc_[r], pc_, posted, post_time, clock_[r])) break;
          posted[r] = false;
        }
        in_group_[r] = false;
        moved = true;
        if (pc_[r] == n) {
          ++pc_[r];
          break;
        }
      }
      return moved;
    };
    return sweep(advance, error);
  }

  // Training: the host starts each group and goes on; it waits for a group
  // only where an action needs it (a received message; before a backward,
  // the send of its chunk's output), and for all of them at the end. The
  // groups of one rank run in the order started, each once the previous one
  // is done (NCCL's stream); a message completes once the groups of both
  // halves have started.
  bool run_deferred(std::string& error) {
    const size_t P = size_t(s_.pp);
    posted_.assign(P, {});
    done_.assign(P, {});
    prev_.assign(P, {});
    busy_mark_.assign(P, {});
    for (size_t r = 0; r < P; ++r) {
      const size_t n = plan_.before[r].size();
      posted_[r].assign(n, -1.0);
      done_[r].assign(n, -1.0);
      busy_mark_[r].assign(n, false);
      prev_[r].assign(n, n);
      size_t last = n;
      for (size_t i = 0; i < n; ++i)
        if (!plan_.before[r][i].empty()) {
          prev_[r][i] = last;
          last = i;
        }
    }
    // [rank] -> the group of each received message, and of each sent activation.
    std::vector<std::map<std::tuple<bool, int, int>, size_t>> recv_in(P), send_in(P);
    for (size_t r = 0; r < P; ++r)
      for (size_t i = 0; i < plan_.before[r].size(); ++i) {
        for (const P2pMessage& m : plan_.before[r][i].recvs) recv_in[r][{m.grad, m.mb, m.chunk}] = i;
        for (const P2pMessage& m : plan_.before[r][i].sends)
          if (!m.grad) send_in[r][{false, m.mb, m.chunk}] = i;
      }
    std::vector<size_t> waiting(P);  // per rank: the group it last found not done
    // The host waits until group i of rank r is done; false while that time
    // is not known yet (a peer has not started its half).
    auto wait_for = [&](size_t r, size_t i) {
      const double t = done(int(r), i);
      waiting[r] = i;
      if (t < 0) return false;
      clock_[r] = std::max(clock_[r], t);
      return true;
    };
    // Whether rank r's host can go past step pc (its group, then its action).
    auto can_pass = [&](size_t r) {
      const auto& list = s_.ranks[r];
      const auto& steps = plan_.before[r];
      if (in_group_[r]) {
        if (!steps[pc_[r]].empty() && posted_[r][pc_[r]] < 0) posted_[r][pc_[r]] = clock_[r];
        if (pc_[r] < list.size()) return true;
        for (size_t i = 0; i < steps.size(); ++i)  // the end: every group of the rank done
          if (!steps[i].empty() && !wait_for(r, i)) return false;
        return true;
      }
      const Action& a = list[pc_[r]];
      P2pMessage need;
      if (is_compute(a.kind) && needed_by(s_, a, &need) && !wait_for(r, recv_in[r].at({need.grad, need.mb, need.chunk})))
        return false;
      if (a.kind == ActionKind::backward || a.kind == ActionKind::backward_input) {
        auto it = send_in[r].find({false, a.mb, a.chunk + 1});
        if (it != send_in[r].end() && !wait_for(r, it->second)) return false;
      }
      return true;
    };
    auto advance = [&](size_t r) {
      bool moved = false;
      for (; pc_[r] <= s_.ranks[r].size() && can_pass(r); moved = true) {
        if (!in_group_[r])
          run_action(r);
        else if (pc_[r] == s_.ranks[r].size())
          ++pc_[r];
        else
          in_group_[r] = false;
      }
      return moved;
    };
    return sweep(advance, error, &waiting);
  }

  // When group i of rank r starts running: once started by the host and the
  // rank's previous group is done. -1: not known yet.
  double started(int r, size_t i) {
    const double post = posted_[size_t(r)][i];
    if (post < 0) return -1;
    const size_t p = prev_[size_t(r)][i];
    if (p == plan_.before[size_t(r)].size()) return post;
    const double before = done(r, p);
    return before < 0 ? -1 : std::max(post, before);
  }

  // When group i of rank r is done: every message of it once both halves'
  // groups have started. -1: not known yet.
  double done(int r, size_t i) {
    double& d = done_[size_t(r)][i];
    if (d >= 0) return d;
    if (busy_mark_[size_t(r)][i]) return -1;  // a cycle: the groups wait on each other
    busy_mark_[size_t(r)][i] = true;
    double t = started(r, i);
    for (size_t k = 0; t >= 0 && k < halves_[size_t(r)][i].size(); ++k) {
      const Op& p = halves_[size_t(r)][i][k].partner;
      const double peer = p.rank == r && p.step == i ? t : started(p.rank, p.step);
      t = peer < 0 ? -1 : std::max(t, peer);
    }
    busy_mark_[size_t(r)][i] = false;
    if (t >= 0) d = t;
    return t;
  }

  struct Op {
    int rank = 0;
    size_t step = 0;  // index into plan.before[rank]
    size_t idx = 0;   // sends first, then receives
  };
  struct Half {
    Op partner;
    bool matched = false;
    double at = 0;
  };

  static std::string where(int r, size_t step) {
    return "rank " + std::to_string(r) + " before action " + std::to_string(step);
  }

  // The n-th send from a to b meets b's n-th receive from a.
  bool pair_messages(std::string& error) {
    const size_t P = size_t(s_.pp);
    halves_.assign(P, {});
    std::map<std::pair<int, int>, std::vector<std::pair<Op, P2pMessage>>> sends, recvs;
    for (size_t r = 0; r < P; ++r) {
      const auto& steps = plan_.before[r];
      if (steps.size() != s_.ranks[r].size() + 1) {
        error = "the plan of rank " + std::to_string(r) + " does not match its action list";
        return false;
      }
      halves_[r].resize(steps.size());
      for (size_t i = 0; i < steps.size(); ++i) {
        const P2pGroup& g = steps[i];
        halves_[r][i].resize(g.sends.size() + g.recvs.size());
        for (size_t k = 0; k < g.sends.size(); ++k)
          sends[{int(r), p2p_dest(s_, g.sends[k])}].push_back({{int(r), i, k}, g.sends[k]});
        for (size_t k = 0; k < g.recvs.size(); ++k)
          recvs[{p2p_source(s_, g.recvs[k]), int(r)}].push_back({{int(r), i, g.sends.size() + k}, g.recvs[k]});
      }
    }
    for (int a = 0; a < s_.pp; ++a)
      for (int b = 0; b < s_.pp; ++b) {
        const auto& sd = sends[{a, b}];
        const auto& rv = recvs[{a, b}];
        if (sd.size() != rv.size()) {
          error = "rank " + std::to_string(a) + " sends rank " + std::to_string(b) + " " + std::to_string(sd.size()) +
                  " messages and rank " + std::to_string(b) + " receives " + std::to_string(rv.size());
          return false;
        }
        for (size_t n = 0; n < sd.size(); ++n) {
          if (!(sd[n].second == rv[n].second)) {
            error = "message " + std::to_string(n) + " from rank " + std::to_string(a) + " to rank " +
                    std::to_string(b) + " is " + message_str(sd[n].second) + " but is received as " +
                    message_str(rv[n].second) + " (" + where(b, rv[n].first.step) + ")";
            return false;
          }
          at(sd[n].first).partner = rv[n].first;
          at(rv[n].first).partner = sd[n].first;
        }
      }
    return true;
  }

  // Every message received before the action that needs it; on a training
  // schedule every activation sent before its slot's backward frees it.
  bool in_time(std::string& error) const {
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[size_t(r)];
      const auto& steps = plan_.before[size_t(r)];
      std::map<std::tuple<bool, int, int>, size_t> received, sent;  // message -> group index
      for (size_t i = 0; i < steps.size(); ++i) {
        for (const P2pMessage& m : steps[i].recvs) received[{m.grad, m.mb, m.chunk}] = i;
        for (const P2pMessage& m : steps[i].sends) sent[{m.grad, m.mb, m.chunk}] = i;
      }
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        P2pMessage need;
        if (is_compute(a.kind) && needed_by(s_, a, &need)) {
          auto it = received.find({need.grad, need.mb, need.chunk});
          if (it == received.end() || it->second > i) {
            error = where(r, i) + ": " + message_str(need) + " is needed but not received before";
            return false;
          }
        }
        const bool frees = a.kind == ActionKind::backward || a.kind == ActionKind::backward_input;
        if (frees && a.chunk + 1 < s_.n_chunks()) {
          auto it = sent.find({false, a.mb, a.chunk + 1});
          if (it == sent.end() || it->second > i) {
            error = where(r, i) + ": the backward frees a" + std::to_string(a.mb) + "." + std::to_string(a.chunk + 1) +
                    "'s activation before it is sent";
            return false;
          }
        }
      }
    }
    return true;
  }

  Half& at(const Op& o) { return halves_[size_t(o.rank)][o.step][o.idx]; }

  // Matches the group's halves whose peers have posted theirs; true when all are.
  bool complete(int r, size_t step, const std::vector<size_t>& pc, const std::vector<bool>& posted,
                const std::vector<double>& post_time, double& clock) {
    bool all = true;
    double done = clock;
    for (Half& h : halves_[size_t(r)][step]) {
      if (!h.matched) {
        const Op& p = h.partner;
        // The peer is in that group now (its step, before its action).
        if (posted[size_t(p.rank)] && pc[size_t(p.rank)] == p.step) {
          h.matched = true;
          h.at = std::max(post_time[size_t(r)], post_time[size_t(p.rank)]);
          Half& other = at(p);
          other.matched = true;
          other.at = h.at;
        }
      }
      if (!h.matched) all = false;
      done = std::max(done, h.at);
    }
    if (all) clock = done;
    return all;
  }

  // Each unfinished rank where it stands, with the group it waits for
  // (waiting: the deferred replay's, else the group before the action).
  std::string deadlock_message(const std::vector<size_t>& pc, const std::vector<size_t>* waiting = nullptr) const {
    std::string blocked;
    for (int r = 0; r < s_.pp; ++r) {
      if (pc[size_t(r)] > s_.ranks[size_t(r)].size()) continue;
      const size_t g = waiting ? (*waiting)[size_t(r)] : pc[size_t(r)];
      blocked += ' ';
      blocked += where(r, pc[size_t(r)]);
      if (g != pc[size_t(r)]) blocked += " waits for its group before action " + std::to_string(g);
      append_group(blocked, plan_.before[size_t(r)][g]);
      blocked += ';';
    }
    return "grouped messages deadlock:" + blocked;
  }

  const Schedule& s_;
  const P2pPlan& plan_;
  const double t_f_, t_b_, t_w_;
  std::vector<std::vector<std::vector<Half>>> halves_;  // [rank][step][op]
  // The replay, per rank: its step (the group before action pc, then action
  // pc), whether it is at the group, its clock and its busy time.
  std::vector<size_t> pc_;
  std::vector<bool> in_group_;
  std::vector<double> clock_, busy_;
  // The deferred replay, [rank][step]: when the host started the group (-1:
  // not yet), when it is done (-1: not known yet), the rank's previous group
  // (the list's size + 1: none), and the groups whose time is being found.
  std::vector<std::vector<double>> posted_, done_;
  std::vector<std::vector<size_t>> prev_;
  std::vector<std::vector<bool>> busy_mark_;
};

}  // namespace

bool p2p_waits_deferred(const Schedule& s) { return s.kind != ScheduleKind::forward_only; }

int p2p_source(const Schedule& s, const P2pMessage& m) { return s.owner(m.grad ? m.chunk + 1 : m.chunk - 1); }
int p2p_dest(const Schedule& s, const P2pMessage& m) { return s.owner(m.chunk); }

P2pCheck check_p2p_plan(const Schedule& s, const P2pPlan& plan, double t_f, double t_b, double t_w) {
  if (plan.before.size() != size_t(s.pp)) {
    P2pCheck c;
    c.error = "the plan has " + std::to_string(plan.before.size()) + " ranks for pp=" + std::to_string(s.pp);
    return c;
  }
  return GroupReplay(s, plan, t_f, t_b, t_w).run();
}

P2pPlan make_p2p_plan(const Schedule& s) {
  // The eager timeline needs a schedule that runs (else a message it waits
  // for is never sent): the checker's finding, not an index error.
  const ScheduleCheck sc = check_schedule(s);
  if (!sc.ok())
    throw std::invalid_argument(std::string("parallel.schedule = ") + schedule_name(s.kind) +
                                ": no grouped message plan for an invalid schedule (" + sc.error + ")");
  P2pPlan plan = build(s, eager_timeline(s, sc));
  const P2pCheck c = check_p2p_plan(s, plan);
  if (!c.ok())
    throw std::invalid_argument(std::string("parallel.schedule = ") + schedule_name(s.kind) +
                                ": no grouped message plan for it (" + c.error + ")");
  return plan;
}

std::string describe_p2p_plan(const Schedule& s, const P2pPlan& plan) {
  std::string out;
  for (int r = 0; r < s.pp; ++r) {
    out += "rank " + std::to_string(r) + ":";
    const auto& list = s.ranks[size_t(r)];
    for (size_t i = 0; i <= list.size(); ++i) {
      const P2pGroup& g = plan.before[size_t(r)][i];
      if (!g.empty()) append_group(out, g);
      if (i < list.size() && is_compute(list[i].kind)) {
        const Action& a = list[i];
        out += std::string(" ") + (a.kind == ActionKind::forward ? "F" : a.kind == ActionKind::backward_weight ? "W" : "B") +
               std::to_string(a.mb) + "." + std::to_string(a.chunk);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace pentad
