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

/* Dropout (rumus.h, "Dropout"): one Philox4x32-10 call (Random123's
 * philox4x32_R with R = 10) of a 4-word counter and a 2-word key; the
 * 32-bit word that element i of a tensor draws under (seed, offset); 1 if
 * the element is kept at rate p (u = (bits >> 8) 2^-24 >= p); and y =
 * keep ? x / (1 - p) : 0 over n elements (p = 0: y = x). */
void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                       uint32_t out[4]);
uint32_t ref_dropout_bits(uint64_t seed, uint64_t offset, uint64_t i);
int ref_dropout_keep(float p, uint64_t seed, uint64_t offset, uint64_t i);
void ref_dropout(const float *x, size_t n, float p, uint64_t seed,
                 uint64_t offset, double *y);
/* 2-D pooling over planes x H x W (NCHW with planes = N * C), PyTorch's
 * rules (rumus.h, "Pooling").  Window parameters per axis; divisor 0 means
 * none.  ref_pool2d_out gives an output extent (< 1: no window fits). */
typedef struct {
  long kh, kw, sh, sw, ph, pw, dh, dw;
  int ceil_mode, count_include_pad, divisor;
} ref_pool2d;
long ref_pool2d_out(long in, long k, long s, long p, long d, int ceil_mode);
/* Max pooling: values and int32 indices (h * W + w; -1 for an empty
 * window); the backward scatters dy to the indices named (ignoring any
 * outside the plane). */
void ref_maxpool2d_fwd(const float *x, size_t planes, long H, long W,
                       const ref_pool2d *p, long OH, long OW, double *y,
                       int32_t *idx);
void ref_maxpool2d_bwd(const float *dy, const int32_t *idx, size_t planes,
                       long H, long W, long OH, long OW, double *dx);
/* Average pooling, forward and backward (a scatter). */
void ref_avgpool2d_fwd(const float *x, size_t planes, long H, long W,
                       const ref_pool2d *p, long OH, long OW, double *y);
void ref_avgpool2d_bwd(const float *dy, size_t planes, long H, long W,
                       const ref_pool2d *p, long OH, long OW, double *dx);
/* Adaptive average pooling into OH x OW bins, forward and backward (a
 * scatter). */
void ref_adaptive_avgpool2d_fwd(const float *x, size_t planes, long H,
                                long W, long OH, long OW, double *y);
void ref_adaptive_avgpool2d_bwd(const float *dy, size_t planes, long H,
                                long W, long OH, long OW, double *dx);
/* Channel bias and batch norm 2d over NCHW tensors [N, C, S] (S = H * W):
 * y = x + b[c]; db[c] = sum of dy over n, s; the batch statistics (mean
 * and biased variance per channel); y = (x - mean) / sqrt(var + eps) *
 * gamma + beta (gamma, beta NULL: 1, 0), for training (the batch's
 * statistics) and evaluation (the running ones); the training backward
 * from the saved mean and invstd (dx: N C S values; dgamma, dbeta: C). */
void ref_channel_bias_add(const float *x, const float *b, size_t N, size_t C,
                          size_t S, double *y);
void ref_channel_bias_grad(const float *dy, size_t N, size_t C, size_t S,
                           double *db);
void ref_batchnorm2d_stats(const float *x, size_t N, size_t C, size_t S,
                           double *mean, double *var);
void ref_batchnorm2d_apply(const float *x, size_t N, size_t C, size_t S,
                           const double *mean, const double *var, double eps,
                           const float *gamma, const float *beta, double *y);
void ref_batchnorm2d_bwd(const float *dy, const float *x, size_t N, size_t C,
                         size_t S, const float *gamma, const double *mean,
                         const double *invstd, double *dx, double *dgamma,
                         double *dbeta);
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

/* Embedding (rumus.h): out [n, dim] = rows ids[p] of weight [rows, dim]
 * (0 for an id outside [0, rows)); dweight [rows, dim] = the sums of dout's
 * rows by id, positions ascending, skipping padding_idx (-1: none) and
 * bad ids; abs_sum (if not NULL) gets the sums of |dout|, and count (if
 * not NULL, rows entries) how many positions each row sums. */
void ref_embedding_fwd(const float *weight, size_t rows, size_t dim,
                       const int32_t *ids, size_t n, double *out);
void ref_embedding_bwd(const float *dout, const int32_t *ids, size_t n,
                       size_t rows, size_t dim, int32_t padding_idx,
                       double *dweight, double *abs_sum, size_t *count);
/* Layer norm (rms 0) or RMS norm (rms 1) over rows x cols: y, and the row
 * statistics (mean 0 for RMS; rstd = rrms) where mean / rstd are not NULL;
 * gamma / beta NULL: 1 / 0 (beta unused for RMS). */
void ref_layernorm_fwd(const float *x, const float *gamma, const float *beta,
                       size_t rows, size_t cols, double eps, int rms,
                       double *y, double *mean, double *rstd);
/* Their backward from x (statistics recomputed in double): dx, and dgamma,
 * dbeta (each skipped when NULL; dbeta unused for RMS). */
void ref_layernorm_bwd(const float *dy, const float *x, const float *gamma,
                       size_t rows, size_t cols, double eps, int rms,
                       double *dx, double *dgamma, double *dbeta);
/* Permute (y's axis d is x's axis perm[d]; y contiguous), broadcast add
 * (mul = 0) or mul (1) with PyTorch's rules (out's shape so given), and
 * the sum over the axes of the bit mask into y of x's shape with those
 * extents 1 (keepdim's layout; the same order without keepdim). */
void ref_permute(const float *x, int nd, const size_t *shape,
                 const int *perm, double *y);
void ref_broadcast(int mul, const float *a, int nda, const size_t *sa,
                   const float *b, int ndb, const size_t *sb, int ndo,
                   const size_t *so, double *out);
void ref_reduce_sum(const float *x, int nd, const size_t *shape,
                    unsigned axes, double *y);

/* Scaled dot-product attention over q [B, H, Tq, D], k and v [B, H, Tk,
 * D] (rumus.h's formulas; scale is the one used, not 0 for the default).
 * mask NULL or read at b ms[0] + h ms[1] + i ms[2] + j ms[3] (0: that
 * axis is broadcast), which ref_attention_mask_strides() gives for a
 * contiguous mask of ndim 2 to 4 dims. */
typedef struct {
  size_t B, H, Tq, Tk, D;
  double scale;
  int causal;
  const float *mask;
  size_t ms[4];
} ref_attention_shape;
void ref_attention_mask_strides(int ndim, const size_t *shape, size_t ms[4]);
/* out [B, H, Tq, D] and lse [B, H, Tq] (NULL: not written); a row of -inf
 * scores gives out 0 and lse -inf. */
void ref_attention_fwd(const ref_attention_shape *a, const float *q,
                       const float *k, const float *v, double *out,
                       double *lse);
/* dq, dk, dv from dout (the forward recomputed in double). */
void ref_attention_bwd(const ref_attention_shape *a, const float *q,
                       const float *k, const float *v, const float *dout,
                       double *dq, double *dk, double *dv);

#endif /* RUMUS_REF_H */
