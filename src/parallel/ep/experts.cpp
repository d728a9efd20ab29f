// The expert MLPs of the MoE layer (see moe.hpp) on the backend: GELU with
// biases for gpt2, SwiGLU for llama. The received rows (R, C) come grouped
// by (source ep rank, local expert); each such segment is one gemm with its
// expert's weights, so the rows an expert sees, and their order, are the
// same whatever the layout. With expert tp (parallel.expert_tp) this rank
// holds F = d_ff/tp columns of each expert: the down projection's output and
// the up projection's input gradient are partial sums, all-reduced over tp.
#include <algorithm>
#include <cmath>

#include "comm/comm.hpp"
#include "parallel/ep/moe.hpp"
#include "parallel/ep/moe_ctx.hpp"

namespace pentad {
namespace {

// Segments of the received rows: source rank q, local expert e.
template <class Fn>
void for_segments(const std::vector<int>& recv_seg, int P, int El, Fn fn) {
  int r0 = 0;
  for (int q = 0; q < P; ++q)
    for (int e = 0; e < El; ++e) {
      const int n = recv_seg[size_t(q) * El + e];
      if (n > 0) fn(e, r0, n);
      r0 += n;
    }
}

}  // namespace

// c.h, c.u, c.a (R, F) and c.y (R, C) from the received rows c.xr (R, C).
void MoeLayer::experts_fwd(MoeCtx& c, const MoeParams& p) {
  const int C = C_, F = F_, R = c.R;
  const MoeBuffers<size_t> b = buffers(c);
  auto dev = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::activations); };
  c.h = dev(b.hidden);  // (R, F)
  if (!gpt2_) c.u = dev(b.hidden);
  c.a = dev(b.hidden);
  c.y = dev(b.y);  // (R, C)
  const size_t FC = size_t(F) * C;
  for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
    const float* xr = c.xr + size_t(r0) * C;
    float* h = c.h + size_t(r0) * F;
    if (gpt2_) {  // h = x w_up^T + b_up and a = GELU(h) in one op (cuBLASLt epilogue on CUDA)
      be_.linear_fwd(h, xr, experts_.param(p.w_up) + e * FC, experts_.param(p.b_up) + size_t(e) * F, n, F, C,
                     0.0f, c.a + size_t(r0) * F);
    } else {
      be_.gemm(false, true, n, F, C, 1.0f, xr, C, experts_.param(p.w_gate) + e * FC, C, 0.0f, h, F);
      be_.gemm(false, true, n, F, C, 1.0f, xr, C, experts_.param(p.w_up) + e * FC, C, 0.0f,
               c.u + size_t(r0) * F, F);
    }
  });
  if (!gpt2_) be_.glu_fwd(c.a, c.h, c.u, size_t(R) * F, act_);
  for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
    be_.gemm(false, true, n, C, F, 1.0f, c.a + size_t(r0) * F, F, experts_.param(p.w_down) + e * FC, F,
             0.0f, c.y + size_t(r0) * C, C);
  });
  // Expert tp: each rank's product covers its F columns; the sum over tp
  // is the output (every tp rank routed the same rows), then the bias once.
  if (tp_) tp_->allreduce_sum(c.y, size_t(R) * C);
  if (gpt2_)
    for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
      be_.bias_add(c.y + size_t(r0) * C, experts_.param(p.b_down) + size_t(e) * C, n, C);
    });
}

