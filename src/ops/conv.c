/*
 * conv.c - 2-D convolution in NCHW with stride, zero padding, dilation and
 * groups: the forward with its bias fused into the epilogue, the input
 * gradient and the weight gradient (kernels in cl/conv.cl).  Each is one
 * implicit GEMM launch over the whole batch (the weight gradient adds a
 * fixed-order sum of its pixel chunks when there are several), but for
 * direct kernels where few input channels per group leave the tiles
 * idle: one (the weight gradient; on the GPU variant also the forward)
 * or up to 4 (the GPU variant's input gradient);
 * the input gradient's GEMM may take wider tiles (WIDE_TILES).  Every
 * tensor of a call has x's (or dy's) floating storage type: the program's
 * RUMUS_STORAGE.  A program holds one variant's kernels: the CPU one is
 * specialised by its register tile (cpu_tile: LANES columns, NB blocks
 * of MB channels per work-item, by the device's vector width or
 * RUMUS_CONV2D_CPU_TILE; MB lowered by the channels per group), the GPU
 * one by its tiles (TM x TN of C per work-group, RM x RN per work-item, TK
 * k per step), chosen by the rows of the op's GEMM or set for tuning by
 * RUMUS_CONV2D_TILE and its per-op forms (conv_tiles_env).  On the GPU
 * variant the three ops of 3x3, stride 1, dilation 1, one-group
 * convolutions may run as Winograd instead (conv_winograd.c, which
 * decides by the shape and RUMUS_CONV2D_WINOGRAD).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "conv.cl";

#define CPU_WG 8   /* CPU kernels' work-group size (CPU_WG in cl/conv.cl) */
/* conv_fwd_dw_cpu's outputs per vector (DW_VL in cl/conv.cl). */
#define DW_VL 16
/* The weight gradient's chunks of pixels (weight_chunks): as many as
 * bring the work-groups of nominal 64 x 64 tiles to about WG_AIM (a
 * GPU's compute units several times over), at most S_MAX, with at least
 * KC_MIN pixels each and at most PART_CAP floats of partials.  Fixed by
 * the shape alone, not by the device, the variant or the tile sizes, so
 * the weight gradient's bits do not depend on them. */
#define KC_MIN 256
#define S_MAX 64
#define WG_AIM 1024
#define PART_CAP ((size_t)1 << 24)
/* Work-groups per launch along dimension 2 (groups x chunks) at most:
 * CUDA's grid limit, which NVIDIA's OpenCL inherits. */
#define MAX_Z ((size_t)65535)
/* Padded image extents stay below this: the CPU kernels' coordinates are
 * int. */
#define COORD_LIMIT ((size_t)1 << 30)
/* The depthwise weight gradient (dw_blocks): DW_LANES and DW_TAPS are
 * DWL and DWT of cl/conv.cl; about DW_AIM work-groups, at least DW_STEPS
 * pixels per lane. */
#define DW_LANES 64
#define DW_TAPS 9
#define DW_AIM 4096
#define DW_STEPS 16
/* The few-channel input gradient: FEWC, FEWWG and FEWLW of cl/conv.cl. */
#define FEW_C 4
#define FEW_WG 256
#define FEW_LW 4096
/* Taps per phase of conv_bwd_data_few<CG>v<P> at most: FEWRT x FEWLT. */
#define FEW_RT 4
#define FEW_LT 4

typedef struct {
  size_t n, c, h, w, oc, oh, ow, kh, kw, g;
  int sh, sw, ph, pw, dh, dw;
} geo;

/* The GPU variant's tiles: TM x TN of C per work-group, RM x RN per
 * work-item, TK k per step (the macros of cl/conv.cl). */
typedef struct {
  int tm, tn, tk, rm, rn;
} conv_tiles;

/* The defaults, by the rows (channels per group) of the op's GEMM: 128 x
 * 64 tiles of 8 x 4 blocks from 128 rows, 64 x 64 tiles of 4 x 4 blocks
 * (GEMM's middle tiles) from 33, and narrower tiles for
 * few rows (a 64-row tile over 16 rows wastes three quarters of its
 * products); the last one for devices whose work-groups stop below 64. */
static const conv_tiles DEFAULT_TILES[] = {
    {128, 64, 16, 8, 4}, /* 256 work-items, from 128 rows (H200: 1.2-1.3x
                            the 64 x 64 tile's GFLOP/s in every op at 128
                            and 256 channels) */
    {64, 64, 16, 4, 4}, /* 256 work-items */
    {32, 64, 16, 4, 4}, /* 128 */
    {16, 64, 16, 4, 4}, /* 64 */
    {16, 16, 16, 4, 4}, /* 16 */
};
#define N_DEFAULT (sizeof DEFAULT_TILES / sizeof DEFAULT_TILES[0])

enum { OP_FWD, OP_BWD_DATA, OP_BWD_WEIGHT };

/* One program of the family: storage, variant and its specialisation. */
typedef struct {
  rumus_dtype storage;
  int gpu;
  int mb;           /* CPU: channels of a register block */
  int lanes;        /* CPU: columns per work-item, 8 or 16 */
  int nb;           /* CPU: register blocks per work-item (cpu_tile) */
  conv_tiles tiles; /* GPU */
} conv_prog;

static size_t tiles_wgs(const conv_tiles *t) {
  return (size_t)(t->tm / t->rm) * (size_t)(t->tn / t->rn);
}

/* Whether cl/conv.cl accepts t (its #error conditions) and the device
 * runs it (work-group size, local memory). */
static int tiles_ok(const rumus_ctx *ctx, const conv_tiles *t) {
  if (t->rm < 4 || t->rn < 4 || t->rm > 16 || t->rn > 16 || t->rm % 4 ||
      t->rn % 4 || t->tk < 1 || t->tm % t->rm || t->tn % t->rn)
    return 0;
  const size_t wgs = tiles_wgs(t), tk = (size_t)t->tk;
  const size_t tm = (size_t)t->tm, tn = (size_t)t->tn;
  if (wgs > ctx->max_wg || wgs % tk || wgs % tn) return 0;
  if (tm % (wgs / tk) || tn % (wgs / tk) || tk % (wgs / tn)) return 0;
  return tk * (tm + tn + 8) * sizeof(float) <= ctx->local_mem;
}

