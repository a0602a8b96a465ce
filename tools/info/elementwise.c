/* elementwise.c - rumus-info self-check of the bias, element-wise and
 * activation family, once per storage type (lines suffixed _f16 and _bf16
 * for the 16-bit types), and of the casts between storage types.
 *
 * Every storage type runs on the same inputs, rounded to the type, against
 * the float64 reference of the rounded inputs; a 16-bit line's tolerance is
 * the F32 line's plus the rounding of the stored result, half an ulp of the
 * largest |want| (2^-11 relative for F16, 2^-8 for BF16) plus 2^-25 for
 * F16's subnormals.  A cast line compares the device's bits with the host
 * conversions' (rumus_f32_to_f16 and the others): its error is the largest
 * |got - want|, infinite where the bits differ otherwise (a NaN's payload,
 * the sign of a zero), and its tolerance 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selfcheck.h"

enum { R = 33, C = 71, N = R * C };

static const char *const ACT_NAMES[] = {"relu", "leaky_relu", "sigmoid",
                                        "tanh", "gelu_tanh", "gelu_erf"};

/* The inputs of every storage type, and scratch for results. */
typedef struct {
  const float *a, *b, *bias; /* a in [-6, 6), b and bias in [-1, 1) */
  float *got;
  double *want;
} inputs;

/* "", "_f16", "_bf16": the suffix of a storage type's lines. */
/* Relative and absolute rounding of a result stored in d. */
static double store_rtol(rumus_dtype d) {
  return d == RUMUS_F16 ? 0x1p-11 : d == RUMUS_BF16 ? 0x1p-8 : 0.0;
}
static double store_atol(rumus_dtype d) {
  return d == RUMUS_F16 ? 0x1p-25 : 0.0;
}

/* Rounds n floats to the values d stores. */
static void round_to(rumus_dtype d, float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = selfcheck_stored(d, x[i]);
}

/* A tensor of d and the given shape holding data (converted; NULL:
 * uninitialised), or NULL on failure. */
static rumus_tensor *typed_tensor(selfcheck *sc, rumus_dtype d, int ndim,
                                  const size_t *shape, const float *data) {
  rumus_tensor *t = NULL;
  if (rumus_tensor_create(sc->ctx, d, ndim, shape, &t) != RUMUS_OK) return NULL;
  if (data &&
      rumus_tensor_upload_f32(t, data, rumus_tensor_numel(t)) != RUMUS_OK) {
    rumus_tensor_free(t);
    return NULL;
  }
  return t;
}

/* Downloads t into got (if st is OK) and reports the largest error of the
 * line `name` + the suffix of d, against tol plus d's storage rounding. */
static void report(selfcheck *sc, rumus_dtype d, const char *name, int st,
                   rumus_tensor *t, float *got, const double *want, size_t n,
                   double tol) {
  char line[48];
  snprintf(line, sizeof line, "%s%s", name, selfcheck_suffix(d));
  if (st == RUMUS_OK) st = rumus_tensor_download_f32(t, got, n);
  double top = 0.0;
  for (size_t i = 0; i < n; i++)
    if (fabs(want[i]) > top) top = fabs(want[i]);
  tol += store_rtol(d) * top + store_atol(d);
  const double err = st == RUMUS_OK ? selfcheck_max_err(got, want, n) : 0;
  selfcheck_report(sc, line, st, err, tol);
}

/* The family's lines for storage d, on x = in->a, y = in->b and bias
 * rounded to d (ta, tb, to: R x C tensors of d holding them; tbias: [C]). */
