/* klimit FILE OPTIONS...: builds FILE on the first GPU of any platform with each
 * option string and prints each kernel's work-group size limit, private and local memory. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  FILE *f = fopen(argv[1], "rb");
  if (!f) { printf("no file %s\n", argv[1]); return 1; }
  fseek(f, 0, SEEK_END); long n = ftell(f); rewind(f);
  char *src = malloc(n + 1); if (fread(src, 1, n, f) != (size_t)n) return 1; src[n] = 0;
  cl_platform_id p[8]; cl_uint np = 0; cl_int e = clGetPlatformIDs(8, p, &np);
  printf("platforms: %d (err %d)\n", np, e); fflush(stdout);
  cl_device_id d = NULL;
  for (cl_uint i = 0; i < np && !d; i++) if (clGetDeviceIDs(p[i], CL_DEVICE_TYPE_GPU, 1, &d, NULL)) d = NULL;
  if (!d) { printf("no GPU\n"); return 2; }
  char dn[256]; size_t mwg; clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof dn, dn, NULL);
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof mwg, &mwg, NULL);
  printf("device %s max wg %zu\n", dn, mwg); fflush(stdout);
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  for (int a = 2; a < argc; a++) {
    const char *s = src; cl_program pr = clCreateProgramWithSource(c, 1, &s, NULL, &e);
    e = clBuildProgram(pr, 1, &d, argv[a], NULL, NULL);
    size_t ln = 0; clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, 0, NULL, &ln);
    char *log = malloc(ln + 1); clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, ln, log, NULL); log[ln] = 0;
    printf("== [%s]: build %d\n%s\n", argv[a], e, log); fflush(stdout);
    if (e) continue;
    cl_kernel ks[256]; cl_uint nk = 0; e = clCreateKernelsInProgram(pr, 256, ks, &nk);
    for (cl_uint i = 0; i < nk; i++) {
      char name[128]; size_t wg = 0; cl_ulong pm = 0, lm = 0;
      clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
      clGetKernelWorkGroupInfo(ks[i], d, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
      clGetKernelWorkGroupInfo(ks[i], d, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof pm, &pm, NULL);
      clGetKernelWorkGroupInfo(ks[i], d, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL);
      printf("  %-32s wg %5zu  private %6llu  local %6llu\n", name, wg, (unsigned long long)pm, (unsigned long long)lm);
      clReleaseKernel(ks[i]);
    }
    clReleaseProgram(pr);
  }
  return 0;
}
