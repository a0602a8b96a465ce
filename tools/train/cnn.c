/* cnn.c - the CNN on the device (see cnn.h); shapes, host parameters and
 * the model file are in cnn_file.c. */
#include "cnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h" /* MLP_ADAMW_DEFAULTS, MLP_LOSS_SCALE_* */

/* Activations and their gradients, each [n, ...] at n rows.  F and DP2 are
 * views of P2's and DF's buffers under another shape (the flatten). */
enum {
  A_X, A_Y, A_A1, A_H1, A_P1, A_I1, A_A2, A_H2, A_P2, A_I2, A_F, A_Z3, A_Z4,
  A_DZ4, A_DH3, A_DF, A_DP2, A_DH2, A_DP1, A_DH1,
  A_COUNT
};

typedef struct {
  rumus_dtype dtype;
  int ndim;       /* with the batch axis */
  size_t dims[3]; /* after the batch axis */
  int alias;      /* the activation whose buffer it views, or -1 */
} act_def;

struct cnn {
  rumus_ctx *ctx;
  cnn_shape shape;
  size_t max_batch;
  rumus_adam_params adam;
  long step, updates; /* as in mlp.c: the schedule's t, AdamW's t */
  rumus_dtype prec;
  float scale; /* dynamic loss scaling (F16), as in mlp.c */
  long growth_interval, good_steps, skipped;
  float base_lr;
  long decay_steps;
  float in_mean, in_std;
  float p_conv, p_fc;
  uint64_t drop_seed;
  uint64_t drop_lane, drop_lanes; /* cnn_set_dropout_lane() */
  train_grad_hook grad_hook;      /* cnn_set_grad_hook() */
  void *grad_hook_user;

  /* F32 masters (running statistics included), compute copies (the
   * masters themselves under F32 and for batch norm), gradients, AdamW
   * moments. */
  rumus_tensor *p[CNN_NTENSOR], *pc[CNN_NPARAM], *g[CNN_NPARAM];
  rumus_tensor *mo[CNN_NPARAM], *vo[CNN_NPARAM];
  rumus_tensor *save_mean[2], *save_invstd[2]; /* batch norm 1 and 2 */
  rumus_tensor *overflow, *loss;

  act_def def[A_COUNT];
  rumus_tensor *full[A_COUNT]; /* at max_batch rows (NULL for views) */
  rumus_tensor *a[A_COUNT];    /* at cur_n rows */
  int owned[A_COUNT];          /* a[i] is a wrapped view to free */
  size_t cur_n;

  train_batcher io;
  char err[2048];
};

/* ---- Errors and small accessors --------------------------------------- */

#define RCALL(m, what, expr)                                                  \
  do {                                                                        \
    int rc_st_ = (expr);                                                      \
    if (rc_st_ != RUMUS_OK)                                                   \
      return train_rumus_fail((m)->err, sizeof (m)->err, (m)->ctx, rc_st_,    \
                              (what));                                        \
  } while (0)

const char *cnn_errmsg(const cnn *m) { return m ? m->err : "NULL model"; }
rumus_dtype cnn_precision(const cnn *m) { return m->prec; }
float cnn_loss_scale(const cnn *m) { return m->scale; }
long cnn_skipped_steps(const cnn *m) { return m->skipped; }
long cnn_steps(const cnn *m) { return m->step; }

void cnn_set_lr_decay(cnn *m, long steps) {
  m->decay_steps = steps > 0 ? steps : 0;
  if (m->decay_steps == 0) m->adam.lr = m->base_lr;
}

void cnn_set_dropout(cnn *m, float p_conv, float p_fc) {
  if (p_conv >= 0.0f && p_conv < 1.0f) m->p_conv = p_conv;
  if (p_fc >= 0.0f && p_fc < 1.0f) m->p_fc = p_fc;
}

/* ---- Tensors ---------------------------------------------------------- */

static void def(cnn *m, int i, rumus_dtype t, int ndim, size_t d0, size_t d1,
                size_t d2, int alias) {
  act_def d = {t, ndim, {d0, d1, d2}, alias};
  m->def[i] = d;
}

