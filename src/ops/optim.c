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
 *
 * Storage: a step's parameter and state share one floating type P, its
 * gradient and its parameter copy may each be any floating type (programs
 * built with -DRUMUS_STORAGE=P, -DRUMUS_STORAGE_G, -DRUMUS_STORAGE_COPY);
 * a sum of squares and each gradient of a clip run in the program whose
 * three tags are that tensor's type.  The sums, norms and coefficients are
 * float.  Only the all-F32 program is warmed (rumus_cache_fill).
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

/* The storage tags of one program: the steps' parameter and state, their
 * gradient and their parameter copy; a sum of squares or clip program has
 * the tensor's type in all three. */
typedef struct {
  rumus_dtype param, grad, copy;
} optim_types;

static optim_types same_types(rumus_dtype t) {
  return (optim_types){t, t, t};
}

/* The options of the family's programs (warm-up and launches); alignment
 * is a kernel argument here (8-element vectors). */
static void optim_options(const rumus_ctx *ctx, optim_types ty, char *buf,
                          size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, ty.param, rumus__reduce_wg(ctx), 0);
  snprintf(buf, len, "%s -DRUMUS_STORAGE_G=%s -DRUMUS_STORAGE_COPY=%s "
           "-DEW_WG=%zu -DEW_ITEMS=%d -DSQ_BLOCK=%zu -DSQ_LOCAL=%d",
           head, rumus__storage_tag(ty.grad), rumus__storage_tag(ty.copy),
           ew_wg(ctx), EW_ITEMS, SQ_BLOCK, SQ_LOCAL);
}

/* Launches an element-wise kernel over n elements. */
static int launch_ew(rumus_ctx *ctx, const char *op, optim_types ty,
                     const char *kname, size_t n, size_t nargs,
                     const rumus__arg *args) {
  char opts[256];
  optim_options(ctx, ty, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, kname};
  const size_t nvec = (n + 7) / 8;
  const size_t local = ew_wg(ctx), per_group = local * EW_ITEMS;
  const size_t global = (nvec + per_group - 1) / per_group * local;
  return rumus__launch(ctx, op, &k, 1, &global, &local, nargs, args);
}

/* 1 if the tensor's whole 8-element vectors are aligned to the vector on
 * the device, so the kernels may use typed vector accesses. */
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

static int check_scalar_out(rumus_ctx *ctx, const char *op, const char *name,
                            const rumus_tensor *t) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, RUMUS_F32));
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(t->numel != 1, ctx, RUMUS_ESHAPE,
                 "%s: %s must have one element, not shape %s", op, name,
                 rumus__shape_str(t, s, sizeof s));
  return RUMUS_OK;
}

/* ---- What every step shares ---------------------------------------------- */

static const char *type_name(rumus_dtype d) {
  return d == RUMUS_F16 ? "f16" : d == RUMUS_BF16 ? "bf16" : "f32";
}

/* mode bits of the step kernels (cl/optim.cl) */
enum {
  SGD_MOMENTUM = 1,
  SGD_FIRST = 2,
  SGD_NESTEROV = 4,
  STEP_COPY = 8,
  STEP_SKIP = 16
};

/* A step's tensors besides param and grad, and its loss scaling. */
typedef struct {
  rumus_tensor *state[2]; /* momentum_buf, or m and v; NULL: not used */
  const char *state_name[2];
  rumus_tensor *copy; /* param_copy; NULL: none */
  float inv_scale;    /* 1: none */
  const rumus_tensor *skip; /* NULL: none */
} step_io;

static step_io step_io_make(rumus_tensor *s0, const char *n0,
                            rumus_tensor *s1, const char *n1,
                            rumus_tensor *copy,
                            const rumus_grad_scaling *scaling) {
  step_io io = {{s0, s1}, {n0, n1}, copy, 1.0f, NULL};
  if (scaling) {
    io.inv_scale = scaling->inv_scale;
    io.skip = scaling->skip_if_nonfinite;
  }
  return io;
}

/* The state (not NULL) has param's type and shape. */
static int check_state(rumus_ctx *ctx, const char *op,
                       const rumus_tensor *param, const char *name,
                       const rumus_tensor *s) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, name, s));
  RUMUS__FAIL_IF(s->dtype != param->dtype, ctx, RUMUS_EDTYPE,
                 "%s: %s is %s; the state must have param's type, %s", op,
                 name, type_name(s->dtype), type_name(param->dtype));
  return rumus__check_same_shape(ctx, op, "param", param, name, s);
}

