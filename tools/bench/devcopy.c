/*
 * devcopy.c - the device's copy bandwidth, measured with the bench's own
 * OpenCL kernel on the rumus context's queue: dst = src over two buffers
 * of `bytes` each, float4 loads and stores, one float4 per work-item
 * (local size 256), and a second form where a fixed grid of work-items
 * strides over the buffer.  The faster form's median over `reps` runs, in
 * 1e9 bytes per second counting the read and the write, is the limit that
 * memory-bound ops are compared with.  Also times one work-group of an
 * empty kernel: the floor of any op's device time on this driver.
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

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median device time in ns of `reps` launches, or a negative cl error. */
static double time_kernel(cl_command_queue q, cl_kernel k, size_t global,
                          size_t local, int reps) {
  double *t = malloc(sizeof *t * (size_t)reps);
  if (t == NULL) return -1;
  cl_int e = CL_SUCCESS;
  for (int r = -2; r < reps && e == CL_SUCCESS; r++) { /* 2 warm-ups */
    cl_event ev;
    e = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, &ev);
    if (e != CL_SUCCESS) break;
    e = clWaitForEvents(1, &ev);
    cl_ulong t0 = 0, t1 = 0;
    if (e == CL_SUCCESS)
      e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (e == CL_SUCCESS)
      e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    clReleaseEvent(ev);
    if (r >= 0) t[r] = (double)(t1 - t0);
  }
  double med = (double)e;
  if (e == CL_SUCCESS) {
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    med = t[reps / 2];
  }
  free(t);
  return med;
}

double bench_device_copy(rumus_ctx *ctx, size_t bytes, int reps, int all,
                         double forms[2], double *empty_us, char *err,
                         size_t errlen) {
  cl_context cx = rumus_ctx_cl_context(ctx);
  cl_device_id dev = rumus_ctx_cl_device(ctx);
  cl_command_queue q = rumus_ctx_cl_queue(ctx);
  cl_int e;
  double best = -1;
  forms[0] = forms[1] = -1;
  *empty_us = -1;
  cl_mem src = NULL, dst = NULL;
  cl_kernel k[3] = {NULL, NULL, NULL};
  const char *text = SOURCE;
  cl_program prog = clCreateProgramWithSource(cx, 1, &text, NULL, &e);
  if (e == CL_SUCCESS) e = clBuildProgram(prog, 1, &dev, "", NULL, NULL);
  if (e != CL_SUCCESS) {
    snprintf(err, errlen, "copy kernel build failed (%d)", (int)e);
    goto done;
  }
  bytes &= ~(size_t)15;
  src = clCreateBuffer(cx, CL_MEM_READ_ONLY, bytes, NULL, &e);
  if (e == CL_SUCCESS) dst = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, bytes, NULL, &e);
  if (e != CL_SUCCESS) {
    snprintf(err, errlen, "copy buffers of %zu bytes: error %d", bytes, (int)e);
    goto done;
  }
  const float zero = 0.0f;
  e = clEnqueueFillBuffer(q, src, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clEnqueueFillBuffer(q, dst, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clFinish(q);
  cl_ulong n4 = bytes / 16;
  cl_uint cu = 1;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
  size_t maxwg = 256;
  clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg, &maxwg, NULL);
  const size_t local = maxwg < 256 ? maxwg : 256;
  const char *names[2] = {"bench_copy4", "bench_copy4_grid"};
  for (int i = 0; i < (all ? 2 : 1) && e == CL_SUCCESS; i++) {
    k[i] = clCreateKernel(prog, names[i], &e);
    if (e != CL_SUCCESS) break;
    e = clSetKernelArg(k[i], 0, sizeof src, &src);
    if (e == CL_SUCCESS) e = clSetKernelArg(k[i], 1, sizeof dst, &dst);
    if (e == CL_SUCCESS) e = clSetKernelArg(k[i], 2, sizeof n4, &n4);
    if (e != CL_SUCCESS) break;
    size_t global = i == 0 ? (size_t)((n4 + local - 1) / local * local)
                           : (size_t)cu * 16 * local;
    double ns = time_kernel(q, k[i], global, local, reps);
    if (ns < 0) {
      e = (cl_int)ns;
      break;
    }
    double gbs = 2.0 * (double)bytes / ns;
    forms[i] = gbs;
    if (gbs > best) best = gbs;
  }
  if (e == CL_SUCCESS && all) {
    /* The floor: one work-group of a kernel that does nothing. */
    k[2] = clCreateKernel(prog, "bench_empty", &e);
    if (e == CL_SUCCESS) e = clSetKernelArg(k[2], 0, sizeof dst, &dst);
    if (e == CL_SUCCESS) e = clSetKernelArg(k[2], 1, sizeof n4, &n4);
    if (e == CL_SUCCESS) {
      double ns = time_kernel(q, k[2], local, local, reps);
      if (ns >= 0) *empty_us = ns / 1e3;
      else e = (cl_int)ns;
    }
  }
  if (e != CL_SUCCESS) {
    snprintf(err, errlen, "copy kernel failed (%d)", (int)e);
    best = -1;
  }
done:
  for (int i = 0; i < 3; i++)
    if (k[i]) clReleaseKernel(k[i]);
  if (src) clReleaseMemObject(src);
  if (dst) clReleaseMemObject(dst);
  if (prog) clReleaseProgram(prog);
  return best;
}