// dxr (R, C) WRITTEN from dyr (R, C); the expert gradients accumulate.
void MoeLayer::experts_bwd(MoeCtx& c, const MoeParams& p, const float* dyr, float* dxr) {
  const int C = C_, F = F_, R = c.R;
  const size_t FC = size_t(F) * C;
  const size_t n_hidden = std::max<size_t>(buffers(c).hidden, 1);
  // GPT-2 goes from dL/d(expert output) to dL/dh in one op per expert
  // (linear_bwd_input_gelu); the gated unit keeps dL/da.
  float* da = gpt2_ ? nullptr : be_.alloc(n_hidden, Mem::scratch);  // (R, F)
  float* dh = be_.alloc(n_hidden, Mem::scratch);                    // (R, F)
  float* du = gpt2_ ? nullptr : be_.alloc(n_hidden, Mem::scratch);  // (R, F)
  for_segments(c.recv_seg, ep_size_, E_local_, [&](int e, int r0, int n) {
    const float* dy = dyr + size_t(r0) * C;
    if (gpt2_)
      be_.linear_bwd_input_gelu(dh + size_t(r0) * F, dy, experts_.param(p.w_down) + e * FC, c.h + size_t(r0) * F,
                                n, C, F);
    else
      be_.gemm(false, false, n, F, C, 1.0f, dy, C, experts_.param(p.w_down) + e * FC, F, 0.0f,
               da + size_t(r0) * F, F);
    be_.gemm(true, false, C, F, n, 1.0f, dy, C, c.a + size_t(r0) * F, F, 1.0f,
             experts_.grad(p.w_down) + e * FC, F);
    if (gpt2_) be_.bias_bwd(experts_.grad(p.b_down) + size_t(e) * C, dy, n, C);
  });
  if (!gpt2_) be_.glu_bwd(dh, du, da, c.h, c.u, size_t(R) * F, act_);
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
  // Expert tp: each rank's input gradient is its F columns' part; the sum
  // over tp is the whole.
  if (tp_) tp_->allreduce_sum(dxr, size_t(R) * C);
  if (da) be_.free_bytes(da);
  be_.free_bytes(dh);
  if (du) be_.free_bytes(du);
}

// ---- the shared expert ------------------------------------------------------------

// y_s = MLP_s(x) on all N rows (kept: c.sh, c.su, c.sa; gated also c.sy and
// the gate values), then out's rows [row0, row0 + n_out) += y_s, or
// sigmoid(x . w) y_s per row (the backend's weighted combine, k = 1, over
// the identity row list).
void MoeLayer::shared_fwd(MoeCtx& c, const MoeParams& p, const float* x, float* out, int row0, int n_out) {
  if (Fs_ == 0) return;
  const int N = c.N, C = C_, Fs = Fs_;
  const size_t NF = size_t(N) * Fs, NC = size_t(N) * C;
  const bool gated = cfg_.shared_expert_gate;
  auto kept = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::activations); };
  c.sh = kept(NF);
  if (!gpt2_) c.su = kept(NF);
  c.sa = kept(NF);
  if (gpt2_) {
    be_.linear_fwd(c.sh, x, dense_.param(p.s_up), dense_.param(p.s_b_up), N, Fs, C, 0.0f, c.sa);
  } else {
    be_.gemm(false, true, N, Fs, C, 1.0f, x, C, dense_.param(p.s_gate), C, 0.0f, c.sh, Fs);
    be_.gemm(false, true, N, Fs, C, 1.0f, x, C, dense_.param(p.s_up), C, 0.0f, c.su, Fs);
    be_.glu_fwd(c.sa, c.sh, c.su, NF, act_);
  }
  float* y = gated ? (c.sy = kept(NC)) : be_.alloc(std::max<size_t>(NC, 1), Mem::scratch);  // (N, C)
  be_.gemm(false, true, N, C, Fs, 1.0f, c.sa, Fs, dense_.param(p.s_down), Fs, 0.0f, y, C);
  if (tp_) tp_->allreduce_sum(y, NC);  // expert tp: the sum of every rank's columns
  if (gpt2_) be_.bias_add(y, dense_.param(p.s_b_down), N, C);
  if (!gated) {
    be_.add(out, out, y + size_t(row0) * C, size_t(n_out) * C);
    be_.free_bytes(y);
    return;
  }
  float* logit = be_.alloc(std::max(N, 1), Mem::scratch);  // (N, 1)
  be_.gemm(false, true, N, 1, C, 1.0f, x, C, dense_.param(p.s_w), C, 0.0f, logit, 1);
  c.sg.resize(size_t(N));
  be_.to_host(c.sg.data(), logit, size_t(N) * sizeof(float));
  be_.free_bytes(logit);
  for (float& g : c.sg) g = float(1.0 / (1.0 + std::exp(-double(g))));
  std::vector<int32_t> iota(static_cast<size_t>(N));
  for (int t = 0; t < N; ++t) iota[size_t(t)] = t;
  c.d_sg = upload_kept(be_, c.sg);
  c.d_iota = upload_kept(be_, iota);
  float* scaled = be_.alloc(std::max<size_t>(size_t(n_out) * C, 1), Mem::scratch);  // (n_out, C)
  be_.combine_rows(scaled, c.sy, c.d_iota + row0, c.d_sg + row0, n_out, 1, C);
  be_.add(out, out, scaled, size_t(n_out) * C);
  be_.free_bytes(scaled);
}

