/*
 * registry.c - the op families rumus_cache_fill() warms up (a new family
 * adds its warm function here and in ops.h), and what the families share:
 * the head of every program's options, the alignment decision and the row
 * plans of the reduction kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

const rumus__warm_fn rumus__warmers[] = {
    rumus__softmax_warm,     rumus__xent_warm,  rumus__gemm_warm,
    rumus__elementwise_warm, rumus__optim_warm, rumus__quant_warm,
    rumus__dropout_warm,
    rumus__pool_warm,
    rumus__batchnorm_warm,
    rumus__conv_warm,
    rumus__embedding_warm,
    rumus__layernorm_warm,
    rumus__tensorops_warm,
    rumus__attention_warm,
};
const size_t rumus__warmers_count =
    sizeof rumus__warmers / sizeof rumus__warmers[0];

const char *rumus__storage_tag(rumus_dtype storage) {
  switch (storage) {
    case RUMUS_F16: return "F16";
    case RUMUS_BF16: return "BF16";
    default: return "F32";
  }
}

void rumus__options_head(char *buf, size_t len, rumus_dtype storage,
                         size_t wg, int align4) {
  snprintf(buf, len, "-DRUMUS_STORAGE=%s -DWG=%zu -DRUMUS_ALIGN4=%d",
           rumus__storage_tag(storage), wg, align4 ? 1 : 0);
}

void rumus__nv_maxrreg(const rumus_ctx *ctx, const char *env, int dflt,
                       char *buf, size_t len) {
  buf[0] = '\0';
  if (strstr(ctx->name, "NVIDIA CUDA") == NULL) return;
  int n = dflt;
  const char *v = getenv(env);
  if (v != NULL && *v != '\0') {
    char *end;
    const long l = strtol(v, &end, 10);
    n = *end == '\0' && l >= 32 && l <= 255 ? (int)l : 0;
  }
  if (n) snprintf(buf, len, " -cl-nv-maxrregcount=%d", n);
}

int rumus__aligned(const rumus_tensor *t, size_t elem, size_t elems) {
  if ((rumus__off(t) + elem) % elems != 0) return 0;
  const size_t bytes = elems * rumus_dtype_size(t->dtype);
  return t->host_align == 0 || t->host_align % bytes == 0;
}

int rumus__align4(const rumus_ctx *ctx, const rumus_tensor *const *ts, int nt,
                  size_t cols) {
  if (!rumus__gpu_variant(ctx) || cols % 4 != 0) return 0;
  for (int i = 0; i < nt; i++)
    if (ts[i] && !rumus__aligned(ts[i], 0, 4)) return 0;
  return 1;
}

int rumus__row_align(const rumus_ctx *ctx, const rumus_tensor *const *ts,
                     int nt, size_t cols) {
  if (!rumus__align4(ctx, ts, nt, cols)) return 0;
  if (cols % 8 != 0) return RUMUS__ROW_ALIGN4;
  int sixteen = 0;
  for (int i = 0; i < nt; i++) {
    if (!ts[i]) continue;
    if (rumus_dtype_size(ts[i]->dtype) == 2) sixteen = 1;
    if (!rumus__aligned(ts[i], 0, 8)) return RUMUS__ROW_ALIGN4;
  }
  return sixteen ? RUMUS__ROW_ALIGN4 | RUMUS__ROW_ALIGN8 : RUMUS__ROW_ALIGN4;
}

/* The REGS rungs of the work-group variant, smallest first: (work-group
 * size, float4 per work-item).  On the H200 rows of 1024 ran fastest with
 * 128 (4 rows per group: 138 us for softmax at 65536 x 1024 against 148
 * with 256 and 231 with 512), and 8192 needs 256 x 8.  Longer rows take
 * the wide rung below where the family does.  One such row per compute
 * unit leaves little work to overlap with its barriers (a 1024 x 8 rung
 * ran softmax at 32000 columns 1.6x slower than the strided kernel). */
static const struct {
  size_t wg;
  int cache_v4;
} RUNGS[] = {{128, 8}, {256, 8}};

