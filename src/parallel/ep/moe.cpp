// The MoE layer (see moe.hpp). Routing, dispatch order and the combine run
// on the host (small (N, E) arrays and index lists); the expert matmuls run
// on the backend, one gemm per (source rank, local expert) segment of the
// received rows. Order of the dispatched rows: by expert, then token, then
// choice slot, so the rows an expert sees are the same whatever the layout.
// Load-balancing loss of one sequence s (T tokens, k choices each):
//   aux_s = E * sum_e f_e P_e,  f_e = (choices of e) / (T k) (before
//   dropping, no gradient), P_e = mean over the T tokens of softmax_e;
// the objective adds aux_loss_coef * mean over the global batch's sequences
// of aux_s per MoE block, and z_loss_coef * mean over tokens of lse^2.
#include "parallel/ep/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "comm/comm.hpp"

#include <chrono>

namespace pentad {
namespace {

// Adds the wall time of a scope to a counter (the backend is synchronised
// at the end, so device work is charged to the scope that queued it).
struct Timed {
  Timed(Backend& be, double& acc) : be_(be), acc_(acc), t0_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    be_.synchronize();
    acc_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  Backend& be_;
  double& acc_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

struct MoeCtx {
  Backend* be = nullptr;
  int N = 0, M = 0, R = 0;          // tokens, dispatched rows (sent), received rows
  std::vector<float> probs;         // (N, E) softmax of the router logits
  std::vector<float> lse;           // (N)
  std::vector<int> idx;             // (N, k) chosen experts
  std::vector<float> w;             // (N, k) combine weights
  std::vector<float> z;             // (N) sum of the chosen probabilities (k > 1)
  std::vector<int> row;             // (N, k) dispatched row of a choice, -1 if dropped
  std::vector<int> row_token;       // (M) token of each dispatched row
  std::vector<int> row_choice;      // (M) t*k + j of each dispatched row
  std::vector<float> f;             // (n_seq, E) choice fraction per (whole) sequence
  std::vector<int> seq;             // (N) sequence of each token row
  std::vector<int> send_counts, recv_counts;  // per ep rank, elements (rows * C)
  std::vector<int> recv_seg;        // (ep, E_local) rows received per source and local expert
  std::vector<float> yb;            // (M, C) expert outputs back in dispatch order (host)
  float* xr = nullptr;              // (R, C) received rows
  float* h = nullptr;               // (R, F) GELU input / SwiGLU gate
  float* u = nullptr;               // (R, F) SwiGLU up
  float* a = nullptr;               // (R, F) activation
  float* y = nullptr;               // (R, C) expert outputs
  void free_dev() {
    for (float** p : {&xr, &h, &u, &a, &y}) {
      if (*p) be->free_bytes(*p);
      *p = nullptr;
    }
  }
};

void MoeCtxDeleter::operator()(MoeCtx* c) const {
  if (c) c->free_dev();
  delete c;
}

MoeLayer::MoeLayer(const ModelConfig& cfg, Backend& be, ParamStore& dense, ParamStore& experts, Comm* ep,
                   Comm* cp, CpLayout cp_layout)
    : cfg_(cfg), be_(be), dense_(dense), experts_(experts), ep_(ep), cp_(cp && cp->size() > 1 ? cp : nullptr) {
  split_ = CpSplit{cfg.seq_len, cp_ ? cp_->size() : 1, cp_ ? cp_layout : CpLayout::contiguous};
  if (ep_) {
    ep_size_ = ep_->size();
    ep_rank_ = ep_->rank();
  }
  E_ = cfg.n_experts;
  if (E_ <= 0 || E_ % ep_size_ != 0) throw std::invalid_argument("MoeLayer: n_experts must be a positive multiple of ep");
  E_local_ = E_ / ep_size_;
  k_ = cfg.top_k;
  C_ = cfg.d_model;
  F_ = cfg.d_ff;
  T_ = cfg.seq_len;
  gpt2_ = cfg.family == Family::gpt2;
}

MoeParams MoeLayer::add_params(const std::string& prefix, float std, float std_out) {
  MoeParams p;
  const int64_t E = E_, El = E_local_, e0 = int64_t(ep_rank_) * El, C = C_, F = F_;
  p.router = dense_.add(prefix + "router/w", {E, C}, Init::normal, std, true);
  const std::string x = prefix + "experts/";
  auto blk = [&](const std::string& name, std::vector<int64_t> rest, Init init, float s, bool decay) {
    std::vector<int64_t> shape{E}, start{e0}, local{El};
    for (int64_t d : rest) {
      shape.push_back(d);
      start.push_back(0);
      local.push_back(d);
    }
    return experts_.add_block(x + name, shape, start, local, init, s, decay);
  };
  if (!gpt2_) p.w_gate = blk("w_gate", {F, C}, Init::normal, std, true);
  p.w_up = blk("w_up", {F, C}, Init::normal, std, true);
  if (gpt2_) p.b_up = blk("b_up", {F}, Init::zeros, 0, false);
  p.w_down = blk("w_down", {C, F}, Init::normal, std_out, true);
  if (gpt2_) p.b_down = blk("b_down", {C}, Init::zeros, 0, false);
  return p;
}

// ---- forward --------------------------------------------------------------------

void MoeLayer::forward(MoeCtxPtr& ctx, const MoeParams& p, int layer, float* out, const float* resid,
                       const float* x, int n_tokens, MoeStats* stats, int row0, int n_out) {
  const Times before = times_;
  double total_s = 0;
  {
  const Timed whole(be_, total_s);
  if (!ctx) ctx.reset(new MoeCtx);
  MoeCtx& c = *ctx;
  c.free_dev();
  c.be = &be_;
  const int N = n_tokens, E = E_, k = k_, C = C_;
  const int Tl = split_.local_len();
  if (N % Tl != 0) throw std::logic_error("MoeLayer: token rows are not whole sequences (or cp slices of them)");
  if (n_out < 0) n_out = N;
  if (row0 < 0 || row0 + n_out > N) throw std::logic_error("MoeLayer: output rows outside the token rows");
  const int S = N / Tl;
  c.N = N;

  // Router logits (N, E) and softmax, on the host.
  float* logits_dev = be_.alloc(size_t(N) * E, Mem::scratch);
  be_.gemm(false, true, N, E, C, 1.0f, x, C, dense_.param(p.router), C, 0.0f, logits_dev, E);
  c.probs.resize(size_t(N) * E);
  be_.to_host(c.probs.data(), logits_dev, c.probs.size() * sizeof(float));
  be_.free_bytes(logits_dev);
  c.lse.resize(size_t(N));
  for (int t = 0; t < N; ++t) {
    float* pr = c.probs.data() + size_t(t) * E;
    const float mx = *std::max_element(pr, pr + E);
    double s = 0;
    for (int e = 0; e < E; ++e) s += std::exp(double(pr[e]) - mx);
    c.lse[size_t(t)] = float(mx + std::log(s));
    for (int e = 0; e < E; ++e) pr[e] = float(std::exp(double(pr[e]) - mx) / s);
  }

  // Top-k: larger probability first, lower expert index on ties.
  c.idx.resize(size_t(N) * k);
  c.w.resize(size_t(N) * k);
  c.z.assign(size_t(N), 1.0f);
  std::vector<int> order(static_cast<size_t>(E));
  for (int t = 0; t < N; ++t) {
    const float* pr = c.probs.data() + size_t(t) * E;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [pr](int a, int b) { return pr[a] > pr[b] || (pr[a] == pr[b] && a < b); });
    double zsum = 0;
    for (int j = 0; j < k; ++j) zsum += pr[order[size_t(j)]];
    if (k > 1) c.z[size_t(t)] = float(zsum);
    for (int j = 0; j < k; ++j) {
      const int e = order[size_t(j)];
      c.idx[size_t(t) * k + j] = e;
      c.w[size_t(t) * k + j] = k > 1 ? float(pr[e] / zsum) : pr[e];
    }
  }

  // Where token row r of cp rank q sits: sequence b, position t of the
  // (S, T) micro-batch, from the chunk-major (n_chunks, S, m) row order.
  const int cl = split_.chunk_len();
  auto global_row = [&](int q, int r) {
    const int ch = r / (S * cl), b = (r / cl) % S;
    return size_t(b) * T_ + size_t(split_.chunk_start(q, ch) + r % cl);
  };
  c.seq.resize(size_t(N));
  for (int r = 0; r < N; ++r) c.seq[size_t(r)] = (r / cl) % S;
  // Every rank's choices of the whole sequences, in global token order.
  const int P_cp = split_.cp, me_cp = cp_ ? cp_->rank() : 0;
  std::vector<int> gidx(size_t(S) * T_ * k);
  {
    std::vector<int> all;
    const int* src = c.idx.data();
    if (cp_) {
      const Timed tm(be_, times_.comm_s);
      all.resize(size_t(P_cp) * N * k);
      cp_->allgather_host(c.idx.data(), all.data(), N * k);
      src = all.data();
    }
    for (int q = 0; q < P_cp; ++q)
      for (int r = 0; r < N; ++r)
        std::copy_n(src + (size_t(q) * N + r) * k, k, gidx.data() + global_row(q, r) * k);
  }

  // Capacity per sequence; first choices of every token are served before
  // second choices, tokens in order within a choice slot.
  const long cap = cfg_.dropless ? long(T_) * k : long(std::ceil(double(cfg_.capacity_factor) * T_ * k / E));
  c.f.assign(size_t(S) * E, 0.0f);
  std::vector<long> kept(static_cast<size_t>(E));
  std::vector<char> gkeep(size_t(S) * T_ * k, 0);
  for (int s = 0; s < S; ++s) {
    std::fill(kept.begin(), kept.end(), 0);
    float* f = c.f.data() + size_t(s) * E;
    for (int j = 0; j < k; ++j)
      for (int t = s * T_; t < (s + 1) * T_; ++t) {
        const int e = gidx[size_t(t) * k + j];
        f[e] += 1.0f;
        if (kept[size_t(e)] < cap) {
          ++kept[size_t(e)];
          gkeep[size_t(t) * k + j] = 1;
        }
      }
    for (int e = 0; e < E; ++e) f[e] /= float(T_ * k);
  }
  // This rank's tokens' part of the decision.
  c.row.assign(size_t(N) * k, -1);
  std::vector<char> keep(size_t(N) * k, 0);
  double dropped = 0;
  for (int r = 0; r < N; ++r)
    for (int j = 0; j < k; ++j) {
      keep[size_t(r) * k + j] = gkeep[global_row(me_cp, r) * k + j];
      dropped += keep[size_t(r) * k + j] ? 0 : 1;
    }

  // Dispatch order: by expert, then token, then choice.
  std::vector<int> rows_of(size_t(E), 0);
  for (int i = 0; i < N * k; ++i)
    if (keep[size_t(i)]) ++rows_of[size_t(c.idx[size_t(i)])];
  std::vector<int> first(size_t(E), 0);
  std::exclusive_scan(rows_of.begin(), rows_of.end(), first.begin(), 0);
  c.M = std::accumulate(rows_of.begin(), rows_of.end(), 0);
  c.row_token.assign(size_t(c.M), 0);
  c.row_choice.assign(size_t(c.M), 0);
  {
    std::vector<int> next = first;
    for (int t = 0; t < N; ++t)
      for (int j = 0; j < k; ++j) {
        const int i = t * k + j;
        if (!keep[size_t(i)]) continue;
        const int m = next[size_t(c.idx[size_t(i)])]++;
        c.row[size_t(i)] = m;
        c.row_token[size_t(m)] = t;
        c.row_choice[size_t(m)] = i;
      }
  }

  if (stats) {
    // aux_s is linear in P_e: this rank adds its tokens' share.
    std::vector<double> Psum(size_t(S) * E, 0.0);
    for (int r = 0; r < N; ++r)
      for (int e = 0; e < E; ++e) Psum[size_t(c.seq[size_t(r)]) * E + e] += c.probs[size_t(r) * E + e];
    double aux = 0;
    for (int s = 0; s < S; ++s)
      for (int e = 0; e < E; ++e) aux += double(E) * c.f[size_t(s) * E + e] * (Psum[size_t(s) * E + e] / T_);
    stats->aux_sum += aux;
    for (int t = 0; t < N; ++t) stats->z_sum += double(c.lse[size_t(t)]) * c.lse[size_t(t)];
    stats->assigned += double(N) * k;
    stats->dropped += dropped;
    for (int e = 0; e < E; ++e) stats->per_expert[size_t(layer) * E + e] += rows_of[size_t(e)];
  }

  // Counts first: rows per (destination, local expert), then the rows.
  const int P = ep_size_, El = E_local_;
  c.recv_seg.assign(size_t(P) * El, 0);
  if (P > 1) {
    const Timed tm(be_, times_.comm_s);
    ep_->alltoall_host(rows_of.data(), c.recv_seg.data(), El);
  } else {
    c.recv_seg = rows_of;
  }
  c.send_counts.assign(size_t(P), 0);
  c.recv_counts.assign(size_t(P), 0);
  for (int q = 0; q < P; ++q)
    for (int e = 0; e < El; ++e) {
      c.send_counts[size_t(q)] += rows_of[size_t(q) * El + e] * C;
      c.recv_counts[size_t(q)] += c.recv_seg[size_t(q) * El + e] * C;
    }
  c.R = std::accumulate(c.recv_seg.begin(), c.recv_seg.end(), 0);
  if (stats) stats->recv_load_max = std::max(stats->recv_load_max, double(c.R) / (double(N) * k));

  std::vector<float> xh(size_t(N) * C), xs(size_t(c.M) * C);
  be_.to_host(xh.data(), x, xh.size() * sizeof(float));
  for (int m = 0; m < c.M; ++m)
    std::copy_n(xh.data() + size_t(c.row_token[size_t(m)]) * C, C, xs.data() + size_t(m) * C);
  auto dev = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::activations); };
  float* send = dev(size_t(c.M) * C);
  be_.from_host(send, xs.data(), xs.size() * sizeof(float));
  c.xr = dev(size_t(c.R) * C);
  {
    const Timed tm(be_, times_.comm_s);
    if (P > 1)
      ep_->alltoallv(send, c.send_counts, c.xr, c.recv_counts);
    else
      be_.copy_bytes(c.xr, send, size_t(c.M) * C * sizeof(float));
  }
  {
    const Timed tm(be_, times_.expert_s);
    experts_fwd(c, p);
  }
  // Outputs back in dispatch order, then the weighted combine.
  {
    const Timed tm(be_, times_.comm_s);
    if (P > 1)
      ep_->alltoallv(c.y, c.recv_counts, send, c.send_counts);
    else
      be_.copy_bytes(send, c.y, size_t(c.M) * C * sizeof(float));
  }
  c.yb.resize(size_t(c.M) * C);
  be_.to_host(c.yb.data(), send, c.yb.size() * sizeof(float));
  be_.free_bytes(send);
  be_.free_bytes(c.y);
  c.y = nullptr;
  // Only the output rows this rank keeps (sp: its tp rank's rows).
  std::vector<float> comb(size_t(n_out) * C, 0.0f);
  for (int t = row0; t < row0 + n_out; ++t)
    for (int j = 0; j < k; ++j) {
      const int m = c.row[size_t(t) * k + j];
      if (m < 0) continue;
      const float wt = c.w[size_t(t) * k + j];
      const float* yr = c.yb.data() + size_t(m) * C;
      float* o = comb.data() + size_t(t - row0) * C;
      for (int i = 0; i < C; ++i) o[i] += wt * yr[i];
    }
  float* tmp = be_.alloc(size_t(n_out) * C, Mem::scratch);
  be_.from_host(tmp, comb.data(), comb.size() * sizeof(float));
  be_.add(out, resid, tmp, size_t(n_out) * C);
  be_.free_bytes(tmp);
  }
  times_.route_s += total_s - (times_.comm_s - before.comm_s) - (times_.expert_s - before.expert_s);
}

