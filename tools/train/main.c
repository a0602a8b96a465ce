/*
 * rumus-train - trains an MLP (default 784-256-128-10, ReLU) or, with
 * --model cnn, a small CNN (cnn.h) on Fashion-MNIST with cross-entropy and
 * AdamW, every forward, backward and optimizer step on the OpenCL device,
 * and reports accuracy and time; with --model gpt, a character-level GPT
 * on text (gpt_main.h).
 * See docs/TRAINING.md for the flags, the output and the model file.
 *
 * Exit status: 0 success, 1 a run-time error (data, device, file), 2 a bad
 * command line.  With --mpi, under mpirun, the ranks train one model
 * data-parallel (dist.h); rank 0 alone prints and saves.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "dist.h"
#include "gpt_file.h"
#include "gpt_main.h"
#include "mnist.h"
#include "model.h"
#include "options.h"
#include "profile.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- Progress display ------------------------------------------------- */

typedef struct {
  int tty, quiet;
  int epoch, epochs;
  double t0, last_draw;
  size_t next_line; /* non-terminal: the step of the next plain line */
  int drawn;        /* a bar is on the screen */
} progress;

/* The terminal's width, 80 if unknown. */
static int terminal_columns(void) {
#ifdef TIOCGWINSZ
  struct winsize ws;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
    return ws.ws_col;
#endif
  return 80;
}

static void progress_cb(void *user, const mlp_progress *p) {
  progress *g = user;
  if (g->quiet) return;
  double t = now_s(), dt = t - g->t0;
  double rate = dt > 0 ? (double)p->seen / dt : 0.0;
  double loss = p->seen ? p->loss_sum / (double)p->seen : 0.0;
  double acc = p->seen ? 100.0 * (double)p->correct / (double)p->seen : 0.0;
  int last = p->step == p->nsteps;
  if (g->tty) {
    if (!last && t - g->last_draw < 0.1) return;
    g->last_draw = t;
    /* The bar takes what the text leaves of the line, so that the line
     * never wraps (a wrapped line cannot be redrawn with \r). */
    char head[64], tail[128], widest[128], bar[41];
    snprintf(head, sizeof head, "epoch %d/%d", g->epoch, g->epochs);
    snprintf(tail, sizeof tail, "%zu/%zu loss %.4f acc %.2f%% %.0f samples/s",
             p->step, p->nsteps, loss, acc, rate);
    /* The bar's width comes from the widest tail, so it does not jitter. */
    snprintf(widest, sizeof widest, "%zu/%zu loss %.4f acc %.2f%% %.0f samples/s",
             p->nsteps, p->nsteps, 99.9999, 100.0, 9999999.0);
    int room = terminal_columns() - 1 - (int)strlen(head) - (int)strlen(widest) - 4;
    if (room > 40) room = 40;
    if (room >= 5) {
      size_t w = (size_t)room, fill = p->nsteps ? p->step * w / p->nsteps : w;
      for (size_t i = 0; i < w; i++) bar[i] = i < fill ? '#' : '.';
      bar[w] = '\0';
      printf("\r\033[K%s [%s] %s", head, bar, tail);
    } else {
      printf("\r\033[K%s %s", head, tail);
    }
    fflush(stdout);
    g->drawn = 1;
    return;
  }
  if (p->step < g->next_line && !last) return;
  printf("epoch %d/%d batch %zu/%zu (%3.0f%%) loss %.4f acc %.2f%% %.0f samples/s\n",
         g->epoch, g->epochs, p->step, p->nsteps,
         100.0 * (double)p->step / (double)p->nsteps, loss, acc, rate);
  fflush(stdout);
  size_t tenth = p->nsteps / 10 ? p->nsteps / 10 : 1;
  g->next_line = (p->step / tenth + 1) * tenth;
}

static void progress_clear(progress *g) {
  if (g->tty && g->drawn) {
    printf("\r\033[K");
    fflush(stdout);
  }
  g->drawn = 0;
}

