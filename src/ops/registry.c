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

/* The REGS rungs of the work-group variant, smallest first: (work-group
 * size, float4 per work-item).  On the H200 rows of 1024 ran fastest with
 * 128 (4 rows per group: 138 us for softmax at 65536 x 1024 against 148
 * with 256 and 231 with 512), and 8192 needs 256 x 8.  A rung of 512 x 16
 * (rows up to 32768 in registers) was tried and dropped: NVIDIA's compiler
 * needs more than 128 registers for it, so the H200 cannot run it at 512
 * (CL_KERNEL_WORK_GROUP_SIZE), and one such row per compute unit left no
 * work to overlap with its barriers anyway (a 1024 x 8 rung ran softmax at
 * 32000 columns 1.6x slower than the strided kernel). */
static const struct {
  size_t wg;
  int cache_v4;
} RUNGS[] = {{128, 8}, {256, 8}};

static void plan_set(rumus__row_plan *plan, rumus__rows_kind kind, size_t wg,
                     cl_uint rt, int cache_v4, const char *base,
                     const char *suffix, const char *extra,
                     const char *align) {
  char opts[64];
  plan->kind = kind;
  plan->wg = wg;
  plan->rt = rt;
  plan->rows_per_group = kind == RUMUS__ROWS_REGS ? wg / rt : 1;
  rumus__base_options_wg(wg, opts, sizeof opts);
  if (kind == RUMUS__ROWS_REGS)
    snprintf(plan->options, sizeof plan->options, "%s -DCACHE_V4=%d %s %s",
             opts, cache_v4, extra, align ? align : "");
  else
    snprintf(plan->options, sizeof plan->options, "%s %s %s", opts, extra,
             align ? align : "");
  snprintf(plan->kernel, sizeof plan->kernel, "%s_%s", base, suffix);
}

/* A REGS plan on (wg, cache_v4) if it holds the row and the device runs
 * the kernel at wg; *ok says whether it does. */
static int try_regs(rumus_ctx *ctx, const char *op, const char *file,
                    const char *base, const rumus__row_opts *opts, size_t cols,
                    size_t wg, int cache_v4, rumus__row_plan *plan, int *ok) {
  *ok = 0;
  const size_t per_item = 4 * (size_t)cache_v4;
  if (wg > ctx->max_wg || cols > wg * per_item) return RUMUS_OK;
  /* rt: the fewest work-items (a power of two, at least 8 for coalesced
   * loads) that hold the row, so short rows share a work-group and its
   * barriers. */
  cl_uint rt = 8;
  while (rt < wg && (size_t)rt * per_item < cols) rt *= 2;
  if (rt > wg) rt = (cl_uint)wg;
  plan_set(plan, RUMUS__ROWS_REGS, wg, rt, cache_v4, base, "wgc", opts->regs,
           opts->align);
  const rumus__kernel_ref k = {file, plan->options, plan->kernel};
  size_t limit;
  RUMUS__FORWARD(rumus__kernel_wg_limit(ctx, op, &k, &limit));
  *ok = limit >= wg;
  return RUMUS_OK;
}

int rumus__row_plan_make(rumus_ctx *ctx, const char *op, const char *file,
                         const char *base, const rumus__row_opts *opts,
                         size_t cols, rumus__row_plan *plan) {
  const size_t wg = rumus__reduce_wg(ctx);
  if (!rumus__gpu_variant(ctx)) {
    plan_set(plan, RUMUS__ROWS_ITEM, wg, 1, 0, base, "row", opts->plain,
             opts->align);
    return RUMUS_OK;
  }
  int ok = 0;
  if (ctx->opt_wg) {
    RUMUS__FORWARD(try_regs(ctx, op, file, base, opts, cols, wg, 8, plan, &ok));
  } else {
    for (size_t i = 0; !ok && i < sizeof RUNGS / sizeof RUNGS[0]; i++)
      RUMUS__FORWARD(try_regs(ctx, op, file, base, opts, cols, RUNGS[i].wg,
                              RUNGS[i].cache_v4, plan, &ok));
  }
  if (!ok)
    plan_set(plan, RUMUS__ROWS_GROUP, wg, 1, 0, base, "wg", opts->plain,
             opts->align);
  return RUMUS_OK;
}

size_t rumus__row_plan_global(const rumus_ctx *ctx, const rumus__row_plan *plan,
                              size_t rows, size_t item_rows, size_t *local) {
  if (plan->kind == RUMUS__ROWS_ITEM) {
    const size_t items = (rows + item_rows - 1) / item_rows;
    *local = rumus__row_local(ctx, items);
    return items;
  }
  *local = plan->wg;
  return (rows + plan->rows_per_group - 1) / plan->rows_per_group * plan->wg;
}

const char *rumus__align4_option(const rumus_ctx *ctx,
                                 const rumus_tensor *const *ts, int nt,
                                 size_t cols) {
  /* The CPU variant's kernels read float8 / scalars: no second program. */
  if (!rumus__gpu_variant(ctx) || cols % 4 != 0) return "";
  for (int i = 0; i < nt; i++)
    if (ts[i] && rumus__off(ts[i]) % 4 != 0) return "";
  return "-DRUMUS_ALIGN4=1";
}

size_t rumus__row_local(const rumus_ctx *ctx, size_t rows) {
  return rows >= 8 * (size_t)ctx->compute_units ? 8 : 1;
}
