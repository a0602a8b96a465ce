/* testutil.c - see testutil.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, beside _POSIX_C_SOURCE */
#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const int tu_variants[2] = {RUMUS_VARIANT_GPU, RUMUS_VARIANT_CPU};

const char *tu_variant_name(int v) {
  return v == RUMUS_VARIANT_GPU ? "wg" : v == RUMUS_VARIANT_CPU ? "row" : "auto";
}

static rumus_ctx *ctx_with(unsigned flags) {
  rumus_ctx *ctx = NULL;
  int st = rumus_ctx_create(&ctx, NULL, flags);
  ck_assert_msg(st == RUMUS_OK, "rumus_ctx_create: %s: %s", rumus_err_name(st),
                rumus_last_create_error());
  return ctx;
}

rumus_ctx *tu_ctx(void) { return ctx_with(0); }

rumus_ctx *tu_profiling_ctx(void) { return ctx_with(RUMUS_CTX_PROFILING); }

int tu_kernel_ran(rumus_ctx *ctx, const char *name) {
  /* Every (op, kernel) pair of a test's few launches: the library has
   * fewer kernels than this. */
  static rumus_kernel_stat ks[1024];
  size_t n = 0;
  TU_OK(ctx, rumus_ctx_kernel_profile(ctx, ks, 1024, &n));
  for (size_t i = 0; i < n && i < 1024; i++)
    if (strcmp(ks[i].kernel, name) == 0 && ks[i].launches > 0) return 1;
  return 0;
}

void tu_free_all(rumus_ctx *ctx, ...) {
  va_list ap;
  va_start(ap, ctx);
  rumus_tensor *t;
  while ((t = va_arg(ap, rumus_tensor *)) != NULL) rumus_tensor_free(t);
  va_end(ap);
  TU_OK(ctx, rumus_ctx_free(ctx));
}

void tu_set_variant(rumus_ctx *ctx, int v) {
  TU_OK(ctx, rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, v));
}

rumus_tensor *tu_tensor(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                        const size_t *shape, const void *data) {
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_create(ctx, dtype, ndim, shape, &t));
  if (data) TU_OK(ctx, rumus_tensor_upload(t, data, rumus_tensor_nbytes(t)));
  return t;
}

rumus_tensor *tu_tensor_2d(rumus_ctx *ctx, size_t rows, size_t cols,
                           const float *data) {
  size_t shape[2] = {rows, cols};
  return tu_tensor(ctx, RUMUS_F32, 2, shape, data);
}

float *tu_download(rumus_ctx *ctx, const rumus_tensor *t) {
  size_t n = rumus_tensor_nbytes(t);
  float *out = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(out);
  TU_OK(ctx, rumus_tensor_download(t, out, n));
  return out;
}

#define TU_GUARD_BYTE 0xA5

tu_guarded tu_guarded_tensor(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                             const size_t *shape, const void *data) {
  return tu_guarded_tensor_at(ctx, dtype, ndim, shape, data, 4096);
}

tu_guarded tu_guarded_tensor_at(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                const size_t *shape, const void *data,
                                size_t guard) {
  tu_guarded g = {0};
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  g.bytes = n * rumus_dtype_size(dtype);
  g.guard = guard;
  size_t total = g.bytes + 2 * g.guard;
  unsigned char *host = malloc(total);
  ck_assert_ptr_nonnull(host);
  memset(host, TU_GUARD_BYTE, total);
  if (data) memcpy(host + g.guard, data, g.bytes);
  cl_int e;
  g.buf = clCreateBuffer(rumus_ctx_cl_context(ctx),
                         CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, total, host,
                         &e);
  free(host);
  ck_assert_int_eq(e, CL_SUCCESS);
  TU_OK(ctx, rumus_tensor_wrap(ctx, dtype, ndim, shape, g.buf, g.guard, &g.t));
  return g;
}

void tu_guarded_check_free(rumus_ctx *ctx, tu_guarded *g) {
  size_t total = g->bytes + 2 * g->guard;
  unsigned char *host = malloc(total);
  ck_assert_ptr_nonnull(host);
  cl_int e = clEnqueueReadBuffer(rumus_ctx_cl_queue(ctx), g->buf, CL_TRUE, 0,
                                 total, host, 0, NULL, NULL);
  ck_assert_int_eq(e, CL_SUCCESS);
  /* Asserts only on a failure: 2 x 4096 passing ck_asserts cost 8 ms of
   * mark points per tensor. */
  for (size_t i = 0; i < g->guard; i++) {
    if (host[i] != TU_GUARD_BYTE)
      ck_abort_msg("guard byte %zu before the tensor was overwritten",
                   g->guard - i);
    if (host[g->guard + g->bytes + i] != TU_GUARD_BYTE)
      ck_abort_msg("guard byte %zu after the tensor was overwritten", i);
  }
  free(host);
  rumus_tensor_free(g->t);
  clReleaseMemObject(g->buf);
  g->t = NULL;
  g->buf = NULL;
}

void tu_guarded_check_free_all(rumus_ctx *ctx, ...) {
  va_list ap;
  va_start(ap, ctx);
  tu_guarded *g;
  while ((g = va_arg(ap, tu_guarded *)) != NULL) tu_guarded_check_free(ctx, g);
  va_end(ap);
}

