// linear_fwd (ops.def): a linear layer's GEMM with its bias, and GPT-2's
// GELU, in the epilogue of one cuBLASLt matmul, instead of a GEMM and one or
// two elementwise passes over the (N, n_out) output. The call's shape, the
// epilogue and when it cannot be used: linear_epilogue_plan (gemm_args.hpp,
// checked on the host by tests/unit/test_cuda_gemm_args.cpp). Precision as
// gemm.cu: fp32 operands with CUBLAS_COMPUTE_32F (no TF32), or bf16
// operands (the weight copy in place, else converted) with fp32
// accumulation; D, the bias and the GELU input stay fp32. Where the plan
// says no, or cuBLASLt offers no algorithm or refuses the call (reported
// once), the separate ops run: gemm, bias_add, gelu_fwd. A bf16 run's GELU
// reads its input rounded to bf16 (ops.def), so there the epilogue has the
// bias only and gelu_fwd follows.
// linear_bwd_input_gelu (ops.def), GPT-2's MLP backward: the down
// projection's input-gradient GEMM with the GELU's gradient in its epilogue
// (DGELU, the GELU's input as the auxiliary matrix it reads;
// linear_bwd_gelu_plan), so dL/d(GELU output) is never written and read
// back; else gemm then gelu_bwd in place. In a bf16 run only with the GELU
// input held in bf16 (train.bf16_activations; the auxiliary matrix's type
// set to bf16 beside the fp32 D, which cuBLASLt may refuse), as the
// epilogue cannot round an fp32 one.
#include <cstdint>
#include <cstdio>
#include <string>

#include "cuda_backend.hpp"