// Segments of the received rows: source rank q, local expert e.
template <class Fn>
static void for_segments(const std::vector<int>& recv_seg, int P, int El, Fn fn) {
  int r0 = 0;
  for (int q = 0; q < P; ++q)
    for (int e = 0; e < El; ++e) {
      const int n = recv_seg[size_t(q) * El + e];
      if (n > 0) fn(e, r0, n);
      r0 += n;
    }
}

void MoeLayer::experts_fwd(MoeCtx& c, const MoeParams& p) {
  const int C = C_, F = F_, R = c.R;
  auto dev = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::activations); };
  c.h = dev(size_t(R) * F);
  if (!gpt2_) c.u = dev(size_t(R) * F);
  c.a = dev(size_t(R) * F);
  c.y = dev(size_t(R) * C);
  const size_t FC = size_t(F) * C;
  for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
    const float* xr = c.xr + size_t(r0) * C;
    float* h = c.h + size_t(r0) * F;
    if (gpt2_) {
      be_.gemm(false, true, n, F, C, 1.0f, xr, C, experts_.param(p.w_up) + e * FC, C, 0.0f, h, F);
      be_.bias_add(h, experts_.param(p.b_up) + size_t(e) * F, n, F);
    } else {
      be_.gemm(false, true, n, F, C, 1.0f, xr, C, experts_.param(p.w_gate) + e * FC, C, 0.0f, h, F);
      be_.gemm(false, true, n, F, C, 1.0f, xr, C, experts_.param(p.w_up) + e * FC, C, 0.0f,
               c.u + size_t(r0) * F, F);
    }
  });
  if (gpt2_)
    be_.gelu_fwd(c.a, c.h, size_t(R) * F);
  else
    be_.swiglu_fwd(c.a, c.h, c.u, size_t(R) * F);
  for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
    float* y = c.y + size_t(r0) * C;
    be_.gemm(false, true, n, C, F, 1.0f, c.a + size_t(r0) * F, F, experts_.param(p.w_down) + e * FC, F,
             0.0f, y, C);
    if (gpt2_) be_.bias_add(y, experts_.param(p.b_down) + size_t(e) * C, n, C);
  });
}

