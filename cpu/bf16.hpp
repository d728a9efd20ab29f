// bfloat16 rounding for the CPU emulation of train.dtype = bf16: a float is
// rounded to the nearest bf16 value (ties to even) and returned as a float,
// so the products that follow see exactly the operands a bf16 GEMM would.
// NaN stays NaN (quieted, sign kept); +-Inf stay infinite; values above the
// largest bf16 round to Inf as IEEE round-to-nearest prescribes.
#pragma once

#include <bit>
#include <cstdint>

namespace pentad {

// The 16 bits of the bf16 nearest to x (ties to even).
inline uint16_t bf16_bits(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return uint16_t((u >> 16) | 0x0040u);  // NaN: keep sign, force a quiet mantissa bit
  u += 0x7fffu + ((u >> 16) & 1u);         // round half to even on the dropped 16 bits
  return uint16_t(u >> 16);
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline float round_bf16(float x) { return bf16_to_float(bf16_bits(x)); }

}  // namespace pentad
