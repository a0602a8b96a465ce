/*
 * check_conv.c - conv2d forward, input gradient and weight gradient
 * against the float64 reference (ref/conv.c), on both variants, with F32,
 * F16 and BF16 storage, over odd shapes (1x1 images, 7x5 inputs, kernels
 * 1, 3, 5, 7 and 3x5, stride 2 on odd sizes, dilation 2, padding 0, 1, 2
 * and 3, groups 1, 2 and depthwise, N = 1, 2 and 3, channels 1 and 5, and
 * enough channels and pixels for several channel blocks, several blocks
 * of work-items along the channels (over 64), several chunks of k and
 * several weight gradient chunks, partial GPU tiles along every dimension
 * and k not a multiple of the GPU step); both gradients against central
 * differences of the float64 forward; the GPU variant's tile override
 * (every valid tiling the same bits, invalid ones ignored, the weight
 * gradient the same bits run to run); borrowed buffers at offsets with
 * guard bytes (groups 2 and depthwise); the CPU variant's depthwise
 * forward by rows (strides 1-3, dilation, partial blocks of 16, rows too
 * long for it); the CPU variant's register tiles (RUMUS_CONV2D_CPU_TILE:
 * float16 and float8 columns, 4 to 16 rows per block, 3 to 32 blocks,
 * every case and one of over 128 rows in every storage type, the same
 * bits with every tile and run to run); the GPU variant's direct kernels
 * (the few-channel input gradient the GEMM's bits, its wider tuples of
 * RUMUS_CONV2D_FEW_PIX the pairs' bits over 16 shapes, the depthwise weight
 * gradient's blocks and tap launches); the GPU variant's Winograd path
 * (forced by RUMUS_CONV2D_WINOGRAD, F(2x2) and F(4x4), every storage
 * type, against the reference and central differences, at offsets with
 * guards, same bits run to run, chunks of images, the per-op overrides,
 * the implicit GEMM where it does not apply or fit); bad arguments with
 * exact statuses.
 *
 * Tolerances (|got - want| <= atol + rtol |want|), with K the terms of one
 * output's sum (forward Cg KH KW, input gradient OCg KH KW, weight
 * gradient N OH OW) and inputs in [-1, 1]:
 *   F32      atol 1e-6 K, rtol 1e-5   (float fma sums of K terms)
 *   F16      the F32 tolerance + 2^-11 relative + 2^-25 (tests/tu_dtype.h)
 *   BF16     the F32 tolerance + 2^-8 relative
 * The inputs are rounded to the storage type first, so the reference sees
 * what the device reads; the 16-bit terms only add the final rounding.
 * Both variants sum every output from 0 upwards in the same order with one
 * fma per term (rumus.h): their F32 results are compared bit for bit.
 * Central differences: the forward is linear in x and in w, so a central
 * difference (h = 1e-2, divided by the stored step) of L = sum g y is
 * exact but for rounding: atol 1e-4, rtol 1e-4.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

/* A case: geometry (ref.h's order: n, c, h, w, oc, kh, kw, sh, sw, ph,
 * pw, dh, dw, g) and whether the forward has a bias. */
typedef struct {
  ref_conv_geo g;
  int bias;
} conv_case;

