/*
 * context.c - devices, contexts, options, synchronisation and profiling.
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* clGetPlatformIDs through the ICD loader when no platform is installed
 * (cl_khr_icd). */
#define CL_PLATFORM_NOT_FOUND_KHR_COMPAT (-1001)

struct rumus__event_node {
  cl_event event;
  rumus__event_node *next;
  char op[RUMUS_PROFILE_NAME];     /* rumus_ctx_kernel_profile()'s keys */
  char kernel[RUMUS_PROFILE_NAME];
};

/* Message of the last failed create/adopt or device query of this thread
 * (there is no context to hold it). */
static _Thread_local char create_error[1024];

const char *rumus_last_create_error(void) { return create_error; }

static int create_fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int create_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(create_error, sizeof create_error, fmt, ap);
  va_end(ap);
  return code;
}

/* A failed OpenCL call before there is a context; `what` names the call. */
static int create_fail_cl(cl_int e, const char *what) {
  return create_fail(rumus__status_from_cl(e), "%s: %s (%d)", what,
                     rumus__cl_error_name(e), (int)e);
}

/* ---- Device queries ------------------------------------------------------ */

/* A fixed-size device query; `name` names the parameter in messages. */
static int device_info(cl_device_id d, cl_device_info param, const char *name,
                       size_t size, void *out) {
  cl_int e = clGetDeviceInfo(d, param, size, out, NULL);
  if (e == CL_SUCCESS) return RUMUS_OK;
  char what[96];
  snprintf(what, sizeof what, "clGetDeviceInfo(%s)", name);
  return create_fail_cl(e, what);
}
#define DEVICE_INFO(d, param, var) \
  device_info((d), (param), #param, sizeof(var), &(var))

/* A string query of a platform (p != NULL) or a device into buf, cut to
 * len - 1 characters: the size first, so that a long name is not an
 * error. */
static int info_string(cl_platform_id p, cl_device_id d, cl_uint param,
                       const char *name, char *buf, size_t len) {
  size_t need = 0;
  char *tmp = NULL;
  cl_int e = p ? clGetPlatformInfo(p, param, 0, NULL, &need)
               : clGetDeviceInfo(d, param, 0, NULL, &need);
  if (e == CL_SUCCESS) {
    tmp = malloc(need + 1);
    if (tmp == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
    e = p ? clGetPlatformInfo(p, param, need, tmp, NULL)
          : clGetDeviceInfo(d, param, need, tmp, NULL);
  }
  if (e != CL_SUCCESS) {
    free(tmp);
    char what[96];
    snprintf(what, sizeof what, "%s(%s)",
             p ? "clGetPlatformInfo" : "clGetDeviceInfo", name);
    return create_fail_cl(e, what);
  }
  tmp[need] = '\0';
  snprintf(buf, len, "%s", tmp);
  free(tmp);
  return RUMUS_OK;
}

/* "platform / device" */
static int device_label(cl_platform_id p, cl_device_id d, char *buf,
                        size_t len) {
  char pn[254], dn[254]; /* both fit in a 512-byte label */
  RUMUS__FORWARD(info_string(p, NULL, CL_PLATFORM_NAME, "CL_PLATFORM_NAME",
                             pn, sizeof pn));
  RUMUS__FORWARD(
      info_string(NULL, d, CL_DEVICE_NAME, "CL_DEVICE_NAME", dn, sizeof dn));
  snprintf(buf, len, "%s / %s", pn, dn);
  return RUMUS_OK;
}

/* cl_nv_device_attribute_query's registers per block into *regs and
 * compute capability (major 10 + minor) into *sm, 0 where the device lacks
 * the extension. */
#define RUMUS_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define RUMUS_CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#define RUMUS_CL_DEVICE_REGISTERS_PER_BLOCK_NV 0x4002
static int nv_attributes(cl_device_id d, cl_uint *regs, cl_uint *sm) {
  char ext[8192];
  cl_uint major = 0, minor = 0;
  *regs = *sm = 0;
  RUMUS__FORWARD(info_string(NULL, d, CL_DEVICE_EXTENSIONS,
                             "CL_DEVICE_EXTENSIONS", ext, sizeof ext));
  if (strstr(ext, "cl_nv_device_attribute_query") == NULL) return RUMUS_OK;
  RUMUS__FORWARD(device_info(d, RUMUS_CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV,
                             "CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV",
                             sizeof major, &major));
  RUMUS__FORWARD(device_info(d, RUMUS_CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV,
                             "CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV",
                             sizeof minor, &minor));
  *sm = major < 100 && minor < 10 ? major * 10 + minor : 0;
  return device_info(d, RUMUS_CL_DEVICE_REGISTERS_PER_BLOCK_NV,
                     "CL_DEVICE_REGISTERS_PER_BLOCK_NV", sizeof *regs, regs);
}

static int device_is_gpu(cl_device_id d, int *gpu) {
  cl_device_type t = 0;
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_TYPE, t));
  *gpu = (t & CL_DEVICE_TYPE_GPU) != 0;
  return RUMUS_OK;
}

