/*
 * common.cl - definitions shared by every rumus kernel program.  The host
 * builds each program as this file followed by one family's .cl file, and
 * specialises it only through -D options, so the options string names the
 * variant.  Every macro below has a default, so each file compiles alone.
 *
 * Storage and arithmetic: floating tensors are stored as F32 (float), F16
 * (IEEE half through vload_half / vstore_half_rte, which are core OpenCL C
 * and need no cl_khr_fp16) or BF16 (the upper 16 bits of a float in a
 * ushort, rounded to nearest even); arithmetic and accumulators are always
 * float.  A kernel names a storage tag, not a type: RUMUS_TYPE(T),
 * RUMUS_LOAD(T, p, i), RUMUS_STORE(T, v, p, i) and their 4-, 8- and
 * 16-wide forms.  RUMUS_STORAGE is the program's main tag (real_t, LOAD,
 * STORE, LOAD4, ...); a family with tensors of a second type (GEMM's C, an
 * optimizer's master weights) takes a second tag of its own.
 *
 * Indexing: element offsets and extents arrive as ulong and index math is
 * done in size_t, so tensors over 2^31 elements are addressed correctly.
 */
#ifndef RUMUS_COMMON_CL
#define RUMUS_COMMON_CL

#ifdef __clang__
/* An unroll pragma on a loop whose trip count is constant only at some
 * call sites makes clang (PoCL) warn where it cannot unroll, and PoCL
 * then prints a count of warnings on the application's stderr. */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

#ifndef RUMUS_STORAGE
#define RUMUS_STORAGE F32 /* storage of the floating tensors: F32, F16, BF16 */
#endif

#ifndef WG
#define WG 256 /* work-group size of work-group (GPU) reduction kernels */
#endif

#ifndef CACHE_V4
#define CACHE_V4 8 /* float4 per work-item that row kernels keep in registers */
#endif

/* The one required-work-group-size attribute of every kernel: it lets
 * compilers size local arrays and unroll reductions, and PoCL compile one
 * work-group function; RUMUS_RELAX_WG drops it for drivers that reject it.
 * RUMUS_WG_ATTR is the reductions' (WG x 1 x 1). */
#ifdef RUMUS_RELAX_WG
#define RUMUS_REQD_WG(x, y, z)
#else
#define RUMUS_REQD_WG(x, y, z) __attribute__((reqd_work_group_size(x, y, z)))
#endif
#define RUMUS_WG_ATTR RUMUS_REQD_WG(WG, 1, 1)

#ifndef RUMUS_ALIGN4
/* 1: every LOAD4 / STORE4 of the program is at a 16-byte aligned address
 * (the host checked that the tensors' element offsets, and the row length
 * of row ops, are multiples of 4), so they are typed float4 accesses:
 * vload4 may assume only the alignment of one float, and NVIDIA's compiler
 * then issues four 4-byte loads.  On the H200 this took axpy from 89% to
 * 103% of copy and softmax at 16384 x 8192 from 91% to 99%. */
#define RUMUS_ALIGN4 0
#endif
#ifndef RUMUS_ALIGN8
/* 1: the same for LOAD8 / STORE8 at 8-element aligned addresses (16
 * bytes of 16-bit storage: one wide access per work-item on a GPU). */
#define RUMUS_ALIGN8 0
#endif

/* ---- Storage ------------------------------------------------------------ */

#define RUMUS_CAT_(a, b) a##b
#define RUMUS_CAT(a, b) RUMUS_CAT_(a, b)

/* bfloat16 <-> float: widening is exact; narrowing rounds to nearest even,
 * overflows to +-inf as IEEE rounding does, and keeps NaN a (quiet) NaN
 * with its sign and top payload bits (rumus_bf16_rne*: about ten integer
 * operations a value). */
#define RUMUS_DEFINE_BF16(n, F, U, US, AS_F, AS_U, CONV_U, CONV_US)          \
  inline __attribute__((always_inline)) F rumus_bf16_to_f##n(US b) {         \
    return AS_F(CONV_U(b) << 16);                                            \
  }                                                                          \
  inline __attribute__((always_inline)) US rumus_bf16_rne##n(F f) {          \
    const U u = AS_U(f);                                                     \
    const U r = (u + (U)0x7FFFu + ((u >> 16) & (U)1u)) >> 16;                \
    const U nan = (u >> 16) | (U)0x40u;                                      \
    return CONV_US(select(r, nan, (u & (U)0x7FFFFFFFu) > (U)0x7F800000u));   \
  }
