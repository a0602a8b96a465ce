/*
 * tensorops.c - permute, broadcast add / mul and sums over axes (kernels
 * in cl/tensorops.cl).
 *
 * Every op first describes its tensors as one list of dimensions with a
 * stride per tensor (a 0 stride where a tensor is broadcast), drops
 * extents of 1 and merges neighbouring dimensions that are contiguous in
 * every tensor (lay_simplify): the kernels then index rows of the last
 * merged dimension and compute the offset of a row once.  A head split
 * [B, T, H, D] -> [B, H, T, D] becomes rows of D, a bias-like broadcast
 * [N, F] + [F] rows of F with b's outer stride 0, a scalar operand one
 * row with stride 0, and a permutation that keeps the tensor's order one
 * contiguous copy.
 *
 * One program per (storage, type of reduce_sum's y, variant, alignment)
 * holds the family's kernels: the GPU setting moves one 4-element vector
 * per work-item in groups of 256 (typed 16-byte accesses when aligned),
 * the CPU setting runs of rows per work-item (16-element vectors).
 * Transposes go through tiles in local memory on both variants; sums
 * whose y is too small to fill the device are cut into fixed chunks
 * (rs_chunks).
 */
#include <stdio.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "tensorops.cl";

/* Work-items per launch at most (NDRange limits of some drivers); larger
 * tensors are launched in pieces (`first` in the kernels). */
#define MAX_ITEMS ((size_t)1 << 30)
#define TILE 32            /* to_tile: TILE x TILE tiles ... */
#define TILE_WG 256        /* ... by work-groups of TILE x 8 (GPU) */
#define RS_COLS 32         /* rs_wg_outer: columns per work-group */
#define RS_CPU_COLS 64     /* rs_row_outer: columns per work-item */
/* rs_wg_inner takes a y element when it sums at least this many reduced
 * elements per work-item of the group; shorter sums take one work-item
 * each (rs_row_inner). */
#define RS_WG_MIN_PER_ITEM 2
/* rs_sub_inner: about this many elements a lane; rows of up to this many
 * times the work-group size take it (GPU, one run per y element). */
#define RS_SUB_PER_LANE 16
/* The context's scratch slot of reduce_sum's chunk partials (gemm takes
 * 0 and 1, batch norm 2). */
#define RS_SCRATCH_SLOT 3

/* ---- Geometry and options ---------------------------------------------- */

typedef struct {
  int gpu;
  size_t vw, ls; /* elements per work-item and local size of item kernels */
} geom;

static void get_geom(const rumus_ctx *ctx, geom *g) {
  g->gpu = rumus__gpu_variant(ctx);
  g->vw = g->gpu ? 4 : 16;
  g->ls = g->gpu ? 256 : 16;
  while (g->ls > ctx->max_wg) g->ls /= 2;
}

/* The options of the family's program: storage, y's storage (reduce_sum;
 * the storage for the other ops), alignment (typed 4-element accesses of
 * to_copy and bcast_*, GPU variant only). */
/* to_tile_item's CT x CT tiles (CPU) for elements of `size` bytes.  On
 * 2 vCPUs of an AMD EPYC (AVX-512) 128 x 128 F32 tiles ran 4096 x 2048,
 * 8192 x 8192 and 16384 x 384 transposes 1.4-1.6 times faster than 32 x
 * 32 (each 8 x 8 block reads 32 bytes of 8 rows of x; a wider tile
 * writes longer runs of each row of y before the next rows of x evict
 * the first); 16-bit tiles of 64 or 128 were slower than 32. */
static size_t cpu_tile(size_t size) { return size == 4 ? 128 : 32; }

static void to_options(const rumus_ctx *ctx, rumus_dtype storage,
                       rumus_dtype ys, int align4, char *buf, size_t len) {
  geom g;
  get_geom(ctx, &g);
  char head[96];
  rumus__options_head(head, sizeof head, storage, rumus__reduce_wg(ctx),
                      align4);
  const size_t size = rumus_dtype_size(storage);
  snprintf(buf, len, "%s -DTO_VW=%zu -DTO_BITS=%zu -DTO_YS=%s -DTO_CT=%zu",
           head, g.vw, 8 * size, rumus__storage_tag(ys), cpu_tile(size));
}

/* ---- Layouts ------------------------------------------------------------ */

/* nd dimensions (row-major, the last fastest) and the element strides of up
 * to 3 tensors along them. */
typedef struct {
  int nd, nt;
  size_t e[RUMUS_MAX_DIMS];
  size_t s[3][RUMUS_MAX_DIMS];
} layout;

/* Contiguous strides of shape[0 .. nd) into s. */
static void contiguous(const size_t *shape, int nd, size_t *s) {
  size_t st = 1;
  for (int d = nd - 1; d >= 0; d--) {
    s[d] = st;
    st *= shape[d];
  }
}

