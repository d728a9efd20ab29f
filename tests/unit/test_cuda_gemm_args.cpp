// The cuBLAS argument mapping of cuda/gemm.cu (cuda/gemm_args.hpp), without a
// GPU: a naive column-major GEMM that reads the mapped call exactly as cuBLAS
// documents cublasGemmEx / cublasGemmStridedBatchedEx (op(A) m x k, op(B)
// k x n, C m x n, column-major with leading dimensions; matrix i of a batch
// `stride` elements after matrix i-1) must equal row-major cblas_sgemm on the
// same buffers, for every (trans_a, trans_b), non-square shapes, padded
// leading dimensions and batches. Tolerance: fp32 rounding of a length-K dot
// product, 1e-5 of sum |alpha a b| + |beta c| (K <= 64), the worst printed.
#include <cblas.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../cuda/gemm_args.hpp"
#include "cpu.hpp"

namespace {

using pentad::ColumnMajorGemm;
using pentad::GemmOperand;

constexpr double kRtol = 1e-5;
constexpr float kUntouched = -7777.0f;  // C's padding: neither side may write it

// What cuBLAS computes for the call `g`: column-major, element (r, c) of a
// matrix with leading dimension ld at r + c * ld. Accumulates in double.
void column_major_reference(const ColumnMajorGemm& g, float alpha, const float* first,
                            const float* second, float beta, float* C, double* bound) {
  for (int i = 0; i < g.batch; ++i) {
    const float* A = first + i * g.stride_first;
    const float* B = second + i * g.stride_second;
    float* Ci = C + i * g.stride_c;
    double* bi = bound + i * g.stride_c;
    for (int c = 0; c < g.n; ++c)
      for (int r = 0; r < g.m; ++r) {
        double s = 0.0, s_abs = 0.0;
        for (int p = 0; p < g.k; ++p) {
          const double a = g.trans_first ? A[p + size_t(r) * g.ld_first] : A[r + size_t(p) * g.ld_first];
          const double b = g.trans_second ? B[c + size_t(p) * g.ld_second] : B[p + size_t(c) * g.ld_second];
          s += a * b;
          s_abs += std::fabs(a * b);
        }
        const size_t e = r + size_t(c) * g.ldc;
        const double old = Ci[e];
        bi[e] = std::fabs(double(alpha)) * s_abs + std::fabs(double(beta) * old);
        Ci[e] = float(double(alpha) * s + double(beta) * old);
      }
  }
}

struct Case {
  bool trans_a, trans_b;
  int M, N, K;
  int pad;    // added to every leading dimension
  int batch;  // > 1: the strided-batched call
  float alpha, beta;
};

std::string name_of(const Case& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "ta=%d tb=%d M=%d N=%d K=%d pad=%d batch=%d alpha=%g beta=%g",
                c.trans_a, c.trans_b, c.M, c.N, c.K, c.pad, c.batch, c.alpha, c.beta);
  return buf;
}

