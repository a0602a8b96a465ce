/*
 * pool.c - 2-D max, average and adaptive average pooling, forward and
 * backward, on NCHW tensors (kernels in cl/pool.cl).  One program per
 * storage type holds the kernels of both variants (they differ in how
 * work is cut: quads or elements on GPUs, rows on CPUs), with a fixed
 * local size over a padded global size, at most 2^30 work-items a
 * launch.  Adaptive pooling to 1 x 1 on the GPU variant has
 * kernels of its own: a plane reduction (forward) and a broadcast.  When
 * every index fits in 32 bits the GPU variant runs quads instead (a
 * work-item per 4 outputs WG apart for the max and average forwards, per
 * 4 adjacent inputs of a row for the backwards; fwd_quad_plan, quad_plan),
 * dividing by multiplication (magic_of), and 2 x 2 windows of stride 2
 * that tile the input a work-item per 2 outputs for the backwards, per 4
 * for the forwards (k2_plan, k2_fwd_plan; k3s2_window for the max
 * pooling of 3 x 3 windows, stride 2, padding 1); dilated max backward
 * keeps the element kernel (its _q form); the max backward of 3 x 3
 * windows, stride 2, padding 1 runs by 2 x 4 blocks of dx
 * (k3s2_block_plan), other overlapping windows by tiles staged in local
 * memory (tile_plan, max_bwd_tiles; RUMUS_MAXPOOL_BWD=block, tile or old
 * forces a choice), and average pooling with overlapping windows by bands
 * of rows staged in local memory (band_plan, avg_bands;
 * RUMUS_AVGPOOL_BAND), those of 3 x 3 windows of stride 1 with a zero
 * border (box3_plan; RUMUS_AVGPOOL_BOX3), but the backward of 3 x 3
 * windows of stride 2, padding 1, which runs the max backward's blocks
 * (k3s2_blocks; its forward the max forward's, k3s2_fwd_plan;
 * RUMUS_AVGPOOL_K3S2).  Windows that tile the input
 * (adaptive bins that divide it, average windows of kernel = stride)
 * run a sum per output and a broadcast per quad (run_tiled;
 * RUMUS_POOL_TILED).  The
 * CPU variant's row kernels
 * take several consecutive rows a work-item (run_row_items); its F32 max
 * backward scatters by planes unless the rows gather in vectors
 * (max_bwd_vec); its adaptive pooling runs the average rows where the bins
 * are such windows (adaptive_as_avg) and plane kernels to 1 x 1.  On the
 * CPU variant the max pooling of 2 x 2 windows of stride 2 that tile the
 * image runs blocks of output rows (max_k2rows), that of 3 wide windows
 * of stride 2, padding 1 along w row-aligned blocks (max_fwd_k3rows,
 * max_bwd_rows), average pooling of 3 wide windows of stride 2, padding 1
 * along w by rows in blocks (avg_k3rows), of 3 x 3 windows of stride 1
 * on rows of at most 16 a row a vector (avg_r16), and the
 * average backward of windows that tile the image runs by output rows
 * (avg_bwd_tiles); RUMUS_POOL_CPU=old keeps the row kernels instead.  F32
 * outputs of 32 MiB and more are stored past the caches there (pool_nt;
 * RUMUS_POOL_NT=0 or 1 forces it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "pool.cl";

/* Local size: small groups keep PoCL's work-group loops short and give
 * both cores work on small tensors; on the H100 groups of 256 made every
 * pooling kernel but one slower than groups of 64 (the bands by 15%, the
 * quads' 3x3 stride-1 backward by 16%).  The one, the adaptive backward
 * to 1 x 1 (a float4 store per work-item, nothing else), runs in groups
 * of O1_BWD_LS: 151 us at 64x512x56 against 249 in groups of 64, as a
 * probe's float4 fill streamed at 1.68 TB/s in groups of 64 and 3.24
 * from 128 (`bench/results/h100/session-0411/`). */
#define POOL_LS 64
#define O1_BWD_LS 256
/* The tiled windows' kernels (avgpool2d_*_tiled): one access in flight a
 * work-item, as the broadcast above. */
#define TILED_LS 256
/* Work-items per launch at most (NDRange limits of some drivers). */
#define MAX_ITEMS ((size_t)1 << 30)
/* Work-group size of the CPU variant's row kernels (ROWS_WG in
 * cl/pool.cl). */
#define ROWS_WG 8

/* The local size (above), at most the device's limit; RUMUS_POOL_LS (a
 * power of two from 8 to 1024) overrides it, for A/B runs. */
static size_t pool_ls(const rumus_ctx *ctx) {
  size_t ls = POOL_LS;
  const char *v = getenv("RUMUS_POOL_LS");
  if (v != NULL) {
    const long f = strtol(v, NULL, 10);
    if (f >= 8 && f <= 1024 && (f & (f - 1)) == 0) ls = (size_t)f;
  }
  while (ls > ctx->max_wg) ls /= 2;
  return ls;
}

/* Whether the program may store past the caches (cl/pool.cl's POOL_NT):
 * F32 on the CPU variant of a CPU device (the compilers of GPUs are not
 * asked to know the builtin). */
static int pool_nt_program(const rumus_ctx *ctx, rumus_dtype storage) {
  return storage == RUMUS_F32 && !ctx->is_gpu && !rumus__gpu_variant(ctx);
}

/* Outputs from this size on are stored past the caches where the program
 * can (the last-level cache of the CPUs measured: 32 MiB). */
#define NT_BYTES ((size_t)32 << 20)

/* A kernel's nt flag for output t: RUMUS_POOL_NT=0 or 1 forces it. */
static cl_int pool_nt(const rumus_ctx *ctx, const rumus_tensor *t) {
  const char *v = getenv("RUMUS_POOL_NT");
  if (!pool_nt_program(ctx, t->dtype)) return 0;
  if (v != NULL) return strcmp(v, "0") != 0;
  return rumus_tensor_nbytes(t) >= NT_BYTES;
}

/* The options of the family's program for `storage` (warm-up and
 * launches). */
static void pool_options(const rumus_ctx *ctx, rumus_dtype storage, char *buf,
                         size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, storage, pool_ls(ctx), 0);
  /* The averages divide in kernels of different shapes per variant; with
   * the default (2.5 ulp) division NVIDIA's compiler rounded the same
   * quotient differently in two of them, breaking the promise of the
   * same bits on both variants.  Correctly rounded division is the same
   * everywhere. */
  snprintf(buf, len, "%s -DDEVERR_POOL_INDEX=%d -DROWS_WG=%d%s%s", head,
           (int)RUMUS__DEVERR_POOL_INDEX, ROWS_WG,
           ctx->cr_divide ? " -cl-fp32-correctly-rounded-divide-sqrt" : "",
           pool_nt_program(ctx, storage) ? " -DPOOL_NT=1" : "");
}

/* Launches `kernel` over n elements in pieces of MAX_ITEMS; args[0] and
 * args[1] are set here to the piece's count and first element. */
static int run_items(rumus_ctx *ctx, const char *op, rumus_dtype storage,
                     const char *kernel, size_t n, rumus__arg *args,
                     size_t na, size_t ls) {
  char opts[256];
  pool_options(ctx, storage, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, kernel};
  for (size_t base = 0; base < n; base += MAX_ITEMS) {
    cl_ulong cnt = n - base < MAX_ITEMS ? n - base : MAX_ITEMS;
    cl_ulong first = base;
    args[0] = RUMUS__ARG(cnt);
    args[1] = RUMUS__ARG(first);
    size_t global = (size_t)cnt, local = ls;
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local, na, args));
  }
  return RUMUS_OK;
}

/* The CPU variant's row (or plane) kernel `kernel` of `storage` over
 * `rows` rows of len elements (of the output of a forward, dx of a
 * backward), rows per work-item for about 2048 elements (at most 64
 * rows), fewer where that would leave under 256 work-items: args[0 ..
 * na) (2 left for run_items), then the number of rows and the rows per
 * work-item. */
static int run_row_items(rumus_ctx *ctx, const char *op, const char *kernel,
                         rumus_dtype storage, size_t rows, size_t len,
                         const rumus__arg *args, size_t na) {
  if (len == 0) len = 1;
  size_t per = (2048 + len - 1) / len;
  if (per > 64) per = 64;
  while (per > 1 && (rows + per - 1) / per < 256) per /= 2;
  cl_ulong nr = rows;
  cl_uint rpw = (cl_uint)per;
  rumus__arg a[16];
  for (size_t i = 0; i < na; i++) a[i] = args[i];
  a[na] = RUMUS__ARG(nr);
  a[na + 1] = RUMUS__ARG(rpw);
  return run_items(ctx, op, storage, kernel, (rows + per - 1) / per, a,
                   na + 2, ROWS_WG);
}

/* run_row_items over the N C H rows of t (H: t's axis 2). */
static int run_t_rows(rumus_ctx *ctx, const char *op, const char *kernel,
                      const rumus_tensor *t, const rumus__arg *args,
                      size_t na) {
  return run_row_items(ctx, op, kernel, t->dtype,
                       t->shape[0] * t->shape[1] * t->shape[2], t->shape[3],
                       args, na);
}

/* run_row_items of `kernel` over `rows` rows of len elements of out (the
 * output of a forward, dx of a backward): args[0 .. na), then out's
 * non-temporal flag (pool_nt), for the kernels that store past the
 * caches. */
static int run_nt_rows(rumus_ctx *ctx, const char *op, const char *kernel,
                       const rumus_tensor *out, size_t rows, size_t len,
                       const rumus__arg *args, size_t na) {
  rumus__arg a[13];
  for (size_t i = 0; i < na; i++) a[i] = args[i];
  const cl_int nt = pool_nt(ctx, out);
  a[na] = RUMUS__ARG(nt);
  return run_row_items(ctx, op, kernel, out->dtype, rows, len, a, na + 1);
}

/* run_nt_rows over the N C H rows of t (H: t's axis 2). */
static int run_nt_t_rows(rumus_ctx *ctx, const char *op, const char *kernel,
                         const rumus_tensor *t, const rumus__arg *args,
                         size_t na) {
  return run_nt_rows(ctx, op, kernel, t,
                     t->shape[0] * t->shape[1] * t->shape[2], t->shape[3],
                     args, na);
}

