/* tensorops.c - rumus-info self-check of permute, broadcast add and the
 * sum over axes, once per storage type (lines suffixed _f16 and _bf16).
 * x is [4, 33, 6, 8]: permute (0, 2, 1, 3) (a head split: exact, the
 * bits move), x + b for b [33, 1, 8] (a 16-bit line adds half an ulp of
 * the largest |want|), and the sum over axes 0 and 2 (24 terms: 1e-5
 * absolute on values below 24, plus the 16-bit rounding). */
#include <stdlib.h>
#include <stdio.h>

#include "selfcheck.h"

enum { N = 4 * 33 * 6 * 8, NB = 33 * 8, NY = 33 * 8 };

static const size_t XS[4] = {4, 33, 6, 8}, BS[3] = {33, 1, 8};

static const char *suffix(rumus_dtype d) {
  return d == RUMUS_F16 ? "_f16" : d == RUMUS_BF16 ? "_bf16" : "";
}

/* One line: run's status, then t's contents (n) against want. */
static void report(selfcheck *sc, const char *name, rumus_dtype d, int st,
                   const rumus_tensor *t, size_t n, const double *want,
                   double tol, int typed) {
  char line[64];
  snprintf(line, sizeof line, "%s%s", name, suffix(d));
  float *got = malloc(n * sizeof *got);
  if (st == RUMUS_OK && got == NULL) st = RUMUS_ENOMEM;
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t, got, n);
  if (st != RUMUS_OK) {
    selfcheck_report(sc, line, st, 0, 0);
  } else {
    selfcheck_report(sc, line, st, selfcheck_max_err(got, want, n),
                     typed ? selfcheck_typed_tol(d, tol, want, n) : tol);
  }
  free(got);
}

static int make(selfcheck *sc, rumus_dtype d, int nd, const size_t *shape,
                const float *data, size_t n, rumus_tensor **out) {
  int st = rumus_tensor_create(sc->ctx, d, nd, shape, out);
  if (st == RUMUS_OK && data) st = rumus_tensor_upload_f32(*out, data, n);
  return st;
}

static void check_type(selfcheck *sc, rumus_dtype d, float *x, float *b,
                       double *want) {
  static const int PERM[4] = {0, 2, 1, 3};
  const size_t ps[4] = {4, 6, 33, 8}, ys[2] = {33, 8};
  for (size_t i = 0; i < N; i++) x[i] = selfcheck_stored(d, x[i]);
  for (size_t i = 0; i < NB; i++) b[i] = selfcheck_stored(d, b[i]);
  rumus_tensor *tx = NULL, *tb = NULL, *tp = NULL, *to = NULL, *ty = NULL;
  int st = make(sc, d, 4, XS, x, N, &tx);
  if (st == RUMUS_OK) st = make(sc, d, 3, BS, b, NB, &tb);
  if (st == RUMUS_OK) st = make(sc, d, 4, ps, NULL, N, &tp);
  if (st == RUMUS_OK) st = make(sc, d, 4, XS, NULL, N, &to);
  if (st == RUMUS_OK) st = make(sc, d, 2, ys, NULL, NY, &ty);
  int s = st == RUMUS_OK ? rumus_permute(sc->ctx, tx, PERM, tp) : st;
  ref_permute(x, 4, XS, PERM, want);
  report(sc, "permute", d, s, tp, N, want, 0.0, 0);
  s = st == RUMUS_OK ? rumus_broadcast_add(sc->ctx, tx, tb, to) : st;
  ref_broadcast(0, x, 4, XS, b, 3, BS, 4, XS, want);
  report(sc, "broadcast_add", d, s, to, N, want, 1e-6, 1);
  s = st == RUMUS_OK ? rumus_reduce_sum(sc->ctx, tx, 5u, 0, ty) : st;
  ref_reduce_sum(x, 4, XS, 5u, want);
  report(sc, "reduce_sum", d, s, ty, NY, want, 1e-5, 1);
  rumus_tensor_free(tx);
  rumus_tensor_free(tb);
  rumus_tensor_free(tp);
  rumus_tensor_free(to);
  rumus_tensor_free(ty);
}

void selfcheck_tensorops(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  float *x = malloc(N * sizeof *x), *b = malloc(NB * sizeof *b);
  double *want = malloc(N * sizeof *want);
  if (!x || !b || !want) {
    selfcheck_report(sc, "tensorops", RUMUS_ENOMEM, 0, 0);
  } else {
    for (size_t i = 0; i < N; i++) x[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < NB; i++) b[i] = selfcheck_rand(-1, 1);
    for (int k = 0; k < 3; k++) check_type(sc, TYPES[k], x, b, want);
  }
  free(x);
  free(b);
  free(want);
}
