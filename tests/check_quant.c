/*
 * check_quant.c - Q8 block quantization (rumus.h, "Quantization") against
 * the float64 reference of ref/quant.c, on both variants:
 *
 *   quantize     bit for bit: every int8 value and every F16 scale's bits,
 *                for F32, F16 and BF16 input (the reference reads the
 *                input as stored), blocks of 16, 32 (and 0, the default),
 *                64, 128 and 256, rows whose length is not a multiple of
 *                the block; crafted blocks: all zero, ties at .5 (half
 *                away from zero), the scale's own ties (to even), the
 *                clamp to 127 under a scale rounded down, scales clamped
 *                to 2^-24 and 65504, NaN and infinities;
 *   dequantize   q * s per output type, within half an ulp of the type
 *                (tests/tu_dtype.h; F32 exactly);
 *   round trip   on Gaussian data (256 rows of 4096, N(0, 1)): every
 *                element within (1 + 2^-11) amax / 254 of its block, and
 *                within s / 2 of the device's own scale s; the relative
 *                error ||x - x'|| / ||x|| below RT_REL_MAX (stated there);
 *   matmul_q8    against the float64 product of A (as stored) and the
 *                dequantized B, M = 1 to 8 (matrix-vector kernels, the
 *                same bits run to run) and 37, 128 (tiled / row blocks),
 *                odd N, K not a multiple of the block, of 16 or of 4,
 *                aligned and unaligned rows, A in F32,
 *                F16 and BF16, C in F32 and A's type, batches, guard
 *                bytes, odd offsets, B past one launch's rows;
 *   the int8 type (fills), rumus_cache_fill covering every F32 program of
 *   the family, and bad arguments (exact statuses, messages naming the
 *   argument, axis or byte ranges).
 * Bound of the product: B's values are exact in float (q s: 8 by 11
 * significant bits), so each output is a float sum of K float products in
 * some order, whose error is at most (K + 1) 2^-24 sum_k |a_k b_k|
 * (Higham's gamma_K for any order, with the products' own rounding); a
 * 16-bit C adds its rounding: (1 + r) e + r |want| + a, with r and a from
 * tu_store_rtol / tu_store_atol.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

static const size_t BLOCKS[] = {0, 16, 32, 64, 128, 256};
#define N_BLOCKS (sizeof BLOCKS / sizeof BLOCKS[0])

static size_t bs_of(size_t block_size) {
  return block_size ? block_size : 32;
}
static size_t nb_of(size_t k, size_t block_size) {
  return (k + bs_of(block_size) - 1) / bs_of(block_size);
}

/* A standard normal value (Box-Muller on two uniforms). */
static double gauss(tu_rng *r) {
  const double u = 1.0 - tu_uniform(r, 0.0f, 1.0f),
               v = tu_uniform(r, 0.0f, 1.0f);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* The variant and type of a loop index i = variant * 3 + type. */
static rumus_ctx *ctx_for(int i, rumus_dtype *d) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[i / 3]);
  *d = tu_dtypes[i % 3];
  return ctx;
}

/* ---- Quantize ------------------------------------------------------------ */

/* Quantizes x0 (rows x k, rounded to d first) with block_size on the
 * device and compares q and the scales' bits with the reference. */
static void check_quantize(rumus_ctx *ctx, rumus_dtype d, const float *x0,
                           size_t rows, size_t k, size_t block_size,
                           const char *what) {
  const size_t nb = nb_of(k, block_size), n = rows * k;
  const size_t sx[2] = {rows, k}, ss[2] = {rows, nb};
  float *x = tu_malloc(n * sizeof *x);
  memcpy(x, x0, n * sizeof *x);
  tu_round_to(d, x, n);
  rumus_tensor *tx = tu_tensor_typed(ctx, d, 2, sx, x),
               *tq = tu_tensor(ctx, RUMUS_I8, 2, sx, NULL),
               *ts = tu_tensor(ctx, RUMUS_F16, 2, ss, NULL);
  TU_OK(ctx, rumus_quantize_q8(ctx, tx, tq, ts, block_size));
  int8_t *q = (int8_t *)tu_download(ctx, tq), *wq = tu_malloc(n);
  uint16_t *s = (uint16_t *)tu_download(ctx, ts),
           *ws = tu_malloc(rows * nb * sizeof *ws);
  ref_quantize_q8(x, rows, k, bs_of(block_size), wq, ws);
  for (size_t i = 0; i < rows * nb; i++)
    if (s[i] != ws[i])
      ck_abort_msg("%s (%s, block %zu): scale[%zu] = %#06x, want %#06x", what,
                   tu_dtype_name(d), bs_of(block_size), i, s[i], ws[i]);
  for (size_t i = 0; i < n; i++)
    if (q[i] != wq[i])
      ck_abort_msg(
          "%s (%s, block %zu): q[%zu] = %d, want %d (x = %.9g, "
          "scale %#06x)",
          what, tu_dtype_name(d), bs_of(block_size), i, q[i], wq[i], x[i],
          ws[i / k * nb + i % k / bs_of(block_size)]);
  free(x);
  free(q);
  free(wq);
  free(s);
  free(ws);
  rumus_tensor_free(tx);
  rumus_tensor_free(tq);
  rumus_tensor_free(ts);
}

/* Gaussian rows of several magnitudes (1e-3 to 1e3, within F16's range),
 * rows of 300: every block size leaves a short last block. */
