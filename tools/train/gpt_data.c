/* gpt_data.c - see gpt_data.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "gpt_data.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mnist.h" /* TRAIN_EIO, train_fail */
#include "rumus.h"

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends the file at path to t->text. */
static int append_file(gpt_text *t, const char *path, char *err, size_t errlen) {
  unsigned char *buf = NULL;
  size_t n = 0;
  int st = train_read_file(path, GPT_MAX_TEXT, &buf, &n, err, errlen);
  if (st != RUMUS_OK) return st;
  if (t->len + n > GPT_MAX_TEXT) {
    free(buf);
    return train_fail(err, errlen, TRAIN_EFORMAT, "%s: the text passes %zu bytes", path,
                      GPT_MAX_TEXT);
  }
  unsigned char *grown = realloc(t->text, t->len + n + 1);
  if (!grown) {
    free(buf);
    return train_fail(err, errlen, RUMUS_ENOMEM, "out of memory reading %s", path);
  }
  t->text = grown;
  if (n) memcpy(t->text + t->len, buf, n);
  t->len += n;
  t->nfiles++;
  free(buf);
  return RUMUS_OK;
}

/* The fortune files of dir, sorted by name. */
static int list_dir(const char *dir, char ***names, size_t *count, char *err,
                    size_t errlen) {
  DIR *d = opendir(dir);
  if (!d)
    return train_fail(err, errlen, TRAIN_EIO,
                      "%s: %s (install Debian's fortunes package, or give --data DIR)",
                      dir, strerror(errno));
  size_t n = 0, cap = 0;
  char **v = NULL;
  int st = RUMUS_OK;
  struct dirent *e;
  while (st == RUMUS_OK && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || ends_with(e->d_name, ".dat") || ends_with(e->d_name, ".u8"))
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **g = realloc(v, cap * sizeof *g);
      if (!g) {
        st = train_fail(err, errlen, RUMUS_ENOMEM, "out of memory");
        break;
      }
      v = g;
    }
    if (!(v[n] = strdup(e->d_name))) st = train_fail(err, errlen, RUMUS_ENOMEM, "out of memory");
    else n++;
  }
  closedir(d);
  if (n) qsort(v, n, sizeof *v, by_name);
  *names = v;
  *count = n;
  return st;
}

int gpt_text_load(const char *dir, gpt_text *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return train_fail(err, errlen, TRAIN_EIO,
                      "%s: %s (install Debian's fortunes package, or give --data DIR)",
                      dir, strerror(errno));
  int st = RUMUS_OK;
  if (S_ISDIR(sb.st_mode)) {
    char **names = NULL;
    size_t n = 0;
    st = list_dir(dir, &names, &n, err, errlen);
    for (size_t i = 0; i < n; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, names[i]);
      struct stat fs;
      if (st == RUMUS_OK && stat(path, &fs) == 0 && S_ISREG(fs.st_mode))
        st = append_file(t, path, err, errlen);
      free(names[i]);
    }
    free(names);
  } else {
    st = append_file(t, dir, err, errlen);
  }
  if (st == RUMUS_OK && t->len == 0)
    st = train_fail(err, errlen, TRAIN_EFORMAT, "%s: no text (no fortune files, or empty)", dir);
  if (st != RUMUS_OK) gpt_text_free(t);
  return st;
}

void gpt_text_free(gpt_text *t) {
  free(t->text);
  free(t->tok);
  memset(t, 0, sizeof *t);
}

void gpt_vocab_build(gpt_vocab *v, const unsigned char *text, size_t len) {
  int seen[256] = {0};
  for (size_t i = 0; i < len; i++) seen[text[i]] = 1;
  v->n = 0;
  for (int b = 0; b < 256; b++) {
    v->id[b] = seen[b] ? (int)v->n : -1;
    if (seen[b]) v->byte[v->n++] = (unsigned char)b;
  }
}

int gpt_vocab_from_bytes(gpt_vocab *v, const unsigned char *bytes, size_t n) {
  if (n == 0 || n > 256) return TRAIN_EFORMAT;
  for (int b = 0; b < 256; b++) v->id[b] = -1;
  for (size_t i = 0; i < n; i++) {
    if (v->id[bytes[i]] >= 0) return TRAIN_EFORMAT;
    v->id[bytes[i]] = (int)i;
    v->byte[i] = bytes[i];
  }
  v->n = n;
  return RUMUS_OK;
}

int gpt_text_encode(gpt_text *t, const gpt_vocab *v, size_t context, char *err,
                    size_t errlen) {
  free(t->tok);
  t->tok = malloc((t->len ? t->len : 1) * sizeof *t->tok);
  if (!t->tok) return train_fail(err, errlen, RUMUS_ENOMEM, "out of memory for the tokens");
  for (size_t i = 0; i < t->len; i++) {
    int id = v->id[t->text[i]];
    if (id < 0)
      return train_fail(err, errlen, TRAIN_EFORMAT,
                        "byte 0x%02x at offset %zu of the text is not in the model's "
                        "vocabulary", t->text[i], i);
    t->tok[i] = id;
  }
  t->ntrain = t->len - t->len / 10;
  if (t->ntrain < context + 1 || t->len - t->ntrain < context + 1)
    return train_fail(err, errlen, TRAIN_EFORMAT,
                      "the text (%zu bytes) is too short for a 90/10 split with %zu + 1 "
                      "tokens in each part", t->len, context);
  return RUMUS_OK;
}

double gpt_unigram_entropy(const int32_t *tok, size_t n, size_t V) {
  double count[256] = {0};
  for (size_t i = 0; i < n; i++) count[tok[i]] += 1.0;
  double h = 0.0;
  for (size_t k = 0; k < V && k < 256; k++)
    if (count[k] > 0) h -= count[k] / (double)n * log(count[k] / (double)n);
  return h;
}

static void window(const int32_t *tok, size_t s, size_t T, int32_t *x, int32_t *y) {
  memcpy(x, tok + s, T * sizeof *x);
  memcpy(y, tok + s + 1, T * sizeof *y);
}

void gpt_batch_random(const int32_t *tok, size_t n, size_t context, size_t batch,
                      mlp_rng *rng, int32_t *x, int32_t *y) {
  for (size_t b = 0; b < batch; b++) {
    size_t s = mlp_rng_below(rng, (uint32_t)(n - context));
    window(tok, s, context, x + b * context, y + b * context);
  }
}

void gpt_batch_fixed(const int32_t *tok, size_t n, size_t context, size_t batch,
                     size_t first, size_t count, int32_t *x, int32_t *y) {
  size_t span = n - context - 1, div = count > 1 ? count - 1 : 1;
  for (size_t b = 0; b < batch; b++) {
    size_t j = (first + b) % count;
    size_t s = (size_t)((unsigned long long)j * span / div);
    window(tok, s, context, x + b * context, y + b * context);
  }
}
