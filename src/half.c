/*
 * half.c - host conversions between float and the 16-bit storage types,
 * and transfers of float data into and out of tensors of any floating
 * type.  Both narrowings round to nearest even, as the kernels' stores do.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* A half subnormal (or 0) for |x| below 2^-14 (bits ax): round(x / 2^-24)
 * to nearest even; 2^-14 itself may come out as the smallest normal. */
static uint16_t f16_small(uint32_t ax) {
  if (ax <= 0x33000000u) return 0; /* up to 2^-25: the tie goes to 0 */
  const uint32_t e = ax >> 23, m = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126 - e; /* 14 to 24 */
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) r++;
  return (uint16_t)r;
}

uint16_t rumus_f32_to_f16(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t ax = u & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) /* NaN: quiet, with the payload's top bits */
    return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  if (ax >= 0x477FF000u) /* 65520 and up round to infinity */
    return (uint16_t)(sign | 0x7C00u);
  if (ax < 0x38800000u) return (uint16_t)(sign | f16_small(ax));
  const uint32_t r = ax - 0x38000000u; /* exponent bias 127 -> 15 */
  return (uint16_t)(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
}

float rumus_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0) { /* zero or subnormal: m 2^-24, exact in float */
    const float f = (float)m * 0x1p-24f;
    return bits_float(float_bits(f) | sign);
  }
  if (e == 31) return bits_float(sign | 0x7F800000u | (m << 13));
  return bits_float(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t rumus_f32_to_bf16(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float rumus_bf16_to_f32(uint16_t b) { return bits_float((uint32_t)b << 16); }

/* ---- Transfers of float data ------------------------------------------ */

static int is_floating(rumus_dtype d) {
  return d == RUMUS_F32 || d == RUMUS_F16 || d == RUMUS_BF16;
}

static int check_f32_transfer(const rumus_tensor *t, const void *p, size_t n,
                              const char *op) {
  if (t == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(p == NULL, t->ctx, RUMUS_ENULL, "%s: host pointer is NULL",
                 op);
  RUMUS__FAIL_IF(!is_floating(t->dtype), t->ctx, RUMUS_EDTYPE,
                 "%s: the tensor's storage type %d is not floating", op,
                 (int)t->dtype);
  RUMUS__FAIL_IF(n != t->numel, t->ctx, RUMUS_ESIZE,
                 "%s: %zu values given, the tensor holds %zu", op, n,
                 t->numel);
  return RUMUS_OK;
}

int rumus_tensor_upload_f32(rumus_tensor *t, const float *src, size_t n) {
  static const char op[] = "rumus_tensor_upload_f32";
  RUMUS__FORWARD(check_f32_transfer(t, src, n, op));
  if (t->dtype == RUMUS_F32)
    return rumus_tensor_upload(t, src, n * sizeof *src);
  uint16_t *bits = malloc(n ? n * sizeof *bits : 1);
  RUMUS__FAIL_IF(bits == NULL, t->ctx, RUMUS_ENOMEM, "%s: out of host memory",
                 op);
  for (size_t i = 0; i < n; i++)
    bits[i] = t->dtype == RUMUS_F16 ? rumus_f32_to_f16(src[i])
                                    : rumus_f32_to_bf16(src[i]);
  const int st = rumus_tensor_upload(t, bits, n * sizeof *bits);
  free(bits);
  return st;
}

int rumus_tensor_download_f32(const rumus_tensor *t, float *dst, size_t n) {
  static const char op[] = "rumus_tensor_download_f32";
  RUMUS__FORWARD(check_f32_transfer(t, dst, n, op));
  if (t->dtype == RUMUS_F32)
    return rumus_tensor_download(t, dst, n * sizeof *dst);
  uint16_t *bits = malloc(n ? n * sizeof *bits : 1);
  RUMUS__FAIL_IF(bits == NULL, t->ctx, RUMUS_ENOMEM, "%s: out of host memory",
                 op);
  const int st = rumus_tensor_download(t, bits, n * sizeof *bits);
  for (size_t i = 0; st == RUMUS_OK && i < n; i++)
    dst[i] = t->dtype == RUMUS_F16 ? rumus_f16_to_f32(bits[i])
                                   : rumus_bf16_to_f32(bits[i]);
  free(bits);
  return st;
}
