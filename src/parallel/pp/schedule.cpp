// Schedule generators, the checker and its timed replay (see schedule.hpp).
#include "parallel/pp/schedule.hpp"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace pentad {
namespace {

struct Compute {
  ActionKind kind;  // forward, backward, backward_input or backward_weight
  int mb, chunk;
  bool forward() const { return kind == ActionKind::forward; }
};

constexpr ActionKind F = ActionKind::forward, B = ActionKind::backward;

// ZB-H1 on rank r: 1F1B's forwards and input gradients (warm-up pp - r - 1
// forwards), each B's W deferred while more than r are pending; the pending
// ones run at the end, where rank 0's cool-down waits for gradients. With
// t_F = t_B = t_W the last rank never idles after its first forward, and
// the step takes 3m + pp - 1 units.
std::vector<Compute> zbh1_order(int pp, int m, int r) {
  std::vector<Compute> out;
  const int warmup = std::min(pp - r - 1, m);
  int f = 0, b = 0, w = 0;
  auto input_grad = [&] {
    out.push_back({ActionKind::backward_input, b++, r});
    if (b - w > r) out.push_back({ActionKind::backward_weight, w++, r});
  };
  for (; f < warmup; ++f) out.push_back({F, f, r});
  while (f < m) {
    out.push_back({F, f++, r});
    input_grad();
  }
  while (b < m) input_grad();
  while (w < m) out.push_back({ActionKind::backward_weight, w++, r});
  return out;
}

// ZB-V on all ranks at once, by list scheduling in unit time (a chunk's F,
// B and W one tick each). At every tick each free rank r takes the first
// action that can run, in this order: a B (its down chunk r first, then its
// up chunk 2pp - 1 - r), an F (the up chunk first: it leads to the loss)
// while fewer than 2pp slots are live, else its oldest pending W. Each chunk
// takes its micro-batches in order, so both sides of every message stream
// agree on it. A B needs its own F and the B of the chunk above; an F the F
// of the chunk below, as in the replay. For pp <= 4 the step takes the
// lower bound 6m + pp - 1 ticks (unit-tested); deeper pipelines come within
// a few ticks of it.
std::vector<std::vector<Compute>> zbv_orders(int pp, int m) {
  const int G = 2 * pp, cap = 2 * pp;
  constexpr long kNever = LONG_MAX;
  auto at = [&](int mb, int g) { return size_t(g) * size_t(m) + size_t(mb); };
  std::vector<long> f_done(size_t(G) * size_t(m), kNever), b_done(f_done);
  std::vector<int> next_f(size_t(G), 0), next_b(size_t(G), 0), live(size_t(pp), 0);
  std::vector<long> free_at(size_t(pp), 0);
  std::vector<std::deque<Compute>> pending(static_cast<size_t>(pp));
  std::vector<std::vector<Compute>> out(static_cast<size_t>(pp));
  long left = 6L * m * pp;
  for (long t = 0; left > 0; ++t) {
    bool started = false, busy = false;
    for (int r = 0; r < pp; ++r) {
      if (free_at[size_t(r)] > t) {
        busy = true;
        continue;
      }
      const int down = r, up = G - 1 - r;
      auto b_ready = [&](int g) {
        const int mb = next_b[size_t(g)];
        return mb < m && f_done[at(mb, g)] <= t && (g == G - 1 || b_done[at(mb, g + 1)] <= t);
      };
      auto f_ready = [&](int g) {
        const int mb = next_f[size_t(g)];
        return mb < m && live[size_t(r)] < cap && (g == 0 || f_done[at(mb, g - 1)] <= t);
      };
      Compute c{};
      if (b_ready(down) || b_ready(up)) {
        const int g = b_ready(down) ? down : up;
        c = {ActionKind::backward_input, next_b[size_t(g)]++, g};
        b_done[at(c.mb, g)] = t + 1;
        pending[size_t(r)].push_back({ActionKind::backward_weight, c.mb, g});
      } else if (f_ready(up) || f_ready(down)) {
        const int g = f_ready(up) ? up : down;
        c = {F, next_f[size_t(g)]++, g};
        f_done[at(c.mb, g)] = t + 1;
        ++live[size_t(r)];
      } else if (!pending[size_t(r)].empty()) {
        c = pending[size_t(r)].front();
        pending[size_t(r)].pop_front();
        --live[size_t(r)];
      } else {
        continue;
      }
      out[size_t(r)].push_back(c);
      free_at[size_t(r)] = t + 1;
      --left;
      started = true;
    }
    if (!started && !busy) throw std::logic_error("zbv: the generator found no action to run (pp " +
                                                  std::to_string(pp) + ", m " + std::to_string(m) + ")");
  }
  return out;
}

// The order of compute actions on pipeline rank r (zbv: see zbv_orders).
std::vector<Compute> compute_order(ScheduleKind kind, ChunkPlacement placement, int pp, int v, int m, int r) {
  std::vector<Compute> out;
  if (kind == ScheduleKind::zbh1) return zbh1_order(pp, m, r);
  if (kind == ScheduleKind::afab) {
    for (int mb = 0; mb < m; ++mb) out.push_back({F, mb, r});
    for (int mb = 0; mb < m; ++mb) out.push_back({B, mb, r});
    return out;
  }
  if (kind == ScheduleKind::one_f_one_b) {
    const int warmup = std::min(pp - r - 1, m);
    int f = 0, b = 0;
    for (; f < warmup; ++f) out.push_back({F, f, r});
    while (f < m) {  // steady state: one forward, one backward
      out.push_back({F, f++, r});
      out.push_back({B, b++, r});
    }
    while (b < m) out.push_back({B, b++, r});  // cool-down
    return out;
  }
  // Interleaved: "virtual micro-batch" k of
  // this rank runs micro-batch mb(k) on its local chunk c(k); micro-batches
  // go in groups of pp through each local chunk in turn. Backward visits the
  // local chunks in reverse.
  const int total = m * v;
  auto mb_of = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
  auto local_chunk = [&](int k, bool forward) {
    const int c = (k % (pp * v)) / pp;
    return forward ? c : v - 1 - c;
  };
  auto chunk_of = [&](int k, bool forward) { return local_chunk(k, forward) * pp + r; };
  if (kind == ScheduleKind::forward_only) {  // evaluation: micro-batch by micro-batch, local chunks ascending
    for (int mb = 0; mb < m; ++mb)
      for (int g = 0; g < pp * v; ++g)
        if (chunk_owner(placement, pp, g) == r) out.push_back({F, mb, g});
    return out;
  }
  const int warmup = std::min(total, (pp - r - 1) * 2 + (v - 1) * pp);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back({F, mb_of(f), chunk_of(f, true)});
  while (f < total) {
    out.push_back({F, mb_of(f), chunk_of(f, true)});
    ++f;
    out.push_back({B, mb_of(b), chunk_of(b, false)});
    ++b;
  }
  for (; b < total; ++b) out.push_back({B, mb_of(b), chunk_of(b, false)});
  return out;
}

// Does compute action c need a message, and from which chunk's send?
// (W neither receives nor sends: it only needs what its B left.)
bool needs_recv(const Compute& c, int n_chunks) {
  if (c.kind == ActionKind::backward_weight) return false;
  return c.forward() ? c.chunk > 0 : c.chunk < n_chunks - 1;
}
bool makes_send(const Compute& c, int n_chunks, ScheduleKind kind) {
  if (c.kind == ActionKind::backward_weight) return false;
  if (c.forward()) return c.chunk < n_chunks - 1;
  return kind != ScheduleKind::forward_only && c.chunk > 0;
}

const char* kind_letter(ActionKind k) {
  switch (k) {
    case ActionKind::forward: return "F";
    case ActionKind::backward: return "B";
    case ActionKind::recv_act: return "ra";
    case ActionKind::send_act: return "sa";
    case ActionKind::recv_grad: return "rg";
    case ActionKind::send_grad: return "sg";
    case ActionKind::backward_input: return "B";
    case ActionKind::backward_weight: return "W";
  }
  return "?";
}

std::string action_str(const Action& a) {
  return std::string(kind_letter(a.kind)) + std::to_string(a.mb) + "." + std::to_string(a.chunk);
}

}  // namespace

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "afab") return ScheduleKind::afab;
  if (name == "1f1b") return ScheduleKind::one_f_one_b;
  if (name == "interleaved") return ScheduleKind::interleaved;
  if (name == "zbh1") return ScheduleKind::zbh1;
  if (name == "zbv") return ScheduleKind::zbv;
  throw std::invalid_argument("parallel.schedule: unknown schedule '" + name + "'");
}

