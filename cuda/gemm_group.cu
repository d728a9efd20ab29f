// The grouped linear ops (ops.def: linear_fwd_group, linear_bwd_input_group,
// linear_bwd_weight_group): Q, K and V (and Llama's gate and up) on one
// input, as few matrix products as their layout allows, instead of one
// product per layer each converting the shared operand again.
// - Forward: x in the compute type once; each run of parts with one shape,
//   evenly spaced (linear_group_runs, gemm_args.hpp) is one strided-batched
//   cuBLASLt matmul, x shared through stride 0, the biases in the epilogue
//   (their batch stride). GPT-2 and Llama without grouped-query heads: one
//   matmul; with them: two (Q; K and V).
// - Backward in bf16, when the weights (input gradient) or the weight
//   gradients (weight gradient) lie one after another (parts_stacked): the
//   parts' output gradients packed side by side into one bf16 (N, sum n_out)
//   operand, and one GEMM against the stacked (sum n_out, n_in) matrix: the
//   input gradient's sum over the parts runs inside the GEMM's fp32
//   accumulation. The bias gradients stay bias_bwd's, from the fp32 values.
// Elsewhere (fp32 backward, parts not adjacent, cuBLASLt refusing) each part
// runs alone, as the CPU does (linear_*_each, backend.hpp).
#include <cuda_bf16.h>

#include "cuda_backend.hpp"

namespace pentad {

using cuda_detail::LaunchConfig;
using cuda_detail::to_dim3;

namespace {

constexpr int kMaxPackParts = 4;

struct PackArgs {
  const float* src[kMaxPackParts];
  int cols[kMaxPackParts];
  int width;  // the sum of cols
};

// dst (N, width) bf16: row r is the parts' rows r side by side.
__global__ void pack_bf16_kernel(__nv_bfloat16* dst, PackArgs a, int N) {
  const size_t total = size_t(N) * size_t(a.width);
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total; e += size_t(gridDim.x) * blockDim.x) {
    const size_t r = e / size_t(a.width);
    int c = int(e % size_t(a.width)), p = 0;
    while (c >= a.cols[p]) c -= a.cols[p++];
    dst[e] = __float2bfloat16_rn(a.src[p][r * size_t(a.cols[p]) + size_t(c)]);
  }
}

int total_width(const LinearGradPart* parts, int n) {
  int w = 0;
  for (int i = 0; i < n; ++i) w += parts[i].n_out;
  return w;
}

}  // namespace

bool CudaBackend::pack_bf16(void* dst, const LinearGradPart* parts, int n, int N) {
  if (n > kMaxPackParts) return false;
  PackArgs a{};
  for (int i = 0; i < n; ++i) {
    if (parts[i].n_out <= 0) return false;
    a.src[i] = parts[i].dy;
    a.cols[i] = parts[i].n_out;
    a.width += parts[i].n_out;
  }
  const LaunchConfig l = cuda_detail::bf16_convert_launch(size_t(N) * size_t(a.width));
  pack_bf16_kernel<<<to_dim3(l.grid), to_dim3(l.block), l.smem_bytes, stream_>>>(
      static_cast<__nv_bfloat16*>(dst), a, N);
  CUDA_LAUNCH_CHECK();
  return true;
}

