// The fused attention for train.dtype = bf16 (attention_flash.cu): the
// forward here, the backward's two kernels below; no score-shaped scratch,
// no probabilities written. Each block's whole algorithm lives here,
// callable on the host too, so tests/unit/test_cuda_flash_attention.cpp
// runs it without a GPU.
//
// Forward. A block of kThreads threads (kWarps warps) takes kRows query rows of one
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
// Rounding points: q, k, v to bf16 once (on load; held in GEMM form, they
// are stored rounded and loaded as they are), P to bf16 where it
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
  bool out_bf16 = false;  // out holds bf16 values (held in GEMM form), rounded to nearest even
  bool in_bf16 = false;   // q, k, v hold bf16 values (held in GEMM form)
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

// Element i of q, k or v as bf16 bits: an fp32 operand rounded on load, or,
// InBf16, the stored bits of one held in GEMM form (bf16 values, rounded
// when written: the same bits). Offsets count elements of the operand's
// own type, so a held operand's pointer is never stepped as a float*.
template <bool InBf16>
PENTAD_HD inline uint32_t operand_bits(const float* p, size_t i) {
  if constexpr (InBf16)
    return reinterpret_cast<const uint16_t*>(p)[i];
  else
    return bf16_bits(p[i]);
}

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

// The block of query rows [q0, q0 + kRows) of pair (b, h); OutBf16: out
// takes bf16 values (a.out_bf16), InBf16: q, k, v hold them (a.in_bf16),
// each combination a kernel of its own.
template <int D, bool OutBf16 = false, bool InBf16 = false, class W>
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
        uint32_t x0 = 0, x1 = 0;
        if (i < a.Tq) {
          const size_t at = (size_t(b) * a.Tq + i) * q_ld + size_t(h) * D + d;
          x0 = operand_bits<InBf16>(a.q, at);
          x1 = operand_bits<InBf16>(a.q, at + 1);
        }
        L.qa[c][r] = x0 | (x1 << 16);
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
        uint32_t kx = 0, vx = 0;
        if (j < a.Tk) {
          const size_t off = (size_t(b) * a.Tk + j) * k_ld + size_t(hk) * D + d;
          kx = operand_bits<InBf16>(a.k, off);
          vx = operand_bits<InBf16>(a.v, off);
        }
        sm.k[r * Smem<D>::k_ld + d] = uint16_t(kx);
        sm.vt[d * Smem<D>::vt_ld + r] = uint16_t(vx);
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
      const size_t row = (size_t(b) * a.Tq + i) * q_ld + size_t(h) * D;
      if constexpr (OutBf16) {
        uint16_t* dst = reinterpret_cast<uint16_t*>(a.out) + row;
        PENTAD_FLASH_UNROLL
        for (int n = 0; n < D / 8; ++n) {
          dst[8 * n + 2 * t] = uint16_t(bf16_bits(L.o[n][2 * r] * inv));
          dst[8 * n + 2 * t + 1] = uint16_t(bf16_bits(L.o[n][2 * r + 1] * inv));
        }
      } else {
        float* dst = a.out + row;
        PENTAD_FLASH_UNROLL
        for (int n = 0; n < D / 8; ++n) {
          dst[8 * n + 2 * t] = L.o[n][2 * r] * inv;
          dst[8 * n + 2 * t + 1] = L.o[n][2 * r + 1] * inv;
        }
      }
      if (t == 0) a.lse[(size_t(b) * a.H + h) * a.Tq + i] = L.l[r] > 0 ? L.m[r] + logf(L.l[r]) : kNegInf;
    }
  });
}


