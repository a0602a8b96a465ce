/* gpt.c - the GPT on the device (see gpt.h); its configuration, host
 * parameters and initialisation are in gpt_file.c. */
#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnist.h" /* train_fail */

/* Offsets of a block's tensors after 2 + 12 l (gpt.h; block_names in gpt_file.c). */
enum {
  B_LN1_W, B_LN1_B, B_ATTN_W, B_ATTN_B, B_APROJ_W, B_APROJ_B,
  B_LN2_W, B_LN2_B, B_FC_W, B_FC_B, B_MPROJ_W, B_MPROJ_B
};

/* One block's saved activations, each over the N = B T positions. */
typedef struct {
  rumus_tensor *h1, *mean1, *rstd1;  /* ln_1 */
  rumus_tensor *qkv, *qkv5;          /* [N, 3C] and its [B, T, 3, H, D] view */
  rumus_tensor *qkvp, *q, *k, *v;    /* [3, B, H, T, D] and its three parts */
  rumus_tensor *o, *lse;             /* attention output [B, H, T, D], lse */
  rumus_tensor *y, *y4;              /* heads merged: [N, C], [B, T, H, D] */
  rumus_tensor *xmid;                /* x after the attention's residual */
  rumus_tensor *h2, *mean2, *rstd2;  /* ln_2 */
  rumus_tensor *f, *g;               /* c_fc output, GELU of it [N, 4C] */
} layer_acts;

/* Activations of batches of `batch` sequences, and (train) the backward's
 * scratch.  Every tensor, views included, is in `all` for freeing. */
typedef struct {
  size_t batch, n;
  rumus_tensor *ids, *tgt;      /* ids [B, T], targets [N] */
  rumus_tensor **x, *x0_3;      /* residual stream x[0..L] [N, C]; x[0] 3-D */
  layer_acts *la;
  rumus_tensor *hf, *meanf, *rstdf, *logits;
  rumus_tensor *dlogits, *dres, *dres3, *dtmp, *dff;
  rumus_tensor *dqkv, *dqkv5, *dqkvp, *dq, *dk, *dv, *dop, *dy, *dy4, *demb;
  rumus_tensor **all;
  size_t nall, cap;
} acts;

struct gpt {
  rumus_ctx *ctx;
  gpt_config cfg;
  rumus_dtype prec; /* the activations' and compute copies' type */
  size_t np;
  /* F32 masters, compute copies (the masters themselves under F32 and
   * for the layer norms, whose gamma and beta stay F32), F32 gradients,
   * AdamW moments */
  rumus_tensor **p, **pc, **g, **mo, **vo;
  /* The tensors above are views into one buffer per kind and AdamW group
   * (matrices with weight decay, the rest without), so that clipping and
   * AdamW take two launches each, not one per tensor: flat[group][kind]. */
  rumus_tensor *flat[2][5];
  rumus_tensor *loss, *gnorm, *wpe3;
  rumus_adam_params adam;
  long step;
  float scale; /* dynamic loss scale (F16), else 1 */
  long good_steps, skipped;
  acts train, gen;
  float *host_logits; /* [T, V] of gen */
  char err[2048];
};

#define RCALL(m, what, expr)                                                  \
  do {                                                                        \
    int rc_st_ = (expr);                                                      \
    if (rc_st_ != RUMUS_OK)                                                   \
      return train_rumus_fail((m)->err, sizeof (m)->err, (m)->ctx, rc_st_,    \
                              (what));                                        \
  } while (0)

#define SHAPE(...) ((const size_t[]){__VA_ARGS__})

const char *gpt_errmsg(const gpt *m) { return m ? m->err : "NULL model"; }
size_t gpt_batch(const gpt *m) { return m->train.batch; }
long gpt_steps(const gpt *m) { return m->step; }

#define BLK(l, j) (2 + GPT_BLOCK_TENSORS * (l) + (size_t)(j)) /* tensor j of block l */
static size_t k_lnf(const gpt *m) { return 2 + GPT_BLOCK_TENSORS * m->cfg.layers; }
static size_t k_head(const gpt *m) { return m->cfg.tied ? 0 : k_lnf(m) + 2; }

/* ---- Tensors ---------------------------------------------------------- */

static int keep(gpt *m, acts *a, rumus_tensor *t) {
  if (a->nall == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    rumus_tensor **all = realloc(a->all, cap * sizeof *all);
    if (!all) {
      rumus_tensor_free(t);
      return train_fail(m->err, sizeof m->err, RUMUS_ENOMEM, "out of host memory");
    }
    a->all = all;
    a->cap = cap;
  }
  a->all[a->nall++] = t;
  return RUMUS_OK;
}

