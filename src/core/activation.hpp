// The activation of a gated MLP (model.mlp_act): out = act(gate) * up, with
// act SiLU (SwiGLU: Llama, Qwen, Mistral, Phi-3) or GELU in its tanh
// approximation (GeGLU: Gemma's gelu_pytorch_tanh).
#pragma once

#include <cstdint>

namespace pentad {

enum class GateAct : uint8_t { silu, gelu_tanh };

}  // namespace pentad