/* Drops extents of 1 and merges dimension d into d + 1 where every tensor
 * has s[d] = s[d + 1] e[d + 1] (contiguous across the two, or broadcast
 * along both). */
static void lay_simplify(layout *l) {
  int n = 0;
  for (int d = 0; d < l->nd; d++) {
    if (l->e[d] == 1) continue;
    int merge = n > 0;
    for (int t = 0; merge && t < l->nt; t++)
      merge = l->s[t][n - 1] == l->s[t][d] * l->e[d];
    if (merge) {
      l->e[n - 1] *= l->e[d];
      for (int t = 0; t < l->nt; t++) l->s[t][n - 1] = l->s[t][d];
      continue;
    }
    l->e[n] = l->e[d];
    for (int t = 0; t < l->nt; t++) l->s[t][n] = l->s[t][d];
    n++;
  }
  l->nd = n;
}

/* Dimensions [0, nd) of (e, s) as kernel vectors (unused lanes 1 and 0). */
static cl_ulong8 vec8(const size_t *v, int nd, size_t fill) {
  cl_ulong8 r;
  for (int d = 0; d < 8; d++) r.s[d] = d < nd ? (cl_ulong)v[d] : fill;
  return r;
}

/* ---- Launches ----------------------------------------------------------- */

/* Launches kernel k over `count` work-items (per_group = 0) or work-groups
 * of per_group work-items, in pieces of at most MAX_ITEMS work-items;
 * args[nargs - 2] must point at *first, which is set per piece, and
 * args[nargs - 1] at the count. */
static int run_pieces(rumus_ctx *ctx, const char *op,
                      const rumus__kernel_ref *k, size_t count,
                      size_t per_group, size_t local, cl_ulong *first,
                      size_t nargs, const rumus__arg *args) {
  const size_t unit = per_group ? per_group : 1, piece = MAX_ITEMS / unit;
  for (size_t f = 0; f < count; f += piece) {
    *first = f;
    const size_t n = count - f < piece ? count - f : piece;
    size_t global = n * unit;
    RUMUS__FORWARD(rumus__launch(ctx, op, k, 1, &global, &local, nargs, args));
  }
  return RUMUS_OK;
}

/* The CPU variant's row kernels (to_copy_rows, bcast_rows_*): rows of L
 * elements per work-item, at least ROWS_MIN_ELEMS elements each while
 * that leaves ROWS_ITEMS_PER_CU work-items per compute unit; 0 when there
 * are too few rows for that (the per-vector kernels run instead, so one
 * long row is not left to one work-item).  A work-item then walks its
 * rows' offsets by odometer: with a division per row the head split of
 * [32, 512, 8, 64] (F32) took 16 ms on the busy 2-core CI machine, this
 * way 7-11 ms. */
#define ROWS_MIN_ELEMS 4096
#define ROWS_ITEMS_PER_CU 8

static size_t rows_per_item(const rumus_ctx *ctx, size_t rows, size_t L) {
  const size_t want = ROWS_ITEMS_PER_CU * (size_t)ctx->compute_units;
  if (rumus__gpu_variant(ctx) || rows < want) return 0;
  size_t rpi = (ROWS_MIN_ELEMS + L - 1) / L;
  if (rpi > rows / want) rpi = rows / want;
  return rpi < 1 ? 1 : rpi;
}

/* ---- Permute ------------------------------------------------------------ */

static int check_perm(rumus_ctx *ctx, const char *op, const rumus_tensor *x,
                      const int *perm, const rumus_tensor *y) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "x", x));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "y", y, x->dtype));
  RUMUS__FAIL_IF(perm == NULL && x->ndim > 0, ctx, RUMUS_ENULL,
                 "%s: perm is NULL", op);
  int seen[RUMUS_MAX_DIMS] = {0};
  for (int d = 0; d < x->ndim; d++) {
    RUMUS__FAIL_IF(perm[d] < 0 || perm[d] >= x->ndim, ctx, RUMUS_EINVAL,
                   "%s: perm[%d] = %d is not an axis of x (%d dimensions)",
                   op, d, perm[d], x->ndim);
    RUMUS__FAIL_IF(seen[perm[d]], ctx, RUMUS_EINVAL,
                   "%s: perm[%d] repeats axis %d", op, d, perm[d]);
    seen[perm[d]] = 1;
  }
  RUMUS__FAIL_IF(y->ndim != x->ndim, ctx, RUMUS_ESHAPE,
                 "%s: y has %d dimensions, x %d", op, y->ndim, x->ndim);
  for (int d = 0; d < x->ndim; d++)
    RUMUS__FAIL_IF(y->shape[d] != x->shape[perm[d]], ctx, RUMUS_ESHAPE,
                   "%s: y axis %d has extent %zu, expected %zu (x axis %d)",
                   op, d, y->shape[d], x->shape[perm[d]], perm[d]);
  return rumus__check_overlap(ctx, op, "x", x, "y", y, 0);
}

