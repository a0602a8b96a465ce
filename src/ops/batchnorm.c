/*
 * batchnorm.c - channel bias add / gradient and batch norm 2d over NCHW
 * tensors (kernels in cl/batchnorm.cl).  x, y, dy and dx share one
 * floating storage type, the program's RUMUS_STORAGE; batch norm's
 * per-channel tensors are F32; the channel bias (and its gradient) is of
 * x's type or F32.  One program per storage type and variant holds every
 * kernel of the family, picked by name.
 *
 * Per-channel reductions run in two stages (stage 1 per range of a
 * channel, stage 2 per channel, in a fixed order: cl/batchnorm.cl).  The
 * host cuts each channel's M = N * H * W elements into ranges so that the
 * device has enough work-groups (GPU) or work-items (CPU) when C is small,
 * with a floor on the range length so that short channels stay whole.  On
 * the GPU variant each reduction is one launch (the last work-group of a
 * channel folds its ranges), and below ONE_MAX_BYTES the training forward
 * and the backward take their map into that launch; on the CPU variant a
 * reduction is two launches (stage 2 is a launch of its own), then the
 * map, unless there
 * are enough channels for a work-item per channel (bn_fwd_chan,
 * bn_bwd_chan: every pass of a channel back to back, one launch; their
 * output in streaming stores when the tensors outgrow the caches,
 * stream_out).  The
 * partial sums live in a reusable scratch slot of the context, not a
 * buffer created per call.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "batchnorm.cl";

/* Work-items per launch of a map at most, and work-groups along its
 * dimension 1 (CUDA's grid limit, which NVIDIA's OpenCL inherits): more
 * planes are launched in chunks. */
#define MAX_ITEMS ((size_t)1 << 30)
#define MAX_GROUPS_DIM1 ((size_t)65535)

/* Ranges per channel: on the CPU variant enough for BN_ITEMS_PER_CU
 * work-items per compute unit over all channels, each range at least
 * BN_MIN_CPU elements; on the GPU variant ranges of at most BN_MIN_V_GPU
 * elements per work-item of a group and chunk (BN_HOLD in
 * cl/batchnorm.cl: what bn_stats_wg holds in registers at once) times
 * the chunks a work-item takes (BN_CHUNKS), as long as the device keeps
 * BN_GROUPS_PER_CU groups per compute unit; at most BN_MAX_PARTS. */
#define BN_ITEMS_PER_CU 8
#define BN_MIN_V_GPU 16
#define BN_GROUPS_PER_CU 8
#define BN_CHUNKS_DEFAULT 4
#define BN_MIN_CPU 4096
#define BN_MAX_PARTS 1024

/* CPU variant: channels per compute unit at least for the kernels that
 * take a channel per work-item (bn_fwd_chan, bn_bwd_chan): fewer leave
 * cores idle, and the two-stage path cuts channels into ranges. */
#define BN_CHAN_PER_CU 4

/* The context's reusable scratch slot that holds the partial sums (gemm
 * takes slots 0 and 1; any slot would do, as the holder of the slots
 * runs alone, but a slot of its own keeps its size from churning). */
#define BN_SCRATCH_SLOT 2

/* The geometry of the family's program on this context's variant. */
typedef struct {
  int gpu;
  int align4;      /* RUMUS_ALIGN4: every NCHW tensor and plane 4-aligned */
  rumus_dtype storage;
  size_t wg;       /* WG: stage 1's work-group (GPU) */
  size_t vw, nv;   /* the maps' vector width and vectors per work-item */
  size_t ls;       /* the maps' local size */
  size_t fold_ls;  /* stage 2's local size */
  int trees;       /* BN_STATS_TREES: RUMUS_BATCHNORM_STATS=trees */
  int chunks;      /* BN_CHUNKS: RUMUS_BATCHNORM_CHUNKS=1..16 */
  char opts[192];  /* the program's options */
} bn_geom;

/* The one options function of the family (launches and warm-up). */
static void bn_options(const bn_geom *g, char *buf, size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, g->storage, g->wg, g->align4);
  snprintf(buf, len,
           "%s -DBN_GPU=%d -DBN_VW=%zu -DBN_NV=%zu -DBN_FOLD_LS=%zu "
           "-DBN_HOLD=%d -DBN_CHUNKS=%d%s",
           head, g->gpu, g->vw, g->nv, g->fold_ls, BN_MIN_V_GPU, g->chunks,
           g->trees ? " -DBN_STATS_TREES=1" : "");
}

/* The GPU statistics' chunks per work-item: RUMUS_BATCHNORM_CHUNKS when
 * it is 1 to 16 (sweeps), else BN_CHUNKS_DEFAULT. */
static int bn_chunks_env(void) {
  const char *v = getenv("RUMUS_BATCHNORM_CHUNKS");
  if (v != NULL) {
    char *end;
    const long k = strtol(v, &end, 10);
    if (end != v && *end == '\0' && k >= 1 && k <= 16) return (int)k;
  }
  return BN_CHUNKS_DEFAULT;
}

/* GPU: one float4 per work-item of the maps in groups of 256 (coalesced,
 * as the element-wise ops); CPU: four float8 per work-item in groups of
 * 16.  align4 (rumus__align4, GPU only): the program whose float4 accesses
 * are 16-byte loads and stores; NVIDIA turns vload4 into four 4-byte
 * ones. */
static void get_geom(const rumus_ctx *ctx, rumus_dtype storage, int align4,
                     bn_geom *g) {
  g->gpu = rumus__gpu_variant(ctx);
  g->align4 = align4;
  g->storage = storage;
  g->wg = rumus__reduce_wg(ctx);
  g->vw = g->gpu ? 4 : 8;
  g->nv = g->gpu ? 1 : 4;
  g->ls = g->gpu ? 256 : 16;
  g->fold_ls = g->gpu ? 64 : 8;
  /* The statistics of a range held in registers: per work-item, then one
   * merging tree; RUMUS_BATCHNORM_STATS=trees: the range's own two
   * passes, three trees (the earlier kernel, for A/B runs). */
  const char *v = getenv("RUMUS_BATCHNORM_STATS");
  g->trees = g->gpu && v != NULL && strcmp(v, "trees") == 0;
  g->chunks = g->gpu && !g->trees ? bn_chunks_env() : 1;
  while (g->ls > ctx->max_wg) g->ls /= 2;
  while (g->fold_ls > ctx->max_wg) g->fold_ls /= 2;
  bn_options(g, g->opts, sizeof g->opts);
}

