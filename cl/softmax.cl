/*
 * softmax.cl - softmax and log-softmax over the last dimension, forward and
 * backward.  A tensor [..., C] is `rows` rows of `cols` contiguous elements
 * (row r starts at element off + r * cols).
 *
 *   softmax:         y = exp(x - m) / s,  m = max x,  s = sum exp(x - m)
 *   log-softmax:     y = x - m - log(s)
 *   softmax bwd:     dx = y * (dy - sum(dy * y))
 *   log-softmax bwd: dx = dy - exp(y) * sum(dy)
 *
 * Three variants of each kernel:
 *   *_wgc  `rt` work-items per row (a power of two dividing WG, a kernel
 *          argument), WG / rt rows per work-group, the row held in
 *          registers (up to 4 * CACHE_V4 elements per work-item, in
 *          groups of 4, or 8 for aligned 16-bit rows), so it is read
 *          from memory once; segmented tree reductions in local memory.
 *          GPU path for rows of up to 4 * WG * CACHE_V4 elements: short
 *          rows share a work-group, so barriers are paid once per group.
 *   *_wg   the same without the register cache, for longer rows: each
 *          work-item walks the row with stride WG; the forward keeps an
 *          online (max, sum) pair per work-item, so the row is read twice,
 *          the second time backwards so that its end may come from cache.
 *   *_row  one work-item per row, no barriers, float8 accumulators (CPU
 *          path: PoCL turns barrier regions into loops over work-items, and
 *          a row read again from L1/L2 costs little); the forward's float8
 *          exp is rumus_exp_shifted8 (common.cl), far cheaper on PoCL than
 *          its exp, and its work-items take ROW_RUN rows each, the max of
 *          the next row read during the exp pass of the current one.
 *
 * Storage: any tag of common.cl (F32, F16, BF16), the same for every tensor
 * of a call; loads widen to float, every sum and product is float, and each
 * output is rounded to the storage type once.  The F32 _row forward keeps
 * exp(x - m) (or x - m) in y between its passes; a 16-bit y would round
 * those once there and again at the end, so the 16-bit _row forward keeps
 * the exps of rows of up to SOFTMAX_LOCAL_ROW elements in local memory as
 * floats, and for longer rows reads x again (SOFTMAX_STAGE_IN_Y 0): a
 * second exp per element for softmax, none for log-softmax.
 */

#define SOFTMAX_STAGE_F32 1
#define SOFTMAX_STAGE_F16 0
#define SOFTMAX_STAGE_BF16 0
#define SOFTMAX_STAGE_IN_Y RUMUS_CAT(SOFTMAX_STAGE_, RUMUS_STORAGE)

/* ---- Work-group variants ------------------------------------------------
 * They move the row in groups of RUMUS_RV elements (rumus_rv, common.cl):
 * float4, or 8 elements where the host found 16-bit tensors 8-element
 * aligned (RUMUS_ALIGN8). */

inline void softmax_fwd_wg_body(global const real_t *x, global real_t *y,
                                ulong cols, int log_mode, local float *lm,
                                local float *ls) {
  const size_t lid = get_local_id(0);
  const size_t n = (size_t)cols;
  /* Work-item i takes the groups i, i + WG, ...; the tail of fewer than
   * RUMUS_RV elements goes to the first work-items. */
  const size_t nq = n / RUMUS_RV, nt = nq * RUMUS_RV;
  float m = -INFINITY, s = 0.0f;
  for (size_t q = lid; q < nq; q += WG)
    rumus_online_v(LOADV(x, q * RUMUS_RV), &m, &s);
  for (size_t j = nt + lid; j < n; j += WG) rumus_online(LOAD(x, j), &m, &s);
  rumus_wg_max_sum(lm, ls, m, s);
  const float M = lm[0], S = ls[0];
  /* The second pass runs backwards (RUMUS_REV_Q): the row's end, read
   * last, is the likeliest to be still in the cache.
   * log-softmax: (x - M) - log S, not x - (M + log S): the sum would round
   * away the low bits of large logits. */
  const float ls_ = log(S), inv = 1.0f / S;
  for (size_t j = nt + lid; j < n; j += WG) {
    const float v = LOAD(x, j) - M;
    STORE(log_mode ? v - ls_ : exp(v) * inv, y, j);
  }
  RUMUS_REV_Q(q, nq) {
    const rumus_rv v = LOADV(x, q * RUMUS_RV) - M;
    STOREV(log_mode ? v - ls_ : exp(v) * inv, y, q * RUMUS_RV);
  }
}

