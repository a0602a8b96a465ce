/*
 * pool.cl - 2-D pooling over NCHW tensors, forward and backward, with
 * PyTorch's semantics (max_pool2d, avg_pool2d, adaptive_avg_pool2d).
 * x is [N, C, H, W], y (and max pooling's int32 indices) [N, C, OH, OW];
 * a plane is one (n, c) pair, H * W input or OH * OW output elements.
 * Every tensor arrives as (buffer, ulong element offset); index math is
 * size_t across planes and long within one (signed: windows start in the
 * padding).  Values go through LOAD / STORE of the program's storage
 * (RUMUS_STORAGE: F32, F16, BF16) with float arithmetic.
 *
 * Window of output (oh, ow), per axis (h shown; w the same):
 *   max   rows hs + i * dh, i < kh, hs = oh * sh - ph, those in [0, H);
 *   avg   rows [hs, he) clipped to [0, H), he = min(hs + kh, H + ph); the
 *         divisor is divisor_override if > 0, else (he - hs) (we - ws)
 *         with count_include_pad, else the count of rows x columns kept;
 *   adaptive  rows [floor(oh H / OH), ceil((oh + 1) H / OH)).
 * Max pooling keeps the first largest value in row-major window order
 * (`v > m`), except that a NaN always wins (`|| isnan(v)`: the last NaN's
 * index, as PyTorch's kernels do); the index is h * W + w within the
 * plane.  A window with no element inside the input (possible only with
 * dilation) gives -inf and index -1.
 *
 * Index scheme: one work-item per output element (forwards) or per input
 * element (backwards), flat over the whole tensor: work-item g of a launch
 * takes element base + g; padding work-items (g >= n) return.  The host
 * launches at most 2^30 work-items at a time (base counts the earlier
 * ones).  Nothing is reduced across work-items; the GPU variant runs
 * these element kernels, the CPU variant row kernels (consecutive output
 * rows a work-item for the max and average forwards, input rows for the
 * backwards: one division per row instead of several per element, 1.4 to
 * 5 times faster on PoCL; 8 outputs a vector where they can, below),
 * which visit the same terms in the same order: the same bits.  The
 * adaptive forward is element-wise on both, but for OH = OW = 1: a row
 * reduction per plane and a broadcast backward (adaptive_*_o1 on the GPU
 * variant, adaptive_*_planes on the CPU variant, below), and on the CPU
 * variant bins that divide the input 1, 2 or 4 wide run as average
 * pooling (pool.c says why).  When every index fits in 32
 * bits the GPU variant runs quads instead of the element kernels (a
 * work-item per 4 outputs or 4 inputs, the same terms in the same order:
 * the same bits; *_quad, below).
 *
 * Backwards are gathers, never scatters: input element (h, w) visits, in
 * a fixed order (oh, then ow, ascending), the outputs whose window holds
 * it, and sums their contributions in float: deterministic, no atomics,
 * for any stride (overlapping windows included).
 *   max        dy of the outputs whose index is h * W + w;
 *   avg        dy / divisor of every such output;
 *   adaptive   dy / (bin height x bin width).
 * The outputs whose window holds row h are those with
 *   max   oh sh in [h + ph - (kh - 1) dh, h + ph], (h + ph - oh sh) % dh == 0
 *   avg   oh sh in [h + ph - kh + 1, h + ph]
 *   adaptive  oh in [floor(h OH / H), ceil((h + 1) OH / H)), each checked
 *         against its bin.
 * Max pooling's backward also checks every index it is given, each once:
 * input work-item q of a plane checks the indices at positions q, q + H W,
 * ... < OH OW of that plane (row work-item h: output rows h, h + H, ...;
 * the 2 x 2 kernels: the two indices a work-item reads).  An index that
 * is not an element of its output's window (outside the plane included;
 * -1 is accepted for an empty window) is reported through rumus_report
 * (DEVERR_POOL_INDEX, the index, its flat position in the indices
 * tensor) and adds nothing.
 */

/* No a * b + c contractions: the variants' kernels group the same sums
 * differently around their divisions (a float4 select against a scalar
 * loop), and a compiler that fused one into an fma and not the other would
 * break the promise of the same bits on both variants.  (The host also
 * asks for correctly rounded division where the device has it: on the
 * H200 the average backwards' variants differed in the last bits with
 * the default division, and still did with this pragma alone.) */
#pragma OPENCL FP_CONTRACT OFF

#ifndef ROWS_WG
#define ROWS_WG 8 /* CPU variant's row kernels: work-group size */
#endif
#ifndef DEVERR_POOL_INDEX
#define DEVERR_POOL_INDEX 2 /* the host passes RUMUS__DEVERR_POOL_INDEX */
#endif

/* a / b for a >= 0, b > 0: in 32 bits when both fit (GPUs emulate 64-bit
 * division in dozens of instructions; x86 takes several times longer). */
inline long pool_udiv(long a, long b) {
  return (ulong)(a | b) <= UINT_MAX ? (long)((uint)a / (uint)b) : a / b;
}

/* Floor and ceiling of a / b for b > 0 and any sign of a. */
inline long pool_fdiv(long a, long b) {
  return a >= 0 ? pool_udiv(a, b) : -pool_udiv(-a + b - 1, b);
}
inline long pool_cdiv(long a, long b) { return -pool_fdiv(-a, b); }

/* Geometry: io = (H, W, OH, OW), ks = (kh, kw, sh, sw), pd = (ph, pw, dh,
 * dw).  The element e of a flat tensor of planes of `area` elements:
 * its plane and its position in the plane. */
inline size_t pool_plane(size_t e, long area, long *pos) {
  const size_t plane = e <= LONG_MAX ? (size_t)pool_udiv((long)e, area)
                                     : e / (size_t)area;
  *pos = (long)(e - plane * (size_t)area);
  return plane;
}

/* ---- Max pooling ------------------------------------------------------ */

/* 1 if some element hs + i d (i < k) of an axis lies in [0, n). */
inline int pool_axis_hits(long hs, long k, long d, long n) {
  const long i = hs < 0 ? pool_cdiv(-hs, d) : 0;
  return i < k && hs + i * d < n;
}

/* 1 if t names an element of output j's window (or is -1 for an empty
 * window). */
inline int pool_index_ok(int t, long j, long4 io, long4 ks, long4 pd) {
  const long oh = pool_udiv(j, io.s3), ow = j - oh * io.s3;
  const long hs = oh * ks.s2 - pd.s0, ws = ow * ks.s3 - pd.s1;
  if (t < 0 || (long)t >= io.s0 * io.s1)
    return t == -1 && !(pool_axis_hits(hs, ks.s0, pd.s2, io.s0) &&
                        pool_axis_hits(ws, ks.s1, pd.s3, io.s1));
  const long th = pool_udiv((long)t, io.s1);
  const long a = th - hs, b = (long)t - th * io.s1 - ws;
  if (a < 0 || b < 0) return 0;
  /* Without dilation (the usual case) no division is needed. */
  if (pd.s2 == 1 && pd.s3 == 1) return a < ks.s0 && b < ks.s1;
  return a % pd.s2 == 0 && a / pd.s2 < ks.s0 && b % pd.s3 == 0 &&
         b / pd.s3 < ks.s1;
}

/* The max of the window at (hs, ws) of plane xp and its index: taps in
 * order, h then w (the first element of the window is the index of an all
 * -inf window, as in PyTorch; a NaN wins). */
inline void maxpool_window(global const real_t *xp, long hs, long ws, long4 io,
                           long4 ks, long4 pd, float *mo, int *io_) {
  float m = -INFINITY;
  int mi = -1;
  for (long i = 0; i < ks.s0; i++) {
    const long h = hs + i * pd.s2;
    if (h < 0 || h >= io.s0) continue;
    for (long j = 0; j < ks.s1; j++) {
      const long w = ws + j * pd.s3;
      if (w < 0 || w >= io.s1) continue;
      const float v = LOAD(xp, h * io.s1 + w);
      if (v > m || isnan(v) || mi < 0) {
        m = v;
        mi = (int)(h * io.s1 + w);
      }
    }
  }
  *mo = m;
  *io_ = mi;
}

inline void maxpool_fwd_item(global const real_t *x, global real_t *y,
                             global int *idx, size_t o, long4 io, long4 ks,
                             long4 pd) {
  long r;
  const size_t plane = pool_plane(o, io.s2 * io.s3, &r);
  const long oh = pool_udiv(r, io.s3), ow = r - oh * io.s3;
  float m;
  int mi;
  maxpool_window(x + plane * (size_t)(io.s0 * io.s1), oh * ks.s2 - pd.s0,
                 ow * ks.s3 - pd.s1, io, ks, pd, &m, &mi);
  STORE(m, y, o);
  idx[o] = mi;
}

/* Checks the indices that input element q of its plane answers for. */
inline void maxpool_check(global const int *ip, size_t plane, long q,
                          long4 io, long4 ks, long4 pd,
                          volatile global int *status) {
  const long area_out = io.s2 * io.s3, area_in = io.s0 * io.s1;
  for (long j = q; j < area_out; j += area_in) {
    const int t = ip[j];
    if (!pool_index_ok(t, j, io, ks, pd))
      rumus_report(status, DEVERR_POOL_INDEX, t,
                   (int)(plane * (size_t)area_out + (size_t)j));
  }
}

inline void maxpool_bwd_item(global const real_t *dy, global const int *idx,
                             global real_t *dx, size_t e, long4 io, long4 ks,
                             long4 pd, volatile global int *status) {
  long q;
  const size_t plane = pool_plane(e, io.s0 * io.s1, &q);
  const size_t out0 = plane * (size_t)(io.s2 * io.s3);
  global const int *ip = idx + out0;
  global const real_t *gp = dy + out0;
  maxpool_check(ip, plane, q, io, ks, pd, status);
  const long h = pool_udiv(q, io.s1), w = q - h * io.s1;
  const long oh0 = max(0L, pool_cdiv(h + pd.s0 - (ks.s0 - 1) * pd.s2, ks.s2));
  const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
  const long ow0 = max(0L, pool_cdiv(w + pd.s1 - (ks.s1 - 1) * pd.s3, ks.s3));
  const long ow1 = min(io.s3 - 1, pool_fdiv(w + pd.s1, ks.s3));
  const int dilated = pd.s2 != 1 || pd.s3 != 1; /* skips two modulos */
  float s = 0.0f;
  for (long oh = oh0; oh <= oh1; oh++) {
    if (dilated && (h + pd.s0 - oh * ks.s2) % pd.s2 != 0) continue;
    for (long ow = ow0; ow <= ow1; ow++) {
      if (dilated && (w + pd.s1 - ow * ks.s3) % pd.s3 != 0) continue;
      const long j = oh * io.s3 + ow;
      if (ip[j] == (int)q) s += LOAD(gp, j);
    }
  }
  STORE(s, dx, e);
}

/* ---- Average pooling -------------------------------------------------- */

/* One axis of output o's window: [*lo, *hi) clipped to [0, n), and the
 * padded extent that count_include_pad divides by. */
inline long avg_axis(long o, long k, long s, long p, long n, long *lo,
                     long *hi) {
  const long start = o * s - p, end = min(start + k, n + p);
  *lo = max(start, 0L);
  *hi = min(end, n);
  return end - start;
}

inline float avg_divisor(long padded, long kept, int cip, int divisor) {
  return divisor > 0 ? (float)divisor : (float)(cip ? padded : kept);
}

/* Output (oh, ow) of plane xp: the window's sum over its divisor. */
inline float avgpool_at(global const real_t *xp, long oh, long ow, long4 io,
                        long4 ks, long4 pd, int cip, int divisor) {
  long h0, h1, w0, w1;
  const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  const long pw = avg_axis(ow, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
  float s = 0.0f;
  for (long h = h0; h < h1; h++)
    for (long w = w0; w < w1; w++) s += LOAD(xp, h * io.s1 + w);
  return s / avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor);
}

inline void avgpool_fwd_item(global const real_t *x, global real_t *y,
                             size_t o, long4 io, long4 ks, long4 pd, int cip,
                             int divisor) {
  long r;
  const size_t plane = pool_plane(o, io.s2 * io.s3, &r);
  const long oh = pool_udiv(r, io.s3), ow = r - oh * io.s3;
  STORE(avgpool_at(x + plane * (size_t)(io.s0 * io.s1), oh, ow, io, ks, pd,
                   cip, divisor),
        y, o);
}

inline void avgpool_bwd_item(global const real_t *dy, global real_t *dx,
                             size_t e, long4 io, long4 ks, long4 pd, int cip,
                             int divisor) {
  long q;
  const size_t plane = pool_plane(e, io.s0 * io.s1, &q);
  global const real_t *gp = dy + plane * (size_t)(io.s2 * io.s3);
  const long h = pool_udiv(q, io.s1), w = q - h * io.s1;
  const long oh0 = max(0L, pool_cdiv(h + pd.s0 - ks.s0 + 1, ks.s2));
  const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
  const long ow0 = max(0L, pool_cdiv(w + pd.s1 - ks.s1 + 1, ks.s3));
  const long ow1 = min(io.s3 - 1, pool_fdiv(w + pd.s1, ks.s3));
  float s = 0.0f;
  for (long oh = oh0; oh <= oh1; oh++) {
    long h0, h1, w0, w1;
    const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
    for (long ow = ow0; ow <= ow1; ow++) {
      const long pw = avg_axis(ow, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
      const float d =
          avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor);
      s += LOAD(gp, oh * io.s3 + ow) / d;
    }
  }
  STORE(s, dx, e);
}

/* ---- Adaptive average pooling ----------------------------------------- */

/* Bin o of an axis of n inputs cut into m: [floor(o n / m), ceil((o + 1)
 * n / m)). */
inline long ada_lo(long o, long n, long m) { return pool_udiv(o * n, m); }
inline long ada_hi(long o, long n, long m) { return pool_cdiv((o + 1) * n, m); }

inline void adaptive_fwd_item(global const real_t *x, global real_t *y,
                              size_t o, long4 io) {
  long r;
  const size_t plane = pool_plane(o, io.s2 * io.s3, &r);
  const long oh = pool_udiv(r, io.s3), ow = r - oh * io.s3;
  const long h0 = ada_lo(oh, io.s0, io.s2), h1 = ada_hi(oh, io.s0, io.s2);
  const long w0 = ada_lo(ow, io.s1, io.s3), w1 = ada_hi(ow, io.s1, io.s3);
  global const real_t *xp = x + plane * (size_t)(io.s0 * io.s1);
  float s = 0.0f;
  for (long h = h0; h < h1; h++)
    for (long w = w0; w < w1; w++) s += LOAD(xp, h * io.s1 + w);
  STORE(s / (float)((h1 - h0) * (w1 - w0)), y, o);
}

inline void adaptive_bwd_item(global const real_t *dy, global real_t *dx,
                              size_t e, long4 io) {
  long q;
  const size_t plane = pool_plane(e, io.s0 * io.s1, &q);
  global const real_t *gp = dy + plane * (size_t)(io.s2 * io.s3);
  const long h = pool_udiv(q, io.s1), w = q - h * io.s1;
  const long oh0 = h * io.s2 / io.s0, oh1 = pool_cdiv((h + 1) * io.s2, io.s0);
  const long ow0 = w * io.s3 / io.s1, ow1 = pool_cdiv((w + 1) * io.s3, io.s1);
  float s = 0.0f;
  for (long oh = oh0; oh < oh1; oh++) {
    const long h0 = ada_lo(oh, io.s0, io.s2), h1 = ada_hi(oh, io.s0, io.s2);
    if (h < h0 || h >= h1) continue;
    for (long ow = ow0; ow < ow1; ow++) {
      const long w0 = ada_lo(ow, io.s1, io.s3), w1 = ada_hi(ow, io.s1, io.s3);
      if (w < w0 || w >= w1) continue;
      s += LOAD(gp, oh * io.s3 + ow) / (float)((h1 - h0) * (w1 - w0));
    }
  }
  STORE(s, dx, e);
}

/* ---- CPU variant: input rows -------------------------------------------
 * The backwards above spend most of their time on 64-bit divisions (plane,
 * row, column, window bounds: about ten per element) that PoCL's CPU
 * code cannot hide.  On the CPU variant a work-item takes input rows
 * (plane, h) instead (several consecutive ones, see POOL_ROWS): the output
 * rows that hold h are computed once per row, the output columns that
 * hold w by counters that
 * step with w (no division), and each element then sums the same terms in
 * the same order (oh, then ow, ascending) as the element kernels, so both
 * variants give the same bits. */

/* floor((w + c) / s) for w = 0, 1, ...: quotient q and remainder r. */
typedef struct {
  long q, r, s;
} pool_step;

inline pool_step step_at(long c, long s) {
  pool_step t = {pool_fdiv(c, s), 0, s};
  t.r = c - t.q * s;
  return t;
}
inline void step_next(pool_step *t) {
  if (++t->r == t->s) {
    t->r = 0;
    t->q++;
  }
}

/* The outputs of an axis whose window holds input w (then w + 1, ...)
 * are [lo.q, hi.q] before clipping to [0, o), for windows of k taps d
 * apart, stride s, padding p: lo = step_at(w + p - (k - 1) d + s - 1, s)
 * (a ceiling) and hi = step_at(w + p, s). */

/* Whether t names an element of the window whose first tap is (hs, ws)
 * (hits_h: that window's rows meet the image), or is -1 for an empty
 * window: pool_index_ok without its 64-bit division. */
inline int maxpool_row_ok(int t, long hs, long ws, int hits_h, long4 io,
                          long4 ks, long4 pd) {
  const long H = io.s0, W = io.s1;
  if (t < 0 || (long)t >= H * W)
    return t == -1 && !(hits_h && pool_axis_hits(ws, ks.s1, pd.s3, W));
  const long th = t / (int)W; /* the host keeps H W <= INT32_MAX */
  const long a = th - hs, b = (long)t - th * W - ws;
  if (a < 0 || b < 0) return 0;
  if (pd.s2 == 1 && pd.s3 == 1) /* no dilation: no division */
    return a < ks.s0 && b < ks.s1;
  return a % pd.s2 == 0 && a / pd.s2 < ks.s0 && b % pd.s3 == 0 &&
         b / pd.s3 < ks.s1;
}

/* Checks the indices of outputs [a, b) of output row oh (input row h's
 * share, see the header) without a 64-bit division per index. */
inline void maxpool_check_cols(global const int *ip, size_t plane, long oh,
                               long a, long b, long4 io, long4 ks, long4 pd,
                               volatile global int *status) {
  if (a >= b) return; /* (pool_axis_hits divides) */
  const long hs = oh * ks.s2 - pd.s0;
  const int hits_h = pool_axis_hits(hs, ks.s0, pd.s2, io.s0);
  for (long ow = a; ow < b; ow++) {
    const long j = oh * io.s3 + ow;
    const int t = ip[j];
    if (!maxpool_row_ok(t, hs, ow * ks.s3 - pd.s1, hits_h, io, ks, pd))
      rumus_report(status, DEVERR_POOL_INDEX, t,
                   (int)(plane * (size_t)(io.s2 * io.s3) + (size_t)j));
  }
}

/* CPU variant, F32: work-item `plane` zeroes its plane of dx, then each
 * output of the plane, in order, adds its dy at its index (an index
 * outside its window is reported and adds nothing).  Each dx element is
 * 0 plus its terms in output order, as the gathers add them: the same
 * bits.  One work-item per plane needs no atomics where windows overlap;
 * 16-bit storage keeps the gathers (a sum there stays float until its one
 * rounding). */
inline void maxpool_bwd_plane(global const float *dy, global const int *idx,
                              global float *dx, size_t plane, long4 io,
                              long4 ks, long4 pd,
                              volatile global int *status) {
  const size_t in = (size_t)(io.s0 * io.s1), out = (size_t)(io.s2 * io.s3);
  global float *dp = dx + plane * in;
  global const int *ip = idx + plane * out;
  global const float *gp = dy + plane * out;
  for (size_t e = 0; e < in; e++) dp[e] = 0.0f;
  for (long oh = 0; oh < io.s2; oh++) {
    const long hs = oh * ks.s2 - pd.s0;
    const int hits_h = pool_axis_hits(hs, ks.s0, pd.s2, io.s0);
    for (long ow = 0; ow < io.s3; ow++) {
      const long j = oh * io.s3 + ow;
      const int t = ip[j];
      if (!maxpool_row_ok(t, hs, ow * ks.s3 - pd.s1, hits_h, io, ks, pd))
        rumus_report(status, DEVERR_POOL_INDEX, t,
                     (int)(plane * out + (size_t)j));
      else if (t >= 0)
        dp[t] += gp[j];
    }
  }
}

/* Inputs [a, b) of input row h (dx row dr) of max pooling, one at a
 * time, under output rows [oh0, oh1] of the plane's indices ip and dy gp:
 * each sums the dy of the outputs whose index it is. */
inline void maxpool_bwd_cols(global const int *ip, global const real_t *gp,
                             global real_t *dr, long h, long a, long b,
                             long oh0, long oh1, long4 io, long4 ks,
                             long4 pd) {
  const long W = io.s1, k = ks.s1, s = ks.s3, p = pd.s1, d = pd.s3;
  const int dilated = pd.s2 != 1 || pd.s3 != 1;
  if (a >= b) return; /* (step_at divides) */
  pool_step lo = step_at(p - (k - 1) * d + s - 1 + a, s),
            hi = step_at(p + a, s);
  const int qh = (int)(h * W);
  for (long w = a; w < b; w++, step_next(&lo), step_next(&hi)) {
    const long ow0 = max(0L, lo.q), ow1 = min(io.s3 - 1, hi.q);
    const int q = qh + (int)w;
    float s = 0.0f;
    for (long oh = oh0; oh <= oh1; oh++) {
      if (dilated && (h + pd.s0 - oh * ks.s2) % pd.s2 != 0) continue;
      global const int *ir = ip + oh * io.s3;
      global const real_t *gr = gp + oh * io.s3;
      if (!dilated) { /* the usual case: every column of the range */
        /* Branch-free: which output's max is q is data, unpredictable.
         * s + 0 is s (s is never -0: it starts at +0). */
        for (long ow = ow0; ow <= ow1; ow++) {
          const float v = LOAD(gr, ow);
          s += ir[ow] == q ? v : 0.0f;
        }
        continue;
      }
      for (long ow = ow0; ow <= ow1; ow++)
        if ((w + pd.s1 - ow * ks.s3) % pd.s3 == 0 && ir[ow] == q)
          s += LOAD(gr, ow);
    }
    STORE(s, dr, w);
  }
}

/* The gradient of the inputs under output rows [oh0, oh1] and columns
 * [ow0, ow1] (those of one input): the element kernel's sum. */
inline float avg_grad(global const real_t *gp, long oh0, long oh1, long ow0,
                      long ow1, long4 io, long4 ks, long4 pd, int cip,
                      int divisor) {
  float s = 0.0f;
  for (long oh = oh0; oh <= oh1; oh++) {
    long h0, h1, w0, w1;
    const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
    for (long ow = ow0; ow <= ow1; ow++) {
      const long pw = avg_axis(ow, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
      const float d =
          avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor);
      s += LOAD(gp, oh * io.s3 + ow) / d;
    }
  }
  return s;
}

/* ---- CPU variant: 8 (or 4) outputs of a row a vector ----------------------
 * The row kernels above took one output (or input) at a time: scalar
 * loads, compares and stores at 2-22% of the STREAM copy on PoCL.  Where
 * a stretch of a row's windows lies inside the input along w and the
 * stride along w is 1, 2 or 4, n = 8 adjacent outputs (4 in rows of 4 to
 * 7, or where no block of 8 fits) are one float vector: the tap (i, j) of
 * the n windows is one vector
 * load (stride 1), the even or odd lanes of a load twice as wide (2: a
 * deinterleave) or every fourth lane of one four times as wide (4).  Each
 * lane takes its window's taps in the scalar code's order with the same
 * operations (compare and select, or add, then one division): the same
 * bits.  The stretch is covered by blocks n outputs apart, the last one
 * moved back to end with the stretch (it writes some outputs a second
 * time, the same values); the outputs whose windows reach the padding or
 * the row's end keep the scalar code.  The backwards use the same blocks
 * where each input's terms are the same for all lanes: windows that tile
 * the row (kw = sw, no padding: a map, each dy spread over sw inputs) or
 * stride 1 (lane w adds the dy of outputs w + pw - kw + 1 ... w + pw);
 * max pooling's where windows 2 or 3 wide of stride 2 put each input in
 * one or two known outputs of a block (maxpool_bwd_vec). */

/* The row functions inline into the row loops (POOL_ROWS), where the
 * compiler hoists their per-call setup out of the loop. */
#define POOL_INLINE inline __attribute__((always_inline))
#define POOL_LDN(n, p, i) RUMUS_LOADN(RUMUS_STORAGE, n, p, i)
#define POOL_STN(n, v, p, i) RUMUS_STOREN(RUMUS_STORAGE, n, v, p, i)
#define POOL_LANES8 (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#define POOL_LANES4 (int4)(0, 1, 2, 3)

/* The divisors of the average windows of outputs o .. o + 7 along w
 * (stride s, kw k, padding p, W inputs), given the window's padded height
 * ph and kept height kh (avg_divisor's, lane by lane). */
inline float8 avg_lane_div8(long o, int s, int ph, int kh, int W, int k,
                            int p, int cip, int divisor) {
  const int8 st = ((int)o + POOL_LANES8) * s - p, en = min(st + k, W + p);
  const int8 kept = min(en, W) - max(st, 0);
  return divisor > 0 ? (float8)((float)divisor)
                     : convert_float8(cip ? ph * (en - st) : kh * kept);
}

/* Elements c, c + s, ..., c + 7 s (3 s) of row r (W elements; the last
 * one inside it), s 1, 2 or 4.  A load reads n s elements: it starts up
 * to s - 1 elements early where it would pass the row's end, and the
 * lanes are picked from there (sh). */
inline float8 pool_taps8(global const real_t *r, long c, long s, long W) {
  if (s == 1) return POOL_LDN(8, r, c);
  const long sh = max(0L, c + 8 * s - W);
  const float16 a = POOL_LDN(16, r, c - sh);
  if (s == 2) return sh ? a.odd : a.even;
  const float16 b = POOL_LDN(16, r, c - sh + 16);
  switch (sh) {
  case 0: return (float8)(a.s048c, b.s048c);
  case 1: return (float8)(a.s159d, b.s159d);
  case 2: return (float8)(a.s26ae, b.s26ae);
  default: return (float8)(a.s37bf, b.s37bf);
  }
}

inline float4 pool_taps4(global const real_t *r, long c, long s, long W) {
  if (s == 1) return POOL_LDN(4, r, c);
  const long sh = max(0L, c + 4 * s - W);
  if (s == 2) {
    const float8 a = POOL_LDN(8, r, c - sh);
    return sh ? a.odd : a.even;
  }
  const float16 a = POOL_LDN(16, r, c - sh);
  switch (sh) {
  case 0: return a.s048c;
  case 1: return a.s159d;
  case 2: return a.s26ae;
  default: return a.s37bf;
  }
}

