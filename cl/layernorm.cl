/*
 * layernorm.cl - layer norm and RMS norm over the last dimension, forward
 * and backward.  A tensor [..., C] is `rows` rows of `cols` contiguous
 * elements (row r starts at element off + r * cols); gamma and beta are
 * [C]; the per-row statistics (mean, rstd / rrms) are float [rows].
 *
 *   layer norm:  mean = sum x / n,  var = sum (x - mean)^2 / n (biased),
 *                rstd = 1 / sqrt(var + eps),
 *                y = (x - mean) * rstd * gamma + beta
 *   RMS norm:    rrms = 1 / sqrt(sum x^2 / n + eps),  y = x * rrms * gamma
 *   backward:    xhat = (x - mean) * rstd (RMS: x * rrms), g = dy * gamma,
 *                dx = rstd * (g - sum g / n - xhat * sum(g xhat) / n)
 *                (RMS: without the sum g term),
 *                dgamma[j] = sum_r dy[r, j] xhat[r, j],
 *                dbeta[j] = sum_r dy[r, j]
 *
 * The variance is two-pass: a pass for the mean m0, then the sums of d =
 * x - m0 and of d^2, var = (sum d^2 - (sum d)^2 / n) / n, and the saved
 * mean is m0 + sum d / n (the correction of m0's rounding error), never
 * E[x^2] - E[x]^2.  y is computed from x read again (or held in
 * registers), so each output is rounded to its storage type once.
 *
 * Variants of the row kernels, as cl/softmax.cl's (the host's
 * rumus__row_plan_make picks one):
 *   *_wgc  rt work-items per row holding it in registers (CACHE_V4 float4
 *          each, lanes past the row's end hold 0), segmented sums in local
 *          memory, WG / rt rows per work-group (GPU, rows up to 4 WG
 *          CACHE_V4 elements);
 *   *_wg   one work-group per row, strided float4 walks, x read once per
 *          pass (GPU, longer rows);
 *   *_row  one work-item per row (the forward: per ri rows, the host's),
 *          no barriers, float8 accumulators (CPU);
 * and the host's own choices on GPUs (local size at launch, no program
 * of their own): *_fwd_wide, one work-group per row holding it in
 * registers (rows the _wgc rungs do not hold, up to 16384); *_bwd_blk
 * and *_bwd_wide, below.
 * The gradients of gamma and beta are column sums over the rows in a
 * fixed order: ln_dparam_part_{wg,item}, or with dx the *_bwd_blk and
 * *_bwd_wide (a work-group per block) or *_bwd_fused (a team per block)
 * kernels, sums the rows of each block of RB rows (in row order, one fma
 * per term) per column into float partials, ln_dparam_fold adds the blocks
 * in order per column (ln_dparam_fold1 first adds groups of LN_FOLD_G
 * blocks when there are more; ln_dparam_fold_one does both in one
 * launch, in the same order, for up to LN_FOLD_H groups).
 * The blocks depend on the shape only and the stage-1 kernels all add in the
 * same order, so dgamma and dbeta are the same bits on both variants for
 * the same inputs (the statistics of the variants' forwards may differ in
 * their last bits).
 *
 * Storage: x, y, dy, dx of the program's RUMUS_STORAGE; gamma, beta and
 * their gradients of LN_PARAM (F32, or RUMUS_STORAGE); statistics float.
 * A NULL gamma / beta / statistic is a has_* flag of 0 (the buffer passed
 * in its place is not read or written).
 */

/* No a * b + c contractions but the written fma()s: the backward's dx
 * comes from different kernels with and without dgamma / dbeta (the CPU
 * variant's _rowp and _row), which must give the same bits, and NVIDIA's
 * compiler fused dy gamma - ca into an fma in one of them and not in the
 * other (check_layernorm's in-place test at 203 x 257 on the H200). */
#pragma OPENCL FP_CONTRACT OFF

#ifndef LN_PARAM
#define LN_PARAM F32 /* storage tag of gamma, beta, dgamma, dbeta */
#endif
#ifndef LN_FOLD_LS
#define LN_FOLD_LS 64 /* local size of ln_dparam_fold and ln_dparam_part_* */
#endif
#ifndef LN_FOLD_G
#define LN_FOLD_G 64 /* blocks per group of stage 2a (layernorm.c's; fixed) */
#endif

/* The GPU kernels' helpers that take a work-item's register arrays: always
 * inlined, so the arrays stay in registers (a call passes them through
 * the stack). */
#define LN_INLINE inline __attribute__((always_inline))

typedef RUMUS_TYPE(LN_PARAM) param_t;
#define PLOAD(p, i) RUMUS_LOAD(LN_PARAM, p, i)
#define PSTORE(v, p, i) RUMUS_STORE(LN_PARAM, v, p, i)
#define PLOAD8(p, i) RUMUS_LOADN(LN_PARAM, 8, p, i)
#if RUMUS_ALIGN4 /* the host checked gamma's and beta's offsets too */
#define PLOAD4(p, i) RUMUS_LOADA(LN_PARAM, 4, p, i)
#else
#define PLOAD4(p, i) RUMUS_LOADN(LN_PARAM, 4, p, i)
#endif

/* The statistics of a row from its sums: s0 = sum x (layer norm) or sum
 * x^2 (RMS), and for layer norm s1 = sum d, s2 = sum d^2 with d = x - m0,
 * m0 = s0 / n. */
inline float ln_rstd(float s1, float s2, float n, float eps) {
  /* Rounding may leave a constant row's variance a hair below 0; a NaN
   * must stay NaN (fmax would turn it into 0). */
  const float v = (s2 - s1 * (s1 / n)) / n;
  return 1.0f / sqrt((v < 0.0f ? 0.0f : v) + eps);
}
inline float rms_rrms(float sq, float n, float eps) {
  return 1.0f / sqrt(sq / n + eps);
}

/* ---- Row variant (one work-item per row) ------------------------------- */

/* Sum of a row (sq: of its squares). */
inline float ln_row_sum(global const real_t *x, size_t n, int sq) {
  float8 a8 = 0.0f;
  float a = 0.0f;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const float8 v = LOAD8(x, j);
    a8 = sq ? fma(v, v, a8) : a8 + v;
  }
  for (; j < n; j++) {
    const float v = LOAD(x, j);
    a = sq ? fma(v, v, a) : a + v;
  }
  return a + rumus_hsum8(a8);
}

/* Sums of d = x - m0 and of d^2 over a row. */
inline float2 ln_row_dev(global const real_t *x, size_t n, float m0) {
  float8 a8 = 0.0f, b8 = 0.0f;
  float a = 0.0f, b = 0.0f;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const float8 d = LOAD8(x, j) - m0;
    a8 += d;
    b8 = fma(d, d, b8);
  }
  for (; j < n; j++) {
    const float d = LOAD(x, j) - m0;
    a += d;
    b = fma(d, d, b);
  }
  return (float2)(a + rumus_hsum8(a8), b + rumus_hsum8(b8));
}

/* y = (x - mean) * rstd * gamma + beta over a row (RMS: mean = 0, no
 * beta). */
inline void ln_row_write(global const real_t *x, global real_t *y, size_t n,
                         float mean, float rstd, int has_g,
                         global const param_t *g, int has_b,
                         global const param_t *b) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float8 v = (LOAD8(x, j) - mean) * rstd;
    if (has_g) v *= PLOAD8(g, j);
    if (has_b) v += PLOAD8(b, j);
    STORE8(v, y, j);
  }
  for (; j < n; j++) {
    float v = (LOAD(x, j) - mean) * rstd;
    if (has_g) v *= PLOAD(g, j);
    if (has_b) v += PLOAD(b, j);
    STORE(v, y, j);
  }
}

/* ln_row_write over row x, y, and ln_row_sum(xn, n, sq) of the next row
 * xn in the same walk (returned): the next row's reads from memory go
 * with this row's writes, as in a copy, rather than in a pass of their
 * own.  The same operations per row, so the same bits. */
inline float ln_row_write_sum(global const real_t *x, global real_t *y,
                              size_t n, float mean, float rstd, int has_g,
                              global const param_t *g, int has_b,
                              global const param_t *b,
                              global const real_t *xn, int sq) {
  float8 a8 = 0.0f;
  float a = 0.0f;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float8 v = (LOAD8(x, j) - mean) * rstd;
    if (has_g) v *= PLOAD8(g, j);
    if (has_b) v += PLOAD8(b, j);
    STORE8(v, y, j);
    const float8 u = LOAD8(xn, j);
    a8 = sq ? fma(u, u, a8) : a8 + u;
  }
  for (; j < n; j++) {
    float v = (LOAD(x, j) - mean) * rstd;
    if (has_g) v *= PLOAD(g, j);
    if (has_b) v += PLOAD(b, j);
    STORE(v, y, j);
    const float u = LOAD(xn, j);
    a = sq ? fma(u, u, a) : a + u;
  }
  return a + rumus_hsum8(a8);
}

/* Layer norm's walk over a row of a work-item's rows: ln_row_write over
 * x, y, with ln_row_dev(xd, n, md) of the next row (from the cache) and
 * ln_row_sum(xs, n, 0) of the one after it (from memory) in the same
 * walk: .xy the sums of d, .z the sum.  The same operations per row as
 * the one-pass helpers, so the same bits. */
inline float4 ln_row_wds(global const real_t *x, global real_t *y, size_t n,
                         float mean, float rstd, int has_g,
                         global const param_t *g, int has_b,
                         global const param_t *b, global const real_t *xd,
                         float md, global const real_t *xs) {
  float8 a8 = 0.0f, b8 = 0.0f, c8 = 0.0f;
  float a = 0.0f, bb = 0.0f, c = 0.0f;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float8 v = (LOAD8(x, j) - mean) * rstd;
    if (has_g) v *= PLOAD8(g, j);
    if (has_b) v += PLOAD8(b, j);
    STORE8(v, y, j);
    const float8 d = LOAD8(xd, j) - md;
    a8 += d;
    b8 = fma(d, d, b8);
    c8 += LOAD8(xs, j);
  }
  for (; j < n; j++) {
    float v = (LOAD(x, j) - mean) * rstd;
    if (has_g) v *= PLOAD(g, j);
    if (has_b) v += PLOAD(b, j);
    STORE(v, y, j);
    const float d = LOAD(xd, j) - md;
    a += d;
    bb = fma(d, d, bb);
    c += LOAD(xs, j);
  }
  return (float4)(a + rumus_hsum8(a8), bb + rumus_hsum8(b8),
                  c + rumus_hsum8(c8), 0.0f);
}

/* Rows 0 .. nr - 1 from x, y (row 0's; stats: row 0's) one after
 * another, each row's passes but the first's in the walks that write the
 * rows before it, so the reads of one row from memory go with the writes
 * of another, as in a copy, rather than in passes of their own: RMS norm
 * a row's sum of squares in the walk writing the row before
 * (ln_row_write_sum), layer norm its sum two rows before and its sums of
 * d one row before (ln_row_wds).  Past the last row the walks re-read a
 * cached row and drop the sums. */
