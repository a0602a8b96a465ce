/*
 * program.c - kernel sources, the per-context program cache and launches.
 *
 * A program is common.cl followed by one family's .cl, built with the
 * device's -cl-std, the op's -D options and those of the context's
 * variant (variant_options); (file, options) is the cache key, so the
 * options string names the variant.  Programs live as long as
 * the context (or until rumus_cache_clear()).  No binary cache is added:
 * PoCL and NVIDIA cache compiled kernels on disk already.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ops/ops.h"

typedef struct kernel_node {
  char *name;
  cl_kernel kernel;
  size_t wg_limit; /* CL_KERNEL_WORK_GROUP_SIZE, 0 until first asked */
  struct kernel_node *next;
} kernel_node;

struct rumus__program {
  char *file;
  char *options;
  cl_program program;
  kernel_node *kernels;
  rumus__program *next;
};

RUMUS__HIDDEN void rumus__record_event(rumus_ctx *ctx, cl_event ev,
                                       const char *op, const char *kernel);

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

/* Reads `dir`/`file` for RUMUS_KERNEL_DIR (development: edit kernels
 * without rebuilding the library).  Returns a malloc'ed string or NULL. */
static char *read_source_file(const char *dir, const char *file) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *buf = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[8192];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *p = realloc(buf, cap);
      if (p == NULL) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = p;
    }
    memcpy(buf + len, chunk, n);
    len += n;
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  return buf;
}

static const char *embedded_source(const char *file) {
  for (size_t i = 0; i < rumus__source_count; i++)
    if (strcmp(rumus__sources[i].name, file) == 0) return rumus__sources[i].text;
  return NULL;
}

/* Gets the text of a kernel file; *owned is set when it must be freed. */
static int get_source(rumus_ctx *ctx, const char *op, const char *file,
                      const char **text, char **owned) {
  *owned = NULL;
  const char *dir = getenv("RUMUS_KERNEL_DIR");
  if (dir && dir[0]) {
    *owned = read_source_file(dir, file);
    RUMUS__FAIL_IF(*owned == NULL, ctx, RUMUS_ENOSOURCE,
                   "%s: RUMUS_KERNEL_DIR is set but %s/%s cannot be read", op,
                   dir, file);
    *text = *owned;
    return RUMUS_OK;
  }
  *text = embedded_source(file);
  RUMUS__FAIL_IF(*text == NULL, ctx, RUMUS_ENOSOURCE,
                 "%s: no embedded kernel source named %s", op, file);
  return RUMUS_OK;
}

/* The build log of prog (malloc'ed) into *log; NULL and the CL error when
 * it cannot be had. */
static cl_int build_log(rumus_ctx *ctx, cl_program prog, char **log) {
  size_t len = 0;
  *log = NULL;
  cl_int e = clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0,
                                   NULL, &len);
  if (e != CL_SUCCESS) return e;
  char *text = malloc(len + 1);
  if (text == NULL) return CL_OUT_OF_HOST_MEMORY;
  e = clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, len, text,
                            NULL);
  if (e != CL_SUCCESS) {
    free(text);
    return e;
  }
  text[len] = '\0';
  *log = text;
  return CL_SUCCESS;
}

/* A failed clBuildProgram: RUMUS_EBUILD with the options and the build log
 * when the source or the options were refused, otherwise the status of
 * the CL error (out of memory, no compiler). */
