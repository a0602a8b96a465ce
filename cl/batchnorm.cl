/*
 * batchnorm.cl - per-channel reductions of NCHW tensors: the channel bias
 * gradient and batch norm 2d (statistics, forward, backward), and the
 * per-channel maps that apply their results (channel bias add, the
 * normalisation, the input gradient).
 *
 * Layout: a tensor [N, C, S] (S = H * W, or the product of the extents
 * after the channel) holds element (n, c, s) at ((n * C + c) * S + s);
 * channel c is N "rows" of S contiguous elements, C * S apart.  Its
 * M = N * S elements are numbered m = n * S + s.
 *
 *   sum    s1 = sum a                          (bias grad: a = dy; mean: x)
 *   dev    d = x - mean[c]: s1 = sum d, s2 = sum d^2
 *          var = (s2 - s1^2 / M) / M: the corrected two-pass variance
 *          (s1 is the rounding error of the mean, ~0, which then
 *          corrects the mean too), never E[x^2] - E[x]^2
 *   bwd    d = x - mean[c]: s1 = sum dy, s2 = sum dy * d
 *          dbeta = s1, dgamma = s2 * invstd,
 *          dx = (dy - s1 / M - d * s2 * invstd^2 / M) * gamma * invstd
 *
 * Reductions run in two stages.  Stage 1 cuts each channel's M elements
 * into `parts` ranges of L consecutive m (the last shorter) and sums each
 * range; stage 2 adds a channel's ranges in order p = 0, 1, ... and writes
 * what the op needs (the bias gradient, the mean, invstd and running
 * statistics, the backward's dgamma, dbeta and coefficients).
 *   GPU, one launch per reduction: bn_bias_wg, bn_stats_wg, bn_bwd_wg take
 *   a work-group of WG per (channel, range); its work-items walk the range
 *   in chunks of 16 values each, float4 by float4 when S is a multiple of
 *   4 (else value by value), neighbouring work-items on neighbouring
 *   values, every load of a chunk issued before any is used, no division
 *   per element; a tree in local memory); with several ranges a group
 *   stores its pair in part[2 (c * parts + p)] (+1) and the last group of
 *   the channel to finish folds them (a ticket per channel in the status
 *   buffer).  The training statistics take each range's mean and
 *   deviations in two passes and merge the ranges' (n, mean, M2)
 *   (bn_stats_wg).  The training forward and the backward add the map to
 *   the same launch (bn_fwd_one, bn_bwd_one, at the end of this file).
 *   CPU: bn_<mode>_item, one work-item per (channel, range), no barriers,
 *   4 chains of float8 accumulators (bn_acc), into part; stage 2,
 *   bn_fold_<what>, one work-item per channel.
 * The order depends only on the shape, the variant, WG and the device's
 * compute units (the host's choice of parts), so the bits are the same on
 * every run; the two variants may differ in the last bits.
 *
 * The maps (bn_apply_*) are 2-D: dimension 0 walks blocks of BN_SPAN
 * elements of one (n, c) plane of S elements, dimension 1 the planes
 * q0 + q (the host launches planes in chunks); a work-item reads its
 * channel's coefficients once.
 *
 * Storage: x, y, dy, dx (and the bias when it is not F32) in the program's
 * tag (F32, F16, BF16) through LOAD / STORE; batch norm's gamma, beta,
 * running and saved statistics are float; all arithmetic is float.
 */

#ifndef BN_GPU
#define BN_GPU 0 /* stage 1: 1 the work-group bn_*_wg, 0 the bn_*_item */
#endif
#ifndef BN_VW
#define BN_VW 8 /* vector width of the maps: 4 (GPU) or 8 (CPU) */
#endif
#ifndef BN_NV
#define BN_NV 4 /* vectors per work-item of the maps */
#endif
#ifndef BN_FOLD_LS
#define BN_FOLD_LS 8 /* local size of the fold kernels */
#endif

#define BN_SPAN (BN_VW * BN_NV) /* elements per work-item of the maps */

#if BN_VW == 8
typedef float8 bn_vec;
#define BN_LOADV(p, i) LOAD8(p, i)
#define BN_STOREV(v, p, i) STORE8(v, p, i)
#else
typedef float4 bn_vec;
#define BN_LOADV(p, i) LOAD4(p, i) /* 16-byte access when RUMUS_ALIGN4 */
#define BN_STOREV(v, p, i) STORE4(v, p, i)
#endif

/* Modes of the reductions and the maps; constant in each entry, so the
 * branches fold at compile time. */
#define BN_SUM 0
#define BN_DEV 1
#define BN_BWD 2

/* ---- Stage 1 ------------------------------------------------------------ */

/* Adds element i to the sums of the mode: a is dy (BWD) or the reduced
 * tensor, b is x (BWD), mc the channel's mean (DEV, BWD). */
#define BN_ACC(mode, a, b, i, mc, s1, s2)                                    \
  do {                                                                       \
    if ((mode) == BN_SUM) {                                                  \
      s1 += LOAD(a, i);                                                      \
    } else if ((mode) == BN_DEV) {                                           \
      const float d_ = LOAD(a, i) - (mc);                                    \
      s1 += d_;                                                              \
      s2 += d_ * d_;                                                         \
    } else {                                                                 \
      const float g_ = LOAD(a, i);                                           \
      s1 += g_;                                                              \
      s2 += g_ * (LOAD(b, i) - (mc));                                        \
    }                                                                        \
  } while (0)

/* The range [m0, m1) of channel c, and the channel's mean (0 for SUM). */
typedef struct {
  size_t c, m0, m1;
  float mc;
} bn_range;

inline bn_range bn_range_of(size_t c, size_t p, ulong L, ulong M,
                            global const float *mean, int mode) {
  bn_range r;
  r.c = c;
  r.m0 = p * (size_t)L;
  r.m1 = min(r.m0 + (size_t)L, (size_t)M);
  r.mc = mode == BN_SUM ? 0.0f : mean[c];
  return r;
}

#if BN_GPU
/* Work-item lid's walk over a range of one channel in units of u elements
 * (u = 4 when vec, S a multiple of 4, so a unit never crosses a plane;
 * else 1): m = m0 + u lid, then steps of st = u WG, with the element's
 * (n, s) carried from step to step (st = wq S + wr, so a step adds wq to
 * n and wr to s, and s wraps at most once): one division per walk, not
 * per element. */
typedef struct {
  size_t m, n, s, st, wq, wr;
} bn_walk;

inline void bn_walk_start(bn_walk *w, size_t m, size_t S, size_t st) {
  w->m = m;
  w->n = m / S;
  w->s = m - w->n * S;
  w->st = st;
  w->wq = st / S;
  w->wr = st - w->wq * S;
}

inline void bn_walk_next(bn_walk *w, size_t S) {
  w->m += w->st;
  w->n += w->wq;
  w->s += w->wr;
  if (w->s >= S) {
    w->s -= S;
    w->n++;
  }
}

/* Starts work-item lid's walk over range r. */
inline void bn_walk_range(bn_walk *w, bn_range r, size_t S, int vec) {
  const size_t u = vec ? 4 : 1;
  bn_walk_start(w, r.m0 + u * get_local_id(0), S, u * (size_t)WG);
}

/* A chunk: the next BN_HOLD (16) values of the walk in slots 0 .. 15
 * (va[k] holds slots 4k .. 4k + 3), of a and, when two, of b at the same
 * places; zeros past m1.  Every load is issued before any is used (the
 * loop unrolls), so a work-item has 4 float4 or 16 floats in flight, not
 * one: a summing loop of one load per step left the H200 waiting on
 * memory.  vec: 4 steps of a float4 (LOAD4: one 16-byte access when the
 * host found every tensor aligned, RUMUS_ALIGN4), else 16 steps of one
 * element.  Returns the number of valid slots, a prefix of 0 .. 15. */
