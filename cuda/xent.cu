// Softmax cross-entropy over a vocab slice in the three steps of
// Megatron-style vocab-parallel loss (Shoeybi et al. 2019), as
// cpu/xent.cpp: rowmax; sumexp (double accumulation) and the target logit;
// loss and gradient. One block per row, fixed-shape tree reductions.
#include <cfloat>

#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

constexpr int kThreads = cuda_detail::kXentThreads;

__global__ void rowmax_kernel(float* rowmax, const float* logits, int V, int ld) {
  __shared__ float sh[kThreads];
  const float* l = logits + size_t(blockIdx.x) * ld;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += kThreads) m = fmaxf(m, l[j]);
  sh[threadIdx.x] = m;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) rowmax[blockIdx.x] = sh[0];
}

__global__ void sumexp_kernel(float* sumexp, float* target_logit, const float* logits,
                              const float* rowmax, const int32_t* targets, int V, int ld,
                              int vocab_start) {
  __shared__ double sh[kThreads];
  const int n = blockIdx.x;
  const float* l = logits + size_t(n) * ld;
  const float m = rowmax[n];
  double s = 0.0;
  for (int j = threadIdx.x; j < V; j += kThreads) s += double(expf(l[j] - m));
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int k = kThreads / 2; k > 0; k >>= 1) {
    if (int(threadIdx.x) < k) sh[threadIdx.x] += sh[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sumexp[n] = float(sh[0]);
    const int t = targets[n] - vocab_start;
    target_logit[n] = (targets[n] >= 0 && t >= 0 && t < V) ? l[t] : 0.0f;
  }
}

__global__ void xent_bwd_kernel(float* dlogits, float* losses, const float* logits,
                                const float* rowmax, const float* sumexp, const float* target_logit,
                                const int32_t* targets, float grad_scale, int V, int ld,
                                int vocab_start) {
  const int n = blockIdx.x;
  const bool ignored = targets[n] < 0;
  const double lse = log(double(sumexp[n])) + double(rowmax[n]);
  if (losses && threadIdx.x == 0) losses[n] = ignored ? 0.0f : float(lse - double(target_logit[n]));
  if (!dlogits) return;
  // Every thread reads its logits before writing them (dlogits may alias
  // logits); no thread reads another's elements. Columns [V, ld) are
  // vocabulary padding: gradient 0.
  float* g = dlogits + size_t(n) * ld;
  const float* l = logits + size_t(n) * ld;
  const float lse_f = float(lse);
  const int t = targets[n] - vocab_start;
  for (int j = threadIdx.x; j < ld; j += blockDim.x) {
    float v = ignored || j >= V ? 0.0f : grad_scale * expf(l[j] - lse_f);
    if (!ignored && j == t && j < V) v -= grad_scale;
    g[j] = v;
  }
}

}  // namespace

void CudaBackend::xent_rowmax(float* rowmax, const float* logits, int N, int V, int ld) {
  if (N <= 0) return;
  const LaunchConfig l = cuda_detail::xent_rows_launch(N);
  rowmax_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(rowmax, logits, V, ld);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::xent_sumexp(float* sumexp, float* target_logit, const float* logits,
                              const float* rowmax, const int32_t* targets, int N, int V, int ld,
                              int vocab_start) {
  if (N <= 0) return;
  const LaunchConfig l = cuda_detail::xent_rows_launch(N);
  sumexp_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      sumexp, target_logit, logits, rowmax, targets, V, ld, vocab_start);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::xent_bwd(float* dlogits, float* losses, const float* logits, const float* rowmax,
                           const float* sumexp, const float* target_logit, const int32_t* targets,
                           float grad_scale, int N, int V, int ld, int vocab_start) {
  if (N <= 0 || (!dlogits && !losses)) return;
  const LaunchConfig l = cuda_detail::xent_rows_launch(N);
  xent_bwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      dlogits, losses, logits, rowmax, sumexp, target_logit, targets, grad_scale, V, ld, vocab_start);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
