/* batchnorm.c - float64 reference for the channel bias ops and batch norm
 * 2d over NCHW tensors [N, C, S] (S = H * W); see rumus.h. */
#include <math.h>

#include "ref.h"

/* Element (n, c, s). */
#define AT(p, n, c, s) ((p)[((n) * C + (c)) * S + (s)])

void ref_channel_bias_add(const float *x, const float *b, size_t N, size_t C,
                          size_t S, double *y) {
  for (size_t n = 0; n < N; n++)
    for (size_t c = 0; c < C; c++)
      for (size_t s = 0; s < S; s++)
        AT(y, n, c, s) = (double)AT(x, n, c, s) + b[c];
}

void ref_channel_bias_grad(const float *dy, size_t N, size_t C, size_t S,
                           double *db) {
  for (size_t c = 0; c < C; c++) {
    double a = 0;
    for (size_t n = 0; n < N; n++)
      for (size_t s = 0; s < S; s++) a += AT(dy, n, c, s);
    db[c] = a;
  }
}

void ref_batchnorm2d_stats(const float *x, size_t N, size_t C, size_t S,
                           double *mean, double *var) {
  const double M = (double)(N * S);
  for (size_t c = 0; c < C; c++) {
    double a = 0, q = 0;
    for (size_t n = 0; n < N; n++)
      for (size_t s = 0; s < S; s++) a += AT(x, n, c, s);
    const double m = a / M;
    for (size_t n = 0; n < N; n++)
      for (size_t s = 0; s < S; s++) {
        const double d = AT(x, n, c, s) - m;
        q += d * d;
      }
    mean[c] = m;
    var[c] = q / M;
  }
}

void ref_batchnorm2d_apply(const float *x, size_t N, size_t C, size_t S,
                           const double *mean, const double *var, double eps,
                           const float *gamma, const float *beta, double *y) {
  for (size_t c = 0; c < C; c++) {
    const double is = 1.0 / sqrt(var[c] + eps);
    const double g = gamma ? gamma[c] : 1.0, b = beta ? beta[c] : 0.0;
    for (size_t n = 0; n < N; n++)
      for (size_t s = 0; s < S; s++)
        AT(y, n, c, s) = (AT(x, n, c, s) - mean[c]) * is * g + b;
  }
}

void ref_batchnorm2d_bwd(const float *dy, const float *x, size_t N, size_t C,
                         size_t S, const float *gamma, const double *mean,
                         const double *invstd, double *dx, double *dgamma,
                         double *dbeta) {
  const double M = (double)(N * S);
  for (size_t c = 0; c < C; c++) {
    double sg = 0, sgx = 0;
    for (size_t n = 0; n < N; n++)
      for (size_t s = 0; s < S; s++) {
        sg += AT(dy, n, c, s);
        sgx += AT(dy, n, c, s) * ((AT(x, n, c, s) - mean[c]) * invstd[c]);
      }
    dbeta[c] = sg;
    dgamma[c] = sgx;
    const double k = (gamma ? gamma[c] : 1.0) * invstd[c];
    for (size_t n = 0; n < N; n++)
      for (size_t s = 0; s < S; s++) {
        const double xh = (AT(x, n, c, s) - mean[c]) * invstd[c];
        AT(dx, n, c, s) = k * (AT(dy, n, c, s) - sg / M - xh * sgx / M);
      }
  }
}
