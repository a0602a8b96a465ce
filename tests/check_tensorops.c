/*
 * check_tensorops.c - permute, broadcast add / mul and reduce_sum against
 * the float64 reference (ref/tensorops.c), with F32, F16 and BF16 storage
 * on both variants: every permutation of 3 and 4 dimensions, 1 to 8
 * dimensions with extents of 1, 7 and 129, the head split and merge and
 * transposes large enough for several tiles; every broadcasting pattern
 * of two tensors of up to 3 dimensions against [3, 5, 7] and of 4
 * dimensions against [2, 3, 5, 7] (scalars included), bias-like and long
 * rows; sums over every subset of the axes of 4-D tensors, with and
 * without keepdim, into y of x's type and into F32; odd element offsets
 * and guard bytes around every output; permute's bits unchanged (NaN
 * payloads, -0, subnormals); the sum as the backward of the
 * broadcast add by central differences; empty and 0-D tensors; bad
 * arguments with their exact statuses.
 *
 * Tolerances (|got - want| <= atol + rtol |want|):
 *   permute        exact (the bits move; NaN must meet NaN)
 *   broadcast      rtol 1e-7 (F32: one correctly rounded operation; the
 *                  bound only absorbs the double reference's own
 *                  rounding), plus half an ulp of a 16-bit type
 *                  (tu_store_rtol / atol: 2^-11 F16, 2^-8 BF16)
 *   reduce_sum     atol 2^-22 * R * max|x| (R terms in float, each
 *                  addition off by at most half an ulp of a partial sum
 *                  below R max|x|), plus the 16-bit rounding of y of x's
 *                  type; y F32 for 16-bit x adds nothing
 *   backward (FD)  the device's reduce_sum of dout against central
 *                  differences (h = 1e-3) of the float64 loss
 *                  sum(w * broadcast_add(a, b)): atol 1e-6 * R, rtol 1e-6
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

static size_t numel(int nd, const size_t *s) {
  size_t n = 1;
  for (int d = 0; d < nd; d++) n *= s[d];
  return n;
}

/* A guarded tensor whose data starts `odd` elements past a 4096-byte
 * guard (odd 0: an aligned tensor), holding data (NULL: the guard byte). */
static tu_guarded guarded(rumus_ctx *ctx, rumus_dtype d, int nd,
                          const size_t *shape, const float *data, int odd) {
  return tu_guarded_typed_odd(ctx, d, nd, shape, data, (size_t)odd);
}

/* n uniform values in [-1, 1) rounded to d (malloc'ed). */
static float *rand_vals(tu_rng *r, rumus_dtype d, size_t n) {
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(r, x, n, -1.0f, 1.0f);
  tu_round_to(d, x, n);
  return x;
}

static void name_of(char *buf, size_t len, const char *op, rumus_dtype d,
                    int v, int nd, const size_t *s) {
  int k = snprintf(buf, len, "%s_%s_%s_", op, tu_dtype_name(d),
                   tu_variant_name(tu_variants[v]));
  for (int i = 0; i < nd && k > 0 && (size_t)k < len; i++)
    k += snprintf(buf + k, len - (size_t)k, "%zu%s", s[i],
                  i + 1 < nd ? "x" : "");
}

/* ---- permute ------------------------------------------------------------ */

/* permute(x of shape, perm) on both variants, exact against the reference;
 * x and y at element offset `odd`. */
static void run_permute(rumus_ctx *ctx, tu_rng *r, rumus_dtype d, int nd,
                        const size_t *shape, const int *perm, int odd) {
  const size_t n = numel(nd, shape);
  size_t ys[8];
  for (int i = 0; i < nd; i++) ys[i] = shape[perm[i]];
  float *x = rand_vals(r, d, n);
  double *want = tu_malloc(n * sizeof *want);
  ref_permute(x, nd, shape, perm, want);
  tu_guarded tx = guarded(ctx, d, nd, shape, x, odd);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded ty = guarded(ctx, d, nd, ys, NULL, odd);
    TU_OK(ctx, rumus_permute(ctx, tx.t, perm, ty.t));
    float *got = tu_download_f32(ctx, ty.t);
    char name[128];
    name_of(name, sizeof name, "permute", d, v, nd, shape);
    tu_check_close(name, got, want, n, 0.0, 0.0);
    free(got);
    tu_guarded_check_free(ctx, &ty);
  }
  tu_guarded_check_free(ctx, &tx);
  free(x);
  free(want);
}

/* Next permutation of p[0 .. n) in lexicographic order; 0 after the last. */
static int next_perm(int *p, int n) {
  int i = n - 2;
  while (i >= 0 && p[i] >= p[i + 1]) i--;
  if (i < 0) return 0;
  int j = n - 1;
  while (p[j] <= p[i]) j--;
  int t = p[i];
  p[i] = p[j];
  p[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) {
    t = p[a];
    p[a] = p[b];
    p[b] = t;
  }
  return 1;
}

