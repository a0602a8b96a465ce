/* layernorm.c - float64 reference for layer norm and RMS norm over the last
 * dimension, forward and backward (rumus.h, "Layer norm and RMS norm"). */
#include <math.h>

#include "ref.h"

void ref_layernorm_fwd(const float *x, const float *gamma, const float *beta,
                       size_t rows, size_t cols, double eps, int rms,
                       double *y, double *mean, double *rstd) {
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double m = 0.0, v = 0.0;
    if (!rms) {
      for (size_t j = 0; j < cols; j++) m += xr[j];
      m /= (double)cols;
    }
    for (size_t j = 0; j < cols; j++) v += ((double)xr[j] - m) * (xr[j] - m);
    const double rs = 1.0 / sqrt(v / (double)cols + eps);
    for (size_t j = 0; j < cols; j++) {
      double o = ((double)xr[j] - m) * rs;
      if (gamma) o *= gamma[j];
      if (beta && !rms) o += beta[j];
      y[r * cols + j] = o;
    }
    if (mean) mean[r] = m;
    if (rstd) rstd[r] = rs;
  }
}

void ref_layernorm_bwd(const float *dy, const float *x, const float *gamma,
                       size_t rows, size_t cols, double eps, int rms,
                       double *dx, double *dgamma, double *dbeta) {
  for (size_t j = 0; j < cols; j++) {
    if (dgamma) dgamma[j] = 0.0;
    if (dbeta) dbeta[j] = 0.0;
  }
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols, *gr = dy + r * cols;
    double m = 0.0, v = 0.0;
    if (!rms) {
      for (size_t j = 0; j < cols; j++) m += xr[j];
      m /= (double)cols;
    }
    for (size_t j = 0; j < cols; j++) v += ((double)xr[j] - m) * (xr[j] - m);
    const double rs = 1.0 / sqrt(v / (double)cols + eps);
    double a = 0.0, b = 0.0;
    for (size_t j = 0; j < cols; j++) {
      const double g = (double)gr[j] * (gamma ? gamma[j] : 1.0);
      a += g;
      b += g * ((double)xr[j] - m) * rs;
    }
    if (rms) a = 0.0;
    for (size_t j = 0; j < cols; j++) {
      const double g = (double)gr[j] * (gamma ? gamma[j] : 1.0);
      const double xh = ((double)xr[j] - m) * rs;
      if (dx) dx[r * cols + j] = rs * (g - a / cols - xh * b / cols);
      if (dgamma) dgamma[j] += gr[j] * xh;
      if (dbeta) dbeta[j] += gr[j];
    }
  }
}