/* y's last dimension moves: tiles over the last dimension and the one
 * that is x's contiguous dimension (stride 1); to_tile's work-groups on
 * the GPU variant, to_tile_item's work-items on the CPU variant. */
static int permute_tile(rumus_ctx *ctx, const char *op, const rumus_tensor *x,
                        const rumus_tensor *y, const layout *l) {
  const int last = l->nd - 1;
  int pa = 0;
  while (l->s[0][pa] != 1) pa++;
  size_t pe[RUMUS_MAX_DIMS], psx[RUMUS_MAX_DIMS], psy[RUMUS_MAX_DIMS];
  size_t planes = 1;
  cl_uint np = 0;
  for (int d = 0; d < last; d++) {
    if (d == pa) continue;
    pe[np] = l->e[d];
    psx[np] = l->s[0][d];
    psy[np++] = l->s[1][d];
    planes *= l->e[d];
  }
  char opts[192];
  to_options(ctx, x->dtype, x->dtype, 0, opts, sizeof opts);
  const int gpu = rumus__gpu_variant(ctx);
  const rumus__kernel_ref k = {FILE_CL, opts, gpu ? "to_tile" : "to_tile_item"};
  const size_t ti = gpu ? TILE : cpu_tile(rumus_dtype_size(x->dtype)),
               ta = ti;
  cl_ulong xo = rumus__off(x), yo = rumus__off(y), I = l->e[last],
           SI = l->s[0][last], A = l->e[pa], SA = l->s[1][pa], first = 0;
  cl_ulong groups = ((I + ti - 1) / ti) * ((A + ta - 1) / ta) * planes;
  cl_ulong8 e = vec8(pe, (int)np, 1), sx = vec8(psx, (int)np, 0),
            sy = vec8(psy, (int)np, 0);
  const rumus__arg args[14] = {
      RUMUS__ARG(x->mem), RUMUS__ARG(xo), RUMUS__ARG(y->mem), RUMUS__ARG(yo),
      RUMUS__ARG(I),      RUMUS__ARG(SI), RUMUS__ARG(A),      RUMUS__ARG(SA),
      RUMUS__ARG(np),     RUMUS__ARG(e),  RUMUS__ARG(sx),     RUMUS__ARG(sy),
      RUMUS__ARG(first),  RUMUS__ARG(groups)};
  if (!gpu)
    return run_pieces(ctx, op, &k, groups, 0, rumus__row_local(ctx, groups),
                      &first, 14, args);
  return run_pieces(ctx, op, &k, groups, TILE_WG, TILE_WG, &first, 14, args);
}

/* The CPU row copy's walk over the outer dimensions of l (all but the
 * last: the rows), extents and x's and y's strides (y contiguous) in
 * walking order, into e, sx, sy; returns their number.  y's order reads
 * x in runs of one row where the dimension x walks fastest (b) is not the
 * one y walks fastest: a head split [B, T, H, D] -> [B, H, T, D] read
 * rows of D, H D apart, which the CPU's prefetchers did not follow.  So b
 * is cut into groups of bb (a divisor of its extent, at most
 * ROWS_STREAMS) walked innermost: x is read in runs of bb rows and y
 * written in bb sequential streams. */
#define ROWS_STREAMS 8

static int rows_walk(const layout *l, size_t *e, size_t *sx, size_t *sy) {
  const int outer = l->nd - 1;
  if (outer < 1) return 0;
  size_t ys[RUMUS_MAX_DIMS], st = l->e[outer];
  int b = outer - 1;
  for (int d = outer - 1; d >= 0; d--) {
    ys[d] = st;
    st *= l->e[d];
    if (l->s[0][d] < l->s[0][b]) b = d;
  }
  size_t bb = l->e[b] < ROWS_STREAMS ? l->e[b] : ROWS_STREAMS;
  while (l->e[b] % bb) bb--;
  const int split = b != outer - 1 && bb > 1;
  int n = 0;
  for (int d = 0; d < outer; d++) {
    const size_t k = split && d == b ? bb : 1; /* b's groups */
    e[n] = l->e[d] / k, sx[n] = k * l->s[0][d], sy[n++] = k * ys[d];
  }
  if (split) /* the rows of a group */
    e[n] = bb, sx[n] = l->s[0][b], sy[n++] = ys[b];
  return n;
}

