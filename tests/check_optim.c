/*
 * check_optim.c - SGD, Adam / AdamW, sum of squares and gradient-norm
 * clipping against the float64 references (ref/optim.c and plain double
 * sums here), with F32, F16 and BF16 storage.  The optimizer tests run
 * STEPS consecutive steps with fresh random gradients; the reference is
 * fed the gradients as the device stores them (rounded to G, times
 * inv_scale), and every step is compared (parameters, state, the copy).
 * An F32 state stays in double in the reference from step to step; a
 * 16-bit state is re-rounded to its type after each step (tu_round_to),
 * as the device stores it, so each step is compared from the same start
 * (where the two float results fell on either side of a rounding boundary
 * the reference takes the device's neighbouring value: rare, and
 * checked).
 *
 * Tolerances (|got - want| <= atol + rtol |want|), s = step number 1..5,
 * k = s for an F32 param and state, 1 for a 16-bit one:
 *   SGD param, momentum buffer   atol 5e-7 k, rtol 1e-6 k
 *   Adam param                   atol 5e-7 k, rtol 1e-6 k
 *   Adam m                       atol 1e-7 k, rtol 1e-6 k
 *   Adam v                       atol 1e-8 k, rtol 2e-6 k
 *     (float rounding of a few operations per step on values of order 1,
 *     carried from step to step through an F32 state: linear growth)
 *   param_copy                   param's, with the copy's rounding; and
 *                                bit for bit param's (same type), param
 *                                rounded (P = F32), or rounding to param
 *                                (copy F32)
 *   plus, for a value stored in a 16-bit type, its rounding: F16 rtol
 *   2^-11, atol 2^-25 (subnormals); BF16 rtol 2^-8 (tu_store_rtol/atol)
 *   sum of squares               rtol 1e-5 (float partials over chunks of
 *                                4096, pairwise tree: a few 1e-6 at most;
 *                                the same for 16-bit inputs, read exactly)
 *   clip total norm              rtol 1e-5
 *   clipped gradients            atol 1e-9, rtol 1e-5 (coefficient from the
 *                                float total), plus the gradient's rounding
 *   no clipping (coefficient 1)  bit for bit
 *   loss scaling                 inv_scale 2^-10 on gradients scaled by
 *                                2^10 (exact in F16): bit for bit the
 *                                unscaled steps; skipped steps: bit for bit
 *                                unchanged tensors
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tu_dtype.h"

static const size_t SIZES[] = {1, 7, 8, 1000, 65537};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])
#define STEPS 5

typedef struct {
  const char *name;
  rumus_sgd_params p;
} sgd_case;

/* {lr, momentum, dampening, weight_decay, nesterov} */
static const sgd_case SGD_CASES[] = {
    {"plain", {0.1f, 0.0f, 0.0f, 0.0f, 0}},
    {"wd", {0.1f, 0.0f, 0.0f, 0.05f, 0}},
    {"momentum", {0.05f, 0.9f, 0.0f, 0.0f, 0}},
    {"momentum_dampening", {0.05f, 0.8f, 0.3f, 0.0f, 0}},
    {"nesterov", {0.05f, 0.9f, 0.0f, 0.0f, 1}},
    {"momentum_dampening_wd", {0.02f, 0.5f, 0.1f, 0.01f, 0}},
    {"nesterov_wd", {0.05f, 0.9f, 0.0f, 0.02f, 1}},
};
#define NSGD (sizeof SGD_CASES / sizeof SGD_CASES[0])

typedef struct {
  const char *name;
  rumus_adam_params p;
} adam_case;

/* {lr, beta1, beta2, eps, weight_decay, decoupled} */
static const adam_case ADAM_CASES[] = {
    {"adam", {1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 0}},
    {"adam_wd", {1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 0}},
    {"adamw", {1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 1}},
    {"adamw_wd", {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1}},
    {"adam_betas", {5e-2f, 0.5f, 0.8f, 1e-6f, 0.01f, 0}},
    {"adamw_betas", {5e-2f, 0.0f, 0.5f, 1e-3f, 0.3f, 1}},
};
#define NADAM (sizeof ADAM_CASES / sizeof ADAM_CASES[0])

static rumus_tensor *vec(rumus_ctx *ctx, size_t n, const float *data) {
  size_t s[1] = {n};
  return tu_tensor(ctx, RUMUS_F32, 1, s, data);
}

static double *to_double(const float *x, size_t n) {
  double *d = malloc((n ? n : 1) * sizeof *d);
  ck_assert_ptr_nonnull(d);
  for (size_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}

/* ---- Runs of steps against the reference -------------------------------- */

/* The storage of a run: param and its state, grad, param_copy (0: none). */
typedef struct {
  rumus_dtype p, g, c;
} run_types;
static const run_types F32_RUN = {RUMUS_F32, RUMUS_F32, (rumus_dtype)0};

/* A run's tensors: param, grad, the state (momentum_buf, or m and v; NULL
 * where unused) and param_copy (NULL: none). */
typedef struct {
  rumus_tensor *p, *g, *s0, *s1, *c;
} run_tensors;

/* A quantity's F32 tolerance per step. */
typedef struct {
  double atol, rtol;
} step_tol;
static const step_tol TOL_PARAM = {5e-7, 1e-6}, TOL_M = {1e-7, 1e-6},
                      TOL_V = {1e-8, 2e-6};

/* Steps whose F32 arithmetic errors a comparison carries: all s for an
 * F32 state (kept in double by the reference), 1 for a 16-bit one (the
 * reference restarts each step from the stored values). */
static long carried(rumus_dtype p, long s) { return p == RUMUS_F32 ? s : 1; }

/* Uploads x (n values in [-1, 1), rounded to the tensor's type) and
 * returns them in double. */
static double *upload_uniform(rumus_ctx *ctx, tu_rng *r, rumus_tensor *t,
                              size_t n) {
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(r, x, n, -1, 1);
  tu_round_to(rumus_tensor_dtype(t), x, n);
  TU_OK(ctx, rumus_tensor_upload_f32(t, x, n));
  double *d = to_double(x, n);
  free(x);
  return d;
}

/* The step's gradient as the reference reads it: fresh stored values
 * times inv_scale. */
static double *next_grad(rumus_ctx *ctx, tu_rng *r, rumus_tensor *tg,
                         size_t n, const rumus_grad_scaling *sc) {
  double *gd = upload_uniform(ctx, r, tg, n);
  if (sc)
    for (size_t i = 0; i < n; i++) gd[i] *= sc->inv_scale;
  return gd;
}

/* The reference's state for the next step, as the device stores it: each
 * value rounded to t (tu_round_to).  Where the device stored the
 * neighbouring value of t (the float results of both lay within the
 * comparison's tolerance of a rounding boundary, on either side: about
 * one element in 10^4 per step for F16), the reference takes the device's
 * value, so that the one rounding is not carried into later comparisons;
 * such elements must stay rare. */
static void reround(rumus_dtype t, double *ref, const float *dev, size_t n,
                    const char *what) {
  float *r = tu_malloc(n * sizeof *r);
  for (size_t i = 0; i < n; i++) r[i] = (float)ref[i];
  tu_round_to(t, r, n);
  uint16_t *rb = tu_encode(t, r, n), *db = tu_encode(t, dev, n);
  size_t moved = 0;
  for (size_t i = 0; i < n; i++) {
    if (r[i] == dev[i]) { /* +0 and -0 alike */
      ref[i] = r[i];
      continue;
    }
    const int up = rb[i] + 1 == db[i] || db[i] + 1 == rb[i];
    const int zero = (rb[i] & 0x7FFF) <= 1 && (db[i] & 0x7FFF) <= 1;
    if (!up && !zero) /* no mark point */
      ck_abort_msg("%s[%zu]: device %.9g is not a neighbour of %.9g", what,
                   i, (double)dev[i], (double)r[i]);
    ref[i] = dev[i];
    moved++;
  }
  ck_assert_msg(moved <= n / 100 + 1, "%s: %zu of %zu elements rounded the "
                "other way", what, moved, n);
  free(r);
  free(rb);
  free(db);
}

/* Compares param or a state tensor (of the run's P) with the reference
 * after step s: F32 tolerance plus the rounding to P; then the reference
 * takes P's rounding (a 16-bit P).  Returns the downloaded values. */
static float *check_state(rumus_ctx *ctx, const rumus_tensor *t, double *ref,
                          size_t n, step_tol f, long s, const char *what) {
  const rumus_dtype d = rumus_tensor_dtype(t);
  float *got = tu_download_f32(ctx, t);
  const long k = carried(d, s);
  tu_check_close(what, got, ref, n, f.atol * k + tu_store_atol(d),
                 f.rtol * k + tu_store_rtol(d));
  if (d != RUMUS_F32) reround(d, ref, got, n, what);
  return got;
}

/* 1 if a and b hold the same bits. */
static int same_bits(const float *a, const float *b, size_t n) {
  return memcmp(a, b, n * sizeof *a) == 0;
}

/* param_copy after step s (before the reference is re-rounded): the
 * updated parameter rounded to the copy's type C, so exactly param's
 * bits when C is P, round_C(param) when P is F32 and round_P(copy) ==
 * param when C is F32 (it keeps the float result that param rounds);
 * against the reference, param's tolerance with C's rounding. */
static void check_copy(rumus_ctx *ctx, const rumus_tensor *tp,
                       const rumus_tensor *tc, const double *want, size_t n,
                       long s, const char *what) {
  const rumus_dtype P = rumus_tensor_dtype(tp), C = rumus_tensor_dtype(tc);
  float *p = tu_download_f32(ctx, tp), *c = tu_download_f32(ctx, tc);
  const long k = carried(P, s);
  tu_check_close(what, c, want, n, TOL_PARAM.atol * k + tu_store_atol(C),
                 TOL_PARAM.rtol * k + tu_store_rtol(C));
  if (C == P) {
    ck_assert_msg(same_bits(c, p, n), "%s: not param's bits", what);
  } else if (P == RUMUS_F32) {
    tu_round_to(C, p, n);
    ck_assert_msg(same_bits(c, p, n), "%s: not param rounded", what);
  } else if (C == RUMUS_F32) {
    tu_round_to(P, c, n);
    ck_assert_msg(same_bits(c, p, n), "%s: param is not the copy rounded",
                  what);
  }
  free(p);
  free(c);
}

/* "<op>_<P>_g<G>_c<copy>_<n>_step<s>_<tensor>" */
static void run_name(char *buf, size_t len, const char *opt, run_types ty,
                     size_t n, long s, const char *tensor) {
  snprintf(buf, len, "%s_%s_g%s_c%s_%zu_step%ld_%s", opt,
           tu_dtype_name(ty.p), tu_dtype_name(ty.g),
           ty.c ? tu_dtype_name(ty.c) : "none", n, s, tensor);
}

/* STEPS SGD steps on the run's tensors (t.s0 NULL without momentum) under
 * the scaling sc (NULL: none), compared after every step. */
static void sgd_run_typed(rumus_ctx *ctx, const sgd_case *c, run_types ty,
                          size_t n, run_tensors t,
                          const rumus_grad_scaling *sc, uint64_t seed) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  double *pd = upload_uniform(ctx, &r, t.p, n), *bd = calloc(n, sizeof *bd);
  const rumus_sgd_params *p = &c->p;
  char what[128], opt[64];
  snprintf(opt, sizeof opt, "sgd_%s", c->name);
  for (long s = 1; s <= STEPS; s++) {
    double *gd = next_grad(ctx, &r, t.g, n, sc);
    ref_sgd_step(p->lr, p->momentum, p->dampening, p->weight_decay,
                 p->nesterov, s, n, pd, gd, bd);
    free(gd);
    if (t.c || sc)
      TU_OK(ctx, rumus_sgd_step_ex(ctx, p, s, t.p, t.g, t.s0, t.c, sc));
    else
      TU_OK(ctx, rumus_sgd_step(ctx, p, s, t.p, t.g, t.s0));
    if (t.c) {
      run_name(what, sizeof what, opt, ty, n, s, "copy");
      check_copy(ctx, t.p, t.c, pd, n, s, what);
    }
    run_name(what, sizeof what, opt, ty, n, s, "param");
    free(check_state(ctx, t.p, pd, n, TOL_PARAM, s, what));
    if (p->momentum != 0.0f) {
      run_name(what, sizeof what, opt, ty, n, s, "buf");
      free(check_state(ctx, t.s0, bd, n, TOL_PARAM, s, what));
    }
  }
  free(pd);
  free(bd);
}

