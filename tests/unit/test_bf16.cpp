// Mixed precision on the CPU (train.dtype = bf16): the bf16 rounding against
// known bit patterns and a brute-force nearest-value search; the bf16 GEMM
// against an fp64 product of the rounded operands; and the FP32 master
// weights of the trainer's optimizer path (DataParallel + AdamW) keeping
// updates that are each below half a bf16 ulp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu.hpp"
#include "bf16.hpp"
#include "comm/comm.hpp"
#include "config/config.hpp"
#include "parallel/dp/data_parallel.hpp"
#include "model/params.hpp"
#include "runtime.hpp"

namespace {

using pentad::bf16_bits;
using pentad::round_bf16;

uint16_t bits_of(uint32_t f32_bits) { return bf16_bits(std::bit_cast<float>(f32_bits)); }

// --------------------------------------------------------------- rounding ---

TEST(Bf16, KnownBitPatterns) {
  EXPECT_EQ(bits_of(0x3f800000u), 0x3f80u);  // 1.0 exact
  EXPECT_EQ(bits_of(0x3f807fffu), 0x3f80u);  // just below the tie: down
  EXPECT_EQ(bits_of(0x3f808000u), 0x3f80u);  // tie, even below: down
  EXPECT_EQ(bits_of(0x3f808001u), 0x3f81u);  // just above the tie: up
  EXPECT_EQ(bits_of(0x3f818000u), 0x3f82u);  // tie, odd below: up to even
  EXPECT_EQ(bits_of(0xbf818000u), 0xbf82u);  // the same, negative
  EXPECT_EQ(bits_of(0x3f7f8000u), 0x3f80u);  // tie across the exponent boundary
  EXPECT_EQ(bits_of(0x00008000u), 0x0000u);  // subnormal tie, even: down
  EXPECT_EQ(bits_of(0x00018000u), 0x0002u);  // subnormal tie, odd: up
  EXPECT_EQ(bits_of(0x80000000u), 0x8000u);  // -0 keeps its sign
  EXPECT_EQ(bits_of(0x7f800000u), 0x7f80u);  // +Inf
  EXPECT_EQ(bits_of(0xff800000u), 0xff80u);  // -Inf
  EXPECT_EQ(bits_of(0x7f7f0000u), 0x7f7fu);  // largest bf16 is exact
  EXPECT_EQ(bits_of(0x7f7fffffu), 0x7f80u);  // FLT_MAX rounds to +Inf
  // NaNs stay NaN (including a signalling one whose payload sits in the
  // dropped bits, which truncation would turn into Inf), sign kept.
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    const float r = round_bf16(std::bit_cast<float>(nan));
    EXPECT_TRUE(std::isnan(r)) << std::hex << nan;
    EXPECT_EQ(std::signbit(r), (nan >> 31) != 0) << std::hex << nan;
  }
}

// The nearest bf16 by search: the two candidates around x (truncation and
// the next value up in magnitude), compared in double, ties to an even
// mantissa. Independent of the bit trick in bf16.hpp.
uint16_t nearest_bf16_by_search(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t lo = uint16_t(u >> 16), hi = uint16_t(lo + 1);
  const double dx = x;
  const double dlo = std::fabs(double(pentad::bf16_to_float(lo)) - dx);
  // hi may be Inf (lo is the largest finite): compare against the midpoint.
  double dhi;
  if ((hi & 0x7f80u) == 0x7f80u) {
    const double max_bf16 = double(pentad::bf16_to_float(lo));
    const double ulp = std::ldexp(1.0, std::ilogb(max_bf16) - 7);
    dhi = std::fabs(std::copysign(std::fabs(max_bf16) + ulp, dx) - dx);
  } else {
    dhi = std::fabs(double(pentad::bf16_to_float(hi)) - dx);
  }
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) ? hi : lo;
}

TEST(Bf16, MatchesNearestValueSearch) {
  std::mt19937 gen(7);
  int checked = 0;
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = gen();
    const float x = std::bit_cast<float>(u);
    if (!std::isfinite(x)) continue;
    const uint16_t want = nearest_bf16_by_search(x);
    ASSERT_EQ(bf16_bits(x), want) << "x bits " << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 1900000);
}

