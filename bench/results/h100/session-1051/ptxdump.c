/* ptxdump: builds DIR/common.cl + DIR/FILE with OPTIONS on the first GPU
 * and writes the program binary (PTX on NVIDIA) to stdout. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char *slurp(const char *p) {
  FILE *f = fopen(p, "rb"); if (!f) { perror(p); exit(1); }
  fseek(f, 0, SEEK_END); long n = ftell(f); rewind(f);
  char *b = malloc(n + 1); fread(b, 1, n, f); b[n] = 0; fclose(f); return b;
}
int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "ptxdump DIR FILE OPTIONS\n"); return 2; }
  char p1[512], p2[512];
  snprintf(p1, sizeof p1, "%s/common.cl", argv[1]);
  snprintf(p2, sizeof p2, "%s/%s", argv[1], argv[2]);
  const char *src[2] = {slurp(p1), slurp(p2)};
  cl_platform_id pl[8]; cl_uint np; clGetPlatformIDs(8, pl, &np);
  cl_device_id d = 0;
  for (cl_uint i = 0; i < np && !d; i++)
    if (clGetDeviceIDs(pl[i], CL_DEVICE_TYPE_GPU, 1, &d, NULL) != CL_SUCCESS) d = 0;
  if (!d) { fprintf(stderr, "no GPU\n"); return 1; }
  cl_int e; cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_program pr = clCreateProgramWithSource(c, 2, src, NULL, &e);
  e = clBuildProgram(pr, 1, &d, argv[3], NULL, NULL);
  if (e != CL_SUCCESS) {
    size_t n; clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    char *l = malloc(n + 1); clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, n, l, NULL);
    fprintf(stderr, "build failed %d:\n%s\n", e, l); return 1;
  }
  { size_t n; clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    char *l = malloc(n + 1); clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, n, l, NULL);
    fprintf(stderr, "%s\n", l); }
  size_t sz; clGetProgramInfo(pr, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL);
  unsigned char *bin = malloc(sz); unsigned char *bins[1] = {bin};
  clGetProgramInfo(pr, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL);
  fwrite(bin, 1, sz, stdout);
  return 0;
}
