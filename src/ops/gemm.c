/*
 * gemm.c - rumus_gemm and rumus_gemm_ex (kernels in cl/gemm.cl): argument
 * checks, the choice of variant and tile sizes, and chunked launches.
 *
 * Both entry points reduce to one strided-batched description (a
 * rumus_gemm_layout with the tensors' own offsets added) and run
 *   GPU variant  gemm_tiled: local-memory tiles and register blocks, one
 *                launch per chunk of at most GRID_MAX row tiles and batches;
 *   CPU variant  gemm_pack_a + gemm_pack_b into scratch panels, then
 *                gemm_packed, per chunk of the batch (and of K when a
 *                packed operand would exceed SCRATCH_CAP floats; later K
 *                chunks accumulate into C with beta = 1).
 * alpha == 0 or K == 0 reads neither A nor B (as BLAS): C = beta * C, and
 * beta == 1 then leaves C alone.
 *
 * Storage: A and B share one floating type T (the programs' RUMUS_STORAGE)
 * and C is T or F32 (RUMUS_STORAGE_C), so half or bfloat16 operands can
 * accumulate into a float C; every other combination is RUMUS_EDTYPE.  The
 * kernels compute in float either way.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "gemm.cl";

/* Tile parameters of gemm_tiled (the macros in gemm.cl), largest first.
 * Chosen on an NVIDIA H200 through NVIDIA's OpenCL driver (sweep of 17
 * shapes of tiles, depth, padding and double buffering; 4096^3, median of
 * 10): 128 x 128 tiles of depth 8 gave 40.3 (NN), 41.2 (TN), 38.6 (NT) and
 * 40.7 (TT) TFLOP/s, 78-85% of torch.mm FP32 with TF32 off; depth 16 was
 * 1 TFLOP/s faster on NN but 4 slower on NT.  At 1024^3 the 64 x 64 tiles
 * gave 28.7 TFLOP/s (the 128 x 128 ones 18: too few work-groups). */
typedef struct {
  int tsm, tsn, tsk, wptm, wptn, lpad, dbuf;
} tiled_cfg;
static const tiled_cfg GPU_TILES[] = {
    {128, 128, 8, 8, 8, 4, 1}, /* 256 work-items, 8 x 8 each */
    {64, 64, 16, 4, 4, 4, 1},  /* 256 work-items, 4 x 4 each */
    {32, 32, 16, 4, 4, 4, 1},  /* 64 work-items, 4 x 4 each */
};
#define N_TILES (sizeof GPU_TILES / sizeof GPU_TILES[0])

/* Register block of gemm_packed: MR rows of NV float16 vectors, MR * NV
 * accumulators + NV + 1 vectors in registers, and its local size along
 * the row blocks (work-items of a group share one B panel).  A float16
 * is one register where the device's native float vectors are 16 wide
 * (AVX-512: 6 x 4 + 4 + 1 of 32) and two where they are 8 wide (AVX2:
 * 6 x 1 takes 12 + 2 + 1 of 16), so NV follows the native width
 * (cpu_nv).  On PoCL, one AVX-512 core, 1024^3: 6 x 64 gave 109 GFLOP/s,
 * 8 x 32, 12 x 32, 14 x 32 and 4 x 64 94-101; on 2 busy cores 6 x 64,
 * 8 x 48 and 12 x 32 were within the noise, 6 x 64 ahead or level.  On
 * 2 AVX2 cores (AMD EPYC), 2048^3: 6 x 64 ran at 0.34x OpenBLAS's sgemm
 * (its 48 accumulator registers spilled), 6 x 16 at 0.95x.  Local sizes
 * 1 to 16 were within the noise. */
enum { CPU_MR = 6, CPU_LOCAL = 8 };
/* k-steps per work-item of the pack kernels (PKB in gemm.cl), local size. */
enum { PACK_KB = 16, PACK_LOCAL = 8 };

/* gemm_packed's float16 vectors per row (NV): 4 on 16-wide native float
 * vectors, else 1; RUMUS_GEMM_CPU_NV=1..4 sets it (A/B runs). */
static int cpu_nv(const rumus_ctx *ctx) {
  const char *e = getenv("RUMUS_GEMM_CPU_NV");
  if (e && e[0] >= '1' && e[0] <= '4' && e[1] == '\0') return e[0] - '0';
  return ctx->float_width >= 16 ? 4 : 1;
}

/* Work-groups per launch along grid dimensions 1 and 2 (CUDA's limit,
 * which NVIDIA's OpenCL inherits). */
#define GRID_MAX ((size_t)65535)
/* Most floats of one packed operand per launch (64 MiB, or half the
 * device's largest allocation). */
#define SCRATCH_CAP ((size_t)1 << 24)

/* ---- Checks ------------------------------------------------------------ */

static const char *type_name(rumus_dtype d) {
  return d == RUMUS_F16 ? "f16" : d == RUMUS_BF16 ? "bf16" : "f32";
}

/* A and B floating of one type T, C floating and either T or F32. */
static int check_types(rumus_ctx *ctx, const char *op, const rumus_tensor *A,
                       const rumus_tensor *B, const rumus_tensor *C) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "A", A));
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "B", B));
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "C", C));
  const char *t = type_name(A->dtype);
  RUMUS__FAIL_IF(B->dtype != A->dtype, ctx, RUMUS_EDTYPE,
                 "%s: A is %s and B is %s; A and B must have one type", op,
                 t, type_name(B->dtype));
  RUMUS__FAIL_IF(C->dtype != A->dtype && C->dtype != RUMUS_F32, ctx,
                 RUMUS_EDTYPE,
                 "%s: C is %s with A and B %s; C must be %s%s", op,
                 type_name(C->dtype), t, t,
                 A->dtype == RUMUS_F32 ? "" : " or f32");
  return RUMUS_OK;
}