bool splits_backward(ScheduleKind k) { return k == ScheduleKind::zbh1 || k == ScheduleKind::zbv; }

ChunkPlacement chunk_placement(ScheduleKind k) {
  return k == ScheduleKind::zbv ? ChunkPlacement::v_shape : ChunkPlacement::round_robin;
}

int chunk_owner(ChunkPlacement p, int pp, int g) {
  if (p == ChunkPlacement::v_shape) return g < pp ? g : 2 * pp - 1 - g;
  return g % pp;
}

ScheduleKind train_schedule_kind(int pp, int v, ScheduleKind schedule) {
  return pp == 1 && v == 1 ? ScheduleKind::one_f_one_b : schedule;
}

const char* schedule_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::afab: return "afab";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zbh1: return "zbh1";
    case ScheduleKind::zbv: return "zbv";
    case ScheduleKind::forward_only: return "forward";
  }
  return "?";
}

std::string schedule_problem(ScheduleKind kind, int pp, int v, int m) {
  const std::string s = std::string("parallel.schedule=") + schedule_name(kind);
  const std::string sv = "parallel.virtual_stages=" + std::to_string(v);
  const std::string sm = "train.grad_accum=" + std::to_string(m);
  const std::string sp = "parallel.pp=" + std::to_string(pp);
  if (pp < 1 || v < 1 || m < 1) return "pipeline: pp, virtual_stages and micro-batches must be >= 1";
  if (kind == ScheduleKind::forward_only) return {};
  if (kind == ScheduleKind::interleaved) {
    if (v < 2) return s + " needs parallel.virtual_stages >= 2 (got " + sv + "; use 1f1b for one chunk per rank)";
  } else if (kind == ScheduleKind::zbv) {
    if (v != 2) return s + " needs parallel.virtual_stages=2, its V's two chunks per rank (got " + sv + ")";
    if (pp < 2) return s + " needs parallel.pp >= 2 (got " + sp + "; on one rank use 1f1b)";
  } else if (v != 1) {
    return sv + " needs parallel.schedule=interleaved (got " + s + ")";
  }
  if (pp > 1 && m < pp)
    return sm + " gives " + std::to_string(m) + " micro-batches, fewer than " + sp +
           " stages: the pipeline would never fill (use train.grad_accum >= parallel.pp)";
  if (kind == ScheduleKind::interleaved && m % pp != 0)
    return sm + " micro-batches must be a multiple of " + sp + " for " + s;
  return {};
}

