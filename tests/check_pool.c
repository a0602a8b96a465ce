/*
 * check_pool.c - 2-D max, average and adaptive average pooling, forward
 * and backward, against the float64 reference (ref/pool.c, whose
 * backwards scatter, independently of the device's gathers), with every
 * storage type on both variants, over odd shapes: 1x1 images, 7x5 inputs,
 * kernels 1, 2, 3, 5, 7, stride 1 < kernel (overlapping windows), stride
 * 2 on odd sizes, padding, dilation, ceil mode on and off,
 * count_include_pad both ways, a divisor override, adaptive bins with out
 * > in and out not dividing in, widths that are multiples of 4 (the GPU
 * variant's 4-wide stores), N 1 and 3, C 1 and 5; tensors in guarded
 * buffers and at odd element offsets.  Both variants run
 * the same kernels: their results must be the same bits.
 *
 * Tolerances (|got - want| <= atol + rtol |want|), F32 storage, inputs in
 * [-2, 2), dy in [-1, 1):
 *   max fwd            exact: values are copied, indices equal the
 *                      reference's (ties keep the first, on the stored
 *                      values, in both)
 *   max bwd            atol 1e-6, rtol 1e-6 (float sums of a few dy)
 *   avg / adaptive fwd atol 1e-5, rtol 1e-5 (float sums of up to 49
 *                      values, one division)
 *   avg / adaptive bwd atol 1e-6, rtol 1e-5
 *   every backward against central differences (h = 1e-2) of the float64
 *   reference forward, F32 device backward: atol 1e-4, rtol 1e-3
 *   (max pooling on distinct inputs 0.1 apart, so no step moves an argmax)
 * F16 and BF16: the reference takes the stored inputs; storing adds half
 * an ulp of the type (tests/tu_dtype.h: F16 atol + 2^-25, rtol + 2^-11;
 * BF16 rtol + 2^-8).
 * Launches past 2^30 work-items (4 GiB tensors) are not tested.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

/* One shape and window: N, C, H, W and the window's parameters. */
typedef struct {
  size_t n, c, h, w;
  rumus_pool2d_params p;
} pool_case;

/* kh, kw, sh, sw, ph, pw, dh, dw, ceil, count_include_pad, divisor */
static const pool_case MAX_CASES[] = {
    {1, 1, 1, 1, {1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0}},  /* 1x1 image */
    {3, 5, 7, 5, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},  /* stride 2, odd */
    {3, 5, 7, 5, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},  /* ceil mode */
    {1, 1, 7, 5, {2, 2, 1, 1, 1, 1, 1, 1, 0, 1, 0}},  /* overlap, k 2 */
    {3, 1, 7, 5, {5, 5, 1, 1, 2, 2, 1, 1, 0, 1, 0}},  /* overlap, k 5 */
    {1, 5, 9, 9, {7, 7, 3, 3, 3, 3, 1, 1, 1, 1, 0}},  /* k 7, ceil */
    {1, 1, 7, 5, {2, 2, 2, 2, 0, 0, 1, 1, 1, 1, 0}},  /* partial last */
    {1, 5, 7, 7, {3, 3, 1, 1, 1, 1, 2, 2, 0, 1, 0}},  /* dilation 2 */
    {3, 1, 7, 5, {3, 2, 2, 1, 1, 1, 1, 2, 1, 1, 0}},  /* mixed axes */
    {1, 1, 2, 2, {2, 2, 1, 1, 1, 1, 3, 3, 0, 1, 0}},  /* empty window */
    /* W a multiple of 4: the GPU variant's 4-wide stores */
    {2, 3, 6, 8, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},  /* k 2, s 2 */
    {1, 2, 7, 12, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}}, /* k 3, s 2, p 1 */
    {2, 3, 7, 16, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}}, /* OW = 8: quads */
    {1, 2, 6, 8, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},  /* ceil, H even */
    /* The CPU variant's vectors of 8 (4) outputs: strides 1, 2, 4, odd
     * widths (the last block moved back, loads ending at the row's end),
     * padding and dilation outside them, ceil mode; planes of width 1 */
    {1, 2, 5, 37, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {2, 1, 9, 35, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 3, 5, 34, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},
    {1, 2, 6, 21, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 8, 44, {4, 4, 4, 4, 0, 0, 1, 1, 0, 1, 0}},
    {1, 1, 6, 22, {5, 5, 4, 4, 2, 2, 1, 1, 0, 1, 0}},  /* 4 lanes */
    {1, 2, 7, 40, {3, 3, 2, 2, 1, 1, 2, 2, 0, 1, 0}},  /* dilation 2 */
    {3, 2, 9, 1, {3, 1, 2, 1, 1, 0, 1, 1, 0, 1, 0}},   /* width 1 */
    {1, 2, 4, 33, {2, 2, 2, 2, 1, 1, 1, 1, 0, 1, 0}},  /* k 2, p 1 */
    {1, 1, 5, 36, {3, 3, 2, 2, 0, 0, 1, 1, 0, 1, 0}},  /* k 3, p 0 */
    {1, 1, 3, 66, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},  /* F32 rows, W 66 */
    /* over 512 rows: several rows a work-item, across planes */
    {4, 20, 13, 9, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
};
static const pool_case AVG_CASES[] = {
    {1, 1, 1, 1, {1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0}},
    {3, 5, 7, 5, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {3, 5, 7, 5, {3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}},
    {1, 1, 7, 5, {2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {3, 1, 7, 5, {5, 5, 1, 1, 2, 2, 1, 1, 0, 1, 0}},
    {1, 5, 9, 9, {7, 7, 3, 3, 3, 3, 1, 1, 1, 0, 0}},
    {1, 5, 9, 9, {7, 7, 3, 3, 3, 3, 1, 1, 1, 1, 0}},
    {1, 1, 7, 5, {3, 3, 2, 2, 0, 0, 1, 1, 0, 1, 5}},  /* divisor 5 */
    {3, 1, 7, 5, {3, 2, 1, 2, 1, 1, 1, 1, 1, 1, 0}},
    {2, 3, 6, 8, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},  /* W % 4 == 0 */
    {1, 2, 5, 12, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
    {1, 2, 4, 8, {2, 2, 2, 2, 0, 0, 1, 1, 1, 0, 3}},  /* 2 x 2, divisor 3 */
    /* The CPU variant's vectors (see MAX_CASES): tiling windows (the
     * backward a map), stride 1 (a gather with lane divisors), both
     * count_include_pad, ceil mode with a partial last window */
    {1, 2, 5, 37, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {1, 1, 5, 23, {2, 2, 2, 2, 0, 0, 1, 1, 1, 0, 0}},
    {2, 1, 6, 21, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
    {2, 1, 6, 21, {3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {1, 2, 4, 13, {5, 5, 1, 1, 2, 2, 1, 1, 0, 0, 0}},
    {1, 1, 4, 6, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},   /* 4 lanes */
    {1, 1, 5, 19, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 7}},  /* divisor 7 */
    {1, 3, 9, 35, {3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0}},
    {1, 2, 8, 44, {4, 4, 4, 4, 0, 0, 1, 1, 0, 1, 0}},
    {3, 2, 9, 1, {3, 1, 2, 1, 1, 0, 1, 1, 0, 0, 0}},   /* width 1 */
    /* over 512 rows: several rows a work-item, across planes */
    {4, 20, 13, 9, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {2, 20, 13, 12, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
    /* stride 1 along w (the CPU variant's rows of dy / divisor): stride
     * 2 along h, 7 output rows over an input row, rows too wide */
    {1, 2, 9, 11, {3, 3, 2, 1, 1, 1, 1, 1, 0, 1, 0}},
    {1, 1, 10, 9, {7, 7, 1, 1, 3, 3, 1, 1, 0, 1, 0}},
    {1, 1, 3, 100, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
};
/* N, C, H, W, OH, OW */
static const size_t ADA_CASES[][6] = {
    {1, 1, 1, 1, 1, 1}, {3, 5, 7, 5, 3, 2}, {1, 1, 7, 5, 1, 1},
    {3, 1, 5, 7, 7, 9}, {1, 5, 1, 1, 3, 3}, {1, 1, 9, 9, 4, 5},
    {3, 5, 10, 10, 5, 5},
    /* to 1 x 1 (the GPU variant's plane reduction and broadcast): several
     * chains a lane; 32 planes of 9 a work-group, the last group short */
    {2, 3, 23, 17, 1, 1}, {4, 9, 3, 3, 1, 1},
    /* W a multiple of 4 (4-wide stores), bins not dividing the input */
    {2, 3, 8, 12, 3, 5}, {1, 2, 12, 8, 3, 2},
    /* bins dividing the input, 1, 2 or 4 wide: the CPU variant's average
     * pooling vectors */
    {2, 3, 12, 28, 3, 7}, {1, 2, 6, 16, 3, 8}, {1, 1, 5, 9, 5, 9},
    {3, 1, 4, 20, 2, 5},
    /* over 512 rows (several a work-item, across planes), as average
     * pooling and not */
    {4, 40, 6, 8, 6, 4}, {4, 40, 7, 5, 3, 2},
    /* bins dividing a plane of more than 2048 */
    {1, 2, 64, 64, 8, 8},
    /* to 1 x 1 over 512 planes: the CPU variant's plane kernels take
     * several a work-item */
    {8, 80, 3, 5, 1, 1},
};
#define N_MAX (sizeof MAX_CASES / sizeof MAX_CASES[0])
#define N_AVG (sizeof AVG_CASES / sizeof AVG_CASES[0])
#define N_ADA (sizeof ADA_CASES / sizeof ADA_CASES[0])

enum { TOL_MAX_BWD, TOL_AVG_FWD, TOL_AVG_BWD };
static void tol_of(rumus_dtype d, int which, double *atol, double *rtol) {
  static const double ATOL[3] = {1e-6, 1e-5, 1e-6};
  static const double RTOL[3] = {1e-6, 1e-5, 1e-5};
  *atol = ATOL[which] + tu_store_atol(d);
  *rtol = RTOL[which] + tu_store_rtol(d);
}

static ref_pool2d ref_of(const rumus_pool2d_params *p) {
  ref_pool2d r = {(long)p->kernel_h,   (long)p->kernel_w,
                  (long)p->stride_h,   (long)p->stride_w,
                  (long)p->padding_h,  (long)p->padding_w,
                  (long)p->dilation_h, (long)p->dilation_w,
                  p->ceil_mode,        p->count_include_pad,
                  p->divisor_override};
  return r;
}

/* n uniform values in [lo, hi) rounded to d (malloc'ed). */
static float *rand_typed(tu_rng *r, rumus_dtype d, size_t n, float lo,
                         float hi) {
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(r, x, n, lo, hi);
  tu_round_to(d, x, n);
  return x;
}

/* Asserts that two downloads are the same bits (both variants). */
static void check_same_bits(const char *what, const void *a, const void *b,
                            size_t bytes) {
  ck_assert_msg(memcmp(a, b, bytes) == 0,
                "%s: the variants' results differ", what);
}

/* ---- core: every op against the reference -------------------------------- */

/* The pieces of one typed run: host inputs, tensors and the reference. */
typedef struct {
  rumus_dtype d;
  size_t planes, nin, nout, oh, ow;
  float *x, *dy;
  rumus_tensor *tx, *ty, *tdy, *tdx, *tidx;
} run;

static void run_setup(rumus_ctx *ctx, run *r, rumus_dtype d,
                      const size_t in[4], size_t oh, size_t ow, int with_idx,
                      uint64_t seed) {
  tu_rng g;
  tu_rng_seed(&g, seed);
  r->d = d;
  r->planes = in[0] * in[1];
  r->nin = r->planes * in[2] * in[3];
  r->nout = r->planes * oh * ow;
  r->oh = oh;
  r->ow = ow;
  const size_t out[4] = {in[0], in[1], oh, ow};
  r->x = rand_typed(&g, d, r->nin, -2.0f, 2.0f);
  r->dy = rand_typed(&g, d, r->nout, -1.0f, 1.0f);
  r->tx = tu_tensor_typed(ctx, d, 4, in, r->x);
  r->ty = tu_tensor_typed(ctx, d, 4, out, NULL);
  r->tdy = tu_tensor_typed(ctx, d, 4, out, r->dy);
  r->tdx = tu_tensor_typed(ctx, d, 4, in, NULL);
  r->tidx = with_idx ? tu_tensor(ctx, RUMUS_I32, 4, out, NULL) : NULL;
}

/* Fills t with the byte 0x7f (F16 NaN, a huge float or int32): a variant
 * must write every output itself, not keep the other's. */
static void poison(rumus_tensor *t) {
  if (t == NULL) return;
  const size_t bytes = rumus_tensor_nbytes(t);
  unsigned char *b = tu_malloc(bytes);
  memset(b, 0x7f, bytes);
  ck_assert_int_eq(rumus_tensor_upload(t, b, bytes), RUMUS_OK);
  free(b);
}

static void run_poison(run *r) {
  poison(r->ty);
  poison(r->tdx);
  poison(r->tidx);
}

static void run_free(run *r) {
  free(r->x);
  free(r->dy);
  rumus_tensor_free(r->tx);
  rumus_tensor_free(r->ty);
  rumus_tensor_free(r->tdy);
  rumus_tensor_free(r->tdx);
  rumus_tensor_free(r->tidx);
}

static void name_of(char *buf, size_t len, const char *op, rumus_dtype d,
                    int v, size_t k) {
  snprintf(buf, len, "%s_%s_%s_case%zu", op, tu_dtype_name(d),
           tu_variant_name(tu_variants[v]), k);
}

/* Max pooling, case k, storage d: forward (values exact, indices equal)
 * and backward from the device's indices, both variants, same bits. */
static void max_case(rumus_ctx *ctx, size_t k, rumus_dtype d) {
  const pool_case *pc = &MAX_CASES[k];
  const size_t in[4] = {pc->n, pc->c, pc->h, pc->w};
  size_t oh, ow;
  TU_OK(ctx, rumus_pool2d_output_size(ctx, &pc->p, pc->h, pc->w, &oh, &ow));
  run r;
  run_setup(ctx, &r, d, in, oh, ow, 1, 10 + k);
  const ref_pool2d rp = ref_of(&pc->p);
  double *want = tu_malloc(r.nout * sizeof *want);
  double *want_dx = tu_malloc(r.nin * sizeof *want_dx);
  int32_t *want_idx = tu_malloc(r.nout * sizeof *want_idx);
  ref_maxpool2d_fwd(r.x, r.planes, (long)pc->h, (long)pc->w, &rp, (long)oh,
                    (long)ow, want, want_idx);
  ref_maxpool2d_bwd(r.dy, want_idx, r.planes, (long)pc->h, (long)pc->w,
                    (long)oh, (long)ow, want_dx);
  double atol, rtol;
  tol_of(d, TOL_MAX_BWD, &atol, &rtol);
  float *prev[2] = {NULL, NULL};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    run_poison(&r);
    char name[96];
    TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &pc->p, r.tx, r.ty, r.tidx));
    TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &pc->p, r.tdy, r.tidx, r.tdx));
    TU_OK(ctx, rumus_ctx_sync(ctx));
    float *y = tu_download_f32(ctx, r.ty), *dx = tu_download_f32(ctx, r.tdx);
    int32_t *idx = tu_malloc(r.nout * sizeof *idx);
    TU_OK(ctx, rumus_tensor_download(r.tidx, idx, r.nout * sizeof *idx));
    name_of(name, sizeof name, "maxpool2d_fwd", d, v, k);
    tu_check_close(name, y, want, r.nout, 0.0, 0.0);
    for (size_t i = 0; i < r.nout; i++)
      ck_assert_msg(idx[i] == want_idx[i], "%s: index %zu is %d, expected %d",
                    name, i, idx[i], want_idx[i]);
    name_of(name, sizeof name, "maxpool2d_bwd", d, v, k);
    tu_check_close(name, dx, want_dx, r.nin, atol, rtol);
    if (v == 1) {
      check_same_bits(name, prev[0], y, r.nout * sizeof *y);
      check_same_bits(name, prev[1], dx, r.nin * sizeof *dx);
    }
    free(prev[0]);
    free(prev[1]);
    prev[0] = y;
    prev[1] = dx;
    free(idx);
  }
  free(prev[0]);
  free(prev[1]);
  free(want);
  free(want_dx);
  free(want_idx);
  run_free(&r);
}

/* The average pooling of one case (p NULL: adaptive) on both variants:
 * forward and backward against want and want_dx, the same bits on both
 * (but for the adaptive forward to 1 x 1, which the GPU variant sums as a
 * tree: the same bits run to run, checked here too). */
static void avg_variants(rumus_ctx *ctx, run *r, const rumus_pool2d_params *p,
                         rumus_dtype d, size_t k, const double *want,
                         const double *want_dx) {
  const int fwd_tree = p == NULL && r->oh == 1 && r->ow == 1;
  const char *fwd = p ? "avgpool2d_fwd" : "adaptive_avgpool2d_fwd";
  const char *bwd = p ? "avgpool2d_bwd" : "adaptive_avgpool2d_bwd";
  double fa, fr, ba, br;
  tol_of(d, TOL_AVG_FWD, &fa, &fr);
  tol_of(d, TOL_AVG_BWD, &ba, &br);
  float *prev[2] = {NULL, NULL};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    run_poison(r);
    char name[96];
    if (p) {
      TU_OK(ctx, rumus_avgpool2d_fwd(ctx, p, r->tx, r->ty));
      TU_OK(ctx, rumus_avgpool2d_bwd(ctx, p, r->tdy, r->tdx));
    } else {
      TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, r->tx, r->ty));
      TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, r->tdy, r->tdx));
    }
    float *y = tu_download_f32(ctx, r->ty), *dx = tu_download_f32(ctx, r->tdx);
    name_of(name, sizeof name, fwd, d, v, k);
    tu_check_close(name, y, want, r->nout, fa, fr);
    name_of(name, sizeof name, bwd, d, v, k);
    tu_check_close(name, dx, want_dx, r->nin, ba, br);
    if (v == 1) {
      if (!fwd_tree) check_same_bits(name, prev[0], y, r->nout * sizeof *y);
      check_same_bits(name, prev[1], dx, r->nin * sizeof *dx);
    }
    if (fwd_tree) { /* run to run */
      name_of(name, sizeof name, fwd, d, v, k);
      TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, r->tx, r->ty));
      float *y2 = tu_download_f32(ctx, r->ty);
      ck_assert_msg(memcmp(y, y2, r->nout * sizeof *y) == 0,
                    "%s: a second run differs", name);
      free(y2);
    }
    free(prev[0]);
    free(prev[1]);
    prev[0] = y;
    prev[1] = dx;
  }
  free(prev[0]);
  free(prev[1]);
}