/* The device's OpenCL C version as major * 10 + minor, and its text. */
static int opencl_c_version(cl_device_id d, int *ver, char *text,
                            size_t len) {
  RUMUS__FORWARD(info_string(NULL, d, CL_DEVICE_OPENCL_C_VERSION,
                             "CL_DEVICE_OPENCL_C_VERSION", text, len));
  int major = 0, minor = 0;
  if (sscanf(text, "OpenCL C %d.%d", &major, &minor) != 2 || major < 0 ||
      minor < 0 || minor > 9)
    return create_fail(RUMUS_EUNSUPPORTED,
                       "the device's OpenCL C version \"%s\" cannot be read",
                       text);
  *ver = major * 10 + minor;
  return RUMUS_OK;
}

/* ---- Device enumeration ------------------------------------------------ */

typedef struct {
  cl_platform_id platform;
  cl_device_id device;
} device_entry;

/* The platforms; *n is 0 (and *plats NULL) when none is installed. */
static int list_platforms(cl_platform_id **plats, cl_uint *n) {
  *plats = NULL;
  *n = 0;
  cl_uint np = 0;
  cl_int e = clGetPlatformIDs(0, NULL, &np);
  if (e == CL_PLATFORM_NOT_FOUND_KHR_COMPAT) return RUMUS_OK;
  if (e != CL_SUCCESS) return create_fail_cl(e, "clGetPlatformIDs (count)");
  if (np == 0) return RUMUS_OK;
  *plats = calloc(np, sizeof **plats);
  if (*plats == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
  e = clGetPlatformIDs(np, *plats, NULL);
  if (e != CL_SUCCESS) {
    free(*plats);
    *plats = NULL;
    return create_fail_cl(e, "clGetPlatformIDs (list)");
  }
  *n = np;
  return RUMUS_OK;
}

/* Appends the devices of platform p to *list (*count entries). */
static int append_devices(cl_platform_id p, device_entry **list, int *count) {
  cl_uint nd = 0;
  cl_int e = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
  if (e == CL_DEVICE_NOT_FOUND || (e == CL_SUCCESS && nd == 0))
    return RUMUS_OK; /* a platform without devices */
  if (e != CL_SUCCESS) return create_fail_cl(e, "clGetDeviceIDs (count)");
  cl_device_id *devs = calloc(nd, sizeof *devs);
  device_entry *grown =
      devs ? realloc(*list, ((size_t)*count + nd) * sizeof *grown) : NULL;
  if (grown == NULL) {
    free(devs);
    return create_fail(RUMUS_ENOMEM, "out of host memory");
  }
  *list = grown;
  e = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs, NULL);
  if (e != CL_SUCCESS) {
    free(devs);
    return create_fail_cl(e, "clGetDeviceIDs (list)");
  }
  for (cl_uint d = 0; d < nd; d++)
    grown[(*count)++] = (device_entry){p, devs[d]};
  free(devs);
  return RUMUS_OK;
}

/* Lists every device of every platform; *list is malloc'ed. */
static int list_devices(device_entry **list, int *count) {
  *list = NULL;
  *count = 0;
  cl_platform_id *plats;
  cl_uint np;
  RUMUS__FORWARD(list_platforms(&plats, &np));
  int st = RUMUS_OK;
  for (cl_uint p = 0; p < np && st == RUMUS_OK; p++)
    st = append_devices(plats[p], list, count);
  free(plats);
  if (st != RUMUS_OK) {
    free(*list);
    *list = NULL;
    *count = 0;
  }
  return st;
}

int rumus_device_count(int *count) {
  create_error[0] = '\0';
  if (count == NULL) return RUMUS_ENULL;
  device_entry *list;
  int st = list_devices(&list, count);
  free(list);
  return st;
}

