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

/* ---- Convolution: im2col + sgemm ----------------------------------------- */

#ifdef HAVE_OPENBLAS
/* Row-major sgemm with leading dimensions and beta. */
static void sgemm_ld(int ta, int tb, size_t m, size_t n, size_t k,
                     const float *a, size_t lda, const float *b, size_t ldb,
                     float beta, float *c, size_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
              (blasint)k, 1.0f, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}

/* Rows (ci, kh, kw) of cg channels of one image x [cg, h, w] into col
 * [cg k k, oh ow] (0 in the padding).  On the calling thread alone, as is
 * col2im: between the sgemm calls OpenBLAS's threads spin waiting for the
 * next one, and OpenMP threads beside them took the peer from 30 to 990
 * ms on 2 shared cores (64x32x64x14). */
static void im2col(const peer_conv *q, size_t cg, const float *restrict x,
                   float *restrict col) {
  const size_t kk = q->k * q->k, np = q->oh * q->ow;
  for (size_t r = 0; r < cg * kk; r++) {
    const float *xc = x + r / kk * q->h * q->w;
    const long kh = (long)(r / q->k % q->k), kw = (long)(r % q->k);
    float *cr = col + r * np;
    for (size_t i = 0; i < q->oh; i++) {
      const long ih = (long)(i * q->s) + kh - (long)q->p;
      float *o = cr + i * q->ow;
      if (ih < 0 || ih >= (long)q->h) {
        memset(o, 0, q->ow * sizeof *o);
        continue;
      }
      const float *xr = xc + (size_t)ih * q->w;
      for (size_t j = 0; j < q->ow; j++) {
        const long iw = (long)(j * q->s) + kw - (long)q->p;
        o[j] = iw >= 0 && iw < (long)q->w ? xr[iw] : 0.0f;
      }
    }
  }
}

/* The reverse: dx [cg, h, w] = the sum of col's entries that im2col took
 * from each pixel. */
static void col2im(const peer_conv *q, size_t cg, const float *restrict col,
                   float *restrict dx) {
  const size_t kk = q->k * q->k, np = q->oh * q->ow;
  for (size_t ci = 0; ci < cg; ci++) {
    float *xc = dx + ci * q->h * q->w;
    memset(xc, 0, q->h * q->w * sizeof *xc);
    for (size_t r = ci * kk; r < (ci + 1) * kk; r++) {
      const long kh = (long)(r / q->k % q->k), kw = (long)(r % q->k);
      const float *cr = col + r * np;
      for (size_t i = 0; i < q->oh; i++) {
        const long ih = (long)(i * q->s) + kh - (long)q->p;
        if (ih < 0 || ih >= (long)q->h) continue;
        float *xr = xc + (size_t)ih * q->w;
        for (size_t j = 0; j < q->ow; j++) {
          const long iw = (long)(j * q->s) + kw - (long)q->p;
          if (iw >= 0 && iw < (long)q->w) xr[iw] += cr[i * q->ow + j];
        }
      }
    }
  }
}
#endif

int peer_conv2d_fwd(const peer_conv *q, const float *x, const float *w,
                    const float *bias, float *y) {
#ifdef HAVE_OPENBLAS
  const size_t cg = q->c / q->g, og = q->oc / q->g, kk = q->k * q->k,
               np = q->oh * q->ow, hw = q->h * q->w;
  float *col = malloc(cg * kk * np * sizeof *col);
  if (col == NULL) return 0;
  for (size_t n = 0; n < q->n; n++)
    for (size_t g = 0; g < q->g; g++) {
      im2col(q, cg, x + (n * q->c + g * cg) * hw, col);
      sgemm_ld(0, 0, og, np, cg * kk, w + g * og * cg * kk, cg * kk, col, np,
               0.0f, y + (n * q->oc + g * og) * np, np);
    }
  free(col);
  if (bias) {
    for (size_t r = 0; r < q->n * q->oc; r++) {
      float *yr = y + r * np;
      const float b = bias[r % q->oc];
#pragma omp simd
      for (size_t j = 0; j < np; j++) yr[j] += b;
    }
  }
  return 1;
#else
  (void)q, (void)x, (void)w, (void)bias, (void)y;
  return 0;
#endif
}

