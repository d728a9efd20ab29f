// Scaled dot-product attention with an online softmax (Milakov & Gimelshein
// 2018; the FlashAttention recurrence, Dao et al. 2022): keys and values are
// streamed through shared memory in tiles of 32, one warp per query row, lane
// j scoring key j of the tile; the (Tq, Tk) score matrix is never stored.
// Backward (three kernels, no atomics, fixed order): delta_i = dO_i . O_i;
// dQ with a warp per query row; dK/dV with a warp per key row walking every
// query head of its group. Every kernel scores a (query, key) pair with the
// same dot() and takes P = exp(s - lse), so probabilities written for
// `probs` equal the ones the backward recomputes (it always recomputes).
// A straightforward kernel for correctness: no tensor cores, fp32 throughout.
// With train.dtype = bf16 both directions run on the tensor cores instead:
// in fused kernels (attention_flash.cu) where they are built for the head
// dimension, else through cuBLAS (attention_tc.cu); delta is shared (it
// reads O rounded to bf16 there, as an O held in bf16 stores it). The mask's
// bounds: attention_bounds.hpp.
#include <cuda_bf16.h>

#include <cmath>

#include "attention_bounds.hpp"
#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

// Block shape (launch.hpp): kWarps rows (query or key) per block; keys (or
// queries) in shared-memory tiles of kTile; head dim up to 32 * kMaxPerLane.
constexpr int kWarps = cuda_detail::kAttnWarps;
constexpr int kTile = cuda_detail::kAttnTile;
constexpr int kMaxPerLane = cuda_detail::kAttnMaxPerLane;

__device__ __forceinline__ float dot(const float* a, const float* b, int D) {
  float s = 0.0f;
  for (int d = 0; d < D; ++d) s = fmaf(a[d], b[d], s);
  return s;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

struct Shape {
  int B, Tq, Tk, H, Hkv, D, q_offset, k_offset;
  bool causal;
  float scale;
};

__global__ void attn_fwd_kernel(float* out, float* lse, const float* q, const float* k,
                                const float* v, Shape s) {
  extern __shared__ float smem[];
  const int D = s.D, Dp = D + 1;
  float* Qs = smem;                 // (kWarps, D)
  float* Ks = Qs + kWarps * D;      // (kTile, D+1)
  float* Vs = Ks + kTile * Dp;      // (kTile, D)
  const int bh = blockIdx.y, b = bh / s.H, h = bh % s.H, kvh = h / (s.H / s.Hkv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i0 = blockIdx.x * kWarps, i = i0 + warp;
  const bool active = i < s.Tq;
  const size_t ldq = size_t(s.H) * D, ldk = size_t(s.Hkv) * D;
  for (int d = lane; d < D; d += 32)
    Qs[warp * D + d] = active ? q[(size_t(b) * s.Tq + i) * ldq + size_t(h) * D + d] : 0.0f;
  const int n_vis = active ? n_visible(i, s.Tk, s.q_offset, s.k_offset, s.causal) : 0;
  const int k_end = block_k_end(i0, kWarps, s.Tq, s.Tk, s.q_offset, s.k_offset, s.causal);
  float m = -INFINITY, l = 0.0f;
  float acc[kMaxPerLane];
  for (int r = 0; r < kMaxPerLane; ++r) acc[r] = 0.0f;
  for (int j0 = 0; j0 < k_end; j0 += kTile) {
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * D; e += blockDim.x) {
      const int jj = e / D, d = e % D, j = j0 + jj;
      const size_t g = (size_t(b) * s.Tk + j) * ldk + size_t(kvh) * D + d;
      Ks[jj * Dp + d] = j < s.Tk ? k[g] : 0.0f;
      Vs[jj * D + d] = j < s.Tk ? v[g] : 0.0f;
    }
    __syncthreads();
    const int j = j0 + lane;
    const float sc = j < n_vis ? dot(Qs + warp * D, Ks + lane * Dp, D) * s.scale : -INFINITY;
    const float m_new = fmaxf(m, warp_max(sc));
    if (m_new == -INFINITY) continue;  // nothing visible yet in this row (warp-uniform)
    const float p = sc == -INFINITY ? 0.0f : expf(sc - m_new);
    const float corr = m == -INFINITY ? 0.0f : expf(m - m_new);
    l = l * corr + warp_sum(p);
    for (int r = 0; r < kMaxPerLane; ++r) acc[r] *= corr;
    for (int jj = 0; jj < kTile; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      for (int r = 0; r < kMaxPerLane; ++r) {
        const int d = lane + 32 * r;
        if (d < D) acc[r] = fmaf(pj, Vs[jj * D + d], acc[r]);
      }
    }
    m = m_new;
  }
  if (!active) return;
  if (lane == 0) lse[size_t(bh) * s.Tq + i] = l > 0.0f ? m + logf(l) : -INFINITY;
  float* o = out + (size_t(b) * s.Tq + i) * ldq + size_t(h) * D;
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int d = lane + 32 * r;
    if (d < D) o[d] = l > 0.0f ? acc[r] / l : 0.0f;
  }
}

