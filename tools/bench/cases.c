/*
 * cases.c - the ops rumus-bench measures: for each, its default shapes, the
 * model of the bytes it must move and the flops it must do, its tensors,
 * one call of the rumus op and one call of its host peer.
 *
 * Byte model: compulsory traffic only, every input read once and every
 * output written once, 4 bytes a float or class index (an op that makes
 * more passes over memory than that shows it as a lower GB/s).  Flop
 * model: the arithmetic of the formula, counting exp, log, erf and sqrt
 * as one flop each; per element unless said otherwise.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "peer.h"

#define F4 4.0

/* ---- Shapes -------------------------------------------------------------- */

/* The "/k3s2p1" suffix of a CNN shape: letters k, s, p, g, o each once,
 * each followed by a number (p may be 0, the others not); returns the
 * position after it, or NULL if malformed. */
static const char *parse_geom(const char *p, bench_shape *out) {
  int seen = 0;
  while (*p && *p != ':') {
    const char *letters = "kspgo", *at = strchr(letters, *p);
    if (*p == '\0' || at == NULL || (seen & (1 << (at - letters)))) return NULL;
    seen |= 1 << (at - letters);
    char *end;
    unsigned long long v = strtoull(p + 1, &end, 10);
    if (end == p + 1 || (v == 0 && *at != 'p')) return NULL;
    size_t *dst[] = {&out->k, &out->s, &out->p, &out->g, &out->o};
    *dst[at - letters] = (size_t)v;
    p = end;
  }
  out->given = seen;
  return p;
}

int bench_parse_shape(const char *s, bench_shape *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->text, sizeof out->text, "%s", s);
  const char *p = s;
  while (*p && *p != ':' && *p != '/') {
    if (out->ndim == 4) return -1;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || v == 0) return -1;
    out->d[out->ndim++] = (size_t)v;
    p = end;
    if (*p == 'x' || *p == 'X') {
      p++;
      if (*p == '\0' || *p == ':' || *p == '/') return -1;
    } else if (*p != '\0' && *p != ':' && *p != '/') {
      return -1;
    }
  }
  if (*p == '/') {
    p = parse_geom(p + 1, out);
    if (p == NULL || out->given == 0) return -1;
  }
  if (*p == ':') {
    if (strlen(p) != 3) return -1;
    for (int i = 0; i < 2; i++) {
      char ch = p[1 + i];
      if (ch != 'n' && ch != 't' && ch != 'N' && ch != 'T') return -1;
      *(i ? &out->tb : &out->ta) = ch == 't' || ch == 'T';
    }
  }
  return out->ndim > 0 ? 0 : -1;
}

static size_t numel(const bench_case *c) {
  size_t n = 1;
  for (int i = 0; i < c->shape.ndim; i++) n *= c->shape.d[i];
  return n;
}

/* rows x cols of a shape with at least two dimensions (leading ones are
 * rows); NULL or the reason it does not fit. */
static const char *rows_cols(const bench_case *c, size_t *rows, size_t *cols) {
  if (c->shape.ndim < 2 || c->shape.ta || c->shape.tb || c->shape.given)
    return "needs a shape ROWSxCOLS";
  *cols = c->shape.d[c->shape.ndim - 1];
  *rows = numel(c) / *cols;
  return NULL;
}

int bench_op_takes_dtype(const bench_op *op) {
  /* The casts have their storage types in their names. */
  return strcmp(op->family, "quant") != 0 && strcmp(op->family, "cast") != 0 &&
         strcmp(op->name, "sum_squares") != 0;
}

double bench_check_limit(rumus_dtype d) {
  return d == RUMUS_F16 ? 1e-3 + 4.9e-4 : d == RUMUS_BF16 ? 1e-3 + 3.9e-3 : 1e-3;
}

size_t bench_host_elem(const bench_tdesc *td) {
  return td->host_f32 ? sizeof(float) : rumus_dtype_size(td->dtype);
}

/* Under --dtype every F32 tensor of an op that takes it is in that type. */
static void tensor(bench_case *c, const char *name, int role, rumus_dtype dt,
                   int ndim, size_t d0, size_t d1, float lo, float hi) {
  bench_tdesc *t = &c->td[c->nt++];
  t->name = name;
  t->role = role;
  t->host_f32 = dt == RUMUS_F32 && c->dtype != RUMUS_F32;
  t->dtype = t->host_f32 ? c->dtype : dt;
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = d1;
  t->n = ndim == 0 ? 1 : ndim == 1 ? d0 : d0 * d1;
  t->lo = lo;
  t->hi = hi;
}

#define T(i) (c->t[i])
#define H(i) ((float *)c->h[i])
#define P(i) ((float *)c->p[i])

/* ---- Softmax family ------------------------------------------------------ */

#define ROWS_DESCRIBE(fn, flop_per_elem, ntensor_bytes, ...)                 \
  static const char *fn(bench_case *c) {                                     \
    size_t r, k;                                                             \
    const char *why = rows_cols(c, &r, &k);                                  \
    if (why) return why;                                                     \
    __VA_ARGS__;                                                             \
    c->bytes = (ntensor_bytes) * F4 * (double)r * (double)k;                 \
    c->flops = (flop_per_elem) * (double)r * (double)k;                      \
    return NULL;                                                             \
  }

/* softmax / log-softmax forward: read x, write y; max, sub, exp, add, and
 * a multiply (softmax) or subtract (log-softmax): 5 flops. */
ROWS_DESCRIBE(describe_sm_fwd, 5, 2,
              tensor(c, "x", BT_IN, RUMUS_F32, 2, r, k, -4, 4);
              tensor(c, "y", BT_OUT, RUMUS_F32, 2, r, k, 0, 0))
/* softmax backward: read y and dy, write dx; dot (2) and y*(dy-dot) (2). */
ROWS_DESCRIBE(describe_sm_bwd, 4, 3,
              tensor(c, "y", BT_IN, RUMUS_F32, 2, r, k, 0, 2.0f / (float)k);
              tensor(c, "dy", BT_IN, RUMUS_F32, 2, r, k, -1, 1);
              tensor(c, "dx", BT_OUT, RUMUS_F32, 2, r, k, 0, 0))
/* log-softmax backward: read y and dy, write dx; sum (1), dy - exp(y)*s (3). */
ROWS_DESCRIBE(describe_lsm_bwd, 4, 3,
              tensor(c, "y", BT_IN, RUMUS_F32, 2, r, k, -8, -6);
              tensor(c, "dy", BT_IN, RUMUS_F32, 2, r, k, -1, 1);
              tensor(c, "dx", BT_OUT, RUMUS_F32, 2, r, k, 0, 0))

static int run_sm_fwd(bench_case *c) { return rumus_softmax_fwd(c->ctx, T(0), T(1)); }
static int run_lsm_fwd(bench_case *c) { return rumus_log_softmax_fwd(c->ctx, T(0), T(1)); }
static int run_sm_bwd(bench_case *c) { return rumus_softmax_bwd(c->ctx, T(0), T(1), T(2)); }
static int run_lsm_bwd(bench_case *c) { return rumus_log_softmax_bwd(c->ctx, T(0), T(1), T(2)); }

static const char *peer_sm_fwd(bench_case *c) {
  peer_softmax_fwd(H(0), P(1), c->td[0].shape[0], c->td[0].shape[1]);
  return "omp";
}
static const char *peer_lsm_fwd(bench_case *c) {
  peer_log_softmax_fwd(H(0), P(1), c->td[0].shape[0], c->td[0].shape[1]);
  return "omp";
}
static const char *peer_sm_bwd(bench_case *c) {
  peer_softmax_bwd(H(0), H(1), P(2), c->td[0].shape[0], c->td[0].shape[1]);
  return "omp";
}
static const char *peer_lsm_bwd(bench_case *c) {
  peer_log_softmax_bwd(H(0), H(1), P(2), c->td[0].shape[0], c->td[0].shape[1]);
  return "omp";
}

/* ---- Cross-entropy ------------------------------------------------------- */

/* Fused forward + gradient, mean reduction: read logits and targets, write
 * grad and the loss; max (1), sub + exp + add (3), gradient exp((x - lse))
 * * scale with the one-hot term (3): 7 flops. */
static const char *describe_xent(bench_case *c) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "logits", BT_IN, RUMUS_F32, 2, r, k, -4, 4);
  tensor(c, "targets", BT_IN, RUMUS_I32, 1, r, 0, 0, (float)k);
  tensor(c, "loss", BT_OUT, RUMUS_F32, 0, 0, 0, 0, 0);
  tensor(c, "grad", BT_OUT, RUMUS_F32, 2, r, k, 0, 0);
  c->bytes = F4 * (2.0 * (double)r * (double)k + (double)r + 1.0);
  c->flops = 7.0 * (double)r * (double)k;
  return NULL;
}
static int run_xent(bench_case *c) {
  return rumus_cross_entropy(c->ctx, T(0), T(1), T(2), T(3), NULL);
}
static const char *peer_xent_(bench_case *c) {
  peer_xent(H(0), (const int32_t *)c->h[1], P(2), P(3), c->td[0].shape[0],
            c->td[0].shape[1]);
  return "omp";
}

/* ---- GEMM ---------------------------------------------------------------- */

/* C = op(A) op(B), alpha 1, beta 0 (C not read): read A and B, write C;
 * 2 M N K flops. */
static const char *describe_gemm(bench_case *c) {
  if (c->shape.ndim != 3 || c->shape.given) return "needs a shape MxNxK[:TT]";
  size_t m = c->shape.d[0], n = c->shape.d[1], k = c->shape.d[2];
  if (c->shape.ta) tensor(c, "A", BT_IN, RUMUS_F32, 2, k, m, -1, 1);
  else tensor(c, "A", BT_IN, RUMUS_F32, 2, m, k, -1, 1);
  if (c->shape.tb) tensor(c, "B", BT_IN, RUMUS_F32, 2, n, k, -1, 1);
  else tensor(c, "B", BT_IN, RUMUS_F32, 2, k, n, -1, 1);
  tensor(c, "C", BT_OUT, RUMUS_F32, 2, m, n, 0, 0);
  c->bytes = F4 * ((double)m * k + (double)k * n + (double)m * n);
  c->flops = 2.0 * (double)m * (double)n * (double)k;
  return NULL;
}
static int run_gemm(bench_case *c) {
  return rumus_gemm(c->ctx, c->shape.ta ? RUMUS_TRANS : RUMUS_NO_TRANS,
                    c->shape.tb ? RUMUS_TRANS : RUMUS_NO_TRANS, 1.0f, T(0),
                    T(1), 0.0f, T(2));
}
static const char *peer_gemm(bench_case *c) {
  size_t m = c->shape.d[0], n = c->shape.d[1], k = c->shape.d[2];
  return peer_sgemm(c->shape.ta, c->shape.tb, m, n, k, H(0), H(1), P(2))
             ? "openblas"
             : NULL;
}
/* Checks 4096 sampled entries of C against a float64 dot product: the
 * whole product on the host would cost more than the benchmark. */