static void adam_run_typed(rumus_ctx *ctx, const adam_case *c, run_types ty,
                           size_t n, run_tensors t,
                           const rumus_grad_scaling *sc, uint64_t seed) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  double *pd = upload_uniform(ctx, &r, t.p, n), *md = calloc(n, sizeof *md),
         *vd = calloc(n, sizeof *vd);
  TU_OK(ctx, rumus_tensor_fill(t.s0, 0.0f));
  TU_OK(ctx, rumus_tensor_fill(t.s1, 0.0f));
  const rumus_adam_params *p = &c->p;
  const char *opt = c->name;
  char what[128];
  for (long s = 1; s <= STEPS; s++) {
    double *gd = next_grad(ctx, &r, t.g, n, sc);
    ref_adam_step(p->lr, p->beta1, p->beta2, p->eps, p->weight_decay,
                  p->decoupled, s, n, pd, gd, md, vd);
    free(gd);
    if (t.c || sc)
      TU_OK(ctx, rumus_adam_step_ex(ctx, p, s, t.p, t.g, t.s0, t.s1, t.c, sc));
    else
      TU_OK(ctx, rumus_adam_step(ctx, p, s, t.p, t.g, t.s0, t.s1));
    if (t.c) {
      run_name(what, sizeof what, opt, ty, n, s, "copy");
      check_copy(ctx, t.p, t.c, pd, n, s, what);
    }
    run_name(what, sizeof what, opt, ty, n, s, "param");
    free(check_state(ctx, t.p, pd, n, TOL_PARAM, s, what));
    run_name(what, sizeof what, opt, ty, n, s, "m");
    free(check_state(ctx, t.s0, md, n, TOL_M, s, what));
    run_name(what, sizeof what, opt, ty, n, s, "v");
    free(check_state(ctx, t.s1, vd, n, TOL_V, s, what));
  }
  free(pd);
  free(md);
  free(vd);
}

/* The F32 runs of the untyped tests. */
static void sgd_run(rumus_ctx *ctx, const sgd_case *c, size_t n,
                    rumus_tensor *tp, rumus_tensor *tg, rumus_tensor *tb,
                    uint64_t seed) {
  const run_tensors t = {tp, tg, tb, NULL, NULL};
  sgd_run_typed(ctx, c, F32_RUN, n, t, NULL, seed);
}

static void adam_run(rumus_ctx *ctx, const adam_case *c, size_t n,
                     rumus_tensor *tp, rumus_tensor *tg, rumus_tensor *tm,
                     rumus_tensor *tv, uint64_t seed) {
  const run_tensors t = {tp, tg, tm, tv, NULL};
  adam_run_typed(ctx, c, F32_RUN, n, t, NULL, seed);
}

/* ---- core ------------------------------------------------------------------ */

START_TEST(sgd_steps) {
  const sgd_case *c = &SGD_CASES[_i];
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < NSIZES; k++) {
    const size_t n = SIZES[k];
    rumus_tensor *tp = vec(ctx, n, NULL), *tg = vec(ctx, n, NULL),
                 *tb = c->p.momentum != 0.0f ? vec(ctx, n, NULL) : NULL;
    sgd_run(ctx, c, n, tp, tg, tb, 1000 + 10 * (uint64_t)_i + k);
    rumus_tensor_free(tp);
    rumus_tensor_free(tg);
    rumus_tensor_free(tb);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(adam_steps) {
  const adam_case *c = &ADAM_CASES[_i];
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < NSIZES; k++) {
    const size_t n = SIZES[k];
    rumus_tensor *tp = vec(ctx, n, NULL), *tg = vec(ctx, n, NULL),
                 *tm = vec(ctx, n, NULL), *tv = vec(ctx, n, NULL);
    adam_run(ctx, c, n, tp, tg, tm, tv, 2000 + 10 * (uint64_t)_i + k);
    rumus_tensor_free(tp);
    rumus_tensor_free(tg);
    rumus_tensor_free(tm);
    rumus_tensor_free(tv);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* acc = 2.5 + sum x^2 on both variants; the same input twice gives the same
 * bits (fixed reduction order). */
START_TEST(sum_squares_sizes) {
  static const size_t N[] = {1, 9, ((size_t)1 << 20) + 5};
  const size_t n = N[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 77 + (uint64_t)_i);
  float *x = malloc(n * sizeof *x);
  tu_fill_uniform(&r, x, n, -2, 2);
  double want = 2.5;
  for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
  rumus_tensor *tx = vec(ctx, n, x), *acc = vec(ctx, 1, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float got[2];
    for (int rep = 0; rep < 2; rep++) {
      TU_OK(ctx, rumus_tensor_fill(acc, 2.5f));
      TU_OK(ctx, rumus_sum_squares(ctx, tx, acc));
      TU_OK(ctx, rumus_tensor_download(acc, &got[rep], sizeof(float)));
    }
    char what[64];
    snprintf(what, sizeof what, "sum_squares_%s_%zu", tu_variant_name(tu_variants[v]), n);
    tu_check_close(what, got, &want, 1, 0.0, 1e-5);
    ck_assert_msg(memcmp(&got[0], &got[1], sizeof(float)) == 0,
                  "%s: not deterministic (%.9g then %.9g)", what, got[0], got[1]);
  }
  free(x);
  tu_free_all(ctx, tx, acc, NULL);
}
END_TEST

/* Three gradients of different sizes, in guarded buffers, clipped (max_norm
 * half the norm) and not clipped (twice the norm), with and without the
 * total_norm output, on both variants. */
enum { NG = 3 };
static const size_t CLIP_SHAPES[NG][2] = {{31, 129}, {1, 7}, {65537, 1}};
/* With work-group size 16 these give about 940 partials each, more than the
 * 2048 the work-group variant's final tree holds in local memory. */
static const size_t CLIP_SHAPES_MANY[NG][2] = {{300000, 1}, {1, 300001}, {599, 501}};

static const rumus_dtype CLIP_F32[NG] = {RUMUS_F32, RUMUS_F32, RUMUS_F32};

/* Gradients of the given types; a 16-bit clipped gradient adds its
 * rounding to the tolerance. */
static void clip_case_typed(rumus_ctx *ctx, double ratio, int with_total,
                            uint64_t seed, const size_t (*shapes)[2],
                            const rumus_dtype *types) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  float *g[NG];
  size_t len[NG];
  double sum = 0.0, store = 0.0;
  for (int i = 0; i < NG; i++) {
    len[i] = shapes[i][0] * shapes[i][1];
    g[i] = malloc(len[i] * sizeof(float));
    tu_fill_uniform(&r, g[i], len[i], -1, 1);
    tu_round_to(types[i], g[i], len[i]);
    store = fmax(store, tu_store_rtol(types[i]));
    for (size_t j = 0; j < len[i]; j++) sum += (double)g[i][j] * g[i][j];
  }
  const double total = sqrt(sum);
  const float max_norm = (float)(ratio * total);
  const double coef = fmin(1.0, max_norm / (total + 1e-6));
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded tg[NG];
    rumus_tensor *ts[NG];
    for (int i = 0; i < NG; i++) {
      tg[i] = tu_guarded_typed(ctx, types[i], 2, shapes[i], g[i]);
      ts[i] = tg[i].t;
    }
    size_t one = 1;
    tu_guarded tn = tu_guarded_tensor(ctx, RUMUS_F32, 1, &one, NULL);
    TU_OK(ctx, rumus_clip_grad_norm(ctx, ts, NG, max_norm, with_total ? tn.t : NULL));
    TU_OK(ctx, rumus_ctx_sync(ctx));
    char what[96];
    if (with_total) {
      float got;
      TU_OK(ctx, rumus_tensor_download(tn.t, &got, sizeof got));
      snprintf(what, sizeof what, "clip_total_%s_ratio%g", tu_variant_name(tu_variants[v]), ratio);
      tu_check_close(what, &got, &total, 1, 0.0, 1e-5);
    }
    double after = 0.0; /* squared norm after clipping */
    for (int i = 0; i < NG; i++) {
      float *got = tu_download_f32(ctx, ts[i]);
      snprintf(what, sizeof what, "clip_%s_ratio%g_grad%d_%s",
               tu_variant_name(tu_variants[v]), ratio, i,
               tu_dtype_name(types[i]));
      if (coef >= 1.0) {
        ck_assert_msg(memcmp(got, g[i], len[i] * sizeof(float)) == 0,
                      "%s: changed without clipping", what);
      } else {
        double *want = malloc(len[i] * sizeof *want);
        for (size_t j = 0; j < len[i]; j++) want[j] = g[i][j] * coef;
        tu_check_close(what, got, want, len[i],
                       1e-9 + tu_store_atol(types[i]),
                       1e-5 + tu_store_rtol(types[i]));
        for (size_t j = 0; j < len[i]; j++) after += (double)got[j] * got[j];
        free(want);
      }
      free(got);
      tu_guarded_check_free(ctx, &tg[i]);
    }
    if (coef < 1.0) /* clipping really happened: the norm is now max_norm */
      ck_assert_msg(fabs(sqrt(after) - max_norm) <= (1e-5 + store) * max_norm,
                    "norm after clipping %.9g, max_norm %.9g", sqrt(after), max_norm);
    tu_guarded_check_free(ctx, &tn);
  }
  for (int i = 0; i < NG; i++) free(g[i]);
}

