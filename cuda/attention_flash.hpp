// The fused attention forward for train.dtype = bf16 (attention_flash.cu):
// one kernel per call, no score-shaped scratch, nothing but out and lse
// written. The block's whole algorithm lives here, callable on the host too,
// so tests/unit/test_cuda_flash_attention.cpp runs it without a GPU.
//
// A block of kThreads threads (kWarps warps) takes kRows query rows of one
// (b, h) pair; warp w owns rows [16 w, 16 w + 16) of them. Per tile of kKeys
// keys below the block's key bound (attention_bounds.hpp), the block loads K
// and V of kv head h / (H / Hkv) into shared memory as bf16 (V transposed),
// then each warp on the tensor cores (mma.sync m16n8k16, bf16 operands,
// fp32 accumulation) computes its 16 x kKeys scaled scores S = scale Q K^T,
// masks them, updates each row's running maximum m and sum l (online
// softmax), rescales its output accumulator by exp(m_old - m_new) and adds
// P V with P = exp(S - m_new) rounded to bf16. At the end out = O / l and
// lse = m + log l (0 and -inf for a row that sees no key).
//
// Rounding points: q, k, v to bf16 once (on load), P to bf16 where it
// multiplies V. The CPU's bf16 emulation (cpu/attention.cpp) rounds the
// normalized P = exp(S - lse) instead, so out differs from it by about a
// bf16 unit of P per term; lse comes from fp32 scores of the same rounded
// operands in both. No atomics: a run repeats bitwise.
//
// The fragments are the PTX ISA's for mma.m16n8k16 with .bf16 operands
// (lane = 4 * group + t, t = lane % 4): A (16 x 16, row-major) register r
// holds rows group + 8 (r & 1), columns 2 t + 8 (r >> 1) and the next one;
// B (16 x 8) register r holds rows 2 t + 8 r and the next one of column
// group; C (16 x 8, fp32) c0, c1 row group, c2, c3 row group + 8, columns
// 2 t and 2 t + 1. Each register packs two bf16, the lower-indexed element
// in the low 16 bits. The accumulator of two neighbouring 8-key score tiles
// is, element for element, the A fragment of their 16 keys, so P goes from
// the scores to the second product without leaving the registers.
//
// Executor W (the device's in attention_flash.cu, the test's on the host):
//   w.warp                  this warp's index in the block
//   w.each(f)               f(lane, LaneState&) for the warp's lanes
//   w.mma(acc, a, b)        per lane: acc(lane, L) -> float[4] (C in, D out),
//                           a(lane, L, uint32_t[4]), b(lane, L, uint32_t[2])
//   w.quad_max(L.red), w.quad_sum(L.red)
//                           red[0..1] of each lane := max / sum over the 4
//                           lanes of its group (lanes sharing its rows)
//   w.block(f)              f(tid) for every thread of the block (loads)
//   w.sync()                __syncthreads() (nothing on the host, where
//                           each warp runs alone and loads its own tiles)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attention_bounds.hpp"

#ifdef __CUDA_ARCH__
#include <cuda_bf16.h>
#define PENTAD_FLASH_UNROLL _Pragma("unroll")
#else
#define PENTAD_FLASH_UNROLL
#endif

namespace pentad::flash {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per block
constexpr int kKeys = 64;           // keys per tile

// Head dimensions the kernel is built for: a multiple of 16 (the product's
// k) up to 128 (the registers of the output accumulator).
PENTAD_HD inline bool supports_head_dim(int D) { return D == 16 || D == 32 || D == 64 || D == 128; }

struct FwdArgs {
  float* out;        // (B, Tq, H, D)
  float* lse;        // (B, H, Tq)
  const float* q;    // (B, Tq, H, D)
  const float* k;    // (B, Tk, Hkv, D)
  const float* v;    // (B, Tk, Hkv, D)
  int B, Tq, Tk, H, Hkv;
  int q_offset, k_offset;
  bool causal;
  float scale;
};

// The grid: (query blocks, B * H).
PENTAD_HD inline int query_blocks(int Tq) { return (Tq + kRows - 1) / kRows; }

// bf16 bits of x, round to nearest even (cpu/bf16.hpp's rounding; NaN kept quiet).
PENTAD_HD inline uint32_t bf16_bits(float x) {
#ifdef __CUDA_ARCH__
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(x)));
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return ((u >> 16) | 0x0040u) & 0xffffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
#endif
}

// Two values as one register of bf16 pairs: lo in the low half.
PENTAD_HD inline uint32_t pack_bf16x2(float lo, float hi) { return bf16_bits(lo) | (bf16_bits(hi) << 16); }