static double check_gemm(bench_case *c, void *const *got) {
  size_t m = c->shape.d[0], n = c->shape.d[1], k = c->shape.d[2];
  const float *a = H(0), *b = H(1), *cc = got[2];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  double maxerr = 0, maxval = 1e-30;
  for (int t = 0; t < 4096; t++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t i = (size_t)(s % m), j = (size_t)((s >> 32) % n);
    double acc = 0;
    for (size_t p = 0; p < k; p++) {
      double av = c->shape.ta ? a[p * m + i] : a[i * k + p];
      double bv = c->shape.tb ? b[j * k + p] : b[p * n + j];
      acc += av * bv;
    }
    double e = cc[i * n + j] - acc;
    if (e < 0) e = -e;
    if (!(e <= maxerr)) maxerr = e; /* NaN sticks */
    if (acc > maxval) maxval = acc;
    if (-acc > maxval) maxval = -acc;
  }
  return maxerr / maxval;
}

/* C = op(A) op(B) + bias (rumus_gemm_bias: a linear layer's forward, as
 * F.linear): the GEMM's bytes and the bias's N; 2 M N K + M N flops. */
static const char *describe_gemm_bias(bench_case *c) {
  const char *why = describe_gemm(c);
  if (why) return why;
  const size_t m = c->shape.d[0], n = c->shape.d[1];
  tensor(c, "bias", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
  c->bytes += F4 * (double)n;
  c->flops += (double)m * (double)n;
  return NULL;
}
static int run_gemm_bias(bench_case *c) {
  return rumus_gemm_bias(c->ctx, c->shape.ta ? RUMUS_TRANS : RUMUS_NO_TRANS,
                         c->shape.tb ? RUMUS_TRANS : RUMUS_NO_TRANS, 1.0f,
                         T(0), T(1), 0.0f, T(3), T(2));
}
static const char *peer_gemm_bias(bench_case *c) {
  const char *name = peer_gemm(c);
  if (name == NULL) return NULL;
  peer_bias_add(P(2), H(3), c->shape.d[0], c->shape.d[1]);
  return name;
}
/* check_gemm's sampled entries, each less its bias. */
static double check_gemm_bias(bench_case *c, void *const *got) {
  const size_t m = c->shape.d[0], n = c->shape.d[1];
  float *cc = malloc(m * n * sizeof *cc);
  if (cc == NULL) return -1.0;
  const float *y = got[2], *b = H(3);
  for (size_t i = 0; i < m * n; i++) cc[i] = y[i] - b[i % n];
  void *less[4] = {got[0], got[1], cc, got[3]};
  const double e = check_gemm(c, less);
  free(cc);
  return e;
}

/* ---- Bias ---------------------------------------------------------------- */

/* bias add: y += bias per row: read y and bias, write y; 1 flop. */
static const char *describe_bias_add(bench_case *c) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "y", BT_INOUT, RUMUS_F32, 2, r, k, -1, 1);
  tensor(c, "bias", BT_IN, RUMUS_F32, 1, k, 0, -1, 1);
  c->bytes = F4 * (2.0 * (double)r * (double)k + (double)k);
  c->flops = (double)r * (double)k;
  return NULL;
}
/* bias grad: dbias = column sums of dy: read dy, write dbias; 1 flop. */
static const char *describe_bias_grad(bench_case *c) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "dy", BT_IN, RUMUS_F32, 2, r, k, -1, 1);
  tensor(c, "dbias", BT_OUT, RUMUS_F32, 1, k, 0, 0, 0);
  c->bytes = F4 * ((double)r * (double)k + (double)k);
  c->flops = (double)r * (double)k;
  return NULL;
}
static int run_bias_add(bench_case *c) { return rumus_bias_add(c->ctx, T(0), T(1)); }
static int run_bias_grad(bench_case *c) { return rumus_bias_grad(c->ctx, T(0), T(1)); }
static const char *peer_bias_add_(bench_case *c) {
  peer_bias_add(P(0), H(1), c->td[0].shape[0], c->td[0].shape[1]);
  return "omp";
}
static const char *peer_bias_grad_(bench_case *c) {
  peer_bias_grad(H(0), P(1), c->td[0].shape[0], c->td[0].shape[1]);
  return "omp";
}

/* ---- Element-wise and activations ---------------------------------------- */

/* Any shape: the element count is what matters. */
#define N_DESCRIBE(fn, flop_per_elem, nbytes, ...)                           \
  static const char *fn(bench_case *c) {                                     \
    if (c->shape.ta || c->shape.tb || c->shape.given)                        \
      return "takes no suffix";                                              \
    size_t n = numel(c);                                                     \
    __VA_ARGS__;                                                             \
    c->bytes = (nbytes) * F4 * (double)n;                                    \
    c->flops = (flop_per_elem) * (double)n;                                  \
    return NULL;                                                             \
  }

/* add / mul: read a and b, write out; 1 flop. */
N_DESCRIBE(describe_binary, 1, 3,
           tensor(c, "a", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "b", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "out", BT_OUT, RUMUS_F32, 1, n, 0, 0, 0))
/* axpy: read x and y, write y; 2 flops. */
N_DESCRIBE(describe_axpy, 2, 3,
           tensor(c, "x", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "y", BT_INOUT, RUMUS_F32, 1, n, 0, -1, 1))
/* ReLU forward: read x, write y; 1 flop.  GELU (erf) forward: 5 flops. */
N_DESCRIBE(describe_relu_fwd, 1, 2,
           tensor(c, "x", BT_IN, RUMUS_F32, 1, n, 0, -3, 3);
           tensor(c, "y", BT_OUT, RUMUS_F32, 1, n, 0, 0, 0))
N_DESCRIBE(describe_gelu_fwd, 5, 2,
           tensor(c, "x", BT_IN, RUMUS_F32, 1, n, 0, -3, 3);
           tensor(c, "y", BT_OUT, RUMUS_F32, 1, n, 0, 0, 0))
/* Activation backward: read x and dy, write dx; ReLU 1 flop, GELU (erf)
 * 11 flops (cdf 4, pdf 4, dy * (cdf + x pdf) 3). */
N_DESCRIBE(describe_relu_bwd, 1, 3,
           tensor(c, "x", BT_IN, RUMUS_F32, 1, n, 0, -3, 3);
           tensor(c, "dy", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "dx", BT_OUT, RUMUS_F32, 1, n, 0, 0, 0))
N_DESCRIBE(describe_gelu_bwd, 11, 3,
           tensor(c, "x", BT_IN, RUMUS_F32, 1, n, 0, -3, 3);
           tensor(c, "dy", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "dx", BT_OUT, RUMUS_F32, 1, n, 0, 0, 0))

#define AXPY_ALPHA 0.5f
static int run_add(bench_case *c) { return rumus_add(c->ctx, T(0), T(1), T(2)); }
static int run_mul(bench_case *c) { return rumus_mul(c->ctx, T(0), T(1), T(2)); }
static int run_axpy(bench_case *c) { return rumus_axpy(c->ctx, AXPY_ALPHA, T(0), T(1)); }
static int run_relu_fwd(bench_case *c) {
  return rumus_activation_fwd(c->ctx, RUMUS_ACT_RELU, 0.0f, T(0), T(1));
}
static int run_relu_bwd(bench_case *c) {
  return rumus_activation_bwd(c->ctx, RUMUS_ACT_RELU, 0.0f, T(0), T(1), T(2));
}
static int run_gelu_fwd(bench_case *c) {
  return rumus_activation_fwd(c->ctx, RUMUS_ACT_GELU_ERF, 0.0f, T(0), T(1));
}
static int run_gelu_bwd(bench_case *c) {
  return rumus_activation_bwd(c->ctx, RUMUS_ACT_GELU_ERF, 0.0f, T(0), T(1),
                              T(2));
}
static const char *peer_add_(bench_case *c) { peer_add(H(0), H(1), P(2), c->td[0].n); return "omp"; }
static const char *peer_mul_(bench_case *c) { peer_mul(H(0), H(1), P(2), c->td[0].n); return "omp"; }
static const char *peer_axpy_(bench_case *c) { peer_axpy(AXPY_ALPHA, H(0), P(1), c->td[0].n); return "omp"; }
static const char *peer_relu_fwd_(bench_case *c) { peer_relu_fwd(H(0), P(1), c->td[0].n); return "omp"; }
static const char *peer_relu_bwd_(bench_case *c) { peer_relu_bwd(H(0), H(1), P(2), c->td[0].n); return "omp"; }
static const char *peer_gelu_fwd_(bench_case *c) { peer_gelu_fwd(H(0), P(1), c->td[0].n); return "omp"; }
static const char *peer_gelu_bwd_(bench_case *c) { peer_gelu_bwd(H(0), H(1), P(2), c->td[0].n); return "omp"; }

/* ---- Optimizers ---------------------------------------------------------- */

static const rumus_sgd_params SGD = {0.01f, 0.9f, 0.0f, 1e-4f, 0};
static const rumus_adam_params ADAMW = {1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f, 1};

/* SGD with momentum and weight decay: read param, grad and the momentum
 * buffer, write param and the buffer; 6 flops. */
N_DESCRIBE(describe_sgd, 6, 5,
           tensor(c, "param", BT_INOUT, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "grad", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "momentum", BT_INOUT, RUMUS_F32, 1, n, 0, 0, 0))
/* AdamW: read param, grad, m and v, write param, m and v; 16 flops
 * (decay 1, m 3, v 4, sqrt, scale, eps, divide, step 2, update 2). */
N_DESCRIBE(describe_adamw, 16, 7,
           tensor(c, "param", BT_INOUT, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "grad", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "m", BT_INOUT, RUMUS_F32, 1, n, 0, 0, 0);
           tensor(c, "v", BT_INOUT, RUMUS_F32, 1, n, 0, 0, 0))
/* Sum of squares into one accumulator: read x; 2 flops. */
N_DESCRIBE(describe_sumsq, 2, 1,
           tensor(c, "x", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "acc", BT_INOUT, RUMUS_F32, 1, 1, 0, 0, 0))

static int run_sgd(bench_case *c) {
  return rumus_sgd_step(c->ctx, &SGD, ++c->step, T(0), T(1), T(2));
}
static int run_adamw(bench_case *c) {
  return rumus_adam_step(c->ctx, &ADAMW, ++c->step, T(0), T(1), T(2), T(3));
}
static int run_sumsq(bench_case *c) { return rumus_sum_squares(c->ctx, T(0), T(1)); }
static const char *peer_sgd_(bench_case *c) {
  peer_sgd(P(0), H(1), P(2), c->td[0].n, SGD.lr, SGD.momentum,
           SGD.weight_decay, ++c->peer_step);
  return "omp";
}
static const char *peer_adamw_(bench_case *c) {
  peer_adamw(P(0), H(1), P(2), P(3), c->td[0].n, ADAMW.lr, ADAMW.beta1,
             ADAMW.beta2, ADAMW.eps, ADAMW.weight_decay, ++c->peer_step);
  return "omp";
}
static const char *peer_sumsq_(bench_case *c) {
  P(1)[0] += peer_sum_squares(H(0), c->td[0].n);
  return "omp";
}

