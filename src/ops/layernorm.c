/*
 * layernorm.c - layer norm and RMS norm over the last dimension, forward
 * and backward (kernels in cl/layernorm.cl).  x, y, dy and dx share one
 * floating storage type (the program's RUMUS_STORAGE); gamma, beta and
 * their gradients share one type, F32 or x's (the program's LN_PARAM);
 * the per-row statistics are F32.
 *
 * The row kernels are planned by rumus__row_plan_make, as softmax's are;
 * the gradients of gamma and beta are column sums over the rows by the
 * same program: stage 1 per block of rows (fused with dx on the GPU
 * variant: a work-group per block for rows of 129 to 8 x its local size
 * (_blk) and for longer ones up to 16 x (_wide), the _fused kernel's
 * teams on shorter register rows), stage 2 per column (by groups of
 * blocks first when there are many), the blocks fixed by the shape
 * alone.  The GPU variant's forward has a _wide kernel too, for rows the
 * register rungs do not hold.  On the CPU variant stage 1 is fused with dx
 * as well (_rowp: a work-item per block).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "layernorm.cl";

/* Rows per stage-1 block of the gamma / beta gradients at least, blocks at
 * most, and the most partial floats per gradient (nb * cols): a few
 * hundred blocks (the GPU's block backward runs a work-group per block:
 * 512 is about four per compute unit of the H200), so the partials are a
 * small fraction of the traffic (4 MiB at 65536 x 1024 against 768 MiB of
 * x, dy and dx); blocks of 8 rows up to 4096 rows, as before (blocks of
 * 16 made the CPU variant's backward at 4096 x 768 slower in each of
 * three alternated runs on PoCL, 3.4-3.8 ms against 1.7-3.1);
 * scratch of at most 2^21 floats per gradient.  Stage 2 adds the blocks
 * in groups of LN_FOLD_G (cl/layernorm.cl's), then the groups. */
#define LN_MIN_RB 8
#define LN_MAX_NB 512
#define LN_MAX_PART ((size_t)1 << 21)
#define LN_FOLD_G 64
#define LN_FOLD_H 8 /* groups of stage 2's one-launch kernel at most */
#define LN_FOLD_S 128 /* columns per work-item of the CPU variant's stage 2 */
/* Rows under LN_BLK_MIN_COLS, which the _fused kernel's teams of 8
 * work-items take on the GPU: at most 8192 blocks, so that the teams stay
 * many (as before the _blk kernel). */
#define LN_SHORT_MAX_NB 8192

/* The GPU variant's block backward (*_bwd_blk): float4 groups per
 * work-item per row (cl/layernorm.cl's LN_BV), the shortest rows it takes
 * (shorter ones would leave most of a 32-wide group idle: the _fused
 * kernel's small teams take them) and its largest local size. */
#define LN_BV 2
#define LN_BLK_MIN_COLS 129
#define LN_BLK_MAX_LS 1024

/* The GPU variant's wide kernels (*_fwd_wide, *_bwd_wide), for rows the
 * _wgc rungs and the _blk kernel do not hold (up to 4 ls v elements):
 * their local size ls and float4 groups per work-item v, fixed in the
 * program (cl/layernorm.cl's LN_WLS, LN_WV; LN_WBLS, LN_WBV and the
 * backward's loads at once LN_WBB), by default 512 x 8 (rows up to
 * 16384; a 1024 x 8 rung, one such group per compute unit, ran softmax
 * at 32000 columns 1.6x slower than its strided kernel: registry.c).
 * 512 rather than 1024 work-items with half the float4 each: clang's
 * NVPTX code for the forward needs about 64 registers at 512 x 8, so
 * that two rows may share a compute unit, and the backward's 16 float4
 * of partials fit a 512-wide group's 128 registers, where 1024
 * work-items have 64 each.  RUMUS_LN_WIDE=LSxV and RUMUS_LN_WIDE_BWD=
 * LSxVxB[xR] override them (powers of two, ls 32 to 1024, v 2 to 32, b
 * from 2 dividing v, as 16-bit rows move in float8, two float4; R: the
 * backward's rows per step, LN_WBR, 1 or 2) for sweeps.  ls is halved to
 * the device's largest work-group, as a program of a required size
 * beyond it might not build. */
typedef struct {
  size_t ls, v, b, r;
} ln_wide_shape;

static ln_wide_shape wide_shape(const rumus_ctx *ctx, const char *env,
                                size_t ls, size_t v, size_t b) {
  ln_wide_shape w = {ls, v, b, 1};
  long f[4] = {0, 0, 0, 0};
  const int n = rumus__env_tiling(env, f, 2, 4);
  while (w.ls > 32 && w.ls > ctx->max_wg) w.ls /= 2;
  if (n == 0) return w;
  const size_t els = (size_t)f[0], ev = (size_t)f[1];
  const size_t eb = n >= 3 ? (size_t)f[2] : (ev < b ? ev : b);
  const int pow2 = (els & (els - 1)) == 0 && (ev & (ev - 1)) == 0 &&
                   (eb & (eb - 1)) == 0;
  const size_t er = n == 4 ? (size_t)f[3] : 1;
  /* A B below 2 only where given: the forward's b (1) is not used. */
  if (!pow2 || els < 32 || els > ctx->max_wg || ev < 2 || ev > 32 ||
      (n >= 3 && eb < 2) || eb > ev || er > 2)
    return w;
  w.ls = els;
  w.v = ev;
  w.b = eb;
  w.r = er;
  return w;
}
static ln_wide_shape wide_fwd(const rumus_ctx *ctx) {
  return wide_shape(ctx, "RUMUS_LN_WIDE", 512, 8, 1);
}
static ln_wide_shape wide_bwd(const rumus_ctx *ctx) {
  return wide_shape(ctx, "RUMUS_LN_WIDE_BWD", 512, 8, 2);
}

