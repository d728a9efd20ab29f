// Backend interface: the coarse operations the model is written in.
// src/ never includes a BLAS, CUDA or NCCL header; cpu/ and cuda/ implement
// this interface (same file basename per op family in both). All tensors are
// row-major and live in the backend's memory ("device" pointers). Shapes in
// the comments: B micro-batch, T sequence (local), C model width, H heads,
// Hkv key/value heads, D head dim, F MLP width, V vocabulary (local slice).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace pentad {

// What a block of backend memory holds; peaks are tracked per category.
enum class Mem : int { params = 0, grads, optim, activations, comm, scratch, count };
const char* mem_name(Mem m);

// Precision of the matrix products (train.dtype). Storage is always fp32
// (master weights, moments, gradients, activations); with bf16 the operands
// A and B of gemm/gemm_batched are rounded to bfloat16 (round to nearest
// even) and the products accumulate in fp32 into an fp32 C.
enum class Dtype : int { fp32 = 0, bf16 };

struct MemStats {
  std::array<size_t, static_cast<int>(Mem::count)> cur_bytes{};
  std::array<size_t, static_cast<int>(Mem::count)> peak_bytes{};
  size_t total_cur_bytes = 0;
  size_t total_peak_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- memory ---------------------------------------------------------
  virtual void* alloc_bytes(size_t n_bytes, Mem category) = 0;  // zero-filled
  virtual void free_bytes(void* p) = 0;
  virtual void copy_bytes(void* dst, const void* src, size_t n_bytes) = 0;     // device -> device
  virtual void to_host(void* host, const void* dev, size_t n_bytes) = 0;      // device -> host
  virtual void from_host(void* dev, const void* host, size_t n_bytes) = 0;    // host -> device
  virtual void fill(float* p, float value, size_t n) = 0;
  virtual void synchronize() = 0;
  const MemStats& mem_stats() const { return mem_; }
  // Forget the peaks (e.g. after a start-up measurement): peak := current.
  void reset_peaks() {
    mem_.peak_bytes = mem_.cur_bytes;
    mem_.total_peak_bytes = mem_.total_cur_bytes;
  }

  void set_compute_dtype(Dtype d) { compute_dtype_ = d; }
  Dtype compute_dtype() const { return compute_dtype_; }

  float* alloc(size_t n, Mem category) {
    return static_cast<float*>(alloc_bytes(n * sizeof(float), category));
  }
  int32_t* alloc_i32(size_t n, Mem category) {
    return static_cast<int32_t*>(alloc_bytes(n * sizeof(int32_t), category));
  }