// ---- backward ----------------------------------------------------------------
// Two kernels, no atomics (each output element has one owner), with the
// rounding points of the CPU's bf16 emulation exactly: q, k, v and dO once,
// the normalized P = exp(S - lse) where it multiplies dO, dS where it
// multiplies K and Q. delta = rowsum(dO * O) comes computed (B, H, Tq).
//   dq_block: a block per kRows query rows of (b, h), a warp per 16 rows;
//     per tile of Kt keys: S = Q K^T, dP = dO V^T, dS = P (dP - delta),
//     dQ += dS K; at the end dq += scale dQ.
//   dkv_block: a block per kKeys keys of (b, kv head), a warp per 16 keys;
//     for each query head of the group and each tile of Rt queries from
//     the first that sees the block's keys: S^T = K Q^T, dP^T = V dO^T,
//     dS^T = P^T (dP^T - delta), dV += P^T dO, dK += dS^T Q; at the end
//     dk += scale dK, dv += dV.
// Built for D = 16, 32, 64 and 128. The tiles inside a block shrink at
// D = 128 (BwdTiles), where a lane's K, V and two D-wide accumulators take
// most of its registers; the blocks themselves (kRows queries, kKeys keys)
// stay as at every D.

PENTAD_HD inline bool supports_bwd_head_dim(int D) { return D == 16 || D == 32 || D == 64 || D == 128; }

// Per head dimension: the keys of dq_block's tiles, the queries of
// dkv_block's tiles (multiples of 16: the product's k), and the blocks per
// SM each kernel is built for (__launch_bounds__: at most 65536 / (128 n)
// registers a thread). At D = 128 a dq lane holds Q and dO as fragments
// (64 registers) and dQ (64): its score tiles shrink. A dk/dv lane would
// hold K and V (64) and dK and dV (128): its score tiles shrink, and dV and
// dK take a pass each (dkv_split), so that one accumulator is live at once.
template <int D>
struct BwdTiles {
  static constexpr int dq_keys = D <= 64 ? kKeys : 32;
  static constexpr int dkv_rows = D <= 64 ? kRows : 16;
  static constexpr int dq_blocks_per_sm = D <= 64 ? 3 : 2;
  static constexpr int dkv_blocks_per_sm = 2;
  static constexpr bool dkv_split = D > 64;  // dV and dK in two passes (dkv_block)
};

struct BwdArgs {
  float* dq;           // (B, Tq, H, D), accumulated
  float* dk;           // (B, Tk, Hkv, D), accumulated
  float* dv;           // (B, Tk, Hkv, D), accumulated
  const float* dout;   // (B, Tq, H, D)
  const float* lse;    // (B, H, Tq)
  const float* delta;  // (B, H, Tq)
  const float* q;
  const float* k;
  const float* v;
  int B, Tq, Tk, H, Hkv;
  int q_offset, k_offset;
  bool causal;
  float scale;
  bool in_bf16 = false;  // q, k, v hold bf16 values (held in GEMM form)
};

PENTAD_HD inline int key_blocks(int Tk) { return (Tk + kKeys - 1) / kKeys; }

// An A fragment set (16 rows from row0, all D columns) of the (rows, ld)
// matrix at element `base` of m, as operand_bits<Bf16> reads it; rows at or
// past n_rows read as 0.
template <int D, bool Bf16>
PENTAD_HD void load_a_frags(uint32_t (&af)[D / 16][4], const float* m, size_t base, size_t ld, int row0,
                            int n_rows, int lane) {
  const int g = lane >> 2, t = lane & 3;
  PENTAD_FLASH_UNROLL
  for (int c = 0; c < D / 16; ++c) {
    PENTAD_FLASH_UNROLL
    for (int r = 0; r < 4; ++r) {
      const int i = row0 + g + 8 * (r & 1), d = 16 * c + 2 * t + 8 * (r >> 1);
      uint32_t x0 = 0, x1 = 0;
      if (i < n_rows) {
        x0 = operand_bits<Bf16>(m, base + size_t(i) * ld + d);
        x1 = operand_bits<Bf16>(m, base + size_t(i) * ld + d + 1);
      }
      af[c][r] = x0 | (x1 << 16);
    }
  }
}

// The B fragment of a product whose B (k x 8) is read from a bf16 matrix
// stored n-major: column n0 + group is row n0 + group of `m` (leading
// dimension ld), its k values contiguous from k0.
PENTAD_HD inline void load_b_frag(uint32_t* bf, const uint16_t* m, int ld, int n0, int k0, int lane) {
  const uint16_t* row = m + (n0 + (lane >> 2)) * ld + k0 + 2 * (lane & 3);
  bf[0] = load_pair(row);
  bf[1] = load_pair(row + 8);
}

