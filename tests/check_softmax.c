/*
 * check_softmax.c - softmax / log-softmax forward and backward against the
 * float64 reference, on both variants (work-group and row), over the
 * issue's class and batch sizes, long rows, more rows than one launch
 * covers, special rows, finite differences, in-place calls, guard bytes and
 * bad input; and with F16 and BF16 storage, on a set of shapes that takes
 * every kernel (row, both register rungs, one group per row; aligned and
 * not), special rows, in place with guard bytes, and mixed types.
 *
 * Tolerances (|got - want| <= atol + rtol |want|), F32 storage:
 *   softmax fwd       atol 1e-7, rtol 2e-5  (float exp and a float sum)
 *   log-softmax fwd   atol 2e-5, rtol 2e-6  (values near -log C)
 *   backward          atol 2e-6, rtol 2e-5
 *   backward against central differences of the device's float forward
 *   (h = 1e-2)        atol 2e-3, rtol 1e-2
 * F16 and BF16 storage: the reference takes the inputs as stored (rounded
 * to the type) and the arithmetic is float, so the F32 tolerance holds
 * before the result is stored; storing adds half an ulp of the type
 * (tests/tu_dtype.h):
 *   F16               atol + 2^-25, rtol + 2^-11
 *   BF16              rtol + 2^-8
 * The bounds are tight: values just above a power of two round by nearly
 * half an ulp, and the largest errors seen reach 0.82 (softmax backward,
 * F16) to 0.995 (log-softmax, BF16) of them on both variants, so they need
 * every output rounded once: the row forward recomputes what the F32 one
 * keeps in y between passes, since rounding there too exceeds them.
 * There is no finite-difference check for 16-bit storage: a step that
 * moves a BF16 input by whole ulps (2^-8 of it) is too coarse for a
 * central difference to say anything the reference comparison does not.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

static const size_t CLASSES[] = {1, 63, 64, 65, 1000, 50257};
static const size_t BATCHES[] = {1, 7, 4097};
#define NC (sizeof CLASSES / sizeof CLASSES[0])
#define NB (sizeof BATCHES / sizeof BATCHES[0])
/* Batch 4097 at 50257 classes (823 MB a tensor, the float64 reference
 * twice that) runs as LONG_ROW_BATCH rows: 4097 x 1000 covers the batch,
 * and 67 rows give the work-group variant's one-group-per-row kernels many
 * groups at that row length. */
#define LONG_ROW_BATCH 67
#define MAX_ELEMS ((size_t)1 << 24)

/* The header's tolerance of an op (FWD, FWD_LOG, BWD) on storage d. */
enum { FWD, FWD_LOG, BWD };
static void tol_of(rumus_dtype d, int op, double *atol, double *rtol) {
  static const double ATOL[3] = {1e-7, 2e-5, 2e-6};
  static const double RTOL[3] = {2e-5, 2e-6, 2e-5};
  *atol = ATOL[op] + tu_store_atol(d);
  *rtol = RTOL[op] + tu_store_rtol(d);
}

/* A copy of n floats rounded to what storage d holds (malloc'ed). */
static float *rounded(rumus_dtype d, const float *x, size_t n) {
  float *r = tu_malloc(n * sizeof *r);
  memcpy(r, x, n * sizeof *r);
  tu_round_to(d, r, n);
  return r;
}

/* "softmax_<what>_<variant>_<B>x<C>", with "_f16" / "_bf16" after the op
 * for 16-bit storage. */
static void case_name(char *buf, size_t len, rumus_dtype d, const char *op,
                      const char *what, int v, size_t B, size_t C) {
  snprintf(buf, len, "%s%s%s_%s_%s_%zux%zu", op, d == RUMUS_F32 ? "" : "_",
           d == RUMUS_F32 ? "" : tu_dtype_name(d), what,
           tu_variant_name(tu_variants[v]), B, C);
}

/* The forward of x stored as d (x is rounded to d first), on both
 * variants, against the reference of the stored x. */
