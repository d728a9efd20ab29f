// CPU backend construction and memory: 64-byte aligned, zero-filled host
// blocks (the block map and per-category tracking live in the Backend base,
// src/backend/backend.cpp).
// Thread counts: OpenMP and OpenBLAS (OpenMP flavour) share one setting.
#include <omp.h>

#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <new>

#include "cpu.hpp"
#include "cpu_backend.hpp"
#include "core/error.hpp"

namespace pentad {

CpuBackend::CpuBackend(int threads) {
  if (threads > 0) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
  }
}

CpuBackend::~CpuBackend() {
  release_all_blocks([](void* p) { std::free(p); });
}

void* CpuBackend::device_alloc(size_t n_bytes, Mem) {
  // aligned_alloc needs a size that is a multiple of the alignment; a zero
  // request still returns a distinct pointer so free_bytes can find it.
  const size_t padded = (n_bytes + 63) / 64 * 64 + (n_bytes == 0 ? 64 : 0);
  void* p = std::aligned_alloc(64, padded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, padded);
  return p;
}

void CpuBackend::device_free(void* p) { std::free(p); }

void CpuBackend::synchronize() {}

void CpuBackend::copy_bytes(void* dst, const void* src, size_t n_bytes) {
  weights_written(dst, n_bytes);
  if (n_bytes > 0) std::memmove(dst, src, n_bytes);
}
void CpuBackend::to_host(void* host, const void* dev, size_t n_bytes) {
  if (n_bytes > 0) std::memcpy(host, dev, n_bytes);
}
void CpuBackend::from_host(void* dev, const void* host, size_t n_bytes) {
  weights_written(dev, n_bytes);
  if (n_bytes > 0) std::memcpy(dev, host, n_bytes);
}

void CpuBackend::fill(float* p, float value, size_t n) {
  weights_written(p, n * sizeof(float));
#pragma omp parallel for simd schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; ++i) p[i] = value;
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace pentad