/* On the GPU variant `kernel` over the elements of t (the output of a
 * forward, dx of a backward); on the CPU variant `kernel`_rows over t's
 * N C H rows (cl/pool.cl says why). */
static int run_rows(rumus_ctx *ctx, const char *op, const char *kernel,
                    const rumus_tensor *t, rumus__arg *args, size_t na) {
  if (rumus__gpu_variant(ctx))
    return run_items(ctx, op, t->dtype, kernel, t->numel, args, na,
                     pool_ls(ctx));
  char rows[64];
  snprintf(rows, sizeof rows, "%s_rows", kernel);
  return run_t_rows(ctx, op, rows, t, args, na);
}

/* ---- Parameters and shapes -------------------------------------------- */

/* One axis's window parameters; `what` is "h" or "w". */
static int check_axis(rumus_ctx *ctx, const char *op, const char *what,
                      size_t k, size_t s, size_t pad, size_t d) {
  RUMUS__FAIL_IF(k == 0, ctx, RUMUS_EINVAL, "%s: kernel_%s is 0", op, what);
  RUMUS__FAIL_IF(s == 0, ctx, RUMUS_EINVAL, "%s: stride_%s is 0", op, what);
  RUMUS__FAIL_IF(d == 0, ctx, RUMUS_EINVAL, "%s: dilation_%s is 0", op, what);
  RUMUS__FAIL_IF(k > INT32_MAX || s > INT32_MAX || pad > INT32_MAX ||
                     d > INT32_MAX,
                 ctx, RUMUS_EINVAL,
                 "%s: a window parameter of axis %s exceeds INT32_MAX", op,
                 what);
  RUMUS__FAIL_IF(pad > k / 2, ctx, RUMUS_EINVAL,
                 "%s: padding_%s %zu exceeds half of kernel_%s %zu", op, what,
                 pad, what, k);
  return RUMUS_OK;
}

/* PyTorch's pooling_output_shape; < 1 when no window fits. */
static long long out_extent(size_t in, size_t k, size_t s, size_t pad,
                            size_t d, int ceil_mode) {
  const long long S = (long long)s;
  long long num = (long long)in + 2 * (long long)pad -
                  (long long)d * ((long long)k - 1) - 1 +
                  (ceil_mode ? S - 1 : 0);
  long long out = (num >= 0 ? num / S : -((-num + S - 1) / S)) + 1;
  /* The last window must start inside the input or the left padding. */
  if (ceil_mode && out > 0 && (out - 1) * S >= (long long)(in + pad)) out--;
  return out;
}

/* The checks and output extents of rumus_pool2d_output_size. */
static int output_size(rumus_ctx *ctx, const char *op,
                       const rumus_pool2d_params *p, size_t h, size_t w,
                       size_t *oh, size_t *ow) {
  RUMUS__FORWARD(check_axis(ctx, op, "h", p->kernel_h, p->stride_h,
                            p->padding_h, p->dilation_h));
  RUMUS__FORWARD(check_axis(ctx, op, "w", p->kernel_w, p->stride_w,
                            p->padding_w, p->dilation_w));
  RUMUS__FAIL_IF(h > INT32_MAX || w > INT32_MAX, ctx, RUMUS_ESHAPE,
                 "%s: input extent %zu x %zu exceeds INT32_MAX", op, h, w);
  const long long e[2] = {
      out_extent(h, p->kernel_h, p->stride_h, p->padding_h, p->dilation_h,
                 p->ceil_mode),
      out_extent(w, p->kernel_w, p->stride_w, p->padding_w, p->dilation_w,
                 p->ceil_mode)};
  for (int a = 0; a < 2; a++)
    RUMUS__FAIL_IF(e[a] < 1, ctx, RUMUS_ESHAPE,
                   "%s: output extent along axis %d (%s) is %lld: the "
                   "window does not fit the padded input of %zu",
                   op, a + 2, a ? "W" : "H", e[a], a ? w : h);
  *oh = (size_t)e[0];
  *ow = (size_t)e[1];
  return RUMUS_OK;
}

int rumus_pool2d_output_size(rumus_ctx *ctx, const rumus_pool2d_params *p,
                             size_t h, size_t w, size_t *oh, size_t *ow) {
  if (p == NULL || oh == NULL || ow == NULL) return RUMUS_ENULL;
  return output_size(ctx, "rumus_pool2d_output_size", p, h, w, oh, ow);
}

/* t is a 4-D tensor of `dtype` (first: any floating type, `dtype` 0). */
static int check_4d(rumus_ctx *ctx, const char *op, const char *name,
                    const rumus_tensor *t, rumus_dtype dtype) {
  if (dtype == 0)
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, name, t));
  else
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, dtype));
  char s[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(t->ndim != 4, ctx, RUMUS_ESHAPE,
                 "%s: %s must be 4-D [N, C, H, W], got %s", op, name,
                 rumus__shape_str(t, s, sizeof s));
  return RUMUS_OK;
}

/* t (4-D) has the extents want[0..4); the message names the axis. */
static int check_extents(rumus_ctx *ctx, const char *op, const char *name,
                         const rumus_tensor *t, const size_t want[4]) {
  static const char *const AXES[4] = {"N", "C", "H", "W"};
  for (int a = 0; a < 4; a++) {
    char s[RUMUS__SHAPE_BUF];
    RUMUS__FAIL_IF(t->shape[a] != want[a], ctx, RUMUS_ESHAPE,
                   "%s: %s %s has %zu along axis %d (%s), expected %zu", op,
                   name, rumus__shape_str(t, s, sizeof s), t->shape[a], a,
                   AXES[a], want[a]);
  }
  return RUMUS_OK;
}

/* The geometry the kernels take: (H, W, OH, OW), (kh, kw, sh, sw),
 * (ph, pw, dh, dw). */
typedef struct {
  cl_long4 io, ks, pd;
} pool_call;

/* Checks `in` (floating, 4-D), `out` (in's type, 4-D) and, for max
 * pooling, `idx` (I32, out's shape; NULL otherwise), and the window p;
 * out must be [N, C, OH, OW] for in's [N, C, H, W]. */
static int check_window_call(rumus_ctx *ctx, const char *op,
                             const rumus_pool2d_params *p, const char *in_name,
                             const rumus_tensor *in, const char *out_name,
                             const rumus_tensor *out, const rumus_tensor *idx,
                             pool_call *c) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(p == NULL, ctx, RUMUS_ENULL, "%s: p is NULL", op);
  RUMUS__FORWARD(check_4d(ctx, op, in_name, in, 0));
  RUMUS__FORWARD(check_4d(ctx, op, out_name, out, in->dtype));
  size_t oh, ow;
  RUMUS__FORWARD(output_size(ctx, op, p, in->shape[2], in->shape[3], &oh, &ow));
  const size_t want[4] = {in->shape[0], in->shape[1], oh, ow};
  RUMUS__FORWARD(check_extents(ctx, op, out_name, out, want));
  if (idx) {
    RUMUS__FORWARD(check_4d(ctx, op, "indices", idx, RUMUS_I32));
    RUMUS__FORWARD(check_extents(ctx, op, "indices", idx, want));
    RUMUS__FAIL_IF(in->shape[2] * in->shape[3] > INT32_MAX, ctx, RUMUS_ESHAPE,
                   "%s: H * W = %zu exceeds INT32_MAX (int32 indices)", op,
                   in->shape[2] * in->shape[3]);
  }
  c->io = (cl_long4){{(cl_long)in->shape[2], (cl_long)in->shape[3],
                      (cl_long)oh, (cl_long)ow}};
  c->ks = (cl_long4){{(cl_long)p->kernel_h, (cl_long)p->kernel_w,
                      (cl_long)p->stride_h, (cl_long)p->stride_w}};
  c->pd = (cl_long4){{(cl_long)p->padding_h, (cl_long)p->padding_w,
                      (cl_long)p->dilation_h, (cl_long)p->dilation_w}};
  return RUMUS_OK;
}

/* Average pooling's extra rules: no dilation, no negative divisor. */
static int check_avg_params(rumus_ctx *ctx, const char *op,
                            const rumus_pool2d_params *p) {
  if (ctx == NULL || p == NULL) return RUMUS_OK; /* reported later */
  RUMUS__FAIL_IF(p->dilation_h != 1 || p->dilation_w != 1, ctx, RUMUS_EINVAL,
                 "%s: dilation %zu x %zu: avg pooling takes dilation 1", op,
                 p->dilation_h, p->dilation_w);
  RUMUS__FAIL_IF(p->divisor_override < 0, ctx, RUMUS_EINVAL,
                 "%s: divisor_override %d is negative", op,
                 p->divisor_override);
  return RUMUS_OK;
}

/* ---- GPU variant: divisions by multiplication, quads -------------------- */

/* Granlund and Montgomery's magic numbers for unsigned 32-bit division by
 * d (cl/pool.cl, pool_qdiv): l = ceil(log2 d), m = floor(2^32 (2^l - d) /
 * d) + 1, shifts min(l, 1) and l - 1 (0 for d = 1), packed s1 | s2 << 8. */
static void magic_of(uint64_t d, cl_uint *m, cl_uint *sv) {
  if (d == 0) d = 1; /* not a divisor of the call: any value */
  unsigned l = 0;
  while (l < 32 && ((uint64_t)1 << l) < d) l++;
  *m = (cl_uint)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
  *sv = (cl_uint)((l < 1 ? l : 1) | ((l > 0 ? l - 1 : 0) << 8));
}

/* The _q kernels' arguments: divisors H W, W, sh, sw, OW (lanes 0-4); 1
 * when every index of the call fits in 32 bits and the GPU variant runs
 * (those kernels apply), else 0. */
