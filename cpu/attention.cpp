// Scaled dot-product attention, one (batch, head) at a time with sgemm calls
// (single-threaded inside the OpenMP region), over blocks of 64 query rows so
// a causal mask skips the keys no row of the block can see. Probabilities are
// P = exp(S - lse) in both directions (one shared, non-inlined routine), so
// kept and recomputed probabilities are bitwise equal. Global positions in
// the mask and a natural-log lse make split-key (ring) merging exact:
// out = sum_i exp(lse_i - lse) out_i, lse = logsumexp_i lse_i.
// With compute dtype bf16 the operands of the matrix products are rounded
// to bf16 (bf16.hpp), as cuda/attention_tc.cu's tensor-core path computes
// them: q, k, v and dO once, P where it multiplies V and dO, dS where it
// multiplies K and Q, and O where delta = rowsum(dO * O) reads it (the fp32
// dO). Scores, the softmax, lse, P itself (kept or recomputed), dP, delta
// and dS are fp32. An out held in GEMM form (Backend::hold_gemm_form) is
// written rounded to bf16.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <cblas.h>

#include "bf16.hpp"
#include "cpu_backend.hpp"

namespace pentad {

using cpu_detail::exp_f;

namespace {

constexpr int kRowBlock = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keys of this block visible to local query row i: [0, n).
inline int n_visible(int i, int Tk, int q_offset, int k_offset, bool causal) {
  if (!causal) return Tk;
  return std::clamp(q_offset + i - k_offset + 1, 0, Tk);
}

// s (scaled scores, length kl) -> probabilities exp(s - lse) on [0, n), 0 on [n, kl).
__attribute__((noinline)) void probs_from_scores(float* s, int n, int kl, float lse) {
  if (n == 0 || lse == kNegInf) n = 0;
#pragma omp simd
  for (int j = 0; j < n; ++j) s[j] = exp_f(s[j] - lse);
  for (int j = n; j < kl; ++j) s[j] = 0.0f;
}

// x rounded to bf16, into `copy` (resized to n); returns copy's data.
const float* rounded(std::vector<float>& copy, const float* x, size_t n) {
  copy.resize(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) copy[i] = round_bf16(x[i]);
  return copy.data();
}

inline void round_in_place(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
}

// S(rows, kl) = scale * Q(rows, D) K(kl, D)^T: the one call both directions use.
inline void scores(float* S, const float* qb, int ldq, const float* kb, int ldk, int rows, int kl,
                   int D, float scale) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kl, D, scale, qb, ldq, kb, ldk, 0.0f,
              S, kl);
}

}  // namespace

