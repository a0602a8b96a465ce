/* mlp.c - see mlp.h. */
#include "mlp.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define L_MAX MLP_MAX_LAYERS

struct mlp {
  rumus_ctx *ctx;
  mlp_shape shape;
  size_t max_batch;
  rumus_adam_params adam;
  long step;    /* training steps taken (the learning-rate schedule's t) */
  long updates; /* AdamW updates applied (its bias-correction t) */
  rumus_dtype prec; /* storage of the compute copies, activations, grads */
  /* Dynamic loss scaling (F16 only; scale 1 otherwise): the loss gradient
   * is multiplied by scale; a step whose scaled gradients overflowed is
   * skipped on the device and halves the scale; growth_interval steps in
   * a row without overflow double it (PyTorch's GradScaler). */
  float scale;
  long growth_interval, good_steps, skipped;
  /* Cosine learning-rate decay: lr = base_lr * (1 + cos(pi * t / T)) / 2
   * for step t = 0 .. T - 1; T == 0 keeps adam.lr constant. */
  float base_lr;
  long decay_steps;
  float in_mean, in_std;

  /* Parameters, gradients and AdamW moments. */
  rumus_tensor *w[L_MAX], *b[L_MAX], *gw[L_MAX], *gb[L_MAX];
  rumus_tensor *mw[L_MAX], *vw[L_MAX], *mb[L_MAX], *vb[L_MAX];
  /* The parameters in prec, written by every AdamW step, read by the
   * forward and backward passes: w and b themselves under F32. */
  rumus_tensor *wc[L_MAX], *bc[L_MAX];
  /* F16: the sum of squares of every scaled gradient (one F32), inf or
   * NaN when one overflowed: the steps' skip_if_nonfinite. */
  rumus_tensor *overflow;

  /* Activations at max_batch rows: x [B, sizes[0]], y [B] (int32),
   * z[l] and dz[l] [B, sizes[l+1]], h[l] [B, sizes[l]] for l >= 1 (h[0] is
   * x).  The loss is a scalar. */
  rumus_tensor *x_full, *y_full, *z_full[L_MAX], *dz_full[L_MAX],
      *h_full[L_MAX], *loss;

  /* Views of the activations at cur_n rows: the full tensors themselves
   * when cur_n == max_batch, else tensors wrapped on the same buffers. */
  size_t cur_n;
  int views_owned;
  rumus_tensor *x, *y, *z[L_MAX], *dz[L_MAX], *h[L_MAX];

  /* Called between the backward pass and the update (mlp_set_grad_hook). */
  train_grad_hook grad_hook;
  void *grad_hook_user;

  /* Host staging: one batch of inputs, labels, logits and indices. */
  float *xbuf, *logits;
  int32_t *ybuf;
  uint32_t *idx;

  char err[2048];
};

/* ---- Errors ----------------------------------------------------------- */


/* A failed rumus call: "WHAT: RUMUS_E...: <the context's message>". */
static int rfail(mlp *m, int st, const char *what, int layer) {
  char where[160];
  if (layer >= 0)
    snprintf(where, sizeof where, "%s (layer %d)", what, layer);
  else
    snprintf(where, sizeof where, "%s", what);
  return train_rumus_fail(m->err, sizeof m->err, m->ctx, st, where);
}

#define RCALL(m, what, layer, expr)                                           \
  do {                                                                        \
    int rc_st_ = (expr);                                                      \
    if (rc_st_ != RUMUS_OK) return rfail((m), rc_st_, (what), (layer));       \
  } while (0)

const char *mlp_errmsg(const mlp *m) { return m ? m->err : "NULL model"; }
const mlp_shape *mlp_get_shape(const mlp *m) { return &m->shape; }
long mlp_steps(const mlp *m) { return m->step; }

/* ---- Shapes and host parameters --------------------------------------- */

int mlp_shape_make(mlp_shape *s, size_t inputs, const size_t *hidden,
                   int nhidden, size_t outputs) {
  if (!s || nhidden < 0 || nhidden > MLP_MAX_LAYERS - 1 ||
      (nhidden > 0 && !hidden))
    return RUMUS_EINVAL;
  memset(s, 0, sizeof *s);
  s->nlayers = nhidden + 1;
  s->sizes[0] = inputs;
  for (int i = 0; i < nhidden; i++) s->sizes[i + 1] = hidden[i];
  s->sizes[nhidden + 1] = outputs;
  for (int i = 0; i <= s->nlayers; i++)
    if (s->sizes[i] == 0 || s->sizes[i] > MLP_MAX_WIDTH) return RUMUS_EINVAL;
  return RUMUS_OK;
}

void mlp_shape_str(const mlp_shape *s, char *buf, size_t len) {
  size_t off = 0;
  if (len) buf[0] = '\0';
  for (int i = 0; i <= s->nlayers && off < len; i++) {
    int w = snprintf(buf + off, len - off, "%s%zu", i ? "-" : "", s->sizes[i]);
    if (w < 0) break;
    off += (size_t)w;
  }
}

