/*
 * rumus-bench - device time of every rumus kernel against the device's copy
 * bandwidth and against peers measured in the same run.
 *
 *   rumus-bench [--op NAME | --ops LIST] [--shape LIST] [--reps N]
 *               [--warmup N] [--budget SEC] [--device SEL] [--variant V]
 *               [--csv FILE] [--json FILE] [--quick] [--no-peer]
 *               [--no-check] [--copy-mb MB] [--kernels] [--list]
 *
 * For each op and shape (defaults per op, or --shape): the median device
 * time of N runs after the warm-up, from OpenCL event profiling: the span
 * from the op's first kernel start to its last kernel end, with the op's
 * kernels held behind a user-event barrier until all are queued, so that
 * the span has no host enqueue time in it (rumus_ctx_kernel_span; like
 * CUDA events around an op behind a busy GPU), and the summed kernel times
 * beside it (busy; the same for one kernel); the op's
 * compulsory bytes and flops (models in cases.c, shown by --list); GB/s and
 * GFLOP/s; the fraction of the device's copy bandwidth, measured first by
 * a plain float4 copy kernel; on a CPU device, the fraction of the host's
 * STREAM copy and the speed against the host peer (OpenMP C loops built
 * with -march=native, OpenBLAS sgemm), timed by the wall clock.  On a GPU
 * the host peers are not timed (bench/compare_torch.py compares with
 * PyTorch on the same GPU).  Each case is first checked once against its
 * peer (normwise relative error of the outputs).  An op that the library
 * does not implement yet (RUMUS_EUNSUPPORTED) is reported as n/a.
 *
 * Exit status: 0, 1 when a case failed (error other than n/a, or a check
 * above 1e-3), 2 on bad usage.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "peer.h"


typedef struct {
  const char *ops;    /* comma-separated, NULL = all */
  const char *shapes; /* comma-separated, NULL = defaults */
  int reps, reps_set, warmup, warmup_set;
  double budget;      /* seconds per case and side when reps is not set */
  const char *device;
  int variant;        /* -1: leave as is */
  const char *csv, *json;
  int quick, no_peer, no_check, list, kernels;
  double copy_mb;
  rumus_dtype dtype; /* --dtype f32|f16|bf16 */
} options;

static int progress_on;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void progress(size_t i, size_t n, const bench_case *c, const char *what) {
  if (!progress_on) return;
  fprintf(stderr, "\r\033[K[%zu/%zu] %s %s: %s", i + 1, n, c->op->name,
          c->shape.text, what);
  fflush(stderr);
}

/* ---- Host data ------------------------------------------------------------ */

/* Counter-based (splitmix64 of seed + index): the contents do not depend
 * on the thread count, and big tensors fill in parallel. */
static uint64_t seed = 0x2545f4914f6cdd1dull;

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Rounds n floats to the values a tensor of type d holds. */
static void round_to(rumus_dtype d, float *x, size_t n) {
  if (d == RUMUS_F16) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = rumus_f16_to_f32(rumus_f32_to_f16(x[i]));
  } else if (d == RUMUS_BF16) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = rumus_bf16_to_f32(rumus_f32_to_bf16(x[i]));
  }
}

static void fill(const bench_tdesc *td, void *buf) {
  const uint64_t s = seed;
  const size_t n = td->n;
  seed += n + 1;
  if (td->host_f32) {
    float *p = buf;
    const float lo = td->lo, scale = (td->hi - td->lo) * (1.0f / 16777216.0f);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = lo + scale * (float)(mix(s + i) >> 40);
    round_to(td->dtype, p, n);
    return;
  }
  if (td->dtype == RUMUS_I32) {
    int32_t *p = buf;
    const uint64_t k = (uint64_t)td->hi;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = (int32_t)((mix(s + i) >> 32) % k);
    return;
  }
  if (td->dtype == RUMUS_I8) { /* Q8 values: -127 to 127 */
    int8_t *p = buf;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      p[i] = (int8_t)((int)((mix(s + i) >> 32) % 255) - 127);
    return;
  }
  if (td->dtype == RUMUS_F16) { /* uniform in [lo, hi), rounded */
    uint16_t *p = buf;
    const float lo = td->lo, scale = (td->hi - td->lo) * (1.0f / 16777216.0f);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
      p[i] = rumus_f32_to_f16(lo + scale * (float)(mix(s + i) >> 40));
    return;
  }
  float *p = buf;
  const float lo = td->lo, scale = (td->hi - td->lo) * (1.0f / 16777216.0f);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) p[i] = lo + scale * (float)(mix(s + i) >> 40);
}

static void free_case(bench_case *c) {
  for (int i = 0; i < c->nt; i++) {
    rumus_tensor_free(c->t[i]);
    free(c->h[i]);
    free(c->p[i]);
    c->t[i] = NULL;
    c->h[i] = c->p[i] = NULL;
  }
}