inline int bn_chunk(int vec, int two, global const real_t *a,
                    global const real_t *b, bn_walk *w, size_t m1, size_t C,
                    size_t c, size_t S, float4 *va, float4 *vb) {
  int nv = 0;
  if (vec) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int ok = w->m < m1;
      const size_t i = (w->n * C + c) * S + w->s;
      va[k] = ok ? LOAD4(a, i) : (float4)(0.0f);
      vb[k] = two && ok ? LOAD4(b, i) : (float4)(0.0f);
      nv += ok ? 4 : 0;
      bn_walk_next(w, S);
    }
    return nv;
  }
  float ta[16], tb[16];
#pragma unroll
  for (int e = 0; e < 16; e++) {
    const int ok = w->m < m1;
    const size_t i = (w->n * C + c) * S + w->s;
    ta[e] = ok ? LOAD(a, i) : 0.0f;
    tb[e] = two && ok ? LOAD(b, i) : 0.0f;
    nv += ok;
    bn_walk_next(w, S);
  }
#pragma unroll
  for (int k = 0; k < 4; k++) {
    va[k] = (float4)(ta[4 * k], ta[4 * k + 1], ta[4 * k + 2], ta[4 * k + 3]);
    vb[k] = (float4)(tb[4 * k], tb[4 * k + 1], tb[4 * k + 2], tb[4 * k + 3]);
  }
  return nv;
}

/* v with the slots 4k .. 4k + 3 at or past nv zeroed (the padding of a
 * chunk, where x - mean is not 0). */
inline float4 bn_valid(float4 v, int k, int nv) {
  const int4 i = (int4)(4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3);
  return select((float4)(0.0f), v, i < (int4)(nv));
}

/* Adds a chunk to the float4 sums of the mode (BN_DEV, BN_BWD about mc),
 * slot by slot in lanes, so the order is fixed. */
inline void bn_chunk_acc(int mode, const float4 *va, const float4 *vb, int nv,
                         float mc, float4 *a1, float4 *a2) {
#pragma unroll
  for (int k = 0; k < 4; k++) {
    if (mode == BN_SUM) {
      *a1 += va[k];
    } else if (mode == BN_DEV) {
      const float4 d = bn_valid(va[k] - mc, k, nv);
      *a1 += d;
      *a2 += d * d;
    } else {
      *a1 += va[k];
      *a2 += va[k] * bn_valid(vb[k] - mc, k, nv);
    }
  }
}

/* Work-group sums of two values in one tree (the order of rumus_wg_sum),
 * returned to every work-item (every work-item calls it: barriers). */
inline float2 bn_wg_sum2(local float *l1, local float *l2, float2 v) {
  const size_t lid = get_local_id(0);
  l1[lid] = v.x;
  l2[lid] = v.y;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = WG / 2; step > 0; step /= 2) {
    if (lid < step) {
      l1[lid] += l1[lid + step];
      l2[lid] += l2[lid + step];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return (float2)(l1[0], l2[0]);
}

/* Work-item lid's sums of a range, chunk after chunk (a work-group tree
 * adds them: bn_wg_sum2). */
inline float2 bn_item_sums(int mode, int vec, global const real_t *a,
                           global const real_t *b, bn_range r, size_t C,
                           size_t S) {
  float4 a1 = 0.0f, a2 = 0.0f, va[4], vb[4];
  bn_walk w;
  bn_walk_range(&w, r, S, vec);
  while (w.m < r.m1) {
    const int nv = bn_chunk(vec, mode == BN_BWD, a, b, &w, r.m1, C, r.c, S,
                            va, vb);
    bn_chunk_acc(mode, va, vb, nv, r.mc, &a1, &a2);
  }
  return (float2)(rumus_hsum4(a1), rumus_hsum4(a2));
}

/* Elements of range p (the last shorter). */
inline size_t bn_range_len(size_t p, size_t L, size_t M) {
  return min(L, M - p * L);
}

/* Stage 1 and stage 2 in one launch: group g (range g % parts of channel
 * c = g / parts) has its pair v; with several ranges it stores v at
 * part[2 g] and takes a ticket of channel c (status word RUMUS_STATUS_SETS
 * + c, rumus_last_group): 1 in every work-item of the group that finishes
 * the channel last (which then folds the channel's pairs, p ascending, so
 * the order depends on the shape only), or of the only group. */
inline int bn_wg_finish(global float *part, size_t g, size_t c,
                        size_t parts, float2 v, volatile global int *status,
                        local int *flag, int reset) {
  if (parts == 1) return 1;
  if (get_local_id(0) == 0) {
    volatile global float *pv = part;
    pv[2 * g] = v.x;
    pv[2 * g + 1] = v.y;
  }
  volatile global int *ticket = status + RUMUS_STATUS_SETS + c;
  if (!rumus_last_group(ticket, parts, flag)) return 0;
  if (reset) rumus_ticket_reset(ticket); /* else bn_publish takes it on */
  return 1;
}

/* The pair of range p of channel c, written by another group of this
 * launch (read from memory, not a stale cache). */
inline float2 bn_part_at(global float *part, size_t c, size_t parts,
                         size_t p) {
  volatile global float *pv = part + 2 * (c * parts + p);
  return (float2)(pv[0], pv[1]);
}

/* Channel c's sums (v itself with one range), in the last group: work-item
 * lid adds the pairs p = lid, lid + WG, ..., then a tree (every work-item
 * of the group calls it: barriers; ls1 and ls2 are free again after
 * bn_wg_finish's barrier). */
inline float2 bn_fold_sums(global float *part, size_t c, size_t parts,
                           float2 v, local float *ls1, local float *ls2) {
  if (parts == 1) return v;
  float2 s = 0.0f;
  for (size_t p = get_local_id(0); p < parts; p += WG)
    s += bn_part_at(part, c, parts, p);
  return bn_wg_sum2(ls1, ls2, s);
}

/* The arguments of every fused kernel: the reduced tensor a (and x as b,
 * the channel means), the float pairs (and the backward's coefficients)
 * in part, the shape, the ranges, and vec (S a multiple of 4: the walks
 * move float4s). */
#define BN_WG_ARGS                                                           \
  global const real_t *a, ulong a_off, global const real_t *b, ulong b_off,  \
      global float *mean, ulong mean_off, global float *part, ulong C,       \
      ulong S, ulong M, ulong L, ulong parts, int vec

/* Group g's channel c, range r (the channel's mean read for `mode`). */
#define BN_WG_HEAD(mode)                                                     \
  local float ls1[WG], ls2[WG], ls3[WG];                                     \
  local int flag;                                                            \
  const size_t g = get_group_id(0), np = (size_t)parts;                      \
  const size_t c = g / np;                                                   \
  bn_range r = bn_range_of(c, g - c * np, L, M, mean + (size_t)mean_off,    \
                           mode);                                            \
  global const real_t *pa = a + (size_t)a_off, *pb = b + (size_t)b_off

/* The channel bias gradient db[c] = sum of dy (a), db in tag T. */
#define BN_BIAS_WG_KERNEL(name, T)                                           \
  __kernel RUMUS_WG_ATTR void name(BN_WG_ARGS, global RUMUS_TYPE(T) *db,     \
                                   ulong db_off,                             \
                                   volatile global int *status) {            \
    BN_WG_HEAD(BN_SUM);                                                      \
    const float2 v = bn_wg_sum2(                                             \
        ls1, ls2, bn_item_sums(BN_SUM, vec, pa, pb, r, (size_t)C, (size_t)S));\
    if (!bn_wg_finish(part, g, c, np, v, status, &flag, 1)) return;          \
    const float2 s = bn_fold_sums(part, c, np, v, ls1, ls2);                 \
    if (get_local_id(0) == 0) RUMUS_STORE(T, s.x, db + (size_t)db_off, c);   \
  }
BN_BIAS_WG_KERNEL(bn_bias_wg, RUMUS_STORAGE)
BN_BIAS_WG_KERNEL(bn_bias_wg_f32, F32)

/* The training statistics of x (a): each group's range in two passes, its
 * mean mp and then its deviations about mp (s1 = sum d, s2 = sum d^2, d =
 * x - mp: the range's mean mp + s1 / n and M2 = s2 - s1^2 / n, as the
 * corrected two-pass variance); the last group of the channel merges the
 * ranges' (n, mean, M2): mean = sum n_p mean_p / M, M2 = sum M2_p + n_p
 * (mean_p - mean)^2 (exact in real arithmetic, no E[x^2] - E[x]^2
 * anywhere).  It writes the mean, invstd and (has_running) the running
 * statistics as bn_fold_var does.  A range of one chunk (BN_HOLD values a
 * work-item, the host's choice where it can) is read once into registers;
 * a longer one is read twice, the same sums in the same order. */
#ifndef BN_HOLD
#define BN_HOLD 16 /* values per work-item of a chunk (host: the same) */
#endif
#ifndef BN_CHUNKS
/* Chunks per work-item of a range held chunk by chunk (host: the same):
 * a range of WG BN_HOLD BN_CHUNKS values is read once. */
#define BN_CHUNKS 1
#endif

#ifndef BN_STATS_TREES
/* 1: a range held in registers takes the range's two passes (three
 * trees); 0: each work-item's two passes over its values, then one tree
 * merging (count, mean, M2) (RUMUS_BATCHNORM_STATS=trees on the host). */
#define BN_STATS_TREES 0
#endif

/* Merges (n, mean, M2) of slot b into slot a (Chan et al.'s pairwise
 * update; an empty b leaves a, an empty a takes b). */
inline void bn_chan_merge(local float *ln, local float *lm, local float *l2,
                          size_t a, size_t b) {
  const float na = ln[a], nb = ln[b], n = na + nb;
  if (nb == 0.0f) return;
  const float d = lm[b] - lm[a], f = nb / n;
  lm[a] = fma(d, f, lm[a]);
  l2[a] = fma(d * d, na * f, l2[a] + l2[b]);
  ln[a] = n;
}

/* A chunk's (count, mean, M2) (bn_chunk's slots, nv of them valid): two
 * passes over the registers. */
inline float3 bn_chunk_moments(const float4 *va, int nv) {
  float4 s = 0.0f, q = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; k++) s += va[k]; /* zeros past nv */
  const float n = (float)nv, m = nv > 0 ? rumus_hsum4(s) / n : 0.0f;
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const float4 d = bn_valid(va[k] - m, k, nv);
    q += d * d;
  }
  return (float3)(n, m, rumus_hsum4(q));
}

