/*
 * check_dropout.c - dropout forward and backward and their generator,
 * Philox4x32-10, on both variants and every storage type.
 *
 *   core    the reference generator gives Random123's published
 *           known answers for philox4x32-10 (zero, all-ones and pi-digit
 *           counter and key); the device gives the zero vector's top 24
 *           bits of each word (what a mask uses), found through p: a p
 *           equal to the element's uniform keeps it, one 2^-24 above drops
 *           it; the device's results equal the reference's mask and values
 *           on odd sizes (1, 3, 5, 1001, 4099), at extreme seeds and
 *           offsets, forward and backward, F32 / F16 / BF16, both
 *           variants; the bytes are identical between the variants and
 *           between work-group sizes (RUMUS_OPT_WORKGROUP_SIZE 64 and the
 *           defaults), and each shape of the CPU variant's two kernels
 *           (dropout_u64: 4 or 8 calls per vector, 1 to 4 vectors, 1 to
 *           3 blocks per work-item; dropout_vec: 1 to 4 batches of 16
 *           groups) runs and gives the reference's results and the GPU
 *           variant kernel's bytes around its spans, at offsets with
 *           both counter words nonzero; the keep rate over 10^6
 *           elements is within 6 sigma
 *           of the binomial's mean n (1 - p), offsets o and o + 1 and
 *           two seeds give masks that agree on a fraction within 6 sigma
 *           of p^2 + (1 - p)^2 (independent masks), and every kept value
 *           is exactly the scale; the backward against central finite
 *           differences of the device's F32 forward;
 *   limits  p = 0 copies the bytes (NaN payloads too), p = 1 gives +0
 *           everywhere (NaN and infinities included); NaN and infinities
 *           at other p (kept: NaN / infinity, dropped: +0); into and in
 *           place on a view at an unaligned (and an aligned) element
 *           offset of a borrowed buffer with guard elements around it;
 *           empty tensors;
 *   errors  bad arguments, each with its exact status.
 *
 * Tolerances.  A kept element is x * scale in float (scale = 1 / (1 - p)
 * rounded to float) rounded once to the storage: the tests compare it bit
 * for bit with that product computed on the host (float multiplication
 * is correctly rounded on both), and with the float64 x / (1 - p) within
 * rtol 2^-23 (the scale's rounding and the product's, half an ulp each)
 * plus the storage's rounding (tu_store_rtol / atol).  Finite
 * differences: the forward is linear, so the central difference (h =
 * 1e-2) is dy * mask * scale up to the float rounding of the outputs
 * summed into the loss: atol 1e-4, rtol 1e-4.  Launches cut into pieces
 * (2^30 work-items, 2^32 elements and more) are not tested: 16 GiB.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tu_dtype.h"

typedef int (*dropout_fn)(rumus_ctx *, float, uint64_t, uint64_t,
                          const rumus_tensor *, rumus_tensor *);
static const dropout_fn OPS[2] = {rumus_dropout_fwd, rumus_dropout_bwd};
static const char *const OP_NAMES[2] = {"dropout_fwd", "dropout_bwd"};

/* Random123's kat_vectors for philox4x32 with 10 rounds: counter, key,
 * result. */
static const uint32_t KAT[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
     0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
     0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};

static float scale_of(float p) { return (float)(1.0 / (1.0 - (double)p)); }

static float stored(rumus_dtype d, float v) {
  tu_round_to(d, &v, 1);
  return v;
}

/* n uniform values in [-2, 2) rounded to d (malloc'ed). */
static float *inputs(rumus_dtype d, uint64_t seed, size_t n) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  float *x = tu_malloc(n * sizeof *x);
  tu_fill_uniform(&r, x, n, -2.0f, 2.0f);
  tu_round_to(d, x, n);
  return x;
}

/* Op k (0 forward, 1 backward) of x (n values of type d) on the device
 * into a fresh tensor; its contents (malloc'ed). */