static void check_ops(selfcheck *sc, rumus_dtype d, const float *a,
                      const float *b, const float *bias, rumus_tensor *ta,
                      rumus_tensor *tb, rumus_tensor *to, rumus_tensor *tbias,
                      const inputs *in) {
  float *got = in->got;
  double *want = in->want;
  /* add and mul: one rounding each, so within an ulp of values below 8. */
  int s2 = rumus_add(sc->ctx, ta, tb, to);
  for (size_t i = 0; i < N; i++) want[i] = (double)a[i] + b[i];
  report(sc, d, "add", s2, to, got, want, N, 1e-6);
  s2 = rumus_mul(sc->ctx, ta, tb, to);
  for (size_t i = 0; i < N; i++) want[i] = (double)a[i] * b[i];
  report(sc, d, "mul", s2, to, got, want, N, 1e-6);

  /* bias_add on a copy of a, then bias_grad of b. */
  int st = rumus_tensor_copy(to, ta);
  if (st == RUMUS_OK) st = rumus_bias_add(sc->ctx, to, tbias);
  for (size_t i = 0; i < N; i++) want[i] = (double)a[i] + bias[i % C];
  report(sc, d, "bias_add", st, to, got, want, N, 1e-6);
  s2 = rumus_bias_grad(sc->ctx, tb, tbias);
  ref_bias_grad(b, R, C, want);
  report(sc, d, "bias_grad", s2, tbias, got, want, C, 1e-5);

  /* Every activation, forward and backward (dy = b). */
  for (int act = 0; act < 6; act++) {
    const rumus_activation A = (rumus_activation)act;
    char name[40];
    s2 = rumus_activation_fwd(sc->ctx, A, 0.01f, ta, to);
    for (size_t i = 0; i < N; i++) want[i] = ref_activation(act, 0.01f, a[i]);
    snprintf(name, sizeof name, "%s_fwd", ACT_NAMES[act]);
    report(sc, d, name, s2, to, got, want, N, 2e-5);
    s2 = rumus_activation_bwd(sc->ctx, A, 0.01f, ta, tb, to);
    for (size_t i = 0; i < N; i++)
      want[i] = b[i] * ref_activation_grad(act, 0.01f, a[i]);
    snprintf(name, sizeof name, "%s_bwd", ACT_NAMES[act]);
    report(sc, d, name, s2, to, got, want, N, 2e-6);
  }
}

/* Every line of storage d. */
static void check_storage(selfcheck *sc, rumus_dtype d, const inputs *in) {
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
  float *bias = malloc(C * sizeof *bias);
  const size_t shape[2] = {R, C}, bshape[1] = {C};
  const char *what = d == RUMUS_F32 ? "elementwise" : selfcheck_suffix(d) + 1;
  rumus_tensor *ta = NULL, *tb = NULL, *to = NULL, *tbias = NULL;
  if (!a || !b || !bias) {
    selfcheck_report(sc, what, RUMUS_ENOMEM, 0, 0);
    goto out;
  }
  memcpy(a, in->a, N * sizeof *a);
  memcpy(b, in->b, N * sizeof *b);
  memcpy(bias, in->bias, C * sizeof *bias);
  round_to(d, a, N);
  round_to(d, b, N);
  round_to(d, bias, C);
  ta = typed_tensor(sc, d, 2, shape, a);
  tb = typed_tensor(sc, d, 2, shape, b);
  to = typed_tensor(sc, d, 2, shape, NULL);
  tbias = typed_tensor(sc, d, 1, bshape, bias);
  if (!ta || !tb || !to || !tbias)
    selfcheck_report(sc, what, RUMUS_EDEVMEM, 0, 0);
  else
    check_ops(sc, d, a, b, bias, ta, tb, to, tbias, in);
out:
  rumus_tensor_free(ta);
  rumus_tensor_free(tb);
  rumus_tensor_free(to);
  rumus_tensor_free(tbias);
  free(a);
  free(b);
  free(bias);
}

/* ---- Casts --------------------------------------------------------------- */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Element i of n stored elements of d: its bits, and its value. */
static uint32_t elem_bits(rumus_dtype d, const void *p, size_t i) {
  if (rumus_dtype_size(d) == 2) return ((const uint16_t *)p)[i];
  return ((const uint32_t *)p)[i];
}
/* As a float (an integer rounded to nearest even), with a NaN's bits. */
static float elem_float(rumus_dtype d, uint32_t bits) {
  switch (d) {
  case RUMUS_F16: return rumus_f16_to_f32((uint16_t)bits);
  case RUMUS_BF16: return rumus_bf16_to_f32((uint16_t)bits);
  case RUMUS_I32: return (float)(int32_t)bits;
  default: return bits_f32(bits);
  }
}

/* The host conversion of one element's bits from s to d, through float. */
static uint32_t host_cast(rumus_dtype s, rumus_dtype d, uint32_t in) {
  const float f = elem_float(s, in);
  if (d == RUMUS_F16) return rumus_f32_to_f16(f);
  if (d == RUMUS_BF16) return rumus_f32_to_bf16(f);
  return f32_bits(f);
}

