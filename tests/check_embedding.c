/*
 * check_embedding.c - the embedding lookup and its weight gradient against
 * the float64 reference (ref/embedding.c, a scatter-add in position
 * order), with every storage type (dweight in dout's type and in F32) on
 * both variants, over dims 1, 3, 64 and 129; ids random, one id repeated
 * 5000 times among random ones, all ids equal, padding_idx, bad ids; ids
 * of several shapes (0-D to 3-D); tensors in guarded buffers and at odd
 * element offsets and at 16-byte aligned nonzero offsets; tables of 70000
 * rows (three radix passes); 300000 ids (the GPU variant's scan over more
 * than 256 chunks).
 *
 * Tolerances:
 *   forward   exact: elements are copied (out-of-range ids give 0);
 *   backward  each element is a float sum of its row's c dout values in
 *             some fixed order (the reference adds in float64), so
 *             |got - want| <= 1.01 c 2^-24 sum |dout| (the worst case of
 *             any summation order, gamma_{c-1}, with room for its
 *             second-order term), plus half an ulp of dweight's type
 *             (tests/tu_dtype.h: F16 2^-11 relative + 2^-25, BF16 2^-8);
 *             rows no id names are exactly 0;
 *   finite differences of L(w) = sum dout * forward(w) (h = 1e-2; L is
 *             linear in w, so the differences are exact in float64 up to
 *             1e-15): through the float64 reference forward, atol 1e-6,
 *             rtol 1e-6 (the device's float sums of up to 20 values);
 *             through the device's F32 forward on sampled entries, atol
 *             1e-3 (the step 2h as rounded in float).
 * The variants must give the same bits, and two runs the same bits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

static const size_t DIMS[4] = {1, 3, 64, 129};

/* ids kinds of the backward cases. */
enum { IDS_RANDOM, IDS_SKEWED, IDS_EQUAL, N_KINDS };

/* n ids in [0, rows) of a kind (malloc'ed): SKEWED puts id 5 % rows at
 * 5000 random positions of n, EQUAL makes every id 2 % rows. */
static int32_t *make_ids(tu_rng *r, int kind, size_t n, size_t rows) {
  int32_t *ids = tu_malloc(n * sizeof *ids);
  for (size_t p = 0; p < n; p++)
    ids[p] = kind == IDS_EQUAL ? (int32_t)(2 % rows)
                               : (int32_t)(tu_rand_u32(r) % rows);
  if (kind == IDS_SKEWED)
    for (size_t k = 0; k < 5000 && k < n; k++)
      ids[tu_rand_u32(r) % n] = (int32_t)(5 % rows);
  return ids;
}

/* n uniform values in [lo, hi) rounded to d (malloc'ed). */
static float *rand_typed(tu_rng *r, rumus_dtype d, size_t n, float lo,
                         float hi) {
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(r, x, n, lo, hi);
  tu_round_to(d, x, n);
  return x;
}

/* The raw bytes of a tensor (malloc'ed). */
static void *download_raw(rumus_ctx *ctx, const rumus_tensor *t) {
  const size_t bytes =
      rumus_tensor_numel(t) * rumus_dtype_size(rumus_tensor_dtype(t));
  void *b = tu_malloc(bytes);
  TU_OK(ctx, rumus_tensor_download(t, b, bytes));
  return b;
}

/* Asserts dweight (downloaded as floats) against the reference within the
 * backward's bound for storage gd. */
static void check_bwd_result(const char *what, const float *got,
                             const float *dy, const int32_t *ids, size_t n,
                             size_t rows, size_t dim, int32_t pad,
                             rumus_dtype gd) {
  const size_t m = rows * dim;
  double *want = tu_malloc(m * sizeof *want),
         *abs = tu_malloc(m * sizeof *abs),
         *bound = tu_malloc(m * sizeof *bound);
  size_t *cnt = tu_malloc(rows * sizeof *cnt);
  ref_embedding_bwd(dy, ids, n, rows, dim, pad, want, abs, cnt);
  for (size_t i = 0; i < m; i++)
    bound[i] = 1.01 * (double)cnt[i / dim] * 0x1p-24 * abs[i] +
               tu_store_rtol(gd) * fabs(want[i]) + tu_store_atol(gd);
  tu_check_bound(what, got, want, bound, m);
  free(want);
  free(abs);
  free(bound);
  free(cnt);
}

/* ---- core -------------------------------------------------------------- */

/* Forward, storage tu_dtypes[_i]: every dim, ids of shapes [], [11],
 * [2, 3, 5] with a padding_idx; exact; the variants' bytes equal. */
