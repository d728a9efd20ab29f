// Context-parallel row layouts for tests, written independently of
// CpSplit (src/context_parallel.hpp), so they can check it.
#pragma once

#include <algorithm>
#include <vector>

namespace pentad::test {

// Global start of chunk c of rank r.
inline int start_of(bool zigzag, int T, int cp, int r, int c) {
  if (!zigzag) return r * (T / cp);
  const int m = T / (2 * cp);
  return (c == 0 ? r : 2 * cp - 1 - r) * m;
}

// Rows (B, T, W) -> rank r's chunk-major rows (nc, B, m, W).
inline std::vector<float> slice_rows(const std::vector<float>& g, bool zigzag, int B, int T, int W, int cp, int r) {
  const int nc = zigzag ? 2 : 1, m = T / (cp * nc);
  std::vector<float> out(size_t(nc) * B * m * W);
  for (int c = 0; c < nc; ++c)
    for (int b = 0; b < B; ++b)
      std::copy_n(g.data() + (size_t(b) * T + start_of(zigzag, T, cp, r, c)) * W, size_t(m) * W,
                  out.data() + (size_t(c) * B + b) * m * W);
  return out;
}

}  // namespace pentad::test