/* param, grad and the copy floating, of param's shape; the state of
 * param's type; the scaling valid; no two tensors sharing memory. */
static int check_step_tensors(rumus_ctx *ctx, const char *op,
                              const rumus_tensor *param,
                              const rumus_tensor *grad, const step_io *io) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "param", param));
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "grad", grad));
  RUMUS__FORWARD(
      rumus__check_same_shape(ctx, op, "param", param, "grad", grad));
  for (int i = 0; i < 2; i++)
    if (io->state[i])
      RUMUS__FORWARD(
          check_state(ctx, op, param, io->state_name[i], io->state[i]));
  if (io->copy) {
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "param_copy", io->copy));
    RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "param", param,
                                           "param_copy", io->copy));
  }
  RUMUS__FAIL_IF(!(io->inv_scale > 0.0f) || isinf(io->inv_scale), ctx,
                 RUMUS_EINVAL, "%s: inv_scale = %g must be finite and > 0",
                 op, (double)io->inv_scale);
  if (io->skip)
    RUMUS__FORWARD(check_scalar_out(ctx, op, "skip_if_nonfinite", io->skip));
  const char *names[6] = {"param",           "grad",
                          io->state_name[0], io->state_name[1],
                          "param_copy",      "skip_if_nonfinite"};
  const rumus_tensor *ts[6] = {param,        grad,     io->state[0],
                               io->state[1], io->copy, io->skip};
  return check_disjoint(ctx, op, names, ts, 6);
}

/* A tensor as kernel arguments; an unused one (NULL) passes `stand_in`'s
 * buffer, which the kernel never touches through it. */
typedef struct {
  cl_mem mem;
  cl_ulong off;
} buf_arg;

static buf_arg buf_of(const rumus_tensor *t, const rumus_tensor *stand_in) {
  const rumus_tensor *u = t ? t : stand_in;
  return (buf_arg){u->mem, rumus__off(u)};
}

/* The program types, the alignment flag (every tensor's vectors aligned)
 * and the STEP_COPY / STEP_SKIP bits of a step. */
static optim_types step_types(const rumus_tensor *param,
                              const rumus_tensor *grad, const step_io *io) {
  return (optim_types){param->dtype, grad->dtype,
                       io->copy ? io->copy->dtype : param->dtype};
}

static cl_int step_aligned(const rumus_tensor *param, const rumus_tensor *grad,
                           const step_io *io) {
  const rumus_tensor *ts[5] = {param, grad, io->state[0], io->state[1],
                               io->copy};
  for (int i = 0; i < 5; i++)
    if (ts[i] && !aligned8(ts[i])) return 0;
  return 1;
}

static cl_int step_mode(const step_io *io) {
  return (io->copy ? STEP_COPY : 0) | (io->skip ? STEP_SKIP : 0);
}

/* ---- SGD ------------------------------------------------------------------ */

static int check_sgd_params(rumus_ctx *ctx, const char *op,
                            const rumus_sgd_params *p, long step) {
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
  return check_step(ctx, op, step);
}

