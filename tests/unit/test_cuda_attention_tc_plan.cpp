// The plan of cuda/attention_tc.cu (cuda/attention_tc_plan.hpp), without a
// GPU.
//   Layout: every product's operand offsets are the (B, T, H, D) positions
//     of their (b, h) pair (kv head h / (H / Hkv)), and each call's results
//     are disjoint; the dK/dV calls g = 0..G-1 cover every (b, h) once.
//   Emulation: the whole forward and backward run on the host exactly as the
//     .cu file sequences them (blocks of query rows, the key bound, the six
//     products through column_major_gemm and a naive column-major GEMM over
//     the pointer offsets, the two row kernels' arithmetic), with fp32
//     operands, and must equal the CPU backend's attention within fp32
//     rounding: causal and not, GQA (H/Hkv = 1, 2, 4), several row blocks,
//     and ring-attention key blocks before, across and after the queries.
//   Sizes: rows per block and the workspace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../../cpu/cpu.hpp"
#include "../../cuda/attention_tc_plan.hpp"
#include "../../cuda/gemm_args.hpp"
#include "backend/backend.hpp"

namespace {

namespace cd = pentad::cuda_detail;
using cd::AttnTcDims;
using cd::AttnTcProduct;

constexpr AttnTcProduct kAll[] = {AttnTcProduct::qk,  AttnTcProduct::pv,  AttnTcProduct::dov,
                                  AttnTcProduct::dsk, AttnTcProduct::dsq, AttnTcProduct::pdo};
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

size_t at_q(const AttnTcDims& d, int b, int t, int h) { return ((size_t(b) * d.Tq + t) * d.H + h) * d.D; }
size_t at_kv(const AttnTcDims& d, int b, int t, int kvh) { return ((size_t(b) * d.Tk + t) * d.Hkv + kvh) * d.D; }

TEST(AttentionTcPlan, OffsetsFollowTheLayoutAndResultsAreDisjoint) {
  int checked = 0;
  for (const AttnTcDims d : {AttnTcDims{2, 40, 40, 4, 4, 8}, AttnTcDims{3, 24, 56, 4, 2, 16},
                             AttnTcDims{1, 64, 64, 8, 2, 8}, AttnTcDims{2, 16, 16, 4, 1, 4}}) {
    const int G = d.H / d.Hkv, i0 = 8, rows = 8, kend = 12;
    const size_t blk = size_t(rows) * kend;
    for (AttnTcProduct p : kAll) {
      const bool grouped = p == AttnTcProduct::dsq || p == AttnTcProduct::pdo;
      std::set<int> pairs;
      for (int g = 0; g < (grouped ? G : 1); ++g) {
        std::set<size_t> results;
        ASSERT_EQ(cd::attn_tc_batch(p, d), grouped ? d.B * d.Hkv : d.B * d.H);
        for (int f = 0; f < cd::attn_tc_batch(p, d); ++f) {
          const int e = cd::attn_tc_entry(p, d, f, g), b = e / d.H, h = e % d.H, kvh = h / G;
          EXPECT_TRUE(pairs.insert(e).second) << "entry (b, h) twice, product " << int(p);
          if (grouped) {
            EXPECT_EQ(h % G, g) << "call g holds query head g of each group";
          }
          const cd::AttnTcOffsets o = cd::attn_tc_offsets(p, d, f, g, i0, blk);
          const size_t rows_at = at_q(d, b, i0, h), kv_at = at_kv(d, b, 0, kvh), blk_at = size_t(e) * blk;
          const cd::AttnTcOffsets want =
              p == AttnTcProduct::qk || p == AttnTcProduct::dov   ? cd::AttnTcOffsets{rows_at, kv_at, blk_at}
              : p == AttnTcProduct::pv || p == AttnTcProduct::dsk ? cd::AttnTcOffsets{blk_at, kv_at, rows_at}
                                                                  : cd::AttnTcOffsets{blk_at, rows_at, kv_at};
          EXPECT_EQ(o.a, want.a);
          EXPECT_EQ(o.b, want.b);
          EXPECT_EQ(o.c, want.c);
          EXPECT_TRUE(results.insert(o.c).second) << "two entries of one call write the same result";
          ++checked;
        }
      }
      EXPECT_EQ(int(pairs.size()), d.B * d.H) << "every (b, h) once, product " << int(p);
    }
  }
  std::printf("%d entries checked\n", checked);
}

// ---- the host emulation ----------------------------------------------------

// cuBLAS's column-major GEMM as documented, over one batch entry.
void column_major(const pentad::ColumnMajorGemm& g, float alpha, const float* first, const float* second,
                  float beta, float* C) {
  for (int c = 0; c < g.n; ++c)
    for (int r = 0; r < g.m; ++r) {
      double s = 0.0;
      for (int p = 0; p < g.k; ++p) {
        const double a = g.trans_first ? first[p + size_t(r) * g.ld_first] : first[r + size_t(p) * g.ld_first];
        const double b = g.trans_second ? second[c + size_t(p) * g.ld_second] : second[p + size_t(c) * g.ld_second];
        s += a * b;
      }
      float& out = C[r + size_t(c) * g.ldc];
      out = float(double(alpha) * s + (beta == 0.0f ? 0.0 : double(beta) * out));
    }
}

// CudaBackend::attn_tc_product: the pointer arrays of fill_ptrs_kernel, then
// cublasGemmBatchedEx with column_major_gemm's fields.
void product(AttnTcProduct p, const AttnTcDims& d, int g, int i0, int rows, int kend, const float* A,
             const float* B, float* C, float alpha, float beta) {
  const int count = cd::attn_tc_batch(p, d);
  const cd::AttnTcGemm s = cd::attn_tc_gemm(p, d, rows, kend);
  const pentad::ColumnMajorGemm c =
      pentad::column_major_gemm(s.trans_a, s.trans_b, s.M, s.N, s.K, s.lda, 0, s.ldb, 0, s.ldc, 0, count);
  for (int f = 0; f < count; ++f) {
    const cd::AttnTcOffsets o = cd::attn_tc_offsets(p, d, f, g, i0, size_t(rows) * kend);
    const float* a = A + o.a;
    const float* b = B + o.b;
    column_major(c, alpha, c.first == pentad::GemmOperand::a ? a : b, c.second == pentad::GemmOperand::a ? a : b,
                 beta, C + o.c);
  }
}

struct Case {
  AttnTcDims d;
  int q_offset, k_offset;
  bool causal;
  int rows;  // per block (0: attn_tc_block_rows)
};

std::string name_of(const Case& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "B%d Tq%d Tk%d H%d Hkv%d D%d q_off%d k_off%d %s rows%d", c.d.B, c.d.Tq, c.d.Tk,
                c.d.H, c.d.Hkv, c.d.D, c.q_offset, c.k_offset, c.causal ? "causal" : "full", c.rows);
  return buf;
}

