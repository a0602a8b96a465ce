/*
 * fortran_c_side.c - the C half of tests/check_fortran.f90: the same ops on
 * the same inputs through the C API, on a context of its own, so that the
 * Fortran program can compare the results bit for bit.
 */
#include <stddef.h>

#include "rumus.h"

/* x [4, 6] and w [3, 6] as check_fortran.f90 fills them (Fortran x(6, 4),
 * w(6, 3)); results: softmax(x) [4, 6], x w^T [4, 3], the mean
 * cross-entropy of x against targets, and w after one AdamW step with the
 * gradient x[0:3, :]. */
int fortran_c_side(const float *x, const float *w, const int *targets,
                   float *softmax, float *gemm, float *loss, float *w_after) {
  rumus_ctx *ctx = NULL;
  int st = rumus_ctx_create(&ctx, NULL, 0);
  if (st != RUMUS_OK) return st;
  const size_t sx[2] = {4, 6}, sw[2] = {3, 6}, sc[2] = {4, 3}, st4[1] = {4};
  rumus_tensor *tx = NULL, *tw = NULL, *ty = NULL, *tc = NULL, *tt = NULL,
               *tl = NULL, *tg = NULL, *tm = NULL, *tv = NULL, *tgr = NULL;
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sx, &tx);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sw, &tw);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sx, &ty);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sc, &tc);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_I32, 1, st4, &tt);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 0, NULL, &tl);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sx, &tg);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sw, &tm);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sw, &tv);
  if (!st) st = rumus_tensor_create(ctx, RUMUS_F32, 2, sw, &tgr);
  if (!st) st = rumus_tensor_upload(tx, x, 24 * sizeof(float));
  if (!st) st = rumus_tensor_upload(tw, w, 18 * sizeof(float));
  if (!st) st = rumus_tensor_upload(tt, targets, 4 * sizeof(int));
  if (!st) st = rumus_tensor_upload(tgr, x, 18 * sizeof(float));
  if (!st) st = rumus_tensor_fill(tm, 0.0f);
  if (!st) st = rumus_tensor_fill(tv, 0.0f);
  if (!st) st = rumus_softmax_fwd(ctx, tx, ty);
  if (!st) st = rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0f, tx, tw, 0.0f, tc);
  if (!st) st = rumus_cross_entropy(ctx, tx, tt, tl, tg, NULL);
  const rumus_adam_params adam = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  if (!st) st = rumus_adam_step(ctx, &adam, 1, tw, tgr, tm, tv);
  if (!st) st = rumus_tensor_download(ty, softmax, 24 * sizeof(float));
  if (!st) st = rumus_tensor_download(tc, gemm, 12 * sizeof(float));
  if (!st) st = rumus_tensor_download(tl, loss, sizeof(float));
  if (!st) st = rumus_tensor_download(tw, w_after, 18 * sizeof(float));
  if (!st) st = rumus_ctx_sync(ctx);
  rumus_tensor *all[] = {tx, tw, ty, tc, tt, tl, tg, tm, tv, tgr};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) rumus_tensor_free(all[i]);
  rumus_ctx_free(ctx);
  return st;
}
