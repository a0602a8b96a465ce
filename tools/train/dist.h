/*
 * dist.h - data-parallel training over MPI: rumus-train --mpi, run as
 * `mpirun -np N rumus-train --mpi ...` (docs/TRAINING.md, "Several
 * devices: MPI").
 *
 * Every rank holds a whole replica of the model on its own device and
 * the whole data set.  Every rank shuffles with the same seed, so all see
 * the same global batches of B = --batch-size rows; rank r of N takes the
 * contiguous rows [r n / N, (r + 1) n / N) of a batch of n rows (n = B
 * but for an epoch's last batch).  After its backward pass each rank
 * downloads its gradients, each the mean over its own rows, into one
 * host buffer (in the model's order, as floats), weights them by its rows
 * / n, and one MPI_Allreduce (MPI_SUM) over that buffer gives every rank
 * the gradient of the mean loss over the n rows, which it uploads before
 * its AdamW step: N ranks with global batch B take the steps one rank
 * with batch B takes, up to the rounding of the split sums.  B need not
 * divide by N (the shards then differ by a row); a rank whose shard of
 * a short last batch is empty steps on one row with weight 0.
 *
 * Without --mpi (or built without MPI) a train_dist is one rank of one,
 * and the functions below do what the single-device code does.
 *
 * Failures.  A rank that fails (a bad device, an unreadable file, an
 * OpenCL error) never leaves the others waiting in a collective: setup
 * ends with dist_agree(); every training step carries a failure flag in
 * its gradient allreduce and in a second, small allreduce of the step's
 * loss and counts (which a rank that failed before its gradient exchange
 * still joins, with its flag set); the evaluation's sum carries one too.
 * When a flag is set every rank learns the first rank that failed, and
 * all stop with a message and exit status 1.  A rank that dies outright
 * is handled by mpirun, which ends the others.
 */
#ifndef RUMUS_TRAIN_DIST_H
#define RUMUS_TRAIN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* The status of a rank stopped because another rank failed (the tool's
 * own range, after TRAIN_EIO and TRAIN_EFORMAT). */
#define TRAIN_EPEER (-72)

/* The most gradient tensors a model hands to the exchange. */
#define DIST_MAX_GRADS 64

typedef struct {
  int active;                 /* --mpi: MPI is initialised (size may be 1) */
  int rank, size;             /* 0 and 1 without --mpi */
  int local_rank, local_size; /* among the ranks sharing this node */
  /* The gradient exchange (size > 1): the model's gradient tensors and
   * one host buffer of all their elements as floats, then the failure
   * flag at buf[nbuf]. */
  rumus_ctx *ctx;
  rumus_tensor *grads[DIST_MAX_GRADS];
  int ngrads;
  float *buf;
  size_t nbuf;
  double weight;   /* this step: the rank's rows / the batch's rows */
  int reduced;     /* this step's gradient allreduce is done */
  int peer_stop;   /* the gradient allreduce said another rank failed */
  int own_failure; /* this rank failed by itself */
  int failed_rank; /* after a failure: the first rank that failed, else -1 */
  double exchange_s; /* seconds in the gradient exchange, summed */
  /* The epoch loop's host batch and permutation. */
  train_batcher io;
  uint32_t *perm;
  size_t perm_len;
  char err[1024]; /* the message of a failure outside the model's steps */
  /* tests/mpi-train.sh's fault injection: RUMUS_TRAIN_FAULT_STEP=N (or
   * N:after) makes this rank fail at its step N, before its step (or
   * after it, past the gradient exchange). */
  long steps, fault_step;
  int fault_after;
} train_dist;

/*! dist_init() : with want (--mpi), MPI_Init and this rank's place in
 *  MPI_COMM_WORLD and on its node (MPI_Comm_split_type with
 *  MPI_COMM_TYPE_SHARED); without, one rank of one (with a warning on
 *  standard error when mpirun started several processes).
 *  @return 0, or -1 with the message in err (rumus-train built without
 *  MPI). */
