/*
 * attention.cl - scaled dot-product attention, flash style: the Tq x Tk
 * score matrix is never stored.  Tensors are row-major [B, H, T, D] (D =
 * HEAD_DIM contiguous); row r of q, out, dout and dq is query i = r mod Tq
 * of head bh = r / Tq (b = bh / H, h = bh mod H), row r of k, v, dk, dv is
 * key j = r mod Tk of head r / Tk.  With s = scale:
 *
 *   S[i, j]  = s q_i . k_j + mask[b, h, i, j]     (-inf where causal, j > i)
 *   m_i      = max_j S[i, j],  l_i = sum_j exp(S[i, j] - m_i)
 *   lse_i    = m_i + log l_i,  P[i, j] = exp(S[i, j] - lse_i)
 *   out_i    = sum_j P[i, j] v_j
 * backward (FlashAttention-2), delta_i = dout_i . out_i:
 *   dP[i, j] = dout_i . v_j,   dS[i, j] = P[i, j] (dP[i, j] - delta_i)
 *   dv_j = sum_i P[i, j] dout_i,  dk_j = s sum_i dS[i, j] q_i,
 *   dq_i = s sum_j dS[i, j] k_j.
 * A row whose scores are all -inf (Tk = 0, or a mask of -inf) gets out = 0
 * and lse = -inf, and contributes nothing to any gradient (P = 0).
 *
 * The mask is any floating storage (MASK_STORAGE, independent of the
 * program's RUMUS_STORAGE) read at mask + m_off + b msb + h msh + i msi +
 * j msj: the host passes 0 for a broadcast axis.
 *
 * Row kernels (*_row, CPU variant, and the fallback of the GPU variant):
 * one work-item per query row (forward, dq) or key row (dk / dv), no
 * barriers, the row and its accumulators in private floats.  Keys (or
 * queries) go in blocks of KB = 8: their dot products run as 8
 * independent float8 chains (block_dots), their exponentials are one
 * float8 rumus_exp_shifted8 (common.cl: PoCL's exp is far slower), and
 * the forward's running (max, sum) rescales the accumulator once per block.
 * Work-group kernels (*_wg, GPU variant): a group of ATT_WG work-items
 * owns ATT_WG consecutive query rows (forward, dq) or key rows (dk / dv)
 * of one head, each work-item one row in private floats; the rows it
 * loops over (keys and values, or queries, dout, lse and delta) are
 * staged ATT_BT at a time in local memory as floats by the whole group
 * (coalesced loads), and every work-item reads them from there (the same
 * address across the group: a broadcast).  Causal groups stop at the last
 * key tile that their last query sees (the forward, dq) or start at the
 * first query tile that sees their first key (dk / dv).
 * Every sum runs in a fixed order (keys or queries ascending, D in float8
 * lanes then the tail), so a call gives the same bits on every run; no
 * atomics.  The two variants order some sums differently (the last bits
 * may differ).
 */

#ifndef HEAD_DIM
#define HEAD_DIM 64 /* D: the host specialises every program on it */
#endif
#ifndef MASK_STORAGE
#define MASK_STORAGE F32 /* storage tag of the additive mask */
#endif
#ifndef ATT_WG
#define ATT_WG 64 /* work-items (rows) per group of the *_wg kernels */
#endif
#ifndef ATT_BT
#define ATT_BT 32 /* rows per local-memory tile of the *_wg kernels */
#endif

/* Private rows are padded to whole float8 with zeros. */
#define DPAD ((HEAD_DIM + 7) / 8 * 8)
#define KB 8 /* keys (queries) per block of the row kernels */

typedef RUMUS_TYPE(MASK_STORAGE) mask_t;
#define MLOAD(p, i) RUMUS_LOAD(MASK_STORAGE, p, i)

/* The arguments every kernel of the family shares after its tensors: the
 * mask (has_mask 0: not read) with its four element strides, and the
 * geometry.  rows is the number of rows the launch covers. */
