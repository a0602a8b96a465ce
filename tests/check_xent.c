/*
 * check_xent.c - the fused cross-entropy against the float64 reference
 * (ref_cross_entropy) on both variants (work-group and row), every
 * reduction mode, with and without the gradient: the class and
 * batch sizes, special rows (+-1e4, equal values, -INFINITY, NaN),
 * ignore_index, label smoothing, grad_scale, 3-D and 1-D logits, more rows
 * than one launch covers, borrowed buffers with guard bytes, determinism,
 * central finite differences, out-of-range targets caught on the device,
 * and bad input.  On the
 * work-group variant rows of up to 8192 classes take the _wgc kernels
 * (several rows per work-group of 128 or 256; wgc_padding covers the padded
 * last group), longer ones _wgl / _wg (C = 9001, 50257, and 600 with WG
 * 16).  F16 and BF16 logits (and gradients) with an F32 loss and with a
 * loss of the logits' type: every kernel (row; _wgc aligned and not; _wg;
 * _wgl with WG 16), every reduction, ignored rows, smoothing, special rows,
 * guard bytes around 16-bit losses and gradients, and mixed types.
 *
 * Tolerances (|got - want| <= atol + rtol |want|), F32 tensors:
 *   loss (per row and reduced)  atol 1e-5,           rtol 1e-5
 *       (float exp and sums over up to 50257 classes; measured <= 7e-7
 *       relative)
 *   gradient                    atol 1e-6 * |scale|, rtol 1e-5
 *       (scale = grad_scale / count for MEAN, grad_scale otherwise;
 *       measured <= 1e-7 * |scale|)
 *   finite differences          atol 1e-3,           rtol 1e-2
 *       (h = 1e-2 on the float loss)
 * 16-bit logits: the reference takes the logits as stored and the
 * arithmetic is float, so the F32 tolerance holds for an F32 loss
 * (measured <= 0.02 of it); a 16-bit loss or gradient adds the rounding of
 * storing it once (tests/tu_dtype.h): F16 atol + 2^-25, rtol + 2^-11; BF16
 * rtol + 2^-8 (measured up to 0.89 of the bound for losses and 0.96 for
 * gradients: values just above a power of two round by nearly half an
 * ulp, so a second rounding, as the F32 row kernels' staging of exp(x - m)
 * in the gradient would give, exceeds it).
 * There is no finite-difference check for 16-bit logits: a step that moves
 * a BF16 logit by whole ulps (2^-8 of it) is too coarse for a central
 * difference to say anything the reference comparison does not.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

#define LOSS_ATOL 1e-5
#define LOSS_RTOL 1e-5
#define GRAD_ATOL 1e-6 /* times |scale| */
#define GRAD_RTOL 1e-5

static const size_t CLASSES[] = {1, 63, 64, 65, 1000, 50257};
static const size_t BATCHES[] = {1, 7, 4097};
#define NC (sizeof CLASSES / sizeof CLASSES[0])
#define NB (sizeof BATCHES / sizeof BATCHES[0])
/* Batch 4097 at 50257 classes runs as LONG_ROW_BATCH rows: 823 MB of
 * logits, as much again of gradient and twice that of float64 reference
 * gradient are more than the CI machines hold; 4097 x 1000 covers the
 * batch, and 67 rows give the work-group variant's one-group-per-row kernel
 * many groups at that row length. */
#define LONG_ROW_BATCH 67
#define MAX_ELEMS ((size_t)1 << 24)

static const rumus_reduction REDUCTIONS[3] = {
    RUMUS_REDUCTION_MEAN, RUMUS_REDUCTION_SUM, RUMUS_REDUCTION_NONE};
static const char *red_name(rumus_reduction r) {
  return r == RUMUS_REDUCTION_MEAN ? "mean" : r == RUMUS_REDUCTION_SUM ? "sum" : "none";
}

/* The scale the gradient is multiplied by (for its tolerance). */
static double grad_scale_of(const int32_t *t, size_t B, const rumus_xent_params *p) {
  if (p->reduction != RUMUS_REDUCTION_MEAN) return p->grad_scale;
  size_t count = 0;
  for (size_t r = 0; r < B; r++) count += t[r] != p->ignore_index;
  return count ? p->grad_scale / (double)count : 0.0;
}

/* A loss tensor of type lt for the mode: a scalar (ndim 0) for MEAN and
 * SUM, the targets' shape for NONE. */
static rumus_tensor *loss_tensor(rumus_ctx *ctx, const rumus_tensor *targets,
                                 rumus_reduction red, rumus_dtype lt) {
  if (red != RUMUS_REDUCTION_NONE) return tu_tensor(ctx, lt, 0, NULL, NULL);
  size_t shape[RUMUS_MAX_DIMS];
  int nd = rumus_tensor_ndim(targets);
  for (int i = 0; i < nd; i++) shape[i] = rumus_tensor_dim(targets, i);
  return tu_tensor(ctx, lt, nd, shape, NULL);
}

/* The float64 reference of one call. */
typedef struct {
  double *rows, total, *grad;
} ref_out;

static ref_out ref_run(const float *x, const int32_t *t, size_t B, size_t C,
                       const rumus_xent_params *p) {
  ref_out o;
  o.rows = malloc((B ? B : 1) * sizeof *o.rows);
  o.grad = malloc((B * C != 0 ? B * C : 1) * sizeof *o.grad);
  ck_assert(o.rows && o.grad);
  o.total = 0;
  ref_cross_entropy(x, t, B, C, (int)p->reduction, p->ignore_index,
                    p->label_smoothing, p->grad_scale, o.rows, &o.total, o.grad);
  return o;
}
static void ref_free(ref_out *o) {
  free(o->rows);
  free(o->grad);
}

/* Compares the loss (and grad, if not NULL) tensors after a call with the
 * reference, under the header's tolerances for the tensors' types. */
static void compare(rumus_ctx *ctx, const char *name, rumus_reduction red,
                    const rumus_tensor *loss, const rumus_tensor *grad,
                    const ref_out *want, size_t B, size_t C, double scale) {
  char what[160];
  const rumus_dtype lt = rumus_tensor_dtype(loss);
  const double la = LOSS_ATOL + tu_store_atol(lt);
  const double lr = LOSS_RTOL + tu_store_rtol(lt);
  float *l = tu_download_f32(ctx, loss);
  snprintf(what, sizeof what, "%s_loss", name);
  if (red == RUMUS_REDUCTION_NONE)
    tu_check_close(what, l, want->rows, B, la, lr);
  else
    tu_check_close(what, l, &want->total, 1, la, lr);
  free(l);
  if (grad) {
    const rumus_dtype gt = rumus_tensor_dtype(grad);
    float *g = tu_download_f32(ctx, grad);
    snprintf(what, sizeof what, "%s_grad", name);
    tu_check_close(what, g, want->grad, B * C,
                   GRAD_ATOL * fabs(scale) + tu_store_atol(gt),
                   GRAD_RTOL + tu_store_rtol(gt));
    free(g);
  }
}

/* Runs every variant, every reduction mode, with and without the gradient,
 * with p's ignore_index, smoothing and grad_scale, a gradient of the
 * logits' type and a loss of type lt, and compares.  x holds the logits as
 * tx stores them. */