/* ---- Q8 product ---------------------------------------------------------- */

#define Q8_BS 32

/* C = A dequant(B)^T, "MxNxK": A [M, K] F32, B [N, K] int8 with F16
 * scales per 32, C [M, N] F32.  Bytes: those of B (q and scales), which
 * the matrix-vector products (M <= 8) read once and which are all but
 * 4(MK + MN) of the traffic; flops 2MNK. */
static const char *describe_q8(bench_case *c) {
  if (c->shape.ndim != 3 || c->shape.ta || c->shape.tb || c->shape.given)
    return "needs a shape MxNxK";
  size_t m = c->shape.d[0], n = c->shape.d[1], k = c->shape.d[2];
  size_t nb = (k + Q8_BS - 1) / Q8_BS;
  tensor(c, "A", BT_IN, RUMUS_F32, 2, m, k, -1, 1);
  tensor(c, "Bq", BT_IN, RUMUS_I8, 2, n, k, 0, 0);
  tensor(c, "Bscales", BT_IN, RUMUS_F16, 2, n, nb, 0.001f, 0.01f);
  tensor(c, "C", BT_OUT, RUMUS_F32, 2, m, n, 0, 0);
  c->bytes = (double)n * (double)k + 2.0 * (double)n * (double)nb;
  c->flops = 2.0 * (double)m * (double)n * (double)k;
  return NULL;
}
static int run_q8(bench_case *c) {
  return rumus_matmul_q8(c->ctx, T(0), T(1), T(2), Q8_BS, T(3));
}
static const char *peer_q8(bench_case *c) {
  peer_matmul_q8(H(0), (const int8_t *)c->h[1], (const uint16_t *)c->h[2],
                 P(3), c->shape.d[0], c->shape.d[1], c->shape.d[2], Q8_BS);
  return "omp";
}

/* ---- CNN ops: shapes and helpers ---------------------------------------- */

/* The CNN ops' tensors are described 2-D (images x pixels) and given their
 * 4-D NCHW shapes before each call. */
static int shape4(bench_case *c, int i, size_t n, size_t ch, size_t h,
                  size_t w) {
  const size_t s[4] = {n, ch, h, w};
  return rumus_tensor_reshape(T(i), 4, s);
}

/* The last tensor described stays F32 under --dtype (batch norm's
 * per-channel tensors are F32 whatever x's type). */
static void keep_f32(bench_case *c) {
  bench_tdesc *t = &c->td[c->nt - 1];
  t->host_f32 = 0;
  t->dtype = RUMUS_F32;
}

/* NxCxS (square images) or NxCxHxW, without a suffix. */
static const char *nchw_of(const bench_case *c, size_t *n, size_t *ch,
                           size_t *h, size_t *w) {
  const bench_shape *sh = &c->shape;
  if (sh->ndim < 3 || sh->ta || sh->tb || sh->given)
    return "needs a shape NxCxS or NxCxHxW";
  *n = sh->d[0], *ch = sh->d[1], *h = sh->d[2];
  *w = sh->ndim == 4 ? sh->d[3] : sh->d[2];
  return NULL;
}

/* ---- Convolution --------------------------------------------------------- */

/* conv2d on NxCxOCxS[/kKsSpPgG]: x [N, C, S, S], w [OC, C / G, K, K], y
 * [N, OC, OH, OW], kernel K (default 3), stride S (1), zero padding P (K /
 * 2) and groups G (1); the forward adds a bias.  Bytes: x, w and y once
 * (and the bias); flops 2 N OC OH OW (C / G) K^2 for each op.  Writes the
 * values used back into the shape (the JSON's geometry). */
static const char *conv_geom(bench_case *c, peer_conv *q) {
  bench_shape *sh = &c->shape;
  if (sh->ndim != 4 || sh->ta || sh->tb || (sh->given & 16))
    return "needs a shape NxCxOCxS[/kKsSpPgG]";
  q->n = sh->d[0], q->c = sh->d[1], q->oc = sh->d[2];
  q->h = q->w = sh->d[3];
  q->k = sh->k ? sh->k : 3;
  q->s = sh->s ? sh->s : 1;
  q->p = sh->given & 4 ? sh->p : q->k / 2;
  q->g = sh->g ? sh->g : 1;
  if (q->c % q->g || q->oc % q->g) return "groups must divide C and OC";
  if (q->h + 2 * q->p < q->k) return "kernel larger than the padded image";
  q->oh = q->ow = (q->h + 2 * q->p - q->k) / q->s + 1;
  sh->k = q->k, sh->s = q->s, sh->p = q->p, sh->g = q->g, sh->geom = 1;
  return NULL;
}

/* op 0: the forward (y out), 1: the input gradient (x is dx), 2: the
 * weight gradient (w is dw). */
static const char *describe_conv(bench_case *c, int op) {
  peer_conv q = {0};
  const char *why = conv_geom(c, &q);
  if (why) return why;
  const size_t kk = q.k * q.k, cg = q.c / q.g;
  tensor(c, "x", op == 1 ? BT_OUT : BT_IN, RUMUS_F32, 2, q.n * q.c, q.h * q.w,
         -1, 1);
  tensor(c, "w", op == 2 ? BT_OUT : BT_IN, RUMUS_F32, 2, q.oc * cg, kk, -1, 1);
  tensor(c, "y", op == 0 ? BT_OUT : BT_IN, RUMUS_F32, 2, q.n * q.oc,
         q.oh * q.ow, -1, 1);
  tensor(c, "bias", BT_IN, RUMUS_F32, 1, q.oc, 0, -1, 1);
  c->bytes = F4 * ((double)(q.n * q.c) * (double)(q.h * q.w) +
                   (double)(q.n * q.oc) * (double)(q.oh * q.ow) +
                   (double)(q.oc * cg * kk) + (op == 0 ? (double)q.oc : 0.0));
  c->flops = 2.0 * (double)(q.n * q.oc) * (double)(q.oh * q.ow) *
             (double)(cg * kk);
  return NULL;
}
static const char *describe_conv_fwd(bench_case *c) {
  return describe_conv(c, 0);
}
static const char *describe_conv_bwd_data(bench_case *c) {
  return describe_conv(c, 1);
}
static const char *describe_conv_bwd_weight(bench_case *c) {
  return describe_conv(c, 2);
}
static int conv_shape(bench_case *c, rumus_conv2d_params *p, peer_conv *q) {
  conv_geom(c, q);
  const int s = (int)q->s, pad = (int)q->p;
  const rumus_conv2d_params d = {s, s, pad, pad, 1, 1, (int)q->g};
  *p = d;
  int st = shape4(c, 0, q->n, q->c, q->h, q->w);
  if (st == RUMUS_OK) st = shape4(c, 1, q->oc, q->c / q->g, q->k, q->k);
  if (st == RUMUS_OK) st = shape4(c, 2, q->n, q->oc, q->oh, q->ow);
  return st;
}
static int run_conv_fwd(bench_case *c) {
  rumus_conv2d_params p;
  peer_conv q = {0};
  int st = conv_shape(c, &p, &q);
  return st ? st : rumus_conv2d_fwd(c->ctx, &p, T(0), T(1), T(3), T(2));
}
static int run_conv_bwd_data(bench_case *c) {
  rumus_conv2d_params p;
  peer_conv q = {0};
  int st = conv_shape(c, &p, &q);
  return st ? st : rumus_conv2d_bwd_data(c->ctx, &p, T(2), T(1), T(0));
}
static int run_conv_bwd_weight(bench_case *c) {
  rumus_conv2d_params p;
  peer_conv q = {0};
  int st = conv_shape(c, &p, &q);
  return st ? st : rumus_conv2d_bwd_weight(c->ctx, &p, T(0), T(2), T(1));
}
/* im2col + OpenBLAS sgemm (peer.c); none without OpenBLAS. */
#define CONV_PEER "im2col+sgemm"
static const char *peer_conv_fwd(bench_case *c) {
  peer_conv q = {0};
  conv_geom(c, &q);
  return peer_conv2d_fwd(&q, H(0), H(1), H(3), P(2)) ? CONV_PEER : NULL;
}
static const char *peer_conv_bwd_data(bench_case *c) {
  peer_conv q = {0};
  conv_geom(c, &q);
  return peer_conv2d_bwd_data(&q, H(2), H(1), P(0)) ? CONV_PEER : NULL;
}
static const char *peer_conv_bwd_weight(bench_case *c) {
  peer_conv q = {0};
  conv_geom(c, &q);
  return peer_conv2d_bwd_weight(&q, H(0), H(2), P(1)) ? CONV_PEER : NULL;
}

/* ---- Pooling ------------------------------------------------------------- */

typedef struct {
  size_t n, c, h, w, k, s, p, oh, ow;
} pool_geom;

/* Max / avg pooling on NxCxS[/kKsSpP] or NxCxHxW[/...]: square windows K
 * (default 2), stride S (default K), padding P (0), floor mode; adaptive
 * pooling on NxCxS[/oO] or NxCxHxW[/oO] to O x O (default 1). */
static const char *pool_geom_of(bench_case *c, pool_geom *q, int adaptive) {
  bench_shape *sh = &c->shape;
  if (sh->ndim < 3 || sh->ta || sh->tb)
    return adaptive ? "needs a shape NxCxS[xW][/oO]"
                    : "needs a shape NxCxS[xW][/kKsSpP]";
  if (sh->given & (adaptive ? 15 : 24))
    return adaptive ? "takes only the suffix /oO" : "takes no /g or /o";
  q->n = sh->d[0], q->c = sh->d[1], q->h = sh->d[2];
  q->w = sh->ndim == 4 ? sh->d[3] : sh->d[2];
  if (adaptive) {
    q->k = q->s = q->p = 0;
    q->oh = q->ow = sh->o ? sh->o : 1;
    sh->o = q->oh;
  } else {
    q->k = sh->k ? sh->k : 2;
    q->s = sh->s ? sh->s : q->k;
    q->p = sh->p;
    if (2 * q->p > q->k) return "padding over half the kernel";
    if (q->h + 2 * q->p < q->k || q->w + 2 * q->p < q->k)
      return "kernel larger than the padded image";
    q->oh = (q->h + 2 * q->p - q->k) / q->s + 1;
    q->ow = (q->w + 2 * q->p - q->k) / q->s + 1;
    sh->k = q->k, sh->s = q->s;
  }
  sh->geom = 1;
  return NULL;
}

static int pool_shapes(bench_case *c, pool_geom *q, int adaptive, int in,
                       int out, int idx) {
  pool_geom_of(c, q, adaptive);
  int st = shape4(c, in, q->n, q->c, q->h, q->w);
  if (st == RUMUS_OK) st = shape4(c, out, q->n, q->c, q->oh, q->ow);
  if (st == RUMUS_OK && idx >= 0) st = shape4(c, idx, q->n, q->c, q->oh, q->ow);
  return st;
}

