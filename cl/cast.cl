/*
 * cast.cl - conversions between storage types (rumus_cast):
 *
 *   dst[i] = src[i] converted, i < n
 *
 * for every pair of F32, F16 and BF16 and from I32 to each of them, bit for
 * bit as the host conversions of src/half.c: rumus_f32_to_f16(),
 * rumus_f16_to_f32(), rumus_f32_to_bf16(), rumus_bf16_to_f32(), and their
 * compositions through float for F16 <-> BF16 and I32 -> F16 / BF16.
 * Every element goes through its float bits: the source is widened to the
 * 32 bits of a float (exact for F16 and BF16; int -> float rounds to nearest
 * even), then narrowed to the destination (rounded to nearest even).
 *
 * The conversions are integer arithmetic on the bits (and one exact float
 * addition for F16's subnormals), not vstore_half / vload_half: those may
 * give any NaN for a NaN (PoCL 3.1's vstore_half_rte writes 0x7FFF for
 * every positive NaN, and its vload_half quiets a signalling one), and a
 * cast must give the host's bits, NaN payloads included: F32 -> F16 keeps
 * the payload's top 10 bits with the quiet bit set, F16 -> F32 widens the
 * payload unchanged, BF16 keeps the top 16 bits of a float NaN with the
 * quiet bit set.  No float value is loaded or stored, so no move can quiet
 * a NaN either.
 *
 * Index scheme: that of elementwise.cl's flat kernels (the same -D options,
 * written by the same options function): work-item g converts elements
 * [g * EW_SPAN, (g + 1) * EW_SPAN), EW_NV vectors of EW_VW elements
 * (typed, vector-aligned accesses under RUMUS_ALIGN4), a vector that would
 * cross the end lane by lane through private arrays.  Kernels are picked by
 * name, cast_<from>_<to>, so one program serves every pair.
 */

#ifndef EW_VW
#define EW_VW 8 /* elements per vector: 4, 8 or 16 */
#endif
#ifndef EW_NV
#define EW_NV 4 /* contiguous vectors per work-item */
#endif
#ifndef EW_LS
#define EW_LS 64 /* local size */
#endif
#define EW_SPAN (EW_VW * EW_NV)

#if EW_VW != 4 && EW_VW != 8 && EW_VW != 16
#error "EW_VW must be 4, 8 or 16"
#endif

#define CAST_INLINE inline __attribute__((always_inline))

/* The vector of EW_VW elements of a scalar type, and its conversions. */
#define CAST_V(t) RUMUS_CAT(t, EW_VW)
#define CAST_CONVERT(t, v) RUMUS_CAT(convert_, CAST_V(t))(v)
#define CAST_AS(t, v) RUMUS_CAT(as_, CAST_V(t))(v)
#define CAST_VLOAD(p, i) RUMUS_CAT(vload, EW_VW)(0, (p) + (i))
#define CAST_VSTORE(v, p, i) RUMUS_CAT(vstore, EW_VW)((v), 0, (p) + (i))

typedef CAST_V(uint) bits32_t;
typedef CAST_V(int) ibits32_t;
typedef CAST_V(ushort) bits16_t;

/* The element of each tag as bits (I32: the integer itself). */
#define CAST_E_F32 uint
#define CAST_E_F16 ushort
#define CAST_E_BF16 ushort
#define CAST_E_I32 int

/* A vector of elements of tag T at p + i, and a store of one: typed
 * accesses when the host found them vector-aligned (RUMUS_ALIGN4), vloadn
 * otherwise.  The CPU settings (EW_VW 8, 16) store through a packed struct
 * instead of vstoren: PoCL 3.1 turns vstore8 of a ushort8 into eight
 * 2-byte stores, and an access the compiler knows to be unaligned into
 * one (vmovdqu); this made the casts to F16 and BF16 up to twice as fast
 * on the CI machine. */
