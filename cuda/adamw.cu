// AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW and cpu/adamw.cpp:
// decay first, bias corrections in double on the host, fp32 master weights
// and moments updated in place; the gradient is scaled by grad_scale.
#include <cmath>

#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, size_t n, float beta1,
                             float beta2, float eps, float decay, float step_size, float bc2_sqrt,
                             float grad_scale) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float gi = g[i] * grad_scale;
  const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
  const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  const float denom = sqrtf(vi) / bc2_sqrt + eps;
  p[i] = p[i] * decay - step_size * (mi / denom);
}

}  // namespace

void CudaBackend::adamw(float* p, const float* g, float* m, float* v, size_t n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                        int step) {
  if (n == 0) return;
  weights_written(p, n * sizeof(float));
  const double bc1 = 1.0 - std::pow(double(beta1), step);
  const double bc2 = 1.0 - std::pow(double(beta2), step);
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  adamw_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      p, g, m, v, n, beta1, beta2, eps, 1.0f - lr * weight_decay, float(double(lr) / bc1),
      float(std::sqrt(bc2)), grad_scale);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