START_TEST(fwd_cases) {
  const rumus_dtype d = tu_dtypes[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 11 + (uint64_t)_i);
  const size_t ishapes[3][3] = {{0, 0, 0}, {11, 0, 0}, {2, 3, 5}};
  const int indims[3] = {0, 1, 3};
  for (size_t k = 0; k < 4; k++)
    for (size_t s = 0; s < 3; s++) {
      const size_t dim = DIMS[k], rows = 7 + 3 * k;
      size_t n = 1, oshape[4];
      for (int a = 0; a < indims[s]; a++) n *= (oshape[a] = ishapes[s][a]);
      oshape[indims[s]] = dim;
      float *w = rand_typed(&r, d, rows * dim, -2, 2);
      int32_t *ids = make_ids(&r, IDS_RANDOM, n, rows);
      const size_t ws[2] = {rows, dim};
      rumus_tensor *tw = tu_tensor_typed(ctx, d, 2, ws, w),
                   *ti = tu_tensor(ctx, RUMUS_I32, indims[s], ishapes[s], ids),
                   *to = tu_tensor_typed(ctx, d, indims[s] + 1, oshape, NULL);
      double *want = tu_malloc(n * dim * sizeof *want);
      ref_embedding_fwd(w, rows, dim, ids, n, want);
      void *bytes[2];
      for (int v = 0; v < 2; v++) {
        tu_set_variant(ctx, tu_variants[v]);
        TU_OK(ctx, rumus_embedding_fwd(ctx, tw, ti, (int)(rows / 2), to));
        TU_OK(ctx, rumus_ctx_sync(ctx));
        char what[96];
        snprintf(what, sizeof what, "fwd_%s_%s_dim%zu_ids%dd", tu_dtype_name(d),
                 tu_variant_name(tu_variants[v]), dim, indims[s]);
        float *got = tu_download_f32(ctx, to);
        tu_check_close(what, got, want, n * dim, 0, 0);
        free(got);
        bytes[v] = download_raw(ctx, to);
      }
      ck_assert(memcmp(bytes[0], bytes[1], n * dim * rumus_dtype_size(d)) == 0);
      free(bytes[0]);
      free(bytes[1]);
      free(w);
      free(ids);
      free(want);
      rumus_tensor_free(tw);
      rumus_tensor_free(ti);
      rumus_tensor_free(to);
    }
  tu_free_all(ctx, NULL);
}
END_TEST

/* One backward case: n ids of `kind` over rows, dout of type d, dweight
 * of type gd, padding_idx pad; both variants and a second run must give
 * the same bits. */
static void bwd_case(rumus_ctx *ctx, tu_rng *r, rumus_dtype d, rumus_dtype gd,
                     int kind, size_t n, size_t rows, size_t dim,
                     int32_t pad) {
  float *dy = rand_typed(r, d, n * dim, -1, 1);
  int32_t *ids = make_ids(r, kind, n, rows);
  const size_t ws[2] = {rows, dim}, is[1] = {n}, os[2] = {n, dim};
  rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 1, is, ids),
               *tdy = tu_tensor_typed(ctx, d, 2, os, dy),
               *tdw = tu_tensor_typed(ctx, gd, 2, ws, NULL);
  void *first = NULL;
  const size_t bytes = rows * dim * rumus_dtype_size(gd);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int run = 0; run < (v == 0 ? 2 : 1); run++) {
      TU_OK(ctx, rumus_tensor_fill(tdw, 7.0f)); /* overwritten */
      TU_OK(ctx, rumus_embedding_bwd(ctx, tdy, ti, pad, tdw));
      TU_OK(ctx, rumus_ctx_sync(ctx));
      void *raw = download_raw(ctx, tdw);
      if (first == NULL) {
        char what[128];
        snprintf(what, sizeof what,
                 "bwd_%s_to_%s_%s_kind%d_n%zu_rows%zu_dim%zu",
                 tu_dtype_name(d), tu_dtype_name(gd),
                 tu_variant_name(tu_variants[v]), kind, n, rows, dim);
        float *got = tu_download_f32(ctx, tdw);
        check_bwd_result(what, got, dy, ids, n, rows, dim, pad, gd);
        free(got);
        first = raw;
      } else {
        ck_assert_msg(memcmp(first, raw, bytes) == 0,
                      "bwd kind %d dim %zu: %s run %d differs", kind, dim,
                      tu_variant_name(tu_variants[v]), run);
        free(raw);
      }
    }
  }
  free(first);
  free(dy);
  free(ids);
  rumus_tensor_free(ti);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdw);
}

/* Backward, dout storage tu_dtypes[_i / 2], dweight that type (_i even) or
 * F32: every dim; random ids with padding_idx, 5000 repeats of one id
 * among random ones, all ids equal; rows of 517. */
