/* gemm.c - float64 reference for C = alpha op(A) op(B) + beta C. */
#include "ref.h"

void ref_gemm(int ta, int tb, size_t m, size_t n, size_t k, double alpha,
              const float *A, size_t lda, const float *B, size_t ldb,
              double beta, const float *C_in, size_t ldc, double *C) {
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      double s = 0.0;
      for (size_t p = 0; p < k; p++) {
        double a = ta ? A[p * lda + i] : A[i * lda + p];
        double b = tb ? B[j * ldb + p] : B[p * ldb + j];
        s += a * b;
      }
      double c = alpha * s;
      if (beta != 0.0) c += beta * (double)C_in[i * ldc + j];
      C[i * ldc + j] = c;
    }
}