// probs (B,H,Tq,Tk) = exp(s - lse) on visible keys, 0 elsewhere. Block per (bh, i).
__global__ void attn_probs_kernel(float* probs, const float* lse, const float* q, const float* k,
                                  Shape s) {
  const int i = blockIdx.x, bh = blockIdx.y, b = bh / s.H, h = bh % s.H, kvh = h / (s.H / s.Hkv);
  const size_t ldq = size_t(s.H) * s.D, ldk = size_t(s.Hkv) * s.D;
  const float* qi = q + (size_t(b) * s.Tq + i) * ldq + size_t(h) * s.D;
  const float L = lse[size_t(bh) * s.Tq + i];
  const int n_vis = n_visible(i, s.Tk, s.q_offset, s.k_offset, s.causal);
  float* row = probs + (size_t(bh) * s.Tq + i) * s.Tk;
  for (int j = threadIdx.x; j < s.Tk; j += blockDim.x) {
    float p = 0.0f;
    if (j < n_vis && L != -INFINITY) {
      const float sc = dot(qi, k + (size_t(b) * s.Tk + j) * ldk + size_t(kvh) * s.D, s.D) * s.scale;
      p = expf(sc - L);
    }
    row[j] = p;
  }
}

// O as delta reads it: fp32 as stored, or rounded to bf16 (bf16 runs), or
// the bf16 values of an O held in GEMM form.
__device__ __forceinline__ float o_value(const float* o, int d, bool round) {
  return round ? __bfloat162float(__float2bfloat16_rn(o[d])) : o[d];
}
__device__ __forceinline__ float o_value(const __nv_bfloat16* o, int d, bool) { return __bfloat162float(o[d]); }

// delta (B,H,Tq) = rowsum(dO * O): a warp per row.
template <class O>
__global__ void attn_delta_kernel(float* delta, const float* dout, const O* out, Shape s, bool round) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t row = size_t(blockIdx.x) * kWarps + warp;  // over (B, Tq, H) in memory order
  if (row >= size_t(s.B) * s.Tq * s.H) return;
  const O* o = out + row * s.D;
  const float* g = dout + row * s.D;
  float acc = 0.0f;
  for (int d = lane; d < s.D; d += 32) acc += g[d] * o_value(o, d, round);
  acc = warp_sum(acc);
  const int h = int(row % s.H);
  const size_t bt = row / s.H, b = bt / s.Tq, i = bt % s.Tq;
  if (lane == 0) delta[(b * s.H + h) * s.Tq + i] = acc;
}