START_TEST(bwd_cases) {
  const rumus_dtype d = tu_dtypes[_i / 2], gd = _i % 2 ? RUMUS_F32 : d;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 23 + (uint64_t)_i);
  for (size_t k = 0; k < 4; k++) {
    const size_t dim = DIMS[k];
    bwd_case(ctx, &r, d, gd, IDS_RANDOM, 700, 50, dim, 4);
    bwd_case(ctx, &r, d, gd, IDS_SKEWED, dim > 64 ? 6000 : 9000, 300, dim, -1);
    bwd_case(ctx, &r, d, gd, IDS_EQUAL, 600, 5, dim, -1);
  }
  /* Rows of 517: the CPU sums' second group of 8-column blocks (512
   * columns per work-item), its last block 5 wide; sorted scheme (rows
   * above the dense scheme's 128), repeats across tiles. */
  bwd_case(ctx, &r, d, gd, IDS_SKEWED, 900, 211, 517, 3);
  /* padding_idx that every id names: dweight all 0. */
  bwd_case(ctx, &r, d, gd, IDS_EQUAL, 40, 5, 3, 2);
  tu_free_all(ctx, NULL);
}
END_TEST

/* L(w) = sum dout * forward(w); its derivative in w[j] by central
 * differences against the device backward (F32, no padding_idx): through
 * the float64 reference forward for every entry, through the device
 * forward for a sample. */
START_TEST(bwd_finite_differences) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  tu_rng r;
  tu_rng_seed(&r, 41);
  enum { ROWS = 7, DIM = 3, N = 20 };
  float *w = rand_typed(&r, RUMUS_F32, ROWS * DIM, -2, 2),
        *dy = rand_typed(&r, RUMUS_F32, N * DIM, -1, 1);
  int32_t *ids = make_ids(&r, IDS_RANDOM, N, ROWS);
  const size_t ws[2] = {ROWS, DIM}, is[1] = {N}, os[2] = {N, DIM};
  rumus_tensor *tw = tu_tensor_typed(ctx, RUMUS_F32, 2, ws, w),
               *ti = tu_tensor(ctx, RUMUS_I32, 1, is, ids),
               *to = tu_tensor_typed(ctx, RUMUS_F32, 2, os, NULL),
               *tdy = tu_tensor_typed(ctx, RUMUS_F32, 2, os, dy),
               *tdw = tu_tensor_typed(ctx, RUMUS_F32, 2, ws, NULL);
  TU_OK(ctx, rumus_embedding_bwd(ctx, tdy, ti, -1, tdw));
  float *g = tu_download_f32(ctx, tdw);
  double num[ROWS * DIM], out[N * DIM];
  const float h = 1e-2f;
  for (size_t j = 0; j < ROWS * DIM; j++) {
    double l[2];
    for (int s = 0; s < 2; s++) {
      const float keep = w[j];
      w[j] = keep + (s ? -h : h);
      ref_embedding_fwd(w, ROWS, DIM, ids, N, out);
      l[s] = 0;
      for (size_t i = 0; i < N * DIM; i++) l[s] += dy[i] * out[i];
      w[j] = keep;
    }
    /* The step as stored in float: (w + h) - (w - h) exactly. */
    num[j] = (l[0] - l[1]) / ((double)(w[j] + h) - (double)(w[j] - h));
  }
  tu_check_close("fd_reference_forward", g, num, ROWS * DIM, 1e-6, 1e-6);
  const size_t sample[4] = {0, 5, 11, ROWS * DIM - 1};
  for (size_t k = 0; k < 4; k++) {
    const size_t j = sample[k];
    double l[2];
    for (int s = 0; s < 2; s++) {
      float *wp = tu_malloc(sizeof(float) * ROWS * DIM);
      memcpy(wp, w, sizeof(float) * ROWS * DIM);
      wp[j] += s ? -h : h;
      TU_OK(ctx, rumus_tensor_upload_f32(tw, wp, ROWS * DIM));
      TU_OK(ctx, rumus_embedding_fwd(ctx, tw, ti, -1, to));
      float *o = tu_download_f32(ctx, to);
      l[s] = 0;
      for (size_t i = 0; i < N * DIM; i++) l[s] += (double)dy[i] * o[i];
      free(o);
      free(wp);
    }
    const double fd = (l[0] - l[1]) / (2 * h);
    tu_check_close("fd_device_forward", &g[j], &fd, 1, 1e-3, 0);
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(w);
  free(dy);
  free(ids);
  free(g);
  tu_free_all(ctx, tw, ti, to, tdy, tdw, NULL);
}
END_TEST

/* ---- limits ------------------------------------------------------------ */

/* Both ops in borrowed buffers with guard bytes (4096 in), storage
 * tu_dtypes[_i]. */
