/*
 * elementwise.c - bias add / bias gradient, element-wise arithmetic,
 * activations (kernels in cl/elementwise.cl) and casts between storage
 * types (cl/cast.cl).
 *
 * Element-wise ops take tensors of equal element count (their shapes may
 * differ); out may alias an input.  The tensors of a call are all F32, all
 * F16 or all BF16 (the program's storage), except the bias gradient's
 * dbias, which may be F32 for 16-bit dy.  Every kernel of the family for
 * one storage type lives in one program, specialised by the variant: the
 * GPU setting reads one float4 per work-item in work-groups of 256, the
 * CPU setting (PoCL) several float8 per work-item in small work-groups.
 * Activations, and the type of dbias, are chosen by kernel name, so one
 * program serves all of them.  The casts have one program of their own
 * with the same geometry and options (every pair of types, picked by
 * kernel name); rumus_cache_fill builds it with the F32 programs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "elementwise.cl";
static const char *const FILE_CAST = "cast.cl";

/* Work-items per launch at most (NDRange limits of some drivers); larger
 * tensors are launched in pieces. */
#define MAX_ITEMS ((size_t)1 << 30)
/* Work-groups along dimension 1 per launch at most (CUDA's grid limit, which
 * NVIDIA's OpenCL inherits). */
#define MAX_GROUPS_DIM1 ((size_t)65535)

/* bias_grad: chunks of rows, each reduced into one partial row. */
#define BG_MAX_CHUNKS 1024
#define BG_RC_GPU 32   /* rows per chunk at least, GPU variant */
/* Work-groups per compute unit that bias_grad_wg's chunks aim at.  On the
 * H200 4 ran 65536 x 1024 in 70 us, 6 in 71 and 8 in 80: the kernel, which
 * folds its chunks itself, needs 40 registers (ptxas), so only 6 groups of
 * 256 fit on a compute unit at once and 8 per unit made a second, partial
 * wave. */
#define BG_GROUPS_PER_CU 4
#define BG_ONE_CHUNK_GPU 1024 /* rows up to which the GPU variant folds none */
#define BG_RC_CPU 256  /* rows per chunk at least, CPU variant */
/* Columns per work-item of bias_grad_row, at most: long stretches of each
 * row stream through the CPU's prefetchers.  At 65536 x 1024 and 4096 x
 * 4096 on the 2-core CI machine 1024 ran at 73% and 66% of STREAM, 256 at
 * 78% and 52%, 64 at 45% and 36%; on the 2-vCPU AVX-512 EPYC 4096 took
 * 4096 x 4096 from 57-67% to 63-96% in F32 and from 24-52% to 46-94% in
 * BF16 (16 KiB of float accumulators, in L1; alternated runs on a noisy
 * machine, bench/results/pocl/session-1832).  Fewer columns (down to
 * BG_COLS_MIN_CPU) where the blocks and chunks would not give every
 * compute unit two work-items. */
#define BG_COLS_CPU 4096
#define BG_COLS_MIN_CPU 1024

/* Geometry of the flat kernels for this context's variant. */
typedef struct {
  int gpu;
  size_t vw, nv, ls; /* vector width, vectors per work-item, local size */
  rumus_dtype storage;
  int align4;
  int align8; /* wide 16-bit vectors (GPU variant; RUMUS_ALIGN8) */
} geom;

/* The CPU variant's vector width: the device's native float width, 16
 * with AVX-512, else 8; RUMUS_EW_VW=8 or 16 for A/B runs and tests.  On
 * the 2-vCPU AVX-512 EPYC, 16 took GELU's time to 0.53-0.94 of 8's
 * (alternated runs at 2^24 elements and 4096 x 4096, every storage
 * type: arithmetic bounds GELU there) and left the memory-bound ops
 * within the machine's noise. */
