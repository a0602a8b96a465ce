/*
 * xent.c - fused cross-entropy with int32 class targets (kernels in
 * cl/xent.cl): per-row log-sum-exp, loss and gradient in one kernel, the
 * count of non-ignored rows and the reduced loss on the device.
 *
 * Launch order on the in-order queue (nothing waits on the host):
 *   MEAN:       xent_count                         (the denominator, which
 *               the gradient needs)
 *   always:     xent_fwd[_bwd]_{wgc,wg,wgl,row}     (per-row losses, grad)
 *   MEAN, SUM:  xent_sum                           (the scalar loss)
 * The count and the sum each finish in their last work-group (a ticket in
 * the status buffer), not in a second launch: three launches at most.
 * One scratch buffer holds the per-row losses (MEAN, SUM), the loss
 * partials and the count partials plus the count: the context's reusable
 * slot RUMUS__SCRATCH_PARTIALS, held for the launches.
 *
 * Types: logits F32, F16 or BF16 (the programs' RUMUS_STORAGE), grad the
 * logits' type, targets I32, loss F32 or the logits' type (the second tag
 * RUMUS_STORAGE_LOSS of cl/xent.cl).  The scratch is float whatever the
 * types, so only the tensor the kernels write last is rounded.
 */
#include <math.h>
#include <stdio.h>

#include "ops.h"

static const char *const FILE_CL = "xent.cl";
static const char *const OP = "rumus_cross_entropy";

/* Losses or targets per work-item in a first reduction stage (RED_ITEMS). */
#define RED_ITEMS 8
/* Rows per work-item of the _row kernels (CPU variant): the next row's max
 * is read during the current row's exp pass. */
#define ROW_RUN 8
/* Largest row the _wgl kernels keep in local memory, in bytes. */
#define LOCAL_ROW_BYTES 32768
/* Rows of up to this many elements keep their exps in local memory in
 * the 16-bit _row kernels with a gradient (XENT_LOCAL_ROW), for each of
 * up to 8 work-items (rumus__row_local), where the device has the room. */
#define ITEM_LOCAL_ROW 2048

/* Floats of the _wgl row cache on this device: LOCAL_ROW_BYTES, less if
 * the device's local memory cannot also hold the three reduction arrays;
 * 0 turns the cache off. */
static size_t local_row_floats(const rumus_ctx *ctx) {
  const size_t wg = rumus__reduce_wg(ctx);
  const size_t reserved = 3 * wg * sizeof(float) + 1024;
  if (ctx->local_mem <= reserved) return 0;
  size_t bytes = (size_t)ctx->local_mem - reserved;
  if (bytes > LOCAL_ROW_BYTES) bytes = LOCAL_ROW_BYTES;
  bytes &= ~(size_t)15;
  return bytes >= 1024 ? bytes / sizeof(float) : 0;
}

/* The options of the program that runs `plan` (warm-up and launches),
 * whose kernels write losses of type `loss` (the per-row losses, or
 * xent_sum's loss).  The register-row programs (other work-group sizes)
 * leave the _wgl kernels out: their local arrays grow with WG.  An F32
 * loss adds no option (cl/xent.cl's default), so an F32 call's programs
 * are those rumus_cache_fill() builds. */
static void xent_options_loss(const rumus_ctx *ctx,
                              const rumus__row_plan *plan, rumus_dtype loss,
                              char *buf, size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, plan->storage, plan->wg,
                      plan->align4);
  const size_t local_floats =
      plan->kind == RUMUS__ROWS_REGS ? 0 : local_row_floats(ctx);
  int n = snprintf(buf, len, "%s -DDEVERR_XENT_TARGET=%d "
                   "-DXENT_LOCAL_FLOATS=%zu -DRED_ITEMS=%d -DROW_RUN=%d",
                   head, (int)RUMUS__DEVERR_XENT_TARGET, local_floats,
                   RED_ITEMS, ROW_RUN);
  if (plan->kind == RUMUS__ROWS_REGS && n > 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, " -DCACHE_V4=%d", plan->cache_v4);
  /* Only where set, as a 16-bit loss: F32 programs keep their options. */
  if (plan->align8 && n > 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, " -DRUMUS_ALIGN8=1");
  if (plan->kind == RUMUS__ROWS_ITEM && plan->storage != RUMUS_F32 &&
      ctx->local_mem >= 8 * ITEM_LOCAL_ROW * sizeof(float) + 1024 && n > 0 &&
      (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, " -DXENT_LOCAL_ROW=%d",
                  ITEM_LOCAL_ROW);
  if (loss != RUMUS_F32 && n > 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, " -DRUMUS_STORAGE_LOSS=%s",
             rumus__storage_tag(loss));
}