static int describe(const device_entry *dev, char *buf, size_t len) {
  char label[512], ver[128];
  int gpu;
  cl_uint cu = 0;
  RUMUS__FORWARD(device_label(dev->platform, dev->device, label, sizeof label));
  RUMUS__FORWARD(info_string(NULL, dev->device, CL_DEVICE_OPENCL_C_VERSION,
                             "CL_DEVICE_OPENCL_C_VERSION", ver, sizeof ver));
  RUMUS__FORWARD(DEVICE_INFO(dev->device, CL_DEVICE_MAX_COMPUTE_UNITS, cu));
  RUMUS__FORWARD(device_is_gpu(dev->device, &gpu));
  snprintf(buf, len, "%s (%s, %s, %u compute units)", label,
           gpu ? "GPU" : "not a GPU", ver, cu);
  return RUMUS_OK;
}

int rumus_device_describe(int index, char *buf, size_t len) {
  create_error[0] = '\0';
  if (buf == NULL) return RUMUS_ENULL;
  if (len) buf[0] = '\0';
  device_entry *list;
  int n;
  RUMUS__FORWARD(list_devices(&list, &n));
  int st = index < 0 || index >= n
               ? create_fail(RUMUS_ENODEVICE, "no device %d (%d devices)",
                             index, n)
               : describe(&list[index], buf, len);
  free(list);
  return st;
}

static int ci_contains(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] &&
           tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
      i++;
    if (i == n) return 1;
  }
  return n == 0;
}

/* The index of the first device whose label contains sel, or -1. */
static int find_by_name(const device_entry *list, int n, const char *sel,
                        int *pick) {
  *pick = -1;
  for (int i = 0; i < n && *pick < 0; i++) {
    char label[512];
    RUMUS__FORWARD(
        device_label(list[i].platform, list[i].device, label, sizeof label));
    if (ci_contains(label, sel)) *pick = i;
  }
  return RUMUS_OK;
}

/* The first GPU, else device 0. */
static int find_default(const device_entry *list, int n, int *pick) {
  *pick = 0;
  for (int i = 0; i < n; i++) {
    int gpu;
    RUMUS__FORWARD(device_is_gpu(list[i].device, &gpu));
    if (gpu) {
      *pick = i;
      break;
    }
  }
  return RUMUS_OK;
}

static int pick_device(const device_entry *list, int n, const char *sel,
                       int *pick) {
  *pick = -1;
  if (sel == NULL || sel[0] == '\0') return find_default(list, n, pick);
  char *end;
  long idx = strtol(sel, &end, 10);
  if (*end != '\0') return find_by_name(list, n, sel, pick);
  if (idx >= 0 && idx < n) *pick = (int)idx;
  return RUMUS_OK;
}

/* Picks a device by the selector rules of rumus_ctx_create(). */
static int select_device(const char *sel, device_entry *out) {
  device_entry *list;
  int n, pick;
  RUMUS__FORWARD(list_devices(&list, &n));
  if (n == 0) {
    free(list);
    return create_fail(RUMUS_ENODEVICE,
                       "no OpenCL platform or device was found (is an ICD "
                       "such as pocl-opencl-icd installed?)");
  }
  int st = pick_device(list, n, sel, &pick);
  if (st == RUMUS_OK && pick < 0)
    st = create_fail(RUMUS_ENODEVICE,
                     "no OpenCL device matches \"%s\" (%d devices)", sel, n);
  if (st == RUMUS_OK) *out = list[pick];
  free(list);
  return st;
}

/* ---- Creation ---------------------------------------------------------- */

static int variant_from_env(void) {
  const char *v = getenv("RUMUS_VARIANT");
  if (v == NULL) return RUMUS_VARIANT_AUTO;
  if (ci_contains(v, "gpu")) return RUMUS_VARIANT_GPU;
  if (ci_contains(v, "cpu")) return RUMUS_VARIANT_CPU;
  return RUMUS_VARIANT_AUTO;
}

static int wg_valid(const rumus_ctx *ctx, long value) {
  return value == 0 || (value >= 16 && (size_t)value <= ctx->max_wg &&
                        (value & (value - 1)) == 0);
}

/* RUMUS_WORKGROUP_SIZE, when it holds a valid size, else 0. */
static int wg_from_env(const rumus_ctx *ctx) {
  const char *v = getenv("RUMUS_WORKGROUP_SIZE");
  if (v == NULL || *v == '\0') return 0;
  char *end;
  long n = strtol(v, &end, 10);
  return (*end == '\0' && n <= 4096 && wg_valid(ctx, n)) ? (int)n : 0;
}

