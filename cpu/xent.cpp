// Softmax cross-entropy over a vocab slice, in the three steps of
// Megatron-style vocab-parallel loss (Shoeybi et al. 2019): rowmax, then
// sumexp and the target logit, then loss and gradient; the caller reduces
// over tp between steps. One row per task; sumexp accumulates in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu_backend.hpp"

namespace pentad {

using cpu_detail::exp_f;

namespace {

// sum_j exp(l[j] - m) in double, in kLanes running sums that are added in a
// fixed order at the end (deterministic). The exps are computed in float
// vectors and only widened to add: a plain double reduction over
// double(exp_f(.)) did not vectorise and ran ~8x slower.
double sum_exp(const float* l, int V, float m) {
  constexpr int kLanes = 16;
  double acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= V; j += kLanes) {
    float e[kLanes];
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) e[k] = exp_f(l[j + k] - m);
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) acc[k] += double(e[k]);
  }
  double s = 0.0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  for (; j < V; ++j) s += double(exp_f(l[j] - m));
  return s;
}

}  // namespace

void CpuBackend::xent_rowmax(float* rowmax, const float* logits, int N, int V, int ld) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* l = logits + size_t(n) * ld;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int j = 0; j < V; ++j) m = std::max(m, l[j]);
    rowmax[n] = m;
  }
}

void CpuBackend::xent_sumexp(float* sumexp, float* target_logit, const float* logits,
                             const float* rowmax, const int32_t* targets, int N, int V, int ld,
                             int vocab_start) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* l = logits + size_t(n) * ld;
    sumexp[n] = float(sum_exp(l, V, rowmax[n]));
    const int t = targets[n] - vocab_start;
    target_logit[n] = (targets[n] >= 0 && t >= 0 && t < V) ? l[t] : 0.0f;
  }
}

void CpuBackend::xent_bwd(float* dlogits, float* losses, const float* logits, const float* rowmax,
                          const float* sumexp, const float* target_logit, const int32_t* targets,
                          float grad_scale, int N, int V, int ld, int vocab_start) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const bool ignored = targets[n] < 0;
    const double lse = std::log(double(sumexp[n])) + double(rowmax[n]);
    if (losses) losses[n] = ignored ? 0.0f : float(lse - double(target_logit[n]));
    if (!dlogits) continue;
    float* g = dlogits + size_t(n) * ld;
    if (ignored) {
      std::fill_n(g, ld, 0.0f);
      continue;
    }
    const float* l = logits + size_t(n) * ld;
    const float lse_f = float(lse);
#pragma omp simd
    for (int j = 0; j < V; ++j) g[j] = grad_scale * exp_f(l[j] - lse_f);
    std::fill(g + V, g + ld, 0.0f);  // vocabulary padding
    const int t = targets[n] - vocab_start;
    if (t >= 0 && t < V) g[t] -= grad_scale;
  }
}

}  // namespace pentad
