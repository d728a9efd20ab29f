// The MoE router (see moe.hpp), on the host: logits = x Wr^T, softmax,
// top-k, the per-sequence capacity decision (with cp, on every cp rank's
// choices of the whole sequence), the load-balancing statistics, and the
// router's backward. Load-balancing loss of one sequence s (T tokens, k
// choices each): aux_s = E * sum_e f_e P_e, f_e = (choices of e) / (T k)
// (before dropping, no gradient), P_e = mean over the T tokens of softmax_e.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "comm/comm.hpp"
#include "parallel/ep/moe.hpp"
#include "parallel/ep/moe_ctx.hpp"

namespace pentad {
namespace {

// Where token row r of cp rank q sits: sequence b, position t of the
// (S, T) micro-batch, from the chunk-major (n_chunks, S, m) row order.
size_t global_row(const CpSplit& split, int S, int q, int r) {
  const int cl = split.chunk_len();
  const int ch = r / (S * cl), b = (r / cl) % S;
  return size_t(b) * split.seq_len + size_t(split.chunk_start(q, ch) + r % cl);
}

}  // namespace

// probs (N, E): logits in, softmax out, in place; lse (N) their log-sum-exp.
void softmax_rows(float* probs, float* lse, int N, int E) {
  for (int t = 0; t < N; ++t) {
    float* pr = probs + size_t(t) * E;
    const float mx = *std::max_element(pr, pr + E);
    double s = 0;
    for (int e = 0; e < E; ++e) s += std::exp(double(pr[e]) - mx);
    lse[size_t(t)] = float(mx + std::log(s));
    for (int e = 0; e < E; ++e) pr[e] = float(std::exp(double(pr[e]) - mx) / s);
  }
}

// Top-k of each row of probs (N, E): larger probability first, lower expert
// index on ties. idx, w (N, k); z (N) the chosen mass, which divides the
// weights when renormalize (else they are the raw probabilities).
void top_k_rows(const float* probs, int N, int E, int k, bool renormalize, int* idx, float* w, float* z) {
  std::vector<int> order(static_cast<size_t>(E));
  for (int t = 0; t < N; ++t) {
    const float* pr = probs + size_t(t) * E;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [pr](int a, int b) { return pr[a] > pr[b] || (pr[a] == pr[b] && a < b); });
    double zsum = 0;
    for (int j = 0; j < k; ++j) zsum += pr[order[size_t(j)]];
    if (renormalize) z[size_t(t)] = float(zsum);
    for (int j = 0; j < k; ++j) {
      const int e = order[size_t(j)];
      idx[size_t(t) * k + j] = e;
      w[size_t(t) * k + j] = renormalize ? float(pr[e] / zsum) : pr[e];
    }
  }
}

void MoeLayer::route_tokens(MoeCtx& c, const MoeParams& p, const float* x, int n_seq) {
  const int N = c.N, E = E_, k = k_, C = C_;
  // Router logits (N, E) and softmax, on the host.
  float* logits_dev = be_.alloc(buffers(c).logits, Mem::scratch);  // (N, E)
  be_.gemm(false, true, N, E, C, 1.0f, x, C, dense_.param(p.router), C, 0.0f, logits_dev, E);
  c.probs.resize(size_t(N) * E);
  be_.to_host(c.probs.data(), logits_dev, c.probs.size() * sizeof(float));
  be_.free_bytes(logits_dev);
  c.lse.resize(size_t(N));
  softmax_rows(c.probs.data(), c.lse.data(), N, E);

  c.idx.resize(size_t(N) * k);
  c.w.resize(size_t(N) * k);
  c.z.assign(size_t(N), 1.0f);
  top_k_rows(c.probs.data(), N, E, k, cfg_.renormalizes_top_k(), c.idx.data(), c.w.data(), c.z.data());

  const int cl = split_.chunk_len();
  c.seq.resize(size_t(N));
  for (int r = 0; r < N; ++r) c.seq[size_t(r)] = (r / cl) % n_seq;
}

// Collective over cp (when the layer has one).
std::vector<int> MoeLayer::gather_choices(const MoeCtx& c, int n_seq) {
  const int N = c.N, k = k_, P_cp = split_.cp;
  std::vector<int> gidx(size_t(n_seq) * T_ * k);  // (S, T, k)
  std::vector<int> all;                           // (cp, N, k)
  const int* src = c.idx.data();
  if (cp_) {
    const MoeTimer tm(be_, times_.comm_s);
    all.resize(size_t(P_cp) * N * k);
    cp_->allgather_host(c.idx.data(), all.data(), N * k);
    src = all.data();
  }
  for (int q = 0; q < P_cp; ++q)
    for (int r = 0; r < N; ++r)
      std::copy_n(src + (size_t(q) * N + r) * k, k, gidx.data() + global_row(split_, n_seq, q, r) * k);
  return gidx;
}

