// Token (+ learned position) embedding over a vocab slice [vocab_start,
// vocab_start+V); tokens outside it read zeros and get no gradient. The
// backward has no atomics and a fixed order: for dwte a thread owns one
// channel of a contiguous range of vocabulary rows and walks every token in
// order (tokens staged in shared memory), adding the ones in its range; for
// dwpe a thread owns one (position, channel) and sums the batch in order.
#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

__global__ void embedding_fwd_kernel(float* out, const int32_t* tokens, const float* wte,
                                     const float* wpe, int B, int T, int C, int vocab_start, int V,
                                     int pos_offset) {
  const size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (e >= size_t(B) * T * C) return;
  const int c = int(e % C);
  const size_t bt = e / C;
  const int t = int(bt % T);
  const int row = tokens[bt] - vocab_start;
  float v = (row >= 0 && row < V) ? wte[size_t(row) * C + c] : 0.0f;
  if (wpe) v += wpe[size_t(pos_offset + t) * C + c];
  out[e] = v;
}

constexpr int kTokenChunk = 1024; // tokens staged in shared memory at a time

__global__ void embedding_dwte_kernel(float* dwte, const float* dout, const int32_t* tokens, int BT,
                                      int C, int vocab_start, int V) {
  __shared__ int32_t rows[kTokenChunk];
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int per = (V + int(gridDim.y) - 1) / int(gridDim.y);
  const int lo = int(blockIdx.y) * per, hi = min(V, lo + per);
  for (int t0 = 0; t0 < BT; t0 += kTokenChunk) {
    const int n = min(kTokenChunk, BT - t0);
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) rows[i] = tokens[t0 + i] - vocab_start;
    __syncthreads();
    if (c >= C) continue;
    for (int i = 0; i < n; ++i) {
      const int row = rows[i];
      if (row >= lo && row < hi) dwte[size_t(row) * C + c] += dout[size_t(t0 + i) * C + c];
    }
  }
}

__global__ void embedding_dwpe_kernel(float* dwpe, const float* dout, int B, int T, int C,
                                      int pos_offset) {
  const size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (e >= size_t(T) * C) return;
  const int c = int(e % C), t = int(e / C);
  float s = 0.0f;
  for (int b = 0; b < B; ++b) s += dout[(size_t(b) * T + t) * C + c];
  dwpe[size_t(pos_offset + t) * C + c] += s;
}

}  // namespace

void CudaBackend::embedding_fwd(float* out, const int32_t* tokens, const float* wte,
                                const float* wpe, int B, int T, int C, int vocab_start, int V,
                                int pos_offset) {
  const size_t n = size_t(B) * T * C;
  if (n == 0) return;
  const LaunchConfig l = cuda_detail::elementwise_launch(n);
  embedding_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      out, tokens, wte, wpe, B, T, C, vocab_start, V, pos_offset);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::embedding_bwd(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                                int B, int T, int C, int vocab_start, int V, int pos_offset) {
  if (size_t(B) * T * C == 0) return;
  if (dwte) {
    const LaunchConfig l = cuda_detail::embedding_dwte_launch(C, V);
    embedding_dwte_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        dwte, dout, tokens, B * T, C, vocab_start, V);
    CUDA_LAUNCH_CHECK();
  }
  if (dwpe) {
    const LaunchConfig l = cuda_detail::elementwise_launch(size_t(T) * C);
    embedding_dwpe_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        dwpe, dout, B, T, C, pos_offset);
    CUDA_LAUNCH_CHECK();
  }
}

}  // namespace pentad
