/*
 * optim.cl - optimizer steps (torch.optim.SGD, Adam, AdamW), sum of squares
 * and gradient-norm clipping (torch.nn.utils.clip_grad_norm_, norm 2).
 * Every tensor is a flat run of n elements starting at element `off` of its
 * buffer; the state buffers (momentum, m, v) have the parameter's layout.
 *
 * Storage: the parameter and its state are RUMUS_STORAGE (real_t), the
 * gradient RUMUS_STORAGE_G (grad_t) and the copy of the updated parameter
 * that a step may write RUMUS_STORAGE_COPY (copy_t); each is F32, F16 or
 * BF16, arithmetic is float.  The sum of squares and clip_scale read
 * RUMUS_STORAGE (the host builds them with every tag set to the
 * gradient's type).
 *
 * Loss scaling (the steps): the gradient is read as g * inv_scale, and
 * with STEP_SKIP in `mode` the step writes nothing unless skip[0] (a total
 * norm or sum of squares of the gradients) is finite.
 *
 * Element-wise kernels (sgd_step, adam_step, clip_scale)
 *   SGD:   d = g + wd p;  with momentum: b = d (first step) or
 *          b = mom b + (1 - damp) d;  d = d + mom b (Nesterov) or d = b;
 *          p = p - lr d
 *   Adam:  Adam: g = g + wd p;  AdamW: p = p (1 - lr wd);
 *          m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2 (as
 *          ((1 - b2) g) g where g^2 overflows);
 *          p = p - step_size m / (sqrt(v) / sqrt(bc2) + eps)
 *          (step_size = lr / bc1 and sqrt(bc2) come from the host, where
 *          they are computed in double)
 *   clip:  g = g * c, c read from device memory; c == 1 leaves g untouched.
 *   Index scheme: vectors of 8 elements; work-group grp covers EW_ITEMS *
 *   EW_WG consecutive vectors, work-item lid takes vectors
 *   (grp * EW_ITEMS + k) * EW_WG + lid for k < EW_ITEMS (neighbouring
 *   work-items touch neighbouring vectors).  A vector that runs past n is
 *   loaded and stored element by element (the scalar tail); vectors at or
 *   past n are skipped, so the padded global size is harmless.
 *
 * Sum of squares (deterministic, fixed order, float partial sums)
 *   Stage 1 writes one partial per chunk of `chunk` consecutive elements
 *   into a float scratch array part[p_off ...]:
 *     *_row  one work-item per chunk, no barriers: blocks of SQ_BLOCK
 *            elements are summed into a float8, block sums are added into a
 *            float8 running sum, the lanes are folded pairwise (CPU path).
 *     *_wg   one work-group per chunk: work-item lid sums the float4 groups
 *            lid, lid + WG, ... of the chunk, then a tree in local memory
 *            (GPU path).
 *   Stage 2 (one work-item, or one work-group of WG) sums the P partials by
 *   a pairwise tree (level s adds part[i + s] into part[i] for every i that
 *   is a multiple of 2s), so the order is fixed by P alone; the work-group
 *   runs it in local memory when P <= SQ_LOCAL, in place otherwise.
 *     sumsq_final:  acc[0] += sum
 *     sumsq_wg:     both stages in one launch (GPU path of sum_squares):
 *                   the last work-group to finish runs stage 2
 *                   (rumus_last_group in common.cl), same tree, same bits.
 *     clip_final:   total = sqrt(sum); c = max_norm / (total + 1e-6),
 *                   clamped to at most 1 (NaN stays NaN, as torch.clamp);
 *                   part[P] = c for clip_scale; total into total_norm if
 *                   has_total.
 *   Error of a sum of squares (all terms >= 0): at most about
 *   (SQ_BLOCK / 8 + chunk / SQ_BLOCK + 3 + log2 P) * 2^-24 relative for the
 *   row variant, and (chunk / (4 WG) + 2 + log2 WG + log2 P) * 2^-24 for the
 *   work-group variant, i.e. a few 1e-6 for the host's chunk sizes.
 */

