// Attention on the tensor cores, for train.dtype = bf16: the matrix products
// run in cuBLAS (bf16 operands, fp32 accumulation and results), batched over
// every (b, h) pair of a block of query rows; two row kernels do the masked
// softmax and dS in fp32. The plan (rows per block, operand offsets, the
// grouped-query split of dK/dV) is attention_tc_plan.hpp; the rounding
// points are cpu/attention.cpp's bf16 emulation: q, k, v and dO once, P where
// it multiplies V and dO, dS where it multiplies K and Q.
//
// Forward, per block: S = scale Q K^T; softmax rows (mask, lse, P in bf16,
// and the fp32 probabilities when asked for); O = P V.
// Backward, per block: S again; dP = dO V^T; the dS rows (P from S and lse,
// dS = P (dP - delta)); dQ += scale dS K; then for g = 0..G-1, dK += scale
// dS^T Q and dV += P^T dO over the entries of query head g of each group.
// Keys past the block's last visible one are skipped (attention_bounds.hpp);
// inside the visible range the mask is applied by the row kernels, so about
// half of a diagonal block's products are wasted. No atomics: a run repeats
// bitwise. The score-shaped scratch is capped (kAttnTcScratchBytes), which
// sets the rows per block.
#include <cuda_bf16.h>

#include <cmath>
#include <vector>

#include "attention_bounds.hpp"
#include "attention_tc_plan.hpp"
#include "cuda_backend.hpp"
#include "gemm_args.hpp"

namespace pentad {

using cuda_detail::AttnTcDims;
using cuda_detail::AttnTcOffsets;
using cuda_detail::AttnTcProduct;
using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

using bf16 = __nv_bfloat16;
constexpr int kRowThreads = cuda_detail::kAttnTcRowThreads;

__global__ void round_to_bf16_kernel(bf16* dst, const float* src, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

// The pointer arrays of one batched product (attn_tc_offsets), a thread per entry.
struct PtrBases {
  const char* a;
  const char* b;
  char* c;
  int a_bytes, b_bytes, c_bytes;  // element sizes
};
__global__ void fill_ptrs_kernel(const void** pa, const void** pb, void** pc, PtrBases base, AttnTcProduct p,
                                 AttnTcDims d, int g, int i0, size_t block_elems, int count) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= count) return;
  const AttnTcOffsets o = cuda_detail::attn_tc_offsets(p, d, f, g, i0, block_elems);
  pa[f] = base.a + o.a * base.a_bytes;
  pb[f] = base.b + o.b * base.b_bytes;
  pc[f] = base.c + o.c * base.c_bytes;
}

__device__ float block_max(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();
  return r;
}

__device__ float block_sum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const float r = sh[0];
  __syncthreads();
  return r;
}

struct RowArgs {
  AttnTcDims d;
  int i0, rows, kend, q_offset, k_offset;
  bool causal;
};

// Row r of entry e (block (r, e)) of the score block S (rows, kend): the
// visible prefix n, lse = logsumexp of S over it (-inf when empty), P16 =
// bf16(exp(S - lse)) on it and 0 on [n, kend); probs (if any) the fp32 P
// over the whole key row (Tk).
__global__ void softmax_rows_kernel(bf16* p16, float* probs, float* lse, const float* S, RowArgs a) {
  __shared__ float sh[kRowThreads];
  const int r = blockIdx.x, e = blockIdx.y, i = a.i0 + r;
  const size_t row = (size_t(e) * a.rows + r) * a.kend;
  const int n = n_visible(i, a.d.Tk, a.q_offset, a.k_offset, a.causal);
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n; j += kRowThreads) m = fmaxf(m, S[row + j]);
  m = block_max(m, sh);
  float l = 0.0f;
  if (n > 0)
    for (int j = threadIdx.x; j < n; j += kRowThreads) l += expf(S[row + j] - m);
  l = block_sum(l, sh);
  const float L = n > 0 ? m + logf(l) : -INFINITY;
  if (threadIdx.x == 0) lse[size_t(e) * a.d.Tq + i] = L;
  float* pr = probs ? probs + (size_t(e) * a.d.Tq + i) * a.d.Tk : nullptr;
  for (int j = threadIdx.x; j < a.kend; j += kRowThreads) {
    const float p = j < n ? expf(S[row + j] - L) : 0.0f;
    p16[row + j] = __float2bfloat16_rn(p);
    if (pr) pr[j] = p;
  }
  if (pr)
    for (int j = a.kend + threadIdx.x; j < a.d.Tk; j += kRowThreads) pr[j] = 0.0f;
}