static void set_fail(bench_case *c, int st, const char *what) {
  c->status = st;
  const char *msg = rumus_ctx_errmsg(c->ctx);
  snprintf(c->note, sizeof c->note, "%s: %s%s%s", what, rumus_err_name(st),
           msg && *msg ? ": " : "", msg ? msg : "");
}

/* Creates the host copies with random contents (then the op's prepare
 * hook), and the tensors from them. */
static int setup(bench_case *c) {
  for (int i = 0; i < c->nt; i++) {
    const bench_tdesc *td = &c->td[i];
    size_t nb = td->n * bench_host_elem(td);
    c->h[i] = malloc(nb);
    if (td->role != BT_IN) c->p[i] = malloc(nb);
    if (c->h[i] == NULL || (td->role != BT_IN && c->p[i] == NULL)) {
      c->status = RUMUS_ENOMEM;
      snprintf(c->note, sizeof c->note, "host memory for %s (%zu bytes)", td->name, nb);
      return -1;
    }
    fill(td, c->h[i]);
  }
  if (c->op->prepare) c->op->prepare(c);
  for (int i = 0; i < c->nt; i++) {
    const bench_tdesc *td = &c->td[i];
    size_t nb = td->n * bench_host_elem(td);
    int st = rumus_tensor_create(c->ctx, td->dtype, td->ndim, td->shape, &c->t[i]);
    if (st == RUMUS_OK)
      st = td->host_f32 ? rumus_tensor_upload_f32(c->t[i], c->h[i], td->n)
                        : rumus_tensor_upload(c->t[i], c->h[i], nb);
    if (st != RUMUS_OK) {
      set_fail(c, st, td->name);
      return -1;
    }
  }
  return 0;
}

/* Normwise relative error max|got - want| / max|want| of every floating
 * output; an I32 output (max pooling's indices) must match exactly: 1 if
 * any element differs. */
static double compare(const bench_case *c, void *const *got) {
  double worst = 0;
  for (int i = 0; i < c->nt; i++) {
    if (c->td[i].role == BT_IN) continue;
    if (c->td[i].dtype == RUMUS_I32) {
      const int32_t *g = got[i], *w = c->p[i];
      for (size_t j = 0; j < c->td[i].n; j++)
        if (g[j] != w[j]) {
          worst = 1.0;
          break;
        }
      continue;
    }
    const float *g = got[i], *w = c->p[i];
    /* F16 holds values below 2^-14 as subnormals 2^-24 apart: its rounding
     * there (up to 2^-25, the tests' absolute term) is no error of the op's
     * (the mean cross-entropy gradient of 65536 rows lies there). */
    const double floor16 = c->td[i].dtype == RUMUS_F16 ? 0x1p-25 : 0.0;
    double maxerr = 0, maxval = 1e-30;
    for (size_t j = 0; j < c->td[i].n; j++) {
      double e = fabs((double)g[j] - (double)w[j]) - floor16;
      if (e < 0) e = 0;
      if (!(e <= maxerr)) maxerr = e; /* NaN sticks */
      if (fabs((double)w[j]) > maxval) maxval = fabs((double)w[j]);
    }
    double r = maxerr / maxval;
    if (!(r <= worst)) worst = r;
  }
  return worst;
}

/* Runs the op once from the initial state and the peer once from the same
 * state, and compares the outputs. */
static int check(bench_case *c) {
  void *got[BENCH_MAXT] = {0};
  int st = c->op->run(c);
  if (st == RUMUS_OK) st = rumus_ctx_sync(c->ctx);
  if (st != RUMUS_OK) {
    set_fail(c, st, "run");
    return -1;
  }
  int ok = 0;
  for (int i = 0; i < c->nt; i++) {
    if (c->td[i].role == BT_IN) continue;
    const bench_tdesc *td = &c->td[i];
    size_t nb = td->n * bench_host_elem(td);
    got[i] = malloc(nb);
    if (got[i] == NULL) goto done;
    st = td->host_f32 ? rumus_tensor_download_f32(c->t[i], got[i], td->n)
                      : rumus_tensor_download(c->t[i], got[i], nb);
    if (st != RUMUS_OK) {
      set_fail(c, st, "download");
      ok = -1;
      goto done;
    }
    if (c->td[i].role == BT_INOUT) memcpy(c->p[i], c->h[i], nb);
    else memset(c->p[i], 0, nb);
  }
  if (c->op->check) {
    c->check_err = c->op->check(c, got);
  } else if (c->op->peer(c) != NULL) {
    c->check_err = compare(c, got);
  }
done:
  for (int i = 0; i < c->nt; i++) free(got[i]);
  return ok;
}

/* One run of the op with its kernels held until all are queued (a barrier
 * on a user event, released after the run; without one where the driver
 * refuses it), then its device span and summed kernel time. */
