// MoE dispatch and combine (see moe.hpp): the order of the dispatched rows
// (by expert, then token, then choice slot, so the rows an expert sees are
// the same whatever the layout), the counts exchange and the rows' ep
// all-to-all, the weighted combine of the expert outputs, and the combine's
// backward. The order is planned on the host (index lists); the rows are
// moved on the backend (gather_rows, combine_rows, combine_rows_bwd), the
// lists uploaded once per forward and kept for the backward.
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
// combine_fwd reuses for the way back and keeps (c.yb). Uploads the
// context's index lists. Collective over ep.
float* MoeLayer::dispatch_rows(MoeCtx& c, const float* x) {
  static_assert(sizeof(int) == sizeof(int32_t));
  c.d_row_token = upload_kept(be_, c.row_token);
  c.d_row_choice = upload_kept(be_, c.row_choice);
  c.d_row = upload_kept(be_, c.row);
  c.d_w = upload_kept(be_, c.w);
  auto dev = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::activations); };
  const MoeBuffers<size_t> b = buffers(c);
  float* send = dev(b.send);  // (M, C)
  be_.gather_rows(send, x, c.d_row_token, c.M, C_);
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
  c.yb = send;
  be_.free_bytes(c.y);
  c.y = nullptr;
  float* tmp = be_.alloc(buffers(c, n_out).combine, Mem::scratch);  // (n_out, C)
  be_.combine_rows(tmp, c.yb, c.d_row + size_t(row0) * k, c.d_w + size_t(row0) * k, n_out, k, C);
  be_.add(out, resid, tmp, size_t(n_out) * C);
  be_.free_bytes(tmp);
}

// Combine backward from dy (N, C): each dispatched row's gradient into dys
// (M, C), and each combine weight's gradient, returned (N, k) on the host
// (0 for a dropped choice).
std::vector<float> MoeLayer::combine_bwd(const MoeCtx& c, const float* dy, float* dys) {
  const size_t nk = size_t(c.N) * k_;
  float* dw = be_.alloc(std::max<size_t>(nk, 1), Mem::scratch);  // (N, k)
  be_.fill(dw, 0.0f, nk);
  be_.combine_rows_bwd(dys, dw, dy, c.yb, c.d_row_token, c.d_row_choice, c.d_w, c.M, C_);
  std::vector<float> dwh(nk);
  be_.to_host(dwh.data(), dw, nk * sizeof(float));
  be_.free_bytes(dw);
  return dwh;
}

}  // namespace pentad