static void run_fwd(rumus_ctx *ctx, rumus_dtype d, const float *x0, size_t B,
                    size_t C, int log_mode, const char *what) {
  const size_t shape[2] = {B, C};
  float *x = rounded(d, x0, B * C);
  rumus_tensor *tx = tu_tensor_typed(ctx, d, 2, shape, x),
               *ty = tu_tensor_typed(ctx, d, 2, shape, NULL);
  double *want = malloc(B * C * sizeof *want), atol, rtol;
  ref_softmax_fwd(x, B, C, log_mode, want);
  tol_of(d, log_mode ? FWD_LOG : FWD, &atol, &rtol);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, (log_mode ? rumus_log_softmax_fwd : rumus_softmax_fwd)(ctx, tx, ty));
    TU_OK(ctx, rumus_ctx_sync(ctx));
    float *got = tu_download_f32(ctx, ty);
    char name[128];
    case_name(name, sizeof name, d, log_mode ? "log_softmax" : "softmax", what,
              v, B, C);
    tu_check_close(name, got, want, B * C, atol, rtol);
    free(got);
  }
  free(want);
  free(x);
  rumus_tensor_free(tx);
  rumus_tensor_free(ty);
}

/* The backward at y with dy, both stored as d (rounded first). */
static void run_bwd(rumus_ctx *ctx, rumus_dtype d, const float *y0,
                    const float *dy0, size_t B, size_t C, int log_mode,
                    const char *what) {
  const size_t shape[2] = {B, C};
  float *y = rounded(d, y0, B * C), *dy = rounded(d, dy0, B * C);
  rumus_tensor *ty = tu_tensor_typed(ctx, d, 2, shape, y),
               *tdy = tu_tensor_typed(ctx, d, 2, shape, dy),
               *tdx = tu_tensor_typed(ctx, d, 2, shape, NULL);
  double *want = malloc(B * C * sizeof *want), atol, rtol;
  ref_softmax_bwd(y, dy, B, C, log_mode, want);
  tol_of(d, BWD, &atol, &rtol);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, (log_mode ? rumus_log_softmax_bwd : rumus_softmax_bwd)(ctx, ty, tdy, tdx));
    float *got = tu_download_f32(ctx, tdx);
    char name[128];
    case_name(name, sizeof name, d,
              log_mode ? "log_softmax_bwd" : "softmax_bwd", what, v, B, C);
    tu_check_close(name, got, want, B * C, atol, rtol);
    free(got);
  }
  free(want);
  free(y);
  free(dy);
  rumus_tensor_free(ty);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdx);
}

/* For softmax and log-softmax, storage d: the forward of x (if with_fwd),
 * then the backward at y = the reference forward of x as stored. */
static void run_bwd_of(rumus_ctx *ctx, rumus_dtype d, const float *x0,
                       const float *dy, size_t B, size_t C, int with_fwd,
                       const char *what) {
  float *x = rounded(d, x0, B * C), *y = malloc(B * C * sizeof *y);
  double *yd = malloc(B * C * sizeof *yd);
  for (int log_mode = 0; log_mode < 2; log_mode++) {
    if (with_fwd) run_fwd(ctx, d, x, B, C, log_mode, what);
    ref_softmax_fwd(x, B, C, log_mode, yd);
    for (size_t i = 0; i < B * C; i++) y[i] = (float)yd[i];
    run_bwd(ctx, d, y, dy, B, C, log_mode, what);
  }
  free(x);
  free(y);
  free(yd);
}

/* Loop index -> (B, C); shapes over MAX_ELEMS take LONG_ROW_BATCH rows. */
static void shape_of(int i, size_t *B, size_t *C) {
  *B = BATCHES[i / NC];
  *C = CLASSES[i % NC];
  if (*B * *C > MAX_ELEMS) *B = LONG_ROW_BATCH;
}

START_TEST(fwd_random_shapes) {
  size_t B, C;
  shape_of(_i, &B, &C);
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, (uint64_t)_i + 1);
  float *x = malloc(B * C * sizeof *x);
  tu_fill_uniform(&r, x, B * C, -8.0f, 8.0f);
  run_fwd(ctx, RUMUS_F32, x, B, C, 0, "uniform");
  run_fwd(ctx, RUMUS_F32, x, B, C, 1, "uniform");
  free(x);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(bwd_random_shapes) {
  size_t B, C;
  shape_of(_i, &B, &C);
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, (uint64_t)_i + 100);
  float *x = malloc(B * C * sizeof *x), *dy = malloc(B * C * sizeof *dy);
  tu_fill_uniform(&r, x, B * C, -4.0f, 4.0f);
  tu_fill_uniform(&r, dy, B * C, -1.0f, 1.0f);
  run_bwd_of(ctx, RUMUS_F32, x, dy, B, C, 0, "uniform");
  free(x);
  free(dy);
  tu_free_all(ctx, NULL);
}
END_TEST

