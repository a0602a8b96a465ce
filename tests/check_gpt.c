/*
 * check_gpt.c - rumus-train's GPT (tools/train/gpt*.c): the text reader,
 * vocabulary, split and batches; the learning-rate schedule; the command
 * line; the parameter table and initialisation; and on the device a tiny
 * GPT (1 layer, 2 heads, width 32, context 16) on tests/data/gpt_tiny.txt:
 *
 *   gpt_gradients  the whole model's backward against central differences
 *                  of the device forward (F32), for a few parameters of
 *                  every tensor, tied and untied.  The parameters are
 *                  drawn larger than nanoGPT's (N(0, 0.1), layer norms
 *                  around 1) so that every path carries a gradient well
 *                  above the F32 noise; the loss is then about 8-11 and
 *                  strongly curved, so d = 2e-3 (at 1e-2 the O(d^2) term
 *                  reaches 7% on wte; GPT_FD_DIAG=1 prints four d).
 *                  Bound: |fd - g| <= 0.03 |g| + 3e-4 (measured worst:
 *                  0.23 of it; a wrong or missing term is off by far
 *                  more), and every tensor's largest |g| above 1e-3.
 *   gpt_learns     60 AdamW steps (lr 1e-2, batch 8) lower the validation
 *                  loss of fixed windows from ln(V) ~ 3.2 to < 0.6 x that
 *                  (measured about 1.0-1.3: the text is very repetitive).
 *   gpt_deterministic  4 steps twice: the same parameters, bit for bit.
 *   gpt_mixed_precision  the 60 steps of gpt_learns in BF16 and F16
 *                  (mixed precision, F32 masters): the validation loss
 *                  within 10% of F32's; an F16 step whose gradients
 *                  overflow is skipped and halves the scale.
 *   gpt_save_load  a trained model saved and loaded (tied and untied):
 *                  the same tensors bit for bit, the same vocabulary and
 *                  config, the same loss; damaged files refused.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/train/gpt.h"
#include "../tools/train/gpt_data.h"
#include "../tools/train/gpt_file.h"
#include "../tools/train/gpt_main.h"
#include "../tools/train/mnist.h"
#include "../tools/train/options.h"
#include "../tools/train/safetensors.h"
#include "testutil.h"

#define G_OK(m, expr)                                                          \
  do {                                                                         \
    int g_st_ = (expr);                                                        \
    ck_assert_msg(g_st_ == RUMUS_OK, "%s: %s", #expr, gpt_errmsg(m));          \
  } while (0)

static char tmpdir[256];

static void tmp_setup(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/check_gpt.XXXXXX", base && *base ? base : "/tmp");
  ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
}

static void tmp_teardown(void) {
  static const char *const names[] = {"a", "b", "a.dat", "b.u8", "m.st", "m.st.tmp",
                                      "bad.st"};
  char path[512];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
    remove(path);
  }
  rmdir(tmpdir);
}

static const char *tmp_path(const char *name) {
  static char path[2][512];
  static int k;
  k ^= 1;
  snprintf(path[k], sizeof path[k], "%s/%s", tmpdir, name);
  return path[k];
}

static void write_text(const char *path, const char *s) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  fputs(s, f);
  ck_assert_int_eq(fclose(f), 0);
}

static const char *tiny_path(void) {
  static char p[1024];
  const char *src = getenv("srcdir");
  snprintf(p, sizeof p, "%s/tests/data/gpt_tiny.txt", src ? src : ".");
  return p;
}

/* ---- Host pieces ------------------------------------------------------ */