static void check_all_modes_typed(rumus_ctx *ctx, rumus_tensor *tx,
                                  rumus_tensor *tt, const float *x,
                                  const int32_t *t, size_t B, size_t C,
                                  rumus_xent_params p, rumus_dtype lt,
                                  const char *what) {
  size_t shape[RUMUS_MAX_DIMS];
  int nd = rumus_tensor_ndim(tx);
  for (int i = 0; i < nd; i++) shape[i] = rumus_tensor_dim(tx, i);
  rumus_tensor *tg = tu_tensor(ctx, rumus_tensor_dtype(tx), nd, shape, NULL);
  for (int ri = 0; ri < 3; ri++) {
    p.reduction = REDUCTIONS[ri];
    ref_out want = ref_run(x, t, B, C, &p);
    const double scale = grad_scale_of(t, B, &p);
    rumus_tensor *tl = loss_tensor(ctx, tt, p.reduction, lt);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      for (int with_grad = 0; with_grad < 2; with_grad++) {
        char name[128];
        snprintf(name, sizeof name, "%s_%s_%s_%s_%zux%zu", what,
                 tu_variant_name(tu_variants[v]), red_name(p.reduction),
                 with_grad ? "grad" : "fwd", B, C);
        /* Sentinels, so that a call that writes nothing cannot pass on the
         * previous call's results. */
        TU_OK(ctx, rumus_tensor_fill(tl, -7.0f));
        if (with_grad) TU_OK(ctx, rumus_tensor_fill(tg, -7.0f));
        TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tl, with_grad ? tg : NULL, &p));
        TU_OK(ctx, rumus_ctx_sync(ctx));
        compare(ctx, name, p.reduction, tl, with_grad ? tg : NULL, &want, B, C, scale);
      }
    }
    rumus_tensor_free(tl);
    ref_free(&want);
  }
  rumus_tensor_free(tg);
}

static void check_all_modes(rumus_ctx *ctx, rumus_tensor *tx,
                            rumus_tensor *tt, const float *x,
                            const int32_t *t, size_t B, size_t C,
                            rumus_xent_params p, const char *what) {
  check_all_modes_typed(ctx, tx, tt, x, t, B, C, p, RUMUS_F32, what);
}

/* Uniform logits in [-8, 8), uniform targets, every 11th row ignored. */
static void random_case(tu_rng *r, float *x, int32_t *t, size_t B, size_t C) {
  tu_fill_uniform(r, x, B * C, -8.0f, 8.0f);
  for (size_t i = 0; i < B; i++)
    t[i] = (i % 11 == 5) ? -100 : (int32_t)(tu_rand_u32(r) % (uint32_t)C);
}

/* ---- core ----------------------------------------------------------------- */

START_TEST(random_shapes) {
  const size_t C = CLASSES[_i % NC];
  const size_t B = BATCHES[_i / NC] * C > MAX_ELEMS ? LONG_ROW_BATCH : BATCHES[_i / NC];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, (uint64_t)_i + 1);
  float *x = malloc(B * C * sizeof *x);
  int32_t *t = malloc(B * sizeof *t);
  random_case(&r, x, t, B, C);
  size_t s[2] = {B, C};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, s, x), *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t);
  rumus_xent_params p = RUMUS_XENT_DEFAULTS;
  check_all_modes(ctx, tx, tt, x, t, B, C, p, "uniform");
  free(x);
  free(t);
  tu_free_all(ctx, tx, tt, NULL);
}
END_TEST

/* Label smoothing and grad_scale != 1 on a few shapes (smoothing 1 leaves
 * only the uniform term). */
START_TEST(smoothing_and_scale) {
  static const size_t shapes[][2] = {{7, 1000}, {4097, 65}, {3, 9001}, {5, 1}};
  static const float smooth[] = {0.1f, 1.0f};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 77);
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    const size_t B = shapes[k][0], C = shapes[k][1];
    float *x = malloc(B * C * sizeof *x);
    int32_t *t = malloc(B * sizeof *t);
    random_case(&r, x, t, B, C);
    size_t s[2] = {B, C};
    rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, s, x), *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t);
    for (int i = 0; i < 2; i++) {
      rumus_xent_params p = RUMUS_XENT_DEFAULTS;
      p.label_smoothing = smooth[i];
      p.grad_scale = i ? -0.5f : 2.5f;
      check_all_modes(ctx, tx, tt, x, t, B, C, p, i ? "smooth1" : "smooth01");
    }
    rumus_tensor_free(tx);
    rumus_tensor_free(tt);
    free(x);
    free(t);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Central finite differences of the scalar loss through the device's own
 * forward, against the device's gradient: MEAN and SUM, smoothing 0.1, one
 * ignored row, grad_scale 1.5 (the numeric derivative is scaled alike). */
START_TEST(grad_finite_differences) {
  rumus_ctx *ctx = tu_ctx();
  enum { B = 4, C = 7 };
  const double h = 1e-2;
  tu_rng r;
  tu_rng_seed(&r, 42);
  float x[B * C], xp[B * C];
  int32_t t[B] = {3, 0, -100, 6};
  tu_fill_uniform(&r, x, B * C, -2, 2);
  size_t s[2] = {B, C};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, s, x), *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t),
               *tg = tu_tensor(ctx, RUMUS_F32, 2, s, NULL), *tl = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  for (int ri = 0; ri < 2; ri++) {
    rumus_xent_params p = {REDUCTIONS[ri], -100, 0.1f, 1.5f};
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_tensor_upload(tx, x, sizeof x));
      TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tl, tg, &p));
      float *g = tu_download(ctx, tg);
      double numeric[B * C];
      for (size_t i = 0; i < B * C; i++) {
        double l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
          memcpy(xp, x, sizeof x);
          xp[i] += (float)(sgn ? -h : h);
          TU_OK(ctx, rumus_tensor_upload(tx, xp, sizeof xp));
          TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tl, NULL, &p));
          float lv;
          TU_OK(ctx, rumus_tensor_download(tl, &lv, sizeof lv));
          l[sgn] = lv;
        }
        numeric[i] = p.grad_scale * (l[0] - l[1]) / (2 * h);
      }
      char name[64];
      snprintf(name, sizeof name, "fd_%s_%s", tu_variant_name(tu_variants[v]), red_name(p.reduction));
      tu_check_close(name, g, numeric, B * C, 1e-3, 1e-2);
      /* The ignored row's gradient is exactly zero. */
      for (size_t j = 0; j < C; j++) ck_assert_msg(g[2 * C + j] == 0.0f, "%s: ignored row", name);
      free(g);
    }
  }
  tu_free_all(ctx, tx, tt, tg, tl, NULL);
}
END_TEST

