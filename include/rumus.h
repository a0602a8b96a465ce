/*
 * rumus.h - OpenCL C kernels for training neural networks, with a C host runtime.
 *
 * rumus compiles its kernels at run time on whatever OpenCL 1.2+ device the
 * machine has (a GPU, or the CPU through PoCL) and runs them on tensors that
 * live in device memory.  This header and rumus_version.h, which it
 * includes, are the whole public interface.
 *
 * Objects
 *   rumus_ctx     one OpenCL device, context and in-order command queue, plus
 *                 the compiled kernel programs.  Create it on a device of your
 *                 choice, or adopt the cl_context / cl_device_id /
 *                 cl_command_queue your application already has.
 *   rumus_tensor  a storage type, a shape of up to RUMUS_MAX_DIMS dimensions
 *                 (row-major, last dimension contiguous) and a device buffer
 *                 that the tensor owns or borrows (cl_mem + byte offset).
 *
 * Errors
 *   Every function that can fail returns an int status: RUMUS_OK (0) or a
 *   negative RUMUS_E* code; rumus_strerror() gives the code's text.  The
 *   details of a failure (the op, the shapes, the OpenCL call and its error,
 *   a build log) are kept per thread, as errno is: rumus_ctx_errmsg(ctx),
 *   rumus_ctx_errcode(ctx) and rumus_ctx_last_cl_error(ctx) give the calling
 *   thread's last failure when that failure was on ctx, and "", RUMUS_OK
 *   and CL_SUCCESS otherwise.  A thread's message stays valid and unchanged
 *   until that thread's next failure (on any context) or its exit:
 *   successful calls leave it alone and other threads' failures never touch
 *   it.  Failures before there is a context (rumus_ctx_create(),
 *   rumus_ctx_adopt(), rumus_device_count(), rumus_device_describe()) are
 *   described by rumus_last_create_error(), per thread too.  Failed OpenCL
 *   calls give RUMUS_ENOMEM (CL_OUT_OF_HOST_MEMORY), RUMUS_EDEVMEM
 *   (CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES) or RUMUS_ECL,
 *   and a message that names the call: wherever a function below lists
 *   RUMUS_ECL, read "RUMUS_ECL, RUMUS_EDEVMEM or RUMUS_ENOMEM".  The
 *   library never prints, aborts or exits.
 *
 * Execution
 *   Ops check their arguments, enqueue kernels on the context's in-order
 *   queue and return.  Call rumus_ctx_sync() to wait: it also reports errors
 *   that only the device can see, such as a class index out of range.
 *
 * Threads
 *   Several threads may share one context and call at the same time: every
 *   op, rumus_tensor_create / _wrap / _free / _upload / _download / _fill /
 *   _copy, rumus_ctx_sync(), rumus_ctx_kernel_time() / _span(),
 *   rumus_cache_fill(), rumus_cache_clear() and the queries
 *   (rumus_ctx_get_option(), rumus_ctx_device_name(), ...).  The context's
 *   lock serialises the program cache, kernel arguments and launches;
 *   commands of all threads go into its one in-order queue in the order
 *   their calls take the lock, so threads that use the same tensor must
 *   order those calls themselves, as with any shared data.  A tensor is not
 *   freed or reshaped while another thread uses it.  rumus_ctx_sync() waits
 *   for every thread's commands, and a device-side error (RUMUS_EINDEX) is
 *   reported by the first sync that reads it, whichever thread made it;
 *   rumus_ctx_kernel_time() sums every thread's kernels.
 *   Not concurrent with any other call on the same context:
 *   rumus_ctx_set_option() (ops read the options without the lock: set them
 *   before the context is shared) and rumus_ctx_free() (once every other
 *   thread is done with the context and its tensors).
 */
#ifndef RUMUS_H
#define RUMUS_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define RUMUS_API
#elif defined(__GNUC__) && __GNUC__ >= 4
#define RUMUS_API __attribute__((visibility("default")))
#else
#define RUMUS_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

/* RUMUS_VERSION_MAJOR, _MINOR, _PATCH and RUMUS_VERSION_STRING, generated
 * by configure from the one version number in configure.ac. */
#include "rumus_version.h"
#define RUMUS_VERSION_NUMBER \
  (RUMUS_VERSION_MAJOR * 10000 + RUMUS_VERSION_MINOR * 100 + RUMUS_VERSION_PATCH)

/*! rumus_version_number() : the RUMUS_VERSION_NUMBER the library was built as. */
RUMUS_API unsigned rumus_version_number(void);
/*! rumus_version_string() : "MAJOR.MINOR.PATCH", static storage. */
RUMUS_API const char *rumus_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

/* The one list of status codes: the enum, rumus_strerror() and
 * rumus_err_name() are generated from it.  Values are stable and grouped by
 * tens: arguments 10s, shapes and types 20s, device 30s, build 40s,
 * memory 50s, state 60s.  -70 and -71 (RUMUS_EIO, RUMUS_EFORMAT) are
 * retired: files are rumus-train's business, not the library's, and the
 * two values are never given to another code. */
#define RUMUS_ERRNO_MAP(XX)                                                   \
  XX(OK, 0, "success")                                                        \
  XX(EINVAL, -10, "invalid argument")                                         \
  XX(ENULL, -11, "NULL handle or pointer")                                    \
  XX(EOPTION, -12, "unknown option or option value out of range")             \
  XX(EDTYPE, -20, "unsupported or mismatched storage type")                   \
  XX(ESHAPE, -21, "shape mismatch")                                           \
  XX(ESIZE, -22, "buffer too small for the bytes the op touches")             \
  XX(EINDEX, -23, "index out of range (detected on the device)")              \
  XX(ENODEVICE, -30, "no OpenCL device matches")                              \
  XX(ECL, -31, "OpenCL call failed")                                          \
  XX(EUNSUPPORTED, -32, "the device lacks a required feature")                \
  XX(EBUILD, -40, "a kernel program failed to build")                         \
  XX(ENOSOURCE, -41, "kernel source not found")                               \
  XX(ENOMEM, -50, "out of host memory")                                       \
  XX(EDEVMEM, -51, "out of device memory or resources")                       \
  XX(EBUSY, -60, "the context still has live tensors")

typedef enum {
#define RUMUS__ERRNO_ENUM(name, value, msg) RUMUS_##name = (value),
  RUMUS_ERRNO_MAP(RUMUS__ERRNO_ENUM)
#undef RUMUS__ERRNO_ENUM
} rumus_status;

/*! rumus_strerror() : the message of a status code, static storage.
 *  Unknown codes give "unknown status". */
RUMUS_API const char *rumus_strerror(int status);
/*! rumus_err_name() : the name of a status code ("RUMUS_ESHAPE"), static
 *  storage.  Unknown codes give "RUMUS_UNKNOWN". */
RUMUS_API const char *rumus_err_name(int status);

/* ------------------------------------------------------------------------ */
/* Devices and contexts                                                      */
/* ------------------------------------------------------------------------ */

typedef struct rumus_ctx rumus_ctx;

/*! rumus_device_count() :
 *  Counts the OpenCL devices of every platform, in the order used by device
 *  indices.  @return RUMUS_OK, RUMUS_ENULL, or the status of a failed
 *  OpenCL call (RUMUS_ECL, RUMUS_EDEVMEM, RUMUS_ENOMEM; details in
 *  rumus_last_create_error()); *count is 0 when there is no platform. */
RUMUS_API int rumus_device_count(int *count);

/*! rumus_device_describe() :
 *  Writes "platform / device (type, OpenCL C x.y, N compute units)" of
 *  device `index` into buf (always NUL-terminated when len > 0).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_ENODEVICE, or the status of a
 *          failed OpenCL call as rumus_device_count(); details in
 *          rumus_last_create_error(). */
RUMUS_API int rumus_device_describe(int index, char *buf, size_t len);

/* Flags of rumus_ctx_create(). */
#define RUMUS_CTX_PROFILING 1u /* queue with CL_QUEUE_PROFILING_ENABLE */

/*! rumus_ctx_create() :
 *  Creates a context, a device and an in-order queue on one device.
 *  `device` selects it: a decimal index (see rumus_device_count()) or a
 *  case-insensitive substring of "platform / device name".  NULL means the
 *  environment variable RUMUS_DEVICE if set, else the first GPU, else the
 *  first device.  `flags` is 0 or RUMUS_CTX_PROFILING.
 *  On success *out owns the new context; free it with rumus_ctx_free().
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (unknown flag),
 *          RUMUS_ENODEVICE, RUMUS_EUNSUPPORTED (OpenCL C older than 1.1 or
 *          unreadable), RUMUS_ECL, RUMUS_EDEVMEM, RUMUS_ENOMEM (a failed
 *          OpenCL call, device queries included).  On failure *out is NULL,
 *          nothing is left allocated and the details (the OpenCL call and
 *          its error) can be read with rumus_last_create_error(). */
RUMUS_API int rumus_ctx_create(rumus_ctx **out, const char *device,
                               unsigned flags);

/*! rumus_ctx_adopt() :
 *  Creates a rumus context on an application's existing OpenCL objects.
 *  The queue must be in-order and belong to `context` and `device`.  rumus
 *  retains the three objects and releases them in rumus_ctx_free(); the
 *  application keeps its own references.  On failure rumus holds no
 *  reference (a retain that failed is not released).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (out-of-order queue, or a
 *          queue of another context or device), RUMUS_EUNSUPPORTED,
 *          RUMUS_ECL, RUMUS_EDEVMEM, RUMUS_ENOMEM; details in
 *          rumus_last_create_error(). */
RUMUS_API int rumus_ctx_adopt(rumus_ctx **out, cl_context context,
                              cl_device_id device, cl_command_queue queue);

/*! rumus_ctx_free() :
 *  Waits for the queue, frees the programs and releases the OpenCL objects.
 *  A failed wait or release is not reported: OpenCL keeps objects alive
 *  while commands use them, and rumus gives up its references either way.
 *  Freeing NULL is a no-op that returns RUMUS_OK.  Not concurrent with any
 *  other call on the context.
 *  @return RUMUS_OK, or RUMUS_EBUSY (nothing freed) while tensors created on
 *          the context are alive. */
RUMUS_API int rumus_ctx_free(rumus_ctx *ctx);

/*! rumus_last_create_error() : details of the calling thread's last
 *  failed rumus_ctx_create(), rumus_ctx_adopt(), rumus_device_count() or
 *  rumus_device_describe(), or "" when its last such call succeeded;
 *  thread-local storage. */
RUMUS_API const char *rumus_last_create_error(void);

/*! rumus_ctx_sync() :
 *  Waits until every command enqueued on the context's queue has finished,
 *  then reports errors found on the device since the last sync (the first
 *  one wins; the flag is then cleared).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINDEX (with the op, the bad value
 *          and its position in rumus_ctx_errmsg()), RUMUS_ECL,
 *          RUMUS_EDEVMEM, RUMUS_ENOMEM. */
RUMUS_API int rumus_ctx_sync(rumus_ctx *ctx);

/*! rumus_ctx_errmsg() : the details of the calling thread's last failure
 *  if it was on ctx, else "" (see "Errors" above).  Thread-local storage,
 *  valid until the thread's next failure; "NULL context" (static) for a
 *  NULL ctx. */
RUMUS_API const char *rumus_ctx_errmsg(const rumus_ctx *ctx);
/*! rumus_ctx_errcode() : the status of the calling thread's last failure if
 *  it was on ctx, else RUMUS_OK; RUMUS_ENULL for a NULL ctx. */
RUMUS_API int rumus_ctx_errcode(const rumus_ctx *ctx);
/*! rumus_ctx_last_cl_error() : the cl_int of that failure's OpenCL call;
 *  CL_SUCCESS if it was not an OpenCL call, was not on ctx, or ctx is
 *  NULL. */
RUMUS_API cl_int rumus_ctx_last_cl_error(const rumus_ctx *ctx);

/* Options of a context (rumus_ctx_set_option / rumus_ctx_get_option). */
typedef enum {
  /* Which reduction kernels to run: RUMUS_VARIANT_AUTO (by device type, the
   * default), RUMUS_VARIANT_GPU (work-group reductions in local memory) or
   * RUMUS_VARIANT_CPU (barrier-free, one work-item per row, vector
   * accumulators).  The environment variable RUMUS_VARIANT=gpu|cpu|auto
   * sets the initial value. */
  RUMUS_OPT_VARIANT = 1,
  /* Work-group size of reduction kernels: 0 picks it per kernel from the
   * device limits and the row length (128 or 256 for rows held in
   * registers, 256 otherwise); otherwise a power of two from 16 to the
   * device maximum, used for every reduction and as dropout's local size
   * (which changes no result).  The environment variable
   * RUMUS_WORKGROUP_SIZE sets the initial value (ignored unless valid). */
  RUMUS_OPT_WORKGROUP_SIZE = 2
} rumus_option;

enum { RUMUS_VARIANT_AUTO = 0, RUMUS_VARIANT_GPU = 1, RUMUS_VARIANT_CPU = 2 };

/*! rumus_ctx_set_option() : sets option `opt` of the context to `value`
 *  (rumus_option lists the options and their values); ops launched
 *  afterwards use it.  Not concurrent with any other call on the context
 *  (ops read the options without its lock): set options before the
 *  context is shared between threads.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EOPTION (unknown option or a value
 *          out of its range; the option keeps its value). */