/* (count, mean, M2) of a and b together: bn_chan_merge in registers (an
 * empty a takes b exactly, so one chunk gives that chunk's moments). */
inline float3 bn_moments_merge(float3 a, float3 b) {
  const float n = a.x + b.x;
  if (b.x == 0.0f) return a;
  const float d = b.y - a.y, f = b.x / n;
  return (float3)(n, fma(d, f, a.y), fma(d * d, a.x * f, a.z + b.z));
}

/* The work-group's (mean, M2) of a range of at most WG BN_HOLD BN_CHUNKS
 * values: each work-item's chunks, each in two passes over registers and
 * merged in walk order, then a tree of bn_chan_merge (every work-item
 * calls it: barriers).  A range read once, in chunks of 16 KB per group:
 * on the H200 groups of one chunk spent their time in the tree.  Loading
 * every chunk before the first is used was slower there (88 -> 106 us at
 * 64x64x112 with 4 chunks). */
inline float2 bn_held_stats(int vec, global const real_t *x, bn_range r,
                            size_t C, size_t S, local float *ln,
                            local float *lm, local float *l2) {
  const size_t lid = get_local_id(0);
  bn_walk w;
  bn_walk_range(&w, r, S, vec);
  float3 acc = 0.0f;
  float4 va[4], vb[4];
  for (int j = 0; j < BN_CHUNKS && w.m < r.m1; j++) {
    const int nv = bn_chunk(vec, 0, x, x, &w, r.m1, C, r.c, S, va, vb);
    acc = bn_moments_merge(acc, bn_chunk_moments(va, nv));
  }
  ln[lid] = acc.x;
  lm[lid] = acc.y;
  l2[lid] = acc.z;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = WG / 2; step > 0; step /= 2) {
    if (lid < step) bn_chan_merge(ln, lm, l2, lid, lid + step);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return (float2)(lm[0], l2[0]);
}

inline float2 bn_range_stats(int vec, global const real_t *x, bn_range r,
                             size_t C, size_t S, local float *ls1,
                             local float *ls2, local float *ls3) {
  const float n = (float)(r.m1 - r.m0);
  float2 s;
  if (!BN_STATS_TREES && r.m1 - r.m0 <= (size_t)WG * BN_HOLD * BN_CHUNKS) {
    const float2 mm = bn_held_stats(vec, x, r, C, S, ls1, ls2, ls3);
    return (float2)(mm.x, mm.y < 0.0f ? 0.0f : mm.y);
  }
  /* Three buffers: each tree's result is read by every work-item while
   * the next tree may already be filling its own. */
  if (r.m1 - r.m0 > (size_t)WG * BN_HOLD) {
    rumus_wg_sum(ls1, bn_item_sums(BN_SUM, vec, x, x, r, C, S).x);
    r.mc = ls1[0] / n;
    s = bn_wg_sum2(ls2, ls3, bn_item_sums(BN_DEV, vec, x, x, r, C, S));
  } else {
    float4 va[4], vb[4], a1 = 0.0f, a2 = 0.0f, a0 = 0.0f;
    bn_walk w;
    bn_walk_range(&w, r, S, vec);
    const int nv = bn_chunk(vec, 0, x, x, &w, r.m1, C, r.c, S, va, vb);
    bn_chunk_acc(BN_SUM, va, vb, nv, 0.0f, &a0, &a0);
    rumus_wg_sum(ls1, rumus_hsum4(a0));
    r.mc = ls1[0] / n;
    bn_chunk_acc(BN_DEV, va, vb, nv, r.mc, &a1, &a2);
    s = bn_wg_sum2(ls2, ls3, (float2)(rumus_hsum4(a1), rumus_hsum4(a2)));
  }
  float m2 = s.y - s.x * (s.x / n);
  if (m2 < 0.0f) m2 = 0.0f; /* rounding; keeps a NaN */
  return (float2)(r.mc + s.x / n, m2);
}

/* Channel c's merged (mean, M2) from the ranges' pairs (v itself with one
 * range), in the last group: lanes over the ranges, two trees (every
 * work-item calls it). */
inline float2 bn_merge(global float *part, size_t c, size_t parts, size_t L,
                       size_t M, float2 v, local float *ls1,
                       local float *ls2) {
  if (parts == 1) return v;
  const size_t lid = get_local_id(0);
  float a = 0.0f, b = 0.0f;
  for (size_t p = lid; p < parts; p += WG)
    a += (float)bn_range_len(p, L, M) * bn_part_at(part, c, parts, p).x;
  rumus_wg_sum(ls1, a);
  const float mean = ls1[0] / (float)M;
  for (size_t p = lid; p < parts; p += WG) {
    const float2 q = bn_part_at(part, c, parts, p);
    const float d = q.x - mean;
    b += q.y + (float)bn_range_len(p, L, M) * d * d;
  }
  rumus_wg_sum(ls2, b);
  return (float2)(mean, ls2[0]);
}