static int build_failed(rumus_ctx *ctx, const char *op, const char *file,
                        const char *opts, cl_program prog, cl_int e) {
  if (e != CL_BUILD_PROGRAM_FAILURE && e != CL_INVALID_BUILD_OPTIONS)
    return rumus__fail_cl(ctx, e, "%s: clBuildProgram of %s with \"%s\"", op,
                          file, opts);
  char *log;
  cl_int le = build_log(ctx, prog, &log);
  rumus__fail_cl_as(ctx, RUMUS_EBUILD, e,
                    "%s: clBuildProgram of %s with \"%s\"", op, file, opts);
  rumus__append_msg(ctx, "\nbuild log:\n");
  if (log == NULL) {
    char why[128];
    snprintf(why, sizeof why, "(unavailable: clGetProgramBuildInfo: %s)",
             rumus__cl_error_name(le));
    rumus__append_msg(ctx, why);
  } else if (log[strspn(log, " \t\r\n")] == '\0') {
    rumus__append_msg(ctx, "(empty: the driver gave no log)");
  }
  rumus__append_msg(ctx, log);
  free(log);
  return RUMUS_EBUILD;
}

static int build(rumus_ctx *ctx, const char *op, const char *file,
                 const char *options, cl_program *out) {
  const char *common, *body;
  char *own_common, *own_body;
  RUMUS__FORWARD(get_source(ctx, op, "common.cl", &common, &own_common));
  int st = get_source(ctx, op, file, &body, &own_body);
  if (st != RUMUS_OK) {
    free(own_common);
    return st;
  }
  const char *parts[2] = {common, body};
  cl_int e;
  cl_program prog = clCreateProgramWithSource(ctx->context, 2, parts, NULL, &e);
  free(own_common);
  free(own_body);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "%s: clCreateProgramWithSource(%s)", op,
                          file);
  /* CPU devices build with -w: PoCL writes "N warnings generated." to
   * stderr on AVX2 hosts for every call of a builtin that takes 16-wide
   * vectors (clang's -Wpsabi note on their calling convention), which
   * would be the library printing.  Kernel development (RUMUS_KERNEL_DIR)
   * keeps the warnings. */
  const char *quiet =
      !ctx->is_gpu && getenv("RUMUS_KERNEL_DIR") == NULL ? " -w" : "";
  size_t olen = strlen(ctx->cl_std) + strlen(quiet) + strlen(options) + 2;
  char *opts = malloc(olen);
  if (opts == NULL) {
    clReleaseProgram(prog);
    return rumus__fail(ctx, RUMUS_ENOMEM, "out of host memory");
  }
  snprintf(opts, olen, "%s%s %s", ctx->cl_std, quiet, options);
  ctx->builds++;
  e = clBuildProgram(prog, 1, &ctx->device, opts, NULL, NULL);
  if (e != CL_SUCCESS) {
    st = build_failed(ctx, op, file, opts, prog, e);
    free(opts);
    clReleaseProgram(prog);
    return st;
  }
  free(opts);
  *out = prog;
  return RUMUS_OK;
}

/* A copy of options with runs of white space made one space and none at
 * either end, so that two spellings of one option set are one cache entry
 * (malloc'ed; NULL when out of memory). */
static char *normalised_options(const char *options) {
  char *out = malloc(strlen(options) + 1);
  if (out == NULL) return NULL;
  size_t n = 0;
  for (const char *c = options; *c; c++) {
    if (!isspace((unsigned char)*c))
      out[n++] = *c;
    else if (n > 0 && out[n - 1] != ' ')
      out[n++] = ' ';
  }
  if (n > 0 && out[n - 1] == ' ') n--;
  out[n] = '\0';
  return out;
}

/* Finds or builds the entry of (file, normalised options). */
static int program_find_or_build(rumus_ctx *ctx, const char *op,
                                 const char *file, const char *options,
                                 rumus__program **out) {
  for (rumus__program *p = ctx->programs; p; p = p->next)
    if (strcmp(p->file, file) == 0 && strcmp(p->options, options) == 0) {
      *out = p;
      return RUMUS_OK;
    }
  rumus__program *p = calloc(1, sizeof *p);
  if (p == NULL) return rumus__fail(ctx, RUMUS_ENOMEM, "out of host memory");
  p->file = dup_str(file);
  p->options = dup_str(options);
  int st = (p->file && p->options)
               ? build(ctx, op, file, options, &p->program)
               : rumus__fail(ctx, RUMUS_ENOMEM, "out of host memory");
  if (st != RUMUS_OK) {
    free(p->file);
    free(p->options);
    free(p);
    return st;
  }
  p->next = ctx->programs;
  ctx->programs = p;
  *out = p;
  return RUMUS_OK;
}

