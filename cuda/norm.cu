// LayerNorm (Ba et al. 2016; biased variance) and RMSNorm (Zhang & Sennrich
// 2019). Forward and dx: one warp per row, lanes striding the channels,
// butterfly sums (the same order for every row). dw/db: a thread per channel
// and row stride, the strided partials added in a fixed order: no atomics.
// A forward's output held in GEMM form (Backend::hold_gemm_form) is written
// as bf16.
#include "cuda_backend.hpp"
#include "held_store.cuh"

namespace pentad {

using cuda_detail::kColumnRowThreads;
using cuda_detail::kColumnsPerBlock;
using cuda_detail::kRowsPerBlock;  // warps per block, one row each
using cuda_detail::LaunchConfig;
using cuda_detail::store;
using cuda_detail::to_dim3;

namespace {

__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename Out>
__global__ void layernorm_fwd_kernel(Out* out, float* mean, float* rstd, const float* x,
                                     const float* w, const float* b, int N, int C, float eps) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.y;
  if (n >= N) return;
  const int lane = threadIdx.x;
  const float* xr = x + size_t(n) * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += xr[c];
  const float m = warp_sum(s) / float(C);
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) ss += (xr[c] - m) * (xr[c] - m);
  const float r = rsqrtf(warp_sum(ss) / float(C) + eps);
  Out* yr = out + size_t(n) * C;
  for (int c = lane; c < C; c += 32) store(yr, c, (xr[c] - m) * r * w[c] + b[c]);
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

__global__ void layernorm_dx_kernel(float* dx, const float* dout, const float* x, const float* w,
                                    const float* mean, const float* rstd, int N, int C) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.y;
  if (n >= N) return;
  const int lane = threadIdx.x;
  const float* xr = x + size_t(n) * C;
  const float* gr = dout + size_t(n) * C;
  const float m = mean[n], r = rstd[n];
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int c = lane; c < C; c += 32) {
    const float g = gr[c] * w[c];
    sum_g += g;
    sum_gx += g * (xr[c] - m) * r;
  }
  const float mean_g = warp_sum(sum_g) / float(C), mean_gx = warp_sum(sum_gx) / float(C);
  float* dxr = dx + size_t(n) * C;
  for (int c = lane; c < C; c += 32) {
    const float xhat = (xr[c] - m) * r;
    dxr[c] += r * (gr[c] * w[c] - mean_g - xhat * mean_gx);
  }
}

// dw (+ db when non-null) over columns, slab blockIdx.y of rows at a time
// (launch.hpp column_sum_launch): block (kColumnsPerBlock, kColumnRowThreads)
// = (32, 8). One slab adds into dw/db; more write the slab's partials to
// dw/db[slab * C + c] (added by CudaBackend::add_column_partials).
__global__ void norm_dw_kernel(float* dw, float* db, const float* dout, const float* x,
                               const float* mean, const float* rstd, int N, int C, int slab_rows,
                               bool accumulate) {
  __shared__ float sw[kColumnRowThreads][kColumnsPerBlock + 1];
  __shared__ float sb[kColumnRowThreads][kColumnsPerBlock + 1];
  const int c = blockIdx.x * kColumnsPerBlock + threadIdx.x;
  const int n0 = blockIdx.y * slab_rows, n1 = min(N, n0 + slab_rows);
  float aw = 0.0f, ab = 0.0f;
  if (c < C)
    for (int n = n0 + threadIdx.y; n < n1; n += kColumnRowThreads) {
      const float g = dout[size_t(n) * C + c];
      const float m = mean ? mean[n] : 0.0f;
      aw += g * ((x[size_t(n) * C + c] - m) * rstd[n]);
      ab += g;
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float tw = 0.0f, tb = 0.0f;
    for (int y = 0; y < kColumnRowThreads; ++y) {
      tw += sw[y][threadIdx.x];
      tb += sb[y][threadIdx.x];
    }
    if (accumulate) {
      dw[c] += tw;
      if (db) db[c] += tb;
    } else {
      dw[size_t(blockIdx.y) * C + c] = tw;
      if (db) db[size_t(blockIdx.y) * C + c] = tb;
    }
  }
}