static const conv_case CASES[] = {
    {{3, 5, 1, 1, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1}, 1},   /* 1x1 image, 1x1 */
    {{1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 0},   /* 1x1 image, 3x3 */
    {{3, 5, 7, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 1},   /* 7x5, 3x3 pad 1 */
    {{1, 1, 7, 5, 5, 5, 5, 2, 2, 2, 2, 1, 1, 1}, 1},   /* 5x5 stride 2 */
    {{2, 3, 7, 5, 4, 3, 3, 2, 2, 0, 0, 2, 2, 1}, 0},   /* dilation 2 */
    {{1, 2, 9, 11, 2, 7, 7, 1, 2, 3, 3, 1, 1, 1}, 1},  /* 7x7 */
    {{3, 4, 7, 5, 6, 3, 5, 2, 1, 1, 2, 1, 1, 2}, 1},   /* 3x5, groups 2 */
    {{3, 5, 7, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5}, 1},   /* depthwise */
    {{2, 4, 8, 7, 8, 3, 3, 2, 2, 2, 2, 2, 2, 4}, 0},   /* depthwise x2 */
    {{2, 20, 9, 9, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 1}, /* channel blocks */
    {{3, 3, 30, 30, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 0}, /* 2 weight chunks */
    {{1, 66, 5, 4, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 1}, /* > 64 channels */
    {{2, 3, 11, 40, 4, 5, 3, 3, 2, 2, 1, 2, 1, 1}, 0}, /* phases, wide */
    {{1, 1, 13, 9, 2, 3, 3, 4, 4, 2, 2, 2, 2, 1}, 1},  /* s 4, d 2 */
    /* Partial GPU tiles along every dimension of every op's GEMM, k not a
     * multiple of the step (16): 67 rows (two 64-row tiles), 63 taps, 429
     * pixels, 603 k of the input gradient, 2 weight chunks (256 + 173). */
    {{3, 7, 13, 11, 67, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 1}, /* TILE_CASE */
    /* Stride phases of 3 x 3 or 2 x 2 taps (and 3 x 2), partial tiles. */
    {{2, 9, 11, 9, 35, 5, 5, 2, 2, 2, 2, 1, 1, 1}, 0},
    /* One input channel per group, two outputs each: the weight
     * gradient's 3 blocks of 64 lanes (3600 pixels, not a multiple of
     * 64 x 3) and 25 taps in three launches of 9. */
    {{3, 3, 40, 30, 6, 5, 5, 1, 1, 2, 2, 1, 1, 3}, 0}, /* DW_CASE */
    /* The input gradient's few-channel kernel: 4 channels, 7x7 stride 2
     * in three chunks of 20 output channels' weights (45 of them); 3
     * channels, stride 3 wider than the 2-column input. */
    {{2, 4, 13, 11, 45, 7, 7, 2, 2, 3, 3, 1, 1, 1}, 1}, /* FEW_CASE */
    {{1, 3, 5, 2, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1}, 0},
    /* Stride 3, dilation 2: column 1 meets no dy where column 4, its
     * pair in the few-channel kernel, does. */
    {{2, 2, 9, 10, 3, 3, 3, 3, 3, 0, 0, 2, 2, 1}, 1},
    /* The CPU variant's depthwise forward by rows (conv_fwd_dw_cpu):
     * stride 2 over three blocks of 16 outputs (the last partial), two
     * outputs per channel; stride 3 and dilation 2 along W over two
     * blocks; rows of 300 outputs, past what it holds (conv_fwd_cpu). */
    {{1, 2, 3, 70, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2}, 1},
    {{2, 3, 4, 53, 3, 3, 5, 1, 3, 1, 2, 1, 2, 3}, 0},
    {{1, 1, 2, 300, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 1},
    /* Its runs of output channels that share an input channel: 37 of
     * one (a run of 32 in quads, then a quad and one) over rows of 20
     * (two blocks); 6 per group, stride 2 (one block); a 7x7 kernel over
     * rows of 200, whose 7 padded rows outgrow its private rows (copied
     * again per channel). */
    {{2, 1, 5, 20, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 1},
    {{1, 2, 6, 18, 12, 3, 3, 2, 2, 1, 1, 1, 1, 2}, 0},
    {{1, 1, 8, 200, 5, 7, 7, 1, 1, 3, 3, 1, 1, 1}, 1},
};
#define DW_CASE 16
#define FEW_CASE 17
#define TILE_CASE 14
#define NCASES (sizeof CASES / sizeof CASES[0])

/* Sizes and shapes of a geometry's tensors. */
typedef struct {
  size_t oh, ow, nx, nw, ny;
  size_t xs[4], ws[4], ys[4];
} sizes;

static sizes sizes_of(const ref_conv_geo *g) {
  sizes s;
  s.oh = ref_conv_out(g->h, g->kh, g->ph, g->sh, g->dh);
  s.ow = ref_conv_out(g->w, g->kw, g->pw, g->sw, g->dw);
  s.nx = g->n * g->c * g->h * g->w;
  s.nw = g->oc * (g->c / g->g) * g->kh * g->kw;
  s.ny = g->n * g->oc * s.oh * s.ow;
  const size_t xs[4] = {g->n, g->c, g->h, g->w},
               ws[4] = {g->oc, g->c / g->g, g->kh, g->kw},
               ys[4] = {g->n, g->oc, s.oh, s.ow};
  memcpy(s.xs, xs, sizeof xs);
  memcpy(s.ws, ws, sizeof ws);
  memcpy(s.ys, ys, sizeof ys);
  return s;
}

static rumus_conv2d_params params_of(const ref_conv_geo *g) {
  rumus_conv2d_params p = {g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->g};
  return p;
}

/* Random values in [-1, 1) rounded to d (malloc'ed). */
static float *random_data(tu_rng *r, rumus_dtype d, size_t n) {
  float *v = tu_malloc(n * sizeof *v);
  tu_fill_uniform(r, v, n, -1.0f, 1.0f);
  tu_round_to(d, v, n);
  return v;
}

static void check_op(const char *what, rumus_dtype d, const float *got,
                     const double *want, size_t n, size_t terms) {
  tu_check_close(what, got, want, n, 1e-6 * (double)terms + tu_store_atol(d),
                 1e-5 + tu_store_rtol(d));
}

/* The host data of a case. */
typedef struct {
  float *x, *w, *b, *dy;
  double *y, *dx, *dw;
} host;

static host host_make(const ref_conv_geo *g, const sizes *s, rumus_dtype d,
                      uint64_t seed) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  host h = {random_data(&r, d, s->nx), random_data(&r, d, s->nw),
            random_data(&r, d, g->oc), random_data(&r, d, s->ny),
            tu_malloc(s->ny * sizeof(double)), tu_malloc(s->nx * sizeof(double)),
            tu_malloc(s->nw * sizeof(double))};
  return h;
}

static void host_free(host *h) {
  free(h->x);
  free(h->w);
  free(h->b);
  free(h->dy);
  free(h->y);
  free(h->dx);
  free(h->dw);
}

/* Runs the three ops of case c with storage d on the current variant,
 * compares them with the reference (h's y, dx, dw) and returns the three
 * results as floats (malloc'ed) in out. */
static void run_case(rumus_ctx *ctx, const conv_case *c, rumus_dtype d,
                     const sizes *s, const host *h, const char *tag,
                     float *out[3]) {
  const ref_conv_geo *g = &c->g;
  const rumus_conv2d_params p = params_of(g);
  const size_t bs[1] = {g->oc};
  rumus_tensor *x = tu_tensor_typed(ctx, d, 4, s->xs, h->x),
               *w = tu_tensor_typed(ctx, d, 4, s->ws, h->w),
               *b = c->bias ? tu_tensor_typed(ctx, d, 1, bs, h->b) : NULL,
               *y = tu_tensor_typed(ctx, d, 4, s->ys, NULL),
               *dy = tu_tensor_typed(ctx, d, 4, s->ys, h->dy),
               *dx = tu_tensor_typed(ctx, d, 4, s->xs, NULL),
               *dw = tu_tensor_typed(ctx, d, 4, s->ws, NULL);
  size_t ys[4];
  TU_OK(ctx, rumus_conv2d_out_shape(ctx, &p, x, w, ys));
  ck_assert(memcmp(ys, s->ys, sizeof ys) == 0);
  TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x, w, b, y));
  TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, dy, w, dx));
  TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, dy, dw));
  out[0] = tu_download_f32(ctx, y);
  out[1] = tu_download_f32(ctx, dx);
  out[2] = tu_download_f32(ctx, dw);
  char name[96];
  snprintf(name, sizeof name, "%s_fwd", tag);
  check_op(name, d, out[0], h->y, s->ny, (g->c / g->g) * g->kh * g->kw);
  snprintf(name, sizeof name, "%s_bwd_data", tag);
  check_op(name, d, out[1], h->dx, s->nx, (g->oc / g->g) * g->kh * g->kw);
  snprintf(name, sizeof name, "%s_bwd_weight", tag);
  check_op(name, d, out[2], h->dw, s->nw, g->n * s->oh * s->ow);
  rumus_tensor_free(x);
  rumus_tensor_free(w);
  rumus_tensor_free(b);
  rumus_tensor_free(y);
  rumus_tensor_free(dy);
  rumus_tensor_free(dx);
  rumus_tensor_free(dw);
}

/* Case _i with every storage type on both variants; F32's results are the
 * same bits on both. */
START_TEST(shapes) {
  const conv_case *c = &CASES[_i];
  const sizes s = sizes_of(&c->g);
  rumus_ctx *ctx = tu_ctx();
  for (int t = 0; t < 3; t++) {
    const rumus_dtype d = tu_dtypes[t];
    host h = host_make(&c->g, &s, d, 100 + (uint64_t)_i);
    ref_conv2d_fwd(&c->g, h.x, h.w, c->bias ? h.b : NULL, h.y);
    ref_conv2d_bwd_data(&c->g, h.dy, h.w, h.dx);
    ref_conv2d_bwd_weight(&c->g, h.x, h.dy, h.dw);
    float *got[2][3];
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      char tag[64];
      snprintf(tag, sizeof tag, "conv_case%d_%s_%s", _i, tu_dtype_name(d),
               tu_variant_name(tu_variants[v]));
      run_case(ctx, c, d, &s, &h, tag, got[v]);
    }
    const size_t n[3] = {s.ny, s.nx, s.nw};
    for (int k = 0; k < 3; k++) {
      if (d == RUMUS_F32)
        ck_assert_msg(memcmp(got[0][k], got[1][k], n[k] * sizeof(float)) == 0,
                      "case %d op %d: the variants' bits differ", _i, k);
      free(got[0][k]);
      free(got[1][k]);
    }
    host_free(&h);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* The CPU variant's register tiles (RUMUS_CONV2D_CPU_TILE = LANESxMBxNB):
 * AVX-512's 16 x 16 x 4, AVX2's 16 x 4 x 32, float8 columns (8 x 8 x 8)
 * and an odd block (8 x 5 x 3: 15 rows per work-item), each against the
 * reference over the case below (every storage type) and every case
 * (F32), all with the first tile's bits; the last tile again gives them
 * again. */
static const char *const CPU_TILES[] = {"16x16x4", "16x4x32", "8x8x8",
                                        "8x5x3"};
#define NCPU_TILES (sizeof CPU_TILES / sizeof CPU_TILES[0])
/* Above 128 rows in every op (two work-items along them at 16 x 4 x 32),
 * 15 pixels and 27 taps per group: partial blocks of columns. */
static const conv_case CPU_TILE_CASE = {
    {1, 133, 5, 3, 131, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 1};

/* Case c with storage d through tile `tile` on ctx's CPU variant into
 * got, checking the GEMM kernels ran and, for big, that the tile built
 * programs. */
static void run_cpu_tile(rumus_ctx *ctx, const conv_case *c, rumus_dtype d,
                         const sizes *s, const host *h, const char *tile,
                         int big, float *got[3]) {
  setenv("RUMUS_CONV2D_CPU_TILE", tile, 1);
  rumus_cache_info before, after;
  TU_OK(ctx, rumus_cache_stats(ctx, &before));
  char tag[64];
  snprintf(tag, sizeof tag, "conv_cpu_tile_%s_%s_oc%zu", tile,
           tu_dtype_name(d), c->g.oc);
  run_case(ctx, c, d, s, h, tag, got);
  TU_OK(ctx, rumus_cache_stats(ctx, &after));
  unsetenv("RUMUS_CONV2D_CPU_TILE");
  if (big)
    ck_assert_msg(after.builds > before.builds, "tile %s built nothing",
                  tile);
  /* One profile read (tu_kernel_ran forgets what it has seen). */
  rumus_kernel_stat ks[64];
  size_t nk = 0;
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, ks, 64, &nk));
  int ran = 0;
  for (size_t k = 0; k < nk && k < 64; k++)
    ran |= (strcmp(ks[k].kernel, "conv_fwd_cpu") == 0) |
           (strcmp(ks[k].kernel, "conv_bwd_data_cpu") == 0) << 1 |
           (strcmp(ks[k].kernel, "conv_bwd_weight_cpu") == 0) << 2;
  /* One input channel per group takes the row and depthwise kernels. */
  const int one = c->g.c == (size_t)c->g.g;
  ck_assert_msg((ran & 2) && (one || ran == 7), "tile %s: kernels %d", tile,
                ran);
}

/* Case c with storage d through every tile of CPU_TILES on ctx's CPU
 * variant: the reference, and the first tile's bits from every other
 * and from the last one run again; `big`: each tile after the first
 * built a program. */
static void check_cpu_tiles(rumus_ctx *ctx, const conv_case *c,
                            rumus_dtype d, uint64_t seed, int big) {
  const sizes s = sizes_of(&c->g);
  host h = host_make(&c->g, &s, d, seed);
  ref_conv2d_fwd(&c->g, h.x, h.w, c->bias ? h.b : NULL, h.y);
  ref_conv2d_bwd_data(&c->g, h.dy, h.w, h.dx);
  ref_conv2d_bwd_weight(&c->g, h.x, h.dy, h.dw);
  const size_t n[3] = {s.ny, s.nx, s.nw};
  float *first[3], *got[3];
  run_cpu_tile(ctx, c, d, &s, &h, CPU_TILES[0], 0, first);
  for (size_t t = 1; t <= NCPU_TILES; t++) {
    const char *tile = CPU_TILES[t < NCPU_TILES ? t : t - 1];
    run_cpu_tile(ctx, c, d, &s, &h, tile, big && t < NCPU_TILES, got);
    for (int k = 0; k < 3; k++) {
      ck_assert_msg(memcmp(first[k], got[k], n[k] * sizeof(float)) == 0,
                    "seed %d %s op %d: tile %s's bits differ from %s's",
                    (int)seed, tu_dtype_name(d), k, tile, CPU_TILES[0]);
      free(got[k]);
    }
  }
  for (int k = 0; k < 3; k++) free(first[k]);
  host_free(&h);
}

START_TEST(cpu_tiles) {
  rumus_ctx *ctx = tu_profiling_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  /* The big case first, its F32 programs the first of their tile; then
   * with 16-bit storage, then every case. */
  check_cpu_tiles(ctx, &CPU_TILE_CASE, RUMUS_F32, 700, 1);
  check_cpu_tiles(ctx, &CPU_TILE_CASE, RUMUS_F16, 701, 0);
  check_cpu_tiles(ctx, &CPU_TILE_CASE, RUMUS_BF16, 702, 0);
  for (size_t i = 0; i < NCASES; i++)
    check_cpu_tiles(ctx, &CASES[i], RUMUS_F32, 710 + (uint64_t)i, 0);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The GPU variant's tiles (RUMUS_CONV2D_TILE, RUMUS_CONV2D_FWD_TILE, ...
 * as "TMxTNxRMxRN[xTK]"): every valid tiling gives the defaults' bits (k
 * runs upwards from 0 in every one, and the weight gradient's chunks
 * depend on the shape only), invalid values fall back to the defaults,
 * and two runs of the weight gradient give the same bits. */
