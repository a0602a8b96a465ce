/* conv.c - rumus-info self-check of the conv2d family, once per storage
 * type (lines suffixed _f16 and _bf16 for the 16-bit types).
 *
 * One shape with every option away from its default (groups 2, stride 2 by
 * 1, padding 1 by 2, dilation 1 by 2, a 3 x 5 kernel, a bias): x, w and dy
 * rounded to the type, against the float64 reference of the rounded
 * values.  The F32 tolerances cover float sums of up to 60 (forward, input
 * gradient) and 40 (weight gradient) products of values below 1; a 16-bit
 * line adds half an ulp of the largest |want| (selfcheck_typed_tol). */
#include <stdio.h>
#include <stdlib.h>

#include "selfcheck.h"

static const ref_conv_geo G = {2, 6, 9, 11, 4, 3, 5, 2, 1, 1, 2, 1, 2, 2};
static const rumus_conv2d_params P = {2, 1, 1, 2, 1, 2, 2};

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

static void check_type(selfcheck *sc, rumus_dtype d, bufs *b) {
  round_all(d, b->x, b->nx);
  round_all(d, b->w, b->nw);
  round_all(d, b->b, G.oc);
  round_all(d, b->dy, b->ny);
  rumus_tensor *tx = NULL, *tw = NULL, *tb = NULL, *ty = NULL, *tdy = NULL,
               *tdx = NULL, *tdw = NULL;
  int st = tensor(sc, d, 4, b->xs, b->x, b->nx, &tx);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ws, b->w, b->nw, &tw);
  if (st == RUMUS_OK) st = tensor(sc, d, 1, &G.oc, b->b, G.oc, &tb);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ys, NULL, 0, &ty);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ys, b->dy, b->ny, &tdy);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->xs, NULL, 0, &tdx);
  if (st == RUMUS_OK) st = tensor(sc, d, 4, b->ws, NULL, 0, &tdw);
  int s = st == RUMUS_OK ? rumus_conv2d_fwd(sc->ctx, &P, tx, tw, tb, ty) : st;
  ref_conv2d_fwd(&G, b->x, b->w, b->b, b->want);
  selfcheck_typed_line(sc, "conv2d_fwd", d, s, ty, b->got, b->want, b->ny, 2e-5);
  s = st == RUMUS_OK ? rumus_conv2d_bwd_data(sc->ctx, &P, tdy, tw, tdx) : st;
  ref_conv2d_bwd_data(&G, b->dy, b->w, b->want);
  selfcheck_typed_line(sc, "conv2d_bwd_data", d, s, tdx, b->got, b->want, b->nx, 2e-5);
  s = st == RUMUS_OK ? rumus_conv2d_bwd_weight(sc->ctx, &P, tx, tdy, tdw) : st;
  ref_conv2d_bwd_weight(&G, b->x, b->dy, b->want);
  selfcheck_typed_line(sc, "conv2d_bwd_weight", d, s, tdw, b->got, b->want, b->nw, 2e-5);
  rumus_tensor_free(tx);
  rumus_tensor_free(tw);
  rumus_tensor_free(tb);
  rumus_tensor_free(ty);
  rumus_tensor_free(tdy);
  rumus_tensor_free(tdx);
  rumus_tensor_free(tdw);
}

void selfcheck_conv(selfcheck *sc) {
  static const rumus_dtype TYPES[] = {RUMUS_F32, RUMUS_F16, RUMUS_BF16};
  const size_t oh = ref_conv_out(G.h, G.kh, G.ph, G.sh, G.dh);
  const size_t ow = ref_conv_out(G.w, G.kw, G.pw, G.sw, G.dw);
  bufs b = {G.n * G.c * G.h * G.w, G.oc * (G.c / G.g) * G.kh * G.kw,
            G.n * G.oc * oh * ow, {G.n, G.c, G.h, G.w},
            {G.oc, G.c / G.g, G.kh, G.kw}, {G.n, G.oc, oh, ow},
            NULL, NULL, NULL, NULL, NULL, NULL};
  const size_t most = b.nx > b.ny ? b.nx : b.ny;
  b.x = malloc(b.nx * sizeof(float));
  b.w = malloc(b.nw * sizeof(float));
  b.b = malloc(G.oc * sizeof(float));
  b.dy = malloc(b.ny * sizeof(float));
  b.got = malloc(most * sizeof(float));
  b.want = malloc(most * sizeof(double));
  if (!b.x || !b.w || !b.b || !b.dy || !b.got || !b.want) {
    selfcheck_report(sc, "conv2d", RUMUS_ENOMEM, 0, 0);
  } else {
    for (size_t i = 0; i < b.nx; i++) b.x[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < b.nw; i++) b.w[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < G.oc; i++) b.b[i] = selfcheck_rand(-1, 1);
    for (size_t i = 0; i < b.ny; i++) b.dy[i] = selfcheck_rand(-1, 1);
    for (int k = 0; k < 3; k++) check_type(sc, TYPES[k], &b);
  }
  free(b.x);
  free(b.w);
  free(b.b);
  free(b.dy);
  free(b.got);
  free(b.want);
}
