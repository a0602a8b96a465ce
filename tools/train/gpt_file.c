/* gpt_file.c - the GPT's configuration, host parameters, initialisation
 * and safetensors files (gpt.h, gpt_file.h). */
#include "gpt_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnist.h"
#include "safetensors.h"

static const char *const block_names[GPT_BLOCK_TENSORS] = {
    "ln_1.weight",        "ln_1.bias",          "attn.c_attn.weight",
    "attn.c_attn.bias",   "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight",        "ln_2.bias",          "mlp.c_fc.weight",
    "mlp.c_fc.bias",      "mlp.c_proj.weight",  "mlp.c_proj.bias"};

/* ---- Configuration ---------------------------------------------------- */

int gpt_config_check(const gpt_config *c, char *err, size_t errlen) {
  if (c->vocab < 1 || c->vocab > GPT_MAX_VOCAB)
    return train_fail(err, errlen, RUMUS_EINVAL, "vocabulary of %zu tokens (1..%d)",
                      c->vocab, GPT_MAX_VOCAB);
  if (c->layers < 1 || c->layers > GPT_MAX_LAYERS)
    return train_fail(err, errlen, RUMUS_EINVAL, "%zu layers (1..%d)", c->layers,
                      GPT_MAX_LAYERS);
  if (c->width < 1 || c->width > GPT_MAX_WIDTH)
    return train_fail(err, errlen, RUMUS_EINVAL, "width %zu (1..%d)", c->width,
                      GPT_MAX_WIDTH);
  if (c->heads < 1 || c->width % c->heads != 0)
    return train_fail(err, errlen, RUMUS_EINVAL,
                      "%zu heads do not divide the width %zu", c->heads, c->width);
  if (c->context < 1 || c->context > GPT_MAX_CONTEXT)
    return train_fail(err, errlen, RUMUS_EINVAL, "context %zu (1..%d)", c->context,
                      GPT_MAX_CONTEXT);
  return RUMUS_OK;
}

size_t gpt_ntensors(const gpt_config *c) {
  return 4 + GPT_BLOCK_TENSORS * c->layers + (c->tied ? 0 : 1);
}

