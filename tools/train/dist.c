/* dist.c - see dist.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "dist.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#ifdef RUMUS_TRAIN_MPI
#include <mpi.h>
#endif

/* ---- The collectives ---------------------------------------------------
 * Every MPI call of rumus-train is here.  MPI's default error handler,
 * MPI_ERRORS_ARE_FATAL, is kept: a failed collective ends the whole job
 * (mpirun reports it) instead of leaving a rank waiting.  Built without
 * MPI, d->active is never set and none of these is called. */

#ifdef RUMUS_TRAIN_MPI
static void sum_floats(float *buf, size_t n) {
  MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void sum_doubles(double *buf, int n) {
  MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
static int min_int(int v) {
  int out = v;
  MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return out;
}
static void min_ulongs(unsigned long *buf, int n) {
  MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_UNSIGNED_LONG, MPI_MIN, MPI_COMM_WORLD);
}
#else
static void sum_floats(float *buf, size_t n) { (void)buf, (void)n; }
static void sum_doubles(double *buf, int n) { (void)buf, (void)n; }
static int min_int(int v) { return v; }
static void min_ulongs(unsigned long *buf, int n) { (void)buf, (void)n; }
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- Ranks, devices, agreement ---------------------------------------- */

int dist_init(train_dist *d, int want, int *argc, char ***argv, char *err,
              size_t errlen) {
  memset(d, 0, sizeof *d);
  d->size = d->local_size = 1;
  d->failed_rank = -1;
  d->weight = 1.0;
  if (!want) {
    /* mpirun without --mpi: N independent runs, each printing and saving
     * alone; legal, but rarely what was meant. */
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    if (n && atoi(n) > 1)
      fprintf(stderr, "rumus-train: warning: started as one of %d MPI processes "
              "without --mpi: each trains alone\n", atoi(n));
    return 0;
  }
#ifdef RUMUS_TRAIN_MPI
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &d->size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank,
                      MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &d->local_rank);
  MPI_Comm_size(node, &d->local_size);
  MPI_Comm_free(&node);
  d->active = 1;
  const char *fault = getenv("RUMUS_TRAIN_FAULT_STEP");
  if (fault && *fault) {
    char *end = NULL;
    d->fault_step = strtol(fault, &end, 10);
    d->fault_after = end && strcmp(end, ":after") == 0;
  }
  return 0;
#else
  (void)argc, (void)argv;
  train_fail(err, errlen, RUMUS_EUNSUPPORTED,
             "--mpi: this rumus-train was built without MPI (configure "
             "found no mpicc; install Open MPI, Debian: openmpi-bin "
             "libopenmpi-dev, and run configure again)");
  return -1;
#endif
}

void dist_finalize(train_dist *d) {
  train_batcher_free(&d->io);
  free(d->buf);
  free(d->perm);
  d->buf = NULL;
  d->perm = NULL;
#ifdef RUMUS_TRAIN_MPI
  if (d->active) MPI_Finalize();
#endif
  d->active = 0;
}

/* Whether rumus_device_describe()'s text says GPU: its last parenthesis
 * opens with "GPU," or "not a GPU,". */
static int described_gpu(const char *desc) {
  const char *p = strrchr(desc, '(');
  return p && strncmp(p, "(GPU,", 5) == 0;
}

const char *dist_device(const train_dist *d, const char *given, char *buf,
                        size_t len) {
  if (given || !d->active) return given;
  const char *env = getenv("RUMUS_DEVICE");
  if (env && *env) return NULL;
  int n = 0, ngpu = 0, pick = -1;
  /* A failure here is left to rumus_ctx_create(), which reports it. */
  if (rumus_device_count(&n) != RUMUS_OK || n <= 0) return NULL;
  for (int i = 0; i < n; i++) {
    char desc[1024];
    if (rumus_device_describe(i, desc, sizeof desc) == RUMUS_OK && described_gpu(desc))
      ngpu++;
  }
  int want = ngpu > 0 ? d->local_rank % ngpu : d->local_rank % n;
  for (int i = 0, k = 0; i < n && pick < 0; i++) {
    char desc[1024];
    int gpu = rumus_device_describe(i, desc, sizeof desc) == RUMUS_OK &&
              described_gpu(desc);
    if (ngpu > 0 && !gpu) continue;
    if (k++ == want) pick = i;
  }
  if (pick < 0) return NULL;
  snprintf(buf, len, "%d", pick);
  return buf;
}

