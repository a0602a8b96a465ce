/*
 * conv_winograd.c - the GPU variant's Winograd path of conv2d's forward,
 * input gradient and weight gradient for 3x3, stride 1, dilation 1,
 * one-group convolutions (kernels in cl/winograd.cl; conv.c decides when
 * it runs through rumus__wino_plan_make and keeps the implicit GEMM
 * otherwise).
 *
 * F(WM x WM, 3 x 3): each WM x WM output tile is A^T [(G g G^T) . (B^T d
 * B)] A over a (WM + 2)^2 input patch d, so the products become WP =
 * (WM + 2)^2 independent GEMMs over channels,
 *   M[xi][o][t] = U[xi][o][i] V[xi][i][t],
 * which run through the library's own tiled GEMM (rumus__gemm_tiled_f32)
 * on float scratch: U (weights, transformed once per call), V (input
 * tiles) and M (products) in the context's scratch slots 0, 1 and 2.  A
 * batch whose V or M would pass the scratch cap runs in chunks of images;
 * if one image (or U) does not fit, the implicit GEMM runs instead.  The
 * forward's bias is added by the output transform.  The weight gradient
 * sums over tiles instead of channels: per piece s of the images,
 *   M[s][xi][o][i] = sum_t U[s][xi][o][t] V[s][xi][i][t]
 * with U the transformed dy tiles (A dy A^T), then dw = G^T (sum_s M[s])
 * G; pieces are added in order, so the sum over K stays fixed-order.
 * Every stage is a map or a fixed-order GEMM: the same bits run to run.
 *
 * Overrides: RUMUS_CONV2D_WINOGRAD = 0 (never), 2 or 4 (F(2x2) or F(4x4)
 * wherever the path applies, whatever the channels and size: tests and
 * sweeps), RUMUS_CONV2D_FWD_WINOGRAD, RUMUS_CONV2D_BWD_DATA_WINOGRAD and
 * RUMUS_CONV2D_BWD_WEIGHT_WINOGRAD the same for one op;
 * RUMUS_CONV2D_WINOGRAD_KB, the scratch cap per buffer in KiB;
 * RUMUS_CONV2D_WINOGRAD_PIECES, the weight gradient's pieces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "winograd.cl";

#define WWG 64 /* work-group size along the rows (WWG in cl/winograd.cl) */
/* Work-groups per launch along dimension 1 (CUDA's grid limit). */
#define MAX_Y ((size_t)65535)
/* The automatic choice: F(AUTO_WM x AUTO_WM) from AUTO_MIN_CH input and
 * output channels and AUTO_MIN_FLOP multiply-adds of the direct sum
 * (below that the four launches and the scratch traffic cost more than
 * the implicit GEMM spends). */
#define AUTO_WM 4
#define AUTO_MIN_CH 32
#define AUTO_MIN_FLOP ((double)(1 << 28))
/* Bytes per scratch buffer at most (and the device's largest allocation). */
#define CAP_DEFAULT ((size_t)256 << 20)

/* The override in variable `name`: 0 off, 2 or 4 forced, -1 unset or
 * invalid. */
static int env_value(const char *name) {
  const char *v = getenv(name);
  if (v == NULL || v[0] == '\0' || v[1] != '\0') return -1;
  return v[0] == '0' ? 0 : v[0] == '2' ? 2 : v[0] == '4' ? 4 : -1;
}

/* The override of op (RUMUS__WINO_*): its own variable, else
 * RUMUS_CONV2D_WINOGRAD; -1 for the automatic choice. */
static int env_mode(int op) {
  static const char *const OWN[] = {"RUMUS_CONV2D_FWD_WINOGRAD",
                                    "RUMUS_CONV2D_BWD_DATA_WINOGRAD",
                                    "RUMUS_CONV2D_BWD_WEIGHT_WINOGRAD"};
  const int m = env_value(OWN[op]);
  return m >= 0 ? m : env_value("RUMUS_CONV2D_WINOGRAD");
}

/* A non-negative integer below 2^20 from variable `name`, else dflt. */
static size_t env_size(const char *name, size_t dflt) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') return dflt;
  char *end;
  const long x = strtol(v, &end, 10);
  return *end == '\0' && x >= 0 && x < (1L << 20) ? (size_t)x : dflt;
}

static size_t scratch_cap(const rumus_ctx *ctx) {
  const size_t cap = env_size("RUMUS_CONV2D_WINOGRAD_KB", CAP_DEFAULT >> 10)
                     << 10;
  return cap < ctx->max_alloc ? cap : (size_t)ctx->max_alloc;
}

