/* gemm.c - rumus-info self-check of the gemm family: odd shapes with
 * transposes, alpha and beta, against the float64 reference.  Tolerance as
 * in tests/check_gemm.c: 1e-5 (sqrt(K) + 1) |alpha| max|a| max|b| +
 * 2e-6 |beta| max|c|, with every operand in [-1, 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

static void check_shape(selfcheck *sc, int ta, int tb, size_t m, size_t n,
                        size_t k, float alpha, float beta) {
  char name[64];
  snprintf(name, sizeof name, "gemm_%c%c_%zux%zux%zu", ta ? 't' : 'n',
           tb ? 't' : 'n', m, n, k);
  float *a = malloc(m * k * sizeof *a), *b = malloc(k * n * sizeof *b),
        *c = malloc(m * n * sizeof *c), *got = malloc(m * n * sizeof *got);
  double *want = malloc(m * n * sizeof *want);
  rumus_tensor *tA = NULL, *tB = NULL, *tC = NULL;
  int st = RUMUS_ENOMEM;
  if (!a || !b || !c || !got || !want) goto out;
  for (size_t i = 0; i < m * k; i++) a[i] = selfcheck_rand(-1, 1);
  for (size_t i = 0; i < k * n; i++) b[i] = selfcheck_rand(-1, 1);
  for (size_t i = 0; i < m * n; i++) c[i] = selfcheck_rand(-1, 1);
  tA = selfcheck_tensor(sc, ta ? k : m, ta ? m : k, a);
  tB = selfcheck_tensor(sc, tb ? n : k, tb ? k : n, b);
  tC = selfcheck_tensor(sc, m, n, c);
  st = tA && tB && tC ? RUMUS_OK : RUMUS_EDEVMEM;
  if (st == RUMUS_OK)
    st = rumus_gemm(sc->ctx, ta ? RUMUS_TRANS : RUMUS_NO_TRANS,
                    tb ? RUMUS_TRANS : RUMUS_NO_TRANS, alpha, tA, tB, beta, tC);
  if (st == RUMUS_OK) st = rumus_tensor_download(tC, got, m * n * sizeof *got);
out:
  if (st == RUMUS_OK)
    ref_gemm(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n,
             want);
  selfcheck_report(sc, name, st, st == RUMUS_OK ? selfcheck_max_err(got, want, m * n) : 0,
                   1e-5 * (sqrt((double)k) + 1) * fabs(alpha) + 2e-6 * fabs(beta));
  rumus_tensor_free(tA);
  rumus_tensor_free(tB);
  rumus_tensor_free(tC);
  free(a);
  free(b);
  free(c);
  free(got);
  free(want);
}

void selfcheck_gemm(selfcheck *sc) {
  check_shape(sc, 0, 1, 37, 131, 53, 1.0f, 0.0f);
  check_shape(sc, 1, 0, 130, 29, 67, -0.5f, 1.0f);
  check_shape(sc, 1, 1, 257, 259, 129, 1.5f, -0.25f);
}