static size_t cpu_vw(const rumus_ctx *ctx) {
  const char *e = getenv("RUMUS_EW_VW");
  if (e && (strcmp(e, "8") == 0 || strcmp(e, "16") == 0))
    return (size_t)atoi(e);
  return ctx->float_width >= 16 ? 16 : 8;
}

static void get_geom(const rumus_ctx *ctx, rumus_dtype storage, int align4,
                     geom *g) {
  g->gpu = rumus__gpu_variant(ctx);
  g->storage = storage;
  g->align4 = align4;
  g->align8 = 0;
  if (g->gpu) {
    /* One float4 per work-item in groups of 256.  On the H200 float8 or two
     * contiguous float4 per work-item ran streaming ops 2-3.5x slower (a
     * warp's stores then fill half sectors); groups of 128 were within 3%,
     * groups of 512 slower (GELU backward 229 us against 207). */
    g->vw = 4;
    g->nv = 1;
    g->ls = 256;
  } else {
    g->vw = cpu_vw(ctx);
    g->nv = 4;
    g->ls = 16;
  }
  while (g->ls > ctx->max_wg) g->ls /= 2;
}

/* The options of the family's program for g (warm-up and launches).  The
 * GPU variant's exp and reciprocal use special-function instructions
 * (EW_GPU_MATH in cl/elementwise.cl); 16-bit storage takes the shorter
 * math that its 11 or 8 bits allow (EW_SHORT_MATH). */
static void ew_options(const rumus_ctx *ctx, const geom *g, char *buf,
                       size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, g->storage, rumus__reduce_wg(ctx),
                      g->align4);
  snprintf(buf, len,
           "%s -DEW_VW=%zu -DEW_NV=%zu -DEW_LS=%zu -DBG_COLS=%d "
           "-DEW_GPU_MATH=%d -DEW_SHORT_MATH=%d -DRUMUS_ALIGN8=%d",
           head, g->vw, g->nv, g->ls, BG_COLS_CPU, g->gpu,
           g->storage != RUMUS_F32, g->align8);
}

/* The geometry and program options for the op's tensors ts[0 .. nt) with
 * rows of `cols` elements (0 for flat ops), in `storage`. */
static void plan_flat(const rumus_ctx *ctx, rumus_dtype storage,
                      const rumus_tensor *const *ts, int nt, size_t cols,
                      geom *g, char *opts, size_t len) {
  get_geom(ctx, storage, rumus__align4(ctx, ts, nt, cols), g);
  ew_options(ctx, g, opts, len);
}

/* plan_flat() for the flat kernels, which on the GPU variant give each
 * work-item 8 elements (16 bytes) when a tensor is 16-bit and every
 * tensor is 8-element aligned: 4 halves are only 8 bytes per work-item,
 * too few in flight to stream at copy speed. */
static void plan_flat_wide(const rumus_ctx *ctx, rumus_dtype storage,
                           const rumus_tensor *const *ts, int nt, geom *g,
                           char *opts, size_t len) {
  get_geom(ctx, storage, rumus__align4(ctx, ts, nt, 0), g);
  int sixteen = 0, aligned = g->gpu && g->align4;
  for (int i = 0; i < nt && aligned; i++) {
    if (rumus_dtype_size(ts[i]->dtype) == 2) sixteen = 1;
    if (!rumus__aligned(ts[i], 0, 8)) aligned = 0;
  }
  if (sixteen && aligned) {
    g->vw = 8;
    g->align8 = 1;
  }
  ew_options(ctx, g, opts, len);
}

/* ---- Argument checks --------------------------------------------------- */

static int check_same_numel(rumus_ctx *ctx, const char *op, const char *an,
                            const rumus_tensor *a, const char *bn,
                            const rumus_tensor *b) {
  if (a->numel == b->numel) return RUMUS_OK;
  char sa[RUMUS__SHAPE_BUF], sb[RUMUS__SHAPE_BUF];
  return rumus__fail(ctx, RUMUS_ESHAPE,
                     "%s: %s %s and %s %s differ in element count", op, an,
                     rumus__shape_str(a, sa, sizeof sa), bn,
                     rumus__shape_str(b, sb, sizeof sb));
}

