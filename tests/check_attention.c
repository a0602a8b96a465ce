/*
 * check_attention.c - scaled dot-product attention, forward (out and lse)
 * and backward (dq, dk, dv), against the float64 reference, on both
 * variants and every storage type: lengths T = 1, 7 and 129 (Tq and Tk
 * alike and different), D = 1, 7, 32, 64, 96, 128, 256, B * H = 1 and 6,
 * causal and not, additive masks of 2, 3 and 4 dimensions (broadcast and
 * full, each storage type), an explicit scale; every tensor in a borrowed
 * buffer at an odd element offset with guard bytes; the backward against
 * central finite differences of the float64 forward; fully masked rows (out 0,
 * lse -inf, zero gradients), NaN confined to its row; bits equal run to
 * run (also over partial tiles); the CPU variant's kernels of 2 and 4
 * rows per work-item against those of one row, bit for bit; the GPU
 * variant's tiled kernels with
 * partial tiles in every dimension under the default tiling, tile
 * overrides (also forward and backward apart) and an invalid one; bad
 * arguments with exact statuses.
 *
 * Inputs: q, k in [-2, 2), v and dout in [-1, 1), masks in [-2, 0).
 * Tolerances (|got - want| <= atol + rtol |want|), F32 storage:
 *   out     atol 2e-6, rtol 1e-5
 *   lse     atol 1e-5, rtol 1e-6
 *   dq, dk, dv   atol 2e-5, rtol 1e-4
 *   against central differences of the float64 forward (h = 1e-2 on the
 *   float inputs)  atol 1e-3, rtol 1e-2
 * F16 and BF16 storage: the reference takes the inputs as stored, and
 * storing adds half an ulp of the type (tu_store_rtol / tu_store_atol).
 * The backward also reads the stored (rounded) out for delta = dout . out,
 * so its gradients carry that rounding times |dout| . |k| or |q| (D of
 * them, scaled): their absolute tolerance adds 4 * sqrt(D) ulp-halves
 * (tu_store_rtol) on top.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

/* One call's shape and options; mnd = 0: no mask, else the mask's ndim
 * and shape, stored as mt. */
typedef struct {
  size_t B, H, Tq, Tk, D;
  int causal;
  int mnd;
  size_t mshape[4];
  float scale;
} acase;

/* A case's inputs as stored in d (mask in mt). */
typedef struct {
  acase c;
  rumus_dtype d, mt;
  size_t nq, nk, nm;
  float *q, *k, *v, *dout, *mask;
  ref_attention_shape rs;
} inputs;

static size_t mask_numel(const acase *c) {
  size_t n = 1;
  for (int i = 0; i < c->mnd; i++) n *= c->mshape[i];
  return c->mnd ? n : 0;
}

static float *rand_rounded(tu_rng *r, rumus_dtype d, size_t n, float lo,
                           float hi) {
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(r, x, n, lo, hi);
  tu_round_to(d, x, n);
  return x;
}

static inputs make_inputs(const acase *c, rumus_dtype d, rumus_dtype mt,
                          uint64_t seed) {
  inputs in;
  memset(&in, 0, sizeof in);
  in.c = *c;
  in.d = d;
  in.mt = mt;
  in.nq = c->B * c->H * c->Tq * c->D;
  in.nk = c->B * c->H * c->Tk * c->D;
  in.nm = mask_numel(c);
  tu_rng r;
  tu_rng_seed(&r, seed);
  in.q = rand_rounded(&r, d, in.nq, -2, 2);
  in.k = rand_rounded(&r, d, in.nk, -2, 2);
  in.v = rand_rounded(&r, d, in.nk, -1, 1);
  in.dout = rand_rounded(&r, d, in.nq, -1, 1);
  in.mask = c->mnd ? rand_rounded(&r, mt, in.nm, -2, 0) : NULL;
  ref_attention_shape rs = {c->B, c->H, c->Tq, c->Tk, c->D,
                            c->scale > 0 ? c->scale : 1.0 / sqrt((double)c->D),
                            c->causal, in.mask, {0, 0, 0, 0}};
  if (c->mnd) ref_attention_mask_strides(c->mnd, c->mshape, rs.ms);
  in.rs = rs;
  return in;
}

static void free_inputs(inputs *in) {
  free(in->q);
  free(in->k);
  free(in->v);
  free(in->dout);
  free(in->mask);
}

/* Tolerances of the header for storage d and head dim D. */
typedef struct {
  double out_a, out_r, lse_a, lse_r, g_a, g_r;
} tols;

static tols tols_of(rumus_dtype d, size_t D) {
  tols t = {2e-6, 1e-5, 1e-5, 1e-6, 2e-5, 1e-4};
  t.out_a += tu_store_atol(d);
  t.out_r += tu_store_rtol(d);
  t.g_a += tu_store_atol(d) + 4 * sqrt((double)D) * tu_store_rtol(d);
  t.g_r += tu_store_rtol(d);
  return t;
}

/* The device tensors of a call, each guarded at an odd offset. */
typedef struct {
  tu_guarded q, k, v, mask, out, lse, dout, dq, dk, dv;
} dev;

static tu_guarded guarded(rumus_ctx *ctx, rumus_dtype d, int nd,
                          const size_t *shape, const float *data) {
  return tu_guarded_typed_odd(ctx, d, nd, shape, data, 3);
}

