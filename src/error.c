/*
 * error.c - status codes (generated from RUMUS_ERRNO_MAP), the per-thread
 * record of the last failure and OpenCL error names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *rumus_strerror(int status) {
  switch (status) {
#define RUMUS__ERRNO_MSG(name, value, msg) \
  case (value):                            \
    return msg;
    RUMUS_ERRNO_MAP(RUMUS__ERRNO_MSG)
#undef RUMUS__ERRNO_MSG
  }
  return "unknown status";
}

const char *rumus_err_name(int status) {
  switch (status) {
#define RUMUS__ERRNO_NAME(name, value, msg) \
  case (value):                             \
    return "RUMUS_" #name;
    RUMUS_ERRNO_MAP(RUMUS__ERRNO_NAME)
#undef RUMUS__ERRNO_NAME
  }
  return "RUMUS_UNKNOWN";
}

const char *rumus__cl_error_name(cl_int err) {
  switch (err) {
#define E(x) \
  case x:    \
    return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE)
    E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP)
    E(CL_IMAGE_FORMAT_MISMATCH) E(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE)
    E(CL_LINK_PROGRAM_FAILURE) E(CL_DEVICE_PARTITION_FAILED)
    E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES)
    E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
    E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    E(CL_INVALID_IMAGE_SIZE) E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY)
    E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM)
    E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL)
    E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION)
    E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE)
    E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT_WAIT_LIST)
    E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT)
    E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_MIP_LEVEL)
    E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS)
    E(CL_INVALID_LINKER_OPTIONS) E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
  }
  return "CL_UNKNOWN_ERROR";
}

/* ---- The calling thread's last failure --------------------------------
 *
 * Failures are recorded per thread, as errno is: the status, the cl_int and
 * the message of the calling thread's last failure, with the serial number
 * of the context it happened on.  Threads sharing a context never write the
 * same memory, and a message stays valid until its own thread fails again.
 * The message buffer grows as needed (build logs run to kilobytes); a
 * pthread key's destructor frees it when the thread exits.  When it cannot
 * grow, the message is cut to what fits, and without any buffer it goes to
 * a small fixed one, so a failure is never lost for want of memory. */

typedef struct {
  uint64_t serial; /* the context's rumus_ctx.serial; 0: no failure yet */
  int code;
  cl_int cl_err;
  char *msg;       /* malloc'ed, cap bytes; NULL until the first failure */
  size_t cap;
  char small[160]; /* the message when msg cannot be allocated */
} last_failure;

static _Thread_local last_failure last;
static pthread_key_t last_key;
static pthread_once_t last_key_once = PTHREAD_ONCE_INIT;
static int last_key_ok;

/* Runs at thread exit with the buffer registered below.  Another key's
 * destructor may still record a failure afterwards: msg is cleared so that
 * it starts a new buffer (registered again, so freed on the next round). */
static void last_free(void *buf) {
  free(buf);
  if (last.msg == buf) {
    last.msg = NULL;
    last.cap = 0;
    last.small[0] = '\0';
  }
}

static void last_key_init(void) {
  last_key_ok = pthread_key_create(&last_key, last_free) == 0;
}

/* A library unloaded with dlclose() must not leave its destructor behind
 * for threads that exit later (they would call into unmapped code); their
 * buffers are then not freed. */
__attribute__((destructor)) static void last_key_delete(void) {
  if (last_key_ok) pthread_key_delete(last_key);
  last_key_ok = 0;
}

/* The buffer to write a message of `need` bytes (NUL included) into, and its
 * size: the thread's buffer, grown if possible, else whatever is left. */
static char *msg_buffer(size_t need, size_t *cap) {
  if (need > last.cap) {
    pthread_once(&last_key_once, last_key_init);
    char *p = last_key_ok ? realloc(last.msg, need) : NULL;
    if (p != NULL) {
      last.msg = p;
      last.cap = need;
      pthread_setspecific(last_key, p);
    }
  }
  if (last.msg != NULL) {
    *cap = last.cap;
    return last.msg;
  }
  *cap = sizeof last.small;
  return last.small;
}