int gpt_tensor_info(const gpt_config *c, size_t k, char *name, size_t len,
                    size_t shape[2]) {
  size_t C = c->width, L = c->layers, last = 2 + GPT_BLOCK_TENSORS * L;
  if (k == 0 || k == 1 || k == last + 2) {
    snprintf(name, len, "%s",
             k == 0 ? "transformer.wte.weight"
                    : k == 1 ? "transformer.wpe.weight" : "lm_head.weight");
    shape[0] = k == 1 ? c->context : c->vocab;
    shape[1] = C;
    return 2;
  }
  if (k >= last) {
    snprintf(name, len, "transformer.ln_f.%s", k == last ? "weight" : "bias");
    shape[0] = C;
    return 1;
  }
  size_t l = (k - 2) / GPT_BLOCK_TENSORS, j = (k - 2) % GPT_BLOCK_TENSORS;
  snprintf(name, len, "transformer.h.%zu.%s", l, block_names[j]);
  /* rows of each linear layer: c_attn 3C, c_proj C, c_fc 4C, c_proj C */
  static const size_t rows[GPT_BLOCK_TENSORS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
  shape[0] = rows[j] * C;
  if (j == 2 || j == 4 || j == 8 || j == 10) {
    shape[1] = j == 10 ? 4 * C : C;
    return 2;
  }
  return 1;
}

size_t gpt_tensor_numel(const gpt_config *c, size_t k) {
  char name[96];
  size_t shape[2];
  int nd = gpt_tensor_info(c, k, name, sizeof name, shape);
  return nd == 2 ? shape[0] * shape[1] : shape[0];
}

size_t gpt_param_count(const gpt_config *c) {
  size_t n = 0;
  for (size_t k = 0; k < gpt_ntensors(c); k++) n += gpt_tensor_numel(c, k);
  return n;
}

/* ---- Host parameters -------------------------------------------------- */

int gpt_params_alloc(gpt_params *p, const gpt_config *c) {
  memset(p, 0, sizeof *p);
  p->cfg = *c;
  p->n = gpt_ntensors(c);
  p->t = calloc(p->n, sizeof *p->t);
  if (!p->t) return RUMUS_ENOMEM;
  for (size_t k = 0; k < p->n; k++) {
    p->t[k] = calloc(gpt_tensor_numel(c, k), sizeof(float));
    if (!p->t[k]) {
      gpt_params_free(p);
      return RUMUS_ENOMEM;
    }
  }
  return RUMUS_OK;
}

void gpt_params_free(gpt_params *p) {
  for (size_t k = 0; p->t && k < p->n; k++) free(p->t[k]);
  free(p->t);
  memset(p, 0, sizeof *p);
}

/* N(0, 1) by Box-Muller from two 24-bit uniforms (the sine discarded). */
static double normal(mlp_rng *r) {
  double u1 = ((double)(mlp_rng_next(r) >> 40) + 1.0) / 16777216.0;
  double u2 = (double)(mlp_rng_next(r) >> 40) / 16777216.0;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void gpt_params_init(gpt_params *p, uint64_t seed) {
  mlp_rng r;
  mlp_rng_seed(&r, seed);
  double proj_std = 0.02 / sqrt(2.0 * (double)p->cfg.layers);
  for (size_t k = 0; k < p->n; k++) {
    char name[96];
    size_t shape[2], n = gpt_tensor_numel(&p->cfg, k);
    int nd = gpt_tensor_info(&p->cfg, k, name, sizeof name, shape);
    int is_ln_weight = nd == 1 && strstr(name, "ln_") && strstr(name, ".weight");
    double std = strstr(name, "c_proj.weight") ? proj_std : 0.02;
    for (size_t i = 0; i < n; i++)
      p->t[k][i] = nd == 2 ? (float)(std * normal(&r)) : is_ln_weight ? 1.0f : 0.0f;
  }
}

/* ---- Files ------------------------------------------------------------ */

int gpt_file_is_gpt(const char *path) {
  st_file f;
  char err[256];
  if (st_load(path, &f, err, sizeof err) != RUMUS_OK) return 0;
  int yes = st_get(&f, "transformer.wte.weight") != NULL;
  st_free(&f);
  return yes;
}

int gpt_ckpt_save(const char *path, const gpt_params *p, const gpt_vocab *v,
                  const char *const *extra, size_t nextra, char *err, size_t errlen) {
  const gpt_config *c = &p->cfg;
  /* A tied model also writes lm_head.weight (a copy of wte), so that
   * nanoGPT's GPT.load_state_dict takes the file as it is. */
  size_t n = p->n + (c->tied ? 1 : 0);
  st_tensor *t = calloc(n, sizeof *t);
  char (*names)[96] = calloc(n, sizeof *names);
  char *meta[32], num[6][32], hex[2 * 256 + 1];
  int st = t && names ? RUMUS_OK : train_fail(err, errlen, RUMUS_ENOMEM, "out of memory");
  for (size_t k = 0; st == RUMUS_OK && k < n; k++) {
    size_t src = k < p->n ? k : 0, shape[2];
    int nd = gpt_tensor_info(c, src, names[k], sizeof names[k], shape);
    if (k >= p->n) snprintf(names[k], sizeof names[k], "lm_head.weight");
    t[k].name = names[k];
    t[k].dtype = RUMUS_F32;
    t[k].ndim = nd;
    t[k].shape[0] = shape[0];
    t[k].shape[1] = nd == 2 ? shape[1] : 0;
    t[k].data = p->t[src];
    t[k].nbytes = gpt_tensor_numel(c, src) * sizeof(float);
  }
  for (size_t i = 0; i < v->n; i++) snprintf(hex + 2 * i, 3, "%02x", v->byte[i]);
  snprintf(num[0], sizeof num[0], "%zu", c->layers);
  snprintf(num[1], sizeof num[1], "%zu", c->heads);
  snprintf(num[2], sizeof num[2], "%zu", c->width);
  snprintf(num[3], sizeof num[3], "%zu", c->context);
  snprintf(num[4], sizeof num[4], "%zu", c->vocab);
  const char *fixed[] = {"format", "pt", "rumus.model", "gpt", "n_layer", num[0],
                         "n_head", num[1], "n_embd", num[2], "block_size", num[3],
                         "vocab_size", num[4], "bias", "true", "dropout", "0.0",
                         "rumus.tied", c->tied ? "true" : "false",
                         "rumus.vocab", hex};
  size_t nm = sizeof fixed / sizeof fixed[0];
  for (size_t i = 0; i < nm; i++) meta[i] = (char *)fixed[i];
  for (size_t i = 0; i < 2 * nextra && nm + i < 32; i++) meta[nm + i] = (char *)extra[i];
  size_t nmeta = (nm + 2 * nextra < 32 ? nm + 2 * nextra : 32) / 2;
  if (st == RUMUS_OK)
    st = st_save(path, t, n, (const char *const *)meta, nmeta, err, errlen);
  free(t);
  free(names);
  return st;
}


/* The configuration from the tensors' shapes and the metadata's n_head. */
static int config_of(const char *path, const st_file *f, gpt_config *c, char *err,
                     size_t errlen) {
  const st_tensor *wte = st_get(f, "transformer.wte.weight");
  const st_tensor *wpe = st_get(f, "transformer.wpe.weight");
  const st_tensor *head = st_get(f, "lm_head.weight");
  const char *nh = st_meta(f, "n_head"), *tied = st_meta(f, "rumus.tied");
  if (!wte || !wpe || wte->ndim != 2 || wpe->ndim != 2 || wte->shape[1] != wpe->shape[1])
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: no 2-D transformer.wte.weight and transformer.wpe.weight "
                      "of one width", path);
  memset(c, 0, sizeof *c);
  c->vocab = wte->shape[0];
  c->width = wte->shape[1];
  c->context = wpe->shape[0];
  char name[96];
  for (;;) {
    snprintf(name, sizeof name, "transformer.h.%zu.ln_1.weight", c->layers);
    if (!st_get(f, name) || c->layers == GPT_MAX_LAYERS) break;
    c->layers++;
  }
  char *end = NULL;
  c->heads = nh ? strtoul(nh, &end, 10) : 0;
  if (!nh || *end || c->heads == 0)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: no number of heads (metadata n_head)", path);
  /* Tied when lm_head.weight is absent (safetensors drops shared tensors),
   * marked so, or the same bytes as wte. */
  c->tied = !head || (tied && strcmp(tied, "true") == 0) ||
            (head->dtype == wte->dtype && head->nbytes == wte->nbytes &&
             memcmp(head->data, wte->data, wte->nbytes) == 0);
  int st = gpt_config_check(c, err, errlen);
  if (st != RUMUS_OK)
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: not a valid GPT (%s)", path, err);
  return RUMUS_OK;
}

static int vocab_of(const char *path, const st_file *f, size_t V, gpt_vocab *v,
                    char *err, size_t errlen) {
  const char *hex = st_meta(f, "rumus.vocab");
  unsigned char bytes[256];
  size_t n = hex ? strlen(hex) / 2 : 0;
  int ok = hex && strlen(hex) % 2 == 0 && n == V;
  for (size_t i = 0; ok && i < n; i++) {
    unsigned x;
    ok = sscanf(hex + 2 * i, "%2x", &x) == 1;
    bytes[i] = (unsigned char)x;
  }
  if (!ok || gpt_vocab_from_bytes(v, bytes, n) != RUMUS_OK)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: no vocabulary of %zu distinct bytes (metadata rumus.vocab)",
                      path, V);
  return RUMUS_OK;
}

