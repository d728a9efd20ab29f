// CPU backend: OpenBLAS (OpenMP flavour) for matrix products, OpenMP loops
// for everything else. Every reduction has a fixed order (static partitions,
// per-channel ownership for parameter gradients), so results do not depend on
// the thread count. One .cpp per op family, mirroring cuda/.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/backend.hpp"

namespace pentad {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads);
  ~CpuBackend() override;
  std::string name() const override { return "cpu"; }

  bool supports(Op op) const override { return implements_op<CpuBackend>(op); }

  // Every op of ops.def; attention_merge too (a host loop, no copies needed).
#define PENTAD_OP(ret, name, params) ret name params override;
#define PENTAD_OP_HOST_FALLBACK(ret, name, params) ret name params override;
#include "backend/ops.def"

 protected:
  void* device_alloc(size_t n_bytes, Mem category) override;
  void device_free(void* p) override;

 private:
  // bf16-rounded operand copies (compute dtype bf16); gemm is called from
  // one thread at a time (the model's), so one pair is enough.
  std::vector<float> bf16_a_, bf16_b_;
  // One GEMM operand (stored rows x cols, leading dimension ld, `batch`
  // matrices `stride` apart) as bf16-rounded floats: its weight copy in
  // place, or a dense rounded copy in buf.
  struct Bf16Operand {
    const float* p;
    int ld;
    long stride;
  };
  Bf16Operand bf16_operand(const float* p, int rows, int cols, int ld, long stride, int batch,
                           std::vector<float>& buf);
};

namespace cpu_detail {

// exp(x) for float that GCC vectorises without -ffast-math (glibc's expf is
// not vectorised then). Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2,
// and the Cephes degree-6 polynomial: within ~2 ulp of expf. exp(x) = 0 for
// x < -87.3 (no denormals), saturates near FLT_MAX, propagates NaN.
inline float exp_f(float x) {
  const float xc = x < -87.3f ? -87.3f : (x > 88.37f ? 88.37f : x);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = xc * 1.44269504088896341f + shifter;
  const float n = t - shifter;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  const float result = p * std::bit_cast<float>(e);
  return x < -87.3f ? 0.0f : (x != x ? x : result);
}

inline float sigmoid_f(float x) { return 1.0f / (1.0f + exp_f(-x)); }

// Static block partition of [0, n) over the calling OpenMP team.
inline std::pair<long, long> static_range(long n, int tid, int n_threads) {
  const long per = n / n_threads, rem = n % n_threads;
  const long begin = tid * per + (tid < rem ? tid : rem);
  return {begin, begin + per + (tid < rem ? 1 : 0)};
}

}  // namespace cpu_detail
}  // namespace pentad
