/*
 * check_gemm.c - rumus_gemm and rumus_gemm_ex against the float64
 * reference ref_gemm, on both variants (tiled work-group kernel and packed
 * CPU kernel), all four transpose combinations, edge shapes (1, primes,
 * K = 0), batched and strided-batched layouts, guard bytes and bad input.
 *
 * Tolerance: every element of C (the whole buffer: elements outside the
 * views must come back unchanged) satisfies
 *     |got - want| <= 1e-5 * (sqrt(K) + 1) * |alpha| * max|a| * max|b|
 *                     + 2e-6 * |beta| * max|c|
 * with max|.| taken over the operands' data.  A float sum of K products of
 * random sign has partial sums of order sqrt(K) max|a| max|b| and a random
 * walk of sqrt(K) roundings of those, so its error grows like K eps; the
 * bound is about 170 eps sqrt(K) (about 0.4 K eps at K = 2^18, where the
 * long_k test measured 0.09 K eps).  A wrong index gives errors of order
 * max|a| max|b| or more.
 * beta == 0 must not read C: C starts as NaN there and must come back
 * finite.
 *
 * 16-bit storage (A and B F16 or BF16, C of their type or F32): the
 * reference takes the operands as stored (rounded to their types), so the
 * float arithmetic inside owes the same bound as above; a 16-bit C adds
 * the rounding of the stored result (tests/tu_dtype.h):
 *     F16 C   bound (1 + 2^-11) + 2^-25 + 2^-11 |want|
 *     BF16 C  bound (1 + 2^-8) + 2^-8 |want|
 * (the float result lies within `bound` of want and is then rounded to
 * half an ulp of itself).  Measured: up to 0.96 of the F16 bound and 0.99
 * of the BF16 one (the rounding of C dominates), 0.03 of the bound with a
 * float C.  The typed cases form a covering set rather than the whole
 * cross product, since every program costs a build on PoCL (a second or
 * more cold): on both variants each storage pair runs the tile-selecting
 * shapes (one transpose each, aligned and unaligned), two strided gemm_ex
 * (one aligned) and a batched gemm, the transposes turning so that each
 * type meets all four; guard bytes surround each 16-bit C.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

typedef struct {
  size_t m, n, k;
} shape3;

static const shape3 SHAPES[] = {
    {1, 1, 1}, {17, 33, 65}, {1000, 1, 1000}, {1, 4096, 1}, {513, 257, 129}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static float absmax(const float *x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; i++)
    if (fabsf(x[i]) > m) m = fabsf(x[i]);
  return m;
}

static double tolerance(size_t k, double alpha, float amax, float bmax,
                        double beta, float cmax) {
  return 1e-5 * (sqrt((double)k) + 1.0) * fabs(alpha) * amax * bmax +
         2e-6 * fabs(beta) * cmax;
}

/* Reference for a strided-batched layout over whole buffers: want starts as
 * a copy of c0 and gets every view's result. */
static void ref_layout(int ta, int tb, double alpha, const float *a,
                       const float *b, double beta, const float *c0,
                       size_t cn, const rumus_gemm_layout *l, double *want) {
  for (size_t i = 0; i < cn; i++) want[i] = c0[i];
  for (size_t z = 0; z < l->batch; z++)
    ref_gemm(ta, tb, l->m, l->n, l->k, alpha, a + l->a_offset + z * l->stride_a,
             l->lda, b + l->b_offset + z * l->stride_b, l->ldb, beta,
             c0 + l->c_offset + z * l->stride_c, l->ldc,
             want + l->c_offset + z * l->stride_c);
}

/* Runs C = alpha op(A) op(B) + beta C on one variant through rumus_gemm
 * (A, B, C are 2-D or 3-D tensors with the given data; l describes them)
 * or rumus_gemm_ex, and checks the whole of C.  a, b and c0 hold the
 * values as the tensors store them (rounded to their types). */
static void check_one(rumus_ctx *ctx, const char *what, int ta, int tb,
                      float alpha, float beta, rumus_tensor *tA,
                      const float *a, size_t an, rumus_tensor *tB,
                      const float *b, size_t bn, rumus_tensor *tC,
                      const float *c0, size_t cn, const rumus_gemm_layout *l,
                      int use_ex) {
  const rumus_dtype ct = rumus_tensor_dtype(tC);
  TU_OK(ctx, rumus_tensor_upload_f32(tC, c0, cn));
  if (use_ex)
    TU_OK(ctx, rumus_gemm_ex(ctx, ta, tb, alpha, tA, tB, beta, tC, l));
  else
    TU_OK(ctx, rumus_gemm(ctx, ta, tb, alpha, tA, tB, beta, tC));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  float *got = tu_download_f32(ctx, tC);
  double *want = malloc(cn * sizeof *want);
  ck_assert_ptr_nonnull(want);
  ref_layout(ta, tb, alpha, a, b, beta, c0, cn, l, want);
  /* beta == 0: C's NaN must not come through (the reference ignores C). */
  float cmax = 0.0f;
  for (size_t i = 0; i < cn; i++)
    if (!isnan(c0[i]) && fabsf(c0[i]) > cmax) cmax = fabsf(c0[i]);
  double tol = tolerance(l->k, alpha, absmax(a, an), absmax(b, bn), beta, cmax);
  const double rtol = tu_store_rtol(ct); /* 0 for F32 */
  char name[256];
  snprintf(name, sizeof name,
           "gemm_%s_%s_%s_c%s_%c%c_%zux%zux%zu_b%zu_alpha%g_beta%g", what,
           rumus_ctx_uses_gpu_variant(ctx) ? "wg" : "row",
           tu_dtype_name(rumus_tensor_dtype(tA)), tu_dtype_name(ct),
           ta ? 't' : 'n', tb ? 't' : 'n', l->m, l->n, l->k, l->batch, alpha,
           beta);
  tu_check_close(name, got, want, cn, tol * (1.0 + rtol) + tu_store_atol(ct),
                 rtol);
  free(got);
  free(want);
}

static float *random_floats(tu_rng *r, size_t n, float lo, float hi) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  ck_assert_ptr_nonnull(x);
  tu_fill_uniform(r, x, n, lo, hi);
  return x;
}

/* random_floats rounded to what a tensor of type d stores. */
static float *random_typed(tu_rng *r, rumus_dtype d, size_t n, float lo,
                           float hi) {
  float *x = random_floats(r, n, lo, hi);
  tu_round_to(d, x, n);
  return x;
}

/* The storage pairs of the typed cases: A and B, then C. */
static const rumus_dtype PAIRS[4][2] = {{RUMUS_F16, RUMUS_F16},
                                        {RUMUS_F16, RUMUS_F32},
                                        {RUMUS_BF16, RUMUS_BF16},
                                        {RUMUS_BF16, RUMUS_F32}};

/* Shape SHAPES[_i / 4], transposes _i % 4: 2-D tensors, both variants,
 * (alpha, beta) = (1, 0) over a NaN C, (-0.5, 1) and (1.5, -2). */