START_TEST(guards_and_offsets) {
  const rumus_dtype d = tu_dtypes[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 53 + (uint64_t)_i);
  enum { ROWS = 9, DIM = 5, N = 300 };
  float *w = rand_typed(&r, d, ROWS * DIM, -2, 2),
        *dy = rand_typed(&r, d, N * DIM, -1, 1);
  int32_t *ids = make_ids(&r, IDS_SKEWED, N, ROWS);
  const size_t ws[2] = {ROWS, DIM}, is[1] = {N}, os[2] = {N, DIM};
  tu_guarded gw = tu_guarded_typed(ctx, d, 2, ws, w),
             gi = tu_guarded_tensor(ctx, RUMUS_I32, 1, is, ids),
             go = tu_guarded_typed(ctx, d, 2, os, NULL),
             gdy = tu_guarded_typed(ctx, d, 2, os, dy),
             gdw = tu_guarded_typed(ctx, d, 2, ws, NULL);
  double *want = tu_malloc(N * DIM * sizeof *want);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_embedding_fwd(ctx, gw.t, gi.t, 1, go.t));
    float *got = tu_download_f32(ctx, go.t);
    ref_embedding_fwd(w, ROWS, DIM, ids, N, want);
    tu_check_close("guarded_fwd", got, want, N * DIM, 0, 0);
    free(got);
    TU_OK(ctx, rumus_embedding_bwd(ctx, gdy.t, gi.t, 1, gdw.t));
    got = tu_download_f32(ctx, gdw.t);
    check_bwd_result("guarded_bwd", got, dy, ids, N, ROWS, DIM, 1, d);
    free(got);
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_guarded_check_free_all(ctx, &gw, &gi, &go, &gdy, &gdw, NULL);
  free(w);
  free(dy);
  free(ids);
  free(want);
  tu_free_all(ctx, NULL);
}
END_TEST

/* A tensor of type d, `nd` axes, wrapped `elem` elements into buf. */
static rumus_tensor *wrap_at(rumus_ctx *ctx, cl_mem buf, rumus_dtype d, int nd,
                             const size_t *shape, size_t elem) {
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, d, nd, shape, buf,
                               elem * rumus_dtype_size(d), &t));
  return t;
}

/* Tensors at odd element offsets of one buffer (weight at 3, ids at 101,
 * out at 203, dout at 811, dweight at 1413 elements of F32; 16-bit
 * tensors at 2 e + 1), storage
 * tu_dtypes[_i], dweight F32 for 16-bit dout; both variants. */
START_TEST(odd_offsets) {
  const rumus_dtype d = tu_dtypes[_i];
  enum { ROWS = 13, DIM = 7, N = 85 };
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              2048 * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  tu_rng r;
  tu_rng_seed(&r, 67 + (uint64_t)_i);
  float *w = rand_typed(&r, d, ROWS * DIM, -2, 2),
        *dy = rand_typed(&r, d, N * DIM, -1, 1);
  int32_t *ids = make_ids(&r, IDS_RANDOM, N, ROWS);
  const size_t ws[2] = {ROWS, DIM}, is[1] = {N}, os[2] = {N, DIM};
  /* 16-bit tensors at twice the element offsets plus 1 (odd, and the same
   * byte ranges as F32's, give or take 2 bytes). */
  const size_t k = rumus_dtype_size(d) == 2 ? 2 : 1;
  rumus_tensor *tw = wrap_at(ctx, buf, d, 2, ws, 3 * k + k - 1),
               *ti = wrap_at(ctx, buf, RUMUS_I32, 1, is, 101),
               *to = wrap_at(ctx, buf, d, 2, os, 203 * k + k - 1),
               *tdy = wrap_at(ctx, buf, d, 2, os, 811 * k + k - 1),
               *tdw = wrap_at(ctx, buf, RUMUS_F32, 2, ws, 1413);
  TU_OK(ctx, rumus_tensor_upload_f32(tw, w, ROWS * DIM));
  TU_OK(ctx, rumus_tensor_upload(ti, ids, N * sizeof *ids));
  TU_OK(ctx, rumus_tensor_upload_f32(tdy, dy, N * DIM));
  double *want = tu_malloc(N * DIM * sizeof *want);
  ref_embedding_fwd(w, ROWS, DIM, ids, N, want);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_embedding_fwd(ctx, tw, ti, -1, to));
    float *got = tu_download_f32(ctx, to);
    tu_check_close("odd_offsets_fwd", got, want, N * DIM, 0, 0);
    free(got);
    TU_OK(ctx, rumus_embedding_bwd(ctx, tdy, ti, 0, tdw));
    got = tu_download_f32(ctx, tdw);
    check_bwd_result("odd_offsets_bwd", got, dy, ids, N, ROWS, DIM, 0,
                     RUMUS_F32);
    free(got);
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(w);
  free(dy);
  free(ids);
  free(want);
  tu_free_all(ctx, tw, ti, to, tdy, tdw, NULL);
  clReleaseMemObject(buf);
}
END_TEST

