/* options.c - see options.h. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void train_usage(FILE *f) {
  fprintf(f,
          "usage: rumus-train [OPTIONS]\n"
          "Trains an MLP or a CNN on Fashion-MNIST on an OpenCL device with rumus.\n"
          "\n"
          "  --model M         mlp (default) or cnn: conv-bn-relu-pool x2,\n"
          "                    dropout, fc 128, dropout, fc 10\n"
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
          "  --help            this text\n",
          TRAIN_DEFAULT_EPOCHS, TRAIN_DEFAULT_EPOCHS_CNN, TRAIN_DEFAULT_BATCH, (unsigned)TRAIN_DEFAULT_SEED,
          MNIST_ENV_DIR, MNIST_DEFAULT_DIR,
#ifdef RUMUS_TRAIN_MPI
          ""
#else
          "\n                    (not in this build: built without MPI)"
#endif
          );
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
      "--model", "--max-steps"};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      o->help = 1;
      continue;
    }
    if (strcmp(arg, "--eval-only") == 0) {
      o->eval_only = 1;
      continue;
    }
    if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
      o->quiet = 1;
      continue;
    }
    if (strcmp(arg, "--no-normalize") == 0) {
      o->no_normalize = 1;
      continue;
    }
    if (strcmp(arg, "--constant-lr") == 0) {
      o->constant_lr = 1;
      continue;
    }
    if (strcmp(arg, "--mpi") == 0) {
      o->mpi = 1;
      continue;
    }
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
    } else if (strcmp(name, "--lr") == 0) {
      errno = 0;
      char *end = NULL;
      double d = strtod(val, &end);
      if (val[0] == '\0' || isspace((unsigned char)val[0]) || *end != '\0' ||
          errno || !isfinite(d) || d <= 0.0 || d > 1e3)
        return bad(err, errlen, "--lr '%s': expected a number in (0, 1000]", val);
      o->lr = (float)d;
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
      if (strcmp(val, "f32") == 0)
        o->precision = RUMUS_F32;
      else if (strcmp(val, "f16") == 0)
        o->precision = RUMUS_F16;
      else if (strcmp(val, "bf16") == 0)
        o->precision = RUMUS_BF16;
      else
        return bad(err, errlen, "--precision '%s': expected f32, f16 or bf16", val);
    } else if (strcmp(name, "--model") == 0) {
      if (strcmp(val, "mlp") == 0)
        o->model = TRAIN_MODEL_MLP;
      else if (strcmp(val, "cnn") == 0)
        o->model = TRAIN_MODEL_CNN;
      else
        return bad(err, errlen, "--model '%s': expected mlp or cnn", val);
      o->model_given = 1;
    } else if (strcmp(name, "--max-steps") == 0) {
      if (parse_u64(val, 1, 1000000000, &u) != 0)
        return bad(err, errlen, "--max-steps '%s': expected an integer from 1 to 1000000000", val);
      o->max_steps = (long)u;
    } else if (strcmp(name, "--load") == 0) {
      if (val[0] == '\0') return bad(err, errlen, "--load: empty file name");
      o->load = val;
    }
  }
  if (o->model == TRAIN_MODEL_CNN && o->hidden_given)
    return bad(err, errlen, "--hidden sets the MLP's layers: not with --model cnn");
  if (o->model == TRAIN_MODEL_CNN && !o->epochs_given)
    o->epochs = TRAIN_DEFAULT_EPOCHS_CNN;
  if (o->eval_only && !o->load && !o->help)
    return bad(err, errlen, "--eval-only needs --load FILE");
  return 0;
}
