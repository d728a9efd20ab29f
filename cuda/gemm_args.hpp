// The column-major cuBLAS call that computes pentad's row-major gemm
// (src/backend/ops.def: C(M,N) = alpha op(A) op(B) + beta C). A row-major X
// with leading dimension ld is, read column-major, X^T with the same ld, so
// C^T = op(B)^T op(A)^T is cublasGemmEx(op_b, op_a, N, M, K, B, ldb, A, lda,
// C, ldc) and likewise for the strided-batched call. Header-only and free of
// CUDA types: cuda/gemm.cu calls cuBLAS with exactly these fields and
// tests/unit/test_cuda_gemm_args.cpp checks them against row-major cblas.
#pragma once

namespace pentad {

enum class GemmOperand { a, b };

// One cublasGemmEx / cublasGemmStridedBatchedEx call, in cuBLAS's names:
// op(first) is (m, k), op(second) is (k, n), C is (m, n), all column-major.
struct ColumnMajorGemm {
  GemmOperand first, second;  // which of pentad's A, B is cuBLAS's A, and B
  bool trans_first, trans_second;
  int m, n, k;
  int ld_first, ld_second, ldc;
  long stride_first, stride_second, stride_c;  // elements between matrices
  int batch;
};

inline ColumnMajorGemm column_major_gemm(bool trans_a, bool trans_b, int M, int N, int K, int lda,
                                         long stride_a, int ldb, long stride_b, int ldc,
                                         long stride_c, int batch) {
  ColumnMajorGemm g{};
  g.first = GemmOperand::b;
  g.second = GemmOperand::a;
  g.trans_first = trans_b;
  g.trans_second = trans_a;
  g.m = N;
  g.n = M;
  g.k = K;
  g.ld_first = ldb;
  g.ld_second = lda;
  g.ldc = ldc;
  g.stride_first = stride_b;
  g.stride_second = stride_a;
  g.stride_c = stride_c;
  g.batch = batch;
  return g;
}

}  // namespace pentad