static float *run_op(rumus_ctx *ctx, rumus_dtype d, int k, float p,
                     uint64_t seed, uint64_t offset, const float *x,
                     size_t n) {
  const size_t shape[1] = {n};
  rumus_tensor *a = tu_tensor_typed(ctx, d, 1, shape, x);
  rumus_tensor *b = tu_tensor_typed(ctx, d, 1, shape, NULL);
  TU_OK(ctx, OPS[k](ctx, p, seed, offset, a, b));
  float *got = tu_download_f32(ctx, b);
  rumus_tensor_free(a);
  rumus_tensor_free(b);
  return got;
}

/* got (n values of type d) is the dropout of x under (p, seed, offset):
 * bit for bit the host's float product or +0 by the reference mask, and
 * within the header's tolerance of the float64 reference. */
static void check_result(const char *what, rumus_dtype d, float p,
                         uint64_t seed, uint64_t offset, const float *x,
                         const float *got, size_t n) {
  const float s = scale_of(p);
  for (size_t i = 0; i < n; i++) {
    const float e = p == 0.0f                               ? x[i]
                    : ref_dropout_keep(p, seed, offset, i) ? stored(d, x[i] * s)
                                                            : 0.0f;
    if (isnan(e) && isnan(got[i])) continue;
    if (memcmp(&e, &got[i], sizeof e) != 0)
      ck_abort_msg("%s[%zu]: got %a, want %a (x %a, kept %d)", what, i,
                   (double)got[i], (double)e, (double)x[i],
                   ref_dropout_keep(p, seed, offset, i));
  }
  double *want = tu_malloc(n * sizeof *want);
  ref_dropout(x, n, p, seed, offset, want);
  tu_check_close(what, got, want, n, tu_store_atol(d),
                 0x1p-23 + tu_store_rtol(d));
  free(want);
}

/* ---- core ---------------------------------------------------------------- */

START_TEST(philox_known_answers_ref) {
  for (int t = 0; t < 3; t++) {
    uint32_t out[4];
    ref_philox4x32_10(KAT[t], KAT[t] + 4, out);
    for (int j = 0; j < 4; j++)
      ck_assert_msg(out[j] == KAT[t][6 + j],
                    "vector %d word %d: %08x, want %08x", t, j, out[j],
                    KAT[t][6 + j]);
  }
  /* The mapping: element 4 q + j of (seed, offset) is word j of counter
   * {q_lo, q_hi, offset_lo, offset_hi} under key {seed_lo, seed_hi}. */
  const uint64_t seed = ((uint64_t)KAT[2][5] << 32) | KAT[2][4];
  const uint64_t off = ((uint64_t)KAT[2][3] << 32) | KAT[2][2];
  const uint64_t q = 0x0123456789abcdefull;
  const uint32_t ctr[4] = {(uint32_t)q, (uint32_t)(q >> 32), KAT[2][2],
                           KAT[2][3]};
  uint32_t out[4];
  ref_philox4x32_10(ctr, KAT[2] + 4, out);
  for (int j = 0; j < 4; j++)
    ck_assert_uint_eq(ref_dropout_bits(seed, off, 4 * q + (uint64_t)j),
                      out[j]);
}
END_TEST

/* Counter and key zero are element group 0 under seed 0 and offset 0.
 * Word j is kept at p = u_j = (word >> 8) 2^-24 and dropped at u_j +
 * 2^-24: the device's 24 bits are the known answer's. */
