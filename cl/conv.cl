/*
 * conv.cl - 2-D convolution in NCHW (PyTorch's conv2d): forward, the
 * gradient of the input and the gradient of the weight, as implicit GEMMs
 * that gather their operand straight from x or dy (no im2col buffer, no
 * loop over the batch on the host).
 *
 * Layout: x [N, C, H, W], w [OC, C/G, KH, KW], y [N, OC, OH, OW], G groups
 * (group g: input channels g*Cg .. , output channels g*OCg ..), with
 *   OH = (H + 2 PH - DH (KH - 1) - 1) / SH + 1   (the same for W).
 * Per group, with a tap t = (c, kh, kw) of the Cg * KH * KW taps and an
 * output pixel q = (n, oh, ow) of the N * OH * OW pixels:
 *   forward      y[n, o, oh, ow] = bias[o] + sum_t w[o, t] * X(q, t)
 *   input grad   dx[n, c, ih, iw] = sum over (o, kh, kw) of w[o, c, kh, kw]
 *                * dy[n, o, oh, ow] where ih = oh SH - PH + kh DH and
 *                iw = ow SW - PW + kw DW (the gather form of the transposed
 *                convolution: each dx element sums the pairs that touch it)
 *   weight grad  dw[o, t] = sum_q dy[n, o, oh, ow] * X(q, t)
 * where X(q, t) = x[n, g Cg + c, oh SH - PH + kh DH, ow SW - PW + kw DW],
 * 0 in the padding.  Each is C[m][j] = sum_k A(m, k) B(k, j): m runs over
 * the group's output channels (forward, weight grad) or input channels
 * (input grad); j over output pixels, input pixels or taps; k over taps,
 * (o, kh, kw) or pixels.  Every sum starts at 0 and runs k upwards with one
 * fma per term, in both variants, so the two give the same bits; the
 * forward adds the bias after the sum (its epilogue).  The weight
 * gradient's k (N * OH * OW pixels) is cut into S chunks of KC pixels that
 * the host fixes from the shape alone; chunk sums go to a float scratch
 * [S][OC][Cg KH KW] and conv_wsum adds them in chunk order (S = 1: stored
 * directly), so its bits depend on the shape only, not on the device.
 *
 * The geometry arrives as one long16: N, C, H, W, OC, OH, OW, KH, KW, SH,
 * SW, PH, PW, DH, DW, G.  Element offsets are ulong and indices size_t;
 * coordinates are signed (padding makes them negative), int in the CPU
 * kernels' gathers (the host keeps padded extents below 2^30): 64-bit
 * coordinates made the forward's gather 1.6x slower on PoCL.
 *
 * CPU variant (CONV_GPU 0): barrier-free, one work-item per LANES
 * columns and 4 blocks of MB rows (MG), float16 accumulators; the B
 * values of a k are gathered lane by lane (coordinates per lane computed
 * once per work-item) and A is broadcast.  The input gradient's columns
 * are LANES pixels of one row and one stride phase, and its k only the
 * taps that touch them (see conv_bwd_data_cpu).  Work-groups of CPU_WG
 * work-items along dimension 0.
 * GPU variant (CONV_GPU 1): TS x TS work-groups, 4 x 4 C elements per
 * work-item; A and B tiles of TS k-steps are staged in local memory, each
 * work-item gathering four elements of each.
 * Grid: dimension 0 columns, 1 rows, 2 groups (weight grad: z = s G + g),
 * from z0 on (the host launches at most 65535 along dimension 2).
 */

#ifndef CONV_GPU
#define CONV_GPU 0 /* 1: the local-memory tiled kernels, 0: the CPU ones */
#endif
#ifndef MB
#define MB 4 /* CPU: rows (channels) of a register block: 1, 4 or 16 */
#endif
#ifndef TS
#define TS 16 /* GPU: tile edge (work-group TS x TS) */
#endif
#ifndef CPU_WG
#define CPU_WG 8 /* CPU: work-group size along dimension 0 */
#endif