/* The same call twice gives the same bits (fixed reduction order). */
START_TEST(deterministic) {
  rumus_ctx *ctx = tu_ctx();
  const size_t B = 20011, C = 33;
  tu_rng r;
  tu_rng_seed(&r, 5);
  float *x = malloc(B * C * sizeof *x);
  int32_t *t = malloc(B * sizeof *t);
  random_case(&r, x, t, B, C);
  size_t s[2] = {B, C};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, s, x), *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t),
               *tg = tu_tensor(ctx, RUMUS_F32, 2, s, NULL), *tl = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, 0.1f, 1.0f};
  ref_out want = ref_run(x, t, B, C, &p);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float l[2], *g[2];
    for (int k = 0; k < 2; k++) {
      TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tl, tg, &p));
      TU_OK(ctx, rumus_tensor_download(tl, &l[k], sizeof l[k]));
      g[k] = tu_download(ctx, tg);
    }
    ck_assert_msg(memcmp(&l[0], &l[1], sizeof l[0]) == 0, "loss %.9g then %.9g", l[0], l[1]);
    ck_assert(memcmp(g[0], g[1], B * C * sizeof(float)) == 0);
    tu_check_close("deterministic_loss", &l[0], &want.total, 1, LOSS_ATOL, LOSS_RTOL);
    free(g[0]);
    free(g[1]);
  }
  ref_free(&want);
  free(x);
  free(t);
  tu_free_all(ctx, tx, tt, tg, tl, NULL);
}
END_TEST

/* The types of the typed tests: logits (and gradient) F16 for _i 0, BF16
 * for _i 1; losses F32 and of the logits' type. */
static rumus_dtype typed_logits(int i) { return tu_dtypes[1 + i % 2]; }

/* Logits of type d (x rounded to it first) and targets, then every mode
 * with an F32 loss and with a loss of type d. */
static void check_typed(rumus_ctx *ctx, rumus_dtype d, float *x,
                        const int32_t *t, size_t B, size_t C,
                        rumus_xent_params p, const char *what) {
  tu_round_to(d, x, B * C);
  const size_t s[2] = {B, C};
  rumus_tensor *tx = tu_tensor_typed(ctx, d, 2, s, x),
               *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t);
  for (int k = 0; k < 2; k++) {
    const rumus_dtype lt = k ? d : RUMUS_F32;
    char name[64];
    snprintf(name, sizeof name, "%s_%s_loss_%s", what, tu_dtype_name(d),
             tu_dtype_name(lt));
    check_all_modes_typed(ctx, tx, tt, x, t, B, C, p, lt, name);
  }
  rumus_tensor_free(tx);
  rumus_tensor_free(tt);
}

/* F16 and BF16 logits on shapes that take every kernel: the row variant
 * (every shape; runs of ROW_RUN rows ending short at 37 and 33 rows, tails
 * of fewer than 8 at 67 and 9001); _wgc on rows of 67 (not aligned), 1004
 * (4-aligned: float4 groups), 1000 and 1016 (8-aligned: groups of 8; at
 * 1016 the last lane's last group lies past the row); _wg at 9001 and 9000
 * (groups of 8); with WG 16, _wgl at 600 (with a gradient or smoothing,
 * _wg without).  Every 11th row ignored; smoothing and grad_scale on some
 * shapes. */
START_TEST(typed_modes) {
  static const struct {
    size_t B, C;
    int wg;
    float smooth, scale;
  } CASES[] = {{5, 1, 0, 0.0f, 1.0f},     {37, 67, 0, 0.1f, 2.5f},
               {33, 1000, 0, 0.0f, 1.0f}, {5, 1004, 0, 0.1f, 1.0f},
               {7, 1016, 0, 0.1f, 1.5f},  {3, 9001, 0, 0.1f, 1.0f},
               {2, 9000, 0, 0.1f, 1.0f},  {9, 600, 16, 0.0f, -0.5f}};
  const rumus_dtype d = typed_logits(_i);
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
    const size_t B = CASES[k].B, C = CASES[k].C;
    TU_OK(ctx,
          rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, CASES[k].wg));
    float *x = tu_malloc(B * C * sizeof *x);
    int32_t *t = tu_malloc(B * sizeof *t);
    tu_rng r;
    tu_rng_seed(&r, 300 + k);
    random_case(&r, x, t, B, C);
    rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, CASES[k].smooth,
                           CASES[k].scale};
    check_typed(ctx, d, x, t, B, C, p, "typed");
    free(x);
    free(t);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- limits --------------------------------------------------------------- */

/* The wide rung, cross-entropy's default: rows of 8193 to 32768 classes
 * held in the registers of 512 work-items (xent_fwd_bwd_wgc at CACHE_V4
 * 16), F32 and F16 logits, smoothing, every reduction, both variants,
 * against the reference; the profile shows the _wgc kernel ran (and not
 * past 32768, nor under RUMUS_ROWS_WIDE_RUNG=0). */
START_TEST(wide_rung_default) {
  static const size_t CS[] = {8193, 20000, 32768, 32769, 8200};
  const size_t B = 3, ncs = sizeof CS / sizeof CS[0];
  rumus_ctx *ctx = tu_profiling_ctx();
  for (size_t c = 0; c < ncs; c++) {
    const size_t C = CS[c];
    const int off = c == ncs - 1; /* the last case with the rung turned off */
    if (off) setenv("RUMUS_ROWS_WIDE_RUNG", "0", 1);
    for (int d = 0; d < 2; d++) {
      float *x = tu_malloc(B * C * sizeof *x);
      int32_t *t = tu_malloc(B * sizeof *t);
      tu_rng r;
      tu_rng_seed(&r, 700 + c);
      random_case(&r, x, t, B, C);
      rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, 0.1f, 1.0f};
      check_typed(ctx, d ? RUMUS_F16 : RUMUS_F32, x, t, B, C, p, "wide");
      const int seen = tu_kernel_ran(ctx, "xent_fwd_bwd_wgc");
      ck_assert_msg(seen == (C <= 32768 && !off), "xent_fwd_bwd_wgc at %zu "
                    "classes (%s%s): %s", C, d ? "F16" : "F32",
                    off ? ", RUMUS_ROWS_WIDE_RUNG=0" : "",
                    seen ? "ran" : "did not run");
      free(x);
      free(t);
    }
  }
  unsetenv("RUMUS_ROWS_WIDE_RUNG");
  tu_free_all(ctx, NULL);
}
END_TEST

/* Other work-group sizes (RUMUS_OPT_WORKGROUP_SIZE): the row kernels, the
 * count and the reduction all follow WG. */
START_TEST(workgroup_sizes) {
  static const int WGS[] = {16, 1024};
  rumus_ctx *ctx = tu_ctx();
  const size_t B = 4097, C = 129;
  tu_rng r;
  tu_rng_seed(&r, 8);
  float *x = malloc(B * C * sizeof *x);
  int32_t *t = malloc(B * sizeof *t);
  random_case(&r, x, t, B, C);
  size_t s[2] = {B, C};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, s, x), *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t);
  for (int k = 0; k < 2; k++) {
    TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, WGS[k]));
    rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, 0.1f, 1.0f};
    check_all_modes(ctx, tx, tt, x, t, B, C, p, k ? "wg1024" : "wg16");
  }
  free(x);
  free(t);
  tu_free_all(ctx, tx, tt, NULL);
}
END_TEST

