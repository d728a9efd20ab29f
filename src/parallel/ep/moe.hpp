// Mixture-of-experts MLP (Shazeer et al. 2017; GShard, Lepikhin et al. 2020;
// Switch, Fedus et al. 2021) with expert parallelism over the ep group.
// Router: logits = x Wr^T (E), softmax, top-k, weights renormalised over the
// k chosen, or the raw probabilities (model.renormalize_top_k; by default
// renormalised when top_k > 1, raw with top_k = 1, as Switch). Routing groups
// are single sequences: capacity, dropping and the load-balancing statistics
// are per sequence, so every layout (dp, ep, pp, accumulation) routes the same
// tokens the same way. With context parallelism a sequence is cut over the cp
// group: each cp rank routes its own tokens, and the ranks exchange their
// top-k choices (k integers per token) so that capacity and the balance
// statistics are decided on the whole sequence, in global token order.
// Experts are ordinary MLPs (GELU with biases for gpt2, SwiGLU for llama);
// expert e lives on ep rank e / (E/ep). A shared expert
// (model.shared_expert_ffn > 0; DeepSeekMoE's, Qwen2-MoE's) is one more MLP
// of that form, of its own width, that every token goes through on its own
// rank (replicated over ep, in the dense store), its output added to the
// routed experts' sum, scaled per token by sigmoid(x . w) with
// model.shared_expert_gate; with expert tp its width is split like theirs.
// Tokens go out with an all-to-all (counts first, then rows), come back with
// the reverse one.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "model/params.hpp"

