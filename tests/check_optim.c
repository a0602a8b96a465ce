/*
 * check_optim.c - SGD, Adam / AdamW, sum of squares and gradient-norm
 * clipping against the float64 references (ref/optim.c and plain double
 * sums here).  The optimizer tests run STEPS consecutive steps with fresh
 * random gradients; the reference keeps its state in double and is fed the
 * same float gradients, and every step is compared (parameters and state).
 *
 * Tolerances (|got - want| <= atol + rtol |want|), s = step number 1..5:
 *   SGD param, momentum buffer   atol 5e-7 s, rtol 1e-6 s
 *   Adam param                   atol 5e-7 s, rtol 1e-6 s
 *   Adam m                       atol 1e-7 s, rtol 1e-6 s
 *   Adam v                       atol 1e-8 s, rtol 2e-6 s
 *     (float rounding of a few operations per step on values of order 1,
 *     carried from step to step through the state: linear growth)
 *   sum of squares               rtol 1e-5 (float partials over chunks of
 *                                4096, pairwise tree: a few 1e-6 at most)
 *   clip total norm              rtol 1e-5
 *   clipped gradients            atol 1e-9, rtol 1e-5 (coefficient from the
 *                                float total)
 *   no clipping (coefficient 1)  bit for bit
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

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

static void check_tensor(rumus_ctx *ctx, const rumus_tensor *t,
                         const double *want, size_t n, double atol,
                         double rtol, const char *what) {
  float *got = tu_download(ctx, t);
  tu_check_close(what, got, want, n, atol, rtol);
  free(got);
}

/* STEPS SGD steps on tensors of n elements (b may be NULL without
 * momentum), compared after every step. */
static void sgd_run(rumus_ctx *ctx, const sgd_case *c, size_t n,
                    rumus_tensor *tp, rumus_tensor *tg, rumus_tensor *tb,
                    uint64_t seed) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  float *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
  tu_fill_uniform(&r, x, n, -1, 1);
  TU_OK(ctx, rumus_tensor_upload(tp, x, n * sizeof *x));
  double *pd = to_double(x, n), *bd = calloc(n, sizeof *bd);
  for (long s = 1; s <= STEPS; s++) {
    tu_fill_uniform(&r, g, n, -1, 1);
    TU_OK(ctx, rumus_tensor_upload(tg, g, n * sizeof *g));
    double *gd = to_double(g, n);
    ref_sgd_step(c->p.lr, c->p.momentum, c->p.dampening, c->p.weight_decay,
                 c->p.nesterov, s, n, pd, gd, bd);
    free(gd);
    TU_OK(ctx, rumus_sgd_step(ctx, &c->p, s, tp, tg, tb));
    char what[96];
    snprintf(what, sizeof what, "sgd_%s_f32_%zu_step%ld_param", c->name, n, s);
    check_tensor(ctx, tp, pd, n, 5e-7 * s, 1e-6 * s, what);
    if (c->p.momentum != 0.0f) {
      snprintf(what, sizeof what, "sgd_%s_f32_%zu_step%ld_buf", c->name, n, s);
      check_tensor(ctx, tb, bd, n, 5e-7 * s, 1e-6 * s, what);
    }
  }
  free(x);
  free(g);
  free(pd);
  free(bd);
}

static void adam_run(rumus_ctx *ctx, const adam_case *c, size_t n,
                     rumus_tensor *tp, rumus_tensor *tg, rumus_tensor *tm,
                     rumus_tensor *tv, uint64_t seed) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  float *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
  tu_fill_uniform(&r, x, n, -1, 1);
  TU_OK(ctx, rumus_tensor_upload(tp, x, n * sizeof *x));
  TU_OK(ctx, rumus_tensor_fill(tm, 0.0f));
  TU_OK(ctx, rumus_tensor_fill(tv, 0.0f));
  double *pd = to_double(x, n), *md = calloc(n, sizeof *md),
         *vd = calloc(n, sizeof *vd);
  for (long s = 1; s <= STEPS; s++) {
    tu_fill_uniform(&r, g, n, -1, 1);
    TU_OK(ctx, rumus_tensor_upload(tg, g, n * sizeof *g));
    double *gd = to_double(g, n);
    ref_adam_step(c->p.lr, c->p.beta1, c->p.beta2, c->p.eps,
                  c->p.weight_decay, c->p.decoupled, s, n, pd, gd, md, vd);
    free(gd);
    TU_OK(ctx, rumus_adam_step(ctx, &c->p, s, tp, tg, tm, tv));
    char what[96];
    snprintf(what, sizeof what, "%s_f32_%zu_step%ld_param", c->name, n, s);
    check_tensor(ctx, tp, pd, n, 5e-7 * s, 1e-6 * s, what);
    snprintf(what, sizeof what, "%s_f32_%zu_step%ld_m", c->name, n, s);
    check_tensor(ctx, tm, md, n, 1e-7 * s, 1e-6 * s, what);
    snprintf(what, sizeof what, "%s_f32_%zu_step%ld_v", c->name, n, s);
    check_tensor(ctx, tv, vd, n, 1e-8 * s, 2e-6 * s, what);
  }
  free(x);
  free(g);
  free(pd);
  free(md);
  free(vd);
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