/* The block backward's rows at once (cl/layernorm.cl's LN_BR) and its
 * loops unrolled or left to the compiler (LN_BLK_UNROLL): by default 4
 * rows unrolled.  Under NVIDIA's 128-register cap (ln_options) that ran
 * the H200's backward at 72-84% of copy over rows of 1024-4096 where 2
 * rows ran at 51-69% (bench/results/h200/session-0116/d); without the
 * cap clang's NVPTX code wanted 135-164 registers for it.  4 rows rolled
 * keep d and xh on the stack there.  BF16 rows are held as stored
 * (LN_BLK_RAW): NVIDIA's compiler put each row's BF16 loads behind a
 * branch of their own, widened before the next row's loads, where it
 * issued F16's 16 loads at once (session-1541's SASS); holding the bits
 * and widening at each use lets them issue together.  RUMUS_LN_BLK=
 * R[u][s] (R 2 or 4, u: unrolled, s: 16-bit rows held as stored) for
 * sweeps: a setting without s holds floats for every type. */
typedef struct {
  int rows, unroll, raw;
} ln_blk_shape;

static ln_blk_shape blk_shape(rumus_dtype storage) {
  ln_blk_shape b = {4, 1, storage == RUMUS_BF16};
  const char *v = getenv("RUMUS_LN_BLK");
  if (v == NULL || (v[0] != '2' && v[0] != '4')) return b;
  const char *f = v + 1;
  const int unroll = *f == 'u';
  f += unroll;
  const int raw = *f == 's';
  f += raw;
  if (*f != '\0') return b;
  b.rows = v[0] - '0';
  b.unroll = unroll;
  b.raw = raw;
  return b;
}

/* RUMUS_LN_FWD_ONE=1: the layer norm's wide forward (rows of 8193 to
 * 16384 on GPUs) takes a row's mean and variance in one two-level sum
 * (each work-item's moments from its registers, Chan's merges in a fixed
 * order: two barriers where the mean and then the sums of d = x - mean
 * take four).  Off by default until measured on the H200; other bits
 * than the default's (the same to within the reference's tolerances). */
static int fwd_one(void) {
  const char *v = getenv("RUMUS_LN_FWD_ONE");
  return v != NULL && strcmp(v, "1") == 0;
}

/* The local size of the stage kernels (LN_FOLD_LS): a column per
 * work-item, 32 per group on GPUs (coalesced), 8 on CPUs. */
static size_t fold_ls(const rumus_ctx *ctx, const rumus__row_plan *plan) {
  /* 32 on GPUs: a warp's 128 contiguous bytes, and twice the groups of
   * stage 2 (16 groups of 512 at 1024 columns left most of the H200
   * idle). */
  size_t ls = plan->kind == RUMUS__ROWS_ITEM ? 8 : 32;
  while (ls > ctx->max_wg) ls /= 2;
  return ls;
}

/* The options of the program that runs `plan`, gamma's type `param`. */
static void ln_options(const rumus_ctx *ctx, const rumus__row_plan *plan,
                       rumus_dtype param, char *buf, size_t len) {
  char head[96], v4[32] = "", gpu[160] = "", nv[40] = "";
  rumus__options_head(head, sizeof head, plan->storage, plan->wg,
                      plan->align4);
  if (plan->kind == RUMUS__ROWS_REGS)
    snprintf(v4, sizeof v4, " -DCACHE_V4=%d", plan->cache_v4);
  if (plan->kind != RUMUS__ROWS_ITEM) {
    const ln_wide_shape f = wide_fwd(ctx), b = wide_bwd(ctx);
    const ln_blk_shape k = blk_shape(plan->storage);
    snprintf(gpu, sizeof gpu,
             " -DLN_WLS=%zu -DLN_WV=%zu -DLN_WBLS=%zu -DLN_WBV=%zu"
             " -DLN_WBB=%zu -DLN_WBR=%zu -DLN_BR=%d -DLN_BLK_UNROLL=%d%s%s",
             f.ls, f.v, b.ls, b.v, b.b, b.r, k.rows, k.unroll,
             k.raw ? " -DLN_BLK_RAW=1" : "",
             fwd_one() ? " -DLN_FWD_ONE=1" : "");
    /* 128 registers on NVIDIA: the _blk kernel then runs at 512 work-items
     * (rows up to 4096) by rumus__kernel_wg_limit()'s count, where the
     * driver's own figure (256) kept rows past 2048 off it. */
    rumus__nv_maxrreg(ctx, "RUMUS_LN_MAXRREG", 128, nv, sizeof nv);
  }
  /* RUMUS_ALIGN8 only where set: F32 programs keep the options that
   * rumus_cache_fill builds. */
  snprintf(buf, len, "%s%s%s -DLN_PARAM=%s -DLN_FOLD_LS=%zu%s%s", head, v4,
           gpu, rumus__storage_tag(param), fold_ls(ctx, plan), nv,
           plan->align8 ? " -DRUMUS_ALIGN8=1" : "");
}

/* Two row families, by gamma's type: F32, or x's storage type. */
static void options_f32(const rumus_ctx *ctx, const rumus__row_plan *plan,
                        char *buf, size_t len) {
  ln_options(ctx, plan, RUMUS_F32, buf, len);
}
static void options_xt(const rumus_ctx *ctx, const rumus__row_plan *plan,
                       char *buf, size_t len) {
  ln_options(ctx, plan, plan->storage, buf, len);
}
static const rumus__row_family LN_F32 = {FILE_CL, options_f32,
                                         RUMUS__WIDE_NEVER};
static const rumus__row_family LN_XT = {FILE_CL, options_xt,
                                        RUMUS__WIDE_NEVER};

/* A tensor's buffer and element offset as kernel arguments; a NULL
 * (absent) tensor passes `stand_in`'s buffer, which the kernel does not
 * touch. */
typedef struct {
  cl_mem mem;
  cl_ulong off;
} ln_arg;

static ln_arg arg_of(const rumus_tensor *t, const rumus_tensor *stand_in) {
  ln_arg a = {t ? t->mem : stand_in->mem, t ? rumus__off(t) : 0};
  return a;
}

/* ---- Argument checks --------------------------------------------------- */

static int check_params(rumus_ctx *ctx, const char *op,
                        const rumus_layernorm_params *p) {
  RUMUS__FAIL_IF(!(isfinite(p->eps) && p->eps >= 0.0f), ctx, RUMUS_EINVAL,
                 "%s: eps %g must be finite and >= 0", op, (double)p->eps);
  return RUMUS_OK;
}

/* A row tensor: floating with ndim >= 1 (first == NULL), or of first's type
 * and shape. */