/* Every permutation of [7, 5, 3] and [2, 3, 5, 7] (and of [3, 1, 7] and
 * [4, 1, 1, 6], where extents of 1 move), storage _i. */
START_TEST(permute_every_permutation) {
  const rumus_dtype d = tu_dtypes[_i];
  static const size_t S3[2][3] = {{7, 5, 3}, {3, 1, 7}};
  static const size_t S4[2][4] = {{2, 3, 5, 7}, {4, 1, 1, 6}};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 11 + (uint64_t)_i);
  for (int s = 0; s < 2; s++) {
    int p[4] = {0, 1, 2, 3}, k = 0;
    do run_permute(ctx, &r, d, 3, S3[s], p, k++ % 2); while (next_perm(p, 3));
    int q[4] = {0, 1, 2, 3};
    do run_permute(ctx, &r, d, 4, S4[s], q, k++ % 2); while (next_perm(q, 4));
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* 1 to 8 dimensions (extents 1, 2, 7, 129), the head split and merge,
 * transposes of several tiles and bands of tiles, 0-D and 1 x 1;
 * storage _i. */
START_TEST(permute_shapes) {
  const rumus_dtype d = tu_dtypes[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 21 + (uint64_t)_i);
  static const size_t EXT[] = {1, 2, 7, 129, 3, 1, 2, 2};
  for (int nd = 1; nd <= 8; nd++) {
    size_t s[8];
    int p[8];
    for (int i = 0; i < nd; i++) {
      s[i] = EXT[(i + (size_t)nd) % 8];
      p[i] = nd - 1 - i; /* reversed */
    }
    if (nd > 5) s[0] = 1;
    run_permute(ctx, &r, d, nd, s, p, nd % 2);
    for (int i = 0; i + 1 < nd; i += 2) { /* neighbours swapped */
      p[i] = i + 1;
      p[i + 1] = i;
    }
    if (nd % 2) p[nd - 1] = nd - 1;
    run_permute(ctx, &r, d, nd, s, p, 0);
  }
  const size_t head[4] = {2, 129, 3, 16}, merged[4] = {2, 3, 129, 16};
  const int split[4] = {0, 2, 1, 3};
  run_permute(ctx, &r, d, 4, head, split, 0); /* [B, T, H, D] -> [B, H, T, D] */
  run_permute(ctx, &r, d, 4, merged, split, 1);
  const size_t head7[4] = {3, 7, 5, 7};
  run_permute(ctx, &r, d, 4, head7, split, 1);
  const int tr[2] = {1, 0}, tr3[3] = {0, 2, 1};
  const size_t t1[2] = {129, 67}, t2[2] = {64, 96}, t3[2] = {1, 1},
               t4[3] = {3, 33, 65}, t5[3] = {2, 37, 545};
  run_permute(ctx, &r, d, 2, t1, tr, 0);
  run_permute(ctx, &r, d, 2, t2, tr, 0);
  run_permute(ctx, &r, d, 2, t3, tr, 1);
  run_permute(ctx, &r, d, 3, t4, tr3, 1);
  /* 18 columns of tiles on the CPU variant: a band of 16 and one of 2,
   * in each of two planes. */
  run_permute(ctx, &r, d, 3, t5, tr3, 0);
  run_permute(ctx, &r, d, 0, t3, tr, 0); /* a scalar */
  tu_free_all(ctx, NULL);
}
END_TEST

/* The stored bits move unchanged: signalling NaNs with payloads,
 * infinities, -0 and subnormals, every storage type, both variants, a
 * head split (rows) and a transpose (tiles). */
START_TEST(permute_moves_bits) {
  static const uint32_t W32[] = {0x7F800001u, 0xFFC00123u, 0x80000000u,
                                 0x00000001u, 0x7F800000u, 0x3F800000u};
  static const uint16_t W16[] = {0x7C01u, 0xFE37u, 0x8000u,
                                 0x0001u, 0x7F81u, 0x3C00u};
  const rumus_dtype d = tu_dtypes[_i];
  const size_t es = rumus_dtype_size(d), s[4] = {2, 5, 3, 7};
  const size_t n = numel(4, s);
  unsigned char *x = tu_malloc(n * es), *got = tu_malloc(n * es),
                *want = tu_malloc(n * es);
  for (size_t i = 0; i < n; i++) {
    if (es == 4) memcpy(x + 4 * i, &W32[i % 6], 4);
    else memcpy(x + 2 * i, &W16[i % 6], 2);
  }
  static const int P[2][4] = {{0, 2, 1, 3}, {0, 1, 3, 2}};
  rumus_ctx *ctx = tu_ctx();
  rumus_tensor *tx = tu_tensor(ctx, d, 4, s, x);
  for (int k = 0; k < 2; k++) {
    size_t ys[4], c[4];
    for (int i = 0; i < 4; i++) ys[i] = s[P[k][i]];
    for (size_t i = 0; i < n; i++) { /* y[i] = x[j] */
      size_t r = i, j = 0, st[4] = {105, 21, 7, 1};
      for (int a = 3; a >= 0; a--) {
        c[a] = r % ys[a];
        r /= ys[a];
      }
      for (int a = 0; a < 4; a++) j += c[a] * st[P[k][a]];
      memcpy(want + i * es, x + j * es, es);
    }
    rumus_tensor *ty = tu_tensor(ctx, d, 4, ys, NULL);
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_permute(ctx, tx, P[k], ty));
      TU_OK(ctx, rumus_tensor_download(ty, got, n * es));
      ck_assert_msg(memcmp(got, want, n * es) == 0,
                    "permute %d of %s bits changed (%s)", k,
                    tu_dtype_name(d), tu_variant_name(tu_variants[v]));
    }
    rumus_tensor_free(ty);
  }
  free(x);
  free(got);
  free(want);
  tu_free_all(ctx, tx, NULL);
}
END_TEST