static int sgd_step(rumus_ctx *ctx, const char *op, const rumus_sgd_params *p,
                    long step, rumus_tensor *param, const rumus_tensor *grad,
                    rumus_tensor *momentum_buf, rumus_tensor *param_copy,
                    const rumus_grad_scaling *scaling) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_sgd_params(ctx, op, p, step));
  const int use_mom = p->momentum != 0.0f;
  RUMUS__FAIL_IF(use_mom && momentum_buf == NULL, ctx, RUMUS_ENULL,
                 "%s: momentum_buf is NULL but momentum = %g", op,
                 (double)p->momentum);
  const step_io io =
      step_io_make(use_mom ? momentum_buf : NULL, "momentum_buf", NULL, NULL,
                   param_copy, scaling);
  RUMUS__FORWARD(check_step_tensors(ctx, op, param, grad, &io));
  const size_t n = param->numel;
  if (n == 0) return RUMUS_OK;

  const buf_arg pb = buf_of(param, NULL), gb = buf_of(grad, NULL),
                bb = buf_of(io.state[0], param), cb = buf_of(io.copy, param),
                sb = buf_of(io.skip, param);
  cl_ulong nn = n;
  cl_int al = step_aligned(param, grad, &io);
  float inv_scale = io.inv_scale, lr = p->lr, mom = p->momentum,
        wd = p->weight_decay;
  float damp1 = (float)(1.0 - (double)p->dampening);
  cl_int mode = (use_mom ? SGD_MOMENTUM : 0) |
                (use_mom && step == 1 ? SGD_FIRST : 0) |
                (p->nesterov ? SGD_NESTEROV : 0) | step_mode(&io);
  const rumus__arg args[] = {
      RUMUS__ARG(pb.mem),    RUMUS__ARG(pb.off), RUMUS__ARG(gb.mem),
      RUMUS__ARG(gb.off),    RUMUS__ARG(bb.mem), RUMUS__ARG(bb.off),
      RUMUS__ARG(cb.mem),    RUMUS__ARG(cb.off), RUMUS__ARG(sb.mem),
      RUMUS__ARG(sb.off),    RUMUS__ARG(nn),     RUMUS__ARG(al),
      RUMUS__ARG(inv_scale), RUMUS__ARG(lr),     RUMUS__ARG(mom),
      RUMUS__ARG(damp1),     RUMUS__ARG(wd),     RUMUS__ARG(mode)};
  return launch_ew(ctx, op, step_types(param, grad, &io), "sgd_step", n,
                   sizeof args / sizeof args[0], args);
}

int rumus_sgd_step_ex(rumus_ctx *ctx, const rumus_sgd_params *p, long step,
                      rumus_tensor *param, const rumus_tensor *grad,
                      rumus_tensor *momentum_buf, rumus_tensor *param_copy,
                      const rumus_grad_scaling *scaling) {
  return sgd_step(ctx, "rumus_sgd_step_ex", p, step, param, grad,
                  momentum_buf, param_copy, scaling);
}

int rumus_sgd_step(rumus_ctx *ctx, const rumus_sgd_params *p, long step,
                   rumus_tensor *param, const rumus_tensor *grad,
                   rumus_tensor *momentum_buf) {
  return sgd_step(ctx, "rumus_sgd_step", p, step, param, grad, momentum_buf,
                  NULL, NULL);
}

/* ---- Adam / AdamW ----------------------------------------------------------- */

static int check_adam_params(rumus_ctx *ctx, const char *op,
                             const rumus_adam_params *p, long step) {
  RUMUS__FAIL_IF(p == NULL, ctx, RUMUS_ENULL, "%s: params is NULL", op);
  CHECK_NONNEG(ctx, op, "lr", p->lr);
  CHECK_NONNEG(ctx, op, "eps", p->eps);
  CHECK_NONNEG(ctx, op, "weight_decay", p->weight_decay);
  RUMUS__FAIL_IF(!(p->beta1 >= 0.0f && p->beta1 < 1.0f), ctx, RUMUS_EINVAL,
                 "%s: beta1 = %g must be in [0, 1)", op, (double)p->beta1);
  RUMUS__FAIL_IF(!(p->beta2 >= 0.0f && p->beta2 < 1.0f), ctx, RUMUS_EINVAL,
                 "%s: beta2 = %g must be in [0, 1)", op, (double)p->beta2);
  return check_step(ctx, op, step);
}

