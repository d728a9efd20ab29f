// LayerNorm (Ba et al. 2016; biased variance) and RMSNorm (Zhang & Sennrich
// 2019). Forward and dx: one row per task. dw/db: each task owns a block of
// channels and walks every row in order, so the sums have a fixed order.
// A forward's output held in GEMM form (Backend::hold_gemm_form) is written
// rounded to bf16.
#include <algorithm>
#include <cmath>

#include "bf16.hpp"
#include "cpu_backend.hpp"

namespace pentad {

namespace {
constexpr int kChannelBlock = 64;
constexpr long kParallelMin = 1 << 14;
}  // namespace

void CpuBackend::layernorm_fwd(float* out, float* mean, float* rstd, const float* x,
                               const float* w, const float* b, int N, int C, float eps) {
  const bool held = held_in_gemm_form(out);  // the GEMM form: floats rounded to bf16
#pragma omp parallel for schedule(static) if (long(N) * C > kParallelMin)
  for (int n = 0; n < N; ++n) {
    const float* xr = x + size_t(n) * C;
    float* yr = out + size_t(n) * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; ++c) s += xr[c];
    const float m = s / float(C);
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; ++c) ss += (xr[c] - m) * (xr[c] - m);
    const float r = 1.0f / std::sqrt(ss / float(C) + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = (xr[c] - m) * r * w[c] + b[c];
    if (held)
      for (int c = 0; c < C; ++c) yr[c] = round_bf16(yr[c]);
    mean[n] = m;
    rstd[n] = r;
  }
}

void CpuBackend::layernorm_bwd(float* dx, float* dw, float* db, const float* dout,
                               const float* x, const float* w, const float* mean,
                               const float* rstd, int N, int C) {
#pragma omp parallel for schedule(static) if (long(N) * C > kParallelMin)
  for (int n = 0; n < N; ++n) {
    const float* xr = x + size_t(n) * C;
    const float* gr = dout + size_t(n) * C;
    float* dxr = dx + size_t(n) * C;
    const float m = mean[n], r = rstd[n];
    float sum_g = 0.0f, sum_gx = 0.0f;  // sum(dout*w), sum(dout*w*xhat)
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int c = 0; c < C; ++c) {
      const float g = gr[c] * w[c];
      sum_g += g;
      sum_gx += g * (xr[c] - m) * r;
    }
    const float mean_g = sum_g / float(C), mean_gx = sum_gx / float(C);
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * r;
      dxr[c] += r * (gr[c] * w[c] - mean_g - xhat * mean_gx);
    }
  }
  const int n_blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (long(N) * C > kParallelMin)
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int c0 = blk * kChannelBlock, nc = std::min(kChannelBlock, C - c0);
    float acc_w[kChannelBlock] = {}, acc_b[kChannelBlock] = {};
    for (int n = 0; n < N; ++n) {
      const float* xr = x + size_t(n) * C + c0;
      const float* gr = dout + size_t(n) * C + c0;
      const float m = mean[n], r = rstd[n];
#pragma omp simd
      for (int c = 0; c < nc; ++c) {
        acc_w[c] += gr[c] * ((xr[c] - m) * r);
        acc_b[c] += gr[c];
      }
    }
    for (int c = 0; c < nc; ++c) {
      dw[c0 + c] += acc_w[c];
      db[c0 + c] += acc_b[c];
    }
  }
}

void CpuBackend::rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int N,
                             int C, float eps, float w_offset) {
  const bool held = held_in_gemm_form(out);
#pragma omp parallel for schedule(static) if (long(N) * C > kParallelMin)
  for (int n = 0; n < N; ++n) {
    const float* xr = x + size_t(n) * C;
    float* yr = out + size_t(n) * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; ++c) ss += xr[c] * xr[c];
    const float r = 1.0f / std::sqrt(ss / float(C) + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = xr[c] * r * (w_offset + w[c]);
    if (held)
      for (int c = 0; c < C; ++c) yr[c] = round_bf16(yr[c]);
    rstd[n] = r;
  }
}

void CpuBackend::rmsnorm_bwd(float* dx, float* dw, const float* dout, const float* x,
                             const float* w, const float* rstd, int N, int C, float w_offset) {
#pragma omp parallel for schedule(static) if (long(N) * C > kParallelMin)
  for (int n = 0; n < N; ++n) {
    const float* xr = x + size_t(n) * C;
    const float* gr = dout + size_t(n) * C;
    float* dxr = dx + size_t(n) * C;
    const float r = rstd[n];
    float sum_gx = 0.0f;  // sum(dout*w*xhat)
#pragma omp simd reduction(+ : sum_gx)
    for (int c = 0; c < C; ++c) sum_gx += gr[c] * (w_offset + w[c]) * (xr[c] * r);
    const float mean_gx = sum_gx / float(C);
#pragma omp simd
    for (int c = 0; c < C; ++c) dxr[c] += r * (gr[c] * (w_offset + w[c]) - xr[c] * r * mean_gx);
  }
  const int n_blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (long(N) * C > kParallelMin)
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int c0 = blk * kChannelBlock, nc = std::min(kChannelBlock, C - c0);
    float acc_w[kChannelBlock] = {};
    for (int n = 0; n < N; ++n) {
      const float* xr = x + size_t(n) * C + c0;
      const float* gr = dout + size_t(n) * C + c0;
      const float r = rstd[n];
#pragma omp simd
      for (int c = 0; c < nc; ++c) acc_w[c] += gr[c] * (xr[c] * r);
    }
    for (int c = 0; c < nc; ++c) dw[c0 + c] += acc_w[c];
  }
}

}  // namespace pentad
