/*
 * quant.cl - int8 block quantization (Q8) and the product with a quantized
 * matrix (rumus.h, "Quantization").
 *
 * Format: a tensor x of rows of K floats is stored as q (int8, x's shape)
 * and scales (F16 bits, rows x NB, NB = ceil(K / BS)); block b of row r is
 * x[r, b BS .. min((b + 1) BS, K)), the last block of a row short.  BS is
 * a power of two from 16 to 256, so every 16-element chunk of a row that
 * starts at a multiple of 16 lies in one block (scale index k >> shift).
 *
 *   amax = max |x| over the block
 *   s    = amax / 127 rounded once to F16 (to nearest even), then
 *          clamped to [2^-24, 65504] (the smallest and largest finite F16
 *          above 0); 1 when amax = 0; NaN (0x7E00) when the block holds a
 *          NaN or an infinity, and then every q of the block is 0
 *   q    = x / s rounded half away from zero, clamped to [-127, 127]
 *   dequant: y = q s (exact in float: 8 by 11 significant bits)
 *
 * The rounding decisions are exact on any device, though OpenCL's float
 * division may be off by a few ulp: the quotients give candidates, and
 * exact float products decide.  For s: amax / 127 is truncated to F16
 * bits h, then compared with 127 times the midpoints between h and its
 * neighbours (an F16 midpoint has 12 significant bits, 127 has 7: the
 * product is exact).  For q: |x| / s gives q0, then |x| is compared with
 * (q0 +- 0.5) s (9 by 11 bits: exact), ties going up (away from zero).
 *
 * Matrix product: C[m, n] = sum_k A[m, k] B[n, k], B = dequant(q, scales)
 * of N rows of K (a linear layer's weight [out, in]), A of M rows of K in
 * the program's storage (RUMUS_STORAGE), C in Q8_CT; every sum is float,
 * in a fixed order.  Kernels:
 *   q8_quantize, q8_dequantize   one work-item per block (both variants):
 *       16-element vectors, a pass for amax and one for q; work-item g
 *       takes block g0 + g (launches in pieces).
 *   q8_mv16_<MB> (GPU, M <= MB, MB = 1, 2, 4, 8): B is read once.  A
 *       work-group of WG work-items is WG / Q8_LPR row groups of Q8_LPR
 *       lanes (a warp); RPW rows of B belong to KS row groups, which split
 *       K by chunks (16 elements) of Q8_LPR: row group w takes the chunks
 *       w % KS, w % KS + KS, ... of every 16 Q8_LPR elements, lane l the
 *       chunk l of each, so that a row group's load of a chunk of one row
 *       of B (16 int8: one 16-byte load per lane) reads 16 Q8_LPR
 *       contiguous bytes (a warp: 512 bytes per instruction; NVIDIA
 *       reaches copy speed only with 16-byte loads per lane).  A comes
 *       from the cache, each chunk for RPW rows of B.  U chunks of each
 *       row are loaded before any is used; the int8 become floats by an
 *       exact bit trick (q8_i8x4); a row group's lanes' sums are added in
 *       a fixed order in local memory, then the KS row groups' sums.  RPW,
 *       KS and U per MB in its Q8_V16_KERNEL lines, overridable by -D
 *       options.  (Loads of 4 int8 per lane, the earlier q8_mv_<MB>,
 *       reached 60% of copy where these reach 80%.)
 *   q8_tiled (GPU, M > 8): 64 x 64 tiles of C, 16 x 16 work-items of 4 x 4
 *       outputs; K in steps of 16: the work-group copies 64 x 16 of A and
 *       64 x 16 of B, dequantized on the way, into local memory (k-major),
 *       the next step's values wait in registers meanwhile.
 *   q8_rows_<MR> (CPU): work-item (i, j) computes rows i MR .. of C at
 *       columns j NR ..: per 16-element chunk of K it dequantizes NR
 *       chunks of B into float16 registers and adds their products with
 *       MR chunks of A into MR x NR float16 accumulators; no barriers,
 *       no row tests in the loop (rows past M or N repeat the last one).
 *       M <= 8 takes the MR that holds every row (B read once), larger M
 *       MR = 4.
 * K's last chunk (K % 16 elements) is read element by element, zeros
 * after the end.  Rows of B past N read row N - 1 (never
 * stored), so the inner loops carry no row test.  C's rows are ldc
 * apart: the host launches B in pieces of rows (its offsets and C's
 * advanced), so a launch's N may be less than C's row.
 */

#ifndef Q8_CT
#define Q8_CT F32 /* storage of C: F32, F16, BF16 */
#endif
#ifndef Q8_GPU
#define Q8_GPU 0 /* 1: the GPU variant's kernels, 0: the CPU variant's */
#endif
#ifndef Q8_LPR
/* Lanes per row group of q8_mv16_<MB>: a power of two that divides WG, at
 * least MB * RPW (the lanes that add the partial sums). */
