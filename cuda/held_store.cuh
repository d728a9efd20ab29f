// What a forward op writes into its output: fp32, or bf16 (round to nearest
// even) where the output is held in GEMM form (Backend::hold_gemm_form,
// train.bf16_activations). The kernels are templated on the output type.
// And what an op reads from an input that may be held: the bf16 values, or
// fp32 values, rounded to bf16 where the op's contract says so (`round`).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

namespace pentad::cuda_detail {

__device__ inline void store(float* out, size_t i, float y) { out[i] = y; }
__device__ inline void store(__nv_bfloat16* out, size_t i, float y) { out[i] = __float2bfloat16_rn(y); }

__device__ inline float load(const float* in, size_t i, bool round) {
  return round ? __bfloat162float(__float2bfloat16_rn(in[i])) : in[i];
}
__device__ inline float load(const __nv_bfloat16* in, size_t i, bool) { return __bfloat162float(in[i]); }

}  // namespace pentad::cuda_detail