/* ---- broadcast ---------------------------------------------------------- */

/* out = a op b (op 0 add, 1 mul) on both variants against the reference;
 * out's shape is the broadcast of a's and b's (given). */
static void run_bcast(rumus_ctx *ctx, tu_rng *r, rumus_dtype d, int mul,
                      int na, const size_t *sa, int nb, const size_t *sb,
                      int no, const size_t *so, int odd) {
  const size_t n = numel(no, so), an = numel(na, sa), bn = numel(nb, sb);
  float *a = rand_vals(r, d, an), *b = rand_vals(r, d, bn);
  double *want = tu_malloc((n ? n : 1) * sizeof *want);
  ref_broadcast(mul, a, na, sa, b, nb, sb, no, so, want);
  tu_guarded ta = guarded(ctx, d, na, sa, a, odd),
             tb = guarded(ctx, d, nb, sb, b, 2 * odd);
  const double rtol = 1e-7 + tu_store_rtol(d), atol = tu_store_atol(d);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded to = guarded(ctx, d, no, so, NULL, odd);
    TU_OK(ctx, (mul ? rumus_broadcast_mul : rumus_broadcast_add)(ctx, ta.t,
                                                                 tb.t, to.t));
    float *got = tu_download_f32(ctx, to.t);
    char name[128];
    name_of(name, sizeof name, mul ? "broadcast_mul" : "broadcast_add", d, v,
            no, so);
    tu_check_close(name, got, want, n, atol, rtol);
    free(got);
    tu_guarded_check_free(ctx, &to);
  }
  tu_guarded_check_free(ctx, &ta);
  tu_guarded_check_free(ctx, &tb);
  free(a);
  free(b);
  free(want);
}

/* The shape of pattern (k, mask) against full[0 .. nd): the last k
 * dimensions, those in mask of extent 1. */
static int pattern(int nd, const size_t *full, int k, unsigned mask,
                   size_t *s) {
  for (int i = 0; i < k; i++)
    s[i] = (mask >> i & 1u) ? 1 : full[nd - k + i];
  return k;
}

/* Every pair of patterns against [3, 5, 7]: each operand 0 to 3
 * dimensions, any of them 1 (scalars, rows, columns, planes ...);
 * storage _i, add and mul. */
START_TEST(broadcast_every_pattern) {
  const rumus_dtype d = tu_dtypes[_i];
  static const size_t FULL[3] = {3, 5, 7};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 31 + (uint64_t)_i);
  int c = 0;
  for (int ka = 0; ka <= 3; ka++)
    for (unsigned ma = 0; ma < 1u << ka; ma++)
      for (int kb = 0; kb <= 3; kb++)
        for (unsigned mb = 0; mb < 1u << kb; mb++) {
          size_t sa[3], sb[3], so[3];
          pattern(3, FULL, ka, ma, sa);
          pattern(3, FULL, kb, mb, sb);
          const int no = ka > kb ? ka : kb;
          for (int i = 0; i < no; i++) {
            const int ia = i - (no - ka), ib = i - (no - kb);
            const size_t ea = ia < 0 ? 1 : sa[ia], eb = ib < 0 ? 1 : sb[ib];
            so[i] = ea == 1 ? eb : ea;
          }
          run_bcast(ctx, &r, d, c % 2, ka, sa, kb, sb, no, so, c % 3 == 1);
          c++;
        }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Every pair of 4-D patterns against [2, 3, 5, 7], add, F32. */