static int mk(gpt *m, acts *a, rumus_dtype dt, int nd, const size_t *shape,
              rumus_tensor **out) {
  RCALL(m, "rumus_tensor_create (activations)",
        rumus_tensor_create(m->ctx, dt, nd, shape, out));
  return keep(m, a, *out);
}

/* A tensor of shape `shape` on base's buffer, elem_off elements in. */
static int view(gpt *m, acts *a, const rumus_tensor *base, size_t elem_off,
                int nd, const size_t *shape, rumus_tensor **out) {
  size_t off = 0;
  rumus_dtype dt = rumus_tensor_dtype(base);
  cl_mem mem = rumus_tensor_cl_mem(base, &off);
  RCALL(m, "rumus_tensor_wrap (view)",
        rumus_tensor_wrap(m->ctx, dt, nd, shape, mem,
                          off + elem_off * rumus_dtype_size(dt), out));
  return keep(m, a, *out);
}

static void acts_free(acts *a) {
  for (size_t i = a->nall; i-- > 0;) rumus_tensor_free(a->all[i]);
  free(a->all);
  free(a->x);
  free(a->la);
  memset(a, 0, sizeof *a);
}

/* Block l's activations at a->batch sequences. */
static int layer_create(gpt *m, acts *a, layer_acts *t) {
  const gpt_config *c = &m->cfg;
  size_t B = a->batch, T = c->context, C = c->width, H = c->heads, D = C / H;
  size_t N = a->n, part = N * C;
  rumus_dtype F = m->prec, S = RUMUS_F32; /* activations; statistics */
  int st = RUMUS_OK;
  if (!st) st = mk(m, a, F, 2, SHAPE(N, C), &t->h1);
  if (!st) st = mk(m, a, S, 1, SHAPE(N), &t->mean1);
  if (!st) st = mk(m, a, S, 1, SHAPE(N), &t->rstd1);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, 3 * C), &t->qkv);
  if (!st) st = view(m, a, t->qkv, 0, 5, SHAPE(B, T, 3, H, D), &t->qkv5);
  if (!st) st = mk(m, a, F, 5, SHAPE(3, B, H, T, D), &t->qkvp);
  if (!st) st = view(m, a, t->qkvp, 0, 4, SHAPE(B, H, T, D), &t->q);
  if (!st) st = view(m, a, t->qkvp, part, 4, SHAPE(B, H, T, D), &t->k);
  if (!st) st = view(m, a, t->qkvp, 2 * part, 4, SHAPE(B, H, T, D), &t->v);
  if (!st) st = mk(m, a, F, 4, SHAPE(B, H, T, D), &t->o);
  if (!st) st = mk(m, a, S, 3, SHAPE(B, H, T), &t->lse);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, C), &t->y);
  if (!st) st = view(m, a, t->y, 0, 4, SHAPE(B, T, H, D), &t->y4);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, C), &t->xmid);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, C), &t->h2);
  if (!st) st = mk(m, a, S, 1, SHAPE(N), &t->mean2);
  if (!st) st = mk(m, a, S, 1, SHAPE(N), &t->rstd2);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, 4 * C), &t->f);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, 4 * C), &t->g);
  return st;
}

/* The backward's scratch. */
static int grad_scratch_create(gpt *m, acts *a) {
  const gpt_config *c = &m->cfg;
  size_t B = a->batch, T = c->context, C = c->width, H = c->heads, D = C / H;
  size_t N = a->n, part = N * C;
  rumus_dtype F = m->prec;
  int st = RUMUS_OK;
  if (!st) st = mk(m, a, F, 2, SHAPE(N, c->vocab), &a->dlogits);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, C), &a->dres);
  if (!st) st = view(m, a, a->dres, 0, 3, SHAPE(B, T, C), &a->dres3);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, C), &a->dtmp);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, 4 * C), &a->dff);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, 3 * C), &a->dqkv);
  if (!st) st = view(m, a, a->dqkv, 0, 5, SHAPE(B, T, 3, H, D), &a->dqkv5);
  if (!st) st = mk(m, a, F, 5, SHAPE(3, B, H, T, D), &a->dqkvp);
  if (!st) st = view(m, a, a->dqkvp, 0, 4, SHAPE(B, H, T, D), &a->dq);
  if (!st) st = view(m, a, a->dqkvp, part, 4, SHAPE(B, H, T, D), &a->dk);
  if (!st) st = view(m, a, a->dqkvp, 2 * part, 4, SHAPE(B, H, T, D), &a->dv);
  if (!st) st = mk(m, a, F, 4, SHAPE(B, H, T, D), &a->dop);
  if (!st) st = mk(m, a, F, 2, SHAPE(N, C), &a->dy);
  if (!st) st = view(m, a, a->dy, 0, 4, SHAPE(B, T, H, D), &a->dy4);
  /* the tied output layer's weight gradient, added to wte's (F32) */
  if (!st && c->tied) st = mk(m, a, RUMUS_F32, 2, SHAPE(c->vocab, C), &a->demb);
  return st;
}