static int pool_magics(const rumus_ctx *ctx, const pool_call *c,
                       const rumus_tensor *in, const rumus_tensor *out,
                       cl_uint8 *mg, cl_uint8 *sv) {
  const size_t lim = (size_t)1 << 31;
  if (!rumus__gpu_variant(ctx) || in->numel >= lim || out->numel >= lim)
    return 0;
  const uint64_t d[5] = {(uint64_t)(c->io.s[0] * c->io.s[1]),
                         (uint64_t)c->io.s[1], (uint64_t)c->ks.s[2],
                         (uint64_t)c->ks.s[3], (uint64_t)c->io.s[3]};
  for (int k = 0; k < 8; k++) magic_of(k < 5 ? d[k] : 1, &mg->s[k], &sv->s[k]);
  return 1;
}

/* The quad kernels (GPU variant, cl/pool.cl: a work-item per 4 inputs of
 * a row): their magic numbers (lanes 0 quads per row, 1 W, 2 sh, 3 sw, 4
 * OW, 5 H, 6 OH), the number of quads and vec (dx aligned to 4 elements
 * and W a multiple of 4: 4-wide stores).  1 when they apply: the GPU
 * variant, every quad number and plane position in 32 bits, the window
 * arithmetic in int (dilation 1; `adaptive`: the bins' products with
 * (H + 1)(OH + 1) and (W + 1)(OW + 1) below 2^32). */
static int quad_plan(const rumus_ctx *ctx, const pool_call *c,
                     const rumus_tensor *dx, int adaptive, cl_uint8 *mg,
                     cl_uint8 *sv, size_t *quads, cl_int *vec) {
  const uint64_t lim = (uint64_t)1 << 31;
  const uint64_t H = (uint64_t)c->io.s[0], W = (uint64_t)c->io.s[1],
                 OH = (uint64_t)c->io.s[2], OW = (uint64_t)c->io.s[3];
  const uint64_t nq = (W + 3) / 4;
  if (!rumus__gpu_variant(ctx) || H * W >= lim || OH * OW >= lim)
    return 0;
  const uint64_t planes = dx->numel / (H * W);
  if (planes * H * nq >= 2 * lim) return 0;
  uint64_t sh = 1, sw = 1;
  if (adaptive) {
    if ((H + 1) * (OH + 1) >= 2 * lim || (W + 1) * (OW + 1) >= 2 * lim)
      return 0;
  } else {
    if (c->pd.s[2] != 1 || c->pd.s[3] != 1) return 0;
    sh = (uint64_t)c->ks.s[2];
    sw = (uint64_t)c->ks.s[3];
    for (int a = 0; a < 2; a++)
      if ((uint64_t)(c->io.s[a] + 2 * c->pd.s[a] + c->ks.s[a] +
                     c->ks.s[2 + a]) >= lim)
        return 0;
  }
  const uint64_t d[7] = {nq, W, sh, sw, OW, H, OH};
  for (int k = 0; k < 8; k++) magic_of(k < 7 ? d[k] : 1, &mg->s[k], &sv->s[k]);
  *quads = (size_t)(planes * H * nq);
  *vec = W % 4 == 0 && rumus__aligned(dx, 0, 4);
  return 1;
}

/* Launches `kernel` over the quads with args[0 .. na) (2 left for
 * run_items) followed by vec, mg and sv. */
static int run_quads(rumus_ctx *ctx, const char *op, const char *kernel,
                     const rumus_tensor *dx, const rumus__arg *args,
                     size_t na, size_t quads, cl_int vec, const cl_uint8 *mg,
                     const cl_uint8 *sv) {
  rumus__arg aq[16];
  for (size_t i = 0; i < na; i++) aq[i] = args[i];
  aq[na] = RUMUS__ARG(vec);
  aq[na + 1] = RUMUS__ARG(*mg);
  aq[na + 2] = RUMUS__ARG(*sv);
  return run_items(ctx, op, dx->dtype, kernel, quads, aq, na + 3,
                   pool_ls(ctx));
}

/* 1 if the GPU variant runs, the windows are 2 x 2 of stride 2 without
 * padding or dilation and tile the input `in` (H = 2 OH, W = 2 OW, W a
 * multiple of wmul), and every position is below 2^31. */
static int k2_tiles(const rumus_ctx *ctx, const pool_call *c,
                    const rumus_tensor *in, cl_long wmul) {
  const cl_long4 io = c->io, ks = c->ks, pd = c->pd;
  return rumus__gpu_variant(ctx) && in->numel < ((size_t)1 << 31) &&
         ks.s[0] == 2 && ks.s[1] == 2 && ks.s[2] == 2 && ks.s[3] == 2 &&
         pd.s[0] == 0 && pd.s[1] == 0 && pd.s[2] == 1 && pd.s[3] == 1 &&
         io.s[0] == 2 * io.s[2] && io.s[1] == 2 * io.s[3] &&
         io.s[1] % wmul == 0;
}

/* Lanes 0 OW / per and 6 OH of (mg, sv), the rest 1. */
static void k2_magics(const pool_call *c, int per, cl_uint8 *mg,
                      cl_uint8 *sv) {
  for (int k = 0; k < 8; k++)
    magic_of(k == 0   ? (uint64_t)c->io.s[3] / (uint64_t)per
             : k == 6 ? (uint64_t)c->io.s[2]
                      : 1,
             &mg->s[k], &sv->s[k]);
}

/* The 2 x 2, stride 2 backwards (cl/pool.cl, a work-item per output
 * pair): 1 when they apply (GPU variant; windows 2 x 2, stride 2, no
 * padding or dilation tiling the input: H = 2 OH, W = 2 OW, W a multiple
 * of 4; every position below 2^31), with lanes 0 OW / 2 and 6 OH of (mg,
 * sv), the number of pairs and vec (dx aligned to 4 elements). */
static int k2_plan(const rumus_ctx *ctx, const pool_call *c,
                   const rumus_tensor *dx, cl_uint8 *mg, cl_uint8 *sv,
                   size_t *pairs, cl_int *vec) {
  if (!k2_tiles(ctx, c, dx, 4)) return 0;
  k2_magics(c, 2, mg, sv);
  *pairs = dx->numel / 8;
  *vec = rumus__aligned(dx, 0, 4);
  return 1;
}

/* The 2 x 2, stride 2 forwards (a work-item per 4 outputs of a row, the
 * 2 x 8 block of x under them): as k2_plan with OW a multiple of 4; vec
 * when x, y and idx (NULL: none) are aligned to 4 elements. */
static int k2_fwd_plan(const rumus_ctx *ctx, const pool_call *c,
                       const rumus_tensor *x, const rumus_tensor *y,
                       const rumus_tensor *idx, cl_uint8 *mg, cl_uint8 *sv,
                       size_t *quads, cl_int *vec) {
  if (!k2_tiles(ctx, c, x, 8)) return 0;
  k2_magics(c, 4, mg, sv);
  *quads = y->numel / 4;
  *vec = rumus__aligned(x, 0, 4) && rumus__aligned(y, 0, 4) &&
         (idx == NULL || rumus__aligned(idx, 0, 4));
  return 1;
}

/* 1 for 3 x 3 windows, stride 2, padding 1, no dilation, on W = 2 OW a
 * multiple of 4 (the max kernels _k3s2: the backward's quads then never
 * cross a row and cover output columns 2 m .. 2 m + 2). */
static int k3s2_window(const pool_call *c) {
  const cl_long4 io = c->io, ks = c->ks, pd = c->pd;
  return ks.s[0] == 3 && ks.s[1] == 3 && ks.s[2] == 2 && ks.s[3] == 2 &&
         pd.s[0] == 1 && pd.s[1] == 1 && pd.s[2] == 1 && pd.s[3] == 1 &&
         io.s[1] == 2 * io.s[3] && io.s[1] % 4 == 0;
}

/* The backwards of those windows by blocks of 2 x 4 inputs
 * (maxpool2d_bwd_k3s2b, avgpool2d_bwd_k3s2b): 1 when they apply (GPU
 * variant, k3s2_window, every position below 2^31), with lanes 0 W / 4,
 * 1 W and 6 A (block rows per plane: max(ceil(H / 2), OH)) of (mg, sv),
 * the blocks and vec (dx aligned to 4 elements).  Each output's dy (and
 * index) is read by two work-items, not three (and checked once). */
static int k3s2_blocks(const rumus_ctx *ctx, const pool_call *c,
                       const rumus_tensor *dx, cl_uint8 *mg, cl_uint8 *sv,
                       size_t *blocks, cl_int *vec) {
  if (!rumus__gpu_variant(ctx) || dx->numel >= ((size_t)1 << 31) ||
      !k3s2_window(c))
    return 0;
  const uint64_t H = (uint64_t)c->io.s[0], W = (uint64_t)c->io.s[1];
  const uint64_t OH = (uint64_t)c->io.s[2];
  const uint64_t A = (H + 1) / 2 > OH ? (H + 1) / 2 : OH;
  const uint64_t planes = dx->numel / (H * W);
  if (planes * A * (W / 4) >= ((uint64_t)1 << 31)) return 0;
  for (int k = 0; k < 8; k++)
    magic_of(k == 0 ? W / 4 : k == 1 ? W : k == 6 ? A : 1, &mg->s[k],
             &sv->s[k]);
  *blocks = (size_t)(planes * A * (W / 4));
  *vec = rumus__aligned(dx, 0, 4);
  return 1;
}

/* k3s2_blocks for the max backward, not under RUMUS_MAXPOOL_BWD=old or
 * tile. */
static int k3s2_block_plan(const rumus_ctx *ctx, const pool_call *c,
                           const rumus_tensor *dx, cl_uint8 *mg,
                           cl_uint8 *sv, size_t *blocks, cl_int *vec) {
  const char *v = getenv("RUMUS_MAXPOOL_BWD");
  if (v != NULL && strcmp(v, "block") != 0) return 0;
  return k3s2_blocks(ctx, c, dx, mg, sv, blocks, vec);
}

/* The max forward of 3 x 3 windows, stride 2, padding 1 (cl/pool.cl,
 * maxpool_fwd_k3s2): 1 when it applies (GPU variant, no dilation, W even,
 * OW = W / 2 a multiple of 4, every position below 2^31), with the lanes
 * of k2_fwd_plan, the number of output quads and vec (x, y, idx aligned
 * to 4 elements). */