/* Channel c's statistics from the merged (mean, M2): the mean, invstd and
 * (has_running) the running statistics, at channel c's elements. */
inline void bn_stats_store(float2 mm, ulong M, float eps, float momentum,
                           global float *mean, global float *invstd,
                           int has_running, global float *rm,
                           global float *rv) {
  const float fm = (float)M, var = mm.y / fm;
  *mean = mm.x;
  *invstd = 1.0f / sqrt(var + eps);
  if (has_running) {
    const float unbiased = var * (fm / (float)(M - 1));
    *rm = (1.0f - momentum) * *rm + momentum * mm.x;
    *rv = (1.0f - momentum) * *rv + momentum * unbiased;
  }
}

/* The arguments of the statistics after BN_WG_ARGS. */
#define BN_STATS_ARGS                                                        \
  float eps, float momentum, global float *invstd, ulong inv_off,            \
      int has_running, global float *rmean, ulong rm_off, global float *rvar, \
      ulong rv_off

/* The local memory of a task (OpenCL wants it at kernel scope). */
#define BN_TASK_LOCALS                                                       \
  local float ls1[WG], ls2[WG], ls3[WG];                                     \
  local int flag

/* Statistics task j (channel c = j / parts, range j % parts): returns from
 * every group but the channel's last, which writes the channel's results
 * in work-item 0 (the others return); reset: put the ticket back. */
#define BN_STATS_TASK(j, reset)                                              \
  const size_t np = (size_t)parts, c = (j) / np;                             \
  const bn_range r = bn_range_of(c, (j) - c * np, L, M,                      \
                                 mean + (size_t)mean_off, BN_SUM);           \
  const float2 v = bn_range_stats(vec, a + (size_t)a_off, r, (size_t)C,      \
                                  (size_t)S, ls1, ls2, ls3);                 \
  if (!bn_wg_finish(part, (j), c, np, v, status, &flag, reset)) return;      \
  const float2 mm =                                                          \
      bn_merge(part, c, np, (size_t)L, (size_t)M, v, ls1, ls2);              \
  if (get_local_id(0) != 0) return;                                          \
  bn_stats_store(mm, M, eps, momentum, mean + (size_t)mean_off + c,          \
                 invstd + (size_t)inv_off + c, has_running,                  \
                 rmean + (size_t)rm_off + c, rvar + (size_t)rv_off + c)

__kernel RUMUS_WG_ATTR void bn_stats_wg(BN_WG_ARGS, BN_STATS_ARGS,
                                        volatile global int *status) {
  BN_TASK_LOCALS;
  BN_STATS_TASK(get_group_id(0), 1);
}

/* The backward's sums of dy (a) and x (b) about the saved mean, then what
 * bn_fold_bwd writes: dbeta, dgamma and dx's coefficients at part +
 * coef_at. */
#define BN_BWD_ARGS                                                          \
  global const float *invstd, ulong inv_off, ulong coef_at, int has_dgamma,  \
      global float *dgamma, ulong dg_off, int has_dbeta, global float *dbeta, \
      ulong db_off

/* Backward task j, as BN_STATS_TASK. */
#define BN_BWD_TASK(j, reset)                                                \
  const size_t np = (size_t)parts, c = (j) / np;                             \
  const bn_range r = bn_range_of(c, (j) - c * np, L, M,                      \
                                 mean + (size_t)mean_off, BN_BWD);           \
  const float2 v = bn_wg_sum2(                                               \
      ls1, ls2,                                                              \
      bn_item_sums(BN_BWD, vec, a + (size_t)a_off, b + (size_t)b_off, r,     \
                   (size_t)C, (size_t)S));                                   \
  if (!bn_wg_finish(part, (j), c, np, v, status, &flag, reset)) return;      \
  const float2 s = bn_fold_sums(part, c, np, v, ls1, ls2);                   \
  if (get_local_id(0) != 0) return;                                          \
  const float is = invstd[(size_t)inv_off + c], fm = (float)M;               \
  if (has_dbeta) dbeta[(size_t)db_off + c] = s.x;                            \
  if (has_dgamma) dgamma[(size_t)dg_off + c] = s.y * is;                     \
  global float *kc = part + (size_t)coef_at + 2 * c;                         \
  kc[0] = s.x / fm;                                                          \
  kc[1] = (s.y * is) * is / fm

__kernel RUMUS_WG_ATTR void bn_bwd_wg(BN_WG_ARGS, BN_BWD_ARGS,
                                      volatile global int *status) {
  BN_TASK_LOCALS;
  BN_BWD_TASK(get_group_id(0), 1);
}

#else /* the CPU variant */

/* A work-item's sums: 4 float8 chains of each sum (a chain of one add
 * per 8 values bound the passes that read from the cache, bn_fwd_chan's
 * second: 3-4 cycles of latency per 8 values) and the scalar tails. */
typedef struct {
  float8 s1[4], s2[4];
  float t1, t2;
} bn_acc;

inline void bn_acc_init(bn_acc *acc) {
#pragma unroll
  for (int u = 0; u < 4; u++) acc->s1[u] = acc->s2[u] = 0.0f;
  acc->t1 = acc->t2 = 0.0f;
}

/* The two sums: chains (0 + 1) + (2 + 3), then the lanes, then the tail. */
inline float2 bn_acc_total(const bn_acc *acc) {
  return (float2)(
      rumus_hsum8((acc->s1[0] + acc->s1[1]) + (acc->s1[2] + acc->s1[3])) +
          acc->t1,
      rumus_hsum8((acc->s2[0] + acc->s2[1]) + (acc->s2[2] + acc->s2[3])) +
          acc->t2);
}

/* Adds the 8 values at i to chain u. */
inline void bn_acc8(int mode, global const real_t *a, global const real_t *b,
                    size_t i, float mc, bn_acc *acc, int u) {
  if (mode == BN_SUM) {
    acc->s1[u] += LOAD8(a, i);
  } else if (mode == BN_DEV) {
    const float8 d = LOAD8(a, i) - mc;
    acc->s1[u] += d;
    acc->s2[u] += d * d;
  } else {
    const float8 g = LOAD8(a, i);
    acc->s1[u] += g;
    acc->s2[u] += g * (LOAD8(b, i) - mc);
  }
}

/* The sums of one row segment [i0, i0 + len): 32 values at a time over the
 * 4 chains, then 8 at a time into chain 0, then the scalar tail. */
inline void bn_seg_sums(int mode, global const real_t *a,
                        global const real_t *b, size_t i0, size_t len,
                        float mc, bn_acc *acc) {
  size_t j = 0;
  for (; j + 32 <= len; j += 32) {
#pragma unroll
    for (int u = 0; u < 4; u++)
      bn_acc8(mode, a, b, i0 + j + 8 * (size_t)u, mc, acc, u);
  }
  for (; j + 8 <= len; j += 8) bn_acc8(mode, a, b, i0 + j, mc, acc, 0);
  for (; j < len; j++) BN_ACC(mode, a, b, i0 + j, mc, acc->t1, acc->t2);
}

