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
 * Index scheme: g0 is the launch's first group (the host cuts huge
 * tensors into launches).  GPU variant (dropout): work-item g takes group
 * g0 + g, one LOAD4 / STORE4 (typed and aligned under RUMUS_ALIGN4, see
 * common.cl), so neighbouring work-items read neighbouring 16-byte
 * vectors.  CPU variant: work-item g takes DO_U64_GROUPS groups from g0 +
 * g DO_U64_GROUPS, one per 64-bit SIMD lane (dropout_u64, the default),
 * or DO_GROUPS groups from g0 + g DO_GROUPS, one per 32-bit lane of
 * 16-wide vectors, DO_ILP such batches (dropout_vec; both below).  The
 * tensor's last group,
 * when shorter than 4, goes element by element; padding work-items return
 * at the bounds check.
 */

#ifndef DO_LS
#define DO_LS 256 /* local size */
#endif

/* ---- Philox4x32-10 ------------------------------------------------------
 * Self-contained (no -D option, no storage): a family that needs random
 * numbers later can move this block into common.cl unchanged.  The tests
 * check the host reference (ref/dropout.c) against Random123's three
 * published known answers for philox4x32-10, the device against the
 * zero-counter one (the top 24 bits of each word, through p) and against
 * the reference at extreme seeds and offsets. */

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

/* Group q's 4 elements i .. i + 3 (fewer at the tensor's end). */
inline __attribute__((always_inline)) void do_group(global const real_t *x,
                                                    global real_t *y,
                                                    size_t i, size_t n,
                                                    ulong q, uint2 key,
                                                    ulong offset, uint thresh,
                                                    float scale) {
  const uint4 ctr = (uint4)((uint)q, (uint)(q >> 32), (uint)offset,
                            (uint)(offset >> 32));
  const uint4 r = rumus_philox4x32_10(ctr, key);
  if (i + 4 <= n)
    STORE4(do_apply(LOAD4(x, i), r, thresh, scale), y, i);
  else
    do_tail(x, y, i, n, r, thresh, scale);
}

/* GPU variant: one group per work-item.  y = dropout of x over n
 * elements; x may be y (each element is read before it is written, by
 * the same work-item). */
__kernel RUMUS_REQD_WG(DO_LS, 1, 1)
void dropout(global const real_t *x, ulong x_off, global real_t *y,
             ulong y_off, ulong n, ulong g0, ulong seed, ulong offset,
             uint thresh, float scale) {
  const size_t g = get_global_id(0), i = 4 * g;
  if (i >= (size_t)n) return;
  const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
  do_group(x + x_off, y + y_off, i, (size_t)n, g0 + (ulong)g, key, offset,
           thresh, scale);
}

#ifndef DO_CPU_KERNELS
/* 1: the program holds the CPU variant's kernels below (the host leaves
 * them out of the GPU variant's program: they are of no use there, and a
 * GPU compiler need not see their 64-bit lane tricks). */
#define DO_CPU_KERNELS 1
#endif
#if DO_CPU_KERNELS

/* ---- CPU variant: DO_VEC groups per work-item, in SIMD lanes ------------
 * PoCL runs the scalar generator one call at a time (its work-group
 * vectoriser does not take it): 2^24 F32 elements took 170 ms on the
 * 2-core CI machine, where rumus_scale took 4-6 ms; this kernel took
 * 25 ms (16 lanes; computing the products as ulong instead of mul_hi
 * changed nothing measurable).  Here lane l of uintN vectors runs group
 * first + l (structure of arrays), and the words are put back in element
 * order (element 4 l + j takes word j of lane l) 8 at a time for the
 * float8 loads and stores. */