inline void softmax_bwd_wg_body(global const real_t *y, global const real_t *dy,
                                global real_t *dx, ulong cols, int log_mode,
                                local float *ls) {
  const size_t lid = get_local_id(0);
  const size_t n = (size_t)cols, nq = n / RUMUS_RV, nt = nq * RUMUS_RV;
  float acc = 0.0f;
  if (log_mode) {
    for (size_t q = lid; q < nq; q += WG)
      acc += rumus_hsumv(LOADV(dy, q * RUMUS_RV));
    for (size_t j = nt + lid; j < n; j += WG) acc += LOAD(dy, j);
  } else {
    for (size_t q = lid; q < nq; q += WG)
      acc += rumus_dotv(LOADV(dy, q * RUMUS_RV), LOADV(y, q * RUMUS_RV));
    for (size_t j = nt + lid; j < n; j += WG) acc += LOAD(dy, j) * LOAD(y, j);
  }
  rumus_wg_sum(ls, acc);
  const float d = ls[0];
  /* Backwards, as in the forward. */
  for (size_t j = nt + lid; j < n; j += WG) {
    float yv = LOAD(y, j), gv = LOAD(dy, j);
    STORE(log_mode ? gv - exp(yv) * d : yv * (gv - d), dx, j);
  }
  RUMUS_REV_Q(q, nq) {
    rumus_rv yv = LOADV(y, q * RUMUS_RV), gv = LOADV(dy, q * RUMUS_RV);
    STOREV(log_mode ? gv - exp(yv) * d : yv * (gv - d), dx, q * RUMUS_RV);
  }
}

/* Row of n elements (n = 0 for the padding rows of the last work-group:
 * they load and store nothing but take part in the barriers); the lane
 * holds groups lane, lane + rt, ... (CACHE_V of them). */
inline void softmax_fwd_wgc_body(global const real_t *x, global real_t *y,
                                 size_t n, uint rt, int log_mode,
                                 local float *lm, local float *ls) {
  const size_t lane = get_local_id(0) % rt;
  rumus_rv v[CACHE_V];
  float m = -INFINITY;
  for (int k = 0; k < CACHE_V; k++) {
    v[k] = rumus_loadv_fill(x, lane + (size_t)k * rt, n, -INFINITY);
    m = fmax(m, rumus_hmaxv(v[k]));
  }
  const float M = rumus_seg_max(lm, m, rt);
  float s = 0.0f;
  for (int k = 0; k < CACHE_V; k++) {
    rumus_rv e = exp(v[k] - M); /* padding lanes: exp(-inf) = 0 */
    s += rumus_hsumv(e);
    if (!log_mode) v[k] = e;
  }
  /* lm and ls differ, so no barrier is needed between the reductions. */
  const float S = rumus_seg_sum(ls, s, rt);
  const float inv = 1.0f / S, lsum = log(S);
  for (int k = 0; k < CACHE_V; k++)
    rumus_storev_part(log_mode ? (v[k] - M) - lsum : v[k] * inv, y,
                      lane + (size_t)k * rt, n);
}

inline void softmax_bwd_wgc_body(global const real_t *y,
                                 global const real_t *dy, global real_t *dx,
                                 size_t n, uint rt, int log_mode,
                                 local float *ls) {
  const size_t lane = get_local_id(0) % rt;
  /* The first pass needs dy (and y for softmax); the second y and dy.
   * log-softmax keeps dy and reads y only in the second pass; softmax keeps
   * both. */
  rumus_rv yv[CACHE_V], gv[CACHE_V];
  float acc = 0.0f;
  for (int k = 0; k < CACHE_V; k++) {
    const size_t q = lane + (size_t)k * rt;
    const rumus_rv g = rumus_loadv_fill(dy, q, n, 0.0f);
    if (log_mode) {
      acc += rumus_hsumv(g);
      yv[k] = g; /* dy, kept in the y array */
    } else {
      yv[k] = rumus_loadv_fill(y, q, n, 0.0f);
      acc += rumus_dotv(g, yv[k]);
      gv[k] = g;
    }
  }
  const float d = rumus_seg_sum(ls, acc, rt);
  for (int k = 0; k < CACHE_V; k++) {
    const size_t q = lane + (size_t)k * rt;
    rumus_rv out;
    if (log_mode) {
      out = yv[k] - exp(rumus_loadv_fill(y, q, n, 0.0f)) * d;
    } else {
      out = yv[k] * (gv[k] - d);
    }
    rumus_storev_part(out, dx, q, n);
  }
}

#ifndef ROW_RUN
#define ROW_RUN 8 /* rows per work-item of the forward _row kernels */
#endif