// attention_tc_fwd and attention_tc_bwd (delta computed as attn_delta_kernel does).
void emulate(const Case& c, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
             const std::vector<float>& dout, std::vector<float>& out, std::vector<float>& lse,
             std::vector<float>& dq, std::vector<float>& dk, std::vector<float>& dv) {
  const AttnTcDims& d = c.d;
  const int R = c.rows > 0 ? c.rows : cd::attn_tc_block_rows(d);
  const size_t blk_all = size_t(d.B) * d.H * R * d.Tk;
  std::vector<float> S(blk_all), P(blk_all), dP(blk_all), dS(blk_all);
  const float scale = 1.0f / std::sqrt(float(d.D));
  for (int i0 = 0; i0 < d.Tq; i0 += R) {  // forward
    const int rows = std::min(R, d.Tq - i0);
    const int kend = pentad::block_k_end(i0, rows, d.Tq, d.Tk, c.q_offset, c.k_offset, c.causal);
    if (kend > 0) product(AttnTcProduct::qk, d, 0, i0, rows, kend, q.data(), k.data(), S.data(), scale, 0.0f);
    for (int e = 0; e < d.B * d.H; ++e)  // softmax_rows_kernel
      for (int r = 0; r < rows; ++r) {
        const size_t row = (size_t(e) * rows + r) * kend;
        const int n = pentad::n_visible(i0 + r, d.Tk, c.q_offset, c.k_offset, c.causal);
        float m = kNegInf, l = 0.0f;
        for (int j = 0; j < n; ++j) m = std::max(m, S[row + j]);
        for (int j = 0; j < n; ++j) l += std::exp(S[row + j] - m);
        const float L = n > 0 ? m + std::log(l) : kNegInf;
        lse[size_t(e) * d.Tq + i0 + r] = L;
        for (int j = 0; j < kend; ++j) P[row + j] = j < n ? std::exp(S[row + j] - L) : 0.0f;
      }
    if (kend > 0) {
      product(AttnTcProduct::pv, d, 0, i0, rows, kend, P.data(), v.data(), out.data(), 1.0f, 0.0f);
    } else {
      for (int b = 0; b < d.B; ++b)
        std::fill_n(out.begin() + long(at_q(d, b, i0, 0)), size_t(rows) * d.H * d.D, 0.0f);
    }
  }
  std::vector<float> delta(size_t(d.B) * d.H * d.Tq);
  for (int b = 0; b < d.B; ++b)
    for (int t = 0; t < d.Tq; ++t)
      for (int h = 0; h < d.H; ++h) {
        float s = 0.0f;
        for (int x = 0; x < d.D; ++x) s += dout[at_q(d, b, t, h) + x] * out[at_q(d, b, t, h) + x];
        delta[(size_t(b) * d.H + h) * d.Tq + t] = s;
      }
  for (int i0 = 0; i0 < d.Tq; i0 += R) {  // backward
    const int rows = std::min(R, d.Tq - i0);
    const int kend = pentad::block_k_end(i0, rows, d.Tq, d.Tk, c.q_offset, c.k_offset, c.causal);
    if (kend == 0) continue;
    product(AttnTcProduct::qk, d, 0, i0, rows, kend, q.data(), k.data(), S.data(), scale, 0.0f);
    product(AttnTcProduct::dov, d, 0, i0, rows, kend, dout.data(), v.data(), dP.data(), 1.0f, 0.0f);
    for (int e = 0; e < d.B * d.H; ++e)  // ds_rows_kernel
      for (int r = 0; r < rows; ++r) {
        const size_t row = (size_t(e) * rows + r) * kend;
        const int n = pentad::n_visible(i0 + r, d.Tk, c.q_offset, c.k_offset, c.causal);
        const float L = lse[size_t(e) * d.Tq + i0 + r], dl = delta[size_t(e) * d.Tq + i0 + r];
        for (int j = 0; j < kend; ++j) {
          const float p = j < n && L != kNegInf ? std::exp(S[row + j] - L) : 0.0f;
          P[row + j] = p;
          dS[row + j] = p * (dP[row + j] - dl);
        }
      }
    product(AttnTcProduct::dsk, d, 0, i0, rows, kend, dS.data(), k.data(), dq.data(), scale, 1.0f);
    for (int g = 0; g < d.H / d.Hkv; ++g) {
      product(AttnTcProduct::dsq, d, g, i0, rows, kend, dS.data(), q.data(), dk.data(), scale, 1.0f);
      product(AttnTcProduct::pdo, d, g, i0, rows, kend, P.data(), dout.data(), dv.data(), 1.0f, 1.0f);
    }
  }
}

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& e : x) e = dist(gen);
  return x;
}

