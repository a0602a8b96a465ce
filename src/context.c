/*
 * context.c - devices, contexts, options, synchronisation and profiling.
 */
#include <ctype.h>
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
};

/* Message of the last failed create/adopt of this thread (no context yet). */
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

/* ---- Device enumeration ------------------------------------------------ */

typedef struct {
  cl_platform_id platform;
  cl_device_id device;
} device_entry;

/* Lists every device of every platform; *list is malloc'ed. */
static int list_devices(device_entry **list, int *count) {
  cl_uint np = 0;
  *list = NULL;
  *count = 0;
  cl_int e = clGetPlatformIDs(0, NULL, &np);
  if (e == CL_PLATFORM_NOT_FOUND_KHR_COMPAT || np == 0) return RUMUS_OK;
  if (e != CL_SUCCESS)
    return create_fail(RUMUS_ECL, "clGetPlatformIDs: %s (%d)",
                       rumus__cl_error_name(e), (int)e);
  cl_platform_id *plats = calloc(np, sizeof *plats);
  if (plats == NULL) return RUMUS_ENOMEM;
  clGetPlatformIDs(np, plats, NULL);
  int total = 0, cap = 0;
  device_entry *out = NULL;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) !=
            CL_SUCCESS ||
        nd == 0)
      continue;
    cl_device_id *devs = calloc(nd, sizeof *devs);
    if (devs == NULL) break;
    clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, devs, NULL);
    for (cl_uint d = 0; d < nd; d++) {
      if (total == cap) {
        cap = cap ? cap * 2 : 8;
        device_entry *n = realloc(out, (size_t)cap * sizeof *n);
        if (n == NULL) break;
        out = n;
      }
      if (total < cap) out[total++] = (device_entry){plats[p], devs[d]};
    }
    free(devs);
  }
  free(plats);
  *list = out;
  *count = total;
  return RUMUS_OK;
}

static void device_label(cl_platform_id p, cl_device_id d, char *buf,
                         size_t len) {
  char pn[256] = "", dn[256] = "";
  clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof pn - 1, pn, NULL);
  clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof dn - 1, dn, NULL);
  snprintf(buf, len, "%s / %s", pn, dn);
}

static int device_is_gpu(cl_device_id d) {
  cl_device_type t = 0;
  clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
  return (t & CL_DEVICE_TYPE_GPU) != 0;
}

/* Parses "OpenCL C 1.2 ..." into major * 10 + minor, 0 if unreadable. */
static int opencl_c_version(cl_device_id d) {
  char v[128] = "";
  clGetDeviceInfo(d, CL_DEVICE_OPENCL_C_VERSION, sizeof v - 1, v, NULL);
  int major = 0, minor = 0;
  if (sscanf(v, "OpenCL C %d.%d", &major, &minor) != 2) return 0;
  return major * 10 + minor;
}

int rumus_device_count(int *count) {
  if (count == NULL) return RUMUS_ENULL;
  device_entry *list;
  int st = list_devices(&list, count);
  free(list);
  return st;
}