// dx (N, C) += the shared expert's input gradient from dy (N, C), the
// gradient of the block output; its parameter gradients accumulate. Gated:
// dL/dy_s = s dy per row, dL/ds = dy . y_s, and the gate logit's gradient
// s (1 - s) dL/ds goes to x and to w.
void MoeLayer::shared_bwd(MoeCtx& c, const MoeParams& p, float* dx, const float* dy, const float* x) {
  if (Fs_ == 0) return;
  const int N = c.N, C = C_, Fs = Fs_;
  const size_t NF = size_t(N) * Fs, NC = size_t(N) * C;
  auto scratch = [&](size_t n) { return be_.alloc(std::max<size_t>(n, 1), Mem::scratch); };
  const float* g = dy;  // dL/d(shared output)
  float* dys = nullptr;
  if (cfg_.shared_expert_gate) {
    dys = scratch(NC);
    float* ds = scratch(size_t(N));
    be_.fill(ds, 0.0f, size_t(N));
    be_.combine_rows_bwd(dys, ds, dy, c.sy, c.d_iota, c.d_iota, c.d_sg, N, C);
    std::vector<float> dl(static_cast<size_t>(N));
    be_.to_host(dl.data(), ds, dl.size() * sizeof(float));
    be_.free_bytes(ds);
    for (size_t t = 0; t < dl.size(); ++t) dl[t] *= c.sg[t] * (1.0f - c.sg[t]);  // through the sigmoid
    float* d_dl = scratch(size_t(N));
    be_.from_host(d_dl, dl.data(), dl.size() * sizeof(float));
    be_.gemm(false, false, N, C, 1, 1.0f, d_dl, 1, dense_.param(p.s_w), C, 1.0f, dx, C);
    be_.gemm(true, false, 1, C, N, 1.0f, d_dl, 1, x, C, 1.0f, dense_.grad(p.s_w), C);
    be_.free_bytes(d_dl);
    g = dys;
  }
  // GPT-2: dL/dh through the GELU in one op; the gated unit keeps dL/da.
  float* da = gpt2_ ? nullptr : scratch(NF);
  float* dh = scratch(NF);
  float* du = gpt2_ ? nullptr : scratch(NF);
  if (gpt2_)
    be_.linear_bwd_input_gelu(dh, g, dense_.param(p.s_down), c.sh, N, C, Fs);
  else
    be_.gemm(false, false, N, Fs, C, 1.0f, g, C, dense_.param(p.s_down), Fs, 0.0f, da, Fs);
  be_.gemm(true, false, C, Fs, N, 1.0f, g, C, c.sa, Fs, 1.0f, dense_.grad(p.s_down), Fs);
  if (gpt2_) be_.bias_bwd(dense_.grad(p.s_b_down), g, N, C);
  if (dys) be_.free_bytes(dys);
  if (!gpt2_) be_.glu_bwd(dh, du, da, c.sh, c.su, NF, act_);
  // Expert tp: this rank's columns give a part of the input gradient; the
  // sum over tp is the whole, added to dx.
  float* dxs = tp_ ? scratch(NC) : dx;
  const float beta = tp_ ? 0.0f : 1.0f;
  if (gpt2_) {
    be_.gemm(false, false, N, C, Fs, 1.0f, dh, Fs, dense_.param(p.s_up), C, beta, dxs, C);
    be_.gemm(true, false, Fs, C, N, 1.0f, dh, Fs, x, C, 1.0f, dense_.grad(p.s_up), C);
    be_.bias_bwd(dense_.grad(p.s_b_up), dh, N, Fs);
  } else {
    be_.gemm(false, false, N, C, Fs, 1.0f, dh, Fs, dense_.param(p.s_gate), C, beta, dxs, C);
    be_.gemm(false, false, N, C, Fs, 1.0f, du, Fs, dense_.param(p.s_up), C, 1.0f, dxs, C);
    be_.gemm(true, false, Fs, C, N, 1.0f, dh, Fs, x, C, 1.0f, dense_.grad(p.s_gate), C);
    be_.gemm(true, false, Fs, C, N, 1.0f, du, Fs, x, C, 1.0f, dense_.grad(p.s_up), C);
  }
  if (tp_) {
    tp_->allreduce_sum(dxs, NC);
    be_.add(dx, dx, dxs, NC);
    be_.free_bytes(dxs);
  }
  if (da) be_.free_bytes(da);
  be_.free_bytes(dh);
  if (du) be_.free_bytes(du);
}

}  // namespace pentad