static int check_rows(rumus_ctx *ctx, const char *op, const char *name,
                      const rumus_tensor *t, const rumus_tensor *first) {
  if (first) {
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, first->dtype));
    return rumus__check_same_shape(ctx, op, "x", first, name, t);
  }
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, name, t));
  RUMUS__FAIL_IF(t->ndim < 1, ctx, RUMUS_ESHAPE,
                 "%s: %s must have at least one dimension", op, name);
  return RUMUS_OK;
}

/* The parameter tensors ps[0 .. n) (NULL entries absent): 1-D of C = x's
 * last extent, each F32 or x's type, all of one type (*param; F32 if all
 * are absent). */
static int check_param_set(rumus_ctx *ctx, const char *op,
                           const char *const *names,
                           const rumus_tensor *const *ps, int n,
                           const rumus_tensor *x, rumus_dtype *param) {
  const rumus_tensor *first = NULL;
  *param = RUMUS_F32;
  const size_t C = x->shape[x->ndim - 1];
  for (int i = 0; i < n; i++) {
    const rumus_tensor *t = ps[i];
    if (t == NULL) continue;
    if (t->ctx == ctx && t->dtype != RUMUS_F32 && t->dtype != x->dtype)
      return rumus__fail(ctx, RUMUS_EDTYPE, "%s: %s is %s, expected f32 or "
                         "%s (the type of x)", op, names[i],
                         rumus_dtype_name(t->dtype),
                         rumus_dtype_name(x->dtype));
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, names[i], t,
                                       first ? first->dtype : t->dtype));
    char s[RUMUS__SHAPE_BUF];
    RUMUS__FAIL_IF(t->ndim != 1 || t->shape[0] != C, ctx, RUMUS_ESHAPE,
                   "%s: %s %s must be 1-D of C = %zu elements (x's last "
                   "extent)", op, names[i], rumus__shape_str(t, s, sizeof s),
                   C);
    if (first == NULL) {
      first = t;
      *param = t->dtype;
    }
  }
  return RUMUS_OK;
}

/* A per-row statistic (NULL passes when optional): F32 of rows elements. */
static int check_stat(rumus_ctx *ctx, const char *op, const char *name,
                      const rumus_tensor *t, size_t rows, int optional) {
  if (t == NULL && optional) return RUMUS_OK;
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, RUMUS_F32));
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(t->numel != rows, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must hold one value per row (%zu)", op, name,
                 rumus__shape_str(t, s, sizeof s), rows);
  return RUMUS_OK;
}

/* ---- Launches ------------------------------------------------------------ */

/* One call's tensors in kernel order, the row tensors first (nrow of
 * them: their offsets move by rows * cols per chunk), then the per-row
 * statistics (nstat: by rows), then the parameters (fixed). */
typedef struct {
  ln_arg t[6];
  int nrow, nstat, nparam;
} ln_tensors;

/* A kernel of one work-group of ls per row (the wide forward) or per
 * block of rows (the _blk and _wide backwards) in place of the plan's; ls
 * 0: none.  lfl: its floats of local memory per work-item (an argument
 * of ls + 32 entries, _blk's), 0 for the wide kernels (static arrays). */
typedef struct {
  char kernel[64];
  size_t ls, lfl;
} ln_group;

/* Launches `base`_row, _wgc or _wg (or wide->kernel when wide->ls) over
 * rows x cols in chunks of rows; order[] gives the kernel's argument
 * order of ts's entries (row, stat or param by index into ts->t), then
 * `tail` (flags, eps) before rows and cols.  ri: rows per work-item of
 * a _row kernel that takes them as its last argument (the forward's),
 * else 0. */
static int run_rows(rumus_ctx *ctx, const char *op,
                    const rumus__row_plan *plan, const ln_tensors *ts,
                    const int *order, const rumus__arg *tail, size_t ntail,
                    size_t rows, size_t cols, const ln_group *wide,
                    size_t ri) {
  const int w = wide && wide->ls;
  const rumus__kernel_ref k = {FILE_CL, plan->options,
                               w ? wide->kernel : plan->kernel};
  const size_t chunk = plan->kind == RUMUS__ROWS_ITEM ? ((size_t)1 << 30)
                                                     : RUMUS__MAX_WG_ROWS;
  const int nt = ts->nrow + ts->nstat + ts->nparam;
  for (size_t r0 = 0; r0 < rows; r0 += chunk) {
    cl_ulong nrows = rows - r0 < chunk ? rows - r0 : chunk, ncols = cols;
    cl_ulong offs[6];
    rumus__arg args[24];
    size_t na = 0;
    for (int i = 0; i < nt; i++) {
      const int t = order[i];
      offs[t] = ts->t[t].off;
      if (t < ts->nrow) offs[t] += (cl_ulong)(r0 * cols);
      else if (t < ts->nrow + ts->nstat) offs[t] += (cl_ulong)r0;
      args[na++] = RUMUS__ARG(ts->t[t].mem);
      args[na++] = RUMUS__ARG(offs[t]);
    }
    for (size_t i = 0; i < ntail; i++) args[na++] = tail[i];
    args[na++] = RUMUS__ARG(nrows);
    args[na++] = RUMUS__ARG(ncols);
    if (!w && plan->kind == RUMUS__ROWS_REGS)
      args[na++] = RUMUS__ARG(plan->rt); /* the wide kernels: no more */
    const cl_ulong nri = ri;
    const int item = plan->kind == RUMUS__ROWS_ITEM && ri;
    if (item) args[na++] = RUMUS__ARG(nri);
    size_t local = w ? wide->ls : 0;
    const size_t global =
        w ? (size_t)nrows * local
          : rumus__row_plan_global(ctx, plan, (size_t)nrows, item ? ri : 1,
                                   &local);
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local, na, args));
  }
  return RUMUS_OK;
}

/* The plan of kernel `base` for x's storage, gamma's type and the tensors
 * whose alignment the GPU variant's vector accesses need (float4, and
 * float8 of 16-bit rows: RUMUS_ALIGN8). */
static int make_plan(rumus_ctx *ctx, const char *op, const char *base,
                     const rumus_tensor *x, rumus_dtype param,
                     const rumus_tensor *const *al, int nal, size_t cols,
                     rumus__row_plan *plan) {
  const rumus__row_family *fam =
      param == RUMUS_F32 ? &LN_F32 : &LN_XT;
  return rumus__row_plan_make(ctx, op, fam, base, x->dtype,
                              rumus__row_align(ctx, al, nal, cols), cols,
                              plan);
}

