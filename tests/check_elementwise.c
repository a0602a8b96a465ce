/*
 * check_elementwise.c - bias add / bias gradient, add, sub, mul, scale,
 * axpy, every activation (forward and backward) and the casts between
 * storage types against float64 references, on both variants (the GPU and
 * CPU settings of the flat kernels, the work-group and row variants of
 * bias_grad), over sizes that are and are not multiples of the vector
 * widths, more rows than one launch covers, special inputs, finite
 * differences, in-place calls, borrowed buffers at odd offsets, guard bytes
 * and bad input; F16 and BF16 storage on a covering set of those shapes.
 *
 * Tolerances (`want` is the double result of the float inputs):
 *   add, sub, mul, scale, bias_add   1 ulp: |got - want| <= 2^-23 |want|
 *                                    (one IEEE rounding is within half an ulp)
 *   axpy                             |got - want| <= 2^-23 (|alpha x| + |y|)
 *                                    (two roundings, or one if fused)
 *   relu, leaky relu (fwd, bwd)      1 ulp as above (exact but for slope * x)
 *   sigmoid, tanh, GELUs (fwd, bwd)  atol 1e-6, rtol 2e-6 (16-bit storage:
 *                                    rtol 2e-5, the shorter math, before
 *                                    the rounding below)
 *   every forward at |x| <= 0.3       rtol 4e-6, atol 0 (tanh x ~ x keeps
 *                                    its relative accuracy near 0)
 *   bwd vs central differences of the double reference forward (h = 1e-4):
 *                                    atol 2e-6, rtol 4e-6
 *   bwd vs central differences of the device's own float forward
 *   (h = 1/64):                      atol 1e-3, rtol 1e-2
 *   bias_grad                        |got - want| <= 1e-5 * sum_r |dy[r, j]|
 *                                    (float sums over row chunks, then over
 *                                    the chunks; a missing or doubled row is
 *                                    >= 1/rows of that sum)
 *   bias_grad vs central differences of the device's bias_add (h = 1/2):
 *                                    the same, plus the rounding of y + b to
 *                                    float: 2^-24 |y + b +- h| |dy| per
 *                                    element and side, over the step
 * Infinities and NaN must match exactly (sign included).
 *
 * F16 and BF16 storage: `want` is the double result of the inputs rounded
 * to the type (as the device holds them), and each bound above gains the
 * rounding of the stored result (tests/tu_dtype.h):
 *   F16    + 2^-11 |want| + 2^-25   (half an ulp of an 11-bit significand;
 *                                    the absolute part for subnormals)
 *   BF16   + 2^-8 |want|            (half an ulp of an 8-bit significand)
 * A want beyond the type's range (F16: |want| >= 65520) must be the
 * infinity of its sign.  bias_grad's F32 dbias of 16-bit dy keeps the F32
 * bound (float sums, stored unrounded).  Finite differences stay F32-only:
 * a step large enough to show through 16-bit rounding (2^-8 relative for
 * BF16) would swamp the curvature of the activations, so 16-bit backwards
 * are compared with the reference derivative only.
 * Casts must give the host conversions' bits exactly (rumus_f32_to_f16
 * and the others, NaN payloads included): every 16-bit pattern, ties,
 * overflow, subnormals and NaNs of float, and integers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

#define ULP 1.1920928955078125e-7 /* 2^-23 */

static const size_t SIZES[] = {1, 3, 7, 8, 9, 1023, 4097, ((size_t)1 << 20) + 3};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
/* 64 and 1024: rows of a multiple of 4 features take the aligned float4
 * path of the GPU variant (RUMUS_ALIGN4), the others the unaligned one. */
static const size_t FEATS[] = {1, 10, 257, 64, 1024};
#define NFEATS (sizeof FEATS / sizeof FEATS[0])
static const size_t ROWS[] = {1, 129, 4096};
#define NACT 6
static const char *const ACT_NAMES[NACT] = {"relu", "leaky_relu", "sigmoid",
                                            "tanh", "gelu_tanh", "gelu_erf"};
static const float SLOPE = 0.01f; /* the leaky ReLU parameter */

static rumus_tensor *tensor_1d(rumus_ctx *ctx, size_t n, const float *data) {
  return tu_tensor(ctx, RUMUS_F32, 1, &n, data);
}

/* A 1-D tensor of dtype holding data (converted; NULL: uninitialised). */
static rumus_tensor *typed_1d(rumus_ctx *ctx, rumus_dtype d, size_t n,
                              const float *data) {
  return tu_tensor_typed(ctx, d, 1, &n, data);
}

/* Results stored in d: want becomes the infinity that a value beyond d's
 * range rounds to (F16 from 65520, BF16 and F32 from half an ulp past their
 * largest finite value), and bound gains the rounding of the store. */
static void store_bound(rumus_dtype d, double *want, double *bound,
                        size_t n) {
  const double lim = d == RUMUS_F16    ? 65520.0
                     : d == RUMUS_BF16 ? 0x1.ff8p127
                                       : 0x1.ffffffp127;
  for (size_t i = 0; i < n; i++) {
    if (fabs(want[i]) >= lim && !isinf(want[i]))
      want[i] = copysign(INFINITY, want[i]);
    bound[i] += tu_store_rtol(d) * fabs(want[i]) + tu_store_atol(d);
  }
}

/* n floats in [lo, hi) rounded to d (malloc'ed). */
static float *rand_typed(tu_rng *r, rumus_dtype d, size_t n, float lo,
                         float hi) {
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(r, x, n, lo, hi);
  tu_round_to(d, x, n);
  return x;
}

/* ---- Element-wise arithmetic ------------------------------------------- */

enum { ADD, SUB, MUL, SCALE, AXPY, NOPS };
static const char *const OP_NAMES[NOPS] = {"add", "sub", "mul", "scale", "axpy"};

/* want and bound of one op on float inputs. */
static void ref_op(int op, float alpha, const float *a, const float *b, size_t n,
                   double *want, double *bound) {
  for (size_t i = 0; i < n; i++) {
    double x = a[i], y = b[i];
    switch (op) {
    case ADD: want[i] = x + y; break;
    case SUB: want[i] = x - y; break;
    case MUL: want[i] = x * y; break;
    case SCALE: want[i] = (double)alpha * x; break;
    default: want[i] = (double)alpha * x + y; break;
    }
    bound[i] = op == AXPY ? ULP * (fabs((double)alpha * x) + fabs(y)) : ULP * fabs(want[i]);
  }
}

/* Runs op on (a, b) into out; axpy updates b. */
static int run_op(rumus_ctx *ctx, int op, float alpha, const rumus_tensor *a, rumus_tensor *b,
                  rumus_tensor *out) {
  switch (op) {
  case ADD: return rumus_add(ctx, a, b, out);
  case SUB: return rumus_sub(ctx, a, b, out);
  case MUL: return rumus_mul(ctx, a, b, out);
  case SCALE: return rumus_scale(ctx, alpha, a, out);
  default: return rumus_axpy(ctx, alpha, a, b);
  }
}

START_TEST(binary_ops_sizes) {
  const size_t n = SIZES[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 11 + (uint64_t)_i);
  float *a = tu_malloc(n * sizeof *a), *b = tu_malloc(n * sizeof *b);
  double *want = tu_malloc(n * sizeof *want), *bound = tu_malloc(n * sizeof *bound);
  tu_fill_uniform(&r, a, n, -4, 4);
  tu_fill_uniform(&r, b, n, -4, 4);
  rumus_tensor *ta = tensor_1d(ctx, n, a), *tb = tensor_1d(ctx, n, NULL), *to = tensor_1d(ctx, n, NULL);
  const float alpha = -1.75f;
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int op = 0; op < NOPS; op++) {
      TU_OK(ctx, rumus_tensor_upload(tb, b, n * sizeof *b));
      TU_OK(ctx, rumus_tensor_fill(to, NAN));
      TU_OK(ctx, run_op(ctx, op, alpha, ta, tb, to));
      float *got = tu_download(ctx, op == AXPY ? tb : to);
      ref_op(op, alpha, a, b, n, want, bound);
      char name[96];
      snprintf(name, sizeof name, "%s_f32_%s_%zu", OP_NAMES[op], tu_variant_name(tu_variants[v]), n);
      tu_check_bound(name, got, want, bound, n);
      free(got);
    }
  }
  free(a);
  free(b);
  free(want);
  free(bound);
  tu_free_all(ctx, ta, tb, to, NULL);
}
END_TEST

/* ---- Activations -------------------------------------------------------- */

static int act_exact(int act) { return act <= RUMUS_ACT_LEAKY_RELU; }

/* The relative slack of the float math of the non-exact activations
 * before the result is stored: 2e-6 for F32; 2e-5 for 16-bit storage,
 * whose programs take the shorter erfc and exp of EW_SHORT_MATH
 * (cl/elementwise.cl: at most 9e-6 relative for |x| <= 5.5), still 25
 * times below half an F16 ulp. */
static double act_rtol(rumus_dtype d) { return d == RUMUS_F32 ? 2e-6 : 2e-5; }

/* Compares act's forward and backward on the device with the reference on
 * both variants, on tensors tx (holding x), tdy (holding dy) and ty of
 * type d (x and dy already rounded to d). */
static void check_act_on(rumus_ctx *ctx, rumus_dtype d, int act,
                         const rumus_tensor *tx, const rumus_tensor *tdy,
                         rumus_tensor *ty, const float *x, const float *dy,
                         size_t n, const char *what) {
  double *want = tu_malloc(n * sizeof *want), *bound = tu_malloc(n * sizeof *bound);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int bwd = 0; bwd < 2; bwd++) {
      TU_OK(ctx, rumus_tensor_fill(ty, 12345.0f));
      if (bwd)
        TU_OK(ctx, rumus_activation_bwd(ctx, (rumus_activation)act, SLOPE, tx, tdy, ty));
      else
        TU_OK(ctx, rumus_activation_fwd(ctx, (rumus_activation)act, SLOPE, tx, ty));
      float *got = tu_download_f32(ctx, ty);
      for (size_t i = 0; i < n; i++) {
        want[i] = bwd ? (double)dy[i] * ref_activation_grad(act, SLOPE, x[i])
                      : ref_activation(act, SLOPE, x[i]);
        /* relu' = 0 at x <= 0 even for an infinite dy (PyTorch). */
        if (bwd && act == RUMUS_ACT_RELU && x[i] <= 0) want[i] = 0.0;
        bound[i] = act_exact(act) ? ULP * fabs(want[i]) : 1e-6 + act_rtol(d) * fabs(want[i]);
      }
      store_bound(d, want, bound, n);
      char name[128];
      snprintf(name, sizeof name, "%s_%s_%s_%s_%s_%zu", ACT_NAMES[act],
               bwd ? "bwd" : "fwd", tu_dtype_name(d), what,
               tu_variant_name(tu_variants[v]), n);
      tu_check_bound(name, got, want, bound, n);
      free(got);
    }
  }
  free(want);
  free(bound);
}

