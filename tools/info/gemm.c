/* gemm.c - rumus-info self-check of the gemm family: odd shapes with
 * transposes, alpha and beta, against the float64 reference.  Tolerance as
 * in tests/check_gemm.c: 1e-5 (sqrt(K) + 1) |alpha| max|a| max|b| +
 * 2e-6 |beta| max|c|, with every operand in [-1, 1).
 *
 * The 16-bit lines (gemm_f16, gemm_bf16: C of the operands' type;
 * gemm_f16_f32c, gemm_bf16_f32c: a float C) run one product each, aligned
 * views for two of them and odd ones for the other two, on operands
 * rounded to their type; a 16-bit C adds the rounding of the stored
 * result: (1 + r) tol + r max|want| + a, with r = 2^-11 and a = 2^-25 for
 * F16, r = 2^-8 and a = 0 for BF16.  They draw from a generator of their
 * own, so the F32 lines and the families after this one see the data
 * they always did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

/* The 16-bit lines' generator (xorshift, as selfcheck_rand). */
static float typed_rand(float lo, float hi) {
  static uint64_t s = 0x2545f4914f6cdd1dull;
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
}

/* A rows x cols tensor of type d holding data, or NULL on failure. */
static rumus_tensor *typed_tensor(selfcheck *sc, rumus_dtype d, size_t rows,
                                  size_t cols, const float *data) {
  size_t shape[2] = {rows, cols};
  rumus_tensor *t = NULL;
  if (rumus_tensor_create(sc->ctx, d, 2, shape, &t) != RUMUS_OK) return NULL;
  if (rumus_tensor_upload_f32(t, data, rows * cols) != RUMUS_OK) {
    rumus_tensor_free(t);
    return NULL;
  }
  return t;
}

/* One product of A and B of type ab into C of type ct, reported as
 * `name`; rnd draws the operands. */
static void check_case(selfcheck *sc, const char *name, rumus_dtype ab,
                       rumus_dtype ct, int ta, int tb, size_t m, size_t n,
                       size_t k, float alpha, float beta,
                       float (*rnd)(float, float)) {
  float *a = malloc(m * k * sizeof *a), *b = malloc(k * n * sizeof *b),
        *c = malloc(m * n * sizeof *c), *got = malloc(m * n * sizeof *got);
  double *want = malloc(m * n * sizeof *want);
  rumus_tensor *tA = NULL, *tB = NULL, *tC = NULL;
  int st = RUMUS_ENOMEM;
  if (!a || !b || !c || !got || !want) goto out;
  for (size_t i = 0; i < m * k; i++) a[i] = selfcheck_stored(ab, rnd(-1, 1));
  for (size_t i = 0; i < k * n; i++) b[i] = selfcheck_stored(ab, rnd(-1, 1));
  for (size_t i = 0; i < m * n; i++) c[i] = selfcheck_stored(ct, rnd(-1, 1));
  tA = typed_tensor(sc, ab, ta ? k : m, ta ? m : k, a);
  tB = typed_tensor(sc, ab, tb ? n : k, tb ? k : n, b);
  tC = typed_tensor(sc, ct, m, n, c);
  st = tA && tB && tC ? RUMUS_OK : RUMUS_EDEVMEM;
  if (st == RUMUS_OK)
    st = rumus_gemm(sc->ctx, ta ? RUMUS_TRANS : RUMUS_NO_TRANS,
                    tb ? RUMUS_TRANS : RUMUS_NO_TRANS, alpha, tA, tB, beta, tC);
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(tC, got, m * n);
out:;
  double err = 0, tol = 1e-5 * (sqrt((double)k) + 1) * fabs(alpha) +
                        2e-6 * fabs(beta);
  if (st == RUMUS_OK) {
    ref_gemm(ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n,
             want);
    err = selfcheck_max_err(got, want, m * n);
    double wmax = 0;
    for (size_t i = 0; i < m * n; i++) wmax = fmax(wmax, fabs(want[i]));
    const double r = ct == RUMUS_F16 ? 0x1p-11 : ct == RUMUS_BF16 ? 0x1p-8 : 0;
    tol = (1 + r) * tol + r * wmax + (ct == RUMUS_F16 ? 0x1p-25 : 0);
  }
  selfcheck_report(sc, name, st, err, tol);
  rumus_tensor_free(tA);
  rumus_tensor_free(tB);
  rumus_tensor_free(tC);
  free(a);
  free(b);
  free(c);
  free(got);
  free(want);
}

static void check_shape(selfcheck *sc, int ta, int tb, size_t m, size_t n,
                        size_t k, float alpha, float beta) {
  char name[64];
  snprintf(name, sizeof name, "gemm_%c%c_%zux%zux%zu", ta ? 't' : 'n',
           tb ? 't' : 'n', m, n, k);
  check_case(sc, name, RUMUS_F32, RUMUS_F32, ta, tb, m, n, k, alpha, beta,
             selfcheck_rand);
}

void selfcheck_gemm(selfcheck *sc) {
  check_shape(sc, 0, 1, 37, 131, 53, 1.0f, 0.0f);
  check_shape(sc, 1, 0, 130, 29, 67, -0.5f, 1.0f);
  check_shape(sc, 1, 1, 257, 259, 129, 1.5f, -0.25f);
  check_case(sc, "gemm_f16", RUMUS_F16, RUMUS_F16, 0, 0, 128, 96, 64, 1.0f,
             0.5f, typed_rand);
  check_case(sc, "gemm_bf16", RUMUS_BF16, RUMUS_BF16, 1, 1, 67, 131, 33,
             -0.5f, 1.0f, typed_rand);
  check_case(sc, "gemm_f16_f32c", RUMUS_F16, RUMUS_F32, 1, 0, 67, 131, 33,
             1.5f, -0.25f, typed_rand);
  check_case(sc, "gemm_bf16_f32c", RUMUS_BF16, RUMUS_F32, 0, 1, 128, 96, 64,
             1.0f, 0.5f, typed_rand);
}
