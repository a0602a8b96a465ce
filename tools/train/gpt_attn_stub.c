/* gpt_attn_stub.c - TEMPORARY host attention (see gpt_attn_stub.h). */
#include "gpt_attn_stub.h"

#include <math.h>
#include <stdlib.h>

static float *get(const rumus_tensor *t) {
  size_t n = rumus_tensor_numel(t);
  float *h = malloc(n * sizeof *h);
  rumus_tensor_download(t, h, n * sizeof *h);
  return h;
}

int rumus_attention_fwd(rumus_ctx *ctx, const rumus_attention_params *p,
                        const rumus_tensor *q, const rumus_tensor *k,
                        const rumus_tensor *v, const rumus_tensor *mask,
                        rumus_tensor *out, rumus_tensor *lse) {
  (void)ctx; (void)mask;
  size_t BH = rumus_tensor_dim(q, 0) * rumus_tensor_dim(q, 1);
  size_t T = rumus_tensor_dim(q, 2), D = rumus_tensor_dim(q, 3);
  float sc = p->scale ? p->scale : 1.0f / sqrtf((float)D);
  float *Q = get(q), *K = get(k), *V = get(v);
  float *O = calloc(BH * T * D, sizeof *O), *S = malloc(BH * T * sizeof *S);
  double *w = malloc(T * sizeof *w);
  for (size_t b = 0; b < BH; b++)
    for (size_t i = 0; i < T; i++) {
      const float *qi = Q + (b * T + i) * D;
      size_t lim = p->causal ? i + 1 : T;
      double mx = -INFINITY, sum = 0;
      for (size_t j = 0; j < lim; j++) {
        double s = 0;
        for (size_t d = 0; d < D; d++) s += (double)qi[d] * K[(b * T + j) * D + d];
        w[j] = s * sc;
        if (w[j] > mx) mx = w[j];
      }
      for (size_t j = 0; j < lim; j++) sum += (w[j] = exp(w[j] - mx));
      for (size_t j = 0; j < lim; j++)
        for (size_t d = 0; d < D; d++)
          O[(b * T + i) * D + d] += (float)(w[j] / sum * V[(b * T + j) * D + d]);
      S[b * T + i] = (float)(mx + log(sum));
    }
  rumus_tensor_upload(out, O, BH * T * D * sizeof *O);
  if (lse) rumus_tensor_upload(lse, S, BH * T * sizeof *S);
  free(Q); free(K); free(V); free(O); free(S); free(w);
  return RUMUS_OK;
}

int rumus_attention_bwd(rumus_ctx *ctx, const rumus_attention_params *p,
                        const rumus_tensor *q, const rumus_tensor *k,
                        const rumus_tensor *v, const rumus_tensor *mask,
                        const rumus_tensor *out, const rumus_tensor *lse,
                        const rumus_tensor *dout, rumus_tensor *dq,
                        rumus_tensor *dk, rumus_tensor *dv) {
  (void)ctx; (void)mask;
  size_t BH = rumus_tensor_dim(q, 0) * rumus_tensor_dim(q, 1);
  size_t T = rumus_tensor_dim(q, 2), D = rumus_tensor_dim(q, 3), n = BH * T * D;
  float sc = p->scale ? p->scale : 1.0f / sqrtf((float)D);
  float *Q = get(q), *K = get(k), *V = get(v), *O = get(out), *S = get(lse), *dO = get(dout);
  float *dQ = calloc(n, sizeof *dQ), *dK = calloc(n, sizeof *dK), *dV = calloc(n, sizeof *dV);
  for (size_t b = 0; b < BH; b++)
    for (size_t i = 0; i < T; i++) {
      size_t r = b * T + i, lim = p->causal ? i + 1 : T;
      double Di = 0;
      for (size_t d = 0; d < D; d++) Di += (double)dO[r * D + d] * O[r * D + d];
      for (size_t j = 0; j < lim; j++) {
        size_t c = b * T + j;
        double s = 0, dp = 0;
        for (size_t d = 0; d < D; d++) {
          s += (double)Q[r * D + d] * K[c * D + d];
          dp += (double)dO[r * D + d] * V[c * D + d];
        }
        double pr = exp(s * sc - S[r]), ds = pr * (dp - Di) * sc;
        for (size_t d = 0; d < D; d++) {
          dV[c * D + d] += (float)(pr * dO[r * D + d]);
          dQ[r * D + d] += (float)(ds * K[c * D + d]);
          dK[c * D + d] += (float)(ds * Q[r * D + d]);
        }
      }
    }
  rumus_tensor_upload(dq, dQ, n * 4);
  rumus_tensor_upload(dk, dK, n * 4);
  rumus_tensor_upload(dv, dV, n * 4);
  free(Q); free(K); free(V); free(O); free(S); free(dO); free(dQ); free(dK); free(dV);
  return RUMUS_OK;
}