// Shared memory of one block: the tile's keys (kKeys rows of D, padded so
// that a warp's fragment loads fall in distinct banks) and values
// transposed (D rows of kKeys, padded likewise), as bf16 bits.
template <int D>
struct Smem {
  static constexpr int k_ld = D + 8, vt_ld = kKeys + 8;
  uint16_t k[kKeys * k_ld];
  uint16_t vt[D * vt_ld];
};

// One lane's registers.
template <int D>
struct LaneState {
  uint32_t qa[D / 16][4];  // Q of the lane's rows as A fragments, per 16 dims
  float o[D / 8][4];       // output accumulator, per 8 dims (C layout)
  float s[kKeys / 8][4];   // scores, then P, per 8 keys (C layout)
  float m[2], l[2];        // running maximum and sum of rows group, group + 8
  float red[2];            // quad_max / quad_sum operand
};

// Two bf16 at p (4-byte aligned) as one register.
PENTAD_HD inline uint32_t load_pair(const uint16_t* p) { return uint32_t(p[0]) | (uint32_t(p[1]) << 16); }

// The block of query rows [q0, q0 + kRows) of pair (b, h).
template <int D, class W>
PENTAD_HD void fwd_block(W& w, Smem<D>& sm, const FwdArgs& a, int b, int h, int q0) {
  constexpr float kNegInf = -INFINITY;
  const int hk = h / (a.H / a.Hkv);
  const int row0 = q0 + 16 * w.warp;  // the warp's first row
  const size_t q_ld = size_t(a.H) * D, k_ld = size_t(a.Hkv) * D;

  // Q fragments (rows past Tq read as 0) and the running state.
  w.each([&](int lane, LaneState<D>& L) {
    const int g = lane >> 2, t = lane & 3;
    PENTAD_FLASH_UNROLL
    for (int c = 0; c < D / 16; ++c) {
      PENTAD_FLASH_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int i = row0 + g + 8 * (r & 1), d = 16 * c + 2 * t + 8 * (r >> 1);
        float x0 = 0, x1 = 0;
        if (i < a.Tq) {
          const float* src = a.q + (size_t(b) * a.Tq + i) * q_ld + size_t(h) * D + d;
          x0 = src[0];
          x1 = src[1];
        }
        L.qa[c][r] = pack_bf16x2(x0, x1);
      }
    }
    PENTAD_FLASH_UNROLL
    for (int n = 0; n < D / 8; ++n) {
      PENTAD_FLASH_UNROLL
      for (int e = 0; e < 4; ++e) L.o[n][e] = 0;
    }
    L.m[0] = L.m[1] = kNegInf;
    L.l[0] = L.l[1] = 0;
  });

  const int k_end = block_k_end(q0, kRows, a.Tq, a.Tk, a.q_offset, a.k_offset, a.causal);
  for (int j0 = 0; j0 < k_end; j0 += kKeys) {
    // K and V^T of keys [j0, j0 + kKeys) as bf16; keys past Tk are 0.
    w.sync();
    w.block([&](int tid) {
      for (int e = tid; e < kKeys * D; e += kThreads) {
        const int r = e / D, d = e % D, j = j0 + r;
        float kx = 0, vx = 0;
        if (j < a.Tk) {
          const size_t off = (size_t(b) * a.Tk + j) * k_ld + size_t(hk) * D + d;
          kx = a.k[off];
          vx = a.v[off];
        }
        sm.k[r * Smem<D>::k_ld + d] = uint16_t(bf16_bits(kx));
        sm.vt[d * Smem<D>::vt_ld + r] = uint16_t(bf16_bits(vx));
      }
    });
    w.sync();

    // S = Q K^T, per 8 keys n: B's column = key 8 n + group, rows = dims.
    w.each([&](int, LaneState<D>& L) {
      PENTAD_FLASH_UNROLL
      for (int n = 0; n < kKeys / 8; ++n) {
        PENTAD_FLASH_UNROLL
        for (int e = 0; e < 4; ++e) L.s[n][e] = 0;
      }
    });
    PENTAD_FLASH_UNROLL
    for (int n = 0; n < kKeys / 8; ++n) {
      PENTAD_FLASH_UNROLL
      for (int c = 0; c < D / 16; ++c) {
        w.mma([&](int, LaneState<D>& L) -> float* { return L.s[n]; },
              [&](int, LaneState<D>& L, uint32_t* af) {
                for (int r = 0; r < 4; ++r) af[r] = L.qa[c][r];
              },
              [&](int lane, LaneState<D>&, uint32_t* bf) {
                const int g = lane >> 2, t = lane & 3;
                const uint16_t* row = sm.k + (8 * n + g) * Smem<D>::k_ld + 16 * c + 2 * t;
                bf[0] = load_pair(row);
                bf[1] = load_pair(row + 8);
              });
      }
    }

    // Scale and mask; each row's maximum over the tile.
    w.each([&](int lane, LaneState<D>& L) {
      const int g = lane >> 2, t = lane & 3;
      L.red[0] = L.red[1] = kNegInf;
      PENTAD_FLASH_UNROLL
      for (int n = 0; n < kKeys / 8; ++n) {
        PENTAD_FLASH_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1, i = row0 + g + 8 * r, j = j0 + 8 * n + 2 * t + (e & 1);
          const bool seen = i < a.Tq && j < n_visible(i, a.Tk, a.q_offset, a.k_offset, a.causal);
          const float x = seen ? L.s[n][e] * a.scale : kNegInf;
          L.s[n][e] = x;
          L.red[r] = fmaxf(L.red[r], x);
        }
      }
    });
    w.quad_max();

    // P = exp(S - m_new); rescale O and l by exp(m_old - m_new).
    w.each([&](int, LaneState<D>& L) {
      float ref[2];
      for (int r = 0; r < 2; ++r) {
        const float m_new = fmaxf(L.m[r], L.red[r]);
        ref[r] = m_new == kNegInf ? 0.0f : m_new;  // no key seen yet: every p and alpha is 0
        const float alpha = expf(L.m[r] - ref[r]);
        L.m[r] = m_new;
        L.l[r] *= alpha;
        PENTAD_FLASH_UNROLL
        for (int n = 0; n < D / 8; ++n) {
          L.o[n][2 * r] *= alpha;
          L.o[n][2 * r + 1] *= alpha;
        }
        L.red[r] = 0;
      }
      PENTAD_FLASH_UNROLL
      for (int n = 0; n < kKeys / 8; ++n) {
        PENTAD_FLASH_UNROLL
        for (int e = 0; e < 4; ++e) {
          const float p = expf(L.s[n][e] - ref[e >> 1]);
          L.s[n][e] = p;
          L.red[e >> 1] += p;
        }
      }
    });
    w.quad_sum();
    w.each([&](int, LaneState<D>& L) {
      L.l[0] += L.red[0];
      L.l[1] += L.red[1];
    });

    // O += P V, per 8 dims n and 16 keys c: P's A fragment is score tiles
    // 2c and 2c + 1; B's column = dim 8 n + group, rows = keys.
    PENTAD_FLASH_UNROLL
    for (int n = 0; n < D / 8; ++n) {
      PENTAD_FLASH_UNROLL
      for (int c = 0; c < kKeys / 16; ++c) {
        w.mma([&](int, LaneState<D>& L) -> float* { return L.o[n]; },
              [&](int, LaneState<D>& L, uint32_t* af) {
                af[0] = pack_bf16x2(L.s[2 * c][0], L.s[2 * c][1]);
                af[1] = pack_bf16x2(L.s[2 * c][2], L.s[2 * c][3]);
                af[2] = pack_bf16x2(L.s[2 * c + 1][0], L.s[2 * c + 1][1]);
                af[3] = pack_bf16x2(L.s[2 * c + 1][2], L.s[2 * c + 1][3]);
              },
              [&](int lane, LaneState<D>&, uint32_t* bf) {
                const int g = lane >> 2, t = lane & 3;
                const uint16_t* row = sm.vt + (8 * n + g) * Smem<D>::vt_ld + 16 * c + 2 * t;
                bf[0] = load_pair(row);
                bf[1] = load_pair(row + 8);
              });
      }
    }
  }

  // out = O / l, lse = m + log l; a row that saw no key: 0 and -inf.
  w.each([&](int lane, LaneState<D>& L) {
    const int g = lane >> 2, t = lane & 3;
    for (int r = 0; r < 2; ++r) {
      const int i = row0 + g + 8 * r;
      if (i >= a.Tq) continue;
      const float inv = L.l[r] > 0 ? 1.0f / L.l[r] : 0.0f;
      float* dst = a.out + (size_t(b) * a.Tq + i) * q_ld + size_t(h) * D;
      PENTAD_FLASH_UNROLL
      for (int n = 0; n < D / 8; ++n) {
        dst[8 * n + 2 * t] = L.o[n][2 * r] * inv;
        dst[8 * n + 2 * t + 1] = L.o[n][2 * r + 1] * inv;
      }
      if (t == 0) a.lse[(size_t(b) * a.H + h) * a.Tq + i] = L.l[r] > 0 ? L.m[r] + logf(L.l[r]) : kNegInf;
    }
  });
}

}  // namespace pentad::flash