/* Tile sizes from the environment variable `name`: "TMxTNxRMxRN" or
 * "TMxTNxRMxRNxTK" (TK 16 if not given).  1 with *t set if it is there
 * and valid on this device; anything else is ignored (0). */
static int tiles_from_env(const rumus_ctx *ctx, const char *name,
                          conv_tiles *t) {
  long f[5] = {0, 0, 0, 0, 16};
  if (!rumus__env_tiling(name, f, 4, 5)) return 0;
  const conv_tiles e = {(int)f[0], (int)f[1], (int)f[4], (int)f[2],
                        (int)f[3]};
  if (!tiles_ok(ctx, &e)) return 0;
  *t = e;
  return 1;
}

/* The tuning override of an op: RUMUS_CONV2D_FWD_TILE,
 * RUMUS_CONV2D_BWD_DATA_TILE or RUMUS_CONV2D_BWD_WEIGHT_TILE, else
 * RUMUS_CONV2D_TILE for all three. */
static int conv_tiles_env(const rumus_ctx *ctx, int op, conv_tiles *t) {
  static const char *const NAMES[] = {"RUMUS_CONV2D_FWD_TILE",
                                      "RUMUS_CONV2D_BWD_DATA_TILE",
                                      "RUMUS_CONV2D_BWD_WEIGHT_TILE"};
  return tiles_from_env(ctx, NAMES[op], t) ||
         tiles_from_env(ctx, "RUMUS_CONV2D_TILE", t);
}

/* The tiles of op over `rows` rows of C: the override, else the default
 * for the rows that the device runs. */
static conv_tiles pick_tiles(const rumus_ctx *ctx, int op, size_t rows) {
  conv_tiles t;
  if (conv_tiles_env(ctx, op, &t)) return t;
  size_t i = rows >= 128 ? 0 : rows > 32 ? 1 : rows > 16 ? 2 : 3;
  while (i + 1 < N_DEFAULT && !tiles_ok(ctx, &DEFAULT_TILES[i])) i++;
  return DEFAULT_TILES[i];
}

/* The input gradient's wider tiles (H200 sweep, bench/results/h200/
 * session-1536/k/sweep/table.txt: at 64 x 64 -> 64 x 56 x 56 the 64 x 128
 * tile of 4 x 8 blocks and TK 8 ran at 1.20x the 64 x 64 one; at 64 x
 * 128 -> 128 x 28 x 28 the 128 x 128 tile of 8 x 8 at 1.11x the 128 x 64
 * one, but at 64 x 256 -> 256 x 14 x 14, 196 such work-groups, at 0.88x),
 * taken when they still make WIDE_MIN work-groups. */
static const conv_tiles WIDE_TILES[] = {
    {64, 128, 8, 4, 8},   /* 33 to 127 rows */
    {128, 128, 16, 8, 8}, /* from 128 rows */
};
#define WIDE_MIN 384

/* The input gradient's tiles over rows x cols (a stride phase's pixels)
 * x groups: the override, else a wide tile where it applies, else
 * pick_tiles's default. */
static conv_tiles pick_tiles_bwd_data(const rumus_ctx *ctx, size_t rows,
                                      size_t cols, size_t groups) {
  conv_tiles t;
  if (conv_tiles_env(ctx, OP_BWD_DATA, &t)) return t;
  if (rows > 32) {
    const conv_tiles *w = &WIDE_TILES[rows >= 128];
    const size_t wgs = (rows + (size_t)w->tm - 1) / (size_t)w->tm *
                       ((cols + (size_t)w->tn - 1) / (size_t)w->tn) * groups;
    if (wgs >= WIDE_MIN && tiles_ok(ctx, w)) return *w;
  }
  return pick_tiles(ctx, OP_BWD_DATA, rows);
}

/* The options of a program (warm-up and launches). */
static void conv_options(const conv_prog *p, char *buf, size_t len) {
  char head[96];
  const conv_tiles *t = &p->tiles;
  rumus__options_head(head, sizeof head, p->storage,
                      p->gpu ? tiles_wgs(t) : CPU_WG, 0);
  if (p->gpu)
    snprintf(buf, len, "%s -DCONV_GPU=1 -DTM=%d -DTN=%d -DTK=%d -DRM=%d "
             "-DRN=%d", head, t->tm, t->tn, t->tk, t->rm, t->rn);
  else
    snprintf(buf, len,
             "%s -DCONV_GPU=0 -DMB=%d -DNB=%d -DLANES=%d -DCPU_WG=%d", head,
             p->mb, p->nb, p->lanes, CPU_WG);
}

/* The CPU kernels' register tile: LANES columns per work-item (one
 * float16 or float8 of accumulators per row) and NB blocks of up to MB
 * rows (MG = NB MB rows per gather of the columns' B values).  From
 * RUMUS_CONV2D_CPU_TILE = LANESxMBxNB (LANES 8 or 16, MB 4 to 16, MB NB
 * at most 128) if set and valid, else by the device's native float
 * vector: 16 (AVX-512, 32 zmm) takes 16 x 16 x 4, 16 float16
 * accumulators per block; narrower (AVX2, 16 ymm) 16 x 4 x 32, whose 4
 * float16 accumulators are 8 ymm, a k costing 6 loads (2 ymm of B, 4
 * broadcasts of A) per 8 fma (16 float16 are 32 ymm: they spilled), and
 * whose 32 blocks keep a gather's cost spread over 128 rows.  On 2 AMD EPYC (AVX2) cores,
 * PoCL, 8 x C -> C x S x S with C/S = 64/56, 128/28, 256/14: every op
 * 1.5-2.7x faster than with 16 x 16 x 4 (the forward 0.4-0.5x of
 * im2col + OpenBLAS sgemm -> 0.5-0.9x); 16 x 4 x 16 as fast at 64
 * channels, slower from 128; 8 x 8 x 8 (float8) about as slow as 16 x
 * 16 x 4, its 8 broadcasts of A per 8 fma bound by the loads; 16 x 6 x
 * 21 and 16 x 8 x 16 slower too. */
