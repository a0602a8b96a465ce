/*
 * tensor.c - tensor handles: owned or borrowed device buffers with a storage
 * type and a shape, host transfers, fill and copy.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

size_t rumus_dtype_size(rumus_dtype dtype) {
  switch (dtype) {
    case RUMUS_F32:
    case RUMUS_I32:
      return 4;
    case RUMUS_F16:
    case RUMUS_BF16:
      return 2;
    case RUMUS_I8:
      return 1;
  }
  return 0;
}

/* Validates ndim/shape and computes the element count, with overflow
 * checks on the element and byte counts. */
static int shape_numel(rumus_ctx *ctx, const char *op, rumus_dtype dtype,
                       int ndim, const size_t *shape, size_t *numel) {
  RUMUS__FAIL_IF(ndim < 0 || ndim > RUMUS_MAX_DIMS, ctx, RUMUS_EINVAL,
                 "%s: ndim %d is outside [0, %d]", op, ndim, RUMUS_MAX_DIMS);
  RUMUS__FAIL_IF(ndim > 0 && shape == NULL, ctx, RUMUS_ENULL,
                 "%s: shape is NULL", op);
  size_t esz = rumus_dtype_size(dtype);
  RUMUS__FAIL_IF(esz == 0, ctx, RUMUS_EDTYPE, "%s: unknown storage type %d",
                 op, (int)dtype);
  size_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] != 0 && n > SIZE_MAX / shape[i])
      return rumus__fail(ctx, RUMUS_ESIZE, "%s: element count overflows", op);
    n *= shape[i];
  }
  RUMUS__FAIL_IF(n > SIZE_MAX / esz, ctx, RUMUS_ESIZE,
                 "%s: byte count overflows", op);
  *numel = n;
  return RUMUS_OK;
}

static int tensor_new(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                      const size_t *shape, size_t numel, rumus_tensor **out) {
  rumus_tensor *t = calloc(1, sizeof *t);
  if (t == NULL) return rumus__fail(ctx, RUMUS_ENOMEM, "out of host memory");
  t->ctx = ctx;
  t->dtype = dtype;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  t->numel = numel;
  *out = t;
  return RUMUS_OK;
}

int rumus_tensor_create(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                        const size_t *shape, rumus_tensor **out) {
  if (out) *out = NULL;
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(out == NULL, ctx, RUMUS_ENULL,
                 "rumus_tensor_create: out is NULL");
  size_t numel;
  RUMUS__FORWARD(
      shape_numel(ctx, "rumus_tensor_create", dtype, ndim, shape, &numel));
  size_t bytes = numel * rumus_dtype_size(dtype);
  RUMUS__FAIL_IF(bytes > ctx->max_alloc, ctx, RUMUS_ESIZE,
                 "rumus_tensor_create: %zu bytes exceed the device's largest "
                 "allocation (%llu bytes)",
                 bytes, (unsigned long long)ctx->max_alloc);
  rumus_tensor *t = NULL;
  RUMUS__FORWARD(tensor_new(ctx, dtype, ndim, shape, numel, &t));
  t->owns = 1;
  if (bytes) {
    cl_int e;
    t->mem = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (e != CL_SUCCESS) {
      free(t);
      return rumus__fail_cl(ctx, e, "rumus_tensor_create: clCreateBuffer of "
                                    "%zu bytes", bytes);
    }
  }
  pthread_mutex_lock(&ctx->lock);
  ctx->live_tensors++;
  pthread_mutex_unlock(&ctx->lock);
  *out = t;
  return RUMUS_OK;
}

/* The host pointer's alignment of a CL_MEM_USE_HOST_PTR buffer (which a
 * CPU driver may use in place), 0 for any other buffer: see
 * rumus_tensor.host_align. */