std::string stage_split_problem(ScheduleKind kind, const std::vector<int>& cb) {
  if (!splits_backward(kind)) return {};
  for (size_t g = 0; g + 1 < cb.size(); ++g)
    if (cb[g + 1] == cb[g])
      return std::string("parallel.stage_layers leaves pipeline chunk ") + std::to_string(g) +
             " without blocks; parallel.schedule=" + schedule_name(kind) +
             " needs at least one block in every chunk (its W actions fill the bubble)";
  return {};
}

Schedule make_schedule(ScheduleKind kind, int pp, int v, int m) {
  return make_schedule(kind, pp, v, m, chunk_placement(kind));
}

Schedule make_schedule(ScheduleKind kind, int pp, int v, int m, ChunkPlacement placement) {
  if (const std::string p = schedule_problem(kind, pp, v, m); !p.empty()) throw std::invalid_argument(p);
  if (kind != ScheduleKind::forward_only && placement != chunk_placement(kind))
    throw std::invalid_argument(std::string("pipeline: ") + schedule_name(kind) + " cannot place its chunks in another way");
  Schedule s;
  s.kind = kind;
  s.placement = placement;
  s.pp = pp;
  s.v = v;
  s.m = m;
  const int G = s.n_chunks();
  s.ranks.resize(size_t(pp));
  std::vector<std::vector<Compute>> orders;
  if (kind == ScheduleKind::zbv) orders = zbv_orders(pp, m);
  for (int r = 0; r < pp; ++r) {
    const std::vector<Compute> order =
        kind == ScheduleKind::zbv ? orders[size_t(r)] : compute_order(kind, placement, pp, v, m, r);
    std::vector<Action>& out = s.ranks[size_t(r)];
    // Each receive is posted one compute action ahead of its use, so the
    // transfer overlaps the compute before it.
    auto post_recv = [&](size_t i) {
      if (i >= order.size() || !needs_recv(order[i], G)) return;
      const Compute& c = order[i];
      out.push_back({c.forward() ? ActionKind::recv_act : ActionKind::recv_grad, c.mb, c.chunk});
    };
    post_recv(0);
    for (size_t i = 0; i < order.size(); ++i) {
      post_recv(i + 1);
      const Compute& c = order[i];
      out.push_back({c.kind, c.mb, c.chunk});
      if (makes_send(c, G, kind))
        out.push_back({c.forward() ? ActionKind::send_act : ActionKind::send_grad, c.mb, c.chunk});
    }
  }
  return s;
}

