/*
 * softmax.c - softmax / log-softmax forward and backward over the last
 * dimension (kernels in cl/softmax.cl).
 */
#include <stdio.h>

#include "ops.h"

static const char *const FILE_CL = "softmax.cl";

/* float4 groups per work-item that the *_wgc kernels keep in registers
 * (cl/softmax.cl): rows of up to 4 * WG * CACHE_V4 elements are read from
 * memory once.  8 keeps the backward's two cached rows within 64 registers. */
enum { CACHE_V4 = 8 };

static void program_options(const rumus_ctx *ctx, char *buf, size_t len) {
  char base[96];
  rumus__base_options(ctx, base, sizeof base);
  snprintf(buf, len, "%s -DCACHE_V4=%d", base, CACHE_V4);
}

/* Launches `base`_wg or `base`_row over rows x cols; args are the tensors'
 * (buffer, element offset) pairs in kernel order. */
static int run_rows(rumus_ctx *ctx, const char *op, const char *base,
                    const rumus_tensor *const *ts, int nt, size_t rows,
                    size_t cols) {
  char opts[128], kname[64];
  program_options(ctx, opts, sizeof opts);
  const int wg_variant = rumus__gpu_variant(ctx);
  const size_t wg = rumus__reduce_wg(ctx);
  const int cached = wg_variant && cols <= 4 * wg * CACHE_V4;
  /* *_wgc: rt work-items per row, the fewest (a power of two, at least 8
   * for coalesced loads) that hold the row in CACHE_V4 float4 each, so
   * short rows share a work-group and its barriers. */
  cl_uint rt = 8;
  while (rt < wg && (size_t)rt * CACHE_V4 * 4 < cols) rt *= 2;
  if (rt > wg) rt = (cl_uint)wg;
  const size_t rows_per_group = cached ? wg / rt : 1;
  snprintf(kname, sizeof kname, "%s_%s", base,
           !wg_variant ? "row" : cached ? "wgc" : "wg");
  const rumus__kernel_ref k = {FILE_CL, opts, kname};
  const size_t chunk = wg_variant ? RUMUS__MAX_WG_ROWS : ((size_t)1 << 30);
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
    if (cached) args[na++] = RUMUS__ARG(rt);
    size_t global, local;
    if (wg_variant) {
      local = wg;
      global = ((size_t)nrows + rows_per_group - 1) / rows_per_group * local;
    } else {
      local = rumus__row_local(ctx, (size_t)nrows);
      global = (size_t)nrows;
    }
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local, na, args));
  }
  return RUMUS_OK;
}

static int check_rows_tensor(rumus_ctx *ctx, const char *op, const char *name,
                             const rumus_tensor *t) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, RUMUS_F32));
  RUMUS__FAIL_IF(t->ndim < 1, ctx, RUMUS_ESHAPE,
                 "%s: %s must have at least one dimension", op, name);
  return RUMUS_OK;
}

static int forward(rumus_ctx *ctx, const char *op, const char *base,
                   const rumus_tensor *x, rumus_tensor *y) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "x", x));
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "y", y));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "x", x, "y", y));
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
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "y", y));
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "dy", dy));
  RUMUS__FORWARD(check_rows_tensor(ctx, op, "dx", dx));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "y", y, "dy", dy));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "y", y, "dx", dx));
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

int rumus__softmax_warm(rumus_ctx *ctx) {
  char opts[128];
  cl_program p;
  program_options(ctx, opts, sizeof opts);
  return rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &p);
}
