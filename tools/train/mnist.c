/* mnist.c - see mnist.h. */
#include "mnist.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "rumus.h"

#define IDX_MAGIC_LABELS 0x00000801u /* unsigned bytes, 1 dimension */
#define IDX_MAGIC_IMAGES 0x00000803u /* unsigned bytes, 3 dimensions */

const char *train_err_name(int status) {
  switch (status) {
    case TRAIN_EIO:
      return "TRAIN_EIO";
    case TRAIN_EFORMAT:
      return "TRAIN_EFORMAT";
  }
  return rumus_err_name(status);
}

int train_fail(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* Reads exactly n bytes (or fewer at a clean end of file: *got says how
 * many).  Returns RUMUS_OK, or an error for a read error or a damaged gzip
 * stream, with `what` naming the part being read. */
static int read_exact(gzFile f, const char *path, const char *what, void *buf,
                      size_t n, size_t *got, char *err, size_t errlen) {
  unsigned char *p = buf;
  size_t done = 0;
  while (done < n) {
    size_t chunk = n - done;
    if (chunk > (1u << 30)) chunk = 1u << 30;
    errno = 0;
    int r = gzread(f, p + done, (unsigned)chunk);
    if (r < 0) {
      int zerr = 0;
      const char *zmsg = gzerror(f, &zerr);
      if (zerr == Z_ERRNO)
        return train_fail(err, errlen, TRAIN_EIO, "%s: read error in the %s: %s",
                    path, what, strerror(errno ? errno : EIO));
      return train_fail(err, errlen, TRAIN_EFORMAT,
                  "%s: corrupt gzip data in the %s: %s", path, what,
                  zmsg ? zmsg : "unknown zlib error");
    }
    if (r == 0) break;
    done += (size_t)r;
  }
  *got = done;
  if (done < n) {
    /* A short read: a truncated gzip stream shows as Z_BUF_ERROR. */
    int zerr = 0;
    const char *zmsg = gzerror(f, &zerr);
    if (zerr == Z_BUF_ERROR)
      return train_fail(err, errlen, TRAIN_EFORMAT,
                  "%s: truncated gzip stream (%s) after %zu of the %zu bytes "
                  "of the %s",
                  path, zmsg ? zmsg : "unexpected end of file", done, n, what);
    if (zerr != Z_OK && zerr != Z_STREAM_END)
      return train_fail(err, errlen, TRAIN_EFORMAT,
                  "%s: corrupt gzip data in the %s: %s", path, what,
                  zmsg ? zmsg : "unknown zlib error");
  }
  return RUMUS_OK;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
         (uint32_t)b[3];
}

/* Reads an IDX file of unsigned bytes: magic, ndim extents (extents after
 * the first must equal want[1..]), data.  *data gets min(limit, count)
 * items of item_bytes each (all of them if limit is 0). */
static int read_idx(const char *path, uint32_t magic, int ndim,
                    const uint32_t *want, const char *kind, size_t limit,
                    uint8_t **data, size_t *count, char *err, size_t errlen) {
  if (!path || !data || !count)
    return train_fail(err, errlen, RUMUS_EINVAL, "mnist: NULL argument");
  *data = NULL;
  *count = 0;
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f)
    return train_fail(err, errlen, TRAIN_EIO, "%s: cannot open: %s", path,
                errno ? strerror(errno) : "out of memory in zlib");

  unsigned char hdr[4 + 4 * 3];
  size_t hdr_bytes = 4 + 4 * (size_t)ndim, got = 0;
  int st = read_exact(f, path, "IDX header", hdr, hdr_bytes, &got, err, errlen);
  if (st != RUMUS_OK) goto done;
  if (got < 4) {
    st = train_fail(err, errlen, TRAIN_EFORMAT,
              "%s: %s: %zu bytes, too short for an IDX magic number", path,
              got == 0 ? "empty file" : "truncated file", got);
    goto done;
  }
  uint32_t m = be32(hdr);
  if (m != magic) {
    st = train_fail(err, errlen, TRAIN_EFORMAT,
              "%s: bad magic 0x%08x, expected 0x%08x (IDX %s: unsigned bytes, "
              "%d dimension%s)",
              path, (unsigned)m, (unsigned)magic, kind, ndim,
              ndim == 1 ? "" : "s");
    goto done;
  }
  if (got < hdr_bytes) {
    st = train_fail(err, errlen, TRAIN_EFORMAT,
              "%s: truncated IDX header: %zu of %zu bytes", path, got,
              hdr_bytes);
    goto done;
  }
  uint32_t n = be32(hdr + 4);
  size_t item = 1;
  for (int d = 1; d < ndim; d++) {
    uint32_t e = be32(hdr + 4 + 4 * d);
    if (e != want[d]) {
      st = train_fail(err, errlen, TRAIN_EFORMAT,
                "%s: wrong dimensions %ux%ux%u, expected Nx%ux%u", path,
                (unsigned)n, (unsigned)be32(hdr + 8),
                (unsigned)be32(hdr + 12), (unsigned)want[1],
                (unsigned)want[2]);
      goto done;
    }
    item *= e;
  }
  if (n == 0 || n > MNIST_MAX_COUNT) {
    st = train_fail(err, errlen, TRAIN_EFORMAT,
              "%s: implausible %s count %u in the header (expected 1 to %u)",
              path, kind, (unsigned)n, (unsigned)MNIST_MAX_COUNT);
    goto done;
  }
  size_t take = (limit && limit < n) ? limit : n;
  size_t bytes = take * item;
  uint8_t *buf = malloc(bytes);
  if (!buf) {
    st = train_fail(err, errlen, RUMUS_ENOMEM, "%s: out of memory for %zu bytes",
              path, bytes);
    goto done;
  }
  st = read_exact(f, path, "data", buf, bytes, &got, err, errlen);
  if (st == RUMUS_OK && got < bytes)
    st = train_fail(err, errlen, TRAIN_EFORMAT,
              "%s: truncated data: the header promises %u %s (%zu bytes) but "
              "the data ends after %zu bytes",
              path, (unsigned)n, kind, (size_t)n * item, got);
  if (st == RUMUS_OK && take == n) {
    /* All read: the stream must end here, and end cleanly (this also
     * verifies the gzip trailer's CRC and length). */
    unsigned char extra[64];
    st = read_exact(f, path, "data", extra, sizeof extra, &got, err, errlen);
    if (st == RUMUS_OK && got > 0)
      st = train_fail(err, errlen, TRAIN_EFORMAT,
                "%s: trailing bytes after the %u %s the header announces",
                path, (unsigned)n, kind);
  }
  if (st != RUMUS_OK) {
    free(buf);
    goto done;
  }
  *data = buf;
  *count = take;
done:
  gzclose(f);
  return st;
}