RUMUS_API int rumus_ctx_set_option(rumus_ctx *ctx, rumus_option opt, int value);
/*! rumus_ctx_get_option() : the current value of option `opt` into
 *  *value (as set by rumus_ctx_set_option() or from the environment at
 *  creation; RUMUS_OPT_VARIANT gives the setting, AUTO included, and
 *  rumus_ctx_uses_gpu_variant() the variant it resolves to).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EOPTION (unknown option). */
RUMUS_API int rumus_ctx_get_option(const rumus_ctx *ctx, rumus_option opt,
                                   int *value);

/*! rumus_ctx_device_name() : "platform / device", owned by the context. */
RUMUS_API const char *rumus_ctx_device_name(const rumus_ctx *ctx);
/*! rumus_ctx_is_gpu() : 1 if the device reports CL_DEVICE_TYPE_GPU, else 0. */
RUMUS_API int rumus_ctx_is_gpu(const rumus_ctx *ctx);
/*! rumus_ctx_uses_gpu_variant() : 1 if reduction ops currently run their
 *  work-group (GPU) variant, 0 for the CPU variant. */
RUMUS_API int rumus_ctx_uses_gpu_variant(const rumus_ctx *ctx);

/* The context's OpenCL objects, still owned by the context. */
RUMUS_API cl_context rumus_ctx_cl_context(const rumus_ctx *ctx);
RUMUS_API cl_device_id rumus_ctx_cl_device(const rumus_ctx *ctx);
RUMUS_API cl_command_queue rumus_ctx_cl_queue(const rumus_ctx *ctx);

/*! rumus_ctx_kernel_time() :
 *  On a profiling queue (RUMUS_CTX_PROFILING, or an adopted queue created
 *  with CL_QUEUE_PROFILING_ENABLE), the summed device time in nanoseconds
 *  of the kernels launched since the previous call, by any thread; it
 *  waits for them.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EUNSUPPORTED (no profiling queue),
 *          RUMUS_ECL. */
RUMUS_API int rumus_ctx_kernel_time(rumus_ctx *ctx, uint64_t *ns);

/*! rumus_ctx_kernel_span() :
 *  rumus_ctx_kernel_time() that also gives, in *span_ns, the time from the
 *  first kernel's start to the last one's end (the sum plus the device's
 *  gaps between them: for an op of several kernels, what CUDA events around
 *  it would measure; 0 when there were none).  Either pointer may be NULL
 *  but not both.  @return as rumus_ctx_kernel_time(). */
RUMUS_API int rumus_ctx_kernel_span(rumus_ctx *ctx, uint64_t *busy_ns,
                                    uint64_t *span_ns);

/* One (op, kernel) pair's share of the device time. */
#define RUMUS_PROFILE_NAME 48 /* bytes of a name, NUL included (longer ones
                                 are cut) */
typedef struct {
  char op[RUMUS_PROFILE_NAME];     /* the public op, e.g. "rumus_gemm" */
  char kernel[RUMUS_PROFILE_NAME]; /* the OpenCL kernel it launched */
  uint64_t launches;
  uint64_t ns; /* summed device time of those launches */
} rumus_kernel_stat;

/*! rumus_ctx_kernel_profile() :
 *  rumus_ctx_kernel_time() split by (op, kernel): waits for the kernels
 *  launched since the previous call of any of these three functions, by
 *  any thread, and forgets them after counting.  Writes the first
 *  min(cap, *count) pairs into out, the most device time first, and sets
 *  *count to the number of distinct pairs (out may be NULL when cap is 0:
 *  the call then only counts, and still forgets).  Each launch keeps one
 *  small record until then, so call it now and then in long profiled runs.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EUNSUPPORTED (no profiling queue),
 *          RUMUS_ENOMEM, RUMUS_ECL. */
RUMUS_API int rumus_ctx_kernel_profile(rumus_ctx *ctx, rumus_kernel_stat *out,
                                       size_t cap, size_t *count);

/*! rumus_cache_fill() :
 *  Builds every kernel program that the ops can choose under the context's
 *  current options (variant, work-group size) for F32 storage: every row
 *  plan and alignment of the reduction ops, every GEMM tile size and
 *  transpose, so that no op builds a program afterwards (see
 *  rumus_cache_stats()).  Building is most of the first call's cost; a
 *  driver may still do some work at a kernel's first launch (PoCL compiles
 *  a work-group function per kernel and local size then, kept in its
 *  on-disk cache): docs/PERFORMANCE.md gives start-up times cold and warm.
 *  Changing RUMUS_OPT_VARIANT or RUMUS_OPT_WORKGROUP_SIZE afterwards can
 *  need other programs.
 *  @return RUMUS_OK, RUMUS_ENULL, or the build error (RUMUS_EBUILD with the
 *          log in rumus_ctx_errmsg()), RUMUS_ECL, RUMUS_ENOMEM. */
RUMUS_API int rumus_cache_fill(rumus_ctx *ctx);

/* Statistics of a context's program cache. */
typedef struct {
  size_t programs; /* compiled programs held by the cache now */
  uint64_t builds; /* programs built since the context was created */
} rumus_cache_info;

/*! rumus_cache_stats() : fills *out.  A program is built at most once per
 *  (kernel file, options) until rumus_cache_clear(); `builds` counts every
 *  build, so an op that builds nothing leaves it unchanged.
 *  @return RUMUS_OK, RUMUS_ENULL. */
RUMUS_API int rumus_cache_stats(rumus_ctx *ctx, rumus_cache_info *out);
/*! rumus_cache_clear() : frees every compiled program of the context and
 *  the scratch buffers it keeps between ops (GEMM's packed panels on CPU
 *  devices, up to 2 x 64 MiB), after waiting for the queue.  Other threads
 *  may launch meanwhile: they rebuild what they need.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_ECL. */