/* An NCHW tensor's extents: N, C, S = the product of the extents after
 * C (H * W), M = N * S per channel, planes = N * C. */
typedef struct {
  size_t N, C, S, M, planes;
} bn_shape;

static bn_shape shape_of(const rumus_tensor *t) {
  bn_shape sh = {t->shape[0], t->shape[1], 1, 0, 0};
  for (int i = 2; i < t->ndim; i++) sh.S *= t->shape[i];
  sh.M = sh.N * sh.S;
  sh.planes = sh.N * sh.C;
  return sh;
}

/* The geometry for the NCHW tensors ts[0 .. nt) (NULL entries skipped) of
 * shape sh: the aligned program when the GPU variant runs and every
 * tensor and plane is 4-element aligned. */
static void geom_for(const rumus_ctx *ctx, const bn_shape *sh,
                     const rumus_tensor *const *ts, int nt, bn_geom *g) {
  get_geom(ctx, ts[0]->dtype, rumus__align4(ctx, ts, nt, sh->S), g);
}

/* ---- Argument checks --------------------------------------------------- */

/* x: floating (first == NULL) or of first's type, with ndim 4 (batch
 * norm: ndim4 set) or at least 2 (channel bias). */
static int check_nchw(rumus_ctx *ctx, const char *op, const char *name,
                      const rumus_tensor *t, const rumus_tensor *first,
                      int ndim4) {
  if (first)
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, first->dtype));
  else
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, name, t));
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(ndim4 && t->ndim != 4, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must be 4-D (N, C, H, W)", op, name,
                 rumus__shape_str(t, s, sizeof s));
  RUMUS__FAIL_IF(t->ndim < 2, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must have at least 2 dimensions (N, C, ...)", op,
                 name, rumus__shape_str(t, s, sizeof s));
  if (first) return rumus__check_same_shape(ctx, op, "x", first, name, t);
  return RUMUS_OK;
}

/* A per-channel tensor: 1-D of C elements, F32 (or of x's type too, when
 * x_type_ok: the channel bias). */
static int check_chan(rumus_ctx *ctx, const char *op, const char *name,
                      const rumus_tensor *t, const rumus_tensor *x,
                      int x_type_ok) {
  if (x_type_ok && t && t->ctx == ctx && t->dtype == x->dtype)
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, x->dtype));
  else if (x_type_ok && t && t->ctx == ctx && t->dtype != RUMUS_F32)
    return rumus__fail(ctx, RUMUS_EDTYPE, "%s: %s is %s, expected %s (the "
                       "type of x) or f32", op, name,
                       rumus_dtype_name(t->dtype), rumus_dtype_name(x->dtype));
  else
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, RUMUS_F32));
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(t->ndim != 1 || t->shape[0] != x->shape[1], ctx,
                 RUMUS_ESHAPE, "%s: %s %s must be 1-D of C = %zu elements",
                 op, name, rumus__shape_str(t, s, sizeof s), x->shape[1]);
  return RUMUS_OK;
}

/* check_chan for an optional tensor (NULL passes). */
static int check_chan_opt(rumus_ctx *ctx, const char *op, const char *name,
                          const rumus_tensor *t, const rumus_tensor *x) {
  return t ? check_chan(ctx, op, name, t, x, 0) : RUMUS_OK;
}

/* ---- Launches ------------------------------------------------------------ */

/* A tensor's buffer and element offset for a kernel argument; a NULL
 * (absent, optional) tensor passes `stand_in`'s, which the kernel does
 * not read. */
typedef struct {
  cl_mem mem;
  cl_ulong off;
} bn_arg;

static bn_arg arg_of(const rumus_tensor *t, const rumus_tensor *stand_in) {
  const rumus_tensor *u = t ? t : stand_in;
  bn_arg a = {u->mem, t ? rumus__off(t) : 0};
  return a;
}

/* The ranges of stage 1: *parts per channel of *L elements (the last
 * shorter).  It depends on the shape, variant, WG and compute units only,
 * so the summation order is the same on every run. */
static void plan_parts(const rumus_ctx *ctx, const bn_geom *g,
                       const bn_shape *sh, size_t *parts, size_t *L) {
  const size_t cu = ctx->compute_units ? ctx->compute_units : 1;
  size_t min_len = g->gpu ? g->wg * BN_MIN_V_GPU : BN_MIN_CPU;
  /* GPU: ranges of up to g->chunks chunks, fewer where the groups would
   * not fill the device (any length up to the kernel's BN_CHUNKS is read
   * once). */
  for (size_t k = g->gpu ? (size_t)g->chunks : 1; k > 1; k--) {
    const size_t len = min_len * k;
    if ((sh->M + len - 1) / len * sh->C >= BN_GROUPS_PER_CU * cu) {
      min_len = len;
      break;
    }
  }
  const size_t p_len = (sh->M + min_len - 1) / min_len;
  size_t p = (BN_ITEMS_PER_CU * cu + sh->C - 1) / sh->C;
  /* GPU: as many ranges as the length allows, so that bn_stats_wg holds
   * its range in registers (one read of x instead of two) and the device
   * gets M C / (16 WG) work-groups; the fold is a tree, so more ranges
   * cost little. */
  if (g->gpu || p > p_len) p = p_len;
  if (p > BN_MAX_PARTS) p = BN_MAX_PARTS;
  /* The GPU's last-group fold takes a ticket word per channel. */
  if (g->gpu && sh->C > RUMUS__TICKETS) p = 1;
  if (p < 1) p = 1;
  *L = (sh->M + p - 1) / p;
  /* GPU: ranges start at multiples of 4, so that with S a multiple of 4 a
   * walk's float4 stays in one plane (min_len is a multiple of 4: L stays
   * within it). */
  if (g->gpu) *L = (*L + 3) / 4 * 4;
  *parts = (sh->M + *L - 1) / *L;
}

/* GPU: the training forward and the backward run as one launch
 * (bn_fwd_one, bn_bwd_one) when each channel has a ticket word and x
 * holds less than ONE_MAX_BYTES, else as the reduction and the map, two
 * launches with the same sums.  On the H200 at 64x64x112 (411 MB) the
 * two launches took 200 us for the forward and 284 us for the backward
 * against the one launch's 218 and 298 (its maps wait for their
 * channels); at 32x128x56 (51 MB) 64 and 84 us against 67 and 82; small
 * batches pay for the second launch (about 6 us).
 * RUMUS_BATCHNORM_ONE=0 or 1 forces a choice (sweeps, tests). */
#define ONE_MAX_BYTES ((size_t)16 << 20)