START_TEST(tile_override) {
  static const char *const TILINGS[][2] = {
      {NULL, NULL},             /* the defaults */
      {"128x64x8x4x8", NULL},   /* RM 8, TK 8 */
      {"32x128x4x8x32", NULL},  /* RN 8, TK 32 */
      {"16x16x4x4", "64x64x4x4x4"}, /* 16 work-items; a per-op forward */
      {"64x64x3x4", "banana"},  /* invalid: ignored */
      {"64x64x4x4x0", "64x64x4x4x16x2"},
      {"64x128x4x8x8", "128x128x8x8x16"}, /* the input gradient's wide */
      {"128x128x8x8x16", NULL},            /* tiles (pick_tiles_bwd_data) */
  };
  const conv_case *c = &CASES[TILE_CASE];
  const sizes s = sizes_of(&c->g);
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  host h = host_make(&c->g, &s, RUMUS_F32, 55);
  ref_conv2d_fwd(&c->g, h.x, h.w, h.b, h.y);
  ref_conv2d_bwd_data(&c->g, h.dy, h.w, h.dx);
  ref_conv2d_bwd_weight(&c->g, h.x, h.dy, h.dw);
  const size_t n[3] = {s.ny, s.nx, s.nw};
  float *first[3];
  for (size_t t = 0; t < sizeof TILINGS / sizeof TILINGS[0]; t++) {
    if (TILINGS[t][0])
      setenv("RUMUS_CONV2D_TILE", TILINGS[t][0], 1);
    else
      unsetenv("RUMUS_CONV2D_TILE");
    if (TILINGS[t][1])
      setenv("RUMUS_CONV2D_FWD_TILE", TILINGS[t][1], 1);
    else
      unsetenv("RUMUS_CONV2D_FWD_TILE");
    char tag[64];
    snprintf(tag, sizeof tag, "conv_tiles%zu", t);
    float *got[3];
    run_case(ctx, c, RUMUS_F32, &s, &h, tag, t ? got : first);
    for (int k = 0; t && k < 3; k++) {
      ck_assert_msg(memcmp(got[k], first[k], n[k] * sizeof(float)) == 0,
                    "tiling %zu op %d: not the defaults' bits", t, k);
      free(got[k]);
    }
  }
  unsetenv("RUMUS_CONV2D_TILE");
  unsetenv("RUMUS_CONV2D_FWD_TILE");
  float *again[3];
  run_case(ctx, c, RUMUS_F32, &s, &h, "conv_tiles_again", again);
  for (int k = 0; k < 3; k++) {
    ck_assert_msg(memcmp(again[k], first[k], n[k] * sizeof(float)) == 0,
                  "op %d: a second run gave other bits", k);
    free(again[k]);
    free(first[k]);
  }
  host_free(&h);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The few-channel input gradient (the GPU variant's conv_bwd_data_few*)
 * gives the bits of the kernel that a tile override selects (the GEMM;
 * conv_bwd_data_direct for one channel); the depthwise weight gradient
 * the same bits run to run. */
START_TEST(direct_paths) {
  static const int PICK[] = {FEW_CASE, DW_CASE, 4};
  const conv_case *c = &CASES[PICK[_i]];
  const sizes s = sizes_of(&c->g);
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  host h = host_make(&c->g, &s, RUMUS_F32, 77);
  ref_conv2d_fwd(&c->g, h.x, h.w, c->bias ? h.b : NULL, h.y);
  ref_conv2d_bwd_data(&c->g, h.dy, h.w, h.dx);
  ref_conv2d_bwd_weight(&c->g, h.x, h.dy, h.dw);
  float *first[3], *got[3];
  run_case(ctx, c, RUMUS_F32, &s, &h, "conv_direct", first);
  setenv("RUMUS_CONV2D_BWD_DATA_TILE", "32x64x4x4", 1);
  run_case(ctx, c, RUMUS_F32, &s, &h, "conv_direct_gemm", got);
  unsetenv("RUMUS_CONV2D_BWD_DATA_TILE");
  const size_t n[3] = {s.ny, s.nx, s.nw};
  for (int k = 0; k < 3; k++) {
    ck_assert_msg(memcmp(got[k], first[k], n[k] * sizeof(float)) == 0,
                  "case %d op %d: the GEMM's bits differ", PICK[_i], k);
    free(got[k]);
    free(first[k]);
  }
  host_free(&h);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The few-channel input gradient by default (columns of 4 where strided
 * and they fit, else pairs) and over P-tuples (RUMUS_CONV2D_FEW_PIX 4
 * and 8 along rows, conv_bwd_data_few<CG>p<P>; v4 and v8 down columns,
 * conv_bwd_data_few<CG>v<P>, or the rows' kernel where a phase has more
 * than 4 x 4 taps or DH does not divide SH) against the pairs (2) and
 * the GEMM (a tile override): 1 to 4 channels per group, strides 1 to
 * 4, kernels 1, 3, 5, 7, 3x4 and 3x5, dilation 2 and 3 (dy columns
 * stepping by 2 and 3 between a phase's taps), 7x5 and 1x1 inputs,
 * groups 2 and 3, last tuples partial, phases with no column (stride 3
 * over 2 columns); F16 and BF16 storage in two of them. */
static const conv_case FEW_CASES[] = {
    {{2, 3, 13, 11, 45, 7, 7, 2, 2, 3, 3, 1, 1, 1}, 0}, /* the stem's */
    {{1, 3, 30, 64, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1}, 0}, /* several warps */
    {{2, 4, 13, 11, 45, 7, 7, 2, 2, 3, 3, 1, 1, 1}, 0}, /* 2 weight chunks */
    {{1, 1, 7, 5, 5, 5, 5, 2, 2, 2, 2, 1, 1, 1}, 0},
    {{2, 2, 9, 10, 3, 3, 3, 3, 3, 0, 0, 2, 2, 1}, 0},   /* es 2 */
    {{1, 3, 5, 2, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1}, 0},
    {{3, 4, 7, 5, 6, 3, 5, 2, 1, 1, 2, 1, 1, 2}, 0},
    {{3, 3, 1, 1, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1}, 0},
    {{1, 2, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1}, 0},
    {{2, 3, 7, 5, 4, 3, 3, 2, 2, 0, 0, 2, 2, 1}, 0},
    {{1, 4, 19, 37, 8, 5, 3, 1, 1, 2, 1, 1, 2, 2}, 0},  /* es 2, stride 1 */
    {{2, 6, 9, 23, 6, 7, 7, 3, 2, 3, 3, 1, 1, 3}, 0},
    {{2, 1, 11, 17, 3, 1, 1, 2, 3, 0, 0, 1, 1, 1}, 0},
    {{1, 2, 20, 21, 5, 3, 3, 4, 4, 2, 2, 3, 3, 1}, 0},  /* es 3 */
    {{1, 2, 12, 9, 3, 3, 3, 2, 3, 1, 1, 1, 2, 1}, 0},   /* columns es 2 */
    {{1, 3, 10, 9, 4, 3, 4, 1, 1, 1, 2, 1, 1, 1}, 0},   /* 3 x 4 taps */
};
#define NFEW (sizeof FEW_CASES / sizeof FEW_CASES[0])

/* dx of case c with storage d on the GPU variant with
 * RUMUS_CONV2D_FEW_PIX = pix (NULL: unset), checked against the
 * reference in h; asserts that kernel `kernel` ran (NULL: none checked). */
static float *few_dx(rumus_ctx *ctx, const conv_case *c, rumus_dtype d,
                     const sizes *s, const host *h, const char *pix,
                     const char *kernel) {
  const rumus_conv2d_params p = params_of(&c->g);
  if (pix)
    setenv("RUMUS_CONV2D_FEW_PIX", pix, 1);
  else
    unsetenv("RUMUS_CONV2D_FEW_PIX");
  rumus_tensor *w = tu_tensor_typed(ctx, d, 4, s->ws, h->w),
               *dy = tu_tensor_typed(ctx, d, 4, s->ys, h->dy),
               *dx = tu_tensor_typed(ctx, d, 4, s->xs, NULL);
  TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, dy, w, dx));
  unsetenv("RUMUS_CONV2D_FEW_PIX");
  if (kernel)
    ck_assert_msg(tu_kernel_ran(ctx, kernel), "%s did not run", kernel);
  float *got = tu_download_f32(ctx, dx);
  char name[64];
  snprintf(name, sizeof name, "conv_few_%s_%s", pix ? pix : "gemm",
           tu_dtype_name(d));
  check_op(name, d, got, h->dx, s->nx,
           (c->g.oc / c->g.g) * c->g.kh * c->g.kw);
  rumus_tensor_free(w);
  rumus_tensor_free(dy);
  rumus_tensor_free(dx);
  return got;
}

static size_t gcd_of(size_t a, size_t b) { return b ? gcd_of(b, a % b) : a; }

/* Whether the columns' kernel takes g (few_vert_fits in src/ops/conv.c). */
static int few_vert(const ref_conv_geo *g) {
  const size_t sh = (size_t)g->sh, sw = (size_t)g->sw;
  const size_t sth = sh / gcd_of(sh, (size_t)g->dh);
  const size_t stw = sw / gcd_of(sw, (size_t)g->dw);
  return g->sh % g->dh == 0 && (g->kh + sth - 1) / sth <= 4 &&
         (g->kw + stw - 1) / stw <= 4;
}

START_TEST(few_pixels) {
  const conv_case *c = &FEW_CASES[_i];
  const sizes s = sizes_of(&c->g);
  const int cg = (int)(c->g.c / c->g.g);
  rumus_ctx *ctx = tu_profiling_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  for (int t = 0; t < (_i < 2 ? 3 : 1); t++) {
    const rumus_dtype d = tu_dtypes[t];
    host h = host_make(&c->g, &s, d, 300 + (uint64_t)_i);
    ref_conv2d_bwd_data(&c->g, h.dy, h.w, h.dx);
    char kernel[48];
    snprintf(kernel, sizeof kernel, "conv_bwd_data_few%d", cg);
    float *pair = few_dx(ctx, c, d, &s, &h, "2", kernel);
    /* The default: columns of 4 where strided and they fit, else pairs. */
    if ((c->g.sh > 1 || c->g.sw > 1) && few_vert(&c->g))
      snprintf(kernel, sizeof kernel, "conv_bwd_data_few%dv4", cg);
    float *dflt = few_dx(ctx, c, d, &s, &h, NULL, kernel);
    ck_assert(memcmp(dflt, pair, s.nx * sizeof(float)) == 0);
    free(dflt);
    static const char *const PIX[] = {"4", "8", "v4", "v8"};
    for (int k = 0; k < 4; k++) {
      const int v = PIX[k][0] == 'v';
      snprintf(kernel, sizeof kernel, "conv_bwd_data_few%d%c%s", cg,
               v && few_vert(&c->g) ? 'v' : 'p', PIX[k] + v);
      float *got = few_dx(ctx, c, d, &s, &h, PIX[k], kernel);
      ck_assert_msg(memcmp(got, pair, s.nx * sizeof(float)) == 0,
                    "few case %d %s: P = %s gives other bits than 2", _i,
                    tu_dtype_name(d), PIX[k]);
      free(got);
    }
    setenv("RUMUS_CONV2D_BWD_DATA_TILE", "32x64x4x4", 1);
    float *gemm = few_dx(ctx, c, d, &s, &h, "8", NULL);
    unsetenv("RUMUS_CONV2D_BWD_DATA_TILE");
    ck_assert_msg(memcmp(gemm, pair, s.nx * sizeof(float)) == 0,
                  "few case %d %s: not the GEMM's bits", _i,
                  tu_dtype_name(d));
    free(gemm);
    free(pair);
    host_free(&h);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* L = sum g * y(x, w) through the float64 forward. */
static double loss_of(const ref_conv_geo *g, const sizes *s, const float *x,
                      const float *w, const float *gy, double *y) {
  ref_conv2d_fwd(g, x, w, NULL, y);
  double l = 0;
  for (size_t i = 0; i < s->ny; i++) l += (double)gy[i] * y[i];
  return l;
}

/* Central differences of L with respect to v[0 .. n) into num. */
static void central(const ref_conv_geo *g, const sizes *s, float *x, float *w,
                    const float *gy, float *v, size_t n, double *num,
                    double *y) {
  for (size_t i = 0; i < n; i++) {
    const float v0 = v[i];
    const float hi = v0 + 1e-2f, lo = v0 - 1e-2f;
    v[i] = hi;
    const double lh = loss_of(g, s, x, w, gy, y);
    v[i] = lo;
    const double ll = loss_of(g, s, x, w, gy, y);
    v[i] = v0;
    num[i] = (lh - ll) / ((double)hi - (double)lo);
  }
}

/* Both gradients of the device against central differences of the
 * float64 forward, on both variants: groups 2, stride 2, padding 1 and 2,
 * dilation 2 along W, a 3x3 kernel; then one input channel per group with
 * dilation 2 along H. */
START_TEST(finite_differences) {
  static const ref_conv_geo G[] = {
      {2, 4, 7, 6, 4, 3, 3, 2, 1, 1, 2, 1, 2, 2},
      {2, 3, 9, 8, 6, 3, 3, 2, 1, 2, 1, 2, 1, 3}, /* depthwise, 2 outputs */
  };
  const ref_conv_geo g = G[_i];
  const sizes s = sizes_of(&g);
  const rumus_conv2d_params p = params_of(&g);
  rumus_ctx *ctx = tu_ctx();
  host h = host_make(&g, &s, RUMUS_F32, 7);
  double *num_x = tu_malloc(s.nx * sizeof(double));
  double *num_w = tu_malloc(s.nw * sizeof(double));
  central(&g, &s, h.x, h.w, h.dy, h.x, s.nx, num_x, h.y);
  central(&g, &s, h.x, h.w, h.dy, h.w, s.nw, num_w, h.y);
  rumus_tensor *x = tu_tensor_typed(ctx, RUMUS_F32, 4, s.xs, h.x),
               *w = tu_tensor_typed(ctx, RUMUS_F32, 4, s.ws, h.w),
               *dy = tu_tensor_typed(ctx, RUMUS_F32, 4, s.ys, h.dy),
               *dx = tu_tensor_typed(ctx, RUMUS_F32, 4, s.xs, NULL),
               *dw = tu_tensor_typed(ctx, RUMUS_F32, 4, s.ws, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, dy, w, dx));
    TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, dy, dw));
    float *gx = tu_download(ctx, dx), *gw = tu_download(ctx, dw);
    tu_check_close(v ? "conv_fd_dx_row" : "conv_fd_dx_wg", gx, num_x, s.nx,
                   1e-4, 1e-4);
    tu_check_close(v ? "conv_fd_dw_row" : "conv_fd_dw_wg", gw, num_w, s.nw,
                   1e-4, 1e-4);
    free(gx);
    free(gw);
  }
  free(num_x);
  free(num_w);
  host_free(&h);
  tu_free_all(ctx, x, w, dy, dx, dw, NULL);
}
END_TEST