static void define_acts(cnn *m) {
  const cnn_shape *s = &m->shape;
  rumus_dtype T = m->prec, I = RUMUS_I32;
  size_t c1 = s->c1, c2 = s->c2, R = MNIST_ROWS, flat = c2 * (R / 4) * (R / 4);
  def(m, A_X, T, 4, 1, R, R, -1);
  def(m, A_Y, I, 1, 0, 0, 0, -1);
  def(m, A_A1, T, 4, c1, R, R, -1);
  def(m, A_H1, T, 4, c1, R, R, -1);
  def(m, A_P1, T, 4, c1, R / 2, R / 2, -1);
  def(m, A_I1, I, 4, c1, R / 2, R / 2, -1);
  def(m, A_A2, T, 4, c2, R / 2, R / 2, -1);
  def(m, A_H2, T, 4, c2, R / 2, R / 2, -1);
  def(m, A_P2, T, 4, c2, R / 4, R / 4, -1);
  def(m, A_I2, I, 4, c2, R / 4, R / 4, -1);
  def(m, A_F, T, 2, flat, 0, 0, A_P2);
  def(m, A_Z3, T, 2, s->hidden, 0, 0, -1);
  def(m, A_Z4, T, 2, MNIST_CLASSES, 0, 0, -1);
  def(m, A_DZ4, T, 2, MNIST_CLASSES, 0, 0, -1);
  def(m, A_DH3, T, 2, s->hidden, 0, 0, -1);
  def(m, A_DF, T, 2, flat, 0, 0, -1);
  def(m, A_DP2, T, 4, c2, R / 4, R / 4, A_DF);
  def(m, A_DH2, T, 4, c2, R / 2, R / 2, -1);
  def(m, A_DP1, T, 4, c1, R / 2, R / 2, -1);
  def(m, A_DH1, T, 4, c1, R, R, -1);
}

static void act_shape(const act_def *d, size_t n, size_t shape[4]) {
  shape[0] = n;
  for (int k = 1; k < d->ndim; k++) shape[k] = d->dims[k - 1];
}

static void free_views(cnn *m) {
  for (int i = 0; i < A_COUNT; i++) {
    if (m->owned[i]) rumus_tensor_free(m->a[i]);
    m->owned[i] = 0;
    m->a[i] = NULL;
  }
  m->cur_n = 0;
}

/* Points the activations at n rows: the full tensors at max_batch rows,
 * else views of their first n rows. */
static int bind_rows(cnn *m, size_t n) {
  if (n == m->cur_n) return RUMUS_OK;
  free_views(m);
  for (int i = 0; i < A_COUNT; i++) {
    const act_def *d = &m->def[i];
    if (d->alias < 0 && n == m->max_batch) {
      m->a[i] = m->full[i];
      continue;
    }
    size_t off = 0, shape[4];
    act_shape(d, n, shape);
    cl_mem mem = rumus_tensor_cl_mem(m->full[d->alias < 0 ? i : d->alias], &off);
    int st = rumus_tensor_wrap(m->ctx, d->dtype, d->ndim, shape, mem, off, &m->a[i]);
    if (st != RUMUS_OK) {
      free_views(m);
      return train_rumus_fail(m->err, sizeof m->err, m->ctx, st,
                              "rumus_tensor_wrap (batch view)");
    }
    m->owned[i] = 1;
  }
  m->cur_n = n;
  return RUMUS_OK;
}