/* *fits: 1 when the device runs kernel `name` of plan's program at ls
 * work-items (rumus__kernel_wg_limit: its registers, not the driver's
 * figure). */
static int kernel_fits(rumus_ctx *ctx, const char *op,
                       const rumus__row_plan *plan, const char *name,
                       size_t ls, int *fits) {
  const rumus__kernel_ref kr = {FILE_CL, plan->options, name};
  size_t limit;
  RUMUS__FORWARD(rumus__kernel_wg_limit(ctx, op, &kr, &limit));
  *fits = limit >= ls;
  return RUMUS_OK;
}

/* A work-group kernel of the GPU variant ("`base`_`suffix`": _blk; lfl
 * floats of local memory per work-item), its local size k->ls
 * for rows of cols: the fewest work-items (a power of two from 32, at
 * most max_ls) that hold a row in nv float4 each, or 0 where it does not
 * run: the CPU variant, a user's work-group size (the _wgc / _wg kernels
 * keep their orders there), rows too long, or a size the device does not
 * run the kernel at. */
static int group_local(rumus_ctx *ctx, const char *op,
                       const rumus__row_plan *plan, const char *base,
                       const char *suffix, size_t nv, size_t lfl,
                       size_t max_ls, size_t cols, ln_group *k) {
  k->ls = 0;
  k->lfl = lfl;
  if (plan->kind == RUMUS__ROWS_ITEM || ctx->opt_wg) return RUMUS_OK;
  size_t l = 32;
  while (l * 4 * nv < cols) l *= 2;
  if (l > max_ls || l > ctx->max_wg) return RUMUS_OK;
  snprintf(k->kernel, sizeof k->kernel, "%s_%s", base, suffix);
  int fits;
  RUMUS__FORWARD(kernel_fits(ctx, op, plan, k->kernel, l, &fits));
  if (fits) k->ls = l;
  return RUMUS_OK;
}

/* The wide kernel "`base`_wide" of shape w (GPU variant) for rows of
 * cols: k->ls = w->ls where the row fits (cols <= 4 ls v), the device
 * runs the kernel at ls and the user set no work-group size; else 0. */
static int wide_local(rumus_ctx *ctx, const char *op,
                      const rumus__row_plan *plan, const char *base,
                      const ln_wide_shape *w, size_t cols, ln_group *k) {
  k->ls = 0;
  k->lfl = 0;
  if (plan->kind == RUMUS__ROWS_ITEM || ctx->opt_wg) return RUMUS_OK;
  if (cols > 4 * w->ls * w->v || w->ls > ctx->max_wg) return RUMUS_OK;
  snprintf(k->kernel, sizeof k->kernel, "%s_wide", base);
  int fits;
  RUMUS__FORWARD(kernel_fits(ctx, op, plan, k->kernel, w->ls, &fits));
  if (fits) k->ls = w->ls;
  return RUMUS_OK;
}

/* ---- Forward --------------------------------------------------------------- */

/* Both forwards: beta and mean NULL for RMS norm. */
/* Rows per work-item of the CPU variant's forward (_row kernels): a row's
 * sum is taken in the walk that writes the row before, so a work-item
 * needs several; LN_FWD_ROWS, or RUMUS_LN_FWDR (1 to 64: measurements). */
#define LN_FWD_ROWS 8
static size_t fwd_rows(void) {
  const char *v = getenv("RUMUS_LN_FWDR");
  const int n = v ? atoi(v) : 0;
  return n >= 1 && n <= 64 ? (size_t)n : LN_FWD_ROWS;
}

static int forward(rumus_ctx *ctx, const char *op, const char *base,
                   const rumus_layernorm_params *params,
                   const rumus_tensor *x, const rumus_tensor *gamma,
                   const rumus_tensor *beta, rumus_tensor *y,
                   rumus_tensor *mean, rumus_tensor *rstd, int rms) {
  if (ctx == NULL) return RUMUS_ENULL;
  const rumus_layernorm_params p =
      params ? *params : (rumus_layernorm_params)RUMUS_LAYERNORM_DEFAULTS;
  RUMUS__FORWARD(check_params(ctx, op, &p));
  RUMUS__FORWARD(check_rows(ctx, op, "x", x, NULL));
  RUMUS__FORWARD(check_rows(ctx, op, "y", y, x));
  const char *pn[2] = {"gamma", "beta"};
  const rumus_tensor *ps[2] = {gamma, beta};
  rumus_dtype param;
  RUMUS__FORWARD(check_param_set(ctx, op, pn, ps, rms ? 1 : 2, x, &param));
  size_t rows, cols;
  rumus__rows_cols(x, &rows, &cols);
  const char *sn = rms ? "rrms" : "rstd";
  RUMUS__FAIL_IF(!rms && (mean == NULL) != (rstd == NULL), ctx, RUMUS_EINVAL,
                 "%s: mean and rstd must both be given or both be NULL", op);
  RUMUS__FORWARD(check_stat(ctx, op, "mean", mean, rows, 1));
  RUMUS__FORWARD(check_stat(ctx, op, sn, rstd, rows, 1));
  const char *names[6] = {"y", "mean", sn, "x", "gamma", "beta"};
  const rumus_tensor *all[6] = {y, mean, rstd, x, gamma, beta};
  RUMUS__FORWARD(rumus__check_overlaps(ctx, op, names, all, 6, 3, 3));
  if (rows == 0 || cols == 0) return RUMUS_OK;
  const rumus_tensor *al[4] = {x, y, gamma, beta};
  rumus__row_plan plan;
  RUMUS__FORWARD(make_plan(ctx, op, base, x, param, al, 4, cols, &plan));
  /* Kernel order: x, y, gamma, beta, mean, rstd. */
  const ln_tensors ts = {{arg_of(x, x), arg_of(y, y), arg_of(mean, rstd ? rstd : x),
                          arg_of(rstd, x), arg_of(gamma, x), arg_of(beta, x)},
                         2, 2, 2};
  const int order[6] = {0, 1, 4, 5, 2, 3};
  cl_int has_g = gamma != NULL, has_b = beta != NULL, has_s = rstd != NULL;
  const rumus__arg tail[4] = {RUMUS__ARG(has_g), RUMUS__ARG(has_b),
                              RUMUS__ARG(has_s), RUMUS__ARG(p.eps)};
  ln_group wide;
  wide.ls = 0; /* rows the _wgc rungs do not hold: the wide kernel */
  if (plan.kind == RUMUS__ROWS_GROUP) {
    const ln_wide_shape w = wide_fwd(ctx);
    RUMUS__FORWARD(wide_local(ctx, op, &plan, base, &w, cols, &wide));
  }
  return run_rows(ctx, op, &plan, &ts, order, tail, 4, rows, cols, &wide,
                  fwd_rows());
}