static int run_timed(bench_case *c, uint64_t *busy, uint64_t *span) {
  cl_int e;
  cl_event gate = clCreateUserEvent(rumus_ctx_cl_context(c->ctx), &e);
  if (e != CL_SUCCESS) {
    gate = NULL;
  } else if (clEnqueueBarrierWithWaitList(rumus_ctx_cl_queue(c->ctx), 1, &gate,
                                          NULL) != CL_SUCCESS) {
    clSetUserEventStatus(gate, CL_COMPLETE);
    clReleaseEvent(gate);
    gate = NULL;
  }
  int st = c->op->run(c);
  if (gate) {
    clSetUserEventStatus(gate, CL_COMPLETE);
    clReleaseEvent(gate);
  }
  if (st == RUMUS_OK) st = rumus_ctx_kernel_span(c->ctx, busy, span);
  return st;
}

/* Device timing: warm-up, then reps, each one op and a wait. */
/* Runs the op warm - 1 more times (its first run was timed already), with
 * the profiling events drained; -1 after a failure (recorded in c). */
static int warm_up(bench_case *c, int warm) {
  uint64_t ns;
  for (int i = 1; i < warm; i++) {
    int st = run_timed(c, &ns, NULL);
    if (st != RUMUS_OK) {
      set_fail(c, st, "warm-up");
      return -1;
    }
  }
  return 0;
}

/* One run of the op, its wall time in *wall (what sizes the warm-up and
 * the repetitions); -1 after a failure (recorded). */
static int first_run(bench_case *c, double *wall) {
  uint64_t ns = 0, span = 0;
  const double t0 = now_ns();
  const int st = run_timed(c, &ns, &span);
  if (st != RUMUS_OK) {
    set_fail(c, st, "run");
    return -1;
  }
  *wall = now_ns() - t0;
  return 0;
}

static int time_device(bench_case *c, const options *o) {
  uint64_t ns = 0, span = 0;
  double one, t0;
  int st;
  if (first_run(c, &one) != 0) return -1;
  int warm = o->warmup_set ? o->warmup : (one > 3e8 ? 0 : o->warmup);
  if (warm_up(c, warm) != 0) return -1;
  int reps = o->reps;
  if (!o->reps_set) {
    double fit = o->budget * 1e9 / (one > 1 ? one : 1);
    if (fit < reps) reps = fit < 5 ? 5 : (int)fit;
  }
  double *dev = malloc(sizeof *dev * (size_t)reps * 3);
  if (dev == NULL) {
    c->status = RUMUS_ENOMEM;
    return -1;
  }
  double *wall = dev + reps, *busy = dev + 2 * reps;
  for (int i = 0; i < reps; i++) {
    t0 = now_ns();
    st = run_timed(c, &ns, &span);
    wall[i] = now_ns() - t0;
    dev[i] = (double)span;
    busy[i] = (double)ns;
    if (st != RUMUS_OK) {
      set_fail(c, st, "run");
      free(dev);
      return -1;
    }
  }
  st = rumus_ctx_sync(c->ctx);
  if (st != RUMUS_OK) {
    set_fail(c, st, "sync");
    free(dev);
    return -1;
  }
  c->reps = reps;
  c->ns = median(dev, reps);
  c->busy_ns = median(busy, reps);
  c->min_ns = dev[0];
  c->wall_ns = median(wall, reps);
  free(dev);
  return 0;
}

/* ---- Host STREAM copy ---------------------------------------------------- */

typedef struct {
  float *a, *b;
  size_t n;
} host_copy;

static void host_copy_free(host_copy *h) {
  if (h == NULL) return;
  free(h->a);
  free(h->b);
  free(h);
}

static host_copy *host_copy_new(size_t bytes) {
  host_copy *h = calloc(1, sizeof *h);
  if (h == NULL) return NULL;
  h->n = bytes / 4;
  h->a = malloc(h->n * 4);
  h->b = malloc(h->n * 4);
  if (h->a == NULL || h->b == NULL) {
    host_copy_free(h);
    return NULL;
  }
  /* First touch spread over the threads, as the copy will be. */
  float *a = h->a, *b = h->b;
  const size_t n = h->n;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    a[i] = 0.0f;
    b[i] = (float)(i & 1023);
  }
  peer_copy(a, b, n);
  return h;
}

/* Wall time of one copy in ns; its rate counts 2 * 4 * n bytes. */
static double host_copy_ns(host_copy *h) {
  double t0 = now_ns();
  peer_copy(h->a, h->b, h->n);
  return now_ns() - t0;
}

static double host_stream_copy(size_t bytes, int reps) {
  host_copy *h = host_copy_new(bytes);
  double *t = malloc(sizeof *t * (size_t)reps);
  double gbs = -1;
  if (h && t) {
    for (int r = 0; r < reps; r++) t[r] = host_copy_ns(h);
    gbs = 8.0 * (double)h->n / median(t, reps);
  }
  free(t);
  host_copy_free(h);
  return gbs;
}

/* ---- CPU device: paired timing ---------------------------------------------- */