static size_t cdiv(size_t a, size_t b) { return (a + b - 1) / b; }

/* Images per chunk (weight gradient: per piece) whose rows of V and M
 * (or U and V), ldv floats a multiple of 4 up to 3 past the tiles, stay
 * within cap floats per product for ch channels; 0 if not one. */
static size_t images_fit(size_t cap, size_t ch, size_t per, size_t n) {
  const size_t rows = cap / ch;
  size_t nb = rows > 3 ? (rows - 3) / per : 0;
  if (nb > n) nb = n;
  /* Tiles of a chunk below 2^31: the kernels divide them in 32 bits. */
  if (nb > (((size_t)1 << 31) - 4) / per) nb = (((size_t)1 << 31) - 4) / per;
  return nb;
}

/* The weight gradient's pieces: by default enough for about two
 * work-groups per compute unit of a 132-unit GPU in the products (64 x 64
 * tiles assumed; O x I alone gives few at 64 channels), and at least 2
 * (on the H200 at N = 64, F(4x4): 256 channels at 14^2 took 281 us in
 * one piece, 230 in 2, 223 in 4, 246 in 8; 128 at 28^2 292, 240, 254;
 * 64 at 56^2 696, 432, 348, 302), at most one per image, at least what
 * the cap allows per piece; M, one product per piece, within the cap;
 * pieces per round as the cap allows. */
static int plan_wgrad(const rumus__wino_geo *g, size_t cap, size_t wp,
                      rumus__wino_plan *pl) {
  const size_t per = pl->th * pl->tw, ch = g->i > g->o ? g->i : g->o;
  const size_t nbmax = images_fit(cap, ch, per, g->n);
  if (nbmax == 0) return 0;
  const size_t tiles = wp * cdiv(g->o, 64) * cdiv(g->i, 64);
  const size_t aim = cdiv(264, tiles);
  size_t want = env_size("RUMUS_CONV2D_WINOGRAD_PIECES", aim > 2 ? aim : 2);
  want = want < 1 ? 1 : want > g->n ? g->n : want;
  size_t nb = cdiv(g->n, want);
  if (nb > nbmax) nb = nbmax;
  pl->pieces = cdiv(g->n, nb);
  pl->nb = cdiv(g->n, pl->pieces);
  pl->ldv = rumus__round_up(pl->nb * per, 4);
  if (pl->pieces > cap / (g->o * pl->ldu)) return 0;
  pl->round = cap / (ch * pl->ldv);
  if (pl->round > pl->pieces) pl->round = pl->pieces;
  if (pl->round > (((size_t)1 << 31) - 1) / pl->ldv)
    pl->round = (((size_t)1 << 31) - 1) / pl->ldv;
  return pl->round > 0;
}

int rumus__wino_plan_make(const rumus_ctx *ctx, const rumus__wino_geo *g,
                          rumus__wino_plan *pl) {
  const int mode = env_mode(g->op);
  if (mode == 0 || g->n == 0 || g->i == 0 || g->o == 0 || g->oh == 0 ||
      g->ow == 0 || !rumus__gemm_tiled_fits(ctx))
    return 0;
  if (mode < 0 &&
      (g->i < AUTO_MIN_CH || g->o < AUTO_MIN_CH ||
       9.0 * (double)g->i * (double)g->o * (double)g->n * (double)g->oh *
               (double)g->ow < AUTO_MIN_FLOP))
    return 0;
  pl->g = *g;
  pl->wm = mode > 0 ? mode : AUTO_WM;
  const size_t wp = (size_t)(pl->wm + 2) * (size_t)(pl->wm + 2);
  pl->th = cdiv(g->oh, (size_t)pl->wm);
  pl->tw = cdiv(g->ow, (size_t)pl->wm);
  pl->ldu = rumus__round_up(g->i, 4);
  pl->pieces = pl->round = 1;
  const size_t cap = scratch_cap(ctx) / sizeof(float) / wp; /* per xi */
  if (g->o > cap / pl->ldu) return 0;
  if (g->op == RUMUS__WINO_BWD_WEIGHT) return plan_wgrad(g, cap, wp, pl);
  /* Images per chunk, evened out over the chunks. */
  const size_t ch = g->i > g->o ? g->i : g->o, per = pl->th * pl->tw;
  const size_t nb = images_fit(cap, ch, per, g->n);
  if (nb == 0) return 0;
  pl->nb = cdiv(g->n, cdiv(g->n, nb));
  pl->ldv = rumus__round_up(pl->nb * per, 4);
  return 1;
}