static int k3s2_fwd_plan(const rumus_ctx *ctx, const pool_call *c,
                         const rumus_tensor *x, const rumus_tensor *y,
                         const rumus_tensor *idx, cl_uint8 *mg,
                         cl_uint8 *sv, size_t *quads, cl_int *vec) {
  if (!rumus__gpu_variant(ctx) || x->numel >= ((size_t)1 << 31) ||
      !k3s2_window(c) || c->io.s[3] % 4 != 0)
    return 0;
  k2_magics(c, 4, mg, sv);
  *quads = y->numel / 4;
  *vec = rumus__aligned(x, 0, 4) && rumus__aligned(y, 0, 4) &&
         rumus__aligned(idx, 0, 4);
  return 1;
}

/* The forward quad kernels (a work-item per 4 outputs WG apart, cl/pool.cl):
 * lanes 0 OW and 6 OH of (mg, sv), the work-items to launch.  1 when they
 * apply: the GPU variant, every output position and plane position
 * below 2^31, every window row, column and area in int. */
static int fwd_quad_plan(const rumus_ctx *ctx, const pool_call *c,
                         const rumus_tensor *y, cl_uint8 *mg, cl_uint8 *sv,
                         size_t *items) {
  const uint64_t lim = (uint64_t)1 << 31, ls = pool_ls(ctx);
  const uint64_t H = (uint64_t)c->io.s[0], W = (uint64_t)c->io.s[1],
                 OH = (uint64_t)c->io.s[2], OW = (uint64_t)c->io.s[3];
  if (!rumus__gpu_variant(ctx) || H * W >= lim || y->numel >= lim ||
      (uint64_t)c->ks.s[0] * (uint64_t)c->ks.s[1] >= lim)
    return 0;
  for (int a = 0; a < 2; a++) { /* in + 2 p + (k - 1) d + s */
    const uint64_t k = (uint64_t)c->ks.s[a], s = (uint64_t)c->ks.s[2 + a];
    if ((uint64_t)c->io.s[a] + 2 * (uint64_t)c->pd.s[a] +
            (k - 1) * (uint64_t)c->pd.s[2 + a] + s >= lim)
      return 0;
  }
  const uint64_t d[7] = {OW, 1, 1, 1, 1, 1, OH};
  for (int k = 0; k < 8; k++) magic_of(k < 7 ? d[k] : 1, &mg->s[k], &sv->s[k]);
  *items = (y->numel + 4 * ls - 1) / (4 * ls) * ls;
  return 1;
}

/* Launches a forward quad kernel with args[0 .. na) (2 left for
 * run_items) followed by n (y's elements), mg and sv. */
static int run_fwd_quads(rumus_ctx *ctx, const char *op, const char *kernel,
                         const rumus_tensor *y, const rumus__arg *args,
                         size_t na, size_t items, const cl_uint8 *mg,
                         const cl_uint8 *sv) {
  rumus__arg aq[16];
  cl_uint n = (cl_uint)y->numel;
  for (size_t i = 0; i < na; i++) aq[i] = args[i];
  aq[na] = RUMUS__ARG(n);
  aq[na + 1] = RUMUS__ARG(*mg);
  aq[na + 2] = RUMUS__ARG(*sv);
  return run_items(ctx, op, y->dtype, kernel, items, aq, na + 3,
                   pool_ls(ctx));
}

/* Outputs a tile kernel stages (POOL_TILE in cl/pool.cl). */
#define POOL_TILE 1024

/* The most outputs along one axis whose windows (k wide, stride s) can
 * hold n consecutive inputs. */
static uint64_t tile_span(uint64_t n, uint64_t k, uint64_t s) {
  return (n + k - 2) / s + 1;
}

/* maxpool2d_bwd_tile (cl/pool.cl): 1 when it applies (where the quads
 * do), with its tile tl = (TH, TW, tiles along h, along w), lanes 0 TW /
 * 4, 1 W, 2 sh, 3 sw, 5 and 6 of (mg, sv), its work-groups and vec (W a
 * multiple of 4, dx aligned).  Tiles of about 2048 inputs (rows of at
 * most 256), fewer rows (then narrower) where their outputs would not
 * fit in POOL_TILE. */
static int tile_plan(const rumus_ctx *ctx, const pool_call *c,
                     const rumus_tensor *dx, cl_uint8 *mg, cl_uint8 *sv,
                     cl_uint4 *tl, size_t *groups, cl_int *vec) {
  size_t quads;
  if (!quad_plan(ctx, c, dx, 0, mg, sv, &quads, vec)) return 0;
  const uint64_t H = (uint64_t)c->io.s[0], W = (uint64_t)c->io.s[1];
  const uint64_t kh = (uint64_t)c->ks.s[0], kw = (uint64_t)c->ks.s[1],
                 sh = (uint64_t)c->ks.s[2], sw = (uint64_t)c->ks.s[3];
  uint64_t tw = (W + 3) / 4 * 4;
  if (tw > 256) tw = 256;
  uint64_t th = 2048 / tw > H ? H : 2048 / tw;
  if (th == 0) th = 1;
  while (th > 1 && tile_span(th, kh, sh) * tile_span(tw, kw, sw) > POOL_TILE)
    th--;
  while (tw > 4 && tile_span(th, kh, sh) * tile_span(tw, kw, sw) > POOL_TILE)
    tw -= 4;
  if (tile_span(th, kh, sh) * tile_span(tw, kw, sw) > POOL_TILE) return 0;
  const uint64_t nth = (H + th - 1) / th, ntw = (W + tw - 1) / tw;
  const uint64_t planes = dx->numel / (H * W);
  if (planes * nth * ntw >= ((uint64_t)1 << 31) / pool_ls(ctx)) return 0;
  const uint64_t d[7] = {tw / 4, W, sh, sw, 1, ntw, nth};
  for (int k = 0; k < 8; k++) magic_of(k < 7 ? d[k] : 1, &mg->s[k], &sv->s[k]);
  *tl = (cl_uint4){{(cl_uint)th, (cl_uint)tw, (cl_uint)nth, (cl_uint)ntw}};
  *groups = (size_t)(planes * nth * ntw);
  return 1;
}

/* Whether the max backward takes maxpool2d_bwd_tile where it applies
 * (GPU variant): by default where windows overlap (stride below the
 * kernel on an axis: on the H200 k3s2p1 at 64x64x112 took 174 us against
 * the quads' 194, k3s1p1 119 against 133, while windows that tile the
 * input ran 1.6x slower than maxpool2d_bwd_k2); RUMUS_MAXPOOL_BWD=tile
 * always, =old never. */
static int max_bwd_tiles(const pool_call *c) {
  const char *v = getenv("RUMUS_MAXPOOL_BWD");
  if (v != NULL && strcmp(v, "tile") == 0) return 1;
  if (v != NULL && strcmp(v, "old") == 0) return 0;
  return c->ks.s[2] < c->ks.s[0] || c->ks.s[3] < c->ks.s[1];
}

/* Launches maxpool2d_bwd_tile with args[0 .. 12) (2 left for run_items):
 * groups work-groups of pool_ls() work-items. */
static int run_tiles(rumus_ctx *ctx, const char *op, const rumus_tensor *dx,
                     const rumus__arg *args, size_t groups, cl_int vec,
                     const cl_uint8 *mg, const cl_uint8 *sv,
                     const cl_uint4 *tl) {
  rumus__arg a[16];
  for (size_t i = 0; i < 12; i++) a[i] = args[i];
  a[12] = RUMUS__ARG(vec);
  a[13] = RUMUS__ARG(*mg);
  a[14] = RUMUS__ARG(*sv);
  a[15] = RUMUS__ARG(*tl);
  const size_t ls = pool_ls(ctx);
  return run_items(ctx, op, dx->dtype, "maxpool2d_bwd_tile", groups * ls, a,
                   16, ls);
}

/* ---- GPU variant: average pooling by bands ----------------------------- */

/* Floats a band stages at most (BAND_CAP in cl/pool.cl). */
#define BAND_CAP 2048

/* Whether average pooling takes the bands where they fit (GPU variant):
 * by default where windows overlap (`overlap`: a stride below its
 * kernel), where the quads read every input once per window from the
 * caches (pool.cl; on the H100 3x3 windows of stride 1 at 128x512x28
 * forward 313 us against 514, backward 378 against 748; stride 2 at
 * 64x256x56 123 against 142 and 285 against 353).  Adaptive bins that
 * divide the input were slower as bands (28 -> 7 at 256x512: 214 us
 * against 179 forward, 464 against 250 backward) and take them only
 * when forced.  RUMUS_AVGPOOL_BAND=1 always, =0 never. */
static int band_wanted(int overlap) {
  const char *v = getenv("RUMUS_AVGPOOL_BAND");
  if (v != NULL && strcmp(v, "1") == 0) return 1;
  if (v != NULL && strcmp(v, "0") == 0) return 0;
  return overlap;
}

/* Rows a band takes (output rows of the forward, dx rows of the
 * backward) for at most BAND_CAP staged floats: staged rows of width
 * `in` (W forward, OW backward), m of them at most; 0 when not one fits. */
static uint64_t band_rows(const pool_call *c, int bwd) {
  const uint64_t W = (uint64_t)c->io.s[1], OW = (uint64_t)c->io.s[3];
  const uint64_t kh = (uint64_t)c->ks.s[0], sh = (uint64_t)c->ks.s[2];
  const uint64_t staged = bwd ? (uint64_t)c->io.s[2] : (uint64_t)c->io.s[0];
  const uint64_t out = bwd ? (uint64_t)c->io.s[0] : (uint64_t)c->io.s[2];
  const uint64_t m = BAND_CAP / (bwd ? OW : W);
  uint64_t br;
  if (staged <= m) /* the whole plane */
    br = out;
  else if (bwd) /* dy rows of BR dx rows: at most tile_span(BR, kh, sh) */
    br = m * sh >= kh ? m * sh - kh + 1 : 0;
  else /* x rows of BR output rows: at most (BR - 1) sh + kh */
    br = m >= kh ? (m - kh) / sh + 1 : 0;
  return br < out ? br : out;
}