template <typename Out>
__global__ void rmsnorm_fwd_kernel(Out* out, float* rstd, const float* x, const float* w, int N,
                                   int C, float eps, float w_offset) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.y;
  if (n >= N) return;
  const int lane = threadIdx.x;
  const float* xr = x + size_t(n) * C;
  float ss = 0.0f;
  for (int c = lane; c < C; c += 32) ss += xr[c] * xr[c];
  const float r = rsqrtf(warp_sum(ss) / float(C) + eps);
  Out* yr = out + size_t(n) * C;
  for (int c = lane; c < C; c += 32) store(yr, c, xr[c] * r * (w_offset + w[c]));
  if (lane == 0) rstd[n] = r;
}

__global__ void rmsnorm_dx_kernel(float* dx, const float* dout, const float* x, const float* w,
                                  const float* rstd, int N, int C, float w_offset) {
  const int n = blockIdx.x * kRowsPerBlock + threadIdx.y;
  if (n >= N) return;
  const int lane = threadIdx.x;
  const float* xr = x + size_t(n) * C;
  const float* gr = dout + size_t(n) * C;
  const float r = rstd[n];
  float sum_gx = 0.0f;
  for (int c = lane; c < C; c += 32) sum_gx += gr[c] * (w_offset + w[c]) * (xr[c] * r);
  const float mean_gx = warp_sum(sum_gx) / float(C);
  float* dxr = dx + size_t(n) * C;
  for (int c = lane; c < C; c += 32) dxr[c] += r * (gr[c] * (w_offset + w[c]) - xr[c] * r * mean_gx);
}

}  // namespace

void CudaBackend::layernorm_fwd(float* out, float* mean, float* rstd, const float* x,
                                const float* w, const float* b, int N, int C, float eps) {
  if (N <= 0) return;
  const LaunchConfig l = cuda_detail::norm_rows_launch(N);
  if (held_in_gemm_form(out))
    layernorm_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        reinterpret_cast<__nv_bfloat16*>(out), mean, rstd, x, w, b, N, C, eps);
  else
    layernorm_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        out, mean, rstd, x, w, b, N, C, eps);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::layernorm_bwd(float* dx, float* dw, float* db, const float* dout, const float* x,
                                const float* w, const float* mean, const float* rstd, int N,
                                int C) {
  if (N <= 0) return;
  const LaunchConfig l = cuda_detail::norm_rows_launch(N);
  layernorm_dx_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      dx, dout, x, w, mean, rstd, N, C);
  CUDA_LAUNCH_CHECK();
  norm_weight_grads(dw, db, dout, x, mean, rstd, N, C);
}

void CudaBackend::rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int N,
                              int C, float eps, float w_offset) {
  if (N <= 0) return;
  const LaunchConfig l = cuda_detail::norm_rows_launch(N);
  if (held_in_gemm_form(out))
    rmsnorm_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        reinterpret_cast<__nv_bfloat16*>(out), rstd, x, w, N, C, eps, w_offset);
  else
    rmsnorm_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        out, rstd, x, w, N, C, eps, w_offset);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::rmsnorm_bwd(float* dx, float* dw, const float* dout, const float* x,
                              const float* w, const float* rstd, int N, int C, float w_offset) {
  if (N <= 0) return;
  const LaunchConfig l = cuda_detail::norm_rows_launch(N);
  rmsnorm_dx_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      dx, dout, x, w, rstd, N, C, w_offset);
  CUDA_LAUNCH_CHECK();
  norm_weight_grads(dw, nullptr, dout, x, nullptr, rstd, N, C);
}

void CudaBackend::norm_weight_grads(float* dw, float* db, const float* dout, const float* x,
                                    const float* mean, const float* rstd, int N, int C) {
  const LaunchConfig l = cuda_detail::column_sum_launch(N, C);
  const int slabs = int(l.grid.y), slab_rows = int(cuda_detail::column_slab_rows(N, slabs));
  if (slabs == 1) {
    norm_dw_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        dw, db, dout, x, mean, rstd, N, C, slab_rows, true);
    CUDA_LAUNCH_CHECK();
    return;
  }
  const size_t per = size_t(slabs) * C;  // partials of dw, then of db
  auto* partial = static_cast<float*>(scratch(4, (db ? 2 : 1) * per * sizeof(float)));
  norm_dw_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      partial, db ? partial + per : nullptr, dout, x, mean, rstd, N, C, slab_rows, false);
  CUDA_LAUNCH_CHECK();
  add_column_partials(dw, partial, slabs, C);
  if (db) add_column_partials(db, partial + per, slabs, C);
}

}  // namespace pentad