inline void ln_fwd_row_body(global const real_t *x, global real_t *y,
                            size_t n, size_t nr, int rms, float eps,
                            int has_g, global const param_t *g, int has_b,
                            global const param_t *b, int has_stats,
                            global float *mean_out, global float *rstd_out) {
  const float fn = (float)n;
  float s0 = ln_row_sum(x, n, rms), m0 = s0 / fn;
  float2 dv = rms ? (float2)(0.0f) : ln_row_dev(x, n, m0);
  float m1 = !rms && nr > 1 ? ln_row_sum(x + n, n, 0) / fn : 0.0f;
  for (size_t i = 0; i < nr; i++) {
    global const real_t *xr = x + i * n;
    float mean = 0.0f, rstd;
    if (rms) {
      rstd = rms_rrms(s0, fn, eps);
      if (i + 1 < nr)
        s0 = ln_row_write_sum(xr, y + i * n, n, 0.0f, rstd, has_g, g, 0, b,
                              xr + n, 1);
      else
        ln_row_write(xr, y + i * n, n, 0.0f, rstd, has_g, g, 0, b);
    } else {
      mean = m0 + dv.x / fn;
      rstd = ln_rstd(dv.x, dv.y, fn, eps);
      global const real_t *xd = i + 1 < nr ? xr + n : xr;
      const float4 t = ln_row_wds(xr, y + i * n, n, mean, rstd, has_g, g,
                                  has_b, b, xd, m1,
                                  i + 2 < nr ? xr + 2 * n : xd);
      m0 = m1;
      dv = t.xy;
      m1 = t.z / fn;
    }
    if (has_stats) {
      if (!rms) mean_out[i] = mean;
      rstd_out[i] = rstd;
    }
  }
}

/* Sums of g = dy * gamma and of g * xhat over a row. */
inline float2 ln_row_bwd_sums(global const real_t *dy,
                              global const real_t *x, size_t n, float mean,
                              float rstd, int has_g,
                              global const param_t *gm) {
  float8 a8 = 0.0f, b8 = 0.0f;
  float a = 0.0f, b = 0.0f;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float8 g = LOAD8(dy, j);
    if (has_g) g *= PLOAD8(gm, j);
    a8 += g;
    b8 = fma(g, (LOAD8(x, j) - mean) * rstd, b8);
  }
  for (; j < n; j++) {
    float g = LOAD(dy, j);
    if (has_g) g *= PLOAD(gm, j);
    a += g;
    b = fma(g, (LOAD(x, j) - mean) * rstd, b);
  }
  return (float2)(a + rumus_hsum8(a8), b + rumus_hsum8(b8));
}

/* dx = rstd * (g - ca - xhat * cb) over a row.  In place (dx == dy) each
 * element is read before it is written. */
inline void ln_row_bwd_write(global const real_t *dy,
                             global const real_t *x, global real_t *dx,
                             size_t n, float mean, float rstd, float ca,
                             float cb, int has_g, global const param_t *gm) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    float8 g = LOAD8(dy, j);
    if (has_g) g *= PLOAD8(gm, j);
    const float8 xh = (LOAD8(x, j) - mean) * rstd;
    STORE8(rstd * (g - ca - xh * cb), dx, j);
  }
  for (; j < n; j++) {
    float g = LOAD(dy, j);
    if (has_g) g *= PLOAD(gm, j);
    const float xh = (LOAD(x, j) - mean) * rstd;
    STORE(rstd * (g - ca - xh * cb), dx, j);
  }
}

/* ---- Work-group variants ----------------------------------------------- */

/* Float4 group q of a parameter row of n (lanes past the end: fill). */
inline float4 ln_pload4_fill(global const param_t *p, size_t q, size_t n,
                             float fill) {
  const size_t j = q * 4;
  if (j + 4 <= n) return PLOAD4(p, j);
  float4 v = (float4)(fill);
  if (j < n) v.x = PLOAD(p, j);
  if (j + 1 < n) v.y = PLOAD(p, j + 1);
  if (j + 2 < n) v.z = PLOAD(p, j + 2);
  return v;
}

/* 1 for the lanes of float4 group q that lie in a row of n. */
inline float4 ln_mask4(size_t q, size_t n) {
  const size_t j = q * 4;
  return (float4)(j < n, j + 1 < n, j + 2 < n, j + 3 < n);
}

/* Stores the lanes of float4 group q of a float row of n that lie in it. */
inline void ln_part_store4(float4 v, global float *p, size_t q, size_t n) {
  const size_t j = q * 4;
  if (j + 4 <= n) {
    vstore4(v, q, p);
    return;
  }
  p[j] = v.x;
  if (j + 1 < n) p[j + 1] = v.y;
  if (j + 2 < n) p[j + 2] = v.z;
}

/* Row groups of the register kernels (the _wgc and wide forwards, the
 * _wgc and _blk backwards): rumus_rv of common.cl, float4, or float8
 * where the host found a 16-bit row and every tensor, gamma and beta
 * included, 8-element aligned (RUMUS_ALIGN8): one 16-byte access where
 * four halves take 8 bytes, too few in flight to stream at copy speed
 * (softmax's and cross-entropy's rows showed it).  A work-item holds the
 * same elements either way, LN_NV(n4) groups where the host counts n4
 * float4, so the host's geometry does not change with the width.  With
 * RUMUS_ALIGN8 a row is a whole number of groups: a group lies in the
 * row or past its end. */
#define LN_NV(n4) ((n4) * 4 / RUMUS_RV)
#if RUMUS_RV == 8
#define PLOADV(p, i) RUMUS_LOADA(LN_PARAM, 8, p, i)
inline float8 ln_ploadv_fill(global const param_t *p, size_t q, size_t n,
                             float fill) {
  return q * 8 < n ? PLOADV(p, q * 8) : (float8)(fill);
}
inline float8 ln_maskv(size_t q, size_t n) {
  return (float8)(q * 8 < n ? 1.0f : 0.0f);
}
/* Partial rows start at multiples of cols (a multiple of 8) in a buffer
 * of the context's scratch: float8 aligned. */
inline void ln_part_storev(float8 v, global float *p, size_t q, size_t n) {
  if (q * 8 < n) *(global float8 *)(p + q * 8) = v;
}
#else
#define PLOADV(p, i) PLOAD4(p, i)
#define ln_ploadv_fill ln_pload4_fill
#define ln_maskv ln_mask4
#define ln_part_storev ln_part_store4
#endif
/* The elements of group q inside a row of n. */
inline float ln_countv(size_t q, size_t n) {
  const size_t j = q * RUMUS_RV;
  return j >= n ? 0.0f : (n - j >= RUMUS_RV ? (float)RUMUS_RV : (float)(n - j));
}

/* rumus_wg_sum of two sums at once (the same tree, the same bits, half
 * the barriers). */
RUMUS_TREE_SUM(ln_tree_sum2, float2)
inline float2 ln_wg_sum2(local float2 *buf, float2 v) {
  return ln_tree_sum2(buf, v, WG);
}

/* Sums of a T over the work-group's segments of rt work-items (rt a power
 * of two dividing WG; LN_SEG_SUM) or over its first n work-items (n >= 1;
 * LN_GRP_SUM), the total returned to each, in two levels rather than a
 * tree of log2 rt barriers: up to 32 entries are added by every
 * work-item in index order (one barrier); more, first by 32 work-items,
 * work-item i adding entries i, i + 32, ... in order, then by every
 * work-item over those 32 partials in order (two barriers).  One fixed
 * order for every work-item and run.  buf holds 2 WG (LN_SEG_SUM) or n +
 * 32 (LN_GRP_SUM) entries; the caller barriers, or takes other entries,
 * before it writes buf again. */
#define LN_SEG_SUM(name, T)                                                  \
  inline T name(local T *buf, T v, uint rt) {                                \
    const size_t lid = get_local_id(0), lane = lid % rt;                     \
    local const T *src = buf + (lid - lane);                                 \
    uint m = rt;                                                             \
    buf[lid] = v;                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
    if (rt > 32) { /* uniform: rt is the kernel's argument */                \
      if (lane < 32) {                                                       \
        T s = buf[lid];                                                      \
        for (uint i = lane + 32; i < rt; i += 32) s += src[i];               \
        buf[WG + lid] = s;                                                   \
      }                                                                      \
      barrier(CLK_LOCAL_MEM_FENCE);                                          \
      src += WG;                                                             \
      m = 32;                                                                \
    }                                                                        \
    T t = src[0];                                                            \
    for (uint i = 1; i < m; i++) t += src[i];                                \
    return t;                                                                \
  }
#define LN_GRP_SUM(name, T)                                                  \
  inline T name(local T *buf, T v, size_t n) {                               \
    const size_t lid = get_local_id(0), m = n < 32 ? n : 32;                 \
    buf[lid] = v;                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
    if (lid < m) {                                                           \
      T s = v;                                                               \
      for (size_t i = lid + m; i < n; i += m) s += buf[i];                   \
      buf[n + lid] = s;                                                      \
    }                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
    T t = buf[n];                                                            \
    for (size_t i = 1; i < m; i++) t += buf[n + i];                          \
    return t;                                                                \
  }
LN_SEG_SUM(ln_seg2l, float)
LN_SEG_SUM(ln_seg2l2, float2)
LN_GRP_SUM(ln_grp2l, float)
LN_GRP_SUM(ln_grp2l2, float2)
LN_GRP_SUM(ln_grp2l4, float4)
LN_GRP_SUM(ln_grp2l8, float8)

#ifndef LN_WLS
#define LN_WLS 512 /* work-items of the wide forward (host: layernorm.c's) */
#endif
#ifndef LN_WV
#define LN_WV 8 /* float4 groups per work-item (host: layernorm.c's) */
#endif
#define LN_FWD_MAXV (CACHE_V4 > LN_WV ? CACHE_V4 : LN_WV)

/* A sum over the lane's row: its segment of rt work-items (the _wgc
 * kernels; la 2 WG entries) or the wide kernel's LN_WLS (la LN_WLS + 32). */
LN_INLINE float ln_fwd_sum(local float *la, float a, uint rt, const int wide) {
  return wide ? ln_grp2l(la, a, LN_WLS) : ln_seg2l(la, a, rt);
}
LN_INLINE float2 ln_fwd_sum2(local float2 *lbc, float2 a, uint rt,
                             const int wide) {
  return wide ? ln_grp2l2(lbc, a, LN_WLS) : ln_seg2l2(lbc, a, rt);
}

#ifndef LN_FWD_ONE
#define LN_FWD_ONE 0 /* 1: the wide forward's statistics in one sum (host's) */
#endif

/* Chan's merge of the moments b = (mean, M2) of nb elements into a's, of
 * *na elements. */
inline float2 ln_merge(float *na, float2 a, float nb, float2 b) {
  if (nb == 0.0f) return a;
  if (*na == 0.0f) {
    *na = nb;
    return b;
  }
  const float n = *na + nb, delta = b.x - a.x, f = nb / n;
  const float2 m = (float2)(a.x + delta * f,
                            a.y + b.y + delta * delta * (f * *na));
  *na = n;
  return m;
}

/* The wide forward's row moments (mean, sum of squared deviations) in one
 * two-level sum (LN_NV(LN_WV) groups per work-item in v, LN_WLS work-items): each
 * work-item's own count, mean and M2 from its registers, then Chan's
 * merges in a fixed order, as LN_GRP_SUM adds (lc, lm: LN_WLS + 32
 * entries). */