START_TEST(text_and_vocab) {
  /* A directory: the files without .dat / .u8, in name order. */
  write_text(tmp_path("b"), "ba\n");
  write_text(tmp_path("a"), "ab");
  write_text(tmp_path("a.dat"), "XXXX");
  write_text(tmp_path("b.u8"), "YYYY");
  gpt_text t;
  char err[512];
  ck_assert_int_eq(gpt_text_load(tmpdir, &t, err, sizeof err), RUMUS_OK);
  ck_assert_uint_eq(t.nfiles, 2);
  ck_assert_uint_eq(t.len, 5);
  ck_assert(memcmp(t.text, "abba\n", 5) == 0);
  gpt_vocab v;
  gpt_vocab_build(&v, t.text, t.len);
  ck_assert_uint_eq(v.n, 3);
  ck_assert_int_eq(v.byte[0], '\n');
  ck_assert_int_eq(v.id['b'], 2);
  ck_assert_int_eq(v.id['X'], -1);
  /* Too short for a split with context 1 (5 bytes: 5 and 0). */
  ck_assert_int_eq(gpt_text_encode(&t, &v, 1, err, sizeof err), TRAIN_EFORMAT);
  gpt_text_free(&t);
  /* Missing directory: the message says what to install. */
  ck_assert_int_eq(gpt_text_load(tmp_path("none"), &t, err, sizeof err), TRAIN_EIO);
  ck_assert_ptr_nonnull(strstr(err, "fortunes"));
  /* The tiny text: split 90/10, entropy of its bytes. */
  ck_assert_int_eq(gpt_text_load(tiny_path(), &t, err, sizeof err), RUMUS_OK);
  gpt_vocab_build(&v, t.text, t.len);
  ck_assert_int_eq(gpt_text_encode(&t, &v, 16, err, sizeof err), RUMUS_OK);
  ck_assert_uint_eq(t.ntrain, t.len - t.len / 10);
  double h = gpt_unigram_entropy(t.tok, t.len, v.n);
  ck_assert(h > 2.0 && h < log((double)v.n));
  /* A byte outside a given vocabulary. */
  gpt_vocab small;
  ck_assert_int_eq(gpt_vocab_from_bytes(&small, (const unsigned char *)"the", 3), RUMUS_OK);
  ck_assert_int_eq(gpt_vocab_from_bytes(&small, (const unsigned char *)"tt", 2), TRAIN_EFORMAT);
  ck_assert_int_eq(gpt_text_encode(&t, &small, 16, err, sizeof err), TRAIN_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "not in the model's vocabulary"));
  /* Batches: y is x shifted by one; fixed windows span the text. */
  ck_assert_int_eq(gpt_text_encode(&t, &v, 16, err, sizeof err), RUMUS_OK);
  int32_t x[4 * 16], y[4 * 16];
  mlp_rng r;
  mlp_rng_seed(&r, 3);
  gpt_batch_random(t.tok, t.ntrain, 16, 4, &r, x, y);
  for (int b = 0; b < 4; b++)
    for (int i = 0; i < 15; i++) ck_assert_int_eq(x[b * 16 + i + 1], y[b * 16 + i]);
  gpt_batch_fixed(t.tok, t.ntrain, 16, 4, 0, 4, x, y);
  ck_assert(memcmp(x, t.tok, 16 * sizeof *x) == 0);
  ck_assert(memcmp(y + 3 * 16, t.tok + t.ntrain - 16, 16 * sizeof *y) == 0);
  gpt_text_free(&t);
}
END_TEST

START_TEST(lr_schedule) {
  /* nanoGPT's get_lr: warm-up to lr, cosine to lr / 10. */
  ck_assert_float_eq_tol(gpt_lr_at(1e-3f, 0, 10, 110, 0), 1e-3f / 11, 1e-9f);
  ck_assert_float_eq_tol(gpt_lr_at(1e-3f, 9, 10, 110, 0), 1e-3f * 10 / 11, 1e-9f);
  ck_assert_float_eq_tol(gpt_lr_at(1e-3f, 10, 10, 110, 0), 1e-3f, 1e-9f);
  ck_assert_float_eq_tol(gpt_lr_at(1e-3f, 60, 10, 110, 0), 5.5e-4f, 1e-8f);
  ck_assert_float_eq_tol(gpt_lr_at(1e-3f, 110, 10, 110, 0), 1e-4f, 1e-9f);
  ck_assert_float_eq_tol(gpt_lr_at(1e-3f, 60, 10, 110, 1), 1e-3f, 1e-9f);
}
END_TEST

static int parse(train_opts *o, char *err, int argc, ...) {
  char *argv[32] = {"rumus-train"};
  va_list ap;
  va_start(ap, argc);
  for (int i = 0; i < argc; i++) argv[i + 1] = va_arg(ap, char *);
  va_end(ap);
  return train_opts_parse(argc + 1, argv, o, err, 512);
}

