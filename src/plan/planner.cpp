// The planner's memory, communication and time models (see planner.hpp).
// Memory evaluates the model's own lists (model/memory_plan.hpp's buffers,
// model/param_list.hpp's parameters), DataParallel's bucket and shard sizes
// and the sizes ring attention and the MoE layer allocate by, adds the ZeRO
// windows and pipeline buffers and walks the schedule lists for the in-flight high-water marks;
// what is a window or an approximation is said where it is computed and
// collected in MemoryEstimate::notes. Time is a roofline: compute at a stated
// fraction of the machine's peak, each collective at a bus bandwidth of its
// link class plus a latency per call, dp reduction overlapped with backward
// except the last bucket, tp not overlapped, the pipeline bubble of bubble_formula
// (or of the grouped message plan's replay where messages move in groups).
#include "plan/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include <toml++/toml.h>

#include "comm/capability.hpp"
#include "comm/placement.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/text.hpp"
#include "model/memory_plan.hpp"
#include "model/model.hpp"
#include "model/param_list.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "parallel/ep/moe.hpp"
#include "parallel/pp/p2p_plan.hpp"
#include "parallel/pp/schedule.hpp"

namespace pentad {
namespace {

constexpr double kF = 4.0;  // bytes per fp32 element / int32 token id

CpSplit cp_split_of(const Config& cfg) {
  return CpSplit{cfg.model.seq_len, cfg.parallel.cp, cfg.parallel.cp_layout};
}

// Which stage holds which chunk (zbv's V, else round robin), as the trainer places them.
ChunkPlacement placement_of(const Config& cfg) {
  const ParallelConfig& p = cfg.parallel;
  return chunk_placement(train_schedule_kind(p.pp, p.virtual_stages, p.schedule));
}

// Pipeline rank pp_rank of cfg's layout, as the trainer builds the model.
MemoryPlan memory_plan_of(const Config& cfg, const std::vector<int>& cb, int pp_rank) {
  const ParallelConfig& p = cfg.parallel;
  return MemoryPlan(cfg.model, cfg.train.recompute, cfg.train.micro_batch,
                    RankLayout{p.tp, p.sp, cp_split_of(cfg), pp_rank, p.pp, placement_of(cfg), cb,
                               attention_bwd_reads_probs(cfg.backend), bf16_activation_bytes(cfg)});
}

// The model's local sizes (memory_plan.hpp's local_dims), as doubles for
// the communication and time formulas.
struct Dims {
  double B, T, C, H, Hkv, D, F, V;  // H, Hkv, F, V: this tp rank's; T: this cp rank's tokens
  double Tg;                        // the whole sequence (seq_len)
  int L, tp, cp, cp_chunks;
  bool sp, gpt2, tied;
  double N() const { return B * T; }
  double Nl() const { return sp ? B * T / tp : B * T; }
};

Dims dims_of(const Config& cfg) {
  const CpSplit cs = cp_split_of(cfg);
  const LocalDims l = local_dims(cfg.model, cfg.train.micro_batch, cfg.parallel.tp, cfg.parallel.sp, cs);
  Dims d{};
  d.B = l.B;
  d.T = l.T;
  d.C = l.C;
  d.H = l.H;
  d.Hkv = l.Hkv;
  d.D = l.D;
  d.F = l.F;
  d.V = l.V;
  d.Tg = cfg.model.seq_len;
  d.L = l.L;
  d.tp = cfg.parallel.tp;
  d.cp = cs.cp;
  d.cp_chunks = cs.n_chunks();
  d.sp = l.sp;
  d.gpt2 = l.gpt2;
  d.tied = cfg.model.tied();
  return d;
}

// The flat buffer of one store of one pipeline stage, unit by unit (0
// embedding, 1..L blocks, L+1 head): the padded sizes of model_param_list's
// tensors for tp rank 0, ep rank 0 of the stage (what Model::build_params
// registers there).
struct StageParams {
  std::vector<double> unit;  // padded elements per unit
  double N = 0;
  bool has_embedding = false, has_head = false;
  std::vector<int> chunks;   // chunks held
};

StageParams store_params(const Config& cfg, const std::vector<int>& cb, int pp_rank, bool expert) {
  const int pp = cfg.parallel.pp, G = int(cb.size()) - 1;
  StageParams s;
  s.unit.assign(size_t(cfg.model.n_layers) + 2, 0.0);
  const ChunkPlacement place = placement_of(cfg);
  for (int g = 0; g < G; ++g)
    if (chunk_owner(place, pp, g) == pp_rank) s.chunks.push_back(g);
  const ParamRank r{0, cfg.parallel.tp, 0, cfg.parallel.ep, cfg.parallel.expert_tp, pp_rank, pp, cb, place};
  for_each_param_spec(cfg.model, r, [&](ParamSpec&& t) {
    if (t.expert == expert) s.unit[size_t(t.unit)] += double(padded_numel(t.local_numel()));
  });
  for (double u : s.unit) s.N += u;
  return s;
}

// The dense store (DataParallel over dp x cp).
StageParams stage_params(const Config& cfg, const std::vector<int>& cb, int pp_rank) {
  StageParams s = store_params(cfg, cb, pp_rank, false);
  s.has_embedding = chunk_owner(placement_of(cfg), cfg.parallel.pp, 0) == pp_rank;
  s.has_head = chunk_owner(placement_of(cfg), cfg.parallel.pp, int(cb.size()) - 2) == pp_rank;
  return s;
}

// The expert store (MoE experts, over expert_dp): empty units for a dense model.
StageParams expert_stage_params(const Config& cfg, const std::vector<int>& cb, int pp_rank) {
  return store_params(cfg, cb, pp_rank, true);
}

int moe_blocks_of(const Config& cfg, const std::vector<int>& cb, const StageParams& s) {
  int n = 0;
  for (int g : s.chunks)
    for (int l = cb[size_t(g)]; l < cb[size_t(g) + 1]; ++l) n += cfg.model.is_moe_block(l) ? 1 : 0;
  return n;
}

double blocks_of(const std::vector<int>& cb, const StageParams& s) {
  double n = 0;
  for (int g : s.chunks) n += cb[size_t(g) + 1] - cb[size_t(g)];
  return n;
}

// Rows of one MoE call (MoeLayer::forward) for one micro-batch of N = B*T/cp
// tokens (cp: each rank routes its slice of every sequence; capacity stays
// per whole sequence): M dispatched by this rank, R received by it. Both depend on the
// routing, so two figures:
// - bound (the comm model's): with a capacity (not dropless) each
//   sequence keeps at most cap = ceil(cf*T*k/E) rows per expert, so
//   M <= min(N*k, B*E*cap) and R <= ep*B*(E/ep)*cap; dropless, balanced
//   routing M = R = N*k (skewed dropless routing can send a rank more, up
//   to ep*N*k, which no useful bound covers).
// - expected (the memory model's): with a capacity, uniform random top-k
//   routing. A token picks a given expert with probability k/E, so one
//   expert's choices in one sequence are X ~ Binomial(T, k/E) and it keeps
//   min(X, cap): M = R = B*E*E[min(X, cap)]/cp (with cp the kept rows
//   split evenly over the slices: zig-zag balances early and late
//   positions; contiguous favours rank 0). Not a bound on a skewed
//   router; the notes say so. Dropless, M = N*k always and R is the given
//   receive load: R = min(load, ep)*N*k (load = 1: balanced; ep = 1: N*k).
struct MoeRows {
  double M = 0, R = 0;
};
MoeRows moe_rows(const Config& cfg, bool bound, double load = 1.0) {
  const ModelConfig& m = cfg.model;
  MoeRows r;
  if (m.n_experts == 0) return r;
  const double B = cfg.train.micro_batch, T = m.seq_len, k = m.top_k, E = m.n_experts, ep = cfg.parallel.ep;
  const double cp = cfg.parallel.cp, N = B * T / cp;
  if (m.dropless) {
    r.M = N * k;
    r.R = (bound || ep == 1 ? 1.0 : std::min(load, ep)) * N * k;
    return r;
  }
  const double cap = std::ceil(double(m.capacity_factor) * T * k / E);
  if (bound) {
    r.M = std::min(N * k, B * E * cap);
    r.R = std::min(ep * r.M, ep * B * (E / ep) * cap);
    return r;
  }
  const double q = std::min(1.0, k / E);
  double kept = 0;  // E[min(X, cap)]
  if (q >= 1.0) {
    kept = std::min(T, cap);
  } else {
    const int n = m.seq_len;
    for (int x = 0; x <= n; ++x) {
      const double lp = std::lgamma(n + 1.0) - std::lgamma(x + 1.0) - std::lgamma(n - x + 1.0) + x * std::log(q) +
                        (n - x) * std::log1p(-q);
      kept += std::min(double(x), cap) * std::exp(lp);
    }
  }
  r.M = r.R = B * E * kept / cp;
  return r;
}

// The MoE layer's buffers (moe.hpp's moe_buffers) for the modelled rows:
// N = B*T rows in (with sp the layer sees the all-gathered rows), Nl out.
// With expert tp each expert's hidden (R, d_ff) columns are split over tp.
MoeBuffers<double> moe_buffers_of(const Config& cfg, const MoeRows& r) {
  const Dims d = dims_of(cfg);
  return moe_buffers<double>(cfg.model, d.N(), d.Nl(), r.M, r.R, cfg.parallel.expert_tp ? cfg.parallel.tp : 1);
}

// Scratch: the model's shared buffers (its memory plan; the debug-dump
// logits when dumping), plus what RingAttention and MoeLayer allocate
// (their ring_buffers and moe_buffers).
double scratch_bytes(const Config& cfg, const MemoryPlan& plan, bool has_moe, double moe_load) {
  const Dims d = dims_of(cfg);
  double bytes = double(bytes_of(plan.shared_buffers(), Mem::scratch));
  if (!cfg.log.dump.empty()) bytes += double(plan.dump_logits().bytes());
  double e = bytes / kF;  // elements (all 4 bytes), then the ones beyond the plan's
  if (d.cp > 1)  // RingAttention's buffers
    e += double(ring_buffers(cp_split_of(cfg), int(d.B), int(d.H), int(d.Hkv), int(d.D)).elems());
  if (has_moe) {
    // Per call, freed before the call returns (the largest of): forward the
    // router logits (N, E) and this rank's rows of the combined output
    // (Nl, C: with sp the layer sees the all-gathered rows); backward the
    // dispatched-row gradients (M, C), received and returned rows 2 (R, C)
    // and the expert MLP's gradients (2 GPT-2, 3 Llama) x (R, d_ff).
    const MoeBuffers<double> b = moe_buffers_of(cfg, moe_rows(cfg, false, moe_load));
    e += std::max({b.logits, b.combine, b.bwd, b.shared_fwd, b.shared_bwd});
  }
  return kF * e;
}

ScheduleKind train_kind(const Config& cfg) {
  return train_schedule_kind(cfg.parallel.pp, cfg.parallel.virtual_stages, cfg.parallel.schedule);
}

// DataParallel's buckets of this store (memory_plan.hpp's grad_buckets).
std::vector<UnitBucket> buckets_of(const StageParams& s, double bucket_mb) {
  std::vector<size_t> elems(s.unit.size());
  for (size_t u = 0; u < s.unit.size(); ++u) elems[u] = size_t(s.unit[u]);
  return grad_buckets(elems, bucket_mb);
}

int bucket_of(const std::vector<UnitBucket>& bs, int unit) {
  for (size_t i = 0; i < bs.size(); ++i)
    if (unit >= bs[i].unit_first && unit <= bs[i].unit_last) return int(i);
  return -1;
}

// The head's stage also holds a tied embedding (pp = 1, zbv's V).
bool tied_here(const Config& cfg, const StageParams& s) {
  return cfg.model.tied() && s.has_embedding && s.has_head;
}

// A tied embedding on one end of the pipeline only: the unit whose dp
// reduction waits for the pair's sum (TiedEmbedding), else -1.
int held_unit(const Config& cfg, const StageParams& s) {
  if (!cfg.model.tied() || s.has_embedding == s.has_head) return -1;
  return s.has_embedding ? 0 : cfg.model.n_layers + 1;
}

// One compute action's unit hooks in the model's order (model.cpp's
// forward_chunk, backward_chunk, backward_input_chunk, backward_weight_chunk).
struct UnitEvent {
  enum Kind { acquire, ready, release } kind;
  int unit;
  UnitUse use;
};
std::vector<UnitEvent> unit_events(const Action& a, const std::vector<int>& cb, bool tied_here) {
  const int g = a.chunk, G = int(cb.size()) - 1, head = cb.back() + 1;
  std::vector<UnitEvent> ev;
  auto use = [&](int u, UnitUse how, bool ready) {
    ev.push_back({UnitEvent::acquire, u, how});
    if (ready) ev.push_back({UnitEvent::ready, u, how});
    ev.push_back({UnitEvent::release, u, how});
  };
  if (a.kind == ActionKind::forward) {
    if (g == 0) use(0, UnitUse::forward, false);
    for (int l = cb[size_t(g)]; l < cb[size_t(g) + 1]; ++l) use(l + 1, UnitUse::forward, false);
    return ev;
  }
  if (a.kind == ActionKind::backward_weight) {
    for (int l = cb[size_t(g) + 1] - 1; l >= cb[size_t(g)]; --l) use(l + 1, UnitUse::weight_grads, true);
    return ev;
  }
  const bool fused = a.kind == ActionKind::backward;  // else a B: the blocks' grads_ready come in W
  if (g == G - 1) {  // the head, holding a tied embedding of this stage
    ev.push_back({UnitEvent::acquire, head, UnitUse::backward});
    if (tied_here) use(0, UnitUse::backward, false);
    ev.push_back({UnitEvent::ready, head, UnitUse::backward});
    ev.push_back({UnitEvent::release, head, UnitUse::backward});
  }
  for (int l = cb[size_t(g) + 1] - 1; l >= cb[size_t(g)]; --l) use(l + 1, UnitUse::backward, fused);
  if (g == 0) use(0, UnitUse::backward, true);
  return ev;
}

struct StepWalk {  // one rank's training step
  const Schedule& sched;
  int rank;
  const std::vector<int>& cb;  // the chunks' first blocks
  bool tied_here;              // the head's stage also holds the embedding
  int held;                    // the unit held for the tied pair, or -1
};

// fn(action, event) for every unit hook of the rank's compute actions, and
// fn(action, nullptr) after each backward action (end_micro_batch).
template <class Fn>
void for_each_unit_event(const StepWalk& w, Fn fn) {
  for (const Action& a : w.sched.ranks[size_t(w.rank)]) {
    const bool bwd = a.kind == ActionKind::backward || a.kind == ActionKind::backward_input ||
                     a.kind == ActionKind::backward_weight;
    if (!bwd && a.kind != ActionKind::forward) continue;
    for (const UnitEvent& e : unit_events(a, w.cb, w.tied_here)) fn(a, &e);
    if (bwd) fn(a, nullptr);
  }
}

// ZeRO-3 parameter windows (data_parallel.cpp) alive at once over one
// rank's training step, summed over the stores (the dense one and the
// experts' partner, each gathering its own units): the units acquired
// (each with its bf16 copy, `copy` fp32 values' worth per value) and the
// prefetched next one; a W gathers nothing. In fp32 values.
double param_window_peak(const std::vector<const StageParams*>& stores, const StepWalk& w, double copy) {
  std::vector<std::map<int, bool>> gathered(stores.size());  // unit -> acquired (else prefetched)
  double peak = 0;
  auto gather = [&](size_t k, int u, bool acquire) {
    const std::vector<double>& unit = stores[k]->unit;
    if (u < 0 || u >= int(unit.size()) || unit[size_t(u)] == 0) return;
    gathered[k][u] = gathered[k][u] || acquire;
    double sum = 0;
    for (size_t j = 0; j < stores.size(); ++j)
      for (const auto& [v, acquired] : gathered[j]) sum += stores[j]->unit[size_t(v)] * (acquired ? 1 + copy : 1);
    peak = std::max(peak, sum);
  };
  for_each_unit_event(w, [&](const Action&, const UnitEvent* e) {
    if (!e || e->use == UnitUse::weight_grads || e->kind == UnitEvent::ready) return;
    for (size_t k = 0; k < stores.size(); ++k) {
      const int last = int(stores[k]->unit.size()) - 1;
      if (stores[k]->unit[size_t(e->unit)] == 0) continue;  // nothing of this unit in this store
      if (e->kind == UnitEvent::release) {
        gathered[k].erase(e->unit);
        continue;
      }
      gather(k, e->unit, true);
      const bool down = e->use == UnitUse::backward;
      gather(k, down ? (e->unit == last ? last - 1 : e->unit - 1) : e->unit + 1, false);
    }
  });
  return peak;
}

// ZeRO-2/3 gradient windows of one store alive at once over one rank's
// training step: a bucket's opens when a backward (or a W) touches it and
// closes when its reduction completes; it is launched once its units are
// all ready for one micro-batch, at most two stay in flight, and every one
// has completed at the end of the action. A tied embedding held for the
// pipeline pair never counts, so its bucket stays open to the end of the
// step. In fp32 values.
double grad_window_peak(const StageParams& s, const std::vector<UnitBucket>& bs, const StepWalk& w) {
  std::set<int> open;
  std::deque<int> in_flight;
  std::vector<std::vector<int>> pending(bs.size());
  for (size_t i = 0; i < bs.size(); ++i) pending[i].assign(size_t(w.sched.m), bs[i].units);
  double peak = 0;
  for_each_unit_event(w, [&](const Action& a, const UnitEvent* e) {
    if (!e) {  // the end of a backward action: every reduction has completed
      for (int b : in_flight) open.erase(b);
      in_flight.clear();
      return;
    }
    if (s.unit[size_t(e->unit)] == 0 || e->use == UnitUse::forward) return;
    const int b = bucket_of(bs, e->unit);
    if (e->kind == UnitEvent::acquire) {
      open.insert(b);
      double sum = 0;
      for (int o : open) sum += double(bs[size_t(o)].elems);
      peak = std::max(peak, sum);
    } else if (e->kind == UnitEvent::ready && e->unit != w.held && --pending[size_t(b)][size_t(a.mb)] == 0) {
      in_flight.push_back(b);
      while (in_flight.size() > 2) {
        open.erase(in_flight.front());
        in_flight.pop_front();
      }
    }
  });
  return peak;
}

// Walk one rank's action list: pooled slots per chunk (forward acquires,
// backward releases) and pipeline boundary buffers (a posted receive holds
// one until its compute action; a gradient send holds a copy to the end of
// the step).
// ctx_hw: the (mb, chunk) live from forward to B (the MoE layers' saved
// state, which B consumes; with a fused backward the same as slots_hw).
void walk_schedule(const Schedule& s, int rank, std::vector<int>& slots_hw, std::vector<int>& ctx_hw,
                   int& buffers_hw) {
  const int G = s.n_chunks();
  std::vector<int> live(size_t(G), 0), ctx(size_t(G), 0);
  int bufs = 0;
  for (const Action& a : s.ranks[size_t(rank)]) {
    switch (a.kind) {
      case ActionKind::recv_act:
      case ActionKind::recv_grad:
      case ActionKind::send_grad:
        buffers_hw = std::max(buffers_hw, ++bufs);
        break;
      case ActionKind::forward:
        if (a.chunk > 0) --bufs;
        slots_hw[size_t(a.chunk)] = std::max(slots_hw[size_t(a.chunk)], ++live[size_t(a.chunk)]);
        ctx_hw[size_t(a.chunk)] = std::max(ctx_hw[size_t(a.chunk)], ++ctx[size_t(a.chunk)]);
        if (s.kind == ScheduleKind::forward_only) --live[size_t(a.chunk)], --ctx[size_t(a.chunk)];
        break;
      case ActionKind::backward:
        if (a.chunk < G - 1) --bufs;
        --live[size_t(a.chunk)];
        --ctx[size_t(a.chunk)];
        break;
      case ActionKind::backward_input:  // the slot lives on until its W
        if (a.chunk < G - 1) --bufs;
        --ctx[size_t(a.chunk)];
        break;
      case ActionKind::backward_weight:
        --live[size_t(a.chunk)];
        break;
      case ActionKind::send_act:
        break;
    }
  }
}

double shard_of(double N, int dp) { return double(zero_shard_elems(size_t(N), dp)); }

// Parameters, gradients and AdamW moments of the dense store (over dp x cp)
// and the expert store (over expert_dp = dp x cp / ep), by ZeRO stage.
void add_state_bytes(const Config& cfg, const StageParams& sp, const StageParams& xp, const StepWalk& w,
                     StageMemory& m) {
  const ParallelConfig& p = cfg.parallel;
  const int z = p.zero, dp = p.dp * p.cp, edp = p.dp * p.cp / p.ep;
  const double N = sp.N, S = shard_of(N, dp), NE = xp.N, SE = shard_of(NE, edp);
  m.param_elems = N;
  m.shard_elems = S;
  m.expert_elems = NE;
  m.expert_shard_elems = SE;
  auto& b = m.bytes;
  const int P = int(Mem::params), Gr = int(Mem::grads), O = int(Mem::optim), Co = int(Mem::comm);
  // Parameters and gradients: flat buffers of S*dp, or the shard plus windows.
  // ZeRO-3 with experts: the expert store gathers its units beside the
  // dense one's (DataParallel's partner), one walk over both.
  // bf16 weight copies (wc bytes a value): of the whole flat buffer, or of
  // each ZeRO-3 window while its unit is in use.
  const double wc = weight_copy_bytes(cfg);
  b[P] = z < 3 ? (kF + wc) * S * dp : kF * (S + param_window_peak({&sp, &xp}, w, wc / kF));
  b[Gr] = z < 2 ? kF * S * dp : kF * (S + grad_window_peak(sp, buckets_of(sp, p.bucket_mb), w));
  // AdamW moments over the owned range (rank 0 of dp: [0, min(N, S))).
  const double own = z == 0 ? N : std::min(N, S);
  b[O] = 2 * kF * std::max(own, 1.0);
  // The expert store's DataParallel: the same terms over expert_dp (none
  // when this stage holds no expert).
  if (NE > 0) {
    b[P] += z < 3 ? (kF + wc) * SE * edp : kF * SE;
    const StepWalk experts{w.sched, w.rank, w.cb, false, -1};  // no tied tensor among the experts
    b[Gr] += z < 2 ? kF * SE * edp : kF * (SE + grad_window_peak(xp, buckets_of(xp, p.bucket_mb), experts));
    b[O] += 2 * kF * std::max(z == 0 ? NE : std::min(NE, SE), 1.0);
  }
  // The ZeRO reduce-scatter landing areas (S each).
  b[Co] = (z >= 1 ? kF * S : 0.0) + (z >= 1 && NE > 0 ? kF * SE : 0.0);
}

// Activations: pooled slots per chunk = the chunk's in-flight high-water
// (at least one: the trainer sizes a slot before the first step), each of
// the model's planned slot bytes, plus the MoE layer's buffers.
void add_activation_bytes(const Config& cfg, const std::vector<int>& cb, const MemoryPlan& plan,
                          const StageParams& sp, const std::vector<int>& hw, const std::vector<int>& ctx_hw,
                          double moe_load, bool split_backward, StageMemory& m) {
  const int Ac = int(Mem::activations);
  const bool full = cfg.train.recompute == Recompute::full;
  const MoeRows mr = moe_rows(cfg, false, moe_load);
  const MoeBuffers<double> mb = moe_buffers_of(cfg, mr);
  for (int g : sp.chunks) {
    const int n = std::max(1, hw[size_t(g)]);
    m.slots.push_back(n);
    const double sb = double(plan.slot_bytes(g));
    m.slot_bytes += sb;
    m.bytes[Ac] += n * sb;
    // A split backward (zbh1, zbv): every slot also keeps its deferred W's inputs.
    if (split_backward) m.bytes[Ac] += n * double(plan.wstash_bytes(g));
    // MoE context per MoE block of the chunk, kept from forward to backward
    // (full recompute drops it after forward): received rows (R, C) and
    // the expert MLP's (2 GPT-2, 3 Llama) x (R, d_ff); the expert outputs
    // back in dispatch order (M, C) and the index lists and weights.
    if (!full) {
      double nm = 0;
      for (int l = cb[size_t(g)]; l < cb[size_t(g) + 1]; ++l) nm += cfg.model.is_moe_block(l) ? 1 : 0;
      m.bytes[Ac] += std::max(1, ctx_hw[size_t(g)]) * nm * kF * mb.kept(mr.R);
    }
  }
  if (moe_blocks_of(cfg, cb, sp) > 0) {
    // Inside one MoE call: the expert outputs (R, C), freed before it
    // returns (with full recompute also the one context that exists then).
    m.bytes[Ac] += kF * mb.in_forward();
    if (full) m.bytes[Ac] += kF * mb.kept(mr.R);
  }
}

// One pipeline stage's rank (tp rank 0, dp rank 0 of the stage).
StageMemory stage_memory(const Config& cfg, const std::vector<int>& cb, int r, const Schedule& train,
                         const Schedule* eval, double moe_load) {
  const StageParams sp = stage_params(cfg, cb, r);
  const StageParams xp = expert_stage_params(cfg, cb, r);
  const MemoryPlan plan = memory_plan_of(cfg, cb, r);
  StageMemory m;
  add_state_bytes(cfg, sp, xp, {train, r, cb, tied_here(cfg, sp), held_unit(cfg, sp)}, m);
  std::vector<int> hw(cb.size() - 1, 0), ctx_hw(cb.size() - 1, 0);
  int bufs = 0;
  walk_schedule(train, r, hw, ctx_hw, bufs);
  if (eval) walk_schedule(*eval, r, hw, ctx_hw, bufs);
  add_activation_bytes(cfg, cb, plan, sp, hw, ctx_hw, moe_load, splits_backward(train.kind), m);
  m.boundary_buffers = bufs;
  m.bytes[int(Mem::comm)] += bufs * kF * double(plan.boundary_elems());
  m.bytes[int(Mem::scratch)] = scratch_bytes(cfg, plan, moe_blocks_of(cfg, cb, sp) > 0, moe_load);
  for (double x : m.bytes) m.total += x;
  return m;
}

void add_memory_notes(const Config& cfg, double moe_load, MemoryEstimate& est) {
  const ParallelConfig& p = cfg.parallel;
  if (p.zero >= 2)
    est.notes.push_back("ZeRO-2/3 gradient windows: at most two bucket reductions in flight plus the bucket being "
                        "computed (and the tied embedding's), from the bucket sizes");
  if (p.zero == 3)
    est.notes.push_back("ZeRO-3 parameter windows: the unit in use plus the prefetched one (plus the tied "
                        "embedding during the head)");
  est.notes.push_back("total = sum of the per-category peaks (an upper bound: windows of different categories "
                      "need not peak at the same moment)");
  est.notes.push_back("not modelled: checkpoint/dump host copies, MPI and BLAS internal buffers, allocator "
                      "rounding (the backend tracks requested bytes)");
  if (p.cp > 1)
    est.notes.push_back("cp: seq_len/cp tokens per rank, no attention probabilities kept, ring attention buffers "
                        "in scratch, ZeRO shards over dp x cp");
  const ModelConfig& mc = cfg.model;
  if (mc.n_experts > 0 && !mc.dropless)
    est.notes.push_back("MoE: the rows routed through the experts are data-dependent; the MoE buffers are for "
                        "uniform random routing (per expert and sequence min(Binomial(T, top_k/E), capacity) "
                        "rows; at the capacity bound, every expert full, they are larger); a skewed router can "
                        "receive more rows on one rank");
  if (mc.n_experts > 0 && mc.dropless && p.ep == 1)
    est.notes.push_back("MoE dropless, ep = 1: every routed row stays on this rank (R = B*seq_len*top_k rows per "
                        "call, whatever the routing)");
  if (mc.n_experts > 0 && mc.dropless && p.ep > 1) {
    est.moe_load = std::min(moe_load, double(p.ep));
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "MoE dropless: the MoE buffers are for R = %.4g x B*seq_len*top_k rows received per call (%s). "
                  "Dropless peaks scale with routing skew, up to ep = %d x balanced: give --moe-load F, the "
                  "busiest rank's measured load (a run's metrics: moe_recv_load_max)",
                  est.moe_load,
                  moe_load == 1.0 ? "balanced routing, the default" : moe_load > p.ep ? "--moe-load, capped at ep"
                                                                                       : "--moe-load",
                  p.ep);
    est.notes.push_back(buf);
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Memory

MemoryEstimate estimate_memory(const Config& cfg, double moe_load) {
  const ParallelConfig& p = cfg.parallel;
  const int pp = p.pp, v = p.virtual_stages;
  const std::vector<int> cb = partition_blocks(cfg.model.n_layers, pp * v, p.stage_layers);
  const Schedule train = make_schedule(train_kind(cfg), pp, v, cfg.train.grad_accum);
  // Evaluation (data.val, data.choice_eval): forward-only, a micro-batch at a
  // time, so its high-water marks do not grow with its micro-batch count.
  std::optional<Schedule> eval;
  if (!cfg.data.val.empty() || !cfg.data.choice_eval.empty())
    eval = make_schedule(ScheduleKind::forward_only, pp, v, cfg.train.eval_batches, train.placement);
  MemoryEstimate est;
  double worst = -1;
  for (int r = 0; r < pp; ++r) {
    StageMemory m = stage_memory(cfg, cb, r, train, eval ? &*eval : nullptr, moe_load);
    if (m.total > worst) {
      worst = m.total;
      est.worst_stage = r;
    }
    est.stages.push_back(std::move(m));
  }
  add_memory_notes(cfg, moe_load, est);
  return est;
}

// ---------------------------------------------------------------------------
// Communication and time

namespace {

// Per micro-batch forward+backward FLOPs of a stage's rank: 2 x (local
// matmul parameters) per token forward, attention 4 T C / tp per token
// forward (scores and weighted values, counted non-causal as the trainer's
// 12 L C T does), backward twice forward, full recompute one more forward
// of the blocks, selective the attention scores again.
double stage_flops_per_mb(const Config& cfg, const StageParams& s, const std::vector<int>& cb) {
  const Dims d = dims_of(cfg);
  const double HD = d.H * d.D, KD = d.Hkv * d.D;
  // Attention: each of this rank's tokens against the whole sequence (cp
  // splits the queries, the ring brings every key).
  const double attn = 2 * d.C * (HD + 2 * KD) + 2 * HD * d.C + 4 * d.Tg * d.H * d.D;
  const double mlp = 2 * (d.gpt2 ? 2 : 3) * d.C * d.F;
  // A MoE block: the router and top_k experts of the whole d_ff (replicated
  // over tp), or of d_ff / tp with expert tp.
  const ModelConfig& mc = cfg.model;
  const double etp = cfg.parallel.expert_tp ? cfg.parallel.tp : 1;
  // A shared expert: its MLP of width shared_expert_ffn (/ tp with expert
  // tp) on every token, and its gate's (1, C) product.
  const double moe_mlp = 2.0 * mc.n_experts * d.C + mc.top_k * 2.0 * (d.gpt2 ? 2 : 3) * d.C * mc.d_ff / etp +
                         2.0 * (d.gpt2 ? 2 : 3) * d.C * mc.shared_expert_ffn / etp +
                         (mc.shared_expert_gate ? 2.0 * d.C : 0.0);
  double n_blocks = 0, fwd = 0;
  for (int g : s.chunks)
    for (int l = cb[size_t(g)]; l < cb[size_t(g) + 1]; ++l) {
      n_blocks += 1;
      fwd += attn + (mc.is_moe_block(l) ? moe_mlp : mlp);
    }
  const double blocks_fwd = fwd;
  fwd += s.has_head ? 2 * d.V * d.C : 0.0;
  // Selective recomputes the attention scores (Q K^T, 2 T C/tp per token) in backward.
  const double extra = cfg.train.recompute == Recompute::full        ? blocks_fwd
                       : cfg.train.recompute == Recompute::selective ? n_blocks * 2 * d.Tg * d.H * d.D
                                                                     : 0.0;
  return d.N() * (3 * fwd + extra);
}

// One DataParallel's bytes and calls per step over a group of dpn ranks
// (the dense store over dp x cp, the expert store over expert_dp).
struct DpComm {
  double bytes = 0, calls = 0, exposed = 0;
};
DpComm dp_comm(const Config& cfg, const StageParams& s, int dpn_i, bool tied_here, int held) {
  const ParallelConfig& p = cfg.parallel;
  const int A = cfg.train.grad_accum, z = p.zero;
  const double dpn = dpn_i, N = s.N, S = shard_of(N, dpn_i);
  DpComm c;
  if (N == 0) return c;
  // Bucketed reduction (every micro-batch for ZeRO-2/3), the ZeRO-1/2
  // all-gather of updated shards, the ZeRO-3 unit gathers.
  const std::vector<UnitBucket> bs = buckets_of(s, p.bucket_mb);
  const double last_bucket = bs.empty() ? 0.0 : double(bs.back().elems);
  const double ring = (dpn - 1) / dpn;
  if (z == 0 && dpn_i > 1) {
    c.bytes = 2 * ring * kF * N;
    c.calls = double(bs.size());
    c.exposed = 2 * ring * kF * last_bucket;
  } else if (z == 1 && dpn_i > 1) {
    c.bytes = ring * kF * N + ring * kF * S * dpn;
    c.calls = double(bs.size()) + 1;
    c.exposed = ring * kF * last_bucket + ring * kF * S * dpn;
  } else if (z >= 2) {
    // Every micro-batch, except the bucket of a held tied embedding: once.
    const int hb = held >= 0 && s.unit[size_t(held)] > 0 ? bucket_of(bs, held) : -1;
    const double H = hb >= 0 ? double(bs[size_t(hb)].elems) : 0.0;
    c.bytes = ring * kF * (A * (N - H) + H);
    c.calls = A * double(bs.size()) - (hb >= 0 ? A - 1 : 0);
    c.exposed = A * ring * kF * last_bucket;
    if (z == 2 && dpn_i > 1) {
      c.bytes += ring * kF * S * dpn;
      c.calls += 1;
      c.exposed += ring * kF * S * dpn;
    }
    if (z == 3) {
      // Forward and backward gather every unit held here, the head once
      // (prefetched in forward), a tied embedding also for the head.
      const double gathered = 2 * N - s.unit.back() + (tied_here ? s.unit[0] : 0.0);
      double units = 0;
      for (double u : s.unit) units += u > 0 ? 1 : 0;
      c.bytes += A * ring * kF * gathered;
      c.calls += A * (2 * units - (s.unit.back() > 0 ? 1 : 0) + (tied_here ? 1 : 0));
    }
  }
  return c;
}

// cp: ring attention per block per micro-batch, kv = 2*B*(T/cp)*Hkv*D
// floats: forward (cp-1) kv, backward (cp-1) kv + cp kv (the dK/dV
// accumulator); full recompute runs the forward ring again.
void add_cp_comm(const Config& cfg, const StageParams& s, const std::vector<int>& cb, StageComm& c) {
  const Dims d = dims_of(cfg);
  if (d.cp <= 1) return;
  const int A = cfg.train.grad_accum;
  const double n_blocks_here = blocks_of(cb, s);
  const double kv = 2 * d.B * d.T * d.Hkv * d.D, P = d.cp;
  const bool full = cfg.train.recompute == Recompute::full;
  c.cp_bytes = A * n_blocks_here * kF * kv * ((P - 1) * (full ? 2 : 1) + (P - 1) + P);
  c.cp_msgs = A * n_blocks_here * ((P - 1) * (full ? 2 : 1) + (P - 1) + P);
  // MoE blocks: each forward all-gathers the top-k choices of the local
  // B*T/cp tokens (int32) over cp.
  c.cp_bytes += A * moe_blocks_of(cfg, cb, s) * (full ? 2 : 1) * (P - 1) * d.B * d.T * cfg.model.top_k * 4.0;
}

// ep: per MoE block per micro-batch, the row counts (alltoall of E/ep ints)
// and four all-to-alls of rows: dispatch and return forward, the same
// backward, each moving the off-rank share (ep-1)/ep of M rows of C floats
// (M from moe_rows: the capacity bound or balanced dropless, an upper bound
// when tokens are dropped).
void add_ep_comm(const Config& cfg, const StageParams& s, const std::vector<int>& cb, StageComm& c) {
  const ParallelConfig& p = cfg.parallel;
  if (p.ep <= 1) return;
  const Dims d = dims_of(cfg);
  const int A = cfg.train.grad_accum;
  const double n_moe = moe_blocks_of(cfg, cb, s), P = p.ep, El = cfg.model.n_experts / p.ep;
  const MoeRows r = moe_rows(cfg, true);
  const bool full = cfg.train.recompute == Recompute::full;
  // Off-rank rows each way: with a capacity at most the other ranks'
  // experts full, (ep-1)*B*(E/ep)*cap (a bound); dropless the balanced
  // share (ep-1)/ep*N*k (an estimate: a skewed router sends more).
  const ModelConfig& mc = cfg.model;
  const double off = !mc.dropless
                         ? std::min(r.M, (P - 1) * cfg.train.micro_batch * El *
                                             std::ceil(double(mc.capacity_factor) * mc.seq_len * mc.top_k /
                                                       mc.n_experts))
                         : (P - 1) / P * r.M;
  const double fwd = (P - 1) * El * kF + 2 * off * d.C * kF;
  const double bwd = 2 * off * d.C * kF;
  c.ep_bytes = A * n_moe * (fwd * (full ? 2 : 1) + bwd);
  c.ep_calls = A * n_moe * (3 * (full ? 2 : 1) + 2);
}

// tp: per block per micro-batch (see Model::block_fwd/block_bwd), the
// vocab-parallel embedding and the loss head.
void add_tp_comm(const Config& cfg, const StageParams& s, const std::vector<int>& cb, const MemoryPlan& plan,
                 StageComm& c) {
  const Dims d = dims_of(cfg);
  if (d.tp <= 1) return;
  const int A = cfg.train.grad_accum;
  const double t = d.tp, BTC = d.N() * d.C, ar = 2 * (t - 1) / t * kF, ag = (t - 1) / t * kF;
  const double n_blocks = blocks_of(cb, s), n_moe = moe_blocks_of(cfg, cb, s);
  const bool full = cfg.train.recompute == Recompute::full;
  double bytes = 0, calls = 0;
  if (!d.sp) {
    // A MoE block's MLP is replicated over tp: no MLP all-reduce forward
    // or backward (2 + full instead of 4 + full).
    bytes += (n_blocks * (4 + full) - 2 * n_moe) * ar * BTC;
    calls += n_blocks * (4 + full) - 2 * n_moe;
  } else {
    // A MoE block's MLP takes the all-gathered rows and keeps its own rows
    // of the replicated output: no reduce-scatter forward or backward.
    const double n_ag = 6 + 2 * full, n_rs = 4 + full;
    bytes += n_blocks * ((n_ag + n_rs) * ag * BTC + ar * 4 * d.C) - 2 * n_moe * ag * BTC;
    calls += n_blocks * (n_ag + n_rs + 1) - 2 * n_moe;
    // A split backward's W all-gathers its matmul inputs again (Model::
    // block_wgrad): ln1 and, in dense blocks, ln2.
    if (splits_backward(train_kind(cfg))) {
      bytes += (2 * n_blocks - n_moe) * ag * BTC;
      calls += 2 * n_blocks - n_moe;
    }
  }
  if (cfg.parallel.expert_tp && n_moe > 0) {
    // Expert tp: per MoE block the expert outputs forward (again with full
    // recompute) and the received rows' input gradient backward are summed
    // over tp, (R, C) each (R: the rows this rank's experts receive, the
    // memory model's uniform-routing estimate).
    const double R = moe_rows(cfg, false).R;
    bytes += n_moe * (2 + full) * ar * R * d.C;
    calls += n_moe * (2 + full);
    if (cfg.model.shared_expert_ffn > 0) {  // the shared expert's output and input gradient, (N, C) each
      bytes += n_moe * (2 + full) * ar * BTC;
      calls += n_moe * (2 + full);
    }
  }
  if (d.tp > cfg.model.n_kv_heads) {
    // Key/value heads held by several tp ranks (KvCopies): per block in
    // backward one all-reduce of this rank's dK and dV, (N, D) each, over
    // the copies of its head (tp / n_kv_heads ranks, a part of tp).
    const double copies = d.tp / cfg.model.n_kv_heads;
    bytes += n_blocks * 2 * (copies - 1) / copies * kF * 2 * d.N() * d.D;
    calls += n_blocks;
  }
  if (s.has_embedding) {  // vocab-parallel embedding: reduce forward, gather the gradient (sp)
    bytes += d.sp ? 2 * ag * BTC : ar * BTC;
    calls += d.sp ? 2 : 1;
  }
  if (s.has_head) {  // gather (sp), loss max/sum over the vocab slices, reduce the gradient
    const double rows = plan.head_rows();
    bytes += ar * 3 * d.N() + (d.sp ? 2 * ag * BTC + ar * 2 * d.C : ar * BTC);
    calls += 2 * std::ceil(d.N() / rows) + (d.sp ? 3 : 1);
  }
  c.tp_bytes = A * bytes;
  c.tp_calls = A * calls;
}

StageComm stage_comm(const Config& cfg, const StageParams& s, const std::vector<int>& cb, int pp_rank) {
  const ParallelConfig& p = cfg.parallel;
  const int A = cfg.train.grad_accum, G = int(cb.size()) - 1;
  const MemoryPlan plan = memory_plan_of(cfg, cb, pp_rank);
  StageComm c;
  const DpComm dc = dp_comm(cfg, s, p.dp * p.cp, tied_here(cfg, s), held_unit(cfg, s));
  c.dp_bytes = dc.bytes;
  c.dp_calls = dc.calls;
  c.dp_exposed_bytes = dc.exposed;
  const StageParams xp = expert_stage_params(cfg, cb, pp_rank);
  const DpComm ec = dp_comm(cfg, xp, p.dp * p.cp / p.ep, false, -1);
  c.edp_bytes = ec.bytes;
  c.edp_calls = ec.calls;
  c.edp_exposed_bytes = ec.exposed;
  add_cp_comm(cfg, s, cb, c);
  add_ep_comm(cfg, s, cb, c);
  add_tp_comm(cfg, s, cb, plan, c);
  // pp: one boundary activation forward and one gradient backward per chunk
  // edge between two stages (zbv's turn, chunk pp - 1 to pp, stays on its stage).
  const ChunkPlacement place = placement_of(cfg);
  auto crosses = [&](int g, int h) { return chunk_owner(place, p.pp, g) != chunk_owner(place, p.pp, h); };
  for (int g : s.chunks) {
    if (g < G - 1 && crosses(g, g + 1)) c.pp_msgs += A;
    if (g > 0 && crosses(g, g - 1)) c.pp_msgs += A;
  }
  c.pp_bytes = c.pp_msgs * kF * double(plan.boundary_elems());
  return c;
}

// Model FLOPs per token as the trainer counts them for MFU: 6N + 12 L C T,
// N the whole model's parameters (unpadded, a tied embedding once; a MoE
// block counts the router and the top_k experts a token uses).
double model_flops_per_token(const Config& cfg) {
  const ModelConfig& m = cfg.model;
  const Dims d = dims_of(cfg);
  const double C = m.d_model, HD = double(m.n_heads) * d.D, KD = double(m.n_kv_heads) * d.D, F = m.d_ff,
               V = m.vocab_size;
  double blk = C * (HD + 2 * KD) + HD * C + (d.gpt2 ? 2 : 3) * C * F + 2 * C;
  if (m.has_qkv_bias()) blk += HD + 2 * KD;
  if (d.gpt2) blk += C + F + C + 2 * C;
  double n_params = V * C + (d.gpt2 ? m.seq_len * C : 0.0) + m.n_layers * blk + C * (d.gpt2 ? 2 : 1) +
                    (d.tied ? 0.0 : V * C);
  const double mlp = (d.gpt2 ? 2 : 3) * C * F + (d.gpt2 ? F + C : 0.0);
  const double Fs = m.shared_expert_ffn;
  const double shared = Fs > 0 ? (d.gpt2 ? 2 : 3) * C * Fs + (d.gpt2 ? Fs + C : 0.0) + (m.shared_expert_gate ? C : 0.0)
                               : 0.0;
  for (int l = 0; l < m.n_layers; ++l)
    if (m.is_moe_block(l)) n_params += m.n_experts * C + (m.top_k - 1) * mlp + shared;
  return 6.0 * n_params + 12.0 * m.n_layers * C * m.seq_len;
}

// The links of a prediction: bandwidth and latency per link class.
struct Links {
  const Machine& mach;
  double bw(bool intra) const { return (intra ? mach.intra_node_gbs : mach.inter_node_gbs) * 1e9; }
  double lat(bool intra) const { return (intra ? mach.intra_node_latency_us : mach.inter_node_latency_us) * 1e-6; }
};

// The pipeline's bubble: the schedule's formula (what the eager replay
// gives exactly), or, where the messages move as the grouped plan (NCCL),
// its replay's worst stage, which interleaved schedules can exceed the
// formula by (pipeline-parallel.md). Plans are cached: the enumeration asks
// for the same few schedules many times.
double pipeline_bubble(const Config& cfg) {
  const ParallelConfig& p = cfg.parallel;
  const ScheduleKind kind = train_kind(cfg);
  const int A = cfg.train.grad_accum;
  if (!pp_messages_grouped(comm_impl_of(cfg.backend, p.comm), p.pp_p2p))
    return bubble_formula(kind, p.pp, p.virtual_stages, A);
  static std::map<std::tuple<int, int, int, int>, double> cache;
  const auto key = std::make_tuple(int(kind), p.pp, p.virtual_stages, A);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const Schedule s = make_schedule(kind, p.pp, p.virtual_stages, A);
  const P2pCheck c = check_p2p_plan(s, make_p2p_plan(s));
  const double worst = *std::max_element(c.sim_bubble.begin(), c.sim_bubble.end());
  return cache[key] = worst;
}

// The step time of one stage (fills t's terms; returns the step time).
double stage_time(const Config& cfg, const StageComm& c, double compute, const Links& k, double msg_bytes,
                  TimeEstimate& t) {
  const ParallelConfig& p = cfg.parallel;
  const int A = cfg.train.grad_accum;
  const double p2p = k.mach.p2p_gbs > 0 ? k.mach.p2p_gbs * 1e9 : k.bw(t.pp_intra);
  const double tp_s = c.tp_bytes / k.bw(t.tp_intra) + c.tp_calls * k.lat(t.tp_intra);
  const double dp_s = c.dp_bytes / k.bw(t.dp_intra) + c.dp_calls * k.lat(t.dp_intra);
  // The reduction of all but the last bucket hides behind the last
  // micro-batch's backward (about 2/3 of its compute); ZeRO-3 gathers
  // behind all compute (prefetch).
  const double exposed_part =
      std::min(dp_s, c.dp_exposed_bytes / k.bw(t.dp_intra) + std::min(c.dp_calls, 2.0) * k.lat(t.dp_intra));
  const double hideable = std::max(0.0, dp_s - exposed_part);
  const double window = p.zero == 3 ? compute : compute / A * 2.0 / 3.0;
  const double dp_exposed = exposed_part + std::max(0.0, hideable - window);
  const double bubble = p.pp > 1 ? pipeline_bubble(cfg) : 0.0;
  const double pp_s = p.pp > 1 ? 2.0 * (p.pp - 1) * (msg_bytes / p2p + k.lat(t.pp_intra)) : 0.0;
  // cp: the ring transfers overlap the attention blocks; what exceeds the
  // attention compute (about 1/4 of a block's) is exposed. ep: the
  // all-to-alls are blocking; the expert_dp reduction is counted whole.
  const double cp_all = c.cp_bytes / k.bw(t.cp_intra) + c.cp_msgs * k.lat(t.cp_intra);
  const double cp_s = std::max(0.0, cp_all - compute / 4);
  const double ep_s = c.ep_bytes / k.bw(t.ep_intra) + c.ep_calls * k.lat(t.ep_intra) +
                      c.edp_bytes / k.bw(t.dp_intra) + c.edp_calls * k.lat(t.dp_intra);
  const double step = compute * (1 + bubble) + (tp_s + cp_s + ep_s) * (1 + bubble) + dp_exposed + pp_s;
  t.compute_s = compute;
  t.bubble = bubble;
  t.bubble_s = bubble * (compute + tp_s);
  t.tp_s = tp_s;
  t.dp_s = dp_s;
  t.dp_exposed_s = dp_exposed;
  t.pp_s = pp_s;
  t.cp_s = cp_s;
  t.ep_s = ep_s;
  t.step_s = step;
  return step;
}

}  // namespace

Prediction predict(const Config& cfg, const Machine& mach, int gpus_per_node, int ranks_per_node, double moe_load) {
  const ParallelConfig& p = cfg.parallel;
  Prediction pr;
  pr.mem = estimate_memory(cfg, moe_load);
  const std::vector<int> cb = partition_blocks(cfg.model.n_layers, p.pp * p.virtual_stages, p.stage_layers);
  const int ranks = p.dp * p.tp * p.pp * p.cp;
  const int devices = gpus_per_node > 0 ? gpus_per_node : mach.devices_per_node;
  // One rank per device unless told otherwise; never more than the job has.
  const int rpn = std::min(ranks, ranks_per_node > 0 ? ranks_per_node : devices);
  TimeEstimate& t = pr.time;
  // Rank order (topology.hpp): pp outermost, then dp, cp, tp innermost, the
  // ranks numbered node by node as `pentad train` numbers them; a group is
  // inside a node when the block of ranks it spans never crosses one
  // (comm/placement.hpp, the rule the run itself uses).
  t.tp_intra = groups_inside_nodes(ranks, rpn, p.tp);
  t.cp_intra = groups_inside_nodes(ranks, rpn, p.cp * p.tp);
  t.ep_intra = groups_inside_nodes(ranks, rpn, p.ep * p.cp * p.tp);
  t.dp_intra = groups_inside_nodes(ranks, rpn, p.dp * p.cp * p.tp);
  t.pp_intra = groups_inside_nodes(ranks, rpn, ranks);
  t.oversubscription = std::max(1.0, double(rpn) / devices);
  const double rate = mach.peak_tflops * 1e12 * mach.compute_efficiency / t.oversubscription;
  const Links links{mach};
  const double msg = kF * double(memory_plan_of(cfg, cb, 0).boundary_elems());
  double worst = -1;
  for (int r = 0; r < p.pp; ++r) {
    const StageParams s = stage_params(cfg, cb, r);
    const StageComm c = stage_comm(cfg, s, cb, r);
    pr.comm.push_back(c);
    const double compute = cfg.train.grad_accum * stage_flops_per_mb(cfg, s, cb) / rate;
    TimeEstimate st = t;  // the link classes
    if (stage_time(cfg, c, compute, links, msg, st) > worst) {
      worst = st.step_s;
      t = st;
    }
  }
  const double tokens = double(cfg.train.micro_batch) * cfg.train.grad_accum * p.dp * cfg.model.seq_len;
  t.flops_per_step = model_flops_per_token(cfg) * tokens;
  t.tokens_per_s = tokens / t.step_s;
  t.mfu = t.flops_per_step / t.step_s / (ranks * mach.peak_tflops * 1e12);
  return pr;
}

// ---------------------------------------------------------------------------
// Text

std::string format_bytes(double b) { return format_bytes(b, 2, true); }

double parse_bytes(const std::string& s, const std::string& what) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(s, &used);
  } catch (const std::exception&) {
    throw InputError(what + ": expected a size such as 80GiB, 512MiB or 1e9 (got '" + s + "')");
  }
  std::string unit = s.substr(used);
  double mult = 1;
  if (unit == "" || unit == "B") mult = 1;
  else if (unit == "KiB") mult = 1024.0;
  else if (unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "TiB") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  else if (unit == "TB") mult = 1e12;
  else
    throw InputError(what + ": unknown unit '" + unit + "' in '" + s + "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  if (!(x > 0) || !std::isfinite(x)) throw InputError(what + ": must be a positive size (got '" + s + "')");
  return x * mult;
}

std::string describe_layout(const Config& cfg) {
  const ParallelConfig& p = cfg.parallel;
  const char* rc[] = {"none", "selective", "full"};
  std::ostringstream o;
  o << "dp=" << p.dp << ",tp=" << p.tp << ",pp=" << p.pp;
  if (p.cp > 1) o << ",cp=" << p.cp << (p.cp_layout == CpLayout::zigzag ? ",zigzag" : "");
  if (p.ep > 1) o << ",ep=" << p.ep;
  if (p.sp) o << ",sp";
  if (p.expert_tp) o << ",etp";
  if (p.pp > 1 || p.virtual_stages > 1) o << "," << deck_name(p.schedule) << (p.virtual_stages > 1 ? ",v=" + std::to_string(p.virtual_stages) : "");
  o << ",zero=" << p.zero << ",recompute=" << rc[int(cfg.train.recompute)] << ",mb=" << cfg.train.micro_batch
    << ",accum=" << cfg.train.grad_accum;
  return o.str();
}

std::string explain_prediction(const Config& cfg, const Prediction& pr, const Machine& mach) {
  std::ostringstream o;
  char buf[512];
  const ParallelConfig& p = cfg.parallel;
  o << "layout " << describe_layout(cfg) << " on " << p.dp * p.tp * p.pp * p.cp << " ranks, machine "
    << mach.name << "\n";
  o << "memory per rank (bytes the backend allocates; stage = pipeline stage, tp/dp rank 0):\n";
  std::snprintf(buf, sizeof buf, "  %-6s %12s %12s %12s %12s %12s %12s %12s\n", "stage", "params", "grads", "optim",
                "activations", "comm", "scratch", "total");
  o << buf;
  for (size_t s = 0; s < pr.mem.stages.size(); ++s) {
    const StageMemory& m = pr.mem.stages[s];
    std::snprintf(buf, sizeof buf, "  %-6zu", s);
    o << buf;
    for (double b : m.bytes) {
      std::snprintf(buf, sizeof buf, " %12s", format_bytes(b).c_str());
      o << buf;
    }
    std::snprintf(buf, sizeof buf, " %12s\n", format_bytes(m.total).c_str());
    o << buf;
  }
  for (size_t s = 0; s < pr.mem.stages.size(); ++s) {
    const StageMemory& m = pr.mem.stages[s];
    std::string sl;
    for (int n : m.slots) {
      if (!sl.empty()) sl += ',';
      sl += std::to_string(n);
    }
    std::snprintf(buf, sizeof buf, "  stage %zu: N = %.0f parameter elements (padded), shard S = %.0f", s,
                  m.param_elems, m.shard_elems);
    o << buf;
    if (m.expert_elems > 0) {
      std::snprintf(buf, sizeof buf, ", experts NE = %.0f elements, shard SE = %.0f", m.expert_elems,
                    m.expert_shard_elems);
      o << buf;
    }
    std::snprintf(buf, sizeof buf,
                  ", activation slots per chunk [%s] x %s per in-flight micro-batch, %d boundary buffers\n",
                  sl.c_str(), format_bytes(m.slot_bytes).c_str(), m.boundary_buffers);
    o << buf;
  }
  for (const auto& n : pr.mem.notes) o << "  note: " << n << "\n";
  o << "communication per rank per step (bytes sent, counted as ring algorithms move them):\n";
  for (size_t s = 0; s < pr.comm.size(); ++s) {
    const StageComm& c = pr.comm[s];
    std::snprintf(buf, sizeof buf, "  stage %zu: dp %s (%.0f calls, %s exposed) | tp %s (%.0f calls) | pp %s (%.0f messages)\n",
                  s, format_bytes(c.dp_bytes).c_str(), c.dp_calls, format_bytes(c.dp_exposed_bytes).c_str(),
                  format_bytes(c.tp_bytes).c_str(), c.tp_calls, format_bytes(c.pp_bytes).c_str(), c.pp_msgs);
    o << buf;
    if (c.cp_bytes > 0 || c.ep_bytes > 0 || c.edp_bytes > 0) {
      std::snprintf(buf, sizeof buf, "  stage %zu: cp %s (%.0f ring hops) | ep %s (%.0f calls, upper bound) | "
                    "expert_dp %s (%.0f calls)\n", s, format_bytes(c.cp_bytes).c_str(), c.cp_msgs,
                    format_bytes(c.ep_bytes).c_str(), c.ep_calls, format_bytes(c.edp_bytes).c_str(), c.edp_calls);
      o << buf;
    }
  }
  const TimeEstimate& t = pr.time;
  std::snprintf(buf, sizeof buf,
                "step time (busiest stage): compute %.3g ms at %.0f%% of %.3g TFLOP/s%s + bubble %.3f x = %.3g ms"
                " + tp %.3g ms (%s, not overlapped) + dp exposed %.3g ms of %.3g ms (%s) + pp %.3g ms (%s) = %.4g ms\n"
                "  -> %.4g tokens/s, MFU %.1f%%\n",
                t.compute_s * 1e3, 100 * mach.compute_efficiency, mach.peak_tflops,
                t.oversubscription > 1 ? (" (oversubscribed " + std::to_string(t.oversubscription).substr(0, 4) + "x)").c_str() : "",
                t.bubble, t.bubble_s * 1e3, t.tp_s * 1e3, t.tp_intra ? "intra-node" : "inter-node",
                t.dp_exposed_s * 1e3, t.dp_s * 1e3, t.dp_intra ? "intra-node" : "inter-node", t.pp_s * 1e3,
                t.pp_intra ? "intra-node" : "inter-node", t.step_s * 1e3, t.tokens_per_s, 100 * t.mfu);
  o << buf;
  if (t.cp_s > 0 || t.ep_s > 0) {
    std::snprintf(buf, sizeof buf, "  (included above with tp: cp exposed %.3g ms, ep and expert_dp %.3g ms)\n",
                  t.cp_s * 1e3, t.ep_s * 1e3);
    o << buf;
  }
  return o.str();
}

// ---------------------------------------------------------------------------
// Machine files

Machine parse_machine(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(std::string_view(text), std::string_view(path));
  } catch (const toml::parse_error& e) {
    throw InputError(path + ":" + std::to_string(e.source().begin.line) + ": TOML syntax error: " +
                     std::string(e.description()));
  }
  Machine m;
  m.source = path;
  auto at = [&](const toml::node& n) { return path + ":" + std::to_string(n.source().begin.line) + ": "; };
  for (auto&& [k, v] : root) {
    if (k.str() != "machine" || !v.is_table())
      throw InputError(at(v) + "unknown section or key '" + std::string(k.str()) + "' (expected a [machine] table)");
  }
  const toml::table* t = root["machine"].as_table();
  if (!t) throw InputError(path + ": missing [machine] table");
  bool seen_peak = false, seen_mem = false, seen_dev = false, seen_name = false;
  for (auto&& [k, v] : *t) {
    const std::string key = "machine." + std::string(k.str());
    auto number = [&](double lo, double hi) {
      double x;
      if (auto i = v.as_integer()) x = double(i->get());
      else if (auto f = v.as_floating_point()) x = f->get();
      else throw InputError(at(v) + key + ": expected a number");
      if (!(x >= lo && x <= hi))
        throw InputError(at(v) + key + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                         std::to_string(x) + ")");
      return x;
    };
    if (k.str() == "name") {
      auto s = v.as_string();
      if (!s) throw InputError(at(v) + key + ": expected a string");
      m.name = s->get();
      seen_name = true;
    } else if (k.str() == "devices_per_node") {
      auto i = v.as_integer();
      if (!i || i->get() < 1 || i->get() > 1024) throw InputError(at(v) + key + ": expected an integer in [1, 1024]");
      m.devices_per_node = int(i->get());
      seen_dev = true;
    } else if (k.str() == "memory") {
      auto s = v.as_string();
      if (!s) throw InputError(at(v) + key + ": expected a size string such as \"80GiB\"");
      m.memory_bytes = parse_bytes(s->get(), at(v) + key);
      seen_mem = true;
    } else if (k.str() == "peak_tflops") {
      m.peak_tflops = number(1e-6, 1e6);
      seen_peak = true;
    } else if (k.str() == "compute_efficiency") {
      m.compute_efficiency = number(1e-4, 1.0);
    } else if (k.str() == "intra_node_gbs") {
      m.intra_node_gbs = number(1e-6, 1e6);
    } else if (k.str() == "inter_node_gbs") {
      m.inter_node_gbs = number(1e-6, 1e6);
    } else if (k.str() == "intra_node_latency_us") {
      m.intra_node_latency_us = number(0, 1e6);
    } else if (k.str() == "inter_node_latency_us") {
      m.inter_node_latency_us = number(0, 1e6);
    } else if (k.str() == "p2p_gbs") {
      m.p2p_gbs = number(0, 1e6);
    } else {
      throw InputError(at(v) + "unknown key '" + key +
                       "' (known: name, devices_per_node, memory, peak_tflops, compute_efficiency, intra_node_gbs, "
                       "inter_node_gbs, intra_node_latency_us, inter_node_latency_us, p2p_gbs)");
    }
  }
  if (!seen_name || !seen_dev || !seen_mem || !seen_peak)
    throw InputError(path + ": [machine] needs name, devices_per_node, memory and peak_tflops");
  return m;
}

Machine load_machine(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  if (!text) throw InputError("--machine: cannot read '" + path + "'");
  return parse_machine(*text, path);
}

}  // namespace pentad
