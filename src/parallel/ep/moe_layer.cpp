// The MoE layer (see moe.hpp): composes the router (router.cpp), the
// dispatch and combine (dispatch.cpp) and the expert MLPs (experts.cpp).
// Routing and the dispatch order run on the host (small (N, E) arrays and
// index lists); the rows' gather and combine and the expert matmuls run on
// the backend. The objective adds aux_loss_coef * mean over the global
// batch's sequences of aux_s per MoE block, and z_loss_coef * mean over
// tokens of lse^2.
#include "parallel/ep/moe.hpp"

#include <algorithm>
#include <stdexcept>

#include "comm/comm.hpp"
#include "parallel/ep/moe_ctx.hpp"

namespace pentad {

void MoeCtxDeleter::operator()(MoeCtx* c) const {
  if (c) c->free_dev();
  delete c;
}

MoeLayer::MoeLayer(const ModelConfig& cfg, Backend& be, ParamStore& dense, ParamStore& experts, Comm* ep,
                   Comm* cp, CpLayout cp_layout, Comm* tp)
    : cfg_(cfg), be_(be), dense_(dense), experts_(experts), ep_(ep), cp_(cp && cp->size() > 1 ? cp : nullptr),
      tp_(tp && tp->size() > 1 ? tp : nullptr) {
  split_ = CpSplit{cfg.seq_len, cp_ ? cp_->size() : 1, cp_ ? cp_layout : CpLayout::contiguous};
  if (ep_) {
    ep_size_ = ep_->size();
    ep_rank_ = ep_->rank();
  }
  if (tp_) {
    tp_size_ = tp_->size();
    tp_rank_ = tp_->rank();
  }
  E_ = cfg.n_experts;
  if (E_ <= 0 || E_ % ep_size_ != 0) throw std::invalid_argument("MoeLayer: n_experts must be a positive multiple of ep");
  E_local_ = E_ / ep_size_;
  k_ = cfg.top_k;
  C_ = cfg.d_model;
  if (cfg.d_ff % tp_size_ != 0) throw std::invalid_argument("MoeLayer: d_ff must be a multiple of the tp group");
  F_ = cfg.d_ff / tp_size_;
  if (cfg.shared_expert_ffn % tp_size_ != 0)
    throw std::invalid_argument("MoeLayer: shared_expert_ffn must be a multiple of the tp group");
  Fs_ = cfg.shared_expert_ffn / tp_size_;
  T_ = cfg.seq_len;
  gpt2_ = cfg.family == Family::gpt2;
  act_ = cfg.mlp_act;
}

std::vector<ParamSpec> moe_param_specs(const ModelConfig& cfg, const std::string& prefix, const ExpertCut& cut,
                                       float std, float std_out) {
  const int64_t E = cfg.n_experts, El = E / cut.ep_size, e0 = int64_t(cut.ep_rank) * El, C = cfg.d_model,
                F = cfg.d_ff, Fl = F / cut.tp_size, f0 = int64_t(cut.tp_rank) * Fl;
  const bool gpt2 = cfg.family == Family::gpt2;
  std::vector<ParamSpec> out;
  ParamSpec router;
  router.name = prefix + "router/w";
  router.shape = router.local_shape = {E, C};
  router.local_start = {0, 0};
  router.std = std;
  out.push_back(std::move(router));
  // Expert tensors (E, ...): this ep rank holds experts [e0, e0 + E/ep);
  // with tp_size > 1 the d_ff dimension (f_dim, 1-based in `rest`) is cut
  // to [f0, f0 + F/tp).
  auto blk = [&](const char* name, std::vector<int64_t> rest, int f_dim, Init init, float s, bool decay) {
    ParamSpec x;
    x.name = prefix + "experts/" + name;
    x.shape = {E};
    x.local_start = {e0};
    x.local_shape = {El};
    for (int64_t d : rest) {
      x.shape.push_back(d);
      x.local_start.push_back(0);
      x.local_shape.push_back(d);
    }
    if (f_dim > 0 && cut.tp_size > 1) {
      x.tp_dim = f_dim;
      x.local_start[size_t(f_dim)] = f0;
      x.local_shape[size_t(f_dim)] = Fl;
    }
    x.init = init;
    x.std = s;
    x.decay = decay;
    x.expert = true;
    out.push_back(std::move(x));
  };
  if (!gpt2) blk("w_gate", {F, C}, 1, Init::normal, std, true);
  blk("w_up", {F, C}, 1, Init::normal, std, true);
  if (gpt2) blk("b_up", {F}, 1, Init::zeros, 0, false);
  blk("w_down", {C, F}, 2, Init::normal, std_out, true);
  if (gpt2) blk("b_down", {C}, 0, Init::zeros, 0, false);
  if (cfg.shared_expert_ffn <= 0) return out;
  // The shared expert: a dense MLP of the same form (dense store), its
  // width (dimension f_dim, 0-based) cut over tp as the experts' d_ff is.
  const int64_t Fs = cfg.shared_expert_ffn, Fsl = Fs / cut.tp_size, fs0 = int64_t(cut.tp_rank) * Fsl;
  auto shared = [&](const char* name, std::vector<int64_t> shape, int f_dim, Init init, float s, bool decay) {
    ParamSpec x;
    x.name = prefix + "shared/" + name;
    x.local_start.assign(shape.size(), 0);
    x.shape = x.local_shape = std::move(shape);
    if (f_dim >= 0 && cut.tp_size > 1) {
      x.tp_dim = f_dim;
      x.local_start[size_t(f_dim)] = fs0;
      x.local_shape[size_t(f_dim)] = Fsl;
    }
    x.init = init;
    x.std = s;
    x.decay = decay;
    out.push_back(std::move(x));
  };
  if (!gpt2) shared("w_gate", {Fs, C}, 0, Init::normal, std, true);
  shared("w_up", {Fs, C}, 0, Init::normal, std, true);
  if (gpt2) shared("b_up", {Fs}, 0, Init::zeros, 0, false);
  shared("w_down", {C, Fs}, 1, Init::normal, std_out, true);
  if (gpt2) shared("b_down", {C}, -1, Init::zeros, 0, false);
  if (cfg.shared_expert_gate) shared("gate", {1, C}, -1, Init::normal, std, true);
  return out;
}

void set_moe_param(MoeParams& p, const std::string& leaf, int index) {
  if (leaf == "router/w") p.router = index;
  else if (leaf == "experts/w_gate") p.w_gate = index;
  else if (leaf == "experts/w_up") p.w_up = index;
  else if (leaf == "experts/b_up") p.b_up = index;
  else if (leaf == "experts/w_down") p.w_down = index;
  else if (leaf == "experts/b_down") p.b_down = index;
  else if (leaf == "shared/w_gate") p.s_gate = index;
  else if (leaf == "shared/w_up") p.s_up = index;
  else if (leaf == "shared/b_up") p.s_b_up = index;
  else if (leaf == "shared/w_down") p.s_down = index;
  else if (leaf == "shared/b_down") p.s_b_down = index;
  else if (leaf == "shared/gate") p.s_w = index;
  else throw std::logic_error("set_moe_param: no MoE tensor " + leaf);
}

MoeParams MoeLayer::add_params(const std::string& prefix, float std, float std_out) {
  MoeParams p;
  for (const ParamSpec& s : moe_param_specs(cfg_, prefix, {ep_rank_, ep_size_, tp_rank_, tp_size_}, std, std_out))
    set_moe_param(p, s.name.substr(prefix.size()), (s.expert ? experts_ : dense_).add_spec(s));
  return p;
}

// ---- forward --------------------------------------------------------------------

void MoeLayer::forward(MoeCtxPtr& ctx, const MoeParams& p, int layer, float* out, const float* resid,
                       const float* x, int n_tokens, MoeStats* stats, int row0, int n_out) {
  const Times before = times_;
  double total_s = 0;
  {
    const MoeTimer whole(be_, total_s);
    if (!ctx) ctx.reset(new MoeCtx);
    MoeCtx& c = *ctx;
    c.free_dev();
    c.be = &be_;
    const int N = n_tokens;
    const int Tl = split_.local_len();
    if (N % Tl != 0) throw std::logic_error("MoeLayer: token rows are not whole sequences (or cp slices of them)");
    if (n_out < 0) n_out = N;
    if (row0 < 0 || row0 + n_out > N) throw std::logic_error("MoeLayer: output rows outside the token rows");
    const int S = N / Tl;
    c.N = N;

    route_tokens(c, p, x, S);
    // Capacity is decided on every cp rank's choices of the whole sequences.
    std::vector<char> keep;  // (N, k)
    const double dropped = apply_capacity(c, gather_choices(c, S), S, keep);
    const std::vector<int> rows_of = plan_dispatch(c, keep);  // (E)
    if (stats) add_stats(c, layer, S, rows_of, dropped, *stats);

    exchange_counts(c, rows_of);
    if (stats) stats->recv_load_max = std::max(stats->recv_load_max, double(c.R) / (double(N) * k_));
    float* send = dispatch_rows(c, x);  // (M, C)
    {
      const MoeTimer tm(be_, times_.expert_s);
      experts_fwd(c, p);
    }
    combine_fwd(c, send, out, resid, row0, n_out);
    const MoeTimer tm(be_, times_.expert_s);
    shared_fwd(c, p, x, out, row0, n_out);
  }
  times_.route_s += total_s - (times_.comm_s - before.comm_s) - (times_.expert_s - before.expert_s);
}

MoeBuffers<size_t> MoeLayer::buffers(const MoeCtx& c, int n_out) const {
  return moe_buffers<size_t>(cfg_, size_t(c.N), size_t(n_out), size_t(c.M), size_t(c.R), tp_size_);
}

// ---- backward -------------------------------------------------------------------

// rows (M, C): the dispatched rows' gradients in, which go to their experts;
// the gradients of those rows' inputs come back into it. Collective over ep.
void MoeLayer::expert_grads(MoeCtx& c, const MoeParams& p, float* rows) {
  const MoeBuffers<size_t> b = buffers(c);
  auto dev = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::scratch); };
  float* dyr = dev(b.xr);  // (R, C)
  float* dxr = dev(b.xr);  // (R, C)
  exchange_rows(c, rows, dyr, true);
  {
    const MoeTimer tm(be_, times_.expert_s);
    experts_bwd(c, p, dyr, dxr);
  }
  exchange_rows(c, dxr, rows, false);
  be_.free_bytes(dyr);
  be_.free_bytes(dxr);
}

void MoeLayer::backward(MoeCtxPtr& ctx, const MoeParams& p, float* dx, const float* dy, const float* x,
                        float loss_scale) {
  if (!ctx) throw std::logic_error("MoeLayer::backward without a forward");
  const Times before = times_;
  double total_s = 0;
  {
    const MoeTimer whole(be_, total_s);
    MoeCtx& c = *ctx;
    float* rows = be_.alloc(std::max<size_t>(buffers(c).send, 1), Mem::scratch);  // (M, C)
    const std::vector<float> dw = combine_bwd(c, dy, rows);  // (N, k)
    expert_grads(c, p, rows);
    // dx = the sum over each token's kept choices, in choice order, of its
    // rows' input gradients; then the router's part (router_bwd).
    be_.combine_rows(dx, rows, c.d_row, nullptr, c.N, k_, C_);
    be_.free_bytes(rows);
    router_bwd(c, p, dw, dx, x, loss_scale);
    const MoeTimer tm(be_, times_.expert_s);
    shared_bwd(c, p, dx, dy, x);
  }
  ctx.reset();
  times_.route_s += total_s - (times_.comm_s - before.comm_s) - (times_.expert_s - before.expert_s);
}

}  // namespace pentad