/* Checks ts[0..nt) (of ctx, floating, all of ts[0]'s type and element
 * count); the last is the output, which may be one of the inputs
 * (element-wise kernels read an element before they write it) but not
 * overlap one partly. */
static int check_flat(rumus_ctx *ctx, const char *op, const char *const *names,
                      const rumus_tensor *const *ts, int nt) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, names[0], ts[0]));
  for (int i = 1; i < nt; i++)
    RUMUS__FORWARD(
        rumus__check_tensor(ctx, op, names[i], ts[i], ts[0]->dtype));
  for (int i = 1; i < nt; i++)
    RUMUS__FORWARD(check_same_numel(ctx, op, names[0], ts[0], names[i], ts[i]));
  for (int i = 0; i + 1 < nt; i++)
    RUMUS__FORWARD(rumus__check_overlap(ctx, op, names[i], ts[i],
                                        names[nt - 1], ts[nt - 1], 1));
  return RUMUS_OK;
}

/* y of shape [..., F] (floating) and a 1-D bias of F elements, of y's
 * type, or F32 as well when f32_ok (bias_grad's dbias). */
static int check_bias(rumus_ctx *ctx, const char *op, const char *yn,
                      const rumus_tensor *y, const char *bn,
                      const rumus_tensor *b, int f32_ok) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, yn, y));
  if (f32_ok && b && b->ctx == ctx) {
    RUMUS__FAIL_IF(b->dtype != y->dtype && b->dtype != RUMUS_F32, ctx,
                   RUMUS_EDTYPE, "%s: %s is %s, expected %s (the type of "
                   "%s) or f32", op, bn, rumus_dtype_name(b->dtype),
                   rumus_dtype_name(y->dtype), yn);
  } else {
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, bn, b, y->dtype));
  }
  char sy[RUMUS__SHAPE_BUF], sb[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(y->ndim < 1, ctx, RUMUS_ESHAPE,
                 "%s: %s must have at least one dimension", op, yn);
  RUMUS__FAIL_IF(b->ndim != 1 || b->shape[0] != y->shape[y->ndim - 1], ctx,
                 RUMUS_ESHAPE, "%s: %s %s must be 1-D with the last extent of "
                 "%s %s", op, bn, rumus__shape_str(b, sb, sizeof sb), yn,
                 rumus__shape_str(y, sy, sizeof sy));
  return rumus__check_overlap(ctx, op, yn, y, bn, b, 0);
}

/* ---- Flat launches ----------------------------------------------------- */

/* Runs kernel `kname` of `file` over n elements of the tensors ts[0..nt)
 * (their (buffer, element offset) pairs in kernel order), then n, then
 * alpha if with_alpha; the program's storage is `storage`. */
static int run_flat_in(rumus_ctx *ctx, const char *op, const char *file,
                       rumus_dtype storage, const char *kname,
                       const rumus_tensor *const *ts, int nt, size_t n,
                       int with_alpha, float alpha) {
  geom g;
  char opts[192];
  plan_flat_wide(ctx, storage, ts, nt, &g, opts, sizeof opts);
  const rumus__kernel_ref k = {file, opts, kname};
  const size_t span = g.vw * g.nv, piece = MAX_ITEMS * span;
  for (size_t e0 = 0; e0 < n; e0 += piece) {
    cl_ulong cnt = n - e0 < piece ? n - e0 : piece;
    cl_ulong offs[3];
    rumus__arg args[8];
    size_t na = 0;
    for (int i = 0; i < nt; i++) {
      offs[i] = rumus__off(ts[i]) + (cl_ulong)e0;
      args[na++] = RUMUS__ARG(ts[i]->mem);
      args[na++] = RUMUS__ARG(offs[i]);
    }
    args[na++] = RUMUS__ARG(cnt);
    if (with_alpha) args[na++] = RUMUS__ARG(alpha);
    size_t global = ((size_t)cnt + span - 1) / span, local = g.ls;
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local, na, args));
  }
  return RUMUS_OK;
}