/* check_act_on with new tensors of type d. */
static void check_act(rumus_ctx *ctx, rumus_dtype d, int act, const float *x,
                      const float *dy, size_t n, const char *what) {
  rumus_tensor *tx = typed_1d(ctx, d, n, x), *tdy = typed_1d(ctx, d, n, dy),
               *ty = typed_1d(ctx, d, n, NULL);
  check_act_on(ctx, d, act, tx, tdy, ty, x, dy, n, what);
  rumus_tensor_free(tx);
  rumus_tensor_free(tdy);
  rumus_tensor_free(ty);
}

static const size_t ACT_SIZES[] = {1, 7, 9, 1023, 4097, ((size_t)1 << 20) + 3};
#define NACT_SIZES (sizeof ACT_SIZES / sizeof ACT_SIZES[0])

/* Loop index: activation _i % NACT, every size. */
START_TEST(activation_random) {
  const int act = _i;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 100 + (uint64_t)act);
  for (size_t s = 0; s < NACT_SIZES; s++) {
    const size_t n = ACT_SIZES[s];
    float *x = tu_malloc(n * sizeof *x), *dy = tu_malloc(n * sizeof *dy);
    tu_fill_uniform(&r, x, n, -8, 8);
    tu_fill_uniform(&r, dy, n, -2, 2);
    check_act(ctx, RUMUS_F32, act, x, dy, n, "uniform");
    free(x);
    free(dy);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* 0, +-1e-8, +-3, +-20, +-1e4, +-inf, NaN and a few more, repeated at
 * shifting positions so that each lands in vector lanes and in the tail;
 * NaN in dy at some positions.  Every storage type, the inputs rounded to
 * it (for F16 1e20 and 3e38 become infinities, 1e-8 a subnormal, and
 * +-65504 is its largest value). */
START_TEST(activation_special_values) {
  static const float SPECIAL[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 3.0f, -3.0f, 20.0f, -20.0f,
                                  1e4f, -1e4f, INFINITY, -INFINITY, NAN, 0.75f, -0.75f,
                                  1e-30f, 88.0f, -88.0f, 1e20f, -1e20f, 6.0f, -6.0f,
                                  3e38f, -3e38f, 13.0f, -13.0f, 65504.0f,
                                  -65504.0f, 6e-8f, -1e-5f};
  enum { NS = sizeof SPECIAL / sizeof SPECIAL[0], N = 3 * NS + 5 };
  rumus_ctx *ctx = tu_ctx();
  for (int t = 0; t < 3; t++) {
    const rumus_dtype d = tu_dtypes[t];
    float x[N], dy[N];
    tu_rng r;
    tu_rng_seed(&r, 5);
    for (size_t i = 0; i < N; i++) {
      x[i] = SPECIAL[(i * 7) % NS];
      dy[i] = i % 11 == 5 ? NAN : i % 3 ? tu_uniform(&r, -2, 2) : 1.0f;
    }
    tu_round_to(d, x, N);
    tu_round_to(d, dy, N);
    for (int act = 0; act < NACT; act++)
      check_act(ctx, d, act, x, dy, N, "special");
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Small inputs keep their relative accuracy (tanh x ~ x, GELU ~ x / 2):
 * every forward within rtol 4e-6 with no absolute slack. */
START_TEST(activation_tiny_inputs) {
  static const float TINY[] = {1e-30f, -1e-30f, 1e-8f, -1e-8f, 3e-6f, -3e-6f, 1e-4f,
                               -1e-4f, 0.01f, -0.01f, 0.2f, -0.2f, 0.3f};
  enum { N = sizeof TINY / sizeof TINY[0] };
  double want[N];
  rumus_ctx *ctx = tu_ctx();
  rumus_tensor *tx = tensor_1d(ctx, N, TINY), *ty = tensor_1d(ctx, N, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int act = 0; act < NACT; act++) {
      TU_OK(ctx, rumus_activation_fwd(ctx, (rumus_activation)act, SLOPE, tx, ty));
      float *got = tu_download(ctx, ty);
      for (int i = 0; i < N; i++) want[i] = ref_activation(act, SLOPE, TINY[i]);
      tu_check_close(ACT_NAMES[act], got, want, N, 0.0, 4e-6);
      free(got);
    }
  }
  tu_free_all(ctx, tx, ty, NULL);
}
END_TEST

/* The device's backward against central differences of the double
 * reference forward, on a grid of float inputs (away from the ReLU kink). */
START_TEST(activation_bwd_finite_differences) {
  enum { N = 401 };
  const double h = 1e-4;
  float x[N], dy[N];
  double want[N];
  tu_rng r;
  tu_rng_seed(&r, 77);
  for (int i = 0; i < N; i++) {
    x[i] = (float)(-8.0 + 16.0 * i / (N - 1) + 0.0137); /* never within h of 0 */
    dy[i] = tu_uniform(&r, -2, 2);
  }
  rumus_ctx *ctx = tu_ctx();
  rumus_tensor *tx = tensor_1d(ctx, N, x), *tdy = tensor_1d(ctx, N, dy), *tdx = tensor_1d(ctx, N, NULL);
  for (int act = 0; act < NACT; act++) {
    for (int i = 0; i < N; i++) {
      double xp = (double)x[i] + h, xm = (double)x[i] - h;
      want[i] = dy[i] * (ref_activation(act, SLOPE, xp) - ref_activation(act, SLOPE, xm)) / (2 * h);
    }
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_activation_bwd(ctx, (rumus_activation)act, SLOPE, tx, tdy, tdx));
      float *got = tu_download(ctx, tdx);
      char name[96];
      snprintf(name, sizeof name, "%s_bwd_fd_%s", ACT_NAMES[act], tu_variant_name(tu_variants[v]));
      tu_check_close(name, got, want, N, 2e-6, 4e-6);
      free(got);
    }
  }
  tu_free_all(ctx, tx, tdy, tdx, NULL);
}
END_TEST

/* The device's backward against central differences of the device's own
 * float forward (fwd and bwd agree with each other), on both variants. */
START_TEST(activation_bwd_device_differences) {
  enum { N = 67 };
  const float h = 1.0f / 64;
  float x[N], xp[N], xm[N], ones[N];
  double want[N];
  for (int i = 0; i < N; i++) {
    /* off the grid of h: no kink inside */
    x[i] = -5.0f + 10.0f * (float)i / (N - 1) + 0.03f;
    xp[i] = x[i] + h;
    xm[i] = x[i] - h;
    ones[i] = 1.0f;
  }
  rumus_ctx *ctx = tu_ctx();
  rumus_tensor *tx = tensor_1d(ctx, N, x), *txp = tensor_1d(ctx, N, xp),
               *txm = tensor_1d(ctx, N, xm), *t1 = tensor_1d(ctx, N, ones),
               *typ = tensor_1d(ctx, N, NULL), *tym = tensor_1d(ctx, N, NULL),
               *tdx = tensor_1d(ctx, N, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int act = 0; act < NACT; act++) {
      rumus_activation a = (rumus_activation)act;
      TU_OK(ctx, rumus_activation_fwd(ctx, a, SLOPE, txp, typ));
      TU_OK(ctx, rumus_activation_fwd(ctx, a, SLOPE, txm, tym));
      TU_OK(ctx, rumus_activation_bwd(ctx, a, SLOPE, tx, t1, tdx));
      float *yp = tu_download(ctx, typ), *ym = tu_download(ctx, tym),
            *got = tu_download(ctx, tdx);
      for (int i = 0; i < N; i++)
        want[i] = ((double)yp[i] - ym[i]) / ((double)xp[i] - xm[i]);
      char name[64];
      snprintf(name, sizeof name, "%s_bwd_device_fd_%s", ACT_NAMES[act],
               tu_variant_name(tu_variants[v]));
      tu_check_close(name, got, want, N, 1e-3, 1e-2);
      free(yp);
      free(ym);
      free(got);
    }
  }
  tu_free_all(ctx, tx, txp, txm, t1, typ, tym, tdx, NULL);
}
END_TEST

/* ---- Bias --------------------------------------------------------------- */

/* [rows, F] as 2-D, or 3-D with the rows split in two (rows = 129 = 3 * 43,
 * 4096 = 16 * 256, 1 = 1 * 1). */
static int bias_shape(size_t rows, size_t F, int three_d, size_t *shape) {
  if (!three_d) {
    shape[0] = rows;
    shape[1] = F;
    return 2;
  }
  shape[0] = rows == 129 ? 3 : rows == 4096 ? 16 : 1;
  shape[1] = rows / shape[0];
  shape[2] = F;
  return 3;
}

static void ref_bias_add(const float *y, const float *b, size_t rows, size_t F, double *want,
                         double *bound) {
  for (size_t r = 0; r < rows; r++)
    for (size_t j = 0; j < F; j++) {
      want[r * F + j] = (double)y[r * F + j] + b[j];
      bound[r * F + j] = ULP * fabs(want[r * F + j]);
    }
}