/* A tensor of n elements of type d at element offset `off` of a fresh
 * buffer (d's bytes of data, NULL: none). */
static rumus_tensor *at_offset(rumus_ctx *ctx, rumus_dtype d, const size_t *s,
                               size_t off, const float *data, cl_mem *buf) {
  const size_t n = s[0] * s[1] * s[2] * s[3], esz = rumus_dtype_size(d);
  cl_int e;
  *buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                        (n + off + 5) * esz, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, d, 4, s, *buf, off * esz, &t));
  if (data) TU_OK(ctx, rumus_tensor_upload_f32(t, data, n));
  return t;
}

/* Every tensor borrowed: the outputs with guard bytes (4096 bytes in),
 * the inputs at odd element offsets; every storage type, both variants,
 * two cases with groups, stride, padding and dilation (2 groups;
 * depthwise, 2 outputs each). */
START_TEST(offsets_and_guards) {
  const conv_case *c = &CASES[_i < 3 ? 6 : 8];
  const ref_conv_geo *g = &c->g;
  const sizes s = sizes_of(g);
  const rumus_conv2d_params p = params_of(g);
  const size_t bs[1] = {g->oc};
  const rumus_dtype d = tu_dtypes[_i % 3];
  rumus_ctx *ctx = tu_ctx();
  host h = host_make(g, &s, d, 31);
  ref_conv2d_fwd(g, h.x, h.w, h.b, h.y);
  ref_conv2d_bwd_data(g, h.dy, h.w, h.dx);
  ref_conv2d_bwd_weight(g, h.x, h.dy, h.dw);
  cl_mem bufs[3];
  rumus_tensor *x = at_offset(ctx, d, s.xs, 3, h.x, &bufs[0]),
               *w = at_offset(ctx, d, s.ws, 5, h.w, &bufs[1]),
               *dy = at_offset(ctx, d, s.ys, 1, h.dy, &bufs[2]),
               *b = tu_tensor_typed(ctx, d, 1, bs, h.b);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded y = tu_guarded_typed(ctx, d, 4, s.ys, NULL),
               dx = tu_guarded_typed(ctx, d, 4, s.xs, NULL),
               dw = tu_guarded_typed(ctx, d, 4, s.ws, NULL);
    TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x, w, b, y.t));
    TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, dy, w, dx.t));
    TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, dy, dw.t));
    float *gy = tu_download_f32(ctx, y.t), *gx = tu_download_f32(ctx, dx.t),
          *gw = tu_download_f32(ctx, dw.t);
    check_op("conv_offsets_fwd", d, gy, h.y, s.ny,
             g->c / g->g * g->kh * g->kw);
    check_op("conv_offsets_bwd_data", d, gx, h.dx, s.nx,
             g->oc / g->g * g->kh * g->kw);
    check_op("conv_offsets_bwd_weight", d, gw, h.dw, s.nw,
             g->n * s.oh * s.ow);
    free(gy);
    free(gx);
    free(gw);
    tu_guarded_check_free(ctx, &y);
    tu_guarded_check_free(ctx, &dx);
    tu_guarded_check_free(ctx, &dw);
  }
  host_free(&h);
  rumus_tensor_free(x);
  rumus_tensor_free(w);
  rumus_tensor_free(dy);
  for (int i = 0; i < 3; i++) clReleaseMemObject(bufs[i]);
  tu_free_all(ctx, b, NULL);
}
END_TEST