#define Q8_LPR 32
#endif
#define Q8_MVG (WG / Q8_LPR) /* row groups per work-group of q8_mv16 */

/* static: PoCL builds with -Dinline=, and a body compiled on its own as
 * well, with MB or MR not constant there, fails its unroll pragmas. */
#define Q8_INLINE static inline __attribute__((always_inline))
/* Loops over register arrays of constant size (MB, MR, ... are constants
 * once a body is inlined into its thin kernel), unrolled so that the
 * arrays stay in registers. */
#define Q8_UNROLL _Pragma("unroll")

typedef RUMUS_TYPE(Q8_CT) ct_t;
#define STORE_C(v, p, i) RUMUS_STORE(Q8_CT, v, p, i)

/* 4 int8 of q at p + i (i a multiple of 4): typed loads where the host
 * found every row 4-byte aligned (RUMUS_ALIGN4 on the GPU variant), else
 * vloads. */
#if RUMUS_ALIGN4
#define Q8_LOADQ4(p, i) (*(global const char4 *)((p) + (i)))
#else
#define Q8_LOADQ4(p, i) vload4(0, (p) + (i))
#endif

/* The last n < 16 elements of a row from p, zeros after them. */
Q8_INLINE float16 q8_tail_x(global const real_t *p, size_t n) {
  float e[16];
  for (int j = 0; j < 16; j++) e[j] = (size_t)j < n ? LOAD(p, j) : 0.0f;
  return vload16(0, e);
}
Q8_INLINE float16 q8_tail_q(global const char *p, size_t n) {
  float e[16];
  for (int j = 0; j < 16; j++) e[j] = (size_t)j < n ? (float)p[j] : 0.0f;
  return vload16(0, e);
}

/* ---- Scales and rounding ------------------------------------------------ */

/* Scale i of sc as a float.  The CPU variant converts the bits in
 * integer arithmetic (and q8_rows once a block): read with vload_half for
 * every 16-byte chunk, the scales took most of the matrix-vector
 * product's time on PoCL (1 x 4096 x 4096 ran in 3.7 ms, and in 0.4 ms
 * with the scales left out, on 2 AVX-512 cores).  GPUs convert in one
 * instruction. */
#if Q8_GPU
#define Q8_SCALE(sc, i) vload_half((i), (sc))
#else
#define Q8_SCALE(sc, i) q8_half_bits(((global const ushort *)(sc))[i])

/* The value of any F16 bits h: subnormals m 2^-24, infinities and NaN
 * kept. */
Q8_INLINE float q8_half_bits(uint h) {
  const uint e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  const float mag = e == 0u    ? (float)m * 0x1p-24f
                    : e == 31u ? as_float(0x7F800000u | (m << 13))
                               : as_float(((e + 112u) << 23) | (m << 13));
  return (h & 0x8000u) ? -mag : mag;
}
#endif

/* The value of finite F16 bits h >= 0. */
Q8_INLINE float q8_h2f(uint h) {
  const uint e = h >> 10, m = h & 0x3FFu;
  return e ? as_float(((e + 112u) << 23) | (m << 13)) : (float)m * 0x1p-24f;
}

/* t >= 0 truncated to F16 bits, at most 0x7BFF (65504). */
Q8_INLINE uint q8_f2h_trunc(float t) {
  if (t >= 65504.0f) return 0x7BFFu;
  if (t >= 0x1p-14f) return (as_uint(t) - 0x38000000u) >> 13;
  return (uint)(t * 0x1p24f);
}

/* The F16 bits of a block's scale from its amax (bad: a NaN or an
 * infinity in the block).  The candidate h from the approximate quotient
 * is within one of the answer; the midpoints decide, ties to even. */
Q8_INLINE ushort q8_scale_bits(float amax, int bad) {
  if (bad) return (ushort)0x7E00u;
  if (amax == 0.0f) return (ushort)0x3C00u;
  uint h = q8_f2h_trunc(amax / 127.0f);
  if (h < 0x7BFFu) {
    const float up = 127.0f * (0.5f * (q8_h2f(h) + q8_h2f(h + 1u)));
    if (amax > up || (amax == up && (h & 1u))) h++;
  }
  if (h > 0u) {
    const float dn = 127.0f * (0.5f * (q8_h2f(h - 1u) + q8_h2f(h)));
    if (amax < dn || (amax == dn && (h & 1u))) h--;
  }
  return (ushort)max(h, 1u);
}

/* x / s rounded half away from zero and clamped to [-127, 127], for finite
 * x and a finite scale s > 0. */
Q8_INLINE float16 q8_round16(float16 x, float s) {
  const float16 a = fabs(x);
  float16 q = fmin(floor(a / s + 0.5f), 127.0f);
  q = select(q, q + 1.0f, (q < 127.0f) & (a >= (q + 0.5f) * s));
  q = select(q, q - 1.0f, (q > 0.0f) & (a < (q - 0.5f) * s));
  return copysign(q, x);
}

