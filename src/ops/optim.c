/*
 * optim.c - optimizer steps (SGD, Adam, AdamW), sum of squares and
 * gradient-norm clipping (kernels in cl/optim.cl).
 *
 * Hyper-parameters are checked as PyTorch checks them (NaN counts as
 * invalid too).  Scalars that PyTorch computes in double (1 - dampening,
 * the bias corrections, 1 - lr wd) are computed here in double and passed
 * to the kernels as floats.  clip_grad_norm enqueues one partial-sum kernel
 * per gradient into one scratch buffer, one final kernel that leaves the
 * clip coefficient in device memory, and one scale kernel per gradient: no
 * host readback and no wait.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ops.h"

static const char *const FILE_CL = "optim.cl";

/* Element-wise kernels: local size (256, or the device's maximum if
 * smaller) and 8-element vectors per work-item, passed to the program as
 * EW_WG / EW_ITEMS.  On PoCL (2 cores, 16M elements) one vector per
 * work-item and 256 work-items measured best; 2, 4 or 16 vectors per
 * work-item were slower. */
#define EW_WG_MAX 256
#define EW_ITEMS 1
/* Sum of squares: at most this many partials per tensor; chunks of at
 * least SQ_MIN_CHUNK elements (row variant) or 4 float4 per work-item
 * (work-group variant), rounded to SQ_BLOCK / 4 WG. */
#define SQ_MAX_PARTS ((size_t)1 << 16)
#define SQ_MIN_CHUNK ((size_t)4096)
#define SQ_BLOCK ((size_t)256)
/* Work-group variant: at most this many partials per tensor (one wave of
 * work-groups on a large GPU, each work-item summing many float4, and few
 * enough for the final tree to run in local memory: SQ_LOCAL). */
#define SQ_GPU_PARTS ((size_t)1024)
#define SQ_LOCAL 2048

static size_t ew_wg(const rumus_ctx *ctx) {
  size_t wg = EW_WG_MAX;
  while (wg > ctx->max_wg) wg /= 2;
  return wg;
}

/* The options of the family's one program per storage type (warm-up and
 * launches); alignment is a kernel argument here (8-element vectors). */
static void optim_options(const rumus_ctx *ctx, rumus_dtype storage,
                          char *buf, size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, storage, rumus__reduce_wg(ctx), 0);
  snprintf(buf, len, "%s -DEW_WG=%zu -DEW_ITEMS=%d -DSQ_BLOCK=%zu "
           "-DSQ_LOCAL=%d",
           head, ew_wg(ctx), EW_ITEMS, SQ_BLOCK, SQ_LOCAL);
}

/* Launches an element-wise kernel over n elements. */
static int launch_ew(rumus_ctx *ctx, const char *op, const char *kname,
                     size_t n, size_t nargs, const rumus__arg *args) {
  char opts[192];
  optim_options(ctx, RUMUS_F32, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, kname};
  const size_t nvec = (n + 7) / 8;
  const size_t local = ew_wg(ctx), per_group = local * EW_ITEMS;
  const size_t global = (nvec + per_group - 1) / per_group * local;
  return rumus__launch(ctx, op, &k, 1, &global, &local, nargs, args);
}

/* 1 if the tensor's whole 8-element vectors are 32-byte aligned on the
 * device, so the kernels may use typed vector accesses. */
static cl_int aligned8(const rumus_tensor *t) {
  return rumus__aligned(t, 0, 8);
}

/* NaN fails every comparison, so !(x >= 0) rejects it too; an infinite
 * hyper-parameter would turn every parameter into inf or NaN. */
#define CHECK_NONNEG(ctx, op, name, x)                                        \
  RUMUS__FAIL_IF(!((x) >= 0.0f) || isinf(x), ctx, RUMUS_EINVAL,               \
                 "%s: %s = %g must be finite and >= 0", op, name, (double)(x))

/* No two of ts[0 .. n) (NULL entries skipped) share memory. */
static int check_disjoint(rumus_ctx *ctx, const char *op,
                          const char *const *names,
                          const rumus_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      RUMUS__FORWARD(
          rumus__check_overlap(ctx, op, names[i], ts[i], names[j], ts[j], 0));
  return RUMUS_OK;
}

