/*
 * check_batchnorm.c - channel bias add / gradient and batch norm 2d
 * (training forward with running statistics, evaluation forward,
 * backward) against the float64 reference, on both variants, every
 * storage type, shapes with 1x1 images, N = 1, C = 1 and 5, odd H x W,
 * and 64 x 3 x 28 x 28 (several ranges per channel: the two-stage
 * reduction); the CPU variant's two paths (two-stage, a channel per
 * work-item) forced on C = 1, 5, 9, 16, and its streaming stores (the
 * bits of plain ones); affine and not; inputs and
 * outputs in borrowed buffers at
 * odd element offsets with guard bytes; in place; bits equal run to run;
 * statistics of values far from 0 (1000 + U(-1, 1)); a NaN confined to
 * its channel; empty tensors;
 * backward by central finite differences of the float64 forward; bad
 * arguments with exact statuses.
 *
 * Tolerances (|got - want| <= atol + rtol |want|), F32 storage, inputs x
 * in [-3, 5), dy in [-1, 1), gamma in [0.5, 2), beta in [-1, 1):
 *   save_mean, running stats     atol 1e-5, rtol 1e-5
 *   save_invstd                  rtol 2e-5
 *   y (train and eval), bias add atol 2e-5, rtol 2e-5
 *   dx                           atol 5e-5, rtol 1e-4
 *   sums (db, dgamma, dbeta)     4e-6 * sum |terms| + 1e-6 (float sums of
 *                                up to 50176 terms in ranges)
 *   dx, dgamma, dbeta against central differences of the float64
 *   forward (h = 1e-2 on float inputs)   atol 1e-3, rtol 1e-2
 * F16 and BF16 storage of x, y, dy, dx (and of the bias when not F32):
 * the reference takes the inputs as stored, and storing a result adds
 * half an ulp of the type (tu_store_rtol / tu_store_atol); the F32
 * per-channel outputs keep the F32 tolerances.  The backward's reference
 * uses the device's save_mean and save_invstd, as PyTorch's does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

typedef struct {
  size_t N, C, H, W;
} shp;

static const shp SHAPES[] = {{3, 5, 1, 1}, {1, 5, 7, 5},  {2, 1, 7, 5},
                             {3, 5, 7, 5}, {2, 3, 2, 1},  {64, 3, 28, 28}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static size_t numel(const shp *s) { return s->N * s->C * s->H * s->W; }

/* The element offset of the test tensors past their guard: 3 (odd: the
 * GPU variant's unaligned program), or 4 in the aligned tests (16 bytes
 * in F32: its RUMUS_ALIGN4 program where H * W is a multiple of 4). */
static size_t elem_off = 3;

/* A guarded tensor (tu_guarded_check_free checks it) whose data starts
 * elem_off elements past a 4096-byte guard. */
static tu_guarded odd_guarded(rumus_ctx *ctx, rumus_dtype d, int ndim,
                              const size_t *shape, const float *data) {
  return tu_guarded_typed_odd(ctx, d, ndim, shape, data, elem_off);
}

static tu_guarded g4(rumus_ctx *ctx, rumus_dtype d, const shp *s,
                     const float *data) {
  const size_t shape[4] = {s->N, s->C, s->H, s->W};
  return odd_guarded(ctx, d, 4, shape, data);
}
static tu_guarded g1(rumus_ctx *ctx, rumus_dtype d, size_t C,
                     const float *data) {
  const size_t shape[1] = {C};
  return odd_guarded(ctx, d, 1, shape, data);
}

/* A copy of n floats rounded to what storage d holds (malloc'ed). */
static float *rounded(rumus_dtype d, const float *x, size_t n) {
  float *r = tu_malloc(n * sizeof *r);
  memcpy(r, x, n * sizeof *r);
  tu_round_to(d, r, n);
  return r;
}

/* "<op>[_f16|_bf16]_<variant>_NxCxHxW". */
static const char *name_of(char *buf, size_t len, const char *op,
                           rumus_dtype d, int v, const shp *s) {
  snprintf(buf, len, "%s%s%s_%s_%zux%zux%zux%zu", op,
           d == RUMUS_F32 ? "" : "_", d == RUMUS_F32 ? "" : tu_dtype_name(d),
           tu_variant_name(tu_variants[v]), s->N, s->C, s->H, s->W);
  return buf;
}

/* Per-channel bound 4e-6 * sum |terms| + 1e-6 for sums over channel c of
 * a[i] (* b[i] if b). */
static void sum_bounds(const float *a, const double *b, const shp *s,
                       double *bound) {
  const size_t S = s->H * s->W;
  for (size_t c = 0; c < s->C; c++) {
    double t = 0;
    for (size_t n = 0; n < s->N; n++)
      for (size_t j = 0; j < S; j++) {
        const size_t i = (n * s->C + c) * S + j;
        t += fabs(a[i] * (b ? b[i] : 1.0));
      }
    bound[c] = 4e-6 * t + 1e-6;
  }
}

/* Inputs of a shape, as stored in d. */
typedef struct {
  const shp *s;
  rumus_dtype d;
  size_t n;
  float *x, *dy, *gamma, *beta, *rm0, *rv0;
} inputs;

static inputs make_inputs(const shp *s, rumus_dtype d, uint64_t seed) {
  inputs in = {s, d, numel(s), NULL, NULL, NULL, NULL, NULL, NULL};
  tu_rng r;
  tu_rng_seed(&r, seed);
  in.x = tu_malloc(in.n * sizeof(float));
  in.dy = tu_malloc(in.n * sizeof(float));
  in.gamma = tu_malloc(s->C * sizeof(float));
  in.beta = tu_malloc(s->C * sizeof(float));
  in.rm0 = tu_malloc(s->C * sizeof(float));
  in.rv0 = tu_malloc(s->C * sizeof(float));
  tu_fill_uniform(&r, in.x, in.n, -3.0f, 5.0f);
  tu_fill_uniform(&r, in.dy, in.n, -1.0f, 1.0f);
  tu_fill_uniform(&r, in.gamma, s->C, 0.5f, 2.0f);
  tu_fill_uniform(&r, in.beta, s->C, -1.0f, 1.0f);
  tu_fill_uniform(&r, in.rm0, s->C, -0.5f, 0.5f);
  tu_fill_uniform(&r, in.rv0, s->C, 0.5f, 1.5f);
  tu_round_to(d, in.x, in.n);
  tu_round_to(d, in.dy, in.n);
  return in;
}

static void free_inputs(inputs *in) {
  free(in->x), free(in->dy), free(in->gamma), free(in->beta);
  free(in->rm0), free(in->rv0);
}

/* ---- Channel bias ----------------------------------------------------- */

