// Dense matrix products through OpenBLAS cblas_sgemm (row-major). The batched
// form runs one single-threaded sgemm per matrix inside an OpenMP loop when
// there are enough matrices to occupy the team, else threaded sgemms in turn.
// With compute dtype bf16 (train.dtype) the operands A and B are first copied
// with every element rounded to bf16 (bf16.hpp), then multiplied by sgemm:
// the products of bf16 values are exact in fp32 and the sums accumulate in
// fp32, as a bf16 tensor-core GEMM with fp32 accumulation computes them. C,
// alpha and beta stay fp32. A product with one row (M = 1, a decode step of
// `pentad sample`) goes to sgemv, which reads the matrix once in place;
// OpenBLAS's sgemm would first pack all of it.
// An operand inside a range with a weight copy (Backend::keep_weight_copy)
// is read from the copy in place, with its own leading dimension and stride:
// the copy holds the rounded floats, made once per change of the weights.
#include <omp.h>

#include <cblas.h>

#include "bf16.hpp"
#include "cpu_backend.hpp"

namespace pentad {

namespace {

// Copies `rows` rows of `cols` elements (leading dimension ld) of each of
// `batch` matrices (element stride `stride`) into `dst`, densely (leading
// dimension cols, stride rows*cols), rounding every element to bf16.
void pack_bf16(std::vector<float>& dst, const float* src, int rows, int cols, int ld, long stride,
               int batch) {
  const size_t per = size_t(rows) * cols;
  dst.resize(per * size_t(batch));
#pragma omp parallel for collapse(2) schedule(static) if (per * batch > (1u << 15))
  for (int i = 0; i < batch; ++i)
    for (int r = 0; r < rows; ++r) {
      const float* s = src + i * stride + long(r) * ld;
      float* d = dst.data() + size_t(i) * per + size_t(r) * cols;
      for (int c = 0; c < cols; ++c) d[c] = round_bf16(s[c]);
    }
}

}  // namespace

CpuBackend::Bf16Operand CpuBackend::bf16_operand(const float* p, int rows, int cols, int ld, long stride,
                                                 int batch, std::vector<float>& buf) {
  if (const void* copy = weight_copy_for(p, rows, cols, ld, stride, batch))
    return {static_cast<const float*>(copy), ld, stride};
  pack_bf16(buf, p, rows, cols, ld, stride, batch);
  return {buf.data(), cols, long(rows) * cols};
}

void CpuBackend::to_gemm_form(void* dst, const float* src, size_t n) {
  float* d = static_cast<float*>(dst);
#pragma omp parallel for simd schedule(static) if (n > (1u << 15))
  for (size_t i = 0; i < n; ++i) d[i] = round_bf16(src[i]);
}

void CpuBackend::linear_fwd(float* y, const float* x, const float* w, const float* bias, int N, int n_out,
                            int n_in, float beta, float* act_out) {
  gemm(false, true, N, n_out, n_in, 1.0f, x, n_in, w, n_in, beta, y, n_out);
  if (bias) bias_add(y, bias, N, n_out);
  if (act_out) gelu_fwd(act_out, y, size_t(N) * size_t(n_out));
}

void CpuBackend::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float* A, int lda, const float* B, int ldb, float beta, float* C,
                      int ldc) {
  if (M <= 0 || N <= 0) return;
  if (compute_dtype_ == Dtype::bf16 && K > 0) {
    // Stored shapes: A is (M,K), or (K,M) when transposed; B is (K,N) or (N,K).
    const int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    const Bf16Operand a = bf16_operand(A, a_rows, a_cols, lda, 0, 1, bf16_a_);
    const Bf16Operand b = bf16_operand(B, b_rows, b_cols, ldb, 0, 1, bf16_b_);
    A = a.p;
    lda = a.ld;
    B = b.p;
    ldb = b.ld;
  }
  if (M == 1) {
    // C(1,N) = alpha * a op(B) + beta * C, a the one row of op(A): B (K,N)
    // gives C = B^T a, B stored (N,K) (trans_b) gives C = B a.
    cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, trans_b ? N : K, trans_b ? K : N, alpha, B,
                ldb, A, trans_a ? lda : 1, beta, C, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void CpuBackend::gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                              const float* A, int lda, long stride_a, const float* B, int ldb,
                              long stride_b, float beta, float* C, int ldc, long stride_c,
                              int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  if (compute_dtype_ == Dtype::bf16 && K > 0) {
    const int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    const Bf16Operand a = bf16_operand(A, a_rows, a_cols, lda, stride_a, batch, bf16_a_);
    const Bf16Operand b = bf16_operand(B, b_rows, b_cols, ldb, stride_b, batch, bf16_b_);
    A = a.p;
    lda = a.ld;
    stride_a = a.stride;
    B = b.p;
    ldb = b.ld;
    stride_b = b.stride;
  }
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if (batch >= omp_get_max_threads() && batch > 1) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < batch; ++i)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b,
                  ldb, beta, C + i * stride_c, ldc);
  } else {
    for (int i = 0; i < batch; ++i)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b,
                  ldb, beta, C + i * stride_c, ldc);
  }
}

// The input gradient through the GELU: the GEMM, then gelu_bwd (its definition).
void CpuBackend::linear_bwd_input_gelu(float* dx, const float* dy, const float* w, const float* gelu_in, int N,
                                       int n_out, int n_in) {
  linear_bwd_input_gelu_unfused(*this, dx, dy, w, gelu_in, N, n_out, n_in);
}

// The grouped linear ops: each part in turn (their definition, ops.def).
void CpuBackend::linear_fwd_group(const LinearPart* parts, int n, const float* x, int N, int n_in) {
  linear_fwd_each(*this, parts, n, x, N, n_in);
}

void CpuBackend::linear_bwd_input_group(float* dx, const LinearGradPart* parts, int n, int N, int n_in,
                                        float beta) {
  linear_bwd_input_each(*this, dx, parts, n, N, n_in, beta);
}

void CpuBackend::linear_bwd_weight_group(const LinearGradPart* parts, int n, const float* x, int N, int n_in) {
  linear_bwd_weight_each(*this, parts, n, x, N, n_in);
}

}  // namespace pentad

