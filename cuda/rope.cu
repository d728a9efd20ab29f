// Rotary position embedding (Su et al. 2021), interleaved pairs (x[2i],
// x[2i+1]) within each head, angle = pos * rope_inv_freq(rope, i, D)
// (core/rope.hpp) evaluated in double, its cos and sin multiplied by
// rope_attention_factor (1 unless YaRN or LongRoPE) and rounded to float
// once, as cpu/rope.cpp builds its table; a partial rotary's other pairs
// pass.
#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

// One thread per pair; sign = +1 forward, -1 the transpose (backward).
__global__ void rope_kernel(float* x, int B, int T, int H, int D, int pos_offset, Rope rope, float sign) {
  const int half = D / 2;
  const size_t n = size_t(B) * T * H * half;
  const size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  const int i = int(e % half);
  const size_t bth = e / half;
  const int t = int((bth / H) % T);
  const bool turned = i < rope_rotary_dim(rope, D) / 2;  // (a partial rotary leaves the rest alone)
  const double angle = turned ? double(pos_offset + t) * rope_inv_freq(rope, i, D) : 0.0;
  const double a = turned ? rope_attention_factor(rope) : 1.0;
  const float c = float(a * cos(angle)), s = sign * float(a * sin(angle));
  float* xh = x + bth * D;
  const float x0 = xh[2 * i], x1 = xh[2 * i + 1];
  xh[2 * i] = x0 * c - x1 * s;
  xh[2 * i + 1] = x0 * s + x1 * c;
}

}  // namespace

void CudaBackend::rope_fwd(float* x, int B, int T, int H, int D, int pos_offset, const Rope& rope) {
  const size_t n = size_t(B) * T * H * (D / 2);
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  rope_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      x, B, T, H, D, pos_offset, rope, 1.0f);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::rope_bwd(float* dx, int B, int T, int H, int D, int pos_offset, const Rope& rope) {
  const size_t n = size_t(B) * T * H * (D / 2);
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  rope_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      dx, B, T, H, D, pos_offset, rope, -1.0f);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
