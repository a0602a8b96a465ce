/* tu_dtype.c - see tu_dtype.h. */
#include "tu_dtype.h"

#include <stdlib.h>
#include <string.h>

const rumus_dtype tu_dtypes[3] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};

const char *tu_dtype_name(rumus_dtype d) { return rumus_dtype_name(d); }

void tu_round_to(rumus_dtype d, float *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (d == RUMUS_F16) x[i] = rumus_f16_to_f32(rumus_f32_to_f16(x[i]));
    if (d == RUMUS_BF16) x[i] = rumus_bf16_to_f32(rumus_f32_to_bf16(x[i]));
  }
}

void *tu_encode(rumus_dtype d, const float *x, size_t n) {
  const size_t esz = rumus_dtype_size(d);
  unsigned char *out = malloc(n * esz + 1);
  ck_assert_ptr_nonnull(out);
  if (d == RUMUS_F32) {
    memcpy(out, x, n * esz);
    return out;
  }
  uint16_t *h = (uint16_t *)out;
  for (size_t i = 0; i < n; i++)
    h[i] = d == RUMUS_F16 ? rumus_f32_to_f16(x[i]) : rumus_f32_to_bf16(x[i]);
  return out;
}

rumus_tensor *tu_tensor_typed(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                              const size_t *shape, const float *data) {
  rumus_tensor *t = tu_tensor(ctx, dtype, ndim, shape, NULL);
  if (data)
    TU_OK(ctx, rumus_tensor_upload_f32(t, data, rumus_tensor_numel(t)));
  return t;
}

float *tu_download_f32(rumus_ctx *ctx, const rumus_tensor *t) {
  const size_t n = rumus_tensor_numel(t);
  float *out = malloc(n ? n * sizeof *out : 1);
  ck_assert_ptr_nonnull(out);
  TU_OK(ctx, rumus_tensor_download_f32(t, out, n));
  return out;
}

tu_guarded tu_guarded_typed(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                            const size_t *shape, const float *data) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  void *bytes = data ? tu_encode(dtype, data, n) : NULL;
  tu_guarded g = tu_guarded_tensor(ctx, dtype, ndim, shape, bytes);
  free(bytes);
  return g;
}

tu_guarded tu_guarded_typed_odd(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                const size_t *shape, const float *data,
                                size_t odd) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  void *bytes = data && n ? tu_encode(dtype, data, n) : NULL;
  tu_guarded g = tu_guarded_tensor_at(ctx, dtype, ndim, shape, bytes,
                                      4096 + odd * rumus_dtype_size(dtype));
  free(bytes);
  return g;
}

double tu_store_rtol(rumus_dtype d) {
  return d == RUMUS_F16 ? 0x1p-11 : d == RUMUS_BF16 ? 0x1p-8 : 0.0;
}

double tu_store_atol(rumus_dtype d) { return d == RUMUS_F16 ? 0x1p-25 : 0.0; }