static int check_trans(rumus_ctx *ctx, const char *op, const char *name,
                       rumus_transpose t) {
  RUMUS__FAIL_IF(t != RUMUS_NO_TRANS && t != RUMUS_TRANS, ctx, RUMUS_EINVAL,
                 "%s: %s is %d, not RUMUS_NO_TRANS or RUMUS_TRANS", op, name,
                 (int)t);
  return RUMUS_OK;
}

/* *out = a * b + c; 0 on size_t overflow. */
static int mul_add(size_t a, size_t b, size_t c, size_t *out) {
  if (a != 0 && b > (SIZE_MAX - c) / a) return 0;
  *out = a * b + c;
  return 1;
}

/* Checks that a batch of rows x cols views (pitch ld, stride between
 * batches) starting at element off lies inside t. */
static int check_extent(rumus_ctx *ctx, const char *op, const char *name,
                        const rumus_tensor *t, size_t off, size_t ld,
                        size_t stride, size_t rows, size_t cols,
                        size_t batch) {
  /* last = off + (batch - 1) stride + (rows - 1) ld + cols - 1 */
  size_t last;
  int ok = mul_add(batch - 1, stride, off, &last) &&
           mul_add(rows - 1, ld, last, &last) &&
           mul_add(1, cols - 1, last, &last);
  RUMUS__FAIL_IF(!ok || last >= t->numel, ctx, RUMUS_ESIZE,
                 "%s: %s view (offset %zu, %zu x %zu, leading size %zu, "
                 "batch %zu, stride %zu) reaches past its %zu elements",
                 op, name, off, rows, cols, ld, batch, stride, t->numel);
  return RUMUS_OK;
}

/* ---- Launches ---------------------------------------------------------- */

/* The problem with every offset in elements of the buffers. */
typedef struct {
  int ta, tb;
  float alpha, beta;
  const rumus_tensor *A, *B;
  rumus_tensor *C;
  rumus_gemm_layout l;
  const rumus_tensor *bias; /* [N], C's type, added to every row; or NULL */
} problem;

/* The bias arguments of the kernels.  Without a bias, has_bias 0 and a
 * buffer that is never read (C's: a NULL buffer argument is valid OpenCL,
 * but a real one leaves nothing to a driver's reading of the rules). */
typedef struct {
  cl_mem mem;
  cl_ulong off;
  cl_int on;
} bias_arg;

static bias_arg bias_of(const problem *p) {
  if (p->bias == NULL) return (bias_arg){p->C->mem, 0, 0};
  return (bias_arg){p->bias->mem, rumus__off(p->bias), 1};
}
static bias_arg no_bias(cl_mem unread) { return (bias_arg){unread, 0, 0}; }

/* A view of t from element off (of t), rows ld apart, batches stride
 * apart, whose float4 groups are all aligned. */
static int view_aligned4(const rumus_tensor *t, size_t off, size_t ld,
                         size_t stride, size_t batch) {
  return rumus__aligned(t, off, 4) && ld % 4 == 0 &&
         (batch <= 1 || stride % 4 == 0);
}

/* One program of the family: the storage of A and B and that of C, the
 * GPU variant's tiles (NULL for the CPU variant's packed kernels), the
 * transposes and the alignment. */
typedef struct {
  rumus_dtype storage, c_storage;
  const tiled_cfg *tiles;
  int ta, tb, align4;
} gemm_prog;

/* The options of the program (warm-up and launches). */
static void gemm_options(const rumus_ctx *ctx, const gemm_prog *g, char *buf,
                         size_t len) {
  char head[128];
  rumus__options_head(head, sizeof head, g->storage, rumus__reduce_wg(ctx),
                      g->align4);
  const size_t used = strlen(head);
  snprintf(head + used, sizeof head - used, " -DRUMUS_STORAGE_C=%s",
           rumus__storage_tag(g->c_storage));
  const tiled_cfg *t = g->tiles;
  if (t)
    snprintf(buf, len,
             "%s -DTA=%d -DTB=%d -DTSM=%d -DTSN=%d -DTSK=%d -DWPTM=%d "
             "-DWPTN=%d -DLPAD=%d -DDBUF=%d",
             head, g->ta, g->tb, t->tsm, t->tsn, t->tsk, t->wptm, t->wptn,
             t->lpad, t->dbuf);
  else
    snprintf(buf, len, "%s -DTA=%d -DTB=%d -DMR=%d -DNV=%d", head, g->ta,
             g->tb, CPU_MR, cpu_nv(ctx));
}

/* Whether gemm_tiled fits the device (work-group size, local memory). */
static int tiled_fits(const rumus_ctx *ctx, const tiled_cfg *t) {
  size_t wgs = (size_t)(t->tsm / t->wptm) * (size_t)(t->tsn / t->wptn);
  size_t lmem = (size_t)t->dbuf * (size_t)t->tsk *
                (size_t)(t->tsm + t->tsn + 2 * t->lpad) * sizeof(float);
  return ctx->max_wg >= wgs && ctx->local_mem >= lmem;
}

/* The tiling of the tuning override RUMUS_GEMM_TILE =
 * TSMxTSNxTSKxWPTMxWPTN[xDBUF] into *t when it is set and valid for
 * cl/gemm.cl and the device; 0 otherwise (the library's choice). */
static int tiles_from_env(const rumus_ctx *ctx, tiled_cfg *t) {
  long f[6];
  const int n = rumus__env_tiling("RUMUS_GEMM_TILE", f, 5, 6);
  if (n == 0) return 0;
  *t = (tiled_cfg){(int)f[0], (int)f[1], (int)f[2], (int)f[3], (int)f[4], 4,
                   n == 6 ? (int)f[5] : 1};
  if (t->wptm % 4 || t->wptn % 4 || t->tsk % 4 || t->tsm % t->wptm ||
      t->tsn % t->wptn || (t->dbuf != 1 && t->dbuf != 2))
    return 0;
  const long wgs = (long)(t->tsm / t->wptm) * (t->tsn / t->wptn);
  if ((long)t->tsm * t->tsk % (4 * wgs) || (long)t->tsn * t->tsk % (4 * wgs))
    return 0;
  return tiled_fits(ctx, t);
}

