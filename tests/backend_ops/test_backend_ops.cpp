// One op test over every backend built, after ggml's test-backend-ops. The
// CPU backend is the reference: its ops are checked against naive
// double-precision references written here, and backward ops also against
// central finite differences of L = sum(out * R) on the double reference
// forward (suite ReferenceOps). Every other backend (CUDA, where the build has
// it) runs each op on the same inputs as the CPU backend and is compared with
// it (suite OpsVsCpu); the bf16 GEMM is compared with the CPU's bf16
// emulation (the same rounded operands, fp32 accumulation). A backend not
// built, or without a usable GPU, is reported as skipped with the reason.
// Comparisons: |got - ref| <= atol + rtol*|ref| (tests/lib/close.hpp), the
// worst element printed for every comparison.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <source_location>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "bf16.hpp"
#include "cpu.hpp"
#include "backend/backend.hpp"
#include "model/memory_plan.hpp"
#include "../lib/attention_p_rounding.hpp"
#include "../lib/close.hpp"
#include "../../cuda/gemm_args.hpp"  // linear_epilogue_plan (header-only, no CUDA)
#if PENTAD_TEST_CUDA
#include "cuda.hpp"
#endif

namespace {

using pentad::GateAct;
using pentad::Backend;
using pentad::Rope;
using pentad::RopeScaling;
using pentad::rope_attention_factor;
using pentad::rope_inv_freq;
using Vec = std::vector<float>;
using VecD = std::vector<double>;
using IVec = std::vector<int32_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ------------------------------------------------------------- backends ----

// Whether backend `name` can run here (why not, if it cannot).
bool backend_usable(const std::string& name, std::string* why) {
  if (name == "cpu") return true;
#if PENTAD_TEST_CUDA
  if (name == "cuda") return pentad::cuda_device_available(why);
#endif
  *why = "this binary was built without it (the cuda-release build's test_cuda_ops has it)";
  return false;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
#if PENTAD_TEST_CUDA
  if (name == "cuda") return pentad::make_cuda_backend(0);
#endif
  return pentad::make_cpu_backend(0);
}

// The backend under test of ReferenceOps (set by its SetUp).
Backend* g_host_backend = nullptr;

Backend& backend() { return *g_host_backend; }

// Backends whose memory the host addresses: the reference checks pass host
// vectors to the ops directly.
class ReferenceOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    static std::unique_ptr<Backend> be;
    std::string why;
    if (!backend_usable(GetParam(), &why)) GTEST_SKIP() << GetParam() << ": " << why;
    if (!be) be = make_backend(GetParam());
    g_host_backend = be.get();
  }
};

// ------------------------------------------------------------- helpers ----

Vec randn(size_t n, uint32_t seed, float sd = 1.0f, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, sd);
  Vec v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Concatenates its arguments as text (std::string operator+ trips a GCC 12
// -Wrestrict false positive).
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

VecD to_d(const Vec& v) { return VecD(v.begin(), v.end()); }

// Elementwise a + b (for "pre-filled accumulator + reference gradient").
VecD plus(const Vec& a, const VecD& b) {
  VecD r(b.size());
  for (size_t i = 0; i < b.size(); ++i) r[i] = double(a[i]) + b[i];
  return r;
}

// Fails (once, at the caller's line, with the worst element) unless
// |got-ref| <= atol + rtol*|ref| everywhere; infinities must match exactly,
// NaN never passes. Prints the worst element of every comparison.
template <class R>
void expect_close(const std::string& what, const Vec& got, const std::vector<R>& ref, double atol, double rtol,
                  std::source_location at = std::source_location::current()) {
  const pentad::test::CloseReport r = pentad::test::compare_close(got, ref, {.atol = atol, .rtol = rtol});
  std::printf("%-48s %s\n", what.c_str(), r.describe().c_str());
  if (!r.ok)
    ADD_FAILURE_AT(at.file_name(), int(at.line()))
        << what << ": " << r.describe() << " (atol " << atol << ", rtol " << rtol << ")";
}

void expect_bitwise(const std::string& what, const Vec& a, const Vec& b,
                    std::source_location at = std::source_location::current()) {
  const pentad::test::BitwiseReport r = pentad::test::compare_bitwise(std::span<const float>(a), std::span<const float>(b));
  if (a.size() != b.size())
    ADD_FAILURE_AT(at.file_name(), int(at.line())) << what << ": sizes " << a.size() << " and " << b.size();
  else if (!r.ok())
    ADD_FAILURE_AT(at.file_name(), int(at.line()))
        << what << ": first bitwise difference at " << r.first << ": " << a[r.first] << " vs " << b[r.first];
}

// ======================================= the CPU vs double references ====

// Central differences of a scalar function of x (double throughout).
VecD fd_grad(const std::function<double(const VecD&)>& f, VecD x, double h = 1e-5) {
  VecD g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

double dot(const VecD& a, const Vec& r) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * r[i];
  return s;
}

// Tolerances: fp32 kernel vs double reference, and vs finite differences.
constexpr double kAtol = 2e-5, kRtol = 2e-4;
constexpr double kFdAtol = 2e-4, kFdRtol = 2e-3;

// ---------------------------------------------------------------- memory ----

TEST_P(ReferenceOps, MemoryAlignedZeroedTracked) {
  Backend& be = backend();
  const size_t before = be.mem_stats().cur_bytes[int(pentad::Mem::scratch)];
  float* p = be.alloc(1001, pentad::Mem::scratch);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 1001; ++i) ASSERT_EQ(p[i], 0.0f);
  EXPECT_EQ(be.mem_stats().cur_bytes[int(pentad::Mem::scratch)], before + 1001 * sizeof(float));
  be.fill(p, 2.5f, 1001);
  Vec h(1001);
  be.to_host(h.data(), p, h.size() * sizeof(float));
  EXPECT_EQ(h[1000], 2.5f);
  be.free_bytes(p);
  EXPECT_EQ(be.mem_stats().cur_bytes[int(pentad::Mem::scratch)], before);
}

// ------------------------------------------------------------------ gemm ----

TEST_P(ReferenceOps, GemmAllTransposesWithStridesAndBeta) {
  const int N = 5, K = 9;
  const float alpha = 1.5f, beta = 0.5f;
  for (int M : {7, 1})  // M = 1: the one-row (decode) path
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int rows_a = ta ? K : M, cols_a = ta ? M : K, lda = cols_a + 3;
      const int rows_b = tb ? N : K, cols_b = tb ? K : N, ldb = cols_b + 2;
      const int ldc = N + 4;
      const Vec A = randn(size_t(rows_a) * lda, 1), Bm = randn(size_t(rows_b) * ldb, 2);
      Vec C = randn(size_t(M) * ldc, 3);
      VecD ref(C.begin(), C.end());
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double s = 0;
          for (int kk = 0; kk < K; ++kk) {
            const double a = ta ? A[size_t(kk) * lda + i] : A[size_t(i) * lda + kk];
            const double b = tb ? Bm[size_t(j) * ldb + kk] : Bm[size_t(kk) * ldb + j];
            s += a * b;
          }
          ref[size_t(i) * ldc + j] = alpha * s + beta * double(C[size_t(i) * ldc + j]);
        }
      backend().gemm(ta, tb, M, N, K, alpha, A.data(), lda, Bm.data(), ldb, beta, C.data(), ldc);
      expect_close(cat("gemm M=", M, " ta=", ta, " tb=", tb), C, ref, kAtol,
                   kRtol);
    }
}

TEST_P(ReferenceOps, GemmBatched) {
  const int M = 6, N = 4, K = 5, batch = 3;
  const long sa = M * K + 1, sb = K * N + 2, sc = M * N + 3;
  const Vec A = randn(sa * batch, 4), Bm = randn(sb * batch, 5);
  Vec C = randn(sc * batch, 6);
  VecD ref(C.begin(), C.end());
  for (int bt = 0; bt < batch; ++bt)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double s = 0;
        for (int kk = 0; kk < K; ++kk)
          s += double(A[bt * sa + i * K + kk]) * Bm[bt * sb + j * K + kk];  // B transposed
        ref[bt * sc + i * N + j] = 2.0 * s - double(C[bt * sc + i * N + j]);
      }
  backend().gemm_batched(false, true, M, N, K, 2.0f, A.data(), K, sa, Bm.data(), K, sb, -1.0f,
                         C.data(), N, sc, batch);
  expect_close("gemm_batched", C, ref, kAtol, kRtol);
}

// linear_fwd (a linear layer's GEMM, bias and GPT-2's GELU): against a
// double reference, and bitwise the separate ops it stands for on this
// backend (gemm, bias_add, gelu_fwd in turn), with and without bias and
// GELU, beta 0 and 0.5.
TEST_P(ReferenceOps, LinearForwardIsGemmBiasGelu) {
  const int N = 11, n_out = 24, n_in = 19;
  const Vec x = randn(size_t(N) * n_in, 31), w = randn(size_t(n_out) * n_in, 32, 0.3f), b = randn(n_out, 33);
  const Vec y0 = randn(size_t(N) * n_out, 34);
  for (int with_bias = 0; with_bias < 2; ++with_bias)
    for (int with_gelu = 0; with_gelu < 2; ++with_gelu)
      for (float beta : {0.0f, 0.5f}) {
        const std::string tag = cat("linear_fwd bias=", with_bias, " gelu=", with_gelu, " beta=", beta);
        Vec y = y0, act(y0.size(), -1.0f);
        backend().linear_fwd(y.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, n_out, n_in, beta,
                             with_gelu ? act.data() : nullptr);
        VecD ref(y.size()), ref_act(y.size());
        for (int n = 0; n < N; ++n)
          for (int o = 0; o < n_out; ++o) {
            double s = 0;
            for (int i = 0; i < n_in; ++i) s += double(x[size_t(n) * n_in + i]) * w[size_t(o) * n_in + i];
            const size_t e = size_t(n) * n_out + o;
            const double v = s + beta * double(y0[e]) + (with_bias ? double(b[size_t(o)]) : 0.0);
            ref[e] = v;
            ref_act[e] = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          }
        expect_close(tag, y, ref, kAtol, kRtol);
        if (with_gelu) expect_close(tag + " act", act, ref_act, kAtol, kRtol);
        else expect_bitwise(tag + " act untouched", act, Vec(y0.size(), -1.0f));
        // The separate ops, in the order linear_fwd's contract names.
        Vec ys = y0, acts(y0.size(), -1.0f);
        backend().gemm(false, true, N, n_out, n_in, 1.0f, x.data(), n_in, w.data(), n_in, beta, ys.data(), n_out);
        if (with_bias) backend().bias_add(ys.data(), b.data(), N, n_out);
        if (with_gelu) backend().gelu_fwd(acts.data(), ys.data(), ys.size());
        expect_bitwise(tag + " = gemm, bias_add, gelu_fwd", y, ys);
        expect_bitwise(tag + " act = gemm, bias_add, gelu_fwd", act, acts);
      }
}

// linear_bwd_input_gelu (GPT-2's MLP: the down projection's input gradient
// through the GELU): against a double reference, and bitwise the separate
// ops it stands for on this backend (gemm into dx, then gelu_bwd in place).
TEST_P(ReferenceOps, LinearBwdInputGeluIsGemmThenGeluBwd) {
  const int N = 13, n_out = 19, n_in = 24;
  const Vec dy = randn(size_t(N) * n_out, 35), w = randn(size_t(n_out) * n_in, 36, 0.3f);
  const Vec pre = randn(size_t(N) * n_in, 37, 2.0f);
  Vec dx(size_t(N) * n_in, -1.0f);
  backend().linear_bwd_input_gelu(dx.data(), dy.data(), w.data(), pre.data(), N, n_out, n_in);
  VecD ref(dx.size());
  const double c = 0.7978845608028654, a = 0.044715;
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < n_in; ++i) {
      double s = 0;
      for (int o = 0; o < n_out; ++o) s += double(dy[size_t(n) * n_out + o]) * w[size_t(o) * n_in + i];
      const size_t e = size_t(n) * n_in + i;
      const double v = pre[e], t = std::tanh(c * (v + a * v * v * v));
      ref[e] = s * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * a * v * v));
    }
  expect_close("linear_bwd_input_gelu", dx, ref, kAtol, kRtol);
  Vec dxs(dx.size(), -1.0f);
  backend().gemm(false, false, N, n_in, n_out, 1.0f, dy.data(), n_out, w.data(), n_in, 0.0f, dxs.data(), n_in);
  backend().gelu_bwd(dxs.data(), dxs.data(), pre.data(), dxs.size());
  expect_bitwise("linear_bwd_input_gelu = gemm, gelu_bwd", dx, dxs);
}

// ------------------------------------------------------------- MoE rows ----

// The MoE dispatch's rows: N tokens, k choices each, some dropped (-1), M
// kept rows in an order unrelated to the tokens'.
struct MoeRowsCase {
  int N = 9, k = 3, C = 37, M = 0;
  IVec row, row_token, row_choice;
  Vec w;
  MoeRowsCase() {
    std::vector<int> order;
    for (int i = 0; i < N * k; ++i)
      if (i % 4 != 1) order.push_back(i);  // choices 1, 5, 9, ... dropped
    std::reverse(order.begin(), order.end());
    M = int(order.size());
    row.assign(size_t(N) * k, -1);
    for (int m = 0; m < M; ++m) {
      row[size_t(order[size_t(m)])] = m;
      row_token.push_back(order[size_t(m)] / k);
      row_choice.push_back(order[size_t(m)]);
    }
    w = randn(size_t(N) * k, 71);
  }
};

TEST_P(ReferenceOps, MoeRowsGatherCombineAndBackward) {
  const MoeRowsCase c;
  const int N = c.N, k = c.k, C = c.C, M = c.M;
  const Vec x = randn(size_t(N) * C, 72), y = randn(size_t(M) * C, 73), dy = randn(size_t(N) * C, 74);
  Vec g(size_t(M) * C, -1.0f);
  backend().gather_rows(g.data(), x.data(), c.row_token.data(), M, C);
  for (int m = 0; m < M; ++m)
    for (int i = 0; i < C; ++i)
      ASSERT_EQ(g[size_t(m) * C + i], x[size_t(c.row_token[size_t(m)]) * C + i]) << "gather_rows m=" << m;
  // combine_rows, weighted and not: against a double sum.
  for (const bool weighted : {true, false}) {
    Vec out(size_t(N) * C, -1.0f);
    backend().combine_rows(out.data(), y.data(), c.row.data(), weighted ? c.w.data() : nullptr, N, k, C);
    VecD ref(out.size(), 0.0);
    for (int t = 0; t < N; ++t)
      for (int j = 0; j < k; ++j) {
        const int m = c.row[size_t(t) * k + j];
        if (m < 0) continue;
        const double wt = weighted ? c.w[size_t(t) * k + j] : 1.0;
        for (int i = 0; i < C; ++i) ref[size_t(t) * C + i] += wt * y[size_t(m) * C + i];
      }
    expect_close(weighted ? "combine_rows" : "combine_rows (w null)", out, ref, kAtol, kRtol);
  }
  // combine_rows_bwd: dsrc exact (one product), dw against a double dot;
  // the dropped choices' dw untouched.
  Vec dsrc(size_t(M) * C, -1.0f), dw(size_t(N) * k, 5.0f);
  backend().combine_rows_bwd(dsrc.data(), dw.data(), dy.data(), y.data(), c.row_token.data(), c.row_choice.data(),
                             c.w.data(), M, C);
  VecD dw_ref(dw.size(), 5.0);
  for (int m = 0; m < M; ++m) {
    const int t = c.row_token[size_t(m)], i = c.row_choice[size_t(m)];
    double d = 0;
    for (int q = 0; q < C; ++q) {
      ASSERT_EQ(dsrc[size_t(m) * C + q], c.w[size_t(i)] * dy[size_t(t) * C + q]) << "combine_rows_bwd dsrc m=" << m;
      d += double(dy[size_t(t) * C + q]) * y[size_t(m) * C + q];
    }
    dw_ref[size_t(i)] = d;
  }
  expect_close("combine_rows_bwd dw", dw, dw_ref, kAtol, kRtol);
  for (int i = 1; i < N * k; i += 4) EXPECT_EQ(dw[size_t(i)], 5.0f) << "a dropped choice's dw was written";
}

// ----------------------------------------------------------- elementwise ----

TEST_P(ReferenceOps, ElementwiseAddScaleBias) {
  const int N = 13, C = 70;
  const Vec a = randn(N * C, 7), b = randn(N * C, 8), bias = randn(C, 9);
  Vec out(N * C);
  backend().add(out.data(), a.data(), b.data(), out.size());
  VecD ref(out.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = double(a[i]) + b[i];
  expect_close("add", out, ref, 0, 1e-7);

  backend().scale(out.data(), 0.25f, out.size());
  for (auto& r : ref) r *= 0.25;
  expect_close("scale", out, ref, 0, 1e-7);

  Vec x = a;
  backend().bias_add(x.data(), bias.data(), N, C);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) ref[n * C + c] = double(a[n * C + c]) + bias[c];
  expect_close("bias_add", x, ref, 0, 1e-7);

  Vec dbias = randn(C, 10);  // accumulates
  VecD dref(dbias.begin(), dbias.end());
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) dref[c] += a[n * C + c];
  backend().bias_bwd(dbias.data(), a.data(), N, C);
  expect_close("bias_bwd", dbias, dref, kAtol, kRtol);
}

