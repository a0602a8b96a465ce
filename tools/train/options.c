/* options.c - see options.h. */
#include "options.h"

#include "gpt_data.h" /* GPT_DEFAULT_DIR */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void train_usage(FILE *f) {
  fprintf(f,
          "usage: rumus-train [OPTIONS]\n"
          "Trains an MLP or a CNN on Fashion-MNIST, or a GPT on text, on an OpenCL\n"
          "device with rumus.\n"
          "\n"
          "  --model M         mlp (default) or cnn: conv-bn-relu-pool x2,\n"
          "                    dropout, fc 128, dropout, fc 10; or gpt: a\n"
          "                    character-level GPT on Debian's fortunes (the\n"
          "                    GPT flags below)\n"
          "  --epochs N        training epochs (default %d, %d for the CNN)\n"
          "  --batch-size N    rows per batch (default %d)\n"
          "  --lr X            AdamW learning rate (default 0.001), decayed to\n"
          "                    0 over the run along a cosine\n"
          "  --constant-lr     keep the learning rate constant\n"
          "  --precision P     f32 (default), or f16 / bf16: mixed precision\n"
          "                    with F32 master weights (f16 with dynamic loss\n"
          "                    scaling)\n"
          "  --hidden W,W,...  the MLP's hidden layer widths (default 256,128;\n"
          "                    \"none\" for no hidden layer)\n"
          "  --seed N          seed of the initialisation and the shuffling\n"
          "                    (default %u)\n"
          "  --device SEL      OpenCL device: index or name substring (default:\n"
          "                    $RUMUS_DEVICE, else the first GPU, else the first\n"
          "                    device)\n"
          "  --data DIR        directory of the gzip IDX files (default:\n"
          "                    $%s, else %s)\n"
          "  --save FILE       write the trained model to FILE (safetensors)\n"
          "  --load FILE       start from the model in FILE (safetensors, or an\n"
          "                    earlier rumus model file)\n"
          "  --eval-only       with --load: only print the test accuracy\n"
          "  --no-normalize    inputs pixel/255 in [0,1], without subtracting\n"
          "                    the training set's mean and dividing by its\n"
          "                    std (a new model only; a loaded model keeps\n"
          "                    the transform stored in its file)\n"
          "  --mpi             data-parallel training over the MPI ranks of\n"
          "                    mpirun (each takes its shard of every batch;\n"
          "                    gradients averaged with MPI_Allreduce)%s\n"
          "  --max-steps N     stop after N training steps (in all)\n"
          "  --quiet           no progress display (epoch results and the\n"
          "                    summary are still printed)\n"
          "  --profile         at the end, the device time of the training\n"
          "                    steps by kernel (a profiling queue: the run\n"
          "                    itself is a little slower)\n"
          "  --help            this text\n"
          "GPT (--model gpt; defaults from --preset):\n"
          "  --preset P        pocl (default: 2 layers, 4 heads, width 128,\n"
          "                    context 64, batch 32, 5000 steps, lr 0.002) or\n"
          "                    h200 (6, 6, 384, 256, batch 64, 5000, lr 0.001)\n"
          "  --layers N --heads N --width N --context N   the model's size\n"
          "  --steps N         optimizer steps; --warmup N linear warm-up\n"
          "                    steps (default 100), then cosine decay to lr/10\n"
          "  --eval-interval N steps between loss evaluations (default\n"
          "                    steps/5); --eval-batches N batches per split\n"
          "  --untied          an output layer of its own (default: tied to\n"
          "                    the token embedding)\n"
          "  --sample-len N    bytes generated at the end (default 400)\n"
          "  --temperature X   sampling temperature (default 0.8; 0: argmax)\n"
          "  --sample-seed N   seed of the sampling (default: --seed)\n"
          "  --data DIR        the fortune files (default %s)\n",
          TRAIN_DEFAULT_EPOCHS, TRAIN_DEFAULT_EPOCHS_CNN, TRAIN_DEFAULT_BATCH, (unsigned)TRAIN_DEFAULT_SEED,
          MNIST_ENV_DIR, MNIST_DEFAULT_DIR,
#ifdef RUMUS_TRAIN_MPI
          "",
#else
          "\n                    (not in this build: built without MPI)",
#endif
          GPT_DEFAULT_DIR);
}

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* A decimal integer in [lo, hi], digits only (no sign, no spaces). */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  if (!s || !isdigit((unsigned char)s[0])) return -1;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end != '\0' || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_hidden(const char *s, train_opts *o) {
  o->nhidden = 0;
  if (s[0] == '\0' || strcmp(s, "none") == 0) return 0;
  const char *p = s;
  for (;;) {
    if (o->nhidden == TRAIN_MAX_HIDDEN) return -1;
    char item[32];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof item) return -1;
    memcpy(item, p, len);
    item[len] = '\0';
    uint64_t v;
    if (parse_u64(item, 1, MLP_MAX_WIDTH, &v) != 0) return -1;
    o->hidden[o->nhidden++] = (size_t)v;
    if (p[len] == '\0') return 0;
    p += len + 1;
  }
}