START_TEST(gpt_options) {
  train_opts o;
  char err[512];
  ck_assert_int_eq(parse(&o, err, 2, "--model", "gpt"), 0);
  ck_assert_uint_eq(o.layers, 2);
  ck_assert_uint_eq(o.width, 128);
  ck_assert_uint_eq(o.batch, 32);
  ck_assert_int_eq(o.steps, 5000);
  ck_assert(o.lr == 2e-3f);
  ck_assert(!o.untied);
  ck_assert_int_eq(parse(&o, err, 6, "--model=gpt", "--preset", "h200", "--untied",
                         "--context", "128"), 0);
  ck_assert_uint_eq(o.layers, 6);
  ck_assert_uint_eq(o.heads, 6);
  ck_assert_uint_eq(o.width, 384);
  ck_assert_uint_eq(o.context, 128);
  ck_assert_uint_eq(o.batch, 64);
  ck_assert(o.lr == 1e-3f);
  ck_assert(o.untied);
  ck_assert_int_eq(parse(&o, err, 4, "--model", "gpt", "--temperature", "0"), 0);
  ck_assert(o.temperature == 0.0f);
  ck_assert_int_eq(parse(&o, err, 4, "--model", "mlp", "--layers", "2"), -1);
  ck_assert_ptr_nonnull(strstr(err, "--layers applies to --model gpt"));
  ck_assert_int_eq(parse(&o, err, 4, "--model", "gpt", "--epochs", "2"), -1);
  ck_assert_int_eq(parse(&o, err, 4, "--model", "gpt", "--precision", "bf16"), 0);
  ck_assert_int_eq(parse(&o, err, 4, "--model", "gpt", "--preset", "big"), -1);
  ck_assert_int_eq(parse(&o, err, 4, "--model", "gpt", "--steps", "0"), -1);
  ck_assert_int_eq(parse(&o, err, 4, "--model", "gpt", "--temperature", "-1"), -1);
}
END_TEST

static const gpt_config TINY = {0, 1, 2, 32, 16, 1};

START_TEST(gpt_table_and_init) {
  gpt_config c = TINY;
  c.vocab = 20;
  c.layers = 2;
  c.tied = 0;
  ck_assert_uint_eq(gpt_ntensors(&c), 4 + 24 + 1);
  char name[96];
  size_t shape[2];
  ck_assert_int_eq(gpt_tensor_info(&c, 4, name, sizeof name, shape), 2);
  ck_assert_str_eq(name, "transformer.h.0.attn.c_attn.weight");
  ck_assert_uint_eq(shape[0], 96);
  ck_assert_uint_eq(shape[1], 32);
  ck_assert_int_eq(gpt_tensor_info(&c, 12, name, sizeof name, shape), 2);
  ck_assert_str_eq(name, "transformer.h.0.mlp.c_proj.weight");
  ck_assert_uint_eq(shape[0], 32);
  ck_assert_uint_eq(shape[1], 128);
  gpt_tensor_info(&c, 26, name, sizeof name, shape);
  ck_assert_str_eq(name, "transformer.ln_f.weight");
  gpt_tensor_info(&c, 28, name, sizeof name, shape);
  ck_assert_str_eq(name, "lm_head.weight");
  /* 12 C^2 + 13 C per block, (V + T) C embeddings, 2 C ln_f, V C head. */
  ck_assert_uint_eq(gpt_param_count(&c), 2 * (12 * 32 * 32 + 13 * 32) + 36 * 32 + 64 + 640);
  gpt_params p;
  ck_assert_int_eq(gpt_params_alloc(&p, &c), RUMUS_OK);
  gpt_params_init(&p, 7);
  double s2 = 0.0;
  size_t n = gpt_tensor_numel(&c, 4);
  for (size_t i = 0; i < n; i++) s2 += (double)p.t[4][i] * p.t[4][i];
  ck_assert(fabs(sqrt(s2 / (double)n) - 0.02) < 0.002);
  n = gpt_tensor_numel(&c, 12);
  s2 = 0.0;
  for (size_t i = 0; i < n; i++) s2 += (double)p.t[12][i] * p.t[12][i];
  ck_assert(fabs(sqrt(s2 / (double)n) - 0.01) < 0.001); /* 0.02 / sqrt(2 L) */
  ck_assert(p.t[2][0] == 1.0f && p.t[3][0] == 0.0f && p.t[5][0] == 0.0f);
  gpt_params_free(&p);
  c.heads = 5;
  ck_assert_int_eq(gpt_config_check(&c, name, sizeof name), RUMUS_EINVAL);
}
END_TEST

/* ---- Device ----------------------------------------------------------- */

typedef struct {
  gpt_text text;
  gpt_vocab vocab;
  gpt_config cfg;
} tiny_data;