static void wino_options(rumus_dtype storage, int wm, char *buf, size_t len) {
  char head[96];
  rumus__options_head(head, sizeof head, storage, WWG, 0);
  snprintf(buf, len, "%s -DWM=%d -DWWG=%d", head, wm, WWG);
}

/* Launches `name` over rows x chans work-items (local WWG x 1), in
 * pieces of MAX_Y along the channels; the last argument is c0, the
 * piece's first channel. */
static int launch_rows(rumus_ctx *ctx, const char *op, const char *opts,
                       const char *name, size_t rows, size_t chans,
                       const rumus__arg *args, size_t nargs) {
  const rumus__kernel_ref k = {FILE_CL, opts, name};
  size_t global[2] = {rumus__round_up(rows, WWG), 1}, local[2] = {WWG, 1};
  return rumus__launch_pieces(ctx, op, &k, 2, global, local, 1, chans, MAX_Y,
                              nargs, args);
}

/* The scratch of a call: U, V and M with their sizes in floats. */
typedef struct {
  cl_mem u, v, m;
  size_t nu, nv, nm;
} wino_bufs;

/* Begins the scratch and takes slots 0, 1, 2 for b's U, V and M (the
 * caller ends the scratch whatever this returns). */
static int bufs_take(rumus_ctx *ctx, const char *op, wino_bufs *b) {
  rumus__scratch_begin(ctx);
  RUMUS__FORWARD(rumus__scratch_slot(ctx, op, 0, b->nu * sizeof(float), &b->u));
  RUMUS__FORWARD(rumus__scratch_slot(ctx, op, 1, b->nv * sizeof(float), &b->v));
  return rumus__scratch_slot(ctx, op, 2, b->nm * sizeof(float), &b->m);
}

static int run_weight(rumus_ctx *ctx, const char *op, const char *opts,
                      const rumus__wino_plan *pl, const rumus_tensor *w,
                      const wino_bufs *b) {
  const rumus__wino_geo *g = &pl->g;
  cl_ulong wo = rumus__off(w), O = g->o, I = g->i, ldu = pl->ldu, c0 = 0;
  cl_int flip = g->op == RUMUS__WINO_BWD_DATA;
  const rumus__arg a[] = {RUMUS__ARG(w->mem), RUMUS__ARG(wo),  RUMUS__ARG(b->u),
                    RUMUS__ARG(O),      RUMUS__ARG(I),   RUMUS__ARG(ldu),
                    RUMUS__ARG(flip),   RUMUS__ARG(c0)};
  return launch_rows(ctx, op, opts, "wino_weight", pl->ldu, g->o, a,
                     sizeof a / sizeof a[0]);
}

/* The input transform of np pieces of nbs images from n0 (nt images in
 * all) into v, each piece ldv tiles wide (wino_tile in cl/winograd.cl). */
static int run_input(rumus_ctx *ctx, const char *op, const char *opts,
                     const rumus__wino_plan *pl, const rumus_tensor *in,
                     cl_mem v, size_t n0, size_t nt, size_t nbs, size_t np) {
  const rumus__wino_geo *g = &pl->g;
  cl_ulong xo = rumus__off(in), I = g->i, H = g->h, W = g->w, TH = pl->th,
           TW = pl->tw, N0 = n0, NT = nt, NBS = nbs, LDV = pl->ldv, c0 = 0;
  cl_long PH = g->ph, PW = g->pw;
  const rumus__arg a[] = {
      RUMUS__ARG(in->mem), RUMUS__ARG(xo), RUMUS__ARG(v),   RUMUS__ARG(I),
      RUMUS__ARG(H),       RUMUS__ARG(W),  RUMUS__ARG(PH),  RUMUS__ARG(PW),
      RUMUS__ARG(TH),      RUMUS__ARG(TW), RUMUS__ARG(N0),  RUMUS__ARG(NT),
      RUMUS__ARG(NBS),     RUMUS__ARG(LDV), RUMUS__ARG(c0)};
  return launch_rows(ctx, op, opts, "wino_input", np * pl->ldv, g->i, a,
                     sizeof a / sizeof a[0]);
}

/* One chunk of images from n0: input transform, the WP products, output
 * transform. */