int expected_inflight(ScheduleKind kind, int pp, int v, int m, int rank) {
  switch (kind) {
    case ScheduleKind::forward_only: return 1;
    case ScheduleKind::afab: return m * v;
    case ScheduleKind::one_f_one_b: return std::min(pp - rank, m);
    case ScheduleKind::interleaved: {
      const int total = m * v;
      const int warmup = (pp - rank - 1) * 2 + (v - 1) * pp;
      return warmup >= total ? total : warmup + 1;
    }
    case ScheduleKind::zbh1: return std::min(pp, m);
    case ScheduleKind::zbv: return std::min(2 * pp, 2 * m);
  }
  return 0;
}

int expected_deferred_w(ScheduleKind kind, int pp, int v, int m, int rank) {
  if (kind == ScheduleKind::zbh1) return std::min(rank + 1, m);
  if (kind == ScheduleKind::zbv) return expected_inflight(kind, pp, v, m, rank);
  return 0;
}

bool deferred_w_exact(ScheduleKind kind) { return kind != ScheduleKind::zbv; }

double bubble_formula(ScheduleKind kind, int pp, int v, int m) {
  if (kind == ScheduleKind::interleaved) return double(pp - 1) / (double(v) * m);
  if (kind == ScheduleKind::zbh1) return double(pp - 1) / (3.0 * m);
  if (kind == ScheduleKind::zbv) return double(pp - 1) / (6.0 * m);
  return double(pp - 1) / m;
}