// ------------------------------------------------------------------- gemm ---

struct Mat {
  int rows, cols, ld;
  std::vector<float> v;
  float at(int r, int c) const { return v[size_t(r) * ld + c]; }
};

Mat random_mat(int rows, int cols, int pad, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Mat m{rows, cols, cols + pad, std::vector<float>(size_t(rows) * (cols + pad))};
  for (auto& x : m.v) x = d(gen);
  return m;
}

// C = alpha op(A) op(B) + beta C0 checked against fp64 from the rounded
// operands (or the unrounded ones, rounded = false), with the error bound of
// fp32 summation: |err| <= 2 K u sum_k |a_ik b_kj| + u |c|, u = 2^-24.
// Returns the largest |C_bf16 - C_exact_fp32ops| / bound, to show that the
// rounding changes the result by more than accumulation error.
double check_gemm(bool ta, bool tb, int M, int N, int K, int batch) {
  auto be = pentad::make_cpu_backend(2);
  be->set_compute_dtype(pentad::Dtype::bf16);
  const float alpha = 0.75f, beta = 0.5f;
  const Mat A = random_mat(batch * (ta ? K : M), ta ? M : K, 3, 1);
  const Mat B = random_mat(batch * (tb ? N : K), tb ? K : N, 2, 2);
  const Mat C0 = random_mat(batch * M, N, 1, 3);
  std::vector<float> C = C0.v;
  const long sa = long(ta ? K : M) * A.ld, sb = long(tb ? N : K) * B.ld, sc = long(M) * C0.ld;
  if (batch == 1)
    be->gemm(ta, tb, M, N, K, alpha, A.v.data(), A.ld, B.v.data(), B.ld, beta, C.data(), C0.ld);
  else
    be->gemm_batched(ta, tb, M, N, K, alpha, A.v.data(), A.ld, sa, B.v.data(), B.ld, sb, beta,
                     C.data(), C0.ld, sc, batch);
  const double u = std::ldexp(1.0, -24);
  double worst = 0, worst_unrounded = 0;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double exact = 0, exact_unrounded = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          const float a = ta ? A.at(b * K + k, i) : A.at(b * M + i, k);
          const float bb = tb ? B.at(b * N + j, k) : B.at(b * K + k, j);
          exact += double(round_bf16(a)) * double(round_bf16(bb));
          exact_unrounded += double(a) * double(bb);
          mag += std::fabs(double(round_bf16(a)) * double(round_bf16(bb)));
        }
        const double c0 = C0.at(b * M + i, j);
        const double ref = alpha * exact + beta * c0;
        const double got = C[size_t(b * M + i) * C0.ld + j];
        const double bound = 2.0 * K * u * std::fabs(alpha) * mag + 2 * u * (std::fabs(ref) + std::fabs(beta * c0));
        worst = std::max(worst, std::fabs(got - ref) / bound);
        worst_unrounded = std::max(worst_unrounded, std::fabs(got - (alpha * exact_unrounded + beta * c0)) / bound);
      }
  EXPECT_LE(worst, 1.0) << "bf16 gemm vs fp64 of the rounded operands: worst error / fp32 bound = " << worst;
  std::printf("gemm ta=%d tb=%d batch=%d: worst |err|/bound %.3g vs rounded operands, %.3g vs unrounded\n",
              int(ta), int(tb), batch, worst, worst_unrounded);
  return worst_unrounded;
}

TEST(Bf16, GemmEqualsProductOfRoundedOperands) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      // The rounding is really applied: against the unrounded operands the
      // result is off by far more than fp32 accumulation error.
      EXPECT_GT(check_gemm(ta, tb, 13, 11, 64, 1), 10.0);
    }
  EXPECT_GT(check_gemm(false, true, 9, 7, 40, 3), 10.0);
  EXPECT_GT(check_gemm(true, false, 9, 7, 40, 3), 10.0);
}