RUMUS_API int rumus_cache_clear(rumus_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

#define RUMUS_MAX_DIMS 8

/* Storage types.  Every op that takes F32 tensors also takes F16 and BF16
 * ones (each op's contract says which tensors of a call must share a
 * type); arithmetic and every accumulator are float whatever the storage,
 * and results are rounded to nearest even once, when stored.  Neither
 * needs cl_khr_fp16. */
typedef enum {
  RUMUS_F32 = 1,
  RUMUS_F16 = 2,  /* IEEE half: 11-bit significand, largest finite 65504 */
  RUMUS_BF16 = 3, /* bfloat16: float's upper 16 bits, 8-bit significand */
  RUMUS_I32 = 4,  /* class indices, token ids */
  RUMUS_I8 = 5    /* int8: the values of Q8 blocks (see Quantization) */
} rumus_dtype;

/*! rumus_dtype_size() : bytes of one element, 0 for an unknown type. */
RUMUS_API size_t rumus_dtype_size(rumus_dtype dtype);
/*! rumus_dtype_name() : "f32", "f16", "bf16", "i32", "i8", static storage;
 *  "unknown" for an unknown type. */
RUMUS_API const char *rumus_dtype_name(rumus_dtype dtype);

/*! Host conversions between float and the 16-bit storage types, as the
 *  kernels convert: narrowing rounds to nearest even; NaN stays a (quiet)
 *  NaN; F16 overflows to +-infinity from 65520 up (its largest finite
 *  value is 65504) and goes through subnormals to +-0 below 2^-24; BF16
 *  keeps float's exponent range, so only values within half an ulp of
 *  FLT_MAX's rounding overflow.  Widening is exact. */
RUMUS_API uint16_t rumus_f32_to_f16(float x);
RUMUS_API float rumus_f16_to_f32(uint16_t h);
RUMUS_API uint16_t rumus_f32_to_bf16(float x);
RUMUS_API float rumus_bf16_to_f32(uint16_t b);

typedef struct rumus_tensor rumus_tensor;

/* Tensors that share memory.  Several tensors may wrap one buffer.  An op
 * whose contract says that an output "may alias" an input accepts them as
 * the same bytes (same buffer, offset and size: in-place use); any other
 * overlap of an output with another tensor of the op in one buffer (a view
 * one row into another's bytes, an output passed twice) makes the op
 * return RUMUS_EINVAL, naming both byte ranges, before anything runs. */

/*! rumus_tensor_create() :
 *  Creates a tensor that owns a new device buffer (contents undefined).
 *  ndim is 0 (a scalar) to RUMUS_MAX_DIMS; a zero extent gives an empty
 *  tensor, on which ops do nothing.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (ndim), RUMUS_EDTYPE,
 *          RUMUS_ESIZE (byte count overflows size_t or exceeds the
 *          device's largest allocation), RUMUS_EDEVMEM, RUMUS_ENOMEM. */
RUMUS_API int rumus_tensor_create(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                  const size_t *shape, rumus_tensor **out);

/*! rumus_tensor_wrap() :
 *  Creates a tensor that borrows `offset` bytes into the application's
 *  buffer `buf` (of the context's cl_context).  rumus retains buf and
 *  releases it in rumus_tensor_free(); it never frees the memory itself.
 *  On failure rumus holds no reference to buf.  offset must be a multiple
 *  of the element size.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (ndim, misaligned offset),
 *          RUMUS_EDTYPE, RUMUS_ESIZE (offset + bytes exceed the buffer),
 *          RUMUS_ECL, RUMUS_ENOMEM. */
RUMUS_API int rumus_tensor_wrap(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                                const size_t *shape, cl_mem buf, size_t offset,
                                rumus_tensor **out);

/*! rumus_tensor_free() : releases the tensor (and its buffer if owned, or
 *  its reference to a wrapped buffer).  Commands already enqueued on it
 *  still complete.  A failed clReleaseMemObject is not reported (rumus
 *  gives up the reference either way).  NULL is a no-op. */
RUMUS_API void rumus_tensor_free(rumus_tensor *t);

/*! rumus_tensor_upload() / rumus_tensor_download() :
 *  Blocking copies between host memory and the whole tensor; nbytes must be
 *  rumus_tensor_nbytes(t).  Download waits for the commands before it.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_ESIZE, RUMUS_ECL. */
RUMUS_API int rumus_tensor_upload(rumus_tensor *t, const void *src,
                                  size_t nbytes);
RUMUS_API int rumus_tensor_download(const rumus_tensor *t, void *dst,
                                    size_t nbytes);

/*! rumus_tensor_upload_f32() / rumus_tensor_download_f32() :
 *  rumus_tensor_upload() / _download() of n = rumus_tensor_numel(t) floats
 *  for a tensor of any floating type, converted on the host as
 *  rumus_f32_to_f16() / rumus_f32_to_bf16() and back.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE (not a floating tensor),
 *          RUMUS_ESIZE (n), RUMUS_ENOMEM, RUMUS_ECL. */
RUMUS_API int rumus_tensor_upload_f32(rumus_tensor *t, const float *src,
                                      size_t n);
RUMUS_API int rumus_tensor_download_f32(const rumus_tensor *t, float *dst,
                                        size_t n);

/*! rumus_tensor_fill() : enqueues t[i] = value for every element.  F16
 *  and BF16 tensors get value rounded as rumus_f32_to_f16() / _bf16() do.
 *  I32 tensors get value truncated toward zero, saturated to INT32_MIN /
 *  INT32_MAX below and above the int32 range (infinities included); I8
 *  tensors likewise, saturated to -128 / 127; NaN is refused for both.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (NaN for an I32 or I8 tensor),
 *          RUMUS_EDTYPE (unknown type), RUMUS_ECL. */
RUMUS_API int rumus_tensor_fill(rumus_tensor *t, float value);

/*! rumus_tensor_copy() : enqueues a copy of src into dst (same type and
 *  element count).  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (tensors of
 *  two contexts), RUMUS_EDTYPE, RUMUS_ESHAPE, RUMUS_ECL. */
RUMUS_API int rumus_tensor_copy(rumus_tensor *dst, const rumus_tensor *src);

/*! rumus_tensor_reshape() : gives t a new shape with the same element
 *  count.  Not concurrent with other uses of t.
 *  @return RUMUS_OK, RUMUS_ENULL (shape NULL with ndim > 0), RUMUS_EINVAL
 *          (ndim), RUMUS_ESIZE (the new shape's element count overflows
 *          size_t), RUMUS_ESHAPE (another element count). */
RUMUS_API int rumus_tensor_reshape(rumus_tensor *t, int ndim,
                                   const size_t *shape);

RUMUS_API rumus_dtype rumus_tensor_dtype(const rumus_tensor *t);
RUMUS_API int rumus_tensor_ndim(const rumus_tensor *t);
/*! rumus_tensor_dim() : extent of dimension i (negative i counts from the
 *  end); 0 when i is out of range. */
RUMUS_API size_t rumus_tensor_dim(const rumus_tensor *t, int i);
RUMUS_API size_t rumus_tensor_numel(const rumus_tensor *t);
RUMUS_API size_t rumus_tensor_nbytes(const rumus_tensor *t);
/*! rumus_tensor_cl_mem() : the buffer (still owned as before) and, if
 *  offset is not NULL, the byte offset of element 0 in it.  An empty tensor
 *  may have no buffer (NULL). */
RUMUS_API cl_mem rumus_tensor_cl_mem(const rumus_tensor *t, size_t *offset);

/* ------------------------------------------------------------------------ */
/* Softmax and cross-entropy                                                 */
/* ------------------------------------------------------------------------ */
/* These ops work over the last dimension: a tensor of shape [..., C] is
 * rows x C with rows the product of the other extents.  x and y may be the
 * same tensor (in place).  A row whose entries are all -INFINITY gives NaN,
 * as in PyTorch.
 * Storage types: softmax and log-softmax, forward and backward, take F32,
 * F16 or BF16 tensors, all of one type in a call (RUMUS_EDTYPE otherwise,
 * naming the argument).  rumus_cross_entropy() takes F32, F16 or BF16
 * logits, a gradient of the logits' type, I32 targets, and a loss in F32
 * whatever the logits (a float loss of half logits, as PyTorch's autocast
 * gives) or in the logits' type.  Arithmetic is float whatever the
 * storage: 16-bit values widen exactly, sums and the log-sum-exp are float,
 * and each output is rounded once to its type (nearest even); reduced
 * losses are summed in float before that one rounding.  An F16 output
 * beyond 65504 in magnitude (a log-softmax or loss of huge logits) is
 * +-infinity.  rumus_cache_fill() builds the F32 programs only: a 16-bit
 * call builds its programs at first use. */

/*! rumus_softmax_fwd() : y = exp(x - max) / sum(exp(x - max)) per row.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE (x not floating, or y of
 *          another type), RUMUS_ESHAPE (x and y differ in shape, or ndim
 *          0), RUMUS_EINVAL (another context, partial overlap),
 *          RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_softmax_fwd(rumus_ctx *ctx, const rumus_tensor *x,
                                rumus_tensor *y);
/*! rumus_log_softmax_fwd() : y = x - max - log(sum(exp(x - max))) per row.
 *  Errors as rumus_softmax_fwd(). */
RUMUS_API int rumus_log_softmax_fwd(rumus_ctx *ctx, const rumus_tensor *x,
                                    rumus_tensor *y);
/*! rumus_softmax_bwd() : dx = y * (dy - sum(dy * y)) per row, with y the
 *  softmax output; dy and dx of y's type.  dx may alias dy, not y.  Errors
 *  as rumus_softmax_fwd(). */
RUMUS_API int rumus_softmax_bwd(rumus_ctx *ctx, const rumus_tensor *y,
                                const rumus_tensor *dy, rumus_tensor *dx);
/*! rumus_log_softmax_bwd() : dx = dy - exp(y) * sum(dy) per row, with y the
 *  log-softmax output.  dx may alias dy, not y.  Errors as
 *  rumus_softmax_fwd(). */
RUMUS_API int rumus_log_softmax_bwd(rumus_ctx *ctx, const rumus_tensor *y,
                                    const rumus_tensor *dy, rumus_tensor *dx);

typedef enum {
  RUMUS_REDUCTION_MEAN = 0, /* sum over non-ignored rows / their count */
  RUMUS_REDUCTION_SUM = 1,
  RUMUS_REDUCTION_NONE = 2  /* one loss per row */
} rumus_reduction;

/* Parameters of rumus_cross_entropy(); RUMUS_XENT_DEFAULTS gives PyTorch's
 * defaults. */
typedef struct {
  rumus_reduction reduction;
  int32_t ignore_index;  /* rows with this target: zero loss and gradient */
  float label_smoothing; /* in [0, 1] */
  float grad_scale;      /* upstream gradient of the loss (1 for training) */
} rumus_xent_params;

#define RUMUS_XENT_DEFAULTS {RUMUS_REDUCTION_MEAN, -100, 0.0f, 1.0f}

/*! rumus_cross_entropy() :
 *  Fused cross-entropy of logits [..., C] against int32 class targets
 *  [...] (the logits' shape without its last dimension).  One pass over
 *  each row computes its log-sum-exp, its loss
 *      (1 - s) * (lse - x[t]) + s * (lse - mean_j x[j])   (s = smoothing)
 *  and, if grad is not NULL, the gradient
 *      grad = (softmax(x) - (1 - s) * onehot(t) - s / C) * scale
 *  where scale = grad_scale / (count of non-ignored rows) for MEAN and
 *  grad_scale otherwise.  loss is a scalar (ndim 0, or one element) for
 *  MEAN and SUM, and has the targets' shape for NONE.  A MEAN over zero
 *  rows gives NaN, as in PyTorch.  The reduction runs on the device in a
 *  fixed order (deterministic for any batch size).  params NULL means
 *  RUMUS_XENT_DEFAULTS.
 *  A target outside [0, C) that is not ignore_index is caught on the device:
 *  nothing is read or written outside the buffers, that row's loss is NaN
 *  and its gradient 0, and the next rumus_ctx_sync() returns RUMUS_EINDEX.
 *  No output may share memory with another tensor of the call.
 *  Types: logits F32, F16 or BF16; grad the logits' type; targets I32;
 *  loss F32 or the logits' type (see the section's text).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE (a type outside those
 *          rules), RUMUS_ESHAPE, RUMUS_EINVAL (reduction,
 *          label_smoothing, overlapping tensors), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_cross_entropy(rumus_ctx *ctx, const rumus_tensor *logits,
                                  const rumus_tensor *targets,
                                  rumus_tensor *loss, rumus_tensor *grad,
                                  const rumus_xent_params *params);

/* ------------------------------------------------------------------------ */
/* GEMM                                                                      */
/* ------------------------------------------------------------------------ */

typedef enum { RUMUS_NO_TRANS = 0, RUMUS_TRANS = 1 } rumus_transpose;

/* Storage types of rumus_gemm() and rumus_gemm_ex(): A and B have one
 * floating type T (RUMUS_F32, RUMUS_F16 or RUMUS_BF16) and C is T or
 * RUMUS_F32, so 16-bit operands may accumulate into a float C.  Products
 * and sums are float whatever the storage (16-bit values widen exactly);
 * a 16-bit C receives alpha * op(A) * op(B) + beta * C rounded once, to
 * nearest even.  Any other combination (A and B of two types, C of a
 * third type, a 16-bit C under F32 operands) is RUMUS_EDTYPE, with a
 * message naming the tensors and their types, before shapes and layouts
 * are checked.  Offsets, leading sizes and strides count elements of each
 * tensor's own type. */

/*! rumus_gemm() :
 *  C = alpha * op(A) * op(B) + beta * C on row-major tensors, op(X) = X or
 *  X^T.  2-D: A is [M, K] ([K, M] if transposed), B is [K, N] ([N, K]),
 *  C is [M, N].  3-D (batched): C is [batch, M, N] and A and B are either
 *  [batch, ...] or 2-D (the same matrix for every batch).  With beta == 0
 *  C is not read (NaN in C does not propagate).  K == 0 gives beta * C.
 *  C must not share memory with A or B (unless K == 0 or alpha == 0,
 *  when they are not read).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE, RUMUS_EINVAL
 *          (transpose values, overlap), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_gemm(rumus_ctx *ctx, rumus_transpose ta, rumus_transpose tb,
                         float alpha, const rumus_tensor *A,
                         const rumus_tensor *B, float beta, rumus_tensor *C);

/*! rumus_gemm_bias() :
 *  rumus_gemm() with a bias row added in the same pass (PyTorch's
 *  F.linear(x, W, b) is rumus_gemm_bias(ctx, RUMUS_NO_TRANS, RUMUS_TRANS,
 *  1, x, W, 0, b, y)): C = alpha * op(A) * op(B) + beta * C + bias, the
 *  1-D bias [N], of C's type, added to every row of C (of every batch),
 *  in that order and in float, each element of C rounded once.  With F32
 *  C, alpha 1 and beta 0 the result has the bits of rumus_gemm() followed
 *  by rumus_bias_add(); a 16-bit C rounds once where that pair rounds
 *  twice.  K == 0 or alpha == 0 gives beta * C + bias.  The bias must not
 *  share memory with C.
 *  @return as rumus_gemm(), and RUMUS_ENULL (bias NULL), RUMUS_EDTYPE
 *          (bias not C's type), RUMUS_ESHAPE (bias not [N]), RUMUS_EINVAL
 *          (bias overlapping C). */
RUMUS_API int rumus_gemm_bias(rumus_ctx *ctx, rumus_transpose ta,
                              rumus_transpose tb, float alpha,
                              const rumus_tensor *A, const rumus_tensor *B,
                              float beta, const rumus_tensor *bias,
                              rumus_tensor *C);

/* Strided-batch description for rumus_gemm_ex(): element offsets, leading
 * sizes (row pitch, in elements) and batch strides (0 repeats a matrix). */
typedef struct {
  size_t m, n, k, batch;
  size_t a_offset, lda, stride_a;
  size_t b_offset, ldb, stride_b;
  size_t c_offset, ldc, stride_c;
} rumus_gemm_layout;

/*! rumus_gemm_ex() :
 *  Strided-batched GEMM on 1-D views of A, B and C: for each b < batch,
 *  C_b = alpha * op(A_b) * op(B_b) + beta * C_b with A_b starting at
 *  a_offset + b * stride_a, rows lda apart, and so on.  The leading sizes
 *  must be at least the rows' lengths (lda >= K, or M if ta), and every
 *  element touched must lie inside its tensor.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_EINVAL (leading size
 *          too small), RUMUS_ESIZE (touches past a tensor), RUMUS_EBUILD,
 *          RUMUS_ECL. */
RUMUS_API int rumus_gemm_ex(rumus_ctx *ctx, rumus_transpose ta,
                            rumus_transpose tb, float alpha,
                            const rumus_tensor *A, const rumus_tensor *B,
                            float beta, rumus_tensor *C,
                            const rumus_gemm_layout *layout);

/* ------------------------------------------------------------------------ */
/* Bias, element-wise ops and activations                                    */
/* ------------------------------------------------------------------------ */

/* Storage types: every op of this section takes F32, F16 or BF16 tensors,
 * all of one type in a call (RUMUS_EDTYPE otherwise), except that
 * rumus_bias_grad's dbias may also be F32 for F16 or BF16 dy.  Arithmetic
 * is float whatever the storage: 16-bit inputs are widened exactly, each
 * result is rounded once to the output's type (nearest even), and the bias
 * gradient's sums stay float until the one rounding of dbias.  An F16
 * result of magnitude 65520 or more is stored as +-infinity (65504 is
 * F16's largest value).  rumus_cache_fill() builds the F32 programs of
 * these ops (and the one program of the casts): a 16-bit call builds its
 * program at first use. */

/*! rumus_bias_add() : y[r, j] += bias[j] for y of shape [..., F] and bias
 *  [F] of y's type (which must not share memory).  @return RUMUS_OK,
 *  RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE, RUMUS_EINVAL (a tensor of
 *  another context, overlap), RUMUS_EBUILD, RUMUS_ECL, RUMUS_EDEVMEM
 *  (rumus_bias_grad's scratch buffer). */
RUMUS_API int rumus_bias_add(rumus_ctx *ctx, rumus_tensor *y,
                             const rumus_tensor *bias);
/*! rumus_bias_grad() : dbias[j] = sum over rows r of dy[r, j] (for dy of
 *  shape [..., F]); deterministic.  dbias is of dy's type, or F32 (16-bit
 *  gradients summed into float master gradients: the float sums are then
 *  stored unrounded).  Errors as rumus_bias_add(). */
RUMUS_API int rumus_bias_grad(rumus_ctx *ctx, const rumus_tensor *dy,
                              rumus_tensor *dbias);

/*! Element-wise ops on tensors of equal element count and one type (out
 *  may alias an input): out = a + b, a - b, a * b; rumus_scale: out =
 *  alpha * x; rumus_axpy: y = alpha * x + y.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE, RUMUS_EINVAL
 *  (a tensor of another context, partial overlap), RUMUS_EBUILD,
 *  RUMUS_ECL. */
RUMUS_API int rumus_add(rumus_ctx *ctx, const rumus_tensor *a,
                        const rumus_tensor *b, rumus_tensor *out);
RUMUS_API int rumus_sub(rumus_ctx *ctx, const rumus_tensor *a,
                        const rumus_tensor *b, rumus_tensor *out);
RUMUS_API int rumus_mul(rumus_ctx *ctx, const rumus_tensor *a,
                        const rumus_tensor *b, rumus_tensor *out);
RUMUS_API int rumus_scale(rumus_ctx *ctx, float alpha, const rumus_tensor *x,
                          rumus_tensor *out);
RUMUS_API int rumus_axpy(rumus_ctx *ctx, float alpha, const rumus_tensor *x,
                         rumus_tensor *y);

typedef enum {
  RUMUS_ACT_RELU = 0,
  RUMUS_ACT_LEAKY_RELU = 1, /* param = negative slope (PyTorch: 0.01) */
  RUMUS_ACT_SIGMOID = 2,
  RUMUS_ACT_TANH = 3,
  RUMUS_ACT_GELU_TANH = 4, /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
  RUMUS_ACT_GELU_ERF = 5   /* 0.5x(1 + erf(x / sqrt(2))) */
} rumus_activation;

/*! rumus_activation_fwd() : y = act(x) element-wise, x and y of one type
 *  (y may alias x).  ReLU and leaky ReLU are exact; the others are within
 *  1e-6 + 2e-6 |y| of the exact value of the stored x in F32, and in
 *  F16 / BF16 within 1e-6 + 2e-5 |y| before the rounding to the type
 *  (a shorter GELU erf: 16-bit results keep 11 or 8 bits).  The same holds
 *  for the backward's dx.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (unknown act), RUMUS_EDTYPE,
 *          RUMUS_ESHAPE, RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_activation_fwd(rumus_ctx *ctx, rumus_activation act,
                                   float param, const rumus_tensor *x,
                                   rumus_tensor *y);
/*! rumus_activation_bwd() : dx = dy * act'(x), from the forward input x,
 *  x, dy and dx of one type (dx may alias dy or x).  Where x is NaN, dx
 *  is NaN for every activation; PyTorch's ReLU and leaky ReLU backward
 *  pass dy through there instead (NaN <= 0 is false in their threshold
 *  test).  Errors as rumus_activation_fwd(). */
RUMUS_API int rumus_activation_bwd(rumus_ctx *ctx, rumus_activation act,
                                   float param, const rumus_tensor *x,
                                   const rumus_tensor *dy, rumus_tensor *dx);

/* Casts */

/*! rumus_cast() :
 *  dst[i] = src[i] converted to dst's storage type, for tensors of equal
 *  element count (their shapes may differ): between any two of F32, F16
 *  and BF16, and from I32 to each of them; a cast to the same type is a
 *  copy (of any type).  The results are the host conversions', bit for
 *  bit: narrowing rounds to nearest even as rumus_f32_to_f16() and
 *  rumus_f32_to_bf16() do (F16: +-infinity from 65520 up, its largest
 *  finite value being 65504; subnormals below 2^-14, +-0 at 2^-25 and
 *  below), widening is exact, and NaN stays a NaN (its sign and leading
 *  payload bits kept, made quiet when narrowed).  F16 <-> BF16 goes through
 *  float, which is exact, so it rounds once.  I32 -> F32 rounds integers
 *  beyond 2^24 in magnitude to nearest even; I32 -> F16 and I32 -> BF16
 *  convert to float first, so BF16 rounds twice for such integers (at most
 *  one BF16 ulp from rounding the integer directly); F16 is not affected,
 *  since every integer it holds finitely is exact in float.  dst may be the
 *  same bytes as src only when the types match (a copy onto itself does
 *  nothing); any other overlap is RUMUS_EINVAL.  One program holds every
 *  pair of types, and rumus_cache_fill() builds it with the F32 programs.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE (dst not floating, or src
 *          neither floating nor I32, unless both are of one type),
 *          RUMUS_ESHAPE (element counts differ), RUMUS_EINVAL (a tensor of
 *          another context, overlap), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_cast(rumus_ctx *ctx, const rumus_tensor *src,
                         rumus_tensor *dst);

/* ------------------------------------------------------------------------ */
/* Dropout                                                                   */
/* ------------------------------------------------------------------------ */
/* Inverted dropout (PyTorch's training-mode nn.Dropout): each element is
 * kept with probability 1 - p and scaled by 1 / (1 - p), or set to 0.
 * The mask is not stored anywhere: it is a function of (seed, offset) and
 * the element's index, drawn from the counter-based generator
 * Philox4x32-10, and the backward draws it again from the same (seed,
 * offset), so a training step keeps no mask tensor between its passes.
 *
 * The mask, exactly (reproducible from this text alone).  Tensors are flat:
 * element i is the i-th element of the tensor in row-major order, from 0,
 * whatever its shape and wherever it starts in its buffer.  Element i
 * belongs to group q = i / 4 and takes word j = i % 4 of
 *     r = philox4x32_10(counter = {q_lo, q_hi, offset_lo, offset_hi},
 *                       key = {seed_lo, seed_hi})
 * where _lo / _hi are the low and high 32 bits of a 64-bit value and
 * philox4x32_10 is Salmon et al.'s generator (SC 2011) as Random123's
 * philox4x32_R(10, counter, key): 10 rounds, each taking the 32 x 32 ->
 * 64-bit products
 *     0xD2511F53 * c0 = (hi0, lo0),  0xCD9E8D57 * c2 = (hi1, lo1)
 * to c = {hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0}, with the key bumped by
 * k0 += 0x9E3779B9, k1 += 0xBB67AE85 between rounds (so
 * philox4x32_10({0, 0, 0, 0}, {0, 0}) = {0x6627e8d5, 0xe169c58d,
 * 0xbc57ac4c, 0x9b00dbd8}: Random123's known answer).  The element's
 * uniform is u = (r[j] >> 8) * 2^-24, in [0, 1) with 24 bits (exact in
 * float), and the element is kept if u >= p.  One Philox call serves 4
 * consecutive elements; the counter never wraps (q < 2^62 for any tensor)
 * and every 64-bit seed and offset is valid.  The mask is the same on
 * every device, variant, work-group size and storage type, and in place
 * or not.
 *
 * Offsets.  Calls with two different offsets (or seeds) use disjoint
 * counters, so their masks are independent: a training loop keeps one
 * seed and a 64-bit offset counter, passes the counter to each dropout
 * forward and adds 1 to it afterwards, and passes each forward's (seed,
 * offset) to its backward.  Any increment works (PyTorch advances its
 * Philox offset by the element count rounded up to 4, which serves too);
 * only a pair used twice repeats a mask.
 *
 * Values.  scale = 1 / (1 - p) is computed in double and rounded to float
 * once; a kept element is x * scale in float, rounded once to the tensor's
 * type (nearest even); a dropped element is +0 even where x is NaN or
 * infinite (selected, not multiplied: PyTorch's x * 0 gives NaN there).
 * So the results are the same bits on every run, device, variant and
 * work-group size (a device that flushes float subnormals to zero gives
 * 0 for a subnormal product; PoCL does not flush).  p = 0 copies the tensor's bytes exactly (no kernel; NaN payloads too);
 * p = 1 gives zeros.  F32, F16 and BF16 tensors, both of one type.
 * rumus_cache_fill() builds the F32 programs; a 16-bit call builds its
 * program at first use.  A tensor too large for one launch (2^32
 * elements and more on GPUs) runs in several, with the same mask. */

/*! rumus_dropout_fwd() :
 *  y = keep(i) ? x[i] * scale : 0 with the mask above, for x and y of one
 *  floating type and equal element count (their shapes may differ); y may
 *  alias x (the same bytes: in place).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (p outside [0, 1] or NaN, a
 *          tensor of another context, a partial overlap of y and x),
 *          RUMUS_EDTYPE (x not floating, y of another type), RUMUS_ESHAPE
 *          (element counts differ), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_dropout_fwd(rumus_ctx *ctx, float p, uint64_t seed,
                                uint64_t offset, const rumus_tensor *x,
                                rumus_tensor *y);
/*! rumus_dropout_bwd() :
 *  dx = keep(i) ? dy[i] * scale : 0, with the mask of the forward that
 *  took the same p, seed and offset (and a tensor of the same element
 *  count): the gradient of rumus_dropout_fwd.  dx may alias dy.  Errors
 *  as rumus_dropout_fwd(), with dy and dx in place of x and y. */
RUMUS_API int rumus_dropout_bwd(rumus_ctx *ctx, float p, uint64_t seed,
                                uint64_t offset, const rumus_tensor *dy,
                                rumus_tensor *dx);
/* Channel bias and batch norm (NCHW)                                        */
/* ------------------------------------------------------------------------ */
/* Per-channel ops on NCHW tensors: x [N, C, H, W] holds element (n, c, h,
 * w) at ((n * C + c) * H + h) * W + w.  The channel bias ops take any
 * tensor [N, C, ...] of at least 2 dimensions (the extents after C act as
 * H * W, 1 for [N, C]); batch norm takes 4-D tensors only.  Each channel
 * has M = N * H * W values.
 * Storage types: x, y, dy and dx are F32, F16 or BF16, all of one type in
 * a call; the channel bias b and its gradient db are of x's type or F32;
 * batch norm's gamma, beta, running_mean, running_var, save_mean,
 * save_invstd, dgamma and dbeta are F32 whatever x's type (as PyTorch's
 * autocast keeps them), 1-D of C elements.  Any other type is RUMUS_EDTYPE
 * naming the argument.  Arithmetic and every accumulator are float; each
 * output is rounded once to its type.
 * Reductions over a channel's M values (the bias gradient, the batch
 * statistics, the backward's sums) run in two stages on the device: ranges
 * of each channel, then the ranges in a fixed order, no atomics.  The
 * ranges depend on the shape, the variant (RUMUS_OPT_VARIANT), the
 * work-group size option and the device's compute units only, so a call
 * gives the same bits on every run on one device; the two variants sum in
 * different orders and may differ in the last bits.
 * rumus_cache_fill() builds the F32 programs of these ops (on the GPU
 * variant one for 16-byte aligned tensors and one for the others); a
 * 16-bit call builds its program at first use. */

/*! rumus_channel_bias_add() :
 *  y[n, c, ...] = x[n, c, ...] + b[c] for x [N, C, ...] (ndim >= 2), b [C]
 *  of x's type or F32 and y of x's shape and type.  y may alias x (in
 *  place); no other overlap.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE (ndim < 2, b
 *          not [C], y of another shape), RUMUS_EINVAL (a tensor of another
 *          context, overlap), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_channel_bias_add(rumus_ctx *ctx, const rumus_tensor *x,
                                     const rumus_tensor *b, rumus_tensor *y);
/*! rumus_channel_bias_grad() :
 *  db[c] = sum over n and the spatial positions of dy[n, c, ...], for dy
 *  [N, C, ...] (ndim >= 2, any N, C and H * W, 1 included) and db [C] of
 *  dy's type or F32 (the float sum stored unrounded); deterministic, as
 *  the section says.  M = 0 gives db = 0.  db must not share memory with
 *  dy.  @return as rumus_channel_bias_add(), and RUMUS_EDEVMEM (scratch). */
RUMUS_API int rumus_channel_bias_grad(rumus_ctx *ctx, const rumus_tensor *dy,
                                      rumus_tensor *db);

/* Parameters of batch norm; RUMUS_BATCHNORM_DEFAULTS gives PyTorch's
 * (torch.nn.BatchNorm2d: eps 1e-5, momentum 0.1).  PyTorch's momentum =
 * None (a cumulative average) is not offered. */
typedef struct {
  float eps;      /* added to the variance; finite, >= 0 */
  float momentum; /* running-statistics update weight, in [0, 1] */
} rumus_batchnorm_params;

#define RUMUS_BATCHNORM_DEFAULTS {1e-5f, 0.1f}

/*! rumus_batchnorm2d_fwd_train() :
 *  Batch norm in training mode (torch.nn.BatchNorm2d.train()): per channel
 *  c, over its M = N * H * W values of x [N, C, H, W],
 *      mean = sum x / M,  var = sum (x - mean)^2 / M  (biased),
 *      invstd = 1 / sqrt(var + eps),
 *      y = (x - mean) * invstd * gamma[c] + beta[c]
 *  with gamma = 1 where gamma is NULL and beta = 0 where beta is NULL (not
 *  affine).  The variance is a corrected two-pass one (sums of deviations
 *  from a mean known beforehand: the channel's, or on the GPU variant each
 *  range's, the ranges then merged exactly), never E[x^2] - E[x]^2.
 *  save_mean and save_invstd (required) receive mean and invstd for
 *  rumus_batchnorm2d_bwd().  running_mean and running_var, both given or
 *  both NULL, are updated in place: r = (1 - momentum) * r + momentum *
 *  stat, with the unbiased variance var * M / (M - 1) for running_var, as
 *  PyTorch does.  params NULL means RUMUS_BATCHNORM_DEFAULTS.  y may alias
 *  x; no other tensors may share memory.  M < 2 (one value per channel:
 *  PyTorch refuses it) is RUMUS_ESHAPE; C = 0 does nothing.  A NaN in a
 *  channel makes that channel's y, statistics and running statistics NaN,
 *  as in PyTorch; the other channels are unaffected.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE (not 4-D,
 *          shapes differ, a per-channel tensor not [C], M < 2),
 *          RUMUS_EINVAL (eps, momentum, one running statistic NULL, a
 *          tensor of another context, overlap), RUMUS_EBUILD, RUMUS_ECL,
 *          RUMUS_EDEVMEM (scratch). */
RUMUS_API int rumus_batchnorm2d_fwd_train(
    rumus_ctx *ctx, const rumus_batchnorm_params *params,
    const rumus_tensor *x, const rumus_tensor *gamma, const rumus_tensor *beta,
    rumus_tensor *running_mean, rumus_tensor *running_var, rumus_tensor *y,
    rumus_tensor *save_mean, rumus_tensor *save_invstd);
/*! rumus_batchnorm2d_fwd_eval() :
 *  Batch norm in evaluation mode: y = (x - running_mean[c]) /
 *  sqrt(running_var[c] + eps) * gamma[c] + beta[c] (gamma, beta NULL: 1,
 *  0; the running statistics are required and only read).  No reduction:
 *  any N, H, W.  y may alias x; no other overlap.  Errors as
 *  rumus_batchnorm2d_fwd_train() (but for M < 2 and scratch). */
RUMUS_API int rumus_batchnorm2d_fwd_eval(
    rumus_ctx *ctx, const rumus_batchnorm_params *params,
    const rumus_tensor *x, const rumus_tensor *gamma, const rumus_tensor *beta,
    const rumus_tensor *running_mean, const rumus_tensor *running_var,
    rumus_tensor *y);
/*! rumus_batchnorm2d_bwd() :
 *  The backward of rumus_batchnorm2d_fwd_train(), from its input x, the
 *  gradient dy of y and its save_mean and save_invstd; with xhat = (x -
 *  mean) * invstd, per channel,
 *      dbeta = sum dy,  dgamma = sum dy * xhat,
 *      dx = gamma * invstd * (dy - dbeta / M - xhat * dgamma / M)
 *  (gamma NULL: 1).  dgamma and dbeta may each be NULL (not computed).
 *  dx, dy and x are [N, C, H, W] of one type; dx may alias dy; no other
 *  overlap.  M = 0 gives dgamma = dbeta = 0.  Deterministic, as the
 *  section says.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE, RUMUS_EINVAL
 *          (a tensor of another context, overlap), RUMUS_EBUILD,
 *          RUMUS_ECL, RUMUS_EDEVMEM (scratch). */
RUMUS_API int rumus_batchnorm2d_bwd(rumus_ctx *ctx, const rumus_tensor *dy,
                                    const rumus_tensor *x,
                                    const rumus_tensor *gamma,
                                    const rumus_tensor *save_mean,
                                    const rumus_tensor *save_invstd,
                                    rumus_tensor *dx, rumus_tensor *dgamma,
                                    rumus_tensor *dbeta);
/* Layer norm and RMS norm (last dimension)                                 */
/* ------------------------------------------------------------------------ */
/* Normalisation over the last dimension of x [..., C] (PyTorch's
 * F.layer_norm with normalized_shape = (C,), and F.rms_norm likewise): the
 * rows = numel / C rows of C contiguous elements are normalised each on
 * its own.  gamma and beta (and dgamma, dbeta) are 1-D of C elements,
 * optional (NULL: gamma = 1, beta = 0, not affine).
 * Storage types: x, y, dy and dx are F32, F16 or BF16, all of one type in
 * a call; gamma, beta, dgamma and dbeta are all F32 or all of x's type
 * (the first one given decides; a mix is RUMUS_EDTYPE); the per-row
 * statistics mean, rstd and rrms are F32 tensors of `rows` elements (any
 * shape: [rows], or x's shape with the last extent dropped or set to 1).
 * Arithmetic and every accumulator are float; each output is rounded once
 * to its type.  The variance is two-pass (the sums of x - mean after the
 * mean is known, with their sum correcting the mean), never E[x^2] -
 * E[x]^2.  C = 0 or no rows writes nothing (but for the backward's
 * dgamma and dbeta, which are 0 for no rows).
 * Determinism: no atomics.  Each row's sums run in an order fixed by C,
 * the variant (RUMUS_OPT_VARIANT) and the work-group size option, so a
 * call gives the same bits on every run on one device; the two variants
 * may differ in the last bits of y, the statistics and dx.  dgamma and
 * dbeta are column sums over the rows in two stages (blocks of rows fixed
 * by the shape alone, summed row by row, then the blocks in order, by
 * groups of 64 blocks when there are more), the same bits on both
 * variants for the same dy, x and statistics.
 * rumus_cache_fill() builds the F32 programs (gamma F32) of these ops;
 * other types build their programs at first use. */

/* Parameters of layer norm and RMS norm; RUMUS_LAYERNORM_DEFAULTS gives
 * torch.nn.LayerNorm's eps (1e-5; PyTorch's RMSNorm defaults to the
 * machine epsilon of x's type instead: pass it to match). */
typedef struct {
  float eps; /* added to the variance (mean square); finite, >= 0 */
} rumus_layernorm_params;

#define RUMUS_LAYERNORM_DEFAULTS {1e-5f}

/*! rumus_layernorm_fwd() :
 *  Per row of x [..., C]:
 *      mean = sum x / C,  var = sum (x - mean)^2 / C  (biased),
 *      rstd = 1 / sqrt(var + eps),
 *      y = (x - mean) * rstd * gamma + beta
 *  y has x's shape and type.  mean and rstd (F32, `rows` elements), both
 *  given or both NULL (inference), receive the row statistics for
 *  rumus_layernorm_bwd().  params NULL means RUMUS_LAYERNORM_DEFAULTS.  y
 *  may alias x (in place); no other tensors may share memory.  A NaN or
 *  infinity in a row makes that row's y, mean and rstd NaN (RMS norm: a
 *  NaN likewise; an infinity gives rrms 0 and y = x * 0, NaN at the
 *  infinity and 0 elsewhere, as PyTorch's); other rows are unaffected.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE (a type outside the
 *          section's list), RUMUS_ESHAPE (x 0-D, y of another shape,
 *          gamma or beta not [C], a statistic not of `rows` elements),
 *          RUMUS_EINVAL (eps, only one of mean and rstd, a tensor of
 *          another context, overlap), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_layernorm_fwd(rumus_ctx *ctx,
                                  const rumus_layernorm_params *params,
                                  const rumus_tensor *x,
                                  const rumus_tensor *gamma,
                                  const rumus_tensor *beta, rumus_tensor *y,
                                  rumus_tensor *mean, rumus_tensor *rstd);
/*! rumus_layernorm_bwd() :
 *  The backward of rumus_layernorm_fwd() from its input x, its mean and
 *  rstd (required) and the gradient dy of y; with xhat = (x - mean) *
 *  rstd and g = dy * gamma (gamma NULL: g = dy), per row
 *      dx = rstd * (g - sum g / C - xhat * sum(g * xhat) / C),
 *  and over the rows dgamma = sum dy * xhat, dbeta = sum dy (each may be
 *  NULL: not computed; deterministic, as the section says).  dy and dx
 *  have x's shape and type.  dx may alias dy; no other tensors may share
 *  memory.  No rows gives dgamma = dbeta = 0.
 *  @return as rumus_layernorm_fwd() (a NULL mean or rstd: RUMUS_ENULL),
 *          and RUMUS_EDEVMEM (scratch for dgamma / dbeta). */
RUMUS_API int rumus_layernorm_bwd(rumus_ctx *ctx, const rumus_tensor *dy,
                                  const rumus_tensor *x,
                                  const rumus_tensor *gamma,
                                  const rumus_tensor *mean,
                                  const rumus_tensor *rstd, rumus_tensor *dx,
                                  rumus_tensor *dgamma, rumus_tensor *dbeta);
/*! rumus_rmsnorm_fwd() :
 *  Per row of x [..., C]: rrms = 1 / sqrt(sum x^2 / C + eps), y = x *
 *  rrms * gamma.  rrms (F32, `rows` elements) may be NULL (inference).
 *  Types, aliasing and statuses as rumus_layernorm_fwd() (no beta, no
 *  mean). */
RUMUS_API int rumus_rmsnorm_fwd(rumus_ctx *ctx,
                                const rumus_layernorm_params *params,
                                const rumus_tensor *x,
                                const rumus_tensor *gamma, rumus_tensor *y,
                                rumus_tensor *rrms);
/*! rumus_rmsnorm_bwd() :
 *  The backward of rumus_rmsnorm_fwd(): with xhat = x * rrms and g = dy *
 *  gamma (gamma NULL: dy), per row dx = rrms * (g - xhat * sum(g * xhat) /
 *  C), and dgamma = sum over the rows of dy * xhat (NULL: not computed).
 *  rrms is required.  Types, aliasing (dx may alias dy) and statuses as
 *  rumus_layernorm_bwd(). */
RUMUS_API int rumus_rmsnorm_bwd(rumus_ctx *ctx, const rumus_tensor *dy,
                                const rumus_tensor *x,
                                const rumus_tensor *gamma,
                                const rumus_tensor *rrms, rumus_tensor *dx,
                                rumus_tensor *dgamma);
/* Convolution (conv2d, NCHW)                                                */
/* ------------------------------------------------------------------------ */
/* PyTorch's conv2d: x [N, C, H, W], weight w [OC, C / groups, KH, KW],
 * optional bias [OC], y [N, OC, OH, OW] with
 *   OH = floor((H + 2 pad_h - dilation_h (KH - 1) - 1) / stride_h) + 1
 * and OW likewise; zero padding, rectangular kernels, groups (output
 * channels o * OC / groups .. read input channels o * C / groups ..;
 * depthwise: groups = C = OC).  All tensors row-major (NCHW, W
 * contiguous) and of one floating type (F32, F16 or BF16; any other mix
 * is RUMUS_EDTYPE); products and sums are float, each output rounded once
 * when stored.  Each op is one implicit GEMM over the whole batch that
 * gathers x (or dy) as it goes (no im2col buffer), or a direct kernel
 * where one to four input channels per group leave the GEMM's tiles idle.
 * Determinism: every output element is a sum in a fixed order (from 0, one
 * fma per term; the forward then adds the bias), the same on both
 * variants, so results are the same bits run to run and on either
 * variant of a device, whatever the work-group variant's tile sizes (for
 * the input gradient, with finite weights: terms whose dy lies outside
 * dy are skipped by one variant and multiplied by a zero by the other,
 * which an inf or NaN weight turns into NaN).  The weight gradient sums
 * its N * OH * OW pixels in chunks whose size depends on the shape only
 * (at least 256 pixels, at most 64 chunks, more of them when the weight
 * has few elements), then adds the chunks in order: no atomics.  With
 * one input channel per group (depthwise, or C = 1) it sums instead over
 * P = 64 B lanes (B, at most 64, fixed by the shape): lane s takes pixels
 * s, s + P, s + 2 P, ..., the 64 lanes of a block are added by a fixed
 * halving tree and the B blocks in order.
 * Winograd: on the work-group variant, the forward and the input gradient
 * of a 3x3, stride 1, dilation 1, one-group convolution with at least 32
 * input and 32 output channels and 2^28 multiply-adds or more run instead
 * as F(4x4, 3x3) Winograd (docs/DESIGN.md): input, weight and output
 * transforms in float around 36 batched float GEMMs over the channels,
 * through float scratch of up to 256 MiB a buffer (larger batches run in
 * chunks of images; a shape whose one image does not fit takes the
 * implicit GEMM).  Its sums are in another fixed order: the same bits run
 * to run, not the CPU variant's; the F32 error on inputs in [-1, 1] was
 * below 0.4e-6 K (K = C * 9 or OC * 9 terms; the implicit GEMM's under
 * 0.05e-6 K in the same cases).  An infinity or NaN in x (dy) reaches
 * every output of the 4x4 (2x2) tiles whose 6x6 (4x4) patches hold it,
 * not only those whose windows do, and infinities may come out as NaN
 * (inf - inf in the transforms).  RUMUS_CONV2D_WINOGRAD = 0 turns it off,
 * 2 or 4 forces F(2x2, 3x3) or F(4x4, 3x3) wherever the shape allows
 * (any channels, any size), RUMUS_CONV2D_FWD_WINOGRAD and
 * RUMUS_CONV2D_BWD_DATA_WINOGRAD do so for one op, RUMUS_CONV2D_WINOGRAD_KB
 * sets the scratch cap per buffer in KiB (read at each call).
 * Tuning: the environment variables RUMUS_CONV2D_TILE and
 * RUMUS_CONV2D_{FWD,BWD_DATA,BWD_WEIGHT}_TILE = "TMxTNxRMxRN[xTK]" set the
 * work-group variant's tile sizes (docs/DESIGN.md; read at each call,
 * ignored when invalid; a valid input-gradient tile also selects that
 * op's GEMM over its direct kernel for 1 to 4 channels per group); they
 * change speed only, never results (the input gradient's: for finite
 * weights, as between the variants).
 * The bias gradient of a convolution is rumus_channel_bias_grad(ctx, dy,
 * db) (the sum of dy over N, OH and OW per channel), not part of this
 * family.
 * Errors common to the family: RUMUS_ENULL (ctx or a tensor NULL; bias
 * may be NULL), RUMUS_EINVAL (stride or dilation < 1, padding < 0,
 * groups < 1 or not dividing C or OC, a tensor of another context, an
 * output that shares memory with an input: no aliasing at all),
 * RUMUS_ESHAPE (a tensor not 4-D, w's axis 1 not C / groups, an empty
 * kernel, a dilated kernel larger than the padded input along an axis
 * (OH or OW would be < 1: the message names the axis), a padded extent
 * H + 2 pad_h or W + 2 pad_w of 2^30 or more, y / dy / dx / dw / bias not
 * of the expected shape), RUMUS_EDTYPE, RUMUS_EBUILD, RUMUS_ECL
 * (and RUMUS_EDEVMEM for the weight gradient's and the Winograd path's
 * scratch).  Empty outputs
 * (N, OC or C zero) do nothing; an empty sum (C = 0, or N = 0 for the
 * weight gradient) gives 0 (plus the bias). */
typedef struct {
  int stride_h, stride_w;     /* >= 1 */
  int pad_h, pad_w;           /* >= 0, zeros on both sides */
  int dilation_h, dilation_w; /* >= 1 */
  int groups;                 /* >= 1, divides C and OC */
} rumus_conv2d_params;

/* Stride 1, no padding, no dilation, one group (PyTorch's defaults). */
#define RUMUS_CONV2D_DEFAULTS {1, 1, 0, 0, 1, 1, 1}

/*! rumus_conv2d_out_shape() :
 *  Checks p (NULL: RUMUS_CONV2D_DEFAULTS), x and w as rumus_conv2d_fwd()
 *  does and writes y's shape [N, OC, OH, OW] into y_shape.
 *  @return RUMUS_OK or the family's errors above (RUMUS_ENULL also for a
 *          NULL y_shape). */
RUMUS_API int rumus_conv2d_out_shape(rumus_ctx *ctx,
                                     const rumus_conv2d_params *p,
                                     const rumus_tensor *x,
                                     const rumus_tensor *w,
                                     size_t y_shape[4]);

/*! rumus_conv2d_fwd() :
 *  y = conv2d(x, w) + bias[o] per output channel o (bias NULL: none),
 *  the bias added in the same kernel.  p NULL means RUMUS_CONV2D_DEFAULTS.
 *  x [N, C, H, W], w [OC, C / groups, KH, KW], bias [OC], y [N, OC, OH,
 *  OW]; y must not share memory with x, w or bias.
 *  @return RUMUS_OK or the family's errors above. */
RUMUS_API int rumus_conv2d_fwd(rumus_ctx *ctx, const rumus_conv2d_params *p,
                               const rumus_tensor *x, const rumus_tensor *w,
                               const rumus_tensor *bias, rumus_tensor *y);

/*! rumus_conv2d_bwd_data() :
 *  dx = the gradient of the forward's input for upstream gradient dy: the
 *  transposed convolution, each dx element summing the (dy, w) pairs that
 *  its pixel met in the forward (gather form, no atomics).  dx [N, C, H, W]
 *  (overwritten; it gives the forward's H and W), w [OC, C / groups, KH,
 *  KW], dy [N, OC, OH, OW] with OH, OW of the forward.  dx must not share
 *  memory with dy or w.
 *  @return RUMUS_OK or the family's errors above. */
RUMUS_API int rumus_conv2d_bwd_data(rumus_ctx *ctx,
                                    const rumus_conv2d_params *p,
                                    const rumus_tensor *dy,
                                    const rumus_tensor *w, rumus_tensor *dx);

/*! rumus_conv2d_bwd_weight() :
 *  dw[o, c, kh, kw] = sum over n, oh, ow of dy[n, o, oh, ow] * x[n, g C /
 *  groups + c, oh stride_h - pad_h + kh dilation_h, ow stride_w - pad_w +
 *  kw dilation_w] (0 in the padding; g the group of o), overwriting dw
 *  [OC, C / groups, KH, KW].  x [N, C, H, W], dy [N, OC, OH, OW].  Fixed
 *  summation order (see above).  dw must not share memory with x or dy.
 *  @return RUMUS_OK or the family's errors above. */
RUMUS_API int rumus_conv2d_bwd_weight(rumus_ctx *ctx,
                                      const rumus_conv2d_params *p,
                                      const rumus_tensor *x,
                                      const rumus_tensor *dy,
                                      rumus_tensor *dw);

/* ------------------------------------------------------------------------ */
/* Optimizers (PyTorch's update rules, in place on the device)               */
/* ------------------------------------------------------------------------ */

/* Storage types: a step's param and its state (momentum_buf; m and v)
 * share one floating type P (F32, F16 or BF16); grad may be any floating
 * type (F32 master weights updated from F16 or BF16 gradients); an
 * optional param_copy of any floating type receives the updated parameter
 * rounded to its type in the same pass (the 16-bit weights of the next
 * forward pass).  Arithmetic is float: 16-bit values are widened exactly
 * and each result is rounded once to its tensor's type (nearest even; F16
 * results beyond 65504 in magnitude are +-infinity).  The sums of squares
 * take gradients of any floating type (each gradient of a clip its own)
 * and keep acc, total_norm and the coefficient in float.  Any other type
 * is RUMUS_EDTYPE. */

typedef struct {
  float lr, momentum, dampening, weight_decay;
  int nesterov;
} rumus_sgd_params;

/*! rumus_sgd_step() :
 *  One torch.optim.SGD step on param with grad.  momentum_buf (same shape)
 *  is needed when momentum != 0 and may be NULL otherwise; `step` counts
 *  from 1 and the first step initialises the buffer to the gradient, as
 *  PyTorch does.  param, grad and momentum_buf must not share memory.
 *  @return RUMUS_OK, RUMUS_EINVAL (nesterov without momentum or with
 *  dampening, negative, infinite or NaN values, step < 1, overlap),
 *  RUMUS_ENULL (also a NULL momentum_buf with momentum != 0), RUMUS_EDTYPE,
 *  RUMUS_ESHAPE, RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_sgd_step(rumus_ctx *ctx, const rumus_sgd_params *p,
                             long step, rumus_tensor *param,
                             const rumus_tensor *grad,
                             rumus_tensor *momentum_buf);

typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  int decoupled; /* 0: Adam (L2 added to the gradient), 1: AdamW */
} rumus_adam_params;