/* A size flag of the GPT in [lo, hi]. */
static int gpt_size(const char *name, const char *val, uint64_t lo, uint64_t hi,
                    uint64_t *out, char *err, size_t errlen) {
  if (parse_u64(val, lo, hi, out) != 0)
    return bad(err, errlen, "%s '%s': expected an integer from %llu to %llu", name, val,
               (unsigned long long)lo, (unsigned long long)hi);
  return 0;
}

/* The GPT's flags with a value (name is one of them). */
static int parse_gpt_flag(const char *name, const char *val, train_opts *o,
                          char *err, size_t errlen) {
  uint64_t u = 0;
  o->gpt_flag = name;
  if (strcmp(name, "--preset") == 0) {
    if (strcmp(val, "pocl") == 0) o->preset = TRAIN_PRESET_POCL;
    else if (strcmp(val, "h200") == 0) o->preset = TRAIN_PRESET_H200;
    else return bad(err, errlen, "--preset '%s': expected pocl or h200", val);
    return 0;
  }
  if (strcmp(name, "--temperature") == 0) {
    char *end = NULL;
    errno = 0;
    double d = strtod(val, &end);
    if (val[0] == '\0' || isspace((unsigned char)val[0]) || *end != '\0' || errno ||
        !isfinite(d) || d < 0.0 || d > 100.0)
      return bad(err, errlen, "--temperature '%s': expected a number in [0, 100]", val);
    o->temperature = (float)d;
    o->temperature_given = 1;
    return 0;
  }
  if (strcmp(name, "--sample-seed") == 0) {
    if (parse_u64(val, 0, UINT64_MAX, &u) != 0)
      return bad(err, errlen, "--sample-seed '%s': expected a non-negative integer below 2^64", val);
    o->sample_seed = u;
    o->sample_seed_given = 1;
    return 0;
  }
  int r = 0;
  if (strcmp(name, "--layers") == 0) {
    r = gpt_size(name, val, 1, 64, &u, err, errlen);
    o->layers = o->size_given[0] = (size_t)u;
  } else if (strcmp(name, "--heads") == 0) {
    r = gpt_size(name, val, 1, 1024, &u, err, errlen);
    o->heads = o->size_given[1] = (size_t)u;
  } else if (strcmp(name, "--width") == 0) {
    r = gpt_size(name, val, 1, 8192, &u, err, errlen);
    o->width = o->size_given[2] = (size_t)u;
  } else if (strcmp(name, "--context") == 0) {
    r = gpt_size(name, val, 1, 8192, &u, err, errlen);
    o->context = o->size_given[3] = (size_t)u;
  } else if (strcmp(name, "--steps") == 0) {
    r = gpt_size(name, val, 1, 100000000, &u, err, errlen);
    o->steps = (long)u;
  } else if (strcmp(name, "--warmup") == 0) {
    r = gpt_size(name, val, 0, 100000000, &u, err, errlen);
    o->warmup = (long)u;
    o->warmup_given = 1;
  } else if (strcmp(name, "--eval-interval") == 0) {
    r = gpt_size(name, val, 1, 100000000, &u, err, errlen);
    o->eval_interval = (long)u;
  } else if (strcmp(name, "--eval-batches") == 0) {
    r = gpt_size(name, val, 1, 100000, &u, err, errlen);
    o->eval_batches = (size_t)u;
  } else if (strcmp(name, "--sample-len") == 0) {
    r = gpt_size(name, val, 0, 1000000, &u, err, errlen);
    o->sample_len = (size_t)u;
    o->sample_len_given = 1;
  }
  return r;
}