static int acts_create(gpt *m, acts *a, size_t batch, int train) {
  const gpt_config *c = &m->cfg;
  size_t T = c->context, C = c->width, L = c->layers;
  a->batch = batch;
  a->n = batch * T;
  a->x = calloc(L + 1, sizeof *a->x);
  a->la = calloc(L, sizeof *a->la);
  if (!a->x || !a->la)
    return train_fail(m->err, sizeof m->err, RUMUS_ENOMEM, "out of host memory");
  int st = mk(m, a, RUMUS_I32, 2, SHAPE(batch, T), &a->ids);
  if (!st) st = mk(m, a, RUMUS_I32, 1, SHAPE(a->n), &a->tgt);
  rumus_dtype F = m->prec;
  for (size_t l = 0; !st && l <= L; l++) st = mk(m, a, F, 2, SHAPE(a->n, C), &a->x[l]);
  if (!st) st = view(m, a, a->x[0], 0, 3, SHAPE(batch, T, C), &a->x0_3);
  for (size_t l = 0; !st && l < L; l++) st = layer_create(m, a, &a->la[l]);
  if (!st) st = mk(m, a, F, 2, SHAPE(a->n, C), &a->hf);
  if (!st) st = mk(m, a, RUMUS_F32, 1, SHAPE(a->n), &a->meanf);
  if (!st) st = mk(m, a, RUMUS_F32, 1, SHAPE(a->n), &a->rstdf);
  if (!st) st = mk(m, a, F, 2, SHAPE(a->n, c->vocab), &a->logits);
  if (!st && train) st = grad_scratch_create(m, a);
  return st;
}

/* Kinds of the flat buffers: masters, gradients, moments, compute copies. */
enum { FLAT_P, FLAT_G, FLAT_MO, FLAT_VO, FLAT_PC, FLAT_KINDS };
/* Elements a view starts on: 64-byte (F32) and 32-byte (16-bit) aligned
 * views take the kernels' aligned paths. */
#define FLAT_ALIGN 16

/* AdamW's group of tensor k: 0 with weight decay (the matrices), 1 without. */
static int decay_group(int ndim) { return ndim == 2 ? 0 : 1; }

/* The flat buffers of one group, of `len` elements, zero-filled (the gaps
 * between views stay 0: no gradient, no update). */
static int flat_create(gpt *m, int grp, size_t len) {
  for (int kind = 0; kind < FLAT_KINDS; kind++) {
    if (kind == FLAT_PC && m->prec == RUMUS_F32) continue;
    rumus_dtype dt = kind == FLAT_PC ? m->prec : RUMUS_F32;
    rumus_tensor **t = &m->flat[grp][kind];
    RCALL(m, "rumus_tensor_create (parameters)",
          rumus_tensor_create(m->ctx, dt, 1, &len, t));
    RCALL(m, "rumus_tensor_fill (parameters)", rumus_tensor_fill(*t, 0.0f));
  }
  return RUMUS_OK;
}

/* *out = a view of `shape` at element `at` of the flat tensor f. */
static int flat_view(gpt *m, rumus_tensor *f, size_t at, int nd, const size_t *shape,
                     rumus_tensor **out) {
  size_t base;
  cl_mem mem = rumus_tensor_cl_mem(f, &base);
  const rumus_dtype dt = rumus_tensor_dtype(f);
  RCALL(m, "rumus_tensor_wrap (parameters)",
        rumus_tensor_wrap(m->ctx, dt, nd, shape, mem, base + at * rumus_dtype_size(dt), out));
  return RUMUS_OK;
}

