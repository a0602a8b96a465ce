/*
 * embedding.c - embedding lookup and its deterministic weight gradient
 * (kernels and the backward's scheme in cl/embedding.cl).  One program
 * per (storage, dweight storage) holds the family; both variants run it,
 * the backward's sums by the variant's kernels (one column or 8 columns
 * per work-item), which add in the same order, so they give the same
 * bits.  Fixed local size over padded global sizes, at most 2^30
 * work-items per launch of the flat kernels.
 */
#include <stdio.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "embedding.cl";

/* Local size: as pool.c, small groups for PoCL's work-group loops. */
#define EMB_LS 64
/* Work-items per launch at most (NDRange limits of some drivers). */
#define MAX_ITEMS ((size_t)1 << 30)
/* cl/embedding.cl's EMB_BLOCK and EMB_TILE (its defaults; not options, so
 * that every device sums in the same tiles). */
#define EMB_BLOCK 256
#define EMB_TILE 256
#define EMB_RADIX 256
/* cl/embedding.cl's EMB_SCAN: entries per group of the work-group scan. */
#define EMB_SCAN 1024
/* The dense backward (cl/embedding.cl): tables of at most EMB_DENSE_ROWS
 * rows (its default), EMB_DCOLS columns per GPU work-group, chunks of
 * positions that make about EMB_DENSE_GROUPS such groups, at least
 * EMB_DENSE_MIN positions each: fixed by the shape alone, so both variants
 * sum in the same chunks. */
#define EMB_DENSE_ROWS 128
#define EMB_DCOLS 64
#define EMB_DENSE_GROUPS 512
#define EMB_DENSE_MIN 64
#define EMB_DENSE_PART 8
#define EMB_SLAB 1024 /* columns per CPU work-item (cl/embedding.cl) */
#define EMB_RB 64 /* 8-column blocks per CPU work-item of the sums */
#define EMB_BR 256 /* rows per CPU work-item of the segment bounds */
/* Scratch slots of the backward (keys and positions twice, the digit
 * table, its chunk sums, lead, tail, the rows' ranges). */
#define EMB_SLOTS 9
_Static_assert(EMB_SLOTS <= RUMUS__SCRATCH_SLOTS, "embedding scratch slots");

static size_t emb_ls(const rumus_ctx *ctx) {
  size_t ls = EMB_LS;
  while (ls > ctx->max_wg) ls /= 2;
  return ls;
}

/* The options of the family's program for `storage` (weight, out, dout)
 * and `grad` (dweight: F32 or storage); the forward takes grad F32. */
static void emb_options(const rumus_ctx *ctx, rumus_dtype storage,
                        rumus_dtype grad, char *buf, size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, storage, emb_ls(ctx), 0);
  snprintf(buf, len,
           "%s -DGRAD_STORAGE=%s -DDEVERR_EMBED_ID=%d -DEMB_RB=%d -DEMB_BR=%d",
           head, rumus__storage_tag(grad), (int)RUMUS__DEVERR_EMBED_ID,
           EMB_RB, EMB_BR);
}

/* One launch of `kernel` over `items` work-items (padded). */
static int launch(rumus_ctx *ctx, const char *op, const char *opts,
                  const char *kernel, size_t items, const rumus__arg *args,
                  size_t na) {
  const rumus__kernel_ref k = {FILE_CL, opts, kernel};
  /* The CPU sums (_row) take few, long work-items: groups of up to 8 so
   * that both cores get some. */
  const int row = strstr(kernel, "_row") != NULL;
  size_t global = items;
  size_t local = row ? rumus__row_local(ctx, items) : emb_ls(ctx);
  return rumus__launch(ctx, op, &k, 1, &global, &local, na, args);
}

/* Launches `kernel` over n items in pieces of MAX_ITEMS; args[0] and
 * args[1] are set here to the piece's count and first item. */
