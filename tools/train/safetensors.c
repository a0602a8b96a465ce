/* safetensors.c - see safetensors.h. */
#include "safetensors.h"

#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ---- dtypes ------------------------------------------------------------- */

static const struct {
  const char *name;
  rumus_dtype dtype;
} DTYPES[] = {{"F32", RUMUS_F32},
              {"F16", RUMUS_F16},
              {"BF16", RUMUS_BF16},
              {"I32", RUMUS_I32},
              {"I8", RUMUS_I8},
              {"I64", ST_I64}};
#define NDTYPES (sizeof DTYPES / sizeof DTYPES[0])

static const char *dtype_name(rumus_dtype d) {
  for (size_t i = 0; i < NDTYPES; i++)
    if (DTYPES[i].dtype == d) return DTYPES[i].name;
  return NULL;
}

static int dtype_of(const char *name, rumus_dtype *out) {
  for (size_t i = 0; i < NDTYPES; i++)
    if (strcmp(DTYPES[i].name, name) == 0) {
      *out = DTYPES[i].dtype;
      return 0;
    }
  return -1;
}

size_t st_elem_size(rumus_dtype dtype) {
  return dtype == ST_I64 ? 8 : rumus_dtype_size(dtype);
}

size_t st_numel(const st_tensor *t) {
  size_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* n * elem without overflow, or SIZE_MAX. */
static size_t mul_sat(size_t n, size_t elem) {
  return elem && n > SIZE_MAX / elem ? SIZE_MAX : n * elem;
}

/* ---- Writing -------------------------------------------------------------- */

/* The header's JSON: every tensor with its offsets, then the metadata. */
static json_object *header_json(const st_tensor *t, size_t n,
                                const char *const *meta, size_t nmeta) {
  json_object *root = json_object_new_object();
  if (!root) return NULL;
  if (nmeta) {
    json_object *m = json_object_new_object();
    for (size_t i = 0; m && i < nmeta; i++)
      json_object_object_add(m, meta[2 * i],
                             json_object_new_string(meta[2 * i + 1]));
    json_object_object_add(root, "__metadata__", m);
  }
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_new_object(), *shape = json_object_new_array();
    json_object *offs = json_object_new_array();
    json_object_object_add(e, "dtype", json_object_new_string(dtype_name(t[i].dtype)));
    for (int d = 0; d < t[i].ndim; d++)
      json_object_array_add(shape, json_object_new_uint64(t[i].shape[d]));
    json_object_object_add(e, "shape", shape);
    json_object_array_add(offs, json_object_new_uint64(at));
    json_object_array_add(offs, json_object_new_uint64(at + t[i].nbytes));
    json_object_object_add(e, "data_offsets", offs);
    json_object_object_add(root, t[i].name, e);
    at += t[i].nbytes;
  }
  return root;
}

static int check_for_save(const st_tensor *t, size_t n, char *err,
                          size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    if (!t[i].name || !*t[i].name || strcmp(t[i].name, "__metadata__") == 0)
      return train_fail(err, errlen, RUMUS_EINVAL, "st_save: tensor %zu: bad name", i);
    if (!dtype_name(t[i].dtype))
      return train_fail(err, errlen, RUMUS_EINVAL, "st_save: %s: unsupported dtype",
                        t[i].name);
    if (t[i].ndim < 0 || t[i].ndim > RUMUS_MAX_DIMS ||
        t[i].nbytes != st_numel(&t[i]) * st_elem_size(t[i].dtype) ||
        (t[i].nbytes && !t[i].data))
      return train_fail(err, errlen, RUMUS_EINVAL,
                        "st_save: %s: shape and byte count disagree", t[i].name);
    for (size_t j = 0; j < i; j++)
      if (strcmp(t[i].name, t[j].name) == 0)
        return train_fail(err, errlen, RUMUS_EINVAL, "st_save: %s: duplicate name",
                          t[i].name);
  }
  return RUMUS_OK;
}

