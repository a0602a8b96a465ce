/*
 * error.c - status codes (generated from RUMUS_ERRNO_MAP), per-context
 * failure messages and OpenCL error names.
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

/* Replaces the context's message with the formatted text. */
static void set_msg(rumus_ctx *ctx, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  size_t need = (size_t)n + 1;
  if (need > ctx->errmsg_cap) {
    char *p = realloc(ctx->errmsg, need);
    if (p == NULL) { /* Keep what fits in the old buffer. */
      if (ctx->errmsg_cap) vsnprintf(ctx->errmsg, ctx->errmsg_cap, fmt, ap);
      return;
    }
    ctx->errmsg = p;
    ctx->errmsg_cap = need;
  }
  vsnprintf(ctx->errmsg, ctx->errmsg_cap, fmt, ap);
}

int rumus__fail(rumus_ctx *ctx, int code, const char *fmt, ...) {
  if (ctx == NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  set_msg(ctx, fmt, ap);
  va_end(ap);
  ctx->err = code;
  ctx->cl_err = CL_SUCCESS;
  return code;
}

int rumus__fail_cl(rumus_ctx *ctx, cl_int clerr, const char *fmt, ...) {
  int code = RUMUS_ECL;
  if (clerr == CL_MEM_OBJECT_ALLOCATION_FAILURE || clerr == CL_OUT_OF_RESOURCES)
    code = RUMUS_EDEVMEM;
  else if (clerr == CL_OUT_OF_HOST_MEMORY)
    code = RUMUS_ENOMEM;
  if (ctx == NULL) return code;
  va_list ap;
  va_start(ap, fmt);
  set_msg(ctx, fmt, ap);
  va_end(ap);
  char tail[96];
  snprintf(tail, sizeof tail, ": %s (%d)", rumus__cl_error_name(clerr),
           (int)clerr);
  rumus__append_msg(ctx, tail);
  ctx->err = code;
  ctx->cl_err = clerr;
  return code;
}

void rumus__append_msg(rumus_ctx *ctx, const char *text) {
  if (ctx == NULL || text == NULL) return;
  size_t have = ctx->errmsg ? strlen(ctx->errmsg) : 0;
  size_t need = have + strlen(text) + 1;
  if (need > ctx->errmsg_cap) {
    char *p = realloc(ctx->errmsg, need);
    if (p == NULL) return;
    if (have == 0) p[0] = '\0';
    ctx->errmsg = p;
    ctx->errmsg_cap = need;
  }
  memcpy(ctx->errmsg + have, text, strlen(text) + 1);
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
  return ctx->errmsg ? ctx->errmsg : "";
}

int rumus_ctx_errcode(const rumus_ctx *ctx) { return ctx ? ctx->err : RUMUS_ENULL; }

cl_int rumus_ctx_last_cl_error(const rumus_ctx *ctx) {
  return ctx ? ctx->cl_err : CL_SUCCESS;
}

unsigned rumus_version_number(void) { return RUMUS_VERSION_NUMBER; }

const char *rumus_version_string(void) {
#define RUMUS__STR2(x) #x
#define RUMUS__STR(x) RUMUS__STR2(x)
  return RUMUS__STR(RUMUS_VERSION_MAJOR) "." RUMUS__STR(
      RUMUS_VERSION_MINOR) "." RUMUS__STR(RUMUS_VERSION_PATCH);
}
