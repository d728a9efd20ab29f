// Elementwise kernels, fill, the bias pair and sum_squares. sum_squares
// accumulates in double over fixed 4096-element chunks (one block each, a
// fixed tree inside), then one block sums the chunk partials in index
// order: the result does not depend on the launch or the GPU. bias_bwd gives
// each thread a column and a fixed row stride, combined by a fixed tree.
#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::kColumnRowThreads;
using cuda_detail::kColumnsPerBlock;
using cuda_detail::kSumChunk;
using cuda_detail::kThreads;
using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

__global__ void fill_kernel(float* p, float v, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = v;
}

__global__ void add_kernel(float* out, const float* a, const float* b, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, float s, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) x[i] *= s;
}

// Fixed-shape tree sum over the block (blockDim.x == kThreads).
__device__ double block_sum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  return sh[0];
}

__global__ void sum_squares_chunks(double* partial, const float* x, size_t n) {
  __shared__ double sh[kThreads];
  const size_t begin = size_t(blockIdx.x) * kSumChunk;
  const size_t end = begin + kSumChunk < n ? begin + kSumChunk : n;
  double s = 0.0;
  for (size_t i = begin + threadIdx.x; i < end; i += kThreads) s += double(x[i]) * double(x[i]);
  const double total = block_sum(s, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void sum_partials(double* out, const double* partial, size_t n) {
  __shared__ double sh[kThreads];
  double s = 0.0;
  for (size_t i = threadIdx.x; i < n; i += kThreads) s += partial[i];
  const double total = block_sum(s, sh);
  if (threadIdx.x == 0) *out = total;
}

__global__ void bias_add_kernel(float* x, const float* bias, int N, int C) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < size_t(N) * C) x[i] += bias[i % C];
}

// Column sums over slab blockIdx.y of rows (launch.hpp column_sum_launch):
// block (kColumnsPerBlock, kColumnRowThreads) = (32, 8); thread (tx, ty)
// sums the slab's rows ty, ty+8, ... of column c; the 8 partials are added
// in ty order, then added into dst[c] (one slab: the output) or written to
// dst[slab * C + c] (the partials column_partials_kernel adds).
__global__ void column_sum_kernel(float* dst, const float* dout, int N, int C, int slab_rows,
                                  bool accumulate) {
  __shared__ float sh[kColumnRowThreads][kColumnsPerBlock + 1];
  const int c = blockIdx.x * kColumnsPerBlock + threadIdx.x;
  const int n0 = blockIdx.y * slab_rows, n1 = min(N, n0 + slab_rows);
  float s = 0.0f;
  if (c < C)
    for (int n = n0 + threadIdx.y; n < n1; n += kColumnRowThreads) s += dout[size_t(n) * C + c];
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.0f;
    for (int y = 0; y < kColumnRowThreads; ++y) t += sh[y][threadIdx.x];
    if (accumulate)
      dst[c] += t;
    else
      dst[size_t(blockIdx.y) * C + c] = t;
  }
}

// out[c] += the slabs' partials of column c, in slab order (the second pass
// of the column sums; launch.hpp column_partials_launch).
__global__ void column_partials_kernel(float* out, const float* partial, int slabs, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float t = 0.0f;
  for (int s = 0; s < slabs; ++s) t += partial[size_t(s) * C + c];
  out[c] += t;
}

}  // namespace

void CudaBackend::fill(float* p, float value, size_t n) {
  if (n == 0) return;
  weights_written(p, n * sizeof(float));
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  fill_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(p, value, n);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::add(float* out, const float* a, const float* b, size_t n) {
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  add_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(out, a, b, n);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::scale(float* x, float s, size_t n) {
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  scale_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(x, s, n);
  CUDA_LAUNCH_CHECK();
}

double CudaBackend::sum_squares(const float* x, size_t n) {
  if (n == 0) return 0.0;
  const size_t n_chunks = cuda_detail::sum_squares_n_chunks(n);
  auto* partial = static_cast<double*>(scratch(2, (n_chunks + 1) * sizeof(double)));
  const LaunchConfig l = cuda_detail::sum_squares_chunks_launch(n);
  sum_squares_chunks<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(partial, x, n);
  CUDA_LAUNCH_CHECK();
  const LaunchConfig lp = cuda_detail::sum_partials_launch();
  sum_partials<<<to_dim3(lp.grid), to_dim3(lp.block), lp.smem_bytes, stream_>>>(
      partial + n_chunks, partial, n_chunks);
  CUDA_LAUNCH_CHECK();
  CUDA_CHECK(cudaMemcpyAsync(host_sum_, partial + n_chunks, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *host_sum_;
}

void CudaBackend::bias_add(float* x, const float* bias, int N, int C) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  bias_add_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(x, bias, N, C);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::bias_bwd(float* dbias, const float* dout, int N, int C) {
  if (C <= 0) return;
  const LaunchConfig l = cuda_detail::column_sum_launch(N, C);
  const int slabs = int(l.grid.y), slab_rows = int(cuda_detail::column_slab_rows(N, slabs));
  float* partial = slabs > 1 ? static_cast<float*>(scratch(4, size_t(slabs) * C * sizeof(float))) : nullptr;
  column_sum_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      slabs > 1 ? partial : dbias, dout, N, C, slab_rows, slabs == 1);
  CUDA_LAUNCH_CHECK();
  if (slabs > 1) add_column_partials(dbias, partial, slabs, C);
}

void CudaBackend::add_column_partials(float* out, const float* partial, int slabs, int C) {
  const LaunchConfig l = cuda_detail::column_partials_launch(C);
  column_partials_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(out, partial, slabs, C);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
