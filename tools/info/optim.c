/* optim.c - rumus-info self-check of the optim family: three SGD steps with
 * momentum, three AdamW steps and a clip_grad_norm over two gradients, each
 * against the float64 reference (largest error of parameters / gradients;
 * and the relative error of the total norm).  Once per storage type (lines
 * suffixed _f16 and _bf16: param, state and gradients of that type), and
 * mixed: F32 master weights from F16 gradients, writing an F16 copy of the
 * weights (adamw_f32_f16g, its param and its copy).
 *
 * Every line runs on the same inputs, drawn in the order the F32 lines
 * always drew them (so their numbers do not depend on the other lines)
 * and rounded to the line's types.  The reference reads every input as
 * the device stores it and, for a
 * 16-bit state, rounds its state to that type after each step, as the
 * device does.  A 16-bit line's tolerance is the F32 line's plus one ulp
 * of the largest |want| (2^-10 relative for F16, 2^-7 for BF16, with
 * 2^-24 for F16's subnormals): half an ulp for the result's rounding, half
 * for a value that the device and the reference rounded to neighbours in
 * an earlier step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { R = 13, C = 77, N = R * C, STEPS = 3 };

/* The types of a line: param and its state, grad, the copy (0: none). */
typedef struct {
  rumus_dtype p, g, c;
  const char *suffix;
} types;

static const types LINES[] = {
    {RUMUS_F32, RUMUS_F32, (rumus_dtype)0, ""},
    {RUMUS_F16, RUMUS_F16, (rumus_dtype)0, "_f16"},
    {RUMUS_BF16, RUMUS_BF16, (rumus_dtype)0, "_bf16"},
};
static const types MIXED = {RUMUS_F32, RUMUS_F16, RUMUS_F16, "_f32_f16g"};

/* Each ref[i] rounded to d (nothing for F32, whose state the reference
 * keeps in double). */
static void round_state(rumus_dtype d, double *ref, size_t n) {
  if (d == RUMUS_F32) return;
  for (size_t i = 0; i < n; i++) ref[i] = selfcheck_stored(d, (float)ref[i]);
}

/* The F32 tolerance tol plus one ulp of type d at the largest |want|. */
static double typed_tol(rumus_dtype d, double tol, const double *want,
                        size_t n) {
  if (d == RUMUS_F32) return tol;
  double m = 0;
  for (size_t i = 0; i < n; i++)
    if (fabs(want[i]) > m) m = fabs(want[i]);
  return d == RUMUS_F16 ? tol + m * 0x1p-10 + 0x1p-24 : tol + m * 0x1p-7;
}

/* The inputs of every line: SGD's parameters and gradients, AdamW's,
 * the clip's gradients, all in [-1, 1). */
typedef struct {
  float sgd_x[N], sgd_g[STEPS][N], adam_x[N], adam_g[STEPS][N],
      clip_g[N + C];
} inputs;

static void draw(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = selfcheck_rand(-1, 1);
}

static void draw_inputs(inputs *in) {
  draw(in->sgd_x, N);
  for (int s = 0; s < STEPS; s++) draw(in->sgd_g[s], N);
  draw(in->adam_x, N);
  for (int s = 0; s < STEPS; s++) draw(in->adam_g[s], N);
  draw(in->clip_g, N + C);
}

/* src as type d stores it, into x and xd (if not NULL). */
static void fill(rumus_dtype d, const float *src, float *x, double *xd,
                 size_t n) {
  for (size_t i = 0; i < n; i++) {
    x[i] = selfcheck_stored(d, src[i]);
    if (xd) xd[i] = x[i];
  }
}

/* A tensor of rows x cols of type d holding data (NULL: uninitialised),
 * or NULL on failure. */