/* run_flat_in for elementwise.cl in the storage of ts[0]. */
static int run_flat(rumus_ctx *ctx, const char *op, const char *kname,
                    const rumus_tensor *const *ts, int nt, size_t n,
                    int with_alpha, float alpha) {
  return run_flat_in(ctx, op, FILE_CL, ts[0]->dtype, kname, ts, nt, n,
                     with_alpha, alpha);
}

static int binary(rumus_ctx *ctx, const char *op, const char *kname,
                  const rumus_tensor *a, const rumus_tensor *b,
                  rumus_tensor *out) {
  if (ctx == NULL) return RUMUS_ENULL;
  const char *names[3] = {"a", "b", "out"};
  const rumus_tensor *ts[3] = {a, b, out};
  RUMUS__FORWARD(check_flat(ctx, op, names, ts, 3));
  return run_flat(ctx, op, kname, ts, 3, a->numel, 0, 0.0f);
}

int rumus_add(rumus_ctx *ctx, const rumus_tensor *a, const rumus_tensor *b,
              rumus_tensor *out) {
  return binary(ctx, "rumus_add", "ew_add", a, b, out);
}
int rumus_sub(rumus_ctx *ctx, const rumus_tensor *a, const rumus_tensor *b,
              rumus_tensor *out) {
  return binary(ctx, "rumus_sub", "ew_sub", a, b, out);
}
int rumus_mul(rumus_ctx *ctx, const rumus_tensor *a, const rumus_tensor *b,
              rumus_tensor *out) {
  return binary(ctx, "rumus_mul", "ew_mul", a, b, out);
}

int rumus_scale(rumus_ctx *ctx, float alpha, const rumus_tensor *x,
                rumus_tensor *out) {
  const char *op = "rumus_scale";
  if (ctx == NULL) return RUMUS_ENULL;
  const char *names[2] = {"x", "out"};
  const rumus_tensor *ts[2] = {x, out};
  RUMUS__FORWARD(check_flat(ctx, op, names, ts, 2));
  return run_flat(ctx, op, "ew_scale", ts, 2, x->numel, 1, alpha);
}

int rumus_axpy(rumus_ctx *ctx, float alpha, const rumus_tensor *x,
               rumus_tensor *y) {
  const char *op = "rumus_axpy";
  if (ctx == NULL) return RUMUS_ENULL;
  const char *names[2] = {"x", "y"};
  const rumus_tensor *ts[2] = {x, y};
  RUMUS__FORWARD(check_flat(ctx, op, names, ts, 2));
  return run_flat(ctx, op, "ew_axpy", ts, 2, x->numel, 1, alpha);
}

/* ---- Activations ------------------------------------------------------- */

static const char *act_name(rumus_activation act) {
  switch (act) {
  case RUMUS_ACT_RELU: return "relu";
  case RUMUS_ACT_LEAKY_RELU: return "leaky_relu";
  case RUMUS_ACT_SIGMOID: return "sigmoid";
  case RUMUS_ACT_TANH: return "tanh";
  case RUMUS_ACT_GELU_TANH: return "gelu_tanh";
  case RUMUS_ACT_GELU_ERF: return "gelu_erf";
  }
  return NULL;
}

int rumus_activation_fwd(rumus_ctx *ctx, rumus_activation act, float param,
                         const rumus_tensor *x, rumus_tensor *y) {
  const char *op = "rumus_activation_fwd";
  if (ctx == NULL) return RUMUS_ENULL;
  const char *name = act_name(act);
  RUMUS__FAIL_IF(name == NULL, ctx, RUMUS_EINVAL, "%s: unknown activation %d",
                 op, (int)act);
  const char *names[2] = {"x", "y"};
  const rumus_tensor *ts[2] = {x, y};
  RUMUS__FORWARD(check_flat(ctx, op, names, ts, 2));
  char kname[40];
  snprintf(kname, sizeof kname, "act_fwd_%s", name);
  return run_flat(ctx, op, kname, ts, 2, x->numel, 1, param);
}