// Row r of entry e: P = exp(S - lse) on the visible prefix (0 past it), dS =
// P (dP - delta) in fp32, both written in bf16 for the products that follow.
__global__ void ds_rows_kernel(bf16* ds16, bf16* p16, const float* S, const float* dP, const float* lse,
                               const float* delta, RowArgs a) {
  const int r = blockIdx.x, e = blockIdx.y, i = a.i0 + r;
  const size_t row = (size_t(e) * a.rows + r) * a.kend;
  const int n = n_visible(i, a.d.Tk, a.q_offset, a.k_offset, a.causal);
  const float L = lse[size_t(e) * a.d.Tq + i], dl = delta[size_t(e) * a.d.Tq + i];
  for (int j = threadIdx.x; j < a.kend; j += kRowThreads) {
    const float p = j < n && L != -INFINITY ? expf(S[row + j] - L) : 0.0f;
    p16[row + j] = __float2bfloat16_rn(p);
    ds16[row + j] = __float2bfloat16_rn(p * (dP[row + j] - dl));
  }
}

}  // namespace

void CudaBackend::attn_tc_round(void* dst, const float* src, size_t n) {
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::bf16_convert_launch(n);
  round_to_bf16_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(static_cast<bf16*>(dst),
                                                                                    src, n);
  CUDA_LAUNCH_CHECK();
}