START_TEST(quantize_blocks) {
  rumus_dtype d;
  rumus_ctx *ctx = ctx_for(_i, &d);
  enum { R = 7, K = 300 };
  float *x = tu_malloc(R * K * sizeof *x);
  tu_rng rng;
  tu_rng_seed(&rng, 11);
  for (size_t r = 0; r < R; r++) {
    const double mag = pow(10.0, (double)r - 3.0);
    for (size_t j = 0; j < K; j++) x[r * K + j] = (float)(mag * gauss(&rng));
  }
  /* One block of a row far larger than its neighbours. */
  x[3 * K + 40] = 40.0f;
  for (size_t b = 0; b < N_BLOCKS; b++)
    check_quantize(ctx, d, x, R, K, BLOCKS[b], "gaussian rows");
  free(x);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Crafted blocks of 16: each row of the table is one block (rows of
 * N_SPECIAL * 16 + 5: the last block short). */
enum { SB = 16 };

static void special_blocks(float *x, size_t *k_out) {
  const float tiny = 0x1p-24f;
  float *b = x;
  /* 0: all zero (and -0). */
  for (int j = 0; j < SB; j++) b[j] = j % 2 ? -0.0f : 0.0f;
  b += SB;
  /* 1: amax 127 * 0.25 makes s = 0.25; ties (j + 0.5) s go away from 0,
   * values a float below them come down. */
  const float t[SB] = {31.75f,  0.125f,  -0.125f,  0.375f, -0.375f, 0.625f,
                       -0.625f, 31.625f, -31.625f, 15.875f, -15.875f, 0.125f,
                       -0.375f, 31.625f, 0.0f,     -31.75f};
  memcpy(b, t, sizeof t);
  for (int j = 11; j < 14; j++) b[j] = nextafterf(b[j], 0.0f);
  b += SB;
  /* 2, 3: amax / 127 exactly halfway between two F16 values: to even
   * (1 + 2^-11 -> 1.0, 0x3C00; 1 + 3 2^-11 -> 1 + 2^-9, 0x3C02). */
  for (int j = 0; j < SB; j++) b[j] = j ? 1.0f : 127.0f * (1.0f + 0x1p-11f);
  b += SB;
  for (int j = 0; j < SB; j++) b[j] = j ? -2.0f : 127.0f * (1.0f + 0x3p-11f);
  b += SB;
  /* 4: amax / 127 = 1.4 2^-24 rounds to the smallest F16, 2^-24: amax / s
   * = 177.8, clamped to 127. */
  for (int j = 0; j < SB; j++)
    b[j] = (float)(j + 1) * 127.0f * 1.4f * tiny / SB;
  b += SB;
  /* 5: amax / 127 below 2^-25 rounds to 0: s is clamped to 2^-24. */
  for (int j = 0; j < SB; j++) b[j] = j % 2 ? 1e-9f : -2e-7f;
  b += SB;
  /* 6: amax / 127 beyond F16 (1e7 / 127 = 78740): s = 65504. */
  for (int j = 0; j < SB; j++)
    b[j] = j ? 65504.0f * (float)(j - 8) * 10.0f : 1e7f;
  b += SB;
  /* 7, 8, 9: a NaN, +inf, -inf: scale NaN, every q 0. */
  for (int j = 0; j < SB; j++) b[j] = j == 5 ? NAN : (float)j;
  b += SB;
  for (int j = 0; j < SB; j++) b[j] = j == 0 ? INFINITY : (float)j;
  b += SB;
  for (int j = 0; j < SB; j++) b[j] = j == 15 ? -INFINITY : (float)j;
  b += SB;
  /* 10: amax exactly 127 * 65504: s = 65504 with no clamp. */
  for (int j = 0; j < SB; j++)
    b[j] = j ? (float)j * 65504.0f : -127.0f * 65504.0f;
  b += SB;
  /* 11: the short last block (5 elements), amax negative. */
  const float last[5] = {-3.0f, 1.5f, 0.75f, -0.01f, 2.999f};
  memcpy(b, last, sizeof last);
  *k_out = (size_t)(b - x) + 5;
}
#define N_SPECIAL 11

START_TEST(quantize_special) {
  rumus_dtype d;
  rumus_ctx *ctx = ctx_for(_i, &d);
  float x[(N_SPECIAL + 1) * SB];
  size_t k;
  special_blocks(x, &k);
  check_quantize(ctx, d, x, 1, k, SB, "special blocks");
  /* The format's answers worked out by hand (F32 input), so that the
   * kernel and the reference cannot share a misreading. */
  if (d == RUMUS_F32) {
    const size_t ss[2] = {1, N_SPECIAL + 1}, sx[2] = {1, k};
    rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, sx, x),
                 *tq = tu_tensor(ctx, RUMUS_I8, 2, sx, NULL),
                 *ts = tu_tensor(ctx, RUMUS_F16, 2, ss, NULL);
    TU_OK(ctx, rumus_quantize_q8(ctx, tx, tq, ts, SB));
    int8_t *q = (int8_t *)tu_download(ctx, tq);
    uint16_t *s = (uint16_t *)tu_download(ctx, ts);
    static const uint16_t WANT_S[N_SPECIAL + 1] = {
        0x3C00, 0x3400, 0x3C00, 0x3C02, 0x0001, 0x0001,
        0x7BFF, 0x7E00, 0x7E00, 0x7E00, 0x7BFF, 0x260C};
    for (int b = 0; b < N_SPECIAL + 1; b++)
      ck_assert_msg(s[b] == WANT_S[b], "scale of block %d: %#06x, want %#06x",
                    b, s[b], WANT_S[b]);
    static const int8_t WANT_TIES[SB] = {127,  1,  -1,  2, -2, 3,   -3, 127,
                                         -127, 64, -64, 0, -1, 126, 0,  -127};
    for (int j = 0; j < SB; j++)
      ck_assert_msg(q[SB + j] == WANT_TIES[j], "tie block q[%d] = %d, want %d",
                    j, q[SB + j], WANT_TIES[j]);
    ck_assert_int_eq(q[2 * SB], 127);      /* 127.06 under s = 1 */
    ck_assert_int_eq(q[4 * SB + 15], 127); /* 177.8, clamped */
    ck_assert_int_eq(q[6 * SB], 127);      /* 1e7 / 65504 = 152.7 */
    ck_assert_int_eq(q[6 * SB + 1], -70);  /* 65504 * -70 */
    for (int j = 0; j < 3 * SB; j++) ck_assert_int_eq(q[7 * SB + j], 0);
    ck_assert_int_eq(q[10 * SB], -127);
    ck_assert_int_eq(q[11 * SB], -127); /* -3 / (3 / 127) */
    free(q);
    free(s);
    tu_free_all(ctx, tx, tq, ts, NULL);
    return;
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Dequantize ---------------------------------------------------------- */

/* Random int8 values (-128 included) and F16 scales from 2^-24 to 250
 * (so that F16 output stays finite), one NaN scale, into y of type d. */
START_TEST(dequantize_types) {
  rumus_dtype d;
  rumus_ctx *ctx = ctx_for(_i, &d);
  enum { R = 7, K = 100 };
  tu_rng rng;
  tu_rng_seed(&rng, 5);
  int8_t q[R * K];
  for (size_t i = 0; i < R * K; i++) q[i] = (int8_t)(tu_rand_u32(&rng) >> 24);
  for (size_t b = 0; b < 4; b++) {
    const size_t bsz = BLOCKS[b], nb = nb_of(K, bsz);
    uint16_t *s = tu_malloc(R * nb * sizeof *s);
    for (size_t i = 0; i < R * nb; i++)
      s[i] = rumus_f32_to_f16(ldexpf(tu_uniform(&rng, 1.0f, 1.95f),
                                     (int)(tu_rand_u32(&rng) % 32) - 24));
    s[0] = 0x0001;          /* 2^-24 */
    s[R * nb - 1] = 0x7E00; /* NaN: its block dequantizes to NaN */
    const size_t sx[2] = {R, K}, ss[2] = {R, nb};
    rumus_tensor *tq = tu_tensor(ctx, RUMUS_I8, 2, sx, q),
                 *ts = tu_tensor(ctx, RUMUS_F16, 2, ss, s),
                 *ty = tu_tensor_typed(ctx, d, 2, sx, NULL);
    TU_OK(ctx, rumus_dequantize_q8(ctx, tq, ts, bsz, ty));
    float *y = tu_download_f32(ctx, ty);
    double want[R * K];
    ref_dequantize_q8(q, s, R, K, bs_of(bsz), want);
    tu_check_close("dequantize", y, want, R * K, tu_store_atol(d),
                   tu_store_rtol(d));
    free(y);
    free(s);
    rumus_tensor_free(tq);
    rumus_tensor_free(ts);
    rumus_tensor_free(ty);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Round trip on Gaussian data ------------------------------------------
 */

/* Relative error ||x - x'|| / ||x|| of quantize-then-dequantize on N(0, 1)
 * data: the rounding error of an element is uniform in [-s/2, s/2], so
 * the expected ratio is sqrt(E[amax^2] / 12) / 127, amax the largest of
 * `block` |N(0, 1)|: 0.47%, 0.53%, 0.59%, 0.65% and 0.70% for blocks of
 * 16 to 256.  The bounds allow 5% over these; this seed measured
 * 0.469%, 0.534%, 0.592%, 0.645% and 0.694% (on both variants: the
 * results are the reference's bits). */
static const double RT_REL_MAX[N_BLOCKS] = {0.0056, 0.0049, 0.0056,
                                            0.0062, 0.0068, 0.0074};

START_TEST(round_trip_gaussian) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  enum { R = 256, K = 4096 };
  const size_t sx[2] = {R, K}, n = (size_t)R * K;
  float *x = tu_malloc(n * sizeof *x);
  tu_rng rng;
  tu_rng_seed(&rng, 23);
  for (size_t i = 0; i < n; i++) x[i] = (float)gauss(&rng);
  rumus_tensor *tx = tu_tensor(ctx, RUMUS_F32, 2, sx, x),
               *tq = tu_tensor(ctx, RUMUS_I8, 2, sx, NULL),
               *ty = tu_tensor(ctx, RUMUS_F32, 2, sx, NULL);
  double *want = tu_malloc(n * sizeof *want),
         *bound = tu_malloc(n * sizeof *bound);
  for (size_t b = 0; b < N_BLOCKS; b++) {
    const size_t bs = bs_of(BLOCKS[b]), nb = K / bs, ss[2] = {R, nb};
    rumus_tensor *ts = tu_tensor(ctx, RUMUS_F16, 2, ss, NULL);
    TU_OK(ctx, rumus_quantize_q8(ctx, tx, tq, ts, BLOCKS[b]));
    TU_OK(ctx, rumus_dequantize_q8(ctx, tq, ts, BLOCKS[b], ty));
    float *y = tu_download(ctx, ty);
    uint16_t *s = (uint16_t *)tu_download(ctx, ts);
    for (size_t i = 0; i < n; i++) want[i] = x[i];
    /* From x alone: (1 + 2^-11) amax / 254 over each block. */
    for (size_t blk = 0; blk < R * nb; blk++) {
      double amax = 0;
      for (size_t j = 0; j < bs; j++) amax = fmax(amax, fabs(x[blk * bs + j]));
      for (size_t j = 0; j < bs; j++)
        bound[blk * bs + j] = (1.0 + 0x1p-11) * amax / 254.0;
    }
    tu_check_bound("round trip (amax bound)", y, want, bound, n);
    /* From the device's scale: s / 2. */
    for (size_t i = 0; i < n; i++) bound[i] = 0.5 * rumus_f16_to_f32(s[i / bs]);
    tu_check_bound("round trip (scale bound)", y, want, bound, n);
    double e2 = 0, x2 = 0;
    for (size_t i = 0; i < n; i++) {
      e2 += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
      x2 += (double)x[i] * x[i];
    }
    const double rel = sqrt(e2 / x2);
    ck_assert_msg(rel <= RT_REL_MAX[b], "block %zu: relative error %.5f > %.4f",
                  bs, rel, RT_REL_MAX[b]);
    free(y);
    free(s);
    rumus_tensor_free(ts);
  }
  free(x);
  free(want);
  free(bound);
  tu_free_all(ctx, tx, tq, ty, NULL);
}
END_TEST

/* ---- Matrix product ------------------------------------------------------ */

/* A weight matrix quantized on the host (reference), n rows of k. */
typedef struct {
  size_t n, k, bs, nb;
  int8_t *q;
  uint16_t *s;
} qmat;

static qmat qmat_new(tu_rng *rng, size_t n, size_t k, size_t bs) {
  qmat m = {n, k, bs, (k + bs - 1) / bs, tu_malloc(n * k + 1), NULL};
  m.s = tu_malloc((n * m.nb + 1) * sizeof *m.s);
  float *w = tu_malloc((n * k + 1) * sizeof *w);
  for (size_t i = 0; i < n * k; i++) w[i] = (float)gauss(rng);
  ref_quantize_q8(w, n, k, bs, m.q, m.s);
  free(w);
  return m;
}
static void qmat_free(qmat *m) {
  free(m->q);
  free(m->s);
}

/* Checks C (m x n, downloaded as got) against the float64 product of a
 * (m x k, as stored) and the dequantized B, under the header's bound. */
static void check_product(const char *what, rumus_dtype ct, const float *a,
                          size_t m, const qmat *B, const float *got) {
  const size_t mn = m * B->n;
  double *want = tu_malloc(mn * sizeof *want),
         *bound = tu_malloc(mn * sizeof *bound);
  ref_matmul_q8(a, m, B->k, B->q, B->s, B->n, B->bs, want, bound);
  const double r = tu_store_rtol(ct), at = tu_store_atol(ct);
  for (size_t i = 0; i < mn; i++) {
    const double e = (double)(B->k + 1) * 0x1p-24 * bound[i];
    bound[i] = (1.0 + r) * e + r * fabs(want[i]) + at;
  }
  tu_check_bound(what, got, want, bound, mn);
  free(want);
  free(bound);
}

/* One product of m rows of A (type ad, random in [-1, 1)) with B into C
 * (type ct), block size passed as given; reps > 1 runs it again into a
 * second C and asserts the same bits (a fixed summation order). */
static void run_product_reps(rumus_ctx *ctx, tu_rng *rng, rumus_dtype ad,
                             rumus_dtype ct, size_t m, const qmat *B,
                             size_t block_size, int reps) {
  const size_t sa[2] = {m, B->k}, sq[2] = {B->n, B->k}, ss[2] = {B->n, B->nb},
               sc[2] = {m, B->n};
  float *a = tu_malloc(m * B->k * sizeof *a);
  tu_fill_uniform(rng, a, m * B->k, -1.0f, 1.0f);
  tu_round_to(ad, a, m * B->k);
  rumus_tensor *ta = tu_tensor_typed(ctx, ad, 2, sa, a),
               *tq = tu_tensor(ctx, RUMUS_I8, 2, sq, B->q),
               *ts = tu_tensor(ctx, RUMUS_F16, 2, ss, B->s);
  char what[96];
  snprintf(what, sizeof what, "matmul_q8 %s->%s M %zu N %zu K %zu block %zu",
           tu_dtype_name(ad), tu_dtype_name(ct), m, B->n, B->k, B->bs);
  float *first = NULL;
  for (int r = 0; r < reps; r++) {
    rumus_tensor *tc = tu_tensor_typed(ctx, ct, 2, sc, NULL);
    TU_OK(ctx, rumus_tensor_fill(tc, NAN)); /* every output must be written */
    TU_OK(ctx, rumus_matmul_q8(ctx, ta, tq, ts, block_size, tc));
    float *got = tu_download_f32(ctx, tc);
    rumus_tensor_free(tc);
    if (r == 0) {
      check_product(what, ct, a, m, B, got);
      first = got;
      continue;
    }
    ck_assert_msg(memcmp(first, got, m * B->n * sizeof *got) == 0,
                  "%s: run %d differs from the first", what, r + 1);
    free(got);
  }
  free(first);
  free(a);
  rumus_tensor_free(ta);
  rumus_tensor_free(tq);
  rumus_tensor_free(ts);
}

static void run_product(rumus_ctx *ctx, tu_rng *rng, rumus_dtype ad,
                        rumus_dtype ct, size_t m, const qmat *B,
                        size_t block_size) {
  run_product_reps(ctx, rng, ad, ct, m, B, block_size, 1);
}

/* (N, K, block): K not a multiple of the block nor of 16 (47 not of 4);
 * K = 256 and 4096 with aligned rows (the GPU variant's typed loads);
 * blocks 256 and 16; K past one group of q8_mv16's loads (32 lanes x U
 * chunks of 16: 1024 elements at M <= 2, 4096 where two row groups split
 * K at M > 2: 4200 with the last group partial), N odd (q8_mv16's rows
 * of 4 and work-groups of 16 or 8 rows). */
static const size_t SHAPES[][3] = {{67, 100, 32}, {33, 256, 64},
                                   {9, 300, 256}, {131, 47, 16},
                                   {19, 4200, 64}, {6, 4096, 32}};
static const size_t MS[] = {1, 2, 5, 8, 37, 128};

/* Loop index: variant * 5 + (A, C) pair. */
START_TEST(matmul_types) {
  static const rumus_dtype PAIRS[5][2] = {{RUMUS_F32, RUMUS_F32},
                                          {RUMUS_F16, RUMUS_F32},
                                          {RUMUS_F16, RUMUS_F16},
                                          {RUMUS_BF16, RUMUS_F32},
                                          {RUMUS_BF16, RUMUS_BF16}};
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i / 5]);
  const rumus_dtype ad = PAIRS[_i % 5][0], ct = PAIRS[_i % 5][1];
  tu_rng rng;
  tu_rng_seed(&rng, 100 + (uint64_t)_i);
  for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
    qmat B = qmat_new(&rng, SHAPES[s][0], SHAPES[s][1], SHAPES[s][2]);
    for (size_t i = 0; i < sizeof MS / sizeof MS[0]; i++)
      run_product(ctx, &rng, ad, ct, MS[i], &B,
                  B.bs == 32 ? 0 : B.bs); /* 0: the default, 32 */
    qmat_free(&B);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Every M from 1 to 8 (each q8_mv16_<MB> and its unused rows of A), run
 * twice for the same bits, A in every type: K = 1203 (75 chunks of 16 and
 * 3 elements: at M <= 2 a full group of q8_mv16's loads, 64 chunks, then
 * a partial one; at M > 2 a partial group of two row groups splitting K)
 * and 175 (a partial group only, a tail of 15), N = 21 and 5 (part of a
 * work-group's rows). */
START_TEST(matmul_every_m) {
  static const rumus_dtype PAIRS[3][2] = {{RUMUS_F32, RUMUS_F32},
                                          {RUMUS_F16, RUMUS_F16},
                                          {RUMUS_BF16, RUMUS_F32}};
  static const size_t SH[2][3] = {{21, 1203, 64}, {5, 175, 16}};
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  tu_rng rng;
  tu_rng_seed(&rng, 300 + (uint64_t)_i);
  for (size_t s = 0; s < 2; s++) {
    qmat B = qmat_new(&rng, SH[s][0], SH[s][1], SH[s][2]);
    for (size_t p = 0; p < 3; p++)
      for (size_t m = 1; m <= 8; m++)
        run_product_reps(ctx, &rng, PAIRS[p][0], PAIRS[p][1], m, &B, B.bs,
                         2);
    qmat_free(&B);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Every block size with K = 2101 (131 chunks of 16 and 5 elements: at M
 * <= 2 two full groups of q8_mv16's loads, whose scales advance by whole
 * blocks, then a partial group and the tail; at M > 2 one partial group),
 * at M = 1, 2, 4, 8 and 9. */
START_TEST(matmul_block_sizes) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  tu_rng rng;
  tu_rng_seed(&rng, 400 + (uint64_t)_i);
  static const size_t MM[] = {1, 2, 4, 8, 9};
  for (size_t b = 1; b < N_BLOCKS; b++) {
    qmat B = qmat_new(&rng, 3, 2101, BLOCKS[b]);
    for (size_t i = 0; i < sizeof MM / sizeof MM[0]; i++)
      run_product(ctx, &rng, RUMUS_F32, RUMUS_F32, MM[i], &B, BLOCKS[b]);
    qmat_free(&B);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* The CPU kernels with both tables of rows of B per work-item
 * (RUMUS_Q8_CPU_NR: "wide", the AVX-512 default, and "narrow", AVX2's):
 * every bucket of M (1, 2, 3-4, 5-8, past 8), N not a multiple of any
 * NR, K with a short last chunk, run twice for the same bits. */
START_TEST(matmul_cpu_tables) {
  static const char *const TABLES[] = {"wide", "narrow"};
  static const size_t MM[] = {1, 2, 3, 7, 9};
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  tu_rng rng;
  tu_rng_seed(&rng, 450 + (uint64_t)_i);
  setenv("RUMUS_Q8_CPU_NR", TABLES[_i], 1);
  qmat B = qmat_new(&rng, 23, 331, 32);
  for (size_t i = 0; i < sizeof MM / sizeof MM[0]; i++)
    run_product_reps(ctx, &rng, i % 2 ? RUMUS_F16 : RUMUS_F32, RUMUS_F32,
                     MM[i], &B, 0, 2);
  qmat_free(&B);
  unsetenv("RUMUS_Q8_CPU_NR");
  tu_free_all(ctx, NULL);
}
END_TEST

/* A [batch, M, K] times B into C [batch, M, N]: batch * M rows, on the
 * matrix-vector (2 x 3) and tiled (3 x 20) kernels. */
START_TEST(matmul_batched) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  tu_rng rng;
  tu_rng_seed(&rng, 7);
  qmat B = qmat_new(&rng, 45, 70, 32);
  static const size_t BM[2][2] = {{2, 3}, {3, 20}};
  for (int c = 0; c < 2; c++) {
    const size_t m = BM[c][0] * BM[c][1];
    const size_t sa[3] = {BM[c][0], BM[c][1], B.k}, sq[2] = {B.n, B.k},
                 ss[2] = {B.n, B.nb}, sc[3] = {BM[c][0], BM[c][1], B.n};
    float *a = tu_malloc(m * B.k * sizeof *a);
    tu_fill_uniform(&rng, a, m * B.k, -2.0f, 2.0f);
    rumus_tensor *ta = tu_tensor(ctx, RUMUS_F32, 3, sa, a),
                 *tq = tu_tensor(ctx, RUMUS_I8, 2, sq, B.q),
                 *ts = tu_tensor(ctx, RUMUS_F16, 2, ss, B.s),
                 *tc = tu_tensor(ctx, RUMUS_F32, 3, sc, NULL);
    TU_OK(ctx, rumus_matmul_q8(ctx, ta, tq, ts, 32, tc));
    float *got = tu_download(ctx, tc);
    check_product("matmul_q8 batched", RUMUS_F32, a, m, &B, got);
    free(a);
    free(got);
    rumus_tensor_free(ta);
    rumus_tensor_free(tq);
    rumus_tensor_free(ts);
    rumus_tensor_free(tc);
  }
  qmat_free(&B);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Asserts that the matrix-vector kernel of m rows (q8_mv16_<MB>) ran
 * since the last profile (which this one ends). */
static void assert_mv_ran(rumus_ctx *ctx, size_t m) {
  const size_t mb = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
  char name[24];
  snprintf(name, sizeof name, "q8_mv16_%zu", mb);
  ck_assert_msg(tu_kernel_ran(ctx, name), "M %zu: %s did not run", m, name);
}

/* The first nk of the K below (the first three: aligned rows and not, a
 * tail of 15 and of 1), each with blocks 16, 32 and 256 and M = 1, 2, 3
 * and 8. */
static void mv16_cases(rumus_ctx *ctx, tu_rng *rng, rumus_dtype ad,
                       rumus_dtype ct, size_t nk) {
  static const size_t KK[] = {4096, 4095, 17, 11008, 4100, 33};
  static const size_t BB[] = {16, 32, 256}, MM[] = {1, 2, 3, 8};
  for (size_t x = 0; x < nk; x++)
    for (size_t b = 0; b < 3; b++) {
      qmat B = qmat_new(rng, 13, KK[x], BB[b]);
      for (size_t i = 0; i < 4; i++) {
        run_product_reps(ctx, rng, ad, ct, MM[i], &B, BB[b], 2);
        assert_mv_ran(ctx, MM[i]);
      }
      qmat_free(&B);
    }
}

/* q8_mv16_<MB> (the GPU variant's 16-byte loads of B), on
 * a profiling context that shows it ran, twice for the same bits: M = 1,
 * 2, 3 and 8 (each MB, and unused rows of A); K = 4096 and 11008 (rows
 * 16-byte aligned: typed loads; 11008 = 688 chunks, 2.7 groups of 4
 * chunks x 64 lanes at M = 1), 4100 (4-byte loads), 4095, 33 and 17
 * (byte loads; tails of 15, 1 and 1); blocks 16, 32 and 256; N = 13 (part
 * of a work-group's rows); A and C F32, F16 and F16, BF16 and F32 (loop
 * index: one program for each alignment, as PoCL's builds of the GPU
 * variant's programs take most of the time).  Loop index 3 and 4: K =
 * 4096, 4095 and 17 with the tuning overrides RUMUS_Q8_MV16_RPW / _KS /
 * _U at both ends of their ranges. */
START_TEST(matmul_mv16) {
  static const char *const KNOBS[3][2] = {{"RUMUS_Q8_MV16_RPW", "1"},
                                          {"RUMUS_Q8_MV16_KS", "4"},
                                          {"RUMUS_Q8_MV16_U", "8"}};
  static const char *const KNOBS2[3] = {"4", "1", "1"};
  if (_i >= 3)
    for (int e = 0; e < 3; e++)
      setenv(KNOBS[e][0], _i == 3 ? KNOBS[e][1] : KNOBS2[e], 1);
  rumus_ctx *ctx = tu_profiling_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  tu_rng rng;
  tu_rng_seed(&rng, 500 + (uint64_t)_i);
  static const rumus_dtype AC[5][2] = {{RUMUS_F32, RUMUS_F32},
                                       {RUMUS_F16, RUMUS_F16},
                                       {RUMUS_BF16, RUMUS_F32},
                                       {RUMUS_F32, RUMUS_F32},
                                       {RUMUS_BF16, RUMUS_BF16}};
  mv16_cases(ctx, &rng, AC[_i][0], AC[_i][1], _i < 3 ? 6 : 3);
  tu_free_all(ctx, NULL);
  for (int e = 0; e < 3; e++) unsetenv(KNOBS[e][0]);
}
END_TEST

/* ---- Limits ---------------------------------------------------------------
 */

/* Short rows: K below, at and past one chunk of 16, single-element rows;
 * every path; and a NaN block of B, which makes its column NaN. */
START_TEST(matmul_short_rows) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  tu_rng rng;
  tu_rng_seed(&rng, 3);
  static const size_t KS[] = {1, 5, 15, 16, 17, 33};
  for (size_t i = 0; i < sizeof KS / sizeof KS[0]; i++) {
    qmat B = qmat_new(&rng, 3, KS[i], 16);
    run_product(ctx, &rng, RUMUS_F32, RUMUS_F32, 1, &B, 16);
    run_product(ctx, &rng, RUMUS_F32, RUMUS_F32, 9, &B, 16);
    qmat_free(&B);
  }
  qmat B = qmat_new(&rng, 5, 40, 16);
  B.s[2 * B.nb + 1] = 0x7E00; /* row 2, block 1: a NaN block */
  run_product(ctx, &rng, RUMUS_F16, RUMUS_F32, 3, &B, 16);
  run_product(ctx, &rng, RUMUS_F32, RUMUS_F32, 12, &B, 16);
  qmat_free(&B);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A tensor at an odd element offset into a buffer with guard bytes on
 * both sides. */
typedef struct {
  rumus_tensor *t;
  cl_mem buf;
  size_t off, bytes;
} gview;
#define GUARD 256
#define GUARD_BYTE 0x5A

static gview gview_new(rumus_ctx *ctx, rumus_dtype d, int ndim,
                       const size_t *shape, const void *data, size_t skip) {
  gview g = {NULL, NULL, GUARD + skip * rumus_dtype_size(d), 0};
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  g.bytes = n * rumus_dtype_size(d);
  const size_t total = g.off + g.bytes + GUARD;
  unsigned char *host = tu_malloc(total);
  memset(host, GUARD_BYTE, total);
  if (data) memcpy(host + g.off, data, g.bytes);
  cl_int e;
  g.buf =
      clCreateBuffer(rumus_ctx_cl_context(ctx),
                     CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, total, host, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  free(host);
  TU_OK(ctx, rumus_tensor_wrap(ctx, d, ndim, shape, g.buf, g.off, &g.t));
  return g;
}

/* Asserts the bytes around the tensor are intact and frees it. */
static void gview_check_free(rumus_ctx *ctx, gview *g) {
  const size_t total = g->off + g->bytes + GUARD;
  unsigned char *host = tu_malloc(total);
  cl_int e = clEnqueueReadBuffer(rumus_ctx_cl_queue(ctx), g->buf, CL_TRUE, 0,
                                 total, host, 0, NULL, NULL);
  ck_assert_int_eq(e, CL_SUCCESS);
  for (size_t i = 0; i < total; i++)
    if (i < g->off || i >= g->off + g->bytes)
      ck_assert_msg(host[i] == GUARD_BYTE, "guard byte %zu overwritten", i);
  free(host);
  rumus_tensor_free(g->t);
  clReleaseMemObject(g->buf);
}

/* Every op on tensors at odd offsets with guard bytes (K = 64 and 256:
 * rows 16-byte aligned but the offsets not, so the GPU variant takes its
 * unaligned program), and at aligned offsets (skip 0). */
START_TEST(guards_and_offsets) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i / 2]);
  const size_t skip = _i % 2 ? 3 : 0;
  tu_rng rng;
  tu_rng_seed(&rng, 17);
  enum { N = 21, K = 256, BSZ = 64, NBL = K / BSZ };
  const size_t sq[2] = {N, K}, ss[2] = {N, NBL};
  float *w = tu_malloc(N * K * sizeof *w);
  for (size_t i = 0; i < N * K; i++) w[i] = (float)gauss(&rng);
  gview gw = gview_new(ctx, RUMUS_F32, 2, sq, w, skip),
        gq = gview_new(ctx, RUMUS_I8, 2, sq, NULL, skip),
        gs = gview_new(ctx, RUMUS_F16, 2, ss, NULL, skip),
        gy = gview_new(ctx, RUMUS_F32, 2, sq, NULL, skip);
  TU_OK(ctx, rumus_quantize_q8(ctx, gw.t, gq.t, gs.t, BSZ));
  TU_OK(ctx, rumus_dequantize_q8(ctx, gq.t, gs.t, BSZ, gy.t));
  qmat B = {N,
            K,
            BSZ,
            NBL,
            (int8_t *)tu_download(ctx, gq.t),
            (uint16_t *)tu_download(ctx, gs.t)};
  int8_t wq[N * K];
  uint16_t ws[N * NBL];
  ref_quantize_q8(w, N, K, BSZ, wq, ws);
  ck_assert(memcmp(wq, B.q, sizeof wq) == 0);
  ck_assert(memcmp(ws, B.s, sizeof ws) == 0);
  float *y = tu_download(ctx, gy.t);
  double want[N * K];
  ref_dequantize_q8(B.q, B.s, N, K, BSZ, want);
  tu_check_close("dequantize at an offset", y, want, N * K, 0, 0);
  for (size_t m = 1; m <= 20; m += 19) {
    const size_t sa[2] = {m, K}, sc[2] = {m, N};
    float a[20 * K];
    tu_fill_uniform(&rng, a, m * K, -1.0f, 1.0f);
    gview ga = gview_new(ctx, RUMUS_F32, 2, sa, a, skip),
          gc = gview_new(ctx, RUMUS_F32, 2, sc, NULL, skip);
    TU_OK(ctx, rumus_matmul_q8(ctx, ga.t, gq.t, gs.t, BSZ, gc.t));
    float *got = tu_download(ctx, gc.t);
    check_product("matmul_q8 at an offset", RUMUS_F32, a, m, &B, got);
    free(got);
    gview_check_free(ctx, &ga);
    gview_check_free(ctx, &gc);
  }
  free(w);
  free(y);
  qmat_free(&B);
  gview_check_free(ctx, &gw);
  gview_check_free(ctx, &gq);
  gview_check_free(ctx, &gs);
  gview_check_free(ctx, &gy);
  tu_free_all(ctx, NULL);
}
END_TEST

/* q8_mv16 on tensors at odd offsets with guard bytes (rows of B not
 * 16-byte aligned: 4-byte and byte loads) and at aligned offsets, K =
 * 4096 and 4095, M = 1 and 8. */
START_TEST(matmul_mv16_offsets) {
  rumus_ctx *ctx = tu_profiling_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  const size_t skip = _i % 2 ? 3 : 0;
  tu_rng rng;
  tu_rng_seed(&rng, 600 + (uint64_t)_i);
  for (size_t k = 4095; k <= 4096; k++) {
    qmat B = qmat_new(&rng, 11, k, 32);
    const size_t sq[2] = {B.n, k}, ss[2] = {B.n, B.nb};
    gview gq = gview_new(ctx, RUMUS_I8, 2, sq, B.q, skip),
          gs = gview_new(ctx, RUMUS_F16, 2, ss, B.s, skip);
    for (size_t m = 1; m <= 8; m += 7) {
      const size_t sa[2] = {m, k}, sc[2] = {m, B.n};
      float *a = tu_malloc(m * k * sizeof *a);
      tu_fill_uniform(&rng, a, m * k, -1.0f, 1.0f);
      gview ga = gview_new(ctx, RUMUS_F32, 2, sa, a, skip),
            gc = gview_new(ctx, RUMUS_F32, 2, sc, NULL, skip);
      TU_OK(ctx, rumus_matmul_q8(ctx, ga.t, gq.t, gs.t, 32, gc.t));
      assert_mv_ran(ctx, m);
      float *got = tu_download(ctx, gc.t);
      check_product("matmul_q8 mv16 at an offset", RUMUS_F32, a, m, &B, got);
      free(got);
      free(a);
      gview_check_free(ctx, &ga);
      gview_check_free(ctx, &gc);
    }
    gview_check_free(ctx, &gq);
    gview_check_free(ctx, &gs);
    qmat_free(&B);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* K = 0 (C = 0; quantize and dequantize write nothing), M = 0 and
 * N = 0 (nothing at all). */
START_TEST(empty_and_zero_k) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s30[2] = {3, 0}, s40[2] = {4, 0}, s34[2] = {3, 4},
               s04[2] = {0, 4}, s01[2] = {0, 1}, s03[2] = {0, 3},
               s24[2] = {2, 4}, s31[2] = {3, 1}, s20[2] = {2, 0};
  rumus_tensor *a = tu_tensor(ctx, RUMUS_F32, 2, s30, NULL),
               *q = tu_tensor(ctx, RUMUS_I8, 2, s40, NULL),
               *s = tu_tensor(ctx, RUMUS_F16, 2, s40, NULL),
               *c = tu_tensor(ctx, RUMUS_F32, 2, s34, NULL),
               *qa = tu_tensor(ctx, RUMUS_I8, 2, s30, NULL),
               *sa = tu_tensor(ctx, RUMUS_F16, 2, s30, NULL);
  TU_OK(ctx, rumus_tensor_fill(c, 5.0f));
  TU_OK(ctx, rumus_matmul_q8(ctx, a, q, s, 0, c));
  float *got = tu_download(ctx, c);
  for (int i = 0; i < 12; i++) ck_assert(got[i] == 0.0f);
  free(got);
  TU_OK(ctx, rumus_quantize_q8(ctx, a, qa, sa, 0));
  TU_OK(ctx, rumus_dequantize_q8(ctx, qa, sa, 0, a));
  /* M = 0, N = 0. */
  rumus_tensor *a0 = tu_tensor(ctx, RUMUS_F32, 2, s04, NULL),
               *q0 = tu_tensor(ctx, RUMUS_I8, 2, s04, NULL),
               *s0 = tu_tensor(ctx, RUMUS_F16, 2, s01, NULL),
               *c0 = tu_tensor(ctx, RUMUS_F32, 2, s03, NULL),
               *a2 = tu_tensor(ctx, RUMUS_F32, 2, s24, NULL),
               *q3 = tu_tensor(ctx, RUMUS_I8, 2, s34, NULL),
               *s3 = tu_tensor(ctx, RUMUS_F16, 2, s31, NULL),
               *c2 = tu_tensor(ctx, RUMUS_F32, 2, s20, NULL);
  TU_OK(ctx, rumus_matmul_q8(ctx, a0, q3, s3, 0, c0));
  TU_OK(ctx, rumus_matmul_q8(ctx, a2, q0, s0, 0, c2));
  TU_OK(ctx, rumus_quantize_q8(ctx, a0, q0, s0, 0));
  TU_OK(ctx, rumus_dequantize_q8(ctx, q0, s0, 0, a0));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, a, q, s, c, qa, sa, a0, q0, s0, c0, a2, q3, s3, c2, NULL);
}
END_TEST

/* B of 2^24 + 37 rows (the library launches at most 2^24 rows of B at a
 * time; 268 MB of int8 at K = 16): every output, the rows of C past the
 * first launch included, at M = 2 (C's rows are N apart, not a launch's
 * rows).  About 3 s on the CPU variant and 7 on the work-group variant on
 * 2 PoCL cores. */
START_TEST(matmul_past_one_launch) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  const size_t n = ((size_t)1 << 24) + 37, k = 16, sq[2] = {n, k},
               ss[2] = {n, 1};
  tu_rng rng;
  tu_rng_seed(&rng, 29);
  qmat B = {n, k, 16, 1, tu_malloc(n * k), tu_malloc(n * sizeof(uint16_t))};
  for (size_t i = 0; i < n * k; i += 4) { /* four values a draw */
    const uint32_t r = tu_rand_u32(&rng);
    memcpy(B.q + i, &r, 4);
  }
  for (size_t i = 0; i < n; i++)
    B.s[i] = rumus_f32_to_f16(tu_uniform(&rng, 0.001f, 0.01f));
  const char *what = "matmul_q8 past one launch";
  const size_t m = 2, sa[2] = {m, k}, sc[2] = {m, n};
  float a[2 * 16];
  tu_fill_uniform(&rng, a, m * k, -1.0f, 1.0f);
  rumus_tensor *ta = tu_tensor(ctx, RUMUS_F32, 2, sa, a),
               *tq = tu_tensor_or_skip(ctx, RUMUS_I8, 2, sq, B.q, what),
               *ts = tq ? tu_tensor_or_skip(ctx, RUMUS_F16, 2, ss, B.s, what)
                        : NULL,
               *tc = ts ? tu_tensor_or_skip(ctx, RUMUS_F32, 2, sc, NULL, what)
                        : NULL;
  if (tc) {
    TU_OK(ctx, rumus_tensor_fill(tc, NAN));
    TU_OK(ctx, rumus_matmul_q8(ctx, ta, tq, ts, 16, tc));
    float *got = tu_download(ctx, tc);
    check_product(what, RUMUS_F32, a, m, &B, got);
    free(got);
  }
  qmat_free(&B);
  tu_free_all(ctx, ta, tq, ts, tc, NULL);
}
END_TEST

/* The int8 storage type: one byte an element, fills truncated toward zero
 * and saturated, NaN refused, no float transfers. */
START_TEST(i8_tensors) {
  rumus_ctx *ctx = tu_ctx();
  ck_assert_uint_eq(rumus_dtype_size(RUMUS_I8), 1);
  const size_t s[1] = {5};
  rumus_tensor *t = tu_tensor(ctx, RUMUS_I8, 1, s, NULL);
  ck_assert_uint_eq(rumus_tensor_nbytes(t), 5);
  static const float IN[] = {3.7f,  -3.7f,    127.9f,    128.0f, -128.9f,
                             -1e9f, INFINITY, -INFINITY, 0.5f,   -0.0f};
  static const int8_t WANT[] = {3, -3, 127, 127, -128, -128, 127, -128, 0, 0};
  for (size_t i = 0; i < sizeof IN / sizeof IN[0]; i++) {
    TU_OK(ctx, rumus_tensor_fill(t, IN[i]));
    int8_t got[5];
    TU_OK(ctx, rumus_tensor_download(t, got, sizeof got));
    for (int j = 0; j < 5; j++)
      ck_assert_msg(got[j] == WANT[i], "fill %g: %d, want %d", IN[i], got[j],
                    WANT[i]);
  }
  TU_STATUS(RUMUS_EINVAL, rumus_tensor_fill(t, NAN));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "int8"), "%s",
                rumus_ctx_errmsg(ctx));
  float f[5] = {0};
  TU_STATUS(RUMUS_EDTYPE, rumus_tensor_upload_f32(t, f, 5));
  TU_STATUS(RUMUS_EDTYPE, rumus_tensor_download_f32(t, f, 5));
  tu_free_all(ctx, t, NULL);
}
END_TEST

/* After rumus_cache_fill, F32 calls of every kernel of the family
 * (quantize, dequantize, each product path, aligned rows and not) build
 * nothing more, on either variant (q8_mv16's program of 16-byte aligned
 * rows among them). */
START_TEST(cache_fill_covers) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  TU_OK(ctx, rumus_cache_fill(ctx));
  rumus_cache_info before, after;
  TU_OK(ctx, rumus_cache_stats(ctx, &before));
  tu_rng rng;
  tu_rng_seed(&rng, 41);
  for (size_t k = 100; k <= 128; k += 28) { /* rows unaligned, aligned */
    qmat B = qmat_new(&rng, 9, k, 32);
    const size_t sq[2] = {B.n, k}, ss[2] = {B.n, B.nb};
    rumus_tensor *tq = tu_tensor(ctx, RUMUS_I8, 2, sq, B.q),
                 *ts = tu_tensor(ctx, RUMUS_F16, 2, ss, B.s),
                 *tw = tu_tensor(ctx, RUMUS_F32, 2, sq, NULL),
                 *tq2 = tu_tensor(ctx, RUMUS_I8, 2, sq, NULL);
    TU_OK(ctx, rumus_dequantize_q8(ctx, tq, ts, 0, tw));
    TU_OK(ctx, rumus_quantize_q8(ctx, tw, tq2, ts, 0));
    for (size_t m = 1; m <= 16; m *= 2) {
      const size_t sa[2] = {m, k}, sc[2] = {m, B.n};
      rumus_tensor *ta = tu_tensor(ctx, RUMUS_F32, 2, sa, NULL),
                   *tc = tu_tensor(ctx, RUMUS_F32, 2, sc, NULL);
      TU_OK(ctx, rumus_tensor_fill(ta, 0.5f));
      TU_OK(ctx, rumus_matmul_q8(ctx, ta, tq, ts, 0, tc));
      rumus_tensor_free(ta);
      rumus_tensor_free(tc);
    }
    TU_OK(ctx, rumus_ctx_sync(ctx));
    qmat_free(&B);
    rumus_tensor_free(tq);
    rumus_tensor_free(ts);
    rumus_tensor_free(tw);
    rumus_tensor_free(tq2);
  }
  TU_OK(ctx, rumus_cache_stats(ctx, &after));
  ck_assert_msg(after.builds == before.builds,
                "%llu programs built after rumus_cache_fill",
                (unsigned long long)(after.builds - before.builds));
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- Errors -------------------------------------------------------------- */

/* Asserts the status and that the message holds `part`. */
#define ERR(want, part, expr)                                                \
  do {                                                                       \
    TU_STATUS(want, expr);                                                   \
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), part), "%s: message \"%s\"", \
                  #expr, rumus_ctx_errmsg(ctx));                             \
  } while (0)

