/*
 * ops.h - what the op families share with the framework: the warm-up
 * functions that rumus_cache_fill() runs (one per family, listed in
 * registry.c), program options, alignment and row launches.
 */
#ifndef RUMUS_OPS_H
#define RUMUS_OPS_H

#include "../internal.h"

typedef int (*rumus__warm_fn)(rumus_ctx *ctx);
extern RUMUS__HIDDEN const rumus__warm_fn rumus__warmers[];
extern RUMUS__HIDDEN const size_t rumus__warmers_count;

RUMUS__HIDDEN int rumus__softmax_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__xent_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__gemm_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__elementwise_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__optim_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__quant_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__dropout_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__pool_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__batchnorm_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__conv_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__embedding_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__layernorm_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__tensorops_warm(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__attention_warm(rumus_ctx *ctx);

/* ---- Float products for other families (src/ops/gemm.c) ----------------
 * rumus__gemm_tiled_f32: C_b = A_b B_b, or A_b B_b^T if tb (alpha 1, beta
 * 0), over the layout's batch, A, B and C float buffers of na, nb and nc
 * floats (offsets in the layout, unchecked), through the GPU variant's
 * gemm_tiled alone: it takes no scratch slot, so a caller holding them
 * may call it.  rumus__gemm_tiled_fits: whether that runs on ctx (the GPU
 * variant and a tiling that fits the device). */
RUMUS__HIDDEN int rumus__gemm_tiled_fits(const rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__gemm_tiled_f32(rumus_ctx *ctx, const char *op,
                                        cl_mem a, size_t na, cl_mem b,
                                        size_t nb, cl_mem c, size_t nc,
                                        int tb, const rumus_gemm_layout *l);

/* ---- Conv's Winograd path (src/ops/conv_winograd.c) ----------------------
 * A 3x3, stride 1, dilation 1, one-group convolution of in [N, I, H, W]
 * into out [N, O, OH, OW] with pads ph, pw (negative: crops).  op says
 * which product runs: RUMUS__WINO_FWD takes w as [O, I, 3, 3];
 * RUMUS__WINO_BWD_DATA as [I, O, 3, 3] rotated by 180 degrees (the input
 * gradient as a convolution of dy); RUMUS__WINO_BWD_WEIGHT computes the
 * weight gradient dw [O, I, 3, 3] of that convolution from in (x) and
 * dy [N, O, OH, OW].  rumus__wino_plan_make decides whether the path
 * runs (the overrides RUMUS_CONV2D_*WINOGRAD, the shape, the scratch
 * cap): 0 if not, else 1 with *pl filled for rumus__wino_run (forward,
 * input gradient) or rumus__wino_run_wgrad. */
enum { RUMUS__WINO_FWD, RUMUS__WINO_BWD_DATA, RUMUS__WINO_BWD_WEIGHT };
typedef struct {
  size_t n, i, h, w, o, oh, ow;
  long ph, pw;
  int op; /* RUMUS__WINO_* */
} rumus__wino_geo;
typedef struct {
  rumus__wino_geo g;
  int wm;           /* output tile side: 2 or 4 */
  size_t th, tw;    /* tiles per image along H and W */
  size_t nb;        /* images per chunk (weight gradient: per piece) */
  size_t ldu, ldv;  /* padded rows of U and of V / M (weight gradient:
                       of M, and of U and V) */
  size_t pieces;    /* weight gradient: pieces of the images, each its
                       own product, added by the output transform */
  size_t round;     /* weight gradient: pieces per round of launches */
} rumus__wino_plan;
RUMUS__HIDDEN int rumus__wino_plan_make(const rumus_ctx *ctx,
                                        const rumus__wino_geo *g,
                                        rumus__wino_plan *pl);
RUMUS__HIDDEN int rumus__wino_run(rumus_ctx *ctx, const char *op,
                                  const rumus__wino_plan *pl,
                                  const rumus_tensor *in,
                                  const rumus_tensor *w,
                                  const rumus_tensor *bias,
                                  rumus_tensor *out);
RUMUS__HIDDEN int rumus__wino_run_wgrad(rumus_ctx *ctx, const char *op,
                                        const rumus__wino_plan *pl,
                                        const rumus_tensor *x,
                                        const rumus_tensor *dy,
                                        rumus_tensor *dw);
RUMUS__HIDDEN int rumus__wino_warm(rumus_ctx *ctx);

/* ---- Program options ------------------------------------------------------
 * Each family has one function that writes the options of its programs from
 * a small description of the program (storage type, work-group size,
 * alignment, the family's own -D values); its launches and its warm-up
 * (rumus_cache_fill) both call it, so they name the same cache entry.  The
 * program cache normalises white space in the key as well. */

/* The storage tag of cl/common.cl for a floating type: "F32", "F16",
 * "BF16" (for a family's second -D storage option). */
RUMUS__HIDDEN const char *rumus__storage_tag(rumus_dtype storage);
/* " -cl-nv-maxrregcount=N" into buf (len bytes; "" elsewhere) on
 * NVIDIA's OpenCL driver (cl_nv_compiler_options): N from the environment
 * variable `env` when set (0 or a value outside 32-255: no cap), else
 * dflt (0: none).  Other platforms take no such option. */
RUMUS__HIDDEN void rumus__nv_maxrreg(const rumus_ctx *ctx, const char *env,
                                     int dflt, char *buf, size_t len);

/* What every program's options begin with: the main storage type, the
 * reduction work-group size and RUMUS_ALIGN4 (cl/common.cl), e.g.
 * "-DRUMUS_STORAGE=F32 -DWG=256 -DRUMUS_ALIGN4=0". */
RUMUS__HIDDEN void rumus__options_head(char *buf, size_t len,
                                       rumus_dtype storage, size_t wg,
                                       int align4);

/* 1 if element `elem` of t and every `elems`-th element after it lie at
 * an address aligned to elems elements (elems a power of two): the element
 * offset in the buffer is a multiple of elems and the buffer's base is
 * aligned at least as much.  Buffers the driver allocates are aligned to
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN (1024 bits at least); a wrapped
 * CL_MEM_USE_HOST_PTR buffer may be used in place by a CPU driver, so its
 * host pointer decides (read once by rumus_tensor_wrap).  The one place
 * that decides alignment for typed vector accesses. */
RUMUS__HIDDEN int rumus__aligned(const rumus_tensor *t, size_t elem,
                                 size_t elems);

/* 1 when the GPU variant runs and every tensor of ts[0 .. nt) (NULL entries
 * skipped) is rumus__aligned to 4 elements, as is every row of `cols`
 * elements (cols = 0 for flat ops): the programs' RUMUS_ALIGN4.  The CPU
 * variant's kernels read float8 or scalars: no second program there. */
RUMUS__HIDDEN int rumus__align4(const rumus_ctx *ctx,
                                const rumus_tensor *const *ts, int nt,
                                size_t cols);

/* Flags of the alignment of a row op's tensors (rumus__row_align), which
 * rumus__row_plan_make takes: RUMUS__ROW_ALIGN4 as rumus__align4 (which
 * returns it), and RUMUS__ROW_ALIGN8 when, on the GPU variant, the
 * storage is 16-bit and every tensor and row is 8-element aligned too:
 * the row kernels then move 8 elements (16 bytes) per access
 * (RUMUS_ALIGN8, rumus_rv in cl/common.cl). */
#define RUMUS__ROW_ALIGN4 1
#define RUMUS__ROW_ALIGN8 2
RUMUS__HIDDEN int rumus__row_align(const rumus_ctx *ctx,
                                   const rumus_tensor *const *ts, int nt,
                                   size_t cols);

/* ---- Row kernels ----------------------------------------------------------
 * How the row kernels of softmax and cross-entropy (`base`_row, _wgc, _wg
 * in cl/softmax.cl and cl/xent.cl) cover rows of `cols` elements:
 *   ITEM   one work-item per row, no barriers (`base`_row: CPU variant);
 *   REGS   rt work-items per row holding it in registers, cache_v4 float4
 *          each, wg / rt rows per work-group (`base`_wgc): the first rung
 *          of RUNGS (registry.c) that holds the row, if the device runs the
 *          kernel at that size;
 *   GROUP  one work-group of the reduction size per row, strided (`base`_wg):
 *          longer rows.
 * A RUMUS_OPT_WORKGROUP_SIZE set by the user is the only rung (cache_v4 8). */
typedef enum {
  RUMUS__ROWS_ITEM,
  RUMUS__ROWS_REGS,
  RUMUS__ROWS_GROUP
} rumus__rows_kind;
typedef struct {
  rumus__rows_kind kind;
  rumus_dtype storage;
  size_t wg;             /* the local size and the program's WG */
  int cache_v4;          /* REGS: float4 per work-item (CACHE_V4) */
  int align4;            /* RUMUS_ALIGN4 */
  int align8;            /* RUMUS_ALIGN8 (the family's options add it) */
  cl_uint rt;            /* REGS: work-items per row */
  size_t rows_per_group; /* REGS: wg / rt; otherwise 1 */
  char options[256];
  char kernel[64];       /* `base` and the variant's suffix */
} rumus__row_plan;
/* A row family: its file and its options function, which writes the
 * options of the program that runs `plan` (every field above `options`
 * set). */
typedef void (*rumus__row_options_fn)(const rumus_ctx *ctx,
                                      const rumus__row_plan *plan, char *buf,
                                      size_t len);
typedef struct {
  const char *file;
  rumus__row_options_fn options;
  int wide_rung; /* the 512 x 16 rung (registry.c): RUMUS__WIDE_* */
} rumus__row_family;
/* rumus__row_family.wide_rung: never, when RUMUS_ROWS_WIDE_RUNG=1, or
 * unless RUMUS_ROWS_WIDE_RUNG=0. */
enum { RUMUS__WIDE_NEVER, RUMUS__WIDE_OPT_IN, RUMUS__WIDE_DEFAULT };
/* Fills *plan for kernel `base` of the family (align: RUMUS__ROW_ALIGN*
 * flags, or rumus__align4's result); builds the REGS program to learn
 * whether the device runs it at the rung's size.  @return RUMUS_OK or the
 * build's error. */
RUMUS__HIDDEN int rumus__row_plan_make(rumus_ctx *ctx, const char *op,
                                       const rumus__row_family *fam,
                                       const char *base, rumus_dtype storage,
                                       int align, size_t cols,
                                       rumus__row_plan *plan);
/* Builds every program rumus__row_plan_make can choose for the family on
 * the context's current variant and work-group option. */
RUMUS__HIDDEN int rumus__row_family_warm(rumus_ctx *ctx,
                                         const rumus__row_family *fam,
                                         rumus_dtype storage);
/* Global size of a plan's launch over `rows` rows; item_rows is the rows
 * per work-item of the kernel when the plan is ITEM (the _row kernels that
 * take runs of rows), ignored otherwise. */
RUMUS__HIDDEN size_t rumus__row_plan_global(const rumus_ctx *ctx,
                                            const rumus__row_plan *plan,
                                            size_t rows, size_t item_rows,
                                            size_t *local);

/* Local size of one-work-item-per-row kernels (CPU variant): enough
 * work-groups for every compute unit, few distinct sizes (PoCL compiles a
 * work-group function per local size). */
RUMUS__HIDDEN size_t rumus__row_local(const rumus_ctx *ctx, size_t rows);

/* Most rows one launch of a work-group-per-row kernel covers; larger
 * tensors are launched in chunks (NDRange limits of some drivers). */
#define RUMUS__MAX_WG_ROWS ((size_t)1 << 22)

#endif /* RUMUS_OPS_H */
