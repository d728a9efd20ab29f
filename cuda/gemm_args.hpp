// The column-major cuBLAS call that computes pentad's row-major gemm
// (src/backend/ops.def: C(M,N) = alpha op(A) op(B) + beta C). A row-major X
// with leading dimension ld is, read column-major, X^T with the same ld, so
// C^T = op(B)^T op(A)^T is cublasGemmEx(op_b, op_a, N, M, K, B, ldb, A, lda,
// C, ldc) and likewise for the strided-batched call. Header-only and free of
// CUDA types: cuda/gemm.cu calls cuBLAS with exactly these fields and
// tests/unit/test_cuda_gemm_args.cpp checks them against row-major cblas.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/backend.hpp"

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
enum class LinearEpilogue { none, bias, gelu_aux, gelu_aux_bias, dgelu };

struct LinearEpiloguePlan {
  ColumnMajorGemm gemm;  // the matmul, as column_major_gemm maps it
  LinearEpilogue epilogue = LinearEpilogue::none;
  int bias_len = 0;      // = gemm.m (rows of D)
  long aux_ld = 0;       // GELU input's leading dimension (= gemm.ldc): written (gelu_aux*), read (dgelu)
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

// linear_bwd_input_gelu (ops.def) as one cuBLASLt matmul: dx(N, n_in) =
// dy(N, n_out) w(n_out, n_in), the GEMM linear_bwd_input_each runs (beta 0),
// with the DGELU epilogue: D = dx^T (n_in rows, N columns, ldc n_in) times
// GELU' of the auxiliary matrix, the GELU's input, which has D's layout
// (leading dimension n_in, a multiple of 8 as cuBLASLt requires).
inline LinearEpiloguePlan linear_bwd_gelu_plan(int N, int n_out, int n_in) {
  LinearEpiloguePlan p;
  p.gemm = column_major_gemm(false, false, N, n_in, n_out, n_out, 0, n_in, 0, n_in, 0, 1);
  p.epilogue = LinearEpilogue::dgelu;
  p.aux_ld = p.gemm.ldc;
  if (p.aux_ld % 8 != 0) {
    p.why = "GELU input's leading dimension (n_in) not a multiple of 8";
    return p;
  }
  p.fused = true;
  return p;
}

// linear_fwd_group (ops.def) on CUDA: its parts cut into runs, each one
// strided-batched matmul with x shared by every matrix of the batch
// (stride 0). Consecutive parts join a run while they have the run's n_out,
// a bias when the run has one, and outputs, weights and biases the run's
// element strides apart (the second part sets them); a stride must be
// positive and at least one matrix long, so no two outputs overlap. The
// model's Q, K, V (and Llama's gate and up) lie so (their weights one after
// another in the parameter buffer, their outputs in the activation plan):
// GPT-2 is one run, grouped-query heads two (Q; K and V).
struct LinearRun {
  int first = 0, count = 0;                        // parts [first, first + count)
  long stride_y = 0, stride_w = 0, stride_bias = 0;  // elements between the parts' matrices
};

inline std::vector<LinearRun> linear_group_runs(const LinearPart* parts, int n, int N, int n_in) {
  std::vector<LinearRun> runs;
  auto gap = [](const float* a, const float* b) { return long(b - a); };
  auto joins = [&](const LinearRun& r, int i) {
    const LinearPart &a = parts[i - 1], &b = parts[i];
    if (b.n_out != a.n_out || (a.bias == nullptr) != (b.bias == nullptr)) return false;
    const long sy = gap(a.y, b.y), sw = gap(a.w, b.w), sb = a.bias ? gap(a.bias, b.bias) : 0;
    if (r.count == 1)  // the second part sets the strides
      return sy >= long(N) * a.n_out && sw >= long(a.n_out) * n_in && (!a.bias || sb >= a.n_out);
    return sy == r.stride_y && sw == r.stride_w && sb == r.stride_bias;
  };
  for (int i = 0; i < n; ++i) {
    if (!runs.empty() && joins(runs.back(), i)) {
      LinearRun& r = runs.back();
      if (r.count == 1) {
        r.stride_y = gap(parts[i - 1].y, parts[i].y);
        r.stride_w = gap(parts[i - 1].w, parts[i].w);
        r.stride_bias = parts[i].bias ? gap(parts[i - 1].bias, parts[i].bias) : 0;
      }
      ++r.count;
      continue;
    }
    runs.push_back({i, 1, 0, 0, 0});
  }
  return runs;
}

// Whether the parts' matrices at member(part) (n_out rows of n_in values
// each) lie one after another with no gap: then they are one
// (sum of n_out, n_in) row-major matrix, the stacked operand of
// linear_bwd_input_group's and linear_bwd_weight_group's single GEMM.
template <class Part, class Member>
bool parts_stacked(const Part* parts, int n, int n_in, Member member) {
  for (int i = 1; i < n; ++i)
    if (member(parts[i]) != member(parts[i - 1]) + size_t(parts[i - 1].n_out) * size_t(n_in)) return false;
  return n > 0;
}

}  // namespace pentad

