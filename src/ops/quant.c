/*
 * quant.c - int8 block quantization (Q8): rumus_quantize_q8,
 * rumus_dequantize_q8 and rumus_matmul_q8 (kernels in cl/quant.cl).
 *
 * One program per (floating storage of x / y / A, storage of C, variant,
 * alignment) holds every kernel of the family: quantize and dequantize
 * use the program of their float tensor with an F32 C, so they share it
 * with the F32-output products.  rumus_matmul_q8 runs
 *   GPU variant  M <= 8: q8_mv16_<MB>, B read once (memory-bound: a warp
 *                per RPW rows of B or per part of K of them, 16-byte
 *                loads per lane);
 *                M > 8:  q8_tiled, 64 x 64 tiles through local memory;
 *   CPU variant  q8_rows_<MR>, barrier-free register blocks; M <= 8 in one
 *                row block (B read once).
 * Leading dimensions of A and C are rows: a batch of matrices times one
 * weight matrix is one product with M = the rows of every batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "quant.cl";

#define Q8_BS_DEFAULT RUMUS_Q8_BLOCK
/* Most work-items of one quantize / dequantize launch (one per block). */
#define FLAT_MAX ((size_t)1 << 30)
/* Most rows of B per matrix-product launch (C's pitch stays N). */
#define N_PIECE ((size_t)1 << 24)
/* Work-groups along grid dimension 1 (CUDA's limit, NVIDIA's OpenCL). */
#define GRID_MAX ((size_t)65535)

/* q8_mv16: work-group size (4 warps: a GPU holds as many work-groups of 8
 * rows of B as its registers allow, and N = 4096 makes 512 of them) and
 * lanes per row group (Q8_LPR, a warp); q8_tiled: 64 x 64 tiles of 16 x
 * 16 work-items; flat kernels' local size on a GPU. */
enum { MV_WG = 128, MV_LPR = 32, TILE = 64, TILE_LS = 16, FLAT_LS = 64 };
/* The GPU kernels need these work-items (q8_tiled) and this local memory
 * (q8_mv16_8: 8 x 4 partial sums of 128 work-items); a device without them
 * runs the CPU kernels. */
#define GPU_MIN_WG 256
#define GPU_MIN_LOCAL (16 * 1024)

/* Row buckets of the products with M <= 8 rows: q8_rows' rows of B per
 * work-item (NR); M > 8 on the CPU variant takes the 4-row kernel. */
static const struct {
  size_t mb, rows_nr;
} BUCKETS[] = {{1, 8}, {2, 4}, {4, 4}, {8, 2}};
#define N_BUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])
#define CPU_BIG 2 /* the bucket of M > 8 on the CPU variant */

/* q8_rows' rows of B per work-item on this context: the table's, which
 * fill 16 or 8 of the 32 AVX-512 registers with float16 accumulators,
 * halved where the native float vectors are narrower than 16 lanes (AVX2:
 * a float16 is two of its 16 registers).  RUMUS_Q8_CPU_NR=wide or narrow
 * sets the choice (A/B runs). */
static size_t rows_nr(const rumus_ctx *ctx, size_t bucket) {
  const char *e = getenv("RUMUS_Q8_CPU_NR");
  int narrow = ctx->float_width < 16;
  if (e && strcmp(e, "wide") == 0) narrow = 0;
  if (e && strcmp(e, "narrow") == 0) narrow = 1;
  static const size_t NARROW[N_BUCKETS] = {4, 2, 1, 1};
  return narrow ? NARROW[bucket] : BUCKETS[bucket].rows_nr;
}

/* q8_mv16_<MB>'s rows of B per row group (RPW), row groups per rows (KS,
 * splitting K) and chunks in flight (U) per bucket, as in cl/quant.cl's
 * Q8_V16_KERNEL lines: the best of eight settings on the H200 at M = 1
 * (4, 1, 2) and at M = 8 (4, 2, 4), of seven at M = 2 to 6. */
static const struct {
  int rpw, ks, u;
} MV16[] = {{4, 1, 2}, {4, 1, 2}, {4, 2, 4}, {4, 2, 4}};

/* ---- Programs ----------------------------------------------------------- */

typedef struct {
  rumus_dtype storage; /* x, y or A */
  rumus_dtype ct;      /* C (F32 for quantize and dequantize) */
  int gpu, align;      /* the GPU kernels; aligned q rows and A rows */
  int align16;         /* q rows 16-byte aligned (q8_mv16's typed loads) */
  int mv16;            /* holds q8_mv16 (products with M <= 8 only: its
                          kernels triple a program's build time) */
} q8_prog;