__global__ void attn_dq_kernel(float* dq, const float* dout, const float* lse, const float* delta,
                               const float* q, const float* k, const float* v, Shape s) {
  extern __shared__ float smem[];
  const int D = s.D, Dp = D + 1;
  float* Qs = smem;                 // (kWarps, D)
  float* Gs = Qs + kWarps * D;      // (kWarps, D) dO rows
  float* Ks = Gs + kWarps * D;      // (kTile, D+1)
  float* Vs = Ks + kTile * Dp;      // (kTile, D+1)
  const int bh = blockIdx.y, b = bh / s.H, h = bh % s.H, kvh = h / (s.H / s.Hkv);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i0 = blockIdx.x * kWarps, i = i0 + warp;
  const bool active = i < s.Tq;
  const size_t ldq = size_t(s.H) * D, ldk = size_t(s.Hkv) * D;
  const size_t qrow = (size_t(b) * s.Tq + i) * ldq + size_t(h) * D;
  for (int d = lane; d < D; d += 32) {
    Qs[warp * D + d] = active ? q[qrow + d] : 0.0f;
    Gs[warp * D + d] = active ? dout[qrow + d] : 0.0f;
  }
  const float L = active ? lse[size_t(bh) * s.Tq + i] : -INFINITY;
  const float dl = active ? delta[size_t(bh) * s.Tq + i] : 0.0f;
  const int n_vis = active && L != -INFINITY ? n_visible(i, s.Tk, s.q_offset, s.k_offset, s.causal) : 0;
  const int k_end = block_k_end(i0, kWarps, s.Tq, s.Tk, s.q_offset, s.k_offset, s.causal);
  float acc[kMaxPerLane];
  for (int r = 0; r < kMaxPerLane; ++r) acc[r] = 0.0f;
  for (int j0 = 0; j0 < k_end; j0 += kTile) {
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * D; e += blockDim.x) {
      const int jj = e / D, d = e % D, j = j0 + jj;
      const size_t g = (size_t(b) * s.Tk + j) * ldk + size_t(kvh) * D + d;
      Ks[jj * Dp + d] = j < s.Tk ? k[g] : 0.0f;
      Vs[jj * Dp + d] = j < s.Tk ? v[g] : 0.0f;
    }
    __syncthreads();
    const int j = j0 + lane;
    float ds = 0.0f;
    if (j < n_vis) {
      const float p = expf(dot(Qs + warp * D, Ks + lane * Dp, D) * s.scale - L);
      ds = p * (dot(Gs + warp * D, Vs + lane * Dp, D) - dl);
    }
    for (int jj = 0; jj < kTile; ++jj) {
      const float dj = __shfl_sync(0xffffffffu, ds, jj);
      for (int r = 0; r < kMaxPerLane; ++r) {
        const int d = lane + 32 * r;
        if (d < D) acc[r] = fmaf(dj, Ks[jj * Dp + d], acc[r]);
      }
    }
  }
  if (!active) return;
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int d = lane + 32 * r;
    if (d < D) dq[qrow + d] += s.scale * acc[r];
  }
}