/* Bias add (out of place and in place) and gradient on one shape, bias
 * and db of x's type (f32b 0) or F32 (f32b 1), both variants. */
static void run_bias(rumus_ctx *ctx, const inputs *in, int f32b) {
  const shp *s = in->s;
  const rumus_dtype bd = f32b ? RUMUS_F32 : in->d;
  float *b = rounded(bd, in->beta, s->C);
  double *want = tu_malloc(in->n * sizeof *want);
  double *wdb = tu_malloc(s->C * sizeof *wdb), *bound = tu_malloc(s->C * 8);
  const double atol = 2e-5 + tu_store_atol(in->d);
  const double rtol = 2e-5 + tu_store_rtol(in->d);
  ref_channel_bias_add(in->x, b, s->N, s->C, s->H * s->W, want);
  ref_channel_bias_grad(in->dy, s->N, s->C, s->H * s->W, wdb);
  sum_bounds(in->dy, NULL, s, bound);
  for (size_t c = 0; c < s->C; c++)
    bound[c] += fabs(wdb[c]) * tu_store_rtol(bd) + tu_store_atol(bd);
  for (int v = 0; v < 2; v++) {
    char nm[96];
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded x = g4(ctx, in->d, s, in->x), y = g4(ctx, in->d, s, NULL);
    tu_guarded tb = g1(ctx, bd, s->C, b), dy = g4(ctx, in->d, s, in->dy);
    tu_guarded db = g1(ctx, bd, s->C, NULL);
    TU_OK(ctx, rumus_channel_bias_add(ctx, x.t, tb.t, y.t));
    float *got = tu_download_f32(ctx, y.t);
    tu_check_close(name_of(nm, sizeof nm, "bias_add", in->d, v, s), got,
                   want, in->n, atol, rtol);
    free(got);
    TU_OK(ctx, rumus_channel_bias_add(ctx, x.t, tb.t, x.t)); /* in place */
    got = tu_download_f32(ctx, x.t);
    tu_check_close(name_of(nm, sizeof nm, "bias_add_in_place", in->d, v, s),
                   got, want, in->n, atol, rtol);
    free(got);
    TU_OK(ctx, rumus_channel_bias_grad(ctx, dy.t, db.t));
    got = tu_download_f32(ctx, db.t);
    tu_check_bound(name_of(nm, sizeof nm, "bias_grad", in->d, v, s), got, wdb,
                   bound, s->C);
    free(got);
    tu_guarded_check_free_all(ctx, &x, &y, &tb, &dy, &db, NULL);
  }
  free(b), free(want), free(wdb), free(bound);
}

