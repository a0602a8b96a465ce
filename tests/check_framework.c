/*
 * check_framework.c - what the framework promises every op family:
 *   core    16-bit conversions round to nearest even (every pattern
 *           round-trips; random floats go to the nearest value, ties to
 *           even), fills and float transfers of F16 / BF16 tensors;
 *           rumus_cache_fill builds every program the ops choose (no op
 *           builds one afterwards, on either variant, for aligned and
 *           unaligned tensors, every row plan and every GEMM tile size,
 *           the pooling ops, the embedding ops, attention at D = 32
 *           and 64);
 *           buffers wrapped with CL_MEM_USE_HOST_PTR at an address that is
 *           only float-aligned give the reference's results;
 *   errors  tensors that partly share memory are RUMUS_EINVAL for every
 *           op (exact aliasing only where the op documents in-place use);
 *           infinite optimizer hyper-parameters are RUMUS_EINVAL;
 *   limits  Adam's second moment stays finite where g^2 overflows float
 *           but (1 - beta2) g^2 does not (tolerance: 1e-6 relative).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tu_dtype.h"

/* ---- core: a filled cache builds nothing more ----------------------------- */

/* Frees the tensors of a NULL-terminated list. */
static void free_tensors(rumus_tensor *first, ...) {
  va_list ap;
  va_start(ap, first);
  for (rumus_tensor *t = first; t; t = va_arg(ap, rumus_tensor *))
    rumus_tensor_free(t);
  va_end(ap);
}

/* A rows x cols tensor of uniform values in [-2, 2). */
static rumus_tensor *rand_2d(rumus_ctx *ctx, tu_rng *r, size_t rows,
                             size_t cols) {
  float *x = malloc(rows * cols * sizeof *x + 1);
  ck_assert_ptr_nonnull(x);
  tu_fill_uniform(r, x, rows * cols, -2.0f, 2.0f);
  rumus_tensor *t = tu_tensor_2d(ctx, rows, cols, x);
  free(x);
  return t;
}

/* Softmax, log-softmax and their backwards on rows x cols. */
static void run_softmax_ops(rumus_ctx *ctx, tu_rng *r, size_t rows,
                            size_t cols) {
  rumus_tensor *x = rand_2d(ctx, r, rows, cols);
  rumus_tensor *y = rand_2d(ctx, r, rows, cols);
  rumus_tensor *dx = rand_2d(ctx, r, rows, cols);
  TU_OK(ctx, rumus_softmax_fwd(ctx, x, y));
  TU_OK(ctx, rumus_log_softmax_fwd(ctx, x, y));
  TU_OK(ctx, rumus_softmax_bwd(ctx, y, x, dx));
  TU_OK(ctx, rumus_log_softmax_bwd(ctx, y, x, dx));
  free_tensors(x, y, dx, NULL);
}

/* Cross-entropy in every mode the kernels distinguish on rows x cols. */
static void run_xent_ops(rumus_ctx *ctx, tu_rng *r, size_t rows,
                         size_t cols) {
  rumus_tensor *x = rand_2d(ctx, r, rows, cols);
  rumus_tensor *g = rand_2d(ctx, r, rows, cols);
  int32_t *t = malloc(rows * sizeof *t);
  ck_assert_ptr_nonnull(t);
  for (size_t i = 0; i < rows; i++) t[i] = (int32_t)(tu_rand_u32(r) % cols);
  const size_t tshape[1] = {rows};
  rumus_tensor *tt = tu_tensor(ctx, RUMUS_I32, 1, tshape, t);
  rumus_tensor *loss = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  rumus_tensor *rows_loss = tu_tensor(ctx, RUMUS_F32, 1, tshape, NULL);
  rumus_xent_params p = RUMUS_XENT_DEFAULTS;
  for (int mode = 0; mode < 4; mode++) {
    p.reduction = mode == 3 ? RUMUS_REDUCTION_NONE
                            : (rumus_reduction)(mode % 2);
    p.label_smoothing = mode == 2 ? 0.1f : 0.0f;
    rumus_tensor *l = mode == 3 ? rows_loss : loss;
    TU_OK(ctx, rumus_cross_entropy(ctx, x, tt, l, g, &p));
    TU_OK(ctx, rumus_cross_entropy(ctx, x, tt, l, NULL, &p));
  }
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free(t);
  free_tensors(x, g, tt, loss, rows_loss, NULL);
}

/* Every element-wise op, activation and the bias ops on rows x cols. */
static void run_elementwise_ops(rumus_ctx *ctx, tu_rng *r, size_t rows,
                                size_t cols) {
  rumus_tensor *a = rand_2d(ctx, r, rows, cols);
  rumus_tensor *b = rand_2d(ctx, r, rows, cols);
  rumus_tensor *o = rand_2d(ctx, r, rows, cols);
  rumus_tensor *bias = rand_2d(ctx, r, 1, cols);
  const size_t bshape[1] = {cols};
  TU_OK(ctx, rumus_tensor_reshape(bias, 1, bshape));
  TU_OK(ctx, rumus_add(ctx, a, b, o));
  TU_OK(ctx, rumus_sub(ctx, a, b, o));
  TU_OK(ctx, rumus_mul(ctx, a, b, o));
  TU_OK(ctx, rumus_scale(ctx, 0.5f, a, o));
  TU_OK(ctx, rumus_axpy(ctx, 0.5f, a, o));
  for (int act = RUMUS_ACT_RELU; act <= RUMUS_ACT_GELU_ERF; act++) {
    TU_OK(ctx, rumus_activation_fwd(ctx, (rumus_activation)act, 0.1f, a, o));
    TU_OK(ctx,
          rumus_activation_bwd(ctx, (rumus_activation)act, 0.1f, a, b, o));
  }
  TU_OK(ctx, rumus_bias_add(ctx, o, bias));
  TU_OK(ctx, rumus_bias_grad(ctx, o, bias));
  free_tensors(a, b, o, bias, NULL);
}

/* GEMM with the four transposes on m x n x k (square operands, so every
 * transpose has the same shapes). */
static void run_gemm_ops(rumus_ctx *ctx, tu_rng *r, size_t m, size_t n,
                         size_t k) {
  rumus_tensor *A = rand_2d(ctx, r, m, k), *At = rand_2d(ctx, r, k, m);
  rumus_tensor *B = rand_2d(ctx, r, k, n), *Bt = rand_2d(ctx, r, n, k);
  rumus_tensor *C = rand_2d(ctx, r, m, n);
  for (int t = 0; t < 4; t++) {
    const int ta = t & 1, tb = t >> 1;
    TU_OK(ctx, rumus_gemm(ctx, (rumus_transpose)ta, (rumus_transpose)tb,
                          1.0f, ta ? At : A, tb ? Bt : B, 0.5f, C));
  }
  free_tensors(A, At, B, Bt, C, NULL);
}

