// The fused attention for train.dtype = bf16: the algorithms are
// attention_flash.hpp's (shared with their host test); this file is the
// device's executor of them (registers, warp shuffles, mma.sync, shared
// memory) and the launches. attention_fwd takes the forward when no
// probabilities are asked for and the head dimension is one it is built for
// (16 to 128), attention_bwd the backward's two kernels likewise (16 to
// 128); the rest of the bf16 attention runs in attention_tc.cu.
#include <cstdlib>
#include <cstring>

#include "attention_flash.hpp"
#include "cuda_backend.hpp"

namespace pentad {

namespace {

using flash::LaneState;
using flash::Smem;

// The executor of the blocks of attention_flash.hpp on the device: this
// thread's lane, its registers `State`.
template <class State>
struct DeviceWarp {
  int warp, lane;
  State L;

  template <class F>
  __device__ void each(F&& f) { f(lane, L); }

  template <class Acc, class A, class B>
  __device__ void mma(Acc&& acc, A&& a, B&& b) {
    uint32_t af[4], bf[2];
    a(lane, L, af);
    b(lane, L, bf);
    float* c = acc(lane, L);
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(af[0]), "r"(af[1]), "r"(af[2]), "r"(af[3]), "r"(bf[0]), "r"(bf[1]));
  }

  // The four lanes of a group hold the same two rows.
  __device__ void quad_max() {
    for (int r = 0; r < 2; ++r) {
      float x = L.red[r];
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
      L.red[r] = x;
    }
  }
  __device__ void quad_sum() {
    for (int r = 0; r < 2; ++r) {
      float x = L.red[r];
      x += __shfl_xor_sync(0xffffffffu, x, 1);
      x += __shfl_xor_sync(0xffffffffu, x, 2);
      L.red[r] = x;
    }
  }

  template <class F>
  __device__ void block(F&& f) { f(int(threadIdx.x)); }
  __device__ void sync() { __syncthreads(); }
};

// Held: q, k, v and out all held in GEMM form (bf16), as the model holds
// them together (MemoryPlan::holds); else all fp32. The two mixed cases
// are not built (attention_flash_fwd declines them).
template <int D, bool Held>
__global__ void __launch_bounds__(flash::kThreads, 3) flash_fwd_kernel(flash::FwdArgs a) {
  __shared__ Smem<D> sm;
  const int bh = int(blockIdx.y), b = bh / a.H, h = bh % a.H;
  // Blocks of later query rows see more keys: they start first.
  const int q0 = (int(gridDim.x) - 1 - int(blockIdx.x)) * flash::kRows;
  DeviceWarp<LaneState<D>> w{int(threadIdx.x) / 32, int(threadIdx.x) % 32, {}};
  flash::fwd_block<D, Held, Held>(w, sm, a, b, h, q0);
}

template <int D, bool InBf16>
__global__ void __launch_bounds__(flash::kThreads, flash::BwdTiles<D>::dq_blocks_per_sm)
    flash_dq_kernel(flash::BwdArgs a) {
  __shared__ flash::DqSmem<D> sm;
  const int bh = int(blockIdx.y), b = bh / a.H, h = bh % a.H;
  const int q0 = (int(gridDim.x) - 1 - int(blockIdx.x)) * flash::kRows;  // most keys first
  DeviceWarp<flash::DqLane<D>> w{int(threadIdx.x) / 32, int(threadIdx.x) % 32, {}};
  flash::dq_block<D, InBf16>(w, sm, a, b, h, q0);
}

template <int D, bool InBf16>
__global__ void __launch_bounds__(flash::kThreads, flash::BwdTiles<D>::dkv_blocks_per_sm)
    flash_dkv_kernel(flash::BwdArgs a) {
  __shared__ flash::DkvSmem<D> sm;
  const int bh = int(blockIdx.y), b = bh / a.Hkv, hk = bh % a.Hkv;
  const int k0 = int(blockIdx.x) * flash::kKeys;  // earliest keys (most queries) first
  DeviceWarp<flash::DkvLane<D>> w{int(threadIdx.x) / 32, int(threadIdx.x) % 32, {}};
  flash::dkv_block<D, InBf16>(w, sm, a, b, hk, k0);
}

template <int D, bool InBf16>
void launch_bwd_as(const flash::BwdArgs& a, cudaStream_t s) {
  const dim3 grid_q(unsigned(flash::query_blocks(a.Tq)), unsigned(a.B * a.H));
  flash_dq_kernel<D, InBf16><<<grid_q, flash::kThreads, 0, s>>>(a);
  CUDA_LAUNCH_CHECK();
  const dim3 grid_k(unsigned(flash::key_blocks(a.Tk)), unsigned(a.B * a.Hkv));
  flash_dkv_kernel<D, InBf16><<<grid_k, flash::kThreads, 0, s>>>(a);
  CUDA_LAUNCH_CHECK();
}

template <int D>
void launch_bwd(const flash::BwdArgs& a, cudaStream_t s) {
  if (a.in_bf16)
    launch_bwd_as<D, true>(a, s);
  else
    launch_bwd_as<D, false>(a, s);
}

template <int D>
void launch_fwd(const flash::FwdArgs& a, cudaStream_t s) {
  const dim3 grid(unsigned(flash::query_blocks(a.Tq)), unsigned(a.B * a.H));
  if (a.out_bf16)
    flash_fwd_kernel<D, true><<<grid, flash::kThreads, 0, s>>>(a);
  else
    flash_fwd_kernel<D, false><<<grid, flash::kThreads, 0, s>>>(a);
  CUDA_LAUNCH_CHECK();
}

}  // namespace

