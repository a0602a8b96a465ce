/*
 * ref.h - plain-C float64 reference versions of the rumus ops, used by the
 * tests and by rumus-info's self-check (BLIS's ref_kernels: the arithmetic
 * without any OpenCL).  Inputs are the float data the device sees; results
 * are double.  Row-major throughout.
 */
#ifndef RUMUS_REF_H
#define RUMUS_REF_H

#include <stddef.h>
#include <stdint.h>

/* Softmax family over rows x cols (see rumus.h for the formulas). */
void ref_softmax_fwd(const float *x, size_t rows, size_t cols, int log_mode,
                     double *y);
void ref_softmax_bwd(const float *y, const float *dy, size_t rows, size_t cols,
                     int log_mode, double *dx);

/* Cross-entropy: per-row losses (NaN for an out-of-range target) into
 * row_loss, the reduced loss into *loss (MEAN: 0, SUM: 1, NONE: 2 leaves
 * *loss untouched), and the gradient into grad if not NULL. */
void ref_cross_entropy(const float *logits, const int32_t *targets,
                       size_t rows, size_t cols, int reduction,
                       int32_t ignore_index, double smoothing,
                       double grad_scale, double *row_loss, double *loss,
                       double *grad);

/* C = alpha op(A) op(B) + beta C for one matrix (lda/ldb/ldc row pitches);
 * beta == 0 ignores C's old values. */
void ref_gemm(int ta, int tb, size_t m, size_t n, size_t k, double alpha,
              const float *A, size_t lda, const float *B, size_t ldb,
              double beta, const float *C_in, size_t ldc, double *C);

/* Activation forward / derivative at x (act: rumus_activation values). */
double ref_activation(int act, double param, double x);
double ref_activation_grad(int act, double param, double x);

/* Bias gradient: db[j] = sum over rows of dy[r, j]. */
void ref_bias_grad(const float *dy, size_t rows, size_t cols, double *db);

/* One optimizer step in double, in place on param and the state buffers,
 * with PyTorch's update rules (step counts from 1). */
void ref_sgd_step(double lr, double momentum, double dampening,
                  double weight_decay, int nesterov, long step, size_t n,
                  double *param, const double *grad, double *momentum_buf);
void ref_adam_step(double lr, double beta1, double beta2, double eps,
                   double weight_decay, int decoupled, long step, size_t n,
                   double *param, const double *grad, double *m, double *v);

/* Q8 block quantization (rumus.h, "Quantization") of rows of k floats in
 * blocks of bs: the F16 bits of a block's scale (0x7E00, NaN, for a block
 * with NaN or an infinity), one value rounded, and whole tensors (q:
 * rows x k, scales: rows x ceil(k / bs) F16 bits). */
uint16_t ref_q8_scale(const float *x, size_t n);
int8_t ref_q8_round(float x, double scale);
void ref_quantize_q8(const float *x, size_t rows, size_t k, size_t bs,
                     int8_t *q, uint16_t *scales);
/* The value of F16 bits. */
double ref_f16_value(uint16_t h);
/* y = q * scale per element (rows x k). */
void ref_dequantize_q8(const int8_t *q, const uint16_t *scales, size_t rows,
                       size_t k, size_t bs, double *y);
/* C[i, j] = sum_p A[i, p] B[j, p] with B = dequant(q, scales) of n rows of
 * k (A: m x k, C: m x n), and, if abs_sum is not NULL, the sums of
 * |A[i, p] B[j, p]| (for error bounds). */
void ref_matmul_q8(const float *A, size_t m, size_t k, const int8_t *q,
                   const uint16_t *scales, size_t n, size_t bs, double *C,
                   double *abs_sum);

/* 2-D convolution in NCHW (rumus.h, "Convolution"): x [n, c, h, w], w [oc,
 * c / g, kh, kw], y [n, oc, oh, ow] with oh, ow from ref_conv_out; direct
 * loops in double. */
typedef struct {
  size_t n, c, h, w, oc, kh, kw;
  int sh, sw, ph, pw, dh, dw, g;
} ref_conv_geo;
/* The output extent of an axis: (in + 2 pad - dil (k - 1) - 1) / stride + 1
 * (0 when the dilated kernel is larger than the padded input). */
size_t ref_conv_out(size_t in, size_t k, int pad, int stride, int dil);
/* y = conv(x, w) + bias (bias NULL: none). */
void ref_conv2d_fwd(const ref_conv_geo *g, const float *x, const float *w,
                    const float *bias, double *y);
/* dx = the input gradient for dy; dw = the weight gradient. */
void ref_conv2d_bwd_data(const ref_conv_geo *g, const float *dy,
                         const float *w, double *dx);
void ref_conv2d_bwd_weight(const ref_conv_geo *g, const float *x,
                           const float *dy, double *dw);

#endif /* RUMUS_REF_H */