/* Cases with a working set at least this large time the copies too. */
#define PAIRED_COPY_BYTES (64.0 * 1048576.0)

/* The per-run samples of time_paired (reps of each, one allocation). */
typedef struct {
  double *buf, *dev, *wall, *peer, *ratio, *dcopy, *hcopy, *pdc, *phc, *busy;
  int reps, use_peer, copies;
} paired_samples;

static int samples_alloc(paired_samples *p, int reps) {
  p->buf = calloc((size_t)reps * 9, sizeof *p->buf);
  if (p->buf == NULL) return -1;
  double **arrays[9] = {&p->dev,  &p->wall,  &p->peer, &p->ratio, &p->dcopy,
                        &p->hcopy, &p->pdc, &p->phc,  &p->busy};
  for (int i = 0; i < 9; i++) *arrays[i] = p->buf + (size_t)i * reps;
  p->reps = reps;
  return 0;
}

/* One run of the op, of its peer (use_peer: *peer_name its name, NULL
 * when it has none) and, when large, of both copies: their wall time in
 * *one, the op's alone in *one_dev; -1 after a failure (recorded). */
static int time_one_of_each(bench_case *c, int *use_peer, int large,
                            bench_copy *dc, host_copy *hc, double *one,
                            double *one_dev, const char **peer_name) {
  if (first_run(c, one_dev) != 0) return -1;
  *one = *one_dev;
  double t0;
  *peer_name = NULL;
  if (*use_peer) {
    t0 = now_ns();
    *peer_name = c->op->peer(c);
    *one += now_ns() - t0;
    *use_peer = *peer_name != NULL;
  }
  if (large) {
    t0 = now_ns();
    bench_copy_ns(dc, 0);
    host_copy_ns(hc);
    *one += now_ns() - t0;
  }
  return 0;
}

/* Sample i of p: the op, then its peer and the copies where p takes them;
 * -1 after the op failed (recorded). */
static int sample_paired(bench_case *c, paired_samples *p, int i,
                         bench_copy *dc, host_copy *hc) {
  uint64_t ns = 0, span = 0;
  double t0 = now_ns();
  int st = run_timed(c, &ns, &span);
  p->wall[i] = now_ns() - t0;
  p->dev[i] = (double)span;
  p->busy[i] = (double)ns;
  if (st != RUMUS_OK) {
    set_fail(c, st, "run");
    return -1;
  }
  if (p->use_peer) {
    t0 = now_ns();
    c->op->peer(c);
    p->peer[i] = now_ns() - t0;
    p->ratio[i] = p->peer[i] / p->dev[i];
  }
  if (p->copies) {
    double d = bench_copy_ns(dc, 0);
    if (d <= 0) {
      p->copies = 0;
      return 0;
    }
    p->dcopy[i] = bench_copy_gbs(dc, d);
    p->hcopy[i] = 8.0 * (double)hc->n / host_copy_ns(hc);
    p->pdc[i] = 100.0 * (c->bytes / p->dev[i]) / p->dcopy[i];
    p->phc[i] = 100.0 * (c->bytes / p->dev[i]) / p->hcopy[i];
  }
  return 0;
}

/* The medians of p into c. */
static void store_paired(bench_case *c, paired_samples *p,
                         const char *peer_name) {
  const int reps = p->reps;
  c->reps = reps;
  c->ns = median(p->dev, reps);
  c->busy_ns = median(p->busy, reps);
  c->min_ns = p->dev[0]; /* median() sorted them */
  c->wall_ns = median(p->wall, reps);
  if (p->use_peer) {
    c->peer_name = peer_name;
    c->peer_reps = reps;
    c->peer_ns = median(p->peer, reps);
    c->peer_min_ns = p->peer[0];
    c->speed_ratio = median(p->ratio, reps);
  }
  if (p->copies) {
    c->local_copy_gbs = median(p->dcopy, reps);
    c->local_stream_gbs = median(p->hcopy, reps);
    c->pct_copy_paired = median(p->pdc, reps);
    c->pct_stream_paired = median(p->phc, reps);
  }
}

/* On a CPU device the op, its host peer and, for large cases, the device
 * copy kernel and the host STREAM copy alternate run by run, and every
 * ratio is the median of the per-run ratios: the memory bandwidth of a
 * shared machine drifts by 2x within minutes, which unpaired medians taken
 * seconds apart turn into noise. */
