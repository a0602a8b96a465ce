/*
 * softmax.c - softmax / log-softmax forward and backward over the last
 * dimension (kernels in cl/softmax.cl).  Every tensor of a call has one
 * floating storage type, the first tensor's (x, or y for the backward):
 * the program's RUMUS_STORAGE.
 */
#include <stdio.h>

#include "ops.h"

static const char *const FILE_CL = "softmax.cl";

/* Rows per work-item of the forward _row kernels (ROW_RUN, cl/softmax.cl's
 * default). */
#define ROW_RUN 8

/* Rows of up to this many elements keep their exps in local memory in
 * the 16-bit _row forward (SOFTMAX_LOCAL_ROW), for each of up to 8
 * work-items (rumus__row_local), where the device has the room. */
#define LOCAL_ROW 2048

/* The options of the program that runs `plan` (warm-up and launches).
 * RUMUS_ALIGN8 and SOFTMAX_LOCAL_ROW only where set (16-bit programs):
 * F32 programs keep the options that rumus_cache_fill builds. */
static void softmax_options(const rumus_ctx *ctx, const rumus__row_plan *plan,
                            char *buf, size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, plan->storage, plan->wg,
                      plan->align4);
  const char *a8 = plan->align8 ? " -DRUMUS_ALIGN8=1" : "";
  if (plan->kind == RUMUS__ROWS_REGS) {
    snprintf(buf, len, "%s -DCACHE_V4=%d%s", head, plan->cache_v4, a8);
  } else if (plan->kind == RUMUS__ROWS_ITEM && plan->storage != RUMUS_F32 &&
             ctx->local_mem >= 8 * LOCAL_ROW * sizeof(float) + 1024) {
    snprintf(buf, len, "%s -DROW_RUN=%d -DSOFTMAX_LOCAL_ROW=%d", head,
             ROW_RUN, LOCAL_ROW);
  } else {
    snprintf(buf, len, "%s -DROW_RUN=%d%s", head, ROW_RUN, a8);
  }
}

static const rumus__row_family SOFTMAX = {FILE_CL, softmax_options,
                                           RUMUS__WIDE_OPT_IN};

/* Launches `base`_row, _wgc or _wg (see rumus__row_plan_make) over rows x
 * cols; ts are the tensors in kernel order, each passed as (buffer,
 * element offset). */
static int run_rows(rumus_ctx *ctx, const char *op, const char *base,
                    const rumus_tensor *const *ts, int nt, size_t rows,
                    size_t cols) {
  rumus__row_plan plan;
  RUMUS__FORWARD(rumus__row_plan_make(ctx, op, &SOFTMAX, base, ts[0]->dtype,
                                      rumus__row_align(ctx, ts, nt, cols), cols,
                                      &plan));
  const rumus__kernel_ref k = {FILE_CL, plan.options, plan.kernel};
  const size_t chunk =
      plan.kind == RUMUS__ROWS_ITEM ? ((size_t)1 << 30) : RUMUS__MAX_WG_ROWS;
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    cl_ulong nrows = rows - r0 < chunk ? rows - r0 : chunk;
    cl_ulong ncols = cols;
    cl_ulong offs[3];
    rumus__arg args[9];
    size_t na = 0;
    for (int i = 0; i < nt; i++) {
      offs[i] = rumus__off(ts[i]) + (cl_ulong)(r0 * cols);
      args[na++] = RUMUS__ARG(ts[i]->mem);
      args[na++] = RUMUS__ARG(offs[i]);
    }
    args[na++] = RUMUS__ARG(nrows);
    args[na++] = RUMUS__ARG(ncols);
    if (plan.kind == RUMUS__ROWS_REGS) args[na++] = RUMUS__ARG(plan.rt);
    /* The forward _row kernels take ROW_RUN rows per work-item. */
    size_t local;
    const size_t global = rumus__row_plan_global(
        ctx, &plan, (size_t)nrows, nt == 2 ? ROW_RUN : 1, &local);
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local, na, args));
  }
  return RUMUS_OK;
}

/* t is floating (first: any of F32, F16, BF16; then the first's type,
 * `first` NULL for the first) and has a last dimension. */
static int check_rows_tensor(rumus_ctx *ctx, const char *op, const char *name,
                             const rumus_tensor *t,
                             const rumus_tensor *first) {
  if (first)
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, first->dtype));
  else
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, name, t));
  RUMUS__FAIL_IF(t->ndim < 1, ctx, RUMUS_ESHAPE,
                 "%s: %s must have at least one dimension", op, name);
  return RUMUS_OK;
}

static int forward(rumus_ctx *ctx, const char *op, const char *base,
                   const rumus_tensor *x, rumus_tensor *y) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "x", x, NULL));
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "y", y, x));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "x", x, "y", y));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "y", y, 1));
  size_t rows, cols;
  rumus__rows_cols(x, &rows, &cols);
  if (rows == 0 || cols == 0) return RUMUS_OK;
  const rumus_tensor *ts[2] = {x, y};
  return run_rows(ctx, op, base, ts, 2, rows, cols);
}

static int backward(rumus_ctx *ctx, const char *op, const char *base,
                    const rumus_tensor *y, const rumus_tensor *dy,
                    rumus_tensor *dx) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "y", y, NULL));
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "dy", dy, y));
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "dx", dx, y));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "y", y, "dy", dy));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "y", y, "dx", dx));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dy", dy, "dx", dx, 1));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "y", y, "dx", dx, 0));
  size_t rows, cols;
  rumus__rows_cols(y, &rows, &cols);
  if (rows == 0 || cols == 0) return RUMUS_OK;
  const rumus_tensor *ts[3] = {y, dy, dx};
  return run_rows(ctx, op, base, ts, 3, rows, cols);
}

int rumus_softmax_fwd(rumus_ctx *ctx, const rumus_tensor *x, rumus_tensor *y) {
  return forward(ctx, "rumus_softmax_fwd", "softmax_fwd", x, y);
}
int rumus_log_softmax_fwd(rumus_ctx *ctx, const rumus_tensor *x,
                          rumus_tensor *y) {
  return forward(ctx, "rumus_log_softmax_fwd", "log_softmax_fwd", x, y);
}
int rumus_softmax_bwd(rumus_ctx *ctx, const rumus_tensor *y,
                      const rumus_tensor *dy, rumus_tensor *dx) {
  return backward(ctx, "rumus_softmax_bwd", "softmax_bwd", y, dy, dx);
}
int rumus_log_softmax_bwd(rumus_ctx *ctx, const rumus_tensor *y,
                          const rumus_tensor *dy, rumus_tensor *dx) {
  return backward(ctx, "rumus_log_softmax_bwd", "log_softmax_bwd", y, dy, dx);
}

/* F32 programs only, as rumus_cache_fill() documents: 16-bit programs are
 * built by their first call. */
int rumus__softmax_warm(rumus_ctx *ctx) {
  return rumus__row_family_warm(ctx, &SOFTMAX, RUMUS_F32);
}
