/* attention.c - float64 reference of scaled dot-product attention, forward
 * and backward (the formulas of rumus.h's attention section), computed
 * from the full score rows in double. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"

void ref_attention_mask_strides(int ndim, const size_t *shape, size_t ms[4]) {
  size_t stride = 1;
  for (int a = 0; a < 4; a++) ms[a] = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    ms[4 - ndim + d] = shape[d] == 1 ? 0 : stride;
    stride *= shape[d];
  }
}

/* Score row i of head bh into s[0 .. Tk) and its log-sum-exp (-inf for a
 * row of -inf, NaN for a row with a NaN score), P into p (0 for a row of
 * -inf, NaN for a row with a NaN). */
static double score_row(const ref_attention_shape *a, const float *q,
                        const float *k, size_t bh, size_t i, double *s,
                        double *p) {
  const size_t D = a->D, b = bh / a->H, h = bh % a->H;
  const float *qi = q + (bh * a->Tq + i) * D;
  double m = -INFINITY;
  int nan = 0;
  for (size_t j = 0; j < a->Tk; j++) {
    const float *kj = k + (bh * a->Tk + j) * D;
    double dot = 0.0;
    for (size_t d = 0; d < D; d++) dot += (double)qi[d] * kj[d];
    s[j] = a->scale * dot;
    if (a->mask)
      s[j] += a->mask[b * a->ms[0] + h * a->ms[1] + i * a->ms[2] +
                      j * a->ms[3]];
    if (a->causal && j > i) s[j] = -INFINITY;
    m = fmax(m, s[j]);
    nan |= isnan(s[j]);
  }
  if (nan) m = NAN;
  if (m == -INFINITY) {
    for (size_t j = 0; j < a->Tk; j++) p[j] = 0.0;
    return -INFINITY;
  }
  double l = 0.0;
  for (size_t j = 0; j < a->Tk; j++) l += exp(s[j] - m);
  const double lse = m + log(l);
  for (size_t j = 0; j < a->Tk; j++) p[j] = exp(s[j] - lse);
  return lse;
}

void ref_attention_fwd(const ref_attention_shape *a, const float *q,
                       const float *k, const float *v, double *out,
                       double *lse) {
  const size_t D = a->D, Tk = a->Tk;
  double *s = malloc((Tk + 1) * sizeof *s), *p = malloc((Tk + 1) * sizeof *p);
  for (size_t bh = 0; bh < a->B * a->H; bh++)
    for (size_t i = 0; i < a->Tq; i++) {
      const size_t r = bh * a->Tq + i;
      const double l = score_row(a, q, k, bh, i, s, p);
      if (lse) lse[r] = l;
      for (size_t d = 0; d < D; d++) {
        double o = 0.0;
        for (size_t j = 0; j < Tk; j++)
          if (p[j] != 0.0) o += p[j] * v[(bh * Tk + j) * D + d];
        out[r * D + d] = o;
      }
    }
  free(s);
  free(p);
}

void ref_attention_bwd(const ref_attention_shape *a, const float *q,
                       const float *k, const float *v, const float *dout,
                       double *dq, double *dk, double *dv) {
  const size_t D = a->D, Tk = a->Tk;
  double *s = malloc((Tk + 1) * sizeof *s), *p = malloc((Tk + 1) * sizeof *p);
  double *o = malloc(D * sizeof *o);
  for (size_t i = 0; i < a->B * a->H * a->Tq * D; i++) dq[i] = 0.0;
  for (size_t i = 0; i < a->B * a->H * Tk * D; i++) dk[i] = dv[i] = 0.0;
  for (size_t bh = 0; bh < a->B * a->H; bh++)
    for (size_t i = 0; i < a->Tq; i++) {
      const size_t r = bh * a->Tq + i;
      const float *qi = q + r * D, *gi = dout + r * D;
      score_row(a, q, k, bh, i, s, p);
      double delta = 0.0;
      for (size_t d = 0; d < D; d++) {
        o[d] = 0.0;
        for (size_t j = 0; j < Tk; j++)
          if (p[j] != 0.0) o[d] += p[j] * v[(bh * Tk + j) * D + d];
        delta += o[d] * gi[d];
      }
      for (size_t j = 0; j < Tk; j++) {
        if (p[j] == 0.0) continue;
        const size_t kr = (bh * Tk + j) * D;
        double dp = 0.0;
        for (size_t d = 0; d < D; d++) dp += (double)gi[d] * v[kr + d];
        const double ds = p[j] * (dp - delta);
        for (size_t d = 0; d < D; d++) {
          dv[kr + d] += p[j] * gi[d];
          dk[kr + d] += a->scale * ds * qi[d];
          dq[r * D + d] += a->scale * ds * k[kr + d];
        }
      }
    }
  free(s);
  free(p);
  free(o);
}