/* Tensor k's views, at element `at` of its group's buffers. */
static int param_views(gpt *m, size_t k, size_t at) {
  char name[96];
  size_t shape[2];
  int nd = gpt_tensor_info(&m->cfg, k, name, sizeof name, shape), grp = decay_group(nd);
  rumus_tensor **slot[4] = {&m->p[k], &m->g[k], &m->mo[k], &m->vo[k]};
  for (int kind = 0; kind < 4; kind++) {
    int st = flat_view(m, m->flat[grp][kind], at, nd, shape, slot[kind]);
    if (st != RUMUS_OK) return st;
  }
  m->pc[k] = m->p[k];
  if (m->prec != RUMUS_F32 && !strstr(name, "ln_"))
    return flat_view(m, m->flat[grp][FLAT_PC], at, nd, shape, &m->pc[k]);
  return RUMUS_OK;
}

static int params_create(gpt *m) {
  static const size_t one = 1;
  m->np = gpt_ntensors(&m->cfg);
  m->p = calloc(m->np, sizeof *m->p);
  m->pc = calloc(m->np, sizeof *m->pc);
  m->g = calloc(m->np, sizeof *m->g);
  m->mo = calloc(m->np, sizeof *m->mo);
  m->vo = calloc(m->np, sizeof *m->vo);
  size_t *at = calloc(m->np, sizeof *at);
  if (!m->p || !m->pc || !m->g || !m->mo || !m->vo || !at) {
    free(at);
    return train_fail(m->err, sizeof m->err, RUMUS_ENOMEM, "out of host memory");
  }
  size_t len[2] = {0, 0};
  for (size_t k = 0; k < m->np; k++) {
    char name[96];
    size_t shape[2];
    int nd = gpt_tensor_info(&m->cfg, k, name, sizeof name, shape), grp = decay_group(nd);
    at[k] = len[grp];
    len[grp] += (shape[0] * (nd == 2 ? shape[1] : 1) + FLAT_ALIGN - 1) / FLAT_ALIGN * FLAT_ALIGN;
  }
  int st = RUMUS_OK;
  for (int grp = 0; grp < 2 && st == RUMUS_OK; grp++) st = flat_create(m, grp, len[grp]);
  for (size_t k = 0; k < m->np && st == RUMUS_OK; k++) st = param_views(m, k, at[k]);
  free(at);
  if (st != RUMUS_OK) return st;
  size_t T = m->cfg.context, C = m->cfg.width, off;
  cl_mem mem = rumus_tensor_cl_mem(m->pc[1], &off);
  RCALL(m, "rumus_tensor_wrap (wpe)",
        rumus_tensor_wrap(m->ctx, m->prec, 3, SHAPE(1, T, C), mem, off, &m->wpe3));
  RCALL(m, "rumus_tensor_create (loss)",
        rumus_tensor_create(m->ctx, RUMUS_F32, 0, &one, &m->loss));
  RCALL(m, "rumus_tensor_create (gradient norm)",
        rumus_tensor_create(m->ctx, RUMUS_F32, 0, &one, &m->gnorm));
  return RUMUS_OK;
}

void gpt_free(gpt *m) {
  if (!m) return;
  acts_free(&m->train);
  acts_free(&m->gen);
  for (size_t k = 0; k < m->np; k++) {
    if (m->pc && m->p && m->pc[k] != m->p[k]) rumus_tensor_free(m->pc[k]);
    if (m->p) rumus_tensor_free(m->p[k]);
    if (m->g) rumus_tensor_free(m->g[k]);
    if (m->mo) rumus_tensor_free(m->mo[k]);
    if (m->vo) rumus_tensor_free(m->vo[k]);
  }
  for (int grp = 0; grp < 2; grp++)
    for (int kind = 0; kind < FLAT_KINDS; kind++) rumus_tensor_free(m->flat[grp][kind]);
  free(m->p);
  free(m->pc);
  free(m->g);
  free(m->mo);
  free(m->vo);
  rumus_tensor_free(m->wpe3);
  rumus_tensor_free(m->loss);
  rumus_tensor_free(m->gnorm);
  free(m->host_logits);
  free(m);
}