// Worst |a - b| / (1e-5 + 1e-4 |b|) over the elements, and whether every
// -inf of b is one of a.
double worst(const std::vector<float>& a, const std::vector<float>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      if (a[i] != b[i]) return 1e30;
      continue;
    }
    w = std::max(w, std::fabs(double(a[i]) - b[i]) / (1e-5 + 1e-4 * std::fabs(double(b[i]))));
  }
  return w;
}

TEST(AttentionTcPlan, EmulationEqualsTheCpuAttention) {
  const std::vector<Case> cases = {
      {{2, 40, 40, 4, 4, 8}, 0, 0, true, 0},      // one block, causal
      {{2, 150, 150, 4, 2, 8}, 0, 0, true, 64},   // three blocks, the last short; GQA 2
      {{1, 130, 130, 4, 1, 16}, 0, 0, false, 64}, // no mask; GQA 4 (multi-query)
      {{2, 64, 64, 4, 2, 8}, 64, 0, true, 64},    // ring: keys wholly before the queries
      {{2, 64, 64, 4, 2, 8}, 32, 0, true, 64},    // ring: across
      {{2, 64, 64, 4, 2, 8}, 0, 64, true, 64},    // ring: wholly after (no key visible)
      {{1, 96, 160, 2, 1, 8}, 100, 0, true, 64},  // Tk > Tq, zig-zag-like offset
  };
  auto cpu = pentad::make_cpu_backend(1);
  for (const Case& c : cases) {
    const AttnTcDims& d = c.d;
    const size_t nq = size_t(d.B) * d.Tq * d.H * d.D, nk = size_t(d.B) * d.Tk * d.Hkv * d.D,
                 nl = size_t(d.B) * d.H * d.Tq;
    const auto q = randn(nq, 1), k = randn(nk, 2), v = randn(nk, 3), dout = randn(nq, 4);
    std::vector<float> out(nq, 9.0f), lse(nl, 9.0f), dq = randn(nq, 5), dk = randn(nk, 6), dv = randn(nk, 7);
    std::vector<float> out_c(nq), lse_c(nl), dq_c = dq, dk_c = dk, dv_c = dv;
    emulate(c, q, k, v, dout, out, lse, dq, dk, dv);
    cpu->attention_fwd(out_c.data(), lse_c.data(), nullptr, q.data(), k.data(), v.data(), d.B, d.Tq, d.Tk, d.H,
                       d.Hkv, d.D, c.q_offset, c.k_offset, c.causal);
    cpu->attention_bwd(dq_c.data(), dk_c.data(), dv_c.data(), dout.data(), out_c.data(), lse_c.data(), nullptr,
                       q.data(), k.data(), v.data(), d.B, d.Tq, d.Tk, d.H, d.Hkv, d.D, c.q_offset, c.k_offset,
                       c.causal);
    const double w_out = worst(out, out_c), w_lse = worst(lse, lse_c), w_dq = worst(dq, dq_c),
                 w_dk = worst(dk, dk_c), w_dv = worst(dv, dv_c);
    std::printf("%s: worst/tolerance out %.2f lse %.2f dq %.2f dk %.2f dv %.2f\n", name_of(c).c_str(), w_out,
                w_lse, w_dq, w_dk, w_dv);
    EXPECT_LE(w_out, 1.0) << name_of(c);
    EXPECT_LE(w_lse, 1.0) << name_of(c);
    EXPECT_LE(w_dq, 1.0) << name_of(c);
    EXPECT_LE(w_dk, 1.0) << name_of(c);
    EXPECT_LE(w_dv, 1.0) << name_of(c);
  }
}

