/* common.c - see common.h. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "rumus.h"

/* ---- RNG -------------------------------------------------------------- */

void mlp_rng_seed(mlp_rng *r, uint64_t seed) { r->s = seed; }

uint64_t mlp_rng_next(mlp_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint32_t mlp_rng_below(mlp_rng *r, uint32_t n) {
  /* Lemire's multiply-shift with rejection of the biased low products. */
  uint64_t prod = (mlp_rng_next(r) >> 32) * (uint64_t)n;
  uint32_t low = (uint32_t)prod;
  if (low < n) {
    uint32_t threshold = (uint32_t)(-n) % n;
    while (low < threshold) {
      prod = (mlp_rng_next(r) >> 32) * (uint64_t)n;
      low = (uint32_t)prod;
    }
  }
  return (uint32_t)(prod >> 32);
}

float mlp_rng_uniform(mlp_rng *r, float lo, float hi) {
  double u = (double)(mlp_rng_next(r) >> 40) * (1.0 / 16777216.0);
  return (float)(lo + (hi - lo) * u);
}

void mlp_shuffle(mlp_rng *r, uint32_t *idx, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = mlp_rng_below(r, (uint32_t)i);
    uint32_t t = idx[i - 1];
    idx[i - 1] = idx[j];
    idx[j] = t;
  }
}

/* ---- Epochs and evaluation -------------------------------------------- */

int train_batcher_alloc(train_batcher *b, size_t batch) {
  memset(b, 0, sizeof *b);
  b->batch = batch;
  b->std = 1.0f;
  b->x = malloc(batch * MNIST_PIXELS * sizeof *b->x);
  b->y = malloc(batch * sizeof *b->y);
  b->logits = malloc(batch * MNIST_CLASSES * sizeof *b->logits);
  b->idx = malloc(batch * sizeof *b->idx);
  if (b->x && b->y && b->logits && b->idx) return RUMUS_OK;
  train_batcher_free(b);
  return RUMUS_ENOMEM;
}

void train_batcher_free(train_batcher *b) {
  free(b->x);
  free(b->y);
  free(b->logits);
  free(b->idx);
  memset(b, 0, sizeof *b);
}

size_t train_count_correct(const float *logits, const int32_t *y, size_t n,
                           size_t classes) {
  size_t ok = 0;
  for (size_t r = 0; r < n; r++) {
    const float *row = logits + r * classes;
    size_t best = 0;
    int nan = isnan(row[0]);
    for (size_t c = 1; c < classes; c++) {
      if (isnan(row[c])) nan = 1;
      if (row[c] > row[best]) best = c;
    }
    if (!nan && (int32_t)best == y[r]) ok++;
  }
  return ok;
}

int train_epoch(const train_batcher *b, void *model, train_step_fn step,
                const mnist_set *set, size_t count, mlp_rng *rng,
                mlp_progress_fn fn, void *user, mlp_progress *out) {
  if (count == 0 || count > set->count) count = set->count;
  uint32_t *perm = malloc(count * sizeof *perm);
  if (!perm) return RUMUS_ENOMEM;
  for (size_t i = 0; i < count; i++) perm[i] = (uint32_t)i;
  mlp_shuffle(rng, perm, count);
  mlp_progress p = {0, (count + b->batch - 1) / b->batch, 0, 0.0, 0};
  int st = RUMUS_OK;
  for (size_t start = 0; start < count; start += b->batch) {
    size_t n = count - start < b->batch ? count - start : b->batch;
    mnist_batch(set, perm + start, n, b->mean, b->std, b->x, b->y);
    double loss = 0.0;
    size_t ok = 0;
    st = step(model, b->x, b->y, n, &loss, &ok);
    if (st != RUMUS_OK) break;
    p.step++;
    p.seen += n;
    p.loss_sum += loss * (double)n;
    p.correct += ok;
    if (fn) fn(user, &p);
  }
  free(perm);
  if (out) *out = p;
  return st;
}

