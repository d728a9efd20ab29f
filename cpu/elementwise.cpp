// Elementwise kernels and the bias pair. sum_squares accumulates in double
// over fixed 4096-element chunks summed in index order, so its bits do not
// depend on the thread count; bias_bwd gives each thread whole channels.
#include <algorithm>
#include <vector>

#include "cpu_backend.hpp"

namespace pentad {

namespace {
constexpr size_t kParallelMin = 1u << 15;  // below this, threads cost more than they save
constexpr size_t kSumChunk = 4096;
constexpr int kChannelBlock = 64;
}  // namespace

void CpuBackend::add(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void CpuBackend::scale(float* x, float s, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

double CpuBackend::sum_squares(const float* x, size_t n) {
  const size_t n_chunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<double> partial(n_chunks);
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (size_t c = 0; c < n_chunks; ++c) {
    const size_t begin = c * kSumChunk, end = std::min(n, begin + kSumChunk);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (size_t i = begin; i < end; ++i) s += double(x[i]) * double(x[i]);
    partial[c] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

void CpuBackend::bias_add(float* x, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int n = 0; n < N; ++n) {
    float* row = x + size_t(n) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) row[c] += bias[c];
  }
}

void CpuBackend::bias_bwd(float* dbias, const float* dout, int N, int C) {
  const int n_blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (size_t(N) * C > kParallelMin)
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int c0 = blk * kChannelBlock, nc = std::min(kChannelBlock, C - c0);
    float acc[kChannelBlock] = {};
    for (int n = 0; n < N; ++n) {
      const float* row = dout + size_t(n) * C + c0;
#pragma omp simd
      for (int c = 0; c < nc; ++c) acc[c] += row[c];
    }
    for (int c = 0; c < nc; ++c) dbias[c0 + c] += acc[c];
  }
}

}  // namespace pentad