int rumus_device_describe(int index, char *buf, size_t len) {
  if (buf == NULL) return RUMUS_ENULL;
  if (len) buf[0] = '\0';
  device_entry *list;
  int n;
  RUMUS__FORWARD(list_devices(&list, &n));
  if (index < 0 || index >= n) {
    free(list);
    return RUMUS_ENODEVICE;
  }
  char label[512], ver[128] = "";
  cl_uint cu = 0;
  device_label(list[index].platform, list[index].device, label, sizeof label);
  clGetDeviceInfo(list[index].device, CL_DEVICE_OPENCL_C_VERSION,
                  sizeof ver - 1, ver, NULL);
  clGetDeviceInfo(list[index].device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu,
                  &cu, NULL);
  snprintf(buf, len, "%s (%s, %s, %u compute units)", label,
           device_is_gpu(list[index].device) ? "GPU" : "not a GPU", ver, cu);
  free(list);
  return RUMUS_OK;
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

/* Picks a device by the selector rules of rumus_ctx_create(). */
static int select_device(const char *sel, device_entry *out) {
  device_entry *list;
  int n;
  RUMUS__FORWARD(list_devices(&list, &n));
  if (n == 0) {
    free(list);
    return create_fail(RUMUS_ENODEVICE,
                       "no OpenCL platform or device was found (is an ICD "
                       "such as pocl-opencl-icd installed?)");
  }
  int pick = -1;
  if (sel != NULL && sel[0] != '\0') {
    char *end;
    long idx = strtol(sel, &end, 10);
    if (*end == '\0') {
      if (idx >= 0 && idx < n) pick = (int)idx;
    } else {
      for (int i = 0; i < n && pick < 0; i++) {
        char label[512];
        device_label(list[i].platform, list[i].device, label, sizeof label);
        if (ci_contains(label, sel)) pick = i;
      }
    }
    if (pick < 0) {
      free(list);
      return create_fail(RUMUS_ENODEVICE,
                         "no OpenCL device matches \"%s\" (%d devices)", sel,
                         n);
    }
  } else {
    for (int i = 0; i < n && pick < 0; i++)
      if (device_is_gpu(list[i].device)) pick = i;
    if (pick < 0) pick = 0;
  }
  *out = list[pick];
  free(list);
  return RUMUS_OK;
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

/* Fills the device facts and the status buffer of a context whose device,
 * context and queue are set. */
static int ctx_init_common(rumus_ctx *ctx) {
  cl_device_id d = ctx->device;
  int ver = opencl_c_version(d);
  if (ver < 11)
    return create_fail(RUMUS_EUNSUPPORTED,
                       "the device's OpenCL C version is older than 1.1");
  /* -cl-std follows the device's OpenCL C version, not the platform's
   * (PoCL reports platform 3.0 with OpenCL C 1.2). */
  snprintf(ctx->cl_std, sizeof ctx->cl_std, "-cl-std=CL%d.%d", ver / 10,
           ver % 10);
  clGetDeviceInfo(d, CL_DEVICE_PLATFORM, sizeof ctx->platform, &ctx->platform,
                  NULL);
  device_label(ctx->platform, d, ctx->name, sizeof ctx->name);
  ctx->is_gpu = device_is_gpu(d);
  clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof ctx->compute_units,
                  &ctx->compute_units, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof ctx->max_wg,
                  &ctx->max_wg, NULL);
  clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ctx->local_mem,
                  &ctx->local_mem, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ctx->max_alloc,
                  &ctx->max_alloc, NULL);
  cl_command_queue_properties props = 0;
  clGetCommandQueueInfo(ctx->queue, CL_QUEUE_PROPERTIES, sizeof props, &props,
                        NULL);
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return create_fail(RUMUS_EINVAL, "the queue must be in-order");
  ctx->profiling = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
  ctx->opt_variant = variant_from_env();
  ctx->opt_wg = wg_from_env(ctx);
  if (pthread_mutex_init(&ctx->lock, NULL) != 0)
    return create_fail(RUMUS_ENOMEM, "pthread_mutex_init failed");
  if (pthread_mutex_init(&ctx->scratch_lock, NULL) != 0) {
    pthread_mutex_destroy(&ctx->lock);
    return create_fail(RUMUS_ENOMEM, "pthread_mutex_init failed");
  }
  ctx->locks_ready = 1;
  cl_int e;
  const size_t words = RUMUS__STATUS_WORDS + RUMUS__TICKETS;
  ctx->status = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                               words * sizeof(cl_int), NULL, &e);
  if (e != CL_SUCCESS)
    return create_fail(RUMUS_ECL, "clCreateBuffer (status word): %s (%d)",
                       rumus__cl_error_name(e), (int)e);
  cl_int *zero = calloc(words, sizeof *zero);
  if (zero == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
  e = clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0,
                           words * sizeof *zero, zero, 0, NULL, NULL);
  free(zero);
  if (e != CL_SUCCESS)
    return create_fail(RUMUS_ECL, "clEnqueueWriteBuffer (status word): %s (%d)",
                       rumus__cl_error_name(e), (int)e);
  return RUMUS_OK;
}