/* The tiles for an M x N (x batch) product: the largest whose padding
 * wastes at most a quarter of the work and that gives every compute unit
 * a work-group, else the smallest; NULL if none fits the device.  A valid
 * RUMUS_GEMM_TILE replaces the choice (kept in *env). */
static const tiled_cfg *pick_tiles(const rumus_ctx *ctx, size_t m, size_t n,
                                   size_t batch, tiled_cfg *env) {
  if (tiles_from_env(ctx, env)) return env;
  const tiled_cfg *fit = NULL;
  for (size_t i = 0; i < N_TILES; i++) {
    const tiled_cfg *t = &GPU_TILES[i];
    if (!tiled_fits(ctx, t)) continue;
    fit = t;
    double tm = (double)((m + t->tsm - 1) / t->tsm),
           tn = (double)((n + t->tsn - 1) / t->tsn);
    double waste = tm * t->tsm * tn * t->tsn / ((double)m * (double)n);
    if (waste <= 1.25 && tm * tn * (double)batch >= (double)ctx->compute_units)
      return t;
  }
  return fit;
}

/* One gemm_tiled launch over `batch` products of the views (buffer,
 * element offset, pitch, batch stride) of A, B and C. */
typedef struct {
  cl_mem mem;
  cl_ulong off, ld, stride;
} tiled_view;

static int launch_tiled(rumus_ctx *ctx, const char *op,
                        const rumus__kernel_ref *k, const tiled_cfg *t,
                        const tiled_view *a, const tiled_view *b,
                        const tiled_view *c, size_t m, size_t n, size_t kk,
                        float alpha, float beta, const bias_arg *bias,
                        size_t batch) {
  const size_t rtsm = (size_t)(t->tsm / t->wptm),
               rtsn = (size_t)(t->tsn / t->wptn);
  const size_t local[3] = {rtsn, rtsm, 1};
  const size_t global[3] = {(n + t->tsn - 1) / t->tsn * rtsn,
                            (m + t->tsm - 1) / t->tsm * rtsm, batch};
  cl_ulong M = m, N = n, K = kk;
  const rumus__arg args[] = {
      RUMUS__ARG(a->mem), RUMUS__ARG(a->off), RUMUS__ARG(a->ld),
      RUMUS__ARG(a->stride), RUMUS__ARG(b->mem), RUMUS__ARG(b->off),
      RUMUS__ARG(b->ld), RUMUS__ARG(b->stride), RUMUS__ARG(c->mem),
      RUMUS__ARG(c->off), RUMUS__ARG(c->ld), RUMUS__ARG(c->stride),
      RUMUS__ARG(M), RUMUS__ARG(N), RUMUS__ARG(K), RUMUS__ARG(alpha),
      RUMUS__ARG(beta), RUMUS__ARG(bias->mem), RUMUS__ARG(bias->off),
      RUMUS__ARG(bias->on)};
  return rumus__launch(ctx, op, k, 3, global, local,
                       sizeof args / sizeof args[0], args);
}

/* Whether the tiled program may take float4 paths on every view of p. */
static int problem_aligned4(const problem *p) {
  const rumus_gemm_layout *l = &p->l;
  /* The layout's offsets include the tensors' own: the views' offsets. */
  return view_aligned4(p->A, l->a_offset - rumus__off(p->A), l->lda,
                       l->stride_a, l->batch) &&
         view_aligned4(p->B, l->b_offset - rumus__off(p->B), l->ldb,
                       l->stride_b, l->batch) &&
         view_aligned4(p->C, l->c_offset - rumus__off(p->C), l->ldc,
                       l->stride_c, l->batch);
}

static int run_tiled(rumus_ctx *ctx, const char *op, const problem *p,
                     const tiled_cfg *t) {
  const rumus_gemm_layout *l = &p->l;
  const gemm_prog g = {p->A->dtype, p->C->dtype, t, p->ta, p->tb,
                       problem_aligned4(p)};
  char opts[320];
  gemm_options(ctx, &g, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, "gemm_tiled"};
  const bias_arg bias = bias_of(p);
  const size_t rows_max = GRID_MAX * (size_t)t->tsm;
  for (size_t b0 = 0; b0 < l->batch; b0 += GRID_MAX) {
    size_t bc = l->batch - b0 < GRID_MAX ? l->batch - b0 : GRID_MAX;
    for (size_t m0 = 0; m0 < l->m; m0 += rows_max) {
      size_t mc = l->m - m0 < rows_max ? l->m - m0 : rows_max;
      const tiled_view a = {p->A->mem,
                            l->a_offset + b0 * l->stride_a +
                                (p->ta ? m0 : m0 * l->lda),
                            l->lda, l->stride_a},
                       b = {p->B->mem, l->b_offset + b0 * l->stride_b, l->ldb,
                            l->stride_b},
                       c = {p->C->mem,
                            l->c_offset + b0 * l->stride_c + m0 * l->ldc,
                            l->ldc, l->stride_c};
      RUMUS__FORWARD(launch_tiled(ctx, op, &k, t, &a, &b, &c, mc, l->n, l->k,
                                  p->alpha, p->beta, &bias, bc));
    }
  }
  return RUMUS_OK;
}

/* ---- Split-K ------------------------------------------------------------ */

/* A product with fewer output tiles than compute units and a long K (the
 * weight gradient of a linear layer: M and N its widths, K the batch's
 * rows) would leave most of the device idle: it runs as S slices of K,
 * each a gemm_tiled product into float partials, then gemm_splitk_sum
 * adds the partials in slice order.  The sums' order is fixed by the
 * shape and the device, so the bits are the same run to run.  Slices are
 * at least SPLITK_MIN_K long (shorter ones cost more in partials than
 * they gain) and a multiple of SPLITK_ALIGN (aligned slice offsets). */