static int one_launch(const bn_shape *sh, rumus_dtype storage) {
  if (sh->C > RUMUS__TICKETS) return 0;
  const char *v = getenv("RUMUS_BATCHNORM_ONE");
  if (v != NULL && strcmp(v, "0") == 0) return 0;
  if (v != NULL && strcmp(v, "1") == 0) return 1;
  return sh->N * sh->C * sh->S * rumus_dtype_size(storage) < ONE_MAX_BYTES;
}

/* Their lag (cl/batchnorm.cl): a map task comes parts + 2 CU positions
 * after the reduction task of its range, so its channel's last reduction
 * group started about two groups per compute unit earlier (a short wait
 * or none), while the range read in between (about 3 lag ranges of 16 WG
 * values) may still be in a GPU's L2 cache. */
static cl_ulong one_lag(const rumus_ctx *ctx, size_t parts) {
  const size_t cu = ctx->compute_units ? ctx->compute_units : 1;
  /* RUMUS_BATCHNORM_LAG=k (0 to 64): k groups per compute unit instead
   * of 2, for sweeps; any lag of at least parts gives the same bits. */
  size_t k = 2;
  const char *v = getenv("RUMUS_BATCHNORM_LAG");
  if (v != NULL && v[0] >= '0' && v[0] <= '9') {
    char *end;
    const long x = strtol(v, &end, 10);
    if (*end == '\0' && x <= 64) k = (size_t)x;
  }
  return parts + k * cu;
}

/* CPU: stage 1 of reduction `mode` ("sum", "dev", "bwd"): a (and b, mean)
 * per cl/batchnorm.cl into part (2 floats per channel and range), one
 * work-item per (channel, range). */
static int run_stage1(rumus_ctx *ctx, const char *op, const bn_geom *g,
                      const char *mode, bn_arg a, bn_arg b, bn_arg mean,
                      const bn_shape *sh, size_t parts, size_t L,
                      cl_mem part) {
  char kname[32];
  snprintf(kname, sizeof kname, "bn_%s_item", mode);
  const rumus__kernel_ref k = {FILE_CL, g->opts, kname};
  cl_ulong C = sh->C, S = sh->S, M = sh->M, nL = L, np = parts;
  rumus__arg args[12] = {
      RUMUS__ARG(a.mem),    RUMUS__ARG(a.off), RUMUS__ARG(b.mem),
      RUMUS__ARG(b.off),    RUMUS__ARG(mean.mem), RUMUS__ARG(mean.off),
      RUMUS__ARG(part),     RUMUS__ARG(C),     RUMUS__ARG(S),
      RUMUS__ARG(M),        RUMUS__ARG(nL),    RUMUS__ARG(np)};
  size_t global = parts * sh->C, local = rumus__row_local(ctx, global);
  return rumus__launch(ctx, op, &k, 1, &global, &local, 12, args);
}

/* GPU: a reduction and its fold in one launch, kernel `kname` with the
 * arguments BN_WG_ARGS of cl/batchnorm.cl (vec: S a multiple of 4, the
 * walks move float4s), then rest[0 .. nrest), then the status buffer (the
 * channels' tickets); a group per range, or (with_map: bn_fwd_one,
 * bn_bwd_one) two. */
static int run_fused(rumus_ctx *ctx, const char *op, const bn_geom *g,
                     const char *kname, bn_arg a, bn_arg b, bn_arg mean,
                     const bn_shape *sh, size_t parts, size_t L, cl_mem part,
                     const rumus__arg *rest, size_t nrest, int with_map) {
  const rumus__kernel_ref k = {FILE_CL, g->opts, kname};
  cl_ulong C = sh->C, S = sh->S, M = sh->M, nL = L, np = parts;
  cl_int vec = sh->S % 4 == 0;
  rumus__arg args[40] = {
      RUMUS__ARG(a.mem),    RUMUS__ARG(a.off), RUMUS__ARG(b.mem),
      RUMUS__ARG(b.off),    RUMUS__ARG(mean.mem), RUMUS__ARG(mean.off),
      RUMUS__ARG(part),     RUMUS__ARG(C),     RUMUS__ARG(S),
      RUMUS__ARG(M),        RUMUS__ARG(nL),    RUMUS__ARG(np),
      RUMUS__ARG(vec)};
  for (size_t i = 0; i < nrest; i++) args[13 + i] = rest[i];
  args[13 + nrest] = RUMUS__ARG(ctx->status);
  size_t global = (with_map ? 2 : 1) * parts * sh->C * g->wg, local = g->wg;
  return rumus__launch(ctx, op, &k, 1, &global, &local, 14 + nrest, args);
}

/* Stage 2: kernel `kname` over the channels, its arguments after (part,
 * parts, C) in rest[0 .. nrest). */
static int run_fold(rumus_ctx *ctx, const char *op, const bn_geom *g,
                    const char *kname, cl_mem part, size_t parts,
                    const bn_shape *sh, const rumus__arg *rest, size_t nrest) {
  const rumus__kernel_ref k = {FILE_CL, g->opts, kname};
  cl_ulong np = parts, C = sh->C;
  rumus__arg args[20] = {RUMUS__ARG(part), RUMUS__ARG(np), RUMUS__ARG(C)};
  for (size_t i = 0; i < nrest; i++) args[3 + i] = rest[i];
  size_t global = sh->C, local = g->fold_ls;
  return rumus__launch(ctx, op, &k, 1, &global, &local, 3 + nrest, args);
}