START_TEST(bias_shapes) {
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < NSHAPES; k++) {
    inputs in = make_inputs(&SHAPES[k], tu_dtypes[_i], 10 + k);
    run_bias(ctx, &in, 0);
    run_bias(ctx, &in, 1);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Batch norm ------------------------------------------------------- */

/* The device's tensors of one batch norm run. */
typedef struct {
  tu_guarded x, y, dy, dx, gamma, beta, rm, rv, sm, si, dg, db;
} bn_tensors;

static bn_tensors bn_make(rumus_ctx *ctx, const inputs *in) {
  const shp *s = in->s;
  bn_tensors t;
  t.x = g4(ctx, in->d, s, in->x);
  t.y = g4(ctx, in->d, s, NULL);
  t.dy = g4(ctx, in->d, s, in->dy);
  t.dx = g4(ctx, in->d, s, NULL);
  t.gamma = g1(ctx, RUMUS_F32, s->C, in->gamma);
  t.beta = g1(ctx, RUMUS_F32, s->C, in->beta);
  t.rm = g1(ctx, RUMUS_F32, s->C, in->rm0);
  t.rv = g1(ctx, RUMUS_F32, s->C, in->rv0);
  t.sm = g1(ctx, RUMUS_F32, s->C, NULL);
  t.si = g1(ctx, RUMUS_F32, s->C, NULL);
  t.dg = g1(ctx, RUMUS_F32, s->C, NULL);
  t.db = g1(ctx, RUMUS_F32, s->C, NULL);
  return t;
}

static void bn_free(rumus_ctx *ctx, bn_tensors *t) {
  tu_guarded *all[12] = {&t->x,  &t->y,  &t->dy, &t->dx, &t->gamma, &t->beta,
                         &t->rm, &t->rv, &t->sm, &t->si, &t->dg,    &t->db};
  for (int i = 0; i < 12; i++) tu_guarded_check_free(ctx, all[i]);
}

/* Downloads an F32 tensor of n values into doubles (malloc'ed). */
static double *dl_double(rumus_ctx *ctx, const rumus_tensor *t, size_t n) {
  float *f = tu_download_f32(ctx, t);
  double *d = tu_malloc(n * sizeof *d);
  for (size_t i = 0; i < n; i++) d[i] = f[i];
  free(f);
  return d;
}

/* Checks the training forward's outputs: y, save_mean, save_invstd and
 * the running statistics against the formula. */
static void check_train(rumus_ctx *ctx, const inputs *in, bn_tensors *t,
                        int affine, int v, double mom) {
  const shp *s = in->s;
  const size_t C = s->C, M = s->N * s->H * s->W;
  double *mean = tu_malloc(C * 8), *var = tu_malloc(C * 8);
  double *is = tu_malloc(C * 8), *want = tu_malloc(in->n * 8);
  char nm[96];
  ref_batchnorm2d_stats(in->x, s->N, C, s->H * s->W, mean, var);
  ref_batchnorm2d_apply(in->x, s->N, C, s->H * s->W, mean, var, 1e-5,
                        affine ? in->gamma : NULL, affine ? in->beta : NULL,
                        want);
  float *got = tu_download_f32(ctx, t->y.t);
  tu_check_close(name_of(nm, sizeof nm, "bn_fwd", in->d, v, s), got, want,
                 in->n, 2e-5 + tu_store_atol(in->d),
                 2e-5 + tu_store_rtol(in->d));
  free(got);
  got = tu_download_f32(ctx, t->sm.t);
  tu_check_close(name_of(nm, sizeof nm, "bn_mean", in->d, v, s), got, mean, C,
                 1e-5, 1e-5);
  free(got);
  for (size_t c = 0; c < C; c++) is[c] = 1.0 / sqrt(var[c] + 1e-5);
  got = tu_download_f32(ctx, t->si.t);
  tu_check_close(name_of(nm, sizeof nm, "bn_invstd", in->d, v, s), got, is, C,
                 0, 2e-5);
  free(got);
  /* r = (1 - m) r + m stat, unbiased variance for running_var. */
  for (size_t c = 0; c < C; c++) {
    mean[c] = (1 - mom) * in->rm0[c] + mom * mean[c];
    var[c] = (1 - mom) * in->rv0[c] + mom * var[c] * M / (M - 1.0);
  }
  got = tu_download_f32(ctx, t->rm.t);
  tu_check_close(name_of(nm, sizeof nm, "bn_running_mean", in->d, v, s), got,
                 mean, C, 1e-5, 1e-5);
  free(got);
  got = tu_download_f32(ctx, t->rv.t);
  tu_check_close(name_of(nm, sizeof nm, "bn_running_var", in->d, v, s), got,
                 var, C, 1e-5, 1e-5);
  free(got);
  free(mean), free(var), free(is), free(want);
}

/* Evaluation forward from the device's running statistics, in place. */
static void check_eval(rumus_ctx *ctx, const inputs *in, bn_tensors *t,
                       int affine, int v) {
  const shp *s = in->s;
  double *rm = dl_double(ctx, t->rm.t, s->C), *rv = dl_double(ctx, t->rv.t, s->C);
  double *want = tu_malloc(in->n * 8);
  ref_batchnorm2d_apply(in->x, s->N, s->C, s->H * s->W, rm, rv, 1e-5,
                        affine ? in->gamma : NULL, affine ? in->beta : NULL,
                        want);
  TU_OK(ctx, rumus_tensor_upload_f32(t->y.t, in->x, in->n));
  TU_OK(ctx, rumus_batchnorm2d_fwd_eval(ctx, NULL, t->y.t,
                                        affine ? t->gamma.t : NULL,
                                        affine ? t->beta.t : NULL, t->rm.t,
                                        t->rv.t, t->y.t));
  float *got = tu_download_f32(ctx, t->y.t);
  char nm[96];
  tu_check_close(name_of(nm, sizeof nm, "bn_eval_in_place", in->d, v, s),
                 got, want, in->n, 2e-5 + tu_store_atol(in->d),
                 2e-5 + tu_store_rtol(in->d));
  free(got), free(rm), free(rv), free(want);
}

/* Backward from the device's saved statistics; dx in place of dy. */
static void check_bwd(rumus_ctx *ctx, const inputs *in, bn_tensors *t,
                      int affine, int v) {
  const shp *s = in->s;
  const size_t C = s->C, S = s->H * s->W;
  double *mean = dl_double(ctx, t->sm.t, C), *is = dl_double(ctx, t->si.t, C);
  double *want = tu_malloc(in->n * 8), *dg = tu_malloc(C * 8);
  double *db = tu_malloc(C * 8), *bound = tu_malloc(C * 8);
  double *xh = tu_malloc(in->n * 8);
  ref_batchnorm2d_bwd(in->dy, in->x, s->N, C, S, affine ? in->gamma : NULL,
                      mean, is, want, dg, db);
  TU_OK(ctx, rumus_batchnorm2d_bwd(ctx, t->dy.t, t->x.t,
                                   affine ? t->gamma.t : NULL, t->sm.t,
                                   t->si.t, t->dy.t, affine ? t->dg.t : NULL,
                                   affine ? t->db.t : NULL));
  float *got = tu_download_f32(ctx, t->dy.t);
  char nm[96];
  tu_check_close(name_of(nm, sizeof nm, "bn_dx", in->d, v, s), got, want,
                 in->n, 5e-5 + tu_store_atol(in->d),
                 1e-4 + tu_store_rtol(in->d));
  free(got);
  if (affine) {
    for (size_t i = 0; i < in->n; i++) {
      const size_t c = i / S % C;
      xh[i] = (in->x[i] - mean[c]) * is[c];
    }
    sum_bounds(in->dy, xh, s, bound);
    got = tu_download_f32(ctx, t->dg.t);
    tu_check_bound(name_of(nm, sizeof nm, "bn_dgamma", in->d, v, s), got, dg,
                   bound, C);
    free(got);
    sum_bounds(in->dy, NULL, s, bound);
    got = tu_download_f32(ctx, t->db.t);
    tu_check_bound(name_of(nm, sizeof nm, "bn_dbeta", in->d, v, s), got, db,
                   bound, C);
    free(got);
  }
  free(mean), free(is), free(want), free(dg), free(db), free(bound), free(xh);
}

/* Training forward (with running statistics), backward, evaluation on
 * one shape, both variants; affine or not (no gamma, beta, dgamma,
 * dbeta). */
static void run_bn(rumus_ctx *ctx, const inputs *in, int affine) {
  const rumus_batchnorm_params p = {1e-5f, 0.25f};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    bn_tensors t = bn_make(ctx, in);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(
                   ctx, &p, t.x.t, affine ? t.gamma.t : NULL,
                   affine ? t.beta.t : NULL, t.rm.t, t.rv.t, t.y.t, t.sm.t,
                   t.si.t));
    check_train(ctx, in, &t, affine, v, 0.25);
    check_bwd(ctx, in, &t, affine, v);
    check_eval(ctx, in, &t, affine, v);
    bn_free(ctx, &t);
  }
}