/* ---- Quantize and dequantize -------------------------------------------- */

/* Block g of rows x nb: its row's pointers advanced to the block, its
 * length. */
#define Q8_BLOCK(g)                                                          \
  const size_t r = (g) / (size_t)nb, b = (g) % (size_t)nb;                   \
  const size_t k0 = b * (size_t)bs;                                          \
  const size_t len = min((size_t)bs, (size_t)K - k0);                        \
  const size_t full = len / 16

__kernel void q8_quantize(global const real_t *x, ulong x_off,
                          global char *q, ulong q_off, global ushort *sc,
                          ulong sc_off, ulong rows, ulong K, ulong nb,
                          ulong bs, ulong g0) {
  const size_t g = (size_t)g0 + get_global_id(0);
  if (g >= (size_t)rows * (size_t)nb) return;
  Q8_BLOCK(g);
  global const real_t *xb = x + (size_t)x_off + r * (size_t)K + k0;
  global char *qb = q + (size_t)q_off + r * (size_t)K + k0;

  float16 m16 = 0.0f;
  int16 bad = 0;
  for (size_t c = 0; c < full; c++) {
    const float16 v = LOAD16(xb, c * 16);
    m16 = fmax(m16, fabs(v));
    bad |= isnan(v) | isinf(v);
  }
  const size_t rest = len % 16;
  if (rest) {
    const float16 v = q8_tail_x(xb + full * 16, rest);
    m16 = fmax(m16, fabs(v));
    bad |= isnan(v) | isinf(v);
  }
  const float amax = rumus_hmax8(fmax(m16.lo, m16.hi));
  const ushort h = q8_scale_bits(amax, any(bad));
  sc[(size_t)sc_off + g] = h;
  if (h == 0x7E00u) { /* a block that cannot be represented */
    for (size_t j = 0; j < len; j++) qb[j] = 0;
    return;
  }
  const float s = q8_h2f(h);
  for (size_t c = 0; c < full; c++)
    vstore16(convert_char16(q8_round16(LOAD16(xb, c * 16), s)), 0,
             qb + c * 16);
  if (rest) {
    char e[16];
    vstore16(convert_char16(q8_round16(q8_tail_x(xb + full * 16, rest), s)),
             0, e);
    for (size_t j = 0; j < rest; j++) qb[full * 16 + j] = e[j];
  }
}

__kernel void q8_dequantize(global const char *q, ulong q_off,
                            global const half *sc, ulong sc_off,
                            global real_t *y, ulong y_off, ulong rows,
                            ulong K, ulong nb, ulong bs, ulong g0) {
  const size_t g = (size_t)g0 + get_global_id(0);
  if (g >= (size_t)rows * (size_t)nb) return;
  Q8_BLOCK(g);
  global const char *qb = q + (size_t)q_off + r * (size_t)K + k0;
  global real_t *yb = y + (size_t)y_off + r * (size_t)K + k0;
  const float s = Q8_SCALE(sc, (size_t)sc_off + g);
  for (size_t c = 0; c < full; c++)
    STORE16(convert_float16(vload16(0, qb + c * 16)) * s, yb, c * 16);
  for (size_t j = full * 16; j < len; j++) STORE((float)qb[j] * s, yb, j);
}

#if Q8_GPU
/* ---- GPU: matrix-vector products, M <= MB -------------------------------- */

/* The four int8 of b as exact floats without int-to-float conversions
 * (CUDA's guide lists 16 a clock per SM at compute capability 9.0, an
 * eighth of the FP32 rate, about the bytes per clock an SM gets of copy
 * bandwidth: one per int8 would leave M = 1 no slack): b + 128 goes into
 * the low mantissa bits of 2^23, then 2^23 + 128 is subtracted.  Byte
 * order: lane 0 is the low byte on little-endian devices; others
 * convert. */
Q8_INLINE float4 q8_i8x4(char4 b) {
#ifdef __ENDIAN_LITTLE__
  const uint w = as_uint(b) ^ 0x80808080u;
  const uint4 m = (uint4)(w, w >> 8, w >> 16, w >> 24) & 0xFFu;
  return as_float4(m | 0x4B000000u) - 8388736.0f;
#else
  return convert_float4(b);
#endif
}

/* The sums of the lanes' partial sums, in a fixed order.  Row group w
 * (Q8_LPR lanes) writes its MB * RPW partials per lane to local memory,
 * and lane o < MB * RPW adds output o's Q8_LPR partials (lanes 0, 1, ...
 * into four sums by lane % 4, then (s0 + s1) + (s2 + s3)); the index
 * o * Q8_LPR + (lane ^ o) keeps both the writes and the reads free of bank
 * conflicts.  With KS row groups per rows (splitting K), their sums are
 * added in order of the row group; one work-item stores each output. */