int gpt_create(rumus_ctx *ctx, const gpt_config *c, size_t batch,
               const rumus_adam_params *adam, rumus_dtype precision, gpt **out,
               char *err, size_t errlen) {
  if (!ctx || !c || !adam || !out)
    return train_fail(err, errlen, RUMUS_ENULL, "gpt_create: NULL argument");
  *out = NULL;
  int st = gpt_config_check(c, err, errlen);
  if (st != RUMUS_OK) return st;
  if (precision != RUMUS_F32 && precision != RUMUS_F16 && precision != RUMUS_BF16)
    return train_fail(err, errlen, RUMUS_EINVAL, "gpt_create: precision %s is not F32, "
                      "F16 or BF16", rumus_dtype_name(precision));
  if (batch == 0 || batch > 65536)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "gpt_create: batch size %zu is outside 1..65536", batch);
  gpt *m = calloc(1, sizeof *m);
  if (!m) return train_fail(err, errlen, RUMUS_ENOMEM, "gpt_create: out of memory");
  m->ctx = ctx;
  m->cfg = *c;
  m->adam = *adam;
  m->prec = precision;
  m->scale = precision == RUMUS_F16 ? GPT_LOSS_SCALE_INIT : 1.0f;
  st = params_create(m);
  if (st == RUMUS_OK) st = acts_create(m, &m->train, batch, 1);
  if (st != RUMUS_OK) {
    train_fail(err, errlen, st, "%s", m->err);
    gpt_free(m);
    return st;
  }
  *out = m;
  return RUMUS_OK;
}

/* ---- Parameters ------------------------------------------------------- */

int gpt_set_params(gpt *m, const gpt_params *p) {
  const gpt_config *a = &m->cfg, *b = &p->cfg;
  if (a->vocab != b->vocab || a->layers != b->layers || a->heads != b->heads ||
      a->width != b->width || a->context != b->context || a->tied != b->tied)
    return train_fail(m->err, sizeof m->err, RUMUS_ESHAPE,
                      "gpt_set_params: the parameters are of another configuration");
  for (size_t k = 0; k < m->np; k++) {
    RCALL(m, "upload parameters",
          rumus_tensor_upload(m->p[k], p->t[k], rumus_tensor_nbytes(m->p[k])));
    RCALL(m, "rumus_tensor_fill (AdamW moments)", rumus_tensor_fill(m->mo[k], 0.0f));
    RCALL(m, "rumus_tensor_fill (AdamW moments)", rumus_tensor_fill(m->vo[k], 0.0f));
    if (m->pc[k] != m->p[k])
      RCALL(m, "rumus_cast (compute copy)", rumus_cast(m->ctx, m->p[k], m->pc[k]));
  }
  RCALL(m, "rumus_ctx_sync", rumus_ctx_sync(m->ctx));
  m->step = m->good_steps = m->skipped = 0;
  m->scale = m->prec == RUMUS_F16 ? GPT_LOSS_SCALE_INIT : 1.0f;
  return RUMUS_OK;
}

static int download_all(gpt *m, rumus_tensor **src, gpt_params *p, const char *op) {
  if (!p->t) {
    int st = gpt_params_alloc(p, &m->cfg);
    if (st != RUMUS_OK)
      return train_fail(m->err, sizeof m->err, st, "%s: out of host memory", op);
  }
  for (size_t k = 0; k < m->np; k++)
    RCALL(m, op, rumus_tensor_download(src[k], p->t[k], rumus_tensor_nbytes(src[k])));
  return RUMUS_OK;
}

int gpt_get_params(gpt *m, gpt_params *p) {
  return download_all(m, m->p, p, "download parameters");
}

int gpt_get_grads(gpt *m, gpt_params *g) {
  return download_all(m, m->g, g, "download gradients");
}

/* ---- Forward ---------------------------------------------------------- */

static const rumus_attention_params causal = {0.0f, 1};

/* out = in W^T + b for the linear layer whose weight is tensor w. */
static int linear(gpt *m, size_t w, rumus_tensor *in, rumus_tensor *out) {
  RCALL(m, "rumus_gemm_bias (forward)",
        rumus_gemm_bias(m->ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0f, in, m->pc[w], 0.0f,
                        m->pc[w + 1], out));
  return RUMUS_OK;
}

static int layernorm(gpt *m, size_t w, rumus_tensor *x, rumus_tensor *y,
                     rumus_tensor *mean, rumus_tensor *rstd) {
  RCALL(m, "rumus_layernorm_fwd",
        rumus_layernorm_fwd(m->ctx, NULL, x, m->p[w], m->p[w + 1], y, mean, rstd));
  return RUMUS_OK;
}