/* The SPECIAL_B rows of special_rows, of C classes, and their targets. */
enum { SPECIAL_B = 8 };
static void special_case(float *x, int32_t *t, size_t C) {
  static const int32_t T[SPECIAL_B] = {1, 5, 0, 1, -1, 0, 2, 4};
  for (int i = 0; i < SPECIAL_B; i++) t[i] = T[i] < 0 ? (int32_t)C - 1 : T[i];
  tu_rng r;
  tu_rng_seed(&r, 9);
  for (size_t j = 0; j < C; j++) {
    x[0 * C + j] = (j % 2) ? 1e4f : -1e4f;
    x[1 * C + j] = 1e4f - (float)(j % 100);
    x[2 * C + j] = 3.25f;
    x[3 * C + j] = (j % 3 == 0) ? -INFINITY : tu_uniform(&r, -3, 3);
    x[4 * C + j] = (j == C - 1) ? 0.5f : -INFINITY;
    x[5 * C + j] = (j % 2 == 0) ? -INFINITY : tu_uniform(&r, -3, 3);
    x[6 * C + j] = -INFINITY;
    x[7 * C + j] = (j == C / 2) ? NAN : tu_uniform(&r, -3, 3);
  }
}

/* Rows of +-1e4, a 1e4 ramp, equal values, -INFINITY entries, a single
 * finite entry, -INFINITY at the target (loss +inf), all -INFINITY (NaN), a
 * NaN entry (NaN).  The GPU variant's kernel for each (C, work-group size):
 * 70 (_wgc, 8 work-items per row), 9001 (_wg: past the _wgc registers and
 * the _wgl row cache), 600 with WG 16 (_wgl with a gradient or smoothing,
 * _wg without: past 4 * 16 * 8 = 512), 9001 with WG 1024 (_wgc, 512
 * work-items per row). */
START_TEST(special_rows) {
  rumus_ctx *ctx = tu_ctx();
  static const size_t CS[4] = {70, 9001, 600, 9001};
  static const int WGS[4] = {0, 0, 16, 1024};
  enum { B = SPECIAL_B };
  for (int k = 0; k < 4; k++) {
    const size_t C = CS[k];
    TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, WGS[k]));
    float *x = malloc(B * C * sizeof *x);
    int32_t t[B];
    special_case(x, t, C);
    size_t s[2] = {B, C};
    rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, s, x), *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t);
    rumus_xent_params p = RUMUS_XENT_DEFAULTS;
    check_all_modes(ctx, tx, tt, x, t, B, C, p, "special");
    p.label_smoothing = 0.1f;
    check_all_modes(ctx, tx, tt, x, t, B, C, p, "special_smooth");
    /* What the reference says, so that the comparison above means it. */
    ref_out want = ref_run(x, t, B, C, &p);
    ck_assert(isfinite(want.rows[0]) && isfinite(want.rows[2]));
    ck_assert(isinf(want.rows[3]) && want.rows[3] > 0); /* -INFINITY entries */
    ck_assert(isinf(want.rows[4]) && isinf(want.rows[5]) && want.rows[5] > 0);
    ck_assert(isnan(want.rows[6]) && isnan(want.rows[7]));
    ref_free(&want);
    p.label_smoothing = 0.0f;
    want = ref_run(x, t, B, C, &p);
    ck_assert(want.rows[4] == 0.0 && isinf(want.rows[5]) && isfinite(want.rows[3]));
    ref_free(&want);
    rumus_tensor_free(tx);
    rumus_tensor_free(tt);
    free(x);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* special_rows with F16 and BF16 logits (+-1e4 and the ramp as the types
 * round them; inf and NaN losses stored in 16 bits), both loss types: rows
 * of 70 (_wgc) and 600 with WG 16 (_wgl with a gradient or smoothing, _wg
 * without); without smoothing and with. */
START_TEST(typed_special_rows) {
  static const size_t CS[2] = {70, 600};
  static const int WGS[2] = {0, 16};
  enum { B = SPECIAL_B };
  const rumus_dtype d = typed_logits(_i);
  rumus_ctx *ctx = tu_ctx();
  for (int k = 0; k < 2; k++) {
    const size_t C = CS[k];
    TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, WGS[k]));
    float *x = tu_malloc(B * C * sizeof *x);
    int32_t t[B];
    special_case(x, t, C);
    for (int sm = 0; sm < 2; sm++) {
      rumus_xent_params p = RUMUS_XENT_DEFAULTS;
      p.label_smoothing = sm ? 0.1f : 0.0f;
      check_typed(ctx, d, x, t, B, C, p, sm ? "special_smooth" : "special");
    }
    free(x);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ignore_index: a class index in range (3) as the ignored value, some rows;
 * then every row ignored (MEAN: NaN, SUM: 0, gradient exactly 0). */
START_TEST(ignore_index) {
  rumus_ctx *ctx = tu_ctx();
  enum { B = 50, C = 10 };
  tu_rng r;
  tu_rng_seed(&r, 11);
  float x[B * C];
  int32_t t[B];
  tu_fill_uniform(&r, x, B * C, -4, 4);
  for (int i = 0; i < B; i++) t[i] = (int32_t)(tu_rand_u32(&r) % C);
  size_t s[2] = {B, C};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, s, x), *tt = tu_tensor(ctx, RUMUS_I32, 1, s, t);
  rumus_xent_params p = {RUMUS_REDUCTION_MEAN, 3, 0.1f, 0.5f};
  check_all_modes(ctx, tx, tt, x, t, B, C, p, "ignore3");
  for (int i = 0; i < B; i++) t[i] = -100;
  TU_OK(ctx, rumus_tensor_upload(tt, t, sizeof t));
  p.ignore_index = -100;
  check_all_modes(ctx, tx, tt, x, t, B, C, p, "ignore_all");
  rumus_tensor *tg = tu_tensor(ctx, RUMUS_F32, 2, s, NULL), *tl = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int ri = 0; ri < 2; ri++) {
      p.reduction = REDUCTIONS[ri];
      TU_OK(ctx, rumus_tensor_fill(tg, 1.0f));
      TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tl, tg, &p));
      float l, *g = tu_download(ctx, tg);
      TU_OK(ctx, rumus_tensor_download(tl, &l, sizeof l));
      if (p.reduction == RUMUS_REDUCTION_MEAN)
        ck_assert_msg(isnan(l), "MEAN over no rows: %g", l);
      else
        ck_assert_msg(l == 0.0f, "SUM over no rows: %g", l);
      int nonzero = 0;
      for (int i = 0; i < B * C; i++) nonzero += g[i] != 0.0f;
      ck_assert_msg(nonzero == 0, "%d nonzero gradients with every row ignored", nonzero);
      free(g);
    }
  }
  tu_free_all(ctx, tx, tt, tg, tl, NULL);
}
END_TEST

/* 3-D logits [3, 5, 67] in borrowed buffers (element offsets) with guard
 * bytes around logits, targets, loss and grad. */
