/* gpt_attn_stub.h - TEMPORARY: a host stand-in for rumus_attention_fwd /
 * _bwd (branch attn) so that the GPT can be built and tested before that
 * branch is merged; removed at the merge. */
#ifndef RUMUS_TRAIN_GPT_ATTN_STUB_H
#define RUMUS_TRAIN_GPT_ATTN_STUB_H
#include "rumus.h"
#ifndef RUMUS_ATTENTION_DEFAULTS
typedef struct {
  float scale;
  int causal;
} rumus_attention_params;
#define RUMUS_ATTENTION_DEFAULTS {0.0f, 0}
int rumus_attention_fwd(rumus_ctx *ctx, const rumus_attention_params *p,
                        const rumus_tensor *q, const rumus_tensor *k,
                        const rumus_tensor *v, const rumus_tensor *mask,
                        rumus_tensor *out, rumus_tensor *lse);
int rumus_attention_bwd(rumus_ctx *ctx, const rumus_attention_params *p,
                        const rumus_tensor *q, const rumus_tensor *k,
                        const rumus_tensor *v, const rumus_tensor *mask,
                        const rumus_tensor *out, const rumus_tensor *lse,
                        const rumus_tensor *dout, rumus_tensor *dq,
                        rumus_tensor *dk, rumus_tensor *dv);
#endif
#endif
