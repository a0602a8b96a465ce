/*
 * options.h - the command line of rumus-train (see docs/TRAINING.md).
 */
#ifndef RUMUS_TRAIN_OPTIONS_H
#define RUMUS_TRAIN_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mlp.h"

#define TRAIN_DEFAULT_EPOCHS 5
#define TRAIN_DEFAULT_EPOCHS_CNN 10
#define TRAIN_DEFAULT_BATCH 128
#define TRAIN_DEFAULT_LR 1e-3f
#define TRAIN_DEFAULT_SEED 42u
#define TRAIN_MAX_HIDDEN (MLP_MAX_LAYERS - 1)

typedef enum {
  TRAIN_MODEL_MLP = 0,
  TRAIN_MODEL_CNN = 1,
  TRAIN_MODEL_GPT = 2 /* gpt_main.h: a separate driver */
} train_model_kind;

/* --preset of the GPT (train_gpt_defaults). */
typedef enum { TRAIN_PRESET_POCL = 0, TRAIN_PRESET_H200 = 1 } train_preset;

typedef struct {
  train_model_kind model; /* --model mlp|cnn */
  int model_given;   /* --model was on the command line */
  int epochs;        /* --epochs N (>= 1; default 5, 10 for the CNN) */
  int epochs_given;  /* --epochs was on the command line */
  size_t batch;      /* --batch-size N */
  float lr;          /* --lr X */
  int nhidden;       /* --hidden W,W,... ("" or "none": no hidden layer) */
  size_t hidden[TRAIN_MAX_HIDDEN];
  int hidden_given;  /* --hidden was on the command line */
  uint64_t seed;     /* --seed N */
  const char *device; /* --device SEL (NULL: rumus's default choice) */
  const char *data;   /* --data DIR (NULL: $RUMUS_FASHION_MNIST or default) */
  const char *save;   /* --save FILE */
  const char *load;   /* --load FILE */
  int eval_only;     /* --eval-only (needs --load) */
  int quiet;         /* --quiet: no progress display */
  int profile;       /* --profile: device time by kernel (profile.h) */
  int no_normalize;  /* --no-normalize: inputs pixel / 255 only */
  int constant_lr;   /* --constant-lr: no cosine decay of the rate */
  rumus_dtype precision; /* --precision f32|f16|bf16 */
  int mpi;           /* --mpi: data-parallel over the MPI ranks (dist.h) */
  long max_steps;    /* --max-steps N: stop after N steps (0: no limit) */
  int help;          /* --help */
  int batch_given, lr_given; /* --batch-size, --lr were given */
  /* --model gpt only (0 or unset: from the preset, train_gpt_defaults) */
  train_preset preset; /* --preset pocl|h200 */
  size_t layers, heads, width, context; /* --layers, --heads, --width, --context */
  size_t size_given[4]; /* the same four as given (0: not), for --load */
  long steps;          /* --steps N */
  long warmup;         /* --warmup N */
  int warmup_given;
  long eval_interval;  /* --eval-interval N */
  size_t eval_batches; /* --eval-batches N */
  size_t sample_len;   /* --sample-len N */
  int sample_len_given;
  float temperature;   /* --temperature X (0: greedy) */
  int temperature_given;
  uint64_t sample_seed; /* --sample-seed N */
  int sample_seed_given;
  int untied;          /* --untied */
  const char *gpt_flag; /* a GPT-only flag that was given (for the check) */
} train_opts;

/*! train_gpt_defaults() : fills the GPT's fields not given from the
 *  preset (and the batch size and learning rate if not given). */
void train_gpt_defaults(train_opts *o);

/*! train_opts_parse() : fills o from argv (the defaults for what is not
 *  given).  Both "--flag VALUE" and "--flag=VALUE" are accepted.
 *  @return 0 on success (check o->help), -1 on a bad command line with the
 *  reason in err. */
int train_opts_parse(int argc, char **argv, train_opts *o, char *err,
                     size_t errlen);

/*! train_usage() : prints the usage text to f. */
void train_usage(FILE *f);

#endif /* RUMUS_TRAIN_OPTIONS_H */
