/* softmax.c - rumus-info self-check of the softmax family, once per
 * storage type (lines suffixed _f16 and _bf16 for the 16-bit types).
 *
 * Every storage type runs on the same inputs, rounded to the type, against
 * the float64 reference of the rounded inputs; a 16-bit line's tolerance
 * is the F32 line's plus the rounding of the stored result: half an ulp of
 * the largest |want| (2^-11 relative for F16, 2^-8 for BF16) plus 2^-25
 * for F16's subnormals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selfcheck.h"

enum { R = 33, C = 1000, N = R * C };

/* The inputs (x in [-6, 6), dy in [-1, 1)) and scratch. */
typedef struct {
  const float *x, *dy;
  float *xr, *dyr, *y, *dx;
  double *want;
} buffers;

/* An R x C tensor of type d holding data (NULL: uninitialised). */
static int typed_tensor(selfcheck *sc, rumus_dtype d, const float *data,
                        rumus_tensor **out) {
  const size_t shape[2] = {R, C};
  int st = rumus_tensor_create(sc->ctx, d, 2, shape, out);
  if (st == RUMUS_OK && data) st = rumus_tensor_upload_f32(*out, data, N);
  return st;
}

/* Softmax and log-softmax, forward and backward (at the device's forward),
 * with every tensor of type d. */
static void check_type(selfcheck *sc, rumus_dtype d, buffers *b) {
  for (size_t i = 0; i < N; i++) {
    b->xr[i] = selfcheck_stored(d, b->x[i]);
    b->dyr[i] = selfcheck_stored(d, b->dy[i]);
  }
  rumus_tensor *tx = NULL, *ty = NULL, *tdy = NULL, *tdx = NULL;
  int st = typed_tensor(sc, d, b->xr, &tx);
  if (st == RUMUS_OK) st = typed_tensor(sc, d, NULL, &ty);
  if (st == RUMUS_OK) st = typed_tensor(sc, d, b->dyr, &tdy);
  if (st == RUMUS_OK) st = typed_tensor(sc, d, NULL, &tdx);
  for (int log_mode = 0; log_mode < 2; log_mode++) {
    const char *fwd = log_mode ? "log_softmax_fwd" : "softmax_fwd";
    const char *bwd = log_mode ? "log_softmax_bwd" : "softmax_bwd";
    if (st != RUMUS_OK) {
      selfcheck_typed_line(sc, fwd, d, st, NULL, NULL, NULL, 0, 0);
      continue;
    }
    int s = (log_mode ? rumus_log_softmax_fwd : rumus_softmax_fwd)(sc->ctx,
                                                                   tx, ty);
    ref_softmax_fwd(b->xr, R, C, log_mode, b->want);
    selfcheck_typed_line(sc, fwd, d, s, ty, b->y, b->want, N,
                         log_mode ? 2e-5 : 1e-6);
    if (s == RUMUS_OK)
      s = (log_mode ? rumus_log_softmax_bwd : rumus_softmax_bwd)(sc->ctx, ty,
                                                                 tdy, tdx);
    ref_softmax_bwd(b->y, b->dyr, R, C, log_mode, b->want);
    selfcheck_typed_line(sc, bwd, d, s, tdx, b->dx, b->want, N, 2e-6);
  }
  rumus_tensor_free(tx);
  rumus_tensor_free(ty);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdx);
}

void selfcheck_softmax(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  float *x = malloc(N * sizeof *x), *dy = malloc(N * sizeof *dy);
  buffers b = {x, dy, malloc(N * sizeof(float)), malloc(N * sizeof(float)),
               malloc(N * sizeof(float)), malloc(N * sizeof(float)),
               malloc(N * sizeof(double))};
  if (!x || !dy || !b.xr || !b.dyr || !b.y || !b.dx || !b.want) {
    selfcheck_report(sc, "softmax", RUMUS_ENOMEM, 0, 0);
  } else {
    for (size_t i = 0; i < N; i++)
      x[i] = selfcheck_rand(-6, 6), dy[i] = selfcheck_rand(-1, 1);
    for (int k = 0; k < 3; k++) check_type(sc, TYPES[k], &b);
  }
  free(x);
  free(dy);
  free(b.xr);
  free(b.dyr);
  free(b.y);
  free(b.dx);
  free(b.want);
}