/* avgpool2d_{fwd,bwd}_band (cl/pool.cl) for `planes` planes: 1 when they
 * apply, with bd = (BR, bands per plane) and the work-groups: the GPU
 * variant, every extent, window area and window end in int, a band of
 * one row at least. */
static int band_plan(const rumus_ctx *ctx, const pool_call *c, int bwd,
                     size_t planes, cl_int2 *bd, size_t *groups) {
  const uint64_t lim = (uint64_t)1 << 31;
  const uint64_t H = (uint64_t)c->io.s[0], W = (uint64_t)c->io.s[1],
                 OH = (uint64_t)c->io.s[2], OW = (uint64_t)c->io.s[3];
  if (!rumus__gpu_variant(ctx) || H * W >= lim || OH * OW >= lim ||
      (uint64_t)c->ks.s[0] * (uint64_t)c->ks.s[1] >= lim)
    return 0;
  for (int a = 0; a < 2; a++) /* in + 2 p + k + s */
    if ((uint64_t)c->io.s[a] + 2 * (uint64_t)c->pd.s[a] +
            (uint64_t)c->ks.s[a] + (uint64_t)c->ks.s[2 + a] >= lim)
      return 0;
  const uint64_t br = band_rows(c, bwd), rows = bwd ? H : OH;
  if (br == 0) return 0;
  const uint64_t nb = (rows + br - 1) / br;
  if ((uint64_t)planes * nb >= lim / pool_ls(ctx)) return 0;
  *bd = (cl_int2){{(cl_int)br, (cl_int)nb}};
  *groups = (size_t)((uint64_t)planes * nb);
  return 1;
}

/* Floats a 3 x 3 band stages at most (BOX3_CAP in cl/pool.cl). */
#define BOX3_CAP 4096

/* avgpool2d_{fwd,bwd}_box3 (cl/pool.cl) for `planes` planes: 1 when they
 * apply (the GPU variant, 3 x 3 windows of stride 1, padding 0 or 1 per
 * axis, every extent in int, room for a row a band; RUMUS_AVGPOOL_BOX3=0
 * never), with bd = (BR, bands per plane) and the work-groups. */
static int box3_plan(const rumus_ctx *ctx, const pool_call *c, int bwd,
                     size_t planes, cl_int2 *bd, size_t *groups) {
  const char *v = getenv("RUMUS_AVGPOOL_BOX3");
  const uint64_t lim = (uint64_t)1 << 30;
  const uint64_t H = (uint64_t)c->io.s[0], W = (uint64_t)c->io.s[1],
                 OH = (uint64_t)c->io.s[2], OW = (uint64_t)c->io.s[3];
  if ((v != NULL && strcmp(v, "0") == 0) || !rumus__gpu_variant(ctx) ||
      c->ks.s[0] != 3 || c->ks.s[1] != 3 || c->ks.s[2] != 1 ||
      c->ks.s[3] != 1 || c->pd.s[0] > 1 || c->pd.s[1] > 1 ||
      H * W >= lim || OH * OW >= lim ||
      OH != H + 2 * (uint64_t)c->pd.s[0] - 2 ||
      OW != W + 2 * (uint64_t)c->pd.s[1] - 2)
    return 0;
  const uint64_t rows = bwd ? H : OH, tw = (bwd ? W : OW) + 2;
  if (BOX3_CAP / tw < 3) return 0;
  const uint64_t br = BOX3_CAP / tw - 2 < rows ? BOX3_CAP / tw - 2 : rows;
  const uint64_t nb = (rows + br - 1) / br;
  if ((uint64_t)planes * nb >= lim / pool_ls(ctx)) return 0;
  *bd = (cl_int2){{(cl_int)br, (cl_int)nb}};
  *groups = (size_t)((uint64_t)planes * nb);
  return 1;
}

/* Runs avgpool2d_fwd_box3 (bwd 0) or _bwd_box3 where planned, else
 * avgpool2d_fwd_band or _bwd_band, over t (y or dx) where wanted and
 * planned, with the average call's args[0 .. 11) (2 left for
 * run_items); 1 if it ran (*rc its status). */
static int avg_bands(rumus_ctx *ctx, const char *op, const pool_call *c,
                     int bwd, int overlap, const rumus_tensor *t,
                     const rumus__arg *args, int *rc) {
  cl_int2 bd;
  size_t groups;
  const size_t planes = t->shape[0] * t->shape[1], ls = pool_ls(ctx);
  if (!band_wanted(overlap)) return 0;
  if (box3_plan(ctx, c, bwd, planes, &bd, &groups)) {
    rumus__arg a[12];
    for (int i = 0; i < 11; i++) a[i] = args[i];
    a[11] = RUMUS__ARG(bd);
    *rc = run_items(ctx, op, t->dtype,
                    bwd ? "avgpool2d_bwd_box3" : "avgpool2d_fwd_box3",
                    groups * ls, a, 12, ls);
    return 1;
  }
  if (!band_plan(ctx, c, bwd, planes, &bd, &groups)) return 0;
  /* The backward divides by the strides (lanes 2 and 3). */
  cl_uint8 mg, sv;
  for (int k = 0; k < 8; k++)
    magic_of(k == 2 || k == 3 ? (uint64_t)c->ks.s[k] : 1, &mg.s[k], &sv.s[k]);
  rumus__arg a[14];
  for (int i = 0; i < 11; i++) a[i] = args[i];
  a[11] = RUMUS__ARG(bd);
  a[12] = RUMUS__ARG(mg);
  a[13] = RUMUS__ARG(sv);
  *rc = run_items(ctx, op, t->dtype,
                  bwd ? "avgpool2d_bwd_band" : "avgpool2d_fwd_band",
                  groups * ls, a, bwd ? 14 : 12, ls);
  return 1;
}

/* Whether the average pooling of 3 x 3 windows, stride 2, padding 1 may
 * take the max pooling's blocks (avgpool2d_fwd_k3s2, _bwd_k3s2b):
 * RUMUS_AVGPOOL_K3S2=0 leaves them to the bands, as forcing the bands
 * does. */
static int avg_k3s2_wanted(void) {
  const char *v = getenv("RUMUS_AVGPOOL_K3S2");
  return (v == NULL || strcmp(v, "0") != 0) && !band_wanted(0);
}

/* ---- GPU variant: windows that tile the input -------------------------- */

/* Runs avgpool2d_fwd_tiled (bwd 0) or _bwd_tiled over out (y or dx) from
 * in (x or dy) where the GPU variant runs, the windows of c tile the
 * input (kernel = stride, no padding, H = kh OH, W = kw OW, unless the
 * caller's bins say so), every index fits in 32 bits, and
 * RUMUS_POOL_TILED is not 0; d is the divisor.  1 if it ran (*rc its
 * status). */
static int run_tiled(rumus_ctx *ctx, const char *op, const pool_call *c,
                     int bwd, const rumus_tensor *in, const rumus_tensor *out,
                     cl_int d, int *rc) {
  const char *v = getenv("RUMUS_POOL_TILED");
  const uint64_t lim = (uint64_t)1 << 31;
  const uint64_t H = (uint64_t)c->io.s[0], W = (uint64_t)c->io.s[1],
                 OH = (uint64_t)c->io.s[2], OW = (uint64_t)c->io.s[3];
  if ((v != NULL && strcmp(v, "0") == 0) || !rumus__gpu_variant(ctx) ||
      OH == 0 || OW == 0 || H % OH != 0 || W % OW != 0)
    return 0;
  const uint64_t kh = H / OH, kw = W / OW, nq = (W + 3) / 4;
  const uint64_t planes = out->numel / (bwd ? H * W : OH * OW);
  const uint64_t items = bwd ? planes * H * nq : out->numel;
  if (H * W >= lim || items >= lim) return 0;
  const uint64_t dv[8] = {bwd ? nq : OW, kw, kh, 1, 1, bwd ? H : OH, 1, 1};
  cl_uint8 mg, sv;
  for (int k = 0; k < 8; k++) magic_of(dv[k], &mg.s[k], &sv.s[k]);
  const cl_int vec = bwd ? W % 4 == 0 && rumus__aligned(out, 0, 4)
                         : kw == 4 && rumus__aligned(in, 0, 4);
  cl_ulong io_ = rumus__off(in), oo = rumus__off(out);
  rumus__arg a[11] = {{0, NULL},          {0, NULL},      RUMUS__ARG(in->mem),
                      RUMUS__ARG(io_),    RUMUS__ARG(out->mem),
                      RUMUS__ARG(oo),     RUMUS__ARG(c->io), RUMUS__ARG(d),
                      RUMUS__ARG(vec),    RUMUS__ARG(mg), RUMUS__ARG(sv)};
  const size_t ls = TILED_LS < ctx->max_wg ? TILED_LS : ctx->max_wg;
  *rc = run_items(ctx, op, out->dtype,
                  bwd ? "avgpool2d_bwd_tiled" : "avgpool2d_fwd_tiled",
                  (size_t)items, a, 11, ls);
  return 1;
}

/* run_tiled for average pooling p: windows that tile the input (kernel =
 * stride, no padding, H = kh OH, W = kw OW), unless the bands are
 * forced. */
static int avg_tiled(rumus_ctx *ctx, const char *op, const pool_call *c,
                     const rumus_pool2d_params *p, int bwd,
                     const rumus_tensor *in, const rumus_tensor *out,
                     int *rc) {
  const cl_long kh = c->ks.s[0], kw = c->ks.s[1];
  if (band_wanted(0) /* forced */ || c->ks.s[2] != kh || c->ks.s[3] != kw || c->pd.s[0] != 0 ||
      c->pd.s[1] != 0 || c->io.s[0] != kh * c->io.s[2] ||
      c->io.s[1] != kw * c->io.s[3])
    return 0;
  const cl_int d = p->divisor_override > 0 ? (cl_int)p->divisor_override
                                           : (cl_int)(kh * kw);
  return run_tiled(ctx, op, c, bwd, in, out, d, rc);
}

/* Windows overlap along an axis (stride below kernel). */
static int windows_overlap(const pool_call *c) {
  return c->ks.s[2] < c->ks.s[0] || c->ks.s[3] < c->ks.s[1];
}

/* ---- Max pooling -------------------------------------------------------- */