/* Every shape, affine and not, in storage tu_dtypes[_i]. */
START_TEST(bn_shapes) {
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < NSHAPES; k++) {
    inputs in = make_inputs(&SHAPES[k], tu_dtypes[_i], 100 + k);
    run_bn(ctx, &in, 1);
    run_bn(ctx, &in, 0);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Shapes with H * W a multiple of 4 (the GPU variant's walks move
 * float4s) at aligned offsets: the aligned program's 16-byte accesses;
 * the second with a short last range. */
static const shp ALIGNED[] = {{3, 5, 2, 2}, {37, 2, 10, 12}};

START_TEST(aligned_shapes) {
  rumus_ctx *ctx = tu_ctx();
  elem_off = 4;
  for (size_t k = 0; k < sizeof ALIGNED / sizeof ALIGNED[0]; k++) {
    inputs in = make_inputs(&ALIGNED[k], tu_dtypes[_i], 200 + k);
    run_bias(ctx, &in, 1);
    run_bn(ctx, &in, 1);
    free_inputs(&in);
  }
  elem_off = 3;
  tu_free_all(ctx, NULL);
}
END_TEST

/* More channels than the context has ticket words (4096): the GPU
 * variant's two-launch path (reduction with its fold, then the map) instead
 * of bn_fwd_one / bn_bwd_one; F32, both variants, aligned and not. */
START_TEST(many_channels) {
  rumus_ctx *ctx = tu_ctx();
  const shp s = {2, 4099, 2, 2};
  inputs in = make_inputs(&s, RUMUS_F32, 300);
  for (int k = 0; k < 2; k++) {
    elem_off = k ? 4 : 3;
    run_bn(ctx, &in, 1);
  }
  elem_off = 3;
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The training forward in place (y == x) and without running statistics,
 * and the same bits on later runs, per variant, on the large shape; the
 * third and fourth under RUMUS_BATCHNORM_LAG=0 and 9 (the GPU variant's
 * one-launch kernels with other lags), the fifth also under
 * RUMUS_BATCHNORM_ONE=0 (its two-launch path); the sixth under
 * RUMUS_BATCHNORM_STATS=trees and the seventh under
 * RUMUS_BATCHNORM_CHUNKS=1 (ranges of one chunk a work-item; by default
 * here 2, the most that keep 8 groups per compute unit of PoCL's 2)
 * against the reference. */
START_TEST(bn_in_place_and_repeatable) {
  rumus_ctx *ctx = tu_ctx();
  const shp *s = &SHAPES[NSHAPES - 1];
  inputs in = make_inputs(s, RUMUS_F32, 7);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    bn_tensors t = bn_make(ctx, &in);
    float *first = NULL;
    double *want = tu_malloc(in.n * 8), *m = tu_malloc(s->C * 8),
           *var = tu_malloc(s->C * 8);
    ref_batchnorm2d_stats(in.x, s->N, s->C, s->H * s->W, m, var);
    ref_batchnorm2d_apply(in.x, s->N, s->C, s->H * s->W, m, var, 1e-5,
                          in.gamma, in.beta, want);
    for (int run = 0; run < 7; run++) {
      if (run == 5) setenv("RUMUS_BATCHNORM_STATS", "trees", 1);
      if (run == 6) {
        unsetenv("RUMUS_BATCHNORM_STATS");
        setenv("RUMUS_BATCHNORM_CHUNKS", "1", 1);
      }
      if (run >= 2) setenv("RUMUS_BATCHNORM_LAG", run == 2 ? "0" : "9", 1);
      if (run == 4) setenv("RUMUS_BATCHNORM_ONE", "0", 1);
      TU_OK(ctx, rumus_tensor_upload_f32(t.y.t, in.x, in.n));
      TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.y.t, t.gamma.t,
                                             t.beta.t, NULL, NULL, t.y.t,
                                             t.sm.t, t.si.t));
      TU_OK(ctx, rumus_batchnorm2d_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.sm.t,
                                       t.si.t, t.dx.t, t.dg.t, t.db.t));
      float *y = tu_download_f32(ctx, t.y.t), *dx = tu_download_f32(ctx, t.dx.t);
      float *dg = tu_download_f32(ctx, t.dg.t);
      if (run == 0 || run >= 5) {
        /* Runs 5 and 6: trees or other ranges, other bits on the GPU
         * variant. */
        tu_check_close(run == 0   ? "bn_fwd_in_place"
                       : run == 5 ? "bn_fwd_trees"
                                  : "bn_fwd_chunk1",
                       y, want, in.n, 2e-5, 2e-5);
      }
      if (run == 0) {
        first = tu_malloc((2 * in.n + s->C) * sizeof *first);
        memcpy(first, y, in.n * 4);
        memcpy(first + in.n, dx, in.n * 4);
        memcpy(first + 2 * in.n, dg, s->C * 4);
      } else if (run < 5) {
        ck_assert_msg(memcmp(first, y, in.n * 4) == 0 &&
                          memcmp(first + in.n, dx, in.n * 4) == 0 &&
                          memcmp(first + 2 * in.n, dg, s->C * 4) == 0,
                      "%s variant: bits differ between runs (run %d)",
                      tu_variant_name(tu_variants[v]), run);
      }
      free(y), free(dx), free(dg);
    }
    unsetenv("RUMUS_BATCHNORM_LAG");
    unsetenv("RUMUS_BATCHNORM_ONE");
    unsetenv("RUMUS_BATCHNORM_CHUNKS");
    free(want), free(m), free(var);
    free(first);
    bn_free(ctx, &t);
  }
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The GPU variant's launch choice: below 16 MiB of x one launch for the
 * training forward and for the backward (bn_fwd_one, bn_bwd_one), from 16
 * MiB two (bn_stats_wg and bn_apply_fwd, bn_bwd_wg and bn_apply_bwd);
 * the larger shape's forward also against the reference. */
START_TEST(gpu_launch_choice) {
  static const shp S[2] = {{2, 4, 1024, 511}, {2, 4, 1024, 512}};
  rumus_ctx *ctx = tu_profiling_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  for (int k = 0; k < 2; k++) {
    inputs in = make_inputs(&S[k], RUMUS_F32, 90 + (uint64_t)k);
    bn_tensors t = bn_make(ctx, &in);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, t.gamma.t,
                                           t.beta.t, NULL, NULL, t.y.t,
                                           t.sm.t, t.si.t));
    ck_assert_msg(tu_kernel_ran(ctx, k ? "bn_apply_fwd" : "bn_fwd_one"),
                  "forward at %zu floats: not %s", in.n,
                  k ? "two launches" : "one launch");
    TU_OK(ctx, rumus_batchnorm2d_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.sm.t,
                                     t.si.t, t.dx.t, t.dg.t, t.db.t));
    ck_assert_msg(tu_kernel_ran(ctx, k ? "bn_apply_bwd" : "bn_bwd_one"),
                  "backward at %zu floats: not %s", in.n,
                  k ? "two launches" : "one launch");
    if (k) {
      float *y = tu_download_f32(ctx, t.y.t);
      double *want = tu_malloc(in.n * 8), *m = tu_malloc(S[k].C * 8),
             *var = tu_malloc(S[k].C * 8);
      ref_batchnorm2d_stats(in.x, S[k].N, S[k].C, S[k].H * S[k].W, m, var);
      ref_batchnorm2d_apply(in.x, S[k].N, S[k].C, S[k].H * S[k].W, m, var,
                            1e-5, in.gamma, in.beta, want);
      tu_check_close("bn_fwd_two_launches", y, want, in.n, 2e-5, 2e-5);
      free(y), free(want), free(m), free(var);
    }
    bn_free(ctx, &t);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* The CPU variant's paths, whatever the shape and the compute units
 * (RUMUS_BATCHNORM_CHANNEL): _i = 0 the two-stage reductions and maps,
 * 1 a channel per work-item (bn_fwd_chan, bn_bwd_chan); shapes with C = 1,
 * 5, 9 and 16, odd H x W, 1x1 images, N = 1, 2 and 3, storage tu_dtypes;
 * and the training forward in place (y == x) giving the bits of the
 * out-of-place one. */
static const shp PATH_SHAPES[] = {{3, 5, 7, 5}, {2, 9, 7, 5}, {1, 9, 5, 7},
                                  {2, 16, 1, 1}, {2, 1, 7, 5}, {3, 9, 3, 3}};