size_t dist_local_batch(const train_dist *d, size_t batch) {
  size_t b = (batch + (size_t)d->size - 1) / (size_t)d->size;
  return b ? b : 1;
}

int dist_agree(train_dist *d, int failed, const char *when) {
  if (!d->active) return failed ? -1 : 0;
  int first = min_int(failed ? d->rank : d->size);
  if (first == d->size) return 0;
  d->failed_rank = first;
  if (failed)
    fprintf(stderr, "rumus-train: rank %d of %d: the error above stops every rank\n",
            d->rank, d->size);
  else
    fprintf(stderr, "rumus-train: rank %d of %d: stopping: rank %d failed %s\n",
            d->rank, d->size, first, when);
  return -1;
}

void dist_print_error(const train_dist *d, const char *what, const char *msg) {
  if (d->err[0]) msg = d->err;
  if (!d->active)
    fprintf(stderr, "rumus-train: %s: %s\n", what, msg);
  else if (d->own_failure || d->failed_rank < 0)
    fprintf(stderr, "rumus-train: rank %d of %d: %s: %s\n", d->rank, d->size,
            what, msg);
  else
    fprintf(stderr, "rumus-train: rank %d of %d: %s: stopped, rank %d failed "
            "(its message is on its standard error)\n",
            d->rank, d->size, what, d->failed_rank);
}

/* After a collective whose flag said that some rank failed: every rank
 * learns the first one that failed by itself (one more collective, which
 * every rank reaches since all saw the same flag).  Returns this rank's
 * status: its own failure's, or TRAIN_EPEER. */
static int settle_failure(train_dist *d, int st) {
  d->failed_rank = min_int(d->own_failure ? d->rank : d->size);
  return d->own_failure && st != RUMUS_OK ? st : TRAIN_EPEER;
}

/* ---- The model, as the loop sees it ----------------------------------- */

static int is_cnn(const train_model *t) { return t->kind == TRAIN_MODEL_CNN; }

static int model_step(train_model *t, const float *x, const int32_t *y,
                      size_t n, double *loss, size_t *correct) {
  return is_cnn(t) ? cnn_train_step(t->cnn, x, y, n, loss, correct)
                   : mlp_train_step(t->mlp, x, y, n, loss, correct);
}

/* ---- The gradient exchange -------------------------------------------- */

/* The gradients into d->buf as floats, weighted by this rank's share of
 * the batch's rows.  A rank without rows (weight 0) sends zeros, even if
 * its dummy row's gradients overflowed. */
static int gather_grads(train_dist *d, char *err, size_t errlen) {
  size_t off = 0;
  for (int i = 0; i < d->ngrads; i++) {
    size_t n = rumus_tensor_numel(d->grads[i]);
    int st = rumus_tensor_download_f32(d->grads[i], d->buf + off, n);
    if (st != RUMUS_OK)
      return train_rumus_fail(err, errlen, d->ctx, st, "gradient exchange: download");
    off += n;
  }
  if (d->weight == 0.0) {
    memset(d->buf, 0, d->nbuf * sizeof *d->buf);
  } else if (d->weight != 1.0) {
    float w = (float)d->weight;
    for (size_t i = 0; i < d->nbuf; i++) d->buf[i] *= w;
  }
  return RUMUS_OK;
}

static int scatter_grads(train_dist *d, char *err, size_t errlen) {
  size_t off = 0;
  for (int i = 0; i < d->ngrads; i++) {
    size_t n = rumus_tensor_numel(d->grads[i]);
    int st = rumus_tensor_upload_f32(d->grads[i], d->buf + off, n);
    if (st != RUMUS_OK)
      return train_rumus_fail(err, errlen, d->ctx, st, "gradient exchange: upload");
    off += n;
  }
  return RUMUS_OK;
}