#define SPLITK_MIN_K 512
#define SPLITK_ALIGN 16
/* Work-groups of gemm_tiled that a compute unit runs at once (its 128 x 128
 * tiles: 256 work-items; two in an NVIDIA SM's 65536 registers at up to 128
 * each, which the slice counts below bear out).  Slices fill whole waves of
 * this many groups per unit: on the H200 the weight gradients of the GPT's
 * linear layers (9 to 36 output tiles for 132 compute units, K = 16384) ran
 * fastest at 29 slices, 0.99 of a whole number of such waves
 * (1152x384x16384: 857 us whole, 655 at 8 slices, 428 at 29), and a few
 * slices past a wave cost a mostly idle extra one (384x384x16384: 210 us at
 * 14 slices, 126 groups; 337 at 16, 144;
 * bench/results/h200/session-2208/u/splitk). */
#define SPLITK_GROUPS_PER_CU 2

/* The share of the slots of their waves that `groups` work-groups fill,
 * `slots` at a time: groups / (waves * slots). */
static double wave_fill(size_t groups, size_t slots) {
  const size_t waves = (groups + slots - 1) / slots;
  return (double)groups / (double)(waves * slots);
}

/* Of 2 .. smax slices for `tiles` output tiles, the most whose groups
 * fill their waves within 2% as well as the best count does (shorter
 * slices in more waves ran faster, see above). */
static size_t splitk_best(size_t tiles, size_t smax, size_t slots) {
  double best = 0.0;
  for (size_t s = 2; s <= smax; s++)
    if (wave_fill(tiles * s, slots) > best) best = wave_fill(tiles * s, slots);
  size_t s = smax;
  while (s > 2 && wave_fill(tiles * s, slots) < 0.98 * best) s--;
  return s;
}

/* The number of slices for p (1: no split).  The tuning override
 * RUMUS_GEMM_SPLITK=S forces S slices (within the limits) on any product
 * that can be split. */
static size_t splitk_slices(const rumus_ctx *ctx, const problem *p) {
  const rumus_gemm_layout *l = &p->l;
  tiled_cfg env;
  const tiled_cfg *t = tiles_from_env(ctx, &env) ? &env : NULL;
  for (size_t i = 0; i < N_TILES && t == NULL; i++)
    if (tiled_fits(ctx, &GPU_TILES[i])) t = &GPU_TILES[i];
  if (t == NULL || l->batch != 1 || l->k < 2 * SPLITK_MIN_K) return 1;
  const size_t part = l->m * rumus__round_up(l->n, 4); /* floats a slice */
  const size_t scap = SCRATCH_CAP / part;
  if (scap < 2) return 1;
  long forced; /* may cut slices shorter than SPLITK_MIN_K, for sweeps */
  if (rumus__env_tiling("RUMUS_GEMM_SPLITK", &forced, 1, 1)) {
    size_t s = (size_t)forced, most = l->k / SPLITK_ALIGN;
    if (s > most) s = most;
    return s > scap ? scap : s < 1 ? 1 : s;
  }
  size_t smax = l->k / SPLITK_MIN_K;
  if (smax > scap) smax = scap;
  if (smax < 2) return 1;
  const size_t tiles = (l->m + t->tsm - 1) / t->tsm * ((l->n + t->tsn - 1) / t->tsn);
  if (tiles >= ctx->compute_units) return 1;
  return splitk_best(tiles, smax, SPLITK_GROUPS_PER_CU * ctx->compute_units);
}

/* The slices' partials: S float matrices [M][ldp] sp apart in `mem`. */
typedef struct {
  cl_mem mem;
  size_t s, kc, ldp, sp;
} splitk_parts;

/* The partials of every slice: the first S - 1 (of kc steps each) as one
 * batched launch, the shorter last one alone. */
static int splitk_products(rumus_ctx *ctx, const char *op, const problem *p,
                           const tiled_cfg *t, int align4,
                           const splitk_parts *sp) {
  const rumus_gemm_layout *l = &p->l;
  const gemm_prog g = {p->A->dtype, RUMUS_F32, t, p->ta, p->tb, align4};
  char opts[320];
  gemm_options(ctx, &g, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, "gemm_tiled"};
  /* Element steps of one slice along K in A and B. */
  const size_t da = sp->kc * (p->ta ? l->lda : 1),
               db = sp->kc * (p->tb ? 1 : l->ldb);
  tiled_view a = {p->A->mem, l->a_offset, l->lda, da},
             b = {p->B->mem, l->b_offset, l->ldb, db},
             c = {sp->mem, 0, sp->ldp, sp->sp};
  const size_t full = sp->s - 1;
  const bias_arg none = no_bias(sp->mem);
  if (full > 0)
    RUMUS__FORWARD(launch_tiled(ctx, op, &k, t, &a, &b, &c, l->m, l->n,
                                sp->kc, p->alpha, 0.0f, &none, full));
  a.off += full * da;
  b.off += full * db;
  c.off += full * sp->sp;
  return launch_tiled(ctx, op, &k, t, &a, &b, &c, l->m, l->n,
                      l->k - full * sp->kc, p->alpha, 0.0f, &none, 1);
}