START_TEST(logits_3d_guarded) {
  rumus_ctx *ctx = tu_ctx();
  const size_t sx[3] = {3, 5, 67}, st[2] = {3, 5};
  enum { B = 15, C = 67 };
  tu_rng r;
  tu_rng_seed(&r, 3);
  float x[B * C];
  int32_t t[B];
  tu_fill_uniform(&r, x, B * C, -5, 5);
  for (int i = 0; i < B; i++) t[i] = i == 7 ? -100 : (int32_t)(tu_rand_u32(&r) % C);
  for (int ri = 0; ri < 3; ri++) {
    rumus_xent_params p = {REDUCTIONS[ri], -100, 0.05f, 1.25f};
    ref_out want = ref_run(x, t, B, C, &p);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      tu_guarded gx = tu_guarded_tensor(ctx, RUMUS_F32, 3, sx, x);
      tu_guarded gt = tu_guarded_tensor(ctx, RUMUS_I32, 2, st, t);
      tu_guarded gl = p.reduction == RUMUS_REDUCTION_NONE
                          ? tu_guarded_tensor(ctx, RUMUS_F32, 2, st, NULL)
                          : tu_guarded_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
      tu_guarded gg = tu_guarded_tensor(ctx, RUMUS_F32, 3, sx, NULL);
      TU_OK(ctx, rumus_cross_entropy(ctx, gx.t, gt.t, gl.t, gg.t, &p));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      char name[64];
      snprintf(name, sizeof name, "3d_%s_%s", tu_variant_name(tu_variants[v]), red_name(p.reduction));
      compare(ctx, name, p.reduction, gl.t, gg.t, &want, B, C, grad_scale_of(t, B, &p));
      tu_guarded_check_free_all(ctx, &gx, &gt, &gl, &gg, NULL);
    }
    ref_free(&want);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* logits_3d_guarded with F16 logits and gradient in rows of 67 (_i 0: the
 * row kernels' F16 groups of 4 at every alignment) or BF16 in rows of 64
 * (_i 1: the aligned programs' typed 8-element stores), each tensor 4096
 * bytes into its buffer, or F16 in rows of 64 with logits and gradient 4
 * elements further (_i 2: 4-aligned only, float4 groups), and a loss of
 * each type: a 16-bit loss is 2 bytes a row, so a 4-byte store of a
 * per-row or reduced loss reaches the guard; the gradient starts at 7, so
 * the ignored row's zeros must be written. */
START_TEST(typed_guarded) {
  const rumus_dtype d = typed_logits(_i);
  const size_t C = _i ? 64 : 67, sx[3] = {3, 5, C}, st[2] = {3, 5};
  const size_t odd = _i == 2 ? 4 : 0;
  enum { B = 15 };
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 3);
  float *x = tu_malloc(B * C * sizeof *x);
  int32_t t[B];
  tu_fill_uniform(&r, x, B * C, -5, 5);
  tu_round_to(d, x, B * C);
  for (int i = 0; i < B; i++)
    t[i] = i == 7 ? -100 : (int32_t)(tu_rand_u32(&r) % C);
  for (int k = 0; k < 6; k++) {
    const rumus_dtype lt = k % 2 ? d : RUMUS_F32;
    rumus_xent_params p = {REDUCTIONS[k / 2], -100, 0.05f, 1.25f};
    ref_out want = ref_run(x, t, B, C, &p);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      tu_guarded gx = tu_guarded_typed_odd(ctx, d, 3, sx, x, odd);
      tu_guarded gt = tu_guarded_tensor(ctx, RUMUS_I32, 2, st, t);
      tu_guarded gl = p.reduction == RUMUS_REDUCTION_NONE
                          ? tu_guarded_typed(ctx, lt, 2, st, NULL)
                          : tu_guarded_typed(ctx, lt, 0, NULL, NULL);
      tu_guarded gg = tu_guarded_typed_odd(ctx, d, 3, sx, NULL, odd);
      TU_OK(ctx, rumus_tensor_fill(gg.t, 7.0f));
      TU_OK(ctx, rumus_cross_entropy(ctx, gx.t, gt.t, gl.t, gg.t, &p));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      char name[80];
      snprintf(name, sizeof name, "3d_%s_loss_%s_C%zu_%s_%s",
               tu_dtype_name(d), tu_dtype_name(lt), C,
               tu_variant_name(tu_variants[v]), red_name(p.reduction));
      compare(ctx, name, p.reduction, gl.t, gg.t, &want, B, C,
              grad_scale_of(t, B, &p));
      tu_guarded_check_free_all(ctx, &gx, &gt, &gl, &gg, NULL);
    }
    ref_free(&want);
  }
  free(x);
  tu_free_all(ctx, NULL);
}
END_TEST

/* 1-D logits [C] with a scalar target (ndim 0) or a [1] target. */
START_TEST(logits_1d) {
  rumus_ctx *ctx = tu_ctx();
  enum { C = 37 };
  tu_rng r;
  tu_rng_seed(&r, 4);
  float x[C];
  int32_t t = 11;
  tu_fill_uniform(&r, x, C, -3, 3);
  size_t sx[1] = {C}, s1[1] = {1};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 1, sx, x);
  for (int k = 0; k < 2; k++) {
    rumus_tensor *tt = tu_tensor(ctx, RUMUS_I32, k, s1, &t);
    rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, 0.2f, 1.0f};
    check_all_modes(ctx, tx, tt, x, &t, 1, C, p, k ? "1d_t1" : "1d_t0");
    rumus_tensor_free(tt);
  }
  tu_free_all(ctx, tx, NULL);
}
END_TEST

/* More rows than one launch of the work-group variant covers: its row
 * kernels go in chunks of RUMUS__MAX_WG_ROWS = 2^22 rows (src/ops/ops.h),
 * each with its own logits, target, loss-row and gradient offsets and its
 * first row (for the device's error report).  2^22 + 37 rows of 3 classes
 * (50 MB of logits), every row compared: MEAN with the gradient (per-row
 * losses in scratch), then NONE without it and with an out-of-range target
 * in the second chunk (losses in the loss tensor; the error names the
 * row).  Most rows of the first chunk are ignored, so that the mean is
 * over a few hundred rows and one misplaced row of the second chunk moves
 * it far past the tolerance.  Outputs start as NaN, so a row that no chunk
 * writes fails.  Two calls: 1-2 s each on PoCL.  The row variant launches
 * 2^30 rows at once (4 GiB of one-class logits): not tested. */