// ---- backward -------------------------------------------------------------------

void MoeLayer::experts_bwd(MoeCtx& c, const MoeParams& p, const float* dyr, float* dxr) {
  const int C = C_, F = F_, R = c.R;
  const size_t FC = size_t(F) * C;
  float* da = be_.alloc(std::max<size_t>(size_t(R) * F, 1), Mem::scratch);
  float* dh = be_.alloc(std::max<size_t>(size_t(R) * F, 1), Mem::scratch);
  float* du = gpt2_ ? nullptr : be_.alloc(std::max<size_t>(size_t(R) * F, 1), Mem::scratch);
  for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
    const float* dy = dyr + size_t(r0) * C;
    be_.gemm(false, false, n, F, C, 1.0f, dy, C, experts_.param(p.w_down) + e * FC, F, 0.0f,
             da + size_t(r0) * F, F);
    be_.gemm(true, false, C, F, n, 1.0f, dy, C, c.a + size_t(r0) * F, F, 1.0f,
             experts_.grad(p.w_down) + e * FC, F);
    if (gpt2_) be_.bias_bwd(experts_.grad(p.b_down) + size_t(e) * C, dy, n, C);
  });
  if (gpt2_)
    be_.gelu_bwd(dh, da, c.h, size_t(R) * F);
  else
    be_.swiglu_bwd(dh, du, da, c.h, c.u, size_t(R) * F);
  for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
    const float* xr = c.xr + size_t(r0) * C;
    const float* g = dh + size_t(r0) * F;
    float* dx = dxr + size_t(r0) * C;
    if (gpt2_) {
      be_.gemm(false, false, n, C, F, 1.0f, g, F, experts_.param(p.w_up) + e * FC, C, 0.0f, dx, C);
      be_.gemm(true, false, F, C, n, 1.0f, g, F, xr, C, 1.0f, experts_.grad(p.w_up) + e * FC, C);
      be_.bias_bwd(experts_.grad(p.b_up) + size_t(e) * F, g, n, F);
    } else {
      const float* gu = du + size_t(r0) * F;
      be_.gemm(false, false, n, C, F, 1.0f, g, F, experts_.param(p.w_gate) + e * FC, C, 0.0f, dx, C);
      be_.gemm(false, false, n, C, F, 1.0f, gu, F, experts_.param(p.w_up) + e * FC, C, 1.0f, dx, C);
      be_.gemm(true, false, F, C, n, 1.0f, g, F, xr, C, 1.0f, experts_.grad(p.w_gate) + e * FC, C);
      be_.gemm(true, false, F, C, n, 1.0f, gu, F, xr, C, 1.0f, experts_.grad(p.w_up) + e * FC, C);
    }
  });
  be_.free_bytes(da);
  be_.free_bytes(dh);
  if (du) be_.free_bytes(du);
}