#define Q8_MV_REDUCE()                                                       \
  do {                                                                       \
    const size_t O = MB * RPW, RS = Q8_MVG / KS;                             \
    local float *rw = red + w * O * Q8_LPR;                                  \
    Q8_UNROLL for (int i = 0; i < MB; i++)                                   \
      Q8_UNROLL for (int j = 0; j < RPW; j++) {                              \
        const size_t o = (size_t)(i * RPW + j);                              \
        rw[o * Q8_LPR + (lane ^ o)] = acc[i][j];                             \
      }                                                                      \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
    float sum = 0.0f;                                                        \
    if (lane < O) {                                                          \
      float4 s4 = 0.0f;                                                      \
      for (size_t p = 0; p < Q8_LPR; p += 4)                                 \
        s4 += (float4)(rw[lane * Q8_LPR + (p ^ lane)],                       \
                       rw[lane * Q8_LPR + ((p + 1) ^ lane)],                 \
                       rw[lane * Q8_LPR + ((p + 2) ^ lane)],                 \
                       rw[lane * Q8_LPR + ((p + 3) ^ lane)]);                \
      sum = (s4.x + s4.y) + (s4.z + s4.w);                                   \
    }                                                                        \
    size_t t = lid; /* the output this work-item stores, if any */           \
    if (KS > 1) {                                                            \
      barrier(CLK_LOCAL_MEM_FENCE);                                          \
      if (lane < O) red[w * O + lane] = sum;                                 \
      barrier(CLK_LOCAL_MEM_FENCE);                                          \
      if (t < RS * O) {                                                      \
        const size_t r0 = t / O * KS * O + t % O;                            \
        sum = red[r0];                                                       \
        for (int ks = 1; ks < KS; ks++) sum += red[r0 + (size_t)ks * O];     \
      }                                                                      \
    } else {                                                                 \
      t = lane < O ? w * O + lane : RS * O;                                  \
    }                                                                        \
    if (t < RS * O) {                                                        \
      const size_t rs = t / O, o = t % O, i = o / RPW;                       \
      const size_t n = (get_group_id(0) * RS + rs) * RPW + o % RPW;          \
      if (i < M && n < N) STORE_C(sum, C, i * ldc + n);                      \
    }                                                                        \
  } while (0)

/* ---- GPU: matrix-vector products in 16-byte chunks, M <= MB -------------- */

/* q8_mv16_<MB> (the header's layout): U chunks of each of RPW rows in
 * flight.  A chunk starts at a multiple of 16 and blocks are 16 to 256
 * long: it lies in one block (one scale).  Rows of B must be 16-byte
 * aligned for the typed load (Q8_ALIGN16, which the host sets when K % 16
 * = 0 and the offset of q is too), 4-byte aligned for four 4-byte loads
 * (RUMUS_ALIGN4), else vload16. */
#ifndef Q8_MV16
/* 1: the program holds q8_mv16_<MB> (the host sets it for products with
 * M <= 8 only: the kernels triple a program's build time, on PoCL too). */
#define Q8_MV16 0
#endif
#if Q8_MV16
#ifndef Q8_ALIGN16
#define Q8_ALIGN16 0
#endif
#if Q8_ALIGN16
#define Q8_LOADQ16(p, i) (*(global const uint4 *)((p) + (i)))
#else
#define Q8_LOADQ16(p, i)                                                     \
  ((uint4)(as_uint(Q8_LOADQ4(p, i)), as_uint(Q8_LOADQ4(p, (i) + 4)),         \
           as_uint(Q8_LOADQ4(p, (i) + 8)), as_uint(Q8_LOADQ4(p, (i) + 12))))
#endif

/* Quarter c (elements 4 c .. 4 c + 3) of a chunk of int8 held as a uint4,
 * as exact floats. */
Q8_INLINE float4 q8_quarter(uint4 b, int c) {
  const uint w = c == 0 ? b.x : c == 1 ? b.y : c == 2 ? b.z : b.w;
  return q8_i8x4(as_char4(w));
}

/* acc[i][j] plus the products of the chunk of the M rows of A at column
 * k (LOADA: 4 elements, full or tail) with the chunks of B of the RPW
 * rows, f(j, c) quarter c of row j's chunk as floats, s[j] its scale; in
 * a fixed order, quarter by quarter (4 MB floats of A and 4 of B live at
 * a time).  MB >= 4: the quarter of B is scaled once for the MB rows of
 * A (q s is exact) and each product goes into acc in turn; fewer rows:
 * the chunk's 16 products go into a float4 t, whose lanes are added and
 * scaled once (a multiplication less per element and row). */