/* ---- Main ------------------------------------------------------------- */

typedef struct {
  mnist_set train, test;
  train_model model;
  rumus_ctx *ctx;
  train_opts o;
  rumus_adam_params adam;
  const char *dir, *device;
  double t_start, t_data, t_ready; /* start, data read, ready to train */
  double train_time, eval_time;    /* summed over the epochs */
  size_t correct;                  /* the last test pass's */
  train_dist dist;                 /* the MPI ranks (one without --mpi) */
  size_t batch;                    /* the global batch (o.batch: a rank's) */
  long steps_left;                 /* --max-steps countdown, -1: none */
  int epochs_run;
  size_t trained;                  /* samples trained on, every rank's */
  train_profile prof;              /* --profile */
} run_state;

static int cleanup(run_state *r, int code) {
  /* The device tensors go before their context. */
  mlp_free(r->model.mlp);
  cnn_free(r->model.cnn);
  r->model.mlp = NULL;
  r->model.cnn = NULL;
  train_profile_free(&r->prof);
  if (r->ctx) {
    int st = rumus_ctx_free(r->ctx);
    if (st != RUMUS_OK) {
      fprintf(stderr, "rumus-train: rumus_ctx_free: %s: %s\n",
              rumus_err_name(st), rumus_ctx_errmsg(r->ctx));
      if (code == 0) code = 1;
    }
  }
  model_free(&r->model);
  mnist_free(&r->train);
  mnist_free(&r->test);
  dist_finalize(&r->dist);
  return code;
}

static int model_error(run_state *r, const char *what) {
  dist_print_error(&r->dist, what, model_errmsg(&r->model));
  return cleanup(r, 1);
}

/* Fails now, not after the training, if the model cannot be saved. */
static int check_save_path(const char *save) {
  size_t len = strlen(save) + 5;
  char *tmp = malloc(len);
  if (!tmp) {
    fprintf(stderr, "rumus-train: out of memory\n");
    return 1;
  }
  snprintf(tmp, len, "%s.tmp", save);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    fprintf(stderr, "rumus-train: cannot save the model: %s: %s\n", tmp,
            strerror(errno));
    free(tmp);
    return 1;
  }
  fclose(f);
  remove(tmp);
  free(tmp);
  return 0;
}

/* The data (the test set always, the training set unless evaluating) and
 * the host parameters (from a file, or initialised from the seed). */
static int load_inputs(run_state *r) {
  char err[2048];
  r->dir = mnist_data_dir(r->o.data);
  int st = mnist_load(r->dir, "t10k", 0, &r->test, err, sizeof err);
  if (st == RUMUS_OK && !r->o.eval_only)
    st = mnist_load(r->dir, "train", 0, &r->train, err, sizeof err);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-train: cannot read Fashion-MNIST (%s): %s\n",
            train_err_name(st), err);
    return 1;
  }
  r->t_data = now_s();
  st = model_params(&r->model, &r->o, &r->train, err, sizeof err);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-train: %s\n", err);
    return 1;
  }
  /* A CNN chosen by its --load file gets the CNN's default epochs too. */
  if (r->model.kind == TRAIN_MODEL_CNN && !r->o.epochs_given)
    r->o.epochs = TRAIN_DEFAULT_EPOCHS_CNN;
  return 0;
}

/* The context, the device model, every kernel built and (for training)
 * one warm-up step. */
