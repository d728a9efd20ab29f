// GELU, tanh approximation (Hendrycks & Gimpel 2016, as GPT-2), written as
// x * sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3), like cpu/activation.cpp;
// SwiGLU (Shazeer 2020): out = silu(gate) * up. dx is WRITTEN. A forward's
// output held in GEMM form (Backend::hold_gemm_form) is written as bf16.
#include "cuda_backend.hpp"
#include "held_store.cuh"

namespace pentad {

using cuda_detail::elementwise_launch;
using cuda_detail::store;
using cuda_detail::to_dim3;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

template <typename Out>
__global__ void gelu_fwd_kernel(Out* out, const float* x, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float xi = x[i];
  const float u = kSqrt2OverPi * (xi + kGeluCubic * xi * xi * xi);
  store(out, i, xi / (1.0f + expf(-2.0f * u)));
}

__global__ void gelu_bwd_kernel(float* dx, const float* dout, const float* x, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float xi = x[i];
  const float u = kSqrt2OverPi * (xi + kGeluCubic * xi * xi * xi);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * xi * xi);
  const float s = 1.0f / (1.0f + expf(-2.0f * u));
  dx[i] = dout[i] * (s + xi * 2.0f * s * (1.0f - s) * du);
}

template <typename Out>
__global__ void swiglu_fwd_kernel(Out* out, const float* gate, const float* up, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  store(out, i, g / (1.0f + expf(-g)) * up[i]);
}

__global__ void swiglu_bwd_kernel(float* dgate, float* dup, const float* dout, const float* gate,
                                  const float* up, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  const float s = 1.0f / (1.0f + expf(-g));
  const float silu = g * s;
  const float dsilu = s * (1.0f + g * (1.0f - s));
  const float go = dout[i];
  dgate[i] = go * up[i] * dsilu;
  dup[i] = go * silu;
}

}  // namespace

void CudaBackend::gelu_fwd(float* out, const float* x, size_t n) {
  if (n == 0) return;
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  if (held_in_gemm_form(out))
    gelu_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        reinterpret_cast<__nv_bfloat16*>(out), x, n);
  else
    gelu_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(out, x, n);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::gelu_bwd(float* dx, const float* dout, const float* x, size_t n) {
  if (n == 0) return;
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  gelu_bwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(dx, dout, x, n);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::swiglu_fwd(float* out, const float* gate, const float* up, size_t n) {
  if (n == 0) return;
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  if (held_in_gemm_form(out))
    swiglu_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
        reinterpret_cast<__nv_bfloat16*>(out), gate, up, n);
  else
    swiglu_fwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(out, gate, up, n);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate,
                             const float* up, size_t n) {
  if (n == 0) return;
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  swiglu_bwd_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      dgate, dup, dout, gate, up, n);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