/* Smallest power of two >= n, at most cap. */
static size_t pow2_at_least(size_t n, size_t cap) {
  size_t p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

/* A map: kernel `kname` with its arguments pre[0 .. npre), then (C, S,
 * planes, q0, flat), over blocks of vw * nv elements of each plane, in
 * chunks of planes: 2-D (blocks, planes), or on the GPU variant with S a
 * multiple of the block 1-D over the chunk's blocks (flat, no padding
 * per plane). */
static int run_map(rumus_ctx *ctx, const char *op, const bn_geom *g,
                   const char *kname, const rumus__arg *pre, size_t npre,
                   const bn_shape *sh) {
  const rumus__kernel_ref k = {FILE_CL, g->opts, kname};
  const size_t span = g->vw * g->nv, blocks = (sh->S + span - 1) / span;
  cl_int flat = g->gpu && sh->S % span == 0;
  size_t local[2], chunk;
  if (flat) {
    local[0] = g->ls;
    local[1] = 1;
    chunk = MAX_ITEMS / blocks; /* planes a launch */
  } else {
    local[0] = pow2_at_least(blocks, g->ls);
    local[1] = g->ls / local[0];
    chunk = MAX_ITEMS / local[0];
    if (chunk > MAX_GROUPS_DIM1 * local[1])
      chunk = MAX_GROUPS_DIM1 * local[1];
  }
  cl_ulong C = sh->C, S = sh->S, planes = sh->planes;
  rumus__arg args[24];
  for (size_t i = 0; i < npre; i++) args[i] = pre[i];
  for (size_t q0 = 0; q0 < sh->planes; q0 += chunk) {
    cl_ulong nq0 = q0;
    args[npre] = RUMUS__ARG(C);
    args[npre + 1] = RUMUS__ARG(S);
    args[npre + 2] = RUMUS__ARG(planes);
    args[npre + 3] = RUMUS__ARG(nq0);
    args[npre + 4] = RUMUS__ARG(flat);
    const size_t n = sh->planes - q0 < chunk ? sh->planes - q0 : chunk;
    size_t global[2] = {flat ? n * blocks : blocks, flat ? 1 : n};
    RUMUS__FORWARD(
        rumus__launch(ctx, op, &k, 2, global, local, npre + 5, args));
  }
  return RUMUS_OK;
}

/* Scratch for stage 1's partial sums (and the backward's coefficients,
 * 2 C floats more when extra): the context's slot, taken on success until
 * part_release. */
static int part_scratch(rumus_ctx *ctx, const char *op, const bn_shape *sh,
                        size_t parts, int extra, cl_mem *out) {
  const size_t pairs = parts * sh->C + (extra ? sh->C : 0);
  RUMUS__FAIL_IF(pairs > (size_t)-1 / (2 * sizeof(float)), ctx, RUMUS_ESIZE,
                 "%s: %zu partial sums overflow size_t", op, pairs);
  rumus__scratch_begin(ctx);
  const int st = rumus__scratch_slot(ctx, op, BN_SCRATCH_SLOT,
                                     pairs * 2 * sizeof(float), out);
  if (st != RUMUS_OK) rumus__scratch_end(ctx);
  return st;
}

/* Lets the slot go (the queue runs this op's kernels before the next
 * holder's). */
static void part_release(rumus_ctx *ctx) { rumus__scratch_end(ctx); }

/* ---- Channel bias ------------------------------------------------------- */

int rumus_channel_bias_add(rumus_ctx *ctx, const rumus_tensor *x,
                           const rumus_tensor *b, rumus_tensor *y) {
  const char *op = "rumus_channel_bias_add";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_nchw(ctx, op, "x", x, NULL, 0));
  RUMUS__FORWARD(check_chan(ctx, op, "b", b, x, 1));
  RUMUS__FORWARD(check_nchw(ctx, op, "y", y, x, 0));
  const char *names[3] = {"y", "x", "b"};
  const rumus_tensor *ts[3] = {y, x, b};
  RUMUS__FORWARD(rumus__check_overlaps(ctx, op, names, ts, 3, 1, 1));
  const bn_shape sh = shape_of(x);
  if (x->numel == 0) return RUMUS_OK;
  bn_geom g;
  const rumus_tensor *big[2] = {x, y};
  geom_for(ctx, &sh, big, 2, &g);
  cl_ulong xo = rumus__off(x), yo = rumus__off(y), bo = rumus__off(b);
  const rumus__arg pre[6] = {RUMUS__ARG(x->mem), RUMUS__ARG(xo),
                             RUMUS__ARG(y->mem), RUMUS__ARG(yo),
                             RUMUS__ARG(b->mem), RUMUS__ARG(bo)};
  const int f32 = b->dtype != x->dtype;
  return run_map(ctx, op, &g, f32 ? "bn_apply_bias_f32" : "bn_apply_bias",
                 pre, 6, &sh);
}

int rumus_channel_bias_grad(rumus_ctx *ctx, const rumus_tensor *dy,
                            rumus_tensor *db) {
  const char *op = "rumus_channel_bias_grad";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_nchw(ctx, op, "dy", dy, NULL, 0));
  RUMUS__FORWARD(check_chan(ctx, op, "db", db, dy, 1));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "db", db, "dy", dy, 0));
  const bn_shape sh = shape_of(dy);
  if (sh.C == 0) return RUMUS_OK;
  if (sh.M == 0) return rumus_tensor_fill(db, 0.0f); /* empty sums */
  bn_geom g;
  geom_for(ctx, &sh, &dy, 1, &g);
  size_t parts, L;
  plan_parts(ctx, &g, &sh, &parts, &L);
  cl_mem part;
  RUMUS__FORWARD(part_scratch(ctx, op, &sh, parts, 0, &part));
  const bn_arg a = arg_of(dy, NULL);
  const int f32 = db->dtype != dy->dtype;
  cl_ulong dbo = rumus__off(db);
  const rumus__arg rest[2] = {RUMUS__ARG(db->mem), RUMUS__ARG(dbo)};
  int st;
  if (g.gpu) {
    st = run_fused(ctx, op, &g, f32 ? "bn_bias_wg_f32" : "bn_bias_wg", a, a,
                   a, &sh, parts, L, part, rest, 2, 0);
  } else {
    st = run_stage1(ctx, op, &g, "sum", a, a, a, &sh, parts, L, part);
    if (st == RUMUS_OK)
      st = run_fold(ctx, op, &g, f32 ? "bn_fold_bias_f32" : "bn_fold_bias",
                    part, parts, &sh, rest, 2);
  }
  part_release(ctx);
  return st;
}

/* ---- Batch norm ---------------------------------------------------------- */

static int check_params(rumus_ctx *ctx, const char *op,
                        const rumus_batchnorm_params *p) {
  RUMUS__FAIL_IF(!(isfinite(p->eps) && p->eps >= 0.0f), ctx, RUMUS_EINVAL,
                 "%s: eps %g must be finite and >= 0", op, (double)p->eps);
  RUMUS__FAIL_IF(!(p->momentum >= 0.0f && p->momentum <= 1.0f), ctx,
                 RUMUS_EINVAL, "%s: momentum %g must lie in [0, 1]", op,
                 (double)p->momentum);
  return RUMUS_OK;
}

/* The forward's map: y from x and per-channel mean and stat (the saved
 * invstd, or the running variance when stat_is_var). */