static int run_items(rumus_ctx *ctx, const char *op, const char *opts,
                     const char *kernel, size_t n, rumus__arg *args,
                     size_t na) {
  for (size_t base = 0; base < n; base += MAX_ITEMS) {
    cl_ulong cnt = n - base < MAX_ITEMS ? n - base : MAX_ITEMS;
    cl_ulong first = base;
    args[0] = RUMUS__ARG(cnt);
    args[1] = RUMUS__ARG(first);
    RUMUS__FORWARD(launch(ctx, op, opts, kernel, (size_t)cnt, args, na));
  }
  return RUMUS_OK;
}

/* Launches `kernel` with one group of `local` work-items per unit (row or
 * block) of n, in pieces of at most MAX_ITEMS work-items; args[0] and
 * args[1] are set here to the piece's unit count and first unit. */
static int run_groups(rumus_ctx *ctx, const char *op, const char *opts,
                      const char *kernel, size_t n, size_t local,
                      rumus__arg *args, size_t na) {
  const rumus__kernel_ref k = {FILE_CL, opts, kernel};
  const size_t per = MAX_ITEMS / local;
  for (size_t base = 0; base < n; base += per) {
    cl_ulong cnt = n - base < per ? n - base : per;
    cl_ulong first = base;
    args[0] = RUMUS__ARG(cnt);
    args[1] = RUMUS__ARG(first);
    size_t global = (size_t)cnt * local;
    RUMUS__FORWARD(
        rumus__launch(ctx, op, &k, 1, &global, &local, na, args));
  }
  return RUMUS_OK;
}

/* ---- Argument checks ---------------------------------------------------- */

/* w is a 2-D [rows, dim] floating tensor (type `dtype`, or any floating
 * type when dtype is 0) with rows <= INT32_MAX. */
static int check_table(rumus_ctx *ctx, const char *op, const char *name,
                       const rumus_tensor *w, rumus_dtype dtype) {
  if (dtype == 0)
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, name, w));
  else
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, w, dtype));
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(w->ndim != 2, ctx, RUMUS_ESHAPE,
                 "%s: %s must be 2-D [rows, dim], got %s", op, name,
                 rumus__shape_str(w, s, sizeof s));
  RUMUS__FAIL_IF(w->shape[0] > INT32_MAX, ctx, RUMUS_ESHAPE,
                 "%s: %s has %zu rows, over INT32_MAX (int32 ids)", op, name,
                 w->shape[0]);
  return RUMUS_OK;
}

/* ids is I32 with at most INT32_MAX elements (positions are reported as
 * int) and fewer than RUMUS_MAX_DIMS axes; y (`yname`, floating) has ids'
 * shape followed by dim: the message names the axis. */
static int check_ids_rows(rumus_ctx *ctx, const char *op,
                          const rumus_tensor *ids, const char *yname,
                          const rumus_tensor *y, size_t dim) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "ids", ids, RUMUS_I32));
  char s[RUMUS__SHAPE_BUF], t[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(ids->ndim >= RUMUS_MAX_DIMS, ctx, RUMUS_ESHAPE,
                 "%s: ids %s has %d axes, at most %d (%s adds one)", op,
                 rumus__shape_str(ids, s, sizeof s), ids->ndim,
                 RUMUS_MAX_DIMS - 1, yname);
  RUMUS__FAIL_IF(ids->numel > INT32_MAX, ctx, RUMUS_ESHAPE,
                 "%s: ids has %zu elements, over INT32_MAX", op, ids->numel);
  RUMUS__FAIL_IF(y->ndim != ids->ndim + 1, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must have ids' %d axes and dim, ids is %s", op,
                 yname, rumus__shape_str(y, s, sizeof s), ids->ndim,
                 rumus__shape_str(ids, t, sizeof t));
  for (int a = 0; a <= ids->ndim; a++) {
    const size_t want = a < ids->ndim ? ids->shape[a] : dim;
    RUMUS__FAIL_IF(y->shape[a] != want, ctx, RUMUS_ESHAPE,
                   "%s: %s %s has %zu along axis %d, expected %zu (%s)", op,
                   yname, rumus__shape_str(y, s, sizeof s), y->shape[a], a,
                   want, a < ids->ndim ? "ids' extent" : "dim");
  }
  return RUMUS_OK;
}