START_TEST(broadcast_4d_patterns) {
  static const size_t FULL[4] = {2, 3, 5, 7};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 41);
  for (unsigned ma = 0; ma < 16; ma++)
    for (unsigned mb = 0; mb < 16; mb++) {
      size_t sa[4], sb[4], so[4];
      pattern(4, FULL, 4, ma, sa);
      pattern(4, FULL, 4, mb, sb);
      for (int i = 0; i < 4; i++) so[i] = (ma & mb) >> i & 1u ? 1 : FULL[i];
      run_bcast(ctx, &r, RUMUS_F32, 0, 4, sa, 4, sb, 4, so, (ma + mb) % 2);
    }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Bias-like rows (long and aligned: the vector path), a scalar against a
 * long tensor, columns, 8 dimensions; storage _i. */
START_TEST(broadcast_shapes) {
  const rumus_dtype d = tu_dtypes[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 51 + (uint64_t)_i);
  const size_t x2[2] = {129, 1000}, b1[1] = {1000}, c2[2] = {129, 1},
               s0[1] = {1};
  for (int odd = 0; odd < 2; odd++) {
    run_bcast(ctx, &r, d, 0, 2, x2, 1, b1, 2, x2, odd);
    run_bcast(ctx, &r, d, 1, 1, b1, 2, x2, 2, x2, odd);
    run_bcast(ctx, &r, d, 0, 2, x2, 0, s0, 2, x2, odd);
    run_bcast(ctx, &r, d, 1, 2, c2, 2, x2, 2, x2, odd);
    run_bcast(ctx, &r, d, 0, 2, c2, 1, b1, 2, x2, odd);
  }
  const size_t e8[8] = {2, 1, 3, 2, 1, 7, 2, 3},
               f8[8] = {2, 5, 3, 1, 4, 7, 1, 3},
               o8[8] = {2, 5, 3, 2, 4, 7, 2, 3};
  run_bcast(ctx, &r, d, 0, 8, e8, 8, f8, 8, o8, 1);
  const size_t one[2] = {1, 1};
  run_bcast(ctx, &r, d, 1, 2, one, 0, s0, 2, one, 1);
  tu_free_all(ctx, NULL);
}
END_TEST

/* In place: out is a (same bytes), b broadcast. */
START_TEST(broadcast_in_place) {
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 61);
  const size_t sa[3] = {4, 33, 129}, sb[2] = {33, 1};
  const size_t n = numel(3, sa);
  float *a = rand_vals(&r, RUMUS_F32, n), *b = rand_vals(&r, RUMUS_F32, 33);
  double *want = tu_malloc(n * sizeof *want);
  ref_broadcast(0, a, 3, sa, b, 2, sb, 3, sa, want);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded ta = guarded(ctx, RUMUS_F32, 3, sa, a, 1);
    rumus_tensor *tb = tu_tensor_typed(ctx, RUMUS_F32, 2, sb, b);
    TU_OK(ctx, rumus_broadcast_add(ctx, ta.t, tb, ta.t));
    float *got = tu_download_f32(ctx, ta.t);
    tu_check_close("broadcast_add_in_place", got, want, n, 0.0, 1e-7);
    free(got);
    rumus_tensor_free(tb);
    tu_guarded_check_free(ctx, &ta);
  }
  free(a);
  free(b);
  free(want);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- reduce_sum --------------------------------------------------------- */

/* reduce_sum(x, axes, keepdim) into y of type yd, both variants. */
static void run_reduce(rumus_ctx *ctx, const float *x, rumus_dtype d,
                       rumus_dtype yd, int nd, const size_t *s, unsigned axes,
                       int keepdim, int odd) {
  size_t ys[8], yk[8];
  int ny = 0;
  size_t R = 1;
  for (int i = 0; i < nd; i++) {
    yk[i] = (axes >> i & 1u) ? 1 : s[i];
    if (axes >> i & 1u) R *= s[i];
    if (!(axes >> i & 1u) || keepdim) ys[ny++] = yk[i];
  }
  const size_t n = numel(nd, s), m = numel(nd, yk);
  double *want = tu_malloc((m ? m : 1) * sizeof *want), mx = 0.0;
  ref_reduce_sum(x, nd, s, axes, want);
  for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(x[i]));
  const double atol = 0x1p-22 * (double)R * mx + tu_store_atol(yd);
  const double rtol = tu_store_rtol(yd);
  tu_guarded tx = guarded(ctx, d, nd, s, x, odd);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    tu_guarded ty = guarded(ctx, yd, ny, ys, NULL, 1 - odd);
    TU_OK(ctx, rumus_reduce_sum(ctx, tx.t, axes, keepdim, ty.t));
    float *got = tu_download_f32(ctx, ty.t);
    char name[160], full[200];
    name_of(name, sizeof name, "reduce_sum", d, v, nd, s);
    snprintf(full, sizeof full, "%s_axes%x_keep%d_y%s", name, axes, keepdim,
             tu_dtype_name(yd));
    tu_check_close(full, got, want, m, atol, rtol);
    free(got);
    tu_guarded_check_free(ctx, &ty);
  }
  tu_guarded_check_free(ctx, &tx);
  free(want);
}

