/* layernorm.c - rumus-info self-check of layer norm and RMS norm, once per
 * storage type of x (lines suffixed _f16 and _bf16; gamma and beta F32).
 *
 * Every storage type runs on the same inputs, rounded to the type, against
 * the float64 reference of the rounded inputs; a 16-bit line's tolerance is
 * the F32 line's plus the rounding of the stored result (selfcheck.h).  A
 * backward line checks dx, and dgamma and dbeta (F32) under their own
 * tolerance: a failure there is reported with that error and tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { R = 33, C = 1000, N = R * C };

#define EPS 1e-5
#define TOL_Y 2e-5  /* y: O(1) values, a few float roundings each */
#define TOL_DX 1e-5 /* dx: |dx| below 1 at rstd ~ 0.3 */
#define TOL_DP 1e-4 /* dgamma, dbeta: sums of 33 terms up to ~3 */

typedef struct {
  const float *x, *dy, *gamma, *beta;
  float *xr, *dyr, *got, *dp;
  double *want, *dg, *db;
} buffers;

static const char *suffix(rumus_dtype d) {
  return d == RUMUS_F16 ? "_f16" : d == RUMUS_BF16 ? "_bf16" : "";
}

/* A tensor of type d and n elements (1-D C or 2-D R x C) holding data
 * (NULL: uninitialised). */
static int tensor(selfcheck *sc, rumus_dtype d, int ndim, const float *data,
                  size_t n, rumus_tensor **out) {
  const size_t shape[2] = {ndim == 1 ? C : R, C};
  *out = NULL;
  int st = rumus_tensor_create(sc->ctx, d, ndim, shape, out);
  if (st == RUMUS_OK && data) st = rumus_tensor_upload_f32(*out, data, n);
  return st;
}

/* The largest error of t (n elements) against want, or a status. */
static int max_err(const rumus_tensor *t, float *got, const double *want,
                   size_t n, double *err) {
  const int st = rumus_tensor_download_f32(t, got, n);
  *err = st == RUMUS_OK ? selfcheck_max_err(got, want, n) : 0;
  return st;
}

static void line(selfcheck *sc, const char *name, rumus_dtype d, int st,
                 double err, double tol) {
  char l[64];
  snprintf(l, sizeof l, "%s%s", name, suffix(d));
  selfcheck_report(sc, l, st, err, tol);
}

/* One norm (rms 0: layer norm) forward and backward with x of type d. */
static void check_norm(selfcheck *sc, rumus_dtype d, buffers *b, int rms,
                       rumus_tensor *const *t) {
  rumus_tensor *tx = t[0], *ty = t[1], *tdy = t[2], *tdx = t[3], *tg = t[4],
               *tb = t[5], *tm = t[6], *ts = t[7], *tdg = t[8], *tdb = t[9];
  const char *fwd = rms ? "rmsnorm_fwd" : "layernorm_fwd";
  const char *bwd = rms ? "rmsnorm_bwd" : "layernorm_bwd";
  int st = rms ? rumus_rmsnorm_fwd(sc->ctx, NULL, tx, tg, ty, ts)
               : rumus_layernorm_fwd(sc->ctx, NULL, tx, tg, tb, ty, tm, ts);
  double err = 0;
  ref_layernorm_fwd(b->xr, b->gamma, b->beta, R, C, EPS, rms, b->want, NULL,
                    NULL);
  if (st == RUMUS_OK) st = max_err(ty, b->got, b->want, N, &err);
  line(sc, fwd, d, st, err, selfcheck_typed_tol(d, TOL_Y, b->want, N));
  if (st == RUMUS_OK)
    st = rms ? rumus_rmsnorm_bwd(sc->ctx, tdy, tx, tg, ts, tdx, tdg)
             : rumus_layernorm_bwd(sc->ctx, tdy, tx, tg, tm, ts, tdx, tdg,
                                   tdb);
  ref_layernorm_bwd(b->dyr, b->xr, b->gamma, R, C, EPS, rms, b->want, b->dg,
                    b->db);
  double tol = selfcheck_typed_tol(d, TOL_DX, b->want, N), e2 = 0;
  if (st == RUMUS_OK) st = max_err(tdx, b->got, b->want, N, &err);
  if (st == RUMUS_OK) st = max_err(tdg, b->dp, b->dg, C, &e2);
  if (st == RUMUS_OK && e2 > TOL_DP) err = e2, tol = TOL_DP;
  if (st == RUMUS_OK && !rms) st = max_err(tdb, b->dp, b->db, C, &e2);
  if (st == RUMUS_OK && e2 > TOL_DP) err = e2, tol = TOL_DP;
  line(sc, bwd, d, st, err, tol);
}

