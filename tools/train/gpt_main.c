/* gpt_main.c - see gpt_main.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "gpt_main.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "gpt.h"
#include "gpt_data.h"
#include "gpt_file.h"
#include "mnist.h"
#include "profile.h"

#define LN2 0.69314718055994531
/* The batch sampler's and the sampling's streams: the run's seeds, salted. */
#define GPT_BATCH_SALT 0x4750544241544348ull

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

float gpt_lr_at(float lr, long it, long warmup, long steps, int constant) {
  if (it < warmup) return lr * (float)(it + 1) / (float)(warmup + 1);
  if (constant || steps <= warmup) return lr;
  double min_lr = lr / 10.0, ratio = (double)(it - warmup) / (double)(steps - warmup);
  if (ratio > 1.0) ratio = 1.0;
  double coeff = 0.5 * (1.0 + cos(3.14159265358979323846 * ratio));
  return (float)(min_lr + coeff * (lr - min_lr));
}

typedef struct {
  train_opts *o;
  gpt_text text;
  gpt_vocab vocab;
  gpt_params params;
  rumus_ctx *ctx;
  gpt *m;
  rumus_adam_params adam;
  int32_t *x, *y;
  double entropy;
  double t_start, t_ready, t_train;
  double train_loss, val_loss; /* the last evaluation's */
  train_profile prof;          /* --profile */
  const char *dir;
  char err[2048];
} gpt_run;

static int finish(gpt_run *r, int code) {
  gpt_free(r->m);
  r->m = NULL;
  if (r->ctx && rumus_ctx_free(r->ctx) != RUMUS_OK && code == 0) code = 1;
  gpt_params_free(&r->params);
  train_profile_free(&r->prof);
  gpt_text_free(&r->text);
  free(r->x);
  free(r->y);
  return code;
}

static int fail(gpt_run *r, const char *what, const char *why) {
  fprintf(stderr, "rumus-train: %s: %s\n", what, why);
  return finish(r, 1);
}

/* ---- Setup ------------------------------------------------------------ */

static int can_write(const char *path, char *err, size_t errlen) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return train_fail(err, errlen, TRAIN_EIO, "%s: %s", tmp, strerror(errno));
  fclose(f);
  remove(tmp);
  return RUMUS_OK;
}

/* A loaded model has the size its file gives: a size flag given with
 * --load must agree with it rather than be ignored. */
static int check_loaded_size(const train_opts *o, const gpt_config *c,
                             char *err, size_t errlen) {
  static const char *const FLAG[4] = {"--layers", "--heads", "--width",
                                      "--context"};
  const size_t have[4] = {c->layers, c->heads, c->width, c->context};
  for (int k = 0; k < 4; k++)
    if (o->size_given[k] && o->size_given[k] != have[k])
      return train_fail(err, errlen, RUMUS_EINVAL,
                        "%s %zu: the model in %s has %zu", FLAG[k],
                        o->size_given[k], o->load, have[k]);
  return RUMUS_OK;
}

/* The text, the vocabulary and the host parameters (loaded or new). */
static int load_inputs(gpt_run *r) {
  train_opts *o = r->o;
  r->dir = o->data ? o->data : GPT_DEFAULT_DIR;
  int st = gpt_text_load(r->dir, &r->text, r->err, sizeof r->err);
  if (st != RUMUS_OK) return st;
  if (o->load) {
    st = gpt_ckpt_load(o->load, &r->params, &r->vocab, r->err, sizeof r->err);
    if (st != RUMUS_OK) return st;
    st = check_loaded_size(o, &r->params.cfg, r->err, sizeof r->err);
    if (st != RUMUS_OK) return st;
  } else {
    gpt_vocab_build(&r->vocab, r->text.text, r->text.len);
    gpt_config c = {r->vocab.n, o->layers, o->heads, o->width, o->context, !o->untied};
    st = gpt_config_check(&c, r->err, sizeof r->err);
    if (st == RUMUS_OK && (st = gpt_params_alloc(&r->params, &c)) != RUMUS_OK)
      train_fail(r->err, sizeof r->err, st, "out of memory for the parameters");
    if (st != RUMUS_OK) return st;
    gpt_params_init(&r->params, o->seed);
  }
  st = gpt_text_encode(&r->text, &r->vocab, r->params.cfg.context, r->err, sizeof r->err);
  if (st != RUMUS_OK) return st;
  r->entropy = gpt_unigram_entropy(r->text.tok, r->text.len, r->vocab.n);
  size_t n = o->batch * r->params.cfg.context;
  r->x = malloc(n * sizeof *r->x);
  r->y = malloc(n * sizeof *r->y);
  if (!r->x || !r->y) return train_fail(r->err, sizeof r->err, RUMUS_ENOMEM, "out of memory");
  return RUMUS_OK;
}