#define LANES 16 /* CPU: columns per work-item, one float16 */
#define UNROLL _Pragma("unroll")

typedef struct {
  long n, c, h, w, oc, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, g;
} geo_t;

inline geo_t geo_of(long16 v) {
  geo_t g = {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7,
             v.s8, v.s9, v.sa, v.sb, v.sc, v.sd, v.se, v.sf};
  return g;
}

/* 1 if input pixel (ih, iw) lies inside the image (0: padding). */
inline int x_in(const geo_t *g, long ih, long iw) {
  return (ih >= 0) & (ih < g->h) & (iw >= 0) & (iw < g->w);
}

/* dy's coordinate along an axis of stride s and extent o for t = i + P -
 * k D (input coordinate i, tap k): t / s where t >= 0, s divides t and
 * t / s < o; *ok says whether it is.  Branch-free (& rather than &&), so
 * the CPU kernels' lane loops vectorise; stride 1 skips the division. */
inline int dy_at(int t, int s, int o, int *ok) {
  const int q = s == 1 ? t : t / s;
  *ok = (t >= 0) & (q < o) & (q * s == t);
  return q;
}

/* conv_wsum: dw[i] = part[0][i] + part[1][i] + ... in chunk order, in
 * work-groups of WG. */
__kernel RUMUS_WG_ATTR
void conv_wsum(global const float *restrict part, ulong total,
                        ulong S, global real_t *restrict dw, ulong dw_off) {
  const size_t i = get_global_id(0);
  if (i >= total) return;
  float acc = part[i];
  for (size_t s = 1; s < S; s++) acc += part[s * (size_t)total + i];
  STORE(acc, dw, (size_t)dw_off + i);
}

#if !CONV_GPU
/* ---- CPU variant ----------------------------------------------------------
 * A work-item owns LANES columns and up to MG = 4 MB rows.  k runs in
 * chunks of KCH: the chunk's B values are gathered once into `col` (one
 * float16 per k, in L1) with the offset of A's element for each k, then
 * every block of MB rows multiplies the chunk, its float16 accumulators
 * kept in `acc` between chunks.  Gathering once per chunk for all MG rows,
 * instead of once per block of MB rows, made the forward at 64 x 32 ->
 * 64 x 14 x 14 about 3x faster on the CI machine. */

#define MG (4 * MB) /* rows per work-item */
#define KCH 128     /* k per chunk */

/* acc[b * MB + m] += sum over the chunk's kn k of A[abase + (r0 + b MB +
 * m) astride + aoff[k]] * col[k], for the rows below `rows` (rows past
 * it re-read the last one; they are not stored). */
inline void cpu_chunk(global const real_t *restrict A, size_t abase,
                      size_t astride, size_t r0, size_t rows,
                      const size_t *aoff, const float16 *col, size_t kn,
                      float16 *acc) {
  for (size_t b = 0; b < 4 && r0 + b * MB < rows; b++) {
    size_t ar[MB];
    UNROLL for (int m = 0; m < MB; m++)
      ar[m] = abase + min(r0 + b * MB + m, rows - 1) * astride;
    float16 a[MB];
    UNROLL for (int m = 0; m < MB; m++) a[m] = acc[b * MB + m];
    for (size_t k = 0; k < kn; k++) {
      const float16 v = col[k];
      UNROLL for (int m = 0; m < MB; m++)
        a[m] = fma((float16)LOAD(A, ar[m] + aoff[k]), v, a[m]);
    }
    UNROLL for (int m = 0; m < MB; m++) acc[b * MB + m] = a[m];
  }
}

/* Stores acc + add[row] (add NULL: nothing) at rows r0 .. (< rows) of the
 * output, row r of lane j at base[j] + (r - r0) * pitch; lanes contiguous
 * when `run`. */
