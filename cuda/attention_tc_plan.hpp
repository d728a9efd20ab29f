// The plan of cuda/attention_tc.cu's tensor-core attention (train.dtype =
// bf16) as pure functions, callable on the host: the rows per block of
// queries, the scratch it needs, and where each batched product's operands
// and result start. tests/unit/test_cuda_attention_tc_plan.cpp checks them
// against the (B, T, H, D) layout and the grouped-query head mapping.
//
// Per block of query rows [i0, i0 + rows), every (b, h) pair is one entry of
// a batched product (cublasGemmBatchedEx, pointer arrays); the key range is
// [0, kend), kend = block_k_end (attention_bounds.hpp), so key blocks no row
// sees are skipped. The six products, row-major as pentad's gemm:
//   QK   S(rows, kend)   = scale Q K^T        entry e = b*H + h
//   PV   O(rows, D)      = P V                entry e
//   DOV  dP(rows, kend)  = dO V^T             entry e
//   DSK  dQ(rows, D)    += scale dS K         entry e
//   DSQ  dK(kend, D)    += scale dS^T Q       call g of G = H/Hkv: entry f = b*Hkv + kvh, h = kvh*G + g
//   PDO  dV(kend, D)    += P^T dO             as DSQ
// dK and dV are shared by the G query heads of a group, so one batched call
// holds each (b, kvh) once and the G calls run in order g = 0..G-1: no two
// entries of a call write the same rows, and the sum order is fixed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention_bounds.hpp"