int mnist_read_images(const char *path, size_t limit, uint8_t **images,
                      size_t *count, char *err, size_t errlen) {
  static const uint32_t want[3] = {0, MNIST_ROWS, MNIST_COLS};
  return read_idx(path, IDX_MAGIC_IMAGES, 3, want, "images", limit, images,
                  count, err, errlen);
}

int mnist_read_labels(const char *path, size_t limit, uint8_t **labels,
                      size_t *count, char *err, size_t errlen) {
  static const uint32_t want[1] = {0};
  int st = read_idx(path, IDX_MAGIC_LABELS, 1, want, "labels", limit, labels,
                    count, err, errlen);
  if (st != RUMUS_OK) return st;
  for (size_t i = 0; i < *count; i++) {
    if ((*labels)[i] >= MNIST_CLASSES) {
      st = train_fail(err, errlen, TRAIN_EFORMAT,
                "%s: label %u at index %zu is outside 0..%d", path,
                (unsigned)(*labels)[i], i, MNIST_CLASSES - 1);
      free(*labels);
      *labels = NULL;
      *count = 0;
      return st;
    }
  }
  return RUMUS_OK;
}

void mnist_free(mnist_set *set) {
  if (!set) return;
  free(set->images);
  free(set->labels);
  memset(set, 0, sizeof *set);
}

int mnist_load(const char *dir, const char *split, size_t limit,
               mnist_set *out, char *err, size_t errlen) {
  if (!dir || !split || !out)
    return train_fail(err, errlen, RUMUS_EINVAL, "mnist_load: NULL argument");
  memset(out, 0, sizeof *out);
  size_t len = strlen(dir) + strlen(split) + 32;
  char *ipath = malloc(len), *lpath = malloc(len);
  int st = RUMUS_OK;
  if (!ipath || !lpath) {
    st = train_fail(err, errlen, RUMUS_ENOMEM, "mnist_load: out of memory");
    goto done;
  }
  snprintf(ipath, len, "%s/%s-images-idx3-ubyte.gz", dir, split);
  snprintf(lpath, len, "%s/%s-labels-idx1-ubyte.gz", dir, split);
  size_t ni = 0, nl = 0;
  st = mnist_read_images(ipath, limit, &out->images, &ni, err, errlen);
  if (st != RUMUS_OK) goto done;
  st = mnist_read_labels(lpath, limit, &out->labels, &nl, err, errlen);
  if (st != RUMUS_OK) goto done;
  if (ni != nl) {
    st = train_fail(err, errlen, TRAIN_EFORMAT,
              "%s: %zu labels, but %s has %zu images%s", lpath, nl, ipath, ni,
              limit ? " (counting up to the limit asked for)" : "");
    goto done;
  }
  out->count = ni;
done:
  if (st != RUMUS_OK) mnist_free(out);
  free(ipath);
  free(lpath);
  return st;
}

const char *mnist_data_dir(const char *dir) {
  if (dir) return dir;
  const char *env = getenv(MNIST_ENV_DIR);
  if (env && *env) return env;
  return MNIST_DEFAULT_DIR;
}

void mnist_pixel_stats(const mnist_set *set, double *mean, double *std) {
  /* Exact integer sums, so the result does not depend on the order. */
  uint64_t sum = 0, sq = 0;
  size_t n = set->count * MNIST_PIXELS;
  for (size_t i = 0; i < n; i++) {
    uint32_t v = set->images[i];
    sum += v;
    sq += v * v;
  }
  double m = n ? (double)sum / (double)n : 0.0;
  double var = n ? (double)sq / (double)n - m * m : 0.0;
  *mean = m / 255.0;
  *std = var > 0.0 ? sqrt(var) / 255.0 : 0.0;
}

void mnist_batch(const mnist_set *set, const uint32_t *idx, size_t n,
                 float mean, float std, float *x, int32_t *y) {
  for (size_t i = 0; i < n; i++) {
    const uint8_t *img = set->images + (size_t)idx[i] * MNIST_PIXELS;
    float *row = x + i * MNIST_PIXELS;
    for (size_t j = 0; j < MNIST_PIXELS; j++)
      row[j] = ((float)img[j] / 255.0f - mean) / std;
    y[i] = set->labels[idx[i]];
  }
}