int rumus_activation_bwd(rumus_ctx *ctx, rumus_activation act, float param,
                         const rumus_tensor *x, const rumus_tensor *dy,
                         rumus_tensor *dx) {
  const char *op = "rumus_activation_bwd";
  if (ctx == NULL) return RUMUS_ENULL;
  const char *name = act_name(act);
  RUMUS__FAIL_IF(name == NULL, ctx, RUMUS_EINVAL, "%s: unknown activation %d",
                 op, (int)act);
  const char *names[3] = {"x", "dy", "dx"};
  const rumus_tensor *ts[3] = {x, dy, dx};
  RUMUS__FORWARD(check_flat(ctx, op, names, ts, 3));
  char kname[40];
  snprintf(kname, sizeof kname, "act_bwd_%s", name);
  return run_flat(ctx, op, kname, ts, 3, x->numel, 1, param);
}

/* ---- Bias -------------------------------------------------------------- */

/* Smallest power of two >= n, at most cap. */
static size_t pow2_at_least(size_t n, size_t cap) {
  size_t p = 1;
  while (p < n && p < cap) p *= 2;
  return p;
}

int rumus_bias_add(rumus_ctx *ctx, rumus_tensor *y, const rumus_tensor *bias) {
  const char *op = "rumus_bias_add";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_bias(ctx, op, "y", y, "bias", bias, 0));
  size_t rows, cols;
  rumus__rows_cols(y, &rows, &cols);
  if (rows == 0 || cols == 0) return RUMUS_OK;
  geom g;
  char opts[192];
  const rumus_tensor *al_ts[2] = {y, bias};
  plan_flat(ctx, y->dtype, al_ts, 2, cols, &g, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, "bias_add"};
  /* Work-item (c, r): EW_VW * EW_NV columns c of row r.  The local size
   * spans the row's column blocks (rounded up to a power of two) and as
   * many rows as fill g.ls work-items. */
  const size_t span = g.vw * g.nv, nvr = (cols + span - 1) / span;
  size_t local[2];
  local[0] = pow2_at_least(nvr, g.ls);
  local[1] = g.ls / local[0];
  /* Dimension 1 of some GPU drivers holds at most 65535 work-groups. */
  size_t max_rows = MAX_ITEMS / local[0];
  if (max_rows > MAX_GROUPS_DIM1 * local[1]) max_rows = MAX_GROUPS_DIM1 * local[1];
  for (size_t r0 = 0; r0 < rows; r0 += max_rows) {
    cl_ulong nrows = rows - r0 < max_rows ? rows - r0 : max_rows;
    cl_ulong ncols = cols;
    cl_ulong y_off = rumus__off(y) + (cl_ulong)(r0 * cols), b_off = rumus__off(bias);
    rumus__arg args[6] = {RUMUS__ARG(y->mem), RUMUS__ARG(y_off),
                          RUMUS__ARG(bias->mem), RUMUS__ARG(b_off),
                          RUMUS__ARG(nrows), RUMUS__ARG(ncols)};
    size_t global[2] = {nvr, (size_t)nrows};
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 2, global, local, 6, args));
  }
  return RUMUS_OK;
}

/* Rows per chunk of bias_grad: at least BG_RC_*, and no more than
 * BG_MAX_CHUNKS chunks.  The work-group variant cuts the rows into about
 * enough chunks for BG_GROUPS_PER_CU work-groups per compute unit (fewer
 * chunks: less to fold).  It depends on the shape, variant and device only,
 * so the summation order (and the result) is the same on every run. */