#define Q8_V16_CHUNK(f, s, k, LOADA)                                         \
  do {                                                                       \
    float4 t[MB][RPW];                                                       \
    Q8_UNROLL for (int c = 0; c < 4; c++) {                                  \
      float4 a[MB];                                                          \
      Q8_UNROLL for (int i = 0; i < MB; i++)                                 \
        a[i] = (size_t)i < M ? LOADA(A + (size_t)i * K, (k) + 4 * c)         \
                             : (float4)(0.0f);                               \
      Q8_UNROLL for (int j = 0; j < RPW; j++) {                              \
        float4 b = f(j, c);                                                  \
        if (MB >= 4) b *= s[j];                                              \
        Q8_UNROLL for (int i = 0; i < MB; i++) {                             \
          if (MB >= 4) {                                                     \
            if ((size_t)i < M)                                               \
              acc[i][j] = fma(a[i].w, b.w,                                   \
                              fma(a[i].z, b.z,                               \
                                  fma(a[i].y, b.y,                           \
                                      fma(a[i].x, b.x, acc[i][j]))));        \
          } else {                                                           \
            t[i][j] = c == 0 ? a[i] * b : fma(a[i], b, t[i][j]);             \
          }                                                                  \
        }                                                                    \
      }                                                                      \
    }                                                                        \
    if (MB < 4)                                                              \
      Q8_UNROLL for (int i = 0; i < MB; i++)                                 \
        Q8_UNROLL for (int j = 0; j < RPW; j++)                              \
          if ((size_t)i < M)                                                 \
            acc[i][j] = fma((t[i][j].x + t[i][j].y) + (t[i][j].z + t[i][j].w), \
                            s[j], acc[i][j]);                                \
  } while (0)

#define Q8_V16_AFULL(p, k) LOAD4(p, k)
/* Elements [k, k + 4) of a row of A whose last chunk starts at kt (K - kt
 * elements left), zeros past K. */
Q8_INLINE float4 q8_v16_atail(global const real_t *p, size_t k, size_t K) {
  float4 v = 0.0f;
  if (k < K) v.x = LOAD(p, k);
  if (k + 1 < K) v.y = LOAD(p, k + 1);
  if (k + 2 < K) v.z = LOAD(p, k + 2);
  if (k + 3 < K) v.w = LOAD(p, k + 3);
  return v;
}
#define Q8_V16_ATAIL(p, k) q8_v16_atail(p, k, K)

/* U chunks of the lane from chunk g, Q8_LPR KS chunks apart: the int8 of
 * its RPW rows and their scales are all loaded before any is used (U RPW
 * 16-byte loads in flight), then each chunk is added in turn.  Scale u of
 * row j is sp[j][so[u]]: sp[j] advances by a group's blocks, so[u] is
 * fixed (no 64-bit shift and address arithmetic per load).  LAST: chunks
 * past K16 are skipped (the last group, partial). */
#define Q8_V16_BQ(j, c) q8_quarter(bq[u][j], c)
#define Q8_V16_STEPS(LAST)                                                   \
  do {                                                                       \
    uint4 bq[U][RPW];                                                        \
    float s[U][RPW];                                                         \
    Q8_UNROLL for (int u = 0; u < U; u++) {                                  \
      const size_t gu = g + (size_t)u * stride;                              \
      const int ok = !(LAST) || gu < K16;                                    \
      Q8_UNROLL for (int j = 0; j < RPW; j++) {                              \
        bq[u][j] = ok ? Q8_LOADQ16(qr[j], gu * 16) : (uint4)(0u);            \
        s[u][j] = ok ? vload_half(so[u], sp[j]) : 0.0f;                      \
      }                                                                      \
    }                                                                        \
    Q8_UNROLL for (int u = 0; u < U; u++) {                                  \
      const size_t gu = g + (size_t)u * stride;                              \
      if (!(LAST) || gu < K16)                                               \
        Q8_V16_CHUNK(Q8_V16_BQ, s[u], gu * 16, Q8_V16_AFULL);                \
    }                                                                        \
  } while (0)

/* K's last K % 16 elements (chunk K16), by the lane whose turn it is,
 * element by element, zeros after the end. */
#define Q8_V16_BT(j, c) bt[j][c]
#define Q8_V16_TAIL()                                                        \
  do {                                                                       \
    const size_t k = K16 * 16, n = K - k;                                    \
    float4 bt[RPW][4];                                                       \
    float s[RPW];                                                            \
    Q8_UNROLL for (int j = 0; j < RPW; j++) {                                \
      float e[16];                                                           \
      Q8_UNROLL for (int x = 0; x < 16; x++)                                 \
        e[x] = (size_t)x < n ? (float)qr[j][k + (size_t)x] : 0.0f;           \
      Q8_UNROLL for (int c = 0; c < 4; c++)                                  \
        bt[j][c] = (float4)(e[4 * c], e[4 * c + 1], e[4 * c + 2],            \
                            e[4 * c + 3]);                                   \
      s[j] = vload_half(min(n0 + (size_t)j, N - 1) * nb + (k >> shift), sc); \
    }                                                                        \
    Q8_V16_CHUNK(Q8_V16_BT, s, k, Q8_V16_ATAIL);                             \
  } while (0)