static int check_step(rumus_ctx *ctx, const char *op, long step) {
  RUMUS__FAIL_IF(step < 1, ctx, RUMUS_EINVAL, "%s: step = %ld must be >= 1",
                 op, step);
  return RUMUS_OK;
}

/* ---- SGD ------------------------------------------------------------------ */

int rumus_sgd_step(rumus_ctx *ctx, const rumus_sgd_params *p, long step,
                   rumus_tensor *param, const rumus_tensor *grad,
                   rumus_tensor *momentum_buf) {
  static const char *const op = "rumus_sgd_step";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(p == NULL, ctx, RUMUS_ENULL, "%s: params is NULL", op);
  CHECK_NONNEG(ctx, op, "lr", p->lr);
  CHECK_NONNEG(ctx, op, "momentum", p->momentum);
  CHECK_NONNEG(ctx, op, "weight_decay", p->weight_decay);
  RUMUS__FAIL_IF(!isfinite(p->dampening), ctx, RUMUS_EINVAL,
                 "%s: dampening = %g must be finite", op,
                 (double)p->dampening);
  RUMUS__FAIL_IF(p->nesterov && (p->momentum <= 0.0f || p->dampening != 0.0f),
                 ctx, RUMUS_EINVAL,
                 "%s: nesterov needs momentum > 0 and dampening = 0 (momentum "
                 "%g, dampening %g)",
                 op, (double)p->momentum, (double)p->dampening);
  RUMUS__FORWARD(check_step(ctx, op, step));
  const int use_mom = p->momentum != 0.0f;
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "param", param, RUMUS_F32));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "grad", grad, RUMUS_F32));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "param", param, "grad", grad));
  if (use_mom) {
    RUMUS__FAIL_IF(momentum_buf == NULL, ctx, RUMUS_ENULL,
                   "%s: momentum_buf is NULL but momentum = %g", op,
                   (double)p->momentum);
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, "momentum_buf", momentum_buf,
                                       RUMUS_F32));
    RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "param", param,
                                           "momentum_buf", momentum_buf));
  }
  const char *names[3] = {"param", "grad", "momentum_buf"};
  const rumus_tensor *ts[3] = {param, grad, use_mom ? momentum_buf : NULL};
  RUMUS__FORWARD(check_disjoint(ctx, op, names, ts, 3));
  const size_t n = param->numel;
  if (n == 0) return RUMUS_OK;

  /* Without momentum the buffer argument is param's (never touched). */
  const rumus_tensor *b = use_mom ? momentum_buf : param;
  cl_ulong po = rumus__off(param), go = rumus__off(grad), bo = rumus__off(b);
  cl_ulong nn = n;
  cl_int al = aligned8(param) && aligned8(grad) && aligned8(b);
  float lr = p->lr, mom = p->momentum, wd = p->weight_decay;
  float damp1 = (float)(1.0 - (double)p->dampening);
  cl_int mode = (use_mom ? 1 : 0) | (use_mom && step == 1 ? 2 : 0) |
                (p->nesterov ? 4 : 0);
  const rumus__arg args[] = {
      RUMUS__ARG(param->mem), RUMUS__ARG(po), RUMUS__ARG(grad->mem),
      RUMUS__ARG(go),         RUMUS__ARG(b->mem), RUMUS__ARG(bo),
      RUMUS__ARG(nn),         RUMUS__ARG(al), RUMUS__ARG(lr),
      RUMUS__ARG(mom),        RUMUS__ARG(damp1), RUMUS__ARG(wd),
      RUMUS__ARG(mode)};
  return launch_ew(ctx, op, "sgd_step", n, sizeof args / sizeof args[0], args);
}

/* ---- Adam / AdamW ----------------------------------------------------------- */