/* The row programs: per-row losses in float (scratch of MEAN and SUM, or
 * an F32 loss of NONE), or in the logits' type (a 16-bit loss of NONE). */
static void xent_options(const rumus_ctx *ctx, const rumus__row_plan *plan,
                         char *buf, size_t len) {
  xent_options_loss(ctx, plan, RUMUS_F32, buf, len);
}
static void xent_options_typed_loss(const rumus_ctx *ctx,
                                    const rumus__row_plan *plan, char *buf,
                                    size_t len) {
  xent_options_loss(ctx, plan, plan->storage, buf, len);
}

static const rumus__row_family XENT = {FILE_CL, xent_options,
                                        RUMUS__WIDE_DEFAULT};
static const rumus__row_family XENT_TYPED_LOSS = {
    FILE_CL, xent_options_typed_loss, RUMUS__WIDE_DEFAULT};

/* The options of the count and sum kernels: those of the one-group-per-row
 * F32 program on unaligned tensors, which holds them too (the per-row
 * losses they add are float scratch whatever the logits), with the
 * reduced loss of type `loss`. */
static void sums_options(const rumus_ctx *ctx, rumus_dtype loss, char *buf,
                         size_t len) {
  rumus__row_plan plan = {.kind = RUMUS__ROWS_GROUP,
                          .storage = RUMUS_F32,
                          .wg = rumus__reduce_wg(ctx)};
  xent_options_loss(ctx, &plan, loss, buf, len);
}

/* ---- Argument checks --------------------------------------------------- */

static int is_scalar(const rumus_tensor *t) { return t->numel == 1; }

/* The types (logits checked floating first): grad the logits' type, loss
 * F32 (PyTorch autocast's float loss of half logits) or the logits' type. */
static int check_types(rumus_ctx *ctx, const rumus_tensor *logits,
                       const rumus_tensor *targets, const rumus_tensor *loss,
                       const rumus_tensor *grad) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, OP, "targets", targets, RUMUS_I32));
  const rumus_dtype want =
      loss && loss->dtype == logits->dtype ? logits->dtype : RUMUS_F32;
  const int st = rumus__check_tensor(ctx, OP, "loss", loss, want);
  if (st == RUMUS_EDTYPE && logits->dtype != RUMUS_F32)
    rumus__append_msg(ctx, logits->dtype == RUMUS_F16
                               ? " or the logits' type f16"
                               : " or the logits' type bf16");
  RUMUS__FORWARD(st);
  if (grad)
    RUMUS__FORWARD(rumus__check_tensor(ctx, OP, "grad", grad, logits->dtype));
  return RUMUS_OK;
}