double MoeLayer::apply_capacity(MoeCtx& c, const std::vector<int>& gidx, int n_seq,
                                std::vector<char>& keep) const {
  const int N = c.N, E = E_, k = k_, S = n_seq;
  // Capacity per sequence; first choices of every token are served before
  // second choices, tokens in order within a choice slot.
  const long cap = cfg_.dropless ? long(T_) * k : long(std::ceil(double(cfg_.capacity_factor) * T_ * k / E));
  c.f.assign(size_t(S) * E, 0.0f);
  std::vector<long> kept(static_cast<size_t>(E));
  std::vector<char> gkeep(size_t(S) * T_ * k, 0);  // (S, T, k)
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
  const int me_cp = cp_ ? cp_->rank() : 0;
  keep.assign(size_t(N) * k, 0);
  double dropped = 0;
  for (int r = 0; r < N; ++r)
    for (int j = 0; j < k; ++j) {
      keep[size_t(r) * k + j] = gkeep[global_row(split_, S, me_cp, r) * k + j];
      dropped += keep[size_t(r) * k + j] ? 0 : 1;
    }
  return dropped;
}

void MoeLayer::add_stats(const MoeCtx& c, int layer, int n_seq, const std::vector<int>& rows_of,
                         double dropped, MoeStats& stats) const {
  const int N = c.N, E = E_, k = k_, S = n_seq;
  // aux_s is linear in P_e: this rank adds its tokens' share.
  std::vector<double> Psum(size_t(S) * E, 0.0);  // (S, E)
  for (int r = 0; r < N; ++r)
    for (int e = 0; e < E; ++e) Psum[size_t(c.seq[size_t(r)]) * E + e] += c.probs[size_t(r) * E + e];
  double aux = 0;
  for (int s = 0; s < S; ++s)
    for (int e = 0; e < E; ++e) aux += double(E) * c.f[size_t(s) * E + e] * (Psum[size_t(s) * E + e] / T_);
  stats.aux_sum += aux;
  for (int t = 0; t < N; ++t) stats.z_sum += double(c.lse[size_t(t)]) * c.lse[size_t(t)];
  stats.assigned += double(N) * k;
  stats.dropped += dropped;
  for (int e = 0; e < E; ++e) stats.per_expert[size_t(layer) * E + e] += rows_of[size_t(e)];
}

// Weights -> probabilities -> logits, plus the auxiliary losses; dx (the
// gradient through the experts) gets the router's part added.
void MoeLayer::router_bwd(const MoeCtx& c, const MoeParams& p, const std::vector<float>& dw, float* dx,
                          const float* x, float loss_scale) {
  const int N = c.N, E = E_, k = k_, C = C_;
  const double aux_w = double(cfg_.aux_loss_coef) * loss_scale * T_;  // one sequence's aux_s
  const double z_w = double(cfg_.z_loss_coef) * loss_scale;            // one token's lse^2
  std::vector<float> dlog(size_t(N) * E);  // (N, E)
  std::vector<double> dp(static_cast<size_t>(E));
  for (int t = 0; t < N; ++t) {
    const float* pr = c.probs.data() + size_t(t) * E;
    std::fill(dp.begin(), dp.end(), 0.0);
    if (cfg_.renormalizes_top_k()) {  // w_j = p_j / z, z the chosen mass
      double s = 0;
      for (int j = 0; j < k; ++j) s += double(dw[size_t(t) * k + j]) * c.w[size_t(t) * k + j];
      for (int j = 0; j < k; ++j)
        dp[size_t(c.idx[size_t(t) * k + j])] += (dw[size_t(t) * k + j] - s) / c.z[size_t(t)];
    } else {
      for (int j = 0; j < k; ++j) dp[size_t(c.idx[size_t(t) * k + j])] += dw[size_t(t) * k + j];
    }
    // d aux_s / d p_te = E * f_e / T.
    const float* f = c.f.data() + size_t(c.seq[size_t(t)]) * E;
    for (int e = 0; e < E; ++e) dp[size_t(e)] += aux_w * E * f[e] / T_;
    double pdp = 0;
    for (int e = 0; e < E; ++e) pdp += pr[e] * dp[size_t(e)];
    const double zg = 2.0 * z_w * c.lse[size_t(t)];
    for (int e = 0; e < E; ++e) dlog[size_t(t) * E + e] = float(pr[e] * (dp[size_t(e)] - pdp) + zg * pr[e]);
  }
  float* dl = be_.alloc(buffers(c).logits, Mem::scratch);  // (N, E)
  be_.from_host(dl, dlog.data(), dlog.size() * sizeof(float));
  be_.gemm(false, false, N, C, E, 1.0f, dl, E, dense_.param(p.router), C, 1.0f, dx, C);
  be_.gemm(true, false, E, C, N, 1.0f, dl, E, x, C, 1.0f, dense_.grad(p.router), C);
  be_.free_bytes(dl);
}

}  // namespace pentad
