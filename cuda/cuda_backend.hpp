// CUDA backend: cuBLAS for the matrix products, own kernels for everything
// else, all on one compute stream of the device this rank owns. Reductions
// have a fixed order (no atomics), so results repeat run to run. One file per
// op family, the same basenames as cpu/. Every CUDA, cuBLAS and NCCL call goes
// through a check macro below that names the call, file:line and the error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "backend/backend.hpp"
#include "core/error.hpp"

namespace pentad {

// A failed device call: names the call, the device and the error, then the
// local fatal path (rank, host, file:line, MPI_Abort).
[[noreturn]] void cuda_fail(const char* file, int line, const char* call, const char* lib,
                            const std::string& error);
const char* cublas_error_string(cublasStatus_t s);

}  // namespace pentad

#define CUDA_CHECK(call)                                                               \
  do {                                                                                 \
    const cudaError_t cuda_rc_ = (call);                                               \
    if (cuda_rc_ != cudaSuccess)                                                       \
      ::pentad::cuda_fail(__FILE__, __LINE__, #call, "CUDA", cudaGetErrorString(cuda_rc_)); \
  } while (0)

// After every kernel launch: launch-configuration errors surface here.
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                             \
  do {                                                                                 \
    const cublasStatus_t cublas_rc_ = (call);                                          \
    if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::pentad::cuda_fail(__FILE__, __LINE__, #call, "cuBLAS",                         \
                          ::pentad::cublas_error_string(cublas_rc_));                  \
  } while (0)

namespace pentad {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  void* alloc_bytes(size_t n_bytes, Mem category) override;
  void free_bytes(void* p) override;
  void copy_bytes(void* dst, const void* src, size_t n_bytes) override;
  void to_host(void* host, const void* dev, size_t n_bytes) override;
  void from_host(void* dev, const void* host, size_t n_bytes) override;
  void fill(float* p, float value, size_t n) override;
  void synchronize() override;

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

  void xent_rowmax(float* rowmax, const float* logits, int N, int V) override;
  void xent_sumexp(float* sumexp, float* target_logit, const float* logits, const float* rowmax,
                   const int32_t* targets, int N, int V, int vocab_start) override;
  void xent_bwd(float* dlogits, float* losses, const float* logits, const float* rowmax,
                const float* sumexp, const float* target_logit, const int32_t* targets,
                float grad_scale, int N, int V, int vocab_start) override;

  void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
             float beta2, float eps, float weight_decay, float grad_scale, int step) override;

 private:
  // A device scratch block that only grows (tracked as Mem::scratch).
  void* scratch(int slot, size_t n_bytes);

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::mutex alloc_mutex_;
  std::unordered_map<void*, std::pair<size_t, Mem>> allocs_;  // pointer -> (bytes, category)
  static constexpr int kScratchSlots = 4;  // 0,1: bf16 gemm operands; 2: reductions; 3: attention
  void* scratch_[kScratchSlots] = {};
  size_t scratch_bytes_[kScratchSlots] = {};
  double* host_sum_ = nullptr;  // pinned result of sum_squares
};

namespace cuda_detail {
constexpr int kThreads = 256;
inline unsigned blocks_for(size_t n, int threads = kThreads) {
  return unsigned((n + size_t(threads) - 1) / size_t(threads));
}
}  // namespace cuda_detail

}  // namespace pentad
