/*
 * check_threads.c - two threads share one context.  One makes calls that
 * fail on bad arguments, each with a message of its own (a number that
 * changes every call), and checks after each that its status, error code
 * and message are its own; it creates, reshapes and frees tensors of its
 * own meanwhile.  The other runs ops (cross-entropy, softmax forward and
 * backward, GEMM, AdamW) and downloads their results, which must equal a
 * single-threaded run of the same ops bit for bit; each round it also
 * makes a cross-entropy with a target out of range, whose RUMUS_EINDEX
 * from rumus_ctx_sync() must carry its own message, untouched by the
 * other thread's failures until its next failure.
 * scripts/dev.sh test runs this under ThreadSanitizer as well as
 * AddressSanitizer.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { ROWS = 6, CLASSES = 33, FEAT = 12, ROUNDS = 12 };

/* What the op thread downloads each round. */
typedef struct {
  float loss, grad[ROWS * CLASSES], y[ROWS * CLASSES], dx[ROWS * CLASSES];
  float dw[FEAT * CLASSES], w[FEAT * CLASSES];
} outputs;

enum { LOGITS, TARGETS, BAD_TARGETS, LOSS, GRAD, Y, DX, A, W, DW, M, V, NT };

typedef struct {
  rumus_ctx *ctx;
  rumus_tensor *t[NT];
} op_tensors;

/* The first thing a thread found wrong (threads do not call Check). */
typedef struct {
  char what[1024];
} verdict;