#define ROW_BASE(p, off) ((p) + (size_t)(off) + (size_t)get_group_id(0) * (size_t)cols)

__kernel RUMUS_WG_ATTR void softmax_fwd_wg(global const real_t *x, ulong x_off,
                                           global real_t *y, ulong y_off,
                                           ulong rows, ulong cols) {
  local float lm[WG], ls[WG];
  softmax_fwd_wg_body(ROW_BASE(x, x_off), ROW_BASE(y, y_off), cols, 0, lm, ls);
}

__kernel RUMUS_WG_ATTR void log_softmax_fwd_wg(global const real_t *x,
                                               ulong x_off, global real_t *y,
                                               ulong y_off, ulong rows,
                                               ulong cols) {
  local float lm[WG], ls[WG];
  softmax_fwd_wg_body(ROW_BASE(x, x_off), ROW_BASE(y, y_off), cols, 1, lm, ls);
}

__kernel RUMUS_WG_ATTR void softmax_bwd_wg(global const real_t *y, ulong y_off,
                                           global const real_t *dy,
                                           ulong dy_off, global real_t *dx,
                                           ulong dx_off, ulong rows,
                                           ulong cols) {
  local float ls[WG];
  softmax_bwd_wg_body(ROW_BASE(y, y_off), ROW_BASE(dy, dy_off),
                      ROW_BASE(dx, dx_off), cols, 0, ls);
}

__kernel RUMUS_WG_ATTR void log_softmax_bwd_wg(global const real_t *y,
                                               ulong y_off,
                                               global const real_t *dy,
                                               ulong dy_off, global real_t *dx,
                                               ulong dx_off, ulong rows,
                                               ulong cols) {
  local float ls[WG];
  softmax_bwd_wg_body(ROW_BASE(y, y_off), ROW_BASE(dy, dy_off),
                      ROW_BASE(dx, dx_off), cols, 1, ls);
}

/* Row of work-item lid in the *_wgc kernels, and its element count (0 for
 * padding rows past `rows`). */
#define WGC_ROW(rt) ((size_t)get_group_id(0) * (WG / (rt)) + get_local_id(0) / (rt))
#define WGC_N(r) ((r) < (size_t)rows ? (size_t)cols : 0)
#define WGC_PTR(p, off, r) ((p) + (size_t)(off) + (WGC_N(r) ? (r) * (size_t)cols : 0))

__kernel RUMUS_WG_ATTR void softmax_fwd_wgc(global const real_t *x,
                                            ulong x_off, global real_t *y,
                                            ulong y_off, ulong rows, ulong cols,
                                            uint rt) {
  local float lm[WG], ls[WG];
  const size_t r = WGC_ROW(rt);
  softmax_fwd_wgc_body(WGC_PTR(x, x_off, r), WGC_PTR(y, y_off, r), WGC_N(r),
                       rt, 0, lm, ls);
}

__kernel RUMUS_WG_ATTR void log_softmax_fwd_wgc(global const real_t *x,
                                                ulong x_off, global real_t *y,
                                                ulong y_off, ulong rows,
                                                ulong cols, uint rt) {
  local float lm[WG], ls[WG];
  const size_t r = WGC_ROW(rt);
  softmax_fwd_wgc_body(WGC_PTR(x, x_off, r), WGC_PTR(y, y_off, r), WGC_N(r),
                       rt, 1, lm, ls);
}

__kernel RUMUS_WG_ATTR void softmax_bwd_wgc(global const real_t *y,
                                            ulong y_off,
                                            global const real_t *dy,
                                            ulong dy_off, global real_t *dx,
                                            ulong dx_off, ulong rows,
                                            ulong cols, uint rt) {
  local float ls[WG];
  const size_t r = WGC_ROW(rt);
  softmax_bwd_wgc_body(WGC_PTR(y, y_off, r), WGC_PTR(dy, dy_off, r),
                       WGC_PTR(dx, dx_off, r), WGC_N(r), rt, 0, ls);
}

__kernel RUMUS_WG_ATTR void log_softmax_bwd_wgc(global const real_t *y,
                                                ulong y_off,
                                                global const real_t *dy,
                                                ulong dy_off,
                                                global real_t *dx,
                                                ulong dx_off, ulong rows,
                                                ulong cols, uint rt) {
  local float ls[WG];
  const size_t r = WGC_ROW(rt);
  softmax_bwd_wgc_body(WGC_PTR(y, y_off, r), WGC_PTR(dy, dy_off, r),
                       WGC_PTR(dx, dx_off, r), WGC_N(r), rt, 1, ls);
}

/* ---- Row variant (one work-item per row) -------------------------------- */

