/* batchnorm.c - rumus-info self-check of the channel bias ops and batch
 * norm 2d, once per storage type of x, y, dy and dx (lines suffixed _f16
 * and _bf16 for the 16-bit types); the per-channel tensors are F32.
 *
 * Every storage type runs on the same inputs, rounded to the type, against
 * the float64 reference of the rounded inputs; a 16-bit line's tolerance
 * is the F32 line's plus the rounding of the stored result
 * (selfcheck_typed_tol).  The bias gradient is stored in F32 (unrounded
 * float sums) and the backward runs from the reference's statistics
 * rounded to float, as save_mean and save_invstd hold them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { NB = 4, C = 5, H = 7, W = 5, S = H * W, N = NB * C * S };

/* The inputs as stored in one type, and scratch. */
typedef struct {
  float x[N], dy[N], gamma[C], beta[C], got[N];
  double want[N], mean[C], var[C], is[C], dg[C], db[C];
} bufs;

/* A tensor of d: [NB, C, H, W] (chan 0) or [C] (chan 1, F32 given as
 * d), holding data (NULL: uninitialised); NULL on failure. */
static rumus_tensor *tensor(selfcheck *sc, rumus_dtype d, int chan,
                            const float *data) {
  const size_t s4[4] = {NB, C, H, W}, s1[1] = {C};
  rumus_tensor *t = NULL;
  if (rumus_tensor_create(sc->ctx, d, chan ? 1 : 4, chan ? s1 : s4, &t) !=
      RUMUS_OK)
    return NULL;
  if (data && rumus_tensor_upload_f32(t, data, rumus_tensor_numel(t)) !=
                  RUMUS_OK) {
    rumus_tensor_free(t);
    return NULL;
  }
  return t;
}

/* The four lines of storage type d; tensors: x, dy, y (dx), gamma, beta,
 * mean, invstd, bias (db). */
static void check_type(selfcheck *sc, rumus_dtype d, bufs *b,
                       rumus_tensor *const *t) {
  int st = rumus_channel_bias_add(sc->ctx, t[0], t[3], t[2]);
  ref_channel_bias_add(b->x, b->gamma, NB, C, S, b->want);
  selfcheck_typed_line(sc, "channel_bias_add", d, st, t[2], b->got, b->want, N, 1e-6);
  st = rumus_channel_bias_grad(sc->ctx, t[1], t[7]);
  ref_channel_bias_grad(b->dy, NB, C, S, b->want);
  selfcheck_typed_line(sc, "channel_bias_grad", d, st, t[7], b->got, b->want, C, 2e-5);
  const rumus_batchnorm_params p = RUMUS_BATCHNORM_DEFAULTS;
  st = rumus_batchnorm2d_fwd_train(sc->ctx, &p, t[0], t[3], t[4], NULL, NULL,
                                   t[2], t[5], t[6]);
  ref_batchnorm2d_stats(b->x, NB, C, S, b->mean, b->var);
  ref_batchnorm2d_apply(b->x, NB, C, S, b->mean, b->var, 1e-5, b->gamma,
                        b->beta, b->want);
  selfcheck_typed_line(sc, "batchnorm2d_fwd", d, st, t[2], b->got, b->want, N, 2e-5);
  for (int c = 0; c < C; c++) {
    b->mean[c] = (float)b->mean[c];
    b->is[c] = (float)(1.0 / sqrt(b->var[c] + 1e-5));
    b->got[c] = (float)b->mean[c];
  }
  if (st == RUMUS_OK) st = rumus_tensor_upload_f32(t[5], b->got, C);
  for (int c = 0; c < C; c++) b->got[c] = (float)b->is[c];
  if (st == RUMUS_OK) st = rumus_tensor_upload_f32(t[6], b->got, C);
  if (st == RUMUS_OK)
    st = rumus_batchnorm2d_bwd(sc->ctx, t[1], t[0], t[3], t[5], t[6], t[2],
                               NULL, NULL);
  ref_batchnorm2d_bwd(b->dy, b->x, NB, C, S, b->gamma, b->mean, b->is,
                      b->want, b->dg, b->db);
  selfcheck_typed_line(sc, "batchnorm2d_bwd", d, st, t[2], b->got, b->want, N, 2e-5);
}

void selfcheck_batchnorm(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  bufs *b = malloc(sizeof *b);
  float *x = malloc(N * sizeof *x), *dy = malloc(N * sizeof *dy);
  if (!b || !x || !dy) {
    selfcheck_report(sc, "batchnorm", RUMUS_ENOMEM, 0, 0);
    free(b), free(x), free(dy);
    return;
  }
  for (int i = 0; i < N; i++)
    x[i] = selfcheck_rand(-3, 5), dy[i] = selfcheck_rand(-1, 1);
  for (int c = 0; c < C; c++)
    b->gamma[c] = selfcheck_rand(0.5f, 2), b->beta[c] = selfcheck_rand(-1, 1);
  for (int k = 0; k < 3; k++) {
    const rumus_dtype d = TYPES[k];
    for (int i = 0; i < N; i++) {
      b->x[i] = selfcheck_stored(d, x[i]);
      b->dy[i] = selfcheck_stored(d, dy[i]);
    }
    rumus_tensor *t[8] = {tensor(sc, d, 0, b->x),
                          tensor(sc, d, 0, b->dy),
                          tensor(sc, d, 0, NULL),
                          tensor(sc, RUMUS_F32, 1, b->gamma),
                          tensor(sc, RUMUS_F32, 1, b->beta),
                          tensor(sc, RUMUS_F32, 1, NULL),
                          tensor(sc, RUMUS_F32, 1, NULL),
                          tensor(sc, RUMUS_F32, 1, NULL)};
    int ok = 1;
    for (int i = 0; i < 8; i++) ok = ok && t[i];
    if (ok)
      check_type(sc, d, b, t);
    else
      selfcheck_report(sc, "batchnorm", RUMUS_EDEVMEM, 0, 0);
    for (int i = 0; i < 8; i++) rumus_tensor_free(t[i]);
  }
  free(b);
  free(x);
  free(dy);
}