static void tiny_load(tiny_data *d, int tied) {
  char err[512];
  ck_assert_int_eq(gpt_text_load(tiny_path(), &d->text, err, sizeof err), RUMUS_OK);
  gpt_vocab_build(&d->vocab, d->text.text, d->text.len);
  d->cfg = TINY;
  d->cfg.vocab = d->vocab.n;
  d->cfg.tied = tied;
  ck_assert_int_eq(gpt_text_encode(&d->text, &d->vocab, d->cfg.context, err, sizeof err),
                   RUMUS_OK);
}

static gpt *tiny_model(rumus_ctx *ctx, const tiny_data *d, size_t batch, gpt_params *p,
                       uint64_t seed, float scale, rumus_dtype prec) {
  static const rumus_adam_params adam = {1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f, 1};
  gpt *m = NULL;
  char err[512];
  ck_assert_msg(gpt_create(ctx, &d->cfg, batch, &adam, prec, &m, err, sizeof err) == RUMUS_OK,
                "%s", err);
  ck_assert_int_eq(gpt_params_alloc(p, &d->cfg), RUMUS_OK);
  gpt_params_init(p, seed);
  if (scale != 1.0f) { /* larger weights, and layer norms away from 1 / 0 */
    mlp_rng r;
    mlp_rng_seed(&r, seed + 1);
    for (size_t k = 0; k < p->n; k++)
      for (size_t i = 0; i < gpt_tensor_numel(&d->cfg, k); i++)
        p->t[k][i] = p->t[k][i] * scale + mlp_rng_uniform(&r, -0.2f, 0.2f);
  }
  G_OK(m, gpt_set_params(m, p));
  return m;
}

static double loss_at(gpt *m, gpt_params *p, size_t k, size_t i, float d,
                      const int32_t *x, const int32_t *y) {
  float keep = p->t[k][i];
  p->t[k][i] = keep + d;
  G_OK(m, gpt_set_params(m, p));
  double loss;
  G_OK(m, gpt_loss(m, x, y, &loss));
  p->t[k][i] = keep;
  return loss;
}

static void check_gradients(int tied) {
  tiny_data d;
  tiny_load(&d, tied);
  rumus_ctx *ctx = tu_ctx();
  gpt_params p, g;
  memset(&g, 0, sizeof g);
  gpt *m = tiny_model(ctx, &d, 2, &p, 5, 5.0f, RUMUS_F32);
  int32_t x[2 * 16], y[2 * 16];
  gpt_batch_fixed(d.text.tok, d.text.ntrain, 16, 2, 0, 7, x, y);
  double l0;
  G_OK(m, gpt_train_step(m, x, y, 0.0f, 0.0f, &l0, NULL));
  ck_assert_int_eq(gpt_steps(m), 0); /* lr 0: no update */
  G_OK(m, gpt_get_grads(m, &g));
  const float dd = 2e-3f;
  double worst = 0.0;
  for (size_t k = 0; k < p.n; k++) {
    size_t n = gpt_tensor_numel(&d.cfg, k), pick[2] = {0, n / 2 + 1};
    for (size_t i = 0; i < n; i++) /* the largest |g| */
      if (fabsf(g.t[k][i]) > fabsf(g.t[k][pick[0]])) pick[0] = i;
    for (int j = 0; j < 2; j++) {
      size_t i = pick[j] % n;
      double fd = (loss_at(m, &p, k, i, dd, x, y) - loss_at(m, &p, k, i, -dd, x, y)) /
                  (2.0 * dd);
      double an = g.t[k][i], bound = 0.03 * fabs(an) + 3e-4;
      if (getenv("GPT_FD_DIAG")) {
        static const float ds[4] = {3e-2f, 1e-2f, 3e-3f, 1e-3f};
        for (int q = 0; q < 4; q++)
          fprintf(stderr, "%zu[%zu] d %g: g %g fd %g\n", k, i, (double)ds[q], an,
                  (loss_at(m, &p, k, i, ds[q], x, y) - loss_at(m, &p, k, i, -ds[q], x, y)) /
                      (2.0 * ds[q]));
      }
      char name[96];
      size_t shape[2];
      gpt_tensor_info(&d.cfg, k, name, sizeof name, shape);
      worst = fmax(worst, fabs(fd - an) / bound);
      ck_assert_msg(fabs(fd - an) <= bound, "%s[%zu]: backward %g, central difference %g",
                    name, i, an, fd);
    }
    ck_assert_msg(fabsf(g.t[k][pick[0]]) > 1e-3f, "tensor %zu has no gradient", k);
  }
  fprintf(stderr, "gpt_gradients (%s): loss %.4f, worst error %.2f of the bound\n",
          tied ? "tied" : "untied", l0, worst);
  gpt_params_free(&p);
  gpt_params_free(&g);
  gpt_free(m);
  TU_OK(ctx, rumus_ctx_free(ctx));
  gpt_text_free(&d.text);
}