void train_gpt_defaults(train_opts *o) {
  int big = o->preset == TRAIN_PRESET_H200;
  o->model = TRAIN_MODEL_GPT;
  if (!o->layers) o->layers = big ? 6 : 2;
  if (!o->heads) o->heads = big ? 6 : 4;
  if (!o->width) o->width = big ? 384 : 128;
  if (!o->context) o->context = big ? 256 : 64;
  if (!o->batch_given) o->batch = big ? 64 : 32;
  if (!o->steps) o->steps = 5000;
  /* nanoGPT's 1e-3 for the larger model; the small one learns faster at
   * 2e-3 (PoCL, 1200 steps: validation loss 1.92 against 2.01 at 1e-3). */
  if (!o->lr_given) o->lr = big ? 1e-3f : 2e-3f;
  if (!o->warmup_given) o->warmup = 100;
  if (!o->eval_interval) o->eval_interval = o->steps >= 5 ? o->steps / 5 : 1;
  if (!o->eval_batches) o->eval_batches = big ? 20 : 8;
  if (!o->sample_len_given) o->sample_len = 400;
  if (!o->temperature_given) o->temperature = 0.8f;
  if (!o->sample_seed_given) o->sample_seed = o->seed;
}

/* A flag without a value into o: 1 if arg is one, else 0. */
static int parse_switch(const char *arg, train_opts *o) {
  if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
    o->help = 1;
  } else if (strcmp(arg, "--eval-only") == 0) {
    o->eval_only = 1;
  } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
    o->quiet = 1;
  } else if (strcmp(arg, "--profile") == 0) {
    o->profile = 1;
  } else if (strcmp(arg, "--no-normalize") == 0) {
    o->no_normalize = 1;
  } else if (strcmp(arg, "--untied") == 0) {
    o->untied = 1;
    o->gpt_flag = "--untied";
  } else if (strcmp(arg, "--constant-lr") == 0) {
    o->constant_lr = 1;
  } else if (strcmp(arg, "--mpi") == 0) {
    o->mpi = 1;
  } else {
    return 0;
  }
  return 1;
}

/* --lr's value: a number in (0, 1000]; -1 otherwise. */
static int parse_lr(const char *val, float *lr) {
  errno = 0;
  char *end = NULL;
  double d = strtod(val, &end);
  if (val[0] == '\0' || isspace((unsigned char)val[0]) || *end != '\0' ||
      errno || !isfinite(d) || d <= 0.0 || d > 1e3)
    return -1;
  *lr = (float)d;
  return 0;
}

/* --precision's and --model's values; -1 for another. */
static int parse_precision(const char *val, rumus_dtype *p) {
  if (strcmp(val, "f32") == 0) *p = RUMUS_F32;
  else if (strcmp(val, "f16") == 0) *p = RUMUS_F16;
  else if (strcmp(val, "bf16") == 0) *p = RUMUS_BF16;
  else return -1;
  return 0;
}
static int parse_model(const char *val, train_model_kind *m) {
  if (strcmp(val, "mlp") == 0) *m = TRAIN_MODEL_MLP;
  else if (strcmp(val, "cnn") == 0) *m = TRAIN_MODEL_CNN;
  else if (strcmp(val, "gpt") == 0) *m = TRAIN_MODEL_GPT;
  else return -1;
  return 0;
}

/* The flags of every model with a value (the GPT's own: parse_gpt_flag):
 * VAL into o; -1 after a message in err. */
static int parse_value(const char *name, const char *val, train_opts *o,
                       char *err, size_t errlen) {
  uint64_t u;
  if (strcmp(name, "--epochs") == 0) {
    if (parse_u64(val, 1, 1000000, &u) != 0)
      return bad(err, errlen, "--epochs '%s': expected an integer from 1 to 1000000", val);
    o->epochs = (int)u;
    o->epochs_given = 1;
  } else if (strcmp(name, "--batch-size") == 0) {
    if (parse_u64(val, 1, 65536, &u) != 0)
      return bad(err, errlen, "--batch-size '%s': expected an integer from 1 to 65536", val);
    o->batch = (size_t)u;
    o->batch_given = 1;
  } else if (strcmp(name, "--lr") == 0) {
    if (parse_lr(val, &o->lr) != 0)
      return bad(err, errlen, "--lr '%s': expected a number in (0, 1000]", val);
    o->lr_given = 1;
  } else if (strcmp(name, "--hidden") == 0) {
    if (parse_hidden(val, o) != 0)
      return bad(err, errlen,
                 "--hidden '%s': expected up to %d comma-separated widths "
                 "from 1 to %zu (e.g. 256,128), or \"none\"",
                 val, TRAIN_MAX_HIDDEN, MLP_MAX_WIDTH);
    o->hidden_given = 1;
  } else if (strcmp(name, "--seed") == 0) {
    if (parse_u64(val, 0, UINT64_MAX, &u) != 0)
      return bad(err, errlen, "--seed '%s': expected a non-negative integer below 2^64", val);
    o->seed = u;
  } else if (strcmp(name, "--device") == 0) {
    if (val[0] == '\0') return bad(err, errlen, "--device: empty selector");
    o->device = val;
  } else if (strcmp(name, "--data") == 0) {
    if (val[0] == '\0') return bad(err, errlen, "--data: empty directory");
    o->data = val;
  } else if (strcmp(name, "--save") == 0) {
    if (val[0] == '\0') return bad(err, errlen, "--save: empty file name");
    o->save = val;
  } else if (strcmp(name, "--precision") == 0) {
    if (parse_precision(val, &o->precision) != 0)
      return bad(err, errlen, "--precision '%s': expected f32, f16 or bf16", val);
  } else if (strcmp(name, "--model") == 0) {
    if (parse_model(val, &o->model) != 0)
      return bad(err, errlen, "--model '%s': expected mlp, cnn or gpt", val);
    o->model_given = 1;
  } else if (strcmp(name, "--max-steps") == 0) {
    if (parse_u64(val, 1, 1000000000, &u) != 0)
      return bad(err, errlen, "--max-steps '%s': expected an integer from 1 to 1000000000", val);
    o->max_steps = (long)u;
  } else if (strcmp(name, "--load") == 0) {
    if (val[0] == '\0') return bad(err, errlen, "--load: empty file name");
    o->load = val;
  } else {
    return parse_gpt_flag(name, val, o, err, errlen);
  }
  return 0;
}