int peer_conv2d_bwd_data(const peer_conv *q, const float *dy, const float *w,
                         float *dx) {
#ifdef HAVE_OPENBLAS
  const size_t cg = q->c / q->g, og = q->oc / q->g, kk = q->k * q->k,
               np = q->oh * q->ow, hw = q->h * q->w;
  float *col = malloc(cg * kk * np * sizeof *col);
  if (col == NULL) return 0;
  for (size_t n = 0; n < q->n; n++)
    for (size_t g = 0; g < q->g; g++) {
      sgemm_ld(1, 0, cg * kk, np, og, w + g * og * cg * kk, cg * kk,
               dy + (n * q->oc + g * og) * np, np, 0.0f, col, np);
      col2im(q, cg, col, dx + (n * q->c + g * cg) * hw);
    }
  free(col);
  return 1;
#else
  (void)q, (void)dy, (void)w, (void)dx;
  return 0;
#endif
}

int peer_conv2d_bwd_weight(const peer_conv *q, const float *x,
                           const float *dy, float *dw) {
#ifdef HAVE_OPENBLAS
  const size_t cg = q->c / q->g, og = q->oc / q->g, kk = q->k * q->k,
               np = q->oh * q->ow, hw = q->h * q->w;
  float *col = malloc(cg * kk * np * sizeof *col);
  if (col == NULL) return 0;
  for (size_t n = 0; n < q->n; n++)
    for (size_t g = 0; g < q->g; g++) {
      im2col(q, cg, x + (n * q->c + g * cg) * hw, col);
      sgemm_ld(0, 1, og, cg * kk, np, dy + (n * q->oc + g * og) * np, np, col,
               np, n ? 1.0f : 0.0f, dw + g * og * cg * kk, cg * kk);
    }
  free(col);
  return 1;
#else
  (void)q, (void)x, (void)dy, (void)dw;
  return 0;
#endif
}

/* ---- Pooling ------------------------------------------------------------- */

/* The output extent of floor-mode pooling. */
static size_t pool_out(size_t in, size_t k, size_t s, size_t p) {
  return (in + 2 * p - k) / s + 1;
}

void peer_maxpool2d_fwd(const float *restrict x, float *restrict y,
                        int32_t *restrict idx, size_t planes, size_t h,
                        size_t w, size_t k, size_t s, size_t p) {
  const size_t oh = pool_out(h, k, s, p), ow = pool_out(w, k, s, p);
#pragma omp parallel for schedule(static)
  for (size_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * h * w;
    for (size_t i = 0; i < oh; i++)
      for (size_t j = 0; j < ow; j++) {
        const long h0 = (long)(i * s) - (long)p, w0 = (long)(j * s) - (long)p;
        float best = -INFINITY;
        int32_t at = -1;
        for (long a = h0 < 0 ? 0 : h0; a < h0 + (long)k && a < (long)h; a++)
          for (long b = w0 < 0 ? 0 : w0; b < w0 + (long)k && b < (long)w; b++) {
            const float v = xp[(size_t)a * w + (size_t)b];
            if (at < 0 || v > best) {
              best = v;
              at = (int32_t)((size_t)a * w + (size_t)b);
            }
          }
        y[(pl * oh + i) * ow + j] = best;
        idx[(pl * oh + i) * ow + j] = at;
      }
  }
}

void peer_maxpool2d_bwd(const float *restrict dy, const int32_t *restrict idx,
                        float *restrict dx, size_t planes, size_t h, size_t w,
                        size_t oh, size_t ow) {
#pragma omp parallel for schedule(static)
  for (size_t pl = 0; pl < planes; pl++) {
    float *dp = dx + pl * h * w;
    memset(dp, 0, h * w * sizeof *dp);
    for (size_t o = pl * oh * ow; o < (pl + 1) * oh * ow; o++)
      if (idx[o] >= 0) dp[idx[o]] += dy[o];
  }
}

/* Rows [*lo, *hi) of a window starting at o s - p inside [0, in), and the
 * window's extent counted with the padding (count_include_pad). */
static size_t avg_span(size_t o, size_t in, size_t k, size_t s, size_t p,
                       long *lo, long *hi) {
  const long a = (long)(o * s) - (long)p;
  long b = a + (long)k;
  if (b > (long)(in + p)) b = (long)(in + p);
  *lo = a < 0 ? 0 : a;
  *hi = b < (long)in ? b : (long)in;
  return (size_t)(b - a);
}