// dK, dV for key rows of one kv head, summed over the query heads of its
// group in head order, then over query tiles in order.
__global__ void attn_dkv_kernel(float* dk, float* dv, const float* dout, const float* lse,
                                const float* delta, const float* q, const float* k, const float* v,
                                Shape s) {
  extern __shared__ float smem[];
  const int D = s.D, Dp = D + 1;
  float* Ks = smem;                 // (kWarps, D)
  float* Vs = Ks + kWarps * D;      // (kWarps, D)
  float* Qs = Vs + kWarps * D;      // (kTile, D+1)
  float* Gs = Qs + kTile * Dp;      // (kTile, D+1) dO rows
  float* Ls = Gs + kTile * Dp;      // (kTile) lse
  float* Es = Ls + kTile;           // (kTile) delta
  const int bk = blockIdx.y, b = bk / s.Hkv, kvh = bk % s.Hkv, group = s.H / s.Hkv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j_first = blockIdx.x * kWarps, j = j_first + warp;
  const bool active = j < s.Tk;
  const size_t ldq = size_t(s.H) * D, ldk = size_t(s.Hkv) * D;
  const size_t krow = (size_t(b) * s.Tk + j) * ldk + size_t(kvh) * D;
  for (int d = lane; d < D; d += 32) {
    Ks[warp * D + d] = active ? k[krow + d] : 0.0f;
    Vs[warp * D + d] = active ? v[krow + d] : 0.0f;
  }
  // The first query row that sees any key of this block.
  const int i_begin = block_i_begin(j_first, s.q_offset, s.k_offset, s.causal);
  float acc_k[kMaxPerLane], acc_v[kMaxPerLane];
  for (int r = 0; r < kMaxPerLane; ++r) acc_k[r] = acc_v[r] = 0.0f;
  for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
    const size_t bh = size_t(b) * s.H + h;
    for (int i0 = i_begin; i0 < s.Tq; i0 += kTile) {
      __syncthreads();
      for (int e = threadIdx.x; e < kTile * D; e += blockDim.x) {
        const int ii = e / D, d = e % D, i = i0 + ii;
        const size_t g = (size_t(b) * s.Tq + i) * ldq + size_t(h) * D + d;
        Qs[ii * Dp + d] = i < s.Tq ? q[g] : 0.0f;
        Gs[ii * Dp + d] = i < s.Tq ? dout[g] : 0.0f;
      }
      for (int ii = threadIdx.x; ii < kTile; ii += blockDim.x) {
        const int i = i0 + ii;
        Ls[ii] = i < s.Tq ? lse[bh * s.Tq + i] : -INFINITY;
        Es[ii] = i < s.Tq ? delta[bh * s.Tq + i] : 0.0f;
      }
      __syncthreads();
      const int i = i0 + lane;
      float p = 0.0f, ds = 0.0f;
      const bool visible = active && i < s.Tq && Ls[lane] != -INFINITY &&
                           (!s.causal || s.k_offset + j <= s.q_offset + i);
      if (visible) {
        p = expf(dot(Qs + lane * Dp, Ks + warp * D, D) * s.scale - Ls[lane]);
        ds = p * (dot(Gs + lane * Dp, Vs + warp * D, D) - Es[lane]);
      }
      for (int ii = 0; ii < kTile; ++ii) {
        const float pi = __shfl_sync(0xffffffffu, p, ii);
        const float di = __shfl_sync(0xffffffffu, ds, ii);
        for (int r = 0; r < kMaxPerLane; ++r) {
          const int d = lane + 32 * r;
          if (d < D) {
            acc_v[r] = fmaf(pi, Gs[ii * Dp + d], acc_v[r]);
            acc_k[r] = fmaf(di, Qs[ii * Dp + d], acc_k[r]);
          }
        }
      }
    }
  }
  if (!active) return;
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int d = lane + 32 * r;
    if (d < D) {
      dk[krow + d] += s.scale * acc_k[r];
      dv[krow + d] += acc_v[r];
    }
  }
}

// Kernels needing more than 48 KiB of dynamic shared memory must say so.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  if (cuda_detail::needs_smem_opt_in(bytes))
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

Shape make_shape(int B, int Tq, int Tk, int H, int Hkv, int D, int q_offset, int k_offset,
                 bool causal) {
  if (!cuda_detail::attention_head_dim_supported(D))
    PENTAD_FATAL("cuda attention: head dim " + std::to_string(D) + " unsupported (even, <= " +
                 std::to_string(32 * kMaxPerLane) + ")");
  if (H % Hkv != 0) PENTAD_FATAL("cuda attention: n_heads not a multiple of n_kv_heads");
  return Shape{B, Tq, Tk, H, Hkv, D, q_offset, k_offset, causal, 1.0f / std::sqrt(float(D))};
}

}  // namespace