/* F16 (_i 0) and BF16 (_i 1) storage on shapes that take every kernel:
 * one work-item per row (row variant: every shape, runs of ROW_RUN rows
 * ending short at 37 and 33 rows, tails of fewer than 8 at 67 and 8193),
 * the register rungs of 128 (C <= 4096: 1, 67, 1000, 1004) and 256
 * work-items (6000), one group per row (8193, 8196, 12000); the aligned
 * programs where C is a multiple of 4: groups of 8 elements where it is a
 * multiple of 8 (1000, 6000, 12000), of 4 where not (1004, 8196).
 * Forward, then backward at the forward's reference, softmax and
 * log-softmax, both variants. */
START_TEST(typed_paths) {
  static const size_t SHAPES[][2] = {{7, 1},    {37, 67},   {33, 1000},
                                     {5, 1004}, {5, 6000},  {3, 8193},
                                     {2, 8196}, {2, 12000}};
  const rumus_dtype d = tu_dtypes[1 + _i];
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++) {
    const size_t B = SHAPES[k][0], C = SHAPES[k][1];
    tu_rng r;
    tu_rng_seed(&r, 200 + k);
    float *x = tu_malloc(B * C * sizeof *x);
    float *dy = tu_malloc(B * C * sizeof *dy);
    tu_fill_uniform(&r, x, B * C, -8.0f, 8.0f);
    tu_fill_uniform(&r, dy, B * C, -1.0f, 1.0f);
    run_bwd_of(ctx, d, x, dy, B, C, 1, "paths");
    free(x);
    free(dy);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Rows past what the register rungs hold (4 * 256 * 8 = 8192), which the
 * work-group variant gives the strided _wg kernels (second pass backwards),
 * at and around lengths where the blocks of WG float4 end exactly or with a
 * tail, with a peak in the last element and a range wide enough that exp
 * underflows for part of each row. */
START_TEST(long_rows) {
  static const size_t CS[] = {8193, 8200, 20000, 32769};
  const size_t B = 3;
  rumus_ctx *ctx = tu_ctx();
  for (size_t c = 0; c < sizeof CS / sizeof CS[0]; c++) {
    const size_t C = CS[c];
    tu_rng r;
    tu_rng_seed(&r, 40 + c);
    float *x = malloc(B * C * sizeof *x), *dy = malloc(B * C * sizeof *dy);
    tu_fill_uniform(&r, x, B * C, -60.0f, 20.0f);
    x[C - 1] = 30.0f;
    tu_fill_uniform(&r, dy, B * C, -1.0f, 1.0f);
    run_bwd_of(ctx, RUMUS_F32, x, dy, B, C, 1, "long");
    free(x);
    free(dy);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* RUMUS_ROWS_WIDE_RUNG=1: rows past the default rungs (8193 to 32768
 * elements) held in the registers of 512 work-items (the _wgc kernels at
 * CACHE_V4 16), F32 and F16 storage (odd lengths, 8-aligned 16-bit
 * rows), against the reference on both variants; the kernels' profile
 * shows that the _wgc kernels ran, and rows past 32768 still take _wg. */
START_TEST(wide_rung_opt_in) {
  static const size_t CS[] = {8193, 20000, 32768, 32769};
  const size_t B = 3;
  setenv("RUMUS_ROWS_WIDE_RUNG", "1", 1);
  rumus_ctx *ctx = tu_profiling_ctx();
  for (size_t c = 0; c < sizeof CS / sizeof CS[0]; c++) {
    const size_t C = CS[c];
    tu_rng r;
    tu_rng_seed(&r, 60 + c);
    float *x = malloc(B * C * sizeof *x), *dy = malloc(B * C * sizeof *dy);
    tu_fill_uniform(&r, x, B * C, -60.0f, 20.0f);
    x[C - 1] = 30.0f;
    tu_fill_uniform(&r, dy, B * C, -1.0f, 1.0f);
    for (int d = 0; d < 2; d++) {
      run_bwd_of(ctx, d ? RUMUS_F16 : RUMUS_F32, x, dy, B, C, 1, "wide");
      const int wide = C <= 32768;
      static const char *const K[] = {"softmax_fwd_wgc", "log_softmax_fwd_wgc",
                                      "softmax_bwd_wgc", "log_softmax_bwd_wgc"};
      int seen[4];
      for (int k = 0; k < 4; k++) seen[k] = 0;
      /* One profile for the four (each call forgets what it counted). */
      static rumus_kernel_stat ks[1024];
      size_t n = 0;
      TU_OK(ctx, rumus_ctx_kernel_profile(ctx, ks, 1024, &n));
      for (size_t i = 0; i < n && i < 1024; i++)
        for (int k = 0; k < 4; k++)
          seen[k] |= strcmp(ks[i].kernel, K[k]) == 0 && ks[i].launches > 0;
      for (int k = 0; k < 4; k++)
        ck_assert_msg(seen[k] == wide, "%s at %zu columns (%s): %s", K[k], C,
                      d ? "F16" : "F32", seen[k] ? "ran" : "did not run");
    }
    free(x);
    free(dy);
  }
  unsetenv("RUMUS_ROWS_WIDE_RUNG");
  tu_free_all(ctx, NULL);
}
END_TEST

/* More rows than one launch of the work-group variant covers: its kernels
 * go in chunks of RUMUS__MAX_WG_ROWS = 2^22 rows (src/ops/ops.h), each with
 * its own row offsets.  2^22 + 37 rows of 3 classes (50 MB a tensor), the
 * forward (two tensors) and the backward at the device's forward (three),
 * every row compared with the header's tolerances; outputs start as NaN, so
 * a row that no chunk writes fails.  Softmax only (log-softmax shares the
 * launch code): each call takes about 1 s on PoCL.  The row variant
 * launches 2^30 rows at once (4 GiB of one-class rows): not tested. */
START_TEST(chunked_rows) {
  const size_t B = ((size_t)1 << 22) + 37, C = 3, n = B * C;
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  tu_rng r;
  tu_rng_seed(&r, 61);
  float *x = tu_malloc(n * sizeof *x), *dy = tu_malloc(n * sizeof *dy);
  double *want = tu_malloc(n * sizeof *want);
  tu_fill_uniform(&r, x, n, -8.0f, 8.0f);
  tu_fill_uniform(&r, dy, n, -1.0f, 1.0f);
  const size_t shape[2] = {B, C};
  const char *what = "softmax chunked_rows 4194341 x 3";
  rumus_tensor *tx = tu_tensor_or_skip(ctx, RUMUS_F32, 2, shape, x, what);
  rumus_tensor *ty =
      tx ? tu_tensor_or_skip(ctx, RUMUS_F32, 2, shape, NULL, what) : NULL;
  rumus_tensor *tdy =
      ty ? tu_tensor_or_skip(ctx, RUMUS_F32, 2, shape, dy, what) : NULL;
  rumus_tensor *tdx =
      tdy ? tu_tensor_or_skip(ctx, RUMUS_F32, 2, shape, NULL, what) : NULL;
  if (tdx) {
    TU_OK(ctx, rumus_tensor_fill(ty, NAN));
    TU_OK(ctx, rumus_softmax_fwd(ctx, tx, ty));
    float *y = tu_download(ctx, ty);
    ref_softmax_fwd(x, B, C, 0, want);
    tu_check_close("softmax_chunked_fwd", y, want, n, 1e-7, 2e-5);
    TU_OK(ctx, rumus_tensor_fill(tdx, NAN));
    TU_OK(ctx, rumus_softmax_bwd(ctx, ty, tdy, tdx));
    float *dx = tu_download(ctx, tdx);
    ref_softmax_bwd(y, dy, B, C, 0, want);
    tu_check_close("softmax_chunked_bwd", dx, want, n, 2e-6, 2e-5);
    free(y);
    free(dx);
  }
  free(x);
  free(dy);
  free(want);
  tu_free_all(ctx, tx, ty, tdy, tdx, NULL);
}
END_TEST

/* Rows of +-1e4, of equal values, with -INFINITY entries, all -INFINITY,
 * with one NaN (a NaN row, as in PyTorch, whichever lane meets it first,
 * also where it comes before any finite entry);
 * stored as tu_dtypes[_i % 3], in rows of 70 (_wgc on the work-group
 * variant) or, for _i >= 3, of 8200 (_wg; 16-bit rows in groups of 8,
 * whose first pass updates the (max, sum) pair once a group). */
START_TEST(fwd_special_rows) {
  const rumus_dtype d = tu_dtypes[_i % 3];
  rumus_ctx *ctx = tu_ctx();
  const size_t B = 8, C = _i < 3 ? 70 : 8200;
  float *x = tu_malloc(B * C * sizeof *x);
  tu_rng r;
  tu_rng_seed(&r, 7);
  for (size_t j = 0; j < C; j++) {
    x[0 * C + j] = (j % 2) ? 1e4f : -1e4f;
    x[1 * C + j] = 1e4f - (float)j;
    x[2 * C + j] = 3.25f;
    x[3 * C + j] = (j % 3 == 0) ? -INFINITY : tu_uniform(&r, -3, 3);
    x[4 * C + j] = (j == C - 1) ? 0.5f : -INFINITY; /* one finite, last */
    x[5 * C + j] = -INFINITY;                       /* NaN, as in PyTorch */
    /* NaN first among -INFINITY: a group of 8 with no finite lane. */
    x[6 * C + j] = (j == 0) ? NAN : (j < 8) ? -INFINITY : tu_uniform(&r, -3, 3);
    x[7 * C + j] = (j == 0) ? -INFINITY : (j == 37) ? NAN : 1.0f;
  }
  run_fwd(ctx, d, x, B, C, 0, "special");
  run_fwd(ctx, d, x, B, C, 1, "special");
  free(x);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Central finite differences of L = sum(g * f(x)) through the device's own
 * forward, against the device's backward. */
START_TEST(bwd_finite_differences) {
  rumus_ctx *ctx = tu_ctx();
  enum { B = 3, C = 9 };
  const double h = 1e-2;
  tu_rng r;
  tu_rng_seed(&r, 42);
  float x[B * C], g[B * C], xp[B * C];
  tu_fill_uniform(&r, x, B * C, -2, 2);
  tu_fill_uniform(&r, g, B * C, -1, 1);
  rumus_tensor *tx = tu_tensor_2d(ctx, B, C, x), *ty = tu_tensor_2d(ctx, B, C, NULL),
               *tg = tu_tensor_2d(ctx, B, C, g), *tdx = tu_tensor_2d(ctx, B, C, NULL);
  for (int log_mode = 0; log_mode < 2; log_mode++) {
    int (*fwd)(rumus_ctx *, const rumus_tensor *, rumus_tensor *) =
        log_mode ? rumus_log_softmax_fwd : rumus_softmax_fwd;
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_tensor_upload(tx, x, sizeof x));
      TU_OK(ctx, fwd(ctx, tx, ty));
      TU_OK(ctx, (log_mode ? rumus_log_softmax_bwd : rumus_softmax_bwd)(ctx, ty, tg, tdx));
      float *dx = tu_download(ctx, tdx);
      double numeric[B * C];
      for (size_t i = 0; i < B * C; i++) {
        double l[2];
        for (int s = 0; s < 2; s++) {
          memcpy(xp, x, sizeof x);
          xp[i] += (float)(s ? -h : h);
          TU_OK(ctx, rumus_tensor_upload(tx, xp, sizeof xp));
          TU_OK(ctx, fwd(ctx, tx, ty));
          float *y = tu_download(ctx, ty);
          l[s] = 0;
          for (size_t j = 0; j < B * C; j++) l[s] += (double)g[j] * y[j];
          free(y);
        }
        numeric[i] = (l[0] - l[1]) / (2 * h);
      }
      tu_check_close(log_mode ? "log_softmax_fd" : "softmax_fd", dx, numeric, B * C, 2e-3, 1e-2);
      free(dx);
    }
  }
  tu_free_all(ctx, tx, ty, tg, tdx, NULL);
}
END_TEST

/* In place, in borrowed buffers at an offset with guard bytes, 3-D: the
 * forward with y == x, then the backward at that y with dx == dy, both
 * compared with the reference (tolerances of the header).  Storage, row
 * length and offset by _i (IN_PLACE): F32, F16 and BF16 in rows of 67 (not
 * aligned: the wgc kernels' partial float4 groups, the row kernels' F16
 * groups of 4 at every alignment), F16 in rows of 64 (8-aligned: typed
 * accesses of 8 elements), BF16 in rows of 64 at an element offset of 4
 * and in rows of 68 (4-aligned only: typed float4 groups). */
static const struct {
  int dtype;     /* index in tu_dtypes */
  size_t C, odd; /* row length; element offset past the 4096-byte guard */
} IN_PLACE[] = {{0, 67, 0}, {1, 67, 0}, {2, 67, 0},
                {1, 64, 0}, {2, 64, 4}, {2, 68, 0}};
#define N_IN_PLACE (sizeof IN_PLACE / sizeof IN_PLACE[0])

START_TEST(in_place_and_guards) {
  const rumus_dtype d = tu_dtypes[IN_PLACE[_i].dtype];
  const size_t odd = IN_PLACE[_i].odd;
  rumus_ctx *ctx = tu_ctx();
  const size_t C = IN_PLACE[_i].C, shape[3] = {3, 5, C};
  const size_t B = 15, n = B * C;
  float *x = tu_malloc(n * sizeof *x), *dy = tu_malloc(n * sizeof *dy);
  double *want = tu_malloc(n * sizeof *want), atol[3], rtol[3];
  tu_rng r;
  tu_rng_seed(&r, 3);
  tu_fill_uniform(&r, x, n, -5, 5);
  tu_fill_uniform(&r, dy, n, -1, 1);
  tu_round_to(d, x, n);
  tu_round_to(d, dy, n);
  for (int op = 0; op < 3; op++) tol_of(d, op, &atol[op], &rtol[op]);
  for (int log_mode = 0; log_mode < 2; log_mode++) {
    int (*fwd)(rumus_ctx *, const rumus_tensor *, rumus_tensor *) =
        log_mode ? rumus_log_softmax_fwd : rumus_softmax_fwd;
    int (*bwd)(rumus_ctx *, const rumus_tensor *, const rumus_tensor *,
               rumus_tensor *) =
        log_mode ? rumus_log_softmax_bwd : rumus_softmax_bwd;
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      char name[64], name_bwd[72];
      case_name(name, sizeof name, d, log_mode ? "log_softmax" : "softmax",
                "in_place", v, B, C);
      snprintf(name_bwd, sizeof name_bwd, "%s_bwd", name);
      tu_guarded g = tu_guarded_typed_odd(ctx, d, 3, shape, x, odd);
      TU_OK(ctx, fwd(ctx, g.t, g.t));
      float *y = tu_download_f32(ctx, g.t);
      ref_softmax_fwd(x, B, C, log_mode, want);
      const int op = log_mode ? FWD_LOG : FWD;
      tu_check_close(name, y, want, n, atol[op], rtol[op]);
      tu_guarded gd = tu_guarded_typed_odd(ctx, d, 3, shape, dy, odd);
      TU_OK(ctx, bwd(ctx, g.t, gd.t, gd.t));
      float *dx = tu_download_f32(ctx, gd.t);
      ref_softmax_bwd(y, dy, B, C, log_mode, want);
      tu_check_close(name_bwd, dx, want, n, atol[BWD], rtol[BWD]);
      free(y);
      free(dx);
      tu_guarded_check_free(ctx, &gd);
      tu_guarded_check_free(ctx, &g);
    }
  }
  free(x);
  free(dy);
  free(want);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  size_t s0[2] = {0, 5}, s1[2] = {4, 0};
  rumus_tensor *a = tu_tensor(ctx, RUMUS_F32, 2, s0, NULL), *b = tu_tensor(ctx, RUMUS_F32, 2, s1, NULL);
  TU_OK(ctx, rumus_softmax_fwd(ctx, a, a));
  TU_OK(ctx, rumus_log_softmax_bwd(ctx, b, b, b));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, a, b, NULL);
}
END_TEST