static dev make_dev(rumus_ctx *ctx, const inputs *in) {
  const acase *c = &in->c;
  const size_t sq[4] = {c->B, c->H, c->Tq, c->D};
  const size_t sk[4] = {c->B, c->H, c->Tk, c->D};
  const size_t sl[3] = {c->B, c->H, c->Tq};
  dev t;
  memset(&t, 0, sizeof t);
  t.q = guarded(ctx, in->d, 4, sq, in->q);
  t.k = guarded(ctx, in->d, 4, sk, in->k);
  t.v = guarded(ctx, in->d, 4, sk, in->v);
  if (c->mnd) t.mask = guarded(ctx, in->mt, c->mnd, c->mshape, in->mask);
  t.out = guarded(ctx, in->d, 4, sq, NULL);
  t.lse = guarded(ctx, RUMUS_F32, 3, sl, NULL);
  t.dout = guarded(ctx, in->d, 4, sq, in->dout);
  t.dq = guarded(ctx, in->d, 4, sq, NULL);
  t.dk = guarded(ctx, in->d, 4, sk, NULL);
  t.dv = guarded(ctx, in->d, 4, sk, NULL);
  return t;
}

static void free_dev(rumus_ctx *ctx, dev *t) {
  tu_guarded *all[10] = {&t->q,   &t->k,    &t->v,  &t->mask, &t->out,
                         &t->lse, &t->dout, &t->dq, &t->dk,   &t->dv};
  for (int i = 0; i < 10; i++)
    if (all[i]->t) tu_guarded_check_free(ctx, all[i]);
}

static rumus_attention_params params_of(const acase *c) {
  rumus_attention_params p = RUMUS_ATTENTION_DEFAULTS;
  p.scale = c->scale;
  p.causal = c->causal;
  return p;
}

/* "attention[_f16]_<what>_<variant>_BxHxTqxTkxD[_causal]". */
static void case_name(char *buf, size_t len, const inputs *in, int variant,
                      const char *what) {
  const acase *c = &in->c;
  snprintf(buf, len, "attention%s%s_%s_%s_%zux%zux%zux%zux%zu%s%s",
           in->d == RUMUS_F32 ? "" : "_", in->d == RUMUS_F32
           ? "" : tu_dtype_name(in->d), what, tu_variant_name(variant), c->B,
           c->H, c->Tq, c->Tk, c->D, c->causal ? "_causal" : "",
           c->mnd ? "_mask" : "");
}

static void check_t(const char *name, rumus_ctx *ctx, const rumus_tensor *t,
                    const double *want, size_t n, double atol, double rtol) {
  float *got = tu_download_f32(ctx, t);
  tu_check_close(name, got, want, n, atol, rtol);
  free(got);
}

/* Forward then backward of one case on variant `variant`, against the
 * reference (computed by the caller into want_*). */
typedef struct {
  double *out, *lse, *dq, *dk, *dv;
} wants;

static wants make_wants(const inputs *in) {
  const acase *c = &in->c;
  wants w;
  w.out = tu_malloc(in->nq * sizeof(double));
  w.lse = tu_malloc(c->B * c->H * c->Tq * sizeof(double) + 1);
  w.dq = tu_malloc(in->nq * sizeof(double));
  w.dk = tu_malloc(in->nk * sizeof(double));
  w.dv = tu_malloc(in->nk * sizeof(double));
  ref_attention_fwd(&in->rs, in->q, in->k, in->v, w.out, w.lse);
  ref_attention_bwd(&in->rs, in->q, in->k, in->v, in->dout, w.dq, w.dk, w.dv);
  return w;
}

static void free_wants(wants *w) {
  free(w->out);
  free(w->lse);
  free(w->dq);
  free(w->dk);
  free(w->dv);
}

static void run_case_on(rumus_ctx *ctx, const inputs *in, const wants *w,
                        int variant) {
  const acase *c = &in->c;
  tu_set_variant(ctx, variant);
  dev t = make_dev(ctx, in);
  const rumus_attention_params p = params_of(c);
  TU_OK(ctx, rumus_attention_fwd(ctx, &p, t.q.t, t.k.t, t.v.t, t.mask.t,
                                 t.out.t, t.lse.t));
  TU_OK(ctx, rumus_attention_bwd(ctx, &p, t.q.t, t.k.t, t.v.t, t.mask.t,
                                 t.out.t, t.lse.t, t.dout.t, t.dq.t, t.dk.t,
                                 t.dv.t));
  const tols tl = tols_of(in->d, c->D);
  char name[160];
  case_name(name, sizeof name, in, variant, "out");
  check_t(name, ctx, t.out.t, w->out, in->nq, tl.out_a, tl.out_r);
  case_name(name, sizeof name, in, variant, "lse");
  check_t(name, ctx, t.lse.t, w->lse, c->B * c->H * c->Tq, tl.lse_a,
          tl.lse_r);
  case_name(name, sizeof name, in, variant, "dq");
  check_t(name, ctx, t.dq.t, w->dq, in->nq, tl.g_a, tl.g_r);
  case_name(name, sizeof name, in, variant, "dk");
  check_t(name, ctx, t.dk.t, w->dk, in->nk, tl.g_a, tl.g_r);
  case_name(name, sizeof name, in, variant, "dv");
  check_t(name, ctx, t.dv.t, w->dv, in->nk, tl.g_a, tl.g_r);
  free_dev(ctx, &t);
}

