/* common.c - helpers shared by rumus-info's self-checks. */
#include <math.h>
#include <stdio.h>

#include "selfcheck.h"

#define SELFCHECK_SEED 0x853c49e6748fea9bull

static uint64_t rng_state = SELFCHECK_SEED;

void selfcheck_reseed(void) { rng_state = SELFCHECK_SEED; }

float selfcheck_stored(rumus_dtype d, float x) {
  if (d == RUMUS_F16) return rumus_f16_to_f32(rumus_f32_to_f16(x));
  if (d == RUMUS_BF16) return rumus_bf16_to_f32(rumus_f32_to_bf16(x));
  return x;
}

double selfcheck_typed_tol(rumus_dtype d, double tol, const double *want,
                           size_t n) {
  if (d == RUMUS_F32) return tol;
  double m = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(want[i]) && fabs(want[i]) > m) m = fabs(want[i]);
  return d == RUMUS_F16 ? tol + m * 0x1p-11 + 0x1p-25 : tol + m * 0x1p-8;
}

const char *selfcheck_suffix(rumus_dtype d) {
  return d == RUMUS_F16 ? "_f16" : d == RUMUS_BF16 ? "_bf16" : "";
}

void selfcheck_typed_line(selfcheck *sc, const char *name, rumus_dtype d,
                          int st, const rumus_tensor *t, float *got,
                          const double *want, size_t n, double tol) {
  char line[64];
  snprintf(line, sizeof line, "%s%s", name, selfcheck_suffix(d));
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t, got, n);
  if (st != RUMUS_OK) {
    selfcheck_report(sc, line, st, 0, 0);
    return;
  }
  selfcheck_report(sc, line, st, selfcheck_max_err(got, want, n),
                   selfcheck_typed_tol(d, tol, want, n));
}

float selfcheck_rand(float lo, float hi) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return lo + (hi - lo) * (float)((rng_state >> 40) * (1.0 / 16777216.0));
}

void selfcheck_report(selfcheck *sc, const char *kernel, int st, double err,
                      double tol) {
  if (st != RUMUS_OK) {
    printf("  %-28s FAILED  %s: %s\n", kernel, rumus_err_name(st),
           rumus_ctx_errmsg(sc->ctx));
    sc->failures++;
    return;
  }
  int ok = err <= tol;
  printf("  %-28s %s  max error %.3e (tolerance %.1e)\n", kernel,
         ok ? "ok    " : "FAILED", err, tol);
  if (!ok) sc->failures++;
}

double selfcheck_max_err(const float *got, const double *want, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(want[i]) && isnan(got[i])) continue;
    double e = fabs((double)got[i] - want[i]);
    if (isnan(e)) return INFINITY;
    if (e > m) m = e;
  }
  return m;
}

rumus_tensor *selfcheck_tensor(selfcheck *sc, size_t rows, size_t cols,
                               const float *data) {
  size_t shape[2] = {rows, cols};
  rumus_tensor *t = NULL;
  if (rumus_tensor_create(sc->ctx, RUMUS_F32, 2, shape, &t) != RUMUS_OK)
    return NULL;
  if (data && rumus_tensor_upload(t, data, rows * cols * sizeof(float)) != RUMUS_OK) {
    rumus_tensor_free(t);
    return NULL;
  }
  return t;
}