/* Reads the device facts of ctx->device. */
static int read_device(rumus_ctx *ctx) {
  cl_device_id d = ctx->device;
  char text[128];
  int ver = 0;
  RUMUS__FORWARD(opencl_c_version(d, &ver, text, sizeof text));
  if (ver < 11)
    return create_fail(RUMUS_EUNSUPPORTED,
                       "the device's OpenCL C version (\"%s\") is older than "
                       "1.1",
                       text);
  /* -cl-std follows the device's OpenCL C version, not the platform's
   * (PoCL reports platform 3.0 with OpenCL C 1.2). */
  snprintf(ctx->cl_std, sizeof ctx->cl_std, "-cl-std=CL%d.%d", ver / 10,
           ver % 10);
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_PLATFORM, ctx->platform));
  RUMUS__FORWARD(device_label(ctx->platform, d, ctx->name, sizeof ctx->name));
  RUMUS__FORWARD(device_is_gpu(d, &ctx->is_gpu));
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_MAX_COMPUTE_UNITS,
                             ctx->compute_units));
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, ctx->max_wg));
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_LOCAL_MEM_SIZE, ctx->local_mem));
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, ctx->max_alloc));
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT,
                             ctx->float_width));
  /* A family that needs division rounded the same in every kernel asks
   * for it where the device offers it. */
  cl_device_fp_config fp = 0;
  RUMUS__FORWARD(DEVICE_INFO(d, CL_DEVICE_SINGLE_FP_CONFIG, fp));
  ctx->cr_divide = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
  RUMUS__FORWARD(nv_attributes(d, &ctx->regs_per_block, &ctx->nv_sm));
  /* The kernels' NVIDIA-only code (inline PTX) asks for the instructions
   * of the device's compute capability. */
  if (ctx->nv_sm) {
    const size_t used = strlen(ctx->cl_std);
    snprintf(ctx->cl_std + used, sizeof ctx->cl_std - used,
             " -DRUMUS_NV_SM=%u", (unsigned)ctx->nv_sm);
  }
  if (ctx->max_wg == 0 || ctx->compute_units == 0)
    return create_fail(RUMUS_EUNSUPPORTED,
                       "the device reports %zu work-items per group and %u "
                       "compute units",
                       ctx->max_wg, (unsigned)ctx->compute_units);
  return RUMUS_OK;
}

/* The queue must be in-order; profiling follows its properties. */
static int read_queue(rumus_ctx *ctx) {
  cl_command_queue_properties props = 0;
  cl_int e = clGetCommandQueueInfo(ctx->queue, CL_QUEUE_PROPERTIES,
                                   sizeof props, &props, NULL);
  if (e != CL_SUCCESS)
    return create_fail_cl(e, "clGetCommandQueueInfo(CL_QUEUE_PROPERTIES)");
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return create_fail(RUMUS_EINVAL, "the queue must be in-order");
  ctx->profiling = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  return RUMUS_OK;
}

static int init_locks(rumus_ctx *ctx) {
  if (pthread_mutex_init(&ctx->lock, NULL) != 0)
    return create_fail(RUMUS_ENOMEM, "pthread_mutex_init failed");
  if (pthread_mutex_init(&ctx->scratch_lock, NULL) != 0) {
    pthread_mutex_destroy(&ctx->lock);
    return create_fail(RUMUS_ENOMEM, "pthread_mutex_init failed");
  }
  ctx->locks_ready = 1;
  return RUMUS_OK;
}

/* The device-side status buffer, zeroed. */
static int init_status(rumus_ctx *ctx) {
  cl_int e;
  const size_t words = RUMUS__STATUS_WORDS + RUMUS__TICKETS;
  ctx->status = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                               words * sizeof(cl_int), NULL, &e);
  if (e != CL_SUCCESS) {
    ctx->status = NULL;
    return create_fail_cl(e, "clCreateBuffer (status words)");
  }
  cl_int *zero = calloc(words, sizeof *zero);
  if (zero == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
  e = clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0,
                           words * sizeof *zero, zero, 0, NULL, NULL);
  free(zero);
  if (e != CL_SUCCESS)
    return create_fail_cl(e, "clEnqueueWriteBuffer (status words)");
  return RUMUS_OK;
}

/* Fills the device facts, options, locks and status buffer of a context
 * whose device, context and queue are set. */
static int ctx_init_common(rumus_ctx *ctx) {
  RUMUS__FORWARD(read_device(ctx));
  RUMUS__FORWARD(read_queue(ctx));
  ctx->opt_variant = variant_from_env();
  ctx->opt_wg = wg_from_env(ctx);
  RUMUS__FORWARD(init_locks(ctx));
  return init_status(ctx);
}