static int create_params(cnn *m) {
  static const size_t one = 1;
  for (int k = 0; k < CNN_NTENSOR; k++) {
    size_t d[4];
    int nd = cnn_tensor_shape(&m->shape, k, d);
    RCALL(m, "rumus_tensor_create (parameters)",
          rumus_tensor_create(m->ctx, RUMUS_F32, nd, d, &m->p[k]));
    if (k >= CNN_NPARAM) continue;
    rumus_dtype gt = cnn_is_bn(k) ? RUMUS_F32 : m->prec;
    RCALL(m, "rumus_tensor_create (gradients)",
          rumus_tensor_create(m->ctx, gt, nd, d, &m->g[k]));
    RCALL(m, "rumus_tensor_create (AdamW moments)",
          rumus_tensor_create(m->ctx, RUMUS_F32, nd, d, &m->mo[k]));
    RCALL(m, "rumus_tensor_create (AdamW moments)",
          rumus_tensor_create(m->ctx, RUMUS_F32, nd, d, &m->vo[k]));
    m->pc[k] = m->p[k];
    if (gt != RUMUS_F32)
      RCALL(m, "rumus_tensor_create (compute copies)",
            rumus_tensor_create(m->ctx, gt, nd, d, &m->pc[k]));
  }
  size_t ch[2] = {m->shape.c1, m->shape.c2};
  for (int b = 0; b < 2; b++) {
    RCALL(m, "rumus_tensor_create (batch statistics)",
          rumus_tensor_create(m->ctx, RUMUS_F32, 1, &ch[b], &m->save_mean[b]));
    RCALL(m, "rumus_tensor_create (batch statistics)",
          rumus_tensor_create(m->ctx, RUMUS_F32, 1, &ch[b], &m->save_invstd[b]));
  }
  RCALL(m, "rumus_tensor_create (loss)",
        rumus_tensor_create(m->ctx, RUMUS_F32, 0, &one, &m->loss));
  if (m->prec == RUMUS_F16)
    RCALL(m, "rumus_tensor_create (overflow flag)",
          rumus_tensor_create(m->ctx, RUMUS_F32, 0, &one, &m->overflow));
  return RUMUS_OK;
}

static int create_acts(cnn *m) {
  define_acts(m);
  for (int i = 0; i < A_COUNT; i++) {
    if (m->def[i].alias >= 0) continue;
    size_t shape[4];
    act_shape(&m->def[i], m->max_batch, shape);
    RCALL(m, "rumus_tensor_create (activations)",
          rumus_tensor_create(m->ctx, m->def[i].dtype, m->def[i].ndim, shape,
                              &m->full[i]));
  }
  return bind_rows(m, m->max_batch);
}

void cnn_free(cnn *m) {
  if (!m) return;
  free_views(m);
  for (int i = 0; i < A_COUNT; i++) rumus_tensor_free(m->full[i]);
  for (int k = 0; k < CNN_NPARAM; k++) {
    if (m->pc[k] != m->p[k]) rumus_tensor_free(m->pc[k]);
    rumus_tensor_free(m->g[k]);
    rumus_tensor_free(m->mo[k]);
    rumus_tensor_free(m->vo[k]);
  }
  for (int k = 0; k < CNN_NTENSOR; k++) rumus_tensor_free(m->p[k]);
  for (int b = 0; b < 2; b++) {
    rumus_tensor_free(m->save_mean[b]);
    rumus_tensor_free(m->save_invstd[b]);
  }
  rumus_tensor_free(m->loss);
  rumus_tensor_free(m->overflow);
  train_batcher_free(&m->io);
  free(m);
}

int cnn_create(rumus_ctx *ctx, const cnn_shape *s, size_t max_batch,
               const rumus_adam_params *adam, rumus_dtype precision,
               uint64_t dropout_seed, cnn **out, char *err, size_t errlen) {
  if (!ctx || !s || !out)
    return train_fail(err, errlen, RUMUS_ENULL, "cnn_create: NULL argument");
  *out = NULL;
  if (precision != RUMUS_F32 && precision != RUMUS_F16 && precision != RUMUS_BF16)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "cnn_create: precision %s is not F32, F16 or BF16",
                      rumus_dtype_name(precision));
  if (!cnn_shape_valid(s))
    return train_fail(err, errlen, RUMUS_EINVAL, "cnn_create: invalid shape");
  if (max_batch == 0 || max_batch > 65536)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "cnn_create: batch size %zu is outside 1..65536", max_batch);
  cnn *m = calloc(1, sizeof *m);
  if (!m) return train_fail(err, errlen, RUMUS_ENOMEM, "cnn_create: out of memory");
  static const rumus_adam_params defaults = MLP_ADAMW_DEFAULTS;
  m->ctx = ctx;
  m->shape = *s;
  m->max_batch = max_batch;
  m->adam = adam ? *adam : defaults;
  m->base_lr = m->adam.lr;
  m->in_std = 1.0f;
  m->prec = precision;
  m->scale = precision == RUMUS_F16 ? MLP_LOSS_SCALE_INIT : 1.0f;
  m->growth_interval = MLP_LOSS_SCALE_GROWTH;
  m->p_conv = CNN_DROP_CONV;
  m->p_fc = CNN_DROP_FC;
  m->drop_seed = dropout_seed;
  m->drop_lanes = 1;
  int st = train_batcher_alloc(&m->io, max_batch);
  if (st != RUMUS_OK) snprintf(m->err, sizeof m->err, "cnn_create: out of host memory");
  if (st == RUMUS_OK) st = create_params(m);
  if (st == RUMUS_OK) st = create_acts(m);
  if (st != RUMUS_OK) {
    train_fail(err, errlen, st, "%s", m->err);
    cnn_free(m);
    return st;
  }
  *out = m;
  return RUMUS_OK;
}