LN_INLINE float2 ln_wide_moments(const rumus_rv *v, size_t n,
                                 local float *lc, local float2 *lm) {
  const size_t lid = get_local_id(0);
  float c = 0.0f, s = 0.0f, m2 = 0.0f;
#pragma unroll
  for (int k = 0; k < LN_NV(LN_WV); k++) {
    c += ln_countv(lid + (size_t)k * LN_WLS, n);
    s += rumus_hsumv(v[k]); /* 0 past the row's end */
  }
  const float mi = c > 0.0f ? s / c : 0.0f;
#pragma unroll
  for (int k = 0; k < LN_NV(LN_WV); k++) {
    const rumus_rv d = (v[k] - mi) * ln_maskv(lid + (size_t)k * LN_WLS, n);
    m2 += rumus_dotv(d, d);
  }
  lc[lid] = c;
  lm[lid] = (float2)(mi, m2);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < 32) {
    float cc = c;
    float2 t = (float2)(mi, m2);
    for (size_t i = lid + 32; i < LN_WLS; i += 32)
      t = ln_merge(&cc, t, lc[i], lm[i]);
    lc[LN_WLS + lid] = cc;
    lm[LN_WLS + lid] = t;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float cc = lc[LN_WLS];
  float2 t = lm[LN_WLS];
  for (int i = 1; i < 32; i++)
    t = ln_merge(&cc, t, lc[LN_WLS + i], lm[LN_WLS + i]);
  return t;
}

/* The register forward of the _wgc kernels (wide 0: rt work-items a row,
 * nv = LN_NV(CACHE_V4) groups) and of the wide kernel (wide 1: LN_WLS, nv
 * = LN_NV(LN_WV)).
 * Row of n elements (n = 0 for padding rows: they load and store nothing
 * but take part in the barriers); the lane holds groups lane, lane + rt,
 * ...  la and lbc are distinct, so successive reductions need no barrier
 * between them.  Every load is issued before the sums; the loops are
 * unrolled (constant trip counts with guards) so that the row stays in
 * registers. */
LN_INLINE void ln_fwd_regs_body(global const real_t *x, global real_t *y,
                                size_t n, uint rt, const int nv,
                                const int wide, int rms, float eps, int has_g,
                                global const param_t *g, int has_b,
                                global const param_t *b, local float *la,
                                local float2 *lbc, float *mean_o,
                                float *rstd_o) {
  const size_t lane = get_local_id(0) % rt;
  const float fn = n ? (float)n : 1.0f;
  rumus_rv v[LN_NV(LN_FWD_MAXV)];
  float a = 0.0f;
  /* Without the tests of the row's end where the lane's last group lies
   * inside the row (fewer registers). */
  const int full = (lane + (size_t)(nv - 1) * rt + 1) * RUMUS_RV <= n;
  if (full) {
#pragma unroll
    for (int k = 0; k < LN_NV(LN_FWD_MAXV); k++)
      if (k < nv) v[k] = LOADV(x, (lane + (size_t)k * rt) * RUMUS_RV);
  } else {
#pragma unroll
    for (int k = 0; k < LN_NV(LN_FWD_MAXV); k++)
      if (k < nv) v[k] = rumus_loadv_fill(x, lane + (size_t)k * rt, n, 0.0f);
  }
  float mean = 0.0f, rstd;
  if (LN_FWD_ONE && wide && !rms) { /* one sum: two barriers, not four */
    const float2 t = ln_wide_moments(v, n, la, lbc);
    const float var = t.y / fn;
    mean = t.x;
    rstd = 1.0f / sqrt((var < 0.0f ? 0.0f : var) + eps); /* NaN stays */
  } else if (rms) {
#pragma unroll
    for (int k = 0; k < LN_NV(LN_FWD_MAXV); k++)
      if (k < nv) a += rumus_dotv(v[k], v[k]);
    rstd = rms_rrms(ln_fwd_sum(la, a, rt, wide), fn, eps);
  } else {
#pragma unroll
    for (int k = 0; k < LN_NV(LN_FWD_MAXV); k++)
      if (k < nv) a += rumus_hsumv(v[k]);
    const float s0 = ln_fwd_sum(la, a, rt, wide);
    const float m0 = s0 / fn;
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < LN_NV(LN_FWD_MAXV); k++) {
      if (k >= nv) continue; /* not break: the loop unrolls */
      const rumus_rv d = (v[k] - m0) * ln_maskv(lane + (size_t)k * rt, n);
      s1 += rumus_hsumv(d);
      s2 += rumus_dotv(d, d);
    }
    const float2 s = ln_fwd_sum2(lbc, (float2)(s1, s2), rt, wide);
    mean = m0 + s.x / fn;
    rstd = ln_rstd(s.x, s.y, fn, eps);
  }
  if (full) {
#pragma unroll
    for (int k = 0; k < LN_NV(LN_FWD_MAXV); k++) {
      if (k >= nv) continue;
      const size_t j = (lane + (size_t)k * rt) * RUMUS_RV;
      rumus_rv o = (v[k] - mean) * rstd;
      if (has_g) o *= PLOADV(g, j);
      if (has_b) o += PLOADV(b, j);
      STOREV(o, y, j);
    }
  } else {
#pragma unroll
    for (int k = 0; k < LN_NV(LN_FWD_MAXV); k++) {
      const size_t q = lane + (size_t)k * rt;
      if (k >= nv || q * RUMUS_RV >= n) continue;
      rumus_rv o = (v[k] - mean) * rstd;
      if (has_g) o *= ln_ploadv_fill(g, q, n, 0.0f);
      if (has_b) o += ln_ploadv_fill(b, q, n, 0.0f);
      rumus_storev_part(o, y, q, n);
    }
  }
  *mean_o = mean;
  *rstd_o = rstd;
}

LN_INLINE void ln_bwd_wgc_body(global const real_t *dy, global const real_t *x,
                               global real_t *dx, size_t n, uint rt, int rms,
                               float mean, float rstd, int has_g,
                               global const param_t *gm, local float2 *lab) {
  const size_t lane = get_local_id(0) % rt;
  const float fn = n ? (float)n : 1.0f;
  rumus_rv gv[CACHE_V], xh[CACHE_V];
  float a = 0.0f, b = 0.0f;
#pragma unroll
  for (int k = 0; k < CACHE_V; k++) {
    const size_t q = lane + (size_t)k * rt;
    gv[k] = rumus_loadv_fill(dy, q, n, 0.0f);
    if (has_g) gv[k] *= ln_ploadv_fill(gm, q, n, 0.0f);
    xh[k] = (rumus_loadv_fill(x, q, n, 0.0f) - mean) * rstd;
    a += rumus_hsumv(gv[k]);
    b += rumus_dotv(gv[k], xh[k]); /* gv is 0 past the row's end */
  }
  const float2 s = ln_seg2l2(lab, (float2)(a, b), rt);
  const float ca = rms ? 0.0f : s.x / fn, cb = s.y / fn;
#pragma unroll
  for (int k = 0; k < CACHE_V; k++) {
    const size_t q = lane + (size_t)k * rt;
    if (q * RUMUS_RV >= n) continue;
    rumus_storev_part(rstd * (gv[k] - ca - xh[k] * cb), dx, q, n);
  }
}

/* Strided sums over a row for the _wg kernels: work-item lid takes float4
 * groups lid, lid + WG, ... and the tail's elements. */
inline float ln_wg_sum(global const real_t *x, size_t n, int sq) {
  const size_t lid = get_local_id(0), n4 = n / 4;
  float a = 0.0f;
  for (size_t q = lid; q < n4; q += WG) {
    const float4 v = LOAD4(x, q * 4);
    a += sq ? dot(v, v) : rumus_hsum4(v);
  }
  for (size_t j = n4 * 4 + lid; j < n; j += WG) {
    const float v = LOAD(x, j);
    a = sq ? fma(v, v, a) : a + v;
  }
  return a;
}

inline void ln_fwd_wg_body(global const real_t *x, global real_t *y,
                           size_t n, int rms, float eps, int has_g,
                           global const param_t *g, int has_b,
                           global const param_t *b, local float *la,
                           local float2 *lbc, float *mean_o, float *rstd_o) {
  const size_t lid = get_local_id(0), n4 = n / 4;
  const float fn = (float)n;
  rumus_wg_sum(la, ln_wg_sum(x, n, rms));
  const float s0 = la[0];
  float mean = 0.0f, rstd;
  if (rms) {
    rstd = rms_rrms(s0, fn, eps);
  } else {
    const float m0 = s0 / fn;
    float s1 = 0.0f, s2 = 0.0f;
    for (size_t q = lid; q < n4; q += WG) {
      const float4 d = LOAD4(x, q * 4) - m0;
      s1 += rumus_hsum4(d);
      s2 += dot(d, d);
    }
    for (size_t j = n4 * 4 + lid; j < n; j += WG) {
      const float d = LOAD(x, j) - m0;
      s1 += d;
      s2 = fma(d, d, s2);
    }
    const float2 s = ln_wg_sum2(lbc, (float2)(s1, s2));
    mean = m0 + s.x / fn;
    rstd = ln_rstd(s.x, s.y, fn, eps);
  }
  /* Backwards (RUMUS_REV_Q): the row's end, read last, may be cached. */
  for (size_t j = n4 * 4 + lid; j < n; j += WG) {
    float o = (LOAD(x, j) - mean) * rstd;
    if (has_g) o *= PLOAD(g, j);
    if (has_b) o += PLOAD(b, j);
    STORE(o, y, j);
  }
  RUMUS_REV_Q(q, n4) {
    float4 o = (LOAD4(x, q * 4) - mean) * rstd;
    if (has_g) o *= PLOAD4(g, q * 4);
    if (has_b) o += PLOAD4(b, q * 4);
    STORE4(o, y, q * 4);
  }
  *mean_o = mean;
  *rstd_o = rstd;
}

inline void ln_bwd_wg_body(global const real_t *dy, global const real_t *x,
                           global real_t *dx, size_t n, int rms, float mean,
                           float rstd, int has_g, global const param_t *gm,
                           local float2 *lab) {
  const size_t lid = get_local_id(0), n4 = n / 4;
  const float fn = (float)n;
  float a = 0.0f, b = 0.0f;
  for (size_t q = lid; q < n4; q += WG) {
    float4 g = LOAD4(dy, q * 4);
    if (has_g) g *= PLOAD4(gm, q * 4);
    a += rumus_hsum4(g);
    b += dot(g, (LOAD4(x, q * 4) - mean) * rstd);
  }
  for (size_t j = n4 * 4 + lid; j < n; j += WG) {
    float g = LOAD(dy, j);
    if (has_g) g *= PLOAD(gm, j);
    a += g;
    b = fma(g, (LOAD(x, j) - mean) * rstd, b);
  }
  const float2 s = ln_wg_sum2(lab, (float2)(a, b));
  const float ca = rms ? 0.0f : s.x / fn, cb = s.y / fn;
  for (size_t j = n4 * 4 + lid; j < n; j += WG) {
    float g = LOAD(dy, j);
    if (has_g) g *= PLOAD(gm, j);
    STORE(rstd * (g - ca - (LOAD(x, j) - mean) * rstd * cb), dx, j);
  }
  RUMUS_REV_Q(q, n4) {
    float4 g = LOAD4(dy, q * 4);
    if (has_g) g *= PLOAD4(gm, q * 4);
    const float4 xh = (LOAD4(x, q * 4) - mean) * rstd;
    STORE4(rstd * (g - ca - xh * cb), dx, q * 4);
  }
}

/* ---- Entries --------------------------------------------------------------
 * Forwards: (x, y, gamma, beta, mean, rstd, has_g, has_b, has_stats, eps,
 * rows, cols[, rt]); RMS ignores beta and mean.  Backwards: (dy, x, gamma,
 * mean, rstd, dx, has_g, rows, cols[, rt]); RMS ignores mean.  Every
 * tensor is (buffer, element offset). */