/* The lanes of a row of `no` outputs, W inputs: 8, 4 (rows of 4 to 7) or
 * 0 (no vectors: fewer than 4 outputs, stride not 1, 2 or 4, or the row
 * shorter than a load). */
inline long pool_lanes(long no, long W, long s) {
  const long n = no >= 8 ? 8 : no >= 4 ? 4 : 0;
  if (n == 0 || (s != 1 && s != 2 && s != 4)) return 0;
  return W >= 8 * s ? n : W >= 4 * s ? 4 : 0;
}

/* A forward's blocks: starts [*first, *last] of n outputs whose windows
 * (k taps d apart from ow s - p) lie inside the row of W; the lanes n (8,
 * or 4 where 8 find no such block), 0 if there are none. */
inline long pool_fwd_span(long OW, long W, long k, long s, long p, long d,
                          long *first, long *last) {
  for (long n = pool_lanes(OW, W, s); n >= 4; n -= 4) { /* 8, else 4 */
    const long r = W - 1 - (n - 1) * s - (k - 1) * d + p; /* ow0 s <= r */
    *first = (p + s - 1) / s;
    *last = r < 0 ? -1 : min(r / s, OW - n);
    if (*last >= *first) return n;
  }
  return 0;
}

/* Blocks of n from first to last (the last moved back to end there). */
#define POOL_BLOCKS(o, first, last, n)                                       \
  for (long o##_ = (first), o = min(o##_, last);; o##_ += (n),               \
            o = min(o##_, last))

/* Max pooling of the n outputs from ow0 of plane xp, output row with
 * first tap row hs: maxpool_window's taps and test, lane by lane (the
 * exact rule; maxpool_vec's fallback for windows with a NaN). */
#define MAXPOOL_CHAIN(N)                                                     \
  inline void maxpool_chain##N(global const real_t *xp, long c0, long hs,    \
                               long4 io, long4 ks, long4 pd, float##N *mo,   \
                               int##N *mio) {                                \
    const long W = io.s1, s = ks.s3;                                         \
    float##N m = -INFINITY;                                                  \
    int##N mi = -1;                                                          \
    for (long i = 0; i < ks.s0; i++) {                                       \
      const long h = hs + i * pd.s2;                                         \
      if (h < 0 || h >= io.s0) continue;                                     \
      for (long j = 0; j < ks.s1; j++) {                                     \
        const long c = c0 + j * pd.s3;                                       \
        const float##N v = pool_taps##N(xp + h * W, c, s, W);                \
        const int##N t = (int)(h * W + c) + POOL_LANES##N * (int)s;          \
        const int##N take = v > m || isnan(v) || mi < 0;                     \
        m = select(m, v, take);                                              \
        mi = select(mi, t, take);                                            \
      }                                                                      \
    }                                                                        \
    *mo = m;                                                                 \
    *mio = mi;                                                               \
  }
MAXPOOL_CHAIN(8)
MAXPOOL_CHAIN(4)

/* The same in fewer instructions a tap (the forward was bound by them:
 * about 18 a tap of 8 lanes): the index starts at the window's first tap
 * inside the image (-1 if none) and the max at -inf, so an all -inf
 * window keeps its first tap without maxpool_window's mi < 0 test, and
 * the test is one compare, !(v <= m): v > m, or v NaN, or m NaN.  The
 * last differs from maxpool_window's (which keeps a NaN max), so a sum of
 * the taps marks the lanes that met a NaN (or inf - inf) and those take
 * maxpool_chain's answer. */
#define MAXPOOL_FIRST(N)                                                     \
  inline int##N maxpool_first##N(long c0, long hs, long4 io, long4 ks,       \
                                 long4 pd) {                                 \
    for (long i = 0; i < ks.s0; i++) {                                       \
      const long h = hs + i * pd.s2;                                         \
      if (h >= 0 && h < io.s0)                                               \
        return (int)(h * io.s1 + c0) + POOL_LANES##N * (int)ks.s3;           \
    }                                                                        \
    return -1;                                                               \
  }
MAXPOOL_FIRST(8)
MAXPOOL_FIRST(4)

#define MAXPOOL_VEC(N)                                                       \
  inline void maxpool_vec##N(global const real_t *xp, global real_t *yr,     \
                             global int *ir, long ow0, long hs, long4 io,    \
                             long4 ks, long4 pd) {                           \
    const long W = io.s1, s = ks.s3, c0 = ow0 * s - pd.s1;                   \
    float##N m = -INFINITY, nan = 0.0f;                                      \
    int##N mi = maxpool_first##N(c0, hs, io, ks, pd);                        \
    for (long i = 0; i < ks.s0; i++) {                                       \
      const long h = hs + i * pd.s2;                                         \
      if (h < 0 || h >= io.s0) continue;                                     \
      for (long j = 0; j < ks.s1; j++) {                                     \
        const long c = c0 + j * pd.s3;                                       \
        const float##N v = pool_taps##N(xp + h * W, c, s, W);                \
        const int##N take = !(v <= m);                                       \
        m = select(m, v, take);                                              \
        mi = select(mi, (int)(h * W + c) + POOL_LANES##N * (int)s, take);    \
        nan += v;                                                            \
      }                                                                      \
    }                                                                        \
    const int##N bad = isnan(nan);                                           \
    if (any(bad)) {                                                          \
      float##N a;                                                            \
      int##N ai;                                                             \
      maxpool_chain##N(xp, c0, hs, io, ks, pd, &a, &ai);                     \
      m = select(m, a, bad);                                                 \
      mi = select(mi, ai, bad);                                              \
    }                                                                        \
    POOL_STN(N, m, yr, ow0);                                                 \
    vstore##N(mi, 0, ir + ow0);                                              \
  }
MAXPOOL_VEC(8)
MAXPOOL_VEC(4)

/* maxpool_vec8 of the blocks from oa and from ob (>= oa) at once: two
 * independent chains of compare and select (about 4 cycles a tap each). */
inline void maxpool_vec8x2(global const real_t *xp, global real_t *yr,
                           global int *ir, long oa, long ob, long hs,
                           long4 io, long4 ks, long4 pd) {
  const long W = io.s1, s = ks.s3, ca = oa * s - pd.s1, cb = ob * s - pd.s1;
  float8 ma = -INFINITY, mb = -INFINITY, na = 0.0f, nb = 0.0f;
  int8 ia = maxpool_first8(ca, hs, io, ks, pd),
       ib = maxpool_first8(cb, hs, io, ks, pd);
  /* pool_taps8's shifts and stride switch are not needed here */
  const int even = s == 2 && cb + (ks.s1 - 1) * pd.s3 + 16 <= W;
  for (long i = 0; i < ks.s0; i++) {
    const long h = hs + i * pd.s2;
    if (h < 0 || h >= io.s0) continue;
    global const real_t *xr = xp + h * W;
    for (long j = 0; j < ks.s1; j++) {
      const long c = j * pd.s3;
      float8 va, vb;
      if (even) { /* stride 2, both loads inside the row */
        va = POOL_LDN(16, xr, ca + c).even;
        vb = POOL_LDN(16, xr, cb + c).even;
      } else {
        va = pool_taps8(xr, ca + c, s, W);
        vb = pool_taps8(xr, cb + c, s, W);
      }
      const int8 ka = !(va <= ma), kb = !(vb <= mb);
      ma = select(ma, va, ka);
      ia = select(ia, (int)(h * W + ca + c) + POOL_LANES8 * (int)s, ka);
      mb = select(mb, vb, kb);
      ib = select(ib, (int)(h * W + cb + c) + POOL_LANES8 * (int)s, kb);
      na += va;
      nb += vb;
    }
  }
  if (any(isnan(na) | isnan(nb))) { /* maxpool_vec8's fallback */
    maxpool_vec8(xp, yr, ir, oa, hs, io, ks, pd);
    maxpool_vec8(xp, yr, ir, ob, hs, io, ks, pd);
    return;
  }
  POOL_STN(8, ma, yr, oa);
  vstore8(ia, 0, ir + oa);
  POOL_STN(8, mb, yr, ob);
  vstore8(ib, 0, ir + ob);
}

/* Outputs [a, b) of a row of max pooling, one at a time. */
inline void maxpool_fwd_cols(global const real_t *xp, global real_t *yr,
                             global int *ir, long a, long b, long hs,
                             long4 io, long4 ks, long4 pd) {
  for (long ow = a; ow < b; ow++) {
    float m;
    int mi;
    maxpool_window(xp, hs, ow * ks.s3 - pd.s1, io, ks, pd, &m, &mi);
    STORE(m, yr, ow);
    ir[ow] = mi;
  }
}

/* The CPU variant's forward: output row `row` of the N C OH rows, one
 * division per row instead of per element, the same windows. */
POOL_INLINE void maxpool_fwd_row(global const real_t *x, global real_t *y,
                                 global int *idx, size_t plane, long oh,
                                 long4 io, long4 ks, long4 pd) {
  long f, l;
  const size_t row = plane * (size_t)io.s2 + (size_t)oh;
  global const real_t *xp = x + plane * (size_t)(io.s0 * io.s1);
  global real_t *yr = y + row * (size_t)io.s3;
  global int *ir = idx + row * (size_t)io.s3;
  const long hs = oh * ks.s2 - pd.s0, OW = io.s3;
  const long n = pool_fwd_span(OW, io.s1, ks.s1, ks.s3, pd.s1, pd.s3, &f, &l);
  if (n == 0) {
    maxpool_fwd_cols(xp, yr, ir, 0, OW, hs, io, ks, pd);
    return;
  }
  maxpool_fwd_cols(xp, yr, ir, 0, f, hs, io, ks, pd);
  if (n == 8) { /* pairs of blocks, the last pair ending at l + 8 */
    long o = f;
    for (; o + 8 < l; o += 16)
      maxpool_vec8x2(xp, yr, ir, o, o + 8, hs, io, ks, pd);
    maxpool_vec8x2(xp, yr, ir, min(o, l), l, hs, io, ks, pd);
  } else {
    POOL_BLOCKS(o, f, l, n) {
      maxpool_vec4(xp, yr, ir, o, hs, io, ks, pd);
      if (o == l) break;
    }
  }
  maxpool_fwd_cols(xp, yr, ir, l + n, OW, hs, io, ks, pd);
}

/* Windows that tile the row (kw = sw = 2 or 4): the taps of n windows
 * in a row are the n sw elements from c, one load (two for 8 lanes of 4)
 * where pool_taps loaded them again for each tap; added to acc in tap
 * order. */
inline float8 avg_tile8(global const real_t *r, long c, long s, float8 acc) {
  const float16 a = POOL_LDN(16, r, c);
  if (s == 2) return acc + a.even + a.odd;
  const float16 b = POOL_LDN(16, r, c + 16);
  return acc + (float8)(a.s048c, b.s048c) + (float8)(a.s159d, b.s159d) +
         (float8)(a.s26ae, b.s26ae) + (float8)(a.s37bf, b.s37bf);
}

inline float4 avg_tile4(global const real_t *r, long c, long s, float4 acc) {
  if (s == 2) {
    const float8 a = POOL_LDN(8, r, c);
    return acc + a.even + a.odd;
  }
  const float16 a = POOL_LDN(16, r, c);
  return acc + a.s048c + a.s159d + a.s26ae + a.s37bf;
}

/* The window sums of the n outputs from ow0 over input rows [h0, h1)
 * (avgpool_at's order). */
#define AVGPOOL_VEC(N)                                                       \
  inline float##N avgpool_vec##N(global const real_t *xp, long ow0, long h0, \
                                 long h1, long4 io, long4 ks, long4 pd) {    \
    const long W = io.s1, s = ks.s3, c0 = ow0 * s - pd.s1;                   \
    float##N acc = 0.0f;                                                     \
    if (ks.s1 == s && (s == 2 || s == 4)) { /* inside the row: the span */   \
      for (long h = h0; h < h1; h++)                                         \
        acc = avg_tile##N(xp + h * W, c0, s, acc);                           \
      return acc;                                                            \
    }                                                                        \
    for (long h = h0; h < h1; h++)                                           \
      for (long j = 0; j < ks.s1; j++)                                       \
        acc += pool_taps##N(xp + h * W, c0 + j, s, W);                       \
    return acc;                                                              \
  }
AVGPOOL_VEC(8)
AVGPOOL_VEC(4)

/* The CPU variant's forward, a row of outputs per work-item (see
 * maxpool_fwd_row).  Inside the row the windows are kw wide, so one
 * divisor serves the vectors. */
POOL_INLINE void avgpool_fwd_row(global const real_t *x, global real_t *y,
                                 size_t plane, long oh, long4 io, long4 ks,
                                 long4 pd, int cip, int divisor) {
  long f, l, h0, h1;
  const size_t row = plane * (size_t)io.s2 + (size_t)oh;
  global const real_t *xp = x + plane * (size_t)(io.s0 * io.s1);
  global real_t *yr = y + row * (size_t)io.s3;
  const long OW = io.s3;
  const long n = pool_fwd_span(OW, io.s1, ks.s1, ks.s3, pd.s1, 1, &f, &l);
  if (n == 0) f = l = OW;
  for (long ow = 0; ow < f; ow++)
    STORE(avgpool_at(xp, oh, ow, io, ks, pd, cip, divisor), yr, ow);
  for (long ow = n ? l + n : OW; ow < OW; ow++)
    STORE(avgpool_at(xp, oh, ow, io, ks, pd, cip, divisor), yr, ow);
  if (n == 0) return;
  const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  const float d = avg_divisor(ph * ks.s1, (h1 - h0) * ks.s1, cip, divisor);
  POOL_BLOCKS(o, f, l, n) {
    if (n == 8)
      POOL_STN(8, avgpool_vec8(xp, o, h0, h1, io, ks, pd) / d, yr, o);
    else
      POOL_STN(4, avgpool_vec4(xp, o, h0, h1, io, ks, pd) / d, yr, o);
    if (o == l) break;
  }
}

/* Inputs [a, b) of input row h (dx row dr) of average pooling, one at a
 * time, under output rows [oh0, oh1]: an input's gradient depends on its
 * output columns only, so neighbours with the same ones (stride > 1)
 * reuse the sum. */
inline void avgpool_bwd_cols(global const real_t *gp, global real_t *dr,
                             long a, long b, long oh0, long oh1, long4 io,
                             long4 ks, long4 pd, int cip, int divisor) {
  const long k = ks.s1, s = ks.s3, p = pd.s1;
  if (a >= b) return; /* (step_at divides) */
  pool_step lo = step_at(p - k + s + a, s), hi = step_at(p + a, s);
  long c0 = -1, c1 = -1; /* the columns of g */
  float g = 0.0f;
  for (long w = a; w < b; w++, step_next(&lo), step_next(&hi)) {
    const long ow0 = max(0L, lo.q), ow1 = min(io.s3 - 1, hi.q);
    if (ow0 != c0 || ow1 != c1) {
      g = avg_grad(gp, oh0, oh1, ow0, ow1, io, ks, pd, cip, divisor);
      c0 = ow0;
      c1 = ow1;
    }
    STORE(g, dr, w);
  }
}

/* The divisor of output row oh's windows that lie inside the row. */
inline float avg_row_divisor(long oh, long4 io, long4 ks, long4 pd, int cip,
                             int divisor) {
  long h0, h1;
  const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  return avg_divisor(ph * ks.s1, (h1 - h0) * ks.s1, cip, divisor);
}

/* dx of n = 8 (4) outputs' inputs from input column w: lane l's value to
 * its s inputs. */
inline void pool_spread8(float8 g, long s, global real_t *dr, long w) {
  if (s == 1) {
    POOL_STN(8, g, dr, w);
  } else if (s == 2) {
    POOL_STN(16, (float16)(g.s00112233, g.s44556677), dr, w);
  } else {
    POOL_STN(16, g.s0000111122223333, dr, w);
    POOL_STN(16, g.s4444555566667777, dr, w + 16);
  }
}

inline void pool_spread4(float4 g, long s, global real_t *dr, long w) {
  if (s == 1)
    POOL_STN(4, g, dr, w);
  else if (s == 2)
    POOL_STN(8, g.s00112233, dr, w);
  else
    POOL_STN(16, g.s0000111122223333, dr, w);
}

/* Windows that tile the row (kw = sw, no padding along w): each input of
 * the blocks has one output column, the same for its sw neighbours: 0
 * plus dy / divisor of each output row in turn (avg_grad's terms). */
#define AVG_BWD_MAP(N)                                                       \
  inline void avgpool_bwd_map##N(global const real_t *gp, global real_t *dr, \
                                 long o, long oh0, long oh1, long4 io,       \
                                 long4 ks, long4 pd, int cip, int divisor) { \
    float##N acc = 0.0f;                                                     \
    for (long oh = oh0; oh <= oh1; oh++)                                     \
      acc += POOL_LDN(N, gp + oh * io.s3, o) /                               \
             avg_row_divisor(oh, io, ks, pd, cip, divisor);                  \
    pool_spread##N(acc, ks.s3, dr, o * ks.s3);                               \
  }
AVG_BWD_MAP(8)
AVG_BWD_MAP(4)

/* Stride 1 along w: input lanes w0 + l take the kw outputs from w0 + l +
 * pw - kw + 1 in order, all inside [0, OW); their divisors lane by lane
 * (the windows at the row's ends are narrower).  The host keeps kh kw
 * below 2^31 when this runs (int lanes). */
#define AVG_BWD_GATHER(N)                                                    \
  inline void avgpool_bwd_gather##N(global const real_t *gp,                 \
                                    global real_t *dr, long w0, long oh0,    \
                                    long oh1, long4 io, long4 ks, long4 pd,  \
                                    int cip, int divisor) {                  \
    const int W = (int)io.s1, k = (int)ks.s1, p = (int)pd.s1;                \
    float##N acc = 0.0f;                                                     \
    for (long oh = oh0; oh <= oh1; oh++) {                                   \
      long h0, h1;                                                           \
      const int ph = (int)avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1); \
      const int kh = (int)(h1 - h0);                                         \
      global const real_t *gr = gp + oh * io.s3;                             \
      for (int j = 0; j < k; j++) {                                          \
        const int c = (int)w0 + p - k + 1 + j;                               \
        const int##N st = c + POOL_LANES##N - p, en = min(st + k, W + p);    \
        const int##N kept = min(en, W) - max(st, 0);                         \
        const float##N d =                                                   \
            divisor > 0 ? (float##N)((float)divisor)                         \
                        : convert_float##N(cip ? ph * (en - st) : kh * kept); \
        acc += POOL_LDN(N, gr, c) / d;                                       \
      }                                                                      \
    }                                                                        \
    POOL_STN(N, acc, dr, w0);                                                \
  }
AVG_BWD_GATHER(8)
AVG_BWD_GATHER(4)

/* Input row `row` of the N C H rows: blocks where the windows tile the
 * row or the stride is 1 (above), the rest one input at a time. */
POOL_INLINE void avgpool_bwd_row(global const real_t *dy, global real_t *dx,
                                 size_t plane, long h, long4 io, long4 ks,
                                 long4 pd, int cip, int divisor) {
  const size_t row = plane * (size_t)io.s0 + (size_t)h;
  const long W = io.s1, OW = io.s3;
  global const real_t *gp = dy + plane * (size_t)(io.s2 * io.s3);
  const long oh0 = max(0L, pool_cdiv(h + pd.s0 - ks.s0 + 1, ks.s2));
  const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
  global real_t *dr = dx + row * (size_t)W;
  const long s = ks.s3, k = ks.s1, p = pd.s1;
  long n = k == s && p == 0 ? pool_lanes(OW, W, s) : 0;
  long l = min(OW, W / s) - n;
  if (n > 0 && l >= 0) { /* tiles: blocks of outputs [0, l + n) */
    POOL_BLOCKS(o, 0, l, n) {
      if (n == 8)
        avgpool_bwd_map8(gp, dr, o, oh0, oh1, io, ks, pd, cip, divisor);
      else
        avgpool_bwd_map4(gp, dr, o, oh0, oh1, io, ks, pd, cip, divisor);
      if (o == l) break;
    }
    avgpool_bwd_cols(gp, dr, (l + n) * s, W, oh0, oh1, io, ks, pd, cip,
                     divisor);
    return;
  }
  n = s == 1 && ks.s0 * k <= INT_MAX && W <= INT_MAX / 2 ? pool_lanes(W, W, 1)
                                                          : 0;
  const long f = max(0L, k - 1 - p);
  l = min(W - n, OW - n - p);
  if (n == 0 || l < f) {
    avgpool_bwd_cols(gp, dr, 0, W, oh0, oh1, io, ks, pd, cip, divisor);
    return;
  }
  avgpool_bwd_cols(gp, dr, 0, f, oh0, oh1, io, ks, pd, cip, divisor);
  POOL_BLOCKS(w, f, l, n) {
    if (n == 8)
      avgpool_bwd_gather8(gp, dr, w, oh0, oh1, io, ks, pd, cip, divisor);
    else
      avgpool_bwd_gather4(gp, dr, w, oh0, oh1, io, ks, pd, cip, divisor);
    if (w == l) break;
  }
  avgpool_bwd_cols(gp, dr, l + n, W, oh0, oh1, io, ks, pd, cip, divisor);
}

/* Non-temporal stores (past the caches, no read of the line first): the
 * host passes -DPOOL_NT=1 for F32 programs of the CPU variant on a CPU
 * device only, and sets a kernel's nt flag where the output outgrows the
 * last-level cache (the next op would not find it there anyway).  Writes
 * then cost their bytes once instead of twice (the line's read for
 * ownership): on the 2-vCPU EPYC a 100 MB fill took 3.8 ms instead of
 * 5.8. */
#if defined(POOL_NT) && defined(__has_builtin)
#if __has_builtin(__builtin_nontemporal_store)
#define POOL_NT_STORES 1
#endif
#endif
#ifndef POOL_NT_STORES
#define POOL_NT_STORES 0
#endif

/* 8 floats v to p + i: non-temporal where nt and p + i is aligned to 32
 * bytes (the vector store's alignment), else POOL_STN. */
#if POOL_NT_STORES
inline void pool_st8(float8 v, global real_t *p, long i, int nt) {
  if (nt && ((size_t)(p + i) & 31) == 0)
    __builtin_nontemporal_store(v, (global float8 *)(p + i));
  else
    POOL_STN(8, v, p, i);
}
#else
inline void pool_st8(float8 v, global real_t *p, long i, int nt) {
  POOL_STN(8, v, p, i);
}
#endif

/* pool_st8 for 8 ints (max pooling's indices). */
inline void pool_st8i(int8 v, global int *p, long i, int nt) {
#if POOL_NT_STORES
  if (nt && ((size_t)(p + i) & 31) == 0) {
    __builtin_nontemporal_store(v, (global int8 *)(p + i));
    return;
  }
#endif
  vstore8(v, 0, p + i);
}

/* 16 floats (a, b) to p + i, as pool_st8 (float8 halves: PoCL warns of
 * float16 arguments on AVX2). */
inline void pool_st8x2(float8 a, float8 b, global real_t *p, long i, int nt) {
  pool_st8(a, p, i, nt);
  pool_st8(b, p, i + 8, nt);
}

/* Orders a work-item's non-temporal stores before the kernel's end (x86
 * keeps them out of the usual store order). */
inline void pool_nt_fence(int nt) {
  if (POOL_NT_STORES && nt) write_mem_fence(CLK_GLOBAL_MEM_FENCE);
}

/* The index check of 8 outputs from o of output row oh, without
 * dilation: t is in output ow's window iff t - ((hs + i) W + ws) is in
 * [max(0, -ws), min(kw, W - ws)) for one of its rows hs + i inside the
 * image (no division; maxpool_row_ok's answer for the windows that reach
 * an input, which every window does where the row is at least kw - pw
 * wide; an empty window's -1 fails here and is checked again below).
 * When a lane fails, maxpool_check_cols checks outputs `from` (not yet
 * checked) to o + 8 again and reports. */
inline void maxpool_check_vec(global const int *ip, size_t plane, long oh,
                              long o, long from, long4 io, long4 ks, long4 pd,
                              volatile global int *status) {
  const long hs = oh * ks.s2 - pd.s0, W = io.s1;
  const int8 t = vload8(0, ip + oh * io.s3 + o);
  const int8 ws = (int)(o * ks.s3 - pd.s1) + POOL_LANES8 * (int)ks.s3;
  const int8 lo = max(0, -ws), hi = min((int)ks.s1, (int)W - ws);
  int8 ok = 0;
  for (long i = 0; i < ks.s0; i++) {
    const long r = hs + i;
    if (r < 0 || r >= io.s0) continue;
    const int8 off = t - ((int)(r * W) + ws);
    ok |= off >= lo && off < hi;
  }
  if (!all(ok))
    maxpool_check_cols(ip, plane, oh, from, o + 8, io, ks, pd, status);
}

/* Checks the indices of output row oh: 8 at a time without dilation
 * (the last block moved back to end with the row), else (or in rows of
 * fewer than 8) one at a time; each index is reported at most once. */
POOL_INLINE void maxpool_check_row(global const int *ip, size_t plane, long oh,
                                   long4 io, long4 ks, long4 pd,
                                   volatile global int *status) {
  const long OW = io.s3;
  if (pd.s2 != 1 || pd.s3 != 1 || OW < 8) {
    maxpool_check_cols(ip, plane, oh, 0, OW, io, ks, pd, status);
    return;
  }
  long from = 0;
  POOL_BLOCKS(o, 0, OW - 8, 8) {
    maxpool_check_vec(ip, plane, oh, o, from, io, ks, pd, status);
    from = o + 8;
    if (o == OW - 8) break;
  }
}

/* Max pooling's backward, windows 2 or 3 wide of stride 2 along w (no
 * dilation, padding 0 or 1): a block of 8 outputs m0 .. m0 + 7 covers the
 * 16 inputs from b = 2 m0 - pw; lane l's even input b + 2 l lies in
 * output m0 + l's window (and, 3 wide, in m0 + l - 1's before it), its
 * odd input b + 2 l + 1 in m0 + l's only.  Each adds dy where the index
 * names it, or +0, output rows then outputs in order (maxpool_bwd_cols's
 * terms); the two vectors are interleaved into one 16-wide store. */
