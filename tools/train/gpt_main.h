/*
 * gpt_main.h - rumus-train --model gpt: the character-level GPT's driver
 * (data, device model, training loop with evaluations, sampling, model
 * files).  See docs/TRAINING.md, "The GPT".
 */
#ifndef RUMUS_TRAIN_GPT_MAIN_H
#define RUMUS_TRAIN_GPT_MAIN_H

#include "options.h"

/*! gpt_main() : runs the GPT for the parsed options (the GPT's defaults
 *  filled in here if not yet); returns the exit status (0, or 1 after
 *  printing the run-time error). */
int gpt_main(train_opts *o);

/*! gpt_lr_at() : the learning rate of step it (from 0) of `steps`,
 *  nanoGPT's get_lr with lr_decay_iters = steps and min_lr = lr / 10:
 *  lr (it + 1) / (warmup + 1) during the warm-up, then
 *  min_lr + (lr - min_lr) (1 + cos(pi (it - warmup) / (steps - warmup))) / 2
 *  (constant: lr after the warm-up). */
float gpt_lr_at(float lr, long it, long warmup, long steps, int constant);

#endif /* RUMUS_TRAIN_GPT_MAIN_H */
