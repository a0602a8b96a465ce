/*
 * testutil.h - helpers shared by the Check test programs: contexts,
 * tensors from host data, guarded buffers, comparisons with stated
 * tolerances against the float64 references in ref/, and a seeded RNG.
 *
 * Contexts are created inside each test (Check forks every test by default,
 * and a PoCL context does not survive fork()).
 */
#ifndef RUMUS_TESTUTIL_H
#define RUMUS_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "rumus.h"
#include "ref.h"

/* Asserts that a rumus call returned RUMUS_OK, printing the context's
 * message otherwise. */
#define TU_OK(ctx, expr)                                                      \
  do {                                                                        \
    int tu_st_ = (expr);                                                      \
    ck_assert_msg(tu_st_ == RUMUS_OK, "%s -> %s: %s", #expr,                  \
                  rumus_err_name(tu_st_), rumus_ctx_errmsg(ctx));             \
  } while (0)
/* Asserts an exact status. */
#define TU_STATUS(want, expr)                                                 \
  do {                                                                        \
    int tu_st_ = (expr);                                                      \
    ck_assert_msg(tu_st_ == (want), "%s -> %s, expected %s", #expr,           \
                  rumus_err_name(tu_st_), rumus_err_name(want));              \
  } while (0)

/* A context on the default device (RUMUS_DEVICE honoured); fails the test
 * if none can be made. */
rumus_ctx *tu_ctx(void);
/* The same with a profiling queue (RUMUS_CTX_PROFILING). */
rumus_ctx *tu_profiling_ctx(void);
/* Whether kernel `name` ran since the last call of this function (or of
 * rumus_ctx_kernel_profile) on a profiling context; waits for the queue. */
int tu_kernel_ran(rumus_ctx *ctx, const char *name);
/* Frees every tensor given (NULL-terminated list), then the context, and
 * asserts the context had no other live tensors. */
void tu_free_all(rumus_ctx *ctx, ...);

/* The variants each reduction test runs: the work-group (GPU) variant and
 * the row (CPU) variant, both on whatever device the test has. */
extern const int tu_variants[2];
const char *tu_variant_name(int variant);
void tu_set_variant(rumus_ctx *ctx, int variant);

/* A tensor holding host data (data NULL: uninitialised). */
rumus_tensor *tu_tensor(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                        const size_t *shape, const void *data);
rumus_tensor *tu_tensor_2d(rumus_ctx *ctx, size_t rows, size_t cols,
                           const float *data);
/* Downloads a tensor into a new malloc'ed array. */
float *tu_download(rumus_ctx *ctx, const rumus_tensor *t);

/* A tensor borrowed from a larger buffer with guard bytes before and after
 * it, to catch writes outside the tensor. */
typedef struct {
  rumus_tensor *t;
  cl_mem buf;
  size_t guard, bytes;
} tu_guarded;
tu_guarded tu_guarded_tensor(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                             const size_t *shape, const void *data);
/* The same with `guard` bytes on each side (4096 above); a guard that is
 * not a multiple of 4 elements gives the tensor an unaligned offset. */
tu_guarded tu_guarded_tensor_at(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                const size_t *shape, const void *data,
                                size_t guard);
/* Asserts the guard bytes are intact, then frees tensor and buffer. */
void tu_guarded_check_free(rumus_ctx *ctx, tu_guarded *g);
/* tu_guarded_check_free of each tu_guarded * up to a NULL. */
void tu_guarded_check_free_all(rumus_ctx *ctx, ...);

/* The one comparator of the tests: n float results against their float64
 * reference.  Element i passes when |got - want| <= atol + rtol * |want|
 * (tu_check_close) or <= bound[i] (tu_check_bound); a NaN must meet a NaN
 * and an infinity the same infinity.  Fails the test at the first bad
 * index, naming `what`, the index, both values and the bound.  Returns the
 * largest |got - want| among finite pairs.  Only a failure reaches a Check
 * assertion: every passing ck_assert records a mark point (about 1 us),
 * which made comparing a 4097 x 1000 gradient take seconds. */
double tu_check_close(const char *what, const float *got, const double *want,
                      size_t n, double atol, double rtol);
double tu_check_bound(const char *what, const float *got, const double *want,
                      const double *bound, size_t n);

/* malloc that fails the test when the host has no memory (never NULL;
 * 0 bytes allocates 1). */
void *tu_malloc(size_t bytes);

/* Skipped cases.  Check has no skip state, so the tests keep their own:
 * a case that cannot run on this machine calls tu_skip(), which prints
 * "SKIP: <what> (<why>)" to stderr and counts the skip in memory that
 * Check's forked test processes share with tu_run(); the test then returns
 * without asserting anything more.  After the suite tu_run() prints every
 * SKIP line again, and a program with a skipped case and no failure exits
 * 77, which Automake's test driver reports as SKIP instead of PASS (the
 * cases that ran still had to pass).  With RUMUS_TEST_NO_SKIP set to
 * anything but "" or "0", a skip fails the test instead, for machines that
 * must run every case.
 * The only reason to skip is a resource of this machine: a tensor the
 * device cannot hold (tu_tensor_or_skip).  Size limits that would skip on
 * every machine are not written as skips; such cases are made smaller. */
void tu_skip(const char *what, const char *why_fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* tu_tensor, except that RUMUS_EDEVMEM or RUMUS_ESIZE from creating or
 * uploading it (the device cannot hold it) is a skip: returns NULL after
 * tu_skip(what, ...), and the caller frees what it made and returns.  Any
 * other failure fails the test. */
rumus_tensor *tu_tensor_or_skip(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                const size_t *shape, const void *data,
                                const char *what);

/* Seeded xorshift RNG: uniform floats in [lo, hi). */
typedef struct {
  uint64_t s;
} tu_rng;
void tu_rng_seed(tu_rng *r, uint64_t seed);
float tu_uniform(tu_rng *r, float lo, float hi);
void tu_fill_uniform(tu_rng *r, float *x, size_t n, float lo, float hi);
uint32_t tu_rand_u32(tu_rng *r);

/* Runs a suite and returns the exit status for main(): EXIT_FAILURE if a
 * test failed, else 77 if a case was skipped (see tu_skip), else
 * EXIT_SUCCESS. */
int tu_run(Suite *s);
/* A TCase with a long timeout (kernel builds are slow on a cold cache). */
TCase *tu_tcase(const char *name);

#endif /* RUMUS_TESTUTIL_H */
