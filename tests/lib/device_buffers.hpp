// Test helpers: copies between host vectors and backend ("device") memory.
#pragma once

#include <vector>

#include "backend/backend.hpp"

namespace pentad::test {

inline std::vector<float> host_of(Backend& be, const float* dev, size_t n) {
  std::vector<float> h(n);
  be.to_host(h.data(), dev, n * sizeof(float));
  return h;
}

// A scratch allocation holding h; the caller frees it (or lets the backend
// reclaim it at exit).
inline float* dev_of(Backend& be, const std::vector<float>& h) {
  float* d = be.alloc(h.size(), Mem::scratch);
  be.from_host(d, h.data(), h.size() * sizeof(float));
  return d;
}

}  // namespace pentad::test
