// Elementwise kernels, fill, the bias pair and sum_squares. sum_squares
// accumulates in double over fixed 4096-element chunks (one block each, a
// fixed tree inside), then one block sums the chunk partials in index
// order: the result does not depend on the launch or the GPU. bias_bwd gives
// each thread a column and a fixed row stride, combined by a fixed tree.
#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::blocks_for;
using cuda_detail::kThreads;

namespace {

constexpr int kSumChunk = 4096;

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

// Column sums: block (32, 8); thread (tx, ty) sums rows ty, ty+8, ... of
// column c; the 8 partials are added in ty order.
__global__ void column_sum_kernel(float* dbias, const float* dout, int N, int C) {
  __shared__ float sh[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (c < C)
    for (int n = threadIdx.y; n < N; n += 8) s += dout[size_t(n) * C + c];
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.0f;
    for (int y = 0; y < 8; ++y) t += sh[y][threadIdx.x];
    dbias[c] += t;
  }
}

}  // namespace

void CudaBackend::fill(float* p, float value, size_t n) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(p, value, n);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::add(float* out, const float* a, const float* b, size_t n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(out, a, b, n);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::scale(float* x, float s, size_t n) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(x, s, n);
  CUDA_LAUNCH_CHECK();
}

double CudaBackend::sum_squares(const float* x, size_t n) {
  if (n == 0) return 0.0;
  const size_t n_chunks = (n + kSumChunk - 1) / kSumChunk;
  auto* partial = static_cast<double*>(scratch(2, (n_chunks + 1) * sizeof(double)));
  sum_squares_chunks<<<unsigned(n_chunks), kThreads, 0, stream_>>>(partial, x, n);
  CUDA_LAUNCH_CHECK();
  sum_partials<<<1, kThreads, 0, stream_>>>(partial + n_chunks, partial, n_chunks);
  CUDA_LAUNCH_CHECK();
  CUDA_CHECK(cudaMemcpyAsync(host_sum_, partial + n_chunks, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *host_sum_;
}

void CudaBackend::bias_add(float* x, const float* bias, int N, int C) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  bias_add_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(x, bias, N, C);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::bias_bwd(float* dbias, const float* dout, int N, int C) {
  if (C <= 0) return;
  column_sum_kernel<<<unsigned((C + 31) / 32), dim3(32, 8), 0, stream_>>>(dbias, dout, N, C);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
