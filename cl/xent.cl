/*
 * xent.cl - fused cross-entropy over the last dimension with int32 class
 * targets: loss, gradient and the reduction of the losses, on the device.
 *
 * Layout: logits [..., C] are `rows` rows of `cols` = C contiguous elements
 * (row r starts at element x_off + r * cols); targets, per-row losses and
 * the gradient follow the same row order (grad has the logits' layout).
 * Every tensor arrives as (buffer, ulong element offset); index math is
 * size_t.  `row0` is the first row of this launch in the whole tensor (the
 * host launches huge tensors in chunks), used only in error reports.
 *
 * Math, per row with target t and smoothing s (one pass over the logits for
 * the log-sum-exp, one more for the gradient):
 *   m     = max_j x[j]
 *   S     = sum_j exp(x[j] - m)
 *   d     = sum_j (m - x[j])            (every term >= 0: no cancellation)
 *   loss  = (1 - s) * ((m - x[t]) + log S) + s * (d / C + log S)
 *           that is (1 - s)(lse - x[t]) + s(lse - mean_j x[j]) without ever
 *           forming lse = m + log S, whose rounding would eat the low bits of
 *           large logits; the s term is left out when s == 0, so -INFINITY
 *           entries give no 0 * inf
 *   grad  = (exp(x[j] - m) / S - (1 - s) [j == t] - s / C) * scale
 *           scale = grad_scale / count (MEAN) or grad_scale
 * A row whose target is ignore_index has loss 0 and gradient 0.  A target
 * outside [0, C) that is not ignore_index is never used as an index: the
 * row gets loss NaN and gradient 0, and rumus_report() records the code
 * DEVERR_XENT_TARGET, the target and its row in the context's status word.
 * An all -INFINITY row gives NaN (exp(-inf - -inf)), as in PyTorch.
 *
 * Storage: the logits and the gradient have the program's RUMUS_STORAGE
 * (F32, F16 or BF16); the losses the kernels write (lrow: the per-row
 * losses; xent_sum's loss) have RUMUS_STORAGE_LOSS, F32 or the logits'
 * type.  When the losses are reduced, the per-row losses and the partials
 * are float scratch (the row program's RUMUS_STORAGE_LOSS is then F32) and
 * only the reduced loss is rounded to its type.  Every sum is float, and
 * each output is rounded to its type once: the F32 _row kernels keep
 * exp(x - m) in the gradient between passes 2 and 3, the 16-bit ones in
 * local memory as floats for rows of up to XENT_LOCAL_ROW elements, and
 * for longer rows read the logits again in pass 3 and recompute it
 * (XENT_STAGE_IN_G 0).
 *
 * The work-group kernels (_wgc, _wg, _wgl) move a row in groups of
 * RUMUS_RV elements (rumus_rv in common.cl): float4, or 8 elements (16
 * bytes) where the host found 16-bit tensors 8-element aligned.
 *
 * Kernels:
 *   xent_fwd_row, xent_fwd_bwd_row (CPU path)
 *       ROW_RUN consecutive rows per work-item, no barriers, float8
 *       accumulators; pass 1 finds the max (for a run's first row; later
 *       rows get it from the pass 2 before), pass 2 (from cache) sums
 *       exp(x - m) (float8: rumus_exp_shifted8 of common.cl) and m - x,
 *       reads the next row for its max, and
 *       stores exp(x - m) in the gradient, pass 3 scales the gradient in
 *       place (from cache): one exp per element (F32; 16-bit storage
 *       recomputes it in pass 3, see Storage).
 *   xent_fwd_wgc, xent_fwd_bwd_wgc (GPU path, rows of at most
 *   4 * WG * CACHE_V4 elements)
 *       `rt` work-items per row (a power of two dividing WG, a kernel
 *       argument), WG / rt rows per work-group (work-item lid takes row
 *       group * (WG / rt) + lid / rt, lane lid % rt); lane i holds the
 *       groups i, i + rt, ... of its row in registers (4 * CACHE_V4
 *       elements), so the logits are read once and the loss and gradient are
 *       written from registers; segmented tree reductions in local memory
 *       give the max, then S (and d, in the same tree, with smoothing).
 *       Short rows share a work-group and its barriers.  Rows past `rows`
 *       in the last work-group load and store nothing but meet the
 *       barriers.
 *   xent_fwd_wg, xent_fwd_bwd_wg (GPU path, longer rows)
 *       one work-group of WG work-items per row; work-item i takes the
 *       groups i, i + WG, ... with an online (max, sum) pair, then a
 *       tree reduction in local memory; a second strided pass, backwards
 *       (the row's end may still be in the cache), sums m - x and writes
 *       the gradient, and a second tree reduction gives d.
 *   xent_fwd_wgl, xent_fwd_bwd_wgl
 *       for rows of at most XENT_LOCAL_FLOATS elements: the first pass
 *       keeps the row in local memory (as floats, whatever the storage)
 *       and finds the max, so the logits are read from global memory
 *       once; the second sums exp(x - m) and m - x (one tree for both)
 *       and keeps exp(x - m) for the third, which writes the gradient
 *       (one exp per element, no online rescaling).
 *       The host picks them when there is a second pass: with a gradient
 *       or with smoothing.
 *   xent_count
 *       count of rows whose target is not ignore_index (the MEAN's
 *       denominator), before the gradient is written: partial counts per
 *       work-group; the last group to finish adds them into cnt[nparts].
 *   xent_sum
 *       the reduced loss: work-group g adds the per-row losses
 *       [g * SPAN, (g + 1) * SPAN), SPAN = WG * RED_ITEMS, each work-item
 *       RED_ITEMS of them strided by WG, then a tree; the last group to
 *       finish adds the partials (work-item i takes i, i + WG, ...) and
 *       divides by the count for MEAN.  The order depends only on WG and
 *       RED_ITEMS: the result is the same bits on every run, for any batch
 *       size.
 */