/* Loop index over FEATS x ROWS. */
START_TEST(bias_add_shapes) {
  const size_t F = FEATS[_i % NFEATS], rows = ROWS[_i / NFEATS], n = rows * F;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 200 + (uint64_t)_i);
  float *y = tu_malloc(n * sizeof *y), *b = tu_malloc(F * sizeof *b);
  double *want = tu_malloc(n * sizeof *want), *bound = tu_malloc(n * sizeof *bound);
  tu_fill_uniform(&r, y, n, -3, 3);
  tu_fill_uniform(&r, b, F, -3, 3);
  ref_bias_add(y, b, rows, F, want, bound);
  rumus_tensor *tb = tensor_1d(ctx, F, b);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int three_d = 0; three_d < 2; three_d++) {
      size_t shape[3];
      int nd = bias_shape(rows, F, three_d, shape);
      rumus_tensor *ty = tu_tensor(ctx, RUMUS_F32, nd, shape, y);
      TU_OK(ctx, rumus_bias_add(ctx, ty, tb));
      float *got = tu_download(ctx, ty);
      char name[96];
      snprintf(name, sizeof name, "bias_add_%s_%dd_%zux%zu", tu_variant_name(tu_variants[v]),
               nd, rows, F);
      tu_check_bound(name, got, want, bound, n);
      free(got);
      rumus_tensor_free(ty);
    }
  }
  free(y);
  free(b);
  free(want);
  free(bound);
  tu_free_all(ctx, tb, NULL);
}
END_TEST

/* One feature over more rows than one launch covers: bias_add launches
 * at most 65535 work-groups along the rows, each of as many rows as the
 * local size (256 on the GPU variant, 16 on the CPU one), so 65535 x 256
 * + 77 rows (67 MB) and 65535 x 16 + 77 rows take two launches each. */
START_TEST(bias_add_many_rows) {
  static const size_t GROUP_ROWS[2] = {256, 16}; /* for tu_variants[0], [1] */
  const float b[1] = {0.375f};
  rumus_ctx *ctx = tu_ctx();
  rumus_tensor *tb = tensor_1d(ctx, 1, b);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    const size_t rows = 65535 * GROUP_ROWS[v] + 77;
    tu_rng r;
    tu_rng_seed(&r, 250 + (uint64_t)v);
    float *y = tu_malloc(rows * sizeof *y);
    double *want = tu_malloc(rows * sizeof *want);
    tu_fill_uniform(&r, y, rows, -3, 3);
    for (size_t i = 0; i < rows; i++) want[i] = (double)y[i] + b[0];
    char name[64];
    snprintf(name, sizeof name, "bias_add_many_rows_%s_%zux1",
             tu_variant_name(tu_variants[v]), rows);
    const size_t shape[2] = {rows, 1};
    rumus_tensor *ty = tu_tensor_or_skip(ctx, RUMUS_F32, 2, shape, y, name);
    if (ty) {
      TU_OK(ctx, rumus_bias_add(ctx, ty, tb));
      float *got = tu_download(ctx, ty);
      tu_check_close(name, got, want, rows, 0.0, ULP); /* 1 ulp */
      free(got);
      rumus_tensor_free(ty);
    }
    free(y);
    free(want);
  }
  tu_free_all(ctx, tb, NULL);
}
END_TEST

/* Checks dbias (stored in db_type) against the reference with the
 * tolerance of the header. */
static void check_bias_grad_t(const char *what, const float *got,
                              const float *dy, size_t rows, size_t F,
                              rumus_dtype db_type) {
  double *want = tu_malloc(F * sizeof *want), *bound = tu_malloc(F * sizeof *bound);
  ref_bias_grad(dy, rows, F, want);
  for (size_t j = 0; j < F; j++) bound[j] = 0.0;
  for (size_t i = 0; i < rows * F; i++) bound[i % F] += fabs((double)dy[i]);
  for (size_t j = 0; j < F; j++) bound[j] *= 1e-5;
  store_bound(db_type, want, bound, F);
  tu_check_bound(what, got, want, bound, F);
  free(want);
  free(bound);
}

static void check_bias_grad(const char *what, const float *got,
                            const float *dy, size_t rows, size_t F) {
  check_bias_grad_t(what, got, dy, rows, F, RUMUS_F32);
}

/* Runs bias_grad on both variants, twice each (bitwise equal results). */
static void run_bias_grad(rumus_ctx *ctx, const float *dy, size_t rows, size_t F, int nd,
                          const size_t *shape) {
  rumus_tensor *tdy = tu_tensor(ctx, RUMUS_F32, nd, shape, dy), *tdb = tensor_1d(ctx, F, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_tensor_fill(tdb, NAN));
    TU_OK(ctx, rumus_bias_grad(ctx, tdy, tdb));
    float *got = tu_download(ctx, tdb);
    char name[96];
    snprintf(name, sizeof name, "bias_grad_%s_%dd_%zux%zu", tu_variant_name(tu_variants[v]), nd,
             rows, F);
    check_bias_grad(name, got, dy, rows, F);
    TU_OK(ctx, rumus_tensor_fill(tdb, 0.0f));
    TU_OK(ctx, rumus_bias_grad(ctx, tdy, tdb));
    float *again = tu_download(ctx, tdb);
    ck_assert_msg(memcmp(got, again, F * sizeof *got) == 0, "%s: not deterministic", name);
    free(got);
    free(again);
  }
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdb);
}

/* Loop index over FEATS x ROWS, 2-D and 3-D. */
START_TEST(bias_grad_shapes) {
  const size_t F = FEATS[_i % NFEATS], rows = ROWS[_i / NFEATS], n = rows * F;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 300 + (uint64_t)_i);
  float *dy = tu_malloc(n * sizeof *dy);
  tu_fill_uniform(&r, dy, n, -1, 1);
  for (int three_d = 0; three_d < 2; three_d++) {
    size_t shape[3];
    int nd = bias_shape(rows, F, three_d, shape);
    run_bias_grad(ctx, dy, rows, F, nd, shape);
  }
  free(dy);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Many rows (more row chunks than the cap, partial column blocks) and wide
 * rows (several column tiles and blocks, a partial last one). */
START_TEST(bias_grad_large) {
  /* 600 x 8195: the CPU variant's widest blocks (4096 columns) and a
   * block of 3; 33 x 4099: narrower blocks, as one chunk gives too few
   * work-items. */
  static const size_t CASES[][2] = {
      {600001, 3}, {20000, 75}, {33, 4099}, {600, 8195}};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 400);
  for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
    const size_t rows = CASES[c][0], F = CASES[c][1];
    float *dy = tu_malloc(rows * F * sizeof *dy);
    tu_fill_uniform(&r, dy, rows * F, -1, 1);
    size_t shape[2] = {rows, F};
    run_bias_grad(ctx, dy, rows, F, 2, shape);
    free(dy);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* L(b) = sum_{r,j} w[r,j] bias_add(y, b)[r,j] through the device's own
 * bias_add; one b_j at a time moves by -h and +h, and L (summed in double
 * on the host) gives the central difference, against bias_grad(w)[j]: the
 * device's backward agrees with its forward.  L is linear in b, so the
 * difference carries only the rounding of y + b to float, at most
 * 2^-24 |y + b_j +- h| per element and side, which the bound adds to the
 * header's 1e-5 * sum_r |w[r, j]|.  The step is the float difference of
 * the two perturbed values.  1100 x 19 (several row chunks on both
 * variants) and 4 x 9 x 8 (3-D, the GPU variant's aligned path). */
START_TEST(bias_grad_finite_differences) {
  static const size_t SHAPES[2][3] = {{1100, 19, 0}, {4, 9, 8}};
  const float h = 0.5f;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 450);
  for (int k = 0; k < 2; k++) {
    const int nd = SHAPES[k][2] ? 3 : 2;
    const size_t F = SHAPES[k][nd - 1],
                 n = SHAPES[k][0] * SHAPES[k][1] * (nd == 3 ? F : 1);
    const size_t rows = n / F;
    float *w = tu_malloc(n * sizeof *w), *y = tu_malloc(n * sizeof *y),
          *b = tu_malloc(F * sizeof *b);
    double *numeric = tu_malloc(F * sizeof *numeric),
           *bound = tu_malloc(F * sizeof *bound);
    tu_fill_uniform(&r, w, n, -1, 1);
    tu_fill_uniform(&r, y, n, -2, 2);
    tu_fill_uniform(&r, b, F, -2, 2);
    rumus_tensor *tw = tu_tensor(ctx, RUMUS_F32, nd, SHAPES[k], w),
                 *ty = tu_tensor(ctx, RUMUS_F32, nd, SHAPES[k], NULL),
                 *tb = tensor_1d(ctx, F, NULL), *tdb = tensor_1d(ctx, F, NULL);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_bias_grad(ctx, tw, tdb));
      float *got = tu_download(ctx, tdb);
      for (size_t j = 0; j < F; j++) {
        double l[2];
        float bj[2];
        for (int s = 0; s < 2; s++) {
          const float saved = b[j];
          bj[s] = b[j] = s ? b[j] - h : b[j] + h;
          TU_OK(ctx, rumus_tensor_upload(tb, b, F * sizeof *b));
          b[j] = saved;
          TU_OK(ctx, rumus_tensor_upload(ty, y, n * sizeof *y));
          TU_OK(ctx, rumus_bias_add(ctx, ty, tb));
          float *out = tu_download(ctx, ty);
          l[s] = 0.0;
          for (size_t i = 0; i < n; i++) l[s] += (double)w[i] * out[i];
          free(out);
        }
        const double step = (double)bj[0] - bj[1];
        numeric[j] = (l[0] - l[1]) / step;
        double sum_w = 0.0, rounding = 0.0;
        for (size_t i = 0; i < rows; i++) {
          const double wi = fabs((double)w[i * F + j]), yi = y[i * F + j];
          sum_w += wi;
          rounding += wi * 0x1p-24 * (fabs(yi + bj[0]) + fabs(yi + bj[1]));
        }
        bound[j] = 1e-5 * sum_w + rounding / step;
      }
      char name[64];
      snprintf(name, sizeof name, "bias_grad_fd_%s_%zux%zu",
               tu_variant_name(tu_variants[v]), rows, F);
      tu_check_bound(name, got, numeric, bound, F);
      free(got);
    }
    free(w);
    free(y);
    free(b);
    free(numeric);
    free(bound);
    rumus_tensor_free(tw);
    rumus_tensor_free(ty);
    rumus_tensor_free(tb);
    rumus_tensor_free(tdb);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- F16 and BF16 storage ------------------------------------------------ */

/* A tensor of type d that starts `off` elements past GUARD_LEAD bytes of a
 * buffer and is followed by GUARD_LEAD more, every byte outside it set to
 * GUARD_BYTE: an odd off puts it off the 4-element alignment (the GPU
 * variant's unaligned programs), and the guards catch stray writes. */