/* ---- The GPU variant's Winograd path ------------------------------------ */

/* 3x3, stride 1, dilation 1, one group: odd and even H and W, a 1x1
 * image, 7x5, pads 0, 1, 2 and 3 (the input gradient's pad -1: a crop)
 * and mixed, N 1 and 3, channels 1, 5, 33, 64 and 128. */
static const ref_conv_geo WINO[] = {
    {3, 5, 7, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {1, 1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {1, 33, 8, 6, 33, 3, 3, 1, 1, 0, 0, 1, 1, 1},
    {3, 5, 7, 5, 33, 3, 3, 1, 1, 2, 2, 1, 1, 1},
    {2, 33, 9, 10, 5, 3, 3, 1, 1, 1, 0, 1, 1, 1},
    {1, 4, 6, 5, 3, 3, 3, 1, 1, 3, 2, 1, 1, 1},
    /* 128 output channels: the GEMM's 128 x 128 tiles (the others take
     * its 32 x 32 ones). */
    {1, 64, 6, 6, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1},
};
#define NWINO (sizeof WINO / sizeof WINO[0])

/* The Winograd path's tolerance: the F32 one scaled by WINO_F2 (F(2x2))
 * or WINO_F4 (F(4x4)): the transforms add a few roundings per product
 * and F(4x4)'s points (+-2, 1/6, 1/24) amplify them.  The largest F32
 * |error| over these cases (inputs in [-1, 1]) was 0.046e-6 K for
 * F(2x2) and 0.40e-6 K for F(4x4) (the implicit GEMM's tolerance is
 * 1e-6 K); F(4x4) gets twice the F32 tolerance to stay clear of it.  The
 * 16-bit errors are the storage's rounding (tu_store_atol / rtol). */
#define WINO_F2 1.0
#define WINO_F4 2.0

static void check_wino(const char *what, rumus_dtype d, int wm,
                       const float *got, const double *want, size_t n,
                       size_t terms) {
  const double f = wm == 4 ? WINO_F4 : WINO_F2;
  tu_check_close(what, got, want, n,
                 f * 1e-6 * (double)terms + tu_store_atol(d),
                 f * 1e-5 + tu_store_rtol(d));
}

/* y, dx and dw of case g through the GPU variant with
 * RUMUS_CONV2D_WINOGRAD = wm (as set by the caller), checked against h;
 * returned in out. */
static void wino_ops(rumus_ctx *ctx, const ref_conv_geo *g, rumus_dtype d,
                     int wm, const sizes *s, const host *h, float *out[3]) {
  const rumus_conv2d_params p = params_of(g);
  const size_t bs[1] = {g->oc};
  rumus_tensor *x = tu_tensor_typed(ctx, d, 4, s->xs, h->x),
               *w = tu_tensor_typed(ctx, d, 4, s->ws, h->w),
               *b = tu_tensor_typed(ctx, d, 1, bs, h->b),
               *y = tu_tensor_typed(ctx, d, 4, s->ys, NULL),
               *dy = tu_tensor_typed(ctx, d, 4, s->ys, h->dy),
               *dx = tu_tensor_typed(ctx, d, 4, s->xs, NULL),
               *dw = tu_tensor_typed(ctx, d, 4, s->ws, NULL);
  TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x, w, b, y));
  TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, dy, w, dx));
  TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, dy, dw));
  out[0] = tu_download_f32(ctx, y);
  out[1] = tu_download_f32(ctx, dx);
  out[2] = tu_download_f32(ctx, dw);
  check_wino("conv_wino_fwd", d, wm, out[0], h->y, s->ny, g->c * 9);
  check_wino("conv_wino_bwd_data", d, wm, out[1], h->dx, s->nx, g->oc * 9);
  check_wino("conv_wino_bwd_weight", d, wm, out[2], h->dw, s->nw,
             g->n * s->oh * s->ow);
  rumus_tensor *const ts[] = {x, w, b, y, dy, dx, dw};
  for (int i = 0; i < 7; i++) rumus_tensor_free(ts[i]);
}