static int check_args(rumus_ctx *ctx, const rumus_tensor *logits,
                      const rumus_tensor *targets, const rumus_tensor *loss,
                      const rumus_tensor *grad, const rumus_xent_params *p) {
  char s1[RUMUS__SHAPE_BUF], s2[RUMUS__SHAPE_BUF];
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, OP, "logits", logits));
  RUMUS__FORWARD(check_types(ctx, logits, targets, loss, grad));
  RUMUS__FAIL_IF(p->reduction != RUMUS_REDUCTION_MEAN &&
                     p->reduction != RUMUS_REDUCTION_SUM &&
                     p->reduction != RUMUS_REDUCTION_NONE,
                 ctx, RUMUS_EINVAL,
                 "%s: reduction %d is not MEAN (0), SUM (1) or NONE (2)", OP,
                 (int)p->reduction);
  RUMUS__FAIL_IF(!(p->label_smoothing >= 0.0f && p->label_smoothing <= 1.0f),
                 ctx, RUMUS_EINVAL, "%s: label_smoothing %g is outside [0, 1]",
                 OP, (double)p->label_smoothing);
  RUMUS__FAIL_IF(logits->ndim < 1, ctx, RUMUS_ESHAPE,
                 "%s: logits %s must have a class dimension", OP,
                 rumus__shape_str(logits, s1, sizeof s1));
  /* targets: the logits' shape without the last dimension; for logits [C]
   * a scalar or [1]. */
  int ok;
  if (logits->ndim == 1) {
    ok = targets->ndim == 0 || (targets->ndim == 1 && targets->shape[0] == 1);
  } else {
    ok = targets->ndim == logits->ndim - 1;
    for (int i = 0; ok && i < targets->ndim; i++)
      ok = targets->shape[i] == logits->shape[i];
  }
  RUMUS__FAIL_IF(!ok, ctx, RUMUS_ESHAPE,
                 "%s: targets %s do not match logits %s (expected the logits' "
                 "shape without its last dimension)",
                 OP, rumus__shape_str(targets, s1, sizeof s1),
                 rumus__shape_str(logits, s2, sizeof s2));
  if (p->reduction == RUMUS_REDUCTION_NONE) {
    if (logits->ndim == 1)
      RUMUS__FAIL_IF(!is_scalar(loss) || loss->ndim > 1, ctx, RUMUS_ESHAPE,
                     "%s: loss %s must have one element (reduction NONE, "
                     "logits %s)",
                     OP, rumus__shape_str(loss, s1, sizeof s1),
                     rumus__shape_str(logits, s2, sizeof s2));
    else
      RUMUS__FORWARD(rumus__check_same_shape(ctx, OP, "loss", loss, "targets",
                                             targets));
  } else {
    RUMUS__FAIL_IF(!is_scalar(loss), ctx, RUMUS_ESHAPE,
                   "%s: loss %s must be a scalar (one element) for reduction "
                   "%s",
                   OP, rumus__shape_str(loss, s1, sizeof s1),
                   p->reduction == RUMUS_REDUCTION_MEAN ? "MEAN" : "SUM");
  }
  if (grad)
    RUMUS__FORWARD(rumus__check_same_shape(ctx, OP, "grad", grad, "logits",
                                           logits));
  /* No output may share memory with another tensor. */
  const char *names[4] = {"logits", "targets", "loss", "grad"};
  const rumus_tensor *ts[4] = {logits, targets, loss, grad};
  for (int o = 2; o < 4; o++)
    for (int i = 0; i < o; i++)
      RUMUS__FORWARD(rumus__check_overlap(ctx, OP, names[i], ts[i], names[o],
                                          ts[o], 0));
  return RUMUS_OK;
}

/* ---- Launches ---------------------------------------------------------- */

static int launch_wg(rumus_ctx *ctx, const char *opts, const char *kernel,
                     size_t groups, size_t nargs, const rumus__arg *args) {
  const rumus__kernel_ref k = {FILE_CL, opts, kernel};
  const size_t local = rumus__reduce_wg(ctx), global = groups * local;
  return rumus__launch(ctx, OP, &k, 1, &global, &local, nargs, args);
}

/* The scratch layout, in 4-byte elements. */
typedef struct {
  size_t lrow;  /* per-row losses (MEAN, SUM): rows */
  size_t lpart; /* loss partials: nparts */
  size_t cpart; /* count partials: nparts, then the count */
  size_t total;
} scratch_layout;

/* One call: its tensors and parameters and what its launches share. */
typedef struct {
  const rumus_tensor *logits, *targets;
  rumus_tensor *loss, *grad;
  const rumus_xent_params *p;
  size_t rows, cols, nparts;
  int mean, reduce;
  scratch_layout L;
  cl_mem scratch;
} xent_call;

/* 2. Per-row losses (into scratch for MEAN and SUM, else into loss) and the
 * gradient: one of the row kernels, in chunks of rows. */