#define LN_FWD_ARGS                                                          \
  global const real_t *x, ulong x_off, global real_t *y, ulong y_off,        \
      global const param_t *g, ulong g_off, global const param_t *b,         \
      ulong b_off, global float *mean, ulong m_off, global float *rstd,      \
      ulong r_off, int has_g, int has_b, int has_stats, float eps,           \
      ulong rows, ulong cols
#define LN_BWD_ARGS                                                          \
  global const real_t *dy, ulong dy_off, global const real_t *x,             \
      ulong x_off, global const param_t *g, ulong g_off,                     \
      global const float *mean, ulong m_off, global const float *rstd,       \
      ulong r_off, global real_t *dx, ulong dx_off, int has_g, ulong rows,   \
      ulong cols

#define ROW_PTR(p, off, r) ((p) + (size_t)(off) + (r) * (size_t)cols)

/* Work-item i: rows [i ri, (i + 1) ri) (the host's item_rows). */
#define LN_FWD_ROW(name, rms)                                                \
  __kernel void name(LN_FWD_ARGS, ulong ri) {                                \
    const size_t r = get_global_id(0) * (size_t)ri;                          \
    if (r >= rows) return;                                                   \
    ln_fwd_row_body(ROW_PTR(x, x_off, r), ROW_PTR(y, y_off, r), cols,        \
                    min((size_t)ri, (size_t)rows - r), rms, eps, has_g,      \
                    g + g_off, has_b, b + b_off, has_stats,                  \
                    mean + m_off + r, rstd + r_off + r);                     \
  }
LN_FWD_ROW(layernorm_fwd_row, 0)
LN_FWD_ROW(rmsnorm_fwd_row, 1)

#define LN_BWD_ROW(name, rms)                                                \
  __kernel void name(LN_BWD_ARGS) {                                          \
    const size_t r = get_global_id(0);                                       \
    if (r >= rows) return;                                                   \
    const size_t n = (size_t)cols;                                           \
    const float mu = rms ? 0.0f : mean[m_off + r], rs = rstd[r_off + r];     \
    global const real_t *dyr = ROW_PTR(dy, dy_off, r);                       \
    global const real_t *xr = ROW_PTR(x, x_off, r);                          \
    const float2 s = ln_row_bwd_sums(dyr, xr, n, mu, rs, has_g, g + g_off);  \
    ln_row_bwd_write(dyr, xr, ROW_PTR(dx, dx_off, r), n, mu, rs,             \
                     rms ? 0.0f : s.x / (float)n, s.y / (float)n, has_g,     \
                     g + g_off);                                             \
  }
LN_BWD_ROW(layernorm_bwd_row, 0)
LN_BWD_ROW(rmsnorm_bwd_row, 1)

/* ---- Row-block backward (CPU variant) ------------------------------------
 * dx and stage 1 of the gamma / beta gradients in one pass: work-item k
 * takes block k of rb rows (plan_blocks' blocks), row after row: the
 * row's sums (ln_row_bwd_sums: dy and x come into the cache), then dx
 * from the cached row (ln_row_bwd_write's arithmetic) with the block's
 * column partials updated in the same walk (in part, rows in order, one
 * fma per term: ln_dparam_part_item's order, so the same bits on both
 * variants).  dy, x are read from memory once instead of twice
 * (ln_dparam_part_item then the _row kernel); the partials of a block
 * (2 cols floats) stay in the cache while its rows pass. */

/* dx = rstd * (g - ca - xhat * cb) over row r of block k, and part's
 * column sums of dy xhat and (has_b) dy (first: the block's first row,
 * which starts them from 0; RMS norm has no dbeta).  dy is read before dx
 * is written (in place).  In the same walk, ln_row_bwd_sums of the next
 * row (dyn, xn, its mean mn and rstd rn; returned), so its reads from
 * memory go with this row's writes (the same operations, the same
 * bits). */
inline float2 ln_rowp_write(global const real_t *dy, global const real_t *x,
                            global real_t *dx, size_t n, float mean,
                            float rstd, float ca, float cb, int has_g,
                            global const param_t *gm, global float *pg,
                            int has_b, global float *pb, int first,
                            global const real_t *dyn,
                            global const real_t *xn, float mn, float rn) {
  float8 a8 = 0.0f, b8 = 0.0f;
  float a = 0.0f, b = 0.0f;
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const float8 d = LOAD8(dy, j);
    float8 g = d, u = LOAD8(dyn, j);
    if (has_g) {
      const float8 gv = PLOAD8(gm, j);
      g *= gv;
      u *= gv;
    }
    const float8 xh = (LOAD8(x, j) - mean) * rstd;
    const float8 sg = first ? (float8)(0.0f) : vload8(0, pg + j);
    vstore8(fma(d, xh, sg), 0, pg + j);
    if (has_b) {
      const float8 sb = first ? (float8)(0.0f) : vload8(0, pb + j);
      vstore8(sb + d, 0, pb + j);
    }
    STORE8(rstd * (g - ca - xh * cb), dx, j);
    a8 += u;
    b8 = fma(u, (LOAD8(xn, j) - mn) * rn, b8);
  }
  for (; j < n; j++) {
    const float d = LOAD(dy, j);
    float g = d, u = LOAD(dyn, j);
    if (has_g) {
      const float gv = PLOAD(gm, j);
      g *= gv;
      u *= gv;
    }
    const float xh = (LOAD(x, j) - mean) * rstd;
    pg[j] = fma(d, xh, first ? 0.0f : pg[j]);
    if (has_b) pb[j] = (first ? 0.0f : pb[j]) + d;
    STORE(rstd * (g - ca - xh * cb), dx, j);
    a += u;
    b = fma(u, (LOAD(xn, j) - mn) * rn, b);
  }
  return (float2)(a + rumus_hsum8(a8), b + rumus_hsum8(b8));
}

/* dx of rows r (dy0, x0, dx0) and r + 1 (dy1, x1, dx1) of a block, as
 * ln_rowp_write row after row, in one walk: the partials are loaded and
 * stored once per two rows (the same fmas and adds, row r's first, so
 * the same bits); at 16384 columns they are 128 KiB a row from L2.  m,
 * rs, ca, cb: the two rows' mean, rstd and coefficients. */
inline void ln_rowp_write2(global const real_t *dy0, global const real_t *x0,
                           global real_t *dx0, global const real_t *dy1,
                           global const real_t *x1, global real_t *dx1,
                           size_t n, float2 m, float2 rs, float2 ca,
                           float2 cb, int has_g, global const param_t *gm,
                           global float *pg, int has_b, global float *pb,
                           int first) {
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const float8 d0 = LOAD8(dy0, j), d1 = LOAD8(dy1, j);
    float8 g0 = d0, g1 = d1;
    if (has_g) {
      const float8 gv = PLOAD8(gm, j);
      g0 *= gv;
      g1 *= gv;
    }
    const float8 xh0 = (LOAD8(x0, j) - m.x) * rs.x;
    const float8 xh1 = (LOAD8(x1, j) - m.y) * rs.y;
    const float8 sg = first ? (float8)(0.0f) : vload8(0, pg + j);
    vstore8(fma(d1, xh1, fma(d0, xh0, sg)), 0, pg + j);
    if (has_b) {
      const float8 sb = first ? (float8)(0.0f) : vload8(0, pb + j);
      vstore8((sb + d0) + d1, 0, pb + j);
    }
    STORE8(rs.x * (g0 - ca.x - xh0 * cb.x), dx0, j);
    STORE8(rs.y * (g1 - ca.y - xh1 * cb.y), dx1, j);
  }
  for (; j < n; j++) {
    const float d0 = LOAD(dy0, j), d1 = LOAD(dy1, j);
    float g0 = d0, g1 = d1;
    if (has_g) {
      const float gv = PLOAD(gm, j);
      g0 *= gv;
      g1 *= gv;
    }
    const float xh0 = (LOAD(x0, j) - m.x) * rs.x;
    const float xh1 = (LOAD(x1, j) - m.y) * rs.y;
    pg[j] = fma(d1, xh1, fma(d0, xh0, first ? 0.0f : pg[j]));
    if (has_b) pb[j] = ((first ? 0.0f : pb[j]) + d0) + d1;
    STORE(rs.x * (g0 - ca.x - xh0 * cb.x), dx0, j);
    STORE(rs.y * (g1 - ca.y - xh1 * cb.y), dx1, j);
  }
}

/* Row r's mean, rstd and dx coefficients ca, cb (sums of dyr, xr; rms:
 * RMS norm's). */
#define LN_ROWP_ROW(rms, r, mu, rs, ca, cb, dyr, xr)                         \
  global const real_t *dyr = ROW_PTR(dy, dy_off, r);                         \
  global const real_t *xr = ROW_PTR(x, x_off, r);                            \
  const float mu = rms ? 0.0f : mean[m_off + (r)], rs = rstd[r_off + (r)];   \
  const float2 s##mu = ln_row_bwd_sums(dyr, xr, n, mu, rs, has_g, g + g_off);\
  const float ca = rms ? 0.0f : s##mu.x / (float)n, cb = s##mu.y / (float)n

/* Global nb (padded): block k of rb rows, partials at part[k cols] (sum
 * dy xhat) and part[(nb + k) cols] (sum dy), as ln_dparam_part_item;
 * rows by twos when pairs (the host's choice by the row length), the
 * last one alone; a row's sums in the walk writing the row before. */
#define LN_BWD_ROWP(name, rms)                                               \
  __kernel void name(LN_BWD_ARGS, global float *part, ulong rb, ulong nb,    \
                     int pairs) {                                            \
    const size_t k = get_global_id(0), n = (size_t)cols;                     \
    if (k >= (size_t)nb) return;                                             \
    const size_t r0 = k * (size_t)rb;                                        \
    const size_t r1 = min((k + 1) * (size_t)rb, (size_t)rows);               \
    global float *pg = part + k * n, *pb = part + ((size_t)nb + k) * n;      \
    size_t r = r0;                                                           \
    for (; pairs && r + 2 <= r1; r += 2) {                                   \
      LN_ROWP_ROW(rms, r, mu0, rs0, ca0, cb0, dy0, x0);                      \
      LN_ROWP_ROW(rms, r + 1, mu1, rs1, ca1, cb1, dy1, x1);                  \
      ln_rowp_write2(dy0, x0, ROW_PTR(dx, dx_off, r), dy1, x1,               \
                     ROW_PTR(dx, dx_off, r + 1), n, (float2)(mu0, mu1),      \
                     (float2)(rs0, rs1), (float2)(ca0, ca1),                 \
                     (float2)(cb0, cb1), has_g, g + g_off, pg, !rms, pb,     \
                     r == r0);                                               \
    }                                                                        \
    if (r == r1) return;                                                     \
    float mu = rms ? 0.0f : mean[m_off + r], rs = rstd[r_off + r];           \
    const float2 s0 = ln_row_bwd_sums(ROW_PTR(dy, dy_off, r),                \
                                      ROW_PTR(x, x_off, r), n, mu, rs,       \
                                      has_g, g + g_off);                     \
    /* the row's coefficients ca, cb */                                      \
    float2 sr = (float2)(rms ? 0.0f : s0.x / (float)n, s0.y / (float)n);     \
    for (; r < r1; r++) {                                                    \
      /* the next row's statistics (past the last: this row's, unused) */    \
      const size_t rn = r + 1 < r1 ? r + 1 : r;                              \
      const float mn = rms ? 0.0f : mean[m_off + rn], sn = rstd[r_off + rn]; \
      const float2 s = ln_rowp_write(                                        \
          ROW_PTR(dy, dy_off, r), ROW_PTR(x, x_off, r),                      \
          ROW_PTR(dx, dx_off, r), n, mu, rs, sr.x, sr.y, has_g, g + g_off,   \
          pg, !rms, pb, r == r0, ROW_PTR(dy, dy_off, rn),                    \
          ROW_PTR(x, x_off, rn), mn, sn);                                    \
      mu = mn;                                                               \
      rs = sn;                                                               \
      sr = (float2)(rms ? 0.0f : s.x / (float)n, s.y / (float)n);            \
    }                                                                        \
  }