#ifndef DO_VEC
#define DO_VEC 16 /* groups per work-item of dropout_vec: 8 or 16 */
#endif
#define DO_U RUMUS_CAT(uint, DO_VEC)
#define DO_VSTORE_U RUMUS_CAT(vstore, DO_VEC)
#if DO_VEC == 8
#define DO_LANES ((DO_U)(0, 1, 2, 3, 4, 5, 6, 7))
#elif DO_VEC == 16
#define DO_LANES ((DO_U)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#else
#error "DO_VEC must be 8 or 16"
#endif

/* rumus_philox4x32_10 on DO_VEC counters at once: c[j] holds word j. */
inline __attribute__((always_inline)) void do_philox_lanes(DO_U *c,
                                                           uint2 k) {
  for (int r = 0; r < 10; r++) {
    if (r > 0) k += (uint2)(RUMUS_PHILOX_W0, RUMUS_PHILOX_W1);
    const DO_U hi0 = mul_hi(c[0], (DO_U)(RUMUS_PHILOX_M0));
    const DO_U lo0 = c[0] * RUMUS_PHILOX_M0;
    const DO_U hi1 = mul_hi(c[2], (DO_U)(RUMUS_PHILOX_M1));
    const DO_U lo1 = c[2] * RUMUS_PHILOX_M1;
    c[0] = hi1 ^ c[1] ^ k.x;
    c[1] = lo1;
    c[2] = hi0 ^ c[3] ^ k.y;
    c[3] = lo0;
  }
}

/* 4 DO_VEC elements from `i`, all inside the tensor; groups q .. q +
 * DO_VEC - 1. */
inline __attribute__((always_inline)) void do_lanes(global const real_t *x,
                                                    global real_t *y,
                                                    size_t i, ulong q,
                                                    uint2 key, ulong offset,
                                                    uint thresh,
                                                    float scale) {
  DO_U c[4];
  c[0] = (uint)q + DO_LANES;
  /* The carry into the high word where a lane's low word wrapped (never,
   * while launches and work-items start at multiples of DO_VEC groups;
   * kept so that the lanes hold the right counters for any q). */
  c[1] = (uint)(q >> 32) + select((DO_U)(0), (DO_U)(1), c[0] < (uint)q);
  c[2] = (DO_U)((uint)offset);
  c[3] = (DO_U)((uint)(offset >> 32));
  do_philox_lanes(c, key);
  uint w[4][DO_VEC];
  for (int j = 0; j < 4; j++) DO_VSTORE_U(c[j] >> 8, 0, w[j]);
  for (int v = 0; v < DO_VEC / 2; v++) {
    const int l = 2 * v;
    const uint8 bits = (uint8)(w[0][l], w[1][l], w[2][l], w[3][l],
                               w[0][l + 1], w[1][l + 1], w[2][l + 1],
                               w[3][l + 1]);
    const size_t e = i + 8 * (size_t)v;
    const float8 o = LOAD8(x, e) * scale;
    STORE8(select((float8)(0.0f), o, bits >= (uint8)(thresh)), y, e);
  }
}

/* ---- CPU variant, 16 lanes without scalar code ------------------------
 * do_lanes above left PoCL about 4.5 cycles per element on a Zen 4 core
 * (4 M elements on one thread: 6.1 ms where relu took 1.3): the words
 * went back to element order through private arrays, one scalar at a
 * time.  do_lanes16 keeps every step in 512-bit registers: each 32 x 32
 * -> 64-bit product comes from a 64-bit multiply of the even (or odd)
 * lanes, whose halves are the round's lo and hi words (do_mul16, no
 * mul_hi), and the words go to element order by two rounds of two-vector
 * shuffles (a 4 x 4 transpose per 4 groups, do_order16).  The same
 * words, so the same mask. */
#ifndef DO_FAST
#define DO_FAST (DO_VEC == 16) /* do_lanes16 (1) or do_lanes (0) */
#endif
#ifndef DO_ILP
#define DO_ILP 1 /* batches of 16 groups per work-item of do_lanes16 */
#endif
#if DO_FAST
#define DO_GROUPS (16 * DO_ILP) /* groups per work-item of dropout_vec */
#else
#define DO_GROUPS DO_VEC
#endif

