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

/* Local size of one-work-item-per-row kernels (CPU variant): enough
 * work-groups for every compute unit, few distinct sizes (PoCL compiles a
 * work-group function per local size). */
RUMUS__HIDDEN size_t rumus__row_local(const rumus_ctx *ctx, size_t rows);

/* Most rows one launch of a work-group-per-row kernel covers; larger
 * tensors are launched in chunks (NDRange limits of some drivers). */
#define RUMUS__MAX_WG_ROWS ((size_t)1 << 22)

#endif /* RUMUS_OPS_H */