// The A fragment of 16 columns (c: tiles 2c, 2c + 1) of a C-layout 16 x 8n
// accumulator, rounded to bf16.
template <int N>
PENTAD_HD void c_to_a_frag(uint32_t* af, const float (&acc)[N][4], int c) {
  af[0] = pack_bf16x2(acc[2 * c][0], acc[2 * c][1]);
  af[1] = pack_bf16x2(acc[2 * c][2], acc[2 * c][3]);
  af[2] = pack_bf16x2(acc[2 * c + 1][0], acc[2 * c + 1][1]);
  af[3] = pack_bf16x2(acc[2 * c + 1][2], acc[2 * c + 1][3]);
}

// The backward's first two products over a tile, in both kernels: S = A_S
// B_S^T and (with WithDp) dP = A_dP B_dP^T, per 8 columns n (NT of them)
// and 16 of the D dims c, into each lane's s and dp (zeroed first). The A
// operands are the lane's fragments (a_s(L)[c], a_dp(L)[c]: D / 16 of
// them), the B operands bf16 matrices in shared memory, n-major (b_s, b_dp,
// leading dimension ld).
template <int D, int NT, bool WithDp, class W, class FS, class FP>
PENTAD_HD void score_products(W& w, FS a_s, const uint16_t* b_s, FP a_dp, const uint16_t* b_dp, int ld) {
  w.each([&](int, auto& L) {
    PENTAD_FLASH_UNROLL
    for (int n = 0; n < NT; ++n) {
      PENTAD_FLASH_UNROLL
      for (int e = 0; e < 4; ++e) L.s[n][e] = L.dp[n][e] = 0;
    }
  });
  PENTAD_FLASH_UNROLL
  for (int n = 0; n < NT; ++n) {
    PENTAD_FLASH_UNROLL
    for (int c = 0; c < D / 16; ++c) {
      w.mma([&](int, auto& L) -> float* { return L.s[n]; },
            [&](int, auto& L, uint32_t* af) {
              for (int r = 0; r < 4; ++r) af[r] = a_s(L)[c][r];
            },
            [&](int lane, auto&, uint32_t* bf) { load_b_frag(bf, b_s, ld, 8 * n, 16 * c, lane); });
      if (WithDp)
        w.mma([&](int, auto& L) -> float* { return L.dp[n]; },
              [&](int, auto& L, uint32_t* af) {
                for (int r = 0; r < 4; ++r) af[r] = a_dp(L)[c][r];
              },
              [&](int lane, auto&, uint32_t* bf) { load_b_frag(bf, b_dp, ld, 8 * n, 16 * c, lane); });
    }
  }
}

template <int D>
struct DqSmem {
  static constexpr int Kt = BwdTiles<D>::dq_keys;  // keys per tile
  static constexpr int ld = D + 8, t_ld = Kt + 8;
  uint16_t k[Kt * ld];   // keys x dims
  uint16_t v[Kt * ld];   // keys x dims
  uint16_t kt[D * t_ld];    // dims x keys
};

template <int D>
struct DqLane {
  uint32_t qa[D / 16][4], doa[D / 16][4];
  float s[BwdTiles<D>::dq_keys / 8][4], dp[BwdTiles<D>::dq_keys / 8][4];
  float dq[D / 8][4];
  float lse[2], delta[2];
};