/* Enqueues adam_step on checked, non-empty tensors. */
static int launch_adam(rumus_ctx *ctx, const char *op,
                       const rumus_adam_params *p, long step,
                       rumus_tensor *param, const rumus_tensor *grad,
                       const step_io *io) {
  const double lr = p->lr, wd = p->weight_decay;
  const double b1 = p->beta1, b2 = p->beta2;
  const double bc1 = 1.0 - pow(b1, (double)step);
  const double bc2 = 1.0 - pow(b2, (double)step);
  float inv_scale = io->inv_scale;
  float l2 = p->decoupled ? 0.0f : p->weight_decay;
  float decay = p->decoupled ? (float)(1.0 - lr * wd) : 1.0f;
  float fb1 = p->beta1, omb1 = (float)(1.0 - b1);
  float fb2 = p->beta2, omb2 = (float)(1.0 - b2);
  float step_size = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float eps = p->eps;
  const buf_arg pb = buf_of(param, NULL), gb = buf_of(grad, NULL),
                mb = buf_of(io->state[0], NULL),
                vb = buf_of(io->state[1], NULL),
                cb = buf_of(io->copy, param), sb = buf_of(io->skip, param);
  cl_ulong nn = param->numel;
  cl_int al = step_aligned(param, grad, io), mode = step_mode(io);
  const rumus__arg args[] = {
      RUMUS__ARG(pb.mem),     RUMUS__ARG(pb.off),    RUMUS__ARG(gb.mem),
      RUMUS__ARG(gb.off),     RUMUS__ARG(mb.mem),    RUMUS__ARG(mb.off),
      RUMUS__ARG(vb.mem),     RUMUS__ARG(vb.off),    RUMUS__ARG(cb.mem),
      RUMUS__ARG(cb.off),     RUMUS__ARG(sb.mem),    RUMUS__ARG(sb.off),
      RUMUS__ARG(nn),         RUMUS__ARG(al),        RUMUS__ARG(inv_scale),
      RUMUS__ARG(l2),         RUMUS__ARG(decay),     RUMUS__ARG(fb1),
      RUMUS__ARG(omb1),       RUMUS__ARG(fb2),       RUMUS__ARG(omb2),
      RUMUS__ARG(step_size),  RUMUS__ARG(bc2_sqrt),  RUMUS__ARG(eps),
      RUMUS__ARG(mode)};
  return launch_ew(ctx, op, step_types(param, grad, io), "adam_step",
                   param->numel, sizeof args / sizeof args[0], args);
}

static int adam_step(rumus_ctx *ctx, const char *op,
                     const rumus_adam_params *p, long step,
                     rumus_tensor *param, const rumus_tensor *grad,
                     rumus_tensor *m, rumus_tensor *v,
                     rumus_tensor *param_copy,
                     const rumus_grad_scaling *scaling) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_adam_params(ctx, op, p, step));
  RUMUS__FAIL_IF(m == NULL || v == NULL, ctx, RUMUS_ENULL, "%s: %s is NULL",
                 op, m == NULL ? "m" : "v");
  const step_io io = step_io_make(m, "m", v, "v", param_copy, scaling);
  RUMUS__FORWARD(check_step_tensors(ctx, op, param, grad, &io));
  if (param->numel == 0) return RUMUS_OK;
  return launch_adam(ctx, op, p, step, param, grad, &io);
}

int rumus_adam_step_ex(rumus_ctx *ctx, const rumus_adam_params *p, long step,
                       rumus_tensor *param, const rumus_tensor *grad,
                       rumus_tensor *m, rumus_tensor *v,
                       rumus_tensor *param_copy,
                       const rumus_grad_scaling *scaling) {
  return adam_step(ctx, "rumus_adam_step_ex", p, step, param, grad, m, v,
                   param_copy, scaling);
}

int rumus_adam_step(rumus_ctx *ctx, const rumus_adam_params *p, long step,
                    rumus_tensor *param, const rumus_tensor *grad,
                    rumus_tensor *m, rumus_tensor *v) {
  return adam_step(ctx, "rumus_adam_step", p, step, param, grad, m, v, NULL,
                   NULL);
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
  char opts[256];
  optim_options(ctx, same_types(x->dtype), opts, sizeof opts);
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
 * work-item) from the program of type t (the kernel reads only floats:
 * the caller names a program it uses anyway). */
static int launch_final(rumus_ctx *ctx, const char *op, rumus_dtype t,
                        const char *base, size_t nargs,
                        const rumus__arg *args) {
  char opts[256], kname[48];
  optim_options(ctx, same_types(t), opts, sizeof opts);
  const int wg = rumus__gpu_variant(ctx);
  snprintf(kname, sizeof kname, "%s_%s", base, wg ? "wg" : "row");
  const rumus__kernel_ref k = {FILE_CL, opts, kname};
  const size_t global = wg ? rumus__reduce_wg(ctx) : 1;
  return rumus__launch(ctx, op, &k, 1, &global, &global, nargs, args);
}

/* rumus_sum_squares's launches, its P partials in part. */
static int launch_sumsq(rumus_ctx *ctx, const char *op, const rumus_tensor *x,
                        rumus_tensor *acc, cl_mem part, size_t P) {
  int st;
  if (rumus__gpu_variant(ctx)) {
    /* One launch: the last work-group sums the partials (sumsq_wg). */
    char opts[256];
    optim_options(ctx, same_types(x->dtype), opts, sizeof opts);
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
      st = launch_final(ctx, op, x->dtype, "sumsq_final", 5, args);
    }
  }
  return st;
}