/* Tensors at nonzero 16-byte aligned offsets of one buffer (weight at 16,
 * ids at 128, out at 256, dout at 1024, dweight at 1536 elements; 16-bit
 * tensors at twice those), rows of 8 elements (16 or 32 bytes), so the
 * GPU variant's forward takes its 16-byte moves away from offset 0; the
 * variants' bytes equal.  Storage tu_dtypes[_i]. */
START_TEST(aligned_offsets) {
  const rumus_dtype d = tu_dtypes[_i];
  enum { ROWS = 11, DIM = 8, N = 50 };
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              2048 * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  tu_rng r;
  tu_rng_seed(&r, 83 + (uint64_t)_i);
  float *w = rand_typed(&r, d, ROWS * DIM, -2, 2),
        *dy = rand_typed(&r, d, N * DIM, -1, 1);
  int32_t *ids = make_ids(&r, IDS_RANDOM, N, ROWS);
  const size_t ws[2] = {ROWS, DIM}, is[1] = {N}, os[2] = {N, DIM};
  const size_t k = rumus_dtype_size(d) == 2 ? 2 : 1;
  rumus_tensor *tw = wrap_at(ctx, buf, d, 2, ws, 16 * k),
               *ti = wrap_at(ctx, buf, RUMUS_I32, 1, is, 128),
               *to = wrap_at(ctx, buf, d, 2, os, 256 * k),
               *tdy = wrap_at(ctx, buf, d, 2, os, 1024 * k),
               *tdw = wrap_at(ctx, buf, d, 2, ws, 1536 * k);
  TU_OK(ctx, rumus_tensor_upload_f32(tw, w, ROWS * DIM));
  TU_OK(ctx, rumus_tensor_upload(ti, ids, N * sizeof *ids));
  TU_OK(ctx, rumus_tensor_upload_f32(tdy, dy, N * DIM));
  double *want = tu_malloc(N * DIM * sizeof *want);
  ref_embedding_fwd(w, ROWS, DIM, ids, N, want);
  void *bytes[2];
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_embedding_fwd(ctx, tw, ti, 2, to));
    float *got = tu_download_f32(ctx, to);
    tu_check_close("aligned_offsets_fwd", got, want, N * DIM, 0, 0);
    free(got);
    bytes[v] = download_raw(ctx, to);
    TU_OK(ctx, rumus_embedding_bwd(ctx, tdy, ti, 2, tdw));
    got = tu_download_f32(ctx, tdw);
    check_bwd_result("aligned_offsets_bwd", got, dy, ids, N, ROWS, DIM, 2, d);
    free(got);
  }
  ck_assert(memcmp(bytes[0], bytes[1], N * DIM * rumus_dtype_size(d)) == 0);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(bytes[0]);
  free(bytes[1]);
  free(w);
  free(dy);
  free(ids);
  free(want);
  tu_free_all(ctx, tw, ti, to, tdy, tdw, NULL);
  clReleaseMemObject(buf);
}
END_TEST

/* 300000 ids over 1000 rows (a third of them row 999), dim 2: more than
 * 256 chunks of the GPU variant's work-group scan (its one-group top
 * level loops), tiles of stage 1 with long segments; the variants and a
 * second run give the same bits. */
START_TEST(long_ids) {
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 89);
  enum { ROWS = 1000, DIM = 2, N = 300000 };
  float *dy = rand_typed(&r, RUMUS_F32, (size_t)N * DIM, -1, 1);
  int32_t *ids = make_ids(&r, IDS_RANDOM, N, ROWS);
  for (size_t p = 0; p < N; p += 3) ids[p] = ROWS - 1;
  const size_t ws[2] = {ROWS, DIM}, is[1] = {N}, os[2] = {N, DIM};
  rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 1, is, ids),
               *tdy = tu_tensor_typed(ctx, RUMUS_F32, 2, os, dy),
               *tdw = tu_tensor_typed(ctx, RUMUS_F32, 2, ws, NULL);
  void *first = NULL;
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int run = 0; run < (v == 0 ? 1 : 2); run++) {
      TU_OK(ctx, rumus_embedding_bwd(ctx, tdy, ti, 7, tdw));
      void *raw = download_raw(ctx, tdw);
      if (first == NULL) {
        float *got = tu_download_f32(ctx, tdw);
        check_bwd_result("long_ids_bwd", got, dy, ids, N, ROWS, DIM, 7,
                         RUMUS_F32);
        free(got);
        first = raw;
        continue;
      }
      ck_assert_msg(memcmp(first, raw, ROWS * DIM * sizeof(float)) == 0,
                    "long_ids: %s run %d differs",
                    tu_variant_name(tu_variants[v]), run);
      free(raw);
    }
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(first);
  free(dy);
  free(ids);
  tu_free_all(ctx, ti, tdy, tdw, NULL);
}
END_TEST