/* 1 if the CPU variant's max backward rows gather in vectors (cl/pool.cl's
 * maxpool_bwd_span): windows 2 or 3 wide of stride 2 along w, padding at
 * most 1, no dilation, and room for a block of 8 outputs; and rows of at
 * least 64, where they beat the scatter by planes (on rows of 28 their
 * setup took twice the scatter's time). */
static int max_bwd_vec(const pool_call *c) {
  const cl_long k = c->ks.s[1], p = c->pd.s[1], W = c->io.s[1],
                OW = c->io.s[3];
  if (c->ks.s[3] != 2 || (k != 2 && k != 3) || c->pd.s[2] != 1 ||
      c->pd.s[3] != 1 || p > 1 || W < 64)
    return 0;
  const cl_long f = k == 3 || p == 1 ? 1 : 0;
  const cl_long l1 = (W - 16 + p) / 2, l2 = OW - 8;
  return (l1 < l2 ? l1 : l2) >= f;
}

/* Whether the CPU variant's new kernels may run: RUMUS_POOL_CPU=old keeps
 * the row kernels they replace (to compare the two in one build). */
static int pool_cpu_new(const rumus_ctx *ctx) {
  const char *v = getenv("RUMUS_POOL_CPU");
  return !rumus__gpu_variant(ctx) && (v == NULL || strcmp(v, "old") != 0);
}

/* Whether the CPU variant's max pooling takes maxpool2d_{fwd,bwd}_k2rows:
 * 2 x 2 windows of stride 2, no padding or dilation, tiling the input (H
 * = 2 OH, W = 2 OW) with rows of at least 4 outputs (not under
 * RUMUS_POOL_CPU=old). */
static int max_k2rows(const rumus_ctx *ctx, const pool_call *c) {
  const cl_long4 io = c->io, ks = c->ks, pd = c->pd;
  return pool_cpu_new(ctx) && ks.s[0] == 2 && ks.s[1] == 2 &&
         ks.s[2] == 2 && ks.s[3] == 2 && pd.s[0] == 0 && pd.s[1] == 0 &&
         pd.s[2] == 1 && pd.s[3] == 1 && io.s[0] == 2 * io.s[2] &&
         io.s[1] == 2 * io.s[3] && io.s[3] >= 4;
}

/* Whether the CPU variant's max forward takes maxpool2d_fwd_k3rows: 3
 * wide windows of padding 1 along w, no dilation, stride 2 on rows of W =
 * 2 OW from 16 or stride 1 on rows of W = OW from 8 (blocks aligned to
 * the row, whole vector stores, non-temporal where pool_nt says; not
 * under RUMUS_POOL_CPU=old). */
static int max_fwd_k3rows(const rumus_ctx *ctx, const pool_call *c) {
  const cl_long W = c->io.s[1], OW = c->io.s[3], sw = c->ks.s[3];
  return pool_cpu_new(ctx) && c->ks.s[1] == 3 && c->pd.s[1] == 1 &&
         c->pd.s[3] == 1 &&
         ((sw == 2 && W >= 16 && W == 2 * OW) ||
          (sw == 1 && W >= 8 && W == OW));
}

/* The CPU variant's max backward by rows (args[0 .. 12)): for 3 wide
 * windows of stride 2, padding 1 along w (no dilation on either axis) on
 * rows of even width from 16, maxpool2d_bwd_k3rows (blocks aligned to the
 * row, whole vector stores, non-temporal where pool_nt says, each index
 * checked by an input row that reads it anyway; not under
 * RUMUS_POOL_CPU=old), else maxpool2d_bwd_rows. */
static int max_bwd_rows(rumus_ctx *ctx, const char *op, const pool_call *c,
                        const rumus_tensor *dx, const rumus__arg *args) {
  const cl_long W = c->io.s[1];
  if (!pool_cpu_new(ctx) || c->ks.s[1] != 3 || c->ks.s[3] != 2 ||
      c->pd.s[1] != 1 || c->pd.s[2] != 1 || c->pd.s[3] != 1 || W < 16 ||
      W % 2 != 0)
    return run_t_rows(ctx, op, "maxpool2d_bwd_rows", dx, args, 12);
  return run_nt_t_rows(ctx, op, "maxpool2d_bwd_k3rows", dx, args, 12);
}

int rumus_maxpool2d_fwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                        const rumus_tensor *x, rumus_tensor *y,
                        rumus_tensor *indices) {
  const char *op = "rumus_maxpool2d_fwd";
  pool_call c;
  if (ctx && indices == NULL)
    return rumus__fail(ctx, RUMUS_ENULL, "%s: indices is NULL", op);
  RUMUS__FORWARD(check_window_call(ctx, op, p, "x", x, "y", y, indices, &c));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "y", y, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "indices", indices, 0));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "y", y, "indices", indices, 0));
  if (y->numel == 0) return RUMUS_OK;
  cl_ulong xo = rumus__off(x), yo = rumus__off(y), io = rumus__off(indices);
  rumus__arg args[11] = {{0, NULL}, {0, NULL}, /* count, first: run_items */
                         RUMUS__ARG(x->mem), RUMUS__ARG(xo),
                         RUMUS__ARG(y->mem), RUMUS__ARG(yo),
                         RUMUS__ARG(indices->mem), RUMUS__ARG(io),
                         RUMUS__ARG(c.io), RUMUS__ARG(c.ks), RUMUS__ARG(c.pd)};
  cl_uint8 mg, sv;
  size_t items;
  cl_int vec;
  if (k2_fwd_plan(ctx, &c, x, y, indices, &mg, &sv, &items, &vec))
    return run_quads(ctx, op, "maxpool2d_fwd_k2", y, args, 11, items, vec, &mg,
                     &sv);
  if (k3s2_fwd_plan(ctx, &c, x, y, indices, &mg, &sv, &items, &vec))
    return run_quads(ctx, op, "maxpool2d_fwd_k3s2", y, args, 11, items, vec,
                     &mg, &sv);
  if (fwd_quad_plan(ctx, &c, y, &mg, &sv, &items))
    return run_fwd_quads(ctx, op, "maxpool2d_fwd_quad", y, args, 11, items,
                         &mg, &sv);
  if (max_k2rows(ctx, &c))
    return run_nt_t_rows(ctx, op, "maxpool2d_fwd_k2rows", y, args, 11);
  if (max_fwd_k3rows(ctx, &c))
    return run_nt_t_rows(ctx, op, "maxpool2d_fwd_k3rows", y, args, 11);
  return run_rows(ctx, op, "maxpool2d_fwd", y, args, 11);
}

