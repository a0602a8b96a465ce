/*
 * check_layernorm.c - layer norm and RMS norm over the last dimension,
 * forward (with and without the saved statistics) and backward (dx,
 * dgamma, dbeta), against the float64 reference, on both variants, every
 * storage type (gamma of F32 and of x's type), rows of 1, 7, 32, 129,
 * 1000, 4096 (a single row), 15001, 16384 and 16387 elements (the GPU
 * variant's register, fused and block kernels up to 8192, its wide
 * kernels up to 16384, at 15001 with work-items both with all their
 * groups inside the row and not, its strided kernels beyond), 3000 rows
 * of 64 (375 row blocks of the gamma / beta gradients: stage 2 by
 * groups of 64), a 3-D tensor;
 * affine and not; every tensor in a borrowed buffer at an odd element
 * offset with guard bytes, and at offset 0 (the aligned programs, 16-bit
 * rows in groups of 8); in place (the backward with and without
 * dgamma / dbeta); bits equal run to run, and dgamma /
 * dbeta equal across the variants; rows far from 0 (1000 + U(-1, 1));
 * NaN and infinity confined to their rows; empty tensors; backward by
 * central finite differences of the float64 forward; bad arguments with
 * exact statuses.
 *
 * Tolerances (|got - want| <= atol + rtol |want|), F32 storage, x in
 * [-3, 5), dy in [-1, 1), gamma in [0.5, 2), beta in [-1, 1); the float
 * row sums carry an error growing with C, hence the C-dependent terms:
 *   mean               atol 1e-6 + 1e-9 C
 *   rstd, rrms         rtol 1e-5 + 1e-9 C
 *   y                  atol 3e-5 + 2e-9 C, rtol 3e-5
 *   dx                 atol 3e-5 + 2e-9 C, rtol 1e-4
 *   dgamma, dbeta      4e-6 * sum_r |dy| w + 1e-6 (float column sums;
 *                      w = 4 for dgamma, above |xhat| < sqrt(3) of
 *                      uniform rows, 1 for dbeta)
 *   against central differences of the float64 forward (h = 1e-2 on the
 *   float inputs)      atol 1e-3, rtol 1e-2
 * F16 and BF16 storage of x, y, dy, dx (and of gamma, beta and their
 * gradients when of x's type): the reference takes the inputs as stored,
 * and storing a result adds half an ulp of its type (tu_store_rtol /
 * tu_store_atol).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

#define EPS 1e-5

typedef struct {
  size_t rows, cols;
} shp;

static const shp SHAPES[] = {{5, 1},    {3, 7},     {4, 32},
                             {3, 129},  {5, 1000},  {1, 4096},
                             {2, 16384}, {3000, 64}, {203, 257},
                             {2, 16387}, {4500, 33},  {2, 15001}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* A guarded tensor (tu_guarded_check_free checks it) whose data starts
 * `off` elements past a 4096-byte guard: 3 (an odd element offset) but in
 * the aligned test. */
static tu_guarded g2(rumus_ctx *ctx, rumus_dtype d, const shp *s,
                     const float *data, size_t off) {
  const size_t shape[2] = {s->rows, s->cols};
  return tu_guarded_typed_odd(ctx, d, 2, shape, data, off);
}
static tu_guarded g1(rumus_ctx *ctx, rumus_dtype d, size_t n,
                     const float *data, size_t off) {
  return tu_guarded_typed_odd(ctx, d, 1, &n, data, off);
}

/* Inputs of a shape, as stored: x, dy in d; gamma, beta in pd; the
 * tensors' element offset (3 unless changed). */
typedef struct {
  const shp *s;
  rumus_dtype d, pd;
  size_t n;
  float *x, *dy, *gamma, *beta;
  size_t off;
} inputs;

static inputs make_inputs(const shp *s, rumus_dtype d, rumus_dtype pd,
                          uint64_t seed) {
  inputs in = {s, d, pd, s->rows * s->cols, NULL, NULL, NULL, NULL, 3};
  tu_rng r;
  tu_rng_seed(&r, seed);
  in.x = tu_malloc(in.n * sizeof(float));
  in.dy = tu_malloc(in.n * sizeof(float));
  in.gamma = tu_malloc(s->cols * sizeof(float));
  in.beta = tu_malloc(s->cols * sizeof(float));
  tu_fill_uniform(&r, in.x, in.n, -3.0f, 5.0f);
  tu_fill_uniform(&r, in.dy, in.n, -1.0f, 1.0f);
  tu_fill_uniform(&r, in.gamma, s->cols, 0.5f, 2.0f);
  tu_fill_uniform(&r, in.beta, s->cols, -1.0f, 1.0f);
  tu_round_to(d, in.x, in.n);
  tu_round_to(d, in.dy, in.n);
  tu_round_to(pd, in.gamma, s->cols);
  tu_round_to(pd, in.beta, s->cols);
  return in;
}

static void free_inputs(inputs *in) {
  free(in->x), free(in->dy), free(in->gamma), free(in->beta);
}

/* The tensors of one call. */
typedef struct {
  tu_guarded x, y, dy, dx, gamma, beta, mean, rstd, dg, db;
} ln_tensors;

static ln_tensors ln_make(rumus_ctx *ctx, const inputs *in) {
  const shp *s = in->s;
  ln_tensors t;
  const size_t o = in->off;
  t.x = g2(ctx, in->d, s, in->x, o);
  t.y = g2(ctx, in->d, s, NULL, o);
  t.dy = g2(ctx, in->d, s, in->dy, o);
  t.dx = g2(ctx, in->d, s, NULL, o);
  t.gamma = g1(ctx, in->pd, s->cols, in->gamma, o);
  t.beta = g1(ctx, in->pd, s->cols, in->beta, o);
  t.mean = g1(ctx, RUMUS_F32, s->rows, NULL, o);
  t.rstd = g1(ctx, RUMUS_F32, s->rows, NULL, o);
  t.dg = g1(ctx, in->pd, s->cols, NULL, o);
  t.db = g1(ctx, in->pd, s->cols, NULL, o);
  return t;
}

