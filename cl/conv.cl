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
 * CPU variant (CONV_GPU 0): barrier-free, one work-item per LANES (8 or
 * 16) columns and NB blocks of MB rows (MG), floatL accumulators; the B
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
#define MB 4 /* CPU: rows (channels) of a register block: 1 or 4 to 16 */
#endif
#ifndef LANES
#define LANES 16 /* CPU: columns per work-item, one floatL: 8 or 16 */
#endif
#ifndef NB
#define NB 4 /* CPU: register blocks of MB rows per work-item */
#endif
#ifndef TS
#define TS 16 /* GPU: tile edge (work-group TS x TS) */
#endif
#ifndef CPU_WG
#define CPU_WG 8 /* CPU: work-group size along dimension 0 */
#endif

#define UNROLL _Pragma("unroll")

typedef struct {
  long n, c, h, w, oc, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, g;
} geo_t;

inline geo_t geo_of(long16 v) {
  geo_t g = {v.s0, v.s1, v.s2, v.s3, v.s4, v.s5, v.s6, v.s7,
             v.s8, v.s9, v.sa, v.sb, v.sc, v.sd, v.se, v.sf};
  return g;
}

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

/* ---- Weight gradient with one input channel per group (depthwise, or C
 * = 1): the GEMM's rows are one output channel and its columns KH KW
 * taps, a tile mostly idle over a long k, so these kernels split each
 * output channel's N OH OW pixels over many work-groups instead.  The
 * order of every sum, the same in both variants: P = DWL B lanes (B from
 * the host, fixed by the shape); lane l of block b (s = b DWL + l) sums
 * its pixels q = s, s + P, s + 2 P, ... upwards from 0 with one fma each
 * (0 in the padding); the DWL lanes of a block are added by a halving tree
 * (lane l += lane l + h for h = DWL / 2, ..., 1); the B block sums are
 * added in block order by conv_wsum (B = 1: stored directly).  Lanes read
 * consecutive pixels, so a warp's loads of dy and of x at a tap are
 * contiguous.  A launch covers DWT taps from t0. */

#define DWL 64 /* lanes of a block: work-group size of conv_bwd_weight_dw */
#define DWT 9 /* taps per launch (3 x 3 kernels in one) */

/* The offsets kh DH - PH and kw DW - PW of taps t0 .. t0 + DWT (offh = H
 * past the last tap: every load 0); the taps present. */
inline int dw_taps(const geo_t *g, int t0, int *offh, int *offw) {
  const int taps = (int)(g->kh * g->kw), nt = min(DWT, taps - t0);
  UNROLL for (int e = 0; e < DWT; e++) {
    const int t = min(t0 + e, taps - 1), kh = t / (int)g->kw;
    offh[e] = e < nt ? kh * (int)g->dh - (int)g->ph : (int)g->h;
    offw[e] = (t - kh * (int)g->kw) * (int)g->dw - (int)g->pw;
  }
  return nt;
}

/* Stores block b's sum v of tap t0 + e of output channel o: into dw (B =
 * 1) or into part[b]. */
inline void dw_put(const geo_t *g, global real_t *dw, ulong dw_off,
                   global float *part, size_t B, size_t b, size_t o, int t,
                   float v) {
  const size_t at = o * (size_t)(g->kh * g->kw) + (size_t)t;
  if (B == 1)
    STORE(v, dw, (size_t)dw_off + at);
  else
    part[b * (size_t)g->oc * (size_t)(g->kh * g->kw) + at] = v;
}

/* Barrier-free: work-item (block b, OB output channels of a group from
 * o = grp ocg + ob OB, y = (o0 + its y) = grp NOB + ob) keeps the DWL
 * lanes of each tap as 4 float16 per channel and adds them by the same
 * tree; lanes past the last pixel add fma(0, 0, acc), which leaves acc
 * (never -0) as it is.  The channels share each gather of x (one channel
 * per work-item gathered it per channel: a 64 x 1 -> 32 x 28 x 28
 * layer's weight gradient ran at 0.15x the speed of im2col + OpenBLAS).
 * OB is DWOB (conv_bwd_weight_dw_cpu) or 1 (conv_bwd_weight_dw1_cpu,
 * for depthwise layers, where the blocks' arrays cost 10-15%).  In both
 * programs: the GPU variant's fallback on devices whose work-groups stop
 * below DWL. */
#define DWOB 4 /* output channels per work-item (conv.c's DW_OCB) */
#define DW_WGRAD_ARGS                                                        \
  global const real_t *restrict x, ulong x_off,                              \
      global const real_t *restrict dy, ulong dy_off,                        \
      global real_t *restrict dw, ulong dw_off, global float *restrict part, \
      long16 gv, ulong B, int t0, ulong o0
inline __attribute__((always_inline)) void dw_wgrad_cpu(DW_WGRAD_ARGS,
                                                        const int OB) {
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w, np = g.n * ohw;
  const size_t ocg = g.oc / g.g, nob = (ocg + OB - 1) / OB;
  const size_t b = get_global_id(0), y = get_global_id(1) + (size_t)o0;
  const size_t grp = y / nob, ob = y - grp * nob, P = DWL * (size_t)B;
  const size_t o = grp * ocg + ob * OB;
  const int no = OB == 1 ? 1 : (int)min((size_t)OB, ocg - ob * OB);
  int offh[DWT], offw[DWT];
  const int nt = dw_taps(&g, t0, offh, offw);
  const int H = (int)g.h, W = (int)g.w;
  float16 acc[DWOB][DWT][4];
  for (int c = 0; c < DWOB; c++)
    for (int e = 0; e < DWT; e++)
      for (int v = 0; v < 4; v++) acc[c][e][v] = 0.0f;
  for (size_t q0 = b * DWL; q0 < np; q0 += P) {
    /* The block's first pixel (n, p = oh OW + ow), then carries. */
    size_t n = q0 / ohw, p = q0 - n * ohw;
    int oh = (int)(p / g.ow), ow = (int)(p - (size_t)oh * g.ow);
    for (int v = 0; v < 4; v++) {
      float dv[DWOB][16];
      size_t xb[16];
      int ihb[16], iwb[16];
      for (int j = 0; j < 16; j++) {
        const int in = q0 + (size_t)(v * 16 + j) < np;
        for (int c = 0; c < no; c++)
          dv[c][j] =
              in ? LOAD(dy, (size_t)dy_off + (n * g.oc + o + c) * ohw + p)
                 : 0.0f;
        xb[j] = (size_t)x_off + (n * g.c + grp) * hw;
        ihb[j] = in ? oh * (int)g.sh : -(1 << 30); /* past: loads 0 */
        iwb[j] = ow * (int)g.sw;
        p++;
        if (++ow == (int)g.ow) {
          ow = 0;
          if (++oh == (int)g.oh) {
            oh = 0;
            p = 0;
            n++;
          }
        }
      }
      for (int e = 0; e < nt; e++) {
        float xv[16];
        for (int j = 0; j < 16; j++) {
          const int ih = ihb[j] + offh[e], iw = iwb[j] + offw[e];
          xv[j] = (((uint)ih < (uint)H) & ((uint)iw < (uint)W))
                      ? LOAD(x, xb[j] + (size_t)ih * W + iw)
                      : 0.0f;
        }
        const float16 xs = vload16(0, xv);
        for (int c = 0; c < no; c++)
          acc[c][e][v] = fma(vload16(0, dv[c]), xs, acc[c][e][v]);
      }
    }
  }
  for (int c = 0; c < no; c++)
    for (int e = 0; e < nt; e++) {
      /* The tree: lanes l += l + 32, l += l + 16, then within a float16. */
      const float16 a =
          (acc[c][e][0] + acc[c][e][2]) + (acc[c][e][1] + acc[c][e][3]);
      const float8 a8 = a.lo + a.hi;
      const float4 a4 = a8.lo + a8.hi;
      const float2 a2 = a4.lo + a4.hi;
      dw_put(&g, dw, dw_off, part, (size_t)B, b, o + (size_t)c, t0 + e,
             a2.x + a2.y);
    }
}
__kernel RUMUS_REQD_WG(1, 1, 1) void conv_bwd_weight_dw_cpu(DW_WGRAD_ARGS) {
  dw_wgrad_cpu(x, x_off, dy, dy_off, dw, dw_off, part, gv, B, t0, o0, DWOB);
}
__kernel RUMUS_REQD_WG(1, 1, 1) void conv_bwd_weight_dw1_cpu(DW_WGRAD_ARGS) {
  dw_wgrad_cpu(x, x_off, dy, dy_off, dw, dw_off, part, gv, B, t0, o0, 1);
}

#if !CONV_GPU
/* ---- CPU variant ----------------------------------------------------------
 * A work-item owns LANES columns and up to MG = NB MB rows.  k runs in
 * chunks of KCH: the chunk's B values are gathered once into `col` (one
 * floatL per k, in L1) with the offset of A's element for each k, then
 * every block of MB rows multiplies the chunk, its floatL accumulators
 * kept in `acc` between chunks.  Gathering once per chunk for all MG rows,
 * instead of once per block of MB rows, made the forward at 64 x 32 ->
 * 64 x 14 x 14 about 3x faster on the CI machine. */

/* The accumulators' vector.  The host (conv.c's cpu_tile_for) picks
 * LANES, MB and NB by the device's native float width so that a block's
 * MB accumulators and a k's B vector stay in vector registers: AVX-512
 * 16 float16 (16 of its 32 zmm), AVX2 4 float16 (8 of its 16 ymm) in 32
 * blocks. */
#if LANES == 16
#define floatL float16
#define VLOADL vload16
#elif LANES == 8
#define floatL float8
#define VLOADL vload8
#else
#error "LANES must be 8 or 16"
#endif
#define MG (NB * MB) /* rows per work-item */
#define KCH 128     /* k per chunk */

/* acc[b * MB + m] += sum over the chunk's kn k of A[abase + (r0 + b MB +
 * m) astride + aoff[k]] * col[k], for the rows below `rows` (rows past
 * it re-read the last one; they are not stored). */
