/* optim.c - placeholder until the optimizer family lands. */
#include "ops.h"
#define NYI(name) return rumus__fail(ctx, RUMUS_EUNSUPPORTED, name ": not built yet")
int rumus_sgd_step(rumus_ctx *ctx, const rumus_sgd_params *p, long step, rumus_tensor *param, const rumus_tensor *grad, rumus_tensor *momentum_buf) { NYI("rumus_sgd_step"); }
int rumus_adam_step(rumus_ctx *ctx, const rumus_adam_params *p, long step, rumus_tensor *param, const rumus_tensor *grad, rumus_tensor *m, rumus_tensor *v) { NYI("rumus_adam_step"); }
int rumus_sum_squares(rumus_ctx *ctx, const rumus_tensor *x, rumus_tensor *acc) { NYI("rumus_sum_squares"); }
int rumus_clip_grad_norm(rumus_ctx *ctx, rumus_tensor *const *grads, size_t n, float max_norm, rumus_tensor *total_norm) { NYI("rumus_clip_grad_norm"); }
int rumus__optim_warm(rumus_ctx *ctx) { return RUMUS_OK; }