static void set_wino(int wm) {
  char v[2] = {(char)('0' + wm), '\0'};
  setenv("RUMUS_CONV2D_WINOGRAD", v, 1);
}

static void free3(float *v[3]) {
  for (int k = 0; k < 3; k++) free(v[k]);
}

/* The weight gradient in 3 pieces (in two rounds for F(2x2) on case 0:
 * a cap of 8 KiB holds 2 pieces' V and the 3 pieces' products): within
 * the tolerance (wino_ops), and the same bits twice. */
static void wino_pieces(rumus_ctx *ctx, const ref_conv_geo *g, int i,
                        int wm, const sizes *s, const host *h) {
  float *a[3], *b[3];
  setenv("RUMUS_CONV2D_WINOGRAD_PIECES", "3", 1);
  if (i == 0 && wm == 2) setenv("RUMUS_CONV2D_WINOGRAD_KB", "8", 1);
  wino_ops(ctx, g, RUMUS_F32, wm, s, h, a);
  wino_ops(ctx, g, RUMUS_F32, wm, s, h, b);
  ck_assert_msg(memcmp(a[2], b[2], s->nw * 4) == 0,
                "case %d: the pieces' second run gave other bits", i);
  unsetenv("RUMUS_CONV2D_WINOGRAD_KB");
  unsetenv("RUMUS_CONV2D_WINOGRAD_PIECES");
  free3(a);
  free3(b);
}

/* F32 only: the same bits run to run, chunks of one image (a scratch cap
 * of 6 KiB: 96 floats a product for F(2x2), 42 for F(4x4)), pieces, and a
 * cap of 1 KiB where not even one image fits: the implicit GEMM's bits. */
/* Asserts that the three ops' outputs a and b have the same bits. */
static void same3(float *const a[3], float *const b[3], const sizes *s,
                  int i, const char *what) {
  const size_t n[3] = {s->ny, s->nx, s->nw};
  for (int k = 0; k < 3; k++)
    ck_assert_msg(memcmp(a[k], b[k], n[k] * 4) == 0, "case %d op %d: %s", i,
                  k, what);
}

static void wino_f32_runs(rumus_ctx *ctx, const ref_conv_geo *g, int i,
                          int wm, const sizes *s, const host *h,
                          float *first[3]) {
  float *got[3];
  wino_ops(ctx, g, RUMUS_F32, wm, s, h, got);
  same3(got, first, s, i, "a second run gave other bits");
  free3(got);
  setenv("RUMUS_CONV2D_WINOGRAD_KB", "6", 1);
  wino_ops(ctx, g, RUMUS_F32, wm, s, h, got);
  free3(got);
  unsetenv("RUMUS_CONV2D_WINOGRAD_KB");
  wino_pieces(ctx, g, i, wm, s, h);
  /* Not even one image (but the 1x1 image of case 1, which fits): the
   * implicit GEMM's bits. */
  setenv("RUMUS_CONV2D_WINOGRAD_KB", i == 1 ? "0" : "1", 1);
  wino_ops(ctx, g, RUMUS_F32, wm, s, h, got);
  unsetenv("RUMUS_CONV2D_WINOGRAD_KB");
  set_wino(0);
  float *gemm[3];
  wino_ops(ctx, g, RUMUS_F32, wm, s, h, gemm);
  same3(got, gemm, s, i, "the fallback is not the GEMM");
  free3(got);
  free3(gemm);
}

/* Case _i / 2 with F(2x2) or F(4x4) forced, every storage type, the three
 * ops; F32 also through wino_f32_runs. */
START_TEST(winograd) {
  const ref_conv_geo *g = &WINO[_i / 2];
  const int wm = _i % 2 ? 4 : 2;
  const sizes s = sizes_of(g);
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  for (int t = 0; t < 3; t++) {
    const rumus_dtype d = tu_dtypes[t];
    host h = host_make(g, &s, d, 900 + (uint64_t)_i);
    ref_conv2d_fwd(g, h.x, h.w, h.b, h.y);
    ref_conv2d_bwd_data(g, h.dy, h.w, h.dx);
    ref_conv2d_bwd_weight(g, h.x, h.dy, h.dw);
    set_wino(wm);
    float *first[3];
    wino_ops(ctx, g, d, wm, &s, &h, first);
    if (d == RUMUS_F32) wino_f32_runs(ctx, g, _i / 2, wm, &s, &h, first);
    unsetenv("RUMUS_CONV2D_WINOGRAD");
    free3(first);
    host_free(&h);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* The per-op overrides: RUMUS_CONV2D_WINOGRAD=4 with
 * RUMUS_CONV2D_BWD_DATA_WINOGRAD=0 gives the forward and weight gradient
 * F(4x4)'s bits and the input gradient the implicit GEMM's;
 * RUMUS_CONV2D_FWD_WINOGRAD=2 over RUMUS_CONV2D_WINOGRAD=0 the forward
 * F(2x2)'s bits; RUMUS_CONV2D_BWD_WEIGHT_WINOGRAD=2 the same for the
 * weight gradient. */
START_TEST(winograd_per_op) {
  const ref_conv_geo *g = &WINO[0];
  const sizes s = sizes_of(g);
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  host h = host_make(g, &s, RUMUS_F32, 66);
  ref_conv2d_fwd(g, h.x, h.w, h.b, h.y);
  ref_conv2d_bwd_data(g, h.dy, h.w, h.dx);
  ref_conv2d_bwd_weight(g, h.x, h.dy, h.dw);
  float *f4[3], *f2[3], *off[3], *mix[3];
  set_wino(4);
  wino_ops(ctx, g, RUMUS_F32, 4, &s, &h, f4);
  set_wino(2);
  wino_ops(ctx, g, RUMUS_F32, 2, &s, &h, f2);
  set_wino(0);
  wino_ops(ctx, g, RUMUS_F32, 2, &s, &h, off);
  setenv("RUMUS_CONV2D_FWD_WINOGRAD", "2", 1);
  setenv("RUMUS_CONV2D_BWD_WEIGHT_WINOGRAD", "2", 1);
  wino_ops(ctx, g, RUMUS_F32, 2, &s, &h, mix);
  ck_assert(memcmp(mix[0], f2[0], s.ny * 4) == 0);
  ck_assert(memcmp(mix[1], off[1], s.nx * 4) == 0);
  ck_assert(memcmp(mix[2], f2[2], s.nw * 4) == 0);
  free3(mix);
  unsetenv("RUMUS_CONV2D_FWD_WINOGRAD");
  unsetenv("RUMUS_CONV2D_BWD_WEIGHT_WINOGRAD");
  set_wino(4);
  setenv("RUMUS_CONV2D_BWD_DATA_WINOGRAD", "0", 1);
  wino_ops(ctx, g, RUMUS_F32, 4, &s, &h, mix);
  ck_assert(memcmp(mix[0], f4[0], s.ny * 4) == 0);
  ck_assert(memcmp(mix[1], off[1], s.nx * 4) == 0);
  ck_assert(memcmp(mix[2], f4[2], s.nw * 4) == 0);
  for (int k = 0; k < 3; k++) /* other paths */
    ck_assert_msg(memcmp(f4[k], off[k], (k == 0 ? s.ny : k == 1 ? s.nx : s.nw)
                  * 4) != 0, "op %d: F(4x4) gave the GEMM's bits", k);
  unsetenv("RUMUS_CONV2D_BWD_DATA_WINOGRAD");
  unsetenv("RUMUS_CONV2D_WINOGRAD");
  free3(f4);
  free3(f2);
  free3(off);
  free3(mix);
  host_free(&h);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Shapes the path does not take (stride 2, dilation 2, groups 2, 5x5),
 * forced on: the implicit GEMM runs, all three ops right. */
START_TEST(winograd_fallback) {
  static const ref_conv_geo G[] = {
      {2, 4, 7, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1},
      {2, 4, 7, 6, 5, 3, 3, 1, 1, 2, 2, 2, 2, 1},
      {2, 4, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},
      {2, 4, 7, 6, 5, 5, 5, 1, 1, 2, 2, 1, 1, 1},
  };
  const conv_case c = {G[_i], 1};
  const sizes s = sizes_of(&c.g);
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  host h = host_make(&c.g, &s, RUMUS_F32, 40 + (uint64_t)_i);
  ref_conv2d_fwd(&c.g, h.x, h.w, h.b, h.y);
  ref_conv2d_bwd_data(&c.g, h.dy, h.w, h.dx);
  ref_conv2d_bwd_weight(&c.g, h.x, h.dy, h.dw);
  float *got[3];
  set_wino(2);
  run_case(ctx, &c, RUMUS_F32, &s, &h, "conv_wino_fallback", got);
  unsetenv("RUMUS_CONV2D_WINOGRAD");
  for (int k = 0; k < 3; k++) free(got[k]);
  host_free(&h);
  tu_free_all(ctx, NULL);
}
END_TEST

/* The Winograd input and weight gradients against central differences of
 * the float64 forward (pad 1 on 7x6, pad 0 on 5x5: the input gradient's
 * pad 2), both tile sizes: atol, rtol 1e-4 as above, times the path's
 * factor. */
START_TEST(winograd_finite_differences) {
  static const ref_conv_geo G[] = {
      {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 5, 5, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1},
  };
  const ref_conv_geo g = G[_i / 2];
  const int wm = _i % 2 ? 4 : 2;
  const sizes s = sizes_of(&g);
  const rumus_conv2d_params p = params_of(&g);
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  host h = host_make(&g, &s, RUMUS_F32, 8);
  double *num_x = tu_malloc(s.nx * sizeof(double));
  double *num_w = tu_malloc(s.nw * sizeof(double));
  central(&g, &s, h.x, h.w, h.dy, h.x, s.nx, num_x, h.y);
  central(&g, &s, h.x, h.w, h.dy, h.w, s.nw, num_w, h.y);
  rumus_tensor *x = tu_tensor_typed(ctx, RUMUS_F32, 4, s.xs, h.x),
               *w = tu_tensor_typed(ctx, RUMUS_F32, 4, s.ws, h.w),
               *dy = tu_tensor_typed(ctx, RUMUS_F32, 4, s.ys, h.dy),
               *dx = tu_tensor_typed(ctx, RUMUS_F32, 4, s.xs, NULL),
               *dw = tu_tensor_typed(ctx, RUMUS_F32, 4, s.ws, NULL);
  set_wino(wm);
  TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, dy, w, dx));
  TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, dy, dw));
  unsetenv("RUMUS_CONV2D_WINOGRAD");
  float *gx = tu_download(ctx, dx), *gw = tu_download(ctx, dw);
  const double f = wm == 4 ? WINO_F4 : WINO_F2;
  tu_check_close("conv_wino_fd_dx", gx, num_x, s.nx, f * 1e-4, f * 1e-4);
  tu_check_close("conv_wino_fd_dw", gw, num_w, s.nw, f * 1e-4, f * 1e-4);
  free(gx);
  free(gw);
  free(num_x);
  free(num_w);
  host_free(&h);
  tu_free_all(ctx, x, w, dy, dx, dw, NULL);
}
END_TEST

