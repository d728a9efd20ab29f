// CPU backend: OpenBLAS (OpenMP flavour) for matrix products, OpenMP loops
// for everything else. Every reduction has a fixed order (static partitions,
// per-channel ownership for parameter gradients), so results do not depend on
// the thread count. One .cpp per op family, mirroring cuda/.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.hpp"

namespace pentad {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads);
  ~CpuBackend() override;
  std::string name() const override { return "cpu"; }

  void* alloc_bytes(size_t n_bytes, Mem category) override;
  void free_bytes(void* p) override;
  void copy_bytes(void* dst, const void* src, size_t n_bytes) override;
  void to_host(void* host, const void* dev, size_t n_bytes) override;
  void from_host(void* dev, const void* host, size_t n_bytes) override;
  void fill(float* p, float value, size_t n) override;
  void synchronize() override {}

  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc) override;
  void gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                    int lda, long stride_a, const float* B, int ldb, long stride_b, float beta,
                    float* C, int ldc, long stride_c, int batch) override;

  void add(float* out, const float* a, const float* b, size_t n) override;
  void scale(float* x, float s, size_t n) override;
  double sum_squares(const float* x, size_t n) override;
  void bias_add(float* x, const float* bias, int N, int C) override;
  void bias_bwd(float* dbias, const float* dout, int N, int C) override;

  void layernorm_fwd(float* out, float* mean, float* rstd, const float* x, const float* w,
                     const float* b, int N, int C, float eps) override;
  void layernorm_bwd(float* dx, float* dw, float* db, const float* dout, const float* x,
                     const float* w, const float* mean, const float* rstd, int N,
                     int C) override;
  void rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int N, int C,
                   float eps) override;
  void rmsnorm_bwd(float* dx, float* dw, const float* dout, const float* x, const float* w,
                   const float* rstd, int N, int C) override;

  void gelu_fwd(float* out, const float* x, size_t n) override;
  void gelu_bwd(float* dx, const float* dout, const float* x, size_t n) override;
  void swiglu_fwd(float* out, const float* gate, const float* up, size_t n) override;
  void swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                  size_t n) override;

  void rope_fwd(float* x, int B, int T, int H, int D, int pos_offset, float theta) override;
  void rope_bwd(float* dx, int B, int T, int H, int D, int pos_offset, float theta) override;

  void embedding_fwd(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B,
                     int T, int C, int vocab_start, int V, int pos_offset) override;
  void embedding_bwd(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B,
                     int T, int C, int vocab_start, int V, int pos_offset) override;

  void attention_fwd(float* out, float* lse, float* probs, const float* q, const float* k,
                     const float* v, int B, int Tq, int Tk, int H, int Hkv, int D, int q_offset,
                     int k_offset, bool causal) override;
  void attention_bwd(float* dq, float* dk, float* dv, const float* dout, const float* out,
                     const float* lse, const float* probs, const float* q, const float* k,
                     const float* v, int B, int Tq, int Tk, int H, int Hkv, int D, int q_offset,
                     int k_offset, bool causal) override;
  void attention_merge(float* out, float* lse, const float* out_part, const float* lse_part, int B,
                       int T, int H, int D) override;

  void xent_rowmax(float* rowmax, const float* logits, int N, int V) override;
  void xent_sumexp(float* sumexp, float* target_logit, const float* logits, const float* rowmax,
                   const int32_t* targets, int N, int V, int vocab_start) override;
  void xent_bwd(float* dlogits, float* losses, const float* logits, const float* rowmax,
                const float* sumexp, const float* target_logit, const int32_t* targets,
                float grad_scale, int N, int V, int vocab_start) override;

  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, float grad_scale, int step) override;

 private:
  std::mutex alloc_mutex_;
  std::unordered_map<void*, std::pair<size_t, Mem>> allocs_;  // pointer -> (bytes, category)
  // bf16-rounded operand copies (compute dtype bf16); gemm is called from
  // one thread at a time (the model's), so one pair is enough.
  std::vector<float> bf16_a_, bf16_b_;
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