/* A case on both variants, storage d, mask storage mt. */
static void run_case(rumus_ctx *ctx, const acase *c, rumus_dtype d,
                     rumus_dtype mt, uint64_t seed) {
  inputs in = make_inputs(c, d, mt, seed);
  wants w = make_wants(&in);
  for (int v = 0; v < 2; v++) run_case_on(ctx, &in, &w, tu_variants[v]);
  free_wants(&w);
  free_inputs(&in);
}

/* ---- Shapes -------------------------------------------------------------- */

/* F32 over lengths, head dims, heads, causal and not. */
static const acase SHAPES[] = {
    {1, 1, 1, 1, 32, 0, 0, {0}, 0},
    {1, 1, 7, 7, 32, 1, 0, {0}, 0},
    {2, 3, 7, 129, 32, 0, 0, {0}, 0},
    {1, 1, 129, 129, 128, 1, 0, {0}, 0},
    {2, 3, 129, 7, 128, 1, 0, {0}, 0},
    {3, 2, 7, 1, 64, 0, 0, {0}, 0},
    {1, 6, 33, 20, 96, 1, 0, {0}, 0},
    {2, 1, 9, 13, 7, 0, 0, {0}, 0.3f},
    {1, 2, 9, 5, 256, 1, 0, {0}, 0},
    {2, 1, 3, 70, 1, 0, 2, {3, 70}, 0},
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

START_TEST(shapes_f32) {
  rumus_ctx *ctx = tu_ctx();
  run_case(ctx, &SHAPES[_i], RUMUS_F32, RUMUS_F32, 100 + (uint64_t)_i);
  tu_free_all(ctx, NULL);
}
END_TEST

/* F16 and BF16 storage (_i 0, 1 for F16; 2, 3 for BF16): odd D and
 * lengths, causal with a 2-D mask of the other 16-bit type, D = 32 and
 * 128 at 129. */
static const acase TYPED[] = {
    {1, 2, 7, 9, 7, 1, 2, {7, 9}, 0},
    {2, 3, 129, 129, 32, 0, 0, {0}, 0},
    {1, 1, 129, 33, 128, 1, 0, {0}, 0},
};
#define NTYPED (sizeof TYPED / sizeof TYPED[0])

START_TEST(shapes_typed) {
  const rumus_dtype d = _i < (int)NTYPED ? RUMUS_F16 : RUMUS_BF16;
  const acase *c = &TYPED[_i % NTYPED];
  rumus_ctx *ctx = tu_ctx();
  run_case(ctx, c, d, d == RUMUS_F16 ? RUMUS_BF16 : RUMUS_F16,
           200 + (uint64_t)_i);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Masks of every layout PyTorch broadcasts (F32 data): [Tq, Tk], [1, Tk]
 * (padding of keys), [H, Tq, Tk], full [B, H, Tq, Tk], [B, 1, 1, Tk], [B,
 * 1, Tq, 1]; mask storage F32, F16, BF16 in turn. */
static const acase MASKS[] = {
    {2, 3, 7, 9, 32, 0, 2, {7, 9}, 0},
    {2, 3, 7, 9, 32, 1, 2, {1, 9}, 0},
    {2, 3, 7, 9, 32, 0, 3, {3, 7, 9}, 0},
    {2, 3, 7, 9, 32, 1, 4, {2, 3, 7, 9}, 0},
    {2, 3, 7, 9, 32, 0, 4, {2, 1, 1, 9}, 0},
    {2, 3, 7, 9, 32, 0, 4, {2, 1, 7, 1}, 0},
};
#define NMASKS (sizeof MASKS / sizeof MASKS[0])

START_TEST(masks) {
  rumus_ctx *ctx = tu_ctx();
  run_case(ctx, &MASKS[_i], RUMUS_F32, tu_dtypes[_i % 3], 300 + (uint64_t)_i);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Special rows -------------------------------------------------------- */

/* Downloads, as floats. */
static float *get(rumus_ctx *ctx, const rumus_tensor *t) {
  return tu_download_f32(ctx, t);
}

/* Fully masked rows: row 2 of head 0 by a -inf mask row, every row when
 * Tk = 0.  out 0 and lse -inf there, no gradient from them (the reference
 * agrees); the other rows as the reference. */
START_TEST(masked_rows) {
  const acase c = {1, 2, 5, 6, 32, 0, 3, {2, 5, 6}, 0};
  rumus_ctx *ctx = tu_ctx();
  inputs in = make_inputs(&c, RUMUS_F32, RUMUS_F32, 7);
  for (size_t j = 0; j < 6; j++) in.mask[2 * 6 + j] = -INFINITY;
  in.mask[30 + 3] = -INFINITY; /* one more: head 1, row 0 */
  wants w = make_wants(&in);
  ck_assert(w.lse[2] == -INFINITY && w.out[2 * 32] == 0.0);
  for (int v = 0; v < 2; v++) run_case_on(ctx, &in, &w, tu_variants[v]);
  free_wants(&w);
  free_inputs(&in);
  /* Tk = 0. */
  const acase c0 = {2, 1, 3, 0, 8, 1, 0, {0}, 0};
  in = make_inputs(&c0, RUMUS_F32, RUMUS_F32, 8);
  w = make_wants(&in);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    dev t = make_dev(ctx, &in);
    TU_OK(ctx, rumus_attention_fwd(ctx, NULL, t.q.t, t.k.t, t.v.t, NULL,
                                   t.out.t, t.lse.t));
    TU_OK(ctx, rumus_attention_bwd(ctx, NULL, t.q.t, t.k.t, t.v.t, NULL,
                                   t.out.t, t.lse.t, t.dout.t, t.dq.t, NULL,
                                   NULL));
    float *out = get(ctx, t.out.t), *lse = get(ctx, t.lse.t),
          *dq = get(ctx, t.dq.t);
    for (size_t i = 0; i < in.nq; i++)
      ck_assert_msg(out[i] == 0.0f && dq[i] == 0.0f, "Tk = 0: element %zu",
                    i);
    for (size_t i = 0; i < 6; i++) ck_assert(lse[i] == -INFINITY);
    free(out);
    free(lse);
    free(dq);
    free_dev(ctx, &t);
  }
  free_wants(&w);
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A NaN in q makes its row's out and lse NaN and leaves the other rows
 * alone (the reference keeps the same rule), on every storage type; a NaN
 * in v reaches every row that sees its key. */
START_TEST(nan_rows) {
  const acase c = {1, 1, 7, 7, 8, 1, 0, {0}, 0};
  rumus_ctx *ctx = tu_ctx();
  inputs in = make_inputs(&c, tu_dtypes[_i], RUMUS_F32, 9);
  in.q[3 * 8 + 5] = NAN;
  in.v[5 * 8 + 1] = NAN; /* rows 5 and 6 see key 5 */
  wants w = make_wants(&in);
  ck_assert(isnan(w.lse[3]) && !isnan(w.lse[4]) && isnan(w.out[5 * 8 + 1]));
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    dev t = make_dev(ctx, &in);
    const rumus_attention_params p = params_of(&c);
    TU_OK(ctx, rumus_attention_fwd(ctx, &p, t.q.t, t.k.t, t.v.t, NULL,
                                   t.out.t, t.lse.t));
    const tols tl = tols_of(in.d, c.D);
    check_t("attention_nan_out", ctx, t.out.t, w.out, in.nq, tl.out_a,
            tl.out_r);
    check_t("attention_nan_lse", ctx, t.lse.t, w.lse, 7, tl.lse_a, tl.lse_r);
    free_dev(ctx, &t);
  }
  free_wants(&w);
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Two runs give the same bits (forward, lse and every gradient), on both
 * variants: a single tile, and partial tiles of the GPU variant's tiled
 * kernels in every dimension (130 queries, 67 keys, D = 40). */
static const acase SAME_BITS[] = {
    {1, 2, 40, 37, 32, 1, 2, {40, 37}, 0},
    {2, 1, 130, 67, 40, 0, 2, {130, 67}, 0},
};

START_TEST(same_bits) {
  const acase c = SAME_BITS[_i];
  rumus_ctx *ctx = tu_ctx();
  inputs in = make_inputs(&c, RUMUS_F32, RUMUS_F32, 11);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float *first[5] = {NULL};
    for (int run = 0; run < 2; run++) {
      dev t = make_dev(ctx, &in);
      TU_OK(ctx, rumus_attention_fwd(ctx, NULL, t.q.t, t.k.t, t.v.t,
                                     t.mask.t, t.out.t, t.lse.t));
      TU_OK(ctx, rumus_attention_bwd(ctx, NULL, t.q.t, t.k.t, t.v.t,
                                     t.mask.t, t.out.t, t.lse.t, t.dout.t,
                                     t.dq.t, t.dk.t, t.dv.t));
      const rumus_tensor *outs[5] = {t.out.t, t.lse.t, t.dq.t, t.dk.t,
                                     t.dv.t};
      for (int o = 0; o < 5; o++) {
        float *x = get(ctx, outs[o]);
        const size_t bytes = rumus_tensor_dim(outs[o], 0) *
                             rumus_tensor_dim(outs[o], 1) *
                             rumus_tensor_dim(outs[o], 2) *
                             (o == 1 ? 1 : c.D) * sizeof(float);
        if (run == 0) {
          first[o] = x;
        } else {
          ck_assert_msg(memcmp(first[o], x, bytes) == 0,
                        "output %d differs between runs (%s)", o,
                        tu_variant_name(tu_variants[v]));
          free(x);
          free(first[o]);
        }
      }
      free_dev(ctx, &t);
    }
  }
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Rows per work-item (CPU variant) ------------------------------------ */

/* RUMUS_ATTENTION_CPU_ROWS = 2 and 4 (several query or key rows per
 * work-item) give the bits of 1 (the one-row kernels) in out, lse, dq, dk
 * and dv: lengths 1, 7 and 129 (tail work-items), Tq != Tk both ways,
 * causal and not, D = 32 and 128, B * H = 1 and 6, masks broadcast and
 * full with every fifth element -inf and one fully masked row (skipped
 * keys, lse -inf); F32 and BF16 storage.  One context for the case, so
 * each program builds once. */
static const acase ROWS_CASES[] = {
    {1, 1, 1, 1, 32, 0, 0, {0}, 0},
    {1, 1, 7, 7, 32, 1, 0, {0}, 0},
    {2, 3, 7, 129, 32, 0, 2, {7, 129}, 0},
    {1, 6, 129, 129, 32, 1, 4, {1, 6, 129, 129}, 0},
    {1, 1, 129, 129, 128, 1, 0, {0}, 0},
    {2, 3, 129, 7, 128, 1, 3, {3, 129, 7}, 0},
    {1, 1, 7, 129, 128, 0, 2, {1, 129}, 0},
};
#define NROWS_CASES (sizeof ROWS_CASES / sizeof ROWS_CASES[0])

/* The five outputs of one forward and backward under
 * RUMUS_ATTENTION_CPU_ROWS=nr, as floats into got[0 .. 5). */
static void rows_run(rumus_ctx *ctx, const inputs *in, const char *nr,
                     float *got[5]) {
  setenv("RUMUS_ATTENTION_CPU_ROWS", nr, 1);
  dev t = make_dev(ctx, in);
  const rumus_attention_params p = params_of(&in->c);
  TU_OK(ctx, rumus_attention_fwd(ctx, &p, t.q.t, t.k.t, t.v.t, t.mask.t,
                                 t.out.t, t.lse.t));
  TU_OK(ctx, rumus_attention_bwd(ctx, &p, t.q.t, t.k.t, t.v.t, t.mask.t,
                                 t.out.t, t.lse.t, t.dout.t, t.dq.t, t.dk.t,
                                 t.dv.t));
  const rumus_tensor *outs[5] = {t.out.t, t.lse.t, t.dq.t, t.dk.t, t.dv.t};
  for (int o = 0; o < 5; o++) got[o] = get(ctx, outs[o]);
  free_dev(ctx, &t);
  unsetenv("RUMUS_ATTENTION_CPU_ROWS");
}

START_TEST(cpu_rows_bits) {
  static const char *const OUT[5] = {"out", "lse", "dq", "dk", "dv"};
  const rumus_dtype d = _i ? RUMUS_BF16 : RUMUS_F32;
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  for (size_t ci = 0; ci < NROWS_CASES; ci++) {
    const acase *c = &ROWS_CASES[ci];
    if (d != RUMUS_F32 && ci != 2 && ci != 5) continue;
    inputs in = make_inputs(c, d, RUMUS_F32, 500 + ci);
    const size_t row = c->mnd ? c->mshape[c->mnd - 1] : 0;
    for (size_t e = 0; e < in.nm; e++)
      if (e % 5 == 0 || (e >= 2 * row && e < 3 * row)) in.mask[e] = -INFINITY;
    const size_t n[5] = {in.nq, in.nq / c->D, in.nq, in.nk, in.nk};
    float *one[5], *got[5];
    rows_run(ctx, &in, "1", one);
    for (int nr = 2; nr <= 4; nr += 2) {
      rows_run(ctx, &in, nr == 2 ? "2" : "4", got);
      for (int o = 0; o < 5; o++) {
        ck_assert_msg(memcmp(one[o], got[o], n[o] * sizeof(float)) == 0,
                      "%s differs from one row per work-item with %d "
                      "(case %zu, %s)", OUT[o], nr, ci, tu_dtype_name(d));
        free(got[o]);
      }
    }
    for (int o = 0; o < 5; o++) free(one[o]);
    free_inputs(&in);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Tiles --------------------------------------------------------------- */

/* Partial tiles of the GPU variant's tiled kernels in every dimension
 * (queries and keys past a multiple of 64 and of 16, D = 40: a partial
 * head-dim chunk and output block), causal and not, with a mask, under no
 * override (F32: the default tiles), "off" (the work-group kernels), the
 * default tiling forced ("default"), two RUMUS_ATTENTION_TILE overrides
 * (non-square tiles and blocks, other chunk depths), an invalid override
 * (ignored: the work-group kernels run), and different forward and
 * backward overrides (RUMUS_ATTENTION_FWD_TILE, RUMUS_ATTENTION_BWD_TILE:
 * two programs), and the code choices: RUMUS_ATTENTION_PREFETCH=1
 * (global loads overlapping the previous chunk's product) and
 * RUMUS_ATTENTION_DBUF=1 (two local buffers per chunk; an odd number of
 * chunks at D = 40), alone and together, RUMUS_ATTENTION_INTERIOR=0 and
 * 3 (every tile tested against the matrix, the diagonal and the mask, or
 * none wholly inside, in both sets; the default skips the test in the
 * backward alone) and RUMUS_ATTENTION_EXP2=0 and 3 (scores in
 * natural-log units in both sets, or in log2 units with exp2 in both; the
 * default takes log2 units in the backward alone).  The third case has tiles wholly inside the matrix (no mask,
 * not causal). */
static const char *const TILINGS[][7] = {
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    {"off", NULL, NULL, NULL, NULL, NULL, NULL},
    {"default", NULL, NULL, NULL, NULL, NULL, NULL},
    {"32x16x2x4x8x4", NULL, NULL, NULL, NULL, NULL, NULL},
    {"16x48x4x3x16x16", NULL, NULL, NULL, NULL, NULL, NULL},
    {"64x64x3x4", NULL, NULL, NULL, NULL, NULL, NULL},
    {NULL, "64x32x4x4x32", "32x64x2x4x8x16", NULL, NULL, NULL, NULL},
    {"default", NULL, NULL, "1", NULL, NULL, NULL},
    {"default", NULL, NULL, NULL, "1", NULL, NULL},
    {"64x64x4x4x16x16", NULL, NULL, "1", "1", NULL, NULL},
    {"16x48x4x3x16x16", NULL, NULL, NULL, "1", NULL, "1"},
    {"default", NULL, NULL, NULL, NULL, "0", NULL},
    {"default", NULL, NULL, NULL, NULL, "3", NULL},
    {"default", NULL, NULL, NULL, NULL, NULL, "0"},
    {"default", NULL, NULL, NULL, NULL, NULL, "3"},
};
#define NTILINGS (sizeof TILINGS / sizeof TILINGS[0])

static const char *const TILE_VARS[7] = {
    "RUMUS_ATTENTION_TILE",     "RUMUS_ATTENTION_FWD_TILE",
    "RUMUS_ATTENTION_BWD_TILE", "RUMUS_ATTENTION_PREFETCH",
    "RUMUS_ATTENTION_DBUF",     "RUMUS_ATTENTION_INTERIOR",
    "RUMUS_ATTENTION_EXP2"};

START_TEST(tilings) {
  static const acase C[3] = {
      {2, 1, 130, 67, 40, 1, 2, {130, 67}, 0},
      {1, 2, 17, 145, 40, 0, 0, {0}, 0},
      {1, 1, 130, 67, 40, 0, 0, {0}, 0},
  };
  rumus_ctx *ctx = tu_ctx();
  for (int e = 0; e < 7; e++)
    if (TILINGS[_i][e]) setenv(TILE_VARS[e], TILINGS[_i][e], 1);
  for (int c = 0; c < 3; c++) {
    inputs in = make_inputs(&C[c], RUMUS_F32, RUMUS_F32, 500 + (uint64_t)c);
    wants w = make_wants(&in);
    run_case_on(ctx, &in, &w, RUMUS_VARIANT_GPU);
    free_wants(&w);
    free_inputs(&in);
  }
  for (int e = 0; e < 7; e++) unsetenv(TILE_VARS[e]);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The tiled kernels on 16-bit storage (RUMUS_ATTENTION_TILE=default: the
 * work-group kernels run for them otherwise), F16 then BF16: odd D with
 * a causal 2-D mask of the other 16-bit type, and D = 40 with partial
 * query and key tiles. */
START_TEST(tilings_typed) {
  static const acase C[2] = {
      {1, 2, 7, 9, 7, 1, 2, {7, 9}, 0},
      {1, 1, 70, 67, 40, 1, 0, {0}, 0},
  };
  const rumus_dtype d = _i ? RUMUS_BF16 : RUMUS_F16;
  rumus_ctx *ctx = tu_ctx();
  setenv("RUMUS_ATTENTION_TILE", "default", 1);
  for (int c = 0; c < 2; c++) {
    inputs in = make_inputs(&C[c], d, d == RUMUS_F16 ? RUMUS_BF16 : RUMUS_F16,
                            600 + (uint64_t)c);
    wants w = make_wants(&in);
    run_case_on(ctx, &in, &w, RUMUS_VARIANT_GPU);
    free_wants(&w);
    free_inputs(&in);
  }
  unsetenv("RUMUS_ATTENTION_TILE");
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Finite differences -------------------------------------------------- */

/* L = sum(g * out) of the float64 forward at q, k, v (one perturbed). */
static double loss_of(const ref_attention_shape *rs, const float *q,
                      const float *k, const float *v, const float *g,
                      size_t nq, double *out) {
  ref_attention_fwd(rs, q, k, v, out, NULL);
  double l = 0;
  for (size_t i = 0; i < nq; i++) l += (double)g[i] * out[i];
  return l;
}

/* d L / d x[i] for every element of x (one of in's q, k, v). */
static void numeric_grad(const inputs *in, float *x, size_t n, double *num) {
  const double h = 1e-2;
  double *out = tu_malloc(in->nq * sizeof *out);
  for (size_t i = 0; i < n; i++) {
    const float x0 = x[i];
    double l[2];
    for (int s = 0; s < 2; s++) {
      x[i] = x0 + (float)(s ? -h : h);
      l[s] = loss_of(&in->rs, in->q, in->k, in->v, in->dout, in->nq, out);
    }
    x[i] = x0;
    num[i] = (l[0] - l[1]) / (2 * h);
  }
  free(out);
}

/* The device backward (F32, both variants) against central differences
 * of the reference forward: causal with a broadcast 2-D mask, Tq != Tk,
 * odd D. */
START_TEST(bwd_finite_differences) {
  const acase c = {1, 2, 5, 7, 7, 1, 2, {5, 7}, 0};
  rumus_ctx *ctx = tu_ctx();
  inputs in = make_inputs(&c, RUMUS_F32, RUMUS_F32, 42);
  wants w = make_wants(&in);
  double *num = tu_malloc(in.nk * sizeof *num);
  float *xs[3] = {in.q, in.k, in.v};
  double *ws[3] = {w.dq, w.dk, w.dv};
  const size_t ns[3] = {in.nq, in.nk, in.nk};
  for (int x = 0; x < 3; x++) {
    numeric_grad(&in, xs[x], ns[x], num);
    for (size_t i = 0; i < ns[x]; i++) ws[x][i] = num[i];
  }
  /* The device against the numeric gradients, under the loose tolerance
   * of the header. */
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    dev t = make_dev(ctx, &in);
    const rumus_attention_params p = params_of(&c);
    TU_OK(ctx, rumus_attention_fwd(ctx, &p, t.q.t, t.k.t, t.v.t, t.mask.t,
                                   t.out.t, t.lse.t));
    TU_OK(ctx, rumus_attention_bwd(ctx, &p, t.q.t, t.k.t, t.v.t, t.mask.t,
                                   t.out.t, t.lse.t, t.dout.t, t.dq.t, t.dk.t,
                                   t.dv.t));
    check_t("attention_fd_dq", ctx, t.dq.t, w.dq, in.nq, 1e-3, 1e-2);
    check_t("attention_fd_dk", ctx, t.dk.t, w.dk, in.nk, 1e-3, 1e-2);
    check_t("attention_fd_dv", ctx, t.dv.t, w.dv, in.nk, 1e-3, 1e-2);
    free_dev(ctx, &t);
  }
  free(num);
  free_wants(&w);
  free_inputs(&in);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Bad arguments ------------------------------------------------------- */

/* The tensors of the bad-argument tests: a valid call's (q, k, v, o, lse,
 * dout, dq, dk, dv: B 2, H 3, Tq 5, Tk 6, D 8) and ones that break one
 * rule each. */
typedef struct {
  rumus_tensor *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv, *kd, *kb, *kh,
      *vt, *k3, *qbig, *lbad, *l2, *mok, *mbad, *m5, *m1, *mb, *mi, *q16, *li;
} bad_set;

static bad_set bad_make(rumus_ctx *ctx) {
  const size_t sq[4] = {2, 3, 5, 8}, sk[4] = {2, 3, 6, 8}, sl[3] = {2, 3, 5};
  const size_t s_d[4] = {2, 3, 6, 9}, s_b[4] = {1, 3, 6, 8},
               s_h[4] = {2, 2, 6, 8}, s_t[4] = {2, 3, 7, 8},
               s_3[3] = {3, 6, 8}, s_big[4] = {1, 1, 2, 257},
               s_l[3] = {2, 3, 6}, s_l2[2] = {6, 5}, m_ok[2] = {5, 6},
               m_bad[2] = {5, 4}, m_5[5] = {1, 2, 3, 5, 6},
               m_1[1] = {6}, m_b[4] = {3, 1, 5, 6};
  const rumus_dtype f = RUMUS_F32;
  bad_set b = {
      tu_tensor(ctx, f, 4, sq, NULL),    tu_tensor(ctx, f, 4, sk, NULL),
      tu_tensor(ctx, f, 4, sk, NULL),    tu_tensor(ctx, f, 4, sq, NULL),
      tu_tensor(ctx, f, 3, sl, NULL),    tu_tensor(ctx, f, 4, sq, NULL),
      tu_tensor(ctx, f, 4, sq, NULL),    tu_tensor(ctx, f, 4, sk, NULL),
      tu_tensor(ctx, f, 4, sk, NULL),    tu_tensor(ctx, f, 4, s_d, NULL),
      tu_tensor(ctx, f, 4, s_b, NULL),   tu_tensor(ctx, f, 4, s_h, NULL),
      tu_tensor(ctx, f, 4, s_t, NULL),   tu_tensor(ctx, f, 3, s_3, NULL),
      tu_tensor(ctx, f, 4, s_big, NULL), tu_tensor(ctx, f, 3, s_l, NULL),
      tu_tensor(ctx, f, 2, s_l2, NULL),  tu_tensor(ctx, RUMUS_F16, 2, m_ok, NULL),
      tu_tensor(ctx, f, 2, m_bad, NULL), tu_tensor(ctx, f, 5, m_5, NULL),
      tu_tensor(ctx, f, 1, m_1, NULL),   tu_tensor(ctx, f, 4, m_b, NULL),
      tu_tensor(ctx, RUMUS_I32, 2, m_ok, NULL),
      tu_tensor_typed(ctx, RUMUS_F16, 4, sq, NULL),
      tu_tensor(ctx, RUMUS_F16, 3, sl, NULL)};
  return b;
}

static void bad_free(rumus_ctx *ctx, bad_set *b) {
  tu_free_all(ctx, b->q, b->k, b->v, b->o, b->lse, b->dout, b->dq, b->dk,
              b->dv, b->kd, b->kb, b->kh, b->vt, b->k3, b->qbig, b->lbad,
              b->l2, b->mok, b->mbad, b->m5, b->m1, b->mb, b->mi, b->q16,
              b->li, NULL);
}

/* Every check of the forward, with its exact status; nothing enqueued. */
START_TEST(bad_args_fwd) {
  rumus_ctx *ctx = tu_ctx();
  bad_set b = bad_make(ctx);
  const rumus_attention_params neg = {-1.0f, 0}, inf = {INFINITY, 0},
                               nan = {NAN, 1};
  TU_STATUS(RUMUS_ENULL,
            rumus_attention_fwd(NULL, NULL, b.q, b.k, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ENULL,
            rumus_attention_fwd(ctx, NULL, NULL, b.k, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ENULL,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, NULL, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ENULL,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, NULL, NULL, b.lse));
  TU_STATUS(RUMUS_EDTYPE,
            rumus_attention_fwd(ctx, NULL, b.q16, b.k, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_EDTYPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, b.mi, b.o, b.lse));
  TU_STATUS(RUMUS_EDTYPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.li));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.kd, b.v, NULL, b.o, b.lse));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "D = 8"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.kb, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.kh, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.vt, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k3, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.k3, b.k, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_ESHAPE, rumus_attention_fwd(ctx, NULL, b.qbig, b.qbig, b.qbig,
                                              NULL, b.qbig, NULL));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, NULL, b.dk, b.lse));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lbad));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.l2));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, b.mbad, b.o, b.lse));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "Tk = 6"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, b.m5, b.o, b.lse));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, b.m1, b.o, b.lse));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, b.mb, b.o, b.lse));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_fwd(ctx, &neg, b.q, b.k, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_fwd(ctx, &inf, b.q, b.k, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_fwd(ctx, &nan, b.q, b.k, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, NULL, b.q, b.lse));
  bad_free(ctx, &b);
}
END_TEST