typedef struct {
  int lanes, mb, nb;
} cpu_tile;

static cpu_tile cpu_tile_for(const rumus_ctx *ctx) {
  long f[3];
  if (rumus__env_tiling("RUMUS_CONV2D_CPU_TILE", f, 3, 3) &&
      (f[0] == 8 || f[0] == 16) && f[1] >= 4 && f[1] <= 16 &&
      f[1] * f[2] <= 128)
    return (cpu_tile){(int)f[0], (int)f[1], (int)f[2]};
  if (ctx->float_width >= 16) return (cpu_tile){16, 16, 4};
  return (cpu_tile){16, 4, 32};
}

/* The program that runs op over rows (channels per group) on this
 * context: CPU, cpu_tile_for's tile with MB lowered to 4 below MB rows
 * and to 1 (in 4 blocks) below 4 (depthwise: 1); GPU, pick_tiles. */
static conv_prog prog_for(const rumus_ctx *ctx, rumus_dtype storage, int op,
                          size_t rows) {
  conv_prog p = {storage, rumus__gpu_variant(ctx), 1, 16, 4,
                 {0, 0, 0, 0, 0}};
  if (p.gpu) {
    p.tiles = pick_tiles(ctx, op, rows);
    return p;
  }
  const cpu_tile t = cpu_tile_for(ctx);
  p.lanes = t.lanes;
  p.mb = rows >= (size_t)t.mb ? t.mb : rows >= 4 ? 4 : 1;
  if (p.mb > 1) p.nb = t.nb;
  return p;
}

static cl_long16 geo_arg(const geo *g) {
  cl_long16 v;
  const long s[16] = {(long)g->n,  (long)g->c,  (long)g->h,  (long)g->w,
                      (long)g->oc, (long)g->oh, (long)g->ow, (long)g->kh,
                      (long)g->kw, g->sh,       g->sw,       g->ph,
                      g->pw,       g->dh,       g->dw,       (long)g->g};
  for (int i = 0; i < 16; i++) v.s[i] = s[i];
  return v;
}

/* ---- Argument checks ---------------------------------------------------- */

