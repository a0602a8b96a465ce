/*
 * peer.h - the host peers of rumus-bench: plain float32 C loops over the
 * CPU's cores (OpenMP), a STREAM-style copy, and OpenBLAS sgemm when the
 * build found it.  peer.c is compiled on its own with -O3 -march=native
 * (Makefile.am, rumus_bench_march); nothing else in rumus is.
 *
 * Every tensor is row-major float32; the math is the one of the rumus op of
 * the same name (include/rumus.h), written the straightforward way: one
 * loop nest per op, rows or elements split statically over the threads,
 * inner loops left to the compiler's vectoriser.
 */
#ifndef RUMUS_BENCH_PEER_H
#define RUMUS_BENCH_PEER_H

#include <stddef.h>
#include <stdint.h>

/* Threads the OpenMP loops use (omp_get_max_threads(), 1 without OpenMP). */
int peer_threads(void);
/* "OpenBLAS 0.3.21 ..." when sgemm is available, else NULL. */
const char *peer_blas_name(void);

/* dst = src, n floats (STREAM "copy": counts 2 * 4 * n bytes). */
void peer_copy(float *dst, const float *src, size_t n);

void peer_softmax_fwd(const float *x, float *y, size_t rows, size_t cols);
void peer_log_softmax_fwd(const float *x, float *y, size_t rows, size_t cols);
void peer_softmax_bwd(const float *y, const float *dy, float *dx, size_t rows,
                      size_t cols);
void peer_log_softmax_bwd(const float *y, const float *dy, float *dx,
                          size_t rows, size_t cols);
/* Mean cross-entropy over rows whose target is not -100, and its gradient
 * scaled by 1 / (count of those rows). */
void peer_xent(const float *x, const int32_t *target, float *loss, float *grad,
               size_t rows, size_t cols);

/* C = op(A) op(B) (alpha 1, beta 0), row-major; returns 0 if no BLAS. */
int peer_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k,
               const float *a, const float *b, float *c);

void peer_bias_add(float *y, const float *bias, size_t rows, size_t cols);
void peer_bias_grad(const float *dy, float *dbias, size_t rows, size_t cols);
void peer_add(const float *a, const float *b, float *out, size_t n);
void peer_mul(const float *a, const float *b, float *out, size_t n);
void peer_axpy(float alpha, const float *x, float *y, size_t n);
void peer_relu_fwd(const float *x, float *y, size_t n);
void peer_relu_bwd(const float *x, const float *dy, float *dx, size_t n);
/* GELU with erf (PyTorch's default). */
void peer_gelu_fwd(const float *x, float *y, size_t n);
void peer_gelu_bwd(const float *x, const float *dy, float *dx, size_t n);

/* torch.optim.SGD (dampening 0, no Nesterov); step counts from 1. */
void peer_sgd(float *param, const float *grad, float *mom, size_t n, float lr,
              float momentum, float weight_decay, long step);
/* torch.optim.AdamW; step counts from 1. */
void peer_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                float lr, float beta1, float beta2, float eps,
                float weight_decay, long step);
/* Sum of x[i]^2 (double accumulators, per thread and per vector lane). */
float peer_sum_squares(const float *x, size_t n);

/* C[m, n] = sum_k A[m, k] q[n, k] s[n, k / bs], A [M, K], q int8 [N, K],
 * s F16 bits [N, ceil(K / bs)]: rumus_matmul_q8 on the host (rows of q
 * split over the threads, each dequantized once into a float row, then
 * dotted with every row of A). */
void peer_matmul_q8(const float *a, const int8_t *q, const uint16_t *s,
                    float *c, size_t m, size_t n, size_t k, size_t bs);

/* ---- CNN ops (NCHW, see include/rumus.h) ---------------------------------
 * Images are [N, C, H, W] row-major.  Convolutions are square: kernel k,
 * stride s, zero padding p on every side, groups g; oh = (h + 2p - k) / s
 * + 1 and ow likewise. */
typedef struct {
  size_t n, c, oc, h, w, k, s, p, g, oh, ow;
} peer_conv;