#if DO_FAST
/* Lane l of lo and hi: the low and high words of a[l] * m. */
inline __attribute__((always_inline)) void do_mul16(uint16 a, uint m,
                                                    uint16 *lo, uint16 *hi) {
  const ulong8 w = as_ulong8(a);
  const ulong8 pe = (w & (ulong8)(0xFFFFFFFFUL)) * (ulong8)((ulong)m);
  const ulong8 po = (w >> 32) * (ulong8)((ulong)m);
  *lo = as_uint16((pe & (ulong8)(0xFFFFFFFFUL)) | (po << 32));
  *hi = as_uint16((pe >> 32) | (po & (ulong8)(0xFFFFFFFF00000000UL)));
}

/* Two-vector shuffles with constant masks: clang's builtin (one permute
 * instruction) where the compiler has it, else OpenCL's shuffle2.  The
 * mask is one macro argument that expands to its list (OpenCL C has no
 * variadic macros: NVIDIA's compiler refuses them).  ZIP_LO / _HI
 * interleave lanes 0-7 / 8-15 of a and b; PAIR_LO / _HI their lane
 * pairs. */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define DO_SHUFFLEVECTOR 1
#endif
#endif
#ifdef DO_SHUFFLEVECTOR
#define DO_SHUF(a, b, mask) __builtin_shufflevector(a, b, mask)
#else
#define DO_SHUF(a, b, mask) shuffle2(a, b, (uint16)(mask))
#endif
#define DO_ZIP_LO 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define DO_ZIP_HI 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
#define DO_PAIR_LO 0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23
#define DO_PAIR_HI 8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31

/* Words c[0 .. 3] of 16 groups (lane l: group l) in element order: o[v]
 * holds elements 16 v .. 16 v + 15, element 4 l + j word j of group l. */
inline __attribute__((always_inline)) void do_order16(const uint16 *c,
                                                      uint16 *o) {
  const uint16 a0 = DO_SHUF(c[0], c[1], DO_ZIP_LO);
  const uint16 a1 = DO_SHUF(c[0], c[1], DO_ZIP_HI);
  const uint16 b0 = DO_SHUF(c[2], c[3], DO_ZIP_LO);
  const uint16 b1 = DO_SHUF(c[2], c[3], DO_ZIP_HI);
  o[0] = DO_SHUF(a0, b0, DO_PAIR_LO);
  o[1] = DO_SHUF(a0, b0, DO_PAIR_HI);
  o[2] = DO_SHUF(a1, b1, DO_PAIR_LO);
  o[3] = DO_SHUF(a1, b1, DO_PAIR_HI);
}

/* do_lanes for DO_VEC 16, DO_ILP batches of 16 groups at once (their
 * rounds interleaved: one batch's chain of dependent multiplies left a
 * core waiting on latency): the 64 DO_ILP elements from i, groups q ..
 * q + 16 DO_ILP - 1 (batch b: q + 16 b on). */
inline __attribute__((always_inline)) void do_lanes16(
    global const real_t *x, global real_t *y, size_t i, ulong q, uint2 key,
    ulong offset, uint thresh, float scale) {
  uint16 c[DO_ILP][4];
#pragma unroll
  for (int b = 0; b < DO_ILP; b++) {
    const ulong qb = q + 16 * (ulong)b;
    c[b][0] = (uint)qb + DO_LANES;
    c[b][1] = (uint)(qb >> 32) +
              select((uint16)(0), (uint16)(1), c[b][0] < (uint)qb);
    c[b][2] = (uint16)((uint)offset);
    c[b][3] = (uint16)((uint)(offset >> 32));
  }
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r > 0) key += (uint2)(RUMUS_PHILOX_W0, RUMUS_PHILOX_W1);
#pragma unroll
    for (int b = 0; b < DO_ILP; b++) {
      uint16 lo0, hi0, lo1, hi1;
      do_mul16(c[b][0], RUMUS_PHILOX_M0, &lo0, &hi0);
      do_mul16(c[b][2], RUMUS_PHILOX_M1, &lo1, &hi1);
      c[b][0] = hi1 ^ c[b][1] ^ key.x;
      c[b][1] = lo1;
      c[b][2] = hi0 ^ c[b][3] ^ key.y;
      c[b][3] = lo0;
    }
  }
