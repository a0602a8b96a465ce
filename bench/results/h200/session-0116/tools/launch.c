/* launch: tiny kernels at local sizes 256, 512, 1024 on the first GPU; the enqueue/finish status. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
static const char *src =
  "__kernel void tiny(global float *a) { a[get_global_id(0)] = 1.0f; }\n"
  "__kernel __attribute__((reqd_work_group_size(512,1,1))) void tiny512(global float *a) { a[get_global_id(0)] = 2.0f; }\n"
  "__kernel void big(global float *a) { local float l[1024]; l[get_local_id(0)] = 1.0f; barrier(CLK_LOCAL_MEM_FENCE); a[get_global_id(0)] = l[get_local_size(0) - 1 - get_local_id(0)]; }\n";
int main(void) {
  cl_platform_id p[8]; cl_uint np = 0; clGetPlatformIDs(8, p, &np);
  cl_device_id d = NULL;
  for (cl_uint i = 0; i < np && !d; i++) if (clGetDeviceIDs(p[i], CL_DEVICE_TYPE_GPU, 1, &d, NULL)) d = NULL;
  if (!d) { printf("no GPU\n"); return 2; }
  cl_int e; cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_command_queue q = clCreateCommandQueue(c, d, 0, &e);
  cl_program pr = clCreateProgramWithSource(c, 1, &src, NULL, &e);
  e = clBuildProgram(pr, 1, &d, "-cl-std=CL1.2", NULL, NULL); printf("build %d\n", e);
  cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 4 << 20, NULL, &e);
  const char *names[3] = {"tiny", "tiny512", "big"};
  for (int k = 0; k < 3; k++) {
    cl_kernel kr = clCreateKernel(pr, names[k], &e); clSetKernelArg(kr, 0, sizeof b, &b);
    size_t wg = 0, cwg[3] = {0, 0, 0}; clGetKernelWorkGroupInfo(kr, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetKernelWorkGroupInfo(kr, d, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof cwg, cwg, NULL);
    size_t pref = 0; clGetKernelWorkGroupInfo(kr, d, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof pref, &pref, NULL);
    printf("%s: WORK_GROUP_SIZE %zu COMPILE %zu PREF %zu\n", names[k], wg, cwg[0], pref);
    size_t ls[3] = {256, 512, 1024};
    for (int i = 0; i < 3; i++) {
      size_t g = 1 << 20, l = ls[i];
      cl_int e1 = clEnqueueNDRangeKernel(q, kr, 1, NULL, &g, &l, 0, NULL, NULL);
      cl_int e2 = clFinish(q);
      float v = 0; clEnqueueReadBuffer(q, b, CL_TRUE, 4 * 1000, 4, &v, 0, NULL, NULL);
      printf("  local %zu: enqueue %d finish %d a[1000] %g\n", l, e1, e2, v);
      float z = 0; clEnqueueFillBuffer(q, b, &z, 4, 0, 4 << 20, 0, NULL, NULL); clFinish(q);
    }
  }
  return 0;
}