size_t mlp_shape_params(const mlp_shape *s) {
  size_t n = 0;
  for (int l = 0; l < s->nlayers; l++)
    n += s->sizes[l + 1] * s->sizes[l] + s->sizes[l + 1];
  return n;
}

static int shape_valid(const mlp_shape *s) {
  if (s->nlayers < 1 || s->nlayers > MLP_MAX_LAYERS) return 0;
  for (int i = 0; i <= s->nlayers; i++)
    if (s->sizes[i] == 0 || s->sizes[i] > MLP_MAX_WIDTH) return 0;
  return 1;
}

static int shape_equal(const mlp_shape *a, const mlp_shape *b) {
  if (a->nlayers != b->nlayers) return 0;
  for (int i = 0; i <= a->nlayers; i++)
    if (a->sizes[i] != b->sizes[i]) return 0;
  return 1;
}

void mlp_params_free(mlp_params *p) {
  if (!p) return;
  for (int l = 0; l < MLP_MAX_LAYERS; l++) {
    free(p->w[l]);
    free(p->b[l]);
  }
  memset(p, 0, sizeof *p);
}

int mlp_params_alloc(mlp_params *p, const mlp_shape *s) {
  if (!p || !s) return RUMUS_EINVAL;
  memset(p, 0, sizeof *p);
  if (!shape_valid(s)) return RUMUS_EINVAL;
  p->shape = *s;
  p->in_mean = 0.0f;
  p->in_std = 1.0f;
  for (int l = 0; l < s->nlayers; l++) {
    p->w[l] = calloc(s->sizes[l + 1] * s->sizes[l], sizeof(float));
    p->b[l] = calloc(s->sizes[l + 1], sizeof(float));
    if (!p->w[l] || !p->b[l]) {
      mlp_params_free(p);
      return RUMUS_ENOMEM;
    }
  }
  return RUMUS_OK;
}

void mlp_params_init(mlp_params *p, uint64_t seed) {
  mlp_rng r;
  mlp_rng_seed(&r, seed);
  for (int l = 0; l < p->shape.nlayers; l++) {
    size_t in = p->shape.sizes[l], out = p->shape.sizes[l + 1];
    float k = (float)(1.0 / sqrt((double)in));
    for (size_t i = 0; i < out * in; i++) p->w[l][i] = mlp_rng_uniform(&r, -k, k);
    for (size_t i = 0; i < out; i++) p->b[l][i] = mlp_rng_uniform(&r, -k, k);
  }
}

/* ---- Model files ------------------------------------------------------ */
/* Layout (docs/TRAINING.md), all little-endian:
 *   0   8  magic "RUMUSMLP"
 *   8   4  version, 1
 *   12  4  L, the number of Linear layers (1..MLP_MAX_LAYERS)
 *   16  4  float32 in_mean
 *   20  4  float32 in_std
 *   24  4  x (L + 1) sizes: inputs, hidden widths, outputs
 *   ..     per layer: float32 W [out, in] row-major, then float32 b [out]
 *   end 4  CRC-32 (zlib's crc32) of every byte before it */

static const unsigned char MODEL_MAGIC[8] = {'R', 'U', 'M', 'U',
                                             'S', 'M', 'L', 'P'};
#define MODEL_VERSION 1u
#define MODEL_HEADER 24u

static size_t model_bytes(const mlp_shape *s) {
  return MODEL_HEADER + 4 * ((size_t)s->nlayers + 1) +
         4 * mlp_shape_params(s) + 4;
}

int mlp_params_save(const mlp_params *p, const char *path, char *err,
                    size_t errlen) {
  if (!p || !path || !shape_valid(&p->shape))
    return train_fail(err, errlen, RUMUS_EINVAL, "mlp_params_save: bad argument");
  const mlp_shape *s = &p->shape;
  size_t total = model_bytes(s);
  unsigned char *buf = malloc(total);
  if (!buf)
    return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory for %zu bytes",
                    path, total);
  memcpy(buf, MODEL_MAGIC, 8);
  train_put32(buf + 8, MODEL_VERSION);
  train_put32(buf + 12, (uint32_t)s->nlayers);
  train_put_floats(buf + 16, &p->in_mean, 1);
  train_put_floats(buf + 20, &p->in_std, 1);
  size_t off = MODEL_HEADER;
  for (int i = 0; i <= s->nlayers; i++, off += 4)
    train_put32(buf + off, (uint32_t)s->sizes[i]);
  for (int l = 0; l < s->nlayers; l++) {
    size_t nw = s->sizes[l + 1] * s->sizes[l], nb = s->sizes[l + 1];
    train_put_floats(buf + off, p->w[l], nw);
    off += 4 * nw;
    train_put_floats(buf + off, p->b[l], nb);
    off += 4 * nb;
  }
  train_put32(buf + off, train_crc32(buf, off));

  int st = train_write_file(path, buf, total, err, errlen);
  free(buf);
  return st;
}

/* The fixed header and layer sizes of a model file (f at its start) into
 * hdr, *s and the input normalisation, each checked. */