START_TEST(shapes_2d) {
  const shape3 s = SHAPES[_i / 4];
  const int ta = _i % 4 & 1, tb = _i % 4 >> 1;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, (uint64_t)_i + 1);
  const size_t an = s.m * s.k, bn = s.k * s.n, cn = s.m * s.n;
  float *a = random_floats(&r, an, -1, 1), *b = random_floats(&r, bn, -1, 1),
        *c = random_floats(&r, cn, -1, 1), *cnan = malloc(cn * sizeof *cnan);
  for (size_t i = 0; i < cn; i++) cnan[i] = NAN;
  size_t sa[2] = {ta ? s.k : s.m, ta ? s.m : s.k};
  size_t sb[2] = {tb ? s.n : s.k, tb ? s.k : s.n};
  rumus_tensor *tA = tu_tensor(ctx, RUMUS_F32, 2, sa, a),
               *tB = tu_tensor(ctx, RUMUS_F32, 2, sb, b),
               *tC = tu_tensor_2d(ctx, s.m, s.n, NULL);
  rumus_gemm_layout l = {s.m, s.n, s.k, 1, 0, sa[1], 0, 0, sb[1], 0,
                         0, s.n, 0};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    check_one(ctx, "2d", ta, tb, 1.0f, 0.0f, tA, a, an, tB, b, bn, tC, cnan,
              cn, &l, 0);
    check_one(ctx, "2d", ta, tb, -0.5f, 1.0f, tA, a, an, tB, b, bn, tC, c, cn,
              &l, 0);
    check_one(ctx, "2d", ta, tb, 1.5f, -2.0f, tA, a, an, tB, b, bn, tC, c, cn,
              &l, 0);
  }
  free(a);
  free(b);
  free(c);
  free(cnan);
  tu_free_all(ctx, tA, tB, tC, NULL);
}
END_TEST

/* Square sizes around the tile sizes (32, 64, 128), with aligned rows
 * where both variants take their vector paths; on PoCL the work-group
 * variant picks each of its three tile sizes here.  Transposes NN and TT
 * cover every load path of both operands (NT and TN mix the same code). */
START_TEST(tile_sizes) {
  static const size_t SIZES[] = {63, 64, 128, 129, 200, 256};
  const size_t n = SIZES[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 50 + (uint64_t)_i);
  float *a = random_floats(&r, n * n, -2, 2), *b = random_floats(&r, n * n, -2, 2),
        *c = random_floats(&r, n * n, -2, 2);
  rumus_tensor *tA = tu_tensor_2d(ctx, n, n, a), *tB = tu_tensor_2d(ctx, n, n, b),
               *tC = tu_tensor_2d(ctx, n, n, NULL);
  rumus_gemm_layout l = {n, n, n, 1, 0, n, 0, 0, n, 0, 0, n, 0};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int t = 0; t < 4; t += 3)
      check_one(ctx, "square", t & 1, t >> 1, 0.75f, 0.25f, tA, a, n * n, tB,
                b, n * n, tC, c, n * n, &l, 0);
  }
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tA, tB, tC, NULL);
}
END_TEST

/* 3-D tensors of storage ab (A, B) and ct (C) with transposes t: C
 * [3, 19, 37] with A batched and B a 2-D matrix broadcast over the batch,
 * then the other way round, then both batched, on both variants.  a, b and
 * c hold 3 x 19 x 23, 3 x 23 x 37 and 3 x 19 x 37 values as stored. */
static void run_batched(rumus_ctx *ctx, int t, rumus_dtype ab, rumus_dtype ct,
                        const float *a, const float *b, const float *c) {
  const size_t Z = 3, M = 19, N = 37, K = 23;
  const int ta = t & 1, tb = t >> 1;
  size_t sa[3] = {Z, ta ? K : M, ta ? M : K};
  size_t sb[3] = {Z, tb ? N : K, tb ? K : N}, sc[3] = {Z, M, N};
  rumus_tensor *tC = tu_tensor_typed(ctx, ct, 3, sc, NULL);
  for (int mode = 0; mode < 3; mode++) { /* 0: B 2-D, 1: A 2-D, 2: both 3-D */
    const int a3 = mode != 1, b3 = mode != 0;
    /* 2-D: the shape without its batch extent */
    rumus_tensor *tA = tu_tensor_typed(ctx, ab, 2 + a3, sa + 1 - a3, a),
                 *tB = tu_tensor_typed(ctx, ab, 2 + b3, sb + 1 - b3, b);
    rumus_gemm_layout l = {M, N, K, Z, 0, sa[2], a3 ? M * K : 0,
                           0, sb[2], b3 ? K * N : 0, 0, N, M * N};
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      check_one(ctx, "3d", ta, tb, 1.25f, 0.5f, tA, a, Z * M * K, tB, b,
                Z * K * N, tC, c, Z * M * N, &l, 0);
    }
    rumus_tensor_free(tA);
    rumus_tensor_free(tB);
  }
  rumus_tensor_free(tC);
}

START_TEST(batched_3d) {
  const size_t Z = 3, M = 19, N = 37, K = 23;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 99);
  float *a = random_floats(&r, Z * M * K, -1, 1), *b = random_floats(&r, Z * K * N, -1, 1),
        *c = random_floats(&r, Z * M * N, -1, 1);
  for (int t = 0; t < 4; t++)
    run_batched(ctx, t, RUMUS_F32, RUMUS_F32, a, b, c);
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A pitch past rows of n elements: n + extra, or aligned the next multiple
 * of 4 above n. */
static size_t pitch(size_t n, size_t extra, int aligned) {
  return aligned ? (n + 4) / 4 * 4 : n + extra;
}

/* rumus_gemm_ex on 1-D buffers of storage ab (A, B) and ct (C): offsets,
 * leading sizes larger than the rows, batch strides with gaps, a broadcast
 * operand (stride 0) and C interleaved as [M, batch, N]; elements between
 * the views must stay as they were.  Unaligned: odd offsets and pitches.
 * Aligned: every offset, pitch and stride a multiple of 4, so that the
 * work-group variant takes its aligned vector path (the rows of 21, 31 and
 * 45 elements are padded up to it).  Both variants, beta 1 and beta 0. */
static void run_strided(rumus_ctx *ctx, int ta, int tb, int aligned,
                        rumus_dtype ab, rumus_dtype ct, uint64_t seed) {
  const size_t M = 21, N = 45, K = 31, Z = 4;
  rumus_gemm_layout l;
  l.m = M;
  l.n = N;
  l.k = K;
  l.batch = Z;
  const size_t a_rows = ta ? K : M, a_cols = ta ? M : K;
  const size_t b_rows = tb ? N : K, b_cols = tb ? K : N;
  l.a_offset = aligned ? 8 : 5;
  l.lda = pitch(a_cols, 3, aligned);
  l.stride_a = a_rows * l.lda + (aligned ? 4 : 7);
  l.b_offset = aligned ? 4 : 2;
  l.ldb = pitch(b_cols, 4, aligned);
  l.stride_b = 0; /* one B for every batch */
  l.c_offset = aligned ? 12 : 9;
  l.stride_c = pitch(N, 3, aligned);
  l.ldc = Z * l.stride_c; /* C is [M, Z, pitch]: batches interleave */
  const size_t an = l.a_offset + (Z - 1) * l.stride_a + a_rows * l.lda + 3;
  const size_t bn = l.b_offset + b_rows * l.ldb + 1;
  const size_t cn = l.c_offset + M * l.ldc + 5;
  tu_rng r;
  tu_rng_seed(&r, seed);
  float *a = random_typed(&r, ab, an, -1, 1),
        *b = random_typed(&r, ab, bn, -1, 1),
        *c = random_typed(&r, ct, cn, -1, 1);
  rumus_tensor *tA = tu_tensor_typed(ctx, ab, 1, &an, a),
               *tB = tu_tensor_typed(ctx, ab, 1, &bn, b),
               *tC = tu_tensor_typed(ctx, ct, 1, &cn, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    check_one(ctx, "ex", ta, tb, -0.5f, 1.0f, tA, a, an, tB, b, bn, tC, c, cn,
              &l, 1);
    check_one(ctx, "ex", ta, tb, 2.0f, 0.0f, tA, a, an, tB, b, bn, tC, c, cn,
              &l, 1);
  }
  free(a);
  free(b);
  free(c);
  rumus_tensor_free(tA);
  rumus_tensor_free(tB);
  rumus_tensor_free(tC);
}