/* ---- Choices by environment ---------------------------------------------- */

/* A tuning override of q8_mv16 for every MB: variable `name` when it is
 * one of the digits in `allowed`, else 0 (the kernels' defaults). */
static int mv16_knob(const char *name, const char *allowed) {
  const char *v = getenv(name);
  if (v == NULL || v[0] == '\0' || v[1] != '\0' || !strchr(allowed, v[0]))
    return 0;
  return v[0] - '0';
}

/* q8_mv16's rows of B per row group, row groups per rows and chunks in
 * flight: RUMUS_Q8_MV16_RPW (1, 2, 4), RUMUS_Q8_MV16_KS (1, 2, 4: row
 * groups of a work-group, WG / Q8_LPR = 4, split K) and RUMUS_Q8_MV16_U
 * (1, 2, 4, 8); MB RPW <= 32 holds for all. */
typedef struct {
  int rpw, ks, u;
} mv16_knobs;
static mv16_knobs mv16_env(void) {
  const mv16_knobs k = {mv16_knob("RUMUS_Q8_MV16_RPW", "124"),
                        mv16_knob("RUMUS_Q8_MV16_KS", "124"),
                        mv16_knob("RUMUS_Q8_MV16_U", "1248")};
  return k;
}

/* 1 when the context runs the GPU kernels. */
static int use_gpu(const rumus_ctx *ctx) {
  return rumus__gpu_variant(ctx) && ctx->max_wg >= GPU_MIN_WG &&
         ctx->local_mem >= GPU_MIN_LOCAL;
}

/* The options of the program (warm-up and launches). */
static void q8_options(const rumus_ctx *ctx, const q8_prog *p, char *buf,
                       size_t len) {
  char head[96], v16[96] = "";
  rumus__options_head(head, sizeof head, p->storage, MV_WG, p->align);
  if (p->gpu && p->mv16) {
    /* q8_mv16 and its overrides only where it may run (M <= 8). */
    const mv16_knobs k = mv16_env();
    size_t n = (size_t)snprintf(v16, sizeof v16, " -DQ8_MV16=1");
    if (p->align16) n += snprintf(v16 + n, sizeof v16 - n, " -DQ8_ALIGN16=1");
    if (k.rpw)
      n += snprintf(v16 + n, sizeof v16 - n, " -DQ8_V16_RPW=%d", k.rpw);
    if (k.ks)
      n += snprintf(v16 + n, sizeof v16 - n, " -DQ8_V16_KS=%d", k.ks);
    if (k.u) snprintf(v16 + n, sizeof v16 - n, " -DQ8_V16_U=%d", k.u);
  }
  if (!p->gpu)
    snprintf(v16, sizeof v16, " -DQ8_NR1=%zu -DQ8_NR2=%zu -DQ8_NR4=%zu "
             "-DQ8_NR8=%zu", rows_nr(ctx, 0), rows_nr(ctx, 1),
             rows_nr(ctx, 2), rows_nr(ctx, 3));
  snprintf(buf, len, "%s -DQ8_CT=%s -DQ8_GPU=%d -DQ8_LPR=%d%s", head,
           rumus__storage_tag(p->ct), p->gpu, MV_LPR, v16);
}

/* ---- Checks ------------------------------------------------------------- */

/* The block size (0: 32) and its log2; a power of two from 16 to 256. */
static int check_bs(rumus_ctx *ctx, const char *op, size_t block_size,
                    size_t *bs, unsigned *shift) {
  *bs = block_size ? block_size : Q8_BS_DEFAULT;
  RUMUS__FAIL_IF(*bs < 16 || *bs > 256 || (*bs & (*bs - 1)) != 0, ctx,
                 RUMUS_EINVAL,
                 "%s: block_size %zu is not 0 (%d) or a power of two from 16 "
                 "to 256", op, block_size, Q8_BS_DEFAULT);
  for (*shift = 0; ((size_t)1 << *shift) < *bs; (*shift)++) continue;
  return RUMUS_OK;
}

/* t has at least one dimension (rows of its last extent). */
static int check_rows(rumus_ctx *ctx, const char *op, const char *name,
                      const rumus_tensor *t) {
  RUMUS__FAIL_IF(t->ndim < 1, ctx, RUMUS_ESHAPE,
                 "%s: %s must have at least one dimension", op, name);
  return RUMUS_OK;
}