inline void maxpool_bwd_vec(global const int *ip, global const real_t *gp,
                            global real_t *dr, long h, long m0, long oh0,
                            long oh1, long4 io, long4 ks, long4 pd) {
  const long b = 2 * m0 - pd.s1, OW = io.s3;
  const int8 qe = (int)(h * io.s1 + b) + 2 * POOL_LANES8, qo = qe + 1;
  float8 e = 0.0f, o = 0.0f;
  for (long oh = oh0; oh <= oh1; oh++) {
    global const int *ir = ip + oh * OW + m0;
    global const real_t *gr = gp + oh * OW + m0;
    const int8 t = vload8(0, ir);
    const float8 g = POOL_LDN(8, gr, 0);
    if (ks.s1 == 3) {
      const int8 tp = vload8(0, ir - 1);
      e += select((float8)0.0f, POOL_LDN(8, gr, -1), tp == qe);
    }
    e += select((float8)0.0f, g, t == qe);
    o += select((float8)0.0f, g, t == qo);
  }
  const float16 eo = (float16)(e, o);
  POOL_STN(16, eo.s08192a3b4c5d6e7f, dr, b);
}

/* Inputs [a, b) of input row h beside maxpool_bwd_vec's blocks (its
 * windows: stride 2, kw 2 or 3, no dilation): maxpool_bwd_cols's sums,
 * the output columns by shifts instead of its divisions (which took a
 * quarter of the kernel's time for the two inputs at a row's ends). */
inline void maxpool_bwd_edge(global const int *ip, global const real_t *gp,
                             global real_t *dr, long h, long a, long b,
                             long oh0, long oh1, long4 io, long4 ks,
                             long4 pd) {
  const long OW = io.s3, k = ks.s1, p = pd.s1;
  for (long w = a; w < b; w++) {
    const long ow0 = max(0L, w + p - k + 2) >> 1;
    const long ow1 = min(OW - 1, (w + p) >> 1);
    const int q = (int)(h * io.s1 + w);
    float s = 0.0f;
    for (long oh = oh0; oh <= oh1; oh++)
      for (long ow = ow0; ow <= ow1; ow++) {
        const float v = LOAD(gp, oh * OW + ow);
        s += ip[oh * OW + ow] == q ? v : 0.0f;
      }
    STORE(s, dr, w);
  }
}

/* The blocks' first and last m0 for maxpool_bwd_vec (inputs inside the
 * row, every output of their windows present); 0 where there are none or
 * the windows are not of its kind (the host's max_bwd_vec mirrors it). */
inline int maxpool_bwd_span(long4 io, long4 ks, long4 pd, long *f, long *l) {
  const long k = ks.s1, p = pd.s1;
  if (ks.s3 != 2 || (k != 2 && k != 3) || pd.s2 != 1 || pd.s3 != 1 || p > 1)
    return 0;
  *f = k == 3 || p == 1 ? 1 : 0;
  *l = min((io.s1 - 16 + p) / 2, io.s3 - 8);
  return io.s1 >= 16 && *l >= *f;
}

/* 3 wide windows of stride 2 and padding 1 along w (no dilation), W even
 * and at least 16: blocks of 16 inputs from w0 = 2 m0 (m0 = 0, 8, ...;
 * the last moved back to end with the row), so the stores fall on whole
 * vectors (non-temporal where nt and aligned) and no input is left for
 * maxpool_bwd_edge.  Lane l's even input w0 + 2 l lies in output m0 + l's
 * window only, its odd input in m0 + l's and m0 + l + 1's (none past the
 * row's last output: that lane adds +0, which leaves a sum that started
 * at +0 the same bits).  The terms and their order are maxpool_bwd_cols'. */
inline void maxpool_bwd_vec3(global const int *ip, global const real_t *gp,
                             global real_t *dr, long h, long m0, long oh0,
                             long oh1, long4 io, int nt) {
  const long OW = io.s3, w0 = 2 * m0;
  const int8 qe = (int)(h * io.s1 + w0) + 2 * POOL_LANES8, qo = qe + 1;
  const int last = m0 + 8 >= OW;
  float8 e = 0.0f, o = 0.0f;
  for (long oh = oh0; oh <= oh1; oh++) {
    global const int *ir = ip + oh * OW + m0;
    global const real_t *gr = gp + oh * OW + m0;
    const int8 t = vload8(0, ir);
    const float8 g = POOL_LDN(8, gr, 0);
    int8 tn;
    float8 gn;
    if (last) {
      tn = (int8)(t.s123, t.s4567, -1);
      gn = (float8)(g.s123, g.s4567, 0.0f);
    } else {
      tn = vload8(0, ir + 1);
      gn = POOL_LDN(8, gr, 1);
    }
    e += select((float8)0.0f, g, t == qe);
    o += select((float8)0.0f, g, t == qo);
    o += select((float8)0.0f, gn, tn == qo);
  }
  const float16 eo = (float16)(e, o);
  pool_st8x2(eo.s08192a3b, eo.s4c5d6e7f, dr, w0, nt);
}

/* Input row `row` of the N C H rows: checks the indices of output rows
 * h, h + H, ..., then sums (vector blocks where maxpool_bwd_span finds
 * them, the rest one input at a time). */
POOL_INLINE void maxpool_bwd_row(global const real_t *dy,
                                 global const int *idx, global real_t *dx,
                                 size_t plane, long h, long4 io, long4 ks,
                                 long4 pd, volatile global int *status) {
  const size_t row = plane * (size_t)io.s0 + (size_t)h;
  const long W = io.s1;
  const size_t out0 = plane * (size_t)(io.s2 * io.s3);
  global const int *ip = idx + out0;
  global const real_t *gp = dy + out0;
  for (long oh = h; oh < io.s2; oh += io.s0)
    maxpool_check_row(ip, plane, oh, io, ks, pd, status);
  const long oh0 = max(0L, pool_cdiv(h + pd.s0 - (ks.s0 - 1) * pd.s2, ks.s2));
  const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
  global real_t *dr = dx + row * (size_t)W;
  long f, l;
  if (!maxpool_bwd_span(io, ks, pd, &f, &l)) {
    maxpool_bwd_cols(ip, gp, dr, h, 0, W, oh0, oh1, io, ks, pd);
    return;
  }
  maxpool_bwd_edge(ip, gp, dr, h, 0, 2 * f - pd.s1, oh0, oh1, io, ks, pd);
  POOL_BLOCKS(m, f, l, 8) {
    maxpool_bwd_vec(ip, gp, dr, h, m, oh0, oh1, io, ks, pd);
    if (m == l) break;
  }
  maxpool_bwd_edge(ip, gp, dr, h, 2 * l - pd.s1 + 16, W, oh0, oh1, io, ks,
                   pd);
}

/* The index check of maxpool2d_bwd_k3rows (no dilation along h): input
 * row h checks the output rows whose first window row inside the image,
 * max(0, oh sh - ph), is h (each output row once, every row of a window
 * some input row).  Those are among the rows its gather reads, so their
 * indices come from the cache; the row kernel's rows h, h + H, ... read
 * the indices a second time from memory (40% of the kernel's time at
 * 32x64x112/k3s2p1). */
/* Output row oh: maxpool_check_vec's test over the whole row (blocks of
 * 8 from 0, the last moved back; the image rows of the window as fixed
 * loop bounds), the failures gathered and, if any, the row checked again
 * one index at a time (maxpool_check_cols, which reports): no branch a
 * block (the per-block test and fallback took a third of the kernel). */
inline void maxpool_check_k3row(global const int *ip, size_t plane, long oh,
                                long4 io, long4 ks, long4 pd,
                                volatile global int *status) {
  const long W = io.s1, OW = io.s3, hs = oh * ks.s2 - pd.s0;
  const long r0 = max(0L, hs), r1 = min(hs + ks.s0, io.s0);
  global const int *ir = ip + oh * OW;
  int8 bad = 0;
  POOL_BLOCKS(o, 0, OW - 8, 8) {
    const int8 t = vload8(0, ir + o);
    const int8 ws = (int)(2 * o - 1) + 2 * POOL_LANES8;
    const int8 lo = max(0, -ws), hi = min(3, (int)W - ws);
    int8 ok = 0;
    for (long r = r0; r < r1; r++) {
      const int8 off = t - ((int)(r * W) + ws);
      ok |= off >= lo && off < hi;
    }
    bad |= ~ok;
    if (o == OW - 8) break;
  }
  if (any(bad)) maxpool_check_cols(ip, plane, oh, 0, OW, io, ks, pd, status);
}

inline void maxpool_check_k3(global const int *ip, size_t plane, long h,
                             long4 io, long4 ks, long4 pd,
                             volatile global int *status) {
  const long sh = ks.s2, ph = pd.s0;
  if (h == 0) {
    for (long oh = 0; oh <= min(io.s2 - 1, ph / sh); oh++)
      maxpool_check_k3row(ip, plane, oh, io, ks, pd, status);
  } else if ((h + ph) % sh == 0 && (h + ph) / sh < io.s2) {
    maxpool_check_k3row(ip, plane, (h + ph) / sh, io, ks, pd, status);
  }
}

/* maxpool_bwd_row for maxpool2d_bwd_k3rows (3 wide windows of stride 2,
 * padding 1 along w, no dilation on either axis, W even from 16: the host
 * checks): the index check (maxpool_check_k3), then maxpool_bwd_vec3's
 * blocks over the whole row. */
POOL_INLINE void maxpool_bwd_k3row(global const real_t *dy,
                                   global const int *idx, global real_t *dx,
                                   size_t plane, long h, long4 io, long4 ks,
                                   long4 pd, volatile global int *status,
                                   int nt) {
  const size_t row = plane * (size_t)io.s0 + (size_t)h;
  const long W = io.s1;
  const size_t out0 = plane * (size_t)(io.s2 * io.s3);
  global const int *ip = idx + out0;
  global const real_t *gp = dy + out0;
  maxpool_check_k3(ip, plane, h, io, ks, pd, status);
  const long oh0 = max(0L, pool_cdiv(h + pd.s0 - (ks.s0 - 1) * pd.s2, ks.s2));
  const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
  global real_t *dr = dx + row * (size_t)W;
  POOL_BLOCKS(m, 0, W / 2 - 8, 8) {
    maxpool_bwd_vec3(ip, gp, dr, h, m, oh0, oh1, io, nt);
    if (m == W / 2 - 8) break;
  }
}

/* Max forward, 3 wide windows of stride 2, padding 1 along w (no
 * dilation), W = 2 OW from 16 (the host checks): blocks of 8 outputs from
 * ow0 = 0, 8, ... (the last moved back to end with the row), so the
 * stores of values and indices fall on whole, aligned vectors (non-
 * temporal where nt).  Lane l's taps are columns 2 (ow0 + l) - 1, + 0,
 * + 1: of the 16 inputs from 2 ow0, input 2 ow0 - 1 and the first 7 odd
 * lanes (in block 0, lane 0's is the padding: -inf, never taken, and 0 in
 * the NaN sum), then the even lanes, then the odd ones.  maxpool_vec's test (max from -inf,
 * index from the first tap inside the image, !(v <= m)); a block that met
 * a NaN (or inf - inf) is done again by the exact rule (maxpool_k3_exact).
 * Two blocks at once: two chains of compares. */
inline void maxpool_k3_taps(global const real_t *xr, long ow0, float8 *t0,
                            float8 *s0, float8 *t1, float8 *t2) {
  /* two halves: PoCL warns of float16 returns on AVX2 */
  const float8 lo = POOL_LDN(8, xr, 2 * ow0), hi = POOL_LDN(8, xr, 2 * ow0 + 8);
  *t1 = (float8)(lo.s0246, hi.s0246);
  *t2 = (float8)(lo.s1357, hi.s1357);
  if (ow0 > 0) {
    *t0 = (float8)(LOAD(xr, 2 * ow0 - 1), (*t2).s0123, (*t2).s456);
    *s0 = *t0;
  } else {
    *t0 = (float8)(-INFINITY, (*t2).s0123, (*t2).s456);
    *s0 = (float8)(0.0f, (*t2).s0123, (*t2).s456);
  }
}

/* Whether some lane of v may be NaN: their sum is (a NaN lane, or
 * infinities of both signs; the callers then test the lanes).  PoCL
 * compiles any(isnan(v)) to a chain of a test and a branch per pair of
 * lanes, this to three vector adds and one test. */
inline int pool_some_nan4(float4 v) {
  const float2 a = v.lo + v.hi;
  return isnan(a.x + a.y);
}
inline int pool_some_nan8(float8 v) { return pool_some_nan4(v.lo + v.hi); }

/* maxpool_k3_taps for stride 1 along w (W = OW): the taps of outputs ow0
 * .. ow0 + 7 are columns ow0 + l - 1, + 0, + 1, one 8-float load and a
 * scalar at each end; the padding at either end is -inf in t0 / t2 and 0
 * in s0 / s2 (the NaN sums). */
inline void maxpool_k3s1_taps(global const real_t *xr, long ow0, long W,
                              float8 *t0, float8 *s0, float8 *t1, float8 *t2,
                              float8 *s2) {
  *t1 = POOL_LDN(8, xr, ow0);
  const float l = ow0 > 0 ? LOAD(xr, ow0 - 1) : -INFINITY;
  const float r = ow0 + 8 < W ? LOAD(xr, ow0 + 8) : -INFINITY;
  *t0 = (float8)(l, (*t1).s012, (*t1).s3456);
  *s0 = (float8)(ow0 > 0 ? l : 0.0f, (*t1).s012, (*t1).s3456);
  *t2 = (float8)((*t1).s123, (*t1).s4567, r);
  *s2 = (float8)((*t1).s123, (*t1).s4567, ow0 + 8 < W ? r : 0.0f);
}

/* maxpool_k3_pair's fallback for the block from ow0 (stride 1, W =
 * OW): the exact rule, outputs 0 and OW - 1 scalar and the rest in
 * vectors, as maxpool2d_fwd_rows converts them. */
inline void maxpool_k3s1_exact(global const real_t *xp, global real_t *yr,
                               global int *ir, long ow0, long hs, long4 io,
                               long4 ks, long4 pd) {
  const long OW = io.s3, a = max(ow0, 1L), b = min(ow0 + 8, OW - 1);
  for (int k = 0; k < 2; k++) { /* outputs [a, b): 6 to 8 of them */
    const long o = k ? b - 4 : a;
    float4 m;
    int4 mi;
    maxpool_chain4(xp, o - 1, hs, io, ks, pd, &m, &mi);
    POOL_STN(4, m, yr, o);
    vstore4(mi, 0, ir + o);
  }
  if (ow0 == 0) maxpool_fwd_cols(xp, yr, ir, 0, 1, hs, io, ks, pd);
  if (ow0 + 8 >= OW) maxpool_fwd_cols(xp, yr, ir, OW - 1, OW, hs, io, ks, pd);
}

#define MAXPOOL_K3_TAP(m, mi, nan, v, sv, t)                                 \
  {                                                                          \
    const int8 k_ = !((v) <= (m));                                           \
    m = select(m, v, k_);                                                    \
    mi = select(mi, t, k_);                                                  \
    nan += (sv);                                                             \
  }

/* maxpool_k3_pair's fallback for the block from ow0: maxpool_chain's
 * exact rule, converted as maxpool2d_fwd_rows converts each output (its
 * vector blocks from output 1, its scalar output 0: F16 NaNs keep their
 * bits). */
inline void maxpool_k3_exact(global const real_t *xp, global real_t *yr,
                             global int *ir, long ow0, long hs, long4 io,
                             long4 ks, long4 pd) {
  if (ow0 > 0) {
    float8 m;
    int8 mi;
    maxpool_chain8(xp, 2 * ow0 - 1, hs, io, ks, pd, &m, &mi);
    POOL_STN(8, m, yr, ow0);
    vstore8(mi, 0, ir + ow0);
    return;
  }
  for (long o = 1; o <= 4; o += 3) { /* outputs 1 to 4, 4 to 7 */
    float4 m;
    int4 mi;
    maxpool_chain4(xp, 2 * o - 1, hs, io, ks, pd, &m, &mi);
    POOL_STN(4, m, yr, o);
    vstore4(mi, 0, ir + o);
  }
  maxpool_fwd_cols(xp, yr, ir, 0, 1, hs, io, ks, pd);
}

inline void maxpool_k3_pair(global const real_t *xp, global real_t *yr,
                            global int *ir, long oa, long ob, long hs,
                            long4 io, long4 ks, long4 pd, int nt) {
  const long W = io.s1, s = ks.s3;
  float8 ma = -INFINITY, mb = -INFINITY, na = 0.0f, nb = 0.0f;
  int8 ia = -1, ib = -1;
  int first = 1;
  /* first tap's column less the window's: 1, but 0 for the padding */
  const int8 one = 1, pad0 = (int8)(0, 1, 1, 1, 1, 1, 1, 1);
  const int8 fa = oa > 0 ? one : pad0, fb = ob > 0 ? one : pad0;
  for (long i = 0; i < ks.s0; i++) {
    const long h = hs + i * pd.s2;
    if (h < 0 || h >= io.s0) continue;
    global const real_t *xr = xp + h * W;
    const int8 ca = (int)(h * W + s * oa) + (int)s * POOL_LANES8,
               cb = (int)(h * W + s * ob) + (int)s * POOL_LANES8;
    if (first) { /* the first tap inside the image */
      ia = ca - fa;
      ib = cb - fb;
      first = 0;
    }
    float8 a0, as0, a1, a2, as2, b0, bs0, b1, b2, bs2;
    if (s == 2) {
      maxpool_k3_taps(xr, oa, &a0, &as0, &a1, &a2);
      maxpool_k3_taps(xr, ob, &b0, &bs0, &b1, &b2);
      as2 = a2;
      bs2 = b2;
    } else {
      maxpool_k3s1_taps(xr, oa, W, &a0, &as0, &a1, &a2, &as2);
      maxpool_k3s1_taps(xr, ob, W, &b0, &bs0, &b1, &b2, &bs2);
    }
    MAXPOOL_K3_TAP(ma, ia, na, a0, as0, ca - 1);
    MAXPOOL_K3_TAP(mb, ib, nb, b0, bs0, cb - 1);
    MAXPOOL_K3_TAP(ma, ia, na, a1, a1, ca);
    MAXPOOL_K3_TAP(mb, ib, nb, b1, b1, cb);
    MAXPOOL_K3_TAP(ma, ia, na, a2, as2, ca + 1);
    MAXPOOL_K3_TAP(mb, ib, nb, b2, bs2, cb + 1);
  }
  const int nan = pool_some_nan8(na + nb);
  if (nan && any(isnan(na))) {
    if (s == 2)
      maxpool_k3_exact(xp, yr, ir, oa, hs, io, ks, pd);
    else
      maxpool_k3s1_exact(xp, yr, ir, oa, hs, io, ks, pd);
  } else {
    pool_st8(ma, yr, oa, nt);
    pool_st8i(ia, ir, oa, nt);
  }
  if (nan && any(isnan(nb))) {
    if (s == 2)
      maxpool_k3_exact(xp, yr, ir, ob, hs, io, ks, pd);
    else
      maxpool_k3s1_exact(xp, yr, ir, ob, hs, io, ks, pd);
  } else {
    pool_st8(mb, yr, ob, nt);
    pool_st8i(ib, ir, ob, nt);
  }
}

/* Output row oh of plane `plane` (N C OH rows) by maxpool_k3_pair. */
POOL_INLINE void maxpool_fwd_k3row(global const real_t *x, global real_t *y,
                                   global int *idx, size_t plane, long oh,
                                   long4 io, long4 ks, long4 pd, int nt) {
  const size_t row = plane * (size_t)io.s2 + (size_t)oh;
  global const real_t *xp = x + plane * (size_t)(io.s0 * io.s1);
  global real_t *yr = y + row * (size_t)io.s3;
  global int *ir = idx + row * (size_t)io.s3;
  const long hs = oh * ks.s2 - pd.s0, l = io.s3 - 8;
  long o = 0;
  for (; o + 8 < l; o += 16)
    maxpool_k3_pair(xp, yr, ir, o, o + 8, hs, io, ks, pd, nt);
  maxpool_k3_pair(xp, yr, ir, min(o, l), l, hs, io, ks, pd, nt);
}

/* ---- CPU variant: max pooling of 2 x 2 windows, stride 2 ----------------
 * Windows that tile the image (2 x 2, stride 2, no padding or dilation,
 * H = 2 OH, W = 2 OW, OW >= 4; the host checks, max_k2rows): every input
 * lies in exactly one window, so a block of N (8, or 4 on rows of 4 to 7
 * outputs) outputs from ow0 reads or writes the 2 N x 2 inputs from
 * (2 oh, 2 ow0) with no edge, padding or division.  The row kernels'
 * general loops spent more time than these four taps (maxpool_vec8x2 at
 * 47-53% of STREAM on 64 x 32 x 28 x 28); blocks run from ow0 = 0 by N,
 * the last moved back to end with the row (it stores the same values
 * again). */

/* The forward's block: taps in maxpool_window's order (row 2 oh's even
 * and odd columns, then row 2 oh + 1's) under maxpool_vec's test (max
 * from -inf, index from the first tap, !(v <= m)); a block whose taps
 * add up to NaN (a NaN, or inf - inf) takes maxpool_chain's exact rule
 * before it is stored. */
#define MAXPOOL_K2_TAP(N, m, mi, nan, v, t)                                  \
  {                                                                          \
    const int##N k_ = !((v) <= (m));                                         \
    m = select(m, v, k_);                                                    \
    mi = select(mi, t, k_);                                                  \
    nan += (v);                                                              \
  }