/* Block l: a->x[l] -> a->x[l + 1]. */
static int block_fwd(gpt *m, acts *a, size_t l) {
  static const int split[5] = {2, 0, 3, 1, 4}; /* [B,T,3,H,D] -> [3,B,H,T,D] */
  static const int merge[4] = {0, 2, 1, 3};    /* [B,H,T,D] <-> [B,T,H,D] */
  layer_acts *t = &a->la[l];
  int st = layernorm(m, BLK(l, B_LN1_W), a->x[l], t->h1, t->mean1, t->rstd1);
  if (!st) st = linear(m, BLK(l, B_ATTN_W), t->h1, t->qkv);
  if (st) return st;
  RCALL(m, "rumus_permute (head split)", rumus_permute(m->ctx, t->qkv5, split, t->qkvp));
  RCALL(m, "rumus_attention_fwd",
        rumus_attention_fwd(m->ctx, &causal, t->q, t->k, t->v, NULL, t->o, t->lse));
  RCALL(m, "rumus_permute (head merge)", rumus_permute(m->ctx, t->o, merge, t->y4));
  st = linear(m, BLK(l, B_APROJ_W), t->y, t->xmid);
  if (st) return st;
  RCALL(m, "rumus_add (residual)", rumus_add(m->ctx, t->xmid, a->x[l], t->xmid));
  st = layernorm(m, BLK(l, B_LN2_W), t->xmid, t->h2, t->mean2, t->rstd2);
  if (!st) st = linear(m, BLK(l, B_FC_W), t->h2, t->f);
  if (st) return st;
  RCALL(m, "rumus_activation_fwd (GELU)",
        rumus_activation_fwd(m->ctx, RUMUS_ACT_GELU_ERF, 0.0f, t->f, t->g));
  st = linear(m, BLK(l, B_MPROJ_W), t->g, a->x[l + 1]);
  if (st) return st;
  RCALL(m, "rumus_add (residual)", rumus_add(m->ctx, a->x[l + 1], t->xmid, a->x[l + 1]));
  return RUMUS_OK;
}

/* Uploads ids x (and targets y if not NULL), runs the forward to the
 * logits and (with y) the loss, and its gradient into dlogits if grad. */
static int forward(gpt *m, acts *a, const int32_t *x, const int32_t *y, int grad) {
  size_t L = m->cfg.layers;
  RCALL(m, "upload ids", rumus_tensor_upload(a->ids, x, rumus_tensor_nbytes(a->ids)));
  if (y) RCALL(m, "upload targets", rumus_tensor_upload(a->tgt, y, rumus_tensor_nbytes(a->tgt)));
  RCALL(m, "rumus_embedding_fwd (wte)",
        rumus_embedding_fwd(m->ctx, m->pc[0], a->ids, -1, a->x0_3));
  RCALL(m, "rumus_broadcast_add (wpe)",
        rumus_broadcast_add(m->ctx, a->x0_3, m->wpe3, a->x0_3));
  for (size_t l = 0; l < L; l++) {
    int st = block_fwd(m, a, l);
    if (st != RUMUS_OK) return st;
  }
  int st = layernorm(m, k_lnf(m), a->x[L], a->hf, a->meanf, a->rstdf);
  if (st != RUMUS_OK) return st;
  RCALL(m, "rumus_gemm (lm_head)",
        rumus_gemm(m->ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0f, a->hf, m->pc[k_head(m)],
                   0.0f, a->logits));
  rumus_xent_params xp = RUMUS_XENT_DEFAULTS;
  xp.grad_scale = m->scale;
  if (y)
    RCALL(m, "rumus_cross_entropy",
          rumus_cross_entropy(m->ctx, a->logits, a->tgt, m->loss,
                              grad ? a->dlogits : NULL, &xp));
  return RUMUS_OK;
}

/* ---- Backward --------------------------------------------------------- */

/* Gradients of the linear layer with weight w from dout and its input in;
 * din (may be NULL) receives dout W. */
static int linear_bwd(gpt *m, size_t w, rumus_tensor *dout, rumus_tensor *in,
                      rumus_tensor *din) {
  RCALL(m, "rumus_gemm (dW = dy^T x)",
        rumus_gemm(m->ctx, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0f, dout, in, 0.0f, m->g[w]));
  RCALL(m, "rumus_bias_grad", rumus_bias_grad(m->ctx, dout, m->g[w + 1]));
  if (din)
    RCALL(m, "rumus_gemm (dx = dy W)",
          rumus_gemm(m->ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, dout, m->pc[w], 0.0f,
                     din));
  return RUMUS_OK;
}

/* a->dtmp (the gradient of layer norm w's output) through the layer norm
 * of input x, added to a->dres. */
