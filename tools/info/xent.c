/* xent.c - rumus-info self-check of the cross-entropy family: 65 x 1000
 * logits with label smoothing 0.1 and one ignored row, MEAN loss (the
 * device-side count and reduction) with its gradient and the per-row
 * losses (NONE), against the float64 reference. */
#include <stdlib.h>

#include "selfcheck.h"

void selfcheck_xent(selfcheck *sc) {
  enum { R = 65, C = 1000 };
  float *x = malloc(R * C * sizeof *x), *g = malloc(R * C * sizeof *g);
  int32_t *t = malloc(R * sizeof *t);
  float *l = malloc(R * sizeof *l);
  double *want_g = malloc(R * C * sizeof *want_g), *want_l = malloc(R * sizeof *want_l);
  rumus_tensor *tx = NULL, *tt = NULL, *tg = NULL, *tl = NULL, *ts = NULL;
  if (!x || !g || !t || !l || !want_g || !want_l) {
    selfcheck_report(sc, "cross_entropy", RUMUS_ENOMEM, 0, 0);
    goto out;
  }
  for (size_t i = 0; i < R * C; i++) x[i] = selfcheck_rand(-6, 6);
  for (size_t r = 0; r < R; r++)
    t[r] = r == 17 ? -100 : (int32_t)(selfcheck_rand(0, 1) * C) % C;
  size_t shape[2] = {R, C};
  int st = rumus_tensor_create(sc->ctx, RUMUS_I32, 1, shape, &tt);
  if (st == RUMUS_OK) st = rumus_tensor_upload(tt, t, R * sizeof *t);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, RUMUS_F32, 1, shape, &tl);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, RUMUS_F32, 0, NULL, &ts);
  tx = selfcheck_tensor(sc, R, C, x);
  tg = selfcheck_tensor(sc, R, C, NULL);
  if (st == RUMUS_OK && (!tx || !tg)) st = RUMUS_EDEVMEM;
  if (st != RUMUS_OK) {
    selfcheck_report(sc, "cross_entropy", st, 0, 0);
    goto out;
  }
  /* MEAN with the gradient. */
  rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, 0.1f, 1.0f};
  double want_mean = 0;
  float mean = 0;
  ref_cross_entropy(x, t, R, C, p.reduction, p.ignore_index, p.label_smoothing,
                    p.grad_scale, want_l, &want_mean, want_g);
  st = rumus_cross_entropy(sc->ctx, tx, tt, ts, tg, &p);
  if (st == RUMUS_OK) st = rumus_ctx_sync(sc->ctx);
  if (st == RUMUS_OK) st = rumus_tensor_download(ts, &mean, sizeof mean);
  selfcheck_report(sc, "cross_entropy (mean loss)", st,
                   selfcheck_max_err(&mean, &want_mean, 1), 1e-5);
  if (st == RUMUS_OK) st = rumus_tensor_download(tg, g, R * C * sizeof *g);
  /* Gradients are about 1/65 of softmax probabilities here. */
  selfcheck_report(sc, "cross_entropy (mean grad)", st,
                   selfcheck_max_err(g, want_g, R * C), 2e-8);
  /* Per-row losses (NONE). */
  p.reduction = RUMUS_REDUCTION_NONE;
  st = rumus_cross_entropy(sc->ctx, tx, tt, tl, NULL, &p);
  if (st == RUMUS_OK) st = rumus_ctx_sync(sc->ctx);
  if (st == RUMUS_OK) st = rumus_tensor_download(tl, l, R * sizeof *l);
  selfcheck_report(sc, "cross_entropy (row losses)", st,
                   selfcheck_max_err(l, want_l, R), 2e-5);
out:
  rumus_tensor_free(tx);
  rumus_tensor_free(tt);
  rumus_tensor_free(tg);
  rumus_tensor_free(tl);
  rumus_tensor_free(ts);
  free(x);
  free(g);
  free(t);
  free(l);
  free(want_g);
  free(want_l);
}