/* y = conv2d(x, w) + bias (bias may be NULL) by im2col and OpenBLAS sgemm:
 * for each image and group, the columns of x (cg k k rows of oh ow) are
 * gathered into a scratch buffer (by the calling thread: OpenBLAS's own
 * threads spin between calls), then one sgemm (OpenBLAS's threads)
 * multiplies w's rows of the group by them; returns 0 without BLAS or
 * scratch memory.  The backward ops use the same columns: the weight
 * gradient accumulates dy col^T image by image (beta 1), the input
 * gradient forms w^T dy and scatters the columns back (col2im). */
int peer_conv2d_fwd(const peer_conv *q, const float *x, const float *w,
                    const float *bias, float *y);
int peer_conv2d_bwd_data(const peer_conv *q, const float *dy, const float *w,
                         float *dx);
int peer_conv2d_bwd_weight(const peer_conv *q, const float *x,
                           const float *dy, float *dw);

/* Pooling on planes = N C planes of h x w, square windows k, stride s,
 * padding p (floor mode, dilation 1); PyTorch's rules as rumus.h states
 * them.  Max pooling: ties keep the first element in window order, the
 * index is h * w + w within the plane (int32).  Avg pooling counts the
 * padding in the divisor (count_include_pad).  The backward ops scatter
 * each output's gradient in output order (a plane per thread). */
void peer_maxpool2d_fwd(const float *x, float *y, int32_t *idx, size_t planes,
                        size_t h, size_t w, size_t k, size_t s, size_t p);
void peer_maxpool2d_bwd(const float *dy, const int32_t *idx, float *dx,
                        size_t planes, size_t h, size_t w, size_t oh,
                        size_t ow);
void peer_avgpool2d_fwd(const float *x, float *y, size_t planes, size_t h,
                        size_t w, size_t k, size_t s, size_t p);
void peer_avgpool2d_bwd(const float *dy, float *dx, size_t planes, size_t h,
                        size_t w, size_t k, size_t s, size_t p);
/* Adaptive average pooling to oh x ow (bins floor(i h / oh) to
 * ceil((i + 1) h / oh)). */
void peer_adaptive_avgpool2d_fwd(const float *x, float *y, size_t planes,
                                 size_t h, size_t w, size_t oh, size_t ow);
void peer_adaptive_avgpool2d_bwd(const float *dy, float *dx, size_t planes,
                                 size_t h, size_t w, size_t oh, size_t ow);

/* Batch norm in training mode over x [n, c, hw] (channels over the
 * threads, two passes for the statistics, float accumulators per vector
 * lane): y, the saved mean and 1 / sqrt(var + eps), and the running
 * statistics updated with momentum (unbiased variance). */
void peer_batchnorm2d_fwd(const float *x, const float *gamma,
                          const float *beta, float *rmean, float *rvar,
                          float *y, float *smean, float *sinvstd, size_t n,
                          size_t c, size_t hw, float eps, float momentum);
void peer_batchnorm2d_bwd(const float *dy, const float *x, const float *gamma,
                          const float *smean, const float *sinvstd, float *dx,
                          float *dgamma, float *dbeta, size_t n, size_t c,
                          size_t hw);
/* y = x + b[channel]; db[channel] = the sum of dy over n and hw. */
void peer_channel_bias_add(const float *x, const float *b, float *y, size_t n,
                           size_t c, size_t hw);
void peer_channel_bias_grad(const float *dy, float *db, size_t n, size_t c,
                            size_t hw);
/* Dropout with rumus's mask (Philox4x32-10 of (element / 4, offset) under
 * seed, rumus.h states it): y = kept ? x * scale : 0. */
void peer_dropout(const float *x, float *y, size_t n, float p, uint64_t seed,
                  uint64_t offset);

/* Scaled dot-product attention over bh heads of q [tq, d], k and v [tk, d]
 * (causal: query i sees keys 0 .. i), scores times scale: out and lse
 * (NULL: not written), OpenMP over the query rows; the backward dq, dk, dv
 * from the forward's out and lse and dout, OpenMP over the heads. */
void peer_attention_fwd(const float *q, const float *k, const float *v,
                        float *out, float *lse, size_t bh, size_t tq,
                        size_t tk, size_t d, float scale, int causal);
void peer_attention_bwd(const float *q, const float *k, const float *v,
                        const float *out, const float *lse, const float *dout,
                        float *dq, float *dk, float *dv, size_t bh, size_t tq,
                        size_t tk, size_t d, float scale, int causal);

#endif /* RUMUS_BENCH_PEER_H */