START_TEST(gpt_gradients) {
  check_gradients(1);
  check_gradients(0);
}
END_TEST

static double val_loss(gpt *m, const tiny_data *d, size_t batch) {
  int32_t x[8 * 16], y[8 * 16];
  const gpt_text *t = &d->text;
  gpt_batch_fixed(t->tok + t->ntrain, t->len - t->ntrain, 16, batch, 0, batch, x, y);
  double loss;
  G_OK(m, gpt_loss(m, x, y, &loss));
  return loss;
}

static gpt *trained(rumus_ctx *ctx, const tiny_data *d, gpt_params *p, double *before,
                    double *after, long steps, rumus_dtype prec) {
  gpt *m = tiny_model(ctx, d, 8, p, 11, 1.0f, prec);
  *before = val_loss(m, d, 8);
  mlp_rng r;
  mlp_rng_seed(&r, 1);
  int32_t x[8 * 16], y[8 * 16];
  for (long it = 0; it < steps; it++) {
    gpt_batch_random(d->text.tok, d->text.ntrain, 16, 8, &r, x, y);
    double loss, norm;
    G_OK(m, gpt_train_step(m, x, y, gpt_lr_at(1e-2f, it, 5, steps, 0), 1.0f, &loss, &norm));
    ck_assert(isfinite(loss) && isfinite(norm));
  }
  ck_assert_int_eq(gpt_steps(m), steps);
  *after = val_loss(m, d, 8);
  return m;
}

START_TEST(gpt_learns) {
  tiny_data d;
  tiny_load(&d, 1);
  rumus_ctx *ctx = tu_ctx();
  gpt_params p;
  double before, after;
  gpt *m = trained(ctx, &d, &p, &before, &after, 60, RUMUS_F32);
  fprintf(stderr, "gpt_learns: validation loss %.4f -> %.4f (ln V = %.4f)\n", before, after,
          log((double)d.vocab.n));
  ck_assert(fabs(before - log((double)d.vocab.n)) < 0.3);
  ck_assert_msg(after < 0.6 * before, "loss %g -> %g", before, after);
  float *logits = malloc(d.vocab.n * sizeof *logits);
  /* The one-sequence forward of generation against the batch forward:
   * the mean loss of a window from its logits, position by position,
   * equals gpt_loss of a batch holding that window in every row. */
  {
    int32_t bx[8 * 16], by[8 * 16];
    const gpt_text *t = &d.text;
    gpt_batch_fixed(t->tok + t->ntrain, t->len - t->ntrain, 16, 1, 3, 8, bx, by);
    for (int b = 1; b < 8; b++) {
      memcpy(bx + b * 16, bx, sizeof(int32_t) * 16);
      memcpy(by + b * 16, by, sizeof(int32_t) * 16);
    }
    double want, sum = 0.0;
    G_OK(m, gpt_loss(m, bx, by, &want));
    for (size_t pos = 0; pos < 16; pos++) {
      G_OK(m, gpt_logits(m, bx, pos, logits));
      double mx = logits[0], z = 0.0;
      for (size_t i = 1; i < d.vocab.n; i++) mx = fmax(mx, logits[i]);
      for (size_t i = 0; i < d.vocab.n; i++) z += exp(logits[i] - mx);
      sum += mx + log(z) - logits[by[pos]];
    }
    ck_assert_msg(fabs(sum / 16 - want) < 1e-4, "one sequence %g, batch %g", sum / 16, want);
  }
  /* Sampling: logits of a padded one-token prompt are finite. */
  int32_t win[16] = {0};
  win[0] = d.vocab.id['t'];
  G_OK(m, gpt_logits(m, win, 0, logits));
  for (size_t i = 0; i < d.vocab.n; i++) ck_assert(isfinite(logits[i]));
  /* Causal: what follows position 0 does not change its logits. */
  float first = logits[0];
  for (int i = 1; i < 16; i++) win[i] = d.vocab.id['o'];
  G_OK(m, gpt_logits(m, win, 0, logits));
  ck_assert_msg(logits[0] == first, "logit 0: %.9g then %.9g", (double)first, (double)logits[0]);
  free(logits);
  gpt_params_free(&p);
  gpt_free(m);
  TU_OK(ctx, rumus_ctx_free(ctx));
  gpt_text_free(&d.text);
}
END_TEST