static void clip_case_shapes(rumus_ctx *ctx, double ratio, int with_total,
                             uint64_t seed, const size_t (*shapes)[2]) {
  clip_case_typed(ctx, ratio, with_total, seed, shapes, CLIP_F32);
}

static void clip_case(rumus_ctx *ctx, double ratio, int with_total,
                      uint64_t seed) {
  clip_case_shapes(ctx, ratio, with_total, seed, CLIP_SHAPES);
}

START_TEST(clip_grad_norm_many_partials) {
  rumus_ctx *ctx = tu_ctx();
  TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE, 16));
  clip_case_shapes(ctx, 0.5, 1, 15, CLIP_SHAPES_MANY);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(clip_grad_norm_clips) {
  rumus_ctx *ctx = tu_ctx();
  clip_case(ctx, 0.5, 1, 11);
  clip_case(ctx, 0.1, 0, 12);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(clip_grad_norm_no_clip) {
  rumus_ctx *ctx = tu_ctx();
  clip_case(ctx, 2.0, 1, 13);
  clip_case(ctx, 1.5, 0, 14);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A clip list of F16, BF16 and F32 gradients (each its own type),
 * clipped and not (then bit for bit unchanged). */
START_TEST(clip_grad_norm_typed) {
  static const rumus_dtype MIXED[NG] = {RUMUS_F16, RUMUS_BF16, RUMUS_F32};
  static const rumus_dtype HALF[NG] = {RUMUS_BF16, RUMUS_F16, RUMUS_F16};
  rumus_ctx *ctx = tu_ctx();
  clip_case_typed(ctx, 0.5, 1, 16, CLIP_SHAPES, MIXED);
  clip_case_typed(ctx, 2.0, 1, 17, CLIP_SHAPES, MIXED);
  clip_case_typed(ctx, 0.3, 0, 18, CLIP_SHAPES, HALF);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- core: storage types ------------------------------------------------- */

/* (param and state, grad, param_copy): each type as P with G = P, F32
 * master weights with 16-bit gradients, a 16-bit P with an F32 gradient,
 * and copies of every type (the same type as P: the same bits). */
static const run_types TYPED[] = {
    {RUMUS_F16, RUMUS_F16, 0},           {RUMUS_BF16, RUMUS_BF16, 0},
    {RUMUS_F32, RUMUS_F16, 0},           {RUMUS_F32, RUMUS_BF16, 0},
    {RUMUS_F32, RUMUS_F32, RUMUS_F32},   {RUMUS_F32, RUMUS_F32, RUMUS_F16},
    {RUMUS_F32, RUMUS_F32, RUMUS_BF16},  {RUMUS_F32, RUMUS_F16, RUMUS_F16},
    {RUMUS_F32, RUMUS_BF16, RUMUS_BF16}, {RUMUS_F16, RUMUS_F16, RUMUS_F32},
    {RUMUS_F16, RUMUS_F16, RUMUS_F16},   {RUMUS_BF16, RUMUS_BF16, RUMUS_F16},
    {RUMUS_BF16, RUMUS_F32, RUMUS_BF16}};
#define NTYPED (sizeof TYPED / sizeof TYPED[0])

/* The tensors of typed runs of n elements: param, grad, two state
 * tensors and, if ty.c, the copy (in the order of run_tensors), in
 * guarded buffers when `guard` is set (at an offset that keeps the
 * aligned vector path). */
typedef struct {
  tu_guarded g[5];
  rumus_tensor *t[5];
} run_set;

static run_tensors run_set_make(rumus_ctx *ctx, run_types ty, size_t n,
                                int guard, run_set *rs) {
  const size_t shape[1] = {n};
  const rumus_dtype types[5] = {ty.p, ty.g, ty.p, ty.p, ty.c};
  memset(rs, 0, sizeof *rs);
  for (int i = 0; i < 5; i++) {
    if (i == 4 && !ty.c) break;
    if (guard) {
      rs->g[i] = tu_guarded_typed(ctx, types[i], 1, shape, NULL);
      rs->t[i] = rs->g[i].t;
    } else {
      rs->t[i] = tu_tensor_typed(ctx, types[i], 1, shape, NULL);
    }
  }
  return (run_tensors){rs->t[0], rs->t[1], rs->t[2], rs->t[3], rs->t[4]};
}

/* Checks the guard bytes (if any) and frees the tensors. */
static void run_set_free(rumus_ctx *ctx, run_set *rs) {
  for (int i = 0; i < 5; i++) {
    if (rs->g[i].t)
      tu_guarded_check_free(ctx, &rs->g[i]);
    else
      rumus_tensor_free(rs->t[i]);
  }
}

/* SGD (weight decay; momentum with dampening from the first step;
 * Nesterov), Adam and AdamW with weight decay, on the run's types, with
 * 7 elements (one partial vector) and 1003 (a tail of 3) in guarded
 * buffers. */
START_TEST(typed_steps) {
  static const size_t N[] = {7, 1003};
  static const int SGD_SEL[] = {1, 5, 6}, ADAM_SEL[] = {1, 3};
  const run_types ty = TYPED[_i];
  rumus_ctx *ctx = tu_ctx();
  for (int k = 0; k < 2; k++) {
    const uint64_t seed = 3000 + 100 * (uint64_t)_i + 10 * (uint64_t)k;
    run_set rs;
    run_tensors t = run_set_make(ctx, ty, N[k], k == 1, &rs);
    for (int j = 0; j < 3; j++) {
      const sgd_case *c = &SGD_CASES[SGD_SEL[j]];
      run_tensors ts = t;
      if (c->p.momentum == 0.0f) ts.s0 = NULL;
      sgd_run_typed(ctx, c, ty, N[k], ts, NULL, seed + (uint64_t)j);
    }
    for (int j = 0; j < 2; j++)
      adam_run_typed(ctx, &ADAM_CASES[ADAM_SEL[j]], ty, N[k], t, NULL,
                     seed + 5 + (uint64_t)j);
    run_set_free(ctx, &rs);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Steps that read grad * inv_scale against the reference on the scaled
 * gradient: inv_scale 0.37 (its float product rounds once more, within
 * the F32 tolerance), on F32, on F16 with an F32 copy and on F32 master
 * weights with BF16 gradients. */
START_TEST(scaled_steps) {
  static const run_types TY[] = {{RUMUS_F32, RUMUS_F32, 0},
                                 {RUMUS_F16, RUMUS_F16, RUMUS_F32},
                                 {RUMUS_F32, RUMUS_BF16, RUMUS_BF16}};
  const rumus_grad_scaling sc = {0.37f, NULL};
  rumus_ctx *ctx = tu_ctx();
  for (int k = 0; k < 3; k++) {
    run_set rs;
    const run_tensors t = run_set_make(ctx, TY[k], 1003, 0, &rs);
    sgd_run_typed(ctx, &SGD_CASES[5], TY[k], 1003, t, &sc, 4000 + k);
    adam_run_typed(ctx, &ADAM_CASES[3], TY[k], 1003, t, &sc, 4010 + k);
    run_set_free(ctx, &rs);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Two sets of tensors of one run's types (P = F32, G = F16, copy F16)
 * with the same contents, for runs that must give the same bits. */
enum { TWIN_N = 1003 };
typedef struct {
  rumus_tensor *t[2][5]; /* param, grad, m (or momentum), v, copy */
} twins;

static twins twins_make(rumus_ctx *ctx, run_types ty, tu_rng *r) {
  const rumus_dtype types[5] = {ty.p, ty.g, ty.p, ty.p, ty.c};
  const size_t shape[1] = {TWIN_N};
  float x[TWIN_N];
  twins w;
  for (int i = 0; i < 5; i++) {
    tu_fill_uniform(r, x, TWIN_N, -1, 1);
    if (i == 3)
      for (size_t j = 0; j < TWIN_N; j++) x[j] *= x[j]; /* v >= 0 */
    for (int s = 0; s < 2; s++)
      w.t[s][i] = tu_tensor_typed(ctx, types[i], 1, shape, x);
  }
  return w;
}

static void twins_free(twins *w) {
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < 5; i++) rumus_tensor_free(w->t[s][i]);
}

/* Asserts that both sets hold the same bits, tensor `except` aside (-1:
 * none). */
static void twins_same(rumus_ctx *ctx, twins *w, int except,
                       const char *what) {
  for (int i = 0; i < 5; i++) {
    if (i == except) continue;
    float *a = tu_download_f32(ctx, w->t[0][i]);
    float *b = tu_download_f32(ctx, w->t[1][i]);
    ck_assert_msg(same_bits(a, b, TWIN_N), "%s: tensor %d differs", what, i);
    free(a);
    free(b);
  }
}

/* Three SGD steps with momentum, then three AdamW steps (the momentum
 * buffer serving as m) on set `set` of w, under sc. */
static void twins_steps(rumus_ctx *ctx, twins *w, int set,
                        const rumus_grad_scaling *sc) {
  rumus_tensor *const *t = w->t[set];
  const rumus_sgd_params sp = SGD_CASES[5].p;
  const rumus_adam_params ap = ADAM_CASES[3].p;
  for (long s = 1; s <= 3; s++)
    TU_OK(ctx, rumus_sgd_step_ex(ctx, &sp, s, t[0], t[1], t[2], t[4], sc));
  for (long s = 1; s <= 3; s++)
    TU_OK(ctx, rumus_adam_step_ex(ctx, &ap, s, t[0], t[1], t[2], t[3], t[4],
                                  sc));
}

/* A power-of-two loss scale is exact in F16: steps on grad * 1024 with
 * inv_scale 1 / 1024 give the bits of unscaled steps, for SGD with
 * momentum and AdamW, F32 master weights, F16 gradients and copy. */
START_TEST(scaled_steps_exact) {
  const run_types ty = {RUMUS_F32, RUMUS_F16, RUMUS_F16};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 4100);
  twins w = twins_make(ctx, ty, &r);
  float *gs = tu_download_f32(ctx, w.t[1][1]);
  for (size_t j = 0; j < TWIN_N; j++) gs[j] *= 1024.0f;
  TU_OK(ctx, rumus_tensor_upload_f32(w.t[1][1], gs, TWIN_N));
  free(gs);
  const rumus_grad_scaling sc = {1.0f / 1024, NULL};
  twins_steps(ctx, &w, 0, NULL);
  twins_steps(ctx, &w, 1, &sc);
  twins_same(ctx, &w, 1, "scaled_steps_exact");
  twins_free(&w);
  tu_free_all(ctx, NULL);
}
END_TEST

/* skip_if_nonfinite: with inf, -inf or NaN in the flag the steps write
 * nothing (set 0 keeps the bits of the untouched set 1); with a finite
 * flag they are the steps without one; on F32 master weights with F16
 * gradients and copy, and on F16 throughout. */
START_TEST(skipped_steps) {
  static const run_types TY[] = {{RUMUS_F32, RUMUS_F16, RUMUS_F16},
                                 {RUMUS_F16, RUMUS_F16, RUMUS_F16}};
  static const float FLAGS[] = {INFINITY, -INFINITY, NAN};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 4200);
  size_t one = 1;
  rumus_tensor *flag = tu_tensor(ctx, RUMUS_F32, 1, &one, NULL);
  const rumus_grad_scaling sc = {1.0f, flag};
  for (int k = 0; k < 2; k++) {
    twins w = twins_make(ctx, TY[k], &r);
    for (int f = 0; f < 3; f++) {
      TU_OK(ctx, rumus_tensor_fill(flag, FLAGS[f]));
      twins_steps(ctx, &w, 0, &sc);
      twins_same(ctx, &w, -1, "skipped_steps_nonfinite");
    }
    float *before = tu_download_f32(ctx, w.t[0][0]);
    TU_OK(ctx, rumus_tensor_fill(flag, 3.0f));
    twins_steps(ctx, &w, 0, &sc);
    twins_steps(ctx, &w, 1, NULL);
    twins_same(ctx, &w, -1, "skipped_steps_finite");
    float *after = tu_download_f32(ctx, w.t[0][0]);
    ck_assert_msg(!same_bits(before, after, TWIN_N), "a finite flag skipped");
    free(before);
    free(after);
    twins_free(&w);
  }
  tu_free_all(ctx, flag, NULL);
}
END_TEST

/* Sum of squares of F16 and BF16 tensors (values in [-2, 2) as stored)
 * on both variants: against the double sum of the stored values, float
 * like F32's; the same bits twice. */
START_TEST(sum_squares_typed) {
  const rumus_dtype d = tu_dtypes[1 + _i];
  const size_t n = 100003;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 4300 + (uint64_t)_i);
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(&r, x, n, -2, 2);
  tu_round_to(d, x, n);
  double want = 2.5;
  for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
  const size_t shape[1] = {n}, one = 1;
  tu_guarded tx = tu_guarded_typed(ctx, d, 1, shape, x);
  rumus_tensor *acc = tu_tensor(ctx, RUMUS_F32, 1, &one, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float got[2];
    for (int rep = 0; rep < 2; rep++) {
      TU_OK(ctx, rumus_tensor_fill(acc, 2.5f));
      TU_OK(ctx, rumus_sum_squares(ctx, tx.t, acc));
      TU_OK(ctx, rumus_tensor_download(acc, &got[rep], sizeof(float)));
    }
    char what[64];
    snprintf(what, sizeof what, "sum_squares_%s_%s", tu_dtype_name(d),
             tu_variant_name(tu_variants[v]));
    tu_check_close(what, got, &want, 1, 0.0, 1e-5);
    ck_assert_msg(same_bits(&got[0], &got[1], 1), "%s: not deterministic",
                  what);
  }
  tu_guarded_check_free(ctx, &tx);
  free(x);
  tu_free_all(ctx, acc, NULL);
}
END_TEST

/* ---- limits ----------------------------------------------------------------- */

/* Parameters, gradients and state in guarded buffers (3 x 337: a tail of 3
 * after the 8-element vectors). */
START_TEST(steps_guarded) {
  rumus_ctx *ctx = tu_ctx();
  const size_t shape[2] = {3, 337}, n = 3 * 337;
  {
    const sgd_case *c = &SGD_CASES[4]; /* nesterov */
    tu_guarded p = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               g = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               b = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL);
    sgd_run(ctx, c, n, p.t, g.t, b.t, 31);
    tu_guarded_check_free_all(ctx, &p, &g, &b, NULL);
  }
  for (int k = 1; k <= 3; k += 2) { /* adam_wd, adamw_wd */
    const adam_case *c = &ADAM_CASES[k];
    tu_guarded p = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               g = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               m = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               v = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL);
    adam_run(ctx, c, n, p.t, g.t, m.t, v.t, 32 + (uint64_t)k);
    tu_guarded_check_free_all(ctx, &p, &g, &m, &v, NULL);
  }
  /* sum of squares from a guarded input into a guarded accumulator. */
  float x[3 * 337];
  tu_rng r;
  tu_rng_seed(&r, 35);
  tu_fill_uniform(&r, x, n, -1, 1);
  double want = 1.0;
  for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    size_t one = 1;
    float a0 = 1.0f, got;
    tu_guarded tx = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, x),
               ta = tu_guarded_tensor(ctx, RUMUS_F32, 1, &one, &a0);
    TU_OK(ctx, rumus_sum_squares(ctx, tx.t, ta.t));
    TU_OK(ctx, rumus_tensor_download(ta.t, &got, sizeof got));
    tu_check_close("sum_squares_guarded", &got, &want, 1, 0.0, 1e-5);
    tu_guarded_check_free(ctx, &tx);
    tu_guarded_check_free(ctx, &ta);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* A tensor of n elements of type d at an element offset that is not a
 * multiple of 8 (the kernels' unaligned path), with guard bytes on both
 * sides. */
typedef struct {
  rumus_tensor *t;
  cl_mem buf;
  size_t off, n, esz;
} odd_tensor;
#define ODD_GUARD 64

static odd_tensor odd_make_typed(rumus_ctx *ctx, rumus_dtype d, size_t n,
                                 size_t off) {
  odd_tensor o = {NULL, NULL, off, n, rumus_dtype_size(d)};
  const size_t bytes = (off + n + ODD_GUARD) * o.esz;
  unsigned char *host = tu_malloc(bytes);
  memset(host, 0xA5, bytes);
  cl_int e;
  o.buf = clCreateBuffer(rumus_ctx_cl_context(ctx),
                         CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes,
                         host, &e);
  free(host);
  ck_assert_int_eq(e, CL_SUCCESS);
  size_t shape[1] = {n};
  TU_OK(ctx, rumus_tensor_wrap(ctx, d, 1, shape, o.buf, off * o.esz, &o.t));
  return o;
}

static odd_tensor odd_make(rumus_ctx *ctx, size_t n, size_t off) {
  return odd_make_typed(ctx, RUMUS_F32, n, off);
}

static void odd_check_free(rumus_ctx *ctx, odd_tensor *o) {
  const size_t bytes = (o->off + o->n + ODD_GUARD) * o->esz;
  const size_t lo = o->off * o->esz, hi = (o->off + o->n) * o->esz;
  unsigned char *host = tu_malloc(bytes);
  ck_assert_int_eq(clEnqueueReadBuffer(rumus_ctx_cl_queue(ctx), o->buf,
                                       CL_TRUE, 0, bytes, host, 0, NULL, NULL),
                   CL_SUCCESS);
  for (size_t i = 0; i < bytes; i++) /* asserts only on failure */
    if ((i < lo || i >= hi) && host[i] != 0xA5)
      ck_abort_msg("guard byte %zu %s the tensor overwritten",
                   i < lo ? lo - i : i - hi, i < lo ? "before" : "after");
  free(host);
  rumus_tensor_free(o->t);
  clReleaseMemObject(o->buf);
}

/* Element offsets 1, 3, 5, 7 (and aligned tensors mixed in), and a host
 * buffer used in place at a 16-byte aligned address. */
START_TEST(steps_unaligned) {
  rumus_ctx *ctx = tu_ctx();
  const size_t n = 1003;
  {
    odd_tensor p = odd_make(ctx, n, 3), g = odd_make(ctx, n, 8), b = odd_make(ctx, n, 5);
    sgd_run(ctx, &SGD_CASES[5], n, p.t, g.t, b.t, 41);
    odd_check_free(ctx, &p);
    odd_check_free(ctx, &g);
    odd_check_free(ctx, &b);
  }
  {
    odd_tensor p = odd_make(ctx, n, 1), g = odd_make(ctx, n, 7), m = odd_make(ctx, n, 16),
               v = odd_make(ctx, n, 3);
    adam_run(ctx, &ADAM_CASES[3], n, p.t, g.t, m.t, v.t, 42);
    odd_check_free(ctx, &p);
    odd_check_free(ctx, &g);
    odd_check_free(ctx, &m);
    odd_check_free(ctx, &v);
  }
  {
    /* A CL_MEM_USE_HOST_PTR buffer at a host address that is 16- but not
     * 32-byte aligned: a CPU driver may run on this memory in place. */
    unsigned char *raw = malloc(n * sizeof(float) + 64);
    ck_assert_ptr_nonnull(raw);
    float *host = (float *)(raw + (32 - (uintptr_t)raw % 32) % 32 + 16);
    cl_int e;
    cl_mem hb = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                               n * sizeof(float), host, &e);
    ck_assert_int_eq(e, CL_SUCCESS);
    size_t shape[1] = {n};
    rumus_tensor *p = NULL;
    TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, shape, hb, 0, &p));
    rumus_tensor *g = vec(ctx, n, NULL), *b = vec(ctx, n, NULL);
    sgd_run(ctx, &SGD_CASES[2], n, p, g, b, 44);
    TU_OK(ctx, rumus_ctx_sync(ctx));
    rumus_tensor_free(p);
    rumus_tensor_free(g);
    rumus_tensor_free(b);
    clReleaseMemObject(hb);
    free(raw);
  }
  tu_rng r;
  tu_rng_seed(&r, 43);
  float x[1003], y[1003];
  tu_fill_uniform(&r, x, n, -1, 1);
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
  double want[1003];
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    odd_tensor a = odd_make(ctx, n, 1), b = odd_make(ctx, n, 6), tn = odd_make(ctx, 1, 5);
    TU_OK(ctx, rumus_tensor_upload(a.t, x, sizeof x));
    TU_OK(ctx, rumus_tensor_upload(b.t, x, sizeof x));
    rumus_tensor *gs[2] = {a.t, b.t};
    /* Two copies of x: the total is sqrt(2) |x|; clip to sqrt(2) |x| / 4. */
    TU_OK(ctx, rumus_clip_grad_norm(ctx, gs, 2, (float)(0.25 * sqrt(2 * sum)), tn.t));
    float tot;
    TU_OK(ctx, rumus_tensor_download(tn.t, &tot, sizeof tot));
    const double total = sqrt(2 * sum);
    tu_check_close("clip_unaligned_total", &tot, &total, 1, 0.0, 1e-5);
    const double c = 0.25 * total / (total + 1e-6);
    for (size_t i = 0; i < n; i++) want[i] = x[i] * c;
    TU_OK(ctx, rumus_tensor_download(a.t, y, sizeof y));
    tu_check_close("clip_unaligned_a", y, want, n, 1e-9, 1e-5);
    TU_OK(ctx, rumus_tensor_download(b.t, y, sizeof y));
    tu_check_close("clip_unaligned_b", y, want, n, 1e-9, 1e-5);
    odd_check_free(ctx, &a);
    odd_check_free(ctx, &b);
    odd_check_free(ctx, &tn);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Typed runs with tensors at element offsets that are not multiples of 8
 * (the unaligned path) and at offsets that all are, away from the
 * buffer's start (the aligned path); an F16 parameter in
 * CL_MEM_USE_HOST_PTR buffers at host addresses 8 bytes past a multiple
 * of 16 (not a whole vector of 8 halves: the unaligned path) and 16 past
 * a multiple of 32 (aligned); sums of squares and a clip of F16 and BF16
 * gradients at odd offsets. */