/* sc is F16 with t's extents but the last, ceil(K / bs) blocks there. */
static int check_scales(rumus_ctx *ctx, const char *op, const char *sn,
                        const rumus_tensor *sc, const char *tn,
                        const rumus_tensor *t, size_t bs) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, sn, sc, RUMUS_F16));
  char ss[RUMUS__SHAPE_BUF], ts[RUMUS__SHAPE_BUF];
  rumus__shape_str(sc, ss, sizeof ss);
  rumus__shape_str(t, ts, sizeof ts);
  RUMUS__FAIL_IF(sc->ndim != t->ndim, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must have the %d dimensions of %s %s", op, sn, ss,
                 t->ndim, tn, ts);
  const int last = t->ndim - 1;
  for (int i = 0; i < last; i++)
    RUMUS__FAIL_IF(sc->shape[i] != t->shape[i], ctx, RUMUS_ESHAPE,
                   "%s: %s %s and %s %s differ on axis %d", op, sn, ss, tn,
                   ts, i);
  const size_t k = t->shape[last], nb = (k + bs - 1) / bs;
  RUMUS__FAIL_IF(sc->shape[last] != nb, ctx, RUMUS_ESHAPE,
                 "%s: %s %s has %zu on axis %d, expected %zu blocks of %zu "
                 "for the %zu elements of %s %s there",
                 op, sn, ss, sc->shape[last], last, nb, bs, k, tn, ts);
  return RUMUS_OK;
}

/* ---- Quantize and dequantize --------------------------------------------- */

/* Runs q8_quantize or q8_dequantize over the rows x nb blocks: ts are the
 * tensors in kernel order (float, int8, scales or int8, scales, float). */
static int run_blocks(rumus_ctx *ctx, const char *op, const char *kname,
                      rumus_dtype storage, const rumus_tensor *const *ts,
                      size_t rows, size_t k, size_t bs) {
  const q8_prog p = {storage, RUMUS_F32, use_gpu(ctx), 0, 0, 0};
  char opts[256];
  q8_options(ctx, &p, opts, sizeof opts);
  const rumus__kernel_ref kr = {FILE_CL, opts, kname};
  const size_t nb = (k + bs - 1) / bs, blocks = rows * nb;
  cl_ulong offs[3], R = rows, K = k, NB = nb, BS = bs;
  for (int i = 0; i < 3; i++) offs[i] = rumus__off(ts[i]);
  for (size_t g0 = 0; g0 < blocks; g0 += FLAT_MAX) {
    const size_t n = blocks - g0 < FLAT_MAX ? blocks - g0 : FLAT_MAX;
    cl_ulong G0 = g0;
    const rumus__arg args[] = {
        RUMUS__ARG(ts[0]->mem), RUMUS__ARG(offs[0]), RUMUS__ARG(ts[1]->mem),
        RUMUS__ARG(offs[1]),    RUMUS__ARG(ts[2]->mem), RUMUS__ARG(offs[2]),
        RUMUS__ARG(R),          RUMUS__ARG(K), RUMUS__ARG(NB),
        RUMUS__ARG(BS),         RUMUS__ARG(G0)};
    const size_t local = p.gpu ? FLAT_LS : rumus__row_local(ctx, n);
    RUMUS__FORWARD(rumus__launch(ctx, op, &kr, 1, &n, &local,
                                 sizeof args / sizeof args[0], args));
  }
  return RUMUS_OK;
}

int rumus_quantize_q8(rumus_ctx *ctx, const rumus_tensor *x, rumus_tensor *q,
                      rumus_tensor *scales, size_t block_size) {
  static const char op[] = "rumus_quantize_q8";
  if (ctx == NULL) return RUMUS_ENULL;
  size_t bs;
  unsigned shift;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "x", x));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "q", q, RUMUS_I8));
  RUMUS__FORWARD(check_bs(ctx, op, block_size, &bs, &shift));
  RUMUS__FORWARD(check_rows(ctx, op, "x", x));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "x", x, "q", q));
  RUMUS__FORWARD(check_scales(ctx, op, "scales", scales, "x", x, bs));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "q", q, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "scales", scales, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "q", q, "scales", scales, 0));
  size_t rows, k;
  rumus__rows_cols(x, &rows, &k);
  if (rows == 0 || k == 0) return RUMUS_OK;
  const rumus_tensor *ts[3] = {x, q, scales};
  return run_blocks(ctx, op, "q8_quantize", x->dtype, ts, rows, k, bs);
}