/* A zeroed context with a serial number no other context of the process
 * had (the per-thread failure records tell contexts apart by it, even
 * when a new context reuses a freed one's address). */
static rumus_ctx *ctx_new(void) {
  static atomic_uint_fast64_t last_serial;
  rumus_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx != NULL)
    ctx->serial = (uint64_t)atomic_fetch_add(&last_serial, 1) + 1;
  return ctx;
}

/* Releases what the context holds: every object it created, and for an
 * adopted context the references it took.  A failed release is not
 * reported: the reference is given up either way. */
static void ctx_destroy(rumus_ctx *ctx) {
  if (ctx->locks_ready) {
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->scratch_lock);
  }
  if (ctx->status) clReleaseMemObject(ctx->status);
  if (ctx->queue) clReleaseCommandQueue(ctx->queue);
  if (ctx->context) clReleaseContext(ctx->context);
  if (ctx->adopted && ctx->device) clReleaseDevice(ctx->device);
  free(ctx);
}

/* Finishes a context whose OpenCL objects are set: on failure it is
 * destroyed and *out stays NULL. */
static int ctx_finish(rumus_ctx *ctx, rumus_ctx **out) {
  int st = ctx_init_common(ctx);
  if (st != RUMUS_OK) {
    ctx_destroy(ctx);
    return st;
  }
  *out = ctx;
  return RUMUS_OK;
}

int rumus_ctx_create(rumus_ctx **out, const char *device, unsigned flags) {
  create_error[0] = '\0';
  if (out == NULL) return create_fail(RUMUS_ENULL, "out is NULL");
  *out = NULL;
  if (flags & ~RUMUS_CTX_PROFILING)
    return create_fail(RUMUS_EINVAL, "unknown flags 0x%x", flags);
  if (device == NULL) device = getenv("RUMUS_DEVICE");
  device_entry pick;
  RUMUS__FORWARD(select_device(device, &pick));
  rumus_ctx *ctx = ctx_new();
  if (ctx == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
  ctx->device = pick.device;
  cl_int e;
  cl_context_properties cprops[] = {CL_CONTEXT_PLATFORM,
                                    (cl_context_properties)pick.platform, 0};
  ctx->context = clCreateContext(cprops, 1, &pick.device, NULL, NULL, &e);
  if (e != CL_SUCCESS) {
    ctx->context = NULL;
    ctx_destroy(ctx);
    return create_fail_cl(e, "clCreateContext");
  }
  cl_command_queue_properties qp =
      (flags & RUMUS_CTX_PROFILING) ? CL_QUEUE_PROFILING_ENABLE : 0;
  /* clCreateCommandQueue is deprecated in 2.0 but is the 1.2 entry point. */
  ctx->queue = clCreateCommandQueue(ctx->context, pick.device, qp, &e);
  if (e != CL_SUCCESS) {
    ctx->queue = NULL;
    ctx_destroy(ctx);
    return create_fail_cl(e, "clCreateCommandQueue");
  }
  return ctx_finish(ctx, out);
}

/* The queue must belong to context and device. */
static int check_queue(cl_context context, cl_device_id device,
                       cl_command_queue queue) {
  cl_context qctx = NULL;
  cl_device_id qdev = NULL;
  cl_int e = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx,
                                   NULL);
  if (e != CL_SUCCESS)
    return create_fail_cl(e, "adopt: clGetCommandQueueInfo(CL_QUEUE_CONTEXT)");
  e = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
  if (e != CL_SUCCESS)
    return create_fail_cl(e, "adopt: clGetCommandQueueInfo(CL_QUEUE_DEVICE)");
  if (qctx != context || qdev != device)
    return create_fail(RUMUS_EINVAL,
                       "adopt: the queue belongs to another context or device");
  return RUMUS_OK;
}

/* Takes a reference to each of the application's objects, all or none. */
static int retain_adopted(cl_context context, cl_device_id device,
                          cl_command_queue queue) {
  cl_int e = clRetainContext(context);
  if (e != CL_SUCCESS) return create_fail_cl(e, "adopt: clRetainContext");
  e = clRetainDevice(device);
  if (e != CL_SUCCESS) {
    clReleaseContext(context);
    return create_fail_cl(e, "adopt: clRetainDevice");
  }
  e = clRetainCommandQueue(queue);
  if (e != CL_SUCCESS) {
    clReleaseDevice(device);
    clReleaseContext(context);
    return create_fail_cl(e, "adopt: clRetainCommandQueue");
  }
  return RUMUS_OK;
}

