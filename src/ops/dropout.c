/*
 * dropout.c - dropout forward and backward (kernel in cl/dropout.cl).
 *
 * The mask is never stored: both directions regenerate it from (seed,
 * offset) with Philox4x32-10, so they are one kernel, and the backward
 * needs no tensor from the forward.  x and y (dy and dx) share one
 * floating storage type, the program's RUMUS_STORAGE, and have equal
 * element counts (the tensors are flat).  The mask is the same on every
 * variant and work-group size; the variant only picks the kernel: one
 * group of 4 elements (one Philox call) per work-item in groups of 256 on
 * GPUs (dropout); on PoCL, in groups of 16, DO_U64_REP blocks of
 * DO_U64_ILP vectors of DO_W calls per work-item, a call per 64-bit lane
 * (dropout_u64), or, under RUMUS_DROPOUT_CPU=vec, DO_ILP batches of
 * DO_VEC groups in 32-bit lanes (dropout_vec, the kernel before
 * dropout_u64).
 * RUMUS_OPT_WORKGROUP_SIZE, when set, is the local size on both.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "dropout.cl";

/* Work-items per launch at most (NDRange limits of some drivers); larger
 * tensors are launched in pieces, each told its first group. */
#define MAX_ITEMS ((size_t)1 << 30)
/* Groups of 4 per work-item of the CPU variant (dropout_vec): one per
 * lane of 16-wide vectors (AVX-512), 64 elements a work-item; and its
 * local size: small work-groups, so that small tensors spread over the
 * cores. */
#define DO_VEC 16
/* Batches of 16 groups per work-item of the CPU variant, their rounds
 * interleaved (cl/dropout.cl's DO_ILP; RUMUS_DROPOUT_ILP=1..4 overrides:
 * sweeps). */
#define DO_ILP 4
/* dropout_u64's calls per vector (DO_W: 4, a 256-bit register of 64-bit
 * lanes, or 8 where the device's float vectors are 16 wide (AVX-512): on
 * 2 AMD EPYC vCPUs with AVX-512, 2^24 elements took 5.4 ms with 8 against
 * 7.4 with 4; RUMUS_DROPOUT_W=4 or 8 overrides), vectors per block, their
 * rounds interleaved (DO_U64_ILP; RUMUS_DROPOUT_ILP=1..4, as for
 * dropout_vec) and blocks per work-item (DO_U64_REP; RUMUS_DROPOUT_REP=
 * 1..9): 128 elements a work-item.  2 x 4 calls kept the AVX2 state in
 * registers (3 or 4 spilled and ran slower); 4 blocks spread the
 * work-item's fixed costs (about 10% of the time at 1 block). */
#define DO_W 4
#define DO_U64_ILP 2
#define DO_U64_REP 4
#define DO_LS_CPU 16
#define DO_LS_GPU 256

/* Geometry and alignment of one program. */
typedef struct {
  rumus_dtype storage;
  int align4;
  size_t groups, ls; /* groups per work-item, DO_LS */
  int ilp;           /* DO_ILP or DO_U64_ILP */
  int w;             /* DO_W */
  int rep;           /* DO_U64_REP */
  const char *kernel;
} geom;

/* A digit lo .. hi from environment variable name, else def. */
static int env_digit(const char *name, int lo, int hi, int def) {
  const char *v = getenv(name);
  if (v && v[0] >= '0' + lo && v[0] <= '0' + hi && v[1] == '\0')
    return v[0] - '0';
  return def;
}

/* The CPU variant's kernel: dropout_vec under RUMUS_DROPOUT_CPU=vec, else
 * dropout_u64. */
static int cpu_vec(void) {
  const char *v = getenv("RUMUS_DROPOUT_CPU");
  return v != NULL && strcmp(v, "vec") == 0;
}

static void get_geom(const rumus_ctx *ctx, rumus_dtype storage, int align4,
                     geom *g) {
  const int gpu = rumus__gpu_variant(ctx), vec = !gpu && cpu_vec();
  g->storage = storage;
  g->align4 = align4;
  /* The knobs shape the CPU kernels only: the GPU variant's program keeps
   * its options (and its cache entry) whatever they say. */
  g->ilp = gpu ? DO_U64_ILP
               : env_digit("RUMUS_DROPOUT_ILP", 1, 4,
                           vec ? DO_ILP : DO_U64_ILP);
  g->w = gpu ? DO_W
             : env_digit("RUMUS_DROPOUT_W", 4, 8,
                         ctx->float_width >= 16 ? 2 * DO_W : DO_W);
  if (g->w != 4 && g->w != 8) g->w = DO_W;
  g->rep =
      gpu ? DO_U64_REP : env_digit("RUMUS_DROPOUT_REP", 1, 9, DO_U64_REP);
  g->groups = gpu   ? 1
              : vec ? (size_t)DO_VEC * g->ilp
                    : (size_t)g->w * g->ilp * g->rep;
  g->kernel = gpu ? "dropout" : vec ? "dropout_vec" : "dropout_u64";
  g->ls = ctx->opt_wg ? (size_t)ctx->opt_wg : gpu ? DO_LS_GPU : DO_LS_CPU;
  while (g->ls > ctx->max_wg) g->ls /= 2;
}

/* The options of the program for g (warm-up and launches). */
static void dropout_options(const rumus_ctx *ctx, const geom *g, char *buf,
                            size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, g->storage, rumus__reduce_wg(ctx),
                      g->align4);
  snprintf(buf, len,
           "%s -DDO_VEC=%d -DDO_ILP=%d -DDO_W=%d -DDO_U64_ILP=%d "
           "-DDO_U64_REP=%d -DDO_LS=%zu -DDO_CPU_KERNELS=%d",
           head, DO_VEC, g->ilp, g->w, g->ilp, g->rep, g->ls,
           strcmp(g->kernel, "dropout") != 0);
}

