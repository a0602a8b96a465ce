/* cnn_file.c - the CNN's shapes, host parameters, initialisation and
 * model file (see cnn.h and docs/TRAINING.md). */
#include "cnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

/* ---- Shapes ----------------------------------------------------------- */

/* The pooled feature map after conv2: 28 / 2 / 2 = 7. */
#define FEAT_HW (MNIST_ROWS / 4)

int cnn_tensor_shape(const cnn_shape *s, int k, size_t d[4]) {
  size_t flat = s->c2 * FEAT_HW * FEAT_HW;
  switch (k) {
    case CNN_CONV1_W:
      d[0] = s->c1, d[1] = 1, d[2] = 3, d[3] = 3;
      return 4;
    case CNN_CONV2_W:
      d[0] = s->c2, d[1] = s->c1, d[2] = 3, d[3] = 3;
      return 4;
    case CNN_FC1_W:
      d[0] = s->hidden, d[1] = flat;
      return 2;
    case CNN_FC2_W:
      d[0] = MNIST_CLASSES, d[1] = s->hidden;
      return 2;
    case CNN_CONV1_B: case CNN_BN1_W: case CNN_BN1_B:
    case CNN_BN1_MEAN: case CNN_BN1_VAR:
      d[0] = s->c1;
      return 1;
    case CNN_CONV2_B: case CNN_BN2_W: case CNN_BN2_B:
    case CNN_BN2_MEAN: case CNN_BN2_VAR:
      d[0] = s->c2;
      return 1;
    case CNN_FC1_B:
      d[0] = s->hidden;
      return 1;
    default:
      d[0] = MNIST_CLASSES;
      return 1;
  }
}

size_t cnn_tensor_numel(const cnn_shape *s, int k) {
  size_t d[4], n = 1;
  int nd = cnn_tensor_shape(s, k, d);
  for (int i = 0; i < nd; i++) n *= d[i];
  return n;
}

const char *cnn_tensor_name(int k) {
  static const char *const names[CNN_NTENSOR] = {
      "conv1.weight", "conv1.bias",       "bn1.weight",      "bn1.bias",
      "conv2.weight", "conv2.bias",       "bn2.weight",      "bn2.bias",
      "fc1.weight",   "fc1.bias",         "fc2.weight",      "fc2.bias",
      "bn1.running_mean", "bn1.running_var", "bn2.running_mean",
      "bn2.running_var"};
  return k >= 0 && k < CNN_NTENSOR ? names[k] : "?";
}

int cnn_is_bn(int k) {
  return k == CNN_BN1_W || k == CNN_BN1_B || k == CNN_BN2_W ||
         k == CNN_BN2_B || k >= CNN_NPARAM;
}

size_t cnn_shape_params(const cnn_shape *s) {
  size_t n = 0;
  for (int k = 0; k < CNN_NPARAM; k++) n += cnn_tensor_numel(s, k);
  return n;
}

void cnn_shape_str(const cnn_shape *s, char *buf, size_t len) {
  snprintf(buf, len, "conv%zu-conv%zu-fc%zu", s->c1, s->c2, s->hidden);
}

int cnn_shape_valid(const cnn_shape *s) {
  return s->c1 >= 1 && s->c1 <= CNN_MAX_WIDTH && s->c2 >= 1 &&
         s->c2 <= CNN_MAX_WIDTH && s->hidden >= 1 && s->hidden <= CNN_MAX_WIDTH;
}

/* ---- Host parameters -------------------------------------------------- */

void cnn_params_free(cnn_params *p) {
  if (!p) return;
  for (int k = 0; k < CNN_NTENSOR; k++) free(p->t[k]);
  memset(p, 0, sizeof *p);
}

int cnn_params_alloc(cnn_params *p, const cnn_shape *s) {
  if (!p || !s) return RUMUS_EINVAL;
  memset(p, 0, sizeof *p);
  if (!cnn_shape_valid(s)) return RUMUS_EINVAL;
  p->shape = *s;
  p->in_std = 1.0f;
  for (int k = 0; k < CNN_NTENSOR; k++) {
    p->t[k] = calloc(cnn_tensor_numel(s, k), sizeof(float));
    if (!p->t[k]) {
      cnn_params_free(p);
      return RUMUS_ENOMEM;
    }
  }
  return RUMUS_OK;
}

/* fan_in of a conv or linear weight: every axis but the first. */
static size_t fan_in(const cnn_shape *s, int weight) {
  return cnn_tensor_numel(s, weight) / cnn_tensor_numel(s, weight + 1);
}

static void fill(float *x, size_t n, float v) {
  for (size_t i = 0; i < n; i++) x[i] = v;
}

