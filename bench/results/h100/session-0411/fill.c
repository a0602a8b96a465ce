/* write-only vs copy bandwidth probe */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static const char *src =
"__kernel void fill4(__global float4 *y, float v){ y[get_global_id(0)] = (float4)(v); }\n"
"__kernel void fill16(__global float4 *y, float v){ size_t g = get_global_id(0), n = get_global_size(0);\n"
"  for (int k = 0; k < 4; k++) y[g + k * n] = (float4)(v); }\n"
"__kernel void copy4(__global const float4 *x, __global float4 *y){ size_t g = get_global_id(0); y[g] = x[g]; }\n"
"__kernel void read4(__global const float4 *x, __global float *y){ size_t g = get_global_id(0); float4 v = x[g]; if (v.x == 12345.f) y[0] = v.y; }\n";
static double run(cl_command_queue q, cl_kernel k, size_t g, size_t l) {
  double best = 1e30;
  for (int r = 0; r < 12; r++) {
    cl_event e;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &e);
    clWaitForEvents(1, &e);
    cl_ulong a, b;
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, 8, &a, NULL);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, 8, &b, NULL);
    clReleaseEvent(e);
    if (r >= 2 && (b - a) * 1e-9 < best) best = (b - a) * 1e-9;
  }
  return best;
}
int main(void) {
  cl_platform_id ps[4]; cl_uint np; clGetPlatformIDs(4, ps, &np);
  cl_device_id d = NULL;
  for (cl_uint i = 0; i < np && !d; i++) clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_GPU, 1, &d, NULL);
  if (!d) { printf("no gpu\n"); return 1; }
  cl_int err; cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(c, d, CL_QUEUE_PROFILING_ENABLE, &err);
  cl_program p = clCreateProgramWithSource(c, 1, &src, NULL, &err);
  if (clBuildProgram(p, 1, &d, "", NULL, NULL)) { printf("build failed\n"); return 1; }
  size_t bytes = (size_t)512 << 20, n4 = bytes / 16;
  cl_mem x = clCreateBuffer(c, CL_MEM_READ_WRITE, bytes, NULL, &err);
  cl_mem y = clCreateBuffer(c, CL_MEM_READ_WRITE, bytes, NULL, &err);
  float v = 1.0f;
  cl_kernel f4 = clCreateKernel(p, "fill4", &err), f16 = clCreateKernel(p, "fill16", &err),
            cp = clCreateKernel(p, "copy4", &err), rd = clCreateKernel(p, "read4", &err);
  clSetKernelArg(f4, 0, sizeof y, &y); clSetKernelArg(f4, 1, 4, &v);
  clSetKernelArg(f16, 0, sizeof y, &y); clSetKernelArg(f16, 1, 4, &v);
  clSetKernelArg(cp, 0, sizeof x, &x); clSetKernelArg(cp, 1, sizeof y, &y);
  clSetKernelArg(rd, 0, sizeof x, &x); clSetKernelArg(rd, 1, sizeof y, &y);
  for (size_t l = 64; l <= 512; l *= 2) {
    double t = run(q, f4, n4, l);
    printf("fill  float4/item  ls %3zu: %7.1f us  %7.1f GB/s (write)\n", l, t * 1e6, bytes / t * 1e-9);
    t = run(q, f16, n4 / 4, l);
    printf("fill  4xfloat4     ls %3zu: %7.1f us  %7.1f GB/s (write)\n", l, t * 1e6, bytes / t * 1e-9);
    t = run(q, cp, n4, l);
    printf("copy  float4/item  ls %3zu: %7.1f us  %7.1f GB/s (read+write)\n", l, t * 1e6, 2 * bytes / t * 1e-9);
    t = run(q, rd, n4, l);
    printf("read  float4/item  ls %3zu: %7.1f us  %7.1f GB/s (read)\n", l, t * 1e6, bytes / t * 1e-9);
  }
  double best = 1e30;
  for (int r = 0; r < 10; r++) {
    cl_event e; float z = 0;
    clEnqueueFillBuffer(q, y, &z, 4, 0, bytes, 0, NULL, &e); clWaitForEvents(1, &e);
    cl_ulong a, b;
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, 8, &a, NULL);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, 8, &b, NULL);
    if (r >= 2 && (b - a) * 1e-9 < best) best = (b - a) * 1e-9;
  }
  printf("clEnqueueFillBuffer: %7.1f us %7.1f GB/s\n", best * 1e6, bytes / best * 1e-9);
  return 0;
}