START_TEST(bad_input) {
  rumus_ctx *ctx = tu_ctx();
  size_t s[2] = {4, 8}, s2[2] = {4, 9};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 2, s, NULL), *y = tu_tensor(ctx, RUMUS_F32, 2, s, NULL),
               *z = tu_tensor(ctx, RUMUS_F32, 2, s2, NULL), *i = tu_tensor(ctx, RUMUS_I32, 2, s, NULL),
               *scalar = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  TU_STATUS(RUMUS_ENULL, rumus_softmax_fwd(NULL, x, y));
  TU_STATUS(RUMUS_ENULL, rumus_softmax_fwd(ctx, NULL, y));
  TU_STATUS(RUMUS_ENULL, rumus_log_softmax_fwd(ctx, x, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_softmax_bwd(ctx, x, NULL, y));
  TU_STATUS(RUMUS_EDTYPE, rumus_softmax_fwd(ctx, i, y));
  TU_STATUS(RUMUS_EDTYPE, rumus_log_softmax_bwd(ctx, x, y, i));
  TU_STATUS(RUMUS_ESHAPE, rumus_softmax_fwd(ctx, x, z));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[4, 8]") && strstr(rumus_ctx_errmsg(ctx), "[4, 9]"),
                "message names the shapes: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_softmax_bwd(ctx, x, y, z));
  TU_STATUS(RUMUS_ESHAPE, rumus_softmax_fwd(ctx, scalar, scalar));
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 2, s, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_softmax_fwd(ctx, o, y));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  tu_free_all(ctx, x, y, z, i, scalar, NULL);
}
END_TEST