/* Every subset of the axes of [3, 5, 7, 6] and [2, 129, 1, 7], keepdim
 * or not; y of x's type (storage _i), and F32 for 16-bit x. */
START_TEST(reduce_every_subset) {
  const rumus_dtype d = tu_dtypes[_i];
  static const size_t S[2][4] = {{3, 5, 7, 6}, {2, 129, 1, 7}};
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 71 + (uint64_t)_i);
  for (int s = 0; s < 2; s++) {
    const size_t n = numel(4, S[s]);
    float *x = rand_vals(&r, d, n);
    for (unsigned axes = 0; axes < 16; axes++) {
      run_reduce(ctx, x, d, d, 4, S[s], axes, (int)(axes + s) % 2, axes % 2);
      if (d != RUMUS_F32)
        run_reduce(ctx, x, d, RUMUS_F32, 4, S[s], axes, 1, 0);
    }
    free(x);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Long sums (the work-group kernels: many terms per work-item; sums cut
 * into chunks when y is too small to fill the device), long kept rows, 1
 * to 8 dimensions, a 0-D x; storage _i. */
START_TEST(reduce_shapes) {
  const rumus_dtype d = tu_dtypes[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 81 + (uint64_t)_i);
  static const struct {
    int nd;
    size_t s[8];
    unsigned axes;
  } C[] = {{2, {3, 5000}, 2},        {2, {5000, 5}, 1},
           {2, {1000, 129}, 1},      {3, {7, 1000, 3}, 2},
           {3, {129, 7, 129}, 5},    {1, {20000}, 1},
           {4, {2, 3, 700, 1}, 0xD}, {8, {2, 1, 3, 2, 5, 1, 2, 7}, 0x55},
           {8, {2, 1, 3, 2, 5, 1, 2, 7}, 0xAA}, {0, {1}, 0},
           {1, {100003}, 1},         {2, {40000, 3}, 1},
           {3, {2, 50001, 9}, 2},    {3, {129, 300, 2}, 5},
           /* rows of one run, several per work-group (GPU rs_sub_inner:
            * 16, 64 and 256 lanes a row, the last group short) */
           {2, {1000, 129}, 2},      {3, {5, 33, 1000}, 4},
           {2, {70, 4096}, 2}};
  for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
    const size_t n = numel(C[c].nd, C[c].s);
    float *x = rand_vals(&r, d, n);
    run_reduce(ctx, x, d, d, C[c].nd, C[c].s, C[c].axes, (int)c % 2,
               (int)c % 2);
    free(x);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Each variant gives the same bits on a second run: over the leading
 * axes and over the last (rows of 1500 elements). */
START_TEST(reduce_deterministic) {
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 91);
  const size_t s[3] = {37, 1500, 9}, ys[1] = {9}, s2[2] = {37 * 9, 1500},
               ys2[1] = {37 * 9};
  float *x = rand_vals(&r, RUMUS_F32, numel(3, s));
  rumus_tensor *tx = tu_tensor_typed(ctx, RUMUS_F32, 3, s, x),
               *ty = tu_tensor_typed(ctx, RUMUS_F32, 1, ys, NULL),
               *tx2 = tu_tensor_typed(ctx, RUMUS_F32, 2, s2, x),
               *ty2 = tu_tensor_typed(ctx, RUMUS_F32, 1, ys2, NULL);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float a[9], b[9], a2[37 * 9], b2[37 * 9];
    TU_OK(ctx, rumus_reduce_sum(ctx, tx, 3u, 0, ty));
    TU_OK(ctx, rumus_tensor_download(ty, a, sizeof a));
    TU_OK(ctx, rumus_reduce_sum(ctx, tx, 3u, 0, ty));
    TU_OK(ctx, rumus_tensor_download(ty, b, sizeof b));
    ck_assert_mem_eq(a, b, sizeof a);
    TU_OK(ctx, rumus_reduce_sum(ctx, tx2, 2u, 0, ty2));
    TU_OK(ctx, rumus_tensor_download(ty2, a2, sizeof a2));
    TU_OK(ctx, rumus_reduce_sum(ctx, tx2, 2u, 0, ty2));
    TU_OK(ctx, rumus_tensor_download(ty2, b2, sizeof b2));
    ck_assert_mem_eq(a2, b2, sizeof a2);
  }
  free(x);
  tu_free_all(ctx, tx, ty, tx2, ty2, NULL);
}
END_TEST

/* ---- reduce_sum as the backward of broadcast_add ------------------------ */