/* to_copy: rows of y's last dimension, gathered from x at stride SI. */
static int permute_copy(rumus_ctx *ctx, const char *op, const rumus_tensor *x,
                        const rumus_tensor *y, const layout *l) {
  geom g;
  get_geom(ctx, &g);
  const int last = l->nd - 1;
  cl_ulong L = l->e[last], SI = l->s[0][last], xo = rumus__off(x),
           yo = rumus__off(y), first = 0;
  const rumus_tensor *ts[2] = {x, y};
  const int align4 = SI == 1 && rumus__align4(ctx, ts, 2, L);
  char opts[192];
  to_options(ctx, x->dtype, x->dtype, align4, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, "to_copy"};
  cl_uint nd = (cl_uint)last;
  cl_ulong8 e = vec8(l->e, last, 1), sx = vec8(l->s[0], last, 0);
  const size_t rows = x->numel / L, rpi = rows_per_item(ctx, rows, L);
  if (rpi) {
    const rumus__kernel_ref kr = {FILE_CL, opts, "to_copy_rows"};
    cl_ulong rp = rpi, nr = rows, n = (rows + rpi - 1) / rpi;
    size_t we[8], wsx[8], wsy[8];
    const int wn = rows_walk(l, we, wsx, wsy);
    cl_uint rnd = (cl_uint)wn;
    cl_ulong8 re = vec8(we, wn, 1), rsx = vec8(wsx, wn, 0),
              rsy = vec8(wsy, wn, 0);
    const rumus__arg ra[14] = {
        RUMUS__ARG(x->mem), RUMUS__ARG(xo),  RUMUS__ARG(y->mem),
        RUMUS__ARG(yo),     RUMUS__ARG(L),   RUMUS__ARG(SI),
        RUMUS__ARG(rnd),    RUMUS__ARG(re),  RUMUS__ARG(rsx),
        RUMUS__ARG(rsy),    RUMUS__ARG(rp),  RUMUS__ARG(nr),
        RUMUS__ARG(first),  RUMUS__ARG(n)};
    return run_pieces(ctx, op, &kr, n, 0, rumus__row_local(ctx, n), &first,
                      14, ra);
  }
  cl_ulong items = rows * ((L + g.vw - 1) / g.vw);
  const rumus__arg args[11] = {
      RUMUS__ARG(x->mem), RUMUS__ARG(xo), RUMUS__ARG(y->mem), RUMUS__ARG(yo),
      RUMUS__ARG(L),      RUMUS__ARG(SI), RUMUS__ARG(nd),     RUMUS__ARG(e),
      RUMUS__ARG(sx),     RUMUS__ARG(first), RUMUS__ARG(items)};
  return run_pieces(ctx, op, &k, items, 0, g.ls, &first, 11, args);
}

int rumus_permute(rumus_ctx *ctx, const rumus_tensor *x, const int *perm,
                  rumus_tensor *y) {
  const char *op = "rumus_permute";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_perm(ctx, op, x, perm, y));
  if (x->numel == 0) return RUMUS_OK;
  layout l = {x->ndim, 2, {0}, {{0}}};
  size_t xs[RUMUS_MAX_DIMS];
  contiguous(x->shape, x->ndim, xs);
  contiguous(y->shape, y->ndim, l.s[1]);
  for (int d = 0; d < x->ndim; d++) {
    l.e[d] = x->shape[perm[d]];
    l.s[0][d] = xs[perm[d]];
  }
  lay_simplify(&l);
  if (l.nd == 0 || (l.nd == 1 && l.s[0][0] == 1)) { /* the same order */
    cl_int err = clEnqueueCopyBuffer(ctx->queue, x->mem, y->mem, x->offset,
                                     y->offset, rumus_tensor_nbytes(x), 0,
                                     NULL, NULL);
    if (err != CL_SUCCESS)
      return rumus__fail_cl(ctx, err, "%s: clEnqueueCopyBuffer", op);
    return RUMUS_OK;
  }
  if (l.s[0][l.nd - 1] != 1 &&
      (!rumus__gpu_variant(ctx) || ctx->max_wg >= TILE_WG))
    return permute_tile(ctx, op, x, y, &l);
  return permute_copy(ctx, op, x, y, &l);
}

/* ---- Broadcast ---------------------------------------------------------- */

/* Extent of t along out axis d of nd (aligned from the right; 1 where t
 * has fewer dimensions). */
static size_t ext_at(const rumus_tensor *t, int d, int nd) {
  const int k = d - (nd - t->ndim);
  return k < 0 ? 1 : t->shape[k];
}