START_TEST(cpu_paths) {
  rumus_ctx *ctx = tu_ctx();
  setenv("RUMUS_BATCHNORM_CHANNEL", _i % 2 ? "1" : "0", 1);
  const rumus_dtype d = tu_dtypes[_i / 2];
  for (size_t k = 0; k < sizeof PATH_SHAPES / sizeof PATH_SHAPES[0]; k++) {
    inputs in = make_inputs(&PATH_SHAPES[k], d, 400 + k);
    run_bn(ctx, &in, k % 2 == 0);
    tu_set_variant(ctx, RUMUS_VARIANT_CPU);
    bn_tensors t = bn_make(ctx, &in);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, t.gamma.t,
                                           t.beta.t, NULL, NULL, t.y.t,
                                           t.sm.t, t.si.t));
    float *y = tu_download_f32(ctx, t.y.t);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, t.gamma.t,
                                           t.beta.t, NULL, NULL, t.x.t,
                                           t.sm.t, t.si.t));
    float *yi = tu_download_f32(ctx, t.x.t);
    ck_assert_msg(memcmp(y, yi, in.n * sizeof *y) == 0,
                  "training forward in place, shape %zu", k);
    free(y), free(yi);
    bn_free(ctx, &t);
    free_inputs(&in);
  }
  unsetenv("RUMUS_BATCHNORM_CHANNEL");
  tu_free_all(ctx, NULL);
}
END_TEST

/* The CPU variant's per-channel training forward (in place: y == x) and
 * backward (dx == dy) with RUMUS_BATCHNORM_STREAM=stream; *y and *dx their
 * outputs (malloc'ed). */
static void run_chan_once(rumus_ctx *ctx, const inputs *in, int stream,
                          int in_place, float **y, float **dx) {
  setenv("RUMUS_BATCHNORM_STREAM", stream ? "1" : "0", 1);
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  bn_tensors t = bn_make(ctx, in);
  rumus_tensor *out = in_place ? t.x.t : t.y.t;
  TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, t.gamma.t,
                                         t.beta.t, t.rm.t, t.rv.t, out,
                                         t.sm.t, t.si.t));
  *y = tu_download_f32(ctx, out);
  TU_OK(ctx, rumus_tensor_upload_f32(t.x.t, in->x, in->n));
  TU_OK(ctx, rumus_batchnorm2d_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.sm.t,
                                   t.si.t, in_place ? t.dy.t : t.dx.t,
                                   t.dg.t, t.db.t));
  *dx = tu_download_f32(ctx, in_place ? t.dy.t : t.dx.t);
  bn_free(ctx, &t);
}

/* The per-channel kernels' streaming stores (RUMUS_BATCHNORM_STREAM=1,
 * taken where H * W is a multiple of 8 and the outputs 8-element aligned:
 * F32 and BF16; F16 keeps plain stores), storage tu_dtypes[_i]: against
 * the float64 reference, and the bits of plain stores, out of place and
 * in place. */
static const shp STREAM_SHAPES[] = {{3, 5, 4, 2}, {2, 9, 4, 4},
                                    {1, 3, 8, 5}};

START_TEST(cpu_stream) {
  rumus_ctx *ctx = tu_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  elem_off = 8;
  setenv("RUMUS_BATCHNORM_CHANNEL", "1", 1);
  for (size_t k = 0; k < sizeof STREAM_SHAPES / sizeof STREAM_SHAPES[0];
       k++) {
    inputs in = make_inputs(&STREAM_SHAPES[k], d, 450 + k);
    setenv("RUMUS_BATCHNORM_STREAM", "1", 1);
    run_bn(ctx, &in, k % 2 == 0);
    for (int ip = 0; ip < 2; ip++) {
      float *y0, *dx0, *y1, *dx1;
      run_chan_once(ctx, &in, 0, ip, &y0, &dx0);
      run_chan_once(ctx, &in, 1, ip, &y1, &dx1);
      ck_assert_msg(memcmp(y0, y1, in.n * sizeof *y0) == 0,
                    "streamed y differs, shape %zu, in place %d", k, ip);
      ck_assert_msg(memcmp(dx0, dx1, in.n * sizeof *dx0) == 0,
                    "streamed dx differs, shape %zu, in place %d", k, ip);
      free(y0), free(dx0), free(y1), free(dx1);
    }
    free_inputs(&in);
  }
  unsetenv("RUMUS_BATCHNORM_STREAM");
  unsetenv("RUMUS_BATCHNORM_CHANNEL");
  elem_off = 3;
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Finite differences ----------------------------------------------- */

/* L = sum g * y over the float64 training forward of (x, gamma, beta). */
static double fd_loss(const float *x, const float *gamma, const float *beta,
                      const float *g, const shp *s) {
  const size_t n = numel(s), S = s->H * s->W;
  double m[4], var[4], *y = tu_malloc(n * 8), l = 0;
  ref_batchnorm2d_stats(x, s->N, s->C, S, m, var);
  ref_batchnorm2d_apply(x, s->N, s->C, S, m, var, 1e-5, gamma, beta, y);
  for (size_t i = 0; i < n; i++) l += g[i] * y[i];
  free(y);
  return l;
}

/* Central difference of fd_loss in p[i] (one of its inputs). */
static double fd_at(float *p, size_t i, const float *x, const float *gamma,
                    const float *beta, const float *g, const shp *s) {
  const float p0 = p[i], h = 1e-2f;
  p[i] = p0 + h;
  const float hi = p[i];
  const double lp = fd_loss(x, gamma, beta, g, s);
  p[i] = p0 - h;
  const float lo = p[i];
  const double lm = fd_loss(x, gamma, beta, g, s);
  p[i] = p0;
  return (lp - lm) / ((double)hi - lo);
}

/* dx, dgamma, dbeta of the device (F32, both variants) against central
 * differences of the float64 forward; and the channel bias gradient
 * against those of the float64 bias add.  _i = 1: the CPU variant's
 * channel per work-item (RUMUS_BATCHNORM_CHANNEL=1). */
START_TEST(bwd_finite_differences) {
  const shp s = {2, 3, 3, 2};
  if (_i) setenv("RUMUS_BATCHNORM_CHANNEL", "1", 1);
  const size_t n = numel(&s), C = s.C, S = s.H * s.W;
  rumus_ctx *ctx = tu_ctx();
  inputs in = make_inputs(&s, RUMUS_F32, 99);
  double num_x[36], num_g[3], num_b[3], num_bias[3];
  for (size_t i = 0; i < n; i++)
    num_x[i] = fd_at(in.x, i, in.x, in.gamma, in.beta, in.dy, &s);
  for (size_t c = 0; c < C; c++) {
    num_g[c] = fd_at(in.gamma, c, in.x, in.gamma, in.beta, in.dy, &s);
    num_b[c] = fd_at(in.beta, c, in.x, in.gamma, in.beta, in.dy, &s);
    double lp[2];
    for (int k = 0; k < 2; k++) { /* L = sum dy * (x + b) */
      float b[3];
      memcpy(b, in.beta, sizeof b);
      b[c] += k ? -0.01f : 0.01f;
      double *y = tu_malloc(n * 8);
      ref_channel_bias_add(in.x, b, s.N, C, S, y);
      lp[k] = 0;
      for (size_t i = 0; i < n; i++) lp[k] += in.dy[i] * y[i];
      free(y);
    }
    num_bias[c] = (lp[0] - lp[1]) / 0.02;
  }
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    bn_tensors t = bn_make(ctx, &in);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, t.gamma.t,
                                           t.beta.t, NULL, NULL, t.y.t,
                                           t.sm.t, t.si.t));
    TU_OK(ctx, rumus_batchnorm2d_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.sm.t,
                                     t.si.t, t.dx.t, t.dg.t, t.db.t));
    float *dx = tu_download_f32(ctx, t.dx.t), *dg = tu_download_f32(ctx, t.dg.t);
    float *db = tu_download_f32(ctx, t.db.t);
    tu_check_close("bn_fd_dx", dx, num_x, n, 1e-3, 1e-2);
    tu_check_close("bn_fd_dgamma", dg, num_g, C, 1e-3, 1e-2);
    tu_check_close("bn_fd_dbeta", db, num_b, C, 1e-3, 1e-2);
    TU_OK(ctx, rumus_channel_bias_grad(ctx, t.dy.t, t.db.t));
    free(db);
    db = tu_download_f32(ctx, t.db.t);
    tu_check_close("bias_fd_db", db, num_bias, C, 1e-3, 1e-2);
    free(dx), free(dg), free(db);
    bn_free(ctx, &t);
  }
  unsetenv("RUMUS_BATCHNORM_CHANNEL");
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Limits ------------------------------------------------------------ */