static void ctx_destroy(rumus_ctx *ctx) {
  if (ctx->locks_ready) {
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->scratch_lock);
  }
  if (ctx->status) clReleaseMemObject(ctx->status);
  if (ctx->queue) clReleaseCommandQueue(ctx->queue);
  if (ctx->context) clReleaseContext(ctx->context);
  if (ctx->adopted && ctx->device) clReleaseDevice(ctx->device);
  free(ctx->errmsg);
  free(ctx);
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
  rumus_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
  ctx->device = pick.device;
  cl_int e;
  cl_context_properties cprops[] = {CL_CONTEXT_PLATFORM,
                                    (cl_context_properties)pick.platform, 0};
  ctx->context = clCreateContext(cprops, 1, &pick.device, NULL, NULL, &e);
  if (e != CL_SUCCESS) {
    ctx_destroy(ctx);
    return create_fail(RUMUS_ECL, "clCreateContext: %s (%d)",
                       rumus__cl_error_name(e), (int)e);
  }
  cl_command_queue_properties qp =
      (flags & RUMUS_CTX_PROFILING) ? CL_QUEUE_PROFILING_ENABLE : 0;
  /* clCreateCommandQueue is deprecated in 2.0 but is the 1.2 entry point. */
  ctx->queue = clCreateCommandQueue(ctx->context, pick.device, qp, &e);
  if (e != CL_SUCCESS) {
    ctx_destroy(ctx);
    return create_fail(RUMUS_ECL, "clCreateCommandQueue: %s (%d)",
                       rumus__cl_error_name(e), (int)e);
  }
  int st = ctx_init_common(ctx);
  if (st != RUMUS_OK) {
    ctx_destroy(ctx);
    return st;
  }
  *out = ctx;
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
  cl_context qctx = NULL;
  cl_device_id qdev = NULL;
  cl_int e = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx,
                                   NULL);
  if (e == CL_SUCCESS)
    e = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
  if (e != CL_SUCCESS)
    return create_fail(RUMUS_ECL, "adopt: clGetCommandQueueInfo: %s (%d)",
                       rumus__cl_error_name(e), (int)e);
  if (qctx != context || qdev != device)
    return create_fail(RUMUS_EINVAL,
                       "adopt: the queue belongs to another context or device");
  rumus_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) return create_fail(RUMUS_ENOMEM, "out of host memory");
  clRetainContext(context);
  clRetainDevice(device);
  clRetainCommandQueue(queue);
  ctx->adopted = 1;
  ctx->context = context;
  ctx->device = device;
  ctx->queue = queue;
  int st = ctx_init_common(ctx);
  if (st != RUMUS_OK) {
    ctx_destroy(ctx);
    return st;
  }
  *out = ctx;
  return RUMUS_OK;
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
  }
  return "unknown op";
}

int rumus_ctx_sync(rumus_ctx *ctx) {
  if (ctx == NULL) return RUMUS_ENULL;
  cl_int e = clFinish(ctx->queue);
  if (e != CL_SUCCESS) return rumus__fail_cl(ctx, e, "rumus_ctx_sync: clFinish");
  cl_int word[RUMUS__STATUS_WORDS];
  e = clEnqueueReadBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof word,
                          word, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_ctx_sync: reading the status word");
  if (word[0] == RUMUS__DEVERR_NONE) return RUMUS_OK;
  cl_int zero[RUMUS__STATUS_WORDS] = {0};
  e = clEnqueueWriteBuffer(ctx->queue, ctx->status, CL_TRUE, 0, sizeof zero,
                           zero, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_ctx_sync: clearing the status word");
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
RUMUS__HIDDEN void rumus__record_event(rumus_ctx *ctx, cl_event ev);
void rumus__record_event(rumus_ctx *ctx, cl_event ev) {
  rumus__event_node *n = malloc(sizeof *n);
  if (n == NULL) {
    clReleaseEvent(ev); /* Profiling loses one sample; the op still ran. */
    return;
  }
  n->event = ev;
  n->next = ctx->events;
  ctx->events = n;
}

/* rumus_ctx_kernel_time and _span; `who` names the caller in messages. */
static int kernel_times(rumus_ctx *ctx, const char *who, uint64_t *busy_ns,
                        uint64_t *span_ns) {
  uint64_t total = 0, first = UINT64_MAX, last = 0;
  if (busy_ns) *busy_ns = 0;
  if (span_ns) *span_ns = 0;
  if (!ctx->profiling)
    return rumus__fail(ctx, RUMUS_EUNSUPPORTED,
                       "%s: the queue was not created with profiling", who);
  cl_int e = clFinish(ctx->queue);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "%s: clFinish", who);
  pthread_mutex_lock(&ctx->lock);
  int st = RUMUS_OK;
  for (rumus__event_node *n = ctx->events; n; n = n->next) {
    cl_ulong t0 = 0, t1 = 0;
    e = clGetEventProfilingInfo(n->event, CL_PROFILING_COMMAND_START,
                                sizeof t0, &t0, NULL);
    if (e == CL_SUCCESS)
      e = clGetEventProfilingInfo(n->event, CL_PROFILING_COMMAND_END,
                                  sizeof t1, &t1, NULL);
    if (e != CL_SUCCESS) {
      st = rumus__fail_cl(ctx, e, "%s: profiling info", who);
      break;
    }
    total += t1 - t0;
    if (t0 < first) first = t0;
    if (t1 > last) last = t1;
  }
  events_release(ctx);
  pthread_mutex_unlock(&ctx->lock);
  if (busy_ns) *busy_ns = total;
  if (span_ns && last > first) *span_ns = last - first;
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