TEST_P(ReferenceOps, ElementwiseSumSquaresDeterministic) {
  const size_t n = (1u << 20) + 12345;
  const Vec x = randn(n, 11);
  double ref = 0;
  for (float v : x) ref += double(v) * v;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double s1 = backend().sum_squares(x.data(), n);
  omp_set_num_threads(2);
  const double s2 = backend().sum_squares(x.data(), n);
  omp_set_num_threads(3);
  const double s3 = backend().sum_squares(x.data(), n);
  omp_set_num_threads(saved);
  EXPECT_NEAR(s1, ref, 1e-9 * ref);
  EXPECT_EQ(std::memcmp(&s1, &s2, sizeof(double)), 0) << s1 << " vs " << s2;
  EXPECT_EQ(std::memcmp(&s1, &s3, sizeof(double)), 0) << s1 << " vs " << s3;
}

// ----------------------------------------------------------------- norms ----

VecD layernorm_ref(const VecD& x, const VecD& w, const VecD& b, int N, int C, double eps) {
  VecD out(x.size());
  for (int n = 0; n < N; ++n) {
    double m = 0, var = 0;
    for (int c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) var += (x[n * C + c] - m) * (x[n * C + c] - m);
    const double r = 1.0 / std::sqrt(var / C + eps);
    for (int c = 0; c < C; ++c) out[n * C + c] = (x[n * C + c] - m) * r * w[c] + b[c];
  }
  return out;
}

VecD rmsnorm_ref(const VecD& x, const VecD& w, int N, int C, double eps) {
  VecD out(x.size());
  for (int n = 0; n < N; ++n) {
    double ss = 0;
    for (int c = 0; c < C; ++c) ss += x[n * C + c] * x[n * C + c];
    const double r = 1.0 / std::sqrt(ss / C + eps);
    for (int c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] * r * w[c];
  }
  return out;
}

TEST_P(ReferenceOps, NormLayerNorm) {
  const int N = 6, C = 80;  // C > one 64-channel block
  const float eps = 1e-5f;
  const Vec x = randn(N * C, 12, 2.0f, 0.5f), w = randn(C, 13, 0.5f, 1.0f), b = randn(C, 14);
  Vec out(N * C), mean(N), rstd(N);
  backend().layernorm_fwd(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                          C, eps);
  expect_close("layernorm_fwd", out, layernorm_ref(to_d(x), to_d(w), to_d(b), N, C, eps), kAtol,
               kRtol);

  const Vec R = randn(N * C, 15);
  Vec dx = randn(N * C, 16), dw = randn(C, 17), db = randn(C, 18);
  const Vec dx0 = dx, dw0 = dw, db0 = db;
  backend().layernorm_bwd(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  // Analytic double reference.
  VecD gx(N * C), gw(C), gb(C);
  for (int n = 0; n < N; ++n) {
    double m = 0, var = 0;
    for (int c = 0; c < C; ++c) m += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) var += (x[n * C + c] - m) * (x[n * C + c] - m);
    const double r = 1.0 / std::sqrt(var / C + eps);
    double mg = 0, mgx = 0;
    for (int c = 0; c < C; ++c) {
      const double xh = (x[n * C + c] - m) * r, g = double(R[n * C + c]) * w[c];
      mg += g / C;
      mgx += g * xh / C;
      gw[c] += R[n * C + c] * xh;
      gb[c] += R[n * C + c];
    }
    for (int c = 0; c < C; ++c) {
      const double xh = (x[n * C + c] - m) * r;
      gx[n * C + c] = r * (double(R[n * C + c]) * w[c] - mg - xh * mgx);
    }
  }
  expect_close("layernorm_bwd dx", dx, plus(dx0, gx), kAtol, kRtol);
  expect_close("layernorm_bwd dw", dw, plus(dw0, gw), kAtol, kRtol);
  expect_close("layernorm_bwd db", db, plus(db0, gb), kAtol, kRtol);
  // Finite differences of L = sum(out * R).
  const VecD xd = to_d(x), wd = to_d(w), bd = to_d(b);
  const VecD fx = fd_grad([&](const VecD& v) { return dot(layernorm_ref(v, wd, bd, N, C, eps), R); }, xd);
  const VecD fw = fd_grad([&](const VecD& v) { return dot(layernorm_ref(xd, v, bd, N, C, eps), R); }, wd);
  const VecD fb = fd_grad([&](const VecD& v) { return dot(layernorm_ref(xd, wd, v, N, C, eps), R); }, bd);
  expect_close("layernorm_bwd dx (fd)", dx, plus(dx0, fx), kFdAtol, kFdRtol);
  expect_close("layernorm_bwd dw (fd)", dw, plus(dw0, fw), kFdAtol, kFdRtol);
  expect_close("layernorm_bwd db (fd)", db, plus(db0, fb), kFdAtol, kFdRtol);
}

// Each case with the weight as it is (w_offset 0) and as its difference
// from 1 (w_offset 1, Gemma's): the reference scales by w + w_offset.
TEST_P(ReferenceOps, NormRmsNorm) {
  const int N = 5, C = 72;
  const float eps = 1e-6f;
  const Vec x = randn(N * C, 19, 1.5f, 0.3f), w = randn(C, 20, 0.5f, 1.0f);
  for (const float off : {0.0f, 1.0f}) {
    SCOPED_TRACE("w_offset " + std::to_string(off));
    VecD ws = to_d(w);  // the scale the norm multiplies by
    for (double& v : ws) v += off;
    Vec out(N * C), rstd(N);
    backend().rmsnorm_fwd(out.data(), rstd.data(), x.data(), w.data(), N, C, eps, off);
    expect_close("rmsnorm_fwd", out, rmsnorm_ref(to_d(x), ws, N, C, eps), kAtol, kRtol);

    const Vec R = randn(N * C, 21);
    Vec dx = randn(N * C, 22), dw = randn(C, 23);
    const Vec dx0 = dx, dw0 = dw;
    backend().rmsnorm_bwd(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C, off);
    VecD gx(N * C), gw(C);
    for (int n = 0; n < N; ++n) {
      double ss = 0;
      for (int c = 0; c < C; ++c) ss += double(x[n * C + c]) * x[n * C + c];
      const double r = 1.0 / std::sqrt(ss / C + eps);
      double mgx = 0;
      for (int c = 0; c < C; ++c) {
        mgx += double(R[n * C + c]) * ws[c] * x[n * C + c] * r / C;
        gw[c] += R[n * C + c] * x[n * C + c] * r;
      }
      for (int c = 0; c < C; ++c)
        gx[n * C + c] = r * (double(R[n * C + c]) * ws[c] - x[n * C + c] * r * mgx);
    }
    expect_close("rmsnorm_bwd dx", dx, plus(dx0, gx), kAtol, kRtol);
    expect_close("rmsnorm_bwd dw", dw, plus(dw0, gw), kAtol, kRtol);
    const VecD xd = to_d(x), wd = to_d(w);
    auto scaled = [&](VecD v) {
      for (double& e : v) e += off;
      return v;
    };
    const VecD fx = fd_grad([&](const VecD& v) { return dot(rmsnorm_ref(v, ws, N, C, eps), R); }, xd);
    const VecD fw = fd_grad([&](const VecD& v) { return dot(rmsnorm_ref(xd, scaled(v), N, C, eps), R); }, wd);
    expect_close("rmsnorm_bwd dx (fd)", dx, plus(dx0, fx), kFdAtol, kFdRtol);
    expect_close("rmsnorm_bwd dw (fd)", dw, plus(dw0, fw), kFdAtol, kFdRtol);
  }
}

// ----------------------------------------------------------- activations ----

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

TEST_P(ReferenceOps, ActivationGelu) {
  const size_t n = 3000;
  Vec x = randn(n, 24, 3.0f);
  x[0] = 0.0f;
  x[1] = -30.0f;
  x[2] = 30.0f;
  Vec out(n);
  backend().gelu_fwd(out.data(), x.data(), n);
  VecD ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = gelu_ref(x[i]);
  expect_close("gelu_fwd", out, ref, 1e-6, 1e-5);

  const Vec R = randn(n, 25);
  Vec dx = randn(n, 26);  // WRITTEN: the old contents must not matter
  backend().gelu_bwd(dx.data(), R.data(), x.data(), n);
  VecD fd(n);
  for (size_t i = 0; i < n; ++i) {
    const double h = 1e-5;
    fd[i] = R[i] * (gelu_ref(x[i] + h) - gelu_ref(x[i] - h)) / (2 * h);
  }
  expect_close("gelu_bwd (fd)", dx, fd, 1e-5, 1e-4);
}

// A gated unit, act(gate) * up: SwiGLU (SiLU) and GeGLU (GELU, tanh form).
TEST_P(ReferenceOps, ActivationGatedUnits) {
  const size_t n = 2000;
  const Vec gate = randn(n, 27, 3.0f), up = randn(n, 28);
  for (const GateAct act : {GateAct::silu, GateAct::gelu_tanh}) {
    const std::string name = act == GateAct::silu ? "swiglu" : "geglu";
    auto f = [&](double g) { return act == GateAct::silu ? silu_ref(g) : gelu_ref(g); };
    Vec out(n);
    backend().glu_fwd(out.data(), gate.data(), up.data(), n, act);
    VecD ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = f(gate[i]) * up[i];
    expect_close(name + " fwd", out, ref, 1e-6, 1e-5);

    const Vec R = randn(n, 29);
    Vec dgate = randn(n, 30), dup = randn(n, 31);
    backend().glu_bwd(dgate.data(), dup.data(), R.data(), gate.data(), up.data(), n, act);
    VecD fg(n), fu(n);
    for (size_t i = 0; i < n; ++i) {
      const double h = 1e-5;
      fg[i] = R[i] * up[i] * (f(gate[i] + h) - f(gate[i] - h)) / (2 * h);
      fu[i] = R[i] * f(gate[i]);
    }
    expect_close(name + " bwd dgate (fd)", dgate, fg, 1e-5, 1e-4);
    expect_close(name + " bwd dup", dup, fu, 1e-6, 1e-5);
  }
}

// ------------------------------------------------------------------ rope ----

// inv_freq[i]: the angle per position of pair i; scale: the factor on every
// rotated pair (YaRN's attention factor).
// turned: the pairs that turn (a partial rotary's first rotary_dim / 2; -1:
// all); the others are copied.
VecD rope_ref(const VecD& x, int B, int T, int H, int D, int pos_offset, const VecD& inv_freq, double scale = 1.0,
              int turned = -1) {
  VecD out(x.size());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < D / 2; ++i) {
          const size_t o = ((size_t(b) * T + t) * H + h) * D + 2 * i;
          if (turned >= 0 && i >= turned) {
            out[o] = x[o];
            out[o + 1] = x[o + 1];
            continue;
          }
          const double a = (pos_offset + t) * inv_freq[size_t(i)];
          out[o] = scale * (x[o] * std::cos(a) - x[o + 1] * std::sin(a));
          out[o + 1] = scale * (x[o] * std::sin(a) + x[o + 1] * std::cos(a));
        }
  return out;
}

// Theta 10000, D = 8: the pairs turn by 1, 0.1, 0.01 and 0.001 radians per
// position, wavelengths 2*pi/f of 6.28, 62.8, 628 and 6283 positions.
// Llama 3.1's scaling with original context 64, low 1, high 4, factor 8:
// below 64/4 = 16 kept (pair 0), above 64/1 = 64 slowed 8x (pairs 2 and 3),
// in between (pair 1) interpolated by s = (64 / 62.83 - 1) / (4 - 1).
Rope llama3_rope_64() {
  return {.theta = 10000.0, .scaling = RopeScaling::llama3, .factor = 8.0, .low_freq_factor = 1.0,
          .high_freq_factor = 4.0, .original_context = 64.0};
}
VecD llama3_inv_freq_64() {
  const double s = (64.0 * 0.1 / (2.0 * M_PI) - 1.0) / 3.0;
  return {1.0, (1.0 - s) * 0.1 / 8.0 + s * 0.1, 0.01 / 8.0, 0.001 / 8.0};
}
// YaRN with original context 2048, factor 4, beta_fast 32, beta_slow 1, at
// theta 10000 and D = 8: pair d(r) = 8 ln(2048 / (2 pi r)) / (2 ln 10000)
// makes r turns over the context: d(32) = 1.008 and d(1) = 2.513. Truncated,
// the ramp runs from pair 1 to pair 3: pairs 0 and 1 kept, pair 2 half way
// (s = 1/2: 0.01 / 2 + 0.01 / 8), pair 3 slowed 4 times. Untruncated, pair 2
// sits at s = (2 - 1.008) / (2.513 - 1.008). Attention factor 0.1 ln 4 + 1.
Rope yarn_rope_2048(bool truncate) {
  return {.theta = 10000.0, .scaling = RopeScaling::yarn, .factor = 4.0, .original_context = 2048.0,
          .beta_fast = 32.0, .beta_slow = 1.0, .truncate = truncate};
}
VecD yarn_inv_freq_2048(bool truncate) {
  if (truncate) return {1.0, 0.1, 0.00625, 0.00025};
  const double lo = 8.0 * std::log(2048.0 / (2.0 * M_PI * 32.0)) / (2.0 * std::log(10000.0));
  const double hi = 8.0 * std::log(2048.0 / (2.0 * M_PI)) / (2.0 * std::log(10000.0));
  const double s = (2.0 - lo) / (hi - lo);
  return {1.0, 0.1, (1.0 - s) * 0.01 + s * 0.01 / 4.0, 0.00025};
}
const double kYarnFactor4 = 1.0 + 0.1 * std::log(4.0);
// LongRoPE at theta 10000 and D = 8 with the pair factors 1, 2, 4, 10: pair i
// turns 10000^(-i/4) / factor_i; extension 16 over an original context of
// 256, so the attention factor sqrt(1 + ln 16 / ln 256) = sqrt(1.5).
Rope longrope_rope() {
  Rope r{.theta = 10000.0, .scaling = RopeScaling::longrope, .factor = 16.0, .original_context = 256.0};
  const double f[] = {1.0, 2.0, 4.0, 10.0};
  for (int i = 0; i < 4; ++i) r.pair_factor[i] = f[i];
  return r;
}
const VecD kLongropeInvFreq = {1.0, 0.05, 0.0025, 0.0001};
const double kLongropeFactor = std::sqrt(1.5);

TEST(Rope, InverseFrequencies) {
  const Rope plain{.theta = 10000.0};
  const VecD unscaled = {1.0, 0.1, 0.01, 0.001};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(rope_inv_freq(plain, i, 8), unscaled[size_t(i)], 1e-15) << "pair " << i;
  const VecD scaled = llama3_inv_freq_64();
  EXPECT_GT(scaled[1], 0.1 / 8.0);  // the middle band lies between the two ends
  EXPECT_LT(scaled[1], 0.1);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(rope_inv_freq(llama3_rope_64(), i, 8), scaled[size_t(i)], 1e-15) << "pair " << i;
  EXPECT_EQ(rope_attention_factor(plain), 1.0);
  EXPECT_EQ(rope_attention_factor(llama3_rope_64()), 1.0);
  const Rope linear{.theta = 10000.0, .scaling = RopeScaling::linear, .factor = 4.0};  // every pair 4x slower
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(rope_inv_freq(linear, i, 8), unscaled[size_t(i)] / 4.0, 1e-15) << "pair " << i;
  EXPECT_EQ(rope_attention_factor(linear), 1.0);
}

TEST(Rope, YarnInverseFrequenciesAndAttentionFactor) {
  for (bool truncate : {true, false}) {
    SCOPED_TRACE(truncate ? "truncate" : "no truncate");
    const VecD yarn = yarn_inv_freq_2048(truncate);
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(rope_inv_freq(yarn_rope_2048(truncate), i, 8), yarn[size_t(i)], 1e-15) << "pair " << i;
    EXPECT_NEAR(rope_attention_factor(yarn_rope_2048(truncate)), kYarnFactor4, 1e-15);
  }
  EXPECT_LT(yarn_inv_freq_2048(false)[2], 0.00625);  // untruncated, pair 2 lies further along the ramp
  Rope r = yarn_rope_2048(true);
  r.attention_factor = 1.5;  // given: used as it is
  EXPECT_EQ(rope_attention_factor(r), 1.5);
  r = yarn_rope_2048(true);
  r.factor = 1.0;  // no scaling: no attention factor
  EXPECT_EQ(rope_attention_factor(r), 1.0);
  // The ramp's ends clamped to the head: with beta_fast 1e6 pair d(1e6) < 0
  // is 0, with beta_slow 1e-9 d(1e-9) > 7 is 7, so s = i / 7.
  r = yarn_rope_2048(false);
  r.beta_fast = 1e6;
  r.beta_slow = 1e-9;
  for (int i = 0; i < 4; ++i) {
    const double f = std::pow(10000.0, -i / 4.0), s = i / 7.0;
    EXPECT_NEAR(rope_inv_freq(r, i, 8), (1.0 - s) * f + s * f / 4.0, 1e-15) << "pair " << i;
  }
}

TEST(Rope, LongRopeInverseFrequenciesAndAttentionFactor) {
  const Rope r = longrope_rope();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(rope_inv_freq(r, i, 8), kLongropeInvFreq[size_t(i)], 1e-15) << "pair " << i;
  EXPECT_NEAR(rope_attention_factor(r), kLongropeFactor, 1e-15);
  Rope given = r;
  given.attention_factor = 1.2;  // given: used as it is
  EXPECT_EQ(rope_attention_factor(given), 1.2);
  Rope unscaled = r;
  unscaled.factor = 1.0;  // no extension: no attention factor
  EXPECT_EQ(rope_attention_factor(unscaled), 1.0);
}

