/*
 * internal.h - the framework shared by the host runtime and the ops:
 * context and tensor structures, error helpers, program cache and launches.
 * Internal names are prefixed rumus__.
 */
#ifndef RUMUS_INTERNAL_H
#define RUMUS_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>

#include "rumus.h"

#define RUMUS__HIDDEN __attribute__((visibility("hidden")))

/* Words of the status buffer: the error report and the launch ticket
 * (RUMUS__STATUS_WORDS), then RUMUS__TICKETS per-set tickets. */
#define RUMUS__STATUS_WORDS 4
#define RUMUS__TICKETS 4096

/* Codes of ops that check indices on the device; the status buffer's first
 * word holds the code of the first op that found a bad index. */
enum {
  RUMUS__DEVERR_NONE = 0,
  RUMUS__DEVERR_XENT_TARGET = 1,
  RUMUS__DEVERR_POOL_INDEX = 2,
  RUMUS__DEVERR_EMBED_ID = 3
};

/* Reusable scratch buffers per context (rumus__scratch_begin). */
#define RUMUS__SCRATCH_SLOTS 9 /* the embedding backward uses 9 */
/* The slot of the per-call partial sums of cross-entropy, the bias
 * gradient, the sum of squares and clipping, the attention backward's
 * delta and the conv weight gradient's split (any slot would do: an op
 * holds every slot while its launches are queued). */
#define RUMUS__SCRATCH_PARTIALS 3

typedef struct rumus__program rumus__program;
typedef struct rumus__event_node rumus__event_node;

struct rumus_ctx {
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue;
  int adopted;

  /* Device facts read once at creation. */
  char name[512];       /* "platform / device" */
  char cl_std[48];      /* "-cl-std=CL1.2", and " -DRUMUS_NV_SM=90" on
                           NVIDIA (every build's options start with it) */
  int is_gpu;
  cl_uint compute_units;
  size_t max_wg;        /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  cl_ulong local_mem;   /* CL_DEVICE_LOCAL_MEM_SIZE */
  cl_ulong max_alloc;   /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
  int profiling;        /* the queue has CL_QUEUE_PROFILING_ENABLE */
  int cr_divide;        /* CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT */
  cl_uint regs_per_block; /* NVIDIA's CL_DEVICE_REGISTERS_PER_BLOCK_NV, or 0 */
  cl_uint nv_sm;          /* NVIDIA's compute capability (major 10 + minor), or 0 */
  cl_uint float_width;  /* CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT (CPU: SIMD) */

  /* Options. */
  int opt_variant;
  int opt_wg;

  /* Guards the program cache, kernel arguments and launches, the event
   * list and the counters below. */
  pthread_mutex_t lock;
  int locks_ready; /* lock and scratch_lock are initialised */
  rumus__program *programs;
  rumus__event_node *events;
  size_t live_tensors;
  uint64_t builds; /* programs built since creation (rumus_cache_stats) */

  /* Reusable scratch buffers (grow-only), see rumus__scratch_begin. */
  pthread_mutex_t scratch_lock;
  cl_mem scratch_mem[RUMUS__SCRATCH_SLOTS];
  size_t scratch_size[RUMUS__SCRATCH_SLOTS];

  /* Device-side status: [0] = RUMUS__DEVERR_* of the first failure,
   * [1] = the bad value, [2] = its position (row); [3] = the ticket of the
   * kernels that finish in their last work-group (RUMUS_STATUS_TICKET
   * in cl/common.cl); [4 .. 4 + RUMUS__TICKETS) = tickets of kernels whose
   * groups finish in sets (one per set, bias_grad_wg's column blocks).
   * Every ticket is zero between launches. */
  cl_mem status;

  /* Tells this context's failures apart in each thread's record of its
   * last failure (src/error.c): unique in the process, never 0. */
  uint64_t serial;
};

struct rumus_tensor {
  rumus_ctx *ctx;
  rumus_dtype dtype;
  int ndim;
  size_t shape[RUMUS_MAX_DIMS];
  size_t numel;
  cl_mem mem;     /* NULL only for an empty owned tensor */
  size_t offset;  /* in bytes; a multiple of the element size */
  int owns;       /* 1: created by rumus; 0: wrapped (mem retained) */
  /* Alignment in bytes of a wrapped CL_MEM_USE_HOST_PTR buffer's host
   * pointer (a power of two, at most 4096), which a CPU driver may use in
   * place; 0 for every other buffer, whose base the driver aligns
   * (rumus__aligned). */
  size_t host_align;
};

/* ---- Errors ------------------------------------------------------------ */

/* Failures are recorded per thread (src/error.c): these write only the
 * calling thread's record, so threads sharing a context may fail at once.
 * With a NULL ctx nothing is recorded and code is returned. */