START_TEST(strided_ex) {
  rumus_ctx *ctx = tu_ctx();
  run_strided(ctx, _i & 1, _i >> 1 & 1, _i >> 2, RUMUS_F32, RUMUS_F32,
              7 + (uint64_t)_i);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- 16-bit storage ------------------------------------------------------ */

static float *nan_floats(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  ck_assert_ptr_nonnull(x);
  for (size_t i = 0; i < n; i++) x[i] = NAN;
  return x;
}

/* Storage pair PAIRS[_i] on the shapes that pick each tile size of the
 * work-group variant on PoCL's two compute units (check_framework's cache
 * test: 128, 64, 32 and 32), K a multiple of 4 with aligned views and K
 * odd, one transpose each; NN and TT aligned cover every vector load of A
 * and B, NT and TN unaligned their element loads.  Both variants (the CPU
 * variant packs with all four transposes), (alpha, beta) = (1, 0) over a
 * NaN C and (1.5, -2). */
START_TEST(typed_tiles) {
  static const struct {
    size_t m, n, k;
    int t;
  } CASES[] = {{256, 256, 8, 0}, {128, 64, 8, 3}, {64, 32, 7, 2}, {5, 3, 7, 1}};
  const rumus_dtype ab = PAIRS[_i][0], ct = PAIRS[_i][1];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 200 + (uint64_t)_i);
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const size_t m = CASES[i].m, n = CASES[i].n, k = CASES[i].k;
    const int ta = CASES[i].t & 1, tb = CASES[i].t >> 1;
    float *a = random_typed(&r, ab, m * k, -2, 2),
          *b = random_typed(&r, ab, k * n, -2, 2),
          *c = random_typed(&r, ct, m * n, -2, 2), *cnan = nan_floats(m * n);
    size_t sa[2] = {ta ? k : m, ta ? m : k}, sb[2] = {tb ? n : k, tb ? k : n},
           sc[2] = {m, n};
    rumus_tensor *tA = tu_tensor_typed(ctx, ab, 2, sa, a),
                 *tB = tu_tensor_typed(ctx, ab, 2, sb, b),
                 *tC = tu_tensor_typed(ctx, ct, 2, sc, NULL);
    rumus_gemm_layout l = {m, n, k, 1, 0, sa[1], 0, 0, sb[1], 0, 0, n, 0};
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      check_one(ctx, "tiles", ta, tb, 1.0f, 0.0f, tA, a, m * k, tB, b, k * n,
                tC, cnan, m * n, &l, 0);
      check_one(ctx, "tiles", ta, tb, 1.5f, -2.0f, tA, a, m * k, tB, b,
                k * n, tC, c, m * n, &l, 0);
    }
    free(a);
    free(b);
    free(c);
    free(cnan);
    rumus_tensor_free(tA);
    rumus_tensor_free(tB);
    rumus_tensor_free(tC);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Storage pair PAIRS[_i / 2]: a strided gemm_ex, with aligned views for
 * odd _i, and for even _i a batched gemm with the same transposes (the
 * same programs); the transposes turn with _i, so each storage type meets
 * all four. */
START_TEST(typed_layouts) {
  const rumus_dtype ab = PAIRS[_i / 2][0], ct = PAIRS[_i / 2][1];
  const int t = _i % 4;
  rumus_ctx *ctx = tu_ctx();
  run_strided(ctx, t & 1, t >> 1, _i % 2, ab, ct, 300 + (uint64_t)_i);
  if (_i % 2 == 0) {
    const size_t Z = 3, M = 19, N = 37, K = 23;
    tu_rng r;
    tu_rng_seed(&r, 400 + (uint64_t)_i);
    float *a = random_typed(&r, ab, Z * M * K, -1, 1),
          *b = random_typed(&r, ab, Z * K * N, -1, 1),
          *c = random_typed(&r, ct, Z * M * N, -1, 1);
    run_batched(ctx, t, ab, ct, a, b, c);
    free(a);
    free(b);
    free(c);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* K == 0: C = beta * C (0 for beta == 0, even over NaN); alpha == 0 reads
 * neither A nor B (NaN there does not propagate). */
START_TEST(k_zero_and_alpha_zero) {
  rumus_ctx *ctx = tu_ctx();
  const size_t M = 7, N = 13;
  float c[7 * 13], nan_ab[7 * 13];
  tu_rng r;
  tu_rng_seed(&r, 5);
  tu_fill_uniform(&r, c, M * N, -3, 3);
  for (size_t i = 0; i < M * N; i++) nan_ab[i] = NAN;
  size_t sa0[2] = {M, 0}, sb0[2] = {0, N};
  rumus_tensor *a0 = tu_tensor(ctx, RUMUS_F32, 2, sa0, NULL),
               *b0 = tu_tensor(ctx, RUMUS_F32, 2, sb0, NULL),
               *aN = tu_tensor_2d(ctx, M, N, nan_ab), *bN = tu_tensor_2d(ctx, N, N, NULL),
               *tC = tu_tensor_2d(ctx, M, N, NULL);
  float *nn = malloc(N * N * sizeof *nn);
  for (size_t i = 0; i < N * N; i++) nn[i] = NAN;
  TU_OK(ctx, rumus_tensor_upload(bN, nn, N * N * sizeof *nn));
  free(nn);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    const float betas[3] = {0.0f, 1.0f, -0.5f};
    for (int i = 0; i < 3; i++) {
      for (int alpha_zero = 0; alpha_zero < 2; alpha_zero++) {
        float c0[7 * 13];
        memcpy(c0, c, sizeof c0);
        if (betas[i] == 0.0f) c0[3] = NAN;
        TU_OK(ctx, rumus_tensor_upload(tC, c0, sizeof c0));
        if (alpha_zero)
          TU_OK(ctx, rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 0.0f, aN,
                                bN, betas[i], tC));
        else
          TU_OK(ctx, rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 2.0f, a0,
                                b0, betas[i], tC));
        float *got = tu_download(ctx, tC);
        double want[7 * 13];
        for (size_t j = 0; j < M * N; j++)
          want[j] = betas[i] == 0.0f ? 0.0 : (double)betas[i] * c0[j];
        tu_check_close(alpha_zero ? "alpha0" : "k0", got, want, M * N, 0, 0);
        free(got);
      }
    }
  }
  tu_free_all(ctx, a0, b0, aN, bN, tC, NULL);
}
END_TEST

/* Odd shapes inside buffers with guard bytes before and after A, B and C,
 * of storage ab (A, B) and ct (C), on both variants; alpha == 0 (C =
 * beta * C) too. */
static void run_guarded(rumus_ctx *ctx, int ta, int tb, rumus_dtype ab,
                        rumus_dtype ct, uint64_t seed) {
  const size_t M = 67, N = 131, K = 33;
  tu_rng r;
  tu_rng_seed(&r, seed);
  float *a = random_typed(&r, ab, M * K, -1, 1),
        *b = random_typed(&r, ab, K * N, -1, 1),
        *c = random_typed(&r, ct, M * N, -1, 1);
  size_t sa[2] = {ta ? K : M, ta ? M : K}, sb[2] = {tb ? N : K, tb ? K : N},
         sc[2] = {M, N};
  rumus_gemm_layout l = {M, N, K, 1, 0, sa[1], 0, 0, sb[1], 0, 0, N, 0};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded gA = tu_guarded_typed(ctx, ab, 2, sa, a),
               gB = tu_guarded_typed(ctx, ab, 2, sb, b),
               gC = tu_guarded_typed(ctx, ct, 2, sc, c);
    check_one(ctx, "guarded", ta, tb, 1.0f, 0.5f, gA.t, a, M * K, gB.t, b,
              K * N, gC.t, c, M * N, &l, 0);
    check_one(ctx, "guarded", ta, tb, 0.0f, -0.5f, gA.t, a, M * K, gB.t, b,
              K * N, gC.t, c, M * N, &l, 0);
    tu_guarded_check_free_all(ctx, &gA, &gB, &gC, NULL);
  }
  free(a);
  free(b);
  free(c);
}