/* The comparison loop behind tu_check_close (bound NULL: atol + rtol
 * |want|) and tu_check_bound. */
static double compare(const char *what, const float *got, const double *want,
                      size_t n, const double *bound, double atol,
                      double rtol) {
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double g = got[i], w = want[i];
    if (isnan(w) || isnan(g)) {
      if (!(isnan(w) && isnan(g)))
        ck_abort_msg("%s[%zu]: got %.9g, want %.9g", what, i, g, w);
      continue;
    }
    if (isinf(w) || isinf(g)) {
      if (g != w) ck_abort_msg("%s[%zu]: got %.9g, want %.9g", what, i, g, w);
      continue;
    }
    const double err = fabs(g - w);
    const double b = bound ? bound[i] : atol + rtol * fabs(w);
    if (!(err <= b)) {
      if (bound)
        ck_abort_msg("%s[%zu]: got %.9g, want %.9g (error %.3g > bound %.3g)",
                     what, i, g, w, err, b);
      ck_abort_msg("%s[%zu]: got %.9g, want %.9g (error %.3g > %.3g + "
                   "%.3g*|want|)", what, i, g, w, err, atol, rtol);
    }
    if (err > worst) worst = err;
  }
  return worst;
}

double tu_check_close(const char *what, const float *got, const double *want,
                      size_t n, double atol, double rtol) {
  return compare(what, got, want, n, NULL, atol, rtol);
}

double tu_check_bound(const char *what, const float *got, const double *want,
                      const double *bound, size_t n) {
  return compare(what, got, want, n, bound, 0.0, 0.0);
}

void *tu_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  ck_assert_msg(p != NULL, "out of host memory (%zu bytes)", bytes);
  return p;
}

/* ---- Skips ------------------------------------------------------------- */

/* The skip record.  tu_run maps it shared before the suite runs, so that
 * what a forked test writes reaches the parent; without tu_run (or if the
 * mapping fails) it is this process's own. */
typedef struct {
  unsigned count;
  size_t used;
  char lines[8192]; /* the SKIP lines, as many as fit */
} skip_record;
static skip_record skip_local;
static skip_record *skips = &skip_local;

static int skips_forbidden(void) {
  const char *v = getenv("RUMUS_TEST_NO_SKIP");
  return v && *v && strcmp(v, "0") != 0;
}

void tu_skip(const char *what, const char *why_fmt, ...) {
  char why[256], line[512];
  va_list ap;
  va_start(ap, why_fmt);
  vsnprintf(why, sizeof why, why_fmt, ap);
  va_end(ap);
  snprintf(line, sizeof line, "SKIP: %s (%s)\n", what, why);
  if (skips_forbidden())
    ck_abort_msg("SKIP: %s (%s), and RUMUS_TEST_NO_SKIP makes skips fail",
                 what, why);
  fputs(line, stderr);
  fflush(stderr);
  skips->count++;
  const size_t len = strlen(line);
  if (len < sizeof skips->lines - skips->used) {
    memcpy(skips->lines + skips->used, line, len + 1);
    skips->used += len;
  }
}

rumus_tensor *tu_tensor_or_skip(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                const size_t *shape, const void *data,
                                const char *what) {
  rumus_tensor *t = NULL;
  int st = rumus_tensor_create(ctx, dtype, ndim, shape, &t);
  if (st == RUMUS_OK && data)
    st = rumus_tensor_upload(t, data, rumus_tensor_nbytes(t));
  if (st == RUMUS_EDEVMEM || st == RUMUS_ESIZE) {
    tu_skip(what, "%s: %s", rumus_err_name(st), rumus_ctx_errmsg(ctx));
    rumus_tensor_free(t);
    return NULL;
  }
  ck_assert_msg(st == RUMUS_OK, "%s: tensor: %s: %s", what, rumus_err_name(st),
                rumus_ctx_errmsg(ctx));
  return t;
}

void tu_rng_seed(tu_rng *r, uint64_t seed) {
  r->s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  if (r->s == 0) r->s = 1;
}

uint32_t tu_rand_u32(tu_rng *r) {
  uint64_t x = r->s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  r->s = x;
  return (uint32_t)(x >> 32);
}

float tu_uniform(tu_rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)((tu_rand_u32(r) >> 8) * (1.0 / 16777216.0));
}

void tu_fill_uniform(tu_rng *r, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = tu_uniform(r, lo, hi);
}

TCase *tu_tcase(const char *name) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 900);
  return tc;
}

int tu_run(Suite *s) {
  void *shared = mmap(NULL, sizeof *skips, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared != MAP_FAILED) {
    skips = shared;
    memset(skips, 0, sizeof *skips);
  }
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  const int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  const unsigned skipped = skips->count;
  if (skipped)
    fprintf(stderr, "%u case%s skipped, not run (exit status 77, SKIP, "
            "unless a test failed):\n%s", skipped, skipped == 1 ? "" : "s",
            skips->lines);
  if (shared != MAP_FAILED) {
    skips = &skip_local;
    munmap(shared, sizeof *skips);
  }
  if (failed) return EXIT_FAILURE;
  return skipped ? 77 : EXIT_SUCCESS;
}