/*! rumus_adam_step() :
 *  One torch.optim.Adam / AdamW step (bias-corrected) on param with grad,
 *  moments m and v (same shape, zero before step 1, no two sharing
 *  memory); step counts from 1.  The second moment is accumulated as
 *  (1 - beta2) g g left to right where g g overflows, as PyTorch's
 *  addcmul does, so it stays finite for gradients up to about 5.8e20
 *  (beta2 = 0.999) rather than 1.8e19.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (lr, eps or weight_decay
 *          negative, infinite or NaN, beta outside [0, 1), step < 1,
 *          overlap), RUMUS_EDTYPE, RUMUS_ESHAPE, RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_adam_step(rumus_ctx *ctx, const rumus_adam_params *p,
                              long step, rumus_tensor *param,
                              const rumus_tensor *grad, rumus_tensor *m,
                              rumus_tensor *v);

/* Loss scaling of a step: the building block of dynamic loss scaling for
 * F16 training.  The loss gradient is multiplied by a scale S (the
 * grad_scale of rumus_cross_entropy) so that small F16 gradients do not
 * flush to zero; the step reads each gradient as grad * inv_scale (1 / S).
 * When the scaled gradients overflowed, the step is skipped on the device:
 * pass as skip_if_nonfinite the total_norm of rumus_clip_grad_norm, or the
 * acc of rumus_sum_squares (zeroed first) over every gradient, which are
 * inf or NaN as soon as one gradient element is (or when their sum of
 * squares overflows float, which calls for a smaller S as well).  The host
 * then reads that one float (no gradient leaves the device) to halve S
 * and to keep `step` unchanged for the next call, as PyTorch's GradScaler
 * skips optimizer.step(). */
