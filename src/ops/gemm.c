/* gemm.c - placeholder until the GEMM family lands. */
#include "ops.h"
int rumus_gemm(rumus_ctx *ctx, rumus_transpose ta, rumus_transpose tb, float alpha,
               const rumus_tensor *A, const rumus_tensor *B, float beta, rumus_tensor *C) {
  return rumus__fail(ctx, RUMUS_EUNSUPPORTED, "rumus_gemm: not built yet");
}
int rumus_gemm_ex(rumus_ctx *ctx, rumus_transpose ta, rumus_transpose tb, float alpha,
                  const rumus_tensor *A, const rumus_tensor *B, float beta, rumus_tensor *C,
                  const rumus_gemm_layout *layout) {
  return rumus__fail(ctx, RUMUS_EUNSUPPORTED, "rumus_gemm_ex: not built yet");
}
int rumus__gemm_warm(rumus_ctx *ctx) { return RUMUS_OK; }