static const struct {
  run_types ty;
  int adam;
  size_t off[5]; /* param, grad, state, state, copy */
} ODD_RUNS[] = {
    {{RUMUS_F16, RUMUS_F16, RUMUS_F32}, 0, {3, 8, 5, 0, 1}},
    {{RUMUS_F32, RUMUS_BF16, RUMUS_F16}, 1, {1, 7, 16, 3, 5}},
    {{RUMUS_BF16, RUMUS_F16, RUMUS_F16}, 1, {8, 16, 24, 40, 64}},
};

static void odd_runs(rumus_ctx *ctx, size_t n) {
  for (size_t k = 0; k < sizeof ODD_RUNS / sizeof ODD_RUNS[0]; k++) {
    const run_types ty = ODD_RUNS[k].ty;
    const rumus_dtype types[5] = {ty.p, ty.g, ty.p, ty.p, ty.c};
    const int used = ODD_RUNS[k].adam ? 5 : 4; /* SGD: no second state */
    odd_tensor o[5];
    rumus_tensor *t[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int i = 0; i < 5; i++) {
      if (i == 3 && used == 4) continue;
      o[i] = odd_make_typed(ctx, types[i], n, ODD_RUNS[k].off[i]);
      t[i] = o[i].t;
    }
    const run_tensors rt = {t[0], t[1], t[2], t[3], t[4]};
    if (ODD_RUNS[k].adam)
      adam_run_typed(ctx, &ADAM_CASES[1], ty, n, rt, NULL, 60 + k);
    else
      sgd_run_typed(ctx, &SGD_CASES[5], ty, n, rt, NULL, 60 + k);
    for (int i = 0; i < 5; i++)
      if (t[i]) odd_check_free(ctx, &o[i]);
  }
}

