/*
 * conv_im2col.c - the measurement behind docs/DESIGN.md's choice of an
 * implicit GEMM for conv2d: the forward at the CNN layer of issue 11 (64
 * images, 32 -> 64 channels, 14 x 14, 3 x 3, padding 1) as
 * rumus_conv2d_fwd against the other route, a batched im2col kernel into a
 * scratch buffer (col[n][c kh kw][oh ow]) followed by one strided-batch
 * rumus_gemm_ex over the images.  Prints the best of 7 wall times (after a
 * warm-up run) of each part, and the largest difference of the outputs
 * (0: both sum every output from 0 in the same order with fma).
 *
 * Not built by make; from a build tree:
 *   cc -O2 -I../include -Iinclude ../bench/conv_im2col.c -o conv_im2col \
 *      -L.libs -lrumus -lOpenCL
 *   LD_LIBRARY_PATH=.libs ./conv_im2col cpu     (or gpu: the variant)
 * The im2col kernel is plain (one work-item per element of col, work-groups
 * of 196 along the pixels); it only has to show the order of magnitude.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rumus.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static const char *SRC =
    "__kernel void im2col(__global const float *x, __global float *col,\n"
    "                     int C, int H, int W) {\n"
    "  const int p = get_global_id(0), k = get_global_id(1);\n"
    "  const int n = get_global_id(2);\n"
    "  if (p >= H * W) return;\n"
    "  const int c = k / 9, kh = k % 9 / 3, kw = k % 3;\n"
    "  const int ih = p / W - 1 + kh, iw = p % W - 1 + kw;\n"
    "  const int in = ih >= 0 && ih < H && iw >= 0 && iw < W;\n"
    "  col[((size_t)n * C * 9 + k) * H * W + p] =\n"
    "      in ? x[((size_t)(n * C + c) * H + ih) * W + iw] : 0.0f;\n"
    "}\n";

#define CHECK(x)                                                            \
  do {                                                                      \
    if (!(x)) {                                                             \
      fprintf(stderr, "failed: %s (%s)\n", #x, rumus_ctx_errmsg(ctx));      \
      return 1;                                                             \
    }                                                                       \
  } while (0)

int main(int argc, char **argv) {
  enum { N = 64, C = 32, OC = 64, S = 14, K = C * 9, P = S * S };
  rumus_ctx *ctx = NULL;
  if (rumus_ctx_create(&ctx, NULL, 0) != RUMUS_OK) return 1;
  const int gpu = argc > 1 && strcmp(argv[1], "gpu") == 0;
  CHECK(rumus_ctx_set_option(ctx, RUMUS_OPT_VARIANT,
                             gpu ? RUMUS_VARIANT_GPU : RUMUS_VARIANT_CPU) ==
        RUMUS_OK);
  const size_t xs[4] = {N, C, S, S}, ws[4] = {OC, C, 3, 3},
               ys[4] = {N, OC, S, S}, cs[1] = {(size_t)N * K * P};
  rumus_tensor *x, *w, *y, *y2, *col;
  CHECK(rumus_tensor_create(ctx, RUMUS_F32, 4, xs, &x) == RUMUS_OK);
  CHECK(rumus_tensor_create(ctx, RUMUS_F32, 4, ws, &w) == RUMUS_OK);
  CHECK(rumus_tensor_create(ctx, RUMUS_F32, 4, ys, &y) == RUMUS_OK);
  CHECK(rumus_tensor_create(ctx, RUMUS_F32, 4, ys, &y2) == RUMUS_OK);
  CHECK(rumus_tensor_create(ctx, RUMUS_F32, 1, cs, &col) == RUMUS_OK);
  float *h = malloc(sizeof(float) * N * OC * P * 2);
  for (size_t i = 0; i < (size_t)N * C * P; i++)
    h[i] = (float)rand() / RAND_MAX - 0.5f;
  CHECK(rumus_tensor_upload(x, h, sizeof(float) * N * C * P) == RUMUS_OK);
  CHECK(rumus_tensor_upload(w, h, sizeof(float) * OC * K) == RUMUS_OK);

  cl_int e;
  cl_program prog = clCreateProgramWithSource(rumus_ctx_cl_context(ctx), 1,
                                              &SRC, NULL, &e);
  CHECK(e == CL_SUCCESS && clBuildProgram(prog, 0, NULL, "", NULL, NULL) ==
                               CL_SUCCESS);
  cl_kernel kern = clCreateKernel(prog, "im2col", &e);
  CHECK(e == CL_SUCCESS);
  cl_mem xm = rumus_tensor_cl_mem(x, NULL), cm = rumus_tensor_cl_mem(col, NULL);
  const int c = C, s = S;
  clSetKernelArg(kern, 0, sizeof xm, &xm);
  clSetKernelArg(kern, 1, sizeof cm, &cm);
  clSetKernelArg(kern, 2, sizeof c, &c);
  clSetKernelArg(kern, 3, sizeof s, &s);
  clSetKernelArg(kern, 4, sizeof s, &s);
  const size_t global[3] = {P, K, N}, local[3] = {P, 1, 1};
  /* y_n [OC, P] = w [OC, K] * col_n [K, P] for each image n. */
  rumus_gemm_layout l = {0};
  l.m = OC, l.n = P, l.k = K, l.batch = N;
  l.lda = K, l.ldb = P, l.stride_b = (size_t)K * P;
  l.ldc = P, l.stride_c = (size_t)OC * P;
  const rumus_conv2d_params cp = {1, 1, 1, 1, 1, 1, 1};
  double best[3] = {1e30, 1e30, 1e30};
  for (int r = 0; r < 8; r++) {
    double t[4];
    t[0] = now_ms();
    CHECK(clEnqueueNDRangeKernel(rumus_ctx_cl_queue(ctx), kern, 3, NULL,
                                 global, local, 0, NULL, NULL) == CL_SUCCESS);
    CHECK(rumus_ctx_sync(ctx) == RUMUS_OK);
    t[1] = now_ms();
    CHECK(rumus_gemm_ex(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0f, w, col,
                        0.0f, y2, &l) == RUMUS_OK);
    CHECK(rumus_ctx_sync(ctx) == RUMUS_OK);
    t[2] = now_ms();
    CHECK(rumus_conv2d_fwd(ctx, &cp, x, w, NULL, y) == RUMUS_OK);
    CHECK(rumus_ctx_sync(ctx) == RUMUS_OK);
    t[3] = now_ms();
    for (int i = 0; r > 0 && i < 3; i++)
      if (t[i + 1] - t[i] < best[i]) best[i] = t[i + 1] - t[i];
  }
  const size_t ny = (size_t)N * OC * P;
  CHECK(rumus_tensor_download(y, h, ny * sizeof(float)) == RUMUS_OK);
  CHECK(rumus_tensor_download(y2, h + ny, ny * sizeof(float)) == RUMUS_OK);
  double diff = 0;
  for (size_t i = 0; i < ny; i++) {
    const double d = h[i] > h[ny + i] ? h[i] - h[ny + i] : h[ny + i] - h[i];
    if (d > diff) diff = d;
  }
  printf("%s variant: im2col %.2f ms + batched GEMM %.2f ms = %.2f ms; "
         "implicit GEMM (rumus_conv2d_fwd) %.2f ms; largest difference %g\n",
         gpu ? "gpu" : "cpu", best[0], best[1], best[0] + best[1], best[2],
         diff);
  free(h);
  clReleaseKernel(kern);
  clReleaseProgram(prog);
  rumus_tensor_free(x);
  rumus_tensor_free(w);
  rumus_tensor_free(y);
  rumus_tensor_free(y2);
  rumus_tensor_free(col);
  return rumus_ctx_free(ctx) == RUMUS_OK ? 0 : 1;
}