static void ln_free(rumus_ctx *ctx, ln_tensors *t) {
  tu_guarded *all[10] = {&t->x,    &t->y,    &t->dy,   &t->dx, &t->gamma,
                         &t->beta, &t->mean, &t->rstd, &t->dg, &t->db};
  for (int i = 0; i < 10; i++) tu_guarded_check_free(ctx, all[i]);
}

/* Forward then backward of one norm (rms 0: layer norm), gamma and beta
 * given when affine; the results against the reference. */
static void run_norm(rumus_ctx *ctx, const inputs *in, ln_tensors *t,
                     int rms, int affine, const char *tag) {
  const shp *s = in->s;
  const size_t n = in->n, R = s->rows, C = s->cols;
  const float *gm = affine ? in->gamma : NULL, *bt = affine ? in->beta : NULL;
  rumus_tensor *g = affine ? t->gamma.t : NULL, *b = affine ? t->beta.t : NULL;
  if (rms)
    TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, t->x.t, g, t->y.t, t->rstd.t));
  else
    TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t->x.t, g, b, t->y.t,
                                   t->mean.t, t->rstd.t));
  double *want = tu_malloc(n * 8), *wm = tu_malloc(R * 8),
         *ws = tu_malloc(R * 8), *wdg = tu_malloc(C * 8),
         *wdb = tu_malloc(C * 8), *bound = tu_malloc(C * 8);
  ref_layernorm_fwd(in->x, gm, bt, R, C, EPS, rms, want, wm, ws);
  char nm[128];
  const double at = 3e-5 + 2e-9 * (double)C + tu_store_atol(in->d);
  const double rt_ = tu_store_rtol(in->d);
  float *got = tu_download_f32(ctx, t->y.t);
  snprintf(nm, sizeof nm, "%s_y", tag);
  tu_check_close(nm, got, want, n, at, 3e-5 + rt_);
  free(got);
  if (!rms) {
    got = tu_download_f32(ctx, t->mean.t);
    snprintf(nm, sizeof nm, "%s_mean", tag);
    tu_check_close(nm, got, wm, R, 1e-6 + 1e-9 * (double)C, 0);
    free(got);
  }
  got = tu_download_f32(ctx, t->rstd.t);
  snprintf(nm, sizeof nm, "%s_rstd", tag);
  tu_check_close(nm, got, ws, R, 0, 1e-5 + 1e-9 * (double)C);
  free(got);
  if (rms)
    TU_OK(ctx, rumus_rmsnorm_bwd(ctx, t->dy.t, t->x.t, g, t->rstd.t, t->dx.t,
                                 t->dg.t));
  else
    TU_OK(ctx, rumus_layernorm_bwd(ctx, t->dy.t, t->x.t, g, t->mean.t,
                                   t->rstd.t, t->dx.t, t->dg.t, t->db.t));
  ref_layernorm_bwd(in->dy, in->x, gm, R, C, EPS, rms, want, wdg, wdb);
  got = tu_download_f32(ctx, t->dx.t);
  snprintf(nm, sizeof nm, "%s_dx", tag);
  tu_check_close(nm, got, want, n, at, 1e-4 + rt_);
  free(got);
  for (int k = 0; k < (rms ? 1 : 2); k++) {
    double *w = k ? wdb : wdg;
    for (size_t j = 0; j < C; j++) {
      double sum = 0;
      for (size_t r = 0; r < R; r++)
        sum += fabs(in->dy[r * C + j] * (k ? 1.0 : 4.0));
      bound[j] = 4e-6 * sum + 1e-6 + fabs(w[j]) * tu_store_rtol(in->pd) +
                 tu_store_atol(in->pd);
    }
    got = tu_download_f32(ctx, k ? t->db.t : t->dg.t);
    snprintf(nm, sizeof nm, "%s_%s", tag, k ? "dbeta" : "dgamma");
    tu_check_bound(nm, got, w, bound, C);
    free(got);
  }
  free(want), free(wm), free(ws), free(wdg), free(wdb), free(bound);
}

/* Every shape, both variants, both norms, with x of type tu_dtypes[_i]
 * and gamma F32 (every shape) and of x's type (16-bit, every other
 * shape); affine on even shapes, not on odd ones. */
