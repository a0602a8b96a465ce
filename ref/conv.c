/* conv.c - float64 reference for 2-D convolution (NCHW, groups, stride,
 * padding, dilation): direct loops over every (output, tap) pair. */
#include <string.h>

#include "ref.h"

size_t ref_conv_out(size_t in, size_t k, int pad, int stride, int dil) {
  const long span = (long)dil * ((long)k - 1) + 1;
  const long padded = (long)in + 2L * pad;
  return span > padded ? 0 : (size_t)((padded - span) / stride + 1);
}

/* Calls visit(ctx, xi, wi, yi) for every term x[xi] * w[wi] of y[yi]. */
typedef void (*visit_fn)(void *ctx, size_t xi, size_t wi, size_t yi);

static void each_term(const ref_conv_geo *g, visit_fn visit, void *ctx) {
  const size_t oh = ref_conv_out(g->h, g->kh, g->ph, g->sh, g->dh);
  const size_t ow = ref_conv_out(g->w, g->kw, g->pw, g->sw, g->dw);
  const size_t cg = g->c / g->g, ocg = g->oc / g->g;
  for (size_t n = 0; n < g->n; n++)
    for (size_t o = 0; o < g->oc; o++)
      for (size_t i = 0; i < oh; i++)
        for (size_t j = 0; j < ow; j++) {
          const size_t yi = ((n * g->oc + o) * oh + i) * ow + j;
          const size_t grp = o / ocg;
          for (size_t c = 0; c < cg; c++)
            for (size_t a = 0; a < g->kh; a++)
              for (size_t b = 0; b < g->kw; b++) {
                const long ih = (long)(i * g->sh) - g->ph + (long)a * g->dh;
                const long iw = (long)(j * g->sw) - g->pw + (long)b * g->dw;
                if (ih < 0 || iw < 0 || ih >= (long)g->h || iw >= (long)g->w)
                  continue;
                const size_t xi =
                    ((n * g->c + grp * cg + c) * g->h + (size_t)ih) * g->w +
                    (size_t)iw;
                const size_t wi = ((o * cg + c) * g->kh + a) * g->kw + b;
                visit(ctx, xi, wi, yi);
              }
        }
}

typedef struct {
  const float *a, *b;
  double *out;
} acc_ctx;

static void fwd_term(void *p, size_t xi, size_t wi, size_t yi) {
  acc_ctx *c = p;
  c->out[yi] += (double)c->a[xi] * c->b[wi];
}
static void data_term(void *p, size_t xi, size_t wi, size_t yi) {
  acc_ctx *c = p; /* a = dy, b = w */
  c->out[xi] += (double)c->a[yi] * c->b[wi];
}
static void weight_term(void *p, size_t xi, size_t wi, size_t yi) {
  acc_ctx *c = p; /* a = x, b = dy */
  c->out[wi] += (double)c->a[xi] * c->b[yi];
}

void ref_conv2d_fwd(const ref_conv_geo *g, const float *x, const float *w,
                    const float *bias, double *y) {
  const size_t oh = ref_conv_out(g->h, g->kh, g->ph, g->sh, g->dh);
  const size_t ow = ref_conv_out(g->w, g->kw, g->pw, g->sw, g->dw);
  for (size_t n = 0; n < g->n; n++)
    for (size_t o = 0; o < g->oc; o++)
      for (size_t i = 0; i < oh * ow; i++)
        y[(n * g->oc + o) * oh * ow + i] = bias ? bias[o] : 0.0;
  acc_ctx c = {x, w, y};
  each_term(g, fwd_term, &c);
}

void ref_conv2d_bwd_data(const ref_conv_geo *g, const float *dy,
                         const float *w, double *dx) {
  memset(dx, 0, g->n * g->c * g->h * g->w * sizeof *dx);
  acc_ctx c = {dy, w, dx};
  each_term(g, data_term, &c);
}

void ref_conv2d_bwd_weight(const ref_conv_geo *g, const float *x,
                           const float *dy, double *dw) {
  memset(dw, 0, g->oc * (g->c / g->g) * g->kh * g->kw * sizeof *dw);
  acc_ctx c = {x, dy, dw};
  each_term(g, weight_term, &c);
}