static size_t bg_rows_per_chunk(const rumus_ctx *ctx, int gpu, size_t rows,
                                size_t gx) {
  size_t rc = gpu ? BG_RC_GPU : BG_RC_CPU;
  if (gpu && rows <= BG_ONE_CHUNK_GPU) {
    rc = rows; /* the fold would cost more than the parallelism saves */
  } else if (gpu) {
    size_t want = BG_GROUPS_PER_CU * (size_t)ctx->compute_units / gx;
    if (want < 1) want = 1;
    const size_t r = (rows + want - 1) / want;
    if (rc < r) rc = r;
  }
  const size_t rc_cap = (rows + BG_MAX_CHUNKS - 1) / BG_MAX_CHUNKS;
  if (rc < rc_cap) rc = rc_cap;
  /* The work-group variant's column blocks each need a ticket word. */
  if (gpu && gx > RUMUS__TICKETS) rc = rows;
  return rc;
}

/* One bias_grad call: its tensors, shape, chunks and program. */
typedef struct {
  const rumus_tensor *dy;
  rumus_tensor *dbias;
  cl_mem part; /* float partial rows, or NULL with one chunk */
  size_t rows, cols, rc, chunks, gx;
  const char *opts;
  const char *db_sfx; /* "_f32" for an F32 dbias of 16-bit dy, else "" */
} bg_call;

/* The work-group variant: one launch; with several chunks the last
 * work-group of each column block folds them. */
static int bg_launch_wg(rumus_ctx *ctx, const char *op, const bg_call *c) {
  const size_t wg = rumus__reduce_wg(ctx);
  char kname[32];
  snprintf(kname, sizeof kname, "bias_grad_wg%s", c->db_sfx);
  const rumus__kernel_ref k = {FILE_CL, c->opts, kname};
  cl_ulong dy_off = rumus__off(c->dy), db_off = rumus__off(c->dbias);
  cl_ulong nrows = c->rows, ncols = c->cols, nrc = c->rc;
  cl_mem pm = c->part ? c->part : c->dbias->mem; /* unused with one chunk */
  rumus__arg args[9] = {RUMUS__ARG(c->dy->mem),    RUMUS__ARG(dy_off),
                        RUMUS__ARG(c->dbias->mem), RUMUS__ARG(db_off),
                        RUMUS__ARG(pm),            RUMUS__ARG(nrows),
                        RUMUS__ARG(ncols),         RUMUS__ARG(nrc),
                        RUMUS__ARG(ctx->status)};
  /* Each work-item takes 4 columns: a work-group covers 4 tc. */
  size_t global[2] = {c->gx * wg, c->chunks}, local[2] = {wg, 1};
  return rumus__launch(ctx, op, &k, 2, global, local, 9, args);
}


/* The columns per work-item of bias_grad_row: BG_COLS_CPU, halved while
 * the blocks and chunks give fewer than two work-items per compute unit
 * (down to BG_COLS_MIN_CPU). */
static size_t bg_block_cols(const rumus_ctx *ctx, size_t cols, size_t chunks) {
  const size_t want = 2 * (size_t)ctx->compute_units;
  size_t bw = BG_COLS_CPU;
  while (bw > BG_COLS_MIN_CPU && (cols + bw - 1) / bw * chunks < want)
    bw /= 2;
  return bw;
}

/* The row variant: bias_grad_row into dbias (one chunk) or into the float
 * partial rows, which bias_grad_fold then sums into dbias. */