START_TEST(shapes) {
  rumus_ctx *ctx = tu_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  for (size_t k = 0; k < NSHAPES; k++) {
    for (int pt = 0; pt < (d == RUMUS_F32 ? 1 : 2); pt++) {
      if (pt && k % 2) continue;
      inputs in = make_inputs(&SHAPES[k], d, pt ? d : RUMUS_F32, 100 + k);
      for (int v = 0; v < 2; v++) {
        tu_set_variant(ctx, tu_variants[v]);
        ln_tensors t = ln_make(ctx, &in);
        for (int rms = 0; rms < 2; rms++) {
          char tag[96];
          snprintf(tag, sizeof tag, "%s_%s_%s_p%s_%zux%zu",
                   rms ? "rmsnorm" : "layernorm", tu_dtype_name(d),
                   tu_variant_name(tu_variants[v]),
                   tu_dtype_name(in.pd), SHAPES[k].rows, SHAPES[k].cols);
          run_norm(ctx, &in, &t, rms, k % 2 == 0, tag);
        }
        ln_free(ctx, &t);
      }
      free_inputs(&in);
    }
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Aligned tensors (element offset 0) of x's type tu_dtypes[_i], rows of
 * multiples of 8: the GPU variant's aligned programs (RUMUS_ALIGN4; for
 * 16-bit rows RUMUS_ALIGN8, whose register kernels hold groups of 8) in
 * each kernel: rows of 40 (the _wgc forward with lanes past the row's
 * end, the _fused backward), 136 (the _blk backward with work-items past
 * the end), 384 and 1000 (_wgc and _blk, a last block of fewer rows),
 * 8192 (_blk at its largest) and 16384 (the wide kernels; the forward
 * also with its one-sum statistics); gamma F32 or x's type; both
 * variants, both norms, against the reference. */
START_TEST(aligned_rows) {
  static const shp S[] = {{5, 40},   {9, 136}, {300, 384},
                          {65, 1000}, {3, 8192}, {2, 16384}};
  rumus_ctx *ctx = tu_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
    const rumus_dtype pd = k % 2 && d != RUMUS_F32 ? d : RUMUS_F32;
    inputs in = make_inputs(&S[k], d, pd, 500 + k);
    in.off = 0;
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      ln_tensors t = ln_make(ctx, &in);
      for (int run = 0; run < (S[k].cols == 16384 ? 3 : 2); run++) {
        const int rms = run % 2;
        if (run == 2) setenv("RUMUS_LN_FWD_ONE", "1", 1);
        char tag[96];
        snprintf(tag, sizeof tag, "aligned_%s%s_%s_%s_p%s_%zux%zu",
                 rms ? "rmsnorm" : "layernorm", run == 2 ? "_one" : "",
                 tu_dtype_name(d), tu_variant_name(tu_variants[v]),
                 tu_dtype_name(pd), S[k].rows, S[k].cols);
        run_norm(ctx, &in, &t, rms, 1, tag);
        unsetenv("RUMUS_LN_FWD_ONE");
      }
      ln_free(ctx, &t);
    }
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* A 3-D x [2, 3, 7] with statistics of shape [2, 3], and the inference
 * forward (no statistics) giving the same y. */
START_TEST(three_d_and_inference) {
  rumus_ctx *ctx = tu_ctx();
  const size_t sh3[3] = {2, 3, 7}, sh2[2] = {2, 3}, c7[1] = {7};
  const shp s = {6, 7};
  inputs in = make_inputs(&s, RUMUS_F32, RUMUS_F32, 7);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 3, sh3, in.x);
    rumus_tensor *y = tu_tensor(ctx, RUMUS_F32, 3, sh3, NULL);
    rumus_tensor *y2 = tu_tensor(ctx, RUMUS_F32, 3, sh3, NULL);
    rumus_tensor *g = tu_tensor(ctx, RUMUS_F32, 1, c7, in.gamma);
    rumus_tensor *m = tu_tensor(ctx, RUMUS_F32, 2, sh2, NULL);
    rumus_tensor *r = tu_tensor(ctx, RUMUS_F32, 2, sh2, NULL);
    for (int rms = 0; rms < 2; rms++) {
      if (rms) {
        TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, x, g, y, r));
        TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, x, g, y2, NULL));
      } else {
        TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, x, g, NULL, y, m, r));
        TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, x, g, NULL, y2, NULL, NULL));
      }
      float *a = tu_download(ctx, y), *b = tu_download(ctx, y2);
      ck_assert(memcmp(a, b, in.n * sizeof(float)) == 0);
      double want[42];
      ref_layernorm_fwd(in.x, in.gamma, NULL, 6, 7, EPS, rms, want, NULL,
                        NULL);
      tu_check_close("3d_y", a, want, in.n, 3e-5, 3e-5);
      free(a), free(b);
    }
    rumus_tensor *all[6] = {x, y, y2, g, m, r};
    for (int i = 0; i < 6; i++) rumus_tensor_free(all[i]);
  }
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Finite differences -------------------------------------------------- */

/* L = sum dy * y(x, gamma, beta) in float64. */
static double fd_loss(const float *x, const float *gamma, const float *beta,
                      const float *dy, size_t R, size_t C, int rms) {
  double *y = tu_malloc(R * C * 8), l = 0;
  ref_layernorm_fwd(x, gamma, beta, R, C, EPS, rms, y, NULL, NULL);
  for (size_t i = 0; i < R * C; i++) l += dy[i] * y[i];
  free(y);
  return l;
}

/* Central difference of fd_loss in p[i] (one of its inputs), h = 1e-2. */
static double fd_at(float *p, size_t i, const inputs *in, int rms) {
  const size_t R = in->s->rows, C = in->s->cols;
  const float keep = p[i];
  p[i] = keep + 0.01f;
  const float hp = p[i] - keep;
  const double lp = fd_loss(in->x, in->gamma, in->beta, in->dy, R, C, rms);
  p[i] = keep - 0.01f;
  const float hm = keep - p[i];
  const double lm = fd_loss(in->x, in->gamma, in->beta, in->dy, R, C, rms);
  p[i] = keep;
  return (lp - lm) / ((double)hp + hm);
}

/* dx, dgamma, dbeta of both norms, both variants, against central
 * differences of the float64 forward, on 3 rows of 5 and 2 of 129. */
START_TEST(bwd_finite_differences) {
  rumus_ctx *ctx = tu_ctx();
  static const shp FD[] = {{3, 5}, {2, 129}};
  for (int k = 0; k < 2; k++) {
    inputs in = make_inputs(&FD[k], RUMUS_F32, RUMUS_F32, 31 + k);
    const size_t n = in.n, C = FD[k].cols;
    double *nx = tu_malloc(n * 8), *ng = tu_malloc(C * 8),
           *nb = tu_malloc(C * 8);
    for (int rms = 0; rms < 2; rms++) {
      for (size_t i = 0; i < n; i++) nx[i] = fd_at(in.x, i, &in, rms);
      for (size_t j = 0; j < C; j++) {
        ng[j] = fd_at(in.gamma, j, &in, rms);
        nb[j] = fd_at(in.beta, j, &in, rms);
      }
      for (int v = 0; v < 2; v++) {
        tu_set_variant(ctx, tu_variants[v]);
        ln_tensors t = ln_make(ctx, &in);
        if (rms) {
          TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, t.x.t, t.gamma.t, t.y.t,
                                       t.rstd.t));
          TU_OK(ctx, rumus_rmsnorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t,
                                       t.rstd.t, t.dx.t, t.dg.t));
        } else {
          TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t.x.t, t.gamma.t,
                                         t.beta.t, t.y.t, t.mean.t, t.rstd.t));
          TU_OK(ctx, rumus_layernorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t,
                                         t.mean.t, t.rstd.t, t.dx.t, t.dg.t,
                                         t.db.t));
        }
        float *dx = tu_download_f32(ctx, t.dx.t);
        float *dg = tu_download_f32(ctx, t.dg.t);
        tu_check_close("fd_dx", dx, nx, n, 1e-3, 1e-2);
        tu_check_close("fd_dgamma", dg, ng, C, 1e-3, 1e-2);
        if (!rms) {
          float *db = tu_download_f32(ctx, t.db.t);
          tu_check_close("fd_dbeta", db, nb, C, 1e-3, 1e-2);
          free(db);
        }
        free(dx), free(dg);
        ln_free(ctx, &t);
      }
    }
    free(nx), free(ng), free(nb);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Limits ------------------------------------------------------------ */