/* L(a, b) = sum w * broadcast_add(a, b) in float64; dL/db = the sum of w
 * over b's broadcast axes (rumus_reduce_sum on the device), checked
 * against central differences of L in b, and likewise for a. */
static double loss(const float *a, int na, const size_t *sa, const float *b,
                   int nb, const size_t *sb, int no, const size_t *so,
                   const float *w, double *tmp) {
  ref_broadcast(0, a, na, sa, b, nb, sb, no, so, tmp);
  double l = 0.0;
  for (size_t i = 0; i < numel(no, so); i++) l += w[i] * tmp[i];
  return l;
}

/* The gradient of operand t (0: a, 1: b) by the device and by FD. */
static void fd_operand(rumus_ctx *ctx, int t, float *a, int na,
                       const size_t *sa, float *b, int nb, const size_t *sb,
                       int no, const size_t *so, const float *w,
                       rumus_tensor *tw) {
  const int nt = t ? nb : na;
  const size_t *st = t ? sb : sa;
  float *p = t ? b : a;
  unsigned axes = 0;
  size_t R = 1;
  for (int i = 0; i < no; i++) {
    const int k = i - (no - nt);
    if (k < 0 || st[k] != so[i]) {
      axes |= 1u << i;
      R *= so[i];
    }
  }
  /* dL/dp has p's extents aligned right: y keepdim over out's axes, then
   * reshaped to p's nt dimensions. */
  size_t yk[8] = {0};
  for (int i = 0; i < no; i++) yk[i] = (axes >> i & 1u) ? 1 : so[i];
  const size_t m = numel(nt, st);
  rumus_tensor *tg = tu_tensor_typed(ctx, RUMUS_F32, no, yk, NULL);
  double *tmp = tu_malloc(numel(no, so) * sizeof *tmp);
  double *fd = tu_malloc(m * sizeof *fd);
  const double h = 1e-3;
  for (size_t i = 0; i < m; i++) {
    const float p0 = p[i];
    p[i] = (float)(p0 + h);
    const double lp = loss(a, na, sa, b, nb, sb, no, so, w, tmp);
    p[i] = (float)(p0 - h);
    const double lm = loss(a, na, sa, b, nb, sb, no, so, w, tmp);
    p[i] = p0;
    fd[i] = (lp - lm) / ((double)(float)(p0 + h) - (double)(float)(p0 - h));
  }
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_reduce_sum(ctx, tw, axes, 1, tg));
    float *got = tu_download_f32(ctx, tg);
    char name[64];
    snprintf(name, sizeof name, "%s_%s_axes%x", t ? "fd_db" : "fd_da",
             tu_variant_name(tu_variants[v]), axes);
    tu_check_close(name, got, fd, m, 1e-6 * (double)R, 1e-6);
    free(got);
  }
  free(tmp);
  free(fd);
  rumus_tensor_free(tg);
}

START_TEST(reduce_is_broadcast_backward) {
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 101);
  static const struct {
    int na, nb, no;
    size_t sa[4], sb[4], so[4];
  } C[] = {{4, 4, 4, {3, 5, 4, 7}, {1, 5, 1, 7}, {3, 5, 4, 7}},
           {2, 1, 2, {7, 9}, {9}, {7, 9}},
           {3, 0, 3, {2, 3, 5}, {1}, {2, 3, 5}},
           {4, 3, 4, {3, 1, 4, 1}, {5, 1, 7}, {3, 5, 4, 7}}};
  for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
    const int ndo = C[c].no;
    float *a = rand_vals(&r, RUMUS_F32, numel(C[c].na, C[c].sa));
    float *b = rand_vals(&r, RUMUS_F32, numel(C[c].nb, C[c].sb));
    float *w = rand_vals(&r, RUMUS_F32, numel(ndo, C[c].so));
    rumus_tensor *tw = tu_tensor_typed(ctx, RUMUS_F32, ndo, C[c].so, w);
    fd_operand(ctx, 0, a, C[c].na, C[c].sa, b, C[c].nb, C[c].sb, ndo,
               C[c].so, w, tw);
    fd_operand(ctx, 1, a, C[c].na, C[c].sa, b, C[c].nb, C[c].sb, ndo,
               C[c].so, w, tw);
    rumus_tensor_free(tw);
    free(a);
    free(b);
    free(w);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- limits ------------------------------------------------------------- */