#ifndef DEVERR_XENT_TARGET
#define DEVERR_XENT_TARGET 1 /* the host passes RUMUS__DEVERR_XENT_TARGET */
#endif

#ifndef XENT_LOCAL_FLOATS
#define XENT_LOCAL_FLOATS 8192 /* row cache of the _wgl kernels (0: none) */
#endif

#ifndef RUMUS_STORAGE_LOSS
#define RUMUS_STORAGE_LOSS F32 /* the losses written: F32 or RUMUS_STORAGE */
#endif
typedef RUMUS_TYPE(RUMUS_STORAGE_LOSS) loss_t;
#define LOSS_STORE(v, p, i) RUMUS_STORE(RUMUS_STORAGE_LOSS, v, p, i)

/* 1 where the _row kernels may keep exp(x - m) in the gradient between
 * passes (a float gradient: no rounding there). */
#define XENT_STAGE_F32 1
#define XENT_STAGE_F16 0
#define XENT_STAGE_BF16 0
#define XENT_STAGE_IN_G RUMUS_CAT(XENT_STAGE_, RUMUS_STORAGE)

#ifndef XENT_LOCAL_ROW
/* The longest row (elements) whose exps the 16-bit _row kernels keep in
 * local memory, as floats, between pass 2 and the gradient's pass 3,
 * instead of computing them again there (0: none); each work-item of a
 * group of up to XENT_ROW_LS_MAX has its own XENT_LOCAL_ROW floats. */
#define XENT_LOCAL_ROW 0
#endif
#define XENT_ROW_LS_MAX 8 /* rumus__row_local's largest local size */

#ifndef ROW_RUN
#define ROW_RUN 8 /* rows per work-item of the _row kernels */
#endif

#ifndef RED_ITEMS
#define RED_ITEMS 8 /* losses or targets per work-item in a first stage */
#endif

#define SPAN ((size_t)WG * RED_ITEMS)

/* What a row's target asks for. */
#define XENT_VALID 0
#define XENT_IGNORED 1
#define XENT_BAD 2    /* out of range: NaN loss, zero gradient, report */
#define XENT_NO_ROW 3 /* a work-item past the last row: touches nothing */

inline int xent_kind(int t, int ignore_index, size_t cols) {
  if (t == ignore_index) return XENT_IGNORED;
  if (t < 0 || (size_t)t >= cols) return XENT_BAD;
  return XENT_VALID;
}

/* The loss of a valid row from m, log S, x[t] and d (see the banner). */
inline float xent_loss(float m, float log_s, float xt, float d, float inv_c,
                       float smooth) {
  float loss = (1.0f - smooth) * ((m - xt) + log_s);
  if (smooth > 0.0f) loss += smooth * (d * inv_c + log_s);
  return loss;
}

/* The loss of any row kind: xent_loss for a valid row, 0 for an ignored
 * one, NaN for a bad target. */
inline float xent_kind_loss(int kind, float m, float S, float xt, float d,
                            size_t n, float smooth) {
  if (kind == XENT_VALID)
    return xent_loss(m, log(S), xt, d, 1.0f / (float)n, smooth);
  return kind == XENT_IGNORED ? 0.0f : NAN;
}

inline float xent_scale(global const uint *cnt, int mean, float grad_scale) {
  return mean ? grad_scale / (float)cnt[0] : grad_scale;
}

/* ---- Row variant (ROW_RUN rows per work-item) --------------------------- */

inline float xent_row_max(global const real_t *x, size_t n) {
  float8 m8 = (float8)(-INFINITY);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) m8 = fmax(m8, LOAD8(x, j));
  float m = rumus_hmax8(m8);
  for (; j < n; j++) m = fmax(m, LOAD(x, j));
  return m;
}