static int apply_fwd(rumus_ctx *ctx, const char *op, const bn_geom *g,
                     const bn_shape *sh, const rumus_tensor *x,
                     rumus_tensor *y, const rumus_tensor *mean,
                     const rumus_tensor *stat, cl_int stat_is_var, float eps,
                     const rumus_tensor *gamma, const rumus_tensor *beta) {
  cl_ulong xo = rumus__off(x), yo = rumus__off(y), mo = rumus__off(mean),
           so = rumus__off(stat);
  const bn_arg ga = arg_of(gamma, mean), be = arg_of(beta, mean);
  cl_int has_g = gamma != NULL, has_b = beta != NULL;
  const rumus__arg pre[16] = {
      RUMUS__ARG(x->mem),     RUMUS__ARG(xo),    RUMUS__ARG(y->mem),
      RUMUS__ARG(yo),         RUMUS__ARG(mean->mem), RUMUS__ARG(mo),
      RUMUS__ARG(stat->mem),  RUMUS__ARG(so),    RUMUS__ARG(stat_is_var),
      RUMUS__ARG(eps),        RUMUS__ARG(has_g), RUMUS__ARG(ga.mem),
      RUMUS__ARG(ga.off),     RUMUS__ARG(has_b), RUMUS__ARG(be.mem),
      RUMUS__ARG(be.off)};
  return run_map(ctx, op, g, "bn_apply_fwd", pre, 16, sh);
}

/* The checks shared by the forwards: x, y, gamma, beta, params. */
static int check_fwd(rumus_ctx *ctx, const char *op,
                     const rumus_batchnorm_params *p, const rumus_tensor *x,
                     const rumus_tensor *gamma, const rumus_tensor *beta,
                     const rumus_tensor *y) {
  RUMUS__FORWARD(check_params(ctx, op, p));
  RUMUS__FORWARD(check_nchw(ctx, op, "x", x, NULL, 1));
  RUMUS__FORWARD(check_nchw(ctx, op, "y", y, x, 1));
  RUMUS__FORWARD(check_chan_opt(ctx, op, "gamma", gamma, x));
  return check_chan_opt(ctx, op, "beta", beta, x);
}

/* The training forward's tensors. */
typedef struct {
  const rumus_tensor *x, *gamma, *beta;
  rumus_tensor *rm, *rv, *y, *save_mean, *save_invstd;
} bn_fwd_io;

/* GPU: the training forward in one launch (bn_fwd_one). */
static int fwd_one(rumus_ctx *ctx, const char *op, const bn_geom *g,
                   const bn_shape *sh, const rumus_batchnorm_params *p,
                   const bn_fwd_io *t) {
  size_t parts, L;
  plan_parts(ctx, g, sh, &parts, &L);
  cl_mem part;
  RUMUS__FORWARD(part_scratch(ctx, op, sh, parts, 0, &part));
  const bn_arg xa = arg_of(t->x, NULL), ma = arg_of(t->save_mean, NULL);
  const bn_arg ra = arg_of(t->rm, t->save_mean);
  const bn_arg va = arg_of(t->rv, t->save_mean);
  const bn_arg ga = arg_of(t->gamma, t->save_mean);
  const bn_arg be = arg_of(t->beta, t->save_mean);
  cl_ulong io = rumus__off(t->save_invstd), yo = rumus__off(t->y);
  cl_ulong lag = one_lag(ctx, parts);
  cl_int has_run = t->rm != NULL, has_g = t->gamma != NULL,
         has_b = t->beta != NULL;
  const rumus__arg rest[18] = {
      RUMUS__ARG(p->eps),    RUMUS__ARG(p->momentum),
      RUMUS__ARG(t->save_invstd->mem), RUMUS__ARG(io),
      RUMUS__ARG(has_run),   RUMUS__ARG(ra.mem),
      RUMUS__ARG(ra.off),    RUMUS__ARG(va.mem),
      RUMUS__ARG(va.off),    RUMUS__ARG(t->y->mem),
      RUMUS__ARG(yo),        RUMUS__ARG(has_g),
      RUMUS__ARG(ga.mem),    RUMUS__ARG(ga.off),
      RUMUS__ARG(has_b),     RUMUS__ARG(be.mem),
      RUMUS__ARG(be.off),    RUMUS__ARG(lag)};
  const int st = run_fused(ctx, op, g, "bn_fwd_one", xa, xa, ma, sh, parts, L,
                           part, rest, 18, 1);
  part_release(ctx);
  return st;
}

/* The CPU variant's one-launch training forward and backward
 * (bn_fwd_chan, bn_bwd_chan: a channel per work-item, its passes after
 * the first from the cache) when there are BN_CHAN_PER_CU channels per
 * compute unit; RUMUS_BATCHNORM_CHANNEL=1 (or 0) takes them (or the
 * two-stage path) whatever the shape: tests and sweeps. */
static int chan_path(const rumus_ctx *ctx, const bn_geom *g,
                     const bn_shape *sh) {
  if (g->gpu) return 0;
  const char *v = getenv("RUMUS_BATCHNORM_CHANNEL");
  if (v && (*v == '0' || *v == '1') && v[1] == '\0') return *v == '1';
  const size_t cu = ctx->compute_units ? ctx->compute_units : 1;
  return sh->C >= BN_CHAN_PER_CU * cu;
}

/* A launch of kernel `kname` over the channels, a work-item each (groups
 * of one: a channel is much work, and the cores take them as they come). */
static int run_chan(rumus_ctx *ctx, const char *op, const bn_geom *g,
                    const char *kname, const rumus__arg *args, size_t nargs,
                    const bn_shape *sh) {
  const rumus__kernel_ref k = {FILE_CL, g->opts, kname};
  size_t global = sh->C, local = 1;
  return rumus__launch(ctx, op, &k, 1, &global, &local, nargs, args);
}

/* The per-channel kernels' nt: streaming stores of the output (the map
 * pass then moves 2 lines per line written, not 3, and leaves the
 * channel's inputs in the core's cache) when the op's ntens tensors of
 * out's shape (x and y; x, dy and dx) are at least BN_STREAM_MIN bytes,
 * the storage is F32 or BF16 (cl/batchnorm.cl: no streaming F16 store)
 * and every plane is 8-element aligned.  Smaller ones stay in the
 * last-level cache for the next op, where streaming would send the
 * output to memory: on the 2-core EPYC guest (32 MiB of L3, shared) the
 * streamed forward was slower at 64 x 32 x 14 x 14 (3.2 MB) and faster
 * at 8 x 64 x 56 x 56 (12.8 MB), docs/PERFORMANCE.md.
 * RUMUS_BATCHNORM_STREAM=0 (or 1) turns them off (or on whatever the
 * size, alignment permitting): tests and sweeps. */
#define BN_STREAM_MIN ((size_t)8 << 20)