inline void cpu_store(global real_t *out, const size_t *base, size_t pitch,
                      size_t r0, size_t rows, size_t lanes, int run,
                      const float16 *acc, global const real_t *add,
                      size_t add_off) {
  for (size_t m = 0; m < MG && r0 + m < rows; m++) {
    const float16 v = acc[m] + (add ? LOAD(add, add_off + m) : 0.0f);
    if (run) {
      RUMUS_STOREN(RUMUS_STORAGE, 16, v, out, base[0] + m * pitch);
    } else {
      const float *e = (const float *)&v;
      for (size_t j = 0; j < lanes; j++) STORE(e[j], out, base[j] + m * pitch);
    }
  }
}

/* Forward: work-item (pixel block, MG output channels, group); k = tap
 * (c, kh, kw), A = w's rows. */
__kernel RUMUS_REQD_WG(CPU_WG, 1, 1)
void conv_fwd_cpu(global const real_t *restrict x, ulong x_off,
                  global const real_t *restrict w, ulong w_off,
                  global const real_t *restrict bias, ulong b_off,
                  int has_bias, global real_t *restrict y, ulong y_off,
                  long16 gv, ulong z0) {
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, np = g.n * ohw, hw = g.h * g.w;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t kt = cg * taps;
  const size_t q0 = get_global_id(0) * LANES, r0 = get_global_id(1) * MG;
  const size_t grp = get_global_id(2) + (size_t)z0;
  if (q0 >= np || r0 >= ocg) return;
  size_t xb[LANES], yb[LANES];
  int ih0[LANES], iw0[LANES];
  for (size_t j = 0; j < LANES; j++) {
    const size_t q = q0 + j < np ? q0 + j : np - 1;
    const size_t n = q / ohw, p = q - n * ohw;
    const long oh = (long)(p / g.ow), ow = (long)(p - oh * g.ow);
    xb[j] = (size_t)x_off + (n * g.c + grp * cg) * hw;
    yb[j] = (size_t)y_off + (n * g.oc + grp * ocg + r0) * ohw + p;
    ih0[j] = q0 + j < np ? (int)(oh * g.sh - g.ph) : (int)g.h; /* 0 past */
    iw0[j] = (int)(ow * g.sw - g.pw);
  }
  float16 acc[MG], col[KCH];
  size_t aoff[KCH];
  for (int m = 0; m < MG; m++) acc[m] = 0.0f;
  size_t c = 0;
  long kh = 0, kw = 0;
  for (size_t k0 = 0; k0 < kt; k0 += KCH) {
    const size_t kn = min((size_t)KCH, kt - k0);
    for (size_t k = 0; k < kn; k++) {
      float xv[LANES];
      const int dkh = (int)(kh * g.dh), dkw = (int)(kw * g.dw);
      const int H = (int)g.h, W = (int)g.w;
      const size_t xcb = c * hw;
      for (size_t j = 0; j < LANES; j++) {
        const int ih = ih0[j] + dkh, iw = iw0[j] + dkw;
        xv[j] = (((uint)ih < (uint)H) & ((uint)iw < (uint)W))
                    ? LOAD(x, xb[j] + xcb + (size_t)ih * W + iw)
                    : 0.0f;
      }
      col[k] = vload16(0, xv);
      aoff[k] = k0 + k;
      if (++kw == g.kw) {
        kw = 0;
        if (++kh == g.kh) {
          kh = 0;
          c++;
        }
      }
    }
    cpu_chunk(w, (size_t)w_off + grp * ocg * kt, kt, r0, ocg, aoff, col, kn,
              acc);
  }
  const size_t lanes = min((size_t)LANES, np - q0);
  const int run = lanes == LANES && q0 / ohw == (q0 + LANES - 1) / ohw;
  cpu_store(y, yb, ohw, r0, ocg, lanes, run, acc, has_bias ? bias : 0,
            (size_t)b_off + grp * ocg + r0);
}