static void run_optim_ops(rumus_ctx *ctx, tu_rng *r, size_t n) {
  rumus_tensor *p = rand_2d(ctx, r, 1, n), *g = rand_2d(ctx, r, 1, n);
  rumus_tensor *m = rand_2d(ctx, r, 1, n), *v = rand_2d(ctx, r, 1, n);
  rumus_tensor *acc = tu_tensor(ctx, RUMUS_F32, 0, NULL, NULL);
  TU_OK(ctx, rumus_tensor_fill(v, 0.0f));
  const rumus_sgd_params sp = {0.1f, 0.9f, 0.0f, 0.01f, 1};
  const rumus_adam_params ap = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
  TU_OK(ctx, rumus_sgd_step(ctx, &sp, 1, p, g, m));
  TU_OK(ctx, rumus_adam_step(ctx, &ap, 1, p, g, m, v));
  TU_OK(ctx, rumus_tensor_fill(acc, 0.0f));
  TU_OK(ctx, rumus_sum_squares(ctx, g, acc));
  rumus_tensor *gs[1] = {g};
  TU_OK(ctx, rumus_clip_grad_norm(ctx, gs, 1, 1.0f, acc));
  free_tensors(p, g, m, v, acc, NULL);
}

/* Dropout forward and backward on rows x cols, in place too, and into a
 * view one float into a buffer (the unaligned program of the GPU
 * variant). */
static void run_dropout_ops(rumus_ctx *ctx, tu_rng *r, size_t rows,
                            size_t cols) {
  rumus_tensor *x = rand_2d(ctx, r, rows, cols);
  rumus_tensor *y = rand_2d(ctx, r, rows, cols);
  TU_OK(ctx, rumus_dropout_fwd(ctx, 0.5f, 1, 0, x, y));
  TU_OK(ctx, rumus_dropout_bwd(ctx, 0.5f, 1, 0, y, x));
  TU_OK(ctx, rumus_dropout_fwd(ctx, 0.25f, 2, 3, y, y));
  cl_int e;
  cl_mem buf = clCreateBuffer(rumus_ctx_cl_context(ctx), CL_MEM_READ_WRITE,
                              (rows * cols + 1) * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  const size_t shape[2] = {rows, cols};
  rumus_tensor *v = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, shape, buf, sizeof(float),
                               &v));
  TU_OK(ctx, rumus_dropout_fwd(ctx, 0.5f, 1, 0, x, v));
  free_tensors(x, y, v, NULL);
  clReleaseMemObject(buf);
}

/* Every pooling op, forward and backward, on 2 x 3 x 7 x 5. */
static void run_pool_ops(rumus_ctx *ctx, tu_rng *r) {
  const size_t in[4] = {2, 3, 7, 5}, out[4] = {2, 3, 4, 3};
  rumus_tensor *x = rand_2d(ctx, r, 6, 35), *dx = rand_2d(ctx, r, 6, 35);
  rumus_tensor *y = rand_2d(ctx, r, 6, 12), *dy = rand_2d(ctx, r, 6, 12);
  rumus_tensor *idx = tu_tensor(ctx, RUMUS_I32, 4, out, NULL);
  TU_OK(ctx, rumus_tensor_reshape(x, 4, in));
  TU_OK(ctx, rumus_tensor_reshape(dx, 4, in));
  TU_OK(ctx, rumus_tensor_reshape(y, 4, out));
  TU_OK(ctx, rumus_tensor_reshape(dy, 4, out));
  const rumus_pool2d_params p = {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0};
  TU_OK(ctx, rumus_maxpool2d_fwd(ctx, &p, x, y, idx));
  TU_OK(ctx, rumus_maxpool2d_bwd(ctx, &p, dy, idx, dx));
  TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &p, x, y));
  TU_OK(ctx, rumus_avgpool2d_bwd(ctx, &p, dy, dx));
  TU_OK(ctx, rumus_adaptive_avgpool2d_fwd(ctx, x, y));
  TU_OK(ctx, rumus_adaptive_avgpool2d_bwd(ctx, dy, dx));
  free_tensors(x, dx, y, dy, idx, NULL);
}

/* The channel bias ops and batch norm (training, evaluation, backward) on
 * [n, c, h, w]. */
static void run_batchnorm_ops(rumus_ctx *ctx, tu_rng *r, size_t n, size_t c,
                              size_t h, size_t w) {
  rumus_tensor *x = rand_2d(ctx, r, n * c, h * w);
  rumus_tensor *y = rand_2d(ctx, r, n * c, h * w);
  rumus_tensor *dx = rand_2d(ctx, r, n * c, h * w);
  const size_t shape[4] = {n, c, h, w};
  TU_OK(ctx, rumus_tensor_reshape(x, 4, shape));
  TU_OK(ctx, rumus_tensor_reshape(y, 4, shape));
  TU_OK(ctx, rumus_tensor_reshape(dx, 4, shape));
  rumus_tensor *ch[6];
  const size_t cshape[1] = {c};
  for (int i = 0; i < 6; i++) {
    ch[i] = rand_2d(ctx, r, 1, c);
    TU_OK(ctx, rumus_tensor_reshape(ch[i], 1, cshape));
  }
  TU_OK(ctx, rumus_tensor_fill(ch[3], 1.0f)); /* running_var */
  TU_OK(ctx, rumus_channel_bias_add(ctx, x, ch[0], y));
  TU_OK(ctx, rumus_channel_bias_grad(ctx, y, ch[0]));
  TU_OK(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, x, ch[0], ch[1], ch[2],
                                         ch[3], y, ch[4], ch[5]));
  TU_OK(ctx, rumus_batchnorm2d_fwd_eval(ctx, NULL, x, ch[0], ch[1], ch[2],
                                        ch[3], y));
  TU_OK(ctx, rumus_batchnorm2d_bwd(ctx, y, x, ch[0], ch[4], ch[5], dx, ch[1],
                                   ch[2]));
  free_tensors(x, y, dx, ch[0], ch[1], ch[2], ch[3], ch[4], ch[5], NULL);
}

/* Layer norm and RMS norm, forward and backward (gamma, beta, the
 * statistics, dgamma, dbeta) on rows x cols. */
static void run_layernorm_ops(rumus_ctx *ctx, tu_rng *r, size_t rows,
                              size_t cols) {
  rumus_tensor *x = rand_2d(ctx, r, rows, cols), *y = rand_2d(ctx, r, rows, cols);
  rumus_tensor *dx = rand_2d(ctx, r, rows, cols);
  rumus_tensor *p[4], *st[2];
  const size_t cshape[1] = {cols}, rshape[1] = {rows};
  for (int i = 0; i < 4; i++) {
    p[i] = rand_2d(ctx, r, 1, cols);
    TU_OK(ctx, rumus_tensor_reshape(p[i], 1, cshape));
  }
  for (int i = 0; i < 2; i++) {
    st[i] = rand_2d(ctx, r, 1, rows);
    TU_OK(ctx, rumus_tensor_reshape(st[i], 1, rshape));
  }
  TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, x, p[0], p[1], y, st[0], st[1]));
  TU_OK(ctx, rumus_layernorm_bwd(ctx, y, x, p[0], st[0], st[1], dx, p[2],
                                 p[3]));
  TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, x, p[0], y, st[1]));
  TU_OK(ctx, rumus_rmsnorm_bwd(ctx, y, x, p[0], st[1], dx, p[2]));
  free_tensors(x, y, dx, p[0], p[1], p[2], p[3], st[0], st[1], NULL);
}

/* A tensor [a, b, c, d] of uniform values in [-2, 2). */
static rumus_tensor *rand_4d(rumus_ctx *ctx, tu_rng *r, size_t a, size_t b,
                             size_t c, size_t d) {
  rumus_tensor *t = rand_2d(ctx, r, a * b, c * d);
  const size_t shape[4] = {a, b, c, d};
  TU_OK(ctx, rumus_tensor_reshape(t, 4, shape));
  return t;
}