static int time_paired(bench_case *c, const options *o, bench_copy *dc,
                       host_copy *hc) {
  const int large = dc && hc && c->bytes >= PAIRED_COPY_BYTES;
  int use_peer = !o->no_peer;
  for (int i = 0; i < c->nt; i++)
    if (c->td[i].role != BT_IN)
      memcpy(c->p[i], c->h[i], c->td[i].n * bench_host_elem(&c->td[i]));
  c->peer_step = 0;
  /* One of each, to size the warm-up and the repetitions. */
  double one, one_dev;
  const char *peer_name;
  if (time_one_of_each(c, &use_peer, large, dc, hc, &one, &one_dev,
                       &peer_name) != 0)
    return -1;
  int warm = o->warmup_set ? o->warmup : (one_dev > 3e8 ? 0 : o->warmup);
  if (warm_up(c, warm) != 0) return -1;
  int reps = o->reps;
  if (!o->reps_set) {
    double fit = 2.0 * o->budget * 1e9 / (one > 1 ? one : 1);
    if (fit < reps) reps = fit < 5 ? 5 : (int)fit;
  }
  paired_samples p;
  if (samples_alloc(&p, reps) != 0) {
    c->status = RUMUS_ENOMEM;
    return -1;
  }
  p.use_peer = use_peer;
  p.copies = large;
  int ok = 0;
  for (int i = 0; i < reps && ok == 0; i++)
    ok = sample_paired(c, &p, i, dc, hc);
  int st = ok == 0 ? rumus_ctx_sync(c->ctx) : RUMUS_OK;
  if (ok == 0 && st != RUMUS_OK) {
    set_fail(c, st, "sync");
    ok = -1;
  }
  if (ok == 0) store_paired(c, &p, peer_name);
  free(p.buf);
  return ok;
}

/* --kernels: one more run of the op, its kernels with their launches and
 * device time on stderr (which kernel a shape took, and its share). */
static void print_kernels(bench_case *c) {
  rumus_kernel_stat ks[32];
  size_t n = 0;
  uint64_t ns;
  int st = rumus_ctx_kernel_time(c->ctx, &ns); /* drop older events */
  if (st == RUMUS_OK) st = c->op->run(c);
  if (st == RUMUS_OK) st = rumus_ctx_kernel_profile(c->ctx, ks, 32, &n);
  if (progress_on) fputs("\r\033[K", stderr);
  if (st != RUMUS_OK) {
    fprintf(stderr, "kernels of %s %s: %s\n", c->op->name, c->shape.text,
            rumus_strerror(st));
    return;
  }
  fprintf(stderr, "kernels of %s %s:\n", c->op->name, c->shape.text);
  for (size_t k = 0; k < n && k < 32; k++)
    fprintf(stderr, "  %-28s %-34s x%-4llu %10.1f us\n", ks[k].op,
            ks[k].kernel, (unsigned long long)ks[k].launches,
            (double)ks[k].ns * 1e-3);
}

static void run_case(bench_case *c, const options *o, int is_gpu,
                     bench_copy *dc, host_copy *hc, size_t i, size_t n) {
  uint64_t ns;
  c->check_err = -1;
  progress(i, n, c, "setup");
  if (setup(c) != 0) goto out;
  rumus_ctx_kernel_time(c->ctx, &ns); /* drop older events */
  progress(i, n, c, o->no_check ? "first run" : "check");
  if (o->no_check) {
    int st = c->op->run(c);
    if (st == RUMUS_OK) st = rumus_ctx_sync(c->ctx);
    if (st != RUMUS_OK) {
      set_fail(c, st, "run");
      goto out;
    }
  } else if (check(c) != 0) {
    goto out;
  }
  if (o->kernels) print_kernels(c);
  progress(i, n, c, "timing");
  if (is_gpu) time_device(c, o);
  else time_paired(c, o, dc, hc);
out:
  free_case(c);
}

/* ---- Host facts ------------------------------------------------------------ */

static void host_cpu(char *buf, size_t len) {
  snprintf(buf, len, "unknown CPU");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *p = strchr(line, ':');
      if (p) {
        p += 1 + (p[1] == ' ');
        p[strcspn(p, "\n")] = '\0';
        snprintf(buf, len, "%s", p);
      }
      break;
    }
  }
  fclose(f);
}

static void host_load(char *buf, size_t len) {
  snprintf(buf, len, "?");
  FILE *f = fopen("/proc/loadavg", "r");
  if (f == NULL) return;
  double a, b, c;
  if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(buf, len, "%.2f %.2f %.2f", a, b, c);
  fclose(f);
}