static void clip_case_shapes(rumus_ctx *ctx, double ratio, int with_total,
                             uint64_t seed, const size_t (*shapes)[2]) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  float *g[NG];
  size_t len[NG];
  double sum = 0.0;
  for (int i = 0; i < NG; i++) {
    len[i] = shapes[i][0] * shapes[i][1];
    g[i] = malloc(len[i] * sizeof(float));
    tu_fill_uniform(&r, g[i], len[i], -1, 1);
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
      tg[i] = tu_guarded_tensor(ctx, RUMUS_F32, 2, shapes[i], g[i]);
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
      float *got = tu_download(ctx, ts[i]);
      snprintf(what, sizeof what, "clip_%s_ratio%g_grad%d", tu_variant_name(tu_variants[v]), ratio, i);
      if (coef >= 1.0) {
        ck_assert_msg(memcmp(got, g[i], len[i] * sizeof(float)) == 0,
                      "%s: changed without clipping", what);
      } else {
        double *want = malloc(len[i] * sizeof *want);
        for (size_t j = 0; j < len[i]; j++) want[j] = g[i][j] * coef;
        tu_check_close(what, got, want, len[i], 1e-9, 1e-5);
        for (size_t j = 0; j < len[i]; j++) after += (double)got[j] * got[j];
        free(want);
      }
      free(got);
      tu_guarded_check_free(ctx, &tg[i]);
    }
    if (coef < 1.0) /* clipping really happened: the norm is now max_norm */
      ck_assert_msg(fabs(sqrt(after) - max_norm) <= 1e-5 * max_norm,
                    "norm after clipping %.9g, max_norm %.9g", sqrt(after), max_norm);
    tu_guarded_check_free(ctx, &tn);
  }
  for (int i = 0; i < NG; i++) free(g[i]);
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
    tu_guarded_check_free(ctx, &p);
    tu_guarded_check_free(ctx, &g);
    tu_guarded_check_free(ctx, &b);
  }
  for (int k = 1; k <= 3; k += 2) { /* adam_wd, adamw_wd */
    const adam_case *c = &ADAM_CASES[k];
    tu_guarded p = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               g = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               m = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL),
               v = tu_guarded_tensor(ctx, RUMUS_F32, 2, shape, NULL);
    adam_run(ctx, c, n, p.t, g.t, m.t, v.t, 32 + (uint64_t)k);
    tu_guarded_check_free(ctx, &p);
    tu_guarded_check_free(ctx, &g);
    tu_guarded_check_free(ctx, &m);
    tu_guarded_check_free(ctx, &v);
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

/* A tensor of n elements at an element offset that is not a multiple of
 * 8 (the kernels' unaligned path), with guard floats on both sides. */
typedef struct {
  rumus_tensor *t;
  cl_mem buf;
  size_t off, n;
} odd_tensor;
#define ODD_GUARD 64

static odd_tensor odd_make(rumus_ctx *ctx, size_t n, size_t off) {
  odd_tensor o = {NULL, NULL, off, n};
  const size_t total = off + n + ODD_GUARD;
  unsigned char *host = malloc(total * sizeof(float));
  ck_assert_ptr_nonnull(host);
  memset(host, 0xA5, total * sizeof(float));
  cl_int e;
  o.buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                         total * sizeof(float), host, &e);
  free(host);
  ck_assert_int_eq(e, CL_SUCCESS);
  size_t shape[1] = {n};
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, shape, o.buf, off * sizeof(float), &o.t));
  return o;
}

static void odd_check_free(rumus_ctx *ctx, odd_tensor *o) {
  const size_t total = o->off + o->n + ODD_GUARD;
  unsigned char *host = malloc(total * sizeof(float));
  ck_assert_ptr_nonnull(host);
  ck_assert_int_eq(clEnqueueReadBuffer(rumus_ctx_cl_queue(ctx), o->buf, CL_TRUE, 0,
                                       total * sizeof(float), host, 0, NULL, NULL),
                   CL_SUCCESS);
  for (size_t i = 0; i < o->off * sizeof(float); i++)
    ck_assert_msg(host[i] == 0xA5, "guard byte %zu before the tensor overwritten", i);
  for (size_t i = (o->off + o->n) * sizeof(float); i < total * sizeof(float); i++)
    ck_assert_msg(host[i] == 0xA5, "guard byte %zu after the tensor overwritten", i);
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

int main(void) {
  Suite *s = suite_create("optim");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, sgd_steps, 0, (int)NSGD);
  tcase_add_loop_test(core, adam_steps, 0, (int)NADAM);
  tcase_add_loop_test(core, sum_squares_sizes, 0, 3);
  tcase_add_test(core, clip_grad_norm_clips);
  tcase_add_test(core, clip_grad_norm_no_clip);
  tcase_add_test(core, clip_grad_norm_many_partials);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, steps_guarded);
  tcase_add_test(limits, steps_unaligned);
  tcase_add_test(limits, empty_tensors);
  tcase_add_test(limits, clip_nonfinite);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, sgd_bad_input);
  tcase_add_test(errors, adam_bad_input);
  tcase_add_test(errors, norm_bad_input);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