  // ---- dense linear algebra (row-major) ---------------------------------
  // C(M,N) = alpha * op(A) op(B) + beta * C; op(A) is (M,K), op(B) is (K,N).
  virtual void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                    const float* A, int lda, const float* B, int ldb, float beta,
                    float* C, int ldc) = 0;
  // The same over `batch` matrices separated by the given element strides.
  virtual void gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                            const float* A, int lda, long stride_a, const float* B, int ldb,
                            long stride_b, float beta, float* C, int ldc, long stride_c,
                            int batch) = 0;

  // ---- elementwise --------------------------------------------------------
  virtual void add(float* out, const float* a, const float* b, size_t n) = 0;   // out = a + b
  virtual void scale(float* x, float s, size_t n) = 0;                          // x *= s
  virtual double sum_squares(const float* x, size_t n) = 0;  // deterministic, fp64 accumulation
  virtual void bias_add(float* x, const float* bias, int N, int C) = 0;         // x(N,C) += bias(C)
  virtual void bias_bwd(float* dbias, const float* dout, int N, int C) = 0;     // dbias(C) += sum_n dout

  // ---- norms (dx, dw, db ACCUMULATE) --------------------------------------
  // out, x: (N,C); mean, rstd: (N)
  virtual void layernorm_fwd(float* out, float* mean, float* rstd, const float* x,
                             const float* w, const float* b, int N, int C, float eps) = 0;
  virtual void layernorm_bwd(float* dx, float* dw, float* db, const float* dout, const float* x,
                             const float* w, const float* mean, const float* rstd, int N,
                             int C) = 0;
  virtual void rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int N, int C,
                           float eps) = 0;
  virtual void rmsnorm_bwd(float* dx, float* dw, const float* dout, const float* x,
                           const float* w, const float* rstd, int N, int C) = 0;

  // ---- activations (dx WRITTEN) --------------------------------------------
  // GELU, tanh approximation (as GPT-2).
  virtual void gelu_fwd(float* out, const float* x, size_t n) = 0;
  virtual void gelu_bwd(float* dx, const float* dout, const float* x, size_t n) = 0;
  // out = silu(gate) * up
  virtual void swiglu_fwd(float* out, const float* gate, const float* up, size_t n) = 0;
  virtual void swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate,
                          const float* up, size_t n) = 0;

  // ---- rotary position embedding, in place on x(B,T,H,D) ------------------
  // Pairs (x[2i], x[2i+1]) rotated by angle pos * theta^(-2i/D), pos = pos_offset + t.
  // rope_bwd applies the inverse rotation (the transpose) to a gradient.
  virtual void rope_fwd(float* x, int B, int T, int H, int D, int pos_offset, float theta) = 0;
  virtual void rope_bwd(float* dx, int B, int T, int H, int D, int pos_offset, float theta) = 0;

  // ---- embedding (vocab-parallel aware) -----------------------------------
  // out(B*T, C) = wte[tok - vocab_start] if tok in [vocab_start, vocab_start+V) else 0,
  // plus wpe[pos_offset + t] when wpe != nullptr. tokens: (B*T) int32.
  virtual void embedding_fwd(float* out, const int32_t* tokens, const float* wte,
                             const float* wpe, int B, int T, int C, int vocab_start, int V,
                             int pos_offset) = 0;
  // dwte, dwpe ACCUMULATE; deterministic (no atomics).
  virtual void embedding_bwd(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                             int B, int T, int C, int vocab_start, int V, int pos_offset) = 0;

  // ---- attention -------------------------------------------------------------
  // q (B,Tq,H,D); k, v (B,Tk,Hkv,D); out (B,Tq,H,D); lse (B,H,Tq) natural-log
  // log-sum-exp of the scaled scores. H % Hkv == 0 (grouped-query attention).
  // Causal mask in global positions: query i (q_offset + i) sees key j
  // (k_offset + j) iff k_offset + j <= q_offset + i. A fully masked row has
  // out = 0 and lse = -inf. probs (B,H,Tq,Tk), if not null, receives the
  // softmax probabilities exp(s - lse), computed exactly as attention_bwd
  // recomputes them, so keeping or recomputing them gives identical gradients.
  virtual void attention_fwd(float* out, float* lse, float* probs, const float* q, const float* k,
                             const float* v, int B, int Tq, int Tk, int H, int Hkv, int D,
                             int q_offset, int k_offset, bool causal) = 0;
  // dq, dk, dv ACCUMULATE. `out`/`lse` are the (possibly merged) forward results;
  // probs may be null (then recomputed from q, k and lse).
  virtual void attention_bwd(float* dq, float* dk, float* dv, const float* dout, const float* out,
                             const float* lse, const float* probs, const float* q, const float* k,
                             const float* v, int B, int Tq, int Tk, int H, int Hkv, int D,
                             int q_offset, int k_offset, bool causal) = 0;

  // Merge a partial result over another block of keys into (out, lse), in
  // place (ring attention): lse' = logsumexp(lse, lse_part),
  // out' = exp(lse - lse') out + exp(lse_part - lse') out_part. out, out_part
  // (B,T,H,D); lse, lse_part (B,H,T). Rows with both lse = -inf stay (0, -inf);
  // merging into (0, -inf) returns the part bitwise. The default runs on the
  // host (copies); backends override it.
  virtual void attention_merge(float* out, float* lse, const float* out_part, const float* lse_part,
                               int B, int T, int H, int D);

  // ---- softmax cross-entropy over a (possibly vocab-parallel) slice ---------
  // logits (N,V) hold columns [vocab_start, vocab_start+V) of the full vocabulary.
  // The caller all-reduces rowmax (max) and sumexp/target_logit (sum) over tp
  // between the steps. targets < 0 are ignored (loss 0, no gradient).
  virtual void xent_rowmax(float* rowmax, const float* logits, int N, int V) = 0;
  // sumexp(N) = sum_j exp(logit - rowmax); target_logit(N) = logit of the target
  // if it falls in this slice, else 0.
  virtual void xent_sumexp(float* sumexp, float* target_logit, const float* logits,
                           const float* rowmax, const int32_t* targets, int N, int V,
                           int vocab_start) = 0;
  // losses(N) = log(sumexp) + rowmax - target_logit (0 for ignored rows);
  // dlogits = grad_scale * (softmax - onehot) (0 for ignored rows).
  // dlogits may alias logits. Either output may be null.
  virtual void xent_bwd(float* dlogits, float* losses, const float* logits, const float* rowmax,
                        const float* sumexp, const float* target_logit, const int32_t* targets,
                        float grad_scale, int N, int V, int vocab_start) = 0;

  // ---- optimizer ---------------------------------------------------------------
  // AdamW on n elements (PyTorch's formulation): p *= 1 - lr*wd; m = b1 m + (1-b1) g;
  // v = b2 v + (1-b2) g^2; p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
  // g is first multiplied by grad_scale (the clipping factor).
  virtual void adamw(float* p, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, float grad_scale, int step) = 0;

 protected:
  void track_alloc(size_t n_bytes, Mem category);
  void track_free(size_t n_bytes, Mem category);
  MemStats mem_;
  Dtype compute_dtype_ = Dtype::fp32;
};

// One row of attention_merge: o(D), *l (the running result), op(D), lp (the part).
inline void attention_merge_row(float* o, float* l, const float* op, float lp, int D) {
  const float m = std::max(*l, lp);
  if (m == -std::numeric_limits<float>::infinity()) return;  // nothing visible yet
  const float wa = std::exp(*l - m), wb = std::exp(lp - m), s = wa + wb;
  const float ca = wa / s, cb = wb / s;
  for (int d = 0; d < D; ++d) o[d] = ca * o[d] + cb * op[d];
  *l = m + std::log(s);
}

}  // namespace pentad