static int run_chunk(rumus_ctx *ctx, const char *op, const char *opts,
                     const rumus__wino_plan *pl, const rumus_tensor *in,
                     const rumus_tensor *bias, rumus_tensor *out,
                     const wino_bufs *b, size_t n0) {
  const rumus__wino_geo *g = &pl->g;
  const size_t nc = g->n - n0 < pl->nb ? g->n - n0 : pl->nb;
  const size_t wp = (size_t)(pl->wm + 2) * (size_t)(pl->wm + 2);
  const cl_ulong TH = pl->th, TW = pl->tw, N0 = n0, T = nc * pl->th * pl->tw,
                 LDV = pl->ldv, c0 = 0;
  RUMUS__FORWARD(run_input(ctx, op, opts, pl, in, b->v, n0, nc, nc, 1));
  rumus_gemm_layout l = {0};
  l.m = g->o;
  l.n = (size_t)T;
  l.k = g->i;
  l.batch = wp;
  l.lda = pl->ldu;
  l.stride_a = g->o * pl->ldu;
  l.ldb = pl->ldv;
  l.stride_b = g->i * pl->ldv;
  l.ldc = pl->ldv;
  l.stride_c = g->o * pl->ldv;
  RUMUS__FORWARD(
      rumus__gemm_tiled_f32(ctx, op, b->u, b->nu, b->v, b->nv, b->m, b->nm, 0,
                            &l));
  cl_ulong bo = bias ? rumus__off(bias) : 0, yo = rumus__off(out), O = g->o,
           OH = g->oh, OW = g->ow;
  const cl_int has_bias = bias != NULL;
  const cl_mem bm = bias ? bias->mem : out->mem; /* never read without */
  const rumus__arg ao[] = {RUMUS__ARG(b->m),     RUMUS__ARG(bm), RUMUS__ARG(bo),
                     RUMUS__ARG(has_bias), RUMUS__ARG(out->mem),
                     RUMUS__ARG(yo),       RUMUS__ARG(O),  RUMUS__ARG(OH),
                     RUMUS__ARG(OW),       RUMUS__ARG(TH), RUMUS__ARG(TW),
                     RUMUS__ARG(N0),       RUMUS__ARG(T),  RUMUS__ARG(LDV),
                     RUMUS__ARG(c0)};
  return launch_rows(ctx, op, opts, "wino_output", (size_t)T, g->o, ao,
                     sizeof ao / sizeof ao[0]);
}

int rumus__wino_run(rumus_ctx *ctx, const char *op,
                    const rumus__wino_plan *pl, const rumus_tensor *in,
                    const rumus_tensor *w, const rumus_tensor *bias,
                    rumus_tensor *out) {
  const rumus__wino_geo *g = &pl->g;
  const size_t wp = (size_t)(pl->wm + 2) * (size_t)(pl->wm + 2);
  char opts[160];
  wino_options(in->dtype, pl->wm, opts, sizeof opts);
  wino_bufs b = {NULL, NULL, NULL, wp * g->o * pl->ldu, wp * g->i * pl->ldv,
                 wp * g->o * pl->ldv};
  int st = bufs_take(ctx, op, &b);
  if (st == RUMUS_OK) st = run_weight(ctx, op, opts, pl, w, &b);
  for (size_t n0 = 0; st == RUMUS_OK && n0 < g->n; n0 += pl->nb)
    st = run_chunk(ctx, op, opts, pl, in, bias, out, &b, n0);
  rumus__scratch_end(ctx);
  return st;
}

/* The dy transform of np pieces of nbs images from n0 (nt in all) into
 * u, laid out as run_input's v. */
static int run_dy(rumus_ctx *ctx, const char *op, const char *opts,
                  const rumus__wino_plan *pl, const rumus_tensor *dy,
                  cl_mem u, size_t n0, size_t nt, size_t np) {
  const rumus__wino_geo *g = &pl->g;
  cl_ulong yo = rumus__off(dy), O = g->o, OH = g->oh, OW = g->ow,
           TH = pl->th, TW = pl->tw, N0 = n0, NT = nt, NBS = pl->nb,
           LDV = pl->ldv, c0 = 0;
  const rumus__arg a[] = {
      RUMUS__ARG(dy->mem), RUMUS__ARG(yo),  RUMUS__ARG(u),   RUMUS__ARG(O),
      RUMUS__ARG(OH),      RUMUS__ARG(OW),  RUMUS__ARG(TH),  RUMUS__ARG(TW),
      RUMUS__ARG(N0),      RUMUS__ARG(NT),  RUMUS__ARG(NBS), RUMUS__ARG(LDV),
      RUMUS__ARG(c0)};
  return launch_rows(ctx, op, opts, "wino_dy", np * pl->ldv, g->o, a,
                     sizeof a / sizeof a[0]);
}