static void host_ptr_f16_runs(rumus_ctx *ctx, size_t n) {
  const run_types ty = {RUMUS_F16, RUMUS_F16, (rumus_dtype)0};
  const size_t shape[1] = {n};
  for (int a = 0; a < 2; a++) {
    unsigned char *raw = tu_malloc(n * 2 + 64);
    void *host = raw + (32 - (uintptr_t)raw % 32) % 32 + (a ? 16 : 8);
    cl_int e;
    cl_mem hb = clCreateBuffer(rumus_ctx_cl_context(ctx),
                               CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                               n * 2, host, &e);
    ck_assert_int_eq(e, CL_SUCCESS);
    rumus_tensor *p = NULL;
    TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F16, 1, shape, hb, 0, &p));
    rumus_tensor *g = tu_tensor_typed(ctx, RUMUS_F16, 1, shape, NULL),
                 *b = tu_tensor_typed(ctx, RUMUS_F16, 1, shape, NULL);
    const run_tensors t = {p, g, b, NULL, NULL};
    sgd_run_typed(ctx, &SGD_CASES[2], ty, n, t, NULL, 70 + (uint64_t)a);
    TU_OK(ctx, rumus_ctx_sync(ctx));
    rumus_tensor_free(p);
    rumus_tensor_free(g);
    rumus_tensor_free(b);
    clReleaseMemObject(hb);
    free(raw);
  }
}