static const char *msg_text(void) {
  return last.msg != NULL ? last.msg : last.small;
}

/* Replaces the thread's message with the formatted text followed by
 * tail. */
static void set_msg(const char *tail, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  size_t cap;
  char *buf = msg_buffer((n > 0 ? (size_t)n : 0) + strlen(tail) + 1, &cap);
  buf[0] = '\0';
  if (n > 0) vsnprintf(buf, cap, fmt, ap);
  size_t have = strlen(buf);
  if (have + 1 < cap) snprintf(buf + have, cap - have, "%s", tail);
}

static void set_failure(const rumus_ctx *ctx, int code, cl_int clerr) {
  last.serial = ctx->serial;
  last.code = code;
  last.cl_err = clerr;
}

int rumus__status_from_cl(cl_int clerr) {
  switch (clerr) {
    case CL_SUCCESS:
      return RUMUS_OK;
    case CL_OUT_OF_HOST_MEMORY:
      return RUMUS_ENOMEM;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
      return RUMUS_EDEVMEM;
  }
  return RUMUS_ECL;
}

int rumus__fail(rumus_ctx *ctx, int code, const char *fmt, ...) {
  if (ctx == NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  set_msg("", fmt, ap);
  va_end(ap);
  set_failure(ctx, code, CL_SUCCESS);
  return code;
}

/* The message, then ": CL_NAME (value)". */
static void set_msg_cl(cl_int clerr, const char *fmt, va_list ap) {
  char tail[96];
  snprintf(tail, sizeof tail, ": %s (%d)", rumus__cl_error_name(clerr),
           (int)clerr);
  set_msg(tail, fmt, ap);
}

int rumus__fail_cl(rumus_ctx *ctx, cl_int clerr, const char *fmt, ...) {
  int code = rumus__status_from_cl(clerr);
  if (ctx == NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  set_msg_cl(clerr, fmt, ap);
  va_end(ap);
  set_failure(ctx, code, clerr);
  return code;
}

int rumus__fail_cl_as(rumus_ctx *ctx, int code, cl_int clerr,
                      const char *fmt, ...) {
  if (ctx == NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  set_msg_cl(clerr, fmt, ap);
  va_end(ap);
  set_failure(ctx, code, clerr);
  return code;
}

void rumus__append_msg(rumus_ctx *ctx, const char *text) {
  if (ctx == NULL || text == NULL || last.serial != ctx->serial) return;
  size_t have = strlen(msg_text()), add = strlen(text), cap;
  char keep[sizeof last.small];
  int in_small = last.msg == NULL;
  if (in_small) memcpy(keep, last.small, have + 1);
  char *buf = msg_buffer(have + add + 1, &cap);
  if (in_small && buf != last.small) memcpy(buf, keep, have + 1);
  if (have + 1 >= cap) return;
  if (add > cap - have - 1) add = cap - have - 1;
  memcpy(buf + have, text, add);
  buf[have + add] = '\0';
}

const char *rumus__shape_str(const rumus_tensor *t, char *buf, size_t len) {
  size_t used = 0;
  if (len == 0) return buf;
  buf[0] = '\0';
  if (t == NULL) {
    snprintf(buf, len, "NULL");
    return buf;
  }
  used += (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < t->ndim && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, i ? ", %zu" : "%zu",
                             t->shape[i]);
  if (used < len) snprintf(buf + used, len - used, "]");
  return buf;
}

const char *rumus_ctx_errmsg(const rumus_ctx *ctx) {
  if (ctx == NULL) return "NULL context";
  return last.serial == ctx->serial ? msg_text() : "";
}

int rumus_ctx_errcode(const rumus_ctx *ctx) {
  if (ctx == NULL) return RUMUS_ENULL;
  return last.serial == ctx->serial ? last.code : RUMUS_OK;
}

cl_int rumus_ctx_last_cl_error(const rumus_ctx *ctx) {
  return ctx != NULL && last.serial == ctx->serial ? last.cl_err : CL_SUCCESS;
}

unsigned rumus_version_number(void) { return RUMUS_VERSION_NUMBER; }

const char *rumus_version_string(void) { return RUMUS_VERSION_STRING; }