/* The gradient hook (train_grad_hook) of every step with more than one
 * rank: download, one MPI_Allreduce (MPI_SUM) of the fused buffer with
 * the failure flag at its end, upload.  Not overlapped with the backward
 * pass: rumus's downloads block and the queue is in order, so the first
 * download waits for the whole backward anyway; overlapping would take
 * per-layer hooks inside the backward and non-blocking reads, and on
 * PoCL the device and MPI share the same CPU cores. */
static int exchange_hook(void *user, char *err, size_t errlen) {
  train_dist *d = user;
  /* The backward first, so that exchange_s times the exchange alone (the
   * allreduce's wait for a slower rank included). */
  int st = rumus_ctx_sync(d->ctx);
  if (st != RUMUS_OK)
    st = train_rumus_fail(err, errlen, d->ctx, st, "the backward pass");
  double t0 = now_s();
  if (st == RUMUS_OK) st = gather_grads(d, err, errlen);
  if (st != RUMUS_OK) d->own_failure = 1;
  d->buf[d->nbuf] = st != RUMUS_OK ? 1.0f : 0.0f;
  sum_floats(d->buf, d->nbuf + 1);
  d->reduced = 1;
  if (st != RUMUS_OK) return st;
  if (d->buf[d->nbuf] != 0.0f) {
    d->peer_stop = 1;
    return train_fail(err, errlen, TRAIN_EPEER,
                      "gradient exchange: stopped, another rank failed");
  }
  st = scatter_grads(d, err, errlen);
  if (st != RUMUS_OK) d->own_failure = 1;
  d->exchange_s += now_s() - t0;
  return st;
}

/* The end of every step: a rank that failed before its gradient exchange
 * joins it now with its flag set; then the step's loss x rows, correct
 * predictions and rows (sums[0..3)) are summed with the failure flag. */
static int step_end(train_dist *d, int st, double sums[3]) {
  if (!d->active) return st;
  if (st != RUMUS_OK && !d->peer_stop) d->own_failure = 1;
  if (d->ngrads > 0 && !d->reduced) {
    memset(d->buf, 0, d->nbuf * sizeof *d->buf);
    d->buf[d->nbuf] = 1.0f;
    sum_floats(d->buf, d->nbuf + 1);
    d->reduced = 1;
  }
  double v[4] = {sums[0], sums[1], sums[2], st != RUMUS_OK ? 1.0 : 0.0};
  sum_doubles(v, 4);
  if (v[3] != 0.0) return settle_failure(d, st);
  memcpy(sums, v, 3 * sizeof *v);
  return RUMUS_OK;
}

/* ---- Binding ---------------------------------------------------------- */

static int bind_exchange(train_dist *d, train_model *t, char *err,
                         size_t errlen) {
  int n = is_cnn(t) ? cnn_grad_tensors(t->cnn, d->grads, DIST_MAX_GRADS)
                    : mlp_grad_tensors(t->mlp, d->grads, DIST_MAX_GRADS);
  if (n <= 0)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "gradient exchange: the model has more than %d gradient tensors",
                      DIST_MAX_GRADS);
  d->ngrads = n;
  d->nbuf = 0;
  for (int i = 0; i < n; i++) d->nbuf += rumus_tensor_numel(d->grads[i]);
  if (d->nbuf >= (size_t)INT_MAX)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "gradient exchange: %zu gradients, more than one "
                      "MPI_Allreduce takes", d->nbuf);
  d->buf = malloc((d->nbuf + 1) * sizeof *d->buf);
  if (!d->buf)
    return train_fail(err, errlen, RUMUS_ENOMEM,
                      "gradient exchange: out of host memory for %zu floats", d->nbuf);
  if (is_cnn(t))
    cnn_set_grad_hook(t->cnn, exchange_hook, d);
  else
    mlp_set_grad_hook(t->mlp, exchange_hook, d);
  return RUMUS_OK;
}