#define ATT_ARGS                                                             \
  global const mask_t *mask, ulong m_off, int has_mask, ulong msb,           \
      ulong msh, ulong msi, ulong msj, ulong rows, ulong H, ulong Tq,        \
      ulong Tk, float scale, int causal

/* Row mask + (b, h, i) of head bh, or NULL-like (unused) without a mask. */
inline global const mask_t *mask_row(global const mask_t *mask, ulong m_off,
                                     size_t bh, size_t i, ulong H, ulong msb,
                                     ulong msh, ulong msi) {
  const size_t b = bh / (size_t)H, h = bh - b * (size_t)H;
  return mask + (size_t)m_off + b * (size_t)msb + h * (size_t)msh +
         i * (size_t)msi;
}

/* A head's row in private memory: DV float8 chunks, zero past HEAD_DIM.
 * Every loop over the chunks has a constant trip count, so compilers
 * unroll it and keep the chunks in vector registers. */
#define DV (DPAD / 8)

/* Chunk c (elements 8c .. 8c + 8) of a stored row, zeros past HEAD_DIM. */
inline float8 chunk_load(global const real_t *p, int c) {
  const int d = c * 8;
  if (d + 8 <= HEAD_DIM) return LOAD8(p, d);
  float t[8];
  for (int e = 0; e < 8; e++) t[e] = d + e < HEAD_DIM ? LOAD(p, d + e) : 0.0f;
  return vload8(0, t);
}

/* dst = p[0 .. HEAD_DIM) * s. */
inline void row_load(global const real_t *p, float s, float8 *dst) {
  for (int c = 0; c < DV; c++) dst[c] = chunk_load(p, c) * s;
}

/* acc += w * b for a stored row b. */
inline void row_axpy(float8 *acc, float w, global const real_t *b) {
  for (int c = 0; c < DV; c++) acc[c] = fma((float8)(w), chunk_load(b, c), acc[c]);
}

inline void row_scale(float8 *acc, float s) {
  for (int c = 0; c < DV; c++) acc[c] *= s;
}

inline void row_store(const float8 *acc, float s, global real_t *p) {
  for (int c = 0; c < DV; c++) {
    const int d = c * 8;
    if (d + 8 <= HEAD_DIM) {
      STORE8(acc[c] * s, p, d);
    } else {
      float t[8];
      vstore8(acc[c] * s, 0, t);
      for (int e = 0; d + e < HEAD_DIM; e++) STORE(t[e], p, d + e);
    }
  }
}

inline void row_zero(float8 *acc) {
  for (int c = 0; c < DV; c++) acc[c] = 0.0f;
}

/* The lane sums of v[0 .. 8) as one float8 (lane t: the sum of v[t]), by
 * three levels of pairwise adds. */
inline float8 hsum8x8(const float8 *v) {
  float4 u[8], x[4];
  for (int t = 0; t < 8; t++) u[t] = v[t].even + v[t].odd;
  for (int t = 0; t < 4; t++) {
    const float8 p = (float8)(u[2 * t], u[2 * t + 1]);
    x[t] = p.even + p.odd;
  }
  const float8 p0 = (float8)(x[0], x[1]), p1 = (float8)(x[2], x[3]);
  return (float8)(p0.even + p0.odd, p1.even + p1.odd);
}

/* a . b_t for the KB stored rows b_t = base + (j0 + t) HEAD_DIM, t < nt
 * (lanes past nt repeat row nt - 1: the caller ignores them), as KB
 * independent float8 chains: one chain per dot product would wait on the
 * fma latency at every chunk. */
inline float8 block_dots(const float8 *a, global const real_t *base,
                         size_t j0, int nt) {
  float8 acc[KB];
  global const real_t *rp[KB];
  for (int t = 0; t < KB; t++) {
    acc[t] = 0.0f;
    rp[t] = base + (j0 + (size_t)min(t, nt - 1)) * HEAD_DIM;
  }
  for (int c = 0; c < DV; c++)
    for (int t = 0; t < KB; t++) acc[t] = fma(a[c], chunk_load(rp[t], c), acc[t]);
  return hsum8x8(acc);
}

