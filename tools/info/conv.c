/* conv.c - rumus-info self-check of the conv2d family, once per storage
 * type (lines suffixed _f16 and _bf16 for the 16-bit types).
 *
 * One shape with every option away from its default (groups 2, stride 2 by
 * 1, padding 1 by 2, dilation 1 by 2, a 3 x 5 kernel, a bias): x, w and dy
 * rounded to the type, against the float64 reference of the rounded
 * values.  The F32 tolerances cover float sums of up to 60 (forward, input
 * gradient) and 40 (weight gradient) products of values below 1; a 16-bit
 * line adds half an ulp of the largest |want| (selfcheck_typed_tol).
 *
 * Then the forward and input gradient of a 3x3 stride-1 shape (8 -> 6
 * channels, 7x6, padding 1) with RUMUS_CONV2D_WINOGRAD=4 set for the two
 * calls (lines conv2d_fwd_winograd, conv2d_bwd_data_winograd): the work-
 * group variant's F(4x4) Winograd path, the implicit GEMM on the CPU
 * variant.  Tolerance 1e-4: check_conv measured F(4x4) errors below
 * 0.4e-6 per term, and these sums have 72 and 54 terms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selfcheck.h"

static const ref_conv_geo G = {2, 6, 9, 11, 4, 3, 5, 2, 1, 1, 2, 1, 2, 2};
static const ref_conv_geo GW = {2, 8, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1};

typedef struct {
  size_t nx, nw, ny, xs[4], ws[4], ys[4];
  float *x, *w, *b, *dy, *got;
  double *want;
} bufs;

static int tensor(selfcheck *sc, rumus_dtype d, int nd, const size_t *s,
                  const float *data, size_t n, rumus_tensor **out) {
  int st = rumus_tensor_create(sc->ctx, d, nd, s, out);
  if (st == RUMUS_OK && data) st = rumus_tensor_upload_f32(*out, data, n);
  return st;
}

static void round_all(rumus_dtype d, float *v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = selfcheck_stored(d, v[i]);
}

/* The parameters of geometry g. */
static rumus_conv2d_params params(const ref_conv_geo *g) {
  const rumus_conv2d_params p = {g->sh, g->sw, g->ph, g->pw,
                                 g->dh, g->dw, g->g};
  return p;
}

/* The three ops of G (wino 0), or the forward and input gradient of GW
 * with the Winograd path forced (wino 1). */
static void check_type(selfcheck *sc, rumus_dtype d, bufs *b, int wino) {
  const ref_conv_geo *g = wino ? &GW : &G;
  const rumus_conv2d_params P = params(g);
  const double tol = wino ? 1e-4 : 2e-5;
  round_all(d, b->x, b->nx);
  round_all(d, b->w, b->nw);
  round_all(d, b->b, g->oc);
  round_all(d, b->dy, b->ny);
  rumus_tensor *tx = NULL, *tw = NULL, *tb = NULL, *ty = NULL, *tdy = NULL,
               *tdx = NULL, *tdw = NULL;
  int st = tensor(sc, d, 4, b->xs, b->x, b->nx, &tx);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ws, b->w, b->nw, &tw);
  if (st == RUMUS_OK) st = tensor(sc, d, 1, &g->oc, b->b, g->oc, &tb);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ys, NULL, 0, &ty);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ys, b->dy, b->ny, &tdy);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->xs, NULL, 0, &tdx);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ws, NULL, 0, &tdw);
  const char *keep = getenv("RUMUS_CONV2D_WINOGRAD");
  char *saved = keep ? strdup(keep) : NULL;
  if (wino) setenv("RUMUS_CONV2D_WINOGRAD", "4", 1);
  int s = st == RUMUS_OK ? rumus_conv2d_fwd(sc->ctx, &P, tx, tw, tb, ty) : st;
  ref_conv2d_fwd(g, b->x, b->w, b->b, b->want);
  selfcheck_typed_line(sc, wino ? "conv2d_fwd_winograd" : "conv2d_fwd", d, s,
                       ty, b->got, b->want, b->ny, tol);
  s = st == RUMUS_OK ? rumus_conv2d_bwd_data(sc->ctx, &P, tdy, tw, tdx) : st;
  ref_conv2d_bwd_data(g, b->dy, b->w, b->want);
  selfcheck_typed_line(sc,
                       wino ? "conv2d_bwd_data_winograd" : "conv2d_bwd_data",
                       d, s, tdx, b->got, b->want, b->nx, tol);
  if (wino) { /* the caller's setting back */
    if (saved)
      setenv("RUMUS_CONV2D_WINOGRAD", saved, 1);
    else
      unsetenv("RUMUS_CONV2D_WINOGRAD");
  }
  free(saved);
  if (!wino) {
    s = st == RUMUS_OK ? rumus_conv2d_bwd_weight(sc->ctx, &P, tx, tdy, tdw)
                       : st;
    ref_conv2d_bwd_weight(g, b->x, b->dy, b->want);
    selfcheck_typed_line(sc, "conv2d_bwd_weight", d, s, tdw, b->got, b->want,
                         b->nw, tol);
  }
  rumus_tensor_free(tx);
  rumus_tensor_free(tw);
  rumus_tensor_free(tb);
  rumus_tensor_free(ty);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdx);
  rumus_tensor_free(tdw);
}

/* Random data for geometry g, the ops of each storage type. */
static void run_geo(selfcheck *sc, const ref_conv_geo *g, int wino) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  const size_t oh = ref_conv_out(g->h, g->kh, g->ph, g->sh, g->dh);
  const size_t ow = ref_conv_out(g->w, g->kw, g->pw, g->sw, g->dw);
  bufs b = {g->n * g->c * g->h * g->w, g->oc * (g->c / g->g) * g->kh * g->kw,
            g->n * g->oc * oh * ow, {g->n, g->c, g->h, g->w},
            {g->oc, g->c / g->g, g->kh, g->kw}, {g->n, g->oc, oh, ow},
            NULL, NULL, NULL, NULL, NULL, NULL};
  const size_t most = b.nx > b.ny ? b.nx : b.ny;
  b.x = malloc(b.nx * sizeof(float));
  b.w = malloc(b.nw * sizeof(float));
  b.b = malloc(g->oc * sizeof(float));
  b.dy = malloc(b.ny * sizeof(float));
  b.got = malloc(most * sizeof(float));
  b.want = malloc(most * sizeof(double));
  if (!b.x || !b.w || !b.b || !b.dy || !b.got || !b.want) {
    selfcheck_report(sc, wino ? "conv2d_winograd" : "conv2d", RUMUS_ENOMEM,
                     0, 0);
  } else {
    for (size_t i = 0; i < b.nx; i++) b.x[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < b.nw; i++) b.w[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < g->oc; i++) b.b[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < b.ny; i++) b.dy[i] = selfcheck_rand(-1, 1);
    for (int k = 0; k < 3; k++) check_type(sc, TYPES[k], &b, wino);
  }
  free(b.x);
  free(b.w);
  free(b.b);
  free(b.dy);
  free(b.got);
  free(b.want);
}

void selfcheck_conv(selfcheck *sc) {
  run_geo(sc, &G, 0);
  run_geo(sc, &GW, 1);
}