static int check_pad(rumus_ctx *ctx, const char *op, int pad, size_t rows) {
  RUMUS__FAIL_IF(pad < -1 || (pad >= 0 && (size_t)pad >= rows), ctx,
                 RUMUS_EINVAL,
                 "%s: padding_idx %d is neither -1 nor a row of [0, %zu)",
                 op, pad, rows);
  return RUMUS_OK;
}

/* ---- Forward ------------------------------------------------------------ */

int rumus_embedding_fwd(rumus_ctx *ctx, const rumus_tensor *weight,
                        const rumus_tensor *ids, int padding_idx,
                        rumus_tensor *out) {
  const char *op = "rumus_embedding_fwd";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_table(ctx, op, "weight", weight, 0));
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "out", out, weight->dtype));
  RUMUS__FORWARD(check_ids_rows(ctx, op, ids, "out", out, weight->shape[1]));
  RUMUS__FORWARD(check_pad(ctx, op, padding_idx, weight->shape[0]));
  RUMUS__FORWARD(
      rumus__check_overlap(ctx, op, "weight", weight, "out", out, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "ids", ids, "out", out, 0));
  if (out->numel == 0) return RUMUS_OK;
  char opts[192];
  emb_options(ctx, weight->dtype, RUMUS_F32, opts, sizeof opts);
  cl_ulong wo = rumus__off(weight), io = rumus__off(ids), oo = rumus__off(out),
           rows = weight->shape[0], dim = weight->shape[1];
  if (rumus__gpu_variant(ctx)) {
    /* A group per row; 16-byte moves when both tables' rows start at
     * 16-byte aligned addresses. */
    const size_t ve = 16 / rumus_dtype_size(weight->dtype);
    cl_uint vec = dim % ve == 0 && rumus__aligned(weight, 0, ve) &&
                  rumus__aligned(out, 0, ve);
    rumus__arg args[12] = {{0, NULL}, {0, NULL}, /* count, first */
                           RUMUS__ARG(weight->mem), RUMUS__ARG(wo),
                           RUMUS__ARG(ids->mem), RUMUS__ARG(io),
                           RUMUS__ARG(out->mem), RUMUS__ARG(oo),
                           RUMUS__ARG(rows), RUMUS__ARG(dim),
                           RUMUS__ARG(vec), RUMUS__ARG(ctx->status)};
    return run_groups(ctx, op, opts, "embedding_fwd_wg", ids->numel,
                      emb_ls(ctx), args, 12);
  }
  /* 16 columns per work-item: see embedding_fwd in cl/embedding.cl. */
  cl_uint cw = 16;
  cl_ulong blocks = (dim + cw - 1) / cw;
  rumus__arg args[13] = {{0, NULL}, {0, NULL}, /* count, first: run_items */
                         RUMUS__ARG(weight->mem), RUMUS__ARG(wo),
                         RUMUS__ARG(ids->mem), RUMUS__ARG(io),
                         RUMUS__ARG(out->mem), RUMUS__ARG(oo),
                         RUMUS__ARG(rows), RUMUS__ARG(dim),
                         RUMUS__ARG(blocks), RUMUS__ARG(cw),
                         RUMUS__ARG(ctx->status)};
  return run_items(ctx, op, opts, "embedding_fwd", ids->numel * blocks, args,
                   13);
}

/* ---- Backward ----------------------------------------------------------- */

/* One backward call: its sizes, program and scratch. */
typedef struct {
  char opts[192];
  cl_uint n, rows, blocks, chunk, chunks, m;
  size_t dim, tiles;
  /* gpu: the variant's sums (one column per work-item); wide: the
   * sort's work-group kernels (the GPU variant where groups of EMB_RADIX
   * work-items are allowed). */
  int gpu, wide;
  /* Keys and positions (two of each: the passes ping-pong), the digit
   * table and its chunk sums, the tiles' float partials and the rows'
   * ranges of tiles. */
  cl_mem key[2], val[2], hist, sums, lead, tail, range;
} emb_bwd;

/* Sizes and scratch of the call (every buffer non-empty): the context's
 * reusable slots (rumus__scratch_slot; the caller holds them), so that
 * repeated calls allocate and first-touch nothing. */