START_TEST(philox_known_answer_device) {
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  const float ones[4] = {1, 1, 1, 1};
  for (int j = 0; j < 4; j++) {
    const float u = (float)(KAT[0][6 + j] >> 8) * 0x1p-24f;
    for (int above = 0; above < 2; above++) {
      float *y = run_op(ctx, RUMUS_F32, 0, u + (above ? 0x1p-24f : 0.0f), 0,
                        0, ones, 4);
      ck_assert_msg((y[j] != 0.0f) == !above,
                    "%s: word %d at p = u%s: y = %g",
                    tu_variant_name(tu_variants[_i]), j,
                    above ? " + 2^-24" : "", (double)y[j]);
      free(y);
    }
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* Every size, key and p, forward and backward, both variants, storage
 * tu_dtypes[_i]: the reference's mask and values. */
START_TEST(matches_reference) {
  static const size_t SIZES[] = {1, 3, 5, 1001, 4099};
  static const uint64_t KEYS[][2] = {{0x0123456789abcdefull, 0},
                                     {~0ull, ~0ull},
                                     {0x299f31d0a4093822ull, 0x0370734413198a2eull}};
  static const float PS[] = {0.1f, 0.5f, 0.9f};
  const rumus_dtype d = tu_dtypes[_i];
  rumus_ctx *ctx = tu_ctx();
  for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; s++) {
    const size_t n = SIZES[s];
    float *x = inputs(d, 10 + s, n);
    for (int c = 0; c < 3; c++)
      for (int v = 0; v < 2; v++)
        for (int k = 0; k < 2; k++) {
          tu_set_variant(ctx, tu_variants[v]);
          float *got = run_op(ctx, d, k, PS[c], KEYS[c][0], KEYS[c][1], x, n);
          char what[96];
          snprintf(what, sizeof what, "%s_%s_%s_n%zu_key%d", OP_NAMES[k],
                   tu_dtype_name(d), tu_variant_name(tu_variants[v]), n, c);
          check_result(what, d, PS[c], KEYS[c][0], KEYS[c][1], x, got, n);
          free(got);
        }
    free(x);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* The same bytes on both variants at two work-group sizes each (storage
 * F32 for _i 0, F16 for _i 1), over several work-groups. */
START_TEST(same_bits_everywhere) {
  const rumus_dtype d = tu_dtypes[_i];
  const size_t n = 100003, shape[1] = {n};
  rumus_ctx *ctx = tu_ctx();
  float *x = inputs(d, 77, n);
  rumus_tensor *tx = tu_tensor_typed(ctx, d, 1, shape, x);
  rumus_tensor *ty = tu_tensor_typed(ctx, d, 1, shape, NULL);
  const size_t bytes = rumus_tensor_nbytes(ty);
  unsigned char *first = NULL;
  for (int v = 0; v < 2; v++)
    for (int wg = 0; wg < 2; wg++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_WORKGROUP_SIZE,
                                      wg ? 64 : 0));
      TU_OK(ctx, rumus_tensor_fill(ty, NAN));
      TU_OK(ctx, rumus_dropout_fwd(ctx, 0.3f, 99, 5, tx, ty));
      unsigned char *got = (unsigned char *)tu_download(ctx, ty);
      if (first == NULL) {
        first = got;
        float *f = tu_download_f32(ctx, ty);
        check_result("same_bits_reference", d, 0.3f, 99, 5, x, f, n);
        free(f);
        continue;
      }
      ck_assert_msg(memcmp(first, got, bytes) == 0,
                    "%s variant, work-group option %d: other bytes",
                    tu_variant_name(tu_variants[v]), wg ? 64 : 0);
      free(got);
    }
  free(first);
  free(x);
  tu_free_all(ctx, tx, ty, NULL);
}
END_TEST

/* The CPU variant's kernels and their shapes (environment settings;
 * NULL unsets): dropout_u64 (the default) at 4 or 8 calls per vector, 1
 * to 4 vectors per block, 1 to 3 blocks per work-item, and dropout_vec
 * (RUMUS_DROPOUT_CPU=vec) at 1 to 4 batches of 16 groups. */
static const struct {
  const char *cpu, *ilp, *w, *rep, *kernel;
} CPU_CFG[] = {
    {NULL, NULL, NULL, NULL, "dropout_u64"},
    {"u64", "1", "4", "1", "dropout_u64"},
    {"u64", "3", "4", "2", "dropout_u64"},
    {"u64", "4", "4", "3", "dropout_u64"},
    {"u64", "1", "8", "1", "dropout_u64"},
    {"u64", "2", "8", "3", "dropout_u64"},
    {"vec", "1", NULL, NULL, "dropout_vec"},
    {"vec", "2", NULL, NULL, "dropout_vec"},
    {"vec", "3", NULL, NULL, "dropout_vec"},
    {"vec", "4", NULL, NULL, "dropout_vec"},
};
enum { N_CPU_CFG = sizeof CPU_CFG / sizeof CPU_CFG[0] };

static void set_env(const char *name, const char *value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
}

static void set_cpu_cfg(int c) {
  set_env("RUMUS_DROPOUT_CPU", c < 0 ? NULL : CPU_CFG[c].cpu);
  set_env("RUMUS_DROPOUT_ILP", c < 0 ? NULL : CPU_CFG[c].ilp);
  set_env("RUMUS_DROPOUT_W", c < 0 ? NULL : CPU_CFG[c].w);
  set_env("RUMUS_DROPOUT_REP", c < 0 ? NULL : CPU_CFG[c].rep);
}

/* CPU kernel configuration _i (and the named kernel runs) on sizes around
 * its spans per work-item, the rest group by group: forward and backward
 * give the reference's mask and values (F32, BF16) and the same bytes as
 * the GPU variant's kernel (F32, F16), under keys whose offsets have
 * both words nonzero. */
START_TEST(cpu_kernels) {
  static const size_t SIZES[] = {1, 63, 64, 65, 129, 257, 1001, 4099, 100003};
  static const uint64_t KEYS[][2] = {
      {0x0123456789abcdefull, 0xfedcba9876543210ull},
      {0xffffffff00000001ull, 0x00000001ffffffffull}};
  set_cpu_cfg(_i);
  rumus_ctx *ctx = tu_profiling_ctx();
  for (int t = 0; t < 3; t++) {
    const rumus_dtype d = tu_dtypes[t];
    for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; s++) {
      const size_t n = SIZES[s];
      float *x = inputs(d, 30 + s, n);
      const int c = (int)(s % 2), k = (int)(s / 2 % 2);
      const uint64_t seed = KEYS[c][0], off = KEYS[c][1];
      tu_set_variant(ctx, RUMUS_VARIANT_CPU);
      float *got = run_op(ctx, d, k, 0.4f, seed, off, x, n);
      ck_assert_msg(tu_kernel_ran(ctx, CPU_CFG[_i].kernel), "%s did not run",
                    CPU_CFG[_i].kernel);
      char what[64];
      snprintf(what, sizeof what, "cpu_cfg%d_%s_%s_n%zu", _i, OP_NAMES[k],
               tu_dtype_name(d), n);
      if (d != RUMUS_F16)
        check_result(what, d, 0.4f, seed, off, x, got, n);
      if (d != RUMUS_BF16) {
        tu_set_variant(ctx, RUMUS_VARIANT_GPU);
        float *gpu = run_op(ctx, d, k, 0.4f, seed, off, x, n);
        ck_assert_msg(tu_kernel_ran(ctx, "dropout"), "dropout did not run");
        ck_assert_msg(memcmp(got, gpu, n * sizeof *got) == 0,
                      "%s: other bits than the GPU variant's", what);
        free(gpu);
      }
      free(got);
      free(x);
    }
  }
  set_cpu_cfg(-1);
  tu_free_all(ctx, NULL);
}
END_TEST