TEST(Bf16, Fp32ComputeIsUnchanged) {
  auto be = pentad::make_cpu_backend(2);
  const float a = 1.0f + std::ldexp(1.0f, -12), b = 3.0f;  // a is not a bf16 value
  float c = 0;
  be->gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, a * b);
  be->set_compute_dtype(pentad::Dtype::bf16);
  be->gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, 3.0f);
}

// ---------------------------------------------------------- master weights ---

// The trainer's path: make_backend from a deck with train.dtype = bf16, a
// ParamStore, DataParallel (dp = 1) and its AdamW; the weight is read through
// the backend's gemm as the model reads it. Each AdamW update (~lr, with a
// constant gradient) is below half a bf16 ulp of the weight, so a bf16
// parameter store would never change; the fp32 master accumulates them.
TEST(Bf16, MasterWeightsKeepUpdatesBelowHalfUlp) {
  const std::string deck =
      "[model]\nn_layers = 1\n[train]\ndtype = \"bf16\"\nweight_decay = 0\n"
      "[data]\ntrain = \"x.bin\"\n";
  const pentad::Config cfg = pentad::parse_config(deck, "deck.toml", {}, 1);
  auto be = pentad::make_backend(cfg, MPI_COMM_SELF);
  ASSERT_EQ(be->compute_dtype(), pentad::Dtype::bf16);
  auto dp = pentad::make_comm(cfg, *be, MPI_COMM_SELF, "dp");

  const int n = 4;
  pentad::ParamStore params(*be);
  const int w = params.add("w", {1, n}, pentad::Init::ones, 0, false);
  pentad::DataParallel dpar(params, *be, *dp, cfg.train, 0, 1.0);
  dpar.init(1);
  const float lr = 1e-4f;  // < 2^-9, half the bf16 spacing just below 1.0
  const std::vector<float> ones(n, 1.0f);
  std::vector<float> master(n), pure(n, 1.0f);
  // A bf16-stored weight under the same updates: the same AdamW kernel on a
  // separate buffer, rounded back to bf16 after every step.
  float* pure_dev = be->alloc(n, pentad::Mem::scratch);
  float* m = be->alloc(n, pentad::Mem::scratch);
  float* v = be->alloc(n, pentad::Mem::scratch);
  float* g = be->alloc(n, pentad::Mem::scratch);
  be->from_host(pure_dev, pure.data(), n * sizeof(float));
  be->from_host(g, ones.data(), n * sizeof(float));
  float prev = 1.0f;
  const int steps = 200;
  for (int s = 1; s <= steps; ++s) {
    dpar.begin_step();
    be->from_host(params.grad(w), ones.data(), n * sizeof(float));
    dpar.finish_backward();
    dpar.optimizer_step(s, lr, 1.0f);
    dpar.get_param(w, master.data());
    ASSERT_LT(std::fabs(prev - master[0]), std::ldexp(1.0f, -9)) << "step " << s << ": update not below half an ulp";
    prev = master[0];
    be->adamw(pure_dev, g, m, v, n, lr, cfg.train.beta1, cfg.train.beta2, cfg.train.eps, 0.0f, 1.0f, s);
    be->to_host(pure.data(), pure_dev, n * sizeof(float));
    for (float& x : pure) x = round_bf16(x);
    be->from_host(pure_dev, pure.data(), n * sizeof(float));
  }
  // Adam with a constant gradient moves by ~lr per step.
  EXPECT_NEAR(1.0 - master[0], steps * lr, 0.05 * steps * lr);
  EXPECT_EQ(pure[0], 1.0f) << "a bf16-stored weight should not have moved";
  // The compute copy the GEMMs see is the rounded master, not the initial 1.
  const float one = 1.0f;
  float y = 0;
  be->gemm(false, true, 1, 1, 1, 1.0f, &one, 1, params.param(w), 1, 0.0f, &y, 1);
  EXPECT_EQ(y, round_bf16(master[0]));
  EXPECT_LT(y, 1.0f);
  for (float* p : {pure_dev, m, v, g}) be->free_bytes(p);
}