static int layernorm_bwd_add(gpt *m, acts *a, size_t w, rumus_tensor *x,
                             rumus_tensor *mean, rumus_tensor *rstd) {
  RCALL(m, "rumus_layernorm_bwd",
        rumus_layernorm_bwd(m->ctx, a->dtmp, x, m->p[w], mean, rstd, a->dtmp,
                            m->g[w], m->g[w + 1]));
  RCALL(m, "rumus_add (residual gradient)", rumus_add(m->ctx, a->dres, a->dtmp, a->dres));
  return RUMUS_OK;
}

/* Block l backward: a->dres from dL/dx[l + 1] to dL/dx[l]. */
static int block_bwd(gpt *m, acts *a, size_t l) {
  static const int split_back[5] = {1, 3, 0, 2, 4}; /* [3,B,H,T,D] -> [B,T,3,H,D] */
  static const int merge[4] = {0, 2, 1, 3};
  layer_acts *t = &a->la[l];
  int st = linear_bwd(m, BLK(l, B_MPROJ_W), a->dres, t->g, a->dff);
  if (st) return st;
  RCALL(m, "rumus_activation_bwd (GELU)",
        rumus_activation_bwd(m->ctx, RUMUS_ACT_GELU_ERF, 0.0f, t->f, a->dff, a->dff));
  st = linear_bwd(m, BLK(l, B_FC_W), a->dff, t->h2, a->dtmp);
  if (!st) st = layernorm_bwd_add(m, a, BLK(l, B_LN2_W), t->xmid, t->mean2, t->rstd2);
  if (!st) st = linear_bwd(m, BLK(l, B_APROJ_W), a->dres, t->y, a->dy);
  if (st) return st;
  RCALL(m, "rumus_permute (head split of dy)", rumus_permute(m->ctx, a->dy4, merge, a->dop));
  RCALL(m, "rumus_attention_bwd",
        rumus_attention_bwd(m->ctx, &causal, t->q, t->k, t->v, NULL, t->o, t->lse,
                            a->dop, a->dq, a->dk, a->dv));
  RCALL(m, "rumus_permute (dqkv merge)",
        rumus_permute(m->ctx, a->dqkvp, split_back, a->dqkv5));
  st = linear_bwd(m, BLK(l, B_ATTN_W), a->dqkv, t->h1, a->dtmp);
  if (!st) st = layernorm_bwd_add(m, a, BLK(l, B_LN1_W), a->x[l], t->mean1, t->rstd1);
  return st;
}

static int backward(gpt *m, acts *a) {
  size_t L = m->cfg.layers, head = k_head(m);
  RCALL(m, "rumus_gemm (lm_head gradient)",
        rumus_gemm(m->ctx, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0f, a->dlogits, a->hf, 0.0f,
                   head ? m->g[head] : a->demb));
  RCALL(m, "rumus_gemm (dx = dlogits W)",
        rumus_gemm(m->ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, a->dlogits,
                   m->pc[head], 0.0f, a->dtmp));
  size_t f = k_lnf(m);
  RCALL(m, "rumus_layernorm_bwd (ln_f)",
        rumus_layernorm_bwd(m->ctx, a->dtmp, a->x[L], m->p[f], a->meanf, a->rstdf,
                            a->dres, m->g[f], m->g[f + 1]));
  for (size_t l = L; l-- > 0;) {
    int st = block_bwd(m, a, l);
    if (st != RUMUS_OK) return st;
  }
  RCALL(m, "rumus_reduce_sum (wpe gradient)",
        rumus_reduce_sum(m->ctx, a->dres3, 1u, 0, m->g[1]));
  RCALL(m, "rumus_embedding_bwd (wte gradient)",
        rumus_embedding_bwd(m->ctx, a->dres3, a->ids, -1, m->g[0]));
  /* Tied: wte's gradient is the embedding's plus the output layer's. */
  if (!head) RCALL(m, "rumus_add (tied gradient)", rumus_add(m->ctx, m->g[0], a->demb, m->g[0]));
  return RUMUS_OK;
}

/* ---- Steps ------------------------------------------------------------ */

/* Clipping and AdamW over the two flat groups (weight decay on the 2-D
 * tensors only): two launches each.  The
 * gradients carry the loss scale S: clipped at clip * S, read as g / S,
 * and (F16) the steps skip themselves on the device when the norm is not
 * finite.  Each step also writes the compute copy. */