/* The options every program of the context's current variant gets after
 * the family's: the work-group variant moves F16 as bits
 * (RUMUS_F16_BITS in cl/common.cl). */
static const char *variant_options(const rumus_ctx *ctx) {
  return rumus__gpu_variant(ctx) ? " -DRUMUS_F16_BITS=1" : "";
}

/* Finds or builds the cache entry; the caller holds ctx->lock. */
static int program_entry(rumus_ctx *ctx, const char *op, const char *file,
                         const char *family_options, rumus__program **out) {
  const char *extra = variant_options(ctx);
  size_t len = strlen(family_options) + strlen(extra) + 1;
  char *raw_options = malloc(len);
  if (raw_options == NULL)
    return rumus__fail(ctx, RUMUS_ENOMEM, "out of host memory");
  snprintf(raw_options, len, "%s%s", family_options, extra);
  char *options = normalised_options(raw_options);
  free(raw_options);
  if (options == NULL)
    return rumus__fail(ctx, RUMUS_ENOMEM, "out of host memory");
  int st = program_find_or_build(ctx, op, file, options, out);
  free(options);
  return st;
}

int rumus__program_get(rumus_ctx *ctx, const char *op, const char *file,
                       const char *options, cl_program *out) {
  pthread_mutex_lock(&ctx->lock);
  rumus__program *p;
  int st = program_entry(ctx, op, file, options, &p);
  pthread_mutex_unlock(&ctx->lock);
  if (st == RUMUS_OK) *out = p->program;
  return st;
}

static int kernel_node_get(rumus_ctx *ctx, const char *op, rumus__program *p,
                           const char *name, kernel_node **out) {
  for (kernel_node *k = p->kernels; k; k = k->next)
    if (strcmp(k->name, name) == 0) {
      *out = k;
      return RUMUS_OK;
    }
  kernel_node *k = calloc(1, sizeof *k);
  if (k == NULL || (k->name = dup_str(name)) == NULL) {
    free(k);
    return rumus__fail(ctx, RUMUS_ENOMEM, "out of host memory");
  }
  cl_int e;
  k->kernel = clCreateKernel(p->program, name, &e);
  if (e != CL_SUCCESS) {
    free(k->name);
    free(k);
    return rumus__fail_cl(ctx, e, "%s: clCreateKernel(%s) in %s", op, name,
                          p->file);
  }
  k->next = p->kernels;
  p->kernels = k;
  *out = k;
  return RUMUS_OK;
}

static int kernel_get(rumus_ctx *ctx, const char *op, rumus__program *p,
                      const char *name, cl_kernel *out) {
  kernel_node *k;
  RUMUS__FORWARD(kernel_node_get(ctx, op, p, name, &k));
  *out = k->kernel;
  return RUMUS_OK;
}

void rumus__programs_free(rumus_ctx *ctx) {
  while (ctx->programs) {
    rumus__program *p = ctx->programs;
    ctx->programs = p->next;
    while (p->kernels) {
      kernel_node *k = p->kernels;
      p->kernels = k->next;
      clReleaseKernel(k->kernel);
      free(k->name);
      free(k);
    }
    clReleaseProgram(p->program);
    free(p->file);
    free(p->options);
    free(p);
  }
}

/* The register cap R of options' -cl-nv-maxrregcount=R, 0 without. */
static size_t nv_register_cap(const char *options) {
  static const char key[] = "-cl-nv-maxrregcount=";
  const char *at = strstr(options, key);
  return at ? strtoul(at + sizeof key - 1, NULL, 10) : 0;
}