void CudaBackend::linear_fwd_group(const LinearPart* parts, int n, const float* x, int N, int n_in) {
  if (n <= 0 || N <= 0) return;
  if (n_in <= 0) {
    linear_fwd_each(*this, parts, n, x, N, n_in);
    return;
  }
  const bool bf16 = compute_dtype_ == Dtype::bf16;
  const void* xc = x;  // x in the compute type, read by every run
  int ld_x = n_in;
  if (bf16) {
    long stride = 0;
    xc = bf16_gemm_operand(x, N, n_in, ld_x, stride, 1, 0);
  }
  const std::vector<LinearRun> runs = linear_group_runs(parts, n, N, n_in);
  bool all_batched = true;
  for (const LinearRun& r : runs) {
    const LinearPart& p = parts[r.first];
    if (p.n_out <= 0) continue;
    const LinearEpiloguePlan plan = linear_epilogue_plan(N, p.n_out, n_in, p.bias != nullptr, false, 0.0f);
    LtCall c;
    c.plan = &plan;
    c.first = p.w;
    c.ld_first = plan.gemm.ld_first;
    c.stride_first = r.stride_w;
    if (bf16) {  // the weight copy in place (with its strides), else converted densely
      int ld = c.ld_first;
      long stride = c.stride_first;
      c.first = bf16_gemm_operand(p.w, p.n_out, n_in, ld, stride, r.count, 1);
      c.ld_first = ld;
      c.stride_first = stride;
    }
    c.second = xc;
    c.ld_second = ld_x;
    c.stride_second = 0;  // x shared by every matrix of the batch
    c.y = p.y;
    c.stride_y = r.stride_y;
    c.bias = p.bias;
    c.stride_bias = r.stride_bias;
    c.batch = r.count;
    c.bf16 = bf16;
    if (lt_matmul(c)) {
      if (p.bias) epilogues_fused_ += size_t(r.count);
      continue;
    }
    // cuBLASLt refused (reported once by lt_matmul): the run's parts one by one.
    all_batched = false;
    for (int i = r.first; i < r.first + r.count; ++i)
      linear_fwd(parts[i].y, x, parts[i].w, parts[i].bias, N, parts[i].n_out, n_in, 0.0f, nullptr);
  }
  if (all_batched && runs.size() < size_t(n)) ++linear_groups_batched_;
}

void CudaBackend::linear_bwd_input_group(float* dx, const LinearGradPart* parts, int n, int N, int n_in,
                                         float beta) {
  const int width = total_width(parts, n);
  if (compute_dtype_ == Dtype::bf16 && n > 1 && N > 0 && n_in > 0 &&
      parts_stacked(parts, n, n_in, [](const LinearGradPart& p) { return p.w; })) {
    void* packed = scratch(0, size_t(N) * size_t(width) * sizeof(__nv_bfloat16));
    if (pack_bf16(packed, parts, n, N)) {
      // dx (N, n_in) = packed (N, width) W (width, n_in) + beta dx, W the stacked weights (copy in place).
      int ld_w = n_in;
      long stride_w = 0;
      const void* w = bf16_gemm_operand(parts[0].w, width, n_in, ld_w, stride_w, 1, 1);
      const ColumnMajorGemm g = column_major_gemm(false, false, N, n_in, width, width, 0, ld_w, 0, n_in, 0, 1);
      cublas_gemm(g, packed, w, true, 1.0f, beta, dx);
      ++linear_groups_batched_;
      return;
    }
  }
  linear_bwd_input_each(*this, dx, parts, n, N, n_in, beta);
}

void CudaBackend::linear_bwd_weight_group(const LinearGradPart* parts, int n, const float* x, int N, int n_in) {
  const int width = total_width(parts, n);
  if (compute_dtype_ == Dtype::bf16 && n > 1 && N > 0 && n_in > 0 &&
      parts_stacked(parts, n, n_in, [](const LinearGradPart& p) { return static_cast<const float*>(p.dw); })) {
    void* packed = scratch(0, size_t(N) * size_t(width) * sizeof(__nv_bfloat16));
    if (pack_bf16(packed, parts, n, N)) {
      // dW (width, n_in) += packed^T (width, N) x (N, n_in), dW the stacked weight gradients.
      int ld_x = n_in;
      long stride_x = 0;
      const void* xc = bf16_gemm_operand(x, N, n_in, ld_x, stride_x, 1, 1);
      const ColumnMajorGemm g = column_major_gemm(true, false, width, n_in, N, width, 0, ld_x, 0, n_in, 0, 1);
      cublas_gemm(g, packed, xc, true, 1.0f, 1.0f, parts[0].dw);
      for (int i = 0; i < n; ++i)
        if (parts[i].dbias) bias_bwd(parts[i].dbias, parts[i].dy, N, parts[i].n_out);
      ++linear_groups_batched_;
      return;
    }
  }
  linear_bwd_weight_each(*this, parts, n, x, N, n_in);
}

}  // namespace pentad
