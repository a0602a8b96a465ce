/*
 * peer.c - the host peers of rumus-bench (see peer.h).  Built with -O3 and
 * the machine's own instruction set (-march=native by default); the pragma
 * keeps -O3 even when the user's CFLAGS, which come last, say -O2.
 *
 * Scheme: rows (row ops) or elements (element-wise ops) are split statically
 * over the OpenMP threads; inner loops are `omp simd` so that the compiler
 * vectorises them, reductions included (reassociated per vector lane).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "peer.h"

int peer_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

const char *peer_blas_name(void) {
#ifdef HAVE_OPENBLAS
  static char name[160];
  snprintf(name, sizeof name, "%s, %d threads", openblas_get_config(),
           openblas_get_num_threads());
  return name;
#else
  return NULL;
#endif
}

void peer_copy(float *restrict dst, const float *restrict src, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

/* ---- Rows ---------------------------------------------------------------- */

static float row_max(const float *restrict x, size_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (size_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}

/* sum_j exp(x[j] - m) */
static float row_sumexp(const float *restrict x, size_t n, float m) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (size_t j = 0; j < n; j++) s += expf(x[j] - m);
  return s;
}

void peer_softmax_fwd(const float *restrict x, float *restrict y, size_t rows,
                      size_t cols) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m = row_max(xr, cols);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t j = 0; j < cols; j++) {
      float e = expf(xr[j] - m);
      yr[j] = e;
      s += e;
    }
    float inv = 1.0f / s;
#pragma omp simd
    for (size_t j = 0; j < cols; j++) yr[j] *= inv;
  }
}

void peer_log_softmax_fwd(const float *restrict x, float *restrict y,
                          size_t rows, size_t cols) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m = row_max(xr, cols);
    float lse = m + logf(row_sumexp(xr, cols, m));
#pragma omp simd
    for (size_t j = 0; j < cols; j++) yr[j] = xr[j] - lse;
  }
}

void peer_softmax_bwd(const float *restrict y, const float *restrict dy,
                      float *restrict dx, size_t rows, size_t cols) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++) {
    const float *yr = y + r * cols, *gr = dy + r * cols;
    float *dr = dx + r * cols;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (size_t j = 0; j < cols; j++) dot += yr[j] * gr[j];
#pragma omp simd
    for (size_t j = 0; j < cols; j++) dr[j] = yr[j] * (gr[j] - dot);
  }
}

void peer_log_softmax_bwd(const float *restrict y, const float *restrict dy,
                          float *restrict dx, size_t rows, size_t cols) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++) {
    const float *yr = y + r * cols, *gr = dy + r * cols;
    float *dr = dx + r * cols;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t j = 0; j < cols; j++) s += gr[j];
#pragma omp simd
    for (size_t j = 0; j < cols; j++) dr[j] = gr[j] - expf(yr[j]) * s;
  }
}

void peer_xent(const float *restrict x, const int32_t *restrict target,
               float *loss, float *restrict grad, size_t rows, size_t cols) {
  size_t count = 0;
  for (size_t r = 0; r < rows; r++) count += target[r] != -100;
  const float scale = 1.0f / (float)count;
  double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
  for (size_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *gr = grad + r * cols;
    const int32_t t = target[r];
    if (t == -100) {
      memset(gr, 0, cols * sizeof *gr);
      continue;
    }
    float m = row_max(xr, cols);
    float lse = m + logf(row_sumexp(xr, cols, m));
#pragma omp simd
    for (size_t j = 0; j < cols; j++) gr[j] = expf(xr[j] - lse) * scale;
    gr[t] -= scale;
    total += (double)(lse - xr[t]);
  }
  *loss = (float)(total / (double)count);
}

/* ---- GEMM ---------------------------------------------------------------- */

int peer_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k,
               const float *a, const float *b, float *c) {
#ifdef HAVE_OPENBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
              (blasint)k, 1.0f, a, (blasint)(trans_a ? m : k), b,
              (blasint)(trans_b ? k : n), 0.0f, c, (blasint)n);
  return 1;
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)a, (void)b,
      (void)c;
  return 0;
#endif
}

/* ---- Bias and element-wise ----------------------------------------------- */

void peer_bias_add(float *restrict y, const float *restrict bias, size_t rows,
                   size_t cols) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < rows; r++) {
    float *yr = y + r * cols;
#pragma omp simd
    for (size_t j = 0; j < cols; j++) yr[j] += bias[j];
  }
}