/* 1 where y is nonzero (x = 1 everywhere), asserting every kept value is
 * exactly the scale; the count in *kept. */
static unsigned char *mask_of(rumus_ctx *ctx, rumus_tensor *ones,
                              rumus_tensor *y, float p, uint64_t seed,
                              uint64_t offset, size_t n, size_t *kept) {
  TU_OK(ctx, rumus_dropout_fwd(ctx, p, seed, offset, ones, y));
  float *v = tu_download(ctx, y);
  unsigned char *m = tu_malloc(n);
  const float s = scale_of(p);
  *kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] != 0.0f && v[i] != s)
      ck_abort_msg("p %g: y[%zu] = %a, neither 0 nor the scale %a", (double)p,
                   i, (double)v[i], (double)s);
    m[i] = v[i] != 0.0f;
    *kept += m[i];
  }
  free(v);
  return m;
}

/* |count - mean| <= 6 sqrt(n q (1 - q)) for a binomial count of rate q. */
static void check_binomial(const char *what, size_t count, size_t n,
                           double q) {
  const double mean = n * q, bound = 6.0 * sqrt(n * q * (1.0 - q));
  ck_assert_msg(fabs((double)count - mean) <= bound,
                "%s: %zu of %zu, expected %.1f +- %.1f (6 sigma)", what, count,
                n, mean, bound);
}