namespace pentad {

class Comm;

// Parameter indices of one MoE block: the router in the dense store (reduced
// over dp), the experts in the expert store (reduced over expert_dp).
struct MoeParams {
  int router = -1;                                     // (E, C) dense
  int w_gate = -1, w_up = -1, b_up = -1, w_down = -1, b_down = -1;  // (E/ep, F, C), (E/ep, F), (E/ep, C, F), (E/ep, C)
  // The shared expert (dense store; Fs = shared_expert_ffn / expert tp):
  // (Fs, C), (Fs, C), (Fs), (C, Fs), (C), and its gate (1, C).
  int s_gate = -1, s_up = -1, s_b_up = -1, s_down = -1, s_b_down = -1, s_w = -1;
};

// Which experts, and which part of each, a rank holds: ep rank ep_rank of
// ep_size holds experts [ep_rank E/ep, (ep_rank+1) E/ep); with tp_size > 1
// (parallel.expert_tp) tp rank tp_rank holds d_ff columns [tp_rank F/tp,
// (tp_rank+1) F/tp) of each (w_gate, w_up, b_up rows; w_down columns, as a
// dense MLP's column- then row-parallel pair), b_down whole. tp_size 1: the
// whole experts, replicated over tp.
struct ExpertCut {
  int ep_rank = 0, ep_size = 1;
  int tp_rank = 0, tp_size = 1;
};

// The tensors of one MoE block named prefix (its MLP's, e.g.
// "model/layers/3/mlp/"), in registration order: the router (E, C) in the
// dense store, then this rank's cut of the experts (expert store), then the
// shared expert's (dense store, "shared/..."; its width cut like the
// experts' d_ff). Units are left 0 for the caller. Pure.
std::vector<ParamSpec> moe_param_specs(const ModelConfig& cfg, const std::string& prefix, const ExpertCut& cut,
                                       float std, float std_out);
// Points the field of p that the spec prefix + leaf names ("router/w",
// "experts/w_up", ...) at tensor `index` of its store.
void set_moe_param(MoeParams& p, const std::string& leaf, int index);

// The routing rule, shared by training (router.cpp) and the sampling engine
// (infer/engine.cpp). softmax_rows: probs (N, E) logits in, softmax out, in
// place (the sum in double); lse (N) their log-sum-exp. top_k_rows: the
// top-k of each row (larger probability first, lower expert on ties) into
// idx, w (N, k); z (N) the chosen mass, which divides the weights when
// renormalize (ModelConfig::renormalizes_top_k; else z is left as it is and
// the weights are the raw probabilities).
void softmax_rows(float* probs, float* lse, int N, int E);
void top_k_rows(const float* probs, int N, int E, int k, bool renormalize, int* idx, float* w, float* z);

// The MoE layer's device buffers for one call, in fp32 elements: N token
// rows in (n_out of them written here), M rows this rank dispatches, R rows
// it receives. The layer allocates each of these; the planner evaluates the
// same function for its modelled row counts (T = double: expected counts
// are fractional; the layer uses T = size_t).
template <class T>
struct MoeBuffers {
  T kept_per_row;  // per received row, kept forward -> backward (activations): xr's row (C), h, a (and u, Llama) (F each)
  T kept_dispatch; // kept forward -> backward (activations): the expert outputs in dispatch order (M, C), the
                   // index lists row_token, row_choice (M each) and row (N, k), the weights (N, k) (4 bytes each)
  T xr, hidden;    // (R, C) received rows; (R, F) one of h, a (and u): the hidden activations (F = d_ff / expert tp)
  T send, y;       // (M, C) dispatched rows (kept: the outputs come back into them); (R, C) expert outputs
  T logits;        // (N, E) router logits, forward and backward (scratch)
  T combine;       // (n_out, C) the weighted sum of the expert outputs (scratch)
  T bwd;           // backward's row gradients (scratch): (M, C) sent, (R, C) received and returned, 1|3 (R, F)
  int n_hidden;    // hidden (R, F) activations: 2 GPT-2 (h, a), 3 Llama (u too); gradients: GPT-2 dh, Llama da, dh, du
  // The shared expert (0 without one), over all N rows, Fs = its width / expert tp:
  T shared_hidden; // (N, Fs) one of its hidden activations (n_hidden of them kept)
  T kept_shared;   // kept forward -> backward: its n_hidden (N, Fs); gated also its output (N, C), the gate
                   // values and the identity row list (N each)
  T shared_fwd;    // forward scratch: its output (N, C) ungated; gated the gate logits (N), then the scaled
                   // output rows (n_out, C)
  T shared_bwd;    // backward scratch at its peak: (gated) the scaled output gradient (N, C) and the gate's
                   // (N); the hidden gradients 1|3 (N, Fs); with expert tp the partial input gradient (N, C)
  // The forward call's peak beyond the context it keeps: the expert outputs
  // (R, C), freed before the shared expert's activations are made.
  T in_forward() const { return std::max(y - kept_shared, T(0)); }
  T kept(T R) const { return R * kept_per_row + kept_dispatch + kept_shared; }  // one block's context
};

// expert_tp: the tp size each expert's d_ff is split over (1: whole experts).
template <class T>
MoeBuffers<T> moe_buffers(const ModelConfig& cfg, T N, T n_out, T M, T R, int expert_tp = 1) {
  const T C = T(cfg.d_model), F = T(cfg.d_ff) / T(expert_tp), E = T(cfg.n_experts);
  const int nh = cfg.family == Family::gpt2 ? 2 : 3;
  MoeBuffers<T> b;
  b.n_hidden = nh;
  b.kept_per_row = C + T(nh) * F;
  b.kept_dispatch = M * C + T(2) * M + T(2) * N * T(cfg.top_k);
  b.xr = R * C;
  b.hidden = R * F;
  b.send = M * C;
  b.y = R * C;
  b.logits = N * E;
  b.combine = n_out * C;
  b.bwd = M * C + T(2) * R * C + T(cfg.family == Family::gpt2 ? 1 : 3) * R * F;
  const T Fs = T(cfg.shared_expert_ffn) / T(expert_tp), ng = T(cfg.family == Family::gpt2 ? 1 : 3);
  const bool shared = cfg.shared_expert_ffn > 0, gated = shared && cfg.shared_expert_gate;
  b.shared_hidden = shared ? N * Fs : T(0);
  b.kept_shared = T(nh) * b.shared_hidden + (gated ? N * C + T(2) * N : T(0));
  b.shared_fwd = !shared ? T(0) : gated ? std::max(N, n_out * C) : N * C;
  const T dys = gated ? N * C : T(0), dxs = expert_tp > 1 ? N * C : T(0);
  b.shared_bwd = !shared ? T(0)
                         : std::max({gated ? N * C + N : T(0), dys + ng * b.shared_hidden,
                                     ng * b.shared_hidden + dxs});
  return b;
}

// Routing statistics, summed over MoE blocks and micro-batches (host), of
// this rank's tokens: with cp the totals are the sums over the cp group
// (aux_sum is linear in the probabilities, so each rank adds its share).
struct MoeStats {
  double aux_sum = 0;      // sum over (block, sequence) of E * sum_e f_e P_e
  double z_sum = 0;        // sum over (block, token) of logsumexp(logits)^2
  double assigned = 0;     // token-expert assignments chosen by top-k
  double dropped = 0;      // of which over capacity
  std::vector<double> per_expert;  // (L*E) kept assignments per block and expert
  // Receive load: the most rows this rank received in one call (R) over the
  // uniform share N*top_k (what it receives when every rank's choices spread
  // evenly over the ep ranks); 1 = balanced. The planner's --moe-load.
  double recv_load_max = 0;
  void reset(int n_layers, int n_experts) {
    aux_sum = z_sum = assigned = dropped = recv_load_max = 0;
    per_expert.assign(size_t(n_layers) * size_t(n_experts), 0.0);
  }
};

// What one MoE forward keeps for its backward (opaque).
struct MoeCtx;
struct MoeCtxDeleter {
  void operator()(MoeCtx* c) const;
};
using MoeCtxPtr = std::unique_ptr<MoeCtx, MoeCtxDeleter>;

class MoeLayer {
 public:
  // ep: the expert-parallel group (nullptr or size 1: every expert is here).
  // cp: the context-parallel group and how it cuts a sequence (nullptr:
  // whole sequences here); token rows are then chunk-major, as the model
  // holds them (context_parallel.hpp).
  // tp: the tensor-parallel group the experts' d_ff is split over
  // (parallel.expert_tp; nullptr or size 1: whole experts, replicated over
  // tp). The layer then sums its partial expert outputs, and its partial
  // input gradients, over tp (an all-reduce each).
  MoeLayer(const ModelConfig& cfg, Backend& be, ParamStore& dense, ParamStore& experts, Comm* ep,
           Comm* cp = nullptr, CpLayout cp_layout = CpLayout::contiguous, Comm* tp = nullptr);