/* Records a failure on ctx and returns code. */
RUMUS__HIDDEN int rumus__fail(rumus_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The status of a failed OpenCL call: RUMUS_ENOMEM for
 * CL_OUT_OF_HOST_MEMORY, RUMUS_EDEVMEM for CL_MEM_OBJECT_ALLOCATION_FAILURE
 * and CL_OUT_OF_RESOURCES, RUMUS_ECL for any other error (RUMUS_OK for
 * CL_SUCCESS).  Every failed OpenCL call maps through this. */
RUMUS__HIDDEN int rumus__status_from_cl(cl_int clerr);
/* Records a failed OpenCL call with the status rumus__status_from_cl(clerr);
 * the message should name the CL function and ends with the CL error's
 * name and value. */
RUMUS__HIDDEN int rumus__fail_cl(rumus_ctx *ctx, cl_int clerr,
                                 const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* rumus__fail_cl() with the status given (RUMUS_EBUILD for a build). */
RUMUS__HIDDEN int rumus__fail_cl_as(rumus_ctx *ctx, int code, cl_int clerr,
                                    const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Appends text (a build log) to the calling thread's message when its last
 * failure is on ctx. */
RUMUS__HIDDEN void rumus__append_msg(rumus_ctx *ctx, const char *text);
/* "CL_OUT_OF_RESOURCES" for -5, and so on. */
RUMUS__HIDDEN const char *rumus__cl_error_name(cl_int err);
/* Formats a tensor's shape as "[2, 3]" into buf. */
RUMUS__HIDDEN const char *rumus__shape_str(const rumus_tensor *t, char *buf,
                                           size_t len);

#define RUMUS__SHAPE_BUF 128

/* Return early with a status (zstd's RETURN_ERROR_IF / FORWARD_IF_ERROR). */
#define RUMUS__FAIL_IF(cond, ctx, code, ...)                                  \
  do {                                                                        \
    if (cond) return rumus__fail((ctx), (code), __VA_ARGS__);                 \
  } while (0)
#define RUMUS__FORWARD(expr)                                                  \
  do {                                                                        \
    int rumus__st = (expr);                                                   \
    if (rumus__st != RUMUS_OK) return rumus__st;                              \
  } while (0)

/* ---- Argument checks shared by the ops --------------------------------- */

/* t is not NULL, belongs to ctx and has dtype; names the op and argument. */
RUMUS__HIDDEN int rumus__check_tensor(rumus_ctx *ctx, const char *op,
                                      const char *arg, const rumus_tensor *t,
                                      rumus_dtype dtype);
/* t is not NULL, belongs to ctx and is floating (F32, F16 or BF16); the
 * family then checks its other tensors against t's type. */
RUMUS__HIDDEN int rumus__check_float_tensor(rumus_ctx *ctx, const char *op,
                                            const char *arg,
                                            const rumus_tensor *t);
/* a and b have the same shape. */
RUMUS__HIDDEN int rumus__check_same_shape(rumus_ctx *ctx, const char *op,
                                          const char *an, const rumus_tensor *a,
                                          const char *bn,
                                          const rumus_tensor *b);
/* a and b (either may be NULL) do not share bytes of one buffer, except,
 * when may_alias is set, by being exactly the same bytes (the in-place use
 * an op documents).  A partial overlap, such as a view one row into
 * another tensor's buffer, gives RUMUS_EINVAL naming both ranges. */
RUMUS__HIDDEN int rumus__check_overlap(rumus_ctx *ctx, const char *op,
                                       const char *an, const rumus_tensor *a,
                                       const char *bn, const rumus_tensor *b,
                                       int may_alias);
/* rumus__check_overlap() between every output ts[0 .. nout) and every
 * tensor after it in ts[0 .. n) (NULL entries: absent, skipped), with
 * exact aliasing allowed only between ts[0] and ts[alias] (alias < 0:
 * none). */
RUMUS__HIDDEN int rumus__check_overlaps(rumus_ctx *ctx, const char *op,
                                        const char *const *names,
                                        const rumus_tensor *const *ts, int n,
                                        int nout, int alias);
/* Splits [..., C] into rows x C; ndim must be >= 1. */
RUMUS__HIDDEN void rumus__rows_cols(const rumus_tensor *t, size_t *rows,
                                    size_t *cols);

/* ---- Programs and launches -------------------------------------------- */

/* Embedded kernel sources (src/kernels.c, generated from the cl/ folder). */
typedef struct {
  const char *name; /* "softmax.cl" */
  const char *text;
} rumus__source;
extern RUMUS__HIDDEN const rumus__source rumus__sources[];
extern RUMUS__HIDDEN const size_t rumus__source_count;

/* One kernel launch: the program is common.cl followed by `file`, built with
 * the context's -cl-std and `options`; the kernel is `kernel`. */
typedef struct {
  const char *file;
  const char *options;
  const char *kernel;
} rumus__kernel_ref;

/* A kernel argument: size and pointer as for clSetKernelArg. */
typedef struct {
  size_t size;
  const void *value;
} rumus__arg;
#define RUMUS__ARG(x) ((rumus__arg){sizeof(x), &(x)})
#define RUMUS__ARG_LOCAL(bytes) ((rumus__arg){(bytes), NULL})

/* Builds (once, cached) the kernel, sets the arguments and enqueues it over
 * `global` work-items, rounded up to a multiple of `local` in every
 * dimension.  The kernel must ignore the padding work-items.  `op` names
 * the public op in error messages. */
RUMUS__HIDDEN int rumus__launch(rumus_ctx *ctx, const char *op,
                                const rumus__kernel_ref *k, cl_uint dims,
                                const size_t *global, const size_t *local,
                                size_t nargs, const rumus__arg *args);

/* rumus__launch over n work-items along dimension `axis` in pieces of at
 * most `max` (a multiple of local[axis]; a driver's grid limit): global[axis]
 * is set here to each piece's work-items, and the last argument (a
 * cl_ulong that args[nargs - 1] stands in for) to the piece's first.  At
 * most RUMUS__MAX_PIECE_ARGS arguments. */
#define RUMUS__MAX_PIECE_ARGS 24
RUMUS__HIDDEN int rumus__launch_pieces(rumus_ctx *ctx, const char *op,
                                       const rumus__kernel_ref *k,
                                       cl_uint dims, size_t *global,
                                       const size_t *local, int axis,
                                       size_t n, size_t max, size_t nargs,
                                       const rumus__arg *args);

/* The largest work-group the kernel can be launched with on this device;
 * builds the kernel unless cached.  CL_KERNEL_WORK_GROUP_SIZE (fewer than
 * the device maximum when the kernel needs many registers), raised where
 * the driver's figure is known to be low: NVIDIA's reports 256 for every
 * kernel, a 10-register one included, and launches them at 1024.  Raised
 * to the kernel's reqd_work_group_size (the compiler fitted its registers
 * to it), or, for a program built with -cl-nv-maxrregcount=R, to the
 * work-items whose R registers each the register file holds. */
RUMUS__HIDDEN int rumus__kernel_wg_limit(rumus_ctx *ctx, const char *op,
                                         const rumus__kernel_ref *k,
                                         size_t *out);

/* Builds the program for (file, options) unless cached. */
RUMUS__HIDDEN int rumus__program_get(rumus_ctx *ctx, const char *op,
                                     const char *file, const char *options,
                                     cl_program *out);
/* Frees every cached program; the caller holds ctx->lock. */
RUMUS__HIDDEN void rumus__programs_free(rumus_ctx *ctx);

/* Work-group size of reduction kernels on this context. */
RUMUS__HIDDEN size_t rumus__reduce_wg(const rumus_ctx *ctx);
/* 1 if reductions use the work-group (GPU) variant. */
RUMUS__HIDDEN int rumus__gpu_variant(const rumus_ctx *ctx);
/* The tiling in environment variable `name`, "AxBxC..." of at least
 * `min` and at most `max` integers from 1 to 1024 (the tuning overrides
 * of conv2d and attention): the count read, with f[0 .. count) set and
 * the rest of f left as the caller's defaults; 0 if the variable is unset,
 * empty or not of that form. */
RUMUS__HIDDEN int rumus__env_tiling(const char *name, long *f, int min,
                                    int max);
/* Element offset of a tensor, for kernel arguments. */
static inline cl_ulong rumus__off(const rumus_tensor *t) {
  return (cl_ulong)(t->offset / rumus_dtype_size(t->dtype));
}
/* Round n up to a multiple of m. */
static inline size_t rumus__round_up(size_t n, size_t m) {
  return (n + m - 1) / m * m;
}

/* Reusable per-context scratch buffers, the ops' only device scratch (a
 * fresh buffer costs a host call per op, and PoCL maps its pages during
 * the kernels).  rumus__scratch_begin() takes them for one op's launches,
 * rumus__scratch_slot() gives slot i (0 to 8) with at least `bytes` (the
 * contents are undefined), rumus__scratch_end() lets them go.  The queue is
 * in-order, so the next op that takes them runs after this op's kernels.
 * They are freed by rumus_cache_clear() and rumus_ctx_free(). */
RUMUS__HIDDEN void rumus__scratch_begin(rumus_ctx *ctx);
RUMUS__HIDDEN int rumus__scratch_slot(rumus_ctx *ctx, const char *op, int slot,
                                      size_t bytes, cl_mem *out);
RUMUS__HIDDEN void rumus__scratch_end(rumus_ctx *ctx);
/* Frees the reusable buffers; the caller waited for the queue. */
RUMUS__HIDDEN void rumus__scratch_free(rumus_ctx *ctx);

#endif /* RUMUS_INTERNAL_H */