TEST_P(ReferenceOps, RopeForwardBackward) {
  const int B = 2, T = 5, H = 3, D = 8, pos_offset = 37;
  const Rope plain{.theta = 10000.0};
  for (const auto& [name, rope, inv_freq, scale] :
       {std::tuple{"plain", plain, VecD{1.0, 0.1, 0.01, 0.001}, 1.0},
        std::tuple{"llama3", llama3_rope_64(), llama3_inv_freq_64(), 1.0},
        std::tuple{"linear", Rope{.theta = 10000.0, .scaling = RopeScaling::linear, .factor = 4.0},
                   VecD{0.25, 0.025, 0.0025, 0.00025}, 1.0},
        std::tuple{"yarn", yarn_rope_2048(true), yarn_inv_freq_2048(true), kYarnFactor4},
        std::tuple{"longrope", longrope_rope(), kLongropeInvFreq, kLongropeFactor}}) {
    SCOPED_TRACE(name);
    const Vec x = randn(size_t(B) * T * H * D, 32);
    Vec y = x;
    backend().rope_fwd(y.data(), B, T, H, D, pos_offset, rope);
    expect_close("rope_fwd", y, rope_ref(to_d(x), B, T, H, D, pos_offset, inv_freq, scale), kAtol, kRtol);

    const Vec R = randn(x.size(), 33);
    Vec g = R;
    backend().rope_bwd(g.data(), B, T, H, D, pos_offset, rope);
    const VecD fd = fd_grad(
        [&](const VecD& v) { return dot(rope_ref(v, B, T, H, D, pos_offset, inv_freq, scale), R); }, to_d(x));
    expect_close("rope_bwd (fd)", g, fd, kFdAtol, kFdRtol);
    backend().rope_bwd(y.data(), B, T, H, D, pos_offset, rope);  // the forward's transpose: scale^2 x
    VecD x2 = to_d(x);
    for (double& v : x2) v *= scale * scale;
    expect_close("rope_bwd(rope_fwd(x)) = scale^2 x", y, x2, kAtol, kRtol);
  }
}

// A partial rotary (rotary_dim 4 of D = 8): pairs 0 and 1 turn as a head of
// 4 would, by theta^(-2i/4) = 1 and 0.01 (with LongRoPE's factors 1 and 2:
// 1 and 0.005, scaled by sqrt(1.5)); pairs 2 and 3 pass unchanged and
// unscaled.
TEST_P(ReferenceOps, RopePartialRotaryForwardBackward) {
  const int B = 2, T = 5, H = 3, D = 8, pos_offset = 37;
  Rope plain{.theta = 10000.0};
  plain.rotary_dim = 4;
  Rope longrope = longrope_rope();
  longrope.rotary_dim = 4;
  for (const auto& [name, rope, inv_freq, scale] :
       {std::tuple{"plain", plain, VecD{1.0, 0.01}, 1.0},
        std::tuple{"longrope", longrope, VecD{1.0, 0.005}, kLongropeFactor}}) {
    SCOPED_TRACE(name);
    const Vec x = randn(size_t(B) * T * H * D, 34);
    Vec y = x;
    backend().rope_fwd(y.data(), B, T, H, D, pos_offset, rope);
    expect_close("rope_fwd", y, rope_ref(to_d(x), B, T, H, D, pos_offset, inv_freq, scale, 2), kAtol, kRtol);
    const Vec R = randn(x.size(), 35);
    Vec g = R;
    backend().rope_bwd(g.data(), B, T, H, D, pos_offset, rope);
    const VecD fd = fd_grad(
        [&](const VecD& v) { return dot(rope_ref(v, B, T, H, D, pos_offset, inv_freq, scale, 2), R); }, to_d(x));
    expect_close("rope_bwd (fd)", g, fd, kFdAtol, kFdRtol);
  }
}

// ------------------------------------------------------------- embedding ----

TEST_P(ReferenceOps, EmbeddingVocabSliceForwardBackward) {
  const int B = 2, T = 5, C = 70, V = 6, vocab_start = 4, pos_offset = 3, max_pos = 10;
  // Tokens in [4, 10) belong to the slice; 1, 11 and 12 do not; 5 repeats.
  const std::vector<int32_t> tokens = {5, 1, 5, 9, 11, 4, 5, 12, 7, 5};
  const Vec wte = randn(size_t(V) * C, 34), wpe = randn(size_t(max_pos) * C, 35);
  for (int with_wpe = 0; with_wpe < 2; ++with_wpe) {
    const float* wpe_p = with_wpe ? wpe.data() : nullptr;
    Vec out(size_t(B) * T * C, 99.0f);
    backend().embedding_fwd(out.data(), tokens.data(), wte.data(), wpe_p, B, T, C, vocab_start,
                            V, pos_offset);
    VecD ref(out.size(), 0.0);
    for (int bt = 0; bt < B * T; ++bt) {
      const int row = tokens[bt] - vocab_start;
      for (int c = 0; c < C; ++c) {
        double v = (row >= 0 && row < V) ? wte[size_t(row) * C + c] : 0.0;
        if (with_wpe) v += wpe[size_t(pos_offset + bt % T) * C + c];
        ref[size_t(bt) * C + c] = v;
      }
    }
    expect_close(cat("embedding_fwd wpe=", with_wpe), out, ref, 0, 1e-7);

    const Vec R = randn(out.size(), 36);
    Vec dwte = randn(wte.size(), 37), dwpe = randn(wpe.size(), 38);
    const Vec dwte0 = dwte, dwpe0 = dwpe;
    backend().embedding_bwd(dwte.data(), with_wpe ? dwpe.data() : nullptr, R.data(),
                            tokens.data(), B, T, C, vocab_start, V, pos_offset);
    VecD gte(dwte.size()), gpe(dwpe.size());
    for (int bt = 0; bt < B * T; ++bt) {
      const int row = tokens[bt] - vocab_start;
      for (int c = 0; c < C; ++c) {
        if (row >= 0 && row < V) gte[size_t(row) * C + c] += R[size_t(bt) * C + c];
        if (with_wpe) gpe[size_t(pos_offset + bt % T) * C + c] += R[size_t(bt) * C + c];
      }
    }
    expect_close("embedding_bwd dwte", dwte, plus(dwte0, gte), 1e-6, 1e-6);
    expect_close("embedding_bwd dwpe", dwpe, plus(dwpe0, gpe), 1e-6, 1e-6);
  }
}

// ------------------------------------------------------------- attention ----

struct AttnShape {
  int B, Tq, Tk, H, Hkv, D, q_offset, k_offset;
  bool causal;
  std::string str() const {
    return cat("B", B, " Tq", Tq, " Tk", Tk, " H", H, " Hkv", Hkv, " D", D, " qo", q_offset,
               " ko", k_offset, causal ? " causal" : " full");
  }
  size_t nq() const { return size_t(B) * Tq * H * D; }
  size_t nk() const { return size_t(B) * Tk * Hkv * D; }
  size_t nlse() const { return size_t(B) * H * Tq; }
};

bool visible(const AttnShape& s, int i, int j) {
  return !s.causal || s.k_offset + j <= s.q_offset + i;
}

// Double reference: out (B,Tq,H,D), lse (B,H,Tq); optional gradients.
void attn_ref(const AttnShape& s, const VecD& q, const VecD& k, const VecD& v, VecD* out,
              VecD* lse, const Vec* dout = nullptr, VecD* dq = nullptr, VecD* dk = nullptr,
              VecD* dv = nullptr) {
  const double scale = 1.0 / std::sqrt(double(s.D));
  const int g = s.H / s.Hkv;
  if (out) out->assign(s.nq(), 0.0);
  if (lse) lse->assign(s.nlse(), 0.0);
  if (dq) dq->assign(s.nq(), 0.0), dk->assign(s.nk(), 0.0), dv->assign(s.nk(), 0.0);
  auto qi = [&](int b, int t, int h) { return ((size_t(b) * s.Tq + t) * s.H + h) * s.D; };
  auto ki = [&](int b, int t, int h) { return ((size_t(b) * s.Tk + t) * s.Hkv + h) * s.D; };
  VecD p(s.Tk), dp(s.Tk);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      for (int i = 0; i < s.Tq; ++i) {
        const int kh = h / g;
        double m = -kInf;
        for (int j = 0; j < s.Tk; ++j) {
          p[j] = -kInf;
          if (!visible(s, i, j)) continue;
          double d = 0;
          for (int e = 0; e < s.D; ++e) d += q[qi(b, i, h) + e] * k[ki(b, j, kh) + e];
          p[j] = d * scale;
          m = std::max(m, p[j]);
        }
        double l = -kInf;
        if (m > -kInf) {
          double sum = 0;
          for (int j = 0; j < s.Tk; ++j) sum += (p[j] > -kInf) ? std::exp(p[j] - m) : 0.0;
          l = m + std::log(sum);
        }
        if (lse) (*lse)[(size_t(b) * s.H + h) * s.Tq + i] = l;
        for (int j = 0; j < s.Tk; ++j) p[j] = (p[j] > -kInf) ? std::exp(p[j] - l) : 0.0;
        if (out)
          for (int j = 0; j < s.Tk; ++j)
            for (int e = 0; e < s.D; ++e) (*out)[qi(b, i, h) + e] += p[j] * v[ki(b, j, kh) + e];
        if (!dq) continue;
        double drow = 0;
        for (int j = 0; j < s.Tk; ++j) {
          dp[j] = 0;
          for (int e = 0; e < s.D; ++e) dp[j] += double((*dout)[qi(b, i, h) + e]) * v[ki(b, j, kh) + e];
          drow += p[j] * dp[j];
        }
        for (int j = 0; j < s.Tk; ++j) {
          const double ds = p[j] * (dp[j] - drow);
          for (int e = 0; e < s.D; ++e) {
            (*dq)[qi(b, i, h) + e] += scale * ds * k[ki(b, j, kh) + e];
            (*dk)[ki(b, j, kh) + e] += scale * ds * q[qi(b, i, h) + e];
            (*dv)[ki(b, j, kh) + e] += p[j] * (*dout)[qi(b, i, h) + e];
          }
        }
      }
}

struct AttnData {
  Vec q, k, v, dout;
  AttnData(const AttnShape& s, uint32_t seed)
      : q(randn(s.nq(), seed)), k(randn(s.nk(), seed + 1)), v(randn(s.nk(), seed + 2)),
        dout(randn(s.nq(), seed + 3)) {}
};

struct AttnOut {
  Vec out, lse, probs;
};

AttnOut run_attn_fwd(const AttnShape& s, const AttnData& d, bool keep_probs) {
  AttnOut r{Vec(s.nq(), 7.0f), Vec(s.nlse(), 7.0f), {}};
  if (keep_probs) r.probs.assign(s.nlse() * s.Tk, 7.0f);
  backend().attention_fwd(r.out.data(), r.lse.data(), keep_probs ? r.probs.data() : nullptr,
                          d.q.data(), d.k.data(), d.v.data(), s.B, s.Tq, s.Tk, s.H, s.Hkv, s.D,
                          s.q_offset, s.k_offset, s.causal);
  return r;
}

const std::vector<AttnShape> kAttnShapes = {
    {2, 6, 6, 4, 4, 8, 0, 0, true},     // causal MHA
    {2, 6, 6, 4, 4, 8, 0, 0, false},    // non-causal
    {1, 5, 7, 4, 2, 4, 3, 0, true},     // GQA 2 heads per kv head, Tq != Tk, offset
    {2, 4, 6, 4, 1, 4, 0, 2, true},     // MQA; rows 0, 1 fully masked (k_offset > q_offset)
    {1, 70, 70, 2, 1, 8, 0, 0, true},   // two 64-row blocks
    {1, 67, 66, 2, 2, 8, 10, 40, true}, // offsets, masked rows spanning a block
};

TEST_P(ReferenceOps, AttentionForwardMatchesReference) {
  for (const AttnShape& s : kAttnShapes) {
    SCOPED_TRACE(s.str());
    const AttnData d(s, 40);
    const AttnOut r = run_attn_fwd(s, d, true);
    VecD out, lse;
    attn_ref(s, to_d(d.q), to_d(d.k), to_d(d.v), &out, &lse);
    expect_close("attention out", r.out, out, kAtol, kRtol);
    expect_close("attention lse", r.lse, lse, kAtol, kRtol);
    for (float x : r.probs) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST_P(ReferenceOps, AttentionBackwardMatchesReferenceAndFd) {
  for (const AttnShape& s : kAttnShapes) {
    SCOPED_TRACE(s.str());
    const AttnData d(s, 50);
    const AttnOut r = run_attn_fwd(s, d, false);
    Vec dq = randn(s.nq(), 51), dk = randn(s.nk(), 52), dv = randn(s.nk(), 53);
    const Vec dq0 = dq, dk0 = dk, dv0 = dv;
    backend().attention_bwd(dq.data(), dk.data(), dv.data(), d.dout.data(), r.out.data(),
                            r.lse.data(), nullptr, d.q.data(), d.k.data(), d.v.data(), s.B, s.Tq,
                            s.Tk, s.H, s.Hkv, s.D, s.q_offset, s.k_offset, s.causal);
    const VecD qd = to_d(d.q), kd = to_d(d.k), vd = to_d(d.v);
    VecD gq, gk, gv;
    attn_ref(s, qd, kd, vd, nullptr, nullptr, &d.dout, &gq, &gk, &gv);
    expect_close("attention dq", dq, plus(dq0, gq), kAtol, kRtol);
    expect_close("attention dk", dk, plus(dk0, gk), kAtol, kRtol);
    expect_close("attention dv", dv, plus(dv0, gv), kAtol, kRtol);
    if (s.Tq > 8) continue;  // finite differences on the small shapes only
    auto loss = [&](const VecD& qq, const VecD& kk, const VecD& vv) {
      VecD out;
      attn_ref(s, qq, kk, vv, &out, nullptr);
      return dot(out, d.dout);
    };
    expect_close("attention dq (fd)", dq,
                 plus(dq0, fd_grad([&](const VecD& x) { return loss(x, kd, vd); }, qd)), kFdAtol,
                 kFdRtol);
    expect_close("attention dk (fd)", dk,
                 plus(dk0, fd_grad([&](const VecD& x) { return loss(qd, x, vd); }, kd)), kFdAtol,
                 kFdRtol);
    expect_close("attention dv (fd)", dv,
                 plus(dv0, fd_grad([&](const VecD& x) { return loss(qd, kd, x); }, vd)), kFdAtol,
                 kFdRtol);
  }
}

TEST_P(ReferenceOps, AttentionFullyMaskedRowsAreZeroNotNan) {
  const AttnShape s{1, 4, 4, 2, 1, 4, 0, 2, true};  // rows 0, 1 see no key
  const AttnData d(s, 60);
  const AttnOut r = run_attn_fwd(s, d, true);
  for (int h = 0; h < s.H; ++h)
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(r.lse[h * s.Tq + i], -std::numeric_limits<float>::infinity());
      for (int e = 0; e < s.D; ++e) EXPECT_EQ(r.out[(i * s.H + h) * s.D + e], 0.0f);
    }
  for (int pass = 0; pass < 2; ++pass) {
    Vec dq(s.nq()), dk(s.nk()), dv(s.nk());
    backend().attention_bwd(dq.data(), dk.data(), dv.data(), d.dout.data(), r.out.data(),
                            r.lse.data(), pass ? r.probs.data() : nullptr, d.q.data(), d.k.data(),
                            d.v.data(), s.B, s.Tq, s.Tk, s.H, s.Hkv, s.D, s.q_offset, s.k_offset,
                            s.causal);
    for (float x : dq) ASSERT_TRUE(std::isfinite(x));
    for (float x : dk) ASSERT_TRUE(std::isfinite(x));
    for (int h = 0; h < s.H; ++h)
      for (int i = 0; i < 2; ++i)
        for (int e = 0; e < s.D; ++e) EXPECT_EQ(dq[(i * s.H + h) * s.D + e], 0.0f);
  }
}

TEST_P(ReferenceOps, AttentionKeptAndRecomputedProbsGiveIdenticalGradients) {
  for (const AttnShape& s : kAttnShapes) {
    SCOPED_TRACE(s.str());
    const AttnData d(s, 70);
    const AttnOut r = run_attn_fwd(s, d, true);
    const AttnOut r2 = run_attn_fwd(s, d, false);
    expect_bitwise("out with/without probs", r.out, r2.out);
    Vec grads[2][3];
    for (int pass = 0; pass < 2; ++pass) {
      Vec& dq = grads[pass][0] = Vec(s.nq());
      Vec& dk = grads[pass][1] = Vec(s.nk());
      Vec& dv = grads[pass][2] = Vec(s.nk());
      backend().attention_bwd(dq.data(), dk.data(), dv.data(), d.dout.data(), r.out.data(),
                              r.lse.data(), pass ? r.probs.data() : nullptr, d.q.data(),
                              d.k.data(), d.v.data(), s.B, s.Tq, s.Tk, s.H, s.Hkv, s.D,
                              s.q_offset, s.k_offset, s.causal);
    }
    expect_bitwise("dq", grads[0][0], grads[1][0]);
    expect_bitwise("dk", grads[0][1], grads[1][1]);
    expect_bitwise("dv", grads[0][2], grads[1][2]);
  }
}

// Double reference of train.dtype = bf16's attention (cpu/attention.cpp):
// the products' operands rounded to bf16 (q, k, v, dO; P where it multiplies
// V and dO; dS where it multiplies K and Q), everything else exact; delta is
// rowsum(dO * O) of the fp32 dO and the bf16 forward's O rounded to bf16.
void attn_ref_bf16(const AttnShape& s, const Vec& q32, const Vec& k32, const Vec& v32, const Vec& dout32,
                   VecD& out, VecD& lse, VecD& dq, VecD& dk, VecD& dv) {
  auto r = [](float x) { return double(pentad::round_bf16(x)); };
  auto rd = [](double x) { return double(pentad::round_bf16(float(x))); };
  const double scale = 1.0 / std::sqrt(double(s.D));
  const int g = s.H / s.Hkv;
  out.assign(s.nq(), 0.0), lse.assign(s.nlse(), 0.0);
  dq.assign(s.nq(), 0.0), dk.assign(s.nk(), 0.0), dv.assign(s.nk(), 0.0);
  auto qi = [&](int b, int t, int h) { return ((size_t(b) * s.Tq + t) * s.H + h) * s.D; };
  auto ki = [&](int b, int t, int h) { return ((size_t(b) * s.Tk + t) * s.Hkv + h) * s.D; };
  VecD p(s.Tk);
  for (int pass = 0; pass < 2; ++pass)  // forward, then backward with the full O
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.H; ++h)
        for (int i = 0; i < s.Tq; ++i) {
          const int kh = h / g;
          double m = -kInf;
          for (int j = 0; j < s.Tk; ++j) {
            p[j] = -kInf;
            if (!visible(s, i, j)) continue;
            double d = 0;
            for (int e = 0; e < s.D; ++e) d += r(q32[qi(b, i, h) + e]) * r(k32[ki(b, j, kh) + e]);
            p[j] = d * scale;
            m = std::max(m, p[j]);
          }
          double l = -kInf;
          if (m > -kInf) {
            double sum = 0;
            for (int j = 0; j < s.Tk; ++j) sum += p[j] > -kInf ? std::exp(p[j] - m) : 0.0;
            l = m + std::log(sum);
          }
          for (int j = 0; j < s.Tk; ++j) p[j] = p[j] > -kInf ? std::exp(p[j] - l) : 0.0;
          if (pass == 0) {
            lse[(size_t(b) * s.H + h) * s.Tq + i] = l;
            for (int j = 0; j < s.Tk; ++j)
              for (int e = 0; e < s.D; ++e) out[qi(b, i, h) + e] += rd(p[j]) * r(v32[ki(b, j, kh) + e]);
            continue;
          }
          double drow = 0;
          for (int e = 0; e < s.D; ++e) drow += double(dout32[qi(b, i, h) + e]) * rd(out[qi(b, i, h) + e]);
          for (int j = 0; j < s.Tk; ++j) {
            double dpj = 0;
            for (int e = 0; e < s.D; ++e) dpj += r(dout32[qi(b, i, h) + e]) * r(v32[ki(b, j, kh) + e]);
            const double ds = rd(p[j] * (dpj - drow));
            for (int e = 0; e < s.D; ++e) {
              dq[qi(b, i, h) + e] += scale * ds * r(k32[ki(b, j, kh) + e]);
              dk[ki(b, j, kh) + e] += scale * ds * r(q32[qi(b, i, h) + e]);
              dv[ki(b, j, kh) + e] += rd(p[j]) * r(dout32[qi(b, i, h) + e]);
            }
          }
        }
}