/* Empty tensors: nothing to do, except a sum over an empty axis (0). */
START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t e[2] = {0, 5}, et[2] = {5, 0}, y1[1] = {5};
  const int tr[2] = {1, 0};
  rumus_tensor *x = tu_tensor_typed(ctx, RUMUS_F32, 2, e, NULL),
               *xt = tu_tensor_typed(ctx, RUMUS_F32, 2, et, NULL),
               *y = tu_tensor_typed(ctx, RUMUS_F32, 1, y1, NULL);
  TU_OK(ctx, rumus_permute(ctx, x, tr, xt));
  TU_OK(ctx, rumus_broadcast_add(ctx, x, y, x));
  TU_OK(ctx, rumus_tensor_fill(y, 3.0f));
  TU_OK(ctx, rumus_reduce_sum(ctx, x, 1u, 0, y));
  float got[5];
  TU_OK(ctx, rumus_tensor_download(y, got, sizeof got));
  for (int i = 0; i < 5; i++) ck_assert_float_eq(got[i], 0.0f);
  tu_free_all(ctx, x, xt, y, NULL);
}
END_TEST

/* ---- errors ------------------------------------------------------------- */

START_TEST(errors_permute) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s[3] = {2, 3, 4}, p[3] = {4, 2, 3}, bad[3] = {4, 3, 2};
  rumus_tensor *x = tu_tensor_typed(ctx, RUMUS_F32, 3, s, NULL),
               *y = tu_tensor_typed(ctx, RUMUS_F32, 3, p, NULL),
               *yb = tu_tensor_typed(ctx, RUMUS_F32, 3, bad, NULL),
               *yh = tu_tensor_typed(ctx, RUMUS_F16, 3, p, NULL),
               *y2 = tu_tensor_typed(ctx, RUMUS_F32, 2, p, NULL),
               *xi = tu_tensor(ctx, RUMUS_I32, 3, s, NULL);
  const int ok[3] = {2, 0, 1}, rep[3] = {2, 0, 0}, out[3] = {2, 0, 3},
            neg[3] = {-1, 0, 1};
  TU_OK(ctx, rumus_permute(ctx, x, ok, y));
  TU_STATUS(RUMUS_ENULL, rumus_permute(NULL, x, ok, y));
  TU_STATUS(RUMUS_ENULL, rumus_permute(ctx, NULL, ok, y));
  TU_STATUS(RUMUS_ENULL, rumus_permute(ctx, x, NULL, y));
  TU_STATUS(RUMUS_ENULL, rumus_permute(ctx, x, ok, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_permute(ctx, x, rep, y));
  ck_assert_ptr_nonnull(strstr(rumus_ctx_errmsg(ctx), "perm[2]"));
  TU_STATUS(RUMUS_EINVAL, rumus_permute(ctx, x, out, y));
  TU_STATUS(RUMUS_EINVAL, rumus_permute(ctx, x, neg, y));
  TU_STATUS(RUMUS_ESHAPE, rumus_permute(ctx, x, ok, yb));
  ck_assert_ptr_nonnull(strstr(rumus_ctx_errmsg(ctx), "axis 0"));
  TU_STATUS(RUMUS_ESHAPE, rumus_permute(ctx, x, ok, y2));
  TU_STATUS(RUMUS_EDTYPE, rumus_permute(ctx, x, ok, yh));
  TU_STATUS(RUMUS_EDTYPE, rumus_permute(ctx, xi, ok, y));
  const int id[3] = {0, 1, 2};
  TU_STATUS(RUMUS_EINVAL, rumus_permute(ctx, x, id, x)); /* overlap */
  tu_free_all(ctx, x, y, yb, yh, y2, xi, NULL);
}
END_TEST

START_TEST(errors_broadcast) {
  rumus_ctx *ctx = tu_ctx();
  const size_t sa[3] = {2, 3, 4}, sb[2] = {3, 1}, sc[1] = {5}, so[2] = {3, 4};
  rumus_tensor *a = tu_tensor_typed(ctx, RUMUS_F32, 3, sa, NULL),
               *b = tu_tensor_typed(ctx, RUMUS_F32, 2, sb, NULL),
               *c = tu_tensor_typed(ctx, RUMUS_F32, 1, sc, NULL),
               *o = tu_tensor_typed(ctx, RUMUS_F32, 3, sa, NULL),
               *o2 = tu_tensor_typed(ctx, RUMUS_F32, 2, so, NULL),
               *ob = tu_tensor_typed(ctx, RUMUS_BF16, 3, sa, NULL);
  TU_OK(ctx, rumus_tensor_fill(a, 1.0f));
  TU_OK(ctx, rumus_tensor_fill(b, 1.0f));
  TU_OK(ctx, rumus_broadcast_add(ctx, a, b, o));
  TU_OK(ctx, rumus_broadcast_mul(ctx, b, a, o));
  TU_STATUS(RUMUS_ENULL, rumus_broadcast_add(NULL, a, b, o));
  TU_STATUS(RUMUS_ENULL, rumus_broadcast_add(ctx, a, NULL, o));
  TU_STATUS(RUMUS_ENULL, rumus_broadcast_mul(ctx, a, b, NULL));
  TU_STATUS(RUMUS_ESHAPE, rumus_broadcast_add(ctx, a, c, o));
  ck_assert_ptr_nonnull(strstr(rumus_ctx_errmsg(ctx), "axis 2"));
  TU_STATUS(RUMUS_ESHAPE, rumus_broadcast_add(ctx, a, b, o2));
  TU_STATUS(RUMUS_ESHAPE, rumus_broadcast_add(ctx, b, c, o2));
  TU_STATUS(RUMUS_EDTYPE, rumus_broadcast_add(ctx, a, b, ob));
  TU_STATUS(RUMUS_EDTYPE, rumus_broadcast_add(ctx, ob, b, o));
  TU_OK(ctx, rumus_broadcast_add(ctx, b, o2, o2)); /* out is b's bytes */
  tu_free_all(ctx, a, b, c, o, o2, ob, NULL);
}
END_TEST

