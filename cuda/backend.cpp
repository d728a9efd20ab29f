// CUDA backend construction, device selection and memory: cudaMalloc'd
// blocks zero-filled on the compute stream (the block map and per-category
// accounting live in the Backend base, src/backend/backend.cpp), host copies
// synchronised so the host buffer may be reused at once.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <new>

#include "cuda.hpp"
#include "cuda_backend.hpp"

namespace pentad {

const char* cublas_error_string(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED (no usable GPU?)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

void cuda_fail(const char* file, int line, const char* call, const char* lib,
               const std::string& error) {
  int dev = -1;
  cudaGetDevice(&dev);  // unchecked: we are already failing
  fatal_at(file, line, std::string(lib) + " call " + call + " failed on device " +
                           std::to_string(dev) + ": " + error);
}

bool cuda_device_available(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n == 0) {
    if (why)
      *why = rc != cudaSuccess ? std::string("no usable GPU: cudaGetDeviceCount: ") + cudaGetErrorString(rc)
                               : std::string("no GPU visible (cudaGetDeviceCount = 0)");
    cudaGetLastError();  // clear the sticky-free error state
    return false;
  }
  return true;
}

CudaBackend::CudaBackend(int device) : device_(device) {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // fp32 GEMMs stay true fp32 (no TF32): the CPU parity tests rely on it.
  CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  CUBLAS_CHECK(cublasLtCreate(&lt_));  // linear_fwd's epilogues (gemm_lt.cu)
  CUDA_CHECK(cudaMallocHost(&host_sum_, sizeof(double)));
}

CudaBackend::~CudaBackend() {
  // Destructors do not abort: report and go on.
  cudaStreamSynchronize(stream_);
  release_all_blocks([](void* p) { cudaFree(p); });
  for (void* p : scratch_)
    if (p) cudaFree(p);
  if (host_sum_) cudaFreeHost(host_sum_);
  if (lt_) cublasLtDestroy(lt_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaBackend::device_alloc(size_t n_bytes, Mem category) {
  // A zero request still returns a distinct pointer so free_bytes can find it.
  const size_t padded = (n_bytes + 255) / 256 * 256 + (n_bytes == 0 ? 256 : 0);
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, padded);
  if (rc == cudaErrorMemoryAllocation) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_b, &total_b);
    PENTAD_FATAL("cudaMalloc of " + std::to_string(padded) + " bytes (" + mem_name(category) +
                 ") failed on device " + std::to_string(device_) + ": out of memory (" +
                 std::to_string(free_b >> 20) + " of " + std::to_string(total_b >> 20) +
                 " MiB free)");
  }
  CUDA_CHECK(rc);
  CUDA_CHECK(cudaMemsetAsync(p, 0, padded, stream_));
  return p;
}

std::optional<DeviceMemory> CudaBackend::device_memory() const {
  DeviceMemory m;
  m.device = device_;
  CUDA_CHECK(cudaSetDevice(device_));  // cudaMemGetInfo reports the calling thread's device
  CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

// cudaFree waits for the device, so kernels still reading p have finished.
void CudaBackend::device_free(void* p) { CUDA_CHECK(cudaFree(p)); }

void* CudaBackend::scratch(int slot, size_t n_bytes) {
  if (n_bytes > scratch_bytes_[slot]) {
    if (scratch_[slot]) {
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      CUDA_CHECK(cudaFree(scratch_[slot]));
      track_free(scratch_bytes_[slot], Mem::scratch);
    }
    const size_t grown = std::max(n_bytes, scratch_bytes_[slot] * 3 / 2);
    CUDA_CHECK(cudaMalloc(&scratch_[slot], grown));
    scratch_bytes_[slot] = grown;
    track_alloc(grown, Mem::scratch);
  }
  return scratch_[slot];
}

void CudaBackend::copy_bytes(void* dst, const void* src, size_t n_bytes) {
  weights_written(dst, n_bytes);
  if (n_bytes > 0) CUDA_CHECK(cudaMemcpyAsync(dst, src, n_bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::to_host(void* host, const void* dev, size_t n_bytes) {
  if (n_bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host, dev, n_bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::from_host(void* dev, const void* host, size_t n_bytes) {
  weights_written(dev, n_bytes);
  if (n_bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dev, host, n_bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::unique_ptr<Backend> make_cuda_backend(int local_rank) {
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  if (n <= 0) PENTAD_FATAL("backend = cuda: no GPU visible on this node");
  return std::make_unique<CudaBackend>(local_rank % n);
}

bool set_cuda_fused_attention(Backend& be, bool on) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  if (cuda) cuda->set_fused_attention(on);
  return cuda != nullptr;
}

}  // namespace pentad