/* Context, model, kernels, and one warm-up step (then the parameters
 * again, so that the run starts from them with fresh moments). */
static int prepare_device(gpt_run *r) {
  train_opts *o = r->o;
  int st = rumus_ctx_create(&r->ctx, o->device, o->profile ? RUMUS_CTX_PROFILING : 0);
  if (st != RUMUS_OK)
    return train_fail(r->err, sizeof r->err, st, "cannot create an OpenCL context: %s: %s",
                      rumus_err_name(st), rumus_last_create_error());
  /* nanoGPT's shakespeare_char recipe: betas (0.9, 0.99), weight decay 0.1. */
  r->adam = (rumus_adam_params){o->lr, 0.9f, 0.99f, 1e-8f, 0.1f, 1};
  st = gpt_create(r->ctx, &r->params.cfg, o->batch, &r->adam, o->precision, &r->m, r->err,
                  sizeof r->err);
  if (st == RUMUS_OK && (st = gpt_set_params(r->m, &r->params)) != RUMUS_OK)
    train_fail(r->err, sizeof r->err, st, "%s", gpt_errmsg(r->m));
  /* The warm-up step builds the programs training uses (not
   * rumus_cache_fill(): every family's programs, most never called here,
   * took NVIDIA's compiler over a minute on the H200). */
  if (st != RUMUS_OK || o->eval_only) return st;
  gpt_batch_random(r->text.tok, r->text.ntrain, r->params.cfg.context, o->batch,
                   &(mlp_rng){1}, r->x, r->y);
  st = gpt_train_step(r->m, r->x, r->y, 1e-9f, 1.0f, NULL, NULL);
  if (st == RUMUS_OK) st = gpt_set_params(r->m, &r->params);
  if (st != RUMUS_OK) train_fail(r->err, sizeof r->err, st, "warm-up step: %s", gpt_errmsg(r->m));
  return st;
}

static void print_header(const gpt_run *r) {
  const train_opts *o = r->o;
  const gpt_config *c = &r->params.cfg;
  printf("rumus-train %s\n", rumus_version_string());
  printf("device : %s\n", rumus_ctx_device_name(r->ctx));
  printf("data   : %s (%zu files, %zu bytes: %zu training, %zu validation)\n", r->dir,
         r->text.nfiles, r->text.len, r->text.ntrain, r->text.len - r->text.ntrain);
  printf("vocab  : %zu distinct bytes; unigram entropy %.4f nats = %.4f bits/char\n",
         r->vocab.n, r->entropy, r->entropy / LN2);
  printf("model  : GPT, %zu layers, %zu heads, width %zu, context %zu, %s output, "
         "%zu parameters, %s\n",
         c->layers, c->heads, c->width, c->context, c->tied ? "tied" : "untied",
         gpt_param_count(c), o->load ? o->load : "nanoGPT initialisation");
  if (!o->eval_only) {
    printf("train  : %ld steps, batch %zu x %zu tokens, seed %llu\n", o->steps, o->batch,
           c->context, (unsigned long long)o->seed);
    printf("optim  : AdamW lr %g, %ld warm-up steps, %s, betas (0.9, 0.99), "
           "weight decay 0.1 on matrices, gradient clip 1.0\n",
           (double)o->lr, o->warmup, o->constant_lr ? "then constant" : "cosine to lr/10");
    if (o->precision == RUMUS_F32)
      printf("storage: f32\n");
    else
      printf("storage: %s activations and weight copies, F32 master weights and "
             "gradients%s\n", rumus_dtype_name(o->precision),
             o->precision == RUMUS_F16 ? ", dynamic loss scaling from 65536" : "");
  }
  printf("setup  : %.2f s\n", r->t_ready - r->t_start);
  fflush(stdout);
}

/* ---- Evaluation and progress ------------------------------------------ */

/* Mean loss over the eval batches of tokens [lo, hi). */
static int eval_split(gpt_run *r, size_t lo, size_t hi, double *out) {
  const train_opts *o = r->o;
  size_t T = r->params.cfg.context, count = o->eval_batches * o->batch;
  double sum = 0.0;
  for (size_t b = 0; b < o->eval_batches; b++) {
    gpt_batch_fixed(r->text.tok + lo, hi - lo, T, o->batch, b * o->batch, count, r->x, r->y);
    double loss;
    int st = gpt_loss(r->m, r->x, r->y, &loss);
    if (st != RUMUS_OK) return st;
    sum += loss;
  }
  *out = sum / (double)o->eval_batches;
  return RUMUS_OK;
}

static int evaluate(gpt_run *r) {
  int st = eval_split(r, 0, r->text.ntrain, &r->train_loss);
  if (st == RUMUS_OK) st = eval_split(r, r->text.ntrain, r->text.len, &r->val_loss);
  return st;
}