void cnn_params_init(cnn_params *p, uint64_t seed) {
  static const int weights[] = {CNN_CONV1_W, CNN_CONV2_W, CNN_FC1_W, CNN_FC2_W};
  const cnn_shape *s = &p->shape;
  mlp_rng r;
  mlp_rng_seed(&r, seed);
  for (int i = 0; i < 4; i++) {
    int w = weights[i];
    float k = (float)(1.0 / sqrt((double)fan_in(s, w)));
    for (int t = w; t <= w + 1; t++) /* the weight, then its bias */
      for (size_t j = 0; j < cnn_tensor_numel(s, t); j++)
        p->t[t][j] = mlp_rng_uniform(&r, -k, k);
  }
  static const int ones[] = {CNN_BN1_W, CNN_BN2_W, CNN_BN1_VAR, CNN_BN2_VAR};
  static const int zeros[] = {CNN_BN1_B, CNN_BN2_B, CNN_BN1_MEAN, CNN_BN2_MEAN};
  for (int i = 0; i < 4; i++) {
    fill(p->t[ones[i]], cnn_tensor_numel(s, ones[i]), 1.0f);
    fill(p->t[zeros[i]], cnn_tensor_numel(s, zeros[i]), 0.0f);
  }
}

/* ---- Model files ------------------------------------------------------ */
/* Layout (docs/TRAINING.md), all little-endian:
 *   0   8  magic "RUMUSCNN"
 *   8   4  version, 1
 *   12  4  float32 in_mean
 *   16  4  float32 in_std
 *   20  4  x 3  c1, c2, hidden
 *   32  4  x 4  input channels 1, height 28, width 28, classes 10
 *   48  4  the number of tensors that follow, 16
 *   52     the tensors in cnn.h's order (CNN_CONV1_W .. CNN_BN2_VAR), float32,
 *          row-major, PyTorch's shapes
 *   end 4  CRC-32 (zlib's crc32) of every byte before it */

static const unsigned char CNN_MAGIC[8] = {'R', 'U', 'M', 'U', 'S', 'C', 'N', 'N'};
#define CNN_VERSION 1u
#define CNN_HEADER 52u
/* Files over 1 GiB are taken as corrupt. */
#define CNN_MAX_FILE ((size_t)1 << 30)

static size_t file_bytes(const cnn_shape *s) {
  size_t n = 0;
  for (int k = 0; k < CNN_NTENSOR; k++) n += cnn_tensor_numel(s, k);
  return CNN_HEADER + 4 * n + 4;
}

int cnn_params_save(const cnn_params *p, const char *path, char *err,
                    size_t errlen) {
  if (!p || !path || !cnn_shape_valid(&p->shape) || !p->t[0])
    return train_fail(err, errlen, RUMUS_EINVAL, "cnn_params_save: bad argument");
  const cnn_shape *s = &p->shape;
  size_t total = file_bytes(s);
  unsigned char *buf = malloc(total);
  if (!buf)
    return train_fail(err, errlen, RUMUS_ENOMEM,
                      "%s: out of memory for %zu bytes", path, total);
  const uint32_t meta[] = {(uint32_t)s->c1, (uint32_t)s->c2, (uint32_t)s->hidden,
                           1, MNIST_ROWS, MNIST_COLS, MNIST_CLASSES, CNN_NTENSOR};
  memcpy(buf, CNN_MAGIC, 8);
  train_put32(buf + 8, CNN_VERSION);
  train_put_floats(buf + 12, &p->in_mean, 1);
  train_put_floats(buf + 16, &p->in_std, 1);
  for (int i = 0; i < 8; i++) train_put32(buf + 20 + 4 * i, meta[i]);
  size_t off = CNN_HEADER;
  for (int k = 0; k < CNN_NTENSOR; k++) {
    size_t n = cnn_tensor_numel(s, k);
    train_put_floats(buf + off, p->t[k], n);
    off += 4 * n;
  }
  train_put32(buf + off, train_crc32(buf, off));
  int st = train_write_file(path, buf, total, err, errlen);
  free(buf);
  return st;
}

/* The header of buf[0..len): magic, version, shape, the fixed metadata.
 * On success *s is the shape and *in the transform. */