/* Average pooling, case k, storage d, both variants, same bits. */
static void avg_case(rumus_ctx *ctx, size_t k, rumus_dtype d) {
  const pool_case *pc = &AVG_CASES[k];
  const size_t in[4] = {pc->n, pc->c, pc->h, pc->w};
  size_t oh, ow;
  TU_OK(ctx, rumus_pool2d_output_size(ctx, &pc->p, pc->h, pc->w, &oh, &ow));
  run r;
  run_setup(ctx, &r, d, in, oh, ow, 0, 30 + k);
  const ref_pool2d rp = ref_of(&pc->p);
  double *want = tu_malloc(r.nout * sizeof *want);
  double *want_dx = tu_malloc(r.nin * sizeof *want_dx);
  ref_avgpool2d_fwd(r.x, r.planes, (long)pc->h, (long)pc->w, &rp, (long)oh,
                    (long)ow, want);
  ref_avgpool2d_bwd(r.dy, r.planes, (long)pc->h, (long)pc->w, &rp, (long)oh,
                    (long)ow, want_dx);
  avg_variants(ctx, &r, &pc->p, d, k, want, want_dx);
  free(want);
  free(want_dx);
  run_free(&r);
}

/* Adaptive average pooling, case k, storage d, both variants. */
static void ada_case(rumus_ctx *ctx, size_t k, rumus_dtype d) {
  const size_t *s = ADA_CASES[k];
  const size_t in[4] = {s[0], s[1], s[2], s[3]};
  run r;
  run_setup(ctx, &r, d, in, s[4], s[5], 0, 50 + k);
  double *want = tu_malloc(r.nout * sizeof *want);
  double *want_dx = tu_malloc(r.nin * sizeof *want_dx);
  ref_adaptive_avgpool2d_fwd(r.x, r.planes, (long)s[2], (long)s[3],
                             (long)s[4], (long)s[5], want);
  ref_adaptive_avgpool2d_bwd(r.dy, r.planes, (long)s[2], (long)s[3],
                             (long)s[4], (long)s[5], want_dx);
  avg_variants(ctx, &r, NULL, d, k, want, want_dx);
  free(want);
  free(want_dx);
  run_free(&r);
}

/* _i: the storage type; every case of the op in one context. */
START_TEST(maxpool_cases) {
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < N_MAX; k++) max_case(ctx, k, tu_dtypes[_i]);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(avgpool_cases) {
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < N_AVG; k++) avg_case(ctx, k, tu_dtypes[_i]);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(adaptive_cases) {
  rumus_ctx *ctx = tu_ctx();
  for (size_t k = 0; k < N_ADA; k++) ada_case(ctx, k, tu_dtypes[_i]);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- core: backwards against finite differences ------------------------- */

enum { OP_MAX, OP_AVG, OP_ADA };

/* The float64 reference forward of op on x (1 x 2 x 7 x 5). */
static void ref_fwd(int op, const rumus_pool2d_params *p, const float *x,
                    size_t oh, size_t ow, double *y) {
  const ref_pool2d rp = ref_of(p);
  int32_t idx[2 * 7 * 5];
  if (op == OP_MAX)
    ref_maxpool2d_fwd(x, 2, 7, 5, &rp, (long)oh, (long)ow, y, idx);
  else if (op == OP_AVG)
    ref_avgpool2d_fwd(x, 2, 7, 5, &rp, (long)oh, (long)ow, y);
  else
    ref_adaptive_avgpool2d_fwd(x, 2, 7, 5, (long)oh, (long)ow, y);
}

/* The device's backward of op at x with dy = g (F32, variant v). */
static float *device_bwd(rumus_ctx *ctx, int op, const rumus_pool2d_params *p,
                         const float *x, const float *g, size_t oh,
                         size_t ow) {
  const size_t in[4] = {1, 2, 7, 5}, out[4] = {1, 2, oh, ow};
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 4, in, x),
               *ty = tu_tensor(ctx, RUMUS_F32, 4, out, NULL),
               *tg = tu_tensor(ctx, RUMUS_F32, 4, out, g),
               *tdx = tu_tensor(ctx, RUMUS_F32, 4, in, NULL),
               *ti = tu_tensor(ctx, RUMUS_I32, 4, out, NULL);
  if (op == OP_MAX) {
    TU_OK(ctx, rumus_maxpool2d_fwd(ctx, p, tx, ty, ti));
    TU_OK(ctx, rumus_maxpool2d_bwd(ctx, p, tg, ti, tdx));
  } else if (op == OP_AVG) {
    TU_OK(ctx, rumus_avgpool2d_bwd(ctx, p, tg, tdx));
  } else {
    TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, tg, tdx));
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  float *dx = tu_download(ctx, tdx);
  rumus_tensor_free(tx);
  rumus_tensor_free(ty);
  rumus_tensor_free(tg);
  rumus_tensor_free(tdx);
  rumus_tensor_free(ti);
  return dx;
}

/* d/dx_i of L = sum g y(x) by central differences of the reference. */
static void numeric_grad(int op, const rumus_pool2d_params *p, const float *x,
                         const float *g, size_t oh, size_t ow, double *num) {
  enum { NIN = 2 * 7 * 5 };
  const size_t nout = 2 * oh * ow;
  float xp[NIN];
  double *y = tu_malloc(nout * sizeof *y);
  for (size_t i = 0; i < NIN; i++) {
    double l[2];
    float at[2];
    for (int s = 0; s < 2; s++) {
      memcpy(xp, x, sizeof xp);
      xp[i] = at[s] = x[i] + (s ? -1e-2f : 1e-2f);
      ref_fwd(op, p, xp, oh, ow, y);
      l[s] = 0;
      for (size_t j = 0; j < nout; j++) l[s] += (double)g[j] * y[j];
    }
    num[i] = (l[0] - l[1]) / ((double)at[0] - at[1]);
  }
  free(y);
}

/* _i: max, avg, adaptive on 1 x 2 x 7 x 5 with overlapping windows. */
START_TEST(bwd_finite_differences) {
  enum { NIN = 2 * 7 * 5 };
  const int op = _i;
  const rumus_pool2d_params p = {3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0};
  size_t oh = 3, ow = 4;
  rumus_ctx *ctx = tu_ctx();
  if (op != OP_ADA)
    TU_OK(ctx, rumus_pool2d_output_size(ctx, &p, 7, 5, &oh, &ow));
  tu_rng r;
  tu_rng_seed(&r, 70 + (uint64_t)op);
  float x[NIN], g[2 * 7 * 5];
  /* Distinct values 0.1 apart (a shuffled ramp): no step of 1e-2 changes
   * which element of a window is largest. */
  for (size_t i = 0; i < NIN; i++) x[i] = 0.1f * (float)i - 3.0f;
  for (size_t i = NIN - 1; i > 0; i--) {
    const size_t j = tu_rand_u32(&r) % (i + 1);
    const float t = x[i];
    x[i] = x[j];
    x[j] = t;
  }
  tu_fill_uniform(&r, g, 2 * oh * ow, -1, 1);
  double num[NIN];
  numeric_grad(op, &p, x, g, oh, ow, num);
  static const char *const NAMES[3] = {"maxpool2d_fd", "avgpool2d_fd",
                                       "adaptive_avgpool2d_fd"};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float *dx = device_bwd(ctx, op, &p, x, g, oh, ow);
    tu_check_close(NAMES[op], dx, num, NIN, 1e-4, 1e-3);
    free(dx);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- limits ------------------------------------------------------------ */

/* The 4 x 4 plane x4 at width W = 4, or twice side by side at W = 8 (the
 * GPU variant's 2 x 2 forward kernel), and its window indices idx4 at
 * that width. */
static void special_layout(const float *x4, const int32_t *idx4,
                           size_t W, float *x, int32_t *idx) {
  for (size_t i = 0; i < 4 * W; i++) x[i] = x4[(i / W) * 4 + i % 4];
  for (size_t o = 0; o < W; o++) {
    const size_t ow = o % (W / 2);
    const size_t t = (size_t)idx4[(o / (W / 2)) * 2 + ow % 2];
    idx[o] = (int32_t)((t / 4) * W + t % 4 + (ow >= 2 ? 4 : 0));
  }
}

/* NaN wins (the window's last NaN, as PyTorch), ties keep the first, an
 * all -inf window gives -inf at its first element; the backward sends dy
 * to exactly those indices.  4 x 4 plane (and the same twice side by
 * side), 2 x 2 windows, stride 2. */
START_TEST(max_special_values) {
  const float nan = NAN, inf = INFINITY;
  const float x4[16] = {1,    nan,  -inf, -inf, /* */
                        3,    nan,  -inf, -inf, /* */
                        5,    5,    nan,  2,    /* */
                        2,    5,    7,    -inf};
  const int32_t idx4[4] = {5, 2, 8, 10};
  const double y4[4] = {NAN, -INFINITY, 5.0, NAN};
  const float dy4[4] = {1, 2, 3, 4};
  const rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(2, 2);
  rumus_ctx *ctx = tu_ctx();
  for (int k = 0; k < 6; k++) {
    const rumus_dtype d = tu_dtypes[k % 3];
    const size_t W = k < 3 ? 4 : 8, no = W, ni = 4 * W;
    const size_t in[4] = {1, 1, 4, W}, out[4] = {1, 1, 2, W / 2};
    float x[32], dy[8];
    int32_t want_idx[8];
    double want_y[8];
    special_layout(x4, idx4, W, x, want_idx);
    for (size_t o = 0; o < no; o++) {
      dy[o] = dy4[(o / (W / 2)) * 2 + o % 2] + (float)(o % (W / 2) / 2);
      want_y[o] = y4[(o / (W / 2)) * 2 + o % 2];
    }
    rumus_tensor *tx = tu_tensor_typed(ctx, d, 4, in, x),
                 *ty = tu_tensor_typed(ctx, d, 4, out, NULL),
                 *tg = tu_tensor_typed(ctx, d, 4, out, dy),
                 *tdx = tu_tensor_typed(ctx, d, 4, in, NULL),
                 *ti = tu_tensor(ctx, RUMUS_I32, 4, out, NULL);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p, tx, ty, ti));
      TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, tg, ti, tdx));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      float *y = tu_download_f32(ctx, ty), *dx = tu_download_f32(ctx, tdx);
      int32_t idx[8];
      TU_OK(ctx, rumus_tensor_download(ti, idx, no * sizeof *idx));
      double want_dx[32] = {0};
      for (size_t i = 0; i < no; i++) want_dx[want_idx[i]] += dy[i];
      tu_check_close("max_special_fwd", y, want_y, no, 0, 0);
      tu_check_close("max_special_bwd", dx, want_dx, ni, 0, 0);
      for (size_t i = 0; i < no; i++)
        ck_assert_msg(idx[i] == want_idx[i],
                      "%s W %zu window %zu: index %d, not %d",
                      tu_dtype_name(d), W, i, idx[i], want_idx[i]);
      free(y);
      free(dx);
    }
    rumus_tensor_free(tx);
    rumus_tensor_free(ty);
    rumus_tensor_free(tg);
    rumus_tensor_free(tdx);
    rumus_tensor_free(ti);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Ties, signed zeros, -inf and a few NaNs on rows wide enough for the
 * CPU variant's vectors (8 lanes, pairs of blocks; NaN lanes fall back to
 * the exact rule): indices as the reference's (first max in window
 * order, the last NaN), values the bits of x at them (NaN: a NaN).  Storage
 * tu_dtypes[_i], both variants, three windows. */