static rumus_pool2d_params pool_params(const pool_geom *q) {
  rumus_pool2d_params p = RUMUS_POOL2D_PARAMS(q->k, q->k);
  p.stride_h = p.stride_w = q->s;
  p.padding_h = p.padding_w = q->p;
  return p;
}

/* The flops of a pooling: one per window element (compare or add), the
 * windows clipped to the image; adaptive bins by their sizes. */
static double pool_flops(const pool_geom *q, int adaptive) {
  double rows = 0, cols = 0;
  for (size_t i = 0; i < q->oh; i++) {
    size_t lo, hi;
    if (adaptive) {
      lo = i * q->h / q->oh, hi = ((i + 1) * q->h + q->oh - 1) / q->oh;
    } else {
      long a = (long)(i * q->s) - (long)q->p, b = a + (long)q->k;
      lo = a < 0 ? 0 : (size_t)a, hi = b > (long)q->h ? q->h : (size_t)b;
    }
    rows += (double)(hi - lo);
  }
  for (size_t j = 0; j < q->ow; j++) {
    size_t lo, hi;
    if (adaptive) {
      lo = j * q->w / q->ow, hi = ((j + 1) * q->w + q->ow - 1) / q->ow;
    } else {
      long a = (long)(j * q->s) - (long)q->p, b = a + (long)q->k;
      lo = a < 0 ? 0 : (size_t)a, hi = b > (long)q->w ? q->w : (size_t)b;
    }
    cols += (double)(hi - lo);
  }
  return (double)(q->n * q->c) * rows * cols;
}

/* kind 0: max, 1: avg, 2: adaptive avg; fwd: x in, y out (and the max
 * indices, I32, out); bwd: dy in (and the indices in), dx out.  Bytes:
 * each tensor once, 4 bytes an element (indices included). */
static const char *describe_pool(bench_case *c, int kind, int bwd) {
  pool_geom q = {0};
  const char *why = pool_geom_of(c, &q, kind == 2);
  if (why) return why;
  const size_t planes = q.n * q.c, in = q.h * q.w, out = q.oh * q.ow;
  if (!bwd) {
    tensor(c, "x", BT_IN, RUMUS_F32, 2, planes, in, -1, 1);
    tensor(c, "y", BT_OUT, RUMUS_F32, 2, planes, out, 0, 0);
  } else {
    tensor(c, "dy", BT_IN, RUMUS_F32, 2, planes, out, -1, 1);
    tensor(c, "dx", BT_OUT, RUMUS_F32, 2, planes, in, 0, 0);
  }
  if (kind == 0)
    tensor(c, "indices", bwd ? BT_IN : BT_OUT, RUMUS_I32, 2, planes, out, 0, 1);
  c->bytes = F4 * (double)planes * ((double)in + (kind == 0 ? 2.0 : 1.0) * (double)out);
  c->flops = pool_flops(&q, kind == 2);
  return NULL;
}
static const char *describe_maxpool_fwd(bench_case *c) { return describe_pool(c, 0, 0); }
static const char *describe_maxpool_bwd(bench_case *c) { return describe_pool(c, 0, 1); }
static const char *describe_avgpool_fwd(bench_case *c) { return describe_pool(c, 1, 0); }
static const char *describe_avgpool_bwd(bench_case *c) { return describe_pool(c, 1, 1); }
static const char *describe_adaptive_fwd(bench_case *c) { return describe_pool(c, 2, 0); }
static const char *describe_adaptive_bwd(bench_case *c) { return describe_pool(c, 2, 1); }

static int run_maxpool_fwd(bench_case *c) {
  pool_geom q = {0};
  int st = pool_shapes(c, &q, 0, 0, 1, 2);
  rumus_pool2d_params p = pool_params(&q);
  return st ? st : rumus_maxpool2d_fwd(c->ctx, &p, T(0), T(1), T(2));
}
static int run_maxpool_bwd(bench_case *c) {
  pool_geom q = {0};
  int st = pool_shapes(c, &q, 0, 1, 0, 2);
  rumus_pool2d_params p = pool_params(&q);
  return st ? st : rumus_maxpool2d_bwd(c->ctx, &p, T(0), T(2), T(1));
}
static int run_avgpool_fwd(bench_case *c) {
  pool_geom q = {0};
  int st = pool_shapes(c, &q, 0, 0, 1, -1);
  rumus_pool2d_params p = pool_params(&q);
  return st ? st : rumus_avgpool2d_fwd(c->ctx, &p, T(0), T(1));
}
static int run_avgpool_bwd(bench_case *c) {
  pool_geom q = {0};
  int st = pool_shapes(c, &q, 0, 1, 0, -1);
  rumus_pool2d_params p = pool_params(&q);
  return st ? st : rumus_avgpool2d_bwd(c->ctx, &p, T(0), T(1));
}
static int run_adaptive_fwd(bench_case *c) {
  pool_geom q = {0};
  int st = pool_shapes(c, &q, 1, 0, 1, -1);
  return st ? st : rumus_adaptive_avgpool2d_fwd(c->ctx, T(0), T(1));
}
static int run_adaptive_bwd(bench_case *c) {
  pool_geom q = {0};
  int st = pool_shapes(c, &q, 1, 1, 0, -1);
  return st ? st : rumus_adaptive_avgpool2d_bwd(c->ctx, T(0), T(1));
}

static const char *peer_maxpool_fwd(bench_case *c) {
  pool_geom q = {0};
  pool_geom_of(c, &q, 0);
  peer_maxpool2d_fwd(H(0), P(1), (int32_t *)c->p[2], q.n * q.c, q.h, q.w, q.k,
                     q.s, q.p);
  return "omp";
}
static const char *peer_maxpool_bwd(bench_case *c) {
  pool_geom q = {0};
  pool_geom_of(c, &q, 0);
  peer_maxpool2d_bwd(H(0), (const int32_t *)c->h[2], P(1), q.n * q.c, q.h,
                     q.w, q.oh, q.ow);
  return "omp";
}
/* The backward's indices: those of the forward on random values (each one
 * an element of its window, ties as the forward breaks them). */
static void prepare_maxpool_bwd(bench_case *c) {
  pool_geom q = {0};
  pool_geom_of(c, &q, 0);
  const size_t nx = q.n * q.c * q.h * q.w, ny = q.n * q.c * q.oh * q.ow;
  float *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
  if (x && y) {
    uint64_t s = 0x853c49e6748fea9bull;
    for (size_t i = 0; i < nx; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x[i] = (float)(s >> 40);
    }
    peer_maxpool2d_fwd(x, y, (int32_t *)c->h[2], q.n * q.c, q.h, q.w, q.k,
                       q.s, q.p);
  }
  free(x);
  free(y);
}
static const char *peer_avgpool_fwd(bench_case *c) {
  pool_geom q = {0};
  pool_geom_of(c, &q, 0);
  peer_avgpool2d_fwd(H(0), P(1), q.n * q.c, q.h, q.w, q.k, q.s, q.p);
  return "omp";
}
static const char *peer_avgpool_bwd(bench_case *c) {
  pool_geom q = {0};
  pool_geom_of(c, &q, 0);
  peer_avgpool2d_bwd(H(0), P(1), q.n * q.c, q.h, q.w, q.k, q.s, q.p);
  return "omp";
}
static const char *peer_adaptive_fwd(bench_case *c) {
  pool_geom q = {0};
  pool_geom_of(c, &q, 1);
  peer_adaptive_avgpool2d_fwd(H(0), P(1), q.n * q.c, q.h, q.w, q.oh, q.ow);
  return "omp";
}
static const char *peer_adaptive_bwd(bench_case *c) {
  pool_geom q = {0};
  pool_geom_of(c, &q, 1);
  peer_adaptive_avgpool2d_bwd(H(0), P(1), q.n * q.c, q.h, q.w, q.oh, q.ow);
  return "omp";
}

/* ---- Batch norm and channel bias ----------------------------------------- */

static const rumus_batchnorm_params BN = RUMUS_BATCHNORM_DEFAULTS;

/* Training forward: read x, write y (4(2 M C) bytes: the statistics' extra
 * passes over x are not compulsory) and the per-channel tensors (gamma,
 * beta read, running statistics read and written, saved statistics
 * written: 8C); flops per element: mean 1, variance 3, y 2. */
static const char *describe_bn_fwd(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  const char *why = nchw_of(c, &n, &ch, &h, &w);
  if (why) return why;
  tensor(c, "x", BT_IN, RUMUS_F32, 2, n * ch, h * w, -1, 3);
  tensor(c, "gamma", BT_IN, RUMUS_F32, 1, ch, 0, 0.5f, 1.5f), keep_f32(c);
  tensor(c, "beta", BT_IN, RUMUS_F32, 1, ch, 0, -0.5f, 0.5f), keep_f32(c);
  tensor(c, "running_mean", BT_INOUT, RUMUS_F32, 1, ch, 0, -0.5f, 0.5f), keep_f32(c);
  tensor(c, "running_var", BT_INOUT, RUMUS_F32, 1, ch, 0, 0.5f, 1.5f), keep_f32(c);
  tensor(c, "y", BT_OUT, RUMUS_F32, 2, n * ch, h * w, 0, 0);
  tensor(c, "save_mean", BT_OUT, RUMUS_F32, 1, ch, 0, 0, 0), keep_f32(c);
  tensor(c, "save_invstd", BT_OUT, RUMUS_F32, 1, ch, 0, 0, 0), keep_f32(c);
  const double m = (double)(n * h * w);
  c->bytes = F4 * (2.0 * m * (double)ch + 8.0 * (double)ch);
  c->flops = 6.0 * m * (double)ch;
  return NULL;
}
/* Backward: read dy and x, write dx (4(3 M C)), gamma and the saved
 * statistics read, dgamma and dbeta written (5C); flops per element:
 * dbeta 1, xhat 2, dgamma 2, dx 5. */