/* Global parts * C (padded), one work-item per (channel, range). */
#define BN_ITEM_KERNEL(name, mode)                                           \
  __kernel void name(global const real_t *a, ulong a_off,                    \
                     global const real_t *b, ulong b_off,                    \
                     global const float *mean, ulong mean_off,               \
                     global float *part, ulong C, ulong S, ulong M, ulong L, \
                     ulong parts) {                                          \
    const size_t g = get_global_id(0);                                       \
    if (g >= (size_t)parts * (size_t)C) return;                              \
    const bn_range r = bn_range_of(g / (size_t)parts, g % (size_t)parts, L,  \
                                   M, mean + (size_t)mean_off, mode);        \
    global const real_t *pa = a + (size_t)a_off, *pb = b + (size_t)b_off;    \
    bn_acc acc;                                                              \
    bn_acc_init(&acc);                                                       \
    for (size_t m = r.m0; m < r.m1;) {                                       \
      const size_t n = m / (size_t)S, s = m - n * (size_t)S;                 \
      const size_t len = min((size_t)S - s, r.m1 - m);                       \
      bn_seg_sums(mode, pa, pb, (n * (size_t)C + r.c) * (size_t)S + s, len,  \
                  r.mc, &acc);                                               \
      m += len;                                                              \
    }                                                                        \
    vstore2(bn_acc_total(&acc), g, part);                                    \
  }
BN_ITEM_KERNEL(bn_sum_item, BN_SUM)
BN_ITEM_KERNEL(bn_dev_item, BN_DEV)
BN_ITEM_KERNEL(bn_bwd_item, BN_BWD)
#endif

/* ---- Stage 2: one work-item per channel --------------------------------- */

/* The channel's two sums, ranges added in order. */
inline float2 bn_fold(global const float *part, size_t c, size_t parts) {
  float2 s = 0.0f;
  global const float2 *q = (global const float2 *)part + c * parts;
  for (size_t p = 0; p < parts; p++) s += q[p];
  return s;
}

#define BN_FOLD_HEAD                                                         \
  const size_t c = get_global_id(0);                                         \
  if (c >= (size_t)C) return;                                                \
  const float2 s = bn_fold(part, c, (size_t)parts)

/* db[c] = s1, in tag T (the storage, or F32). */
#define BN_FOLD_BIAS_KERNEL(name, T)                                         \
  __kernel RUMUS_REQD_WG(BN_FOLD_LS, 1, 1) void name(                        \
      global const float *part, ulong parts, ulong C,                        \
      global RUMUS_TYPE(T) *db, ulong db_off) {                              \
    BN_FOLD_HEAD;                                                            \
    RUMUS_STORE(T, s.x, db + (size_t)db_off, c);                             \
  }
BN_FOLD_BIAS_KERNEL(bn_fold_bias, RUMUS_STORAGE)
BN_FOLD_BIAS_KERNEL(bn_fold_bias_f32, F32)

/* mean[c] = s1 / M. */
__kernel RUMUS_REQD_WG(BN_FOLD_LS, 1, 1) void bn_fold_mean(
    global const float *part, ulong parts, ulong C, ulong M,
    global float *mean, ulong mean_off) {
  BN_FOLD_HEAD;
  mean[(size_t)mean_off + c] = s.x / (float)M;
}

/* From the dev sums about the first pass's mean m0: the mean m0 + s1 / M
 * (s1 holds the rounding error of m0's float sums, so this is the mean to
 * about the precision of the deviations, written back), the biased
 * variance, invstd, and (has_running) the running statistics r = (1 - m)
 * r + m stat, with the unbiased variance var * M / (M - 1) for
 * running_var (M >= 2: the host refuses M < 2).
 * The correction s1^2 / M cannot make the variance negative in exact
 * arithmetic; the clamp keeps rounding from doing so (and keeps a NaN,
 * which fmax would not). */
/* Channel c's statistics from its dev sums s about the mean *mp of the
 * first pass (bn_fold_var, bn_fwd_chan): the mean (written back), invstd
 * and (has_running) the running statistics.  Returns the mean. */
inline float bn_var_store(float2 s, ulong M, float eps, float momentum,
                          global float *mp, global float *ip,
                          int has_running, global float *rm,
                          global float *rv) {
  const float fm = (float)M;
  float var = (s.y - s.x * (s.x / fm)) / fm;
  if (var < 0.0f) var = 0.0f;
  const float mc = *mp + s.x / fm;
  *mp = mc;
  *ip = 1.0f / sqrt(var + eps);
  if (has_running) {
    const float unbiased = var * (fm / (float)(M - 1));
    *rm = (1.0f - momentum) * *rm + momentum * mc;
    *rv = (1.0f - momentum) * *rv + momentum * unbiased;
  }
  return mc;
}

__kernel RUMUS_REQD_WG(BN_FOLD_LS, 1, 1) void bn_fold_var(
    global const float *part, ulong parts, ulong C, ulong M, float eps,
    float momentum, global float *mean, ulong mean_off,
    global float *invstd, ulong inv_off, int has_running,
    global float *rmean, ulong rm_off, global float *rvar, ulong rv_off) {
  BN_FOLD_HEAD;
  bn_var_store(s, M, eps, momentum, mean + (size_t)mean_off + c,
               invstd + (size_t)inv_off + c, has_running,
               rmean + (size_t)rm_off + c, rvar + (size_t)rv_off + c);
}

/* The backward's dbeta = s1 and dgamma = s2 * invstd (each if wanted),
 * and the coefficients of dx: coef[2c] = s1 / M, coef[2c + 1] =
 * s2 invstd^2 / M. */
/* The backward's dbeta = s1 and dgamma = s2 * invstd (each if wanted)
 * from channel c's sums s (bn_fold_bwd, bn_bwd_chan); returns the
 * coefficients of dx: (s1 / M, s2 invstd^2 / M). */
inline float2 bn_bwd_coef(float2 s, float is, ulong M, int has_dgamma,
                          global float *dg, int has_dbeta,
                          global float *db) {
  const float fm = (float)M;
  if (has_dbeta) *db = s.x;
  if (has_dgamma) *dg = s.y * is;
  return (float2)(s.x / fm, (s.y * is) * is / fm);
}

__kernel RUMUS_REQD_WG(BN_FOLD_LS, 1, 1) void bn_fold_bwd(
    global const float *part, ulong parts, ulong C, ulong M,
    global const float *invstd, ulong inv_off, global float *coef,
    ulong coef_off, int has_dgamma, global float *dgamma, ulong dg_off, int has_dbeta,
    global float *dbeta, ulong db_off) {
  BN_FOLD_HEAD;
  const float2 k = bn_bwd_coef(s, invstd[(size_t)inv_off + c], M, has_dgamma,
                               dgamma + (size_t)dg_off + c, has_dbeta,
                               dbeta + (size_t)db_off + c);
  vstore2(k, c, coef + (size_t)coef_off);
}

/* ---- Maps --------------------------------------------------------------- */

/* The maps, and their per-channel coefficients k: out = map(x, dy, k). */
#define BN_ADD 0  /* x + k.x                                  (bias add) */
#define BN_NORM 1 /* (x - k.x) * k.y + k.z     (k: mean, invstd gamma, beta) */
#define BN_GRAD 2 /* (dy - k.z - (x - k.x) * k.w) * k.y       (batch norm dx) */
#define BN_MAP(mode, xv, gv, k)                                              \
  ((mode) == BN_ADD ? (xv) + (k).x                                           \
   : (mode) == BN_NORM ? ((xv) - (k).x) * (k).y + (k).z                       \
                       : ((gv) - (k).z - ((xv) - (k).x) * (k).w) * (k).y)

/* The S elements of plane (n, c) from `base`: work-item block c0 of
 * BN_SPAN, whole vectors then a scalar tail.  out may be x or dy (each
 * element is read before it is written). */