/* Mixed precision: BF16 and F16 (loss scale 65536) learn as F32 does. */
START_TEST(gpt_mixed_precision) {
  tiny_data d;
  tiny_load(&d, 1);
  rumus_ctx *ctx = tu_ctx();
  static const rumus_dtype types[3] = {RUMUS_F32, RUMUS_BF16, RUMUS_F16};
  double after[3];
  for (int i = 0; i < 3; i++) {
    gpt_params p;
    double before;
    gpt *m = trained(ctx, &d, &p, &before, &after[i], 60, types[i]);
    fprintf(stderr, "gpt_mixed_precision %s: %.4f -> %.4f (scale %g, %ld skipped)\n",
            rumus_dtype_name(types[i]), before, after[i], (double)gpt_loss_scale(m),
            gpt_skipped_steps(m));
    ck_assert_msg(fabs(after[i] - after[0]) < 0.1 * after[0], "%s: %g, F32: %g",
                  rumus_dtype_name(types[i]), after[i], after[0]);
    gpt_params_free(&p);
    gpt_free(m);
  }
  /* F16 overflow: a loss scale of 2^100 makes the gradients infinite;
   * the step is skipped on the device (the parameters unchanged, AdamW's
   * step count too) and the scale halves. */
  gpt_params p, q;
  memset(&q, 0, sizeof q);
  gpt *m = tiny_model(ctx, &d, 8, &p, 11, 1.0f, RUMUS_F16);
  gpt_set_loss_scale(m, 0x1p100f);
  int32_t x[8 * 16], y[8 * 16];
  gpt_batch_fixed(d.text.tok, d.text.ntrain, 16, 8, 0, 8, x, y);
  double loss;
  G_OK(m, gpt_train_step(m, x, y, 1e-2f, 1.0f, &loss, NULL));
  ck_assert_int_eq(gpt_steps(m), 0);
  ck_assert_int_eq(gpt_skipped_steps(m), 1);
  ck_assert(gpt_loss_scale(m) == 0x1p99f);
  G_OK(m, gpt_get_params(m, &q));
  for (size_t k = 0; k < p.n; k++)
    ck_assert(memcmp(p.t[k], q.t[k], gpt_tensor_numel(&d.cfg, k) * sizeof(float)) == 0);
  gpt_set_loss_scale(m, 1024.0f);
  G_OK(m, gpt_train_step(m, x, y, 1e-2f, 1.0f, &loss, NULL));
  ck_assert_int_eq(gpt_steps(m), 1);
  ck_assert_int_eq(gpt_skipped_steps(m), 1);
  gpt_params_free(&p);
  gpt_params_free(&q);
  gpt_free(m);
  TU_OK(ctx, rumus_ctx_free(ctx));
  gpt_text_free(&d.text);
}
END_TEST

/* The same seed and batches give the same parameters, bit for bit. */
START_TEST(gpt_deterministic) {
  tiny_data d;
  tiny_load(&d, 1);
  rumus_ctx *ctx = tu_ctx();
  gpt_params p[2], q[2];
  for (int run = 0; run < 2; run++) {
    double before, after;
    memset(&q[run], 0, sizeof q[run]);
    gpt *m = trained(ctx, &d, &p[run], &before, &after, 4, RUMUS_F32);
    G_OK(m, gpt_get_params(m, &q[run]));
    gpt_free(m);
  }
  int moved = 0;
  for (size_t k = 0; k < q[0].n; k++) {
    size_t n = gpt_tensor_numel(&d.cfg, k);
    ck_assert(memcmp(q[0].t[k], q[1].t[k], n * sizeof(float)) == 0);
    moved |= memcmp(q[0].t[k], p[0].t[k], n * sizeof(float)) != 0;
  }
  ck_assert(moved);
  for (int run = 0; run < 2; run++) {
    gpt_params_free(&p[run]);
    gpt_params_free(&q[run]);
  }
  TU_OK(ctx, rumus_ctx_free(ctx));
  gpt_text_free(&d.text);
}
END_TEST