/* Lanes t >= nt of a block. */
inline int8 block_past(int nt) {
  return (int8)(0, 1, 2, 3, 4, 5, 6, 7) >= (int8)(nt);
}

/* e^(s - lse) for a block; 0 where lse is -inf (a fully masked row, whose
 * s are -inf too: -inf - -inf would be NaN) and where s is -inf. */
inline float8 block_p(float8 s, float8 lse) {
  return select(rumus_exp_shifted8(s - lse), (float8)(0.0f),
                lse == (float8)(-INFINITY));
}

/* ---- Forward ------------------------------------------------------------- */

/* One query row: online softmax over key blocks. */
inline void fwd_row(global const real_t *qr, global const real_t *kb,
                    global const real_t *vb, global const mask_t *mr,
                    int has_mask, ulong msj, size_t jend, float scale,
                    global real_t *orow, global float *lse) {
  float8 qv[DV], acc[DV];
  row_load(qr, scale, qv);
  row_zero(acc);
  float m = -INFINITY, l = 0.0f;
  for (size_t j0 = 0; j0 < jend; j0 += KB) {
    const int nt = (int)min((size_t)KB, jend - j0);
    float mk[KB];
    for (int t = 0; t < KB; t++)
      mk[t] = has_mask && t < nt ? MLOAD(mr, (j0 + t) * (size_t)msj) : 0.0f;
    const float8 s8 = select(block_dots(qv, kb, j0, nt) + vload8(0, mk),
                             (float8)(-INFINITY), block_past(nt));
    const float mn = fmax(m, rumus_hmax8(s8));
    if (mn == -INFINITY) { /* nothing but -inf so far (fmax skips NaN) */
      if (any(isnan(s8))) l = NAN;
      continue;
    }
    /* m = -inf: alpha = 0 (acc and l are 0 anyway). */
    const float alpha = exp(m - mn);
    const float8 p = rumus_exp_shifted8(s8 - mn);
    l = fma(l, alpha, rumus_hsum8(p));
    row_scale(acc, alpha);
    float pp[KB];
    vstore8(p, 0, pp);
    /* Keys of probability 0 (masked, or underflowed) are skipped: a NaN or
     * infinity in v reaches only the rows that attend to its key. */
    for (int t = 0; t < nt; t++)
      if (pp[t] != 0.0f) row_axpy(acc, pp[t], vb + (j0 + t) * HEAD_DIM);
    m = mn;
  }
  /* A fully masked row (m = -inf, l = 0): out 0, lse -inf.  A NaN score
   * made l NaN (exp(NaN), or the branch above), and so out and lse. */
  const int empty = m == -INFINITY && l == 0.0f;
  row_store(acc, empty ? 0.0f : 1.0f / l, orow);
  if (lse) *lse = empty ? -INFINITY : m + log(l);
}

__kernel void attn_fwd_row(global const real_t *q, ulong q_off,
                           global const real_t *k, ulong k_off,
                           global const real_t *v, ulong v_off,
                           global real_t *o, ulong o_off, global float *lse,
                           ulong lse_off, int has_lse, ATT_ARGS) {
  const size_t r = get_global_id(0);
  if (r >= rows) return;
  const size_t bh = r / (size_t)Tq, i = r - bh * (size_t)Tq;
  const size_t jend = causal ? min((size_t)Tk, i + 1) : (size_t)Tk;
  const size_t kv0 = bh * (size_t)Tk * HEAD_DIM;
  fwd_row(q + (size_t)q_off + r * HEAD_DIM, k + (size_t)k_off + kv0,
          v + (size_t)v_off + kv0,
          mask_row(mask, m_off, bh, i, H, msb, msh, msi), has_mask, msj, jend,
          scale, o + (size_t)o_off + r * HEAD_DIM,
          has_lse ? lse + (size_t)lse_off + r : 0);
}

/* ---- Backward ------------------------------------------------------------ */