START_TEST(max_ties_in_vectors) {
  static const float pick[8] = {-INFINITY, -1.0f, -0.0f, 0.0f,
                                0.0f,      1.0f,  2.0f,  2.0f};
  static const rumus_pool2d_params ps[3] = {
      {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0},  /* k3s2p1 */
      {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0},  /* stride 1 */
      {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}}; /* k2s2 */
  const rumus_dtype d = tu_dtypes[_i];
  const size_t in[4] = {2, 3, 7, 75}, nin = 2 * 3 * 7 * 75, planes = 6;
  rumus_ctx *ctx = tu_ctx();
  tu_rng g;
  tu_rng_seed(&g, 91);
  float *x = tu_malloc(nin * sizeof *x);
  for (size_t i = 0; i < nin; i++) {
    const uint32_t u = tu_rand_u32(&g) % 256;
    x[i] = u < 3 ? NAN : pick[u % 8];
  }
  rumus_tensor *tx = tu_tensor_typed(ctx, d, 4, in, x);
  float *xd = tu_download_f32(ctx, tx);
  for (int k = 0; k < 3; k++) {
    size_t oh, ow;
    TU_OK(ctx, rumus_pool2d_output_size(ctx, &ps[k], 7, 75, &oh, &ow));
    const size_t out[4] = {2, 3, oh, ow}, no = planes * oh * ow;
    double *want = tu_malloc(no * sizeof *want);
    int32_t *want_idx = tu_malloc(no * sizeof *want_idx),
            *idx = tu_malloc(no * sizeof *idx);
    const ref_pool2d rp = ref_of(&ps[k]);
    ref_maxpool2d_fwd(xd, planes, 7, 75, &rp, (long)oh, (long)ow, want,
                      want_idx);
    rumus_tensor *ty = tu_tensor_typed(ctx, d, 4, out, NULL),
                 *ti = tu_tensor(ctx, RUMUS_I32, 4, out, NULL);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &ps[k], tx, ty, ti));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      float *y = tu_download_f32(ctx, ty);
      TU_OK(ctx, rumus_tensor_download(ti, idx, no * sizeof *idx));
      for (size_t i = 0; i < no; i++) {
        const size_t plane = i / (oh * ow);
        const float *at = &xd[plane * 7 * 75 + (idx[i] >= 0 ? idx[i] : 0)];
        /* (a NaN's payload need not survive 16-bit storage) */
        const int same = isnan(*at) ? isnan(y[i]) != 0
                                    : memcmp(&y[i], at, sizeof *y) == 0;
        ck_assert_msg(idx[i] == want_idx[i] && idx[i] >= 0 && same,
                      "%s %s window %d output %zu: index %d (value %g), "
                      "expected %d", tu_dtype_name(d),
                      tu_variant_name(tu_variants[v]), k, i, idx[i],
                      (double)y[i], want_idx[i]);
      }
      free(y);
    }
    rumus_tensor_free(ty);
    rumus_tensor_free(ti);
    free(want);
    free(want_idx);
    free(idx);
  }
  rumus_tensor_free(tx);
  free(x);
  free(xd);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Adaptive pooling of 3 x 5 x 7 x 5 to 1 x 1 (the GPU variant's own
 * kernels) at odd element offsets with guard bytes, variant v. */
static void guarded_adaptive_o1(rumus_ctx *ctx, rumus_dtype d, const float *x,
                                const float *g, int v) {
  const size_t in[4] = {3, 5, 7, 5}, out[4] = {3, 5, 1, 1};
  const size_t nin = 3 * 5 * 7 * 5, planes = 15;
  double fa, fr, ba, br, want[3 * 5 * 7 * 5];
  tol_of(d, TOL_AVG_FWD, &fa, &fr);
  tol_of(d, TOL_AVG_BWD, &ba, &br);
  tu_guarded gx = tu_guarded_typed_odd(ctx, d, 4, in, x, 3);
  tu_guarded gy = tu_guarded_typed_odd(ctx, d, 4, out, NULL, 1);
  tu_guarded gg = tu_guarded_typed_odd(ctx, d, 4, out, g, 5);
  tu_guarded gdx = tu_guarded_typed_odd(ctx, d, 4, in, NULL, 7);
  char name[64];
  TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, gx.t, gy.t));
  float *got = tu_download_f32(ctx, gy.t);
  ref_adaptive_avgpool2d_fwd(x, planes, 7, 5, 1, 1, want);
  snprintf(name, sizeof name, "guarded_adaptive_o1_fwd_%d", v);
  tu_check_close(name, got, want, planes, fa, fr);
  free(got);
  TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, gg.t, gdx.t));
  got = tu_download_f32(ctx, gdx.t);
  ref_adaptive_avgpool2d_bwd(g, planes, 7, 5, 1, 1, want);
  snprintf(name, sizeof name, "guarded_adaptive_o1_bwd_%d", v);
  tu_check_close(name, got, want, nin, ba, br);
  free(got);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_guarded_check_free_all(ctx, &gx, &gy, &gg, &gdx, NULL);
}

/* Every op in borrowed buffers at an offset (4096 bytes in) with guard
 * bytes on both sides, storage tu_dtypes[_i], against the reference:
 * 3 x 5 x 7 x 5, overlapping 3 x 3 windows with stride 2 and padding. */
START_TEST(guards_and_offsets) {
  const rumus_dtype d = tu_dtypes[_i];
  const rumus_pool2d_params p = {3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0};
  const size_t in[4] = {3, 5, 7, 5}, out[4] = {3, 5, 4, 3};
  const size_t nin = 3 * 5 * 7 * 5, nout = 3 * 5 * 4 * 3, planes = 15;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 90 + (uint64_t)_i);
  float *x = rand_typed(&r, d, nin, -2, 2), *g = rand_typed(&r, d, nout, -1, 1);
  tu_guarded gx = tu_guarded_typed(ctx, d, 4, in, x);
  tu_guarded gy = tu_guarded_typed(ctx, d, 4, out, NULL);
  tu_guarded gg = tu_guarded_typed(ctx, d, 4, out, g);
  tu_guarded gdx = tu_guarded_typed(ctx, d, 4, in, NULL);
  tu_guarded gi = tu_guarded_tensor(ctx, RUMUS_I32, 4, out, NULL);
  const ref_pool2d rp = ref_of(&p);
  double *want = tu_malloc(nin * sizeof *want), fa, fr, ba, br, ma, mr;
  int32_t *idx = tu_malloc(nout * sizeof *idx);
  tol_of(d, TOL_AVG_FWD, &fa, &fr);
  tol_of(d, TOL_AVG_BWD, &ba, &br);
  tol_of(d, TOL_MAX_BWD, &ma, &mr);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p, gx.t, gy.t, gi.t));
    float *got = tu_download_f32(ctx, gy.t);
    ref_maxpool2d_fwd(x, planes, 7, 5, &rp, 4, 3, want, idx);
    tu_check_close("guarded_maxpool2d_fwd", got, want, nout, 0, 0);
    free(got);
    TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, gg.t, gi.t, gdx.t));
    got = tu_download_f32(ctx, gdx.t);
    ref_maxpool2d_bwd(g, idx, planes, 7, 5, 4, 3, want);
    tu_check_close("guarded_maxpool2d_bwd", got, want, nin, ma, mr);
    free(got);
    TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &p, gx.t, gy.t));
    got = tu_download_f32(ctx, gy.t);
    ref_avgpool2d_fwd(x, planes, 7, 5, &rp, 4, 3, want);
    tu_check_close("guarded_avgpool2d_fwd", got, want, nout, fa, fr);
    free(got);
    TU_OK(ctx, rumus_avgpool2d_bwd(ctx, &p, gg.t, gdx.t));
    got = tu_download_f32(ctx, gdx.t);
    ref_avgpool2d_bwd(g, planes, 7, 5, &rp, 4, 3, want);
    tu_check_close("guarded_avgpool2d_bwd", got, want, nin, ba, br);
    free(got);
    TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, gx.t, gy.t));
    got = tu_download_f32(ctx, gy.t);
    ref_adaptive_avgpool2d_fwd(x, planes, 7, 5, 4, 3, want);
    tu_check_close("guarded_adaptive_fwd", got, want, nout, fa, fr);
    free(got);
    TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, gg.t, gdx.t));
    got = tu_download_f32(ctx, gdx.t);
    ref_adaptive_avgpool2d_bwd(g, planes, 7, 5, 4, 3, want);
    tu_check_close("guarded_adaptive_bwd", got, want, nin, ba, br);
    free(got);
    guarded_adaptive_o1(ctx, d, x, g, v);
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_guarded_check_free_all(ctx, &gx, &gy, &gg, &gdx, &gi, NULL);
  free(x);
  free(g);
  free(want);
  free(idx);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A tensor of type d wrapped `elem` elements into buf, holding data. */
static rumus_tensor *wrap_at(rumus_ctx *ctx, cl_mem buf, rumus_dtype d,
                             const size_t shape[4], size_t elem,
                             const float *data) {
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, d, 4, shape, buf,
                               elem * rumus_dtype_size(d), &t));
  if (data)
    TU_OK(ctx, rumus_tensor_upload_f32(t, data, rumus_tensor_numel(t)));
  return t;
}

/* Tensors at odd element offsets of one buffer (x at 3, y at 201, dy at
 * 457, dx at 711, indices at 901 of 4-byte elements), storage
 * tu_dtypes[_i]: 1 x 5 x 7 x 5, 2 x 2 windows, stride 1 (overlapping),
 * padding 1; adaptive 3 x 2. */
START_TEST(odd_offsets) {
  const rumus_dtype d = tu_dtypes[_i];
  const rumus_pool2d_params p = {2, 2, 1, 1, 1, 1, 1, 1, 0, 1, 0};
  const size_t in[4] = {1, 5, 7, 5}, out[4] = {1, 5, 8, 6},
               ada[4] = {1, 5, 3, 2};
  const size_t nin = 175, nout = 240, nada = 30;
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              2048 * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  tu_rng r;
  tu_rng_seed(&r, 95 + (uint64_t)_i);
  float *x = rand_typed(&r, d, nin, -2, 2), *g = rand_typed(&r, d, nout, -1, 1);
  rumus_tensor *tx = wrap_at(ctx, buf, d, in, 3, x),
               *ty = wrap_at(ctx, buf, d, out, 201, NULL),
               *tg = wrap_at(ctx, buf, d, out, 457, g),
               *tdx = wrap_at(ctx, buf, d, in, 711, NULL),
               *ti = wrap_at(ctx, buf, RUMUS_I32, out, 901, NULL),
               *tya = wrap_at(ctx, buf, d, ada, 201, NULL),
               *tga = wrap_at(ctx, buf, d, ada, 457, g);
  const ref_pool2d rp = ref_of(&p);
  double *want = tu_malloc(nout * sizeof *want), fa, fr, ba, br, ma, mr;
  int32_t *idx = tu_malloc(nout * sizeof *idx);
  tol_of(d, TOL_AVG_FWD, &fa, &fr);
  tol_of(d, TOL_AVG_BWD, &ba, &br);
  tol_of(d, TOL_MAX_BWD, &ma, &mr);
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p, tx, ty, ti));
  float *got = tu_download_f32(ctx, ty);
  ref_maxpool2d_fwd(x, 5, 7, 5, &rp, 8, 6, want, idx);
  tu_check_close("odd_offsets_maxpool2d_fwd", got, want, nout, 0, 0);
  free(got);
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, tg, ti, tdx));
  got = tu_download_f32(ctx, tdx);
  ref_maxpool2d_bwd(g, idx, 5, 7, 5, 8, 6, want);
  tu_check_close("odd_offsets_maxpool2d_bwd", got, want, nin, ma, mr);
  free(got);
  TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &p, tx, ty));
  got = tu_download_f32(ctx, ty);
  ref_avgpool2d_fwd(x, 5, 7, 5, &rp, 8, 6, want);
  tu_check_close("odd_offsets_avgpool2d_fwd", got, want, nout, fa, fr);
  free(got);
  TU_OK(ctx, rumus_avgpool2d_bwd(ctx, &p, tg, tdx));
  got = tu_download_f32(ctx, tdx);
  ref_avgpool2d_bwd(g, 5, 7, 5, &rp, 8, 6, want);
  tu_check_close("odd_offsets_avgpool2d_bwd", got, want, nin, ba, br);
  free(got);
  TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, tx, tya));
  got = tu_download_f32(ctx, tya);
  ref_adaptive_avgpool2d_fwd(x, 5, 7, 5, 3, 2, want);
  tu_check_close("odd_offsets_adaptive_fwd", got, want, nada, fa, fr);
  free(got);
  TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, tga, tdx));
  got = tu_download_f32(ctx, tdx);
  ref_adaptive_avgpool2d_bwd(g, 5, 7, 5, 3, 2, want);
  tu_check_close("odd_offsets_adaptive_bwd", got, want, nin, ba, br);
  free(got);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(x);
  free(g);
  free(want);
  free(idx);
  tu_free_all(ctx, tx, ty, tg, tdx, ti, tya, tga, NULL);
  clReleaseMemObject(buf);
}
END_TEST