#ifndef EW_WG
#define EW_WG 256 /* work-group size of the element-wise kernels */
#endif
#ifndef EW_ITEMS
#define EW_ITEMS 1 /* 8-element vectors per work-item in element-wise kernels */
#endif
#ifndef SQ_BLOCK
#define SQ_BLOCK 256 /* elements per inner block of sumsq_partial_row */
#endif
#ifndef SQ_LOCAL
#define SQ_LOCAL 2048 /* partials the _wg finals sum in local memory */
#endif
#ifndef RUMUS_STORAGE_G
#define RUMUS_STORAGE_G RUMUS_STORAGE /* the steps' gradient */
#endif
#ifndef RUMUS_STORAGE_COPY
#define RUMUS_STORAGE_COPY RUMUS_STORAGE /* the steps' parameter copy */
#endif

typedef RUMUS_TYPE(RUMUS_STORAGE_G) grad_t;
typedef RUMUS_TYPE(RUMUS_STORAGE_COPY) copy_t;

/* ---- 8-element vectors with a scalar tail -------------------------------- */

/* The per-vector helpers of the steps are inlined: PoCL kept adam_vec a
 * call per work-item (registers saved, the stack realigned and every
 * hyper-parameter broadcast again per 8 elements); inlined, the work-group
 * loop keeps them in registers (F16 AdamW at 2^24: perf samples in the
 * kernel down about a quarter on the CI machine).  GPU compilers inline
 * them anyway. */
#define OPTIM_INLINE inline __attribute__((always_inline))

/* ld8_T(x, i, cnt, aligned): cnt (1..8) elements of tag T from x + i;
 * missing lanes are 0.  st8_T(v, x, i, cnt, aligned): the first cnt lanes
 * of v into x + i.  With `aligned` set (the host found every tensor's
 * element offset a multiple of 8: rumus__aligned) whole vectors are typed
 * accesses at an address aligned to the vector, which GPU compilers turn
 * into wide memory instructions; vload8 may only assume the alignment of
 * one element.  A vector that runs past n goes element by element. */
#define OPTIM_DEFINE_LD8(name, T)                                             \
  OPTIM_INLINE float8 name(global const RUMUS_TYPE(T) *x, size_t i,          \
                           size_t cnt, int aligned) {                         \
    if (cnt == 8)                                                             \
      return aligned ? RUMUS_LOADA(T, 8, x, i) : RUMUS_LOADN(T, 8, x, i);     \
    float t[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};            \
    for (size_t j = 0; j < cnt; j++) t[j] = RUMUS_LOAD(T, x, i + j);          \
    return vload8(0, t);                                                      \
  }
#define OPTIM_DEFINE_ST8(name, T)                                             \
  OPTIM_INLINE void name(float8 v, global RUMUS_TYPE(T) *x, size_t i,        \
                         size_t cnt, int aligned) {                           \
    if (cnt == 8) {                                                           \
      if (aligned)                                                            \
        RUMUS_STOREA(T, 8, v, x, i);                                          \
      else                                                                    \
        RUMUS_STOREN(T, 8, v, x, i);                                          \
      return;                                                                 \
    }                                                                         \
    float t[8];                                                               \
    vstore8(v, 0, t);                                                         \
    for (size_t j = 0; j < cnt; j++) RUMUS_STORE(T, t[j], x, i + j);          \
  }
OPTIM_DEFINE_LD8(ld8, RUMUS_STORAGE)
OPTIM_DEFINE_ST8(st8, RUMUS_STORAGE)
OPTIM_DEFINE_LD8(ld8_g, RUMUS_STORAGE_G)
OPTIM_DEFINE_ST8(st8_copy, RUMUS_STORAGE_COPY)