START_TEST(guard_bytes) {
  rumus_ctx *ctx = tu_ctx();
  run_guarded(ctx, _i & 1, _i >> 1, RUMUS_F32, RUMUS_F32, 11 + (uint64_t)_i);
  tu_free_all(ctx, NULL);
}
END_TEST

/* Guard bytes around 16-bit tensors: the stores of a 16-bit C, vector and
 * element, must stay inside it (storage pairs F16 / F16 and BF16 / BF16:
 * an F32 C is stored as in guard_bytes), TN. */
START_TEST(typed_guard_bytes) {
  rumus_ctx *ctx = tu_ctx();
  const rumus_dtype t = _i ? RUMUS_BF16 : RUMUS_F16;
  run_guarded(ctx, 1, 0, t, t, 500 + (uint64_t)_i);
  tu_free_all(ctx, NULL);
}
END_TEST

/* M, N or batch 0: nothing happens, RUMUS_OK (also through gemm_ex with
 * views that would not fit). */
START_TEST(empty_dims) {
  rumus_ctx *ctx = tu_ctx();
  size_t s0k[2] = {0, 5}, sk4[2] = {5, 4}, s04[2] = {0, 4};
  size_t s30[2] = {3, 0}, s50[2] = {5, 0}, z[3] = {0, 3, 4}, za[3] = {0, 3, 5},
         s35[2] = {3, 5};
  rumus_tensor *a0 = tu_tensor(ctx, RUMUS_F32, 2, s0k, NULL),
               *b = tu_tensor(ctx, RUMUS_F32, 2, sk4, NULL),
               *c0 = tu_tensor(ctx, RUMUS_F32, 2, s04, NULL),
               *a = tu_tensor(ctx, RUMUS_F32, 2, s35, NULL),
               *b0 = tu_tensor(ctx, RUMUS_F32, 2, s50, NULL),
               *c30 = tu_tensor(ctx, RUMUS_F32, 2, s30, NULL),
               *cz = tu_tensor(ctx, RUMUS_F32, 3, z, NULL),
               *az = tu_tensor(ctx, RUMUS_F32, 3, za, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1, a0, b, 0, c0));
    TU_OK(ctx, rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1, a, b0, 0, c30));
    TU_OK(ctx, rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1, az, b, 1, cz));
    rumus_gemm_layout l = {0, 4, 5, 1, 1000, 5, 0, 1000, 4, 0, 1000, 4, 0};
    TU_OK(ctx, rumus_gemm_ex(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1, a, b, 0, c30, &l));
    l.m = 3;
    l.batch = 0;
    TU_OK(ctx, rumus_gemm_ex(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1, a, b, 0, c30, &l));
    TU_OK(ctx, rumus_ctx_sync(ctx));
  }
  tu_free_all(ctx, a0, b, c0, a, b0, c30, cz, az, NULL);
}
END_TEST

/* More batches than one launch covers (65535 per launch). */
START_TEST(many_batches) {
  const size_t Z = 65537, M = 2, N = 3, K = 2;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 77);
  float *a = random_floats(&r, Z * M * K, -1, 1), *b = random_floats(&r, K * N, -1, 1),
        *c = random_floats(&r, Z * M * N, -1, 1);
  size_t sa[3] = {Z, M, K}, sb[2] = {K, N}, sc[3] = {Z, M, N};
  rumus_tensor *tA = tu_tensor(ctx, RUMUS_F32, 3, sa, a), *tB = tu_tensor(ctx, RUMUS_F32, 2, sb, b),
               *tC = tu_tensor(ctx, RUMUS_F32, 3, sc, NULL);
  rumus_gemm_layout l = {M, N, K, Z, 0, K, M * K, 0, N, 0, 0, N, M * N};
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    check_one(ctx, "batches", 0, 0, 1.0f, 1.0f, tA, a, Z * M * K, tB, b, K * N,
              tC, c, Z * M * N, &l, 0);
  }
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tA, tB, tC, NULL);
}
END_TEST

/* More rows than one launch of the smallest tiles covers (65535 row tiles
 * of 32), with A stored both ways: the row chunks start at other offsets. */
START_TEST(many_rows) {
  const size_t M = 65535 * 32 + 5, N = 3, K = 2;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 78);
  float *a = random_floats(&r, M * K, -1, 1), *b = random_floats(&r, K * N, -1, 1),
        *c = random_floats(&r, M * N, -1, 1);
  rumus_tensor *tB = tu_tensor_2d(ctx, K, N, b), *tC = tu_tensor_2d(ctx, M, N, NULL);
  for (int ta = 0; ta < 2; ta++) {
    rumus_tensor *tA = ta ? tu_tensor_2d(ctx, K, M, a) : tu_tensor_2d(ctx, M, K, a);
    rumus_gemm_layout l = {M, N, K, 1, 0, ta ? M : K, 0, 0, N, 0, 0, N, 0};
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      check_one(ctx, "rows", ta, 0, 1.0f, 0.5f, tA, a, M * K, tB, b, K * N, tC,
                c, M * N, &l, 0);
    }
    rumus_tensor_free(tA);
  }
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tB, tC, NULL);
}
END_TEST

/* K long enough that the packed CPU variant splits it (a packed operand
 * holds at most 2^24 floats; N = 3 pads to 64 columns), NN and TT. */
START_TEST(long_k) {
  const size_t M = 2, N = 3, K = ((size_t)1 << 18) + 3;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 79);
  float *a = random_floats(&r, M * K, -1, 1), *b = random_floats(&r, K * N, -1, 1),
        *c = random_floats(&r, M * N, -1, 1);
  rumus_tensor *tC = tu_tensor_2d(ctx, M, N, NULL);
  for (int t = 0; t < 2; t++) {
    rumus_tensor *tA = t ? tu_tensor_2d(ctx, K, M, a) : tu_tensor_2d(ctx, M, K, a),
                 *tB = t ? tu_tensor_2d(ctx, N, K, b) : tu_tensor_2d(ctx, K, N, b);
    rumus_gemm_layout l = {M, N, K, 1, 0, t ? M : K, 0, 0, t ? K : N, 0, 0, N, 0};
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      check_one(ctx, "longk", t, t, 1.0f, -1.0f, tA, a, M * K, tB, b, K * N,
                tC, c, M * N, &l, 0);
    }
    rumus_tensor_free(tA);
    rumus_tensor_free(tB);
  }
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tC, NULL);
}
END_TEST

/* The launches of kernel `name` since the last profile read. */
static uint64_t launches_of(rumus_ctx *ctx, const char *name) {
  rumus_kernel_stat st[8];
  size_t n = 0;
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, st, 8, &n));
  uint64_t count = 0;
  for (size_t i = 0; i < n && i < 8; i++)
    if (strcmp(st[i].kernel, name) == 0) count += st[i].launches;
  return count;
}

/* RUMUS_GEMM_SPLITK (on a product the default splits or not, by the
 * device's compute units): 1 keeps it whole, 3 splits it, 99 is cut to
 * K / 512 slices; the result is right each time (counted on a profiling
 * queue: one gemm_splitk_sum per split product). */
