/* elementwise.c - placeholder until the element-wise family lands. */
#include "ops.h"
#define NYI(name) return rumus__fail(ctx, RUMUS_EUNSUPPORTED, name ": not built yet")
int rumus_bias_add(rumus_ctx *ctx, rumus_tensor *y, const rumus_tensor *bias) { NYI("rumus_bias_add"); }
int rumus_bias_grad(rumus_ctx *ctx, const rumus_tensor *dy, rumus_tensor *dbias) { NYI("rumus_bias_grad"); }
int rumus_add(rumus_ctx *ctx, const rumus_tensor *a, const rumus_tensor *b, rumus_tensor *out) { NYI("rumus_add"); }
int rumus_sub(rumus_ctx *ctx, const rumus_tensor *a, const rumus_tensor *b, rumus_tensor *out) { NYI("rumus_sub"); }
int rumus_mul(rumus_ctx *ctx, const rumus_tensor *a, const rumus_tensor *b, rumus_tensor *out) { NYI("rumus_mul"); }
int rumus_scale(rumus_ctx *ctx, float alpha, const rumus_tensor *x, rumus_tensor *out) { NYI("rumus_scale"); }
int rumus_axpy(rumus_ctx *ctx, float alpha, const rumus_tensor *x, rumus_tensor *y) { NYI("rumus_axpy"); }
int rumus_activation_fwd(rumus_ctx *ctx, rumus_activation act, float param, const rumus_tensor *x, rumus_tensor *y) { NYI("rumus_activation_fwd"); }
int rumus_activation_bwd(rumus_ctx *ctx, rumus_activation act, float param, const rumus_tensor *x, const rumus_tensor *dy, rumus_tensor *dx) { NYI("rumus_activation_bwd"); }
int rumus__elementwise_warm(rumus_ctx *ctx) { return RUMUS_OK; }
