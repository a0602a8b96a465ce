/* embedding.c - rumus-info self-check of the embedding lookup and its
 * weight gradient, once per storage type (lines suffixed _f16 and _bf16
 * for the 16-bit types; dweight in dout's type).
 *
 * A 37 x 19 table in [-2, 2), 300 ids (every other one 5, the rest spread
 * over the rows), padding_idx 3, dout in [-1, 1), rounded to the type.
 * The forward copies values (tolerance 0); the backward sums up to 150
 * values per element in float (F32 tolerance 1e-4, plus half an ulp of
 * the type: selfcheck_typed_tol). */
#include <stdio.h>

#include "selfcheck.h"

enum { ROWS = 37, DIM = 19, NPOS = 300, PAD = 3 };

typedef struct {
  rumus_dtype d;
  float w[ROWS * DIM], dy[NPOS * DIM], got[NPOS * DIM];
  double want[NPOS * DIM];
  int32_t ids[NPOS];
} bufs;

static const char *suffix(rumus_dtype d) {
  return d == RUMUS_F16 ? "_f16" : d == RUMUS_BF16 ? "_bf16" : "";
}

static void report(selfcheck *sc, bufs *b, const char *name, int st,
                   const rumus_tensor *t, size_t n, double tol) {
  char line[64];
  snprintf(line, sizeof line, "%s%s", name, suffix(b->d));
  if (st == RUMUS_OK) st = rumus_ctx_sync(sc->ctx);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t, b->got, n);
  if (st != RUMUS_OK) {
    selfcheck_report(sc, line, st, 0, 0);
    return;
  }
  selfcheck_report(sc, line, st, selfcheck_max_err(b->got, b->want, n),
                   tol == 0 ? 0 : selfcheck_typed_tol(b->d, tol, b->want, n));
}

static void check_type(selfcheck *sc, bufs *b) {
  for (size_t i = 0; i < ROWS * DIM; i++)
    b->w[i] = selfcheck_stored(b->d, selfcheck_rand(-2, 2));
  for (size_t i = 0; i < NPOS * DIM; i++)
    b->dy[i] = selfcheck_stored(b->d, selfcheck_rand(-1, 1));
  for (size_t p = 0; p < NPOS; p++)
    b->ids[p] = p % 2 ? 5 : (int32_t)(selfcheck_rand(0, 1) * ROWS) % ROWS;
  const size_t ws[2] = {ROWS, DIM}, is[2] = {NPOS / 50, 50},
               os[3] = {NPOS / 50, 50, DIM};
  rumus_tensor *tw = NULL, *ti = NULL, *to = NULL, *tdy = NULL, *tdw = NULL;
  int st = rumus_tensor_create(sc->ctx, b->d, 2, ws, &tw);
  if (st == RUMUS_OK) st = rumus_tensor_upload_f32(tw, b->w, ROWS * DIM);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, RUMUS_I32, 2, is, &ti);
  if (st == RUMUS_OK) st = rumus_tensor_upload(ti, b->ids, sizeof b->ids);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, b->d, 3, os, &to);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, b->d, 3, os, &tdy);
  if (st == RUMUS_OK) st = rumus_tensor_upload_f32(tdy, b->dy, NPOS * DIM);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, b->d, 2, ws, &tdw);
  if (st == RUMUS_OK) st = rumus_embedding_fwd(sc->ctx, tw, ti, PAD, to);
  ref_embedding_fwd(b->w, ROWS, DIM, b->ids, NPOS, b->want);
  report(sc, b, "embedding_fwd", st, to, NPOS * DIM, 0);
  if (st == RUMUS_OK) st = rumus_embedding_bwd(sc->ctx, tdy, ti, PAD, tdw);
  ref_embedding_bwd(b->dy, b->ids, NPOS, ROWS, DIM, PAD, b->want, NULL, NULL);
  report(sc, b, "embedding_bwd", st, tdw, ROWS * DIM, 1e-4);
  rumus_tensor_free(tw);
  rumus_tensor_free(ti);
  rumus_tensor_free(to);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdw);
}

void selfcheck_embedding(selfcheck *sc) {
  static bufs b;
  const rumus_dtype types[3] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  for (int k = 0; k < 3; k++) {
    b.d = types[k];
    check_type(sc, &b);
  }
}