/* y into x and dx into dy give the out-of-place bits; a second call the
 * same bits; dgamma and dbeta the same bits on both variants from the same
 * inputs, statistics included (3000 x 64, 7 x 4096, 3 x 129, 203 x 257,
 * 37 x 16384: every GPU backward kernel; 11 x 15001: the wide kernel's
 * work-items both with all their groups inside the row and not). */
START_TEST(in_place_repeatable) {
  rumus_ctx *ctx = tu_ctx();
  static const shp S[] = {{3000, 64}, {7, 4096}, {3, 129}, {203, 257},
                          {37, 16384}, {11, 15001}};
  for (int k = 0; k < 6; k++) {
    inputs in = make_inputs(&S[k], RUMUS_F32, RUMUS_F32, 50 + k);
    const size_t n = in.n, C = S[k].cols;
    float *dgv[2], *dbv[2], *st[2] = {NULL, NULL};
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      ln_tensors t = ln_make(ctx, &in);
      TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t.x.t, t.gamma.t, t.beta.t,
                                     t.y.t, t.mean.t, t.rstd.t));
      /* The variants' statistics may differ in their last bits: the second
       * backward takes the first's, so that its inputs are the same. */
      if (v == 0) {
        st[0] = tu_download(ctx, t.mean.t);
        st[1] = tu_download(ctx, t.rstd.t);
      } else {
        TU_OK(ctx, rumus_tensor_upload_f32(t.mean.t, st[0], S[k].rows));
        TU_OK(ctx, rumus_tensor_upload_f32(t.rstd.t, st[1], S[k].rows));
      }
      TU_OK(ctx, rumus_layernorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.mean.t,
                                     t.rstd.t, t.dx.t, t.dg.t, t.db.t));
      float *y = tu_download(ctx, t.y.t), *dx = tu_download(ctx, t.dx.t);
      dgv[v] = tu_download(ctx, t.dg.t);
      dbv[v] = tu_download(ctx, t.db.t);
      TU_OK(ctx, rumus_layernorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.mean.t,
                                     t.rstd.t, t.dx.t, t.dg.t, t.db.t));
      float *dg2 = tu_download(ctx, t.dg.t), *dx2 = tu_download(ctx, t.dx.t);
      ck_assert(memcmp(dg2, dgv[v], C * 4) == 0);
      ck_assert(memcmp(dx2, dx, n * 4) == 0);
      /* Without dgamma / dbeta (another kernel on some plans), then in
       * place: dx into dy (x unchanged), then y into x. */
      TU_OK(ctx, rumus_layernorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.mean.t,
                                     t.rstd.t, t.dx.t, NULL, NULL));
      float *dxn = tu_download(ctx, t.dx.t);
      ck_assert_msg(memcmp(dxn, dx, n * 4) == 0,
                    "%s %zux%zu: dx without dgamma / dbeta differs",
                    tu_variant_name(tu_variants[v]), S[k].rows, C);
      TU_OK(ctx, rumus_layernorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t, t.mean.t,
                                     t.rstd.t, t.dy.t, NULL, NULL));
      float *dxi = tu_download(ctx, t.dy.t);
      ck_assert_msg(memcmp(dxi, dx, n * 4) == 0, "%s %zux%zu: dx in place",
                    tu_variant_name(tu_variants[v]), S[k].rows, C);
      TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t.x.t, t.gamma.t, t.beta.t,
                                     t.x.t, NULL, NULL));
      float *yi = tu_download(ctx, t.x.t);
      ck_assert_msg(memcmp(yi, y, n * 4) == 0, "%s %zux%zu: y in place",
                    tu_variant_name(tu_variants[v]), S[k].rows, C);
      free(y), free(dx), free(dg2), free(dx2), free(dxn), free(dxi), free(yi);
      ln_free(ctx, &t);
    }
    ck_assert_msg(memcmp(dgv[0], dgv[1], C * 4) == 0, "dgamma across variants");
    ck_assert_msg(memcmp(dbv[0], dbv[1], C * 4) == 0, "dbeta across variants");
    free(dgv[0]), free(dgv[1]), free(dbv[0]), free(dbv[1]);
    free(st[0]), free(st[1]);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* The backward with dgamma / dbeta in place (dx == dy), both norms and
 * variants (the CPU variant's _rowp kernel reads each dy element before
 * it writes dx there): the bits of the out-of-place call. */
