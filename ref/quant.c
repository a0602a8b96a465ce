/*
 * quant.c - float64 reference of the Q8 block format (rumus.h,
 * "Quantization"): the scale of each block rounded once to F16, the int8
 * values rounded half away from zero, and the products with the
 * dequantized matrix.  The decisions are made in double from exact
 * quantities (a float over 127, a float over an F16 value), which double
 * rounds correctly; no OpenCL and no rumus conversions are used.
 */
#include <math.h>

#include "ref.h"

/* The value of F16 bits h (finite or infinite; NaN gives NaN). */
double ref_f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * ldexp((double)m, -24);
  return sign * ldexp(1024.0 + m, e - 25);
}

/* d >= 0 rounded to the nearest F16 value, ties to even: +infinity from
 * 65520 up, 0 at 2^-25 and below. */
static double f16_round(double d) {
  if (d >= 65520.0) return INFINITY;
  if (d == 0.0) return 0.0;
  int e;
  frexp(d, &e); /* d in [2^(e-1), 2^e) */
  int ex = e - 1;
  if (ex < -14) ex = -14; /* subnormals: a fixed quantum of 2^-24 */
  const double quantum = ldexp(1.0, ex - 10);
  return nearbyint(d / quantum) * quantum; /* the default mode: to even */
}

/* The F16 bits of a finite value v >= 0 that F16 holds exactly. */
static uint16_t f16_bits(double v) {
  if (v < 0x1p-14) return (uint16_t)(v * 0x1p24);
  int e;
  const double f = frexp(v, &e); /* v = f 2^e, f in [0.5, 1) */
  const unsigned m = (unsigned)(f * 2048.0) - 1024u;
  return (uint16_t)((unsigned)(e + 14) << 10 | m);
}

uint16_t ref_q8_scale(const float *x, size_t n) {
  double amax = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i])) return 0x7E00; /* NaN: the block is unusable */
    if (fabs(x[i]) > amax) amax = fabs(x[i]);
  }
  if (amax == 0.0) return 0x3C00; /* 1 */
  double s = f16_round(amax / 127.0);
  if (s < 0x1p-24) s = 0x1p-24;   /* the smallest F16 above 0 */
  if (s > 65504.0) s = 65504.0;   /* the largest finite F16 */
  return f16_bits(s);
}

int8_t ref_q8_round(float x, double s) {
  const double r = fabs((double)x) / s, f = floor(r);
  double q = r - f >= 0.5 ? f + 1.0 : f; /* half away from zero */
  if (q > 127.0) q = 127.0;
  return (int8_t)(x < 0 ? -q : q);
}

void ref_quantize_q8(const float *x, size_t rows, size_t k, size_t bs,
                     int8_t *q, uint16_t *scales) {
  const size_t nb = (k + bs - 1) / bs;
  for (size_t r = 0; r < rows; r++)
    for (size_t b = 0; b < nb; b++) {
      const size_t k0 = b * bs, len = k - k0 < bs ? k - k0 : bs;
      const float *xb = x + r * k + k0;
      const uint16_t h = ref_q8_scale(xb, len);
      scales[r * nb + b] = h;
      const double s = ref_f16_value(h);
      for (size_t i = 0; i < len; i++)
        q[r * k + k0 + i] = isnan(s) ? 0 : ref_q8_round(xb[i], s);
    }
}

void ref_dequantize_q8(const int8_t *q, const uint16_t *scales, size_t rows,
                       size_t k, size_t bs, double *y) {
  const size_t nb = (k + bs - 1) / bs;
  for (size_t r = 0; r < rows; r++)
    for (size_t i = 0; i < k; i++)
      y[r * k + i] =
          (double)q[r * k + i] * ref_f16_value(scales[r * nb + i / bs]);
}

void ref_matmul_q8(const float *A, size_t m, size_t k, const int8_t *q,
                   const uint16_t *scales, size_t n, size_t bs, double *C,
                   double *abs_sum) {
  const size_t nb = (k + bs - 1) / bs;
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      double s = 0.0, a = 0.0;
      for (size_t blk = 0; blk < nb; blk++) {
        const double sc = ref_f16_value(scales[j * nb + blk]);
        const size_t end = (blk + 1) * bs < k ? (blk + 1) * bs : k;
        for (size_t p = blk * bs; p < end; p++) {
          const double t = (double)A[i * k + p] * ((double)q[j * k + p] * sc);
          s += t;
          a += fabs(t);
        }
      }
      C[i * n + j] = s;
      if (abs_sum) abs_sum[i * n + j] = a;
    }
}