/* The backward's checks; a tensor of another context; valid calls. */
START_TEST(bad_args_bwd) {
  rumus_ctx *ctx = tu_ctx();
  bad_set b = bad_make(ctx);
  const size_t sk[4] = {2, 3, 6, 8};
  const rumus_attention_params neg = {-1.0f, 0};
  /* The backward: out and lse required, outputs checked like inputs. */
  TU_STATUS(RUMUS_ENULL,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, NULL,
                                b.dout, b.dq, b.dk, b.dv));
  TU_STATUS(RUMUS_ENULL,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, NULL, b.lse,
                                b.dout, b.dq, b.dk, b.dv));
  TU_STATUS(RUMUS_ENULL,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                NULL, b.dq, b.dk, b.dv));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lbad,
                                b.dout, b.dq, b.dk, b.dv));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dk, b.dq, b.dk, b.dv));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, b.dk, NULL, NULL));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, NULL, b.dq, NULL));
  TU_STATUS(RUMUS_ESHAPE,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, b.mbad, b.o, b.lse,
                                b.dout, b.dq, b.dk, b.dv));
  TU_STATUS(RUMUS_EDTYPE,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, b.q16, b.dk, b.dv));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_bwd(ctx, &neg, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, b.dq, b.dk, b.dv));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, b.dq, b.dk, b.dk));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, b.dout, b.dk, b.dv));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, b.dq, b.v, b.dv));
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *ok_ = tu_tensor(other, RUMUS_F32, 4, sk, NULL);
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_fwd(ctx, NULL, b.q, ok_, b.v, NULL, b.o, b.lse));
  TU_STATUS(RUMUS_EINVAL,
            rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, NULL, b.o, b.lse,
                                b.dout, b.dq, ok_, b.dv));
  rumus_tensor_free(ok_);
  TU_OK(other, rumus_ctx_free(other));
  /* Valid calls: a broadcast F16 mask on F32 data, no lse, no gradients. */
  TU_OK(ctx, rumus_tensor_fill(b.q, 0.5f));
  TU_OK(ctx, rumus_tensor_fill(b.k, 0.25f));
  TU_OK(ctx, rumus_tensor_fill(b.v, 1.0f));
  TU_OK(ctx, rumus_tensor_fill(b.mok, 0.0f));
  TU_OK(ctx, rumus_attention_fwd(ctx, NULL, b.q, b.k, b.v, b.mok, b.o, NULL));
  TU_OK(ctx, rumus_attention_bwd(ctx, NULL, b.q, b.k, b.v, b.mok, b.o, b.lse,
                                 b.dout, NULL, NULL, NULL));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  bad_free(ctx, &b);
}
END_TEST