// ----------------------------------------------------------- weight copies ---

// Backend::keep_weight_copy: a GEMM whose operand lies in a registered range
// reads the copy, made once per change of the range, and gives bitwise what
// the same GEMM gives on an unregistered buffer holding the same values.
TEST(Bf16, WeightCopyMadeOncePerChange) {
  auto be = pentad::make_cpu_backend(2);
  be->set_compute_dtype(pentad::Dtype::bf16);
  const int rows = 12, cols = 10, ld = 16, M = 5;  // W: rows x cols inside a (rows, ld) block
  const size_t n = size_t(rows) * ld;
  float* w = be->alloc(n, pentad::Mem::params);
  float* plain = be->alloc(n, pentad::Mem::scratch);  // the same values, no copy
  const size_t params_bytes = be->mem_stats().cur_bytes[int(pentad::Mem::params)];
  be->keep_weight_copy(w, n);
  EXPECT_EQ(be->mem_stats().cur_bytes[int(pentad::Mem::params)], 2 * params_bytes);  // floats on the CPU
  const Mat X = random_mat(M, cols, 0, 7);
  auto set_w = [&](uint32_t seed) {
    const Mat v = random_mat(rows, ld, 0, seed);
    be->from_host(w, v.v.data(), n * sizeof(float));
    be->from_host(plain, v.v.data(), n * sizeof(float));
  };
  // y = X W^T over the first `r` rows of W, from w and from plain.
  auto same = [&](int r) {
    std::vector<float> a(size_t(M) * r), b(size_t(M) * r);
    be->gemm(false, true, M, r, cols, 1.0f, X.v.data(), cols, w, ld, 0.0f, a.data(), r);
    be->gemm(false, true, M, r, cols, 1.0f, X.v.data(), cols, plain, ld, 0.0f, b.data(), r);
    return a == b;
  };
  set_w(1);
  EXPECT_EQ(be->weight_copies_made(), 0u);  // made when first read
  EXPECT_TRUE(same(rows));
  EXPECT_TRUE(same(rows - 3));
  EXPECT_EQ(be->weight_copies_made(), 1u);  // read twice, made once
  set_w(2);                                 // from_host into the range: stale
  EXPECT_TRUE(same(rows));
  EXPECT_EQ(be->weight_copies_made(), 2u);
  // adamw on part of the range: stale.
  std::vector<float> g(8, 0.5f), m(8, 0.0f), v(8, 0.0f), host(n);
  be->adamw(w + 3 * ld, g.data(), m.data(), v.data(), 8, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1);
  be->to_host(host.data(), w, n * sizeof(float));
  be->from_host(plain, host.data(), n * sizeof(float));
  EXPECT_TRUE(same(rows));
  EXPECT_EQ(be->weight_copies_made(), 3u);
  // A write elsewhere leaves the copy current; one overlapping its last byte does not.
  be->weights_written(plain, n * sizeof(float));
  EXPECT_TRUE(same(rows));
  EXPECT_EQ(be->weight_copies_made(), 3u);
  be->weights_written(w + n - 1, 4);
  EXPECT_TRUE(same(rows));
  EXPECT_EQ(be->weight_copies_made(), 4u);
  // An operand reaching past the range is rounded per call, not read from the copy.
  float* wide = be->alloc(2 * n, pentad::Mem::scratch);
  be->keep_weight_copy(wide, n);  // registers the first half only
  std::vector<float> a(size_t(M) * 2 * rows);
  be->gemm(false, true, M, 2 * rows, cols, 1.0f, X.v.data(), cols, wide, ld, 0.0f, a.data(), 2 * rows);
  EXPECT_EQ(be->weight_copies_made(), 4u);
  // free_bytes drops the copies.
  be->free_bytes(wide);
  be->free_bytes(w);
  EXPECT_EQ(be->mem_stats().cur_bytes[int(pentad::Mem::params)], 0u);
  be->free_bytes(plain);
}

