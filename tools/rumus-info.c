/*
 * rumus-info - lists the OpenCL platforms and devices, builds every kernel
 * program on the chosen device and runs a self-check of each kernel against
 * the float64 CPU reference, printing the largest error per kernel.
 *
 *   rumus-info [-d DEVICE] [-l]
 *     -d DEVICE  index or name substring (default: RUMUS_DEVICE, else the
 *                first GPU, else the first device)
 *     -l         list the devices and exit
 *
 * Exit status: 0 when every check is within its tolerance, 1 otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "rumus.h"

typedef struct {
  rumus_ctx *ctx;
  int failures;
} info;

static uint64_t rng_state = 0x853c49e6748fea9bull;
static float frand(float lo, float hi) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return lo + (hi - lo) * (float)((rng_state >> 40) * (1.0 / 16777216.0));
}

/* Prints one result line; tol is the largest acceptable error. */
static void report(info *in, const char *kernel, int st, double err, double tol) {
  if (st != RUMUS_OK) {
    printf("  %-28s FAILED  %s: %s\n", kernel, rumus_err_name(st),
           rumus_ctx_errmsg(in->ctx));
    in->failures++;
    return;
  }
  int ok = err <= tol;
  printf("  %-28s %s  max error %.3e (tolerance %.1e)\n", kernel,
         ok ? "ok    " : "FAILED", err, tol);
  if (!ok) in->failures++;
}

static double max_abs_err(const float *got, const double *want, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - want[i]);
    if (isnan(e)) return INFINITY;
    if (e > m) m = e;
  }
  return m;
}

static rumus_tensor *make(info *in, size_t rows, size_t cols, const float *data) {
  size_t shape[2] = {rows, cols};
  rumus_tensor *t = NULL;
  if (rumus_tensor_create(in->ctx, RUMUS_F32, 2, shape, &t) != RUMUS_OK) return NULL;
  if (data) rumus_tensor_upload(t, data, rows * cols * sizeof(float));
  return t;
}

static void check_softmax(info *in) {
  enum { R = 33, C = 1000 };
  float *x = malloc(R * C * sizeof *x), *y = malloc(R * C * sizeof *y),
        *dy = malloc(R * C * sizeof *dy);
  double *want = malloc(R * C * sizeof *want);
  for (size_t i = 0; i < R * C; i++) x[i] = frand(-6, 6), dy[i] = frand(-1, 1);
  rumus_tensor *tx = make(in, R, C, x), *ty = make(in, R, C, NULL),
               *tdy = make(in, R, C, dy), *tdx = make(in, R, C, NULL);
  for (int log_mode = 0; log_mode < 2; log_mode++) {
    int st = (log_mode ? rumus_log_softmax_fwd : rumus_softmax_fwd)(in->ctx, tx, ty);
    if (st == RUMUS_OK) st = rumus_tensor_download(ty, y, R * C * sizeof *y);
    ref_softmax_fwd(x, R, C, log_mode, want);
    report(in, log_mode ? "log_softmax_fwd" : "softmax_fwd", st,
           max_abs_err(y, want, R * C), log_mode ? 2e-5 : 1e-6);
    st = (log_mode ? rumus_log_softmax_bwd : rumus_softmax_bwd)(in->ctx, ty, tdy, tdx);
    float *dx = x; /* reuse: x is not needed after the reference below */
    ref_softmax_bwd(y, dy, R, C, log_mode, want);
    if (st == RUMUS_OK) st = rumus_tensor_download(tdx, dx, R * C * sizeof *dx);
    report(in, log_mode ? "log_softmax_bwd" : "softmax_bwd", st,
           max_abs_err(dx, want, R * C), 2e-6);
    for (size_t i = 0; i < R * C; i++) x[i] = frand(-6, 6);
    rumus_tensor_upload(tx, x, R * C * sizeof *x);
  }
  rumus_tensor_free(tx);
  rumus_tensor_free(ty);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdx);
  free(x);
  free(y);
  free(dy);
  free(want);
}

static void usage(void) {
  fprintf(stderr, "usage: rumus-info [-d DEVICE] [-l]\n");
}

int main(int argc, char **argv) {
  const char *device = NULL;
  int list_only = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) device = argv[++i];
    else if (strcmp(argv[i], "-l") == 0) list_only = 1;
    else {
      usage();
      return 2;
    }
  }
  printf("rumus %s\n", rumus_version_string());
  int n = 0, st = rumus_device_count(&n);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-info: cannot list devices: %s\n", rumus_strerror(st));
    return 1;
  }
  printf("OpenCL devices: %d\n", n);
  for (int i = 0; i < n; i++) {
    char desc[512];
    if (rumus_device_describe(i, desc, sizeof desc) == RUMUS_OK) printf("  [%d] %s\n", i, desc);
  }
  if (list_only) return 0;
  info in = {0};
  st = rumus_ctx_create(&in.ctx, device, 0);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-info: %s: %s\n", rumus_strerror(st), rumus_last_create_error());
    return 1;
  }
  printf("device: %s\n", rumus_ctx_device_name(in.ctx));
  for (int v = RUMUS_VARIANT_GPU; v <= RUMUS_VARIANT_CPU; v++) {
    rumus_ctx_set_option(in.ctx, RUMUS_OPT_VARIANT, v);
    printf("building every kernel program (%s variant)...\n", v == RUMUS_VARIANT_GPU ? "work-group" : "row");
    st = rumus_cache_fill(in.ctx);
    if (st != RUMUS_OK) {
      printf("  build FAILED: %s\n%s\n", rumus_err_name(st), rumus_ctx_errmsg(in.ctx));
      in.failures++;
      continue;
    }
    printf("self-check against the float64 CPU reference:\n");
    check_softmax(&in);
  }
  rumus_ctx_free(in.ctx);
  printf("%s: %d failure%s\n", in.failures ? "FAILED" : "all kernels ok", in.failures,
         in.failures == 1 ? "" : "s");
  return in.failures ? 1 : 0;
}