START_TEST(bwd_grads_in_place) {
  rumus_ctx *ctx = tu_ctx();
  static const shp S[] = {{203, 257}, {3000, 64}, {5, 1000}, {3, 7}};
  for (int k = 0; k < 4; k++) {
    inputs in = make_inputs(&S[k], RUMUS_F32, RUMUS_F32, 70 + k);
    for (int v = 0; v < 2; v++)
      for (int rms = 0; rms < 2; rms++) {
        tu_set_variant(ctx, tu_variants[v]);
        ln_tensors t = ln_make(ctx, &in);
        rumus_tensor *mean = rms ? NULL : t.mean.t, *db = rms ? NULL : t.db.t;
        float *out[3][2];
        for (int ip = 0; ip < 2; ip++) {
          if (rms)
            TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, t.x.t, t.gamma.t, t.y.t,
                                         t.rstd.t));
          else
            TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t.x.t, t.gamma.t,
                                           t.beta.t, t.y.t, t.mean.t,
                                           t.rstd.t));
          TU_OK(ctx, rumus_tensor_upload_f32(t.dx.t, in.dy, in.n));
          rumus_tensor *dy = ip ? t.dx.t : t.dy.t;
          if (rms)
            TU_OK(ctx, rumus_rmsnorm_bwd(ctx, dy, t.x.t, t.gamma.t, t.rstd.t,
                                         t.dx.t, t.dg.t));
          else
            TU_OK(ctx, rumus_layernorm_bwd(ctx, dy, t.x.t, t.gamma.t, mean,
                                           t.rstd.t, t.dx.t, t.dg.t, db));
          out[0][ip] = tu_download(ctx, t.dx.t);
          out[1][ip] = tu_download(ctx, t.dg.t);
          out[2][ip] = rms ? NULL : tu_download(ctx, t.db.t);
        }
        const size_t len[3] = {in.n, S[k].cols, S[k].cols};
        for (int q = 0; q < (rms ? 2 : 3); q++)
          ck_assert_msg(memcmp(out[q][0], out[q][1], len[q] * 4) == 0,
                        "%s %s %zux%zu: output %d differs in place",
                        rms ? "rmsnorm" : "layernorm",
                        tu_variant_name(tu_variants[v]), S[k].rows,
                        S[k].cols, q);
        for (int q = 0; q < 3; q++) free(out[q][0]), free(out[q][1]);
        ln_free(ctx, &t);
      }
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* The backward of both norms on variant v under environment variable
 * env's settings set[1..ns) (set[0]: NULL, unset): dx, dgamma and dbeta
 * the bits of set[0]'s, and dx also without dgamma and dbeta (nodp), on
 * the shapes S[0 .. nsh), x, dy and dx stored as d at offset off (-1:
 * the inputs' default). */
static void same_bits_typed(int v, const char *env,
                            const char *const *set, int ns, int nodp,
                            const shp *S, int nsh, rumus_dtype d, int off) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, v);
  for (int k = 0; k < nsh; k++) {
    inputs in = make_inputs(&S[k], d, RUMUS_F32, 90 + k);
    if (off >= 0) in.off = (size_t)off;
    ln_tensors t = ln_make(ctx, &in);
    TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t.x.t, t.gamma.t, t.beta.t,
                                   t.y.t, t.mean.t, t.rstd.t));
    for (int rms = 0; rms < 2; rms++) {
      float *ref[3] = {NULL, NULL, NULL};
      for (int e = 0; e < ns + nodp; e++) {
        const int dp = e < ns;
        if (dp && set[e]) setenv(env, set[e], 1);
        rumus_tensor *dg = dp ? t.dg.t : NULL, *db = dp ? t.db.t : NULL;
        if (rms)
          TU_OK(ctx, rumus_rmsnorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t,
                                       t.rstd.t, t.dx.t, dg));
        else
          TU_OK(ctx, rumus_layernorm_bwd(ctx, t.dy.t, t.x.t, t.gamma.t,
                                         t.mean.t, t.rstd.t, t.dx.t, dg, db));
        unsetenv(env);
        rumus_tensor *outs[3] = {t.dx.t, t.dg.t, t.db.t};
        for (int q = 0; q < (!dp ? 1 : rms ? 2 : 3); q++) {
          float *got = tu_download(ctx, outs[q]);
          if (e == 0) {
            ref[q] = got;
            continue;
          }
          const size_t nb = rumus_tensor_nbytes(outs[q]);
          ck_assert_msg(memcmp(got, ref[q], nb) == 0,
                        "%s %s %zux%zu %s=%s: output %d differs",
                        rms ? "rmsnorm" : "layernorm", tu_variant_name(v),
                        S[k].rows, S[k].cols, env,
                        dp ? (set[e] ? set[e] : "(unset)") : "(no dgamma)",
                        q);
          free(got);
        }
      }
      for (int q = 0; q < 3; q++) free(ref[q]);
    }
    ln_free(ctx, &t);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}

/* same_bits_typed on F32 tensors at the inputs' default offset. */
static void same_bits_under(int v, const char *env,
                            const char *const *set, int ns, int nodp,
                            const shp *S, int nsh) {
  same_bits_typed(v, env, set, ns, nodp, S, nsh, RUMUS_F32, -1);
}

/* Rows of 257 (a tail group) and 4096 (every lane full), with a block of
 * rows that the row count does not divide. */
static const shp BLOCK_SHAPES[] = {{203, 257}, {7, 4096}};

/* The GPU variant's block backward under RUMUS_LN_BLK's settings (2 or 4
 * rows at once, unrolled or not): the bits of the default (4 rows
 * unrolled). */
START_TEST(blk_rows_same_bits) {
  static const char *const SETTINGS[] = {NULL, "2u", "2", "4"};
  same_bits_under(RUMUS_VARIANT_GPU, "RUMUS_LN_BLK", SETTINGS, 4, 0,
                  BLOCK_SHAPES, 2);
}
END_TEST

/* The same with 16-bit rows in groups of 8 (offset 0; rows of 264 with
 * a tail group, and 4096) held as floats (4u) and as stored (...s): the
 * bits of the default (floats for F16, as stored for BF16). */
START_TEST(blk_stored_same_bits) {
  static const char *const SETTINGS[] = {NULL, "4u", "4us", "2s"};
  static const shp S[] = {{203, 264}, {7, 4096}};
  same_bits_typed(RUMUS_VARIANT_GPU, "RUMUS_LN_BLK", SETTINGS, 4, 0, S, 2,
                  _i ? RUMUS_BF16 : RUMUS_F16, 0);
}
END_TEST

/* The GPU variant's wide backward (rows of 12002: past the block kernel,
 * a tail group) under RUMUS_LN_WIDE_BWD's settings of the default local
 * size and groups (float4 loaded at once B, rows per step R): the bits of
 * the default 512x8x2x1, as B and R change no sum's order. */