#define MAXPOOL_K2(N, H)                                                     \
  POOL_INLINE void maxpool_k2_block##N(global const real_t *xp,           \
                                        global real_t *yr, global int *ir,   \
                                        long oh, long ow0, long4 io,         \
                                        long4 ks, long4 pd, int nt) {        \
    const long W = io.s1;                                                    \
    global const real_t *xr = xp + 2 * oh * W + 2 * ow0;                     \
    const float##N a0 = POOL_LDN(N, xr, 0), a1 = POOL_LDN(N, xr, N);         \
    const float##N b0 = POOL_LDN(N, xr, W), b1 = POOL_LDN(N, xr, W + N);     \
    const int##N c = (int)(2 * oh * W + 2 * ow0) + 2 * POOL_LANES##N;        \
    float##N m = (float##N)(a0.even, a1.even), nan = m;                      \
    int##N mi = c;                                                           \
    MAXPOOL_K2_TAP(N, m, mi, nan, ((float##N)(a0.odd, a1.odd)), c + 1)       \
    MAXPOOL_K2_TAP(N, m, mi, nan, ((float##N)(b0.even, b1.even)),            \
                   c + (int)W)                                               \
    MAXPOOL_K2_TAP(N, m, mi, nan, ((float##N)(b0.odd, b1.odd)),              \
                   c + (int)W + 1)                                           \
    if (pool_some_nan##N(nan) && any(isnan(nan)))                            \
      maxpool_chain##N(xp, 2 * ow0, 2 * oh, io, ks, pd, &m, &mi);            \
    H(m, mi, yr, ir, ow0, nt);                                               \
  }
inline void pool_st8_both(float8 m, int8 mi, global real_t *yr,
                          global int *ir, long o, int nt) {
  pool_st8(m, yr, o, nt);
  pool_st8i(mi, ir, o, nt);
}
inline void pool_st4_both(float4 m, int4 mi, global real_t *yr,
                          global int *ir, long o, int nt) {
  POOL_STN(4, m, yr, o);
  vstore4(mi, 0, ir + o);
}
MAXPOOL_K2(8, pool_st8_both)
MAXPOOL_K2(4, pool_st4_both)

/* Output row `oh` of plane `plane` (N C OH rows). */
POOL_INLINE void maxpool_fwd_k2row(global const real_t *x, global real_t *y,
                                   global int *idx, size_t plane, long oh,
                                   long4 io, long4 ks, long4 pd, int nt) {
  const size_t row = plane * (size_t)io.s2 + (size_t)oh;
  global const real_t *xp = x + plane * (size_t)(io.s0 * io.s1);
  global real_t *yr = y + row * (size_t)io.s3;
  global int *ir = idx + row * (size_t)io.s3;
  const long OW = io.s3;
  if (OW < 8) {
    maxpool_k2_block4(xp, yr, ir, oh, 0, io, ks, pd, nt);
    maxpool_k2_block4(xp, yr, ir, oh, OW - 4, io, ks, pd, nt);
    return;
  }
  POOL_BLOCKS(o, 0, OW - 8, 8) {
    maxpool_k2_block8(xp, yr, ir, oh, o, io, ks, pd, nt);
    if (o == OW - 8) break;
  }
}

/* Two rows of lanes e and o interleaved (e0 o0 e1 o1 ...) to dr + w. */
inline void pool_st_pairs8(float8 e, float8 o, global real_t *dr, long w,
                           int nt) {
  const float16 eo = (float16)(e, o);
  pool_st8x2(eo.s08192a3b, eo.s4c5d6e7f, dr, w, nt);
}
inline void pool_st_pairs4(float4 e, float4 o, global real_t *dr, long w,
                           int nt) {
  POOL_STN(8, ((float8)(e, o)).s04152637, dr, w);
}
/* The backward's block: dx of the 2 N x 2 inputs under outputs ow0 ..
 * ow0 + N - 1 of output row oh (index row ir, dy row gr, dx row dr = 2 oh
 * of the plane): 0 + dy where the output's index names the input, else
 * 0 + 0 (maxpool_bwd_cols's sum: one output's window holds each input).
 * Returns the lanes whose index names one of the window's four inputs. */
#define MAXPOOL_K2_BWD(N)                                                    \
  inline int##N maxpool_k2_bwd##N(global const int *ir,                      \
                                  global const real_t *gr,                   \
                                  global real_t *dr, long ow0, int q0,       \
                                  long W, int nt) {                          \
    const int##N t = vload##N(0, ir + ow0);                                  \
    const float##N g = POOL_LDN(N, gr, ow0), z = 0.0f;                       \
    const int##N c = q0 + (int)(2 * ow0) + 2 * POOL_LANES##N,                \
                 d = c + (int)W;                                             \
    pool_st_pairs##N(z + select(z, g, t == c), z + select(z, g, t == c + 1), \
                     dr, 2 * ow0, nt);                                       \
    pool_st_pairs##N(z + select(z, g, t == d), z + select(z, g, t == d + 1), \
                     dr + W, 2 * ow0, nt);                                   \
    return t == c | t == c + 1 | t == d | t == d + 1;                        \
  }
MAXPOOL_K2_BWD(8)
MAXPOOL_K2_BWD(4)

/* Output row `oh` of plane `plane` (N C OH rows): dx rows 2 oh and 2 oh +
 * 1, then the row's indices checked (maxpool_check_cols reports the bad
 * ones; their dy went nowhere). */
POOL_INLINE void maxpool_bwd_k2row(global const real_t *dy,
                                   global const int *idx, global real_t *dx,
                                   size_t plane, long oh, long4 io, long4 ks,
                                   long4 pd, volatile global int *status,
                                   int nt) {
  const long W = io.s1, OW = io.s3;
  const size_t out0 = plane * (size_t)(io.s2 * OW);
  global const int *ir = idx + out0 + oh * OW;
  global const real_t *gr = dy + out0 + oh * OW;
  global real_t *dr = dx + plane * (size_t)(io.s0 * W) + 2 * oh * W;
  const int q0 = (int)(2 * oh * W);
  int ok;
  if (OW >= 8) {
    int8 ok8 = -1;
    POOL_BLOCKS(o, 0, OW - 8, 8) {
      ok8 &= maxpool_k2_bwd8(ir, gr, dr, o, q0, W, nt);
      if (o == OW - 8) break;
    }
    ok = all(ok8);
  } else {
    ok = all(maxpool_k2_bwd4(ir, gr, dr, 0, q0, W, nt) &
             maxpool_k2_bwd4(ir, gr, dr, OW - 4, q0, W, nt));
  }
  if (!ok)
    maxpool_check_cols(idx + out0, plane, oh, 0, OW, io, ks, pd, status);
}

/* ---- CPU variant: average backward of 3-wide windows of stride 2 --------
 * Along w, windows 3 wide of stride 2 and padding 1 on rows of W = 2 OW
 * (OW >= 8; the host checks, avg_k3rows): as in maxpool_bwd_vec3, the
 * 16 inputs from 2 m0 under outputs m0 .. m0 + 7 are lane l's even input,
 * in output m0 + l's window only, and its odd input, in m0 + l's and m0 +
 * l + 1's (none past the row's last output: +0).  Each adds dy / divisor
 * of those outputs, output rows then outputs in order: avg_grad's terms
 * in its order, the same bits.  The row kernel took one input at a time
 * (2% of STREAM at 64x32x28, 3x3 stride 2, padding 1). */
inline void avgpool_bwd_vec3(global const real_t *gp, global real_t *dr,
                             long m0, long oh0, long oh1, long4 io, long4 ks,
                             long4 pd, int cip, int divisor, int nt) {
  const long OW = io.s3;
  const int W = (int)io.s1, last = m0 + 8 >= OW;
  float8 e = 0.0f, o = 0.0f;
  for (long oh = oh0; oh <= oh1; oh++) {
    long h0, h1;
    const int ph = (int)avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1),
              kh = (int)(h1 - h0);
    global const real_t *gr = gp + oh * OW + m0;
    const float8 g =
        POOL_LDN(8, gr, 0) / avg_lane_div8(m0, 2, ph, kh, W, 3, 1, cip,
                                           divisor);
    /* output m0 + 8's term, as its lane would have it */
    const float next =
        last ? 0.0f
             : LOAD(gr, 8) / avg_lane_div8(m0 + 8, 2, ph, kh, W, 3, 1, cip,
                                           divisor).s0;
    e += g;
    o += g;
    o += (float8)(g.s123, g.s4567, next);
  }
  pool_st_pairs8(e, o, dr, 2 * m0, nt);
}

/* Input row `h` of plane `plane` (N C H rows) by avgpool_bwd_vec3. */
POOL_INLINE void avgpool_bwd_k3row(global const real_t *dy, global real_t *dx,
                                   size_t plane, long h, long4 io, long4 ks,
                                   long4 pd, int cip, int divisor, int nt) {
  const long OW = io.s3;
  global const real_t *gp = dy + plane * (size_t)(io.s2 * OW);
  const long oh0 = max(0L, pool_cdiv(h + pd.s0 - ks.s0 + 1, ks.s2));
  const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
  global real_t *dr = dx + (plane * (size_t)io.s0 + (size_t)h) * io.s1;
  POOL_BLOCKS(m, 0, OW - 8, 8) {
    avgpool_bwd_vec3(gp, dr, m, oh0, oh1, io, ks, pd, cip, divisor, nt);
    if (m == OW - 8) break;
  }
}

/* The forward of the same windows (W = 2 OW, OW >= 8): output row `oh`
 * of plane `plane` in blocks of 8 outputs from ow0, the last moved back.
 * Lane l's taps are inputs 2 (ow0 + l) - 1, + 0, + 1 of each input row of
 * the window (maxpool_k3_taps; the padding left of input 0 adds +0, which
 * leaves the sum avgpool_at takes without it), then one division. */
POOL_INLINE void avgpool_fwd_k3row(global const real_t *x, global real_t *y,
                                   size_t plane, long oh, long4 io, long4 ks,
                                   long4 pd, int cip, int divisor, int nt) {
  const long W = io.s1, OW = io.s3;
  global const real_t *xp = x + plane * (size_t)(io.s0 * W);
  global real_t *yr = y + (plane * (size_t)io.s2 + (size_t)oh) * OW;
  long h0, h1;
  const int ph = (int)avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  POOL_BLOCKS(o, 0, OW - 8, 8) {
    float8 acc = 0.0f;
    for (long h = h0; h < h1; h++) {
      float8 t0, s0, t1, t2;
      maxpool_k3_taps(xp + h * W, o, &t0, &s0, &t1, &t2);
      acc += s0;
      acc += t1;
      acc += t2;
    }
    pool_st8(acc / avg_lane_div8(o, 2, ph, (int)(h1 - h0), (int)W, 3, 1, cip,
                                 divisor),
             yr, o, nt);
    if (o == OW - 8) break;
  }
}

/* ---- CPU variant: adaptive pooling to 1 x 1 ------------------------------
 * The one bin is the whole plane.  The element kernel added it in one
 * chain, an add's latency per element (0.23x the OpenMP peer at 56 x 56);
 * here a work-item adds its plane in 4 float8 chains (lane l of chain c:
 * the elements 32 b + 8 c + l), the 8-element blocks left into the first,
 * the chains and lanes in a fixed tree, then the last elements in order:
 * an order fixed by the area, the same bits run to run (neither the GPU
 * variant's tree nor the element kernel's chain).  The backward writes 0
 * + dy / area, the gathers' value, over the plane in float8 stores. */
inline float adaptive_plane_sum(global const real_t *xp, size_t area) {
  float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  size_t i = 0;
  for (; i + 32 <= area; i += 32) {
    a0 += POOL_LDN(8, xp, i);
    a1 += POOL_LDN(8, xp, i + 8);
    a2 += POOL_LDN(8, xp, i + 16);
    a3 += POOL_LDN(8, xp, i + 24);
  }
  for (; i + 8 <= area; i += 8) a0 += POOL_LDN(8, xp, i);
  float s = rumus_hsum8((a0 + a1) + (a2 + a3));
  for (; i < area; i++) s += LOAD(xp, i);
  return s;
}

inline void adaptive_plane_fill(global real_t *dp, size_t area, float v) {
  const float8 v8 = v;
  size_t i = 0;
  for (; i + 8 <= area; i += 8) POOL_STN(8, v8, dp, i);
  for (; i < area; i++) STORE(v, dp, i);
}

/* Adaptive: when OH <= H and OW <= W (pooling, not upsampling) an input
 * lies in at most two bins per axis (bins are at least one input long
 * and overlap by at most one).  The row's bins (oh, height) are found
 * once; the column's two candidate bins slide along w, each bin's bounds
 * computed once per row.  Upsampling falls back to the element kernel. */
POOL_INLINE void adaptive_bwd_row(global const real_t *dy, global real_t *dx,
                                  size_t plane, long h, long4 io) {
  const long H = io.s0, W = io.s1, OH = io.s2, OW = io.s3;
  const size_t row = plane * (size_t)H + (size_t)h;
  if (OH > H || OW > W) {
    for (long w = 0; w < W; w++)
      adaptive_bwd_item(dy, dx, row * (size_t)W + (size_t)w, io);
    return;
  }
  global const real_t *gp = dy + plane * (size_t)(OH * OW);
  long bo[2], bh[2];
  int nb = 0;
  for (long oh = h * OH / H; oh < pool_cdiv((h + 1) * OH, H) && nb < 2;
       oh++) {
    const long h0 = ada_lo(oh, H, OH), h1 = ada_hi(oh, H, OH);
    if (h < h0 || h >= h1) continue;
    bo[nb] = oh;
    bh[nb++] = h1 - h0;
  }
  long a = 0, alo = 0, ahi = ada_hi(0, W, OW);      /* first bin a */
  long nlo = OW > 1 ? ada_lo(1, W, OW) : W, nhi = 0; /* bin a + 1 */
  if (OW > 1) nhi = ada_hi(1, W, OW);
  global real_t *dr = dx + row * (size_t)W;
  for (long w = 0; w < W;) {
    while (ahi <= w) { /* slide: bin a no longer holds w */
      a++;
      alo = nlo;
      ahi = nhi;
      nlo = a + 1 < OW ? ada_lo(a + 1, W, OW) : W;
      nhi = a + 1 < OW ? ada_hi(a + 1, W, OW) : W;
    }
    const int two = nlo <= w; /* bin a + 1 holds w too */
    float s = 0.0f;
    for (int k = 0; k < nb; k++) {
      global const real_t *gr = gp + bo[k] * OW;
      s += LOAD(gr, a) / (float)(bh[k] * (ahi - alo));
      if (two) s += LOAD(gr, a + 1) / (float)(bh[k] * (nhi - nlo));
    }
    /* The inputs up to the next change of bins share s. */
    const long end = two ? ahi : min(ahi, nlo);
    for (; w < end; w++) STORE(s, dr, w);
  }
}

/* ---- GPU variant: backwards with divisions by multiplication ------------
 * The element kernels above spend most of their instructions on about six
 * 32-bit divisions per input element (plane, row, the window bounds on
 * each axis; the index check two more), each a few dozen instructions on a
 * GPU: max and average pooling's backwards ran at 6-7% of the copy
 * bandwidth on the H200.  When every index fits in 32 bits (the host
 * checks) the _q kernels divide by the same divisors through magic
 * numbers the host computes once per call (Granlund and Montgomery's
 * round-up method: n / d = (t + ((n - t) >> s1)) >> s2, t = mul_hi(m,
 * n), exact for every 32-bit n), and keep the element kernels' terms and
 * order: the same bits.  Lane k of (mg, sv) is divisor k: 0 the input
 * plane's area H W, 1 W, 2 sh, 3 sw, 4 OW; sv holds s1 | s2 << 8. */
#define PQ(n, k) pool_qdiv((n), mg.s##k, sv.s##k)

inline uint pool_qdiv(uint n, uint m, uint s) {
  const uint t = mul_hi(m, n);
  return (t + ((n - t) >> (s & 0xffu))) >> (s >> 8);
}

/* pool_index_ok with t and j in 32 bits. */
inline int pool_index_ok_q(int t, uint j, long4 io, long4 ks, long4 pd,
                           uint8 mg, uint8 sv) {
  const uint W = (uint)io.s1, OW = (uint)io.s3;
  if (t < 0 || (long)t >= io.s0 * io.s1 || pd.s2 != 1 || pd.s3 != 1)
    return pool_index_ok(t, (long)j, io, ks, pd); /* rare: -1, dilation */
  const uint oh = PQ(j, 4), ow = j - oh * OW;
  const int hs = (int)oh * (int)ks.s2 - (int)pd.s0;
  const int ws = (int)ow * (int)ks.s3 - (int)pd.s1;
  const uint th = PQ((uint)t, 1);
  const int a = (int)th - hs, b = (int)((uint)t - th * W) - ws;
  return a >= 0 && b >= 0 && a < (int)ks.s0 && b < (int)ks.s1;
}

/* The output range [*o0, *o1] of one axis whose windows (k taps d apart,
 * stride s, padding p; lane k of the magic numbers) can hold input h:
 * o s in [h + p - (k - 1) d, h + p], clipped to [0, n). */
#define PQ_RANGE(h, p, kk, d, s, n, lane, o0, o1)                            \
  do {                                                                       \
    const int a_ = (int)(h) + (int)(p) - ((int)(kk) - 1) * (int)(d);         \
    o0 = a_ <= 0 ? 0 : (int)PQ((uint)a_ + (uint)(s) - 1u, lane);             \
    o1 = min((int)(n) - 1, (int)PQ((uint)(h) + (uint)(p), lane));            \
  } while (0)

inline void maxpool_bwd_q(global const real_t *dy, global const int *idx,
                          global real_t *dx, uint e, long4 io, long4 ks,
                          long4 pd, volatile global int *status, uint8 mg,
                          uint8 sv) {
  const uint area_in = (uint)(io.s0 * io.s1), area_out = (uint)(io.s2 * io.s3);
  const uint plane = PQ(e, 0), q = e - plane * area_in;
  global const int *ip = idx + (size_t)plane * area_out;
  global const real_t *gp = dy + (size_t)plane * area_out;
  for (uint j = q; j < area_out; j += area_in)
    if (!pool_index_ok_q(ip[j], j, io, ks, pd, mg, sv))
      rumus_report(status, DEVERR_POOL_INDEX, ip[j],
                   (int)((size_t)plane * area_out + j));
  const uint h = PQ(q, 1), w = q - h * (uint)io.s1;
  int oh0, oh1, ow0, ow1;
  PQ_RANGE(h, pd.s0, ks.s0, pd.s2, ks.s2, io.s2, 2, oh0, oh1);
  PQ_RANGE(w, pd.s1, ks.s1, pd.s3, ks.s3, io.s3, 3, ow0, ow1);
  const int dilated = pd.s2 != 1 || pd.s3 != 1;
  float s = 0.0f;
  for (int oh = oh0; oh <= oh1; oh++) {
    if (dilated && ((int)h + (int)pd.s0 - oh * (int)ks.s2) % (int)pd.s2 != 0)
      continue;
    for (int ow = ow0; ow <= ow1; ow++) {
      if (dilated && ((int)w + (int)pd.s1 - ow * (int)ks.s3) % (int)pd.s3 != 0)
        continue;
      const int j = oh * (int)io.s3 + ow;
      if (ip[j] == (int)q) s += LOAD(gp, j);
    }
  }
  STORE(s, dx, e);
}

inline void avgpool_bwd_q(global const real_t *dy, global real_t *dx, uint e,
                          long4 io, long4 ks, long4 pd, int cip, int divisor,
                          uint8 mg, uint8 sv) {
  const uint area_in = (uint)(io.s0 * io.s1);
  const uint plane = PQ(e, 0), q = e - plane * area_in;
  global const real_t *gp = dy + (size_t)plane * (size_t)(io.s2 * io.s3);
  const uint h = PQ(q, 1), w = q - h * (uint)io.s1;
  int oh0, oh1, ow0, ow1;
  PQ_RANGE(h, pd.s0, ks.s0, 1, ks.s2, io.s2, 2, oh0, oh1);
  PQ_RANGE(w, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, ow0, ow1);
  float s = 0.0f;
  for (int oh = oh0; oh <= oh1; oh++) {
    long h0, h1, w0, w1;
    const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
    for (int ow = ow0; ow <= ow1; ow++) {
      const long pw = avg_axis(ow, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
      const float d =
          avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor);
      s += LOAD(gp, oh * (int)io.s3 + ow) / d;
    }
  }
  STORE(s, dx, e);
}

/* ---- GPU variant: backwards by row quads ---------------------------------
 * The element kernels above (and the _q ones) are latency-bound on a GPU:
 * each work-item writes one dx element after two or three dependent
 * memory round trips (its index check, then the indices of its windows,
 * then their dy), so too few bytes are in flight (max and average
 * backwards at 13-15% of the copy bandwidth on the H200, adaptive at 4%).
 * Here a work-item takes a quad: inputs w0 .. w0 + 3 (fewer at a row's
 * end) of one input row (plane, h), rows cut in ceil(W / 4) quads.  Its
 * plane, row and the output rows that hold h come from three divisions
 * by multiplication per quad; the candidate outputs are those of the
 * four inputs together (for 2 x 2 windows of stride 2, one or two
 * columns), each candidate's index and dy loaded once and unconditionally
 * (the loads are independent: issued together) and added to the lanes
 * whose window holds them: the same terms in the same order (oh, then
 * ow, ascending) as the element kernels, a lane adding +0 where they add
 * nothing (s is never -0: it starts at +0), so the same bits.  The quad
 * is stored as one aligned 4-wide access when W is a multiple of 4 and dx
 * is aligned (vec, from the host), else element by element.  Lanes of
 * (mg, sv): 0 quads per row, 1 W, 2 sh, 3 sw, 4 OW, 5 H, 6 OH (the lanes
 * pool_index_ok_q and PQ_RANGE use are the same as the _q kernels'). */

typedef struct {
  uint plane, h, w0, nw; /* nw: inputs of the quad (1-4) */
  size_t row;            /* plane H + h: the quad starts at row W + w0 */
} pool_quad;

inline pool_quad pool_quad_of(uint item, long4 io, uint8 mg, uint8 sv) {
  const uint H = (uint)io.s0, W = (uint)io.s1, nq = (W + 3u) / 4u;
  pool_quad r;
  const uint row = PQ(item, 0);
  r.w0 = (item - row * nq) * 4u;
  r.plane = PQ(row, 5);
  r.h = row - r.plane * H;
  r.nw = min(4u, W - r.w0);
  r.row = row;
  return r;
}

/* Stores the quad's sums s at dr (vec: one aligned access of 4). */
inline void pool_quad_store(global real_t *dr, float4 s, uint nw, int vec) {
  if (vec) {
    RUMUS_STOREA(RUMUS_STORAGE, 4, s, dr, 0);
    return;
  }
  STORE(s.s0, dr, 0);
  if (nw > 1) STORE(s.s1, dr, 1);
  if (nw > 2) STORE(s.s2, dr, 2);
  if (nw > 3) STORE(s.s3, dr, 3);
}

/* Adds v to the lanes i of s with sel.si set (+0 elsewhere). */
#define QUAD_ADD(s, v, sel)                                                  \
  do {                                                                       \
    (s).s0 += (sel).s0 ? (v) : 0.0f;                                         \
    (s).s1 += (sel).s1 ? (v) : 0.0f;                                         \
    (s).s2 += (sel).s2 ? (v) : 0.0f;                                         \
    (s).s3 += (sel).s3 ? (v) : 0.0f;                                         \
  } while (0)

/* Which lanes of a quad at w0 lie in the window of k columns starting at
 * ws (int4 of 0 / 1). */
inline int4 quad_in(int w0, int ws, int k) {
  const int a = w0 - ws;
  return (int4)((uint)a < (uint)k, (uint)(a + 1) < (uint)k,
                (uint)(a + 2) < (uint)k, (uint)(a + 3) < (uint)k);
}

/* Checks the indices quad u answers for: plane positions q .. q + nw - 1
 * and every H W after (as maxpool_bwd_q). */
inline void maxpool_check_quad(global const int *ip, pool_quad u, uint q,
                               long4 io, long4 ks, long4 pd,
                               volatile global int *status, uint8 mg,
                               uint8 sv) {
  const uint area_in = (uint)(io.s0 * io.s1), area_out = (uint)(io.s2 * io.s3);
  for (uint j0 = q; j0 < area_out; j0 += area_in)
    for (uint j = j0; j < j0 + u.nw && j < area_out; j++)
      if (!pool_index_ok_q(ip[j], j, io, ks, pd, mg, sv))
        rumus_report(status, DEVERR_POOL_INDEX, ip[j],
                     (int)((size_t)u.plane * area_out + j));
}

/* Max pooling without dilation: the quad's indices to check, then the
 * gather. */
inline void maxpool_bwd_quad(global const real_t *dy, global const int *idx,
                             global real_t *dx, uint item, long4 io, long4 ks,
                             long4 pd, volatile global int *status, int vec,
                             uint8 mg, uint8 sv) {
  const pool_quad u = pool_quad_of(item, io, mg, sv);
  const uint area_out = (uint)(io.s2 * io.s3);
  const uint q = u.h * (uint)io.s1 + u.w0;
  global const int *ip = idx + (size_t)u.plane * area_out;
  global const real_t *gp = dy + (size_t)u.plane * area_out;
  maxpool_check_quad(ip, u, q, io, ks, pd, status, mg, sv);
  int oh0, oh1, ow0, ow1, lo_, hi_;
  PQ_RANGE(u.h, pd.s0, ks.s0, 1, ks.s2, io.s2, 2, oh0, oh1);
  PQ_RANGE(u.w0, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, ow0, hi_);
  PQ_RANGE(u.w0 + u.nw - 1, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, lo_, ow1);
  (void)lo_;
  (void)hi_;
  const int OW = (int)io.s3;
  float4 s = (float4)(0.0f);
  for (int oh = oh0; oh <= oh1; oh++)
    for (int ow = ow0; ow <= ow1; ow++) {
      const int j = oh * OW + ow;
      const float g = LOAD(gp, j);
      /* The one lane an index can name, if its column is in the window
       * of ow (the lanes' own window tests, in fewer instructions). */
      const uint L = (uint)ip[j] - q;
      const uint ws = (uint)(ow * (int)ks.s3 - (int)pd.s1);
      const int hit = L < 4u && u.w0 + L - ws < (uint)ks.s1;
      QUAD_ADD(s, g, (int4)(hit ? (int)L : -1) == (int4)(0, 1, 2, 3));
    }
  pool_quad_store(dx + u.row * (size_t)io.s1 + u.w0, s, u.nw, vec);
}

/* The max backward of 3 x 3 windows, stride 2, padding 1 with W = 2 OW a
 * multiple of 4 (the ResNet stem): quad w0 = 4 m of row h lies in the
 * windows of columns 2 m (lanes 0, 1), 2 m + 1 (lanes 1-3) and 2 m + 2
 * (lane 3, when it exists) of rows h / 2 and, for h odd, (h + 1) / 2:
 * the generic quad's candidates and order, its +0 adds dropped where a
 * lane's window cannot hold the column (the same bits). */
inline void maxpool_bwd_k3s2(global const real_t *dy, global const int *idx,
                             global real_t *dx, uint item, long4 io, long4 ks,
                             long4 pd, volatile global int *status, int vec,
                             uint8 mg, uint8 sv) {
  const pool_quad u = pool_quad_of(item, io, mg, sv);
  const uint OW = (uint)io.s3, area_out = (uint)io.s2 * OW;
  const uint q = u.h * (uint)io.s1 + u.w0, ow = u.w0 / 2u;
  global const int *ip = idx + (size_t)u.plane * area_out;
  global const real_t *gp = dy + (size_t)u.plane * area_out;
  maxpool_check_quad(ip, u, q, io, ks, pd, status, mg, sv);
  const uint oh1 = min((uint)io.s2 - 1u, (u.h + 1u) / 2u);
  const int third = ow + 2u < OW; /* column 2 m + 2 exists */
  const int4 qs = (int)q + (int4)(0, 1, 2, 3);
  float4 s = (float4)(0.0f);
  for (uint oh = u.h / 2u; oh <= oh1; oh++) {
    const uint j = oh * OW + ow;
    const int t0 = ip[j], t1 = ip[j + 1], t2 = third ? ip[j + 2] : -1;
    const float g0 = LOAD(gp, j), g1 = LOAD(gp, j + 1);
    const float g2 = third ? LOAD(gp, j + 2) : 0.0f;
    s.s0 += t0 == qs.s0 ? g0 : 0.0f;
    s.s1 += t0 == qs.s1 ? g0 : 0.0f;
    s.s1 += t1 == qs.s1 ? g1 : 0.0f;
    s.s2 += t1 == qs.s2 ? g1 : 0.0f;
    s.s3 += t1 == qs.s3 ? g1 : 0.0f;
    s.s3 += t2 == qs.s3 ? g2 : 0.0f;
  }
  pool_quad_store(dx + u.row * (size_t)io.s1 + u.w0, s, u.nw, vec);
}

/* The candidates of one output row for a block (maxpool_bwd_k3s2b): the
 * indices and dy of columns ow, ow + 1 and (third) ow + 2 of row oh. */
typedef struct {
  int t0, t1, t2;
  float g0, g1, g2;
} pool_k3s2_row;

inline pool_k3s2_row pool_k3s2_row_at(global const int *ip,
                                      global const real_t *gp, uint j,
                                      int third) {
  pool_k3s2_row r;
  r.t0 = ip[j];
  r.t1 = ip[j + 1];
  r.t2 = third ? ip[j + 2] : -1;
  r.g0 = LOAD(gp, j);
  r.g1 = LOAD(gp, j + 1);
  r.g2 = third ? LOAD(gp, j + 2) : 0.0f;
  return r;
}

/* s plus one output row's candidates for the input quad at qs, in
 * maxpool_bwd_k3s2's order. */
inline float4 pool_k3s2_add(float4 s, pool_k3s2_row r, int4 qs) {
  s.s0 += r.t0 == qs.s0 ? r.g0 : 0.0f;
  s.s1 += r.t0 == qs.s1 ? r.g0 : 0.0f;
  s.s1 += r.t1 == qs.s1 ? r.g1 : 0.0f;
  s.s2 += r.t1 == qs.s2 ? r.g1 : 0.0f;
  s.s3 += r.t1 == qs.s3 ? r.g1 : 0.0f;
  s.s3 += r.t2 == qs.s3 ? r.g2 : 0.0f;
  return s;
}

/* 1 if t names an input of the window of output (oh, ow): rows 2 oh - 1
 * .. 2 oh + 1, columns 2 ow - 1 .. 2 ow + 1, inside the H x W plane (lane
 * 1 of (mg, sv): W). */
inline int pool_k3s2_ok(int t, uint oh, uint ow, uint H, uint W, uint8 mg,
                        uint8 sv) {
  if ((uint)t >= H * W) return 0;
  const uint ih = PQ((uint)t, 1), iw = (uint)t - ih * W;
  return ih + 1u - 2u * oh < 3u && iw + 1u - 2u * ow < 3u;
}

/* The same backward by blocks: work-item (plane, a, m) (lanes 0 W / 4 and
 * 6 A = the block rows per plane of (mg, sv)) writes dx rows 2 a and 2 a +
 * 1 at columns 4 m .. 4 m + 3 (those inside dx) from output rows a and a
 * + 1, columns 2 m .. 2 m + 2, and checks the indices of outputs (a, 2 m)
 * and (a, 2 m + 1), its own: each output's dy and index is read by two
 * work-items instead of three, each index checked once.  Row 2 a takes
 * output row a, row 2 a + 1 rows a and a + 1, as maxpool_bwd_k3s2's rows
 * do: the same sums, the same bits. */
inline void maxpool_bwd_k3s2b(global const real_t *dy, global const int *idx,
                              global real_t *dx, uint item, long4 io,
                              volatile global int *status, int vec,
                              uint8 mg, uint8 sv) {
  const uint H = (uint)io.s0, W = (uint)io.s1, OH = (uint)io.s2;
  const uint OW = (uint)io.s3, A = max((H + 1u) / 2u, OH);
  const uint rb = PQ(item, 0), m = item - rb * (W / 4u);
  const uint plane = PQ(rb, 6), a = rb - plane * A, ow = 2u * m;
  const uint area_out = OH * OW, q = 2u * a * W + 4u * m;
  global const int *ip = idx + (size_t)plane * area_out;
  global const real_t *gp = dy + (size_t)plane * area_out;
  global real_t *dp = dx + (size_t)plane * (size_t)(H * W);
  const int third = ow + 2u < OW;
  float4 s0 = (float4)(0.0f), s1 = (float4)(0.0f);
  if (a < OH) {
    const pool_k3s2_row r = pool_k3s2_row_at(ip, gp, a * OW + ow, third);
    if (!pool_k3s2_ok(r.t0, a, ow, H, W, mg, sv))
      rumus_report(status, DEVERR_POOL_INDEX, r.t0,
                   (int)((size_t)plane * area_out + a * OW + ow));
    if (!pool_k3s2_ok(r.t1, a, ow + 1u, H, W, mg, sv))
      rumus_report(status, DEVERR_POOL_INDEX, r.t1,
                   (int)((size_t)plane * area_out + a * OW + ow + 1u));
    s0 = pool_k3s2_add(s0, r, (int)q + (int4)(0, 1, 2, 3));
    s1 = pool_k3s2_add(s1, r, (int)(q + W) + (int4)(0, 1, 2, 3));
  }
  if (a + 1u < OH) {
    const pool_k3s2_row r =
        pool_k3s2_row_at(ip, gp, (a + 1u) * OW + ow, third);
    s1 = pool_k3s2_add(s1, r, (int)(q + W) + (int4)(0, 1, 2, 3));
  }
  if (2u * a < H) pool_quad_store(dp + q, s0, 4u, vec);
  if (2u * a + 1u < H) pool_quad_store(dp + q + W, s1, 4u, vec);
}

inline void avgpool_bwd_quad(global const real_t *dy, global real_t *dx,
                             uint item, long4 io, long4 ks, long4 pd, int cip,
                             int divisor, int vec, uint8 mg, uint8 sv) {
  const pool_quad u = pool_quad_of(item, io, mg, sv);
  global const real_t *gp = dy + (size_t)u.plane * (size_t)(io.s2 * io.s3);
  int oh0, oh1, ow0, ow1, lo_, hi_;
  PQ_RANGE(u.h, pd.s0, ks.s0, 1, ks.s2, io.s2, 2, oh0, oh1);
  PQ_RANGE(u.w0, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, ow0, hi_);
  PQ_RANGE(u.w0 + u.nw - 1, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, lo_, ow1);
  (void)lo_;
  (void)hi_;
  float4 s = (float4)(0.0f);
  for (int oh = oh0; oh <= oh1; oh++) {
    long h0, h1, w0, w1;
    const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
    for (int ow = ow0; ow <= ow1; ow++) {
      const long pw = avg_axis(ow, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
      const float d =
          avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor);
      const float v = LOAD(gp, oh * (int)io.s3 + ow) / d;
      const int4 sel = quad_in((int)u.w0, ow * (int)ks.s3 - (int)pd.s1,
                               (int)ks.s1);
      QUAD_ADD(s, v, sel);
    }
  }
  pool_quad_store(dx + u.row * (size_t)io.s1 + u.w0, s, u.nw, vec);
}

/* Adaptive bins: rows [floor(oh H / OH), ceil((oh + 1) H / OH)), the
 * candidates of row h [floor(h OH / H), ceil((h + 1) OH / H)) (the host
 * keeps (H + 1)(OH + 1) and (W + 1)(OW + 1) below 2^32). */
inline void adaptive_bwd_quad(global const real_t *dy, global real_t *dx,
                              uint item, long4 io, int vec, uint8 mg,
                              uint8 sv) {
  const pool_quad u = pool_quad_of(item, io, mg, sv);
  const uint H = (uint)io.s0, W = (uint)io.s1, OH = (uint)io.s2,
             OW = (uint)io.s3;
  global const real_t *gp = dy + (size_t)u.plane * (size_t)(OH * OW);
  const uint oh0 = PQ(u.h * OH, 5), oh1 = PQ((u.h + 1) * OH + H - 1, 5);
  const uint ow0 = PQ(u.w0 * OW, 1);
  const uint ow1 = PQ((u.w0 + u.nw) * OW + W - 1, 1);
  float4 s = (float4)(0.0f);
  for (uint oh = oh0; oh < oh1; oh++) {
    const uint h0 = PQ(oh * H, 6), h1 = PQ((oh + 1) * H + OH - 1, 6);
    if (u.h < h0 || u.h >= h1) continue;
    for (uint ow = ow0; ow < ow1; ow++) {
      const uint w0 = PQ(ow * W, 4), w1 = PQ((ow + 1) * W + OW - 1, 4);
      const float v =
          LOAD(gp, oh * OW + ow) / (float)((h1 - h0) * (w1 - w0));
      const int4 sel = quad_in((int)u.w0, (int)w0, (int)(w1 - w0));
      QUAD_ADD(s, v, sel);
    }
  }
  pool_quad_store(dx + u.row * (size_t)W + u.w0, s, u.nw, vec);
}

/* ---- GPU variant: 2 x 2 windows of stride 2 ----------------------------
 * The most common pooling (2 x 2, stride 2, no padding) on H even and W a
 * multiple of 4: windows tile the input, each input in exactly one.  A
 * work-item takes outputs ow = 2 p, 2 p + 1 of output row (plane, oh):
 * one read of their dy (and indices), and it owns the 2 x 4 block of dx
 * below them, two 4-wide stores (aligned when vec).  Each dx element is
 * 0 + its one term, as in the gathers: the same bits.  Lanes of (mg, sv):
 * 0 OW / 2, 6 OH.  The max backward checks the two indices it reads
 * (each index once, by its owner); an index outside its window adds
 * nothing. */

/* Stores the 4 values v at dr (vec: one aligned access). */
inline void pool_store4(global real_t *dr, float4 v, int vec) {
  if (vec) {
    RUMUS_STOREA(RUMUS_STORAGE, 4, v, dr, 0);
    return;
  }
  STORE(v.s0, dr, 0);
  STORE(v.s1, dr, 1);
  STORE(v.s2, dr, 2);
  STORE(v.s3, dr, 3);
}

/* The pair of work-item `item`: its first output o (in the output
 * tensor), its dx block's first element e, and the block's first input
 * q within its plane. */
typedef struct {
  size_t o, e;
  uint q, oh, p; /* p: the pair's (quad's) number in its output row */
} pool_pair;

inline pool_pair pool_pair_of(uint item, long4 io, uint8 mg, uint8 sv) {
  const uint W = (uint)io.s1;
  const uint row = PQ(item, 0), p = item - row * ((uint)io.s3 / 2u);
  const uint plane = PQ(row, 6), oh = row - plane * (uint)io.s2;
  pool_pair r;
  r.o = (size_t)row * (size_t)io.s3 + 2u * p;
  r.q = 2u * oh * W + 4u * p;
  r.e = (size_t)plane * (size_t)(io.s0 * io.s1) + r.q;
  r.oh = oh;
  r.p = p;
  return r;
}

/* 1 if index t is one of the 2 x 2 inputs at q, q + 1, q + W, q + W + 1. */
inline int pool_in_block(int t, uint q, uint W) {
  const uint a = (uint)t - q;
  return a == 0u || a == 1u || a == W || a == W + 1u;
}

inline void maxpool_bwd_k2(global const real_t *dy, global const int *idx,
                           global real_t *dx, uint item, long4 io,
                           volatile global int *status, int vec, uint8 mg,
                           uint8 sv) {
  const pool_pair u = pool_pair_of(item, io, mg, sv);
  const uint W = (uint)io.s1;
  const int t0 = idx[u.o], t1 = idx[u.o + 1];
  const float g0 = 0.0f + LOAD(dy, u.o), g1 = 0.0f + LOAD(dy, u.o + 1);
  const int4 c = (int)u.q + (int4)(0, 1, 2, 3);
  const int4 t = (int4)(t0, t0, t1, t1);
  const float4 g = (float4)(g0, g0, g1, g1), z = (float4)(0.0f);
  pool_store4(dx + u.e, select(z, g, t == c), vec);
  pool_store4(dx + u.e + W, select(z, g, t == c + (int)W), vec);
  if (!pool_in_block(t0, u.q, W))
    rumus_report(status, DEVERR_POOL_INDEX, t0, (int)u.o);
  if (!pool_in_block(t1, u.q + 2u, W))
    rumus_report(status, DEVERR_POOL_INDEX, t1, (int)(u.o + 1));
}

inline void avgpool_bwd_k2(global const real_t *dy, global real_t *dx,
                           uint item, long4 io, int divisor, int vec,
                           uint8 mg, uint8 sv) {
  const pool_pair u = pool_pair_of(item, io, mg, sv);
  const float d = divisor > 0 ? (float)divisor : 4.0f;
  const float g0 = 0.0f + LOAD(dy, u.o) / d;
  const float g1 = 0.0f + LOAD(dy, u.o + 1) / d;
  const float4 g = (float4)(g0, g0, g1, g1);
  pool_store4(dx + u.e, g, vec);
  pool_store4(dx + u.e + (size_t)io.s1, g, vec);
}

/* The forwards of 2 x 2 windows of stride 2 tiling the input, OW a
 * multiple of 4: a work-item takes outputs 4 p .. 4 p + 3 of output row
 * (plane, oh) (lanes 0 OW / 4 and 6 OH of (mg, sv)) and reads the 2 x 8
 * block of x under them, four 4-wide loads when vec (x, y and the indices
 * aligned to 4 elements), then stores 4 outputs (and indices) 4-wide.
 * Each output takes its taps in the element kernel's order (row 0: w, w
 * + 1; row 1: w, w + 1) with its compare or sum: the same bits. */

/* x[e .. e + 8) (one row of the block) as its even and odd columns: the
 * first and second tap of each of the 4 windows on that row. */
inline void pool_row8(global const real_t *x, size_t e, int vec,
                      float4 *even, float4 *odd) {
  float4 a, b;
  if (vec) {
    a = RUMUS_LOADA(RUMUS_STORAGE, 4, x, e);
    b = RUMUS_LOADA(RUMUS_STORAGE, 4, x, e + 4);
  } else {
    a = (float4)(LOAD(x, e), LOAD(x, e + 1), LOAD(x, e + 2), LOAD(x, e + 3));
    b = (float4)(LOAD(x, e + 4), LOAD(x, e + 5), LOAD(x, e + 6),
                 LOAD(x, e + 7));
  }
  *even = (float4)(a.even, b.even);
  *odd = (float4)(a.odd, b.odd);
}

/* The output quad of work-item `item`: first output o, the x block's
 * first element e and the block's first input q within its plane. */
inline pool_pair pool_oq2_of(uint item, long4 io, uint8 mg, uint8 sv) {
  const uint W = (uint)io.s1;
  const uint row = PQ(item, 0), p = item - row * ((uint)io.s3 / 4u);
  const uint plane = PQ(row, 6), oh = row - plane * (uint)io.s2;
  pool_pair r;
  r.o = (size_t)row * (size_t)io.s3 + 4u * p;
  r.q = 2u * oh * W + 8u * p;
  r.e = (size_t)plane * (size_t)(io.s0 * io.s1) + r.q;
  r.oh = oh;
  r.p = p;
  return r;
}

/* One tap of the max: v at index i replaces (m, mi) where the element
 * kernel's compare says so. */
inline void max_tap4(float4 v, int4 i, float4 *m, int4 *mi) {
  const int4 take = (v > *m) | isnan(v);
  *m = select(*m, v, take);
  *mi = select(*mi, i, take);
}

inline void maxpool_fwd_k2(global const real_t *x, global real_t *y,
                           global int *idx, uint item, long4 io, int vec,
                           uint8 mg, uint8 sv) {
  const pool_pair u = pool_oq2_of(item, io, mg, sv);
  const int W = (int)io.s1;
  float4 a, b, c, d;
  pool_row8(x, u.e, vec, &a, &b);
  pool_row8(x, u.e + (size_t)W, vec, &c, &d);
  const int4 ia = (int)u.q + (int4)(0, 2, 4, 6);
  float4 m = a; /* the first tap is always taken (mi < 0) */
  int4 mi = ia;
  max_tap4(b, ia + 1, &m, &mi);
  max_tap4(c, ia + W, &m, &mi);
  max_tap4(d, ia + W + 1, &m, &mi);
  pool_store4(y + u.o, m, vec);
  if (vec) {
    *(global int4 *)(idx + u.o) = mi;
    return;
  }
  idx[u.o] = mi.s0;
  idx[u.o + 1] = mi.s1;
  idx[u.o + 2] = mi.s2;
  idx[u.o + 3] = mi.s3;
}

inline void avgpool_fwd_k2(global const real_t *x, global real_t *y,
                           uint item, long4 io, int divisor, int vec,
                           uint8 mg, uint8 sv) {
  const pool_pair u = pool_oq2_of(item, io, mg, sv);
  float4 a, b, c, d;
  pool_row8(x, u.e, vec, &a, &b);
  pool_row8(x, u.e + (size_t)io.s1, vec, &c, &d);
  const float dv = divisor > 0 ? (float)divisor : 4.0f;
  const float4 s = ((((float4)(0.0f) + a) + b) + c) + d;
  pool_store4(y + u.o, s / dv, vec);
}

/* The max forward of 3 x 3 windows of stride 2 with padding 1 (the
 * ResNet stem), W even and OW = W / 2 a multiple of 4: a work-item takes
 * outputs 4 p .. 4 p + 3 of output row (plane, oh) (lanes as
 * maxpool_fwd_k2) and reads the 3 x 9 block of x under them once: per
 * row column 8 p - 1 and two 4-wide loads (when vec).  Taps in the
 * element kernel's order (rows 2 oh - 1 .. 2 oh + 1, columns left to
 * right) with its compare; rows outside the image and column -1 are
 * skipped: the same values and indices. */
inline void maxpool_fwd_k3s2(global const real_t *x, global real_t *y,
                             global int *idx, uint item, long4 io, int vec,
                             uint8 mg, uint8 sv) {
  const pool_pair u = pool_oq2_of(item, io, mg, sv); /* at (2 oh, 8 p) */
  const int W = (int)io.s1, H = (int)io.s0;
  const int h0 = 2 * (int)u.oh - 1, c0 = 8 * (int)u.p - 1;
  /* Lane 0's first column is -1 on the quad at the row's start. */
  const int4 in0 = (int4)(c0 >= 0 ? -1 : 0, -1, -1, -1);
  float4 m = (float4)(-INFINITY);
  int4 mi = (int4)(-1);
  for (int i = 0; i < 3; i++) {
    const int h = h0 + i;
    if (h < 0 || h >= H) continue;
    const size_t e = u.e + (size_t)((i - 1) * W); /* (h, 8 p) */
    float4 ev, od;
    pool_row8(x, e, vec, &ev, &od);
    const float left = c0 >= 0 ? LOAD(x, e - 1) : 0.0f;
    const int4 q = h * W + c0 + (int4)(0, 2, 4, 6); /* tap 0's index */
    /* tap j of lane l is column c0 + 2 l + j */
    const float4 v0 = (float4)(left, od.s0, od.s1, od.s2);
    int4 take = in0 & ((v0 > m) | isnan(v0) | (mi < 0));
    m = select(m, v0, take);
    mi = select(mi, q, take);
    take = (ev > m) | isnan(ev) | (mi < 0);
    m = select(m, ev, take);
    mi = select(mi, q + 1, take);
    max_tap4(od, q + 2, &m, &mi);
  }
  pool_store4(y + u.o, m, vec);
  if (vec) {
    *(global int4 *)(idx + u.o) = mi;
    return;
  }
  idx[u.o] = mi.s0;
  idx[u.o + 1] = mi.s1;
  idx[u.o + 2] = mi.s2;
  idx[u.o + 3] = mi.s3;
}

/* ---- GPU variant: forwards by strided output quads ----------------------
 * The element forwards wait on each of their kh kw loads in turn (a GPU
 * issues the next load after the compare that needs the last) and divide
 * twice per output.  Here a work-item takes 4 outputs WG apart, o + l WG
 * (l < 4) for o = 4 WG (item / WG) + item % WG: a warp's lanes still take
 * consecutive outputs (its loads coalesce as the element kernel's), and
 * each tap (i, j) is 4 independent loads in flight.  Each output's plane
 * and row come by multiplication (lanes 0 and 6 of (mg, sv): OW and OH;
 * the host keeps every output position below 2^32), and each lane visits
 * its taps in the element kernel's order with its compare or sum: the
 * same bits. */

inline uint4 pool_qdiv4(uint4 n, uint m, uint s) {
  const uint4 t = mul_hi((uint4)(m), n);
  return (t + ((n - t) >> (s & 0xffu))) >> (s >> 8);
}

/* The 4 outputs of work-item `item`, and their output rows (plane OH +
 * oh), planes, oh and ow. */
typedef struct {
  uint4 o, plane;
  int4 oh, ow;
} pool_oquad;

inline pool_oquad pool_oquad_of(uint item, uint n, long4 io, uint8 mg,
                                uint8 sv) {
  pool_oquad r;
  const uint t = item % (uint)WG;
  r.o = (item - t) * 4u + t + (uint4)(0u, 1u, 2u, 3u) * (uint)WG;
  /* Outputs past n (not stored) read the last one's window. */
  const uint4 o = min(r.o, n - 1u);
  const uint4 row = pool_qdiv4(o, mg.s0, sv.s0);
  r.ow = convert_int4(o - row * (uint)io.s3);
  r.plane = pool_qdiv4(row, mg.s6, sv.s6);
  r.oh = convert_int4(row - r.plane * (uint)io.s2);
  return r;
}

/* xp0 .. xp3: the planes of x of the quad's lanes. */
#define QUAD_PLANES(xp, x, u, io)                                            \
  const size_t area_ = (size_t)((io).s0 * (io).s1);                          \
  global const real_t *xp##0 = (x) + (size_t)(u).plane.s0 * area_;          \
  global const real_t *xp##1 = (x) + (size_t)(u).plane.s1 * area_;          \
  global const real_t *xp##2 = (x) + (size_t)(u).plane.s2 * area_;          \
  global const real_t *xp##3 = (x) + (size_t)(u).plane.s3 * area_

/* Lane l of a quad of positions a, one from each lane's plane. */
#define QUAD_LOAD(xp, a)                                                     \
  (float4)(LOAD(xp##0, (a).s0), LOAD(xp##1, (a).s1), LOAD(xp##2, (a).s2),   \
           LOAD(xp##3, (a).s3))

/* Stores v at the quad's outputs o below n (a warp's lanes write
 * consecutive elements: coalesced). */
inline void pool_oquad_store(global real_t *y, uint4 o, float4 v, uint n) {
  if (o.s0 < n) STORE(v.s0, y, o.s0);
  if (o.s1 < n) STORE(v.s1, y, o.s1);
  if (o.s2 < n) STORE(v.s2, y, o.s2);
  if (o.s3 < n) STORE(v.s3, y, o.s3);
}

inline void maxpool_fwd_quad(global const real_t *x, global real_t *y,
                             global int *idx, uint item, uint n, long4 io,
                             long4 ks, long4 pd, uint8 mg, uint8 sv) {
  const pool_oquad u = pool_oquad_of(item, n, io, mg, sv);
  const int H = (int)io.s0, W = (int)io.s1;
  QUAD_PLANES(xp, x, u, io);
  const int4 hs = u.oh * (int)ks.s2 - (int)pd.s0;
  const int4 ws = u.ow * (int)ks.s3 - (int)pd.s1;
  float4 m = (float4)(-INFINITY);
  int4 mi = (int4)(-1);
  for (int i = 0; i < (int)ks.s0; i++) {
    const int4 h = hs + i * (int)pd.s2;
    const int4 hin = h >= 0 && h < H, hw = clamp(h, 0, H - 1) * W;
    for (int j = 0; j < (int)ks.s1; j++) {
      const int4 w = ws + j * (int)pd.s3;
      const int4 in = hin & (w >= 0 && w < W);
      const float4 v = QUAD_LOAD(xp, hw + clamp(w, 0, W - 1));
      const int4 take = in & ((v > m) | isnan(v) | (mi < 0));
      m = select(m, v, take);
      mi = select(mi, hw + w, take); /* h W + w where taken */
    }
  }
  pool_oquad_store(y, u.o, m, n);
  if (u.o.s0 < n) idx[u.o.s0] = mi.s0;
  if (u.o.s1 < n) idx[u.o.s1] = mi.s1;
  if (u.o.s2 < n) idx[u.o.s2] = mi.s2;
  if (u.o.s3 < n) idx[u.o.s3] = mi.s3;
}

/* One axis of the 4 windows at o (as avg_axis): clipped [*lo, *hi) and
 * the padded extent. */
inline int4 avg_axis4(int4 o, long k, long s, long p, long n, int4 *lo,
                      int4 *hi) {
  const int4 start = o * (int)s - (int)p;
  const int4 end = min(start + (int)k, (int)(n + p));
  *lo = max(start, 0);
  *hi = min(end, (int)n);
  return end - start;
}

/* The average forward: each lane adds its window's inputs in the element
 * kernel's order (h, then w), +0 for taps outside its clipped window (s
 * is never -0), and divides once by the element kernel's divisor. */
inline void avgpool_fwd_quad(global const real_t *x, global real_t *y,
                             uint item, uint n, long4 io, long4 ks, long4 pd,
                             int cip, int divisor, uint8 mg, uint8 sv) {
  const pool_oquad u = pool_oquad_of(item, n, io, mg, sv);
  const int H = (int)io.s0, W = (int)io.s1;
  QUAD_PLANES(xp, x, u, io);
  int4 h0, h1, w0, w1;
  const int4 ph = avg_axis4(u.oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  const int4 pw = avg_axis4(u.ow, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
  const int4 hs = u.oh * (int)ks.s2 - (int)pd.s0;
  const int4 ws = u.ow * (int)ks.s3 - (int)pd.s1;
  float4 s = (float4)(0.0f);
  for (int i = 0; i < (int)ks.s0; i++) {
    const int4 h = hs + i;
    const int4 hin = h >= h0 && h < h1, hw = clamp(h, 0, H - 1) * W;
    for (int j = 0; j < (int)ks.s1; j++) {
      const int4 w = ws + j;
      const float4 v = QUAD_LOAD(xp, hw + clamp(w, 0, W - 1));
      s += select((float4)(0.0f), v, hin & (w >= w0 && w < w1));
    }
  }
  /* The element kernel's divisor: padded or kept area, as a float. */
  const int4 kept = (h1 - h0) * (w1 - w0), pad = ph * pw;
  const float4 d =
      divisor > 0 ? (float4)((float)divisor)
                  : convert_float4(cip ? pad : kept);
  s /= d;
  pool_oquad_store(y, u.o, s, n);
}

/* ---- GPU variant: max backward by tiles (RUMUS_MAXPOOL_BWD=tile) ---------
 * The quad gathers above read each dy and index once per input row whose
 * windows hold it (3 times for 3 x 3 windows of stride 2), each lane in
 * scalar loads, and check the indices in a loop of its own before the
 * gather (two dependent round trips): on the H200 the ResNet stem's
 * backward (k3s2p1) ran at 39% of the copy bandwidth.  Here a work-group
 * takes a tile of dx, rows [h0, h1) x columns [w0, w1) of one plane
 * (TH x TW from the host, tl), and stages the outputs whose windows can
 * hold it, rows [oh0, oh1] x columns [ow0, ow1] (at most POOL_TILE; the
 * host sizes the tile), in local memory: each dy and index read from
 * global memory once per tile (a halo of ceil(k / s) - 1 rows and columns
 * besides), coalesced, several loads a lane before any use.  Staging
 * checks each index against its output's window; an index that fails is
 * staged as -1 (it adds nothing) and reported by the one tile holding the
 * first input of its window (clamped into the plane), so once.  Then each
 * lane gathers quads of dx from local memory exactly as maxpool_bwd_quad
 * does from global memory: candidates (oh, then ow, ascending) of the
 * quad's four inputs, a lane adding the dy of the outputs whose (checked)
 * index names it and +0 for the others: the same terms in the same order,
 * so the same bits as the other GPU and CPU kernels.  Lanes of (mg, sv):
 * 0 TW / 4 (quads of a tile row), 1 W, 2 sh, 3 sw, 5 tiles along w, 6
 * tiles along h. */
#ifndef POOL_TILE
#define POOL_TILE 1024 /* outputs a work-group stages (8 bytes each) */
#endif

typedef struct {
  uint plane, h0, h1, w0, w1;
  int oh0, ow0, nr, nc; /* staged outputs: nr x nc from (oh0, ow0) */
} pool_tile;

inline pool_tile pool_tile_of(uint grp, long4 io, long4 ks, long4 pd,
                              uint4 tl, uint8 mg, uint8 sv) {
  pool_tile t;
  const uint row = PQ(grp, 5), ct = grp - row * tl.s3;
  t.plane = PQ(row, 6);
  const uint rt = row - t.plane * tl.s2;
  t.h0 = rt * tl.s0;
  t.h1 = min(t.h0 + tl.s0, (uint)io.s0);
  t.w0 = ct * tl.s1;
  t.w1 = min(t.w0 + tl.s1, (uint)io.s1);
  int oh1, ow1, x_;
  PQ_RANGE(t.h0, pd.s0, ks.s0, 1, ks.s2, io.s2, 2, t.oh0, x_);
  PQ_RANGE(t.h1 - 1u, pd.s0, ks.s0, 1, ks.s2, io.s2, 2, x_, oh1);
  PQ_RANGE(t.w0, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, t.ow0, x_);
  PQ_RANGE(t.w1 - 1u, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, x_, ow1);
  (void)x_;
  t.nr = max(0, oh1 - t.oh0 + 1);
  t.nc = max(0, ow1 - t.ow0 + 1);
  return t;
}

/* Index t of output (oh, ow) if it names an element of the output's
 * window, else -1; reported when this tile holds the window's first
 * input (clamped into the plane), the one tile that answers for it. */
inline int maxpool_tile_index(int t, int oh, int ow, pool_tile u, long4 io,
                              long4 ks, long4 pd, volatile global int *status,
                              uint8 mg, uint8 sv) {
  const int H = (int)io.s0, W = (int)io.s1;
  const int hs = oh * (int)ks.s2 - (int)pd.s0;
  const int ws = ow * (int)ks.s3 - (int)pd.s1;
  int ok = 0;
  if (t >= 0 && t < H * W) {
    const int th = (int)PQ((uint)t, 1), tw = t - th * W;
    ok = (uint)(th - hs) < (uint)ks.s0 && (uint)(tw - ws) < (uint)ks.s1;
  }
  if (ok) return t;
  const uint hr = (uint)clamp(hs, 0, H - 1), wr = (uint)clamp(ws, 0, W - 1);
  if (hr >= u.h0 && hr < u.h1 && wr >= u.w0 && wr < u.w1)
    rumus_report(status, DEVERR_POOL_INDEX, t,
                 (int)((size_t)u.plane * (size_t)(io.s2 * io.s3) +
                       (size_t)(oh * (int)io.s3 + ow)));
  return -1;
}

/* Stages the tile's outputs: lane l takes staged positions l, l + WG, ...
 * (row r, column c by counters), 4 at a time, their loads issued before
 * any check. */
inline void maxpool_tile_stage(global const real_t *gp, global const int *ip,
                               pool_tile u, long4 io, long4 ks, long4 pd,
                               volatile global int *status, uint8 mg,
                               uint8 sv, local float *lg, local int *lt) {
  const int n = u.nr * u.nc, OW = (int)io.s3;
  const int lid = (int)get_local_id(0);
  if (n == 0) return;
  const int dr = WG / u.nc, dc = WG - dr * u.nc;
  int r = lid / u.nc, c = lid - r * u.nc;
  for (int i0 = lid; i0 < n; i0 += 4 * WG) {
    int rr[4], cc[4], t[4];
    float g[4];
    for (int k = 0; k < 4; k++) {
      rr[k] = r;
      cc[k] = c;
      const int j = (u.oh0 + r) * OW + u.ow0 + c;
      const int in = i0 + k * WG < n;
      t[k] = in ? ip[j] : -1;
      g[k] = in ? LOAD(gp, j) : 0.0f;
      c += dc;
      r += dr;
      if (c >= u.nc) {
        c -= u.nc;
        r++;
      }
    }
    for (int k = 0; k < 4; k++) {
      const int i = i0 + k * WG;
      if (i >= n) break;
      lt[i] = maxpool_tile_index(t[k], u.oh0 + rr[k], u.ow0 + cc[k], u, io,
                                 ks, pd, status, mg, sv);
      lg[i] = g[k];
    }
  }
}

/* The quad of dx at row h, columns w .. w + nw - 1 from the staged
 * outputs (maxpool_bwd_quad's candidates and order). */
inline float4 maxpool_tile_quad(pool_tile u, uint h, uint w, uint nw,
                                long4 io, long4 ks, long4 pd, uint8 mg,
                                uint8 sv, local const float *lg,
                                local const int *lt) {
  int oh0, oh1, ow0, ow1, x_;
  PQ_RANGE(h, pd.s0, ks.s0, 1, ks.s2, io.s2, 2, oh0, oh1);
  PQ_RANGE(w, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, ow0, x_);
  PQ_RANGE(w + nw - 1u, pd.s1, ks.s1, 1, ks.s3, io.s3, 3, x_, ow1);
  (void)x_;
  const uint q = h * (uint)io.s1 + w;
  float4 s = (float4)(0.0f);
  for (int oh = oh0; oh <= oh1; oh++) {
    const int b = (oh - u.oh0) * u.nc - u.ow0;
    for (int ow = ow0; ow <= ow1; ow++) {
      const uint L = (uint)lt[b + ow] - q;
      const float g = lg[b + ow];
      QUAD_ADD(s, g, (int4)(L < 4u ? (int)L : -1) == (int4)(0, 1, 2, 3));
    }
  }
  return s;
}

inline void maxpool_bwd_tile(global const real_t *dy, global const int *idx,
                             global real_t *dx, uint grp, long4 io, long4 ks,
                             long4 pd, volatile global int *status, int vec,
                             uint8 mg, uint8 sv, uint4 tl, local float *lg,
                             local int *lt) {
  const pool_tile u = pool_tile_of(grp, io, ks, pd, tl, mg, sv);
  const size_t area_out = (size_t)(io.s2 * io.s3);
  maxpool_tile_stage(dy + u.plane * area_out, idx + u.plane * area_out, u, io,
                     ks, pd, status, mg, sv, lg, lt);
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint nq = tl.s1 / 4u, quads = (u.h1 - u.h0) * nq;
  global real_t *dp = dx + (size_t)u.plane * (size_t)(io.s0 * io.s1);
  for (uint k = get_local_id(0); k < quads; k += WG) {
    const uint r = PQ(k, 0), w = u.w0 + (k - r * nq) * 4u, h = u.h0 + r;
    if (w >= u.w1) continue;
    const uint nw = min(4u, u.w1 - w);
    const float4 s = maxpool_tile_quad(u, h, w, nw, io, ks, pd, mg, sv, lg,
                                       lt);
    pool_quad_store(dp + (size_t)h * (size_t)io.s1 + w, s, nw, vec);
  }
}

#undef QUAD_PLANES
#undef QUAD_LOAD
#undef QUAD_ADD
#undef PQ_RANGE

/* ---- GPU variant: adaptive pooling to 1 x 1 ------------------------------
 * With OH = OW = 1 the one bin is the whole plane: the forward is a row
 * reduction and the backward a broadcast, which the element kernels ran
 * at a few percent of the copy bandwidth on the H200 (one work-item
 * summing a whole plane; about ten divisions per input element). */

/* Planes p0 + lid / rt of the work-group's WG / rt (rt lanes a plane, a
 * power of two dividing WG): lane t adds elements t, t + rt, ... of its
 * plane in 4 chains (loads in flight), the chains added in order, then a
 * tree over the lanes (rumus_seg_sum): an order fixed by the area and
 * rt, so the same bits on every run (the CPU variant's element kernel adds
 * the plane in one chain: the variants may differ in the last bits). */
inline void adaptive_fwd_o1(global const real_t *x, global real_t *y,
                            size_t planes, size_t area, uint rt,
                            local float *buf) {
  const size_t lid = get_local_id(0), lane = lid % rt;
  const size_t plane = get_group_id(0) * (WG / rt) + lid / rt;
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  if (plane < planes) {
    global const real_t *xp = x + plane * area;
    size_t i = lane;
    for (; i + 3 * rt < area; i += 4 * rt) {
      a0 += LOAD(xp, i);
      a1 += LOAD(xp, i + rt);
      a2 += LOAD(xp, i + 2 * rt);
      a3 += LOAD(xp, i + 3 * rt);
    }
    for (; i < area; i += rt) a0 += LOAD(xp, i);
  }
  const float s = rumus_seg_sum(buf, (a0 + a1) + (a2 + a3), rt);
  if (lane == 0 && plane < planes) STORE(s / (float)area, y, plane);
}

/* Work-item g takes dx elements [4 g, 4 g + 4) of n: dy of their plane
 * over the area, each as 0 + dy / area (the element kernel's sum, so the
 * same bits as the CPU variant); one division per work-item.  vec (dx
 * aligned to 4 elements, from the host): a whole quad is one aligned
 * 4-wide store, which a warp writes as one contiguous 512-byte run (4
 * scalar stores 16 bytes apart took 4 passes over the same lines). */
/* The value of element e of dx, the one after the element at (*plane,
 * *pos) whose value is v (past n: 0, nothing is read). */
inline float o1_next(global const real_t *dy, size_t e, size_t n,
                     size_t area, long *pos, size_t *plane, float v) {
  if (++*pos < (long)area) return v;
  *pos = 0;
  ++*plane;
  return e < n ? 0.0f + LOAD(dy, *plane) / (float)area : 0.0f;
}

inline void adaptive_bwd_o1(global const real_t *dy, global real_t *dx,
                            size_t g, size_t n, size_t area, int vec) {
  const size_t e = 4 * g;
  long pos;
  size_t plane = pool_plane(e, (long)area, &pos);
  float4 q;
  q.s0 = 0.0f + LOAD(dy, plane) / (float)area;
  q.s1 = o1_next(dy, e + 1, n, area, &pos, &plane, q.s0);
  q.s2 = o1_next(dy, e + 2, n, area, &pos, &plane, q.s1);
  q.s3 = o1_next(dy, e + 3, n, area, &pos, &plane, q.s2);
  if (vec && e + 4 <= n) {
    RUMUS_STOREA(RUMUS_STORAGE, 4, q, dx, e);
    return;
  }
  STORE(q.s0, dx, e);
  if (e + 1 < n) STORE(q.s1, dx, e + 1);
  if (e + 2 < n) STORE(q.s2, dx, e + 2);
  if (e + 3 < n) STORE(q.s3, dx, e + 3);
}

/* ---- CPU variant: average backward of stride 1 along w by rows of g -------
 * Lane w of the stride-1 gather divides each of its kw kh terms, though
 * the term of output (oh, ow), g = dy / divisor, is the same for every
 * input under it: kw kh divisions per input where one per output would
 * do (about ten times the vector work at 64x64x14/k3s1p1).  Where the
 * rows are narrow enough, a work-item keeps the g rows of the output rows
 * its input rows need in private memory (a ring of AVG_GR rows of
 * AVG_GW), each computed once per plane, kw - 1 zeros on both sides; an
 * input row then adds, in blocks of 8 lanes over the whole row, the kw
 * neighbours of each of its output rows in order: the gathers' terms in
 * their order (the zeros stand for the outputs outside [0, OW), which the
 * gathers skip: a sum that starts at +0 does not change by adding +0),
 * the same bits. */
#ifndef AVG_GR
#define AVG_GR 8 /* g rows in the ring (a power of two) */
#endif
#ifndef AVG_GW
#define AVG_GW 96 /* floats a g row: OW + 2 (kw - 1) at most */
#endif

/* 1 where the g rows serve: stride 1 along w, at most AVG_GR output rows
 * over an input row, padded rows inside AVG_GW, rows of 8 or more. */
inline int avg_g_fits(long4 io, long4 ks) {
  const long k = ks.s1, over = (ks.s0 + ks.s2 - 1) / ks.s2;
  return ks.s3 == 1 && over <= AVG_GR && io.s3 + 2 * (k - 1) <= AVG_GW &&
         io.s1 >= 8;
}

/* The g row of output row oh of plane gp into g: g[kw - 1 + ow] = dy /
 * divisor (avg_grad's term), zeros at the kw - 1 places on each side;
 * 8 outputs a division where the row has 8 (the divisors lane by lane,
 * the integers avg_axis gives, converted as avg_divisor does). */
inline void avg_g_row(private float *g, global const real_t *gp, long oh,
                      long4 io, long4 ks, long4 pd, int cip, int divisor) {
  const long OW = io.s3, k = ks.s1;
  long h0, h1, w0, w1;
  const long ph = avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  for (long i = 0; i < k - 1; i++) g[i] = g[k - 1 + OW + i] = 0.0f;
  global const real_t *gr = gp + oh * OW;
  if (OW >= 8 && ph * k <= INT_MAX) {
    const int W = (int)io.s1, p = (int)pd.s1, kh = (int)(h1 - h0);
    POOL_BLOCKS(o, 0, OW - 8, 8) {
      const float8 d =
          avg_lane_div8(o, 1, (int)ph, kh, W, (int)k, p, cip, divisor);
      vstore8(POOL_LDN(8, gr, o) / d, 0, g + k - 1 + o);
      if (o == OW - 8) break;
    }
    return;
  }
  for (long ow = 0; ow < OW; ow++) {
    const long pw = avg_axis(ow, k, 1, pd.s1, io.s1, &w0, &w1);
    g[k - 1 + ow] = LOAD(gr, ow) / avg_divisor(ph * pw, (h1 - h0) * (w1 - w0),
                                               cip, divisor);
  }
}

/* Input row dr from the ring's output rows [oh0, oh1]: lane w adds g[w +
 * pw + j] (output w + pw - kw + 1 + j), j < kw, of each row in turn; two
 * blocks of 8 at once (the last pair moved back to end with the row), as
 * each block is a chain of dependent adds. */
inline void avg_g_sum(private const float *ring, global real_t *dr, long oh0,
                      long oh1, long W, long k, long p) {
  long a = 0;
  for (;; a += 16) {
    const long b = min(a + 8, W - 8);
    a = min(a, W - 8);
    float8 sa = 0.0f, sb = 0.0f;
    for (long oh = oh0; oh <= oh1; oh++) {
      private const float *g = ring + (oh % AVG_GR) * AVG_GW + p;
      for (long j = 0; j < k; j++) {
        sa += vload8(0, g + a + j);
        sb += vload8(0, g + b + j);
      }
    }
    POOL_STN(8, sa, dr, a);
    POOL_STN(8, sb, dr, b);
    if (b == W - 8) break;
  }
}

/* avg_g_sum for kw = 3, the taps written out: LLVM split the loop over
 * the taps into one loop per block, a chain of dependent adds each (a
 * third of the kernel's samples on one add); here the two blocks' adds
 * alternate.  The same terms in the same order. */
inline void avg_g_sum3(private const float *ring, global real_t *dr, long oh0,
                       long oh1, long W, long p) {
  long a = 0;
  for (;; a += 16) {
    const long b = min(a + 8, W - 8);
    a = min(a, W - 8);
    float8 sa = 0.0f, sb = 0.0f;
    for (long oh = oh0; oh <= oh1; oh++) {
      private const float *g = ring + (oh % AVG_GR) * AVG_GW + p;
      const float8 a0 = vload8(0, g + a), a1 = vload8(0, g + a + 1),
                   a2 = vload8(0, g + a + 2), b0 = vload8(0, g + b),
                   b1 = vload8(0, g + b + 1), b2 = vload8(0, g + b + 2);
      sa += a0;
      sb += b0;
      sa += a1;
      sb += b1;
      sa += a2;
      sb += b2;
    }
    POOL_STN(8, sa, dr, a);
    POOL_STN(8, sb, dr, b);
    if (b == W - 8) break;
  }
}

/* Input rows [r0, r1) of the N C H: the ring holds output rows [next -
 * AVG_GR, next) of the current plane (those below oh0 no longer needed). */
inline void avgpool_bwd_grows(global const real_t *dy, global real_t *dx,
                              size_t r0, size_t r1, long4 io, long4 ks,
                              long4 pd, int cip, int divisor) {
  float ring[AVG_GR * AVG_GW];
  long h, next = 0;
  size_t plane = pool_plane(r0, io.s0, &h);
  for (size_t r = r0; r < r1; r++) {
    global const real_t *gp = dy + plane * (size_t)(io.s2 * io.s3);
    const long oh0 = max(0L, pool_cdiv(h + pd.s0 - ks.s0 + 1, ks.s2));
    const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
    for (next = max(next, oh0); next <= oh1; next++)
      avg_g_row(ring + (next % AVG_GR) * AVG_GW, gp, next, io, ks, pd, cip,
                divisor);
    if (ks.s1 == 3)
      avg_g_sum3(ring, dx + r * (size_t)io.s1, oh0, oh1, io.s1, pd.s1);
    else
      avg_g_sum(ring, dx + r * (size_t)io.s1, oh0, oh1, io.s1, ks.s1, pd.s1);
    if (++h == io.s0) {
      h = 0;
      plane++;
      next = 0;
    }
  }
}

/* ---- CPU variant: average forward of stride 1 along w from padded rows ----
 * With stride 1 the vector blocks stop where a window reaches the
 * padding, and on rows of 14 the two scalar outputs at the ends cost as
 * much as the twelve in vectors.  Where the rows are narrow enough, a
 * work-item copies the input rows its output rows need into a private
 * ring (each once per plane, AVG_GR rows of AVG_GW), pw zeros on both
 * sides, and adds the kw neighbours in vector blocks over the whole output
 * row, the divisors lane by lane: avgpool_at's terms in its order (the
 * zeros stand for the columns outside the input, which it skips: a sum
 * that starts at +0 does not change by adding +0), the same bits. */

/* 1 where the padded rows serve: stride 1 along w, at most AVG_GR input
 * rows under an output row, W + 2 pw inside AVG_GW, OW of 8 or more,
 * kh kw below 2^31 (int lanes). */
inline int avg_x_fits(long4 io, long4 ks, long4 pd) {
  return ks.s3 == 1 && ks.s0 <= AVG_GR && io.s1 + 2 * pd.s1 <= AVG_GW &&
         io.s3 >= 8 && ks.s0 * ks.s1 <= INT_MAX;
}

/* Input row h of plane xp into r: r[pw + w] = x, zeros at the pw places
 * on each side. */
inline void avg_x_row(private float *r, global const real_t *xp, long h,
                      long W, long p) {
  global const real_t *xr = xp + h * W;
  for (long i = 0; i < p; i++) r[i] = r[p + W + i] = 0.0f;
  long w = 0;
  for (; w + 8 <= W; w += 8) vstore8(POOL_LDN(8, xr, w), 0, r + p + w);
  for (; w < W; w++) r[p + w] = LOAD(xr, w);
}

/* Output row yr (row oh) from the ring's input rows [h0, h1): lanes ow
 * add r[ow + j], j < kw, of each row in turn, over their divisors; two
 * blocks of 8 at once (see avg_g_sum). */
inline void avg_x_sum(private const float *ring, global real_t *yr, long oh,
                      long4 io, long4 ks, long4 pd, int cip, int divisor) {
  long h0, h1;
  const int ph = (int)avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  const int kh = (int)(h1 - h0), W = (int)io.s1, k = (int)ks.s1,
            p = (int)pd.s1;
  const long last = io.s3 - 8;
  long a = 0;
  for (;; a += 16) {
    const long b = min(a + 8, last);
    a = min(a, last);
    float8 sa = 0.0f, sb = 0.0f;
    for (long h = h0; h < h1; h++) {
      private const float *r = ring + (h % AVG_GR) * AVG_GW;
      for (long j = 0; j < k; j++) {
        sa += vload8(0, r + a + j);
        sb += vload8(0, r + b + j);
      }
    }
    POOL_STN(8, sa / avg_lane_div8(a, 1, ph, kh, W, k, p, cip, divisor), yr,
             a);
    POOL_STN(8, sb / avg_lane_div8(b, 1, ph, kh, W, k, p, cip, divisor), yr,
             b);
    if (b == last) break;
  }
}

/* Output rows [r0, r1) of the N C OH: the ring holds input rows [next -
 * AVG_GR, next) of the current plane (those below h0 no longer needed). */
inline void avgpool_fwd_xrows(global const real_t *x, global real_t *y,
                              size_t r0, size_t r1, long4 io, long4 ks,
                              long4 pd, int cip, int divisor) {
  float ring[AVG_GR * AVG_GW];
  long oh, next = 0, h0, h1;
  size_t plane = pool_plane(r0, io.s2, &oh);
  for (size_t r = r0; r < r1; r++) {
    global const real_t *xp = x + plane * (size_t)(io.s0 * io.s1);
    avg_axis(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
    for (next = max(next, h0); next < h1; next++)
      avg_x_row(ring + (next % AVG_GR) * AVG_GW, xp, next, io.s1, pd.s1);
    avg_x_sum(ring, y + r * (size_t)io.s3, oh, io, ks, pd, cip, divisor);
    if (++oh == io.s2) {
      oh = 0;
      plane++;
      next = 0;
    }
  }
}

/* ---- Entries: element base + get_global_id(0) of n ---------------------- */

#define POOL_ITEM(n, base)                                                   \
  const size_t g_ = get_global_id(0);                                        \
  if (g_ >= (size_t)(n)) return;                                             \
  const size_t item = (size_t)(base) + g_

__kernel RUMUS_WG_ATTR
void maxpool2d_fwd(ulong n, ulong base, global const real_t *x, ulong xo,
                   global real_t *y, ulong yo, global int *idx, ulong io_,
                   long4 io, long4 ks, long4 pd) {
  POOL_ITEM(n, base);
  maxpool_fwd_item(x + xo, y + yo, idx + io_, item, io, ks, pd);
}

__kernel RUMUS_WG_ATTR
void maxpool2d_bwd(ulong n, ulong base, global const real_t *dy, ulong dyo,
                   global const int *idx, ulong io_, global real_t *dx,
                   ulong dxo, long4 io, long4 ks, long4 pd,
                   volatile global int *status) {
  POOL_ITEM(n, base);
  maxpool_bwd_item(dy + dyo, idx + io_, dx + dxo, item, io, ks, pd, status);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_fwd(ulong n, ulong base, global const real_t *x, ulong xo,
                   global real_t *y, ulong yo, long4 io, long4 ks, long4 pd,
                   int cip, int divisor) {
  POOL_ITEM(n, base);
  avgpool_fwd_item(x + xo, y + yo, item, io, ks, pd, cip, divisor);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_bwd(ulong n, ulong base, global const real_t *dy, ulong dyo,
                   global real_t *dx, ulong dxo, long4 io, long4 ks, long4 pd,
                   int cip, int divisor) {
  POOL_ITEM(n, base);
  avgpool_bwd_item(dy + dyo, dx + dxo, item, io, ks, pd, cip, divisor);
}

__kernel RUMUS_WG_ATTR
void adaptive_avgpool2d_fwd(ulong n, ulong base, global const real_t *x,
                            ulong xo, global real_t *y, ulong yo, long4 io) {
  POOL_ITEM(n, base);
  adaptive_fwd_item(x + xo, y + yo, item, io);
}

__kernel RUMUS_WG_ATTR
void adaptive_avgpool2d_bwd(ulong n, ulong base, global const real_t *dy,
                            ulong dyo, global real_t *dx, ulong dxo,
                            long4 io) {
  POOL_ITEM(n, base);
  adaptive_bwd_item(dy + dyo, dx + dxo, item, io);
}

/* CPU variant: work-item g of a launch takes rows (base + g) rpw ... of
 * the `rows` rows, N C OH output rows (forwards) or N C H input rows
 * (backwards), of planes of `height` rows: one division for the first
 * row's plane, then counters.  A work-item per row spent as long on its
 * setup (divisions, spans) as on rows of 14 to 28 elements. */
#define POOL_ROWS(height, call)                                              \
  POOL_ITEM(n, base);                                                        \
  const size_t r0_ = item * (size_t)rpw;                                     \
  const size_t r1_ = min(r0_ + (size_t)rpw, (size_t)rows);                   \
  long h_;                                                                   \
  size_t plane_ = pool_plane(r0_, (height), &h_);                            \
  for (size_t r_ = r0_; r_ < r1_; r_++) {                                    \
    call;                                                                    \
    if (++h_ == (height)) {                                                  \
      h_ = 0;                                                                \
      plane_++;                                                              \
    }                                                                        \
  }

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void maxpool2d_fwd_rows(ulong n, ulong base, global const real_t *x, ulong xo,
                        global real_t *y, ulong yo, global int *idx, ulong io_,
                        long4 io, long4 ks, long4 pd, ulong rows, uint rpw) {
  POOL_ROWS(io.s2, maxpool_fwd_row(x + xo, y + yo, idx + io_, plane_, h_, io,
                                   ks, pd));
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void maxpool2d_fwd_k3rows(ulong n, ulong base, global const real_t *x,
                          ulong xo, global real_t *y, ulong yo,
                          global int *idx, ulong io_, long4 io, long4 ks,
                          long4 pd, int nt, ulong rows, uint rpw) {
  POOL_ROWS(io.s2, maxpool_fwd_k3row(x + xo, y + yo, idx + io_, plane_, h_,
                                     io, ks, pd, nt));
  pool_nt_fence(nt);
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void maxpool2d_fwd_k2rows(ulong n, ulong base, global const real_t *x,
                          ulong xo, global real_t *y, ulong yo,
                          global int *idx, ulong io_, long4 io, long4 ks,
                          long4 pd, int nt, ulong rows, uint rpw) {
  POOL_ROWS(io.s2, maxpool_fwd_k2row(x + xo, y + yo, idx + io_, plane_, h_,
                                     io, ks, pd, nt));
  pool_nt_fence(nt);
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void avgpool2d_fwd_rows(ulong n, ulong base, global const real_t *x, ulong xo,
                        global real_t *y, ulong yo, long4 io, long4 ks,
                        long4 pd, int cip, int divisor, ulong rows, uint rpw) {
  if (avg_x_fits(io, ks, pd)) {
    POOL_ITEM(n, base);
    const size_t r0 = item * (size_t)rpw;
    avgpool_fwd_xrows(x + xo, y + yo, r0, min(r0 + (size_t)rpw, (size_t)rows),
                      io, ks, pd, cip, divisor);
    return;
  }
  POOL_ROWS(io.s2, avgpool_fwd_row(x + xo, y + yo, plane_, h_, io, ks, pd, cip,
                                   divisor));
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void maxpool2d_bwd_rows(ulong n, ulong base, global const real_t *dy,
                        ulong dyo, global const int *idx, ulong io_,
                        global real_t *dx, ulong dxo, long4 io, long4 ks,
                        long4 pd, volatile global int *status, ulong rows,
                        uint rpw) {
  POOL_ROWS(io.s0, maxpool_bwd_row(dy + dyo, idx + io_, dx + dxo, plane_, h_,
                                   io, ks, pd, status));
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void maxpool2d_bwd_k3rows(ulong n, ulong base, global const real_t *dy,
                          ulong dyo, global const int *idx, ulong io_,
                          global real_t *dx, ulong dxo, long4 io, long4 ks,
                          long4 pd, volatile global int *status, int nt,
                          ulong rows, uint rpw) {
  POOL_ROWS(io.s0, maxpool_bwd_k3row(dy + dyo, idx + io_, dx + dxo, plane_,
                                     h_, io, ks, pd, status, nt));
  pool_nt_fence(nt);
}

/* Over the N C OH output rows (maxpool_bwd_k2row). */
__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void maxpool2d_bwd_k2rows(ulong n, ulong base, global const real_t *dy,
                          ulong dyo, global const int *idx, ulong io_,
                          global real_t *dx, ulong dxo, long4 io, long4 ks,
                          long4 pd, volatile global int *status, int nt,
                          ulong rows, uint rpw) {
  POOL_ROWS(io.s2, maxpool_bwd_k2row(dy + dyo, idx + io_, dx + dxo, plane_,
                                     h_, io, ks, pd, status, nt));
  pool_nt_fence(nt);
}

/* 1 in the F32 program: maxpool2d_bwd_planes works on floats. */
#define POOL_PLANES_F32 1
#define POOL_PLANES_F16 0
#define POOL_PLANES_BF16 0

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void maxpool2d_bwd_planes(ulong n, ulong base, global const real_t *dy,
                          ulong dyo, global const int *idx, ulong io_,
                          global real_t *dx, ulong dxo, long4 io, long4 ks,
                          long4 pd, volatile global int *status) {
#if RUMUS_CAT(POOL_PLANES_, RUMUS_STORAGE)
  POOL_ITEM(n, base);
  maxpool_bwd_plane((global const float *)(dy + dyo), idx + io_,
                    (global float *)(dx + dxo), item, io, ks, pd, status);
#endif
}

/* dx row dst from the row src before it, W elements, the stored bits. */
inline void pool_copy_row(global real_t *dst, global const real_t *src,
                          long W) {
  long w = 0;
  if (sizeof(real_t) == 4) {
    global const uint *a = (global const uint *)src;
    global uint *b = (global uint *)dst;
    for (; w + 8 <= W; w += 8) vstore8(vload8(0, a + w), 0, b + w);
    for (; w < W; w++) b[w] = a[w];
  } else {
    global const ushort *a = (global const ushort *)src;
    global ushort *b = (global ushort *)dst;
    for (; w + 16 <= W; w += 16) vstore16(vload16(0, a + w), 0, b + w);
    for (; w < W; w++) b[w] = a[w];
  }
}

/* Input rows [r0, r1) of the average backward (N C H rows): a row's dx
 * depends on its plane and its output rows [oh0, oh1] only, so a row with
 * the same ones as the row before it (s h - 1 rows of s h where windows
 * tile the image: three of four in the 4 x 4 tiles of adaptive pooling
 * from 28 to 7) copies that row instead of dividing and adding again. */
inline void avgpool_bwd_rows(global const real_t *dy, global real_t *dx,
                             size_t r0, size_t r1, long4 io, long4 ks,
                             long4 pd, int cip, int divisor) {
  long h, p0 = -1, p1 = -1;
  size_t plane = pool_plane(r0, io.s0, &h);
  for (size_t r = r0; r < r1; r++) {
    const long oh0 = max(0L, pool_cdiv(h + pd.s0 - ks.s0 + 1, ks.s2));
    const long oh1 = min(io.s2 - 1, pool_fdiv(h + pd.s0, ks.s2));
    global real_t *dr = dx + r * (size_t)io.s1;
    if (r > r0 && h > 0 && oh0 == p0 && oh1 == p1)
      pool_copy_row(dr, dr - io.s1, io.s1);
    else
      avgpool_bwd_row(dy, dx, plane, h, io, ks, pd, cip, divisor);
    p0 = oh0;
    p1 = oh1;
    if (++h == io.s0) {
      h = 0;
      plane++;
    }
  }
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void avgpool2d_bwd_rows(ulong n, ulong base, global const real_t *dy,
                        ulong dyo, global real_t *dx, ulong dxo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, ulong rows,
                        uint rpw) {
  if (avg_g_fits(io, ks)) {
    POOL_ITEM(n, base);
    const size_t r0 = item * (size_t)rpw;
    avgpool_bwd_grows(dy + dyo, dx + dxo, r0, min(r0 + (size_t)rpw,
                                                  (size_t)rows),
                      io, ks, pd, cip, divisor);
    return;
  }
  POOL_ITEM(n, base);
  const size_t r0 = item * (size_t)rpw;
  avgpool_bwd_rows(dy + dyo, dx + dxo, r0, min(r0 + (size_t)rpw, (size_t)rows),
                   io, ks, pd, cip, divisor);
}

/* pool_spread8 for windows 1, 2 or 4 wide, non-temporal where nt. */
inline void pool_spread8_nt(float8 g, long s, global real_t *dr, long w,
                            int nt) {
  if (s == 1) {
    pool_st8(g, dr, w, nt);
  } else if (s == 2) {
    pool_st8x2(g.s00112233, g.s44556677, dr, w, nt);
  } else {
    pool_st8x2(g.s00001111, g.s22223333, dr, w, nt);
    pool_st8x2(g.s44445555, g.s66667777, dr, w + 16, nt);
  }
}

/* Windows that tile the image (kernel = stride, no padding, H = kh OH,
 * W = kw OW, kw 1, 2 or 4, OW >= 4; the host checks): output rows [r0,
 * r1) of the N C OH rows.  An output row's kh dx rows follow one another
 * in memory, and each of its inputs takes 0 + dy / divisor
 * (avgpool_bwd_map's value and bits), so a work-item reads dy rows and
 * writes dx in full vectors (non-temporal where nt): no per-row
 * divisions and no row copies, which took most of the rows kernel's time
 * on rows of 56. */
inline void avgpool_bwd_tile_rows(global const real_t *dy, global real_t *dx,
                                  size_t r0, size_t r1, long4 io, long4 ks,
                                  int divisor, int nt) {
  const long W = io.s1, OW = io.s3, kh = ks.s0, kw = ks.s1;
  const float d = divisor > 0 ? (float)divisor : (float)(kh * kw);
  const long n = OW >= 8 ? 8 : 4, l = OW - n;
  for (size_t r = r0; r < r1; r++) {
    global const real_t *gr = dy + r * (size_t)OW;
    global real_t *dr = dx + r * (size_t)(kh * W);
    POOL_BLOCKS(o, 0, l, n) {
      if (n == 8) {
        const float8 g = 0.0f + POOL_LDN(8, gr, o) / d;
        for (long i = 0; i < kh; i++)
          pool_spread8_nt(g, kw, dr + i * W, o * kw, nt);
      } else {
        const float4 g = 0.0f + POOL_LDN(4, gr, o) / d;
        for (long i = 0; i < kh; i++) pool_spread4(g, kw, dr + i * W, o * kw);
      }
      if (o == l) break;
    }
  }
  pool_nt_fence(nt);
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void avgpool2d_bwd_tiles(ulong n, ulong base, global const real_t *dy,
                         ulong dyo, global real_t *dx, ulong dxo, long4 io,
                         long4 ks, long4 pd, int cip, int divisor, int nt,
                         ulong rows, uint rpw) {
  POOL_ITEM(n, base);
  const size_t r0 = item * (size_t)rpw;
  avgpool_bwd_tile_rows(dy + dyo, dx + dxo, r0,
                        min(r0 + (size_t)rpw, (size_t)rows), io, ks, divisor,
                        nt);
}

/* Over the N C OH output rows (avgpool_fwd_k3row). */
__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void avgpool2d_fwd_k3rows(ulong n, ulong base, global const real_t *x,
                          ulong xo, global real_t *y, ulong yo, long4 io,
                          long4 ks, long4 pd, int cip, int divisor, int nt,
                          ulong rows, uint rpw) {
  POOL_ROWS(io.s2, avgpool_fwd_k3row(x + xo, y + yo, plane_, h_, io, ks, pd,
                                     cip, divisor, nt));
  pool_nt_fence(nt);
}

/* Over the N C H input rows (avgpool_bwd_k3row). */
__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void avgpool2d_bwd_k3rows(ulong n, ulong base, global const real_t *dy,
                          ulong dyo, global real_t *dx, ulong dxo, long4 io,
                          long4 ks, long4 pd, int cip, int divisor, int nt,
                          ulong rows, uint rpw) {
  POOL_ROWS(io.s0, avgpool_bwd_k3row(dy + dyo, dx + dxo, plane_, h_, io, ks,
                                     pd, cip, divisor, nt));
  pool_nt_fence(nt);
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void adaptive_avgpool2d_bwd_rows(ulong n, ulong base, global const real_t *dy,
                                 ulong dyo, global real_t *dx, ulong dxo,
                                 long4 io, ulong rows, uint rpw) {
  POOL_ROWS(io.s0, adaptive_bwd_row(dy + dyo, dx + dxo, plane_, h_, io));
}
#undef POOL_ROWS

/* CPU variant, OH = OW = 1: work-item g of a launch takes planes (base +
 * g) ppw ... of `planes`, each of `area` elements. */
__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void adaptive_avgpool2d_fwd_planes(ulong n, ulong base, global const real_t *x,
                                   ulong xo, global real_t *y, ulong yo,
                                   ulong area, ulong planes, uint ppw) {
  POOL_ITEM(n, base);
  const size_t p1 = min((item + 1) * (size_t)ppw, (size_t)planes);
  for (size_t p = item * (size_t)ppw; p < p1; p++)
    STORE(adaptive_plane_sum(x + xo + p * (size_t)area, (size_t)area) /
              (float)area,
          y + yo, p);
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void adaptive_avgpool2d_bwd_planes(ulong n, ulong base,
                                   global const real_t *dy, ulong dyo,
                                   global real_t *dx, ulong dxo, ulong area,
                                   ulong planes, uint ppw) {
  POOL_ITEM(n, base);
  const size_t p1 = min((item + 1) * (size_t)ppw, (size_t)planes);
  for (size_t p = item * (size_t)ppw; p < p1; p++)
    adaptive_plane_fill(dx + dxo + p * (size_t)area, (size_t)area,
                        0.0f + LOAD(dy + dyo, p) / (float)area);
}

/* GPU variant, OH = OW = 1: work-group g of a launch takes planes
 * (first + g) (WG / rt) + lid / rt of `planes`. */
__kernel RUMUS_WG_ATTR
void adaptive_avgpool2d_fwd_o1(ulong planes, ulong first,
                               global const real_t *x, ulong xo,
                               global real_t *y, ulong yo, ulong area,
                               uint rt) {
  local float buf[WG];
  const size_t p0 = (size_t)first * (WG / rt);
  adaptive_fwd_o1(x + xo + p0 * (size_t)area, y + yo + p0,
                  (size_t)planes - min((size_t)planes, p0), (size_t)area, rt,
                  buf);
}

/* Work-item first + g of a launch: 4 dx elements of n.  No required
 * work-group size: the host launches it in groups of O1_BWD_LS (pool.c
 * says why). */
__kernel void adaptive_avgpool2d_bwd_o1(ulong items, ulong first,
                                        global const real_t *dy, ulong dyo,
                                        global real_t *dx, ulong dxo,
                                        ulong n, ulong area, int vec) {
  POOL_ITEM(items, first);
  adaptive_bwd_o1(dy + dyo, dx + dxo, item, (size_t)n, (size_t)area, vec);
}

/* GPU variant, every index in 32 bits: the backwards with the host's magic
 * numbers (mg, sv). */
__kernel RUMUS_WG_ATTR
void maxpool2d_bwd_q(ulong n, ulong base, global const real_t *dy, ulong dyo,
                     global const int *idx, ulong io_, global real_t *dx,
                     ulong dxo, long4 io, long4 ks, long4 pd,
                     volatile global int *status, uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  maxpool_bwd_q(dy + dyo, idx + io_, dx + dxo, (uint)item, io, ks, pd, status,
                mg, sv);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_bwd_q(ulong n, ulong base, global const real_t *dy, ulong dyo,
                     global real_t *dx, ulong dxo, long4 io, long4 ks,
                     long4 pd, int cip, int divisor, uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  avgpool_bwd_q(dy + dyo, dx + dxo, (uint)item, io, ks, pd, cip, divisor, mg,
                sv);
}

/* GPU variant, quads (see above): work-item base + g of n quads. */
__kernel RUMUS_WG_ATTR
void maxpool2d_bwd_quad(ulong n, ulong base, global const real_t *dy,
                        ulong dyo, global const int *idx, ulong io_,
                        global real_t *dx, ulong dxo, long4 io, long4 ks,
                        long4 pd, volatile global int *status, int vec,
                        uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  maxpool_bwd_quad(dy + dyo, idx + io_, dx + dxo, (uint)item, io, ks, pd,
                   status, vec, mg, sv);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_bwd_quad(ulong n, ulong base, global const real_t *dy,
                        ulong dyo, global real_t *dx, ulong dxo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, int vec,
                        uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  avgpool_bwd_quad(dy + dyo, dx + dxo, (uint)item, io, ks, pd, cip, divisor,
                   vec, mg, sv);
}

__kernel RUMUS_WG_ATTR
void adaptive_avgpool2d_bwd_quad(ulong n, ulong base, global const real_t *dy,
                                 ulong dyo, global real_t *dx, ulong dxo,
                                 long4 io, int vec, uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  adaptive_bwd_quad(dy + dyo, dx + dxo, (uint)item, io, vec, mg, sv);
}

/* GPU variant: the forwards by strided output quads: work-item base + g
 * of `items`, n outputs. */
__kernel RUMUS_WG_ATTR
void maxpool2d_fwd_quad(ulong items, ulong base, global const real_t *x,
                        ulong xo, global real_t *y, ulong yo, global int *idx,
                        ulong io_, long4 io, long4 ks, long4 pd, uint n,
                        uint8 mg, uint8 sv) {
  POOL_ITEM(items, base);
  maxpool_fwd_quad(x + xo, y + yo, idx + io_, (uint)item, n, io, ks, pd, mg,
                   sv);
}
__kernel RUMUS_WG_ATTR
void avgpool2d_fwd_quad(ulong items, ulong base, global const real_t *x,
                        ulong xo, global real_t *y, ulong yo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, uint n,
                        uint8 mg, uint8 sv) {
  POOL_ITEM(items, base);
  avgpool_fwd_quad(x + xo, y + yo, (uint)item, n, io, ks, pd, cip, divisor,
                   mg, sv);
}
/* GPU variant, 2 x 2 windows of stride 2: work-item base + g of n output
 * pairs. */
__kernel RUMUS_WG_ATTR
void maxpool2d_bwd_k2(ulong n, ulong base, global const real_t *dy,
                      ulong dyo, global const int *idx, ulong io_,
                      global real_t *dx, ulong dxo, long4 io, long4 ks,
                      long4 pd, volatile global int *status, int vec,
                      uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  maxpool_bwd_k2(dy + dyo, idx + io_, dx + dxo, (uint)item, io, status, vec,
                 mg, sv);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_bwd_k2(ulong n, ulong base, global const real_t *dy, ulong dyo,
                      global real_t *dx, ulong dxo, long4 io, long4 ks,
                      long4 pd, int cip, int divisor, int vec, uint8 mg,
                      uint8 sv) {
  POOL_ITEM(n, base);
  avgpool_bwd_k2(dy + dyo, dx + dxo, (uint)item, io, divisor, vec, mg, sv);
}

/* GPU variant, 2 x 2 windows of stride 2: work-item base + g of n output
 * quads. */
__kernel RUMUS_WG_ATTR
void maxpool2d_fwd_k2(ulong n, ulong base, global const real_t *x, ulong xo,
                      global real_t *y, ulong yo, global int *idx, ulong io_,
                      long4 io, long4 ks, long4 pd, int vec, uint8 mg,
                      uint8 sv) {
  POOL_ITEM(n, base);
  maxpool_fwd_k2(x + xo, y + yo, idx + io_, (uint)item, io, vec, mg, sv);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_fwd_k2(ulong n, ulong base, global const real_t *x, ulong xo,
                      global real_t *y, ulong yo, long4 io, long4 ks,
                      long4 pd, int cip, int divisor, int vec, uint8 mg,
                      uint8 sv) {
  POOL_ITEM(n, base);
  avgpool_fwd_k2(x + xo, y + yo, (uint)item, io, divisor, vec, mg, sv);
}

__kernel RUMUS_WG_ATTR
void maxpool2d_fwd_k3s2(ulong n, ulong base, global const real_t *x,
                        ulong xo, global real_t *y, ulong yo, global int *idx,
                        ulong io_, long4 io, long4 ks, long4 pd, int vec,
                        uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  maxpool_fwd_k3s2(x + xo, y + yo, idx + io_, (uint)item, io, vec, mg, sv);
}

__kernel RUMUS_WG_ATTR
void maxpool2d_bwd_k3s2(ulong n, ulong base, global const real_t *dy,
                        ulong dyo, global const int *idx, ulong io_,
                        global real_t *dx, ulong dxo, long4 io, long4 ks,
                        long4 pd, volatile global int *status, int vec,
                        uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  maxpool_bwd_k3s2(dy + dyo, idx + io_, dx + dxo, (uint)item, io, ks, pd,
                   status, vec, mg, sv);
}

__kernel RUMUS_WG_ATTR
void maxpool2d_bwd_k3s2b(ulong n, ulong base, global const real_t *dy,
                         ulong dyo, global const int *idx, ulong io_,
                         global real_t *dx, ulong dxo, long4 io, long4 ks,
                         long4 pd, volatile global int *status, int vec,
                         uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  (void)ks;
  (void)pd;
  maxpool_bwd_k3s2b(dy + dyo, idx + io_, dx + dxo, (uint)item, io, status,
                    vec, mg, sv);
}

/* GPU variant, tiles: work-group first / WG + g of n / WG (every
 * work-item real: the barrier needs them all). */
__kernel RUMUS_WG_ATTR
void maxpool2d_bwd_tile(ulong n, ulong first, global const real_t *dy,
                        ulong dyo, global const int *idx, ulong io_,
                        global real_t *dx, ulong dxo, long4 io, long4 ks,
                        long4 pd, volatile global int *status, int vec,
                        uint8 mg, uint8 sv, uint4 tl) {
  local float lg[POOL_TILE];
  local int lt[POOL_TILE];
  (void)n;
  const uint grp = (uint)(first / WG) + (uint)get_group_id(0);
  maxpool_bwd_tile(dy + dyo, idx + io_, dx + dxo, grp, io, ks, pd, status,
                   vec, mg, sv, tl, lg, lt);
}

/* ---- GPU variant: average pooling by bands in local memory ----------------
 * The quads read each input once per window that holds it, from the
 * caches: 3 x 3 windows of stride 1 at 128x512x28 ran at a fifth of the
 * copy bandwidth on the H200 (nine loads an output, the backward's
 * divisors recomputed nine times an input).  Here a work-group takes a
 * band of rows of one plane and stages what its windows read in local
 * memory once, coalesced, four loads a lane in flight: the forward BR
 * output rows [oh0, oh1) and the input rows their windows touch, [r0,
 * r1); the backward BR dx rows [h0, h1) and dy / divisor of the output
 * rows whose windows touch them, [q0, q1).  Then each lane computes its
 * outputs (dx elements), lane l taking l, l + WG, ... of the band.  The
 * sums are those of avgpool_at and avgpool_bwd_item in the same order
 * and the staged quotient is the element kernel's term: the same bits.
 * The host sizes the band to at most BAND_CAP staged floats and passes
 * bd = (BR, bands per plane) and, to the backward, the magic numbers of
 * the strides (lanes 2 and 3 of mg, sv: its window ranges divide by
 * them; with integer divisions 3 x 3 windows of stride 2 took 442 us at
 * 64x256x56 on the H100, by multiplication 257, the quads 355, while
 * stride 1 ran 15% faster without either); every extent and product
 * fits in int.
 * Adaptive pooling whose bins divide the input may run here as average
 * pooling with kernel = stride = the bin (where forced: pool.c,
 * adaptive_as_avg). */
#ifndef BAND_CAP
#define BAND_CAP 2048
#endif

/* avg_axis in int. */
inline int avg_axis_i(int o, int k, int s, int p, int n, int *lo, int *hi) {
  const int start = o * s - p, end = min(start + k, n + p);
  *lo = max(start, 0);
  *hi = min(end, n);
  return end - start;
}

/* avg_divisor of output (oh, ow), in int. */
inline float avg_divisor_i(int oh, int ow, int4 io, int4 ks, int2 pd, int cip,
                           int divisor) {
  int h0, h1, w0, w1;
  const int ph = avg_axis_i(oh, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
  const int pw = avg_axis_i(ow, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
  return avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor);
}

/* The first and last output row (column: k = 3) whose window of kernel
 * kk, stride lane k of (mg, sv), padding p holds input row h: floor((h +
 * p) / s) and ceil((h + p - kk + 1) / s), the latter clamped at 0 (a
 * negative one is), by multiplication (pool_qdiv) but for stride 1. */
#define BAND_LAST(h, p, s, k) \
  ((s) == 1 ? (h) + (p) : (int)PQ((uint)((h) + (p)), k))
#define BAND_FIRST(h, p, kk, s, k)           \
  ((h) + (p) - (kk) + 1 <= 0 ? 0             \
   : (s) == 1 ? (h) + (p) - (kk) + 1         \
              : (int)PQ((uint)((h) + (p) - (kk) + (s)), k))

/* Lane counters over the elements of a band's rows of width w: element
 * l, l + WG, ... as (row, column). */
typedef struct {
  int r, c, dr, dc, w;
} band_walk;

inline band_walk band_walk_of(int w) {
  band_walk b;
  const int lid = (int)get_local_id(0);
  b.w = w;
  b.r = lid / w;
  b.c = lid - b.r * w;
  b.dr = WG / w;
  b.dc = WG - b.dr * w;
  return b;
}

inline void band_step(band_walk *b) {
  b->c += b->dc;
  b->r += b->dr;
  if (b->c >= b->w) {
    b->c -= b->w;
    b->r++;
  }
}

/* Stages src[0 .. n) into t. */
inline void band_stage(global const real_t *src, int n, local float *t) {
  for (int i = (int)get_local_id(0); i < n; i += 4 * WG) {
    float v[4];
    for (int k = 0; k < 4; k++)
      v[k] = i + k * WG < n ? LOAD(src, i + k * WG) : 0.0f;
    for (int k = 0; k < 4; k++)
      if (i + k * WG < n) t[i + k * WG] = v[k];
  }
}

/* Stages dy / divisor of output rows [q0, q0 + rows) of plane gp
 * (rows x OW floats) into t. */
inline void band_stage_grad(global const real_t *gp, int q0, int rows,
                            int4 io, int4 ks, int2 pd, int cip, int divisor,
                            local float *t) {
  const int OW = io.s3, n = rows * OW;
  band_walk b = band_walk_of(OW);
  for (int i = (int)get_local_id(0); i < n; i += 4 * WG) {
    float v[4];
    int oh[4], ow[4];
    for (int k = 0; k < 4; k++) {
      oh[k] = q0 + b.r;
      ow[k] = b.c;
      v[k] = i + k * WG < n ? LOAD(gp, q0 * OW + i + k * WG) : 0.0f;
      band_step(&b);
    }
    for (int k = 0; k < 4; k++) {
      if (i + k * WG >= n) break;
      int h0, h1, w0, w1;
      const int ph = avg_axis_i(oh[k], ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
      const int pw = avg_axis_i(ow[k], ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
      t[i + k * WG] =
          v[k] / avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor);
    }
  }
}

inline void avgpool_fwd_band(global const real_t *x, global real_t *y,
                             uint grp, int4 io, int4 ks, int2 pd, int cip,
                             int divisor, int2 bd, local float *t) {
  const int H = io.s0, W = io.s1, OH = io.s2, OW = io.s3;
  const uint plane = grp / (uint)bd.s1;
  const int oh0 = (int)(grp - plane * (uint)bd.s1) * bd.s0;
  const int oh1 = min(oh0 + bd.s0, OH);
  const int r0 = max(0, oh0 * ks.s2 - pd.s0);
  const int r1 = max(r0, min(H, (oh1 - 1) * ks.s2 - pd.s0 + ks.s0));
  band_stage(x + (size_t)plane * (size_t)(H * W) + (size_t)(r0 * W),
             (r1 - r0) * W, t);
  barrier(CLK_LOCAL_MEM_FENCE);
  global real_t *yp =
      y + (size_t)plane * (size_t)(OH * OW) + (size_t)(oh0 * OW);
  const int n = (oh1 - oh0) * OW;
  band_walk b = band_walk_of(OW);
  for (int o = (int)get_local_id(0); o < n; o += WG) {
    int h0, h1, w0, w1;
    const int ph = avg_axis_i(oh0 + b.r, ks.s0, ks.s2, pd.s0, H, &h0, &h1);
    const int pw = avg_axis_i(b.c, ks.s1, ks.s3, pd.s1, W, &w0, &w1);
    float s = 0.0f;
    for (int h = h0; h < h1; h++)
      for (int w = w0; w < w1; w++) s += t[(h - r0) * W + w];
    STORE(s / avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor), yp,
          o);
    band_step(&b);
  }
}

inline void avgpool_bwd_band(global const real_t *dy, global real_t *dx,
                             uint grp, int4 io, int4 ks, int2 pd, int cip,
                             int divisor, int2 bd, uint8 mg, uint8 sv,
                             local float *t) {
  const int H = io.s0, W = io.s1, OH = io.s2, OW = io.s3;
  const uint plane = grp / (uint)bd.s1;
  const int h0 = (int)(grp - plane * (uint)bd.s1) * bd.s0;
  const int h1 = min(h0 + bd.s0, H);
  const int q0 = BAND_FIRST(h0, pd.s0, ks.s0, ks.s2, 2);
  const int q1 = max(q0, min(OH, BAND_LAST(h1 - 1, pd.s0, ks.s2, 2) + 1));
  band_stage_grad(dy + (size_t)plane * (size_t)(OH * OW), q0, q1 - q0, io,
                  ks, pd, cip, divisor, t);
  barrier(CLK_LOCAL_MEM_FENCE);
  global real_t *dp = dx + (size_t)plane * (size_t)(H * W) + (size_t)(h0 * W);
  const int n = (h1 - h0) * W;
  band_walk b = band_walk_of(W);
  for (int e = (int)get_local_id(0); e < n; e += WG) {
    const int h = h0 + b.r, w = b.c;
    const int a0 = max(q0, BAND_FIRST(h, pd.s0, ks.s0, ks.s2, 2));
    const int a1 = min(q1 - 1, BAND_LAST(h, pd.s0, ks.s2, 2));
    const int c0 = BAND_FIRST(w, pd.s1, ks.s1, ks.s3, 3);
    const int c1 = min(OW - 1, BAND_LAST(w, pd.s1, ks.s3, 3));
    float s = 0.0f;
    for (int oh = a0; oh <= a1; oh++)
      for (int ow = c0; ow <= c1; ow++) s += t[(oh - q0) * OW + ow];
    STORE(s, dp, e);
    band_step(&b);
  }
}

/* GPU variant, bands: work-group first / WG + g (every work-item real:
 * the barrier needs them all). */
__kernel RUMUS_WG_ATTR
void avgpool2d_fwd_band(ulong n, ulong first, global const real_t *x,
                        ulong xo, global real_t *y, ulong yo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, int2 bd) {
  local float t[BAND_CAP];
  (void)n;
  const uint grp = (uint)(first / WG) + (uint)get_group_id(0);
  avgpool_fwd_band(x + xo, y + yo, grp, convert_int4(io), convert_int4(ks),
                   convert_int2(pd.s01), cip, divisor, bd, t);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_bwd_band(ulong n, ulong first, global const real_t *dy,
                        ulong dyo, global real_t *dx, ulong dxo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, int2 bd,
                        uint8 mg, uint8 sv) {
  local float t[BAND_CAP];
  (void)n;
  const uint grp = (uint)(first / WG) + (uint)get_group_id(0);
  avgpool_bwd_band(dy + dyo, dx + dxo, grp, convert_int4(io),
                   convert_int4(ks), convert_int2(pd.s01), cip, divisor, bd,
                   mg, sv, t);
}

/* ---- GPU variant: 3 x 3 average windows of stride 1 ------------------------
 * The most common overlapping average pooling, and the bands' slowest
 * case: at 128x512x28 on the H100 the bands ran at 45% of the copy
 * bandwidth forward and 37% backward, their per-output work (window
 * bounds, two loops of run-time trip counts, nine staged loads) costing
 * more than the output's bytes.  Here a band stages a tile with a zero
 * border, so that every output is the same nine terms in the same
 * row-major order, and a lane slides down a column of the band holding
 * the last two rows' taps in registers: three staged loads an output.
 *
 * Both directions are one correlation of a tile T of TW = out width + 2
 * columns: out(j, c) = sum over i, k < 3 of T(j + i, c + k), summed from
 * 0.0f row by row.
 *   forward   T(r, c) = x(oh0 - ph + r, c - pw), out = y rows oh0 + j,
 *             each sum then divided by its divisor;
 *   backward  T(r, c) = dy / divisor at (h0 + ph - 2 + r, c + pw - 2),
 *             out = dx rows h0 + j.
 * T is 0 outside the source plane.  Adding +0.0f to a sum that starts at
 * +0.0f changes nothing (such a sum is never -0.0f, and x + 0 = x for
 * every other x), so the padded terms leave the bits of the bands and
 * the element kernels, whose sums skip them.  The host sizes the band to
 * bd = (BR output rows, bands per plane) with (BR + 2) TW <= BOX3_CAP,
 * for padding 0 or 1 per axis. */
#ifndef BOX3_CAP
#define BOX3_CAP 4096
#endif

/* Where a band's tile comes from: the source plane (rows x cols), the
 * plane coordinates of T(0, 0), and grad: 1 for dy, each value over its
 * output's divisor, 0 for x. */
typedef struct {
  int rows, cols, r0, c0, grad;
} box3_src;

/* T(r, c) from the source plane sp (0 outside it). */
inline float box3_value(global const real_t *sp, box3_src s, int r, int c,
                        int4 io, int4 ks, int2 pd, int cip, int divisor) {
  const int pr = s.r0 + r, pc = s.c0 + c;
  if (pr < 0 || pr >= s.rows || pc < 0 || pc >= s.cols) return 0.0f;
  const float v = LOAD(sp, pr * s.cols + pc);
  return s.grad ? v / avg_divisor_i(pr, pc, io, ks, pd, cip, divisor) : v;
}

/* Stages the n = rows x tw floats of T, four loads a lane in flight. */
inline void box3_stage(global const real_t *sp, box3_src s, int n, int tw,
                       int4 io, int4 ks, int2 pd, int cip, int divisor,
                       local float *t) {
  band_walk b = band_walk_of(tw);
  for (int i = (int)get_local_id(0); i < n; i += 4 * WG) {
    float v[4];
    for (int k = 0; k < 4; k++) {
      v[k] = i + k * WG < n
                 ? box3_value(sp, s, b.r, b.c, io, ks, pd, cip, divisor)
                 : 0.0f;
      band_step(&b);
    }
    for (int k = 0; k < 4; k++)
      if (i + k * WG < n) t[i + k * WG] = v[k];
  }
}

/* The sum of out(j, c) from the taps of its three tile rows. */
inline float box3_sum(float3 a, float3 b, float3 c) {
  float s = 0.0f;
  s += a.x;
  s += a.y;
  s += a.z;
  s += b.x;
  s += b.y;
  s += b.z;
  s += c.x;
  s += c.y;
  s += c.z;
  return s;
}

inline float3 box3_taps(local const float *t, int tw, int r, int c) {
  local const float *p = t + r * tw + c;
  return (float3)(p[0], p[1], p[2]);
}

/* Lane l's share of a band of `rows` output rows of width ow: rows [*j0,
 * *j1) of columns c0, c0 + step, ... (lanes in WG / ow row groups where
 * a row fits a work-group, else one). */
inline int box3_share(int rows, int ow, int *j0, int *j1, int *step) {
  const int lid = (int)get_local_id(0);
  const int groups = ow <= WG ? WG / ow : 1;
  const int g = ow <= WG ? lid / ow : 0;
  const int per = (rows + groups - 1) / groups;
  *j0 = min(g * per, rows);
  *j1 = min(*j0 + per, rows);
  *step = ow <= WG ? ow : WG;
  return ow <= WG ? lid - g * ow : lid;
}

/* Output rows [j0, j1) of column c: forward (dx == 0) the quotients of
 * y rows oh0 + j, backward the sums of dx rows. */
inline void box3_column(local const float *t, int tw, int j0, int j1, int c,
                        global real_t *op, int ow, int oh0, int4 io,
                        int4 ks, int2 pd, int cip, int divisor, int dx) {
  int w0, w1;
  const int pw = avg_axis_i(c, ks.s1, ks.s3, pd.s1, io.s1, &w0, &w1);
  float3 a = box3_taps(t, tw, j0, c), b = box3_taps(t, tw, j0 + 1, c);
  for (int j = j0; j < j1; j++) {
    const float3 n = box3_taps(t, tw, j + 2, c);
    const float s = box3_sum(a, b, n);
    if (dx) {
      STORE(s, op, j * ow + c);
    } else {
      int h0, h1;
      const int ph = avg_axis_i(oh0 + j, ks.s0, ks.s2, pd.s0, io.s0, &h0, &h1);
      STORE(s / avg_divisor(ph * pw, (h1 - h0) * (w1 - w0), cip, divisor),
            op, j * ow + c);
    }
    a = b;
    b = n;
  }
}

/* Band grp of the forward (dx 0: from x into y) or the backward (from dy
 * into dx): stage, then each lane its columns. */
inline void box3_band(global const real_t *in, global real_t *out, uint grp,
                      int4 io, int4 ks, int2 pd, int cip, int divisor,
                      int2 bd, int dx, local float *t) {
  const int H = io.s0, W = io.s1, OH = io.s2, OW = io.s3;
  const int orows = dx ? H : OH, ow = dx ? W : OW, tw = ow + 2;
  const uint plane = grp / (uint)bd.s1;
  const int j0 = (int)(grp - plane * (uint)bd.s1) * bd.s0;
  const int rows = min(j0 + bd.s0, orows) - j0;
  box3_src s;
  s.rows = dx ? OH : H;
  s.cols = dx ? OW : W;
  s.r0 = dx ? j0 + pd.s0 - 2 : j0 - pd.s0;
  s.c0 = dx ? pd.s1 - 2 : -pd.s1;
  s.grad = dx;
  box3_stage(in + (size_t)plane * (size_t)(s.rows * s.cols), s,
             (rows + 2) * tw, tw, io, ks, pd, cip, divisor, t);
  barrier(CLK_LOCAL_MEM_FENCE);
  global real_t *op = out + (size_t)plane * (size_t)(orows * ow) +
                      (size_t)(j0 * ow);
  int a, b, step;
  for (int c = box3_share(rows, ow, &a, &b, &step); c < ow && a < b;
       c += step)
    box3_column(t, tw, a, b, c, op, ow, j0, io, ks, pd, cip, divisor, dx);
}

/* GPU variant, 3 x 3 windows of stride 1: work-group first / WG + g
 * (every work-item real: the barrier needs them all). */
__kernel RUMUS_WG_ATTR
void avgpool2d_fwd_box3(ulong n, ulong first, global const real_t *x,
                        ulong xo, global real_t *y, ulong yo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, int2 bd) {
  local float t[BOX3_CAP];
  (void)n;
  const uint grp = (uint)(first / WG) + (uint)get_group_id(0);
  box3_band(x + xo, y + yo, grp, convert_int4(io), convert_int4(ks),
            convert_int2(pd.s01), cip, divisor, bd, 0, t);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_bwd_box3(ulong n, ulong first, global const real_t *dy,
                        ulong dyo, global real_t *dx, ulong dxo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, int2 bd) {
  local float t[BOX3_CAP];
  (void)n;
  const uint grp = (uint)(first / WG) + (uint)get_group_id(0);
  box3_band(dy + dyo, dx + dxo, grp, convert_int4(io), convert_int4(ks),
            convert_int2(pd.s01), cip, divisor, bd, 1, t);
}

/* ---- GPU variant: average windows that tile the input ---------------------
 * Windows of kh x kw, stride (kh, kw), no padding, H = kh OH, W = kw OW:
 * adaptive pooling whose bins divide the input, and average pooling of
 * such windows other than 2 x 2.  Each input lies in one window, so the
 * backward is a broadcast of dy / divisor and the forward a sum of
 * whole rows of kw.  The adaptive quads and element kernels computed each
 * window's bounds per element and moved their bytes at 60-63% of the copy
 * bandwidth (H100, 28 -> 7 at 256x512).  Here the forward takes an output
 * a work-item (kh loads of 4 where kw = 4 and rows are aligned), the
 * backward a quad of dx (one load of dy where kw is 4 and the quad
 * aligned), both in groups of TILED_LS (pool.c's local size for one
 * access in flight a work-item).  Sums and quotients are those of the
 * adaptive and average kernels in their order (0.0f + the one term
 * backward): the same bits.  d is the divisor (the window's area, or
 * the average's override); lanes of (mg, sv): 0 quads a row (backward)
 * or OW (forward), 5 H (backward) or OH (forward), 1 kw, 2 kh. */

/* Output (oh, ow) of plane xp: the window's sum over d. */
inline float tiled_out(global const real_t *xp, uint oh, uint ow, uint W,
                       uint kh, uint kw, float d, int vec4) {
  float s = 0.0f;
  for (uint i = 0; i < kh; i++) {
    global const real_t *r = xp + (size_t)((oh * kh + i) * W + ow * kw);
    if (vec4) {
      const float4 v = RUMUS_LOADA(RUMUS_STORAGE, 4, r, 0);
      s += v.x;
      s += v.y;
      s += v.z;
      s += v.w;
    } else {
      for (uint j = 0; j < kw; j++) s += LOAD(r, j);
    }
  }
  return s / d;
}

/* Work-item first + g: output item of the N C OH OW outputs (vec4: kw
 * is 4 and every row of x aligned to 4). */
__kernel void avgpool2d_fwd_tiled(ulong n, ulong first,
                                  global const real_t *x, ulong xo,
                                  global real_t *y, ulong yo, long4 io,
                                  int d, int vec4, uint8 mg, uint8 sv) {
  POOL_ITEM(n, first);
  const uint H = (uint)io.s0, W = (uint)io.s1, OH = (uint)io.s2,
             OW = (uint)io.s3, kh = H / OH, kw = W / OW;
  const uint row = PQ((uint)item, 0), ow = (uint)item - row * OW;
  const uint plane = PQ(row, 5), oh = row - plane * OH;
  const float q = tiled_out(x + xo + (size_t)plane * (size_t)(H * W), oh, ow,
                            W, kh, kw, (float)d, vec4);
  STORE(q, y + yo, item);
}

/* Work-item first + g: quad item of dx (vec: W a multiple of 4, dx
 * aligned). */
__kernel void avgpool2d_bwd_tiled(ulong n, ulong first,
                                  global const real_t *dy, ulong dyo,
                                  global real_t *dx, ulong dxo, long4 io,
                                  int d, int vec, uint8 mg, uint8 sv) {
  POOL_ITEM(n, first);
  const pool_quad u = pool_quad_of((uint)item, io, mg, sv);
  const uint OH = (uint)io.s2, OW = (uint)io.s3, W = (uint)io.s1;
  const uint kw = W / OW;
  global const real_t *gr = dy + dyo + (size_t)u.plane * (size_t)(OH * OW) +
                            (size_t)(PQ(u.h, 2) * OW);
  uint ow = PQ(u.w0, 1), r = u.w0 - ow * kw;
  float q = LOAD(gr, ow) / (float)d;
  float4 s;
  s.s0 = 0.0f + q;
  for (uint i = 1; i < 4; i++) {
    if (++r == kw) {
      r = 0;
      ow++;
      q = i < u.nw ? LOAD(gr, ow) / (float)d : 0.0f;
    }
    if (i == 1) s.s1 = 0.0f + q;
    if (i == 2) s.s2 = 0.0f + q;
    if (i == 3) s.s3 = 0.0f + q;
  }
  pool_quad_store(dx + dxo + u.row * (size_t)W + u.w0, s, u.nw, vec);
}

/* ---- GPU variant: average forward of 3 x 3 windows, stride 2, padding 1
 * As maxpool_fwd_k3s2 (W = 2 OW, OW a multiple of 4): a work-item takes
 * outputs 4 p .. 4 p + 3 of output row (plane, oh) and reads the 3 x 9
 * block of x under them once, per row column 8 p - 1 and two loads of 4
 * (the bands ran at 71% of the copy bandwidth on the H100 at 64x256x56).
 * Rows outside the image add nothing and column -1 adds +0.0 (which a
 * sum from +0.0 keeps): the element kernel's sums and divisors. */
/* The divisor of output (oh, ow) of 3 x 3 windows, stride 2, padding 1. */
inline float avg_k3s2_div(int oh, int ow, int4 io, int cip, int divisor) {
  return avg_divisor_i(oh, ow, io, (int4)(3, 3, 2, 2), (int2)(1, 1), cip,
                       divisor);
}

inline void avgpool_fwd_k3s2(global const real_t *x, global real_t *y,
                             uint item, int4 io, int cip, int divisor,
                             int vec, uint8 mg, uint8 sv) {
  const pool_pair u = pool_oq2_of(item, convert_long4(io), mg, sv);
  const int H = io.s0, W = io.s1, c0 = 8 * (int)u.p - 1;
  float4 s = (float4)(0.0f);
  for (int i = 0; i < 3; i++) {
    const int h = 2 * (int)u.oh - 1 + i;
    if (h < 0 || h >= H) continue;
    const size_t e = u.e + (size_t)((i - 1) * W); /* (h, 8 p) */
    float4 ev, od;
    pool_row8(x, e, vec, &ev, &od);
    const float left = c0 >= 0 ? LOAD(x, e - 1) : 0.0f;
    s += (float4)(left, od.s0, od.s1, od.s2);
    s += ev;
    s += od;
  }
  const int ow = 4 * (int)u.p, oh = (int)u.oh;
  const float4 d = (float4)(avg_k3s2_div(oh, ow, io, cip, divisor),
                            avg_k3s2_div(oh, ow + 1, io, cip, divisor),
                            avg_k3s2_div(oh, ow + 2, io, cip, divisor),
                            avg_k3s2_div(oh, ow + 3, io, cip, divisor));
  pool_store4(y + u.o, s / d, vec);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_fwd_k3s2(ulong n, ulong base, global const real_t *x,
                        ulong xo, global real_t *y, ulong yo, long4 io,
                        long4 ks, long4 pd, int cip, int divisor, int vec,
                        uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  (void)ks;
  (void)pd;
  avgpool_fwd_k3s2(x + xo, y + yo, (uint)item, convert_int4(io), cip,
                   divisor, vec, mg, sv);
}

/* ---- GPU variant: average backward of 3 x 3 windows, stride 2, padding 1
 * By the blocks of maxpool_bwd_k3s2b (W = 2 OW a multiple of 4): work-item
 * (plane, a, m) writes dx rows 2 a and 2 a + 1 at columns 4 m .. 4 m + 3
 * from dy / divisor of output rows a and a + 1, columns 2 m .. 2 m + 2,
 * each read by two work-items (the bands staged them once, but ran at 31%
 * of the copy bandwidth on the H100 at 64x256x56 for the divisors and
 * window bounds of every dx element).  Row 2 a takes output row a, row 2
 * a + 1 rows a and a + 1, columns in the order of the element kernels:
 * the same sums from 0.0f, the same quotients, the same bits. */

/* dy / divisor of output (oh, ow) of plane gp, or 0 past the output. */
inline float avg_k3s2_term(global const real_t *gp, int oh, int ow, int4 io,
                           int cip, int divisor) {
  if (oh >= io.s2 || ow >= io.s3) return 0.0f;
  return LOAD(gp, oh * io.s3 + ow) / avg_k3s2_div(oh, ow, io, cip, divisor);
}

/* s plus the terms g of one output row, columns 2 m .. 2 m + 2, for the
 * dx quad at 4 m. */
inline float4 avg_k3s2_add(float4 s, float3 g) {
  s.s0 += g.x;
  s.s1 += g.x;
  s.s1 += g.y;
  s.s2 += g.y;
  s.s3 += g.y;
  s.s3 += g.z;
  return s;
}

inline void avgpool_bwd_k3s2b(global const real_t *dy, global real_t *dx,
                              uint item, int4 io, int cip, int divisor,
                              int vec, uint8 mg, uint8 sv) {
  const uint H = (uint)io.s0, W = (uint)io.s1, OH = (uint)io.s2;
  const uint OW = (uint)io.s3, A = max((H + 1u) / 2u, OH);
  const uint rb = PQ(item, 0), m = item - rb * (W / 4u);
  const uint plane = PQ(rb, 6), a = rb - plane * A;
  const int ow = 2 * (int)m;
  const uint q = 2u * a * W + 4u * m;
  global const real_t *gp = dy + (size_t)plane * (size_t)(OH * OW);
  global real_t *dp = dx + (size_t)plane * (size_t)(H * W);
  float4 s0 = (float4)(0.0f), s1 = (float4)(0.0f);
  for (uint r = 0; r < 2u; r++) {
    const int oh = (int)(a + r);
    const float3 g = (float3)(avg_k3s2_term(gp, oh, ow, io, cip, divisor),
                              avg_k3s2_term(gp, oh, ow + 1, io, cip, divisor),
                              avg_k3s2_term(gp, oh, ow + 2, io, cip, divisor));
    if (r == 0u) s0 = avg_k3s2_add(s0, g);
    s1 = avg_k3s2_add(s1, g);
  }
  if (2u * a < H) pool_quad_store(dp + q, s0, 4u, vec);
  if (2u * a + 1u < H) pool_quad_store(dp + q + W, s1, 4u, vec);
}

__kernel RUMUS_WG_ATTR
void avgpool2d_bwd_k3s2b(ulong n, ulong base, global const real_t *dy,
                         ulong dyo, global real_t *dx, ulong dxo, long4 io,
                         long4 ks, long4 pd, int cip, int divisor, int vec,
                         uint8 mg, uint8 sv) {
  POOL_ITEM(n, base);
  (void)ks;
  (void)pd;
  avgpool_bwd_k3s2b(dy + dyo, dx + dxo, (uint)item, convert_int4(io), cip,
                    divisor, vec, mg, sv);
}

/* ---- CPU variant: 3 x 3 windows of stride 1 on rows of at most 16 -------
 * On rows of 14 (the 14 x 14 images of the last stages of a CNN) the ring
 * kernels above ran at 13-25% of STREAM forward and 13-14% backward on
 * PoCL: a row is one block of 8 and one overlapping block of 8, each a
 * chain of nine dependent adds from a private ring just written (whose
 * loads wait for the stores).  Here a row is one float16: an input row
 * (the backward: a dy row over its divisors) with its lanes past the row
 * set to 0, and the taps of a window row are that vector shifted by one
 * lane either way (constant swizzles), zeros shifted in.  Output (dx)
 * row k sums its three rows' taps in the element kernels' order; the
 * zeros stand for the columns and rows outside, which they skip: the
 * same bits (a sum from +0.0 does not change by adding +0.0).  A row is
 * loaded whole where 16 elements from its start lie inside the tensor,
 * else element by element.  Work-item i takes output (dx) rows i rpw ..
 * of the N C rows. */

#define R16_LANES (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* v moved by one or two lanes: lane l takes v's lane l + 1 (l - 1, l + 2,
 * l - 2), 0 where that is outside. */
inline float16 r16_next(float16 v) {
  return (float16)(v.s1234, v.s5678, v.s9abc, v.sdef, 0.0f);
}
inline float16 r16_prev(float16 v) {
  return (float16)(0.0f, v.s0123, v.s4567, v.s89ab, v.scde);
}

/* The three taps of a window row, lanes l: columns l - p, l - p + 1, l -
 * p + 2 of row v, for p 0, 1 or 2 (selects on a scalar: no branch in the
 * loops). */
inline void r16_taps(float16 v, int p, float16 t[3]) {
  const float16 nx = r16_next(v), pv = r16_prev(v);
  t[0] = p == 0 ? v : p == 1 ? pv : r16_prev(pv);
  t[1] = p == 0 ? nx : p == 1 ? v : pv;
  t[2] = p == 0 ? r16_next(nx) : p == 1 ? nx : v;
}

/* Row r (n elements, n <= 16) of a tensor of `total` elements at p, its
 * lanes from n on 0. */
inline float16 r16_row(global const real_t *p, size_t r, int n,
                       size_t total) {
  const size_t e = r * (size_t)n;
  float16 v;
  if (e + 16 <= total) {
    v = POOL_LDN(16, p, e);
  } else {
    float t[16];
    for (int l = 0; l < 16; l++) t[l] = l < n ? LOAD(p, e + l) : 0.0f;
    v = vload16(0, t);
  }
  return select((float16)(0.0f), v, R16_LANES < n);
}

/* A call's geometry: io, pd, the divisor override (0: none), cip, the
 * column factor of every lane's divisor (count_include_pad: the padded
 * width, else the columns kept), the direction, the taps' p (ph forward,
 * 2 - ph backward: lanes l take columns l - p .. l - p + 2), the source
 * row of output row 0 (off) and the elements of the source (x forward,
 * dy backward). */
typedef struct {
  int4 io;
  int2 pd;
  int divisor, cip, bwd, p, off;
  float16 wf;
  size_t total;
} r16_geom;

inline r16_geom r16_geom_of(int4 io, int2 pd, int cip, int divisor,
                            size_t rows, int bwd) {
  r16_geom g;
  g.io = io;
  g.pd = pd;
  g.divisor = divisor;
  g.cip = cip;
  g.bwd = bwd;
  g.p = bwd ? 2 - pd.s1 : pd.s1;
  g.off = bwd ? pd.s0 - 2 : -pd.s0;
  const int16 st = R16_LANES - pd.s1, en = min(st + 3, io.s1 + pd.s1);
  g.wf = convert_float16(cip ? en - st : min(en, io.s1) - max(st, 0));
  g.total = rows / (size_t)(bwd ? io.s0 : io.s2) *
            (size_t)(bwd ? io.s2 * io.s3 : io.s0 * io.s1);
  return g;
}

/* The divisors of output row oh's lanes (3 x 3 windows, stride 1): the
 * row's factor times the lane's, small integers, exact in float. */
inline float16 r16_div(const r16_geom *g, int oh) {
  if (g->divisor > 0) return (float16)((float)g->divisor);
  int h0, h1;
  const int ph = avg_axis_i(oh, 3, 1, g->pd.s0, g->io.s0, &h0, &h1);
  return (float)(g->cip ? ph : h1 - h0) * g->wf;
}

/* Stores the first n lanes of v at p + e; `spill`: all 16, the lanes past
 * n landing where a later store of the same work-item writes. */
inline void r16_store(float16 v, global real_t *p, size_t e, int n,
                      int spill) {
  if (n == 16 || spill) {
    POOL_STN(16, v, p, e);
    return;
  }
  float8 h = v.lo;
  if (n >= 8) {
    POOL_STN(8, h, p, e);
    h = v.hi;
    e += 8;
    n -= 8;
  }
  float4 q = h.lo;
  if (n >= 4) {
    POOL_STN(4, q, p, e);
    q = h.hi;
    e += 4;
    n -= 4;
  }
  if (n >= 2) {
    STORE(q.s0, p, e);
    STORE(q.s1, p, e + 1);
    q.lo = q.hi;
    e += 2;
    n -= 2;
  }
  if (n >= 1) STORE(q.s0, p, e);
}

/* Row k of the rows a window reads, as the taps add it: forward input row
 * k of plane `plane`, backward dy row k over its divisors (lanes past the
 * row 0 again: their divisors may be 0); 0 outside the plane. */
inline float16 r16_source(global const real_t *in, size_t plane, int k,
                          const r16_geom *g) {
  const int rows = g->bwd ? g->io.s2 : g->io.s0;
  const int n = g->bwd ? g->io.s3 : g->io.s1;
  if (k < 0 || k >= rows) return (float16)(0.0f);
  const float16 v =
      r16_row(in, plane * (size_t)rows + (size_t)k, n, g->total);
  if (!g->bwd) return v;
  return select((float16)(0.0f), v / r16_div(g, k), R16_LANES < n);
}

/* s plus the three taps of row v (lanes l: columns l - p .. l - p + 2). */
inline float16 r16_add_row(float16 s, float16 v, int p) {
  float16 t[3];
  r16_taps(v, p, t);
  s += t[0];
  s += t[1];
  s += t[2];
  return s;
}

/* Output row h over source rows a, b, c (the forward's quotients). */
inline float16 r16_out(float16 a, float16 b, float16 c, int h,
                       const r16_geom *g) {
  float16 s = r16_add_row((float16)(0.0f), a, g->p);
  s = r16_add_row(r16_add_row(s, b, g->p), c, g->p);
  return g->bwd ? s : s / r16_div(g, h);
}

/* Output rows [r0, r1) of the N C OH (forward), dx rows of the N C H
 * (backward): output row h sums source rows h + off .. h + off + 2, which
 * slide down a plane in registers, each loaded (and divided) once; two
 * rows at a time within a plane, two chains of adds in flight (one row's
 * chain and division took as long as the row's other work). */
inline void r16_rows(global const real_t *in, global real_t *out, size_t r0,
                     size_t r1, const r16_geom *g) {
  const int height = g->bwd ? g->io.s0 : g->io.s2;
  const int width = g->bwd ? g->io.s1 : g->io.s3;
  long h;
  size_t plane = pool_plane(r0, height, &h);
  float16 a = (float16)(0.0f), b = (float16)(0.0f);
  int fresh = 1;
  for (size_t r = r0; r < r1;) {
    const int k = (int)h + g->off, two = r + 1 < r1 && h + 1 < height;
    if (fresh) {
      a = r16_source(in, plane, k, g);
      b = r16_source(in, plane, k + 1, g);
    }
    const float16 c = r16_source(in, plane, k + 2, g);
    const float16 d =
        two ? r16_source(in, plane, k + 3, g) : (float16)(0.0f);
    /* spill where rows of this work-item still to come cover the lanes */
    r16_store(r16_out(a, b, c, (int)h, g), out, r * (size_t)width, width,
              (size_t)(16 - width) <= (r1 - 1 - r) * (size_t)width);
    if (two)
      r16_store(r16_out(b, c, d, (int)h + 1, g), out,
                (r + 1) * (size_t)width, width,
                (size_t)(16 - width) <= (r1 - 2 - r) * (size_t)width);
    a = two ? c : b;
    b = two ? d : c;
    r += two ? 2 : 1;
    h += two ? 2 : 1;
    fresh = h == height;
    if (fresh) {
      h = 0;
      plane++;
    }
  }
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void avgpool2d_fwd_r16(ulong n, ulong base, global const real_t *x, ulong xo,
                       global real_t *y, ulong yo, long4 io, long4 ks,
                       long4 pd, int cip, int divisor, ulong rows,
                       uint rpw) {
  (void)ks;
  POOL_ITEM(n, base);
  const size_t r0 = item * (size_t)rpw;
  const r16_geom g = r16_geom_of(convert_int4(io), convert_int2(pd.s01), cip,
                                 divisor, (size_t)rows, 0);
  r16_rows(x + xo, y + yo, r0, min(r0 + (size_t)rpw, (size_t)rows), &g);
}

__kernel RUMUS_REQD_WG(ROWS_WG, 1, 1)
void avgpool2d_bwd_r16(ulong n, ulong base, global const real_t *dy,
                       ulong dyo, global real_t *dx, ulong dxo, long4 io,
                       long4 ks, long4 pd, int cip, int divisor, ulong rows,
                       uint rpw) {
  (void)ks;
  POOL_ITEM(n, base);
  const size_t r0 = item * (size_t)rpw;
  const r16_geom g = r16_geom_of(convert_int4(io), convert_int2(pd.s01), cip,
                                 divisor, (size_t)rows, 1);
  r16_rows(dy + dyo, dx + dxo, r0, min(r0 + (size_t)rpw, (size_t)rows), &g);
}
