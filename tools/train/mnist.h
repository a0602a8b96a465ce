/*
 * mnist.h - reads (Fashion-)MNIST from gzip-compressed IDX files with zlib.
 *
 * IDX layout (big-endian): a 4-byte magic 0x00 0x00 TYPE NDIM (TYPE 0x08 =
 * unsigned byte), NDIM 32-bit extents, then the data in row-major order.
 *   images: magic 0x00000803, extents [count, 28, 28], count * 784 bytes
 *   labels: magic 0x00000801, extents [count], count bytes, each 0..9
 * The files may also be stored uncompressed (zlib reads them as is).
 *
 * Every function returns a status: RUMUS_OK, TRAIN_EIO (the file
 * cannot be opened or read), TRAIN_EFORMAT (bad magic, wrong extents,
 * truncated or corrupt data, labels out of range, image/label count
 * mismatch, trailing bytes), RUMUS_ENOMEM or RUMUS_EINVAL (bad arguments).
 * On failure, err (if not NULL) receives a message that starts with the
 * file's path and says what is wrong, and the output is left empty.
 */
#ifndef RUMUS_TRAIN_MNIST_H
#define RUMUS_TRAIN_MNIST_H

#include <stddef.h>
#include <stdint.h>

/* rumus-train's own statuses, beside the library's RUMUS_E* codes that its
 * functions also return: files are the tool's business, not the library's.
 * They keep the values the library once gave them as RUMUS_EIO and
 * RUMUS_EFORMAT, which it retired and never gives to another code, so no
 * library status can be mistaken for them. */
enum {
  TRAIN_EIO = -70,    /* a file could not be read or written */
  TRAIN_EFORMAT = -71 /* a file is malformed */
};

/*! train_err_name() : "TRAIN_EIO" or "TRAIN_EFORMAT" for those, else
 *  rumus_err_name(status). */
const char *train_err_name(int status);

/*! train_fail() : formats a message into err (when err and errlen are not
 *  0) and returns code; the error reporting of the training code. */
int train_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define MNIST_ROWS 28
#define MNIST_COLS 28
#define MNIST_PIXELS (MNIST_ROWS * MNIST_COLS)
#define MNIST_CLASSES 10
/* Larger counts in a header are taken as corruption (EMNIST has 814k). */
#define MNIST_MAX_COUNT 10000000u

/* The directory Debian's dataset-fashion-mnist installs. */
#define MNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
/* The environment variable that overrides it (--data overrides both). */
#define MNIST_ENV_DIR "RUMUS_FASHION_MNIST"

typedef struct {
  size_t count;    /* number of images and labels */
  uint8_t *images; /* count x 784 pixels, 0..255, row-major */
  uint8_t *labels; /* count labels, 0..9 */
} mnist_set;

/*! mnist_read_images() : reads an IDX image file of [count, 28, 28] bytes.
 *  limit > 0 reads only the first min(limit, count) images (the rest of
 *  the file is not checked); limit 0 reads all and rejects trailing bytes.
 *  *images is malloc'ed (free() it); *count receives the number read. */
int mnist_read_images(const char *path, size_t limit, uint8_t **images,
                      size_t *count, char *err, size_t errlen);

/*! mnist_read_labels() : reads an IDX label file of [count] bytes, each in
 *  0..9.  limit as for mnist_read_images(). */
int mnist_read_labels(const char *path, size_t limit, uint8_t **labels,
                      size_t *count, char *err, size_t errlen);

/*! mnist_load() : reads DIR/SPLIT-images-idx3-ubyte.gz and
 *  DIR/SPLIT-labels-idx1-ubyte.gz (SPLIT is "train" or "t10k") and checks
 *  that their counts agree (with limit > 0: that both files hold at least
 *  the images asked for, i.e. the same number was read from each). */
int mnist_load(const char *dir, const char *split, size_t limit,
               mnist_set *out, char *err, size_t errlen);

/*! mnist_free() : frees the set's arrays and zeroes it (NULL is a no-op). */
void mnist_free(mnist_set *set);

/*! mnist_data_dir() : the directory to read: dir if not NULL, else
 *  $RUMUS_FASHION_MNIST if set and not empty, else MNIST_DEFAULT_DIR. */
const char *mnist_data_dir(const char *dir);

/*! mnist_pixel_stats() : mean and standard deviation (population) of
 *  every pixel / 255 of the set (Fashion-MNIST's training set: 0.2860 and
 *  0.3530). */
void mnist_pixel_stats(const mnist_set *set, double *mean, double *std);

/*! mnist_batch() : the inputs and targets of a batch: x[i] = the image
 *  idx[i] as n x 784 floats (pixel / 255 - mean) / std (mean 0 and std 1
 *  give pixel / 255 exactly, in [0, 1]); y[i] = its label as int32. */
void mnist_batch(const mnist_set *set, const uint32_t *idx, size_t n,
                 float mean, float std, float *x, int32_t *y);

#endif /* RUMUS_TRAIN_MNIST_H */