LN_BWD_ROWP(layernorm_bwd_rowp, 0)
LN_BWD_ROWP(rmsnorm_bwd_rowp, 1)

/* Stores a row's statistics from the first work-item of its row. */
#define LN_STATS_OUT(r, first, rms)                                            \
  if (has_stats && (first)) {                                                \
    if (!rms) mean[m_off + (r)] = mu;                                        \
    rstd[r_off + (r)] = rs;                                                  \
  }

#define LN_FWD_WG(name, rms)                                                 \
  __kernel RUMUS_WG_ATTR void name(LN_FWD_ARGS) {                            \
    local float la[WG];                                                      \
    local float2 lbc[WG];                                                    \
    const size_t r = get_group_id(0);                                        \
    float mu, rs;                                                            \
    ln_fwd_wg_body(ROW_PTR(x, x_off, r), ROW_PTR(y, y_off, r), cols, rms,    \
                   eps, has_g, g + g_off, has_b && !rms, b + b_off, la, lbc, \
                   &mu, &rs);                                                \
    LN_STATS_OUT(r, get_local_id(0) == 0, rms)                                  \
  }
LN_FWD_WG(layernorm_fwd_wg, 0)
LN_FWD_WG(rmsnorm_fwd_wg, 1)

/* ---- Wide forward (GPU variant, rows of up to 4 LN_WLS LN_WV elements) ---
 * One work-group of LN_WLS work-items per row for rows longer than the
 * _wgc rungs hold, the row in registers (LN_WV float4 per work-item), so
 * x is read once where the strided _wg kernel reads it two or three
 * times.  The local size is fixed at build time (the host's -DLN_WLS,
 * default 512 x 8), so the driver compiles for that size and no more
 * (registers) and local arrays are sized statically; the loops over a
 * work-item's groups are unrolled so that the row stays in registers (a
 * rolled loop puts the array on the stack).  The sums take two levels
 * (LN_GRP_SUM: two barriers each, not log2 LN_WLS). */

/* (LN_WLS and LN_WV: above, with ln_fwd_regs_body.) */

#define LN_FWD_WIDE(name, rms)                                               \
  __kernel RUMUS_REQD_WG(LN_WLS, 1, 1) void name(LN_FWD_ARGS) {              \
    local float la[LN_WLS + 32]; /* LN_GRP_SUM's */                          \
    local float2 lbc[LN_WLS + 32];                                           \
    const size_t r = get_group_id(0);                                        \
    float mu, rs;                                                            \
    ln_fwd_regs_body(ROW_PTR(x, x_off, r), ROW_PTR(y, y_off, r), cols,      \
                     LN_WLS, LN_NV(LN_WV), 1, rms, eps, has_g, g + g_off,    \
                     has_b && !rms, b + b_off, la, lbc, &mu, &rs);           \
    LN_STATS_OUT(r, get_local_id(0) == 0, rms)                               \
  }
LN_FWD_WIDE(layernorm_fwd_wide, 0)
LN_FWD_WIDE(rmsnorm_fwd_wide, 1)

#define LN_BWD_WG(name, rms)                                                 \
  __kernel RUMUS_WG_ATTR void name(LN_BWD_ARGS) {                            \
    local float2 lab[WG];                                                    \
    const size_t r = get_group_id(0);                                        \
    const float mu = rms ? 0.0f : mean[m_off + r], rs = rstd[r_off + r];     \
    ln_bwd_wg_body(ROW_PTR(dy, dy_off, r), ROW_PTR(x, x_off, r),             \
                   ROW_PTR(dx, dx_off, r), cols, rms, mu, rs, has_g,         \
                   g + g_off, lab);                                          \
  }
LN_BWD_WG(layernorm_bwd_wg, 0)
LN_BWD_WG(rmsnorm_bwd_wg, 1)

/* Row of work-item lid in the _wgc kernels, and its element count (0 for
 * padding rows past `rows`, whose pointers stay at row 0). */
#define WGC_ROW(rt) ((size_t)get_group_id(0) * (WG / (rt)) + get_local_id(0) / (rt))
#define WGC_N(r) ((r) < (size_t)rows ? (size_t)cols : 0)
#define WGC_PTR(p, off, r) ((p) + (size_t)(off) + (WGC_N(r) ? (r) * (size_t)cols : 0))

#define LN_FWD_WGC(name, rms)                                                \
  __kernel RUMUS_WG_ATTR void name(LN_FWD_ARGS, uint rt) {                   \
    local float la[2 * WG]; /* LN_SEG_SUM's */                               \
    local float2 lbc[2 * WG];                                                \
    const size_t r = WGC_ROW(rt);                                            \
    float mu, rs;                                                            \
    ln_fwd_regs_body(WGC_PTR(x, x_off, r), WGC_PTR(y, y_off, r), WGC_N(r),   \
                     rt, LN_NV(CACHE_V4), 0, rms, eps, has_g, g + g_off,     \
                     has_b && !rms, b + b_off, la, lbc, &mu, &rs);           \
    LN_STATS_OUT(r, WGC_N(r) && get_local_id(0) % rt == 0, rms)                   \
  }
LN_FWD_WGC(layernorm_fwd_wgc, 0)
LN_FWD_WGC(rmsnorm_fwd_wgc, 1)

#define LN_BWD_WGC(name, rms)                                                \
  __kernel RUMUS_WG_ATTR void name(LN_BWD_ARGS, uint rt) {                   \
    local float2 lab[2 * WG]; /* LN_SEG_SUM's */                             \
    const size_t r = WGC_ROW(rt);                                            \
    const int live = WGC_N(r) != 0;                                          \
    const float mu = (rms || !live) ? 0.0f : mean[m_off + r];                \
    const float rs = live ? rstd[r_off + r] : 0.0f;                          \
    ln_bwd_wgc_body(WGC_PTR(dy, dy_off, r), WGC_PTR(x, x_off, r),            \
                    WGC_PTR(dx, dx_off, r), WGC_N(r), rt, rms, mu, rs, has_g,\
                    g + g_off, lab);                                         \
  }
LN_BWD_WGC(layernorm_bwd_wgc, 0)
LN_BWD_WGC(rmsnorm_bwd_wgc, 1)

/* ---- Fused backward (GPU variant, rows in registers) ---------------------
 * dx and stage 1 of dgamma / dbeta in one read of dy and x: the group's
 * WG / rt teams (rt work-items, as the _wgc kernels) each take one block
 * of the gradients' rows (block k = group * (WG / rt) + team, rows
 * [k rb, min((k + 1) rb, rows))) and walk them in order, computing dx as
 * ln_bwd_wgc_body and adding each column's terms to float4 partials in
 * row order, one fma per term, as ln_dparam_part_* do: the same partials
 * (the same bits), written to part at the end.  Every team takes rb
 * turns (rows past its block: n = 0), so the barriers stay uniform. */

/* One row of the walk (n = 0: none); sg, sb the lane's partials. */
inline void ln_bwd_fused_row(global const real_t *dy, global const real_t *x,
                             global real_t *dx, size_t n, uint rt, int rms,
                             float mean, float rstd, int has_g,
                             global const param_t *gm, local float2 *lab,
                             float4 *sg, float4 *sb) {
  const size_t lane = get_local_id(0) % rt;
  const float fn = n ? (float)n : 1.0f;
  float4 d[CACHE_V4], xh[CACHE_V4];
  float a = 0.0f, b = 0.0f;
#pragma unroll
  for (int k = 0; k < CACHE_V4; k++) {
    const size_t q = lane + (size_t)k * rt;
    d[k] = rumus_load4_fill(dy, q, n, 0.0f);
    xh[k] = (rumus_load4_fill(x, q, n, 0.0f) - mean) * rstd;
    float4 g = d[k];
    if (has_g) g *= ln_pload4_fill(gm, q, n, 0.0f);
    a += rumus_hsum4(g);
    b += dot(g, xh[k]); /* g is 0 past the row's end */
  }
  const float2 s = ln_seg2l2(lab, (float2)(a, b), rt);
  const float ca = rms ? 0.0f : s.x / fn, cb = s.y / fn;
  if (n == 0) return;
#pragma unroll
  for (int k = 0; k < CACHE_V4; k++) {
    const size_t q = lane + (size_t)k * rt;
    if (q * 4 >= n) continue;
    sg[k] = fma(d[k], xh[k], sg[k]);
    sb[k] += d[k];
    float4 g = d[k];
    if (has_g) g *= ln_pload4_fill(gm, q, n, 0.0f);
    rumus_store4_part(rstd * (g - ca - xh[k] * cb), dx, q, n);
  }
}

/* The lane's partials of block k into part (cols columns, nb blocks). */
inline void ln_fused_part_out(const float4 *sg, const float4 *sb, uint rt,
                              global float *part, size_t k, size_t cols,
                              size_t nb) {
  const size_t lane = get_local_id(0) % rt;
  global float *pg = part + k * cols, *pb = part + (nb + k) * cols;
#pragma unroll
  for (int i = 0; i < CACHE_V4; i++) {
    const size_t j = (lane + (size_t)i * rt) * 4;
    if (j >= cols) continue;
    const float g[4] = {sg[i].x, sg[i].y, sg[i].z, sg[i].w};
    const float b[4] = {sb[i].x, sb[i].y, sb[i].z, sb[i].w};
    for (size_t c = 0; c < 4 && j + c < cols; c++) {
      pg[j + c] = g[c];
      pb[j + c] = b[c];
    }
  }
}

#define LN_BWD_FUSED(name, rms)                                              \
  __kernel RUMUS_WG_ATTR void name(LN_BWD_ARGS, uint rt, global float *part, \
                                   ulong rb, ulong nb) {                     \
    local float2 lab[2 * WG]; /* LN_SEG_SUM's */                             \
    const size_t k = (size_t)get_group_id(0) * (WG / rt) +                   \
                     get_local_id(0) / rt;                                   \
    float4 sg[CACHE_V4], sb[CACHE_V4];                                       \
    _Pragma("unroll")                                                        \
    for (int i = 0; i < CACHE_V4; i++) sg[i] = sb[i] = (float4)(0.0f);       \
    for (size_t i = 0; i < rb; i++) {                                        \
      const size_t r = k * rb + i;                                           \
      const int live = k < nb && r < rows;                                   \
      const size_t n = live ? (size_t)cols : 0, rr = live ? r : 0;           \
      const float mu = (rms || !live) ? 0.0f : mean[m_off + rr];             \
      const float rs = live ? rstd[r_off + rr] : 0.0f;                       \
      ln_bwd_fused_row(ROW_PTR(dy, dy_off, rr), ROW_PTR(x, x_off, rr),       \
                       ROW_PTR(dx, dx_off, rr), n, rt, rms, mu, rs, has_g,   \
                       g + g_off, lab, sg, sb);                              \
      barrier(CLK_LOCAL_MEM_FENCE); /* lab is rewritten next row */          \
    }                                                                        \
    if (k < nb) ln_fused_part_out(sg, sb, rt, part, k, cols, nb);            \
  }
