/*
 * mlp.h - a multilayer perceptron trained on the OpenCL device with rumus:
 * Linear -> ReLU -> ... -> Linear, cross-entropy (mean) and AdamW.
 *
 * Layout.  Layer l (0 <= l < nlayers) maps sizes[l] inputs to sizes[l+1]
 * outputs with W_l [out, in] (row-major, as nn.Linear.weight) and b_l
 * [out].  On a batch of n rows:
 *   forward   z_l = h_l W_l^T + b_l,  h_{l+1} = relu(z_l)  (h_0 = x;
 *             z_{nlayers-1} are the logits)
 *   loss      mean over rows of cross-entropy(z_last, y); the same fused
 *             op gives dz_last = (softmax(z_last) - onehot(y)) / n
 *   backward  dW_l = dz_l^T h_l,  db_l = sum over rows of dz_l,
 *             dz_{l-1} = (dz_l W_l) * (z_{l-1} > 0)
 *   update    AdamW on every W_l and b_l (weight decay on both, as
 *             torch.optim.AdamW(model.parameters()) does)
 * Every step of this runs on the device; the host uploads the batch
 * (n x sizes[0] floats and n int32 labels) and downloads the loss and the
 * n x sizes[last] logits to count correct predictions.
 *
 * Every function that can fail returns a rumus status; the message is in
 * mlp_errmsg() (for functions on an mlp) or in the caller's err buffer.
 */
#ifndef RUMUS_TRAIN_MLP_H
#define RUMUS_TRAIN_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "mnist.h"
#include "rumus.h"

/* Linear layers: up to 16 hidden layers plus the output layer. */
#define MLP_MAX_LAYERS 17
/* The largest layer width a model (or a model file) may have. */
#define MLP_MAX_WIDTH ((size_t)1 << 20)
/* The largest parameter count a model file may announce (1 GiB). */
#define MLP_MAX_PARAMS ((size_t)1 << 28)

/* ---- Shapes and host copies of the parameters ------------------------- */

typedef struct {
  int nlayers;                      /* Linear layers, 1..MLP_MAX_LAYERS */
  size_t sizes[MLP_MAX_LAYERS + 1]; /* inputs, hidden widths, outputs */
} mlp_shape;

/*! mlp_shape_make() : inputs, nhidden hidden widths, outputs.
 *  @return RUMUS_OK or RUMUS_EINVAL (too many layers, a width of 0 or over
 *  MLP_MAX_WIDTH). */
int mlp_shape_make(mlp_shape *s, size_t inputs, const size_t *hidden,
                   int nhidden, size_t outputs);
/*! mlp_shape_str() : "784-256-128-10" into buf. */
void mlp_shape_str(const mlp_shape *s, char *buf, size_t len);
/*! mlp_shape_params() : the number of parameters (weights and biases). */
size_t mlp_shape_params(const mlp_shape *s);

typedef struct {
  mlp_shape shape;
  /* The input transform the model was trained with: an image's inputs are
   * (pixel / 255 - in_mean) / in_std.  0 and 1: pixel / 255 in [0, 1]. */
  float in_mean, in_std;
  float *w[MLP_MAX_LAYERS]; /* [sizes[l+1], sizes[l]] */
  float *b[MLP_MAX_LAYERS]; /* [sizes[l+1]] */
} mlp_params;

/*! mlp_params_alloc() : allocates (zeroed) arrays for the shape; in_mean
 *  0, in_std 1.
 *  @return RUMUS_OK, RUMUS_EINVAL, RUMUS_ENOMEM. */
int mlp_params_alloc(mlp_params *p, const mlp_shape *s);
/*! mlp_params_free() : frees the arrays and zeroes p. */
void mlp_params_free(mlp_params *p);
/*! mlp_params_init() : nn.Linear's default initialisation: every W_l and
 *  b_l ~ U(-1/sqrt(in), 1/sqrt(in)), drawn from mlp_rng seeded with seed,
 *  layer by layer, W_l (row-major) before b_l. */
void mlp_params_init(mlp_params *p, uint64_t seed);

/*! mlp_params_save() : writes the model file (format in docs/TRAINING.md)
 *  through PATH.tmp renamed to PATH.  @return RUMUS_OK, TRAIN_EIO. */
int mlp_params_save(const mlp_params *p, const char *path, char *err,
                    size_t errlen);
/*! mlp_params_load() : reads a model file into a new allocation of p.
 *  @return RUMUS_OK, TRAIN_EIO (cannot open or read), TRAIN_EFORMAT (bad
 *  magic, unsupported version, implausible layer count or sizes,
 *  truncated, trailing bytes, checksum mismatch), RUMUS_ENOMEM. */
int mlp_params_load(mlp_params *p, const char *path, char *err,
                    size_t errlen);

/* ---- The model on the device ------------------------------------------ */

typedef struct mlp mlp;

/* PyTorch's torch.optim.AdamW defaults. */
#define MLP_ADAMW_DEFAULTS {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1}

/* Dynamic loss scaling of F16 training, PyTorch's GradScaler defaults:
 * the first scale, the overflow-free steps after which it doubles, and
 * the range it is kept in (halving stops at MIN, doubling at MAX). */
#define MLP_LOSS_SCALE_INIT 65536.0f
#define MLP_LOSS_SCALE_GROWTH 2000
#define MLP_LOSS_SCALE_MIN (1.0f / 16777216.0f)
#define MLP_LOSS_SCALE_MAX 16777216.0f