/* Keep rate, and independence of the masks of offsets o, o + 1 and of
 * another seed: two independent masks agree with probability p^2 +
 * (1 - p)^2. */
START_TEST(keep_rate_and_independence) {
  static const float PS[] = {0.1f, 0.5f, 0.9f};
  const size_t n = 1000000, shape[1] = {n};
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, tu_variants[_i]);
  rumus_tensor *ones = tu_tensor(ctx, RUMUS_F32, 1, shape, NULL);
  rumus_tensor *y = tu_tensor(ctx, RUMUS_F32, 1, shape, NULL);
  TU_OK(ctx, rumus_tensor_fill(ones, 1.0f));
  for (int c = 0; c < 3; c++) {
    const float p = PS[c];
    const double q = (double)p * p + (1.0 - p) * (1.0 - p);
    size_t kept[3];
    unsigned char *m0 = mask_of(ctx, ones, y, p, 7, 1000, n, &kept[0]);
    unsigned char *m1 = mask_of(ctx, ones, y, p, 7, 1001, n, &kept[1]);
    unsigned char *m2 = mask_of(ctx, ones, y, p, 8, 1000, n, &kept[2]);
    char what[64];
    for (int k = 0; k < 3; k++) {
      snprintf(what, sizeof what, "keep rate p %g mask %d", (double)p, k);
      check_binomial(what, kept[k], n, 1.0 - p);
    }
    size_t agree_off = 0, agree_seed = 0;
    for (size_t i = 0; i < n; i++) {
      agree_off += m0[i] == m1[i];
      agree_seed += m0[i] == m2[i];
    }
    snprintf(what, sizeof what, "offsets o, o + 1 at p %g", (double)p);
    check_binomial(what, agree_off, n, q);
    snprintf(what, sizeof what, "two seeds at p %g", (double)p);
    check_binomial(what, agree_seed, n, q);
    free(m0);
    free(m1);
    free(m2);
  }
  tu_free_all(ctx, ones, y, NULL);
}
END_TEST

/* L = sum g * dropout(x): its central differences through the device's
 * forward against the backward of g, both variants. */