#define GUARD_LEAD 4096
#define GUARD_BYTE 0x5B
typedef struct {
  rumus_tensor *t;
  cl_mem buf;
  size_t lead, bytes; /* bytes before the tensor, and its own */
} guarded_at;

static guarded_at guarded_at_make(rumus_ctx *ctx, rumus_dtype d, int ndim,
                                  const size_t *shape, const float *data,
                                  size_t off) {
  guarded_at g;
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  g.lead = GUARD_LEAD + off * rumus_dtype_size(d);
  g.bytes = n * rumus_dtype_size(d);
  const size_t total = g.lead + g.bytes + GUARD_LEAD;
  unsigned char *host = tu_malloc(total);
  memset(host, GUARD_BYTE, total);
  cl_int e;
  g.buf = clCreateBuffer(rumus_ctx_cl_context(ctx),
                         CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, total, host,
                         &e);
  free(host);
  ck_assert_int_eq(e, CL_SUCCESS);
  TU_OK(ctx, rumus_tensor_wrap(ctx, d, ndim, shape, g.buf, g.lead, &g.t));
  if (data) TU_OK(ctx, rumus_tensor_upload_f32(g.t, data, n));
  return g;
}

/* Asserts that every byte outside the tensor is intact, then frees it. */
static void guarded_at_check_free(rumus_ctx *ctx, guarded_at *g) {
  const size_t total = g->lead + g->bytes + GUARD_LEAD;
  unsigned char *host = tu_malloc(total);
  cl_int e = clEnqueueReadBuffer(rumus_ctx_cl_queue(ctx), g->buf, CL_TRUE, 0,
                                 total, host, 0, NULL, NULL);
  ck_assert_int_eq(e, CL_SUCCESS);
  for (size_t i = 0; i < total; i++)
    if ((i < g->lead || i >= g->lead + g->bytes) && host[i] != GUARD_BYTE)
      ck_abort_msg("byte %zu of a guarded buffer (tensor at %zu to %zu) "
                   "was overwritten", i, g->lead, g->lead + g->bytes);
  free(host);
  rumus_tensor_free(g->t);
  clReleaseMemObject(g->buf);
}

/* Every arithmetic op on a and b (rounded to d) in tensors ta (holding
 * a), tb and to of type d, on both variants, against the reference with
 * the header's bounds. */
static void check_ops_on(rumus_ctx *ctx, rumus_dtype d,
                         const rumus_tensor *ta, rumus_tensor *tb,
                         rumus_tensor *to, const float *a, const float *b,
                         size_t n, const char *what) {
  double *want = tu_malloc(n * sizeof *want);
  double *bound = tu_malloc(n * sizeof *bound);
  const float alpha = -1.75f;
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int op = 0; op < NOPS; op++) {
      TU_OK(ctx, rumus_tensor_upload_f32(tb, b, n));
      TU_OK(ctx, rumus_tensor_fill(to, NAN));
      TU_OK(ctx, run_op(ctx, op, alpha, ta, tb, to));
      float *got = tu_download_f32(ctx, op == AXPY ? tb : to);
      ref_op(op, alpha, a, b, n, want, bound);
      store_bound(d, want, bound, n);
      char name[96];
      snprintf(name, sizeof name, "%s_%s_%s_%s_%zu", OP_NAMES[op],
               tu_dtype_name(d), what, tu_variant_name(tu_variants[v]), n);
      tu_check_bound(name, got, want, bound, n);
      free(got);
    }
  }
  free(want);
  free(bound);
}

/* check_ops_on with new tensors of type d. */
static void check_ops(rumus_ctx *ctx, rumus_dtype d, const float *a,
                      const float *b, size_t n, const char *what) {
  rumus_tensor *ta = typed_1d(ctx, d, n, a), *tb = typed_1d(ctx, d, n, NULL),
               *to = typed_1d(ctx, d, n, NULL);
  check_ops_on(ctx, d, ta, tb, to, a, b, n, what);
  rumus_tensor_free(ta);
  rumus_tensor_free(tb);
  rumus_tensor_free(to);
}

/* Loop index: the 16-bit type, tu_dtypes[1 + _i].  Every arithmetic op and
 * activation, forward and backward, on sizes that take lone elements (1),
 * vector tails of both variants (9, 1023) and many whole spans (33339),
 * from inputs rounded to the type; both variants. */
START_TEST(typed_flat_ops) {
  static const size_t NS[] = {1, 9, 1023, 33339};
  const rumus_dtype d = tu_dtypes[1 + _i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 800 + (uint64_t)_i);
  for (size_t s = 0; s < sizeof NS / sizeof NS[0]; s++) {
    const size_t n = NS[s];
    float *a = rand_typed(&r, d, n, -4, 4), *b = rand_typed(&r, d, n, -4, 4);
    check_ops(ctx, d, a, b, n, "uniform");
    float *x = rand_typed(&r, d, n, -8, 8), *dy = rand_typed(&r, d, n, -2, 2);
    for (int act = 0; act < NACT; act++)
      check_act(ctx, d, act, x, dy, n, "uniform");
    free(a);
    free(b);
    free(x);
    free(dy);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* bias_add of b to y (rows x F, type d) on the current variant. */
static void check_bias_add_typed(rumus_ctx *ctx, rumus_dtype d,
                                 rumus_tensor *ty, const rumus_tensor *tb,
                                 const float *y, const float *b, size_t rows,
                                 size_t F, const char *name) {
  const size_t n = rows * F;
  double *want = tu_malloc(n * sizeof *want);
  double *bound = tu_malloc(n * sizeof *bound);
  TU_OK(ctx, rumus_tensor_upload_f32(ty, y, n));
  TU_OK(ctx, rumus_bias_add(ctx, ty, tb));
  float *got = tu_download_f32(ctx, ty);
  ref_bias_add(y, b, rows, F, want, bound);
  store_bound(d, want, bound, n);
  tu_check_bound(name, got, want, bound, n);
  free(got);
  free(want);
  free(bound);
}

/* bias_grad of dy into tdb on the current variant, twice (the same bits). */
static void check_bias_grad_typed(rumus_ctx *ctx, const rumus_tensor *tdy,
                                  rumus_tensor *tdb, const float *dy,
                                  size_t rows, size_t F, const char *name) {
  TU_OK(ctx, rumus_tensor_fill(tdb, NAN));
  TU_OK(ctx, rumus_bias_grad(ctx, tdy, tdb));
  float *got = tu_download_f32(ctx, tdb);
  check_bias_grad_t(name, got, dy, rows, F, rumus_tensor_dtype(tdb));
  TU_OK(ctx, rumus_tensor_fill(tdb, 0.0f));
  TU_OK(ctx, rumus_bias_grad(ctx, tdy, tdb));
  float *again = tu_download_f32(ctx, tdb);
  ck_assert_msg(memcmp(got, again, F * sizeof *got) == 0,
                "%s: not deterministic", name);
  free(got);
  free(again);
}

/* check_bias_add_typed, then check_bias_grad_typed into a dbias of dy's
 * type and (with f32_too) of F32, on rows x F of type d, both variants. */
static void check_bias_once(rumus_ctx *ctx, tu_rng *r, rumus_dtype d,
                            size_t rows, size_t F, const char *what,
                            int f32_too) {
  const size_t n = rows * F, shape[2] = {rows, F};
  float *y = rand_typed(r, d, n, -3, 3), *b = rand_typed(r, d, F, -3, 3);
  float *dy = rand_typed(r, d, n, -1, 1);
  rumus_tensor *ty = tu_tensor_typed(ctx, d, 2, shape, NULL),
               *tb = typed_1d(ctx, d, F, b),
               *tdy = tu_tensor_typed(ctx, d, 2, shape, dy),
               *tdb[2] = {typed_1d(ctx, d, F, NULL),
                          typed_1d(ctx, RUMUS_F32, F, NULL)};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    const char *vn = tu_variant_name(tu_variants[v]), *dn = tu_dtype_name(d);
    char name[96];
    snprintf(name, sizeof name, "bias_add_%s_%s_%s_%zux%zu", dn, what, vn,
             rows, F);
    check_bias_add_typed(ctx, d, ty, tb, y, b, rows, F, name);
    for (int f32 = 0; f32 <= f32_too; f32++) {
      snprintf(name, sizeof name, "bias_grad_%s_to_%s_%s_%s_%zux%zu", dn,
               f32 ? "f32" : dn, what, vn, rows, F);
      check_bias_grad_typed(ctx, tdy, tdb[f32], dy, rows, F, name);
    }
  }
  free(y);
  free(b);
  free(dy);
  rumus_tensor_free(ty);
  rumus_tensor_free(tb);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdb[0]);
  rumus_tensor_free(tdb[1]);
}

/* Loop index: the 16-bit type.  bias_add, and bias_grad into a dbias of
 * dy's type and of F32, on rows of 1, 7 and 64 features (64: the GPU
 * variant's aligned float4 path) over 1, 129 and 1100 rows (1100: several
 * row chunks on both variants, folded from float partials); both
 * variants. */