static int check_params(rumus_ctx *ctx, const char *op,
                        const rumus_conv2d_params *p) {
  const struct {
    const char *name;
    int v, min;
  } f[] = {{"stride_h", p->stride_h, 1},     {"stride_w", p->stride_w, 1},
           {"pad_h", p->pad_h, 0},           {"pad_w", p->pad_w, 0},
           {"dilation_h", p->dilation_h, 1}, {"dilation_w", p->dilation_w, 1},
           {"groups", p->groups, 1}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    RUMUS__FAIL_IF(f[i].v < f[i].min, ctx, RUMUS_EINVAL,
                   "%s: %s is %d, must be at least %d", op, f[i].name, f[i].v,
                   f[i].min);
  return RUMUS_OK;
}

/* The output extent along one axis, or RUMUS_ESHAPE when the dilated
 * kernel is larger than the padded input. */
static int out_extent(rumus_ctx *ctx, const char *op, const char *axis,
                      size_t in, size_t k, int pad, int stride, int dil,
                      size_t *out) {
  const size_t span = (size_t)dil * (k - 1) + 1, padded = in + 2 * (size_t)pad;
  RUMUS__FAIL_IF(span > padded, ctx, RUMUS_ESHAPE,
                 "%s: the kernel's %s (%zu taps, dilation %d: %zu) is larger "
                 "than the padded input's (%zu + 2 x %d = %zu)", op, axis, k,
                 dil, span, in, pad, padded);
  RUMUS__FAIL_IF(padded >= COORD_LIMIT, ctx, RUMUS_ESHAPE,
                 "%s: the padded input's %s (%zu) is not below 2^30", op,
                 axis, padded);
  *out = (padded - span) / (size_t)stride + 1;
  return RUMUS_OK;
}

/* The geometry of a convolution of input x (N, C, H, W taken from the
 * tensor named xn) with weight w (named wn). */
static int make_geo(rumus_ctx *ctx, const char *op,
                    const rumus_conv2d_params *p, const char *xn,
                    const rumus_tensor *x, const char *wn,
                    const rumus_tensor *w, geo *g) {
  char sx[RUMUS__SHAPE_BUF], sw[RUMUS__SHAPE_BUF];
  rumus__shape_str(x, sx, sizeof sx);
  rumus__shape_str(w, sw, sizeof sw);
  RUMUS__FORWARD(check_params(ctx, op, p));
  RUMUS__FAIL_IF(x->ndim != 4, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must be 4-D [N, C, H, W]", op, xn, sx);
  RUMUS__FAIL_IF(w->ndim != 4, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must be 4-D [OC, C / groups, KH, KW]", op, wn, sw);
  *g = (geo){x->shape[0], x->shape[1], x->shape[2], x->shape[3],
             w->shape[0], 0, 0, w->shape[2], w->shape[3], (size_t)p->groups,
             p->stride_h, p->stride_w, p->pad_h, p->pad_w, p->dilation_h,
             p->dilation_w};
  RUMUS__FAIL_IF(g->c % g->g != 0, ctx, RUMUS_EINVAL,
                 "%s: groups %d does not divide the %zu channels of %s %s", op,
                 p->groups, g->c, xn, sx);
  RUMUS__FAIL_IF(g->oc % g->g != 0, ctx, RUMUS_EINVAL,
                 "%s: groups %d does not divide the %zu output channels of "
                 "%s %s", op, p->groups, g->oc, wn, sw);
  RUMUS__FAIL_IF(w->shape[1] != g->c / g->g, ctx, RUMUS_ESHAPE,
                 "%s: %s %s: axis 1 must be C / groups = %zu (%s %s, groups "
                 "%d)", op, wn, sw, g->c / g->g, xn, sx, p->groups);
  RUMUS__FAIL_IF(g->kh == 0 || g->kw == 0, ctx, RUMUS_ESHAPE,
                 "%s: %s %s has an empty kernel", op, wn, sw);
  RUMUS__FORWARD(out_extent(ctx, op, "height (axis 2)", g->h, g->kh, g->ph,
                            g->sh, g->dh, &g->oh));
  return out_extent(ctx, op, "width (axis 3)", g->w, g->kw, g->pw, g->sw,
                    g->dw, &g->ow);
}

/* t is 4-D [a, b, c, d]. */
static int check_4d(rumus_ctx *ctx, const char *op, const char *name,
                    const rumus_tensor *t, size_t a, size_t b, size_t c,
                    size_t d) {
  const int ok = t->ndim == 4 && t->shape[0] == a && t->shape[1] == b &&
                 t->shape[2] == c && t->shape[3] == d;
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(!ok, ctx, RUMUS_ESHAPE,
                 "%s: %s is %s, expected [%zu, %zu, %zu, %zu]", op, name,
                 rumus__shape_str(t, s, sizeof s), a, b, c, d);
  return RUMUS_OK;
}

static const rumus_conv2d_params *params_or_defaults(
    const rumus_conv2d_params *p) {
  static const rumus_conv2d_params defaults = RUMUS_CONV2D_DEFAULTS;
  return p ? p : &defaults;
}

/* ---- Launches ------------------------------------------------------------- */

/* Launches kernel `name` over cols x rows x nz (per work-item: lanes
 * columns and 4 MB rows on the CPU variant, MG in cl/conv.cl; an RM x RN
 * block of a TM x TN tile per work-group on the GPU variant), in pieces
 * of MAX_Z along dimension 2; the last argument is z0, the piece's first
 * z. */
static int launch_z(rumus_ctx *ctx, const char *op, const conv_prog *pr,
                    const char *name, size_t cols, size_t rows, size_t nz,
                    const rumus__arg *args, size_t nargs) {
  char opts[192];
  conv_options(pr, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, name};
  size_t global[3], local[3] = {CPU_WG, 1, 1};
  if (pr->gpu) {
    const conv_tiles *t = &pr->tiles;
    local[0] = (size_t)(t->tn / t->rn);
    local[1] = (size_t)(t->tm / t->rm);
    global[0] = (cols + (size_t)t->tn - 1) / (size_t)t->tn * local[0];
    global[1] = (rows + (size_t)t->tm - 1) / (size_t)t->tm * local[1];
  } else {
    global[0] = (cols + (size_t)pr->lanes - 1) / (size_t)pr->lanes;
    const size_t mg = (size_t)pr->nb * (size_t)pr->mb;
    global[1] = (rows + mg - 1) / mg;
  }
  return rumus__launch_pieces(ctx, op, &k, 3, global, local, 2, nz, MAX_Z,
                              nargs, args);
}

/* Launches kernel `name` (one work-item per element, or per row, of the
 * output) over count work-items in work-groups of the program's size, in
 * pieces of about 2^30; the last argument is i0, the piece's first. */
static int launch_flat(rumus_ctx *ctx, const char *op, const conv_prog *pr,
                       const char *name, size_t count, const rumus__arg *args,
                       size_t nargs) {
  char opts[192];
  conv_options(pr, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, name};
  const size_t local = pr->gpu ? tiles_wgs(&pr->tiles) : CPU_WG;
  const size_t piece = ((size_t)1 << 30) / local * local;
  size_t global = 0;
  return rumus__launch_pieces(ctx, op, &k, 1, &global, &local, 0, count, piece,
                              nargs, args);
}

/* Launches kernel `name` over global0 x ny work-items in work-groups of
 * local0 x 1, in pieces of MAX_Z along dimension 1; the last argument is
 * y0, the piece's first y. */
static int launch_y(rumus_ctx *ctx, const char *op, const conv_prog *pr,
                    const char *name, size_t global0, size_t local0,
                    size_t ny, const rumus__arg *args, size_t nargs) {
  char opts[192];
  conv_options(pr, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, name};
  size_t global[2] = {global0, 1}, local[2] = {local0, 1};
  return rumus__launch_pieces(ctx, op, &k, 2, global, local, 1, ny, MAX_Z,
                              nargs, args);
}

/* Whether the convolution is one the Winograd path computes: 3x3, stride
 * 1, dilation 1, one group. */
static int wino_shape(const geo *g) {
  return g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 &&
         g->dh == 1 && g->dw == 1 && g->g == 1;
}

/* cl/conv.cl's conv_fwd_dw_cpu: the private rows' floats, the outputs
 * of a row it holds at most, and its output channels per work-item at
 * most. */
#define DW_ROW 1024
#define DW_OW 256
#define DW_OB 32
/* conv_bwd_weight_dw_cpu's output channels per work-item (DWOB). */
#define DW_OCB 4

/* Whether conv_fwd_dw_cpu takes the forward: one input channel per group,
 * an output row of at most DW_OW, and the padded input row its tap reads
 * reach within DW_ROW floats (the kernel's `need`). */
static int dw_row_fits(const geo *g) {
  if (g->c / g->g != 1 || g->ow > DW_OW) return 0;
  const size_t nb = (g->ow + DW_VL - 1) / DW_VL;
  const size_t need = (nb * DW_VL - 1) * (size_t)g->sw +
                      (g->kw - 1) * (size_t)g->dw + 1 + (g->sw == 2);
  return g->sw <= DW_ROW && g->dw <= DW_ROW && g->kw <= DW_ROW &&
         need <= DW_ROW;
}

static int run_fwd(rumus_ctx *ctx, const char *op, const geo *g,
                   const rumus_tensor *x, const rumus_tensor *w,
                   const rumus_tensor *bias, rumus_tensor *y) {
  rumus__wino_plan wp;
  const rumus__wino_geo wg = {g->n,  g->c,  g->h,  g->w, g->oc,
                              g->oh, g->ow, g->ph, g->pw, RUMUS__WINO_FWD};
  if (wino_shape(g) && rumus__wino_plan_make(ctx, &wg, &wp))
    return rumus__wino_run(ctx, op, &wp, x, w, bias, y);
  const conv_prog pr = prog_for(ctx, x->dtype, OP_FWD, g->oc / g->g);
  const cl_long16 gv = geo_arg(g);
  cl_ulong xo = rumus__off(x), wo = rumus__off(w), yo = rumus__off(y),
           bo = bias ? rumus__off(bias) : 0;
  const cl_int has_bias = bias != NULL;
  /* Without a bias, x stands in for the buffer the kernel never reads. */
  const cl_mem bm = bias ? bias->mem : x->mem;
  const rumus__arg args[] = {RUMUS__ARG(x->mem), RUMUS__ARG(xo), RUMUS__ARG(w->mem),
                       RUMUS__ARG(wo),     RUMUS__ARG(bm), RUMUS__ARG(bo),
                       RUMUS__ARG(has_bias), RUMUS__ARG(y->mem),
                       RUMUS__ARG(yo),     RUMUS__ARG(gv), RUMUS__ARG(gv)};
  if (pr.gpu && g->c / g->g == 1) /* one channel per group: direct */
    return launch_flat(ctx, op, &pr, "conv_fwd_direct", y->numel, args,
                       sizeof args / sizeof args[0]);
  if (!pr.gpu && dw_row_fits(g)) /* one channel per group: rows */
    return launch_flat(ctx, op, &pr, "conv_fwd_dw_cpu",
                       g->n * g->g * ((g->oc / g->g + DW_OB - 1) / DW_OB) *
                           g->oh,
                       args, sizeof args / sizeof args[0]);
  return launch_z(ctx, op, &pr, pr.gpu ? "conv_fwd_wg" : "conv_fwd_cpu",
                  g->n * g->oh * g->ow, g->oc / g->g, g->g, args,
                  sizeof args / sizeof args[0]);
}

/* The input coordinates i < in with (i + pad) mod stride = r. */
static size_t phase_count(size_t in, int pad, int stride, int r) {
  const size_t s = (size_t)stride;
  const size_t i0 = (size_t)((r - pad % stride + stride) % stride);
  return i0 < in ? (in - i0 + s - 1) / s : 0;
}

/* GPU variant: one launch per stride phase (rh, rw) of the input pixels
 * (cl/conv.cl), over the phases that hold a pixel (at most min(SH, H) x
 * min(SW, W) of them). */
static int run_bwd_data_gpu(rumus_ctx *ctx, const char *op,
                            const conv_prog *pr, const geo *g,
                            rumus__arg *args, size_t nargs, cl_int *rh,
                            cl_int *rw) {
  const size_t ah = (size_t)g->sh < g->h ? (size_t)g->sh : g->h;
  const size_t aw = (size_t)g->sw < g->w ? (size_t)g->sw : g->w;
  for (size_t i = 0; i < ah; i++)
    for (size_t j = 0; j < aw; j++) {
      /* Input row i is the first of phase (i + PH) mod SH. */
      *rh = (cl_int)((i + (size_t)g->ph) % (size_t)g->sh);
      *rw = (cl_int)((j + (size_t)g->pw) % (size_t)g->sw);
      const size_t cols = g->n * phase_count(g->h, g->ph, g->sh, *rh) *
                          phase_count(g->w, g->pw, g->sw, *rw);
      RUMUS__FORWARD(launch_z(ctx, op, pr, "conv_bwd_data_wg", cols,
                              g->c / g->g, g->g, args, nargs));
    }
  return RUMUS_OK;
}

/* Whether the GPU variant's input gradient runs conv_bwd_data_few1-4: 1
 * to FEW_C channels per group (the GEMM's tile rows mostly idle), a
 * channel's taps within FEW_LW, a work-group of FEW_WG, and no tile
 * override for the op (which selects the GEMM, or conv_bwd_data_direct
 * for one channel: the same sums). */
static int use_few(const rumus_ctx *ctx, const geo *g) {
  const size_t cg = g->c / g->g;
  conv_tiles t;
  return cg >= 1 && cg <= FEW_C && cg * g->kh * g->kw <= FEW_LW &&
         ctx->max_wg >= FEW_WG &&
         ctx->local_mem >= FEW_LW * sizeof(float) + 1024 &&
         g->n * g->h * g->w <= ((size_t)1 << 31) - FEW_WG &&
         !conv_tiles_env(ctx, OP_BWD_DATA, &t);
}

/* The few-channel input gradient's tuples: pix pixels per work-item,
 * along a row (conv_bwd_data_few<CG>p<P>; 2: conv_bwd_data_few<CG>) or
 * down a column (vert, conv_bwd_data_few<CG>v<P>).  Every form gives the
 * same bits. */
typedef struct {
  size_t pix;
  int vert;
} few_form;

static int few_vert_fits(const geo *g);

/* The form: RUMUS_CONV2D_FEW_PIX = 2, 4, 8, v4 or v8 if set (the column
 * forms fall back to rows where few_vert_fits says no), else columns of
 * 4 for strided convolutions where they fit, pairs otherwise.  On the
 * H200 (64x3x64x224, 7x7 stride 2, the input gradient): pairs 4280 us,
 * rows of 4 2056, of 8 1463, columns of 4 1449, of 8 1744; at stride 1
 * (64x3x32x32 3x3, 64x1x32x56 5x5) pairs and columns of 4 within 3%, the
 * rows slower. */
static few_form few_choice(const geo *g) {
  few_form f = {2, 0};
  const char *v = getenv("RUMUS_CONV2D_FEW_PIX");
  if (v == NULL) {
    if ((g->sh > 1 || g->sw > 1) && few_vert_fits(g)) f.pix = 4, f.vert = 1;
    return f;
  }
  const int vert = v[0] == 'v';
  if ((v[vert] == '4' || v[vert] == '8') && v[vert + 1] == '\0') {
    f.pix = (size_t)(v[vert] - '0');
    f.vert = vert;
  }
  return f;
}

static size_t gcd_of(size_t a, size_t b) {
  while (b) {
    const size_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Whether conv_bwd_data_few<CG>v<P> takes g: dy's row one down per row
 * tap of a phase (DH divides SH) and at most FEW_RT x FEW_LT taps per
 * phase. */
static int few_vert_fits(const geo *g) {
  const size_t sh = (size_t)g->sh, dh = (size_t)g->dh, sw = (size_t)g->sw;
  const size_t sth = sh / gcd_of(sh, dh);
  const size_t stw = sw / gcd_of(sw, (size_t)g->dw);
  return sh % dh == 0 && (g->kh + sth - 1) / sth <= FEW_RT &&
         (g->kw + stw - 1) / stw <= FEW_LT;
}

/* Work-items of the few-channel kernels: n H (row tuples of a column
 * phase per row; few_row_pairs and FEW_TUP in cl/conv.cl) or n W (column
 * tuples of a row phase per column). */
static size_t few_items(const geo *g, size_t p, int vert) {
  const size_t s = vert ? (size_t)g->sh : (size_t)g->sw;
  const size_t e = vert ? g->h : g->w, other = vert ? g->w : g->h;
  const size_t c = (e + s - 1) / s, full = e % s ? e % s : s;
  const size_t t1 = (c + p - 1) / p, t2 = (c + p - 2) / p;
  return g->n * other * (full * t1 + (s - full) * t2);
}

/* conv_bwd_data_few<C / G>[p<P> | v<P>] over every tuple of one phase's
 * dx pixels (pairs: P = 2) and group, OB output channels' weights at a
 * time in local memory. */
static int run_bwd_data_few(rumus_ctx *ctx, const char *op,
                            const conv_prog *pr, const geo *g,
                            const rumus__arg *args) {
  const size_t per = g->c / g->g * g->kh * g->kw;
  few_form f = few_choice(g);
  if (f.vert && !few_vert_fits(g)) f.vert = 0;
  /* The tuples' kernels hold a tap's channels as one float4. */
  if (f.pix > 2 && 4 * g->kh * g->kw > FEW_LW) f.pix = 2;
  const size_t items = few_items(g, f.pix, f.vert);
  cl_ulong ob = f.pix > 2 ? FEW_LW / (4 * g->kh * g->kw) : FEW_LW / per;
  const rumus__arg a[] = {args[0], args[1], args[2], args[3], args[4],
                          args[5], args[6], RUMUS__ARG(ob), args[6]};
  char name[32];
  snprintf(name, sizeof name, "conv_bwd_data_few%zu", g->c / g->g);
  if (f.pix > 2)
    snprintf(name + strlen(name), sizeof name - strlen(name), "%c%zu",
             f.vert ? 'v' : 'p', f.pix);
  return launch_y(ctx, op, pr, name, (items + FEW_WG - 1) / FEW_WG * FEW_WG,
                  FEW_WG, g->g, a, 9);
}

static int run_bwd_data(rumus_ctx *ctx, const char *op, const geo *g,
                        const rumus_tensor *dy, const rumus_tensor *w,
                        rumus_tensor *dx) {
  /* A 3x3 stride-1 convolution's input gradient is the 3x3 convolution
   * of dy with the rotated, transposed weights and padding 2 - pad. */
  rumus__wino_plan wp;
  const rumus__wino_geo wg = {g->n, g->oc, g->oh, g->ow, g->c, g->h, g->w,
                              2 - (long)g->ph, 2 - (long)g->pw,
                              RUMUS__WINO_BWD_DATA};
  if (wino_shape(g) && rumus__wino_plan_make(ctx, &wg, &wp))
    return rumus__wino_run(ctx, op, &wp, dy, w, NULL, dx);
  conv_prog pr = prog_for(ctx, dy->dtype, OP_BWD_DATA, g->c / g->g);
  /* The widest stride phase's pixels: the GEMM's columns. */
  const size_t cols = g->n * ((g->h + (size_t)g->sh - 1) / (size_t)g->sh) *
                      ((g->w + (size_t)g->sw - 1) / (size_t)g->sw);
  if (pr.gpu) pr.tiles = pick_tiles_bwd_data(ctx, g->c / g->g, cols, g->g);
  const cl_long16 gv = geo_arg(g);
  cl_ulong dyo = rumus__off(dy), wo = rumus__off(w), dxo = rumus__off(dx);
  cl_int rh = 0, rw = 0;
  rumus__arg args[] = {RUMUS__ARG(dy->mem), RUMUS__ARG(dyo),
                       RUMUS__ARG(w->mem),  RUMUS__ARG(wo),
                       RUMUS__ARG(dx->mem), RUMUS__ARG(dxo),
                       RUMUS__ARG(gv),      RUMUS__ARG(rh),
                       RUMUS__ARG(rw),      RUMUS__ARG(gv)};
  if (pr.gpu && use_few(ctx, g))
    return run_bwd_data_few(ctx, op, &pr, g, args);
  if (pr.gpu && g->c / g->g > 1)
    return run_bwd_data_gpu(ctx, op, &pr, g, args,
                            sizeof args / sizeof args[0], &rh, &rw);
  args[7] = RUMUS__ARG(gv); /* the other kernels have no phase arguments */
  if (pr.gpu) /* one channel per group: direct */
    return launch_flat(ctx, op, &pr, "conv_bwd_data_direct", dx->numel,
                       args, 8);
  /* CPU: lanes columns of one input row and one stride phase per
   * work-item (cl/conv.cl), so a row takes SW phases of nbw blocks. */
  const size_t sw = (size_t)g->sw, nl = (size_t)pr.lanes;
  const size_t nbw = ((g->w + sw - 1) / sw + nl - 1) / nl;
  return launch_z(ctx, op, &pr, "conv_bwd_data_cpu",
                  g->n * g->h * sw * nbw * nl, g->c / g->g, g->g, args, 8);
}

/* The weight gradient's chunks of pixels: *kc pixels each, *s of them
 * (see KC_MIN). */
static void weight_chunks(const geo *g, size_t *kc, size_t *s) {
  const size_t q = g->n * g->oh * g->ow, ocg = g->oc / g->g;
  const size_t kt = g->c / g->g * g->kh * g->kw;
  const size_t tiles = (ocg + 63) / 64 * ((kt + 63) / 64) * g->g;
  size_t want = tiles >= WG_AIM ? 1 : (WG_AIM + tiles - 1) / tiles;
  if (want > S_MAX) want = S_MAX;
  const size_t numel = g->oc * kt, cap = numel ? PART_CAP / numel : S_MAX;
  if (want > cap) want = cap > 0 ? cap : 1;
  *kc = (q + want - 1) / want;
  if (*kc < KC_MIN) *kc = KC_MIN;
  *s = q == 0 ? 1 : (q + *kc - 1) / *kc;
}

/* conv_wsum: dw = the chunks' partials added in chunk order. */
static int run_wsum(rumus_ctx *ctx, const char *op, const conv_prog *pr,
                    cl_mem part, size_t S, rumus_tensor *dw) {
  char opts[192];
  conv_options(pr, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, "conv_wsum"};
  cl_ulong total = dw->numel, s = S, dwo = rumus__off(dw);
  const rumus__arg args[] = {RUMUS__ARG(part), RUMUS__ARG(total),
                             RUMUS__ARG(s), RUMUS__ARG(dw->mem),
                             RUMUS__ARG(dwo)};
  /* WG of the options head: the kernel's required work-group size. */
  const size_t global = dw->numel,
               local = pr->gpu ? tiles_wgs(&pr->tiles) : CPU_WG;
  return rumus__launch(ctx, op, &k, 1, &global, &local, 5, args);
}

/* The depthwise weight gradient's blocks of DW_LANES lanes (B in
 * cl/conv.cl): as many as bring its work-groups to about DW_AIM, with at
 * least DW_STEPS pixels per lane, at most S_MAX blocks and PART_CAP
 * floats of partials.  Fixed by the shape alone, so the bits are too. */
static size_t dw_blocks(const geo *g) {
  const size_t np = g->n * g->oh * g->ow, taps = g->kh * g->kw;
  const size_t per = g->oc * ((taps + DW_TAPS - 1) / DW_TAPS);
  size_t b = (DW_AIM + per - 1) / per;
  const size_t steps = np / (DW_LANES * DW_STEPS);
  if (b > steps) b = steps;
  if (b > S_MAX) b = S_MAX;
  if (b > PART_CAP / (g->oc * taps)) b = PART_CAP / (g->oc * taps);
  return b ? b : 1;
}

/* One input channel per group: conv_bwd_weight_dw (GPU variant on devices
 * whose work-groups reach DW_LANES) or conv_bwd_weight_dw_cpu, the same
 * sums; a launch per DW_TAPS taps, then conv_wsum over the blocks. */
static int run_bwd_weight_dw(rumus_ctx *ctx, const char *op,
                             const conv_prog *pr, const geo *g,
                             const rumus_tensor *x, const rumus_tensor *dy,
                             rumus_tensor *dw) {
  const size_t B = dw_blocks(g), taps = g->kh * g->kw;
  cl_mem part = NULL;
  rumus__scratch_begin(ctx);
  int st = B > 1 ? rumus__scratch_slot(ctx, op, RUMUS__SCRATCH_PARTIALS,
                                       B * dw->numel * sizeof(float), &part)
                 : RUMUS_OK;
  const int wg = pr->gpu && ctx->max_wg >= DW_LANES;
  /* The CPU kernel: DW_OCB output channels per work-item, or one for
   * depthwise layers. */
  const size_t ocg = g->oc / g->g, ocb = ocg > 1 ? DW_OCB : 1;
  const char *cpu_kernel =
      ocb > 1 ? "conv_bwd_weight_dw_cpu" : "conv_bwd_weight_dw1_cpu";
  const cl_long16 gv = geo_arg(g);
  cl_ulong xo = rumus__off(x), dyo = rumus__off(dy), dwo = rumus__off(dw),
           BB = B;
  cl_int t0 = 0;
  const cl_mem pm = part ? part : dw->mem; /* B = 1: never read */
  const rumus__arg args[] = {RUMUS__ARG(x->mem),  RUMUS__ARG(xo),
                             RUMUS__ARG(dy->mem), RUMUS__ARG(dyo),
                             RUMUS__ARG(dw->mem), RUMUS__ARG(dwo),
                             RUMUS__ARG(pm),      RUMUS__ARG(gv),
                             RUMUS__ARG(BB),      RUMUS__ARG(t0),
                             RUMUS__ARG(gv)};
  for (size_t t = 0; st == RUMUS_OK && t < taps; t += DW_TAPS) {
    t0 = (cl_int)t;
    st = launch_y(ctx, op, pr, wg ? "conv_bwd_weight_dw" : cpu_kernel,
                  wg ? B * DW_LANES : B, wg ? DW_LANES : 1,
                  wg ? g->oc : g->g * ((ocg + ocb - 1) / ocb), args,
                  sizeof args / sizeof args[0]);
  }
  if (st == RUMUS_OK && B > 1) st = run_wsum(ctx, op, pr, part, B, dw);
  rumus__scratch_end(ctx);
  return st;
}

static int run_bwd_weight(rumus_ctx *ctx, const char *op, const geo *g,
                          const rumus_tensor *x, const rumus_tensor *dy,
                          rumus_tensor *dw) {
  rumus__wino_plan wp;
  const rumus__wino_geo wg = {g->n,  g->c,  g->h,  g->w,
                              g->oc, g->oh, g->ow, g->ph,
                              g->pw, RUMUS__WINO_BWD_WEIGHT};
  if (wino_shape(g) && rumus__wino_plan_make(ctx, &wg, &wp))
    return rumus__wino_run_wgrad(ctx, op, &wp, x, dy, dw);
  const conv_prog pr = prog_for(ctx, x->dtype, OP_BWD_WEIGHT, g->oc / g->g);
  if (g->c == g->g) return run_bwd_weight_dw(ctx, op, &pr, g, x, dy, dw);
  size_t kc, S;
  weight_chunks(g, &kc, &S);
  cl_mem part = NULL;
  rumus__scratch_begin(ctx);
  int st = S > 1 ? rumus__scratch_slot(ctx, op, RUMUS__SCRATCH_PARTIALS,
                                       S * dw->numel * sizeof(float), &part)
                 : RUMUS_OK;
  const cl_long16 gv = geo_arg(g);
  cl_ulong xo = rumus__off(x), dyo = rumus__off(dy), dwo = rumus__off(dw),
           KC = kc, SS = S;
  /* With one chunk the kernel stores into dw; dw stands in for part. */
  const cl_mem pm = part ? part : dw->mem;
  const rumus__arg args[] = {RUMUS__ARG(x->mem),  RUMUS__ARG(xo),
                       RUMUS__ARG(dy->mem), RUMUS__ARG(dyo),
                       RUMUS__ARG(dw->mem), RUMUS__ARG(dwo),
                       RUMUS__ARG(pm),      RUMUS__ARG(gv),
                       RUMUS__ARG(KC),      RUMUS__ARG(SS),
                       RUMUS__ARG(gv)};
  if (st == RUMUS_OK)
    st = launch_z(ctx, op, &pr,
                  pr.gpu ? "conv_bwd_weight_wg" : "conv_bwd_weight_cpu",
                  g->c / g->g * g->kh * g->kw, g->oc / g->g, g->g * S, args,
                  sizeof args / sizeof args[0]);
  if (st == RUMUS_OK && S > 1) st = run_wsum(ctx, op, &pr, part, S, dw);
  rumus__scratch_end(ctx);
  return st;
}

/* ---- Public entry points -------------------------------------------------- */

int rumus_conv2d_out_shape(rumus_ctx *ctx, const rumus_conv2d_params *p,
                           const rumus_tensor *x, const rumus_tensor *w,
                           size_t y_shape[4]) {
  static const char op[] = "rumus_conv2d_out_shape";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(y_shape == NULL, ctx, RUMUS_ENULL, "%s: y_shape is NULL", op);
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "x", x));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "w", w, x->dtype));
  geo g;
  RUMUS__FORWARD(make_geo(ctx, op, params_or_defaults(p), "x", x, "w", w, &g));
  y_shape[0] = g.n;
  y_shape[1] = g.oc;
  y_shape[2] = g.oh;
  y_shape[3] = g.ow;
  return RUMUS_OK;
}

int rumus_conv2d_fwd(rumus_ctx *ctx, const rumus_conv2d_params *p,
                     const rumus_tensor *x, const rumus_tensor *w,
                     const rumus_tensor *bias, rumus_tensor *y) {
  static const char op[] = "rumus_conv2d_fwd";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "x", x));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "w", w, x->dtype));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "y", y, x->dtype));
  if (bias)
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, "bias", bias, x->dtype));
  geo g;
  RUMUS__FORWARD(make_geo(ctx, op, params_or_defaults(p), "x", x, "w", w, &g));
  char sb[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(bias && (bias->ndim != 1 || bias->shape[0] != g.oc), ctx,
                 RUMUS_ESHAPE, "%s: bias is %s, expected [%zu]", op,
                 bias ? rumus__shape_str(bias, sb, sizeof sb) : "", g.oc);
  RUMUS__FORWARD(check_4d(ctx, op, "y", y, g.n, g.oc, g.oh, g.ow));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "y", y, "x", x, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "y", y, "w", w, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "y", y, "bias", bias, 0));
  if (y->numel == 0) return RUMUS_OK;
  return run_fwd(ctx, op, &g, x, w, bias, y);
}