/* Forced Winograd on borrowed buffers: inputs at odd element offsets,
 * outputs with guard bytes, every storage type. */
START_TEST(winograd_offsets) {
  const ref_conv_geo *g = &WINO[0];
  const sizes s = sizes_of(g);
  const rumus_conv2d_params p = params_of(g);
  const size_t bs[1] = {g->oc};
  const rumus_dtype d = tu_dtypes[_i % 3];
  const int wm = _i < 3 ? 2 : 4;
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  host h = host_make(g, &s, d, 32);
  ref_conv2d_fwd(g, h.x, h.w, h.b, h.y);
  ref_conv2d_bwd_data(g, h.dy, h.w, h.dx);
  ref_conv2d_bwd_weight(g, h.x, h.dy, h.dw);
  cl_mem bufs[3];
  rumus_tensor *x = at_offset(ctx, d, s.xs, 3, h.x, &bufs[0]),
               *w = at_offset(ctx, d, s.ws, 5, h.w, &bufs[1]),
               *dy = at_offset(ctx, d, s.ys, 1, h.dy, &bufs[2]),
               *b = tu_tensor_typed(ctx, d, 1, bs, h.b);
  tu_guarded y = tu_guarded_typed(ctx, d, 4, s.ys, NULL),
             dx = tu_guarded_typed(ctx, d, 4, s.xs, NULL),
             dw = tu_guarded_typed(ctx, d, 4, s.ws, NULL);
  set_wino(wm);
  TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x, w, b, y.t));
  TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, dy, w, dx.t));
  TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, dy, dw.t));
  unsetenv("RUMUS_CONV2D_WINOGRAD");
  float *gy = tu_download_f32(ctx, y.t), *gx = tu_download_f32(ctx, dx.t),
        *gw = tu_download_f32(ctx, dw.t);
  check_wino("conv_wino_offsets_fwd", d, wm, gy, h.y, s.ny, g->c * 9);
  check_wino("conv_wino_offsets_bwd_data", d, wm, gx, h.dx, s.nx, g->oc * 9);
  check_wino("conv_wino_offsets_bwd_weight", d, wm, gw, h.dw, s.nw,
             g->n * s.oh * s.ow);
  free(gy);
  free(gx);
  free(gw);
  tu_guarded_check_free(ctx, &y);
  tu_guarded_check_free(ctx, &dx);
  tu_guarded_check_free(ctx, &dw);
  host_free(&h);
  rumus_tensor_free(x);
  rumus_tensor_free(w);
  rumus_tensor_free(dy);
  for (int i = 0; i < 3; i++) clReleaseMemObject(bufs[i]);
  tu_free_all(ctx, b, NULL);
}
END_TEST

/* N = 0: nothing to write for y and dx, a zero weight gradient (also
 * depthwise, nothing written past it); C = 0: y is the bias. */
START_TEST(empty_sums) {
  rumus_ctx *ctx = tu_ctx();
  const rumus_conv2d_params p = RUMUS_CONV2D_DEFAULTS;
  const size_t xs[4] = {0, 2, 5, 5}, ws[4] = {3, 2, 3, 3}, ys[4] = {0, 3, 3, 3};
  const size_t xs0[4] = {2, 0, 5, 5}, ws0[4] = {3, 0, 3, 3},
               ys0[4] = {2, 3, 3, 3}, bs[1] = {3};
  const float bias[3] = {1.5f, -2.0f, 0.25f};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 4, xs, NULL),
               *w = tu_tensor(ctx, RUMUS_F32, 4, ws, NULL),
               *y = tu_tensor(ctx, RUMUS_F32, 4, ys, NULL),
               *x0 = tu_tensor(ctx, RUMUS_F32, 4, xs0, NULL),
               *w0 = tu_tensor(ctx, RUMUS_F32, 4, ws0, NULL),
               *y0 = tu_tensor(ctx, RUMUS_F32, 4, ys0, NULL),
               *b = tu_tensor(ctx, RUMUS_F32, 1, bs, bias);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_tensor_fill(w, NAN));
    TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x, w, NULL, y));
    TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, y, w, x));
    TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, y, w));
    float *gw = tu_download(ctx, w);
    for (size_t i = 0; i < 54; i++) ck_assert_float_eq(gw[i], 0.0f);
    free(gw);
    /* The same with one input channel per group (the depthwise kernels:
     * wd [2, 1, 3, 3] is a view of w's first 18 elements). */
    rumus_tensor *wd = NULL;
    const rumus_conv2d_params pd = {1, 1, 0, 0, 1, 1, 2};
    const size_t xds[4] = {0, 2, 5, 5}, wds[4] = {2, 1, 3, 3},
                 yds[4] = {0, 2, 3, 3};
    rumus_tensor *xd = tu_tensor(ctx, RUMUS_F32, 4, xds, NULL),
                 *yd = tu_tensor(ctx, RUMUS_F32, 4, yds, NULL);
    TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, wds,
                                 rumus_tensor_cl_mem(w, NULL), 0, &wd));
    TU_OK(ctx, rumus_tensor_fill(w, NAN));
    TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &pd, yd, wd, xd));
    TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &pd, xd, yd, wd));
    gw = tu_download(ctx, w);
    for (size_t i = 0; i < 54; i++)
      ck_assert(i < 18 ? gw[i] == 0.0f : isnan(gw[i]));
    free(gw);
    rumus_tensor_free(xd);
    rumus_tensor_free(yd);
    rumus_tensor_free(wd);
    TU_OK(ctx, rumus_tensor_fill(y0, NAN));
    TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x0, w0, b, y0));
    float *gy = tu_download(ctx, y0);
    for (size_t i = 0; i < 54; i++) ck_assert_float_eq(gy[i], bias[i / 9 % 3]);
    free(gy);
  }
  tu_free_all(ctx, x, w, y, x0, w0, y0, b, NULL);
}
END_TEST

