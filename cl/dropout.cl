/*
 * dropout.cl - dropout forward and backward with a counter-based generator,
 * Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011; the construction of Random123).
 *
 *   y[i] = keep(i) ? x[i] * scale : 0       (forward: x -> y)
 *   dx[i] = keep(i) ? dy[i] * scale : 0     (backward: dy -> dx)
 *
 * Both are this one map, so one kernel serves both.  scale is the float
 * the host computed (1 / (1 - p), rounded once from double); a dropped
 * element is 0 by selection, not by multiplication, so NaN or infinity
 * there gives 0.  Arithmetic is float; the tensors share the program's
 * storage (RUMUS_STORAGE: F32, F16, BF16) through LOAD / STORE.
 *
 * The mask (rumus.h, "Dropout", states it for users): element i of the
 * tensor (flat index from its first element) belongs to group q = i / 4
 * and takes word j = i % 4 of
 *   r = philox4x32_10(counter = (q lo, q hi, offset lo, offset hi),
 *                     key = (seed lo, seed hi))
 * (lo / hi: the low and high 32 bits of a 64-bit value).  It is kept when
 * (r[j] >> 8) >= thresh, thresh = ceil(p * 2^24) from the host: the same
 * as u >= p for the uniform u = (r[j] >> 8) * 2^-24 in [0, 1), which is
 * exact in float.  So the mask depends on (seed, offset, i) alone: not on
 * the device, the variant, the work-group size or how a launch is cut.
 *
 * Index scheme: work-item g of a launch takes DO_GROUPS consecutive groups
 * of 4 elements (one Philox call each), from group g * DO_GROUPS; g0 is
 * the launch's first group (the host cuts huge tensors into launches).  A
 * group of 4 is one LOAD4 / STORE4 (typed and aligned under RUMUS_ALIGN4,
 * see common.cl); the tensor's last group, when shorter, goes element by
 * element.  Padding work-items return at the bounds check.  GPUs take one
 * group per work-item (neighbouring work-items read neighbouring 16-byte
 * vectors); PoCL several, in small work-groups.
 */

#ifndef DO_GROUPS
#define DO_GROUPS 1 /* groups of 4 elements per work-item */
#endif
#ifndef DO_LS
#define DO_LS 256 /* local size */
#endif

/* ---- Philox4x32-10 ------------------------------------------------------
 * Self-contained (no -D option, no storage): a family that needs random
 * numbers later can move this block into common.cl unchanged.  Checked
 * against Random123's published known-answer vectors by the tests. */

#define RUMUS_PHILOX_M0 0xD2511F53u /* multipliers */
#define RUMUS_PHILOX_M1 0xCD9E8D57u
#define RUMUS_PHILOX_W0 0x9E3779B9u /* Weyl increments of the key */
#define RUMUS_PHILOX_W1 0xBB67AE85u

/* One round: two 32 x 32 -> 64-bit products, their halves crossed and
 * mixed with the other two words and the round's key. */
inline __attribute__((always_inline)) uint4 rumus_philox_round(uint4 c,
                                                              uint2 k) {
  const uint lo0 = RUMUS_PHILOX_M0 * c.x, hi0 = mul_hi(RUMUS_PHILOX_M0, c.x);
  const uint lo1 = RUMUS_PHILOX_M1 * c.z, hi1 = mul_hi(RUMUS_PHILOX_M1, c.z);
  return (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
}

/* Ten rounds, the key bumped by the Weyl increments between rounds. */
inline __attribute__((always_inline)) uint4 rumus_philox4x32_10(uint4 c,
                                                               uint2 k) {
  const uint2 w = (uint2)(RUMUS_PHILOX_W0, RUMUS_PHILOX_W1);
  c = rumus_philox_round(c, k);
  for (int r = 1; r < 10; r++) {
    k += w;
    c = rumus_philox_round(c, k);
  }
  return c;
}

/* ---- Dropout ------------------------------------------------------------ */

/* The 4 results of one group from its inputs v and Philox words r. */
inline __attribute__((always_inline)) float4 do_apply(float4 v, uint4 r,
                                                      uint thresh,
                                                      float scale) {
  const int4 keep = (r >> 8) >= (uint4)(thresh);
  return select((float4)(0.0f), v * scale, keep);
}

/* The last group of n, i .. n - 1 (fewer than 4), element by element. */
inline __attribute__((always_inline)) void do_tail(global const real_t *x,
                                                   global real_t *y,
                                                   size_t i, size_t n,
                                                   uint4 r, uint thresh,
                                                   float scale) {
  float v[4], o[4];
  for (int k = 0; k < 4; k++) v[k] = i + k < n ? LOAD(x, i + k) : 0.0f;
  vstore4(do_apply(vload4(0, v), r, thresh, scale), 0, o);
  for (int k = 0; k < 4; k++)
    if (i + k < n) STORE(o[k], y, i + k);
}

/* y = dropout of x over n elements; x may be y (each element is read
 * before it is written, by the same work-item). */
__kernel RUMUS_REQD_WG(DO_LS, 1, 1)
void dropout(global const real_t *x, ulong x_off, global real_t *y,
             ulong y_off, ulong n, ulong g0, ulong seed, ulong offset,
             uint thresh, float scale) {
  x += x_off;
  y += y_off;
  const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
  const size_t first = get_global_id(0) * (size_t)DO_GROUPS;
  for (int j = 0; j < DO_GROUPS; j++) {
    const size_t g = first + (size_t)j, i = 4 * g;
    if (i >= (size_t)n) return;
    const ulong q = g0 + (ulong)g;
    const uint4 ctr = (uint4)((uint)q, (uint)(q >> 32), (uint)offset,
                              (uint)(offset >> 32));
    const uint4 r = rumus_philox4x32_10(ctr, key);
    if (i + 4 <= (size_t)n)
      STORE4(do_apply(LOAD4(x, i), r, thresh, scale), y, i);
    else
      do_tail(x, y, i, (size_t)n, r, thresh, scale);
  }
}
