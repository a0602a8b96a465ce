/* pool.c - rumus-info self-check of the pooling family (max, average and
 * adaptive average, forward and backward), once per storage type (lines
 * suffixed _f16 and _bf16 for the 16-bit types).
 *
 * 2 x 3 x 9 x 7 inputs in [-2, 2), dy in [-1, 1), rounded to the type;
 * overlapping 3 x 3 windows, stride 2, padding 1, ceil mode (avg: padding
 * not counted); adaptive bins 4 x 3.  Max pooling's values are copies
 * (tolerance 0) and a wrong index counts as an infinite error; the other
 * lines take the F32 tolerance plus half an ulp of the type
 * (selfcheck_typed_tol). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { PL = 6, H = 9, W = 7, OH = 5, OW = 4, AH = 4, AW = 3 };
enum { NIN = PL * H * W, NOUT = PL * OH * OW, NADA = PL * AH * AW };

static const rumus_pool2d_params P = {3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0};
static const ref_pool2d RP = {3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0};

typedef struct {
  rumus_dtype d;
  float x[NIN], dy[NOUT], got[NIN];
  double want[NIN];
  int32_t idx[NOUT], want_idx[NOUT];
  rumus_tensor *tx, *ty, *tdy, *tdx, *ti, *tya, *tdya;
} bufs;

/* A 2 x 3 x h x w tensor of type d holding data (NULL: nothing). */
static int make(selfcheck *sc, rumus_dtype d, size_t h, size_t w,
                const float *data, rumus_tensor **out) {
  const size_t shape[4] = {2, 3, h, w};
  int st = rumus_tensor_create(sc->ctx, d, 4, shape, out);
  if (st == RUMUS_OK && data)
    st = rumus_tensor_upload_f32(*out, data, PL * h * w);
  return st;
}

/* The line name + suffix for t's n values (st: the op's status). */
static void report(selfcheck *sc, bufs *b, const char *name, int st,
                   const rumus_tensor *t, size_t n, double tol,
                   double extra_err) {
  char line[64];
  snprintf(line, sizeof line, "%s%s", name, selfcheck_suffix(b->d));
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t, b->got, n);
  if (st != RUMUS_OK) {
    selfcheck_report(sc, line, st, 0, 0);
    return;
  }
  const double err = selfcheck_max_err(b->got, b->want, n);
  selfcheck_report(sc, line, st, err > extra_err ? err : extra_err,
                   tol == 0 ? 0 : selfcheck_typed_tol(b->d, tol, b->want, n));
}

static void check_max(selfcheck *sc, bufs *b) {
  int st = rumus_maxpool2d_fwd(sc->ctx, &P, b->tx, b->ty, b->ti);
  ref_maxpool2d_fwd(b->x, PL, H, W, &RP, OH, OW, b->want, b->want_idx);
  double bad = 0;
  if (st == RUMUS_OK)
    st = rumus_tensor_download(b->ti, b->idx, sizeof b->idx);
  for (size_t i = 0; st == RUMUS_OK && i < NOUT; i++)
    if (b->idx[i] != b->want_idx[i]) bad = INFINITY;
  report(sc, b, "maxpool2d_fwd", st, b->ty, NOUT, 0, bad);
  if (st == RUMUS_OK)
    st = rumus_maxpool2d_bwd(sc->ctx, &P, b->tdy, b->ti, b->tdx);
  if (st == RUMUS_OK) st = rumus_ctx_sync(sc->ctx);
  ref_maxpool2d_bwd(b->dy, b->want_idx, PL, H, W, OH, OW, b->want);
  report(sc, b, "maxpool2d_bwd", st, b->tdx, NIN, 1e-6, 0);
}

static void check_avg(selfcheck *sc, bufs *b) {
  int st = rumus_avgpool2d_fwd(sc->ctx, &P, b->tx, b->ty);
  ref_avgpool2d_fwd(b->x, PL, H, W, &RP, OH, OW, b->want);
  report(sc, b, "avgpool2d_fwd", st, b->ty, NOUT, 1e-5, 0);
  st = rumus_avgpool2d_bwd(sc->ctx, &P, b->tdy, b->tdx);
  ref_avgpool2d_bwd(b->dy, PL, H, W, &RP, OH, OW, b->want);
  report(sc, b, "avgpool2d_bwd", st, b->tdx, NIN, 1e-6, 0);
  st = rumus_adaptive_avgpool2d_fwd(sc->ctx, b->tx, b->tya);
  ref_adaptive_avgpool2d_fwd(b->x, PL, H, W, AH, AW, b->want);
  report(sc, b, "adaptive_avgpool2d_fwd", st, b->tya, NADA, 1e-5, 0);
  st = rumus_adaptive_avgpool2d_bwd(sc->ctx, b->tdya, b->tdx);
  ref_adaptive_avgpool2d_bwd(b->dy, PL, H, W, AH, AW, b->want);
  report(sc, b, "adaptive_avgpool2d_bwd", st, b->tdx, NIN, 1e-6, 0);
}

static void check_type(selfcheck *sc, bufs *b, rumus_dtype d,
                       const float *x, const float *dy) {
  b->d = d;
  for (size_t i = 0; i < NIN; i++) b->x[i] = selfcheck_stored(d, x[i]);
  for (size_t i = 0; i < NOUT; i++) b->dy[i] = selfcheck_stored(d, dy[i]);
  b->tx = b->ty = b->tdy = b->tdx = b->ti = b->tya = b->tdya = NULL;
  int st = make(sc, d, H, W, b->x, &b->tx);
  if (st == RUMUS_OK) st = make(sc, d, OH, OW, NULL, &b->ty);
  if (st == RUMUS_OK) st = make(sc, d, OH, OW, b->dy, &b->tdy);
  if (st == RUMUS_OK) st = make(sc, d, H, W, NULL, &b->tdx);
  if (st == RUMUS_OK) st = make(sc, RUMUS_I32, OH, OW, NULL, &b->ti);
  if (st == RUMUS_OK) st = make(sc, d, AH, AW, NULL, &b->tya);
  /* The adaptive backward reads the first NADA values of dy. */
  if (st == RUMUS_OK) st = make(sc, d, AH, AW, b->dy, &b->tdya);
  if (st != RUMUS_OK) {
    char line[64];
    snprintf(line, sizeof line, "pool%s", selfcheck_suffix(d));
    selfcheck_report(sc, line, st, 0, 0);
  } else {
    check_max(sc, b);
    check_avg(sc, b);
  }
  rumus_tensor_free(b->tx);
  rumus_tensor_free(b->ty);
  rumus_tensor_free(b->tdy);
  rumus_tensor_free(b->tdx);
  rumus_tensor_free(b->ti);
  rumus_tensor_free(b->tya);
  rumus_tensor_free(b->tdya);
}

void selfcheck_pool(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  static float x[NIN], dy[NOUT];
  bufs *b = malloc(sizeof *b);
  if (!b) {
    selfcheck_report(sc, "pool", RUMUS_ENOMEM, 0, 0);
    return;
  }
  for (size_t i = 0; i < NIN; i++) x[i] = selfcheck_rand(-2, 2);
  for (size_t i = 0; i < NOUT; i++) dy[i] = selfcheck_rand(-1, 1);
  for (int k = 0; k < 3; k++) check_type(sc, b, TYPES[k], x, dy);
  free(b);
}