void CpuBackend::attention_fwd(float* out, float* lse, float* probs, const float* q,
                               const float* k, const float* v, int B, int Tq, int Tk, int H,
                               int Hkv, int D, int q_offset, int k_offset, bool causal) {
  const int group = H / Hkv;
  const int ldq = H * D, ldk = Hkv * D;
  const float scale = 1.0f / std::sqrt(float(D));
  const bool bf16 = compute_dtype() == Dtype::bf16;
  std::vector<float> q16, k16, v16;
  if (bf16) {
    q = rounded(q16, q, size_t(B) * Tq * ldq);
    k = rounded(k16, k, size_t(B) * Tk * ldk);
    v = rounded(v16, v, size_t(B) * Tk * ldk);
  }
#pragma omp parallel
  {
    std::vector<float> S(size_t(kRowBlock) * std::max(Tk, 1));  // (rows, kl), thread-private
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * H; ++bh) {
      const int b = bh / H, h = bh % H, kvh = h / group;
      const float* qb = q + size_t(b) * Tq * ldq + size_t(h) * D;   // (Tq, D), stride ldq
      const float* kb = k + size_t(b) * Tk * ldk + size_t(kvh) * D; // (Tk, D), stride ldk
      const float* vb = v + size_t(b) * Tk * ldk + size_t(kvh) * D;
      float* ob = out + size_t(b) * Tq * ldq + size_t(h) * D;
      float* lse_bh = lse + size_t(bh) * Tq;                          // (Tq)
      float* probs_bh = probs ? probs + size_t(bh) * Tq * Tk : nullptr;  // (Tq, Tk)
      for (int i0 = 0; i0 < Tq; i0 += kRowBlock) {
        const int rows = std::min(kRowBlock, Tq - i0);
        const int kl = n_visible(i0 + rows - 1, Tk, q_offset, k_offset, causal);
        if (kl > 0) {
          scores(S.data(), qb + size_t(i0) * ldq, ldq, kb, ldk, rows, kl, D, scale);
          for (int r = 0; r < rows; ++r) {
            float* s = S.data() + size_t(r) * kl;
            const int n = n_visible(i0 + r, Tk, q_offset, k_offset, causal);
            float row_lse = kNegInf;
            if (n > 0) {
              float m = kNegInf;
#pragma omp simd reduction(max : m)
              for (int j = 0; j < n; ++j) m = std::max(m, s[j]);
              float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
              for (int j = 0; j < n; ++j) sum += exp_f(s[j] - m);
              row_lse = m + std::log(sum);
            }
            lse_bh[i0 + r] = row_lse;
            probs_from_scores(s, n, kl, row_lse);
          }
          if (probs_bh)  // the fp32 probabilities, before any rounding
            for (int r = 0; r < rows; ++r) {
              float* pr = probs_bh + size_t(i0 + r) * Tk;
              std::copy_n(S.data() + size_t(r) * kl, kl, pr);
              std::fill(pr + kl, pr + Tk, 0.0f);
            }
          if (bf16) round_in_place(S.data(), size_t(rows) * kl);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, kl, 1.0f, S.data(), kl,
                      vb, ldk, 0.0f, ob + size_t(i0) * ldq, ldq);
        } else {
          for (int r = 0; r < rows; ++r) {
            lse_bh[i0 + r] = kNegInf;
            std::fill_n(ob + size_t(i0 + r) * ldq, D, 0.0f);
            if (probs_bh) std::fill_n(probs_bh + size_t(i0 + r) * Tk, Tk, 0.0f);
          }
        }
      }
    }
  }
  if (held_in_gemm_form(out)) {  // the GEMM form: floats rounded to bf16
    const size_t n = size_t(B) * Tq * ldq;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) out[i] = round_bf16(out[i]);
  }
}