START_TEST(bad_quantize) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s[2] = {4, 40}, s3[2] = {4, 3}, s2[2] = {4, 2}, s5[2] = {5, 3},
               s1[1] = {3}, s43[3] = {1, 4, 3}, s41[2] = {4, 41};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 2, s, NULL),
               *q = tu_tensor(ctx, RUMUS_I8, 2, s, NULL),
               *sc = tu_tensor(ctx, RUMUS_F16, 2, s3, NULL),
               *sc2 = tu_tensor(ctx, RUMUS_F16, 2, s2, NULL),
               *sc5 = tu_tensor(ctx, RUMUS_F16, 2, s5, NULL),
               *sc1 = tu_tensor(ctx, RUMUS_F16, 1, s1, NULL),
               *sc43 = tu_tensor(ctx, RUMUS_F16, 3, s43, NULL),
               *scf = tu_tensor(ctx, RUMUS_F32, 2, s3, NULL),
               *xi = tu_tensor(ctx, RUMUS_I32, 2, s, NULL),
               *qf = tu_tensor(ctx, RUMUS_F32, 2, s, NULL),
               *q41 = tu_tensor(ctx, RUMUS_I8, 2, s41, NULL),
               *x0 = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL),
               *q0 = tu_tensor(ctx, RUMUS_I8, 0, NULL, NULL);
  TU_STATUS(RUMUS_ENULL, rumus_quantize_q8(NULL, x, q, sc, 16));
  ERR(RUMUS_ENULL, "x is NULL", rumus_quantize_q8(ctx, NULL, q, sc, 16));
  ERR(RUMUS_ENULL, "q is NULL", rumus_quantize_q8(ctx, x, NULL, sc, 16));
  ERR(RUMUS_ENULL, "scales is NULL", rumus_quantize_q8(ctx, x, q, NULL, 16));
  ERR(RUMUS_EDTYPE, "x is i32", rumus_quantize_q8(ctx, xi, q, sc, 16));
  ERR(RUMUS_EDTYPE, "q is f32, expected i8",
      rumus_quantize_q8(ctx, x, qf, sc, 16));
  ERR(RUMUS_EDTYPE, "scales is f32, expected f16",
      rumus_quantize_q8(ctx, x, q, scf, 16));
  static const size_t BAD_BS[] = {1, 8, 15, 17, 48, 100, 512, (size_t)-1};
  for (size_t i = 0; i < sizeof BAD_BS / sizeof BAD_BS[0]; i++)
    ERR(RUMUS_EINVAL, "block_size",
        rumus_quantize_q8(ctx, x, q, sc, BAD_BS[i]));
  ERR(RUMUS_ESHAPE, "differ in shape", rumus_quantize_q8(ctx, x, q41, sc, 16));
  /* 40 in blocks of 16: 3 scales a row; blocks of 32 (0): 2. */
  ERR(RUMUS_ESHAPE, "has 2 on axis 1, expected 3 blocks of 16",
      rumus_quantize_q8(ctx, x, q, sc2, 16));
  ERR(RUMUS_ESHAPE, "expected 2 blocks of 32",
      rumus_quantize_q8(ctx, x, q, sc, 0));
  TU_OK(ctx, rumus_quantize_q8(ctx, x, q, sc2, 0));
  ERR(RUMUS_ESHAPE, "differ on axis 0", rumus_quantize_q8(ctx, x, q, sc5, 16));
  ERR(RUMUS_ESHAPE, "dimensions", rumus_quantize_q8(ctx, x, q, sc1, 16));
  ERR(RUMUS_ESHAPE, "dimensions", rumus_quantize_q8(ctx, x, q, sc43, 16));
  ERR(RUMUS_ESHAPE, "at least one dimension",
      rumus_quantize_q8(ctx, x0, q0, sc, 16));
  /* Dequantize: the same checks, y floating. */
  ERR(RUMUS_EDTYPE, "y is i32", rumus_dequantize_q8(ctx, q, sc, 16, xi));
  ERR(RUMUS_EDTYPE, "q is f32", rumus_dequantize_q8(ctx, qf, sc, 16, x));
  ERR(RUMUS_EINVAL, "block_size", rumus_dequantize_q8(ctx, q, sc, 64 + 32, x));
  ERR(RUMUS_ESHAPE, "has 3 on axis 1, expected 2",
      rumus_dequantize_q8(ctx, q, sc, 32, x));
  rumus_tensor *y41 = tu_tensor(ctx, RUMUS_F32, 2, s41, NULL);
  ERR(RUMUS_ESHAPE, "differ in shape",
      rumus_dequantize_q8(ctx, q, sc, 16, y41));
  tu_free_all(ctx, x, q, sc, sc2, sc5, sc1, sc43, scf, xi, qf, q41, x0, q0, y41,
              NULL);
}
END_TEST