namespace pentad::cuda_detail {

struct AttnTcDims {
  int B, Tq, Tk, H, Hkv, D;
};

enum class AttnTcProduct : int { qk = 0, pv, dov, dsk, dsq, pdo };

// Element offsets of one entry's operands A, B and result C (pentad's
// row-major names) from their base pointers: q/dO/dQ/out rows at
// ((b*Tq + i0)*H + h)*D, k/v/dK/dV at (b*Tk*Hkv + kvh)*D, the score-shaped
// blocks (S, P, dP, dS) at e * block_elems.
struct AttnTcOffsets {
  size_t a, b, c;
};

// The (b, h) pair of entry f of a product (call g for DSQ and PDO).
PENTAD_HD inline int attn_tc_entry(AttnTcProduct p, const AttnTcDims& d, int f, int g) {
  if (p != AttnTcProduct::dsq && p != AttnTcProduct::pdo) return f;  // f = b*H + h
  const int G = d.H / d.Hkv, b = f / d.Hkv, kvh = f % d.Hkv;
  return b * d.H + kvh * G + g;
}

// Entries per batched call: B*H, or B*Hkv for DSQ and PDO (G calls).
PENTAD_HD inline int attn_tc_batch(AttnTcProduct p, const AttnTcDims& d) {
  return p == AttnTcProduct::dsq || p == AttnTcProduct::pdo ? d.B * d.Hkv : d.B * d.H;
}

PENTAD_HD inline AttnTcOffsets attn_tc_offsets(AttnTcProduct p, const AttnTcDims& d, int f, int g, int i0,
                                               size_t block_elems) {
  const int e = attn_tc_entry(p, d, f, g), b = e / d.H, h = e % d.H, kvh = h / (d.H / d.Hkv);
  const size_t rows = ((size_t(b) * d.Tq + size_t(i0)) * d.H + size_t(h)) * d.D;  // q, dO, dQ, out
  const size_t kv = (size_t(b) * d.Tk * d.Hkv + size_t(kvh)) * d.D;               // k, v, dK, dV
  const size_t blk = size_t(e) * block_elems;                                     // S, P, dP, dS
  switch (p) {
    case AttnTcProduct::qk: return {rows, kv, blk};
    case AttnTcProduct::pv: return {blk, kv, rows};
    case AttnTcProduct::dov: return {rows, kv, blk};
    case AttnTcProduct::dsk: return {blk, kv, rows};
    case AttnTcProduct::dsq: return {blk, rows, kv};
    case AttnTcProduct::pdo: return {blk, rows, kv};
  }
  return {0, 0, 0};
}

// The shape of one product as pentad's row-major gemm (ops.def): C(M, N) =
// alpha op(A)(M, K) op(B)(K, N) + beta C, with the leading dimensions of the
// (B, T, H, D) layout and of the (rows, kend) score blocks.
struct AttnTcGemm {
  bool trans_a, trans_b;
  int M, N, K, lda, ldb, ldc;
};
inline AttnTcGemm attn_tc_gemm(AttnTcProduct p, const AttnTcDims& d, int rows, int kend) {
  const int ldq = d.H * d.D, ldk = d.Hkv * d.D;
  switch (p) {
    case AttnTcProduct::qk:   // S = Q K^T
    case AttnTcProduct::dov:  // dP = dO V^T
      return {false, true, rows, kend, d.D, ldq, ldk, kend};
    case AttnTcProduct::pv:   // O = P V
    case AttnTcProduct::dsk:  // dQ += dS K
      return {false, false, rows, d.D, kend, kend, ldk, ldq};
    case AttnTcProduct::dsq:  // dK += dS^T Q
    case AttnTcProduct::pdo:  // dV += P^T dO
      return {true, false, kend, d.D, rows, kend, ldq, ldk};
  }
  return {};
}

// Scratch per query row of a block, over all B*H entries: S and dP (fp32),
// P and dS (bf16).
inline size_t attn_tc_bytes_per_row(const AttnTcDims& d) {
  return size_t(d.B) * d.H * size_t(d.Tk) * (4 + 4 + 2 + 2);
}

// Rows per block of queries: as many as kAttnTcScratchBytes of score-shaped
// scratch allow, a multiple of kAttnTcRowQuantum, at least one quantum
// (beyond the cap for very long sequences) and no more than Tq rounded up.
constexpr size_t kAttnTcScratchBytes = size_t(512) << 20;
constexpr int kAttnTcRowQuantum = 64;
inline int attn_tc_block_rows(const AttnTcDims& d) {
  const size_t per = attn_tc_bytes_per_row(d);
  const int64_t most = (int64_t(d.Tq) + kAttnTcRowQuantum - 1) / kAttnTcRowQuantum * kAttnTcRowQuantum;
  int64_t r = per > 0 ? int64_t(kAttnTcScratchBytes / per) / kAttnTcRowQuantum * kAttnTcRowQuantum : most;
  if (r < kAttnTcRowQuantum) r = kAttnTcRowQuantum;
  return int(r < most ? r : most);
}

// The whole workspace: bf16 copies of q, k, v and dO, then the score-shaped
// blocks for `rows` rows, each piece 256-byte aligned.
struct AttnTcWorkspace {
  size_t q16, k16, v16, do16, s, dp, p16, ds16, total;  // byte offsets; total bytes
};
inline size_t attn_tc_align(size_t n) { return (n + 255) / 256 * 256; }
inline AttnTcWorkspace attn_tc_workspace(const AttnTcDims& d, int rows) {
  const size_t nq = size_t(d.B) * d.Tq * d.H * d.D, nk = size_t(d.B) * d.Tk * d.Hkv * d.D;
  const size_t blk = size_t(d.B) * d.H * size_t(rows) * d.Tk;
  AttnTcWorkspace w{};
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t here = at;
    at += attn_tc_align(bytes);
    return here;
  };
  w.q16 = take(nq * 2);
  w.k16 = take(nk * 2);
  w.v16 = take(nk * 2);
  w.do16 = take(nq * 2);
  w.s = take(blk * 4);
  w.dp = take(blk * 4);
  w.p16 = take(blk * 2);
  w.ds16 = take(blk * 2);
  w.total = at;
  return w;
}

}  // namespace pentad::cuda_detail