static int bwd_setup(rumus_ctx *ctx, const char *op, emb_bwd *b) {
  b->blocks = (b->n + EMB_BLOCK - 1) / EMB_BLOCK;
  b->m = EMB_RADIX * (b->blocks ? b->blocks : 1);
  /* Chunks of about sqrt(m): the one work-item of scan_top walks few;
   * the work-group scan takes EMB_SCAN per group. */
  b->chunk = 64;
  while ((size_t)b->chunk * b->chunk < b->m) b->chunk *= 2;
  if (b->wide) b->chunk = EMB_SCAN;
  b->chunks = (b->m + b->chunk - 1) / b->chunk;
  b->tiles = (b->n + EMB_TILE - 1) / EMB_TILE;
  const size_t nb = (size_t)(b->n ? b->n : 1) * sizeof(cl_uint),
               pb = (b->tiles ? b->tiles : 1) * b->dim * sizeof(float);
  const size_t bytes[EMB_SLOTS] = {nb, nb, nb, nb, b->m * sizeof(cl_uint),
                                   b->chunks * sizeof(cl_uint), pb, pb,
                                   2 * (size_t)b->rows * sizeof(cl_uint)};
  cl_mem *mem[EMB_SLOTS] = {&b->key[0], &b->key[1], &b->val[0], &b->val[1],
                            &b->hist,   &b->sums,   &b->lead,   &b->tail,
                            &b->range};
  for (int i = 0; i < EMB_SLOTS; i++)
    RUMUS__FORWARD(rumus__scratch_slot(ctx, op, i, bytes[i], mem[i]));
  return RUMUS_OK;
}

/* Launches a sort kernel with b->wide's groups of EMB_RADIX work-items,
 * `groups` of them. */
static int launch_wg(rumus_ctx *ctx, const char *op, const emb_bwd *b,
                     const char *kernel, size_t groups, const rumus__arg *args,
                     size_t na) {
  const rumus__kernel_ref k = {FILE_CL, b->opts, kernel};
  size_t global = groups * EMB_RADIX, local = EMB_RADIX;
  return rumus__launch(ctx, op, &k, 1, &global, &local, na, args);
}

/* bwd_scan by the work-group kernels. */
static int bwd_scan_wg(rumus_ctx *ctx, const char *op, emb_bwd *b) {
  const rumus__arg a1[] = {RUMUS__ARG(b->m), RUMUS__ARG(b->hist),
                           RUMUS__ARG(b->sums)};
  RUMUS__FORWARD(
      launch_wg(ctx, op, b, "embedding_scan_sums_wg", b->chunks, a1, 3));
  const rumus__arg a2[] = {RUMUS__ARG(b->chunks), RUMUS__ARG(b->sums)};
  RUMUS__FORWARD(launch_wg(ctx, op, b, "embedding_scan_top_wg", 1, a2, 2));
  return launch_wg(ctx, op, b, "embedding_scan_apply_wg", b->chunks, a1, 3);
}

/* Exclusive prefix sums of the digit table, in place. */
static int bwd_scan(rumus_ctx *ctx, const char *op, emb_bwd *b) {
  if (b->wide) return bwd_scan_wg(ctx, op, b);
  const rumus__arg a1[] = {RUMUS__ARG(b->m), RUMUS__ARG(b->chunk),
                           RUMUS__ARG(b->chunks), RUMUS__ARG(b->hist),
                           RUMUS__ARG(b->sums)};
  RUMUS__FORWARD(
      launch(ctx, op, b->opts, "embedding_scan_sums", b->chunks, a1, 5));
  const rumus__arg a2[] = {RUMUS__ARG(b->chunks), RUMUS__ARG(b->sums)};
  RUMUS__FORWARD(launch(ctx, op, b->opts, "embedding_scan_top", 1, a2, 2));
  return launch(ctx, op, b->opts, "embedding_scan_apply", b->chunks, a1, 5);
}

/* Sorts the keys of the valid positions (key[0], val[0]) stably by id:
 * one pass per 8 bits of the largest key (rows); the result is in
 * key[*cur], val[*cur]. */