int rumus_conv2d_bwd_data(rumus_ctx *ctx, const rumus_conv2d_params *p,
                          const rumus_tensor *dy, const rumus_tensor *w,
                          rumus_tensor *dx) {
  static const char op[] = "rumus_conv2d_bwd_data";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "dy", dy));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "w", w, dy->dtype));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "dx", dx, dy->dtype));
  geo g;
  RUMUS__FORWARD(
      make_geo(ctx, op, params_or_defaults(p), "dx", dx, "w", w, &g));
  RUMUS__FORWARD(check_4d(ctx, op, "dy", dy, g.n, g.oc, g.oh, g.ow));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dx", dx, "dy", dy, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dx", dx, "w", w, 0));
  if (dx->numel == 0) return RUMUS_OK;
  return run_bwd_data(ctx, op, &g, dy, w, dx);
}

int rumus_conv2d_bwd_weight(rumus_ctx *ctx, const rumus_conv2d_params *p,
                            const rumus_tensor *x, const rumus_tensor *dy,
                            rumus_tensor *dw) {
  static const char op[] = "rumus_conv2d_bwd_weight";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "x", x));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "dy", dy, x->dtype));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "dw", dw, x->dtype));
  geo g;
  RUMUS__FORWARD(
      make_geo(ctx, op, params_or_defaults(p), "x", x, "dw", dw, &g));
  RUMUS__FORWARD(check_4d(ctx, op, "dy", dy, g.n, g.oc, g.oh, g.ow));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dw", dw, "x", x, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dw", dw, "dy", dy, 0));
  if (dw->numel == 0) return RUMUS_OK;
  return run_bwd_weight(ctx, op, &g, x, dy, dw);
}

/* F32 programs of the current variant: the CPU one for each MB that
 * prog_for can choose, or the GPU ones of every op for each default tile
 * class (or the override); a program named twice is built once. */
int rumus__conv_warm(rumus_ctx *ctx) {
  static const size_t ROWS[] = {1, 4, 16, 32, 64, 128};
  char opts[192];
  cl_program prog;
  for (int op = OP_FWD; op <= OP_BWD_WEIGHT; op++)
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) {
      const conv_prog pr = prog_for(ctx, RUMUS_F32, op, ROWS[i]);
      conv_options(&pr, opts, sizeof opts);
      RUMUS__FORWARD(
          rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
    }
  /* The input gradient's wide tiles (pick_tiles_bwd_data). */
  conv_prog pr = prog_for(ctx, RUMUS_F32, OP_BWD_DATA, 1);
  for (size_t i = 0; pr.gpu && i < 2; i++) {
    pr.tiles = pick_tiles_bwd_data(ctx, i ? 128 : 64, (size_t)1 << 20, 1);
    conv_options(&pr, opts, sizeof opts);
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
  }
  return rumus__wino_warm(ctx);
}