typedef struct __attribute__((packed, aligned(4))) {
  CAST_V(uint) bits;
} cast_pv_F32;
typedef struct __attribute__((packed, aligned(2))) {
  CAST_V(ushort) bits;
} cast_pv_F16;
typedef cast_pv_F16 cast_pv_BF16;
#if RUMUS_ALIGN4
#define CAST_LOADV(T, p, i) (*(global const CAST_V(CAST_E_##T) *)((p) + (i)))
#define CAST_STOREV(T, v, p, i)                                               \
  (*(global CAST_V(CAST_E_##T) *)((p) + (i)) = (v))
#elif EW_VW >= 8
#define CAST_LOADV(T, p, i) CAST_VLOAD(p, i)
#define CAST_STOREV(T, v, p, i)                                               \
  (((global cast_pv_##T *)((p) + (i)))->bits = (v))
#else
#define CAST_LOADV(T, p, i) CAST_VLOAD(p, i)
#define CAST_STOREV(T, v, p, i) CAST_VSTORE(v, p, i)
#endif

/* Half bits -> float bits, exactly: normal numbers rebias the exponent
 * (15 -> 127), infinities and NaN keep their payload, subnormals are
 * m 2^-24 (m < 2^10: exact in float, and a normal float). */
CAST_INLINE bits32_t cast_f16_to_32(bits16_t h) {
  const bits32_t u = CAST_CONVERT(uint, h);
  const bits32_t sign = (u & 0x8000u) << 16;
  const bits32_t e = (u >> 10) & 0x1Fu, m = u & 0x3FFu;
  const bits32_t normal = sign | ((e + 112u) << 23) | (m << 13);
  const bits32_t special = sign | 0x7F800000u | (m << 13);
  const bits32_t sub = sign | CAST_AS(uint, CAST_CONVERT(float, m) * 0x1p-24f);
  return select(select(normal, special, e == 31u), sub, e == 0u);
}

/* Float bits -> half bits, rounded to nearest even (rumus_f32_to_f16):
 *   NaN          quiet, sign and the payload's top 10 bits;
 *   >= 65520     (0x477FF000) +-infinity;
 *   >= 2^-14     rebias the exponent and round the 13 dropped bits (a
 *                carry out of the significand bumps the exponent, which is
 *                what rounding up to the next binade or to 65536 needs);
 *   below        a subnormal m 2^-24, m = |x| / 2^-24 rounded to nearest
 *                even: the float sum |x| + 0.5 makes exactly that rounding,
 *                since float's ulp at 0.5 is 2^-24, and m is the sum's bits
 *                less those of 0.5 (m = 1024 is the smallest normal half,
 *                as it should be).  A float subnormal |x| adds nothing, on
 *                devices that flush it as well. */
CAST_INLINE bits16_t cast_32_to_f16(bits32_t u) {
  const bits32_t sign = (u >> 16) & 0x8000u;
  const bits32_t ax = u & 0x7FFFFFFFu;
  const bits32_t r = ax - 0x38000000u;
  const bits32_t normal = (r + 0xFFFu + ((r >> 13) & 1u)) >> 13;
  const bits32_t sub = CAST_AS(uint, CAST_AS(float, ax) + 0.5f) - 0x3F000000u;
  bits32_t h = select(normal, sub, ax < 0x38800000u);
  h = select(h, (bits32_t)0x7C00u, ax >= 0x477FF000u);
  h = select(h, 0x7E00u | ((ax >> 13) & 0x3FFu), ax > 0x7F800000u);
  return CAST_CONVERT(ushort, sign | h);
}

/* Float bits -> bfloat16 bits, rounded to nearest even; NaN keeps its top
 * 16 bits with the quiet bit set (rumus_f32_to_bf16). */
CAST_INLINE bits16_t cast_32_to_bf16(bits32_t u) {
  const bits32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const bits32_t nan = (u >> 16) | 0x40u;
  return CAST_CONVERT(ushort,
                      select(r, nan, (u & 0x7FFFFFFFu) > 0x7F800000u));
}

/* Tag -> float bits, and float bits -> tag. */
#define CAST_TO32_F32(v) (v)
#define CAST_TO32_F16(v) cast_f16_to_32(v)
#define CAST_TO32_BF16(v) (CAST_CONVERT(uint, v) << 16)
#define CAST_TO32_I32(v) CAST_AS(uint, CAST_CONVERT(float, v))
#define CAST_FROM32_F32(u) (u)
#define CAST_FROM32_F16(u) cast_32_to_f16(u)
#define CAST_FROM32_BF16(u) cast_32_to_bf16(u)
#define CAST_CONV(S, D, v) CAST_FROM32_##D(CAST_TO32_##S(v))

/* cast_NAME(src, src_off, dst, dst_off, n) from tag S to tag D. */
#define CAST_KERNEL(name, S, D)                                               \
  __kernel RUMUS_REQD_WG(EW_LS, 1, 1)                                         \
  void cast_##name(global const CAST_E_##S *src, ulong src_off,               \
                   global CAST_E_##D *dst, ulong dst_off, ulong n) {          \
    const size_t base = get_global_id(0) * (size_t)EW_SPAN, end = (size_t)n;  \
    if (base >= end) return;                                                  \
    src += (size_t)src_off;                                                   \
    dst += (size_t)dst_off;                                                   \
    const size_t stop = min(base + (size_t)EW_SPAN, end);                     \
    size_t i = base;                                                          \
    for (; i + EW_VW <= stop; i += EW_VW)                                     \
      CAST_STOREV(D, CAST_CONV(S, D, CAST_LOADV(S, src, i)), dst, i);         \
    if (i == stop) return;                                                    \
    CAST_E_##S ps[EW_VW];                                                     \
    CAST_E_##D pd[EW_VW];                                                     \
    for (int k = 0; k < EW_VW; k++)                                           \
      ps[k] = i + (size_t)k < stop ? src[i + k] : (CAST_E_##S)0;              \
    CAST_VSTORE(CAST_CONV(S, D, CAST_VLOAD(ps, 0)), pd, 0);                   \
    for (int k = 0; i + (size_t)k < stop; k++) dst[i + k] = pd[k];            \
  }

CAST_KERNEL(f32_f16, F32, F16)
CAST_KERNEL(f32_bf16, F32, BF16)
CAST_KERNEL(f16_f32, F16, F32)
CAST_KERNEL(f16_bf16, F16, BF16)
CAST_KERNEL(bf16_f32, BF16, F32)
CAST_KERNEL(bf16_f16, BF16, F16)
CAST_KERNEL(i32_f32, I32, F32)
CAST_KERNEL(i32_f16, I32, F16)
CAST_KERNEL(i32_bf16, I32, BF16)
