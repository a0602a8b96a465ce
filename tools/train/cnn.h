/*
 * cnn.h - a small convolutional network for Fashion-MNIST, trained on the
 * OpenCL device with rumus (rumus-train --model cnn):
 *
 *   x [N, 1, 28, 28]
 *   conv1 3x3, 1 -> c1, padding 1 -> bn1 -> ReLU -> max pool 2   [N, c1, 14, 14]
 *   conv2 3x3, c1 -> c2, padding 1 -> bn2 -> ReLU -> max pool 2  [N, c2, 7, 7]
 *   dropout 0.25 -> flatten [N, c2 * 49]
 *   fc1 (-> hidden) -> ReLU -> dropout 0.5 -> fc2 (-> 10): the logits
 *
 * with cross-entropy (mean) and AdamW, c1, c2, hidden = 32, 64, 128 by
 * default.  The parameters are PyTorch's: conv weights [out, in, 3, 3],
 * linear weights [out, in], batch-norm weight (gamma) and bias (beta),
 * plus the batch-norm running mean and variance (buffers, not trained).
 * Training mode normalises with the batch statistics and updates the
 * running ones (momentum 0.1, eps 1e-5) and drops out; evaluation mode
 * (cnn_logits) normalises with the running statistics and drops nothing.
 *
 * Every function that can fail returns a rumus status (or TRAIN_EIO /
 * TRAIN_EFORMAT for files); the message is in cnn_errmsg() or err.
 */
#ifndef RUMUS_TRAIN_CNN_H
#define RUMUS_TRAIN_CNN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "mnist.h"
#include "rumus.h"

/* ---- Shape and host parameters ---------------------------------------- */

typedef struct {
  size_t c1, c2, hidden; /* conv1 and conv2 channels, fc1 width */
} cnn_shape;

#define CNN_DEFAULT_SHAPE {32, 64, 128}
/* The largest c1, c2 and hidden a model (or a model file) may have. */
#define CNN_MAX_WIDTH 4096u
/* Dropout probabilities after the second pool and after fc1. */
#define CNN_DROP_CONV 0.25f
#define CNN_DROP_FC 0.5f

/* The model's tensors, in the order of the model file. */
enum {
  CNN_CONV1_W, CNN_CONV1_B, CNN_BN1_W, CNN_BN1_B,
  CNN_CONV2_W, CNN_CONV2_B, CNN_BN2_W, CNN_BN2_B,
  CNN_FC1_W, CNN_FC1_B, CNN_FC2_W, CNN_FC2_B,
  CNN_NPARAM, /* the trained tensors above; the running statistics below */
  CNN_BN1_MEAN = CNN_NPARAM, CNN_BN1_VAR, CNN_BN2_MEAN, CNN_BN2_VAR,
  CNN_NTENSOR
};

/*! cnn_tensor_shape() : tensor k's shape (ndim 1, 2 or 4) under s;
 *  returns ndim.  cnn_tensor_numel() : its element count.
 *  cnn_tensor_name() : PyTorch's name ("conv1.weight", "bn1.running_var").
 *  cnn_is_bn() : k is a batch-norm tensor (kept in F32 on the device). */
int cnn_tensor_shape(const cnn_shape *s, int k, size_t shape[4]);
size_t cnn_tensor_numel(const cnn_shape *s, int k);
const char *cnn_tensor_name(int k);
int cnn_is_bn(int k);
/*! cnn_shape_params() : trained parameters (running statistics not
 *  counted). */
size_t cnn_shape_params(const cnn_shape *s);
/*! cnn_shape_str() : "conv32-conv64-fc128" into buf. */
void cnn_shape_str(const cnn_shape *s, char *buf, size_t len);
int cnn_shape_valid(const cnn_shape *s);

typedef struct {
  cnn_shape shape;
  float in_mean, in_std; /* the input transform, as mlp_params' */
  float *t[CNN_NTENSOR];
} cnn_params;

/*! cnn_params_alloc() : zeroed arrays; in_mean 0, in_std 1.
 *  @return RUMUS_OK, RUMUS_EINVAL (shape), RUMUS_ENOMEM. */
int cnn_params_alloc(cnn_params *p, const cnn_shape *s);
void cnn_params_free(cnn_params *p);
/*! cnn_params_init() : PyTorch's default initialisation.  Conv and linear
 *  weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming
 *  uniform with a = sqrt(5)), fan_in = in channels x 9 or in features,
 *  drawn from mlp_rng seeded with seed in file order, each weight
 *  (row-major) before its bias; batch norm gamma 1, beta 0, running mean
 *  0, running var 1. */
void cnn_params_init(cnn_params *p, uint64_t seed);

/*! cnn_params_save() : the model file (docs/TRAINING.md), through
 *  PATH.tmp.  @return RUMUS_OK, RUMUS_EINVAL, RUMUS_ENOMEM, TRAIN_EIO. */
int cnn_params_save(const cnn_params *p, const char *path, char *err,
                    size_t errlen);
/*! cnn_params_load() : a model file into a new allocation of p.
 *  @return RUMUS_OK, TRAIN_EIO, TRAIN_EFORMAT (bad magic, another
 *  version, implausible shape, truncated, trailing bytes, checksum
 *  mismatch, a non-finite value or a negative running variance),
 *  RUMUS_ENOMEM. */
int cnn_params_load(cnn_params *p, const char *path, char *err,
                    size_t errlen);