// train.dtype = bf16: the attention's products take bf16-rounded operands.
// Against the bf16 reference the error is fp32 rounding (and the rare P or
// dS that rounds the other way); against the fp32 reference it is the bf16
// rounding, far larger, so the rounding is really applied. Kept and
// recomputed probabilities still give bit-identical gradients.
TEST_P(ReferenceOps, AttentionBf16RoundsTheProductOperands) {
  Backend& be = backend();
  be.set_compute_dtype(pentad::Dtype::bf16);
  for (const AttnShape& s : kAttnShapes) {
    SCOPED_TRACE(s.str());
    const AttnData d(s, 80);
    const AttnOut r = run_attn_fwd(s, d, true);
    Vec grads[2][3];
    for (int pass = 0; pass < 2; ++pass) {
      for (int t = 0; t < 3; ++t) grads[pass][t] = Vec(t == 0 ? s.nq() : s.nk(), 0.0f);
      be.attention_bwd(grads[pass][0].data(), grads[pass][1].data(), grads[pass][2].data(), d.dout.data(),
                       r.out.data(), r.lse.data(), pass ? r.probs.data() : nullptr, d.q.data(), d.k.data(),
                       d.v.data(), s.B, s.Tq, s.Tk, s.H, s.Hkv, s.D, s.q_offset, s.k_offset, s.causal);
    }
    for (int t = 0; t < 3; ++t) expect_bitwise("kept/recomputed probs", grads[0][t], grads[1][t]);
    VecD out, lse, dq, dk, dv;
    attn_ref_bf16(s, d.q, d.k, d.v, d.dout, out, lse, dq, dk, dv);
    VecD out32, lse32, dq32, dk32, dv32;
    attn_ref(s, to_d(d.q), to_d(d.k), to_d(d.v), &out32, &lse32, &d.dout, &dq32, &dk32, &dv32);
    const std::pair<const Vec*, std::pair<const VecD*, const VecD*>> all[] = {
        {&r.out, {&out, &out32}},       {&r.lse, {&lse, &lse32}},       {&grads[0][0], {&dq, &dq32}},
        {&grads[0][1], {&dk, &dk32}},   {&grads[0][2], {&dv, &dv32}}};
    const char* names[] = {"out", "lse", "dq", "dk", "dv"};
    for (int t = 0; t < 5; ++t) {
      const Vec& got = *all[t].first;
      const VecD &ref = *all[t].second.first, &ref32 = *all[t].second.second;
      double e16 = 0, e32 = 0, scale = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::isinf(ref[i])) {
          EXPECT_EQ(double(got[i]), ref[i]) << names[t] << " " << i;
          continue;
        }
        e16 = std::max(e16, std::fabs(got[i] - ref[i]));
        e32 = std::max(e32, std::fabs(got[i] - ref32[i]));
        scale = std::max(scale, std::fabs(ref[i]));
      }
      std::printf("  %s %-3s max|ref| %.3g  |got - bf16 ref| %.3g  |got - fp32 ref| %.3g\n", s.str().c_str(),
                  names[t], scale, e16, e32);
      EXPECT_LE(e16, 1e-3 * scale + 1e-5) << names[t];
      EXPECT_GE(e32, 8 * e16) << names[t] << ": no sign of the bf16 rounding";
    }
  }
  be.set_compute_dtype(pentad::Dtype::fp32);
}

// Ring attention: keys split in two blocks, forward merged by lse, backward of
// each block run with the merged out/lse; must equal the one-block result.
TEST_P(ReferenceOps, AttentionSplitKeyMergeMatchesSingleBlock) {
  const std::vector<AttnShape> shapes = {{2, 6, 8, 4, 2, 4, 2, 0, true},
                                         {1, 8, 8, 4, 4, 8, 0, 0, true},
                                         {1, 5, 8, 2, 1, 4, 0, 0, false}};
  for (const AttnShape& s : shapes) {
    SCOPED_TRACE(s.str());
    const AttnData d(s, 80);
    const AttnOut full = run_attn_fwd(s, d, false);
    const int half = s.Tk / 2;
    AttnShape sh = s;
    sh.Tk = half;
    // The two key halves as separate (B, Tk/2, Hkv, D) tensors.
    AttnData blk[2] = {AttnData(sh, 1), AttnData(sh, 1)};
    const size_t row = size_t(s.Hkv) * s.D;
    for (int part = 0; part < 2; ++part)
      for (int b = 0; b < s.B; ++b)
        for (int t = 0; t < half; ++t) {
          const size_t src = (size_t(b) * s.Tk + part * half + t) * row;
          const size_t dst = (size_t(b) * half + t) * row;
          std::copy_n(d.k.begin() + src, row, blk[part].k.begin() + dst);
          std::copy_n(d.v.begin() + src, row, blk[part].v.begin() + dst);
        }
    AttnOut parts[2];
    for (int part = 0; part < 2; ++part) {
      AttnShape sp = sh;
      sp.k_offset = s.k_offset + part * half;
      blk[part].q = d.q;
      parts[part] = run_attn_fwd(sp, blk[part], false);
    }
    Vec out(s.nq()), lse(s.nlse());
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.H; ++h)
        for (int i = 0; i < s.Tq; ++i) {
          const size_t li = (size_t(b) * s.H + h) * s.Tq + i;
          const double l0 = parts[0].lse[li], l1 = parts[1].lse[li];
          const double m = std::max(l0, l1);
          const double l = m == -kInf ? -kInf : m + std::log(std::exp(l0 - m) + std::exp(l1 - m));
          lse[li] = float(l);
          for (int e = 0; e < s.D; ++e) {
            const size_t oi = ((size_t(b) * s.Tq + i) * s.H + h) * s.D + e;
            out[oi] = l == -kInf ? 0.0f
                                 : float(std::exp(l0 - l) * parts[0].out[oi] +
                                         std::exp(l1 - l) * parts[1].out[oi]);
          }
        }
    expect_close("merged out", out, to_d(full.out), kAtol, kRtol);
    expect_close("merged lse", lse, to_d(full.lse), kAtol, kRtol);

    Vec dq(s.nq()), dk(s.nk()), dv(s.nk());
    backend().attention_bwd(dq.data(), dk.data(), dv.data(), d.dout.data(), full.out.data(),
                            full.lse.data(), nullptr, d.q.data(), d.k.data(), d.v.data(), s.B,
                            s.Tq, s.Tk, s.H, s.Hkv, s.D, s.q_offset, s.k_offset, s.causal);
    Vec dq_split(s.nq()), dk_split(s.nk()), dv_split(s.nk());
    for (int part = 0; part < 2; ++part) {
      Vec dkp(sh.nk()), dvp(sh.nk());
      backend().attention_bwd(dq_split.data(), dkp.data(), dvp.data(), d.dout.data(), out.data(),
                              lse.data(), nullptr, d.q.data(), blk[part].k.data(),
                              blk[part].v.data(), s.B, s.Tq, half, s.H, s.Hkv, s.D, s.q_offset,
                              s.k_offset + part * half, s.causal);
      for (int b = 0; b < s.B; ++b)
        for (int t = 0; t < half; ++t) {
          const size_t dst = (size_t(b) * s.Tk + part * half + t) * row;
          const size_t src = (size_t(b) * half + t) * row;
          std::copy_n(dkp.begin() + src, row, dk_split.begin() + dst);
          std::copy_n(dvp.begin() + src, row, dv_split.begin() + dst);
        }
    }
    expect_close("split dq", dq_split, to_d(dq), kAtol, kRtol);
    expect_close("split dk", dk_split, to_d(dk), kAtol, kRtol);
    expect_close("split dv", dv_split, to_d(dv), kAtol, kRtol);
  }
}

// ------------------------------------------------------------------ xent ----

TEST_P(ReferenceOps, XentSingleSliceMatchesReference) {
  const int N = 6, V = 37;
  const Vec logits = randn(size_t(N) * V, 90, 3.0f);
  const std::vector<int32_t> targets = {3, 0, 36, -1, 17, 17};
  const float grad_scale = 0.25f;
  Vec rowmax(N), sumexp(N), tl(N), losses(N, 9.0f), dl(logits.size(), 9.0f);
  backend().xent_rowmax(rowmax.data(), logits.data(), N, V, V);
  backend().xent_sumexp(sumexp.data(), tl.data(), logits.data(), rowmax.data(), targets.data(), N,
                        V, V, 0);
  backend().xent_bwd(dl.data(), losses.data(), logits.data(), rowmax.data(), sumexp.data(),
                     tl.data(), targets.data(), grad_scale, N, V, V, 0);
  VecD ref_loss(N), ref_grad(logits.size());
  for (int n = 0; n < N; ++n) {
    double m = -kInf, s = 0;
    for (int j = 0; j < V; ++j) m = std::max(m, double(logits[n * V + j]));
    for (int j = 0; j < V; ++j) s += std::exp(logits[n * V + j] - m);
    if (targets[n] < 0) continue;
    ref_loss[n] = std::log(s) + m - logits[n * V + targets[n]];
    for (int j = 0; j < V; ++j)
      ref_grad[n * V + j] =
          grad_scale * (std::exp(logits[n * V + j] - m) / s - (j == targets[n] ? 1.0 : 0.0));
  }
  expect_close("xent losses", losses, ref_loss, kAtol, kRtol);
  expect_close("xent dlogits", dl, ref_grad, 1e-6, kRtol);
  // Gradient by finite differences of sum(losses) * grad_scale.
  auto loss_fn = [&](const VecD& x) {
    double total = 0;
    for (int n = 0; n < N; ++n) {
      if (targets[n] < 0) continue;
      double m = -kInf, s = 0;
      for (int j = 0; j < V; ++j) m = std::max(m, x[n * V + j]);
      for (int j = 0; j < V; ++j) s += std::exp(x[n * V + j] - m);
      total += std::log(s) + m - x[n * V + targets[n]];
    }
    return grad_scale * total;
  };
  expect_close("xent dlogits (fd)", dl, fd_grad(loss_fn, to_d(logits)), 1e-5, 1e-3);
  // In place (dlogits aliasing logits) gives the same bits.
  Vec alias = logits;
  backend().xent_bwd(alias.data(), nullptr, alias.data(), rowmax.data(), sumexp.data(), tl.data(),
                     targets.data(), grad_scale, N, V, V, 0);
  expect_bitwise("xent in place", alias, dl);
}

// Rows of ld > V columns: the padding columns (the model's vocabulary
// padding) hold values that would win the max and the sum if read; the
// results are the unpadded ones, bit for bit, and the padding's gradient 0.
TEST_P(ReferenceOps, XentIgnoresPaddingColumns) {
  const int N = 6, V = 37, ld = 48;
  const Vec logits = randn(size_t(N) * V, 90, 3.0f);
  const std::vector<int32_t> targets = {3, 0, 36, -1, 17, 17};
  Vec padded(size_t(N) * ld, 1e30f);
  for (int n = 0; n < N; ++n) std::copy_n(logits.begin() + n * V, V, padded.begin() + n * ld);
  Backend& be = backend();
  Vec rowmax(N), sumexp(N), tl(N), losses(N), dl(logits.size());
  be.xent_rowmax(rowmax.data(), logits.data(), N, V, V);
  be.xent_sumexp(sumexp.data(), tl.data(), logits.data(), rowmax.data(), targets.data(), N, V, V, 0);
  be.xent_bwd(dl.data(), losses.data(), logits.data(), rowmax.data(), sumexp.data(), tl.data(),
              targets.data(), 0.5f, N, V, V, 0);
  Vec prowmax(N), psumexp(N), ptl(N), plosses(N), pdl(padded.size(), 9.0f);
  be.xent_rowmax(prowmax.data(), padded.data(), N, V, ld);
  be.xent_sumexp(psumexp.data(), ptl.data(), padded.data(), prowmax.data(), targets.data(), N, V, ld, 0);
  be.xent_bwd(pdl.data(), plosses.data(), padded.data(), prowmax.data(), psumexp.data(), ptl.data(),
              targets.data(), 0.5f, N, V, ld, 0);
  expect_bitwise("padded rowmax", prowmax, rowmax);
  expect_bitwise("padded sumexp", psumexp, sumexp);
  expect_bitwise("padded target logit", ptl, tl);
  expect_bitwise("padded losses", plosses, losses);
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < ld; ++j)
      ASSERT_EQ(pdl[size_t(n) * ld + j], j < V ? dl[size_t(n) * V + j] : 0.0f) << "row " << n << " column " << j;
  // In place, as the model calls it.
  be.xent_bwd(padded.data(), nullptr, padded.data(), prowmax.data(), psumexp.data(), ptl.data(),
              targets.data(), 0.5f, N, V, ld, 0);
  expect_bitwise("padded in place", padded, pdl);
}

// A tp slice of padding only (V = 0 real columns): it adds nothing to the
// global max and sum, holds no target, and gets a zero gradient.
TEST_P(ReferenceOps, XentSliceOfPaddingOnly) {
  const int N = 3, ld = 16;
  const std::vector<int32_t> targets = {3, -1, 5};
  Vec logits(size_t(N) * ld, 1e30f), rowmax(N), sumexp(N, 9.0f), tl(N, 9.0f), dl(logits.size(), 9.0f);
  Backend& be = backend();
  be.xent_rowmax(rowmax.data(), logits.data(), N, 0, ld);
  for (float m : rowmax) EXPECT_EQ(m, -kInf);
  const Vec gmax = {1.0f, 2.0f, 3.0f};  // the group's maxima, from the other slices
  be.xent_sumexp(sumexp.data(), tl.data(), logits.data(), gmax.data(), targets.data(), N, 0, ld, 100);
  for (int n = 0; n < N; ++n) {
    EXPECT_EQ(sumexp[n], 0.0f);
    EXPECT_EQ(tl[n], 0.0f);
  }
  const Vec gsum = {4.0f, 5.0f, 6.0f};
  be.xent_bwd(dl.data(), nullptr, logits.data(), gmax.data(), gsum.data(), tl.data(), targets.data(), 1.0f, N, 0,
              ld, 100);
  for (float g : dl) ASSERT_EQ(g, 0.0f);
}