int rumus_adam_step(rumus_ctx *ctx, const rumus_adam_params *p, long step,
                    rumus_tensor *param, const rumus_tensor *grad,
                    rumus_tensor *m, rumus_tensor *v) {
  static const char *const op = "rumus_adam_step";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(p == NULL, ctx, RUMUS_ENULL, "%s: params is NULL", op);
  CHECK_NONNEG(ctx, op, "lr", p->lr);
  CHECK_NONNEG(ctx, op, "eps", p->eps);
  CHECK_NONNEG(ctx, op, "weight_decay", p->weight_decay);
  RUMUS__FAIL_IF(!(p->beta1 >= 0.0f && p->beta1 < 1.0f), ctx, RUMUS_EINVAL,
                 "%s: beta1 = %g must be in [0, 1)", op, (double)p->beta1);
  RUMUS__FAIL_IF(!(p->beta2 >= 0.0f && p->beta2 < 1.0f), ctx, RUMUS_EINVAL,
                 "%s: beta2 = %g must be in [0, 1)", op, (double)p->beta2);
  RUMUS__FORWARD(check_step(ctx, op, step));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "param", param, RUMUS_F32));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "grad", grad, RUMUS_F32));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "m", m, RUMUS_F32));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "v", v, RUMUS_F32));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "param", param, "grad", grad));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "param", param, "m", m));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "param", param, "v", v));
  const char *names[4] = {"param", "grad", "m", "v"};
  const rumus_tensor *ts[4] = {param, grad, m, v};
  RUMUS__FORWARD(check_disjoint(ctx, op, names, ts, 4));
  const size_t n = param->numel;
  if (n == 0) return RUMUS_OK;

  const double lr = p->lr, wd = p->weight_decay;
  const double b1 = p->beta1, b2 = p->beta2;
  const double bc1 = 1.0 - pow(b1, (double)step);
  const double bc2 = 1.0 - pow(b2, (double)step);
  float l2 = p->decoupled ? 0.0f : p->weight_decay;
  float decay = p->decoupled ? (float)(1.0 - lr * wd) : 1.0f;
  float fb1 = p->beta1, omb1 = (float)(1.0 - b1);
  float fb2 = p->beta2, omb2 = (float)(1.0 - b2);
  float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float eps = p->eps;
  cl_ulong po = rumus__off(param), go = rumus__off(grad), mo = rumus__off(m),
           vo = rumus__off(v), nn = n;
  cl_int al = aligned8(param) && aligned8(grad) && aligned8(m) &&
              aligned8(v);
  const rumus__arg args[] = {
      RUMUS__ARG(param->mem), RUMUS__ARG(po),        RUMUS__ARG(grad->mem),
      RUMUS__ARG(go),         RUMUS__ARG(m->mem),    RUMUS__ARG(mo),
      RUMUS__ARG(v->mem),     RUMUS__ARG(vo),        RUMUS__ARG(nn),
      RUMUS__ARG(al),         RUMUS__ARG(l2),         RUMUS__ARG(decay),     RUMUS__ARG(fb1),
      RUMUS__ARG(omb1),       RUMUS__ARG(fb2),       RUMUS__ARG(omb2),
      RUMUS__ARG(step_size),  RUMUS__ARG(bc2_sqrt),  RUMUS__ARG(eps)};
  return launch_ew(ctx, op, "adam_step", n, sizeof args / sizeof args[0], args);
}

/* ---- Sum of squares and clipping -------------------------------------------- */

/* Elements per partial sum for a tensor of n elements (n > 0). */
static size_t sq_chunk(const rumus_ctx *ctx, size_t n) {
  const int gpu = rumus__gpu_variant(ctx);
  const size_t unit = gpu ? 4 * rumus__reduce_wg(ctx) : SQ_BLOCK;
  const size_t lo = gpu ? 4 * unit : SQ_MIN_CHUNK;
  const size_t parts = gpu ? SQ_GPU_PARTS : SQ_MAX_PARTS;
  size_t c = rumus__round_up((n + parts - 1) / parts, unit);
  return c > lo ? c : lo;
}

static size_t sq_parts(const rumus_ctx *ctx, size_t n) {
  return n ? (n + sq_chunk(ctx, n) - 1) / sq_chunk(ctx, n) : 0;
}