/* The flags' combinations, and the model's defaults. */
static int check_combination(train_opts *o, char *err, size_t errlen) {
  if (o->gpt_flag && o->model_given && o->model != TRAIN_MODEL_GPT)
    return bad(err, errlen, "%s applies to --model gpt only", o->gpt_flag);
  if (o->model == TRAIN_MODEL_GPT && o->hidden_given)
    return bad(err, errlen, "--hidden sets the MLP's layers: not with --model gpt");
  if (o->model == TRAIN_MODEL_GPT && o->epochs_given)
    return bad(err, errlen, "--epochs: the GPT counts --steps");
  if (o->model == TRAIN_MODEL_GPT) {
    train_gpt_defaults(o);
    if (o->width % o->heads != 0)
      return bad(err, errlen, "--heads %zu does not divide the width %zu", o->heads,
                 o->width);
  }
  if (o->model == TRAIN_MODEL_CNN && o->hidden_given)
    return bad(err, errlen, "--hidden sets the MLP's layers: not with --model cnn");
  if (o->model == TRAIN_MODEL_CNN && !o->epochs_given)
    o->epochs = TRAIN_DEFAULT_EPOCHS_CNN;
  if (o->eval_only && !o->load && !o->help)
    return bad(err, errlen, "--eval-only needs --load FILE");
  return 0;
}

int train_opts_parse(int argc, char **argv, train_opts *o, char *err,
                     size_t errlen) {
  memset(o, 0, sizeof *o);
  o->epochs = TRAIN_DEFAULT_EPOCHS;
  o->batch = TRAIN_DEFAULT_BATCH;
  o->lr = TRAIN_DEFAULT_LR;
  o->nhidden = 2;
  o->hidden[0] = 256;
  o->hidden[1] = 128;
  o->seed = TRAIN_DEFAULT_SEED;
  o->precision = RUMUS_F32;
  static const char *const with_value[] = {
      "--epochs", "--batch-size", "--lr",   "--hidden", "--seed",
      "--device", "--data",       "--save", "--load", "--precision",
      "--model", "--max-steps", "--preset", "--layers", "--heads", "--width",
      "--context", "--steps", "--warmup", "--eval-interval", "--eval-batches",
      "--sample-len", "--temperature", "--sample-seed"};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (parse_switch(arg, o)) continue;
    /* Flags with a value: "--flag VALUE" or "--flag=VALUE". */
    const char *name = NULL, *val = NULL;
    size_t nlen = strcspn(arg, "=");
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
      if (strlen(with_value[k]) == nlen && strncmp(arg, with_value[k], nlen) == 0)
        name = with_value[k];
    }
    if (!name) {
      if (arg[0] == '-') return bad(err, errlen, "unknown option '%s'", arg);
      return bad(err, errlen, "unexpected argument '%s'", arg);
    }
    if (arg[nlen] == '=') {
      val = arg + nlen + 1;
    } else {
      if (i + 1 >= argc) return bad(err, errlen, "%s needs a value", name);
      val = argv[++i];
    }
    if (parse_value(name, val, o, err, errlen) != 0) return -1;
  }
  return check_combination(o, err, errlen);
}
