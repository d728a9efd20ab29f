// Token (+ learned position) embedding over a vocab slice [vocab_start,
// vocab_start+V): tokens outside the slice read zeros and receive no gradient
// (the tp all-reduce of the output supplies the rest). The backward gives each
// thread a block of channels and walks all tokens in order: no atomics.
#include <algorithm>

#include "cpu_backend.hpp"

namespace pentad {

namespace {
constexpr int kChannelBlock = 64;
}

void CpuBackend::embedding_fwd(float* out, const int32_t* tokens, const float* wte,
                               const float* wpe, int B, int T, int C, int vocab_start, int V,
                               int pos_offset) {
#pragma omp parallel for schedule(static) if (long(B) * T * C > (1 << 14))
  for (int bt = 0; bt < B * T; ++bt) {
    const int t = bt % T;
    const int row = tokens[bt] - vocab_start;
    float* o = out + size_t(bt) * C;
    const float* p = wpe ? wpe + size_t(pos_offset + t) * C : nullptr;
    if (row >= 0 && row < V) {
      const float* e = wte + size_t(row) * C;
      if (p) {
#pragma omp simd
        for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
      } else {
#pragma omp simd
        for (int c = 0; c < C; ++c) o[c] = e[c];
      }
    } else {
#pragma omp simd
      for (int c = 0; c < C; ++c) o[c] = p ? p[c] : 0.0f;
    }
  }
}

void CpuBackend::embedding_bwd(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                               int B, int T, int C, int vocab_start, int V, int pos_offset) {
  const int n_blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (long(B) * T * C > (1 << 14))
  for (int blk = 0; blk < n_blocks; ++blk) {
    const int c0 = blk * kChannelBlock, nc = std::min(kChannelBlock, C - c0);
    for (int bt = 0; bt < B * T; ++bt) {
      const float* g = dout + size_t(bt) * C + c0;
      const int row = tokens[bt] - vocab_start;
      if (dwte && row >= 0 && row < V) {
        float* e = dwte + size_t(row) * C + c0;
#pragma omp simd
        for (int c = 0; c < nc; ++c) e[c] += g[c];
      }
      if (dwpe) {
        float* p = dwpe + size_t(pos_offset + bt % T) * C + c0;
#pragma omp simd
        for (int c = 0; c < nc; ++c) p[c] += g[c];
      }
    }
  }
}

}  // namespace pentad