/*! cnn_file_is_cnn() : whether the file starts with the CNN magic (for
 *  choosing the model of --load); 0 when it cannot be read. */
int cnn_file_is_cnn(const char *path);

/* ---- The model on the device ------------------------------------------ */

typedef struct cnn cnn;

/*! cnn_create() : the device tensors for batches of up to max_batch rows
 *  (parameters undefined until cnn_set_params()).  adam NULL means
 *  MLP_ADAMW_DEFAULTS; precision as mlp_create() (F16 / BF16: 16-bit
 *  activations, gradients and compute copies of the conv and linear
 *  parameters, F32 masters; batch-norm parameters and statistics F32;
 *  F16 with dynamic loss scaling).  dropout_seed seeds every dropout mask
 *  (step t uses offsets 2t and 2t + 1 under it, t counted from 0 at
 *  cnn_set_params()).
 *  @return RUMUS_OK, RUMUS_EINVAL, RUMUS_ENOMEM or a rumus error. */
int cnn_create(rumus_ctx *ctx, const cnn_shape *s, size_t max_batch,
               const rumus_adam_params *adam, rumus_dtype precision,
               uint64_t dropout_seed, cnn **out, char *err, size_t errlen);
void cnn_free(cnn *m);
const char *cnn_errmsg(const cnn *m);
rumus_dtype cnn_precision(const cnn *m);
float cnn_loss_scale(const cnn *m);
long cnn_skipped_steps(const cnn *m);
long cnn_steps(const cnn *m);
/*! cnn_set_lr_decay() : as mlp_set_lr_decay(). */
void cnn_set_lr_decay(cnn *m, long steps);
/*! cnn_set_dropout() : the two dropout probabilities (defaults
 *  CNN_DROP_CONV, CNN_DROP_FC; 0 turns one off), each in [0, 1). */
void cnn_set_dropout(cnn *m, float p_conv, float p_fc);

/*! cnn_set_dropout_lane() : data-parallel training: this model is lane
 *  `lane` of `lanes` (0 <= lane < lanes; the MPI rank and the rank
 *  count) and step t draws its masks at offsets 2 (t lanes + lane) and
 *  2 (t lanes + lane) + 1, so that no two lanes share a mask; lane 0 of 1
 *  (the default) is the single-device numbering of cnn_create(). */
void cnn_set_dropout_lane(cnn *m, uint64_t lane, uint64_t lanes);
/*! cnn_set_grad_hook() / cnn_grad_tensors() : as mlp_set_grad_hook() /
 *  mlp_grad_tensors(), the gradients of the CNN_NPARAM trained tensors in
 *  file order (batch norm's in F32, the others in cnn_precision()).
 *  cnn_tensor() : the F32 master of tensor k (k < CNN_NTENSOR; the
 *  running statistics for k >= CNN_NPARAM), which a caller may read and
 *  overwrite between steps. */
void cnn_set_grad_hook(cnn *m, train_grad_hook hook, void *user);
int cnn_grad_tensors(cnn *m, rumus_tensor **out, int max);
rumus_tensor *cnn_tensor(cnn *m, int k);

/*! cnn_set_params() : uploads p (same shape), takes its input transform,
 *  zeroes the AdamW moments, the step count and the dropout offsets.
 *  @return RUMUS_OK, RUMUS_ESHAPE, RUMUS_EINVAL or a rumus error. */
int cnn_set_params(cnn *m, const cnn_params *p);
/*! cnn_get_params() : downloads every tensor (running statistics too)
 *  into p (allocated here if p->t[0] is NULL). */
int cnn_get_params(cnn *m, cnn_params *p);
/*! cnn_get_grads() : the gradients of the last step (or of
 *  cnn_loss_grad()) into g->t[k] for k < CNN_NPARAM, as floats, still
 *  multiplied by the loss scale (g allocated here if g->t[0] is NULL). */
int cnn_get_grads(cnn *m, cnn_params *g);

/*! cnn_train_step() : training-mode forward, backward and AdamW on n rows
 *  (1 <= n <= max_batch) of x [n, 784] with labels y; loss and correct
 *  as mlp_train_step() (may be NULL). */
int cnn_train_step(cnn *m, const float *x, const int32_t *y, size_t n,
                   double *loss, size_t *correct);
/*! cnn_loss_grad() : the training-mode forward and backward of
 *  cnn_train_step() with the dropout masks of the next step, without the
 *  update and without advancing the step (the running statistics are
 *  updated, as every training-mode forward does): the loss and the
 *  gradients for a gradient check. */
int cnn_loss_grad(cnn *m, const float *x, const int32_t *y, size_t n,
                  double *loss);
/*! cnn_logits() : evaluation-mode forward of n rows into logits [n, 10]. */
int cnn_logits(cnn *m, const float *x, size_t n, float *logits);
/*! cnn_logits_train() : training-mode forward (batch statistics, which
 *  it folds into the running ones, and the next step's dropout masks)
 *  into logits [n, 10], nothing else changed. */
int cnn_logits_train(cnn *m, const float *x, size_t n, float *logits);

/*! cnn_evaluate() / cnn_train_epoch() : as mlp_evaluate() and
 *  mlp_train_epoch(). */
int cnn_evaluate(cnn *m, const mnist_set *set, size_t count, size_t *correct);
int cnn_train_epoch(cnn *m, const mnist_set *set, size_t count, mlp_rng *rng,
                    mlp_progress_fn fn, void *user, mlp_progress *out);

#endif /* RUMUS_TRAIN_CNN_H */