static void print_eval(const gpt_run *r, const char *head, double secs) {
  printf("%s: train %.4f nats (%.3f bits/char) | val %.4f nats (%.3f bits/char) | "
         "%.1f s\n",
         head, r->train_loss, r->train_loss / LN2, r->val_loss, r->val_loss / LN2, secs);
  fflush(stdout);
}

typedef struct {
  int tty, quiet, drawn;
  double t0, last;
  long next_line;
} gpt_progress;

static void progress(gpt_progress *g, long step, long steps, double loss, float lr,
                     size_t tokens) {
  if (g->quiet) return;
  double t = now_s(), rate = (double)tokens * step / (t - g->t0 > 0 ? t - g->t0 : 1);
  if (g->tty) {
    if (step != steps && t - g->last < 0.1) return;
    g->last = t;
    char bar[21];
    long fill = step * 20 / steps;
    for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
    bar[20] = '\0';
    printf("\r\033[Kstep %ld/%ld [%s] loss %.4f lr %.2e %.0f tok/s", step, steps, bar, loss,
           (double)lr, rate);
    fflush(stdout);
    g->drawn = 1;
    return;
  }
  if (step < g->next_line && step != steps) return;
  printf("step %ld/%ld (%3.0f%%) loss %.4f lr %.2e %.0f tok/s\n", step, steps,
         100.0 * (double)step / (double)steps, loss, (double)lr, rate);
  fflush(stdout);
  long tenth = steps / 10 ? steps / 10 : 1;
  g->next_line = (step / tenth + 1) * tenth;
}

static void progress_clear(gpt_progress *g) {
  if (g->tty && g->drawn) printf("\r\033[K");
  g->drawn = 0;
}

/* ---- Training and sampling -------------------------------------------- */

/* --profile: the steps' launches since the last evaluation. */
static int profile_steps(gpt_run *r) {
  int st = train_profile_take(r->ctx, &r->prof);
  return st == RUMUS_OK ? st : train_fail(r->err, sizeof r->err, st, "--profile: %s",
                                          rumus_ctx_errmsg(r->ctx));
}

static int train(gpt_run *r) {
  train_opts *o = r->o;
  size_t T = r->params.cfg.context;
  mlp_rng rng;
  mlp_rng_seed(&rng, o->seed ^ GPT_BATCH_SALT);
  gpt_progress g = {isatty(STDOUT_FILENO), o->quiet, 0, now_s(), 0.0, 0};
  double t_eval = 0.0;
  int st = o->profile ? train_profile_skip(r->ctx) : RUMUS_OK;
  if (st != RUMUS_OK) return train_fail(r->err, sizeof r->err, st, "%s", rumus_ctx_errmsg(r->ctx));
  for (long it = 0; it < o->steps; it++) {
    float lr = gpt_lr_at(o->lr, it, o->warmup, o->steps, o->constant_lr);
    gpt_batch_random(r->text.tok, r->text.ntrain, T, o->batch, &rng, r->x, r->y);
    double loss;
    st = gpt_train_step(r->m, r->x, r->y, lr, 1.0f, &loss, NULL);
    if (st != RUMUS_OK) return train_fail(r->err, sizeof r->err, st, "%s", gpt_errmsg(r->m));
    progress(&g, it + 1, o->steps, loss, lr, o->batch * T);
    if ((it + 1) % o->eval_interval == 0 || it + 1 == o->steps) {
      progress_clear(&g);
      if (o->profile && (st = profile_steps(r)) != RUMUS_OK) return st;
      double t1 = now_s();
      if ((st = evaluate(r)) != RUMUS_OK)
        return train_fail(r->err, sizeof r->err, st, "%s", gpt_errmsg(r->m));
      if (o->profile && (st = train_profile_skip(r->ctx)) != RUMUS_OK)
        return train_fail(r->err, sizeof r->err, st, "%s", rumus_ctx_errmsg(r->ctx));
      t_eval += now_s() - t1;
      char head[64];
      snprintf(head, sizeof head, "step %ld/%ld", it + 1, o->steps);
      print_eval(r, head, now_s() - g.t0);
    }
  }
  r->t_train = now_s() - g.t0 - t_eval;
  return RUMUS_OK;
}