static cl_int stream_out(const bn_shape *sh, const rumus_tensor *out,
                         size_t ntens) {
  if (out->dtype == RUMUS_F16 || sh->S % 8 != 0 ||
      !rumus__aligned(out, 0, 8))
    return 0;
  const char *v = getenv("RUMUS_BATCHNORM_STREAM");
  if (v && (*v == '0' || *v == '1') && v[1] == '\0') return *v == '1';
  return ntens * out->numel * rumus_dtype_size(out->dtype) >= BN_STREAM_MIN;
}

/* CPU: the training forward in one launch (bn_fwd_chan). */
static int fwd_chan(rumus_ctx *ctx, const char *op, const bn_geom *g,
                    const bn_shape *sh, const rumus_batchnorm_params *p,
                    const bn_fwd_io *t) {
  const bn_arg xa = arg_of(t->x, NULL), ya = arg_of(t->y, NULL);
  const bn_arg ma = arg_of(t->save_mean, NULL);
  const bn_arg ia = arg_of(t->save_invstd, NULL);
  const bn_arg ra = arg_of(t->rm, t->save_mean);
  const bn_arg va = arg_of(t->rv, t->save_mean);
  const bn_arg ga = arg_of(t->gamma, t->save_mean);
  const bn_arg be = arg_of(t->beta, t->save_mean);
  cl_ulong C = sh->C, S = sh->S, N = sh->N;
  cl_int has_run = t->rm != NULL, has_g = t->gamma != NULL,
         has_b = t->beta != NULL, nt = stream_out(sh, t->y, 2);
  const rumus__arg args[25] = {
      RUMUS__ARG(xa.mem),  RUMUS__ARG(xa.off),  RUMUS__ARG(ya.mem),
      RUMUS__ARG(ya.off),  RUMUS__ARG(C),       RUMUS__ARG(S),
      RUMUS__ARG(N),       RUMUS__ARG(p->eps),  RUMUS__ARG(p->momentum),
      RUMUS__ARG(ma.mem),  RUMUS__ARG(ma.off),  RUMUS__ARG(ia.mem),
      RUMUS__ARG(ia.off),  RUMUS__ARG(has_run), RUMUS__ARG(ra.mem),
      RUMUS__ARG(ra.off),  RUMUS__ARG(va.mem),  RUMUS__ARG(va.off),
      RUMUS__ARG(has_g),   RUMUS__ARG(ga.mem),  RUMUS__ARG(ga.off),
      RUMUS__ARG(has_b),   RUMUS__ARG(be.mem),  RUMUS__ARG(be.off),
      RUMUS__ARG(nt)};
  return run_chan(ctx, op, g, "bn_fwd_chan", args, 25, sh);
}

/* Stage 1 and 2 of the mean, then of the variance (into save_mean,
 * save_invstd and the running statistics). */
static int train_stats(rumus_ctx *ctx, const char *op, const bn_geom *g,
                       const bn_shape *sh, const rumus_batchnorm_params *p,
                       const rumus_tensor *x, rumus_tensor *rm,
                       rumus_tensor *rv, rumus_tensor *save_mean,
                       rumus_tensor *save_invstd) {
  size_t parts, L;
  plan_parts(ctx, g, sh, &parts, &L);
  cl_mem part;
  RUMUS__FORWARD(part_scratch(ctx, op, sh, parts, 0, &part));
  const bn_arg xa = arg_of(x, NULL), ma = arg_of(save_mean, NULL);
  cl_ulong M = sh->M, io = rumus__off(save_invstd);
  if (g->gpu) {
    const bn_arg ra = arg_of(rm, save_mean), va = arg_of(rv, save_mean);
    cl_int has_run = rm != NULL;
    const rumus__arg rest[9] = {
        RUMUS__ARG(p->eps),   RUMUS__ARG(p->momentum),
        RUMUS__ARG(save_invstd->mem), RUMUS__ARG(io),
        RUMUS__ARG(has_run),  RUMUS__ARG(ra.mem),
        RUMUS__ARG(ra.off),   RUMUS__ARG(va.mem),
        RUMUS__ARG(va.off)};
    const int st = run_fused(ctx, op, g, "bn_stats_wg", xa, xa, ma, sh, parts,
                             L, part, rest, 9, 0);
    part_release(ctx);
    return st;
  }
  int st = run_stage1(ctx, op, g, "sum", xa, xa, ma, sh, parts, L, part);
  if (st == RUMUS_OK) {
    const rumus__arg rest[3] = {RUMUS__ARG(M), RUMUS__ARG(ma.mem),
                                RUMUS__ARG(ma.off)};
    st = run_fold(ctx, op, g, "bn_fold_mean", part, parts, sh, rest, 3);
  }
  if (st == RUMUS_OK)
    st = run_stage1(ctx, op, g, "dev", xa, xa, ma, sh, parts, L, part);
  if (st == RUMUS_OK) {
    const bn_arg ra = arg_of(rm, save_mean), va = arg_of(rv, save_mean);
    cl_int has_run = rm != NULL;
    const rumus__arg rest[12] = {
        RUMUS__ARG(M),       RUMUS__ARG(p->eps),  RUMUS__ARG(p->momentum),
        RUMUS__ARG(ma.mem),  RUMUS__ARG(ma.off),  RUMUS__ARG(save_invstd->mem),
        RUMUS__ARG(io),      RUMUS__ARG(has_run), RUMUS__ARG(ra.mem),
        RUMUS__ARG(ra.off),  RUMUS__ARG(va.mem),  RUMUS__ARG(va.off)};
    st = run_fold(ctx, op, g, "bn_fold_var", part, parts, sh, rest, 12);
  }
  part_release(ctx);
  return st;
}