START_TEST(bad_arguments) {
  rumus_ctx *ctx = tu_ctx();
  const size_t xs[4] = {2, 4, 5, 6}, ws[4] = {6, 4, 3, 3}, ys[4] = {2, 6, 3, 4};
  const size_t w2s[4] = {6, 2, 3, 3}, x3s[3] = {4, 5, 6}, bs[1] = {6},
               b5s[1] = {5}, y5s[4] = {2, 6, 3, 5};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 4, xs, NULL),
               *w = tu_tensor(ctx, RUMUS_F32, 4, ws, NULL),
               *y = tu_tensor(ctx, RUMUS_F32, 4, ys, NULL),
               *w2 = tu_tensor(ctx, RUMUS_F32, 4, w2s, NULL),
               *x3 = tu_tensor(ctx, RUMUS_F32, 3, x3s, NULL),
               *b = tu_tensor(ctx, RUMUS_F32, 1, bs, NULL),
               *b5 = tu_tensor(ctx, RUMUS_F32, 1, b5s, NULL),
               *y5 = tu_tensor(ctx, RUMUS_F32, 4, y5s, NULL),
               *h = tu_tensor(ctx, RUMUS_F16, 4, ys, NULL),
               *i = tu_tensor(ctx, RUMUS_I32, 4, xs, NULL);
  rumus_conv2d_params p = RUMUS_CONV2D_DEFAULTS;
  size_t out[4];
  TU_OK(ctx, rumus_conv2d_out_shape(ctx, &p, x, w, out));
  ck_assert(out[0] == 2 && out[1] == 6 && out[2] == 3 && out[3] == 4);
  TU_OK(ctx, rumus_conv2d_fwd(ctx, NULL, x, w, b, y));
  TU_STATUS(RUMUS_ENULL, rumus_conv2d_fwd(NULL, &p, x, w, b, y));
  TU_STATUS(RUMUS_ENULL, rumus_conv2d_fwd(ctx, &p, NULL, w, b, y));
  TU_STATUS(RUMUS_ENULL, rumus_conv2d_bwd_data(ctx, &p, y, NULL, x));
  TU_STATUS(RUMUS_ENULL, rumus_conv2d_bwd_weight(ctx, &p, x, y, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_conv2d_out_shape(ctx, &p, x, w, NULL));
  /* Parameters: RUMUS_EINVAL naming the field. */
  const struct {
    int *field, bad;
    const char *name;
  } bad[] = {{&p.stride_h, 0, "stride_h"},     {&p.stride_w, -1, "stride_w"},
             {&p.pad_h, -1, "pad_h"},          {&p.pad_w, -2, "pad_w"},
             {&p.dilation_h, 0, "dilation_h"}, {&p.dilation_w, 0, "dilation_w"},
             {&p.groups, 0, "groups"}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    const int keep = *bad[k].field;
    *bad[k].field = bad[k].bad;
    TU_STATUS(RUMUS_EINVAL, rumus_conv2d_fwd(ctx, &p, x, w, b, y));
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), bad[k].name), "%s",
                  rumus_ctx_errmsg(ctx));
    TU_STATUS(RUMUS_EINVAL, rumus_conv2d_bwd_data(ctx, &p, y, w, x));
    TU_STATUS(RUMUS_EINVAL, rumus_conv2d_bwd_weight(ctx, &p, x, y, w));
    *bad[k].field = keep;
  }
  /* Groups that divide C = 4 but not OC = 6, and neither. */
  p.groups = 4;
  TU_STATUS(RUMUS_EINVAL, rumus_conv2d_fwd(ctx, &p, x, w, b, y));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "output channels"), "%s",
                rumus_ctx_errmsg(ctx));
  p.groups = 3;
  TU_STATUS(RUMUS_EINVAL, rumus_conv2d_bwd_weight(ctx, &p, x, y, w));
  /* groups 2 needs w [6, 2, 3, 3]: w of axis 1 = 4 is a shape error. */
  p.groups = 2;
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_fwd(ctx, &p, x, w, b, y));
  TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x, w2, b, y));
  p.groups = 1;
  /* A kernel larger than the padded input: the axis is named. */
  p.dilation_h = 3; /* span 7 > 5 */
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_out_shape(ctx, &p, x, w, out));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "height"), "%s",
                rumus_ctx_errmsg(ctx));
  p.pad_h = 1; /* 5 + 2 = 7: fits, OH = 1 */
  TU_OK(ctx, rumus_conv2d_out_shape(ctx, &p, x, w, out));
  ck_assert(out[2] == 1 && out[3] == 4);
  p = (rumus_conv2d_params)RUMUS_CONV2D_DEFAULTS;
  p.dilation_w = 4; /* span 9 > 6 */
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_bwd_weight(ctx, &p, x, y, w));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "width"), "%s",
                rumus_ctx_errmsg(ctx));
  p = (rumus_conv2d_params)RUMUS_CONV2D_DEFAULTS;
  /* Ranks and extents. */
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_fwd(ctx, &p, x3, w, b, y));
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_fwd(ctx, &p, x, w, b5, y));
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_fwd(ctx, &p, x, w, b, y5));
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_bwd_data(ctx, &p, y5, w, x));
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_bwd_weight(ctx, &p, x, y5, w));
  TU_STATUS(RUMUS_ESHAPE, rumus_conv2d_bwd_weight(ctx, &p, x, y, w2));
  /* Types. */
  TU_STATUS(RUMUS_EDTYPE, rumus_conv2d_fwd(ctx, &p, x, w, b, h));
  TU_STATUS(RUMUS_EDTYPE, rumus_conv2d_bwd_data(ctx, &p, h, w, x));
  TU_STATUS(RUMUS_EDTYPE, rumus_conv2d_bwd_weight(ctx, &p, i, y, w));
  /* Outputs sharing bytes with inputs: views into one buffer. */
  const size_t bigs[1] = {4096};
  rumus_tensor *big = tu_tensor(ctx, RUMUS_F32, 1, bigs, NULL), *yv = NULL,
               *dxv = NULL, *dwv = NULL;
  cl_mem bm = rumus_tensor_cl_mem(big, NULL);
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, ys, bm, 0, &yv));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, xs, bm, 400, &dxv));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, ws, bm, 1000, &dwv));
  TU_STATUS(RUMUS_EINVAL, rumus_conv2d_fwd(ctx, &p, dxv, w, b, yv));
  TU_STATUS(RUMUS_EINVAL, rumus_conv2d_bwd_data(ctx, &p, yv, w, dxv));
  TU_STATUS(RUMUS_EINVAL, rumus_conv2d_bwd_weight(ctx, &p, dxv, y, dwv));
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 4, xs, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_conv2d_fwd(ctx, &p, o, w, b, y));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, x, w, y, w2, x3, b, b5, y5, h, i, yv, dxv, dwv, big,
              NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("conv");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, shapes, 0, (int)NCASES);
  tcase_add_loop_test(core, finite_differences, 0, 2);
  tcase_add_test(core, tile_override);
  tcase_add_test(core, cpu_tiles);
  tcase_add_loop_test(core, direct_paths, 0, 3);
  suite_add_tcase(s, core);
  TCase *few = tu_tcase("few");
  tcase_add_loop_test(few, few_pixels, 0, (int)NFEW);
  suite_add_tcase(s, few);
  TCase *wino = tu_tcase("winograd");
  tcase_add_loop_test(wino, winograd, 0, (int)(2 * NWINO));
  tcase_add_test(wino, winograd_per_op);
  tcase_add_loop_test(wino, winograd_fallback, 0, 4);
  tcase_add_loop_test(wino, winograd_finite_differences, 0, 4);
  tcase_add_loop_test(wino, winograd_offsets, 0, 6);
  suite_add_tcase(s, wino);
  TCase *limits = tu_tcase("limits");
  tcase_add_loop_test(limits, offsets_and_guards, 0, 6);
  tcase_add_test(limits, empty_sums);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_arguments);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