/* Enqueues the partial sums of squares of x into part[p_off ...]. */
static int launch_partials(rumus_ctx *ctx, const char *op,
                           const rumus_tensor *x, cl_mem part, size_t p_off) {
  const size_t n = x->numel;
  if (n == 0) return RUMUS_OK;
  char opts[192];
  optim_options(ctx, RUMUS_F32, opts, sizeof opts);
  const int wg = rumus__gpu_variant(ctx);
  const rumus__kernel_ref k = {FILE_CL, opts,
                               wg ? "sumsq_partial_wg" : "sumsq_partial_row"};
  const size_t P = sq_parts(ctx, n);
  cl_ulong xo = rumus__off(x), nn = n, chunk = sq_chunk(ctx, n), po = p_off;
  const rumus__arg args[] = {RUMUS__ARG(x->mem), RUMUS__ARG(xo),
                             RUMUS__ARG(nn),     RUMUS__ARG(chunk),
                             RUMUS__ARG(part),   RUMUS__ARG(po)};
  size_t global, local;
  if (wg) {
    local = rumus__reduce_wg(ctx);
    global = P * local;
  } else {
    local = rumus__row_local(ctx, P);
    global = P;
  }
  return rumus__launch(ctx, op, &k, 1, &global, &local, 6, args);
}

/* Launches a final kernel (`base`_wg as one work-group, `base`_row as one
 * work-item). */
static int launch_final(rumus_ctx *ctx, const char *op, const char *base,
                        size_t nargs, const rumus__arg *args) {
  char opts[192], kname[48];
  optim_options(ctx, RUMUS_F32, opts, sizeof opts);
  const int wg = rumus__gpu_variant(ctx);
  snprintf(kname, sizeof kname, "%s_%s", base, wg ? "wg" : "row");
  const rumus__kernel_ref k = {FILE_CL, opts, kname};
  const size_t global = wg ? rumus__reduce_wg(ctx) : 1;
  return rumus__launch(ctx, op, &k, 1, &global, &global, nargs, args);
}

static int check_scalar_out(rumus_ctx *ctx, const char *op, const char *name,
                            const rumus_tensor *t) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, RUMUS_F32));
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(t->numel != 1, ctx, RUMUS_ESHAPE,
                 "%s: %s must have one element, not shape %s", op, name,
                 rumus__shape_str(t, s, sizeof s));
  return RUMUS_OK;
}

int rumus_sum_squares(rumus_ctx *ctx, const rumus_tensor *x,
                      rumus_tensor *acc) {
  static const char *const op = "rumus_sum_squares";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "x", x, RUMUS_F32));
  RUMUS__FORWARD(check_scalar_out(ctx, op, "acc", acc));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "acc", acc, 0));
  const size_t P = sq_parts(ctx, x->numel);
  if (P == 0) return RUMUS_OK;
  cl_mem part;
  RUMUS__FORWARD(rumus__scratch(ctx, op, P * sizeof(float), &part));
  int st;
  if (rumus__gpu_variant(ctx)) {
    /* One launch: the last work-group sums the partials (sumsq_wg). */
    char opts[192];
    optim_options(ctx, RUMUS_F32, opts, sizeof opts);
    const rumus__kernel_ref k = {FILE_CL, opts, "sumsq_wg"};
    cl_ulong xo = rumus__off(x), nn = x->numel, chunk = sq_chunk(ctx, x->numel),
             po = 0, ao = rumus__off(acc);
    const rumus__arg args[] = {
        RUMUS__ARG(x->mem), RUMUS__ARG(xo),       RUMUS__ARG(nn),
        RUMUS__ARG(chunk),  RUMUS__ARG(part),     RUMUS__ARG(po),
        RUMUS__ARG(acc->mem), RUMUS__ARG(ao),     RUMUS__ARG(ctx->status)};
    const size_t local = rumus__reduce_wg(ctx), global = P * local;
    st = rumus__launch(ctx, op, &k, 1, &global, &local, 9, args);
  } else {
    st = launch_partials(ctx, op, x, part, 0);
    if (st == RUMUS_OK) {
      cl_ulong po = 0, np = P, ao = rumus__off(acc);
      const rumus__arg args[] = {RUMUS__ARG(part), RUMUS__ARG(po),
                                 RUMUS__ARG(np), RUMUS__ARG(acc->mem),
                                 RUMUS__ARG(ao)};
      st = launch_final(ctx, op, "sumsq_final", 5, args);
    }
  }
  /* The queued kernels keep the buffer alive until they finish. */
  clReleaseMemObject(part);
  return st;
}