LN_BWD_FUSED(layernorm_bwd_fused, 0)
LN_BWD_FUSED(rmsnorm_bwd_fused, 1)

/* ---- Block backward (GPU variant, rows of up to 8 ls elements) -----------
 * One work-group per block of the gradients' rows (block k: rows
 * [k rb, min((k + 1) rb, rows)), blocks fixed by the shape), all its ls
 * work-items on one row: work-item lid holds float4 groups lid + v ls (v
 * < LN_BV) of LN_BR (4 or 2) rows at once, so the loads of several rows
 * are in flight per work-item where the _fused kernel's team had one
 * row's, and a few hundred groups of ls >= 32 cover the device with no
 * per-team barriers.  The rows' two sums each are one float8 sum in
 * local memory (buf, ls + 32 entries; LN_GRP_SUM).  Each work-item adds
 * its columns' terms to float4 partials in row order, one fma per term,
 * as ln_dparam_part_* do (the same bits), and writes them to part at the
 * end when has_part. */

#ifndef LN_BV
#define LN_BV 2 /* float4 groups per work-item per row (host: layernorm.c's) */
#endif
#define LN_BVV LN_NV(LN_BV) /* row groups (rumus_rv) per work-item per row */
#ifndef LN_BR
#define LN_BR 4 /* rows at once, 2 or 4 (host: RUMUS_LN_BLK) */
#endif

/* LN_BLK_UNROLL 1 unrolls the block kernel's loops over its rows and
 * groups (the rows in registers: more registers, fewer groups per compute
 * unit), 0 leaves them to the compiler (clang then keeps d and xh on the
 * stack); the host's RUMUS_LN_BLK. */
#ifndef LN_BLK_UNROLL
#define LN_BLK_UNROLL 1
#endif
#if LN_BLK_UNROLL
#define LN_BLK_UNROLL_P _Pragma("unroll")
#define LN_BLK_INLINE LN_INLINE
#else
#define LN_BLK_UNROLL_P
#define LN_BLK_INLINE inline
#endif

/* Sums a float8 over the work-group (every work-item gets the total) in
 * two levels (LN_GRP_SUM; buf: ls + 32 entries). */
inline float8 ln_blk_sum(local float8 *buf, float8 v) {
  const float8 t = ln_grp2l8(buf, v, get_local_size(0));
  barrier(CLK_LOCAL_MEM_FENCE); /* buf is rewritten by the next call */
  return t;
}

#ifndef LN_BLK_RAW
#define LN_BLK_RAW 0 /* 1: BF16 by default, the host's RUMUS_LN_BLK */
#endif
/* LN_BLK_RAW 1: the block kernel holds its rows' 16-bit groups of 8
 * (RUMUS_RV 8) as stored, ushort8, loaded under a condition with no
 * conversion in it, and widens them where they are used, before the
 * group's sum and again after it.  Widening is exact and xhat takes the
 * same operations, so the bits are those of holding dy and xhat as
 * floats.  On an H100 the BF16 backward took 264 us at 65536 x 1024
 * holding floats, where F16 took 160 and the same kernel with F16's
 * conversion instruction in place of BF16's widening 169; its SASS loads
 * each row's BF16 groups behind a branch of their own, widened before
 * the next row's loads, where F16's 16 loads issue at once. */
#if LN_BLK_RAW && RUMUS_RV == 8
typedef ushort8 ln_raw;
inline float8 ln_widen_F16(ushort8 r) {
  return vload_half8(0, (const private half *)&r);
}
inline float8 ln_widen_BF16(ushort8 r) { return rumus_bf16_to_f8(r); }
#define ln_widen RUMUS_CAT(ln_widen_, RUMUS_STORAGE)
/* Group q of a row of n elements as stored (0 bits past the end). */
inline ushort8 ln_raw_fill(global const real_t *p, size_t q, size_t n) {
  return q * 8 < n ? *(global const ushort8 *)(p + q * 8) : (ushort8)(0);
}
#define ln_held_x(p, q, n, mu, rs) ln_raw_fill(p, q, n)
#define ln_xhat(h, mu, rs) ((ln_widen(h) - (mu)) * (rs))
#else
typedef rumus_rv ln_raw;
#define ln_widen(r) (r)
#define ln_raw_fill(p, q, n) rumus_loadv_fill(p, q, n, 0.0f)
#define ln_held_x(p, q, n, mu, rs)                                           \
  ((rumus_loadv_fill(p, q, n, 0.0f) - (mu)) * (rs))
#define ln_xhat(h, mu, rs) (h)
#endif

/* Loads rows r .. r + LN_BR - 1 (those below r1; others 0, with mean and
 * rstd 0) as held dy and x groups (dy and xhat = (x - mu) rs, or as
 * stored: LN_BLK_RAW), and returns their sums of g = dy gamma (.s0123)
 * and of g xhat (.s4567), summed over the group (lanes past LN_BR: 0). */
LN_BLK_INLINE float8 ln_blk_load(global const real_t *dy,
                                 global const real_t *x,
                                 global const float *mean,
                                 global const float *rstd, size_t cols,
                                 size_t r, size_t r1, int rms,
                                 const rumus_rv *gam, local float8 *buf,
                                 ln_raw d[LN_BR][LN_BVV],
                                 ln_raw xr[LN_BR][LN_BVV], float *mu,
                                 float *rs) {
  const size_t lid = get_local_id(0), ls = get_local_size(0);
  float a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
LN_BLK_UNROLL_P
  for (int u = 0; u < LN_BR; u++) {
    const int live = r + u < r1;
    const size_t n = live ? cols : 0, rr = live ? r + u : r;
    mu[u] = (rms || !live) ? 0.0f : mean[rr];
    rs[u] = live ? rstd[rr] : 0.0f;
LN_BLK_UNROLL_P
    for (int v = 0; v < LN_BVV; v++) {
      const size_t q = lid + (size_t)v * ls;
      d[u][v] = ln_raw_fill(dy + rr * cols, q, n);
      xr[u][v] = ln_held_x(x + rr * cols, q, n, mu[u], rs[u]);
    }
  }
LN_BLK_UNROLL_P
  for (int u = 0; u < LN_BR; u++)
LN_BLK_UNROLL_P
    for (int v = 0; v < LN_BVV; v++) {
      const rumus_rv g = ln_widen(d[u][v]) * gam[v]; /* 0 past the end */
      a[u] += rumus_hsumv(g);
      b[u] += rumus_dotv(g, ln_xhat(xr[u][v], mu[u], rs[u]));
    }
  return ln_blk_sum(buf, (float8)(a[0], a[1], a[2], a[3], b[0], b[1], b[2],
                                  b[3]));
}

/* The work-item's partials (groups lid + v ls, v < nv: float4 for
 * ln_part_out, the row groups for ln_part_outv) of block k
 * into part (cols columns, nb blocks; dbeta's after dgamma's, when has_b:
 * RMS norm has no dbeta, so its kernels neither sum nor store one, and
 * stage 2 does not store what it finds there). */
#define LN_PART_OUT(name, T, W, store)                                       \
  LN_INLINE void name(const T *sg, const T *sb, int has_b, int nv,           \
                      global float *part, size_t k, size_t cols, size_t nb) {\
    const size_t lid = get_local_id(0), ls = get_local_size(0);              \
    global float *pg = part + k * cols, *pb = part + (nb + k) * cols;        \
    _Pragma("unroll") for (int v = 0; v < nv; v++) {                         \
      const size_t q = lid + (size_t)v * ls;                                 \
      if (q * W >= cols) continue;                                           \
      store(sg[v], pg, q, cols);                                             \
      if (has_b) store(sb[v], pb, q, cols);                                  \
    }                                                                        \
  }
LN_PART_OUT(ln_part_out, float4, 4, ln_part_store4)
#if RUMUS_RV == 8 /* the _blk kernel's row groups */
LN_PART_OUT(ln_part_outv, float8, 8, ln_part_storev)
#else
#define ln_part_outv ln_part_out
#endif

LN_BLK_INLINE void ln_blk_body(global const real_t *dy, global const real_t *x,
                               global real_t *dx, global const float *mean,
                               global const float *rstd, size_t cols, size_t r0,
                               size_t r1, int rms, int has_g,
                               global const param_t *gm, local float8 *buf,
                               int has_part, global float *part, size_t k,
                               size_t nb) {
  const size_t lid = get_local_id(0), ls = get_local_size(0);
  const float fn = (float)cols;
  rumus_rv gam[LN_BVV], sg[LN_BVV], sb[LN_BVV];
LN_BLK_UNROLL_P
  for (int v = 0; v < LN_BVV; v++) {
    const size_t q = lid + (size_t)v * ls;
    gam[v] = has_g ? ln_ploadv_fill(gm, q, cols, 0.0f) : (rumus_rv)(1.0f);
    sg[v] = sb[v] = (rumus_rv)(0.0f);
  }
  for (size_t r = r0; r < r1; r += LN_BR) { /* uniform over the group */
    ln_raw d[LN_BR][LN_BVV], xr[LN_BR][LN_BVV];
    float mu[LN_BR], rs[LN_BR];
    const float8 s = ln_blk_load(dy, x, mean, rstd, cols, r, r1, rms, gam,
                                 buf, d, xr, mu, rs);
    const float sa[4] = {s.s0, s.s1, s.s2, s.s3};
    const float sx[4] = {s.s4, s.s5, s.s6, s.s7};
    /* Constant trip counts with guards (no early exits), so that the
     * loops unroll and d, xh stay in registers. */
LN_BLK_UNROLL_P
    for (int u = 0; u < LN_BR; u++) {
      const float ca = rms ? 0.0f : sa[u] / fn, cb = sx[u] / fn;
LN_BLK_UNROLL_P
      for (int v = 0; v < LN_BVV; v++) {
        const size_t q = lid + (size_t)v * ls;
        if (r + u >= r1 || q * RUMUS_RV >= cols) continue;
        const rumus_rv dd = ln_widen(d[u][v]);
        const rumus_rv xh = ln_xhat(xr[u][v], mu[u], rs[u]);
        sg[v] = fma(dd, xh, sg[v]);
        if (!rms) sb[v] += dd;
        rumus_storev_part(rs[u] * (dd * gam[v] - ca - xh * cb),
                          dx + (r + u) * cols, q, cols);
      }
    }
  }
  if (has_part) ln_part_outv(sg, sb, !rms, LN_BVV, part, k, cols, nb);
}

#define LN_BWD_BLK(name, rms)                                                \
  __kernel void name(LN_BWD_ARGS, local float8 *buf, int has_part,          \
                     global float *part, ulong rb, ulong nb) {               \
    const size_t k = get_group_id(0);                                        \
    const size_t r0 = k * (size_t)rb;                                        \
    const size_t r1 = min(r0 + (size_t)rb, (size_t)rows);                    \
    ln_blk_body(dy + dy_off, x + x_off, dx + dx_off, mean + m_off,           \
                rstd + r_off, cols, r0, r1, rms, has_g, g + g_off, buf,      \
                has_part, part, k, nb);                                      \
  }