/* An F16 and a BF16 gradient at offsets 3 and 5: the sum of squares of
 * the first into an accumulator at offset 1, then both clipped to a
 * quarter of their norm, the total at offset 5; both variants. */
static void odd_norms(rumus_ctx *ctx, size_t n) {
  tu_rng r;
  tu_rng_seed(&r, 80);
  float *x = tu_malloc(2 * n * sizeof *x), *y;
  tu_fill_uniform(&r, x, 2 * n, -1, 1);
  tu_round_to(RUMUS_F16, x, n);
  tu_round_to(RUMUS_BF16, x + n, n);
  double s16 = 0.0, sum = 0.0;
  for (size_t i = 0; i < 2 * n; i++) {
    sum += (double)x[i] * x[i];
    if (i + 1 == n) s16 = sum;
  }
  const double total = sqrt(sum), c = 0.25 * total / (total + 1e-6);
  double *want = tu_malloc(2 * n * sizeof *want);
  for (size_t i = 0; i < 2 * n; i++) want[i] = x[i] * c;
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    odd_tensor a = odd_make_typed(ctx, RUMUS_F16, n, 3),
               b = odd_make_typed(ctx, RUMUS_BF16, n, 5),
               acc = odd_make(ctx, 1, 1), tn = odd_make(ctx, 1, 5);
    TU_OK(ctx, rumus_tensor_upload_f32(a.t, x, n));
    TU_OK(ctx, rumus_tensor_upload_f32(b.t, x + n, n));
    TU_OK(ctx, rumus_tensor_fill(acc.t, 0.0f));
    TU_OK(ctx, rumus_sum_squares(ctx, a.t, acc.t));
    rumus_tensor *gs[2] = {a.t, b.t};
    TU_OK(ctx, rumus_clip_grad_norm(ctx, gs, 2, (float)(0.25 * total), tn.t));
    float got;
    TU_OK(ctx, rumus_tensor_download(acc.t, &got, sizeof got));
    tu_check_close("sum_squares_odd_f16", &got, &s16, 1, 0.0, 1e-5);
    TU_OK(ctx, rumus_tensor_download(tn.t, &got, sizeof got));
    tu_check_close("clip_odd_total", &got, &total, 1, 0.0, 1e-5);
    y = tu_download_f32(ctx, a.t);
    tu_check_close("clip_odd_f16", y, want, n, 1e-9 + tu_store_atol(RUMUS_F16),
                   1e-5 + tu_store_rtol(RUMUS_F16));
    free(y);
    y = tu_download_f32(ctx, b.t);
    tu_check_close("clip_odd_bf16", y, want + n, n, 1e-9,
                   1e-5 + tu_store_rtol(RUMUS_BF16));
    free(y);
    odd_check_free(ctx, &a);
    odd_check_free(ctx, &b);
    odd_check_free(ctx, &acc);
    odd_check_free(ctx, &tn);
  }
  free(x);
  free(want);
}

START_TEST(steps_unaligned_typed) {
  rumus_ctx *ctx = tu_ctx();
  odd_runs(ctx, 1003);
  host_ptr_f16_runs(ctx, 1003);
  odd_norms(ctx, 1003);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The skip flag computed on the device, on both variants: the sum of
 * squares of F16 gradients (accumulator zeroed first) and the total norm
 * of a clip are inf or NaN when one gradient element is, and the steps
 * given that flag then write nothing; finite gradients give a finite
 * flag, and the steps run as without one. */
START_TEST(skip_flag_from_norms) {
  static const float BAD[] = {INFINITY, NAN, 0.0f}; /* 0: all finite */
  const run_types ty = {RUMUS_F32, RUMUS_F16, RUMUS_F16};
  rumus_ctx *ctx = tu_ctx();
  size_t one = 1;
  rumus_tensor *flag = tu_tensor(ctx, RUMUS_F32, 1, &one, NULL);
  const rumus_grad_scaling sc = {1.0f / 512, flag};
  tu_rng r;
  tu_rng_seed(&r, 4400);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int k = 0; k < 3; k++) {
      for (int clip = 0; clip < 2; clip++) {
        twins w = twins_make(ctx, ty, &r);
        float *g = tu_download_f32(ctx, w.t[0][1]);
        g[500] = BAD[k] != 0.0f ? BAD[k] : g[500];
        for (int s = 0; s < 2; s++)
          TU_OK(ctx, rumus_tensor_upload_f32(w.t[s][1], g, TWIN_N));
        free(g);
        rumus_tensor *gs[1] = {w.t[0][1]};
        TU_OK(ctx, rumus_tensor_fill(flag, 0.0f));
        if (clip)
          TU_OK(ctx, rumus_clip_grad_norm(ctx, gs, 1, INFINITY, flag));
        else
          TU_OK(ctx, rumus_sum_squares(ctx, gs[0], flag));
        twins_steps(ctx, &w, 0, &sc);
        if (BAD[k] == 0.0f) { /* the same steps without the flag */
          const rumus_grad_scaling plain = {1.0f / 512, NULL};
          twins_steps(ctx, &w, 1, &plain);
        }
        float f;
        TU_OK(ctx, rumus_tensor_download(flag, &f, sizeof f));
        ck_assert_msg(BAD[k] == 0.0f ? isfinite(f) : !isfinite(f),
                      "flag %g for %g in a gradient", f, BAD[k]);
        twins_same(ctx, &w, clip ? 1 : -1, "skip_flag_from_norms");
        twins_free(&w);
      }
    }
  }
  tu_free_all(ctx, flag, NULL);
}
END_TEST

/* Empty tensors: the ops return RUMUS_OK and touch nothing; clipping only
 * empty gradients gives a total norm of 0, and empty gradients among
 * others are skipped. */
START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  size_t s0[1] = {0}, s2[2] = {4, 0}, one = 1;
  rumus_tensor *e0 = tu_tensor(ctx, RUMUS_F32, 1, s0, NULL),
               *e1 = tu_tensor(ctx, RUMUS_F32, 1, s0, NULL),
               *e2 = tu_tensor(ctx, RUMUS_F32, 1, s0, NULL),
               *e3 = tu_tensor(ctx, RUMUS_F32, 1, s0, NULL),
               *f0 = tu_tensor(ctx, RUMUS_F32, 2, s2, NULL),
               *f1 = tu_tensor(ctx, RUMUS_F32, 2, s2, NULL),
               *acc = tu_tensor(ctx, RUMUS_F32, 1, &one, NULL);
  const rumus_sgd_params sp = {0.1f, 0.9f, 0.0f, 0.0f, 1};
  const rumus_adam_params ap = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  TU_OK(ctx, rumus_sgd_step(ctx, &sp, 1, e0, e1, e2));
  TU_OK(ctx, rumus_adam_step(ctx, &ap, 3, e0, e1, e2, e3));
  TU_OK(ctx, rumus_tensor_fill(acc, 4.0f));
  TU_OK(ctx, rumus_sum_squares(ctx, f0, acc));
  float a;
  TU_OK(ctx, rumus_tensor_download(acc, &a, sizeof a));
  ck_assert_msg(a == 4.0f, "sum_squares of an empty tensor changed acc: %g", a);
  rumus_tensor *empties[2] = {e0, f1};
  TU_OK(ctx, rumus_clip_grad_norm(ctx, empties, 2, 1.0f, acc));
  TU_OK(ctx, rumus_clip_grad_norm(ctx, empties, 2, 1.0f, NULL));
  TU_OK(ctx, rumus_tensor_download(acc, &a, sizeof a));
  ck_assert_msg(a == 0.0f, "total norm of empty gradients: %g", a);
  /* An empty gradient between two others. */
  float g0[5] = {3, 0, 0, 0, 0}, g1[3] = {4, 0, 0}, out[5];
  rumus_tensor *t0 = vec(ctx, 5, g0), *t1 = vec(ctx, 3, g1);
  rumus_tensor *mixed[3] = {t0, e0, t1};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_tensor_upload(t0, g0, sizeof g0));
    TU_OK(ctx, rumus_tensor_upload(t1, g1, sizeof g1));
    TU_OK(ctx, rumus_clip_grad_norm(ctx, mixed, 3, 1.0f, acc));
    TU_OK(ctx, rumus_tensor_download(acc, &a, sizeof a));
    ck_assert_msg(a == 5.0f, "total norm %g, want 5", a);
    TU_OK(ctx, rumus_tensor_download(t0, out, sizeof g0));
    const double c = 1.0 / (5.0 + 1e-6);
    double want0[5] = {3 * c, 0, 0, 0, 0};
    tu_check_close("clip_mixed_grad0", out, want0, 5, 1e-9, 1e-6);
    TU_OK(ctx, rumus_tensor_download(t1, out, sizeof g1));
    double want1[3] = {4 * c, 0, 0};
    tu_check_close("clip_mixed_grad1", out, want1, 3, 1e-9, 1e-6);
  }
  tu_free_all(ctx, e0, e1, e2, e3, f0, f1, acc, t0, t1, NULL);
}
END_TEST

