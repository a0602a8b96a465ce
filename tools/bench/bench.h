/*
 * bench.h - what the parts of rumus-bench share: the table of benchmarked
 * ops (cases.c), one measured case (an op at one shape), the device copy
 * kernel (devcopy.c) and the output writers (output.c).
 */
#ifndef RUMUS_BENCH_H
#define RUMUS_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rumus.h"

/* A shape as given on the command line: "4096x1024", "16777216", for
 * GEMM "MxNxK" with an optional ":TT" suffix (n or t for op(A), op(B)),
 * and for the CNN ops dimensions with an optional "/" suffix of letters
 * and numbers: k kernel, s stride, p padding, g groups, o output extent
 * (adaptive pooling), e.g. "64x3x64x224/k7s2p3" or "64x512x7/o1".  The
 * suffix values are 0 where not given; the op's describe() replaces them
 * with the values it uses (its defaults filled in), which the JSON
 * output records. */
typedef struct {
  int ndim;
  size_t d[4];
  int ta, tb;
  int given; /* the suffix letters given: bits k 1, s 2, p 4, g 8, o 16 */
  int geom;  /* 1: the op uses k, s, p, g, o (written to the JSON) */
  size_t k, s, p, g, o;
  char text[64];
} bench_shape;

enum { BT_IN = 0, BT_OUT = 1, BT_INOUT = 2 };

#define BENCH_MAXT 10 /* attention_fwd_bwd has 9 */

/* One tensor of a case: its role, type, shape and initial contents. */
typedef struct {
  const char *name;
  int role;
  rumus_dtype dtype;
  int ndim;
  size_t shape[3];
  size_t n;      /* elements */
  float lo, hi;  /* uniform initial values (I32: classes in [0, hi)) */
  /* 1: a floating tensor of the run's --dtype in place of F32, whose host
   * copies (initial contents, peer outputs) stay float arrays, holding the
   * values the device stores; uploaded and downloaded with conversion. */
  int host_f32;
} bench_tdesc;

typedef struct bench_op bench_op;

/* One op at one shape: device tensors, host copies and the measurements. */
typedef struct {
  const bench_op *op;
  bench_shape shape;
  rumus_dtype dtype; /* --dtype: the storage of the op's floating tensors */
  rumus_ctx *ctx;
  int nt;
  bench_tdesc td[BENCH_MAXT];
  rumus_tensor *t[BENCH_MAXT];
  void *h[BENCH_MAXT]; /* initial contents */
  void *p[BENCH_MAXT]; /* the peer's outputs and state (OUT / INOUT) */
  long step, peer_step; /* optimizer step counters */
  double bytes, flops;  /* the op's compulsory traffic and arithmetic */

  /* Results. */
  int status;           /* RUMUS_OK, or why the op is n/a */
  char note[160];       /* reason for n/a, or a remark */
  int reps, peer_reps;
  double ns, wall_ns;   /* median device time (span), median host wall time */
  double busy_ns;       /* median summed kernel time */
  double min_ns;        /* fastest device time */
  double peer_ns;       /* median peer wall time, 0 if none */
  double peer_min_ns;   /* fastest peer time */
  const char *peer_name;
  double check_err;     /* normwise relative error vs the peer, <0: none */
  /* On a CPU, large cases time a device copy and a host STREAM copy right
   * after each run of the op (the memory bandwidth of a shared machine
   * drifts): their medians, and the medians of the per-run ratios; the
   * peer also alternates with the op, and speed_ratio is the median of
   * peer time / rumus time over the pairs.  0 when not measured. */
  double local_copy_gbs, local_stream_gbs;
  double pct_copy_paired, pct_stream_paired, speed_ratio;
} bench_case;

struct bench_op {
  const char *name;
  const char *family;
  const char *defaults;  /* default shapes, comma-separated */
  const char *gpu_extra; /* more default shapes on a GPU, or NULL */
  int memory_bound;
  const char *model;     /* bytes and flops model, for --list and docs */
  /* Fills td / nt / bytes / flops from the shape; returns NULL or why the
   * shape does not fit the op. */
  const char *(*describe)(bench_case *c);
  int (*run)(bench_case *c);       /* enqueue the op once */
  const char *(*peer)(bench_case *c); /* host peer once; returns its name */
  /* Optional custom check (returns the error, <0 if none); NULL: compare
   * every OUT / INOUT tensor with the peer's arrays. */
  double (*check)(bench_case *c, void *const *got);
  /* Optional: called after the host copies are filled with random values
   * and before they are uploaded, to make inputs that must be consistent
   * (max pooling's indices); NULL: none. */
  void (*prepare)(bench_case *c);
};

extern const bench_op bench_ops[];
extern const size_t bench_nops;
/* Whether op runs with 16-bit storage under --dtype (every floating
 * tensor in that type); the others are measured in F32 only. */
int bench_op_takes_dtype(const bench_op *op);
/* The largest normwise relative error against the peer: 1e-3 for F32,
 * plus the rounding of a 16-bit result (F16 2^-11, BF16 2^-8). */
double bench_check_limit(rumus_dtype d);
/* The bytes of one element of td's host copies. */
size_t bench_host_elem(const bench_tdesc *td);
const bench_op *bench_find_op(const char *name);
int bench_parse_shape(const char *s, bench_shape *out);

/* Device copy bandwidth: a float4 copy kernel on the context's queue in two
 * forms (GB/s of each in forms) and the device time of an empty kernel
 * (*empty_us, microseconds); returns the faster form's GB/s (1e9 bytes,
 * read + write), or a negative value on failure. */
double bench_device_copy(rumus_ctx *ctx, size_t bytes, int reps,
                         double forms[2], double *empty_us, char *err,
                         size_t errlen);

/* The same kernels for single timed runs: bench_copy_ns() returns the device
 * time of one launch of form 0 (one float4 per work-item), 1 (strided grid)
 * or 2 (empty), or < 0 on failure. */
typedef struct bench_copy bench_copy;
bench_copy *bench_copy_new(rumus_ctx *ctx, size_t bytes, char *err,
                           size_t errlen);
double bench_copy_ns(bench_copy *b, int form);
double bench_copy_gbs(bench_copy *b, double ns);
void bench_copy_free(bench_copy *b);

/* The whole run, for the writers. */
typedef struct {
  const char *date;
  const char *device;
  int is_gpu, gpu_variant;
  char host_cpu[128];
  char load_start[64], load_end[64]; /* /proc/loadavg: 1, 5, 15 minutes */
  int threads;
  const char *blas;
  rumus_dtype dtype; /* --dtype */
  double copy_gbs;   /* device copy kernel: the faster of its two forms */
  double copy_forms[2]; /* one float4 per work-item; strided grid */
  double empty_us;   /* device time of an empty kernel (one work-group) */
  double stream_gbs; /* host STREAM copy */
  size_t copy_bytes;
  int warmup;
  bench_case *cases;
  size_t ncases;
} bench_run;

void bench_print_table(const bench_run *r, FILE *f);
int bench_write_csv(const bench_run *r, const char *path);
int bench_write_json(const bench_run *r, const char *path);

#endif /* RUMUS_BENCH_H */