int rumus_maxpool2d_bwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                        const rumus_tensor *dy, const rumus_tensor *indices,
                        rumus_tensor *dx) {
  const char *op = "rumus_maxpool2d_bwd";
  pool_call c;
  if (ctx && indices == NULL)
    return rumus__fail(ctx, RUMUS_ENULL, "%s: indices is NULL", op);
  if (ctx && dy && dx) { /* dy's type decides; dx is checked against it */
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "dy", dy));
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, "dx", dx, dy->dtype));
  }
  RUMUS__FORWARD(
      check_window_call(ctx, op, p, "dx", dx, "dy", dy, indices, &c));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dy", dy, "dx", dx, 0));
  RUMUS__FORWARD(
      rumus__check_overlap(ctx, op, "indices", indices, "dx", dx, 0));
  if (dx->numel == 0) return RUMUS_OK;
  cl_ulong go = rumus__off(dy), io = rumus__off(indices), xo = rumus__off(dx);
  rumus__arg args[12] = {{0, NULL}, {0, NULL},
                         RUMUS__ARG(dy->mem), RUMUS__ARG(go),
                         RUMUS__ARG(indices->mem), RUMUS__ARG(io),
                         RUMUS__ARG(dx->mem), RUMUS__ARG(xo),
                         RUMUS__ARG(c.io), RUMUS__ARG(c.ks), RUMUS__ARG(c.pd),
                         RUMUS__ARG(ctx->status)};
  cl_uint8 mg, sv;
  size_t quads;
  cl_int vec;
  cl_uint4 tl;
  size_t groups;
  if (k3s2_block_plan(ctx, &c, dx, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "maxpool2d_bwd_k3s2b", dx, args, 12, quads, vec,
                     &mg, &sv);
  if (max_bwd_tiles(&c) &&
      tile_plan(ctx, &c, dx, &mg, &sv, &tl, &groups, &vec))
    return run_tiles(ctx, op, dx, args, groups, vec, &mg, &sv, &tl);
  if (k2_plan(ctx, &c, dx, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "maxpool2d_bwd_k2", dx, args, 12, quads, vec,
                     &mg, &sv);
  if (k3s2_window(&c) && quad_plan(ctx, &c, dx, 0, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "maxpool2d_bwd_k3s2", dx, args, 12, quads, vec,
                     &mg, &sv);
  if (quad_plan(ctx, &c, dx, 0, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "maxpool2d_bwd_quad", dx, args, 12, quads, vec,
                     &mg, &sv);
  if (pool_magics(ctx, &c, dx, dy, &mg, &sv)) {
    rumus__arg aq[14];
    for (int i = 0; i < 12; i++) aq[i] = args[i];
    aq[12] = RUMUS__ARG(mg);
    aq[13] = RUMUS__ARG(sv);
    return run_items(ctx, op, dx->dtype, "maxpool2d_bwd_q", dx->numel, aq, 14,
                     pool_ls(ctx));
  }
  if (max_k2rows(ctx, &c)) /* CPU variant: over the output rows */
    return run_nt_rows(ctx, op, "maxpool2d_bwd_k2rows", dx,
                       dy->shape[0] * dy->shape[1] * dy->shape[2],
                       dx->shape[3] * 2, args, 12);
  /* CPU variant, F32: a plane per work-item, scattered in output order
   * (cl/pool.cl's maxpool_bwd_plane; the rows' gathers ran at a tenth of
   * an OpenMP scatter loop's speed on PoCL), but where the rows gather in
   * vectors. */
  if (!rumus__gpu_variant(ctx) && dx->dtype == RUMUS_F32 && !max_bwd_vec(&c))
    return run_items(ctx, op, dx->dtype, "maxpool2d_bwd_planes",
                     dx->shape[0] * dx->shape[1], args, 12, ROWS_WG);
  if (rumus__gpu_variant(ctx))
    return run_items(ctx, op, dx->dtype, "maxpool2d_bwd", dx->numel, args, 12,
                     pool_ls(ctx));
  return max_bwd_rows(ctx, op, &c, dx, args);
}

/* ---- Average pooling ---------------------------------------------------- */

/* CPU variant: windows 3 wide of stride 2 and padding 1 along w on rows
 * of W = 2 OW >= 16 run avgpool2d_{fwd,bwd}_k3rows over the rows of t
 * (the forward's output, the backward's dx: blocks of 8 outputs or 16
 * inputs in vectors; the bits of the rows kernels).  1 if it ran (*rc its
 * status). */
static int avg_k3rows(rumus_ctx *ctx, const char *op, const char *kernel,
                      const pool_call *c, const rumus_tensor *t,
                      const rumus__arg *args, int *rc) {
  const cl_long W = c->io.s[1], OW = c->io.s[3];
  if (!pool_cpu_new(ctx) || c->ks.s[1] != 3 || c->ks.s[3] != 2 ||
      c->pd.s[1] != 1 || W != 2 * OW || OW < 8)
    return 0;
  *rc = run_nt_t_rows(ctx, op, kernel, t, args, 11);
  return 1;
}

/* CPU variant: 3 x 3 windows of stride 1, padding 0 or 1 per axis, on
 * rows of at most 16 (input forward, dx backward) run `kernel`
 * (avgpool2d_{fwd,bwd}_r16: a row a float16, cl/pool.cl) over t's N C H
 * rows (y forward, dx backward).  1 if it ran (*rc its status). */
static int avg_r16(rumus_ctx *ctx, const char *op, const char *kernel,
                   const pool_call *c, const rumus_tensor *t,
                   const rumus__arg *args, int *rc) {
  if (!pool_cpu_new(ctx) || c->ks.s[0] != 3 || c->ks.s[1] != 3 ||
      c->ks.s[2] != 1 || c->ks.s[3] != 1 || c->pd.s[0] > 1 ||
      c->pd.s[1] > 1 || c->io.s[1] > 16 || c->io.s[3] > 16 ||
      c->io.s[0] * c->io.s[1] > INT32_MAX)
    return 0;
  *rc = run_t_rows(ctx, op, kernel, t, args, 11);
  return 1;
}

int rumus_avgpool2d_fwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                        const rumus_tensor *x, rumus_tensor *y) {
  const char *op = "rumus_avgpool2d_fwd";
  pool_call c;
  RUMUS__FORWARD(check_avg_params(ctx, op, p));
  RUMUS__FORWARD(check_window_call(ctx, op, p, "x", x, "y", y, NULL, &c));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "y", y, 0));
  if (y->numel == 0) return RUMUS_OK;
  cl_ulong xo = rumus__off(x), yo = rumus__off(y);
  cl_int cip = p->count_include_pad ? 1 : 0, div = p->divisor_override;
  rumus__arg args[11] = {{0, NULL}, {0, NULL},
                         RUMUS__ARG(x->mem), RUMUS__ARG(xo),
                         RUMUS__ARG(y->mem), RUMUS__ARG(yo),
                         RUMUS__ARG(c.io), RUMUS__ARG(c.ks), RUMUS__ARG(c.pd),
                         RUMUS__ARG(cip), RUMUS__ARG(div)};
  cl_uint8 mg, sv;
  size_t items;
  cl_int vec;
  if (k2_fwd_plan(ctx, &c, x, y, NULL, &mg, &sv, &items, &vec))
    return run_quads(ctx, op, "avgpool2d_fwd_k2", y, args, 11, items, vec, &mg,
                     &sv);
  int rc;
  if (avg_tiled(ctx, op, &c, p, 0, x, y, &rc)) return rc;
  if (avg_k3s2_wanted() && k3s2_fwd_plan(ctx, &c, x, y, y, &mg, &sv, &items,
                                         &vec))
    return run_quads(ctx, op, "avgpool2d_fwd_k3s2", y, args, 11, items, vec,
                     &mg, &sv);
  if (avg_bands(ctx, op, &c, 0, windows_overlap(&c), y, args, &rc)) return rc;
  if (fwd_quad_plan(ctx, &c, y, &mg, &sv, &items))
    return run_fwd_quads(ctx, op, "avgpool2d_fwd_quad", y, args, 11, items,
                         &mg, &sv);
  if (avg_k3rows(ctx, op, "avgpool2d_fwd_k3rows", &c, y, args, &rc) ||
      avg_r16(ctx, op, "avgpool2d_fwd_r16", &c, y, args, &rc))
    return rc;
  return run_rows(ctx, op, "avgpool2d_fwd", y, args, 11);
}

/* CPU variant: windows that tile the image (kernel = stride, 1, 2 or 4
 * wide, no padding, H = kh OH, W = kw OW, OW >= 4) run
 * avgpool2d_bwd_tiles over the N C OH output rows (each writes its kh dx
 * rows in vectors; the bits of avgpool2d_bwd_rows).  1 if it ran (*rc its
 * status). */
static int avg_bwd_tiles(rumus_ctx *ctx, const char *op, const pool_call *c,
                         const rumus_tensor *dx, const rumus__arg *args,
                         int *rc) {
  const cl_long H = c->io.s[0], W = c->io.s[1], OH = c->io.s[2],
                OW = c->io.s[3], kh = c->ks.s[0], kw = c->ks.s[1];
  if (!pool_cpu_new(ctx) || kh != c->ks.s[2] || kw != c->ks.s[3] ||
      c->pd.s[0] != 0 || c->pd.s[1] != 0 || H != kh * OH || W != kw * OW ||
      OW < 4 || (kw != 1 && kw != 2 && kw != 4))
    return 0;
  *rc = run_nt_rows(ctx, op, "avgpool2d_bwd_tiles", dx,
                     dx->shape[0] * dx->shape[1] * (size_t)OH,
                     (size_t)(kh * W), args, 11);
  return 1;
}