/* k->wg_limit as rumus__kernel_wg_limit() describes it. */
static int query_wg_limit(rumus_ctx *ctx, const char *op,
                          const rumus__kernel_ref *kr, kernel_node *k) {
  size_t limit = 0, reqd[3] = {0, 0, 0};
  cl_int e = clGetKernelWorkGroupInfo(k->kernel, ctx->device,
                                      CL_KERNEL_WORK_GROUP_SIZE, sizeof limit,
                                      &limit, NULL);
  if (e == CL_SUCCESS)
    e = clGetKernelWorkGroupInfo(k->kernel, ctx->device,
                                 CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
                                 sizeof reqd, reqd, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "%s: clGetKernelWorkGroupInfo(%s)", op,
                          kr->kernel);
  const size_t cap = nv_register_cap(kr->options);
  size_t known = reqd[0] * (reqd[1] ? reqd[1] : 1) * (reqd[2] ? reqd[2] : 1);
  if (known == 0 && cap > 0 && ctx->regs_per_block > 0)
    known = ctx->regs_per_block / cap / 32 * 32; /* whole warps */
  if (known > ctx->max_wg) known = ctx->max_wg;
  k->wg_limit = known > limit ? known : limit;
  return RUMUS_OK;
}

int rumus__kernel_wg_limit(rumus_ctx *ctx, const char *op,
                           const rumus__kernel_ref *kr, size_t *out) {
  *out = 0;
  pthread_mutex_lock(&ctx->lock);
  rumus__program *p;
  kernel_node *k = NULL;
  int st = program_entry(ctx, op, kr->file, kr->options, &p);
  if (st == RUMUS_OK) st = kernel_node_get(ctx, op, p, kr->kernel, &k);
  if (st == RUMUS_OK && k->wg_limit == 0) /* asked once per kernel */
    st = query_wg_limit(ctx, op, kr, k);
  if (st == RUMUS_OK) *out = k->wg_limit;
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

int rumus__launch(rumus_ctx *ctx, const char *op, const rumus__kernel_ref *kr,
                  cl_uint dims, const size_t *global, const size_t *local,
                  size_t nargs, const rumus__arg *args) {
  size_t padded[3];
  for (cl_uint d = 0; d < dims; d++) {
    if (global[d] == 0) return RUMUS_OK; /* nothing to do */
    padded[d] = rumus__round_up(global[d], local[d]);
  }
  /* Kernel objects carry their arguments: set and enqueue under the lock so
   * that threads sharing a context do not interleave. */
  pthread_mutex_lock(&ctx->lock);
  rumus__program *p;
  cl_kernel k = NULL;
  int st = program_entry(ctx, op, kr->file, kr->options, &p);
  if (st == RUMUS_OK) st = kernel_get(ctx, op, p, kr->kernel, &k);
  for (size_t i = 0; st == RUMUS_OK && i < nargs; i++) {
    cl_int e = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value);
    if (e != CL_SUCCESS)
      st = rumus__fail_cl(ctx, e, "%s: clSetKernelArg(%s, %zu)", op,
                          kr->kernel, i);
  }
  if (st == RUMUS_OK) {
    cl_event ev = NULL;
    cl_int e = clEnqueueNDRangeKernel(ctx->queue, k, dims, NULL, padded, local,
                                      0, NULL, ctx->profiling ? &ev : NULL);
    if (e != CL_SUCCESS)
      st = rumus__fail_cl(ctx, e, "%s: clEnqueueNDRangeKernel(%s, global %zu, "
                                  "local %zu)",
                          op, kr->kernel, padded[0], local[0]);
    else if (ev)
      rumus__record_event(ctx, ev, op, kr->kernel);
  }
  pthread_mutex_unlock(&ctx->lock);
  return st;
}

