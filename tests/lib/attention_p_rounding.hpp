// The check of a fused bf16 attention forward (cuda/attention_flash.hpp)
// against the CPU backend's bf16 attention, shared by its host test
// (tests/unit/test_cuda_flash_attention.cpp) and its GPU test
// (tests/backend_ops, OpsVsCpu.AttentionBf16Fused). Both round q, k, v to
// bf16; the CPU rounds the normalized P = exp(S - lse) where the fused
// kernel rounds exp(S - running max), so each term P_ij v_jd of out differs
// by at most two bf16 roundings of P (2^-7 relative together): every
// element must lie within 2^-7 sum_j P_ij |bf16(v_jd)| plus fp32 slack
// (1e-5 (1 + that sum)) of the CPU's. lse (no rounding beyond q and k) must
// agree within fp32 summation order (1e-5 (1 + |lse|)), -inf with -inf.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "bf16.hpp"

namespace pentad::test {

struct AttnDims {
  int B, Tq, Tk, H, Hkv, D;
};

// Adds a failure per element out of bounds (the first few named); returns
// the largest error as a fraction of its bound. probs: the CPU's fp32
// probabilities (B, H, Tq, Tk) of the same call.
inline double expect_within_p_rounding(const std::vector<float>& out, const std::vector<float>& lse,
                                       const std::vector<float>& cpu_out, const std::vector<float>& cpu_lse,
                                       const std::vector<float>& cpu_probs, const std::vector<float>& v,
                                       const AttnDims& d) {
  int bad = 0;
  const size_t nl = size_t(d.B) * d.H * d.Tq;
  for (size_t i = 0; i < nl; ++i) {
    const bool both_inf = std::isinf(cpu_lse[i]) && cpu_lse[i] < 0 && std::isinf(lse[i]) && lse[i] < 0;
    if (!both_inf && !(std::fabs(lse[i] - cpu_lse[i]) <= 1e-5f * (1.0f + std::fabs(cpu_lse[i]))) && ++bad <= 5)
      ADD_FAILURE() << "lse[" << i << "] " << lse[i] << " vs cpu " << cpu_lse[i];
  }
  const int G = d.H / d.Hkv;
  double worst = 0;
  for (int b = 0; b < d.B; ++b)
    for (int i = 0; i < d.Tq; ++i)
      for (int h = 0; h < d.H; ++h) {
        const float* p = cpu_probs.data() + ((size_t(b) * d.H + h) * d.Tq + i) * d.Tk;
        for (int c = 0; c < d.D; ++c) {
          double mass = 0;  // sum_j P_ij |bf16(v_jc)|
          for (int j = 0; j < d.Tk; ++j)
            mass += double(p[j]) * std::fabs(round_bf16(v[((size_t(b) * d.Tk + j) * d.Hkv + h / G) * d.D + c]));
          const size_t o = ((size_t(b) * d.Tq + i) * d.H + h) * d.D + c;
          const double err = std::fabs(double(out[o]) - double(cpu_out[o]));
          const double bound = std::ldexp(mass, -7) + 1e-5 * (1.0 + mass);
          worst = std::max(worst, err / bound);
          if (!(err <= bound) && ++bad <= 10)
            ADD_FAILURE() << "out (b " << b << ", i " << i << ", h " << h << ", d " << c << ") " << out[o]
                          << " vs cpu " << cpu_out[o] << ": error " << err << " > bound " << bound;
        }
      }
  return worst;
}

}  // namespace pentad::test