static int check_names(const char *path, const st_file *f, const gpt_params *p,
                       char *err, size_t errlen) {
  for (size_t i = 0; i < f->n; i++) {
    int known = p->cfg.tied && strcmp(f->t[i].name, "lm_head.weight") == 0;
    for (size_t k = 0; !known && k < p->n; k++) {
      char name[96];
      size_t shape[2];
      gpt_tensor_info(&p->cfg, k, name, sizeof name, shape);
      known = strcmp(name, f->t[i].name) == 0;
    }
    if (!known)
      return train_fail(err, errlen, TRAIN_EFORMAT, "%s: unexpected tensor %s for a GPT",
                        path, f->t[i].name);
  }
  return RUMUS_OK;
}

int gpt_ckpt_load(const char *path, gpt_params *p, gpt_vocab *v, char *err,
                  size_t errlen) {
  memset(p, 0, sizeof *p);
  st_file f;
  int st = st_load(path, &f, err, errlen);
  if (st != RUMUS_OK) return st;
  gpt_config c;
  st = config_of(path, &f, &c, err, errlen);
  if (st == RUMUS_OK) st = vocab_of(path, &f, c.vocab, v, err, errlen);
  if (st == RUMUS_OK && gpt_params_alloc(p, &c) != RUMUS_OK)
    st = train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  for (size_t k = 0; st == RUMUS_OK && k < p->n; k++) {
    char name[96];
    size_t shape[2];
    int nd = gpt_tensor_info(&c, k, name, sizeof name, shape);
    st = st_take(path, &f, name, nd, shape, p->t[k], err, errlen);
  }
  if (st == RUMUS_OK) st = check_names(path, &f, p, err, errlen);
  st_free(&f);
  if (st != RUMUS_OK) gpt_params_free(p);
  return st;
}