int rumus_layernorm_fwd(rumus_ctx *ctx, const rumus_layernorm_params *params,
                        const rumus_tensor *x, const rumus_tensor *gamma,
                        const rumus_tensor *beta, rumus_tensor *y,
                        rumus_tensor *mean, rumus_tensor *rstd) {
  return forward(ctx, "rumus_layernorm_fwd", "layernorm_fwd", params, x,
                 gamma, beta, y, mean, rstd, 0);
}

int rumus_rmsnorm_fwd(rumus_ctx *ctx, const rumus_layernorm_params *params,
                      const rumus_tensor *x, const rumus_tensor *gamma,
                      rumus_tensor *y, rumus_tensor *rrms) {
  return forward(ctx, "rumus_rmsnorm_fwd", "rmsnorm_fwd", params, x, gamma,
                 NULL, y, NULL, rrms, 1);
}

/* ---- Backward -------------------------------------------------------------- */

/* Stage 1's blocks: nb blocks of rb rows (the last shorter), from the
 * shape alone, so the summation order is the same on every device.  Rows
 * shorter than LN_BLK_MIN_COLS keep the many blocks the _fused kernel's
 * small teams need (LN_SHORT_MAX_NB). */
static void plan_blocks(size_t rows, size_t cols, size_t *rb, size_t *nb) {
  size_t n = (rows + LN_MIN_RB - 1) / LN_MIN_RB;
  const size_t max_nb =
      cols < LN_BLK_MIN_COLS ? LN_SHORT_MAX_NB : LN_MAX_NB;
  if (n > max_nb) n = max_nb;
  if (n > LN_MAX_PART / cols) n = LN_MAX_PART / cols;
  if (n < 1) n = 1;
  *rb = (rows + n - 1) / n;
  *nb = (rows + *rb - 1) / *rb;
}

/* *one when stage 2 of nb blocks runs as ln_dparam_fold_one: more than
 * LN_FOLD_G blocks, at most LN_FOLD_H groups, a group size the device
 * runs the kernel at. */
static int fold_one(rumus_ctx *ctx, const char *op,
                    const rumus__row_plan *plan, size_t nb, int *one) {
  *one = 0;
  const size_t wg = fold_ls(ctx, plan) * LN_FOLD_H;
  if (nb <= LN_FOLD_G || nb > LN_FOLD_G * LN_FOLD_H || wg > ctx->max_wg)
    return RUMUS_OK;
  return kernel_fits(ctx, op, plan, "ln_dparam_fold_one", wg, one);
}

/* Stage 2 by ln_dparam_fold_one: a group of (fold_ls, LN_FOLD_H) per
 * fold_ls columns. */
static int run_fold_one(rumus_ctx *ctx, const char *op,
                        const rumus__row_plan *plan, cl_mem part, size_t nb,
                        size_t cols, rumus_tensor *dgamma,
                        rumus_tensor *dbeta) {
  const ln_arg ga = arg_of(dgamma, dbeta), ba = arg_of(dbeta, dgamma);
  cl_int has_dg = dgamma != NULL, has_db = dbeta != NULL;
  cl_ulong ncols = cols, nnb = nb;
  const rumus__arg a[9] = {
      RUMUS__ARG(part),   RUMUS__ARG(ncols),  RUMUS__ARG(nnb),
      RUMUS__ARG(has_dg), RUMUS__ARG(ga.mem), RUMUS__ARG(ga.off),
      RUMUS__ARG(has_db), RUMUS__ARG(ba.mem), RUMUS__ARG(ba.off)};
  const rumus__kernel_ref k = {FILE_CL, plan->options, "ln_dparam_fold_one"};
  size_t g[2] = {cols, LN_FOLD_H}, l[2] = {fold_ls(ctx, plan), LN_FOLD_H};
  return rumus__launch(ctx, op, &k, 2, g, l, 9, a);
}

/* Stage 2 on the CPU variant (a _row plan): ln_dparam_fold_item,
 * LN_FOLD_S columns per work-item, the order of the other stage-2
 * kernels. */
static int run_fold_item(rumus_ctx *ctx, const char *op,
                         const rumus__row_plan *plan, cl_mem part, size_t nb,
                         size_t cols, rumus_tensor *dgamma,
                         rumus_tensor *dbeta) {
  const ln_arg ga = arg_of(dgamma, dbeta), ba = arg_of(dbeta, dgamma);
  cl_int has_dg = dgamma != NULL, has_db = dbeta != NULL;
  cl_ulong ncols = cols, nnb = nb;
  const rumus__arg a[9] = {
      RUMUS__ARG(part),   RUMUS__ARG(ncols),  RUMUS__ARG(nnb),
      RUMUS__ARG(has_dg), RUMUS__ARG(ga.mem), RUMUS__ARG(ga.off),
      RUMUS__ARG(has_db), RUMUS__ARG(ba.mem), RUMUS__ARG(ba.off)};
  const rumus__kernel_ref k = {FILE_CL, plan->options, "ln_dparam_fold_item"};
  size_t global = (cols + LN_FOLD_S - 1) / LN_FOLD_S,
         local = rumus__row_local(ctx, global);
  return rumus__launch(ctx, op, &k, 1, &global, &local, 9, a);
}

/* Stage 2: the nb blocks' partials in part (2 nb cols floats) added per
 * column into dgamma and dbeta (either may be NULL), in groups of
 * LN_FOLD_G into part2 first when there are more. */