/* ---- Command line ---------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: rumus-bench [options]\n"
          "  --op NAME         one op (see --list)\n"
          "  --ops LIST        comma-separated ops (default: all)\n"
          "  --shape LIST      comma-separated shapes instead of the defaults:\n"
          "                    RxC, N, or for gemm MxNxK[:TT] (T = n or t);\n"
          "                    the CNN ops take a suffix /k3s2p1g1o1 (kernel,\n"
          "                    stride, padding, groups, output; see --list)\n"
          "  --reps N          timed runs per case (default 20; without it,\n"
          "                    slow cases take fewer, at least 5, see --budget)\n"
          "  --warmup N        untimed runs first (default 3)\n"
          "  --budget SEC      time per case and side when --reps is not given (2)\n"
          "  --device SEL      device index or name substring (default: RUMUS_DEVICE,\n"
          "                    else the first GPU, else the first device)\n"
          "  --variant V       gpu, cpu or auto: the kernels' reduction variant\n"
          "  --csv FILE        write the results as CSV\n"
          "  --json FILE       write the results as JSON\n"
          "  --dtype T         f32 (default), f16 or bf16: the storage of every\n"
          "                    floating tensor of the ops that take 16-bit types\n"
          "                    (the others run in F32); bytes count 2 per element\n"
          "  --quick           short run: default shapes up to 64 MB, 5 reps\n"
          "  --no-peer         skip the host peers\n"
          "  --no-check        skip the check against the peer\n"
          "  --copy-mb MB      buffer size of the copy measurements (default 256)\n"
          "  --kernels         print each case's kernels, launches and device\n"
          "                    time (one extra run) on stderr\n"
          "  --list            list the ops, their default shapes and models\n");
}

static int parse_int(const char *s, int lo, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > 1000000) return -1;
  *out = (int)v;
  return 0;
}

static int parse_args(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE                                                     \
  if (v == NULL) {                                                     \
    fprintf(stderr, "rumus-bench: %s needs a value\n", a);             \
    return -1;                                                         \
  }                                                                    \
  i++
    if (!strcmp(a, "--op") || !strcmp(a, "--ops")) {
      NEED_VALUE;
      o->ops = v;
    } else if (!strcmp(a, "--shape") || !strcmp(a, "--shapes")) {
      NEED_VALUE;
      o->shapes = v;
    } else if (!strcmp(a, "--reps")) {
      NEED_VALUE;
      if (parse_int(v, 1, &o->reps)) goto bad;
      o->reps_set = 1;
    } else if (!strcmp(a, "--warmup")) {
      NEED_VALUE;
      if (parse_int(v, 0, &o->warmup)) goto bad;
      o->warmup_set = 1;
    } else if (!strcmp(a, "--budget")) {
      NEED_VALUE;
      char *end;
      o->budget = strtod(v, &end);
      if (*end || !(o->budget > 0)) goto bad;
    } else if (!strcmp(a, "--device") || !strcmp(a, "-d")) {
      NEED_VALUE;
      o->device = v;
    } else if (!strcmp(a, "--variant")) {
      NEED_VALUE;
      if (!strcmp(v, "gpu")) o->variant = RUMUS_VARIANT_GPU;
      else if (!strcmp(v, "cpu")) o->variant = RUMUS_VARIANT_CPU;
      else if (!strcmp(v, "auto")) o->variant = RUMUS_VARIANT_AUTO;
      else goto bad;
    } else if (!strcmp(a, "--csv")) {
      NEED_VALUE;
      o->csv = v;
    } else if (!strcmp(a, "--json")) {
      NEED_VALUE;
      o->json = v;
    } else if (!strcmp(a, "--copy-mb")) {
      NEED_VALUE;
      char *end;
      o->copy_mb = strtod(v, &end);
      if (*end || !(o->copy_mb >= 1)) goto bad;
    } else if (!strcmp(a, "--dtype")) {
      NEED_VALUE;
      if (!strcmp(v, "f32")) o->dtype = RUMUS_F32;
      else if (!strcmp(v, "f16")) o->dtype = RUMUS_F16;
      else if (!strcmp(v, "bf16")) o->dtype = RUMUS_BF16;
      else goto bad;
    } else if (!strcmp(a, "--quick")) {
      o->quick = 1;
    } else if (!strcmp(a, "--no-peer")) {
      o->no_peer = 1;
    } else if (!strcmp(a, "--no-check")) {
      o->no_check = 1;
    } else if (!strcmp(a, "--list")) {
      o->list = 1;
    } else if (!strcmp(a, "--kernels")) {
      o->kernels = 1;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    } else {
      fprintf(stderr, "rumus-bench: unknown option %s\n", a);
      usage(stderr);
      return -1;
    }
    continue;
  bad:
    fprintf(stderr, "rumus-bench: bad value for %s: %s\n", a, v);
    return -1;
#undef NEED_VALUE
  }
  return 0;
}

static void list_ops(void) {
  for (size_t i = 0; i < bench_nops; i++) {
    const bench_op *op = &bench_ops[i];
    printf("%-16s (%s) %s\n  default shapes: %s\n", op->name, op->family,
           op->model, op->defaults);
    if (op->gpu_extra) printf("  and on a GPU:   %s\n", op->gpu_extra);
  }
}

/* The compulsory bytes of a case with 16-bit tensors: every input read
 * once, every output written once, state read and written, at each
 * tensor's own element size (the F32 models of cases.c count the same
 * passes at 4 bytes). */
static double typed_bytes(const bench_case *c) {
  double b = 0;
  for (int i = 0; i < c->nt; i++)
    b += (double)c->td[i].n * (double)rumus_dtype_size(c->td[i].dtype) *
         (c->td[i].role == BT_INOUT ? 2.0 : 1.0);
  return b;
}