/* delta[r] = dout_r . out_r (float), one work-item per query row. */
__kernel void attn_delta_row(global const real_t *o, ulong o_off,
                             global const real_t *dout, ulong do_off,
                             global float *delta, ulong rows) {
  const size_t r = get_global_id(0);
  if (r >= rows) return;
  global const real_t *orow = o + (size_t)o_off + r * HEAD_DIM;
  global const real_t *drow = dout + (size_t)do_off + r * HEAD_DIM;
  float8 acc = 0.0f;
  int d = 0;
  for (; d + 8 <= HEAD_DIM; d += 8) acc = fma(LOAD8(orow, d), LOAD8(drow, d), acc);
  float s = rumus_hsum8(acc);
  for (; d < HEAD_DIM; d++) s = fma(LOAD(orow, d), LOAD(drow, d), s);
  delta[r] = s;
}

/* dk and dv of one key row j: queries i >= i0 ascending in blocks. */
__kernel void attn_dkdv_row(global const real_t *q, ulong q_off,
                            global const real_t *k, ulong k_off,
                            global const real_t *v, ulong v_off,
                            global const real_t *dout, ulong do_off,
                            global const float *lse, ulong lse_off,
                            global const float *delta,
                            global real_t *dk, ulong dk_off,
                            global real_t *dv, ulong dv_off, int has_dk,
                            int has_dv, ATT_ARGS) {
  const size_t r = get_global_id(0);
  if (r >= rows) return;
  const size_t bh = r / (size_t)Tk, j = r - bh * (size_t)Tk;
  const size_t i0 = causal ? j : 0, nq = (size_t)Tq;
  const size_t q0 = bh * nq;
  global const real_t *qb = q + (size_t)q_off + q0 * HEAD_DIM;
  global const real_t *db = dout + (size_t)do_off + q0 * HEAD_DIM;
  global const float *lb = lse + (size_t)lse_off + q0;
  global const float *eb = delta + q0;
  global const mask_t *mr = mask_row(mask, m_off, bh, 0, H, msb, msh, msi);
  float8 kv[DV], vv[DV], gk[DV], gv[DV];
  row_load(k + (size_t)k_off + r * HEAD_DIM, scale, kv);
  row_load(v + (size_t)v_off + r * HEAD_DIM, 1.0f, vv);
  row_zero(gk);
  row_zero(gv);
  for (size_t i = i0; i < nq; i += KB) {
    const int nt = (int)min((size_t)KB, nq - i);
    float mk[KB], ls[KB], de[KB];
    for (int t = 0; t < KB; t++) {
      const size_t ii = i + t;
      const int in = t < nt;
      mk[t] = has_mask && in ? MLOAD(mr, ii * (size_t)msi + j * (size_t)msj)
                             : 0.0f;
      ls[t] = in ? lb[ii] : 0.0f;
      de[t] = in ? eb[ii] : 0.0f;
    }
    const float8 s8 = select(block_dots(kv, qb, i, nt) + vload8(0, mk),
                             (float8)(-INFINITY), block_past(nt));
    const float8 p = block_p(s8, vload8(0, ls));
    const float8 ds = p * (block_dots(vv, db, i, nt) - vload8(0, de));
    float pp[KB], dd[KB];
    vstore8(p, 0, pp);
    vstore8(ds, 0, dd);
    for (int t = 0; t < nt; t++) {
      if (pp[t] == 0.0f) continue; /* as in the forward */
      row_axpy(gv, pp[t], db + (i + t) * HEAD_DIM);
      row_axpy(gk, dd[t], qb + (i + t) * HEAD_DIM);
    }
  }
  if (has_dk) row_store(gk, scale, dk + (size_t)dk_off + r * HEAD_DIM);
  if (has_dv) row_store(gv, 1.0f, dv + (size_t)dv_off + r * HEAD_DIM);
}