int rumus_dequantize_q8(rumus_ctx *ctx, const rumus_tensor *q,
                        const rumus_tensor *scales, size_t block_size,
                        rumus_tensor *y) {
  static const char op[] = "rumus_dequantize_q8";
  if (ctx == NULL) return RUMUS_ENULL;
  size_t bs;
  unsigned shift;
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "q", q, RUMUS_I8));
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "y", y));
  RUMUS__FORWARD(check_bs(ctx, op, block_size, &bs, &shift));
  RUMUS__FORWARD(check_rows(ctx, op, "q", q));
  RUMUS__FORWARD(rumus__check_same_shape(ctx, op, "q", q, "y", y));
  RUMUS__FORWARD(check_scales(ctx, op, "scales", scales, "q", q, bs));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "q", q, "y", y, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "scales", scales, "y", y, 0));
  size_t rows, k;
  rumus__rows_cols(q, &rows, &k);
  if (rows == 0 || k == 0) return RUMUS_OK;
  const rumus_tensor *ts[3] = {q, scales, y};
  return run_blocks(ctx, op, "q8_dequantize", y->dtype, ts, rows, k, bs);
}

/* ---- Matrix product ------------------------------------------------------ */

/* A checked product: tensors, C = A [M, K] B^T with B [N, K]. */
typedef struct {
  const rumus_tensor *A, *q, *sc;
  rumus_tensor *C;
  size_t m, n, k, nb;
  unsigned shift;
} q8_mm;

/* Index into BUCKETS of the smallest bucket that holds m rows (m <= 8). */
static size_t bucket_of(size_t m) {
  size_t b = 0;
  while (BUCKETS[b].mb < m) b++;
  return b;
}

/* One launch of kernel kr over rows [m0, m0 + mc) of A and C and rows
 * [n0, n0 + nc) of B; global and local as for rumus__launch. */
static int launch_mm(rumus_ctx *ctx, const char *op, const q8_mm *p,
                     const rumus__kernel_ref *kr, size_t m0, size_t mc,
                     size_t n0, size_t nc, cl_uint dims, const size_t *global,
                     const size_t *local) {
  cl_ulong ao = rumus__off(p->A) + m0 * p->k, qo = rumus__off(p->q) + n0 * p->k;
  cl_ulong so = rumus__off(p->sc) + n0 * p->nb;
  cl_ulong co = rumus__off(p->C) + m0 * p->n + n0;
  cl_ulong M = mc, N = nc, K = p->k, ldc = p->n, NB = p->nb;
  cl_uint shift = p->shift;
  const rumus__arg args[] = {
      RUMUS__ARG(p->A->mem), RUMUS__ARG(ao), RUMUS__ARG(p->q->mem),
      RUMUS__ARG(qo),        RUMUS__ARG(p->sc->mem), RUMUS__ARG(so),
      RUMUS__ARG(p->C->mem), RUMUS__ARG(co), RUMUS__ARG(M),
      RUMUS__ARG(N),         RUMUS__ARG(K), RUMUS__ARG(ldc),
      RUMUS__ARG(NB),        RUMUS__ARG(shift)};
  return rumus__launch(ctx, op, kr, dims, global, local,
                       sizeof args / sizeof args[0], args);
}

/* GPU, M <= 8: q8_mv16_<MB>, every row of A in one launch per piece of
 * B. */
static int run_mv(rumus_ctx *ctx, const char *op, const q8_mm *p,
                  const char *opts) {
  const size_t b = bucket_of(p->m);
  const mv16_knobs k = mv16_env();
  const size_t rpw = (size_t)(k.rpw ? k.rpw : MV16[b].rpw);
  const size_t ks = (size_t)(k.ks ? k.ks : MV16[b].ks);
  char kname[24];
  snprintf(kname, sizeof kname, "q8_mv16_%zu", BUCKETS[b].mb);
  const rumus__kernel_ref kr = {FILE_CL, opts, kname};
  const size_t rows_per_group = MV_WG / MV_LPR / ks * rpw;
  for (size_t n0 = 0; n0 < p->n; n0 += N_PIECE) {
    const size_t nc = p->n - n0 < N_PIECE ? p->n - n0 : N_PIECE;
    const size_t global = (nc + rows_per_group - 1) / rows_per_group * MV_WG;
    const size_t local = MV_WG;
    RUMUS__FORWARD(
        launch_mm(ctx, op, p, &kr, 0, p->m, n0, nc, 1, &global, &local));
  }
  return RUMUS_OK;
}