/* Appends the cases of one op; returns -1 on a bad shape. */
static int add_cases(const bench_op *op, const options *o, int is_gpu,
                     bench_case **cases, size_t *n, size_t *cap) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s%s%s", o->shapes ? o->shapes : op->defaults,
           !o->shapes && is_gpu && op->gpu_extra ? "," : "",
           !o->shapes && is_gpu && op->gpu_extra ? op->gpu_extra : "");
  for (char *save = NULL, *s = strtok_r(buf, ",", &save); s;
       s = strtok_r(NULL, ",", &save)) {
    bench_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.dtype = bench_op_takes_dtype(op) ? o->dtype : RUMUS_F32;
    if (bench_parse_shape(s, &c.shape) != 0) {
      fprintf(stderr, "rumus-bench: bad shape '%s'\n", s);
      return -1;
    }
    const char *why = op->describe(&c);
    if (!why && c.dtype != RUMUS_F32) c.bytes = typed_bytes(&c);
    if (why) {
      if (!o->shapes) continue;
      c.status = RUMUS_ESHAPE;
      snprintf(c.note, sizeof c.note, "%s", why);
      c.nt = 0;
    } else if (o->quick && !o->shapes && c.bytes > 64e6) {
      continue;
    }
    if (*n == *cap) {
      *cap = *cap ? 2 * *cap : 64;
      bench_case *nc = realloc(*cases, sizeof *nc * *cap);
      if (nc == NULL) return -1;
      *cases = nc;
    }
    (*cases)[(*n)++] = c;
  }
  return 0;
}

/* The run's facts that the table and files print (ctx's device, the host,
 * the options). */
