/*
 * safetensors.h - reading and writing safetensors files, the checkpoint
 * format of the Rust framework rumus and of the Python ecosystem
 * (https://github.com/huggingface/safetensors, format 0.x):
 *
 *   8 bytes   N, the header's length, little-endian unsigned
 *   N bytes   a JSON object (parsed with json-c): for each tensor
 *             "name": {"dtype": "F32", "shape": [2, 3],
 *                      "data_offsets": [begin, end]}
 *             and an optional "__metadata__": {"key": "value", ...} of
 *             strings; the writer pads the header with spaces to a
 *             multiple of 8 bytes
 *   the data  every tensor's bytes, row-major, little-endian, at
 *             [begin, end) from the data's start
 *
 * The reader accepts a file only when the header is a JSON object of those
 * entries, each dtype is one rumus stores (F32, F16, BF16, I32, I8) or I64, each
 * shape has at most RUMUS_MAX_DIMS non-negative extents, each tensor's
 * bytes are its element count times the dtype's size, and the tensors'
 * ranges cover the data exactly, without overlap or gap (as the format's
 * reference reader requires).  Anything else is TRAIN_EFORMAT with a
 * message naming the file, the tensor and what is wrong.
 */
#ifndef RUMUS_TRAIN_SAFETENSORS_H
#define RUMUS_TRAIN_SAFETENSORS_H

#include <stddef.h>

#include "mnist.h" /* TRAIN_EIO, TRAIN_EFORMAT, train_fail() */
#include "rumus.h"

/* The dtype of PyTorch's int64 tensors (BatchNorm's num_batches_tracked),
 * which the reader accepts beside rumus's own types. */
#define ST_I64 ((rumus_dtype)64)

/* The largest header the reader takes (the reference reader's limit). */
#define ST_MAX_HEADER ((size_t)100 << 20)

typedef struct {
  const char *name;
  rumus_dtype dtype;
  int ndim;
  size_t shape[RUMUS_MAX_DIMS];
  const void *data; /* nbytes bytes; read: inside the file's buffer, and
                     * aligned only to a byte */
  size_t nbytes;
} st_tensor;

typedef struct {
  unsigned char *buf; /* the whole file */
  size_t size;
  st_tensor *t;       /* in the order of their data */
  size_t n;
  char **meta;        /* nmeta (key, value) pairs: meta[2i], meta[2i+1] */
  size_t nmeta;
} st_file;

/*! st_save() : writes the n tensors (in that order) and the metadata
 *  meta[0..2*nmeta) as (key, value) pairs to PATH.tmp, then renames it to
 *  PATH.  Names must be distinct and not "__metadata__".
 *  @return RUMUS_OK, RUMUS_EINVAL (a bad argument, a duplicate name or an
 *  unsupported dtype), RUMUS_ENOMEM, TRAIN_EIO, with the message in err. */
int st_save(const char *path, const st_tensor *t, size_t n,
            const char *const *meta, size_t nmeta, char *err, size_t errlen);

/*! st_load() : reads and checks the file at PATH into f (st_free() it).
 *  @return RUMUS_OK, TRAIN_EIO, TRAIN_EFORMAT, RUMUS_ENOMEM, with the
 *  message in err; on failure f holds nothing. */
int st_load(const char *path, st_file *f, char *err, size_t errlen);

/*! st_get() : the tensor called name, or NULL. */
const st_tensor *st_get(const st_file *f, const char *name);
/*! st_meta() : the metadata value of key, or NULL. */
const char *st_meta(const st_file *f, const char *key);

/*! st_to_f32() : the tensor's elements as floats into dst (numel
 *  floats): F32 copied, F16 and BF16 widened exactly, I32, I8 and I64
 *  converted. */
void st_to_f32(const st_tensor *t, float *dst);

/*! st_take() : tensor `name` of f (read from `path`, for the messages),
 *  which must have exactly the ndim-D shape given and a floating type,
 *  as finite floats into dst.  @return RUMUS_OK, or TRAIN_EFORMAT with
 *  the reason in err (missing, another shape or type, not finite). */
int st_take(const char *path, const st_file *f, const char *name, int ndim,
            const size_t *shape, float *dst, char *err, size_t errlen);

/*! st_elem_size() : the bytes of one element of dtype (ST_I64 included). */
size_t st_elem_size(rumus_dtype dtype);

/*! st_numel() : the element count of t's shape. */
size_t st_numel(const st_tensor *t);

void st_free(st_file *f);

#endif /* RUMUS_TRAIN_SAFETENSORS_H */
