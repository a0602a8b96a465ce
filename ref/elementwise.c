/* elementwise.c - float64 reference bias gradient (column sums). */
#include "ref.h"

void ref_bias_grad(const float *dy, size_t rows, size_t cols, double *db) {
  for (size_t j = 0; j < cols; j++) db[j] = 0.0;
  for (size_t r = 0; r < rows; r++)
    for (size_t j = 0; j < cols; j++) db[j] += dy[r * cols + j];
}