/* GPU, M > 8: q8_tiled over 64 x 64 tiles, at most GRID_MAX row tiles per
 * launch. */
static int run_tiled(rumus_ctx *ctx, const char *op, const q8_mm *p,
                     const char *opts) {
  const rumus__kernel_ref kr = {FILE_CL, opts, "q8_tiled"};
  const size_t local[2] = {TILE_LS, TILE_LS}, rows_max = GRID_MAX * TILE;
  for (size_t n0 = 0; n0 < p->n; n0 += N_PIECE) {
    const size_t nc = p->n - n0 < N_PIECE ? p->n - n0 : N_PIECE;
    for (size_t m0 = 0; m0 < p->m; m0 += rows_max) {
      const size_t mc = p->m - m0 < rows_max ? p->m - m0 : rows_max;
      const size_t global[2] = {(nc + TILE - 1) / TILE * TILE_LS,
                                (mc + TILE - 1) / TILE * TILE_LS};
      RUMUS__FORWARD(
          launch_mm(ctx, op, p, &kr, m0, mc, n0, nc, 2, global, local));
    }
  }
  return RUMUS_OK;
}

/* CPU: q8_rows_<MR> over (row blocks of A, column blocks of C).  A
 * work-group takes 8 row blocks of one column block when there are as
 * many (PoCL runs them in turn on one core: the rows of B stay in its
 * cache), else column blocks. */
static int run_rows(rumus_ctx *ctx, const char *op, const q8_mm *p,
                    const char *opts) {
  const size_t b = p->m <= 8 ? bucket_of(p->m) : CPU_BIG;
  const size_t mr = BUCKETS[b].mb, nr = rows_nr(ctx, b);
  char kname[16];
  snprintf(kname, sizeof kname, "q8_rows_%zu", mr);
  const rumus__kernel_ref kr = {FILE_CL, opts, kname};
  const size_t mblocks = (p->m + mr - 1) / mr;
  for (size_t n0 = 0; n0 < p->n; n0 += N_PIECE) {
    const size_t nc = p->n - n0 < N_PIECE ? p->n - n0 : N_PIECE;
    const size_t nblocks = (nc + nr - 1) / nr;
    const size_t global[2] = {mblocks, nblocks};
    size_t local[2] = {1, 1};
    if (mblocks >= 8) local[0] = 8;
    else local[1] = rumus__row_local(ctx, nblocks);
    RUMUS__FORWARD(
        launch_mm(ctx, op, p, &kr, 0, p->m, n0, nc, 2, global, local));
  }
  return RUMUS_OK;
}

static int run_mm(rumus_ctx *ctx, const char *op, const q8_mm *p) {
  q8_prog g = {p->A->dtype, p->C->dtype, use_gpu(ctx), 0, 0, 0};
  /* Typed loads of 4 int8 of q rows and of 4 elements of A rows; with
   * q8_mv16, of 16 int8 of q rows. */
  g.align = g.gpu && p->k % 4 == 0 && rumus__aligned(p->q, 0, 4) &&
            rumus__aligned(p->A, 0, 4);
  g.mv16 = g.gpu && p->m <= 8;
  g.align16 =
      g.mv16 && g.align && p->k % 16 == 0 && rumus__aligned(p->q, 0, 16);
  char opts[256];
  q8_options(ctx, &g, opts, sizeof opts);
  if (!g.gpu) return run_rows(ctx, op, p, opts);
  return p->m <= 8 ? run_mv(ctx, op, p, opts)
                   : run_tiled(ctx, op, p, opts);
}

