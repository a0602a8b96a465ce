/*
 * profile.c - rumus-train --profile (see profile.h).
 */
#include "profile.h"

#include <stdlib.h>
#include <string.h>

int train_profile_skip(rumus_ctx *ctx) {
  size_t n;
  return rumus_ctx_kernel_profile(ctx, NULL, 0, &n);
}

/* The entry of p for (op, kernel), added if new; NULL without memory. */
static rumus_kernel_stat *entry_of(train_profile *p, const rumus_kernel_stat *s) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->stats[i].op, s->op) == 0 && strcmp(p->stats[i].kernel, s->kernel) == 0)
      return &p->stats[i];
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 32;
    rumus_kernel_stat *g = realloc(p->stats, cap * sizeof *g);
    if (g == NULL) return NULL;
    p->stats = g;
    p->cap = cap;
  }
  rumus_kernel_stat *e = &p->stats[p->n++];
  *e = *s;
  e->launches = e->ns = 0;
  return e;
}

/* More pairs than the library has kernels: a call never loses one. */
#define TAKE_MAX 1024

int train_profile_take(rumus_ctx *ctx, train_profile *p) {
  static rumus_kernel_stat got[TAKE_MAX];
  size_t n = 0;
  int st = rumus_ctx_kernel_profile(ctx, got, TAKE_MAX, &n);
  if (st != RUMUS_OK) return st;
  for (size_t i = 0; i < n && i < TAKE_MAX; i++) {
    rumus_kernel_stat *e = entry_of(p, &got[i]);
    if (e == NULL) return RUMUS_ENOMEM;
    e->launches += got[i].launches;
    e->ns += got[i].ns;
    p->total_ns += got[i].ns;
  }
  return RUMUS_OK;
}

static int by_time(const void *a, const void *b) {
  const rumus_kernel_stat *x = a, *y = b;
  return x->ns == y->ns ? 0 : x->ns < y->ns ? 1 : -1;
}

void train_profile_print(const train_profile *p, long steps, size_t rows, FILE *f) {
  if (p->n) qsort(p->stats, p->n, sizeof *p->stats, by_time);
  double per = steps > 0 ? 1e-6 / (double)steps : 0.0; /* ns to ms per step */
  fprintf(f, "profile: device time of %ld training steps by kernel (ms per step, "
             "share, launches per step)\n", steps);
  uint64_t shown = 0;
  for (size_t i = 0; i < p->n && i < rows; i++) {
    const rumus_kernel_stat *s = &p->stats[i];
    shown += s->ns;
    fprintf(f, "  %8.3f ms %5.1f%% %7.1f  %s / %s\n", (double)s->ns * per,
            100.0 * (double)s->ns / (double)(p->total_ns ? p->total_ns : 1),
            (double)s->launches / (double)(steps > 0 ? steps : 1), s->op, s->kernel);
  }
  if (p->n > rows)
    fprintf(f, "  %8.3f ms %5.1f%%          %zu more kernels\n",
            (double)(p->total_ns - shown) * per,
            100.0 * (double)(p->total_ns - shown) / (double)(p->total_ns ? p->total_ns : 1),
            p->n - rows);
  fprintf(f, "  %8.3f ms in all (the kernels' summed device time, without the "
             "gaps between them)\n", (double)p->total_ns * per);
}

void train_profile_free(train_profile *p) {
  free(p->stats);
  *p = (train_profile){0};
}