static void check_type(selfcheck *sc, rumus_dtype d, buffers *b) {
  for (size_t i = 0; i < N; i++) {
    b->xr[i] = selfcheck_stored(d, b->x[i]);
    b->dyr[i] = selfcheck_stored(d, b->dy[i]);
  }
  rumus_tensor *t[10] = {NULL};
  int st = tensor(sc, d, 2, b->xr, N, &t[0]);
  if (st == RUMUS_OK) st = tensor(sc, d, 2, NULL, N, &t[1]);
  if (st == RUMUS_OK) st = tensor(sc, d, 2, b->dyr, N, &t[2]);
  if (st == RUMUS_OK) st = tensor(sc, d, 2, NULL, N, &t[3]);
  if (st == RUMUS_OK) st = tensor(sc, RUMUS_F32, 1, b->gamma, C, &t[4]);
  if (st == RUMUS_OK) st = tensor(sc, RUMUS_F32, 1, b->beta, C, &t[5]);
  for (int i = 6; i < 10 && st == RUMUS_OK; i++) {
    const size_t n = i < 8 ? R : C;
    st = rumus_tensor_create(sc->ctx, RUMUS_F32, 1, &n, &t[i]);
  }
  for (int rms = 0; rms < 2; rms++) {
    if (st == RUMUS_OK) {
      check_norm(sc, d, b, rms, t);
    } else {
      line(sc, rms ? "rmsnorm_fwd" : "layernorm_fwd", d, st, 0, 0);
      line(sc, rms ? "rmsnorm_bwd" : "layernorm_bwd", d, st, 0, 0);
    }
  }
  for (int i = 0; i < 10; i++) rumus_tensor_free(t[i]);
}

void selfcheck_layernorm(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  float *x = malloc(N * sizeof *x), *dy = malloc(N * sizeof *dy);
  float *g = malloc(C * sizeof *g), *be = malloc(C * sizeof *be);
  buffers b = {x, dy, g, be, malloc(N * sizeof(float)),
               malloc(N * sizeof(float)), malloc(N * sizeof(float)),
               malloc(C * sizeof(float)), malloc(N * sizeof(double)),
               malloc(C * sizeof(double)), malloc(C * sizeof(double))};
  if (!x || !dy || !g || !be || !b.xr || !b.dyr || !b.got || !b.dp ||
      !b.want || !b.dg || !b.db) {
    selfcheck_report(sc, "layernorm", RUMUS_ENOMEM, 0, 0);
  } else {
    /* Rows with a large offset (2 + U(-6, 6)): the variance must not
     * come from E[x^2] - E[x]^2. */
    for (size_t i = 0; i < N; i++)
      x[i] = 2 + selfcheck_rand(-6, 6), dy[i] = selfcheck_rand(-1, 1);
    for (size_t j = 0; j < C; j++)
      g[j] = selfcheck_rand(0.5f, 1.5f), be[j] = selfcheck_rand(-1, 1);
    for (int k = 0; k < 3; k++) check_type(sc, TYPES[k], &b);
  }
  free(x);
  free(dy);
  free(g);
  free(be);
  free(b.xr);
  free(b.dyr);
  free(b.got);
  free(b.dp);
  free(b.want);
  free(b.dg);
  free(b.db);
}