/* C is F32 or A's type, with A's leading extents and N last. */
static int check_c(rumus_ctx *ctx, const char *op, const rumus_tensor *A,
                   const rumus_tensor *C, size_t n) {
  RUMUS__FAIL_IF(C == NULL, ctx, RUMUS_ENULL, "%s: C is NULL", op);
  RUMUS__FAIL_IF(C->ctx != ctx, ctx, RUMUS_EINVAL,
                 "%s: C belongs to another context", op);
  RUMUS__FAIL_IF(C->dtype != RUMUS_F32 && C->dtype != A->dtype, ctx,
                 RUMUS_EDTYPE, "%s: C is %s, expected f32 or %s (the type "
                 "of A)", op, rumus_dtype_name(C->dtype),
                 rumus_dtype_name(A->dtype));
  char sa[RUMUS__SHAPE_BUF], sc[RUMUS__SHAPE_BUF];
  rumus__shape_str(A, sa, sizeof sa);
  rumus__shape_str(C, sc, sizeof sc);
  RUMUS__FAIL_IF(C->ndim != A->ndim, ctx, RUMUS_ESHAPE,
                 "%s: C %s must have the %d dimensions of A %s", op, sc,
                 A->ndim, sa);
  const int last = A->ndim - 1;
  for (int i = 0; i < last; i++)
    RUMUS__FAIL_IF(C->shape[i] != A->shape[i], ctx, RUMUS_ESHAPE,
                   "%s: C %s and A %s differ on axis %d", op, sc, sa, i);
  RUMUS__FAIL_IF(C->shape[last] != n, ctx, RUMUS_ESHAPE,
                 "%s: C %s has %zu on axis %d, expected N = %zu (the rows of "
                 "Bq)", op, sc, C->shape[last], last, n);
  return RUMUS_OK;
}

/* A [..., K] floating and Bq [N, K] int8. */
static int check_ab(rumus_ctx *ctx, const char *op, const rumus_tensor *A,
                    const rumus_tensor *Bq) {
  char sa[RUMUS__SHAPE_BUF], sb[RUMUS__SHAPE_BUF];
  rumus__shape_str(A, sa, sizeof sa);
  rumus__shape_str(Bq, sb, sizeof sb);
  RUMUS__FAIL_IF(Bq->ndim != 2, ctx, RUMUS_ESHAPE,
                 "%s: Bq %s must be 2-D [N, K]", op, sb);
  RUMUS__FORWARD(check_rows(ctx, op, "A", A));
  RUMUS__FAIL_IF(A->shape[A->ndim - 1] != Bq->shape[1], ctx, RUMUS_ESHAPE,
                 "%s: A %s has K = %zu on axis %d, Bq %s has %zu on axis 1",
                 op, sa, A->shape[A->ndim - 1], A->ndim - 1, sb,
                 Bq->shape[1]);
  return RUMUS_OK;
}

int rumus_matmul_q8(rumus_ctx *ctx, const rumus_tensor *A,
                    const rumus_tensor *Bq, const rumus_tensor *Bscales,
                    size_t block_size, rumus_tensor *C) {
  static const char op[] = "rumus_matmul_q8";
  if (ctx == NULL) return RUMUS_ENULL;
  q8_mm p = {A, Bq, Bscales, C, 0, 0, 0, 0, 0};
  size_t bs;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "A", A));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "Bq", Bq, RUMUS_I8));
  RUMUS__FORWARD(check_bs(ctx, op, block_size, &bs, &p.shift));
  RUMUS__FORWARD(check_ab(ctx, op, A, Bq));
  RUMUS__FORWARD(check_scales(ctx, op, "Bscales", Bscales, "Bq", Bq, bs));
  RUMUS__FORWARD(check_c(ctx, op, A, C, Bq->shape[0]));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "A", A, "C", C, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "Bq", Bq, "C", C, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "Bscales", Bscales, "C", C, 0));
  rumus__rows_cols(A, &p.m, &p.k);
  p.n = Bq->shape[0];
  p.nb = (p.k + bs - 1) / bs;
  if (p.m == 0 || p.n == 0) return RUMUS_OK;
  if (p.k == 0) return rumus_tensor_fill(C, 0.0f); /* empty sums */
  return run_mm(ctx, op, &p);
}

/* The F32 programs of the current variant: on the GPU variant with
 * unaligned and aligned rows, and the same with q8_mv16 (M <= 8) and with
 * its rows 16-byte aligned. */
int rumus__quant_warm(rumus_ctx *ctx) {
  q8_prog g = {RUMUS_F32, RUMUS_F32, use_gpu(ctx), 0, 0, 0};
  char opts[256];
  cl_program prog;
  const int levels = g.gpu ? 5 : 1;
  for (int l = 0; l < levels; l++) {
    g.align = l == 1 || l >= 3;
    g.mv16 = l >= 2;
    g.align16 = l == 4;
    q8_options(ctx, &g, opts, sizeof opts);
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
  }
  return RUMUS_OK;
}