typedef struct {
  float inv_scale; /* finite and > 0; 1: the gradient as it is */
  /* NULL, or a one-element F32 tensor: when its value is inf or NaN the
   * step writes nothing (param, state and param_copy keep their values). */
  const rumus_tensor *skip_if_nonfinite;
} rumus_grad_scaling;

/*! rumus_sgd_step_ex() / rumus_adam_step_ex() :
 *  rumus_sgd_step() / rumus_adam_step() that also store the updated
 *  parameter, rounded to param_copy's type, into param_copy (NULL: none; a
 *  tensor of any floating type with param's shape), and read the gradient
 *  under `scaling` (NULL: inv_scale 1, never skipped).  No two of the
 *  tensors (skip_if_nonfinite included) may share memory.
 *  @return as rumus_sgd_step() / rumus_adam_step(); RUMUS_EINVAL also for
 *          an inv_scale that is not finite and > 0, RUMUS_EDTYPE or
 *          RUMUS_ESHAPE for a skip_if_nonfinite that is not one F32
 *          element. */
RUMUS_API int rumus_sgd_step_ex(rumus_ctx *ctx, const rumus_sgd_params *p,
                                long step, rumus_tensor *param,
                                const rumus_tensor *grad,
                                rumus_tensor *momentum_buf,
                                rumus_tensor *param_copy,
                                const rumus_grad_scaling *scaling);