START_TEST(splitk_override) {
  static const char *const SLICES[] = {"1", "3", "99"};
  const size_t M = 300, N = 200, K = 2048;
  rumus_ctx *ctx = NULL;
  TU_STATUS(RUMUS_OK, rumus_ctx_create(&ctx, NULL, RUMUS_CTX_PROFILING));
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  tu_rng r;
  tu_rng_seed(&r, 500 + (uint64_t)_i);
  float *a = random_floats(&r, K * M, -1, 1), *b = random_floats(&r, K * N, -1, 1),
        *c = random_floats(&r, M * N, -1, 1);
  rumus_tensor *tA = tu_tensor_2d(ctx, K, M, a), *tB = tu_tensor_2d(ctx, K, N, b),
               *tC = tu_tensor_2d(ctx, M, N, NULL);
  rumus_gemm_layout l = {M, N, K, 1, 0, M, 0, 0, N, 0, 0, N, 0};
  check_one(ctx, "default", 1, 0, 1.0f, 0.5f, tA, a, K * M, tB, b, K * N, tC,
            c, M * N, &l, 1);
  launches_of(ctx, "gemm_splitk_sum"); /* forgets the default's launches */
  setenv("RUMUS_GEMM_SPLITK", SLICES[_i], 1);
  check_one(ctx, SLICES[_i], 1, 0, 1.0f, 0.5f, tA, a, K * M, tB, b, K * N, tC,
            c, M * N, &l, 1);
  unsetenv("RUMUS_GEMM_SPLITK");
  ck_assert_uint_eq(launches_of(ctx, "gemm_splitk_sum"), _i == 0 ? 0 : 1);
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tA, tB, tC, NULL);
}
END_TEST

/* RUMUS_GEMM_TILE: two valid tilings (one double-buffered), split-K
 * under an override, and invalid values (TSK not a multiple of 4, DBUF 3,
 * too few fields, slices not whole float4s per work-item: ignored). */
START_TEST(tile_override) {
  static const char *const TILES[] = {"64x32x16x4x4", "32x64x16x4x8x2",
                                      "64x64x6x4x4", "64x64x8x4x4x3",
                                      "64x64", "64x32x8x4x4"};
  const int valid = _i < 2;
  const size_t M = 75, N = 41, K = 1200;
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  tu_rng r;
  tu_rng_seed(&r, 400 + (uint64_t)_i);
  float *a = random_floats(&r, M * K, -1, 1), *b = random_floats(&r, N * K, -1, 1),
        *c = random_floats(&r, M * N, -1, 1);
  rumus_tensor *tA = tu_tensor_2d(ctx, M, K, a), *tB = tu_tensor_2d(ctx, N, K, b),
               *tC = tu_tensor_2d(ctx, M, N, NULL);
  rumus_gemm_layout l = {M, N, K, 1, 0, K, 0, 0, K, 0, 0, N, 0};
  check_one(ctx, "default", 0, 1, 1.0f, -0.5f, tA, a, M * K, tB, b, N * K, tC, c,
            M * N, &l, 0);
  rumus_cache_info before, after;
  TU_OK(ctx, rumus_cache_stats(ctx, &before));
  setenv("RUMUS_GEMM_TILE", TILES[_i], 1);
  check_one(ctx, "override", 0, 1, 1.0f, -0.5f, tA, a, M * K, tB, b, N * K, tC, c,
            M * N, &l, 0);
  unsetenv("RUMUS_GEMM_TILE");
  TU_OK(ctx, rumus_cache_stats(ctx, &after));
  /* A valid tiling is a program of its own; an invalid one changes nothing. */
  ck_assert_uint_eq(after.builds - before.builds, valid ? 1 : 0);
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tA, tB, tC, NULL);
}
END_TEST

/* RUMUS_GEMM_CPU_NV: the CPU variant's register block at 1 to 4 float16
 * vectors per row, every transpose, N past one and two blocks' widths and
 * not a multiple of 16, an F16 A and B with F32 C too; out-of-range values
 * ("0", "5", "12") are ignored (the default program, no new build).  The
 * default follows the device (1 on AVX2, 4 on AVX-512), so this case
 * runs both on any CPU. */
START_TEST(cpu_nv_override) {
  static const char *const NVS[] = {"1", "2", "3", "4", "0", "5", "12"};
  const size_t M = 13, N = 139, K = 37;
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_CPU);
  tu_rng r;
  tu_rng_seed(&r, 700 + (uint64_t)_i);
  float *a = random_typed(&r, RUMUS_F16, M * K, -1, 1),
        *b = random_typed(&r, RUMUS_F16, N * K, -1, 1),
        *c = random_floats(&r, M * N, -1, 1);
  rumus_tensor *tC = tu_tensor_2d(ctx, M, N, NULL);
  /* Warm the default program so that an ignored value builds nothing. */
  size_t sa[2] = {M, K}, sb[2] = {K, N};
  rumus_tensor *tA = tu_tensor_2d(ctx, M, K, a), *tB = tu_tensor_2d(ctx, K, N, b);
  rumus_gemm_layout l = {M, N, K, 1, 0, K, 0, 0, N, 0, 0, N, 0};
  check_one(ctx, "cpu_nv_default", 0, 0, 1.0f, 0.5f, tA, a, M * K, tB, b,
            K * N, tC, c, M * N, &l, 0);
  rumus_cache_info before, after;
  TU_OK(ctx, rumus_cache_stats(ctx, &before));
  setenv("RUMUS_GEMM_CPU_NV", NVS[_i], 1);
  check_one(ctx, "cpu_nv", 0, 0, 1.0f, 0.5f, tA, a, M * K, tB, b, K * N, tC,
            c, M * N, &l, 0);
  TU_OK(ctx, rumus_cache_stats(ctx, &after));
  if (_i >= 4) ck_assert_uint_eq(after.builds, before.builds);
  rumus_tensor_free(tA);
  rumus_tensor_free(tB);
  for (int t = 1; t < 4; t++) { /* the other transposes; F16 A and B */
    const int ta = t & 1, tb = t >> 1;
    sa[0] = ta ? K : M, sa[1] = ta ? M : K;
    sb[0] = tb ? N : K, sb[1] = tb ? K : N;
    tA = tu_tensor_typed(ctx, RUMUS_F16, 2, sa, a);
    tB = tu_tensor_typed(ctx, RUMUS_F16, 2, sb, b);
    rumus_gemm_layout lt = {M, N, K, 1, 0, sa[1], 0, 0, sb[1], 0, 0, N, 0};
    check_one(ctx, "cpu_nv", ta, tb, -1.0f, 1.0f, tA, a, M * K, tB, b, K * N,
              tC, c, M * N, &lt, 0);
    rumus_tensor_free(tA);
    rumus_tensor_free(tB);
  }
  unsetenv("RUMUS_GEMM_CPU_NV");
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tC, NULL);
}
END_TEST

/* Split-K (the work-group variant, few output tiles, K >= 1024): every
 * transpose, 16-bit storage with a C of its type or F32, an offset and
 * padded pitches through rumus_gemm_ex, beta 0 over a NaN C and beta 0.5,
 * a last slice shorter than the others (K = 3001), and the same bits on a
 * second run.  _i: transposes _i % 4, storage pair _i / 4 (F32, then
 * PAIRS[1], PAIRS[2]). */
START_TEST(split_k) {
  const size_t M = 37, N = 70, K = 3001;
  static const rumus_dtype TYPES[3][2] = {{RUMUS_F32, RUMUS_F32},
                                          {RUMUS_F16, RUMUS_F32},
                                          {RUMUS_BF16, RUMUS_BF16}};
  const int ta = _i & 1, tb = _i >> 1 & 1;
  const rumus_dtype ab = TYPES[_i / 4][0], ct = TYPES[_i / 4][1];
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, RUMUS_VARIANT_GPU);
  rumus_gemm_layout l = {0};
  l.m = M;
  l.n = N;
  l.k = K;
  l.batch = 1;
  l.a_offset = 3;
  l.lda = (ta ? M : K) + 2;
  l.b_offset = 5;
  l.ldb = (tb ? K : N) + 1;
  l.c_offset = 7;
  l.ldc = N + 3;
  const size_t an = l.a_offset + (ta ? K : M) * l.lda,
               bn = l.b_offset + (tb ? N : K) * l.ldb,
               cn = l.c_offset + M * l.ldc;
  tu_rng r;
  tu_rng_seed(&r, 300 + (uint64_t)_i);
  float *a = random_typed(&r, ab, an, -1, 1), *b = random_typed(&r, ab, bn, -1, 1),
        *c = random_typed(&r, ct, cn, -1, 1);
  rumus_tensor *tA = tu_tensor_typed(ctx, ab, 1, &an, a),
               *tB = tu_tensor_typed(ctx, ab, 1, &bn, b),
               *tC = tu_tensor_typed(ctx, ct, 1, &cn, NULL);
  check_one(ctx, "splitk", ta, tb, 0.75f, 0.5f, tA, a, an, tB, b, bn, tC, c, cn, &l, 1);
  float *first = tu_download_f32(ctx, tC);
  check_one(ctx, "splitk", ta, tb, 0.75f, 0.5f, tA, a, an, tB, b, bn, tC, c, cn, &l, 1);
  float *second = tu_download_f32(ctx, tC);
  ck_assert_mem_eq(first, second, cn * sizeof *first);
  for (size_t i = 0; i < cn; i++) c[i] = NAN;
  check_one(ctx, "splitk", ta, tb, -1.0f, 0.0f, tA, a, an, tB, b, bn, tC, c, cn, &l, 1);
  free(first);
  free(second);
  free(a);
  free(b);
  free(c);
  tu_free_all(ctx, tA, tB, tC, NULL);
}
END_TEST

