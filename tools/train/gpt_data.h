/*
 * gpt_data.h - the GPT's text: the plain-text fortune files of Debian's
 * `fortunes` package (every file of the directory whose name does not end
 * in .dat or .u8, in name order, concatenated), a byte vocabulary (the
 * distinct bytes of the text, in byte order: token i is the i-th smallest
 * byte that occurs), a 90/10 split by position into training and
 * validation text, and batches of windows.
 */
#ifndef RUMUS_TRAIN_GPT_DATA_H
#define RUMUS_TRAIN_GPT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Debian's `fortunes` installs its files here (--data overrides). */
#define GPT_DEFAULT_DIR "/usr/share/games/fortunes"
/* Texts longer than this are refused (token ids are 32-bit positions). */
#define GPT_MAX_TEXT ((size_t)1 << 31)

typedef struct {
  size_t n;              /* vocabulary size, 1..256 */
  unsigned char byte[256]; /* token -> byte */
  int id[256];           /* byte -> token, -1 if not in the vocabulary */
} gpt_vocab;

typedef struct {
  unsigned char *text; /* the raw bytes */
  size_t len;
  size_t nfiles;
  int32_t *tok;        /* len tokens */
  size_t ntrain;       /* tok[0..ntrain) train, tok[ntrain..len) validation */
} gpt_text;

/*! gpt_text_load() : reads the files of dir (a directory: the fortune
 *  files as above; or a single file) into t.  @return RUMUS_OK,
 *  TRAIN_EIO (missing directory or file, read error), TRAIN_EFORMAT (no
 *  files, an empty text, over GPT_MAX_TEXT), RUMUS_ENOMEM, with err. */
int gpt_text_load(const char *dir, gpt_text *t, char *err, size_t errlen);
void gpt_text_free(gpt_text *t);

/*! gpt_vocab_build() : the distinct bytes of text. */
void gpt_vocab_build(gpt_vocab *v, const unsigned char *text, size_t len);
/*! gpt_vocab_from_bytes() : the vocabulary whose token i is bytes[i]
 *  (n distinct bytes); RUMUS_OK or TRAIN_EFORMAT (repeated or n of 0). */
int gpt_vocab_from_bytes(gpt_vocab *v, const unsigned char *bytes, size_t n);
/*! gpt_text_encode() : t->tok from the vocabulary and the 90/10 split;
 *  TRAIN_EFORMAT if a byte of the text is not in it, or if either part
 *  is shorter than context + 1 tokens, RUMUS_ENOMEM. */
int gpt_text_encode(gpt_text *t, const gpt_vocab *v, size_t context, char *err,
                    size_t errlen);

/*! gpt_unigram_entropy() : the entropy in nats of the byte frequencies
 *  of tokens tok[0..n) (vocabulary size V): the loss of the best model
 *  that ignores context. */
double gpt_unigram_entropy(const int32_t *tok, size_t n, size_t V);

/*! gpt_batch_random() : batch windows of context tokens at starts drawn
 *  uniformly (mlp_rng_below) from [0, n - context) of tok[0..n): x gets
 *  tok[s..s+T), y tok[s+1..s+T+1), window after window. */
void gpt_batch_random(const int32_t *tok, size_t n, size_t context, size_t batch,
                      mlp_rng *rng, int32_t *x, int32_t *y);
/*! gpt_batch_fixed() : window j (0 <= j < count) of count evenly spaced
 *  windows over tok[0..n): start floor(j (n - context - 1) / max(count -
 *  1, 1)); batch rows from window first on. */
void gpt_batch_fixed(const int32_t *tok, size_t n, size_t context, size_t batch,
                     size_t first, size_t count, int32_t *x, int32_t *y);

#endif /* RUMUS_TRAIN_GPT_DATA_H */