namespace {

using ActionKey = std::tuple<int, int, int>;  // (kind, mb, chunk)

std::string action_error(int r, const Action& a, const std::string& why) {
  return "rank " + std::to_string(r) + " action " + action_str(a) + ": " + why;
}

// What the lists hold: occurrences of each action and, per message stream
// (kind of message, chunk it carries to), the micro-batch order per side.
struct Census {
  std::map<ActionKey, int> count;
  std::map<std::pair<int, int>, std::vector<int>> send_order, recv_order;
};

// "" or the first action out of range or on a rank that does not own its chunk.
std::string take_census(const Schedule& s, Census& c) {
  for (int r = 0; r < s.pp; ++r) {
    for (const Action& a : s.ranks[size_t(r)]) {
      if (a.mb < 0 || a.mb >= s.m || a.chunk < 0 || a.chunk >= s.n_chunks())
        return action_error(r, a, "micro-batch or chunk out of range");
      ++c.count[{int(a.kind), a.mb, a.chunk}];
      const bool recv = a.kind == ActionKind::recv_act || a.kind == ActionKind::recv_grad;
      if (s.owner(a.chunk) != r)
        return action_error(r, a, recv ? "receives for a chunk of rank " + std::to_string(s.owner(a.chunk))
                                       : "chunk " + std::to_string(a.chunk) + " belongs to rank " +
                                             std::to_string(s.owner(a.chunk)));
      // A message is keyed by the chunk that consumes it.
      if (a.kind == ActionKind::send_act) c.send_order[{0, a.chunk + 1}].push_back(a.mb);
      if (a.kind == ActionKind::send_grad) c.send_order[{1, a.chunk - 1}].push_back(a.mb);
      if (a.kind == ActionKind::recv_act) c.recv_order[{0, a.chunk}].push_back(a.mb);
      if (a.kind == ActionKind::recv_grad) c.recv_order[{1, a.chunk}].push_back(a.mb);
    }
  }
  return {};
}

// "" or the first (mb, chunk) not computed exactly once forward (and once
// backward unless forward_only), or whose messages are not paired one to one.
std::string check_counts(const Schedule& s, const Census& c) {
  const int G = s.n_chunks();
  const bool fwd_only = s.kind == ScheduleKind::forward_only;
  for (int mb = 0; mb < s.m; ++mb) {
    for (int g = 0; g < G; ++g) {
      auto n = [&](ActionKind k) {
        auto it = c.count.find({int(k), mb, g});
        return it == c.count.end() ? 0 : it->second;
      };
      const std::string what = "micro-batch " + std::to_string(mb) + " chunk " + std::to_string(g);
      if (n(ActionKind::forward) != 1)
        return what + ": forward appears " + std::to_string(n(ActionKind::forward)) + " times";
      const bool split = splits_backward(s.kind);
      const int want_b = fwd_only || split ? 0 : 1, want_half = split ? 1 : 0;
      if (n(ActionKind::backward) != want_b)
        return what + ": backward appears " + std::to_string(n(ActionKind::backward)) + " times";
      if (n(ActionKind::backward_input) != want_half || n(ActionKind::backward_weight) != want_half)
        return what + ": B appears " + std::to_string(n(ActionKind::backward_input)) + " times and W " +
               std::to_string(n(ActionKind::backward_weight)) + " times (want " + std::to_string(want_half) +
               " each)";
      const int want_sa = g < G - 1 ? 1 : 0, want_ra = g > 0 ? 1 : 0;
      const int want_sg = !fwd_only && g > 0 ? 1 : 0, want_rg = !fwd_only && g < G - 1 ? 1 : 0;
      if (n(ActionKind::send_act) != want_sa || n(ActionKind::recv_act) != want_ra ||
          n(ActionKind::send_grad) != want_sg || n(ActionKind::recv_grad) != want_rg)
        return what + ": a send has no matching receive (or a message is missing or doubled)";
    }
  }
  return {};
}

// The timed replay. A receive is posted, a send is eager (non-blocking); a
// compute action waits for its input message (the receive must have been
// posted earlier on the same rank) and, for backward, its own forward.
class Replay {
 public:
  Replay(const Schedule& s, double t_f, double t_b, double t_w, ScheduleCheck& res)
      : s_(s), t_f_(t_f), t_b_(t_b), t_w_(t_w < 0 ? t_b / 2 : t_w), res_(res), pc_(size_t(s.pp), 0),
        clock_(size_t(s.pp), 0.0), busy_(size_t(s.pp), 0.0), inflight_(size_t(s.pp), 0),
        deferred_(size_t(s.pp), 0) {}

  // Runs every list to its end; sets res.error on a bad order or a deadlock,
  // else res's simulated bubble and makespan.
  void run() {
    size_t remaining = 0;
    for (const auto& l : s_.ranks) remaining += l.size();
    while (remaining > 0) {
      bool progress = false;
      for (int r = 0; r < s_.pp; ++r) {
        const auto& list = s_.ranks[size_t(r)];
        while (pc_[size_t(r)] < list.size()) {
          const Step st = step(r, list[pc_[size_t(r)]]);
          if (st == Step::failed) return;
          if (st == Step::waits) break;
          ++pc_[size_t(r)];
          --remaining;
          progress = true;
        }
      }
      if (!progress) {
        res_.error = deadlock();
        return;
      }
    }
    for (int r = 0; r < s_.pp; ++r) res_.sim_makespan = std::max(res_.sim_makespan, clock_[size_t(r)]);
    for (int r = 0; r < s_.pp; ++r) {
      const double b = busy_[size_t(r)];
      res_.sim_bubble[size_t(r)] = b > 0 ? (res_.sim_makespan - b) / b : 0;
    }
  }

 private:
  enum class Step { done, waits, failed };

  bool finished(ActionKind k, int mb, int g, double* t) const {
    auto it = done_.find({int(k), mb, g});
    if (it == done_.end()) return false;
    if (t) *t = it->second;
    return true;
  }
  double& started(int r) { return res_.start[size_t(r)][pc_[size_t(r)]]; }
  Step fail(int r, const Action& a, const std::string& why) {
    res_.error = action_error(r, a, why);
    return Step::failed;
  }