/* N or C of 0: checked, nothing enqueued. */
/* The 2 x 2, stride 2 kernels of the GPU variant on 1 x 2 x 4 x 8 with
 * x, y and dx at offsets 3 (element accesses) and 4 (4-wide accesses at
 * an offset), y and dx between guards, storage d, both variants. */
/* k2_offsets' forwards (and the 3 x 3 stride 2 max backward, dy tg
 * holding g): x at 200 + off of buf, y and dx off elements past a guard;
 * the 2 x 2 max indices into ti (which the backwards then read). */
static void k2_forwards(rumus_ctx *ctx, cl_mem buf, rumus_dtype d,
                        size_t off, const float *x, const float *g,
                        rumus_tensor *tg, rumus_tensor *ti) {
  const rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(2, 2);
  const size_t in[4] = {1, 2, 4, 8}, out[4] = {1, 2, 2, 4};
  const ref_pool2d rp = ref_of(&p);
  double want[16], fa, fr;
  int32_t idx[16];
  tol_of(d, TOL_AVG_FWD, &fa, &fr);
  rumus_tensor *tx = wrap_at(ctx, buf, d, in, 200 + off, x);
  tu_guarded gy = tu_guarded_typed_odd(ctx, d, 4, out, NULL, off);
  rumus_tensor *ty = gy.t;
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p, tx, ty, ti));
  float *got = tu_download_f32(ctx, ty);
  int32_t gi[16];
  TU_OK(ctx, rumus_tensor_download(ti, gi, sizeof gi));
  ref_maxpool2d_fwd(x, 2, 4, 8, &rp, 2, 4, want, idx);
  tu_check_close("k2_offsets_maxpool2d_fwd", got, want, 16, 0, 0);
  ck_assert_msg(memcmp(gi, idx, sizeof idx) == 0,
                "k2_offsets_maxpool2d_fwd: the indices differ");
  free(got);
  TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &p, tx, ty));
  got = tu_download_f32(ctx, ty);
  ref_avgpool2d_fwd(x, 2, 4, 8, &rp, 2, 4, want);
  tu_check_close("k2_offsets_avgpool2d_fwd", got, want, 16, fa, fr);
  free(got);
  /* 3 x 3, stride 2, padding 1 gives the same output shape here (its
   * own max forward on the GPU variant); ti is restored after. */
  const rumus_pool2d_params p3 = {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0};
  const ref_pool2d rp3 = ref_of(&p3);
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p3, tx, ty, ti));
  got = tu_download_f32(ctx, ty);
  TU_OK(ctx, rumus_tensor_download(ti, gi, sizeof gi));
  ref_maxpool2d_fwd(x, 2, 4, 8, &rp3, 2, 4, want, idx);
  tu_check_close("k2_offsets_maxpool2d_fwd_k3s2", got, want, 16, 0, 0);
  ck_assert_msg(memcmp(gi, idx, sizeof idx) == 0,
                "k2_offsets_maxpool2d_fwd_k3s2: the indices differ");
  free(got);
  double wdx[64], ma, mr;
  tol_of(d, TOL_MAX_BWD, &ma, &mr);
  tu_guarded gdx = tu_guarded_typed_odd(ctx, d, 4, in, NULL, off);
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p3, tg, ti, gdx.t));
  got = tu_download_f32(ctx, gdx.t);
  ref_maxpool2d_bwd(g, idx, 2, 4, 8, 2, 4, wdx);
  tu_check_close("k2_offsets_maxpool2d_bwd_k3s2", got, wdx, 64, ma, mr);
  free(got);
  tu_guarded_check_free(ctx, &gdx);
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p, tx, ty, ti));
  rumus_tensor_free(tx);
  tu_guarded_check_free(ctx, &gy);
}

START_TEST(k2_offsets) {
  const rumus_dtype d = tu_dtypes[_i];
  const rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(2, 2);
  const size_t in[4] = {1, 2, 4, 8}, out[4] = {1, 2, 2, 4};
  const ref_pool2d rp = ref_of(&p);
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              512 * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  tu_rng r;
  tu_rng_seed(&r, 97 + (uint64_t)_i);
  float *x = rand_typed(&r, d, 64, -2, 2), *g = rand_typed(&r, d, 16, -1, 1);
  double want[64], ma, mr, ba, br;
  int32_t idx[16];
  tol_of(d, TOL_MAX_BWD, &ma, &mr);
  tol_of(d, TOL_AVG_BWD, &ba, &br);
  ref_maxpool2d_fwd(x, 2, 4, 8, &rp, 2, 4, want, idx);
  rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 4, out, idx);
  rumus_tensor *tg = wrap_at(ctx, buf, d, out, 1, g);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (size_t off = 3; off <= 4; off++) {
      k2_forwards(ctx, buf, d, off, x, g, tg, ti);
      tu_guarded gdx = tu_guarded_typed_odd(ctx, d, 4, in, NULL, off);
      rumus_tensor *tdx = gdx.t;
      TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, tg, ti, tdx));
      float *got = tu_download_f32(ctx, tdx);
      ref_maxpool2d_bwd(g, idx, 2, 4, 8, 2, 4, want);
      tu_check_close("k2_offsets_maxpool2d_bwd", got, want, 64, ma, mr);
      free(got);
      TU_OK(ctx, rumus_avgpool2d_bwd(ctx, &p, tg, tdx));
      got = tu_download_f32(ctx, tdx);
      ref_avgpool2d_bwd(g, 2, 4, 8, &rp, 2, 4, want);
      tu_check_close("k2_offsets_avgpool2d_bwd", got, want, 64, ba, br);
      free(got);
      tu_guarded_check_free(ctx, &gdx);
    }
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(x);
  free(g);
  tu_free_all(ctx, ti, tg, NULL);
  clReleaseMemObject(buf);
}
END_TEST

START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t in[4] = {0, 3, 7, 5}, out[4] = {0, 3, 3, 2};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 4, in, NULL),
               *y = tu_tensor(ctx, RUMUS_F32, 4, out, NULL),
               *i = tu_tensor(ctx, RUMUS_I32, 4, out, NULL);
  const rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(2, 2);
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p, x, y, i));
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, y, i, x));
  TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &p, x, y));
  TU_OK(ctx, rumus_avgpool2d_bwd(ctx, &p, y, x));
  TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, x, y));
  TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, y, x));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, x, y, i, NULL);
}
END_TEST

/* ---- errors ------------------------------------------------------------ */

/* Window parameters and the output-size helper. */
START_TEST(bad_parameters) {
  rumus_ctx *ctx = tu_ctx();
  size_t oh, ow;
  rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(3, 3);
  TU_OK(ctx, rumus_pool2d_output_size(ctx, &p, 7, 5, &oh, &ow));
  ck_assert(oh == 2 && ow == 1);
  p.ceil_mode = 1;
  TU_OK(ctx, rumus_pool2d_output_size(NULL, &p, 7, 5, &oh, &ow));
  ck_assert(oh == 3 && ow == 2);
  TU_STATUS(RUMUS_ENULL, rumus_pool2d_output_size(ctx, NULL, 7, 5, &oh, &ow));
  TU_STATUS(RUMUS_ENULL, rumus_pool2d_output_size(ctx, &p, 7, 5, NULL, &ow));
  const struct {
    rumus_pool2d_params p;
    int status;
    const char *msg;
  } BAD[] = {
      {{0, 3, 1, 1, 0, 0, 1, 1, 0, 1, 0}, RUMUS_EINVAL, "kernel_h is 0"},
      {{3, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0}, RUMUS_EINVAL, "kernel_w is 0"},
      {{3, 3, 0, 1, 0, 0, 1, 1, 0, 1, 0}, RUMUS_EINVAL, "stride_h is 0"},
      {{3, 3, 1, 0, 0, 0, 1, 1, 0, 1, 0}, RUMUS_EINVAL, "stride_w is 0"},
      {{3, 3, 1, 1, 0, 0, 0, 1, 0, 1, 0}, RUMUS_EINVAL, "dilation_h is 0"},
      {{3, 3, 1, 1, 2, 0, 1, 1, 0, 1, 0}, RUMUS_EINVAL, "padding_h 2"},
      {{4, 4, 1, 1, 0, 3, 1, 1, 0, 1, 0}, RUMUS_EINVAL, "padding_w 3"},
      {{9, 3, 1, 1, 0, 0, 1, 1, 0, 1, 0}, RUMUS_ESHAPE, "axis 2 (H)"},
      {{3, 3, 1, 1, 0, 0, 1, 3, 0, 1, 0}, RUMUS_ESHAPE, "axis 3 (W)"},
  };
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    TU_STATUS(BAD[i].status,
              rumus_pool2d_output_size(ctx, &BAD[i].p, 7, 5, &oh, &ow));
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), BAD[i].msg), "%zu: %s", i,
                  rumus_ctx_errmsg(ctx));
  }
  /* The ops give the helper's statuses, and avg pooling's own rules. */
  const size_t in[4] = {1, 2, 7, 5}, out[4] = {1, 2, 7, 5};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 4, in, NULL),
               *y = tu_tensor(ctx, RUMUS_F32, 4, out, NULL),
               *i = tu_tensor(ctx, RUMUS_I32, 4, out, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_maxpool2d_fwd(ctx, &BAD[0].p, x, y, i));
  TU_STATUS(RUMUS_ESHAPE, rumus_avgpool2d_fwd(ctx, &BAD[7].p, x, y));
  TU_STATUS(RUMUS_EINVAL, rumus_avgpool2d_bwd(ctx, &BAD[5].p, y, x));
  rumus_pool2d_params q = {3, 3, 1, 1, 1, 1, 2, 1, 0, 1, 0};
  TU_STATUS(RUMUS_EINVAL, rumus_avgpool2d_fwd(ctx, &q, x, y));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "dilation 2 x 1"));
  q.dilation_h = 1;
  q.divisor_override = -2;
  TU_STATUS(RUMUS_EINVAL, rumus_avgpool2d_bwd(ctx, &q, y, x));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "divisor_override -2"));
  q.divisor_override = 0;
  TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &q, x, y)); /* 3 x 3, stride 1, pad 1 */
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, x, y, i, NULL);
}
END_TEST

/* Ranks, extents, types, NULLs, another context. */
START_TEST(bad_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t in[4] = {3, 5, 7, 5}, out[4] = {3, 5, 3, 2},
               wrong_c[4] = {3, 4, 3, 2}, wrong_w[4] = {3, 5, 3, 3},
               in3[3] = {5, 7, 5};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 4, in, NULL),
               *y = tu_tensor(ctx, RUMUS_F32, 4, out, NULL),
               *i = tu_tensor(ctx, RUMUS_I32, 4, out, NULL),
               *yc = tu_tensor(ctx, RUMUS_F32, 4, wrong_c, NULL),
               *yw = tu_tensor(ctx, RUMUS_F32, 4, wrong_w, NULL),
               *iw = tu_tensor(ctx, RUMUS_I32, 4, wrong_w, NULL),
               *x3 = tu_tensor(ctx, RUMUS_F32, 3, in3, NULL),
               *y16 = tu_tensor(ctx, RUMUS_F16, 4, out, NULL),
               *if32 = tu_tensor(ctx, RUMUS_F32, 4, out, NULL);
  const rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(2, 2);
  TU_STATUS(RUMUS_ENULL, rumus_maxpool2d_fwd(NULL, &p, x, y, i));
  TU_STATUS(RUMUS_ENULL, rumus_maxpool2d_fwd(ctx, NULL, x, y, i));
  TU_STATUS(RUMUS_ENULL, rumus_maxpool2d_fwd(ctx, &p, NULL, y, i));
  TU_STATUS(RUMUS_ENULL, rumus_maxpool2d_fwd(ctx, &p, x, y, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_maxpool2d_bwd(ctx, &p, y, i, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_avgpool2d_fwd(ctx, &p, x, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_adaptive_avgpool2d_bwd(ctx, NULL, x));
  TU_STATUS(RUMUS_ESHAPE, rumus_maxpool2d_fwd(ctx, &p, x3, y, i));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "x must be 4-D"));
  TU_STATUS(RUMUS_ESHAPE, rumus_avgpool2d_fwd(ctx, &p, x, yc));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "axis 1 (C)"), "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_maxpool2d_fwd(ctx, &p, x, yw, iw));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "y [3, 5, 3, 3] has 3 along "
                                              "axis 3 (W), expected 2"),
                "%s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_maxpool2d_fwd(ctx, &p, x, y, iw));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "indices"));
  TU_STATUS(RUMUS_ESHAPE, rumus_maxpool2d_bwd(ctx, &p, yw, iw, x));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "dy"));
  TU_STATUS(RUMUS_ESHAPE, rumus_avgpool2d_bwd(ctx, &p, y, x3));
  TU_STATUS(RUMUS_ESHAPE, rumus_adaptive_avgpool2d_fwd(ctx, x, yc));
  TU_STATUS(RUMUS_EDTYPE, rumus_maxpool2d_fwd(ctx, &p, x, y16, i));
  TU_STATUS(RUMUS_EDTYPE, rumus_maxpool2d_fwd(ctx, &p, x, y, if32));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "indices"));
  TU_STATUS(RUMUS_EDTYPE, rumus_maxpool2d_fwd(ctx, &p, i, y, i));
  TU_STATUS(RUMUS_EDTYPE, rumus_avgpool2d_bwd(ctx, &p, y16, x));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "dx"));
  TU_STATUS(RUMUS_EDTYPE, rumus_adaptive_avgpool2d_fwd(ctx, x, y16));
  /* Adaptive output extents of 0. */
  const size_t zero_oh[4] = {3, 5, 0, 2};
  rumus_tensor *yz = tu_tensor(ctx, RUMUS_F32, 4, zero_oh, NULL);
  TU_STATUS(RUMUS_ESHAPE, rumus_adaptive_avgpool2d_fwd(ctx, x, yz));
  ck_assert(strstr(rumus_ctx_errmsg(ctx), "axis 2 (OH)"));
  /* Overlap: y in x's bytes (the same tensor). */
  TU_STATUS(RUMUS_EINVAL, rumus_adaptive_avgpool2d_fwd(ctx, x, x));
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 4, in, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_avgpool2d_fwd(ctx, &p, o, y));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  tu_free_all(ctx, x, y, i, yc, yw, iw, x3, y16, if32, yz, NULL);
}
END_TEST

/* ---- GPU variant: the max backward by tiles -------------------------------
 * RUMUS_MAXPOOL_BWD=tile runs maxpool2d_bwd_tile on the GPU variant:
 * the same bits as the quad kernels (=old), against the reference, in
 * guarded buffers at an aligned (0) and an odd (3) element offset; unset,
 * the tiles run where windows overlap. */