#define N_RUNGS (sizeof RUNGS / sizeof RUNGS[0])

/* A rung of 512 work-items of 16 float4 for the families that take it
 * (rumus__row_family.wide_rung): rows up to 32768 read once into
 * registers where the strided kernel reads them twice.  Its programs are
 * built with a 128-register cap on NVIDIA's driver (RUMUS_ROWS_MAXRREG),
 * so that 512 work-items fit by rumus__kernel_wg_limit()'s count.  On the
 * H200 at 8192 x 32000 it took cross-entropy from 772 to 671 us of kernel
 * time, but softmax's forward from 788 to 835 us and its backward (two
 * rows in registers) from 1240 to 3799 us: so cross-entropy takes it by
 * default and softmax only when asked (RUMUS_ROWS_WIDE_RUNG=1; =0 turns
 * it off for both). */
#define WIDE_RUNG_WG 512
#define WIDE_RUNG_V4 16

static int wide_rung_on(const rumus_ctx *ctx, const rumus__row_family *fam) {
  if (fam->wide_rung == RUMUS__WIDE_NEVER || WIDE_RUNG_WG > ctx->max_wg)
    return 0;
  const char *v = getenv("RUMUS_ROWS_WIDE_RUNG");
  if (v != NULL && strcmp(v, "1") == 0) return 1;
  if (v != NULL && strcmp(v, "0") == 0) return 0;
  return fam->wide_rung == RUMUS__WIDE_DEFAULT;
}

/* Sets the plan's geometry, kernel name and options. */
static void plan_set(const rumus_ctx *ctx, const rumus__row_family *fam,
                     rumus__row_plan *plan, rumus__rows_kind kind, size_t wg,
                     cl_uint rt, int cache_v4, const char *base,
                     const char *suffix) {
  plan->kind = kind;
  plan->wg = wg;
  plan->rt = rt;
  plan->cache_v4 = kind == RUMUS__ROWS_REGS ? cache_v4 : 0;
  plan->rows_per_group = kind == RUMUS__ROWS_REGS ? wg / rt : 1;
  fam->options(ctx, plan, plan->options, sizeof plan->options);
  /* Register programs of more than 256 work-items (the wide rung, or a
   * user's work-group size) get NVIDIA's register cap, without which
   * rumus__kernel_wg_limit() would not admit them there. */
  if (kind == RUMUS__ROWS_REGS && wg > 256) {
    const size_t used = strlen(plan->options);
    rumus__nv_maxrreg(ctx, "RUMUS_ROWS_MAXRREG", 128, plan->options + used,
                      sizeof plan->options - used);
  }
  snprintf(plan->kernel, sizeof plan->kernel, "%s_%s", base, suffix);
}

/* rt of a REGS plan on (wg, cache_v4) for rows of `cols`: the fewest
 * work-items (a power of two, at least 8 for coalesced loads) that hold
 * the row, so short rows share a work-group and its barriers; 0 if the
 * rung cannot hold the row. */
static cl_uint regs_rt(const rumus_ctx *ctx, size_t cols, size_t wg,
                       int cache_v4) {
  const size_t per_item = 4 * (size_t)cache_v4;
  if (wg > ctx->max_wg || cols > wg * per_item) return 0;
  cl_uint rt = 8;
  while (rt < wg && (size_t)rt * per_item < cols) rt *= 2;
  return rt > wg ? (cl_uint)wg : rt;
}

/* A REGS plan on (wg, cache_v4) if it holds the row and the device runs
 * the kernel at wg; *ok says whether it does. */
static int try_regs(rumus_ctx *ctx, const char *op,
                    const rumus__row_family *fam, const char *base,
                    size_t cols, size_t wg, int cache_v4,
                    rumus__row_plan *plan, int *ok) {
  *ok = 0;
  const cl_uint rt = regs_rt(ctx, cols, wg, cache_v4);
  if (rt == 0) return RUMUS_OK;
  plan_set(ctx, fam, plan, RUMUS__ROWS_REGS, wg, rt, cache_v4, base, "wgc");
  const rumus__kernel_ref k = {fam->file, plan->options, plan->kernel};
  size_t limit;
  RUMUS__FORWARD(rumus__kernel_wg_limit(ctx, op, &k, &limit));
  *ok = limit >= wg;
  return RUMUS_OK;
}