static int run_fold(rumus_ctx *ctx, const char *op,
                    const rumus__row_plan *plan, cl_mem part, cl_mem part2,
                    size_t nb, size_t cols, rumus_tensor *dgamma,
                    rumus_tensor *dbeta) {
  const size_t ls = fold_ls(ctx, plan);
  cl_ulong ncols = cols, nnb = nb;
  if (plan->kind == RUMUS__ROWS_ITEM)
    return run_fold_item(ctx, op, plan, part, nb, cols, dgamma, dbeta);
  int one;
  RUMUS__FORWARD(fold_one(ctx, op, plan, nb, &one));
  if (one)
    return run_fold_one(ctx, op, plan, part, nb, cols, dgamma, dbeta);
  cl_mem src = part;
  if (nb > LN_FOLD_G) {
    cl_ulong nb2 = (nb + LN_FOLD_G - 1) / LN_FOLD_G;
    const rumus__arg a[5] = {RUMUS__ARG(part), RUMUS__ARG(ncols),
                             RUMUS__ARG(nnb), RUMUS__ARG(part2),
                             RUMUS__ARG(nb2)};
    const rumus__kernel_ref k = {FILE_CL, plan->options, "ln_dparam_fold1"};
    size_t g[2] = {cols, (size_t)nb2}, l[2] = {ls, 1};
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 2, g, l, 5, a));
    src = part2;
    nnb = nb2;
  }
  const ln_arg ga = arg_of(dgamma, dbeta), ba = arg_of(dbeta, dgamma);
  cl_int has_dg = dgamma != NULL, has_db = dbeta != NULL;
  const rumus__arg a2[9] = {
      RUMUS__ARG(src),    RUMUS__ARG(ncols),  RUMUS__ARG(nnb),
      RUMUS__ARG(has_dg), RUMUS__ARG(ga.mem), RUMUS__ARG(ga.off),
      RUMUS__ARG(has_db), RUMUS__ARG(ba.mem), RUMUS__ARG(ba.off)};
  const rumus__kernel_ref k2 = {FILE_CL, plan->options, "ln_dparam_fold"};
  size_t g2 = cols, l2 = ls;
  return rumus__launch(ctx, op, &k2, 1, &g2, &l2, 9, a2);
}

/* Stage 1 by the part kernels (dx comes after, by the row kernels). */
static int run_part(rumus_ctx *ctx, const char *op,
                    const rumus__row_plan *plan, const rumus_tensor *dy,
                    const rumus_tensor *x, const rumus_tensor *mean,
                    const rumus_tensor *rstd, cl_mem part, size_t rows,
                    size_t cols, size_t rb, size_t nb) {
  const int gpu = plan->kind != RUMUS__ROWS_ITEM;
  const size_t ls = fold_ls(ctx, plan);
  const ln_arg dya = arg_of(dy, NULL), xa = arg_of(x, NULL),
               ma = arg_of(mean, rstd), ra = arg_of(rstd, NULL);
  cl_int has_mean = mean != NULL;
  cl_ulong nrows = rows, ncols = cols, nrb = rb, nnb = nb;
  const rumus__arg a1[14] = {
      RUMUS__ARG(dya.mem), RUMUS__ARG(dya.off), RUMUS__ARG(xa.mem),
      RUMUS__ARG(xa.off),  RUMUS__ARG(ma.mem),  RUMUS__ARG(ma.off),
      RUMUS__ARG(ra.mem),  RUMUS__ARG(ra.off),  RUMUS__ARG(has_mean),
      RUMUS__ARG(part),    RUMUS__ARG(nrows),   RUMUS__ARG(ncols),
      RUMUS__ARG(nrb),     RUMUS__ARG(nnb)};
  const rumus__kernel_ref k1 = {
      FILE_CL, plan->options, gpu ? "ln_dparam_part_wg" : "ln_dparam_part_item"};
  size_t g1[2] = {gpu ? cols : (cols + 7) / 8, nb};
  /* CPU: groups of 8 work-items where there are enough (PoCL's cost per
   * work-group). */
  size_t l1[2] = {gpu ? ls : (g1[0] >= 8 ? 8 : 1), 1};
  return rumus__launch(ctx, op, &k1, 2, g1, l1, 14, a1);
}

/* The fused kernel of a REGS plan (base "layernorm_bwd" or
 * "rmsnorm_bwd"): *ok when the device runs it at the plan's group size
 * (it holds twice the registers of the _wgc kernel). */
static int fused_ref(rumus_ctx *ctx, const char *op,
                     const rumus__row_plan *plan, const char *base,
                     char *name, size_t len, int *ok) {
  *ok = 0;
  if (plan->kind != RUMUS__ROWS_REGS) return RUMUS_OK;
  snprintf(name, len, "%s_fused", base);
  return kernel_fits(ctx, op, plan, name, plan->wg, ok);
}

/* ts's entries (dy, x, dx, mean, rstd, gamma) in the backward kernels'
 * argument order, LN_BWD_ARGS: dy, x, gamma, mean, rstd, dx. */
static const int BWD_ORDER[6] = {0, 1, 5, 3, 4, 2};

/* The tensors of the backward kernels into a, in LN_BWD_ARGS order (dy,
 * x, gamma, mean, rstd, dx; each buffer and offset); returns the count. */
static size_t bwd_tensor_args(const ln_tensors *ts, rumus__arg *a) {
  size_t na = 0;
  for (int i = 0; i < 6; i++) {
    a[na++] = RUMUS__ARG(ts->t[BWD_ORDER[i]].mem);
    a[na++] = RUMUS__ARG(ts->t[BWD_ORDER[i]].off);
  }
  return na;
}

/* dx and stage 1 in one launch of the fused kernel `name`: a team of rt
 * work-items per block. */
static int run_fused(rumus_ctx *ctx, const char *op,
                     const rumus__row_plan *plan, const char *name,
                     const ln_tensors *ts, cl_int has_g, cl_mem part,
                     size_t rows, size_t cols, size_t rb, size_t nb) {
  const rumus__kernel_ref k = {FILE_CL, plan->options, name};
  rumus__arg a[19];
  size_t na = bwd_tensor_args(ts, a);
  cl_ulong nrows = rows, ncols = cols, nrb = rb, nnb = nb;
  a[na++] = RUMUS__ARG(has_g);
  a[na++] = RUMUS__ARG(nrows);
  a[na++] = RUMUS__ARG(ncols);
  a[na++] = RUMUS__ARG(plan->rt);
  a[na++] = RUMUS__ARG(part);
  a[na++] = RUMUS__ARG(nrb);
  a[na++] = RUMUS__ARG(nnb);
  const size_t teams = plan->wg / plan->rt;
  size_t local = plan->wg, global = (nb + teams - 1) / teams * plan->wg;
  return rumus__launch(ctx, op, &k, 1, &global, &local, na, a);
}