START_TEST(bad_input) {
  rumus_ctx *ctx = tu_ctx();
  const rumus_transpose N_ = RUMUS_NO_TRANS, T_ = RUMUS_TRANS;
  size_t s23[2] = {2, 3}, s34[2] = {3, 4}, s24[2] = {2, 4}, s44[2] = {4, 4},
         s25[2] = {2, 5}, b234[3] = {2, 3, 4}, b324[3] = {3, 2, 4},
         b224[3] = {2, 2, 4}, s6 = 6, s4d[4] = {1, 1, 2, 4};
  rumus_tensor *a = tu_tensor(ctx, RUMUS_F32, 2, s23, NULL),
               *b = tu_tensor(ctx, RUMUS_F32, 2, s34, NULL),
               *c = tu_tensor(ctx, RUMUS_F32, 2, s24, NULL),
               *b44 = tu_tensor(ctx, RUMUS_F32, 2, s44, NULL),
               *c25 = tu_tensor(ctx, RUMUS_F32, 2, s25, NULL),
               *b3 = tu_tensor(ctx, RUMUS_F32, 3, b234, NULL),
               *c3 = tu_tensor(ctx, RUMUS_F32, 3, b224, NULL),
               *c3b = tu_tensor(ctx, RUMUS_F32, 3, b324, NULL),
               *v6 = tu_tensor(ctx, RUMUS_F32, 1, &s6, NULL),
               *c4d = tu_tensor(ctx, RUMUS_F32, 4, s4d, NULL),
               *ai = tu_tensor(ctx, RUMUS_I32, 2, s23, NULL);
  /* NULL */
  TU_STATUS(RUMUS_ENULL, rumus_gemm(NULL, N_, N_, 1, a, b, 0, c));
  TU_STATUS(RUMUS_ENULL, rumus_gemm(ctx, N_, N_, 1, NULL, b, 0, c));
  TU_STATUS(RUMUS_ENULL, rumus_gemm(ctx, N_, N_, 1, a, NULL, 0, c));
  TU_STATUS(RUMUS_ENULL, rumus_gemm(ctx, N_, N_, 1, a, b, 0, NULL));
  rumus_gemm_layout l = {2, 4, 3, 1, 0, 3, 0, 0, 4, 0, 0, 4, 0};
  TU_STATUS(RUMUS_ENULL, rumus_gemm_ex(NULL, N_, N_, 1, a, b, 0, c, &l));
  TU_STATUS(RUMUS_ENULL, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_gemm_ex(ctx, N_, N_, 1, a, NULL, 0, c, &l));
  /* dtype */
  TU_STATUS(RUMUS_EDTYPE, rumus_gemm(ctx, N_, N_, 1, ai, b, 0, c));
  TU_STATUS(RUMUS_EDTYPE, rumus_gemm_ex(ctx, N_, N_, 1, ai, b, 0, c, &l));
  /* transpose enums */
  TU_STATUS(RUMUS_EINVAL, rumus_gemm(ctx, (rumus_transpose)2, N_, 1, a, b, 0, c));
  TU_STATUS(RUMUS_EINVAL, rumus_gemm(ctx, N_, (rumus_transpose)-1, 1, a, b, 0, c));
  TU_STATUS(RUMUS_EINVAL, rumus_gemm_ex(ctx, N_, (rumus_transpose)7, 1, a, b, 0, c, &l));
  /* shapes */
  TU_OK(ctx, rumus_gemm(ctx, N_, N_, 1, a, b, 0, c));
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, N_, N_, 1, a, b44, 0, c)); /* K 3 vs 4 */
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[2, 3]") && strstr(rumus_ctx_errmsg(ctx), "[4, 4]"),
                "message names the shapes: %s", rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, N_, N_, 1, a, b, 0, c25)); /* N */
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, T_, N_, 1, a, b, 0, c));   /* A^T is 3x2 */
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, N_, T_, 1, a, b, 0, c));   /* B^T is 4x3 */
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, N_, N_, 1, a, b3, 0, c));  /* 3-D B, 2-D C */
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, N_, N_, 1, a, b3, 0, c3b)); /* batch 2 vs 3 */
  TU_OK(ctx, rumus_gemm(ctx, N_, N_, 1, a, b3, 0, c3));
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, N_, N_, 1, v6, b, 0, c));  /* 1-D */
  TU_STATUS(RUMUS_ESHAPE, rumus_gemm(ctx, N_, N_, 1, a, b, 0, c4d)); /* 4-D */
  /* gemm_ex: leading sizes */
  rumus_gemm_layout bad = l;
  bad.lda = 2;
  TU_STATUS(RUMUS_EINVAL, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.lda = 2; /* A^T stored [K, M] = [3, 2]: lda 2 is enough */
  TU_OK(ctx, rumus_gemm_ex(ctx, T_, N_, 1, a, b, 0, c, &bad));
  bad.lda = 1;
  TU_STATUS(RUMUS_EINVAL, rumus_gemm_ex(ctx, T_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.ldb = 3;
  TU_STATUS(RUMUS_EINVAL, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.ldc = 3;
  TU_STATUS(RUMUS_EINVAL, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.batch = 2;
  bad.stride_c = 0; /* two batches writing one C */
  TU_STATUS(RUMUS_EINVAL, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c3, &bad));
  /* gemm_ex: views past a tensor */
  bad = l;
  bad.a_offset = 1;
  TU_STATUS(RUMUS_ESIZE, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.lda = 4; /* rows 4 apart: the last row ends past 6 elements */
  TU_STATUS(RUMUS_ESIZE, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.ldc = 5;
  TU_STATUS(RUMUS_ESIZE, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.batch = 2;
  bad.stride_c = 8;
  bad.stride_b = 1; /* B's second batch ends one past it */
  TU_STATUS(RUMUS_ESIZE, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c3, &bad));
  bad.stride_b = 0;
  TU_OK(ctx, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c3, &bad));
  bad.stride_c = 9;
  TU_STATUS(RUMUS_ESIZE, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c3, &bad));
  bad = l;
  bad.batch = 3;
  bad.stride_c = 4;
  bad.stride_a = (size_t)1 << 63; /* overflows size_t */
  TU_STATUS(RUMUS_ESIZE, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c3, &bad));
  bad = l;
  bad.c_offset = SIZE_MAX;
  TU_STATUS(RUMUS_ESIZE, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  bad = l;
  bad.k = 0; /* A and B are not touched, only C */
  bad.a_offset = bad.b_offset = 1000;
  TU_OK(ctx, rumus_gemm_ex(ctx, N_, N_, 1, a, b, 0, c, &bad));
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 2, s23, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_gemm(ctx, N_, N_, 1, o, b, 0, c));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, a, b, c, b44, c25, b3, c3, c3b, v6, c4d, ai, NULL);
}
END_TEST

/* rumus_gemm_bias: C = alpha op(A) op(B) + beta C + bias on both variants,
 * against the float64 reference of the stored values, with 3-D batches
 * (the bias on every batch), K = 0 (beta C + bias), split-K products
 * (forced, on the GPU variant) and 16-bit storage; with F32 C, alpha 1
 * and beta 0 the bits of rumus_gemm then rumus_bias_add. */
typedef struct {
  size_t batch, m, n, k;
  int ta, tb;
  rumus_dtype ab, ct;
  const char *splitk;
  float alpha, beta;
} bias_case;

static const bias_case BIAS_CASES[] = {
    {1, 37, 45, 29, 0, 1, RUMUS_F32, RUMUS_F32, NULL, 1.0f, 0.0f},
    {1, 37, 45, 29, 1, 0, RUMUS_F32, RUMUS_F32, NULL, 0.5f, 0.25f},
    {3, 13, 70, 33, 0, 0, RUMUS_F32, RUMUS_F32, NULL, 1.0f, 1.0f},
    {1, 20, 37, 1100, 1, 0, RUMUS_F32, RUMUS_F32, "3", 0.75f, 0.5f},
    {1, 20, 37, 1100, 1, 0, RUMUS_F32, RUMUS_F32, "3", 1.0f, 0.0f},
    {1, 9, 17, 0, 0, 1, RUMUS_F32, RUMUS_F32, NULL, 1.0f, 0.5f},
    {1, 37, 45, 29, 0, 1, RUMUS_F16, RUMUS_F16, NULL, 1.0f, 0.0f},
    {1, 37, 45, 29, 0, 1, RUMUS_BF16, RUMUS_BF16, NULL, 1.0f, 0.5f},
    {1, 37, 45, 29, 0, 1, RUMUS_F16, RUMUS_F32, NULL, 1.0f, 0.0f},
    {1, 20, 37, 1100, 1, 0, RUMUS_BF16, RUMUS_BF16, "3", 1.0f, 0.0f},
    {1, 37, 130, 29, 0, 1, RUMUS_BF16, RUMUS_BF16, NULL, 1.0f, 0.0f},
    {2, 19, 130, 29, 0, 0, RUMUS_F16, RUMUS_F16, NULL, 1.0f, 0.5f},
};
#define NBIAS_CASES (sizeof BIAS_CASES / sizeof BIAS_CASES[0])

/* want[z][i][j] = alpha (op(A_z) op(B))[i][j] + beta c0 + bias[j]. */
static void ref_bias(const bias_case *c, const float *a, const float *b,
                     const float *c0, const float *bias, double *want) {
  const size_t lda = c->ta ? c->m : c->k, ldb = c->tb ? c->k : c->n;
  for (size_t z = 0; z < c->batch; z++) {
    const size_t zc = z * c->m * c->n;
    ref_gemm(c->ta, c->tb, c->m, c->n, c->k, c->alpha, a + z * c->m * c->k,
             lda, b, ldb, c->beta, c0 + zc, c->n, want + zc);
    for (size_t i = 0; i < c->m * c->n; i++) want[zc + i] += bias[i % c->n];
  }
}

START_TEST(bias_epilogue) {
  const bias_case *c = &BIAS_CASES[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 700 + (uint64_t)_i);
  const size_t an = c->batch * c->m * c->k, bn = c->k * c->n,
               cn = c->batch * c->m * c->n;
  float *a = random_typed(&r, c->ab, an, -1, 1),
        *b = random_typed(&r, c->ab, bn, -1, 1),
        *c0 = random_typed(&r, c->ct, cn, -1, 1),
        *bias = random_typed(&r, c->ct, c->n, -2, 2);
  const size_t sa[3] = {c->batch, c->ta ? c->k : c->m, c->ta ? c->m : c->k},
               sb[2] = {c->tb ? c->n : c->k, c->tb ? c->k : c->n},
               sc[3] = {c->batch, c->m, c->n};
  const int nd = c->batch > 1 ? 3 : 2;
  rumus_tensor *tA = tu_tensor_typed(ctx, c->ab, nd, sa + 3 - nd, a),
               *tB = tu_tensor_typed(ctx, c->ab, 2, sb, b),
               *tC = tu_tensor_typed(ctx, c->ct, nd, sc + 3 - nd, NULL),
               *tP = tu_tensor_typed(ctx, c->ct, nd, sc + 3 - nd, NULL),
               *tb = tu_tensor_typed(ctx, c->ct, 1, &c->n, bias);
  double *want = malloc(cn * sizeof *want);
  ck_assert_ptr_nonnull(want);
  ref_bias(c, a, b, c0, bias, want);
  const double tol = tolerance(c->k, c->alpha, absmax(a, an), absmax(b, bn),
                               c->beta, absmax(c0, cn)) +
                     2e-7 * absmax(bias, c->n);
  const double rtol = tu_store_rtol(c->ct);
  if (c->splitk) setenv("RUMUS_GEMM_SPLITK", c->splitk, 1);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_tensor_upload_f32(tC, c0, cn));
    TU_OK(ctx, rumus_gemm_bias(ctx, c->ta, c->tb, c->alpha, tA, tB, c->beta,
                               tb, tC));
    float *got = tu_download_f32(ctx, tC);
    char name[96];
    snprintf(name, sizeof name, "gemm_bias_%zu_%s", (size_t)_i,
             tu_variant_name(tu_variants[v]));
    tu_check_close(name, got, want, cn, tol * (1.0 + rtol) +
                   tu_store_atol(c->ct), rtol);
    if (c->ct == RUMUS_F32 && c->alpha == 1.0f && c->beta == 0.0f) {
      TU_OK(ctx, rumus_gemm(ctx, c->ta, c->tb, 1.0f, tA, tB, 0.0f, tP));
      TU_OK(ctx, rumus_bias_add(ctx, tP, tb));
      float *pair = tu_download_f32(ctx, tP);
      ck_assert_msg(memcmp(got, pair, cn * sizeof *got) == 0,
                    "%s: not the bits of rumus_gemm + rumus_bias_add", name);
      free(pair);
    }
    free(got);
  }
  unsetenv("RUMUS_GEMM_SPLITK");
  free(want);
  free(a);
  free(b);
  free(c0);
  free(bias);
  tu_free_all(ctx, tA, tB, tC, tP, tb, NULL);
}
END_TEST