/* The three conv2d ops on N x C x H x W with OC outputs, a 3x3 kernel,
 * padding 1 and `groups`. */
static void run_conv_ops(rumus_ctx *ctx, tu_rng *r, size_t n, size_t c,
                         size_t hw, size_t oc, int groups) {
  rumus_conv2d_params p = RUMUS_CONV2D_DEFAULTS;
  p.pad_h = p.pad_w = 1;
  p.groups = groups;
  rumus_tensor *x = rand_4d(ctx, r, n, c, hw, hw),
               *w = rand_4d(ctx, r, oc, c / (size_t)groups, 3, 3),
               *b = rand_2d(ctx, r, 1, oc), *y = rand_4d(ctx, r, n, oc, hw, hw);
  const size_t bshape[1] = {oc};
  TU_OK(ctx, rumus_tensor_reshape(b, 1, bshape));
  TU_OK(ctx, rumus_conv2d_fwd(ctx, &p, x, w, b, y));
  TU_OK(ctx, rumus_conv2d_bwd_data(ctx, &p, y, w, x));
  TU_OK(ctx, rumus_conv2d_bwd_weight(ctx, &p, x, y, w));
  free_tensors(x, w, b, y, NULL);
}

/* The embedding ops on a 50 x dim table and n ids. */
static void run_embedding_ops(rumus_ctx *ctx, tu_rng *r, size_t n,
                              size_t dim) {
  rumus_tensor *w = rand_2d(ctx, r, 50, dim), *o = rand_2d(ctx, r, n, dim);
  int32_t *ids = tu_malloc(n * sizeof *ids);
  for (size_t i = 0; i < n; i++) ids[i] = (int32_t)(tu_rand_u32(r) % 50);
  const size_t is[1] = {n};
  rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 1, is, ids);
  TU_OK(ctx, rumus_embedding_fwd(ctx, w, ti, 3, o));
  TU_OK(ctx, rumus_embedding_bwd(ctx, o, ti, 3, w));
  free(ids);
  free_tensors(w, o, ti, NULL);
}

/* permute (rows, a transpose: tiles or gather), broadcast add / mul (rows
 * of 64 and of 7: aligned and not) and reduce_sum (every kernel of the
 * variant: short and long inner sums, kept last dimension). */
static void run_tensorops_ops(rumus_ctx *ctx, tu_rng *r) {
  rumus_tensor *x = rand_4d(ctx, r, 2, 3, 5, 64),
               *y = rand_4d(ctx, r, 2, 5, 3, 64);
  rumus_tensor *t = rand_2d(ctx, r, 64, 30), *b = rand_2d(ctx, r, 1, 64);
  rumus_tensor *o = rand_2d(ctx, r, 30, 64), *c = rand_2d(ctx, r, 30, 1);
  rumus_tensor *z = rand_2d(ctx, r, 30, 7), *s = rand_2d(ctx, r, 1, 1);
  const int split[4] = {0, 2, 1, 3}, tr[2] = {1, 0};
  TU_OK(ctx, rumus_permute(ctx, x, split, y));
  TU_OK(ctx, rumus_permute(ctx, o, tr, t));
  TU_OK(ctx, rumus_broadcast_add(ctx, o, b, o));
  TU_OK(ctx, rumus_broadcast_mul(ctx, c, z, z));
  TU_OK(ctx, rumus_reduce_sum(ctx, o, 1u, 1, b));
  TU_OK(ctx, rumus_reduce_sum(ctx, o, 2u, 1, c));
  TU_OK(ctx, rumus_tensor_reshape(s, 4, (const size_t[4]){1, 1, 1, 1}));
  TU_OK(ctx, rumus_reduce_sum(ctx, y, 15u, 1, s));
  free_tensors(x, y, t, b, o, c, z, s, NULL);
}

/* Attention forward and backward at the head dims rumus_cache_fill builds
 * (32 and 64 here), causal and not, without a mask and with an F32 one. */
static void run_attention_ops(rumus_ctx *ctx, tu_rng *r, size_t D) {
  rumus_tensor *q = rand_4d(ctx, r, 1, 2, 5, D), *k = rand_4d(ctx, r, 1, 2, 7, D),
               *v = rand_4d(ctx, r, 1, 2, 7, D), *o = rand_4d(ctx, r, 1, 2, 5, D),
               *dq = rand_4d(ctx, r, 1, 2, 5, D), *dk = rand_4d(ctx, r, 1, 2, 7, D),
               *dv = rand_4d(ctx, r, 1, 2, 7, D), *m = rand_2d(ctx, r, 5, 7);
  const size_t ls[3] = {1, 2, 5};
  rumus_tensor *lse = tu_tensor(ctx, RUMUS_F32, 3, ls, NULL);
  for (int causal = 0; causal < 2; causal++) {
    const rumus_attention_params p = {0.0f, causal};
    rumus_tensor *mask = causal ? m : NULL;
    TU_OK(ctx, rumus_attention_fwd(ctx, &p, q, k, v, mask, o, lse));
    TU_OK(ctx, rumus_attention_bwd(ctx, &p, q, k, v, mask, o, lse, q, dq, dk,
                                   dv));
  }
  free_tensors(q, k, v, o, dq, dk, dv, m, lse, NULL);
}

START_TEST(cache_fill_builds_every_program) {
  const int v = tu_variants[_i];
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, v);
  TU_OK(ctx, rumus_cache_fill(ctx));
  rumus_cache_info before, after;
  TU_OK(ctx, rumus_cache_stats(ctx, &before));
  ck_assert_uint_gt(before.programs, 0);
  ck_assert_uint_eq(before.builds, before.programs);
  tu_rng r;
  tu_rng_seed(&r, 7);
  /* Rows of 1, 3 and 4 float4 per register rung, the strided kernel past
   * 8192 columns; odd widths take the unaligned programs. */
  const size_t widths[] = {16, 1000, 3001, 6000, 9000, 8193};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    run_softmax_ops(ctx, &r, 3, widths[i]);
    run_xent_ops(ctx, &r, 3, widths[i]);
    run_layernorm_ops(ctx, &r, 3, widths[i]);
  }
  run_elementwise_ops(ctx, &r, 5, 64);
  run_elementwise_ops(ctx, &r, 5, 7);
  /* Shapes that pick each tile size on a small device (docs/DESIGN.md),
   * with K a multiple of 4 (aligned) and odd (unaligned). */
  const size_t mn[][2] = {{256, 256}, {128, 64}, {64, 32}, {5, 3}};
  for (size_t i = 0; i < sizeof mn / sizeof mn[0]; i++) {
    run_gemm_ops(ctx, &r, mn[i][0], mn[i][1], 8);
    run_gemm_ops(ctx, &r, mn[i][0], mn[i][1], 7);
  }
  run_optim_ops(ctx, &r, 1000);
  run_dropout_ops(ctx, &r, 5, 64);
  run_dropout_ops(ctx, &r, 5, 7);
  run_pool_ops(ctx, &r);
  /* Rows of 1 and of 784 (the work-group variant's two walks), one range
   * per channel and several. */
  run_batchnorm_ops(ctx, &r, 3, 5, 1, 1);
  run_batchnorm_ops(ctx, &r, 16, 2, 28, 28);
  /* conv2d: 1, 4 and 16 channels per work-item on the CPU variant
   * (few, some and many channels per group, depthwise), several weight
   * gradient chunks (48 x 48 pixels). */
  run_conv_ops(ctx, &r, 2, 2, 5, 3, 1);
  run_conv_ops(ctx, &r, 2, 6, 5, 8, 1);
  run_conv_ops(ctx, &r, 1, 16, 5, 20, 1);
  run_conv_ops(ctx, &r, 1, 4, 48, 4, 4);
  /* The work-group variant's Winograd path, forced with the tile size
   * that it picks by itself (F(4x4), AUTO_WM in src/ops/conv_winograd.c,
   * whose program rumus_cache_fill builds). */
  setenv("RUMUS_CONV2D_WINOGRAD", "4", 1);
  run_conv_ops(ctx, &r, 2, 5, 7, 6, 1);
  unsetenv("RUMUS_CONV2D_WINOGRAD");
  /* Embedding: F32 table and gradient, one and several tiles. */
  run_embedding_ops(ctx, &r, 10, 5);
  run_embedding_ops(ctx, &r, 700, 64);
  run_tensorops_ops(ctx, &r);
  run_attention_ops(ctx, &r, 32);
  run_attention_ops(ctx, &r, 64);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  TU_OK(ctx, rumus_cache_stats(ctx, &after));
  ck_assert_msg(after.builds == before.builds,
                "%s variant: %llu programs built after rumus_cache_fill",
                tu_variant_name(v),
                (unsigned long long)(after.builds - before.builds));
  ck_assert_uint_eq(after.programs, before.programs);
  /* A second fill finds everything cached. */
  TU_OK(ctx, rumus_cache_fill(ctx));
  TU_OK(ctx, rumus_cache_stats(ctx, &after));
  ck_assert_uint_eq(after.builds, before.builds);
  tu_free_all(ctx, NULL);
}
END_TEST