#pragma unroll
  for (int b = 0; b < DO_ILP; b++) {
    uint16 o[4];
    do_order16(c[b], o);
#pragma unroll
    for (int v = 0; v < 4; v++) {
      const size_t e = i + 64 * (size_t)b + 16 * (size_t)v;
      const float16 xv = LOAD16(x, e) * scale;
      STORE16(select((float16)(0.0f), xv, (o[v] >> 8) >= (uint16)(thresh)),
              y, e);
    }
  }
}
#define DO_LANES_FN do_lanes16
#else
#define DO_LANES_FN do_lanes
#endif

/* CPU variant: work-item g takes groups g DO_GROUPS .. (g + 1) DO_GROUPS
 * - 1; the one that holds the tensor's end goes group by group. */
__kernel RUMUS_REQD_WG(DO_LS, 1, 1)
void dropout_vec(global const real_t *x, ulong x_off, global real_t *y,
                 ulong y_off, ulong n, ulong g0, ulong seed, ulong offset,
                 uint thresh, float scale) {
  const size_t g = get_global_id(0) * (size_t)DO_GROUPS, i = 4 * g;
  if (i >= (size_t)n) return;
  x += x_off;
  y += y_off;
  const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
  if (i + 4 * DO_GROUPS <= (size_t)n) {
    DO_LANES_FN(x, y, i, g0 + (ulong)g, key, offset, thresh, scale);
    return;
  }
  for (size_t k = 0; i + 4 * k < (size_t)n; k++)
    do_group(x, y, i + 4 * k, (size_t)n, g0 + (ulong)(g + k), key, offset,
             thresh, scale);
}

/* ---- CPU variant, one Philox call per 64-bit lane ----------------------
 * On AVX2 (no 512-bit registers) dropout_vec's uint16 state is two
 * registers per word, and each round splits every word into even and odd
 * lanes for the 32 x 32 -> 64-bit products and merges the halves back:
 * 7 instructions per product per 8 calls, and 4 batches spill.  Here word
 * j of DO_W calls sits in the low halves of a ulongDO_W, c[j]: the
 * product (c & 0xFFFFFFFF) * M is one vpmuludq whose low half is already
 * the next round's word and whose high half is one shift away, and the
 * high halves of the state are left as garbage (the products read only
 * the low halves; the words are cut to 32 bits at the end).  A round is 2
 * products, 2 shifts and 4 xors per DO_W calls.  Lane l holds call l / 2
 * (even l) or DO_W / 2 + l / 2 (odd l), so that after pairing words 0, 1
 * and 2, 3 into 64-bit lanes, the even-lane interleave (x86's
 * punpcklqdq, per 128 bits) of the two is already calls 0 .. DO_W / 2 - 1
 * in element order and the odd-lane interleave the rest.  The same words,
 * so the same mask.  On a 2-vCPU AMD EPYC (Zen 3, AVX2) guest, F32 at
 * 2^20 elements (in cache: the generator's cost) took 0.44-0.49 ms where
 * dropout_vec took 0.65 (best of 300 alternated runs; the machine was
 * shared), and about 20% less CPU time at 2^24. */