/* Every tensor of a call has the first one's type: mixed floating types
 * and integer tensors are RUMUS_EDTYPE, naming the argument; nothing is
 * enqueued. */
START_TEST(bad_types) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s[2] = {4, 8};
  rumus_tensor *f32 = tu_tensor_typed(ctx, RUMUS_F32, 2, s, NULL),
               *f16 = tu_tensor_typed(ctx, RUMUS_F16, 2, s, NULL),
               *f16b = tu_tensor_typed(ctx, RUMUS_F16, 2, s, NULL),
               *bf16 = tu_tensor_typed(ctx, RUMUS_BF16, 2, s, NULL),
               *i32 = tu_tensor(ctx, RUMUS_I32, 2, s, NULL);
  TU_STATUS(RUMUS_EDTYPE, rumus_softmax_fwd(ctx, f16, bf16));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "y is bf16, expected f16"),
                "%s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_log_softmax_fwd(ctx, f32, f16));
  TU_STATUS(RUMUS_EDTYPE, rumus_softmax_fwd(ctx, bf16, f32));
  TU_STATUS(RUMUS_EDTYPE, rumus_log_softmax_fwd(ctx, i32, i32));
  TU_STATUS(RUMUS_EDTYPE, rumus_softmax_bwd(ctx, f16, bf16, f16b));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "dy is bf16"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_log_softmax_bwd(ctx, f16, f16b, f32));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "dx is f32"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_softmax_bwd(ctx, bf16, i32, bf16));
  TU_STATUS(RUMUS_EDTYPE, rumus_log_softmax_bwd(ctx, i32, f16, f16b));
  /* One type throughout is fine, in place too. */
  TU_OK(ctx, rumus_tensor_fill(f16, 1.0f));
  TU_OK(ctx, rumus_softmax_fwd(ctx, f16, f16));
  TU_OK(ctx, rumus_log_softmax_bwd(ctx, f16, f16b, f16b));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, f32, f16, f16b, bf16, i32, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("softmax");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, fwd_random_shapes, 0, (int)(NB * NC));
  tcase_add_loop_test(core, bwd_random_shapes, 0, (int)(NB * NC));
  tcase_add_loop_test(core, typed_paths, 0, 2);
  tcase_add_test(core, bwd_finite_differences);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_loop_test(limits, fwd_special_rows, 0, 6);
  tcase_add_test(limits, long_rows);
  tcase_add_test(limits, wide_rung_opt_in);
  tcase_add_test(limits, chunked_rows);
  tcase_add_loop_test(limits, in_place_and_guards, 0, (int)N_IN_PLACE);
  tcase_add_test(limits, empty_tensors);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_input);
  tcase_add_test(errors, bad_types);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
