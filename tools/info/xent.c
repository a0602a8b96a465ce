/* xent.c - rumus-info self-check of the cross-entropy family: 65 x 1000
 * logits with label smoothing 0.1 and one ignored row, MEAN loss (the
 * device-side count and reduction) with its gradient and the per-row
 * losses (NONE), against the float64 reference; once per storage type of
 * the logits and gradient (lines cross_entropy_f16 and cross_entropy_bf16
 * for the 16-bit types), with the MEAN loss in F32 (a float loss of half
 * logits) and the per-row losses in the logits' type.
 *
 * Every type runs on the same logits, rounded to it, against the float64
 * reference of the rounded logits; the tolerance of a 16-bit result is the
 * F32 line's plus its rounding: half an ulp of the largest |want| (2^-11
 * relative for F16, 2^-8 for BF16) plus 2^-25 for F16's subnormals.  The
 * F32 mean loss of 16-bit logits keeps the F32 tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { R = 65, C = 1000 };

/* Host inputs, the reference and downloads. */
typedef struct {
  const float *x;
  const int32_t *t;
  float *xr, *g, *l;
  double *want_g, *want_l;
} buffers;

/* "cross_entropy", "cross_entropy_f16" or "cross_entropy_bf16", then the
 * part checked. */
static void report(selfcheck *sc, rumus_dtype d, const char *part, int st,
                   double err, double tol) {
  char line[64];
  snprintf(line, sizeof line, "cross_entropy%s (%s)",
           d == RUMUS_F16 ? "_f16" : d == RUMUS_BF16 ? "_bf16" : "", part);
  selfcheck_report(sc, line, st, err, tol);
}

/* The tensors of one storage type: logits and gradient of type d, the
 * MEAN loss F32, the per-row losses of type d. */
static int make_tensors(selfcheck *sc, rumus_dtype d, const buffers *b,
                        rumus_tensor **tx, rumus_tensor **tg,
                        rumus_tensor **tl, rumus_tensor **ts) {
  const size_t shape[2] = {R, C};
  int st = rumus_tensor_create(sc->ctx, d, 2, shape, tx);
  if (st == RUMUS_OK) st = rumus_tensor_upload_f32(*tx, b->xr, R * C);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, d, 2, shape, tg);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, d, 1, shape, tl);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, RUMUS_F32, 0, NULL, ts);
  return st;
}

static void check_type(selfcheck *sc, rumus_dtype d, rumus_tensor *tt,
                       buffers *b) {
  for (size_t i = 0; i < (size_t)R * C; i++)
    b->xr[i] = selfcheck_stored(d, b->x[i]);
  rumus_tensor *tx = NULL, *tg = NULL, *tl = NULL, *ts = NULL;
  int st = make_tensors(sc, d, b, &tx, &tg, &tl, &ts);
  if (st != RUMUS_OK) {
    report(sc, d, "tensors", st, 0, 0);
    goto out;
  }
  /* MEAN with the gradient. */
  rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, 0.1f, 1.0f};
  double want_mean = 0;
  float mean = 0;
  ref_cross_entropy(b->xr, b->t, R, C, p.reduction, p.ignore_index,
                    p.label_smoothing, p.grad_scale, b->want_l, &want_mean,
                    b->want_g);
  st = rumus_cross_entropy(sc->ctx, tx, tt, ts, tg, &p);
  if (st == RUMUS_OK) st = rumus_ctx_sync(sc->ctx);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(ts, &mean, 1);
  report(sc, d, "mean loss", st, selfcheck_max_err(&mean, &want_mean, 1),
         1e-5);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(tg, b->g, R * C);
  /* Gradients are about 1/65 of softmax probabilities here. */
  report(sc, d, "mean grad", st, selfcheck_max_err(b->g, b->want_g, R * C),
         selfcheck_typed_tol(d, 2e-8, b->want_g, R * C));
  /* Per-row losses (NONE). */
  p.reduction = RUMUS_REDUCTION_NONE;
  st = rumus_cross_entropy(sc->ctx, tx, tt, tl, NULL, &p);
  if (st == RUMUS_OK) st = rumus_ctx_sync(sc->ctx);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(tl, b->l, R);
  report(sc, d, "row losses", st, selfcheck_max_err(b->l, b->want_l, R),
         selfcheck_typed_tol(d, 2e-5, b->want_l, R));
out:
  rumus_tensor_free(tx);
  rumus_tensor_free(tg);
  rumus_tensor_free(tl);
  rumus_tensor_free(ts);
}

void selfcheck_xent(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  float *x = malloc(R * C * sizeof *x);
  int32_t *t = malloc(R * sizeof *t);
  buffers b = {x,
               t,
               malloc(R * C * sizeof(float)),
               malloc(R * C * sizeof(float)),
               malloc(R * sizeof(float)),
               malloc(R * C * sizeof(double)),
               malloc(R * sizeof(double))};
  rumus_tensor *tt = NULL;
  if (!x || !t || !b.xr || !b.g || !b.l || !b.want_g || !b.want_l) {
    selfcheck_report(sc, "cross_entropy", RUMUS_ENOMEM, 0, 0);
    goto out;
  }
  for (size_t i = 0; i < R * C; i++) x[i] = selfcheck_rand(-6, 6);
  for (size_t r = 0; r < R; r++)
    t[r] = r == 17 ? -100 : (int32_t)(selfcheck_rand(0, 1) * C) % C;
  size_t shape[1] = {R};
  int st = rumus_tensor_create(sc->ctx, RUMUS_I32, 1, shape, &tt);
  if (st == RUMUS_OK) st = rumus_tensor_upload(tt, t, R * sizeof *t);
  if (st != RUMUS_OK) {
    selfcheck_report(sc, "cross_entropy", st, 0, 0);
    goto out;
  }
  for (int k = 0; k < 3; k++) check_type(sc, TYPES[k], tt, &b);
out:
  rumus_tensor_free(tt);
  free(x);
  free(t);
  free(b.xr);
  free(b.g);
  free(b.l);
  free(b.want_g);
  free(b.want_l);
}