static int check_bcast(rumus_ctx *ctx, const char *op, const rumus_tensor *a,
                       const rumus_tensor *b, const rumus_tensor *out) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "a", a));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "b", b, a->dtype));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "out", out, a->dtype));
  const int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  RUMUS__FAIL_IF(out->ndim != nd, ctx, RUMUS_ESHAPE,
                 "%s: out has %d dimensions, expected %d (a %d, b %d)", op,
                 out->ndim, nd, a->ndim, b->ndim);
  for (int d = 0; d < nd; d++) {
    const size_t ea = ext_at(a, d, nd), eb = ext_at(b, d, nd);
    RUMUS__FAIL_IF(ea != eb && ea != 1 && eb != 1, ctx, RUMUS_ESHAPE,
                   "%s: axis %d of out: a has extent %zu, b %zu (neither "
                   "1)", op, d, ea, eb);
    const size_t want = ea == 1 ? eb : ea;
    RUMUS__FAIL_IF(out->shape[d] != want, ctx, RUMUS_ESHAPE,
                   "%s: out axis %d has extent %zu, expected %zu", op, d,
                   out->shape[d], want);
  }
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "a", a, "out", out, 1));
  return rumus__check_overlap(ctx, op, "b", b, "out", out, 1);
}

/* a, b and out along out's axes: out contiguous, a and b with stride 0
 * where they are broadcast. */
static void bcast_layout(const rumus_tensor *a, const rumus_tensor *b,
                         const rumus_tensor *out, layout *l) {
  const rumus_tensor *in[2] = {a, b};
  const int nd = out->ndim;
  l->nd = nd;
  l->nt = 3;
  memcpy(l->e, out->shape, sizeof l->e);
  contiguous(out->shape, nd, l->s[2]);
  for (int t = 0; t < 2; t++) {
    size_t st[RUMUS_MAX_DIMS];
    contiguous(in[t]->shape, in[t]->ndim, st);
    for (int d = 0; d < nd; d++) {
      const int k = d - (nd - in[t]->ndim);
      l->s[t][d] = (k < 0 || in[t]->shape[k] == 1) ? 0 : st[k];
    }
  }
}

static int broadcast(rumus_ctx *ctx, const char *op, const char *kname,
                     const rumus_tensor *a, const rumus_tensor *b,
                     rumus_tensor *out) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_bcast(ctx, op, a, b, out));
  if (out->numel == 0) return RUMUS_OK;
  layout l;
  bcast_layout(a, b, out, &l);
  lay_simplify(&l);
  if (l.nd == 0) { /* one element */
    l.nd = 1;
    l.e[0] = 1;
    l.s[0][0] = l.s[1][0] = 0;
  }
  geom g;
  get_geom(ctx, &g);
  const int last = l.nd - 1;
  cl_ulong L = l.e[last], IA = l.s[0][last], IB = l.s[1][last], first = 0;
  cl_ulong ao = rumus__off(a), bo = rumus__off(b), oo = rumus__off(out);
  const rumus_tensor *ts[3] = {IA ? a : NULL, IB ? b : NULL, out};
  char opts[192];
  to_options(ctx, a->dtype, a->dtype, rumus__align4(ctx, ts, 3, L), opts,
             sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, kname};
  cl_uint nd = (cl_uint)last;
  cl_ulong8 e = vec8(l.e, last, 1), sa = vec8(l.s[0], last, 0),
            sb = vec8(l.s[1], last, 0);
  const size_t rows = out->numel / L, rpi = rows_per_item(ctx, rows, L);
  if (rpi) {
    char kr_name[32];
    snprintf(kr_name, sizeof kr_name, "bcast_rows_%s", kname + 6);
    const rumus__kernel_ref kr = {FILE_CL, opts, kr_name};
    cl_ulong rp = rpi, nr = rows, n = (rows + rpi - 1) / rpi;
    const rumus__arg ra[17] = {
        RUMUS__ARG(a->mem), RUMUS__ARG(ao), RUMUS__ARG(b->mem),
        RUMUS__ARG(bo),     RUMUS__ARG(out->mem), RUMUS__ARG(oo),
        RUMUS__ARG(L),      RUMUS__ARG(IA), RUMUS__ARG(IB),
        RUMUS__ARG(nd),     RUMUS__ARG(e),  RUMUS__ARG(sa),
        RUMUS__ARG(sb),     RUMUS__ARG(rp), RUMUS__ARG(nr),
        RUMUS__ARG(first),  RUMUS__ARG(n)};
    return run_pieces(ctx, op, &kr, n, 0, rumus__row_local(ctx, n), &first,
                      17, ra);
  }
  cl_ulong items = rows * ((L + g.vw - 1) / g.vw);
  const rumus__arg args[15] = {
      RUMUS__ARG(a->mem),   RUMUS__ARG(ao), RUMUS__ARG(b->mem),
      RUMUS__ARG(bo),       RUMUS__ARG(out->mem), RUMUS__ARG(oo),
      RUMUS__ARG(L),        RUMUS__ARG(IA), RUMUS__ARG(IB),
      RUMUS__ARG(nd),       RUMUS__ARG(e),  RUMUS__ARG(sa),
      RUMUS__ARG(sb),       RUMUS__ARG(first), RUMUS__ARG(items)};
  return run_pieces(ctx, op, &k, items, 0, g.ls, &first, 15, args);
}