static int prepare_device(run_state *r) {
  char err[2048];
  const train_opts *o = &r->o;
  char devbuf[32];
  const char *dev = dist_device(&r->dist, o->device, devbuf, sizeof devbuf);
  int st = rumus_ctx_create(&r->ctx, dev, o->profile ? RUMUS_CTX_PROFILING : 0);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-train: cannot create an OpenCL context%s%s%s: %s: %s\n",
            dev ? " on '" : "", dev ? dev : "",
            dev ? "'" : "", rumus_err_name(st), rumus_last_create_error());
    return 1;
  }
  r->adam = (rumus_adam_params)MLP_ADAMW_DEFAULTS;
  r->adam.lr = o->lr;
  st = model_create(&r->model, r->ctx, o, &r->adam, err, sizeof err);
  if (st != RUMUS_OK) {
    fprintf(stderr, "rumus-train: cannot create the model: %s\n", err);
    return 1;
  }
  if (dist_bind(&r->dist, &r->model, r->ctx, r->train.count, r->batch, err,
                sizeof err) != RUMUS_OK) {
    fprintf(stderr, "rumus-train: %s\n", err);
    return 1;
  }
  /* One step of a scratch copy of the model on a zero batch builds the
   * programs training uses (and PoCL's work-group functions, compiled at
   * a kernel's first launch), so that epoch 1 is timed like the others.
   * Not rumus_cache_fill(): every family's programs took NVIDIA's
   * compiler over a minute on the H200, most of them for ops the model
   * never calls. */
  if (!o->eval_only &&
      model_warm_up(&r->model, r->ctx, o, &r->adam, err, sizeof err) != RUMUS_OK) {
    fprintf(stderr, "rumus-train: warm-up step failed: %s\n", err);
    return 1;
  }
  r->device = rumus_ctx_device_name(r->ctx);
  r->t_ready = now_s();
  return 0;
}

static void print_header(const run_state *r) {
  const train_opts *o = &r->o;
  char shape_str[512];
  model_describe(&r->model, shape_str, sizeof shape_str);
  printf("rumus-train %s\n", rumus_version_string());
  printf("device : %s\n", r->device);
  printf("data   : %s (%zu training, %zu test images)\n", r->dir, r->train.count,
         r->test.count);
  float in_mean = model_in_mean(&r->model), in_std = model_in_std(&r->model);
  if (in_mean == 0.0f && in_std == 1.0f)
    printf("inputs : pixel / 255, in [0, 1]\n");
  else
    printf("inputs : (pixel / 255 - %.4f) / %.4f (%s)\n", (double)in_mean,
           (double)in_std,
           o->load ? "stored in the model file" : "the training set's mean and std");
  printf("model  : %s, %zu parameters, %s\n", shape_str,
         model_param_count(&r->model),
         o->load ? o->load
                 : r->model.kind == TRAIN_MODEL_CNN ? "PyTorch's default initialisation"
                                                    : "nn.Linear initialisation");
  if (!o->eval_only) {
    const rumus_adam_params *adam = &r->adam;
    printf("train  : %d epoch%s, batch %zu (last batch of an epoch kept), seed %llu\n",
           o->epochs, o->epochs == 1 ? "" : "s", r->batch, (unsigned long long)o->seed);
    if (o->max_steps)
      printf("steps  : stopping after %ld\n", o->max_steps);
    printf("optim  : AdamW lr %g%s, betas (%g, %g), eps %g, weight decay %g\n",
           (double)adam->lr, o->constant_lr ? " (constant)" : " with cosine decay to 0",
           (double)adam->beta1, (double)adam->beta2,
           (double)adam->eps, (double)adam->weight_decay);
    if (o->precision == RUMUS_F32)
      printf("storage: f32\n");
    else
      printf("storage: %s, F32 master weights%s\n",
             rumus_dtype_name(o->precision),
             o->precision == RUMUS_F16 ? ", dynamic loss scaling from 65536" : "");
  }
  if (r->dist.active)
    printf("mpi    : %d rank%s (%d on this node), up to %zu rows of each batch per "
           "rank, gradients averaged with MPI_Allreduce\n",
           r->dist.size, r->dist.size == 1 ? "" : "s", r->dist.local_size, o->batch);
  printf("setup  : %.2f s (reading data %.2f s, device, kernels and a warm-up "
         "step %.2f s)\n",
         r->t_ready - r->t_start, r->t_data - r->t_start, r->t_ready - r->t_data);
  fflush(stdout);
}