START_TEST(typed_bias) {
  static const size_t TF[] = {1, 7, 64}, TR[] = {1, 129, 1100};
  const rumus_dtype d = tu_dtypes[1 + _i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 850 + (uint64_t)_i);
  for (size_t k = 0; k < 9; k++)
    check_bias_once(ctx, &r, d, TR[k / 3], TF[k % 3], "uniform", 1);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Casts -------------------------------------------------------------- */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The host's conversion of one element (its bits) from type s to type d:
 * through float, as rumus.h defines every cast. */
static uint32_t host_cast(rumus_dtype s, rumus_dtype d, uint32_t in) {
  float f;
  if (s == d) return in;
  switch (s) {
  case RUMUS_F16: f = rumus_f16_to_f32((uint16_t)in); break;
  case RUMUS_BF16: f = rumus_bf16_to_f32((uint16_t)in); break;
  case RUMUS_I32: f = (float)(int32_t)in; break;
  default: f = bits_f32(in); break;
  }
  if (d == RUMUS_F16) return rumus_f32_to_f16(f);
  if (d == RUMUS_BF16) return rumus_f32_to_bf16(f);
  return f32_bits(f);
}

/* n elements of type d: their bits in 32-bit words, to and from the bytes
 * a tensor stores (malloc'ed). */
static void *pack_bits(rumus_dtype d, const uint32_t *w, size_t n) {
  if (rumus_dtype_size(d) == 4) {
    uint32_t *out = tu_malloc(n * 4);
    memcpy(out, w, n * 4);
    return out;
  }
  uint16_t *out = tu_malloc(n * 2);
  for (size_t i = 0; i < n; i++) out[i] = (uint16_t)w[i];
  return out;
}

static uint32_t *unpack_bits(rumus_dtype d, const void *bytes, size_t n) {
  uint32_t *out = tu_malloc(n * 4);
  if (rumus_dtype_size(d) == 4) {
    memcpy(out, bytes, n * 4);
  } else {
    const uint16_t *h = bytes;
    for (size_t i = 0; i < n; i++) out[i] = h[i];
  }
  return out;
}

/* Uploads the bits `in` into ts (type s), casts it into td (type d) and
 * compares td's bits with host_cast, on the current variant. */
static void check_cast_on(rumus_ctx *ctx, rumus_tensor *ts, rumus_tensor *td,
                          const uint32_t *in, size_t n, const char *what) {
  const rumus_dtype s = rumus_tensor_dtype(ts), d = rumus_tensor_dtype(td);
  void *bytes = pack_bits(s, in, n);
  TU_OK(ctx, rumus_tensor_upload(ts, bytes, n * rumus_dtype_size(s)));
  free(bytes);
  TU_OK(ctx, rumus_tensor_fill(td, d == RUMUS_I32 ? -7.0f : NAN));
  TU_OK(ctx, rumus_cast(ctx, ts, td));
  bytes = tu_malloc(n * rumus_dtype_size(d));
  TU_OK(ctx, rumus_tensor_download(td, bytes, n * rumus_dtype_size(d)));
  uint32_t *got = unpack_bits(d, bytes, n);
  free(bytes);
  for (size_t i = 0; i < n; i++) {
    const uint32_t want = host_cast(s, d, in[i]);
    if (got[i] != want)
      ck_abort_msg("%s[%zu]: %s 0x%08x -> %s 0x%08x, want 0x%08x", what, i,
                   rumus_dtype_name(s), in[i], rumus_dtype_name(d), got[i], want);
  }
  free(got);
}

/* check_cast_on with new 1-D tensors, on both variants. */
static void check_cast(rumus_ctx *ctx, rumus_dtype s, rumus_dtype d,
                       const uint32_t *in, size_t n, const char *what) {
  rumus_tensor *ts = tu_tensor(ctx, s, 1, &n, NULL);
  rumus_tensor *td = tu_tensor(ctx, d, 1, &n, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    char name[96];
    snprintf(name, sizeof name, "cast_%s_%s_%s", what,
             tu_dtype_name(d), tu_variant_name(tu_variants[v]));
    check_cast_on(ctx, ts, td, in, n, name);
  }
  rumus_tensor_free(ts);
  rumus_tensor_free(td);
}

/* Every 16-bit pattern, then 5 more (65541: a tail on both variants). */
static uint32_t *all_16bit(size_t *n) {
  *n = 65536 + 5;
  uint32_t *w = tu_malloc(*n * sizeof *w);
  for (size_t i = 0; i < *n; i++) w[i] = (uint32_t)(i & 0xFFFF);
  return w;
}

/* F16 and BF16 to every other floating type, over every 16-bit pattern
 * (NaN payloads, signalling NaNs, subnormals, infinities, signed zeros). */
static void cast_16bit_patterns(rumus_ctx *ctx) {
  size_t n;
  uint32_t *w = all_16bit(&n);
  check_cast(ctx, RUMUS_F16, RUMUS_F32, w, n, "f16");
  check_cast(ctx, RUMUS_F16, RUMUS_BF16, w, n, "f16");
  check_cast(ctx, RUMUS_BF16, RUMUS_F32, w, n, "bf16");
  check_cast(ctx, RUMUS_BF16, RUMUS_F16, w, n, "bf16");
  free(w);
}

/* Appends w to a growing list. */
typedef struct {
  uint32_t *w;
  size_t n, cap;
} word_list;

static void push(word_list *l, uint32_t w) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 4096;
    uint32_t *grown = realloc(l->w, l->cap * sizeof *grown);
    ck_assert_ptr_nonnull(grown);
    l->w = grown;
  }
  l->w[l->n++] = w;
}

/* Ties between neighbouring finite values of F16 (for every positive
 * half h: the float halfway to the next, exact in float) and of BF16, each
 * with its neighbours one float ulp below and above, every other one
 * negated. */
static void push_ties(word_list *l) {
  for (uint32_t h = 0; h < 0x7C00u; h++) {
    const uint32_t m = h & 0x3FFu;
    const uint32_t h32 = f32_bits(rumus_f16_to_f32((uint16_t)h));
    const uint32_t tie = h < 0x400u /* subnormal: (m + 1/2) 2^-24 */
                             ? f32_bits(((float)m + 0.5f) * 0x1p-24f)
                             : h32 + 0x1000u;
    for (uint32_t k = 0; k < 3; k++)
      push(l, (tie + k - 1) | (h & 1u) << 31);
  }
  for (uint32_t b = 0; b < 0x7F80u; b++)
    for (uint32_t k = 0; k < 3; k++)
      push(l, ((b << 16 | 0x8000u) + k - 1) | (b & 1u) << 31);
}

/* Float patterns for F32 -> F16 / BF16: every F16 and BF16 value widened,
 * the ties, F16's overflow threshold (65520 = 0x477FF000) and BF16's (half
 * an ulp past its largest value), float subnormals, NaNs, and random
 * patterns. */
static uint32_t *float_cases(tu_rng *r, size_t *n) {
  static const uint32_t EDGES[] = {
      0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x47800000u,
      0x47C35000u, 0x7F7FFFFFu, 0x7F7F7FFFu, 0x7F7F8000u, 0x7F7EFFFFu,
      0x7F800000u, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x33C00000u,
      0x387FC000u, 0x387FE000u, 0x387FF000u, 0x38800000u, 0x00000001u,
      0x007FFFFFu, 0x00400000u, 0x00008000u, 0x00018000u, 0x7F800001u,
      0x7FC00000u, 0x7FFFFFFFu, 0x7FA00000u, 0x7F802000u, 0x7FBFFFFFu,
      0x00000000u};
  word_list l = {0};
  for (uint32_t h = 0; h < 0x10000u; h++) {
    push(&l, f32_bits(rumus_f16_to_f32((uint16_t)h)));
    push(&l, h << 16);
  }
  push_ties(&l);
  for (size_t i = 0; i < sizeof EDGES / sizeof EDGES[0]; i++) {
    push(&l, EDGES[i]);
    push(&l, EDGES[i] | 0x80000000u);
  }
  for (int i = 0; i < 65536; i++) push(&l, tu_rand_u32(r));
  for (int i = 0; i < 4096; i++) push(&l, tu_rand_u32(r) & 0x807FFFFFu);
  push(&l, 0x3F800000u); /* one more: an odd count */
  *n = l.n;
  return l.w;
}

/* F32 -> F16 and F32 -> BF16 over float_cases. */
static void cast_float_cases(rumus_ctx *ctx) {
  tu_rng r;
  tu_rng_seed(&r, 950);
  size_t n;
  uint32_t *w = float_cases(&r, &n);
  check_cast(ctx, RUMUS_F32, RUMUS_F16, w, n, "f32");
  check_cast(ctx, RUMUS_F32, RUMUS_BF16, w, n, "f32");
  free(w);
}

/* I32 -> F32, F16 and BF16: the extremes, integers around 2^24 (where
 * float starts to round) and F16's limits, a BF16 double rounding
 * (2^24 + 2^16 + 1: to float 2^24 + 2^16, a BF16 tie, then to 2^24,
 * where the integer itself would round up), random integers of every
 * size and small ones. */
static void cast_i32(rumus_ctx *ctx) {
  static const int32_t EDGES[] = {0, 1, -1, 2147483647, -2147483647 - 1,
                                  16777216, 16777217, 16777218, 16777219,
                                  -16777217, 16842753, 65504, 65519, 65520,
                                  65535, -65520, -65519, 2147483520,
                                  2147483583, 2147483584, 33554435};
  word_list l = {0};
  tu_rng r;
  tu_rng_seed(&r, 960);
  for (size_t i = 0; i < sizeof EDGES / sizeof EDGES[0]; i++)
    push(&l, (uint32_t)EDGES[i]);
  for (int i = 0; i < 32768; i++) push(&l, tu_rand_u32(&r));
  for (int i = 0; i < 32768; i++)
    push(&l, (uint32_t)((int32_t)(tu_rand_u32(&r) % 140001u) - 70000));
  check_cast(ctx, RUMUS_I32, RUMUS_F32, l.w, l.n, "i32");
  check_cast(ctx, RUMUS_I32, RUMUS_F16, l.w, l.n, "i32");
  check_cast(ctx, RUMUS_I32, RUMUS_BF16, l.w, l.n, "i32");
  free(l.w);
}

/* Every cast between different types over the three sets above, on both
 * variants, bit for bit (one test: one context, one build of the cast
 * program per variant). */
START_TEST(cast_bits) {
  rumus_ctx *ctx = tu_ctx();
  cast_16bit_patterns(ctx);
  cast_float_cases(ctx);
  cast_i32(ctx);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Loop index: the CPU variant's vector width (RUMUS_EW_VW = 8, 16; the
 * default is the device's native width, so each machine runs one of
 * them in the other tests).  Every op, activation and cast of the
 * family's two programs, every storage type, on sizes with tails (9,
 * 1023) and many spans (33339), and bias add / grad with rows of 7 and
 * of 64. */