static rumus_tensor *tensor(selfcheck *sc, rumus_dtype d, size_t rows,
                            size_t cols, const float *data) {
  const size_t shape[2] = {rows, cols};
  rumus_tensor *t = NULL;
  if (rumus_tensor_create(sc->ctx, d, 2, shape, &t) != RUMUS_OK) return NULL;
  if (data && rumus_tensor_upload_f32(t, data, rows * cols) != RUMUS_OK) {
    rumus_tensor_free(t);
    return NULL;
  }
  return t;
}

/* Prints `name` + ty.suffix + what for t's contents against want. */
static void report(selfcheck *sc, const char *name, const types *ty,
                   const char *what, int st, const rumus_tensor *t,
                   float *got, const double *want, double tol) {
  char line[64];
  snprintf(line, sizeof line, "%s%s%s", name, ty->suffix, what);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t, got, N);
  if (st != RUMUS_OK) {
    selfcheck_report(sc, line, st, 0, 0);
    return;
  }
  selfcheck_report(sc, line, st, selfcheck_max_err(got, want, N),
                   typed_tol(rumus_tensor_dtype(t), tol, want, N));
}

static void check_sgd(selfcheck *sc, const types *ty, const inputs *in,
                      float *x, float *g, float *got, double *pd, double *gd,
                      double *bd) {
  const rumus_sgd_params p = {0.05f, 0.9f, 0.1f, 0.01f, 0};
  fill(ty->p, in->sgd_x, x, pd, N);
  for (size_t i = 0; i < N; i++) bd[i] = 0;
  rumus_tensor *tp = tensor(sc, ty->p, R, C, x),
               *tg = tensor(sc, ty->g, R, C, NULL),
               *tb = tensor(sc, ty->p, R, C, NULL);
  int st = tp && tg && tb ? RUMUS_OK : RUMUS_ENOMEM;
  for (long s = 1; s <= STEPS && st == RUMUS_OK; s++) {
    fill(ty->g, in->sgd_g[s - 1], g, gd, N);
    st = rumus_tensor_upload_f32(tg, g, N);
    if (st == RUMUS_OK) st = rumus_sgd_step(sc->ctx, &p, s, tp, tg, tb);
    ref_sgd_step(p.lr, p.momentum, p.dampening, p.weight_decay, p.nesterov,
                 s, N, pd, gd, bd);
    if (s < STEPS) round_state(ty->p, pd, N), round_state(ty->p, bd, N);
  }
  report(sc, "sgd_momentum", ty, " (3 steps)", st, tp, got, pd, 2e-6);
  rumus_tensor_free(tp);
  rumus_tensor_free(tg);
  rumus_tensor_free(tb);
}

/* AdamW; with ty->c, the copy is reported on a second line. */
static void check_adamw(selfcheck *sc, const types *ty, const inputs *in,
                        float *x, float *g, float *got, double *pd,
                        double *gd, double *md, double *vd) {
  const rumus_adam_params p = {1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1};
  fill(ty->p, in->adam_x, x, pd, N);
  for (size_t i = 0; i < N; i++) md[i] = vd[i] = 0;
  rumus_tensor *tp = tensor(sc, ty->p, R, C, x),
               *tg = tensor(sc, ty->g, R, C, NULL),
               *tm = tensor(sc, ty->p, R, C, NULL),
               *tv = tensor(sc, ty->p, R, C, NULL),
               *tc = ty->c ? tensor(sc, ty->c, R, C, NULL) : NULL;
  int st = tp && tg && tm && tv && (tc || !ty->c) ? RUMUS_OK : RUMUS_ENOMEM;
  if (st == RUMUS_OK) st = rumus_tensor_fill(tm, 0.0f);
  if (st == RUMUS_OK) st = rumus_tensor_fill(tv, 0.0f);
  for (long s = 1; s <= STEPS && st == RUMUS_OK; s++) {
    fill(ty->g, in->adam_g[s - 1], g, gd, N);
    st = rumus_tensor_upload_f32(tg, g, N);
    if (st == RUMUS_OK)
      st = rumus_adam_step_ex(sc->ctx, &p, s, tp, tg, tm, tv, tc, NULL);
    ref_adam_step(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.decoupled,
                  s, N, pd, gd, md, vd);
    if (s < STEPS)
      round_state(ty->p, pd, N), round_state(ty->p, md, N),
          round_state(ty->p, vd, N);
  }
  report(sc, "adamw", ty, " (3 steps)", st, tp, got, pd, 2e-6);
  if (tc) report(sc, "adamw", ty, " copy_f16", st, tc, got, pd, 2e-6);
  rumus_tensor_free(tp);
  rumus_tensor_free(tg);
  rumus_tensor_free(tm);
  rumus_tensor_free(tv);
  rumus_tensor_free(tc);
}