template <int D, bool InBf16 = false, class W>
PENTAD_HD void dq_block(W& w, DqSmem<D>& sm, const BwdArgs& a, int b, int h, int q0) {
  constexpr int Kt = DqSmem<D>::Kt;
  const int hk = h / (a.H / a.Hkv);
  const int row0 = q0 + 16 * w.warp;
  const size_t q_ld = size_t(a.H) * D, k_ld = size_t(a.Hkv) * D;
  const size_t q_base = size_t(b) * a.Tq * q_ld + size_t(h) * D, stat = (size_t(b) * a.H + h) * a.Tq;

  w.each([&](int lane, DqLane<D>& L) {
    load_a_frags<D, InBf16>(L.qa, a.q, q_base, q_ld, row0, a.Tq, lane);
    load_a_frags<D, false>(L.doa, a.dout, q_base, q_ld, row0, a.Tq, lane);
    for (int r = 0; r < 2; ++r) {
      const int i = row0 + (lane >> 2) + 8 * r;
      L.lse[r] = i < a.Tq ? a.lse[stat + i] : 0.0f;
      L.delta[r] = i < a.Tq ? a.delta[stat + i] : 0.0f;
    }
    PENTAD_FLASH_UNROLL
    for (int n = 0; n < D / 8; ++n) {
      PENTAD_FLASH_UNROLL
      for (int e = 0; e < 4; ++e) L.dq[n][e] = 0;
    }
  });

  const int k_end = block_k_end(q0, kRows, a.Tq, a.Tk, a.q_offset, a.k_offset, a.causal);
  for (int j0 = 0; j0 < k_end; j0 += Kt) {
    w.sync();
    w.block([&](int tid) {
      for (int e = tid; e < Kt * D; e += kThreads) {
        const int r = e / D, d = e % D, j = j0 + r;
        uint32_t kx = 0, vx = 0;
        if (j < a.Tk) {
          const size_t off = (size_t(b) * a.Tk + j) * k_ld + size_t(hk) * D + d;
          kx = operand_bits<InBf16>(a.k, off);
          vx = operand_bits<InBf16>(a.v, off);
        }
        const uint16_t kb = uint16_t(kx);
        sm.k[r * DqSmem<D>::ld + d] = kb;
        sm.kt[d * DqSmem<D>::t_ld + r] = kb;
        sm.v[r * DqSmem<D>::ld + d] = uint16_t(vx);
      }
    });
    w.sync();

    // S = Q K^T and dP = dO V^T, per 8 keys and 16 dims.
    score_products<D, Kt / 8, true>(
        w, [](DqLane<D>& L) -> auto& { return L.qa; }, sm.k, [](DqLane<D>& L) -> auto& { return L.doa; }, sm.v,
        DqSmem<D>::ld);
    // dS = P (dP - delta), P = exp(scale S - lse) where the key is seen.
    w.each([&](int lane, DqLane<D>& L) {
      const int g = lane >> 2, t = lane & 3;
      PENTAD_FLASH_UNROLL
      for (int n = 0; n < Kt / 8; ++n) {
        PENTAD_FLASH_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1, i = row0 + g + 8 * r, j = j0 + 8 * n + 2 * t + (e & 1);
          const bool seen = i < a.Tq && j < n_visible(i, a.Tk, a.q_offset, a.k_offset, a.causal);
          const float p = seen ? expf(L.s[n][e] * a.scale - L.lse[r]) : 0.0f;
          L.s[n][e] = p * (L.dp[n][e] - L.delta[r]);
        }
      }
    });
    // dQ += dS K, per 8 dims n and 16 keys c.
    PENTAD_FLASH_UNROLL
    for (int n = 0; n < D / 8; ++n) {
      PENTAD_FLASH_UNROLL
      for (int c = 0; c < Kt / 16; ++c) {
        w.mma([&](int, DqLane<D>& L) -> float* { return L.dq[n]; },
              [&](int, DqLane<D>& L, uint32_t* af) { c_to_a_frag(af, L.s, c); },
              [&](int lane, DqLane<D>&, uint32_t* bf) { load_b_frag(bf, sm.kt, DqSmem<D>::t_ld, 8 * n, 16 * c, lane); });
      }
    }
  }

  w.each([&](int lane, DqLane<D>& L) {
    const int g = lane >> 2, t = lane & 3;
    for (int r = 0; r < 2; ++r) {
      const int i = row0 + g + 8 * r;
      if (i >= a.Tq) continue;
      float* dst = a.dq + q_base + size_t(i) * q_ld;
      PENTAD_FLASH_UNROLL
      for (int n = 0; n < D / 8; ++n) {
        dst[8 * n + 2 * t] += a.scale * L.dq[n][2 * r];
        dst[8 * n + 2 * t + 1] += a.scale * L.dq[n][2 * r + 1];
      }
    }
  });
}