START_TEST(cache_stats_arguments) {
  rumus_cache_info info;
  TU_STATUS(RUMUS_ENULL, rumus_cache_stats(NULL, &info));
  rumus_ctx *ctx = tu_ctx();
  TU_STATUS(RUMUS_ENULL, rumus_cache_stats(ctx, NULL));
  TU_OK(ctx, rumus_cache_stats(ctx, &info));
  ck_assert_uint_eq(info.programs, 0);
  ck_assert_uint_eq(info.builds, 0);
  tu_free_all(ctx, NULL);
}
END_TEST

/* ---- core: host-pointer buffers at a float-aligned address --------------- */

/* Wraps n floats of `host` (which the driver may use in place). */
static rumus_tensor *wrap_host(rumus_ctx *ctx, float *host, size_t n,
                               cl_mem *buf) {
  cl_int e;
  *buf = clCreateBuffer(rumus_ctx_cl_context(ctx),
                        CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                        n * sizeof(float), host, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  const size_t shape[1] = {n};
  rumus_tensor *t = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 1, shape, *buf, 0, &t));
  return t;
}

START_TEST(host_pointer_buffers_off_alignment) {
  const int v = tu_variants[_i];
  enum { N = 1003 };
  rumus_ctx *ctx = tu_ctx();
  tu_set_variant(ctx, v);
  /* One float past a 64-byte boundary: aligned to 4 bytes only. */
  void *mem = NULL;
  ck_assert_int_eq(posix_memalign(&mem, 64, 2 * (N + 16) * sizeof(float)), 0);
  unsigned char *raw = mem;
  float *x = (float *)(raw + 4), *y = x + N + 8;
  tu_rng r;
  tu_rng_seed(&r, 11);
  tu_fill_uniform(&r, x, N, -1, 1);
  tu_fill_uniform(&r, y, N, -1, 1);
  double want[N];
  for (size_t i = 0; i < N; i++) want[i] = 0.25 * (double)x[i] + y[i];
  cl_mem bx, by;
  rumus_tensor *tx = wrap_host(ctx, x, N, &bx), *ty = wrap_host(ctx, y, N, &by);
  TU_OK(ctx, rumus_axpy(ctx, 0.25f, tx, ty));
  float *got = tu_download(ctx, ty);
  tu_check_close("axpy on host-pointer buffers", got, want, N, 1e-7, 1e-6);
  free(got);
  free_tensors(tx, ty, NULL);
  TU_OK(ctx, rumus_ctx_free(ctx));
  clReleaseMemObject(bx);
  clReleaseMemObject(by);
  free(raw);
}
END_TEST

/* ---- core: 16-bit conversions and fills ----------------------------------- */

/* The float of a 16-bit pattern of dtype. */
static double widen(rumus_dtype d, uint16_t h) {
  return d == RUMUS_F16 ? rumus_f16_to_f32(h) : rumus_bf16_to_f32(h);
}

/* Asserts that h, the rounding of finite x to dtype, is the nearest value
 * to x, the even one of two equally near, or infinity past the largest
 * finite value's rounding range.  Patterns are ordered like magnitudes, so
 * the neighbours of h are h - 1 and h + 1 within a sign. */
static void check_nearest(rumus_dtype d, float x, uint16_t h) {
  const double v = widen(d, h), xd = x;
  const uint16_t mag = h & 0x7FFF, inf = d == RUMUS_F16 ? 0x7C00 : 0x7F80;
  ck_assert_msg(mag <= inf, "%s(%a) = 0x%04x is NaN", tu_dtype_name(d),
                (double)x, h);
  const double err = fabs(v - xd);
  if (mag == inf) { /* overflow: x is at least max + half an ulp */
    const double max = widen(d, inf - 1), below = widen(d, inf - 2);
    ck_assert_msg(fabs(xd) >= max + (max - below) / 2, "%a overflowed",
                  (double)x);
    return;
  }
  for (int step = -1; step <= 1; step += 2) {
    if ((mag == 0 && step < 0) || mag + step == inf) continue;
    const double other = widen(d, (uint16_t)((h & 0x8000) | (mag + step)));
    const double oerr = fabs(other - xd);
    ck_assert_msg(err < oerr || (err == oerr && (mag & 1) == 0),
                  "%s(%a) = %a, but %a is nearer (or even)", tu_dtype_name(d),
                  (double)x, v, other);
  }
}

START_TEST(host_conversions_round_to_nearest_even) {
  for (uint32_t h = 0; h < 0x10000; h++) { /* every pattern survives */
    const uint16_t b = (uint16_t)h;
    const float f16 = rumus_f16_to_f32(b), bf = rumus_bf16_to_f32(b);
    if (isnan(f16))
      ck_assert(isnan(rumus_f16_to_f32(rumus_f32_to_f16(f16))));
    else
      ck_assert_uint_eq(rumus_f32_to_f16(f16), b);
    if (isnan(bf))
      ck_assert(isnan(rumus_bf16_to_f32(rumus_f32_to_bf16(bf))));
    else
      ck_assert_uint_eq(rumus_f32_to_bf16(bf), b);
  }
  tu_rng r;
  tu_rng_seed(&r, 5);
  for (int i = 0; i < 200000; i++) {
    uint32_t u = tu_rand_u32(&r);
    if (i % 2) /* half of them in F16's range (2^-25 to 2^16), with ties */
      u = (u & 0x80000000u) | ((102u + tu_rand_u32(&r) % 42u) << 23) |
          (u & 0x007FF000u);
    float x;
    memcpy(&x, &u, sizeof x);
    if (isnan(x)) continue;
    check_nearest(RUMUS_F16, x, rumus_f32_to_f16(x));
    check_nearest(RUMUS_BF16, x, rumus_f32_to_bf16(x));
  }
  ck_assert(isnan(rumus_f16_to_f32(rumus_f32_to_f16(NAN))));
  ck_assert(isnan(rumus_bf16_to_f32(rumus_f32_to_bf16(NAN))));
  ck_assert_uint_eq(rumus_f32_to_f16(65504.0f), 0x7BFF);
  ck_assert_uint_eq(rumus_f32_to_f16(65520.0f), 0x7C00);
  ck_assert_uint_eq(rumus_f32_to_f16(-INFINITY), 0xFC00);
  ck_assert_uint_eq(rumus_f32_to_f16(0x1p-25f), 0x0000);
  ck_assert_uint_eq(rumus_f32_to_f16(0x1.000002p-25f), 0x0001);
}
END_TEST