static int parse_header(const unsigned char *buf, size_t len, const char *path,
                        cnn_shape *s, float in[2], char *err, size_t errlen) {
  if (len >= 8 && memcmp(buf, CNN_MAGIC, 8) != 0)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: bad magic: not a rumus CNN model file (expected "
                      "\"RUMUSCNN\")", path);
  if (len < CNN_HEADER)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: truncated: %zu bytes, shorter than the %u-byte header",
                      path, len, CNN_HEADER);
  uint32_t version = train_get32(buf + 8);
  if (version != CNN_VERSION)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: unsupported CNN model file version %u (this program "
                      "reads version %u)", path, (unsigned)version, CNN_VERSION);
  train_get_floats(in, buf + 12, 2);
  if (!isfinite(in[0]) || !isfinite(in[1]) || !(in[1] > 0.0f))
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: implausible input normalisation: mean %g, std %g",
                      path, (double)in[0], (double)in[1]);
  uint32_t m[8];
  for (int i = 0; i < 8; i++) m[i] = train_get32(buf + 20 + 4 * i);
  s->c1 = m[0], s->c2 = m[1], s->hidden = m[2];
  if (!cnn_shape_valid(s))
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: implausible shape: c1 %u, c2 %u, hidden %u (each "
                      "expected from 1 to %u)", path, (unsigned)m[0],
                      (unsigned)m[1], (unsigned)m[2], CNN_MAX_WIDTH);
  if (m[3] != 1 || m[4] != MNIST_ROWS || m[5] != MNIST_COLS ||
      m[6] != MNIST_CLASSES || m[7] != CNN_NTENSOR)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: unsupported input %ux%ux%u, %u classes, %u tensors "
                      "(this program reads 1x28x28, 10 classes, %d tensors)",
                      path, (unsigned)m[3], (unsigned)m[4], (unsigned)m[5],
                      (unsigned)m[6], (unsigned)m[7], CNN_NTENSOR);
  if (file_bytes(s) > CNN_MAX_FILE)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: implausible model: more than %zu bytes", path,
                      CNN_MAX_FILE);
  return RUMUS_OK;
}

/* The size and checksum of a file whose header is valid. */
static int check_body(const unsigned char *buf, size_t len, const cnn_shape *s,
                      const char *path, char *err, size_t errlen) {
  size_t total = file_bytes(s);
  char str[96];
  cnn_shape_str(s, str, sizeof str);
  if (len < total)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: truncated: %zu bytes, but a %s model file has %zu",
                      path, len, str, total);
  if (len > total)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: trailing bytes after the %zu bytes of the model",
                      path, total);
  return train_check_crc(buf, total, path, err, errlen);
}

/* Every value finite, every running variance >= 0. */
static int check_values(const cnn_params *p, const char *path, char *err,
                        size_t errlen) {
  for (int k = 0; k < CNN_NTENSOR; k++) {
    size_t n = cnn_tensor_numel(&p->shape, k);
    int var = k == CNN_BN1_VAR || k == CNN_BN2_VAR;
    for (size_t i = 0; i < n; i++)
      if (!isfinite(p->t[k][i]) || (var && p->t[k][i] < 0.0f))
        return train_fail(err, errlen, TRAIN_EFORMAT,
                          "%s: implausible value %g at %s[%zu]", path,
                          (double)p->t[k][i], cnn_tensor_name(k), i);
  }
  return RUMUS_OK;
}

int cnn_params_load(cnn_params *p, const char *path, char *err,
                    size_t errlen) {
  if (!p || !path)
    return train_fail(err, errlen, RUMUS_EINVAL, "cnn_params_load: NULL argument");
  memset(p, 0, sizeof *p);
  unsigned char *buf = NULL;
  size_t len = 0;
  int st = train_read_file(path, CNN_MAX_FILE + 64, &buf, &len, err, errlen);
  if (st != RUMUS_OK) return st;
  cnn_shape s;
  float in[2];
  st = parse_header(buf, len, path, &s, in, err, errlen);
  if (st == RUMUS_OK) st = check_body(buf, len, &s, path, err, errlen);
  if (st == RUMUS_OK && cnn_params_alloc(p, &s) != RUMUS_OK)
    st = train_fail(err, errlen, RUMUS_ENOMEM,
                    "%s: out of memory for the parameters", path);
  if (st == RUMUS_OK) {
    p->in_mean = in[0];
    p->in_std = in[1];
    size_t off = CNN_HEADER;
    for (int k = 0; k < CNN_NTENSOR; k++) {
      size_t n = cnn_tensor_numel(&s, k);
      train_get_floats(p->t[k], buf + off, n);
      off += 4 * n;
    }
    st = check_values(p, path, err, errlen);
    if (st != RUMUS_OK) cnn_params_free(p);
  }
  free(buf);
  return st;
}

int cnn_file_is_cnn(const char *path) {
  unsigned char head[8];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  size_t got = fread(head, 1, 8, f);
  fclose(f);
  return got == 8 && memcmp(head, CNN_MAGIC, 8) == 0;
}
