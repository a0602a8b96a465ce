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

void rumus__base_options(const rumus_ctx *ctx, char *buf, size_t len) {
  snprintf(buf, len, "-DRUMUS_STORAGE=32 -DWG=%zu", rumus__reduce_wg(ctx));
}

size_t rumus__row_local(const rumus_ctx *ctx, size_t rows) {
  return rows >= 8 * (size_t)ctx->compute_units ? 8 : 1;
}