int rumus__row_plan_make(rumus_ctx *ctx, const char *op,
                         const rumus__row_family *fam, const char *base,
                         rumus_dtype storage, int align, size_t cols,
                         rumus__row_plan *plan) {
  const size_t wg = rumus__reduce_wg(ctx);
  plan->storage = storage;
  plan->align4 = (align & RUMUS__ROW_ALIGN4) != 0;
  plan->align8 = (align & RUMUS__ROW_ALIGN8) != 0;
  if (!rumus__gpu_variant(ctx)) {
    plan_set(ctx, fam, plan, RUMUS__ROWS_ITEM, wg, 1, 0, base, "row");
    return RUMUS_OK;
  }
  int ok = 0;
  if (ctx->opt_wg) {
    RUMUS__FORWARD(try_regs(ctx, op, fam, base, cols, wg, 8, plan, &ok));
  } else {
    for (size_t i = 0; !ok && i < N_RUNGS; i++)
      RUMUS__FORWARD(try_regs(ctx, op, fam, base, cols, RUNGS[i].wg,
                              RUNGS[i].cache_v4, plan, &ok));
    if (!ok && wide_rung_on(ctx, fam))
      RUMUS__FORWARD(try_regs(ctx, op, fam, base, cols, WIDE_RUNG_WG,
                              WIDE_RUNG_V4, plan, &ok));
  }
  if (!ok) plan_set(ctx, fam, plan, RUMUS__ROWS_GROUP, wg, 1, 0, base, "wg");
  return RUMUS_OK;
}

/* Builds the program of one plan shape. */
static int warm_plan(rumus_ctx *ctx, const rumus__row_family *fam,
                     rumus__row_plan *plan, rumus__rows_kind kind, size_t wg,
                     int cache_v4) {
  cl_program prog;
  plan_set(ctx, fam, plan, kind, wg, 1, cache_v4, "", "");
  return rumus__program_get(ctx, "rumus_cache_fill", fam->file, plan->options,
                            &prog);
}

int rumus__row_family_warm(rumus_ctx *ctx, const rumus__row_family *fam,
                           rumus_dtype storage) {
  const size_t wg = rumus__reduce_wg(ctx);
  rumus__row_plan plan;
  plan.storage = storage;
  plan.align8 = 0; /* F32 programs: never 8-wide */
  if (!rumus__gpu_variant(ctx)) {
    plan.align4 = 0;
    return warm_plan(ctx, fam, &plan, RUMUS__ROWS_ITEM, wg, 0);
  }
  for (int align4 = 0; align4 <= 1; align4++) {
    plan.align4 = align4;
    if (ctx->opt_wg) { /* the user's size is the only rung */
      RUMUS__FORWARD(warm_plan(ctx, fam, &plan, RUMUS__ROWS_REGS, wg, 8));
    } else {
      for (size_t i = 0; i < N_RUNGS; i++)
        if (RUNGS[i].wg <= ctx->max_wg)
          RUMUS__FORWARD(warm_plan(ctx, fam, &plan, RUMUS__ROWS_REGS,
                                   RUNGS[i].wg, RUNGS[i].cache_v4));
      if (wide_rung_on(ctx, fam))
        RUMUS__FORWARD(warm_plan(ctx, fam, &plan, RUMUS__ROWS_REGS,
                                 WIDE_RUNG_WG, WIDE_RUNG_V4));
    }
    RUMUS__FORWARD(warm_plan(ctx, fam, &plan, RUMUS__ROWS_GROUP, wg, 0));
  }
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

size_t rumus__row_local(const rumus_ctx *ctx, size_t rows) {
  return rows >= 8 * (size_t)ctx->compute_units ? 8 : 1;
}