/* How the GPU variant's backward runs, in order of preference: the
 * block kernel (rows from LN_BLK_MIN_COLS up to 8 ls), the _fused kernel
 * (REGS plans; its _wgc twin without the gradients), the wide kernel,
 * else stage 1 and the row kernels.  *k names the group kernel (ls 0:
 * none), *fused the _fused kernel's use. */
static int bwd_choice(rumus_ctx *ctx, const char *op,
                      const rumus__row_plan *plan, const char *base,
                      size_t cols, ln_group *k, int *fused, char *fname,
                      size_t flen) {
  *fused = 0;
  k->ls = 0;
  if (cols >= LN_BLK_MIN_COLS)
    RUMUS__FORWARD(group_local(ctx, op, plan, base, "blk", LN_BV, 8,
                               LN_BLK_MAX_LS, cols, k));
  if (k->ls) return RUMUS_OK;
  RUMUS__FORWARD(fused_ref(ctx, op, plan, base, fname, flen, fused));
  if (*fused) return RUMUS_OK;
  const ln_wide_shape w = wide_bwd(ctx);
  return wide_local(ctx, op, plan, base, &w, cols, k);
}

/* dx (and stage 1 into part when has_part) by the group kernel gk (_blk:
 * a float8 per work-item of local memory, _wide: none
 * as an argument): a work-group of gk->ls per block of rb rows. */
static int run_blk(rumus_ctx *ctx, const char *op,
                   const rumus__row_plan *plan, const ln_group *gk,
                   const ln_tensors *ts, cl_int has_g, cl_int has_part,
                   cl_mem part, size_t rows, size_t cols, size_t rb,
                   size_t nb) {
  const rumus__kernel_ref k = {FILE_CL, plan->options, gk->kernel};
  const size_t ls = gk->ls;
  rumus__arg a[20];
  size_t na = bwd_tensor_args(ts, a);
  cl_ulong nrows = rows, ncols = cols, nrb = rb, nnb = nb;
  cl_mem pm = has_part ? part : ts->t[0].mem; /* not touched without */
  a[na++] = RUMUS__ARG(has_g);
  a[na++] = RUMUS__ARG(nrows);
  a[na++] = RUMUS__ARG(ncols);
  if (gk->lfl) /* _blk's LN_GRP_SUM buffer */
    a[na++] = RUMUS__ARG_LOCAL((ls + 32) * gk->lfl * sizeof(float));
  a[na++] = RUMUS__ARG(has_part);
  a[na++] = RUMUS__ARG(pm);
  a[na++] = RUMUS__ARG(nrb);
  a[na++] = RUMUS__ARG(nnb);
  size_t local = ls, global = nb * ls;
  return rumus__launch(ctx, op, &k, 1, &global, &local, na, a);
}

/* Whether the _rowp kernels take a block's rows by twos (one load and
 * store of the partials per two rows): for rows longer than
 * LN_ROWP_PAIR_COLS, or as RUMUS_LN_ROWP (1 or 2) says.  Alternated
 * runs on PoCL (2 loaded cores, % of STREAM copy, medians of 5):
 * 2048 x 16384 68% by twos against 50% row by row, 65536 x 1024 74%
 * against 82% (a row's dy, x, dx and the partials, 24 KiB, fit the L1
 * cache; two rows' do not). */
#define LN_ROWP_PAIR_COLS 1024
static cl_int rowp_pairs(size_t cols) {
  const char *v = getenv("RUMUS_LN_ROWP");
  if (v && (atoi(v) == 1 || atoi(v) == 2)) return atoi(v) == 2;
  return cols > LN_ROWP_PAIR_COLS;
}

/* CPU variant (a _row plan): dx and stage 1 in one launch of the plan's
 * kernel's _rowp twin (layernorm_bwd_rowp, rmsnorm_bwd_rowp), a work-item
 * per block of rb rows (the blocks and column order of
 * ln_dparam_part_item, so the same partials). */
static int run_rowp(rumus_ctx *ctx, const char *op,
                    const rumus__row_plan *plan, const ln_tensors *ts,
                    cl_int has_g, cl_mem part, size_t rows, size_t cols,
                    size_t rb, size_t nb) {
  char name[72];
  snprintf(name, sizeof name, "%sp", plan->kernel);
  const rumus__kernel_ref k = {FILE_CL, plan->options, name};
  rumus__arg a[20];
  size_t na = bwd_tensor_args(ts, a);
  cl_ulong nrows = rows, ncols = cols, nrb = rb, nnb = nb;
  cl_int pairs = rowp_pairs(cols);
  a[na++] = RUMUS__ARG(has_g);
  a[na++] = RUMUS__ARG(nrows);
  a[na++] = RUMUS__ARG(ncols);
  a[na++] = RUMUS__ARG(part);
  a[na++] = RUMUS__ARG(nrb);
  a[na++] = RUMUS__ARG(nnb);
  a[na++] = RUMUS__ARG(pairs);
  size_t global = nb, local = rumus__row_local(ctx, nb);
  return rumus__launch(ctx, op, &k, 1, &global, &local, na, a);
}

/* The backward's launches with dgamma or dbeta, as bwd_choice chose: the
 * group kernel gk (_blk or _wide) when gk->ls, else the fused kernel
 * `name` when fused, else on the CPU variant the _rowp kernel, else
 * stage 1 then the row kernels; then stage 2.
 * Scratch from the context's slots 0 and 1. */
