/* checkpoint.c - see checkpoint.h. */
#include "checkpoint.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define MLP_NAME_LEN 24

int ckpt_is_safetensors(const char *path) {
  unsigned char head[9];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t got = fread(head, 1, 9, f);
  fclose(f);
  if (got != 9) return 0;
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | head[i];
  return n >= 2 && n <= ST_MAX_HEADER && head[8] == '{';
}

/* ---- Saving --------------------------------------------------------------- */

static void set_tensor(st_tensor *t, const char *name, int ndim,
                       const size_t *shape, const float *data) {
  memset(t, 0, sizeof *t);
  t->name = name;
  t->dtype = RUMUS_F32;
  t->ndim = ndim;
  size_t n = 1;
  for (int d = 0; d < ndim; d++) n *= (t->shape[d] = shape[d]);
  t->data = data;
  t->nbytes = n * sizeof(float);
}

/* The MLP's tensors: linear layer l is module 2 l of the Sequential. */
static size_t mlp_tensors(const mlp_params *p, st_tensor *t,
                          char names[][MLP_NAME_LEN]) {
  size_t n = 0;
  for (int l = 0; l < p->shape.nlayers; l++) {
    const size_t w[2] = {p->shape.sizes[l + 1], p->shape.sizes[l]};
    snprintf(names[n], MLP_NAME_LEN, "%d.weight", 2 * l);
    set_tensor(&t[n], names[n], 2, w, p->w[l]);
    n++;
    snprintf(names[n], MLP_NAME_LEN, "%d.bias", 2 * l);
    set_tensor(&t[n], names[n], 1, w, p->b[l]);
    n++;
  }
  return n;
}

static size_t cnn_tensors(const cnn_params *p, st_tensor *t) {
  for (int k = 0; k < CNN_NTENSOR; k++) {
    size_t shape[4];
    int nd = cnn_tensor_shape(&p->shape, k, shape);
    set_tensor(&t[k], cnn_tensor_name(k), nd, shape, p->t[k]);
  }
  return CNN_NTENSOR;
}

int ckpt_save(const char *path, train_model_kind kind, const mlp_params *mp,
              const cnn_params *cp, char *err, size_t errlen) {
  st_tensor t[2 * MLP_MAX_LAYERS + CNN_NTENSOR];
  char names[2 * MLP_MAX_LAYERS][MLP_NAME_LEN];
  char widths[256], mean[32], std[32];
  size_t n;
  float in_mean, in_std;
  if (kind == TRAIN_MODEL_CNN) {
    n = cnn_tensors(cp, t);
    cnn_shape_str(&cp->shape, widths, sizeof widths);
    in_mean = cp->in_mean;
    in_std = cp->in_std;
  } else {
    n = mlp_tensors(mp, t, names);
    mlp_shape_str(&mp->shape, widths, sizeof widths);
    in_mean = mp->in_mean;
    in_std = mp->in_std;
  }
  snprintf(mean, sizeof mean, "%.9g", (double)in_mean);
  snprintf(std, sizeof std, "%.9g", (double)in_std);
  const char *meta[] = {"format",        "pt",
                        "rumus.model",   kind == TRAIN_MODEL_CNN ? "cnn" : "mlp",
                        "rumus.widths",  widths,
                        "rumus.in_mean", mean,
                        "rumus.in_std",  std};
  return st_save(path, t, n, meta, sizeof meta / sizeof meta[0] / 2, err, errlen);
}

/* ---- Loading -------------------------------------------------------------- */


/* The MLP's widths from the shapes of "0.weight", "2.weight", ... */
static int mlp_shape_of(const char *path, const st_file *f, mlp_shape *s, char *err,
                        size_t errlen) {
  size_t sizes[MLP_MAX_LAYERS + 1];
  int L = 0;
  char name[MLP_NAME_LEN];
  for (;; L++) {
    snprintf(name, sizeof name, "%d.weight", 2 * L);
    const st_tensor *w = st_get(f, name);
    if (!w) break;
    if (L == MLP_MAX_LAYERS || w->ndim != 2 || (L > 0 && w->shape[1] != sizes[L]))
      return train_fail(err, errlen, TRAIN_EFORMAT, "%s: %s does not continue the layers",
                        path, name);
    sizes[L] = w->shape[1];
    sizes[L + 1] = w->shape[0];
  }
  if (L == 0 || mlp_shape_make(s, sizes[0], sizes + 1, L - 1, sizes[L]) != RUMUS_OK)
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: no MLP layers (0.weight ...)", path);
  return RUMUS_OK;
}

static int load_mlp(const char *path, const st_file *f, mlp_params *p, char *err,
                    size_t errlen) {
  mlp_shape s;
  int st = mlp_shape_of(path, f, &s, err, errlen);
  if (st == RUMUS_OK && mlp_params_alloc(p, &s) != RUMUS_OK)
    st = train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  st_tensor want[2 * MLP_MAX_LAYERS];
  char names[2 * MLP_MAX_LAYERS][MLP_NAME_LEN];
  size_t n = st == RUMUS_OK ? mlp_tensors(p, want, names) : 0;
  for (size_t i = 0; st == RUMUS_OK && i < n; i++)
    st = st_take(path, f, want[i].name, want[i].ndim, want[i].shape, (float *)want[i].data,
              err, errlen);
  for (size_t i = 0; st == RUMUS_OK && i < f->n; i++) {
    size_t j = 0;
    while (j < n && strcmp(f->t[i].name, want[j].name) != 0) j++;
    if (j == n)
      st = train_fail(err, errlen, TRAIN_EFORMAT, "%s: unexpected tensor %s for an MLP",
                      path, f->t[i].name);
  }
  return st;
}