static int bg_launch_row(rumus_ctx *ctx, const char *op, const bg_call *c,
                         size_t ls) {
  cl_mem out = c->part ? c->part : c->dbias->mem;
  cl_ulong db_off = rumus__off(c->dbias), dy_off = rumus__off(c->dy);
  cl_ulong out_off = c->part ? 0 : db_off;
  const size_t bw = bg_block_cols(ctx, c->cols, c->chunks);
  cl_ulong nrows = c->rows, ncols = c->cols, nrc = c->rc, nbw = bw;
  rumus__arg args[8] = {RUMUS__ARG(c->dy->mem), RUMUS__ARG(dy_off),
                        RUMUS__ARG(out),        RUMUS__ARG(out_off),
                        RUMUS__ARG(nrows),      RUMUS__ARG(ncols),
                        RUMUS__ARG(nrc),        RUMUS__ARG(nbw)};
  /* Partial rows are float: the _f32 entry unless the storage is F32. */
  const char *sfx = c->part ? (c->dy->dtype == RUMUS_F32 ? "" : "_f32")
                            : c->db_sfx;
  char kname[32];
  snprintf(kname, sizeof kname, "bias_grad_row%s", sfx);
  const rumus__kernel_ref k = {FILE_CL, c->opts, kname};
  const size_t blocks = (c->cols + bw - 1) / bw;
  size_t global[2] = {blocks, c->chunks}, local[2] = {blocks >= 8 ? 8 : 1, 1};
  RUMUS__FORWARD(rumus__launch(ctx, op, &k, 2, global, local, 8, args));
  if (!c->part) return RUMUS_OK;
  snprintf(kname, sizeof kname, "bias_grad_fold%s", c->db_sfx);
  const rumus__kernel_ref kf = {FILE_CL, c->opts, kname};
  cl_ulong nchunks = c->chunks;
  rumus__arg fargs[5] = {RUMUS__ARG(c->part), RUMUS__ARG(nchunks),
                         RUMUS__ARG(c->dbias->mem), RUMUS__ARG(db_off),
                         RUMUS__ARG(ncols)};
  size_t fglobal = c->cols, flocal = ls;
  return rumus__launch(ctx, op, &kf, 1, &fglobal, &flocal, 5, fargs);
}

int rumus_bias_grad(rumus_ctx *ctx, const rumus_tensor *dy,
                    rumus_tensor *dbias) {
  const char *op = "rumus_bias_grad";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_bias(ctx, op, "dy", dy, "dbias", dbias, 1));
  bg_call c = {dy, dbias, NULL, 0, 0, 0, 0, 0, NULL,
               dbias->dtype == dy->dtype ? "" : "_f32"};
  rumus__rows_cols(dy, &c.rows, &c.cols);
  if (c.cols == 0) return RUMUS_OK;
  if (c.rows == 0) return rumus_tensor_fill(dbias, 0.0f); /* empty sums */
  geom g;
  char opts[192];
  const rumus_tensor *al_ts[2] = {dy, dbias};
  plan_flat(ctx, dy->dtype, al_ts, 2, c.cols, &g, opts, sizeof opts);
  c.opts = opts;
  const size_t tc = rumus__reduce_wg(ctx) >= 8 ? 8 : rumus__reduce_wg(ctx);
  c.gx = (c.cols + 4 * tc - 1) / (4 * tc); /* column blocks (GPU) */
  c.rc = bg_rows_per_chunk(ctx, g.gpu, c.rows, c.gx);
  c.chunks = (c.rows + c.rc - 1) / c.rc;
  RUMUS__FAIL_IF(c.chunks > 1 && c.chunks > (size_t)-1 / sizeof(float) /
                                        c.cols,
                 ctx, RUMUS_ESIZE, "%s: %zu x %zu partial sums overflow size_t",
                 op, c.chunks, c.cols);
  rumus__scratch_begin(ctx);
  int st = c.chunks > 1 ? rumus__scratch_slot(ctx, op, RUMUS__SCRATCH_PARTIALS,
                                              c.chunks * c.cols *
                                                  sizeof(float),
                                              &c.part)
                        : RUMUS_OK;
  if (st == RUMUS_OK)
    st = g.gpu ? bg_launch_wg(ctx, op, &c) : bg_launch_row(ctx, op, &c, g.ls);
  rumus__scratch_end(ctx);
  return st;
}

