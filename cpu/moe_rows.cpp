// The MoE layer's row movements (ops.def): the dispatch gather, the weighted
// combine and its backward. Each output row is one task, summed in a fixed
// order, so the results do not depend on the thread count.
#include "cpu_backend.hpp"

namespace pentad {

void CpuBackend::gather_rows(float* dst, const float* src, const int32_t* idx, int M, int C) {
#pragma omp parallel for schedule(static) if (long(M) * C > (1 << 14))
  for (int m = 0; m < M; ++m) {
    const float* s = src + size_t(idx[m]) * C;
    float* d = dst + size_t(m) * C;
    for (int c = 0; c < C; ++c) d[c] = s[c];
  }
}

void CpuBackend::combine_rows(float* out, const float* src, const int32_t* row, const float* w, int N, int k,
                              int C) {
#pragma omp parallel for schedule(static) if (long(N) * k * C > (1 << 14))
  for (int t = 0; t < N; ++t) {
    float* o = out + size_t(t) * C;
    for (int c = 0; c < C; ++c) o[c] = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int m = row[size_t(t) * k + j];
      if (m < 0) continue;
      const float wt = w ? w[size_t(t) * k + j] : 1.0f;
      const float* s = src + size_t(m) * C;
      for (int c = 0; c < C; ++c) o[c] += wt * s[c];
    }
  }
}

void CpuBackend::combine_rows_bwd(float* dsrc, float* dw, const float* dy, const float* y, const int32_t* token,
                                  const int32_t* choice, const float* w, int M, int C) {
#pragma omp parallel for schedule(static) if (long(M) * C > (1 << 14))
  for (int m = 0; m < M; ++m) {
    const float* g = dy + size_t(token[m]) * C;
    const float* yr = y + size_t(m) * C;
    float* o = dsrc + size_t(m) * C;
    const float wt = w[choice[m]];
    double d = 0;
    for (int c = 0; c < C; ++c) {
      o[c] = wt * g[c];
      d += double(g[c]) * yr[c];
    }
    dw[choice[m]] = float(d);
  }
}

}  // namespace pentad