/* Two gradients (N and C elements) clipped to a third of their norm. */
static void check_clip(selfcheck *sc, const types *ty, const inputs *in,
                       float *g, float *got, double *want) {
  fill(ty->g, in->clip_g, g, NULL, N + C);
  double sum = 0.0;
  for (size_t i = 0; i < N + C; i++) sum += (double)g[i] * g[i];
  const double total = sqrt(sum);
  const float max_norm = (float)(total / 3);
  const double coef = fmin(1.0, max_norm / (total + 1e-6));
  for (size_t i = 0; i < N + C; i++) want[i] = g[i] * coef;
  rumus_tensor *t0 = tensor(sc, ty->g, R, C, g),
               *t1 = tensor(sc, ty->g, 1, C, g + N),
               *tn = tensor(sc, RUMUS_F32, 1, 1, NULL);
  int st = t0 && t1 && tn ? RUMUS_OK : RUMUS_ENOMEM;
  rumus_tensor *gs[2] = {t0, t1};
  float tot = 0.0f;
  if (st == RUMUS_OK) st = rumus_clip_grad_norm(sc->ctx, gs, 2, max_norm, tn);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t0, got, N);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t1, got + N, C);
  if (st == RUMUS_OK) st = rumus_tensor_download(tn, &tot, sizeof tot);
  char line[64];
  snprintf(line, sizeof line, "clip_grad_norm%s", ty->suffix);
  selfcheck_report(sc, line, st, selfcheck_max_err(got, want, N + C),
                   typed_tol(ty->g, 1e-6, want, N + C));
  snprintf(line, sizeof line, "clip_grad_norm%s total (rel)", ty->suffix);
  if (st == RUMUS_OK)
    selfcheck_report(sc, line, st, fabs(tot - total) / total, 1e-5);
  rumus_tensor_free(t0);
  rumus_tensor_free(t1);
  rumus_tensor_free(tn);
}

void selfcheck_optim(selfcheck *sc) {
  float *x = malloc(N * sizeof *x), *g = malloc((N + C) * sizeof *g),
        *got = malloc((N + C) * sizeof *got);
  double *pd = malloc((N + C) * sizeof *pd), *gd = malloc(N * sizeof *gd),
         *s1 = malloc(N * sizeof *s1), *s2 = malloc(N * sizeof *s2);
  inputs *in = malloc(sizeof *in);
  if (!x || !g || !got || !pd || !gd || !s1 || !s2 || !in) {
    selfcheck_report(sc, "optim", RUMUS_ENOMEM, 0, 0);
  } else {
    draw_inputs(in);
    for (size_t k = 0; k < sizeof LINES / sizeof LINES[0]; k++) {
      check_sgd(sc, &LINES[k], in, x, g, got, pd, gd, s1);
      check_adamw(sc, &LINES[k], in, x, g, got, pd, gd, s1, s2);
      check_clip(sc, &LINES[k], in, g, got, pd);
    }
    check_adamw(sc, &MIXED, in, x, g, got, pd, gd, s1, s2);
  }
  free(in);
  free(x);
  free(g);
  free(got);
  free(pd);
  free(gd);
  free(s1);
  free(s2);
}
