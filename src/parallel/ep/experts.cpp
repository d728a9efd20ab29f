// The expert MLPs of the MoE layer (see moe.hpp) on the backend: GELU with
// biases for gpt2, SwiGLU for llama. The received rows (R, C) come grouped
// by (source ep rank, local expert); each such segment is one gemm with its
// expert's weights, so the rows an expert sees, and their order, are the
// same whatever the layout. With expert tp (parallel.expert_tp) this rank
// holds F = d_ff/tp columns of each expert: the down projection's output and
// the up projection's input gradient are partial sums, all-reduced over tp.
#include <algorithm>

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

}  // namespace pentad
