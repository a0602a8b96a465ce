/*
 * devcopy.c - the device's copy bandwidth, measured with the bench's own
 * OpenCL kernel on the rumus context's queue: dst = src over two buffers
 * of `bytes` each, float4 loads and stores, one float4 per work-item
 * (local size 256), and a second form where a fixed grid of work-items
 * strides over the buffer.  The faster form's median over `reps` runs, in
 * 1e9 bytes per second counting the read and the write, is the limit that
 * memory-bound ops are compared with.  Also times one work-group of an
 * empty kernel: the floor of any op's device time on this driver.  The
 * bench_copy object keeps the program and buffers for single timed copies
 * (paired with an op's runs on a CPU device, see main.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static const char *const SOURCE =
    "__kernel void bench_copy4(__global const float4 *restrict src,\n"
    "                          __global float4 *restrict dst, ulong n4) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n4) dst[i] = src[i];\n"
    "}\n"
    "__kernel void bench_copy4_grid(__global const float4 *restrict src,\n"
    "                               __global float4 *restrict dst, ulong n4) {\n"
    "  size_t stride = get_global_size(0);\n"
    "  for (size_t i = get_global_id(0); i < n4; i += stride) dst[i] = src[i];\n"
    "}\n"
    "__kernel void bench_empty(__global float4 *dst, ulong n4) {\n"
    "  if (get_global_id(0) >= n4) dst[0] = (float4)(0.0f);\n"
    "}\n";

struct bench_copy {
  cl_command_queue queue;
  cl_program prog;
  cl_kernel k[3]; /* copy4, copy4_grid, empty */
  cl_mem src, dst;
  size_t bytes, local, global[3];
};

void bench_copy_free(bench_copy *b) {
  if (b == NULL) return;
  for (int i = 0; i < 3; i++)
    if (b->k[i]) clReleaseKernel(b->k[i]);
  if (b->src) clReleaseMemObject(b->src);
  if (b->dst) clReleaseMemObject(b->dst);
  if (b->prog) clReleaseProgram(b->prog);
  free(b);
}

bench_copy *bench_copy_new(rumus_ctx *ctx, size_t bytes, char *err,
                           size_t errlen) {
  bench_copy *b = calloc(1, sizeof *b);
  if (b == NULL) {
    snprintf(err, errlen, "out of host memory");
    return NULL;
  }
  cl_context cx = rumus_ctx_cl_context(ctx);
  cl_device_id dev = rumus_ctx_cl_device(ctx);
  b->queue = rumus_ctx_cl_queue(ctx);
  b->bytes = bytes & ~(size_t)15;
  cl_int e;
  const char *text = SOURCE;
  b->prog = clCreateProgramWithSource(cx, 1, &text, NULL, &e);
  if (e == CL_SUCCESS) e = clBuildProgram(b->prog, 1, &dev, "", NULL, NULL);
  if (e != CL_SUCCESS) {
    snprintf(err, errlen, "copy kernel build failed (%d)", (int)e);
    goto fail;
  }
  b->src = clCreateBuffer(cx, CL_MEM_READ_ONLY, b->bytes, NULL, &e);
  if (e == CL_SUCCESS) b->dst = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, b->bytes, NULL, &e);
  if (e != CL_SUCCESS) {
    snprintf(err, errlen, "copy buffers of %zu bytes: error %d", b->bytes, (int)e);
    goto fail;
  }
  const float zero = 0.0f;
  e = clEnqueueFillBuffer(b->queue, b->src, &zero, sizeof zero, 0, b->bytes, 0, NULL, NULL);
  if (e == CL_SUCCESS)
    e = clEnqueueFillBuffer(b->queue, b->dst, &zero, sizeof zero, 0, b->bytes, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clFinish(b->queue);
  cl_ulong n4 = b->bytes / 16;
  cl_uint cu = 1;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  size_t maxwg = 256;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg, &maxwg, NULL);
  b->local = maxwg < 256 ? maxwg : 256;
  b->global[0] = (size_t)((n4 + b->local - 1) / b->local * b->local);
  b->global[1] = (size_t)cu * 16 * b->local;
  b->global[2] = b->local;
  const char *names[3] = {"bench_copy4", "bench_copy4_grid", "bench_empty"};
  for (int i = 0; i < 3 && e == CL_SUCCESS; i++) {
    b->k[i] = clCreateKernel(b->prog, names[i], &e);
    cl_uint a = 0;
    if (e == CL_SUCCESS && i < 2) e = clSetKernelArg(b->k[i], a++, sizeof b->src, &b->src);
    if (e == CL_SUCCESS) e = clSetKernelArg(b->k[i], a++, sizeof b->dst, &b->dst);
    if (e == CL_SUCCESS) e = clSetKernelArg(b->k[i], a++, sizeof n4, &n4);
  }
  if (e != CL_SUCCESS) {
    snprintf(err, errlen, "copy kernels: error %d", (int)e);
    goto fail;
  }
  return b;
fail:
  bench_copy_free(b);
  return NULL;
}

double bench_copy_ns(bench_copy *b, int form) {
  cl_event ev;
  cl_int e = clEnqueueNDRangeKernel(b->queue, b->k[form], 1, NULL,
                                    &b->global[form], &b->local, 0, NULL, &ev);
  if (e != CL_SUCCESS) return -1;
  e = clWaitForEvents(1, &ev);
  cl_ulong t0 = 0, t1 = 0;
  if (e == CL_SUCCESS)
    e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
  if (e == CL_SUCCESS)
    e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
  clReleaseEvent(ev);
  return e == CL_SUCCESS ? (double)(t1 - t0) : -1;
}

double bench_copy_gbs(bench_copy *b, double ns) { return 2.0 * (double)b->bytes / ns; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median device time of `reps` launches after two warm-ups, or < 0. */
static double median_ns(bench_copy *b, int form, int reps) {
  double *t = malloc(sizeof *t * (size_t)reps);
  if (t == NULL) return -1;
  double med = 0;
  for (int r = -2; r < reps && med >= 0; r++) {
    double ns = bench_copy_ns(b, form);
    if (ns < 0) med = -1;
    else if (r >= 0) t[r] = ns;
  }
  if (med >= 0) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    med = t[reps / 2];
  }
  free(t);
  return med;
}

double bench_device_copy(rumus_ctx *ctx, size_t bytes, int reps,
                         double forms[2], double *empty_us, char *err,
                         size_t errlen) {
  forms[0] = forms[1] = -1;
  *empty_us = -1;
  bench_copy *b = bench_copy_new(ctx, bytes, err, errlen);
  if (b == NULL) return -1;
  double best = -1;
  for (int i = 0; i < 2; i++) {
    double ns = median_ns(b, i, reps);
    if (ns < 0) {
      snprintf(err, errlen, "copy kernel failed");
      best = -1;
      break;
    }
    forms[i] = bench_copy_gbs(b, ns);
    if (forms[i] > best) best = forms[i];
  }
  if (best > 0) {
    double ns = median_ns(b, 2, reps);
    if (ns >= 0) *empty_us = ns / 1e3;
  }
  bench_copy_free(b);
  return best;
}