static int run_splitk(rumus_ctx *ctx, const char *op, const problem *p,
                      size_t s) {
  const rumus_gemm_layout *l = &p->l;
  splitk_parts sp;
  sp.kc = rumus__round_up((l->k + s - 1) / s, SPLITK_ALIGN);
  /* Slices a power of two long start every group's reads at addresses
   * that share their low bits (H200: 16 slices of 1024 ran 10-40% slower
   * than 14 of 1184 or 29 of 576 on all four shapes swept). */
  if ((sp.kc & (sp.kc - 1)) == 0) sp.kc += SPLITK_ALIGN;
  sp.s = (l->k + sp.kc - 1) / sp.kc;
  sp.ldp = rumus__round_up(l->n, 4);
  sp.sp = l->m * sp.ldp;
  tiled_cfg env;
  const tiled_cfg *t = pick_tiles(ctx, l->m, l->n, sp.s, &env);
  const int align4 = problem_aligned4(p);
  const gemm_prog g = {p->A->dtype, p->C->dtype, t, p->ta, p->tb, align4};
  char opts[320];
  gemm_options(ctx, &g, opts, sizeof opts);
  const rumus__kernel_ref ksum = {FILE_CL, opts, "gemm_splitk_sum"};
  rumus__scratch_begin(ctx);
  int st = rumus__scratch_slot(ctx, op, 0, sp.s * sp.sp * sizeof(float),
                               &sp.mem);
  if (st == RUMUS_OK) st = splitk_products(ctx, op, p, t, align4, &sp);
  if (st == RUMUS_OK) {
    cl_ulong ldp = sp.ldp, spp = sp.sp, S = sp.s, co = l->c_offset,
             ldc = l->ldc, M = l->m, N = l->n;
    bias_arg bias = bias_of(p);
    const rumus__arg args[] = {
        RUMUS__ARG(sp.mem),    RUMUS__ARG(ldp),      RUMUS__ARG(spp),
        RUMUS__ARG(S),         RUMUS__ARG(p->C->mem), RUMUS__ARG(co),
        RUMUS__ARG(ldc),       RUMUS__ARG(M),        RUMUS__ARG(N),
        RUMUS__ARG(p->beta),   RUMUS__ARG(bias.mem), RUMUS__ARG(bias.off),
        RUMUS__ARG(bias.on)};
    const size_t global[3] = {l->n, l->m, 1}, local[3] = {64, 4, 1};
    st = rumus__launch(ctx, op, &ksum, 3, global, local,
                       sizeof args / sizeof args[0], args);
  }
  rumus__scratch_end(ctx);
  return st;
}

static int run_packed(rumus_ctx *ctx, const char *op, const problem *p) {
  const rumus_gemm_layout *l = &p->l;
  const gemm_prog g = {p->A->dtype, p->C->dtype, NULL, p->ta, p->tb, 0};
  char opts[256];
  gemm_options(ctx, &g, opts, sizeof opts);
  const rumus__kernel_ref kpa = {FILE_CL, opts, "gemm_pack_a"},
                          kpb = {FILE_CL, opts, "gemm_pack_b"},
                          kmm = {FILE_CL, opts, "gemm_packed"};
  const size_t nv = (size_t)cpu_nv(ctx), nr = 16 * nv;
  const size_t mp = (l->m + CPU_MR - 1) / CPU_MR * CPU_MR;
  const size_t np = (l->n + nr - 1) / nr * nr;
  const size_t widest = mp > np ? mp : np;
  /* K in chunks of kc, the batch in chunks of bc, so that one packed
   * operand holds at most SCRATCH_CAP floats (or one K step). */
  size_t cap = (size_t)(ctx->max_alloc / 2 / sizeof(float));
  if (cap > SCRATCH_CAP) cap = SCRATCH_CAP;
  size_t kc = l->k, bc;
  if (kc > 0 && widest > cap / kc) kc = cap / widest;
  if (kc == 0 && l->k > 0) kc = 1;
  bc = cap / (widest * (kc > 0 ? kc : 1));
  if (bc > l->batch) bc = l->batch;
  if (bc > GRID_MAX) bc = GRID_MAX;
  if (bc == 0) bc = 1;
  const int bat_a = l->stride_a != 0, bat_b = l->stride_b != 0;
  /* The packed panels go to the context's reusable scratch buffers: fresh
   * buffers cost a page fault per 4 KiB on their first use on PoCL. */
  cl_mem ap = NULL, bp = NULL;
  rumus__scratch_begin(ctx);
  int st = rumus__scratch_slot(ctx, op, 0,
                               (bat_a ? bc : 1) * mp * kc * sizeof(float), &ap);
  if (st == RUMUS_OK)
    st = rumus__scratch_slot(ctx, op, 1,
                             (bat_b ? bc : 1) * np * kc * sizeof(float), &bp);

  cl_ulong lda = l->lda, ldb = l->ldb, ldc = l->ldc, sa = l->stride_a,
           sb = l->stride_b, sc = l->stride_c, M = l->m, N = l->n;
  const size_t lpack[3] = {PACK_LOCAL, 1, 1}, lmm[3] = {CPU_LOCAL, 1, 1};
  for (size_t b0 = 0; st == RUMUS_OK && b0 < l->batch; b0 += bc) {
    const size_t bn = l->batch - b0 < bc ? l->batch - b0 : bc;
    size_t k0 = 0;
    do { /* at least once: K == 0 still scales C */
      const size_t kn = l->k - k0 < kc ? l->k - k0 : kc;
      cl_ulong Kc = kn;
      cl_ulong ao = l->a_offset + b0 * l->stride_a + (p->ta ? k0 * l->lda : k0);
      cl_ulong bo = l->b_offset + b0 * l->stride_b + (p->tb ? k0 : k0 * l->ldb);
      cl_ulong co = l->c_offset + b0 * l->stride_c;
      cl_ulong sap = bat_a ? (cl_ulong)(mp * kn) : 0,
               sbp = bat_b ? (cl_ulong)(np * kn) : 0;
      float beta = k0 == 0 ? p->beta : 1.0f;
      /* The bias joins the last chunk's sums (C holds the earlier ones). */
      bias_arg bias = k0 + kn >= l->k ? bias_of(p) : no_bias(p->C->mem);
      const rumus__arg aa[] = {RUMUS__ARG(p->A->mem), RUMUS__ARG(ao),
                               RUMUS__ARG(lda), RUMUS__ARG(sa), RUMUS__ARG(ap),
                               RUMUS__ARG(M), RUMUS__ARG(Kc)};
      const rumus__arg ba[] = {RUMUS__ARG(p->B->mem), RUMUS__ARG(bo),
                               RUMUS__ARG(ldb), RUMUS__ARG(sb), RUMUS__ARG(bp),
                               RUMUS__ARG(N), RUMUS__ARG(Kc)};
      const rumus__arg ma[] = {
          RUMUS__ARG(ap),  RUMUS__ARG(sap), RUMUS__ARG(bp),
          RUMUS__ARG(sbp), RUMUS__ARG(p->C->mem), RUMUS__ARG(co),
          RUMUS__ARG(ldc), RUMUS__ARG(sc), RUMUS__ARG(M),
          RUMUS__ARG(N),   RUMUS__ARG(Kc), RUMUS__ARG(p->alpha),
          RUMUS__ARG(beta), RUMUS__ARG(bias.mem), RUMUS__ARG(bias.off),
          RUMUS__ARG(bias.on)};
      const size_t kbn = (kn + PACK_KB - 1) / PACK_KB;
      const size_t ga[3] = {p->ta ? mp / CPU_MR : kbn, p->ta ? kbn : mp / CPU_MR,
                            bat_a ? bn : 1};
      const size_t gb[3] = {kbn, np / nr * (p->tb ? nv : 1),
                            bat_b ? bn : 1};
      const size_t gm[3] = {mp / CPU_MR, np / nr, bn};
      if (kn > 0) {
        st = rumus__launch(ctx, op, &kpa, 3, ga, lpack, 7, aa);
        if (st == RUMUS_OK) st = rumus__launch(ctx, op, &kpb, 3, gb, lpack, 7, ba);
      }
      if (st == RUMUS_OK)
        st = rumus__launch(ctx, op, &kmm, 3, gm, lmm,
                           sizeof ma / sizeof ma[0], ma);
      k0 += kn;
    } while (st == RUMUS_OK && k0 < l->k);
  }
  rumus__scratch_end(ctx);
  return st;
}