void peer_avgpool2d_fwd(const float *restrict x, float *restrict y,
                        size_t planes, size_t h, size_t w, size_t k, size_t s,
                        size_t p) {
  const size_t oh = pool_out(h, k, s, p), ow = pool_out(w, k, s, p);
#pragma omp parallel for schedule(static)
  for (size_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * h * w;
    for (size_t i = 0; i < oh; i++) {
      long a0, a1, b0, b1;
      const size_t eh = avg_span(i, h, k, s, p, &a0, &a1);
      for (size_t j = 0; j < ow; j++) {
        const size_t ew = avg_span(j, w, k, s, p, &b0, &b1);
        float sum = 0.0f;
        for (long a = a0; a < a1; a++)
          for (long b = b0; b < b1; b++) sum += xp[(size_t)a * w + (size_t)b];
        y[(pl * oh + i) * ow + j] = sum / (float)(eh * ew);
      }
    }
  }
}

void peer_avgpool2d_bwd(const float *restrict dy, float *restrict dx,
                        size_t planes, size_t h, size_t w, size_t k, size_t s,
                        size_t p) {
  const size_t oh = pool_out(h, k, s, p), ow = pool_out(w, k, s, p);
#pragma omp parallel for schedule(static)
  for (size_t pl = 0; pl < planes; pl++) {
    float *dp = dx + pl * h * w;
    memset(dp, 0, h * w * sizeof *dp);
    for (size_t i = 0; i < oh; i++) {
      long a0, a1, b0, b1;
      const size_t eh = avg_span(i, h, k, s, p, &a0, &a1);
      for (size_t j = 0; j < ow; j++) {
        const size_t ew = avg_span(j, w, k, s, p, &b0, &b1);
        const float g = dy[(pl * oh + i) * ow + j] / (float)(eh * ew);
        for (long a = a0; a < a1; a++)
          for (long b = b0; b < b1; b++) dp[(size_t)a * w + (size_t)b] += g;
      }
    }
  }
}

/* Bin i of out over in: [floor(i in / out), ceil((i + 1) in / out)). */
static void bin(size_t i, size_t in, size_t out, size_t *lo, size_t *hi) {
  *lo = i * in / out;
  *hi = ((i + 1) * in + out - 1) / out;
}

void peer_adaptive_avgpool2d_fwd(const float *restrict x, float *restrict y,
                                 size_t planes, size_t h, size_t w, size_t oh,
                                 size_t ow) {
#pragma omp parallel for schedule(static)
  for (size_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * h * w;
    for (size_t i = 0; i < oh; i++) {
      size_t a0, a1, b0, b1;
      bin(i, h, oh, &a0, &a1);
      for (size_t j = 0; j < ow; j++) {
        bin(j, w, ow, &b0, &b1);
        float sum = 0.0f;
        for (size_t a = a0; a < a1; a++)
#pragma omp simd reduction(+ : sum)
          for (size_t b = b0; b < b1; b++) sum += xp[a * w + b];
        y[(pl * oh + i) * ow + j] = sum / (float)((a1 - a0) * (b1 - b0));
      }
    }
  }
}

void peer_adaptive_avgpool2d_bwd(const float *restrict dy, float *restrict dx,
                                 size_t planes, size_t h, size_t w, size_t oh,
                                 size_t ow) {
#pragma omp parallel for schedule(static)
  for (size_t pl = 0; pl < planes; pl++) {
    float *dp = dx + pl * h * w;
    memset(dp, 0, h * w * sizeof *dp);
    for (size_t i = 0; i < oh; i++) {
      size_t a0, a1, b0, b1;
      bin(i, h, oh, &a0, &a1);
      for (size_t j = 0; j < ow; j++) {
        bin(j, w, ow, &b0, &b1);
        const float g =
            dy[(pl * oh + i) * ow + j] / (float)((a1 - a0) * (b1 - b0));
        for (size_t a = a0; a < a1; a++)
          for (size_t b = b0; b < b1; b++) dp[a * w + b] += g;
      }
    }
  }
}

/* ---- Batch norm and channel bias ----------------------------------------- */

/* sum over the n segments of channel ch of f(v) */
static float chan_sum(const float *restrict x, size_t n, size_t c, size_t hw,
                      size_t ch, float shift, int square) {
  float s = 0.0f;
  for (size_t i = 0; i < n; i++) {
    const float *xr = x + (i * c + ch) * hw;
    if (square) {
#pragma omp simd reduction(+ : s)
      for (size_t j = 0; j < hw; j++) s += (xr[j] - shift) * (xr[j] - shift);
    } else {
#pragma omp simd reduction(+ : s)
      for (size_t j = 0; j < hw; j++) s += xr[j];
    }
  }
  return s;
}