inline void bn_map_span(int mode, global const real_t *x,
                        global const real_t *dy, global real_t *out,
                        size_t base, size_t c0, size_t S, float4 k) {
  const size_t end = min(c0 + (size_t)BN_SPAN, S);
  size_t j = c0;
  for (; j + BN_VW <= end; j += BN_VW) {
    const bn_vec xv = BN_LOADV(x, base + j);
    const bn_vec gv = mode == BN_GRAD ? BN_LOADV(dy, base + j) : xv;
    BN_STOREV(BN_MAP(mode, xv, gv, k), out, base + j);
  }
  for (; j < end; j++) {
    const float xv = LOAD(x, base + j);
    const float gv = mode == BN_GRAD ? LOAD(dy, base + j) : xv;
    STORE(BN_MAP(mode, xv, gv, k), out, base + j);
  }
}

/* a % b and a / b, in 32 bits when both fit (GPUs emulate 64-bit
 * division). */
inline size_t bn_mod(size_t a, size_t b) {
  return ((a | b) >> 32) == 0 ? (size_t)((uint)a % (uint)b) : a % b;
}
inline size_t bn_div(size_t a, size_t b) {
  return ((a | b) >> 32) == 0 ? (size_t)((uint)a / (uint)b) : a / b;
}

/* Work-item (block, plane): c0, the plane q = q0 + get_global_id(1), its
 * channel and first element; returns from the padding work-items.  flat
 * (GPU, S a multiple of BN_SPAN): a 1-D launch over the blocks of planes
 * q0 on, block g at plane q0 + g BN_SPAN / S (no padding per plane: rows
 * of 14 x 14 left a quarter of the 2-D launch's work-items idle). */
#define BN_MAP_HEAD                                                          \
  size_t c0 = get_global_id(0) * (size_t)BN_SPAN;                            \
  size_t q = (size_t)q0 + get_global_id(1);                                  \
  if (flat) {                                                                \
    const size_t qf_ = bn_div(c0, (size_t)S);                                \
    c0 -= qf_ * (size_t)S;                                                   \
    q += qf_;                                                                \
  }                                                                          \
  if (c0 >= (size_t)S || q >= (size_t)planes) return;                       \
  const size_t c = bn_mod(q, (size_t)C), base = q * (size_t)S

/* y = x + bias[c], bias in tag T. */
#define BN_APPLY_BIAS_KERNEL(name, T)                                        \
  __kernel void name(global const real_t *x, ulong x_off, global real_t *y,  \
                     ulong y_off, global const RUMUS_TYPE(T) *bias,          \
                     ulong b_off, ulong C, ulong S, ulong planes, ulong q0,   \
                     int flat) {                                             \
    BN_MAP_HEAD;                                                             \
    const float4 k =                                                         \
        (float4)(RUMUS_LOAD(T, bias + (size_t)b_off, c), 0.0f, 0.0f, 0.0f);  \
    bn_map_span(BN_ADD, x + (size_t)x_off, x + (size_t)x_off,                \
                y + (size_t)y_off, base, c0, (size_t)S, k);                  \
  }
BN_APPLY_BIAS_KERNEL(bn_apply_bias, RUMUS_STORAGE)
BN_APPLY_BIAS_KERNEL(bn_apply_bias_f32, F32)

/* y = (x - mean) * invstd * gamma + beta, with gamma 1 and beta 0 where
 * not given; stat_is_var: stat holds the running variance (eval: invstd
 * = 1 / sqrt(var + eps)), otherwise the saved invstd. */
__kernel void bn_apply_fwd(global const real_t *x, ulong x_off,
                           global real_t *y, ulong y_off,
                           global const float *mean, ulong mean_off,
                           global const float *stat, ulong stat_off,
                           int stat_is_var, float eps, int has_gamma,
                           global const float *gamma, ulong g_off,
                           int has_beta, global const float *beta,
                           ulong b_off, ulong C, ulong S, ulong planes,
                           ulong q0, int flat) {
  BN_MAP_HEAD;
  const float st = stat[(size_t)stat_off + c];
  const float is = stat_is_var ? 1.0f / sqrt(st + eps) : st;
  const float ga = has_gamma ? gamma[(size_t)g_off + c] : 1.0f;
  const float be = has_beta ? beta[(size_t)b_off + c] : 0.0f;
  const float4 k = (float4)(mean[(size_t)mean_off + c], is * ga, be, 0.0f);
  bn_map_span(BN_NORM, x + (size_t)x_off, x + (size_t)x_off, y + (size_t)y_off,
              base, c0, (size_t)S, k);
}

/* dx = (dy - coef[2c] - (x - mean) * coef[2c + 1]) * gamma * invstd,
 * gamma 1 where not given. */
__kernel void bn_apply_bwd(global const real_t *x, ulong x_off,
                           global const real_t *dy, ulong dy_off,
                           global real_t *dx, ulong dx_off,
                           global const float *mean, ulong mean_off,
                           global const float *invstd, ulong inv_off,
                           int has_gamma, global const float *gamma,
                           ulong g_off, global const float *coef,
                           ulong coef_off, ulong C, ulong S, ulong planes,
                           ulong q0, int flat) {
  BN_MAP_HEAD;
  const float ga = has_gamma ? gamma[(size_t)g_off + c] : 1.0f;
  global const float *kc = coef + (size_t)coef_off + 2 * c;
  const float4 k = (float4)(mean[(size_t)mean_off + c],
                            ga * invstd[(size_t)inv_off + c], kc[0], kc[1]);
  bn_map_span(BN_GRAD, x + (size_t)x_off, dy + (size_t)dy_off,
              dx + (size_t)dx_off, base, c0, (size_t)S, k);
}

/* ---- GPU: statistics and map in one launch ------------------------------
 * bn_fwd_one (training forward) and bn_bwd_one (backward) run a channel's
 * reduction and then its map in one launch, the map of each range re-read
 * soon after its statistics read it (mostly from the L2 cache on a GPU):
 * G = C parts reduction tasks (as bn_stats_wg, bn_bwd_wg) and G map tasks
 * (map task j maps the range of reduction task j).  A group draws its
 * position q in the launch (an atomic counter: the order groups start in)
 * and takes task bn_task_of(q): the reduction tasks in order, each map
 * task `lag` positions after the reduction task of its range (lag >= parts,
 * so after every reduction task of its channel).  A map task waits until
 * its channel's last reduction group has published (bn_publish); it waits
 * only on groups that drew earlier positions, so started and running: no
 * deadlock however few groups run at once.  The sums are those of the
 * two-launch kernels, so the bits too. */
#if BN_GPU
#define BN_DONE (1 << 30) /* ticket of a published channel (> any count) */

/* Task of position q of 2G with the lag k: 1 for a map task; *j its
 * index. */
inline int bn_task_of(size_t q, size_t G, size_t lag, size_t *j) {
  const size_t k = min(lag, G);
  if (q < k) {
    *j = q;
    return 0;
  }
  if (q < 2 * G - k) { /* alternating: reduction k + r / 2, map r / 2 */
    const size_t r = q - k;
    *j = (r & 1) ? r / 2 : k + r / 2;
    return (int)(r & 1);
  }
  *j = q - G;
  return 1;
}

/* The group's position among the launch's `total` groups (work-item 0
 * draws; the last to draw puts the word back to 0 for the next launch). */
