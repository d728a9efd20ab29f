// What a forward op writes into its output: fp32, or bf16 (round to nearest
// even) where the output is held in GEMM form (Backend::hold_gemm_form,
// train.bf16_activations). The kernels are templated on the output type.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

namespace pentad::cuda_detail {

__device__ inline void store(float* out, size_t i, float y) { out[i] = y; }
__device__ inline void store(__nv_bfloat16* out, size_t i, float y) { out[i] = __float2bfloat16_rn(y); }

}  // namespace pentad::cuda_detail