/* The file's bytes: the 8-byte length, the header padded with spaces to a
 * multiple of 8, then the data (malloc'ed; NULL when out of memory). */
static unsigned char *file_bytes(const char *hdr, const st_tensor *t, size_t n,
                                 size_t *total) {
  const size_t len = strlen(hdr), padded = (len + 7) / 8 * 8;
  size_t data = 0;
  for (size_t i = 0; i < n; i++) data += t[i].nbytes;
  unsigned char *buf = malloc(8 + padded + data);
  if (!buf) return NULL;
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(buf + 8, hdr, len);
  memset(buf + 8 + len, ' ', padded - len);
  unsigned char *at = buf + 8 + padded;
  for (size_t i = 0; i < n; i++) {
    if (t[i].nbytes) memcpy(at, t[i].data, t[i].nbytes);
    at += t[i].nbytes;
  }
  *total = 8 + padded + data;
  return buf;
}

int st_save(const char *path, const st_tensor *t, size_t n,
            const char *const *meta, size_t nmeta, char *err, size_t errlen) {
  if (!path || (n && !t) || (nmeta && !meta))
    return train_fail(err, errlen, RUMUS_EINVAL, "st_save: NULL argument");
  int st = check_for_save(t, n, err, errlen);
  if (st != RUMUS_OK) return st;
  json_object *root = header_json(t, n, meta, nmeta);
  const char *hdr = root ? json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN) : NULL;
  size_t total = 0;
  unsigned char *buf = hdr ? file_bytes(hdr, t, n, &total) : NULL;
  json_object_put(root);
  if (!buf) return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  st = train_write_file(path, buf, total, err, errlen);
  free(buf);
  return st;
}

/* ---- Reading -------------------------------------------------------------- */

/* A non-negative JSON integer, or -1. */
static int get_u64(json_object *o, size_t *out) {
  if (!o || !json_object_is_type(o, json_type_int) || json_object_get_int64(o) < 0)
    return -1;
  uint64_t v = json_object_get_uint64(o);
  if (v > SIZE_MAX) return -1;
  *out = (size_t)v;
  return 0;
}

/* One tensor entry of the header into t (data offsets into off[2]). */
static int parse_entry(const char *path, const char *name, json_object *e,
                       st_tensor *t, size_t off[2], char *err, size_t errlen) {
  json_object *dt, *shape, *offs;
  if (!json_object_is_type(e, json_type_object) ||
      !json_object_object_get_ex(e, "dtype", &dt) ||
      !json_object_object_get_ex(e, "shape", &shape) ||
      !json_object_object_get_ex(e, "data_offsets", &offs) ||
      !json_object_is_type(dt, json_type_string) ||
      !json_object_is_type(shape, json_type_array) ||
      !json_object_is_type(offs, json_type_array))
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: %s: expected an object with dtype, shape and data_offsets",
                      path, name);
  t->name = name;
  if (dtype_of(json_object_get_string(dt), &t->dtype) != 0)
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: %s: unsupported dtype %s", path,
                      name, json_object_get_string(dt));
  size_t nd = json_object_array_length(shape);
  if (nd > RUMUS_MAX_DIMS)
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: %s: %zu dimensions (at most %d)",
                      path, name, nd, RUMUS_MAX_DIMS);
  t->ndim = (int)nd;
  size_t numel = 1;
  for (size_t d = 0; d < nd; d++) {
    if (get_u64(json_object_array_get_idx(shape, d), &t->shape[d]) != 0)
      return train_fail(err, errlen, TRAIN_EFORMAT, "%s: %s: bad extent %zu", path,
                        name, d);
    numel = mul_sat(numel, t->shape[d]);
  }
  if (json_object_array_length(offs) != 2 ||
      get_u64(json_object_array_get_idx(offs, 0), &off[0]) != 0 ||
      get_u64(json_object_array_get_idx(offs, 1), &off[1]) != 0 || off[1] < off[0])
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: %s: bad data_offsets", path, name);
  t->nbytes = off[1] - off[0];
  if (mul_sat(numel, st_elem_size(t->dtype)) != t->nbytes)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: %s: %zu bytes of data for a shape of %zu %s elements", path,
                      name, t->nbytes, numel, json_object_get_string(dt));
  return RUMUS_OK;
}

