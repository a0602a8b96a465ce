/*
 * tu_dtype.h - test helpers for the storage types: every op is tested
 * with F32, F16 and BF16 tensors against the float64 reference computed
 * from the inputs as the device stores them (rounded), with tolerances
 * that add the rounding of the stored result:
 *   F16   11-bit significand: half an ulp is 2^-11 of the value, 2^-25
 *         absolutely among the subnormals (below 2^-14);
 *   BF16  8-bit significand: half an ulp is 2^-8 of the value.
 */
#ifndef RUMUS_TU_DTYPE_H
#define RUMUS_TU_DTYPE_H

#include "testutil.h"

/* F32, F16, BF16: the loop index of a typed test picks one. */
extern const rumus_dtype tu_dtypes[3];
const char *tu_dtype_name(rumus_dtype dtype);

/* Rounds n floats in place to the values dtype stores. */
void tu_round_to(rumus_dtype dtype, float *x, size_t n);
/* The stored bytes of n floats in dtype (malloc'ed). */
void *tu_encode(rumus_dtype dtype, const float *x, size_t n);

/* A tensor of dtype holding data (converted to dtype; NULL: left
 * uninitialised), and its contents as floats (malloc'ed). */
rumus_tensor *tu_tensor_typed(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                              const size_t *shape, const float *data);
float *tu_download_f32(rumus_ctx *ctx, const rumus_tensor *t);

/* A guarded tensor (tu_guarded_tensor) of dtype holding data. */
tu_guarded tu_guarded_typed(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                            const size_t *shape, const float *data);

/* The same with the tensor `odd` elements past a 4096-byte guard: an
 * unaligned element offset when odd is not a multiple of 4. */
tu_guarded tu_guarded_typed_odd(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                const size_t *shape, const float *data,
                                size_t odd);

/* Relative and absolute error of storing a float result in dtype (0 for
 * F32): added to an op's F32 tolerance. */
double tu_store_rtol(rumus_dtype dtype);
double tu_store_atol(rumus_dtype dtype);

#endif /* RUMUS_TU_DTYPE_H */