/* ---- Casts ------------------------------------------------------------- */

static int is_floating(rumus_dtype d) {
  return d == RUMUS_F32 || d == RUMUS_F16 || d == RUMUS_BF16;
}

/* src F32, F16, BF16 or I32 and dst F32, F16 or BF16, or both of one type
 * (a copy, of any type); equal element counts; dst the same bytes as src
 * only when the types match. */
static int check_cast(rumus_ctx *ctx, const char *op, const rumus_tensor *src,
                      const rumus_tensor *dst) {
  RUMUS__FAIL_IF(src == NULL, ctx, RUMUS_ENULL, "%s: src is NULL", op);
  RUMUS__FAIL_IF(dst == NULL, ctx, RUMUS_ENULL, "%s: dst is NULL", op);
  RUMUS__FAIL_IF(src->ctx != ctx, ctx, RUMUS_EINVAL,
                 "%s: src belongs to another context", op);
  RUMUS__FAIL_IF(dst->ctx != ctx, ctx, RUMUS_EINVAL,
                 "%s: dst belongs to another context", op);
  if (src->dtype != dst->dtype) {
    RUMUS__FAIL_IF(!is_floating(dst->dtype), ctx, RUMUS_EDTYPE,
                   "%s: dst is %s, src %s: casts go to f32, f16 or bf16 "
                   "(to another type only from the same type, a copy)", op,
                   rumus_dtype_name(dst->dtype), rumus_dtype_name(src->dtype));
    RUMUS__FAIL_IF(!is_floating(src->dtype) && src->dtype != RUMUS_I32, ctx,
                   RUMUS_EDTYPE, "%s: src is %s: casts go from f32, f16, "
                   "bf16 or i32", op, rumus_dtype_name(src->dtype));
  }
  RUMUS__FORWARD(check_same_numel(ctx, op, "src", src, "dst", dst));
  return rumus__check_overlap(ctx, op, "src", src, "dst", dst,
                              src->dtype == dst->dtype);
}

int rumus_cast(rumus_ctx *ctx, const rumus_tensor *src, rumus_tensor *dst) {
  const char *op = "rumus_cast";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_cast(ctx, op, src, dst));
  if (src->numel == 0) return RUMUS_OK;
  if (src->dtype == dst->dtype) {
    if (src->mem == dst->mem && src->offset == dst->offset) return RUMUS_OK;
    cl_int e = clEnqueueCopyBuffer(ctx->queue, src->mem, dst->mem,
                                   src->offset, dst->offset,
                                   rumus_tensor_nbytes(src), 0, NULL, NULL);
    if (e != CL_SUCCESS)
      return rumus__fail_cl(ctx, e, "%s: clEnqueueCopyBuffer", op);
    return RUMUS_OK;
  }
  char kname[48];
  snprintf(kname, sizeof kname, "cast_%s_%s", rumus_dtype_name(src->dtype),
           rumus_dtype_name(dst->dtype));
  const rumus_tensor *ts[2] = {src, dst};
  /* cast.cl has no storage of its own: its options are those of the F32
   * element-wise program, so every cast shares one program per variant
   * and alignment. */
  return run_flat_in(ctx, op, FILE_CAST, RUMUS_F32, kname, ts, 2, src->numel,
                     0, 0.0f);
}

/* The F32 programs of elementwise.cl and the program of cast.cl (every
 * pair of types): both alignments on the GPU variant, one program each on
 * the CPU variant. */
int rumus__elementwise_warm(rumus_ctx *ctx) {
  const int aligns = rumus__gpu_variant(ctx) ? 2 : 1;
  for (int align4 = 0; align4 < aligns; align4++) {
    geom g;
    char opts[192];
    cl_program p;
    get_geom(ctx, RUMUS_F32, align4, &g);
    ew_options(ctx, &g, opts, sizeof opts);
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &p));
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CAST, opts, &p));
  }
  return RUMUS_OK;
}