START_TEST(chunked_rows) {
  enum { C = 3 };
  const size_t CHUNK = (size_t)1 << 22, B = CHUNK + 37, BAD = CHUNK + 5;
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  tu_rng r;
  tu_rng_seed(&r, 61);
  float *x = tu_malloc(B * C * sizeof *x);
  int32_t *t = tu_malloc(B * sizeof *t);
  tu_fill_uniform(&r, x, B * C, -4.0f, 4.0f);
  for (size_t i = 0; i < B; i++) {
    const int counted = i < 64 || i >= CHUNK - 64 || i % 65536 == 7;
    t[i] = counted && i != CHUNK + 11 ? (int32_t)(tu_rand_u32(&r) % C) : -100;
  }
  const size_t sx[2] = {B, C}, st[1] = {B};
  const char *what = "xent chunked_rows 4194341 x 3";
  rumus_tensor *tx = tu_tensor_or_skip(ctx, RUMUS_F32, 2, sx, x, what);
  rumus_tensor *tt =
      tx ? tu_tensor_or_skip(ctx, RUMUS_I32, 1, st, t, what) : NULL;
  rumus_tensor *tg =
      tt ? tu_tensor_or_skip(ctx, RUMUS_F32, 2, sx, NULL, what) : NULL;
  rumus_tensor *tn =
      tg ? tu_tensor_or_skip(ctx, RUMUS_F32, 1, st, NULL, what) : NULL;
  if (tn) {
    rumus_tensor *ts = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
    rumus_xent_params p = {RUMUS_REDUCTION_MEAN, -100, 0.0f, 1.5f};
    ref_out want = ref_run(x, t, B, C, &p);
    TU_OK(ctx, rumus_tensor_fill(ts, NAN));
    TU_OK(ctx, rumus_tensor_fill(tg, NAN));
    TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, ts, tg, &p));
    TU_OK(ctx, rumus_ctx_sync(ctx));
    compare(ctx, "chunked_mean", p.reduction, ts, tg, &want, B, C,
            grad_scale_of(t, B, &p));

    t[BAD] = C;
    TU_OK(ctx, rumus_tensor_upload(tt, t, B * sizeof *t));
    p.reduction = RUMUS_REDUCTION_NONE;
    ref_cross_entropy(x, t, B, C, (int)p.reduction, p.ignore_index,
                      p.label_smoothing, p.grad_scale, want.rows, &want.total,
                      NULL); /* no gradient */
    TU_OK(ctx, rumus_tensor_fill(tn, NAN));
    TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tn, NULL, &p));
    TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
    char row[32];
    snprintf(row, sizeof row, "row %zu ", BAD);
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), row), "%s",
                  rumus_ctx_errmsg(ctx));
    TU_OK(ctx, rumus_ctx_sync(ctx));
    compare(ctx, "chunked_none", p.reduction, tn, NULL, &want, B, C,
            p.grad_scale);
    ck_assert(isnan(want.rows[BAD]));
    ref_free(&want);
    rumus_tensor_free(ts);
  }
  free(x);
  free(t);
  tu_free_all(ctx, tx, tt, tg, tn, NULL);
}
END_TEST

/* An empty batch: MEAN gives NaN, SUM 0, NONE nothing; the gradient is
 * empty too. */
START_TEST(empty_batch) {
  rumus_ctx *ctx = tu_ctx();
  size_t sx[2] = {0, 5}, st[1] = {0};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, sx, NULL), *tt = tu_tensor(ctx, RUMUS_I32, 1, st, NULL),
               *tg = tu_tensor(ctx, RUMUS_F32, 2, sx, NULL), *tn = tu_tensor(ctx, RUMUS_F32, 1, st, NULL),
               *ts = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int ri = 0; ri < 3; ri++) {
      rumus_xent_params p = {REDUCTIONS[ri], -100, 0.0f, 1.0f};
      rumus_tensor *tl = p.reduction == RUMUS_REDUCTION_NONE ? tn : ts;
      TU_OK(ctx, rumus_tensor_fill(ts, 5.0f));
      TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tl, tg, &p));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      float l;
      TU_OK(ctx, rumus_tensor_download(ts, &l, sizeof l));
      if (p.reduction == RUMUS_REDUCTION_MEAN) ck_assert_msg(isnan(l), "empty MEAN: %g", l);
      if (p.reduction == RUMUS_REDUCTION_SUM) ck_assert_msg(l == 0.0f, "empty SUM: %g", l);
      if (p.reduction == RUMUS_REDUCTION_NONE) ck_assert_msg(l == 5.0f, "NONE wrote %g", l);
    }
  }
  tu_free_all(ctx, tx, tt, tg, tn, ts, NULL);
}
END_TEST

/* ---- errors --------------------------------------------------------------- */

/* Out-of-range targets: EINDEX at the next sync naming the op, the value
 * and the row; NaN loss and zero gradient for that row; the other rows
 * right; nothing written outside the buffers; the following sync is OK. */
START_TEST(bad_targets) {
  static const int32_t BAD[] = {-1, 0 /* C */, INT32_MAX, INT32_MIN};
  static const size_t CS[2] = {37, 9001};
  enum { B = 9, BAD_ROW = 4 };
  rumus_ctx *ctx = tu_ctx();
  for (int k = 0; k < 2; k++) {
    const size_t C = CS[k];
    const size_t sx[2] = {B, C}, st[1] = {B}, s1[1] = {1};
    float *x = malloc(B * C * sizeof *x);
    int32_t t[B];
    tu_rng r;
    tu_rng_seed(&r, 21);
    tu_fill_uniform(&r, x, B * C, -3, 3);
    for (int b = 0; b < (int)(sizeof BAD / sizeof BAD[0]); b++) {
      for (int i = 0; i < B; i++) t[i] = (int32_t)((i * 7) % C);
      t[2] = -100; /* an ignored row next to the bad one */
      t[BAD_ROW] = b == 1 ? (int32_t)C : BAD[b];
      for (int v = 0; v < 2; v++) {
        tu_set_variant(ctx, tu_variants[v]);
        for (int ri = 0; ri < 3; ri++) {
          rumus_xent_params p = {REDUCTIONS[ri], -100, 0.1f, 1.0f};
          ref_out want = ref_run(x, t, B, C, &p);
          tu_guarded gx = tu_guarded_tensor(ctx, RUMUS_F32, 2, sx, x);
          tu_guarded gt = tu_guarded_tensor(ctx, RUMUS_I32, 1, st, t);
          tu_guarded gl = tu_guarded_tensor(ctx, RUMUS_F32, 1, p.reduction == RUMUS_REDUCTION_NONE ? st : s1, NULL);
          tu_guarded gg = tu_guarded_tensor(ctx, RUMUS_F32, 2, sx, NULL);
          TU_OK(ctx, rumus_cross_entropy(ctx, gx.t, gt.t, gl.t, gg.t, &p));
          TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
          char value[32];
          snprintf(value, sizeof value, "%d", (int)t[BAD_ROW]);
          const char *msg = rumus_ctx_errmsg(ctx);
          ck_assert_msg(strstr(msg, "rumus_cross_entropy") && strstr(msg, value) && strstr(msg, "row 4"),
                        "message: %s", msg);
          TU_OK(ctx, rumus_ctx_sync(ctx));
          ck_assert(isnan(want.rows[BAD_ROW]));
          char name[64];
          snprintf(name, sizeof name, "bad_%d_%s_%s", (int)t[BAD_ROW], tu_variant_name(tu_variants[v]),
                   red_name(p.reduction));
          compare(ctx, name, p.reduction, gl.t, gg.t, &want, B, C, grad_scale_of(t, B, &p));
          float *g = tu_download(ctx, gg.t);
          size_t nonzero = 0;
          for (size_t j = 0; j < C; j++) nonzero += g[BAD_ROW * C + j] != 0.0f;
          ck_assert_msg(nonzero == 0, "%s: %zu nonzero gradients in the bad row", name, nonzero);
          free(g);
          tu_guarded_check_free_all(ctx, &gx, &gt, &gl, &gg, NULL);
          ref_free(&want);
        }
      }
    }
    free(x);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Logits with zero classes: every target that is not ignored is out of
 * range. */
START_TEST(zero_classes) {
  rumus_ctx *ctx = tu_ctx();
  size_t sx[2] = {3, 0}, st[1] = {3};
  int32_t t[3] = {-100, 0, -100};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, sx, NULL), *tt = tu_tensor(ctx, RUMUS_I32, 1, st, t),
               *tl = tu_tensor(ctx, RUMUS_F32, 1, st, NULL), *tg = tu_tensor(ctx, RUMUS_F32, 2, sx, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    rumus_xent_params p = {RUMUS_REDUCTION_NONE, -100, 0.0f, 1.0f};
    TU_OK(ctx, rumus_cross_entropy(ctx, tx, tt, tl, tg, &p));
    TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "row 1"), "%s", rumus_ctx_errmsg(ctx));
    float *l = tu_download(ctx, tl);
    ck_assert(l[0] == 0.0f && isnan(l[1]) && l[2] == 0.0f);
    free(l);
    TU_OK(ctx, rumus_ctx_sync(ctx));
  }
  tu_free_all(ctx, tx, tt, tl, tg, NULL);
}
END_TEST