static int read_model_header(FILE *f, const char *path, unsigned char *hdr,
                             mlp_shape *s, float *in_mean, float *in_std,
                             char *err, size_t errlen) {
  size_t got = fread(hdr, 1, MODEL_HEADER, f);
  if (ferror(f))
    return train_fail(err, errlen, TRAIN_EIO, "%s: read error: %s", path,
                      strerror(errno));
  if (got >= 8 && memcmp(hdr, MODEL_MAGIC, 8) != 0)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: bad magic: not a rumus model file (expected "
                      "\"RUMUSMLP\")",
                      path);
  if (got < MODEL_HEADER)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: truncated: %zu bytes, shorter than the %u-byte "
                      "header",
                      path, got, MODEL_HEADER);
  uint32_t version = train_get32(hdr + 8), nl = train_get32(hdr + 12);
  if (version != MODEL_VERSION)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: unsupported model file version %u (this program "
                      "reads version %u)",
                      path, (unsigned)version, MODEL_VERSION);
  if (nl < 1 || nl > MLP_MAX_LAYERS)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: implausible layer count %u (expected 1 to %d)",
                      path, (unsigned)nl, MLP_MAX_LAYERS);
  size_t nsizes = 4 * ((size_t)nl + 1);
  got = fread(hdr + MODEL_HEADER, 1, nsizes, f);
  if (got < nsizes)
    return ferror(f) ? train_fail(err, errlen, TRAIN_EIO,
                                  "%s: read error: %s", path, strerror(errno))
                     : train_fail(err, errlen, TRAIN_EFORMAT,
                                  "%s: truncated: the layer sizes end after "
                                  "%zu of %zu bytes",
                                  path, got, nsizes);
  train_get_floats(in_mean, hdr + 16, 1);
  train_get_floats(in_std, hdr + 20, 1);
  if (!isfinite(*in_mean) || !isfinite(*in_std) || !(*in_std > 0.0f))
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: implausible input normalisation: mean %g, std %g",
                      path, (double)*in_mean, (double)*in_std);
  memset(s, 0, sizeof *s);
  s->nlayers = (int)nl;
  size_t params = 0;
  for (uint32_t i = 0; i <= nl; i++) {
    uint32_t v = train_get32(hdr + MODEL_HEADER + 4 * i);
    if (v == 0 || v > MLP_MAX_WIDTH)
      return train_fail(err, errlen, TRAIN_EFORMAT,
                        "%s: implausible size %u of layer boundary %u "
                        "(expected 1 to %zu)",
                        path, (unsigned)v, (unsigned)i, MLP_MAX_WIDTH);
    s->sizes[i] = v;
    if (i > 0) params += s->sizes[i] * s->sizes[i - 1] + s->sizes[i];
    if (params > MLP_MAX_PARAMS)
      return train_fail(err, errlen, TRAIN_EFORMAT,
                        "%s: implausible model: more than %zu parameters",
                        path, MLP_MAX_PARAMS);
  }
  return RUMUS_OK;
}

/* The rest of the file after its head bytes (already in buf, of total):
 * read whole, nothing after it, and its CRC-32 right. */
static int read_model_body(FILE *f, const char *path, const mlp_shape *s,
                           unsigned char *buf, size_t head, size_t total,
                           char *err, size_t errlen) {
  size_t got = fread(buf + head, 1, total - head, f);
  if (ferror(f))
    return train_fail(err, errlen, TRAIN_EIO, "%s: read error: %s", path,
                      strerror(errno));
  if (got < total - head) {
    char s_str[256];
    mlp_shape_str(s, s_str, sizeof s_str);
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: truncated: %zu bytes, but a %s model file has %zu",
                      path, head + got, s_str, total);
  }
  if (fgetc(f) != EOF)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: trailing bytes after the %zu bytes of the model",
                      path, total);
  return train_check_crc(buf, total, path, err, errlen);
}

/* The layers' weights and biases of a checked file's bytes into p. */
static void unpack_layers(mlp_params *p, const mlp_shape *s,
                          const unsigned char *buf, size_t off) {
  for (int l = 0; l < s->nlayers; l++) {
    size_t nw = s->sizes[l + 1] * s->sizes[l], nb = s->sizes[l + 1];
    train_get_floats(p->w[l], buf + off, nw);
    off += 4 * nw;
    train_get_floats(p->b[l], buf + off, nb);
    off += 4 * nb;
  }
}