LN_BWD_BLK(layernorm_bwd_blk, 0)
LN_BWD_BLK(rmsnorm_bwd_blk, 1)

/* ---- Wide backward (GPU variant, rows of up to 4 LN_WBLS LN_WBV) -------
 * For rows longer than the _blk kernel holds: one work-group of LN_WBLS
 * (fixed at build time, as the wide forward's) per block of rows (as
 * _blk), walking its rows one at a time.  A first pass over the row reads
 * dy and x, adds the work-item's columns' terms to its partials (LN_WBV
 * float4 of elements each in registers, as row groups; row order, one
 * fma per term: the stage-1 bits) and to the row's sums; after their
 * two-level sum a second pass, last groups first, reads the row again for
 * dx: from L2, as one row (2 x 64 KiB at 16384 columns) per group is in
 * flight, so memory sees x and dy once where the rows themselves do not
 * fit the registers beside the partials.  Each pass loads LN_WBB float4
 * (of elements) of dy and of x before it uses them (loads in flight
 * without the registers of a whole row); the row sums alternate between
 * two buffers, so a row takes two barriers, or two rows (LN_WBR 2: their
 * first passes, one sum, their second passes; twice the rows' bytes
 * held in L2 until their second pass). */

#ifndef LN_WBLS
#define LN_WBLS 512 /* work-items of the wide backward (host: layernorm.c's) */
#endif
#ifndef LN_WBV
#define LN_WBV 8 /* float4 groups per work-item (host: layernorm.c's) */
#endif
#ifndef LN_WBR
#define LN_WBR 1 /* rows per step, 1 or 2 (host: layernorm.c's) */
#endif
#ifndef LN_WBB
#define LN_WBB 2 /* float4 of dy and of x loaded at once (divides LN_WBV) */
#endif
/* In row groups (rumus_rv): per work-item, and loaded at once. */
#define LN_WBVV LN_NV(LN_WBV)
#define LN_WBBV LN_NV(LN_WBB)

/* Loads batch v0 (groups lid + (v0 + u) LN_WBLS, u < LN_WBB) of dy and x;
 * full: all of them inside the row. */
LN_INLINE void ln_wide_batch(global const real_t *dy, global const real_t *x,
                             size_t n, int full, int v0, rumus_rv *d,
                             rumus_rv *xv) {
  const size_t lid = get_local_id(0);
#pragma unroll
  for (int u = 0; u < LN_WBBV; u++) {
    const size_t q = lid + (size_t)(v0 + u) * LN_WBLS;
    d[u] = full ? LOADV(dy, q * RUMUS_RV) : rumus_loadv_fill(dy, q, n, 0.0f);
    xv[u] = full ? LOADV(x, q * RUMUS_RV) : rumus_loadv_fill(x, q, n, 0.0f);
  }
}

/* Row group q of gamma (1 without gamma; full: inside the row). */
inline rumus_rv ln_gamv(int has_g, global const param_t *gm, size_t q,
                        size_t n, int full) {
  if (!has_g) return (rumus_rv)(1.0f);
  return full ? PLOADV(gm, q * RUMUS_RV) : ln_ploadv_fill(gm, q, n, 0.0f);
}

/* The first pass over a row of n (the work-item's row groups lid + v
 * LN_WBLS, v < LN_WBVV): the partials and the work-item's row sums.  full (a constant
 * at each call: two copies of the code, the common one without the tests
 * of the row's end): the work-item's groups all lie inside the row. */
LN_INLINE float2 ln_bwd_wide_sums(global const real_t *dy,
                                  global const real_t *x, size_t n, int rms,
                                  float mu, float rs, int has_g,
                                  global const param_t *gm, rumus_rv *sg,
                                  rumus_rv *sb, const int full) {
  const size_t lid = get_local_id(0);
  float a = 0.0f, b = 0.0f;
#pragma unroll
  for (int v0 = 0; v0 < LN_WBVV; v0 += LN_WBBV) {
    rumus_rv d[LN_WBBV], xv[LN_WBBV];
    ln_wide_batch(dy, x, n, full, v0, d, xv);
#pragma unroll
    for (int u = 0; u < LN_WBBV; u++) {
      const size_t q = lid + (size_t)(v0 + u) * LN_WBLS;
      if (q * RUMUS_RV >= n) continue; /* not break: the loop unrolls */
      const rumus_rv xh = (xv[u] - mu) * rs;
      sg[v0 + u] = fma(d[u], xh, sg[v0 + u]);
      if (!rms) sb[v0 + u] += d[u];
      const rumus_rv g = d[u] * ln_gamv(has_g, gm, q, n, full);
      a += rumus_hsumv(g);
      b += rumus_dotv(g, xh); /* g is 0 past the row's end */
    }
  }
  return (float2)(a, b);
}

/* The second pass: dx = rs (g - ca - xhat cb), last groups first. */
LN_INLINE void ln_bwd_wide_dx(global const real_t *dy, global const real_t *x,
                              global real_t *dx, size_t n, float mu, float rs,
                              float ca, float cb, int has_g,
                              global const param_t *gm, const int full) {
  const size_t lid = get_local_id(0);
#pragma unroll
  for (int v0 = LN_WBVV - LN_WBBV; v0 >= 0; v0 -= LN_WBBV) {
    rumus_rv d[LN_WBBV], xv[LN_WBBV];
    ln_wide_batch(dy, x, n, full, v0, d, xv);
#pragma unroll
    for (int u = LN_WBBV - 1; u >= 0; u--) {
      const size_t q = lid + (size_t)(v0 + u) * LN_WBLS;
      if (q * RUMUS_RV >= n) continue;
      const rumus_rv g = d[u] * ln_gamv(has_g, gm, q, n, full);
      const rumus_rv o = rs * (g - ca - (xv[u] - mu) * rs * cb);
      if (full) STOREV(o, dx, q * RUMUS_RV);
      else rumus_storev_part(o, dx, q, n);
    }
  }
}

/* Rows r and, when LN_WBR is 2 and it lies below r1, r + 1 (row pointers
 * from the tensors' starts): their first passes, one sum of their row
 * sums (two barriers for both rows), their second passes; the barriers
 * are taken by every work-item, whichever copy of the passes it runs.
 * Each column's partials still take row r's term before row r + 1's. */
LN_INLINE void ln_bwd_wide_rows(global const real_t *dy,
                                global const real_t *x, global real_t *dx,
                                global const float *mean,
                                global const float *rstd, size_t n, size_t r,
                                size_t r1, int rms, int has_g,
                                global const param_t *gm, local float4 *buf,
                                rumus_rv *sg, rumus_rv *sb, int full) {
  const float fn = (float)n;
  const int two = LN_WBR == 2 && r + 1 < r1; /* uniform over the group */
  const size_t r2 = two ? r + 1 : r;
  const float mu0 = rms ? 0.0f : mean[r], rs0 = rstd[r];
  const float mu1 = rms ? 0.0f : mean[r2], rs1 = rstd[r2];
  global const real_t *dy0 = dy + r * n, *x0 = x + r * n;
  global const real_t *dy1 = dy + r2 * n, *x1 = x + r2 * n;
  float2 t0 = full
      ? ln_bwd_wide_sums(dy0, x0, n, rms, mu0, rs0, has_g, gm, sg, sb, 1)
      : ln_bwd_wide_sums(dy0, x0, n, rms, mu0, rs0, has_g, gm, sg, sb, 0);
  float2 t1 = (float2)(0.0f);
  if (two)
    t1 = full
        ? ln_bwd_wide_sums(dy1, x1, n, rms, mu1, rs1, has_g, gm, sg, sb, 1)
        : ln_bwd_wide_sums(dy1, x1, n, rms, mu1, rs1, has_g, gm, sg, sb, 0);
  const float4 s = ln_grp2l4(buf, (float4)(t0, t1), LN_WBLS);
  const float ca0 = rms ? 0.0f : s.x / fn, cb0 = s.y / fn;
  const float ca1 = rms ? 0.0f : s.z / fn, cb1 = s.w / fn;
  if (full)
    ln_bwd_wide_dx(dy0, x0, dx + r * n, n, mu0, rs0, ca0, cb0, has_g, gm, 1);
  else
    ln_bwd_wide_dx(dy0, x0, dx + r * n, n, mu0, rs0, ca0, cb0, has_g, gm, 0);
  if (!two) return;
  if (full)
    ln_bwd_wide_dx(dy1, x1, dx + r2 * n, n, mu1, rs1, ca1, cb1, has_g, gm, 1);
  else
    ln_bwd_wide_dx(dy1, x1, dx + r2 * n, n, mu1, rs1, ca1, cb1, has_g, gm, 0);
}

/* The row sums of successive steps alternate between buf's two halves. */
#define LN_BWD_WIDE(name, rms)                                               \
  __kernel RUMUS_REQD_WG(LN_WBLS, 1, 1) void name(                           \
      LN_BWD_ARGS, int has_part, global float *part, ulong rb, ulong nb) {   \
    local float4 buf[2][LN_WBLS + 32]; /* LN_GRP_SUM's */                    \
    const size_t k = get_group_id(0);                                        \
    const size_t r0 = k * (size_t)rb;                                        \
    const size_t r1 = min(r0 + (size_t)rb, (size_t)rows);                    \
    rumus_rv sg[LN_WBVV], sb[LN_WBVV];                                       \
    _Pragma("unroll")                                                        \
    for (int v = 0; v < LN_WBVV; v++) sg[v] = sb[v] = (rumus_rv)(0.0f);      \
    const int full = (get_local_id(0) + (size_t)(LN_WBVV - 1) * LN_WBLS + 1) \
                     * RUMUS_RV <= cols;                                     \
    for (size_t r = r0; r < r1; r += LN_WBR)                                 \
      ln_bwd_wide_rows(dy + dy_off, x + x_off, dx + dx_off, mean + m_off,    \
                       rstd + r_off, cols, r, r1, rms, has_g, g + g_off,     \
                       buf[((r - r0) / LN_WBR) & 1], sg, sb, full);          \
    if (has_part) ln_part_outv(sg, sb, !rms, LN_WBVV, part, k, cols, nb);   \
  }
LN_BWD_WIDE(layernorm_bwd_wide, 0)
LN_BWD_WIDE(rmsnorm_bwd_wide, 1)

/* ---- Gradients of gamma and beta ----------------------------------------
 * Stage 1: block k of the rows [k RB, min((k + 1) RB, rows)) and column j:
 * part[k cols + j] = sum dy xhat (dgamma), part[(nb + k) cols + j] = sum dy
 * (dbeta), in row order, one fma per term.  has_mean 0: RMS (xhat = x
 * rstd).  Global size (columns or column groups, nb). */

#define LN_PART_ARGS                                                         \
  global const real_t *dy, ulong dy_off, global const real_t *x,             \
      ulong x_off, global const float *mean, ulong m_off,                    \
      global const float *rstd, ulong r_off, int has_mean,                   \
      global float *part, ulong rows, ulong cols, ulong rb, ulong nb

/* dy[r, j] and xhat[r, j] of one row. */
inline float2 ln_part_load(global const real_t *dy, ulong dy_off,
                           global const real_t *x, ulong x_off,
                           global const float *mean, ulong m_off,
                           global const float *rstd, ulong r_off,
                           int has_mean, ulong cols, size_t r, size_t j) {
  const float mu = has_mean ? mean[m_off + r] : 0.0f;
  return (float2)(LOAD(dy, dy_off + r * cols + j),
                  (LOAD(x, x_off + r * cols + j) - mu) * rstd[r_off + r]);
}

