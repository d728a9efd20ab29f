// The gated MLP's activation act(g) of core/activation.hpp, one definition
// for both backends (cpu/activation.cpp, cuda/activation.cu), each passing
// its own exponential (Exp: a functor, float -> float). The GELU is the tanh
// approximation written as g * sigmoid(2u), u = sqrt(2/pi) (g + 0.044715 g^3),
// which equals 0.5 g (1 + tanh u) without cancellation, as gelu_fwd's.
#pragma once

#include "core/activation.hpp"
#include "core/host_device.hpp"

namespace pentad {

inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

// act(g), as the forward computes it (the SiLU as g / (1 + e^-g)).
template <GateAct A, class Exp>
PENTAD_HD inline float gate_value(float g, Exp exp) {
  if constexpr (A == GateAct::silu) {
    return g / (1.0f + exp(-g));
  } else {
    const float u = kGeluSqrt2OverPi * (g + kGeluCubic * g * g * g);
    return g / (1.0f + exp(-2.0f * u));
  }
}

// act(g) and act'(g), as the backward computes them.
template <GateAct A, class Exp>
PENTAD_HD inline void gate_grad(float g, Exp exp, float* value, float* deriv) {
  if constexpr (A == GateAct::silu) {
    const float s = 1.0f / (1.0f + exp(-g));
    *value = g * s;
    *deriv = s * (1.0f + g * (1.0f - s));
  } else {
    const float u = kGeluSqrt2OverPi * (g + kGeluCubic * g * g * g);
    const float du = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * g * g);
    const float s = 1.0f / (1.0f + exp(-2.0f * u));  // = 0.5 (1 + tanh u)
    *value = g * s;
    *deriv = s + g * 2.0f * s * (1.0f - s) * du;
  }
}

}  // namespace pentad