/* B = 0 or Tq = 0 writes nothing; no keys: see masked_rows. */
START_TEST(empty) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s0[4] = {0, 2, 3, 8}, s1[4] = {1, 2, 0, 8}, s2[4] = {1, 2, 4, 8};
  const size_t l0[3] = {0, 2, 3}, l1[3] = {1, 2, 0};
  rumus_tensor *a = tu_tensor(ctx, RUMUS_F32, 4, s0, NULL),
               *b = tu_tensor(ctx, RUMUS_F32, 4, s0, NULL),
               *la = tu_tensor(ctx, RUMUS_F32, 3, l0, NULL),
               *q = tu_tensor(ctx, RUMUS_F32, 4, s1, NULL),
               *o = tu_tensor(ctx, RUMUS_F32, 4, s1, NULL),
               *dq = tu_tensor(ctx, RUMUS_F32, 4, s1, NULL),
               *lq = tu_tensor(ctx, RUMUS_F32, 3, l1, NULL),
               *k = tu_tensor(ctx, RUMUS_F32, 4, s2, NULL),
               *dk = tu_tensor(ctx, RUMUS_F32, 4, s2, NULL),
               *dv = tu_tensor(ctx, RUMUS_F32, 4, s2, NULL);
  TU_OK(ctx, rumus_attention_fwd(ctx, NULL, a, a, a, NULL, b, la));
  TU_OK(ctx, rumus_attention_fwd(ctx, NULL, q, k, k, NULL, o, lq));
  /* Tq = 0: dk and dv are 0. */
  TU_OK(ctx, rumus_tensor_fill(dk, NAN));
  TU_OK(ctx, rumus_tensor_fill(dv, NAN));
  TU_OK(ctx, rumus_attention_bwd(ctx, NULL, q, k, k, NULL, o, lq, o, dq, dk, dv));
  float *g = tu_download(ctx, dk), *h = tu_download(ctx, dv);
  for (size_t i = 0; i < 64; i++) ck_assert(g[i] == 0.0f && h[i] == 0.0f);
  free(g);
  free(h);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, a, b, la, q, o, dq, lq, k, dk, dv, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("attention");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, shapes_f32, 0, (int)NSHAPES);
  tcase_add_loop_test(core, shapes_typed, 0, 2 * (int)NTYPED);
  tcase_add_loop_test(core, masks, 0, (int)NMASKS);
  tcase_add_test(core, bwd_finite_differences);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, masked_rows);
  tcase_add_loop_test(limits, nan_rows, 0, 3);
  tcase_add_loop_test(limits, same_bits, 0, 2);
  tcase_add_loop_test(limits, tilings, 0, (int)NTILINGS);
  tcase_add_loop_test(limits, tilings_typed, 0, 2);
  tcase_add_test(limits, empty);
  suite_add_tcase(s, limits);
  TCase *rows = tu_tcase("cpu_rows");
  tcase_add_loop_test(rows, cpu_rows_bits, 0, 2);
  suite_add_tcase(s, rows);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_args_fwd);
  tcase_add_test(errors, bad_args_bwd);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
