/* dropout.c - rumus-info self-check of dropout, forward and backward, once
 * per storage type (lines suffixed _f16 and _bf16 for the 16-bit types).
 *
 * The inputs, in [-1, 1) and rounded to the type, go through p = 0.25
 * (scale 4/3) against the float64 reference of the rounded inputs, which
 * regenerates the mask on the host: a mask that differs in one element
 * errs by up to 4/3 there.  A kept value is x times the float scale,
 * rounded once: within 2^-23 of x / (1 - p) relative, 2e-7 for values up
 * to 4/3; a 16-bit line adds half an ulp of the type
 * (selfcheck_typed_tol). */
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { N = 33 * 1000 + 3 };

#define P 0.25f
#define SEED 0x0123456789abcdefull
#define OFFSET 42ull
#define TOL 2e-7

/* One line: dropout (forward or backward) of in (already rounded to d)
 * on the device against the reference. */
static void check_one(selfcheck *sc, rumus_dtype d, int bwd, const float *in,
                      float *got, double *want) {
  char line[64];
  snprintf(line, sizeof line, "%s%s", bwd ? "dropout_bwd" : "dropout_fwd",
           selfcheck_suffix(d));
  const size_t shape[1] = {N};
  rumus_tensor *a = NULL, *b = NULL;
  int st = rumus_tensor_create(sc->ctx, d, 1, shape, &a);
  if (st == RUMUS_OK) st = rumus_tensor_create(sc->ctx, d, 1, shape, &b);
  if (st == RUMUS_OK) st = rumus_tensor_upload_f32(a, in, N);
  if (st == RUMUS_OK)
    st = (bwd ? rumus_dropout_bwd : rumus_dropout_fwd)(sc->ctx, P, SEED,
                                                       OFFSET, a, b);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(b, got, N);
  if (st != RUMUS_OK) {
    selfcheck_report(sc, line, st, 0, 0);
  } else {
    ref_dropout(in, N, P, SEED, OFFSET, want);
    selfcheck_report(sc, line, st, selfcheck_max_err(got, want, N),
                     selfcheck_typed_tol(d, TOL, want, N));
  }
  rumus_tensor_free(a);
  rumus_tensor_free(b);
}

void selfcheck_dropout(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  float *x = malloc(N * sizeof *x), *dy = malloc(N * sizeof *dy);
  float *in = malloc(N * sizeof *in), *got = malloc(N * sizeof *got);
  double *want = malloc(N * sizeof *want);
  if (!x || !dy || !in || !got || !want) {
    selfcheck_report(sc, "dropout", RUMUS_ENOMEM, 0, 0);
  } else {
    for (size_t i = 0; i < N; i++)
      x[i] = selfcheck_rand(-1, 1), dy[i] = selfcheck_rand(-1, 1);
    for (int k = 0; k < 3; k++)
      for (int bwd = 0; bwd < 2; bwd++) {
        for (size_t i = 0; i < N; i++)
          in[i] = selfcheck_stored(TYPES[k], bwd ? dy[i] : x[i]);
        check_one(sc, TYPES[k], bwd, in, got, want);
      }
  }
  free(x);
  free(dy);
  free(in);
  free(got);
  free(want);
}