/* dq of one query row: keys ascending in blocks. */
__kernel void attn_dq_row(global const real_t *q, ulong q_off,
                          global const real_t *k, ulong k_off,
                          global const real_t *v, ulong v_off,
                          global const real_t *dout, ulong do_off,
                          global const float *lse, ulong lse_off,
                          global const float *delta, global real_t *dq,
                          ulong dq_off, ATT_ARGS) {
  const size_t r = get_global_id(0);
  if (r >= rows) return;
  const size_t bh = r / (size_t)Tq, i = r - bh * (size_t)Tq;
  const size_t jend = causal ? min((size_t)Tk, i + 1) : (size_t)Tk;
  const size_t kv0 = bh * (size_t)Tk * HEAD_DIM;
  global const real_t *kb = k + (size_t)k_off + kv0;
  global const real_t *vb = v + (size_t)v_off + kv0;
  global const mask_t *mr = mask_row(mask, m_off, bh, i, H, msb, msh, msi);
  float8 qv[DV], gv[DV], gq[DV];
  row_load(q + (size_t)q_off + r * HEAD_DIM, scale, qv);
  row_load(dout + (size_t)do_off + r * HEAD_DIM, 1.0f, gv);
  row_zero(gq);
  const float8 l8 = (float8)(lse[(size_t)lse_off + r]);
  const float8 e8 = (float8)(delta[r]);
  for (size_t j0 = 0; j0 < jend; j0 += KB) {
    const int nt = (int)min((size_t)KB, jend - j0);
    float mk[KB];
    for (int t = 0; t < KB; t++)
      mk[t] = has_mask && t < nt ? MLOAD(mr, (j0 + t) * (size_t)msj) : 0.0f;
    const float8 s8 = select(block_dots(qv, kb, j0, nt) + vload8(0, mk),
                             (float8)(-INFINITY), block_past(nt));
    const float8 p = block_p(s8, l8);
    float pp[KB], dd[KB];
    vstore8(p, 0, pp);
    vstore8(p * (block_dots(gv, vb, j0, nt) - e8), 0, dd);
    for (int t = 0; t < nt; t++)
      if (pp[t] != 0.0f) row_axpy(gq, dd[t], kb + (j0 + t) * HEAD_DIM);
  }
  row_store(gq, scale, dq + (size_t)dq_off + r * HEAD_DIM);
}

/* ---- Work-group variant -------------------------------------------------- */

/* Rows t0 .. t0 + n of a [T, HEAD_DIM] matrix at p into tile[ATT_BT][DPAD]
 * as floats, zeros past n and past HEAD_DIM; every work-item calls it. */
inline void tile_load(global const real_t *p, size_t t0, size_t n,
                      local float *tile) {
  for (size_t e = get_local_id(0); e < ATT_BT * DPAD; e += ATT_WG) {
    const size_t t = e / DPAD, d = e - t * DPAD;
    tile[e] = (t < n && d < HEAD_DIM) ? LOAD(p, (t0 + t) * HEAD_DIM + d) : 0.0f;
  }
}

/* a . b for private a and a local row b (DPAD floats, zero-padded). */
inline float local_dot(const float8 *a, local const float *b) {
  float8 acc = 0.0f;
  for (int c = 0; c < DV; c++) acc = fma(a[c], vload8(c, b), acc);
  return rumus_hsum8(acc);
}

/* acc += w * b for a local row b. */
inline void local_axpy(float8 *acc, float w, local const float *b) {
  for (int c = 0; c < DV; c++) acc[c] = fma((float8)(w), vload8(c, b), acc[c]);
}

/* The group's head and first row, for rows of length T per head, ATT_WG
 * rows per group (blocks = ceil(T / ATT_WG) groups per head). */
#define WG_ROWS(T)                                                           \
  const size_t blocks = ((size_t)(T) + ATT_WG - 1) / ATT_WG;                 \
  const size_t bh = get_group_id(0) / blocks;                                \
  const size_t r0 = (get_group_id(0) - bh * blocks) * ATT_WG;                \
  const size_t me = r0 + get_local_id(0);                                    \
  const int live = me < (size_t)(T)

