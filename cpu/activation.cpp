// GELU, tanh approximation (Hendrycks & Gimpel 2016, as GPT-2), written as
// x * sigmoid(2u) with u = sqrt(2/pi)(x + 0.044715 x^3), which equals
// 0.5 x (1 + tanh u) without cancellation; gated units (Shazeer 2020):
// out = act(gate) * up, act SiLU (SwiGLU) or that GELU (GeGLU). dx is WRITTEN, not accumulated. A forward's output
// held in GEMM form (Backend::hold_gemm_form) is written rounded to bf16. In
// a bf16 run every one of them reads its inputs (x; gate and up) rounded to
// bf16, forward and backward (ops.def), as they are when held in GEMM form.
#include "bf16.hpp"
#include "cpu_backend.hpp"

namespace pentad {

using cpu_detail::exp_f;

namespace {
constexpr size_t kParallelMin = 1u << 14;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// An input value as the activations read it: rounded to bf16 in a bf16 run.
inline float act_in(float x, bool bf16) { return bf16 ? round_bf16(x) : x; }
}  // namespace

void CpuBackend::gelu_fwd(float* out, const float* x, size_t n) {
  const bool held = held_in_gemm_form(out);  // the GEMM form: floats rounded to bf16
  const bool bf16 = compute_dtype_ == Dtype::bf16;
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    const float xi = act_in(x[i], bf16);
    const float u = kSqrt2OverPi * (xi + kGeluCubic * xi * xi * xi);
    const float y = xi / (1.0f + exp_f(-2.0f * u));
    out[i] = held ? round_bf16(y) : y;
  }
}

void CpuBackend::gelu_bwd(float* dx, const float* dout, const float* x, size_t n) {
  const bool bf16 = compute_dtype_ == Dtype::bf16;
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    const float xi = act_in(x[i], bf16);
    const float u = kSqrt2OverPi * (xi + kGeluCubic * xi * xi * xi);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * xi * xi);
    const float s = 1.0f / (1.0f + exp_f(-2.0f * u));  // = 0.5 (1 + tanh u)
    dx[i] = dout[i] * (s + xi * 2.0f * s * (1.0f - s) * du);
  }
}

namespace {

// A gated unit's activation at g, as the forward computes it (the SiLU as
// g / (1 + e^-g), the GELU as gelu_fwd does).
template <GateAct A>
inline float gate_value(float g) {
  if constexpr (A == GateAct::silu) {
    return g / (1.0f + exp_f(-g));
  } else {
    const float u = kSqrt2OverPi * (g + kGeluCubic * g * g * g);
    return g / (1.0f + exp_f(-2.0f * u));
  }
}

// The same and its derivative, as the backward computes them.
template <GateAct A>
inline void gate_grad(float g, float* value, float* deriv) {
  if constexpr (A == GateAct::silu) {
    const float s = 1.0f / (1.0f + exp_f(-g));
    *value = g * s;
    *deriv = s * (1.0f + g * (1.0f - s));
  } else {
    const float u = kSqrt2OverPi * (g + kGeluCubic * g * g * g);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * g * g);
    const float s = 1.0f / (1.0f + exp_f(-2.0f * u));  // = 0.5 (1 + tanh u)
    *value = g * s;
    *deriv = s + g * 2.0f * s * (1.0f - s) * du;
  }
}

template <GateAct A>
void glu_fwd_loop(float* out, const float* gate, const float* up, size_t n, bool held, bool bf16) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    const float y = gate_value<A>(act_in(gate[i], bf16)) * act_in(up[i], bf16);
    out[i] = held ? round_bf16(y) : y;
  }
}

template <GateAct A>
void glu_bwd_loop(float* dgate, float* dup, const float* dout, const float* gate, const float* up, size_t n,
                  bool bf16) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    float a, da;
    gate_grad<A>(act_in(gate[i], bf16), &a, &da);
    const float go = dout[i];
    dgate[i] = go * act_in(up[i], bf16) * da;
    dup[i] = go * a;
  }
}

}  // namespace

void CpuBackend::glu_fwd(float* out, const float* gate, const float* up, size_t n, GateAct act) {
  const bool held = held_in_gemm_form(out), bf16 = compute_dtype_ == Dtype::bf16;
  if (act == GateAct::silu)
    glu_fwd_loop<GateAct::silu>(out, gate, up, n, held, bf16);
  else
    glu_fwd_loop<GateAct::gelu_tanh>(out, gate, up, n, held, bf16);
}

void CpuBackend::glu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                         size_t n, GateAct act) {
  const bool bf16 = compute_dtype_ == Dtype::bf16;
  if (act == GateAct::silu)
    glu_bwd_loop<GateAct::silu>(dgate, dup, dout, gate, up, n, bf16);
  else
    glu_bwd_loop<GateAct::gelu_tanh>(dgate, dup, dout, gate, up, n, bf16);
}

}  // namespace pentad