/* ---- Parameters ------------------------------------------------------- */

static int check_params(cnn *m, const cnn_params *p) {
  const cnn_shape *a = &m->shape, *b = &p->shape;
  if (a->c1 != b->c1 || a->c2 != b->c2 || a->hidden != b->hidden) {
    char sa[96], sb[96];
    cnn_shape_str(a, sa, sizeof sa);
    cnn_shape_str(b, sb, sizeof sb);
    return train_fail(m->err, sizeof m->err, RUMUS_ESHAPE,
                      "cnn_set_params: the parameters are for a %s model, the "
                      "model is %s", sb, sa);
  }
  if (!isfinite(p->in_mean) || !isfinite(p->in_std) || !(p->in_std > 0.0f))
    return train_fail(m->err, sizeof m->err, RUMUS_EINVAL,
                      "cnn_set_params: bad input normalisation: mean %g, std %g",
                      (double)p->in_mean, (double)p->in_std);
  return RUMUS_OK;
}

int cnn_set_params(cnn *m, const cnn_params *p) {
  int st = check_params(m, p);
  if (st != RUMUS_OK) return st;
  for (int k = 0; k < CNN_NTENSOR; k++) {
    RCALL(m, "upload parameters",
          rumus_tensor_upload(m->p[k], p->t[k], rumus_tensor_nbytes(m->p[k])));
    if (k >= CNN_NPARAM) continue;
    RCALL(m, "rumus_tensor_fill (AdamW moments)", rumus_tensor_fill(m->mo[k], 0.0f));
    RCALL(m, "rumus_tensor_fill (AdamW moments)", rumus_tensor_fill(m->vo[k], 0.0f));
    if (m->pc[k] != m->p[k])
      RCALL(m, "rumus_cast (parameters to the compute copy)",
            rumus_cast(m->ctx, m->p[k], m->pc[k]));
  }
  RCALL(m, "rumus_ctx_sync", rumus_ctx_sync(m->ctx));
  m->step = m->updates = m->skipped = m->good_steps = 0;
  m->scale = m->prec == RUMUS_F16 ? MLP_LOSS_SCALE_INIT : 1.0f;
  m->in_mean = m->io.mean = p->in_mean;
  m->in_std = m->io.std = p->in_std;
  return RUMUS_OK;
}

/* Allocates p for the model's shape if p->t[0] is NULL. */
static int host_alloc(cnn *m, cnn_params *p, const char *op) {
  if (p->t[0]) return RUMUS_OK;
  int st = cnn_params_alloc(p, &m->shape);
  if (st != RUMUS_OK)
    train_fail(m->err, sizeof m->err, st, "%s: out of host memory", op);
  return st;
}

int cnn_get_params(cnn *m, cnn_params *p) {
  int st = host_alloc(m, p, "cnn_get_params");
  if (st != RUMUS_OK) return st;
  p->in_mean = m->in_mean;
  p->in_std = m->in_std;
  for (int k = 0; k < CNN_NTENSOR; k++)
    RCALL(m, "download parameters",
          rumus_tensor_download(m->p[k], p->t[k], rumus_tensor_nbytes(m->p[k])));
  return RUMUS_OK;
}

int cnn_get_grads(cnn *m, cnn_params *g) {
  int st = host_alloc(m, g, "cnn_get_grads");
  if (st != RUMUS_OK) return st;
  for (int k = 0; k < CNN_NPARAM; k++)
    RCALL(m, "download gradients",
          rumus_tensor_download_f32(m->g[k], g->t[k], rumus_tensor_numel(m->g[k])));
  return RUMUS_OK;
}

/* ---- Forward ---------------------------------------------------------- */

/* conv (3x3, padding 1) -> batch norm -> ReLU (in place) -> max pool 2 of
 * block b (0 or 1): x -> a (conv), h (normalised, ReLU), pooled, idx. */
