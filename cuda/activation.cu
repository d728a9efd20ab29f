// GELU, tanh approximation (Hendrycks & Gimpel 2016, as GPT-2), and gated
// units (Shazeer 2020): out = act(gate) * up, act SiLU (SwiGLU) or that GELU
// (GeGLU); the formulas are core/gate_act.hpp's, shared with the CPU. dx is
// WRITTEN. A forward's
// output held in GEMM form (Backend::hold_gemm_form) is written as bf16; an
// input held so is read as its bf16 values, and in a bf16 run an fp32 input
// is read rounded to bf16 (ops.def), so both give the same results.
#include "core/gate_act.hpp"
#include "cuda_backend.hpp"
#include "held_store.cuh"

namespace pentad {

using cuda_detail::elementwise_launch;
using cuda_detail::load;
using cuda_detail::store;
using cuda_detail::to_dim3;

namespace {

struct DeviceExp {
  __device__ float operator()(float x) const { return expf(x); }
};

// In: the input's type (float, or __nv_bfloat16 where held in GEMM form);
// round: an fp32 input is read rounded to bf16 (a bf16 run).
template <typename Out, typename In>
__global__ void gelu_fwd_kernel(Out* out, const In* x, size_t n, bool round) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  store(out, i, gate_value<GateAct::gelu_tanh>(load(x, i, round), DeviceExp{}));
}

template <typename In>
__global__ void gelu_bwd_kernel(float* dx, const float* dout, const In* x, size_t n, bool round) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float y, dy;
  gate_grad<GateAct::gelu_tanh>(load(x, i, round), DeviceExp{}, &y, &dy);
  dx[i] = dout[i] * dy;
}

template <GateAct A, typename Out, typename In>
__global__ void glu_fwd_kernel(Out* out, const In* gate, const In* up, size_t n, bool round) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  store(out, i, gate_value<A>(load(gate, i, round), DeviceExp{}) * load(up, i, round));
}

template <GateAct A, typename In>
__global__ void glu_bwd_kernel(float* dgate, float* dup, const float* dout, const In* gate, const In* up,
                               size_t n, bool round) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float a, da;
  gate_grad<A>(load(gate, i, round), DeviceExp{}, &a, &da);
  const float go = dout[i];
  dgate[i] = go * load(up, i, round) * da;
  dup[i] = go * a;
}

const __nv_bfloat16* as_bf16(const float* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* as_bf16(float* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

void CudaBackend::gelu_fwd(float* out, const float* x, size_t n) {
  if (n == 0) return;
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  const dim3 grid = to_dim3(l.grid), block = to_dim3(l.block);
  const bool round = compute_dtype_ == Dtype::bf16, out_held = held_in_gemm_form(out);
  if (held_in_gemm_form(x)) {
    if (out_held)
      gelu_fwd_kernel<<<grid, block, l.smem_bytes, stream_>>>(as_bf16(out), as_bf16(x), n, round);
    else
      gelu_fwd_kernel<<<grid, block, l.smem_bytes, stream_>>>(out, as_bf16(x), n, round);
  } else if (out_held) {
    gelu_fwd_kernel<<<grid, block, l.smem_bytes, stream_>>>(as_bf16(out), x, n, round);
  } else {
    gelu_fwd_kernel<<<grid, block, l.smem_bytes, stream_>>>(out, x, n, round);
  }
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::gelu_bwd(float* dx, const float* dout, const float* x, size_t n) {
  if (n == 0) return;
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  const dim3 grid = to_dim3(l.grid), block = to_dim3(l.block);
  const bool round = compute_dtype_ == Dtype::bf16;
  if (held_in_gemm_form(x))
    gelu_bwd_kernel<<<grid, block, l.smem_bytes, stream_>>>(dx, dout, as_bf16(x), n, round);
  else
    gelu_bwd_kernel<<<grid, block, l.smem_bytes, stream_>>>(dx, dout, x, n, round);
  CUDA_LAUNCH_CHECK();
}

// Are gate and up held (both)? One without the other: the run stops.
bool CudaBackend::glu_inputs_held(const float* gate, const float* up) {
  const bool g = held_in_gemm_form(gate), u = held_in_gemm_form(up);
  if (g != u) PENTAD_FATAL("cuda glu: gate and up are not both held in GEMM form, nor both fp32");
  return g;
}

namespace {

template <GateAct A>
void launch_glu_fwd(cudaStream_t stream, float* out, const float* gate, const float* up, size_t n, bool round,
                    bool in_held, bool out_held) {
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  const dim3 grid = to_dim3(l.grid), block = to_dim3(l.block);
  if (in_held) {
    if (out_held)
      glu_fwd_kernel<A><<<grid, block, l.smem_bytes, stream>>>(as_bf16(out), as_bf16(gate), as_bf16(up), n, round);
    else
      glu_fwd_kernel<A><<<grid, block, l.smem_bytes, stream>>>(out, as_bf16(gate), as_bf16(up), n, round);
  } else if (out_held) {
    glu_fwd_kernel<A><<<grid, block, l.smem_bytes, stream>>>(as_bf16(out), gate, up, n, round);
  } else {
    glu_fwd_kernel<A><<<grid, block, l.smem_bytes, stream>>>(out, gate, up, n, round);
  }
}

template <GateAct A>
void launch_glu_bwd(cudaStream_t stream, float* dgate, float* dup, const float* dout, const float* gate,
                    const float* up, size_t n, bool round, bool in_held) {
  const cuda_detail::LaunchConfig l = elementwise_launch(n);
  const dim3 grid = to_dim3(l.grid), block = to_dim3(l.block);
  if (in_held)
    glu_bwd_kernel<A><<<grid, block, l.smem_bytes, stream>>>(dgate, dup, dout, as_bf16(gate), as_bf16(up), n,
                                                             round);
  else
    glu_bwd_kernel<A><<<grid, block, l.smem_bytes, stream>>>(dgate, dup, dout, gate, up, n, round);
}

}  // namespace

void CudaBackend::glu_fwd(float* out, const float* gate, const float* up, size_t n, GateAct act) {
  if (n == 0) return;
  const bool round = compute_dtype_ == Dtype::bf16, in_held = glu_inputs_held(gate, up),
             out_held = held_in_gemm_form(out);
  if (act == GateAct::silu)
    launch_glu_fwd<GateAct::silu>(stream_, out, gate, up, n, round, in_held, out_held);
  else
    launch_glu_fwd<GateAct::gelu_tanh>(stream_, out, gate, up, n, round, in_held, out_held);
  CUDA_LAUNCH_CHECK();
}

void CudaBackend::glu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                          size_t n, GateAct act) {
  if (n == 0) return;
  const bool round = compute_dtype_ == Dtype::bf16, in_held = glu_inputs_held(gate, up);
  if (act == GateAct::silu)
    launch_glu_bwd<GateAct::silu>(stream_, dgate, dup, dout, gate, up, n, round, in_held);
  else
    launch_glu_bwd<GateAct::gelu_tanh>(stream_, dgate, dup, dout, gate, up, n, round, in_held);
  CUDA_LAUNCH_CHECK();
}

}  // namespace pentad