TEST(AttentionTcPlan, RowsAndWorkspace) {
  for (const AttnTcDims d : {AttnTcDims{16, 1024, 1024, 12, 12, 64}, AttnTcDims{8, 1024, 1024, 16, 16, 64},
                             AttnTcDims{4, 1024, 1024, 32, 8, 64}, AttnTcDims{1, 131072, 131072, 32, 8, 128},
                             AttnTcDims{2, 40, 40, 4, 4, 8}}) {
    const int R = cd::attn_tc_block_rows(d);
    const size_t per = cd::attn_tc_bytes_per_row(d);
    std::printf("B%d T%d H%d: %d rows per block, %.1f MiB of score blocks\n", d.B, d.Tq, d.H, R,
                double(per) * R / (1 << 20));
    EXPECT_EQ(R % cd::kAttnTcRowQuantum, 0);
    EXPECT_GE(R, cd::kAttnTcRowQuantum);
    EXPECT_LE(R, (d.Tq + 63) / 64 * 64);
    if (R > cd::kAttnTcRowQuantum) {
      EXPECT_LE(per * size_t(R), cd::kAttnTcScratchBytes);
    }
    if (R < d.Tq) {
      EXPECT_GT(per * size_t(R + cd::kAttnTcRowQuantum), cd::kAttnTcScratchBytes) << "could take more rows";
    }
    const cd::AttnTcWorkspace w = cd::attn_tc_workspace(d, R);
    const size_t nq = size_t(d.B) * d.Tq * d.H * d.D, nk = size_t(d.B) * d.Tk * d.Hkv * d.D,
                 blk = size_t(d.B) * d.H * R * d.Tk;
    const std::vector<std::pair<size_t, size_t>> pieces = {{w.q16, nq * 2},  {w.k16, nk * 2}, {w.v16, nk * 2},
                                                           {w.do16, nq * 2}, {w.s, blk * 4},  {w.dp, blk * 4},
                                                           {w.p16, blk * 2}, {w.ds16, blk * 2}};
    for (size_t i = 0; i < pieces.size(); ++i) {
      EXPECT_EQ(pieces[i].first % 256, 0u);
      const size_t end = pieces[i].first + pieces[i].second;
      EXPECT_LE(end, i + 1 < pieces.size() ? pieces[i + 1].first : w.total) << "piece " << i << " overlaps";
    }
  }
}

}  // namespace