/* Empty tensors: nothing to do, or zero sums. */
START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s0[4] = {0, 3, 2, 2}, s3[1] = {3};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 4, s0, NULL);
  rumus_tensor *c1 = tu_tensor(ctx, RUMUS_F32, 1, s3, NULL);
  rumus_tensor *c2 = tu_tensor(ctx, RUMUS_F32, 1, s3, NULL);
  rumus_tensor *c3 = tu_tensor(ctx, RUMUS_F32, 1, s3, NULL);
  TU_OK(ctx, rumus_tensor_fill(c1, 5.0f));
  TU_OK(ctx, rumus_channel_bias_add(ctx, x, c1, x));
  TU_OK(ctx, rumus_batchnorm2d_fwd_eval(ctx, NULL, x, NULL, NULL, c1, c2, x));
  TU_OK(ctx, rumus_channel_bias_grad(ctx, x, c1));
  float got[3];
  TU_OK(ctx, rumus_tensor_download(c1, got, sizeof got));
  for (int c = 0; c < 3; c++) ck_assert_float_eq(got[c], 0.0f);
  TU_OK(ctx, rumus_tensor_fill(c3, 5.0f));
  TU_OK(ctx, rumus_batchnorm2d_bwd(ctx, x, x, NULL, c1, c2, x, c3, NULL));
  TU_OK(ctx, rumus_tensor_download(c3, got, sizeof got));
  for (int c = 0; c < 3; c++) ck_assert_float_eq(got[c], 0.0f);
  TU_STATUS(RUMUS_ESHAPE, rumus_batchnorm2d_fwd_train(ctx, NULL, x, NULL,
                                                      NULL, NULL, NULL, x,
                                                      c1, c2));
  tu_free_all(ctx, x, c1, c2, c3, NULL);
}
END_TEST

/* One channel of 2049 x 2049 values (_i 0: the walks move floats) or of
 * 2048 x 2052 at an aligned offset (_i 1: float4s): more than the 1024
 * ranges of at most 16 WG values the GPU variant holds in registers, so
 * its statistics read each range twice (the other path of
 * bn_range_stats) and its maps take several chunks a range; F32, both
 * variants. */
START_TEST(long_channel) {
  rumus_ctx *ctx = tu_ctx();
  const shp s = _i ? (shp){1, 1, 2048, 2052} : (shp){1, 1, 2049, 2049};
  elem_off = _i ? 4 : 3;
  inputs in = make_inputs(&s, RUMUS_F32, 27);
  tu_rng r;
  tu_rng_seed(&r, 28);
  for (size_t i = 0; i < in.n; i++) in.x[i] = 3.0f + tu_uniform(&r, -1, 1);
  double *want = tu_malloc(in.n * 8), mean[1], var[1], is[1];
  ref_batchnorm2d_stats(in.x, s.N, s.C, s.H * s.W, mean, var);
  ref_batchnorm2d_apply(in.x, s.N, s.C, s.H * s.W, mean, var, 1e-5, NULL,
                        NULL, want);
  is[0] = 1.0 / sqrt(var[0] + 1e-5);
  for (int v = 0; v < 2; v++) {
    char nm[96];
    tu_set_variant(ctx, tu_variants[v]);
    bn_tensors t = bn_make(ctx, &in);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, NULL, NULL,
                                           NULL, NULL, t.y.t, t.sm.t, t.si.t));
    float *y = tu_download_f32(ctx, t.y.t), *m = tu_download_f32(ctx, t.sm.t);
    float *si = tu_download_f32(ctx, t.si.t);
    tu_check_close(name_of(nm, sizeof nm, "long_y", RUMUS_F32, v, &s), y,
                   want, in.n, 2e-4, 0);
    tu_check_close(name_of(nm, sizeof nm, "long_mean", RUMUS_F32, v, &s), m,
                   mean, 1, 0, 1e-6);
    tu_check_close(name_of(nm, sizeof nm, "long_invstd", RUMUS_F32, v, &s),
                   si, is, 1, 0, 1e-4);
    free(y), free(m), free(si);
    bn_free(ctx, &t);
  }
  free(want);
  free_inputs(&in);
  elem_off = 3;
  tu_free_all(ctx, NULL);
}
END_TEST

/* Values 1000 + U(-1, 1) (std 0.58), where a variance of E[x^2] - E[x]^2
 * in float would be off by tens of percent: the corrected two-pass
 * statistics keep invstd within rtol 1e-4, the mean within 1e-7 of
 * itself, and y within atol 2e-4 (the float mean's own rounding,
 * ulp(1000) / 2 = 3e-5, times invstd 1.7, plus the sums' errors). */