START_TEST(fill_and_float_transfers_of_16_bit_tensors) {
  rumus_ctx *ctx = tu_ctx();
  const size_t shape[1] = {37};
  for (int d = 1; d < 3; d++) {
    const rumus_dtype dt = tu_dtypes[d];
    rumus_tensor *t = tu_tensor(ctx, dt, 1, shape, NULL);
    TU_OK(ctx, rumus_tensor_fill(t, 1.0f / 3.0f));
    uint16_t bits[37];
    TU_OK(ctx, rumus_tensor_download(t, bits, sizeof bits));
    const uint16_t want = dt == RUMUS_F16 ? rumus_f32_to_f16(1.0f / 3.0f)
                                          : rumus_f32_to_bf16(1.0f / 3.0f);
    for (int i = 0; i < 37; i++) ck_assert_uint_eq(bits[i], want);
    float x[37], back[37];
    for (int i = 0; i < 37; i++) x[i] = 1.0f + (float)i / 7.0f;
    TU_OK(ctx, rumus_tensor_upload_f32(t, x, 37));
    TU_OK(ctx, rumus_tensor_download_f32(t, back, 37));
    tu_round_to(dt, x, 37);
    for (int i = 0; i < 37; i++) ck_assert_float_eq(back[i], x[i]);
    TU_STATUS(RUMUS_ESIZE, rumus_tensor_upload_f32(t, x, 36));
    TU_STATUS(RUMUS_ENULL, rumus_tensor_download_f32(t, NULL, 37));
    rumus_tensor_free(t);
  }
  rumus_tensor *ti = tu_tensor(ctx, RUMUS_I32, 1, shape, NULL);
  float x[37] = {0};
  TU_STATUS(RUMUS_EDTYPE, rumus_tensor_upload_f32(ti, x, 37));
  tu_free_all(ctx, ti, NULL);
}
END_TEST

/* ---- errors: overlapping tensors ---------------------------------------- */

/* Views into one buffer of 4096 floats: [offset, offset + rows * cols). */
typedef struct {
  rumus_ctx *ctx;
  cl_mem buf;
} shared_buf;

static shared_buf shared_new(void) {
  shared_buf s = {tu_ctx(), NULL};
  cl_int e;
  s.buf = clCreateBuffer(rumus_ctx_cl_context(s.ctx), CL_MEM_READ_WRITE,
                         4096 * sizeof(float), NULL, &e);
  ck_assert_int_eq(e, CL_SUCCESS);
  return s;
}

static rumus_tensor *view(shared_buf *s, rumus_dtype dt, size_t offset,
                          int ndim, size_t d0, size_t d1) {
  const size_t shape[2] = {d0, d1};
  rumus_tensor *t = NULL;
  TU_OK(s->ctx, rumus_tensor_wrap(s->ctx, dt, ndim, shape, s->buf,
                                  offset * sizeof(float), &t));
  return t;
}

/* Asserts RUMUS_EINVAL with a message that names an overlap. */
#define TU_OVERLAP(ctx, expr)                                                 \
  do {                                                                        \
    TU_STATUS(RUMUS_EINVAL, expr);                                            \
    ck_assert_msg(strstr(rumus_ctx_errmsg(ctx), "overlap") != NULL,           \
                  "%s: message \"%s\"", #expr, rumus_ctx_errmsg(ctx));        \
  } while (0)

/* The rows every case below views: x, rows 0-3 of 8 columns; y, one row
 * further (overlapping 3 rows); x2, x's very bytes; z, after both. */
typedef struct {
  rumus_tensor *x, *y, *x2, *z;
} overlap_rows;

/* Softmax, element-wise ops, dropout and the bias ops. */
static void overlap_flat_ops(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  rumus_tensor *x = r->x, *y = r->y, *x2 = r->x2, *z = r->z;
  TU_OVERLAP(ctx, rumus_softmax_fwd(ctx, x, y));
  TU_OK(ctx, rumus_softmax_fwd(ctx, x, x2)); /* in place */
  TU_OVERLAP(ctx, rumus_softmax_bwd(ctx, z, x, y));  /* dx into dy */
  TU_OVERLAP(ctx, rumus_softmax_bwd(ctx, x, z, x2)); /* dx is y */
  TU_OK(ctx, rumus_softmax_bwd(ctx, z, x, x2));      /* dx is dy */
  TU_OVERLAP(ctx, rumus_add(ctx, x, z, y));
  TU_OK(ctx, rumus_add(ctx, x, z, x2));
  TU_OVERLAP(ctx, rumus_axpy(ctx, 1.0f, x, y));
  TU_OVERLAP(ctx, rumus_activation_fwd(ctx, RUMUS_ACT_RELU, 0, x, y));
  TU_OVERLAP(ctx,
             rumus_activation_bwd(ctx, RUMUS_ACT_RELU, 0, z, x, y));
  TU_OVERLAP(ctx, rumus_dropout_fwd(ctx, 0.5f, 1, 0, x, y));
  TU_OVERLAP(ctx, rumus_dropout_bwd(ctx, 0.5f, 1, 0, y, x));
  TU_OK(ctx, rumus_dropout_fwd(ctx, 0.5f, 1, 0, x, x2)); /* in place */
  rumus_tensor *bias = view(s, RUMUS_F32, 100, 1, 8, 0);
  rumus_tensor *bias_in_x = view(s, RUMUS_F32, 4, 1, 8, 0);
  TU_OVERLAP(ctx, rumus_bias_add(ctx, x, bias_in_x));
  TU_OVERLAP(ctx, rumus_bias_grad(ctx, x, bias_in_x));
  TU_OK(ctx, rumus_bias_add(ctx, z, bias));
  free_tensors(bias, bias_in_x, NULL);
}

/* Cross-entropy: the gradient one row into the logits, the loss inside them. */
static void overlap_xent(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  rumus_tensor *x = r->x, *y = r->y, *z = r->z;
  rumus_tensor *tg = view(s, RUMUS_I32, 200, 1, 4, 0);
  rumus_tensor *loss = view(s, RUMUS_F32, 210, 0, 0, 0);
  rumus_tensor *loss_in_x = view(s, RUMUS_F32, 3, 0, 0, 0);
  TU_OK(ctx, rumus_tensor_fill(tg, 1.0f));
  TU_OVERLAP(ctx, rumus_cross_entropy(ctx, x, tg, loss, y, NULL));
  TU_OVERLAP(ctx, rumus_cross_entropy(ctx, x, tg, loss_in_x, NULL, NULL));
  TU_OK(ctx, rumus_cross_entropy(ctx, z, tg, loss, NULL, NULL));
  free_tensors(tg, loss, loss_in_x, NULL);
}

/* GEMM: C over A; views of one tensor that do not meet are fine. */
static void overlap_gemm(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  rumus_tensor *sq = view(s, RUMUS_F32, 300, 2, 8, 8);
  rumus_tensor *c_in_a = view(s, RUMUS_F32, 308, 2, 8, 8);
  TU_OVERLAP(ctx, rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, sq,
                             sq, 0.0f, c_in_a));
  TU_OVERLAP(ctx, rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, sq,
                             sq, 0.0f, sq));
  rumus_tensor *flat = view(s, RUMUS_F32, 1000, 1, 48, 0);
  TU_OK(ctx, rumus_tensor_fill(flat, 1.0f));
  rumus_gemm_layout l = {4, 4, 4, 1, 0, 4, 0, 16, 4, 0, 32, 4, 0};
  TU_OK(ctx, rumus_gemm_ex(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, flat,
                           flat, 0.0f, flat, &l));
  float c[48];
  TU_OK(ctx, rumus_tensor_download(flat, c, sizeof c));
  for (int i = 32; i < 48; i++) ck_assert_float_eq(c[i], 4.0f);
  l.c_offset = 12; /* C's view now starts inside A's */
  TU_OVERLAP(ctx, rumus_gemm_ex(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f,
                                flat, flat, 0.0f, flat, &l));
  free_tensors(sq, c_in_a, flat, NULL);
}