static int conv_block(cnn *m, int b, int train, rumus_tensor *x, int a, int h,
                      int pooled, int idx) {
  static const rumus_conv2d_params cp = {1, 1, 1, 1, 1, 1, 1};
  static const rumus_pool2d_params pp = RUMUS_POOL2D_PARAMS(2, 2);
  int w = b ? CNN_CONV2_W : CNN_CONV1_W, bn = b ? CNN_BN2_W : CNN_BN1_W;
  int stats = b ? CNN_BN2_MEAN : CNN_BN1_MEAN;
  rumus_tensor **t = m->a;
  RCALL(m, "rumus_conv2d_fwd",
        rumus_conv2d_fwd(m->ctx, &cp, x, m->pc[w], m->pc[w + 1], t[a]));
  if (train)
    RCALL(m, "rumus_batchnorm2d_fwd_train",
          rumus_batchnorm2d_fwd_train(m->ctx, NULL, t[a], m->p[bn], m->p[bn + 1],
                                      m->p[stats], m->p[stats + 1], t[h],
                                      m->save_mean[b], m->save_invstd[b]));
  else
    RCALL(m, "rumus_batchnorm2d_fwd_eval",
          rumus_batchnorm2d_fwd_eval(m->ctx, NULL, t[a], m->p[bn], m->p[bn + 1],
                                     m->p[stats], m->p[stats + 1], t[h]));
  RCALL(m, "rumus_activation_fwd (ReLU)",
        rumus_activation_fwd(m->ctx, RUMUS_ACT_RELU, 0.0f, t[h], t[h]));
  RCALL(m, "rumus_maxpool2d_fwd",
        rumus_maxpool2d_fwd(m->ctx, &pp, t[h], t[pooled], t[idx]));
  return RUMUS_OK;
}

/* out = in W^T + b for linear layer w (CNN_FC1_W or CNN_FC2_W). */
static int linear(cnn *m, int w, rumus_tensor *in, rumus_tensor *out) {
  RCALL(m, "rumus_gemm (forward)",
        rumus_gemm(m->ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0f, in, m->pc[w], 0.0f, out));
  RCALL(m, "rumus_bias_add", rumus_bias_add(m->ctx, out, m->pc[w + 1]));
  return RUMUS_OK;
}

/* The dropout offsets of the current step: 2 step and 2 step + 1 on one
 * device; with lanes (data-parallel ranks), step t of lane k takes the
 * pair of step t lanes + k, so every lane draws its own masks. */
static uint64_t drop_offset(const cnn *m, int which) {
  uint64_t t = (uint64_t)m->step * m->drop_lanes + m->drop_lane;
  return 2u * t + (uint64_t)which;
}

void cnn_set_dropout_lane(cnn *m, uint64_t lane, uint64_t lanes) {
  if (lanes == 0 || lane >= lanes) return;
  m->drop_lane = lane;
  m->drop_lanes = lanes;
}

void cnn_set_grad_hook(cnn *m, train_grad_hook hook, void *user) {
  m->grad_hook = hook;
  m->grad_hook_user = user;
}

int cnn_grad_tensors(cnn *m, rumus_tensor **out, int max) {
  if (max < CNN_NPARAM) return -1;
  for (int k = 0; k < CNN_NPARAM; k++) out[k] = m->g[k];
  return CNN_NPARAM;
}

rumus_tensor *cnn_tensor(cnn *m, int k) {
  return k >= 0 && k < CNN_NTENSOR ? m->p[k] : NULL;
}

/* Uploads n rows of x (and y if not NULL) and enqueues the forward pass
 * in training (batch statistics, dropout) or evaluation mode. */