/*! mlp_create() : device tensors for the parameters, their gradients and
 *  AdamW moments, and activations for batches of up to max_batch rows.
 *  The parameters are undefined until mlp_set_params().  adam NULL means
 *  MLP_ADAMW_DEFAULTS.
 *  precision RUMUS_F32 trains in float throughout.  RUMUS_F16 or
 *  RUMUS_BF16 is mixed precision, as PyTorch's autocast with F32 master
 *  weights: the inputs, activations, their gradients and the parameter
 *  gradients are stored in that type (GEMMs accumulate in float, the loss
 *  is float); AdamW keeps F32 weights and moments, reads the 16-bit
 *  gradients and writes a 16-bit copy of the weights for the next pass in
 *  the same kernel.  F16 adds dynamic loss scaling (MLP_LOSS_SCALE_*):
 *  the loss gradient is multiplied by the scale, the steps divide it out,
 *  and a step whose gradients overflowed is skipped on the device (an
 *  inf/NaN sum of squares of the gradients), which halves the scale.
 *  @return RUMUS_OK, RUMUS_EINVAL, RUMUS_ENOMEM or a rumus error, with the
 *  message in err. */
int mlp_create(rumus_ctx *ctx, const mlp_shape *s, size_t max_batch,
               const rumus_adam_params *adam, rumus_dtype precision, mlp **out,
               char *err, size_t errlen);
rumus_dtype mlp_precision(const mlp *m);
/*! mlp_loss_scale() : the current loss scale (1 unless F16).
 *  mlp_skipped_steps() : steps skipped for overflow since
 *  mlp_set_params(). */
float mlp_loss_scale(const mlp *m);
long mlp_skipped_steps(const mlp *m);
/*! mlp_set_loss_scale() : under F16, sets the scale (kept if outside
 *  [MLP_LOSS_SCALE_MIN, MLP_LOSS_SCALE_MAX]) and the growth interval (kept
 *  if < 1); mlp_set_params() puts back the defaults.  No-op otherwise. */
void mlp_set_loss_scale(mlp *m, float scale, long growth_interval);
/*! mlp_free() : frees every tensor of the model (NULL is a no-op). */
void mlp_free(mlp *m);
const char *mlp_errmsg(const mlp *m);
const mlp_shape *mlp_get_shape(const mlp *m);
/*! mlp_steps() : training steps taken since the last mlp_set_params()
 *  (those skipped for F16 overflow included: the learning-rate schedule
 *  counts them, AdamW's bias correction does not). */
long mlp_steps(const mlp *m);
/*! mlp_set_lr_decay() : from now on, step t (counted from 1 since the last
 *  mlp_set_params()) uses lr * (1 + cos(pi * (t - 1) / steps)) / 2, with lr
 *  the rate given to mlp_create(); steps <= 0 goes back to a constant
 *  rate. */
void mlp_set_lr_decay(mlp *m, long steps);

/*! mlp_set_params() : uploads the parameters (same shape as the model),
 *  takes their input transform, zeroes the AdamW moments and the step
 *  count.  @return RUMUS_OK, RUMUS_ESHAPE, RUMUS_EINVAL (in_std not
 *  positive or a value not finite) or a rumus error. */
int mlp_set_params(mlp *m, const mlp_params *p);
/*! mlp_get_params() : downloads the parameters into p (allocated here if
 *  p->w[0] is NULL, else it must have the model's shape), with the input
 *  transform. */
int mlp_get_params(mlp *m, mlp_params *p);

/*! mlp_train_step() : one forward, backward and AdamW step on n rows
 *  (1 <= n <= max_batch) of x [n, inputs] with labels y [n].  If loss is
 *  not NULL it receives the batch's mean loss; if correct is not NULL, the
 *  number of rows whose logits' argmax (before the update) equals y. */
int mlp_train_step(mlp *m, const float *x, const int32_t *y, size_t n,
                   double *loss, size_t *correct);
/*! mlp_set_grad_hook() : from now on every mlp_train_step() calls
 *  hook(user, ...) after its backward pass, before the update (NULL: no
 *  hook).  mlp_grad_tensors() : the gradient tensors the hook may read
 *  and overwrite (stored in mlp_precision()): dW_0, db_0, dW_1, db_1, ...
 *  into out[0..max); returns their count (2 nlayers), or -1 if max is too
 *  small. */
void mlp_set_grad_hook(mlp *m, train_grad_hook hook, void *user);
int mlp_grad_tensors(mlp *m, rumus_tensor **out, int max);
/*! mlp_logits() : forward pass of n rows (1 <= n <= max_batch) into
 *  logits [n, outputs] on the host. */
int mlp_logits(mlp *m, const float *x, size_t n, float *logits);

/* ---- Data sets -------------------------------------------------------- */

/*! mlp_evaluate() : the number of the first `count` images of set (all if
 *  count is 0 or larger) whose logits' argmax equals the label, forwarding
 *  batches of max_batch rows on the device.  Images go through the model's
 *  input transform (mlp_params.in_mean, in_std), here and in
 *  mlp_train_epoch(). */
int mlp_evaluate(mlp *m, const mnist_set *set, size_t count, size_t *correct);

/*! mlp_train_epoch() : one pass over the first `count` images of set (all
 *  if count is 0 or larger) in batches of max_batch rows, shuffled with
 *  rng (a fresh permutation of 0..count-1 each call).  The last batch may
 *  be smaller (it is kept; the mean loss handles any batch size).  fn (may
 *  be NULL) is called after every step; *out (may be NULL) receives the
 *  epoch's totals. */
int mlp_train_epoch(mlp *m, const mnist_set *set, size_t count, mlp_rng *rng,
                    mlp_progress_fn fn, void *user, mlp_progress *out);

#endif /* RUMUS_TRAIN_MLP_H */
