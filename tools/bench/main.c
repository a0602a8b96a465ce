/*
 * rumus-bench - device time of every rumus kernel against the device's copy
 * bandwidth and against peers measured in the same run.
 *
 *   rumus-bench [--op NAME | --ops LIST] [--shape LIST] [--reps N]
 *               [--warmup N] [--budget SEC] [--device SEL] [--variant V]
 *               [--csv FILE] [--json FILE] [--quick] [--no-peer]
 *               [--no-check] [--copy-mb MB] [--list]
 *
 * For each op and shape (defaults per op, or --shape): the median device
 * time of N runs after the warm-up, from OpenCL event profiling
 * (rumus_ctx_kernel_time sums every kernel the op launched); the op's
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

#define CHECK_LIMIT 1e-3

typedef struct {
  const char *ops;    /* comma-separated, NULL = all */
  const char *shapes; /* comma-separated, NULL = defaults */
  int reps, reps_set, warmup, warmup_set;
  double budget;      /* seconds per case and side when reps is not set */
  const char *device;
  int variant;        /* -1: leave as is */
  const char *csv, *json;
  int quick, no_peer, no_check, list;
  double copy_mb;
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

static void fill(const bench_tdesc *td, void *buf) {
  const uint64_t s = seed;
  const size_t n = td->n;
  seed += n + 1;
  if (td->dtype == RUMUS_I32) {
    int32_t *p = buf;
    const uint64_t k = (uint64_t)td->hi;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = (int32_t)((mix(s + i) >> 32) % k);
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

/* Creates the tensors and uploads random contents. */
static int setup(bench_case *c) {
  for (int i = 0; i < c->nt; i++) {
    const bench_tdesc *td = &c->td[i];
    size_t nb = td->n * 4;
    c->h[i] = malloc(nb);
    if (td->role != BT_IN) c->p[i] = malloc(nb);
    if (c->h[i] == NULL || (td->role != BT_IN && c->p[i] == NULL)) {
      c->status = RUMUS_ENOMEM;
      snprintf(c->note, sizeof c->note, "host memory for %s (%zu bytes)", td->name, nb);
      return -1;
    }
    fill(td, c->h[i]);
    int st = rumus_tensor_create(c->ctx, td->dtype, td->ndim, td->shape, &c->t[i]);
    if (st == RUMUS_OK) st = rumus_tensor_upload(c->t[i], c->h[i], nb);
    if (st != RUMUS_OK) {
      set_fail(c, st, td->name);
      return -1;
    }
  }
  return 0;
}

/* Normwise relative error max|got - want| / max|want| of every output. */
static double compare(const bench_case *c, void *const *got) {
  double worst = 0;
  for (int i = 0; i < c->nt; i++) {
    if (c->td[i].role == BT_IN) continue;
    const float *g = got[i], *w = c->p[i];
    double maxerr = 0, maxval = 1e-30;
    for (size_t j = 0; j < c->td[i].n; j++) {
      double e = fabs((double)g[j] - (double)w[j]);
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
    size_t nb = c->td[i].n * 4;
    got[i] = malloc(nb);
    if (got[i] == NULL) goto done;
    st = rumus_tensor_download(c->t[i], got[i], nb);
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

/* Device timing: warm-up, then reps, each one op and a wait. */
static int time_device(bench_case *c, const options *o) {
  uint64_t ns = 0;
  double t0 = now_ns();
  int st = c->op->run(c);
  if (st == RUMUS_OK) st = rumus_ctx_kernel_time(c->ctx, &ns);
  if (st != RUMUS_OK) {
    set_fail(c, st, "run");
    return -1;
  }
  double one = now_ns() - t0;
  int warm = o->warmup_set ? o->warmup : (one > 3e8 ? 0 : o->warmup);
  for (int i = 1; i < warm; i++) {
    st = c->op->run(c);
    if (st == RUMUS_OK) st = rumus_ctx_kernel_time(c->ctx, &ns);
    if (st != RUMUS_OK) {
      set_fail(c, st, "warm-up");
      return -1;
    }
  }
  int reps = o->reps;
  if (!o->reps_set) {
    double fit = o->budget * 1e9 / (one > 1 ? one : 1);
    if (fit < reps) reps = fit < 5 ? 5 : (int)fit;
  }
  double *dev = malloc(sizeof *dev * (size_t)reps * 2);
  if (dev == NULL) {
    c->status = RUMUS_ENOMEM;
    return -1;
  }
  double *wall = dev + reps;
  for (int i = 0; i < reps; i++) {
    t0 = now_ns();
    st = c->op->run(c);
    if (st == RUMUS_OK) st = rumus_ctx_kernel_time(c->ctx, &ns);
    wall[i] = now_ns() - t0;
    dev[i] = (double)ns;
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
  c->min_ns = dev[0];
  c->wall_ns = median(wall, reps);
  free(dev);
  return 0;
}

/* Host peer timing by the wall clock: one warm-up, then reps. */
static void time_peer(bench_case *c, const options *o) {
  for (int i = 0; i < c->nt; i++)
    if (c->td[i].role != BT_IN) memcpy(c->p[i], c->h[i], c->td[i].n * 4);
  c->peer_step = 0;
  double t0 = now_ns();
  const char *name = c->op->peer(c);
  double one = now_ns() - t0;
  if (name == NULL) return;
  int reps = o->reps;
  if (!o->reps_set) {
    double fit = o->budget * 1e9 / (one > 1 ? one : 1);
    if (fit < reps) reps = fit < 5 ? 5 : (int)fit;
  }
  double *t = malloc(sizeof *t * (size_t)reps);
  if (t == NULL) return;
  for (int i = 0; i < reps; i++) {
    t0 = now_ns();
    c->op->peer(c);
    t[i] = now_ns() - t0;
  }
  c->peer_name = name;
  c->peer_reps = reps;
  c->peer_ns = median(t, reps);
  c->peer_min_ns = t[0];
  free(t);
}

static double host_stream_copy(size_t bytes, int reps);

/* Cases with a working set at least this large get their own copy
 * measurements on a CPU device. */
#define LOCAL_COPY_BYTES (64.0 * 1048576.0)

static void run_case(bench_case *c, const options *o, int is_gpu,
                     size_t copy_bytes, size_t i, size_t n) {
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
  if (!is_gpu && c->bytes >= LOCAL_COPY_BYTES) {
    double forms[2], empty;
    char err[128];
    progress(i, n, c, "copy bandwidth");
    c->local_copy_gbs = bench_device_copy(c->ctx, copy_bytes, 5, 0, forms, &empty,
                                          err, sizeof err);
    c->local_stream_gbs = host_stream_copy(copy_bytes, 5);
    if (c->local_copy_gbs < 0) c->local_copy_gbs = 0;
    if (c->local_stream_gbs < 0) c->local_stream_gbs = 0;
  }
  progress(i, n, c, "rumus");
  if (time_device(c, o) != 0) goto out;
  if (!is_gpu && !o->no_peer) {
    progress(i, n, c, "peer");
    time_peer(c, o);
  }
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

static double host_stream_copy(size_t bytes, int reps) {
  size_t n = bytes / 4;
  float *a = malloc(bytes), *b = malloc(bytes);
  double best = -1;
  if (a && b) {
    /* First touch spread over the threads, as the copy will be. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
      a[i] = 0.0f;
      b[i] = (float)(i & 1023);
    }
    peer_copy(a, b, n);
    double *t = malloc(sizeof *t * (size_t)reps);
    if (t) {
      for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        peer_copy(a, b, n);
        t[r] = now_ns() - t0;
      }
      best = 2.0 * (double)bytes / median(t, reps);
      free(t);
    }
  }
  free(a);
  free(b);
  return best;
}

/* ---- Command line ---------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: rumus-bench [options]\n"
          "  --op NAME         one op (see --list)\n"
          "  --ops LIST        comma-separated ops (default: all)\n"
          "  --shape LIST      comma-separated shapes instead of the defaults:\n"
          "                    RxC, N, or for gemm MxNxK[:TT] (T = n or t)\n"
          "  --reps N          timed runs per case (default 20; without it,\n"
          "                    slow cases take fewer, at least 5, see --budget)\n"
          "  --warmup N        untimed runs first (default 3)\n"
          "  --budget SEC      time per case and side when --reps is not given (2)\n"
          "  --device SEL      device index or name substring (default: RUMUS_DEVICE,\n"
          "                    else the first GPU, else the first device)\n"
          "  --variant V       gpu, cpu or auto: the kernels' reduction variant\n"
          "  --csv FILE        write the results as CSV\n"
          "  --json FILE       write the results as JSON\n"
          "  --quick           short run: default shapes up to 64 MB, 5 reps\n"
          "  --no-peer         skip the host peers\n"
          "  --no-check        skip the check against the peer\n"
          "  --copy-mb MB      buffer size of the copy measurements (default 256)\n"
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
    } else if (!strcmp(a, "--quick")) {
      o->quick = 1;
    } else if (!strcmp(a, "--no-peer")) {
      o->no_peer = 1;
    } else if (!strcmp(a, "--no-check")) {
      o->no_check = 1;
    } else if (!strcmp(a, "--list")) {
      o->list = 1;
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
    if (bench_parse_shape(s, &c.shape) != 0) {
      fprintf(stderr, "rumus-bench: bad shape '%s'\n", s);
      return -1;
    }
    const char *why = op->describe(&c);
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

int main(int argc, char **argv) {
  options o = {0};
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

  bench_run run;
  memset(&run, 0, sizeof run);
  char date[64];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  run.date = date;

  rumus_ctx *ctx = NULL;
  int st = rumus_ctx_create(&ctx, o.device, RUMUS_CTX_PROFILING);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-bench: %s: %s\n", rumus_strerror(st),
            rumus_last_create_error());
    return 1;
  }
  if (o.variant >= 0) rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, o.variant);
  char device_name[512];
  snprintf(device_name, sizeof device_name, "%s", rumus_ctx_device_name(ctx));
  run.device = device_name;
  run.is_gpu = rumus_ctx_is_gpu(ctx);
  run.gpu_variant = rumus_ctx_uses_gpu_variant(ctx);
  host_cpu(run.host_cpu, sizeof run.host_cpu);
  host_load(run.load_start, sizeof run.load_start);
  run.threads = peer_threads();
  run.blas = peer_blas_name();
  run.warmup = o.warmup;
  run.copy_bytes = (size_t)(o.copy_mb * 1048576.0);

  /* Select the cases first, so that bad arguments fail before any work. */
  bench_case *cases = NULL;
  size_t n = 0, cap = 0;
  if (o.ops == NULL) {
    for (size_t i = 0; i < bench_nops; i++)
      if (add_cases(&bench_ops[i], &o, run.is_gpu, &cases, &n, &cap) != 0) return 2;
  } else {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", o.ops);
    for (char *save = NULL, *s = strtok_r(buf, ",", &save); s;
         s = strtok_r(NULL, ",", &save)) {
      const bench_op *op = bench_find_op(s);
      if (op == NULL) {
        fprintf(stderr, "rumus-bench: unknown op '%s' (see --list)\n", s);
        return 2;
      }
      if (add_cases(op, &o, run.is_gpu, &cases, &n, &cap) != 0) return 2;
    }
  }

  if (progress_on) fprintf(stderr, "measuring the device copy bandwidth...");
  char err[256] = "";
  run.copy_gbs = bench_device_copy(ctx, run.copy_bytes, o.quick ? 5 : 20, 1,
                                   run.copy_forms, &run.empty_us, err, sizeof err);
  if (run.copy_gbs < 0) fprintf(stderr, "\nrumus-bench: %s\n", err);
  if (progress_on) fprintf(stderr, "\r\033[Kmeasuring the host copy bandwidth...");
  run.stream_gbs = host_stream_copy(run.copy_bytes, o.quick ? 5 : 20);

  int failed = 0;
  for (size_t i = 0; i < n; i++) {
    bench_case *c = &cases[i];
    c->ctx = ctx;
    if (c->status != RUMUS_OK) continue; /* the shape did not fit the op */
    run_case(c, &o, run.is_gpu, run.copy_bytes, i, n);
    if (c->status != RUMUS_OK && c->status != RUMUS_EUNSUPPORTED) failed = 1;
    if (c->status == RUMUS_ECL || c->status == RUMUS_EDEVMEM) {
      /* A fault in a kernel can leave the queue unusable (NVIDIA's driver
       * then answers CL_INVALID_COMMAND_QUEUE to everything): go on with a
       * fresh context so that the remaining cases still run. */
      fprintf(stderr, "%srumus-bench: %s %s: %s; continuing on a new context\n",
              progress_on ? "\r\033[K" : "", c->op->name, c->shape.text, c->note);
      rumus_ctx *fresh = NULL;
      if (rumus_ctx_create(&fresh, o.device, RUMUS_CTX_PROFILING) == RUMUS_OK) {
        rumus_ctx_free(ctx); /* may fail on a broken queue: then it leaks */
        ctx = fresh;
        if (o.variant >= 0) rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT, o.variant);
      }
    }
    if (c->check_err > CHECK_LIMIT || isnan(c->check_err)) failed = 1;
  }
  if (progress_on) fprintf(stderr, "\r\033[K");
  host_load(run.load_end, sizeof run.load_end);
  run.cases = cases;
  run.ncases = n;
  bench_print_table(&run, stdout);
  if (o.csv && bench_write_csv(&run, o.csv) != 0) {
    fprintf(stderr, "rumus-bench: cannot write %s: %s\n", o.csv, strerror(errno));
    failed = 1;
  }
  if (o.json && bench_write_json(&run, o.json) != 0) {
    fprintf(stderr, "rumus-bench: cannot write %s: %s\n", o.json, strerror(errno));
    failed = 1;
  }
  free(cases);
  rumus_ctx_free(ctx);
  return failed;
}
