// The checks of the fused bf16 attention (cuda/attention_flash.hpp) against
// the CPU backend's bf16 attention, shared by its host test
// (tests/unit/test_cuda_flash_attention.cpp) and its GPU test
// (tests/backend_ops, OpsVsCpu.AttentionBf16Fused).
// Forward (expect_within_p_rounding): both round q, k, v to
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

#include "../../cuda/attention_bounds.hpp"
#include "bf16.hpp"

namespace pentad::test {

struct AttnDims {
  int B, Tq, Tk, H, Hkv, D;
};

// delta = rowsum(dO * O), (B, H, Tq): the backward kernels' input, summed
// in fp32 in d's order, as the device's delta kernel does; bf16: O rounded
// to bf16, as bf16 runs read it (precision.md).
inline std::vector<float> attention_delta(const std::vector<float>& dout, const std::vector<float>& out,
                                          const AttnDims& d, bool bf16) {
  std::vector<float> delta(size_t(d.B) * d.H * d.Tq);
  for (int b = 0; b < d.B; ++b)
    for (int h = 0; h < d.H; ++h)
      for (int i = 0; i < d.Tq; ++i) {
        float acc = 0;
        const size_t o = ((size_t(b) * d.Tq + i) * d.H + h) * d.D;
        for (int c = 0; c < d.D; ++c) acc += dout[o + c] * (bf16 ? round_bf16(out[o + c]) : out[o + c]);
        delta[(size_t(b) * d.H + h) * d.Tq + i] = acc;
      }
  return delta;
}

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

// Backward (expect_bwd_within_rounding): the fused kernels round at the
// CPU emulation's points (q, k, v, dO once; the normalized P where it
// multiplies dO; dS where it multiplies K and Q), so the two differ by fp32
// summation order, which can move a P or dS to the neighbouring bf16
// value: each term within 2^-7 of its size. Per element of dq, dk, dv:
// |got - cpu| <= 2^-7 (sum of |terms|) + 1e-5 (1 + the sum of the terms'
// sizes before dP - delta cancels), the terms evaluated in double from the
// bf16-rounded operands, lse and delta (B, H, Tq) of the call. Adds a
// failure per element out of bounds; returns the largest fractions.
struct BwdWorst {
  double dq = 0, dk = 0, dv = 0;
};
inline BwdWorst expect_bwd_within_rounding(const std::vector<float>& dq, const std::vector<float>& dk,
                                           const std::vector<float>& dv, const std::vector<float>& cpu_dq,
                                           const std::vector<float>& cpu_dk, const std::vector<float>& cpu_dv,
                                           const std::vector<float>& q, const std::vector<float>& k,
                                           const std::vector<float>& v, const std::vector<float>& dout,
                                           const std::vector<float>& lse, const std::vector<float>& delta,
                                           const AttnDims& d, int q_offset, int k_offset, bool causal) {
  const size_t nq = size_t(d.B) * d.Tq * d.H * d.D, nk = size_t(d.B) * d.Tk * d.Hkv * d.D;
  std::vector<double> m_dq(nq), g_dq(nq), m_dk(nk), g_dk(nk), m_dv(nk);
  const int G = d.H / d.Hkv;
  const double scale = 1.0 / std::sqrt(double(float(d.D)));
  const float scale_f = 1.0f / std::sqrt(float(d.D));
  auto r16 = [](float x) { return double(round_bf16(x)); };
  for (int b = 0; b < d.B; ++b)
    for (int h = 0; h < d.H; ++h)
      for (int i = 0; i < d.Tq; ++i) {
        const size_t qo = ((size_t(b) * d.Tq + i) * d.H + h) * d.D, st = (size_t(b) * d.H + h) * d.Tq + i;
        const int n_vis = n_visible(i, d.Tk, q_offset, k_offset, causal);
        for (int j = 0; j < n_vis; ++j) {
          const size_t ko = ((size_t(b) * d.Tk + j) * d.Hkv + h / G) * d.D;
          double s = 0, dp = 0;
          for (int c = 0; c < d.D; ++c) {
            s += r16(q[qo + c]) * r16(k[ko + c]);
            dp += r16(dout[qo + c]) * r16(v[ko + c]);
          }
          const double p = std::exp(s * double(scale_f) - double(lse[st]));
          const double ds = std::fabs(p * (dp - double(delta[st])));
          const double gross = p * (std::fabs(dp) + std::fabs(double(delta[st])));
          for (int c = 0; c < d.D; ++c) {
            m_dq[qo + c] += scale * ds * std::fabs(r16(k[ko + c]));
            g_dq[qo + c] += scale * gross * std::fabs(r16(k[ko + c]));
            m_dk[ko + c] += scale * ds * std::fabs(r16(q[qo + c]));
            g_dk[ko + c] += scale * gross * std::fabs(r16(q[qo + c]));
            m_dv[ko + c] += p * std::fabs(r16(dout[qo + c]));
          }
        }
      }
  auto check = [](const char* what, const std::vector<float>& got, const std::vector<float>& ref,
                  const std::vector<double>& mass, const std::vector<double>& gross) {
    int bad = 0;
    double worst = 0;
    for (size_t e = 0; e < ref.size(); ++e) {
      const double err = std::fabs(double(got[e]) - double(ref[e]));
      const double bound = std::ldexp(mass[e], -7) + 1e-5 * (1.0 + gross[e]);
      worst = std::max(worst, err / bound);
      if (!(err <= bound) && ++bad <= 8)
        ADD_FAILURE() << what << "[" << e << "] " << got[e] << " vs cpu " << ref[e] << ": error " << err
                      << " > bound " << bound;
    }
    return worst;
  };
  BwdWorst w;
  w.dq = check("dq", dq, cpu_dq, m_dq, g_dq);
  w.dk = check("dk", dk, cpu_dk, m_dk, g_dk);
  w.dv = check("dv", dv, cpu_dv, m_dv, m_dv);
  return w;
}

}  // namespace pentad::test