int rumus_avgpool2d_bwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                        const rumus_tensor *dy, rumus_tensor *dx) {
  const char *op = "rumus_avgpool2d_bwd";
  pool_call c;
  RUMUS__FORWARD(check_avg_params(ctx, op, p));
  if (ctx && dy && dx) {
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "dy", dy));
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, "dx", dx, dy->dtype));
  }
  RUMUS__FORWARD(check_window_call(ctx, op, p, "dx", dx, "dy", dy, NULL, &c));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dy", dy, "dx", dx, 0));
  if (dx->numel == 0) return RUMUS_OK;
  cl_ulong go = rumus__off(dy), xo = rumus__off(dx);
  cl_int cip = p->count_include_pad ? 1 : 0, div = p->divisor_override;
  rumus__arg args[11] = {{0, NULL}, {0, NULL},
                         RUMUS__ARG(dy->mem), RUMUS__ARG(go),
                         RUMUS__ARG(dx->mem), RUMUS__ARG(xo),
                         RUMUS__ARG(c.io), RUMUS__ARG(c.ks), RUMUS__ARG(c.pd),
                         RUMUS__ARG(cip), RUMUS__ARG(div)};
  cl_uint8 mg, sv;
  size_t quads;
  cl_int vec;
  int rc;
  if (k2_plan(ctx, &c, dx, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "avgpool2d_bwd_k2", dx, args, 11, quads, vec,
                     &mg, &sv);
  if (avg_tiled(ctx, op, &c, p, 1, dy, dx, &rc)) return rc;
  if (avg_k3s2_wanted() && k3s2_blocks(ctx, &c, dx, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "avgpool2d_bwd_k3s2b", dx, args, 11, quads, vec,
                     &mg, &sv);
  if (avg_bands(ctx, op, &c, 1, windows_overlap(&c), dx, args, &rc))
    return rc;
  if (quad_plan(ctx, &c, dx, 0, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "avgpool2d_bwd_quad", dx, args, 11, quads, vec,
                     &mg, &sv);
  if (pool_magics(ctx, &c, dx, dy, &mg, &sv)) {
    rumus__arg aq[13];
    for (int i = 0; i < 11; i++) aq[i] = args[i];
    aq[11] = RUMUS__ARG(mg);
    aq[12] = RUMUS__ARG(sv);
    return run_items(ctx, op, dx->dtype, "avgpool2d_bwd_q", dx->numel, aq, 13,
                     pool_ls(ctx));
  }
  if (avg_bwd_tiles(ctx, op, &c, dx, args, &rc)) return rc;
  if (avg_k3rows(ctx, op, "avgpool2d_bwd_k3rows", &c, dx, args, &rc) ||
      avg_r16(ctx, op, "avgpool2d_bwd_r16", &c, dx, args, &rc))
    return rc;
  return run_rows(ctx, op, "avgpool2d_bwd", dx, args, 11);
}

/* ---- Adaptive average pooling ------------------------------------------ */

/* in (floating, 4-D) and out (in's type, 4-D) with equal N and C and no
 * zero H, W, OH or OW; c->io gets (H, W, OH, OW). */
static int check_adaptive(rumus_ctx *ctx, const char *op, const char *in_name,
                          const rumus_tensor *in, const char *out_name,
                          const rumus_tensor *out, pool_call *c) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FORWARD(check_4d(ctx, op, in_name, in, 0));
  RUMUS__FORWARD(check_4d(ctx, op, out_name, out, in->dtype));
  const size_t want[4] = {in->shape[0], in->shape[1], out->shape[2],
                          out->shape[3]};
  RUMUS__FORWARD(check_extents(ctx, op, out_name, out, want));
  for (int a = 2; a < 4; a++) {
    RUMUS__FAIL_IF(in->shape[a] == 0 || in->shape[a] > INT32_MAX, ctx,
                   RUMUS_ESHAPE, "%s: %s has %zu along axis %d (%s): 1 to "
                   "INT32_MAX", op, in_name, in->shape[a], a,
                   a == 2 ? "H" : "W");
    RUMUS__FAIL_IF(out->shape[a] == 0 || out->shape[a] > INT32_MAX, ctx,
                   RUMUS_ESHAPE, "%s: %s has %zu along axis %d (%s): 1 to "
                   "INT32_MAX", op, out_name, out->shape[a], a,
                   a == 2 ? "OH" : "OW");
  }
  c->io = (cl_long4){{(cl_long)in->shape[2], (cl_long)in->shape[3],
                      (cl_long)out->shape[2], (cl_long)out->shape[3]}};
  return RUMUS_OK;
}

/* Bins that divide the input (H = kh OH, W = kw OW) are the windows of
 * average pooling with kernel = stride = (kh, kw) and no padding, with
 * the same sums in the same order and the same divisor (kh kw): on the
 * GPU variant the tiled windows' kernels run them (run_tiled, from `in`:
 * x forward, dy backward), or its bands where forced (avg_bands, bwd 0
 * forward, 1 backward), on the CPU variant its row kernels (`kernel`,
 * over t's N C H rows: y's forward, dx's backward), in vectors
 * (cl/pool.cl); all give the adaptive kernels' bits.  args[0 .. 7) are
 * the adaptive call's; 1 if it ran (*rc its status). */
static int adaptive_as_avg(rumus_ctx *ctx, const char *op, const char *kernel,
                           int bwd, const rumus_tensor *in,
                           const rumus_tensor *t, const pool_call *c,
                           const rumus__arg *args, int *rc) {
  const cl_long H = c->io.s[0], W = c->io.s[1], OH = c->io.s[2],
                OW = c->io.s[3];
  if (H % OH != 0 || W % OW != 0) return 0;
  pool_call a = *c;
  a.ks = (cl_long4){{H / OH, W / OW, H / OH, W / OW}};
  a.pd = (cl_long4){{0, 0, 1, 1}};
  cl_int cip = 1, div = 0;
  rumus__arg aa[11];
  for (int i = 0; i < 7; i++) aa[i] = args[i];
  aa[7] = RUMUS__ARG(a.ks);
  aa[8] = RUMUS__ARG(a.pd);
  aa[9] = RUMUS__ARG(cip);
  aa[10] = RUMUS__ARG(div);
  if (rumus__gpu_variant(ctx)) /* the bands where forced: slower */
    return avg_bands(ctx, op, &a, bwd, 0, t, aa, rc) ||
           run_tiled(ctx, op, c, bwd, in, t, (cl_int)((H / OH) * (W / OW)),
                     rc);
  /* Bins 1, 2 or 4 wide, at least 4 a row: the vectors' cases (wider
   * bins, and rows of fewer, ran slower than the adaptive kernels). */
  const cl_long kw = W / OW;
  if (OW < 4 || (kw != 1 && kw != 2 && kw != 4)) return 0;
  *rc = run_t_rows(ctx, op, kernel, t, aa, 11);
  return 1;
}

/* GPU variant, OH = OW = 1: lanes per plane for adaptive_avgpool2d_fwd_o1,
 * a power of two from 1 to the local size, about 8 elements a lane (the
 * sum order follows from the area and the local size alone). */
static cl_uint o1_lanes(size_t area, size_t ls) {
  size_t rt = 1;
  while (rt < ls && rt * 8 < area) rt *= 2;
  return (cl_uint)rt;
}

/* The GPU variant's adaptive forward to 1 x 1: groups of pool_ls() lanes,
 * ls / rt planes each, at most MAX_ITEMS work-items a launch. */
static int adaptive_fwd_o1(rumus_ctx *ctx, const char *op,
                           const rumus_tensor *x, const rumus_tensor *y) {
  char opts[256];
  pool_options(ctx, x->dtype, opts, sizeof opts);
  const rumus__kernel_ref k = {FILE_CL, opts, "adaptive_avgpool2d_fwd_o1"};
  const size_t ls = pool_ls(ctx), area = x->shape[2] * x->shape[3];
  cl_uint rt = o1_lanes(area, ls);
  const size_t per = ls / rt, groups = (y->numel + per - 1) / per;
  const size_t piece = MAX_ITEMS / ls;
  cl_ulong planes = y->numel, first = 0, ar = area, xo = rumus__off(x),
           yo = rumus__off(y);
  const rumus__arg args[8] = {RUMUS__ARG(planes), RUMUS__ARG(first),
                              RUMUS__ARG(x->mem), RUMUS__ARG(xo),
                              RUMUS__ARG(y->mem), RUMUS__ARG(yo),
                              RUMUS__ARG(ar),     RUMUS__ARG(rt)};
  for (size_t f = 0; f < groups; f += piece) {
    first = f;
    size_t global = (groups - f < piece ? groups - f : piece) * ls,
           local = ls;
    RUMUS__FORWARD(rumus__launch(ctx, op, &k, 1, &global, &local, 8, args));
  }
  return RUMUS_OK;
}

int rumus_adaptive_avgpool2d_fwd(rumus_ctx *ctx, const rumus_tensor *x,
                                 rumus_tensor *y) {
  const char *op = "rumus_adaptive_avgpool2d_fwd";
  pool_call c;
  RUMUS__FORWARD(check_adaptive(ctx, op, "x", x, "y", y, &c));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "x", x, "y", y, 0));
  if (y->numel == 0) return RUMUS_OK;
  if (rumus__gpu_variant(ctx) && y->shape[2] == 1 && y->shape[3] == 1)
    return adaptive_fwd_o1(ctx, op, x, y);
  cl_ulong xo = rumus__off(x), yo = rumus__off(y);
  if (y->shape[2] == 1 && y->shape[3] == 1) { /* CPU variant: a plane sum */
    cl_ulong area = x->shape[2] * x->shape[3];
    const rumus__arg ap[7] = {{0, NULL}, {0, NULL}, RUMUS__ARG(x->mem),
                              RUMUS__ARG(xo), RUMUS__ARG(y->mem),
                              RUMUS__ARG(yo), RUMUS__ARG(area)};
    return run_row_items(ctx, op, "adaptive_avgpool2d_fwd_planes", x->dtype,
                         y->numel, (size_t)area, ap, 7);
  }
  rumus__arg args[7] = {{0, NULL}, {0, NULL},
                        RUMUS__ARG(x->mem), RUMUS__ARG(xo),
                        RUMUS__ARG(y->mem), RUMUS__ARG(yo), RUMUS__ARG(c.io)};
  int rc;
  if (adaptive_as_avg(ctx, op, "avgpool2d_fwd_rows", 0, x, y, &c, args, &rc))
    return rc;
  return run_items(ctx, op, x->dtype, "adaptive_avgpool2d_fwd", y->numel,
                   args, 7, pool_ls(ctx));
}

int rumus_adaptive_avgpool2d_bwd(rumus_ctx *ctx, const rumus_tensor *dy,
                                 rumus_tensor *dx) {
  const char *op = "rumus_adaptive_avgpool2d_bwd";
  pool_call c;
  if (ctx && dy && dx) {
    RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "dy", dy));
    RUMUS__FORWARD(rumus__check_tensor(ctx, op, "dx", dx, dy->dtype));
  }
  RUMUS__FORWARD(check_adaptive(ctx, op, "dx", dx, "dy", dy, &c));
  RUMUS__FORWARD(rumus__check_overlap(ctx, op, "dy", dy, "dx", dx, 0));
  if (dx->numel == 0) return RUMUS_OK;
  cl_ulong go = rumus__off(dy), xo = rumus__off(dx);
  if (rumus__gpu_variant(ctx) && dy->shape[2] == 1 && dy->shape[3] == 1) {
    /* A broadcast of each plane's dy: 4 elements a work-item. */
    cl_ulong n = dx->numel, area = dx->shape[2] * dx->shape[3];
    cl_int vec = rumus__aligned(dx, 0, 4);
    rumus__arg a4[9] = {{0, NULL},          {0, NULL},
                        RUMUS__ARG(dy->mem), RUMUS__ARG(go),
                        RUMUS__ARG(dx->mem), RUMUS__ARG(xo),
                        RUMUS__ARG(n),       RUMUS__ARG(area),
                        RUMUS__ARG(vec)};
    const size_t ls = O1_BWD_LS < ctx->max_wg ? O1_BWD_LS : ctx->max_wg;
    return run_items(ctx, op, dx->dtype, "adaptive_avgpool2d_bwd_o1",
                     (dx->numel + 3) / 4, a4, 9, ls);
  }
  if (dy->shape[2] == 1 && dy->shape[3] == 1) { /* CPU variant: a fill */
    cl_ulong area = dx->shape[2] * dx->shape[3];
    const rumus__arg ap[7] = {{0, NULL}, {0, NULL}, RUMUS__ARG(dy->mem),
                              RUMUS__ARG(go), RUMUS__ARG(dx->mem),
                              RUMUS__ARG(xo), RUMUS__ARG(area)};
    return run_row_items(ctx, op, "adaptive_avgpool2d_bwd_planes", dx->dtype,
                         dy->numel, (size_t)area, ap, 7);
  }
  rumus__arg args[7] = {{0, NULL}, {0, NULL},
                        RUMUS__ARG(dy->mem), RUMUS__ARG(go),
                        RUMUS__ARG(dx->mem), RUMUS__ARG(xo), RUMUS__ARG(c.io)};
  int rc;
  if (adaptive_as_avg(ctx, op, "avgpool2d_bwd_rows", 1, dy, dx, &c, args,
                      &rc))
    return rc;
  cl_uint8 mg, sv;
  size_t quads;
  cl_int vec;
  if (quad_plan(ctx, &c, dx, 1, &mg, &sv, &quads, &vec))
    return run_quads(ctx, op, "adaptive_avgpool2d_bwd_quad", dx, args, 7,
                     quads, vec, &mg, &sv);
  return run_rows(ctx, op, "adaptive_avgpool2d_bwd", dx, args, 7);
}

/* The F32 program (both variants run it); 16-bit programs are built by
 * their first call, as rumus_cache_fill() documents. */
int rumus__pool_warm(rumus_ctx *ctx) {
  char opts[256];
  cl_program prog;
  pool_options(ctx, RUMUS_F32, opts, sizeof opts);
  return rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog);
}