/* The _wgc kernels' last work-group, padded with rows past the batch: B not
 * a multiple of the rows per work-group (WG / rt), the last row's target out
 * of range, the one before ignored, the first ignored; guard bytes around
 * every buffer.  (WG, C, B): (default 256, 100, 37): rt 8, 32 rows per
 * group; (16, 33, 7): rt 8, 2 per group; (1024, 1000, 37): rt 32, 32 per
 * group; (16, 500, 3): rt 16, one row per group (no padding). */
START_TEST(wgc_padding) {
  static const int WGS[] = {0, 16, 1024, 16};
  static const size_t CS[] = {100, 33, 1000, 500}, BS[] = {37, 7, 37, 3};
  rumus_ctx *ctx = tu_ctx();
  for (int k = 0; k < 4; k++) {
    const size_t C = CS[k], B = BS[k];
    TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, WGS[k]));
    const size_t sx[2] = {B, C}, st[1] = {B}, s1[1] = {1};
    float *x = malloc(B * C * sizeof *x);
    int32_t *t = malloc(B * sizeof *t);
    tu_rng r;
    tu_rng_seed(&r, 31 + k);
    random_case(&r, x, t, B, C);
    t[0] = -100;
    t[B - 2] = -100;
    for (int bad = 0; bad < 2; bad++) {
      t[B - 1] = bad ? -1 : (int32_t)C;
      for (int v = 0; v < 2; v++) {
        tu_set_variant(ctx, tu_variants[v]);
        for (int ri = 0; ri < 3; ri++) {
          for (int sm = 0; sm < 2; sm++) {
            rumus_xent_params p = {REDUCTIONS[ri], -100, sm ? 0.2f : 0.0f, 1.5f};
            ref_out want = ref_run(x, t, B, C, &p);
            tu_guarded gx = tu_guarded_tensor(ctx, RUMUS_F32, 2, sx, x);
            tu_guarded gt = tu_guarded_tensor(ctx, RUMUS_I32, 1, st, t);
            tu_guarded gl = tu_guarded_tensor(ctx, RUMUS_F32, 1, p.reduction == RUMUS_REDUCTION_NONE ? st : s1, NULL);
            tu_guarded gg = tu_guarded_tensor(ctx, RUMUS_F32, 2, sx, NULL);
            TU_OK(ctx, rumus_tensor_fill(gg.t, 7.0f)); /* zeros must be written */
            TU_OK(ctx, rumus_cross_entropy(ctx, gx.t, gt.t, gl.t, gg.t, &p));
            TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
            char row[32];
            snprintf(row, sizeof row, "row %zu", B - 1);
            ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), row), "%s", rumus_ctx_errmsg(ctx));
            TU_OK(ctx, rumus_ctx_sync(ctx));
            char name[96];
            snprintf(name, sizeof name, "pad_wg%d_C%zu_B%zu_%s_%s_s%d_b%d", WGS[k], C, B,
                     tu_variant_name(tu_variants[v]), red_name(p.reduction), sm, bad);
            compare(ctx, name, p.reduction, gl.t, gg.t, &want, B, C, grad_scale_of(t, B, &p));
            if (p.reduction == RUMUS_REDUCTION_NONE) {
              float *l = tu_download(ctx, gl.t);
              ck_assert_msg(l[0] == 0.0f && l[B - 2] == 0.0f && isnan(l[B - 1]), "%s: %g %g %g", name,
                            l[0], l[B - 2], l[B - 1]);
              free(l);
            }
            float *g = tu_download(ctx, gg.t);
            size_t nonzero = 0;
            for (size_t j = 0; j < C; j++)
              nonzero += (g[j] != 0.0f) + (g[(B - 2) * C + j] != 0.0f) + (g[(B - 1) * C + j] != 0.0f);
            ck_assert_msg(nonzero == 0, "%s: %zu nonzero gradients in ignored or bad rows", name, nonzero);
            free(g);
            tu_guarded_check_free_all(ctx, &gx, &gt, &gl, &gg, NULL);
            ref_free(&want);
          }
        }
      }
    }
    free(x);
    free(t);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(bad_input) {
  rumus_ctx *ctx = tu_ctx();
  size_t sx[2] = {4, 8}, st[1] = {4}, st5[1] = {5}, st41[2] = {4, 1}, sx9[2] = {4, 9};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 2, sx, NULL), *xi = tu_tensor(ctx, RUMUS_I32, 2, sx, NULL),
               *t = tu_tensor(ctx, RUMUS_I32, 1, st, NULL), *tf = tu_tensor(ctx, RUMUS_F32, 1, st, NULL),
               *t5 = tu_tensor(ctx, RUMUS_I32, 1, st5, NULL), *t41 = tu_tensor(ctx, RUMUS_I32, 2, st41, NULL),
               *ls = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL), *li = tu_tensor(ctx, RUMUS_I32, 0, NULL, NULL),
               *lrow = tu_tensor(ctx, RUMUS_F32, 1, st, NULL), *l5 = tu_tensor(ctx, RUMUS_F32, 1, st5, NULL),
               *g = tu_tensor(ctx, RUMUS_F32, 2, sx, NULL), *g9 = tu_tensor(ctx, RUMUS_F32, 2, sx9, NULL),
               *gi = tu_tensor(ctx, RUMUS_I32, 2, sx, NULL), *xs = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  const int32_t tv[4] = {0, 1, 2, 3};
  TU_OK(ctx, rumus_tensor_upload(t, tv, sizeof tv));
  TU_OK(ctx, rumus_tensor_fill(x, 0.5f));
  rumus_xent_params p = RUMUS_XENT_DEFAULTS, q;
  TU_STATUS(RUMUS_ENULL, rumus_cross_entropy(NULL, x, t, ls, g, &p));
  TU_STATUS(RUMUS_ENULL, rumus_cross_entropy(ctx, NULL, t, ls, g, &p));
  TU_STATUS(RUMUS_ENULL, rumus_cross_entropy(ctx, x, NULL, ls, g, &p));
  TU_STATUS(RUMUS_ENULL, rumus_cross_entropy(ctx, x, t, NULL, g, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, xi, t, ls, g, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x, tf, ls, g, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "targets"), "%s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x, t, li, g, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x, t, ls, gi, &p));
  /* Shapes. */
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t5, ls, g, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[5]") && strstr(rumus_ctx_errmsg(ctx), "[4, 8]"),
                "message names the shapes: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t41, ls, g, &p));
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, xs, t, ls, NULL, &p));
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t, lrow, g, &p)); /* MEAN wants a scalar */
  q = p;
  q.reduction = RUMUS_REDUCTION_SUM;
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t, l5, NULL, &q));
  q.reduction = RUMUS_REDUCTION_NONE;
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t, ls, g, &q));
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t, l5, g, &q));
  TU_OK(ctx, rumus_cross_entropy(ctx, x, t, lrow, g, &q));
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t, ls, g9, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "grad"), "%s", rumus_ctx_errmsg(ctx));
  /* Parameters. */
  q = p;
  q.reduction = (rumus_reduction)3;
  TU_STATUS(RUMUS_EINVAL, rumus_cross_entropy(ctx, x, t, ls, g, &q));
  q.reduction = (rumus_reduction)-1;
  TU_STATUS(RUMUS_EINVAL, rumus_cross_entropy(ctx, x, t, ls, g, &q));
  static const float bad_smooth[] = {-0.1f, 1.5f, NAN, INFINITY};
  for (int i = 0; i < 4; i++) {
    q = p;
    q.label_smoothing = bad_smooth[i];
    TU_STATUS(RUMUS_EINVAL, rumus_cross_entropy(ctx, x, t, ls, g, &q));
  }
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "label_smoothing"), "%s", rumus_ctx_errmsg(ctx));
  /* A failed call enqueues nothing: the loss keeps its value. */
  TU_OK(ctx, rumus_tensor_fill(ls, 9.0f));
  TU_STATUS(RUMUS_ESHAPE, rumus_cross_entropy(ctx, x, t, ls, g9, &p));
  float lv;
  TU_OK(ctx, rumus_tensor_download(ls, &lv, sizeof lv));
  ck_assert(lv == 9.0f);
  /* params NULL means the defaults (MEAN): log 8 for equal logits. */
  TU_OK(ctx, rumus_cross_entropy(ctx, x, t, ls, NULL, NULL));
  TU_OK(ctx, rumus_tensor_download(ls, &lv, sizeof lv));
  ck_assert_msg(fabs(lv - log(8.0)) < 1e-5, "default params: %g", lv);
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 2, sx, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_cross_entropy(ctx, o, t, ls, g, &p));
  TU_STATUS(RUMUS_EINVAL, rumus_cross_entropy(ctx, x, t, ls, o, &p));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, x, xi, t, tf, t5, t41, ls, li, lrow, l5, g, g9, gi, xs, NULL);
}
END_TEST