RUMUS_API int rumus_adam_step_ex(rumus_ctx *ctx, const rumus_adam_params *p,
                                 long step, rumus_tensor *param,
                                 const rumus_tensor *grad, rumus_tensor *m,
                                 rumus_tensor *v, rumus_tensor *param_copy,
                                 const rumus_grad_scaling *scaling);

/*! rumus_sum_squares() : acc[0] += sum of x[i]^2 (x of any floating type;
 *  acc: one F32 element, not inside x), in float, deterministic; inf or
 *  NaN once an element of x is (a skip_if_nonfinite of the steps).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE (acc not one
 *  element), RUMUS_EINVAL (overlap), RUMUS_EBUILD, RUMUS_ECL,
 *  RUMUS_EDEVMEM (scratch buffer). */
RUMUS_API int rumus_sum_squares(rumus_ctx *ctx, const rumus_tensor *x,
                                rumus_tensor *acc);

/*! rumus_clip_grad_norm() :
 *  torch.nn.utils.clip_grad_norm_ on the device: total = sqrt(sum of
 *  squares of all n gradients); every gradient is multiplied by
 *  min(1, max_norm / (total + 1e-6)), with no host readback.  Each
 *  gradient may have its own floating type; total and the coefficient are
 *  float.  If total_norm is not NULL (one F32 element) it receives total,
 *  which is inf or NaN when a gradient element is (the gradients are then
 *  NaN or zero, as in PyTorch; a skip_if_nonfinite of the steps).  No two
 *  of the tensors may share memory.  max_norm = INFINITY clips nothing.
 *  Gradients scaled by a loss scale S (to be unscaled by the steps'
 *  inv_scale = 1 / S) are clipped to max_norm by passing max_norm * S;
 *  total is then S times the true norm.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (n == 0, max_norm <= 0 or
 *          NaN, overlap), RUMUS_EDTYPE, RUMUS_ESHAPE (total_norm not one
 *          element), RUMUS_EBUILD, RUMUS_ECL, RUMUS_EDEVMEM (scratch
 *          buffer). */
RUMUS_API int rumus_clip_grad_norm(rumus_ctx *ctx, rumus_tensor *const *grads,
                                   size_t n, float max_norm,
                                   rumus_tensor *total_norm);

/* ------------------------------------------------------------------------ */
/* Quantization (Q8: int8 blocks with an F16 scale)                          */
/* ------------------------------------------------------------------------ */
/* A floating tensor x [..., K] is stored as q, an RUMUS_I8 tensor of x's
 * shape, and scales, an RUMUS_F16 tensor [..., NB] with x's leading
 * extents and NB = ceil(K / block_size): block b of a row holds its
 * elements b * block_size .. min((b + 1) * block_size, K) - 1, the last
 * block of a row short when block_size does not divide K.  block_size is
 * 0 (meaning RUMUS_Q8_BLOCK, 32, ggml's Q8_0) or a power of two from 16
 * to 256, the same for quantize, dequantize and matmul; the functions do
 * not store it.  Per block, with amax the largest |x| of the block:
 *   s = amax / 127 rounded once to F16 (to nearest even), then clamped to
 *       [2^-24, 65504], the smallest and largest finite F16 above 0: a
 *       block with 0 < amax <= 127 * 2^-25 gets 2^-24, one whose amax /
 *       127 rounds to F16's infinity (65520 and up) gets 65504, and its
 *       values beyond 127.5 * 65504 clamp to +-127; s = 1 when amax is 0;
 *   q = x / s rounded half away from zero (2.5 -> 3, -2.5 -> -3), then
 *       clamped to [-127, 127] (-128 is never written), where s is the
 *       F16 value stored, so dequantization multiplies by the very scale
 *       the values were divided by;
 *   dequantized value x' = q * s, exact in float.
 * Every rounding above is exact on every device (decided by exact
 * products, not by the device's division), so the bits are the same
 * everywhere, except that a device that flushes float subnormals reads
 * such inputs as 0 (PoCL does not flush them).  A block that holds a NaN
 * or an infinity cannot be represented: its scale is stored as NaN (F16
 * 0x7E00) and its q as 0, so it dequantizes to NaN and every product
 * that reads it is NaN.
 * Error: in a block whose s is a normal F16 and not clamped (127 * 2^-14
 * <= amax <= 127 * 65504, about 0.0078 to 8.3e6), |x - x'| <= s / 2 <=
 * (1 + 2^-11) amax / 254 for every element: rounding to F16 moves s by
 * at most 2^-11 of itself, so amax / s <= 127.07 and the clamp to 127
 * costs less than the half step.  The rounding errors being about
 * uniform in [-s/2, s/2], the relative error ||x - x'|| / ||x|| on N(0,
 * 1) data is about sqrt(E[s^2] / 12): 0.53% with blocks of 32, from 0.47%
 * (16) to 0.69% (256) (measured in tests/check_quant.c). */
#define RUMUS_Q8_BLOCK 32

/*! rumus_quantize_q8() :
 *  Quantizes x [..., K] (F32, F16 or BF16, ndim >= 1) into q (I8, x's
 *  shape) and scales (F16, [..., ceil(K / block_size)]) as above, one
 *  work-item per block.  No two of the tensors may share memory.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE (the shape
 *          and the axis that differ), RUMUS_EINVAL (block_size, a tensor
 *          of another context, overlap), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_quantize_q8(rumus_ctx *ctx, const rumus_tensor *x,
                                rumus_tensor *q, rumus_tensor *scales,
                                size_t block_size);

/*! rumus_dequantize_q8() :
 *  y = q * scale of its block, for q (I8, [..., K]) and scales (F16,
 *  [..., ceil(K / block_size)]) into y of q's shape, F32 (exact), F16 or
 *  BF16 (rounded once, to nearest even).  y must not share memory with q
 *  or scales.  Errors as rumus_quantize_q8(). */