START_TEST(cpu_vector_widths) {
  static const size_t NS[] = {9, 1023, 33339};
  const char *const vw = _i ? "16" : "8";
  setenv("RUMUS_EW_VW", vw, 1);
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 870 + (uint64_t)_i);
  char what[16];
  snprintf(what, sizeof what, "vw%s", vw);
  for (int k = 0; k < 3; k++) {
    const rumus_dtype d = tu_dtypes[k];
    for (size_t s = 0; s < sizeof NS / sizeof NS[0]; s++) {
      const size_t n = NS[s];
      float *a = rand_typed(&r, d, n, -4, 4), *b = rand_typed(&r, d, n, -4, 4);
      check_ops(ctx, d, a, b, n, what);
      float *x = rand_typed(&r, d, n, -8, 8), *dy = rand_typed(&r, d, n, -2, 2);
      for (int act = 0; act < NACT; act++) check_act(ctx, d, act, x, dy, n, what);
      free(a);
      free(b);
      free(x);
      free(dy);
    }
    check_bias_once(ctx, &r, d, 129, 7, what, 0);
    check_bias_once(ctx, &r, d, 1100, 64, what, 0);
  }
  cast_16bit_patterns(ctx);
  cast_float_cases(ctx);
  cast_i32(ctx);
  tu_free_all(ctx, NULL);
  unsetenv("RUMUS_EW_VW");
}
END_TEST

/* Every pair of types (the same type too: a copy) between guarded tensors
 * at odd offsets (the unaligned programs) and of other shapes, 37 elements
 * of a mix of values, on both variants; a copy onto itself leaves the
 * tensor as it was, and an empty cast writes nothing. */
START_TEST(cast_offsets_guards) {
  static const rumus_dtype T[4] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16,
                                   RUMUS_I32};
  enum { N = 37 };
  const size_t s1[1] = {N}, s2[2] = {1, N};
  uint32_t w[4][N];
  tu_rng r;
  tu_rng_seed(&r, 970);
  for (size_t i = 0; i < N; i++) {
    const float f = i % 5 == 0 ? NAN : tu_uniform(&r, -70000, 70000);
    w[0][i] = i % 3 ? f32_bits(f) : tu_rand_u32(&r);
    w[1][i] = rumus_f32_to_f16(f);
    w[2][i] = rumus_f32_to_bf16(f);
    w[3][i] = i % 3 ? (uint32_t)(int32_t)tu_uniform(&r, -1e9f, 1e9f)
                    : tu_rand_u32(&r);
  }
  rumus_ctx *ctx = tu_ctx();
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int si = 0; si < 4; si++)
      for (int di = 0; di < 4; di++) {
        if (di == 3 && si != 3) continue; /* nothing casts to I32 */
        guarded_at gs = guarded_at_make(ctx, T[si], 1, s1, NULL, 3);
        guarded_at gd = guarded_at_make(ctx, T[di], 2, s2, NULL, 1);
        char name[64];
        snprintf(name, sizeof name, "cast_offset_%s_%s",
                 rumus_dtype_name(T[si]), tu_variant_name(tu_variants[v]));
        check_cast_on(ctx, gs.t, gd.t, w[si], N, name);
        guarded_at_check_free(ctx, &gs);
        guarded_at_check_free(ctx, &gd);
      }
  }
  /* A copy onto itself; an empty cast. */
  rumus_tensor *t = tu_tensor(ctx, RUMUS_F16, 1, s1, NULL);
  TU_OK(ctx, rumus_tensor_fill(t, 3.0f));
  TU_OK(ctx, rumus_cast(ctx, t, t));
  float *got = tu_download_f32(ctx, t);
  for (size_t i = 0; i < N; i++) ck_assert_float_eq(got[i], 3.0f);
  free(got);
  const size_t s0[1] = {0};
  guarded_at e16 = guarded_at_make(ctx, RUMUS_F16, 1, s0, NULL, 1),
             e32 = guarded_at_make(ctx, RUMUS_F32, 1, s0, NULL, 1);
  TU_OK(ctx, rumus_cast(ctx, e32.t, e16.t));
  TU_OK(ctx, rumus_cast(ctx, e16.t, e32.t));
  guarded_at_check_free(ctx, &e16);
  guarded_at_check_free(ctx, &e32);
  tu_free_all(ctx, t, NULL);
}
END_TEST

/* ---- Limits: in place, offsets, guards, empty tensors ------------------- */

/* out aliases an input for every op (and axpy with x == y), for every
 * storage type. */
START_TEST(in_place) {
  enum { N = 1031 };
  float a0[N], b0[N], dy0[N];
  double want[N], bound[N];
  tu_rng r;
  tu_rng_seed(&r, 500);
  tu_fill_uniform(&r, a0, N, -4, 4);
  tu_fill_uniform(&r, b0, N, -4, 4);
  tu_fill_uniform(&r, dy0, N, -1, 1);
  rumus_ctx *ctx = tu_ctx();
  for (int t = 0; t < 3; t++) {
    const rumus_dtype d = tu_dtypes[t];
    float a[N], b[N], dy[N];
    memcpy(a, a0, sizeof a);
    memcpy(b, b0, sizeof b);
    memcpy(dy, dy0, sizeof dy);
    tu_round_to(d, a, N);
    tu_round_to(d, b, N);
    tu_round_to(d, dy, N);
    rumus_tensor *ta = typed_1d(ctx, d, N, NULL);
    rumus_tensor *tb = typed_1d(ctx, d, N, NULL);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      for (int op = 0; op < NOPS; op++)
        for (int which = 0; which < 2; which++) { /* out = a, out = b */
          if ((op == SCALE || op == AXPY) && which == 1) continue;
          TU_OK(ctx, rumus_tensor_upload_f32(ta, a, N));
          TU_OK(ctx, rumus_tensor_upload_f32(tb, b, N));
          rumus_tensor *out = which ? tb : ta;
          if (op == AXPY) /* y = alpha y + y */
            TU_OK(ctx, rumus_axpy(ctx, 0.5f, tb, tb));
          else
            TU_OK(ctx, run_op(ctx, op, 0.5f, ta, tb, out));
          float *got = tu_download_f32(ctx, op == AXPY ? tb : out);
          ref_op(op, 0.5f, op == AXPY ? b : a, b, N, want, bound);
          store_bound(d, want, bound, N);
          char name[64];
          snprintf(name, sizeof name, "%s_%s_in_place_%d", OP_NAMES[op],
                   tu_dtype_name(d), which);
          tu_check_bound(name, got, want, bound, N);
          free(got);
        }
      for (int act = 0; act < NACT; act++) {
        /* y = act(x) into x, then dx = dy * act'(x) into dy. */
        TU_OK(ctx, rumus_tensor_upload_f32(ta, a, N));
        TU_OK(ctx, rumus_tensor_upload_f32(tb, dy, N));
        const rumus_activation A = (rumus_activation)act;
        TU_OK(ctx, rumus_activation_bwd(ctx, A, SLOPE, ta, tb, tb));
        TU_OK(ctx, rumus_activation_fwd(ctx, A, SLOPE, ta, ta));
        float *y = tu_download_f32(ctx, ta), *dx = tu_download_f32(ctx, tb);
        double wy[N], wdx[N];
        for (int i = 0; i < N; i++) {
          wy[i] = ref_activation(act, SLOPE, a[i]);
          wdx[i] = dy[i] * ref_activation_grad(act, SLOPE, a[i]);
        }
        const double atol = 1e-6 + tu_store_atol(d);
        const double rtol = act_rtol(d) + tu_store_rtol(d);
        tu_check_close(ACT_NAMES[act], y, wy, N, atol, rtol);
        tu_check_close(ACT_NAMES[act], dx, wdx, N, atol, rtol);
        free(y);
        free(dx);
      }
    }
    rumus_tensor_free(ta);
    rumus_tensor_free(tb);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* A tensor borrowed `off` elements into a new buffer of n + off + 5
 * elements, so that no vector is aligned. */
static rumus_tensor *wrap_at(rumus_ctx *ctx, int ndim, const size_t *shape, const float *data,
                             size_t off, cl_mem *buf) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  cl_int e;
  *buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE, (n + off + 5) * sizeof(float),
                        NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, ndim, shape, *buf, off * sizeof(float), &t));
  if (data) TU_OK(ctx, rumus_tensor_upload(t, data, n * sizeof(float)));
  return t;
}