int dist_init(train_dist *d, int want, int *argc, char ***argv, char *err,
              size_t errlen);
/*! dist_finalize() : frees the buffers; MPI_Finalize when active. */
void dist_finalize(train_dist *d);

/*! dist_device() : the device selector of this rank: given (--device)
 *  if not NULL; NULL (rumus's default: $RUMUS_DEVICE, else the first GPU,
 *  else the first device) without --mpi or when RUMUS_DEVICE is set;
 *  else round-robin by local rank over the node's GPUs, or over all its
 *  devices when it has none, as a decimal index written into buf. */
const char *dist_device(const train_dist *d, const char *given, char *buf,
                        size_t len);
/*! dist_local_batch() : the most rows a rank gets of a global batch of
 *  `batch` rows: ceil(batch / size), at least 1. */
size_t dist_local_batch(const train_dist *d, size_t batch);

/*! dist_agree() : a collective of every rank (none without --mpi):
 *  whether some rank has failed (failed != 0 on it).  On a failure it
 *  prints on this rank's standard error which rank failed `when` (e.g.
 *  "during setup") and returns -1 on every rank; else 0. */
int dist_agree(train_dist *d, int failed, const char *when);

/*! dist_bind() : prepares the epoch loop for t's device model (created on
 *  ctx) and a training set of `count` images in global batches of
 *  `batch` rows: the host buffers, the CNN's dropout lane (rank of size)
 *  and, with more than one rank, the gradient exchange as t's gradient
 *  hook.  @return RUMUS_OK or RUMUS_ENOMEM / RUMUS_EINVAL with the message
 *  in err. */
int dist_bind(train_dist *d, train_model *t, rumus_ctx *ctx, size_t count,
              size_t batch, char *err, size_t errlen);

/*! dist_train_epoch() : one pass over set in global batches of `batch`
 *  rows (shuffled with rng, the same permutation on every rank), this
 *  rank stepping on its shard of each; stops early when *steps_left
 *  reaches 0 (counted down per step; negative: no limit).  fn and *out
 *  get the totals over every rank.  @return RUMUS_OK, this rank's failed
 *  status (message in model_errmsg()), or TRAIN_EPEER when another rank
 *  failed (d->failed_rank). */
int dist_train_epoch(train_dist *d, train_model *t, const mnist_set *set,
                     size_t batch, mlp_rng *rng, long *steps_left,
                     mlp_progress_fn fn, void *user, mlp_progress *out);

/*! dist_evaluate() : the correct predictions on set summed over the
 *  ranks, each evaluating its contiguous shard of the set (rows [r T / N,
 *  (r + 1) T / N)).  For the CNN the batch-norm running statistics are
 *  first averaged over the ranks (dist_sync_buffers()), so every rank
 *  evaluates the same model.  Statuses as dist_train_epoch(). */
int dist_evaluate(train_dist *d, train_model *t, const mnist_set *set,
                  size_t *correct);

/*! dist_sync_buffers() : the CNN's batch-norm running means and variances
 *  replaced on every rank by their mean over the ranks (each rank's
 *  come from its own shards: per-rank batch statistics, as PyTorch's
 *  DistributedDataParallel without SyncBatchNorm); nothing for the MLP
 *  or one rank.  Statuses as dist_train_epoch(). */
int dist_sync_buffers(train_dist *d, train_model *t);

/*! dist_same_replicas() : a collective check that every rank holds the
 *  same parameters bit for bit (a CRC-32 of its downloaded parameters,
 *  compared with MPI_MIN and MPI_MAX); *same receives 1 or 0.  Statuses
 *  as dist_train_epoch(). */
int dist_same_replicas(train_dist *d, train_model *t, int *same);

/*! dist_print_error() : the message of a failure of `what` on this rank:
 *  its own (d->err if set, else msg), or that it stopped because
 *  d->failed_rank failed; with "rank R of N" when active. */
void dist_print_error(const train_dist *d, const char *what, const char *msg);

#endif /* RUMUS_TRAIN_DIST_H */
