/* elementwise.c - rumus-info self-check of the bias, element-wise and
 * activation family. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

enum { R = 33, C = 71, N = R * C };

static const char *const ACT_NAMES[] = {"relu", "leaky_relu", "sigmoid",
                                        "tanh", "gelu_tanh", "gelu_erf"};

/* Downloads t into got (if st is OK) and reports the largest error. */
static void report(selfcheck *sc, const char *name, int st, rumus_tensor *t,
                   float *got, const double *want, size_t n, double tol) {
  if (st == RUMUS_OK) st = rumus_tensor_download(t, got, n * sizeof *got);
  selfcheck_report(sc, name, st, st == RUMUS_OK ? selfcheck_max_err(got, want, n) : 0, tol);
}

void selfcheck_elementwise(selfcheck *sc) {
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *got = malloc(N * sizeof *got),
        *bias = malloc(C * sizeof *bias);
  double *want = malloc(N * sizeof *want);
  rumus_tensor *ta = NULL, *tb = NULL, *to = NULL, *tbias = NULL;
  if (!a || !b || !got || !bias || !want) {
    selfcheck_report(sc, "elementwise", RUMUS_ENOMEM, 0, 0);
    goto out;
  }
  for (size_t i = 0; i < N; i++) a[i] = selfcheck_rand(-6, 6), b[i] = selfcheck_rand(-1, 1);
  for (size_t j = 0; j < C; j++) bias[j] = selfcheck_rand(-1, 1);
  ta = selfcheck_tensor(sc, R, C, a);
  tb = selfcheck_tensor(sc, R, C, b);
  to = selfcheck_tensor(sc, R, C, NULL);
  tbias = selfcheck_tensor(sc, 1, C, bias);
  if (!ta || !tb || !to || !tbias) {
    selfcheck_report(sc, "elementwise", RUMUS_EDEVMEM, 0, 0);
    goto out;
  }
  size_t bshape[1] = {C};
  int st = rumus_tensor_reshape(tbias, 1, bshape); /* bias: [C] */

  /* add and mul: one rounding each, so within an ulp of values below 8. */
  int s2 = rumus_add(sc->ctx, ta, tb, to);
  for (size_t i = 0; i < N; i++) want[i] = (double)a[i] + b[i];
  report(sc, "add", s2, to, got, want, N, 1e-6);
  s2 = rumus_mul(sc->ctx, ta, tb, to);
  for (size_t i = 0; i < N; i++) want[i] = (double)a[i] * b[i];
  report(sc, "mul", s2, to, got, want, N, 1e-6);

  /* bias_add on a copy of a, then bias_grad of b. */
  if (st == RUMUS_OK) st = rumus_tensor_copy(to, ta);
  if (st == RUMUS_OK) st = rumus_bias_add(sc->ctx, to, tbias);
  for (size_t i = 0; i < N; i++) want[i] = (double)a[i] + bias[i % C];
  report(sc, "bias_add", st, to, got, want, N, 1e-6);
  s2 = rumus_bias_grad(sc->ctx, tb, tbias);
  ref_bias_grad(b, R, C, want);
  report(sc, "bias_grad", s2, tbias, got, want, C, 1e-5);

  /* Every activation, forward and backward (dy = b). */
  for (int act = 0; act < 6; act++) {
    char name[40];
    s2 = rumus_activation_fwd(sc->ctx, (rumus_activation)act, 0.01f, ta, to);
    for (size_t i = 0; i < N; i++) want[i] = ref_activation(act, 0.01f, a[i]);
    snprintf(name, sizeof name, "%s_fwd", ACT_NAMES[act]);
    report(sc, name, s2, to, got, want, N, 2e-5);
    s2 = rumus_activation_bwd(sc->ctx, (rumus_activation)act, 0.01f, ta, tb, to);
    for (size_t i = 0; i < N; i++) want[i] = b[i] * ref_activation_grad(act, 0.01f, a[i]);
    snprintf(name, sizeof name, "%s_bwd", ACT_NAMES[act]);
    report(sc, name, s2, to, got, want, N, 2e-6);
  }
out:
  rumus_tensor_free(ta);
  rumus_tensor_free(tb);
  rumus_tensor_free(to);
  rumus_tensor_free(tbias);
  free(a);
  free(b);
  free(got);
  free(bias);
  free(want);
}