#ifndef DO_W
#define DO_W 4 /* calls per vector of dropout_u64: 4 (AVX2) or 8 */
#endif
#ifndef DO_U64_ILP
#define DO_U64_ILP 2 /* vectors of DO_W calls per block, interleaved */
#endif
#define DO_UL RUMUS_CAT(ulong, DO_W)
#if DO_W == 4
#define DO_W2 8
#define DO_UI uint8
#define DO_FV float8
#define DO_IV int8
#define DO_LDV(p, i) LOAD8(p, i)
#define DO_STV(v, p, i) STORE8(v, p, i)
#define DO_CALLS ((DO_UL)(0, 2, 1, 3))
#define DO_PAIR 0, 8, 2, 10, 4, 12, 6, 14
#define DO_EVEN 0, 4, 2, 6
#define DO_ODD 1, 5, 3, 7
#elif DO_W == 8
#define DO_W2 16
#define DO_UI uint16
#define DO_FV float16
#define DO_IV int16
#define DO_LDV(p, i) LOAD16(p, i)
#define DO_STV(v, p, i) STORE16(v, p, i)
#define DO_CALLS ((DO_UL)(0, 4, 1, 5, 2, 6, 3, 7))
#define DO_PAIR 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define DO_EVEN 0, 8, 2, 10, 4, 12, 6, 14
#define DO_ODD 1, 9, 3, 11, 5, 13, 7, 15
#else
#error "DO_W must be 4 or 8"
#endif
#define DO_AS_UI RUMUS_CAT(as_uint, DO_W2)
#define DO_AS_UL RUMUS_CAT(as_ulong, DO_W)
#define DO_AS_IV RUMUS_CAT(as_int, DO_W2)
#define DO_AS_FV RUMUS_CAT(as_float, DO_W2)
#ifndef DO_U64_REP
#define DO_U64_REP 1 /* such blocks per work-item, one after another */
#endif
#define DO_U64_BLOCK (DO_W * DO_U64_ILP) /* groups of one block */
#define DO_U64_GROUPS (DO_U64_BLOCK * DO_U64_REP) /* per work-item */
/* Two-vector shuffles with constant masks, as DO_SHUF (T: the mask type
 * of shuffle2, where the builtin is missing). */
#if defined(__has_builtin) && !defined(DO_SHUFFLEVECTOR)
#if __has_builtin(__builtin_shufflevector)
#define DO_SHUFFLEVECTOR 1
#endif
#endif
#ifdef DO_SHUFFLEVECTOR
#define DO_SHUF2(T, a, b, mask) __builtin_shufflevector(a, b, mask)
#else
#define DO_SHUF2(T, a, b, mask) shuffle2(a, b, (T)(mask))
#endif

/* The low 32 bits of a times m, as 64 bits. */
#define DO_MUL(a, m) (((a) & (DO_UL)(0xFFFFFFFFUL)) * (DO_UL)((ulong)(m)))

/* Words c[0 .. 3] of DO_W calls (lanes as above, low halves) in element
 * order: the 4 DO_W words of the calls' 4 DO_W elements, o[0] the first
 * half and o[1] the second. */
inline __attribute__((always_inline)) void do_order_u64(const DO_UL *c,
                                                        DO_UI *o) {
  const DO_UI a = DO_SHUF2(DO_UI, DO_AS_UI(c[0]), DO_AS_UI(c[1]), DO_PAIR);
  const DO_UI b = DO_SHUF2(DO_UI, DO_AS_UI(c[2]), DO_AS_UI(c[3]), DO_PAIR);
  o[0] = DO_AS_UI(DO_SHUF2(DO_UL, DO_AS_UL(a), DO_AS_UL(b), DO_EVEN));
  o[1] = DO_AS_UI(DO_SHUF2(DO_UL, DO_AS_UL(a), DO_AS_UL(b), DO_ODD));
}

/* The DO_U64_ILP vectors of calls from group q (vector b: groups q + DO_W
 * b on) over the 4 DO_U64_GROUPS elements from i, all inside the tensor.
 * The first round takes words 2 and 3 (the offset, the same in every
 * lane) as scalars. */
