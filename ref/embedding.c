/* embedding.c - float64 reference for the embedding lookup and its
 * weight gradient (a plain scatter-add in position order). */
#include <math.h>
#include <string.h>

#include "ref.h"

void ref_embedding_fwd(const float *weight, size_t rows, size_t dim,
                       const int32_t *ids, size_t n, double *out) {
  for (size_t p = 0; p < n; p++) {
    const int ok = ids[p] >= 0 && (size_t)ids[p] < rows;
    for (size_t c = 0; c < dim; c++)
      out[p * dim + c] = ok ? weight[(size_t)ids[p] * dim + c] : 0.0;
  }
}

void ref_embedding_bwd(const float *dout, const int32_t *ids, size_t n,
                       size_t rows, size_t dim, int32_t padding_idx,
                       double *dweight, double *abs_sum, size_t *count) {
  memset(dweight, 0, rows * dim * sizeof *dweight);
  if (abs_sum) memset(abs_sum, 0, rows * dim * sizeof *abs_sum);
  if (count) memset(count, 0, rows * sizeof *count);
  for (size_t p = 0; p < n; p++) {
    const int32_t id = ids[p];
    if (id < 0 || (size_t)id >= rows || id == padding_idx) continue;
    if (count) count[id]++;
    for (size_t c = 0; c < dim; c++) {
      const double g = dout[p * dim + c];
      dweight[(size_t)id * dim + c] += g;
      if (abs_sum) abs_sum[(size_t)id * dim + c] += fabs(g);
    }
  }
}