START_TEST(bad_matmul) {
  rumus_ctx *ctx = tu_ctx();
  const size_t sa[2] = {5, 40}, sq[2] = {7, 40}, ss[2] = {7, 3}, sc[2] = {5, 7},
               sa3[3] = {2, 5, 40}, sc3[3] = {2, 5, 7}, sc3b[3] = {3, 5, 7},
               sq3[3] = {1, 7, 40}, sq41[2] = {7, 41}, sc8[2] = {5, 8},
               ss6[2] = {6, 3};
  rumus_tensor *a = tu_tensor(ctx, RUMUS_F32, 2, sa, NULL),
               *a16 = tu_tensor_typed(ctx, RUMUS_F16, 2, sa, NULL),
               *q = tu_tensor(ctx, RUMUS_I8, 2, sq, NULL),
               *s = tu_tensor(ctx, RUMUS_F16, 2, ss, NULL),
               *c = tu_tensor(ctx, RUMUS_F32, 2, sc, NULL),
               *c16 = tu_tensor_typed(ctx, RUMUS_F16, 2, sc, NULL),
               *cb16 = tu_tensor_typed(ctx, RUMUS_BF16, 2, sc, NULL),
               *a3 = tu_tensor(ctx, RUMUS_F32, 3, sa3, NULL),
               *c3 = tu_tensor(ctx, RUMUS_F32, 3, sc3, NULL),
               *c3b = tu_tensor(ctx, RUMUS_F32, 3, sc3b, NULL),
               *q3 = tu_tensor(ctx, RUMUS_I8, 3, sq3, NULL),
               *q41 = tu_tensor(ctx, RUMUS_I8, 2, sq41, NULL),
               *qi = tu_tensor(ctx, RUMUS_I32, 2, sq, NULL),
               *ai = tu_tensor(ctx, RUMUS_I8, 2, sa, NULL),
               *c8 = tu_tensor(ctx, RUMUS_F32, 2, sc8, NULL),
               *s6 = tu_tensor(ctx, RUMUS_F16, 2, ss6, NULL);
  TU_STATUS(RUMUS_ENULL, rumus_matmul_q8(NULL, a, q, s, 16, c));
  ERR(RUMUS_ENULL, "A is NULL", rumus_matmul_q8(ctx, NULL, q, s, 16, c));
  ERR(RUMUS_ENULL, "Bq is NULL", rumus_matmul_q8(ctx, a, NULL, s, 16, c));
  ERR(RUMUS_ENULL, "Bscales is NULL", rumus_matmul_q8(ctx, a, q, NULL, 16, c));
  ERR(RUMUS_ENULL, "C is NULL", rumus_matmul_q8(ctx, a, q, s, 16, NULL));
  ERR(RUMUS_EDTYPE, "A is i8", rumus_matmul_q8(ctx, ai, q, s, 16, c));
  ERR(RUMUS_EDTYPE, "Bq is i32", rumus_matmul_q8(ctx, a, qi, s, 16, c));
  ERR(RUMUS_EDTYPE, "Bscales is f32", rumus_matmul_q8(ctx, a, q, c, 16, c16));
  ERR(RUMUS_EDTYPE, "C is f16, expected f32 or f32",
      rumus_matmul_q8(ctx, a, q, s, 16, c16));
  ERR(RUMUS_EDTYPE, "C is bf16, expected f32 or f16",
      rumus_matmul_q8(ctx, a16, q, s, 16, cb16));
  ERR(RUMUS_EINVAL, "block_size", rumus_matmul_q8(ctx, a, q, s, 24, c));
  ERR(RUMUS_ESHAPE, "must be 2-D [N, K]",
      rumus_matmul_q8(ctx, a, q3, s, 16, c));
  ERR(RUMUS_ESHAPE, "has K = 40 on axis 1, Bq [7, 41] has 41 on axis 1",
      rumus_matmul_q8(ctx, a, q41, s, 16, c));
  ERR(RUMUS_ESHAPE, "Bscales [7, 3] has 3 on axis 1, expected 2 blocks of 32",
      rumus_matmul_q8(ctx, a, q, s, 0, c));
  ERR(RUMUS_ESHAPE, "Bscales [6, 3] and Bq [7, 40] differ on axis 0",
      rumus_matmul_q8(ctx, a, q, s6, 16, c));
  ERR(RUMUS_ESHAPE, "expected N = 7", rumus_matmul_q8(ctx, a, q, s, 16, c8));
  ERR(RUMUS_ESHAPE, "dimensions of A", rumus_matmul_q8(ctx, a3, q, s, 16, c));
  ERR(RUMUS_ESHAPE, "differ on axis 0",
      rumus_matmul_q8(ctx, a3, q, s, 16, c3b));
  TU_OK(ctx, rumus_matmul_q8(ctx, a3, q, s, 16, c3));
  TU_OK(ctx, rumus_matmul_q8(ctx, a16, q, s, 16, c16));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, a, a16, q, s, c, c16, cb16, a3, c3, c3b, q3, q41, qi, ai, c8,
              s6, NULL);
}
END_TEST