bool CudaBackend::fused_attention_default() {
  const char* e = std::getenv("PENTAD_CUDA_ATTENTION");
  return !(e && std::strcmp(e, "tc") == 0);
}

bool CudaBackend::attention_flash_fwd(float* out, float* lse, const float* q, const float* k, const float* v,
                                      int B, int Tq, int Tk, int H, int Hkv, int D, int q_offset, int k_offset,
                                      bool causal, bool out_bf16, bool in_bf16) {
  if (!fused_attention_ || !flash::supports_head_dim(D) || out_bf16 != in_bf16) return false;
  const flash::FwdArgs a{out, lse, q, k, v, B, Tq, Tk, H, Hkv, q_offset, k_offset, causal,
                         1.0f / std::sqrt(float(D)), out_bf16, in_bf16};
  switch (D) {
    case 16: launch_fwd<16>(a, stream_); break;
    case 32: launch_fwd<32>(a, stream_); break;
    case 64: launch_fwd<64>(a, stream_); break;
    default: launch_fwd<128>(a, stream_); break;
  }
  ++attention_fused_;
  return true;
}

bool CudaBackend::attention_flash_bwd(float* dq, float* dk, float* dv, const float* dout, const float* lse,
                                      const float* delta, const float* q, const float* k, const float* v, int B,
                                      int Tq, int Tk, int H, int Hkv, int D, int q_offset, int k_offset,
                                      bool causal, bool in_bf16) {
  if (!fused_attention_ || !flash::supports_bwd_head_dim(D)) return false;
  const flash::BwdArgs a{dq, dk, dv, dout, lse, delta, q, k, v, B, Tq, Tk, H, Hkv, q_offset, k_offset, causal,
                         1.0f / std::sqrt(float(D)), in_bf16};
  switch (D) {
    case 16: launch_bwd<16>(a, stream_); break;
    case 32: launch_bwd<32>(a, stream_); break;
    case 64: launch_bwd<64>(a, stream_); break;
    default: launch_bwd<128>(a, stream_); break;
  }
  ++attention_fused_;
  return true;
}

}  // namespace pentad
