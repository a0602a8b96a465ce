/*
 * tensorops.cl - permute (strided copy), broadcast add / mul and sums over
 * axes.  Every tensor arrives as (buffer, ulong element offset); index
 * math is size_t.  The host (src/ops/tensorops.c) first drops extents of 1
 * and merges neighbouring dimensions that stay contiguous in every tensor
 * of the call, so that a kernel sees at most 8 dimensions, usually 1-3,
 * and a head split [B, T, H, D] -> [B, H, T, D] is rows of D elements.
 *
 * Shapes arrive as ulong8 extents and element strides (the dimensions
 * past nd unused); to_off() turns a row-major index over them into an
 * element offset, once per row or run, never per element.
 *
 *   permute     y[i] = x[off(i)]: y is contiguous; y's last (merged)
 *               dimension has input stride SI.
 *     to_copy       rows of y's last dimension, VW elements per work-item
 *                   (GPU; CPU when there are few rows): with SI = 1 (the
 *                   last dimension kept) vector moves of the bits;
 *                   otherwise a strided gather (devices that cannot run
 *                   to_tile's 256 work-items);
 *     to_copy_rows  CPU: runs of rows per work-item, offsets by odometer;
 *     to_tile       GPU, the last dimension moves: 32 x 32 tiles through
 *                   local memory, read along the input's contiguous
 *                   dimension and written along y's, so both sides are
 *                   contiguous;
 *     to_tile_item  CPU, the same: a 32 x 32 tile per work-item, no
 *                   barrier, in 8 x 8 blocks transposed in registers.
 *     A permute moves the stored bits (uint or ushort: TO_BITS), so it is
 *     exact for every value, signalling NaNs included.
 *   broadcast   out[i] = a[offa(i)] op b[offb(i)] in float, rows of out's
 *               last dimension, where a and b each have stride 1 or 0 (a
 *               value repeated along the row: a scalar, a column):
 *               bcast_* one vector per work-item (GPU), bcast_rows_* runs
 *               of rows per work-item (CPU).
 *   reduce_sum  y[j] = sum over the reduced index r of x[offk(j) + offr(r)]
 *               in float; the reduced elements are Q runs (the reduced
 *               dimensions but the innermost, to_off) of L elements SI
 *               apart (the innermost reduced dimension).  When y alone
 *               cannot fill the device the flat range of r is cut into
 *               chunks of RC that write float partials, added in chunk
 *               order by rs_fold.  The sum order is fixed by the shape,
 *               the variant and the device's compute units (same bits on
 *               every run; the variants may differ in the last bits):
 *     rs_row_inner  one work-item per y element, float8 partial sums
 *                   over each run (x's last dimension reduced, SI = 1),
 *                   the lanes added at the end (CPU variant; GPU for short
 *                   reductions);
 *     rs_row_outer  one work-item per 64 neighbouring y elements (x's last
 *                   dimension kept: they are contiguous in x), float8
 *                   accumulators, r ascending (CPU variant);
 *     rs_wg_inner   a work-group per y element: work-item lid adds r =
 *                   lid, lid + WG, ...; a tree in local memory (GPU);
 *     rs_wg_outer   a work-group of 32 columns x WG / 32 lanes: lane t
 *                   adds r = t, t + WG / 32, ... for its column (coalesced
 *                   across the columns), then a tree over the lanes (GPU);
 *     rs_sub_inner  rows of at most 16 WG elements (one run): a power of
 *                   two of lanes per y element, several elements per
 *                   work-group, a tree over each element's lanes (GPU).
 *     The GPU kernels add a single run (Q = 1) in 4 chains per work-item
 *     (rs_run_sum), the chains in order.
 *   y of reduce_sum has storage TO_YS (the program's storage, or F32 for
 *   16-bit x and for the partials).
 *
 * Launches are 1-D with fixed local sizes over padded global sizes;
 * `first` is the launch's first work-item (or work-group) when the host
 * launches in pieces, and work-items past `items` return.
 */

#ifndef TO_VW
#define TO_VW 4 /* elements per work-item of to_copy / bcast_*: 4 or 16 */
#endif
#ifndef TO_BITS
#define TO_BITS 32 /* bits of a stored element (permute moves bits) */
#endif
#ifndef TO_YS
#define TO_YS RUMUS_STORAGE /* storage of reduce_sum's y */
#endif