/* Input gradient, by stride phase: a work-item owns LANES input pixels of
 * one row ih that share their column's phase r = iw mod SW (iw = r + SW
 * (b LANES + j), lane j of block b), MG input channels and a group; k =
 * (o, kh, kw).  Tap kh meets row ih only when SH divides ih + PH - kh DH:
 * those kh step by SH / gcd(SH, DH) from the first that does, and the
 * same holds for kw, uniformly over the lanes (they share r).  So only the
 * taps that touch the pixels are visited (a stride-2 7x7 kernel: 16 of 49
 * rather than all 49 with a division per lane), and a tap's dy values are
 * LANES consecutive elements of one dy row.  k still runs upwards, the
 * skipped terms being the GPU variant's fma(w, 0, acc), which leave acc
 * unchanged (acc is never -0: it starts at +0) for a finite w. */

/* The first tap k (< K, below the period SH / gcd(SH, D)) with S dividing
 * t - k D, or K if none, and that period. */
inline int phase_first(int t, int K, int D, int S, int *step) {
  int k = 0;
  while (k < K && (t - k * D) % S != 0) k++;
  int p = 1; /* the period: the least p with S dividing p D */
  while ((p * D) % S != 0) p++;
  *step = p;
  return k;
}

/* The gather of one k: lane j holds dy[., oh, ow0 + j] where lane j is a
 * pixel and ow0 + j lies in [0, OW). */
inline float16 phase_gather(global const real_t *restrict dy, size_t rowb,
                            int ow0, int OW, int lanes) {
  if (lanes == LANES && ow0 >= 0 && ow0 <= OW - LANES) /* one vector load */
    return RUMUS_LOADN(RUMUS_STORAGE, 16, dy, rowb + (size_t)ow0);
  float dv[LANES];
  for (int j = 0; j < LANES; j++) {
    const int ow = ow0 + j;
    const int in = (j < lanes) & ((uint)ow < (uint)OW);
    dv[j] = in ? LOAD(dy, rowb + ow) : 0.0f;
  }
  return vload16(0, dv);
}

__kernel RUMUS_REQD_WG(CPU_WG, 1, 1)
void conv_bwd_data_cpu(global const real_t *restrict dy, ulong dy_off,
                       global const real_t *restrict w, ulong w_off,
                       global real_t *restrict dx, ulong dx_off, long16 gv,
                       ulong z0) {
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const int SW = (int)g.sw, W = (int)g.w;
  const int nbw = ((W + SW - 1) / SW + LANES - 1) / LANES; /* blocks per r */
  size_t i = get_global_id(0);
  const size_t r0 = get_global_id(1) * MG;
  const size_t grp = get_global_id(2) + (size_t)z0;
  if (i >= g.n * g.h * (size_t)(SW * nbw) || r0 >= cg) return;
  const int blk = (int)(i % (size_t)nbw);
  i /= (size_t)nbw;
  const int r = (int)(i % (size_t)SW);
  i /= (size_t)SW;
  const size_t n = i / g.h, ih = i - n * g.h;
  const int iw0 = r + SW * blk * LANES; /* lane j: iw0 + SW j */
  const int lanes = iw0 < W ? min(LANES, (W - iw0 + SW - 1) / SW) : 0;
  const int th = (int)(ih + g.ph), tw = r + (int)g.pw;
  int sth, stw;
  const int kh0 = phase_first(th, (int)g.kh, (int)g.dh, (int)g.sh, &sth);
  const int kw0 = phase_first(tw, (int)g.kw, (int)g.dw, SW, &stw);
  const size_t db = (size_t)dy_off + (n * g.oc + grp * ocg) * ohw;
  float16 acc[MG], col[KCH];
  size_t aoff[KCH];
  for (int m = 0; m < MG; m++) acc[m] = 0.0f;
  const size_t abase = (size_t)w_off + grp * ocg * cg * taps;
  size_t kn = 0;
  for (size_t o = 0; o < ocg && lanes > 0; o++) {
    for (int kh = kh0; kh < (int)g.kh; kh += sth) {
      const int oh = (th - kh * (int)g.dh) / (int)g.sh;
      if (th - kh * (int)g.dh < 0 || oh >= (int)g.oh) continue;
      const size_t rowb = db + o * ohw + (size_t)oh * g.ow;
      for (int kw = kw0; kw < (int)g.kw; kw += stw) {
        /* SW divides tw - kw DW exactly: no rounding of negatives. */
        const int ow0 = (tw - kw * (int)g.dw) / SW + blk * LANES;
        const float16 v = phase_gather(dy, rowb, ow0, (int)g.ow, lanes);
        const size_t ao = o * cg * taps + (size_t)(kh * (int)g.kw + kw);
        if (MB == 1) { /* cg < 4: too few rows to pay for the chunk */
          UNROLL for (int m = 0; m < MG; m++)
            if (r0 + m < cg)
              acc[m] = fma((float16)LOAD(w, abase + (r0 + m) * taps + ao), v,
                           acc[m]);
          continue;
        }
        col[kn] = v;
        aoff[kn] = ao;
        if (++kn == KCH) {
          cpu_chunk(w, abase, taps, r0, cg, aoff, col, kn, acc);
          kn = 0;
        }
      }
    }
  }
  if (kn) cpu_chunk(w, abase, taps, r0, cg, aoff, col, kn, acc);
  size_t xb[LANES];
  const size_t xrow = (size_t)dx_off + (n * g.c + grp * cg + r0) * hw +
                      ih * g.w;
  for (int j = 0; j < LANES; j++) xb[j] = xrow + (size_t)(iw0 + SW * j);
  cpu_store(dx, xb, hw, r0, cg, (size_t)lanes, SW == 1 && lanes == LANES,
            acc, 0, 0);
}

