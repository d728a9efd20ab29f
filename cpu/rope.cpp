// Rotary position embedding (Su et al. 2021, RoFormer), interleaved pairs
// (x[2i], x[2i+1]) within each head, angle = pos * rope_inv_freq(rope, i, D)
// (core/rope.hpp), the pair then multiplied by rope_attention_factor (1
// unless YaRN or LongRoPE); a partial rotary's other pairs pass. Angles are
// computed in double and the cos/sin table, scaled by that factor, cast to
// float once per call.
#include <cmath>
#include <vector>

#include "cpu_backend.hpp"

namespace pentad {

namespace {

// table (T, D/2, 2): a * cos, a * sin of the angle for position
// pos_offset + t, a = rope_attention_factor(rope); (1, 0) for the pairs a
// partial rotary leaves alone.
std::vector<float> rope_table(int T, int D, int pos_offset, const Rope& rope) {
  const int half = D / 2, turned = rope_rotary_dim(rope, D) / 2;
  std::vector<float> table(size_t(T) * half * 2);
  std::vector<double> inv_freq(turned);
  for (int i = 0; i < turned; ++i) inv_freq[i] = rope_inv_freq(rope, i, D);
  const double a = rope_attention_factor(rope);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const double angle = i < turned ? double(pos_offset + t) * inv_freq[i] : 0.0;
      const double scale = i < turned ? a : 1.0;
      table[(size_t(t) * half + i) * 2] = float(scale * std::cos(angle));
      table[(size_t(t) * half + i) * 2 + 1] = float(scale * std::sin(angle));
    }
  return table;
}

// sign = +1 rotates by +angle (forward), -1 by -angle (the transpose; the
// factor a is its own transpose).
void rope_apply(float* x, int B, int T, int H, int D, int pos_offset, const Rope& rope, float sign) {
  const std::vector<float> table = rope_table(T, D, pos_offset, rope);
  const int half = D / 2;
#pragma omp parallel for collapse(2) schedule(static) if (long(B) * T * H * D > (1 << 14))
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* cs = table.data() + size_t(t) * half * 2;
      for (int h = 0; h < H; ++h) {
        float* xh = x + ((size_t(b) * T + t) * H + h) * D;
#pragma omp simd
        for (int i = 0; i < half; ++i) {
          const float c = cs[2 * i], s = sign * cs[2 * i + 1];
          const float x0 = xh[2 * i], x1 = xh[2 * i + 1];
          xh[2 * i] = x0 * c - x1 * s;
          xh[2 * i + 1] = x0 * s + x1 * c;
        }
      }
    }
}

}  // namespace

void CpuBackend::rope_fwd(float* x, int B, int T, int H, int D, int pos_offset, const Rope& rope) {
  rope_apply(x, B, T, H, D, pos_offset, rope, 1.0f);
}

void CpuBackend::rope_bwd(float* dx, int B, int T, int H, int D, int pos_offset, const Rope& rope) {
  rope_apply(dx, B, T, H, D, pos_offset, rope, -1.0f);
}

}  // namespace pentad