static const char *describe_bn_bwd(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  const char *why = nchw_of(c, &n, &ch, &h, &w);
  if (why) return why;
  tensor(c, "dy", BT_IN, RUMUS_F32, 2, n * ch, h * w, -1, 1);
  tensor(c, "x", BT_IN, RUMUS_F32, 2, n * ch, h * w, -1, 3);
  tensor(c, "gamma", BT_IN, RUMUS_F32, 1, ch, 0, 0.5f, 1.5f), keep_f32(c);
  tensor(c, "save_mean", BT_IN, RUMUS_F32, 1, ch, 0, 0.9f, 1.1f), keep_f32(c);
  tensor(c, "save_invstd", BT_IN, RUMUS_F32, 1, ch, 0, 0.8f, 0.95f), keep_f32(c);
  tensor(c, "dx", BT_OUT, RUMUS_F32, 2, n * ch, h * w, 0, 0);
  tensor(c, "dgamma", BT_OUT, RUMUS_F32, 1, ch, 0, 0, 0), keep_f32(c);
  tensor(c, "dbeta", BT_OUT, RUMUS_F32, 1, ch, 0, 0, 0), keep_f32(c);
  const double m = (double)(n * h * w);
  c->bytes = F4 * (3.0 * m * (double)ch + 5.0 * (double)ch);
  c->flops = 10.0 * m * (double)ch;
  return NULL;
}
static int nchw_shapes(bench_case *c, int a, int b) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  nchw_of(c, &n, &ch, &h, &w);
  int st = shape4(c, a, n, ch, h, w);
  return st == RUMUS_OK && b >= 0 ? shape4(c, b, n, ch, h, w) : st;
}
static int run_bn_fwd(bench_case *c) {
  int st = nchw_shapes(c, 0, 5);
  return st ? st
            : rumus_batchnorm2d_fwd_train(c->ctx, &BN, T(0), T(1), T(2), T(3),
                                          T(4), T(5), T(6), T(7));
}
static int run_bn_bwd(bench_case *c) {
  int st = nchw_shapes(c, 0, 1);
  if (st == RUMUS_OK) st = nchw_shapes(c, 5, -1);
  return st ? st
            : rumus_batchnorm2d_bwd(c->ctx, T(0), T(1), T(2), T(3), T(4), T(5),
                                    T(6), T(7));
}
static const char *peer_bn_fwd(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  nchw_of(c, &n, &ch, &h, &w);
  peer_batchnorm2d_fwd(H(0), H(1), H(2), P(3), P(4), P(5), P(6), P(7), n, ch,
                       h * w, BN.eps, BN.momentum);
  return "omp";
}
static const char *peer_bn_bwd(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  nchw_of(c, &n, &ch, &h, &w);
  peer_batchnorm2d_bwd(H(0), H(1), H(2), H(3), H(4), P(5), P(6), P(7), n, ch,
                       h * w);
  return "omp";
}

/* Channel bias add: read x, write y, read b (4(2 N C HW + C)), 1 flop an
 * element; gradient: read dy, write db (4(N C HW + C)), 1 flop. */
static const char *describe_cbias_add(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  const char *why = nchw_of(c, &n, &ch, &h, &w);
  if (why) return why;
  tensor(c, "x", BT_IN, RUMUS_F32, 2, n * ch, h * w, -1, 1);
  tensor(c, "b", BT_IN, RUMUS_F32, 1, ch, 0, -1, 1);
  tensor(c, "y", BT_OUT, RUMUS_F32, 2, n * ch, h * w, 0, 0);
  const double e = (double)(n * ch) * (double)(h * w);
  c->bytes = F4 * (2.0 * e + (double)ch);
  c->flops = e;
  return NULL;
}
static const char *describe_cbias_grad(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  const char *why = nchw_of(c, &n, &ch, &h, &w);
  if (why) return why;
  tensor(c, "dy", BT_IN, RUMUS_F32, 2, n * ch, h * w, -1, 1);
  tensor(c, "db", BT_OUT, RUMUS_F32, 1, ch, 0, 0, 0);
  const double e = (double)(n * ch) * (double)(h * w);
  c->bytes = F4 * (e + (double)ch);
  c->flops = e;
  return NULL;
}
static int run_cbias_add(bench_case *c) {
  int st = nchw_shapes(c, 0, 2);
  return st ? st : rumus_channel_bias_add(c->ctx, T(0), T(1), T(2));
}
static int run_cbias_grad(bench_case *c) {
  int st = nchw_shapes(c, 0, -1);
  return st ? st : rumus_channel_bias_grad(c->ctx, T(0), T(1));
}
static const char *peer_cbias_add(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  nchw_of(c, &n, &ch, &h, &w);
  peer_channel_bias_add(H(0), H(1), P(2), n, ch, h * w);
  return "omp";
}
static const char *peer_cbias_grad(bench_case *c) {
  size_t n = 0, ch = 0, h = 0, w = 0;
  nchw_of(c, &n, &ch, &h, &w);
  peer_channel_bias_grad(H(0), P(1), n, ch, h * w);
  return "omp";
}

/* ---- Dropout ------------------------------------------------------------- */

#define DROP_P 0.5f
#define DROP_SEED 0x0123456789abcdefull
#define DROP_OFFSET 42u

/* Forward or backward (the same map): read x, write y; 1 flop an element
 * (the scale; the Philox rounds, 40 integer multiplies a group of 4, are
 * not counted). */
N_DESCRIBE(describe_dropout, 1, 2,
           tensor(c, "x", BT_IN, RUMUS_F32, 1, n, 0, -1, 1);
           tensor(c, "y", BT_OUT, RUMUS_F32, 1, n, 0, 0, 0))
static int run_dropout_fwd(bench_case *c) {
  return rumus_dropout_fwd(c->ctx, DROP_P, DROP_SEED, DROP_OFFSET, T(0), T(1));
}
static int run_dropout_bwd(bench_case *c) {
  return rumus_dropout_bwd(c->ctx, DROP_P, DROP_SEED, DROP_OFFSET, T(0), T(1));
}
static const char *peer_dropout_(bench_case *c) {
  peer_dropout(H(0), P(1), c->td[0].n, DROP_P, DROP_SEED, DROP_OFFSET);
  return "omp";
}

/* Rows of 768 and 1024 (transformer widths), 32 and 16384 (the issue's
 * range); the GPU's extra case is 512 MiB. */
#define NORM_DEFAULT "4096x32,4096x768,65536x1024,2048x16384"
#define NORM_GPU "8192x16384"
/* A character model's table (65 rows), a word-piece table of 32000. */
#define EMBED_DEFAULT "65536x65x384,16384x32000x512"
#define EMBED_GPU "131072x50257x768"

/* ---- Casts --------------------------------------------------------------- */

/* A tensor of a fixed storage type whatever --dtype says; its host copies
 * are floats (converted on upload and download) unless it is F32. */
static void fixed_tensor(bench_case *c, const char *name, int role,
                         rumus_dtype dt, size_t n) {
  tensor(c, name, role, RUMUS_F32, 1, n, 0, -3, 3);
  bench_tdesc *t = &c->td[c->nt - 1];
  t->host_f32 = dt != RUMUS_F32;
  t->dtype = dt;
}
/* src -> dst over N elements: bytes (size(src) + size(dst)) N. */
static const char *describe_cast(bench_case *c, rumus_dtype from,
                                 rumus_dtype to) {
  if (c->shape.ndim != 1 || c->shape.given) return "needs a shape N";
  const size_t n = c->shape.d[0];
  fixed_tensor(c, "src", BT_IN, from, n);
  fixed_tensor(c, "dst", BT_OUT, to, n);
  c->bytes = (double)(rumus_dtype_size(from) + rumus_dtype_size(to)) * (double)n;
  c->flops = 0;
  return NULL;
}
static const char *describe_cast_f32_f16(bench_case *c) {
  return describe_cast(c, RUMUS_F32, RUMUS_F16);
}
static const char *describe_cast_f16_f32(bench_case *c) {
  return describe_cast(c, RUMUS_F16, RUMUS_F32);
}
static const char *describe_cast_f32_bf16(bench_case *c) {
  return describe_cast(c, RUMUS_F32, RUMUS_BF16);
}
static const char *describe_cast_bf16_f32(bench_case *c) {
  return describe_cast(c, RUMUS_BF16, RUMUS_F32);
}
static int run_cast(bench_case *c) { return rumus_cast(c->ctx, T(0), T(1)); }
/* The host conversion of rumus.h's rule, to the values dst holds. */
static const char *peer_cast(bench_case *c) {
  const rumus_dtype to = c->td[1].dtype;
  const size_t n = c->td[0].n;
  const float *src = H(0);
  float *dst = P(1);
  for (size_t i = 0; i < n; i++)
    dst[i] = to == RUMUS_F16    ? rumus_f16_to_f32(rumus_f32_to_f16(src[i]))
             : to == RUMUS_BF16 ? rumus_bf16_to_f32(rumus_f32_to_bf16(src[i]))
                                : src[i];
  return "serial";
}

/* ---- Layer norm and RMS norm --------------------------------------------- */

/* Forward: read x (and gamma, beta), write y and the F32 row statistics:
 * bytes 4(2RC + 2C + 2R) (RMS norm: 4(2RC + C + R)); per element: mean 1,
 * variance 3, y 3 (RMS norm: 2 + 2). */
static const char *describe_norm_fwd(bench_case *c, int rms) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "x", BT_IN, RUMUS_F32, 2, r, k, -1, 3);
  tensor(c, "gamma", BT_IN, RUMUS_F32, 1, k, 0, 0.5f, 1.5f);
  if (!rms) tensor(c, "beta", BT_IN, RUMUS_F32, 1, k, 0, -0.5f, 0.5f);
  tensor(c, "y", BT_OUT, RUMUS_F32, 2, r, k, 0, 0);
  if (!rms) tensor(c, "mean", BT_OUT, RUMUS_F32, 1, r, 0, 0, 0), keep_f32(c);
  tensor(c, "rstd", BT_OUT, RUMUS_F32, 1, r, 0, 0, 0), keep_f32(c);
  const double rk = (double)r * (double)k, stats = rms ? 1.0 : 2.0;
  c->bytes = F4 * (2.0 * rk + stats * ((double)k + (double)r));
  c->flops = (rms ? 4.0 : 7.0) * rk;
  return NULL;
}
/* Backward: read dy and x (and gamma, the statistics), write dx, dgamma
 * (and dbeta): bytes 4(3RC + 3C + 2R) (RMS norm: 4(3RC + 2C + R)); per
 * element: the two row sums 4, dx 5, dgamma 3, dbeta 1. */
