/*
 * st_compare.c - compares two safetensors files tensor by tensor, for
 * tests/mpi-train.sh:
 *
 *   tests/st-compare A B ATOL RTOL
 *
 * Both files must hold the same tensor names with the same shapes; every
 * element pair (as floats, st_to_f32()) must satisfy
 * |a - b| <= ATOL + RTOL |b| (NaN never does).  Prints the largest
 * absolute difference and the tensor it is in; exit status 0 when every
 * element is within tolerance, 1 when one is not or the files differ in
 * their tensors, 2 on a bad command line or an unreadable file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/train/safetensors.h"

/* Returns the number of elements out of tolerance in tensor a vs b (the
 * same shape), and the largest |a - b| in *maxdiff. */
static size_t compare_one(const st_tensor *a, const st_tensor *b, double atol,
                          double rtol, double *maxdiff) {
  size_t n = st_numel(a), bad = 0;
  float *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
  if (!x || !y) {
    free(x);
    free(y);
    *maxdiff = INFINITY;
    return n ? n : 1;
  }
  st_to_f32(a, x);
  st_to_f32(b, y);
  *maxdiff = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)x[i] - (double)y[i]);
    if (!(d <= atol + rtol * fabs((double)y[i]))) bad++;
    if (!(d <= *maxdiff)) *maxdiff = isnan(d) ? INFINITY : d;
  }
  free(x);
  free(y);
  return bad;
}

static int same_shape(const st_tensor *a, const st_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int k = 0; k < a->ndim; k++)
    if (a->shape[k] != b->shape[k]) return 0;
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: st-compare A.safetensors B.safetensors ATOL RTOL\n");
    return 2;
  }
  double atol = strtod(argv[3], NULL), rtol = strtod(argv[4], NULL);
  st_file a, b;
  char err[2048];
  if (st_load(argv[1], &a, err, sizeof err) != RUMUS_OK) {
    fprintf(stderr, "st-compare: %s\n", err);
    return 2;
  }
  if (st_load(argv[2], &b, err, sizeof err) != RUMUS_OK) {
    fprintf(stderr, "st-compare: %s\n", err);
    st_free(&a);
    return 2;
  }
  int code = a.n == b.n ? 0 : 1;
  if (code) printf("%zu tensors vs %zu\n", a.n, b.n);
  double worst = 0.0;
  const char *where = "";
  size_t bad = 0, total = 0;
  for (size_t i = 0; i < a.n && code == 0; i++) {
    const st_tensor *ta = &a.t[i], *tb = st_get(&b, ta->name);
    if (!tb || !same_shape(ta, tb)) {
      printf("%s: %s in %s\n", ta->name, tb ? "another shape" : "missing", argv[2]);
      code = 1;
      break;
    }
    double d;
    bad += compare_one(ta, tb, atol, rtol, &d);
    total += st_numel(ta);
    if (d > worst || (d == worst && !*where)) {
      worst = d;
      where = ta->name;
    }
  }
  if (code == 0) {
    printf("%zu tensors, %zu values: largest |difference| %.3g (%s); %zu outside "
           "%g + %g |b|\n", a.n, total, worst, where, bad, atol, rtol);
    code = bad ? 1 : 0;
  }
  st_free(&a);
  st_free(&b);
  return code;
}
