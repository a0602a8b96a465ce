/*
 * profile.h - rumus-train --profile: the device time of the training steps
 * by (op, kernel), gathered from a profiling context between evaluations
 * and printed at the end.
 */
#ifndef RUMUS_TRAIN_PROFILE_H
#define RUMUS_TRAIN_PROFILE_H

#include <stdio.h>

#include "rumus.h"

typedef struct {
  rumus_kernel_stat *stats; /* distinct (op, kernel) pairs so far */
  size_t n, cap;
  uint64_t total_ns;
} train_profile;

/* Forgets the launches since the last call (the setup, an evaluation). */
int train_profile_skip(rumus_ctx *ctx);
/* Adds the launches since the last call to p. */
int train_profile_take(rumus_ctx *ctx, train_profile *p);
/* The `rows` pairs with the most time, per step of `steps`, and the total. */
void train_profile_print(const train_profile *p, long steps, size_t rows, FILE *f);
void train_profile_free(train_profile *p);

#endif