START_TEST(bwd_finite_differences) {
  enum { N = 13 };
  const float p = 0.3f;
  const double h = 1e-2;
  const uint64_t seed = 3, off = 11;
  rumus_ctx *ctx = tu_ctx();
  tu_rng r;
  tu_rng_seed(&r, 42);
  float x[N], g[N], xp[N];
  tu_fill_uniform(&r, x, N, -2, 2);
  tu_fill_uniform(&r, g, N, -1, 1);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float *dx = run_op(ctx, RUMUS_F32, 1, p, seed, off, g, N);
    double numeric[N];
    for (size_t i = 0; i < N; i++) {
      double l[2];
      for (int s = 0; s < 2; s++) {
        memcpy(xp, x, sizeof x);
        xp[i] += (float)(s ? -h : h);
        float *y = run_op(ctx, RUMUS_F32, 0, p, seed, off, xp, N);
        l[s] = 0;
        for (size_t j = 0; j < N; j++) l[s] += (double)g[j] * y[j];
        free(y);
      }
      numeric[i] = (l[0] - l[1]) / (2 * h);
    }
    tu_check_close("dropout_fd", dx, numeric, N, 1e-4, 1e-4);
    free(dx);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- limits -------------------------------------------------------------- */

/* p = 0: the bytes of x (a signalling NaN's payload too), p = 1: +0, for
 * storage tu_dtypes[_i], forward and backward. */
START_TEST(p_zero_and_one) {
  const rumus_dtype d = tu_dtypes[_i];
  const size_t n = 7, shape[1] = {n}, esz = rumus_dtype_size(d);
  unsigned char raw[7 * 4];
  float x[7] = {1.5f, -2.0f, INFINITY, -INFINITY, 0.0f, NAN, 3.0f};
  void *enc = tu_encode(d, x, n);
  memcpy(raw, enc, n * esz);
  free(enc);
  /* Element 5: a NaN with a payload (signalling where the type has one). */
  if (d == RUMUS_F32) {
    const uint32_t snan = 0x7fa00001u;
    memcpy(raw + 5 * esz, &snan, esz);
  } else {
    const uint16_t snan = d == RUMUS_F16 ? 0x7d01u : 0x7f81u;
    memcpy(raw + 5 * esz, &snan, esz);
  }
  rumus_ctx *ctx = tu_ctx();
  rumus_tensor *tx = tu_tensor(ctx, d, 1, shape, raw);
  rumus_tensor *ty = tu_tensor(ctx, d, 1, shape, NULL);
  for (int k = 0; k < 2; k++)
    for (int v = 0; v < 2; v++) {
      tu_set_variant(ctx, tu_variants[v]);
      TU_OK(ctx, OPS[k](ctx, 0.0f, 1, 2, tx, ty));
      unsigned char *got = (unsigned char *)tu_download(ctx, ty);
      ck_assert_msg(memcmp(got, raw, n * esz) == 0, "%s p = 0: not a copy",
                    OP_NAMES[k]);
      free(got);
      TU_OK(ctx, OPS[k](ctx, -0.0f, 1, 2, tx, tx)); /* in place: nothing */
      TU_OK(ctx, OPS[k](ctx, 1.0f, 1, 2, tx, ty));
      got = (unsigned char *)tu_download(ctx, ty);
      for (size_t b = 0; b < n * esz; b++)
        ck_assert_msg(got[b] == 0, "%s p = 1: byte %zu is %02x", OP_NAMES[k],
                      b, got[b]);
      free(got);
    }
  tu_free_all(ctx, tx, ty, NULL);
}
END_TEST

/* NaN and infinities at p = 0.5 (kept: NaN or infinity; dropped: +0),
 * against the reference, storage tu_dtypes[_i]. */
START_TEST(special_values) {
  const rumus_dtype d = tu_dtypes[_i];
  enum { N = 64 };
  float x[N];
  for (int i = 0; i < N; i++)
    x[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
  rumus_ctx *ctx = tu_ctx();
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    float *got = run_op(ctx, d, 0, 0.5f, 5, 6, x, N);
    check_result("special_values", d, 0.5f, 5, 6, x, got, N);
    for (int i = 0; i < N; i++)
      if (!ref_dropout_keep(0.5f, 5, 6, (uint64_t)i))
        ck_assert_msg(signbit(got[i]) == 0, "dropped [%d] is -0", i);
    free(got);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

/* A view at element offset G + shift of a buffer whose other elements
 * are guard bytes: shift 3 (not 16-byte aligned: the unaligned programs)
 * and 4.  The forward from a tensor at offset 0 into the view, then in
 * place, then the backward in place on its output; storage
 * tu_dtypes[_i % 3], shift by _i / 3. */
START_TEST(in_place_offsets_guards) {
  enum { G = 64, N = 1001 };
  const rumus_dtype d = tu_dtypes[_i % 3];
  const size_t shift = _i < 3 ? 3 : 4, esz = rumus_dtype_size(d);
  const size_t total = (N + 2 * G) * esz, shape[2] = {7, 143};
  rumus_ctx *ctx = tu_ctx();
  unsigned char *host = tu_malloc(total);
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    memset(host, 0xA5, total);
    cl_int e;
    cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx),
                                CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                total, host, &e);
    ck_assert_int_eq(e, CL_SUCCESS);
    rumus_tensor *t = NULL;
    TU_OK(ctx, rumus_tensor_wrap(ctx, d, 2, shape, buf, (G + shift) * esz, &t));
    float *x = inputs(d, 5 + _i, N);
    /* From a tensor of its own (offset 0) into the view, then in place. */
    rumus_tensor *src = tu_tensor_typed(ctx, d, 2, shape, x);
    TU_OK(ctx, rumus_dropout_fwd(ctx, 0.4f, 21, 22, src, t));
    float *y = tu_download_f32(ctx, t);
    check_result("into_view_fwd", d, 0.4f, 21, 22, x, y, N);
    free(y);
    rumus_tensor_free(src);
    TU_OK(ctx, rumus_tensor_upload_f32(t, x, N));
    TU_OK(ctx, rumus_dropout_fwd(ctx, 0.4f, 21, 22, t, t));
    y = tu_download_f32(ctx, t);
    check_result("in_place_fwd", d, 0.4f, 21, 22, x, y, N);
    TU_OK(ctx, rumus_dropout_bwd(ctx, 0.4f, 21, 22, t, t));
    float *dx = tu_download_f32(ctx, t);
    check_result("in_place_bwd", d, 0.4f, 21, 22, y, dx, N);
    e = clEnqueueReadBuffer(rumus_ctx_cl_queue(ctx), buf, CL_TRUE, 0, total,
                            host, 0, NULL, NULL);
    ck_assert_int_eq(e, CL_SUCCESS);
    const size_t lo = (G + shift) * esz, hi = lo + N * esz;
    for (size_t b = 0; b < total; b++)
      if ((b < lo || b >= hi) && host[b] != 0xA5)
        ck_abort_msg("guard byte %zu (tensor bytes %zu to %zu) written", b,
                     lo, hi);
    free(x);
    free(y);
    free(dx);
    rumus_tensor_free(t);
    clReleaseMemObject(buf);
  }
  free(host);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(empty_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s[2] = {0, 5};
  rumus_tensor *a = tu_tensor(ctx, RUMUS_F32, 2, s, NULL);
  TU_OK(ctx, rumus_dropout_fwd(ctx, 0.5f, 1, 1, a, a));
  TU_OK(ctx, rumus_dropout_bwd(ctx, 0.5f, 1, 1, a, a));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, a, NULL);
}
END_TEST