/* Element index of vector k of this work-item (see the banner). */
inline size_t ew_index(size_t k) {
  return (((size_t)get_group_id(0) * EW_ITEMS + k) * EW_WG +
          (size_t)get_local_id(0)) * 8;
}

/* ---- SGD ------------------------------------------------------------------ */

/* mode bits of the steps */
#define SGD_MOMENTUM 1 /* a momentum buffer is used */
#define SGD_FIRST 2    /* first step: the buffer is set to d */
#define SGD_NESTEROV 4
#define STEP_COPY 8    /* the updated parameter is stored into c as well */
#define STEP_SKIP 16   /* nothing is written unless skip[0] is finite */

/* 0 when the step is skipped: STEP_SKIP and a non-finite skip[0].  Every
 * work-item reads the one float (on a GPU one broadcast load). */
inline int step_runs(global const float *skip, int mode) {
  return !(mode & STEP_SKIP) || isfinite(skip[0]);
}

/* The gradient as the step uses it: g * inv_scale (not multiplied when
 * inv_scale is 1, so unscaled steps are the same arithmetic as before). */
OPTIM_INLINE float8 ld8_grad(global const grad_t *g, size_t i, size_t cnt,
                             int al, float inv_scale) {
  const float8 gv = ld8_g(g, i, cnt, al);
  return inv_scale != 1.0f ? gv * inv_scale : gv;
}

/* Stores the updated parameter and, with STEP_COPY, its copy. */
OPTIM_INLINE void st8_param(float8 np, global real_t *p, global copy_t *c,
                            size_t i, size_t cnt, int al, int mode) {
  st8(np, p, i, cnt, al);
  if (mode & STEP_COPY) st8_copy(np, c, i, cnt, al);
}

OPTIM_INLINE void sgd_vec(global real_t *p, global const grad_t *g,
                          global real_t *b, global copy_t *c, size_t i,
                          size_t cnt, int al, float inv_scale, float lr,
                          float mom, float damp1, float wd, int mode) {
  float8 pv = ld8(p, i, cnt, al), d = ld8_grad(g, i, cnt, al, inv_scale);
  if (wd != 0.0f) d += wd * pv;
  if (mode & SGD_MOMENTUM) {
    float8 bv = (mode & SGD_FIRST) ? d : mom * ld8(b, i, cnt, al) + damp1 * d;
    st8(bv, b, i, cnt, al);
    d = (mode & SGD_NESTEROV) ? d + mom * bv : bv;
  }
  st8_param(pv - lr * d, p, c, i, cnt, al, mode);
}

/* b, c and skip may be any valid buffers when mode lacks SGD_MOMENTUM,
 * STEP_COPY, STEP_SKIP (never touched).  damp1 = 1 - dampening; al: every
 * offset is a multiple of 8 elements. */
__kernel RUMUS_REQD_WG(EW_WG, 1, 1)
void sgd_step(global real_t *p, ulong p_off,
              global const grad_t *g, ulong g_off,
              global real_t *b, ulong b_off,
              global copy_t *c, ulong c_off,
              global const float *skip, ulong s_off, ulong n,
              int al, float inv_scale, float lr, float mom, float damp1,
              float wd, int mode) {
  if (!step_runs(skip + s_off, mode)) return;
  for (size_t k = 0; k < EW_ITEMS; k++) {
    const size_t i = ew_index(k);
    if (i >= n) return;
    const size_t cnt = min((size_t)8, (size_t)n - i);
    sgd_vec(p + p_off, g + g_off, b + b_off, c + c_off, i, cnt, al,
            inv_scale, lr, mom, damp1, wd, mode);
  }
}

/* ---- Adam / AdamW --------------------------------------------------------- */

/* The hyper-parameters of a step: l2: weight decay added to the gradient
 * (Adam), 0 for AdamW; decay: the AdamW factor 1 - lr wd, 1 for Adam;
 * omb1 = 1 - b1, omb2 = 1 - b2. */