START_TEST(large_offset) {
  rumus_ctx *ctx = tu_ctx();
  const shp s = {64, 2, 28, 28};
  inputs in = make_inputs(&s, RUMUS_F32, 17);
  tu_rng r;
  tu_rng_seed(&r, 18);
  for (size_t i = 0; i < in.n; i++) in.x[i] = 1000.0f + tu_uniform(&r, -1, 1);
  double *want = tu_malloc(in.n * 8), mean[2], var[2], is[2];
  ref_batchnorm2d_stats(in.x, s.N, s.C, s.H * s.W, mean, var);
  ref_batchnorm2d_apply(in.x, s.N, s.C, s.H * s.W, mean, var, 1e-5, NULL,
                        NULL, want);
  for (int c = 0; c < 2; c++) is[c] = 1.0 / sqrt(var[c] + 1e-5);
  for (int v = 0; v < 2; v++) {
    char nm[96];
    tu_set_variant(ctx, tu_variants[v]);
    bn_tensors t = bn_make(ctx, &in);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, NULL, NULL,
                                           NULL, NULL, t.y.t, t.sm.t, t.si.t));
    float *y = tu_download_f32(ctx, t.y.t), *m = tu_download_f32(ctx, t.sm.t);
    float *si = tu_download_f32(ctx, t.si.t);
    tu_check_close(name_of(nm, sizeof nm, "offset_y", RUMUS_F32, v, &s), y,
                   want, in.n, 2e-4, 0);
    tu_check_close(name_of(nm, sizeof nm, "offset_mean", RUMUS_F32, v, &s), m,
                   mean, 2, 0, 1e-7);
    tu_check_close(name_of(nm, sizeof nm, "offset_invstd", RUMUS_F32, v, &s),
                   si, is, 2, 0, 1e-4);
    free(y), free(m), free(si);
    bn_free(ctx, &t);
  }
  free(want);
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A NaN in channel 1 makes that channel's y, statistics and running
 * statistics NaN (as in PyTorch) and leaves the other channels alone;
 * both variants. */
START_TEST(nan_channel) {
  rumus_ctx *ctx = tu_ctx();
  const shp s = {2, 3, 4, 5};
  inputs in = make_inputs(&s, RUMUS_F32, 5);
  in.x[(1 * 3 + 1) * 20 + 7] = NAN; /* n 1, c 1 */
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    bn_tensors t = bn_make(ctx, &in);
    TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, t.x.t, t.gamma.t,
                                           t.beta.t, t.rm.t, t.rv.t, t.y.t,
                                           t.sm.t, t.si.t));
    float *y = tu_download_f32(ctx, t.y.t), *rv = tu_download_f32(ctx, t.rv.t);
    float *rm = tu_download_f32(ctx, t.rm.t);
    for (size_t i = 0; i < numel(&s); i++)
      ck_assert_msg(isnan(y[i]) == (i / 20 % 3 == 1), "y[%zu] = %g", i,
                    (double)y[i]);
    for (int c = 0; c < 3; c++)
      ck_assert_msg(isnan(rm[c]) == (c == 1) && isnan(rv[c]) == (c == 1),
                    "channel %d: running mean %g, var %g", c, (double)rm[c],
                    (double)rv[c]);
    free(y), free(rv), free(rm);
    bn_free(ctx, &t);
  }
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Errors ------------------------------------------------------------ */

/* The tensors of the error cases: x, y [2, 3, 4, 5] (F32), yb [2, 3, 5,
 * 4], x3 [2, 3, 20], xh (F16), xi (I32), x1 [1, 3, 1, 1]; per-channel m,
 * is [3] (F32), m4 [4], mh (F16), mb (BF16). */
typedef struct {
  rumus_ctx *ctx;
  rumus_tensor *x, *y, *yb, *x3, *xh, *xi, *x1, *m, *is, *m4, *mh, *mb;
} bad_set;

static bad_set bad_make(void) {
  const size_t s4[4] = {2, 3, 4, 5}, s4b[4] = {2, 3, 5, 4}, s3[3] = {2, 3, 20};
  const size_t c3[1] = {3}, c4[1] = {4}, one[4] = {1, 3, 1, 1};
  bad_set b;
  b.ctx = tu_ctx();
  b.x = tu_tensor(b.ctx, RUMUS_F32, 4, s4, NULL);
  b.y = tu_tensor(b.ctx, RUMUS_F32, 4, s4, NULL);
  b.yb = tu_tensor(b.ctx, RUMUS_F32, 4, s4b, NULL);
  b.x3 = tu_tensor(b.ctx, RUMUS_F32, 3, s3, NULL);
  b.xh = tu_tensor(b.ctx, RUMUS_F16, 4, s4, NULL);
  b.xi = tu_tensor(b.ctx, RUMUS_I32, 4, s4, NULL);
  b.x1 = tu_tensor(b.ctx, RUMUS_F32, 4, one, NULL);
  b.m = tu_tensor(b.ctx, RUMUS_F32, 1, c3, NULL);
  b.is = tu_tensor(b.ctx, RUMUS_F32, 1, c3, NULL);
  b.m4 = tu_tensor(b.ctx, RUMUS_F32, 1, c4, NULL);
  b.mh = tu_tensor(b.ctx, RUMUS_F16, 1, c3, NULL);
  b.mb = tu_tensor(b.ctx, RUMUS_BF16, 1, c3, NULL);
  TU_OK(b.ctx, rumus_tensor_fill(b.x, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.xh, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.x1, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.m, 0.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.is, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.mh, 0.0f));
  return b;
}

static void bad_free(bad_set *b) {
  TU_OK(b->ctx, rumus_ctx_sync(b->ctx));
  tu_free_all(b->ctx, b->x, b->y, b->yb, b->x3, b->xh, b->xi, b->x1, b->m,
              b->is, b->m4, b->mh, b->mb, NULL);
}

/* NULL context or tensors: RUMUS_ENULL; tensors of a type the op does
 * not take: RUMUS_EDTYPE naming the argument. */