  // Rank r's next action a, if it can run now.
  Step step(int r, const Action& a) {
    switch (a.kind) {
      case ActionKind::recv_act:
      case ActionKind::recv_grad: posted_.insert({int(a.kind), a.mb, a.chunk}); return Step::done;
      case ActionKind::send_act:
        if (!finished(ActionKind::forward, a.mb, a.chunk, nullptr))
          return fail(r, a, "sends an activation before computing it");
        done_[{int(a.kind), a.mb, a.chunk}] = started(r) = done_[{int(ActionKind::forward), a.mb, a.chunk}];
        return Step::done;
      case ActionKind::send_grad: {
        const ActionKind bk = splits_backward(s_.kind) ? ActionKind::backward_input : ActionKind::backward;
        if (!finished(bk, a.mb, a.chunk, nullptr)) return fail(r, a, "sends a gradient before computing it");
        done_[{int(a.kind), a.mb, a.chunk}] = started(r) = done_[{int(bk), a.mb, a.chunk}];
        return Step::done;
      }
      case ActionKind::forward:
      case ActionKind::backward:
      case ActionKind::backward_input: return compute(r, a);
      case ActionKind::backward_weight: return weight(r, a);
    }
    return Step::done;
  }

  Step compute(int r, const Action& a) {
    const bool f = a.kind == ActionKind::forward;
    if (!f && !finished(ActionKind::forward, a.mb, a.chunk, nullptr))
      return fail(r, a, "backward before its forward on this rank");
    double ready = clock_[size_t(r)];
    if (f ? a.chunk > 0 : a.chunk < s_.n_chunks() - 1) {
      const ActionKind rk = f ? ActionKind::recv_act : ActionKind::recv_grad;
      if (!posted_.count({int(rk), a.mb, a.chunk}))
        return fail(r, a, "uses a message whose receive was not posted before it");
      double t = 0;
      const ActionKind sk = f ? ActionKind::send_act : ActionKind::send_grad;
      if (!finished(sk, a.mb, f ? a.chunk - 1 : a.chunk + 1, &t)) return Step::waits;
      ready = std::max(ready, t);
    }
    const double dur = f ? t_f_ : a.kind == ActionKind::backward_input ? t_b_ - t_w_ : t_b_;
    started(r) = ready;
    clock_[size_t(r)] = ready + dur;
    busy_[size_t(r)] += dur;
    done_[{int(a.kind), a.mb, a.chunk}] = clock_[size_t(r)];
    int& peak = res_.peak_inflight[size_t(r)];
    if (a.kind == ActionKind::backward_input) {  // the slot lives on until its W
      int& dpeak = res_.peak_deferred_w[size_t(r)];
      dpeak = std::max(dpeak, ++deferred_[size_t(r)]);
    } else if (!f)
      inflight_[size_t(r)] -= 1;
    else if (s_.kind == ScheduleKind::forward_only)
      peak = 1;
    else
      peak = std::max(peak, ++inflight_[size_t(r)]);
    return Step::done;
  }

  // W: after its own B on this rank (it only needs what B left), no message.
  Step weight(int r, const Action& a) {
    if (!finished(ActionKind::backward_input, a.mb, a.chunk, nullptr))
      return fail(r, a, "W before its B on this rank");
    started(r) = clock_[size_t(r)];
    clock_[size_t(r)] += t_w_;
    busy_[size_t(r)] += t_w_;
    done_[{int(a.kind), a.mb, a.chunk}] = clock_[size_t(r)];
    --deferred_[size_t(r)];
    --inflight_[size_t(r)];
    return Step::done;
  }

  std::string deadlock() const {
    std::string blocked;
    for (int r = 0; r < s_.pp; ++r)
      if (pc_[size_t(r)] < s_.ranks[size_t(r)].size())
        blocked += " rank " + std::to_string(r) + " at " + action_str(s_.ranks[size_t(r)][pc_[size_t(r)]]) + ";";
    return "deadlock: no rank can proceed:" + blocked;
  }