/* rumus_gemm_bias's own errors, and guard bytes around C and the bias
 * (a view inside a larger buffer) on both variants. */
START_TEST(bias_errors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t M = 5, N = 7, K = 3, sa[2] = {M, K}, sb[2] = {K, N},
               sc[2] = {M, N}, s1 = N, s2[2] = {1, N}, s8 = N + 1;
  float a[15], b[21];
  for (int i = 0; i < 15; i++) a[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < 21; i++) b[i] = (float)(i % 7) * 0.5f - 1.0f;
  rumus_tensor *tA = tu_tensor(ctx, RUMUS_F32, 2, sa, a),
               *tB = tu_tensor(ctx, RUMUS_F32, 2, sb, b),
               *tC = tu_tensor(ctx, RUMUS_F32, 2, sc, NULL),
               *b16 = tu_tensor_typed(ctx, RUMUS_F16, 1, &s1, NULL),
               *b2d = tu_tensor(ctx, RUMUS_F32, 2, s2, NULL),
               *b8 = tu_tensor(ctx, RUMUS_F32, 1, &s8, NULL);
  /* NULL, F16 under an F32 C, [1, N], [N + 1]. */
  const rumus_tensor *bad[4] = {NULL, b16, b2d, b8};
  static const int status[4] = {RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE,
                                RUMUS_ESHAPE};
  for (int i = 0; i < 4; i++)
    TU_STATUS(status[i],
              rumus_gemm_bias(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, tA,
                              tB, 0.0f, bad[i], tC));
  /* A bias over the last elements of C, in one buffer. */
  cl_int e;
  cl_mem mem = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              64 * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  rumus_tensor *vc = NULL, *vo = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, sc, mem, 0, &vc));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, &s1, mem,
                               (M * N - 2) * sizeof(float), &vo));
  TU_STATUS(RUMUS_EINVAL,
            rumus_gemm_bias(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, tA,
                            tB, 0.0f, vo, vc));
  ck_assert_ptr_nonnull(strstr(rumus_ctx_errmsg(ctx), "overlap"));
  /* Guard bytes around C and around a bias at an unaligned offset. */
  float bias[7];
  for (int i = 0; i < 7; i++) bias[i] = (float)i - 3.5f;
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded gC = tu_guarded_typed(ctx, RUMUS_F32, 2, sc, NULL),
               gb = tu_guarded_typed_odd(ctx, RUMUS_F32, 1, &s1, bias, 3);
    TU_OK(ctx, rumus_gemm_bias(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, tA,
                               tB, 0.0f, gb.t, gC.t));
    float *got = tu_download(ctx, gC.t);
    double want[35];
    for (size_t i = 0; i < M * N; i++) {
      want[i] = bias[i % N];
      for (size_t k = 0; k < K; k++)
        want[i] += (double)a[i / N * K + k] * b[k * N + i % N];
    }
    tu_check_close("gemm_bias_guarded", got, want, M * N, 1e-5, 0);
    free(got);
    tu_guarded_check_free_all(ctx, &gC, &gb, NULL);
  }
  rumus_tensor_free(vo);
  rumus_tensor_free(vc);
  clReleaseMemObject(mem);
  tu_free_all(ctx, tA, tB, tC, b16, b2d, b8, NULL);
}
END_TEST

