/* pool.c - float64 reference for 2-D max, average and adaptive average
 * pooling.  The backwards scatter each output's gradient to its inputs,
 * independently of the device's gathers. */
#include <math.h>

#include "ref.h"

long ref_pool2d_out(long in, long k, long s, long p, long d, int ceil_mode) {
  const long num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  long out = (long)floor((double)num / (double)s) + 1;
  if (ceil_mode && out > 0 && (out - 1) * s >= in + p) out--;
  return out;
}

void ref_maxpool2d_fwd(const float *x, size_t planes, long H, long W,
                       const ref_pool2d *p, long OH, long OW, double *y,
                       int32_t *idx) {
  for (size_t c = 0; c < planes; c++)
    for (long oh = 0; oh < OH; oh++)
      for (long ow = 0; ow < OW; ow++) {
        double m = -INFINITY;
        int32_t mi = -1;
        for (long i = 0; i < p->kh; i++)
          for (long j = 0; j < p->kw; j++) {
            const long h = oh * p->sh - p->ph + i * p->dh;
            const long w = ow * p->sw - p->pw + j * p->dw;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = x[c * H * W + h * W + w];
            if (mi < 0 || v > m || isnan(v)) {
              m = v;
              mi = (int32_t)(h * W + w);
            }
          }
        y[(c * OH + oh) * OW + ow] = m;
        idx[(c * OH + oh) * OW + ow] = mi;
      }
}

void ref_maxpool2d_bwd(const float *dy, const int32_t *idx, size_t planes,
                       long H, long W, long OH, long OW, double *dx) {
  for (size_t i = 0; i < planes * H * W; i++) dx[i] = 0.0;
  for (size_t c = 0; c < planes; c++)
    for (long j = 0; j < OH * OW; j++) {
      const int32_t t = idx[c * OH * OW + j];
      if (t >= 0 && t < H * W) dx[c * H * W + t] += dy[c * OH * OW + j];
    }
}

/* One axis of an average window: [*lo, *hi) inside the input; returns the
 * padded extent. */
static long avg_axis(long o, long k, long s, long p, long n, long *lo,
                     long *hi) {
  const long start = o * s - p;
  const long end = start + k < n + p ? start + k : n + p;
  *lo = start > 0 ? start : 0;
  *hi = end < n ? end : n;
  return end - start;
}

/* The divisor of output (oh, ow) and its window. */
static double avg_window(const ref_pool2d *p, long H, long W, long oh,
                         long ow, long *h0, long *h1, long *w0, long *w1) {
  const long ph = avg_axis(oh, p->kh, p->sh, p->ph, H, h0, h1);
  const long pw = avg_axis(ow, p->kw, p->sw, p->pw, W, w0, w1);
  if (p->divisor > 0) return p->divisor;
  return p->count_include_pad ? (double)(ph * pw)
                              : (double)((*h1 - *h0) * (*w1 - *w0));
}

void ref_avgpool2d_fwd(const float *x, size_t planes, long H, long W,
                       const ref_pool2d *p, long OH, long OW, double *y) {
  for (size_t c = 0; c < planes; c++)
    for (long oh = 0; oh < OH; oh++)
      for (long ow = 0; ow < OW; ow++) {
        long h0, h1, w0, w1;
        const double d = avg_window(p, H, W, oh, ow, &h0, &h1, &w0, &w1);
        double s = 0.0;
        for (long h = h0; h < h1; h++)
          for (long w = w0; w < w1; w++) s += x[c * H * W + h * W + w];
        y[(c * OH + oh) * OW + ow] = s / d;
      }
}

void ref_avgpool2d_bwd(const float *dy, size_t planes, long H, long W,
                       const ref_pool2d *p, long OH, long OW, double *dx) {
  for (size_t i = 0; i < planes * H * W; i++) dx[i] = 0.0;
  for (size_t c = 0; c < planes; c++)
    for (long oh = 0; oh < OH; oh++)
      for (long ow = 0; ow < OW; ow++) {
        long h0, h1, w0, w1;
        const double d = avg_window(p, H, W, oh, ow, &h0, &h1, &w0, &w1);
        const double g = dy[(c * OH + oh) * OW + ow] / d;
        for (long h = h0; h < h1; h++)
          for (long w = w0; w < w1; w++) dx[c * H * W + h * W + w] += g;
      }
}

/* Bin o of n inputs cut into m: [floor(o n / m), ceil((o + 1) n / m)). */
static void bin(long o, long n, long m, long *lo, long *hi) {
  *lo = (long)floor((double)(o * n) / (double)m);
  *hi = (long)ceil((double)((o + 1) * n) / (double)m);
}

void ref_adaptive_avgpool2d_fwd(const float *x, size_t planes, long H,
                                long W, long OH, long OW, double *y) {
  for (size_t c = 0; c < planes; c++)
    for (long oh = 0; oh < OH; oh++)
      for (long ow = 0; ow < OW; ow++) {
        long h0, h1, w0, w1;
        bin(oh, H, OH, &h0, &h1);
        bin(ow, W, OW, &w0, &w1);
        double s = 0.0;
        for (long h = h0; h < h1; h++)
          for (long w = w0; w < w1; w++) s += x[c * H * W + h * W + w];
        y[(c * OH + oh) * OW + ow] = s / (double)((h1 - h0) * (w1 - w0));
      }
}

void ref_adaptive_avgpool2d_bwd(const float *dy, size_t planes, long H,
                                long W, long OH, long OW, double *dx) {
  for (size_t i = 0; i < planes * H * W; i++) dx[i] = 0.0;
  for (size_t c = 0; c < planes; c++)
    for (long oh = 0; oh < OH; oh++)
      for (long ow = 0; ow < OW; ow++) {
        long h0, h1, w0, w1;
        bin(oh, H, OH, &h0, &h1);
        bin(ow, W, OW, &w0, &w1);
        const double g = dy[(c * OH + oh) * OW + ow] /
                         (double)((h1 - h0) * (w1 - w0));
        for (long h = h0; h < h1; h++)
          for (long w = w0; w < w1; w++) dx[c * H * W + h * W + w] += g;
      }
}