/* ---- errors -------------------------------------------------------------- */

START_TEST(bad_arguments) {
  rumus_ctx *ctx = tu_ctx();
  const size_t s[2] = {4, 8}, s2[2] = {4, 9}, s3[1] = {32};
  rumus_tensor *x = tu_tensor(ctx, RUMUS_F32, 2, s, NULL),
               *y = tu_tensor(ctx, RUMUS_F32, 2, s, NULL),
               *flat = tu_tensor(ctx, RUMUS_F32, 1, s3, NULL),
               *z = tu_tensor(ctx, RUMUS_F32, 2, s2, NULL),
               *h = tu_tensor(ctx, RUMUS_F16, 2, s, NULL),
               *i = tu_tensor(ctx, RUMUS_I32, 2, s, NULL);
  TU_OK(ctx, rumus_tensor_fill(x, 1.0f));
  for (int k = 0; k < 2; k++) {
    TU_STATUS(RUMUS_ENULL, OPS[k](NULL, 0.5f, 1, 0, x, y));
    TU_STATUS(RUMUS_ENULL, OPS[k](ctx, 0.5f, 1, 0, NULL, y));
    TU_STATUS(RUMUS_ENULL, OPS[k](ctx, 0.5f, 1, 0, x, NULL));
    const float bad_p[] = {-0.25f, 1.0000001f, NAN, INFINITY, -INFINITY};
    for (size_t b = 0; b < sizeof bad_p / sizeof bad_p[0]; b++) {
      TU_STATUS(RUMUS_EINVAL, OPS[k](ctx, bad_p[b], 1, 0, x, y));
      ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "p is") != NULL, "%s",
                    rumus_ctx_errmsg(ctx));
    }
    TU_STATUS(RUMUS_EDTYPE, OPS[k](ctx, 0.5f, 1, 0, i, i));
    TU_STATUS(RUMUS_EDTYPE, OPS[k](ctx, 0.5f, 1, 0, x, h));
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), k ? "dx is f16" : "y is f16"),
                  "%s", rumus_ctx_errmsg(ctx));
    TU_STATUS(RUMUS_EDTYPE, OPS[k](ctx, 0.5f, 1, 0, h, x));
    TU_STATUS(RUMUS_ESHAPE, OPS[k](ctx, 0.5f, 1, 0, x, z));
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "[4, 8]") &&
                      strstr(rumus_ctx_errmsg(ctx), "[4, 9]"),
                  "message names the shapes: %s", rumus_ctx_errmsg(ctx));
    TU_OK(ctx, OPS[k](ctx, 0.5f, 1, 0, x, flat)); /* same count, flat */
    TU_OK(ctx, OPS[k](ctx, 1.0f, 1, 0, x, y));    /* the ends of [0, 1] */
    TU_OK(ctx, OPS[k](ctx, 0.0f, 1, 0, x, y));
  }
  /* A tensor of another context. */
  rumus_ctx *other = tu_ctx();
  rumus_tensor *o = tu_tensor(other, RUMUS_F32, 2, s, NULL);
  TU_STATUS(RUMUS_EINVAL, rumus_dropout_fwd(ctx, 0.5f, 1, 0, o, y));
  TU_STATUS(RUMUS_EINVAL, rumus_dropout_bwd(ctx, 0.5f, 1, 0, x, o));
  rumus_tensor_free(o);
  TU_OK(other, rumus_ctx_free(other));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  tu_free_all(ctx, x, y, flat, z, h, i, NULL);
}
END_TEST