/* Row group w of the work-group takes RPW rows of B (row set w / KS) and
 * the chunks w % KS, w % KS + KS, ... (times Q8_LPR, plus its lane) of K,
 * then Q8_MV_REDUCE.  A macro, as the reduction, so that MB, RPW, KS and
 * U are the kernel's constants where the compiler unrolls the loops over
 * them (a function's loops compiled on their own first were left rolled,
 * their arrays in memory). */
#define Q8_V16_BODY()                                                        \
  do {                                                                       \
    const size_t lid = get_local_id(0), lane = lid % Q8_LPR;                 \
    const size_t w = lid / Q8_LPR;                                           \
    const size_t n0 = (get_group_id(0) * (Q8_MVG / KS) + w / KS) * RPW;      \
    float acc[MB][RPW];                                                      \
    Q8_UNROLL for (int i = 0; i < MB; i++)                                   \
      Q8_UNROLL for (int j = 0; j < RPW; j++) acc[i][j] = 0.0f;              \
    global const char *qr[RPW]; /* rows past N read row N - 1 */             \
    global const half *sp[RPW];                                              \
    Q8_UNROLL for (int j = 0; j < RPW; j++) {                                \
      const size_t n = min(n0 + (size_t)j, N - 1);                           \
      qr[j] = q + n * K;                                                     \
      sp[j] = sc + n * nb;                                                   \
    }                                                                        \
    const size_t K16 = K / 16, stride = (size_t)KS * Q8_LPR;                 \
    const size_t g0 = (w % KS) * Q8_LPR + lane;                              \
    /* A group spans 16 U stride elements, a multiple of 256 (the largest \
     * block): its scales advance by a whole number of blocks. */            \
    const size_t sstep = ((size_t)16 * U * stride) >> shift;                 \
    uint so[U];                                                              \
    Q8_UNROLL for (int u = 0; u < U; u++)                                    \
      so[u] = (uint)(((g0 + (size_t)u * stride) * 16) >> shift);             \
    size_t g = g0;                                                           \
    for (; g + (size_t)(U - 1) * stride < K16; g += (size_t)U * stride) {    \
      Q8_V16_STEPS(0);                                                       \
      Q8_UNROLL for (int j = 0; j < RPW; j++) sp[j] += sstep;                \
    }                                                                        \
    if (g < K16) Q8_V16_STEPS(1);                                            \
    if (K % 16 && K16 % stride == g0) Q8_V16_TAIL();                         \
    Q8_MV_REDUCE();                                                          \
  } while (0)

/* The shapes of q8_mv16_<MB>: rows of B per row group (RPW), row groups
 * per rows (KS) and chunks per row in flight (U), the host's tuning
 * variables (RUMUS_Q8_MV16_RPW, _KS, _U: src/ops/quant.c) overriding
 * the defaults of every MB; MB RPW <= Q8_LPR (the lanes that add the
 * partial sums). */
#ifdef Q8_V16_RPW
#define Q8_V16_R(d) Q8_V16_RPW
#else
#define Q8_V16_R(d) d
#endif
#ifdef Q8_V16_KS
#define Q8_V16_S(d) Q8_V16_KS
#else
#define Q8_V16_S(d) d
#endif
#ifdef Q8_V16_U
#define Q8_V16_N(d) Q8_V16_U
#else
#define Q8_V16_N(d) d
#endif

#define Q8_V16_KERNEL(MB_, RPW_, KS_, U_)                                    \
  __kernel RUMUS_WG_ATTR void q8_mv16_##MB_(                                 \
      global const real_t *A, ulong a_off, global const char *q,             \
      ulong q_off, global const half *sc, ulong sc_off, global ct_t *C,      \
      ulong c_off, ulong M, ulong N, ulong K, ulong ldc, ulong nb,           \
      uint shift) {                                                          \
    enum { MB = MB_, RPW = RPW_, KS = KS_, U = U_ };                         \
    typedef char q8_lanes_check[MB * RPW <= Q8_LPR ? 1 : -1];                \
    typedef char q8_split_check[Q8_MVG % KS == 0 ? 1 : -1];                  \
    local float red[Q8_MVG * MB * RPW * Q8_LPR];                             \
    A += (size_t)a_off;                                                      \
    q += (size_t)q_off;                                                      \
    sc += (size_t)sc_off;                                                    \
    C += (size_t)c_off;                                                      \
    Q8_V16_BODY();                                                           \
  }