inline void cpu_chunk(global const real_t *restrict A, size_t abase,
                      size_t astride, size_t r0, size_t rows,
                      const size_t *aoff, const floatL *col, size_t kn,
                      floatL *acc) {
  for (size_t b = 0; b < NB && r0 + b * MB < rows; b++) {
    size_t ar[MB];
    UNROLL for (int m = 0; m < MB; m++)
      ar[m] = abase + min(r0 + b * MB + m, rows - 1) * astride;
    floatL a[MB];
    UNROLL for (int m = 0; m < MB; m++) a[m] = acc[b * MB + m];
    for (size_t k = 0; k < kn; k++) {
      const floatL v = col[k];
      UNROLL for (int m = 0; m < MB; m++)
        a[m] = fma((floatL)LOAD(A, ar[m] + aoff[k]), v, a[m]);
    }
    UNROLL for (int m = 0; m < MB; m++) acc[b * MB + m] = a[m];
  }
}

/* Stores acc + add[row] (add NULL: nothing) at rows r0 .. (< rows) of the
 * output, row r of lane j at base[j] + (r - r0) * pitch; lanes contiguous
 * when `run`. */
inline void cpu_store(global real_t *out, const size_t *base, size_t pitch,
                      size_t r0, size_t rows, size_t lanes, int run,
                      const floatL *acc, global const real_t *add,
                      size_t add_off) {
  for (size_t m = 0; m < MG && r0 + m < rows; m++) {
    const floatL v = acc[m] + (add ? LOAD(add, add_off + m) : 0.0f);
    if (run) {
      RUMUS_STOREN(RUMUS_STORAGE, LANES, v, out, base[0] + m * pitch);
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
  floatL acc[MG], col[KCH];
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
      col[k] = VLOADL(0, xv);
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

/* The gather of one k: lane j holds dy[., oh, ow0 + j] where lane j is a
 * pixel and ow0 + j lies in [0, OW). */
inline floatL phase_gather(global const real_t *restrict dy, size_t rowb,
                            int ow0, int OW, int lanes) {
  if (lanes == LANES && ow0 >= 0 && ow0 <= OW - LANES) /* one vector load */
    return RUMUS_LOADN(RUMUS_STORAGE, LANES, dy, rowb + (size_t)ow0);
  float dv[LANES];
  for (int j = 0; j < LANES; j++) {
    const int ow = ow0 + j;
    const int in = (j < lanes) & ((uint)ow < (uint)OW);
    dv[j] = in ? LOAD(dy, rowb + ow) : 0.0f;
  }
  return VLOADL(0, dv);
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
  floatL acc[MG], col[KCH];
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
        const floatL v = phase_gather(dy, rowb, ow0, (int)g.ow, lanes);
        const size_t ao = o * cg * taps + (size_t)(kh * (int)g.kw + kw);
        if (MB == 1) { /* cg < 4: too few rows to pay for the chunk */
          UNROLL for (int m = 0; m < MG; m++)
            if (r0 + m < cg)
              acc[m] = fma((floatL)LOAD(w, abase + (r0 + m) * taps + ao), v,
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
  floatL acc[MG], col[KCH];
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
      col[k] = VLOADL(0, xv);
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

/* ---- Forward with one input channel per group (depthwise, or C = 1) ------
 * The implicit GEMM's k is then only the KH KW taps and its MG-row blocks
 * idle, so a work-item takes row oh of up to DW_OB output channels that
 * read the same input channel (a group's, from its first channel on in
 * runs of DW_OB; one for depthwise) whole: it copies each input row ih
 * once into a private row with its zero padding (prow[iw + PW] = x[ih,
 * iw]), then every tap adds to an output row's float16 accumulators with
 * one vector read of the private row per DW_VL outputs (stride 1:
 * contiguous; stride 2: the even lanes of two reads).  The KH rows stay
 * for all the channels where they fit DW_ROW floats together, else each
 * channel copies them again, a row at a time.  Each output's sum is the
 * taps (kh, kw) upwards from 0 with one fma each (0 in the padding), then
 * the bias: the sums of conv_fwd_cpu and conv_fwd_direct, so the same
 * bits.  The host takes it where one padded row fits DW_ROW floats and
 * the output row DW_OW (conv.c's dw_row_fits).  (One channel per
 * work-item, the 32 channels of a 64 x 1 -> 32 x 28 x 28 layer copied
 * each input row 96 times: 0.3x the speed of im2col + OpenBLAS.) */
#define DW_VL 16     /* outputs per vector (float16) */
#define DW_ROW 1024 /* floats of the private padded rows */
#define DW_OW 256   /* outputs per row at most (DW_OW / DW_VL float16) */
#define DW_OB 32    /* output channels per work-item at most (conv.c) */

/* Input row ih of the plane at xb (W wide; a row outside [0, H): zeros)
 * into prow[0 .. need), element iw at iw + pw. */
inline void dw_load_row(global const real_t *restrict x, size_t xb, int ih,
                        int H, int W, int pw, int need, float *prow) {
  const int in = (uint)ih < (uint)H;
  const size_t rb = xb + (size_t)(in ? ih : 0) * (size_t)W;
  for (int j = 0; j < need; j++) {
    const int iw = j - pw;
    prow[j] = (in & ((uint)iw < (uint)W)) ? LOAD(x, rb + (size_t)iw) : 0.0f;
  }
}

/* The DW_VL values of tap column c (= kw DW) for outputs ow0 .. ow0 +
 * DW_VL - 1: prow[(ow0 + j) SW + c]. */
inline float16 dw_row_taps(const float *prow, int ow0, int sw, int c) {
  const int b = ow0 * sw + c;
  if (sw == 1) return vload16(0, prow + b);
  if (sw == 2) {
    const float16 lo = vload16(0, prow + b), hi = vload16(0, prow + b + 16);
    return (float16)(lo.even, hi.even);
  }
  float v[DW_VL];
  for (int j = 0; j < DW_VL; j++) v[j] = prow[b + j * sw];
  return vload16(0, v);
}

/* Output row oh of channel o of image n from its nb float16 accumulators
 * plus the channel's bias. */
inline void dw_store_row(const float16 *acc, int nb, geo_t g,
                         global const real_t *restrict bias, ulong b_off,
                         int has_bias, global real_t *restrict y, ulong y_off,
                         size_t n, size_t o, size_t oh) {
  const int OW = (int)g.ow;
  const float add = has_bias ? LOAD(bias, (size_t)b_off + o) : 0.0f;
  const size_t yb = (size_t)y_off +
                    ((n * (size_t)g.oc + o) * (size_t)g.oh + oh) * (size_t)OW;
  for (int b = 0; b < nb; b++) {
    const float16 v = acc[b] + add;
    const int ow0 = b * DW_VL;
    if (ow0 + DW_VL <= OW) {
      RUMUS_STOREN(RUMUS_STORAGE, 16, v, y, yb + (size_t)ow0);
    } else {
      const float *e = (const float *)&v;
      for (int j = 0; ow0 + j < OW; j++) STORE(e[j], y, yb + (size_t)(ow0 + j));
    }
  }
}

/* DW_CB channels o .. o + DW_CB of an output row of at most 2 DW_VL
 * outputs from the KH private rows: each tap's vector read serves the
 * DW_CB channels, their 2 DW_CB accumulators stay in registers (a loop
 * over a run-time count of blocks kept them in memory).  The same sums as
 * one channel at a time. */
#define DW_CB 4
inline void dw_fwd_quad(global const real_t *restrict w, ulong w_off,
                        global const real_t *restrict bias, ulong b_off,
                        int has_bias, global real_t *restrict y, ulong y_off,
                        geo_t g, size_t n, size_t o, size_t oh,
                        const float *prow, int need, int nb) {
  const int KH = (int)g.kh, KW = (int)g.kw, sw = (int)g.sw, dw = (int)g.dw;
  const size_t wb = (size_t)w_off + o * (size_t)(KH * KW), wstep = KH * KW;
  float16 a[DW_CB][2];
  for (int c = 0; c < DW_CB; c++) a[c][0] = a[c][1] = 0.0f;
  for (int kh = 0; kh < KH; kh++)
    for (int kw = 0; kw < KW; kw++) {
      const float *row = prow + kh * need;
      const float16 t0 = dw_row_taps(row, 0, sw, kw * dw);
      const float16 t1 = nb > 1 ? dw_row_taps(row, DW_VL, sw, kw * dw) : t0;
      const size_t wk = wb + (size_t)(kh * KW + kw);
      for (int c = 0; c < DW_CB; c++) {
        const float16 wv = (float16)LOAD(w, wk + c * wstep);
        a[c][0] = fma(wv, t0, a[c][0]);
        a[c][1] = fma(wv, t1, a[c][1]);
      }
    }
  for (int c = 0; c < DW_CB; c++)
    dw_store_row(a[c], nb, g, bias, b_off, has_bias, y, y_off, n,
                 o + (size_t)c, oh);
}

__kernel RUMUS_REQD_WG(CPU_WG, 1, 1)
void conv_fwd_dw_cpu(global const real_t *restrict x, ulong x_off,
                     global const real_t *restrict w, ulong w_off,
                     global const real_t *restrict bias, ulong b_off,
                     int has_bias, global real_t *restrict y, ulong y_off,
                     long16 gv, ulong i0) {
  const geo_t g = geo_of(gv);
  /* i = ((n G + grp) NOB + ob) OH + oh: channels grp ocg + ob DW_OB on. */
  const size_t ocg = (size_t)(g.oc / g.g), nob = (ocg + DW_OB - 1) / DW_OB;
  const size_t i = get_global_id(0) + (size_t)i0;
  if (i >= (size_t)(g.n * g.g) * nob * (size_t)g.oh) return;
  const size_t q = i / (size_t)g.oh, oh = i - q * (size_t)g.oh;
  const size_t ng = q / nob, ob = q - ng * nob;
  const size_t n = ng / (size_t)g.g, grp = ng - n * (size_t)g.g;
  const size_t o0 = grp * ocg + ob * DW_OB;
  const int no = (int)min((size_t)DW_OB, ocg - ob * DW_OB);
  const int OW = (int)g.ow, KH = (int)g.kh, KW = (int)g.kw;
  const int sw = (int)g.sw, dw = (int)g.dw;
  const int nb = (OW + DW_VL - 1) / DW_VL;
  /* A private row's extent that the reads reach (dw_row_fits). */
  const int need = (nb * DW_VL - 1) * sw + (KW - 1) * dw + 1 + (sw == 2);
  const int keep = KH * need <= DW_ROW; /* the KH rows at once */
  const size_t xb = (size_t)x_off + (n * (size_t)g.c + grp) * (size_t)(g.h * g.w);
  const int ih0 = (int)oh * (int)g.sh - (int)g.ph;
  float prow[DW_ROW];
  for (int kh = 0; keep && kh < KH; kh++)
    dw_load_row(x, xb, ih0 + kh * (int)g.dh, (int)g.h, (int)g.w, (int)g.pw,
                need, prow + kh * need);
  int c = 0;
  if (keep && nb <= 2)
    for (; c + DW_CB <= no; c += DW_CB)
      dw_fwd_quad(w, w_off, bias, b_off, has_bias, y, y_off, g, n,
                  o0 + (size_t)c, oh, prow, need, nb);
  for (; c < no; c++) {
    const size_t o = o0 + (size_t)c;
    const size_t wb = (size_t)w_off + o * (size_t)(KH * KW);
    float16 acc[DW_OW / DW_VL];
    for (int b = 0; b < nb; b++) acc[b] = 0.0f;
    for (int kh = 0; kh < KH; kh++) {
      if (!keep)
        dw_load_row(x, xb, ih0 + kh * (int)g.dh, (int)g.h, (int)g.w,
                    (int)g.pw, need, prow);
      const float *row = keep ? prow + kh * need : prow;
      for (int kw = 0; kw < KW; kw++) {
        const float16 wv = (float16)LOAD(w, wb + (size_t)(kh * KW + kw));
        for (int b = 0; b < nb; b++)
          acc[b] = fma(wv, dw_row_taps(row, b * DW_VL, sw, kw * dw), acc[b]);
      }
    }
    dw_store_row(acc, nb, g, bias, b_off, has_bias, y, y_off, n, o, oh);
  }
}
#else
/* ---- GPU variant ----------------------------------------------------------
 * Register-blocked implicit GEMMs in the manner of gemm.cl's gemm_tiled: a
 * work-group of WX x WY = (TN / RN) x (TM / RM) work-items computes a TM x
 * TN tile of C, each work-item an RM x RN register block: rows ty 4 + g
 * WY 4 + r and columns tx 4 + h WX 4 + c (g < RM / 4, h < RN / 4, r, c <
 * 4), so its operands are float4 reads of local memory without bank
 * conflicts.  k goes in steps of TK: the work-group stages a TM x TK slice
 * of A and a TK x TN slice of B in local memory (As[k][m], Bs[k][j]),
 * gathering B from x or dy as it loads it (im2col on the fly); the next
 * step's elements are fetched into registers while the current slices are
 * multiplied.  Each work-item loads the same column (or the same k) at
 * every step, so what a column needs (its image, its top-left input
 * pixel) is worked out once per kernel, and the k of its elements move by
 * TK per step through carries (tap_step), without divisions.  Loads
 * outside the GEMM give 0, so partial tiles in every dimension need no
 * other care.  Sums run k upwards from 0 with one fma per term, as the
 * CPU variant's, whatever the tile sizes. */

#ifndef TM
#define TM 64 /* rows of C per work-group */
#endif
#ifndef TN
#define TN 64 /* columns of C per work-group */
#endif
#ifndef TK
#define TK 16 /* k per step staged in local memory */
#endif
#ifndef RM
#define RM 4 /* rows per work-item (4 or 8) */
#endif
#ifndef RN
#define RN 4 /* columns per work-item (4 or 8) */
#endif

#define WX (TN / RN) /* work-group extent along columns (local id 0) */
#define WY (TM / RM) /* along rows (local id 1) */
#define WGS (WX * WY)
#define PA (TM + 4) /* pitch of As's rows (float4 aligned) */
#define PB (TN + 4)
#define LA (TM * TK / WGS) /* A elements per work-item per step */
/* B elements per work-item per step: a column and LB k (forward, input
 * gradient) or a k and LB columns (weight gradient): the same count. */
#define LB (TN * TK / WGS)

#if (RM % 4) || (RN % 4) || (TM % RM) || (TN % RN)
#error "RM and RN must be multiples of 4 dividing TM and TN"
#endif
#if (WGS % TK) || (WGS % TN) || (TM % (WGS / TK)) || (TN % (WGS / TK)) || \
    (TK % (WGS / TN))
#error "TK and TN must divide the work-group size, which must tile TM x TK and TK x TN"
#endif

/* (a, b, c) += (da, db, dc) in a mixed radix (b < B, c < C) with carries;
 * da, db, dc: a step already in that radix (db < B, dc < C). */
inline void tap_step(int *a, int *b, int *c, int da, int db, int dc, int B,
                     int C) {
  *c += dc;
  int carry = *c >= C;
  if (carry) *c -= C;
  *b += db + carry;
  carry = *b >= B;
  if (carry) *b -= B;
  *a += da + carry;
}

/* v = (a, b, c) in the radix of tap_step: v / (B C), then the rest. */
inline void tap_split(size_t v, int B, int C, int *a, int *b, int *c) {
  const size_t bc = (size_t)B * (size_t)C, r = v % bc;
  *a = (int)(v / bc);
  *b = (int)(r / (size_t)C);
  *c = (int)(r % (size_t)C);
}

/* acc += the products of the TK-deep slices As and Bs, k upwards. */
inline void tile_mul(local const float *As, local const float *Bs, int tx,
                     int ty, float acc[RM][RN]) {
  UNROLL for (int k = 0; k < TK; k++) {
    float a[RM], b[RN];
    UNROLL for (int g = 0; g < RM / 4; g++) {
      const float4 v =
          *(local const float4 *)(As + k * PA + ty * 4 + g * WY * 4);
      a[g * 4 + 0] = v.x;
      a[g * 4 + 1] = v.y;
      a[g * 4 + 2] = v.z;
      a[g * 4 + 3] = v.w;
    }
    UNROLL for (int h = 0; h < RN / 4; h++) {
      const float4 v =
          *(local const float4 *)(Bs + k * PB + tx * 4 + h * WX * 4);
      b[h * 4 + 0] = v.x;
      b[h * 4 + 1] = v.y;
      b[h * 4 + 2] = v.z;
      b[h * 4 + 3] = v.w;
    }
    UNROLL for (int i = 0; i < RM; i++)
      UNROLL for (int j = 0; j < RN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
  }
}

/* The row of C of register row i, and the column of register column j,
 * within the tile. */
#define ROW_OF(ty, i) ((ty) * 4 + ((i) / 4) * WY * 4 + (i) % 4)
#define COL_OF(tx, j) ((tx) * 4 + ((j) / 4) * WX * 4 + (j) % 4)

/* Stores the registers ra / rb of a step into the slices: A element s at
 * As[ka][ma + s WGS / TK]; B element s at Bs[kb + s WGS / TN][jb] (kmajor
 * 0: the forward and input gradient's one column, LB k) or at
 * Bs[ka][jb + s WGS / TK] (1: the weight gradient's one k, LB columns). */
inline void tile_store(local float *As, local float *Bs, const float *ra,
                       const float *rb, int tid, int kmajor) {
  const int ka = tid % TK, ma = tid / TK;
  UNROLL for (int s = 0; s < LA; s++) As[ka * PA + ma + s * (WGS / TK)] = ra[s];
  if (kmajor) {
    UNROLL for (int s = 0; s < LB; s++)
      Bs[ka * PB + ma + s * (WGS / TK)] = rb[s];
  } else {
    const int jb = tid % TN, kb = tid / TN;
    UNROLL for (int s = 0; s < LB; s++)
      Bs[(kb + s * (WGS / TN)) * PB + jb] = rb[s];
  }
}

/* ---- Forward: C[o][q] = sum_t w[o, t] X(q, t), work-group (pixel tile,
 * output channel tile, group). */

typedef struct {
  size_t xb; /* x's element offset of the column's image and group */
  int ih0, iw0; /* its top-left input pixel (ih0 = H past the end: 0) */
} fwd_col;

inline fwd_col fwd_column(const geo_t *g, size_t x_off, size_t grp,
                          size_t q) {
  const size_t ohw = g->oh * g->ow, np = g->n * ohw, qq = q < np ? q : 0;
  const size_t n = qq / ohw, p = qq - n * ohw;
  fwd_col c;
  c.xb = x_off + (n * g->c + grp * (g->c / g->g)) * (size_t)(g->h * g->w);
  c.ih0 = q < np ? (int)((long)(p / g->ow) * g->sh - g->ph) : (int)g->h;
  c.iw0 = (int)((long)(p % g->ow) * g->sw - g->pw);
  return c;
}

/* The B elements of a step: tap (c[s], kh[s], kw[s]) of the column. */
inline void fwd_load_b(const geo_t *g, global const real_t *x,
                       const fwd_col *col, const int *c, const int *kh,
                       const int *kw, int cg, float *rb) {
  const size_t hw = (size_t)(g->h * g->w);
  const int H = (int)g->h, W = (int)g->w;
  UNROLL for (int s = 0; s < LB; s++) {
    const int ih = col->ih0 + kh[s] * (int)g->dh;
    const int iw = col->iw0 + kw[s] * (int)g->dw;
    rb[s] = ((c[s] < cg) & ((uint)ih < (uint)H) & ((uint)iw < (uint)W))
                ? LOAD(x, col->xb + (size_t)c[s] * hw + (size_t)ih * W + iw)
                : 0.0f;
  }
}

/* The A elements of a step: w's rows m0 + ma + s WGS / TK at k. */
inline void rows_load_a(global const real_t *A, size_t base, size_t pitch,
                        size_t m0, int ma, size_t rows, int kin, float *ra) {
  UNROLL for (int s = 0; s < LA; s++) {
    const size_t m = m0 + ma + s * (WGS / TK);
    ra[s] = kin && m < rows ? LOAD(A, base + m * pitch) : 0.0f;
  }
}

__kernel RUMUS_REQD_WG(WX, WY, 1)
void conv_fwd_wg(global const real_t *restrict x, ulong x_off,
                 global const real_t *restrict w, ulong w_off,
                 global const real_t *restrict bias, ulong b_off,
                 int has_bias, global real_t *restrict y, ulong y_off,
                 long16 gv, ulong z0) {
  local float4 As4[TK * PA / 4], Bs4[TK * PB / 4];
  local float *As = (local float *)As4, *Bs = (local float *)Bs4;
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, np = g.n * ohw;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t kt = cg * taps;
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const int tid = ty * WX + tx;
  const size_t grp = get_global_id(2) + (size_t)z0;
  const size_t m0 = get_group_id(1) * TM, j0 = get_group_id(0) * TN;
  const size_t wb = (size_t)w_off + grp * ocg * kt;
  const int ka = tid % TK, ma = tid / TK, kb = tid / TN;
  const fwd_col col = fwd_column(&g, (size_t)x_off, grp, j0 + tid % TN);
  /* The step TK in (c, kh, kw), and each B element's first tap. */
  int dc, dkh, dkw, c[LB], kh[LB], kw[LB];
  tap_split(TK, (int)g.kh, (int)g.kw, &dc, &dkh, &dkw);
  UNROLL for (int s = 0; s < LB; s++)
    tap_split((size_t)(kb + s * (WGS / TN)), (int)g.kh, (int)g.kw, &c[s],
              &kh[s], &kw[s]);
  float acc[RM][RN], ra[LA], rb[LB];
  UNROLL for (int i = 0; i < RM; i++)
    UNROLL for (int j = 0; j < RN; j++) acc[i][j] = 0.0f;
  rows_load_a(w, wb + ka, kt, m0, ma, ocg, ka < kt, ra);
  fwd_load_b(&g, x, &col, c, kh, kw, (int)cg, rb);
  for (size_t k0 = 0; k0 < kt; k0 += TK) {
    tile_store(As, Bs, ra, rb, tid, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + TK < kt) { /* the next step travels during the products */
      const size_t k = k0 + TK + ka;
      rows_load_a(w, wb + k, kt, m0, ma, ocg, k < kt, ra);
      UNROLL for (int s = 0; s < LB; s++)
        tap_step(&c[s], &kh[s], &kw[s], dc, dkh, dkw, (int)g.kh, (int)g.kw);
      fwd_load_b(&g, x, &col, c, kh, kw, (int)cg, rb);
    }
    tile_mul(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  UNROLL for (int j = 0; j < RN; j++) {
    const size_t q = j0 + COL_OF(tx, j);
    if (q >= np) continue;
    const size_t n = q / ohw, p = q - n * ohw;
    UNROLL for (int i = 0; i < RM; i++) {
      const size_t m = m0 + ROW_OF(ty, i), o = grp * ocg + m;
      if (m >= ocg) continue;
      const float add = has_bias ? LOAD(bias, (size_t)b_off + o) : 0.0f;
      STORE(acc[i][j] + add, y, (size_t)y_off + (n * g.oc + o) * ohw + p);
    }
  }
}

/* ---- Input gradient, by stride phase: one launch per phase (rh, rw),
 * the input pixels with (ih + PH) mod SH = rh and (iw + PW) mod SW = rw.
 * Their taps that meet dy are kh = kh0 + sth i (i < nkh: SH divides
 * kh DH - rh; sth = SH / gcd(SH, DH)) and likewise kw, so k = (o, i, l)
 * visits only those, and dy's row is qh - eh0 - ehs i for the pixel's qh
 * = (ih + PH - rh) / SH: no division per element.  The taps a phase skips
 * are the terms fma(w, 0, acc) that leave acc as it is, so k still runs
 * upwards over the same nonzero terms as the CPU variant's. */

typedef struct {
  int r;    /* the phase: (i + P) mod S */
  int i0;   /* the first input coordinate of the phase */
  int ni;   /* input coordinates of the phase */
  int k0;   /* the first tap of the phase, */
  int nk;   /* taps of the phase (step kst) */
  int kst;
  int e0;   /* dy coordinate = q - e0 - es i for tap i */
  int es;
  int q0;   /* q of the phase's first input coordinate */
} phase_t;

inline phase_t phase_of(int r, int I, int P, int K, int D, int S) {
  phase_t f;
  f.r = r;
  f.i0 = ((r - P) % S + S) % S;
  f.ni = f.i0 < I ? (I - f.i0 + S - 1) / S : 0;
  f.k0 = phase_first(r, K, D, S, &f.kst);
  f.nk = f.k0 < K ? (K - f.k0 + f.kst - 1) / f.kst : 0;
  f.e0 = (f.k0 * D - r) / S; /* >= 0: k0 D = r mod S and r < S */
  f.es = f.kst * D / S;
  f.q0 = (f.i0 + P - r) / S;
  return f;
}

typedef struct {
  size_t db; /* dy's element offset of the column's image and group */
  int qh, qw; /* (ih + PH - rh) / SH and the same for w (qh -1: no pixel) */
} bwd_col;

/* The A and B elements of a step of the input gradient: A (w) at the
 * work-item's k = ak (o, i, l) for its LA rows, B (dy) at the column's LB
 * k (bo, bi, bl); then every k moves on by TK (dk). */
inline void bwd_data_load(const geo_t *g, global const real_t *dy,
                          global const real_t *w, size_t wb, size_t m0,
                          int ma, const phase_t *fh, const phase_t *fw,
                          const bwd_col *col, int kin, int *ak, int *bo,
                          int *bi, int *bl, const int *dk, float *ra,
                          float *rb) {
  const size_t cg = g->c / g->g, ocg = g->oc / g->g, taps = g->kh * g->kw;
  const size_t ohw = g->oh * g->ow;
  const int nh1 = max(fh->nk, 1), nw1 = max(fw->nk, 1);
  const size_t ab = wb + (size_t)ak[0] * cg * taps +
                    (size_t)((fh->k0 + fh->kst * ak[1]) * (int)g->kw +
                             fw->k0 + fw->kst * ak[2]);
  rows_load_a(w, ab, taps, m0, ma, cg, kin, ra);
  tap_step(&ak[0], &ak[1], &ak[2], dk[0], dk[1], dk[2], nh1, nw1);
  UNROLL for (int s = 0; s < LB; s++) {
    const int oh = col->qh - fh->e0 - fh->es * bi[s];
    const int ow = col->qw - fw->e0 - fw->es * bl[s];
    rb[s] = (((size_t)bo[s] < ocg) & ((uint)oh < (uint)g->oh) &
             ((uint)ow < (uint)g->ow))
                ? LOAD(dy, col->db + (size_t)bo[s] * ohw +
                               (size_t)oh * g->ow + ow)
                : 0.0f;
    tap_step(&bo[s], &bi[s], &bl[s], dk[0], dk[1], dk[2], nh1, nw1);
  }
}

__kernel RUMUS_REQD_WG(WX, WY, 1)
void conv_bwd_data_wg(global const real_t *restrict dy, ulong dy_off,
                      global const real_t *restrict w, ulong w_off,
                      global real_t *restrict dx, ulong dx_off, long16 gv,
                      int rh, int rw, ulong z0) {
  local float4 As4[TK * PA / 4], Bs4[TK * PB / 4];
  local float *As = (local float *)As4, *Bs = (local float *)Bs4;
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const phase_t fh = phase_of(rh, (int)g.h, (int)g.ph, (int)g.kh, (int)g.dh,
                              (int)g.sh);
  const phase_t fw = phase_of(rw, (int)g.w, (int)g.pw, (int)g.kw, (int)g.dw,
                              (int)g.sw);
  const size_t pp = (size_t)fh.ni * fw.ni, np = g.n * pp;
  const int nk2 = fh.nk * fw.nk; /* taps of the phase */
  const size_t kt = ocg * (size_t)nk2;
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const int tid = ty * WX + tx;
  const size_t grp = get_global_id(2) + (size_t)z0;
  const size_t m0 = get_group_id(1) * TM, j0 = get_group_id(0) * TN;
  const size_t wb = (size_t)w_off + grp * ocg * cg * taps;
  const int ka = tid % TK, ma = tid / TK, kb = tid / TN;
  bwd_col col;
  {
    const size_t q = j0 + tid % TN, qq = q < np ? q : 0;
    const size_t n = qq / pp, p = qq - n * pp;
    col.db = (size_t)dy_off + (n * g.oc + grp * ocg) * ohw;
    col.qh = q < np ? fh.q0 + (int)(p / fw.ni) : -1;
    col.qw = fw.q0 + (int)(p % fw.ni);
  }
  /* k = (o, i, l): A's k (one per work-item) and B's LB k, stepped by TK.
   * nk2 = 0 (no tap meets the phase): kt = 0 and no step runs. */
  const int nh1 = max(fh.nk, 1), nw1 = max(fw.nk, 1);
  int dk[3], ak[3], bo[LB], bi[LB], bl[LB];
  tap_split(TK, nh1, nw1, &dk[0], &dk[1], &dk[2]);
  tap_split((size_t)ka, nh1, nw1, &ak[0], &ak[1], &ak[2]);
  UNROLL for (int s = 0; s < LB; s++)
    tap_split((size_t)(kb + s * (WGS / TN)), nh1, nw1, &bo[s], &bi[s],
              &bl[s]);
  float acc[RM][RN], ra[LA], rb[LB];
  UNROLL for (int i = 0; i < RM; i++)
    UNROLL for (int j = 0; j < RN; j++) acc[i][j] = 0.0f;
  if (kt)
    bwd_data_load(&g, dy, w, wb, m0, ma, &fh, &fw, &col, ka < kt, ak, bo, bi,
                  bl, dk, ra, rb);
  for (size_t k0 = 0; k0 < kt; k0 += TK) {
    tile_store(As, Bs, ra, rb, tid, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + TK < kt) /* the next step travels during the products */
      bwd_data_load(&g, dy, w, wb, m0, ma, &fh, &fw, &col,
                    k0 + TK + ka < kt, ak, bo, bi, bl, dk, ra, rb);
    tile_mul(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  UNROLL for (int j = 0; j < RN; j++) {
    const size_t q = j0 + COL_OF(tx, j);
    if (q >= np) continue;
    const size_t n = q / pp, p = q - n * pp;
    const size_t ih = (size_t)fh.i0 + (size_t)g.sh * (p / fw.ni);
    const size_t iw = (size_t)fw.i0 + (size_t)g.sw * (p % fw.ni);
    const size_t xb = (size_t)dx_off + (n * g.c + grp * cg) * hw +
                      ih * g.w + iw;
    UNROLL for (int i = 0; i < RM; i++) {
      const size_t m = m0 + ROW_OF(ty, i);
      if (m < cg) STORE(acc[i][j], dx, xb + m * hw);
    }
  }
}

/* ---- Weight gradient, chunk s of the pixels: C[o][t] = sum_q dy[q, o]
 * X(q, t) for q in the chunk, work-group (tap tile, output channel tile,
 * s G + group).  Each work-item loads one pixel k of a step for both A
 * (dy, LA rows) and B (x, LB taps): neighbouring work-items read
 * neighbouring pixels. */

typedef struct {
  size_t xc; /* x's element offset of the tap's channel (image 0) */
  int offh, offw; /* kh DH - PH and kw DW - PW (offh = H past the end) */
} tap_col;

/* The A and B elements of a step of the weight gradient at the
 * work-item's pixel pix = (n, oh, ow) (in: inside the chunk): dy's LA rows
 * and x at its LB taps; then the pixel moves on by TK (dpix). */
inline void bwd_weight_load(const geo_t *g, global const real_t *x,
                            global const real_t *dy, size_t db, size_t m0,
                            int ma, const tap_col *tc, int in, int *pix,
                            const int *dpix, float *ra, float *rb) {
  const size_t ohw = g->oh * g->ow, hw = g->h * g->w, ocg = g->oc / g->g;
  const size_t p = (size_t)pix[1] * g->ow + pix[2];
  rows_load_a(dy, db + (size_t)pix[0] * g->oc * ohw + p, ohw, m0, ma, ocg,
              in, ra);
  const size_t xn = (size_t)pix[0] * g->c * hw;
  const int ihb = pix[1] * (int)g->sh, iwb = pix[2] * (int)g->sw;
  const int H = (int)g->h, W = (int)g->w;
  UNROLL for (int e = 0; e < LB; e++) {
    const int ih = ihb + tc[e].offh, iw = iwb + tc[e].offw;
    rb[e] = (in & ((uint)ih < (uint)H) & ((uint)iw < (uint)W))
                ? LOAD(x, tc[e].xc + xn + (size_t)ih * W + iw)
                : 0.0f;
  }
  tap_step(&pix[0], &pix[1], &pix[2], dpix[0], dpix[1], dpix[2], (int)g->oh,
           (int)g->ow);
}

__kernel RUMUS_REQD_WG(WX, WY, 1)
void conv_bwd_weight_wg(global const real_t *restrict x, ulong x_off,
                        global const real_t *restrict dy, ulong dy_off,
                        global real_t *restrict dw, ulong dw_off,
                        global float *restrict part, long16 gv, ulong KC,
                        ulong S, ulong z0) {
  local float4 As4[TK * PA / 4], Bs4[TK * PB / 4];
  local float *As = (local float *)As4, *Bs = (local float *)Bs4;
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w, np = g.n * ohw;
  const size_t cg = g.c / g.g, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t kt = cg * taps;
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const int tid = ty * WX + tx;
  const size_t z = get_global_id(2) + (size_t)z0;
  const size_t grp = z % g.g, s = z / g.g;
  const size_t m0 = get_group_id(1) * TM, j0 = get_group_id(0) * TN;
  const size_t db = (size_t)dy_off + grp * ocg * ohw;
  const int ka = tid % TK, ma = tid / TK;
  tap_col tc[LB];
  UNROLL for (int e = 0; e < LB; e++) {
    const size_t t = j0 + ma + e * (WGS / TK), tt = t < kt ? t : 0;
    const size_t c = tt / taps, r = tt - c * taps;
    tc[e].xc = (size_t)x_off + (grp * cg + c) * hw;
    tc[e].offh = t < kt ? (int)((long)(r / g.kw) * g.dh - g.ph) : (int)g.h;
    tc[e].offw = (int)((long)(r % g.kw) * g.dw - g.pw);
  }
  const size_t qa = s * (size_t)KC, qb = min(qa + (size_t)KC, np);
  /* The work-item's pixel (n, oh, ow), stepped by TK. */
  int dpix[3], pix[3];
  tap_split(TK, (int)g.oh, (int)g.ow, &dpix[0], &dpix[1], &dpix[2]);
  tap_split(qa + ka, (int)g.oh, (int)g.ow, &pix[0], &pix[1], &pix[2]);
  float acc[RM][RN], ra[LA], rb[LB];
  UNROLL for (int i = 0; i < RM; i++)
    UNROLL for (int j = 0; j < RN; j++) acc[i][j] = 0.0f;
  if (qa < qb)
    bwd_weight_load(&g, x, dy, db, m0, ma, tc, qa + ka < qb, pix, dpix, ra,
                    rb);
  for (size_t k0 = qa; k0 < qb; k0 += TK) {
    tile_store(As, Bs, ra, rb, tid, 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (k0 + TK < qb) /* the next step travels during the products */
      bwd_weight_load(&g, x, dy, db, m0, ma, tc, k0 + TK + ka < qb, pix,
                      dpix, ra, rb);
    tile_mul(As, Bs, tx, ty, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  UNROLL for (int j = 0; j < RN; j++) {
    const size_t t = j0 + COL_OF(tx, j);
    if (t >= kt) continue;
    UNROLL for (int i = 0; i < RM; i++) {
      const size_t m = m0 + ROW_OF(ty, i);
      if (m >= ocg) continue;
      const size_t at = (grp * ocg + m) * kt + t;
      if (S == 1)
        STORE(acc[i][j], dw, (size_t)dw_off + at);
      else
        part[s * (size_t)g.oc * kt + at] = acc[i][j];
    }
  }
}

/* ---- One input channel per group (depthwise, or C = 1): the GEMMs' k
 * are then only the KH KW taps, less than a step of TK in most cases and
 * a tile's rows mostly idle, so a work-item computes one output directly,
 * work-item i0 + i the i-th element of y or dx.  The sums are the GEMMs'
 * (the forward's taps upwards from 0 with one fma each, 0 in the padding,
 * then the bias; the input gradient's (o, kh, kw) over the taps of the
 * pixel's phase, 0 where dy has no pixel), so the bits are the same. */

__kernel RUMUS_REQD_WG(WGS, 1, 1)
void conv_fwd_direct(global const real_t *restrict x, ulong x_off,
                     global const real_t *restrict w, ulong w_off,
                     global const real_t *restrict bias, ulong b_off,
                     int has_bias, global real_t *restrict y, ulong y_off,
                     long16 gv, ulong i0) {
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, i = get_global_id(0) + (size_t)i0;
  if (i >= g.n * g.oc * ohw) return;
  const size_t no = i / ohw, p = i - no * ohw; /* no = n OC + o */
  const size_t n = no / g.oc, o = no - n * g.oc, grp = o / (g.oc / g.g);
  const int oh = (int)(p / g.ow), ow = (int)(p - (size_t)oh * g.ow);
  const int ih0 = oh * (int)g.sh - (int)g.ph, iw0 = ow * (int)g.sw - (int)g.pw;
  const int H = (int)g.h, W = (int)g.w, KW = (int)g.kw;
  const size_t xb = (size_t)x_off + (n * g.c + grp) * (size_t)(g.h * g.w);
  const size_t wb = (size_t)w_off + o * (size_t)(g.kh * g.kw);
  float acc = 0.0f;
  for (int kh = 0; kh < (int)g.kh; kh++) {
    const int ih = ih0 + kh * (int)g.dh;
    const int inh = (uint)ih < (uint)H;
    for (int kw = 0; kw < KW; kw++) {
      const int iw = iw0 + kw * (int)g.dw;
      const float xv = (inh & ((uint)iw < (uint)W))
                           ? LOAD(x, xb + (size_t)ih * W + iw)
                           : 0.0f;
      acc = fma(LOAD(w, wb + (size_t)(kh * KW + kw)), xv, acc);
    }
  }
  const float add = has_bias ? LOAD(bias, (size_t)b_off + o) : 0.0f;
  STORE(acc + add, y, (size_t)y_off + i);
}

__kernel RUMUS_REQD_WG(WGS, 1, 1)
void conv_bwd_data_direct(global const real_t *restrict dy, ulong dy_off,
                          global const real_t *restrict w, ulong w_off,
                          global real_t *restrict dx, ulong dx_off,
                          long16 gv, ulong i0) {
  const geo_t g = geo_of(gv);
  const size_t hw = g.h * g.w, ohw = g.oh * g.ow;
  const size_t i = get_global_id(0) + (size_t)i0;
  if (i >= g.n * g.c * hw) return;
  const size_t nc = i / hw, p = i - nc * hw; /* nc = n C + c, c the group */
  const size_t n = nc / g.c, grp = nc - n * g.c, ocg = g.oc / g.g;
  const int th = (int)(p / g.w) + (int)g.ph;
  const int tw = (int)(p % g.w) + (int)g.pw;
  int sth, stw;
  const int kh0 = phase_first(th, (int)g.kh, (int)g.dh, (int)g.sh, &sth);
  const int kw0 = phase_first(tw, (int)g.kw, (int)g.dw, (int)g.sw, &stw);
  const int OH = (int)g.oh, OW = (int)g.ow, KW = (int)g.kw;
  const size_t taps = g.kh * g.kw;
  const size_t db = (size_t)dy_off + (n * g.oc + grp * ocg) * ohw;
  const size_t wb = (size_t)w_off + grp * ocg * taps;
  float acc = 0.0f;
  for (size_t o = 0; o < ocg; o++)
    for (int kh = kh0; kh < (int)g.kh; kh += sth) {
      /* SH divides th - kh DH: the division is exact. */
      const int oh = (th - kh * (int)g.dh) / (int)g.sh;
      const int inh = (th >= kh * (int)g.dh) & (oh < OH);
      for (int kw = kw0; kw < KW; kw += stw) {
        const int ow = (tw - kw * (int)g.dw) / (int)g.sw;
        const float v = (inh & (tw >= kw * (int)g.dw) & (ow < OW))
                            ? LOAD(dy, db + o * ohw + (size_t)oh * OW + ow)
                            : 0.0f;
        acc = fma(LOAD(w, wb + o * taps + (size_t)(kh * KW + kw)), v, acc);
      }
    }
  STORE(acc, dx, (size_t)dx_off + i);
}
/* ---- Weight gradient with one input channel per group (the order above
 * conv_bwd_weight_dw_cpu): work-group (block b, output channel o0 + o) of
 * DWL lanes, each keeping DWT taps' sums in registers; the tree runs in
 * local memory. */
__kernel RUMUS_REQD_WG(DWL, 1, 1)
void conv_bwd_weight_dw(global const real_t *restrict x, ulong x_off,
                        global const real_t *restrict dy, ulong dy_off,
                        global real_t *restrict dw, ulong dw_off,
                        global float *restrict part, long16 gv, ulong B,
                        int t0, ulong o0) {
  local float red[DWT][DWL];
  const geo_t g = geo_of(gv);
  const size_t ohw = g.oh * g.ow, hw = g.h * g.w, np = g.n * ohw;
  const int l = (int)get_local_id(0);
  const size_t b = get_group_id(0), o = get_global_id(1) + (size_t)o0;
  const size_t grp = o / (g.oc / g.g), P = DWL * (size_t)B;
  int offh[DWT], offw[DWT];
  const int nt = dw_taps(&g, t0, offh, offw);
  const int H = (int)g.h, W = (int)g.w;
  float acc[DWT];
  long toff[DWT];
  UNROLL for (int e = 0; e < DWT; e++) {
    acc[e] = 0.0f;
    toff[e] = (long)offh[e] * W + offw[e];
  }
  /* The lane's pixel (n, oh, ow), stepped by P through carries. */
  int pix[3], dpix[3];
  tap_split(P, (int)g.oh, (int)g.ow, &dpix[0], &dpix[1], &dpix[2]);
  tap_split(b * DWL + (size_t)l, (int)g.oh, (int)g.ow, &pix[0], &pix[1],
            &pix[2]);
  for (size_t q = b * DWL + (size_t)l; q < np; q += P) {
    const size_t n = (size_t)pix[0];
    const float d = LOAD(dy, (size_t)dy_off + (n * g.oc + o) * ohw +
                                 (size_t)pix[1] * g.ow + (size_t)pix[2]);
    const int ihb = pix[1] * (int)g.sh, iwb = pix[2] * (int)g.sw;
    /* x's offset of (ihb, iwb), so each tap adds a constant (toff). */
    const long xb = (long)x_off + (long)((n * g.c + grp) * hw) +
                    (long)ihb * W + iwb;
    UNROLL for (int e = 0; e < DWT; e++) {
      const int ih = ihb + offh[e], iw = iwb + offw[e];
      const float xv = (((uint)ih < (uint)H) & ((uint)iw < (uint)W))
                           ? LOAD(x, (size_t)(xb + toff[e]))
                           : 0.0f;
      acc[e] = fma(d, xv, acc[e]);
    }
    tap_step(&pix[0], &pix[1], &pix[2], dpix[0], dpix[1], dpix[2],
             (int)g.oh, (int)g.ow);
  }
  UNROLL for (int e = 0; e < DWT; e++) red[e][l] = acc[e];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = DWL / 2; h > 0; h /= 2) {
    if (l < h)
      UNROLL for (int e = 0; e < DWT; e++) red[e][l] += red[e][l + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l < nt) dw_put(&g, dw, dw_off, part, (size_t)B, b, o, t0 + l, red[l][0]);
}
/* ---- Input gradient with few channels per group (1 .. FEWC): the GEMM's
 * rows are those channels, a tile's rows mostly idle (one channel:
 * conv_bwd_data_direct's sums, without its divisions per tap; it stays
 * as the fallback), so a work-item computes every channel of two dx
 * pixels directly (columns iw and iw + SW: the same taps, so each weight
 * read feeds both), the sums those of the GEMM term for term ((o, kh,
 * kw) upwards over the taps of the pixel's phase, skipping those whose dy
 * row lies outside dy, a zero for a column outside it).  Work-items run
 * over the pixels of an input row by column phase (iw mod SW, then iw),
 * so a warp's lanes visit the same taps, read the same weights (staged in
 * local memory, OB output channels at a time) and nearly consecutive dy. */

/* The taps k0 + kst i (i < the phase's count) of input coordinate t + P
 * = t along one axis whose dy coordinate d0 - es i lies in [0, E): i
 * from *lo to *hi (none when *lo > *hi). */
inline void tap_range(int t, int K, int D, int S, int E, int *k0, int *kst,
                      int *d0, int *es, int *lo, int *hi) {
  *k0 = phase_first(t, K, D, S, kst);
  const int nk = *k0 < K ? (K - *k0 + *kst - 1) / *kst : 0;
  const int e = t - *k0 * D; /* S divides it */
  *es = *kst * D / S; /* >= 1 */
  *d0 = e / S; /* exact, negative or not, when nk > 0 */
  *lo = *d0 >= E ? (*d0 - E + *es) / *es : 0;
  *hi = e >= 0 ? min(nk - 1, *d0 / *es) : -1;
}

#define FEWC 4     /* channels per group at most */
#define FEWWG 256  /* work-group size */
#define FEWLW 4096 /* floats of w in local memory */

/* Pairs of pixels per input row: a work-item takes columns iw and iw +
 * SW of one phase (the same taps; dy columns ow and ow + 1).  The row's
 * pairs run by phase: the first `full` phases hold wc columns, the
 * others wc - 1 (none when SW > W). */
inline uint few_row_pairs(int W, int SW, int *wc, int *full) {
  *wc = (W + SW - 1) / SW;
  *full = W % SW ? W % SW : SW;
  return (uint)(*full * ((*wc + 1) / 2) + (SW - *full) * (*wc / 2));
}

/* Work-item i's row (n, ih), its first column and whether the second
 * exists.  32-bit divisions: the host keeps N H W below 2^31. */
inline void few_pair(uint i, const geo_t *g, size_t *n, size_t *ih,
                     int *iw, int *two) {
  const int W = (int)g->w, SW = (int)g->sw;
  int wc, full;
  const uint rp = few_row_pairs(W, SW, &wc, &full), row = i / rp;
  const int u = (int)(i - row * rp), p1 = (wc + 1) / 2, p2 = wc / 2;
  *n = row / (uint)g->h;
  *ih = row - (uint)*n * (uint)g->h;
  int m, j, cols; /* phase, pair, columns of the phase */
  if (u < full * p1) {
    m = u / p1;
    j = u - m * p1;
    cols = wc;
  } else {
    m = full + (u - full * p1) / p2;
    j = (u - full * p1) - (m - full) * p2;
    cols = wc - 1;
  }
  *iw = m + SW * 2 * j;
  *two = 2 * j + 1 < cols;
}

/* The body of conv_bwd_data_few<CG>: CG = C / G channels per group, a
 * constant after inlining, so no lane of acc is idle.  A tap that meets
 * dy for one pixel of the pair only gives the other fma(w, 0, acc), which
 * leaves acc as it is for a finite w (as the GEMM's zeros). */
inline void bwd_data_few(global const real_t *restrict dy, ulong dy_off,
                         global const real_t *restrict w, ulong w_off,
                         global real_t *restrict dx, ulong dx_off,
                         long16 gv, ulong OB, ulong g0, local float *ws,
                         const int CG) {
  const geo_t g = geo_of(gv);
  const size_t hw = g.h * g.w, ohw = g.oh * g.ow;
  const size_t cg = (size_t)CG, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t i = get_global_id(0), grp = get_global_id(1) + (size_t)g0;
  int wc, full;
  const size_t rp = few_row_pairs((int)g.w, (int)g.sw, &wc, &full);
  const int lid = (int)get_local_id(0), valid = i < g.n * g.h * rp;
  size_t n, ih;
  int iw, two;
  few_pair(valid ? (uint)i : 0, &g, &n, &ih, &iw, &two);
  /* The taps of the pair's phase whose dy lies inside dy for either
   * pixel, and dy's row and (first pixel's) column at the first tap. */
  int kh0, sth, oh0, esh, ilo, ihi, kw0, stw, ow0, esw, llo, lhi, l2, h2;
  tap_range((int)ih + (int)g.ph, (int)g.kh, (int)g.dh, (int)g.sh,
            (int)g.oh, &kh0, &sth, &oh0, &esh, &ilo, &ihi);
  tap_range(iw + (int)g.pw, (int)g.kw, (int)g.dw, (int)g.sw, (int)g.ow,
            &kw0, &stw, &ow0, &esw, &llo, &lhi);
  {
    int k, st, d0, es;
    tap_range(iw + (int)g.sw + (int)g.pw, (int)g.kw, (int)g.dw, (int)g.sw,
              (int)g.ow, &k, &st, &d0, &es, &l2, &h2);
  }
  if (two && l2 <= h2) {
    llo = llo <= lhi ? min(llo, l2) : l2;
    lhi = max(lhi, h2);
  }
  const int OW = (int)g.ow, KW = (int)g.kw, T = (int)taps;
  const size_t db = (size_t)dy_off + (n * g.oc + grp * ocg) * ohw;
  const size_t wb = (size_t)w_off + grp * ocg * cg * taps;
  float a1[FEWC], a2[FEWC];
  UNROLL for (int c = 0; c < CG; c++) a1[c] = a2[c] = 0.0f;
  for (size_t o0 = 0; o0 < ocg; o0 += (size_t)OB) {
    const size_t on = min((size_t)OB, ocg - o0), nw = on * cg * taps;
    barrier(CLK_LOCAL_MEM_FENCE); /* the last chunk's readers are done */
    for (size_t k = (size_t)lid; k < nw; k += FEWWG)
      ws[k] = LOAD(w, wb + o0 * cg * taps + k);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!valid) continue;
    for (int o = 0; o < (int)on; o++) {
      const size_t dyb = db + (o0 + (size_t)o) * ohw;
      for (int r = ilo; r <= ihi; r++) {
        const size_t rowb = dyb + (size_t)(oh0 - esh * r) * OW;
        const int wr = o * (int)cg * T + (kh0 + sth * r) * KW + kw0;
        for (int l = llo; l <= lhi; l++) {
          const int ow = ow0 - esw * l;
          const float v1 = (uint)ow < (uint)OW ? LOAD(dy, rowb + ow) : 0.0f;
          const float v2 = (two & ((uint)(ow + 1) < (uint)OW))
                               ? LOAD(dy, rowb + ow + 1) : 0.0f;
          const int wk = wr + stw * l;
          UNROLL for (int c = 0; c < CG; c++) {
            const float wv = ws[wk + c * T];
            a1[c] = fma(wv, v1, a1[c]);
            a2[c] = fma(wv, v2, a2[c]);
          }
        }
      }
    }
  }
  if (!valid) return;
  const size_t xb = (size_t)dx_off + (n * g.c + grp * cg) * hw + ih * g.w +
                    (size_t)iw;
  UNROLL for (int c = 0; c < CG; c++) {
    STORE(a1[c], dx, xb + (size_t)c * hw);
    if (two) STORE(a2[c], dx, xb + (size_t)c * hw + g.sw);
  }
}

#define FEW_KERNEL(CG)                                                      \
  __kernel RUMUS_REQD_WG(FEWWG, 1, 1) void conv_bwd_data_few##CG(           \
      global const real_t *restrict dy, ulong dy_off,                       \
      global const real_t *restrict w, ulong w_off,                         \
      global real_t *restrict dx, ulong dx_off, long16 gv, ulong OB,        \
      ulong g0) {                                                           \
    local float ws[FEWLW];                                                  \
    bwd_data_few(dy, dy_off, w, w_off, dx, dx_off, gv, OB, g0, ws, CG);     \
  }
FEW_KERNEL(1)
FEW_KERNEL(2)
FEW_KERNEL(3)
FEW_KERNEL(4)
/* ---- The same sums over P-tuples (RUMUS_CONV2D_FEW_PIX 4 or 8): a
 * work-item takes columns iw, iw + SW, ..., iw + (P - 1) SW of one
 * phase (dy columns ow .. ow + P - 1 at each tap), so each weight read
 * from local memory (a tap's channels as one float4) feeds P pixels.
 * Along a tap row the taps step dy's column down by es: the P values of
 * the next tap are those of this one shifted up by es, with es new ones
 * at the bottom, so a row of the tuple's taps loads P + es (taps - 1)
 * values rather than P per tap (the window only ever indexed by
 * constants).  Work-items run by row phase, column phase, row of that
 * phase, then tuple, so the lanes of a warp share their taps even when a
 * row holds few tuples. */

/* Tuples of one column phase's wc columns. */
#define FEW_TUP(wc, P) (((wc) + (P) - 1) / (P))

/* Work-item i's row (n, ih), first column iw and pixels np (1 .. P). */
inline void few_tuple(uint i, const geo_t *g, const int P, size_t *n,
                      size_t *ih, int *iw, int *np) {
  const int H = (int)g->h, W = (int)g->w, SH = (int)g->sh, SW = (int)g->sw;
  const int wc = (W + SW - 1) / SW, fw = W % SW ? W % SW : SW;
  const int hc = (H + SH - 1) / SH, fh = H % SH ? H % SH : SH;
  const int t1 = FEW_TUP(wc, P), t2 = FEW_TUP(wc - 1, P);
  const uint T = (uint)(fw * t1 + (SW - fw) * t2), img = (uint)H * T;
  *n = i / img;
  const uint v = i - (uint)*n * img;
  int a, rows; /* row phase and its rows */
  uint u;      /* index within the row phase */
  if (v < (uint)(fh * hc) * T) {
    a = (int)(v / ((uint)hc * T));
    u = v - (uint)a * (uint)hc * T;
    rows = hc;
  } else {
    const uint v2 = v - (uint)(fh * hc) * T;
    a = fh + (int)(v2 / ((uint)(hc - 1) * T));
    u = v2 - (uint)(a - fh) * (uint)(hc - 1) * T;
    rows = hc - 1;
  }
  int m, tp, cols; /* column phase, its tuples per row and columns */
  if (u < (uint)(fw * rows * t1)) {
    m = (int)(u / (uint)(rows * t1));
    u -= (uint)(m * rows * t1);
    tp = t1;
    cols = wc;
  } else {
    u -= (uint)(fw * rows * t1);
    m = fw + (int)(u / (uint)(rows * t2));
    u -= (uint)((m - fw) * rows * t2);
    tp = t2;
    cols = wc - 1;
  }
  const int k = (int)(u / (uint)tp), j = (int)u - k * tp;
  *ih = (size_t)(a + SH * k);
  *iw = m + SW * P * j;
  *np = min(P, cols - P * j);
}

/* Stages output channels o0 .. o0 + on of the group's weights (from wb)
 * as ws[(o T + tap) 4 + c]. */
inline void few_stage4(global const real_t *restrict w, size_t wb,
                       size_t o0, size_t on, int CG, int T,
                       local float *ws) {
  const int per = CG * T, nw = (int)on * per;
  for (int k = (int)get_local_id(0); k < nw; k += FEWWG) {
    const int o = k / per, c = (k - o * per) / T, t = k - o * per - c * T;
    ws[(o * T + t) * 4 + c] = LOAD(w, wb + o0 * (size_t)per + (size_t)k);
  }
}

/* dy's value at column c of the row at rowb, 0 outside dy. */
#define FEW_DY(c) ((uint)(c) < (uint)OW ? LOAD(dy, rowb + (size_t)(c)) : 0.0f)

/* The body of conv_bwd_data_few<CG>p<P>: as bwd_data_few, P pixels. */
inline void bwd_data_fewp(global const real_t *restrict dy, ulong dy_off,
                          global const real_t *restrict w, ulong w_off,
                          global real_t *restrict dx, ulong dx_off,
                          long16 gv, ulong OB, ulong g0, local float4 *ws4,
                          const int CG, const int P) {
  const geo_t g = geo_of(gv);
  const size_t hw = g.h * g.w, ohw = g.oh * g.ow;
  const size_t cg = (size_t)CG, ocg = g.oc / g.g, taps = g.kh * g.kw;
  const size_t i = get_global_id(0), grp = get_global_id(1) + (size_t)g0;
  const int W = (int)g.w, SW = (int)g.sw, wc = (W + SW - 1) / SW;
  const int fw = W % SW ? W % SW : SW;
  const size_t tpr = (size_t)(fw * FEW_TUP(wc, P) +
                              (SW - fw) * FEW_TUP(wc - 1, P));
  const int valid = i < g.n * g.h * tpr;
  size_t n, ih;
  int iw, np;
  few_tuple(valid ? (uint)i : 0, &g, P, &n, &ih, &iw, &np);
  /* The phase's taps whose dy lies inside dy for some pixel of the
   * tuple: rows as for one pixel, columns from the first pixel's lowest
   * to the last pixel's highest (dy column d0 + q - es l). */
  int kh0, sth, oh0, esh, ilo, ihi, kw0, stw, ow0, esw, llo, lhi;
  tap_range((int)ih + (int)g.ph, (int)g.kh, (int)g.dh, (int)g.sh,
            (int)g.oh, &kh0, &sth, &oh0, &esh, &ilo, &ihi);
  tap_range(iw + (int)g.pw, (int)g.kw, (int)g.dw, SW, (int)g.ow, &kw0,
            &stw, &ow0, &esw, &llo, &lhi);
  {
    const int nk = kw0 < (int)g.kw ? ((int)g.kw - kw0 + stw - 1) / stw : 0;
    const int d = ow0 + np - 1;
    lhi = d >= 0 ? min(nk - 1, d / esw) : -1;
  }
  if (llo > lhi) ihi = ilo - 1; /* no column meets dy: no row either */
  const int OW = (int)g.ow, KW = (int)g.kw, T = (int)taps;
  const size_t db = (size_t)dy_off + (n * g.oc + grp * ocg) * ohw;
  const size_t wb = (size_t)w_off + grp * ocg * cg * taps;
  float acc[FEWC][8], v[8];
  UNROLL for (int c = 0; c < CG; c++)
    UNROLL for (int q = 0; q < P; q++) acc[c][q] = 0.0f;
  for (size_t o0 = 0; o0 < ocg; o0 += (size_t)OB) {
    const size_t on = min((size_t)OB, ocg - o0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the last chunk's readers are done */
    few_stage4(w, wb, o0, on, CG, T, (local float *)ws4);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!valid) continue;
    for (int o = 0; o < (int)on; o++) {
      const size_t dyb = db + (o0 + (size_t)o) * ohw;
      for (int r = ilo; r <= ihi; r++) {
        const size_t rowb = dyb + (size_t)(oh0 - esh * r) * OW;
        const int wr = o * T + (kh0 + sth * r) * KW + kw0;
        int col = ow0 - esw * llo; /* tap l's first pixel's dy column */
        UNROLL for (int q = 0; q < P; q++) v[q] = FEW_DY(col + q);
        for (int l = llo; l <= lhi; l++) {
          /* The next tap's new values, loaded before this tap's sums. */
          col -= esw;
          float nx = 0.0f;
          if (esw == 1)
            nx = ((l < lhi) & ((uint)col < (uint)OW)) ? LOAD(dy, rowb + col)
                                                       : 0.0f;
          const float4 wv = ws4[wr + stw * l];
          const float wc[4] = {wv.s0, wv.s1, wv.s2, wv.s3};
          UNROLL for (int c = 0; c < CG; c++)
            UNROLL for (int q = 0; q < P; q++)
              acc[c][q] = fma(wc[c], v[q], acc[c][q]);
          if (esw == 1) {
            UNROLL for (int q = P - 1; q > 0; q--) v[q] = v[q - 1];
            v[0] = nx;
          } else { /* the values shift by esw */
            for (int e = esw - 1; e >= 0; e--) {
              UNROLL for (int q = P - 1; q > 0; q--) v[q] = v[q - 1];
              v[0] = FEW_DY(col + e);
            }
          }
        }
      }
    }
  }
  if (!valid) return;
  const size_t xb = (size_t)dx_off + (n * g.c + grp * cg) * hw + ih * g.w +
                    (size_t)iw;
  UNROLL for (int c = 0; c < CG; c++)
    UNROLL for (int q = 0; q < P; q++)
      if (q < np) STORE(acc[c][q], dx, xb + (size_t)c * hw + (size_t)(q * SW));
}
#undef FEW_DY

#define FEWP_KERNEL(CG, P)                                                  \
  __kernel RUMUS_REQD_WG(FEWWG, 1, 1) void conv_bwd_data_few##CG##p##P(     \
      global const real_t *restrict dy, ulong dy_off,                       \
      global const real_t *restrict w, ulong w_off,                         \
      global real_t *restrict dx, ulong dx_off, long16 gv, ulong OB,        \
      ulong g0) {                                                           \
    local float4 ws4[FEWLW / 4];                                            \
    bwd_data_fewp(dy, dy_off, w, w_off, dx, dx_off, gv, OB, g0, ws4, CG,    \
                  P);                                                       \
  }
FEWP_KERNEL(1, 4)
FEWP_KERNEL(2, 4)
FEWP_KERNEL(3, 4)
FEWP_KERNEL(4, 4)
FEWP_KERNEL(1, 8)
FEWP_KERNEL(2, 8)
FEWP_KERNEL(3, 8)
FEWP_KERNEL(4, 8)
/* ---- Columns of P-tuples (FEW_PIX v4 or v8): a work-item takes rows
 * ih, ih + SH, ..., ih + (P - 1) SH of one column iw, and the lanes of a
 * warp consecutive columns of one phase, so that every dy load of a warp
 * is contiguous.  With dy's row stepping by one between a phase's row
 * taps (DH divides SH), pixel p at row tap r reads dy row oh0 + p - r:
 * the values of an output channel for every (p, r, l) are a window of P
 * + FEWRT - 1 rows by FEWLT tap columns, loaded once per channel and
 * indexed only by constants.  For phases of at most FEWRT x FEWLT taps
 * (the host checks); the weights in local memory hold a tap's channels
 * as one float4, read with one load. */
#define FEWRT 4
#define FEWLT 4

/* Work-item i's first pixel (n, ih, iw) and its pixels np (1 .. P). */
inline void few_column(uint i, const geo_t *g, const int P, size_t *n,
                       size_t *ih, int *iw, int *np) {
  const int H = (int)g->h, W = (int)g->w, SH = (int)g->sh, SW = (int)g->sw;
  const int wc = (W + SW - 1) / SW, fw = W % SW ? W % SW : SW;
  const int hc = (H + SH - 1) / SH, fh = H % SH ? H % SH : SH;
  const int r1 = FEW_TUP(hc, P), r2 = FEW_TUP(hc - 1, P);
  const uint img = (uint)((fh * r1 + (SH - fh) * r2) * W);
  *n = i / img;
  uint u = i - (uint)*n * img;
  int a, tr, rows; /* row phase, its tuples of rows and its rows */
  if (u < (uint)(fh * r1 * W)) {
    a = (int)(u / (uint)(r1 * W));
    u -= (uint)(a * r1 * W);
    tr = r1;
    rows = hc;
  } else {
    u -= (uint)(fh * r1 * W);
    a = fh + (int)(u / (uint)(r2 * W));
    u -= (uint)((a - fh) * r2 * W);
    tr = r2;
    rows = hc - 1;
  }
  int m, cols; /* column phase and its columns */
  if (u < (uint)(fw * tr * wc)) {
    m = (int)(u / (uint)(tr * wc));
    u -= (uint)(m * tr * wc);
    cols = wc;
  } else {
    u -= (uint)(fw * tr * wc);
    m = fw + (int)(u / (uint)(tr * (wc - 1)));
    u -= (uint)((m - fw) * tr * (wc - 1));
    cols = wc - 1;
  }
  const int k = (int)(u / (uint)cols), j = (int)u - k * cols;
  *ih = (size_t)(a + SH * P * k);
  *iw = m + SW * j;
  *np = min(P, rows - P * k);
}

/* The body of conv_bwd_data_few<CG>v<P>. */
inline void bwd_data_fewv(global const real_t *restrict dy, ulong dy_off,
                          global const real_t *restrict w, ulong w_off,
                          global real_t *restrict dx, ulong dx_off,
                          long16 gv, ulong OB, ulong g0, local float4 *ws4,
                          const int CG, const int P) {
  const geo_t g = geo_of(gv);
  const size_t hw = g.h * g.w, ohw = g.oh * g.ow;
  const size_t ocg = g.oc / g.g;
  const size_t i = get_global_id(0), grp = get_global_id(1) + (size_t)g0;
  const int H = (int)g.h, SH = (int)g.sh, hc = (H + SH - 1) / SH;
  const int fh = H % SH ? H % SH : SH;
  const size_t per = (size_t)(fh * FEW_TUP(hc, P) +
                              (SH - fh) * FEW_TUP(hc - 1, P)) * g.w;
  const int valid = i < g.n * per;
  size_t n, ih;
  int iw, np;
  few_column(valid ? (uint)i : 0, &g, P, &n, &ih, &iw, &np);
  /* Row taps meeting dy for some pixel (as the columns of
   * bwd_data_fewp), column taps for the one column. */
  int kh0, sth, oh0, esh, ilo, ihi, kw0, stw, ow0, esw, llo, lhi;
  tap_range((int)ih + (int)g.ph, (int)g.kh, (int)g.dh, SH, (int)g.oh, &kh0,
            &sth, &oh0, &esh, &ilo, &ihi);
  tap_range(iw + (int)g.pw, (int)g.kw, (int)g.dw, (int)g.sw, (int)g.ow,
            &kw0, &stw, &ow0, &esw, &llo, &lhi);
  {
    const int nk = kh0 < (int)g.kh ? ((int)g.kh - kh0 + sth - 1) / sth : 0;
    const int d = oh0 + np - 1;
    ihi = d >= 0 ? min(nk - 1, d / esh) : -1;
  }
  const int nr = ihi - ilo, nl = lhi - llo; /* taps past the first */
  const int OH = (int)g.oh, OW = (int)g.ow, KW = (int)g.kw;
  const int T = (int)(g.kh * g.kw);
  /* Window entry (k, l): dy row rb + k, column ow0 - esw (llo + l);
   * the bits of `need` mark those inside dy that some tap reads. */
  const int rb = oh0 - ilo - (FEWRT - 1);
  ulong need = 0;
  UNROLL for (int k = 0; k < 8 + FEWRT - 1; k++)
    UNROLL for (int l = 0; l < FEWLT; l++) {
      const int row = rb + k, col = ow0 - esw * (llo + l);
      const int in = (k < P + FEWRT - 1) & (k >= FEWRT - 1 - nr) &
                     (l <= nl) & ((uint)row < (uint)OH) &
                     ((uint)col < (uint)OW);
      need |= (ulong)in << (k * FEWLT + l);
    }
  const size_t db = (size_t)dy_off + (n * g.oc + grp * ocg) * ohw +
                    (size_t)(rb * OW + ow0 - esw * llo);
  const size_t wb = (size_t)w_off + grp * ocg * (size_t)CG * (size_t)T;
  const int wt0 = (kh0 + sth * ilo) * KW + kw0 + stw * llo, wrs = sth * KW;
  float acc[FEWC][8], win[8 + FEWRT - 1][FEWLT];
  UNROLL for (int c = 0; c < CG; c++)
    UNROLL for (int p = 0; p < P; p++) acc[c][p] = 0.0f;
  for (size_t o0 = 0; o0 < ocg; o0 += (size_t)OB) {
    const size_t on = min((size_t)OB, ocg - o0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the last chunk's readers are done */
    few_stage4(w, wb, o0, on, CG, T, (local float *)ws4);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!valid || nr < 0 || nl < 0) continue;
    for (int o = 0; o < (int)on; o++) {
      const size_t ob = db + (o0 + (size_t)o) * ohw;
      UNROLL for (int k = 0; k < P + FEWRT - 1; k++)
        UNROLL for (int l = 0; l < FEWLT; l++)
          win[k][l] = ((need >> (k * FEWLT + l)) & 1)
                          ? LOAD(dy, ob + (size_t)(k * OW - esw * l))
                          : 0.0f;
      const int wo = o * T + wt0;
      UNROLL for (int r = 0; r < FEWRT; r++) {
        if (r > nr) break;
        UNROLL for (int l = 0; l < FEWLT; l++) {
          if (l > nl) break;
          const float4 wv = ws4[wo + r * wrs + l * stw];
          const float wc[4] = {wv.s0, wv.s1, wv.s2, wv.s3};
          UNROLL for (int c = 0; c < CG; c++)
            UNROLL for (int p = 0; p < P; p++)
              acc[c][p] = fma(wc[c], win[FEWRT - 1 - r + p][l], acc[c][p]);
        }
      }
    }
  }
  if (!valid) return;
  const size_t xb = (size_t)dx_off + (n * g.c + grp * (size_t)CG) * hw +
                    ih * g.w + (size_t)iw;
  UNROLL for (int c = 0; c < CG; c++)
    UNROLL for (int p = 0; p < P; p++)
      if (p < np)
        STORE(acc[c][p], dx, xb + (size_t)c * hw + (size_t)(p * SH) * g.w);
}

#define FEWV_KERNEL(CG, P)                                                  \
  __kernel RUMUS_REQD_WG(FEWWG, 1, 1) void conv_bwd_data_few##CG##v##P(     \
      global const real_t *restrict dy, ulong dy_off,                       \
      global const real_t *restrict w, ulong w_off,                         \
      global real_t *restrict dx, ulong dx_off, long16 gv, ulong OB,        \
      ulong g0) {                                                           \
    local float4 ws4[FEWLW / 4];                                            \
    bwd_data_fewv(dy, dy_off, w, w_off, dx, dx_off, gv, OB, g0, ws4, CG,    \
                  P);                                                       \
  }
FEWV_KERNEL(1, 4)
FEWV_KERNEL(2, 4)
FEWV_KERNEL(3, 4)
FEWV_KERNEL(4, 4)
FEWV_KERNEL(1, 8)
FEWV_KERNEL(2, 8)
FEWV_KERNEL(3, 8)
FEWV_KERNEL(4, 8)
#endif
