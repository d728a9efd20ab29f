// The MoE layer's row movements (ops.def): the dispatch gather and the
// weighted combine, a thread per output element (the combine sums its
// choices in order, no atomics), and the combine's backward, a warp per
// dispatched row: each lane scales its channels and adds its share of the
// weight gradient in double, then a fixed shuffle tree sums the lanes.
#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

__global__ void gather_rows_kernel(float* dst, const float* src, const int32_t* idx, int M, int C) {
  const size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (e >= size_t(M) * C) return;
  const size_t m = e / C;
  dst[e] = src[size_t(idx[m]) * C + e % C];
}

__global__ void combine_rows_kernel(float* out, const float* src, const int32_t* row, const float* w, int N,
                                    int k, int C) {
  const size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (e >= size_t(N) * C) return;
  const size_t t = e / C;
  const int c = int(e % C);
  float o = 0.0f;
  for (int j = 0; j < k; ++j) {
    const int m = row[t * k + j];
    if (m < 0) continue;
    const float wt = w ? w[t * k + j] : 1.0f;
    o += wt * src[size_t(m) * C + c];
  }
  out[e] = o;
}

__global__ void combine_rows_bwd_kernel(float* dsrc, float* dw, const float* dy, const float* y,
                                        const int32_t* token, const int32_t* choice, const float* w, int M,
                                        int C) {
  const int m = blockIdx.x * blockDim.y + threadIdx.y;
  if (m >= M) return;
  const float* g = dy + size_t(token[m]) * C;
  const float* yr = y + size_t(m) * C;
  float* o = dsrc + size_t(m) * C;
  const float wt = w[choice[m]];
  double d = 0;
  for (int c = threadIdx.x; c < C; c += 32) {
    o[c] = wt * g[c];
    d += double(g[c]) * yr[c];
  }
  for (int off = 16; off > 0; off /= 2) d += __shfl_down_sync(0xffffffffu, d, off);
  if (threadIdx.x == 0) dw[choice[m]] = float(d);
}

}  // namespace

void CudaBackend::gather_rows(float* dst, const float* src, const int32_t* idx, int M, int C) {
  const size_t n = size_t(M) * C;
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  gather_rows_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(dst, src, idx, M, C);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::combine_rows(float* out, const float* src, const int32_t* row, const float* w, int N, int k,
                               int C) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  combine_rows_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(out, src, row, w, N, k, C);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::combine_rows_bwd(float* dsrc, float* dw, const float* dy, const float* y, const int32_t* token,
                                   const int32_t* choice, const float* w, int M, int C) {
  if (M <= 0) return;
  const LaunchConfig l = cuda_detail::norm_rows_launch(M);  // a warp per row
  combine_rows_bwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(dsrc, dw, dy, y, token,
                                                                                          choice, w, M, C);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
