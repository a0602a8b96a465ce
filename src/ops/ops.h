/*
 * ops.h - what the op families share with the framework: the warm-up
 * functions that rumus_cache_fill() runs (one per family, listed in
 * registry.c), and small helpers for option strings and row launches.
 */
#ifndef RUMUS_OPS_H
#define RUMUS_OPS_H

#include "../internal.h"

typedef int (*rumus__warm_fn)(rumus_ctx *ctx);
extern RUMUS__HIDDEN const rumus__warm_fn rumus__warmers[];
extern RUMUS__HIDDEN const size_t rumus__warmers_count;

RUMUS__HIDDEN int rumus__softmax_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__xent_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__gemm_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__elementwise_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__optim_warm(rumus_ctx *ctx);

/* The options every floating-point program gets: storage type and the
 * reduction work-group size, e.g. "-DRUMUS_STORAGE=32 -DWG=256". */
RUMUS__HIDDEN void rumus__base_options(const rumus_ctx *ctx, char *buf,
                                       size_t len);
/* The same with a given work-group size. */
RUMUS__HIDDEN void rumus__base_options_wg(size_t wg, char *buf, size_t len);

/* How the row kernels of softmax and cross-entropy (`base`_row, _wgc, _wg
 * in cl/softmax.cl and cl/xent.cl) cover rows of `cols` elements:
 *   ITEM   one work-item per row, no barriers (`base`_row: CPU variant);
 *   REGS   rt work-items per row holding it in registers, CACHE_V4 float4
 *          each, wg / rt rows per work-group (`base`_wgc): the first rung
 *          of RUNGS (registry.c) that holds the row, if the
 *          device runs the kernel at that size;
 *   GROUP  one work-group of the reduction size per row, strided (`base`_wg):
 *          longer rows.
 * A RUMUS_OPT_WORKGROUP_SIZE set by the user is the only rung (CACHE_V4 8).
 * The programs' options: the base ones with the plan's WG, then
 * opts->plain (ITEM, GROUP) or " -DCACHE_V4=n " and opts->regs (REGS),
 * then opts->align (rumus__align4_option for the op's tensors; NULL for
 * none). */
typedef enum {
  RUMUS__ROWS_ITEM,
  RUMUS__ROWS_REGS,
  RUMUS__ROWS_GROUP
} rumus__rows_kind;
typedef struct {
  const char *plain, *regs, *align;
} rumus__row_opts;
typedef struct {
  rumus__rows_kind kind;
  size_t wg;             /* the local size and the program's WG */
  cl_uint rt;            /* REGS: work-items per row */
  size_t rows_per_group; /* REGS: wg / rt; GROUP: 1 */
  char options[256];
  char kernel[64];       /* `base` and the variant's suffix */
} rumus__row_plan;
/* Fills *plan; builds the REGS kernel to learn whether the device runs it
 * at the rung's size.  @return RUMUS_OK or the build's error. */
RUMUS__HIDDEN int rumus__row_plan_make(rumus_ctx *ctx, const char *op,
                                       const char *file, const char *base,
                                       const rumus__row_opts *opts,
                                       size_t cols, rumus__row_plan *plan);
/* Global size of a plan's launch over `rows` rows; item_rows is the rows
 * per work-item of the kernel when the plan is ITEM (the _row kernels that
 * take runs of rows), ignored otherwise. */
RUMUS__HIDDEN size_t rumus__row_plan_global(const rumus_ctx *ctx,
                                            const rumus__row_plan *plan,
                                            size_t rows, size_t item_rows,
                                            size_t *local);

/* Local size of one-work-item-per-row kernels (CPU variant): enough
 * work-groups for every compute unit, few distinct sizes (PoCL compiles a
 * work-group function per local size). */
RUMUS__HIDDEN size_t rumus__row_local(const rumus_ctx *ctx, size_t rows);

/* "-DRUMUS_ALIGN4=1" (cl/common.cl) when the GPU variant runs and every
 * tensor of ts[0 .. nt) (NULL entries skipped) starts at an element offset
 * that is a multiple of 4, as does every row of `cols` elements (cols = 0
 * for flat ops); "" otherwise.  Buffers themselves are aligned to at least
 * 16 bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN). */
RUMUS__HIDDEN const char *rumus__align4_option(const rumus_ctx *ctx,
                                               const rumus_tensor *const *ts,
                                               int nt, size_t cols);

/* Most rows one launch of a work-group-per-row kernel covers; larger
 * tensors are launched in chunks (NDRange limits of some drivers). */
#define RUMUS__MAX_WG_ROWS ((size_t)1 << 22)

#endif /* RUMUS_OPS_H */