int rumus_sum_squares(rumus_ctx *ctx, const rumus_tensor *x,
                      rumus_tensor *acc) {
  static const char *const op = "rumus_sum_squares";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "x", x));
  RUMUS__FORWARD(check_scalar_out(ctx, op, "acc", acc));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "acc", acc, 0));
  const size_t P = sq_parts(ctx, x->numel);
  if (P == 0) return RUMUS_OK;
  cl_mem part;
  rumus__scratch_begin(ctx);
  int st = rumus__scratch_slot(ctx, op, RUMUS__SCRATCH_PARTIALS,
                               P * sizeof(float), &part);
  if (st == RUMUS_OK) st = launch_sumsq(ctx, op, x, acc, part, P);
  rumus__scratch_end(ctx);
  return st;
}

/* The arguments of a clip: n floating gradients, max_norm > 0 and the
 * optional total_norm; no two tensors sharing memory.  *P: the partials. */
static int check_clip(rumus_ctx *ctx, const char *op,
                      rumus_tensor *const *grads, size_t n, float max_norm,
                      const rumus_tensor *total_norm, size_t *P) {
  RUMUS__FAIL_IF(grads == NULL, ctx, RUMUS_ENULL, "%s: grads is NULL", op);
  RUMUS__FAIL_IF(n == 0, ctx, RUMUS_EINVAL, "%s: n = 0 gradients", op);
  RUMUS__FAIL_IF(!(max_norm > 0.0f), ctx, RUMUS_EINVAL,
                 "%s: max_norm = %g must be > 0", op, (double)max_norm);
  *P = 0;
  for (size_t i = 0; i < n; i++) {
    char name[48];
    snprintf(name, sizeof name, "grads[%zu]", i);
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, name, grads[i]));
    *P += sq_parts(ctx, grads[i]->numel);
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
  return RUMUS_OK;
}

/* Enqueues the clip's kernels on checked arguments, part holding P + 1
 * floats: the partials of every gradient in order, the coefficient. */
static int launch_clip(rumus_ctx *ctx, const char *op,
                       rumus_tensor *const *grads, size_t n, float max_norm,
                       rumus_tensor *total_norm, cl_mem part, size_t P) {
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
    st = launch_final(ctx, op, grads[0]->dtype, "clip_final", 7, args);
  }
  for (size_t i = 0; i < n && st == RUMUS_OK; i++) {
    if (grads[i]->numel == 0) continue;
    cl_ulong go = rumus__off(grads[i]), nn = grads[i]->numel, co = P;
    cl_int al = aligned8(grads[i]);
    const rumus__arg args[] = {RUMUS__ARG(grads[i]->mem), RUMUS__ARG(go),
                               RUMUS__ARG(nn), RUMUS__ARG(al),
                               RUMUS__ARG(part), RUMUS__ARG(co)};
    st = launch_ew(ctx, op, same_types(grads[i]->dtype), "clip_scale",
                   grads[i]->numel, 6, args);
  }
  return st;
}

int rumus_clip_grad_norm(rumus_ctx *ctx, rumus_tensor *const *grads, size_t n,
                         float max_norm, rumus_tensor *total_norm) {
  static const char *const op = "rumus_clip_grad_norm";
  if (ctx == NULL) return RUMUS_ENULL;
  size_t P = 0;
  RUMUS__FORWARD(check_clip(ctx, op, grads, n, max_norm, total_norm, &P));
  if (P == 0 && total_norm == NULL) return RUMUS_OK; /* nothing to scale */
  cl_mem part;
  rumus__scratch_begin(ctx);
  int st = rumus__scratch_slot(ctx, op, RUMUS__SCRATCH_PARTIALS,
                               (P + 1) * sizeof(float), &part);
  if (st == RUMUS_OK)
    st = launch_clip(ctx, op, grads, n, max_norm, total_norm, part, P);
  rumus__scratch_end(ctx);
  return st;
}

int rumus__optim_warm(rumus_ctx *ctx) {
  char opts[256];
  cl_program prog;
  optim_options(ctx, same_types(RUMUS_F32), opts, sizeof opts);
  return rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog);
}