static int bwd_sort(rumus_ctx *ctx, const char *op, emb_bwd *b, int *cur) {
  int bits = 0;
  while (bits < 32 && (b->rows >> bits) != 0) bits++;
  *cur = 0;
  for (cl_uint shift = 0; shift < (cl_uint)bits; shift += 8) {
    const int nx = 1 - *cur;
    const rumus__arg ah[] = {RUMUS__ARG(b->n), RUMUS__ARG(b->blocks),
                             RUMUS__ARG(shift), RUMUS__ARG(b->key[*cur]),
                             RUMUS__ARG(b->hist)};
    RUMUS__FORWARD(
        b->wide ? launch_wg(ctx, op, b, "embedding_hist_wg", b->blocks, ah, 5)
                : launch(ctx, op, b->opts, "embedding_hist", b->blocks, ah, 5));
    RUMUS__FORWARD(bwd_scan(ctx, op, b));
    const rumus__arg as[] = {RUMUS__ARG(b->n),        RUMUS__ARG(b->blocks),
                             RUMUS__ARG(shift),       RUMUS__ARG(b->hist),
                             RUMUS__ARG(b->key[*cur]), RUMUS__ARG(b->val[*cur]),
                             RUMUS__ARG(b->key[nx]),  RUMUS__ARG(b->val[nx])};
    RUMUS__FORWARD(
        b->wide
            ? launch_wg(ctx, op, b, "embedding_scatter_wg", b->blocks, as, 8)
            : launch(ctx, op, b->opts, "embedding_scatter", b->blocks, as, 8));
    *cur = nx;
  }
  return RUMUS_OK;
}

/* The tiles' sums (stage 1), the rows' segments and folds (stage 2) on
 * the sorted list key[cur], val[cur]; the CPU variant's kernels (_row)
 * take c8, the number of 8-column blocks, after dim, EMB_RB of them per
 * work-item. */
static int bwd_sums(rumus_ctx *ctx, const char *op, emb_bwd *b, int cur,
                    const rumus_tensor *dout, rumus_tensor *dw) {
  cl_ulong dim = b->dim, c8 = (b->dim + 7) / 8, dyo = rumus__off(dout),
           dwo = rumus__off(dw);
  const size_t per = b->gpu ? b->dim : (size_t)(c8 + EMB_RB - 1) / EMB_RB;
  rumus__arg a[14];
  size_t na = 2; /* count, first: run_items */
  if (b->n > 0) {
    a[na++] = RUMUS__ARG(b->n);
    a[na++] = RUMUS__ARG(b->rows);
    a[na++] = RUMUS__ARG(dim);
    if (!b->gpu) a[na++] = RUMUS__ARG(c8);
    a[na++] = RUMUS__ARG(b->key[cur]);
    a[na++] = RUMUS__ARG(b->val[cur]);
    a[na++] = RUMUS__ARG(dout->mem);
    a[na++] = RUMUS__ARG(dyo);
    a[na++] = RUMUS__ARG(dw->mem);
    a[na++] = RUMUS__ARG(dwo);
    a[na++] = RUMUS__ARG(b->lead);
    a[na++] = RUMUS__ARG(b->tail);
    RUMUS__FORWARD(run_items(
        ctx, op, b->opts, b->gpu ? "embedding_tile_col" : "embedding_tile_row",
        b->tiles * per, a, na));
  }
  na = 2;
  a[na++] = RUMUS__ARG(b->n);
  if (!b->gpu) a[na++] = RUMUS__ARG(b->rows);
  a[na++] = RUMUS__ARG(b->key[cur]);
  a[na++] = RUMUS__ARG(b->range);
  RUMUS__FORWARD(run_items(
      ctx, op, b->opts, b->gpu ? "embedding_bounds" : "embedding_bounds_row",
      b->gpu ? b->rows : (b->rows + EMB_BR - 1) / EMB_BR, a, na));
  na = 2;
  a[na++] = RUMUS__ARG(dim);
  if (!b->gpu) a[na++] = RUMUS__ARG(c8);
  a[na++] = RUMUS__ARG(b->range);
  a[na++] = RUMUS__ARG(b->lead);
  a[na++] = RUMUS__ARG(b->tail);
  a[na++] = RUMUS__ARG(dw->mem);
  a[na++] = RUMUS__ARG(dwo);
  if (b->gpu) /* a group per row */
    return run_groups(ctx, op, b->opts, "embedding_fold_wg", b->rows,
                      emb_ls(ctx), a, na);
  return run_items(ctx, op, b->opts, "embedding_fold_row",
                   (size_t)b->rows * per, a, na);
}

