/*
 * gpt.h - rumus-train's character-level GPT (--model gpt): a decoder-only
 * transformer as nanoGPT's model.py with bias = True and dropout 0, every
 * forward, backward and AdamW step on the OpenCL device.
 *
 *   x_0 = wte[ids] + wpe[0..T)                 rumus_embedding_fwd, rumus_broadcast_add
 *   per block l (pre-norm):
 *     h   = ln_1(x)                             rumus_layernorm_fwd
 *     qkv = h c_attn.W^T + c_attn.b             rumus_gemm, rumus_bias_add
 *     q, k, v = qkv as [B,T,3,H,D] -> [3,B,H,T,D]   rumus_permute
 *     o   = causal attention(q, k, v)           rumus_attention_fwd
 *     x   = x + (o as [B,T,H,D]) c_proj.W^T + b rumus_permute, rumus_gemm, rumus_add
 *     x   = x + c_proj(gelu(c_fc(ln_2(x))))     GELU with erf (nn.GELU())
 *   logits = ln_f(x) lm_head.W^T (lm_head.W is wte unless untied)
 *   loss   = mean cross-entropy over the B*T positions
 *
 * The backward runs the same ops' backwards in reverse; the gradients are
 * clipped to a global norm of 1 (rumus_clip_grad_norm) and AdamW updates
 * every parameter, with weight decay on the 2-D tensors only (the
 * embeddings and the linear weights), as nanoGPT's configure_optimizers.
 * F32 storage, or mixed precision (gpt_create).
 *
 * The parameters are numbered as nanoGPT's state_dict lists them:
 *   0 transformer.wte.weight [V, C]      1 transformer.wpe.weight [T, C]
 *   2 + 12 l + j: transformer.h.<l>.<the j-th of ln_1.weight, ln_1.bias,
 *       attn.c_attn.weight, attn.c_attn.bias, attn.c_proj.weight,
 *       attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight,
 *       mlp.c_fc.bias, mlp.c_proj.weight, mlp.c_proj.bias>
 *   2 + 12 L: transformer.ln_f.weight [C], then transformer.ln_f.bias [C]
 *   4 + 12 L: lm_head.weight [V, C] (untied models only)
 */
#ifndef RUMUS_TRAIN_GPT_H
#define RUMUS_TRAIN_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "rumus.h"

#define GPT_MAX_LAYERS 64
#define GPT_MAX_WIDTH 8192
#define GPT_MAX_CONTEXT 8192
#define GPT_MAX_VOCAB 256
#define GPT_BLOCK_TENSORS 12
/* F16 dynamic loss scaling, GradScaler's defaults (as mlp.h's). */
#define GPT_LOSS_SCALE_INIT 65536.0f
#define GPT_LOSS_SCALE_GROWTH 2000
#define GPT_LOSS_SCALE_MIN (1.0f / 16777216.0f)
#define GPT_LOSS_SCALE_MAX 16777216.0f

typedef struct {
  size_t vocab;   /* V: token ids 0..V-1 */
  size_t layers;  /* L */
  size_t heads;   /* H, dividing the width */
  size_t width;   /* C */
  size_t context; /* T: positions */
  int tied;       /* lm_head.weight is transformer.wte.weight */
} gpt_config;

/*! gpt_config_check() : RUMUS_OK, or RUMUS_EINVAL with what is wrong. */
int gpt_config_check(const gpt_config *c, char *err, size_t errlen);
/*! gpt_ntensors() : the number of parameter tensors (see above). */
size_t gpt_ntensors(const gpt_config *c);
/*! gpt_tensor_info() : name (into buf), ndim and shape of tensor k;
 *  returns the ndim. */
int gpt_tensor_info(const gpt_config *c, size_t k, char *name, size_t len,
                    size_t shape[2]);
/*! gpt_tensor_numel() / gpt_param_count() : elements of tensor k, of all. */
size_t gpt_tensor_numel(const gpt_config *c, size_t k);
size_t gpt_param_count(const gpt_config *c);

/* Host parameters: t[k] holds tensor k's floats, row-major. */
typedef struct {
  gpt_config cfg;
  size_t n;
  float **t;
} gpt_params;

