/* quant.c - rumus-info self-check of the Q8 family: quantize (int8 values
 * and F16 scale bits, exact), dequantize (exact in F32) and the product
 * with a quantized matrix at M = 5 (the matrix-vector kernels) and M = 37
 * (the tiled ones), on rows of 100 (blocks of 32, the last one short).
 * The product's tolerance is the float summation bound (K + 1) 2^-24
 * sum_k |a_k b_k| at its largest, as in tests/check_quant.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "selfcheck.h"

enum { N = 67, K = 100, BS = 32, NB = (K + BS - 1) / BS };

/* A tensor of type d and the given shape holding bytes (NULL: none), or
 * NULL on failure. */
static rumus_tensor *q8_tensor(selfcheck *sc, rumus_dtype d, size_t rows,
                               size_t cols, const void *bytes) {
  const size_t shape[2] = {rows, cols};
  rumus_tensor *t = NULL;
  if (rumus_tensor_create(sc->ctx, d, 2, shape, &t) != RUMUS_OK) return NULL;
  if (bytes &&
      rumus_tensor_upload(t, bytes, rumus_tensor_nbytes(t)) != RUMUS_OK) {
    rumus_tensor_free(t);
    return NULL;
  }
  return t;
}

/* Quantizes x (N x K) on the device into q / sc (downloaded) and reports
 * the quantize and dequantize lines. */
static int check_codec(selfcheck *sc, const float *x, int8_t *q, uint16_t *s) {
  int8_t wq[N * K];
  uint16_t ws[N * NB];
  float y[N * K];
  double wy[N * K];
  rumus_tensor *tx = selfcheck_tensor(sc, N, K, x),
               *tq = q8_tensor(sc, RUMUS_I8, N, K, NULL),
               *ts = q8_tensor(sc, RUMUS_F16, N, NB, NULL),
               *ty = selfcheck_tensor(sc, N, K, NULL);
  int st = tx && tq && ts && ty ? RUMUS_OK : RUMUS_EDEVMEM;
  if (st == RUMUS_OK) st = rumus_quantize_q8(sc->ctx, tx, tq, ts, BS);
  if (st == RUMUS_OK) st = rumus_tensor_download(tq, q, sizeof wq);
  if (st == RUMUS_OK) st = rumus_tensor_download(ts, s, sizeof ws);
  double err = 0;
  if (st == RUMUS_OK) {
    ref_quantize_q8(x, N, K, BS, wq, ws);
    for (size_t i = 0; i < N * K; i++)
      err = fmax(err, fabs((double)q[i] - wq[i]));
    for (size_t i = 0; i < N * NB; i++)
      err = fmax(err, s[i] == ws[i] ? 0 : INFINITY);
  }
  selfcheck_report(sc, "quantize_q8", st, err, 0);
  const int ok = st == RUMUS_OK;
  if (ok) st = rumus_dequantize_q8(sc->ctx, tq, ts, BS, ty);
  if (st == RUMUS_OK) st = rumus_tensor_download(ty, y, sizeof y);
  if (st == RUMUS_OK) ref_dequantize_q8(q, s, N, K, BS, wy);
  selfcheck_report(sc, "dequantize_q8", st,
                   st == RUMUS_OK ? selfcheck_max_err(y, wy, N * K) : 0, 0);
  rumus_tensor_free(tx);
  rumus_tensor_free(tq);
  rumus_tensor_free(ts);
  rumus_tensor_free(ty);
  return ok && st == RUMUS_OK;
}

/* C = A B^T for A of m rows; *err and *tol of the product. */
static int check_product(selfcheck *sc, size_t m, const int8_t *q,
                         const uint16_t *s, double *err, double *tol) {
  float *a = malloc(m * K * sizeof *a), *c = malloc(m * N * sizeof *c);
  double *want = malloc(m * N * sizeof *want),
         *abs_sum = malloc(m * N * sizeof *abs_sum);
  int st = a && c && want && abs_sum ? RUMUS_OK : RUMUS_ENOMEM;
  rumus_tensor *ta = NULL, *tq = NULL, *ts = NULL, *tc = NULL;
  if (st == RUMUS_OK) {
    for (size_t i = 0; i < m * K; i++) a[i] = selfcheck_rand(-1, 1);
    ta = selfcheck_tensor(sc, m, K, a);
    tq = q8_tensor(sc, RUMUS_I8, N, K, q);
    ts = q8_tensor(sc, RUMUS_F16, N, NB, s);
    tc = selfcheck_tensor(sc, m, N, NULL);
    st = ta && tq && ts && tc ? RUMUS_OK : RUMUS_EDEVMEM;
  }
  if (st == RUMUS_OK) st = rumus_matmul_q8(sc->ctx, ta, tq, ts, BS, tc);
  if (st == RUMUS_OK) st = rumus_tensor_download(tc, c, m * N * sizeof *c);
  if (st == RUMUS_OK) {
    ref_matmul_q8(a, m, K, q, s, N, BS, want, abs_sum);
    double big = 0;
    for (size_t i = 0; i < m * N; i++) big = fmax(big, abs_sum[i]);
    *err = selfcheck_max_err(c, want, m * N);
    *tol = (K + 1) * 0x1p-24 * big;
  }
  rumus_tensor_free(ta);
  rumus_tensor_free(tq);
  rumus_tensor_free(ts);
  rumus_tensor_free(tc);
  free(a);
  free(c);
  free(want);
  free(abs_sum);
  return st;
}

void selfcheck_quant(selfcheck *sc) {
  float x[N * K];
  int8_t q[N * K];
  uint16_t s[N * NB];
  for (size_t i = 0; i < N * K; i++) x[i] = selfcheck_rand(-3, 3);
  if (!check_codec(sc, x, q, s)) return;
  /* The line reports the run whose error is the larger part of its own
   * tolerance. */
  double err = 0, tol = 1, e, t;
  int st = RUMUS_OK;
  const size_t ms[2] = {5, 37};
  for (int i = 0; i < 2 && st == RUMUS_OK; i++) {
    st = check_product(sc, ms[i], q, s, &e, &t);
    if (st == RUMUS_OK && !(e / t <= err / tol)) err = e, tol = t;
  }
  selfcheck_report(sc, "matmul_q8", st, err, tol);
}