  const Schedule& s_;
  const double t_f_, t_b_, t_w_;
  ScheduleCheck& res_;
  std::vector<size_t> pc_;  // per rank, its next action
  std::vector<double> clock_, busy_;
  std::vector<int> inflight_, deferred_;
  std::map<ActionKey, double> done_;  // finish time of each computed or sent action
  std::set<ActionKey> posted_;        // receives posted
};

}  // namespace

ScheduleCheck check_schedule(const Schedule& s, double t_f, double t_b, double t_w) {
  ScheduleCheck res;
  res.peak_inflight.assign(size_t(s.pp), 0);
  res.start.resize(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) res.start[r].assign(s.ranks[r].size(), 0.0);
  res.peak_deferred_w.assign(size_t(s.pp), 0);
  res.sim_bubble.assign(size_t(s.pp), 0.0);
  if (int(s.ranks.size()) != s.pp) {
    res.error = "the schedule has " + std::to_string(s.ranks.size()) + " rank lists for pp=" + std::to_string(s.pp);
    return res;
  }
  // Structure first: every (mb, chunk) computed on its owner, messages
  // paired one to one, in the same micro-batch order on both sides (MPI
  // matches in order).
  Census census;
  res.error = take_census(s, census);
  if (res.error.empty()) res.error = check_counts(s, census);
  if (res.error.empty() && census.send_order != census.recv_order)
    res.error = "sends and receives between two chunks are not in the same micro-batch order";
  if (!res.error.empty()) return res;
  Replay(s, t_f, t_b, t_w, res).run();
  return res;
}

std::vector<int> partition_blocks(int n_layers, int n_chunks, const std::string& stage_layers) {
  const std::string key = "parallel.stage_layers";
  std::vector<int> count;
  if (stage_layers.empty()) {
    if (n_layers < n_chunks)
      throw std::invalid_argument("model.n_layers=" + std::to_string(n_layers) + " is fewer than the " +
                                  std::to_string(n_chunks) +
                                  " pipeline chunks (parallel.pp x parallel.virtual_stages); give "
                                  "parallel.stage_layers to allow chunks without blocks");
    count.assign(size_t(n_chunks), n_layers / n_chunks);
    std::vector<int> order;  // who gets the remainder first
    for (int g = 1; g + 1 < n_chunks; ++g) order.push_back(g);
    order.push_back(0);
    if (n_chunks > 1) order.push_back(n_chunks - 1);
    for (int i = 0; i < n_layers % n_chunks; ++i) ++count[size_t(order[size_t(i)])];
  } else {
    size_t pos = 0;
    while (pos <= stage_layers.size()) {
      const size_t comma = std::min(stage_layers.find(',', pos), stage_layers.size());
      const std::string item = stage_layers.substr(pos, comma - pos);
      size_t used = 0;
      int v = -1;
      try {
        v = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (item.empty() || used != item.size() || v < 0)
        throw std::invalid_argument(key + "=\"" + stage_layers + "\": '" + item +
                                    "' is not a block count (expected non-negative integers separated by commas)");
      count.push_back(v);
      pos = comma + 1;
    }
    if (int(count.size()) != n_chunks)
      throw std::invalid_argument(key + "=\"" + stage_layers + "\" gives " + std::to_string(count.size()) +
                                  " counts for " + std::to_string(n_chunks) +
                                  " pipeline chunks (parallel.pp x parallel.virtual_stages)");
    int sum = 0;
    for (int c : count) sum += c;
    if (sum != n_layers)
      throw std::invalid_argument(key + "=\"" + stage_layers + "\" sums to " + std::to_string(sum) +
                                  " blocks, but model.n_layers=" + std::to_string(n_layers));
  }
  std::vector<int> b(size_t(n_chunks) + 1, 0);
  for (int g = 0; g < n_chunks; ++g) b[size_t(g) + 1] = b[size_t(g)] + count[size_t(g)];
  return b;
}

std::string describe_schedule(const Schedule& s) {
  std::string out;
  for (int r = 0; r < s.pp; ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const Action& a : s.ranks[size_t(r)])
      if (a.kind == ActionKind::forward || a.kind == ActionKind::backward ||
          a.kind == ActionKind::backward_input || a.kind == ActionKind::backward_weight) {
        out += ' ';
        out += action_str(a);
      }
    out += "\n";
  }
  return out;
}

}  // namespace pentad