/* Casts src (holding the bits `in`) into dst and reports the line
 * cast_<s>_<d>: the largest |got - want|, infinite where bits differ
 * otherwise; tolerance 0. */
static void check_cast(selfcheck *sc, rumus_tensor *src, rumus_tensor *dst,
                       const void *in, void *out) {
  const rumus_dtype s = rumus_tensor_dtype(src), d = rumus_tensor_dtype(dst);
  char line[40];
  snprintf(line, sizeof line, "cast_%s_%s", rumus_dtype_name(s), rumus_dtype_name(d));
  int st = rumus_tensor_upload(src, in, rumus_tensor_nbytes(src));
  if (st == RUMUS_OK) st = rumus_cast(sc->ctx, src, dst);
  if (st == RUMUS_OK)
    st = rumus_tensor_download(dst, out, rumus_tensor_nbytes(dst));
  double err = 0.0;
  for (size_t i = 0; st == RUMUS_OK && i < N; i++) {
    const uint32_t want = host_cast(s, d, elem_bits(s, in, i));
    const uint32_t got = elem_bits(d, out, i);
    if (got == want) continue;
    const double e = fabs((double)elem_float(d, got) - elem_float(d, want));
    err = fmax(err, e > 0.0 ? e : INFINITY); /* NaN > 0 is false too */
  }
  selfcheck_report(sc, line, st, err, 0.0);
}

/* The stored bits of a's values (with a NaN, an infinity and values past
 * F16's range among them) in each type: F32, F16, BF16, and I32 holding
 * a scaled to +-2.1e9. */
static void cast_inputs(const float *a, uint32_t *w32, uint16_t *w16,
                        uint16_t *wb16, int32_t *wi) {
  for (size_t i = 0; i < N; i++) {
    float f = a[i];
    if (i % 97 == 5) f = NAN;
    if (i % 89 == 7) f = -INFINITY;
    if (i % 83 == 3) f = a[i] * 3e4f; /* up to 1.8e5: F16 overflows */
    w32[i] = f32_bits(f);
    w16[i] = rumus_f32_to_f16(f);
    wb16[i] = rumus_f32_to_bf16(f);
    wi[i] = (int32_t)(a[i] * 3.5e8f);
  }
}

static void check_casts(selfcheck *sc, const float *a) {
  static const rumus_dtype T[4] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16, RUMUS_I32};
  const size_t shape[1] = {N};
  void *in[4] = {malloc(N * 4), malloc(N * 2), malloc(N * 2), malloc(N * 4)};
  void *out = malloc(N * 4);
  rumus_tensor *t[4] = {NULL};
  int ok = in[0] && in[1] && in[2] && in[3] && out;
  for (int k = 0; ok && k < 4; k++)
    ok = (t[k] = typed_tensor(sc, T[k], 1, shape, NULL)) != NULL;
  if (!ok) {
    selfcheck_report(sc, "cast", RUMUS_EDEVMEM, 0, 0);
  } else {
    cast_inputs(a, in[0], in[1], in[2], in[3]);
    for (int s = 0; s < 4; s++)
      for (int d = 0; d < 3; d++)
        if (s != d) check_cast(sc, t[s], t[d], in[s], out);
  }
  for (int k = 0; k < 4; k++) {
    rumus_tensor_free(t[k]);
    free(in[k]);
  }
  free(out);
}

void selfcheck_elementwise(selfcheck *sc) {
  float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
  float *got = malloc(N * sizeof *got), *bias = malloc(C * sizeof *bias);
  double *want = malloc(N * sizeof *want);
  if (!a || !b || !got || !bias || !want) {
    selfcheck_report(sc, "elementwise", RUMUS_ENOMEM, 0, 0);
    goto out;
  }
  for (size_t i = 0; i < N; i++)
    a[i] = selfcheck_rand(-6, 6), b[i] = selfcheck_rand(-1, 1);
  for (size_t j = 0; j < C; j++) bias[j] = selfcheck_rand(-1, 1);
  const inputs in = {a, b, bias, got, want};
  check_storage(sc, RUMUS_F32, &in);
  check_storage(sc, RUMUS_F16, &in);
  check_storage(sc, RUMUS_BF16, &in);
  check_casts(sc, a);
out:
  free(a);
  free(b);
  free(got);
  free(bias);
  free(want);
}