TEST(Bf16, NoWeightCopyInFp32OrWhenOff) {
  auto be = pentad::make_cpu_backend(2);
  float* w = be->alloc(64, pentad::Mem::params);
  const size_t bytes = be->mem_stats().cur_bytes[int(pentad::Mem::params)];
  be->keep_weight_copy(w, 64);  // fp32: none
  EXPECT_EQ(be->mem_stats().cur_bytes[int(pentad::Mem::params)], bytes);
  be->set_compute_dtype(pentad::Dtype::bf16);
  be->set_weight_copies(false);  // train.bf16_weight_copies = false: none
  EXPECT_FALSE(be->keeps_weight_copies());
  be->keep_weight_copy(w, 64);
  EXPECT_EQ(be->mem_stats().cur_bytes[int(pentad::Mem::params)], bytes);
  be->free_bytes(w);
}

// Backend::hold_gemm_form (train.bf16_activations): the CPU's GEMM form is
// floats rounded to bf16. A writer (gelu_fwd, glu_fwd, layernorm_fwd,
// rmsnorm_fwd, linear_fwd's act_out, attention_fwd's out) rounds what it
// writes into a held buffer and nothing else; a GEMM reads the held buffer
// in place (counted), as A or as B, and gives bitwise what it gives from an
// unheld buffer of the unrounded values (which it rounds itself), and so
// does attention_bwd from a held out, and attention from held q, k, v
// (stored by to_gemm_form). Freeing the block drops the hold;
// fp32, or the option off, holds nothing.
TEST(Bf16, HeldActivationWrittenRoundedAndReadInPlace) {
  auto be = pentad::make_cpu_backend(2);
  be->set_compute_dtype(pentad::Dtype::bf16);
  EXPECT_EQ(be->bf16_activation_bytes(), 4u);
  const int N = 9, F = 24, C = 10;
  const size_t NF = size_t(N) * F;
  const Mat x = random_mat(N, F, 0, 11), g = random_mat(N, F, 0, 12), w = random_mat(C, F, 0, 13);
  const Mat dy = random_mat(N, C, 0, 14), wf = random_mat(F, F, 0, 15);
  float* act = be->alloc(NF, pentad::Mem::activations);
  float* plain = be->alloc(NF, pentad::Mem::activations);
  be->hold_gemm_form(act, NF);
  EXPECT_TRUE(be->held_in_gemm_form(act));
  ASSERT_GE(size_t(F) * F, NF);  // wf also serves as attention's v (B T H D = N F values)
  EXPECT_FALSE(be->held_in_gemm_form(plain));
  EXPECT_FALSE(be->held_in_gemm_form(act + 1));  // only a held buffer's first value
  auto check_written = [&](const char* what) {
    size_t not_bf16 = 0;
    for (size_t i = 0; i < NF; ++i) {
      EXPECT_EQ(act[i], pentad::round_bf16(plain[i])) << what << " value " << i;
      not_bf16 += plain[i] != pentad::round_bf16(plain[i]);
    }
    EXPECT_GT(not_bf16, NF / 2) << what << ": the unheld output was rounded too";
  };
  be->gelu_fwd(act, x.v.data(), NF);
  be->gelu_fwd(plain, x.v.data(), NF);
  check_written("gelu_fwd");
  be->glu_fwd(act, g.v.data(), x.v.data(), NF, pentad::GateAct::silu);
  be->glu_fwd(plain, g.v.data(), x.v.data(), NF, pentad::GateAct::silu);
  check_written("glu_fwd");
  std::vector<float> mean(N), rstd(N);
  be->layernorm_fwd(act, mean.data(), rstd.data(), x.v.data(), g.v.data(), g.v.data() + F, N, F, 1e-5f);
  be->layernorm_fwd(plain, mean.data(), rstd.data(), x.v.data(), g.v.data(), g.v.data() + F, N, F, 1e-5f);
  check_written("layernorm_fwd");
  be->rmsnorm_fwd(act, rstd.data(), x.v.data(), g.v.data(), N, F, 1e-5f, 0.0f);
  be->rmsnorm_fwd(plain, rstd.data(), x.v.data(), g.v.data(), N, F, 1e-5f, 0.0f);
  check_written("rmsnorm_fwd");
  std::vector<float> y(NF);
  be->linear_fwd(y.data(), g.v.data(), wf.v.data(), nullptr, N, F, F, 0.0f, act);  // (N,F) (F,F)^T
  be->linear_fwd(y.data(), g.v.data(), wf.v.data(), nullptr, N, F, F, 0.0f, plain);
  check_written("linear_fwd act_out");
  // Attention's output (B 1, T N, H 2, D F / 2): written rounded, and the
  // backward (its delta = rowsum(dO * O) reads O rounded in a bf16 run)
  // gives bitwise the same gradients from the held and the plain output.
  const int H = 2, D = F / H;
  std::vector<float> lse(size_t(H) * N);
  const Mat dout = random_mat(N, F, 0, 16);
  be->attention_fwd(act, lse.data(), nullptr, g.v.data(), x.v.data(), wf.v.data(), 1, N, N, H, H, D, 0, 0, true);
  be->attention_fwd(plain, lse.data(), nullptr, g.v.data(), x.v.data(), wf.v.data(), 1, N, N, H, H, D, 0, 0, true);
  check_written("attention_fwd");
  auto attention_grads = [&](const float* out) {
    std::vector<float> d(3 * NF, 0.0f);
    be->attention_bwd(d.data(), d.data() + NF, d.data() + 2 * NF, dout.v.data(), out, lse.data(), nullptr,
                      g.v.data(), x.v.data(), wf.v.data(), 1, N, N, H, H, D, 0, 0, true);
    return d;
  };
  EXPECT_EQ(attention_grads(act), attention_grads(plain));
  // q, k and v held, stored by to_gemm_form (rounded): attention rounds its
  // operands once, so from the held ones it gives bitwise the out, lse and
  // gradients it gives from the fp32 values.
  float* qkv[3];
  const float* qkv_src[3] = {g.v.data(), x.v.data(), wf.v.data()};
  for (int i = 0; i < 3; ++i) {
    qkv[i] = be->alloc(NF, pentad::Mem::activations);
    be->hold_gemm_form(qkv[i], NF);
    be->to_gemm_form(qkv[i], qkv_src[i], NF);
    for (size_t j = 0; j < NF; ++j) ASSERT_EQ(qkv[i][j], pentad::round_bf16(qkv_src[i][j])) << "to_gemm_form";
  }
  EXPECT_TRUE(be->qkv_held(qkv[0], qkv[1], qkv[2]));
  EXPECT_FALSE(be->qkv_held(qkv_src[0], qkv_src[1], qkv_src[2]));
  // Some held and some not: no kernel reads that, and the run stops with a message.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(be->qkv_held(qkv[0], qkv_src[1], qkv[2]), ::testing::ExitedWithCode(3), "not all held");
  std::vector<float> out_h(NF), lse_h(lse.size());
  be->attention_fwd(out_h.data(), lse_h.data(), nullptr, qkv[0], qkv[1], qkv[2], 1, N, N, H, H, D, 0, 0, true);
  EXPECT_EQ(out_h, std::vector<float>(plain, plain + NF)) << "attention_fwd from held q, k, v";
  EXPECT_EQ(lse_h, lse);
  std::vector<float> d_h(3 * NF, 0.0f);
  be->attention_bwd(d_h.data(), d_h.data() + NF, d_h.data() + 2 * NF, dout.v.data(), plain, lse.data(), nullptr,
                    qkv[0], qkv[1], qkv[2], 1, N, N, H, H, D, 0, 0, true);
  EXPECT_EQ(d_h, attention_grads(plain)) << "attention_bwd from held q, k, v";
  for (float* p : qkv) be->free_bytes(p);
  // The two GEMMs that read the MLP activation, from the held and the plain buffer.
  const size_t reads = be->held_activation_reads();
  auto products = [&](const float* a) {
    std::vector<float> out(size_t(N) * C), dw(size_t(C) * F);
    be->gemm(false, true, N, C, F, 1.0f, a, F, w.v.data(), F, 0.0f, out.data(), C);
    be->gemm(true, false, C, F, N, 1.0f, dy.v.data(), C, a, F, 0.0f, dw.data(), F);
    out.insert(out.end(), dw.begin(), dw.end());
    return out;
  };
  EXPECT_EQ(products(act), products(plain));
  EXPECT_EQ(be->held_activation_reads(), reads + 2);
  be->free_bytes(act);
  EXPECT_FALSE(be->held_in_gemm_form(act));  // the hold went with the block
  // fp32, or bf16 with the option off: nothing is held.
  float* other = be->alloc(NF, pentad::Mem::activations);
  be->set_bf16_activations(false);
  EXPECT_EQ(be->bf16_activation_bytes(), 0u);
  be->hold_gemm_form(other, NF);
  be->set_bf16_activations(true);
  EXPECT_FALSE(be->held_in_gemm_form(other));
  be->set_compute_dtype(pentad::Dtype::fp32);
  EXPECT_EQ(be->bf16_activation_bytes(), 0u);
  be->hold_gemm_form(other, NF);
  be->set_compute_dtype(pentad::Dtype::bf16);
  EXPECT_FALSE(be->held_in_gemm_form(other));
  be->free_bytes(other);
  be->free_bytes(plain);
}