START_TEST(errors_reduce) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s[3] = {2, 3, 4}, k[3] = {2, 1, 4}, r[2] = {2, 4},
               bad[2] = {2, 3};
  rumus_tensor *x = tu_tensor_typed(ctx, RUMUS_F32, 3, s, NULL),
               *yk = tu_tensor_typed(ctx, RUMUS_F32, 3, k, NULL),
               *yr = tu_tensor_typed(ctx, RUMUS_F32, 2, r, NULL),
               *yb = tu_tensor_typed(ctx, RUMUS_F32, 2, bad, NULL),
               *yh = tu_tensor_typed(ctx, RUMUS_F16, 2, r, NULL),
               *xh = tu_tensor_typed(ctx, RUMUS_F16, 3, s, NULL),
               *yi = tu_tensor(ctx, RUMUS_I32, 2, r, NULL);
  TU_OK(ctx, rumus_tensor_fill(x, 1.0f));
  TU_OK(ctx, rumus_tensor_fill(xh, 1.0f));
  TU_OK(ctx, rumus_reduce_sum(ctx, x, 2u, 1, yk));
  TU_OK(ctx, rumus_reduce_sum(ctx, x, 2u, 0, yr));
  TU_OK(ctx, rumus_reduce_sum(ctx, xh, 2u, 0, yr)); /* f32 y of f16 x */
  TU_STATUS(RUMUS_ENULL, rumus_reduce_sum(NULL, x, 2u, 0, yr));
  TU_STATUS(RUMUS_ENULL, rumus_reduce_sum(ctx, NULL, 2u, 0, yr));
  TU_STATUS(RUMUS_ENULL, rumus_reduce_sum(ctx, x, 2u, 0, NULL));
  TU_STATUS(RUMUS_EINVAL, rumus_reduce_sum(ctx, x, 8u, 0, yr));
  ck_assert_ptr_nonnull(strstr(rumus_ctx_errmsg(ctx), "bit 3"));
  TU_STATUS(RUMUS_ESHAPE, rumus_reduce_sum(ctx, x, 2u, 1, yr));
  TU_STATUS(RUMUS_ESHAPE, rumus_reduce_sum(ctx, x, 2u, 0, yb));
  ck_assert_ptr_nonnull(strstr(rumus_ctx_errmsg(ctx), "axis 1"));
  TU_STATUS(RUMUS_EDTYPE, rumus_reduce_sum(ctx, x, 2u, 0, yh));
  TU_STATUS(RUMUS_EDTYPE, rumus_reduce_sum(ctx, x, 2u, 0, yi));
  TU_STATUS(RUMUS_EINVAL, rumus_reduce_sum(ctx, x, 0u, 0, x)); /* overlap */
  float got[8];
  TU_OK(ctx, rumus_tensor_download(yr, got, sizeof got));
  for (int i = 0; i < 8; i++) ck_assert_float_eq(got[i], 3.0f);
  tu_free_all(ctx, x, yk, yr, yb, yh, xh, yi, NULL);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("tensorops");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, permute_every_permutation, 0, 3);
  tcase_add_loop_test(core, broadcast_every_pattern, 0, 3);
  tcase_add_test(core, broadcast_4d_patterns);
  tcase_add_loop_test(core, reduce_every_subset, 0, 3);
  tcase_add_test(core, reduce_is_broadcast_backward);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_loop_test(limits, permute_shapes, 0, 3);
  tcase_add_loop_test(limits, permute_moves_bits, 0, 3);
  tcase_add_loop_test(limits, broadcast_shapes, 0, 3);
  tcase_add_test(limits, broadcast_in_place);
  tcase_add_loop_test(limits, reduce_shapes, 0, 3);
  tcase_add_test(limits, reduce_deterministic);
  tcase_add_test(limits, empty_tensors);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, errors_permute);
  tcase_add_test(errors, errors_broadcast);
  tcase_add_test(errors, errors_reduce);
  suite_add_tcase(s, errors);
  return s;
}

int main(void) { return tu_run(suite()); }
