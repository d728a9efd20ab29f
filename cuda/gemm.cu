// Matrix products through cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx).
// Row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T
// (the argument mapping: gemm_args.hpp).
// fp32: fp32 operands, CUBLAS_COMPUTE_32F with the default (non-TF32) math.
// bf16 (train.dtype): A and B are converted to bf16 (round to nearest even,
// as cpu/bf16.hpp) into scratch, multiplied on the tensor cores with fp32
// accumulation (CUBLAS_COMPUTE_32F), and C stays fp32. An operand inside a
// range with a weight copy (Backend::keep_weight_copy: the weights, once per
// optimizer step) is read from the copy in place, with its own leading
// dimension and stride; only the other operands are converted per call.
#include <cuda_bf16.h>

#include "cuda_backend.hpp"
#include "gemm_args.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

// dst (batch, rows, cols) dense <- src rows x cols with leading dimension ld,
// matrices `stride` elements apart.
__global__ void to_bf16_kernel(__nv_bfloat16* dst, const float* src, int rows, int cols, int ld,
                               long stride, int batch) {
  const size_t per = size_t(rows) * cols, total = per * size_t(batch);
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    const size_t i = e / per, rc = e % per, r = rc / cols, c = rc % cols;
    dst[e] = __float2bfloat16_rn(src[i * stride + r * ld + c]);
  }
}

__nv_bfloat16* convert(cudaStream_t s, void* scratch, const float* src, int rows, int cols, int ld,
                       long stride, int batch) {
  auto* dst = static_cast<__nv_bfloat16*>(scratch);
  const size_t total = size_t(rows) * cols * size_t(batch);
  const LaunchConfig l = cuda_detail::bf16_convert_launch(total);
  to_bf16_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, s>>>(
      dst, src, rows, cols, ld, stride, batch);
  CUDA_LAUNCH_CHECK();
  return dst;
}

// dst[i] = bf16(src[i]), i < n (the weight copies: one flat range).
__global__ void to_bf16_flat_kernel(__nv_bfloat16* dst, const float* src, size_t n) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < n; e += size_t(gridDim.x) * blockDim.x)
    dst[e] = __float2bfloat16_rn(src[e]);
}

}  // namespace

void CudaBackend::to_gemm_form(void* dst, const float* src, size_t n) {
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::bf16_convert_launch(n);
  to_bf16_flat_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      static_cast<__nv_bfloat16*>(dst), src, n);
  CUDA_LAUNCH_CHECK();
}

const void* CudaBackend::bf16_gemm_operand(const float* p, int rows, int cols, int& ld, long& stride, int batch,
                                           int slot) {
  if (const void* copy = weight_copy_for(p, rows, cols, ld, stride, batch)) return copy;
  const size_t n = size_t(rows) * cols * batch;
  const void* dense = convert(stream_, scratch(slot, n * sizeof(__nv_bfloat16)), p, rows, cols, ld, stride, batch);
  ld = cols;
  stride = long(rows) * cols;
  return dense;
}

void CudaBackend::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float* A, int lda, const float* B, int ldb, float beta, float* C,
                       int ldc) {
  gemm_batched(trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

void CudaBackend::gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                               const float* A, int lda, long stride_a, const float* B, int ldb,
                               long stride_b, float beta, float* C, int ldc, long stride_c,
                               int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  const void* a = A;
  const void* b = B;
  cudaDataType_t type = CUDA_R_32F;
  if (compute_dtype_ == Dtype::bf16 && K > 0) {
    const int a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    const int b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    a = bf16_gemm_operand(A, a_rows, a_cols, lda, stride_a, batch, 0);
    b = bf16_gemm_operand(B, b_rows, b_cols, ldb, stride_b, batch, 1);
    type = CUDA_R_16BF;
  }
  const ColumnMajorGemm g = column_major_gemm(trans_a, trans_b, M, N, K, lda, stride_a, ldb,
                                              stride_b, ldc, stride_c, batch);
  cublas_gemm(g, a, b, type == CUDA_R_16BF, alpha, beta, C);
}

void CudaBackend::cublas_gemm(const ColumnMajorGemm& g, const void* a, const void* b, bool bf16, float alpha,
                              float beta, float* C) {
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const void* first = g.first == GemmOperand::a ? a : b;
  const void* second = g.second == GemmOperand::a ? a : b;
  const cublasOperation_t op_first = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.batch == 1) {
    CUBLAS_CHECK(cublasGemmEx(cublas_, op_first, op_second, g.m, g.n, g.k, &alpha, first, type,
                              g.ld_first, second, type, g.ld_second, &beta, C, CUDA_R_32F, g.ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas_, op_first, op_second, g.m, g.n, g.k, &alpha,
                                            first, type, g.ld_first, g.stride_first, second, type,
                                            g.ld_second, g.stride_second, &beta, C, CUDA_R_32F,
                                            g.ldc, g.stride_c, g.batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace pentad