  // Register block `prefix`'s router (in the dense store's current unit) and
  // this ep rank's experts (in the expert store's current unit).
  MoeParams add_params(const std::string& prefix, float std, float std_out);

  int experts_local() const { return E_local_; }

  // Wall time since the last reset: all-to-alls (counts and rows, both
  // directions), expert matmuls and activations (with expert tp, also their
  // all-reduces over tp), and the rest: host-side routing, the index lists'
  // upload, the backend's gather and combine.
  struct Times {
    double comm_s = 0, expert_s = 0, route_s = 0;
  };
  const Times& times() const { return times_; }
  void reset_times() { times_ = {}; }

  // out = resid + sum_j w_j expert_j(x) (+ the gated shared expert) for the N = n_seq * T/cp token rows
  // of x, the block's MLP input (after the norm). out and resid hold rows
  // [row0, row0 + n_out) of the N (n_out < 0: all N); sequence parallelism
  // passes the all-gathered x and this tp rank's rows. Saves what backward
  // needs in ctx (allocated if empty). stats (nullable) gets this call's
  // routing statistics of this rank's tokens under block `layer`.
  // Collective over ep (and cp).
  void forward(MoeCtxPtr& ctx, const MoeParams& p, int layer, float* out, const float* resid,
               const float* x, int n_tokens, MoeStats* stats, int row0 = 0, int n_out = -1);
  // dx(N,C) = the gradient of x (written, all N rows); parameter gradients
  // accumulate (from this rank's tokens).
  // dy: the gradient of the block output. loss_scale weighs one token's
  // loss (1 / tokens of the global batch): one sequence's load-balancing
  // loss weighs aux_loss_coef * loss_scale * T, one token's z-loss
  // z_loss_coef * loss_scale. Frees ctx's buffers. Collective over ep.
  void backward(MoeCtxPtr& ctx, const MoeParams& p, float* dx, const float* dy, const float* x,
                float loss_scale);

