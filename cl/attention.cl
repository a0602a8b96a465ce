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
 * Row kernels (*_row, both variants for now; the CPU variant's design):
 * one work-item per query row (forward, dq) or key row (dk / dv), no
 * barriers, the row and its accumulators in private floats.  Keys (or
 * queries) go in blocks of KB = 8 so that the exponentials of a block are
 * one float8 rumus_exp_shifted8 (common.cl: PoCL's exp is far slower) and
 * the forward's running (max, sum) rescales the accumulator once per block.
 * Every sum runs in a fixed order (keys or queries ascending, D in float8
 * lanes then the tail), so a call gives the same bits on every run; no
 * atomics.
 */

#ifndef HEAD_DIM
#define HEAD_DIM 64 /* D: the host specialises every program on it */
#endif
#ifndef MASK_STORAGE
#define MASK_STORAGE F32 /* storage tag of the additive mask */
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

/* dst = p[0 .. HEAD_DIM) * s, zero-padded to DPAD. */
inline void row_load(global const real_t *p, float s, float *dst) {
  int d = 0;
  for (; d + 8 <= HEAD_DIM; d += 8) vstore8(LOAD8(p, d) * s, 0, dst + d);
  for (; d < HEAD_DIM; d++) dst[d] = LOAD(p, d) * s;
  for (; d < DPAD; d++) dst[d] = 0.0f;
}

/* a . b for a private row a and a stored row b: float8 lanes, then the
 * lanes' sum, then the tail. */
inline float row_dot(const float *a, global const real_t *b) {
  float8 acc = 0.0f;
  int d = 0;
  for (; d + 8 <= HEAD_DIM; d += 8) acc = fma(vload8(0, a + d), LOAD8(b, d), acc);
  float s = rumus_hsum8(acc);
  for (; d < HEAD_DIM; d++) s = fma(a[d], LOAD(b, d), s);
  return s;
}

/* acc += w * b for a stored row b. */
inline void row_axpy(float *acc, float w, global const real_t *b) {
  int d = 0;
  for (; d + 8 <= HEAD_DIM; d += 8)
    vstore8(fma((float8)(w), LOAD8(b, d), vload8(0, acc + d)), 0, acc + d);
  for (; d < HEAD_DIM; d++) acc[d] = fma(w, LOAD(b, d), acc[d]);
}

inline void row_scale(float *acc, float s) {
  for (int d = 0; d < DPAD; d += 8) vstore8(vload8(0, acc + d) * s, 0, acc + d);
}

inline void row_store(const float *acc, float s, global real_t *p) {
  int d = 0;
  for (; d + 8 <= HEAD_DIM; d += 8) STORE8(vload8(0, acc + d) * s, p, d);
  for (; d < HEAD_DIM; d++) STORE(acc[d] * s, p, d);
}

inline void row_zero(float *acc) {
  for (int d = 0; d < DPAD; d++) acc[d] = 0.0f;
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
  float qv[DPAD], acc[DPAD];
  row_load(qr, scale, qv);
  row_zero(acc);
  float m = -INFINITY, l = 0.0f;
  for (size_t j0 = 0; j0 < jend; j0 += KB) {
    const int nt = (int)min((size_t)KB, jend - j0);
    float sc[KB];
    for (int t = 0; t < KB; t++) {
      const size_t j = j0 + t;
      float s = -INFINITY;
      if (t < nt) {
        s = row_dot(qv, kb + j * HEAD_DIM);
        if (has_mask) s += MLOAD(mr, j * (size_t)msj);
      }
      sc[t] = s;
    }
    const float8 s8 = vload8(0, sc);
    const float mn = fmax(m, rumus_hmax8(s8));
    if (mn == -INFINITY) continue; /* nothing but -inf so far */
    /* m = -inf: alpha = 0 (acc and l are 0 anyway). */
    const float alpha = exp(m - mn);
    const float8 p = rumus_exp_shifted8(s8 - mn);
    l = fma(l, alpha, rumus_hsum8(p));
    row_scale(acc, alpha);
    float pp[KB];
    vstore8(p, 0, pp);
    for (int t = 0; t < nt; t++) row_axpy(acc, pp[t], vb + (j0 + t) * HEAD_DIM);
    m = mn;
  }
  /* A fully masked row (m = -inf, l = 0): out 0, lse -inf; a NaN l stays
   * NaN in both. */
  const float inv = m == -INFINITY ? 0.0f : 1.0f / l;
  row_store(acc, inv, orow);
  if (lse) *lse = m == -INFINITY ? -INFINITY : m + log(l);
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
  float kv[DPAD], vv[DPAD], gk[DPAD], gv[DPAD];
  row_load(k + (size_t)k_off + r * HEAD_DIM, scale, kv);
  row_load(v + (size_t)v_off + r * HEAD_DIM, 1.0f, vv);
  row_zero(gk);
  row_zero(gv);
  for (size_t i = i0; i < nq; i += KB) {
    const int nt = (int)min((size_t)KB, nq - i);
    float sc[KB], dp[KB], ls[KB], de[KB];
    for (int t = 0; t < KB; t++) {
      const size_t ii = i + t;
      float s = -INFINITY, g = 0.0f, e = 0.0f, lv = 0.0f;
      if (t < nt) {
        s = row_dot(kv, qb + ii * HEAD_DIM);
        if (has_mask) s += MLOAD(mr, ii * (size_t)msi + j * (size_t)msj);
        g = row_dot(vv, db + ii * HEAD_DIM);
        lv = lb[ii];
        e = eb[ii];
      }
      sc[t] = s;
      dp[t] = g;
      ls[t] = lv;
      de[t] = e;
    }
    const float8 p = block_p(vload8(0, sc), vload8(0, ls));
    const float8 ds = p * (vload8(0, dp) - vload8(0, de));
    float pp[KB], dd[KB];
    vstore8(p, 0, pp);
    vstore8(ds, 0, dd);
    for (int t = 0; t < nt; t++) {
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
  float qv[DPAD], gv[DPAD], gq[DPAD];
  row_load(q + (size_t)q_off + r * HEAD_DIM, scale, qv);
  row_load(dout + (size_t)do_off + r * HEAD_DIM, 1.0f, gv);
  row_zero(gq);
  const float8 l8 = (float8)(lse[(size_t)lse_off + r]);
  const float8 e8 = (float8)(delta[r]);
  for (size_t j0 = 0; j0 < jend; j0 += KB) {
    const int nt = (int)min((size_t)KB, jend - j0);
    float sc[KB], dp[KB];
    for (int t = 0; t < KB; t++) {
      const size_t j = j0 + t;
      float s = -INFINITY, g = 0.0f;
      if (t < nt) {
        s = row_dot(qv, kb + j * HEAD_DIM);
        if (has_mask) s += MLOAD(mr, j * (size_t)msj);
        g = row_dot(gv, vb + j * HEAD_DIM);
      }
      sc[t] = s;
      dp[t] = g;
    }
    const float8 ds = block_p(vload8(0, sc), l8) * (vload8(0, dp) - e8);
    float dd[KB];
    vstore8(ds, 0, dd);
    for (int t = 0; t < nt; t++) row_axpy(gq, dd[t], kb + (j0 + t) * HEAD_DIM);
  }
  row_store(gq, scale, dq + (size_t)dq_off + r * HEAD_DIM);
}