START_TEST(wide_bwd_same_bits) {
  static const char *const SETTINGS[] = {NULL, "512x8x4", "512x8x2x2",
                                         "512x8x8x2"};
  static const shp S[] = {{5, 12002}};
  same_bits_under(RUMUS_VARIANT_GPU, "RUMUS_LN_WIDE_BWD", SETTINGS, 4, 0, S,
                  1);
}
END_TEST

/* The CPU variant's _rowp kernels by twos (RUMUS_LN_ROWP=2) and row by
 * row (1): the bits of the default (rows of 257 one by one, of 4096 by
 * twos, the last row of an odd block alone), and dx the bits of the
 * _row kernel's (the backward without dgamma and dbeta). */
START_TEST(rowp_pairs_same_bits) {
  static const char *const SETTINGS[] = {NULL, "1", "2"};
  same_bits_under(RUMUS_VARIANT_CPU, "RUMUS_LN_ROWP", SETTINGS, 3, 1,
                  BLOCK_SHAPES, 2);
}
END_TEST

/* The layer norm's wide forward with its statistics in one sum
 * (RUMUS_LN_FWD_ONE=1) on x of type tu_dtypes[_i]: it runs, and y, mean,
 * rstd (and the backward after it) against the reference, on rows the
 * wide kernel holds (8193 to 16384: full, a tail, every lane of a
 * float4 group), gamma F32 or x's type. */
START_TEST(fwd_one_sum) {
  static const shp S[] = {{2, 16384}, {3, 15001}, {2, 8195}, {4, 12002}};
  rumus_ctx *ctx = tu_profiling_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  setenv("RUMUS_LN_FWD_ONE", "1", 1);
  for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
    const rumus_dtype pd = k % 2 && d != RUMUS_F32 ? d : RUMUS_F32;
    inputs in = make_inputs(&S[k], d, pd, 400 + k);
    ln_tensors t = ln_make(ctx, &in);
    char tag[96];
    snprintf(tag, sizeof tag, "one_%s_p%s_%zux%zu", tu_dtype_name(d),
             tu_dtype_name(pd), S[k].rows, S[k].cols);
    tu_kernel_ran(ctx, "layernorm_fwd_wide"); /* forgets what ran before */
    run_norm(ctx, &in, &t, 0, k != 2, tag);
    ck_assert_msg(tu_kernel_ran(ctx, "layernorm_fwd_wide"),
                  "%s: layernorm_fwd_wide did not run", tag);
    ln_free(ctx, &t);
    free_inputs(&in);
  }
  unsetenv("RUMUS_LN_FWD_ONE");
  tu_free_all(ctx, NULL);
}
END_TEST

/* Rows of 1000 + U(-1, 1) (std 0.58), where E[x^2] - E[x]^2 in float
 * would lose the variance: rstd within rtol 1e-4, y within atol 2e-4 (the
 * float mean's rounding, ulp(1000) / 2 = 3e-5, times rstd 1.7, plus the
 * sums' errors). */
START_TEST(large_offset) {
  rumus_ctx *ctx = tu_ctx();
  const shp s = {16, 1000};
  inputs in = make_inputs(&s, RUMUS_F32, RUMUS_F32, 60);
  tu_rng r;
  tu_rng_seed(&r, 61);
  for (size_t i = 0; i < in.n; i++) in.x[i] = 1000.0f + tu_uniform(&r, -1, 1);
  double *want = tu_malloc(in.n * 8), ws[16];
  ref_layernorm_fwd(in.x, NULL, NULL, 16, 1000, EPS, 0, want, NULL, ws);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    ln_tensors t = ln_make(ctx, &in);
    TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t.x.t, NULL, NULL, t.y.t,
                                   t.mean.t, t.rstd.t));
    float *y = tu_download(ctx, t.y.t), *rs = tu_download(ctx, t.rstd.t);
    tu_check_close("offset_rstd", rs, ws, 16, 0, 1e-4);
    tu_check_close("offset_y", y, want, in.n, 2e-4, 0);
    free(y), free(rs);
    ln_free(ctx, &t);
  }
  free(want);
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A NaN in row 0 and an infinity in row 1 make those rows' y and
 * statistics NaN, but for RMS norm's row with an infinity: rrms 0 and y
 * = x * 0 (NaN at the infinity, 0 elsewhere, as PyTorch's); row 2 is
 * unaffected.  Rows of 9 and 5000 (every kernel). */
START_TEST(nan_and_inf_rows) {
  rumus_ctx *ctx = tu_ctx();
  static const shp S[] = {{3, 9}, {3, 5000}};
  for (int k = 0; k < 2; k++) {
    inputs in = make_inputs(&S[k], RUMUS_F32, RUMUS_F32, 70 + k);
    const size_t C = S[k].cols;
    in.x[3] = NAN;
    in.x[C + 5] = INFINITY;
    double *want = tu_malloc(C * 8);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      ln_tensors t = ln_make(ctx, &in);
      for (int rms = 0; rms < 2; rms++) {
        if (rms)
          TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, t.x.t, t.gamma.t, t.y.t,
                                       t.rstd.t));
        else
          TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, t.x.t, t.gamma.t,
                                         t.beta.t, t.y.t, t.mean.t, t.rstd.t));
        float *y = tu_download(ctx, t.y.t), *rs = tu_download(ctx, t.rstd.t);
        for (size_t j = 0; j < 2 * C; j++) {
          /* RMS norm of a row with an infinity: x * 0, as in PyTorch. */
          const int zero = rms && j >= C && j != C + 5;
          ck_assert_msg(zero ? y[j] == 0.0f : isnan(y[j]), "y[%zu] = %g", j,
                        y[j]);
        }
        ck_assert(isnan(rs[0]));
        ck_assert(rms ? rs[1] == 0.0f : isnan(rs[1]));
        ref_layernorm_fwd(in.x + 2 * C, in.gamma, in.beta, 1, C, EPS, rms,
                          want, NULL, NULL);
        tu_check_close("finite_row", y + 2 * C, want, C, 5e-5, 3e-5);
        free(y), free(rs);
      }
      ln_free(ctx, &t);
    }
    free(want);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* No rows: dgamma = dbeta = 0; C = 0: nothing to do. */