/* A NaN or infinite gradient: the total is NaN / inf, as in PyTorch
 * (error_if_nonfinite = False); the coefficient is NaN / 0. */
START_TEST(clip_nonfinite) {
  rumus_ctx *ctx = tu_ctx();
  float g[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, out[9], total;
  rumus_tensor *t = vec(ctx, 9, NULL), *tn = vec(ctx, 1, NULL);
  rumus_tensor *gs[1] = {t};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    g[4] = NAN;
    TU_OK(ctx, rumus_tensor_upload(t, g, sizeof g));
    TU_OK(ctx, rumus_clip_grad_norm(ctx, gs, 1, 1.0f, tn));
    TU_OK(ctx, rumus_tensor_download(tn, &total, sizeof total));
    TU_OK(ctx, rumus_tensor_download(t, out, sizeof out));
    ck_assert_msg(isnan(total), "total %g, want NaN", total);
    for (int i = 0; i < 9; i++) ck_assert_msg(isnan(out[i]), "g[%d] = %g, want NaN", i, out[i]);
    g[4] = INFINITY;
    TU_OK(ctx, rumus_tensor_upload(t, g, sizeof g));
    TU_OK(ctx, rumus_clip_grad_norm(ctx, gs, 1, 1.0f, tn));
    TU_OK(ctx, rumus_tensor_download(tn, &total, sizeof total));
    TU_OK(ctx, rumus_tensor_download(t, out, sizeof out));
    ck_assert_msg(isinf(total), "total %g, want inf", total);
    for (int i = 0; i < 9; i++)
      ck_assert_msg(i == 4 ? isnan(out[i]) : out[i] == 0.0f, "g[%d] = %g", i, out[i]);
  }
  tu_free_all(ctx, t, tn, NULL);
}
END_TEST

/* ---- errors ------------------------------------------------------------------ */

START_TEST(sgd_bad_input) {
  rumus_ctx *ctx = tu_ctx();
  size_t s[2] = {4, 8}, s2[2] = {4, 9};
  rumus_tensor *p = tu_tensor(ctx, RUMUS_F32, 2, s, NULL), *g = tu_tensor(ctx, RUMUS_F32, 2, s, NULL),
               *b = tu_tensor(ctx, RUMUS_F32, 2, s, NULL), *z = tu_tensor(ctx, RUMUS_F32, 2, s2, NULL),
               *i = tu_tensor(ctx, RUMUS_I32, 2, s, NULL);
  const rumus_sgd_params ok = {0.1f, 0.9f, 0.0f, 0.0f, 0};
  rumus_sgd_params q;
  TU_STATUS(RUMUS_ENULL, rumus_sgd_step(NULL, &ok, 1, p, g, b));
  TU_STATUS(RUMUS_ENULL, rumus_sgd_step(ctx, NULL, 1, p, g, b));
  TU_STATUS(RUMUS_ENULL, rumus_sgd_step(ctx, &ok, 1, NULL, g, b));
  TU_STATUS(RUMUS_ENULL, rumus_sgd_step(ctx, &ok, 1, p, NULL, b));
  TU_STATUS(RUMUS_ENULL, rumus_sgd_step(ctx, &ok, 1, p, g, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_sgd_step(ctx, &ok, 1, i, g, b));
  TU_STATUS(RUMUS_EDTYPE, rumus_sgd_step(ctx, &ok, 1, p, i, b));
  TU_STATUS(RUMUS_EDTYPE, rumus_sgd_step(ctx, &ok, 1, p, g, i));
  TU_STATUS(RUMUS_ESHAPE, rumus_sgd_step(ctx, &ok, 1, p, z, b));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[4, 8]") && strstr(rumus_ctx_errmsg(ctx), "[4, 9]"),
                "message names the shapes: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_sgd_step(ctx, &ok, 1, p, g, z));
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &ok, 0, p, g, b));
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &ok, -3, p, g, b));
  q = ok, q.lr = -0.1f;
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &q, 1, p, g, b));
  q = ok, q.lr = NAN;
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &q, 1, p, g, b));
  q = ok, q.momentum = -0.5f;
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &q, 1, p, g, b));
  q = ok, q.weight_decay = -1e-4f;
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &q, 1, p, g, b));
  q = ok, q.nesterov = 1, q.dampening = 0.1f;
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &q, 1, p, g, b));
  q = ok, q.nesterov = 1, q.momentum = 0.0f;
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &q, 1, p, g, NULL));
  /* Without momentum the buffer may be NULL. */
  q = ok, q.momentum = 0.0f;
  TU_OK(ctx, rumus_sgd_step(ctx, &q, 1, p, g, NULL));
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 2, s, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &ok, 1, p, o, b));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, p, g, b, z, i, NULL);
}
END_TEST

START_TEST(adam_bad_input) {
  rumus_ctx *ctx = tu_ctx();
  size_t s[1] = {10}, s2[1] = {11};
  rumus_tensor *p = tu_tensor(ctx, RUMUS_F32, 1, s, NULL), *g = tu_tensor(ctx, RUMUS_F32, 1, s, NULL),
               *m = tu_tensor(ctx, RUMUS_F32, 1, s, NULL), *v = tu_tensor(ctx, RUMUS_F32, 1, s, NULL),
               *z = tu_tensor(ctx, RUMUS_F32, 1, s2, NULL), *i = tu_tensor(ctx, RUMUS_I32, 1, s, NULL);
  const rumus_adam_params ok = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};
  rumus_adam_params q;
  TU_STATUS(RUMUS_ENULL, rumus_adam_step(NULL, &ok, 1, p, g, m, v));
  TU_STATUS(RUMUS_ENULL, rumus_adam_step(ctx, NULL, 1, p, g, m, v));
  TU_STATUS(RUMUS_ENULL, rumus_adam_step(ctx, &ok, 1, NULL, g, m, v));
  TU_STATUS(RUMUS_ENULL, rumus_adam_step(ctx, &ok, 1, p, NULL, m, v));
  TU_STATUS(RUMUS_ENULL, rumus_adam_step(ctx, &ok, 1, p, g, NULL, v));
  TU_STATUS(RUMUS_ENULL, rumus_adam_step(ctx, &ok, 1, p, g, m, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_adam_step(ctx, &ok, 1, i, g, m, v));
  TU_STATUS(RUMUS_EDTYPE, rumus_adam_step(ctx, &ok, 1, p, i, m, v));
  TU_STATUS(RUMUS_EDTYPE, rumus_adam_step(ctx, &ok, 1, p, g, i, v));
  TU_STATUS(RUMUS_EDTYPE, rumus_adam_step(ctx, &ok, 1, p, g, m, i));
  TU_STATUS(RUMUS_ESHAPE, rumus_adam_step(ctx, &ok, 1, p, z, m, v));
  TU_STATUS(RUMUS_ESHAPE, rumus_adam_step(ctx, &ok, 1, p, g, z, v));
  TU_STATUS(RUMUS_ESHAPE, rumus_adam_step(ctx, &ok, 1, p, g, m, z));
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &ok, 0, p, g, m, v));
  q = ok, q.lr = -1e-3f;
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  q = ok, q.eps = -1e-8f;
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  q = ok, q.beta1 = 1.0f;
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  q = ok, q.beta1 = -0.1f;
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  q = ok, q.beta2 = 1.0f;
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  q = ok, q.beta2 = NAN;
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  q = ok, q.weight_decay = -0.01f;
  TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  /* The limits PyTorch accepts. */
  q = ok, q.lr = 0.0f, q.eps = 0.0f, q.beta1 = 0.0f, q.beta2 = 0.0f;
  TU_OK(ctx, rumus_adam_step(ctx, &q, 1, p, g, m, v));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, p, g, m, v, z, i, NULL);
}
END_TEST