__kernel RUMUS_REQD_WG(ATT_WG, 1, 1) void attn_fwd_wg(
    global const real_t *q, ulong q_off, global const real_t *k, ulong k_off,
    global const real_t *v, ulong v_off, global real_t *o, ulong o_off,
    global float *lse, ulong lse_off, int has_lse, ATT_ARGS) {
  local float kt[ATT_BT * DPAD], vt[ATT_BT * DPAD];
  WG_ROWS(Tq);
  const size_t i = live ? me : r0, r = bh * (size_t)Tq + i;
  /* The group's keys: all, or (causal) up to its last query. */
  const size_t gend =
      causal ? min((size_t)Tk, min((size_t)Tq, r0 + ATT_WG)) : (size_t)Tk;
  const size_t jend = causal ? min((size_t)Tk, i + 1) : (size_t)Tk;
  const size_t kv0 = bh * (size_t)Tk * HEAD_DIM;
  global const mask_t *mr = mask_row(mask, m_off, bh, i, H, msb, msh, msi);
  float8 qv[DV], acc[DV];
  row_load(q + (size_t)q_off + r * HEAD_DIM, scale, qv);
  row_zero(acc);
  float m = -INFINITY, l = 0.0f;
  for (size_t j0 = 0; j0 < gend; j0 += ATT_BT) {
    const size_t n = min((size_t)ATT_BT, gend - j0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tiles are read */
    tile_load(k + (size_t)k_off + kv0, j0, n, kt);
    tile_load(v + (size_t)v_off + kv0, j0, n, vt);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* The tile's scores, max and sum (-inf past this row's keys). */
    float sc[ATT_BT];
    float mt = -INFINITY;
    int nan = 0;
    for (int t = 0; t < ATT_BT; t++) {
      const size_t j = j0 + t;
      float s = -INFINITY;
      if (j < jend) {
        s = local_dot(qv, kt + t * DPAD);
        if (has_mask) s += MLOAD(mr, j * (size_t)msj);
      }
      sc[t] = s;
      mt = fmax(mt, s);
      nan |= isnan(s);
    }
    if (nan) l = NAN;
    const float mn = fmax(m, mt);
    /* No continue: the loop's barriers stay in uniform control flow. */
    if (mn != -INFINITY) {
      const float alpha = exp(m - mn);
      float ls = 0.0f;
      row_scale(acc, alpha);
      for (int t = 0; t < ATT_BT; t++) {
        const float p = exp(sc[t] - mn);
        ls += p;
        if (p != 0.0f) local_axpy(acc, p, vt + t * DPAD);
      }
      l = fma(l, alpha, ls);
      m = mn;
    }
  }
  if (!live) return;
  const int empty = m == -INFINITY && l == 0.0f;
  row_store(acc, empty ? 0.0f : 1.0f / l, o + (size_t)o_off + r * HEAD_DIM);
  if (has_lse) lse[(size_t)lse_off + r] = empty ? -INFINITY : m + log(l);
}

/* delta and lse of a query tile into local arrays (0 past n). */
inline void tile_rows(global const float *p, size_t t0, size_t n,
                      local float *dst) {
  for (size_t t = get_local_id(0); t < ATT_BT; t += ATT_WG)
    dst[t] = t < n ? p[t0 + t] : 0.0f;
}