typedef struct {
  float inv_scale, l2, decay, b1, omb1, b2, omb2, step_size, bc2_sqrt, eps;
} adam_hp;

OPTIM_INLINE void adam_vec(global real_t *p, global const grad_t *g,
                           global real_t *m, global real_t *v,
                           global copy_t *c, size_t i, size_t cnt, int al,
                           const adam_hp *h, int mode) {
  float8 pv = ld8(p, i, cnt, al), gv = ld8_grad(g, i, cnt, al, h->inv_scale);
  if (h->l2 != 0.0f) gv += h->l2 * pv;
  if (h->decay != 1.0f) pv *= h->decay;
  const float8 mv = h->b1 * ld8(m, i, cnt, al) + h->omb1 * gv;
  /* omb2 (g g), unless g g overflows where (omb2 g) g, as PyTorch's
   * addcmul computes it, is still finite: the same bits wherever g g is
   * finite. */
  const float8 gg = gv * gv;
  const float8 tv = select(h->omb2 * gg, (h->omb2 * gv) * gv, isinf(gg));
  const float8 vv = h->b2 * ld8(v, i, cnt, al) + tv;
  st8(mv, m, i, cnt, al);
  st8(vv, v, i, cnt, al);
  const float8 denom = sqrt(vv) / h->bc2_sqrt + h->eps;
  st8_param(pv - h->step_size * (mv / denom), p, c, i, cnt, al, mode);
}

/* c and skip as in sgd_step; mode: STEP_COPY, STEP_SKIP. */
__kernel RUMUS_REQD_WG(EW_WG, 1, 1)
void adam_step(global real_t *p, ulong p_off,
               global const grad_t *g, ulong g_off,
               global real_t *m, ulong m_off,
               global real_t *v, ulong v_off,
               global copy_t *c, ulong c_off,
               global const float *skip, ulong s_off, ulong n,
               int al, float inv_scale, float l2, float decay, float b1,
               float omb1, float b2, float omb2, float step_size,
               float bc2_sqrt, float eps, int mode) {
  if (!step_runs(skip + s_off, mode)) return;
  const adam_hp h = {inv_scale, l2,   decay,     b1,       omb1,
                     b2,        omb2, step_size, bc2_sqrt, eps};
  for (size_t k = 0; k < EW_ITEMS; k++) {
    const size_t i = ew_index(k);
    if (i >= n) return;
    const size_t cnt = min((size_t)8, (size_t)n - i);
    adam_vec(p + p_off, g + g_off, m + m_off, v + v_off, c + c_off, i, cnt,
             al, &h, mode);
  }
}

/* ---- Gradient scaling by a device-side coefficient ------------------------ */

__kernel RUMUS_REQD_WG(EW_WG, 1, 1)
void clip_scale(global real_t *g, ulong g_off, ulong n,
                int al, global const float *coef,
                ulong c_off) {
  const float c = coef[c_off];
  if (c == 1.0f) return; /* no clipping: gradients stay bit for bit */
  for (size_t k = 0; k < EW_ITEMS; k++) {
    const size_t i = ew_index(k);
    if (i >= n) return;
    const size_t cnt = min((size_t)8, (size_t)n - i);
    st8(ld8(g + g_off, i, cnt, al) * c, g + g_off, i, cnt, al);
  }
}

/* ---- Sum of squares, stage 1: partial sums --------------------------------- */

/* Sum of squares of x[0 .. len) in one work-item. */
inline float sumsq_range(global const real_t *x, size_t len) {
  float8 acc = 0.0f;
  size_t j = 0;
  for (; j + SQ_BLOCK <= len; j += SQ_BLOCK) {
    float8 b0 = 0.0f, b1 = 0.0f; /* two chains for more adds in flight */
    for (size_t k = 0; k < SQ_BLOCK; k += 16) {
      const float8 t0 = LOAD8(x, j + k), t1 = LOAD8(x, j + k + 8);
      b0 += t0 * t0;
      b1 += t1 * t1;
    }
    acc += b0 + b1;
  }
  float8 blk = 0.0f;
  for (; j + 8 <= len; j += 8) {
    const float8 t = LOAD8(x, j);
    blk += t * t;
  }
  float tail = 0.0f;
  for (; j < len; j++) {
    const float t = LOAD(x, j);
    tail += t * t;
  }
  return rumus_hsum8(acc + blk) + tail;
}