static int parse_meta(const char *path, json_object *m, st_file *f, char *err,
                      size_t errlen) {
  if (!json_object_is_type(m, json_type_object))
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: __metadata__ is not an object", path);
  size_t n = (size_t)json_object_object_length(m);
  f->meta = calloc(2 * n + 1, sizeof *f->meta);
  if (!f->meta) return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  json_object_object_foreach(m, key, val) {
    if (!json_object_is_type(val, json_type_string))
      return train_fail(err, errlen, TRAIN_EFORMAT, "%s: __metadata__ %s: not a string",
                        path, key);
    char **kv = &f->meta[2 * f->nmeta++];
    kv[0] = strdup(key);
    kv[1] = strdup(json_object_get_string(val));
    if (!kv[0] || !kv[1])
      return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  }
  return RUMUS_OK;
}

typedef struct {
  st_tensor t;
  size_t off[2];
} entry;

static int by_offset(const void *a, const void *b) {
  const entry *x = a, *y = b;
  return x->off[0] < y->off[0] ? -1 : x->off[0] > y->off[0];
}

/* Sorts the entries by offset and checks that they tile the data. */
static int check_tiling(const char *path, entry *e, size_t n, size_t data,
                        char *err, size_t errlen) {
  qsort(e, n, sizeof *e, by_offset);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (e[i].off[0] < at)
      return train_fail(err, errlen, TRAIN_EFORMAT,
                        "%s: %s overlaps %s (bytes %zu..%zu)", path, e[i].t.name,
                        e[i - 1].t.name, e[i].off[0], at);
    if (e[i].off[0] > at)
      return train_fail(err, errlen, TRAIN_EFORMAT,
                        "%s: a gap of %zu bytes before %s", path, e[i].off[0] - at,
                        e[i].t.name);
    at = e[i].off[1];
  }
  if (at != data)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: the tensors cover %zu bytes of data, the file has %zu%s",
                      path, at, data, at > data ? " (truncated?)" : "");
  return RUMUS_OK;
}

/* The checked entries as f's tensors: names copied (the JSON goes), data
 * pointing into the file's buffer. */
static int own_entries(const char *path, st_file *f, const entry *e, size_t n,
                       size_t hlen, char *err, size_t errlen) {
  f->t = calloc(n + 1, sizeof *f->t);
  if (!f->t) return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  for (size_t i = 0; i < n; i++) {
    f->t[i] = e[i].t;
    f->t[i].name = strdup(e[i].t.name);
    f->t[i].data = f->buf + 8 + hlen + e[i].off[0];
    f->n = i + 1;
    if (!f->t[i].name) return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  }
  return RUMUS_OK;
}

/* The header JSON of f->buf (length hlen) into f's tensors and metadata. */
static int parse_header(const char *path, st_file *f, size_t hlen, char *err,
                        size_t errlen) {
  json_tokener *tok = json_tokener_new();
  if (!tok) return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  const char *text = (const char *)f->buf + 8;
  json_object *root = json_tokener_parse_ex(tok, text, (int)hlen);
  size_t end = root ? json_tokener_get_parse_end(tok) : 0;
  json_tokener_free(tok);
  while (root && end < hlen && text[end] == ' ') end++;
  int st = RUMUS_OK;
  if (!root || end != hlen || !json_object_is_type(root, json_type_object)) {
    json_object_put(root);
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: the header is not one JSON object", path);
  }
  size_t n = (size_t)json_object_object_length(root);
  entry *e = calloc(n + 1, sizeof *e);
  if (!e) st = train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  size_t k = 0;
  json_object_object_foreach(root, key, val) {
    if (st != RUMUS_OK) break;
    if (strcmp(key, "__metadata__") == 0)
      st = parse_meta(path, val, f, err, errlen);
    else
      st = parse_entry(path, key, val, &e[k].t, e[k].off, err, errlen), k++;
  }
  if (st == RUMUS_OK) st = check_tiling(path, e, k, f->size - 8 - hlen, err, errlen);
  if (st == RUMUS_OK) st = own_entries(path, f, e, k, hlen, err, errlen);
  json_object_put(root);
  free(e);
  return st;
}