/* kh, kw, sh, sw, ph, pw, dh, dw, ceil, count_include_pad, divisor */
/* A case's tensors in guarded buffers at element offset odd: x in [-2, 2)
 * and dy in [-1, 1) (from seed), y and dx empty; their shapes and sizes. */
typedef struct {
  size_t in[4], out[4], oh, ow, planes, nin, nout;
  float *x, *g;
  tu_guarded gx, gy, gg, gdx;
} gcase;

static void gcase_setup(rumus_ctx *ctx, const pool_case *pc, rumus_dtype d,
                        size_t odd, uint64_t seed, gcase *c) {
  TU_OK(ctx, rumus_pool2d_output_size(ctx, &pc->p, pc->h, pc->w, &c->oh,
                                      &c->ow));
  const size_t in[4] = {pc->n, pc->c, pc->h, pc->w};
  const size_t out[4] = {pc->n, pc->c, c->oh, c->ow};
  memcpy(c->in, in, sizeof in);
  memcpy(c->out, out, sizeof out);
  c->planes = pc->n * pc->c;
  c->nin = c->planes * pc->h * pc->w;
  c->nout = c->planes * c->oh * c->ow;
  tu_rng r;
  tu_rng_seed(&r, seed);
  c->x = rand_typed(&r, d, c->nin, -2, 2);
  c->g = rand_typed(&r, d, c->nout, -1, 1);
  /* -0.0 where a kernel that stores a lone term, not 0.0f + it, differs */
  c->x[0] = -0.0f;
  c->g[0] = -0.0f;
  c->gx = tu_guarded_typed_odd(ctx, d, 4, in, c->x, odd);
  c->gy = tu_guarded_typed_odd(ctx, d, 4, out, NULL, odd);
  c->gg = tu_guarded_typed_odd(ctx, d, 4, out, c->g, odd);
  c->gdx = tu_guarded_typed_odd(ctx, d, 4, in, NULL, odd);
}

/* Checks the guards of c's tensors and frees them. */
static void gcase_free(rumus_ctx *ctx, gcase *c) {
  tu_guarded_check_free_all(ctx, &c->gx, &c->gy, &c->gg, &c->gdx, NULL);
  free(c->x);
  free(c->g);
}

static const pool_case TILE_CASES[] = {
    {1, 1, 1, 1, {1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0}},   /* 1x1 image */
    {2, 3, 12, 16, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}}, /* k3s2p1, vec */
    /* the blocks: H odd, ceil mode (an output row past ceil(H / 2)) */
    {2, 3, 13, 8, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 12, 8, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},
    {1, 1, 1, 4, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {3, 5, 7, 5, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},   /* k3s2p1, 7x5 */
    {3, 5, 7, 5, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},   /* ceil mode */
    {1, 2, 6, 8, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},   /* ceil, H even */
    {2, 3, 6, 8, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},   /* k2 */
    {1, 1, 7, 5, {2, 2, 2, 2, 0, 0, 1, 1, 1, 1, 0}},   /* k2, partial */
    {2, 2, 7, 5, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},   /* k3s1p1 */
    {1, 2, 9, 12, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},  /* k3s1p1, vec */
    {3, 2, 11, 13, {5, 5, 3, 3, 2, 2, 1, 1, 0, 1, 0}}, /* k5s3p2 */
    {1, 5, 9, 9, {7, 7, 3, 3, 3, 3, 1, 1, 1, 1, 0}},   /* k7s3p3, ceil */
    {3, 1, 7, 5, {3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0}},   /* mixed axes */
    /* several tiles: 256 columns a tile, rows by 8 */
    {1, 2, 21, 300, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {2, 1, 19, 40, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
};

/* maxpool2d_bwd of case k, storage d, on the GPU variant at element
 * offset odd: the default kernels, then the tiles (which must run), the
 * same bits, against the reference. */
static void tile_case(rumus_ctx *ctx, size_t k, rumus_dtype d, size_t odd) {
  gcase c;
  gcase_setup(ctx, &TILE_CASES[k], d, odd, 300 + k, &c);
  const pool_case *pc = &TILE_CASES[k];
  tu_guarded gi = tu_guarded_tensor_at(ctx, RUMUS_I32, 4, c.out, NULL,
                                       4096 + 4 * odd);
  double *want = tu_malloc(c.nin * sizeof *want), ma, mr;
  int32_t *idx = tu_malloc(c.nout * sizeof *idx);
  tol_of(d, TOL_MAX_BWD, &ma, &mr);
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  setenv("RUMUS_MAXPOOL_BWD", "old", 1);
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &pc->p, c.gx.t, c.gy.t, gi.t));
  TU_OK(ctx, rumus_tensor_download(gi.t, idx, c.nout * sizeof *idx));
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &pc->p, c.gg.t, gi.t, c.gdx.t));
  float *old = tu_download_f32(ctx, c.gdx.t);
  poison(c.gdx.t);
  ck_assert(!tu_kernel_ran(ctx, "maxpool2d_bwd_tile"));
  setenv("RUMUS_MAXPOOL_BWD", "tile", 1);
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &pc->p, c.gg.t, gi.t, c.gdx.t));
  unsetenv("RUMUS_MAXPOOL_BWD");
  char name[96];
  snprintf(name, sizeof name, "maxpool2d_bwd_tile_%s_case%zu_at%zu",
           tu_dtype_name(d), k, odd);
  ck_assert_msg(tu_kernel_ran(ctx, "maxpool2d_bwd_tile"), "%s: not run",
                name);
  float *got = tu_download_f32(ctx, c.gdx.t);
  ref_maxpool2d_bwd(c.g, idx, c.planes, (long)pc->h, (long)pc->w, (long)c.oh,
                    (long)c.ow, want);
  tu_check_close(name, got, want, c.nin, ma, mr);
  check_same_bits(name, old, got, c.nin * sizeof *got);
  /* 3 x 3 windows of stride 2, padding 1 on W = 2 OW, a multiple of 4:
   * the blocks (RUMUS_MAXPOOL_BWD=block), the same bits. */
  const int k3s2 = pc->p.kernel_h == 3 && pc->p.kernel_w == 3 &&
                   pc->p.stride_h == 2 && pc->p.stride_w == 2 &&
                   pc->p.padding_h == 1 && pc->p.padding_w == 1 &&
                   pc->p.dilation_h == 1 && pc->p.dilation_w == 1 &&
                   pc->w == 2 * c.ow && pc->w % 4 == 0;
  if (k3s2) {
    poison(c.gdx.t);
    setenv("RUMUS_MAXPOOL_BWD", "block", 1);
    TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &pc->p, c.gg.t, gi.t, c.gdx.t));
    unsetenv("RUMUS_MAXPOOL_BWD");
    ck_assert_msg(tu_kernel_ran(ctx, "maxpool2d_bwd_k3s2b"),
                  "%s: the blocks did not run", name);
    free(got);
    got = tu_download_f32(ctx, c.gdx.t);
    check_same_bits(name, old, got, c.nin * sizeof *got);
  }
  /* The default: the blocks where they apply, else the tiles where
   * windows overlap (the 1x1 image has none to overlap; the tiles take
   * only shapes the quads take). */
  poison(c.gdx.t);
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &pc->p, c.gg.t, gi.t, c.gdx.t));
  const int overlap = pc->p.stride_h < pc->p.kernel_h ||
                      pc->p.stride_w < pc->p.kernel_w;
  /* One look at the profile (each look forgets what it counted). */
  const char *want_k = k3s2      ? "maxpool2d_bwd_k3s2b"
                       : overlap ? "maxpool2d_bwd_tile"
                                 : NULL;
  ck_assert_msg(want_k ? tu_kernel_ran(ctx, want_k)
                       : !tu_kernel_ran(ctx, "maxpool2d_bwd_tile"),
                "%s: the default did not take %s", name,
                want_k ? want_k : "the quads");
  free(got);
  got = tu_download_f32(ctx, c.gdx.t);
  check_same_bits(name, old, got, c.nin * sizeof *got);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  gcase_free(ctx, &c);
  tu_guarded_check_free(ctx, &gi);
  free(old);
  free(got);
  free(want);
  free(idx);
}