TEST_P(ReferenceOps, XentTwoVocabSlicesCombine) {
  const int N = 5, V = 40, V0 = 17, V1 = V - V0;
  const Vec logits = randn(size_t(N) * V, 91, 2.0f);
  const std::vector<int32_t> targets = {0, 16, 17, 39, -1};
  Vec slice[2] = {Vec(size_t(N) * V0), Vec(size_t(N) * V1)};
  for (int n = 0; n < N; ++n) {
    std::copy_n(logits.begin() + n * V, V0, slice[0].begin() + n * V0);
    std::copy_n(logits.begin() + n * V + V0, V1, slice[1].begin() + n * V1);
  }
  Backend& be = backend();
  Vec rowmax(N), sumexp(N), tl(N), losses(N), dl(logits.size());
  be.xent_rowmax(rowmax.data(), logits.data(), N, V, V);
  be.xent_sumexp(sumexp.data(), tl.data(), logits.data(), rowmax.data(), targets.data(), N, V, V, 0);
  be.xent_bwd(dl.data(), losses.data(), logits.data(), rowmax.data(), sumexp.data(), tl.data(),
              targets.data(), 1.0f, N, V, V, 0);

  const int widths[2] = {V0, V1}, starts[2] = {0, V0};
  Vec mx[2] = {Vec(N), Vec(N)}, se[2] = {Vec(N), Vec(N)}, tg[2] = {Vec(N), Vec(N)};
  for (int p = 0; p < 2; ++p) be.xent_rowmax(mx[p].data(), slice[p].data(), N, widths[p], widths[p]);
  Vec gmax(N);  // "all-reduce max"
  for (int n = 0; n < N; ++n) gmax[n] = std::max(mx[0][n], mx[1][n]);
  for (int p = 0; p < 2; ++p)
    be.xent_sumexp(se[p].data(), tg[p].data(), slice[p].data(), gmax.data(), targets.data(), N,
                   widths[p], widths[p], starts[p]);
  Vec gsum(N), gtl(N);  // "all-reduce sum"
  for (int n = 0; n < N; ++n) gsum[n] = se[0][n] + se[1][n], gtl[n] = tg[0][n] + tg[1][n];
  Vec dl_split(logits.size()), loss_split[2] = {Vec(N), Vec(N)};
  for (int p = 0; p < 2; ++p) {
    Vec g(size_t(N) * widths[p]);
    be.xent_bwd(g.data(), loss_split[p].data(), slice[p].data(), gmax.data(), gsum.data(),
                gtl.data(), targets.data(), 1.0f, N, widths[p], widths[p], starts[p]);
    for (int n = 0; n < N; ++n)
      std::copy_n(g.begin() + n * widths[p], widths[p], dl_split.begin() + n * V + starts[p]);
  }
  expect_close("split rowmax", gmax, to_d(rowmax), 0, 0);
  expect_close("split sumexp", gsum, to_d(sumexp), 0, 1e-6);
  expect_close("split losses", loss_split[0], to_d(losses), 1e-6, 1e-6);
  expect_close("split losses (other slice)", loss_split[1], to_d(losses), 1e-6, 1e-6);
  expect_close("split dlogits", dl_split, to_d(dl), 1e-7, 1e-5);
  EXPECT_EQ(losses[4], 0.0f);
  for (int j = 0; j < V; ++j) EXPECT_EQ(dl[4 * V + j], 0.0f);
}

// ----------------------------------------------------------------- adamw ----

TEST_P(ReferenceOps, AdamWThreeStepsMatchDoubleReference) {
  const size_t n = 1000;
  const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.7f;
  Vec p = randn(n, 92), m(n), v(n);
  VecD pr = to_d(p), mr(n), vr(n);
  for (int step = 1; step <= 3; ++step) {
    const Vec g = randn(n, 93 + step);
    backend().adamw(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, gs, step);
    const double bc1 = 1 - std::pow(double(b1), step), bc2 = 1 - std::pow(double(b2), step);
    for (size_t i = 0; i < n; ++i) {
      const double gi = double(g[i]) * gs;
      pr[i] *= 1 - double(lr) * wd;
      mr[i] = b1 * mr[i] + (1 - double(b1)) * gi;
      vr[i] = b2 * vr[i] + (1 - double(b2)) * gi * gi;
      pr[i] -= lr / bc1 * mr[i] / (std::sqrt(vr[i]) / std::sqrt(bc2) + eps);
    }
    expect_close(cat("adamw m step ", step), m, mr, 1e-7, 1e-5);
    expect_close(cat("adamw v step ", step), v, vr, 1e-9, 1e-5);
    expect_close(cat("adamw p step ", step), p, pr, 1e-6, 1e-5);
  }
}

// ====================================== every other backend vs the CPU ====

constexpr double kVsCpuAtol = 1e-5, kVsCpuRtol = 1e-4;  // fp32, O(1) values, short sums

class OpsVsCpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (!backend_usable(GetParam(), &why)) GTEST_SKIP() << GetParam() << ": " << why;
    if (!gpu_) gpu_ = make_backend(GetParam());
    if (!cpu_) cpu_ = pentad::make_cpu_backend(2);
    gpu_->set_compute_dtype(pentad::Dtype::fp32);
    cpu_->set_compute_dtype(pentad::Dtype::fp32);
  }
  void TearDown() override {
    if (!gpu_) return;
    for (void* p : owned_) gpu_->free_bytes(p);
    owned_.clear();
  }

  // Copies to and from the tested backend's memory (freed after the test).
  float* up(const Vec& h) {
    float* d = gpu_->alloc(h.size(), pentad::Mem::scratch);
    gpu_->from_host(d, h.data(), h.size() * sizeof(float));
    owned_.push_back(d);
    return d;
  }
  int32_t* up(const IVec& h) {
    int32_t* d = gpu_->alloc_i32(h.size(), pentad::Mem::scratch);
    gpu_->from_host(d, h.data(), h.size() * sizeof(int32_t));
    owned_.push_back(d);
    return d;
  }
  Vec down(const float* d, size_t n) {
    Vec h(n);
    gpu_->to_host(h.data(), d, n * sizeof(float));
    return h;
  }
  // The tested backend's result against the CPU's (fp32 tolerances cover
  // reduction-order differences).
  void compare(const std::string& what, const Vec& got, const Vec& ref, double atol = kVsCpuAtol,
               double rtol = kVsCpuRtol, std::source_location at = std::source_location::current()) {
    expect_close(GetParam() + " vs cpu: " + what, got, ref, atol, rtol, at);
  }

  // One tested backend per binary (the param is the same in every test).
  static std::unique_ptr<Backend> gpu_, cpu_;
  std::vector<void*> owned_;
};
std::unique_ptr<Backend> OpsVsCpu::gpu_, OpsVsCpu::cpu_;

// ---------------------------------------------------------------- memory ----

TEST_P(OpsVsCpu, MemoryZeroedTrackedAndFill) {
  const size_t before = gpu_->mem_stats().cur_bytes[int(pentad::Mem::activations)];
  float* p = gpu_->alloc(1001, pentad::Mem::activations);
  EXPECT_EQ(gpu_->mem_stats().cur_bytes[int(pentad::Mem::activations)], before + 1001 * sizeof(float));
  compare("alloc zero-filled", down(p, 1001), Vec(1001, 0.0f), 0, 0);
  gpu_->fill(p, 2.5f, 1001);
  compare("fill", down(p, 1001), Vec(1001, 2.5f), 0, 0);
  float* q = gpu_->alloc(1001, pentad::Mem::activations);
  gpu_->copy_bytes(q, p, 1001 * sizeof(float));
  compare("copy_bytes", down(q, 1001), Vec(1001, 2.5f), 0, 0);
  gpu_->free_bytes(p);
  gpu_->free_bytes(q);
  EXPECT_EQ(gpu_->mem_stats().cur_bytes[int(pentad::Mem::activations)], before);
}

// ------------------------------------------------------------------ gemm ----

TEST_P(OpsVsCpu, GemmAllTransposesBetaStridesBatches) {
  for (pentad::Dtype dt : {pentad::Dtype::fp32, pentad::Dtype::bf16}) {
    cpu_->set_compute_dtype(dt);
    gpu_->set_compute_dtype(dt);
    for (int batch : {1, 3})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          const int M = 37, N = 29, K = 70;
          const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
          const long sa = long(ta ? K : M) * lda, sb = long(tb ? N : K) * ldb, sc = long(M) * ldc;
          const Vec A = randn(size_t(sa) * batch, 1), B = randn(size_t(sb) * batch, 2);
          const Vec C0 = randn(size_t(sc) * batch, 3);
          Vec Cc = C0;
          float* dC = up(C0);
          if (batch == 1) {
            cpu_->gemm(ta, tb, M, N, K, 0.7f, A.data(), lda, B.data(), ldb, 0.5f, Cc.data(), ldc);
            gpu_->gemm(ta, tb, M, N, K, 0.7f, up(A), lda, up(B), ldb, 0.5f, dC, ldc);
          } else {
            cpu_->gemm_batched(ta, tb, M, N, K, 0.7f, A.data(), lda, sa, B.data(), ldb, sb, 0.5f,
                               Cc.data(), ldc, sc, batch);
            gpu_->gemm_batched(ta, tb, M, N, K, 0.7f, up(A), lda, sa, up(B), ldb, sb, 0.5f, dC, ldc,
                               sc, batch);
          }
          const std::string name = std::string(dt == pentad::Dtype::bf16 ? "bf16 " : "fp32 ") +
                                   (batch > 1 ? "gemm_batched" : "gemm") + " ta=" +
                                   std::to_string(ta) + " tb=" + std::to_string(tb);
          // K = 70 products of N(0,1) values: sums of size ~8; fp32 order error ~K u.
          compare(name, down(dC, Cc.size()), Cc, 1e-4, 1e-4);
        }
  }
}

// The MLP activation held in bf16 (Backend::hold_gemm_form,
// train.bf16_activations): linear_fwd with its GELU into a held buffer
// (CUDA: the bias in the epilogue, then a GELU pass writing bf16),
// glu_fwd, layernorm_fwd and rmsnorm_fwd into others hold bf16 values
// within one bf16 step of the
// CPU's rounded results (the GELU's exp differs by ulps, which can move a
// value across a rounding boundary); the forward's fp32 output agrees as in
// LinearFwdEpilogues. Then the GEMMs that read a held buffer (the down
// projection's forward as A, its weight gradient as B) agree
// with the CPU's GEMMs on the values the GPU holds, and each read counts
// once in held_activation_reads. The activations read held inputs, and
// last, attention's q, k, v and output are held in bf16 (below).
TEST_P(OpsVsCpu, HeldBf16Activations) {
  cpu_->set_compute_dtype(pentad::Dtype::bf16);
  gpu_->set_compute_dtype(pentad::Dtype::bf16);
  ASSERT_EQ(gpu_->bf16_activation_bytes(), 2u);
  const int N = 301, C = 72, F = 96;
  const Vec x = randn(size_t(N) * C, 51), w_up = randn(size_t(F) * C, 52, 0.2f), b_up = randn(F, 53);
  const Vec gate = randn(size_t(N) * F, 54, 2.0f), upv = randn(size_t(N) * F, 55);
  const Vec w_down = randn(size_t(C) * F, 56, 0.2f), dy = randn(size_t(N) * C, 57);
  const size_t NF = size_t(N) * F;
  auto held = [&] {
    auto* p = static_cast<float*>(gpu_->alloc_bytes(NF * 2, pentad::Mem::activations));
    owned_.push_back(p);
    gpu_->hold_gemm_form(p, NF);
    return p;
  };
  // The held values as floats.
  auto held_down = [&](const float* p) {
    std::vector<uint16_t> bits(NF);
    gpu_->to_host(bits.data(), p, NF * 2);
    Vec v(NF);
    for (size_t i = 0; i < NF; ++i) v[i] = pentad::bf16_to_float(bits[i]);
    return v;
  };
  // Within one bf16 step of the CPU's rounded value, and mostly equal.
  auto near_rounded = [&](const std::string& what, const Vec& got, const Vec& cpu_rounded) {
    size_t off = 0, worse = 0;
    for (size_t i = 0; i < NF; ++i)
      if (got[i] != cpu_rounded[i]) {
        ++off;
        if (std::fabs(got[i] - cpu_rounded[i]) > std::ldexp(std::fabs(cpu_rounded[i]), -7) + 1e-30) ++worse;
      }
    EXPECT_EQ(worse, 0u) << what << ": values more than one bf16 step from the CPU's";
    EXPECT_LE(off, NF / 100) << what << ": values differing from the CPU's rounded ones";
    std::printf("%s: %zu of %zu held values one bf16 step from the CPU's\n", what.c_str(), off, NF);
  };
  float* d_act = held();
  float* d_pre = up(Vec(NF));
  const size_t fused = gpu_->epilogues_fused();
  gpu_->linear_fwd(d_pre, up(x), up(w_up), up(b_up), N, F, C, 0.0f, d_act);
  EXPECT_EQ(gpu_->epilogues_fused(), fused + 1) << "the bias in the epilogue (F = 96: cuBLASLt can)";
  Vec pre(NF), act(NF);
  cpu_->linear_fwd(pre.data(), x.data(), w_up.data(), b_up.data(), N, F, C, 0.0f, act.data());
  compare("held: linear_fwd's GELU input", down(d_pre, NF), pre, 1e-4, 1e-4);
  for (float& v : act) v = pentad::round_bf16(v);
  const Vec g_act = held_down(d_act);
  near_rounded("held: GELU", g_act, act);
  float* d_sw = held();
  gpu_->glu_fwd(d_sw, up(gate), up(upv), NF, GateAct::silu);
  Vec sw(NF);
  cpu_->glu_fwd(sw.data(), gate.data(), upv.data(), NF, GateAct::silu);
  for (float& v : sw) v = pentad::round_bf16(v);
  near_rounded("held: SwiGLU", held_down(d_sw), sw);
  // The activations' inputs held (the GELU input; SwiGLU's gate and up): a
  // bf16 run reads fp32 inputs rounded, so from held ones every output,
  // forward (into fp32) and backward, is bitwise the same; and agrees with
  // the CPU's, which rounds its inputs likewise.
  {
    const Vec dout = randn(NF, 64);
    float *g32 = up(gate), *u32 = up(upv), *gh = held(), *uh = held(), *d_dout = up(dout);
    gpu_->to_gemm_form(gh, g32, NF);
    gpu_->to_gemm_form(uh, u32, NF);
    auto outputs = [&](const float* a, const float* b) {
      float* o = up(Vec(5 * NF));
      gpu_->gelu_fwd(o, a, NF);
      gpu_->gelu_bwd(o + NF, d_dout, a, NF);
      gpu_->glu_fwd(o + 2 * NF, a, b, NF, GateAct::silu);
      gpu_->glu_bwd(o + 3 * NF, o + 4 * NF, d_dout, a, b, NF, GateAct::silu);
      return down(o, 5 * NF);
    };
    const Vec from_fp32 = outputs(g32, u32);
    EXPECT_EQ(outputs(gh, uh), from_fp32) << "held: the activations from held inputs";
    Vec c(5 * NF);
    cpu_->gelu_fwd(c.data(), gate.data(), NF);
    cpu_->gelu_bwd(c.data() + NF, dout.data(), gate.data(), NF);
    cpu_->glu_fwd(c.data() + 2 * NF, gate.data(), upv.data(), NF, GateAct::silu);
    cpu_->glu_bwd(c.data() + 3 * NF, c.data() + 4 * NF, dout.data(), gate.data(), upv.data(), NF, GateAct::silu);
    compare("held: the activations from rounded inputs, against the CPU", from_fp32, c, 1e-5, 1e-5);
  }
  // The norms into held buffers (N rows of F: the shapes need not be the model's).
  const Vec nw = randn(F, 58, 0.5f, 1.0f), nb = randn(F, 59);
  Vec mean(N), rstd(N), ln(NF);
  float *d_mean = up(mean), *d_rstd = up(rstd), *d_ln = held();
  gpu_->layernorm_fwd(d_ln, d_mean, d_rstd, up(gate), up(nw), up(nb), N, F, 1e-5f);
  cpu_->layernorm_fwd(ln.data(), mean.data(), rstd.data(), gate.data(), nw.data(), nb.data(), N, F, 1e-5f);
  for (float& v : ln) v = pentad::round_bf16(v);
  near_rounded("held: layernorm_fwd", held_down(d_ln), ln);
  compare("held: layernorm_fwd rstd", down(d_rstd, N), rstd);
  float* d_rms = held();
  gpu_->rmsnorm_fwd(d_rms, d_rstd, up(gate), up(nw), N, F, 1e-5f, 0.0f);
  cpu_->rmsnorm_fwd(ln.data(), rstd.data(), gate.data(), nw.data(), N, F, 1e-5f, 0.0f);
  for (float& v : ln) v = pentad::round_bf16(v);
  near_rounded("held: rmsnorm_fwd", held_down(d_rms), ln);
  // The GEMMs reading the held GELU output, against the CPU's on the same values.
  const size_t reads = gpu_->held_activation_reads();
  float* d_out = up(Vec(size_t(N) * C));
  gpu_->gemm(false, true, N, C, F, 1.0f, d_act, F, up(w_down), F, 0.0f, d_out, C);  // out = act w_down^T
  float* d_dw = up(Vec(size_t(C) * F));
  gpu_->gemm(true, false, C, F, N, 1.0f, up(dy), C, d_act, F, 0.0f, d_dw, F);  // dw = dy^T act
  EXPECT_EQ(gpu_->held_activation_reads(), reads + 2);
  Vec out(size_t(N) * C), dw(size_t(C) * F);
  cpu_->gemm(false, true, N, C, F, 1.0f, g_act.data(), F, w_down.data(), F, 0.0f, out.data(), C);
  cpu_->gemm(true, false, C, F, N, 1.0f, dy.data(), C, g_act.data(), F, 0.0f, dw.data(), F);
  compare("held: GEMM reading it as A", down(d_out, out.size()), out, 1e-4, 1e-4);
  compare("held: GEMM reading it as B", down(d_dw, dw.size()), dw, 1e-4, 1e-4);
  // Attention with q, k, v and its output held (B 1, T N, H D = F), as the
  // model holds them together: q, k, v stored by to_gemm_form, the held out
  // takes bitwise the rounded values of the same call on fp32 operands into
  // an fp32 out, with the same lse, through the fused kernels (D 32) and the
  // cuBLAS path (D 48: held q, k, v read in place, out in fp32 into scratch,
  // then rounded); the backward from the held buffers gives bitwise the
  // gradients of the fp32 ones (both round q, k, v once, and delta reads O
  // rounded in a bf16 run).
  for (const int D : {32, 48}) {
    const int H = F / D;
    const size_t NH = size_t(H) * N;
    const std::string tag = "held: attention D " + std::to_string(D);
    const Vec q = randn(NF, 60), k = randn(NF, 61), v = randn(NF, 62), dout = randn(NF, 63);
    float *d_q = up(q), *d_k = up(k), *d_v = up(v), *d_do = up(dout);
    float *h_q = held(), *h_k = held(), *h_v = held();
    gpu_->to_gemm_form(h_q, d_q, NF);
    gpu_->to_gemm_form(h_k, d_k, NF);
    gpu_->to_gemm_form(h_v, d_v, NF);
    auto rounded = [](Vec vals) {
      for (float& r : vals) r = pentad::round_bf16(r);
      return vals;
    };
    EXPECT_EQ(held_down(h_q), rounded(q)) << tag << ": to_gemm_form";
    float *d_att = held(), *d_plain = up(Vec(NF)), *d_lse = up(Vec(NH)), *d_lse_held = up(Vec(NH));
    const size_t fused_before = gpu_->attention_fused();
    gpu_->attention_fwd(d_att, d_lse_held, nullptr, h_q, h_k, h_v, 1, N, N, H, H, D, 0, 0, true);
    EXPECT_EQ(gpu_->attention_fused() - fused_before, D == 32 ? 1u : 0u) << tag;
    gpu_->attention_fwd(d_plain, d_lse, nullptr, d_q, d_k, d_v, 1, N, N, H, H, D, 0, 0, true);
    EXPECT_EQ(held_down(d_att), rounded(down(d_plain, NF))) << tag;
    EXPECT_EQ(down(d_lse_held, NH), down(d_lse, NH)) << tag << ": lse";
    auto grads = [&](const float* o, const float* q_in, const float* k_in, const float* v_in) {
      float *dq = up(Vec(NF)), *dk = up(Vec(NF)), *dv = up(Vec(NF));
      gpu_->attention_bwd(dq, dk, dv, d_do, o, d_lse, nullptr, q_in, k_in, v_in, 1, N, N, H, H, D, 0, 0, true);
      Vec all = down(dq, NF), b = down(dk, NF), c = down(dv, NF);
      all.insert(all.end(), b.begin(), b.end());
      all.insert(all.end(), c.begin(), c.end());
      return all;
    };
    const size_t bwd_before = gpu_->attention_fused();
    const Vec from_held = grads(d_att, h_q, h_k, h_v);
    EXPECT_EQ(gpu_->attention_fused() - bwd_before, D == 32 ? 1u : 0u) << tag << ": backward";
    EXPECT_EQ(from_held, grads(d_plain, d_q, d_k, d_v)) << tag << ": the backward from the held buffers";
  }
  cpu_->set_compute_dtype(pentad::Dtype::fp32);
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
}