// Runs one case; returns the worst |cublas-reading - cblas| / bound.
double check_case(const Case& c, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row-major shapes of pentad's contract (ops.def).
  const int a_rows = c.trans_a ? c.K : c.M, a_cols = c.trans_a ? c.M : c.K;
  const int b_rows = c.trans_b ? c.N : c.K, b_cols = c.trans_b ? c.K : c.N;
  const int lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
  // Matrices a gap apart, so a wrong stride reads the gap (NaN for A and B).
  const long stride_a = long(a_rows) * lda + 5, stride_b = long(b_rows) * ldb + 3;
  const long stride_c = long(c.M) * ldc + 2;
  std::vector<float> A(size_t(stride_a) * c.batch, nan), B(size_t(stride_b) * c.batch, nan);
  std::vector<float> C0(size_t(stride_c) * c.batch, kUntouched);
  for (int i = 0; i < c.batch; ++i) {
    for (int r = 0; r < a_rows; ++r)
      for (int k = 0; k < a_cols; ++k) A[i * stride_a + size_t(r) * lda + k] = uni(rng);
    for (int r = 0; r < b_rows; ++r)
      for (int k = 0; k < b_cols; ++k) B[i * stride_b + size_t(r) * ldb + k] = uni(rng);
    for (int r = 0; r < c.M; ++r)
      for (int k = 0; k < c.N; ++k) C0[i * stride_c + size_t(r) * ldc + k] = uni(rng);
  }

  // Row-major cblas, one call per matrix of the batch: pentad's definition.
  std::vector<float> C_blas = C0;
  for (int i = 0; i < c.batch; ++i)
    cblas_sgemm(CblasRowMajor, c.trans_a ? CblasTrans : CblasNoTrans,
                c.trans_b ? CblasTrans : CblasNoTrans, c.M, c.N, c.K, c.alpha, A.data() + i * stride_a,
                lda, B.data() + i * stride_b, ldb, c.beta, C_blas.data() + i * stride_c, ldc);

  // The mapped call, read as cuBLAS reads it.
  const ColumnMajorGemm g = pentad::column_major_gemm(c.trans_a, c.trans_b, c.M, c.N, c.K, lda,
                                                      c.batch > 1 ? stride_a : 0, ldb,
                                                      c.batch > 1 ? stride_b : 0, ldc,
                                                      c.batch > 1 ? stride_c : 0, c.batch);
  const float* first = g.first == GemmOperand::a ? A.data() : B.data();
  const float* second = g.second == GemmOperand::a ? A.data() : B.data();
  std::vector<float> C_cublas = C0;
  std::vector<double> bound(C0.size(), 0.0);
  column_major_reference(g, c.alpha, first, second, c.beta, C_cublas.data(), bound.data());

  double worst = 0.0;
  for (size_t e = 0; e < C0.size(); ++e) {
    if (C0[e] == kUntouched) {  // padding: exactly as it was on both sides
      EXPECT_EQ(C_blas[e], kUntouched) << name_of(c) << " element " << e;
      EXPECT_EQ(C_cublas[e], kUntouched) << name_of(c) << " element " << e;
      continue;
    }
    const double diff = std::fabs(double(C_cublas[e]) - double(C_blas[e]));
    const double tol = kRtol * bound[e] + 1e-30;
    if (!(diff <= tol))
      ADD_FAILURE() << name_of(c) << " element " << e << ": cublas-reading " << C_cublas[e]
                    << " cblas " << C_blas[e] << " diff " << diff << " tol " << tol;
    worst = std::max(worst, std::isnan(diff) ? INFINITY : diff / tol);
  }
  return worst;
}

TEST(CudaGemmArgs, ColumnMajorCallEqualsRowMajorCblas) {
  struct Shape { int M, N, K; };
  const Shape shapes[] = {{1, 1, 1}, {3, 5, 7}, {7, 3, 5}, {16, 16, 16}, {33, 17, 64}, {5, 40, 2},
                          {1, 9, 4}, {9, 1, 4}};
  std::mt19937 rng(20240521u);
  double worst = 0.0;
  int n_cases = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Shape& s : shapes)
        for (int pad : {0, 3})
          for (int batch : {1, 3})
            for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.25f}}) {
              const Case c{ta == 1, tb == 1, s.M, s.N, s.K, pad, batch, alpha, beta};
              worst = std::max(worst, check_case(c, rng));
              ++n_cases;
            }
  std::printf("cuda gemm mapping: %d cases, worst |diff| / tolerance %.3g\n", n_cases, worst);
  EXPECT_LE(worst, 1.0);
}

// An epilogue plan's verdict against the expected one, counted: a refusal
// must say why; a fused plan has the weight as cuBLAS's first operand.
// True when the plan fuses.
bool count_plan(const pentad::LinearEpiloguePlan& p, bool expect_fused, const std::string& tag, int& n_fused,
                int& n_refused) {
  EXPECT_EQ(p.fused, expect_fused) << tag << ": " << p.why;
  if (!p.fused) {
    EXPECT_STRNE(p.why, "") << tag;
    ++n_refused;
    return false;
  }
  ++n_fused;
  EXPECT_EQ(p.gemm.first, GemmOperand::b) << tag;  // w
  return true;
}

