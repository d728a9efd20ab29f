// Dense matrix products through OpenBLAS cblas_sgemm (row-major). The batched
// form runs one single-threaded sgemm per matrix inside an OpenMP loop when
// there are enough matrices to occupy the team, else threaded sgemms in turn.
#include <omp.h>

#include <cblas.h>

#include "cpu_backend.hpp"

namespace pentad {

void CpuBackend::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                      const float* A, int lda, const float* B, int ldb, float beta, float* C,
                      int ldc) {
  if (M <= 0 || N <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void CpuBackend::gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                              const float* A, int lda, long stride_a, const float* B, int ldb,
                              long stride_b, float beta, float* C, int ldc, long stride_c,
                              int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if (batch >= omp_get_max_threads() && batch > 1) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < batch; ++i)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b,
                  ldb, beta, C + i * stride_c, ldc);
  } else {
    for (int i = 0; i < batch; ++i)
      cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b,
                  ldb, beta, C + i * stride_c, ldc);
  }
}

}  // namespace pentad
