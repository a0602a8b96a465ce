/* softmax.c - float64 reference for softmax / log-softmax, forward and
 * backward. */
#include <math.h>

#include "ref.h"

void ref_softmax_fwd(const float *x, size_t rows, size_t cols, int log_mode,
                     double *y) {
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double *yr = y + r * cols;
    double m = -INFINITY, s = 0.0;
    for (size_t j = 0; j < cols; j++) m = fmax(m, xr[j]);
    for (size_t j = 0; j < cols; j++) s += exp((double)xr[j] - m);
    for (size_t j = 0; j < cols; j++)
      yr[j] = log_mode ? (double)xr[j] - m - log(s) : exp((double)xr[j] - m) / s;
  }
}

void ref_softmax_bwd(const float *y, const float *dy, size_t rows, size_t cols,
                     int log_mode, double *dx) {
  for (size_t r = 0; r < rows; r++) {
    const float *yr = y + r * cols, *gr = dy + r * cols;
    double d = 0.0;
    for (size_t j = 0; j < cols; j++)
      d += log_mode ? (double)gr[j] : (double)gr[j] * yr[j];
    for (size_t j = 0; j < cols; j++)
      dx[r * cols + j] = log_mode ? gr[j] - exp((double)yr[j]) * d
                                  : yr[j] * ((double)gr[j] - d);
  }
}