static int host_ptr_align(rumus_ctx *ctx, cl_mem buf, size_t *align) {
  cl_mem_flags flags = 0;
  void *host = NULL;
  *align = 0;
  cl_int e = clGetMemObjectInfo(buf, CL_MEM_FLAGS, sizeof flags, &flags, NULL);
  if (e == CL_SUCCESS && (flags & CL_MEM_USE_HOST_PTR))
    e = clGetMemObjectInfo(buf, CL_MEM_HOST_PTR, sizeof host, &host, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_tensor_wrap: clGetMemObjectInfo");
  if (!(flags & CL_MEM_USE_HOST_PTR)) return RUMUS_OK;
  size_t a = 1;
  while (a < 4096 && (uintptr_t)host % (2 * a) == 0) a *= 2;
  *align = a;
  return RUMUS_OK;
}

int rumus_tensor_wrap(rumus_ctx *ctx, rumus_dtype dtype, int ndim,
                      const size_t *shape, cl_mem buf, size_t offset,
                      rumus_tensor **out) {
  if (out) *out = NULL;
  if (ctx == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(out == NULL || buf == NULL, ctx, RUMUS_ENULL,
                 "rumus_tensor_wrap: %s is NULL", out ? "buf" : "out");
  size_t numel;
  RUMUS__FORWARD(
      shape_numel(ctx, "rumus_tensor_wrap", dtype, ndim, shape, &numel));
  size_t esz = rumus_dtype_size(dtype), bytes = numel * esz;
  RUMUS__FAIL_IF(offset % esz, ctx, RUMUS_EINVAL,
                 "rumus_tensor_wrap: offset %zu is not a multiple of the "
                 "element size %zu",
                 offset, esz);
  size_t cap = 0;
  cl_context owner = NULL;
  cl_int e = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof cap, &cap, NULL);
  if (e == CL_SUCCESS)
    e = clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_tensor_wrap: clGetMemObjectInfo");
  RUMUS__FAIL_IF(owner != ctx->context, ctx, RUMUS_EINVAL,
                 "rumus_tensor_wrap: the buffer belongs to another context");
  RUMUS__FAIL_IF(offset > cap || bytes > cap - offset, ctx, RUMUS_ESIZE,
                 "rumus_tensor_wrap: offset %zu + %zu bytes exceed the "
                 "buffer's %zu bytes",
                 offset, bytes, cap);
  size_t host_align;
  RUMUS__FORWARD(host_ptr_align(ctx, buf, &host_align));
  rumus_tensor *t = NULL;
  RUMUS__FORWARD(tensor_new(ctx, dtype, ndim, shape, numel, &t));
  t->host_align = host_align;
  cl_int re = clRetainMemObject(buf);
  if (re != CL_SUCCESS) { /* no reference taken: none to give back */
    free(t);
    return rumus__fail_cl(ctx, re, "rumus_tensor_wrap: clRetainMemObject");
  }
  t->mem = buf;
  t->offset = offset;
  pthread_mutex_lock(&ctx->lock);
  ctx->live_tensors++;
  pthread_mutex_unlock(&ctx->lock);
  *out = t;
  return RUMUS_OK;
}

void rumus_tensor_free(rumus_tensor *t) {
  if (t == NULL) return;
  if (t->mem) clReleaseMemObject(t->mem);
  pthread_mutex_lock(&t->ctx->lock);
  t->ctx->live_tensors--;
  pthread_mutex_unlock(&t->ctx->lock);
  free(t);
}

static int check_transfer(const rumus_tensor *t, const void *p, size_t nbytes,
                          const char *op) {
  if (t == NULL) return RUMUS_ENULL;
  RUMUS__FAIL_IF(p == NULL, t->ctx, RUMUS_ENULL, "%s: host pointer is NULL",
                 op);
  RUMUS__FAIL_IF(nbytes != rumus_tensor_nbytes(t), t->ctx, RUMUS_ESIZE,
                 "%s: %zu bytes given, the tensor holds %zu", op, nbytes,
                 rumus_tensor_nbytes(t));
  return RUMUS_OK;
}

int rumus_tensor_upload(rumus_tensor *t, const void *src, size_t nbytes) {
  RUMUS__FORWARD(check_transfer(t, src, nbytes, "rumus_tensor_upload"));
  if (nbytes == 0) return RUMUS_OK;
  cl_int e = clEnqueueWriteBuffer(t->ctx->queue, t->mem, CL_TRUE, t->offset,
                                  nbytes, src, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(t->ctx, e,
                          "rumus_tensor_upload: clEnqueueWriteBuffer of %zu "
                          "bytes",
                          nbytes);
  return RUMUS_OK;
}

int rumus_tensor_download(const rumus_tensor *t, void *dst, size_t nbytes) {
  RUMUS__FORWARD(check_transfer(t, dst, nbytes, "rumus_tensor_download"));
  if (nbytes == 0) return RUMUS_OK;
  cl_int e = clEnqueueReadBuffer(t->ctx->queue, t->mem, CL_TRUE, t->offset,
                                 nbytes, dst, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(t->ctx, e,
                          "rumus_tensor_download: clEnqueueReadBuffer of %zu "
                          "bytes",
                          nbytes);
  return RUMUS_OK;
}

/* The int32 an I32 fill writes: value truncated toward zero, as a C cast
 * would, but saturated outside the int32 range, where the cast is
 * undefined; NaN has no integer value. */
static int fill_i32_value(rumus_tensor *t, float value, cl_int *v) {
  RUMUS__FAIL_IF(isnan(value), t->ctx, RUMUS_EINVAL,
                 "rumus_tensor_fill: NaN cannot fill an int32 tensor");
  if (value >= 2147483648.0f) /* 2^31 */
    *v = INT32_MAX;
  else if (value <= -2147483648.0f)
    *v = INT32_MIN;
  else
    *v = (cl_int)value;
  return RUMUS_OK;
}

/* The int8 of an I8 fill: value truncated toward zero, then saturated
 * to [-128, 127]; NaN has no integer value. */
static int fill_i8_value(rumus_tensor *t, float value, cl_char *v) {
  RUMUS__FAIL_IF(isnan(value), t->ctx, RUMUS_EINVAL,
                 "rumus_tensor_fill: NaN cannot fill an int8 tensor");
  if (value >= 127.0f)
    *v = 127;
  else if (value <= -128.0f)
    *v = -128;
  else
    *v = (cl_char)value;
  return RUMUS_OK;
}

int rumus_tensor_fill(rumus_tensor *t, float value) {
  if (t == NULL) return RUMUS_ENULL;
  cl_int iv = 0;
  cl_char cv = 0;
  uint16_t bits = 0;
  const void *pattern = &value;
  if (t->dtype == RUMUS_I32) {
    RUMUS__FORWARD(fill_i32_value(t, value, &iv));
    pattern = &iv;
  } else if (t->dtype == RUMUS_I8) {
    RUMUS__FORWARD(fill_i8_value(t, value, &cv));
    pattern = &cv;
  } else if (t->dtype == RUMUS_F16 || t->dtype == RUMUS_BF16) {
    bits = t->dtype == RUMUS_F16 ? rumus_f32_to_f16(value)
                                 : rumus_f32_to_bf16(value);
    pattern = &bits;
  } else if (t->dtype != RUMUS_F32) {
    return rumus__fail(t->ctx, RUMUS_EDTYPE,
                       "rumus_tensor_fill: storage type %d is not supported",
                       (int)t->dtype);
  }
  size_t nbytes = rumus_tensor_nbytes(t);
  if (nbytes == 0) return RUMUS_OK;
  cl_int e = clEnqueueFillBuffer(t->ctx->queue, t->mem, pattern,
                                 rumus_dtype_size(t->dtype), t->offset,
                                 nbytes, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(t->ctx, e, "rumus_tensor_fill: clEnqueueFillBuffer");
  return RUMUS_OK;
}

int rumus_tensor_copy(rumus_tensor *dst, const rumus_tensor *src) {
  if (dst == NULL) return RUMUS_ENULL;
  rumus_ctx *ctx = dst->ctx;
  RUMUS__FAIL_IF(src == NULL, ctx, RUMUS_ENULL, "rumus_tensor_copy: src is NULL");
  RUMUS__FAIL_IF(src->ctx != ctx, ctx, RUMUS_EINVAL,
                 "rumus_tensor_copy: the tensors belong to different contexts");
  RUMUS__FAIL_IF(src->dtype != dst->dtype, ctx, RUMUS_EDTYPE,
                 "rumus_tensor_copy: storage types differ");
  RUMUS__FAIL_IF(src->numel != dst->numel, ctx, RUMUS_ESHAPE,
                 "rumus_tensor_copy: %zu elements into %zu", src->numel,
                 dst->numel);
  size_t nbytes = rumus_tensor_nbytes(src);
  if (nbytes == 0 || (src->mem == dst->mem && src->offset == dst->offset))
    return RUMUS_OK;
  cl_int e = clEnqueueCopyBuffer(ctx->queue, src->mem, dst->mem, src->offset,
                                 dst->offset, nbytes, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return rumus__fail_cl(ctx, e, "rumus_tensor_copy: clEnqueueCopyBuffer");
  return RUMUS_OK;
}

int rumus_tensor_reshape(rumus_tensor *t, int ndim, const size_t *shape) {
  if (t == NULL) return RUMUS_ENULL;
  size_t numel;
  RUMUS__FORWARD(shape_numel(t->ctx, "rumus_tensor_reshape", t->dtype, ndim,
                             shape, &numel));
  RUMUS__FAIL_IF(numel != t->numel, t->ctx, RUMUS_ESHAPE,
                 "rumus_tensor_reshape: %zu elements cannot take a shape of "
                 "%zu",
                 t->numel, numel);
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  return RUMUS_OK;
}

rumus_dtype rumus_tensor_dtype(const rumus_tensor *t) {
  return t ? t->dtype : (rumus_dtype)0;
}
int rumus_tensor_ndim(const rumus_tensor *t) { return t ? t->ndim : 0; }
size_t rumus_tensor_dim(const rumus_tensor *t, int i) {
  if (t == NULL) return 0;
  if (i < 0) i += t->ndim;
  return (i >= 0 && i < t->ndim) ? t->shape[i] : 0;
}
size_t rumus_tensor_numel(const rumus_tensor *t) { return t ? t->numel : 0; }
size_t rumus_tensor_nbytes(const rumus_tensor *t) {
  return t ? t->numel * rumus_dtype_size(t->dtype) : 0;
}
cl_mem rumus_tensor_cl_mem(const rumus_tensor *t, size_t *offset) {
  if (offset) *offset = t ? t->offset : 0;
  return t ? t->mem : NULL;
}

/* ---- Checks shared by the ops ----------------------------------------- */

const char *rumus_dtype_name(rumus_dtype d) {
  switch (d) {
    case RUMUS_F32: return "f32";
    case RUMUS_F16: return "f16";
    case RUMUS_BF16: return "bf16";
    case RUMUS_I32: return "i32";
    case RUMUS_I8: return "i8";
  }
  return "unknown";
}

int rumus__check_tensor(rumus_ctx *ctx, const char *op, const char *arg,
                        const rumus_tensor *t, rumus_dtype dtype) {
  RUMUS__FAIL_IF(t == NULL, ctx, RUMUS_ENULL, "%s: %s is NULL", op, arg);
  RUMUS__FAIL_IF(t->ctx != ctx, ctx, RUMUS_EINVAL,
                 "%s: %s belongs to another context", op, arg);
  RUMUS__FAIL_IF(t->dtype != dtype, ctx, RUMUS_EDTYPE,
                 "%s: %s is %s, expected %s", op, arg,
                 rumus_dtype_name(t->dtype), rumus_dtype_name(dtype));
  return RUMUS_OK;
}

int rumus__check_same_shape(rumus_ctx *ctx, const char *op, const char *an,
                            const rumus_tensor *a, const char *bn,
                            const rumus_tensor *b) {
  int same = a->ndim == b->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
  if (same) return RUMUS_OK;
  char sa[RUMUS__SHAPE_BUF], sb[RUMUS__SHAPE_BUF];
  return rumus__fail(ctx, RUMUS_ESHAPE, "%s: %s %s and %s %s differ in shape",
                     op, an, rumus__shape_str(a, sa, sizeof sa), bn,
                     rumus__shape_str(b, sb, sizeof sb));
}

void rumus__rows_cols(const rumus_tensor *t, size_t *rows, size_t *cols) {
  *cols = t->ndim ? t->shape[t->ndim - 1] : 1;
  *rows = *cols ? t->numel / *cols : 0;
  if (*cols == 0) { /* rows = product of the leading extents */
    size_t r = 1;
    for (int i = 0; i + 1 < t->ndim; i++) r *= t->shape[i];
    *rows = r;
  }
}

int rumus__check_overlap(rumus_ctx *ctx, const char *op, const char *an,
                         const rumus_tensor *a, const char *bn,
                         const rumus_tensor *b, int may_alias) {
  if (a == NULL || b == NULL || a->mem == NULL || a->mem != b->mem)
    return RUMUS_OK;
  const size_t a0 = a->offset, a1 = a0 + rumus_tensor_nbytes(a);
  const size_t b0 = b->offset, b1 = b0 + rumus_tensor_nbytes(b);
  if (a1 <= b0 || b1 <= a0) return RUMUS_OK;
  if (may_alias && a0 == b0 && a1 == b1) return RUMUS_OK;
  return rumus__fail(ctx, RUMUS_EINVAL,
                     "%s: %s (bytes %zu to %zu) and %s (bytes %zu to %zu) "
                     "overlap in one buffer%s",
                     op, an, a0, a1, bn, b0, b1,
                     may_alias ? "; in-place use needs the same bytes"
                               : "; they must not share memory");
}

int rumus__check_float_tensor(rumus_ctx *ctx, const char *op, const char *arg,
                              const rumus_tensor *t) {
  RUMUS__FAIL_IF(t == NULL, ctx, RUMUS_ENULL, "%s: %s is NULL", op, arg);
  RUMUS__FAIL_IF(t->ctx != ctx, ctx, RUMUS_EINVAL,
                 "%s: %s belongs to another context", op, arg);
  RUMUS__FAIL_IF(t->dtype != RUMUS_F32 && t->dtype != RUMUS_F16 &&
                     t->dtype != RUMUS_BF16,
                 ctx, RUMUS_EDTYPE, "%s: %s is %s, expected f32, f16 or bf16",
                 op, arg, rumus_dtype_name(t->dtype));
  return RUMUS_OK;
}

int rumus__check_overlaps(rumus_ctx *ctx, const char *op,
                          const char *const *names,
                          const rumus_tensor *const *ts, int n, int nout,
                          int alias) {
  for (int i = 0; i < nout; i++)
    for (int j = i + 1; j < n; j++)
      RUMUS__FORWARD(rumus__check_overlap(ctx, op, names[i], ts[i], names[j],
                                          ts[j], i == 0 && j == alias));
  return RUMUS_OK;
}