// The bf16 weight copies (Backend::keep_weight_copy): a GEMM whose operand
// (A or B, strided, batched) lies in a registered range reads the copy in
// place, made once for two GEMMs and again after a write into the range,
// and agrees with the CPU's emulation as the GEMM test above (not bitwise
// with a converted operand: its leading dimension differs, and cuBLAS may
// pick another kernel for it).
TEST_P(OpsVsCpu, GemmReadsWeightCopies) {
  cpu_->set_compute_dtype(pentad::Dtype::bf16);
  gpu_->set_compute_dtype(pentad::Dtype::bf16);
  const int M = 37, N = 29, K = 70, batch = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
      const long sa = long(ta ? K : M) * lda, sb = long(tb ? N : K) * ldb, sc = long(M) * ldc;
      const Vec A = randn(size_t(sa) * batch, 4), C0 = randn(size_t(sc) * batch, 6);
      Vec B = randn(size_t(sb) * batch, 5);
      float *dA = up(A), *dB = up(B);
      gpu_->keep_weight_copy(dA, A.size());
      gpu_->keep_weight_copy(dB, B.size());
      const size_t made = gpu_->weight_copies_made();
      const std::string tag = " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      for (int round = 0; round < 2; ++round) {
        float* dC = up(C0);
        gpu_->gemm_batched(ta, tb, M, N, K, 0.7f, dA, lda, sa, dB, ldb, sb, 0.5f, dC, ldc, sc, batch);
        gpu_->gemm(ta, tb, M, N, K, 0.7f, dA, lda, dB, ldb, 0.5f, dC + sc * (batch - 1), ldc);  // reads both again
        EXPECT_EQ(gpu_->weight_copies_made(), made + 2 + size_t(round)) << "one copy per change" << tag;
        Vec Cc = C0;
        cpu_->gemm_batched(ta, tb, M, N, K, 0.7f, A.data(), lda, sa, B.data(), ldb, sb, 0.5f, Cc.data(), ldc, sc,
                           batch);
        cpu_->gemm(ta, tb, M, N, K, 0.7f, A.data(), lda, B.data(), ldb, 0.5f, Cc.data() + sc * (batch - 1), ldc);
        compare("bf16 gemm from weight copies" + tag, down(dC, Cc.size()), Cc, 1e-4, 1e-4);
        // New values in B (from_host marks its copy stale).
        B = randn(B.size(), 7 + round);
        gpu_->from_host(dB, B.data(), B.size() * sizeof(float));
      }
    }
  cpu_->set_compute_dtype(pentad::Dtype::fp32);
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
}

// linear_fwd with its epilogues (cuBLASLt on CUDA): against the CPU's
// gemm, bias_add and gelu_fwd, fp32 and bf16 (the weight from its copy), for
// a shape cuBLASLt fuses (n_out a multiple of 8) and one whose GELU it
// cannot (n_out 97: the GELU input's leading dimension), beta 0 and 1 (the
// row-parallel layer accumulates onto the residual). Every call whose plan
// fuses must have run fused (epilogues_fused), the rest unfused, and a
// second call must repeat the first bitwise. In bf16 the GELU is never in
// the epilogue (the GELU reads its input rounded there: the bias alone in
// the epilogue, then gelu_fwd).
TEST_P(OpsVsCpu, LinearFwdEpilogues) {
  for (pentad::Dtype dt : {pentad::Dtype::fp32, pentad::Dtype::bf16}) {
    cpu_->set_compute_dtype(dt);
    gpu_->set_compute_dtype(dt);
    for (int n_out : {96, 97})
      for (int with_bias = 0; with_bias < 2; ++with_bias)
        for (int with_gelu = 0; with_gelu < 2; ++with_gelu)
          for (float beta : {0.0f, 1.0f}) {
            if (with_gelu && beta != 0.0f) continue;  // GPT-2's MLP: beta 0
            const int N = 301, n_in = 70;
            const Vec x = randn(size_t(N) * n_in, 41), w = randn(size_t(n_out) * n_in, 42, 0.2f);
            const Vec b = randn(n_out, 43), y0 = randn(size_t(N) * n_out, 44);
            float* dw = up(w);
            gpu_->keep_weight_copy(dw, w.size());  // bf16: the weight read from its copy
            float *dy = up(y0), *dact = up(Vec(y0.size()));
            const bool gelu_epilogue = with_gelu && dt == pentad::Dtype::fp32;
            const pentad::LinearEpiloguePlan plan =
                pentad::linear_epilogue_plan(N, n_out, n_in, with_bias, gelu_epilogue, beta);
            const size_t fused = gpu_->epilogues_fused(), unfused = gpu_->epilogues_unfused();
            gpu_->linear_fwd(dy, up(x), dw, with_bias ? up(b) : nullptr, N, n_out, n_in, beta,
                             with_gelu ? dact : nullptr);
            Vec y = y0, act(y0.size());
            cpu_->linear_fwd(y.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, n_out, n_in, beta,
                             with_gelu ? act.data() : nullptr);
            const std::string tag = cat(dt == pentad::Dtype::bf16 ? "bf16" : "fp32", " linear_fwd n_out=", n_out,
                                        " bias=", with_bias, " gelu=", with_gelu, " beta=", beta);
            compare(tag, down(dy, y.size()), y, 1e-4, 1e-4);
            if (with_gelu) compare(tag + " act", down(dact, act.size()), act, 1e-4, 1e-4);
            // The same call again repeats bitwise (the run-to-run determinism pentad promises).
            const Vec first = down(dy, y.size()), first_act = down(dact, act.size());
            float* dy2 = up(y0);
            float* dact2 = up(Vec(y0.size()));
            gpu_->linear_fwd(dy2, up(x), dw, with_bias ? up(b) : nullptr, N, n_out, n_in, beta,
                             with_gelu ? dact2 : nullptr);
            expect_bitwise(tag + " repeats", down(dy2, y.size()), first);
            expect_bitwise(tag + " act repeats", down(dact2, act.size()), first_act);
            const bool epilogue = with_bias || gelu_epilogue;
            EXPECT_EQ(gpu_->epilogues_fused(), fused + (plan.fused ? 2 : 0)) << tag << ": " << plan.why;
            EXPECT_EQ(gpu_->epilogues_unfused(), unfused + (epilogue && !plan.fused ? 2 : 0)) << tag;
            gpu_->drop_weight_copy(dw);
          }
  }
  cpu_->set_compute_dtype(pentad::Dtype::fp32);
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
}

// linear_bwd_input_gelu (cuBLASLt's DGELU epilogue on CUDA) against the
// CPU's gemm and gelu_bwd, fp32 and bf16 (the weight from its copy), for n_in
// 96 (fused) and 97 (the GELU input's leading dimension: unfused), and in
// bf16 with the GELU input fp32 (never fused: the epilogue cannot round it)
// and held in bf16 (the epilogue's auxiliary matrix in bf16). In fp32, and
// bf16 held, cuBLASLt may offer no DGELU kernel, so each call is counted
// one way or the other and the result printed. A second call repeats the
// first bitwise.
TEST_P(OpsVsCpu, LinearBwdInputGelu) {
  struct Form {
    pentad::Dtype dt;
    bool held;  // the GELU input held in bf16
  };
  for (const Form form : {Form{pentad::Dtype::fp32, false}, Form{pentad::Dtype::bf16, false},
                          Form{pentad::Dtype::bf16, true}}) {
    const pentad::Dtype dt = form.dt;
    const bool held = form.held;
    cpu_->set_compute_dtype(dt);
    gpu_->set_compute_dtype(dt);
    for (int n_in : {96, 97}) {
      const int N = 301, n_out = 70;
      const Vec dy = randn(size_t(N) * n_out, 45), w = randn(size_t(n_out) * n_in, 46, 0.2f);
      const Vec pre = randn(size_t(N) * n_in, 47, 2.0f);
      float* dw = up(w);
      gpu_->keep_weight_copy(dw, w.size());
      float *ddy = up(dy), *dpre = up(pre), *ddx = up(Vec(pre.size())), *ddx2 = up(Vec(pre.size()));
      if (held) {  // the GELU input stored in bf16, as the model holds it
        auto* h = static_cast<float*>(gpu_->alloc_bytes(pre.size() * 2, pentad::Mem::activations));
        owned_.push_back(h);
        gpu_->hold_gemm_form(h, pre.size());
        gpu_->to_gemm_form(h, dpre, pre.size());
        dpre = h;
      }
      const pentad::LinearEpiloguePlan plan = pentad::linear_bwd_gelu_plan(N, n_out, n_in);
      const size_t fused = gpu_->epilogues_fused(), unfused = gpu_->epilogues_unfused();
      gpu_->linear_bwd_input_gelu(ddx, ddy, dw, dpre, N, n_out, n_in);
      gpu_->linear_bwd_input_gelu(ddx2, ddy, dw, dpre, N, n_out, n_in);
      Vec dx(pre.size());
      cpu_->linear_bwd_input_gelu(dx.data(), dy.data(), w.data(), pre.data(), N, n_out, n_in);
      const std::string tag = cat(dt == pentad::Dtype::bf16 ? "bf16" : "fp32", held ? " held" : "",
                                  " linear_bwd_input_gelu n_in=", n_in);
      compare(tag, down(ddx, dx.size()), dx, 1e-4, 1e-4);
      expect_bitwise(tag + " repeats", down(ddx2, dx.size()), down(ddx, dx.size()));
      const size_t ran_fused = gpu_->epilogues_fused() - fused, ran_unfused = gpu_->epilogues_unfused() - unfused;
      std::printf("%s: %zu fused, %zu unfused (plan: %s)\n", tag.c_str(), ran_fused, ran_unfused,
                  plan.fused ? "fused" : plan.why);
      EXPECT_EQ(ran_fused + ran_unfused, 2u) << tag;
      if (!plan.fused || (dt == pentad::Dtype::bf16 && !held)) {
        EXPECT_EQ(ran_fused, 0u) << tag;
      }
      gpu_->drop_weight_copy(dw);
    }
  }
  cpu_->set_compute_dtype(pentad::Dtype::fp32);
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
}

// The grouped linear ops (Q, K, V; ops.def linear_fwd_group and its
// gradients) against the CPU's, which runs each part in turn: fp32 and bf16
// (the weights from their copy), for Q, K, V as the model lays them out
// (outputs, weights and gradients each in one allocation, one after
// another; with and without grouped-query heads, with GPT-2's biases) and
// for parts in separate allocations. CUDA must have batched exactly where
// its plan says (linear_group_runs, parts_stacked: one forward matmul per
// run, one stacked GEMM each way in bf16), counted by
// linear_groups_batched; a second call repeats the first bitwise.
TEST_P(OpsVsCpu, LinearGroups) {
  const int N = 203, n_in = 72, D = 8;
  struct Layout {
    const char* name;
    int H, Hkv;
    bool bias, adjacent;
  };
  for (pentad::Dtype dt : {pentad::Dtype::fp32, pentad::Dtype::bf16})
    for (const Layout& l : {Layout{"gpt2 adjacent", 6, 6, true, true}, Layout{"gqa adjacent", 6, 2, false, true},
                            Layout{"separate", 6, 6, true, false}}) {
      cpu_->set_compute_dtype(dt);
      gpu_->set_compute_dtype(dt);
      const bool bf16 = dt == pentad::Dtype::bf16;
      const std::string tag = cat(bf16 ? "bf16 " : "fp32 ", l.name);
      const int widths[3] = {l.H * D, l.Hkv * D, l.Hkv * D};
      const int total = widths[0] + widths[1] + widths[2];
      const Vec x = randn(size_t(N) * n_in, 61), w = randn(size_t(total) * n_in, 62, 0.2f), b = randn(size_t(total), 63);
      const Vec dy = randn(size_t(N) * total, 64), dw0 = randn(size_t(total) * n_in, 65), db0 = randn(size_t(total), 66);
      const Vec dx0 = randn(size_t(N) * n_in, 67);
      // The stacked host arrays hold the parts one after another; the
      // device parts are their slices (adjacent) or copies (separate).
      float* d_x = up(x);
      float *d_w = up(w), *d_b = up(b), *d_y = up(Vec(size_t(N) * total)), *d_dy = up(dy), *d_dw = up(dw0),
            *d_db = up(db0);
      gpu_->keep_weight_copy(d_w, w.size());
      Vec y(size_t(N) * total), h_dw = dw0, h_db = db0;
      std::vector<pentad::LinearPart> hp, gp;
      std::vector<pentad::LinearGradPart> hg, gg;
      size_t col = 0;
      for (int i = 0; i < 3; ++i) {
        const size_t wo = col * n_in, yo = col * size_t(N), ny = size_t(N) * widths[i], nw = size_t(widths[i]) * n_in;
        hp.push_back({y.data() + yo, w.data() + wo, l.bias ? b.data() + col : nullptr, widths[i]});
        hg.push_back({dy.data() + yo, w.data() + wo, h_dw.data() + wo, l.bias ? h_db.data() + col : nullptr,
                      widths[i]});
        if (l.adjacent) {
          gp.push_back({d_y + yo, d_w + wo, l.bias ? d_b + col : nullptr, widths[i]});
          gg.push_back({d_dy + yo, d_w + wo, d_dw + wo, l.bias ? d_db + col : nullptr, widths[i]});
        } else {  // every matrix in its own allocation
          auto slice = [](const Vec& v, size_t at, size_t n) { return Vec(v.begin() + long(at), v.begin() + long(at + n)); };
          float* wd = up(slice(w, wo, nw));
          gp.push_back({up(Vec(ny)), wd, l.bias ? up(slice(b, col, size_t(widths[i]))) : nullptr, widths[i]});
          gg.push_back({up(slice(dy, yo, ny)), wd, up(slice(dw0, wo, nw)),
                        l.bias ? up(slice(db0, col, size_t(widths[i]))) : nullptr, widths[i]});
        }
        col += size_t(widths[i]);
      }
      const size_t runs = pentad::linear_group_runs(gp.data(), 3, N, n_in).size();
      const bool w_stacked =
          pentad::parts_stacked(gg.data(), 3, n_in, [](const pentad::LinearGradPart& p) { return p.w; });
      const bool dw_stacked = pentad::parts_stacked(
          gg.data(), 3, n_in, [](const pentad::LinearGradPart& p) { return static_cast<const float*>(p.dw); });
      EXPECT_EQ(runs, !l.adjacent ? 3u : l.H == l.Hkv ? 1u : 2u) << tag;
      EXPECT_EQ(w_stacked && dw_stacked, l.adjacent) << tag;
      const float beta = 0.5f;
      Vec h_dx = dx0;
      float* d_dx = up(dx0);
      const size_t batched_before = gpu_->linear_groups_batched();
      gpu_->linear_fwd_group(gp.data(), 3, d_x, N, n_in);
      gpu_->linear_bwd_input_group(d_dx, gg.data(), 3, N, n_in, beta);
      gpu_->linear_bwd_weight_group(gg.data(), 3, d_x, N, n_in);
      cpu_->linear_fwd_group(hp.data(), 3, x.data(), N, n_in);
      cpu_->linear_bwd_input_group(h_dx.data(), hg.data(), 3, N, n_in, beta);
      cpu_->linear_bwd_weight_group(hg.data(), 3, x.data(), N, n_in);
      const size_t expected = size_t(runs < 3) + size_t(bf16 && w_stacked) + size_t(bf16 && dw_stacked);
      EXPECT_EQ(gpu_->linear_groups_batched() - batched_before, expected) << tag;
      auto gather = [&](bool outputs) {  // the parts' y (or dw) side by side, as the stacked host arrays
        Vec all;
        for (int i = 0; i < 3; ++i) {
          const Vec part = outputs ? down(gp[size_t(i)].y, size_t(N) * widths[i])
                                   : down(gg[size_t(i)].dw, size_t(widths[i]) * n_in);
          all.insert(all.end(), part.begin(), part.end());
        }
        return all;
      };
      const Vec got_y = gather(true), got_dw = gather(false);
      compare(tag + " y", got_y, y, 1e-4, 1e-4);
      compare(tag + " dw", got_dw, h_dw, 1e-4, 1e-4);
      if (l.bias) {
        Vec got_db;
        for (int i = 0; i < 3; ++i) {
          const Vec part = down(gg[size_t(i)].dbias, size_t(widths[i]));
          got_db.insert(got_db.end(), part.begin(), part.end());
        }
        compare(tag + " db", got_db, h_db, 1e-4, 1e-4);
      }
      const Vec got_dx = down(d_dx, h_dx.size());
      compare(tag + " dx", got_dx, h_dx, 1e-4, 1e-4);
      // The forward and the input gradient again repeat bitwise.
      gpu_->from_host(d_dx, dx0.data(), dx0.size() * sizeof(float));
      gpu_->linear_fwd_group(gp.data(), 3, d_x, N, n_in);
      gpu_->linear_bwd_input_group(d_dx, gg.data(), 3, N, n_in, beta);
      expect_bitwise(tag + " y repeats", gather(true), got_y);
      expect_bitwise(tag + " dx repeats", down(d_dx, h_dx.size()), got_dx);
      gpu_->drop_weight_copy(d_w);
    }
  cpu_->set_compute_dtype(pentad::Dtype::fp32);
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
}