static const char *describe_norm_bwd(bench_case *c, int rms) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "dy", BT_IN, RUMUS_F32, 2, r, k, -1, 1);
  tensor(c, "x", BT_IN, RUMUS_F32, 2, r, k, -1, 3);
  tensor(c, "gamma", BT_IN, RUMUS_F32, 1, k, 0, 0.5f, 1.5f);
  if (!rms) tensor(c, "mean", BT_IN, RUMUS_F32, 1, r, 0, 0.9f, 1.1f), keep_f32(c);
  tensor(c, "rstd", BT_IN, RUMUS_F32, 1, r, 0, 0.8f, 1.2f), keep_f32(c);
  tensor(c, "dx", BT_OUT, RUMUS_F32, 2, r, k, 0, 0);
  tensor(c, "dgamma", BT_OUT, RUMUS_F32, 1, k, 0, 0, 0);
  if (!rms) tensor(c, "dbeta", BT_OUT, RUMUS_F32, 1, k, 0, 0, 0);
  const double rk = (double)r * (double)k;
  c->bytes = F4 * (3.0 * rk + (rms ? 2.0 : 3.0) * (double)k +
                   (rms ? 1.0 : 2.0) * (double)r);
  c->flops = (rms ? 11.0 : 13.0) * rk;
  return NULL;
}
static const char *describe_ln_fwd(bench_case *c) { return describe_norm_fwd(c, 0); }
static const char *describe_rms_fwd(bench_case *c) { return describe_norm_fwd(c, 1); }
static const char *describe_ln_bwd(bench_case *c) { return describe_norm_bwd(c, 0); }
static const char *describe_rms_bwd(bench_case *c) { return describe_norm_bwd(c, 1); }
static int run_ln_fwd(bench_case *c) {
  return rumus_layernorm_fwd(c->ctx, NULL, T(0), T(1), T(2), T(3), T(4), T(5));
}
static int run_rms_fwd(bench_case *c) {
  return rumus_rmsnorm_fwd(c->ctx, NULL, T(0), T(1), T(2), T(3));
}
static int run_ln_bwd(bench_case *c) {
  return rumus_layernorm_bwd(c->ctx, T(0), T(1), T(2), T(3), T(4), T(5), T(6),
                             T(7));
}
static int run_rms_bwd(bench_case *c) {
  return rumus_rmsnorm_bwd(c->ctx, T(0), T(1), T(2), T(3), T(4), T(5));
}
static const char *peer_ln_fwd(bench_case *c) {
  const rumus_layernorm_params d = RUMUS_LAYERNORM_DEFAULTS;
  peer_layernorm_fwd(H(0), H(1), H(2), P(3), P(4), P(5), c->td[0].shape[0],
                     c->td[0].shape[1], d.eps, 0);
  return "omp";
}
static const char *peer_rms_fwd(bench_case *c) {
  const rumus_layernorm_params d = RUMUS_LAYERNORM_DEFAULTS;
  peer_layernorm_fwd(H(0), H(1), NULL, P(2), NULL, P(3), c->td[0].shape[0],
                     c->td[0].shape[1], d.eps, 1);
  return "omp";
}
static const char *peer_ln_bwd(bench_case *c) {
  peer_layernorm_bwd(H(0), H(1), H(2), H(3), H(4), P(5), P(6), P(7),
                     c->td[0].shape[0], c->td[0].shape[1], 0);
  return "omp";
}
static const char *peer_rms_bwd(bench_case *c) {
  peer_layernorm_bwd(H(0), H(1), H(2), NULL, H(3), P(4), P(5), NULL,
                     c->td[0].shape[0], c->td[0].shape[1], 1);
  return "omp";
}

/* ---- Embedding ------------------------------------------------------------ */

/* PxVxD: P positions, a table of V rows of D.  The ids are skewed (id =
 * floor(V u^4) for uniform u: a quarter of the positions name the first
 * V/256 rows), as a language's tokens are, which is what makes a
 * backward that serialises on repeated ids slow.  Forward: read P rows of
 * the table, write out: bytes 4(2PD + P).  Backward: read dout, write the
 * whole table's gradient: bytes 4(PD + VD + P), flops PD. */
static const char *embed_dims(const bench_case *c, size_t *p, size_t *v,
                              size_t *d) {
  if (c->shape.ndim != 3 || c->shape.ta || c->shape.tb || c->shape.given)
    return "needs a shape PxVxD";
  *p = c->shape.d[0];
  *v = c->shape.d[1];
  *d = c->shape.d[2];
  return *v > INT32_MAX ? "V over INT32_MAX" : NULL;
}
static const char *describe_embed_fwd(bench_case *c) {
  size_t p, v, d;
  const char *why = embed_dims(c, &p, &v, &d);
  if (why) return why;
  tensor(c, "weight", BT_IN, RUMUS_F32, 2, v, d, -1, 1);
  tensor(c, "ids", BT_IN, RUMUS_I32, 1, p, 0, 0, (float)v);
  tensor(c, "out", BT_OUT, RUMUS_F32, 2, p, d, 0, 0);
  c->bytes = F4 * (2.0 * (double)p * (double)d + (double)p);
  c->flops = 0;
  return NULL;
}
static const char *describe_embed_bwd(bench_case *c) {
  size_t p, v, d;
  const char *why = embed_dims(c, &p, &v, &d);
  if (why) return why;
  tensor(c, "dout", BT_IN, RUMUS_F32, 2, p, d, -1, 1);
  tensor(c, "ids", BT_IN, RUMUS_I32, 1, p, 0, 0, (float)v);
  tensor(c, "dweight", BT_OUT, RUMUS_F32, 2, v, d, 0, 0);
  c->bytes = F4 * ((double)p * (double)d + (double)v * (double)d + (double)p);
  c->flops = (double)p * (double)d;
  return NULL;
}
static void prepare_embed(bench_case *c) {
  int32_t *ids = (int32_t *)c->h[1];
  const double v = (double)c->shape.d[1];
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < c->td[1].n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(s >> 11) / 9007199254740992.0, u2 = u * u;
    const double id = floor(v * u2 * u2);
    ids[i] = (int32_t)(id < v ? id : v - 1);
  }
}
static int run_embed_fwd(bench_case *c) {
  return rumus_embedding_fwd(c->ctx, T(0), T(1), -1, T(2));
}
static int run_embed_bwd(bench_case *c) {
  return rumus_embedding_bwd(c->ctx, T(0), T(1), -1, T(2));
}
static const char *peer_embed_fwd(bench_case *c) {
  peer_embedding_fwd(H(0), (const int32_t *)c->h[1], P(2), c->shape.d[0],
                     c->shape.d[2]);
  return "omp";
}
static const char *peer_embed_bwd(bench_case *c) {
  peer_embedding_bwd(H(0), (const int32_t *)c->h[1], P(2), c->shape.d[0],
                     c->shape.d[1], c->shape.d[2]);
  return "omp";
}

/* ---- Permute, broadcasting, sums over axes ------------------------------ */

/* permute_0213: [B, T, H, D] -> [B, H, T, D] (the head split; the merge is
 * the same permutation of [B, H, T, D]); transpose: [R, C] -> [C, R].
 * Read x, write y: bytes 4(2N). */
static const char *describe_permute(bench_case *c) {
  if (c->shape.ndim != 4 || c->shape.ta || c->shape.tb)
    return "needs a shape BxTxHxD";
  const size_t *d = c->shape.d;
  tensor(c, "x", BT_IN, RUMUS_F32, 2, d[0] * d[1], d[2] * d[3], -1, 1);
  tensor(c, "y", BT_OUT, RUMUS_F32, 2, d[0] * d[2], d[1] * d[3], 0, 0);
  c->bytes = F4 * 2.0 * (double)numel(c);
  c->flops = 0;
  return NULL;
}
static int run_permute(bench_case *c) {
  static const int perm[4] = {0, 2, 1, 3};
  const size_t *d = c->shape.d;
  const size_t xs[4] = {d[0], d[1], d[2], d[3]},
               ys[4] = {d[0], d[2], d[1], d[3]};
  int st = rumus_tensor_reshape(T(0), 4, xs);
  if (st == RUMUS_OK) st = rumus_tensor_reshape(T(1), 4, ys);
  return st ? st : rumus_permute(c->ctx, T(0), perm, T(1));
}
static const char *peer_permute(bench_case *c) {
  const size_t B = c->shape.d[0], Tn = c->shape.d[1], Hn = c->shape.d[2],
               D = c->shape.d[3];
  for (size_t b = 0; b < B; b++)
    for (size_t h = 0; h < Hn; h++)
      for (size_t t = 0; t < Tn; t++)
        memcpy(P(1) + ((b * Hn + h) * Tn + t) * D,
               H(0) + ((b * Tn + t) * Hn + h) * D, D * sizeof(float));
  return "serial";
}
static const char *describe_transpose(bench_case *c) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "x", BT_IN, RUMUS_F32, 2, r, k, -1, 1);
  tensor(c, "y", BT_OUT, RUMUS_F32, 2, k, r, 0, 0);
  c->bytes = F4 * 2.0 * (double)r * (double)k;
  c->flops = 0;
  return NULL;
}
static int run_transpose(bench_case *c) {
  static const int perm[2] = {1, 0};
  return rumus_permute(c->ctx, T(0), perm, T(1));
}
static const char *peer_transpose(bench_case *c) {
  const size_t r = c->td[0].shape[0], k = c->td[0].shape[1];
  for (size_t i = 0; i < r; i++)
    for (size_t j = 0; j < k; j++) P(1)[j * r + i] = H(0)[i * k + j];
  return "serial";
}
/* broadcast_add: out[R, C] = a[R, C] + b[C]: bytes 4(2RC + C), flops RC. */
static const char *describe_bcast_add(bench_case *c) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "a", BT_IN, RUMUS_F32, 2, r, k, -1, 1);
  tensor(c, "b", BT_IN, RUMUS_F32, 1, k, 0, -1, 1);
  tensor(c, "out", BT_OUT, RUMUS_F32, 2, r, k, 0, 0);
  c->bytes = F4 * (2.0 * (double)r * (double)k + (double)k);
  c->flops = (double)r * (double)k;
  return NULL;
}
static int run_bcast_add(bench_case *c) {
  return rumus_broadcast_add(c->ctx, T(0), T(1), T(2));
}
static const char *peer_bcast_add(bench_case *c) {
  const size_t r = c->td[0].shape[0], k = c->td[0].shape[1];
  for (size_t i = 0; i < r; i++)
    for (size_t j = 0; j < k; j++)
      P(2)[i * k + j] = H(0)[i * k + j] + H(1)[j];
  return "serial";
}
/* reduce_sum0: y[C] = sum over rows of x[R, C]; reduce_sum1: y[R] = sum
 * over columns.  Bytes 4(RC + |y|), flops RC. */
static const char *describe_reduce(bench_case *c, int axis) {
  size_t r, k;
  const char *why = rows_cols(c, &r, &k);
  if (why) return why;
  tensor(c, "x", BT_IN, RUMUS_F32, 2, r, k, -1, 1);
  tensor(c, "y", BT_OUT, RUMUS_F32, 1, axis ? r : k, 0, 0, 0);
  c->bytes = F4 * ((double)r * (double)k + (double)(axis ? r : k));
  c->flops = (double)r * (double)k;
  return NULL;
}
static const char *describe_reduce0(bench_case *c) {
  return describe_reduce(c, 0);
}
static const char *describe_reduce1(bench_case *c) {
  return describe_reduce(c, 1);
}
static int run_reduce0(bench_case *c) {
  return rumus_reduce_sum(c->ctx, T(0), 1u, 0, T(1));
}
static int run_reduce1(bench_case *c) {
  return rumus_reduce_sum(c->ctx, T(0), 2u, 0, T(1));
}
static const char *peer_reduce1(bench_case *c) {
  const size_t r = c->td[0].shape[0], k = c->td[0].shape[1];
  for (size_t i = 0; i < r; i++) {
    double a = 0.0;
    for (size_t j = 0; j < k; j++) a += H(0)[i * k + j];
    P(1)[i] = (float)a;
  }
  return "serial";
}

/* ---- The table ----------------------------------------------------------- */

