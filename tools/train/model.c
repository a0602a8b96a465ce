/* model.c - see model.h. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

static int is_cnn(const train_model *t) { return t->kind == TRAIN_MODEL_CNN; }

/* ---- Host parameters -------------------------------------------------- */

/* A loaded MLP must fit Fashion-MNIST and --hidden if given. */
static int check_loaded_mlp(const train_model *t, const train_opts *o, char *err,
                            size_t errlen) {
  const mlp_shape *s = &t->mp.shape;
  char have[256], asked[256];
  mlp_shape_str(s, have, sizeof have);
  if (s->sizes[0] != MNIST_PIXELS || s->sizes[s->nlayers] != MNIST_CLASSES)
    return train_fail(err, errlen, RUMUS_ESHAPE,
                      "%s: the model is %s, but Fashion-MNIST needs %d inputs "
                      "and %d outputs", o->load, have, MNIST_PIXELS, MNIST_CLASSES);
  if (o->hidden_given) {
    mlp_shape want;
    mlp_shape_make(&want, MNIST_PIXELS, o->hidden, o->nhidden, MNIST_CLASSES);
    mlp_shape_str(&want, asked, sizeof asked);
    if (strcmp(asked, have) != 0)
      return train_fail(err, errlen, RUMUS_ESHAPE,
                        "%s: the model is %s, but --hidden asks for %s", o->load,
                        have, asked);
  }
  return RUMUS_OK;
}

/* A safetensors model file (checkpoint.h): its kind from its tensors. */
static int load_safetensors(train_model *t, const train_opts *o, char *err,
                            size_t errlen) {
  char why[1536];
  train_model_kind kind;
  int st = ckpt_load(o->load, &kind, &t->mp, &t->cp, why, sizeof why);
  if (st != RUMUS_OK)
    return train_fail(err, errlen, st, "cannot load the model (%s): %s",
                      train_err_name(st), why);
  t->kind = kind;
  if (o->model_given && o->model != kind)
    return train_fail(err, errlen, RUMUS_EINVAL, "%s is %s model file, but --model %s was given",
                      o->load, is_cnn(t) ? "a CNN" : "an MLP", is_cnn(t) ? "mlp" : "cnn");
  if (is_cnn(t) && o->hidden_given)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "%s is a CNN model file: --hidden does not apply", o->load);
  return is_cnn(t) ? RUMUS_OK : check_loaded_mlp(t, o, err, errlen);
}

static int load_params(train_model *t, const train_opts *o, char *err,
                       size_t errlen) {
  if (ckpt_is_safetensors(o->load)) return load_safetensors(t, o, err, errlen);
  int file_cnn = cnn_file_is_cnn(o->load);
  if (file_cnn && o->model_given && o->model == TRAIN_MODEL_MLP)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "%s is a CNN model file, but --model mlp was given", o->load);
  if (file_cnn && o->hidden_given)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "%s is a CNN model file: --hidden does not apply", o->load);
  t->kind = file_cnn || o->model == TRAIN_MODEL_CNN ? TRAIN_MODEL_CNN : TRAIN_MODEL_MLP;
  char why[1536];
  int st = is_cnn(t) ? cnn_params_load(&t->cp, o->load, why, sizeof why)
                     : mlp_params_load(&t->mp, o->load, why, sizeof why);
  if (st != RUMUS_OK)
    return train_fail(err, errlen, st, "cannot load the model (%s): %s",
                      train_err_name(st), why);
  return is_cnn(t) ? RUMUS_OK : check_loaded_mlp(t, o, err, errlen);
}

static int init_params(train_model *t, const train_opts *o, char *err,
                       size_t errlen) {
  t->kind = o->model;
  int st;
  if (is_cnn(t)) {
    cnn_shape s = CNN_DEFAULT_SHAPE;
    st = cnn_params_alloc(&t->cp, &s);
    if (st == RUMUS_OK) cnn_params_init(&t->cp, o->seed);
  } else {
    mlp_shape s;
    st = mlp_shape_make(&s, MNIST_PIXELS, o->hidden, o->nhidden, MNIST_CLASSES);
    if (st == RUMUS_OK) st = mlp_params_alloc(&t->mp, &s);
    if (st == RUMUS_OK) mlp_params_init(&t->mp, o->seed);
  }
  if (st != RUMUS_OK)
    return train_fail(err, errlen, st, "out of memory for the parameters");
  return RUMUS_OK;
}

int model_params(train_model *t, const train_opts *o, const mnist_set *train,
                 char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  int st = o->load ? load_params(t, o, err, errlen) : init_params(t, o, err, errlen);
  if (st != RUMUS_OK || o->load || o->no_normalize) return st;
  double mean, std;
  mnist_pixel_stats(train, &mean, &std);
  if (std > 0.0) {
    float *m = is_cnn(t) ? &t->cp.in_mean : &t->mp.in_mean;
    float *s = is_cnn(t) ? &t->cp.in_std : &t->mp.in_std;
    *m = (float)mean;
    *s = (float)std;
  }
  return RUMUS_OK;
}

/* ---- Device model ----------------------------------------------------- */

/* The dropout masks' seed: the run's seed, salted so that it is not the
 * initialisation's stream. */
#define CNN_DROPOUT_SALT 0x44524f504f555421ull

