/* attention.c - rumus-info self-check of scaled dot-product attention,
 * once per storage type (lines suffixed _f16 and _bf16 for the 16-bit
 * types): B = 2, H = 3, Tq = 33, Tk = 29, D = 64, causal, with an F32
 * [Tq, Tk] mask; the forward's out, and the backward's dq, dk and dv (one
 * line) at the device's out and lse, against the float64 reference of
 * the inputs as stored.  A 16-bit line's tolerance adds the rounding of
 * the stored result (selfcheck_typed_tol); the backward's twice that, for
 * the rounding of the stored out that it reads as well. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selfcheck.h"

enum { B = 2, H = 3, TQ = 33, TK = 29, D = 64 };
enum { NQ = B * H * TQ * D, NK = B * H * TK * D, NM = TQ * TK };

typedef struct {
  float q[NQ], k[NK], v[NK], dout[NQ], mask[NM];
  float got[NQ + 2 * NK];
  double want[NQ + 2 * NK];
} buffers;

static int tensor(selfcheck *sc, rumus_dtype d, int nd, const size_t *shape,
                  const float *data, size_t n, rumus_tensor **out) {
  int st = rumus_tensor_create(sc->ctx, d, nd, shape, out);
  if (st == RUMUS_OK && data) st = rumus_tensor_upload_f32(*out, data, n);
  return st;
}

/* The backward's line: dq, dk, dv downloaded one after another. */
static void bwd_line(selfcheck *sc, rumus_dtype d, int st,
                     rumus_tensor *const *g, buffers *b) {
  char line[64];
  snprintf(line, sizeof line, "attention_bwd%s", selfcheck_suffix(d));
  const size_t n[3] = {NQ, NK, NK};
  size_t at = 0;
  for (int i = 0; i < 3 && st == RUMUS_OK; i++) {
    st = rumus_tensor_download_f32(g[i], b->got + at, n[i]);
    at += n[i];
  }
  if (st != RUMUS_OK) {
    selfcheck_report(sc, line, st, 0, 0);
    return;
  }
  const size_t all = NQ + 2 * NK;
  const double tol = d == RUMUS_F32
                         ? 2e-5
                         : 2e-5 + 2 * selfcheck_typed_tol(d, 0, b->want, all);
  selfcheck_report(sc, line, st, selfcheck_max_err(b->got, b->want, all), tol);
}

static void check_type(selfcheck *sc, rumus_dtype d, buffers *b,
                       const buffers *in) {
  for (size_t i = 0; i < NQ; i++) {
    b->q[i] = selfcheck_stored(d, in->q[i]);
    b->dout[i] = selfcheck_stored(d, in->dout[i]);
  }
  for (size_t i = 0; i < NK; i++) {
    b->k[i] = selfcheck_stored(d, in->k[i]);
    b->v[i] = selfcheck_stored(d, in->v[i]);
  }
  const size_t sq[4] = {B, H, TQ, D}, sk[4] = {B, H, TK, D},
               sl[3] = {B, H, TQ}, sm[2] = {TQ, TK};
  rumus_tensor *t[10] = {NULL};
  int st = tensor(sc, d, 4, sq, b->q, NQ, &t[0]);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, sk, b->k, NK, &t[1]);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, sk, b->v, NK, &t[2]);
  if (st == RUMUS_OK) st = tensor(sc, RUMUS_F32, 2, sm, in->mask, NM, &t[3]);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, sq, NULL, 0, &t[4]);
  if (st == RUMUS_OK) st = tensor(sc, RUMUS_F32, 3, sl, NULL, 0, &t[5]);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, sq, b->dout, NQ, &t[6]);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, sq, NULL, 0, &t[7]);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, sk, NULL, 0, &t[8]);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, sk, NULL, 0, &t[9]);
  const rumus_attention_params p = {0.0f, 1};
  const ref_attention_shape rs = {B, H, TQ, TK, D, 1.0 / sqrt((double)D), 1,
                                  in->mask, {0, 0, TK, 1}};
  if (st == RUMUS_OK)
    st = rumus_attention_fwd(sc->ctx, &p, t[0], t[1], t[2], t[3], t[4], t[5]);
  ref_attention_fwd(&rs, b->q, b->k, b->v, b->want, NULL);
  selfcheck_typed_line(sc, "attention_fwd", d, st, t[4], b->got, b->want, NQ,
                       2e-6);
  if (st == RUMUS_OK)
    st = rumus_attention_bwd(sc->ctx, &p, t[0], t[1], t[2], t[3], t[4], t[5],
                             t[6], t[7], t[8], t[9]);
  ref_attention_bwd(&rs, b->q, b->k, b->v, b->dout, b->want, b->want + NQ,
                    b->want + NQ + NK);
  bwd_line(sc, d, st, t + 7, b);
  for (int i = 0; i < 10; i++) rumus_tensor_free(t[i]);
}

void selfcheck_attention(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  buffers *in = malloc(sizeof *in), *b = malloc(sizeof *b);
  if (!in || !b) {
    selfcheck_report(sc, "attention", RUMUS_ENOMEM, 0, 0);
  } else {
    for (size_t i = 0; i < NQ; i++)
      in->q[i] = selfcheck_rand(-2, 2), in->dout[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < NK; i++)
      in->k[i] = selfcheck_rand(-2, 2), in->v[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < NM; i++) in->mask[i] = selfcheck_rand(-2, 0);
    for (int k = 0; k < 3; k++) check_type(sc, TYPES[k], b, in);
  }
  free(in);
  free(b);
}