#define ROWS_DEFAULT "128x10,1024x1024,4096x4096,65536x1024"
#define N_DEFAULT "65536,1048576,16777216,67108864"
#define GEMM_DEFAULT                                                          \
  "256x256x256,512x512x512,1024x1024x1024,2048x2048x2048,"                    \
  "128x256x784:nt,256x784x128:tn,"                                            \
  "128x128x256:nt,128x256x128:nn,128x256x128:tn,"                             \
  "128x10x128:nt,128x128x10:nn,10x128x128:tn"

/* conv2d, on a CPU: the CNN layer of issue 11 (64 images, 32 -> 64
 * channels, 14 x 14) and a first layer (1 -> 32 channels, 28 x 28), then
 * the ResNet shapes at 8 images; on a GPU the shapes at 64
 * images as well: 3x3 layers of 64, 128 and 256 channels at 56, 28 and 14
 * pixels, the 7x7 stride-2 stem on 224 x 224, and a depthwise 3x3 layer of
 * 256 channels at 28 x 28. */
#define CONV_DEFAULT                                                          \
  "64x32x64x14,64x1x32x28,8x64x64x56,8x128x128x28,8x256x256x14,"              \
  "8x3x64x224/k7s2p3,8x256x256x28/g256"
#define CONV_GPU                                                              \
  "64x64x64x56,64x128x128x28,64x256x256x14,64x3x64x224/k7s2p3,"               \
  "64x256x256x28/g256"
#define CONV_MODEL                                                            \
  "NxCxOCxS[/kKsSpPgG] (defaults k3 s1 p K/2 g1): bytes 4(NCS^2 + N OC "      \
  "OH OW + OC C K^2 / G), flops 2 N OC OH OW C K^2 / G"
/* Pooling: ResNet's stem max pool (3x3, stride 2, padding 1 on 112 x 112),
 * 2x2 pools, global average pools (/o1) and a 28 -> 7 adaptive one. */
#define POOL_SHAPES "NxCxS[xW][/kKsSpP] (k2, s = k, p0)"
#define MAXPOOL_DEFAULT "64x32x28,8x64x112/k3s2p1,32x64x112/k3s2p1"
#define MAXPOOL_GPU "64x64x112/k3s2p1,64x256x56"
#define AVGPOOL_DEFAULT "64x32x28,64x64x14/k3s1p1,32x256x56"
#define AVGPOOL_GPU "64x256x56,64x512x14/k3s1p1"
#define ADAPTIVE_DEFAULT "64x512x7/o1,32x256x28/o7,32x256x56/o1"
#define ADAPTIVE_GPU "256x2048x7/o1,64x512x28/o7"
/* ---- Attention ------------------------------------------------------------ */

/* attention_fwd[_causal] and attention_fwd_bwd[_causal] on BxHxTxD (Tq =
 * Tk = T, scale 1/sqrt(D), no mask).  Flops as FlashAttention's benchmark
 * counts them: the forward's two products, 4 B H T^2 D, halved when
 * causal; the backward 2.5 times that (five products), so fwd_bwd 3.5
 * times.  Bytes: q, k, v read and out written once (and lse), the
 * backward dout, out, lse read and dq, dk, dv written. */
static int att_causal(const bench_case *c) {
  return strstr(c->op->name, "causal") != NULL;
}
static int att_bwd(const bench_case *c) {
  return strstr(c->op->name, "bwd") != NULL;
}
static const char *describe_attention(bench_case *c) {
  if (c->shape.ndim != 4 || c->shape.ta || c->shape.tb || c->shape.given)
    return "needs a shape BxHxTxD";
  const size_t *d = c->shape.d, rows = d[0] * d[1] * d[2];
  if (d[3] > RUMUS_ATTENTION_MAX_D) return "D above RUMUS_ATTENTION_MAX_D";
  tensor(c, "q", BT_IN, RUMUS_F32, 2, rows, d[3], -2, 2);
  tensor(c, "k", BT_IN, RUMUS_F32, 2, rows, d[3], -2, 2);
  tensor(c, "v", BT_IN, RUMUS_F32, 2, rows, d[3], -1, 1);
  tensor(c, "out", BT_OUT, RUMUS_F32, 2, rows, d[3], 0, 0);
  tensor(c, "lse", BT_OUT, RUMUS_F32, 1, rows, 0, 0, 0);
  c->td[4].host_f32 = 0; /* F32 whatever --dtype */
  c->td[4].dtype = RUMUS_F32;
  const double n = (double)rows * (double)d[3];
  double f = 4.0 * (double)rows * (double)d[2] * (double)d[3];
  if (att_causal(c)) f /= 2;
  c->bytes = F4 * 4 * n + 4.0 * (double)rows;
  c->flops = f;
  if (att_bwd(c)) {
    tensor(c, "dout", BT_IN, RUMUS_F32, 2, rows, d[3], -1, 1);
    tensor(c, "dq", BT_OUT, RUMUS_F32, 2, rows, d[3], 0, 0);
    tensor(c, "dk", BT_OUT, RUMUS_F32, 2, rows, d[3], 0, 0);
    tensor(c, "dv", BT_OUT, RUMUS_F32, 2, rows, d[3], 0, 0);
    c->bytes += F4 * 8 * n + 4.0 * (double)rows;
    c->flops = 3.5 * f;
  }
  return NULL;
}
static int run_attention(bench_case *c) {
  const size_t *d = c->shape.d;
  const size_t s4[4] = {d[0], d[1], d[2], d[3]}, s3[3] = {d[0], d[1], d[2]};
  int st = RUMUS_OK;
  for (int i = 0; i < c->nt && st == RUMUS_OK; i++)
    st = i == 4 ? rumus_tensor_reshape(T(i), 3, s3)
                : rumus_tensor_reshape(T(i), 4, s4);
  const rumus_attention_params p = {0.0f, att_causal(c)};
  if (st == RUMUS_OK)
    st = rumus_attention_fwd(c->ctx, &p, T(0), T(1), T(2), NULL, T(3), T(4));
  if (st == RUMUS_OK && att_bwd(c))
    st = rumus_attention_bwd(c->ctx, &p, T(0), T(1), T(2), NULL, T(3), T(4),
                             T(5), T(6), T(7), T(8));
  return st;
}
static const char *peer_attention(bench_case *c) {
  const size_t *d = c->shape.d, bh = d[0] * d[1];
  const float scale = (float)(1.0 / sqrt((double)d[3]));
  peer_attention_fwd(H(0), H(1), H(2), P(3), P(4), bh, d[2], d[2], d[3],
                     scale, att_causal(c));
  if (att_bwd(c))
    peer_attention_bwd(H(0), H(1), H(2), P(3), P(4), H(5), P(6), P(7), P(8),
                       bh, d[2], d[2], d[3], scale, att_causal(c));
  return "omp";
}

#define ATT_DEFAULT "1x4x256x64,2x8x512x64"
#define ATT_GPU "8x16x512x64,8x16x1024x64,8x16x4096x64"
#define ATT_MODEL(what)                                                      \
  "BxHxTxD, Tq = Tk = T, " what ": flops 4BHT^2D (halved when causal; "      \
  "fwd_bwd 3.5 times), bytes 4(4BHTD + BHT) (fwd_bwd 4(12BHTD + 2BHT))"

/* Batch norm and the channel bias ops: NxCxS activations. */
#define NCHW_DEFAULT "64x32x14,8x64x56,32x128x56"
#define NCHW_GPU "64x64x112,64x256x56"