START_TEST(max_bwd_tiles) {
  rumus_ctx *ctx = tu_profiling_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  for (size_t k = 0; k < sizeof TILE_CASES / sizeof TILE_CASES[0]; k++) {
    tile_case(ctx, k, d, 0);
    tile_case(ctx, k, d, 3);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Average pooling shapes for the GPU variant's bands (avgpool2d_*_band,
 * staging at most 2048 floats): planes over that in two or more bands
 * (stride 1 and 2, ceil mode, rows of 300 with a divisor), mixed axes;
 * then windows that do not overlap, which take the bands only when
 * RUMUS_AVGPOOL_BAND=1 forces them (windows that tile the image, and
 * gaps between windows, whose inputs get 0).  3 x 3 windows of stride 1
 * take the 3 x 3 bands (avgpool2d_*_box3, at most 4096 floats staged):
 * padding 0, 1 and mixed, two bands a plane (90 x 70, and 40 x 150 with
 * rows wider than a work-group), a 1 x 1 image, rows of 28 (two row
 * groups a work-group), both divisor rules and an override. */
static const pool_case BAND_CASES[] = {
    {1, 2, 50, 61, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
    {2, 1, 70, 40, {5, 5, 2, 2, 2, 2, 1, 1, 1, 1, 0}},
    {1, 1, 200, 80, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 9, 300, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 7}},
    {2, 3, 7, 5, {3, 2, 1, 2, 1, 1, 1, 1, 1, 0, 0}},
    {2, 3, 12, 28, {4, 4, 4, 4, 0, 0, 1, 1, 0, 1, 0}},
    {1, 1, 40, 100, {2, 2, 3, 3, 0, 0, 1, 1, 0, 1, 0}},
    {1, 1, 90, 70, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
    {1, 1, 40, 150, {3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {2, 3, 7, 5, {3, 3, 1, 1, 0, 0, 1, 1, 0, 0, 0}},
    {1, 2, 1, 9, {3, 3, 1, 1, 1, 0, 1, 1, 0, 0, 0}},
    {2, 2, 1, 1, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
    {2, 3, 28, 28, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
};

/* Whether case pc takes the 3 x 3 bands (pool.c's box3_plan). */
static int box3_case(const pool_case *pc) {
  const rumus_pool2d_params *p = &pc->p;
  return p->kernel_h == 3 && p->kernel_w == 3 && p->stride_h == 1 &&
         p->stride_w == 1 && p->padding_h <= 1 && p->padding_w <= 1;
}

/* Which of the bands' kernels of one direction ran since the last look:
 * bit 0 avgpool2d_<dir>_band, bit 1 avgpool2d_<dir>_box3. */
static int bands_ran(rumus_ctx *ctx, const char *dir) {
  static rumus_kernel_stat ks[256];
  size_t n = 0;
  char band[48], box3[48];
  snprintf(band, sizeof band, "avgpool2d_%s_band", dir);
  snprintf(box3, sizeof box3, "avgpool2d_%s_box3", dir);
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, ks, 256, &n));
  int ran = 0;
  for (size_t i = 0; i < n && i < 256; i++) {
    if (ks[i].launches == 0) continue;
    if (strcmp(ks[i].kernel, band) == 0) ran |= 1;
    if (strcmp(ks[i].kernel, box3) == 0) ran |= 2;
  }
  return ran;
}

/* Runs case pc's forward and backward on (gx, gy) and (gg, gdx) and
 * downloads y and dx; `ran` is what bands_ran must say of both. */
static void band_run(rumus_ctx *ctx, const char *name,
                     const rumus_pool2d_params *p, tu_guarded *gx,
                     tu_guarded *gy, tu_guarded *gg, tu_guarded *gdx,
                     int ran, float **y, float **dx) {
  poison(gy->t);
  poison(gdx->t);
  TU_OK(ctx, rumus_avgpool2d_fwd(ctx, p, gx->t, gy->t));
  int got = bands_ran(ctx, "fwd");
  ck_assert_msg(got == ran, "%s: forward bands ran %d, not %d", name, got,
                ran);
  TU_OK(ctx, rumus_avgpool2d_bwd(ctx, p, gg->t, gdx->t));
  got = bands_ran(ctx, "bwd");
  ck_assert_msg(got == ran, "%s: backward bands ran %d, not %d", name, got,
                ran);
  *y = tu_download_f32(ctx, gy->t);
  *dx = tu_download_f32(ctx, gdx->t);
}

/* Case pc's outputs y, dx against the float64 reference. */
static void band_check_ref(const char *name, const gcase *c,
                           const pool_case *pc, rumus_dtype d,
                           const float *y, const float *dx) {
  const ref_pool2d rp = ref_of(&pc->p);
  double *want = tu_malloc(c->nout * sizeof *want);
  double *want_dx = tu_malloc(c->nin * sizeof *want_dx), fa, fr, ba, br;
  ref_avgpool2d_fwd(c->x, c->planes, (long)pc->h, (long)pc->w, &rp,
                    (long)c->oh, (long)c->ow, want);
  ref_avgpool2d_bwd(c->g, c->planes, (long)pc->h, (long)pc->w, &rp,
                    (long)c->oh, (long)c->ow, want_dx);
  tol_of(d, TOL_AVG_FWD, &fa, &fr);
  tol_of(d, TOL_AVG_BWD, &ba, &br);
  tu_check_close(name, y, want, c->nout, fa, fr);
  tu_check_close(name, dx, want_dx, c->nin, ba, br);
  free(want);
  free(want_dx);
}

/* Band case k, storage d, GPU variant, element offset odd: the quads
 * (RUMUS_AVGPOOL_BAND=0), then the bands (the default where windows
 * overlap, else forced; 3 x 3 windows of stride 1 the 3 x 3 bands, then
 * with RUMUS_AVGPOOL_BOX3=0 the general ones): against the reference,
 * the same bits, guards intact. */
static void band_case(rumus_ctx *ctx, size_t k, rumus_dtype d, size_t odd) {
  gcase c;
  gcase_setup(ctx, &BAND_CASES[k], d, odd, 500 + k, &c);
  const pool_case *pc = &BAND_CASES[k];
  char name[96];
  snprintf(name, sizeof name, "avgpool2d_band_%s_case%zu_at%zu",
           tu_dtype_name(d), k, odd);
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  setenv("RUMUS_AVGPOOL_K3S2", "0", 1); /* the bands, not the blocks */
  float *y[3], *dx[3];
  const int box3 = box3_case(pc), runs = box3 ? 3 : 2;
  setenv("RUMUS_AVGPOOL_BAND", "0", 1);
  band_run(ctx, name, &pc->p, &c.gx, &c.gy, &c.gg, &c.gdx, 0, &y[0], &dx[0]);
  const int overlap = pc->p.stride_h < pc->p.kernel_h ||
                      pc->p.stride_w < pc->p.kernel_w;
  if (overlap)
    unsetenv("RUMUS_AVGPOOL_BAND");
  else
    setenv("RUMUS_AVGPOOL_BAND", "1", 1);
  band_run(ctx, name, &pc->p, &c.gx, &c.gy, &c.gg, &c.gdx, box3 ? 2 : 1,
           &y[1], &dx[1]);
  if (box3) {
    setenv("RUMUS_AVGPOOL_BOX3", "0", 1);
    band_run(ctx, name, &pc->p, &c.gx, &c.gy, &c.gg, &c.gdx, 1, &y[2],
             &dx[2]);
    unsetenv("RUMUS_AVGPOOL_BOX3");
  }
  unsetenv("RUMUS_AVGPOOL_BAND");
  unsetenv("RUMUS_AVGPOOL_K3S2");
  band_check_ref(name, &c, pc, d, y[1], dx[1]);
  for (int i = 0; i < runs; i += i == 0 ? 2 : 1) {
    check_same_bits(name, y[i], y[1], c.nout * sizeof *y[1]);
    check_same_bits(name, dx[i], dx[1], c.nin * sizeof *dx[1]);
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  gcase_free(ctx, &c);
  for (int i = 0; i < runs; i++) {
    free(y[i]);
    free(dx[i]);
  }
}

/* Adaptive case s (N, C, H, W, OH, OW) of storage d run twice into out[k]
 * = {y, dx}: run 1 against the float64 reference, both the same bits;
 * frees out and r. */
static void ada_pair_check(const char *name, run *r, const size_t *s,
                           rumus_dtype d, float *out[2][2]) {
  double *want = tu_malloc(r->nout * sizeof *want);
  double *want_dx = tu_malloc(r->nin * sizeof *want_dx), fa, fr, ba, br;
  ref_adaptive_avgpool2d_fwd(r->x, r->planes, (long)s[2], (long)s[3],
                             (long)s[4], (long)s[5], want);
  ref_adaptive_avgpool2d_bwd(r->dy, r->planes, (long)s[2], (long)s[3],
                             (long)s[4], (long)s[5], want_dx);
  tol_of(d, TOL_AVG_FWD, &fa, &fr);
  tol_of(d, TOL_AVG_BWD, &ba, &br);
  tu_check_close(name, out[1][0], want, r->nout, fa, fr);
  tu_check_close(name, out[1][1], want_dx, r->nin, ba, br);
  check_same_bits(name, out[0][0], out[1][0], r->nout * sizeof(float));
  check_same_bits(name, out[0][1], out[1][1], r->nin * sizeof(float));
  for (int i = 0; i < 4; i++) free(out[i / 2][i % 2]);
  free(want);
  free(want_dx);
  run_free(r);
}

/* Adaptive pooling with bins that divide the input (N, C, H, W, OH, OW):
 * bins 4 wide, then 8 wide over a plane of more than 2048 (two bands
 * forward), 1 wide (the identity) and 3 x 2. */
static const size_t ADA_BAND_CASES[][6] = {
    {2, 3, 12, 28, 3, 7}, {1, 2, 64, 64, 8, 8}, {1, 1, 5, 9, 5, 9},
    {2, 2, 9, 8, 3, 4}};

/* Adaptive band case k, storage d, GPU variant: the default kernels, then
 * the bands (RUMUS_AVGPOOL_BAND=1, which must run): the same bits,
 * against the reference. */
static void ada_band_case(rumus_ctx *ctx, size_t k, rumus_dtype d) {
  const size_t *s = ADA_BAND_CASES[k];
  const size_t in[4] = {s[0], s[1], s[2], s[3]};
  run r;
  run_setup(ctx, &r, d, in, s[4], s[5], 0, 600 + k);
  char name[96];
  snprintf(name, sizeof name, "adaptive_band_%s_case%zu", tu_dtype_name(d),
           k);
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  float *out[2][2];
  for (int forced = 0; forced < 2; forced++) {
    run_poison(&r);
    if (forced) setenv("RUMUS_AVGPOOL_BAND", "1", 1);
    TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, r.tx, r.ty));
    ck_assert_msg(tu_kernel_ran(ctx, "avgpool2d_fwd_band") == forced,
                  "%s: forward bands %d", name, !forced);
    TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, r.tdy, r.tdx));
    ck_assert_msg(tu_kernel_ran(ctx, "avgpool2d_bwd_band") == forced,
                  "%s: backward bands %d", name, !forced);
    unsetenv("RUMUS_AVGPOOL_BAND");
    out[forced][0] = tu_download_f32(ctx, r.ty);
    out[forced][1] = tu_download_f32(ctx, r.tdx);
  }
  ada_pair_check(name, &r, s, d, out);
}

START_TEST(avg_bands) {
  rumus_ctx *ctx = tu_profiling_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  for (size_t k = 0; k < sizeof BAND_CASES / sizeof BAND_CASES[0]; k++) {
    band_case(ctx, k, d, 0);
    band_case(ctx, k, d, 3);
  }
  for (size_t k = 0; k < sizeof ADA_BAND_CASES / sizeof ADA_BAND_CASES[0];
       k++)
    ada_band_case(ctx, k, d);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Average pooling whose windows tile the input, for the GPU variant's
 * tiled kernels (avgpool2d_*_tiled): 4 x 4 on rows of 28 (loads of 4),
 * 3 x 3 and 1 x 5 (scalar loads, quads across windows), 4 wide on rows
 * of 12 with a divisor override, a 1 x 1 image. */
static const pool_case TILED_CASES[] = {
    {2, 3, 28, 28, {4, 4, 4, 4, 0, 0, 1, 1, 0, 1, 0}},
    {1, 2, 12, 9, {3, 3, 3, 3, 0, 0, 1, 1, 0, 0, 0}},
    {2, 1, 6, 15, {1, 5, 1, 5, 0, 0, 1, 1, 1, 1, 0}},
    {1, 3, 8, 12, {2, 4, 2, 4, 0, 0, 1, 1, 0, 1, 5}},
    {1, 1, 1, 1, {1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0}},
};

/* A GPU-variant kernel pair that an environment variable set to 0 turns
 * off; the forward runs where fwd_runs says (NULL: always). */
typedef struct {
  const char *env, *fwd, *bwd;
  int (*fwd_runs)(const pool_case *pc);
} pool_switch;

/* The average k3s2 forward's rows: OW = W / 2 a multiple of 4. */
static int k3s2_fwd_runs(const pool_case *pc) { return pc->w % 8 == 0; }

static const pool_switch TILED = {"RUMUS_POOL_TILED", "avgpool2d_fwd_tiled",
                                  "avgpool2d_bwd_tiled", NULL};
static const pool_switch K3S2 = {"RUMUS_AVGPOOL_K3S2", "avgpool2d_fwd_k3s2",
                                 "avgpool2d_bwd_k3s2b", k3s2_fwd_runs};

/* Which of sw's kernels ran since the last look (bit 0 forward, bit 1
 * backward). */
static int switch_ran(rumus_ctx *ctx, const pool_switch *sw) {
  static rumus_kernel_stat ks[256];
  size_t n = 0;
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, ks, 256, &n));
  int ran = 0;
  for (size_t i = 0; i < n && i < 256; i++) {
    if (ks[i].launches == 0) continue;
    if (strcmp(ks[i].kernel, sw->fwd) == 0) ran |= 1;
    if (strcmp(ks[i].kernel, sw->bwd) == 0) ran |= 2;
  }
  return ran;
}

/* Average case pc, storage d, GPU variant, element offset odd, with sw's
 * kernels off, then on: the same bits, against the reference, guards
 * intact. */
static void switch_case(rumus_ctx *ctx, const pool_switch *sw,
                        const pool_case *pc, size_t k, rumus_dtype d,
                        size_t odd) {
  gcase c;
  gcase_setup(ctx, pc, d, odd, 700 + k, &c);
  char name[96];
  snprintf(name, sizeof name, "%s_%s_case%zu_at%zu", sw->bwd,
           tu_dtype_name(d), k, odd);
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  float *y[2], *dx[2];
  for (int on = 0; on < 2; on++) {
    if (!on) setenv(sw->env, "0", 1);
    poison(c.gy.t);
    poison(c.gdx.t);
    TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &pc->p, c.gx.t, c.gy.t));
    TU_OK(ctx, rumus_avgpool2d_bwd(ctx, &pc->p, c.gg.t, c.gdx.t));
    unsetenv(sw->env);
    const int ran = switch_ran(ctx, sw);
    const int fwd = sw->fwd_runs == NULL || sw->fwd_runs(pc);
    const int want = on ? (fwd ? 3 : 2) : 0;
    ck_assert_msg(ran == want, "%s: kernels ran %d, not %d", name, ran, want);
    y[on] = tu_download_f32(ctx, c.gy.t);
    dx[on] = tu_download_f32(ctx, c.gdx.t);
  }
  band_check_ref(name, &c, pc, d, y[1], dx[1]);
  check_same_bits(name, y[0], y[1], c.nout * sizeof *y[1]);
  check_same_bits(name, dx[0], dx[1], c.nin * sizeof *dx[1]);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  gcase_free(ctx, &c);
  for (int i = 0; i < 2; i++) {
    free(y[i]);
    free(dx[i]);
  }
}

/* Adaptive pooling whose bins divide the input, on the tiled kernels:
 * (N, C, H, W, OH, OW). */
static const size_t ADA_TILED_CASES[][6] = {
    {2, 3, 28, 28, 7, 7}, {1, 2, 14, 10, 7, 5}, {1, 1, 9, 12, 3, 1}};

/* Adaptive tiled case k, storage d, GPU variant: with RUMUS_POOL_TILED=0
 * (the adaptive kernels), then the tiled ones: the same bits, against
 * the reference. */
static void ada_tiled_case(rumus_ctx *ctx, size_t k, rumus_dtype d) {
  const size_t *s = ADA_TILED_CASES[k];
  const size_t in[4] = {s[0], s[1], s[2], s[3]};
  run r;
  run_setup(ctx, &r, d, in, s[4], s[5], 0, 800 + k);
  char name[96];
  snprintf(name, sizeof name, "adaptive_tiled_%s_case%zu", tu_dtype_name(d),
           k);
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  float *out[2][2];
  for (int on = 0; on < 2; on++) {
    run_poison(&r);
    if (!on) setenv("RUMUS_POOL_TILED", "0", 1);
    TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, r.tx, r.ty));
    TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, r.tdy, r.tdx));
    unsetenv("RUMUS_POOL_TILED");
    const int ran = switch_ran(ctx, &TILED);
    ck_assert_msg(ran == (on ? 3 : 0), "%s: tiled kernels ran %d (on %d)",
                  name, ran, on);
    out[on][0] = tu_download_f32(ctx, r.ty);
    out[on][1] = tu_download_f32(ctx, r.tdx);
  }
  ada_pair_check(name, &r, s, d, out);
}

START_TEST(avg_tiled) {
  rumus_ctx *ctx = tu_profiling_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  for (size_t k = 0; k < sizeof TILED_CASES / sizeof TILED_CASES[0]; k++) {
    switch_case(ctx, &TILED, &TILED_CASES[k], k, d, 0);
    switch_case(ctx, &TILED, &TILED_CASES[k], k, d, 3);
  }
  for (size_t k = 0; k < sizeof ADA_TILED_CASES / sizeof ADA_TILED_CASES[0];
       k++)
    ada_tiled_case(ctx, k, d);
  tu_free_all(ctx, NULL);
}
END_TEST

/* 3 x 3 windows, stride 2, padding 1 on W = 2 OW a multiple of 4, for
 * the GPU variant's average backward by blocks (avgpool2d_bwd_k3s2b) and
 * where OW is a multiple of 4 its forward (avgpool2d_fwd_k3s2): H even
 * and odd, a row of 4, both divisor rules and an override (ceil mode
 * adds a column: W = 2 OW - 2, not theirs). */
static const pool_case K3S2_CASES[] = {
    {2, 3, 12, 16, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 13, 8, {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0}},
    {3, 1, 1, 4, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {2, 2, 7, 24, {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0}},
    {1, 1, 6, 8, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 5}},
};

