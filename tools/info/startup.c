/*
 * startup.c - rumus-info -s: what an application waits for before its
 * first result: a fresh context on the chosen device runs one
 * cross-entropy (128 x 10 logits, gradient, MEAN) and syncs, after filling
 * the program cache if `fill` is set.  Run it with an empty POCL_CACHE_DIR
 * (or another driver's cache emptied) for the cold figures, and again for
 * the warm ones; each run of a cold measure needs its own empty cache.
 */
#include <stdio.h>
#include <time.h>

#include "selfcheck.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* One cross-entropy forward and backward with a sync; RUMUS_OK or a
 * status (the message is printed). */
static int first_xent(rumus_ctx *ctx) {
  enum { ROWS = 128, COLS = 10 };
  float x[ROWS * COLS];
  int32_t t[ROWS];
  for (int i = 0; i < ROWS * COLS; i++) x[i] = selfcheck_rand(-2, 2);
  for (int i = 0; i < ROWS; i++) t[i] = i % COLS;
  const size_t shape[2] = {ROWS, COLS};
  rumus_tensor *tx = NULL, *tg = NULL, *tt = NULL, *tl = NULL;
  int st = rumus_tensor_create(ctx, RUMUS_F32, 2, shape, &tx);
  if (st == RUMUS_OK) st = rumus_tensor_create(ctx, RUMUS_F32, 2, shape, &tg);
  if (st == RUMUS_OK) st = rumus_tensor_create(ctx, RUMUS_I32, 1, shape, &tt);
  if (st == RUMUS_OK) st = rumus_tensor_create(ctx, RUMUS_F32, 0, NULL, &tl);
  if (st == RUMUS_OK) st = rumus_tensor_upload(tx, x, sizeof x);
  if (st == RUMUS_OK) st = rumus_tensor_upload(tt, t, sizeof t);
  if (st == RUMUS_OK) st = rumus_cross_entropy(ctx, tx, tt, tl, tg, NULL);
  if (st == RUMUS_OK) st = rumus_ctx_sync(ctx);
  if (st != RUMUS_OK)
    printf("  cross-entropy: %s: %s\n", rumus_err_name(st),
           rumus_ctx_errmsg(ctx));
  rumus_tensor_free(tx);
  rumus_tensor_free(tg);
  rumus_tensor_free(tt);
  rumus_tensor_free(tl);
  return st;
}

/* Times one start-up: context, optionally the cache fill, the first op. */
static int time_startup(const char *device, int fill) {
  const double t0 = now_ms();
  rumus_ctx *ctx = NULL;
  int st = rumus_ctx_create(&ctx, device, 0);
  if (st != RUMUS_OK) {
    printf("  context: %s: %s\n", rumus_err_name(st),
           rumus_last_create_error());
    return st;
  }
  const double t1 = now_ms();
  if (fill) st = rumus_cache_fill(ctx);
  const double t2 = now_ms();
  if (st == RUMUS_OK) st = first_xent(ctx);
  const double t3 = now_ms();
  rumus_cache_info info = {0, 0};
  rumus_cache_stats(ctx, &info);
  if (st == RUMUS_OK)
    printf("  %-15s context %7.1f ms, fill %7.1f ms, first cross-entropy "
           "%7.1f ms, total %7.1f ms (%llu programs built)\n",
           fill ? "with the fill:" : "without it:", t1 - t0, t2 - t1,
           t3 - t2, t3 - t0, (unsigned long long)info.builds);
  else
    printf("  %s: %s\n", rumus_err_name(st), rumus_ctx_errmsg(ctx));
  rumus_ctx_free(ctx);
  return st;
}

int startup_report(const char *device, int fill) {
  printf("start-up (context, cross-entropy 128 x 10 with gradient, sync):\n");
  return time_startup(device, fill) == RUMUS_OK ? 0 : 1;
}