static int forward(cnn *m, const float *x, const int32_t *y, size_t n, int train) {
  int st = bind_rows(m, n);
  if (st != RUMUS_OK) return st;
  rumus_tensor **t = m->a;
  RCALL(m, "upload inputs", rumus_tensor_upload_f32(t[A_X], x, rumus_tensor_numel(t[A_X])));
  if (y) RCALL(m, "upload labels", rumus_tensor_upload(t[A_Y], y, rumus_tensor_nbytes(t[A_Y])));
  st = conv_block(m, 0, train, t[A_X], A_A1, A_H1, A_P1, A_I1);
  if (st == RUMUS_OK) st = conv_block(m, 1, train, t[A_P1], A_A2, A_H2, A_P2, A_I2);
  if (st != RUMUS_OK) return st;
  if (train && m->p_conv > 0.0f)
    RCALL(m, "rumus_dropout_fwd (after conv2)",
          rumus_dropout_fwd(m->ctx, m->p_conv, m->drop_seed, drop_offset(m, 0),
                            t[A_P2], t[A_P2]));
  st = linear(m, CNN_FC1_W, t[A_F], t[A_Z3]);
  if (st != RUMUS_OK) return st;
  RCALL(m, "rumus_activation_fwd (ReLU)",
        rumus_activation_fwd(m->ctx, RUMUS_ACT_RELU, 0.0f, t[A_Z3], t[A_Z3]));
  if (train && m->p_fc > 0.0f)
    RCALL(m, "rumus_dropout_fwd (after fc1)",
          rumus_dropout_fwd(m->ctx, m->p_fc, m->drop_seed, drop_offset(m, 1),
                            t[A_Z3], t[A_Z3]));
  return linear(m, CNN_FC2_W, t[A_Z3], t[A_Z4]);
}

/* ---- Backward --------------------------------------------------------- */

/* Gradients of linear layer w from dout and its input in; din (may be
 * NULL) receives dout W. */
static int linear_bwd(cnn *m, int w, rumus_tensor *dout, rumus_tensor *in,
                      rumus_tensor *din) {
  RCALL(m, "rumus_gemm (dW = dz^T h)",
        rumus_gemm(m->ctx, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0f, dout, in, 0.0f, m->g[w]));
  RCALL(m, "rumus_bias_grad", rumus_bias_grad(m->ctx, dout, m->g[w + 1]));
  if (din)
    RCALL(m, "rumus_gemm (dh = dz W)",
          rumus_gemm(m->ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, dout, m->pc[w],
                     0.0f, din));
  return RUMUS_OK;
}

/* Backward of conv block b from dpooled (the gradient of its pooled
 * output) down to dx (NULL: not needed), with dh as scratch. */
static int conv_block_bwd(cnn *m, int b, rumus_tensor *x, int a, int h, int idx,
                          rumus_tensor *dpooled, rumus_tensor *dh,
                          rumus_tensor *dx) {
  static const rumus_conv2d_params cp = {1, 1, 1, 1, 1, 1, 1};
  static const rumus_pool2d_params pp = RUMUS_POOL2D_PARAMS(2, 2);
  int w = b ? CNN_CONV2_W : CNN_CONV1_W, bn = b ? CNN_BN2_W : CNN_BN1_W;
  rumus_tensor **t = m->a;
  RCALL(m, "rumus_maxpool2d_bwd", rumus_maxpool2d_bwd(m->ctx, &pp, dpooled, t[idx], dh));
  /* ReLU ran in place: relu(v) > 0 exactly where v > 0, so its output
   * gives the same mask as its input. */
  RCALL(m, "rumus_activation_bwd (ReLU)",
        rumus_activation_bwd(m->ctx, RUMUS_ACT_RELU, 0.0f, t[h], dh, dh));
  RCALL(m, "rumus_batchnorm2d_bwd",
        rumus_batchnorm2d_bwd(m->ctx, dh, t[a], m->p[bn], m->save_mean[b],
                              m->save_invstd[b], dh, m->g[bn], m->g[bn + 1]));
  RCALL(m, "rumus_conv2d_bwd_weight",
        rumus_conv2d_bwd_weight(m->ctx, &cp, x, dh, m->g[w]));
  RCALL(m, "rumus_channel_bias_grad", rumus_channel_bias_grad(m->ctx, dh, m->g[w + 1]));
  if (dx)
    RCALL(m, "rumus_conv2d_bwd_data", rumus_conv2d_bwd_data(m->ctx, &cp, dh, m->pc[w], dx));
  return RUMUS_OK;
}