/* ---- Backward for few rows -------------------------------------------- */

/* Whether the dense scheme takes this call: few rows whose column sums
 * fit a group's local memory (the GPU kernel's; asked of the device, not
 * of the variant, so that both variants take the same scheme). */
static int dense_fits(const rumus_ctx *ctx, const emb_bwd *b) {
  return b->rows <= EMB_DENSE_ROWS && b->n > 0 &&
         ctx->max_wg >= EMB_DCOLS &&
         ctx->local_mem >= (size_t)b->rows * EMB_DCOLS * sizeof(float);
}

/* The chunks' partials (one launch), then their fold into dweight. */
static int bwd_dense(rumus_ctx *ctx, const char *op, const emb_bwd *b,
                     const rumus_tensor *dout, const rumus_tensor *ids,
                     cl_int pad, rumus_tensor *dw) {
  const size_t blocks = (b->dim + EMB_DCOLS - 1) / EMB_DCOLS,
               want = (EMB_DENSE_GROUPS + blocks - 1) / blocks;
  size_t len = (b->n + want - 1) / want;
  if (len < EMB_DENSE_MIN) len = EMB_DENSE_MIN;
  /* Partials of at most an eighth of dout's traffic. */
  if (len < (size_t)EMB_DENSE_PART * b->rows) len = (size_t)EMB_DENSE_PART * b->rows;
  cl_ulong L = len, n = b->n, dim = b->dim, io = rumus__off(ids),
           dyo = rumus__off(dout), dwo = rumus__off(dw),
           chunks = (b->n + len - 1) / len, numel = (cl_ulong)b->rows * dim;
  cl_mem part;
  RUMUS__FORWARD(rumus__scratch_slot(ctx, op, 0, chunks * numel * sizeof(float),
                                     &part));
  if (b->gpu) {
    const rumus__kernel_ref k = {FILE_CL, b->opts, "embedding_dense_wg"};
    const rumus__arg a[] = {
        RUMUS__ARG(L),       RUMUS__ARG(n),        RUMUS__ARG(b->rows),
        RUMUS__ARG(pad),     RUMUS__ARG(dim),      RUMUS__ARG(ids->mem),
        RUMUS__ARG(io),      RUMUS__ARG(dout->mem), RUMUS__ARG(dyo),
        RUMUS__ARG(part),    RUMUS__ARG_LOCAL((size_t)b->rows * EMB_DCOLS * 4),
        RUMUS__ARG(ctx->status)};
    const size_t global[2] = {blocks * EMB_DCOLS, chunks},
                 local[2] = {EMB_DCOLS, 1};
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 2, global, local,
                                 sizeof a / sizeof a[0], a));
  } else { /* a work-item per (chunk, slab), one per group */
    cl_ulong slabs = (dim + EMB_SLAB - 1) / EMB_SLAB;
    const rumus__kernel_ref k = {FILE_CL, b->opts, "embedding_dense_slab"};
    const rumus__arg a[] = {
        RUMUS__ARG(L),        RUMUS__ARG(n),   RUMUS__ARG(b->rows),
        RUMUS__ARG(pad),      RUMUS__ARG(dim), RUMUS__ARG(slabs),
        RUMUS__ARG(ids->mem), RUMUS__ARG(io),  RUMUS__ARG(dout->mem),
        RUMUS__ARG(dyo),      RUMUS__ARG(part), RUMUS__ARG(ctx->status)};
    const size_t global = chunks * slabs, local = 1;
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local,
                                 sizeof a / sizeof a[0], a));
  }
  rumus__arg f[7] = {{0, NULL},         {0, NULL}, /* count, first */
                     RUMUS__ARG(chunks), RUMUS__ARG(numel),
                     RUMUS__ARG(part),   RUMUS__ARG(dw->mem),
                     RUMUS__ARG(dwo)};
  return run_items(ctx, op, b->opts, "embedding_dense_fold", numel, f, 7);
}