#define TILE 32
#define TILE_ROWS 8 /* to_tile: work-groups of TILE x TILE_ROWS */
#define RS_COLS 32  /* rs_wg_outer: columns x lanes = WG */
#define RS_LANES (WG / RS_COLS)

#if TO_BITS == 16
typedef ushort bits_t;
typedef ushort4 bits4_t;
typedef ushort16 bits16_t;
#else
typedef uint bits_t;
typedef uint4 bits4_t;
typedef uint16 bits16_t;
#endif

/* a / b, in 32 bits when both fit: GPUs emulate 64-bit division in
 * dozens of instructions, and indices past 2^32 are rare. */
inline size_t to_div(size_t a, size_t b) {
  return ((a | b) >> 32) == 0 ? (size_t)((uint)a / (uint)b) : a / b;
}

/* Row-major index i over the nd extents e (last fastest) -> the sum of its
 * coordinates times the strides s.  Unrolled over the 8 lanes with
 * constant lane names: a loop over arrays filled by vstore8 indexes them
 * at run time, which puts them in per-thread memory on GPUs (off-chip:
 * up to 192 bytes stored and reloaded per work-item of to_copy, to_tile
 * and bcast_*, several times the bytes they move). */
#define TO_OFF_STEP(k)                                                       \
  if (nd > k) {                                                              \
    const size_t q = to_div(i, ev.s##k);                                     \
    off += (i - q * ev.s##k) * sv.s##k;                                      \
    i = q;                                                                   \
  }
inline size_t to_off(size_t i, uint nd, ulong8 ev, ulong8 sv) {
  size_t off = 0;
  TO_OFF_STEP(7) TO_OFF_STEP(6) TO_OFF_STEP(5) TO_OFF_STEP(4)
  TO_OFF_STEP(3) TO_OFF_STEP(2) TO_OFF_STEP(1) TO_OFF_STEP(0)
  return off;
}
#undef TO_OFF_STEP

/* The same for two stride sets at once (broadcast: a and b). */
#define TO_OFF2_STEP(k)                                                      \
  if (nd > k) {                                                              \
    const size_t q = to_div(i, ev.s##k), c = i - q * ev.s##k;                \
    a += c * s1v.s##k;                                                       \
    b += c * s2v.s##k;                                                       \
    i = q;                                                                   \
  }
inline void to_off2(size_t i, uint nd, ulong8 ev, ulong8 s1v, ulong8 s2v,
                    size_t *o1, size_t *o2) {
  size_t a = 0, b = 0;
  TO_OFF2_STEP(7) TO_OFF2_STEP(6) TO_OFF2_STEP(5) TO_OFF2_STEP(4)
  TO_OFF2_STEP(3) TO_OFF2_STEP(2) TO_OFF2_STEP(1) TO_OFF2_STEP(0)
  *o1 = a;
  *o2 = b;
}
#undef TO_OFF2_STEP

/* An odometer over the nd outer dimensions of rows: the coordinates of
 * row i and its offsets in two tensors, advanced row by row without a
 * division (the CPU variant's work-items take runs of rows). */
typedef struct {
  uint nd;
  ulong c[8], e[8], s1[8], s2[8];
  size_t o1, o2;
} to_odo;

inline void odo_start(to_odo *d, size_t i, uint nd, ulong8 ev, ulong8 s1v,
                      ulong8 s2v) {
  d->nd = nd;
  vstore8(ev, 0, d->e);
  vstore8(s1v, 0, d->s1);
  vstore8(s2v, 0, d->s2);
  d->o1 = d->o2 = 0;
  for (int k = (int)nd - 1; k >= 0; k--) {
    const size_t q = to_div(i, d->e[k]);
    d->c[k] = i - q * d->e[k];
    d->o1 += d->c[k] * d->s1[k];
    d->o2 += d->c[k] * d->s2[k];
    i = q;
  }
}

inline void odo_next(to_odo *d) {
  for (int k = (int)d->nd - 1; k >= 0; k--) {
    d->o1 += d->s1[k];
    d->o2 += d->s2[k];
    if (++d->c[k] < d->e[k]) return;
    d->o1 -= d->c[k] * d->s1[k];
    d->o2 -= d->c[k] * d->s2[k];
    d->c[k] = 0;
  }
}

/* ---- Permute ------------------------------------------------------------ */

/* VW bits from p + i (contiguous). */
#if TO_VW == 16
#define BITS_LD(p, i) vload16(0, (p) + (i))
#define BITS_ST(v, p, i) vstore16((v), 0, (p) + (i))
typedef bits16_t bitsv_t;
#elif RUMUS_ALIGN4
#define BITS_LD(p, i) (*(global const bits4_t *)((p) + (i)))
#define BITS_ST(v, p, i) (*(global bits4_t *)((p) + (i)) = (v))
typedef bits4_t bitsv_t;
#else
#define BITS_LD(p, i) vload4(0, (p) + (i))
#define BITS_ST(v, p, i) vstore4((v), 0, (p) + (i))
typedef bits4_t bitsv_t;
#endif

/* Work-item g copies elements [j, j + VW) of y's row r (r = g / nvr):
 * y[yo + r L + j + k] = x[xo + off(r) + (j + k) SI]. */
kernel void to_copy(global const bits_t *x, ulong xo, global bits_t *y,
                    ulong yo, ulong L, ulong SI, uint nd, ulong8 e,
                    ulong8 sx, ulong first, ulong items) {
  const size_t g = first + get_global_id(0);
  if (g >= items) return;
  const size_t nvr = (L + TO_VW - 1) / TO_VW, r = to_div(g, nvr);
  const size_t j = (g - r * nvr) * TO_VW;
  global const bits_t *xr = x + xo + to_off(r, nd, e, sx);
  global bits_t *yr = y + yo + r * L;
  if (SI == 1 && j + TO_VW <= L) {
    BITS_ST(BITS_LD(xr, j), yr, j);
    return;
  }
  const size_t n = L - j < TO_VW ? L - j : TO_VW;
  for (size_t k = 0; k < n; k++) yr[j + k] = xr[(j + k) * SI];
}

/* CPU: work-item g copies rows [g rpi, (g + 1) rpi) of the rows of L
 * enumerated over the outer extents e (the host's order), at offsets by
 * odometer in x (strides sx) and in y (sy): vload16 / vstore16 of the
 * bits when SI = 1, a gather otherwise. */
kernel void to_copy_rows(global const bits_t *x, ulong xo, global bits_t *y,
                         ulong yo, ulong L, ulong SI, uint nd, ulong8 e,
                         ulong8 sx, ulong8 sy, ulong rpi, ulong rows,
                         ulong first, ulong items) {
  const size_t g = first + get_global_id(0);
  if (g >= items) return;
  const size_t r0 = g * rpi, r1 = rows - r0 < rpi ? rows : r0 + rpi;
  to_odo d;
  odo_start(&d, r0, nd, e, sx, sy);
  for (size_t r = r0; r < r1; r++, odo_next(&d)) {
    global const bits_t *xr = x + xo + d.o1;
    global bits_t *yr = y + yo + d.o2;
    size_t j = 0;
    if (SI == 1)
      for (; j + 16 <= L; j += 16) vstore16(vload16(0, xr + j), 0, yr + j);
    for (; j < L; j++) yr[j] = xr[j * SI];
  }
}

/* y's last dimension I (x stride SI) and y's dimension A (x stride 1, y
 * stride SA) tiled 32 x 32; the other dimensions (nd, extents e, strides
 * sx in x and sy in y) enumerate the tiles' planes.  Group g: tile ti of I,
 * ta of A, plane p. */
kernel RUMUS_REQD_WG(TILE * TILE_ROWS, 1, 1) void to_tile(
    global const bits_t *x, ulong xo, global bits_t *y, ulong yo, ulong I,
    ulong SI, ulong A, ulong SA, uint nd, ulong8 e, ulong8 sx, ulong8 sy,
    ulong first, ulong groups) {
  local bits_t tile[TILE][TILE + 1];
  const size_t g = first + get_group_id(0);
  if (g >= groups) return; /* the whole group: no barrier is skipped by half */
  const size_t lid = get_local_id(0), tx = lid % TILE, ty = lid / TILE;
  const size_t nti = (I + TILE - 1) / TILE, nta = (A + TILE - 1) / TILE;
  const size_t rest = to_div(g, nti), ti = g - rest * nti;
  const size_t p = to_div(rest, nta), ta = rest - p * nta;
  size_t bx, by;
  to_off2(p, nd, e, sx, sy, &bx, &by);
  const size_t i0 = ti * TILE, a0 = ta * TILE;
  /* Read along A (x's contiguous dimension). */
  for (size_t k = ty; k < TILE; k += TILE_ROWS)
    if (a0 + tx < A && i0 + k < I)
      tile[k][tx] = x[xo + bx + (a0 + tx) + (i0 + k) * SI];
  barrier(CLK_LOCAL_MEM_FENCE);
  /* Write along I (y's contiguous dimension). */
  for (size_t k = ty; k < TILE; k += TILE_ROWS)
    if (i0 + tx < I && a0 + k < A)
      y[yo + by + (i0 + tx) + (a0 + k) * SA] = tile[tx][k];
}

/* CPU: to_tile's index scheme with one work-item per CT x CT tile and no
 * barrier, in 8 x 8 blocks: 8 vector loads along x's contiguous dimension,
 * a transpose in registers, 8 vector stores along y's; blocks cut by the
 * tensor's edge go element by element.  (Element by element throughout,
 * the reads of a power-of-two stride fell into one L1 set: a 1024 x 1024
 * transpose ran at 12% of copy on PoCL.) */
#ifndef TO_CT
#define TO_CT 32 /* the host passes its choice (permute_tile) */
#endif
#define CT TO_CT
#ifndef TO_BAND
/* Tiles go in bands of TO_BAND tiles along x's rows (y's columns), row
 * by row of tiles within a band: a band's tiles read TO_BAND * CT
 * elements of each row of x and write CT of each of its TO_BAND * CT
 * rows of y, so each 4 KiB page is entered a few times rather than once
 * per tile.  Walking whole columns of tiles, 4096 x 2048 and 8192 x 8192
 * transposes ran at 22-33% of the STREAM copy on 2 AVX2 cores, at
 * 41-51% in bands of 8 to 32 (64: 31-37%). */
#define TO_BAND 16
#endif
#if TO_BITS == 16
typedef ushort8 bits8_t;
#else
typedef uint8 bits8_t;
#endif

inline void to_block8(global const bits_t *xb, size_t SI, global bits_t *yb,
                      size_t SA) {
  bits8_t v[8];
  for (int k = 0; k < 8; k++) v[k] = vload8(0, xb + k * SI);
#define COL(c)                                                               \
  (bits8_t)(v[0].s##c, v[1].s##c, v[2].s##c, v[3].s##c, v[4].s##c,          \
            v[5].s##c, v[6].s##c, v[7].s##c)
  vstore8(COL(0), 0, yb);
  vstore8(COL(1), 0, yb + SA);
  vstore8(COL(2), 0, yb + 2 * SA);
  vstore8(COL(3), 0, yb + 3 * SA);
  vstore8(COL(4), 0, yb + 4 * SA);
  vstore8(COL(5), 0, yb + 5 * SA);
  vstore8(COL(6), 0, yb + 6 * SA);
  vstore8(COL(7), 0, yb + 7 * SA);
#undef COL
}

kernel void to_tile_item(global const bits_t *x, ulong xo, global bits_t *y,
                         ulong yo, ulong I, ulong SI, ulong A, ulong SA,
                         uint nd, ulong8 e, ulong8 sx, ulong8 sy,
                         ulong first, ulong items) {
  const size_t g = first + get_global_id(0);
  if (g >= items) return;
  const size_t nti = (I + CT - 1) / CT, nta = (A + CT - 1) / CT;
  const size_t p = to_div(g, nti * nta), h = g - p * nti * nta;
  const size_t band = to_div(h, nti * TO_BAND), o = h - band * nti * TO_BAND;
  const size_t hb = min((size_t)TO_BAND, nta - band * TO_BAND);
  const size_t ti = to_div(o, hb), ta = band * TO_BAND + (o - ti * hb);
  size_t bx, by;
  to_off2(p, nd, e, sx, sy, &bx, &by);
  const size_t i0 = ti * CT, a0 = ta * CT;
  const size_t ni = I - i0 < CT ? I - i0 : CT;
  const size_t na = A - a0 < CT ? A - a0 : CT;
  global const bits_t *xt = x + xo + bx + a0 + i0 * SI;
  global bits_t *yt = y + yo + by + i0 + a0 * SA;
  for (size_t ba = 0; ba < na; ba += 8)
    for (size_t bi = 0; bi < ni; bi += 8) {
      if (ba + 8 <= na && bi + 8 <= ni) {
        to_block8(xt + ba + bi * SI, SI, yt + bi + ba * SA, SA);
        continue;
      }
      for (size_t a = ba; a < na && a < ba + 8; a++)
        for (size_t i = bi; i < ni && i < bi + 8; i++)
          yt[i + a * SA] = xt[a + i * SI];
    }
}

/* ---- Broadcast ---------------------------------------------------------- */

#define OP_ADD 0
#define OP_MUL 1

#if TO_VW == 16
typedef float16 vec_t;
#define VLOAD(p, i) LOAD16(p, i)
#define VSTORE(v, p, i) STORE16(v, p, i)
#else
typedef float4 vec_t;
#define VLOAD(p, i) LOAD4(p, i)
#define VSTORE(v, p, i) STORE4(v, p, i)
#endif

inline float bc_op(int op, float u, float v) {
  return op == OP_ADD ? u + v : u * v;
}
inline vec_t bc_opv(int op, vec_t u, vec_t v) {
  return op == OP_ADD ? u + v : u * v;
}

/* Work-item g: elements [j, j + VW) of out's row r; a's row starts at
 * offa(r) with stride IA (1 or 0) along the row, b's likewise. */
inline void bcast_body(int op, global const real_t *a, ulong ao,
                       global const real_t *b, ulong bo, global real_t *o,
                       ulong oo, ulong L, ulong IA, ulong IB, uint nd,
                       ulong8 e, ulong8 sa, ulong8 sb, ulong first,
                       ulong items) {
  const size_t g = first + get_global_id(0);
  if (g >= items) return;
  const size_t nvr = (L + TO_VW - 1) / TO_VW, r = to_div(g, nvr);
  const size_t j = (g - r * nvr) * TO_VW;
  size_t ra, rb;
  to_off2(r, nd, e, sa, sb, &ra, &rb);
  global const real_t *ar = a + ao + ra, *br = b + bo + rb;
  global real_t *orow = o + oo + r * L;
  if (j + TO_VW <= L) {
    const vec_t u = IA ? VLOAD(ar, j) : (vec_t)(LOAD(ar, 0));
    const vec_t v = IB ? VLOAD(br, j) : (vec_t)(LOAD(br, 0));
    VSTORE(bc_opv(op, u, v), orow, j);
    return;
  }
  for (size_t k = j; k < L; k++)
    STORE(bc_op(op, LOAD(ar, k * IA), LOAD(br, k * IB)), orow, k);
}

#define BCAST_ENTRY(name, op)                                                \
  kernel void name(global const real_t *a, ulong ao, global const real_t *b, \
                   ulong bo, global real_t *o, ulong oo, ulong L, ulong IA,  \
                   ulong IB, uint nd, ulong8 e, ulong8 sa, ulong8 sb,        \
                   ulong first, ulong items) {                               \
    bcast_body(op, a, ao, b, bo, o, oo, L, IA, IB, nd, e, sa, sb, first,     \
               items);                                                       \
  }
BCAST_ENTRY(bcast_add, OP_ADD)
BCAST_ENTRY(bcast_mul, OP_MUL)

/* CPU: work-item g computes rows [g rpi, (g + 1) rpi) of out, 16 elements
 * at a time, a's and b's row offsets by odometer. */
inline void bcast_rows_body(int op, global const real_t *a, ulong ao,
                            global const real_t *b, ulong bo,
                            global real_t *o, ulong oo, ulong L, ulong IA,
                            ulong IB, uint nd, ulong8 e, ulong8 sa,
                            ulong8 sb, ulong rpi, ulong rows, ulong first,
                            ulong items) {
  const size_t g = first + get_global_id(0);
  if (g >= items) return;
  const size_t r0 = g * rpi, r1 = rows - r0 < rpi ? rows : r0 + rpi;
  to_odo d;
  odo_start(&d, r0, nd, e, sa, sb);
  for (size_t r = r0; r < r1; r++, odo_next(&d)) {
    global const real_t *ar = a + ao + d.o1, *br = b + bo + d.o2;
    global real_t *orow = o + oo + r * L;
    size_t j = 0;
    for (; j + 16 <= L; j += 16) {
      const float16 u = IA ? LOAD16(ar, j) : (float16)(LOAD(ar, 0));
      const float16 v = IB ? LOAD16(br, j) : (float16)(LOAD(br, 0));
      STORE16(op == OP_ADD ? u + v : u * v, orow, j);
    }
    for (; j < L; j++)
      STORE(bc_op(op, LOAD(ar, j * IA), LOAD(br, j * IB)), orow, j);
  }
}

#define BCAST_ROWS_ENTRY(name, op)                                           \
  kernel void name(global const real_t *a, ulong ao, global const real_t *b, \
                   ulong bo, global real_t *o, ulong oo, ulong L, ulong IA,  \
                   ulong IB, uint nd, ulong8 e, ulong8 sa, ulong8 sb,        \
                   ulong rpi, ulong rows, ulong first, ulong items) {        \
    bcast_rows_body(op, a, ao, b, bo, o, oo, L, IA, IB, nd, e, sa, sb, rpi,  \
                    rows, first, items);                                     \
  }
BCAST_ROWS_ENTRY(bcast_rows_add, OP_ADD)
BCAST_ROWS_ENTRY(bcast_rows_mul, OP_MUL)

/* ---- Sum over axes ------------------------------------------------------ */

typedef RUMUS_TYPE(TO_YS) yreal_t;
#define YSTORE(v, p, i) RUMUS_STORE(TO_YS, v, p, i)

/* The arguments every reduce kernel takes: x, y; the kept dimensions (nk,
 * ke, ks: y's row-major order, strides in x) but x's last one when it is
 * kept (K elements, stride 1; K = 1 otherwise); Q runs (nq, qe, qs) of L
 * elements SI apart; RC reduced elements per chunk (chunk c sums the flat
 * reduced indices [c RC, (c + 1) RC) and writes its sums ny elements
 * after chunk c - 1's: float partials that rs_fold adds; RC = Q L without
 * chunks); `units` work-items (or groups) per chunk; the work-items or
 * groups [first, items). */
#define RS_ARGS                                                              \
  global const real_t *x, ulong xo, global yreal_t *y, ulong yo, uint nk,    \
      ulong8 ke, ulong8 ks, ulong K, uint nq, ulong8 qe, ulong8 qs, ulong Q, \
      ulong L, ulong SI, ulong RC, ulong ny, ulong units, ulong first,       \
      ulong items

/* Work-item or group g -> its chunk's reduced range [*r0, *r1), the unit
 * u within the chunk and the chunk's offset in y. */
inline size_t rs_chunk(size_t g, ulong units, ulong RC, ulong Q, ulong L,
                       ulong ny, size_t *r0, size_t *r1, size_t *yc) {
  const size_t c = to_div(g, units), R = Q * L;
  *r0 = c * RC;
  *r1 = R - *r0 < RC ? R : *r0 + RC;
  *yc = c * ny;
  return g - c * units;
}

/* A walk over the reduced elements r0, r0 + step, ... below r1: `o` is
 * element r's offset from the kept element; r / L is divided once per
 * step only while a step crosses runs. */
typedef struct {
  size_t r, q, t, o;
} rs_cursor;

inline void rs_start(rs_cursor *c, size_t r, uint nq, ulong8 qe, ulong8 qs,
                     ulong L, ulong SI) {
  c->r = r;
  c->q = to_div(r, L);
  c->t = r - c->q * L;
  c->o = to_off(c->q, nq, qe, qs);
}

inline void rs_step(rs_cursor *c, size_t step, size_t r1, uint nq, ulong8 qe,
                    ulong8 qs, ulong L) {
  c->r += step;
  c->t += step;
  if (c->t >= L) {
    const size_t k = to_div(c->t, L);
    c->q += k;
    c->t -= k * L;
    if (c->r < r1) c->o = to_off(c->q, nq, qe, qs);
  }
}

/* The run of reduced element r and the end te of its piece below r1 (row
 * kernels walk [r0, r1) piece by piece: one division per run). */
inline size_t rs_piece(size_t r, size_t r1, ulong L, size_t *t, size_t *te) {
  const size_t q = to_div(r, L);
  *t = r - q * L;
  *te = r1 - r < L - *t ? *t + (r1 - r) : L;
  return q;
}

/* CPU: work-item j sums y element j (K = 1); each run piece in float8
 * lanes and a scalar tail, lanes added at the end: the order is fixed by
 * the shape. */
kernel void rs_row_inner(RS_ARGS) {
  const size_t g = first + get_global_id(0);
  if (g >= items) return;
  size_t r0, r1, yc;
  const size_t j = rs_chunk(g, units, RC, Q, L, ny, &r0, &r1, &yc);
  global const real_t *xj = x + xo + to_off(j, nk, ke, ks);
  float8 acc = 0.0f;
  float tail = 0.0f;
  for (size_t r = r0, t, te; r < r1; r += te - t) {
    global const real_t *xq = xj + to_off(rs_piece(r, r1, L, &t, &te), nq,
                                          qe, qs);
    size_t u = t;
    for (; u + 8 <= te; u += 8) acc += LOAD8(xq, u * SI);
    for (; u < te; u++) tail += LOAD(xq, u * SI);
  }
  YSTORE(rumus_hsum8(acc) + tail, y, yo + yc + j);
}

/* CPU: work-item g sums y elements [c, c + RS_CPU_COLS) of kept row p
 * (x's last dimension kept: they are contiguous in x and in y) in up to 8
 * float8 accumulators, r ascending, so each row read is 256 contiguous
 * bytes of F32 (32 bytes, 8 columns a work-item, ran [4096, 2048] over
 * axis 0 at a quarter of copy speed); columns past the last whole float8
 * in a second walk. */
#define RS_CPU_COLS 64
kernel void rs_row_outer(RS_ARGS) {
  const size_t g = first + get_global_id(0);
  if (g >= items) return;
  size_t r0, r1, yc;
  const size_t u = rs_chunk(g, units, RC, Q, L, ny, &r0, &r1, &yc);
  const size_t nb = (K + RS_CPU_COLS - 1) / RS_CPU_COLS, p = to_div(u, nb);
  const size_t c = (u - p * nb) * RS_CPU_COLS;
  const size_t ncol = K - c < RS_CPU_COLS ? K - c : RS_CPU_COLS;
  const size_t nv = ncol / 8;
  global const real_t *xp = x + xo + to_off(p, nk, ke, ks) + c;
  const size_t yj = yo + yc + p * K + c;
  float8 acc[RS_CPU_COLS / 8];
  for (int i = 0; i < RS_CPU_COLS / 8; i++) acc[i] = 0.0f;
  for (size_t r = r0, t, te; r < r1; r += te - t) {
    global const real_t *xq = xp + to_off(rs_piece(r, r1, L, &t, &te), nq,
                                          qe, qs);
    for (size_t v = t; v < te; v++) {
      global const real_t *xv = xq + v * SI;
#pragma unroll
      for (int i = 0; i < RS_CPU_COLS / 8; i++)
        if ((size_t)i < nv) acc[i] += LOAD8(xv, 8 * i);
    }
  }
  for (size_t i = 0; i < nv; i++) RUMUS_STOREN(TO_YS, 8, acc[i], y, yj + 8 * i);
  for (size_t k = nv * 8; k < ncol; k++) {
    float a = 0.0f;
    for (size_t r = r0, t, te; r < r1; r += te - t) {
      global const real_t *xq = xp + k + to_off(rs_piece(r, r1, L, &t, &te),
                                                nq, qe, qs);
      for (size_t v = t; v < te; v++) a += LOAD(xq, v * SI);
    }
    YSTORE(a, y, yj + k);
  }
}

/* The sum of p[r SI] over r = r0, r0 + step, ... below r1 (one run: the
 * GPU kernels' common case) in 4 chains, so that each work-item has 4
 * independent loads in flight (one chain left the H200's memory mostly
 * idle), the chains added in order at the end. */
inline float rs_run_sum(global const real_t *p, size_t r0, size_t r1,
                        size_t step, size_t SI) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  size_t r = r0;
  for (; r + 3 * step < r1; r += 4 * step) {
    const float v0 = LOAD(p, r * SI), v1 = LOAD(p, (r + step) * SI);
    const float v2 = LOAD(p, (r + 2 * step) * SI);
    const float v3 = LOAD(p, (r + 3 * step) * SI);
    a0 += v0;
    a1 += v1;
    a2 += v2;
    a3 += v3;
  }
  for (; r < r1; r += step) a0 += LOAD(p, r * SI);
  return (a0 + a1) + (a2 + a3);
}

/* GPU: work-group g sums y element j (K = 1); work-item lid adds r = r0 +
 * lid, r0 + lid + WG, ... (neighbouring work-items read neighbouring
 * elements of a run; in 4 chains when the reduced elements are one run),
 * then a tree in local memory. */
kernel RUMUS_WG_ATTR void rs_wg_inner(RS_ARGS) {
  local float buf[WG];
  const size_t g = first + get_group_id(0), lid = get_local_id(0);
  if (g >= items) return; /* the whole group */
  size_t r0, r1, yc;
  const size_t j = rs_chunk(g, units, RC, Q, L, ny, &r0, &r1, &yc);
  global const real_t *xj = x + xo + to_off(j, nk, ke, ks);
  float acc = 0.0f;
  rs_cursor cur;
  if (nq == 0) {
    acc = rs_run_sum(xj, r0 + lid, r1, WG, SI);
  } else {
    for (rs_start(&cur, r0 + lid, nq, qe, qs, L, SI); cur.r < r1;
         rs_step(&cur, WG, r1, nq, qe, qs, L))
      acc += LOAD(xj, cur.o + cur.t * SI);
  }
  rumus_wg_sum(buf, acc);
  if (lid == 0) YSTORE(buf[0], y, yo + yc + j);
}

/* GPU: x's last dimension reduced in one run (Q = 1, SI = 1) of L <= 16
 * WG elements, no chunks: rt lanes per y element (rt a power of two
 * dividing WG, WG / rt elements a group), lane t adds r = t, t + rt, ...
 * (rs_run_sum), then a tree over the rt lanes (rumus_seg_sum).  Rows of
 * 1024 took a work-group of 256 each, 4 elements a work-item and 8
 * barriers of tree: 6% of the copy bandwidth on the H200. */
kernel RUMUS_WG_ATTR void rs_sub_inner(RS_ARGS, uint rt) {
  local float buf[WG];
  const size_t g = first + get_group_id(0), lid = get_local_id(0);
  if (g >= items) return; /* the whole group */
  const size_t lane = lid % rt, j = g * (WG / rt) + lid / rt;
  float acc = 0.0f;
  if (j < ny) acc = rs_run_sum(x + xo + to_off(j, nk, ke, ks), lane, L, rt, 1);
  const float s = rumus_seg_sum(buf, acc, rt);
  if (lane == 0 && j < ny) YSTORE(s, y, yo + j);
}

/* GPU: work-group g sums RS_COLS neighbouring y elements of kept row p;
 * lane t of a column adds r = r0 + t, r0 + t + RS_LANES, ...; a tree over
 * the lanes in local memory. */
kernel RUMUS_WG_ATTR void rs_wg_outer(RS_ARGS) {
  local float buf[RS_LANES][RS_COLS];
  const size_t g = first + get_group_id(0), lid = get_local_id(0);
  if (g >= items) return; /* the whole group */
  size_t r0, r1, yc;
  const size_t u = rs_chunk(g, units, RC, Q, L, ny, &r0, &r1, &yc);
  const size_t cx = lid % RS_COLS, lane = lid / RS_COLS;
  const size_t nb = (K + RS_COLS - 1) / RS_COLS, p = to_div(u, nb);
  const size_t c = (u - p * nb) * RS_COLS + cx;
  global const real_t *xp = x + xo + to_off(p, nk, ke, ks) + c;
  float acc = 0.0f;
  rs_cursor cur;
  if (c < K && nq == 0)
    acc = rs_run_sum(xp, r0 + lane, r1, RS_LANES, SI);
  else if (c < K)
    for (rs_start(&cur, r0 + lane, nq, qe, qs, L, SI); cur.r < r1;
         rs_step(&cur, RS_LANES, r1, nq, qe, qs, L))
      acc += LOAD(xp, cur.o + cur.t * SI);
  buf[lane][cx] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = RS_LANES / 2; step > 0; step /= 2) {
    if (lane < step) buf[lane][cx] += buf[lane + step][cx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lane == 0 && c < K) YSTORE(buf[0][cx], y, yo + yc + p * K + c);
}

/* y[j] = the sum of the C chunks' float partials part[c ny + j], c
 * ascending. */
kernel void rs_fold(global const float *part, ulong C, ulong ny,
                    global yreal_t *y, ulong yo, ulong first, ulong items) {
  const size_t j = first + get_global_id(0);
  if (j >= items) return;
  float acc = 0.0f;
  for (size_t c = 0; c < C; c++) acc += part[c * ny + j];
  YSTORE(acc, y, yo + j);
}