int train_evaluate(const train_batcher *b, void *model, train_logits_fn logits,
                   const mnist_set *set, size_t count, size_t *correct) {
  if (count == 0 || count > set->count) count = set->count;
  size_t ok = 0;
  for (size_t start = 0; start < count; start += b->batch) {
    size_t n = count - start < b->batch ? count - start : b->batch;
    for (size_t i = 0; i < n; i++) b->idx[i] = (uint32_t)(start + i);
    mnist_batch(set, b->idx, n, b->mean, b->std, b->x, b->y);
    int st = logits(model, b->x, n, b->logits);
    if (st != RUMUS_OK) return st;
    ok += train_count_correct(b->logits, b->y, n, MNIST_CLASSES);
  }
  *correct = ok;
  return RUMUS_OK;
}

int train_rumus_fail(char *err, size_t errlen, struct rumus_ctx *ctx, int st,
                     const char *what) {
  const char *detail = rumus_ctx_errmsg(ctx);
  return train_fail(err, errlen, st, "%s: %s: %s", what, rumus_err_name(st),
                    detail && *detail ? detail : rumus_strerror(st));
}

/* ---- Model files ------------------------------------------------------ */

void train_put32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

uint32_t train_get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

void train_put_floats(unsigned char *p, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &x[i], 4);
    train_put32(p + 4 * i, u);
  }
}

void train_get_floats(float *x, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u = train_get32(p + 4 * i);
    memcpy(&x[i], &u, 4);
  }
}

uint32_t train_crc32(const unsigned char *p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return (uint32_t)c;
}

int train_check_crc(const unsigned char *buf, size_t total, const char *path,
                    char *err, size_t errlen) {
  const uint32_t want = train_get32(buf + total - 4),
                 have = train_crc32(buf, total - 4);
  if (want != have)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "%s: checksum mismatch (stored CRC-32 0x%08x, contents "
                      "give 0x%08x): the file is corrupt",
                      path, (unsigned)want, (unsigned)have);
  return RUMUS_OK;
}

int train_write_file(const char *path, const unsigned char *buf, size_t total,
                     char *err, size_t errlen) {
  size_t tlen = strlen(path) + 5;
  char *tmp = malloc(tlen);
  if (!tmp) return train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory", path);
  snprintf(tmp, tlen, "%s.tmp", path);
  int st = RUMUS_OK;
  errno = 0;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    st = train_fail(err, errlen, TRAIN_EIO, "%s: cannot create: %s", tmp,
                    strerror(errno));
  } else {
    size_t wrote = fwrite(buf, 1, total, f);
    int e1 = errno;
    int closed = fclose(f);
    if (wrote != total || closed != 0) {
      st = train_fail(err, errlen, TRAIN_EIO, "%s: write failed: %s", tmp,
                      strerror(wrote != total ? e1 : errno));
      remove(tmp);
    } else if (rename(tmp, path) != 0) {
      st = train_fail(err, errlen, TRAIN_EIO, "%s: cannot rename %s to it: %s",
                      path, tmp, strerror(errno));
      remove(tmp);
    }
  }
  free(tmp);
  return st;
}

int train_read_file(const char *path, size_t max, unsigned char **buf,
                    size_t *n, char *err, size_t errlen) {
  *buf = NULL;
  *n = 0;
  errno = 0;
  FILE *f = fopen(path, "rb");
  if (!f)
    return train_fail(err, errlen, TRAIN_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  size_t cap = 1 << 16, len = 0;
  unsigned char *p = malloc(cap);
  int st = p ? RUMUS_OK : RUMUS_ENOMEM;
  while (st == RUMUS_OK) {
    if (len == cap) {
      unsigned char *q = cap > max ? NULL : realloc(p, cap * 2);
      if (cap > max) {
        st = train_fail(err, errlen, TRAIN_EFORMAT,
                        "%s: implausible model file: more than %zu bytes", path, max);
        break;
      }
      if (!q) {
        st = RUMUS_ENOMEM;
        break;
      }
      p = q;
      cap *= 2;
    }
    size_t got = fread(p + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  if (st == RUMUS_OK && ferror(f))
    st = train_fail(err, errlen, TRAIN_EIO, "%s: read error: %s", path, strerror(errno));
  else if (st == RUMUS_OK && len > max)
    st = train_fail(err, errlen, TRAIN_EFORMAT,
                    "%s: implausible model file: more than %zu bytes", path, max);
  if (st == RUMUS_ENOMEM) train_fail(err, errlen, st, "%s: out of memory", path);
  fclose(f);
  if (st != RUMUS_OK) {
    free(p);
    return st;
  }
  *buf = p;
  *n = len;
  return RUMUS_OK;
}