/* Checks of rumus_embedding_bwd. */
static int check_bwd(rumus_ctx *ctx, const char *op, const rumus_tensor *dout,
                     const rumus_tensor *ids, int pad,
                     const rumus_tensor *dweight) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "dout", dout));
  RUMUS__FORWARD(check_table(ctx, op, "dweight", dweight, 0));
  RUMUS__FAIL_IF(dweight->dtype != dout->dtype && dweight->dtype != RUMUS_F32,
                 ctx, RUMUS_EDTYPE, "%s: dweight is %s: F32 or dout's %s", op,
                 rumus_dtype_name(dweight->dtype),
                 rumus_dtype_name(dout->dtype));
  RUMUS__FORWARD(check_ids_rows(ctx, op, ids, "dout", dout, dweight->shape[1]));
  RUMUS__FORWARD(check_pad(ctx, op, pad, dweight->shape[0]));
  RUMUS__FORWARD(
      rumus__check_overlap(ctx, op, "dout", dout, "dweight", dweight, 0));
  return rumus__check_overlap(ctx, op, "ids", ids, "dweight", dweight, 0);
}

/* The keys of every position, then the sort and the sums. */
static int bwd_run(rumus_ctx *ctx, const char *op, emb_bwd *b,
                   const rumus_tensor *dout, const rumus_tensor *ids,
                   cl_int pad, rumus_tensor *dweight) {
  RUMUS__FORWARD(bwd_setup(ctx, op, b));
  int cur = 0;
  if (b->n > 0) {
    cl_ulong io = rumus__off(ids);
    rumus__arg ak[9] = {{0, NULL},           {0, NULL},
                        RUMUS__ARG(ids->mem), RUMUS__ARG(io),
                        RUMUS__ARG(b->rows), RUMUS__ARG(pad),
                        RUMUS__ARG(b->key[0]), RUMUS__ARG(b->val[0]),
                        RUMUS__ARG(ctx->status)};
    RUMUS__FORWARD(run_items(ctx, op, b->opts, "embedding_keys", b->n, ak, 9));
    RUMUS__FORWARD(bwd_sort(ctx, op, b, &cur));
  }
  return bwd_sums(ctx, op, b, cur, dout, dweight);
}

int rumus_embedding_bwd(rumus_ctx *ctx, const rumus_tensor *dout,
                        const rumus_tensor *ids, int padding_idx,
                        rumus_tensor *dweight) {
  const char *op = "rumus_embedding_bwd";
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_bwd(ctx, op, dout, ids, padding_idx, dweight));
  if (dweight->numel == 0) return RUMUS_OK;
  emb_bwd b = {0};
  emb_options(ctx, dout->dtype, dweight->dtype, b.opts, sizeof b.opts);
  b.n = (cl_uint)ids->numel;
  b.rows = (cl_uint)dweight->shape[0];
  b.dim = dweight->shape[1];
  b.gpu = rumus__gpu_variant(ctx);
  b.wide = b.gpu && ctx->max_wg >= EMB_RADIX;
  rumus__scratch_begin(ctx);
  const int st = dense_fits(ctx, &b)
                     ? bwd_dense(ctx, op, &b, dout, ids, padding_idx, dweight)
                     : bwd_run(ctx, op, &b, dout, ids, padding_idx, dweight);
  rumus__scratch_end(ctx);
  return st;
}

/* The F32 program (both variants run it); 16-bit and mixed programs are
 * built by their first call, as rumus_cache_fill() documents. */
int rumus__embedding_warm(rumus_ctx *ctx) {
  char opts[192];
  cl_program prog;
  emb_options(ctx, RUMUS_F32, RUMUS_F32, opts, sizeof opts);
  return rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog);
}