/* Weight gradient, chunk s of the pixels: work-item (tap block, MG output
 * channels, s G + group); k = pixel, A = dy's rows.  Sums into part[s]
 * (float, dw's layout), or into dw itself when S == 1. */
__kernel RUMUS_REQD_WG(CPU_WG, 1, 1)
void conv_bwd_weight_cpu(global const real_t *restrict x, ulong x_off,
                         global const real_t *restrict dy, ulong dy_off,
                         global real_t *restrict dw, ulong dw_off,
                         global float *restrict part, long16 gv, ulong KC,
                         ulong S, ulong z0) {
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w, np = g.n * ohw;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t kt = cg * taps;
  const size_t j0 = get_global_id(0) * LANES, r0 = get_global_id(1) * MG;
  const size_t z = get_global_id(2) + (size_t)z0;
  const size_t grp = z % g.g, s = z / g.g;
  if (j0 >= kt || r0 >= ocg) return;
  size_t xc[LANES];
  int offh[LANES], offw[LANES];
  for (size_t j = 0; j < LANES; j++) {
    const size_t t = j0 + j < kt ? j0 + j : kt - 1;
    const size_t c = t / taps, r = t - c * taps;
    const long kh = (long)(r / g.kw), kw = (long)(r - kh * g.kw);
    xc[j] = (size_t)x_off + (grp * cg + c) * hw;
    offh[j] = j0 + j < kt ? (int)(kh * g.dh - g.ph) : (int)g.h; /* 0 past */
    offw[j] = (int)(kw * g.dw - g.pw);
  }
  const size_t qa = s * (size_t)KC, qb = min(qa + (size_t)KC, np);
  float16 acc[MG], col[KCH];
  size_t aoff[KCH];
  for (int m = 0; m < MG; m++) acc[m] = 0.0f;
  size_t n = qa / ohw, p = qa - n * ohw;
  long oh = (long)(p / g.ow), ow = (long)(p - oh * g.ow);
  for (size_t k0 = qa; k0 < qb; k0 += KCH) {
    const size_t kn = min((size_t)KCH, qb - k0);
    for (size_t k = 0; k < kn; k++) {
      const size_t xn = n * g.c * hw;
      const int ihb = (int)(oh * g.sh), iwb = (int)(ow * g.sw);
      const int H = (int)g.h, W = (int)g.w;
      float xv[LANES];
      for (size_t j = 0; j < LANES; j++) {
        const int ih = ihb + offh[j], iw = iwb + offw[j];
        xv[j] = (((uint)ih < (uint)H) & ((uint)iw < (uint)W))
                    ? LOAD(x, xc[j] + xn + (size_t)ih * W + iw)
                    : 0.0f;
      }
      col[k] = vload16(0, xv);
      aoff[k] = n * g.oc * ohw + p;
      p++;
      if (++ow == g.ow) {
        ow = 0;
        if (++oh == g.oh) {
          oh = 0;
          p = 0;
          n++;
        }
      }
    }
    cpu_chunk(dy, (size_t)dy_off + grp * ocg * ohw, ohw, r0, ocg, aoff, col,
              kn, acc);
  }
  const size_t lanes = min((size_t)LANES, kt - j0);
  size_t base[LANES];
  for (size_t j = 0; j < LANES; j++)
    base[j] = (grp * ocg + r0) * kt + j0 + j;
  if (S == 1) {
    for (size_t j = 0; j < LANES; j++) base[j] += (size_t)dw_off;
    cpu_store(dw, base, kt, r0, ocg, lanes, lanes == LANES, acc, 0, 0);
    return;
  }
  global float *ps = part + s * (size_t)g.oc * kt;
  for (size_t m = 0; m < MG && r0 + m < ocg; m++) {
    const float *e = (const float *)&acc[m];
    for (size_t j = 0; j < lanes; j++) ps[base[j] + m * kt] = e[j];
  }
}
#else
/* ---- GPU variant ----------------------------------------------------------
 * A work-group of TS x TS work-items computes a GT x GT tile of C (GT =
 * 4 TS), each work-item 4 x 4 outputs: rows ty + TS i and columns tx + TS
 * j (i, j < 4), so that neighbouring work-items store neighbouring
 * pixels.  k goes in steps of TS: each work-item loads A(m0 + ty + TS e,
 * k0 + tx) and B(k0 + ty, j0 + tx + TS e) (e < 4) into the local tiles
 * As[k][m] and Bs[k][j]; a B column's coordinates are worked out once per
 * work-item, a k's once per step. */

