/*
 * common.h - what rumus-train's models share: the seeded RNG and shuffle,
 * the epoch and evaluation loops over a data set, counting correct
 * predictions, and the little-endian, CRC-32-checked model files.
 *
 * The RNG and progress types keep the mlp_ names they had when the MLP
 * was the only model (the tests and the MLP's files use them); the CNN
 * (cnn.h) uses the same ones.
 */
#ifndef RUMUS_TRAIN_COMMON_H
#define RUMUS_TRAIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "mnist.h"

/* ---- Seeded random numbers (splitmix64) ------------------------------- */

typedef struct {
  uint64_t s;
} mlp_rng;

void mlp_rng_seed(mlp_rng *r, uint64_t seed);
uint64_t mlp_rng_next(mlp_rng *r);
/* Uniform in [0, n) without modulo bias; n >= 1. */
uint32_t mlp_rng_below(mlp_rng *r, uint32_t n);
/* Uniform float in [lo, hi), from the top 24 bits of one draw. */
float mlp_rng_uniform(mlp_rng *r, float lo, float hi);
/* Fisher-Yates shuffle of idx[0..n). */
void mlp_shuffle(mlp_rng *r, uint32_t *idx, size_t n);
/* The shuffle RNG of a run is seeded with seed ^ MLP_SHUFFLE_SALT, so the
 * data order does not depend on the number of parameters drawn before. */
#define MLP_SHUFFLE_SALT 0x53485546464c4555ull

/* ---- Epochs and evaluation -------------------------------------------- */

typedef struct {
  size_t step, nsteps; /* batches done in this epoch, batches per epoch */
  size_t seen;         /* samples done in this epoch */
  double loss_sum;     /* sum over batches of mean loss x batch rows */
  size_t correct;      /* correct predictions among the samples seen */
} mlp_progress;

/* Called after every step. */
typedef void (*mlp_progress_fn)(void *user, const mlp_progress *p);

/* A model as the loops see it: one training step on n rows (loss and
 * correct may be NULL), and the logits [n, MNIST_CLASSES] of n rows in
 * evaluation mode.  Both return a rumus status. */
typedef int (*train_step_fn)(void *model, const float *x, const int32_t *y,
                             size_t n, double *loss, size_t *correct);
typedef int (*train_logits_fn)(void *model, const float *x, size_t n,
                               float *logits);

/* A training step's gradient hook: mlp_train_step() and cnn_train_step()
 * call it between the backward pass and the update, with the step's
 * gradients enqueued on the device (dist.c averages them over the MPI
 * ranks there).  A status other than RUMUS_OK stops the step, without the
 * update, with the message in err. */
typedef int (*train_grad_hook)(void *user, char *err, size_t errlen);

/* Host staging of one batch: batch rows of MNIST_PIXELS inputs, labels,
 * logits and indices, and the input transform (mnist_batch's mean, std). */
typedef struct {
  size_t batch;
  float mean, std;
  float *x, *logits;
  int32_t *y;
  uint32_t *idx;
} train_batcher;

/*! train_batcher_alloc() / _free() : the buffers for `batch` rows.
 *  @return RUMUS_OK or RUMUS_ENOMEM (nothing left allocated). */
int train_batcher_alloc(train_batcher *b, size_t batch);
void train_batcher_free(train_batcher *b);

/*! train_count_correct() : rows of logits [n, classes] whose first largest
 *  logit is at the label; a row with a NaN counts as wrong. */
size_t train_count_correct(const float *logits, const int32_t *y, size_t n,
                           size_t classes);

/*! train_epoch() : one pass over the first `count` images of set (all if
 *  count is 0 or larger) in batches of b->batch rows, shuffled with rng
 *  (a fresh permutation of 0..count-1 each call); the last batch may be
 *  smaller.  fn (may be NULL) is called after every step; *out (may be
 *  NULL) receives the epoch's totals.  The set must be non-empty with at
 *  most UINT32_MAX images.  @return RUMUS_OK, RUMUS_ENOMEM (the
 *  permutation) or the step's status. */
int train_epoch(const train_batcher *b, void *model, train_step_fn step,
                const mnist_set *set, size_t count, mlp_rng *rng,
                mlp_progress_fn fn, void *user, mlp_progress *out);

/*! train_evaluate() : the number of the first `count` images of set (all
 *  if count is 0 or larger) whose logits' argmax equals the label, in
 *  batches of b->batch rows.  @return RUMUS_OK or the model's status. */
int train_evaluate(const train_batcher *b, void *model, train_logits_fn logits,
                   const mnist_set *set, size_t count, size_t *correct);

/*! train_rumus_fail() : "WHAT: RUMUS_E...: <the context's message>" (or
 *  rumus_strerror(st) when the context has none) into err; returns st.
 *  The message of a failed rumus call. */
struct rumus_ctx;
int train_rumus_fail(char *err, size_t errlen, struct rumus_ctx *ctx, int st,
                     const char *what);

/* ---- Model files (little-endian, CRC-32 at the end) -------------------- */

void train_put32(unsigned char *p, uint32_t v);
uint32_t train_get32(const unsigned char *p);
void train_put_floats(unsigned char *p, const float *x, size_t n);
void train_get_floats(float *x, const unsigned char *p, size_t n);
/* zlib's crc32 of n bytes (any n). */
uint32_t train_crc32(const unsigned char *p, size_t n);
/* The CRC-32 in the last 4 bytes of a model file's total bytes (buf)
 * against its contents: RUMUS_OK, or TRAIN_EFORMAT naming path. */
int train_check_crc(const unsigned char *buf, size_t total, const char *path,
                    char *err, size_t errlen);

/*! train_write_file() : writes buf[0..n) to PATH.tmp, then renames it to
 *  path (no partial file under path).  @return RUMUS_OK, RUMUS_ENOMEM,
 *  TRAIN_EIO with the message in err. */
int train_write_file(const char *path, const unsigned char *buf, size_t n,
                     char *err, size_t errlen);

/*! train_read_file() : reads the whole file into *buf (malloc'ed, free()
 *  it), refusing files over max bytes.  @return RUMUS_OK, TRAIN_EIO
 *  (cannot open or read), TRAIN_EFORMAT (over max), RUMUS_ENOMEM. */
int train_read_file(const char *path, size_t max, unsigned char **buf,
                    size_t *n, char *err, size_t errlen);

#endif /* RUMUS_TRAIN_COMMON_H */