/* Columns are split over the threads; each thread walks every row of its
 * column range in order (deterministic). */
void peer_bias_grad(const float *restrict dy, float *restrict dbias,
                    size_t rows, size_t cols) {
#pragma omp parallel
  {
    size_t nt = 1, id = 0;
#ifdef _OPENMP
    nt = (size_t)omp_get_num_threads();
    id = (size_t)omp_get_thread_num();
#endif
    size_t per = (cols + nt - 1) / nt;
    size_t j0 = id * per < cols ? id * per : cols;
    size_t j1 = j0 + per < cols ? j0 + per : cols;
    for (size_t j = j0; j < j1; j++) dbias[j] = 0.0f;
    for (size_t r = 0; r < rows; r++) {
      const float *gr = dy + r * cols;
#pragma omp simd
      for (size_t j = j0; j < j1; j++) dbias[j] += gr[j];
    }
  }
}

void peer_add(const float *restrict a, const float *restrict b,
              float *restrict out, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void peer_mul(const float *restrict a, const float *restrict b,
              float *restrict out, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void peer_axpy(float alpha, const float *restrict x, float *restrict y,
               size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

void peer_relu_fwd(const float *restrict x, float *restrict y, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void peer_relu_bwd(const float *restrict x, const float *restrict dy,
                   float *restrict dx, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f

void peer_gelu_fwd(const float *restrict x, float *restrict y, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++)
    y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT2));
}

void peer_gelu_bwd(const float *restrict x, const float *restrict dy,
                   float *restrict dx, size_t n) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    float cdf = 0.5f * (1.0f + erff(v * INV_SQRT2));
    float pdf = INV_SQRT_2PI * expf(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

/* ---- Optimizers ---------------------------------------------------------- */

void peer_sgd(float *restrict param, const float *restrict grad,
              float *restrict mom, size_t n, float lr, float momentum,
              float weight_decay, long step) {
  if (step <= 1) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
      float g = grad[i] + weight_decay * param[i];
      mom[i] = g;
      param[i] -= lr * g;
    }
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    float g = grad[i] + weight_decay * param[i];
    float b = momentum * mom[i] + g;
    mom[i] = b;
    param[i] -= lr * b;
  }
}

void peer_adamw(float *restrict param, const float *restrict grad,
                float *restrict m, float *restrict v, size_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay,
                long step) {
  const float bc1 = 1.0f - powf(beta1, (float)step);
  const float bc2 = 1.0f - powf(beta2, (float)step);
  const float step_size = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
  const float decay = 1.0f - lr * weight_decay;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) {
    float g = grad[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * decay - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
}

/* Double accumulators: a float sum of 2^26 squares per vector lane drifts
 * by about 1e-3, too much for the check; still one pass at memory speed. */
float peer_sum_squares(const float *restrict x, size_t n) {
  double s = 0.0;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
  for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
  return (float)s;
}

/* The value of finite F16 bits (the scales). */
static float f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const float v = e ? ldexpf(1024.0f + (float)m, e - 25)
                    : ldexpf((float)m, -24);
  return (h & 0x8000) ? -v : v;
}

void peer_matmul_q8(const float *restrict a, const int8_t *restrict q,
                    const uint16_t *restrict s, float *restrict c, size_t m,
                    size_t n, size_t k, size_t bs) {
  const size_t nb = (k + bs - 1) / bs;
#pragma omp parallel
  {
    /* Row j of B dequantized once into w, then its dot with each row of
     * A. */
    float *w = malloc(k * sizeof *w);
#pragma omp for schedule(static)
    for (size_t j = 0; j < n; j++) {
      if (w == NULL) continue;
      for (size_t b = 0; b < nb; b++) {
        const size_t k0 = b * bs, k1 = k0 + bs < k ? k0 + bs : k;
        const float sc = f16_value(s[j * nb + b]);
#pragma omp simd
        for (size_t p = k0; p < k1; p++) w[p] = (float)q[j * k + p] * sc;
      }
      for (size_t i = 0; i < m; i++) {
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (size_t p = 0; p < k; p++) d += a[i * k + p] * w[p];
        c[i * n + j] = d;
      }
    }
    free(w);
  }
}