inline __attribute__((always_inline)) void do_lanes_u64(
    global const real_t *x, global real_t *y, size_t i, ulong q, uint2 key,
    ulong offset, uint thresh, float scale) {
  const ulong p1 = (ulong)(uint)offset * RUMUS_PHILOX_M1;
  const ulong k0 = (ulong)((uint)(p1 >> 32) ^ key.x);
  const ulong k1 = (ulong)((uint)(offset >> 32) ^ key.y);
  DO_UL c[DO_U64_ILP][4];
#pragma unroll
  for (int b = 0; b < DO_U64_ILP; b++) {
    const DO_UL ctr = (DO_UL)(q + (ulong)(DO_W * b)) + DO_CALLS;
    const DO_UL p0 = DO_MUL(ctr, RUMUS_PHILOX_M0);
    c[b][0] = (ctr >> 32) ^ k0;
    c[b][1] = (DO_UL)(p1);
    c[b][2] = (p0 >> 32) ^ k1;
    c[b][3] = p0;
  }
#pragma unroll
  for (int r = 1; r < 10; r++) {
    key += (uint2)(RUMUS_PHILOX_W0, RUMUS_PHILOX_W1);
    const DO_UL kx = (DO_UL)((ulong)key.x), ky = (DO_UL)((ulong)key.y);
#pragma unroll
    for (int b = 0; b < DO_U64_ILP; b++) {
      const DO_UL p0 = DO_MUL(c[b][0], RUMUS_PHILOX_M0);
      const DO_UL p1 = DO_MUL(c[b][2], RUMUS_PHILOX_M1);
      c[b][0] = (p1 >> 32) ^ c[b][1] ^ kx;
      c[b][1] = p1;
      c[b][2] = (p0 >> 32) ^ c[b][3] ^ ky;
      c[b][3] = p0;
    }
  }
  /* Kept when (r >> 8) >= thresh, as a signed comparison of 24-bit values
   * (thresh >= 1: p = 0 never launches). */
  const DO_IV t = (DO_IV)((int)thresh - 1);
#pragma unroll
  for (int b = 0; b < DO_U64_ILP; b++) {
    DO_UI o[2];
    do_order_u64(c[b], o);
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const size_t e = i + 4 * DO_W * (size_t)b + 2 * DO_W * (size_t)h;
      const DO_IV keep = DO_AS_IV(o[h] >> 8) > t;
      const DO_FV v = DO_LDV(x, e) * scale;
      DO_STV(DO_AS_FV(DO_AS_IV(v) & keep), y, e);
    }
  }
}

/* CPU variant, DO_U64_GROUPS groups per work-item, as dropout_vec. */
__kernel RUMUS_REQD_WG(DO_LS, 1, 1)
void dropout_u64(global const real_t *x, ulong x_off, global real_t *y,
                 ulong y_off, ulong n, ulong g0, ulong seed, ulong offset,
                 uint thresh, float scale) {
  const size_t g = get_global_id(0) * (size_t)DO_U64_GROUPS, i = 4 * g;
  if (i >= (size_t)n) return;
  x += x_off;
  y += y_off;
  const uint2 key = (uint2)((uint)seed, (uint)(seed >> 32));
  if (i + 4 * DO_U64_GROUPS <= (size_t)n) {
    for (int s = 0; s < DO_U64_REP; s++)
      do_lanes_u64(x, y, i + 4 * DO_U64_BLOCK * (size_t)s,
                   g0 + (ulong)(g + DO_U64_BLOCK * (size_t)s), key, offset,
                   thresh, scale);
    return;
  }
  for (size_t k = 0; i + 4 * k < (size_t)n; k++)
    do_group(x, y, i + 4 * k, (size_t)n, g0 + (ulong)(g + k), key, offset,
             thresh, scale);
}
#endif /* DO_CPU_KERNELS */