int rumus__launch_pieces(rumus_ctx *ctx, const char *op,
                         const rumus__kernel_ref *k, cl_uint dims,
                         size_t *global, const size_t *local, int axis,
                         size_t n, size_t max, size_t nargs,
                         const rumus__arg *args) {
  if (nargs == 0 || nargs > RUMUS__MAX_PIECE_ARGS)
    return rumus__fail(ctx, RUMUS_EINVAL, "%s: %s: %zu arguments", op,
                       k->kernel, nargs);
  rumus__arg a[RUMUS__MAX_PIECE_ARGS];
  memcpy(a, args, nargs * sizeof *a);
  cl_ulong first = 0;
  a[nargs - 1] = RUMUS__ARG(first);
  for (size_t u = 0; u < n; u += max) {
    first = u;
    global[axis] = n - u < max ? n - u : max;
    RUMUS__FORWARD(rumus__launch(ctx, op, k, dims, global, local, nargs, a));
  }
  return RUMUS_OK;
}

/* A fresh device buffer of `bytes` (at least 4), for a scratch slot. */
static int new_scratch(rumus_ctx *ctx, const char *op, size_t bytes,
                       cl_mem *out) {
  cl_int e;
  *out = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes ? bytes : 4,
                        NULL, &e);
  if (e != CL_SUCCESS) {
    *out = NULL;
    return rumus__fail_cl(ctx, e, "%s: clCreateBuffer (scratch, %zu bytes)", op,
                          bytes);
  }
  return RUMUS_OK;
}

void rumus__scratch_begin(rumus_ctx *ctx) {
  pthread_mutex_lock(&ctx->scratch_lock);
}

void rumus__scratch_end(rumus_ctx *ctx) {
  pthread_mutex_unlock(&ctx->scratch_lock);
}

int rumus__scratch_slot(rumus_ctx *ctx, const char *op, int slot, size_t bytes,
                        cl_mem *out) {
  if (bytes == 0) bytes = 4;
  if (ctx->scratch_size[slot] < bytes) {
    /* The old buffer lives on until the kernels queued on it are done. */
    if (ctx->scratch_mem[slot]) clReleaseMemObject(ctx->scratch_mem[slot]);
    ctx->scratch_mem[slot] = NULL;
    ctx->scratch_size[slot] = 0;
    RUMUS__FORWARD(new_scratch(ctx, op, bytes, &ctx->scratch_mem[slot]));
    ctx->scratch_size[slot] = bytes;
  }
  *out = ctx->scratch_mem[slot];
  return RUMUS_OK;
}

void rumus__scratch_free(rumus_ctx *ctx) {
  pthread_mutex_lock(&ctx->scratch_lock);
  for (int i = 0; i < RUMUS__SCRATCH_SLOTS; i++) {
    if (ctx->scratch_mem[i]) clReleaseMemObject(ctx->scratch_mem[i]);
    ctx->scratch_mem[i] = NULL;
    ctx->scratch_size[i] = 0;
  }
  pthread_mutex_unlock(&ctx->scratch_lock);
}

int rumus_cache_clear(rumus_ctx *ctx) {
  if (ctx == NULL) return RUMUS_ENULL;
  cl_int e = clFinish(ctx->queue);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_cache_clear: clFinish");
  pthread_mutex_lock(&ctx->lock);
  rumus__programs_free(ctx);
  pthread_mutex_unlock(&ctx->lock);
  rumus__scratch_free(ctx);
  return RUMUS_OK;
}

int rumus_cache_fill(rumus_ctx *ctx) {
  if (ctx == NULL) return RUMUS_ENULL;
  for (size_t i = 0; i < rumus__warmers_count; i++)
    RUMUS__FORWARD(rumus__warmers[i](ctx));
  return RUMUS_OK;
}

int rumus_cache_stats(rumus_ctx *ctx, rumus_cache_info *out) {
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(out == NULL, ctx, RUMUS_ENULL,
                 "rumus_cache_stats: out is NULL");
  pthread_mutex_lock(&ctx->lock);
  size_t programs = 0;
  for (rumus__program *p = ctx->programs; p; p = p->next) programs++;
  out->programs = programs;
  out->builds = ctx->builds;
  pthread_mutex_unlock(&ctx->lock);
  return RUMUS_OK;
}