/* Channel bias and batch norm: x viewed as [1, 4, 2, 4], y one row of
 * 8 further; per-channel tensors of 4 inside x or beside it. */
static void overlap_batchnorm(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  const size_t nchw[4] = {1, 4, 2, 4};
  rumus_tensor *bx = view(s, RUMUS_F32, 0, 2, 4, 8);
  rumus_tensor *by = view(s, RUMUS_F32, 8, 2, 4, 8);
  rumus_tensor *bz = view(s, RUMUS_F32, 64, 2, 4, 8);
  TU_OK(ctx, rumus_tensor_reshape(bx, 4, nchw));
  TU_OK(ctx, rumus_tensor_reshape(by, 4, nchw));
  TU_OK(ctx, rumus_tensor_reshape(bz, 4, nchw));
  rumus_tensor *c_in_x = view(s, RUMUS_F32, 2, 1, 4, 0);
  rumus_tensor *c_a = view(s, RUMUS_F32, 400, 1, 4, 0);
  rumus_tensor *c_b = view(s, RUMUS_F32, 404, 1, 4, 0);
  rumus_tensor *c_ab = view(s, RUMUS_F32, 402, 1, 4, 0); /* over both */
  TU_OK(ctx, rumus_tensor_fill(c_a, 1.0f));
  TU_OK(ctx, rumus_tensor_fill(c_b, 1.0f));
  TU_OVERLAP(ctx, rumus_channel_bias_add(ctx, bx, c_a, by));
  TU_OK(ctx, rumus_channel_bias_add(ctx, bz, c_a, bz)); /* in place */
  TU_OVERLAP(ctx, rumus_channel_bias_grad(ctx, bx, c_in_x));
  TU_OVERLAP(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, bz, NULL, NULL,
                                              NULL, NULL, bz, c_a, c_ab));
  TU_OVERLAP(ctx, rumus_batchnorm2d_fwd_train(ctx, NULL, bx, NULL, NULL,
                                              NULL, NULL, by, c_a, c_b));
  TU_OVERLAP(ctx, rumus_batchnorm2d_fwd_eval(ctx, NULL, bx, c_in_x, NULL,
                                             c_a, c_b, bx));
  TU_OVERLAP(ctx, rumus_batchnorm2d_bwd(ctx, bz, bx, NULL, c_a, c_b, by,
                                        NULL, NULL));
  TU_OVERLAP(ctx, rumus_batchnorm2d_bwd(ctx, bz, bx, NULL, c_a, c_b, bz,
                                        c_ab, NULL));
  TU_OK(ctx, rumus_batchnorm2d_fwd_eval(ctx, NULL, bz, NULL, NULL, c_a, c_b,
                                        bz));
  free_tensors(bx, by, bz, c_in_x, c_a, c_b, c_ab, NULL);
}

/* Layer norm: y one row into x, statistics inside x, dx into dy. */
static void overlap_layernorm(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  rumus_tensor *x = r->x, *y = r->y, *x2 = r->x2, *z = r->z;
  rumus_tensor *g = view(s, RUMUS_F32, 400, 1, 8, 0);
  rumus_tensor *g_in_x = view(s, RUMUS_F32, 4, 1, 8, 0);
  rumus_tensor *m = view(s, RUMUS_F32, 420, 1, 4, 0);
  rumus_tensor *rs = view(s, RUMUS_F32, 424, 1, 4, 0);
  rumus_tensor *rs_in_x = view(s, RUMUS_F32, 6, 1, 4, 0);
  TU_OK(ctx, rumus_tensor_fill(g, 1.0f));
  TU_OVERLAP(ctx, rumus_layernorm_fwd(ctx, NULL, x, g, NULL, y, m, rs));
  TU_OVERLAP(ctx, rumus_layernorm_fwd(ctx, NULL, x, g, NULL, x2, m,
                                      rs_in_x));
  TU_OK(ctx, rumus_layernorm_fwd(ctx, NULL, x, g, NULL, x2, m, rs));
  TU_OVERLAP(ctx, rumus_layernorm_bwd(ctx, z, x, g, m, rs, y, NULL, NULL));
  TU_OVERLAP(ctx, rumus_layernorm_bwd(ctx, z, x, g, m, rs, z, g_in_x,
                                      NULL));
  TU_OK(ctx, rumus_layernorm_bwd(ctx, z, x, g, m, rs, z, NULL, NULL));
  TU_OVERLAP(ctx, rumus_rmsnorm_fwd(ctx, NULL, z, g_in_x, x, NULL));
  TU_OVERLAP(ctx, rumus_rmsnorm_bwd(ctx, z, x, g, rs, x2, NULL));
  TU_OK(ctx, rumus_rmsnorm_fwd(ctx, NULL, z, g, z, rs));
  free_tensors(g, g_in_x, m, rs, rs_in_x, NULL);
}

/* Permute and reduce_sum: y over x, or x's very bytes; broadcast: out
 * may be an input's bytes, not overlap it. */
static void overlap_tensorops(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  rumus_tensor *x = r->x, *y = r->y, *x2 = r->x2, *z = r->z;
  const int ident[2] = {0, 1};
  TU_OVERLAP(ctx, rumus_permute(ctx, x, ident, y));
  TU_OVERLAP(ctx, rumus_permute(ctx, x, ident, x2));
  TU_OK(ctx, rumus_permute(ctx, x, ident, z));
  TU_OVERLAP(ctx, rumus_broadcast_add(ctx, x, z, y));
  TU_OVERLAP(ctx, rumus_broadcast_mul(ctx, z, x, y));
  TU_OK(ctx, rumus_broadcast_add(ctx, x, z, x2));
  TU_OVERLAP(ctx, rumus_reduce_sum(ctx, x, 0u, 0, y));
  TU_OVERLAP(ctx, rumus_reduce_sum(ctx, x, 0u, 0, x2));
  TU_OK(ctx, rumus_reduce_sum(ctx, x, 0u, 0, z));
}