int rumus_batchnorm2d_fwd_train(rumus_ctx *ctx,
                                const rumus_batchnorm_params *params,
                                const rumus_tensor *x,
                                const rumus_tensor *gamma,
                                const rumus_tensor *beta,
                                rumus_tensor *running_mean,
                                rumus_tensor *running_var, rumus_tensor *y,
                                rumus_tensor *save_mean,
                                rumus_tensor *save_invstd) {
  const char *op = "rumus_batchnorm2d_fwd_train";
  if (ctx == NULL) return RUMUS_ENULL;
  const rumus_batchnorm_params p =
      params ? *params : (rumus_batchnorm_params)RUMUS_BATCHNORM_DEFAULTS;
  RUMUS__FORWARD(check_fwd(ctx, op, &p, x, gamma, beta, y));
  RUMUS__FAIL_IF((running_mean == NULL) != (running_var == NULL), ctx,
                 RUMUS_EINVAL, "%s: running_mean and running_var must both "
                 "be given or both be NULL", op);
  RUMUS__FORWARD(check_chan_opt(ctx, op, "running_mean", running_mean, x));
  RUMUS__FORWARD(check_chan_opt(ctx, op, "running_var", running_var, x));
  RUMUS__FORWARD(check_chan(ctx, op, "save_mean", save_mean, x, 0));
  RUMUS__FORWARD(check_chan(ctx, op, "save_invstd", save_invstd, x, 0));
  const char *names[8] = {"y", "running_mean", "running_var", "save_mean",
                          "save_invstd", "x", "gamma", "beta"};
  const rumus_tensor *ts[8] = {y, running_mean, running_var, save_mean,
                               save_invstd, x, gamma, beta};
  RUMUS__FORWARD(rumus__check_overlaps(ctx, op, names, ts, 8, 5, 5));
  const bn_shape sh = shape_of(x);
  if (sh.C == 0) return RUMUS_OK;
  RUMUS__FAIL_IF(sh.M < 2, ctx, RUMUS_ESHAPE,
                 "%s: N * H * W = %zu; training needs more than one value "
                 "per channel", op, sh.M);
  bn_geom g;
  const rumus_tensor *big[2] = {x, y};
  geom_for(ctx, &sh, big, 2, &g);
  if (g.gpu && one_launch(&sh, x->dtype)) {
    const bn_fwd_io t = {x,  gamma, beta, running_mean, running_var,
                         y,  save_mean, save_invstd};
    return fwd_one(ctx, op, &g, &sh, &p, &t);
  }
  if (chan_path(ctx, &g, &sh)) {
    const bn_fwd_io t = {x,  gamma, beta, running_mean, running_var,
                         y,  save_mean, save_invstd};
    return fwd_chan(ctx, op, &g, &sh, &p, &t);
  }
  RUMUS__FORWARD(train_stats(ctx, op, &g, &sh, &p, x, running_mean,
                             running_var, save_mean, save_invstd));
  return apply_fwd(ctx, op, &g, &sh, x, y, save_mean, save_invstd, 0, p.eps,
                   gamma, beta);
}

int rumus_batchnorm2d_fwd_eval(rumus_ctx *ctx,
                               const rumus_batchnorm_params *params,
                               const rumus_tensor *x,
                               const rumus_tensor *gamma,
                               const rumus_tensor *beta,
                               const rumus_tensor *running_mean,
                               const rumus_tensor *running_var,
                               rumus_tensor *y) {
  const char *op = "rumus_batchnorm2d_fwd_eval";
  if (ctx == NULL) return RUMUS_ENULL;
  const rumus_batchnorm_params p =
      params ? *params : (rumus_batchnorm_params)RUMUS_BATCHNORM_DEFAULTS;
  RUMUS__FORWARD(check_fwd(ctx, op, &p, x, gamma, beta, y));
  RUMUS__FORWARD(check_chan(ctx, op, "running_mean", running_mean, x, 0));
  RUMUS__FORWARD(check_chan(ctx, op, "running_var", running_var, x, 0));
  const char *names[6] = {"y", "x", "gamma", "beta", "running_mean",
                          "running_var"};
  const rumus_tensor *ts[6] = {y, x, gamma, beta, running_mean, running_var};
  RUMUS__FORWARD(rumus__check_overlaps(ctx, op, names, ts, 6, 1, 1));
  const bn_shape sh = shape_of(x);
  if (x->numel == 0) return RUMUS_OK;
  bn_geom g;
  const rumus_tensor *big[2] = {x, y};
  geom_for(ctx, &sh, big, 2, &g);
  return apply_fwd(ctx, op, &g, &sh, x, y, running_mean, running_var, 1,
                   p.eps, gamma, beta);
}

/* CPU: the backward in one launch (bn_bwd_chan). */
static int bwd_chan(rumus_ctx *ctx, const char *op, const bn_geom *g,
                    const bn_shape *sh, const rumus_tensor *dy,
                    const rumus_tensor *x, const rumus_tensor *gamma,
                    const rumus_tensor *save_mean,
                    const rumus_tensor *save_invstd, rumus_tensor *dx,
                    rumus_tensor *dgamma, rumus_tensor *dbeta) {
  const bn_arg ya = arg_of(dy, NULL), xa = arg_of(x, NULL);
  const bn_arg da = arg_of(dx, NULL), ma = arg_of(save_mean, NULL);
  const bn_arg ia = arg_of(save_invstd, NULL);
  const bn_arg ga = arg_of(gamma, save_mean);
  const bn_arg dga = arg_of(dgamma, save_mean), dba = arg_of(dbeta, save_mean);
  cl_ulong C = sh->C, S = sh->S, N = sh->N;
  cl_int has_g = gamma != NULL, has_dg = dgamma != NULL,
         has_db = dbeta != NULL, nt = stream_out(sh, dx, 3);
  const rumus__arg args[23] = {
      RUMUS__ARG(ya.mem),  RUMUS__ARG(ya.off),  RUMUS__ARG(xa.mem),
      RUMUS__ARG(xa.off),  RUMUS__ARG(da.mem),  RUMUS__ARG(da.off),
      RUMUS__ARG(C),       RUMUS__ARG(S),       RUMUS__ARG(N),
      RUMUS__ARG(ma.mem),  RUMUS__ARG(ma.off),  RUMUS__ARG(ia.mem),
      RUMUS__ARG(ia.off),  RUMUS__ARG(has_g),   RUMUS__ARG(ga.mem),
      RUMUS__ARG(ga.off),  RUMUS__ARG(has_dg),  RUMUS__ARG(dga.mem),
      RUMUS__ARG(dga.off), RUMUS__ARG(has_db),  RUMUS__ARG(dba.mem),
      RUMUS__ARG(dba.off), RUMUS__ARG(nt)};
  return run_chan(ctx, op, g, "bn_bwd_chan", args, 23, sh);
}

/* The backward's sums, dgamma, dbeta and coefficients (after the partial
 * sums in part), then dx. */