int mlp_params_load(mlp_params *p, const char *path, char *err,
                    size_t errlen) {
  if (!p || !path)
    return train_fail(err, errlen, RUMUS_EINVAL, "mlp_params_load: NULL argument");
  memset(p, 0, sizeof *p);
  errno = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return train_fail(err, errlen, TRAIN_EIO, "%s: cannot open: %s", path,
                    strerror(errno));
  unsigned char *buf = NULL;
  unsigned char hdr[MODEL_HEADER + 4 * (MLP_MAX_LAYERS + 1)];
  mlp_shape s;
  float in_mean, in_std;
  int st = read_model_header(f, path, hdr, &s, &in_mean, &in_std, err, errlen);
  if (st != RUMUS_OK) goto done;
  size_t total = model_bytes(&s),
         head = MODEL_HEADER + 4 * ((size_t)s.nlayers + 1);
  buf = malloc(total);
  if (!buf) {
    st = train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory for %zu bytes",
                  path, total);
    goto done;
  }
  memcpy(buf, hdr, head);
  st = read_model_body(f, path, &s, buf, head, total, err, errlen);
  if (st != RUMUS_OK) goto done;
  st = mlp_params_alloc(p, &s);
  if (st != RUMUS_OK) {
    st = train_fail(err, errlen, st, "%s: out of memory for the parameters",
                  path);
    goto done;
  }
  p->in_mean = in_mean;
  p->in_std = in_std;
  unpack_layers(p, &s, buf, head);
done:
  free(buf);
  fclose(f);
  return st;
}

/* ---- The model on the device ------------------------------------------ */

static void free_views(mlp *m) {
  if (m->views_owned) {
    rumus_tensor_free(m->x);
    rumus_tensor_free(m->y);
    for (int l = 0; l < m->shape.nlayers; l++) {
      rumus_tensor_free(m->z[l]);
      rumus_tensor_free(m->dz[l]);
      if (l > 0) rumus_tensor_free(m->h[l]);
    }
  }
  m->views_owned = 0;
  m->cur_n = 0;
  m->x = m->y = NULL;
  for (int l = 0; l < L_MAX; l++) m->z[l] = m->dz[l] = m->h[l] = NULL;
}

void mlp_free(mlp *m) {
  if (!m) return;
  free_views(m);
  rumus_tensor *const all[] = {m->x_full, m->y_full, m->loss};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    rumus_tensor_free(all[i]);
  rumus_tensor_free(m->overflow);
  for (int l = 0; l < L_MAX; l++) {
    if (m->wc[l] != m->w[l]) rumus_tensor_free(m->wc[l]);
    if (m->bc[l] != m->b[l]) rumus_tensor_free(m->bc[l]);
    rumus_tensor_free(m->w[l]);
    rumus_tensor_free(m->b[l]);
    rumus_tensor_free(m->gw[l]);
    rumus_tensor_free(m->gb[l]);
    rumus_tensor_free(m->mw[l]);
    rumus_tensor_free(m->vw[l]);
    rumus_tensor_free(m->mb[l]);
    rumus_tensor_free(m->vb[l]);
    rumus_tensor_free(m->z_full[l]);
    rumus_tensor_free(m->dz_full[l]);
    rumus_tensor_free(m->h_full[l]);
  }
  free(m->xbuf);
  free(m->ybuf);
  free(m->logits);
  free(m->idx);
  free(m);
}

static int new_tensor(mlp *m, rumus_dtype dt, int ndim, size_t d0, size_t d1,
                      rumus_tensor **out, const char *what, int layer) {
  size_t shape[2] = {d0, d1};
  RCALL(m, what, layer, rumus_tensor_create(m->ctx, dt, ndim, shape, out));
  return RUMUS_OK;
}

/* A [rows, cols] view of the first rows of full. */
static int view(mlp *m, rumus_tensor *full, size_t rows, int ndim,
                rumus_tensor **out) {
  size_t off = 0, shape[2] = {rows, ndim > 1 ? rumus_tensor_dim(full, 1) : 0};
  cl_mem mem = rumus_tensor_cl_mem(full, &off);
  RCALL(m, "rumus_tensor_wrap (batch view)", -1,
        rumus_tensor_wrap(m->ctx, rumus_tensor_dtype(full), ndim, shape, mem,
                          off, out));
  return RUMUS_OK;
}

/* Points the activation views at n rows. */
static int bind_rows(mlp *m, size_t n) {
  if (n == m->cur_n) return RUMUS_OK;
  free_views(m);
  int L = m->shape.nlayers;
  if (n == m->max_batch) {
    m->x = m->x_full;
    m->y = m->y_full;
    for (int l = 0; l < L; l++) {
      m->z[l] = m->z_full[l];
      m->dz[l] = m->dz_full[l];
      m->h[l] = l ? m->h_full[l] : m->x_full;
    }
    m->cur_n = n;
    return RUMUS_OK;
  }
  m->views_owned = 1;
  int st = view(m, m->x_full, n, 2, &m->x);
  if (st == RUMUS_OK) st = view(m, m->y_full, n, 1, &m->y);
  for (int l = 0; l < L && st == RUMUS_OK; l++) {
    st = view(m, m->z_full[l], n, 2, &m->z[l]);
    if (st == RUMUS_OK) st = view(m, m->dz_full[l], n, 2, &m->dz[l]);
    if (st == RUMUS_OK && l > 0) st = view(m, m->h_full[l], n, 2, &m->h[l]);
  }
  if (st != RUMUS_OK) {
    free_views(m);
    return st;
  }
  m->h[0] = m->x;
  m->cur_n = n;
  return RUMUS_OK;
}