/* --eval-only: one test pass. */
static int evaluate_only(run_state *r) {
  double t0 = now_s();
  if (dist_evaluate(&r->dist, &r->model, &r->test, &r->correct) != RUMUS_OK)
    return model_error(r, "evaluation failed");
  double t1 = now_s();
  printf("test accuracy: %.2f%% (%zu/%zu) in %.2f s on %s\n",
         100.0 * (double)r->correct / (double)r->test.count, r->correct,
         r->test.count, t1 - t0, r->device);
  return cleanup(r, 0);
}

/* Every epoch and its test pass, with the progress display; 0, or the
 * exit code after cleanup on a failure. */
static int train_epochs(run_state *r) {
  const train_opts *o = &r->o;
  mlp_rng shuffle;
  mlp_rng_seed(&shuffle, o->seed ^ MLP_SHUFFLE_SALT);
  /* Cosine decay over every step of the run: with PyTorch's AdamW defaults
   * it gains about half a point of test accuracy in 5 epochs. */
  if (!o->constant_lr)
    model_set_lr_decay(&r->model, (long)o->epochs *
                                      (long)((r->train.count + r->batch - 1) / r->batch));
  progress g = {0};
  g.tty = isatty(STDOUT_FILENO);
  g.quiet = o->quiet;
  g.epochs = o->epochs;
  for (int e = 1; e <= o->epochs; e++) {
    g.epoch = e;
    g.t0 = now_s();
    g.last_draw = 0.0;
    g.next_line = 0;
    mlp_progress p;
    if (o->profile && train_profile_skip(r->ctx) != RUMUS_OK)
      return model_error(r, "--profile");
    /* The sharded loop for MPI ranks and --max-steps (on one rank it
     * takes the same batches as model_train_epoch()). */
    int st = r->dist.active || o->max_steps
                 ? dist_train_epoch(&r->dist, &r->model, &r->train, r->batch, &shuffle,
                                    &r->steps_left, progress_cb, &g, &p)
                 : model_train_epoch(&r->model, &r->train, &shuffle, progress_cb, &g, &p);
    progress_clear(&g);
    if (st != RUMUS_OK) return model_error(r, "training failed");
    if (o->profile && train_profile_take(r->ctx, &r->prof) != RUMUS_OK)
      return model_error(r, "--profile");
    double t1 = now_s();
    if (dist_evaluate(&r->dist, &r->model, &r->test, &r->correct) != RUMUS_OK)
      return model_error(r, "evaluation failed");
    double t2 = now_s();
    r->train_time += t1 - g.t0;
    r->eval_time += t2 - t1;
    printf("epoch %d/%d: train loss %.4f acc %.2f%% | test acc %.2f%% | "
           "%.2f s (test %.2f s)\n",
           e, o->epochs, p.loss_sum / (double)p.seen,
           100.0 * (double)p.correct / (double)p.seen,
           100.0 * (double)r->correct / (double)r->test.count, t1 - g.t0, t2 - t1);
    fflush(stdout);
    r->epochs_run = e;
    r->trained += p.seen;
    if (r->steps_left == 0) break;
  }
  return 0;
}

static void print_summary(const run_state *r) {
  const train_opts *o = &r->o;
  double t_end = now_s();
  int epochs = r->epochs_run;
  printf("summary: %d epoch%s in %.2f s total (setup %.2f s)\n", epochs,
         epochs == 1 ? "" : "s", t_end - r->t_start, r->t_ready - r->t_start);
  printf("         per epoch %.2f s training (%.0f samples/s) + %.2f s test pass\n",
         r->train_time / epochs, (double)r->trained / r->train_time,
         r->eval_time / epochs);
  if (r->dist.size > 1)
    printf("         gradient exchange %.2f s per epoch on rank 0 (download, "
           "MPI_Allreduce with its wait for the other ranks, upload)\n",
           r->dist.exchange_s / epochs);
  printf("         final test accuracy %.2f%% (%zu/%zu)\n",
         100.0 * (double)r->correct / (double)r->test.count, r->correct,
         r->test.count);
  if (o->precision == RUMUS_F16)
    printf("         loss scale %g, %ld of %ld steps skipped for overflow\n",
           (double)model_loss_scale(&r->model), model_skipped_steps(&r->model),
           model_steps(&r->model));
  printf("         device %s\n", r->device);
  if (o->profile) train_profile_print(&r->prof, model_steps(&r->model), 25, stdout);
}

