// GELU, tanh approximation (Hendrycks & Gimpel 2016, as GPT-2), and gated
// units (Shazeer 2020): out = act(gate) * up, act SiLU (SwiGLU) or that GELU
// (GeGLU); the formulas are core/gate_act.hpp's, shared with CUDA. dx is
// WRITTEN, not accumulated. A forward's output
// held in GEMM form (Backend::hold_gemm_form) is written rounded to bf16. In
// a bf16 run every one of them reads its inputs (x; gate and up) rounded to
// bf16, forward and backward (ops.def), as they are when held in GEMM form.
#include "bf16.hpp"
#include "core/gate_act.hpp"
#include "cpu_backend.hpp"

namespace pentad {

using cpu_detail::exp_f;

namespace {
constexpr size_t kParallelMin = 1u << 14;

// An input value as the activations read it: rounded to bf16 in a bf16 run.
inline float act_in(float x, bool bf16) { return bf16 ? round_bf16(x) : x; }

struct CpuExp {
  float operator()(float x) const { return exp_f(x); }
};
}  // namespace

void CpuBackend::gelu_fwd(float* out, const float* x, size_t n) {
  const bool held = held_in_gemm_form(out);  // the GEMM form: floats rounded to bf16
  const bool bf16 = compute_dtype_ == Dtype::bf16;
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    const float y = gate_value<GateAct::gelu_tanh>(act_in(x[i], bf16), CpuExp{});
    out[i] = held ? round_bf16(y) : y;
  }
}

void CpuBackend::gelu_bwd(float* dx, const float* dout, const float* x, size_t n) {
  const bool bf16 = compute_dtype_ == Dtype::bf16;
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    float y, dy;
    gate_grad<GateAct::gelu_tanh>(act_in(x[i], bf16), CpuExp{}, &y, &dy);
    dx[i] = dout[i] * dy;
  }
}

namespace {

template <GateAct A>
void glu_fwd_loop(float* out, const float* gate, const float* up, size_t n, bool held, bool bf16) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    const float y = gate_value<A>(act_in(gate[i], bf16), CpuExp{}) * act_in(up[i], bf16);
    out[i] = held ? round_bf16(y) : y;
  }
}

template <GateAct A>
void glu_bwd_loop(float* dgate, float* dup, const float* dout, const float* gate, const float* up, size_t n,
                  bool bf16) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) {
    float a, da;
    gate_grad<A>(act_in(gate[i], bf16), CpuExp{}, &a, &da);
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