START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s0[2] = {0, 3}, s3[1] = {3}, sc0[2] = {4, 0}, z[1] = {0},
               f4[1] = {4};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 2, s0, NULL);
  rumus_tensor *y = tu_tensor(ctx, RUMUS_F32, 2, s0, NULL);
  rumus_tensor *m = tu_tensor(ctx, RUMUS_F32, 1, z, NULL);
  rumus_tensor *r = tu_tensor(ctx, RUMUS_F32, 1, z, NULL);
  rumus_tensor *dg = tu_tensor(ctx, RUMUS_F32, 1, s3, NULL);
  rumus_tensor *db = tu_tensor(ctx, RUMUS_F32, 1, s3, NULL);
  rumus_tensor *xc = tu_tensor(ctx, RUMUS_F32, 2, sc0, NULL);
  rumus_tensor *s4 = tu_tensor(ctx, RUMUS_F32, 1, f4, NULL);
  TU_OK(ctx, rumus_tensor_fill(dg, 5.0f));
  TU_OK(ctx, rumus_tensor_fill(db, 5.0f));
  TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, x, NULL, NULL, x, m, r));
  TU_OK(ctx, rumus_layernorm_bwd(ctx, y, x, NULL, m, r, y, dg, db));
  float got[3];
  TU_OK(ctx, rumus_tensor_download(dg, got, sizeof got));
  for (int c = 0; c < 3; c++) ck_assert_float_eq(got[c], 0.0f);
  TU_OK(ctx, rumus_tensor_download(db, got, sizeof got));
  for (int c = 0; c < 3; c++) ck_assert_float_eq(got[c], 0.0f);
  TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, xc, NULL, xc, s4));
  TU_OK(ctx, rumus_rmsnorm_bwd(ctx, xc, xc, NULL, s4, xc, NULL));
  tu_free_all(ctx, x, y, m, r, dg, db, xc, s4, NULL);
}
END_TEST

/* ---- Errors ---------------------------------------------------------------- */

typedef struct {
  rumus_ctx *ctx;
  rumus_tensor *x, *y, *xh, *xi, *c, *ch, *cb, *c4, *r, *r2, *y3;
} bad_set;

static bad_set bad_make(void) {
  bad_set b;
  b.ctx = tu_ctx();
  const size_t s2[2] = {2, 3}, s3[1] = {3}, s4[1] = {4}, r2[1] = {2},
               sy3[2] = {3, 2};
  b.x = tu_tensor(b.ctx, RUMUS_F32, 2, s2, NULL);
  b.y = tu_tensor(b.ctx, RUMUS_F32, 2, s2, NULL);
  b.xh = tu_tensor(b.ctx, RUMUS_F16, 2, s2, NULL);
  b.xi = tu_tensor(b.ctx, RUMUS_I32, 2, s2, NULL);
  b.c = tu_tensor(b.ctx, RUMUS_F32, 1, s3, NULL);
  b.ch = tu_tensor(b.ctx, RUMUS_F16, 1, s3, NULL);
  b.cb = tu_tensor(b.ctx, RUMUS_BF16, 1, s3, NULL);
  b.c4 = tu_tensor(b.ctx, RUMUS_F32, 1, s4, NULL);
  b.r = tu_tensor(b.ctx, RUMUS_F32, 1, r2, NULL);
  b.r2 = tu_tensor(b.ctx, RUMUS_F32, 1, r2, NULL);
  b.y3 = tu_tensor(b.ctx, RUMUS_F32, 2, sy3, NULL);
  TU_OK(b.ctx, rumus_tensor_fill(b.x, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.xh, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.c, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.ch, 1.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.r, 0.0f));
  TU_OK(b.ctx, rumus_tensor_fill(b.r2, 1.0f));
  return b;
}

static void bad_free(bad_set *b) {
  TU_OK(b->ctx, rumus_ctx_sync(b->ctx));
  tu_free_all(b->ctx, b->x, b->y, b->xh, b->xi, b->c, b->ch, b->cb, b->c4,
              b->r, b->r2, b->y3, NULL);
}

#define ERRMSG_HAS(ctx, s)                                                   \
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), (s)), "%s", rumus_ctx_errmsg(ctx))

/* NULL context or tensors: RUMUS_ENULL; a type the op does not take:
 * RUMUS_EDTYPE naming the argument; gamma of x's type works. */