/* 70000 rows (17-bit keys: three radix passes), 20000 ids spread over
 * them and 3000 repeats of row 69999; many sort blocks and scan chunks.
 * Variant tu_variants[_i]. */
START_TEST(many_rows) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  tu_rng r;
  tu_rng_seed(&r, 71);
  enum { ROWS = 70000, DIM = 3, N = 20000 };
  float *dy = rand_typed(&r, RUMUS_F32, N * DIM, -1, 1);
  int32_t *ids = make_ids(&r, IDS_RANDOM, N, ROWS);
  for (size_t k = 0; k < 3000; k++) ids[tu_rand_u32(&r) % N] = ROWS - 1;
  const size_t ws[2] = {ROWS, DIM}, is[2] = {100, N / 100},
               os[3] = {100, N / 100, DIM};
  rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 2, is, ids),
               *tdy = tu_tensor_typed(ctx, RUMUS_F32, 3, os, dy),
               *tdw = tu_tensor_typed(ctx, RUMUS_F32, 2, ws, NULL);
  TU_OK(ctx, rumus_embedding_bwd(ctx, tdy, ti, 17, tdw));
  float *got = tu_download_f32(ctx, tdw);
  check_bwd_result("many_rows_bwd", got, dy, ids, N, ROWS, DIM, 17,
                   RUMUS_F32);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(got);
  free(dy);
  free(ids);
  tu_free_all(ctx, ti, tdy, tdw, NULL);
}
END_TEST

/* No ids: the forward does nothing, the backward writes zeros; dim 0 and
 * rows 0: checked, nothing enqueued. */
START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t ws[2] = {4, 3}, is[1] = {0}, os[2] = {0, 3}, w0[2] = {4, 0},
               o0[2] = {5, 0}, i5[1] = {5};
  const int32_t ids5[5] = {0, 1, 2, 3, 0};
  rumus_tensor *tw = tu_tensor_typed(ctx, RUMUS_F32, 2, ws, NULL),
               *ti = tu_tensor(ctx, RUMUS_I32, 1, is, NULL),
               *to = tu_tensor_typed(ctx, RUMUS_F32, 2, os, NULL),
               *tw0 = tu_tensor_typed(ctx, RUMUS_F32, 2, w0, NULL),
               *to0 = tu_tensor_typed(ctx, RUMUS_F32, 2, o0, NULL),
               *ti5 = tu_tensor(ctx, RUMUS_I32, 1, i5, ids5);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    TU_OK(ctx, rumus_tensor_fill(tw, 3.0f));
    TU_OK(ctx, rumus_embedding_fwd(ctx, tw, ti, -1, to));
    TU_OK(ctx, rumus_embedding_bwd(ctx, to, ti, 2, tw));
    float *got = tu_download_f32(ctx, tw);
    for (size_t i = 0; i < 12; i++) ck_assert_float_eq(got[i], 0.0f);
    free(got);
    TU_OK(ctx, rumus_embedding_fwd(ctx, tw0, ti5, -1, to0));
    TU_OK(ctx, rumus_embedding_bwd(ctx, to0, ti5, -1, tw0));
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, tw, ti, to, tw0, to0, ti5, NULL);
}
END_TEST

/* ---- errors ------------------------------------------------------------ */

#define TU_MSG(ctx, text)                                                    \
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), (text)), "%s",                \
                rumus_ctx_errmsg(ctx))

