/* optim.c - rumus-info self-check of the optim family: three SGD steps with
 * momentum, three AdamW steps and a clip_grad_norm over two gradients, each
 * against the float64 reference (largest error of parameters / gradients;
 * and the relative error of the total norm). */
#include <math.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { R = 13, C = 77, N = R * C, STEPS = 3 };

static void fill(float *x, double *xd, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) {
    x[i] = selfcheck_rand(lo, hi);
    if (xd) xd[i] = x[i];
  }
}

static void check_sgd(selfcheck *sc, float *x, float *g, float *got,
                      double *pd, double *gd, double *bd) {
  const rumus_sgd_params p = {0.05f, 0.9f, 0.1f, 0.01f, 0};
  fill(x, pd, N, -1, 1);
  for (size_t i = 0; i < N; i++) bd[i] = 0;
  rumus_tensor *tp = selfcheck_tensor(sc, R, C, x), *tg = selfcheck_tensor(sc, R, C, NULL),
               *tb = selfcheck_tensor(sc, R, C, NULL);
  int st = tp && tg && tb ? RUMUS_OK : RUMUS_ENOMEM;
  for (long s = 1; s <= STEPS && st == RUMUS_OK; s++) {
    fill(g, gd, N, -1, 1);
    st = rumus_tensor_upload(tg, g, N * sizeof *g);
    if (st == RUMUS_OK) st = rumus_sgd_step(sc->ctx, &p, s, tp, tg, tb);
    ref_sgd_step(p.lr, p.momentum, p.dampening, p.weight_decay, p.nesterov, s, N, pd, gd, bd);
  }
  if (st == RUMUS_OK) st = rumus_tensor_download(tp, got, N * sizeof *got);
  selfcheck_report(sc, "sgd_momentum (3 steps)", st, selfcheck_max_err(got, pd, N), 2e-6);
  rumus_tensor_free(tp);
  rumus_tensor_free(tg);
  rumus_tensor_free(tb);
}

static void check_adamw(selfcheck *sc, float *x, float *g, float *got,
                        double *pd, double *gd, double *md, double *vd) {
  const rumus_adam_params p = {1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1};
  fill(x, pd, N, -1, 1);
  for (size_t i = 0; i < N; i++) md[i] = vd[i] = 0;
  rumus_tensor *tp = selfcheck_tensor(sc, R, C, x), *tg = selfcheck_tensor(sc, R, C, NULL),
               *tm = selfcheck_tensor(sc, R, C, NULL), *tv = selfcheck_tensor(sc, R, C, NULL);
  int st = tp && tg && tm && tv ? RUMUS_OK : RUMUS_ENOMEM;
  if (st == RUMUS_OK) st = rumus_tensor_fill(tm, 0.0f);
  if (st == RUMUS_OK) st = rumus_tensor_fill(tv, 0.0f);
  for (long s = 1; s <= STEPS && st == RUMUS_OK; s++) {
    fill(g, gd, N, -1, 1);
    st = rumus_tensor_upload(tg, g, N * sizeof *g);
    if (st == RUMUS_OK) st = rumus_adam_step(sc->ctx, &p, s, tp, tg, tm, tv);
    ref_adam_step(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.decoupled, s, N, pd, gd, md, vd);
  }
  if (st == RUMUS_OK) st = rumus_tensor_download(tp, got, N * sizeof *got);
  selfcheck_report(sc, "adamw (3 steps)", st, selfcheck_max_err(got, pd, N), 2e-6);
  rumus_tensor_free(tp);
  rumus_tensor_free(tg);
  rumus_tensor_free(tm);
  rumus_tensor_free(tv);
}

/* Two gradients (N and C elements) clipped to a third of their norm. */
static void check_clip(selfcheck *sc, float *g, float *got, double *want) {
  fill(g, NULL, N + C, -1, 1);
  double sum = 0.0;
  for (size_t i = 0; i < N + C; i++) sum += (double)g[i] * g[i];
  const double total = sqrt(sum);
  const float max_norm = (float)(total / 3);
  const double coef = fmin(1.0, max_norm / (total + 1e-6));
  for (size_t i = 0; i < N + C; i++) want[i] = g[i] * coef;
  rumus_tensor *t0 = selfcheck_tensor(sc, R, C, g), *t1 = selfcheck_tensor(sc, 1, C, g + N),
               *tn = selfcheck_tensor(sc, 1, 1, NULL);
  int st = t0 && t1 && tn ? RUMUS_OK : RUMUS_ENOMEM;
  rumus_tensor *gs[2] = {t0, t1};
  float tot = 0.0f;
  if (st == RUMUS_OK) st = rumus_clip_grad_norm(sc->ctx, gs, 2, max_norm, tn);
  if (st == RUMUS_OK) st = rumus_tensor_download(t0, got, N * sizeof *got);
  if (st == RUMUS_OK) st = rumus_tensor_download(t1, got + N, C * sizeof *got);
  if (st == RUMUS_OK) st = rumus_tensor_download(tn, &tot, sizeof tot);
  selfcheck_report(sc, "clip_grad_norm", st, selfcheck_max_err(got, want, N + C), 1e-6);
  if (st == RUMUS_OK)
    selfcheck_report(sc, "clip_grad_norm total (rel)", st, fabs(tot - total) / total, 1e-5);
  rumus_tensor_free(t0);
  rumus_tensor_free(t1);
  rumus_tensor_free(tn);
}

void selfcheck_optim(selfcheck *sc) {
  float *x = malloc(N * sizeof *x), *g = malloc((N + C) * sizeof *g),
        *got = malloc((N + C) * sizeof *got);
  double *pd = malloc((N + C) * sizeof *pd), *gd = malloc(N * sizeof *gd),
         *s1 = malloc(N * sizeof *s1), *s2 = malloc(N * sizeof *s2);
  if (!x || !g || !got || !pd || !gd || !s1 || !s2) {
    selfcheck_report(sc, "optim", RUMUS_ENOMEM, 0, 0);
  } else {
    check_sgd(sc, x, g, got, pd, gd, s1);
    check_adamw(sc, x, g, got, pd, gd, s1, s2);
    check_clip(sc, g, got, pd);
  }
  free(x);
  free(g);
  free(got);
  free(pd);
  free(gd);
  free(s1);
  free(s2);
}