template <int D>
struct DkvSmem {
  static constexpr int Rt = BwdTiles<D>::dkv_rows;  // queries per tile
  static constexpr int ld = D + 8, t_ld = Rt + 8;
  uint16_t q[Rt * ld];   // queries x dims
  uint16_t qt[D * t_ld];  // dims x queries
  uint16_t o[Rt * ld];   // dO: queries x dims
  uint16_t ot[D * t_ld];  // dO: dims x queries
  float lse[Rt], delta[Rt];
};

template <int D>
struct DkvLane {
  uint32_t ka[D / 16][4], va[D / 16][4];  // the warp's 16 keys of K and V as A fragments
  float s[BwdTiles<D>::dkv_rows / 8][4], dp[BwdTiles<D>::dkv_rows / 8][4];  // S^T, then P^T; dP^T, then dS^T
  float dk[D / 8][4], dv[D / 8][4];
};

// Which gradients a pass over the query tiles accumulates (dkv_block).
template <bool DV, bool DK>
struct DkvPass {
  static constexpr bool dv = DV, dk = DK;
};

template <int D, bool InBf16 = false, class W>
PENTAD_HD void dkv_block(W& w, DkvSmem<D>& sm, const BwdArgs& a, int b, int hk, int k0) {
  constexpr int Rt = DkvSmem<D>::Rt;
  const int G = a.H / a.Hkv;
  const int key0 = k0 + 16 * w.warp;  // the warp's first key
  const size_t q_ld = size_t(a.H) * D, k_ld = size_t(a.Hkv) * D;
  const size_t k_base = size_t(b) * a.Tk * k_ld + size_t(hk) * D;
  const int i_begin = block_i_begin(k0, a.q_offset, a.k_offset, a.causal);

  // One pass over every query tile that sees the block's keys, accumulating
  // dV, dK or both (P::dv, P::dk), then adding them to dv, dk. A separate
  // pass per gradient (D > 64) keeps only one D-wide accumulator live, for
  // the price of S^T computed twice; each gradient's arithmetic is the same
  // either way.
  auto pass = [&](auto P) {
    constexpr bool want_dv = decltype(P)::dv, want_dk = decltype(P)::dk;
    w.each([&](int lane, DkvLane<D>& L) {
      load_a_frags<D, InBf16>(L.ka, a.k, k_base, k_ld, key0, a.Tk, lane);
      if (want_dk) load_a_frags<D, InBf16>(L.va, a.v, k_base, k_ld, key0, a.Tk, lane);
      PENTAD_FLASH_UNROLL
      for (int n = 0; n < D / 8; ++n) {
        PENTAD_FLASH_UNROLL
        for (int e = 0; e < 4; ++e) {
          if (want_dk) L.dk[n][e] = 0;
          if (want_dv) L.dv[n][e] = 0;
        }
      }
    });

    for (int g = 0; g < G; ++g) {
      const int h = hk * G + g;
      const size_t q_base = size_t(b) * a.Tq * q_ld + size_t(h) * D, stat = (size_t(b) * a.H + h) * a.Tq;
      for (int i0 = i_begin; i0 < a.Tq; i0 += Rt) {
        w.sync();
        w.block([&](int tid) {
          for (int e = tid; e < Rt * D; e += kThreads) {
            const int r = e / D, d = e % D, i = i0 + r;
            uint32_t qx = 0, ox = 0;
            if (i < a.Tq) {
              qx = operand_bits<InBf16>(a.q, q_base + size_t(i) * q_ld + d);
              ox = bf16_bits(a.dout[q_base + size_t(i) * q_ld + d]);
            }
            const uint16_t qb = uint16_t(qx), ob = uint16_t(ox);
            sm.q[r * DkvSmem<D>::ld + d] = qb;
            if (want_dk) sm.qt[d * DkvSmem<D>::t_ld + r] = qb;
            if (want_dk) sm.o[r * DkvSmem<D>::ld + d] = ob;
            if (want_dv) sm.ot[d * DkvSmem<D>::t_ld + r] = ob;
          }
          for (int r = tid; r < Rt; r += kThreads) {
            const int i = i0 + r;
            sm.lse[r] = i < a.Tq ? a.lse[stat + i] : 0.0f;
            sm.delta[r] = i < a.Tq ? a.delta[stat + i] : 0.0f;
          }
        });
        w.sync();

        // S^T = K Q^T and (for dK) dP^T = V dO^T, per 8 queries and 16 dims.
        score_products<D, Rt / 8, want_dk>(
            w, [](DkvLane<D>& L) -> auto& { return L.ka; }, sm.q, [](DkvLane<D>& L) -> auto& { return L.va; },
            sm.o, DkvSmem<D>::ld);
        // P^T = exp(scale S^T - lse) where the key is seen; dS^T = P^T (dP^T - delta).
        w.each([&](int lane, DkvLane<D>& L) {
          const int gr = lane >> 2, t = lane & 3;
          PENTAD_FLASH_UNROLL
          for (int n = 0; n < Rt / 8; ++n) {
            PENTAD_FLASH_UNROLL
            for (int e = 0; e < 4; ++e) {
              const int j = key0 + gr + 8 * (e >> 1), r = 8 * n + 2 * t + (e & 1), i = i0 + r;
              const bool seen =
                  i < a.Tq && j < a.Tk && j < n_visible(i, a.Tk, a.q_offset, a.k_offset, a.causal);
              const float p = seen ? expf(L.s[n][e] * a.scale - sm.lse[r]) : 0.0f;
              L.s[n][e] = p;
              if (want_dk) L.dp[n][e] = p * (L.dp[n][e] - sm.delta[r]);
            }
          }
        });
        // dV += P^T dO and dK += dS^T Q, per 8 dims n and 16 queries c.
        PENTAD_FLASH_UNROLL
        for (int n = 0; n < D / 8; ++n) {
          PENTAD_FLASH_UNROLL
          for (int c = 0; c < Rt / 16; ++c) {
            if (want_dv)
              w.mma([&](int, DkvLane<D>& L) -> float* { return L.dv[n]; },
                    [&](int, DkvLane<D>& L, uint32_t* af) { c_to_a_frag(af, L.s, c); },
                    [&](int lane, DkvLane<D>&, uint32_t* bf) {
                      load_b_frag(bf, sm.ot, DkvSmem<D>::t_ld, 8 * n, 16 * c, lane);
                    });
            if (want_dk)
              w.mma([&](int, DkvLane<D>& L) -> float* { return L.dk[n]; },
                    [&](int, DkvLane<D>& L, uint32_t* af) { c_to_a_frag(af, L.dp, c); },
                    [&](int lane, DkvLane<D>&, uint32_t* bf) {
                      load_b_frag(bf, sm.qt, DkvSmem<D>::t_ld, 8 * n, 16 * c, lane);
                    });
          }
        }
      }
    }

    w.each([&](int lane, DkvLane<D>& L) {
      const int gr = lane >> 2, t = lane & 3;
      for (int r = 0; r < 2; ++r) {
        const int j = key0 + gr + 8 * r;
        if (j >= a.Tk) continue;
        float* dk = a.dk + k_base + size_t(j) * k_ld;
        float* dv = a.dv + k_base + size_t(j) * k_ld;
        PENTAD_FLASH_UNROLL
        for (int n = 0; n < D / 8; ++n) {
          if (want_dk) {
            dk[8 * n + 2 * t] += a.scale * L.dk[n][2 * r];
            dk[8 * n + 2 * t + 1] += a.scale * L.dk[n][2 * r + 1];
          }
          if (want_dv) {
            dv[8 * n + 2 * t] += L.dv[n][2 * r];
            dv[8 * n + 2 * t + 1] += L.dv[n][2 * r + 1];
          }
        }
      }
    });
  };

  if constexpr (BwdTiles<D>::dkv_split) {
    pass(DkvPass<true, false>{});
    pass(DkvPass<false, true>{});
  } else {
    pass(DkvPass<true, true>{});
  }
}

}  // namespace pentad::flash