/* Optimizers, sums of squares, clipping. */
static void overlap_optim(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  rumus_tensor *x = r->x, *y = r->y, *x2 = r->x2, *z = r->z;
  rumus_tensor *loss_in_x = view(s, RUMUS_F32, 3, 0, 0, 0);
  const rumus_sgd_params sp = {0.1f, 0.9f, 0.0f, 0.0f, 0};
  const rumus_adam_params ap = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};
  TU_OVERLAP(ctx, rumus_sgd_step(ctx, &sp, 1, x, z, y));
  TU_OVERLAP(ctx, rumus_sgd_step(ctx, &sp, 1, x, x2, z));
  TU_OVERLAP(ctx, rumus_adam_step(ctx, &ap, 1, z, x, y, x2));
  TU_OVERLAP(ctx, rumus_sum_squares(ctx, x, loss_in_x));
  rumus_tensor *gs[2] = {x, y};
  TU_OVERLAP(ctx, rumus_clip_grad_norm(ctx, gs, 2, 1.0f, NULL));
  TU_OVERLAP(ctx, rumus_clip_grad_norm(ctx, gs, 1, 1.0f, loss_in_x));
  free_tensors(loss_in_x, NULL);
}

/* Pooling: y and indices one element into x (4-D views of the rows). */
static void overlap_pool(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  const size_t px[4] = {1, 1, 4, 8}, py[4] = {1, 1, 2, 4};
  rumus_tensor *p4x = NULL, *p4y = NULL, *p4i = NULL, *p4z = NULL,
               *p4j = NULL; /* indices two elements into p4z */
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, px, s->buf, 0, &p4x));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, py, s->buf, 4, &p4y));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_I32, 4, py, s->buf, 3000 * 4, &p4i));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, py, s->buf, 3100 * 4, &p4z));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_I32, 4, py, s->buf, 3102 * 4, &p4j));
  const rumus_pool2d_params pp = RUMUS_POOL2D_PARAMS(2, 2);
  TU_OVERLAP(ctx, rumus_maxpool2d_fwd(ctx, &pp, p4x, p4y, p4i));
  TU_OVERLAP(ctx, rumus_maxpool2d_fwd(ctx, &pp, p4x, p4z, p4j));
  TU_OVERLAP(ctx, rumus_maxpool2d_bwd(ctx, &pp, p4y, p4i, p4x));
  TU_OVERLAP(ctx, rumus_avgpool2d_fwd(ctx, &pp, p4x, p4y));
  TU_OVERLAP(ctx, rumus_avgpool2d_bwd(ctx, &pp, p4y, p4x));
  TU_OVERLAP(ctx, rumus_adaptive_avgpool2d_fwd(ctx, p4x, p4y));
  TU_OVERLAP(ctx, rumus_adaptive_avgpool2d_bwd(ctx, p4y, p4x));
  TU_OK(ctx, rumus_avgpool2d_fwd(ctx, &pp, p4x, p4z));
  free_tensors(p4x, p4y, p4i, p4z, p4j, NULL);
}

/* conv2d: each output over an input (no aliasing at all). */
static void overlap_conv(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  const size_t s4[4] = {1, 1, 4, 4}, s3[4] = {1, 1, 3, 3},
               s2[4] = {1, 1, 2, 2};
  rumus_tensor *cx = NULL, *cw = NULL, *cy = NULL, *cy_in_x = NULL,
               *cw_in_x = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, s4, s->buf, 2000 * 4, &cx));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, s3, s->buf, 2100 * 4, &cw));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, s2, s->buf, 2200 * 4, &cy));
  TU_OK(ctx,
        rumus_tensor_wrap(ctx, RUMUS_F32, 4, s2, s->buf, 2010 * 4, &cy_in_x));
  TU_OK(ctx,
        rumus_tensor_wrap(ctx, RUMUS_F32, 4, s3, s->buf, 2005 * 4, &cw_in_x));
  TU_OK(ctx, rumus_tensor_fill(cx, 1.0f));
  TU_OK(ctx, rumus_tensor_fill(cw, 1.0f));
  TU_OK(ctx, rumus_conv2d_fwd(ctx, NULL, cx, cw, NULL, cy));
  TU_OVERLAP(ctx, rumus_conv2d_fwd(ctx, NULL, cx, cw, NULL, cy_in_x));
  TU_OVERLAP(ctx, rumus_conv2d_bwd_data(ctx, NULL, cy_in_x, cw, cx));
  TU_OVERLAP(ctx, rumus_conv2d_bwd_weight(ctx, NULL, cx, cy, cw_in_x));
  free_tensors(cx, cw, cy, cy_in_x, cw_in_x, NULL);
}

/* Embedding: out over the table, dweight over ids, out beside both. */
static void overlap_embedding(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  const size_t e_ws[2] = {4, 2}, e_is[1] = {3}, e_os[2] = {3, 2};
  rumus_tensor *ew = NULL, *eid = NULL, *eo = NULL, *eo_in_w = NULL,
               *edw_in_id = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, e_ws, s->buf, 2300 * 4, &ew));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_I32, 1, e_is, s->buf, 2320 * 4, &eid));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, e_os, s->buf, 2340 * 4, &eo));
  TU_OK(ctx,
        rumus_tensor_wrap(ctx, RUMUS_F32, 2, e_os, s->buf, 2303 * 4, &eo_in_w));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 2, e_ws, s->buf, 2318 * 4,
                               &edw_in_id));
  const int32_t e_zero[3] = {0, 0, 0};
  TU_OK(ctx, rumus_tensor_upload(eid, e_zero, sizeof e_zero));
  TU_OK(ctx, rumus_embedding_fwd(ctx, ew, eid, -1, eo));
  TU_OVERLAP(ctx, rumus_embedding_fwd(ctx, ew, eid, -1, eo_in_w));
  TU_OVERLAP(ctx, rumus_embedding_bwd(ctx, eo, eid, -1, edw_in_id));
  TU_OVERLAP(ctx, rumus_embedding_bwd(ctx, eo_in_w, eid, -1, ew));
  free_tensors(ew, eid, eo, eo_in_w, edw_in_id, NULL);
}