/* Parameters (F32 masters and, under 16-bit precision, their copies),
 * gradients, AdamW moments and the activations of layer l. */
static int create_layer(mlp *m, int l) {
  const mlp_shape *s = &m->shape;
  size_t in = s->sizes[l], o = s->sizes[l + 1], B = m->max_batch;
  rumus_dtype T = m->prec;
  int st = new_tensor(m, RUMUS_F32, 2, o, in, &m->w[l], "rumus_tensor_create (weights)", l);
  if (st == RUMUS_OK)
    st = new_tensor(m, RUMUS_F32, 1, o, 0, &m->b[l], "rumus_tensor_create (biases)", l);
  rumus_tensor **moments[] = {&m->mw[l], &m->vw[l]};
  rumus_tensor **bmoments[] = {&m->mb[l], &m->vb[l]};
  for (int k = 0; k < 2 && st == RUMUS_OK; k++) {
    st = new_tensor(m, RUMUS_F32, 2, o, in, moments[k], "rumus_tensor_create (AdamW moments)", l);
    if (st == RUMUS_OK)
      st = new_tensor(m, RUMUS_F32, 1, o, 0, bmoments[k], "rumus_tensor_create (AdamW moments)", l);
  }
  if (st == RUMUS_OK)
    st = new_tensor(m, T, 2, o, in, &m->gw[l], "rumus_tensor_create (weight gradients)", l);
  if (st == RUMUS_OK)
    st = new_tensor(m, T, 1, o, 0, &m->gb[l], "rumus_tensor_create (bias gradients)", l);
  if (st == RUMUS_OK && T != RUMUS_F32) {
    st = new_tensor(m, T, 2, o, in, &m->wc[l], "rumus_tensor_create (weights)", l);
    if (st == RUMUS_OK)
      st = new_tensor(m, T, 1, o, 0, &m->bc[l], "rumus_tensor_create (biases)", l);
  } else if (st == RUMUS_OK) {
    m->wc[l] = m->w[l];
    m->bc[l] = m->b[l];
  }
  if (st == RUMUS_OK)
    st = new_tensor(m, T, 2, B, o, &m->z_full[l], "rumus_tensor_create (activations)", l);
  if (st == RUMUS_OK)
    st = new_tensor(m, T, 2, B, o, &m->dz_full[l], "rumus_tensor_create (gradients)", l);
  if (st == RUMUS_OK && l > 0)
    st = new_tensor(m, T, 2, B, in, &m->h_full[l], "rumus_tensor_create (activations)", l);
  return st;
}

int mlp_create(rumus_ctx *ctx, const mlp_shape *s, size_t max_batch,
               const rumus_adam_params *adam, rumus_dtype precision, mlp **out,
               char *err, size_t errlen) {
  if (!ctx || !s || !out)
    return train_fail(err, errlen, RUMUS_ENULL, "mlp_create: NULL argument");
  *out = NULL;
  if (precision != RUMUS_F32 && precision != RUMUS_F16 && precision != RUMUS_BF16)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "mlp_create: precision %s is not F32, F16 or BF16",
                      rumus_dtype_name(precision));
  if (!shape_valid(s))
    return train_fail(err, errlen, RUMUS_EINVAL, "mlp_create: invalid shape");
  if (max_batch == 0 || max_batch > ((size_t)1 << 24))
    return train_fail(err, errlen, RUMUS_EINVAL,
                    "mlp_create: batch size %zu is outside 1..%zu", max_batch,
                    (size_t)1 << 24);
  mlp *m = calloc(1, sizeof *m);
  if (!m) return train_fail(err, errlen, RUMUS_ENOMEM, "mlp_create: out of memory");
  static const rumus_adam_params defaults = MLP_ADAMW_DEFAULTS;
  m->ctx = ctx;
  m->shape = *s;
  m->max_batch = max_batch;
  m->adam = adam ? *adam : defaults;
  m->base_lr = m->adam.lr;
  m->in_mean = 0.0f;
  m->in_std = 1.0f;
  m->prec = precision;
  m->scale = precision == RUMUS_F16 ? MLP_LOSS_SCALE_INIT : 1.0f;
  m->growth_interval = MLP_LOSS_SCALE_GROWTH;
  int L = s->nlayers;
  size_t B = max_batch, in0 = s->sizes[0], outL = s->sizes[L];
  m->xbuf = malloc(B * in0 * sizeof *m->xbuf);
  m->ybuf = malloc(B * sizeof *m->ybuf);
  m->logits = malloc(B * outL * sizeof *m->logits);
  m->idx = malloc(B * sizeof *m->idx);
  int st = RUMUS_OK;
  if (!m->xbuf || !m->ybuf || !m->logits || !m->idx) {
    st = RUMUS_ENOMEM;
    snprintf(m->err, sizeof m->err, "mlp_create: out of host memory");
    goto done;
  }
  for (int l = 0; l < L && st == RUMUS_OK; l++) st = create_layer(m, l);
  if (st == RUMUS_OK)
    st = new_tensor(m, precision, 2, B, in0, &m->x_full, "rumus_tensor_create (inputs)", -1);
  if (st == RUMUS_OK && precision == RUMUS_F16)
    st = new_tensor(m, RUMUS_F32, 0, 1, 0, &m->overflow, "rumus_tensor_create (overflow flag)", -1);
  if (st == RUMUS_OK)
    st = new_tensor(m, RUMUS_I32, 1, B, 0, &m->y_full, "rumus_tensor_create (labels)", -1);
  if (st == RUMUS_OK)
    st = new_tensor(m, RUMUS_F32, 0, 1, 0, &m->loss, "rumus_tensor_create (loss)", -1);
  if (st == RUMUS_OK) st = bind_rows(m, B);