int rumus_broadcast_add(rumus_ctx *ctx, const rumus_tensor *a,
                        const rumus_tensor *b, rumus_tensor *out) {
  return broadcast(ctx, "rumus_broadcast_add", "bcast_add", a, b, out);
}

int rumus_broadcast_mul(rumus_ctx *ctx, const rumus_tensor *a,
                        const rumus_tensor *b, rumus_tensor *out) {
  return broadcast(ctx, "rumus_broadcast_mul", "bcast_mul", a, b, out);
}

/* ---- Sum over axes ------------------------------------------------------ */

static int check_reduce(rumus_ctx *ctx, const char *op, const rumus_tensor *x,
                        unsigned axes, int keepdim, const rumus_tensor *y) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "x", x));
  RUMUS__FAIL_IF(y == NULL, ctx, RUMUS_ENULL, "%s: y is NULL", op);
  RUMUS__FAIL_IF(y->ctx != ctx, ctx, RUMUS_EINVAL,
                 "%s: y belongs to another context", op);
  RUMUS__FAIL_IF(y->dtype != x->dtype && y->dtype != RUMUS_F32, ctx,
                 RUMUS_EDTYPE, "%s: y is %s, expected %s (the type of x) or "
                 "f32", op, rumus_dtype_name(y->dtype),
                 rumus_dtype_name(x->dtype));
  for (int d = x->ndim; d < 32; d++)
    RUMUS__FAIL_IF(axes >> d & 1u, ctx, RUMUS_EINVAL,
                   "%s: axes has bit %d set, but x has %d dimensions", op, d,
                   x->ndim);
  int nd = 0;
  size_t want[RUMUS_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) {
    if (axes >> d & 1u) {
      if (keepdim) want[nd++] = 1;
    } else {
      want[nd++] = x->shape[d];
    }
  }
  RUMUS__FAIL_IF(y->ndim != nd, ctx, RUMUS_ESHAPE,
                 "%s: y has %d dimensions, expected %d", op, y->ndim, nd);
  for (int d = 0; d < nd; d++)
    RUMUS__FAIL_IF(y->shape[d] != want[d], ctx, RUMUS_ESHAPE,
                   "%s: y axis %d has extent %zu, expected %zu", op, d,
                   y->shape[d], want[d]);
  return rumus__check_overlap(ctx, op, "x", x, "y", y, 0);
}

/* A reduction in kernel terms (cl/tensorops.cl, RS_ARGS). */
typedef struct {
  int inner;   /* x's last (merged) dimension is reduced */
  int nk, nq;  /* kept dimensions (but K) and run dimensions */
  size_t ke[RUMUS_MAX_DIMS], ks[RUMUS_MAX_DIMS];
  size_t qe[RUMUS_MAX_DIMS], qs[RUMUS_MAX_DIMS];
  size_t K, Q, L, SI;
} rs_plan;

/* x's dimensions of extent > 1, neighbours of one kind merged, split into
 * kept dimensions, runs and the innermost reduced dimension. */
static void rs_plan_make(const rumus_tensor *x, unsigned axes, rs_plan *p) {
  size_t xs[RUMUS_MAX_DIMS], e[RUMUS_MAX_DIMS], s[RUMUS_MAX_DIMS];
  int red[RUMUS_MAX_DIMS], n = 0;
  contiguous(x->shape, x->ndim, xs);
  for (int d = 0; d < x->ndim; d++) {
    if (x->shape[d] == 1) continue;
    const int r = (int)(axes >> d & 1u);
    if (n > 0 && red[n - 1] == r) { /* contiguous in x: merge */
      e[n - 1] *= x->shape[d];
      s[n - 1] = xs[d];
      continue;
    }
    e[n] = x->shape[d];
    s[n] = xs[d];
    red[n++] = r;
  }
  memset(p, 0, sizeof *p);
  p->inner = n > 0 && red[n - 1];
  p->K = p->Q = p->L = 1;
  int last_red = -1;
  for (int d = 0; d < n; d++)
    if (red[d]) last_red = d;
  for (int d = 0; d < n; d++) {
    if (!red[d] && !(d == n - 1 && !p->inner)) {
      p->ke[p->nk] = e[d];
      p->ks[p->nk++] = s[d];
    } else if (!red[d]) {
      p->K = e[d];
    } else if (d == last_red) {
      p->L = e[d];
      p->SI = s[d];
    } else {
      p->qe[p->nq] = e[d];
      p->qs[p->nq++] = s[d];
      p->Q *= e[d];
    }
  }
}