/* p in [0, 1] (NaN fails both tests); in, out floating, of one type and
 * element count; out the same bytes as in or apart from them. */
static int check_args(rumus_ctx *ctx, const char *op, float p,
                      const char *in_name, const rumus_tensor *in,
                      const char *out_name, const rumus_tensor *out) {
  RUMUS__FAIL_IF(!(p >= 0.0f && p <= 1.0f), ctx, RUMUS_EINVAL,
                 "%s: p is %g, must be in [0, 1]", op, (double)p);
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, in_name, in));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, out_name, out, in->dtype));
  if (in->numel != out->numel) {
    char si[RUMUS__SHAPE_BUF], so[RUMUS__SHAPE_BUF];
    return rumus__fail(ctx, RUMUS_ESHAPE,
                       "%s: %s %s and %s %s differ in element count", op,
                       in_name, rumus__shape_str(in, si, sizeof si), out_name,
                       rumus__shape_str(out, so, sizeof so));
  }
  return rumus__check_overlap(ctx, op, in_name, in, out_name, out, 1);
}

/* p = 0: out is a byte copy of in (NaN payloads included), or nothing to
 * do in place. */
static int copy_exact(rumus_ctx *ctx, const char *op, const rumus_tensor *in,
                      rumus_tensor *out) {
  if (in->mem == out->mem && in->offset == out->offset) return RUMUS_OK;
  cl_int e = clEnqueueCopyBuffer(ctx->queue, in->mem, out->mem, in->offset,
                                 out->offset, rumus_tensor_nbytes(in), 0, NULL,
                                 NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "%s: clEnqueueCopyBuffer", op);
  return RUMUS_OK;
}

/* The kernel over every element of in into out, in launches of at most
 * MAX_ITEMS work-items. */
static int launch(rumus_ctx *ctx, const char *op, float p, uint64_t seed,
                  uint64_t offset, const rumus_tensor *in,
                  rumus_tensor *out) {
  const rumus_tensor *ts[2] = {in, out};
  geom g;
  char opts[256];
  get_geom(ctx, in->dtype, rumus__align4(ctx, ts, 2, 0), &g);
  dropout_options(ctx, &g, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, g.kernel};
  /* thresh = ceil(p 2^24): (r >> 8) >= thresh is u >= p for the 24-bit
   * uniform u; p = 1 gives 2^24, which no 24-bit value reaches.  scale is
   * unused then (no element is kept). */
  cl_uint thresh = (cl_uint)ceil((double)p * 16777216.0);
  cl_float scale = p < 1.0f ? (cl_float)(1.0 / (1.0 - (double)p)) : 0.0f;
  cl_ulong cseed = seed, coff = offset;
  const size_t span = 4 * g.groups, piece = MAX_ITEMS * span;
  for (size_t e0 = 0; e0 < in->numel; e0 += piece) {
    cl_ulong n = in->numel - e0 < piece ? in->numel - e0 : piece;
    cl_ulong in_off = rumus__off(in) + e0, out_off = rumus__off(out) + e0;
    cl_ulong g0 = e0 / 4; /* piece is a multiple of 4 */
    rumus__arg args[10] = {RUMUS__ARG(in->mem),  RUMUS__ARG(in_off),
                           RUMUS__ARG(out->mem), RUMUS__ARG(out_off),
                           RUMUS__ARG(n),        RUMUS__ARG(g0),
                           RUMUS__ARG(cseed),    RUMUS__ARG(coff),
                           RUMUS__ARG(thresh),   RUMUS__ARG(scale)};
    size_t global = ((size_t)n + span - 1) / span, local = g.ls;
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local, 10, args));
  }
  return RUMUS_OK;
}

static int dropout(rumus_ctx *ctx, const char *op, float p, uint64_t seed,
                   uint64_t offset, const char *in_name,
                   const rumus_tensor *in, const char *out_name,
                   rumus_tensor *out) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_args(ctx, op, p, in_name, in, out_name, out));
  if (in->numel == 0) return RUMUS_OK;
  if (p == 0.0f) return copy_exact(ctx, op, in, out);
  return launch(ctx, op, p, seed, offset, in, out);
}

int rumus_dropout_fwd(rumus_ctx *ctx, float p, uint64_t seed, uint64_t offset,
                      const rumus_tensor *x, rumus_tensor *y) {
  return dropout(ctx, "rumus_dropout_fwd", p, seed, offset, "x", x, "y", y);
}

int rumus_dropout_bwd(rumus_ctx *ctx, float p, uint64_t seed, uint64_t offset,
                      const rumus_tensor *dy, rumus_tensor *dx) {
  return dropout(ctx, "rumus_dropout_bwd", p, seed, offset, "dy", dy, "dx",
                 dx);
}

/* The F32 programs the launches can choose on the current variant and
 * work-group option: both alignments on the GPU variant, one program on
 * the CPU variant (RUMUS_ALIGN4 is 0 there). */
int rumus__dropout_warm(rumus_ctx *ctx) {
  const int aligns = rumus__gpu_variant(ctx) ? 2 : 1;
  for (int align4 = 0; align4 < aligns; align4++) {
    geom g;
    char opts[256];
    cl_program prog;
    get_geom(ctx, RUMUS_F32, align4, &g);
    dropout_options(ctx, &g, opts, sizeof opts);
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
  }
  return RUMUS_OK;
}