__kernel RUMUS_REQD_WG(ATT_WG, 1, 1) void attn_dkdv_wg(
    global const real_t *q, ulong q_off, global const real_t *k, ulong k_off,
    global const real_t *v, ulong v_off, global const real_t *dout,
    ulong do_off, global const float *lse, ulong lse_off,
    global const float *delta, global real_t *dk, ulong dk_off,
    global real_t *dv, ulong dv_off, int has_dk, int has_dv, ATT_ARGS) {
  local float qt[ATT_BT * DPAD], dt[ATT_BT * DPAD], lt[ATT_BT], et[ATT_BT];
  WG_ROWS(Tk);
  const size_t j = live ? me : r0, r = bh * (size_t)Tk + j;
  const size_t q0 = bh * (size_t)Tq;
  /* The group's queries: all, or (causal) from its first key on. */
  const size_t gstart = causal ? r0 : 0;
  global const mask_t *mr = mask_row(mask, m_off, bh, 0, H, msb, msh, msi);
  float8 kv[DV], vv[DV], gk[DV], gv[DV];
  row_load(k + (size_t)k_off + r * HEAD_DIM, scale, kv);
  row_load(v + (size_t)v_off + r * HEAD_DIM, 1.0f, vv);
  row_zero(gk);
  row_zero(gv);
  for (size_t i0 = gstart; i0 < (size_t)Tq; i0 += ATT_BT) {
    const size_t n = min((size_t)ATT_BT, (size_t)Tq - i0);
    barrier(CLK_LOCAL_MEM_FENCE);
    tile_load(q + (size_t)q_off + q0 * HEAD_DIM, i0, n, qt);
    tile_load(dout + (size_t)do_off + q0 * HEAD_DIM, i0, n, dt);
    tile_rows(lse + (size_t)lse_off + q0, i0, n, lt);
    tile_rows(delta + q0, i0, n, et);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < (int)n; t++) {
      const size_t i = i0 + t;
      if (causal && i < j) continue;
      const float lv = lt[t];
      float s = local_dot(kv, qt + t * DPAD);
      if (has_mask) s += MLOAD(mr, i * (size_t)msi + j * (size_t)msj);
      const float p = lv == -INFINITY ? 0.0f : exp(s - lv);
      if (p == 0.0f) continue;
      const float ds = p * (local_dot(vv, dt + t * DPAD) - et[t]);
      local_axpy(gv, p, dt + t * DPAD);
      local_axpy(gk, ds, qt + t * DPAD);
    }
  }
  if (!live) return;
  if (has_dk) row_store(gk, scale, dk + (size_t)dk_off + r * HEAD_DIM);
  if (has_dv) row_store(gv, 1.0f, dv + (size_t)dv_off + r * HEAD_DIM);
}

__kernel RUMUS_REQD_WG(ATT_WG, 1, 1) void attn_dq_wg(
    global const real_t *q, ulong q_off, global const real_t *k, ulong k_off,
    global const real_t *v, ulong v_off, global const real_t *dout,
    ulong do_off, global const float *lse, ulong lse_off,
    global const float *delta, global real_t *dq, ulong dq_off, ATT_ARGS) {
  local float kt[ATT_BT * DPAD], vt[ATT_BT * DPAD];
  WG_ROWS(Tq);
  const size_t i = live ? me : r0, r = bh * (size_t)Tq + i;
  const size_t gend =
      causal ? min((size_t)Tk, min((size_t)Tq, r0 + ATT_WG)) : (size_t)Tk;
  const size_t jend = causal ? min((size_t)Tk, i + 1) : (size_t)Tk;
  const size_t kv0 = bh * (size_t)Tk * HEAD_DIM;
  global const mask_t *mr = mask_row(mask, m_off, bh, i, H, msb, msh, msi);
  float8 qv[DV], gov[DV], gq[DV];
  row_load(q + (size_t)q_off + r * HEAD_DIM, scale, qv);
  row_load(dout + (size_t)do_off + r * HEAD_DIM, 1.0f, gov);
  row_zero(gq);
  const float lv = lse[(size_t)lse_off + r], ev = delta[r];
  for (size_t j0 = 0; j0 < gend; j0 += ATT_BT) {
    const size_t n = min((size_t)ATT_BT, gend - j0);
    barrier(CLK_LOCAL_MEM_FENCE);
    tile_load(k + (size_t)k_off + kv0, j0, n, kt);
    tile_load(v + (size_t)v_off + kv0, j0, n, vt);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < (int)n; t++) {
      const size_t j = j0 + t;
      if (j >= jend) break;
      float s = local_dot(qv, kt + t * DPAD);
      if (has_mask) s += MLOAD(mr, j * (size_t)msj);
      const float p = lv == -INFINITY ? 0.0f : exp(s - lv);
      if (p == 0.0f) continue;
      const float ds = p * (local_dot(gov, vt + t * DPAD) - ev);
      local_axpy(gq, ds, kt + t * DPAD);
    }
  }
  if (!live) return;
  row_store(gq, scale, dq + (size_t)dq_off + r * HEAD_DIM);
}