/* Kernel and geometry of plan p on this context: *groups = 1 for the
 * work-group kernels (count in work-groups of *local), else 0; *rt the
 * lanes per y element of rs_sub_inner (which takes no chunks), else 0. */
static const char *rs_kernel(const rumus_ctx *ctx, const rs_plan *p,
                             size_t ny, size_t *count, size_t *local,
                             int *groups, cl_uint *rt) {
  const size_t wg = rumus__reduce_wg(ctx);
  const int gpu = rumus__gpu_variant(ctx) && wg >= 2 * RS_COLS;
  *groups = 0;
  *rt = 0;
  if (gpu && p->inner && p->Q == 1 && p->L <= RS_SUB_PER_LANE * wg) {
    size_t lanes = 1;
    while (lanes < wg && lanes * RS_SUB_PER_LANE < p->L) lanes *= 2;
    *rt = (cl_uint)lanes;
    *count = (ny + wg / lanes - 1) / (wg / lanes);
    *groups = 1;
    *local = wg;
    return "rs_sub_inner";
  }
  if (p->inner) {
    *count = ny;
    if (gpu && p->Q * p->L >= RS_WG_MIN_PER_ITEM * wg) {
      *groups = 1;
      *local = wg;
      return "rs_wg_inner";
    }
    *local = gpu ? 64 : rumus__row_local(ctx, ny);
    if (*local > ctx->max_wg) *local = 1;
    return "rs_row_inner";
  }
  const size_t P = ny / p->K;
  if (gpu) {
    *count = P * ((p->K + RS_COLS - 1) / RS_COLS);
    *groups = 1;
    *local = wg;
    return "rs_wg_outer";
  }
  *count = P * ((p->K + RS_CPU_COLS - 1) / RS_CPU_COLS);
  *local = rumus__row_local(ctx, *count);
  return "rs_row_outer";
}

/* Chunks of the reduced range: when the y elements alone give fewer
 * work-groups (GPU) or work-items (CPU) than RS_TARGET per compute unit,
 * the reduced range is cut into chunks of at least RS_MIN_CHUNK elements
 * (at most RS_MAX_CHUNKS) whose float partials rs_fold adds in order.  The
 * count depends on the shape, variant and device only, so each run gives
 * the same bits. */
#define RS_TARGET_GPU 4
#define RS_TARGET_CPU 4
#define RS_MIN_CHUNK_GPU 4096
#define RS_MIN_CHUNK_CPU 16384
#define RS_MAX_CHUNKS 1024

static size_t rs_chunks(const rumus_ctx *ctx, size_t units, size_t R) {
  const int gpu = rumus__gpu_variant(ctx);
  const size_t target = (size_t)ctx->compute_units *
                        (gpu ? RS_TARGET_GPU : RS_TARGET_CPU);
  const size_t min_chunk = gpu ? RS_MIN_CHUNK_GPU : RS_MIN_CHUNK_CPU;
  if (units >= target || R < 2 * min_chunk) return 1;
  size_t c = (target + units - 1) / units;
  if (c > R / min_chunk) c = R / min_chunk;
  if (c > RS_MAX_CHUNKS) c = RS_MAX_CHUNKS;
  return c < 1 ? 1 : c;
}

/* rs_sub_inner's launches: RS_ARGS then rt (args[19]), in pieces of at
 * most MAX_ITEMS work-items (the first group of each in *first). */
static int rs_launch_sub(rumus_ctx *ctx, const char *op,
                         const rumus__kernel_ref *k, size_t groups,
                         size_t local, cl_ulong *first,
                         const rumus__arg *args) {
  const size_t piece = MAX_ITEMS / local;
  for (size_t f = 0; f < groups; f += piece) {
    *first = f;
    size_t global = (groups - f < piece ? groups - f : piece) * local;
    RUMUS__FORWARD(rumus__launch(ctx, op, k, 1, &global, &local, 20, args));
  }
  return RUMUS_OK;
}

/* One reduce_sum launch: plan p into (mem, off) of storage ys, `chunks`
 * chunks of RC reduced elements. */