int rumus_ctx_adopt(rumus_ctx **out, cl_context context, cl_device_id device,
                    cl_command_queue queue) {
  create_error[0] = '\0';
  if (out == NULL) return create_fail(RUMUS_ENULL, "out is NULL");
  *out = NULL;
  if (context == NULL || device == NULL || queue == NULL)
    return create_fail(RUMUS_ENULL, "adopt: context, device and queue are "
                                    "required");
  RUMUS__FORWARD(check_queue(context, device, queue));
  rumus_ctx *ctx = ctx_new();
  if (ctx == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
  int st = retain_adopted(context, device, queue);
  if (st != RUMUS_OK) {
    free(ctx);
    return st;
  }
  ctx->adopted = 1;
  ctx->context = context;
  ctx->device = device;
  ctx->queue = queue;
  return ctx_finish(ctx, out);
}

static void events_release(rumus_ctx *ctx) {
  while (ctx->events) {
    rumus__event_node *n = ctx->events;
    ctx->events = n->next;
    clReleaseEvent(n->event);
    free(n);
  }
}

int rumus_ctx_free(rumus_ctx *ctx) {
  if (ctx == NULL) return RUMUS_OK;
  pthread_mutex_lock(&ctx->lock);
  size_t live = ctx->live_tensors;
  pthread_mutex_unlock(&ctx->lock);
  if (live)
    return rumus__fail(ctx, RUMUS_EBUSY,
                       "rumus_ctx_free: %zu tensors are still alive", live);
  /* The wait is a courtesy to the device: a failed one changes nothing,
   * since OpenCL keeps every object alive until the commands using it are
   * done, so the context is freed all the same. */
  clFinish(ctx->queue);
  rumus__programs_free(ctx);
  rumus__scratch_free(ctx);
  events_release(ctx);
  ctx_destroy(ctx);
  return RUMUS_OK;
}

/* ---- Sync, options, queries ------------------------------------------- */

static const char *deverr_op(cl_int code) {
  switch (code) {
    case RUMUS__DEVERR_XENT_TARGET:
      return "rumus_cross_entropy: target";
    case RUMUS__DEVERR_POOL_INDEX:
      return "rumus_maxpool2d_bwd: index";
    case RUMUS__DEVERR_EMBED_ID:
      return "rumus_embedding_fwd / _bwd: id";
  }
  return "unknown op";
}

/* Reads the status words and, if an op reported an error, clears them;
 * *word gets what was read.  The caller holds ctx->lock, so that no launch
 * comes between the read and the clear (its report would be lost) and two
 * syncs do not both report one error. */
static int take_device_error(rumus_ctx *ctx, cl_int word[]) {
  cl_int e = clEnqueueReadBuffer(ctx->queue, ctx->status, CL_TRUE, 0,
                                 RUMUS__STATUS_WORDS * sizeof *word, word, 0,
                                 NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e,
                          "rumus_ctx_sync: clEnqueueReadBuffer (status words)");
  if (word[0] == RUMUS__DEVERR_NONE) return RUMUS_OK;
  cl_int zero[RUMUS__STATUS_WORDS] = {0};
  e = clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof zero,
                           zero, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_ctx_sync: clEnqueueWriteBuffer "
                                  "(clearing the status words)");
  return RUMUS_OK;
}

int rumus_ctx_sync(rumus_ctx *ctx) {
  if (ctx == NULL) return RUMUS_ENULL;
  cl_int e = clFinish(ctx->queue);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_ctx_sync: clFinish");
  cl_int word[RUMUS__STATUS_WORDS];
  pthread_mutex_lock(&ctx->lock);
  int st = take_device_error(ctx, word);
  pthread_mutex_unlock(&ctx->lock);
  if (st != RUMUS_OK || word[0] == RUMUS__DEVERR_NONE) return st;
  return rumus__fail(ctx, RUMUS_EINDEX,
                     "%s %d out of range at row %d (found on the device)",
                     deverr_op(word[0]), (int)word[1], (int)word[2]);
}

int rumus_ctx_set_option(rumus_ctx *ctx, rumus_option opt, int value) {
  if (ctx == NULL) return RUMUS_ENULL;
  switch (opt) {
    case RUMUS_OPT_VARIANT:
      if (value < RUMUS_VARIANT_AUTO || value > RUMUS_VARIANT_CPU) break;
      ctx->opt_variant = value;
      return RUMUS_OK;
    case RUMUS_OPT_WORKGROUP_SIZE:
      if (!wg_valid(ctx, value)) break;
      ctx->opt_wg = value;
      return RUMUS_OK;
  }
  return rumus__fail(ctx, RUMUS_EOPTION,
                     "rumus_ctx_set_option: option %d does not take value %d",
                     (int)opt, value);
}