// One batched product of the plan, row-major as pentad's gemm: C(M, N) =
// alpha op(A)(M, K) op(B)(K, N) + beta C, A and B bf16, C fp32.
void CudaBackend::attn_tc_product(AttnTcProduct p, const AttnTcDims& d, int g, int i0, int rows, int kend,
                                  const void* A, const void* B, float* C, float alpha, float beta) {
  const int count = cuda_detail::attn_tc_batch(p, d);
  const cuda_detail::AttnTcGemm s = cuda_detail::attn_tc_gemm(p, d, rows, kend);
  auto** ptrs = static_cast<void**>(scratch(6, 3 * size_t(count) * sizeof(void*)));
  const PtrBases base{static_cast<const char*>(A), static_cast<const char*>(B), reinterpret_cast<char*>(C),
                      int(sizeof(bf16)), int(sizeof(bf16)), int(sizeof(float))};
  const LaunchConfig lp = cuda_detail::attn_tc_ptrs_launch(count);
  fill_ptrs_kernel<<<to_dim3(lp.grid), to_dim3(lp.block), lp.smem_bytes, stream_>>>(
      const_cast<const void**>(ptrs), const_cast<const void**>(ptrs + count), ptrs + 2 * count, base, p, d, g, i0,
      size_t(rows) * kend, count);
  CUDA_LAUNCH_CHECK();
  const ColumnMajorGemm c = column_major_gemm(s.trans_a, s.trans_b, s.M, s.N, s.K, s.lda, 0, s.ldb, 0, s.ldc, 0, count);
  void** first = c.first == GemmOperand::a ? ptrs : ptrs + count;
  void** second = c.second == GemmOperand::a ? ptrs : ptrs + count;
  CUBLAS_CHECK(cublasGemmBatchedEx(cublas_, c.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   c.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N, c.m, c.n, c.k, &alpha,
                                   const_cast<const void* const*>(first), CUDA_R_16BF, c.ld_first,
                                   const_cast<const void* const*>(second), CUDA_R_16BF, c.ld_second, &beta,
                                   ptrs + 2 * count, CUDA_R_32F, c.ldc, count, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

// The workspace (scratch slot 5) and bf16 q, k and v: held in GEMM form
// (in_bf16), the buffers themselves; else copies rounded into the workspace.
CudaBackend::AttnTcOperands CudaBackend::attn_tc_prepare(const cuda_detail::AttnTcWorkspace& w, const float* q,
                                                         const float* k, const float* v, const AttnTcDims& d,
                                                         bool in_bf16) {
  char* ws = static_cast<char*>(scratch(5, w.total));
  if (in_bf16) return {ws, q, k, v};
  const size_t nq = size_t(d.B) * d.Tq * d.H * d.D, nk = size_t(d.B) * d.Tk * d.Hkv * d.D;
  attn_tc_round(ws + w.q16, q, nq);
  attn_tc_round(ws + w.k16, k, nk);
  attn_tc_round(ws + w.v16, v, nk);
  return {ws, ws + w.q16, ws + w.k16, ws + w.v16};
}

void CudaBackend::attention_tc_fwd(float* out, float* lse, float* probs, const float* q, const float* k,
                                   const float* v, const AttnTcDims& d, int q_offset, int k_offset, bool causal,
                                   bool in_bf16) {
  const int R = cuda_detail::attn_tc_block_rows(d);
  const cuda_detail::AttnTcWorkspace w = cuda_detail::attn_tc_workspace(d, R);
  const AttnTcOperands o = attn_tc_prepare(w, q, k, v, d, in_bf16);
  char* ws = o.ws;
  auto* S = reinterpret_cast<float*>(ws + w.s);
  const float scale = 1.0f / std::sqrt(float(d.D));
  for (int i0 = 0; i0 < d.Tq; i0 += R) {
    const int rows = d.Tq - i0 < R ? d.Tq - i0 : R;
    const int kend = block_k_end(i0, rows, d.Tq, d.Tk, q_offset, k_offset, causal);
    const RowArgs a{d, i0, rows, kend, q_offset, k_offset, causal};
    if (kend > 0)
      attn_tc_product(AttnTcProduct::qk, d, 0, i0, rows, kend, o.q, o.k, S, scale, 0.0f);
    // With kend = 0 the rows see no key: lse -inf, probabilities 0, and out 0 below.
    const LaunchConfig lr = cuda_detail::attn_tc_rows_launch(rows, d.B * d.H);
    softmax_rows_kernel<<<to_dim3(lr.grid), to_dim3(lr.block), lr.smem_bytes, stream_>>>(
        reinterpret_cast<bf16*>(ws + w.p16), probs, lse, S, a);
    CUDA_LAUNCH_CHECK();
    if (kend > 0) {
      attn_tc_product(AttnTcProduct::pv, d, 0, i0, rows, kend, ws + w.p16, o.v, out, 1.0f, 0.0f);
    } else {
      for (int b = 0; b < d.B; ++b)  // rows (b, i0 .. i0 + rows) of every head: one contiguous range
        CUDA_CHECK(cudaMemsetAsync(out + (size_t(b) * d.Tq + i0) * d.H * d.D, 0,
                                   size_t(rows) * d.H * d.D * sizeof(float), stream_));
    }
  }
}

void CudaBackend::attention_tc_bwd(float* dq, float* dk, float* dv, const float* dout, const float* lse,
                                   const float* delta, const float* q, const float* k, const float* v,
                                   const AttnTcDims& d, int q_offset, int k_offset, bool causal, bool in_bf16) {
  const int R = cuda_detail::attn_tc_block_rows(d);
  const cuda_detail::AttnTcWorkspace w = cuda_detail::attn_tc_workspace(d, R);
  const AttnTcOperands o = attn_tc_prepare(w, q, k, v, d, in_bf16);
  char* ws = o.ws;
  attn_tc_round(ws + w.do16, dout, size_t(d.B) * d.Tq * d.H * d.D);
  auto* S = reinterpret_cast<float*>(ws + w.s);
  auto* dP = reinterpret_cast<float*>(ws + w.dp);
  const float scale = 1.0f / std::sqrt(float(d.D));
  const int G = d.H / d.Hkv;
  for (int i0 = 0; i0 < d.Tq; i0 += R) {
    const int rows = d.Tq - i0 < R ? d.Tq - i0 : R;
    const int kend = block_k_end(i0, rows, d.Tq, d.Tk, q_offset, k_offset, causal);
    if (kend == 0) continue;  // no row of the block sees a key: no gradient
    const RowArgs a{d, i0, rows, kend, q_offset, k_offset, causal};
    attn_tc_product(AttnTcProduct::qk, d, 0, i0, rows, kend, o.q, o.k, S, scale, 0.0f);
    attn_tc_product(AttnTcProduct::dov, d, 0, i0, rows, kend, ws + w.do16, o.v, dP, 1.0f, 0.0f);
    const LaunchConfig lr = cuda_detail::attn_tc_rows_launch(rows, d.B * d.H);
    ds_rows_kernel<<<to_dim3(lr.grid), to_dim3(lr.block), lr.smem_bytes, stream_>>>(
        reinterpret_cast<bf16*>(ws + w.ds16), reinterpret_cast<bf16*>(ws + w.p16), S, dP, lse, delta, a);
    CUDA_LAUNCH_CHECK();
    attn_tc_product(AttnTcProduct::dsk, d, 0, i0, rows, kend, ws + w.ds16, o.k, dq, scale, 1.0f);
    for (int g = 0; g < G; ++g) {
      attn_tc_product(AttnTcProduct::dsq, d, g, i0, rows, kend, ws + w.ds16, o.q, dk, scale, 1.0f);
      attn_tc_product(AttnTcProduct::pdo, d, g, i0, rows, kend, ws + w.p16, ws + w.do16, dv, 1.0f, 1.0f);
    }
  }
}

}  // namespace pentad