/* A valid row whose max m is known.  Pass 2 sums S and d; with a float
 * gradient, g holds exp(x - m) until S is known (one exp per element; a
 * 16-bit one is computed from x again in pass 3); pass 2 also takes
 * the max of the row at xn into *m_next (the next row of the work-item, so
 * that its reads overlap the exp work; xn == x when there is none).  x[t]
 * is read first, so that g may even alias the logits (the next row is read
 * before it is written).  A NaN entry makes S NaN (fmax skipped it). */
inline float xent_row_body(global const real_t *x, size_t n, int t, float m,
                           float smooth, float scale, global real_t *g,
                           int with_grad, global const real_t *xn,
                           float *m_next, local float *stage) {
  size_t j;
#if XENT_STAGE_IN_G
  (void)stage;
#else
  /* 16-bit: rows that fit keep exp(x - m) in this work-item's local
   * floats for pass 3 (the same values; on PoCL the second exp per element
   * took most of the time). */
  const int staged = with_grad && n <= (size_t)XENT_LOCAL_ROW;
#endif
  const float xt = LOAD(x, t);
  float8 s8 = 0.0f, d8 = 0.0f, mn8 = (float8)(-INFINITY);
  float s = 0.0f, d = 0.0f, mn = -INFINITY;
  for (j = 0; j + 8 <= n; j += 8) {
    const float8 v = LOAD8(x, j), e = rumus_exp_shifted8(v - m);
    s8 += e;
    d8 += m - v;
#if XENT_STAGE_IN_G
    if (with_grad) STORE8(e, g, j);
#else
    if (staged) vstore8(e, 0, stage + j);
#endif
    mn8 = fmax(mn8, LOAD8(xn, j));
  }
  for (; j < n; j++) {
    const float v = LOAD(x, j), e = exp(v - m);
    s += e;
    d += m - v;
#if XENT_STAGE_IN_G
    if (with_grad) STORE(e, g, j);
#else
    if (staged) stage[j] = e;
#endif
    mn = fmax(mn, LOAD(xn, j));
  }
  *m_next = fmax(rumus_hmax8(mn8), mn);
  s += rumus_hsum8(s8);
  d += rumus_hsum8(d8);
  const float log_s = log(s), inv_c = 1.0f / (float)n;
  if (with_grad) {
    /* Pass 3 (over g, or x for 16-bit storage, in cache): the gradient;
     * then the target's entry again, by the same work-item. */
    const float inv = 1.0f / s, sub = smooth * inv_c;
#if XENT_STAGE_IN_G
    for (j = 0; j + 8 <= n; j += 8) STORE8((LOAD8(g, j) * inv - sub) * scale, g, j);
    for (; j < n; j++) STORE((LOAD(g, j) * inv - sub) * scale, g, j);
#else
    if (staged) {
      for (j = 0; j + 8 <= n; j += 8)
        STORE8((vload8(0, stage + j) * inv - sub) * scale, g, j);
      for (; j < n; j++) STORE((stage[j] * inv - sub) * scale, g, j);
    } else {
      for (j = 0; j + 8 <= n; j += 8) {
        const float8 e = rumus_exp_shifted8(LOAD8(x, j) - m);
        STORE8((e * inv - sub) * scale, g, j);
      }
      for (; j < n; j++)
        STORE((exp(LOAD(x, j) - m) * inv - sub) * scale, g, j);
    }
#endif
    STORE((exp(xt - m) * inv - (1.0f - smooth) - sub) * scale, g, t);
  }
  return xent_loss(m, log_s, xt, d, inv_c, smooth);
}

/* Work-item i takes rows i * ROW_RUN ... (the host launches
 * ceil(rows / ROW_RUN) of them).  A row that is not valid writes a zero
 * gradient; the max of the row after it is then found on its own. */