__kernel void sumsq_partial_row(global const real_t *x, ulong x_off, ulong n,
                                ulong chunk, global float *part,
                                ulong p_off) {
  const size_t c = get_global_id(0);
  const size_t start = c * (size_t)chunk;
  if (start >= n) return;
  const size_t len = min((size_t)chunk, (size_t)n - start);
  part[p_off + c] = sumsq_range(x + x_off + start, len);
}

/* The sum of squares of chunk c = group id (elements [c chunk, (c + 1)
 * chunk) of x[0 .. n)), in ls[0] after the call; every work-item calls it
 * (barriers), groups past n sum nothing. */
inline void sumsq_chunk_wg(global const real_t *x, size_t n, size_t chunk,
                           local float *ls) {
  const size_t lid = get_local_id(0), c = get_group_id(0);
  const size_t start = c * chunk;
  const size_t len = start < n ? min(chunk, n - start) : 0;
  global const real_t *xs = x + (start < n ? start : 0);
  const size_t n4 = len / 4;
  /* Two chains: twice the loads in flight per work-item. */
  float4 a4 = 0.0f, b4 = 0.0f;
  size_t q = lid;
  for (; q + WG < n4; q += 2 * WG) {
    const float4 t = LOAD4(xs, q * 4), u = LOAD4(xs, (q + WG) * 4);
    a4 += t * t;
    b4 += u * u;
  }
  if (q < n4) {
    const float4 t = LOAD4(xs, q * 4);
    a4 += t * t;
  }
  float a = rumus_hsum4(a4 + b4);
  for (size_t j = n4 * 4 + lid; j < len; j += WG) {
    const float t = LOAD(xs, j);
    a += t * t;
  }
  rumus_wg_sum(ls, a);
}

__kernel RUMUS_WG_ATTR void sumsq_partial_wg(global const real_t *x,
                                             ulong x_off, ulong n, ulong chunk,
                                             global float *part, ulong p_off) {
  local float ls[WG];
  const size_t c = get_group_id(0);
  sumsq_chunk_wg(x + x_off, (size_t)n, (size_t)chunk, ls);
  if (get_local_id(0) == 0 && c * (size_t)chunk < n) part[p_off + c] = ls[0];
}

/* ---- Stage 2: the fixed pairwise tree over the partials -------------------- */

/* One level of the tree: work-item `first` of `nt` adds s[i + stride] into
 * s[i] for i = 2 stride (first + t nt), t = 0, 1, ... */
inline void tree_level(volatile global float *s, size_t P, size_t stride,
                       size_t first, size_t nt) {
  for (size_t i = 2 * stride * first; i + stride < P; i += 2 * stride * nt)
    s[i] += s[i + stride];
}

inline void tree_level_local(local float *s, size_t P, size_t stride,
                             size_t first, size_t nt) {
  for (size_t i = 2 * stride * first; i + stride < P; i += 2 * stride * nt)
    s[i] += s[i + stride];
}

/* The sum of s[0 .. P) by the pairwise tree, in one work-group (every
 * work-item calls it).  Up to SQ_LOCAL partials are copied to local memory
 * first, so the levels need only local barriers; more are summed in place
 * in global memory.  Either way the additions are the same. */
