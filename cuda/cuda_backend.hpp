// CUDA backend: cuBLAS for the matrix products, own kernels for everything
// else, all on one compute stream of the device this rank owns. Reductions
// have a fixed order (no atomics), so results repeat run to run. One file per
// op family, the same basenames as cpu/. Every CUDA, cuBLAS and NCCL call goes
// through a check macro below that names the call, file:line and the error.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "attention_tc_plan.hpp"
#include "gemm_args.hpp"
#include "launch.hpp"

namespace pentad {

// A failed device call: names the call, the device and the error, then the
// local fatal path (rank, host, file:line, MPI_Abort).
[[noreturn]] void cuda_fail(const char* file, int line, const char* call, const char* lib,
                            const std::string& error);
const char* cublas_error_string(cublasStatus_t s);

}  // namespace pentad

#define CUDA_CHECK(call)                                                               \
  do {                                                                                 \
    const cudaError_t cuda_rc_ = (call);                                               \
    if (cuda_rc_ != cudaSuccess)                                                       \
      ::pentad::cuda_fail(__FILE__, __LINE__, #call, "CUDA", cudaGetErrorString(cuda_rc_)); \
  } while (0)

// After every kernel launch: launch-configuration errors surface here.
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                             \
  do {                                                                                 \
    const cublasStatus_t cublas_rc_ = (call);                                          \
    if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::pentad::cuda_fail(__FILE__, __LINE__, #call, "cuBLAS",                         \
                          ::pentad::cublas_error_string(cublas_rc_));                  \
  } while (0)

namespace pentad {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  bool supports(Op op) const override { return implements_op<CudaBackend>(op); }
  std::optional<DeviceMemory> device_memory() const override;
  bool attention_bwd_reads_probs() const override { return false; }  // attention_bwd recomputes them
  size_t weight_copy_elem_bytes() const override { return 2; }        // __nv_bfloat16
  size_t epilogues_fused() const override { return epilogues_fused_; }
  size_t epilogues_unfused() const override { return epilogues_unfused_; }
  size_t attention_fused() const override { return attention_fused_; }
  size_t linear_groups_batched() const override { return linear_groups_batched_; }
  // Whether attention in bf16 takes the fused kernels (attention_flash.cu)
  // where they are built for the head dimension (the forward only when no
  // probabilities are asked for); on unless PENTAD_CUDA_ATTENTION=tc,
  // which keeps attention_tc.cu's.
  void set_fused_attention(bool on) { fused_attention_ = on; }

  // Every required op of ops.def; attention_merge uses the host fallback.
#define PENTAD_OP(ret, name, params) ret name params override;
#define PENTAD_OP_HOST_FALLBACK(ret, name, params)
#include "backend/ops.def"

 protected:
  void* device_alloc(size_t n_bytes, Mem category) override;
  void device_free(void* p) override;

 private:
  // A device scratch block that only grows (tracked as Mem::scratch).
  void* scratch(int slot, size_t n_bytes);
  // out (C) += the sum over slabs of partial (slabs, C), in slab order: the
  // second pass of the column sums (elementwise.cu).
  void add_column_partials(float* out, const float* partial, int slabs, int C);
  // dw (+ db when non-null) += the norm's weight (and bias) gradient column
  // sums, rows cut into slabs as bias_bwd's (norm.cu).
  void norm_weight_grads(float* dw, float* db, const float* dout, const float* x, const float* mean,
                         const float* rstd, int N, int C);
  // Attention on the tensor cores for train.dtype = bf16 (attention_tc.cu):
  // attention_fwd / attention_bwd with delta (B, H, Tq) already computed.
  // in_bf16: q, k, v are held in GEMM form (bf16 values).
  void attention_tc_fwd(float* out, float* lse, float* probs, const float* q, const float* k, const float* v,
                        const cuda_detail::AttnTcDims& d, int q_offset, int k_offset, bool causal, bool in_bf16);
  void attention_tc_bwd(float* dq, float* dk, float* dv, const float* dout, const float* lse, const float* delta,
                        const float* q, const float* k, const float* v, const cuda_detail::AttnTcDims& d,
                        int q_offset, int k_offset, bool causal, bool in_bf16);
  void attn_tc_round(void* dst_bf16, const float* src, size_t n);
  // attention_fwd through the fused kernel (attention_flash.cu); false when
  // it is off or not built for D, or out and q, k, v are not both held or
  // both fp32 (the caller then runs attention_tc_fwd). out_bf16: out is
  // held in GEMM form (bf16 values); in_bf16: q, k, v are.
  bool attention_flash_fwd(float* out, float* lse, const float* q, const float* k, const float* v, int B, int Tq,
                           int Tk, int H, int Hkv, int D, int q_offset, int k_offset, bool causal, bool out_bf16,
                           bool in_bf16);
  // attention_bwd's fused kernels, delta computed; false likewise.
  bool attention_flash_bwd(float* dq, float* dk, float* dv, const float* dout, const float* lse, const float* delta,
                           const float* q, const float* k, const float* v, int B, int Tq, int Tk, int H, int Hkv,
                           int D, int q_offset, int k_offset, bool causal, bool in_bf16);
  static bool fused_attention_default();  // PENTAD_CUDA_ATTENTION
  // Are SwiGLU's gate and up held in GEMM form (both; one alone stops the
  // run)? (activation.cu)
  bool glu_inputs_held(const float* gate, const float* up);
  // One GEMM operand (stored rows x cols, leading dimension ld, `batch`
  // matrices `stride` apart) in bf16: its weight copy in place, or converted
  // densely into scratch slot `slot` (ld and stride then become the dense
  // ones) (gemm.cu).
  const void* bf16_gemm_operand(const float* p, int rows, int cols, int& ld, long& stride, int batch, int slot);
  // linear_fwd through one cuBLASLt matmul with the plan's epilogue; false
  // when cuBLASLt offers no algorithm or refuses the call (gemm_lt.cu).
  bool lt_linear(const LinearEpiloguePlan& plan, float* y, const float* x, const float* w, const float* bias,
                 float beta, float* act_out);
  // One cuBLASLt matmul with operands already in the compute type: the plan's
  // shape and epilogue over `batch` matrices (x's stride 0 shares it), the
  // weights, outputs and biases their strides apart (gemm_lt.cu).
  struct LtCall {
    const LinearEpiloguePlan* plan = nullptr;
    const void* first = nullptr;   // w
    const void* second = nullptr;  // x
    int ld_first = 0, ld_second = 0;
    long stride_first = 0, stride_second = 0, stride_y = 0, stride_bias = 0;
    float* y = nullptr;
    const float* bias = nullptr;
    float* act_out = nullptr;
    const float* aux_in = nullptr;  // dgelu: the GELU's input, read by the epilogue (ld plan->aux_ld)
    bool aux_bf16 = false;          // aux_in is held in GEMM form: bf16 values
    float beta = 0.0f;
    int batch = 1;
    bool bf16 = false;
  };
  bool lt_matmul(const LtCall& c);
  // An LtCall's operands for one matmul of the plan: the weight w (w_rows x
  // w_cols, row-major) as cuBLAS's first, pentad's A operand a as its second,
  // converted to bf16 (the weight from its copy) when the compute type is.
  LtCall lt_operands(const LinearEpiloguePlan& plan, const float* w, int w_rows, int w_cols, const float* a,
                     int a_rows, int a_cols);
  // The cuBLAS call of gemm_batched with operands already in the compute
  // type (gemm.cu).
  void cublas_gemm(const ColumnMajorGemm& g, const void* a, const void* b, bool bf16, float alpha, float beta,
                   float* C);
  // dst (N, sum of the parts' n_out) bf16 <- the parts' dy side by side
  // (gemm_group.cu); false for more parts than the kernel takes.
  bool pack_bf16(void* dst, const LinearGradPart* parts, int n, int N);
  // The bf16 q, k, v the products read and the workspace (attention_tc.cu).
  struct AttnTcOperands {
    char* ws;
    const void *q, *k, *v;
  };
  AttnTcOperands attn_tc_prepare(const cuda_detail::AttnTcWorkspace& w, const float* q, const float* k,
                                 const float* v, const cuda_detail::AttnTcDims& d, bool in_bf16);
  void attn_tc_product(cuda_detail::AttnTcProduct p, const cuda_detail::AttnTcDims& d, int g, int i0, int rows,
                       int kend, const void* A, const void* B, float* C, float alpha, float beta);

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  size_t epilogues_fused_ = 0, epilogues_unfused_ = 0;
  bool fused_attention_ = fused_attention_default();
  size_t attention_fused_ = 0;
  size_t linear_groups_batched_ = 0;
  bool lt_refusal_reported_ = false;
  // 0,1: bf16 gemm operands; 2: reductions; 3: attention; 4: column-sum
  // partials; 5: the tensor-core attention's workspace; 6: its pointer
  // arrays; 7: cuBLASLt's workspace; 8: the tensor-core attention's fp32
  // output when out is held in bf16
  static constexpr int kScratchSlots = 9;
  void* scratch_[kScratchSlots] = {};
  size_t scratch_bytes_[kScratchSlots] = {};
  double* host_sum_ = nullptr;  // pinned result of sum_squares
};

namespace cuda_detail {
// A launch dimension of launch.hpp as the runtime takes it.
inline dim3 to_dim3(Dim3 d) { return dim3(unsigned(d.x), unsigned(d.y), unsigned(d.z)); }
}  // namespace cuda_detail

}  // namespace pentad