/* After training: the ranks' batch-norm statistics averaged, a check that
 * every rank holds the same parameters, the model saved by rank 0. */
static int finish(run_state *r) {
  int same = 1;
  if (dist_sync_buffers(&r->dist, &r->model) != RUMUS_OK && r->dist.failed_rank >= 0)
    return model_error(r, "averaging the batch-norm statistics failed");
  if (dist_same_replicas(&r->dist, &r->model, &same) != RUMUS_OK)
    return model_error(r, "comparing the ranks' parameters failed");
  if (r->dist.size > 1 && same)
    printf("ranks  : the %d ranks hold the same parameters, bit for bit\n",
           r->dist.size);
  else if (!same && r->dist.rank == 0)
    fprintf(stderr, "rumus-train: warning: the ranks' parameters differ "
            "(rank 0's are saved)\n");
  char err[2048];
  int bad = 0;
  if (r->o.save && r->dist.rank == 0) {
    bad = model_save(&r->model, r->o.save, err, sizeof err) != RUMUS_OK;
    if (bad)
      fprintf(stderr, "rumus-train: %s\n", err);
    else
      printf("saved  : %s\n", r->o.save);
  }
  if (dist_agree(&r->dist, bad, "saving the model") != 0) return cleanup(r, 1);
  print_summary(r);
  return cleanup(r, 0);
}

int main(int argc, char **argv) {
  run_state r;
  memset(&r, 0, sizeof r);
  char err[2048];
  if (train_opts_parse(argc, argv, &r.o, err, sizeof err) != 0) {
    fprintf(stderr, "rumus-train: %s\n", err);
    train_usage(stderr);
    return 2;
  }
  if (r.o.help) {
    train_usage(stdout);
    return 0;
  }
  /* The GPT has a driver of its own (gpt_main.c); a GPT file given to
   * --load selects it without --model. */
  if (r.o.model == TRAIN_MODEL_GPT ||
      (r.o.load && !r.o.model_given && gpt_file_is_gpt(r.o.load))) {
    if (r.o.mpi) {
      fprintf(stderr, "rumus-train: --mpi trains the MLP and the CNN, not "
                      "the GPT\n");
      return 1;
    }
    return gpt_main(&r.o);
  }
  if (dist_init(&r.dist, r.o.mpi, &argc, &argv, err, sizeof err) != 0) {
    fprintf(stderr, "rumus-train: %s\n", err);
    return 1;
  }
  r.batch = r.o.batch;
  r.o.batch = dist_local_batch(&r.dist, r.batch);
  r.steps_left = r.o.max_steps > 0 ? r.o.max_steps : -1;
  /* Rank 0 alone prints progress and results; errors go to every rank's
   * standard error. */
  if (r.dist.rank != 0) {
    r.o.quiet = 1;
    FILE *null = freopen("/dev/null", "w", stdout);
    (void)null; /* if it fails, the rank prints what rank 0 does */
  }
  r.t_start = now_s();
  int bad = r.dist.rank == 0 && r.o.save && check_save_path(r.o.save) != 0;
  if (!bad) bad = load_inputs(&r) != 0;
  if (!bad) bad = prepare_device(&r) != 0;
  if (dist_agree(&r.dist, bad, "during setup") != 0) return cleanup(&r, 1);
  print_header(&r);
  if (r.o.eval_only) return evaluate_only(&r);
  int code = train_epochs(&r);
  if (code != 0) return code;
  return finish(&r);
}
