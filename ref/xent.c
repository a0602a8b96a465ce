/* xent.c - float64 reference for the fused cross-entropy (rumus.h gives the
 * contract): per-row loss (1 - s)(lse - x[t]) + s(lse - mean x), the
 * gradient (softmax - (1 - s) onehot - s / C) * scale, ignore_index rows at
 * zero and out of the mean's count, out-of-range targets as NaN loss and
 * zero gradient.  The smoothing term is left out when s == 0, so -INFINITY
 * logits give a finite loss without smoothing and +inf with it (PyTorch). */
#include <math.h>

#include "ref.h"

void ref_cross_entropy(const float *logits, const int32_t *targets,
                       size_t rows, size_t cols, int reduction,
                       int32_t ignore_index, double smoothing,
                       double grad_scale, double *row_loss, double *loss,
                       double *grad) {
  size_t count = 0;
  for (size_t r = 0; r < rows; r++) count += targets[r] != ignore_index;
  /* MEAN (0) divides by the count; a gradient over zero counted rows is
   * zero everywhere, so the infinite scale is never used. */
  const double scale = reduction == 0 ? grad_scale / (double)count : grad_scale;
  double total = 0.0;
  for (size_t r = 0; r < rows; r++) {
    const float *x = logits + r * cols;
    double *g = grad ? grad + r * cols : NULL;
    const int32_t t = targets[r];
    double l;
    if (t == ignore_index || t < 0 || (size_t)t >= cols) {
      l = t == ignore_index ? 0.0 : NAN;
      if (g)
        for (size_t j = 0; j < cols; j++) g[j] = 0.0;
    } else {
      double m = -INFINITY, s = 0.0, sum = 0.0;
      for (size_t j = 0; j < cols; j++) m = fmax(m, x[j]);
      for (size_t j = 0; j < cols; j++) {
        s += exp((double)x[j] - m);
        sum += x[j];
      }
      const double lse = m + log(s);
      l = (1.0 - smoothing) * (lse - x[t]);
      if (smoothing > 0.0) l += smoothing * (lse - sum / (double)cols);
      if (g) {
        for (size_t j = 0; j < cols; j++)
          g[j] = (exp((double)x[j] - m) / s - smoothing / (double)cols) * scale;
        g[t] -= (1.0 - smoothing) * scale;
      }
    }
    if (row_loss) row_loss[r] = l;
    total += l;
  }
  if (reduction == 0)
    *loss = total / (double)count;
  else if (reduction == 1)
    *loss = total;
}