static int rs_launch(rumus_ctx *ctx, const char *op, const rumus_tensor *x,
                     const rs_plan *p, cl_mem mem, cl_ulong yo, rumus_dtype ys,
                     size_t ny, size_t chunks, size_t RC) {
  size_t units, local;
  int groups;
  cl_uint rt;
  const char *kname = rs_kernel(ctx, p, ny, &units, &local, &groups, &rt);
  char opts[192];
  to_options(ctx, x->dtype, ys, 0, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, kname};
  cl_ulong xo = rumus__off(x), K = p->K, Q = p->Q, L = p->L, SI = p->SI,
           rc = RC, nyl = ny, nu = units, first = 0, n = units * chunks;
  cl_uint nk = (cl_uint)p->nk, nq = (cl_uint)p->nq;
  cl_ulong8 ke = vec8(p->ke, p->nk, 1), ks = vec8(p->ks, p->nk, 0),
            qe = vec8(p->qe, p->nq, 1), qs = vec8(p->qs, p->nq, 0);
  const rumus__arg args[20] = {
      RUMUS__ARG(x->mem), RUMUS__ARG(xo), RUMUS__ARG(mem),   RUMUS__ARG(yo),
      RUMUS__ARG(nk),     RUMUS__ARG(ke), RUMUS__ARG(ks),    RUMUS__ARG(K),
      RUMUS__ARG(nq),     RUMUS__ARG(qe), RUMUS__ARG(qs),    RUMUS__ARG(Q),
      RUMUS__ARG(L),      RUMUS__ARG(SI), RUMUS__ARG(rc),    RUMUS__ARG(nyl),
      RUMUS__ARG(nu),     RUMUS__ARG(first), RUMUS__ARG(n),  RUMUS__ARG(rt)};
  /* run_pieces sets *first and expects it second to last: rs_sub_inner's
   * extra argument goes through its own array. */
  if (rt) return rs_launch_sub(ctx, op, &k, n, local, &first, args);
  return run_pieces(ctx, op, &k, n, groups ? local : 0, local, &first, 19,
                    args);
}

/* y = the sum of the chunks' partials, chunk order. */
static int rs_fold(rumus_ctx *ctx, const char *op, const rumus_tensor *x,
                   cl_mem part, size_t chunks, rumus_tensor *y) {
  geom g;
  get_geom(ctx, &g);
  char opts[192];
  to_options(ctx, x->dtype, y->dtype, 0, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, "rs_fold"};
  cl_ulong C = chunks, ny = y->numel, yo = rumus__off(y), first = 0;
  const rumus__arg args[7] = {RUMUS__ARG(part),  RUMUS__ARG(C),
                              RUMUS__ARG(ny),    RUMUS__ARG(y->mem),
                              RUMUS__ARG(yo),    RUMUS__ARG(first),
                              RUMUS__ARG(ny)};
  return run_pieces(ctx, op, &k, y->numel, 0, g.ls, &first, 7, args);
}

int rumus_reduce_sum(rumus_ctx *ctx, const rumus_tensor *x, unsigned axes,
                     int keepdim, rumus_tensor *y) {
  const char *op = "rumus_reduce_sum";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_reduce(ctx, op, x, axes, keepdim, y));
  if (y->numel == 0) return RUMUS_OK;
  if (x->numel == 0) return rumus_tensor_fill(y, 0.0f); /* empty sums */
  rs_plan p;
  rs_plan_make(x, axes, &p);
  const size_t R = p.Q * p.L, ny = y->numel;
  size_t units, local;
  int groups;
  cl_uint rt;
  rs_kernel(ctx, &p, ny, &units, &local, &groups, &rt);
  size_t chunks = rt ? 1 : rs_chunks(ctx, units, R);
  const size_t RC = (R + chunks - 1) / chunks;
  chunks = (R + RC - 1) / RC;
  if (chunks == 1)
    return rs_launch(ctx, op, x, &p, y->mem, rumus__off(y), y->dtype, ny, 1,
                     RC);
  /* The partials live in the context's reusable scratch slot
   * RS_SCRATCH_SLOT (a buffer created per call cost its allocation every
   * time); the queue runs these kernels before the slot's next holder. */
  cl_mem part;
  rumus__scratch_begin(ctx);
  int st = rumus__scratch_slot(ctx, op, RS_SCRATCH_SLOT,
                               chunks * ny * sizeof(float), &part);
  if (st == RUMUS_OK)
    st = rs_launch(ctx, op, x, &p, part, 0, RUMUS_F32, ny, chunks, RC);
  if (st == RUMUS_OK) st = rs_fold(ctx, op, x, part, chunks, y);
  rumus__scratch_end(ctx);
  return st;
}

/* The F32 program of each alignment the variant can choose (the reduction
 * kernels live in the unaligned one). */
int rumus__tensorops_warm(rumus_ctx *ctx) {
  const int aligns = rumus__gpu_variant(ctx) ? 2 : 1;
  for (int align4 = 0; align4 < aligns; align4++) {
    char opts[192];
    cl_program prog;
    to_options(ctx, RUMUS_F32, RUMUS_F32, align4, opts, sizeof opts);
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
  }
  return RUMUS_OK;
}