void peer_batchnorm2d_fwd(const float *restrict x, const float *gamma,
                          const float *beta, float *rmean, float *rvar,
                          float *restrict y, float *smean, float *sinvstd,
                          size_t n, size_t c, size_t hw, float eps,
                          float momentum) {
  const float m = (float)(n * hw);
#pragma omp parallel for schedule(static)
  for (size_t ch = 0; ch < c; ch++) {
    const float mean = chan_sum(x, n, c, hw, ch, 0.0f, 0) / m;
    const float var = chan_sum(x, n, c, hw, ch, mean, 1) / m;
    const float inv = 1.0f / sqrtf(var + eps);
    const float a = inv * gamma[ch], b = beta[ch];
    for (size_t i = 0; i < n; i++) {
      const float *xr = x + (i * c + ch) * hw;
      float *yr = y + (i * c + ch) * hw;
#pragma omp simd
      for (size_t j = 0; j < hw; j++) yr[j] = (xr[j] - mean) * a + b;
    }
    smean[ch] = mean;
    sinvstd[ch] = inv;
    rmean[ch] = (1.0f - momentum) * rmean[ch] + momentum * mean;
    rvar[ch] = (1.0f - momentum) * rvar[ch] + momentum * var * m / (m - 1.0f);
  }
}

void peer_batchnorm2d_bwd(const float *restrict dy, const float *restrict x,
                          const float *gamma, const float *smean,
                          const float *sinvstd, float *restrict dx,
                          float *dgamma, float *dbeta, size_t n, size_t c,
                          size_t hw) {
  const float m = (float)(n * hw);
#pragma omp parallel for schedule(static)
  for (size_t ch = 0; ch < c; ch++) {
    const float mean = smean[ch], inv = sinvstd[ch];
    float db = 0.0f, dg = 0.0f;
    for (size_t i = 0; i < n; i++) {
      const float *xr = x + (i * c + ch) * hw, *gr = dy + (i * c + ch) * hw;
#pragma omp simd reduction(+ : db, dg)
      for (size_t j = 0; j < hw; j++) {
        db += gr[j];
        dg += gr[j] * (xr[j] - mean) * inv;
      }
    }
    const float a = gamma[ch] * inv, mb = db / m, mg = dg / m;
    for (size_t i = 0; i < n; i++) {
      const float *xr = x + (i * c + ch) * hw, *gr = dy + (i * c + ch) * hw;
      float *dr = dx + (i * c + ch) * hw;
#pragma omp simd
      for (size_t j = 0; j < hw; j++)
        dr[j] = a * (gr[j] - mb - (xr[j] - mean) * inv * mg);
    }
    dgamma[ch] = dg;
    dbeta[ch] = db;
  }
}

void peer_channel_bias_add(const float *restrict x, const float *restrict b,
                           float *restrict y, size_t n, size_t c, size_t hw) {
#pragma omp parallel for schedule(static)
  for (size_t r = 0; r < n * c; r++) {
    const float *xr = x + r * hw;
    float *yr = y + r * hw;
    const float v = b[r % c];
#pragma omp simd
    for (size_t j = 0; j < hw; j++) yr[j] = xr[j] + v;
  }
}

void peer_channel_bias_grad(const float *restrict dy, float *restrict db,
                            size_t n, size_t c, size_t hw) {
#pragma omp parallel for schedule(static)
  for (size_t ch = 0; ch < c; ch++) db[ch] = chan_sum(dy, n, c, hw, ch, 0.0f, 0);
}

/* ---- Dropout ------------------------------------------------------------- */

/* Philox4x32-10 (Salmon et al., SC 2011): 10 rounds of two 32 x 32 ->
 * 64-bit products, the key bumped by the Weyl constants between rounds. */
static void philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    if (r) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
    const uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n1 = (uint32_t)p1;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1, n3 = (uint32_t)p0;
    c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
  }
}

void peer_dropout(const float *restrict x, float *restrict y, size_t n,
                  float p, uint64_t seed, uint64_t offset) {
  const uint32_t thresh = (uint32_t)ceil((double)p * 16777216.0);
  const float scale = (float)(1.0 / (1.0 - (double)p));
  const size_t groups = (n + 3) / 4;
#pragma omp parallel for schedule(static)
  for (size_t q = 0; q < groups; q++) {
    uint32_t r[4] = {(uint32_t)q, (uint32_t)((uint64_t)q >> 32),
                     (uint32_t)offset, (uint32_t)(offset >> 32)};
    philox4x32_10(r, (uint32_t)seed, (uint32_t)(seed >> 32));
    for (size_t j = 0; j < 4 && 4 * q + j < n; j++)
      y[4 * q + j] = (r[j] >> 8) >= thresh ? x[4 * q + j] * scale : 0.0f;
  }
}