RUMUS_API int rumus_dequantize_q8(rumus_ctx *ctx, const rumus_tensor *q,
                                  const rumus_tensor *scales,
                                  size_t block_size, rumus_tensor *y);

/*! rumus_matmul_q8() :
 *  C = A * B^T with B = dequantize(Bq, Bscales): the product of a linear
 *  layer whose weight [N, K] is quantized by rows of K.  A is [..., K]
 *  (F32, F16 or BF16; its leading extents are rows, M in all, so a batch
 *  [batch, M, K] is one product), Bq is I8 [N, K], Bscales F16 [N,
 *  ceil(K / block_size)], C is [..., N] with A's leading extents, F32 or
 *  A's type.  B is dequantized in registers, never stored; products and
 *  sums are float, in a fixed order (deterministic for a device and
 *  variant), and a 16-bit C is rounded once.  With M <= 8 (the
 *  matrix-vector products of inference) B is read once, all rows of A at
 *  a time; larger M runs a tiled product.  K == 0 gives C = 0.  C must
 *  not share memory with A, Bq or Bscales.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE (C neither F32 nor A's
 *          type, Bq not I8, ...), RUMUS_ESHAPE (the shapes and the axis
 *          that differ), RUMUS_EINVAL (block_size, a tensor of another
 *          context, overlap), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_matmul_q8(rumus_ctx *ctx, const rumus_tensor *A,
                              const rumus_tensor *Bq,
                              const rumus_tensor *Bscales, size_t block_size,
                              rumus_tensor *C);

/* ------------------------------------------------------------------------ */
/* Pooling (2-D, NCHW)                                                       */
/* ------------------------------------------------------------------------ */
/* PyTorch's torch.nn.functional.max_pool2d, avg_pool2d and
 * adaptive_avg_pool2d and their backwards, on 4-D tensors x [N, C, H, W]
 * and y [N, C, OH, OW] (row-major: W contiguous).  x, y, dy and dx of one
 * call share one floating type (F32, F16 or BF16; RUMUS_EDTYPE otherwise,
 * naming the argument); max pooling's indices are RUMUS_I32 of y's shape.
 * Arithmetic is float: sums are float in a fixed order and each output is
 * rounded once to its type; max pooling copies values exactly.
 * Every backward is a gather: each dx element sums, in a fixed order, the
 * contributions of the outputs whose window holds it, so results are the
 * same bits run to run (no atomics), overlapping windows (stride < kernel)
 * included.  dx is overwritten, not accumulated into.  The work-group and
 * CPU variants visit the same terms in the same order (one work-item per
 * output element or row in the forwards, per input element or row in the
 * backwards), so they give the same bits, except the adaptive forward to
 * OH = OW = 1, which the work-group variant sums as a tree over each plane
 * (its own fixed order: the same bits run to run, possibly not the CPU
 * variant's in the last bits).  One program per storage type holds the
 * family; rumus_cache_fill() builds the F32 one.
 * No output may share memory with another tensor of its call.  A tensor
 * with N or C of 0 makes the call check its arguments and do nothing. */

/* Window of rumus_maxpool2d_* and rumus_avgpool2d_*, per axis (h, w):
 * kernel k, stride s (PyTorch's default stride = kernel is what
 * RUMUS_POOL2D_PARAMS gives), zero padding p <= k / 2 (integer division,
 * as PyTorch requires) on both sides, dilation d (max pooling only: avg
 * pooling takes d = 1).  Output extent, PyTorch's rule:
 *   out = floor((in + 2p - d (k - 1) - 1 + (ceil_mode ? s - 1 : 0)) / s) + 1,
 * less 1 in ceil mode when the last window would start at or past
 * in + p (it must start inside the input or the left padding).  Every
 * value must be at most INT32_MAX. */
typedef struct {
  size_t kernel_h, kernel_w;     /* >= 1 */
  size_t stride_h, stride_w;     /* >= 1 */
  size_t padding_h, padding_w;   /* <= kernel / 2 */
  size_t dilation_h, dilation_w; /* >= 1; 1 for avg pooling */
  int ceil_mode;                 /* 0: floor the output extent, 1: ceil */
  /* Avg pooling: whether the padding's zeros count in the divisor
   * (PyTorch's default: 1), and divisor_override (0: none; > 0 divides
   * every window's sum by it). */
  int count_include_pad;
  int divisor_override;
} rumus_pool2d_params;

/* PyTorch's defaults for a kh x kw kernel: stride = kernel, no padding,
 * dilation 1, floor mode, count_include_pad, no divisor override. */
#define RUMUS_POOL2D_PARAMS(kh, kw) {(kh), (kw), (kh), (kw), 0, 0, 1, 1, 0, 1, 0}

/*! rumus_pool2d_output_size() :
 *  The output extents *oh, *ow of a max or avg pooling of an h x w plane
 *  under p (the rule above).  ctx may be NULL (nothing is recorded then);
 *  otherwise a failure's message names the parameter or axis.
 *  @return RUMUS_OK, RUMUS_ENULL (p, oh or ow NULL), RUMUS_EINVAL (a
 *          kernel, stride or dilation of 0, padding over half the kernel,
 *          a value over INT32_MAX), RUMUS_ESHAPE (an output extent below
 *          1, such as a kernel larger than the padded input; h or w over
 *          INT32_MAX). */
RUMUS_API int rumus_pool2d_output_size(rumus_ctx *ctx,
                                       const rumus_pool2d_params *p,
                                       size_t h, size_t w, size_t *oh,
                                       size_t *ow);

/*! rumus_maxpool2d_fwd() :
 *  y[n, c, oh, ow] = the largest x of the window of (oh, ow): rows
 *  oh s - p + i d (i < k) inside [0, H), columns likewise; padding never
 *  wins.  indices (I32, y's shape) receives its position h * W + w within
 *  the plane, as PyTorch's return_indices.  Ties keep the first in
 *  row-major window order; a NaN always wins (the window's last NaN, as
 *  PyTorch); an all -inf window gives -inf at its first element.  A
 *  window with no element inside the input (only possible with dilation,
 *  e.g. H = 2, k = 2, p = 1, d = 3) gives -inf and index -1.  H * W must
 *  be at most INT32_MAX (the indices are int32).
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (parameters as
 *          rumus_pool2d_output_size(), a tensor of another context,
 *          overlap), RUMUS_EDTYPE (x not floating, y not x's type, indices
 *          not I32), RUMUS_ESHAPE (a tensor not 4-D, an output extent
 *          below 1, y or indices not [N, C, OH, OW]: the message names
 *          the axis; H * W over INT32_MAX), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_maxpool2d_fwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                                  const rumus_tensor *x, rumus_tensor *y,
                                  rumus_tensor *indices);

/*! rumus_maxpool2d_bwd() :
 *  dx[n, c, h, w] = the sum of dy[n, c, oh, ow] over the outputs whose
 *  window holds (h, w) and whose index is h * W + w, oh then ow
 *  ascending (a gather; 0 where none).  dy and indices are [N, C, OH, OW]
 *  with OH, OW the output extents of dx's H, W under p; dx is [N, C, H,
 *  W] of dy's type.  The indices are read on the device: one that is not
 *  an element of its output's window (outside the plane included; -1 is
 *  accepted where the window is empty) adds nothing, and the next
 *  rumus_ctx_sync() returns RUMUS_EINDEX naming the index and its flat
 *  position in indices (as an int: "at row" in the message).
 *  @return as rumus_maxpool2d_fwd(), for dy, indices and dx. */
RUMUS_API int rumus_maxpool2d_bwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                                  const rumus_tensor *dy,
                                  const rumus_tensor *indices,
                                  rumus_tensor *dx);

/*! rumus_avgpool2d_fwd() :
 *  y[n, c, oh, ow] = (sum of x over rows [hs, he) x columns [ws, we)
 *  clipped to the input) / divisor, with hs = oh s - p and he = min(hs + k,
 *  H + p) (a ceil-mode window past the right padding stops there), and
 *  divisor = divisor_override if > 0, else (he - hs)(we - ws) with
 *  count_include_pad, else the count of elements inside the input.
 *  p->dilation_h and _w must be 1.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (parameters as
 *          rumus_pool2d_output_size(), a dilation other than 1, a negative
 *          divisor_override, another context, overlap), RUMUS_EDTYPE,
 *          RUMUS_ESHAPE (as rumus_maxpool2d_fwd()), RUMUS_EBUILD,
 *          RUMUS_ECL. */
RUMUS_API int rumus_avgpool2d_fwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                                  const rumus_tensor *x, rumus_tensor *y);
/*! rumus_avgpool2d_bwd() :
 *  dx[n, c, h, w] = the sum over the outputs whose window holds (h, w),
 *  oh then ow ascending, of dy / that output's divisor (a gather).  dy is
 *  [N, C, OH, OW] for dx's [N, C, H, W] under p.  Errors as
 *  rumus_avgpool2d_fwd(). */
RUMUS_API int rumus_avgpool2d_bwd(rumus_ctx *ctx, const rumus_pool2d_params *p,
                                  const rumus_tensor *dy, rumus_tensor *dx);

/*! rumus_adaptive_avgpool2d_fwd() :
 *  y[n, c, oh, ow] = the mean of x over the bin rows [floor(oh H / OH),
 *  ceil((oh + 1) H / OH)) x columns likewise, for the OH x OW of y's
 *  shape (larger than H x W too: bins then repeat rows).  Bins may overlap
 *  and differ in size when OH does not divide H.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_ESHAPE (a tensor not
 *          4-D, N or C differing: the axis named; H, W, OH or OW of 0),
 *          RUMUS_EINVAL (another context, overlap), RUMUS_EBUILD,
 *          RUMUS_ECL. */
RUMUS_API int rumus_adaptive_avgpool2d_fwd(rumus_ctx *ctx,
                                           const rumus_tensor *x,
                                           rumus_tensor *y);
/*! rumus_adaptive_avgpool2d_bwd() :
 *  dx[n, c, h, w] = the sum over the bins that hold (h, w), oh then ow
 *  ascending, of dy / (the bin's height x width) (a gather); dy [N, C, OH,
 *  OW], dx [N, C, H, W].  Errors as rumus_adaptive_avgpool2d_fwd(). */
RUMUS_API int rumus_adaptive_avgpool2d_bwd(rumus_ctx *ctx,
                                           const rumus_tensor *dy,
                                           rumus_tensor *dx);

/* ------------------------------------------------------------------------ */
/* Embedding                                                                 */
/* ------------------------------------------------------------------------ */
/* PyTorch's torch.nn.functional.embedding (with padding_idx) and its weight
 * gradient.  weight and dweight are 2-D [rows, dim] (row-major), rows at
 * most INT32_MAX; ids are RUMUS_I32 of any shape [...] of at most
 * RUMUS_MAX_DIMS - 1 axes and INT32_MAX elements (n positions, flattened
 * row-major); out and dout are [..., dim]: ids' shape followed by dim.
 * padding_idx is -1 (none) or a row in [0, rows) (RUMUS_EINVAL otherwise):
 * that row gets no gradient; the forward still reads it, as PyTorch's.
 * An id outside [0, rows) is found on the device: nothing is read out of
 * bounds, the forward writes a row of zeros for it and the backward adds
 * nothing for it, and the next rumus_ctx_sync() returns RUMUS_EINDEX
 * naming the id and its flat position in ids ("id 7 out of range at row
 * 3"; the first one found when there are several).  Both variants run one
 * program per pair of storage types; rumus_cache_fill() builds the F32
 * one.  No output may share memory with another tensor of its call.  A
 * call whose output has no elements (rows or dim of 0, or n of 0 in the
 * forward) checks its arguments and enqueues nothing; ids are not read. */