int dist_bind(train_dist *d, train_model *t, rumus_ctx *ctx, size_t count,
              size_t batch, char *err, size_t errlen) {
  d->ctx = ctx;
  if (train_batcher_alloc(&d->io, dist_local_batch(d, batch)) != RUMUS_OK ||
      !(d->perm = malloc((count ? count : 1) * sizeof *d->perm)))
    return train_fail(err, errlen, RUMUS_ENOMEM, "out of host memory for the batches");
  d->perm_len = count;
  if (is_cnn(t)) cnn_set_dropout_lane(t->cnn, (uint64_t)d->rank, (uint64_t)d->size);
  return d->size > 1 ? bind_exchange(d, t, err, errlen) : RUMUS_OK;
}

/* ---- Epochs and evaluation -------------------------------------------- */

/* One step on this rank's shard [lo, hi) of the global batch at
 * perm[start..start + n); sums as step_end(). */
static int shard_step(train_dist *d, train_model *t, const mnist_set *set,
                      size_t start, size_t n, double sums[3]) {
  size_t lo = n * (size_t)d->rank / (size_t)d->size;
  size_t hi = n * (size_t)(d->rank + 1) / (size_t)d->size;
  /* Without rows of its own a rank still steps (the exchange and the
   * update are collective), on the batch's first row with weight 0. */
  size_t rows = hi > lo ? hi - lo : 1;
  d->weight = (double)(hi - lo) / (double)n;
  d->reduced = 0;
  mnist_batch(set, d->perm + start + (hi > lo ? lo : 0), rows,
              model_in_mean(t), model_in_std(t), d->io.x, d->io.y);
  double loss = 0.0;
  size_t ok = 0;
  int fault = d->fault_step > 0 && ++d->steps == d->fault_step;
  int st = fault && !d->fault_after
               ? RUMUS_ECL
               : model_step(t, d->io.x, d->io.y, rows, &loss, &ok);
  if (fault && st == RUMUS_OK) st = RUMUS_ECL;
  if (fault)
    snprintf(d->err, sizeof d->err, "a fault injected %s step %ld (RUMUS_TRAIN_FAULT_STEP)",
             d->fault_after ? "after" : "before", d->steps);
  sums[0] = loss * (double)(hi - lo);
  sums[1] = hi > lo ? (double)ok : 0.0;
  sums[2] = (double)(hi - lo);
  return step_end(d, st, sums);
}

int dist_train_epoch(train_dist *d, train_model *t, const mnist_set *set,
                     size_t batch, mlp_rng *rng, long *steps_left,
                     mlp_progress_fn fn, void *user, mlp_progress *out) {
  size_t count = set->count < d->perm_len ? set->count : d->perm_len;
  for (size_t i = 0; i < count; i++) d->perm[i] = (uint32_t)i;
  mlp_shuffle(rng, d->perm, count);
  mlp_progress p = {0, (count + batch - 1) / batch, 0, 0.0, 0};
  int st = RUMUS_OK;
  for (size_t start = 0; start < count && *steps_left != 0; start += batch) {
    size_t n = count - start < batch ? count - start : batch;
    double sums[3];
    st = shard_step(d, t, set, start, n, sums);
    if (st != RUMUS_OK) break;
    p.step++;
    p.seen += (size_t)sums[2];
    p.loss_sum += sums[0];
    p.correct += (size_t)sums[1];
    if (*steps_left > 0) --*steps_left;
    if (fn) fn(user, &p);
  }
  if (out) *out = p;
  return st;
}

/* The running statistics travel in the gradient buffer, which is larger
 * (it holds the gradients of the batch norms' weights and biases, of the
 * same sizes). */