START_TEST(avg_k3s2) {
  rumus_ctx *ctx = tu_profiling_ctx();
  const rumus_dtype d = tu_dtypes[_i];
  for (size_t k = 0; k < sizeof K3S2_CASES / sizeof K3S2_CASES[0]; k++) {
    switch_case(ctx, &K3S2, &K3S2_CASES[k], k, d, 0);
    switch_case(ctx, &K3S2, &K3S2_CASES[k], k, d, 3);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- limits: the CPU variant's newer kernels ------------------------------ */

/* Average backward shapes whose windows tile the image (kernel = stride,
 * no padding, H = kh OH, W = kw OW, kw 1, 2 or 4, OW >= 4): the CPU
 * variant's avgpool2d_bwd_tiles.  8 and 4 lanes, the last block moved
 * back (OW 11, 5), a divisor, count_include_pad off, over 512 output rows
 * (several a work-item, across planes). */
static const pool_case AVG_TILE_CASES[] = {
    {2, 3, 6, 8, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {1, 2, 8, 44, {4, 4, 4, 4, 0, 0, 1, 1, 0, 1, 0}},
    {1, 2, 4, 8, {2, 2, 2, 2, 0, 0, 1, 1, 1, 0, 3}},
    {2, 2, 6, 22, {2, 2, 2, 2, 0, 0, 1, 1, 0, 0, 0}},
    {1, 3, 9, 20, {3, 4, 3, 4, 0, 0, 1, 1, 0, 1, 0}},
    {2, 2, 5, 9, {1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0}},
    {1, 2, 4, 10, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {4, 40, 6, 34, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
};

/* Average pooling shapes of 3 wide windows of stride 2, padding 1 along
 * w on rows of W = 2 OW >= 16: the CPU variant's avgpool2d_{fwd,bwd}_
 * k3rows.
 * One block and several (the last moved back), stride 1 and 2 along h,
 * count_include_pad both ways, a divisor, 5 x 3 windows, over 512 input
 * rows. */
static const pool_case AVG_K3_CASES[] = {
    {1, 2, 7, 16, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {2, 1, 8, 28, {3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0}},
    {1, 2, 6, 34, {3, 3, 1, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 9, 20, {5, 3, 2, 2, 2, 1, 1, 1, 0, 0, 0}},
    {1, 1, 5, 64, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 7}},
    {4, 20, 9, 16, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
};

/* 3 x 3 windows of stride 1 on rows of at most 16, the CPU variant's
 * avgpool2d_*_r16: rows of 14 (padding 1, both divisor rules), 16 (the
 * whole vector), 1 x 1 and 7 x 5 images, padding 0 and mixed, an
 * override, and enough planes that most rows load whole. */
static const pool_case AVG_R16_CASES[] = {
    {2, 3, 14, 14, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 14, 14, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
    {1, 2, 16, 16, {3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
    {3, 1, 1, 1, {3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
    {2, 2, 7, 5, {3, 3, 1, 1, 0, 0, 1, 1, 0, 0, 0}},
    {1, 3, 6, 9, {3, 3, 1, 1, 0, 1, 1, 1, 0, 1, 0}},
    {1, 2, 5, 12, {3, 3, 1, 1, 1, 0, 1, 1, 0, 0, 0}},
    {1, 1, 9, 16, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 7}},
    {8, 16, 7, 7, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
};

/* rumus_avgpool2d_fwd (bwd: rumus_avgpool2d_bwd) of case pc (number k),
 * storage d, on the CPU variant at element offset odd: RUMUS_POOL_CPU=old
 * (the rows kernel), then the default, which must run `kernel`, then with
 * non-temporal stores forced (RUMUS_POOL_NT=1): the same bits, against
 * the reference, guards intact. */
static void avg_rows_case(rumus_ctx *ctx, const char *kernel,
                          const pool_case *pc, size_t k, rumus_dtype d,
                          size_t odd, int bwd) {
  const size_t in[4] = {pc->n, pc->c, pc->h, pc->w};
  size_t oh, ow;
  TU_OK(ctx, rumus_pool2d_output_size(ctx, &pc->p, pc->h, pc->w, &oh, &ow));
  const size_t out[4] = {pc->n, pc->c, oh, ow};
  const size_t planes = pc->n * pc->c, nin = planes * pc->h * pc->w,
               nout = planes * oh * ow;
  const size_t na = bwd ? nout : nin, nb = bwd ? nin : nout;
  tu_rng r;
  tu_rng_seed(&r, 400 + k);
  float *a = rand_typed(&r, d, na, -1, 1);
  tu_guarded ga = tu_guarded_typed_odd(ctx, d, 4, bwd ? out : in, a, odd);
  tu_guarded gb = tu_guarded_typed_odd(ctx, d, 4, bwd ? in : out, NULL, odd);
  double *want = tu_malloc(nb * sizeof *want), ta, tr;
  tol_of(d, bwd ? TOL_AVG_BWD : TOL_AVG_FWD, &ta, &tr);
  char name[96];
  snprintf(name, sizeof name, "%s_%s_case%zu_at%zu", kernel,
           tu_dtype_name(d), k, odd);
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  setenv("RUMUS_POOL_CPU", "old", 1);
  TU_OK(ctx, bwd ? rumus_avgpool2d_bwd(ctx, &pc->p, ga.t, gb.t)
                 : rumus_avgpool2d_fwd(ctx, &pc->p, ga.t, gb.t));
  unsetenv("RUMUS_POOL_CPU");
  ck_assert_msg(!tu_kernel_ran(ctx, kernel), "%s: old ran it", name);
  float *old = tu_download_f32(ctx, gb.t);
  const ref_pool2d rp = ref_of(&pc->p);
  if (bwd)
    ref_avgpool2d_bwd(a, planes, (long)pc->h, (long)pc->w, &rp, (long)oh,
                      (long)ow, want);
  else
    ref_avgpool2d_fwd(a, planes, (long)pc->h, (long)pc->w, &rp, (long)oh,
                      (long)ow, want);
  for (int nt = 0; nt < 2; nt++) { /* then non-temporal stores forced */
    poison(gb.t);
    if (nt) setenv("RUMUS_POOL_NT", "1", 1);
    TU_OK(ctx, bwd ? rumus_avgpool2d_bwd(ctx, &pc->p, ga.t, gb.t)
                   : rumus_avgpool2d_fwd(ctx, &pc->p, ga.t, gb.t));
    unsetenv("RUMUS_POOL_NT");
    ck_assert_msg(tu_kernel_ran(ctx, kernel), "%s: not run", name);
    float *got = tu_download_f32(ctx, gb.t);
    tu_check_close(name, got, want, nb, ta, tr);
    check_same_bits(name, old, got, nb * sizeof *got);
    free(got);
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_guarded_check_free(ctx, &ga);
  tu_guarded_check_free(ctx, &gb);
  free(old);
  free(a);
  free(want);
}

/* Max pooling shapes of 3 x 3 windows (3 x 2 in one), padding 1 along
 * w: stride 2 on W even from 16, the CPU variant's maxpool2d_fwd_k3rows
 * and maxpool2d_bwd_k3rows (the F32 rows from W = 64; below it F32
 * scatters by planes); stride 1 on W = OW from 8, the forward's.  One
 * block and several, the last moved back, the last output's window past
 * the row's end or not (ceil mode), H odd and even, over 512 rows.
 * (bad_indices_at_row_ends runs the backward on wrong indices.) */
static const pool_case MAX_K3_CASES[] = {
    {1, 2, 7, 16, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {2, 1, 8, 34, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 5, 20, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},
    {1, 2, 9, 64, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {2, 1, 6, 66, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 1, 7, 80, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}},
    {1, 2, 6, 64, {2, 3, 2, 2, 0, 1, 1, 1, 0, 1, 0}},
    {4, 20, 9, 64, {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 6, 32, {3, 3, 1, 2, 1, 1, 1, 1, 0, 1, 0}}, /* stride 1 along h */
    /* stride 1 along w (the forward): one block, a pair, several */
    {1, 2, 5, 8, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
    {2, 1, 7, 14, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
    {1, 2, 6, 37, {3, 3, 2, 1, 1, 1, 1, 1, 0, 1, 0}},
    {4, 20, 7, 9, {3, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0}},
};

/* A CPU row kernel pair of max pooling under test: its kernels and
 * whether each runs for a case (output oh x ow, storage d). */
typedef struct {
  const char *label, *fwd, *bwd;
  int (*fwd_runs)(const pool_case *pc, size_t oh, size_t ow);
  int (*bwd_runs)(const pool_case *pc, size_t oh, size_t ow, rumus_dtype d);
} max_rows_kind;

/* Stride 2 along w on rows of W = 2 OW, or stride 1 on rows of W = OW. */
static int k3_fwd_runs(const pool_case *pc, size_t oh, size_t ow) {
  (void)oh;
  return pc->p.stride_w == 2 ? pc->w == 2 * ow : pc->w == ow && ow >= 8;
}
/* Stride 2 along w only; F32 rows below 64 scatter by planes instead. */
static int k3_bwd_runs(const pool_case *pc, size_t oh, size_t ow,
                       rumus_dtype d) {
  (void)oh;
  (void)ow;
  return pc->p.stride_w == 2 && !(d == RUMUS_F32 && pc->w < 64);
}
static const max_rows_kind MAX_K3 = {"k3rows", "maxpool2d_fwd_k3rows",
                                     "maxpool2d_bwd_k3rows", k3_fwd_runs,
                                     k3_bwd_runs};

/* 2 x 2 windows of stride 2 that tile the image, rows of 4 or more. */
static int k2_runs(const pool_case *pc, size_t oh, size_t ow) {
  const rumus_pool2d_params *p = &pc->p;
  return p->kernel_h == 2 && p->kernel_w == 2 && p->stride_h == 2 &&
         p->stride_w == 2 && p->padding_h == 0 && p->padding_w == 0 &&
         p->dilation_h == 1 && p->dilation_w == 1 && pc->h == 2 * oh &&
         pc->w == 2 * ow && ow >= 4;
}
static int k2_bwd_runs(const pool_case *pc, size_t oh, size_t ow,
                       rumus_dtype d) {
  (void)d;
  return k2_runs(pc, oh, ow);
}
static const max_rows_kind MAX_K2 = {"k2rows", "maxpool2d_fwd_k2rows",
                                     "maxpool2d_bwd_k2rows", k2_runs,
                                     k2_bwd_runs};

/* rumus_maxpool2d_fwd of case pc on the CPU variant into gy, gi:
 * RUMUS_POOL_CPU=old, then the default (which must run kind's forward
 * where it applies), then with non-temporal stores forced: the same
 * values and indices each time (their bits; the old kernel's are checked
 * against the reference elsewhere, NaN included). */
static void max_rows_fwd(rumus_ctx *ctx, const max_rows_kind *kind,
                         const pool_case *pc, const char *name,
                         tu_guarded *gx, tu_guarded *gy, tu_guarded *gi,
                         size_t nout, size_t oh, size_t ow) {
  setenv("RUMUS_POOL_CPU", "old", 1);
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &pc->p, gx->t, gy->t, gi->t));
  unsetenv("RUMUS_POOL_CPU");
  ck_assert_msg(!tu_kernel_ran(ctx, kind->fwd), "%s: old ran it", name);
  float *y0 = tu_download_f32(ctx, gy->t);
  int32_t *i0 = tu_malloc(nout * sizeof *i0),
          *i1 = tu_malloc(nout * sizeof *i1);
  TU_OK(ctx, rumus_tensor_download(gi->t, i0, nout * sizeof *i0));
  const int runs = kind->fwd_runs(pc, oh, ow);
  for (int nt = 0; nt < 2; nt++) {
    poison(gy->t);
    poison(gi->t);
    if (nt) setenv("RUMUS_POOL_NT", "1", 1);
    TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &pc->p, gx->t, gy->t, gi->t));
    unsetenv("RUMUS_POOL_NT");
    ck_assert_msg(tu_kernel_ran(ctx, kind->fwd) == runs, "%s: %s %s", name,
                  kind->fwd, runs ? "did not run" : "ran");
    float *y1 = tu_download_f32(ctx, gy->t);
    TU_OK(ctx, rumus_tensor_download(gi->t, i1, nout * sizeof *i1));
    check_same_bits(name, y0, y1, nout * sizeof *y1);
    for (size_t j = 0; j < nout; j++)
      ck_assert_msg(i0[j] == i1[j], "%s: index %zu is %d, old %d", name, j,
                    i1[j], i0[j]);
    free(y1);
  }
  free(y0);
  free(i0);
  free(i1);
}

/* Ties (values on a grid of 0.5), NaNs, infinities and -0 in x (n
 * values), so the forward's vector test meets its fallback. */
static void special_x(float *x, size_t n, rumus_dtype d) {
  for (size_t j = 0; j < n; j++) {
    const unsigned u = (unsigned)(j * 2654435761u) >> 7;
    x[j] = (float)(u % 5) * 0.5f - 1.0f;
    if (u % 97 == 3) x[j] = NAN;
    if (u % 89 == 5) x[j] = INFINITY;
    if (u % 83 == 7) x[j] = -INFINITY;
    if (u % 79 == 11) x[j] = -0.0f;
  }
  tu_round_to(d, x, n);
}

/* rumus_maxpool2d_bwd of case pc (number k), storage d, on the CPU
 * variant at element offset odd: RUMUS_POOL_CPU=old, then the default
 * (which must run kind's backward where it applies), then with
 * non-temporal stores forced (RUMUS_POOL_NT=1): the same bits, against
 * the reference, guards intact.  The forward first (max_rows_fwd), on x
 * and on special values. */
static void max_rows_case(rumus_ctx *ctx, const max_rows_kind *kind,
                          const pool_case *pc, size_t k, rumus_dtype d,
                          size_t odd) {
  gcase c;
  gcase_setup(ctx, pc, d, odd, 500 + k, &c);
  tu_guarded gi = tu_guarded_tensor_at(ctx, RUMUS_I32, 4, c.out, NULL,
                                       4096 + 4 * odd);
  double *want = tu_malloc(c.nin * sizeof *want), ma, mr;
  int32_t *idx = tu_malloc(c.nout * sizeof *idx);
  tol_of(d, TOL_MAX_BWD, &ma, &mr);
  char name[96];
  snprintf(name, sizeof name, "maxpool2d_%s_%s_case%zu_at%zu", kind->label,
           tu_dtype_name(d), k, odd);
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  float *sx = tu_malloc(c.nin * sizeof *sx);
  special_x(sx, c.nin, d);
  tu_guarded gs = tu_guarded_typed_odd(ctx, d, 4, c.in, sx, odd);
  max_rows_fwd(ctx, kind, pc, name, &gs, &c.gy, &gi, c.nout, c.oh, c.ow);
  tu_guarded_check_free(ctx, &gs);
  free(sx);
  max_rows_fwd(ctx, kind, pc, name, &c.gx, &c.gy, &gi, c.nout, c.oh,
               c.ow);
  TU_OK(ctx, rumus_tensor_download(gi.t, idx, c.nout * sizeof *idx));
  { /* the forward against the reference */
    double *wy = tu_malloc(c.nout * sizeof *wy);
    int32_t *wi = tu_malloc(c.nout * sizeof *wi);
    const ref_pool2d rp = ref_of(&pc->p);
    ref_maxpool2d_fwd(c.x, c.planes, (long)pc->h, (long)pc->w, &rp, (long)c.oh,
                      (long)c.ow, wy, wi);
    float *y = tu_download_f32(ctx, c.gy.t);
    tu_check_close(name, y, wy, c.nout, 0.0, 0.0);
    for (size_t j = 0; j < c.nout; j++)
      ck_assert_msg(idx[j] == wi[j], "%s: index %zu is %d, expected %d", name,
                    j, idx[j], wi[j]);
    free(y);
    free(wy);
    free(wi);
  }
  setenv("RUMUS_POOL_CPU", "old", 1);
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &pc->p, c.gg.t, gi.t, c.gdx.t));
  unsetenv("RUMUS_POOL_CPU");
  ck_assert_msg(!tu_kernel_ran(ctx, kind->bwd), "%s: old ran it", name);
  float *old = tu_download_f32(ctx, c.gdx.t);
  ref_maxpool2d_bwd(c.g, idx, c.planes, (long)pc->h, (long)pc->w, (long)c.oh,
                    (long)c.ow, want);
  const int runs = kind->bwd_runs(pc, c.oh, c.ow, d);
  for (int nt = 0; nt < 2; nt++) {
    poison(c.gdx.t);
    if (nt) setenv("RUMUS_POOL_NT", "1", 1);
    TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &pc->p, c.gg.t, gi.t, c.gdx.t));
    unsetenv("RUMUS_POOL_NT");
    ck_assert_msg(tu_kernel_ran(ctx, kind->bwd) == runs, "%s: %s %s", name,
                  kind->bwd, runs ? "did not run" : "ran");
    float *got = tu_download_f32(ctx, c.gdx.t);
    tu_check_close(name, got, want, c.nin, ma, mr);
    check_same_bits(name, old, got, c.nin * sizeof *got);
    free(got);
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  gcase_free(ctx, &c);
  tu_guarded_check_free(ctx, &gi);
  free(old);
  free(want);
  free(idx);
}

/* Max pooling shapes of 2 x 2 windows, stride 2: the CPU variant's
 * maxpool2d_{fwd,bwd}_k2rows where they tile the image with rows of 4 or
 * more outputs (rows of 4 to 7: two 4-lane blocks; 8: one block; more:
 * the last moved back), over 512 rows; and shapes that must keep the row
 * kernels (W or H odd, ceil mode with a window past the edge, rows of 3,
 * padding). */
static const pool_case MAX_K2_CASES[] = {
    {1, 2, 6, 8, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {2, 1, 4, 14, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {1, 3, 2, 16, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {1, 2, 8, 28, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {2, 1, 6, 50, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {4, 40, 8, 16, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},
    {1, 2, 6, 29, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}}, /* W odd */
    {1, 2, 7, 28, {2, 2, 2, 2, 0, 0, 1, 1, 1, 1, 0}}, /* H odd, ceil */
    {1, 2, 4, 6, {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}},  /* rows of 3 */
    {1, 2, 6, 16, {2, 2, 2, 2, 1, 1, 1, 1, 0, 1, 0}}, /* padding */
};

/* max_rows_case for each of n cases of kind, storage d, at an aligned
 * and an odd element offset, in a fresh context. */
static void max_rows_cases(const max_rows_kind *kind, const pool_case *cases,
                           size_t n, rumus_dtype d) {
  rumus_ctx *ctx = tu_profiling_ctx();
  for (size_t k = 0; k < n; k++) {
    max_rows_case(ctx, kind, &cases[k], k, d, 0);
    max_rows_case(ctx, kind, &cases[k], k, d, 3);
  }
  tu_free_all(ctx, NULL);
}

START_TEST(cpu_max_k2rows) {
  max_rows_cases(&MAX_K2, MAX_K2_CASES,
                 sizeof MAX_K2_CASES / sizeof MAX_K2_CASES[0], tu_dtypes[_i]);
}
END_TEST

START_TEST(cpu_max_k3rows) {
  max_rows_cases(&MAX_K3, MAX_K3_CASES,
                 sizeof MAX_K3_CASES / sizeof MAX_K3_CASES[0], tu_dtypes[_i]);
}
END_TEST

/* maxpool2d_bwd_k3rows checks each output row's indices from one input
 * row (the first of its window inside the image; input row 0 takes
 * several output rows where sh <= ph), maxpool2d_bwd_k2rows each output
 * row's after its blocks: a wrong index in any output row is caught (for
 * 2 x 2 windows also one inside the plane, in the next window), and its
 * dx still arrives for the others. */
START_TEST(cpu_max_rows_bad_indices) {
  rumus_ctx *ctx = tu_profiling_ctx();
  const rumus_pool2d_params ps[3] = {{3, 3, 1, 2, 1, 1, 1, 1, 0, 1, 0},
                                     {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0},
                                     {2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}};
  const char *kernel[3] = {"maxpool2d_bwd_k3rows", "maxpool2d_bwd_k3rows",
                           "maxpool2d_bwd_k2rows"};
  const rumus_dtype d = tu_dtypes[_i];
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  for (int c = 0; c < 3; c++) {
    const size_t in[4] = {1, 2, c == 2 ? 8 : 7, 64};
    size_t oh, ow;
    TU_OK(ctx, rumus_pool2d_output_size(ctx, &ps[c], in[2], in[3], &oh, &ow));
    const size_t out[4] = {1, 2, oh, ow}, nout = 2 * oh * ow;
    tu_rng r;
    tu_rng_seed(&r, 600 + c);
    float *x = rand_typed(&r, d, 2 * in[2] * 64, -2, 2);
    float *g = rand_typed(&r, d, nout, -1, 1);
    rumus_tensor *tx = tu_tensor_typed(ctx, d, 4, in, x),
                 *ty = tu_tensor_typed(ctx, d, 4, out, NULL),
                 *tg = tu_tensor_typed(ctx, d, 4, out, g),
                 *tdx = tu_tensor_typed(ctx, d, 4, in, NULL),
                 *ti = tu_tensor(ctx, RUMUS_I32, 4, out, NULL);
    TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &ps[c], tx, ty, ti));
    int32_t *good = tu_malloc(nout * sizeof *good);
    TU_OK(ctx, rumus_tensor_download(ti, good, nout * sizeof *good));
    for (size_t row = 0; row < 2 * oh; row++) {
      const size_t at = row * ow + (row * 5) % ow;
      int32_t *bad = tu_malloc(nout * sizeof *bad);
      memcpy(bad, good, nout * sizeof *bad);
      /* three rows down, or for 2 x 2 windows on odd rows the next
       * window: outside */
      bad[at] = good[at] + (c == 2 && row % 2 ? 2 : 64 * 3);
      rumus_tensor *tb = tu_tensor(ctx, RUMUS_I32, 4, out, bad);
      TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &ps[c], tg, tb, tdx));
      TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
      ck_assert_msg(tu_kernel_ran(ctx, kernel[c]),
                    "case %d row %zu: %s did not run", c, row, kernel[c]);
      char want[96];
      snprintf(want, sizeof want, "index %d out of range at row %zu",
               bad[at], at);
      ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), want),
                    "case %d row %zu: %s", c, row, rumus_ctx_errmsg(ctx));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      rumus_tensor_free(tb);
      free(bad);
    }
    free(good);
    free(x);
    free(g);
    rumus_tensor *ts[5] = {tx, ty, tg, tdx, ti};
    for (int j = 0; j < 5; j++) rumus_tensor_free(ts[j]);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* avg_rows_case for each of n cases that run `fwd` (NULL: none) and
 * `bwd`, storage d, at an aligned and an odd element offset, in a fresh
 * context. */
static void avg_rows_cases(const char *fwd, const char *bwd,
                           const pool_case *cases, size_t n, rumus_dtype d) {
  rumus_ctx *ctx = tu_profiling_ctx();
  for (size_t k = 0; k < n; k++)
    for (size_t odd = 0; odd <= 3; odd += 3) {
      if (fwd != NULL) avg_rows_case(ctx, fwd, &cases[k], k, d, odd, 0);
      avg_rows_case(ctx, bwd, &cases[k], k, d, odd, 1);
    }
  tu_free_all(ctx, NULL);
}

START_TEST(cpu_avg_bwd_tiles) {
  avg_rows_cases(NULL, "avgpool2d_bwd_tiles", AVG_TILE_CASES,
                 sizeof AVG_TILE_CASES / sizeof AVG_TILE_CASES[0],
                 tu_dtypes[_i]);
}
END_TEST

START_TEST(cpu_avg_k3rows) {
  avg_rows_cases("avgpool2d_fwd_k3rows", "avgpool2d_bwd_k3rows",
                 AVG_K3_CASES, sizeof AVG_K3_CASES / sizeof AVG_K3_CASES[0],
                 tu_dtypes[_i]);
}
END_TEST

START_TEST(cpu_avg_r16) {
  avg_rows_cases("avgpool2d_fwd_r16", "avgpool2d_bwd_r16", AVG_R16_CASES,
                 sizeof AVG_R16_CASES / sizeof AVG_R16_CASES[0],
                 tu_dtypes[_i]);
}
END_TEST

/* Indices outside the plane, or inside it but outside their window, are
 * caught on the device: RUMUS_EINDEX at the next sync, naming the index
 * and its position; the other outputs' gradients still arrive, and the
 * following sync is clean.  Both variants. */
START_TEST(bad_indices_on_device) {
  rumus_ctx *ctx = tu_ctx();
  const size_t in[4] = {1, 2, 4, 4}, out[4] = {1, 2, 2, 2};
  const rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(2, 2);
  const float dy[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  /* Plane 1's output 2 names 99 (outside the plane); case 2 names 3,
   * inside the plane but in the window of output 1, not 2. */
  const int32_t bad[2][8] = {{0, 2, 8, 10, 0, 3, 99, 15},
                             {0, 2, 3, 10, 0, 3, 12, 15}};
  const int32_t value[2] = {99, 3}, where[2] = {6, 2};
  rumus_tensor *tg = tu_tensor(ctx, RUMUS_F32, 4, out, dy),
               *tdx = tu_tensor(ctx, RUMUS_F32, 4, in, NULL);
  for (int v = 0; v < 3; v++) { /* 2: the GPU variant's tiles */
    tu_set_variant(ctx, tu_variants[v % 2]);
    if (v == 2) setenv("RUMUS_MAXPOOL_BWD", "tile", 1);
    for (int k = 0; k < 2; k++) {
      rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 4, out, bad[k]);
      TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, tg, ti, tdx));
      TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
      char want[96];
      snprintf(want, sizeof want, "rumus_maxpool2d_bwd: index %d out of "
               "range at row %d", value[k], where[k]);
      ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), want), "%s",
                    rumus_ctx_errmsg(ctx));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      float *dx = tu_download(ctx, tdx);
      ck_assert_float_eq(dx[0], 1.0f);      /* plane 0, output 0 */
      ck_assert_float_eq(dx[16 + 3], 6.0f); /* plane 1, output 1 */
      ck_assert_float_eq(dx[16 + 15], 8.0f);
      free(dx);
      rumus_tensor_free(ti);
    }
  }
  unsetenv("RUMUS_MAXPOOL_BWD");
  tu_free_all(ctx, tg, tdx, NULL);
}
END_TEST

/* The same on rows wide enough for the CPU variant's vector check (and, 16-bit,
 * its row kernels), k3s2p1 on 4 x 64: an index one row above the first
 * column of its window (off by one along w in the flattened plane: output
 * (1, 0) naming (0, 63)), and one just past the last window's right edge
 * (output (0, 31) naming (2, 0)), caught like the others.  Both variants,
 * every storage type. */
START_TEST(bad_indices_at_row_ends) {
  rumus_ctx *ctx = tu_ctx();
  const size_t in[4] = {1, 1, 4, 64}, out[4] = {1, 1, 2, 32};
  const rumus_pool2d_params p = {3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0};
  const int32_t value[2] = {63, 128}, where[2] = {32, 31};
  float dy[64];
  int32_t good[64];
  for (int j = 0; j < 64; j++) { /* each window's first element */
    const int oh = j / 32, ow = j % 32;
    dy[j] = (float)(j + 1);
    good[j] = (oh > 0 ? 2 * oh - 1 : 0) * 64 + (ow > 0 ? 2 * ow - 1 : 0);
  }
  const rumus_dtype d = tu_dtypes[_i];
  rumus_tensor *tg = tu_tensor_typed(ctx, d, 4, out, dy),
               *tdx = tu_tensor_typed(ctx, d, 4, in, NULL);
  /* 1: the GPU variant's blocks (maxpool2d_bwd_k3s2b), 2: its tiles, 3:
   * its quads. */
  for (int v = 0; v < 4; v++) {
    tu_set_variant(ctx, tu_variants[v % 2]);
    if (v >= 2) setenv("RUMUS_MAXPOOL_BWD", v == 2 ? "tile" : "old", 1);
    for (int k = 0; k < 2; k++) {
      int32_t bad[64];
      memcpy(bad, good, sizeof bad);
      bad[where[k]] = value[k];
      rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 4, out, bad);
      TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, tg, ti, tdx));
      TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
      char want[96];
      snprintf(want, sizeof want, "rumus_maxpool2d_bwd: index %d out of "
               "range at row %d", value[k], where[k]);
      ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), want), "%s: %s",
                    tu_variant_name(tu_variants[v % 2]), rumus_ctx_errmsg(ctx));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      float *dx = tu_download_f32(ctx, tdx);
      ck_assert_float_eq(dx[1], 2.0f);       /* output (0, 1) */
      ck_assert_float_eq(dx[64 + 3], 35.0f); /* output (1, 2) */
      free(dx);
      rumus_tensor_free(ti);
    }
  }
  unsetenv("RUMUS_MAXPOOL_BWD");
  tu_free_all(ctx, tg, tdx, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pool");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, maxpool_cases, 0, 3);
  tcase_add_loop_test(core, avgpool_cases, 0, 3);
  tcase_add_loop_test(core, adaptive_cases, 0, 3);
  tcase_add_loop_test(core, bwd_finite_differences, 0, 3);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, max_special_values);
  tcase_add_loop_test(limits, max_ties_in_vectors, 0, 3);
  tcase_add_loop_test(limits, guards_and_offsets, 0, 3);
  tcase_add_loop_test(limits, odd_offsets, 0, 3);
  tcase_add_loop_test(limits, k2_offsets, 0, 3);
  tcase_add_loop_test(limits, max_bwd_tiles, 0, 3);
  tcase_add_loop_test(limits, avg_bands, 0, 3);
  tcase_add_loop_test(limits, avg_tiled, 0, 3);
  tcase_add_loop_test(limits, avg_k3s2, 0, 3);
  tcase_add_loop_test(limits, cpu_avg_bwd_tiles, 0, 3);
  tcase_add_loop_test(limits, cpu_avg_k3rows, 0, 3);
  tcase_add_loop_test(limits, cpu_avg_r16, 0, 3);
  tcase_add_loop_test(limits, cpu_max_k3rows, 0, 3);
  tcase_add_loop_test(limits, cpu_max_k2rows, 0, 3);
  tcase_add_test(limits, empty_tensors);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_parameters);
  tcase_add_test(errors, bad_tensors);
  tcase_add_test(errors, bad_indices_on_device);
  tcase_add_loop_test(errors, bad_indices_at_row_ends, 0, 3);
  tcase_add_loop_test(errors, cpu_max_rows_bad_indices, 0, 3);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
