/*
 * selfcheck.h - rumus-info's self-check of each kernel family against the
 * float64 reference in ref/.  Each family has one file here with one entry
 * point; main.c runs them all for both reduction variants.
 */
#ifndef RUMUS_SELFCHECK_H
#define RUMUS_SELFCHECK_H

#include <stddef.h>

#include "ref.h"
#include "rumus.h"

typedef struct {
  rumus_ctx *ctx;
  int failures;
} selfcheck;

/* Prints one line for a kernel: the status, or the largest error against
 * the tolerance; counts failures. */
void selfcheck_report(selfcheck *sc, const char *kernel, int status,
                      double err, double tol);
/* Largest |got - want| (infinity if a NaN appears where want is finite). */
double selfcheck_max_err(const float *got, const double *want, size_t n);
/* Uniform float in [lo, hi) from a fixed-seed generator. */
float selfcheck_rand(float lo, float hi);
/* Puts the generator back to its seed: main.c does so before each family
 * of each variant, so a family's inputs do not depend on how many values
 * the families before it drew. */
void selfcheck_reseed(void);
/* x as a tensor of type d stores it (rounded to nearest even). */
float selfcheck_stored(rumus_dtype d, float x);
/* The F32 tolerance tol plus the rounding to type d of results up to the
 * largest finite |want|: half an ulp (F16: 2^-11 relative and 2^-25
 * absolute; BF16: 2^-8). */
double selfcheck_typed_tol(rumus_dtype d, double tol, const double *want,
                           size_t n);
/* "_f16", "_bf16" or "" (F32): the suffix of a line of storage type d. */
const char *selfcheck_suffix(rumus_dtype d);
/* The line name + selfcheck_suffix(d): the n values of t (downloaded as
 * floats into got when the op's status st is RUMUS_OK) against want,
 * within selfcheck_typed_tol(d, tol, want, n); st itself if not OK. */
void selfcheck_typed_line(selfcheck *sc, const char *name, rumus_dtype d,
                          int st, const rumus_tensor *t, float *got,
                          const double *want, size_t n, double tol);
/* An F32 tensor of rows x cols holding data (NULL: uninitialised), or NULL
 * on failure. */
rumus_tensor *selfcheck_tensor(selfcheck *sc, size_t rows, size_t cols,
                               const float *data);

void selfcheck_softmax(selfcheck *sc);
void selfcheck_xent(selfcheck *sc);
void selfcheck_gemm(selfcheck *sc);
void selfcheck_elementwise(selfcheck *sc);
void selfcheck_optim(selfcheck *sc);
void selfcheck_quant(selfcheck *sc);
void selfcheck_dropout(selfcheck *sc);
void selfcheck_pool(selfcheck *sc);
void selfcheck_batchnorm(selfcheck *sc);
void selfcheck_conv(selfcheck *sc);
void selfcheck_embedding(selfcheck *sc);
void selfcheck_layernorm(selfcheck *sc);
void selfcheck_tensorops(selfcheck *sc);
void selfcheck_attention(selfcheck *sc);

/* rumus-info -s [-f] (startup.c): prints the start-up times of one fresh
 * context, with rumus_cache_fill first if fill is set; the exit status. */
int startup_report(const char *device, int fill);

#endif /* RUMUS_SELFCHECK_H */