/* The loss, its gradient times the loss scale, and every gradient. */
static int backward(cnn *m) {
  rumus_tensor **t = m->a;
  rumus_xent_params xp = RUMUS_XENT_DEFAULTS;
  xp.grad_scale = m->scale;
  RCALL(m, "rumus_cross_entropy",
        rumus_cross_entropy(m->ctx, t[A_Z4], t[A_Y], m->loss, t[A_DZ4], &xp));
  int st = linear_bwd(m, CNN_FC2_W, t[A_DZ4], t[A_Z3], t[A_DH3]);
  if (st != RUMUS_OK) return st;
  if (m->p_fc > 0.0f)
    RCALL(m, "rumus_dropout_bwd (after fc1)",
          rumus_dropout_bwd(m->ctx, m->p_fc, m->drop_seed, drop_offset(m, 1),
                            t[A_DH3], t[A_DH3]));
  /* Z3 holds dropout(relu(z)): positive exactly where relu(z) was kept,
   * and the dropped places already have a zero gradient. */
  RCALL(m, "rumus_activation_bwd (ReLU)",
        rumus_activation_bwd(m->ctx, RUMUS_ACT_RELU, 0.0f, t[A_Z3], t[A_DH3], t[A_DH3]));
  st = linear_bwd(m, CNN_FC1_W, t[A_DH3], t[A_F], t[A_DF]);
  if (st != RUMUS_OK) return st;
  if (m->p_conv > 0.0f)
    RCALL(m, "rumus_dropout_bwd (after conv2)",
          rumus_dropout_bwd(m->ctx, m->p_conv, m->drop_seed, drop_offset(m, 0),
                            t[A_DF], t[A_DF]));
  st = conv_block_bwd(m, 1, t[A_P1], A_A2, A_H2, A_I2, t[A_DP2], t[A_DH2], t[A_DP1]);
  if (st != RUMUS_OK) return st;
  return conv_block_bwd(m, 0, t[A_X], A_A1, A_H1, A_I1, t[A_DP1], t[A_DH1], NULL);
}

/* ---- Update ----------------------------------------------------------- */

/* AdamW on every parameter, as mlp.c's update(): under F16 the sum of
 * squares of every gradient first, the steps skipping themselves on the
 * device when it is not finite. */
static int update(cnn *m) {
  rumus_grad_scaling scaling = {1.0f / m->scale, m->overflow};
  if (m->overflow) {
    RCALL(m, "rumus_tensor_fill (overflow flag)", rumus_tensor_fill(m->overflow, 0.0f));
    for (int k = 0; k < CNN_NPARAM; k++)
      RCALL(m, "rumus_sum_squares (gradients)",
            rumus_sum_squares(m->ctx, m->g[k], m->overflow));
  }
  if (m->decay_steps > 0) {
    double t = (double)(m->step - 1) / (double)m->decay_steps;
    if (t > 1.0) t = 1.0;
    m->adam.lr = (float)(m->base_lr * 0.5 * (1.0 + cos(3.14159265358979323846 * t)));
  }
  for (int k = 0; k < CNN_NPARAM; k++) {
    rumus_tensor *copy = m->pc[k] != m->p[k] ? m->pc[k] : NULL;
    RCALL(m, "rumus_adam_step_ex",
          rumus_adam_step_ex(m->ctx, &m->adam, m->updates + 1, m->p[k], m->g[k],
                             m->mo[k], m->vo[k], copy, &scaling));
  }
  return RUMUS_OK;
}

/* The loss scale after a step, as mlp.c's settle_scale(). */
static int settle_scale(cnn *m) {
  if (!m->overflow) {
    m->updates++;
    return RUMUS_OK;
  }
  float flag = 0.0f;
  RCALL(m, "download overflow flag", rumus_tensor_download(m->overflow, &flag, sizeof flag));
  if (!isfinite(flag)) {
    m->skipped++;
    m->good_steps = 0;
    if (m->scale > MLP_LOSS_SCALE_MIN) m->scale *= 0.5f;
    return RUMUS_OK;
  }
  m->updates++;
  if (++m->good_steps >= m->growth_interval) {
    m->good_steps = 0;
    if (m->scale < MLP_LOSS_SCALE_MAX) m->scale *= 2.0f;
  }
  return RUMUS_OK;
}

/* ---- Steps and passes ------------------------------------------------- */

static int check_rows(cnn *m, const char *op, size_t n) {
  if (n == 0 || n > m->max_batch)
    return train_fail(m->err, sizeof m->err, RUMUS_EINVAL,
                      "%s: %zu rows, expected 1..%zu", op, n, m->max_batch);
  return RUMUS_OK;
}