inline size_t bn_draw(volatile global int *status, size_t total,
                      local uint *q) {
  if (get_local_id(0) == 0) {
    volatile global int *w = status + RUMUS_STATUS_TICKET;
    const uint v = (uint)atomic_inc(w);
    if ((size_t)v == total - 1) atomic_xchg(w, 0);
    *q = v;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return *q;
}

/* Work-item 0 of channel c's last reduction group, after writing the
 * channel's results: the map tasks may start. */
inline void bn_publish(volatile global int *status, size_t c) {
  rumus_device_fence();
  atomic_xchg(status + RUMUS_STATUS_SETS + c, BN_DONE);
}

/* A map task: waits for channel c's results (every work-item calls it). */
inline void bn_wait(volatile global int *status, size_t c) {
  if (get_local_id(0) == 0) {
    volatile global int *t = status + RUMUS_STATUS_SETS + c;
    while (*t < BN_DONE)
      ;
    rumus_device_fence();
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
}

/* A map task's end (work-item 0): the channel's last map task puts the
 * ticket back to 0. */
inline void bn_mapped(volatile global int *status, size_t c, size_t parts) {
  if (get_local_id(0) != 0) return;
  volatile global int *t = status + RUMUS_STATUS_SETS + c;
  if (atomic_inc(t) == BN_DONE + (int)(parts - 1)) atomic_xchg(t, 0);
}

/* Stores a chunk (bn_chunk's slots) at the walk's places before m1. */
inline void bn_chunk_store(int vec, global real_t *y, bn_walk *w, size_t m1,
                           size_t C, size_t c, size_t S, const float4 *v) {
  if (vec) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
      if (w->m < m1) STORE4(v[k], y, (w->n * C + c) * S + w->s);
      bn_walk_next(w, S);
    }
    return;
  }
  float t[16];
#pragma unroll
  for (int k = 0; k < 4; k++) {
    t[4 * k] = v[k].x;
    t[4 * k + 1] = v[k].y;
    t[4 * k + 2] = v[k].z;
    t[4 * k + 3] = v[k].w;
  }
#pragma unroll
  for (int e = 0; e < 16; e++) {
    if (w->m < m1) STORE(t[e], y, (w->n * C + c) * S + w->s);
    bn_walk_next(w, S);
  }
}

/* A map task's first chunk of x (va) and dy (vb, BN_GRAD), loaded before
 * it waits for its channel: the loads are in flight meanwhile, and a
 * small launch loses one memory round trip after the wait.  w continues
 * the walk, ws (the stores') starts where w did. */
inline void bn_map_first(int mode, int vec, global const real_t *x,
                         global const real_t *dy, bn_range r, size_t C,
                         size_t S, bn_walk *w, bn_walk *ws, float4 *va,
                         float4 *vb) {
  bn_walk_range(w, r, S, vec);
  *ws = *w;
  bn_chunk(vec, mode == BN_GRAD, x, dy, w, r.m1, C, r.c, S, va, vb);
}

/* The rest of the map of range r: out = BN_MAP(mode, x, dy, k), chunk by
 * chunk (each element read before it is written: out may be x or dy). */
inline void bn_map_range(int mode, int vec, global const real_t *x,
                         global const real_t *dy, global real_t *out,
                         bn_range r, size_t C, size_t S, float4 k,
                         bn_walk *w, bn_walk *ws, float4 *va, float4 *vb) {
  for (;;) {
#pragma unroll
    for (int i = 0; i < 4; i++) va[i] = BN_MAP(mode, va[i], vb[i], k);
    bn_chunk_store(vec, out, ws, r.m1, C, r.c, S, va);
    if (w->m >= r.m1) return;
    bn_chunk(vec, mode == BN_GRAD, x, dy, w, r.m1, C, r.c, S, va, vb);
  }
}

/* Position, task, the map task's range mr of channel mc_, its walks and
 * chunk. */
#define BN_ONE_HEAD                                                          \
  BN_TASK_LOCALS;                                                            \
  local uint q_;                                                             \
  bn_walk w, ws;                                                             \
  float4 va[4], vb[4];                                                       \
  const size_t G = (size_t)C * (size_t)parts;                                \
  size_t j;                                                                  \
  const int map = bn_task_of(bn_draw(status, 2 * G, &q_), G, (size_t)lag,    \
                             &j);                                            \
  const size_t mc_ = j / (size_t)parts;                                      \
  const bn_range mr = bn_range_of(mc_, j - mc_ * (size_t)parts, L, M, mean,  \
                                  BN_SUM)

/* The training forward: bn_stats_wg's tasks, then y = (x - mean) invstd
 * gamma + beta (gamma 1, beta 0 where not given) as bn_apply_fwd. */
__kernel RUMUS_WG_ATTR void bn_fwd_one(
    BN_WG_ARGS, BN_STATS_ARGS, global real_t *y, ulong y_off, int has_gamma,
    global const float *gamma, ulong g_off, int has_beta,
    global const float *beta, ulong be_off, ulong lag,
    volatile global int *status) {
  BN_ONE_HEAD;
  if (!map) {
    BN_STATS_TASK(j, 0);
    bn_publish(status, c);
    return;
  }
  global const real_t *px = a + (size_t)a_off;
  bn_map_first(BN_NORM, vec, px, px, mr, (size_t)C, (size_t)S, &w, &ws, va,
               vb);
  bn_wait(status, mc_);
  volatile global float *vm = mean + (size_t)mean_off + mc_;
  volatile global float *vi = invstd + (size_t)inv_off + mc_;
  const float ga = has_gamma ? gamma[(size_t)g_off + mc_] : 1.0f;
  const float be = has_beta ? beta[(size_t)be_off + mc_] : 0.0f;
  const float4 k = (float4)(*vm, *vi * ga, be, 0.0f);
  bn_map_range(BN_NORM, vec, px, px, y + (size_t)y_off, mr, (size_t)C,
               (size_t)S, k, &w, &ws, va, vb);
  bn_mapped(status, mc_, (size_t)parts);
}

/* The backward: bn_bwd_wg's tasks, then dx = (dy - coef[2c] - (x - mean)
 * coef[2c + 1]) gamma invstd as bn_apply_bwd (dy is a, x is b). */
__kernel RUMUS_WG_ATTR void bn_bwd_one(
    BN_WG_ARGS, BN_BWD_ARGS, global real_t *dx, ulong dx_off, int has_gamma,
    global const float *gamma, ulong g_off, ulong lag,
    volatile global int *status) {
  BN_ONE_HEAD;
  if (!map) {
    BN_BWD_TASK(j, 0);
    bn_publish(status, c);
    return;
  }
  global const real_t *px = b + (size_t)b_off, *pg = a + (size_t)a_off;
  bn_map_first(BN_GRAD, vec, px, pg, mr, (size_t)C, (size_t)S, &w, &ws, va,
               vb);
  bn_wait(status, mc_);
  volatile global float *kc = part + (size_t)coef_at + 2 * mc_;
  const float ga = has_gamma ? gamma[(size_t)g_off + mc_] : 1.0f;
  const float4 k =
      (float4)(mean[(size_t)mean_off + mc_],
               ga * invstd[(size_t)inv_off + mc_], kc[0], kc[1]);
  bn_map_range(BN_GRAD, vec, px, pg, dx + (size_t)dx_off, mr, (size_t)C,
               (size_t)S, k, &w, &ws, va, vb);
  bn_mapped(status, mc_, (size_t)parts);
}
#endif

/* ---- CPU: a channel per work-item ---------------------------------------
 * bn_fwd_chan (training forward) and bn_bwd_chan (backward) take channel c
 * whole in one work-item: its sums plane by plane (bn_seg_sums, the order
 * of the bn_*_item kernels with one range per channel, so the same bits
 * as the two-stage path then), its statistics or coefficients (the folds'
 * arithmetic), then its map (bn_map_span's).  The passes after the first
 * re-read a channel that the first brought into the cache (a channel of
 * 32 x 56 x 56 floats is 392 KiB, in a core's L2), where the two-stage
 * path's passes each sweep every channel from memory.  The host takes it
 * when there are enough channels to keep every core busy.  The map's
 * stores stream past the cache where the host asks (nt, bn_chan_map). */