done:
  if (st != RUMUS_OK) {
    train_fail(err, errlen, st, "%s", m->err);
    mlp_free(m);
    return st;
  }
  *out = m;
  return RUMUS_OK;
}

int mlp_set_params(mlp *m, const mlp_params *p) {
  if (!shape_equal(&m->shape, &p->shape)) {
    char a[256], b[256];
    mlp_shape_str(&m->shape, a, sizeof a);
    mlp_shape_str(&p->shape, b, sizeof b);
    snprintf(m->err, sizeof m->err,
             "mlp_set_params: the parameters are for a %s model, the model "
             "is %s", b, a);
    return RUMUS_ESHAPE;
  }
  if (!isfinite(p->in_mean) || !isfinite(p->in_std) || !(p->in_std > 0.0f)) {
    snprintf(m->err, sizeof m->err,
             "mlp_set_params: bad input normalisation: mean %g, std %g",
             (double)p->in_mean, (double)p->in_std);
    return RUMUS_EINVAL;
  }
  for (int l = 0; l < m->shape.nlayers; l++) {
    RCALL(m, "upload weights", l,
          rumus_tensor_upload(m->w[l], p->w[l], rumus_tensor_nbytes(m->w[l])));
    RCALL(m, "upload biases", l,
          rumus_tensor_upload(m->b[l], p->b[l], rumus_tensor_nbytes(m->b[l])));
    rumus_tensor *zero[] = {m->mw[l], m->vw[l], m->mb[l], m->vb[l]};
    for (int k = 0; k < 4; k++)
      RCALL(m, "rumus_tensor_fill (AdamW moments)", l, rumus_tensor_fill(zero[k], 0.0f));
    if (m->wc[l] != m->w[l]) {
      RCALL(m, "rumus_cast (weights to the compute copy)", l,
            rumus_cast(m->ctx, m->w[l], m->wc[l]));
      RCALL(m, "rumus_cast (biases to the compute copy)", l,
            rumus_cast(m->ctx, m->b[l], m->bc[l]));
    }
  }
  RCALL(m, "rumus_ctx_sync", -1, rumus_ctx_sync(m->ctx));
  m->step = 0;
  m->updates = 0;
  m->skipped = 0;
  m->good_steps = 0;
  m->scale = m->prec == RUMUS_F16 ? MLP_LOSS_SCALE_INIT : 1.0f;
  m->in_mean = p->in_mean;
  m->in_std = p->in_std;
  return RUMUS_OK;
}

int mlp_get_params(mlp *m, mlp_params *p) {
  if (!p->w[0]) {
    int st = mlp_params_alloc(p, &m->shape);
    if (st != RUMUS_OK) {
      snprintf(m->err, sizeof m->err, "mlp_get_params: out of host memory");
      return st;
    }
  } else if (!shape_equal(&m->shape, &p->shape)) {
    snprintf(m->err, sizeof m->err,
             "mlp_get_params: the destination has another shape");
    return RUMUS_ESHAPE;
  }
  p->in_mean = m->in_mean;
  p->in_std = m->in_std;
  for (int l = 0; l < m->shape.nlayers; l++) {
    RCALL(m, "download weights", l,
          rumus_tensor_download(m->w[l], p->w[l], rumus_tensor_nbytes(m->w[l])));
    RCALL(m, "download biases", l,
          rumus_tensor_download(m->b[l], p->b[l], rumus_tensor_nbytes(m->b[l])));
  }
  return RUMUS_OK;
}

static int check_rows(mlp *m, const char *op, size_t n) {
  if (n == 0 || n > m->max_batch) {
    snprintf(m->err, sizeof m->err, "%s: %zu rows, expected 1..%zu", op, n,
             m->max_batch);
    return RUMUS_EINVAL;
  }
  return RUMUS_OK;
}