Q8_V16_KERNEL(1, Q8_V16_R(4), Q8_V16_S(1), Q8_V16_N(2))
Q8_V16_KERNEL(2, Q8_V16_R(4), Q8_V16_S(1), Q8_V16_N(2))
Q8_V16_KERNEL(4, Q8_V16_R(4), Q8_V16_S(2), Q8_V16_N(4))
Q8_V16_KERNEL(8, Q8_V16_R(4), Q8_V16_S(2), Q8_V16_N(4))
#endif /* Q8_MV16 */

/* ---- GPU: tiled product, M > 8 ------------------------------------------- */

#define Q8_TS 64 /* rows and columns of C per work-group */
#define Q8_TK 16 /* depth of the slices in local memory */
#define Q8_LP (Q8_TS + 4) /* pitch of a local slice's rows, in floats */

/* Four elements of row m of A from column k (0 outside M x K). */
Q8_INLINE float4 q8_tile_a(global const real_t *A, size_t M, size_t K,
                           size_t m, size_t k) {
  if (m >= M) return 0.0f;
  global const real_t *p = A + m * K;
  if (k + 4 <= K) return LOAD4(p, k);
  float4 v = 0.0f;
  if (k < K) v.x = LOAD(p, k);
  if (k + 1 < K) v.y = LOAD(p, k + 1);
  if (k + 2 < K) v.z = LOAD(p, k + 2);
  return v;
}

/* Four dequantized elements of row n of B from column k (one block). */
Q8_INLINE float4 q8_tile_b(global const char *q, global const half *sc,
                           size_t N, size_t K, size_t nb, uint shift,
                           size_t n, size_t k) {
  if (n >= N || k >= K) return 0.0f;
  global const char *p = q + n * K;
  const float s = vload_half(n * nb + (k >> shift), sc);
  if (k + 4 <= K) return convert_float4(Q8_LOADQ4(p, k)) * s;
  float4 v = 0.0f;
  v.x = (float)p[k] * s;
  if (k + 1 < K) v.y = (float)p[k + 1] * s;
  if (k + 2 < K) v.z = (float)p[k + 2] * s;
  return v;
}

