// MoE dispatch and combine (see moe.hpp): the order of the dispatched rows
// (by expert, then token, then choice slot, so the rows an expert sees are
// the same whatever the layout), the counts exchange and the rows' ep
// all-to-all, the weighted combine of the expert outputs, and the combine's
// backward. The permutation and the combine run on the host.
#include <algorithm>
#include <numeric>

#include "comm/comm.hpp"
#include "parallel/ep/moe.hpp"
#include "parallel/ep/moe_ctx.hpp"

namespace pentad {

std::vector<int> MoeLayer::plan_dispatch(MoeCtx& c, const std::vector<char>& keep) const {
  const int N = c.N, E = E_, k = k_;
  c.row.assign(size_t(N) * k, -1);
  std::vector<int> rows_of(size_t(E), 0);  // (E) kept rows per expert
  for (int i = 0; i < N * k; ++i)
    if (keep[size_t(i)]) ++rows_of[size_t(c.idx[size_t(i)])];
  std::vector<int> next(size_t(E), 0);  // the next row of each expert, from its first
  std::exclusive_scan(rows_of.begin(), rows_of.end(), next.begin(), 0);
  c.M = std::accumulate(rows_of.begin(), rows_of.end(), 0);
  c.row_token.assign(size_t(c.M), 0);
  c.row_choice.assign(size_t(c.M), 0);
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < k; ++j) {
      const int i = t * k + j;
      if (!keep[size_t(i)]) continue;
      const int m = next[size_t(c.idx[size_t(i)])]++;
      c.row[size_t(i)] = m;
      c.row_token[size_t(m)] = t;
      c.row_choice[size_t(m)] = i;
    }
  return rows_of;
}

// Rows per (source ep rank, local expert) this rank will receive, and the
// element counts of both directions. Collective over ep.
void MoeLayer::exchange_counts(MoeCtx& c, const std::vector<int>& rows_of) {
  const int P = ep_size_, El = E_local_, C = C_;
  c.recv_seg.assign(size_t(P) * El, 0);
  if (P > 1) {
    const MoeTimer tm(be_, times_.comm_s);
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
}

// to_experts: src (M, C) in dispatch order -> dst (R, C) received rows;
// else the reverse. Collective over ep (a copy without ep).
void MoeLayer::exchange_rows(const MoeCtx& c, const float* src, float* dst, bool to_experts) {
  const MoeTimer tm(be_, times_.comm_s);
  if (ep_size_ > 1) {
    if (to_experts)
      ep_->alltoallv(src, c.send_counts, dst, c.recv_counts);
    else
      ep_->alltoallv(src, c.recv_counts, dst, c.send_counts);
  } else {
    be_.copy_bytes(dst, src, size_t(c.M) * C_ * sizeof(float));
  }
}

// Sends the rows of x (N, C) in dispatch order to their experts' ranks:
// c.xr (R, C) gets the received rows. Returns the (M, C) send buffer, which
// combine_fwd reuses for the way back and frees. Collective over ep.
float* MoeLayer::dispatch_rows(MoeCtx& c, const float* x) {
  const int C = C_;
  std::vector<float> xh(size_t(c.N) * C), xs(size_t(c.M) * C);  // (N, C), (M, C)
  be_.to_host(xh.data(), x, xh.size() * sizeof(float));
  for (int m = 0; m < c.M; ++m)
    std::copy_n(xh.data() + size_t(c.row_token[size_t(m)]) * C, C, xs.data() + size_t(m) * C);
  auto dev = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::activations); };
  const MoeBuffers<size_t> b = buffers(c);
  float* send = dev(b.send);  // (M, C)
  be_.from_host(send, xs.data(), xs.size() * sizeof(float));
  c.xr = dev(b.xr);  // (R, C)
  exchange_rows(c, send, c.xr, true);
  return send;
}

// Outputs back in dispatch order (kept in c.yb for backward), then
// out = resid + the weighted sum, for the output rows this rank keeps
// [row0, row0 + n_out) (sp: its tp rank's rows). Collective over ep.
void MoeLayer::combine_fwd(MoeCtx& c, float* send, float* out, const float* resid, int row0, int n_out) {
  const int k = k_, C = C_;
  exchange_rows(c, c.y, send, false);
  c.yb.resize(size_t(c.M) * C);
  be_.to_host(c.yb.data(), send, c.yb.size() * sizeof(float));
  be_.free_bytes(send);
  be_.free_bytes(c.y);
  c.y = nullptr;
  std::vector<float> comb(size_t(n_out) * C, 0.0f);  // (n_out, C)
  for (int t = row0; t < row0 + n_out; ++t)
    for (int j = 0; j < k; ++j) {
      const int m = c.row[size_t(t) * k + j];
      if (m < 0) continue;
      const float wt = c.w[size_t(t) * k + j];
      const float* yr = c.yb.data() + size_t(m) * C;
      float* o = comb.data() + size_t(t - row0) * C;
      for (int i = 0; i < C; ++i) o[i] += wt * yr[i];
    }
  float* tmp = be_.alloc(buffers(c, n_out).combine, Mem::scratch);  // (n_out, C)
  be_.from_host(tmp, comb.data(), comb.size() * sizeof(float));
  be_.add(out, resid, tmp, size_t(n_out) * C);
  be_.free_bytes(tmp);
}

// Combine backward from dyh (N, C): each dispatched row's gradient dys
// (M, C) and each combine weight's gradient dw (N, k).
void MoeLayer::combine_bwd(const MoeCtx& c, const std::vector<float>& dyh, std::vector<float>& dys,
                           std::vector<float>& dw) const {
  const int C = C_;
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
}

// Gradient of x through the experts, dxh (N, C) from the rows' dxs (M, C):
// the sum over the token's kept choices, in choice order.
void MoeLayer::gather_dx(const MoeCtx& c, const std::vector<float>& dxs, std::vector<float>& dxh) const {
  const int N = c.N, k = k_, C = C_;
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < k; ++j) {
      const int m = c.row[size_t(t) * k + j];
      if (m < 0) continue;
      const float* g = dxs.data() + size_t(m) * C;
      float* o = dxh.data() + size_t(t) * C;
      for (int q = 0; q < C; ++q) o[q] += g[q];
    }
}

}  // namespace pentad