START_TEST(borrowed_at_offsets) {
  enum { R = 37, F = 29, N = R * F };
  float a[N], b[N], bias[F];
  double want[N], bound[N];
  tu_rng r;
  tu_rng_seed(&r, 600);
  tu_fill_uniform(&r, a, N, -2, 2);
  tu_fill_uniform(&r, b, N, -2, 2);
  tu_fill_uniform(&r, bias, F, -2, 2);
  rumus_ctx *ctx = tu_ctx();
  size_t shape[2] = {R, F}, bshape[1] = {F};
  cl_mem bufs[5];
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    rumus_tensor *ta = wrap_at(ctx, 2, shape, a, 3, &bufs[0]), *tb = wrap_at(ctx, 2, shape, b, 1, &bufs[1]),
                 *to = wrap_at(ctx, 2, shape, NULL, 5, &bufs[2]),
                 *tbias = wrap_at(ctx, 1, bshape, bias, 7, &bufs[3]),
                 *tdb = wrap_at(ctx, 1, bshape, NULL, 2, &bufs[4]);
    TU_OK(ctx, rumus_mul(ctx, ta, tb, to));
    float *got = tu_download(ctx, to);
    ref_op(MUL, 0, a, b, N, want, bound);
    tu_check_bound("mul_offset", got, want, bound, N);
    free(got);
    TU_OK(ctx, rumus_activation_fwd(ctx, RUMUS_ACT_GELU_TANH, 0, ta, to));
    got = tu_download(ctx, to);
    for (int i = 0; i < N; i++) want[i] = ref_activation(RUMUS_ACT_GELU_TANH, 0, a[i]);
    tu_check_close("gelu_offset", got, want, N, 1e-6, 2e-6);
    free(got);
    TU_OK(ctx, rumus_bias_add(ctx, ta, tbias));
    got = tu_download(ctx, ta);
    ref_bias_add(a, bias, R, F, want, bound);
    tu_check_bound("bias_add_offset", got, want, bound, N);
    free(got);
    TU_OK(ctx, rumus_bias_grad(ctx, tb, tdb));
    got = tu_download(ctx, tdb);
    check_bias_grad("bias_grad_offset", got, b, R, F);
    free(got);
    rumus_tensor *ts[5] = {ta, tb, to, tbias, tdb};
    for (int i = 0; i < 5; i++) {
      rumus_tensor_free(ts[i]);
      clReleaseMemObject(bufs[i]);
    }
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Every op on tensors with guard bytes before and after (one shape with a
 * partial vector at the end, bias_grad with several row chunks). */
START_TEST(guard_bytes) {
  enum { R = 1100, F = 19, N = R * F };
  float *a = tu_malloc(N * sizeof *a), *b = tu_malloc(N * sizeof *b), bias[F];
  tu_rng r;
  tu_rng_seed(&r, 700);
  tu_fill_uniform(&r, a, N, -2, 2);
  tu_fill_uniform(&r, b, N, -2, 2);
  tu_fill_uniform(&r, bias, F, -2, 2);
  rumus_ctx *ctx = tu_ctx();
  size_t shape[2] = {R, F}, bshape[1] = {F};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded ga = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, a),
               gb = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, b),
               go = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               gbias = tu_guarded_tensor(ctx, RUMUS_F32, 1, bshape, bias),
               gdb = tu_guarded_tensor(ctx, RUMUS_F32, 1, bshape, NULL);
    TU_OK(ctx, rumus_add(ctx, ga.t, gb.t, go.t));
    TU_OK(ctx, rumus_sub(ctx, ga.t, gb.t, go.t));
    TU_OK(ctx, rumus_mul(ctx, ga.t, gb.t, go.t));
    TU_OK(ctx, rumus_scale(ctx, 2.0f, ga.t, go.t));
    TU_OK(ctx, rumus_axpy(ctx, 2.0f, ga.t, go.t));
    for (int act = 0; act < NACT; act++) {
      TU_OK(ctx, rumus_activation_fwd(ctx, (rumus_activation)act, SLOPE, ga.t, go.t));
      TU_OK(ctx, rumus_activation_bwd(ctx, (rumus_activation)act, SLOPE, ga.t, gb.t, go.t));
    }
    TU_OK(ctx, rumus_bias_add(ctx, go.t, gbias.t));
    TU_OK(ctx, rumus_bias_grad(ctx, gb.t, gdb.t));
    float *got = tu_download(ctx, gdb.t);
    check_bias_grad("bias_grad_guarded", got, b, R, F);
    free(got);
    TU_OK(ctx, rumus_ctx_sync(ctx));
    tu_guarded_check_free_all(ctx, &ga, &gb, &go, &gbias, &gdb, NULL);
  }
  free(a);
  free(b);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Empty tensors: RUMUS_OK and nothing written; the bias gradient of zero
 * rows is zero. */
START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  size_t s0[1] = {0}, s05[2] = {0, 5}, s40[2] = {4, 0}, s5[1] = {5};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded e = tu_guarded_tensor(ctx, RUMUS_F32, 1, s0, NULL),
               e05 = tu_guarded_tensor(ctx, RUMUS_F32, 2, s05, NULL),
               e40 = tu_guarded_tensor(ctx, RUMUS_F32, 2, s40, NULL);
    TU_OK(ctx, rumus_add(ctx, e.t, e05.t, e40.t));
    TU_OK(ctx, rumus_sub(ctx, e.t, e.t, e.t));
    TU_OK(ctx, rumus_mul(ctx, e05.t, e05.t, e05.t));
    TU_OK(ctx, rumus_scale(ctx, 3.0f, e.t, e40.t));
    TU_OK(ctx, rumus_axpy(ctx, 3.0f, e.t, e.t));
    for (int act = 0; act < NACT; act++) {
      TU_OK(ctx, rumus_activation_fwd(ctx, (rumus_activation)act, SLOPE, e.t, e05.t));
      TU_OK(ctx, rumus_activation_bwd(ctx, (rumus_activation)act, SLOPE, e.t, e05.t, e40.t));
    }
    TU_OK(ctx, rumus_bias_add(ctx, e40.t, e.t));
    TU_OK(ctx, rumus_bias_grad(ctx, e40.t, e.t));
    const float five[5] = {1, 2, 3, 4, 5};
    tu_guarded b5 = tu_guarded_tensor(ctx, RUMUS_F32, 1, s5, five);
    TU_OK(ctx, rumus_bias_add(ctx, e05.t, b5.t));
    float *got = tu_download(ctx, b5.t);
    ck_assert_msg(memcmp(got, five, sizeof five) == 0, "bias changed by an empty bias_add");
    free(got);
    TU_OK(ctx, rumus_bias_grad(ctx, e05.t, b5.t));
    got = tu_download(ctx, b5.t);
    for (int j = 0; j < 5; j++) ck_assert_msg(got[j] == 0.0f, "dbias[%d] = %g over 0 rows", j, got[j]);
    free(got);
    TU_OK(ctx, rumus_ctx_sync(ctx));
    tu_guarded_check_free_all(ctx, &e, &e05, &e40, &b5, NULL);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Every arithmetic op on every pair of special values in type d:
 * infinities, NaN, signed zeros, subnormals, F16's largest value and sums
 * and products past it (which must store as infinities). */
static void typed_special_arith(rumus_ctx *ctx, rumus_dtype d) {
  static const float S[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1.0f,
                            -3.0f, 0.5f, 60000.0f, -60000.0f, 65504.0f,
                            1e38f, 1e-7f, -0x1p-24f};
  enum { NS = sizeof S / sizeof S[0], N = NS * NS };
  float a[N], b[N];
  for (size_t i = 0; i < N; i++) {
    a[i] = S[i % NS];
    b[i] = S[i / NS];
  }
  tu_round_to(d, a, N);
  tu_round_to(d, b, N);
  check_ops(ctx, d, a, b, N, "special");
}

/* Loop index: the 16-bit type.  Special values in the arithmetic
 * (typed_special_arith), then every op on 37 x 19 tensors (19: partial
 * vectors on both variants) at odd element offsets, each with its own
 * (the unaligned programs), between guard bytes: values and guards. */
START_TEST(typed_limits) {
  enum { R = 37, F = 19, N = R * F };
  const rumus_dtype d = tu_dtypes[1 + _i];
  const size_t shape[2] = {R, F}, bshape[1] = {F};
  tu_rng r;
  tu_rng_seed(&r, 900 + (uint64_t)_i);
  float *a = rand_typed(&r, d, N, -4, 4), *b = rand_typed(&r, d, N, -2, 2),
        *bias = rand_typed(&r, d, F, -2, 2);
  rumus_ctx *ctx = tu_ctx();
  typed_special_arith(ctx, d);
  guarded_at g[6] = {
      guarded_at_make(ctx, d, 2, shape, a, 3),
      guarded_at_make(ctx, d, 2, shape, b, 1),
      guarded_at_make(ctx, d, 2, shape, NULL, 5),
      guarded_at_make(ctx, d, 1, bshape, bias, 7),
      guarded_at_make(ctx, d, 1, bshape, NULL, 2),
      guarded_at_make(ctx, RUMUS_F32, 1, bshape, NULL, 1)};
  check_ops_on(ctx, d, g[0].t, g[1].t, g[2].t, a, b, N, "offset");
  TU_OK(ctx, rumus_tensor_upload_f32(g[1].t, b, N)); /* axpy updated it */
  for (int act = 0; act < NACT; act++)
    check_act_on(ctx, d, act, g[0].t, g[1].t, g[2].t, a, b, N, "offset");
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    char name[64];
    snprintf(name, sizeof name, "bias_add_%s_offset_%s", tu_dtype_name(d),
             tu_variant_name(tu_variants[v]));
    check_bias_add_typed(ctx, d, g[2].t, g[3].t, a, bias, R, F, name);
    for (int f32 = 0; f32 < 2; f32++) {
      snprintf(name, sizeof name, "bias_grad_%s_offset_%s_%s",
               tu_dtype_name(d), f32 ? "f32" : "same",
               tu_variant_name(tu_variants[v]));
      check_bias_grad_typed(ctx, g[1].t, g[4 + f32].t, b, R, F, name);
    }
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  for (int i = 0; i < 6; i++) guarded_at_check_free(ctx, &g[i]);
  free(a);
  free(b);
  free(bias);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Errors --------------------------------------------------------------- */

START_TEST(bad_input) {
  rumus_ctx *ctx = tu_ctx();
  size_t s48[2] = {4, 8}, s32[1] = {32}, s49[2] = {4, 9}, s8[1] = {8}, s9[1] = {9}, s18[2] = {1, 8};
  rumus_tensor *a = tu_tensor(ctx, RUMUS_F32, 2, s48, NULL), *b = tu_tensor(ctx, RUMUS_F32, 2, s48, NULL),
               *flat = tu_tensor(ctx, RUMUS_F32, 1, s32, NULL), *z = tu_tensor(ctx, RUMUS_F32, 2, s49, NULL),
               *i32 = tu_tensor(ctx, RUMUS_I32, 2, s48, NULL), *bias = tu_tensor(ctx, RUMUS_F32, 1, s8, NULL),
               *bias9 = tu_tensor(ctx, RUMUS_F32, 1, s9, NULL), *bias2d = tu_tensor(ctx, RUMUS_F32, 2, s18, NULL),
               *ibias = tu_tensor(ctx, RUMUS_I32, 1, s8, NULL), *scalar = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  const rumus_activation R = RUMUS_ACT_RELU;

  /* NULL context and tensors. */
  TU_STATUS(RUMUS_ENULL, rumus_add(NULL, a, b, b));
  TU_STATUS(RUMUS_ENULL, rumus_add(ctx, NULL, b, b));
  TU_STATUS(RUMUS_ENULL, rumus_sub(ctx, a, NULL, b));
  TU_STATUS(RUMUS_ENULL, rumus_mul(ctx, a, b, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_scale(ctx, 1, NULL, b));
  TU_STATUS(RUMUS_ENULL, rumus_scale(NULL, 1, a, b));
  TU_STATUS(RUMUS_ENULL, rumus_axpy(ctx, 1, a, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_activation_fwd(NULL, R, 0, a, b));
  TU_STATUS(RUMUS_ENULL, rumus_activation_fwd(ctx, R, 0, a, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_activation_bwd(ctx, R, 0, a, NULL, b));
  TU_STATUS(RUMUS_ENULL, rumus_bias_add(NULL, a, bias));
  TU_STATUS(RUMUS_ENULL, rumus_bias_add(ctx, a, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_bias_add(ctx, NULL, bias));
  TU_STATUS(RUMUS_ENULL, rumus_bias_grad(ctx, a, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_bias_grad(NULL, a, bias));

  /* Wrong storage type. */
  TU_STATUS(RUMUS_EDTYPE, rumus_add(ctx, i32, b, b));
  TU_STATUS(RUMUS_EDTYPE, rumus_sub(ctx, a, i32, b));
  TU_STATUS(RUMUS_EDTYPE, rumus_mul(ctx, a, b, i32));
  TU_STATUS(RUMUS_EDTYPE, rumus_scale(ctx, 2, a, i32));
  TU_STATUS(RUMUS_EDTYPE, rumus_axpy(ctx, 2, i32, b));
  TU_STATUS(RUMUS_EDTYPE, rumus_activation_fwd(ctx, R, 0, i32, b));
  TU_STATUS(RUMUS_EDTYPE, rumus_activation_bwd(ctx, R, 0, a, b, i32));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_add(ctx, i32, bias));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_add(ctx, a, ibias));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_grad(ctx, a, ibias));

  /* Element counts that differ; equal counts in another shape are fine. */
  TU_STATUS(RUMUS_ESHAPE, rumus_add(ctx, a, z, b));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[4, 8]") && strstr(rumus_ctx_errmsg(ctx), "[4, 9]"),
                "message names the shapes: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_sub(ctx, a, b, z));
  TU_STATUS(RUMUS_ESHAPE, rumus_mul(ctx, z, a, b));
  TU_STATUS(RUMUS_ESHAPE, rumus_scale(ctx, 2, a, z));
  TU_STATUS(RUMUS_ESHAPE, rumus_axpy(ctx, 2, z, b));
  TU_STATUS(RUMUS_ESHAPE, rumus_activation_fwd(ctx, R, 0, a, z));
  TU_STATUS(RUMUS_ESHAPE, rumus_activation_bwd(ctx, R, 0, a, z, b));
  TU_STATUS(RUMUS_ESHAPE, rumus_activation_bwd(ctx, R, 0, a, b, z));
  TU_OK(ctx, rumus_add(ctx, a, flat, b));

  /* Bias of the wrong length or rank; y without dimensions. */
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_add(ctx, a, bias9));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[9]") && strstr(rumus_ctx_errmsg(ctx), "[4, 8]"),
                "message names the shapes: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_add(ctx, a, bias2d));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_add(ctx, a, flat));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_add(ctx, scalar, bias));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_grad(ctx, a, bias9));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_grad(ctx, z, bias));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_grad(ctx, a, bias2d));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_grad(ctx, scalar, bias));

  /* Unknown activations. */
  TU_STATUS(RUMUS_EINVAL, rumus_activation_fwd(ctx, (rumus_activation)6, 0, a, b));
  TU_STATUS(RUMUS_EINVAL, rumus_activation_fwd(ctx, (rumus_activation)-1, 0, a, b));
  TU_STATUS(RUMUS_EINVAL, rumus_activation_bwd(ctx, (rumus_activation)99, 0, a, b, b));

  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 2, s48, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_add(ctx, a, o, b));
  TU_STATUS(RUMUS_EINVAL, rumus_activation_fwd(ctx, R, 0, o, b));
  TU_STATUS(RUMUS_EINVAL, rumus_bias_grad(ctx, o, bias));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, a, b, flat, z, i32, bias, bias9, bias2d, ibias, scalar, NULL);
}
END_TEST