int rumus_ctx_get_option(const rumus_ctx *ctx, rumus_option opt, int *value) {
  if (ctx == NULL || value == NULL) return RUMUS_ENULL;
  switch (opt) {
    case RUMUS_OPT_VARIANT:
      *value = ctx->opt_variant;
      return RUMUS_OK;
    case RUMUS_OPT_WORKGROUP_SIZE:
      *value = ctx->opt_wg;
      return RUMUS_OK;
  }
  return RUMUS_EOPTION;
}

int rumus__env_tiling(const char *name, long *f, int min, int max) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') return 0;
  int n = 0;
  for (const char *c = v; n < max; n++) {
    char *end;
    const long x = strtol(c, &end, 10);
    if (end == c || x < 1 || x > 1024) return 0;
    f[n] = x;
    c = end;
    if (*c == '\0') return n + 1 >= min ? n + 1 : 0;
    if ((*c != 'x' && *c != 'X') || n == max - 1) return 0;
    c++;
  }
  return 0;
}

int rumus__gpu_variant(const rumus_ctx *ctx) {
  if (ctx->opt_variant == RUMUS_VARIANT_GPU) return 1;
  if (ctx->opt_variant == RUMUS_VARIANT_CPU) return 0;
  return ctx->is_gpu;
}

size_t rumus__reduce_wg(const rumus_ctx *ctx) {
  if (ctx->opt_wg) return (size_t)ctx->opt_wg;
  /* 256 keeps several work-groups resident per compute unit on GPUs and is
   * within every desktop device's limit; smaller devices get their max. */
  size_t wg = 256;
  while (wg > ctx->max_wg) wg /= 2;
  return wg;
}

const char *rumus_ctx_device_name(const rumus_ctx *ctx) {
  return ctx ? ctx->name : "";
}
int rumus_ctx_is_gpu(const rumus_ctx *ctx) { return ctx ? ctx->is_gpu : 0; }
int rumus_ctx_uses_gpu_variant(const rumus_ctx *ctx) {
  return ctx ? rumus__gpu_variant(ctx) : 0;
}
cl_context rumus_ctx_cl_context(const rumus_ctx *ctx) {
  return ctx ? ctx->context : NULL;
}
cl_device_id rumus_ctx_cl_device(const rumus_ctx *ctx) {
  return ctx ? ctx->device : NULL;
}
cl_command_queue rumus_ctx_cl_queue(const rumus_ctx *ctx) {
  return ctx ? ctx->queue : NULL;
}

/* ---- Profiling ---------------------------------------------------------- */

/* Called by rumus__launch with ctx->lock held: keeps the kernel's event. */
RUMUS__HIDDEN void rumus__record_event(rumus_ctx *ctx, cl_event ev,
                                       const char *op, const char *kernel);
void rumus__record_event(rumus_ctx *ctx, cl_event ev, const char *op,
                         const char *kernel) {
  rumus__event_node *n = malloc(sizeof *n);
  if (n == NULL) {
    clReleaseEvent(ev); /* Profiling loses one sample; the op still ran. */
    return;
  }
  n->event = ev;
  snprintf(n->op, sizeof n->op, "%s", op);
  snprintf(n->kernel, sizeof n->kernel, "%s", kernel);
  n->next = ctx->events;
  ctx->events = n;
}

/* The device start and end of a profiled launch. */
static cl_int event_times(cl_event ev, cl_ulong *t0, cl_ulong *t1) {
  cl_int e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START,
                                     sizeof *t0, t0, NULL);
  if (e == CL_SUCCESS)
    e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof *t1, t1,
                                NULL);
  return e;
}

/* What one walk over the recorded launches gathers; stats, when not NULL,
 * has room for one entry per distinct (op, kernel). */
typedef struct {
  uint64_t busy, first, last;
  rumus_kernel_stat *stats;
  size_t nstats;
} launch_totals;

static void add_to_stats(launch_totals *t, const rumus__event_node *n,
                         uint64_t ns) {
  size_t i = 0;
  while (i < t->nstats && (strcmp(t->stats[i].op, n->op) != 0 ||
                           strcmp(t->stats[i].kernel, n->kernel) != 0))
    i++;
  if (i == t->nstats) {
    memset(&t->stats[i], 0, sizeof t->stats[i]);
    memcpy(t->stats[i].op, n->op, sizeof n->op);
    memcpy(t->stats[i].kernel, n->kernel, sizeof n->kernel);
    t->nstats++;
  }
  t->stats[i].launches++;
  t->stats[i].ns += ns;
}