#define GT (4 * TS)
#define LP (GT + 1) /* pitch of a local tile's rows */

/* acc[i][j] += sum over the step's TS k of As[k][ty + TS i] Bs[k][tx + TS
 * j], k upwards. */
inline void gpu_tile(local const float *As, local const float *Bs, int tx,
                     int ty, float acc[4][4]) {
  UNROLL for (int k = 0; k < TS; k++) {
    float a[4], b[4];
    UNROLL for (int i = 0; i < 4; i++) a[i] = As[k * LP + ty + TS * i];
    UNROLL for (int j = 0; j < 4; j++) b[j] = Bs[k * LP + tx + TS * j];
    UNROLL for (int i = 0; i < 4; i++)
      UNROLL for (int j = 0; j < 4; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
  }
}

/* Forward: work-group (pixel tile, output channel tile, group). */
__kernel RUMUS_REQD_WG(TS, TS, 1)
void conv_fwd_wg(global const real_t *restrict x, ulong x_off,
                 global const real_t *restrict w, ulong w_off,
                 global const real_t *restrict bias, ulong b_off,
                 int has_bias, global real_t *restrict y, ulong y_off,
                 long16 gv, ulong z0) {
  local float As[TS * LP], Bs[TS * LP];
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, np = g.n * ohw, hw = g.h * g.w;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t kt = cg * taps;
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const size_t grp = get_global_id(2) + (size_t)z0;
  const size_t m0 = get_group_id(1) * GT, j0 = get_group_id(0) * GT;
  const size_t wb = (size_t)w_off + grp * ocg * kt;
  size_t xb[4];
  long ih0[4], iw0[4];
  UNROLL for (int e = 0; e < 4; e++) {
    const size_t q = j0 + tx + TS * e, qq = q < np ? q : 0;
    const size_t n = qq / ohw, p = qq - n * ohw;
    xb[e] = (size_t)x_off + (n * g.c + grp * cg) * hw;
    ih0[e] = q < np ? (long)(p / g.ow) * g.sh - g.ph : g.h; /* 0 past */
    iw0[e] = (long)(p % g.ow) * g.sw - g.pw;
  }
  float acc[4][4] = {{0.0f}};
  for (size_t k0 = 0; k0 < kt; k0 += TS) {
    const size_t ak = k0 + tx, bk = k0 + ty;
    UNROLL for (int e = 0; e < 4; e++) {
      const size_t m = m0 + ty + TS * e;
      As[tx * LP + ty + TS * e] =
          m < ocg && ak < kt ? LOAD(w, wb + m * kt + ak) : 0.0f;
    }
    const size_t c = bk / taps, r = bk - c * taps;
    const long dh = (long)(r / g.kw) * g.dh, dw = (long)(r % g.kw) * g.dw;
    UNROLL for (int e = 0; e < 4; e++) {
      const long ih = ih0[e] + dh, iw = iw0[e] + dw;
      Bs[ty * LP + tx + TS * e] =
          bk < kt && x_in(&g, ih, iw)
              ? LOAD(x, xb[e] + c * hw + (size_t)ih * g.w + iw)
              : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    gpu_tile(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  UNROLL for (int j = 0; j < 4; j++) {
    const size_t q = j0 + tx + TS * j;
    if (q >= np) continue;
    const size_t n = q / ohw, p = q - n * ohw;
    UNROLL for (int i = 0; i < 4; i++) {
      const size_t m = m0 + ty + TS * i, o = grp * ocg + m;
      if (m >= ocg) continue;
      const float add = has_bias ? LOAD(bias, (size_t)b_off + o) : 0.0f;
      STORE(acc[i][j] + add, y, (size_t)y_off + (n * g.oc + o) * ohw + p);
    }
  }
}

/* Input gradient: work-group (input pixel tile, input channel tile,
 * group). */
__kernel RUMUS_REQD_WG(TS, TS, 1)
void conv_bwd_data_wg(global const real_t *restrict dy, ulong dy_off,
                      global const real_t *restrict w, ulong w_off,
                      global real_t *restrict dx, ulong dx_off, long16 gv,
                      ulong z0) {
  local float As[TS * LP], Bs[TS * LP];
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w, np = g.n * hw;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t kt = ocg * taps;
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const size_t grp = get_global_id(2) + (size_t)z0;
  const size_t m0 = get_group_id(1) * GT, j0 = get_group_id(0) * GT;
  const size_t wb = (size_t)w_off + grp * ocg * cg * taps;
  size_t db[4];
  int th0[4], tw0[4];
  UNROLL for (int e = 0; e < 4; e++) {
    const size_t q = j0 + tx + TS * e, qq = q < np ? q : 0;
    const size_t n = qq / hw, p = qq - n * hw;
    db[e] = (size_t)dy_off + (n * g.oc + grp * ocg) * ohw;
    th0[e] = q < np ? (int)(p / g.w + g.ph) : -1; /* past the end: 0 */
    tw0[e] = (int)(p % g.w + g.pw);
  }
  float acc[4][4] = {{0.0f}};
  for (size_t k0 = 0; k0 < kt; k0 += TS) {
    const size_t ak = k0 + tx, bk = k0 + ty;
    const size_t ao = ak / taps, ar = ak - ao * taps;
    UNROLL for (int e = 0; e < 4; e++) {
      const size_t m = m0 + ty + TS * e;
      As[tx * LP + ty + TS * e] =
          m < cg && ak < kt ? LOAD(w, wb + (ao * cg + m) * taps + ar) : 0.0f;
    }
    const size_t o = bk / taps, r = bk - o * taps;
    const int dh = (int)((long)(r / g.kw) * g.dh);
    const int dw = (int)((long)(r % g.kw) * g.dw);
    UNROLL for (int e = 0; e < 4; e++) {
      int okh, okw;
      const int oh = dy_at(th0[e] - dh, (int)g.sh, (int)g.oh, &okh);
      const int ow = dy_at(tw0[e] - dw, (int)g.sw, (int)g.ow, &okw);
      Bs[ty * LP + tx + TS * e] =
          ((bk < kt) & okh & okw)
              ? LOAD(dy, db[e] + o * ohw + (size_t)oh * g.ow + ow)
              : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    gpu_tile(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  UNROLL for (int j = 0; j < 4; j++) {
    const size_t q = j0 + tx + TS * j;
    if (q >= np) continue;
    const size_t n = q / hw, p = q - n * hw;
    UNROLL for (int i = 0; i < 4; i++) {
      const size_t m = m0 + ty + TS * i;
      if (m < cg)
        STORE(acc[i][j], dx, (size_t)dx_off + (n * g.c + grp * cg + m) * hw + p);
    }
  }
}

/* Weight gradient, chunk s: work-group (tap tile, output channel tile,
 * s G + group). */
__kernel RUMUS_REQD_WG(TS, TS, 1)
void conv_bwd_weight_wg(global const real_t *restrict x, ulong x_off,
                        global const real_t *restrict dy, ulong dy_off,
                        global real_t *restrict dw, ulong dw_off,
                        global float *restrict part, long16 gv, ulong KC,
                        ulong S, ulong z0) {
  local float As[TS * LP], Bs[TS * LP];
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w, np = g.n * ohw;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t kt = cg * taps;
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const size_t z = get_global_id(2) + (size_t)z0;
  const size_t grp = z % g.g, s = z / g.g;
  const size_t m0 = get_group_id(1) * GT, j0 = get_group_id(0) * GT;
  const size_t db = (size_t)dy_off + grp * ocg * ohw;
  size_t xc[4];
  long offh[4], offw[4];
  UNROLL for (int e = 0; e < 4; e++) {
    const size_t t = j0 + tx + TS * e, tt = t < kt ? t : 0;
    const size_t c = tt / taps, r = tt - c * taps;
    xc[e] = (size_t)x_off + (grp * cg + c) * hw;
    offh[e] = t < kt ? (long)(r / g.kw) * g.dh - g.ph : g.h; /* 0 past */
    offw[e] = (long)(r % g.kw) * g.dw - g.pw;
  }
  const size_t qa = s * (size_t)KC, qb = min(qa + (size_t)KC, np);
  float acc[4][4] = {{0.0f}};
  for (size_t k0 = qa; k0 < qb; k0 += TS) {
    const size_t ak = k0 + tx, bk = k0 + ty;
    const size_t an = ak / ohw, ap = ak - an * ohw;
    UNROLL for (int e = 0; e < 4; e++) {
      const size_t m = m0 + ty + TS * e;
      As[tx * LP + ty + TS * e] =
          m < ocg && ak < qb ? LOAD(dy, db + (an * g.oc + m) * ohw + ap)
                             : 0.0f;
    }
    const size_t bn = bk / ohw, bp = bk - bn * ohw;
    const long ihb = (long)(bp / g.ow) * g.sh, iwb = (long)(bp % g.ow) * g.sw;
    UNROLL for (int e = 0; e < 4; e++) {
      const long ih = ihb + offh[e], iw = iwb + offw[e];
      Bs[ty * LP + tx + TS * e] =
          bk < qb && x_in(&g, ih, iw)
              ? LOAD(x, xc[e] + bn * g.c * hw + (size_t)ih * g.w + iw)
              : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    gpu_tile(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  UNROLL for (int j = 0; j < 4; j++) {
    const size_t t = j0 + tx + TS * j;
    if (t >= kt) continue;
    UNROLL for (int i = 0; i < 4; i++) {
      const size_t m = m0 + ty + TS * i;
      if (m >= ocg) continue;
      const size_t at = (grp * ocg + m) * kt + t;
      if (S == 1)
        STORE(acc[i][j], dw, (size_t)dw_off + at);
      else
        part[s * (size_t)g.oc * kt + at] = acc[i][j];
    }
  }
}
#endif