/* Runs a checked problem: offsets of `user` plus the tensors' own. */
/* Bytes [*lo, *hi) of t's buffer that a checked view spans (first to
 * last element touched). */
static void view_bytes(const rumus_tensor *t, size_t off, size_t ld,
                       size_t stride, size_t rows, size_t cols, size_t batch,
                       size_t *lo, size_t *hi) {
  const size_t esz = rumus_dtype_size(t->dtype);
  const size_t last = off + (batch - 1) * stride + (rows - 1) * ld + cols - 1;
  *lo = t->offset + off * esz;
  *hi = t->offset + (last + 1) * esz;
}

/* C's view must not share bytes with the views of A or B that are read
 * (the kernels read A and B while C is being written). */
static int check_c_apart(rumus_ctx *ctx, const char *op, const problem *p) {
  const rumus_gemm_layout *l = &p->l;
  size_t c0, c1;
  view_bytes(p->C, l->c_offset, l->ldc, l->stride_c, l->m, l->n, l->batch,
             &c0, &c1);
  for (int i = 0; i < 2; i++) {
    const rumus_tensor *t = i ? p->B : p->A;
    if (t->mem != p->C->mem) continue;
    const int tr = i ? p->tb : p->ta;
    const size_t r = i ? (tr ? l->n : l->k) : (tr ? l->k : l->m);
    const size_t c = i ? (tr ? l->k : l->n) : (tr ? l->m : l->k);
    size_t t0, t1;
    view_bytes(t, i ? l->b_offset : l->a_offset, i ? l->ldb : l->lda,
               i ? l->stride_b : l->stride_a, r, c, l->batch, &t0, &t1);
    RUMUS__FAIL_IF(t0 < c1 && c0 < t1, ctx, RUMUS_EINVAL,
                   "%s: C (bytes %zu to %zu) and %s (bytes %zu to %zu) "
                   "overlap in one buffer", op, c0, c1, i ? "B" : "A", t0, t1);
  }
  return RUMUS_OK;
}

/* The bias of rumus_gemm_bias(): [N] of C's type, apart from C's bytes
 * (it is read while C is written). */
static int check_bias(rumus_ctx *ctx, const char *op, const problem *p) {
  const rumus_tensor *b = p->bias;
  if (b == NULL) return RUMUS_OK;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "bias", b));
  RUMUS__FAIL_IF(b->dtype != p->C->dtype, ctx, RUMUS_EDTYPE,
                 "%s: bias is %s and C %s; bias must be C's type", op,
                 type_name(b->dtype), type_name(p->C->dtype));
  char sb[RUMUS__SHAPE_BUF];
  rumus__shape_str(b, sb, sizeof sb);
  RUMUS__FAIL_IF(b->ndim != 1 || b->shape[0] != p->l.n, ctx, RUMUS_ESHAPE,
                 "%s: bias %s must be [%zu], one value per column of C", op,
                 sb, p->l.n);
  const rumus_gemm_layout *l = &p->l;
  if (b->mem != p->C->mem || l->m == 0 || l->n == 0 || l->batch == 0)
    return RUMUS_OK; /* C empty: nothing is written */
  size_t c0, c1;
  view_bytes(p->C, l->c_offset, l->ldc, l->stride_c, l->m, l->n, l->batch,
             &c0, &c1);
  const size_t b0 = b->offset, b1 = b0 + l->n * rumus_dtype_size(b->dtype);
  RUMUS__FAIL_IF(b0 < c1 && c0 < b1, ctx, RUMUS_EINVAL,
                 "%s: C (bytes %zu to %zu) and bias (bytes %zu to %zu) "
                 "overlap in one buffer", op, c0, c1, b0, b1);
  return RUMUS_OK;
}