// linear_fwd's cuBLASLt call (linear_epilogue_plan): the plan's matmul
// read as cuBLAS reads it, with w as its first operand and x as its second,
// then the epilogue as cuBLASLt documents it (the bias vector added to every
// column of D, one value per row of D; GELU_AUX: the GELU's input stored
// in the auxiliary matrix with its leading dimension, D = GELU of it) must
// equal the CPU backend's linear_fwd (gemm, bias_add, gelu_fwd). And the
// plan refuses what cuBLASLt cannot do: GELU with n_out not a multiple of 8
// (the auxiliary leading dimension) or after an accumulating GEMM.
TEST(CudaGemmArgs, LinearEpiloguePlanEqualsCpuLinearFwd) {
  auto cpu = pentad::make_cpu_backend(1);
  std::mt19937 rng(20261202u);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto gelu = [](double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); };
  double worst = 0.0;
  int n_fused = 0, n_refused = 0;
  struct Shape { int N, n_out, n_in; };
  for (const Shape sh : {Shape{5, 8, 3}, Shape{17, 24, 33}, Shape{9, 64, 16}, Shape{6, 13, 7}, Shape{1, 40, 5}})
    for (int with_bias = 0; with_bias < 2; ++with_bias)
      for (int with_gelu = 0; with_gelu < 2; ++with_gelu)
        for (float beta : {0.0f, 1.0f}) {
          const pentad::LinearEpiloguePlan p =
              pentad::linear_epilogue_plan(sh.N, sh.n_out, sh.n_in, with_bias, with_gelu, beta);
          const std::string tag = "N=" + std::to_string(sh.N) + " n_out=" + std::to_string(sh.n_out) +
                                  " bias=" + std::to_string(with_bias) + " gelu=" + std::to_string(with_gelu) +
                                  " beta=" + std::to_string(beta);
          const bool can = (with_bias || with_gelu) && !(with_gelu && (beta != 0.0f || sh.n_out % 8 != 0));
          if (!count_plan(p, can, tag, n_fused, n_refused)) continue;
          const ColumnMajorGemm& g = p.gemm;
          EXPECT_EQ(g.m, sh.n_out) << tag;           // rows of D: the output features
          EXPECT_EQ(p.bias_len, with_bias ? g.m : 0) << tag;
          if (with_gelu) {
            EXPECT_EQ(p.aux_ld, long(g.ldc)) << tag;
          }
          const size_t ny = size_t(sh.N) * sh.n_out;
          std::vector<float> x(size_t(sh.N) * sh.n_in), w(size_t(sh.n_out) * sh.n_in), b(size_t(sh.n_out)), y0(ny);
          for (auto* v : {&x, &w, &b, &y0})
            for (float& e : *v) e = uni(rng);
          // cuBLASLt's reading: D = (w as first) x (x as second) + beta C, then the epilogue.
          std::vector<float> D = y0, aux(ny, kUntouched);
          std::vector<double> bound(ny, 0.0);
          column_major_reference(g, 1.0f, w.data(), x.data(), beta, D.data(), bound.data());
          for (int c = 0; c < g.n; ++c)
            for (int r = 0; r < g.m; ++r) {
              float& d = D[size_t(r) + size_t(c) * g.ldc];
              if (with_bias) d += b[size_t(r)];
              if (with_gelu) {
                aux[size_t(r) + size_t(c) * p.aux_ld] = d;
                d = float(gelu(d));
              }
            }
          // pentad's CPU linear_fwd on the same buffers.
          std::vector<float> y = y0, act(ny, kUntouched);
          cpu->linear_fwd(y.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, sh.N, sh.n_out, sh.n_in,
                          beta, with_gelu ? act.data() : nullptr);
          const std::vector<float>& pre = with_gelu ? aux : D;  // the GELU's input / the linear output
          for (size_t e = 0; e < ny; ++e) {
            const double tol = kRtol * (bound[e] + (with_bias ? std::fabs(b[e % sh.n_out]) : 0.0)) + 1e-6;
            const double diff = std::fabs(double(pre[e]) - double(y[e]));
            if (!(diff <= tol)) ADD_FAILURE() << tag << " y[" << e << "]: " << pre[e] << " vs cpu " << y[e];
            worst = std::max(worst, diff / tol);
            if (with_gelu) {
              // GELU in float (the CPU's gelu_fwd) against GELU in double: a few ulps more.
              const double tol_act = tol + 4e-6 * (1.0 + std::fabs(double(D[e])));
              const double da = std::fabs(double(D[e]) - double(act[e]));
              if (!(da <= tol_act)) ADD_FAILURE() << tag << " act[" << e << "]: " << D[e] << " vs cpu " << act[e];
              worst = std::max(worst, da / tol_act);
            }
          }
        }
  std::printf("linear epilogue plan: %d fused cases equal the CPU's linear_fwd (worst |diff| / tolerance %.3g), "
              "%d refused\n", n_fused, worst, n_refused);
  EXPECT_GT(n_fused, 0);
  EXPECT_GT(n_refused, 0);
}

