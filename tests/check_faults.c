/*
 * check_faults.c - every OpenCL call the library makes, failed in turn.
 *
 * This program links a second build of the library in which every OpenCL
 * call goes through tests/faultcl.c (see faultcl.h).  A fixed scenario
 * (create a context, tensors, a wrapped application buffer, uploads (one
 * converted to F16), a fill and a copy, cross-entropy, softmax forward
 * and backward, GEMM, AdamW, sync, downloads, frees, cache clear) runs
 * once clean to count its calls and keep its outputs; then once for each
 * N with the N-th call failing, on both variants.  For each N it asserts:
 *   - the N-th call is the same function as in the clean run;
 *   - the failure surfaces as the status its cl_int maps to (RUMUS_EBUILD
 *     for a refused build) with a message naming the function: from
 *     rumus_ctx_errmsg() once the context exists (with errcode and
 *     last_cl_error agreeing), from rumus_last_create_error() before;
 *     only a release, or the wait in rumus_ctx_free(), may fail unseen,
 *     and then the outputs are still the clean run's;
 *   - the context, if it was created, still works: the scenario run again
 *     on it without faults gives the clean run's outputs bit for bit;
 *   - the ledger balances: every reference the library took is given back
 *     exactly once, and it never releases what it does not hold.
 * Each N runs with CL_OUT_OF_RESOURCES, and again with CL_OUT_OF_HOST_MEMORY
 * or CL_INVALID_VALUE (alternating), so that each mapping is seen at every
 * call site.  Further cases: the adopted context with a profiling queue,
 * device enumeration, a refused build with its log, and the "nothing
 * installed" answers of the loader.  Program builds are memoised by
 * faultcl after the first run, which keeps this to seconds.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "faultcl.h"
#include "rumus.h"

enum { ROWS = 8, CLASSES = 10, FEAT = 16 };

/* What the scenario downloads; compared bit for bit. */
typedef struct {
  float loss;
  float grad[ROWS * CLASSES], y[ROWS * CLASSES], dx[ROWS * CLASSES];
  float dw[FEAT * CLASSES], w[FEAT * CLASSES], m[FEAT * CLASSES],
      v[FEAT * CLASSES], w0[FEAT * CLASSES];
  float h[FEAT];
} outputs;

/* The scenario's tensors. */
enum { LOGITS, TARGETS, LOSS, GRAD, Y, DX, A, W, DW, M, V, W0, H, NT };

typedef struct {
  rumus_ctx *ctx;
  rumus_tensor *t[NT];
  cl_mem app; /* the application's buffer, wrapped as Y */
  int st;     /* the first failure */
  const char *where;
  char msg[2048];
  int errcode;
  cl_int clerr;
} run;

static void note_failure(run *r, const char *where) {
  r->where = where;
  if (r->ctx == NULL) {
    snprintf(r->msg, sizeof r->msg, "%s", rumus_last_create_error());
    return;
  }
  snprintf(r->msg, sizeof r->msg, "%s", rumus_ctx_errmsg(r->ctx));
  r->errcode = rumus_ctx_errcode(r->ctx);
  r->clerr = rumus_ctx_last_cl_error(r->ctx);
}

/* Runs expr unless an earlier step failed; records a failure. */
#define STEP(r, what, expr)                                \
  do {                                                     \
    if ((r)->st == RUMUS_OK) {                             \
      faultcl_phase(what);                                 \
      (r)->st = (expr);                                    \
      if ((r)->st != RUMUS_OK) note_failure((r), (what));  \
    }                                                      \
  } while (0)

/* ---- The scenario ------------------------------------------------------ */

static const size_t SHAPES[NT][2] = {
    [LOGITS] = {ROWS, CLASSES}, [TARGETS] = {ROWS, 0}, [LOSS] = {0, 0},
    [GRAD] = {ROWS, CLASSES},   [Y] = {ROWS, CLASSES}, [DX] = {ROWS, CLASSES},
    [A] = {ROWS, FEAT},         [W] = {FEAT, CLASSES}, [DW] = {FEAT, CLASSES},
    [M] = {FEAT, CLASSES},      [V] = {FEAT, CLASSES}, [W0] = {FEAT, CLASSES},
    [H] = {FEAT, 0}};
static const int NDIM[NT] = {2, 1, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1};

/* The application's buffer: 64 bytes of guard, then Y. */
enum { APP_GUARD = 64 };