/* Pieces p0 .. p0 + np - 1: both transforms, then the np * WP products
 * into M's slices of those pieces. */
static int run_wgrad_round(rumus_ctx *ctx, const char *op, const char *opts,
                           const rumus__wino_plan *pl, const rumus_tensor *x,
                           const rumus_tensor *dy, const wino_bufs *b,
                           size_t p0, size_t np) {
  const rumus__wino_geo *g = &pl->g;
  const size_t wp = (size_t)(pl->wm + 2) * (size_t)(pl->wm + 2);
  const size_t n0 = p0 * pl->nb;
  const size_t nt = g->n - n0 < np * pl->nb ? g->n - n0 : np * pl->nb;
  RUMUS__FORWARD(run_dy(ctx, op, opts, pl, dy, b->u, n0, nt, np));
  RUMUS__FORWARD(run_input(ctx, op, opts, pl, x, b->v, n0, nt, pl->nb, np));
  rumus_gemm_layout l = {0};
  l.m = g->o;
  l.n = g->i;
  l.k = pl->ldv;
  l.batch = np * wp;
  l.lda = pl->ldv;
  l.stride_a = g->o * pl->ldv;
  l.ldb = pl->ldv;
  l.stride_b = g->i * pl->ldv;
  l.ldc = pl->ldu;
  l.stride_c = g->o * pl->ldu;
  l.c_offset = p0 * wp * g->o * pl->ldu;
  return rumus__gemm_tiled_f32(ctx, op, b->u, b->nu, b->v, b->nv, b->m, b->nm,
                               1, &l);
}

int rumus__wino_run_wgrad(rumus_ctx *ctx, const char *op,
                          const rumus__wino_plan *pl, const rumus_tensor *x,
                          const rumus_tensor *dy, rumus_tensor *dw) {
  const rumus__wino_geo *g = &pl->g;
  const size_t wp = (size_t)(pl->wm + 2) * (size_t)(pl->wm + 2);
  char opts[160];
  wino_options(x->dtype, pl->wm, opts, sizeof opts);
  wino_bufs b = {NULL, NULL, NULL, pl->round * wp * g->o * pl->ldv,
                 pl->round * wp * g->i * pl->ldv,
                 pl->pieces * wp * g->o * pl->ldu};
  int st = bufs_take(ctx, op, &b);
  for (size_t p0 = 0; st == RUMUS_OK && p0 < pl->pieces; p0 += pl->round) {
    const size_t np = pl->pieces - p0 < pl->round ? pl->pieces - p0 : pl->round;
    st = run_wgrad_round(ctx, op, opts, pl, x, dy, &b, p0, np);
  }
  if (st == RUMUS_OK) {
    cl_ulong dwo = rumus__off(dw), O = g->o, I = g->i, LDM = pl->ldu,
             S = pl->pieces, c0 = 0;
    const rumus__arg a[] = {RUMUS__ARG(b.m), RUMUS__ARG(dw->mem),
                            RUMUS__ARG(dwo), RUMUS__ARG(O),
                            RUMUS__ARG(I),   RUMUS__ARG(LDM),
                            RUMUS__ARG(S),   RUMUS__ARG(c0)};
    st = launch_rows(ctx, op, opts, "wino_wgrad", g->i, g->o, a,
                     sizeof a / sizeof a[0]);
  }
  rumus__scratch_end(ctx);
  return st;
}

/* The F32 programs that the three ops may take on the GPU variant: the
 * automatic choice's tile, or the one that each op's override forces
 * (none where it turns the path off). */
int rumus__wino_warm(rumus_ctx *ctx) {
  if (!rumus__gemm_tiled_fits(ctx)) return RUMUS_OK;
  char opts[160];
  cl_program prog;
  for (int op = RUMUS__WINO_FWD; op <= RUMUS__WINO_BWD_WEIGHT; op++) {
    const int mode = env_mode(op);
    if (mode == 0) continue;
    wino_options(RUMUS_F32, mode > 0 ? mode : AUTO_WM, opts, sizeof opts);
    RUMUS__FORWARD(
        rumus__program_get(ctx, "rumus_cache_fill", FILE_CL, opts, &prog));
  }
  return RUMUS_OK;
}