/* Uploads n rows of x (and y if not NULL) and enqueues the forward pass. */
static int forward(mlp *m, const float *x, const int32_t *y, size_t n) {
  int st = bind_rows(m, n);
  if (st != RUMUS_OK) return st;
  RCALL(m, "upload inputs", -1,
        rumus_tensor_upload_f32(m->x, x, rumus_tensor_numel(m->x)));
  if (y)
    RCALL(m, "upload labels", -1,
          rumus_tensor_upload(m->y, y, rumus_tensor_nbytes(m->y)));
  int L = m->shape.nlayers;
  for (int l = 0; l < L; l++) {
    RCALL(m, "rumus_gemm (forward z = h W^T)", l,
          rumus_gemm(m->ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0f, m->h[l], m->wc[l],
                     0.0f, m->z[l]));
    RCALL(m, "rumus_bias_add", l, rumus_bias_add(m->ctx, m->z[l], m->bc[l]));
    if (l + 1 < L)
      RCALL(m, "rumus_activation_fwd (ReLU)", l,
            rumus_activation_fwd(m->ctx, RUMUS_ACT_RELU, 0.0f, m->z[l],
                                 m->h[l + 1]));
  }
  return RUMUS_OK;
}

/* Enqueues the loss, its gradient times the loss scale, and the backward
 * pass into gw, gb. */
static int backward(mlp *m) {
  int L = m->shape.nlayers;
  rumus_xent_params xp = RUMUS_XENT_DEFAULTS;
  xp.grad_scale = m->scale;
  RCALL(m, "rumus_cross_entropy", -1,
        rumus_cross_entropy(m->ctx, m->z[L - 1], m->y, m->loss, m->dz[L - 1],
                            &xp));
  for (int l = L - 1; l >= 0; l--) {
    RCALL(m, "rumus_gemm (backward dW = dz^T h)", l,
          rumus_gemm(m->ctx, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0f, m->dz[l], m->h[l],
                     0.0f, m->gw[l]));
    RCALL(m, "rumus_bias_grad", l, rumus_bias_grad(m->ctx, m->dz[l], m->gb[l]));
    if (l > 0) {
      RCALL(m, "rumus_gemm (backward dh = dz W)", l,
            rumus_gemm(m->ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, m->dz[l],
                       m->wc[l], 0.0f, m->dz[l - 1]));
      RCALL(m, "rumus_activation_bwd (ReLU)", l - 1,
            rumus_activation_bwd(m->ctx, RUMUS_ACT_RELU, 0.0f, m->z[l - 1],
                                 m->dz[l - 1], m->dz[l - 1]));
    }
  }
  return RUMUS_OK;
}

/* Enqueues AdamW on every parameter, reading the gradients divided by the
 * loss scale and writing the compute copies.  Under F16 the sum of squares
 * of every gradient goes first into the overflow flag, and the steps skip
 * themselves on the device when it is not finite. */
static int update(mlp *m) {
  int L = m->shape.nlayers;
  rumus_grad_scaling scaling = {1.0f / m->scale, m->overflow};
  if (m->overflow) {
    RCALL(m, "rumus_tensor_fill (overflow flag)", -1,
          rumus_tensor_fill(m->overflow, 0.0f));
    for (int l = 0; l < L; l++) {
      RCALL(m, "rumus_sum_squares (weight gradients)", l,
            rumus_sum_squares(m->ctx, m->gw[l], m->overflow));
      RCALL(m, "rumus_sum_squares (bias gradients)", l,
            rumus_sum_squares(m->ctx, m->gb[l], m->overflow));
    }
  }
  if (m->decay_steps > 0) {
    double t = (double)(m->step - 1) / (double)m->decay_steps;
    if (t > 1.0) t = 1.0;
    m->adam.lr = (float)(m->base_lr * 0.5 * (1.0 + cos(3.14159265358979323846 * t)));
  }
  long t = m->updates + 1;
  for (int l = 0; l < L; l++) {
    rumus_tensor *wc = m->wc[l] != m->w[l] ? m->wc[l] : NULL;
    rumus_tensor *bc = m->bc[l] != m->b[l] ? m->bc[l] : NULL;
    RCALL(m, "rumus_adam_step_ex (weights)", l,
          rumus_adam_step_ex(m->ctx, &m->adam, t, m->w[l], m->gw[l], m->mw[l],
                             m->vw[l], wc, &scaling));
    RCALL(m, "rumus_adam_step_ex (biases)", l,
          rumus_adam_step_ex(m->ctx, &m->adam, t, m->b[l], m->gb[l], m->mb[l],
                             m->vb[l], bc, &scaling));
  }
  return RUMUS_OK;
}

/* After a step: under F16, reads the overflow flag (one float: no
 * gradient leaves the device) and moves the loss scale as GradScaler
 * does; otherwise the update always counts. */
