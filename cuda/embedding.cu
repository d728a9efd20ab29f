// Token (+ learned position) embedding over a vocab slice [vocab_start,
// vocab_start+V); tokens outside it read zeros and get no gradient. The
// backward walks all tokens in order per channel (one thread per channel for
// dwte, per (position, channel) for dwpe): deterministic, no atomics, but
// only C-way parallel for dwte (a sort-by-token kernel would be faster).
#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::blocks_for;
using cuda_detail::kThreads;

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

__global__ void embedding_dwte_kernel(float* dwte, const float* dout, const int32_t* tokens, int BT,
                                      int C, int vocab_start, int V) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int bt = 0; bt < BT; ++bt) {
    const int row = tokens[bt] - vocab_start;
    if (row >= 0 && row < V) dwte[size_t(row) * C + c] += dout[size_t(bt) * C + c];
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
  embedding_fwd_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(out, tokens, wte, wpe, B, T, C,
                                                                 vocab_start, V, pos_offset);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::embedding_bwd(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                                int B, int T, int C, int vocab_start, int V, int pos_offset) {
  if (size_t(B) * T * C == 0) return;
  if (dwte) {
    embedding_dwte_kernel<<<blocks_for(size_t(C), 128), 128, 0, stream_>>>(dwte, dout, tokens, B * T, C,
                                                                             vocab_start, V);
    CUDA_LAUNCH_CHECK();
  }
  if (dwpe) {
    embedding_dwpe_kernel<<<blocks_for(size_t(T) * C), kThreads, 0, stream_>>>(dwpe, dout, B, T, C,
                                                                               pos_offset);
    CUDA_LAUNCH_CHECK();
  }
}

}  // namespace pentad