START_TEST(bad_nulls_and_types) {
  bad_set b = bad_make();
  rumus_ctx *ctx = b.ctx;
  TU_STATUS(RUMUS_ENULL, rumus_layernorm_fwd(NULL, NULL, b.x, NULL, NULL, b.y,
                                             NULL, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_layernorm_fwd(ctx, NULL, NULL, NULL, NULL, b.y,
                                             NULL, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_rmsnorm_fwd(ctx, NULL, b.x, NULL, NULL, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_layernorm_bwd(ctx, b.x, b.x, NULL, NULL, b.r2,
                                             b.y, NULL, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_rmsnorm_bwd(ctx, b.x, b.x, NULL, NULL, b.y,
                                           NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_layernorm_fwd(ctx, NULL, b.xi, NULL, NULL,
                                              b.xi, NULL, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_layernorm_fwd(ctx, NULL, b.x, NULL, NULL,
                                              b.xh, NULL, NULL));
  ERRMSG_HAS(ctx, "y");
  TU_STATUS(RUMUS_EDTYPE, rumus_layernorm_fwd(ctx, NULL, b.x, b.ch, NULL, b.y,
                                              NULL, NULL));
  ERRMSG_HAS(ctx, "gamma is f16");
  TU_STATUS(RUMUS_EDTYPE, rumus_layernorm_fwd(ctx, NULL, b.xh, b.c, b.ch,
                                              b.xh, NULL, NULL));
  ERRMSG_HAS(ctx, "beta");
  TU_STATUS(RUMUS_EDTYPE, rumus_rmsnorm_fwd(ctx, NULL, b.xh, b.cb, b.xh,
                                            NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_layernorm_fwd(ctx, NULL, b.x, NULL, NULL, b.y,
                                              b.r, b.ch));
  TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, b.xh, b.ch, b.ch, b.xh, NULL,
                                 NULL));
  TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, b.xh, NULL, b.c, b.xh, NULL,
                                 NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_layernorm_bwd(ctx, b.xh, b.x, NULL, b.r, b.r2,
                                              b.y, NULL, NULL));
  ERRMSG_HAS(ctx, "dy");
  TU_STATUS(RUMUS_EDTYPE, rumus_layernorm_bwd(ctx, b.x, b.x, b.c, b.r, b.r2,
                                              b.y, b.ch, NULL));
  ERRMSG_HAS(ctx, "dgamma");
  TU_STATUS(RUMUS_EDTYPE, rumus_rmsnorm_bwd(ctx, b.xh, b.xh, b.ch, b.r2,
                                            b.xh, b.c));
  bad_free(&b);
}
END_TEST

/* Shapes: RUMUS_ESHAPE naming the shapes. */
START_TEST(bad_shapes) {
  bad_set b = bad_make();
  rumus_ctx *ctx = b.ctx;
  TU_STATUS(RUMUS_ESHAPE, rumus_layernorm_fwd(ctx, NULL, b.x, NULL, NULL,
                                              b.y3, NULL, NULL));
  ERRMSG_HAS(ctx, "[3, 2]");
  TU_STATUS(RUMUS_ESHAPE, rumus_layernorm_fwd(ctx, NULL, b.x, b.c4, NULL, b.y,
                                              NULL, NULL));
  ERRMSG_HAS(ctx, "gamma [4]");
  TU_STATUS(RUMUS_ESHAPE, rumus_layernorm_fwd(ctx, NULL, b.x, NULL, b.c4, b.y,
                                              NULL, NULL));
  TU_STATUS(RUMUS_ESHAPE, rumus_layernorm_fwd(ctx, NULL, b.x, NULL, NULL, b.y,
                                              b.c, b.r2));
  ERRMSG_HAS(ctx, "mean [3]");
  TU_STATUS(RUMUS_ESHAPE, rumus_rmsnorm_fwd(ctx, NULL, b.x, NULL, b.y, b.c));
  TU_STATUS(RUMUS_ESHAPE, rumus_layernorm_bwd(ctx, b.y3, b.x, NULL, b.r, b.r2,
                                              b.y, NULL, NULL));
  TU_STATUS(RUMUS_ESHAPE, rumus_layernorm_bwd(ctx, b.x, b.x, NULL, b.r, b.c,
                                              b.y, NULL, NULL));
  TU_STATUS(RUMUS_ESHAPE, rumus_rmsnorm_bwd(ctx, b.x, b.x, NULL, b.r2, b.y,
                                            b.c4));
  bad_free(&b);
}
END_TEST

/* eps, one statistic without the other, overlaps, another context:
 * RUMUS_EINVAL. */
START_TEST(bad_values) {
  bad_set b = bad_make();
  rumus_ctx *ctx = b.ctx;
  rumus_layernorm_params p = RUMUS_LAYERNORM_DEFAULTS;
  p.eps = -1e-5f;
  TU_STATUS(RUMUS_EINVAL, rumus_layernorm_fwd(ctx, &p, b.x, NULL, NULL, b.y,
                                              NULL, NULL));
  ERRMSG_HAS(ctx, "eps");
  p.eps = NAN;
  TU_STATUS(RUMUS_EINVAL, rumus_rmsnorm_fwd(ctx, &p, b.x, NULL, b.y, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_layernorm_fwd(ctx, NULL, b.x, NULL, NULL, b.y,
                                              b.r, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_layernorm_fwd(ctx, NULL, b.x, NULL, NULL, b.y,
                                              b.r, b.r)); /* mean is rstd */
  TU_STATUS(RUMUS_EINVAL, rumus_layernorm_fwd(ctx, NULL, b.c, b.c, NULL, b.c,
                                              NULL, NULL)); /* y is gamma */
  TU_STATUS(RUMUS_EINVAL, rumus_layernorm_bwd(ctx, b.x, b.y, NULL, b.r, b.r2,
                                              b.y, NULL, NULL)); /* dx is x */
  TU_STATUS(RUMUS_EINVAL, rumus_layernorm_bwd(ctx, b.x, b.y, NULL, b.r, b.r2,
                                              b.x, b.c, b.c));
  TU_OK(ctx, rumus_rmsnorm_bwd(ctx, b.x, b.y, NULL, b.r2, b.x, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_rmsnorm_bwd(ctx, b.x, b.y, NULL, b.r2, b.y,
                                            NULL)); /* dx is x */
  rumus_ctx *other = tu_ctx();
  const size_t c3[1] = {3};
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 1, c3, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_layernorm_fwd(ctx, NULL, b.x, o, NULL, b.y,
                                              NULL, NULL));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  bad_free(&b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("layernorm");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, shapes, 0, 3);
  tcase_add_loop_test(core, aligned_rows, 0, 3);
  tcase_add_test(core, three_d_and_inference);
  tcase_add_test(core, bwd_finite_differences);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, in_place_repeatable);
  tcase_add_test(limits, bwd_grads_in_place);
  tcase_add_test(limits, blk_rows_same_bits);
  tcase_add_loop_test(limits, blk_stored_same_bits, 0, 2);
  tcase_add_test(limits, wide_bwd_same_bits);
  tcase_add_test(limits, rowp_pairs_same_bits);
  tcase_add_loop_test(limits, fwd_one_sum, 0, 3);
  tcase_add_test(limits, large_offset);
  tcase_add_test(limits, empty_tensors);
  tcase_add_test(limits, nan_and_inf_rows);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_nulls_and_types);
  tcase_add_test(errors, bad_shapes);
  tcase_add_test(errors, bad_values);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
