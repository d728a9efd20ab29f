// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
// A value is a pure function of (key, counter), so a shard of a tensor draws
// exactly the numbers the full tensor would: parameters are initialised from
// (seed, parameter name, global element index), batches from (seed, step, j).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace pentad {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(M0) * ctr[0];
    const uint64_t p1 = uint64_t(M1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1],
           uint32_t(p0)};
    key[0] += W0;
    key[1] += W1;
  }
  return ctr;
}

// 64-bit FNV-1a: turns a parameter name into part of the key.
constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= uint8_t(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Keyed stream: value i of stream (seed, stream_id).
struct CounterRng {
  uint64_t seed;
  uint64_t stream;

  std::array<uint32_t, 4> raw(uint64_t i) const {
    const uint64_t k = seed ^ (stream * 0x9E3779B97F4A7C15ull);
    return philox4x32({uint32_t(i), uint32_t(i >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                      {uint32_t(k), uint32_t(k >> 32)});
  }
  uint64_t u64(uint64_t i) const {
    const auto r = raw(i);
    return (uint64_t(r[0]) << 32) | r[1];
  }
  // Standard normal by Box-Muller on two 32-bit uniforms in (0, 1].
  double normal(uint64_t i) const {
    const auto r = raw(i);
    const double u1 = (double(r[0]) + 1.0) / 4294967296.0;
    const double u2 = double(r[1]) / 4294967296.0;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

}  // namespace pentad