/* Mixed storage types, and casts' bad arguments: exact codes. */
START_TEST(typed_bad_input) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s48[2] = {4, 8}, s8[1] = {8}, s9[1] = {9}, s32[1] = {32};
  rumus_tensor *f32 = tu_tensor(ctx, RUMUS_F32, 2, s48, NULL),
               *f16 = tu_tensor(ctx, RUMUS_F16, 2, s48, NULL),
               *f16b = tu_tensor(ctx, RUMUS_F16, 2, s48, NULL),
               *bf16 = tu_tensor(ctx, RUMUS_BF16, 2, s48, NULL),
               *i32 = tu_tensor(ctx, RUMUS_I32, 1, s32, NULL),
               *b32 = tu_tensor(ctx, RUMUS_F32, 1, s8, NULL),
               *b16 = tu_tensor(ctx, RUMUS_F16, 1, s8, NULL),
               *bb16 = tu_tensor(ctx, RUMUS_BF16, 1, s8, NULL),
               *ib = tu_tensor(ctx, RUMUS_I32, 1, s8, NULL),
               *f16_9 = tu_tensor(ctx, RUMUS_F16, 1, s9, NULL);
  const rumus_activation G = RUMUS_ACT_GELU_TANH;

  /* All tensors of a call of one type. */
  TU_STATUS(RUMUS_EDTYPE, rumus_add(ctx, f16, f32, f16b));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "f32") &&
                    strstr(rumus_ctx_errmsg(ctx), "f16"),
                "message names the types: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_sub(ctx, f16, f16b, bf16));
  TU_STATUS(RUMUS_EDTYPE, rumus_mul(ctx, bf16, bf16, f16));
  TU_STATUS(RUMUS_EDTYPE, rumus_scale(ctx, 2, bf16, f32));
  TU_STATUS(RUMUS_EDTYPE, rumus_axpy(ctx, 2, f16, bf16));
  TU_STATUS(RUMUS_EDTYPE, rumus_activation_fwd(ctx, G, 0, f16, f32));
  TU_STATUS(RUMUS_EDTYPE, rumus_activation_bwd(ctx, G, 0, f16, f16b, bf16));
  TU_STATUS(RUMUS_EDTYPE, rumus_activation_bwd(ctx, G, 0, f32, f16, f16b));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_add(ctx, f16, b32));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_add(ctx, f32, b16));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_add(ctx, bf16, b16));
  /* dbias: dy's type or F32, nothing else. */
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_grad(ctx, f16, bb16));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "or f32"),
                "message names the choices: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_grad(ctx, f32, b16));
  TU_STATUS(RUMUS_EDTYPE, rumus_bias_grad(ctx, bf16, ib));
  TU_STATUS(RUMUS_ESHAPE, rumus_bias_grad(ctx, f16, f16_9));
  TU_OK(ctx, rumus_bias_grad(ctx, f16, b32));
  TU_OK(ctx, rumus_bias_grad(ctx, bf16, b32));
  TU_OK(ctx, rumus_bias_grad(ctx, bf16, bb16));

  /* Casts. */
  TU_STATUS(RUMUS_ENULL, rumus_cast(NULL, f32, f16));
  TU_STATUS(RUMUS_ENULL, rumus_cast(ctx, NULL, f16));
  TU_STATUS(RUMUS_ENULL, rumus_cast(ctx, f32, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_cast(ctx, f32, i32));
  TU_STATUS(RUMUS_EDTYPE, rumus_cast(ctx, f16, i32));
  TU_STATUS(RUMUS_ESHAPE, rumus_cast(ctx, f32, f16_9));
  TU_STATUS(RUMUS_ESHAPE, rumus_cast(ctx, i32, b16));
  TU_OK(ctx, rumus_cast(ctx, i32, f16));  /* 32 elements in another shape */
  TU_OK(ctx, rumus_cast(ctx, i32, i32));  /* the same type: a copy */
  TU_OK(ctx, rumus_cast(ctx, f16, f16b));
  /* Overlaps: only the same bytes and the same type. */
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              256, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  rumus_tensor *w32 = NULL, *w16 = NULL, *wbf = NULL, *w16s = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, s8, buf, 0, &w32));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F16, 1, s8, buf, 0, &w16));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_BF16, 1, s8, buf, 0, &wbf));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F16, 1, s8, buf, 2, &w16s));
  TU_STATUS(RUMUS_EINVAL, rumus_cast(ctx, w32, w16));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "overlap"),
                "message says overlap: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EINVAL, rumus_cast(ctx, w16, w32));
  TU_STATUS(RUMUS_EINVAL, rumus_cast(ctx, w16, wbf)); /* same bytes */
  TU_STATUS(RUMUS_EINVAL, rumus_cast(ctx, w16, w16s));
  TU_OK(ctx, rumus_cast(ctx, w16, w16));
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F16, 2, s48, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_cast(ctx, o, f32));
  TU_STATUS(RUMUS_EINVAL, rumus_cast(ctx, f32, o));
  TU_STATUS(RUMUS_EINVAL, rumus_cast(ctx, f16, o)); /* same type too */
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  rumus_tensor_free(w32);
  rumus_tensor_free(w16);
  rumus_tensor_free(wbf);
  rumus_tensor_free(w16s);
  clReleaseMemObject(buf);
  tu_free_all(ctx, f32, f16, f16b, bf16, i32, b32, b16, bb16, ib, f16_9, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("elementwise");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, binary_ops_sizes, 0, (int)NSIZES);
  tcase_add_loop_test(core, activation_random, 0, NACT);
  tcase_add_test(core, activation_bwd_finite_differences);
  tcase_add_test(core, activation_bwd_device_differences);
  tcase_add_loop_test(core, bias_add_shapes, 0, (int)(NFEATS * 3));
  tcase_add_loop_test(core, bias_grad_shapes, 0, (int)(NFEATS * 3));
  tcase_add_test(core, bias_grad_finite_differences);
  tcase_add_loop_test(core, typed_flat_ops, 0, 2);
  tcase_add_loop_test(core, typed_bias, 0, 2);
  tcase_add_test(core, cast_bits);
  tcase_add_loop_test(core, cpu_vector_widths, 0, 2);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, activation_special_values);
  tcase_add_test(limits, activation_tiny_inputs);
  tcase_add_test(limits, bias_add_many_rows);
  tcase_add_test(limits, bias_grad_large);
  tcase_add_test(limits, in_place);
  tcase_add_test(limits, borrowed_at_offsets);
  tcase_add_test(limits, guard_bytes);
  tcase_add_test(limits, empty_tensors);
  tcase_add_loop_test(limits, typed_limits, 0, 2);
  tcase_add_test(limits, cast_offsets_guards);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_input);
  tcase_add_test(errors, typed_bad_input);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
