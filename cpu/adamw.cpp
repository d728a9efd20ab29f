// AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW computes it: weight
// decay applied to p first, bias corrections in double, then
// p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). The gradient is first
// scaled by grad_scale (the global-norm clipping factor).
#include <cmath>

#include "cpu_backend.hpp"

namespace pentad {

void CpuBackend::adamw(float* p, const float* g, float* m, float* v, size_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                       int step) {
  weights_written(p, n * sizeof(float));
  const double bc1 = 1.0 - std::pow(double(beta1), step);
  const double bc2 = 1.0 - std::pow(double(beta2), step);
  const float step_size = float(double(lr) / bc1);
  const float bc2_sqrt = float(std::sqrt(bc2));
  const float decay = 1.0f - lr * weight_decay;
  const float one_minus_b1 = 1.0f - beta1, one_minus_b2 = 1.0f - beta2;
#pragma omp parallel for simd schedule(static) if (n > (1u << 15))
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale;
    const float mi = beta1 * m[i] + one_minus_b1 * gi;
    const float vi = beta2 * v[i] + one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    p[i] = p[i] * decay - step_size * (mi / denom);
  }
}

}  // namespace pentad