static int run_with_dparam(rumus_ctx *ctx, const char *op,
                           const rumus__row_plan *plan, const ln_tensors *ts,
                           cl_int has_g, const rumus_tensor *dy,
                           const rumus_tensor *x, const rumus_tensor *mean,
                           const rumus_tensor *rstd, rumus_tensor *dgamma,
                           rumus_tensor *dbeta, size_t rows, size_t cols,
                           const ln_group *gk, int fused, const char *name) {
  size_t rb, nb;
  plan_blocks(rows, cols, &rb, &nb);
  const size_t nb2 = (nb + LN_FOLD_G - 1) / LN_FOLD_G;
  cl_mem part, part2;
  RUMUS__FORWARD(rumus__scratch_slot(ctx, op, 0,
                                     2 * nb * cols * sizeof(float), &part));
  RUMUS__FORWARD(rumus__scratch_slot(ctx, op, 1,
                                     2 * nb2 * cols * sizeof(float), &part2));
  if (gk->ls) {
    RUMUS__FORWARD(
        run_blk(ctx, op, plan, gk, ts, has_g, 1, part, rows, cols, rb, nb));
  } else if (fused) {
    RUMUS__FORWARD(run_fused(ctx, op, plan, name, ts, has_g, part, rows, cols,
                             rb, nb));
  } else if (plan->kind == RUMUS__ROWS_ITEM) {
    RUMUS__FORWARD(run_rowp(ctx, op, plan, ts, has_g, part, rows, cols, rb,
                            nb));
  } else {
    /* dgamma and dbeta's stage 1 first: dx may be dy's bytes. */
    RUMUS__FORWARD(
        run_part(ctx, op, plan, dy, x, mean, rstd, part, rows, cols, rb, nb));
    const rumus__arg tail[1] = {RUMUS__ARG(has_g)};
    RUMUS__FORWARD(
        run_rows(ctx, op, plan, ts, BWD_ORDER, tail, 1, rows, cols, NULL, 0));
  }
  return run_fold(ctx, op, plan, part, part2, nb, cols, dgamma, dbeta);
}

/* Both backwards: mean and dbeta NULL for RMS norm. */
static int backward(rumus_ctx *ctx, const char *op, const char *base,
                    const rumus_tensor *dy, const rumus_tensor *x,
                    const rumus_tensor *gamma, const rumus_tensor *mean,
                    const rumus_tensor *rstd, rumus_tensor *dx,
                    rumus_tensor *dgamma, rumus_tensor *dbeta, int rms) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_rows(ctx, op, "x", x, NULL));
  RUMUS__FORWARD(check_rows(ctx, op, "dy", dy, x));
  RUMUS__FORWARD(check_rows(ctx, op, "dx", dx, x));
  const char *pn[3] = {"gamma", "dgamma", "dbeta"};
  const rumus_tensor *ps[3] = {gamma, dgamma, dbeta};
  rumus_dtype param;
  RUMUS__FORWARD(check_param_set(ctx, op, pn, ps, rms ? 2 : 3, x, &param));
  size_t rows, cols;
  rumus__rows_cols(x, &rows, &cols);
  const char *sn = rms ? "rrms" : "rstd";
  if (!rms) RUMUS__FORWARD(check_stat(ctx, op, "mean", mean, rows, 0));
  RUMUS__FORWARD(check_stat(ctx, op, sn, rstd, rows, 0));
  const char *names[8] = {"dx", "dgamma", "dbeta", "dy", "x", "gamma",
                          "mean", sn};
  const rumus_tensor *all[8] = {dx, dgamma, dbeta, dy, x, gamma, mean, rstd};
  RUMUS__FORWARD(rumus__check_overlaps(ctx, op, names, all, 8, 3, 3));
  if (cols == 0) return RUMUS_OK;
  if (rows == 0) { /* empty sums */
    if (dgamma) RUMUS__FORWARD(rumus_tensor_fill(dgamma, 0.0f));
    return dbeta ? rumus_tensor_fill(dbeta, 0.0f) : RUMUS_OK;
  }
  const rumus_tensor *al[4] = {dy, x, dx, gamma};
  rumus__row_plan plan;
  RUMUS__FORWARD(make_plan(ctx, op, base, x, param, al, 4, cols, &plan));
  /* Kernel order (LN_BWD_ARGS): dy, x, gamma, mean, rstd, dx. */
  const ln_tensors ts = {{arg_of(dy, dy), arg_of(x, x), arg_of(dx, dx),
                          arg_of(mean, rstd), arg_of(rstd, rstd),
                          arg_of(gamma, x)},
                         3, 2, 1};
  cl_int has_g = gamma != NULL;
  ln_group gk;
  char fname[64];
  int fused;
  RUMUS__FORWARD(bwd_choice(ctx, op, &plan, base, cols, &gk, &fused, fname,
                            sizeof fname));
  if (dgamma || dbeta) {
    rumus__scratch_begin(ctx);
    const int st = run_with_dparam(ctx, op, &plan, &ts, has_g, dy, x, mean,
                                   rstd, dgamma, dbeta, rows, cols, &gk,
                                   fused, fname);
    rumus__scratch_end(ctx);
    return st;
  }
  if (gk.ls) { /* the same kernel as with the gradients: the same dx bits */
    size_t rb, nb;
    plan_blocks(rows, cols, &rb, &nb);
    return run_blk(ctx, op, &plan, &gk, &ts, has_g, 0, NULL, rows, cols, rb,
                   nb);
  }
  const rumus__arg tail[1] = {RUMUS__ARG(has_g)};
  return run_rows(ctx, op, &plan, &ts, BWD_ORDER, tail, 1, rows, cols, NULL,
                  0);
}

int rumus_layernorm_bwd(rumus_ctx *ctx, const rumus_tensor *dy,
                        const rumus_tensor *x, const rumus_tensor *gamma,
                        const rumus_tensor *mean, const rumus_tensor *rstd,
                        rumus_tensor *dx, rumus_tensor *dgamma,
                        rumus_tensor *dbeta) {
  return backward(ctx, "rumus_layernorm_bwd", "layernorm_bwd", dy, x, gamma,
                  mean, rstd, dx, dgamma, dbeta, 0);
}

int rumus_rmsnorm_bwd(rumus_ctx *ctx, const rumus_tensor *dy,
                      const rumus_tensor *x, const rumus_tensor *gamma,
                      const rumus_tensor *rrms, rumus_tensor *dx,
                      rumus_tensor *dgamma) {
  return backward(ctx, "rumus_rmsnorm_bwd", "rmsnorm_bwd", dy, x, gamma, NULL,
                  rrms, dx, dgamma, NULL, 1);
}

/* F32 programs only (gamma F32), as rumus_cache_fill() documents. */
int rumus__layernorm_warm(rumus_ctx *ctx) {
  return rumus__row_family_warm(ctx, &LN_F32, RUMUS_F32);
}
