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

// linear_fwd (ops.def) as one cuBLASLt matmul with an epilogue:
// y(N, n_out) = x w^T + beta y (+ bias) (and GELU). Row-major y is the
// column-major D = y^T (n_out rows, N columns, ldc n_out), so the bias
// vector, one value per output feature, has D's row count, as cuBLASLt
// requires. With GELU, D is act_out and the GELU's input goes to the
// epilogue's auxiliary matrix (y, leading dimension n_out, which cuBLASLt
// requires to be a multiple of 8). When `fused` is false the caller runs
// the separate ops and `why` says why.
enum class LinearEpilogue { none, bias, gelu_aux, gelu_aux_bias };

struct LinearEpiloguePlan {
  ColumnMajorGemm gemm;  // the matmul, as column_major_gemm maps it
  LinearEpilogue epilogue = LinearEpilogue::none;
  int bias_len = 0;      // = gemm.m (rows of D)
  long aux_ld = 0;       // GELU input's leading dimension (= gemm.ldc)
  bool fused = false;
  const char* why = "";
};

inline LinearEpiloguePlan linear_epilogue_plan(int N, int n_out, int n_in, bool bias, bool gelu, float beta) {
  LinearEpiloguePlan p;
  p.gemm = column_major_gemm(false, true, N, n_out, n_in, n_in, 0, n_in, 0, n_out, 0, 1);
  p.bias_len = bias ? p.gemm.m : 0;
  if (!bias && !gelu) {
    p.why = "no bias and no activation: a plain GEMM";
    return p;
  }
  if (gelu) {
    p.epilogue = bias ? LinearEpilogue::gelu_aux_bias : LinearEpilogue::gelu_aux;
    p.aux_ld = p.gemm.ldc;
    if (beta != 0.0f) {
      p.why = "GELU after an accumulating GEMM (beta != 0)";
      return p;
    }
    if (p.aux_ld % 8 != 0) {
      p.why = "GELU input's leading dimension (n_out) not a multiple of 8";
      return p;
    }
  } else {
    p.epilogue = LinearEpilogue::bias;
  }
  p.fused = true;
  return p;
}

}  // namespace pentad