int model_create(train_model *t, rumus_ctx *ctx, const train_opts *o,
                 const rumus_adam_params *adam, char *err, size_t errlen) {
  int st;
  if (is_cnn(t)) {
    st = cnn_create(ctx, &t->cp.shape, o->batch, adam, o->precision,
                    o->seed ^ CNN_DROPOUT_SALT, &t->cnn, err, errlen);
    if (st == RUMUS_OK && (st = cnn_set_params(t->cnn, &t->cp)) != RUMUS_OK)
      train_fail(err, errlen, st, "cannot upload the parameters: %s",
                 cnn_errmsg(t->cnn));
  } else {
    st = mlp_create(ctx, &t->mp.shape, o->batch, adam, o->precision, &t->mlp,
                    err, errlen);
    if (st == RUMUS_OK && (st = mlp_set_params(t->mlp, &t->mp)) != RUMUS_OK)
      train_fail(err, errlen, st, "cannot upload the parameters: %s",
                 mlp_errmsg(t->mlp));
  }
  return st;
}

int model_warm_up(const train_model *t, rumus_ctx *ctx, const train_opts *o,
                  const rumus_adam_params *adam, char *err, size_t errlen) {
  train_model s = *t; /* shares the host parameters, not the device model */
  s.mlp = NULL;
  s.cnn = NULL;
  int st = model_create(&s, ctx, o, adam, err, errlen);
  float *x = calloc(o->batch * MNIST_PIXELS, sizeof *x);
  int32_t *y = calloc(o->batch, sizeof *y);
  if (st == RUMUS_OK && (!x || !y))
    st = train_fail(err, errlen, RUMUS_ENOMEM, "out of host memory");
  if (st == RUMUS_OK) {
    st = is_cnn(&s) ? cnn_train_step(s.cnn, x, y, o->batch, NULL, NULL)
                    : mlp_train_step(s.mlp, x, y, o->batch, NULL, NULL);
    if (st != RUMUS_OK) train_fail(err, errlen, st, "%s", model_errmsg(&s));
  }
  mlp_free(s.mlp);
  cnn_free(s.cnn);
  free(x);
  free(y);
  return st;
}

void model_free(train_model *t) {
  mlp_free(t->mlp);
  cnn_free(t->cnn);
  mlp_params_free(&t->mp);
  cnn_params_free(&t->cp);
  memset(t, 0, sizeof *t);
}

/* ---- Dispatch --------------------------------------------------------- */

void model_describe(const train_model *t, char *buf, size_t len) {
  char s[256];
  if (is_cnn(t)) {
    const cnn_shape *c = &t->cp.shape;
    snprintf(buf, len,
             "CNN conv3x3(1->%zu)-bn-relu-pool2, conv3x3(%zu->%zu)-bn-relu-pool2, "
             "dropout %.2g, fc %zu-relu, dropout %.2g, fc 10",
             c->c1, c->c1, c->c2, (double)CNN_DROP_CONV, c->hidden,
             (double)CNN_DROP_FC);
    return;
  }
  mlp_shape_str(&t->mp.shape, s, sizeof s);
  snprintf(buf, len, "%s MLP, ReLU", s);
}

size_t model_param_count(const train_model *t) {
  return is_cnn(t) ? cnn_shape_params(&t->cp.shape) : mlp_shape_params(&t->mp.shape);
}

float model_in_mean(const train_model *t) {
  return is_cnn(t) ? t->cp.in_mean : t->mp.in_mean;
}

float model_in_std(const train_model *t) {
  return is_cnn(t) ? t->cp.in_std : t->mp.in_std;
}

const char *model_errmsg(const train_model *t) {
  return is_cnn(t) ? cnn_errmsg(t->cnn) : mlp_errmsg(t->mlp);
}

void model_set_lr_decay(train_model *t, long steps) {
  if (is_cnn(t))
    cnn_set_lr_decay(t->cnn, steps);
  else
    mlp_set_lr_decay(t->mlp, steps);
}

int model_train_epoch(train_model *t, const mnist_set *set, mlp_rng *rng,
                      mlp_progress_fn fn, void *user, mlp_progress *out) {
  return is_cnn(t) ? cnn_train_epoch(t->cnn, set, 0, rng, fn, user, out)
                   : mlp_train_epoch(t->mlp, set, 0, rng, fn, user, out);
}

int model_evaluate(train_model *t, const mnist_set *set, size_t *correct) {
  return is_cnn(t) ? cnn_evaluate(t->cnn, set, 0, correct)
                   : mlp_evaluate(t->mlp, set, 0, correct);
}

float model_loss_scale(const train_model *t) {
  return is_cnn(t) ? cnn_loss_scale(t->cnn) : mlp_loss_scale(t->mlp);
}

long model_skipped_steps(const train_model *t) {
  return is_cnn(t) ? cnn_skipped_steps(t->cnn) : mlp_skipped_steps(t->mlp);
}

long model_steps(const train_model *t) {
  return is_cnn(t) ? cnn_steps(t->cnn) : mlp_steps(t->mlp);
}

int model_save(train_model *t, const char *path, char *err, size_t errlen) {
  int st = is_cnn(t) ? cnn_get_params(t->cnn, &t->cp) : mlp_get_params(t->mlp, &t->mp);
  if (st != RUMUS_OK)
    return train_fail(err, errlen, st, "cannot download the parameters: %s",
                      model_errmsg(t));
  char why[1536];
  st = ckpt_save(path, t->kind, &t->mp, &t->cp, why, sizeof why);
  if (st != RUMUS_OK)
    return train_fail(err, errlen, st, "cannot save the model (%s): %s",
                      train_err_name(st), why);
  return RUMUS_OK;
}