static int run_bwd(rumus_ctx *ctx, const char *op, const bn_geom *g,
                   const bn_shape *sh, const rumus_tensor *dy,
                   const rumus_tensor *x, const rumus_tensor *gamma,
                   const rumus_tensor *save_mean,
                   const rumus_tensor *save_invstd, rumus_tensor *dx,
                   rumus_tensor *dgamma, rumus_tensor *dbeta, cl_mem part,
                   size_t parts, size_t L) {
  const bn_arg ya = arg_of(dy, NULL), xa = arg_of(x, NULL);
  const bn_arg ma = arg_of(save_mean, NULL), ia = arg_of(save_invstd, NULL);
  /* The fold writes dx's coefficients into part after the partial sums
   * (float coef_at on), where the map reads them. */
  const bn_arg dga = arg_of(dgamma, save_mean), dba = arg_of(dbeta, save_mean);
  cl_ulong M = sh->M;
  cl_int has_dg = dgamma != NULL, has_db = dbeta != NULL;
  cl_ulong coef_at = 2 * parts * sh->C;
  const bn_arg ga = arg_of(gamma, save_mean);
  cl_ulong dxo = rumus__off(dx);
  cl_int has_g = gamma != NULL;
  if (g->gpu) {
    cl_ulong lag = one_lag(ctx, parts);
    const rumus__arg rest[15] = {
        RUMUS__ARG(ia.mem),  RUMUS__ARG(ia.off),  RUMUS__ARG(coef_at),
        RUMUS__ARG(has_dg),  RUMUS__ARG(dga.mem), RUMUS__ARG(dga.off),
        RUMUS__ARG(has_db),  RUMUS__ARG(dba.mem), RUMUS__ARG(dba.off),
        RUMUS__ARG(dx->mem), RUMUS__ARG(dxo),     RUMUS__ARG(has_g),
        RUMUS__ARG(ga.mem),  RUMUS__ARG(ga.off),  RUMUS__ARG(lag)};
    if (one_launch(sh, g->storage))
      return run_fused(ctx, op, g, "bn_bwd_one", ya, xa, ma, sh, parts, L,
                       part, rest, 15, 1);
    RUMUS__FORWARD(run_fused(ctx, op, g, "bn_bwd_wg", ya, xa, ma, sh, parts,
                             L, part, rest, 9, 0));
  } else {
    const rumus__arg rest[11] = {
        RUMUS__ARG(M),       RUMUS__ARG(ia.mem),  RUMUS__ARG(ia.off),
        RUMUS__ARG(part),    RUMUS__ARG(coef_at), RUMUS__ARG(has_dg),
        RUMUS__ARG(dga.mem), RUMUS__ARG(dga.off), RUMUS__ARG(has_db),
        RUMUS__ARG(dba.mem), RUMUS__ARG(dba.off)};
    RUMUS__FORWARD(run_stage1(ctx, op, g, "bwd", ya, xa, ma, sh, parts, L,
                              part));
    RUMUS__FORWARD(run_fold(ctx, op, g, "bn_fold_bwd", part, parts, sh, rest,
                            11));
  }
  const rumus__arg pre[16] = {
      RUMUS__ARG(xa.mem),  RUMUS__ARG(xa.off), RUMUS__ARG(ya.mem),
      RUMUS__ARG(ya.off),  RUMUS__ARG(dx->mem), RUMUS__ARG(dxo),
      RUMUS__ARG(ma.mem),  RUMUS__ARG(ma.off), RUMUS__ARG(ia.mem),
      RUMUS__ARG(ia.off),  RUMUS__ARG(has_g),  RUMUS__ARG(ga.mem),
      RUMUS__ARG(ga.off),  RUMUS__ARG(part),   RUMUS__ARG(coef_at)};
  return run_map(ctx, op, g, "bn_apply_bwd", pre, 15, sh);
}

int rumus_batchnorm2d_bwd(rumus_ctx *ctx, const rumus_tensor *dy,
                          const rumus_tensor *x, const rumus_tensor *gamma,
                          const rumus_tensor *save_mean,
                          const rumus_tensor *save_invstd, rumus_tensor *dx,
                          rumus_tensor *dgamma, rumus_tensor *dbeta) {
  const char *op = "rumus_batchnorm2d_bwd";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_nchw(ctx, op, "x", x, NULL, 1));
  RUMUS__FORWARD(check_nchw(ctx, op, "dy", dy, x, 1));
  RUMUS__FORWARD(check_nchw(ctx, op, "dx", dx, x, 1));
  RUMUS__FORWARD(check_chan_opt(ctx, op, "gamma", gamma, x));
  RUMUS__FORWARD(check_chan(ctx, op, "save_mean", save_mean, x, 0));
  RUMUS__FORWARD(check_chan(ctx, op, "save_invstd", save_invstd, x, 0));
  RUMUS__FORWARD(check_chan_opt(ctx, op, "dgamma", dgamma, x));
  RUMUS__FORWARD(check_chan_opt(ctx, op, "dbeta", dbeta, x));
  const char *names[8] = {"dx", "dgamma", "dbeta", "dy", "x", "gamma",
                          "save_mean", "save_invstd"};
  const rumus_tensor *ts[8] = {dx, dgamma, dbeta, dy, x, gamma, save_mean,
                               save_invstd};
  RUMUS__FORWARD(rumus__check_overlaps(ctx, op, names, ts, 8, 3, 3));
  const bn_shape sh = shape_of(x);
  if (sh.C == 0) return RUMUS_OK;
  if (sh.M == 0) { /* empty sums; dx is empty */
    if (dgamma) RUMUS__FORWARD(rumus_tensor_fill(dgamma, 0.0f));
    return dbeta ? rumus_tensor_fill(dbeta, 0.0f) : RUMUS_OK;
  }
  bn_geom g;
  const rumus_tensor *big[3] = {x, dy, dx};
  geom_for(ctx, &sh, big, 3, &g);
  if (chan_path(ctx, &g, &sh))
    return bwd_chan(ctx, op, &g, &sh, dy, x, gamma, save_mean, save_invstd,
                    dx, dgamma, dbeta);
  size_t parts, L;
  plan_parts(ctx, &g, &sh, &parts, &L);
  cl_mem part;
  RUMUS__FORWARD(part_scratch(ctx, op, &sh, parts, 1, &part));
  const int st = run_bwd(ctx, op, &g, &sh, dy, x, gamma, save_mean,
                         save_invstd, dx, dgamma, dbeta, part, parts, L);
  part_release(ctx);
  return st;
}

/* The F32 programs of the current variant, and on the GPU variant both
 * alignments (one program holds every kernel of the family; 16-bit
 * programs are built by their first call). */
int rumus__batchnorm_warm(rumus_ctx *ctx) {
  const int aligns = rumus__gpu_variant(ctx) ? 2 : 1;
  for (int align4 = 0; align4 < aligns; align4++) {
    bn_geom g;
    cl_program p;
    get_geom(ctx, RUMUS_F32, align4, &g);
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, g.opts, &p));
  }
  return RUMUS_OK;
}