void MoeLayer::backward(MoeCtxPtr& ctx, const MoeParams& p, float* dx, const float* dy, const float* x,
                        float loss_scale) {
  if (!ctx) throw std::logic_error("MoeLayer::backward without a forward");
  const Times before = times_;
  double total_s = 0;
  {
  const Timed whole(be_, total_s);
  MoeCtx& c = *ctx;
  const int N = c.N, E = E_, k = k_, C = C_, P = ep_size_;
  std::vector<float> dyh(size_t(N) * C);
  be_.to_host(dyh.data(), dy, dyh.size() * sizeof(float));

  // Combine backward: each dispatched row's gradient, each weight's gradient.
  std::vector<float> dys(size_t(c.M) * C);
  std::vector<float> dw(size_t(N) * k, 0.0f);
  for (int m = 0; m < c.M; ++m) {
    const int t = c.row_token[size_t(m)], i = c.row_choice[size_t(m)];
    const float* g = dyh.data() + size_t(t) * C;
    const float* yr = c.yb.data() + size_t(m) * C;
    float* o = dys.data() + size_t(m) * C;
    const float wt = c.w[size_t(i)];
    double d = 0;
    for (int q = 0; q < C; ++q) {
      o[q] = wt * g[q];
      d += double(g[q]) * yr[q];
    }
    dw[size_t(i)] = float(d);
  }
  auto dev = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::scratch); };
  float* sendb = dev(size_t(c.M) * C);
  float* dyr = dev(size_t(c.R) * C);
  float* dxr = dev(size_t(c.R) * C);
  be_.from_host(sendb, dys.data(), dys.size() * sizeof(float));
  {
    const Timed tm(be_, times_.comm_s);
    if (P > 1)
      ep_->alltoallv(sendb, c.send_counts, dyr, c.recv_counts);
    else
      be_.copy_bytes(dyr, sendb, size_t(c.M) * C * sizeof(float));
  }
  {
    const Timed tm(be_, times_.expert_s);
    experts_bwd(c, p, dyr, dxr);
  }
  {
    const Timed tm(be_, times_.comm_s);
    if (P > 1)
      ep_->alltoallv(dxr, c.recv_counts, sendb, c.send_counts);
    else
      be_.copy_bytes(sendb, dxr, size_t(c.M) * C * sizeof(float));
  }
  std::vector<float> dxs(size_t(c.M) * C);
  be_.to_host(dxs.data(), sendb, dxs.size() * sizeof(float));
  be_.free_bytes(sendb);
  be_.free_bytes(dyr);
  be_.free_bytes(dxr);

  // Gradient of x through the experts: sum over the token's kept choices,
  // in choice order.
  std::vector<float> dxh(size_t(N) * C, 0.0f);
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < k; ++j) {
      const int m = c.row[size_t(t) * k + j];
      if (m < 0) continue;
      const float* g = dxs.data() + size_t(m) * C;
      float* o = dxh.data() + size_t(t) * C;
      for (int q = 0; q < C; ++q) o[q] += g[q];
    }

  // Router: weights -> probabilities -> logits, plus the auxiliary losses.
  const double aux_w = double(cfg_.aux_loss_coef) * loss_scale * T_;  // one sequence's aux_s
  const double z_w = double(cfg_.z_loss_coef) * loss_scale;            // one token's lse^2
  std::vector<float> dlog(size_t(N) * E);
  std::vector<double> dp(static_cast<size_t>(E));
  for (int t = 0; t < N; ++t) {
    const float* pr = c.probs.data() + size_t(t) * E;
    std::fill(dp.begin(), dp.end(), 0.0);
    if (k > 1) {
      double s = 0;
      for (int j = 0; j < k; ++j) s += double(dw[size_t(t) * k + j]) * c.w[size_t(t) * k + j];
      for (int j = 0; j < k; ++j)
        dp[size_t(c.idx[size_t(t) * k + j])] += (dw[size_t(t) * k + j] - s) / c.z[size_t(t)];
    } else {
      dp[size_t(c.idx[size_t(t)])] += dw[size_t(t)];
    }
    // d aux_s / d p_te = E * f_e / T.
    const float* f = c.f.data() + size_t(c.seq[size_t(t)]) * E;
    for (int e = 0; e < E; ++e) dp[size_t(e)] += aux_w * E * f[e] / T_;
    double pdp = 0;
    for (int e = 0; e < E; ++e) pdp += pr[e] * dp[size_t(e)];
    const double zg = 2.0 * z_w * c.lse[size_t(t)];
    for (int e = 0; e < E; ++e) dlog[size_t(t) * E + e] = float(pr[e] * (dp[size_t(e)] - pdp) + zg * pr[e]);
  }
  be_.from_host(dx, dxh.data(), dxh.size() * sizeof(float));
  float* dl = be_.alloc(size_t(N) * E, Mem::scratch);
  be_.from_host(dl, dlog.data(), dlog.size() * sizeof(float));
  be_.gemm(false, false, N, C, E, 1.0f, dl, E, dense_.param(p.router), C, 1.0f, dx, C);
  be_.gemm(true, false, E, C, N, 1.0f, dl, E, x, C, 1.0f, dense_.grad(p.router), C);
  be_.free_bytes(dl);
  }
  ctx.reset();
  times_.route_s += total_s - (times_.comm_s - before.comm_s) - (times_.expert_s - before.expert_s);
}

}  // namespace pentad