inline float row_max(global const real_t *x, size_t n) {
  float8 m8 = (float8)(-INFINITY);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) m8 = fmax(m8, LOAD8(x, j));
  float m = rumus_hmax8(m8);
  for (; j < n; j++) m = fmax(m, LOAD(x, j));
  return m;
}

#ifndef SOFTMAX_LOCAL_ROW
/* The longest row (elements) whose exps the 16-bit _row softmax forward
 * keeps in local memory, as floats, between its exp pass and its store
 * pass, instead of computing them again there (0: none).  Each work-item
 * of a group of up to ROW_LS_MAX has its own SOFTMAX_LOCAL_ROW floats. */
#define SOFTMAX_LOCAL_ROW 0
#endif
#define ROW_LS_MAX 8 /* rumus__row_local's largest local size */

#if SOFTMAX_STAGE_IN_Y
/* Rows x, x + n, ... (run of them, y alike) of one work-item: the max pass
 * of each next row is fused into the exp pass of the current one, so that
 * its reads from memory overlap the exp arithmetic instead of following
 * it (PoCL runs a work-group's work-items one after another, so separate
 * work-items per row could not).  In place (y == x) row k + 1 is read before
 * it is written.  softmax: y holds exp(x - m) until the sum is known (one
 * exp per element); log-softmax: y holds x - m until log s is known. */
inline void softmax_fwd_row_run(global const real_t *x, global real_t *y,
                                size_t n, size_t run, int log_mode,
                                local float *stage) {
  (void)stage;
  float m = row_max(x, n);
  for (size_t k = 0; k < run; k++) {
    global const real_t *xr = x + k * n;
    global real_t *yr = y + k * n;
    /* The next row, or for the last one this row again (the max is then
     * unused and the reads hit the cache). */
    global const real_t *xn = k + 1 < run ? xr + n : xr;
    float8 s8 = 0.0f, mn8 = (float8)(-INFINITY);
    float s = 0.0f, mn = -INFINITY;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const float8 v = LOAD8(xr, j) - m, e = rumus_exp_shifted8(v);
      s8 += e;
      STORE8(log_mode ? v : e, yr, j);
      mn8 = fmax(mn8, LOAD8(xn, j));
    }
    for (; j < n; j++) {
      const float v = LOAD(xr, j) - m, e = exp(v);
      s += e;
      STORE(log_mode ? v : e, yr, j);
      mn = fmax(mn, LOAD(xn, j));
    }
    s += rumus_hsum8(s8);
    /* log-softmax: (x - m) - log s, not x - (m + log s), as above. */
    const float ls_ = log(s), inv = 1.0f / s;
    for (j = 0; j + 8 <= n; j += 8) {
      const float8 t = LOAD8(yr, j);
      STORE8(log_mode ? t - ls_ : t * inv, yr, j);
    }
    for (; j < n; j++) {
      const float t = LOAD(yr, j);
      STORE(log_mode ? t - ls_ : t * inv, yr, j);
    }
    m = fmax(rumus_hmax8(mn8), mn);
  }
}
#else
/* softmax_fwd_row_run for 16-bit storage: the exp pass only sums (and
 * takes the next row's max), and the store pass reads x again, so each
 * output is rounded once.  Softmax rows of up to SOFTMAX_LOCAL_ROW
 * elements keep their exps in `stage` (this work-item's floats of local
 * memory) for the store pass, the same values it would compute again: on
 * PoCL the second exp per element took most of the time.  In place, row k
 * is read in full by its exp pass before its store pass writes it, and the
 * next row before either. */
inline void softmax_fwd_row_run(global const real_t *x, global real_t *y,
                                size_t n, size_t run, int log_mode,
                                local float *stage) {
  const int staged = !log_mode && n <= (size_t)SOFTMAX_LOCAL_ROW;
  float m = row_max(x, n);
  for (size_t k = 0; k < run; k++) {
    global const real_t *xr = x + k * n;
    global real_t *yr = y + k * n;
    global const real_t *xn = k + 1 < run ? xr + n : xr;
    float8 s8 = 0.0f, mn8 = (float8)(-INFINITY);
    float s = 0.0f, mn = -INFINITY;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const float8 e = rumus_exp_shifted8(LOAD8(xr, j) - m);
      s8 += e;
      if (staged) vstore8(e, 0, stage + j);
      mn8 = fmax(mn8, LOAD8(xn, j));
    }
    for (; j < n; j++) {
      const float e = exp(LOAD(xr, j) - m);
      s += e;
      if (staged) stage[j] = e;
      mn = fmax(mn, LOAD(xn, j));
    }
    s += rumus_hsum8(s8);
    const float ls_ = log(s), inv = 1.0f / s;
    if (staged) {
      for (j = 0; j + 8 <= n; j += 8)
        STORE8(vload8(0, stage + j) * inv, yr, j);
      for (; j < n; j++) STORE(stage[j] * inv, yr, j);
    } else {
      for (j = 0; j + 8 <= n; j += 8) {
        const float8 v = LOAD8(xr, j) - m;
        STORE8(log_mode ? v - ls_ : rumus_exp_shifted8(v) * inv, yr, j);
      }
      for (; j < n; j++) {
        const float v = LOAD(xr, j) - m;
        STORE(log_mode ? v - ls_ : exp(v) * inv, yr, j);
      }
    }
    m = fmax(rumus_hmax8(mn8), mn);
  }
}
#endif

