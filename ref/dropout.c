/* dropout.c - float64 reference of dropout and its generator,
 * Philox4x32-10 (rumus.h, "Dropout", states the mapping). */
#include "ref.h"

void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                       uint32_t out[4]) {
  uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) { /* the key's Weyl sequence, between rounds */
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
    const uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = (uint32_t)p1;
    c[2] = n2;
    c[3] = (uint32_t)p0;
  }
  for (int j = 0; j < 4; j++) out[j] = c[j];
}

uint32_t ref_dropout_bits(uint64_t seed, uint64_t offset, uint64_t i) {
  const uint64_t q = i / 4;
  const uint32_t ctr[4] = {(uint32_t)q, (uint32_t)(q >> 32), (uint32_t)offset,
                           (uint32_t)(offset >> 32)};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t r[4];
  ref_philox4x32_10(ctr, key, r);
  return r[i % 4];
}

int ref_dropout_keep(float p, uint64_t seed, uint64_t offset, uint64_t i) {
  /* u = (r >> 8) 2^-24 is exact in double, as p is. */
  const double u = (double)(ref_dropout_bits(seed, offset, i) >> 8) * 0x1p-24;
  return u >= (double)p;
}

void ref_dropout(const float *x, size_t n, float p, uint64_t seed,
                 uint64_t offset, double *y) {
  for (size_t i = 0; i < n; i++) {
    if (p == 0.0f)
      y[i] = x[i];
    else
      y[i] = ref_dropout_keep(p, seed, offset, i) ? x[i] / (1.0 - p) : 0.0;
  }
}