inline void xent_row_entry(global const real_t *x, ulong x_off,
                           global const int *tg, ulong t_off,
                           global loss_t *lrow, ulong l_off, global real_t *g,
                           ulong g_off, global const uint *cnt, ulong c_off,
                           ulong rows, ulong cols, ulong row0, int ignore_index,
                           float smooth, float grad_scale, int mean,
                           volatile global int *status, int with_grad,
                           local float *stage) {
  const size_t r0 = get_global_id(0) * (size_t)ROW_RUN;
  if (r0 >= rows) return;
  const size_t run = min((size_t)ROW_RUN, (size_t)rows - r0);
  const size_t n = (size_t)cols;
  const float scale_valid =
      with_grad ? xent_scale(cnt + (size_t)c_off, mean, grad_scale) : 0.0f;
  global const int *tr = tg + (size_t)t_off + r0;
  float m = 0.0f;
  int have_m = 0;
  int t = tr[0];
  for (size_t k = 0; k < run; k++) {
    const size_t r = r0 + k;
    global const real_t *xr = x + (size_t)x_off + r * n;
    global real_t *gr = with_grad ? g + (size_t)g_off + r * n : g;
    const int kind = xent_kind(t, ignore_index, n);
    const int t_next = k + 1 < run ? tr[k + 1] : ignore_index;
    const int next_valid =
        k + 1 < run && xent_kind(t_next, ignore_index, n) == XENT_VALID;
    float loss;
    if (kind == XENT_VALID) {
      if (!have_m) m = xent_row_max(xr, n);
      float m_next;
      loss = xent_row_body(xr, n, t, m, smooth, scale_valid, gr, with_grad,
                           next_valid ? xr + n : xr, &m_next, stage);
      m = m_next;
      have_m = next_valid;
    } else {
      if (kind == XENT_BAD)
        rumus_report(status, DEVERR_XENT_TARGET, t, (int)((size_t)row0 + r));
      if (with_grad) {
        size_t j;
        for (j = 0; j + 8 <= n; j += 8) STORE8((float8)(0.0f), gr, j);
        for (; j < n; j++) STORE(0.0f, gr, j);
      }
      loss = kind == XENT_IGNORED ? 0.0f : NAN;
      have_m = 0;
    }
    LOSS_STORE(loss, lrow, (size_t)l_off + r);
    t = t_next;
  }
}

/* One signature for every row-loss kernel; the _fwd entries ignore g, cnt,
 * grad_scale and mean (the host may pass NULL buffers there). */
#define XENT_ROW_ARGS                                                       \
  global const real_t *x, ulong x_off, global const int *tg, ulong t_off,   \
      global loss_t *lrow, ulong l_off, global real_t *g, ulong g_off,      \
      global const uint *cnt, ulong c_off, ulong rows, ulong cols,          \
      ulong row0, int ignore_index, float smooth, float grad_scale,         \
      int mean, volatile global int *status
#define XENT_ROW_PASS                                                       \
  x, x_off, tg, t_off, lrow, l_off, g, g_off, cnt, c_off, rows, cols, row0, \
      ignore_index, smooth, grad_scale, mean, status

/* This work-item's local floats of the gradient's row cache (the host
 * launches the _row kernels at local sizes up to XENT_ROW_LS_MAX). */
#if XENT_STAGE_IN_G || XENT_LOCAL_ROW == 0
#define XENT_ROW_STAGE_DECL
#define XENT_ROW_STAGE ((local float *)0)
#else
#define XENT_ROW_STAGE_DECL local float stage[XENT_ROW_LS_MAX * XENT_LOCAL_ROW];
#define XENT_ROW_STAGE (stage + get_local_id(0) * (size_t)XENT_LOCAL_ROW)
#endif

__kernel void xent_fwd_row(XENT_ROW_ARGS) {
  xent_row_entry(XENT_ROW_PASS, 0, (local float *)0);
}

__kernel void xent_fwd_bwd_row(XENT_ROW_ARGS) {
  XENT_ROW_STAGE_DECL
  xent_row_entry(XENT_ROW_PASS, 1, XENT_ROW_STAGE);
}

/* ---- Work-group variant (one work-group per row) ----------------------- */