inline float tree_sum_wg(volatile global float *s, size_t P, local float *ls) {
  const size_t lid = get_local_id(0);
  if (P <= SQ_LOCAL) {
    for (size_t i = lid; i < P; i += WG) ls[i] = s[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t stride = 1; stride < P; stride *= 2) {
      tree_level_local(ls, P, stride, lid, WG);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    return P ? ls[0] : 0.0f;
  }
  for (size_t stride = 1; stride < P; stride *= 2) {
    tree_level(s, P, stride, lid, WG);
    barrier(CLK_GLOBAL_MEM_FENCE);
  }
  return s[0];
}

/* total = sqrt(sum); s[P] = min(1, max_norm / (total + 1e-6)); the float
 * arithmetic of torch.nn.utils.clip_grad_norm_. */
inline void clip_finish(float sum, global float *s, size_t P, float max_norm,
                        global float *tn, ulong tn_off, int has_total) {
  const float total = sqrt(sum);
  float c = max_norm / (total + 1e-6f);
  if (c > 1.0f) c = 1.0f;
  s[P] = c;
  if (has_total) tn[tn_off] = total;
}

__kernel void sumsq_final_row(global float *part, ulong p_off, ulong P,
                              global float *acc, ulong acc_off) {
  if (get_global_id(0) != 0) return;
  global float *s = part + p_off;
  for (size_t stride = 1; stride < P; stride *= 2) tree_level(s, P, stride, 0, 1);
  if (P) acc[acc_off] += s[0];
}

/* The host launches one work-group of the _wg finals. */
__kernel RUMUS_WG_ATTR void sumsq_final_wg(global float *part, ulong p_off,
                                           ulong P, global float *acc,
                                           ulong acc_off) {
  local float ls[SQ_LOCAL];
  const float sum = tree_sum_wg(part + p_off, P, ls);
  if (get_local_id(0) == 0 && P) acc[acc_off] += sum;
}

/* Both stages in one launch (GPU path of rumus_sum_squares): every group
 * writes its chunk's partial, and the last one to finish sums the
 * num_groups partials by the same pairwise tree as sumsq_final_wg (same
 * bits) into acc.  status: the context's status buffer (its ticket word). */
__kernel RUMUS_WG_ATTR void sumsq_wg(global const real_t *x, ulong x_off,
                                     ulong n, ulong chunk, global float *part,
                                     ulong p_off, global float *acc,
                                     ulong acc_off,
                                     volatile global int *status) {
  local float ls[SQ_LOCAL];
  local int last;
  volatile global int *ticket = status + RUMUS_STATUS_TICKET;
  volatile global float *pv = part + (size_t)p_off;
  sumsq_chunk_wg(x + x_off, (size_t)n, (size_t)chunk, ls);
  if (get_local_id(0) == 0) pv[get_group_id(0)] = ls[0];
  if (!rumus_last_group(ticket, get_num_groups(0), &last)) return;
  /* ls[0] was read above by work-item 0 only, before its barrier. */
  const float sum = tree_sum_wg(pv, get_num_groups(0), ls);
  if (get_local_id(0) == 0) acc[acc_off] += sum;
  rumus_ticket_reset(ticket);
}

__kernel void clip_final_row(global float *part, ulong p_off, ulong P,
                             float max_norm, global float *tn, ulong tn_off,
                             int has_total) {
  if (get_global_id(0) != 0) return;
  global float *s = part + p_off;
  for (size_t stride = 1; stride < P; stride *= 2) tree_level(s, P, stride, 0, 1);
  clip_finish(P ? s[0] : 0.0f, s, P, max_norm, tn, tn_off, has_total);
}

__kernel RUMUS_WG_ATTR void clip_final_wg(global float *part, ulong p_off,
                                          ulong P, float max_norm,
                                          global float *tn, ulong tn_off,
                                          int has_total) {
  local float ls[SQ_LOCAL];
  const float sum = tree_sum_wg(part + p_off, P, ls);
  if (get_local_id(0) == 0)
    clip_finish(P ? sum : 0.0f, part + p_off, P, max_norm, tn, tn_off,
                has_total);
}