__kernel RUMUS_REQD_WG(16, 16, 1) void q8_tiled(
    global const real_t *A, ulong a_off, global const char *q, ulong q_off,
    global const half *sc, ulong sc_off, global ct_t *C, ulong c_off,
    ulong M, ulong N, ulong K, ulong ldc, ulong nb, uint shift) {
  local float4 as4[Q8_TK * Q8_LP / 4], bs4[Q8_TK * Q8_LP / 4];
  local float *As = (local float *)as4, *Bs = (local float *)bs4;
  A += (size_t)a_off;
  q += (size_t)q_off;
  sc += (size_t)sc_off;
  C += (size_t)c_off;
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const int tid = ty * 16 + tx, lr = tid / 4, lk = (tid % 4) * 4;
  const size_t m0 = get_group_id(1) * (size_t)Q8_TS;
  const size_t n0 = get_group_id(0) * (size_t)Q8_TS;
  float acc[4][4];
  Q8_UNROLL for (int i = 0; i < 4; i++)
    Q8_UNROLL for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  float4 ra = q8_tile_a(A, M, K, m0 + lr, lk);
  float4 rb = q8_tile_b(q, sc, N, K, nb, shift, n0 + lr, lk);
  const size_t steps = ((size_t)K + Q8_TK - 1) / Q8_TK;
  for (size_t t = 0; t < steps; t++) {
    const float ea[4] = {ra.x, ra.y, ra.z, ra.w};
    const float eb[4] = {rb.x, rb.y, rb.z, rb.w};
    Q8_UNROLL for (int j = 0; j < 4; j++) {
      As[(lk + j) * Q8_LP + lr] = ea[j];
      Bs[(lk + j) * Q8_LP + lr] = eb[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t + 1 < steps) { /* the next slice travels during the products */
      const size_t k = (t + 1) * Q8_TK + (size_t)lk;
      ra = q8_tile_a(A, M, K, m0 + lr, k);
      rb = q8_tile_b(q, sc, N, K, nb, shift, n0 + lr, k);
    }
    Q8_UNROLL for (int k = 0; k < Q8_TK; k++) {
      const float4 a = *(local const float4 *)(As + k * Q8_LP + ty * 4);
      const float4 b = *(local const float4 *)(Bs + k * Q8_LP + tx * 4);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
      Q8_UNROLL for (int i = 0; i < 4; i++)
        Q8_UNROLL for (int j = 0; j < 4; j++)
          acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  Q8_UNROLL for (int i = 0; i < 4; i++) {
    const size_t m = m0 + (size_t)(ty * 4 + i);
    Q8_UNROLL for (int j = 0; j < 4; j++) {
      const size_t n = n0 + (size_t)(tx * 4 + j);
      if (m < M && n < N) STORE_C(acc[i][j], C, m * (size_t)ldc + n);
    }
  }
}

#else
/* ---- CPU: register-blocked rows ----------------------------------------- */

/* The lanes of an accumulator, summed in a fixed order. */
Q8_INLINE float q8_hsum16(float16 v) { return rumus_hsum8(v.lo + v.hi); }

/* NR dequantized chunks of B at column k (rows n0 .., the last row
 * repeated past N; their block's scales in s) times MR chunks of A (rows
 * m0 .., the last row repeated past M, never stored), into the
 * accumulators.  No row test in the loop: with one, PoCL's code stored
 * every accumulator to memory after each product (14 stores of 64 bytes
 * a chunk in q8_rows_8). */
#define Q8_ROWS_CHUNK(LOADB, LOADA)                                          \
  do {                                                                       \
    float16 bv[8]; /* NR of them */                                          \
    Q8_UNROLL for (int j = 0; j < NR; j++)                                   \
      bv[j] = LOADB(q + min(n0 + (size_t)j, N - 1) * K + k) * s[j];          \
    Q8_UNROLL for (int i = 0; i < MR; i++) {                                 \
      const float16 av = LOADA(A + min(m0 + (size_t)i, M - 1) * K + k);      \
      Q8_UNROLL for (int j = 0; j < NR; j++)                                 \
        acc[i][j] = fma(av, bv[j], acc[i][j]);                               \
    }                                                                        \
  } while (0)

#define Q8_QFULL(p) convert_float16(vload16(0, p))
#define Q8_QTAIL(p) q8_tail_q(p, K - k)
#define Q8_AFULL(p) LOAD16(p, 0)
#define Q8_ATAIL(p) q8_tail_x(p, K - k)

/* K block by block: the NR scales are converted once a block (Q8_SCALE),
 * then its 16-element chunks, the last one of a row maybe short. */
Q8_INLINE void q8_rows_body(const int MR, const int NR,
                            global const real_t *A, global const char *q,
                            global const half *sc, global ct_t *C, size_t M,
                            size_t N, size_t K, size_t ldc, size_t nb,
                            uint shift) {
  const size_t m0 = get_global_id(0) * MR, n0 = get_global_id(1) * NR;
  if (m0 >= M || n0 >= N) return;
  float16 acc[8][8];
  Q8_UNROLL for (int i = 0; i < MR; i++)
    Q8_UNROLL for (int j = 0; j < NR; j++) acc[i][j] = 0.0f;
  const size_t bs = (size_t)1 << shift;
  for (size_t b = 0, k0 = 0; b < nb; b++, k0 += bs) {
    float s[8];
    Q8_UNROLL for (int j = 0; j < NR; j++)
      s[j] = Q8_SCALE(sc, min(n0 + (size_t)j, N - 1) * nb + b);
    const size_t k1 = min(k0 + bs, K);
    size_t k = k0;
    for (; k + 16 <= k1; k += 16) Q8_ROWS_CHUNK(Q8_QFULL, Q8_AFULL);
    if (k < k1) Q8_ROWS_CHUNK(Q8_QTAIL, Q8_ATAIL);
  }
  Q8_UNROLL for (int i = 0; i < MR; i++)
    Q8_UNROLL for (int j = 0; j < NR; j++)
      if (m0 + i < M && n0 + j < N)
        STORE_C(q8_hsum16(acc[i][j]), C, (m0 + i) * ldc + n0 + j);
}

/* MR x NR: 8 or 16 float16 accumulators (AVX-512 has 32 registers); the
 * host halves NR where the vectors are 8 lanes (rows_nr in
 * src/ops/quant.c). */
#ifndef Q8_NR1
#define Q8_NR1 8
#endif
#ifndef Q8_NR2
#define Q8_NR2 4
#endif
#ifndef Q8_NR4
#define Q8_NR4 4
#endif
#ifndef Q8_NR8
#define Q8_NR8 2
#endif
#define Q8_ROWS_KERNEL(MR, NR)                                               \
  __kernel void q8_rows_##MR(                                                \
      global const real_t *A, ulong a_off, global const char *q,             \
      ulong q_off, global const half *sc, ulong sc_off, global ct_t *C,      \
      ulong c_off, ulong M, ulong N, ulong K, ulong ldc, ulong nb,           \
      uint shift) {                                                          \
    q8_rows_body(MR, NR, A + (size_t)a_off, q + (size_t)q_off,               \
                 sc + (size_t)sc_off, C + (size_t)c_off, M, N, K, ldc, nb,   \
                 shift);                                                     \
  }
Q8_ROWS_KERNEL(1, Q8_NR1)
Q8_ROWS_KERNEL(2, Q8_NR2)
Q8_ROWS_KERNEL(4, Q8_NR4)
Q8_ROWS_KERNEL(8, Q8_NR8)
#endif