void CudaBackend::attention_fwd(float* out, float* lse, float* probs, const float* q,
                                const float* k, const float* v, int B, int Tq, int Tk, int H,
                                int Hkv, int D, int q_offset, int k_offset, bool causal) {
  if (B * H == 0 || Tq == 0) return;
  const Shape s = make_shape(B, Tq, Tk, H, Hkv, D, q_offset, k_offset, causal);
  if (compute_dtype_ == Dtype::bf16) {
    // An out held in GEMM form takes bf16 values: the fused kernel stores
    // them; the cuBLAS path writes fp32 into scratch, then rounds it into out.
    // Held q, k, v are read as their bf16 values (all three or none).
    const bool held = held_in_gemm_form(out), in_bf16 = qkv_held(q, k, v);
    if (!probs &&
        attention_flash_fwd(out, lse, q, k, v, B, Tq, Tk, H, Hkv, D, q_offset, k_offset, causal, held, in_bf16))
      return;
    const size_t n = size_t(B) * Tq * H * D;
    float* o = held ? static_cast<float*>(scratch(8, n * sizeof(float))) : out;
    attention_tc_fwd(o, lse, probs, q, k, v, {B, Tq, Tk, H, Hkv, D}, q_offset, k_offset, causal, in_bf16);
    if (held) attn_tc_round(out, o, n);
    return;
  }
  const LaunchConfig l = cuda_detail::attn_fwd_launch(B, Tq, H, D);
  allow_smem(attn_fwd_kernel, l.smem_bytes);
  attn_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      out, lse, q, k, v, s);
  CUDA_LAUNCH_CHECK();
  if (probs && Tk > 0) {
    const LaunchConfig lp = cuda_detail::attn_probs_launch(B, Tq, H);
    attn_probs_kernel<<<to_dim3(lp.grid), to_dim3(lp.block), lp.smem_bytes, stream_>>>(
        probs, lse, q, k, s);
    CUDA_LAUNCH_CHECK();
  }
}

void CudaBackend::attention_bwd(float* dq, float* dk, float* dv, const float* dout,
                                const float* out, const float* lse, const float* probs,
                                const float* q, const float* k, const float* v, int B, int Tq,
                                int Tk, int H, int Hkv, int D, int q_offset, int k_offset,
                                bool causal) {
  if (B * H == 0 || Tq == 0 || Tk == 0) return;
  (void)probs;  // always recomputed: identical to what attention_fwd wrote
  const Shape s = make_shape(B, Tq, Tk, H, Hkv, D, q_offset, k_offset, causal);
  const size_t rows = size_t(B) * Tq * H;
  auto* delta = static_cast<float*>(scratch(3, rows * sizeof(float)));
  const LaunchConfig l_delta = cuda_detail::attn_delta_launch(B, Tq, H);
  // bf16 runs read O rounded to bf16 (precision.md), an O held in GEMM form as stored.
  const bool bf16 = compute_dtype_ == Dtype::bf16;
  if (bf16 && held_in_gemm_form(out))
    attn_delta_kernel<<<to_dim3(l_delta.grid), to_dim3(l_delta.block), l_delta.smem_bytes, stream_>>>(
        delta, dout, reinterpret_cast<const __nv_bfloat16*>(out), s, false);
  else
    attn_delta_kernel<<<to_dim3(l_delta.grid), to_dim3(l_delta.block), l_delta.smem_bytes, stream_>>>(
        delta, dout, out, s, bf16);
  CUDA_LAUNCH_CHECK();
  if (compute_dtype_ == Dtype::bf16) {
    const bool in_bf16 = qkv_held(q, k, v);
    if (attention_flash_bwd(dq, dk, dv, dout, lse, delta, q, k, v, B, Tq, Tk, H, Hkv, D, q_offset, k_offset, causal,
                            in_bf16))
      return;
    attention_tc_bwd(dq, dk, dv, dout, lse, delta, q, k, v, {B, Tq, Tk, H, Hkv, D}, q_offset, k_offset, causal,
                     in_bf16);
    return;
  }
  const LaunchConfig l_dq = cuda_detail::attn_dq_launch(B, Tq, H, D);
  allow_smem(attn_dq_kernel, l_dq.smem_bytes);
  attn_dq_kernel<<<to_dim3(l_dq.grid), to_dim3(l_dq.block), l_dq.smem_bytes, stream_>>>(
      dq, dout, lse, delta, q, k, v, s);
  CUDA_LAUNCH_CHECK();
  const LaunchConfig l_dkv = cuda_detail::attn_dkv_launch(B, Tk, Hkv, D);
  allow_smem(attn_dkv_kernel, l_dkv.smem_bytes);
  attn_dkv_kernel<<<to_dim3(l_dkv.grid), to_dim3(l_dkv.block), l_dkv.smem_bytes, stream_>>>(
      dk, dv, dout, lse, delta, q, k, v, s);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