static int launch_rows(rumus_ctx *ctx, const xent_call *c) {
  const rumus_tensor *logits = c->logits, *grad = c->grad;
  const rumus_xent_params *p = c->p;
  const size_t rows = c->rows, cols = c->cols;
  const rumus_tensor *rows_ts[2] = {logits, grad};
  const char *base = grad ? "xent_fwd_bwd" : "xent_fwd";
  /* Per-row losses in the loss's type only when they are the loss. */
  const rumus__row_family *fam =
      c->reduce || c->loss->dtype == RUMUS_F32 ? &XENT : &XENT_TYPED_LOSS;
  rumus__row_plan plan;
  RUMUS__FORWARD(rumus__row_plan_make(ctx, OP, fam, base, logits->dtype,
                                      rumus__row_align(ctx, rows_ts, 2, cols),
                                      cols, &plan));
  /* Rows too long for registers: the local-memory row cache pays off when
   * the row is read twice, with a gradient or with smoothing. */
  if (plan.kind == RUMUS__ROWS_GROUP && (grad || p->label_smoothing > 0.0f) &&
      cols <= local_row_floats(ctx))
    snprintf(plan.kernel, sizeof plan.kernel, "%s_wgl", base);
  const int regs = plan.kind == RUMUS__ROWS_REGS;
  const rumus__kernel_ref k = {FILE_CL, plan.options, plan.kernel};
  const size_t chunk =
      plan.kind == RUMUS__ROWS_ITEM ? ((size_t)1 << 30) : RUMUS__MAX_WG_ROWS;
  const cl_mem no_mem = NULL;
  const cl_mem lrow_mem = c->reduce ? c->scratch : c->loss->mem;
  const cl_mem g_mem = grad ? grad->mem : no_mem;
  const cl_mem c_mem = c->mean ? c->scratch : no_mem;
  const cl_float smooth = p->label_smoothing, gscale = p->grad_scale;
  const cl_int ignore = p->ignore_index, mean_i = c->mean;
  const cl_mem t_mem = c->targets->mem;
  const cl_ulong t_off = rumus__off(c->targets);
  int st = RUMUS_OK;
  for (size_t r0 = 0; st == RUMUS_OK && r0 < rows; r0 += chunk) {
    const cl_ulong nr = rows - r0 < chunk ? rows - r0 : chunk;
    const cl_ulong x_off = rumus__off(logits) + (cl_ulong)(r0 * cols);
    const cl_ulong tr_off = t_off + r0;
    const cl_ulong l_off = (c->reduce ? c->L.lrow : rumus__off(c->loss)) + r0;
    const cl_ulong g_off = grad ? rumus__off(grad) + (cl_ulong)(r0 * cols) : 0;
    const cl_ulong c_off = c->L.cpart + c->nparts, ncols = cols, row0 = r0;
    const rumus__arg a[] = {
        RUMUS__ARG(logits->mem), RUMUS__ARG(x_off),  RUMUS__ARG(t_mem),
        RUMUS__ARG(tr_off),      RUMUS__ARG(lrow_mem), RUMUS__ARG(l_off),
        RUMUS__ARG(g_mem),       RUMUS__ARG(g_off),  RUMUS__ARG(c_mem),
        RUMUS__ARG(c_off),       RUMUS__ARG(nr),     RUMUS__ARG(ncols),
        RUMUS__ARG(row0),        RUMUS__ARG(ignore), RUMUS__ARG(smooth),
        RUMUS__ARG(gscale),      RUMUS__ARG(mean_i), RUMUS__ARG(ctx->status),
        RUMUS__ARG(plan.rt)}; /* rt: _wgc only */
    const size_t nargs = sizeof a / sizeof a[0] - (regs ? 0 : 1);
    size_t local;
    const size_t global =
        rumus__row_plan_global(ctx, &plan, (size_t)nr, ROW_RUN, &local);
    st = rumus__launch(ctx, OP, &k, 1, &global, &local, nargs, a);
  }
  return st;
}

/* 1. and 3.: the count of non-ignored rows (MEAN) before the row kernels,
 * or the reduced loss (MEAN, SUM) after them; both in the program whose
 * xent_sum writes the loss's type. */