inline void softmax_bwd_row_body(global const real_t *y, global const real_t *dy,
                                 global real_t *dx, size_t n, int log_mode) {
  float8 a8 = 0.0f;
  float a = 0.0f;
  size_t j = 0;
  if (log_mode) {
    for (; j + 8 <= n; j += 8) a8 += LOAD8(dy, j);
    for (; j < n; j++) a += LOAD(dy, j);
  } else {
    for (; j + 8 <= n; j += 8) a8 += LOAD8(dy, j) * LOAD8(y, j);
    for (; j < n; j++) a += LOAD(dy, j) * LOAD(y, j);
  }
  const float d = a + rumus_hsum8(a8);
  for (j = 0; j + 8 <= n; j += 8) {
    float8 yv = LOAD8(y, j), gv = LOAD8(dy, j);
    STORE8(log_mode ? gv - exp(yv) * d : yv * (gv - d), dx, j);
  }
  for (; j < n; j++) {
    float yv = LOAD(y, j), gv = LOAD(dy, j);
    STORE(log_mode ? gv - exp(yv) * d : yv * (gv - d), dx, j);
  }
}

#define ROW_PTR(p, off) ((p) + (size_t)(off) + r * (size_t)cols)

/* The forwards: work-item i takes rows i * ROW_RUN ... (the host launches
 * ceil(rows / ROW_RUN) of them). */
/* This work-item's local floats of the row cache (the host launches the
 * _row kernels at local sizes up to ROW_LS_MAX). */
#if SOFTMAX_STAGE_IN_Y || SOFTMAX_LOCAL_ROW == 0
#define ROW_STAGE_DECL
#define ROW_STAGE ((local float *)0)
#else
#define ROW_STAGE_DECL local float stage[ROW_LS_MAX * SOFTMAX_LOCAL_ROW];
#define ROW_STAGE (stage + get_local_id(0) * (size_t)SOFTMAX_LOCAL_ROW)
#endif
#define RUN_ENTRY(log_mode)                                                 \
  ROW_STAGE_DECL                                                            \
  const size_t r = get_global_id(0) * (size_t)ROW_RUN;                      \
  if (r >= rows) return;                                                    \
  const size_t run = min((size_t)ROW_RUN, (size_t)rows - r);                \
  softmax_fwd_row_run(ROW_PTR(x, x_off), ROW_PTR(y, y_off), cols, run,      \
                      log_mode, ROW_STAGE)

__kernel void softmax_fwd_row(global const real_t *x, ulong x_off,
                              global real_t *y, ulong y_off, ulong rows,
                              ulong cols) {
  RUN_ENTRY(0);
}

__kernel void log_softmax_fwd_row(global const real_t *x, ulong x_off,
                                  global real_t *y, ulong y_off, ulong rows,
                                  ulong cols) {
  RUN_ENTRY(1);
}

__kernel void softmax_bwd_row(global const real_t *y, ulong y_off,
                              global const real_t *dy, ulong dy_off,
                              global real_t *dx, ulong dx_off, ulong rows,
                              ulong cols) {
  const size_t r = get_global_id(0);
  if (r >= rows) return;
  softmax_bwd_row_body(ROW_PTR(y, y_off), ROW_PTR(dy, dy_off),
                       ROW_PTR(dx, dx_off), cols, 0);
}

__kernel void log_softmax_bwd_row(global const real_t *y, ulong y_off,
                                  global const real_t *dy, ulong dy_off,
                                  global real_t *dx, ulong dx_off, ulong rows,
                                  ulong cols) {
  const size_t r = get_global_id(0);
  if (r >= rows) return;
  softmax_bwd_row_body(ROW_PTR(y, y_off), ROW_PTR(dy, dy_off),
                       ROW_PTR(dx, dx_off), cols, 1);
}