/* Attention: out over q, lse over k, dq over q, dv as v's very bytes. */
static void overlap_attention(shared_buf *s, const overlap_rows *r) {
  rumus_ctx *ctx = s->ctx;
  const size_t a_s[4] = {1, 1, 4, 8}, a_l[3] = {1, 1, 4};
  rumus_tensor *aq = NULL, *ak = NULL, *av = NULL, *ao = NULL, *al = NULL,
               *ao_in_q = NULL, *al_in_k = NULL;
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, a_s, s->buf, 3200 * 4, &aq));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, a_s, s->buf, 3240 * 4, &ak));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, a_s, s->buf, 3280 * 4, &av));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 4, a_s, s->buf, 3320 * 4, &ao));
  TU_OK(ctx, rumus_tensor_wrap(ctx, RUMUS_F32, 3, a_l, s->buf, 3360 * 4, &al));
  TU_OK(ctx,
        rumus_tensor_wrap(ctx, RUMUS_F32, 4, a_s, s->buf, 3204 * 4, &ao_in_q));
  TU_OK(ctx,
        rumus_tensor_wrap(ctx, RUMUS_F32, 3, a_l, s->buf, 3242 * 4, &al_in_k));
  TU_OK(ctx, rumus_tensor_fill(aq, 0.5f));
  TU_OK(ctx, rumus_tensor_fill(ak, 0.25f));
  TU_OK(ctx, rumus_tensor_fill(av, 1.0f));
  TU_OK(ctx, rumus_attention_fwd(ctx, NULL, aq, ak, av, NULL, ao, al));
  TU_OVERLAP(ctx, rumus_attention_fwd(ctx, NULL, aq, ak, av, NULL, ao_in_q, al));
  TU_OVERLAP(ctx, rumus_attention_fwd(ctx, NULL, aq, ak, av, NULL, ao, al_in_k));
  TU_OVERLAP(ctx, rumus_attention_bwd(ctx, NULL, aq, ak, av, NULL, ao, al, ao,
                                      ao_in_q, NULL, NULL));
  TU_OVERLAP(ctx, rumus_attention_bwd(ctx, NULL, aq, ak, av, NULL, ao, al, ao,
                                      NULL, NULL, av));
  free_tensors(aq, ak, av, ao, al, ao_in_q, al_in_k, NULL);
}

START_TEST(overlapping_tensors_are_rejected) {
  shared_buf s = shared_new();
  rumus_ctx *ctx = s.ctx;
  const overlap_rows r = {view(&s, RUMUS_F32, 0, 2, 4, 8),
                          view(&s, RUMUS_F32, 8, 2, 4, 8),
                          view(&s, RUMUS_F32, 0, 2, 4, 8),
                          view(&s, RUMUS_F32, 64, 2, 4, 8)};
  TU_OK(ctx, rumus_tensor_fill(r.x, 0.5f));
  TU_OK(ctx, rumus_tensor_fill(r.z, 0.25f));
  overlap_flat_ops(&s, &r);
  overlap_xent(&s, &r);
  overlap_gemm(&s, &r);
  overlap_batchnorm(&s, &r);
  overlap_layernorm(&s, &r);
  overlap_tensorops(&s, &r);
  overlap_optim(&s, &r);
  overlap_pool(&s, &r);
  overlap_conv(&s, &r);
  overlap_embedding(&s, &r);
  overlap_attention(&s, &r);
  TU_OK(ctx, rumus_ctx_sync(ctx));
  free_tensors(r.x, r.y, r.x2, r.z, NULL);
  TU_OK(ctx, rumus_ctx_free(ctx));
  clReleaseMemObject(s.buf);
}
END_TEST

/* ---- errors: infinite hyper-parameters ---------------------------------- */

START_TEST(infinite_hyper_parameters) {
  rumus_ctx *ctx = tu_ctx();
  const size_t shape[1] = {8};
  rumus_tensor *p = tu_tensor(ctx, RUMUS_F32, 1, shape, NULL);
  rumus_tensor *g = tu_tensor(ctx, RUMUS_F32, 1, shape, NULL);
  rumus_tensor *m = tu_tensor(ctx, RUMUS_F32, 1, shape, NULL);
  rumus_tensor *v = tu_tensor(ctx, RUMUS_F32, 1, shape, NULL);
  const float inf = INFINITY;
  const rumus_sgd_params sgd[] = {{inf, 0.9f, 0.0f, 0.0f, 0},
                                  {0.1f, inf, 0.0f, 0.0f, 0},
                                  {0.1f, 0.9f, inf, 0.0f, 0},
                                  {0.1f, 0.9f, -inf, 0.0f, 0},
                                  {0.1f, 0.9f, 0.0f, inf, 0}};
  for (size_t i = 0; i < sizeof sgd / sizeof sgd[0]; i++)
    TU_STATUS(RUMUS_EINVAL, rumus_sgd_step(ctx, &sgd[i], 1, p, g, m));
  const rumus_adam_params adam[] = {{inf, 0.9f, 0.999f, 1e-8f, 0.0f, 0},
                                    {1e-3f, 0.9f, 0.999f, inf, 0.0f, 0},
                                    {1e-3f, 0.9f, 0.999f, 1e-8f, inf, 1}};
  for (size_t i = 0; i < sizeof adam / sizeof adam[0]; i++)
    TU_STATUS(RUMUS_EINVAL, rumus_adam_step(ctx, &adam[i], 1, p, g, m, v));
  tu_free_all(ctx, p, g, m, v, NULL);
}
END_TEST

/* ---- limits: Adam's second moment near float's range -------------------- */

START_TEST(adam_second_moment_stays_finite) {
  enum { N = 12 };
  rumus_ctx *ctx = tu_ctx();
  /* g^2 overflows float from 1.85e19; (1 - 0.999) g^2 only from 5.8e20. */
  const float grad[N] = {2e19f, -3e19f, 1e20f, -5e20f, 4e20f, 1.8e19f,
                         1.0f,  -2.0f,  0.0f,  1e10f,  -1e15f, 3e18f};
  float param[N], zero[N] = {0};
  for (int i = 0; i < N; i++) param[i] = 0.5f * (float)i;
  const size_t shape[1] = {N};
  rumus_tensor *tp = tu_tensor(ctx, RUMUS_F32, 1, shape, param);
  rumus_tensor *tg = tu_tensor(ctx, RUMUS_F32, 1, shape, grad);
  rumus_tensor *tm = tu_tensor(ctx, RUMUS_F32, 1, shape, zero);
  rumus_tensor *tv = tu_tensor(ctx, RUMUS_F32, 1, shape, zero);
  const rumus_adam_params ap = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 0};
  TU_OK(ctx, rumus_adam_step(ctx, &ap, 1, tp, tg, tm, tv));
  double p[N], g[N], m[N] = {0}, v[N] = {0};
  for (int i = 0; i < N; i++) {
    p[i] = param[i];
    g[i] = grad[i];
  }
  ref_adam_step(ap.lr, ap.beta1, ap.beta2, ap.eps, 0.0, 0, 1, N, p, g, m, v);
  float *got_v = tu_download(ctx, tv), *got_p = tu_download(ctx, tp);
  for (int i = 0; i < N; i++)
    ck_assert_msg(isfinite(got_v[i]), "v[%d] = %g for g = %g", i,
                  (double)got_v[i], (double)grad[i]);
  tu_check_close("adam v", got_v, v, N, 0.0, 1e-6);
  tu_check_close("adam param", got_p, p, N, 1e-6, 1e-6);
  free(got_v);
  free(got_p);
  tu_free_all(ctx, tp, tg, tm, tv, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("framework");
  TCase *core = tu_tcase("core");
  tcase_add_loop_test(core, cache_fill_builds_every_program, 0, 2);
  tcase_add_test(core, cache_stats_arguments);
  tcase_add_loop_test(core, host_pointer_buffers_off_alignment, 0, 2);
  tcase_add_test(core, host_conversions_round_to_nearest_even);
  tcase_add_test(core, fill_and_float_transfers_of_16_bit_tensors);
  suite_add_tcase(s, core);
  TCase *errors = tu_tcase("errors");
  tcase_add_test(errors, overlapping_tensors_are_rejected);
  tcase_add_test(errors, infinite_hyper_parameters);
  suite_add_tcase(s, errors);
  TCase *limits = tu_tcase("limits");
  tcase_add_test(limits, adam_second_moment_stays_finite);
  suite_add_tcase(s, limits);
  return tu_run(s);
}