int gpt_params_alloc(gpt_params *p, const gpt_config *c);
void gpt_params_free(gpt_params *p);
/*! gpt_params_init() : nanoGPT's initialisation from splitmix64 seeded
 *  with seed: every linear and embedding weight ~ N(0, 0.02) (the c_proj
 *  weights of each block N(0, 0.02 / sqrt(2 L))), biases 0, layer norm
 *  weights 1 and biases 0.  Normal draws by Box-Muller from two 24-bit
 *  uniforms, tensor after tensor in the order above. */
void gpt_params_init(gpt_params *p, uint64_t seed);

typedef struct gpt gpt;

/*! gpt_create() : device parameters, gradients, AdamW moments and the
 *  activations of batches of `batch` sequences of c->context tokens.
 *  adam gives lr (changed per step by gpt_train_step), betas, eps and the
 *  weight decay of the matrices.  Parameters undefined until
 *  gpt_set_params().
 *  precision F32 trains in float throughout; F16 or BF16 is mixed
 *  precision as PyTorch's autocast with F32 master weights: activations
 *  and their gradients and compute copies of the weights are 16-bit
 *  (GEMMs and every reduction accumulate in float; layer norm weights,
 *  statistics, lse and the loss stay F32), the parameter gradients are
 *  F32 (the GEMMs, bias and embedding gradients write float sums), and
 *  AdamW updates the F32 masters and writes the next compute copy.  F16
 *  adds dynamic loss scaling as GradScaler (GPT_LOSS_SCALE_*): the step
 *  whose gradient norm is not finite is skipped on the device.
 *  @return RUMUS_OK or an error with the message in err. */
int gpt_create(rumus_ctx *ctx, const gpt_config *c, size_t batch,
               const rumus_adam_params *adam, rumus_dtype precision, gpt **out,
               char *err, size_t errlen);
rumus_dtype gpt_precision(const gpt *m);
/*! gpt_loss_scale() : the current loss scale (1 unless F16);
 *  gpt_skipped_steps() : steps skipped for overflow since gpt_set_params. */
float gpt_loss_scale(const gpt *m);
/*! gpt_set_loss_scale() : under F16, sets the scale (finite, > 0) until
 *  the next gpt_set_params(); no-op otherwise (the tests' overflow). */
void gpt_set_loss_scale(gpt *m, float scale);
long gpt_skipped_steps(const gpt *m);
void gpt_free(gpt *m);
const char *gpt_errmsg(const gpt *m);
size_t gpt_batch(const gpt *m);

/*! gpt_set_params() : uploads p (same config), zeroes the moments and the
 *  step count.  gpt_get_params() downloads into p (allocated here if
 *  p->t is NULL). */
int gpt_set_params(gpt *m, const gpt_params *p);
int gpt_get_params(gpt *m, gpt_params *p);
/*! gpt_get_grads() : the last step's gradients (after clipping, and
 *  times the loss scale under F16) into g, allocated here if g->t is
 *  NULL. */
int gpt_get_grads(gpt *m, gpt_params *g);

/*! gpt_train_step() : forward, backward, clipping to norm `clip` (<= 0:
 *  none) and one AdamW step at learning rate lr on the batch of
 *  x [batch, T] ids with targets y [batch, T].  *loss (may be NULL): the
 *  mean loss before the update; *gnorm (may be NULL): the gradient norm
 *  before clipping.  lr 0 with clip 0 computes the gradients and leaves
 *  the parameters as they are (the tests' gradient check). */
int gpt_train_step(gpt *m, const int32_t *x, const int32_t *y, float lr,
                   float clip, double *loss, double *gnorm);
/*! gpt_loss() : the mean loss of the batch without updating anything. */
int gpt_loss(gpt *m, const int32_t *x, const int32_t *y, double *loss);
/*! gpt_logits() : forward of one sequence x [T] (a second set of
 *  activations, for one sequence, made at the first call); the logits [V]
 *  at position pos < T into out.  Positions after pos do not change them
 *  (causal), so a shorter prompt may be padded with any ids. */
int gpt_logits(gpt *m, const int32_t *x, size_t pos, float *out);
long gpt_steps(const gpt *m);

#endif /* RUMUS_TRAIN_GPT_H */