static int run(rumus_ctx *ctx, const char *op, int ta, int tb, float alpha,
               const rumus_tensor *A, const rumus_tensor *B, float beta,
               rumus_tensor *C, const rumus_tensor *bias,
               const rumus_gemm_layout *user) {
  problem p = {ta, tb, alpha, beta, A, B, C, *user, bias};
  RUMUS__FORWARD(check_bias(ctx, op, &p));
  if (user->m == 0 || user->n == 0 || user->batch == 0) return RUMUS_OK;
  if (p.l.k == 0 || alpha == 0.0f) { /* C = beta * C (+ bias); A, B not read */
    if (beta == 1.0f && bias == NULL) return RUMUS_OK;
    p.l.k = 0;
    p.alpha = 0.0f;
  } else {
    RUMUS__FORWARD(check_c_apart(ctx, op, &p));
  }
  p.l.a_offset += rumus__off(A);
  p.l.b_offset += rumus__off(B);
  p.l.c_offset += rumus__off(C);
  tiled_cfg env;
  const tiled_cfg *t =
      rumus__gpu_variant(ctx) ? pick_tiles(ctx, p.l.m, p.l.n, p.l.batch, &env)
                              : NULL;
  if (t == NULL) return run_packed(ctx, op, &p);
  const size_t s = splitk_slices(ctx, &p);
  return s > 1 ? run_splitk(ctx, op, &p, s) : run_tiled(ctx, op, &p, t);
}

/* ---- Float products for other families ---------------------------------- */

int rumus__gemm_tiled_fits(const rumus_ctx *ctx) {
  tiled_cfg env;
  return rumus__gpu_variant(ctx) && pick_tiles(ctx, 1, 1, 1, &env) != NULL;
}

/* A float tensor of `floats` elements over buffer mem at offset 0, to
 * describe a scratch buffer as a problem's operand. */
static rumus_tensor float_view(rumus_ctx *ctx, cl_mem mem, size_t floats) {
  rumus_tensor t;
  memset(&t, 0, sizeof t);
  t.ctx = ctx;
  t.dtype = RUMUS_F32;
  t.ndim = 1;
  t.shape[0] = floats;
  t.numel = floats;
  t.mem = mem;
  return t;
}

/* gemm_tiled only (no split-K, no packed panels): it takes no scratch
 * slot, so the caller may hold them (conv's Winograd path). */
int rumus__gemm_tiled_f32(rumus_ctx *ctx, const char *op, cl_mem a,
                          size_t na, cl_mem b, size_t nb, cl_mem c, size_t nc,
                          int tb, const rumus_gemm_layout *l) {
  if (l->m == 0 || l->n == 0 || l->batch == 0) return RUMUS_OK;
  const rumus_tensor A = float_view(ctx, a, na), B = float_view(ctx, b, nb);
  rumus_tensor C = float_view(ctx, c, nc);
  const problem p = {0, tb != 0, 1.0f, 0.0f, &A, &B, &C, *l, NULL};
  tiled_cfg env;
  const tiled_cfg *t = pick_tiles(ctx, l->m, l->n, l->batch, &env);
  RUMUS__FAIL_IF(t == NULL || !rumus__gpu_variant(ctx), ctx, RUMUS_EINVAL,
                 "%s: no GEMM tiles for the Winograd products", op);
  return run_tiled(ctx, op, &p, t);
}

/* ---- Public entry points ---------------------------------------------- */

int rumus_gemm_ex(rumus_ctx *ctx, rumus_transpose ta, rumus_transpose tb,
                  float alpha, const rumus_tensor *A, const rumus_tensor *B,
                  float beta, rumus_tensor *C,
                  const rumus_gemm_layout *layout) {
  static const char op[] = "rumus_gemm_ex";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_types(ctx, op, A, B, C));
  RUMUS__FAIL_IF(layout == NULL, ctx, RUMUS_ENULL, "%s: layout is NULL", op);
  RUMUS__FORWARD(check_trans(ctx, op, "ta", ta));
  RUMUS__FORWARD(check_trans(ctx, op, "tb", tb));
  const rumus_gemm_layout *l = layout;
  /* Stored shapes: A is [M, K] or [K, M], B [K, N] or [N, K], C [M, N]. */
  const size_t a_rows = ta ? l->k : l->m, a_cols = ta ? l->m : l->k;
  const size_t b_rows = tb ? l->n : l->k, b_cols = tb ? l->k : l->n;
  RUMUS__FAIL_IF(l->lda < a_cols, ctx, RUMUS_EINVAL,
                 "%s: lda %zu is less than the %zu elements of a row of A "
                 "(%zu x %zu stored)", op, l->lda, a_cols, a_rows, a_cols);
  RUMUS__FAIL_IF(l->ldb < b_cols, ctx, RUMUS_EINVAL,
                 "%s: ldb %zu is less than the %zu elements of a row of B "
                 "(%zu x %zu stored)", op, l->ldb, b_cols, b_rows, b_cols);
  RUMUS__FAIL_IF(l->ldc < l->n, ctx, RUMUS_EINVAL,
                 "%s: ldc %zu is less than the %zu elements of a row of C "
                 "(%zu x %zu)", op, l->ldc, l->n, l->m, l->n);
  if (l->m == 0 || l->n == 0 || l->batch == 0) return RUMUS_OK;
  RUMUS__FAIL_IF(l->batch > 1 && l->stride_c == 0, ctx, RUMUS_EINVAL,
                 "%s: stride_c 0 with batch %zu would make every batch "
                 "write the same C", op, l->batch);
  RUMUS__FORWARD(check_extent(ctx, op, "C", C, l->c_offset, l->ldc,
                              l->stride_c, l->m, l->n, l->batch));
  if (l->k > 0) {
    RUMUS__FORWARD(check_extent(ctx, op, "A", A, l->a_offset, l->lda,
                                l->stride_a, a_rows, a_cols, l->batch));
    RUMUS__FORWARD(check_extent(ctx, op, "B", B, l->b_offset, l->ldb,
                                l->stride_b, b_rows, b_cols, l->batch));
  }
  return run(ctx, op, ta, tb, alpha, A, B, beta, C, NULL, l);
}