/* A CNN's extra tensor that may be ignored: BatchNorm's step counter. */
static int cnn_ignorable(const char *name) {
  return strcmp(name, "bn1.num_batches_tracked") == 0 ||
         strcmp(name, "bn2.num_batches_tracked") == 0;
}

static int load_cnn(const char *path, const st_file *f, cnn_params *p, char *err,
                    size_t errlen) {
  const st_tensor *c1 = st_get(f, "conv1.weight"), *c2 = st_get(f, "conv2.weight");
  const st_tensor *h = st_get(f, "fc1.weight");
  cnn_shape s = {0, 0, 0};
  if (c1 && c2 && h && c1->ndim == 4 && c2->ndim == 4 && h->ndim == 2)
    s = (cnn_shape){c1->shape[0], c2->shape[0], h->shape[0]};
  if (!cnn_shape_valid(&s))
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: conv1.weight, conv2.weight and fc1.weight do not give a "
                      "valid CNN", path);
  if (cnn_params_alloc(p, &s) != RUMUS_OK)
    return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  int st = RUMUS_OK;
  for (int k = 0; st == RUMUS_OK && k < CNN_NTENSOR; k++) {
    size_t shape[4];
    int nd = cnn_tensor_shape(&s, k, shape);
    st = st_take(path, f, cnn_tensor_name(k), nd, shape, p->t[k], err, errlen);
  }
  for (size_t i = 0; st == RUMUS_OK && i < s.c1; i++)
    if (p->t[CNN_BN1_VAR][i] < 0)
      st = train_fail(err, errlen, TRAIN_EFORMAT, "%s: bn1.running_var < 0", path);
  for (size_t i = 0; st == RUMUS_OK && i < s.c2; i++)
    if (p->t[CNN_BN2_VAR][i] < 0)
      st = train_fail(err, errlen, TRAIN_EFORMAT, "%s: bn2.running_var < 0", path);
  for (size_t i = 0; st == RUMUS_OK && i < f->n; i++) {
    int known = cnn_ignorable(f->t[i].name);
    for (int k = 0; !known && k < CNN_NTENSOR; k++)
      known = strcmp(f->t[i].name, cnn_tensor_name(k)) == 0;
    if (!known)
      st = train_fail(err, errlen, TRAIN_EFORMAT, "%s: unexpected tensor %s for a CNN",
                      path, f->t[i].name);
  }
  return st;
}

/* The input transform from the metadata (absent: pixel / 255). */
static int transform_of(const char *path, const st_file *f, float *mean, float *std,
                        char *err, size_t errlen) {
  const char *m = st_meta(f, "rumus.in_mean"), *s = st_meta(f, "rumus.in_std");
  *mean = 0.0f;
  *std = 1.0f;
  if (!m && !s) return RUMUS_OK;
  char *end1 = NULL, *end2 = NULL;
  double dm = m ? strtod(m, &end1) : 0.0, ds = s ? strtod(s, &end2) : 1.0;
  if ((m && *end1) || (s && *end2) || !isfinite(dm) || !isfinite(ds) || !(ds > 0))
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: bad input transform in the metadata (mean %s, std %s)", path,
                      m ? m : "-", s ? s : "-");
  *mean = (float)dm;
  *std = (float)ds;
  return RUMUS_OK;
}

int ckpt_load(const char *path, train_model_kind *kind, mlp_params *mp,
              cnn_params *cp, char *err, size_t errlen) {
  memset(mp, 0, sizeof *mp);
  memset(cp, 0, sizeof *cp);
  st_file f;
  int st = st_load(path, &f, err, errlen);
  if (st != RUMUS_OK) return st;
  *kind = st_get(&f, "conv1.weight") ? TRAIN_MODEL_CNN : TRAIN_MODEL_MLP;
  const char *said = st_meta(&f, "rumus.model");
  if (said && strcmp(said, *kind == TRAIN_MODEL_CNN ? "cnn" : "mlp") != 0)
    st = train_fail(err, errlen, TRAIN_EFORMAT,
                    "%s: the metadata says %s, the tensors are those of %s", path, said,
                    *kind == TRAIN_MODEL_CNN ? "a CNN" : "an MLP");
  float mean = 0, std = 1;
  if (st == RUMUS_OK) st = transform_of(path, &f, &mean, &std, err, errlen);
  if (st == RUMUS_OK)
    st = *kind == TRAIN_MODEL_CNN ? load_cnn(path, &f, cp, err, errlen)
                                  : load_mlp(path, &f, mp, err, errlen);
  st_free(&f);
  if (st != RUMUS_OK) {
    mlp_params_free(mp);
    cnn_params_free(cp);
    return st;
  }
  if (*kind == TRAIN_MODEL_CNN) {
    cp->in_mean = mean;
    cp->in_std = std;
  } else {
    mp->in_mean = mean;
    mp->in_std = std;
  }
  return RUMUS_OK;
}
