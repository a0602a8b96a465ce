/*
 * rumus-info - lists the OpenCL platforms and devices, builds every kernel
 * program on the chosen device and runs a self-check of each kernel against
 * the float64 CPU reference, printing the largest error per kernel.
 *
 *   rumus-info [-d DEVICE] [-l | -s [-f]]
 *     -d DEVICE  index or name substring (default: RUMUS_DEVICE, else the
 *                first GPU, else the first device)
 *     -l         list the devices and exit
 *     -s         time start-up (context, first cross-entropy, sync) of a
 *                fresh context instead of the self-check; with -f, after
 *                rumus_cache_fill
 *
 * Exit status: 0 when every check is within its tolerance, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selfcheck.h"

static void usage(void) {
  fprintf(stderr, "usage: rumus-info [-d DEVICE] [-l | -s [-f]]\n");
}

int main(int argc, char **argv) {
  const char *device = NULL;
  int list_only = 0, startup = 0, fill = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) device = argv[++i];
    else if (strcmp(argv[i], "-l") == 0) list_only = 1;
    else if (strcmp(argv[i], "-s") == 0) startup = 1;
    else if (strcmp(argv[i], "-f") == 0) fill = 1;
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
  if (startup) return startup_report(device, fill);
  selfcheck in = {0};
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
    void (*const families[])(selfcheck *) = {
        selfcheck_softmax,     selfcheck_xent,  selfcheck_gemm,
        selfcheck_elementwise, selfcheck_optim, selfcheck_quant,
        selfcheck_dropout,     selfcheck_pool,  selfcheck_batchnorm,
        selfcheck_conv,        selfcheck_embedding, selfcheck_layernorm,
        selfcheck_tensorops,   selfcheck_attention};
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
      selfcheck_reseed();
      families[f](&in);
    }
  }
  rumus_ctx_free(in.ctx);
  printf("%s: %d failure%s\n", in.failures ? "FAILED" : "all kernels ok", in.failures,
         in.failures == 1 ? "" : "s");
  return in.failures ? 1 : 0;
}