static void save_load(int tied) {
  tiny_data d;
  tiny_load(&d, tied);
  rumus_ctx *ctx = tu_ctx();
  gpt_params p, q;
  double before, after;
  gpt *m = trained(ctx, &d, &p, &before, &after, 3, RUMUS_F32);
  G_OK(m, gpt_get_params(m, &p));
  char err[512];
  const char *extra[] = {"rumus.lr", "0.01"};
  ck_assert_int_eq(gpt_ckpt_save(tmp_path("m.st"), &p, &d.vocab, extra, 1, err, sizeof err),
                   RUMUS_OK);
  ck_assert(gpt_file_is_gpt(tmp_path("m.st")));
  gpt_vocab v;
  ck_assert_msg(gpt_ckpt_load(tmp_path("m.st"), &q, &v, err, sizeof err) == RUMUS_OK, "%s", err);
  ck_assert_int_eq(q.cfg.tied, tied);
  ck_assert_uint_eq(q.cfg.heads, 2);
  ck_assert_uint_eq(q.n, p.n);
  for (size_t k = 0; k < p.n; k++)
    ck_assert(memcmp(p.t[k], q.t[k], gpt_tensor_numel(&d.cfg, k) * sizeof(float)) == 0);
  ck_assert_uint_eq(v.n, d.vocab.n);
  ck_assert(memcmp(v.byte, d.vocab.byte, v.n) == 0);
  /* The file as nanoGPT names it, lm_head included even when tied. */
  st_file f;
  ck_assert_int_eq(st_load(tmp_path("m.st"), &f, err, sizeof err), RUMUS_OK);
  ck_assert_ptr_nonnull(st_get(&f, "lm_head.weight"));
  ck_assert_ptr_nonnull(st_get(&f, "transformer.h.0.mlp.c_fc.bias"));
  ck_assert_str_eq(st_meta(&f, "n_embd"), "32");
  ck_assert_str_eq(st_meta(&f, "rumus.lr"), "0.01");
  st_free(&f);
  /* Loaded into a fresh model: the same loss, bit for bit. */
  gpt *m2 = NULL;
  static const rumus_adam_params adam = {1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f, 1};
  ck_assert_int_eq(gpt_create(ctx, &q.cfg, 8, &adam, RUMUS_F32, &m2, err, sizeof err), RUMUS_OK);
  G_OK(m2, gpt_set_params(m2, &q));
  ck_assert(val_loss(m2, &d, 8) == val_loss(m, &d, 8));
  gpt_free(m2);
  gpt_params_free(&q);
  /* Damaged: no blocks. */
  st_tensor t[2] = {{"transformer.wte.weight", RUMUS_F32, 2, {d.vocab.n, 32}, p.t[0],
                     d.vocab.n * 32 * 4},
                    {"transformer.wpe.weight", RUMUS_F32, 2, {16, 32}, p.t[1], 16 * 32 * 4}};
  const char *meta[] = {"n_head", "2"};
  ck_assert_int_eq(st_save(tmp_path("bad.st"), t, 2, meta, 1, err, sizeof err), RUMUS_OK);
  ck_assert_int_eq(gpt_ckpt_load(tmp_path("bad.st"), &q, &v, err, sizeof err), TRAIN_EFORMAT);
  ck_assert_ptr_nonnull(strstr(err, "not a valid GPT"));
  gpt_params_free(&p);
  gpt_free(m);
  TU_OK(ctx, rumus_ctx_free(ctx));
  gpt_text_free(&d.text);
}

START_TEST(gpt_save_load) {
  save_load(1);
  save_load(0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpt");
  TCase *host = tu_tcase("host");
  tcase_add_checked_fixture(host, tmp_setup, tmp_teardown);
  tcase_add_test(host, text_and_vocab);
  tcase_add_test(host, lr_schedule);
  tcase_add_test(host, gpt_options);
  tcase_add_test(host, gpt_table_and_init);
  suite_add_tcase(s, host);
  TCase *dev = tu_tcase("device");
  tcase_add_checked_fixture(dev, tmp_setup, tmp_teardown);
  tcase_add_test(dev, gpt_gradients);
  tcase_add_test(dev, gpt_learns);
  tcase_add_test(dev, gpt_deterministic);
  tcase_add_test(dev, gpt_mixed_precision);
  tcase_add_test(dev, gpt_save_load);
  suite_add_tcase(s, dev);
  return tu_run(s);
}