static int launch_sums(rumus_ctx *ctx, const xent_call *c, int count) {
  char opts[256];
  sums_options(ctx, c->loss->dtype, opts, sizeof opts);
  const cl_ulong n_rows = c->rows;
  const cl_int mean_i = c->mean;
  const cl_ulong count_off = c->L.cpart + c->nparts;
  if (count) {
    const cl_int ignore = c->p->ignore_index;
    const cl_ulong t_off = rumus__off(c->targets), cpart_off = c->L.cpart;
    const rumus__arg a[] = {RUMUS__ARG(c->targets->mem), RUMUS__ARG(t_off),
                            RUMUS__ARG(n_rows),          RUMUS__ARG(ignore),
                            RUMUS__ARG(c->scratch),      RUMUS__ARG(cpart_off),
                            RUMUS__ARG(ctx->status)};
    return launch_wg(ctx, opts, "xent_count", c->nparts, 7, a);
  }
  const cl_mem no_mem = NULL;
  const cl_mem c_mem = c->mean ? c->scratch : no_mem;
  const cl_ulong lrow_off = c->L.lrow, lpart_off = c->L.lpart;
  const cl_ulong loss_off = rumus__off(c->loss);
  const rumus__arg a[] = {RUMUS__ARG(c->scratch),   RUMUS__ARG(lrow_off),
                          RUMUS__ARG(n_rows),       RUMUS__ARG(c->scratch),
                          RUMUS__ARG(lpart_off),    RUMUS__ARG(c_mem),
                          RUMUS__ARG(count_off),    RUMUS__ARG(mean_i),
                          RUMUS__ARG(c->loss->mem), RUMUS__ARG(loss_off),
                          RUMUS__ARG(ctx->status)};
  return launch_wg(ctx, opts, "xent_sum", c->nparts, 11, a);
}

static int enqueue(rumus_ctx *ctx, const rumus_tensor *logits,
                   const rumus_tensor *targets, rumus_tensor *loss,
                   rumus_tensor *grad, const rumus_xent_params *p, size_t rows,
                   size_t cols) {
  xent_call c = {logits, targets, loss, grad, p, rows, cols, 1,
                 p->reduction == RUMUS_REDUCTION_MEAN,
                 p->reduction != RUMUS_REDUCTION_NONE,
                 {0, 0, 0, 0}, NULL};
  const size_t span = rumus__reduce_wg(ctx) * RED_ITEMS;
  if (rows) c.nparts = (rows + span - 1) / span;
  if (c.reduce) {
    c.L.lrow = 0;
    c.L.lpart = rows;
    c.L.cpart = c.L.lpart + c.nparts;
    c.L.total = c.L.cpart + (c.mean ? c.nparts + 1 : 0);
  }
  rumus__scratch_begin(ctx);
  int st = c.L.total ? rumus__scratch_slot(ctx, OP, RUMUS__SCRATCH_PARTIALS,
                                           c.L.total * sizeof(float),
                                           &c.scratch)
                     : RUMUS_OK;
  if (st == RUMUS_OK && c.mean) st = launch_sums(ctx, &c, 1);
  if (st == RUMUS_OK) st = launch_rows(ctx, &c);
  if (st == RUMUS_OK && c.reduce) st = launch_sums(ctx, &c, 0);
  rumus__scratch_end(ctx);
  return st;
}

int rumus_cross_entropy(rumus_ctx *ctx, const rumus_tensor *logits,
                        const rumus_tensor *targets, rumus_tensor *loss,
                        rumus_tensor *grad, const rumus_xent_params *params) {
  if (ctx == NULL) return RUMUS_ENULL;
  const rumus_xent_params defaults = RUMUS_XENT_DEFAULTS;
  const rumus_xent_params *p = params ? params : &defaults;
  RUMUS__FORWARD(check_args(ctx, logits, targets, loss, grad, p));
  size_t rows, cols;
  rumus__rows_cols(logits, &rows, &cols);
  /* An empty batch still gives the scalar (NaN for MEAN, 0 for SUM). */
  if (rows == 0 && p->reduction == RUMUS_REDUCTION_NONE) return RUMUS_OK;
  return enqueue(ctx, logits, targets, loss, grad, p, rows, cols);
}

/* F32 programs only, as rumus_cache_fill() documents: 16-bit programs are
 * built by their first call.  The count and sum kernels of F32 losses are
 * in the GROUP program this builds. */
int rumus__xent_warm(rumus_ctx *ctx) {
  return rumus__row_family_warm(ctx, &XENT, RUMUS_F32);
}