// linear_bwd_input_gelu's cuBLASLt call (linear_bwd_gelu_plan): the plan's
// matmul read as cuBLAS reads it (w first, dy second), then DGELU as
// cuBLASLt documents it (each element of D times the GELU's derivative at
// the auxiliary matrix's element, read with the plan's leading dimension
// from the GELU input as the forward kept it) must equal the CPU backend's
// linear_bwd_input_gelu (gemm, then gelu_bwd). The plan refuses n_in not a
// multiple of 8 (the auxiliary leading dimension).
TEST(CudaGemmArgs, DgeluPlanEqualsCpuLinearBwdInputGelu) {
  auto cpu = pentad::make_cpu_backend(1);
  std::mt19937 rng(20261203u);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto dgelu = [](double v) {
    const double c = 0.7978845608028654, a = 0.044715, t = std::tanh(c * (v + a * v * v * v));
    return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * a * v * v);
  };
  double worst = 0.0;
  int n_fused = 0, n_refused = 0;
  struct Shape { int N, n_out, n_in; };
  for (const Shape sh : {Shape{5, 3, 8}, Shape{17, 33, 24}, Shape{9, 16, 64}, Shape{6, 7, 13}, Shape{1, 5, 40}}) {
    const pentad::LinearEpiloguePlan p = pentad::linear_bwd_gelu_plan(sh.N, sh.n_out, sh.n_in);
    const std::string tag = "N=" + std::to_string(sh.N) + " n_out=" + std::to_string(sh.n_out) +
                            " n_in=" + std::to_string(sh.n_in);
    EXPECT_EQ(p.epilogue, pentad::LinearEpilogue::dgelu) << tag;
    if (!count_plan(p, sh.n_in % 8 == 0, tag, n_fused, n_refused)) continue;
    const ColumnMajorGemm& g = p.gemm;
    EXPECT_EQ(g.m, sh.n_in) << tag;            // rows of D: the input features
    EXPECT_EQ(g.n, sh.N) << tag;
    EXPECT_EQ(p.aux_ld, long(g.ldc)) << tag;
    EXPECT_EQ(p.bias_len, 0) << tag;
    const size_t nx = size_t(sh.N) * sh.n_in;
    std::vector<float> dy(size_t(sh.N) * sh.n_out), w(size_t(sh.n_out) * sh.n_in), pre(nx);
    for (auto* v : {&dy, &w}) for (float& e : *v) e = uni(rng);
    for (float& e : pre) e = 3.0f * uni(rng);  // the GELU's input over its curved range
    // cuBLASLt's reading: D = (w as first) (dy as second), beta 0, then DGELU.
    std::vector<float> D(nx, kUntouched);
    std::vector<double> bound(nx, 0.0);
    column_major_reference(g, 1.0f, w.data(), dy.data(), 0.0f, D.data(), bound.data());
    std::vector<double> ref(nx);
    for (int c = 0; c < g.n; ++c)
      for (int r = 0; r < g.m; ++r) {
        const size_t e = size_t(r) + size_t(c) * g.ldc;
        ref[e] = double(D[e]) * dgelu(double(pre[size_t(r) + size_t(c) * p.aux_ld]));
        bound[e] *= std::fabs(dgelu(double(pre[size_t(r) + size_t(c) * p.aux_ld])));
      }
    std::vector<float> dx(nx, kUntouched);
    cpu->linear_bwd_input_gelu(dx.data(), dy.data(), w.data(), pre.data(), sh.N, sh.n_out, sh.n_in);
    for (size_t e = 0; e < nx; ++e) {
      // GELU' in float (the CPU's gelu_bwd) against double: a few ulps more.
      const double tol = kRtol * bound[e] + 4e-6 * (1.0 + std::fabs(ref[e])) + 1e-6;
      const double diff = std::fabs(ref[e] - double(dx[e]));
      if (!(diff <= tol)) ADD_FAILURE() << tag << " dx[" << e << "]: " << ref[e] << " vs cpu " << dx[e];
      worst = std::max(worst, diff / tol);
    }
  }
  std::printf("dgelu plan: %d fused cases equal the CPU's linear_bwd_input_gelu (worst |diff| / tolerance %.3g), "
              "%d refused\n", n_fused, worst, n_refused);
  EXPECT_GT(n_fused, 0);
  EXPECT_GT(n_refused, 0);
}

}  // namespace