static int settle_scale(mlp *m) {
  if (!m->overflow) {
    m->updates++;
    return RUMUS_OK;
  }
  float flag = 0.0f;
  RCALL(m, "download overflow flag", -1,
        rumus_tensor_download(m->overflow, &flag, sizeof flag));
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

int mlp_train_step(mlp *m, const float *x, const int32_t *y, size_t n,
                   double *loss, size_t *correct) {
  int st = check_rows(m, "mlp_train_step", n);
  if (st == RUMUS_OK) st = forward(m, x, y, n);
  if (st == RUMUS_OK) st = backward(m);
  if (st == RUMUS_OK && m->grad_hook)
    st = m->grad_hook(m->grad_hook_user, m->err, sizeof m->err);
  if (st != RUMUS_OK) return st;
  m->step++;
  st = update(m);
  if (st != RUMUS_OK) return st;
  /* The logits are not touched by the backward pass or the update. */
  int L = m->shape.nlayers;
  if (correct) {
    RCALL(m, "download logits", -1,
          rumus_tensor_download_f32(m->z[L - 1], m->logits,
                                    rumus_tensor_numel(m->z[L - 1])));
    *correct = train_count_correct(m->logits, y, n, m->shape.sizes[L]);
  }
  if (loss) {
    float l32 = 0.0f;
    RCALL(m, "download loss", -1, rumus_tensor_download(m->loss, &l32, sizeof l32));
    *loss = l32;
  }
  st = settle_scale(m);
  if (st != RUMUS_OK) return st;
  RCALL(m, "rumus_ctx_sync (after a training step)", -1, rumus_ctx_sync(m->ctx));
  return RUMUS_OK;
}

void mlp_set_grad_hook(mlp *m, train_grad_hook hook, void *user) {
  m->grad_hook = hook;
  m->grad_hook_user = user;
}

int mlp_grad_tensors(mlp *m, rumus_tensor **out, int max) {
  int L = m->shape.nlayers;
  if (max < 2 * L) return -1;
  for (int l = 0; l < L; l++) {
    out[2 * l] = m->gw[l];
    out[2 * l + 1] = m->gb[l];
  }
  return 2 * L;
}

rumus_dtype mlp_precision(const mlp *m) { return m->prec; }
float mlp_loss_scale(const mlp *m) { return m->scale; }
long mlp_skipped_steps(const mlp *m) { return m->skipped; }

void mlp_set_loss_scale(mlp *m, float scale, long growth_interval) {
  if (!m->overflow) return;
  if (scale >= MLP_LOSS_SCALE_MIN && scale <= MLP_LOSS_SCALE_MAX) m->scale = scale;
  if (growth_interval >= 1) m->growth_interval = growth_interval;
  m->good_steps = 0;
}

int mlp_logits(mlp *m, const float *x, size_t n, float *logits) {
  int st = check_rows(m, "mlp_logits", n);
  if (st != RUMUS_OK) return st;
  st = forward(m, x, NULL, n);
  if (st != RUMUS_OK) return st;
  int L = m->shape.nlayers;
  RCALL(m, "download logits", -1,
        rumus_tensor_download_f32(m->z[L - 1], logits, rumus_tensor_numel(m->z[L - 1])));
  RCALL(m, "rumus_ctx_sync (after a forward pass)", -1, rumus_ctx_sync(m->ctx));
  return RUMUS_OK;
}

static int check_set(mlp *m, const char *op, const mnist_set *set) {
  int L = m->shape.nlayers;
  if (!set || !set->images || !set->labels || set->count == 0 ||
      m->shape.sizes[0] != MNIST_PIXELS || m->shape.sizes[L] != MNIST_CLASSES) {
    snprintf(m->err, sizeof m->err,
             "%s: needs a non-empty data set and a model with %d inputs and "
             "%d outputs",
             op, MNIST_PIXELS, MNIST_CLASSES);
    return RUMUS_EINVAL;
  }
  if (set->count > UINT32_MAX) {
    snprintf(m->err, sizeof m->err, "%s: too many images", op);
    return RUMUS_EINVAL;
  }
  return RUMUS_OK;
}

/* The shared loops' view of the model's host buffers. */
static train_batcher batcher(const mlp *m) {
  train_batcher b = {m->max_batch, m->in_mean, m->in_std, m->xbuf,
                     m->logits, m->ybuf, m->idx};
  return b;
}

static int step_cb(void *m, const float *x, const int32_t *y, size_t n,
                   double *loss, size_t *correct) {
  return mlp_train_step(m, x, y, n, loss, correct);
}

static int logits_cb(void *m, const float *x, size_t n, float *logits) {
  return mlp_logits(m, x, n, logits);
}

int mlp_evaluate(mlp *m, const mnist_set *set, size_t count, size_t *correct) {
  int st = check_set(m, "mlp_evaluate", set);
  if (st != RUMUS_OK) return st;
  train_batcher b = batcher(m);
  return train_evaluate(&b, m, logits_cb, set, count, correct);
}

int mlp_train_epoch(mlp *m, const mnist_set *set, size_t count, mlp_rng *rng,
                    mlp_progress_fn fn, void *user, mlp_progress *out) {
  int st = check_set(m, "mlp_train_epoch", set);
  if (st != RUMUS_OK) return st;
  train_batcher b = batcher(m);
  st = train_epoch(&b, m, step_cb, set, count, rng, fn, user, out);
  if (st == RUMUS_ENOMEM)
    snprintf(m->err, sizeof m->err, "mlp_train_epoch: out of host memory");
  return st;
}

void mlp_set_lr_decay(mlp *m, long steps) {
  m->decay_steps = steps > 0 ? steps : 0;
  if (m->decay_steps == 0) m->adam.lr = m->base_lr;
}