const bench_op bench_ops[] = {
    {"xent_fwd_bwd", "xent",
     "128x10,4096x1024,65536x1024,16384x8192,8192x32000", NULL, 1,
     "rumus_cross_entropy with grad, mean: bytes 4(2RC + R + 1), flops 7RC",
     describe_xent, run_xent, peer_xent_, NULL, NULL},
    {"softmax_fwd", "softmax", ROWS_DEFAULT, "8192x32000", 1,
     "bytes 4(2RC), flops 5RC", describe_sm_fwd, run_sm_fwd, peer_sm_fwd, NULL, NULL},
    {"log_softmax_fwd", "softmax", ROWS_DEFAULT, "8192x32000", 1,
     "bytes 4(2RC), flops 5RC", describe_sm_fwd, run_lsm_fwd, peer_lsm_fwd,
     NULL, NULL},
    {"softmax_bwd", "softmax", ROWS_DEFAULT, "8192x32000", 1,
     "bytes 4(3RC), flops 4RC", describe_sm_bwd, run_sm_bwd, peer_sm_bwd, NULL, NULL},
    {"log_softmax_bwd", "softmax", ROWS_DEFAULT, "8192x32000", 1,
     "bytes 4(3RC), flops 4RC", describe_lsm_bwd, run_lsm_bwd, peer_lsm_bwd,
     NULL, NULL},
    {"gemm", "gemm", GEMM_DEFAULT, "4096x4096x4096", 0,
     "MxNxK[:op(A)op(B)], beta 0: bytes 4(MK + KN + MN), flops 2MNK",
     describe_gemm, run_gemm, peer_gemm, check_gemm, NULL},
    {"gemm_bias", "gemm", "1024x1024x1024,16384x1152x384:nt", NULL, 0,
     "MxNxK[:op(A)op(B)], C = op(A) op(B) + bias: bytes 4(MK + KN + MN + N), "
     "flops 2MNK + MN",
     describe_gemm_bias, run_gemm_bias, peer_gemm_bias, check_gemm_bias, NULL},
    {"bias_add", "elementwise", "128x256,1024x1024,4096x4096,65536x1024", NULL,
     1, "y[R,C] += bias[C]: bytes 4(2RC + C), flops RC", describe_bias_add,
     run_bias_add, peer_bias_add_, NULL, NULL},
    {"bias_grad", "elementwise", "128x256,1024x1024,4096x4096,65536x1024",
     NULL, 1, "dbias[C] = sum_r dy[r,C]: bytes 4(RC + C), flops RC",
     describe_bias_grad, run_bias_grad, peer_bias_grad_, NULL, NULL},
    {"add", "elementwise", N_DEFAULT, NULL, 1, "bytes 4(3N), flops N",
     describe_binary, run_add, peer_add_, NULL, NULL},
    {"mul", "elementwise", N_DEFAULT, NULL, 1, "bytes 4(3N), flops N",
     describe_binary, run_mul, peer_mul_, NULL, NULL},
    {"axpy", "elementwise", N_DEFAULT, NULL, 1, "bytes 4(3N), flops 2N",
     describe_axpy, run_axpy, peer_axpy_, NULL, NULL},
    {"relu_fwd", "elementwise", N_DEFAULT, NULL, 1, "bytes 4(2N), flops N",
     describe_relu_fwd, run_relu_fwd, peer_relu_fwd_, NULL, NULL},
    {"relu_bwd", "elementwise", N_DEFAULT, NULL, 1, "bytes 4(3N), flops N",
     describe_relu_bwd, run_relu_bwd, peer_relu_bwd_, NULL, NULL},
    {"gelu_fwd", "elementwise", N_DEFAULT, NULL, 1,
     "GELU (erf): bytes 4(2N), flops 5N", describe_gelu_fwd, run_gelu_fwd,
     peer_gelu_fwd_, NULL, NULL},
    {"gelu_bwd", "elementwise", N_DEFAULT, NULL, 1,
     "GELU (erf): bytes 4(3N), flops 11N", describe_gelu_bwd, run_gelu_bwd,
     peer_gelu_bwd_, NULL, NULL},
    {"sgd_momentum", "optim", N_DEFAULT, NULL, 1,
     "lr 0.01, momentum 0.9, wd 1e-4: bytes 4(5N), flops 6N", describe_sgd,
     run_sgd, peer_sgd_, NULL, NULL},
    {"adamw", "optim", N_DEFAULT, NULL, 1,
     "lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0.01: bytes 4(7N), flops 16N",
     describe_adamw, run_adamw, peer_adamw_, NULL, NULL},
    {"sum_squares", "optim", N_DEFAULT, NULL, 1, "bytes 4N, flops 2N",
     describe_sumsq, run_sumsq, peer_sumsq_, NULL, NULL},
    {"conv2d_fwd", "conv", CONV_DEFAULT, CONV_GPU, 0, CONV_MODEL,
     describe_conv_fwd, run_conv_fwd, peer_conv_fwd, NULL, NULL},
    {"conv2d_bwd_data", "conv", CONV_DEFAULT, CONV_GPU, 0, CONV_MODEL,
     describe_conv_bwd_data, run_conv_bwd_data, peer_conv_bwd_data, NULL, NULL},
    {"conv2d_bwd_weight", "conv", CONV_DEFAULT, CONV_GPU, 0, CONV_MODEL,
     describe_conv_bwd_weight, run_conv_bwd_weight, peer_conv_bwd_weight, NULL,
     NULL},
    {"maxpool2d_fwd", "pool", MAXPOOL_DEFAULT, MAXPOOL_GPU, 1,
     POOL_SHAPES ", PyTorch's defaults otherwise; bytes 4 NC(HW + 2 OH OW) "
     "(y and int32 indices), flops: window elements",
     describe_maxpool_fwd, run_maxpool_fwd, peer_maxpool_fwd, NULL, NULL},
    {"maxpool2d_bwd", "pool", MAXPOOL_DEFAULT, MAXPOOL_GPU, 1,
     POOL_SHAPES ": bytes 4 NC(HW + 2 OH OW) (dy and indices in, dx out)",
     describe_maxpool_bwd, run_maxpool_bwd, peer_maxpool_bwd, NULL,
     prepare_maxpool_bwd},
    {"avgpool2d_fwd", "pool", AVGPOOL_DEFAULT, AVGPOOL_GPU, 1,
     POOL_SHAPES ", count_include_pad: bytes 4 NC(HW + OH OW), flops: window "
     "elements", describe_avgpool_fwd, run_avgpool_fwd, peer_avgpool_fwd, NULL,
     NULL},
    {"avgpool2d_bwd", "pool", AVGPOOL_DEFAULT, AVGPOOL_GPU, 1,
     POOL_SHAPES ": bytes 4 NC(HW + OH OW)", describe_avgpool_bwd,
     run_avgpool_bwd, peer_avgpool_bwd, NULL, NULL},
    {"adaptive_avgpool2d_fwd", "pool", ADAPTIVE_DEFAULT, ADAPTIVE_GPU, 1,
     "NxCxS[xW][/oO], output O x O (default 1): bytes 4 NC(HW + O^2), flops: "
     "bin elements", describe_adaptive_fwd, run_adaptive_fwd, peer_adaptive_fwd,
     NULL, NULL},
    {"adaptive_avgpool2d_bwd", "pool", ADAPTIVE_DEFAULT, ADAPTIVE_GPU, 1,
     "NxCxS[xW][/oO]: bytes 4 NC(HW + O^2)", describe_adaptive_bwd,
     run_adaptive_bwd, peer_adaptive_bwd, NULL, NULL},
    {"batchnorm2d_fwd", "batchnorm", NCHW_DEFAULT, NCHW_GPU, 1,
     "NxCxS[xW], training, affine, running stats: bytes 4(2 NCHW + 8C), "
     "flops 6 NCHW", describe_bn_fwd, run_bn_fwd, peer_bn_fwd, NULL, NULL},
    {"batchnorm2d_bwd", "batchnorm", NCHW_DEFAULT, NCHW_GPU, 1,
     "NxCxS[xW], dx, dgamma, dbeta: bytes 4(3 NCHW + 5C), flops 10 NCHW",
     describe_bn_bwd, run_bn_bwd, peer_bn_bwd, NULL, NULL},
    {"channel_bias_add", "batchnorm", NCHW_DEFAULT, NCHW_GPU, 1,
     "NxCxS[xW], y = x + b[c]: bytes 4(2 NCHW + C), flops NCHW",
     describe_cbias_add, run_cbias_add, peer_cbias_add, NULL, NULL},
    {"channel_bias_grad", "batchnorm", NCHW_DEFAULT, NCHW_GPU, 1,
     "NxCxS[xW], db[c] = sum dy: bytes 4(NCHW + C), flops NCHW",
     describe_cbias_grad, run_cbias_grad, peer_cbias_grad, NULL, NULL},
    {"dropout_fwd", "dropout", N_DEFAULT, NULL, 1,
     "p 0.5, Philox mask: bytes 4(2N), flops N", describe_dropout,
     run_dropout_fwd, peer_dropout_, NULL, NULL},
    {"dropout_bwd", "dropout", N_DEFAULT, NULL, 1,
     "p 0.5, the forward's mask: bytes 4(2N), flops N", describe_dropout,
     run_dropout_bwd, peer_dropout_, NULL, NULL},
    {"cast_f32_f16", "cast", N_DEFAULT, NULL, 1, "bytes 6N",
     describe_cast_f32_f16, run_cast, peer_cast, NULL, NULL},
    {"cast_f16_f32", "cast", N_DEFAULT, NULL, 1, "bytes 6N",
     describe_cast_f16_f32, run_cast, peer_cast, NULL, NULL},
    {"cast_f32_bf16", "cast", N_DEFAULT, NULL, 1, "bytes 6N",
     describe_cast_f32_bf16, run_cast, peer_cast, NULL, NULL},
    {"cast_bf16_f32", "cast", N_DEFAULT, NULL, 1, "bytes 6N",
     describe_cast_bf16_f32, run_cast, peer_cast, NULL, NULL},
    {"layernorm_fwd", "layernorm", NORM_DEFAULT, NORM_GPU, 1,
     "y, mean, rstd of rows of C: bytes 4(2RC + 2C + 2R), flops 7RC",
     describe_ln_fwd, run_ln_fwd, peer_ln_fwd, NULL, NULL},
    {"layernorm_bwd", "layernorm", NORM_DEFAULT, NORM_GPU, 1,
     "dx, dgamma, dbeta: bytes 4(3RC + 3C + 2R), flops 13RC",
     describe_ln_bwd, run_ln_bwd, peer_ln_bwd, NULL, NULL},
    {"rmsnorm_fwd", "layernorm", NORM_DEFAULT, NORM_GPU, 1,
     "y, rrms: bytes 4(2RC + C + R), flops 4RC", describe_rms_fwd,
     run_rms_fwd, peer_rms_fwd, NULL, NULL},
    {"rmsnorm_bwd", "layernorm", NORM_DEFAULT, NORM_GPU, 1,
     "dx, dgamma: bytes 4(3RC + 2C + R), flops 11RC", describe_rms_bwd,
     run_rms_bwd, peer_rms_bwd, NULL, NULL},
    {"embedding_fwd", "embedding", EMBED_DEFAULT, EMBED_GPU, 1,
     "PxVxD, skewed ids: bytes 4(2PD + P)", describe_embed_fwd, run_embed_fwd,
     peer_embed_fwd, NULL, prepare_embed},
    {"embedding_bwd", "embedding", EMBED_DEFAULT, EMBED_GPU, 1,
     "PxVxD, skewed ids: bytes 4(PD + VD + P), flops PD", describe_embed_bwd,
     run_embed_bwd, peer_embed_bwd, NULL, prepare_embed},
    {"permute_0213", "tensorops", "32x512x8x64,8x2048x32x128", NULL, 1,
     "BxTxHxD -> BxHxTxD: bytes 4(2N)", describe_permute, run_permute,
     peer_permute, NULL, NULL},
    {"transpose", "tensorops", "1024x1024,4096x2048,8192x8192", NULL, 1,
     "RxC -> CxR: bytes 4(2RC)", describe_transpose, run_transpose,
     peer_transpose, NULL, NULL},
    {"broadcast_add", "tensorops", ROWS_DEFAULT, NULL, 1,
     "out[R,C] = a[R,C] + b[C]: bytes 4(2RC + C), flops RC",
     describe_bcast_add, run_bcast_add, peer_bcast_add, NULL, NULL},
    {"reduce_sum0", "tensorops", ROWS_DEFAULT, NULL, 1,
     "y[C] = sum_r x[r,C]: bytes 4(RC + C), flops RC", describe_reduce0,
     run_reduce0, peer_bias_grad_, NULL, NULL},
    {"reduce_sum1", "tensorops", ROWS_DEFAULT, NULL, 1,
     "y[R] = sum_c x[R,c]: bytes 4(RC + R), flops RC", describe_reduce1,
     run_reduce1, peer_reduce1, NULL, NULL},
    {"attention_fwd", "attention", ATT_DEFAULT, ATT_GPU, 0,
     ATT_MODEL("forward with lse"), describe_attention, run_attention,
     peer_attention, NULL, NULL},
    {"attention_fwd_causal", "attention", ATT_DEFAULT, ATT_GPU, 0,
     ATT_MODEL("causal forward with lse"), describe_attention, run_attention,
     peer_attention, NULL, NULL},
    {"attention_fwd_bwd", "attention", ATT_DEFAULT, ATT_GPU, 0,
     ATT_MODEL("forward, then dq, dk, dv"), describe_attention, run_attention,
     peer_attention, NULL, NULL},
    {"attention_fwd_bwd_causal", "attention", ATT_DEFAULT, ATT_GPU, 0,
     ATT_MODEL("causal forward, then dq, dk, dv"), describe_attention,
     run_attention, peer_attention, NULL, NULL},
    {"matmul_q8", "quant",
     "1x4096x4096,8x4096x4096,1x11008x4096,8x11008x4096,1x4096x11008", NULL,
     1, "MxNxK, blocks of 32: bytes of B, NK + 2N ceil(K/32); flops 2MNK",
     describe_q8, run_q8, peer_q8, NULL, NULL},
};
const size_t bench_nops = sizeof bench_ops / sizeof bench_ops[0];

const bench_op *bench_find_op(const char *name) {
  for (size_t i = 0; i < bench_nops; i++)
    if (strcmp(bench_ops[i].name, name) == 0) return &bench_ops[i];
  return NULL;
}