/* The whole file into f->buf; its length field into *hlen, checked. */
static int read_file(const char *path, st_file *f, size_t *hlen, char *err,
                     size_t errlen) {
  int st = train_read_file(path, SIZE_MAX / 2, &f->buf, &f->size, err, errlen);
  if (st != RUMUS_OK) return st;
  if (f->size < 8)
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: %zu bytes: too short for a header",
                      path, f->size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | f->buf[i];
  if (n > ST_MAX_HEADER || n > f->size - 8)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: header length %llu does not fit the file's %zu bytes", path,
                      (unsigned long long)n, f->size);
  *hlen = (size_t)n;
  return RUMUS_OK;
}

int st_load(const char *path, st_file *f, char *err, size_t errlen) {
  if (!path || !f) return train_fail(err, errlen, RUMUS_EINVAL, "st_load: NULL argument");
  memset(f, 0, sizeof *f);
  size_t hlen = 0;
  int st = read_file(path, f, &hlen, err, errlen);
  if (st == RUMUS_OK) st = parse_header(path, f, hlen, err, errlen);
  if (st != RUMUS_OK) st_free(f);
  return st;
}

const st_tensor *st_get(const st_file *f, const char *name) {
  for (size_t i = 0; i < f->n; i++)
    if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
  return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
  for (size_t i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
  return NULL;
}

int st_take(const char *path, const st_file *f, const char *name, int ndim,
            const size_t *shape, float *dst, char *err, size_t errlen) {
  const st_tensor *t = st_get(f, name);
  if (!t) return train_fail(err, errlen, TRAIN_EFORMAT, "%s: no tensor %s", path, name);
  int same = t->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
  if (!same || (t->dtype != RUMUS_F32 && t->dtype != RUMUS_F16 && t->dtype != RUMUS_BF16))
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: %s has another shape or a non-floating type than the "
                      "model needs", path, name);
  st_to_f32(t, dst);
  for (size_t i = 0; i < st_numel(t); i++)
    if (!isfinite(dst[i]))
      return train_fail(err, errlen, TRAIN_EFORMAT, "%s: %s[%zu] is not finite", path,
                        name, i);
  return RUMUS_OK;
}

void st_to_f32(const st_tensor *t, float *dst) {
  const unsigned char *p = t->data;
  const size_t n = st_numel(t);
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    int32_t v;
    switch ((int)t->dtype) {
      case RUMUS_F16:
        memcpy(&h, p + 2 * i, 2);
        dst[i] = rumus_f16_to_f32(h);
        break;
      case RUMUS_BF16:
        memcpy(&h, p + 2 * i, 2);
        dst[i] = rumus_bf16_to_f32(h);
        break;
      case RUMUS_I32:
        memcpy(&v, p + 4 * i, 4);
        dst[i] = (float)v;
        break;
      case RUMUS_I8:
        dst[i] = (float)(int8_t)p[i];
        break;
      case ST_I64: {
        int64_t w;
        memcpy(&w, p + 8 * i, 8);
        dst[i] = (float)w;
        break;
      }
      default:
        memcpy(&dst[i], p + 4 * i, 4);
    }
  }
}

void st_free(st_file *f) {
  if (!f) return;
  for (size_t i = 0; i < f->n; i++) free((char *)f->t[i].name);
  for (size_t i = 0; i < 2 * f->nmeta; i++) free(f->meta[i]);
  free(f->meta);
  free(f->t);
  free(f->buf);
  memset(f, 0, sizeof *f);
}