namespace pentad {

namespace {

constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;  // cuBLASLt's recommendation for Hopper

// The largest power of two up to 256 that divides the address: the
// alignment the heuristic may assume of a matrix.
uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

// The descriptors of one call, destroyed on every way out.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

cublasLtEpilogue_t to_cublaslt(LinearEpilogue e) {
  switch (e) {
    case LinearEpilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case LinearEpilogue::gelu_aux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case LinearEpilogue::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LinearEpilogue::dgelu: return CUBLASLT_EPILOGUE_DGELU;
    case LinearEpilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

void CudaBackend::linear_fwd(float* y, const float* x, const float* w, const float* bias, int N, int n_out,
                             int n_in, float beta, float* act_out) {
  if (N <= 0 || n_out <= 0) return;
  if (act_out && compute_dtype_ == Dtype::bf16) {
    // A bf16 run's GELU reads its input rounded to bf16 (ops.def), which
    // the epilogue's GELU does not. So the bias alone in the epilogue, then
    // gelu_fwd, which rounds its input and writes a held output as bf16.
    linear_fwd(y, x, w, bias, N, n_out, n_in, beta, nullptr);
    gelu_fwd(act_out, y, size_t(N) * size_t(n_out));
    return;
  }
  const LinearEpiloguePlan plan = linear_epilogue_plan(N, n_out, n_in, bias != nullptr, act_out != nullptr, beta);
  if (plan.fused && n_in > 0 && lt_linear(plan, y, x, w, bias, beta, act_out)) {
    ++epilogues_fused_;
    return;
  }
  if (plan.epilogue != LinearEpilogue::none) ++epilogues_unfused_;
  gemm(false, true, N, n_out, n_in, 1.0f, x, n_in, w, n_in, beta, y, n_out);
  if (bias) bias_add(y, bias, N, n_out);
  if (act_out) gelu_fwd(act_out, y, size_t(N) * size_t(n_out));
}

void CudaBackend::linear_bwd_input_gelu(float* dx, const float* dy, const float* w, const float* gelu_in, int N,
                                        int n_out, int n_in) {
  if (N <= 0 || n_in <= 0) return;
  const LinearEpiloguePlan plan = linear_bwd_gelu_plan(N, n_out, n_in);
  // A bf16 run's GELU gradient reads its input rounded to bf16 (ops.def):
  // the epilogue reads a held (bf16) input as it is, an fp32 one unrounded,
  // so that one takes the separate ops.
  const bool aux_bf16 = held_in_gemm_form(gelu_in);
  if (plan.fused && n_out > 0 && (compute_dtype_ == Dtype::fp32 || aux_bf16)) {
    // Stored row-major: w (n_out rows, n_in columns), dy (N rows, n_out columns).
    LtCall c = lt_operands(plan, w, n_out, n_in, dy, N, n_out);
    c.y = dx;
    c.aux_in = gelu_in;
    c.aux_bf16 = aux_bf16;
    if (lt_matmul(c)) {
      ++epilogues_fused_;
      return;
    }
  }
  ++epilogues_unfused_;
  linear_bwd_input_gelu_unfused(*this, dx, dy, w, gelu_in, N, n_out, n_in);
}

CudaBackend::LtCall CudaBackend::lt_operands(const LinearEpiloguePlan& plan, const float* w, int w_rows,
                                             int w_cols, const float* a, int a_rows, int a_cols) {
  LtCall c;
  c.plan = &plan;
  c.first = w;
  c.second = a;
  c.ld_first = plan.gemm.ld_first;
  c.ld_second = plan.gemm.ld_second;
  if (compute_dtype_ == Dtype::bf16) {  // in gemm's slots: pentad's A in 0, B (the weight) in 1
    long s_first = 0, s_second = 0;
    c.first = bf16_gemm_operand(w, w_rows, w_cols, c.ld_first, s_first, 1, 1);
    c.second = bf16_gemm_operand(a, a_rows, a_cols, c.ld_second, s_second, 1, 0);
    c.bf16 = true;
  }
  return c;
}

bool CudaBackend::lt_linear(const LinearEpiloguePlan& plan, float* y, const float* x, const float* w,
                            const float* bias, float beta, float* act_out) {
  const ColumnMajorGemm& g = plan.gemm;
  // Stored row-major: w (n_out = g.m rows, n_in = g.k columns), x (N = g.n rows, n_in columns).
  LtCall c = lt_operands(plan, w, g.m, g.k, x, g.n, g.k);
  c.y = y;
  c.bias = bias;
  c.act_out = act_out;
  c.beta = beta;
  return lt_matmul(c);
}

bool CudaBackend::lt_matmul(const LtCall& c) {
  const LinearEpiloguePlan& plan = *c.plan;
  const ColumnMajorGemm& g = plan.gemm;
  const void* first = c.first;
  const void* second = c.second;
  const int ld_first = c.ld_first, ld_second = c.ld_second;
  const cudaDataType_t type = c.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  float* y = c.y;
  const float* bias = c.bias;
  float* act_out = c.act_out;
  const float beta = c.beta;
  // With the GELU, D is act_out and C is not read (beta = 0); without, C = D = y.
  float* D = act_out ? act_out : y;
  const float* C = act_out ? act_out : y;
  LtDescs d;
  auto ok = [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; };
  const cublasOperation_t op_first = g.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = to_cublaslt(plan.epilogue);
  bool built = ok(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
               ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first)) &&
               ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second)) &&
               ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  if (built && bias)
    built = ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  if (built && bias && c.batch > 1)
    built = ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &c.stride_bias,
                                              sizeof c.stride_bias));
  if (built && (act_out || c.aux_in)) {  // GELU_AUX writes y there, DGELU reads the GELU's input
    void* aux = act_out ? static_cast<void*>(y) : const_cast<float*>(c.aux_in);
    const int64_t aux_ld = plan.aux_ld;
    built = ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux)) &&
            ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    if (built && c.aux_bf16) {  // a held GELU input: bf16 beside the fp32 D (cuBLASLt may refuse: separate ops)
      const int32_t aux_type = CUDA_R_16BF;
      built = ok(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type,
                                                sizeof aux_type));
    }
  }
  // Column-major layouts as stored: op(first) is (m, k), op(second) (k, n), C and D (m, n).
  built = built &&
          ok(cublasLtMatrixLayoutCreate(&d.a, type, g.trans_first ? g.k : g.m, g.trans_first ? g.m : g.k,
                                        ld_first)) &&
          ok(cublasLtMatrixLayoutCreate(&d.b, type, g.trans_second ? g.n : g.k, g.trans_second ? g.k : g.n,
                                        ld_second)) &&
          ok(cublasLtMatrixLayoutCreate(&d.c, CUDA_R_32F, g.m, g.n, g.ldc)) &&
          ok(cublasLtMatrixLayoutCreate(&d.d, CUDA_R_32F, g.m, g.n, g.ldc));
  if (built && c.batch > 1) {  // strided batch: x shared (stride 0), the rest the run's strides apart
    const int32_t count = c.batch;
    const int64_t strides[4] = {c.stride_first, c.stride_second, c.stride_y, c.stride_y};
    const cublasLtMatrixLayout_t layouts[4] = {d.a, d.b, d.c, d.d};
    for (int i = 0; i < 4 && built; ++i)
      built = ok(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                  sizeof count)) &&
              ok(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &strides[i], sizeof strides[i]));
  }
  void* workspace = scratch(7, kLtWorkspaceBytes);
  const uint64_t ws_bytes = kLtWorkspaceBytes;
  const uint32_t al_a = alignment_of(first), al_b = alignment_of(second), al_c = alignment_of(C),
                 al_d = alignment_of(D);
  built = built && ok(cublasLtMatmulPreferenceCreate(&d.pref)) &&
          ok(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                  sizeof ws_bytes)) &&
          ok(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                                  sizeof al_a)) &&
          ok(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                                  sizeof al_b)) &&
          ok(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c,
                                                  sizeof al_c)) &&
          ok(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d,
                                                  sizeof al_d));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_NOT_SUPPORTED;
  if (built) {
    status = cublasLtMatmulAlgoGetHeuristic(lt_, d.op, d.a, d.b, d.c, d.d, d.pref, 1, &heuristic, &found);
    if (ok(status) && found > 0) {
      const float alpha = 1.0f;
      status = cublasLtMatmul(lt_, d.op, &alpha, first, d.a, second, d.b, &beta, C, d.c, D, d.d, &heuristic.algo,
                              workspace, kLtWorkspaceBytes, stream_);
      if (ok(status)) return true;
    }
  }
  if (!lt_refusal_reported_) {  // once per backend: the run goes on with the separate ops
    lt_refusal_reported_ = true;
    std::fprintf(stderr,
                 "warning: cuBLASLt epilogue not used for a linear layer (m %d, n %d, k %d, batch %d, epilogue %d): "
                 "%s; running the GEMM and its bias and GELU (or GELU gradient) as separate ops\n",
                 g.m, g.n, g.k, c.batch, int(epilogue),
                 !built ? "descriptor setup failed"
                 : found == 0 && ok(status) ? "no algorithm offered"
                                            : cublas_error_string(status));
  }
  return false;
}

}  // namespace pentad