/* Outputs sharing memory with another tensor of the call, and tensors of
 * another context: RUMUS_EINVAL naming both. */
START_TEST(bad_overlap_and_context) {
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              4096, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  const size_t sx[2] = {2, 64}, ss[2] = {2, 4}, sc[2] = {2, 2};
  rumus_tensor *x, *q, *qx, *s, *sq, *c, *cq, *ca;
  /* x: bytes 0..512; q: 512..640; s: 640..656; c: 1024..1040. */
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, sx, buf, 0, &x));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_I8, 2, sx, buf, 512, &q));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_I8, 2, sx, buf, 256, &qx));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F16, 2, ss, buf, 640, &s));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F16, 2, ss, buf, 600, &sq));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, sc, buf, 1024, &c));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, sc, buf, 632, &cq));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, sc, buf, 8, &ca));
  TU_OK(ctx, rumus_tensor_fill(x, 1.0f));
  TU_OK(ctx, rumus_quantize_q8(ctx, x, q, s, 16));
  ERR(RUMUS_EINVAL, "x (bytes 0 to 512) and q (bytes 256 to 384) overlap",
      rumus_quantize_q8(ctx, x, qx, s, 16));
  ERR(RUMUS_EINVAL, "q (bytes 512 to 640) and scales (bytes 600 to 616)",
      rumus_quantize_q8(ctx, x, q, sq, 16));
  TU_OK(ctx, rumus_dequantize_q8(ctx, q, s, 16, x));
  ERR(RUMUS_EINVAL, "q (bytes 256 to 384) and y (bytes 0 to 512)",
      rumus_dequantize_q8(ctx, qx, s, 16, x));
  TU_OK(ctx, rumus_matmul_q8(ctx, x, q, s, 16, c));
  ERR(RUMUS_EINVAL, "Bq (bytes 512 to 640) and C (bytes 632 to 648)",
      rumus_matmul_q8(ctx, x, q, s, 16, cq));
  ERR(RUMUS_EINVAL, "A (bytes 0 to 512) and C (bytes 8 to 24)",
      rumus_matmul_q8(ctx, x, q, s, 16, ca));
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 2, sc, NULL);
  ERR(RUMUS_EINVAL, "C belongs to another context",
      rumus_matmul_q8(ctx, x, q, s, 16, o));
  ERR(RUMUS_EINVAL, "another context", rumus_quantize_q8(ctx, o, q, s, 16));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  clReleaseMemObject(buf);
  tu_free_all(ctx, x, q, qx, s, sq, c, cq, ca, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("quant");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, quantize_blocks, 0, 6);
  tcase_add_loop_test(core, quantize_special, 0, 6);
  tcase_add_loop_test(core, dequantize_types, 0, 6);
  tcase_add_loop_test(core, round_trip_gaussian, 0, 2);
  tcase_add_loop_test(core, matmul_types, 0, 10);
  tcase_add_loop_test(core, matmul_every_m, 0, 2);
  tcase_add_loop_test(core, matmul_block_sizes, 0, 2);
  tcase_add_loop_test(core, matmul_batched, 0, 2);
  tcase_add_loop_test(core, matmul_cpu_tables, 0, 2);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_loop_test(limits, matmul_short_rows, 0, 2);
  tcase_add_loop_test(limits, guards_and_offsets, 0, 4);
  tcase_add_test(limits, empty_and_zero_k);
  tcase_add_loop_test(limits, matmul_past_one_launch, 0, 2);
  tcase_add_test(limits, i8_tensors);
  tcase_add_loop_test(limits, cache_fill_covers, 0, 2);
  suite_add_tcase(s, limits);
  TCase *mv16 = tu_tcase("mv16");
  tcase_add_loop_test(mv16, matmul_mv16, 0, 5);
  tcase_add_loop_test(mv16, matmul_mv16_offsets, 0, 2);
  suite_add_tcase(s, mv16);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_quantize);
  tcase_add_test(errors, bad_matmul);
  tcase_add_test(errors, bad_overlap_and_context);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