START_TEST(norm_bad_input) {
  rumus_ctx *ctx = tu_ctx();
  size_t s[1] = {10}, s2[1] = {2}, one = 1;
  float x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, back[10];
  rumus_tensor *a = vec(ctx, 10, x), *b = vec(ctx, 10, x), *acc = vec(ctx, 1, NULL),
               *two = tu_tensor(ctx, RUMUS_F32, 1, s2, NULL), *i = tu_tensor(ctx, RUMUS_I32, 1, s, NULL),
               *i1 = tu_tensor(ctx, RUMUS_I32, 1, &one, NULL);
  TU_STATUS(RUMUS_ENULL, rumus_sum_squares(NULL, a, acc));
  TU_STATUS(RUMUS_ENULL, rumus_sum_squares(ctx, NULL, acc));
  TU_STATUS(RUMUS_ENULL, rumus_sum_squares(ctx, a, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_sum_squares(ctx, i, acc));
  TU_STATUS(RUMUS_EDTYPE, rumus_sum_squares(ctx, a, i1));
  TU_STATUS(RUMUS_ESHAPE, rumus_sum_squares(ctx, a, two));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "acc") && strstr(rumus_ctx_errmsg(ctx), "[2]"),
                "message names the argument and shape: %s", rumus_ctx_errmsg(ctx));

  rumus_tensor *gs[3] = {a, b, NULL};
  TU_STATUS(RUMUS_ENULL, rumus_clip_grad_norm(NULL, gs, 2, 1.0f, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_clip_grad_norm(ctx, NULL, 2, 1.0f, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_clip_grad_norm(ctx, gs, 0, 1.0f, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_clip_grad_norm(ctx, gs, 2, 0.0f, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_clip_grad_norm(ctx, gs, 2, -1.0f, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_clip_grad_norm(ctx, gs, 2, NAN, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_clip_grad_norm(ctx, gs, 3, 1.0f, NULL));
  gs[2] = i;
  TU_STATUS(RUMUS_EDTYPE, rumus_clip_grad_norm(ctx, gs, 3, 1.0f, NULL));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "grads[2]"), "message names the gradient: %s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_clip_grad_norm(ctx, gs, 2, 1.0f, two));
  TU_STATUS(RUMUS_EDTYPE, rumus_clip_grad_norm(ctx, gs, 2, 1.0f, i1));
  /* Nothing was enqueued by the failed calls: the gradients are intact. */
  TU_OK(ctx, rumus_tensor_download(a, back, sizeof back));
  ck_assert(memcmp(back, x, sizeof x) == 0);
  TU_OK(ctx, rumus_tensor_download(b, back, sizeof back));
  ck_assert(memcmp(back, x, sizeof x) == 0);
  tu_free_all(ctx, a, b, acc, two, i, i1, NULL);
}
END_TEST

/* Type rules, param_copy, the scaling and their overlaps: exact codes, and
 * messages that name the argument. */
START_TEST(typed_bad_input) {
  rumus_ctx *ctx = tu_ctx();
  size_t s[1] = {16}, s2[1] = {17}, one = 1, two = 2;
  rumus_tensor *p16 = tu_tensor(ctx, RUMUS_F16, 1, s, NULL),
               *g16 = tu_tensor(ctx, RUMUS_F16, 1, s, NULL),
               *m16 = tu_tensor(ctx, RUMUS_F16, 1, s, NULL),
               *v16 = tu_tensor(ctx, RUMUS_F16, 1, s, NULL),
               *p32 = tu_tensor(ctx, RUMUS_F32, 1, s, NULL),
               *m32 = tu_tensor(ctx, RUMUS_F32, 1, s, NULL),
               *v32 = tu_tensor(ctx, RUMUS_F32, 1, s, NULL),
               *mbf = tu_tensor(ctx, RUMUS_BF16, 1, s, NULL),
               *c17 = tu_tensor(ctx, RUMUS_BF16, 1, s2, NULL),
               *i32 = tu_tensor(ctx, RUMUS_I32, 1, s, NULL),
               *f1 = tu_tensor(ctx, RUMUS_F32, 1, &one, NULL),
               *h1 = tu_tensor(ctx, RUMUS_F16, 1, &one, NULL),
               *f2 = tu_tensor(ctx, RUMUS_F32, 1, &two, NULL);
  const rumus_sgd_params sp = {0.1f, 0.9f, 0.0f, 0.0f, 0};
  const rumus_adam_params ap = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};
  rumus_grad_scaling sc = {1.0f, NULL};
  /* The state has param's type; grad and the copy any floating type. */
  TU_STATUS(RUMUS_EDTYPE, rumus_sgd_step(ctx, &sp, 1, p16, g16, m32));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "momentum_buf is f32") &&
                    strstr(rumus_ctx_errmsg(ctx), "param's type, f16"),
                "message names the types: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EDTYPE, rumus_adam_step(ctx, &ap, 1, p32, g16, m32, mbf));
  TU_STATUS(RUMUS_EDTYPE, rumus_adam_step(ctx, &ap, 1, p16, g16, m32, v16));
  TU_STATUS(RUMUS_EDTYPE, rumus_sgd_step(ctx, &sp, 1, p16, i32, m16));
  TU_STATUS(RUMUS_EDTYPE,
            rumus_sgd_step_ex(ctx, &sp, 1, p16, g16, m16, i32, NULL));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "param_copy"),
                "message names the copy: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_adam_step_ex(ctx, &ap, 1, p16, g16, m16, v16, c17, NULL));
  /* The skip flag: one F32 element. */
  sc.skip_if_nonfinite = h1;
  TU_STATUS(RUMUS_EDTYPE,
            rumus_sgd_step_ex(ctx, &sp, 1, p16, g16, m16, NULL, &sc));
  sc.skip_if_nonfinite = f2;
  TU_STATUS(RUMUS_ESHAPE,
            rumus_adam_step_ex(ctx, &ap, 1, p16, g16, m16, v16, NULL, &sc));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "skip_if_nonfinite"),
                "message names the flag: %s", rumus_ctx_errmsg(ctx));
  /* inv_scale finite and > 0. */
  static const float BAD_SCALE[] = {0.0f, -1.0f, INFINITY, NAN};
  sc.skip_if_nonfinite = f1;
  for (int i = 0; i < 4; i++) {
    sc.inv_scale = BAD_SCALE[i];
    TU_STATUS(RUMUS_EINVAL,
              rumus_sgd_step_ex(ctx, &sp, 1, p16, g16, m16, NULL, &sc));
    TU_STATUS(RUMUS_EINVAL,
              rumus_adam_step_ex(ctx, &ap, 1, p16, g16, m16, v16, NULL, &sc));
  }
  /* No two tensors share memory, the copy and the flag included. */
  sc.inv_scale = 1.0f;
  TU_STATUS(RUMUS_EINVAL,
            rumus_sgd_step_ex(ctx, &sp, 1, p16, g16, m16, p16, NULL));
  TU_STATUS(RUMUS_EINVAL,
            rumus_adam_step_ex(ctx, &ap, 1, p16, g16, m16, v16, g16, NULL));
  TU_STATUS(RUMUS_EINVAL,
            rumus_adam_step_ex(ctx, &ap, 1, p16, g16, m16, v16, v16, NULL));
  /* The accumulators and the total norm stay F32. */
  TU_STATUS(RUMUS_EDTYPE, rumus_sum_squares(ctx, g16, h1));
  rumus_tensor *gs[2] = {g16, p32};
  TU_STATUS(RUMUS_EDTYPE, rumus_clip_grad_norm(ctx, gs, 2, 1.0f, h1));
  gs[1] = i32;
  TU_STATUS(RUMUS_EDTYPE, rumus_clip_grad_norm(ctx, gs, 2, 1.0f, NULL));
  /* The valid calls of the same tensors. */
  sc.skip_if_nonfinite = f1;
  TU_OK(ctx, rumus_tensor_fill(f1, 0.0f));
  TU_OK(ctx, rumus_sgd_step_ex(ctx, &sp, 1, p16, g16, m16, mbf, &sc));
  TU_OK(ctx, rumus_adam_step_ex(ctx, &ap, 1, p32, g16, m32, v32, p16, NULL));
  TU_OK(ctx, rumus_sum_squares(ctx, g16, f1));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, p16, g16, m16, v16, p32, m32, v32, mbf, c17, i32, f1, h1,
              f2, NULL);
}
END_TEST

/* Views of one buffer: a copy or a flag inside another tensor's bytes. */
START_TEST(typed_overlap) {
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              4096, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  size_t s[1] = {64}, one = 1;
  rumus_tensor *p, *g, *m, *c, *flag;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, s, buf, 0, &p));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F16, 1, s, buf, 256, &g));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, s, buf, 1024, &m));
  /* An F16 copy from byte 200: its last 72 bytes are param's. */
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F16, 1, s, buf, 2048 - 1848, &c));
  /* A flag at byte 1028: inside m. */
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, &one, buf, 1028, &flag));
  const rumus_sgd_params sp = {0.1f, 0.9f, 0.0f, 0.0f, 0};
  const rumus_grad_scaling sc = {1.0f, flag};
  TU_STATUS(RUMUS_EINVAL,
            rumus_sgd_step_ex(ctx, &sp, 1, p, g, m, c, NULL));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "param_copy"),
                "message names the copy: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EINVAL,
            rumus_sgd_step_ex(ctx, &sp, 1, p, g, m, NULL, &sc));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "skip_if_nonfinite"),
                "message names the flag: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EINVAL, rumus_sum_squares(ctx, m, flag));
  tu_free_all(ctx, p, g, m, c, flag, NULL);
  clReleaseMemObject(buf);
}
END_TEST

int main(void) {
  Suite *s = suite_create("optim");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, sgd_steps, 0, (int)NSGD);
  tcase_add_loop_test(core, adam_steps, 0, (int)NADAM);
  tcase_add_loop_test(core, sum_squares_sizes, 0, 3);
  tcase_add_test(core, clip_grad_norm_clips);
  tcase_add_test(core, clip_grad_norm_no_clip);
  tcase_add_test(core, clip_grad_norm_many_partials);
  tcase_add_test(core, clip_grad_norm_typed);
  tcase_add_loop_test(core, typed_steps, 0, (int)NTYPED);
  tcase_add_test(core, scaled_steps);
  tcase_add_test(core, scaled_steps_exact);
  tcase_add_test(core, skipped_steps);
  tcase_add_loop_test(core, sum_squares_typed, 0, 2);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, steps_guarded);
  tcase_add_test(limits, steps_unaligned);
  tcase_add_test(limits, steps_unaligned_typed);
  tcase_add_test(limits, skip_flag_from_norms);
  tcase_add_test(limits, empty_tensors);
  tcase_add_test(limits, clip_nonfinite);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, sgd_bad_input);
  tcase_add_test(errors, adam_bad_input);
  tcase_add_test(errors, norm_bad_input);
  tcase_add_test(errors, typed_bad_input);
  tcase_add_test(errors, typed_overlap);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