#if !BN_GPU
/* Channel c's sums of the mode over its N planes of S (a: the reduced
 * tensor or dy, b: x for BN_BWD; about mc for BN_DEV and BN_BWD). */
inline float2 bn_chan_sums(int mode, global const real_t *a,
                           global const real_t *b, size_t c, size_t C,
                           size_t S, size_t N, float mc) {
  bn_acc acc;
  bn_acc_init(&acc);
  for (size_t n = 0; n < N; n++)
    bn_seg_sums(mode, a, b, (n * C + c) * S, S, mc, &acc);
  return bn_acc_total(&acc);
}

/* Streaming (non-temporal) stores of the per-channel maps (nt, the
 * host's choice: an output larger than the caches, every plane of it
 * 8-element aligned, F32 or BF16 storage): a plain store first reads its
 * line from memory (64 bytes read for 64 written), and the output,
 * written once and not read again by this kernel, pushes the channel's
 * inputs out of the core's cache, from where the pass that writes it
 * re-reads them.  Clang for x86 (PoCL) only; elsewhere, and for F16,
 * plain stores. */
#if defined(__clang__) && defined(__x86_64__) && defined(__has_builtin)
#if __has_builtin(__builtin_nontemporal_store) && \
    __has_builtin(__builtin_ia32_sfence)
#define BN_NT_OK 1
#endif
#endif
#ifndef BN_NT_OK
#define BN_NT_OK 0
#endif

#if BN_NT_OK
#define BN_NTS_F32(v, p, i)                                                  \
  __builtin_nontemporal_store((v), (global float8 *)((p) + (i)))
#define BN_NTS_BF16(v, p, i)                                                 \
  __builtin_nontemporal_store(rumus_f_to_bf168(v),                           \
                              (global ushort8 *)((p) + (i)))
#define BN_NTS_F16(v, p, i) STORE8(v, p, i)
/* Stores 8 elements at p + i (8-element aligned), streaming. */
#define BN_NT_STORE8(v, p, i) RUMUS_CAT(BN_NTS_, RUMUS_STORAGE)(v, p, i)

/* bn_map_span's map of the S elements of plane `base`, 8 at a time with
 * streaming stores (the same arithmetic, so the same bits). */
inline void bn_map_plane_nt(int mode, global const real_t *x,
                            global const real_t *dy, global real_t *out,
                            size_t base, size_t S, float4 k) {
  size_t j = 0;
  for (; j + 8 <= S; j += 8) {
    const float8 xv = LOAD8(x, base + j);
    const float8 gv = mode == BN_GRAD ? LOAD8(dy, base + j) : xv;
    BN_NT_STORE8(BN_MAP(mode, xv, gv, k), out, base + j);
  }
  for (; j < S; j++) { /* none: the host streams only when 8 divide S */
    const float xv = LOAD(x, base + j);
    const float gv = mode == BN_GRAD ? LOAD(dy, base + j) : xv;
    STORE(BN_MAP(mode, xv, gv, k), out, base + j);
  }
}
#endif

/* Channel c's map over its N planes (out may be x or dy); nt: streaming
 * stores (bn_map_plane_nt), fenced before the work-item ends (streaming
 * stores are weakly ordered). */
inline void bn_chan_map(int mode, global const real_t *x,
                        global const real_t *dy, global real_t *out,
                        size_t c, size_t C, size_t S, size_t N, float4 k,
                        int nt) {
#if BN_NT_OK
  if (nt) {
    for (size_t n = 0; n < N; n++)
      bn_map_plane_nt(mode, x, dy, out, (n * C + c) * S, S, k);
    __builtin_ia32_sfence();
    return;
  }
#endif
  for (size_t n = 0; n < N; n++)
    for (size_t c0 = 0; c0 < S; c0 += BN_SPAN)
      bn_map_span(mode, x, dy, out, (n * C + c) * S, c0, S, k);
}

/* The training forward: mean, then the deviations (two passes, as
 * bn_fold_mean and bn_fold_var), then y = (x - mean) invstd gamma + beta
 * (gamma 1, beta 0 where not given) as bn_apply_fwd.  y may be x.  nt:
 * streaming stores of y (bn_chan_map). */
__kernel void bn_fwd_chan(global const real_t *x, ulong x_off,
                          global real_t *y, ulong y_off, ulong C, ulong S,
                          ulong N, float eps, float momentum,
                          global float *mean, ulong mean_off,
                          global float *invstd, ulong inv_off,
                          int has_running, global float *rmean, ulong rm_off,
                          global float *rvar, ulong rv_off, int has_gamma,
                          global const float *gamma, ulong g_off,
                          int has_beta, global const float *beta,
                          ulong b_off, int nt) {
  const size_t c = get_global_id(0);
  if (c >= (size_t)C) return;
  global const real_t *px = x + (size_t)x_off;
  global float *mp = mean + (size_t)mean_off + c;
  global float *ip = invstd + (size_t)inv_off + c;
  *mp = bn_chan_sums(BN_SUM, px, px, c, C, S, N, 0.0f).x / (float)(N * S);
  const float2 s = bn_chan_sums(BN_DEV, px, px, c, C, S, N, *mp);
  const float mc = bn_var_store(s, N * S, eps, momentum, mp, ip, has_running,
                                rmean + (size_t)rm_off + c,
                                rvar + (size_t)rv_off + c);
  const float ga = has_gamma ? gamma[(size_t)g_off + c] : 1.0f;
  const float be = has_beta ? beta[(size_t)b_off + c] : 0.0f;
  bn_chan_map(BN_NORM, px, px, y + (size_t)y_off, c, C, S, N,
              (float4)(mc, *ip * ga, be, 0.0f), nt);
}

/* The backward: the sums of dy and dy (x - mean), dgamma and dbeta (as
 * bn_fold_bwd), then dx as bn_apply_bwd.  dx may be dy.  nt: streaming
 * stores of dx (bn_chan_map). */
__kernel void bn_bwd_chan(global const real_t *dy, ulong dy_off,
                          global const real_t *x, ulong x_off,
                          global real_t *dx, ulong dx_off, ulong C, ulong S,
                          ulong N, global const float *mean, ulong mean_off,
                          global const float *invstd, ulong inv_off,
                          int has_gamma, global const float *gamma,
                          ulong g_off, int has_dgamma, global float *dgamma,
                          ulong dg_off, int has_dbeta, global float *dbeta,
                          ulong db_off, int nt) {
  const size_t c = get_global_id(0);
  if (c >= (size_t)C) return;
  global const real_t *pg = dy + (size_t)dy_off, *px = x + (size_t)x_off;
  const float mc = mean[(size_t)mean_off + c];
  const float is = invstd[(size_t)inv_off + c];
  const float2 s = bn_chan_sums(BN_BWD, pg, px, c, C, S, N, mc);
  const float2 k = bn_bwd_coef(s, is, N * S, has_dgamma,
                               dgamma + (size_t)dg_off + c, has_dbeta,
                               dbeta + (size_t)db_off + c);
  const float ga = has_gamma ? gamma[(size_t)g_off + c] : 1.0f;
  bn_chan_map(BN_GRAD, px, pg, dx + (size_t)dx_off, c, C, S, N,
              (float4)(mc, ga * is, k.x, k.y), nt);
}
#endif