// In a bf16 run the MLP activations read their inputs rounded to bf16,
// both ways (ops.def): from x and from x rounded, gelu_fwd, gelu_bwd,
// glu_fwd and glu_bwd give bitwise the same outputs, as they do from
// inputs held in GEMM form (stored by to_gemm_form). In fp32 the rounded
// inputs give other outputs (so the comparison can fail).
TEST(Bf16, ActivationsReadTheirInputsRounded) {
  auto be = pentad::make_cpu_backend(2);
  const size_t n = 1000;
  const Mat x = random_mat(1, int(n), 0, 21), u = random_mat(1, int(n), 0, 22), d = random_mat(1, int(n), 0, 23);
  auto rounded = [](std::vector<float> v) {
    for (float& e : v) e = pentad::round_bf16(e);
    return v;
  };
  const std::vector<float> xr = rounded(x.v), ur = rounded(u.v);
  // All the ops' outputs from inputs a (GELU's x, the gate) and b (up):
  // the gated ones with SiLU (SwiGLU) and with the GELU (GeGLU).
  auto outputs = [&](const float* a, const float* b) {
    std::vector<float> o(8 * n);
    be->gelu_fwd(o.data(), a, n);
    be->gelu_bwd(o.data() + n, d.v.data(), a, n);
    be->glu_fwd(o.data() + 2 * n, a, b, n, pentad::GateAct::silu);
    be->glu_bwd(o.data() + 3 * n, o.data() + 4 * n, d.v.data(), a, b, n, pentad::GateAct::silu);
    be->glu_fwd(o.data() + 5 * n, a, b, n, pentad::GateAct::gelu_tanh);
    be->glu_bwd(o.data() + 6 * n, o.data() + 7 * n, d.v.data(), a, b, n, pentad::GateAct::gelu_tanh);
    return o;
  };
  EXPECT_NE(outputs(x.v.data(), u.v.data()), outputs(xr.data(), ur.data())) << "fp32 reads the inputs as they are";
  be->set_compute_dtype(pentad::Dtype::bf16);
  const std::vector<float> from_fp32 = outputs(x.v.data(), u.v.data());
  EXPECT_EQ(from_fp32, outputs(xr.data(), ur.data()));
  float* hx = be->alloc(n, pentad::Mem::activations);
  float* hu = be->alloc(n, pentad::Mem::activations);
  be->hold_gemm_form(hx, n);
  be->hold_gemm_form(hu, n);
  be->to_gemm_form(hx, x.v.data(), n);
  be->to_gemm_form(hu, u.v.data(), n);
  EXPECT_EQ(from_fp32, outputs(hx, hu)) << "from held inputs";
  be->free_bytes(hx);
  be->free_bytes(hu);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