START_TEST(bad_arguments) {
  rumus_ctx *ctx = tu_ctx();
  const size_t ws[2] = {4, 3}, w3[3] = {4, 3, 1}, is[2] = {2, 5},
               os[3] = {2, 5, 3}, ob[3] = {2, 4, 3}, od[3] = {2, 5, 2},
               o2[2] = {10, 3}, i8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  static const int32_t ID10[10] = {0, 1, 2, 3, 3, 2, 1, 0, 0, 0};
  rumus_tensor *w = tu_tensor(ctx, RUMUS_F32, 2, ws, NULL),
               *wx = tu_tensor(ctx, RUMUS_F32, 3, w3, NULL),
               *w16 = tu_tensor(ctx, RUMUS_F16, 2, ws, NULL),
               *wb = tu_tensor(ctx, RUMUS_BF16, 2, ws, NULL),
               *wi = tu_tensor(ctx, RUMUS_I32, 2, ws, NULL),
               *ids = tu_tensor(ctx, RUMUS_I32, 2, is, ID10),
               *idf = tu_tensor(ctx, RUMUS_F32, 2, is, NULL),
               *id8 = tu_tensor(ctx, RUMUS_I32, 8, i8, NULL),
               *o = tu_tensor(ctx, RUMUS_F32, 3, os, NULL),
               *o16 = tu_tensor(ctx, RUMUS_F16, 3, os, NULL),
               *obad = tu_tensor(ctx, RUMUS_F32, 3, ob, NULL),
               *odim = tu_tensor(ctx, RUMUS_F32, 3, od, NULL),
               *oflat = tu_tensor(ctx, RUMUS_F32, 2, o2, NULL);
  TU_STATUS(RUMUS_ENULL, rumus_embedding_fwd(NULL, w, ids, -1, o));
  TU_STATUS(RUMUS_ENULL, rumus_embedding_fwd(ctx, NULL, ids, -1, o));
  TU_STATUS(RUMUS_ENULL, rumus_embedding_fwd(ctx, w, NULL, -1, o));
  TU_STATUS(RUMUS_ENULL, rumus_embedding_fwd(ctx, w, ids, -1, NULL));
  TU_STATUS(RUMUS_ENULL, rumus_embedding_bwd(ctx, o, NULL, -1, w));
  TU_STATUS(RUMUS_ENULL, rumus_embedding_bwd(ctx, NULL, ids, -1, w));
  TU_STATUS(RUMUS_ENULL, rumus_embedding_bwd(ctx, o, ids, -1, NULL));
  TU_STATUS(RUMUS_EDTYPE, rumus_embedding_fwd(ctx, wi, ids, -1, o));
  TU_MSG(ctx, "weight");
  TU_STATUS(RUMUS_EDTYPE, rumus_embedding_fwd(ctx, w, idf, -1, o));
  TU_MSG(ctx, "ids");
  TU_STATUS(RUMUS_EDTYPE, rumus_embedding_fwd(ctx, w, ids, -1, o16));
  TU_MSG(ctx, "out");
  TU_STATUS(RUMUS_EDTYPE, rumus_embedding_bwd(ctx, o16, ids, -1, wb));
  TU_MSG(ctx, "dweight is bf16");
  TU_STATUS(RUMUS_EDTYPE, rumus_embedding_bwd(ctx, o, ids, -1, w16));
  TU_STATUS(RUMUS_EDTYPE, rumus_embedding_bwd(ctx, wi, ids, -1, w));
  TU_MSG(ctx, "dout");
  TU_OK(ctx, rumus_embedding_bwd(ctx, o16, ids, -1, w));   /* mixed */
  TU_OK(ctx, rumus_embedding_bwd(ctx, o16, ids, -1, w16)); /* same */
  TU_STATUS(RUMUS_ESHAPE, rumus_embedding_fwd(ctx, wx, ids, -1, o));
  TU_MSG(ctx, "weight must be 2-D");
  TU_STATUS(RUMUS_ESHAPE, rumus_embedding_bwd(ctx, o, ids, -1, wx));
  TU_MSG(ctx, "dweight must be 2-D");
  TU_STATUS(RUMUS_ESHAPE, rumus_embedding_fwd(ctx, w, ids, -1, obad));
  TU_MSG(ctx, "has 4 along axis 1, expected 5");
  TU_STATUS(RUMUS_ESHAPE, rumus_embedding_fwd(ctx, w, ids, -1, odim));
  TU_MSG(ctx, "has 2 along axis 2, expected 3 (dim)");
  TU_STATUS(RUMUS_ESHAPE, rumus_embedding_bwd(ctx, odim, ids, -1, w));
  TU_STATUS(RUMUS_ESHAPE, rumus_embedding_fwd(ctx, w, ids, -1, oflat));
  TU_MSG(ctx, "must have ids' 2 axes and dim");
  TU_STATUS(RUMUS_ESHAPE, rumus_embedding_fwd(ctx, w, id8, -1, o));
  TU_MSG(ctx, "at most 7");
  TU_STATUS(RUMUS_EINVAL, rumus_embedding_fwd(ctx, w, ids, 4, o));
  TU_MSG(ctx, "padding_idx 4 is neither -1 nor a row of [0, 4)");
  TU_STATUS(RUMUS_EINVAL, rumus_embedding_bwd(ctx, o, ids, -2, w));
  TU_MSG(ctx, "padding_idx -2");
  TU_OK(ctx, rumus_embedding_fwd(ctx, w, ids, 3, o));
  /* Another context's tensor. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *ow = tu_tensor(other, RUMUS_F32, 2, ws, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_embedding_fwd(ctx, ow, ids, -1, o));
  TU_MSG(ctx, "another context");
  rumus_tensor_free(ow);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, w, wx, w16, wb, wi, ids, idf, id8, o, o16, obad, odim,
              oflat, NULL);
}
END_TEST

/* Outputs that share memory with an input: RUMUS_EINVAL naming both. */
START_TEST(overlaps) {
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              1024, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  const size_t ws[2] = {4, 3}, is[1] = {6}, os[2] = {6, 3};
  rumus_tensor *w = wrap_at(ctx, buf, RUMUS_F32, 2, ws, 0),
               *o = wrap_at(ctx, buf, RUMUS_F32, 2, os, 10),
               *ids = wrap_at(ctx, buf, RUMUS_I32, 1, is, 30),
               *o2 = wrap_at(ctx, buf, RUMUS_F32, 2, os, 33);
  TU_STATUS(RUMUS_EINVAL, rumus_embedding_fwd(ctx, w, ids, -1, o));
  TU_MSG(ctx, "weight");
  TU_STATUS(RUMUS_EINVAL, rumus_embedding_fwd(ctx, w, ids, -1, o2));
  TU_MSG(ctx, "ids");
  TU_STATUS(RUMUS_EINVAL, rumus_embedding_bwd(ctx, o, ids, -1, w));
  TU_MSG(ctx, "dout");
  tu_free_all(ctx, w, o, ids, o2, NULL);
  clReleaseMemObject(buf);
}
END_TEST

/* An id outside [0, rows) is caught on the device: RUMUS_EINDEX at the
 * next sync naming the id and its position; the forward's row is 0 and
 * the other rows right, the backward skips it; the next sync is clean.
 * Both variants; a table of 6 rows (the dense backward) and one of 200
 * (the sorted one). */
START_TEST(bad_ids_on_device) {
  rumus_ctx *ctx = tu_ctx();
  enum { DIM = 4, N = 12 };
  const size_t ROWS = _i ? 200 : 6;
  tu_rng r;
  tu_rng_seed(&r, 83);
  float *w = rand_typed(&r, RUMUS_F32, ROWS * DIM, -2, 2),
        *dy = rand_typed(&r, RUMUS_F32, N * DIM, -1, 1);
  const int32_t bad[2] = {(int32_t)ROWS, -5};
  const size_t where[2] = {7, 0};
  const size_t ws[2] = {ROWS, DIM}, is[1] = {N}, os[2] = {N, DIM};
  rumus_tensor *tw = tu_tensor_typed(ctx, RUMUS_F32, 2, ws, w),
               *to = tu_tensor_typed(ctx, RUMUS_F32, 2, os, NULL),
               *tdy = tu_tensor_typed(ctx, RUMUS_F32, 2, os, dy),
               *tdw = tu_tensor_typed(ctx, RUMUS_F32, 2, ws, NULL);
  double want[N * DIM];
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    for (int k = 0; k < 2; k++) {
      int32_t ids[N];
      for (size_t p = 0; p < N; p++) ids[p] = (int32_t)(p % ROWS);
      ids[where[k]] = bad[k];
      rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 1, is, ids);
      char msg[96];
      snprintf(msg, sizeof msg, "rumus_embedding_fwd / _bwd: id %d out of "
               "range at row %zu", bad[k], where[k]);
      TU_OK(ctx, rumus_embedding_fwd(ctx, tw, ti, -1, to));
      TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
      TU_MSG(ctx, msg);
      TU_OK(ctx, rumus_ctx_sync(ctx));
      float *got = tu_download_f32(ctx, to);
      ref_embedding_fwd(w, ROWS, DIM, ids, N, want);
      tu_check_close("bad_id_fwd", got, want, N * DIM, 0, 0);
      free(got);
      TU_OK(ctx, rumus_embedding_bwd(ctx, tdy, ti, -1, tdw));
      TU_STATUS(RUMUS_EINDEX, rumus_ctx_sync(ctx));
      TU_MSG(ctx, msg);
      TU_OK(ctx, rumus_ctx_sync(ctx));
      got = tu_download_f32(ctx, tdw);
      check_bwd_result("bad_id_bwd", got, dy, ids, N, ROWS, DIM, -1,
                       RUMUS_F32);
      free(got);
      rumus_tensor_free(ti);
    }
  }
  free(w);
  free(dy);
  tu_free_all(ctx, tw, to, tdy, tdw, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("embedding");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, fwd_cases, 0, 3);
  tcase_add_loop_test(core, bwd_cases, 0, 6);
  tcase_add_loop_test(core, bwd_finite_differences, 0, 2);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_loop_test(limits, guards_and_offsets, 0, 3);
  tcase_add_loop_test(limits, odd_offsets, 0, 3);
  tcase_add_loop_test(limits, aligned_offsets, 0, 3);
  tcase_add_loop_test(limits, many_rows, 0, 2);
  tcase_add_test(limits, long_ids);
  tcase_add_test(limits, empty_tensors);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_arguments);
  tcase_add_test(errors, overlaps);
  tcase_add_loop_test(errors, bad_ids_on_device, 0, 2);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