void CpuBackend::attention_bwd(float* dq, float* dk, float* dv, const float* dout,
                               const float* out, const float* lse, const float* probs,
                               const float* q, const float* k, const float* v, int B, int Tq,
                               int Tk, int H, int Hkv, int D, int q_offset, int k_offset,
                               bool causal) {
  const int group = H / Hkv;
  const int ldq = H * D, ldk = Hkv * D;
  const float scale = 1.0f / std::sqrt(float(D));
  // The matrix products' operands (rounded with bf16); delta = rowsum(dO * O)
  // reads the fp32 dO and O rounded to bf16 (as a held O is stored).
  const bool bf16 = compute_dtype() == Dtype::bf16;
  std::vector<float> q16, k16, v16, do16;
  const float *qm = q, *km = k, *vm = v, *dom = dout;
  if (bf16) {
    qm = rounded(q16, q, size_t(B) * Tq * ldq);
    km = rounded(k16, k, size_t(B) * Tk * ldk);
    vm = rounded(v16, v, size_t(B) * Tk * ldk);
    dom = rounded(do16, dout, size_t(B) * Tq * ldq);
  }
  // One task per (b, kv head): the query heads of a group are walked in order
  // inside it, so dK/dV have a single writer and a fixed summation order.
#pragma omp parallel
  {
    std::vector<float> Pbuf(size_t(kRowBlock) * std::max(Tk, 1));  // (rows, kl)
    std::vector<float> dS(size_t(kRowBlock) * std::max(Tk, 1));    // (rows, kl)
    std::vector<float> P16(bf16 ? size_t(kRowBlock) * std::max(Tk, 1) : 0);  // P rounded (rows, kl)
#pragma omp for schedule(static)
    for (int bk = 0; bk < B * Hkv; ++bk) {
      const int b = bk / Hkv, kvh = bk % Hkv;
      const float* kb = km + size_t(b) * Tk * ldk + size_t(kvh) * D;  // (Tk, D), stride ldk
      const float* vb = vm + size_t(b) * Tk * ldk + size_t(kvh) * D;
      float* dkb = dk + size_t(b) * Tk * ldk + size_t(kvh) * D;
      float* dvb = dv + size_t(b) * Tk * ldk + size_t(kvh) * D;
      for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
        const size_t bh = size_t(b) * H + h;
        const size_t q_base = size_t(b) * Tq * ldq + size_t(h) * D;  // (Tq, D), stride ldq
        const float* lse_bh = lse + bh * Tq;
        for (int i0 = 0; i0 < Tq; i0 += kRowBlock) {
          const int rows = std::min(kRowBlock, Tq - i0);
          const int kl = n_visible(i0 + rows - 1, Tk, q_offset, k_offset, causal);
          if (kl == 0) continue;
          const size_t row_off = q_base + size_t(i0) * ldq;
          const float* P;
          int ldp;
          if (probs) {
            P = probs + (bh * Tq + i0) * Tk;
            ldp = Tk;
          } else {
            scores(Pbuf.data(), qm + row_off, ldq, kb, ldk, rows, kl, D, scale);
            for (int r = 0; r < rows; ++r)
              probs_from_scores(Pbuf.data() + size_t(r) * kl,
                                n_visible(i0 + r, Tk, q_offset, k_offset, causal), kl,
                                lse_bh[i0 + r]);
            P = Pbuf.data();
            ldp = kl;
          }
          // dP(rows, kl) = dO V^T, then dS = P * (dP - rowsum(dO * O)) in place.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kl, D, 1.0f, dom + row_off,
                      ldq, vb, ldk, 0.0f, dS.data(), kl);
          for (int r = 0; r < rows; ++r) {
            const float* o_r = out + row_off + size_t(r) * ldq;
            const float* do_r = dout + row_off + size_t(r) * ldq;
            float drow = 0.0f;
#pragma omp simd reduction(+ : drow)
            for (int d = 0; d < D; ++d) drow += do_r[d] * (bf16 ? round_bf16(o_r[d]) : o_r[d]);
            const float* p_r = P + size_t(r) * ldp;
            float* ds_r = dS.data() + size_t(r) * kl;
#pragma omp simd
            for (int j = 0; j < kl; ++j) ds_r[j] = p_r[j] * (ds_r[j] - drow);
          }
          if (bf16) {
            round_in_place(dS.data(), size_t(rows) * kl);
            for (int r = 0; r < rows; ++r)
              for (int j = 0; j < kl; ++j) P16[size_t(r) * kl + j] = round_bf16(P[size_t(r) * ldp + j]);
            P = P16.data();
            ldp = kl;
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, kl, scale, dS.data(), kl,
                      kb, ldk, 1.0f, dq + row_off, ldq);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kl, D, rows, scale, dS.data(), kl,
                      qm + row_off, ldq, 1.0f, dkb, ldk);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kl, D, rows, 1.0f, P, ldp,
                      dom + row_off, ldq, 1.0f, dvb, ldk);
        }
      }
    }
  }
}

void CpuBackend::attention_merge(float* out, float* lse, const float* out_part,
                                 const float* lse_part, int B, int T, int H, int D) {
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H;
    for (int t = 0; t < T; ++t) {
      const size_t row = ((size_t(b) * T + t) * H + h) * D, li = size_t(bh) * T + t;
      attention_merge_row(out + row, lse + li, out_part + row, lse_part[li], D);
    }
  }
}

}  // namespace pentad