/*! rumus_embedding_fwd() :
 *  out[p, c] = weight[ids[p], c]: each element copied bit for bit (NaN
 *  payloads too); 0 for an id outside [0, rows), reported as above.
 *  weight is F32, F16 or BF16; out has weight's type.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (padding_idx, a tensor of
 *          another context, overlap), RUMUS_EDTYPE (weight not floating,
 *          out not weight's type, ids not I32), RUMUS_ESHAPE (weight not
 *          2-D or over INT32_MAX rows; ids with RUMUS_MAX_DIMS axes or over
 *          INT32_MAX elements; out not ids' shape + [dim]: the message names
 *          the axis), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_embedding_fwd(rumus_ctx *ctx, const rumus_tensor *weight,
                                  const rumus_tensor *ids, int padding_idx,
                                  rumus_tensor *out);

/*! rumus_embedding_bwd() :
 *  dweight[r, c] = the sum of dout[p, c] over the positions p with
 *  ids[p] == r, for every r other than padding_idx; dweight is
 *  overwritten, and rows that no id names (padding_idx's included) get 0.
 *  dout is F32, F16 or BF16; dweight is dout's type or F32 (a 16-bit
 *  gradient summed into F32 weights' gradient, mixed precision).  Sums
 *  are float, each element rounded once to dweight's type.
 *  Deterministic: no float atomics.  Every element is summed in ascending
 *  position order, in fixed groups whose partials are added in order, so
 *  the bits depend on the inputs alone: not on scheduling, the work-group
 *  size or the variant (both give the same bits).  Tables of more than
 *  128 rows: the positions are sorted by id on the device (a stable radix
 *  sort, integer work only) and the groups are tiles of 256 entries of
 *  the sorted positions; an id repeated any number of times costs no
 *  serial walk longer than a tile plus one partial per tile.  Scratch: 20
 *  bytes per position, 8 per row and 8 per column per 256 positions.
 *  Tables of at most 128 rows (when a work-group's local memory holds
 *  rows x 64 floats, as it does on every OpenCL 1.2 GPU and CPU): the
 *  groups are chunks of consecutive positions (at
 *  least 8 per row, fixed by the shape), each summed for every row at
 *  once; scratch: 4 bytes per row and column per chunk.  Scratch is the
 *  context's, kept between calls.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EINVAL (padding_idx, another
 *          context, overlap), RUMUS_EDTYPE (dout not floating, dweight
 *          neither F32 nor dout's type, ids not I32), RUMUS_ESHAPE (as
 *          rumus_embedding_fwd(), for dweight and dout), RUMUS_EDEVMEM
 *          (scratch), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_embedding_bwd(rumus_ctx *ctx, const rumus_tensor *dout,
                                  const rumus_tensor *ids, int padding_idx,
                                  rumus_tensor *dweight);
/* Permute, broadcasting and sums over axes                                  */
/* ------------------------------------------------------------------------ */

/* Tensors of up to RUMUS_MAX_DIMS dimensions, row-major and contiguous
 * (each op reads its tensors' shapes; views with strides are not tensors:
 * rumus_permute makes the contiguous copy).  Every tensor of a call is
 * F32, F16 or BF16, all of one type (RUMUS_EDTYPE otherwise), except that
 * rumus_reduce_sum's y may also be F32 for 16-bit x.  Outputs never
 * overlap the inputs, except where a function says "may alias".  Index
 * arithmetic is 64-bit: tensors of more than 2^31 elements are fine.
 * rumus_cache_fill() builds the F32 programs; a 16-bit call, or a
 * reduce_sum into an F32 y from 16-bit x, builds its program at first
 * use. */

/*! rumus_permute() :
 *  y = x.permute(perm).contiguous() in PyTorch's terms: y has x's ndim
 *  dimensions, y's axis d is x's axis perm[d] (y->shape[d] ==
 *  x->shape[perm[d]]), and y[i_0, ..., i_{n-1}] = x[j] with j[perm[d]] =
 *  i_d.  perm holds x->ndim distinct axes (NULL only for a 0-D x).  The
 *  stored bits are moved unchanged (NaN payloads too), so the result is
 *  exact and the same on every device and variant.  Any permutation of up
 *  to 8 dimensions runs; one that keeps the last dimension in place (a
 *  head split or merge [B, T, H, D] <-> [B, H, T, D]) copies rows with
 *  vector moves, one that moves it (a transpose) goes through 32 x 32
 *  tiles (in local memory on the work-group variant, 8 x 8 blocks in
 *  registers on the CPU variant), and one that keeps
 *  x's memory order (only extents of 1 move) is a buffer copy.  y must
 *  not overlap x.
 *  @return RUMUS_OK, RUMUS_ENULL (ctx, x, y, or perm with ndim > 0),
 *          RUMUS_EDTYPE (x not floating, y of another type), RUMUS_EINVAL
 *          (perm[d] not an axis of x or repeated, naming d; a tensor of
 *          another context; overlap), RUMUS_ESHAPE (y's ndim or an extent
 *          of y, naming the axis), RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_permute(rumus_ctx *ctx, const rumus_tensor *x,
                            const int *perm, rumus_tensor *y);

/*! rumus_broadcast_add() / rumus_broadcast_mul() :
 *  out = a + b / a * b with PyTorch's broadcasting: the shapes are aligned
 *  from the right (the tensor with fewer dimensions gets leading extents
 *  of 1), each pair of extents is equal or one of them is 1, and out has
 *  the larger ndim and the broadcast extents (the one that is not 1; 0
 *  stays 0 against 1).  A 0-D tensor is a scalar.  Float arithmetic, the
 *  result rounded once to the storage type; element-wise, so the same bits
 *  on every run, variant and device that rounds float arithmetic
 *  correctly.  out may alias a or b (the same bytes: that input then has
 *  out's shape); any other overlap is refused.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE (a not floating, b or out
 *          of another type), RUMUS_ESHAPE (extents that do not broadcast,
 *          out's ndim or an extent of out; the out axis named),
 *          RUMUS_EINVAL (a tensor of another context, overlap),
 *          RUMUS_EBUILD, RUMUS_ECL. */
RUMUS_API int rumus_broadcast_add(rumus_ctx *ctx, const rumus_tensor *a,
                                  const rumus_tensor *b, rumus_tensor *out);
RUMUS_API int rumus_broadcast_mul(rumus_ctx *ctx, const rumus_tensor *a,
                                  const rumus_tensor *b, rumus_tensor *out);

/*! rumus_reduce_sum() :
 *  y = x.sum(dims, keepdim) in PyTorch's terms, with the reduced axes as
 *  a bit mask: bit d of `axes` reduces x's axis d (0 reduces nothing: a
 *  copy, converted to y's type).  y's shape is x's with each reduced
 *  axis of extent 1 (keepdim != 0) or removed (keepdim == 0: a full
 *  reduction gives a 0-D y).  Sums are float, in an order fixed by the
 *  shape, the variant and the device (a small y with long sums cuts them
 *  into chunks by the compute units), so every run gives the same bits
 *  (the variants may differ in the last bits); a sum over no elements is
 *  0.
 *  y is of x's type, or F32 for 16-bit x (the float sums stored without a
 *  16-bit rounding).  This is the backward of the broadcasting ops:
 *  da = rumus_reduce_sum(dout) over the axes along which a was broadcast.
 *  y must not overlap x.
 *  @return RUMUS_OK, RUMUS_ENULL, RUMUS_EDTYPE, RUMUS_EINVAL (a bit of
 *          axes at or past x's ndim, another context, overlap),
 *          RUMUS_ESHAPE (y's ndim or an extent of y, naming the axis),
 *          RUMUS_EBUILD, RUMUS_ECL, RUMUS_EDEVMEM (the chunks' scratch
 *          buffer). */
RUMUS_API int rumus_reduce_sum(rumus_ctx *ctx, const rumus_tensor *x,
                               unsigned axes, int keepdim, rumus_tensor *y);

/* Attention (scaled dot-product, flash style)                               */
/* ------------------------------------------------------------------------ */
/* PyTorch's F.scaled_dot_product_attention for q [B, H, Tq, D], k and v
 * [B, H, Tk, D] (row-major, D contiguous; Tq and Tk independent, any
 * length; head dim D from 1 to RUMUS_ATTENTION_MAX_D), per head and query
 * row i, with s = params->scale:
 *     S[i, j] = s * q_i . k_j + mask[b, h, i, j],
 *     S[i, j] = -inf where causal and j > i (query i sees keys 0 .. i:
 *               PyTorch's is_causal, top-left aligned when Tq != Tk),
 *     out_i   = sum_j softmax_j(S[i, :]) v_j,
 *     lse_i   = log sum_j exp(S[i, j])   (natural log).
 * The Tq x Tk matrix is never stored: the forward runs an online softmax
 * over blocks of keys, the backward recomputes the probabilities from q,
 * k and lse (FlashAttention-2).
 * Types: q, k, v, out, dout, dq, dk and dv are all F32, all F16 or all
 * BF16 (else RUMUS_EDTYPE); the mask is any of the three; lse is F32.
 * Arithmetic and accumulators are float; each output is rounded once.
 * The mask (NULL: none) is additive, 2 to 4 dimensions, broadcast to [B,
 * H, Tq, Tk] by PyTorch's rules (aligned from the right, each extent equal
 * or 1): a [Tq, Tk] mask serves every head, a boolean mask is 0 / -inf.
 * A row whose every score is -inf (Tk = 0, or a mask of -inf over the
 * row) gets out = 0 and lse = -inf, and contributes 0 to dq, dk and dv
 * (PyTorch gives NaN there); a NaN or +inf score makes its row's out and
 * lse NaN.  A key whose probability is 0 (masked, or after the diagonal
 * when causal) contributes nothing, even a NaN or infinite v.
 * Variants (RUMUS_OPT_VARIANT): the work-group variant gives a group 64
 * query rows (key rows for dk and dv), one per work-item, and stages the
 * other side's rows in local memory; the row variant gives a work-item
 * one row and no barriers.  Both skip the key tiles that a causal row
 * never sees.  With F32 storage the work-group variant runs
 * register-blocked tiled kernels instead where the device takes them (a
 * group a tile of 64 rows, each work-item a 4 x 4 block of scores and a
 * block of the outputs in registers; D <= 128); 16-bit storage keeps the
 * work-group kernels.  The environment variable RUMUS_ATTENTION_TILE =
 * "BMxBNxRMxRN[xDC[xDCKV]]" sets the tiles, "default" takes the tiled
 * kernels for every storage and "off" for none (RUMUS_ATTENTION_FWD_TILE
 * and RUMUS_ATTENTION_BWD_TILE for the forward or the backward alone;
 * docs/DESIGN.md; values the kernels or the device cannot take are
 * ignored).
 * Determinism: no atomics; every sum runs in a fixed order (keys or
 * queries ascending, D in fixed lanes), so a call gives the same bits on
 * every run on one device, variant and tiling (the variants may differ in
 * the last bits).  The backward computes dk and dv by key (looping over
 * the queries) and dq by query (looping over the keys).
 * Programs are specialised on D: rumus_cache_fill() builds the F32
 * programs (no mask or an F32 mask) for D = 32, 64, 96 and 128; other
 * types and head dims build at first use.
 * Errors common to the family: RUMUS_ENULL (ctx or a required tensor
 * NULL), RUMUS_EDTYPE, RUMUS_ESHAPE (q not 4-D, D out of range; k, v,
 * out, dout, dq, dk or dv not [B, H, T, D] with q's B, H and D, v's Tk
 * not k's; lse not [B, H, Tq]; a mask that does not broadcast),
 * RUMUS_EINVAL (scale, a tensor of another context, overlap: no output
 * may share memory with any other tensor of the call), RUMUS_EBUILD,
 * RUMUS_ECL. */

/* Largest head dim D. */
#define RUMUS_ATTENTION_MAX_D 256

/* Parameters of attention; RUMUS_ATTENTION_DEFAULTS: scale 1 / sqrt(D),
 * not causal. */
typedef struct {
  float scale; /* > 0 and finite; 0 means 1 / sqrt(D) (the default) */
  int causal;  /* nonzero: query i attends to keys j <= i (PyTorch's
                  is_causal, top-left aligned when Tq != Tk) */
} rumus_attention_params;

#define RUMUS_ATTENTION_DEFAULTS {0.0f, 0}

/*! rumus_attention_fwd() :
 *  out [B, H, Tq, D] (q's type and shape) = attention of q [B, H, Tq, D]
 *  over k and v [B, H, Tk, D], as the section says; mask NULL or an
 *  additive float tensor broadcastable to [B, H, Tq, Tk]; lse NULL
 *  (inference) or F32 [B, H, Tq]: the row log-sum-exp of the scaled,
 *  masked scores, which rumus_attention_bwd() needs.  params NULL means
 *  RUMUS_ATTENTION_DEFAULTS.  No output may share memory with another
 *  tensor.  B * H * Tq = 0 writes nothing; Tk = 0 gives out = 0 and lse
 *  = -inf.
 *  @return RUMUS_OK or an error of the section's list (a negative or
 *          non-finite scale: RUMUS_EINVAL). */
RUMUS_API int rumus_attention_fwd(rumus_ctx *ctx,
                                  const rumus_attention_params *p,
                                  const rumus_tensor *q, const rumus_tensor *k,
                                  const rumus_tensor *v,
                                  const rumus_tensor *mask, rumus_tensor *out,
                                  rumus_tensor *lse);
/*! rumus_attention_bwd() :
 *  From q, k, v, mask and params of a forward, its out and lse
 *  (required), and dout (out's shape and type): dq (q's shape), dk and dv
 *  (k's shape), each NULL when not wanted (all three NULL does nothing).
 *  With P the forward's probabilities, delta_i = dout_i . out_i and dS =
 *  P * (dout v^T - delta): dv = P^T dout, dk = s * dS^T q, dq = s * dS k.
 *  No gradient reaches the mask.  Deterministic: no float atomics (see
 *  the section).  Scratch, allocated per call: 4 bytes per query row.
 *  No output may share memory with another tensor.
 *  @return RUMUS_OK or an error of the section's list, RUMUS_EDEVMEM
 *          (scratch). */
RUMUS_API int rumus_attention_bwd(
    rumus_ctx *ctx, const rumus_attention_params *p, const rumus_tensor *q,
    const rumus_tensor *k, const rumus_tensor *v, const rumus_tensor *mask,
    const rumus_tensor *out, const rumus_tensor *lse, const rumus_tensor *dout,
    rumus_tensor *dq, rumus_tensor *dk, rumus_tensor *dv);

#ifdef __cplusplus
}
#endif
#endif /* RUMUS_H */