// ----------------------------------------------------------- elementwise ----

TEST_P(OpsVsCpu, Elementwise) {
  const size_t n = 100003;
  const Vec a = randn(n, 4), b = randn(n, 5);
  Vec out(n);
  cpu_->add(out.data(), a.data(), b.data(), n);
  float* d = up(Vec(n));
  gpu_->add(d, up(a), up(b), n);
  compare("add", down(d, n), out, 0, 0);
  Vec x = a;
  cpu_->scale(x.data(), 0.3f, n);
  float* dx = up(a);
  gpu_->scale(dx, 0.3f, n);
  compare("scale", down(dx, n), x, 0, 0);
  const double ss_cpu = cpu_->sum_squares(a.data(), n), ss_gpu = gpu_->sum_squares(up(a), n);
  std::printf("sum_squares cpu %.17g cuda %.17g\n", ss_cpu, ss_gpu);
  EXPECT_NEAR(ss_gpu, ss_cpu, 1e-12 * ss_cpu);
  EXPECT_EQ(gpu_->sum_squares(up(a), n), ss_gpu) << "sum_squares must repeat bitwise";
  const int N = 301, C = 97;
  const Vec xb = randn(size_t(N) * C, 6), bias = randn(C, 7);
  Vec yb = xb;
  cpu_->bias_add(yb.data(), bias.data(), N, C);
  float* dyb = up(xb);
  gpu_->bias_add(dyb, up(bias), N, C);
  compare("bias_add", down(dyb, yb.size()), yb, 0, 0);
  // bias_bwd over 1 slab of rows (N = 50), 5 (301) and 132 (N = 9001:
  // launch.hpp column_sum_launch), accumulating; and repeating bitwise.
  for (int rows : {50, N, 9001}) {
    const Vec xr = randn(size_t(rows) * C, 16);
    Vec db = randn(C, 8);
    float *ddb = up(db), *dxr = up(xr);
    cpu_->bias_bwd(db.data(), xr.data(), rows, C);
    gpu_->bias_bwd(ddb, dxr, rows, C);
    const Vec first = down(ddb, C);
    compare("bias_bwd (accumulates) N=" + std::to_string(rows), first, db, 1e-4, 1e-4);
    float* again = up(randn(C, 8));
    gpu_->bias_bwd(again, dxr, rows, C);
    EXPECT_EQ(down(again, C), first) << "bias_bwd must repeat bitwise, N=" << rows;
  }
}

// ----------------------------------------------------------------- norms ----

TEST_P(OpsVsCpu, MoeRows) {
  const MoeRowsCase c;
  const int N = c.N, k = c.k, C = c.C, M = c.M;
  const Vec x = randn(size_t(N) * C, 75), y = randn(size_t(M) * C, 76), dy = randn(size_t(N) * C, 77);
  int32_t *d_token = up(c.row_token), *d_choice = up(c.row_choice), *d_row = up(c.row);
  float* d_w = up(c.w);
  float* dg = up(Vec(size_t(M) * C));
  gpu_->gather_rows(dg, up(x), d_token, M, C);
  Vec g(size_t(M) * C);
  cpu_->gather_rows(g.data(), x.data(), c.row_token.data(), M, C);
  compare("gather_rows", down(dg, g.size()), g, 0, 0);
  for (const bool weighted : {true, false}) {
    float* dout = up(Vec(size_t(N) * C));
    gpu_->combine_rows(dout, up(y), d_row, weighted ? d_w : nullptr, N, k, C);
    Vec out(size_t(N) * C);
    cpu_->combine_rows(out.data(), y.data(), c.row.data(), weighted ? c.w.data() : nullptr, N, k, C);
    compare(weighted ? "combine_rows" : "combine_rows (w null)", down(dout, out.size()), out);
  }
  float *ddsrc = up(Vec(size_t(M) * C)), *ddw = up(Vec(size_t(N) * k, 5.0f));
  gpu_->combine_rows_bwd(ddsrc, ddw, up(dy), up(y), d_token, d_choice, d_w, M, C);
  Vec dsrc(size_t(M) * C), dw(size_t(N) * k, 5.0f);
  cpu_->combine_rows_bwd(dsrc.data(), dw.data(), dy.data(), y.data(), c.row_token.data(), c.row_choice.data(),
                         c.w.data(), M, C);
  compare("combine_rows_bwd dsrc", down(ddsrc, dsrc.size()), dsrc, 0, 0);
  compare("combine_rows_bwd dw", down(ddw, dw.size()), dw);
}