/* rumus_gemm() and rumus_gemm_bias(): the 2-D and 3-D shapes' layout. */
static int gemm_shaped(rumus_ctx *ctx, const char *op, rumus_transpose ta,
                       rumus_transpose tb, float alpha, const rumus_tensor *A,
                       const rumus_tensor *B, float beta, rumus_tensor *C,
                       const rumus_tensor *bias) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_types(ctx, op, A, B, C));
  RUMUS__FORWARD(check_trans(ctx, op, "ta", ta));
  RUMUS__FORWARD(check_trans(ctx, op, "tb", tb));
  char sa[RUMUS__SHAPE_BUF], sb[RUMUS__SHAPE_BUF], sc[RUMUS__SHAPE_BUF];
  rumus__shape_str(A, sa, sizeof sa);
  rumus__shape_str(B, sb, sizeof sb);
  rumus__shape_str(C, sc, sizeof sc);
  const int batched = C->ndim == 3;
  RUMUS__FAIL_IF(C->ndim != 2 && C->ndim != 3, ctx, RUMUS_ESHAPE,
                 "%s: C %s must be 2-D [M, N] or 3-D [batch, M, N]", op, sc);
  RUMUS__FAIL_IF(A->ndim != 2 && !(batched && A->ndim == 3), ctx, RUMUS_ESHAPE,
                 "%s: A %s must be 2-D%s (C is %s)", op, sa,
                 batched ? " or 3-D" : "", sc);
  RUMUS__FAIL_IF(B->ndim != 2 && !(batched && B->ndim == 3), ctx, RUMUS_ESHAPE,
                 "%s: B %s must be 2-D%s (C is %s)", op, sb,
                 batched ? " or 3-D" : "", sc);
  const size_t batch = batched ? C->shape[0] : 1;
  RUMUS__FAIL_IF(A->ndim == 3 && A->shape[0] != batch, ctx, RUMUS_ESHAPE,
                 "%s: A %s and C %s differ in batch size", op, sa, sc);
  RUMUS__FAIL_IF(B->ndim == 3 && B->shape[0] != batch, ctx, RUMUS_ESHAPE,
                 "%s: B %s and C %s differ in batch size", op, sb, sc);
  const size_t *as = A->shape + (A->ndim - 2), *bs = B->shape + (B->ndim - 2),
               *cs = C->shape + (C->ndim - 2);
  const size_t m = ta ? as[1] : as[0], ka = ta ? as[0] : as[1];
  const size_t kb = tb ? bs[1] : bs[0], n = tb ? bs[0] : bs[1];
  RUMUS__FAIL_IF(ka != kb || m != cs[0] || n != cs[1], ctx, RUMUS_ESHAPE,
                 "%s: op(A) of A %s%s times op(B) of B %s%s does not give C "
                 "%s", op, sa, ta ? "^T" : "", sb, tb ? "^T" : "", sc);
  rumus_gemm_layout l = {0};
  l.m = m;
  l.n = n;
  l.k = ka;
  l.batch = batch;
  l.lda = as[1];
  l.stride_a = A->ndim == 3 ? as[0] * as[1] : 0;
  l.ldb = bs[1];
  l.stride_b = B->ndim == 3 ? bs[0] * bs[1] : 0;
  l.ldc = cs[1];
  l.stride_c = cs[0] * cs[1];
  return run(ctx, op, ta, tb, alpha, A, B, beta, C, bias, &l);
}

int rumus_gemm(rumus_ctx *ctx, rumus_transpose ta, rumus_transpose tb,
               float alpha, const rumus_tensor *A, const rumus_tensor *B,
               float beta, rumus_tensor *C) {
  return gemm_shaped(ctx, "rumus_gemm", ta, tb, alpha, A, B, beta, C, NULL);
}

int rumus_gemm_bias(rumus_ctx *ctx, rumus_transpose ta, rumus_transpose tb,
                    float alpha, const rumus_tensor *A, const rumus_tensor *B,
                    float beta, const rumus_tensor *bias, rumus_tensor *C) {
  static const char op[] = "rumus_gemm_bias";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(bias == NULL, ctx, RUMUS_ENULL, "%s: bias is NULL", op);
  return gemm_shaped(ctx, op, ta, tb, alpha, A, B, beta, C, bias);
}

/* Builds the F32 programs of the current variant for the four transposes:
 * on the GPU variant for every tile size that fits the device, with
 * aligned and unaligned operands.  The 16-bit programs (four storage pairs
 * more) build at their first use, as rumus_cache_fill documents. */
int rumus__gemm_warm(rumus_ctx *ctx) {
  char opts[320];
  cl_program prog;
  const int gpu = rumus__gpu_variant(ctx);
  for (int t = 0; t < 4; t++) {
    gemm_prog g = {RUMUS_F32, RUMUS_F32, NULL, t & 1, t >> 1, 0};
    int tiled = 0;
    for (size_t i = 0; gpu && i < N_TILES; i++) {
      if (!tiled_fits(ctx, &GPU_TILES[i])) continue;
      tiled = 1;
      g.tiles = &GPU_TILES[i];
      for (g.align4 = 0; g.align4 <= 1; g.align4++) {
        gemm_options(ctx, &g, opts, sizeof opts);
        RUMUS__FORWARD(
            rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
      }
    }
    if (!tiled) {
      g.tiles = NULL;
      g.align4 = 0;
      gemm_options(ctx, &g, opts, sizeof opts);
      RUMUS__FORWARD(
          rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
    }
  }
  return RUMUS_OK;
}
