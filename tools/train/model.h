/*
 * model.h - rumus-train's two models (the MLP of mlp.h, the CNN of cnn.h)
 * behind one interface, so that main.c runs either the same way.
 */
#ifndef RUMUS_TRAIN_MODEL_H
#define RUMUS_TRAIN_MODEL_H

#include "cnn.h"
#include "mlp.h"
#include "options.h"

typedef struct {
  train_model_kind kind;
  mlp_params mp; /* the host parameters of the MLP ... */
  cnn_params cp; /* ... or of the CNN */
  mlp *mlp;
  cnn *cnn;
} train_model;

/*! model_params() : the host parameters: loaded from o->load (the kind
 *  taken from the file, which must agree with --model and --hidden when
 *  given) or initialised from o->seed, with the input transform of the
 *  training set unless o->no_normalize.  @return RUMUS_OK or an error
 *  with the message in err (for the user, without a "rumus-train:"). */
int model_params(train_model *t, const train_opts *o, const mnist_set *train,
                 char *err, size_t errlen);
/*! model_create() : the device model of t's kind (t->mlp or t->cnn) for
 *  o->batch rows and o->precision, with t's host parameters uploaded; the
 *  CNN's dropout masks are seeded from o->seed. */
int model_create(train_model *t, rumus_ctx *ctx, const train_opts *o,
                 const rumus_adam_params *adam, char *err, size_t errlen);
/*! model_warm_up() : one step of a scratch model on a zero batch, so that
 *  PoCL compiles every kernel's work-group function before epoch 1. */
int model_warm_up(const train_model *t, rumus_ctx *ctx, const train_opts *o,
                  const rumus_adam_params *adam, char *err, size_t errlen);
void model_free(train_model *t);

/*! model_describe() : "784-256-128-10 MLP, ReLU" or the CNN's line. */
void model_describe(const train_model *t, char *buf, size_t len);
size_t model_param_count(const train_model *t);
float model_in_mean(const train_model *t);
float model_in_std(const train_model *t);

const char *model_errmsg(const train_model *t);
void model_set_lr_decay(train_model *t, long steps);
int model_train_epoch(train_model *t, const mnist_set *set, mlp_rng *rng,
                      mlp_progress_fn fn, void *user, mlp_progress *out);
int model_evaluate(train_model *t, const mnist_set *set, size_t *correct);
float model_loss_scale(const train_model *t);
long model_skipped_steps(const train_model *t);
long model_steps(const train_model *t);
/*! model_save() : downloads the parameters and writes o->save. */
int model_save(train_model *t, const char *path, char *err, size_t errlen);

#endif /* RUMUS_TRAIN_MODEL_H */