static int make_app_buffer(run *r) {
  cl_int e;
  r->app = faultcl_real()->clCreateBuffer(
      rumus_ctx_cl_context(r->ctx), CL_MEM_READ_WRITE,
      APP_GUARD + sizeof(float) * ROWS * CLASSES, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  return rumus_tensor_wrap(r->ctx, RUMUS_F32, 2, SHAPES[Y], r->app, APP_GUARD,
                           &r->t[Y]);
}

static void make_tensors(run *r) {
  for (int i = 0; i < NT; i++) {
    if (i == Y)
      STEP(r, "rumus_tensor_wrap", make_app_buffer(r));
    else
      STEP(r, "rumus_tensor_create",
           rumus_tensor_create(r->ctx,
                               i == TARGETS ? RUMUS_I32
                               : i == H     ? RUMUS_F16
                                            : RUMUS_F32,
                               NDIM[i], SHAPES[i], &r->t[i]));
  }
}

static void upload(run *r) {
  float logits[ROWS * CLASSES], a[ROWS * FEAT], w[FEAT * CLASSES];
  int32_t targets[ROWS];
  for (int i = 0; i < ROWS * CLASSES; i++)
    logits[i] = (float)((i * 37) % 23) * 0.25f - 2.0f;
  for (int i = 0; i < ROWS * FEAT; i++) a[i] = (float)((i * 11) % 7) - 3.0f;
  for (int i = 0; i < FEAT * CLASSES; i++) w[i] = (float)(i % 5) * 0.125f;
  for (int i = 0; i < ROWS; i++) targets[i] = (i * 3) % CLASSES;
  STEP(r, "rumus_tensor_upload",
       rumus_tensor_upload(r->t[LOGITS], logits, sizeof logits));
  STEP(r, "rumus_tensor_upload",
       rumus_tensor_upload(r->t[TARGETS], targets, sizeof targets));
  STEP(r, "rumus_tensor_upload", rumus_tensor_upload(r->t[A], a, sizeof a));
  STEP(r, "rumus_tensor_upload", rumus_tensor_upload(r->t[W], w, sizeof w));
  STEP(r, "rumus_tensor_fill", rumus_tensor_fill(r->t[M], 0.0f));
  STEP(r, "rumus_tensor_fill", rumus_tensor_fill(r->t[V], 0.0f));
  STEP(r, "rumus_tensor_copy", rumus_tensor_copy(r->t[W0], r->t[W]));
  STEP(r, "rumus_tensor_upload_f32", rumus_tensor_upload_f32(r->t[H], a, FEAT));
}

static void ops(run *r) {
  rumus_tensor **t = r->t;
  rumus_ctx *c = r->ctx;
  const rumus_adam_params adamw = {1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  STEP(r, "rumus_cross_entropy",
       rumus_cross_entropy(c, t[LOGITS], t[TARGETS], t[LOSS], t[GRAD], NULL));
  STEP(r, "rumus_softmax_fwd", rumus_softmax_fwd(c, t[LOGITS], t[Y]));
  STEP(r, "rumus_softmax_bwd", rumus_softmax_bwd(c, t[Y], t[GRAD], t[DX]));
  STEP(r, "rumus_gemm",
       rumus_gemm(c, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0f, t[A], t[DX], 0.0f,
                  t[DW]));
  STEP(r, "rumus_adam_step",
       rumus_adam_step(c, &adamw, 1, t[W], t[DW], t[M], t[V]));
  STEP(r, "rumus_ctx_sync", rumus_ctx_sync(c));
}

static void download(run *r, outputs *o) {
  const struct {
    int t;
    void *dst;
    size_t n;
  } D[] = {{LOSS, &o->loss, sizeof o->loss}, {GRAD, o->grad, sizeof o->grad},
           {Y, o->y, sizeof o->y},           {DX, o->dx, sizeof o->dx},
           {DW, o->dw, sizeof o->dw},        {W, o->w, sizeof o->w},
           {M, o->m, sizeof o->m},           {V, o->v, sizeof o->v},
           {W0, o->w0, sizeof o->w0}};
  memset(o, 0, sizeof *o);
  for (size_t i = 0; i < sizeof D / sizeof D[0]; i++)
    STEP(r, "rumus_tensor_download",
         rumus_tensor_download(r->t[D[i].t], D[i].dst, D[i].n));
  STEP(r, "rumus_tensor_download_f32",
       rumus_tensor_download_f32(r->t[H], o->h, FEAT));
}

static void free_tensors(run *r) {
  faultcl_phase("rumus_tensor_free");
  for (int i = 0; i < NT; i++) {
    rumus_tensor_free(r->t[i]);
    r->t[i] = NULL;
  }
  if (r->app) faultcl_real()->clReleaseMemObject(r->app);
  r->app = NULL;
}

/* Everything after the context's creation; the tensors are freed. */
static void scenario_on(run *r, outputs *o) {
  make_tensors(r);
  upload(r);
  ops(r);
  download(r, o);
  free_tensors(r);
}

/* The whole scenario on a new context of the given variant: the context is
 * freed at the end unless a step failed (then it stays in r->ctx, if it was
 * made). */
static void scenario(run *r, int variant, outputs *o) {
  memset(r, 0, sizeof *r);
  STEP(r, "rumus_ctx_create", rumus_ctx_create(&r->ctx, NULL, 0));
  STEP(r, "rumus_ctx_set_option",
       rumus_ctx_set_option(r->ctx, RUMUS_OPT_VARIANT, variant));
  if (r->st != RUMUS_OK) return;
  scenario_on(r, o);
  STEP(r, "rumus_cache_clear", rumus_cache_clear(r->ctx));
  if (r->st != RUMUS_OK) return;
  STEP(r, "rumus_ctx_free", rumus_ctx_free(r->ctx));
  r->ctx = NULL;
}

/* ---- Checks ------------------------------------------------------------ */

static int expected_status(const char *fn, cl_int err) {
  if (strcmp(fn, "clBuildProgram") == 0 &&
      (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS))
    return RUMUS_EBUILD;
  if (err == CL_OUT_OF_HOST_MEMORY) return RUMUS_ENOMEM;
  if (err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE)
    return RUMUS_EDEVMEM;
  return RUMUS_ECL;
}

/* A failure the library may not report: a release (it gives up the
 * reference either way) or rumus_ctx_free's wait. */
static int may_pass_unseen(const faultcl_fault *f) {
  return strncmp(f->name, "clRelease", 9) == 0 ||
         (strcmp(f->name, "clFinish") == 0 &&
          strcmp(f->phase, "rumus_ctx_free") == 0);
}

/* The fault surfaced as it should: status, message, per-thread record. */
static void check_reported(const run *r, const faultcl_fault *f) {
  const char *id = f->phase;
  ck_assert_msg(r->st == expected_status(f->name, f->err),
                "call %lu (%s in %s) failed with %s: %s gave %s: %s", f->n,
                f->name, id, rumus_err_name(expected_status(f->name, f->err)),
                r->where, rumus_err_name(r->st), r->msg);
  ck_assert_msg(strstr(r->msg, f->name) != NULL,
                "call %lu (%s in %s): the message does not name it: %s", f->n,
                f->name, id, r->msg);
  if (r->ctx == NULL) return;
  ck_assert_msg(r->errcode == r->st && r->clerr == f->err,
                "call %lu (%s in %s): errcode %d, last_cl_error %d", f->n,
                f->name, id, r->errcode, (int)r->clerr);
}

static void check_ledger(const char *what, unsigned long n) {
  char buf[4096];
  size_t bad = faultcl_unbalanced(buf, sizeof buf);
  ck_assert_msg(bad == 0, "%s, fault at call %lu: %zu unbalanced: %s", what, n,
                bad, buf);
}

/* After a failure: the scenario again without faults on the same context
 * gives the clean outputs; then the context is freed. */
static void check_still_works(run *r, const outputs *want, unsigned long n) {
  outputs got;
  int st0 = r->st;
  r->st = RUMUS_OK;
  scenario_on(r, &got);
  ck_assert_msg(r->st == RUMUS_OK, "fault at call %lu (%s): the context then "
                "fails at %s: %s", n, rumus_err_name(st0), r->where, r->msg);
  ck_assert_msg(memcmp(&got, want, sizeof got) == 0,
                "fault at call %lu: the context's results changed", n);
  ck_assert_int_eq(rumus_ctx_free(r->ctx), RUMUS_OK);
  r->ctx = NULL;
}

/* The outcome of a run with planned faults, against the clean run. */
static void check_outcome(run *r, const outputs *got, const outputs *want,
                          const char *const *names) {
  faultcl_fault f[FAULTCL_MAX_FAULTS];
  int nf = faultcl_faults(f, FAULTCL_MAX_FAULTS);
  ck_assert_int_ge(nf, 1);
  ck_assert_msg(f[0].hit, "call %lu never came", f[0].n);
  if (names != NULL)
    ck_assert_msg(strcmp(f[0].name, names[f[0].n - 1]) == 0,
                  "call %lu is %s, was %s in the clean run", f[0].n, f[0].name,
                  names[f[0].n - 1]);
  if (r->st != RUMUS_OK) {
    check_reported(r, &f[0]);
  } else {
    ck_assert_msg(may_pass_unseen(&f[0]),
                  "call %lu (%s in %s) failed and nothing reported it",
                  f[0].n, f[0].name, f[0].phase);
    ck_assert_msg(memcmp(got, want, sizeof *got) == 0,
                  "call %lu (%s) failed unseen and the results changed",
                  f[0].n, f[0].name);
  }
  if (r->ctx != NULL) {
    free_tensors(r);
    check_still_works(r, want, f[0].n);
  }
}

/* ---- The main scenario ------------------------------------------------- */

/* Runs the scenario clean: its outputs, its calls' names (malloc'ed) and
 * their number. */
static const char **clean_run(int variant, outputs *want, unsigned long *n) {
  run r;
  faultcl_reset();
  scenario(&r, variant, want);
  ck_assert_msg(r.st == RUMUS_OK, "clean run: %s: %s: %s", r.where,
                rumus_err_name(r.st), r.msg);
  check_ledger("clean run", 0);
  *n = faultcl_calls();
  const char **names = malloc(*n * sizeof *names);
  ck_assert_ptr_nonnull(names);
  for (unsigned long i = 0; i < *n; i++) names[i] = faultcl_name(i + 1);
  return names;
}

static void fault_once(int variant, unsigned long n, cl_int err,
                       const outputs *want, const char *const *names) {
  run r;
  outputs got;
  faultcl_reset();
  faultcl_fail(n, err);
  scenario(&r, variant, &got);
  check_outcome(&r, &got, want, names);
  check_ledger(names[n - 1], n);
}

static void every_call(int variant) {
  faultcl_memo(1);
  outputs want, again;
  unsigned long n, n2;
  const char **names = clean_run(variant, &want, &n);
  /* With the builds memoised: the same calls and results. */
  const char **names2 = clean_run(variant, &again, &n2);
  ck_assert_uint_eq(n, n2);
  for (unsigned long i = 0; i < n; i++) ck_assert_str_eq(names[i], names2[i]);
  ck_assert(memcmp(&want, &again, sizeof want) == 0);
  for (unsigned long i = 1; i <= n; i++) {
    fault_once(variant, i, CL_OUT_OF_RESOURCES, &want, names);
    fault_once(variant, i, i % 2 ? CL_OUT_OF_HOST_MEMORY : CL_INVALID_VALUE,
               &want, names);
  }
  printf("faults (%s variant): %lu calls, each failed twice\n",
         variant == RUMUS_VARIANT_GPU ? "GPU" : "CPU", n);
  free(names);
  free(names2);
  faultcl_memo_clear();
}

START_TEST(every_call_gpu_variant) { every_call(RUMUS_VARIANT_GPU); }
END_TEST

START_TEST(every_call_cpu_variant) { every_call(RUMUS_VARIANT_CPU); }
END_TEST

/* A build refused on purpose (the driver never saw the source): RUMUS_EBUILD
 * with the options, and the reason the log could not be had (PoCL refuses
 * the log query of a program never built; NVIDIA gives an empty log). */
START_TEST(build_refused) {
  faultcl_memo(1);
  outputs want, got;
  unsigned long n, build = 0;
  const char **names = clean_run(RUMUS_VARIANT_CPU, &want, &n);
  for (unsigned long i = 0; i < n && !build; i++)
    if (strcmp(names[i], "clBuildProgram") == 0) build = i + 1;
  ck_assert_uint_gt(build, 0);
  run r;
  faultcl_reset();
  faultcl_fail(build, CL_BUILD_PROGRAM_FAILURE);
  scenario(&r, RUMUS_VARIANT_CPU, &got);
  check_outcome(&r, &got, &want, names);
  ck_assert_msg(strstr(r.msg, "build log:\n(unavailable: clGetProgramBuildInfo")
                    != NULL ||
                strstr(r.msg, "build log:\n(empty: the driver gave no log)")
                    != NULL, "%s", r.msg);
  check_ledger("refused build", build);
  free(names);
  faultcl_memo_clear();
}
END_TEST

/* Softmax from kernel sources that do not compile: RUMUS_EBUILD with the
 * compiler's log; with either call of clGetProgramBuildInfo (its size, its
 * text) failed, the message says why the log is missing. */
static int broken_build(char *msg, size_t len) {
  rumus_ctx *ctx = NULL;
  rumus_tensor *t = NULL;
  size_t shape[2] = {2, 3};
  int st = rumus_ctx_create(&ctx, NULL, 0);
  ck_assert_int_eq(st, RUMUS_OK);
  ck_assert_int_eq(rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT,
                                        RUMUS_VARIANT_CPU), RUMUS_OK);
  ck_assert_int_eq(rumus_tensor_create(ctx, RUMUS_F32, 2, shape, &t), RUMUS_OK);
  st = rumus_softmax_fwd(ctx, t, t);
  snprintf(msg, len, "%s", rumus_ctx_errmsg(ctx));
  rumus_tensor_free(t);
  ck_assert_int_eq(rumus_ctx_free(ctx), RUMUS_OK);
  return st;
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

START_TEST(build_log_lost) {
  char dir[] = "/tmp/rumus-faults-XXXXXX", msg[8192];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  write_file(dir, "common.cl", "/* empty */\n");
  write_file(dir, "softmax.cl", "__kernel void k(void) { not C at all; }\n");
  setenv("RUMUS_KERNEL_DIR", dir, 1);
  faultcl_reset();
  ck_assert_int_eq(broken_build(msg, sizeof msg), RUMUS_EBUILD);
  ck_assert_msg(strstr(msg, "build log:\n") && strstr(msg, "error"), "%s", msg);
  unsigned long n = faultcl_calls(), info[2] = {0, 0};
  for (unsigned long i = 1, k = 0; i <= n && k < 2; i++)
    if (strcmp(faultcl_name(i), "clGetProgramBuildInfo") == 0) info[k++] = i;
  ck_assert_msg(info[1] == info[0] + 1, "the log is read in two calls");
  for (int k = 0; k < 2; k++) {
    faultcl_reset();
    faultcl_fail(info[k], CL_OUT_OF_RESOURCES);
    ck_assert_int_eq(broken_build(msg, sizeof msg), RUMUS_EBUILD);
    ck_assert_msg(strstr(msg, "(unavailable: clGetProgramBuildInfo: "
                              "CL_OUT_OF_RESOURCES)"), "%s", msg);
    check_ledger("lost build log", info[k]);
  }
  unsetenv("RUMUS_KERNEL_DIR");
  char path[512];
  snprintf(path, sizeof path, "%s/common.cl", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/softmax.cl", dir);
  remove(path);
  rmdir(dir);
}
END_TEST

/* The loader's answers when nothing is installed: no platform, or a
 * platform without devices, is RUMUS_ENODEVICE, not an OpenCL failure. */
START_TEST(nothing_installed) {
  rumus_ctx *ctx = NULL;
  faultcl_reset();
  faultcl_fail(1, -1001); /* CL_PLATFORM_NOT_FOUND_KHR */
  ck_assert_int_eq(rumus_ctx_create(&ctx, NULL, 0), RUMUS_ENODEVICE);
  ck_assert_ptr_null(ctx);
  int count = -1;
  faultcl_reset();
  faultcl_fail(1, -1001);
  ck_assert_int_eq(rumus_device_count(&count), RUMUS_OK);
  ck_assert_int_eq(count, 0);
  /* Every platform answers CL_DEVICE_NOT_FOUND: calls 1 and 2 list the
   * platforms, then each platform's device count is asked (and the list
   * is not, for none). */
  cl_uint np = 0;
  ck_assert_int_eq(faultcl_real()->clGetPlatformIDs(0, NULL, &np), CL_SUCCESS);
  if (np <= FAULTCL_MAX_FAULTS) {
    faultcl_reset();
    for (unsigned long i = 3; i < 3 + np; i++)
      faultcl_fail(i, CL_DEVICE_NOT_FOUND);
    ck_assert_int_eq(rumus_device_count(&count), RUMUS_OK);
    ck_assert_int_eq(count, 0);
    faultcl_reset();
    for (unsigned long i = 3; i < 3 + np; i++)
      faultcl_fail(i, CL_DEVICE_NOT_FOUND);
    ck_assert_int_eq(rumus_ctx_create(&ctx, NULL, 0), RUMUS_ENODEVICE);
    ck_assert_ptr_null(ctx);
  }
  check_ledger("nothing installed", 1);
}
END_TEST

/* ---- Device enumeration ------------------------------------------------ */

static int describe_all(char *buf, size_t len) {
  int n = 0, st = rumus_device_count(&n);
  for (int i = 0; st == RUMUS_OK && i < n; i++)
    st = rumus_device_describe(i, buf, len);
  return st;
}

START_TEST(device_queries) {
  char want[512], got[512];
  faultcl_reset();
  ck_assert_int_eq(describe_all(want, sizeof want), RUMUS_OK);
  unsigned long n = faultcl_calls();
  for (unsigned long i = 1; i <= n; i++) {
    faultcl_reset();
    faultcl_fail(i, CL_OUT_OF_HOST_MEMORY);
    int st = describe_all(got, sizeof got);
    faultcl_fault f;
    faultcl_faults(&f, 1);
    ck_assert_msg(f.hit && st == RUMUS_ENOMEM &&
                  strstr(rumus_last_create_error(), f.name) != NULL,
                  "call %lu (%s): %s: %s", i, f.name, rumus_err_name(st),
                  rumus_last_create_error());
    check_ledger("device queries", i);
  }
  ck_assert_int_eq(describe_all(got, sizeof got), RUMUS_OK);
  ck_assert_str_eq(got, want);
}
END_TEST

/* ---- An adopted context with a profiling queue ------------------------- */

typedef struct {
  cl_context context;
  cl_device_id device;
  cl_command_queue queue;
} app_objects;

static app_objects app_make(void) {
  const faultcl_table *cl = faultcl_real();
  app_objects a;
  cl_platform_id p;
  cl_int e = cl->clGetPlatformIDs(1, &p, NULL);
  ck_assert_int_eq(e, CL_SUCCESS);
  e = cl->clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &a.device, NULL);
  ck_assert_int_eq(e, CL_SUCCESS);
  a.context = cl->clCreateContext(NULL, 1, &a.device, NULL, NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  a.queue = cl->clCreateCommandQueue(a.context, a.device,
                                     CL_QUEUE_PROFILING_ENABLE, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  return a;
}

/* Adopts the application's objects, runs the scenario with kernel timing
 * and frees the context (unless a step failed). */
static void adopted_scenario(run *r, const app_objects *a, outputs *o) {
  memset(r, 0, sizeof *r);
  STEP(r, "rumus_ctx_adopt",
       rumus_ctx_adopt(&r->ctx, a->context, a->device, a->queue));
  if (r->st != RUMUS_OK) return;
  make_tensors(r);
  upload(r);
  ops(r);
  uint64_t ns = 0;
  STEP(r, "rumus_ctx_kernel_time", rumus_ctx_kernel_time(r->ctx, &ns));
  download(r, o);
  free_tensors(r);
  if (r->st != RUMUS_OK) return;
  STEP(r, "rumus_ctx_free", rumus_ctx_free(r->ctx));
  r->ctx = NULL;
}

START_TEST(every_call_adopted_profiling) {
  faultcl_memo(1);
  app_objects a = app_make();
  outputs want, got;
  run r;
  faultcl_reset();
  adopted_scenario(&r, &a, &want);
  ck_assert_msg(r.st == RUMUS_OK, "%s: %s", r.where, r.msg);
  check_ledger("adopted, clean", 0);
  unsigned long n = faultcl_calls();
  const char **names = malloc(n * sizeof *names);
  ck_assert_ptr_nonnull(names);
  for (unsigned long i = 0; i < n; i++) names[i] = faultcl_name(i + 1);
  for (unsigned long i = 1; i <= n; i++) {
    faultcl_reset();
    faultcl_fail(i, i % 2 ? CL_OUT_OF_RESOURCES : CL_INVALID_VALUE);
    adopted_scenario(&r, &a, &got);
    check_outcome(&r, &got, &want, names);
    check_ledger(names[i - 1], i);
  }
  printf("faults (adopted context, profiling): %lu calls\n", n);
  free(names);
  const faultcl_table *cl = faultcl_real();
  cl->clReleaseCommandQueue(a.queue);
  cl->clReleaseContext(a.context);
  faultcl_memo_clear();
}
END_TEST

int main(void) {
  Suite *s = suite_create("faults");
  TCase *tc = tcase_create("faults");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, every_call_gpu_variant);
  tcase_add_test(tc, every_call_cpu_variant);
  tcase_add_test(tc, every_call_adopted_profiling);
  tcase_add_test(tc, build_refused);
  tcase_add_test(tc, build_log_lost);
  tcase_add_test(tc, device_queries);
  tcase_add_test(tc, nothing_installed);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
