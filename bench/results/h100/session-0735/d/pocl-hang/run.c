#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char *slurp(const char *p) {
  FILE *f = fopen(p, "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); rewind(f);
  char *b = malloc(n + 1); fread(b, 1, n, f); b[n] = 0; fclose(f); return b;
}
int main(int argc, char **argv) {
  /* bn_draw of the tree's batchnorm.cl gives each group its position. */
  const char *src[3] = {slurp("/work/main/cl/common.cl"),
                        slurp("/work/main/cl/batchnorm.cl"), slurp(argv[1])};
  cl_platform_id pl; clGetPlatformIDs(1, &pl, NULL);
  cl_device_id d; clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &d, NULL);
  cl_int e; cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_command_queue qu = clCreateCommandQueue(c, d, 0, &e);
  cl_program pr = clCreateProgramWithSource(c, 3, src, NULL, &e);
  char opts[64]; snprintf(opts, sizeof opts, "-DWG=128 -DBN_GPU=1 -w -DIF_ELSE=%d", argc > 4 ? atoi(argv[4]) : 0);
  e = clBuildProgram(pr, 1, &d, opts, NULL, NULL);
  if (e) { char log[20000]; clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL); printf("%s\n", log); return 1; }
  cl_kernel k = clCreateKernel(pr, "t", &e);
  int zero[5000] = {0};
  cl_mem st = clCreateBuffer(c, CL_MEM_COPY_HOST_PTR, sizeof zero, zero, &e);
  cl_mem out = clCreateBuffer(c, CL_MEM_COPY_HOST_PTR, sizeof zero, zero, &e);
  cl_ulong nc = atoi(argv[2]);
  clSetKernelArg(k, 0, sizeof st, &st); clSetKernelArg(k, 1, sizeof out, &out); clSetKernelArg(k, 2, sizeof nc, &nc);
  size_t g = 128 * atoi(argv[3]), l = 128;
  e = clEnqueueNDRangeKernel(qu, k, 1, NULL, &g, &l, 0, NULL, NULL);
  clFinish(qu);
  int o[8]; clEnqueueReadBuffer(qu, out, CL_TRUE, 0, sizeof o, o, 0, NULL, NULL);
  printf("done e=%d out %d %d %d\n", e, o[0], o[1], o[2]);
  return 0;
}