inline void xent_wg_count(local uint *la, uint a) {
  const size_t lid = get_local_id(0);
  la[lid] = a;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = WG / 2; step > 0; step /= 2) {
    if (lid < step) la[lid] += la[lid + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* Folds two sums held by every work-item into la[0], lb[0]. */
inline void xent_wg_sum2(local float *la, local float *lb, float a, float b) {
  const size_t lid = get_local_id(0);
  la[lid] = a;
  lb[lid] = b;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = WG / 2; step > 0; step /= 2) {
    if (lid < step) {
      la[lid] += la[lid + step];
      lb[lid] += lb[lid + step];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* The gradient of an ignored or bad row: zeros. */
inline void xent_wg_zero(global real_t *g, size_t n) {
  const size_t lid = get_local_id(0), nq = n / RUMUS_RV;
  for (size_t q = lid; q < nq; q += WG)
    STOREV((rumus_rv)(0.0f), g, q * RUMUS_RV);
  for (size_t j = nq * RUMUS_RV + lid; j < n; j += WG) STORE(0.0f, g, j);
}

/* The work-item of a work-group that handles element t of a row of n
 * elements in the strided loops below (groups of RUMUS_RV, then the
 * tail). */
inline size_t xent_owner(size_t t, size_t n) {
  const size_t nt = n / RUMUS_RV * RUMUS_RV;
  return t < nt ? (t / RUMUS_RV) % WG : (t - nt) % WG;
}

/* The row of one work-group, read twice from global memory (_wg).  Every
 * work-item meets the same barriers: a row that is not valid runs the
 * passes over 0 elements. */
inline void xent_wg_body(global const real_t *x, size_t n, int t, int kind,
                         float smooth, float scale, global real_t *g,
                         int with_grad, local float *lm, local float *ls,
                         local float *ld, float *loss_out) {
  const size_t lid = get_local_id(0);
  const size_t nv = kind == XENT_VALID ? n : 0; /* the same in the group */
  const size_t nq = nv / RUMUS_RV;
  const float xt = kind == XENT_VALID ? LOAD(x, t) : 0.0f;
  /* Pass 1: online (max, sum). */
  float m = -INFINITY, s = 0.0f;
  for (size_t q = lid; q < nq; q += WG)
    rumus_online_v(LOADV(x, q * RUMUS_RV), &m, &s);
  for (size_t j = nq * RUMUS_RV + lid; j < nv; j += WG)
    rumus_online(LOAD(x, j), &m, &s);
  rumus_wg_max_sum(lm, ls, m, s);
  const float M = lm[0], S = ls[0];
  /* Pass 2: d, and the gradient.  Only needed with a gradient or with
   * smoothing; the loop bound is the same in the group either way. */
  const size_t n2 = (with_grad || smooth > 0.0f) ? nv : 0;
  const size_t n2q = n2 / RUMUS_RV;
  const float inv = 1.0f / S, sub = smooth / (float)n;
  float d = 0.0f;
  /* Backwards (RUMUS_REV_Q): the row's end, read last, may still be in
   * the cache. */
  for (size_t j = n2q * RUMUS_RV + lid; j < n2; j += WG) {
    const float v = LOAD(x, j);
    d += M - v;
    if (with_grad) STORE((exp(v - M) * inv - sub) * scale, g, j);
  }
  RUMUS_REV_Q(q, n2q) {
    const rumus_rv v = LOADV(x, q * RUMUS_RV);
    d += rumus_hsumv(M - v);
    if (with_grad) STOREV((exp(v - M) * inv - sub) * scale, g, q * RUMUS_RV);
  }
  /* The work-item that wrote g[t] above overwrites it. */
  if (with_grad && kind == XENT_VALID && lid == xent_owner((size_t)t, n))
    STORE((exp(xt - M) * inv - (1.0f - smooth) - sub) * scale, g, (size_t)t);
  if (with_grad && (kind == XENT_IGNORED || kind == XENT_BAD)) xent_wg_zero(g, n);
  rumus_wg_sum(ld, d); /* ld is not lm or ls: no barrier needed before */
  *loss_out = xent_kind_loss(kind, M, S, xt, ld[0], n, smooth);
}

/* Group q of the row cache of _wgl, in the row kernels' groups. */
#define XENT_VLOAD(q, c) RUMUS_CAT(vload, RUMUS_RV)((q), (c))
#define XENT_VSTORE(v, q, c) RUMUS_CAT(vstore, RUMUS_RV)((v), (q), (c))

/* The row of one work-group, read once from global memory into `cache`
 * (_wgl, n <= XENT_LOCAL_FLOATS): pass 1 stores it and finds the max,
 * pass 2 sums exp(x - M) and M - x and keeps exp(x - M) in the cache for
 * the gradient of pass 3.  Each work-item reads back only the elements it
 * stored, so the passes need no barrier of their own. */
inline void xent_wgl_body(global const real_t *x, size_t n, int t, int kind,
                          float smooth, float scale, global real_t *g,
                          int with_grad, local float *cache, local float *lm,
                          local float *ls, local float *ld, float *loss_out) {
  const size_t lid = get_local_id(0);
  const size_t nv = kind == XENT_VALID ? n : 0; /* the same in the group */
  const size_t nq = nv / RUMUS_RV, nt = nq * RUMUS_RV;
  const float xt = kind == XENT_VALID ? LOAD(x, t) : 0.0f;
  /* Pass 1: the max. */
  float m = -INFINITY;
  for (size_t q = lid; q < nq; q += WG) {
    const rumus_rv v = LOADV(x, q * RUMUS_RV);
    XENT_VSTORE(v, q, cache);
    m = fmax(m, rumus_hmaxv(v));
  }
  for (size_t j = nt + lid; j < nv; j += WG) {
    const float v = LOAD(x, j);
    cache[j] = v;
    m = fmax(m, v);
  }
  const float M = rumus_wg_max(lm, m);
  /* Pass 2: S and d. */
  float s = 0.0f, d = 0.0f;
  for (size_t q = lid; q < nq; q += WG) {
    const rumus_rv v = XENT_VLOAD(q, cache), e = exp(v - M);
    s += rumus_hsumv(e);
    d += rumus_hsumv(M - v);
    if (with_grad) XENT_VSTORE(e, q, cache);
  }
  for (size_t j = nt + lid; j < nv; j += WG) {
    const float v = cache[j], e = exp(v - M);
    s += e;
    d += M - v;
    if (with_grad) cache[j] = e;
  }
  xent_wg_sum2(ls, ld, s, d);
  const float S = ls[0], D = ld[0];
  /* Pass 3: the gradient. */
  if (with_grad) {
    const float inv = 1.0f / S, sub = smooth / (float)n;
    for (size_t q = lid; q < nq; q += WG)
      STOREV((XENT_VLOAD(q, cache) * inv - sub) * scale, g, q * RUMUS_RV);
    for (size_t j = nt + lid; j < nv; j += WG)
      STORE((cache[j] * inv - sub) * scale, g, j);
    if (kind == XENT_VALID && lid == xent_owner((size_t)t, n))
      STORE((exp(xt - M) * inv - (1.0f - smooth) - sub) * scale, g, (size_t)t);
    if (kind == XENT_IGNORED || kind == XENT_BAD) xent_wg_zero(g, n);
  }
  *loss_out = xent_kind_loss(kind, M, S, xt, D, n, smooth);
}

inline void xent_wg_entry(global const real_t *x, ulong x_off,
                          global const int *tg, ulong t_off,
                          global loss_t *lrow, ulong l_off, global real_t *g,
                          ulong g_off, global const uint *cnt, ulong c_off,
                          ulong rows, ulong cols, ulong row0, int ignore_index,
                          float smooth, float grad_scale, int mean,
                          volatile global int *status, int with_grad,
                          int use_cache, local float *cache, local float *lm,
                          local float *ls, local float *ld) {
  const size_t r = get_group_id(0), lid = get_local_id(0);
  const size_t n = (size_t)cols;
  /* The host launches exactly `rows` work-groups; a group past them would
   * still meet every barrier and touch nothing. */
  const int t = r < rows ? tg[(size_t)t_off + r] : 0;
  const int kind = r < rows ? xent_kind(t, ignore_index, n) : XENT_NO_ROW;
  if (kind == XENT_BAD && lid == 0)
    rumus_report(status, DEVERR_XENT_TARGET, t, (int)((size_t)row0 + r));
  const float scale =
      (with_grad && kind == XENT_VALID)
          ? xent_scale(cnt + (size_t)c_off, mean, grad_scale)
          : 0.0f;
  global const real_t *xr = x + (size_t)x_off + r * n;
  global real_t *gr = with_grad ? g + (size_t)g_off + r * n : g;
  float loss;
  /* A flag, not cache != NULL: a local array may sit at address 0. */
  if (use_cache)
    xent_wgl_body(xr, n, t, kind, smooth, scale, gr, with_grad, cache, lm, ls,
                  ld, &loss);
  else
    xent_wg_body(xr, n, t, kind, smooth, scale, gr, with_grad, lm, ls, ld,
                 &loss);
  if (lid == 0 && kind != XENT_NO_ROW)
    LOSS_STORE(loss, lrow, (size_t)l_off + r);
}

__kernel RUMUS_WG_ATTR void xent_fwd_wg(XENT_ROW_ARGS) {
  local float lm[WG], ls[WG], ld[WG];
  xent_wg_entry(XENT_ROW_PASS, 0, 0, NULL, lm, ls, ld);
}

__kernel RUMUS_WG_ATTR void xent_fwd_bwd_wg(XENT_ROW_ARGS) {
  local float lm[WG], ls[WG], ld[WG];
  xent_wg_entry(XENT_ROW_PASS, 1, 0, NULL, lm, ls, ld);
}

#if XENT_LOCAL_FLOATS > 0
__kernel RUMUS_WG_ATTR void xent_fwd_wgl(XENT_ROW_ARGS) {
  local float lm[WG], ls[WG], ld[WG], cache[XENT_LOCAL_FLOATS];
  xent_wg_entry(XENT_ROW_PASS, 0, 1, cache, lm, ls, ld);
}

__kernel RUMUS_WG_ATTR void xent_fwd_bwd_wgl(XENT_ROW_ARGS) {
  local float lm[WG], ls[WG], ld[WG], cache[XENT_LOCAL_FLOATS];
  xent_wg_entry(XENT_ROW_PASS, 1, 1, cache, lm, ls, ld);
}
#endif

/* ---- Register-cached variant (several short rows per work-group) -------- */

/* v with the lanes of group q that lie past a row of n elements zeroed
 * (select, not a product: those lanes may hold inf or NaN). */
inline rumus_rv xent_maskv(rumus_rv v, size_t q, size_t n) {
  const size_t j = q * RUMUS_RV;
  if (j + RUMUS_RV <= n) return v;
  if (j >= n) return (rumus_rv)(0.0f);
  return select((rumus_rv)(0.0f), v, RUMUS_RV_IOTA < (rumus_rvi)(int)(n - j));
}

/* Lane i (< RUMUS_RV) of v, and v with lane i replaced by a. */
inline float xent_getv(rumus_rv v, size_t i) {
#if RUMUS_RV == 8
  const float4 h = i < 4 ? v.lo : v.hi;
  i &= 3;
#else
  const float4 h = v;
#endif
  return i == 0 ? h.x : i == 1 ? h.y : i == 2 ? h.z : h.w;
}
inline rumus_rv xent_setv(rumus_rv v, size_t i, float a) {
  return select(v, (rumus_rv)(a), RUMUS_RV_IOTA == (rumus_rvi)(int)i);
}

/* Two sums in one tree: *a and *b become their groups' totals. */
inline void xent_seg_sum2(local float *la, local float *lb, float *a, float *b,
                          uint rt) {
  const size_t lid = get_local_id(0), lane = lid % rt;
  la[lid] = *a;
  lb[lid] = *b;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint step = rt / 2; step > 0; step /= 2) {
    if (lane < step) {
      la[lid] += la[lid + step];
      lb[lid] += lb[lid + step];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *a = la[lid - lane];
  *b = lb[lid - lane];
}

/* The row of rt work-items (_wgc, n <= 4 * rt * CACHE_V4), held in
 * registers: lane i holds the groups i, i + rt, ... (rumus_rv), so the logits
 * are read from global memory once and the loss and gradient come from
 * registers.  Lane 0 reads x[t] (before any store, so g may alias x) and
 * writes the loss.  A row that is not valid loads nothing; a padding row
 * (XENT_NO_ROW) loads and stores nothing; both still meet every barrier. */
inline void xent_wgc_body(global const real_t *x, size_t n, int t, int kind,
                          float smooth, float scale, global real_t *g,
                          int with_grad, uint rt, local float *lm,
                          local float *ls, local float *ld, float *loss_out) {
  const size_t lane = get_local_id(0) % rt;
  const size_t nv = kind == XENT_VALID ? n : 0;
  const float xt = (kind == XENT_VALID && lane == 0) ? LOAD(x, t) : 0.0f;
  rumus_rv v[CACHE_V];
  float m = -INFINITY;
  for (int k = 0; k < CACHE_V; k++) {
    v[k] = rumus_loadv_fill(x, lane + (size_t)k * rt, nv, -INFINITY);
    m = fmax(m, rumus_hmaxv(v[k]));
  }
  const float M = rumus_seg_max(lm, m, rt);
  /* S and d over the row's elements only; v becomes exp(x - M). */
  float S = 0.0f, D = 0.0f;
  for (int k = 0; k < CACHE_V; k++) {
    const size_t q = lane + (size_t)k * rt;
    const rumus_rv e = exp(v[k] - M);
    /* Lanes past the row hold exp(-inf - M) = 0: no mask needed for S. */
    S += rumus_hsumv(e);
    if (smooth > 0.0f) D += rumus_hsumv(xent_maskv(M - v[k], q, nv));
    v[k] = e;
  }
  /* smooth is the same in the whole launch: the branch is uniform.  lm
   * differs from ls and ld, so no barrier is needed before the sums. */
  if (smooth > 0.0f)
    xent_seg_sum2(ls, ld, &S, &D, rt);
  else
    S = rumus_seg_sum(ls, S, rt);
  if (with_grad && kind == XENT_VALID) {
    const float inv = 1.0f / S, sub = smooth / (float)n;
    for (int k = 0; k < CACHE_V; k++) {
      const size_t q = lane + (size_t)k * rt, i = (size_t)t - q * RUMUS_RV;
      rumus_rv gv = (v[k] * inv - sub) * scale;
      if (i < RUMUS_RV) /* this lane holds the target */
        gv = xent_setv(gv, i,
                       (xent_getv(v[k], i) * inv - (1.0f - smooth) - sub) *
                           scale);
      rumus_storev_part(gv, g, q, n);
    }
  } else if (with_grad && kind != XENT_NO_ROW) {
    for (int k = 0; k < CACHE_V; k++)
      rumus_storev_part((rumus_rv)(0.0f), g, lane + (size_t)k * rt, n);
  }
  *loss_out = xent_kind_loss(kind, M, S, xt, D, n, smooth);
}

inline void xent_wgc_entry(global const real_t *x, ulong x_off,
                           global const int *tg, ulong t_off,
                           global loss_t *lrow, ulong l_off, global real_t *g,
                           ulong g_off, global const uint *cnt, ulong c_off,
                           ulong rows, ulong cols, ulong row0, int ignore_index,
                           float smooth, float grad_scale, int mean,
                           volatile global int *status, uint rt, int with_grad,
                           local float *lm, local float *ls, local float *ld) {
  const size_t lid = get_local_id(0), lane = lid % rt;
  const size_t r = (size_t)get_group_id(0) * (WG / rt) + lid / rt;
  const size_t n = (size_t)cols;
  /* Rows past `rows` pad the last work-group: they meet every barrier and
   * touch nothing. */
  const int t = r < rows ? tg[(size_t)t_off + r] : 0;
  const int kind = r < rows ? xent_kind(t, ignore_index, n) : XENT_NO_ROW;
  if (kind == XENT_BAD && lane == 0)
    rumus_report(status, DEVERR_XENT_TARGET, t, (int)((size_t)row0 + r));
  const float scale =
      (with_grad && kind == XENT_VALID)
          ? xent_scale(cnt + (size_t)c_off, mean, grad_scale)
          : 0.0f;
  const size_t base = r < rows ? r * n : 0;
  global const real_t *xr = x + (size_t)x_off + base;
  global real_t *gr = with_grad ? g + (size_t)g_off + base : g;
  float loss;
  xent_wgc_body(xr, n, t, kind, smooth, scale, gr, with_grad, rt, lm, ls, ld,
                &loss);
  if (lane == 0 && kind != XENT_NO_ROW)
    LOSS_STORE(loss, lrow, (size_t)l_off + r);
}

__kernel RUMUS_WG_ATTR void xent_fwd_wgc(XENT_ROW_ARGS, uint rt) {
  local float lm[WG], ls[WG], ld[WG];
  xent_wgc_entry(XENT_ROW_PASS, rt, 0, lm, ls, ld);
}

__kernel RUMUS_WG_ATTR void xent_fwd_bwd_wgc(XENT_ROW_ARGS, uint rt) {
  local float lm[WG], ls[WG], ld[WG];
  xent_wgc_entry(XENT_ROW_PASS, rt, 1, lm, ls, ld);
}

/* ---- Count of non-ignored rows and the reduced loss --------------------- */

/* Each of these kernels ends with its own final step, taken by the last
 * work-group to finish (rumus_last_group in common.cl): no second launch.
 * The last group adds the partials in a fixed order, so the result has the
 * same bits whichever group is last. */

/* part[g] = rows of [g * SPAN, (g + 1) * SPAN) whose target is not
 * ignore_index; the last group writes their sum to part[nparts]
 * (part = buffer + p_off). */
__kernel RUMUS_WG_ATTR void xent_count(global const int *tg, ulong t_off,
                                       ulong n, int ignore_index,
                                       global uint *part, ulong p_off,
                                       volatile global int *status) {
  volatile global int *ticket = status + RUMUS_STATUS_TICKET;
  local uint la[WG];
  local int last;
  const size_t lid = get_local_id(0), base = get_group_id(0) * SPAN;
  const size_t nparts = get_num_groups(0);
  volatile global uint *pv = part + (size_t)p_off;
  uint a = 0;
  for (size_t k = 0; k < RED_ITEMS; k++) {
    const size_t i = base + k * WG + lid;
    if (i < n) a += tg[(size_t)t_off + i] != ignore_index;
  }
  xent_wg_count(la, a);
  if (lid == 0) pv[get_group_id(0)] = la[0];
  if (!rumus_last_group(ticket, get_num_groups(0), &last)) return;
  a = 0;
  for (size_t i = lid; i < nparts; i += WG) a += pv[i];
  xent_wg_count(la, a);
  if (lid == 0) pv[nparts] = la[0];
  rumus_ticket_reset(ticket);
}

/* part[g] = sum of the per-row losses [g * SPAN, (g + 1) * SPAN) (part =
 * buffer + p_off); the last group adds the partials (work-item i takes i,
 * i + WG, ...), divides by cnt[0] for MEAN (0 / 0 gives NaN when every row
 * is ignored) and stores the loss.  The order depends only on WG and
 * RED_ITEMS: the same bits on every run, for any batch size. */
__kernel RUMUS_WG_ATTR void xent_sum(global const float *v, ulong v_off,
                                     ulong n, global float *part, ulong p_off,
                                     global const uint *cnt, ulong c_off,
                                     int mean, global loss_t *loss,
                                     ulong loss_off,
                                     volatile global int *status) {
  volatile global int *ticket = status + RUMUS_STATUS_TICKET;
  local float la[WG];
  local int last;
  const size_t lid = get_local_id(0), base = get_group_id(0) * SPAN;
  const size_t nparts = get_num_groups(0);
  volatile global float *pv = part + (size_t)p_off;
  float a = 0.0f;
  for (size_t k = 0; k < RED_ITEMS; k++) {
    const size_t i = base + k * WG + lid;
    if (i < n) a += v[(size_t)v_off + i];
  }
  rumus_wg_sum(la, a);
  if (lid == 0) pv[get_group_id(0)] = la[0];
  if (!rumus_last_group(ticket, get_num_groups(0), &last)) return;
  a = 0.0f;
  for (size_t i = lid; i < nparts; i += WG) a += pv[i];
  rumus_wg_sum(la, a);
  if (lid == 0) {
    const float total = la[0];
    LOSS_STORE(mean ? total / (float)cnt[(size_t)c_off] : total, loss,
               (size_t)loss_off);
  }
  rumus_ticket_reset(ticket);
}