/* GPU: one column per work-item, neighbours on neighbouring columns
 * (coalesced).  The loads of 8 rows are issued before their terms are
 * added, in row order (the same bits as one row at a time), so a
 * work-item keeps 16 loads in flight rather than 2. */
__kernel RUMUS_REQD_WG(LN_FOLD_LS, 1, 1) void ln_dparam_part_wg(
    LN_PART_ARGS) {
  const size_t j = get_global_id(0), k = get_global_id(1);
  if (j >= cols) return;
  const size_t r1 = min((k + 1) * (size_t)rb, (size_t)rows);
  float sg = 0.0f, sb = 0.0f;
  size_t r = k * (size_t)rb;
  for (; r + 8 <= r1; r += 8) {
    float2 v[8];
    for (int q = 0; q < 8; q++)
      v[q] = ln_part_load(dy, dy_off, x, x_off, mean, m_off, rstd, r_off,
                          has_mean, cols, r + q, j);
    for (int q = 0; q < 8; q++) {
      sg = fma(v[q].x, v[q].y, sg);
      sb += v[q].x;
    }
  }
  for (; r < r1; r++) {
    const float2 v = ln_part_load(dy, dy_off, x, x_off, mean, m_off, rstd,
                                  r_off, has_mean, cols, r, j);
    sg = fma(v.x, v.y, sg);
    sb += v.x;
  }
  part[k * cols + j] = sg;
  part[(nb + k) * cols + j] = sb;
}

/* CPU: 8 columns per work-item in float8 lanes (the row's last group
 * element by element), the same order per column as ln_dparam_part_wg. */
__kernel void ln_dparam_part_item(LN_PART_ARGS) {
  const size_t j0 = get_global_id(0) * 8, k = get_global_id(1);
  if (j0 >= cols) return;
  const size_t r1 = min((k + 1) * (size_t)rb, (size_t)rows);
  global float *pg = part + k * cols, *pb = part + (nb + k) * cols;
  if (j0 + 8 <= cols) {
    float8 sg = 0.0f, sb = 0.0f;
    for (size_t r = k * (size_t)rb; r < r1; r++) {
      const float mu = has_mean ? mean[m_off + r] : 0.0f;
      const float8 d = LOAD8(dy, dy_off + r * cols + j0);
      const float8 xh = (LOAD8(x, x_off + r * cols + j0) - mu) * rstd[r_off + r];
      sg = fma(d, xh, sg);
      sb += d;
    }
    vstore8(sg, 0, pg + j0);
    vstore8(sb, 0, pb + j0);
    return;
  }
  for (size_t j = j0; j < cols; j++) {
    float sg = 0.0f, sb = 0.0f;
    for (size_t r = k * (size_t)rb; r < r1; r++) {
      const float mu = has_mean ? mean[m_off + r] : 0.0f;
      const float d = LOAD(dy, dy_off + r * cols + j);
      const float xh = (LOAD(x, x_off + r * cols + j) - mu) * rstd[r_off + r];
      sg = fma(d, xh, sg);
      sb += d;
    }
    pg[j] = sg;
    pb[j] = sb;
  }
}

/* Column j's dgamma / dbeta partials of blocks [k, k1) of part (dgamma's
 * nb blocks, then dbeta's), added in block order: 8 loads in flight,
 * then their 8 additions. */
inline float2 ln_fold_blocks(global const float *part, size_t cols, size_t nb,
                             size_t j, size_t k, size_t k1) {
  float sg = 0.0f, sb = 0.0f;
  for (; k + 8 <= k1; k += 8) {
    float g[8], b[8];
    for (int q = 0; q < 8; q++) {
      g[q] = part[(k + q) * cols + j];
      b[q] = part[(nb + k + q) * cols + j];
    }
    for (int q = 0; q < 8; q++) {
      sg += g[q];
      sb += b[q];
    }
  }
  for (; k < k1; k++) {
    sg += part[k * cols + j];
    sb += part[(nb + k) * cols + j];
  }
  return (float2)(sg, sb);
}

/* Stage 2a, when there are more than LN_FOLD_G blocks: item (j, h) adds
 * blocks [h LN_FOLD_G, (h + 1) LN_FOLD_G) of column j in order into part2
 * (nb2 groups, laid out as part), loading 8 before adding them; stage 2
 * then adds the groups in order.  Many blocks (a short walk each for the
 * fused kernel) then cost few serial adds per work-item. */
__kernel RUMUS_REQD_WG(LN_FOLD_LS, 1, 1) void ln_dparam_fold1(
    global const float *part, ulong cols, ulong nb, global float *part2,
    ulong nb2) {
  const size_t j = get_global_id(0), h = get_global_id(1);
  if (j >= cols) return;
  const size_t k1 = min((h + 1) * LN_FOLD_G, (size_t)nb);
  const float2 t = ln_fold_blocks(part, cols, nb, j, h * LN_FOLD_G, k1);
  const float sg = t.x, sb = t.y;
  part2[h * cols + j] = sg;
  part2[(nb2 + h) * cols + j] = sb;
}

#ifndef LN_FOLD_H
#define LN_FOLD_H 8 /* groups of ln_dparam_fold_one (layernorm.c's) */
#endif

/* Stages 2a and 2 in one launch when there are more than LN_FOLD_G
 * blocks but at most LN_FOLD_H groups of them (a launch fewer): item
 * (j, h) of a (LN_FOLD_LS, LN_FOLD_H) group adds group h's blocks of
 * column j in order into local memory, as ln_dparam_fold1 into part2,
 * and item (j, 0) adds the groups in order, as ln_dparam_fold: the same
 * additions in the same order, the same bits. */
__kernel RUMUS_REQD_WG(LN_FOLD_LS, LN_FOLD_H, 1) void ln_dparam_fold_one(
    global const float *part, ulong cols, ulong nb, int has_dg,
    global param_t *dg, ulong dg_off, int has_db, global param_t *db,
    ulong db_off) {
  local float lg[LN_FOLD_H][LN_FOLD_LS], lb[LN_FOLD_H][LN_FOLD_LS];
  const size_t j = get_global_id(0), jl = get_local_id(0);
  const size_t h = get_local_id(1);
  const size_t k1 = min((h + 1) * LN_FOLD_G, (size_t)nb);
  const float2 t = j < cols ? ln_fold_blocks(part, cols, nb, j, h * LN_FOLD_G, k1)
                            : (float2)(0.0f);
  const float sg = t.x, sb = t.y;
  lg[h][jl] = sg;
  lb[h][jl] = sb;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (h != 0 || j >= cols) return;
  const size_t nb2 = ((size_t)nb + LN_FOLD_G - 1) / LN_FOLD_G;
  float tg = 0.0f, tb = 0.0f;
  for (size_t i = 0; i < nb2; i++) {
    tg += lg[i][jl];
    tb += lb[i][jl];
  }
  if (has_dg) PSTORE(tg, dg, dg_off + j);
  if (has_db) PSTORE(tb, db, db_off + j);
}

/* Stage 2: one work-item per column adds the nb blocks in order, loading
 * 8 blocks before adding them (few work-items: the loads in flight, not
 * the adds, set its time). */
__kernel RUMUS_REQD_WG(LN_FOLD_LS, 1, 1) void ln_dparam_fold(
    global const float *part, ulong cols, ulong nb, int has_dg,
    global param_t *dg, ulong dg_off, int has_db, global param_t *db,
    ulong db_off) {
  const size_t j = get_global_id(0);
  if (j >= cols) return;
  const float2 t = ln_fold_blocks(part, cols, nb, j, 0, nb);
  if (has_dg) PSTORE(t.x, dg, dg_off + j);
  if (has_db) PSTORE(t.y, db, db_off + j);
}

/* ---- Stage 2 of the CPU variant ------------------------------------------
 * ln_dparam_fold_one's work-items each add one column's blocks, a float
 * at a time, 64 KiB apart at 16384 columns: on PoCL stage 2 took about a
 * third of the backward's time there.  Here a work-item takes a slab of
 * LN_FOLD_S consecutive columns (a float array in private memory, added
 * to in float8 lanes), the same additions per column in the same order as
 * ln_dparam_fold (nb <= LN_FOLD_G: the blocks in order) or as
 * ln_dparam_fold1 then ln_dparam_fold and ln_dparam_fold_one (groups of
 * LN_FOLD_G blocks in order, then the groups in order), so the same bits.
 * A slab of each block is LN_FOLD_S / 16 whole cache lines read in a
 * stream: with 8 columns per work-item (32 bytes of a block, the blocks
 * 64 KiB apart at 16384 columns, all in one cache set) stage 2 took 8-13
 * ms of the backward's 50-100 there. */
#ifndef LN_FOLD_S
#define LN_FOLD_S 128 /* columns per work-item (layernorm.c's; 8 divides) */
#endif

/* t[q] = 0 + blocks [k, k1) of p's column q (row stride cols) in block
 * order, for q < w. */
inline void ln_fold_slab(global const float *p, size_t cols, size_t w,
                         size_t k, size_t k1, float *t) {
  for (size_t q = 0; q < w; q++) t[q] = 0.0f;
  for (; k < k1; k++) {
    global const float *r = p + k * cols;
    size_t q = 0;
    for (; q + 8 <= w; q += 8)
      vstore8(vload8(0, t + q) + vload8(0, r + q), 0, t + q);
    for (; q < w; q++) t[q] += r[q];
  }
}

/* s[q] = dgamma's (p: dbeta's partials) sum of column j0 + q, q < w. */
inline void ln_fold_slab_sums(global const float *p, size_t cols, size_t nb,
                              size_t w, float *s) {
  if (nb <= LN_FOLD_G) {
    ln_fold_slab(p, cols, w, 0, nb, s);
    return;
  }
  float t[LN_FOLD_S];
  for (size_t q = 0; q < w; q++) s[q] = 0.0f;
  for (size_t h = 0; h < nb; h += LN_FOLD_G) {
    ln_fold_slab(p, cols, w, h, min(h + LN_FOLD_G, nb), t);
    size_t q = 0;
    for (; q + 8 <= w; q += 8)
      vstore8(vload8(0, s + q) + vload8(0, t + q), 0, s + q);
    for (; q < w; q++) s[q] += t[q];
  }
}

/* Global ceil(cols / LN_FOLD_S) (padded); arguments as ln_dparam_fold's. */
__kernel void ln_dparam_fold_item(global const float *part, ulong cols,
                                  ulong nb, int has_dg, global param_t *dg,
                                  ulong dg_off, int has_db,
                                  global param_t *db, ulong db_off) {
  const size_t j0 = get_global_id(0) * LN_FOLD_S, n = (size_t)cols;
  if (j0 >= n) return;
  const size_t w = min((size_t)LN_FOLD_S, n - j0);
  float s[LN_FOLD_S];
  for (int d = 0; d < 2; d++) {
    if (!(d ? has_db : has_dg)) continue;
    ln_fold_slab_sums(part + (d ? (size_t)nb : 0) * n + j0, n, (size_t)nb, w,
                      s);
    for (size_t q = 0; q < w; q++)
      PSTORE(s[q], d ? db : dg, (d ? db_off : dg_off) + j0 + q);
  }
}
