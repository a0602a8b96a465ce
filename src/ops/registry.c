/*
 * registry.c - the op families rumus_cache_fill() warms up.  A new family
 * adds its warm function here and in ops.h.
 */
#include <stdio.h>

#include "ops.h"

const rumus__warm_fn rumus__warmers[] = {
    rumus__softmax_warm,     rumus__xent_warm,  rumus__gemm_warm,
    rumus__elementwise_warm, rumus__optim_warm,
};
const size_t rumus__warmers_count =
    sizeof rumus__warmers / sizeof rumus__warmers[0];

void rumus__base_options_wg(size_t wg, char *buf, size_t len) {
  snprintf(buf, len, "-DRUMUS_STORAGE=32 -DWG=%zu", wg);
}

void rumus__base_options(const rumus_ctx *ctx, char *buf, size_t len) {
  rumus__base_options_wg(rumus__reduce_wg(ctx), buf, len);
}

static void plan_set(rumus__row_plan *plan, rumus__rows_kind kind, size_t wg,
                     cl_uint rt, const char *base, const char *suffix,
                     const char *extra) {
  char opts[64];
  plan->kind = kind;
  plan->wg = wg;
  plan->rt = rt;
  plan->rows_per_group = kind == RUMUS__ROWS_REGS ? wg / rt : 1;
  rumus__base_options_wg(wg, opts, sizeof opts);
  snprintf(plan->options, sizeof plan->options, "%s %s", opts, extra);
  snprintf(plan->kernel, sizeof plan->kernel, "%s_%s", base, suffix);
}

int rumus__row_plan_make(rumus_ctx *ctx, const char *op, const char *file,
                         const char *base, const char *extra,
                         const char *long_extra, size_t cols, int cache_v4,
                         rumus__row_plan *plan) {
  const size_t wg = rumus__reduce_wg(ctx), per_item = 4 * (size_t)cache_v4;
  if (!rumus__gpu_variant(ctx)) {
    plan_set(plan, RUMUS__ROWS_ITEM, wg, 1, base, "row", extra);
    return RUMUS_OK;
  }
  if (cols <= wg * per_item) {
    /* rt: the fewest work-items (a power of two, at least 8 for coalesced
     * loads) that hold the row, so short rows share a work-group and its
     * barriers. */
    cl_uint rt = 8;
    while (rt < wg && (size_t)rt * per_item < cols) rt *= 2;
    if (rt > wg) rt = (cl_uint)wg;
    plan_set(plan, RUMUS__ROWS_REGS, wg, rt, base, "wgc", extra);
    return RUMUS_OK;
  }
  const size_t lw = rumus__long_row_wg(ctx);
  if (lw > wg && cols <= lw * per_item) {
    plan_set(plan, RUMUS__ROWS_REGS, lw, (cl_uint)lw, base, "wgc", long_extra);
    const rumus__kernel_ref k = {file, plan->options, plan->kernel};
    size_t limit;
    RUMUS__FORWARD(rumus__kernel_wg_limit(ctx, op, &k, &limit));
    if (limit >= lw) return RUMUS_OK;
  }
  plan_set(plan, RUMUS__ROWS_GROUP, wg, 1, base, "wg", extra);
  return RUMUS_OK;
}

size_t rumus__row_plan_global(const rumus_ctx *ctx, const rumus__row_plan *plan,
                              size_t rows, size_t *local) {
  if (plan->kind == RUMUS__ROWS_ITEM) {
    *local = rumus__row_local(ctx, rows);
    return rows;
  }
  *local = plan->wg;
  return (rows + plan->rows_per_group - 1) / plan->rows_per_group * plan->wg;
}

size_t rumus__row_local(const rumus_ctx *ctx, size_t rows) {
  return rows >= 8 * (size_t)ctx->compute_units ? 8 : 1;
}