/* y one element into x's bytes: a partial overlap, RUMUS_EINVAL; the same
 * bytes (in place) are fine. */
START_TEST(partial_overlap) {
  rumus_ctx *ctx = tu_ctx();
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              64 * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  const size_t s[1] = {32};
  rumus_tensor *a = NULL, *b = NULL, *a2 = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, s, buf, 0, &a));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, s, buf, 4, &b));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, s, buf, 0, &a2));
  TU_OK(ctx, rumus_tensor_fill(a, 1.0f));
  TU_STATUS(RUMUS_EINVAL, rumus_dropout_fwd(ctx, 0.5f, 1, 0, a, b));
  ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "overlap") != NULL, "%s",
                rumus_ctx_errmsg(ctx));
  TU_STATUS(RUMUS_EINVAL, rumus_dropout_bwd(ctx, 0.5f, 1, 0, b, a));
  TU_OK(ctx, rumus_dropout_fwd(ctx, 0.5f, 1, 0, a, a2));
  TU_OK(ctx, rumus_ctx_sync(ctx));
  rumus_tensor_free(a);
  rumus_tensor_free(b);
  rumus_tensor_free(a2);
  clReleaseMemObject(buf);
  tu_free_all(ctx, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("dropout");
  TCase *core = tu_tcase("core");
  tcase_add_test(core, philox_known_answers_ref);
  tcase_add_loop_test(core, philox_known_answer_device, 0, 2);
  tcase_add_loop_test(core, matches_reference, 0, 3);
  tcase_add_loop_test(core, same_bits_everywhere, 0, 2);
  tcase_add_loop_test(core, cpu_kernels, 0, N_CPU_CFG);
  tcase_add_loop_test(core, keep_rate_and_independence, 0, 2);
  tcase_add_test(core, bwd_finite_differences);
  suite_add_tcase(s, core);
  TCase *limits = tu_tcase("limits");
  tcase_add_loop_test(limits, p_zero_and_one, 0, 3);
  tcase_add_loop_test(limits, special_values, 0, 3);
  tcase_add_loop_test(limits, in_place_offsets_guards, 0, 6);
  tcase_add_test(limits, empty_tensors);
  suite_add_tcase(s, limits);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, bad_arguments);
  tcase_add_test(errors, partial_overlap);
  suite_add_tcase(s, errors);
  return tu_run(s);
}