START_TEST(bad_nulls_and_types) {
  bad_set b = bad_make();
  rumus_ctx *ctx = b.ctx;
  const rumus_batchnorm_params p = RUMUS_BATCHNORM_DEFAULTS;
  TU_STATUS(RUMUS_ENULL, rumus_channel_bias_add(NULL, b.x, b.m, b.y));
  TU_STATUS(RUMUS_ENULL, rumus_channel_bias_add(ctx, b.x, NULL, b.y));
  TU_STATUS(RUMUS_ENULL, rumus_channel_bias_grad(ctx, b.x, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_batchnorm2d_fwd_train(
                             ctx, &p, NULL, NULL, NULL, NULL, NULL, b.y, b.m,
                             b.is));
  TU_STATUS(RUMUS_ENULL, rumus_batchnorm2d_fwd_train(
                             ctx, &p, b.x, NULL, NULL, NULL, NULL, b.y, NULL,
                             b.is));
  TU_STATUS(RUMUS_ENULL, rumus_batchnorm2d_fwd_eval(ctx, &p, b.x, NULL, NULL,
                                                    b.m, NULL, b.y));
  TU_STATUS(RUMUS_ENULL, rumus_batchnorm2d_bwd(ctx, b.x, b.x, NULL, b.m, b.is,
                                               NULL, NULL, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_channel_bias_add(ctx, b.xi, b.m, b.xi));
  TU_STATUS(RUMUS_EDTYPE, rumus_channel_bias_add(ctx, b.xh, b.mb, b.xh));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "b is bf16"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_OK(ctx, rumus_channel_bias_add(ctx, b.xh, b.mh, b.xh)); /* x's type */
  TU_OK(ctx, rumus_channel_bias_add(ctx, b.xh, b.m, b.xh));  /* F32 */
  TU_STATUS(RUMUS_EDTYPE, rumus_channel_bias_grad(ctx, b.xh, b.mb));
  TU_STATUS(RUMUS_EDTYPE, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x, NULL, NULL, NULL, NULL, b.xh, b.m,
                              b.is));
  TU_STATUS(RUMUS_EDTYPE, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.xh, b.mh, NULL, NULL, NULL, b.xh,
                              b.m, b.is));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "gamma is f16"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_batchnorm2d_fwd_eval(ctx, &p, b.x, NULL, NULL,
                                                     b.m, b.mb, b.y));
  TU_STATUS(RUMUS_EDTYPE, rumus_batchnorm2d_bwd(ctx, b.xh, b.x, NULL, b.m,
                                                b.is, b.y, NULL, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_batchnorm2d_bwd(ctx, b.x, b.x, NULL, b.m,
                                                b.is, b.y, b.mh, NULL));
  bad_free(&b);
}
END_TEST

/* Shapes: RUMUS_ESHAPE, naming the shapes; training with one value per
 * channel (PyTorch refuses it too). */
START_TEST(bad_shapes) {
  bad_set b = bad_make();
  rumus_ctx *ctx = b.ctx;
  const rumus_batchnorm_params p = RUMUS_BATCHNORM_DEFAULTS;
  TU_STATUS(RUMUS_ESHAPE, rumus_channel_bias_add(ctx, b.x, b.m4, b.y));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[4]"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_channel_bias_add(ctx, b.x, b.m, b.yb));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[2, 3, 5, 4]"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_channel_bias_grad(ctx, b.m, b.m4));
  TU_OK(ctx, rumus_channel_bias_grad(ctx, b.x3, b.m)); /* [N, C, ...] */
  TU_STATUS(RUMUS_ESHAPE, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x3, NULL, NULL, NULL, NULL, b.x3,
                              b.m, b.is));
  TU_STATUS(RUMUS_ESHAPE, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x, b.m4, NULL, NULL, NULL, b.y, b.m,
                              b.is));
  TU_STATUS(RUMUS_ESHAPE, rumus_batchnorm2d_fwd_eval(ctx, &p, b.x, NULL, NULL,
                                                     b.m, b.is, b.yb));
  TU_STATUS(RUMUS_ESHAPE, rumus_batchnorm2d_bwd(ctx, b.x, b.x, NULL, b.m4,
                                                b.is, b.y, NULL, NULL));
  TU_STATUS(RUMUS_ESHAPE, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x1, NULL, NULL, NULL, NULL, b.x1,
                              b.m, b.is));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "N * H * W = 1"), "%s",
                rumus_ctx_errmsg(ctx));
  /* Evaluation has no reduction: one value per channel is fine. */
  TU_OK(ctx, rumus_batchnorm2d_fwd_eval(ctx, &p, b.x1, NULL, NULL, b.m, b.is,
                                        b.x1));
  bad_free(&b);
}
END_TEST

/* eps, momentum, one running statistic without the other, outputs that
 * share memory with another tensor, a tensor of another context:
 * RUMUS_EINVAL. */
START_TEST(bad_values) {
  bad_set b = bad_make();
  rumus_ctx *ctx = b.ctx;
  rumus_batchnorm_params p = RUMUS_BATCHNORM_DEFAULTS;
  p.eps = -1e-5f;
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x, NULL, NULL, NULL, NULL, b.y, b.m,
                              b.is));
  p.eps = NAN;
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_fwd_eval(ctx, &p, b.x, NULL, NULL,
                                                     b.m, b.is, b.y));
  p.eps = 1e-5f;
  p.momentum = 1.5f;
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x, NULL, NULL, NULL, NULL, b.y, b.m,
                              b.is));
  p.momentum = 0.1f;
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x, NULL, NULL, b.m4, NULL, b.y, b.m,
                              b.is));
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x, NULL, NULL, NULL, NULL, b.y, b.m,
                              b.m)); /* save_mean is save_invstd */
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_bwd(ctx, b.x, b.y, NULL, b.m,
                                                b.is, b.y, NULL, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_bwd(ctx, b.x, b.y, NULL, b.m,
                                                b.is, b.x, b.m, NULL));
  /* (Partial overlaps of views: tests/check_framework.c.) */
  rumus_ctx *other = tu_ctx();
  const size_t c3[1] = {3};
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 1, c3, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_channel_bias_grad(ctx, b.x, o));
  TU_STATUS(RUMUS_EINVAL, rumus_batchnorm2d_fwd_train(
                              ctx, &p, b.x, o, NULL, NULL, NULL, b.y, b.m,
                              b.is));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  bad_free(&b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("batchnorm");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, bias_shapes, 0, 3);
  tcase_add_loop_test(core, bn_shapes, 0, 3);
  tcase_add_loop_test(core, aligned_shapes, 0, 3);
  tcase_add_loop_test(core, bwd_finite_differences, 0, 2);
  tcase_add_loop_test(core, cpu_paths, 0, 6);
  tcase_add_loop_test(core, cpu_stream, 0, 3);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, bn_in_place_and_repeatable);
  tcase_add_test(limits, gpu_launch_choice);
  tcase_add_test(limits, empty_tensors);
  tcase_add_test(limits, many_channels);
  tcase_add_test(limits, nan_channel);
  tcase_add_test(limits, large_offset);
  tcase_add_loop_test(limits, long_channel, 0, 2);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_nulls_and_types);
  tcase_add_test(errors, bad_shapes);
  tcase_add_test(errors, bad_values);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