 private:
  // router.cpp: router logits, softmax and top-k of the N rows of x (C)
  // into c; the choices of every cp rank in global token order (collective
  // over cp); the per-sequence capacity decision (keep: (N, k) this rank's
  // choices served; returns how many were dropped); the statistics; and the
  // router's backward from the combine weights' gradient dw (N, k).
  void route_tokens(MoeCtx& c, const MoeParams& p, const float* x, int n_seq);
  std::vector<int> gather_choices(const MoeCtx& c, int n_seq);
  double apply_capacity(MoeCtx& c, const std::vector<int>& gidx, int n_seq, std::vector<char>& keep) const;
  void add_stats(const MoeCtx& c, int layer, int n_seq, const std::vector<int>& rows_of, double dropped,
                 MoeStats& stats) const;
  void router_bwd(const MoeCtx& c, const MoeParams& p, const std::vector<float>& dw, float* dx, const float* x,
                  float loss_scale);

  // dispatch.cpp: the dispatch order (returns kept rows per expert), the
  // counts exchange, the rows' all-to-all (to the experts and back; both
  // collective over ep), and the weighted combine with its backward (the
  // rows moved by the backend's gather_rows / combine_rows ops).
  std::vector<int> plan_dispatch(MoeCtx& c, const std::vector<char>& keep) const;
  void exchange_counts(MoeCtx& c, const std::vector<int>& rows_of);
  void exchange_rows(const MoeCtx& c, const float* src, float* dst, bool to_experts);
  float* dispatch_rows(MoeCtx& c, const float* x);
  void combine_fwd(MoeCtx& c, float* send, float* out, const float* resid, int row0, int n_out);
  std::vector<float> combine_bwd(const MoeCtx& c, const float* dy, float* dys);

  // experts.cpp: the expert MLPs over the received rows, and their backward.
  void experts_fwd(MoeCtx& c, const MoeParams& p);
  void experts_bwd(MoeCtx& c, const MoeParams& p, const float* dyr, float* dxr);
  // The shared expert on all N rows of x: out rows [row0, row0 + n_out) +=
  // its (gated) output; its backward adds its input gradient to dx (N, C)
  // and accumulates its parameter gradients. With expert tp its output and
  // input gradient are summed over tp. No-ops without one.
  void shared_fwd(MoeCtx& c, const MoeParams& p, const float* x, float* out, int row0, int n_out);
  void shared_bwd(MoeCtx& c, const MoeParams& p, float* dx, const float* dy, const float* x);
  // moe_layer.cpp: the sizes of this call's buffers (moe_buffers of its N,
  // M, R and n_out output rows), and the row gradients to the experts and
  // back (collective over ep).
  MoeBuffers<size_t> buffers(const MoeCtx& c, int n_out = 0) const;
  void expert_grads(MoeCtx& c, const MoeParams& p, float* rows);

  Times times_;
  ModelConfig cfg_;
  Backend& be_;
  ParamStore& dense_;
  ParamStore& experts_;
  Comm* ep_;
  Comm* cp_;
  Comm* tp_;  // the experts' d_ff split over it; nullptr: replicated
  CpSplit split_;  // how a sequence is cut over cp (one chunk without cp)
  int ep_size_ = 1, ep_rank_ = 0;
  int tp_size_ = 1, tp_rank_ = 0;
  int E_, E_local_, k_, C_, F_, T_;  // F_: this rank's d_ff columns of each expert (d_ff / tp with expert_tp)
  int Fs_ = 0;  // this rank's columns of the shared expert (0: none)
  bool gpt2_;
  GateAct act_ = GateAct::silu;  // the gated experts' activation (model.mlp_act)
};

}  // namespace pentad