/* ---- Attention ------------------------------------------------------------ */

/* Scores of query row qi against keys 0 .. n of one head into s, scaled;
 * returns their max. */
static float att_scores(const float *restrict qi, const float *restrict k,
                        size_t n, size_t d, float scale, float *restrict s) {
  float m = -INFINITY;
  for (size_t j = 0; j < n; j++) {
    const float *kj = k + j * d;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (size_t e = 0; e < d; e++) dot += qi[e] * kj[e];
    s[j] = dot * scale;
    m = s[j] > m ? s[j] : m;
  }
  return m;
}

void peer_attention_fwd(const float *q, const float *k, const float *v,
                        float *out, float *lse, size_t bh, size_t tq,
                        size_t tk, size_t d, float scale, int causal) {
#pragma omp parallel
  {
    float *s = malloc((tk + 1) * sizeof *s);
#pragma omp for schedule(dynamic, 16)
    for (size_t r = 0; r < bh * tq; r++) {
      const size_t h = r / tq, i = r % tq, n = causal && i + 1 < tk ? i + 1 : tk;
      const float *kh = k + h * tk * d, *vh = v + h * tk * d;
      float *o = out + r * d;
      const float m = att_scores(q + r * d, kh, n, d, scale, s);
      float l = 0.0f;
      for (size_t j = 0; j < n; j++) l += s[j] = expf(s[j] - m);
      for (size_t e = 0; e < d; e++) o[e] = 0.0f;
      for (size_t j = 0; j < n; j++) {
        const float p = s[j] / l, *vj = vh + j * d;
#pragma omp simd
        for (size_t e = 0; e < d; e++) o[e] += p * vj[e];
      }
      if (lse) lse[r] = m + logf(l);
    }
    free(s);
  }
}

/* One head: P recomputed from lse, dk and dv accumulated over the query
 * rows in order. */
static void att_bwd_head(const float *q, const float *k, const float *v,
                         const float *out, const float *lse,
                         const float *dout, float *dq, float *dk, float *dv,
                         size_t tq, size_t tk, size_t d, float scale,
                         int causal, float *s) {
  memset(dk, 0, tk * d * sizeof *dk);
  memset(dv, 0, tk * d * sizeof *dv);
  for (size_t i = 0; i < tq; i++) {
    const size_t n = causal && i + 1 < tk ? i + 1 : tk;
    const float *qi = q + i * d, *gi = dout + i * d, *oi = out + i * d;
    float *dqi = dq + i * d;
    att_scores(qi, k, n, d, scale, s);
    float delta = 0.0f;
    for (size_t e = 0; e < d; e++) delta += gi[e] * oi[e], dqi[e] = 0.0f;
    for (size_t j = 0; j < n; j++) {
      const float *kj = k + j * d, *vj = v + j * d;
      const float p = expf(s[j] - lse[i]);
      float dp = 0.0f;
#pragma omp simd reduction(+ : dp)
      for (size_t e = 0; e < d; e++) dp += gi[e] * vj[e];
      const float ds = p * (dp - delta) * scale;
      float *dkj = dk + j * d, *dvj = dv + j * d;
#pragma omp simd
      for (size_t e = 0; e < d; e++) {
        dqi[e] += ds * kj[e];
        dkj[e] += ds * qi[e];
        dvj[e] += p * gi[e];
      }
    }
  }
}

void peer_attention_bwd(const float *q, const float *k, const float *v,
                        const float *out, const float *lse, const float *dout,
                        float *dq, float *dk, float *dv, size_t bh, size_t tq,
                        size_t tk, size_t d, float scale, int causal) {
#pragma omp parallel
  {
    float *s = malloc((tk + 1) * sizeof *s);
#pragma omp for schedule(static)
    for (size_t h = 0; h < bh; h++) {
      const size_t qo = h * tq * d, ko = h * tk * d;
      att_bwd_head(q + qo, k + ko, v + ko, out + qo, lse + h * tq, dout + qo,
                   dq + qo, dk + ko, dv + ko, tq, tk, d, scale, causal, s);
    }
    free(s);
  }
}