/* The next token from logits [V] at temperature (0: the first largest). */
static int32_t sample_token(float *logits, size_t V, float temperature, mlp_rng *rng) {
  size_t best = 0;
  for (size_t i = 1; i < V; i++)
    if (logits[i] > logits[best]) best = i;
  if (temperature <= 0.0f) return (int32_t)best;
  double sum = 0.0, top = logits[best];
  for (size_t i = 0; i < V; i++)
    sum += (logits[i] = (float)exp((logits[i] - top) / temperature));
  double u = (double)(mlp_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
  for (size_t i = 0; i < V; i++) {
    if (u < logits[i]) return (int32_t)i;
    u -= logits[i];
  }
  return (int32_t)best;
}

/* sample_len bytes after a newline (or token 0 if the text has none). */
static int generate(gpt_run *r) {
  const train_opts *o = r->o;
  size_t T = r->params.cfg.context, V = r->vocab.n, len = o->sample_len;
  int32_t *seq = calloc(len + 1, sizeof *seq), *win = calloc(T, sizeof *win);
  float *logits = malloc(V * sizeof *logits);
  int st = seq && win && logits ? RUMUS_OK : RUMUS_ENOMEM;
  mlp_rng rng;
  mlp_rng_seed(&rng, o->sample_seed);
  seq[0] = r->vocab.id['\n'] >= 0 ? r->vocab.id['\n'] : 0;
  printf("sample (%zu bytes, temperature %g, seed %llu):\n", len, (double)o->temperature,
         (unsigned long long)o->sample_seed);
  for (size_t n = 1; st == RUMUS_OK && n <= len; n++) {
    size_t start = n > T ? n - T : 0, have = n - start;
    memcpy(win, seq + start, have * sizeof *win);
    st = gpt_logits(r->m, win, have - 1, logits);
    if (st != RUMUS_OK) break;
    seq[n] = sample_token(logits, V, o->temperature, &rng);
    putchar(r->vocab.byte[seq[n]]);
  }
  printf("\n");
  fflush(stdout);
  if (st != RUMUS_OK)
    train_fail(r->err, sizeof r->err, st, "sampling: %s",
               seq && win && logits ? gpt_errmsg(r->m) : "out of memory");
  free(seq);
  free(win);
  free(logits);
  return st;
}

static int save(gpt_run *r) {
  const train_opts *o = r->o;
  int st = gpt_get_params(r->m, &r->params);
  if (st != RUMUS_OK)
    return train_fail(r->err, sizeof r->err, st, "%s", gpt_errmsg(r->m));
  char lr[32], steps[32], batch[32], warm[32];
  snprintf(lr, sizeof lr, "%g", (double)o->lr);
  snprintf(steps, sizeof steps, "%ld", o->steps);
  snprintf(batch, sizeof batch, "%zu", o->batch);
  snprintf(warm, sizeof warm, "%ld", o->warmup);
  const char *extra[] = {"rumus.lr", lr, "rumus.steps", steps, "rumus.batch_size", batch,
                         "rumus.warmup", warm, "rumus.optimizer",
                         "AdamW betas (0.9, 0.99) weight_decay 0.1 clip 1.0"};
  return gpt_ckpt_save(o->save, &r->params, &r->vocab, extra, 5, r->err, sizeof r->err);
}

int gpt_main(train_opts *o) {
  gpt_run r;
  memset(&r, 0, sizeof r);
  r.o = o;
  train_gpt_defaults(o);
  r.t_start = now_s();
  if (o->save && can_write(o->save, r.err, sizeof r.err) != RUMUS_OK)
    return fail(&r, "cannot save the model", r.err);
  if (load_inputs(&r) != RUMUS_OK) return fail(&r, "cannot read the data or model", r.err);
  if (prepare_device(&r) != RUMUS_OK) return fail(&r, "cannot prepare the device", r.err);
  r.t_ready = now_s();
  print_header(&r);
  if (o->eval_only) {
    double t0 = now_s();
    if (evaluate(&r) != RUMUS_OK) return fail(&r, "evaluation failed", gpt_errmsg(r.m));
    print_eval(&r, "loss", now_s() - t0);
  } else if (train(&r) != RUMUS_OK) {
    return fail(&r, "training failed", r.err);
  }
  if (o->sample_len && generate(&r) != RUMUS_OK) return fail(&r, "generation failed", r.err);
  if (o->save) {
    if (save(&r) != RUMUS_OK) return fail(&r, "cannot save the model", r.err);
    printf("saved  : %s\n", o->save);
  }
  if (!o->eval_only)
    printf("summary: %ld steps in %.1f s of training (%.0f tokens/s), %.1f s in all; "
           "final val loss %.4f nats (%.3f bits/char) against a unigram entropy of "
           "%.4f nats (%.3f bits/char)\n",
           o->steps, r.t_train, (double)o->steps * o->batch * r.params.cfg.context / r.t_train,
           now_s() - r.t_start, r.val_loss, r.val_loss / LN2, r.entropy, r.entropy / LN2);
  if (!o->eval_only && o->profile) train_profile_print(&r.prof, o->steps, 25, stdout);
  if (!o->eval_only && o->precision == RUMUS_F16)
    printf("         loss scale %g, %ld of %ld steps skipped for overflow\n",
           (double)gpt_loss_scale(r.m), gpt_skipped_steps(r.m), o->steps);
  return finish(&r, 0);
}