RUMUS_DEFINE_BF16(4, float4, uint4, ushort4, as_float4, as_uint4,
                  convert_uint4, convert_ushort4)
RUMUS_DEFINE_BF16(8, float8, uint8, ushort8, as_float8, as_uint8,
                  convert_uint8, convert_ushort8)
RUMUS_DEFINE_BF16(16, float16, uint16, ushort16, as_float16, as_uint16,
                  convert_uint16, convert_ushort16)
inline __attribute__((always_inline)) float rumus_bf16_to_f(ushort b) {
  return as_float((uint)b << 16);
}
inline __attribute__((always_inline)) ushort rumus_bf16_rne(float f) {
  const uint u = as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)((u >> 16) | 0x40u);
  return (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* NVIDIA GPUs of compute capability 8.0 and later (RUMUS_NV_SM, the host's
 * figure; cl_nv_pragma_unroll is defined by NVIDIA's compiler alone) round
 * two floats to bfloat16 in one instruction, cvt.rn.bf16x2.f32, the same
 * bits as rumus_bf16_rne* but for NaNs, which it makes the canonical NaN:
 * so a vector with a NaN takes the portable code.  The integer code's
 * cost showed in BF16 kernels that F16's conversion instructions keep at
 * copy speed. */
#ifndef RUMUS_NV_SM
#define RUMUS_NV_SM 0
#endif
#if defined(cl_nv_pragma_unroll) && RUMUS_NV_SM >= 80
/* The bits of lo in the low half, as little-endian memory wants them. */
inline __attribute__((always_inline)) uint rumus_nv_bf16x2(float lo, float hi) {
  uint r;
  __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
inline __attribute__((always_inline)) ushort4 rumus_nv_bf16_4(float4 f) {
  return as_ushort4((uint2)(rumus_nv_bf16x2(f.s0, f.s1),
                            rumus_nv_bf16x2(f.s2, f.s3)));
}
inline __attribute__((always_inline)) ushort8 rumus_nv_bf16_8(float8 f) {
  return (ushort8)(rumus_nv_bf16_4(f.lo), rumus_nv_bf16_4(f.hi));
}
inline __attribute__((always_inline)) ushort16 rumus_nv_bf16_16(float16 f) {
  return (ushort16)(rumus_nv_bf16_8(f.lo), rumus_nv_bf16_8(f.hi));
}
#define RUMUS_F_TO_BF16(n, f)                                                \
  (any(isnan(f)) ? rumus_bf16_rne##n(f) : rumus_nv_bf16_##n(f))
inline __attribute__((always_inline)) ushort rumus_f_to_bf16(float f) {
  return isnan(f) ? rumus_bf16_rne(f) : (ushort)rumus_nv_bf16x2(f, 0.0f);
}
#else
#define RUMUS_F_TO_BF16(n, f) rumus_bf16_rne##n(f)
inline __attribute__((always_inline)) ushort rumus_f_to_bf16(float f) {
  return rumus_bf16_rne(f);
}
#endif
inline __attribute__((always_inline)) ushort4 rumus_f_to_bf164(float4 f) {
  return RUMUS_F_TO_BF16(4, f);
}
inline __attribute__((always_inline)) ushort8 rumus_f_to_bf168(float8 f) {
  return RUMUS_F_TO_BF16(8, f);
}
inline __attribute__((always_inline)) ushort16 rumus_f_to_bf1616(float16 f) {
  return RUMUS_F_TO_BF16(16, f);
}

#ifndef RUMUS_F16_BITS
/* 1 (the framework sets it on the work-group variant): F16 elements move
 * as ushort vectors, one wide typed access, and are converted in private
 * memory by vload_half / vstore_half_rte, which compilers turn into the
 * register conversion instructions.  NVIDIA's driver (no cl_khr_fp16)
 * compiled vloada_half8 / vstorea_half8_rte on global memory into narrow
 * accesses: on the H200 F16 add and ReLU ran at 41% and 25% of copy
 * bandwidth where the same kernels on BF16 bits ran at 91% and 93%; an
 * integer conversion of the bits instead was slower still for softmax
 * (35% of copy).  PoCL keeps the builtins on global memory on the CPU
 * variant. */
#define RUMUS_F16_BITS 0
#endif

#if RUMUS_F16_BITS
#define RUMUS_DEFINE_F16(n, F, US)                                           \
  inline __attribute__((always_inline)) F rumus_f16_to_f##n(US h) {          \
    return vload_half##n(0, (const private half *)&h);                       \
  }                                                                          \
  inline __attribute__((always_inline)) US rumus_f_to_f16##n(F f) {          \
    US h;                                                                    \
    vstore_half##n##_rte(f, 0, (private half *)&h);                          \
    return h;                                                                \
  }
RUMUS_DEFINE_F16(, float, ushort)
RUMUS_DEFINE_F16(4, float4, ushort4)
RUMUS_DEFINE_F16(8, float8, ushort8)
RUMUS_DEFINE_F16(16, float16, ushort16)
#endif

/* The element type of each storage tag. */
#define RUMUS_TYPE_F32 float
#define RUMUS_TYPE_F16 half
#define RUMUS_TYPE_BF16 ushort
#define RUMUS_TYPE(T) RUMUS_CAT(RUMUS_TYPE_, T)

/* One element: p[i] as a float, and v stored into p[i]. */
#define RUMUS_LD_F32(p, i) ((p)[i])
#define RUMUS_ST_F32(v, p, i) ((p)[i] = (v))
#if RUMUS_F16_BITS
#define RUMUS_LD_F16(p, i) rumus_f16_to_f(((global const ushort *)(p))[i])
#define RUMUS_ST_F16(v, p, i) (((global ushort *)(p))[i] = rumus_f_to_f16(v))
#else
#define RUMUS_LD_F16(p, i) vload_half((i), (p))
#define RUMUS_ST_F16(v, p, i) vstore_half_rte((v), (i), (p))
#endif
#define RUMUS_LD_BF16(p, i) rumus_bf16_to_f((p)[i])
#define RUMUS_ST_BF16(v, p, i) ((p)[i] = rumus_f_to_bf16(v))
#define RUMUS_LOAD(T, p, i) RUMUS_CAT(RUMUS_LD_, T)(p, i)
#define RUMUS_STORE(T, v, p, i) RUMUS_CAT(RUMUS_ST_, T)(v, p, i)

/* F16 moves in groups of 4 and BF16 stores go through packed structs,
 * for two PoCL 3.1 (x86 with F16C) problems: it may compile vload_half8 /
 * 16 and vstore_half8 / 16_rte as 16-byte-aligned moves (vmovdqa) when it
 * does not fold them into the conversion, which fault at addresses that
 * are only element-aligned (F16 rows of 67 halves, a ReLU at an odd
 * offset); and it turns vstore8 of a ushort8 into eight 2-byte stores,
 * where a store through a packed struct, known to be unaligned, is one
 * instruction (BF16 scale and add ran 3-5x faster on the CI machine). */
inline __attribute__((always_inline)) float4
rumus_ld_half4(global const half *p) {
  return vload_half4(0, p);
}
inline __attribute__((always_inline)) float8
rumus_ld_half8(global const half *p) {
  return (float8)(vload_half4(0, p), vload_half4(0, p + 4));
}
inline __attribute__((always_inline)) float16
rumus_ld_half16(global const half *p) {
  return (float16)(rumus_ld_half8(p), rumus_ld_half8(p + 8));
}
inline __attribute__((always_inline)) void rumus_st_half4(float4 v,
                                                          global half *p) {
  vstore_half4_rte(v, 0, p);
}
inline __attribute__((always_inline)) void rumus_st_half8(float8 v,
                                                          global half *p) {
  vstore_half4_rte(v.lo, 0, p);
  vstore_half4_rte(v.hi, 0, p + 4);
}
inline __attribute__((always_inline)) void rumus_st_half16(float16 v,
                                                           global half *p) {
  rumus_st_half8(v.lo, p);
  rumus_st_half8(v.hi, p + 8);
}
typedef struct __attribute__((packed, aligned(2))) {
  ushort4 bits;
} rumus_u16x4;
typedef struct __attribute__((packed, aligned(2))) {
  ushort8 bits;
} rumus_u16x8;
typedef struct __attribute__((packed, aligned(2))) {
  ushort16 bits;
} rumus_u16x16;

/* n consecutive elements from p + i (n = 4, 8, 16) as a floatn, element
 * alignment only (vloadn may assume no more). */
#define RUMUS_LDN_F32(n, p, i) vload##n(0, (p) + (i))
#define RUMUS_STN_F32(n, v, p, i) vstore##n((v), 0, (p) + (i))
#if RUMUS_F16_BITS
#define RUMUS_LDN_F16(n, p, i)                                               \
  rumus_f16_to_f##n(vload##n(0, (global const ushort *)((p) + (i))))
#define RUMUS_STN_F16(n, v, p, i)                                            \
  (((global rumus_u16x##n *)((p) + (i)))->bits = rumus_f_to_f16##n(v))
#else
#define RUMUS_LDN_F16(n, p, i) rumus_ld_half##n((p) + (i))
#define RUMUS_STN_F16(n, v, p, i) rumus_st_half##n((v), (p) + (i))
#endif
#define RUMUS_LDN_BF16(n, p, i) rumus_bf16_to_f##n(vload##n(0, (p) + (i)))
#define RUMUS_STN_BF16(n, v, p, i)                                           \
  (((global rumus_u16x##n *)((p) + (i)))->bits = rumus_f_to_bf16##n(v))
#define RUMUS_LOADN(T, n, p, i) RUMUS_CAT(RUMUS_LDN_, T)(n, p, i)
#define RUMUS_STOREN(T, n, v, p, i) RUMUS_CAT(RUMUS_STN_, T)(n, v, p, i)

/* The same at an address aligned to the whole vector (the host checked
 * it: rumus__aligned), as typed accesses, which GPU compilers turn into
 * one wide memory instruction; vloadn becomes n narrow loads on NVIDIA. */
#define RUMUS_LDA_F32(n, p, i) (*(global const float##n *)((p) + (i)))
#define RUMUS_STA_F32(n, v, p, i) (*(global float##n *)((p) + (i)) = (v))
#if RUMUS_F16_BITS
#define RUMUS_LDA_F16(n, p, i)                                               \
  rumus_f16_to_f##n(*(global const ushort##n *)((p) + (i)))
#define RUMUS_STA_F16(n, v, p, i)                                            \
  (*(global ushort##n *)((p) + (i)) = rumus_f_to_f16##n(v))
#else
/* Stores convert in registers (rumus_st_half): PoCL folds a whole
 * vstorea_half8_rte into vcvtps2ph with a memory operand, which on AMD Zen
 * 3 is several times slower than the register form and a plain store (F16
 * AdamW at 2^24 elements: 51-55% of STREAM against 28-35% in alternated
 * runs on a shared 2-vCPU machine; the same rounding instruction). */
#define RUMUS_LDA_F16(n, p, i) vloada_half##n(0, (p) + (i))
#define RUMUS_STA_F16(n, v, p, i) rumus_st_half##n((v), (p) + (i))
#endif
#define RUMUS_LDA_BF16(n, p, i)                                              \
  rumus_bf16_to_f##n(*(global const ushort##n *)((p) + (i)))
#define RUMUS_STA_BF16(n, v, p, i)                                           \
  (*(global ushort##n *)((p) + (i)) = rumus_f_to_bf16##n(v))
#define RUMUS_LOADA(T, n, p, i) RUMUS_CAT(RUMUS_LDA_, T)(n, p, i)
#define RUMUS_STOREA(T, n, v, p, i) RUMUS_CAT(RUMUS_STA_, T)(n, v, p, i)

/* The program's main storage. */
typedef RUMUS_TYPE(RUMUS_STORAGE) real_t;
#define LOAD(p, i) RUMUS_LOAD(RUMUS_STORAGE, p, i)
#define STORE(v, p, i) RUMUS_STORE(RUMUS_STORAGE, v, p, i)
#if RUMUS_ALIGN4
#define LOAD4(p, i) RUMUS_LOADA(RUMUS_STORAGE, 4, p, i)
#define STORE4(v, p, i) RUMUS_STOREA(RUMUS_STORAGE, 4, v, p, i)
#else
#define LOAD4(p, i) RUMUS_LOADN(RUMUS_STORAGE, 4, p, i)
#define STORE4(v, p, i) RUMUS_STOREN(RUMUS_STORAGE, 4, v, p, i)
#endif
#if RUMUS_ALIGN8
#define LOAD8(p, i) RUMUS_LOADA(RUMUS_STORAGE, 8, p, i)
#define STORE8(v, p, i) RUMUS_STOREA(RUMUS_STORAGE, 8, v, p, i)
#else
#define LOAD8(p, i) RUMUS_LOADN(RUMUS_STORAGE, 8, p, i)
#define STORE8(v, p, i) RUMUS_STOREN(RUMUS_STORAGE, 8, v, p, i)
#endif
#define LOAD16(p, i) RUMUS_LOADN(RUMUS_STORAGE, 16, p, i)
#define STORE16(v, p, i) RUMUS_STOREN(RUMUS_STORAGE, 16, v, p, i)

/* Sum and max of the lanes of a float8 / float4. */
inline float rumus_hsum8(float8 v) {
  float4 a = v.lo + v.hi;
  float2 b = a.lo + a.hi;
  return b.lo + b.hi;
}
inline float rumus_hmax8(float8 v) {
  float4 a = fmax(v.lo, v.hi);
  float2 b = fmax(a.lo, a.hi);
  return fmax(b.lo, b.hi);
}
inline float rumus_hsum4(float4 v) {
  float2 b = v.lo + v.hi;
  return b.lo + b.hi;
}

/* e^x for x in [-87, 88] (callers clamp; no NaN), within about 2 ulp, in
 * plain vector arithmetic.  x = k ln2 + r with |r| <= ln2 / 2: k by adding
 * 1.5 * 2^23 (PoCL's rint costs a dozen instructions), r by Cody-Waite
 * (ln2_hi has 16 bits, so k ln2_hi is exact), e^r by a degree-5 polynomial
 * fitted for relative error (1.2e-7), and 2^k built in the exponent bits.
 * The range keeps every result normal: denormal arithmetic costs a
 * microcode assist of ~100 cycles per instruction on x86 (PoCL does not
 * flush them).  PoCL's own exp is several times slower on vectors. */
#define RUMUS_DEFINE_EXP_POLY(name, T, AS_T, AS_IT)                          \
  inline __attribute__((always_inline)) T name(T x) {                       \
    const T t = fma(x, 1.44269504088896341f, 12582912.0f);                   \
    const T k = t - 12582912.0f;                                            \
    T r = fma(k, -0.693145751953125f, x);                                   \
    r = fma(k, -1.42860682030941723e-6f, r);                                \
    T p = fma(r, 0.008316239342093468f, 0.041895899921655655f);             \
    p = fma(p, r, 0.16667091846466064f);                                    \
    p = fma(p, r, 0.49999183416366577f);                                    \
    p = fma(p, r, 1.0f);                                                    \
    p = fma(p, r, 1.0f);                                                    \
    return p * AS_T((AS_IT(t) - 0x4B400000 + 127) << 23);                   \
  }
RUMUS_DEFINE_EXP_POLY(rumus_exp_poly4, float4, as_float4, as_int4)
RUMUS_DEFINE_EXP_POLY(rumus_exp_poly8, float8, as_float8, as_int8)
RUMUS_DEFINE_EXP_POLY(rumus_exp_poly16, float16, as_float16, as_int16)

/* e^v for v <= 0, -INFINITY or NaN (a value less its row's maximum), for
 * the CPU row kernels: the polynomial above; below -87 (where e^v < 1.7e-38)
 * exactly 0, so masked entries (-INFINITY) give 0 as with exp; NaN stays
 * NaN. */
inline __attribute__((always_inline)) float8 rumus_exp_shifted8(float8 v) {
  const float8 e = rumus_exp_poly8(fmax(v, -87.0f));
  return select(select(e, (float8)(0.0f), v < -87.0f), v, isnan(v));
}

/* Rescales a partial softmax denominator s taken against max m to the
 * larger max M; a partial of an all -INFINITY stretch contributes 0. */
inline float rumus_rescale(float s, float m, float M) {
  return (m == -INFINITY) ? 0.0f : s * exp(m - M);
}

/* ---- Work-group reductions (every work-item must call them: barriers).
 * The result is in the buffer's element 0 after the call; a reduction that
 * follows on the same buffer needs a barrier after that element is read. */

/* Online update of a (max, sum of exp(x - max)) pair with one value.  -INF
 * values add nothing; a NaN value turns the pair into (NaN, NaN), which the
 * later updates and the tree keep. */
inline void rumus_online(float v, float *m, float *s) {
  if (v > *m) {
    *s = rumus_rescale(*s, *m, v) + 1.0f;
    *m = v;
  } else if (*m != -INFINITY) {
    *s += exp(v - *m);
  } else if (v != -INFINITY) { /* v is NaN */
    *m = v;
    *s = v;
  }
}

/* Folds the (m, s) pairs of the work-group into lm[0], ls[0]. */
inline void rumus_wg_max_sum(local float *lm, local float *ls, float m,
                            float s) {
  const size_t lid = get_local_id(0);
  lm[lid] = m;
  ls[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = WG / 2; step > 0; step /= 2) {
    if (lid < step) {
      const float m1 = lm[lid], m2 = lm[lid + step];
      const float M = fmax(m1, m2);
      ls[lid] = rumus_rescale(ls[lid], m1, M) + rumus_rescale(ls[lid + step], m2, M);
      lm[lid] = isnan(m1) ? m1 : isnan(m2) ? m2 : M;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* Folds a float held by every work-item into la[0]. */
inline void rumus_wg_sum(local float *la, float a) {
  const size_t lid = get_local_id(0);
  la[lid] = a;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = WG / 2; step > 0; step /= 2) {
    if (lid < step) la[lid] += la[lid + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* Folds a max held by every work-item into lm[0] (NaN is skipped, as by
 * fmax; it reaches S through exp later). */
inline float rumus_wg_max(local float *lm, float m) {
  const size_t lid = get_local_id(0);
  lm[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = WG / 2; step > 0; step /= 2) {
    if (lid < step) lm[lid] = fmax(lm[lid], lm[lid + step]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return lm[0];
}

/* Segmented reductions over groups of rt work-items (lane = lid % rt, rt a
 * power of two dividing WG): every lane gets its group's result.  Every
 * work-item of the work-group must call them (the barriers). */
inline float rumus_seg_max(local float *buf, float v, uint rt) {
  const size_t lid = get_local_id(0), lane = lid % rt;
  buf[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = rt / 2; step > 0; step /= 2) {
    if (lane < step) buf[lid] = fmax(buf[lid], buf[lid + step]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return buf[lid - lane];
}

/* Segmented sums of a T (float, float2, ...): RUMUS_SEG_SUM(name, T)
 * defines T name(local T *buf, T v, uint rt). */
#define RUMUS_SEG_SUM(name, T)                                               \
  inline T name(local T *buf, T v, uint rt) {                                \
    const size_t lid = get_local_id(0), lane = lid % rt;                     \
    buf[lid] = v;                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
    for (uint step = rt / 2; step > 0; step /= 2) {                          \
      if (lane < step) buf[lid] += buf[lid + step];                          \
      barrier(CLK_LOCAL_MEM_FENCE);                                          \
    }                                                                        \
    return buf[lid - lane];                                                  \
  }
RUMUS_SEG_SUM(rumus_seg_sum, float)

/* Work-group tree sums of a T over the first n work-items (n a power of
 * two), the total returned to each: RUMUS_TREE_SUM(name, T) defines
 * T name(local T *buf, T v, size_t n).  buf[0] holds the total until the
 * caller's next barrier. */
#define RUMUS_TREE_SUM(name, T)                                              \
  inline T name(local T *buf, T v, size_t n) {                               \
    const size_t lid = get_local_id(0);                                      \
    buf[lid] = v;                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
    for (size_t step = n / 2; step > 0; step /= 2) {                         \
      if (lid < step) buf[lid] += buf[lid + step];                           \
      barrier(CLK_LOCAL_MEM_FENCE);                                          \
    }                                                                        \
    return buf[0];                                                           \
  }

/* A loop over the float4 groups q < n4 of a row that work-item lid of a
 * group of WG takes (q = b * WG + lid), last block b first: a second pass
 * that starts where the first ended finds the most recently read part of
 * the row still in the cache.  Needs `lid`; the body follows. */
#define RUMUS_REV_Q(q, n4)                                                   \
  for (size_t rev_b_ = ((n4) + WG - 1) / WG, q = 0; rev_b_-- > 0;)           \
    if ((q = rev_b_ * WG + lid) < (n4))

/* Float4 group q of a row of n elements; lanes past the end hold `fill`. */
inline float4 rumus_load4_fill(global const real_t *p, size_t q, size_t n,
                               float fill) {
  const size_t j = q * 4;
  if (j + 4 <= n) return LOAD4(p, j);
  float4 v = (float4)(fill);
  if (j < n) v.x = LOAD(p, j);
  if (j + 1 < n) v.y = LOAD(p, j + 1);
  if (j + 2 < n) v.z = LOAD(p, j + 2);
  return v;
}

/* Stores the lanes of group q that lie inside a row of n elements. */
inline void rumus_store4_part(float4 v, global real_t *p, size_t q, size_t n) {
  const size_t j = q * 4;
  if (j + 4 <= n) {
    STORE4(v, p, j);
    return;
  }
  if (j < n) STORE(v.x, p, j);
  if (j + 1 < n) STORE(v.y, p, j + 1);
  if (j + 2 < n) STORE(v.z, p, j + 2);
}

/* Row vectors of the work-group row kernels (softmax, cross-entropy): the
 * groups of RUMUS_RV elements a work-item loads, holds and stores at once.
 * 8 (16 bytes of 16-bit storage, one wide access) where the host found
 * every tensor and the row length 8-element aligned (RUMUS_ALIGN8, set
 * for 16-bit storage on the work-group variant only), else 4: 4 halves
 * are 8 bytes per access, too few in flight to stream at copy speed on
 * the H200, as the flat kernels showed.  With RUMUS_ALIGN8 every row is a
 * whole number of groups, so a group lies wholly inside a row or past it. */
#if RUMUS_ALIGN8
#define RUMUS_RV 8
typedef float8 rumus_rv;
typedef int8 rumus_rvi;
#define RUMUS_RV_IOTA ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#define LOADV(p, i) LOAD8(p, i)
#define STOREV(v, p, i) STORE8(v, p, i)
#define rumus_hsumv rumus_hsum8
#define rumus_hmaxv rumus_hmax8
inline float rumus_dotv(float8 a, float8 b) {
  return dot(a.lo, b.lo) + dot(a.hi, b.hi);
}
#else
#define RUMUS_RV 4
typedef float4 rumus_rv;
typedef int4 rumus_rvi;
#define RUMUS_RV_IOTA ((int4)(0, 1, 2, 3))
#define LOADV(p, i) LOAD4(p, i)
#define STOREV(v, p, i) STORE4(v, p, i)
#define rumus_hsumv rumus_hsum4
inline float rumus_hmaxv(float4 v) {
  return fmax(fmax(v.x, v.y), fmax(v.z, v.w));
}
#define rumus_dotv dot
#endif
/* Row vectors per work-item of the register-cached (_wgc) kernels: the
 * CACHE_V4 float4 of elements, whatever the group width. */
#define CACHE_V (CACHE_V4 * 4 / RUMUS_RV)

/* Group q of a row of n elements; lanes past the end hold `fill`. */
inline rumus_rv rumus_loadv_fill(global const real_t *p, size_t q, size_t n,
                                 float fill) {
#if RUMUS_RV == 8
  return q * 8 < n ? LOAD8(p, q * 8) : (rumus_rv)(fill);
#else
  return rumus_load4_fill(p, q, n, fill);
#endif
}

/* Stores the lanes of group q that lie inside a row of n elements. */
inline void rumus_storev_part(rumus_rv v, global real_t *p, size_t q,
                              size_t n) {
#if RUMUS_RV == 8
  if (q * 8 < n) STORE8(v, p, q * 8);
#else
  rumus_store4_part(v, p, q, n);
#endif
}

/* The online (max, sum) update with a row group v.  Groups of 4 (F32, and
 * rows the host did not find 8-aligned): rumus_online on each lane in
 * order.  Groups of 8 (16-bit storage): once per group, the pair moves to
 * the group's max and takes the sum of its exps, a branch and a rescale
 * per 8 elements instead of per element, since with half the bytes of F32
 * the per-element work of the first pass would bound the long-row kernels.
 * The same results as rumus_online but for rounding: -INF lanes add 0; a
 * NaN lane makes s NaN, or the pair (NaN, NaN) when the max is still
 * -INF, so the row's outputs are NaN either way; a +INF lane makes s NaN
 * (exp(inf - inf)), as in the float64 reference (rumus_online gives NaN
 * there only for the +INF entries). */
inline void rumus_online_v(rumus_rv v, float *m, float *s) {
#if RUMUS_RV == 8
  const float gm = rumus_hmax8(v); /* fmax: NaN lanes skipped */
  if (gm > *m) {
    *s = rumus_rescale(*s, *m, gm);
    *m = gm;
  }
  if (*m != -INFINITY) {
    *s += rumus_hsum8(exp(v - *m));
  } else if (any(isnan(v))) {
    *m = NAN;
    *s = NAN;
  }
#else
  rumus_online(v.x, m, s);
  rumus_online(v.y, m, s);
  rumus_online(v.z, m, s);
  rumus_online(v.w, m, s);
#endif
}

/* Device-side error report: the first failing op stores its code, the bad
 * value and its position; the host reads it at rumus_ctx_sync(). */
inline void rumus_report(volatile global int *status, int code, int value,
                         int where) {
  if (atomic_cmpxchg(status, 0, code) == 0) {
    status[1] = value;
    status[2] = where;
  }
}

/* ---- Last-group finish ------------------------------------------------
 * A kernel that reduces into per-group partials can end with its own final
 * step, taken by the last work-group to finish, instead of a second launch
 * (on the H200 each dependent launch costs 4-5 us of gap besides its own
 * time).  A group writes its partial, fences, and takes a ticket
 * (atomic_inc on word RUMUS_STATUS_TICKET of the context's status buffer,
 * zero between launches); the group that draws the last ticket reads every
 * partial through a volatile pointer (from memory, not a stale cache),
 * combines them in a fixed order and puts the ticket back to zero. */

#ifndef RUMUS_STATUS_TICKET
#define RUMUS_STATUS_TICKET 3 /* the launch's ticket word */
#endif
#ifndef RUMUS_STATUS_SETS
/* First of the per-set ticket words (RUMUS__STATUS_WORDS): kernels whose
 * groups finish in independent sets take word RUMUS_STATUS_SETS + set. */
#define RUMUS_STATUS_SETS 4
#endif

/* Orders the work-item's global stores and loads before the fence ahead
 * of those after it for every work-group of the device, which groups that
 * hand results to one another within a launch need (a partial before its
 * ticket, a channel's statistics before its flag).  OpenCL 1.2's
 * mem_fence promises that order to the work-item's own group only, and
 * NVIDIA's driver compiles it as PTX membar.cta, which does not wait for a
 * store to reach the L2 cache that other compute units read: there the
 * fence is membar.gl (cl_nv_pragma_unroll, an extension of NVIDIA's
 * driver alone, names it). */
#ifdef cl_nv_pragma_unroll
#define rumus_device_fence() __asm__ __volatile__("membar.gl;" ::: "memory")
#else
#define rumus_device_fence() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

/* 1 in every work-item of the group that finished last of the `groups`
 * that share the ticket (barriers inside: every work-item calls it).  The
 * barrier orders the group's writes of its partial before work-item 0's
 * device-wide fence, which orders them before the ticket; a fence after
 * the ticket orders the last group's reads of the others' partials after
 * it (CUDA's grid barrier does the same). */
inline int rumus_last_group(volatile global int *ticket, size_t groups,
                            local int *flag) {
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    rumus_device_fence();
    *flag = atomic_inc(ticket) == (int)(groups - 1);
    rumus_device_fence();
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return *flag;
}

inline void rumus_ticket_reset(volatile global int *ticket) {
  if (get_local_id(0) == 0) atomic_xchg(ticket, 0);
}

#endif /* RUMUS_COMMON_CL */