/* Storage combinations other than A and B of one type T with C of T or
 * F32: RUMUS_EDTYPE before any other check of shapes or layout, with a
 * message naming the tensors and their types. */
static void expect_edtype(rumus_ctx *ctx, int st, const char *what,
                          const char *part1, const char *part2) {
  const char *msg = rumus_ctx_errmsg(ctx);
  ck_assert_msg(st == RUMUS_EDTYPE, "%s -> %s, expected RUMUS_EDTYPE", what,
                rumus_err_name(st));
  ck_assert_msg(strstr(msg, part1) && strstr(msg, part2),
                "%s: message names the types (%s, %s): %s", what, part1, part2,
                msg);
}

START_TEST(bad_types) {
  rumus_ctx *ctx = tu_ctx();
  const rumus_transpose N_ = RUMUS_NO_TRANS;
  size_t s23[2] = {2, 3}, s34[2] = {3, 4}, s24[2] = {2, 4}, s44[2] = {4, 4};
  rumus_tensor *a32 = tu_tensor(ctx, RUMUS_F32, 2, s23, NULL),
               *a16 = tu_tensor(ctx, RUMUS_F16, 2, s23, NULL),
               *abf = tu_tensor(ctx, RUMUS_BF16, 2, s23, NULL),
               *b32 = tu_tensor(ctx, RUMUS_F32, 2, s34, NULL),
               *b16 = tu_tensor(ctx, RUMUS_F16, 2, s34, NULL),
               *bbf = tu_tensor(ctx, RUMUS_BF16, 2, s34, NULL),
               *bbf44 = tu_tensor(ctx, RUMUS_BF16, 2, s44, NULL),
               *c32 = tu_tensor(ctx, RUMUS_F32, 2, s24, NULL),
               *c16 = tu_tensor(ctx, RUMUS_F16, 2, s24, NULL),
               *cbf = tu_tensor(ctx, RUMUS_BF16, 2, s24, NULL),
               *ci = tu_tensor(ctx, RUMUS_I32, 2, s24, NULL);
  rumus_gemm_layout l = {2, 4, 3, 1, 0, 3, 0, 0, 4, 0, 0, 4, 0};
  /* A and B of two types. */
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, a16, bbf, 0, c32), "f16 bf16",
                "A is f16", "B is bf16");
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, a16, b32, 0, c16), "f16 f32",
                "A is f16", "B is f32");
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, a32, b16, 0, c32), "f32 f16",
                "A is f32", "B is f16");
  expect_edtype(ctx, rumus_gemm_ex(ctx, N_, N_, 1, abf, b16, 0, cbf, &l),
                "ex bf16 f16", "A is bf16", "B is f16");
  /* Checked before the shapes (K 3 against 4) and the layout. */
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, a16, bbf44, 0, c16),
                "f16 bf16 [4, 4]", "A is f16", "B is bf16");
  expect_edtype(ctx, rumus_gemm_ex(ctx, N_, N_, 1, a16, bbf, 0, c16, NULL),
                "ex layout NULL", "A is f16", "B is bf16");
  /* C of a third type, or 16-bit under F32 operands. */
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, a16, b16, 0, cbf), "C bf16",
                "C is bf16 with A and B f16", "f16 or f32");
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, abf, bbf, 0, c16), "C f16",
                "C is f16 with A and B bf16", "bf16 or f32");
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, a32, b32, 0, c16),
                "f32 C f16", "C is f16 with A and B f32", "must be f32");
  expect_edtype(ctx, rumus_gemm_ex(ctx, N_, N_, 1, a32, b32, 0, cbf, &l),
                "ex f32 C bf16", "C is bf16", "must be f32");
  expect_edtype(ctx, rumus_gemm(ctx, N_, N_, 1, a16, b16, 0, ci), "C i32",
                "C is i32", "expected f32, f16 or bf16");
  /* The pairs that are allowed pass the checks (empty products: the
   * typed cases run them). */
  rumus_gemm_layout l0 = l;
  l0.batch = 0;
  TU_OK(ctx, rumus_gemm_ex(ctx, N_, N_, 1, a16, b16, 0, c32, &l0));
  TU_OK(ctx, rumus_gemm_ex(ctx, N_, N_, 1, a16, b16, 0, c16, &l0));
  TU_OK(ctx, rumus_gemm_ex(ctx, N_, N_, 1, abf, bbf, 0, c32, &l0));
  TU_OK(ctx, rumus_gemm_ex(ctx, N_, N_, 0, abf, bbf, 0.5f, cbf, &l0));
  TU_OK(ctx, rumus_gemm_ex(ctx, N_, N_, 1, a32, b32, 0, c32, &l0));
  tu_free_all(ctx, a32, a16, abf, b32, b16, bbf, bbf44, c32, c16, cbf, ci,
              NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gemm");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, shapes_2d, 0, (int)(NSHAPES * 4));
  tcase_add_loop_test(core, tile_sizes, 0, 6);
  tcase_add_test(core, batched_3d);
  tcase_add_loop_test(core, strided_ex, 0, 8);
  tcase_add_loop_test(core, typed_tiles, 0, 4);
  tcase_add_loop_test(core, typed_layouts, 0, 8);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, k_zero_and_alpha_zero);
  tcase_add_loop_test(limits, guard_bytes, 0, 4);
  tcase_add_loop_test(limits, typed_guard_bytes, 0, 2);
  tcase_add_test(limits, empty_dims);
  tcase_add_test(limits, many_batches);
  tcase_add_test(limits, many_rows);
  tcase_add_test(limits, long_k);
  tcase_add_loop_test(limits, split_k, 0, 12);
  tcase_add_loop_test(limits, tile_override, 0, 6);
  tcase_add_loop_test(limits, splitk_override, 0, 3);
  tcase_add_loop_test(limits, cpu_nv_override, 0, 7);
  tcase_add_loop_test(limits, bias_epilogue, 0, (int)NBIAS_CASES);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_input);
  tcase_add_test(errors, bad_types);
  tcase_add_test(errors, bias_errors);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