int rumus_clip_grad_norm(rumus_ctx *ctx, rumus_tensor *const *grads, size_t n,
                         float max_norm, rumus_tensor *total_norm) {
  static const char *const op = "rumus_clip_grad_norm";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(grads == NULL, ctx, RUMUS_ENULL, "%s: grads is NULL", op);
  RUMUS__FAIL_IF(n == 0, ctx, RUMUS_EINVAL, "%s: n = 0 gradients", op);
  RUMUS__FAIL_IF(!(max_norm > 0.0f), ctx, RUMUS_EINVAL,
                 "%s: max_norm = %g must be > 0", op, (double)max_norm);
  size_t P = 0;
  for (size_t i = 0; i < n; i++) {
    char name[48];
    snprintf(name, sizeof name, "grads[%zu]", i);
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, grads[i], RUMUS_F32));
    P += sq_parts(ctx, grads[i]->numel);
  }
  if (total_norm)
    RUMUS__FORWARD(check_scalar_out(ctx, op, "total_norm", total_norm));
  /* Every gradient is scaled once: none may share memory with another or
   * with total_norm. */
  for (size_t i = 0; i < n; i++) {
    for (size_t j = i + 1; j < n; j++)
      RUMUS__FORWARD(rumus__check_overlap(ctx, op, "a gradient", grads[i],
                                          "another gradient", grads[j], 0));
    RUMUS__FORWARD(rumus__check_overlap(ctx, op, "a gradient", grads[i],
                                        "total_norm", total_norm, 0));
  }
  if (P == 0 && total_norm == NULL) return RUMUS_OK; /* nothing to scale */

  /* part[0 .. P) partials in the order of grads, part[P] the coefficient. */
  cl_mem part;
  RUMUS__FORWARD(rumus__scratch(ctx, op, (P + 1) * sizeof(float), &part));
  int st = RUMUS_OK;
  size_t off = 0;
  for (size_t i = 0; i < n && st == RUMUS_OK; i++) {
    st = launch_partials(ctx, op, grads[i], part, off);
    off += sq_parts(ctx, grads[i]->numel);
  }
  if (st == RUMUS_OK) {
    cl_ulong po = 0, np = P;
    cl_mem tn = total_norm ? total_norm->mem : part;
    cl_ulong tno = total_norm ? rumus__off(total_norm) : 0;
    cl_int has_total = total_norm != NULL;
    const rumus__arg args[] = {RUMUS__ARG(part), RUMUS__ARG(po),
                               RUMUS__ARG(np),   RUMUS__ARG(max_norm),
                               RUMUS__ARG(tn),   RUMUS__ARG(tno),
                               RUMUS__ARG(has_total)};
    st = launch_final(ctx, op, "clip_final", 7, args);
  }
  for (size_t i = 0; i < n && st == RUMUS_OK; i++) {
    if (grads[i]->numel == 0) continue;
    cl_ulong go = rumus__off(grads[i]), nn = grads[i]->numel, co = P;
    cl_int al = aligned8(grads[i]);
    const rumus__arg args[] = {RUMUS__ARG(grads[i]->mem), RUMUS__ARG(go),
                               RUMUS__ARG(nn), RUMUS__ARG(al),
                               RUMUS__ARG(part), RUMUS__ARG(co)};
    st = launch_ew(ctx, op, "clip_scale", grads[i]->numel, 6, args);
  }
  clReleaseMemObject(part);
  return st;
}

int rumus__optim_warm(rumus_ctx *ctx) {
  char opts[192];
  cl_program prog;
  optim_options(ctx, RUMUS_F32, opts, sizeof opts);
  return rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog);
}