int dist_sync_buffers(train_dist *d, train_model *t) {
  if (!d->active || d->size == 1 || !is_cnn(t)) return RUMUS_OK;
  int st = RUMUS_OK;
  size_t n = 0;
  for (int k = CNN_NPARAM; k < CNN_NTENSOR && st == RUMUS_OK; k++) {
    rumus_tensor *x = cnn_tensor(t->cnn, k);
    st = rumus_tensor_download_f32(x, d->buf + n, rumus_tensor_numel(x));
    n += rumus_tensor_numel(x);
  }
  if (st != RUMUS_OK) {
    train_rumus_fail(d->err, sizeof d->err, d->ctx, st,
                     "averaging the batch-norm statistics: download");
    d->own_failure = 1;
  }
  d->buf[n] = st != RUMUS_OK ? 1.0f : 0.0f;
  sum_floats(d->buf, n + 1);
  if (d->buf[n] != 0.0f) return settle_failure(d, st);
  for (size_t i = 0; i < n; i++) d->buf[i] /= (float)d->size;
  n = 0;
  for (int k = CNN_NPARAM; k < CNN_NTENSOR && st == RUMUS_OK; k++) {
    rumus_tensor *x = cnn_tensor(t->cnn, k);
    st = rumus_tensor_upload_f32(x, d->buf + n, rumus_tensor_numel(x));
    n += rumus_tensor_numel(x);
  }
  /* A failed upload is this rank's alone: the caller's next collective
   * carries it. */
  if (st != RUMUS_OK) {
    train_rumus_fail(d->err, sizeof d->err, d->ctx, st,
                     "averaging the batch-norm statistics: upload");
    d->own_failure = 1;
  }
  return st;
}

int dist_evaluate(train_dist *d, train_model *t, const mnist_set *set,
                  size_t *correct) {
  int st = dist_sync_buffers(d, t);
  if (d->failed_rank >= 0) return st; /* every rank knows already */
  size_t lo = set->count * (size_t)d->rank / (size_t)d->size;
  size_t hi = set->count * (size_t)(d->rank + 1) / (size_t)d->size;
  mnist_set shard = {hi - lo, set->images + lo * MNIST_PIXELS, set->labels + lo};
  size_t ok = 0;
  if (st == RUMUS_OK && hi > lo) st = model_evaluate(t, &shard, &ok);
  if (!d->active) {
    *correct = ok;
    return st;
  }
  if (st != RUMUS_OK) d->own_failure = 1;
  double v[2] = {(double)ok, st != RUMUS_OK ? 1.0 : 0.0};
  sum_doubles(v, 2);
  if (v[1] != 0.0) return settle_failure(d, st);
  *correct = (size_t)v[0];
  return RUMUS_OK;
}

/* The CRC-32 of the model's parameters, downloaded into its host copy. */
static int params_crc(train_model *t, unsigned long *crc) {
  uLong c = crc32(0L, Z_NULL, 0);
  if (is_cnn(t)) {
    int st = cnn_get_params(t->cnn, &t->cp);
    if (st != RUMUS_OK) return st;
    for (int k = 0; k < CNN_NTENSOR; k++)
      c = crc32(c, (const Bytef *)t->cp.t[k],
                (uInt)(cnn_tensor_numel(&t->cp.shape, k) * sizeof(float)));
  } else {
    int st = mlp_get_params(t->mlp, &t->mp);
    if (st != RUMUS_OK) return st;
    const mlp_shape *s = &t->mp.shape;
    for (int l = 0; l < s->nlayers; l++) {
      c = crc32(c, (const Bytef *)t->mp.w[l],
                (uInt)(s->sizes[l + 1] * s->sizes[l] * sizeof(float)));
      c = crc32(c, (const Bytef *)t->mp.b[l], (uInt)(s->sizes[l + 1] * sizeof(float)));
    }
  }
  *crc = (unsigned long)c;
  return RUMUS_OK;
}

int dist_same_replicas(train_dist *d, train_model *t, int *same) {
  *same = 1;
  if (!d->active || d->size == 1) return RUMUS_OK;
  unsigned long crc = 0;
  /* A rank whose dist_sync_buffers() failed alone says so here. */
  int st = d->own_failure ? RUMUS_ECL : params_crc(t, &crc);
  if (st != RUMUS_OK) {
    snprintf(d->err, sizeof d->err, "%s", model_errmsg(t));
    d->own_failure = 1;
  }
  /* MIN of the CRC, of its complement (giving the MAX) and of "ok". */
  unsigned long v[3] = {crc, ULONG_MAX - crc, st == RUMUS_OK ? 1ul : 0ul};
  min_ulongs(v, 3);
  if (v[2] == 0) return settle_failure(d, st);
  *same = v[0] == ULONG_MAX - v[1];
  return RUMUS_OK;
}