/* Waits for the launches to end, outside the lock (other threads may go
 * on launching; what they add after this is waited for by the next call). */
static int profiled_queue_finish(rumus_ctx *ctx, const char *who) {
  if (!ctx->profiling)
    return rumus__fail(ctx, RUMUS_EUNSUPPORTED,
                       "%s: the queue was not created with profiling", who);
  cl_int e = clFinish(ctx->queue);
  return e == CL_SUCCESS ? RUMUS_OK : rumus__fail_cl(ctx, e, "%s: clFinish", who);
}

/* Under the lock, after profiled_queue_finish(): sums the launches recorded
 * since the previous call into *t and forgets them. */
static int launches_take(rumus_ctx *ctx, const char *who, launch_totals *t) {
  t->busy = t->last = 0;
  t->first = UINT64_MAX;
  t->nstats = 0;
  int st = RUMUS_OK;
  for (rumus__event_node *n = ctx->events; n; n = n->next) {
    cl_ulong t0 = 0, t1 = 0;
    cl_int e = event_times(n->event, &t0, &t1);
    if (e != CL_SUCCESS) {
      st = rumus__fail_cl(ctx, e, "%s: clGetEventProfilingInfo", who);
      break;
    }
    t->busy += t1 - t0;
    if (t0 < t->first) t->first = t0;
    if (t1 > t->last) t->last = t1;
    if (t->stats) add_to_stats(t, n, t1 - t0);
  }
  events_release(ctx);
  return st;
}

/* rumus_ctx_kernel_time and _span. */
static int kernel_times(rumus_ctx *ctx, const char *who, uint64_t *busy_ns,
                        uint64_t *span_ns) {
  launch_totals t = {0};
  int st = profiled_queue_finish(ctx, who);
  if (st != RUMUS_OK) return st;
  pthread_mutex_lock(&ctx->lock);
  st = launches_take(ctx, who, &t);
  pthread_mutex_unlock(&ctx->lock);
  if (busy_ns) *busy_ns = st == RUMUS_OK ? t.busy : 0;
  if (span_ns) *span_ns = st == RUMUS_OK && t.last > t.first ? t.last - t.first : 0;
  return st;
}

static int stat_by_time(const void *a, const void *b) {
  const rumus_kernel_stat *x = a, *y = b;
  if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
  int c = strcmp(x->op, y->op);
  return c ? c : strcmp(x->kernel, y->kernel);
}

int rumus_ctx_kernel_profile(rumus_ctx *ctx, rumus_kernel_stat *out,
                             size_t cap, size_t *count) {
  static const char who[] = "rumus_ctx_kernel_profile";
  if (ctx == NULL || count == NULL || (out == NULL && cap > 0))
    return RUMUS_ENULL;
  *count = 0;
  int st = profiled_queue_finish(ctx, who);
  if (st != RUMUS_OK) return st;
  pthread_mutex_lock(&ctx->lock);
  size_t launches = 0;
  for (rumus__event_node *n = ctx->events; n; n = n->next) launches++;
  launch_totals t = {0};
  t.stats = malloc((launches ? launches : 1) * sizeof *t.stats);
  st = t.stats ? launches_take(ctx, who, &t)
                   : rumus__fail(ctx, RUMUS_ENOMEM, "%s: %zu launches", who,
                                 launches);
  pthread_mutex_unlock(&ctx->lock);
  if (st == RUMUS_OK) {
    qsort(t.stats, t.nstats, sizeof *t.stats, stat_by_time);
    const size_t n = t.nstats < cap ? t.nstats : cap;
    if (n > 0) memcpy(out, t.stats, n * sizeof *out);
    *count = t.nstats;
  }
  free(t.stats);
  return st;
}

int rumus_ctx_kernel_time(rumus_ctx *ctx, uint64_t *ns) {
  if (ctx == NULL || ns == NULL) return RUMUS_ENULL;
  return kernel_times(ctx, "rumus_ctx_kernel_time", ns, NULL);
}

int rumus_ctx_kernel_span(rumus_ctx *ctx, uint64_t *busy_ns,
                          uint64_t *span_ns) {
  if (ctx == NULL || (busy_ns == NULL && span_ns == NULL)) return RUMUS_ENULL;
  return kernel_times(ctx, "rumus_ctx_kernel_span", busy_ns, span_ns);
}