static int download_loss(cnn *m, double *loss) {
  float l32 = 0.0f;
  RCALL(m, "download loss", rumus_tensor_download(m->loss, &l32, sizeof l32));
  *loss = l32;
  return RUMUS_OK;
}

int cnn_loss_grad(cnn *m, const float *x, const int32_t *y, size_t n,
                  double *loss) {
  int st = check_rows(m, "cnn_loss_grad", n);
  if (st == RUMUS_OK) st = forward(m, x, y, n, 1);
  if (st == RUMUS_OK) st = backward(m);
  if (st == RUMUS_OK && loss) st = download_loss(m, loss);
  if (st != RUMUS_OK) return st;
  RCALL(m, "rumus_ctx_sync", rumus_ctx_sync(m->ctx));
  return RUMUS_OK;
}

int cnn_train_step(cnn *m, const float *x, const int32_t *y, size_t n,
                   double *loss, size_t *correct) {
  int st = check_rows(m, "cnn_train_step", n);
  if (st == RUMUS_OK) st = forward(m, x, y, n, 1);
  if (st == RUMUS_OK) st = backward(m);
  if (st == RUMUS_OK && m->grad_hook)
    st = m->grad_hook(m->grad_hook_user, m->err, sizeof m->err);
  if (st != RUMUS_OK) return st;
  m->step++; /* after the backward: it redraws this step's masks */
  st = update(m);
  if (st != RUMUS_OK) return st;
  if (correct) {
    RCALL(m, "download logits",
          rumus_tensor_download_f32(m->a[A_Z4], m->io.logits, n * MNIST_CLASSES));
    *correct = train_count_correct(m->io.logits, y, n, MNIST_CLASSES);
  }
  if (loss) st = download_loss(m, loss);
  if (st == RUMUS_OK) st = settle_scale(m);
  if (st != RUMUS_OK) return st;
  RCALL(m, "rumus_ctx_sync (after a training step)", rumus_ctx_sync(m->ctx));
  return RUMUS_OK;
}

static int logits_mode(cnn *m, const float *x, size_t n, float *logits, int train) {
  int st = check_rows(m, "cnn_logits", n);
  if (st == RUMUS_OK) st = forward(m, x, NULL, n, train);
  if (st != RUMUS_OK) return st;
  RCALL(m, "download logits",
        rumus_tensor_download_f32(m->a[A_Z4], logits, n * MNIST_CLASSES));
  RCALL(m, "rumus_ctx_sync (after a forward pass)", rumus_ctx_sync(m->ctx));
  return RUMUS_OK;
}

int cnn_logits(cnn *m, const float *x, size_t n, float *logits) {
  return logits_mode(m, x, n, logits, 0);
}

int cnn_logits_train(cnn *m, const float *x, size_t n, float *logits) {
  return logits_mode(m, x, n, logits, 1);
}

static int check_set(cnn *m, const char *op, const mnist_set *set) {
  if (!set || !set->images || !set->labels || set->count == 0 ||
      set->count > UINT32_MAX)
    return train_fail(m->err, sizeof m->err, RUMUS_EINVAL,
                      "%s: needs a non-empty data set of at most 2^32-1 images", op);
  return RUMUS_OK;
}

static int step_cb(void *m, const float *x, const int32_t *y, size_t n,
                   double *loss, size_t *correct) {
  return cnn_train_step(m, x, y, n, loss, correct);
}

static int logits_cb(void *m, const float *x, size_t n, float *logits) {
  return cnn_logits(m, x, n, logits);
}

int cnn_evaluate(cnn *m, const mnist_set *set, size_t count, size_t *correct) {
  int st = check_set(m, "cnn_evaluate", set);
  if (st != RUMUS_OK) return st;
  return train_evaluate(&m->io, m, logits_cb, set, count, correct);
}

int cnn_train_epoch(cnn *m, const mnist_set *set, size_t count, mlp_rng *rng,
                    mlp_progress_fn fn, void *user, mlp_progress *out) {
  int st = check_set(m, "cnn_train_epoch", set);
  if (st != RUMUS_OK) return st;
  st = train_epoch(&m->io, m, step_cb, set, count, rng, fn, user, out);
  if (st == RUMUS_ENOMEM)
    snprintf(m->err, sizeof m->err, "cnn_train_epoch: out of host memory");
  return st;
}