/* Type rules: logits floating; grad the logits' type; loss F32 or the
 * logits' type; targets I32.  Each breach is RUMUS_EDTYPE naming the
 * argument, with nothing enqueued (the loss keeps its value). */
START_TEST(bad_types) {
  rumus_ctx *ctx = tu_ctx();
  const size_t sx[2] = {4, 8}, st[1] = {4};
  rumus_tensor *x16 = tu_tensor_typed(ctx, RUMUS_F16, 2, sx, NULL),
               *xb16 = tu_tensor_typed(ctx, RUMUS_BF16, 2, sx, NULL),
               *x32 = tu_tensor_typed(ctx, RUMUS_F32, 2, sx, NULL),
               *xi = tu_tensor(ctx, RUMUS_I32, 2, sx, NULL),
               *g16 = tu_tensor_typed(ctx, RUMUS_F16, 2, sx, NULL),
               *gb16 = tu_tensor_typed(ctx, RUMUS_BF16, 2, sx, NULL),
               *g32 = tu_tensor_typed(ctx, RUMUS_F32, 2, sx, NULL),
               *t = tu_tensor(ctx, RUMUS_I32, 1, st, NULL),
               *t16 = tu_tensor_typed(ctx, RUMUS_F16, 1, st, NULL),
               *l32 = tu_tensor_typed(ctx, RUMUS_F32, 0, NULL, NULL),
               *l16 = tu_tensor_typed(ctx, RUMUS_F16, 0, NULL, NULL),
               *lb16 = tu_tensor_typed(ctx, RUMUS_BF16, 0, NULL, NULL),
               *li = tu_tensor(ctx, RUMUS_I32, 0, NULL, NULL);
  const int32_t tv[4] = {0, 1, 2, 3};
  TU_OK(ctx, rumus_tensor_upload(t, tv, sizeof tv));
  TU_OK(ctx, rumus_tensor_fill(x16, 0.5f));
  TU_OK(ctx, rumus_tensor_fill(xb16, 0.5f));
  TU_OK(ctx, rumus_tensor_fill(l16, 9.0f));
  const rumus_xent_params p = RUMUS_XENT_DEFAULTS;
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, xi, t, l32, NULL, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "logits is i32"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x16, t, l32, gb16, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "grad is bf16, expected f16"),
                "%s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x16, t, l32, g32, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, xb16, t, l32, g16, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x32, t, l32, g16, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x16, t, lb16, g16, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx),
                       "loss is bf16, expected f32 or the logits' type f16"),
                "%s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, xb16, t, l16, NULL, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x16, t, li, NULL, &p));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x32, t, l16, g32, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "loss is f16, expected f32"),
                "%s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_cross_entropy(ctx, x16, t16, l16, g16, &p));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "targets"), "%s",
                rumus_ctx_errmsg(ctx));
  float lv;
  TU_OK(ctx, rumus_tensor_download_f32(l16, &lv, 1));
  ck_assert_msg(lv == 9.0f, "a refused call wrote the loss: %g", lv);
  /* The accepted combinations: log 8 for equal logits. */
  TU_OK(ctx, rumus_cross_entropy(ctx, x16, t, l16, g16, &p));
  TU_OK(ctx, rumus_tensor_download_f32(l16, &lv, 1));
  ck_assert_msg(fabs(lv - log(8.0)) < 2e-3, "f16 loss: %g", lv);
  TU_OK(ctx, rumus_cross_entropy(ctx, xb16, t, l32, gb16, &p));
  TU_OK(ctx, rumus_tensor_download_f32(l32, &lv, 1));
  ck_assert_msg(fabs(lv - log(8.0)) < 1e-5, "f32 loss of bf16 logits: %g", lv);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, x16, xb16, x32, xi, g16, gb16, g32, t, t16, l32, l16,
              lb16, li, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("xent");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, random_shapes, 0, (int)(NB * NC));
  tcase_add_test(core, smoothing_and_scale);
  tcase_add_test(core, grad_finite_differences);
  tcase_add_test(core, deterministic);
  tcase_add_loop_test(core, typed_modes, 0, 2);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, workgroup_sizes);
  tcase_add_test(limits, wide_rung_default);
  tcase_add_test(limits, special_rows);
  tcase_add_loop_test(limits, typed_special_rows, 0, 2);
  tcase_add_test(limits, ignore_index);
  tcase_add_test(limits, logits_3d_guarded);
  tcase_add_loop_test(limits, typed_guarded, 0, 3);
  tcase_add_test(limits, logits_1d);
  tcase_add_test(limits, chunked_rows);
  tcase_add_test(limits, empty_batch);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_targets);
  tcase_add_test(errors, zero_classes);
  tcase_add_test(errors, wgc_padding);
  tcase_add_test(errors, bad_input);
  tcase_add_test(errors, bad_types);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