TEST_P(OpsVsCpu, LayerNormAndRmsNorm) {
  for (int C : {64, 97, 768}) {
    const int N = 203;
    const Vec x = randn(size_t(N) * C, 9, 2.0f, 0.5f), w = randn(C, 10, 0.5f, 1.0f),
              b = randn(C, 11), dout = randn(size_t(N) * C, 12);
    const std::string tag = " C=" + std::to_string(C);
    Vec out(size_t(N) * C), mean(N), rstd(N);
    cpu_->layernorm_fwd(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    float *d_out = up(Vec(out.size())), *d_mean = up(Vec(N)), *d_rstd = up(Vec(N));
    float *d_x = up(x), *d_w = up(w), *d_b = up(b), *d_g = up(dout);
    gpu_->layernorm_fwd(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, 1e-5f);
    compare("layernorm_fwd out" + tag, down(d_out, out.size()), out);
    compare("layernorm_fwd mean" + tag, down(d_mean, N), mean);
    compare("layernorm_fwd rstd" + tag, down(d_rstd, N), rstd);
    Vec dx = randn(out.size(), 13), dw = randn(C, 14), dbb = randn(C, 15);
    float *d_dx = up(dx), *d_dw = up(dw), *d_db = up(dbb);
    cpu_->layernorm_bwd(dx.data(), dw.data(), dbb.data(), dout.data(), x.data(), w.data(), mean.data(),
                        rstd.data(), N, C);
    gpu_->layernorm_bwd(d_dx, d_dw, d_db, d_g, d_x, d_w, d_mean, d_rstd, N, C);
    compare("layernorm_bwd dx" + tag, down(d_dx, dx.size()), dx);
    compare("layernorm_bwd dw" + tag, down(d_dw, C), dw, 1e-4, 1e-4);
    compare("layernorm_bwd db" + tag, down(d_db, C), dbb, 1e-4, 1e-4);

    const float off = C == 97 ? 1.0f : 0.0f;  // one width with Gemma's 1 + w
    cpu_->rmsnorm_fwd(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f, off);
    gpu_->rmsnorm_fwd(d_out, d_rstd, d_x, d_w, N, C, 1e-5f, off);
    compare("rmsnorm_fwd out" + tag, down(d_out, out.size()), out);
    compare("rmsnorm_fwd rstd" + tag, down(d_rstd, N), rstd);
    cpu_->rmsnorm_bwd(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C, off);
    gpu_->rmsnorm_bwd(d_dx, d_dw, d_g, d_x, d_w, d_rstd, N, C, off);
    compare("rmsnorm_bwd dx" + tag, down(d_dx, dx.size()), dx);
    compare("rmsnorm_bwd dw" + tag, down(d_dw, C), dw, 1e-4, 1e-4);
  }
}

// ----------------------------------------------------------- activations ----

TEST_P(OpsVsCpu, GeluAndSwiglu) {
  const size_t n = 50001;
  const Vec x = randn(n, 16, 3.0f), up_ = randn(n, 17), g = randn(n, 18);
  Vec out(n), dx(n), dup(n);
  float *d_out = up(Vec(n)), *d_dx = up(Vec(n)), *d_dup = up(Vec(n));
  float *d_x = up(x), *d_up = up(up_), *d_g = up(g);
  cpu_->gelu_fwd(out.data(), x.data(), n);
  gpu_->gelu_fwd(d_out, d_x, n);
  compare("gelu_fwd", down(d_out, n), out, 1e-6, 1e-5);
  cpu_->gelu_bwd(dx.data(), g.data(), x.data(), n);
  gpu_->gelu_bwd(d_dx, d_g, d_x, n);
  compare("gelu_bwd", down(d_dx, n), dx, 1e-6, 1e-5);
  for (const GateAct act : {GateAct::silu, GateAct::gelu_tanh}) {
    const std::string name = act == GateAct::silu ? "swiglu" : "geglu";
    cpu_->glu_fwd(out.data(), x.data(), up_.data(), n, act);
    gpu_->glu_fwd(d_out, d_x, d_up, n, act);
    compare(name + " fwd", down(d_out, n), out, 1e-6, 1e-5);
    cpu_->glu_bwd(dx.data(), dup.data(), g.data(), x.data(), up_.data(), n, act);
    gpu_->glu_bwd(d_dx, d_dup, d_g, d_x, d_up, n, act);
    compare(name + " bwd dgate", down(d_dx, n), dx, 1e-6, 1e-5);
    compare(name + " bwd dup", down(d_dup, n), dup, 1e-6, 1e-5);
  }
}

// ------------------------------------------------------------------ rope ----

TEST_P(OpsVsCpu, Rope) {
  const int B = 2, T = 33, H = 3, D = 64, pos = 100;
  // Llama 3.1's own scaling (500000, factor 8, 1, 4, 8192) puts pairs of a 64-wide head in all three bands.
  const Rope llama31{.theta = 500000.0, .scaling = RopeScaling::llama3, .factor = 8.0, .low_freq_factor = 1.0,
                     .high_freq_factor = 4.0, .original_context = 8192.0};
  // Qwen3's YaRN (1000000, factor 4, context 32768) puts a 64-wide head's pairs on both sides of the ramp.
  const Rope qwen3_yarn{.theta = 1000000.0, .scaling = RopeScaling::yarn, .factor = 4.0,
                        .original_context = 32768.0};
  // Phi-3-mini-128k's shape of LongRoPE (factor 32 over 4096) with factors rising along the pairs.
  Rope phi3_longrope{.theta = 10000.0, .scaling = RopeScaling::longrope, .factor = 32.0, .original_context = 4096.0};
  for (int i = 0; i < D / 2; ++i) phi3_longrope.pair_factor[i] = 1.0 + 0.75 * i;
  Rope phi4_partial = phi3_longrope;  // Phi-4-mini's shape: 3/4 of the head turns
  phi4_partial.rotary_dim = 48;
  for (const Rope& rope : {Rope{.theta = 10000.0}, llama31, qwen3_yarn, phi3_longrope, phi4_partial}) {
    const char* names[] = {"plain", "llama3", "yarn", "linear", "longrope"};
    SCOPED_TRACE(names[int(rope.scaling)]);
    Vec x = randn(size_t(B) * T * H * D, 19);
    float* d = up(x);
    cpu_->rope_fwd(x.data(), B, T, H, D, pos, rope);
    gpu_->rope_fwd(d, B, T, H, D, pos, rope);
    compare("rope_fwd", down(d, x.size()), x, 1e-6, 1e-5);
    cpu_->rope_bwd(x.data(), B, T, H, D, pos, rope);
    gpu_->rope_bwd(d, B, T, H, D, pos, rope);
    compare("rope_bwd", down(d, x.size()), x, 1e-6, 1e-5);
  }
}

// ------------------------------------------------------------- embedding ----

TEST_P(OpsVsCpu, EmbeddingVocabSlice) {
  for (int V : {50, 1000}) {  // fewer and more vocabulary rows than dwte's 64 row ranges
    const int B = 3, T = 17, C = 40, vocab_start = V / 2, pos = 5;
    std::mt19937 gen(20);
    IVec tok(size_t(B) * T);
    for (auto& t : tok) t = int32_t(gen() % uint32_t(2 * V));  // about half outside the slice
    const Vec wte = randn(size_t(V) * C, 21), wpe = randn(size_t(T + pos) * C, 22),
              dout = randn(size_t(B) * T * C, 23);
    Vec out(size_t(B) * T * C);
    float* d_out = up(out);
    int32_t* d_tok = up(tok);
    for (bool with_pos : {false, true}) {
      cpu_->embedding_fwd(out.data(), tok.data(), wte.data(), with_pos ? wpe.data() : nullptr, B, T, C,
                          vocab_start, V, pos);
      gpu_->embedding_fwd(d_out, d_tok, up(wte), with_pos ? up(wpe) : nullptr, B, T, C, vocab_start, V, pos);
      compare(with_pos ? "embedding_fwd +wpe" : "embedding_fwd", down(d_out, out.size()), out, 0, 0);
    }
    Vec dwte = randn(wte.size(), 24), dwpe = randn(wpe.size(), 25);
    float *d_dwte = up(dwte), *d_dwpe = up(dwpe);
    cpu_->embedding_bwd(dwte.data(), dwpe.data(), dout.data(), tok.data(), B, T, C, vocab_start, V, pos);
    gpu_->embedding_bwd(d_dwte, d_dwpe, up(dout), d_tok, B, T, C, vocab_start, V, pos);
    compare("embedding_bwd dwte V=" + std::to_string(V), down(d_dwte, dwte.size()), dwte);
    compare("embedding_bwd dwpe V=" + std::to_string(V), down(d_dwpe, dwpe.size()), dwpe);
  }
}

// ------------------------------------------------------------- attention ----

struct AttnCase {
  const char* name;
  int B, Tq, Tk, H, Hkv, D, q_offset, k_offset;
  bool causal;
};

TEST_P(OpsVsCpu, AttentionForwardBackward) {
  const AttnCase cases[] = {
      {"causal gqa D16", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"causal D64", 1, 70, 70, 2, 2, 64, 0, 0, true},
      {"ring block past keys", 2, 20, 45, 4, 1, 32, 50, 10, true},
      {"ring block, masked rows", 1, 40, 24, 2, 2, 32, 0, 30, true},
      {"non-causal D128", 1, 33, 50, 2, 1, 128, 0, 0, false},
      {"causal D256 (large smem)", 1, 40, 40, 2, 2, 256, 0, 0, true},
  };
  for (const AttnCase& c : cases) {
    const size_t nq = size_t(c.B) * c.Tq * c.H * c.D, nk = size_t(c.B) * c.Tk * c.Hkv * c.D;
    const size_t nl = size_t(c.B) * c.H * c.Tq, np = nl * c.Tk;
    const Vec q = randn(nq, 26), k = randn(nk, 27), v = randn(nk, 28), dout = randn(nq, 29);
    Vec out(nq), lse(nl), probs(np);
    cpu_->attention_fwd(out.data(), lse.data(), probs.data(), q.data(), k.data(), v.data(), c.B, c.Tq,
                        c.Tk, c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    float *d_q = up(q), *d_k = up(k), *d_v = up(v), *d_out = up(Vec(nq)), *d_lse = up(Vec(nl)),
          *d_probs = up(Vec(np));
    gpu_->attention_fwd(d_out, d_lse, d_probs, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D,
                        c.q_offset, c.k_offset, c.causal);
    const std::string tag = std::string(" [") + c.name + "]";
    compare("attention_fwd out" + tag, down(d_out, nq), out);
    compare("attention_fwd lse" + tag, down(d_lse, nl), lse);
    compare("attention_fwd probs" + tag, down(d_probs, np), probs, 1e-6, 1e-4);
    Vec dq = randn(nq, 30), dk = randn(nk, 31), dv = randn(nk, 32);
    float *d_dq = up(dq), *d_dk = up(dk), *d_dv = up(dv);
    cpu_->attention_bwd(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), nullptr,
                        q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset,
                        c.k_offset, c.causal);
    gpu_->attention_bwd(d_dq, d_dk, d_dv, up(dout), d_out, d_lse, d_probs, d_q, d_k, d_v, c.B, c.Tq,
                        c.Tk, c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    compare("attention_bwd dq" + tag, down(d_dq, nq), dq, 1e-4, 1e-4);
    compare("attention_bwd dk" + tag, down(d_dk, nk), dk, 1e-4, 1e-4);
    compare("attention_bwd dv" + tag, down(d_dv, nk), dv, 1e-4, 1e-4);
  }
}

// train.dtype = bf16: CUDA's tensor-core attention (cuda/attention_tc.cu)
// against the CPU's bf16 emulation, which rounds the same operands at the
// same points. They differ by fp32 summation order and exp, and a P or dS
// that rounds to the neighbouring bf16 value: 2e-3 abs + 1e-2 rel, against
// bf16-vs-fp32 differences of about 1e-2 of the values. lse and the kept
// probabilities come from fp32 scores of the same rounded operands.
TEST_P(OpsVsCpu, AttentionBf16TensorCores) {
#if PENTAD_TEST_CUDA
  pentad::set_cuda_fused_attention(*gpu_, false);  // the cuBLAS path, also without probs
#endif
  const AttnCase cases[] = {
      {"causal gqa D16", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"causal mqa D64", 2, 150, 150, 4, 1, 64, 0, 0, true},
      {"ring block past keys", 2, 20, 45, 4, 1, 32, 50, 10, true},
      {"ring block, masked rows", 1, 40, 24, 2, 2, 32, 0, 30, true},
      {"ring block, no key visible", 1, 16, 16, 2, 2, 32, 0, 64, true},
      {"non-causal D128", 1, 33, 50, 2, 1, 128, 0, 0, false},
  };
  cpu_->set_compute_dtype(pentad::Dtype::bf16);
  gpu_->set_compute_dtype(pentad::Dtype::bf16);
  for (const AttnCase& c : cases) {
    const size_t nq = size_t(c.B) * c.Tq * c.H * c.D, nk = size_t(c.B) * c.Tk * c.Hkv * c.D;
    const size_t nl = size_t(c.B) * c.H * c.Tq, np = nl * c.Tk;
    const Vec q = randn(nq, 36), k = randn(nk, 37), v = randn(nk, 38), dout = randn(nq, 39);
    Vec out(nq), lse(nl), probs(np);
    cpu_->attention_fwd(out.data(), lse.data(), probs.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H,
                        c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    float *d_q = up(q), *d_k = up(k), *d_v = up(v), *d_out = up(Vec(nq)), *d_lse = up(Vec(nl)),
          *d_probs = up(Vec(np)), *d_out2 = up(Vec(nq)), *d_lse2 = up(Vec(nl));
    gpu_->attention_fwd(d_out, d_lse, d_probs, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset,
                        c.k_offset, c.causal);
    gpu_->attention_fwd(d_out2, d_lse2, nullptr, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset,
                        c.k_offset, c.causal);
    const std::string tag = std::string(" bf16 [") + c.name + "]";
    compare("attention_fwd out" + tag, down(d_out, nq), out, 2e-3, 1e-2);
    compare("attention_fwd lse" + tag, down(d_lse, nl), lse, 1e-4, 1e-4);
    compare("attention_fwd probs" + tag, down(d_probs, np), probs, 1e-5, 1e-3);
    EXPECT_EQ(down(d_out2, nq), down(d_out, nq)) << "with and without probs, bitwise" << tag;
    Vec dq = randn(nq, 40), dk = randn(nk, 41), dv = randn(nk, 42);
    const Vec dq0 = dq, dk0 = dk, dv0 = dv;
    float *d_dq = up(dq), *d_dk = up(dk), *d_dv = up(dv), *d_do = up(dout);
    cpu_->attention_bwd(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), nullptr, q.data(),
                        k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    gpu_->attention_bwd(d_dq, d_dk, d_dv, d_do, d_out, d_lse, nullptr, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H, c.Hkv,
                        c.D, c.q_offset, c.k_offset, c.causal);
    compare("attention_bwd dq" + tag, down(d_dq, nq), dq, 2e-3, 1e-2);
    compare("attention_bwd dk" + tag, down(d_dk, nk), dk, 2e-3, 1e-2);
    compare("attention_bwd dv" + tag, down(d_dv, nk), dv, 2e-3, 1e-2);
    // A second backward into fresh accumulators repeats the first bitwise.
    float *d_dq2 = up(dq0), *d_dk2 = up(dk0), *d_dv2 = up(dv0);
    gpu_->attention_bwd(d_dq2, d_dk2, d_dv2, d_do, d_out, d_lse, nullptr, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H,
                        c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    EXPECT_EQ(down(d_dq2, nq), down(d_dq, nq)) << "bf16 backward repeats bitwise" << tag;
    EXPECT_EQ(down(d_dk2, nk), down(d_dk, nk)) << "bf16 backward repeats bitwise" << tag;
  }
  cpu_->set_compute_dtype(pentad::Dtype::fp32);
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
#if PENTAD_TEST_CUDA
  pentad::set_cuda_fused_attention(*gpu_, true);
#endif
}

// train.dtype = bf16 without probabilities: CUDA's fused attention
// (cuda/attention_flash.cu) against the CPU's bf16 emulation, within the
// bounds of tests/lib/attention_p_rounding.hpp (the forward rounds P at
// another point; the backward at the same points), the head dimensions
// each direction is built for counted as fused (16, 32, 64 and 128 both
// ways; the others take the cuBLAS path), and a second call
// repeats the first bitwise. The backward starts from the CPU's out and
// lse. tests/unit/test_cuda_flash_attention.cpp runs the same kernel code
// on the host.
TEST_P(OpsVsCpu, AttentionBf16Fused) {
  const AttnCase cases[] = {
      {"causal gqa D16", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"causal mqa D64, 3 query blocks", 2, 150, 150, 4, 1, 64, 0, 0, true},
      {"ring block past keys", 2, 20, 45, 4, 1, 32, 50, 10, true},
      {"ring block across", 1, 70, 130, 2, 2, 64, 60, 0, true},
      {"ring block, masked rows", 1, 40, 24, 2, 2, 32, 0, 30, true},
      {"ring block, no key visible", 1, 16, 16, 2, 2, 32, 0, 64, true},
      {"non-causal D128", 1, 33, 50, 2, 1, 128, 0, 0, false},
      {"causal D128 gqa, T 1024", 1, 1024, 1024, 4, 2, 128, 0, 0, true},
      {"causal D64, T 1024", 1, 1024, 1024, 2, 2, 64, 0, 0, true},
      {"causal D8 (not built: cuBLAS path)", 1, 20, 20, 2, 2, 8, 0, 0, true},
      {"causal D256 (not built: cuBLAS path)", 1, 20, 20, 2, 2, 256, 0, 0, true},
  };
  cpu_->set_compute_dtype(pentad::Dtype::bf16);
  gpu_->set_compute_dtype(pentad::Dtype::bf16);
  const bool cuda = GetParam() == "cuda";
  // PENTAD_TEST_SHORT=1 (gpu_check.sh's racecheck of this test) skips the T = 1024 cases.
  const char* short_env = std::getenv("PENTAD_TEST_SHORT");
  const bool short_run = short_env && std::string(short_env) == "1";
  for (const AttnCase& c : cases) {
    if (short_run && c.Tq > 256) continue;
    const size_t nq = size_t(c.B) * c.Tq * c.H * c.D, nk = size_t(c.B) * c.Tk * c.Hkv * c.D;
    const size_t nl = size_t(c.B) * c.H * c.Tq, np = nl * c.Tk;
    Vec q = randn(nq, 46), k = randn(nk, 47), v = randn(nk, 48);
    for (auto& x : q) x *= 2.0f;  // scores of a few units: rows neither flat nor one-hot
    Vec out(nq), lse(nl), probs(np);
    cpu_->attention_fwd(out.data(), lse.data(), probs.data(), q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H,
                        c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    float *d_q = up(q), *d_k = up(k), *d_v = up(v), *d_out = up(Vec(nq)), *d_lse = up(Vec(nl)),
          *d_out2 = up(Vec(nq)), *d_lse2 = up(Vec(nl));
    const size_t fused_before = gpu_->attention_fused();
    gpu_->attention_fwd(d_out, d_lse, nullptr, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset,
                        c.k_offset, c.causal);
    const std::string tag = std::string(" bf16 fused [") + c.name + "]";
    const bool built = c.D == 16 || c.D == 32 || c.D == 64 || c.D == 128;
    EXPECT_EQ(gpu_->attention_fused() - fused_before, cuda && built ? 1u : 0u) << tag;
    const Vec got = down(d_out, nq), got_lse = down(d_lse, nl);
    const double worst = pentad::test::expect_within_p_rounding(got, got_lse, out, lse, probs, v,
                                                                {c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D});
    std::printf("%s: largest out error %.3f of its bound\n", tag.c_str(), worst);
    gpu_->attention_fwd(d_out2, d_lse2, nullptr, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset,
                        c.k_offset, c.causal);
    EXPECT_EQ(down(d_out2, nq), got) << "repeats bitwise" << tag;
    EXPECT_EQ(down(d_lse2, nl), got_lse) << "repeats bitwise" << tag;

    // Backward from the CPU's out and lse (so that both see the same delta),
    // into random accumulators.
    const Vec dout = randn(nq, 49), dq0 = randn(nq, 50), dk0 = randn(nk, 51), dv0 = randn(nk, 52);
    Vec dq = dq0, dk = dk0, dv = dv0;
    cpu_->attention_bwd(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), nullptr, q.data(),
                        k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    const Vec delta = pentad::test::attention_delta(dout, out, {c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D}, true);
    float *d_do = up(dout), *d_cpu_out = up(out), *d_cpu_lse = up(lse);
    float *d_dq = up(dq0), *d_dk = up(dk0), *d_dv = up(dv0);
    const size_t bwd_before = gpu_->attention_fused();
    gpu_->attention_bwd(d_dq, d_dk, d_dv, d_do, d_cpu_out, d_cpu_lse, nullptr, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H,
                        c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    const bool bwd_built = built;
    EXPECT_EQ(gpu_->attention_fused() - bwd_before, cuda && bwd_built ? 1u : 0u) << "backward" << tag;
    const Vec g_dq = down(d_dq, nq), g_dk = down(d_dk, nk), g_dv = down(d_dv, nk);
    const pentad::test::BwdWorst bw = pentad::test::expect_bwd_within_rounding(
        g_dq, g_dk, g_dv, dq, dk, dv, q, k, v, dout, lse, delta, {c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D}, c.q_offset,
        c.k_offset, c.causal);
    std::printf("%s backward: largest errors %.1e %.1e %.1e of their bounds\n", tag.c_str(), bw.dq, bw.dk, bw.dv);
    float *d_dq2 = up(dq0), *d_dk2 = up(dk0), *d_dv2 = up(dv0);
    gpu_->attention_bwd(d_dq2, d_dk2, d_dv2, d_do, d_cpu_out, d_cpu_lse, nullptr, d_q, d_k, d_v, c.B, c.Tq, c.Tk,
                        c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    EXPECT_EQ(down(d_dq2, nq), g_dq) << "backward repeats bitwise" << tag;
    EXPECT_EQ(down(d_dk2, nk), g_dk) << "backward repeats bitwise" << tag;
    EXPECT_EQ(down(d_dv2, nk), g_dv) << "backward repeats bitwise" << tag;
  }
  cpu_->set_compute_dtype(pentad::Dtype::fp32);
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
}

// ---------------------------------------------------------- cross-entropy ----

// V = 283 real columns in rows of ld = 300: the last 17 are vocabulary padding.
TEST_P(OpsVsCpu, CrossEntropyVocabSlice) {
  const int N = 19, V = 283, ld = 300, vocab_start = 100;
  const Vec logits = randn(size_t(N) * ld, 33, 3.0f);
  std::mt19937 gen(34);
  IVec tg(N);
  for (auto& t : tg) t = int32_t(gen() % 500);
  tg[3] = -1;  // ignored row
  Vec rowmax(N), st(2 * size_t(N)), losses(N), dl(logits.size());
  float *d_log = up(logits), *d_rowmax = up(Vec(N)), *d_st = up(Vec(2 * size_t(N))),
        *d_losses = up(Vec(N)), *d_dl = up(Vec(logits.size()));
  int32_t* d_tg = up(tg);
  cpu_->xent_rowmax(rowmax.data(), logits.data(), N, V, ld);
  gpu_->xent_rowmax(d_rowmax, d_log, N, V, ld);
  compare("xent_rowmax", down(d_rowmax, N), rowmax, 0, 0);
  cpu_->xent_sumexp(st.data(), st.data() + N, logits.data(), rowmax.data(), tg.data(), N, V, ld, vocab_start);
  gpu_->xent_sumexp(d_st, d_st + N, d_log, d_rowmax, d_tg, N, V, ld, vocab_start);
  compare("xent_sumexp / target logit", down(d_st, st.size()), st, 1e-5, 1e-5);
  cpu_->xent_bwd(dl.data(), losses.data(), logits.data(), rowmax.data(), st.data(), st.data() + N,
                 tg.data(), 0.25f, N, V, ld, vocab_start);
  gpu_->xent_bwd(d_dl, d_losses, d_log, d_rowmax, d_st, d_st + N, d_tg, 0.25f, N, V, ld, vocab_start);
  compare("xent_bwd losses", down(d_losses, N), losses);
  compare("xent_bwd dlogits", down(d_dl, dl.size()), dl, 1e-7, 1e-5);
  // In place (dlogits aliasing logits), as the model calls it.
  gpu_->xent_bwd(d_log, nullptr, d_log, d_rowmax, d_st, d_st + N, d_tg, 0.25f, N, V, ld, vocab_start);
  compare("xent_bwd dlogits in place", down(d_log, dl.size()), dl, 1e-7, 1e-5);
}

// ----------------------------------------------------------------- adamw ----

TEST_P(OpsVsCpu, AdamW) {
  const size_t n = 10007;
  Vec p = randn(n, 35), g = randn(n, 36), m = randn(n, 37, 0.1f), v = randn(n, 38, 0.1f);
  for (auto& x : v) x = std::fabs(x);
  float *d_p = up(p), *d_g = up(g), *d_m = up(m), *d_v = up(v);
  for (int step = 1; step <= 3; ++step) {
    cpu_->adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step);
    gpu_->adamw(d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step);
  }
  compare("adamw p", down(d_p, n), p, 1e-6, 1e-5);
  compare("adamw m", down(d_m, n), m, 1e-7, 1e-5);
  compare("adamw v", down(d_v, n), v, 1e-7, 1e-5);
}


// Whether attention_bwd reads the stored probabilities is what the memory
// plan assumes (model/memory_plan.hpp): the model asks the backend, the
// planner the backend's kind, and both must give the same answer.
TEST_P(ReferenceOps, AttentionProbsAsThePlannerAssumes) {
  EXPECT_EQ(backend().attention_bwd_reads_probs(), pentad::attention_bwd_reads_probs(pentad::BackendKind::cpu));
}
TEST_P(OpsVsCpu, AttentionProbsAsThePlannerAssumes) {
  EXPECT_EQ(gpu_->attention_bwd_reads_probs(), pentad::attention_bwd_reads_probs(pentad::BackendKind::cuda));
}
// The same for the bytes per value of the bf16 weight copies.
pentad::Config bf16_deck(pentad::BackendKind kind) {
  pentad::Config c;
  c.backend = kind;
  c.train.dtype = pentad::ComputeDtype::bf16;
  return c;
}
TEST_P(ReferenceOps, WeightCopyBytesAsThePlannerAssumes) {
  EXPECT_EQ(int(backend().weight_copy_elem_bytes()), pentad::weight_copy_bytes(bf16_deck(pentad::BackendKind::cpu)));
}
TEST_P(OpsVsCpu, WeightCopyBytesAsThePlannerAssumes) {
  EXPECT_EQ(int(gpu_->weight_copy_elem_bytes()), pentad::weight_copy_bytes(bf16_deck(pentad::BackendKind::cuda)));
}
// And for the MLP activation held in bf16 (train.bf16_activations).
TEST_P(ReferenceOps, Bf16ActivationBytesAsThePlannerAssumes) {
  backend().set_compute_dtype(pentad::Dtype::bf16);
  EXPECT_EQ(int(backend().bf16_activation_bytes()), pentad::bf16_activation_bytes(bf16_deck(pentad::BackendKind::cpu)));
  backend().set_compute_dtype(pentad::Dtype::fp32);
  EXPECT_EQ(backend().bf16_activation_bytes(), 0u);
}
TEST_P(OpsVsCpu, Bf16ActivationBytesAsThePlannerAssumes) {
  gpu_->set_compute_dtype(pentad::Dtype::bf16);
  EXPECT_EQ(int(gpu_->bf16_activation_bytes()), pentad::bf16_activation_bytes(bf16_deck(pentad::BackendKind::cuda)));
  gpu_->set_compute_dtype(pentad::Dtype::fp32);
}

// The reference suite on the backends the host addresses; the comparison on
// every other backend (skipped where it is not built or has no GPU).
INSTANTIATE_TEST_SUITE_P(Backends, ReferenceOps, ::testing::Values("cpu"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(Backends, OpsVsCpu, ::testing::Values("cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