static void describe_run(bench_run *run, rumus_ctx *ctx, const options *o,
                         char *date, size_t dlen, char *device_name,
                         size_t nlen) {
  memset(run, 0, sizeof *run);
  time_t now = time(NULL);
  strftime(date, dlen, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  run->date = date;
  snprintf(device_name, nlen, "%s", rumus_ctx_device_name(ctx));
  run->device = device_name;
  run->is_gpu = rumus_ctx_is_gpu(ctx);
  run->gpu_variant = rumus_ctx_uses_gpu_variant(ctx);
  host_cpu(run->host_cpu, sizeof run->host_cpu);
  host_load(run->load_start, sizeof run->load_start);
  run->threads = peer_threads();
  run->blas = peer_blas_name();
  run->warmup = o->warmup;
  run->copy_bytes = (size_t)(o->copy_mb * 1048576.0);
  run->dtype = o->dtype;
}

/* The cases of --ops (every op without it) into *cases / *n, before any
 * work, so that bad arguments fail first; 0, or 2 after a message. */
static int select_cases(const options *o, int is_gpu, bench_case **cases,
                        size_t *n) {
  size_t cap = 0;
  *cases = NULL;
  *n = 0;
  if (o->ops == NULL) {
    for (size_t i = 0; i < bench_nops; i++)
      if (add_cases(&bench_ops[i], o, is_gpu, cases, n, &cap) != 0) return 2;
    return 0;
  }
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", o->ops);
  for (char *save = NULL, *s = strtok_r(buf, ",", &save); s;
       s = strtok_r(NULL, ",", &save)) {
    const bench_op *op = bench_find_op(s);
    if (op == NULL) {
      fprintf(stderr, "rumus-bench: unknown op '%s' (see --list)\n", s);
      return 2;
    }
    if (add_cases(op, o, is_gpu, cases, n, &cap) != 0) return 2;
  }
  return 0;
}

/* The device and host copy bandwidths the table compares with. */
static void measure_copies(bench_run *run, rumus_ctx *ctx, const options *o) {
  char err[256] = "";
  if (progress_on) fprintf(stderr, "measuring the device copy bandwidth...");
  run->copy_gbs = bench_device_copy(ctx, run->copy_bytes, o->quick ? 5 : 20,
                                    run->copy_forms, &run->empty_us, err,
                                    sizeof err);
  if (run->copy_gbs < 0) fprintf(stderr, "\nrumus-bench: %s\n", err);
  if (progress_on)
    fprintf(stderr, "\r\033[Kmeasuring the host copy bandwidth...");
  run->stream_gbs = host_stream_copy(run->copy_bytes, o->quick ? 5 : 20);
}

/* A fault in a kernel can leave the queue unusable (NVIDIA's driver then
 * answers CL_INVALID_COMMAND_QUEUE to everything): a fresh context in
 * *ctx (and its paired copy in *dc), so that the remaining cases run. */
static void replace_context(rumus_ctx **ctx, bench_copy **dc,
                            const bench_run *run, const options *o) {
  rumus_ctx *fresh = NULL;
  char err[256];
  if (rumus_ctx_create(&fresh, o->device, RUMUS_CTX_PROFILING) != RUMUS_OK)
    return;
  bench_copy_free(*dc);
  rumus_ctx_free(*ctx); /* may fail on a broken queue: then it leaks */
  *ctx = fresh;
  if (o->variant >= 0) rumus_ctx_set_option(fresh, RUMUS_OPT_VARIANT, o->variant);
  *dc = run->is_gpu ? NULL
                    : bench_copy_new(fresh, run->copy_bytes, err, sizeof err);
}

/* Runs every case; 1 if one failed or missed its check, else 0. */
static int run_cases(bench_run *run, bench_case *cases, size_t n,
                     rumus_ctx **ctx, const options *o) {
  char err[256];
  /* The copies that large cases on a CPU device pair with their runs. */
  bench_copy *dc = NULL;
  host_copy *hc = NULL;
  if (!run->is_gpu) {
    dc = bench_copy_new(*ctx, run->copy_bytes, err, sizeof err);
    hc = host_copy_new(run->copy_bytes);
  }
  int failed = 0;
  for (size_t i = 0; i < n; i++) {
    bench_case *c = &cases[i];
    c->ctx = *ctx;
    if (c->status != RUMUS_OK) continue; /* the shape did not fit the op */
    run_case(c, o, run->is_gpu, dc, hc, i, n);
    if (c->status != RUMUS_OK && c->status != RUMUS_EUNSUPPORTED) failed = 1;
    if (c->status == RUMUS_ECL || c->status == RUMUS_EDEVMEM) {
      fprintf(stderr, "%srumus-bench: %s %s: %s; continuing on a new context\n",
              progress_on ? "\r\033[K" : "", c->op->name, c->shape.text,
              c->note);
      replace_context(ctx, &dc, run, o);
    }
    if (c->check_err > bench_check_limit(c->dtype) || isnan(c->check_err))
      failed = 1;
  }
  bench_copy_free(dc);
  host_copy_free(hc);
  return failed;
}

/* The table on stdout and the --csv / --json files; 1 if a file failed. */
static int write_results(const bench_run *run, const options *o) {
  int failed = 0;
  bench_print_table(run, stdout);
  if (o->csv && bench_write_csv(run, o->csv) != 0) {
    fprintf(stderr, "rumus-bench: cannot write %s: %s\n", o->csv,
            strerror(errno));
    failed = 1;
  }
  if (o->json && bench_write_json(run, o->json) != 0) {
    fprintf(stderr, "rumus-bench: cannot write %s: %s\n", o->json,
            strerror(errno));
    failed = 1;
  }
  return failed;
}

/* The host peers' OpenMP threads must not spin while PoCL's threads run
 * the op on the same cores.  libgomp, by default, keeps each thread
 * spinning for some milliseconds after a parallel region, and the bench
 * alternates peer and op run by run: on the 2-core CI machine that took
 * one of PoCL's two cores for most of each op's run (F16 softmax forward
 * at 16384x1024: 11.8-12.9 ms against 7.4-8.0 ms with passive waiting).
 * libgomp reads OMP_WAIT_POLICY once, when it is loaded, so where it is
 * unset the bench sets it and executes itself again; a policy the caller
 * set is kept (bench_print_table shows it). */
static void wait_passively(char **argv) {
  if (getenv("OMP_WAIT_POLICY") != NULL) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
  /* Still here: no /proc; run on with libgomp's default policy, which
   * the table reports as such. */
  unsetenv("OMP_WAIT_POLICY");
}

int main(int argc, char **argv) {
  wait_passively(argv);
  options o = {0};
  o.dtype = RUMUS_F32;
  o.reps = 20;
  o.warmup = 3;
  o.budget = 2.0;
  o.variant = -1;
  o.copy_mb = 256;
  if (parse_args(argc, argv, &o) != 0) return 2;
  if (o.list) {
    list_ops();
    return 0;
  }
  if (o.quick) {
    if (!o.reps_set) o.reps = 5;
    if (!o.warmup_set) o.warmup = 1;
  }
  progress_on = isatty(STDERR_FILENO);

  rumus_ctx *ctx = NULL;
  int st = rumus_ctx_create(&ctx, o.device, RUMUS_CTX_PROFILING);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-bench: %s: %s\n", rumus_strerror(st),
            rumus_last_create_error());
    return 1;
  }
  if (o.variant >= 0) rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, o.variant);
  bench_run run;
  char date[64], device_name[512];
  describe_run(&run, ctx, &o, date, sizeof date, device_name,
               sizeof device_name);
  bench_case *cases;
  size_t n;
  if (select_cases(&o, run.is_gpu, &cases, &n) != 0) {
    free(cases);
    rumus_ctx_free(ctx);
    return 2;
  }
  measure_copies(&run, ctx, &o);
  int failed = run_cases(&run, cases, n, &ctx, &o);
  if (progress_on) fprintf(stderr, "\r\033[K");
  host_load(run.load_end, sizeof run.load_end);
  run.cases = cases;
  run.ncases = n;
  if (write_results(&run, &o)) failed = 1;
  free(cases);
  rumus_ctx_free(ctx);
  return failed;
}