static void blame(verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void blame(verdict *v, const char *fmt, ...) {
  if (v->what[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->what, sizeof v->what, fmt, ap);
  va_end(ap);
}

/* ---- The op thread ----------------------------------------------------- */

static const size_t SHAPES[NT][2] = {
    [LOGITS] = {ROWS, CLASSES}, [TARGETS] = {ROWS, 0},
    [BAD_TARGETS] = {ROWS, 0},  [LOSS] = {0, 0},
    [GRAD] = {ROWS, CLASSES},   [Y] = {ROWS, CLASSES},
    [DX] = {ROWS, CLASSES},     [A] = {ROWS, FEAT},
    [W] = {FEAT, CLASSES},      [DW] = {FEAT, CLASSES},
    [M] = {FEAT, CLASSES},      [V] = {FEAT, CLASSES}};
static const int NDIM[NT] = {2, 1, 1, 0, 2, 2, 2, 2, 2, 2, 2, 2};
enum { BAD_ROW = 3, BAD_CLASS = 99 };

/* The op thread's tensors, with their inputs. */
static int op_setup(op_tensors *o) {
  float logits[ROWS * CLASSES], a[ROWS * FEAT];
  int32_t targets[ROWS], bad[ROWS];
  int st = RUMUS_OK;
  for (int i = 0; i < NT && st == RUMUS_OK; i++)
    st = rumus_tensor_create(
        o->ctx, i == TARGETS || i == BAD_TARGETS ? RUMUS_I32 : RUMUS_F32,
        NDIM[i], SHAPES[i], &o->t[i]);
  for (int i = 0; i < ROWS * CLASSES; i++)
    logits[i] = (float)((i * 29) % 31) * 0.3f - 4.0f;
  for (int i = 0; i < ROWS * FEAT; i++) a[i] = (float)((i * 7) % 9) - 4.0f;
  for (int i = 0; i < ROWS; i++) targets[i] = bad[i] = (i * 5) % CLASSES;
  bad[BAD_ROW] = BAD_CLASS;
  if (st == RUMUS_OK)
    st = rumus_tensor_upload(o->t[LOGITS], logits, sizeof logits);
  if (st == RUMUS_OK)
    st = rumus_tensor_upload(o->t[TARGETS], targets, sizeof targets);
  if (st == RUMUS_OK)
    st = rumus_tensor_upload(o->t[BAD_TARGETS], bad, sizeof bad);
  if (st == RUMUS_OK) st = rumus_tensor_upload(o->t[A], a, sizeof a);
  return st;
}

/* One round of ops from the same starting parameters. */
static int op_round(op_tensors *o, outputs *out) {
  rumus_tensor **t = o->t;
  rumus_ctx *c = o->ctx;
  const rumus_adam_params adamw = {1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  float w[FEAT * CLASSES];
  for (int i = 0; i < FEAT * CLASSES; i++) w[i] = (float)(i % 7) * 0.0625f;
  int st = rumus_tensor_upload(t[W], w, sizeof w);
  if (st == RUMUS_OK) st = rumus_tensor_fill(t[M], 0.0f);
  if (st == RUMUS_OK) st = rumus_tensor_fill(t[V], 0.0f);
  if (st == RUMUS_OK)
    st = rumus_cross_entropy(c, t[LOGITS], t[TARGETS], t[LOSS], t[GRAD], NULL);
  if (st == RUMUS_OK) st = rumus_softmax_fwd(c, t[LOGITS], t[Y]);
  if (st == RUMUS_OK) st = rumus_softmax_bwd(c, t[Y], t[GRAD], t[DX]);
  if (st == RUMUS_OK)
    st = rumus_gemm(c, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0f, t[A], t[DX], 0.0f,
                    t[DW]);
  if (st == RUMUS_OK)
    st = rumus_adam_step(c, &adamw, 1, t[W], t[DW], t[M], t[V]);
  if (st == RUMUS_OK) st = rumus_ctx_sync(c);
  const struct {
    int t;
    void *dst;
    size_t n;
  } D[] = {{LOSS, &out->loss, sizeof out->loss},
           {GRAD, out->grad, sizeof out->grad}, {Y, out->y, sizeof out->y},
           {DX, out->dx, sizeof out->dx},       {DW, out->dw, sizeof out->dw},
           {W, out->w, sizeof out->w}};
  for (size_t i = 0; i < sizeof D / sizeof D[0] && st == RUMUS_OK; i++)
    st = rumus_tensor_download(t[D[i].t], D[i].dst, D[i].n);
  return st;
}

/* A cross-entropy with a target out of range: the next sync's RUMUS_EINDEX
 * names it, and the message stays this thread's until its next failure. */
static void op_bad_target(op_tensors *o, verdict *v, int round) {
  char want[128];
  snprintf(want, sizeof want, "target %d out of range at row %d", BAD_CLASS,
           BAD_ROW);
  int st = rumus_cross_entropy(o->ctx, o->t[LOGITS], o->t[BAD_TARGETS],
                               o->t[LOSS], NULL, NULL);
  if (st == RUMUS_OK) st = rumus_ctx_sync(o->ctx);
  if (st != RUMUS_EINDEX || rumus_ctx_errcode(o->ctx) != RUMUS_EINDEX ||
      strstr(rumus_ctx_errmsg(o->ctx), want) == NULL)
    blame(v, "round %d: bad target gave %s (errcode %s): \"%s\"", round,
          rumus_err_name(st), rumus_err_name(rumus_ctx_errcode(o->ctx)),
          rumus_ctx_errmsg(o->ctx));
}

typedef struct {
  rumus_ctx *ctx;
  const outputs *want; /* NULL: the single-threaded run that makes it */
  outputs *made;
  pthread_barrier_t *start;
  int done; /* the op thread finished (under done_lock) */
  pthread_mutex_t done_lock;
  verdict v;
} op_job;

static void op_check_round(op_job *j, op_tensors *o, int round) {
  outputs got;
  int st = op_round(o, &got);
  if (st != RUMUS_OK) {
    blame(&j->v, "round %d: %s: %s", round, rumus_err_name(st),
          rumus_ctx_errmsg(j->ctx));
    return;
  }
  if (j->want == NULL) *j->made = got;
  else if (memcmp(&got, j->want, sizeof got) != 0)
    blame(&j->v, "round %d: the results differ from the single-threaded run",
          round);
  /* Successful calls leave the last failure (if any) alone. */
  if (round > 0 && strstr(rumus_ctx_errmsg(j->ctx), "out of range") == NULL)
    blame(&j->v, "round %d: the thread's message became \"%s\"", round,
          rumus_ctx_errmsg(j->ctx));
}

static void *op_thread(void *arg) {
  op_job *j = arg;
  op_tensors o = {j->ctx, {NULL}};
  int st = op_setup(&o);
  if (st != RUMUS_OK)
    blame(&j->v, "setup: %s: %s", rumus_err_name(st), rumus_ctx_errmsg(j->ctx));
  if (rumus_ctx_errmsg(j->ctx)[0] != '\0')
    blame(&j->v, "a message before any failure: \"%s\"",
          rumus_ctx_errmsg(j->ctx));
  if (j->start) pthread_barrier_wait(j->start);
  for (int round = 0; round < ROUNDS && st == RUMUS_OK && !j->v.what[0];
       round++) {
    op_check_round(j, &o, round);
    op_bad_target(&o, &j->v, round);
  }
  for (int i = 0; i < NT; i++) rumus_tensor_free(o.t[i]);
  pthread_mutex_lock(&j->done_lock);
  j->done = 1;
  pthread_mutex_unlock(&j->done_lock);
  return NULL;
}

/* ---- The failing thread ------------------------------------------------ */

typedef struct {
  rumus_ctx *ctx;
  op_job *ops; /* runs until its op thread is done */
  pthread_barrier_t *start;
  long calls;
  verdict v;
} fail_job;

/* Asserts (into the verdict) a failure with its code and message part. */
static void expect(fail_job *j, int st, int want, const char *part) {
  const char *msg = rumus_ctx_errmsg(j->ctx);
  if (st != want || rumus_ctx_errcode(j->ctx) != want ||
      rumus_ctx_last_cl_error(j->ctx) != CL_SUCCESS || !strstr(msg, part))
    blame(&j->v, "call %ld: %s (errcode %s), wanted %s with \"%s\": \"%s\"",
          j->calls, rumus_err_name(st),
          rumus_err_name(rumus_ctx_errcode(j->ctx)), rumus_err_name(want),
          part, msg);
  j->calls++;
}

/* One pass over failing calls; i makes each message different. */
static void bad_calls(fail_job *j, rumus_tensor *mine, rumus_tensor *ints,
                      long i) {
  char part[128];
  size_t shape[2] = {4, 5}, bad_shape[2] = {3, (size_t)(7 + i % 50)};
  rumus_tensor *t = NULL;
  int nd = 9 + (int)(i % 40);
  snprintf(part, sizeof part, "ndim %d is outside", nd);
  expect(j, rumus_tensor_create(j->ctx, RUMUS_F32, nd, shape, &t),
         RUMUS_EINVAL, part);
  snprintf(part, sizeof part, "%ld bytes given, the tensor holds 80",
           8 + i % 64);
  float host[80] = {0};
  expect(j, rumus_tensor_upload(mine, host, (size_t)(8 + i % 64)),
         RUMUS_ESIZE, part);
  snprintf(part, sizeof part, "20 elements cannot take a shape of %zu",
           3 * bad_shape[1]);
  expect(j, rumus_tensor_reshape(mine, 2, bad_shape), RUMUS_ESHAPE, part);
  expect(j, rumus_tensor_fill(ints, NAN), RUMUS_EINVAL,
         "NaN cannot fill an int32 tensor");
  expect(j, rumus_softmax_fwd(j->ctx, mine, ints), RUMUS_EDTYPE, "i32");
}

static int ops_done(op_job *o) {
  pthread_mutex_lock(&o->done_lock);
  int d = o->done;
  pthread_mutex_unlock(&o->done_lock);
  return d;
}

static void *fail_thread(void *arg) {
  fail_job *j = arg;
  size_t shape[2] = {4, 5};
  pthread_barrier_wait(j->start);
  for (long i = 0; !ops_done(j->ops) || i < 200; i++) {
    rumus_tensor *mine = NULL, *ints = NULL;
    int st = rumus_tensor_create(j->ctx, RUMUS_F32, 2, shape, &mine);
    if (st == RUMUS_OK)
      st = rumus_tensor_create(j->ctx, RUMUS_I32, 2, shape, &ints);
    if (st != RUMUS_OK) {
      blame(&j->v, "create: %s", rumus_err_name(st));
      rumus_tensor_free(mine);
      break;
    }
    bad_calls(j, mine, ints, i);
    rumus_tensor_free(mine);
    rumus_tensor_free(ints);
    if (j->v.what[0]) break;
  }
  return NULL;
}

START_TEST(failing_and_working_threads) {
  rumus_ctx *ctx = tu_ctx();
  for (int v = 0; v < 2; v++) {
    tu_set_variant(ctx, tu_variants[v]);
    outputs want;
    op_job single = {.ctx = ctx, .made = &want};
    pthread_mutex_init(&single.done_lock, NULL);
    pthread_t th[2];
    ck_assert_int_eq(pthread_create(&th[0], NULL, op_thread, &single), 0);
    pthread_join(th[0], NULL);
    ck_assert_msg(!single.v.what[0], "single-threaded: %s", single.v.what);

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    op_job ops = {.ctx = ctx, .want = &want, .start = &start};
    pthread_mutex_init(&ops.done_lock, NULL);
    fail_job bad = {.ctx = ctx, .ops = &ops, .start = &start};
    ck_assert_int_eq(pthread_create(&th[0], NULL, op_thread, &ops), 0);
    ck_assert_int_eq(pthread_create(&th[1], NULL, fail_thread, &bad), 0);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    pthread_barrier_destroy(&start);
    pthread_mutex_destroy(&ops.done_lock);
    pthread_mutex_destroy(&single.done_lock);
    ck_assert_msg(!ops.v.what[0], "%s variant, op thread: %s",
                  tu_variant_name(tu_variants[v]), ops.v.what);
    ck_assert_msg(!bad.v.what[0], "%s variant, failing thread: %s",
                  tu_variant_name(tu_variants[v]), bad.v.what);
    ck_assert_int_ge(bad.calls, 1000);
    /* This thread failed on neither: its record is empty. */
    ck_assert_str_eq(rumus_ctx_errmsg(ctx), "");
    ck_assert_int_eq(rumus_ctx_errcode(ctx), RUMUS_OK);
  }
  tu_free_all(ctx, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("threads");
  TCase *tc = tu_tcase("threads");
  tcase_add_test(tc, failing_and_working_threads);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