static int update(gpt *m, float lr, float clip) {
  rumus_tensor *grads[2] = {m->flat[0][FLAT_G], m->flat[1][FLAT_G]};
  RCALL(m, "rumus_clip_grad_norm",
        rumus_clip_grad_norm(m->ctx, grads, 2, clip > 0.0f ? clip * m->scale : INFINITY,
                             m->gnorm));
  if (lr <= 0.0f) return RUMUS_OK;
  m->step++;
  rumus_grad_scaling scaling = {1.0f / m->scale,
                                m->prec == RUMUS_F16 ? m->gnorm : NULL};
  for (int grp = 0; grp < 2; grp++) {
    rumus_adam_params ap = m->adam;
    ap.lr = lr;
    if (grp == 1) ap.weight_decay = 0.0f;
    rumus_tensor **f = m->flat[grp];
    RCALL(m, "rumus_adam_step_ex",
          rumus_adam_step_ex(m->ctx, &ap, m->step, f[FLAT_P], f[FLAT_G], f[FLAT_MO],
                             f[FLAT_VO], f[FLAT_PC], &scaling));
  }
  return RUMUS_OK;
}

/* F16: GradScaler's update from the step's gradient norm (S times the
 * true one): a step that overflowed was skipped on the device, so it
 * does not count for AdamW, and the scale halves; 2000 good steps double
 * it. */
static void rescale(gpt *m, double norm, float lr) {
  if (m->prec != RUMUS_F16) return;
  if (!isfinite(norm)) {
    if (lr > 0.0f) {
      m->step--;
      m->skipped++;
    }
    m->good_steps = 0;
    if (m->scale > GPT_LOSS_SCALE_MIN) m->scale *= 0.5f;
  } else if (++m->good_steps == GPT_LOSS_SCALE_GROWTH) {
    m->good_steps = 0;
    if (m->scale < GPT_LOSS_SCALE_MAX) m->scale *= 2.0f;
  }
}

static int read_scalar(gpt *m, rumus_tensor *t, double *out, const char *what) {
  if (!out) return RUMUS_OK;
  float v;
  RCALL(m, what, rumus_tensor_download(t, &v, sizeof v));
  *out = v;
  return RUMUS_OK;
}

int gpt_train_step(gpt *m, const int32_t *x, const int32_t *y, float lr,
                   float clip, double *loss, double *gnorm) {
  float scale = m->scale;
  double norm = 0.0;
  int st = forward(m, &m->train, x, y, 1);
  if (!st) st = backward(m, &m->train);
  if (!st) st = update(m, lr, clip);
  if (!st) st = read_scalar(m, m->loss, loss, "download loss");
  if (!st) st = read_scalar(m, m->gnorm, &norm, "download gradient norm");
  if (!st) RCALL(m, "rumus_ctx_sync", rumus_ctx_sync(m->ctx));
  if (!st) rescale(m, norm, lr);
  if (!st && gnorm) *gnorm = norm / scale;
  return st;
}

float gpt_loss_scale(const gpt *m) { return m->scale; }
void gpt_set_loss_scale(gpt *m, float scale) {
  if (m->prec == RUMUS_F16 && scale > 0.0f && isfinite(scale)) m->scale = scale;
}
long gpt_skipped_steps(const gpt *m) { return m->skipped; }
rumus_dtype gpt_precision(const gpt *m) { return m->prec; }

int gpt_loss(gpt *m, const int32_t *x, const int32_t *y, double *loss) {
  int st = forward(m, &m->train, x, y, 0);
  if (!st) st = read_scalar(m, m->loss, loss, "download loss");
  if (!st) RCALL(m, "rumus_ctx_sync", rumus_ctx_sync(m->ctx));
  return st;
}

int gpt_logits(gpt *m, const int32_t *x, size_t pos, float *out) {
  size_t T = m->cfg.context, V = m->cfg.vocab;
  if (pos >= T)
    return train_fail(m->err, sizeof m->err, RUMUS_EINVAL,
                      "gpt_logits: position %zu past the context %zu", pos, T);
  if (!m->gen.batch) {
    m->host_logits = malloc(T * V * sizeof *m->host_logits);
    if (!m->host_logits)
      return train_fail(m->err, sizeof m->err, RUMUS_ENOMEM, "out of host memory");
    int st = acts_create(m, &m->gen, 1, 0);
    if (st != RUMUS_OK) {
      acts_free(&m->gen);
      return st;
    }
  }
  int st = forward(m, &m->gen, x, NULL, 0);
  if (st != RUMUS_OK) return st;
  RCALL(m, "download logits",
        rumus_tensor_download_f32(m->gen.logits, m->host_logits, T * V));
  RCALL(m, "rumus_ctx_sync", rumus_ctx_sync(m->ctx)); /* an id out of range */
  memcpy(out, m->host_logits + pos * V, V * sizeof *out);
  return RUMUS_OK;
}
