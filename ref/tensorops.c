/* tensorops.c - float64 references of permute, the broadcasting ops and
 * sums over axes (rumus.h gives the semantics).  Shapes are row-major
 * extents; every loop walks the output's elements in order and
 * decomposes the index, which is slow and obviously right. */
#include "ref.h"

/* Coordinates of flat index i over shape[0 .. nd) into c. */
static void coords(size_t i, int nd, const size_t *shape, size_t *c) {
  for (int d = nd - 1; d >= 0; d--) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
}

static size_t numel(int nd, const size_t *shape) {
  size_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  return n;
}

void ref_permute(const float *x, int nd, const size_t *shape,
                 const int *perm, double *y) {
  size_t ys[8], c[8], xs[8];
  for (int d = 0; d < nd; d++) ys[d] = shape[perm[d]];
  size_t st = 1;
  for (int d = nd - 1; d >= 0; d--) {
    xs[d] = st;
    st *= shape[d];
  }
  const size_t n = numel(nd, shape);
  for (size_t i = 0; i < n; i++) {
    coords(i, nd, ys, c);
    size_t j = 0;
    for (int d = 0; d < nd; d++) j += c[d] * xs[perm[d]];
    y[i] = x[j];
  }
}

/* Offset in t (nt dimensions, aligned right to the nd of out) of out's
 * coordinates c, broadcasting extents of 1. */
static size_t bcast_off(const size_t *c, int nd, int nt, const size_t *ts) {
  size_t off = 0;
  for (int k = 0; k < nt; k++) {
    const size_t ck = ts[k] == 1 ? 0 : c[k + nd - nt];
    off = off * ts[k] + ck;
  }
  return off;
}

void ref_broadcast(int mul, const float *a, int nda, const size_t *sa,
                   const float *b, int ndb, const size_t *sb, int ndo,
                   const size_t *so, double *out) {
  size_t c[8];
  const size_t n = numel(ndo, so);
  for (size_t i = 0; i < n; i++) {
    coords(i, ndo, so, c);
    const double u = a[bcast_off(c, ndo, nda, sa)];
    const double v = b[bcast_off(c, ndo, ndb, sb)];
    out[i] = mul ? u * v : u + v;
  }
}

void ref_reduce_sum(const float *x, int nd, const size_t *shape,
                    unsigned axes, double *y) {
  size_t ys[8], c[8];
  for (int d = 0; d < nd; d++) ys[d] = (axes >> d & 1u) ? 1 : shape[d];
  const size_t ny = numel(nd, ys), n = numel(nd, shape);
  for (size_t j = 0; j < ny; j++) y[j] = 0.0;
  for (size_t i = 0; i < n; i++) {
    coords(i, nd, shape, c);
    size_t j = 0;
    for (int d = 0; d < nd; d++) j = j * ys[d] + ((axes >> d & 1u) ? 0 : c[d]);
    y[j] += x[i];
  }
}
