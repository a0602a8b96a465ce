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
 * Row kernels (*_row, the fallback of the GPU variant, and the CPU
 * variant's under ATT_ROWS = 1): one work-item per query row (forward,
 * dq) or key row (dk / dv), no barriers, the row and its accumulators in
 * private floats; the *_rows kernels (CPU variant, ATT_ROWS = 2 or 4) do
 * the same for ATT_ROWS rows per work-item with the same bits (their
 * section below).  Keys (or
 * queries) go in blocks of KB = 8: their dot products run as 8
 * independent float8 chains (block_dots), their exponentials are one
 * float8 rumus_exp_shifted8 (common.cl: PoCL's exp is far slower), and
 * the forward's running (max, sum) rescales the accumulator once per block.
 * Tiled kernels (*_tile, GPU variant for HEAD_DIM <= 128 when the host
 * finds that the tiles fit; ATT_TILED): register-blocked, see their
 * section below.
 * Work-group kernels (*_wg, the GPU variant's fallback): a group of
 * ATT_WG work-items owns ATT_WG consecutive query rows (forward, dq) or
 * key rows (dk / dv) of one head, each work-item one row in private
 * floats; the rows it
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

/* A key block's scores from their dot products: the mask added, keys at
 * nt and past -inf. */
inline float8 block_scores(float8 dots, global const mask_t *mr,
                           int has_mask, ulong msj, size_t j0, int nt) {
  float mk[KB];
  for (int t = 0; t < KB; t++)
    mk[t] = has_mask && t < nt ? MLOAD(mr, (j0 + t) * (size_t)msj) : 0.0f;
  return select(dots + vload8(0, mk), (float8)(-INFINITY), block_past(nt));
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
    const float8 s8 =
        block_scores(block_dots(qv, kb, j0, nt), mr, has_mask, msj, j0, nt);
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

/* delta for the work-group variant: DELTA_LANES work-items per row, lane
 * l summing elements l, l + DELTA_LANES, ..., so that a warp's loads
 * cover whole rows contiguously (attn_delta_row's work-items read rows
 * HEAD_DIM apart), then the lanes' sums added by a fixed tree in local
 * memory.  DELTA_WG work-items per group (src/ops/attention.c). */
#define DELTA_LANES 16
#define DELTA_WG 256
__kernel RUMUS_REQD_WG(DELTA_WG, 1, 1) void attn_delta_wg(
    global const real_t *o, ulong o_off, global const real_t *dout,
    ulong do_off, global float *delta, ulong rows) {
  local float part[DELTA_WG];
  const size_t lid = get_local_id(0), lane = lid % DELTA_LANES;
  const size_t r = get_global_id(0) / DELTA_LANES;
  float s = 0.0f;
  if (r < rows) {
    global const real_t *orow = o + (size_t)o_off + r * HEAD_DIM;
    global const real_t *drow = dout + (size_t)do_off + r * HEAD_DIM;
    for (size_t d = lane; d < HEAD_DIM; d += DELTA_LANES)
      s = fma(LOAD(orow, d), LOAD(drow, d), s);
  }
  part[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = DELTA_LANES / 2; step > 0; step /= 2) {
    if (lane < step) part[lid] += part[lid + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lane == 0 && r < rows) delta[r] = part[lid];
}

/* The arguments of the dq kernels and of the dk / dv kernels (row, rows,
 * wg and tile alike). */
#define DQ_ARGS                                                              \
  global const real_t *q, ulong q_off, global const real_t *k, ulong k_off,  \
      global const real_t *v, ulong v_off, global const real_t *dout,        \
      ulong do_off, global const float *lse, ulong lse_off,                  \
      global const float *delta, global real_t *dq, ulong dq_off, ATT_ARGS
#define DKDV_ARGS                                                            \
  global const real_t *q, ulong q_off, global const real_t *k, ulong k_off,  \
      global const real_t *v, ulong v_off, global const real_t *dout,        \
      ulong do_off, global const float *lse, ulong lse_off,                  \
      global const float *delta, global real_t *dk, ulong dk_off,            \
      global real_t *dv, ulong dv_off, int has_dk, int has_dv, ATT_ARGS

/* dk and dv of one key row j: queries i >= i0 ascending in blocks. */
__kernel void attn_dkdv_row(DKDV_ARGS) {
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
__kernel void attn_dq_row(DQ_ARGS) {
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
    const float8 s8 =
        block_scores(block_dots(qv, kb, j0, nt), mr, has_mask, msj, j0, nt);
    const float8 p = block_p(s8, l8);
    float pp[KB], dd[KB];
    vstore8(p, 0, pp);
    vstore8(p * (block_dots(gv, vb, j0, nt) - e8), 0, dd);
    for (int t = 0; t < nt; t++)
      if (pp[t] != 0.0f) row_axpy(gq, dd[t], kb + (j0 + t) * HEAD_DIM);
  }
  row_store(gq, scale, dq + (size_t)dq_off + r * HEAD_DIM);
}

/* ---- Several rows per work-item (CPU variant, ATT_ROWS > 1) -------------- */

/* A work-item of the *_rows kernels owns NR consecutive query rows
 * (forward, dq) or key rows (dk / dv) of one head, so that each chunk of a
 * key (query) row it loads from cache feeds NR dot products and NR axpys
 * instead of one.  Each row's arithmetic is that of the one-row kernels
 * above, operation for operation, so the results are the same bits: the
 * dot product of every (row, key) pair is the same float8 chain and lane
 * reduction (hsum8x8 reduces every lane by the same tree), and each
 * accumulator sees the same fmas in the same key order.  Rows that see
 * fewer keys (causal) or start later (causal dk / dv) switch the other
 * lanes of a block off; a work-item's rows past the head's end load its
 * last row (valid memory), see no keys and store nothing. */
#ifndef ATT_ROWS
#define ATT_ROWS 1
#endif

#if ATT_ROWS > 1
#define NR ATT_ROWS
/* out[r] = a[r] . b_t, lane t, for the KB stored rows b_t = base + (j0 +
 * t) HEAD_DIM (lanes past nt repeat row nt - 1), one key at a time: its
 * chunks each feed the NR rows' chains.  On 2 AVX2 cores (PoCL) this ran
 * the backward at 2 rows 1.2-1.6 times the speed of passes over 2 or 4
 * keys (8 chains in flight, more than the fma latency needs, but more
 * values live). */
inline void rows_dots(float8 a[NR][DV], global const real_t *base, size_t j0,
                      int nt, float8 *out) {
  float8 acc[NR][KB];
  for (int t = 0; t < KB; t++) {
    global const real_t *b = base + (j0 + (size_t)min(t, nt - 1)) * HEAD_DIM;
    for (int r = 0; r < NR; r++) acc[r][t] = 0.0f;
    for (int c = 0; c < DV; c++) {
      const float8 y = chunk_load(b, c);
      for (int r = 0; r < NR; r++) acc[r][t] = fma(a[r][c], y, acc[r][t]);
    }
  }
  for (int r = 0; r < NR; r++) out[r] = hsum8x8(acc[r]);
}

/* acc[r] += w[r][t] b_t for the stored rows b_t = base + (j0 + t)
 * HEAD_DIM, t < nt, where on[r][t]; keys ascending for every row.  A full
 * block with every pair on (the usual case) runs chunk by chunk, each
 * row's chunk held while the block's keys are added. */
inline void rows_axpy(float8 acc[NR][DV], float w[NR][KB], int on[NR][KB],
                      global const real_t *base, size_t j0, int nt) {
  int all = nt == KB;
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < KB; t++) all &= on[r][t];
  global const real_t *b = base + j0 * HEAD_DIM;
  if (all) {
    for (int c = 0; c < DV; c++) {
      float8 x[NR];
      for (int r = 0; r < NR; r++) x[r] = acc[r][c];
      for (int t = 0; t < KB; t++) {
        const float8 y = chunk_load(b + t * HEAD_DIM, c);
        for (int r = 0; r < NR; r++) x[r] = fma((float8)(w[r][t]), y, x[r]);
      }
      for (int r = 0; r < NR; r++) acc[r][c] = x[r];
    }
    return;
  }
  for (int r = 0; r < NR; r++)
    for (int t = 0; t < nt; t++)
      if (on[r][t]) row_axpy(acc[r], w[r][t], b + t * HEAD_DIM);
}

/* The work-item's first row and head for T rows per head; returns from
 * the kernel for a padding work-item. */
#define ROWS_OWNER(T)                                                        \
  const size_t per = ((size_t)(T) + NR - 1) / NR;                            \
  const size_t bh = get_global_id(0) / per;                                  \
  if (bh * (size_t)(T) >= rows) return;                                      \
  const size_t first = (get_global_id(0) - bh * per) * NR

inline void rows_off(int *on, float *w) {
  for (int t = 0; t < KB; t++) {
    on[t] = 0;
    w[t] = 0.0f;
  }
}

/* fwd_row's step over the key block at j0 for one row that sees keys
 * below jend, from its dot products: the weights w[t] of the block's
 * values (on[t]: added). */
inline void fwd_step(float8 dots, global const mask_t *mr, int has_mask,
                     ulong msj, size_t j0, size_t jend, float *m, float *l,
                     float8 *acc, float *w, int *on) {
  rows_off(on, w);
  if (j0 >= jend) return;
  const int nt = (int)min((size_t)KB, jend - j0);
  const float8 s8 = block_scores(dots, mr, has_mask, msj, j0, nt);
  const float mn = fmax(*m, rumus_hmax8(s8));
  if (mn == -INFINITY) {
    if (any(isnan(s8))) *l = NAN;
    return;
  }
  const float alpha = exp(*m - mn);
  const float8 p = rumus_exp_shifted8(s8 - mn);
  *l = fma(*l, alpha, rumus_hsum8(p));
  row_scale(acc, alpha);
  vstore8(p, 0, w);
  for (int t = 0; t < KB; t++) on[t] = t < nt && w[t] != 0.0f;
  *m = mn;
}

__kernel void attn_fwd_rows(global const real_t *q, ulong q_off,
                            global const real_t *k, ulong k_off,
                            global const real_t *v, ulong v_off,
                            global real_t *o, ulong o_off, global float *lse,
                            ulong lse_off, int has_lse, ATT_ARGS) {
  ROWS_OWNER(Tq);
  const size_t kv0 = bh * (size_t)Tk * HEAD_DIM;
  global const real_t *kb = k + (size_t)k_off + kv0;
  global const real_t *vb = v + (size_t)v_off + kv0;
  float8 qv[NR][DV], acc[NR][DV];
  float m[NR], l[NR];
  size_t jend[NR], jmax = 0;
  global const mask_t *mr[NR];
  for (int r = 0; r < NR; r++) {
    const size_t i = min(first + r, (size_t)Tq - 1);
    jend[r] = first + r >= (size_t)Tq ? 0
              : causal                ? min((size_t)Tk, i + 1)
                                      : (size_t)Tk;
    jmax = max(jmax, jend[r]);
    mr[r] = mask_row(mask, m_off, bh, i, H, msb, msh, msi);
    row_load(q + (size_t)q_off + (bh * (size_t)Tq + i) * HEAD_DIM, scale,
             qv[r]);
    row_zero(acc[r]);
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (size_t j0 = 0; j0 < jmax; j0 += KB) {
    const int nt = (int)min((size_t)KB, jmax - j0);
    float8 dots[NR];
    float w[NR][KB];
    int on[NR][KB];
    rows_dots(qv, kb, j0, nt, dots);
    for (int r = 0; r < NR; r++)
      fwd_step(dots[r], mr[r], has_mask, msj, j0, jend[r], &m[r], &l[r],
               acc[r], w[r], on[r]);
    rows_axpy(acc, w, on, vb, j0, nt);
  }
  for (int r = 0; r < NR && first + r < (size_t)Tq; r++) {
    const size_t row = bh * (size_t)Tq + first + r;
    const int empty = m[r] == -INFINITY && l[r] == 0.0f;
    row_store(acc[r], empty ? 0.0f : 1.0f / l[r],
              o + (size_t)o_off + row * HEAD_DIM);
    if (has_lse)
      lse[(size_t)lse_off + row] = empty ? -INFINITY : m[r] + log(l[r]);
  }
}

/* attn_dq_row's step for one row over the key block at j0 from the
 * scores' and dP's dot products: the weights w[t] (dS) of the block's
 * keys. */
inline void dq_step(float8 sd, float8 pd, global const mask_t *mr,
                    int has_mask, ulong msj, size_t j0, size_t jend,
                    float8 l8, float8 e8, float *w, int *on) {
  rows_off(on, w);
  if (j0 >= jend) return;
  const int nt = (int)min((size_t)KB, jend - j0);
  const float8 s8 = block_scores(sd, mr, has_mask, msj, j0, nt);
  const float8 p = block_p(s8, l8);
  float pp[KB];
  vstore8(p, 0, pp);
  vstore8(p * (pd - e8), 0, w);
  for (int t = 0; t < KB; t++) on[t] = t < nt && pp[t] != 0.0f;
}

__kernel void attn_dq_rows(DQ_ARGS) {
  ROWS_OWNER(Tq);
  const size_t kv0 = bh * (size_t)Tk * HEAD_DIM;
  global const real_t *kb = k + (size_t)k_off + kv0;
  global const real_t *vb = v + (size_t)v_off + kv0;
  float8 qv[NR][DV], gv[NR][DV], gq[NR][DV], l8[NR], e8[NR];
  size_t jend[NR], jmax = 0;
  global const mask_t *mr[NR];
  for (int r = 0; r < NR; r++) {
    const size_t i = min(first + r, (size_t)Tq - 1);
    const size_t row = bh * (size_t)Tq + i;
    jend[r] = first + r >= (size_t)Tq ? 0
              : causal                ? min((size_t)Tk, i + 1)
                                      : (size_t)Tk;
    jmax = max(jmax, jend[r]);
    mr[r] = mask_row(mask, m_off, bh, i, H, msb, msh, msi);
    row_load(q + (size_t)q_off + row * HEAD_DIM, scale, qv[r]);
    row_load(dout + (size_t)do_off + row * HEAD_DIM, 1.0f, gv[r]);
    row_zero(gq[r]);
    l8[r] = (float8)(lse[(size_t)lse_off + row]);
    e8[r] = (float8)(delta[row]);
  }
  for (size_t j0 = 0; j0 < jmax; j0 += KB) {
    const int nt = (int)min((size_t)KB, jmax - j0);
    float8 sd[NR], pd[NR];
    float w[NR][KB];
    int on[NR][KB];
    rows_dots(qv, kb, j0, nt, sd);
    rows_dots(gv, vb, j0, nt, pd);
    for (int r = 0; r < NR; r++)
      dq_step(sd[r], pd[r], mr[r], has_mask, msj, j0, jend[r], l8[r], e8[r],
              w[r], on[r]);
    rows_axpy(gq, w, on, kb, j0, nt);
  }
  for (int r = 0; r < NR && first + r < (size_t)Tq; r++)
    row_store(gq[r], scale,
              dq + (size_t)dq_off + (bh * (size_t)Tq + first + r) * HEAD_DIM);
}

/* attn_dkdv_row's step for key row j (queries from istart) over the
 * query block at i: the weights wv[t] (P) and wk[t] (dS) of the block's
 * dout and q rows. */
inline void dkdv_step(float8 sd, float8 pd, global const mask_t *mr,
                      int has_mask, ulong msi, ulong msj, size_t j,
                      size_t istart, size_t i, int nt, float8 ls8,
                      float8 de8, float *wv, float *wk, int *on) {
  float mk[KB];
  int in[KB];
  for (int t = 0; t < KB; t++) {
    in[t] = t < nt && i + t >= istart;
    mk[t] = has_mask && in[t]
                ? MLOAD(mr, (i + t) * (size_t)msi + j * (size_t)msj)
                : 0.0f;
  }
  const float8 s8 =
      select(sd + vload8(0, mk), (float8)(-INFINITY), block_past(nt));
  const float8 p = block_p(s8, ls8);
  vstore8(p, 0, wv);
  vstore8(p * (pd - de8), 0, wk);
  for (int t = 0; t < KB; t++) on[t] = in[t] && wv[t] != 0.0f;
}

__kernel void attn_dkdv_rows(DKDV_ARGS) {
  ROWS_OWNER(Tk);
  const size_t nq = (size_t)Tq, q0 = bh * nq;
  global const real_t *qb = q + (size_t)q_off + q0 * HEAD_DIM;
  global const real_t *db = dout + (size_t)do_off + q0 * HEAD_DIM;
  global const float *lb = lse + (size_t)lse_off + q0;
  global const float *eb = delta + q0;
  global const mask_t *mr = mask_row(mask, m_off, bh, 0, H, msb, msh, msi);
  float8 kv[NR][DV], vv[NR][DV], gk[NR][DV], gv[NR][DV];
  size_t jr[NR], istart[NR], imin = nq;
  for (int r = 0; r < NR; r++) {
    jr[r] = min(first + r, (size_t)Tk - 1);
    const size_t row = bh * (size_t)Tk + jr[r];
    istart[r] = first + r >= (size_t)Tk ? nq : causal ? jr[r] : 0;
    imin = min(imin, istart[r]);
    row_load(k + (size_t)k_off + row * HEAD_DIM, scale, kv[r]);
    row_load(v + (size_t)v_off + row * HEAD_DIM, 1.0f, vv[r]);
    row_zero(gk[r]);
    row_zero(gv[r]);
  }
  for (size_t i = imin; i < nq; i += KB) {
    const int nt = (int)min((size_t)KB, nq - i);
    float ls[KB], de[KB], wv[NR][KB], wk[NR][KB];
    int on[NR][KB];
    for (int t = 0; t < KB; t++) {
      ls[t] = t < nt ? lb[i + t] : 0.0f;
      de[t] = t < nt ? eb[i + t] : 0.0f;
    }
    float8 sd[NR], pd[NR];
    rows_dots(kv, qb, i, nt, sd);
    rows_dots(vv, db, i, nt, pd);
    for (int r = 0; r < NR; r++)
      dkdv_step(sd[r], pd[r], mr, has_mask, msi, msj, jr[r], istart[r], i,
                nt, vload8(0, ls), vload8(0, de), wv[r], wk[r], on[r]);
    rows_axpy(gv, wv, on, db, i, nt);
    rows_axpy(gk, wk, on, qb, i, nt);
  }
  for (int r = 0; r < NR && first + r < (size_t)Tk; r++) {
    const size_t row = bh * (size_t)Tk + first + r;
    if (has_dk) row_store(gk[r], scale, dk + (size_t)dk_off + row * HEAD_DIM);
    if (has_dv) row_store(gv[r], 1.0f, dv + (size_t)dv_off + row * HEAD_DIM);
  }
}
#endif /* ATT_ROWS > 1 */

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

__kernel RUMUS_REQD_WG(ATT_WG, 1, 1) void attn_dkdv_wg(DKDV_ARGS) {
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

__kernel RUMUS_REQD_WG(ATT_WG, 1, 1) void attn_dq_wg(DQ_ARGS) {
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

/* ---- Tiled kernels (GPU variant, HEAD_DIM <= 128) ------------------------
 *
 * Register-blocked tiles, as cl/gemm.cl's tiled product.  A group owns a
 * tile of BM rows (queries for the forward and dq, keys for dk / dv) and
 * loops over tiles of BN rows of the other side; its (BM / RM) x (BN / RN)
 * work-items are (ty, tx), tid = ty * NTX + tx, and work-item (tx, ty)
 * holds the RM x RN block of the BM x BN score tile at rows ty RM + r and
 * columns tx RN + c, and the RM x RD block of its output rows at columns
 * d = tx RD + c of the head (RD = DPT / NTX, DPT = HEAD_DIM rounded up to
 * NTX).  Blocks 4 wide are read from local memory as float4s (one read
 * per 4 values: fewer load instructions per fma), so every staged pitch
 * is a whole number of float4s.
 * Products read local memory only.  Scores (S = Q K^T, dP = dO V^T) walk
 * the head dim in chunks of DC: the group stages the chunk of both sides
 * d-major (X[d][row], rows padded to B + 4 floats), then every work-item
 * does DC rank-1 updates of its block from registers (RM + RN loads per
 * RM RN fmas).  Output updates (O += P V, dq += dS K, dv += P^T dO, dk +=
 * dS^T Q) stage P or dS in local memory (the score tile, transposed) and
 * the other side's rows DC at a time ([row][d]), again as rank-1 updates.
 * Each product is one walk over its chunks (CHUNK_WALK: one local buffer
 * or, ATT_DBUF, two).
 * The forward's row max across the NTX work-items sharing a row goes
 * through local memory each key tile (red_max: one partial per work-item,
 * read back in tx order); each work-item keeps its part of the row sum
 * (its columns, rescaled with the row), added in tx order at the end:
 * deterministic.
 * The staged rows past T and the head dims past HEAD_DIM are zeros; scores
 * of padding rows, of keys past Tk and causal ones are -inf (probability
 * 0).  A staged row chunk holding a NaN or an infinity sets a local stamp,
 * and the update from it then skips probability-0 terms (as the row
 * kernels do: such a value reaches only the rows that attend to it);
 * otherwise the update runs without that test.
 */

#ifndef ATT_TILED
#define ATT_TILED 0 /* bits: 1 forward, 2 backward tiled kernels (the host
                       checked that their tiles fit) */
#endif
#if ATT_TILED

#ifndef ATT_BM
#define ATT_BM 64 /* rows a group owns */
#endif
#ifndef ATT_BN
#define ATT_BN 64 /* rows of the other side per loop step */
#endif
#ifndef ATT_RM
#define ATT_RM 4 /* score rows per work-item */
#endif
#ifndef ATT_RN
#define ATT_RN 4 /* score columns per work-item */
#endif
#ifndef ATT_DC
#define ATT_DC 8 /* head dims (rows) per staged chunk: forward, dq */
#endif
#ifndef ATT_DCKV
#define ATT_DCKV 8 /* the same for dk / dv */
#endif
#ifndef ATT_PREFETCH
#define ATT_PREFETCH 0 /* 1: a chunk's global loads overlap the previous
                          chunk's product (more registers); 0: not */
#endif
#ifndef ATT_DBUF
#define ATT_DBUF 0 /* 1: two local buffers per staged chunk, one barrier a
                      chunk; 0: one buffer, two barriers (CHUNK_WALK) */
#endif
#ifndef ATT_INTERIOR
#define ATT_INTERIOR 2 /* bit 1: the forward's, bit 2: the backward's tiles
                          wholly inside the matrix, below the diagonal when
                          causal and without a mask skip tile_score (the
                          same bits either way) */
#endif
#ifndef ATT_EXP2
#define ATT_EXP2 2 /* bit 1: the forward's, bit 2: the backward's scores in
                      log2 units (log2 e folded into the scale, exp2 for
                      exp, the log-sum-exp stored in natural log); a clear
                      bit: natural log units and exp */
#endif
#ifndef ATT_V4
#define ATT_V4 0 /* 1: staging moves float4s (LOAD4: one wide load where the
                    host set RUMUS_ALIGN4) with one index computation per
                    four values; needs HEAD_DIM, the chunk depths and DPT
                    multiples of 4 (the host checks) */
#endif

/* Every loop of constant trip count in the tiled kernels is unrolled, so
 * that the register blocks stay in registers (a block indexed in a loop
 * that a compiler leaves rolled goes to private memory). */
#define AUNROLL _Pragma("unroll")

#define NTY (ATT_BM / ATT_RM)
#define NTX (ATT_BN / ATT_RN)
#define NTT (NTY * NTX)
#define DPT ((HEAD_DIM + NTX - 1) / NTX * NTX)
#define RD (DPT / NTX)
/* Pitches of a staged BM-row (BN-row) side, d-major: whole float4s, and
 * 4 banks apart from one d to the next. */
#define LDM (ATT_BM + 4)
#define LDN (ATT_BN + 4)
#define LDB (ATT_BM > ATT_BN ? LDM : LDN)
#define ALIGN16 __attribute__((aligned(16)))
/* Staging is split in two so that a chunk's global loads can be issued
 * before the product of the previous chunk (CHUNK_WALK): fetch_* loads a
 * work-item's share (at most npf elements, npf = PF(rows, dims)) into r,
 * put_* stores it into a free local buffer. */
#if ATT_V4
/* (With ATT_V4 whole float4s: element e of a share is float4 e / 4.) */
#define PF(nb, dc) (4 * (((nb) * (dc) / 4 + NTT - 1) / NTT))
#else
#define PF(nb, dc) (((nb) * (dc) + NTT - 1) / NTT)
#endif

/* The float4 of a share at row `row`, dims d .. d + 3 of p, into r[0 ..
 * 4) (zero unless in: row < T, d < HEAD_DIM); 1 if one is not finite. */
inline int fetch4(global const real_t *p, size_t row, size_t T, int d,
                  int in, float s, float *r) {
  float4 v = (float4)(0.0f);
  if (in && row < T && d < HEAD_DIM) v = LOAD4(p, row * HEAD_DIM + d) * s;
  r[0] = v.x;
  r[1] = v.y;
  r[2] = v.z;
  r[3] = v.w;
  return !isfinite(v.x) | !isfinite(v.y) | !isfinite(v.z) | !isfinite(v.w);
}

/* Rows t0 .. t0 + nb of a [T, HEAD_DIM] matrix p (rows past T zero), dims
 * d0 .. d0 + dc, times s: the work-item's share into r. */
inline void fetch_dmajor(global const real_t *p, size_t t0, size_t T,
                         int d0, int dc, int nb, float s, float *r,
                         int npf) {
#if ATT_V4
  const int q = dc / 4; /* float4s per row */
  AUNROLL for (int u = 0; u < npf / 4; u++) {
    const int e = get_local_id(0) + u * NTT, t = e / q;
    fetch4(p, t0 + (size_t)t, T, d0 + 4 * (e - t * q), e < nb * q, s,
           r + 4 * u);
  }
#else
  AUNROLL for (int u = 0; u < npf; u++) {
    const int e = get_local_id(0) + u * NTT;
    const int t = e / dc, dd = e - t * dc;
    const int d = d0 + dd;
    const size_t row = t0 + (size_t)t;
    r[u] = e < nb * dc && row < T && d < HEAD_DIM
               ? LOAD(p, row * HEAD_DIM + d) * s
               : 0.0f;
  }
#endif
}

/* The share fetched by fetch_dmajor, d-major into x[dd * ld + t]. */
inline void put_dmajor(const float *r, int dc, int nb, int ld,
                       local float *x, int npf) {
#if ATT_V4
  const int q = dc / 4;
  AUNROLL for (int u = 0; u < npf / 4; u++) {
    const int e = get_local_id(0) + u * NTT, t = e / q;
    const int dd = 4 * (e - t * q);
    if (e < nb * q) {
      AUNROLL for (int k = 0; k < 4; k++) x[(dd + k) * ld + t] = r[4 * u + k];
    }
  }
#else
  AUNROLL for (int u = 0; u < npf; u++) {
    const int e = get_local_id(0) + u * NTT;
    const int t = e / dc, dd = e - t * dc;
    if (e < nb * dc) x[dd * ld + t] = r[u];
  }
#endif
}

/* Rows t0 .. t0 + dc of p (past T zero), the work-item's share of the
 * [dc][DPT] chunk, into r; 1 if one is not finite. */
inline int fetch_rows(global const real_t *p, size_t t0, size_t T, int dc,
                      float *r, int npf) {
  int nf = 0;
#if ATT_V4
  const int q = DPT / 4;
  AUNROLL for (int u = 0; u < npf / 4; u++) {
    const int e = get_local_id(0) + u * NTT, t = e / q;
    nf |= fetch4(p, t0 + (size_t)t, T, 4 * (e - t * q), e < dc * q, 1.0f,
                 r + 4 * u);
  }
#else
  AUNROLL for (int u = 0; u < npf; u++) {
    const int e = get_local_id(0) + u * NTT;
    const int t = e / DPT, d = e - t * DPT;
    const size_t row = t0 + (size_t)t;
    r[u] = e < dc * DPT && row < T && d < HEAD_DIM
               ? LOAD(p, row * HEAD_DIM + d)
               : 0.0f;
    nf |= !isfinite(r[u]);
  }
#endif
  return nf;
}

/* The share fetched by fetch_rows into x[t * DPT + d]; stamps *bad with
 * `stamp` when nf (a value not finite). */
inline void put_rows(const float *r, int dc, local float *x, int npf,
                     local int *bad, int stamp, int nf) {
#if ATT_V4
  AUNROLL for (int u = 0; u < npf / 4; u++) {
    const int e = get_local_id(0) + u * NTT;
    if (e < dc * DPT / 4) /* x is 16-byte aligned: one wide store */
      ((local float4 *)x)[e] =
          (float4)(r[4 * u], r[4 * u + 1], r[4 * u + 2], r[4 * u + 3]);
  }
#else
  AUNROLL for (int u = 0; u < npf; u++) {
    const int e = get_local_id(0) + u * NTT;
    if (e < dc * DPT) x[e] = r[u];
  }
#endif
  if (nf) *bad = stamp; /* every writer writes the same value */
}

/* dst[0 .. N) = p[0 .. N) for a local p: float4 reads where N is a
 * multiple of 4 (the caller keeps p 16-byte aligned then). */
#define LOCAL_READ(dst, N, p)                                                \
  do {                                                                       \
    if ((N) % 4 == 0) {                                                      \
      AUNROLL for (int q_ = 0; q_ < (N) / 4; q_++) {                         \
        const float4 v_ = ((local const float4 *)(p))[q_];                   \
        dst[4 * q_] = v_.x;                                                  \
        dst[4 * q_ + 1] = v_.y;                                              \
        dst[4 * q_ + 2] = v_.z;                                              \
        dst[4 * q_ + 3] = v_.w;                                              \
      }                                                                      \
    } else {                                                                 \
      AUNROLL for (int q_ = 0; q_ < (N); q_++) dst[q_] = (p)[q_];            \
    }                                                                        \
  } while (0)

/* acc[r][c] += sum_t a[t lda + ty NR + r] b[t ldb + tx NC + c], t < n:
 * rank-1 updates from registers, each side read as float4s where its
 * block is (a multiple of 4 wide; lda, ldb and the bases keep them
 * aligned).  SAFE: terms whose a is 0 are skipped. */
#define RANK1(acc, NR, NC, a, lda, b, ldb, n, SAFE)                          \
  AUNROLL for (int t_ = 0; t_ < (n); t_++) {                                 \
    float ar_[NR], br_[NC];                                                  \
    LOCAL_READ(ar_, NR, (a) + t_ * (lda) + ty * (NR));                       \
    LOCAL_READ(br_, NC, (b) + t_ * (ldb) + tx * (NC));                       \
    AUNROLL for (int r_ = 0; r_ < NR; r_++)                                  \
      AUNROLL for (int c_ = 0; c_ < NC; c_++)                                \
        if (!(SAFE) || ar_[r_] != 0.0f)                                      \
          acc[r_][c_] = fma(ar_[r_], br_[c_], acc[r_][c_]);                  \
  }

/* Column c of a work-item's RM x RN block x into the transposed tile
 * p[(tx RN + c) LDM + ty RM + r]: float4 writes where RM is a multiple
 * of 4. */
#define COLUMN_WRITE(p, x, c)                                                \
  do {                                                                       \
    local float *const w_ = (p) + (tx * ATT_RN + (c)) * LDM + ty * ATT_RM;   \
    if (ATT_RM % 4 == 0) {                                                   \
      AUNROLL for (int q_ = 0; q_ < ATT_RM / 4; q_++)                        \
        ((local float4 *)w_)[q_] = (float4)(x[4 * q_][c], x[4 * q_ + 1][c],  \
                                            x[4 * q_ + 2][c],                \
                                            x[4 * q_ + 3][c]);               \
    } else {                                                                 \
      AUNROLL for (int q_ = 0; q_ < ATT_RM; q_++) w_[q_] = x[q_][c];         \
    }                                                                        \
  } while (0)

/* The group's head bh and first owned row, for T owned rows per head;
 * LAST_FIRST: a head's last tile first (causal queries: the tiles with the
 * most keys start first, so the short ones fill the end of the launch). */
#define TILE_OWNER(T, LAST_FIRST)                                            \
  const size_t nblk_ = ((size_t)(T) + ATT_BM - 1) / ATT_BM;                  \
  const size_t bh = get_group_id(0) / nblk_;                                 \
  const size_t b_ = get_group_id(0) - bh * nblk_;                            \
  const size_t o0 = ((LAST_FIRST) ? nblk_ - 1 - b_ : b_) * ATT_BM;           \
  const int tx = (int)get_local_id(0) % NTX, ty = (int)get_local_id(0) / NTX

/* The scores of the kernels of ATT_EXP2's bit `set` (1: forward, 2:
 * backward) are in units of SUNIT(set): natural log, or log2 where the
 * bit is set, the score product then carrying log2 e in its scale, SEXP
 * being exp2 and the stored log-sum-exp converted back (fewer
 * instructions per probability on GPUs than exp).  `set` is a constant
 * at every use, so each kernel compiles one of the two forms. */
#define EXP2_IN(set) ((ATT_EXP2 & (set)) != 0)
#define SUNIT(set) (EXP2_IN(set) ? 1.44269504088896341f : 1.0f)
#define SEXP(set, x) (EXP2_IN(set) ? exp2(x) : exp(x))
#define SLOG(set, x) (EXP2_IN(set) ? log2(x) : log(x))

/* The score of (query i, key j) from the product s (already scaled), or
 * -inf outside the matrix or past the diagonal when causal. */
inline float tile_score(int set, float s, size_t i, size_t j, ulong Tq,
                        ulong Tk, int causal, int has_mask,
                        global const mask_t *mb, ulong msi, ulong msj) {
  if (i >= (size_t)Tq || j >= (size_t)Tk || (causal && j > i))
    return -INFINITY;
  return has_mask
             ? s + MLOAD(mb, i * (size_t)msi + j * (size_t)msj) * SUNIT(set)
             : s;
}

/* 1 if the kernels of ATT_INTERIOR's bit `set` (1: forward, 2: backward)
 * skip tile_score on the tile of rows r0 .. r0 + nr (queries) and columns
 * c0 .. c0 + nc (keys) because every score of it is valid and unmasked, so
 * that tile_score would return it unchanged (uniform over the group). */
inline int tile_inside(int set, size_t r0, int nr, size_t c0, int nc,
                       size_t Tr, size_t Tc, int causal, int has_mask) {
  return (ATT_INTERIOR & set) && !has_mask && r0 + nr <= Tr &&
         c0 + nc <= Tc && (!causal || c0 + nc - 1 <= r0);
}

/* max that propagates NaN (a NaN score makes its row NaN). */
inline float nmax(float a, float b) {
  return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}

/* Stores the RM x RD block o (times f[r]) at rows o0 + ty RM + r < T. */
inline void block_store(float o[ATT_RM][RD], const float *f,
                        global real_t *p, size_t o0, size_t T, int tx,
                        int ty) {
  AUNROLL for (int r = 0; r < ATT_RM; r++) {
    const size_t row = o0 + (size_t)(ty * ATT_RM + r);
    if (row >= T) continue;
    AUNROLL for (int c = 0; c < RD; c++) {
      const int d = tx * RD + c;
      if (d < HEAD_DIM) STORE(o[r][c] * f[r], p, row * HEAD_DIM + d);
    }
  }
}

/* The walk over the chunks x = 0, DCX, ... < n of one pass (a product
 * over staged chunks).  FETCH(x) loads chunk x's share into registers,
 * PUT(x, b) stores it into local buffer b, PRODUCT(x, b) is the product
 * from buffer b.  Every work-item runs it (n is uniform); the caller has
 * passed a barrier since the last read of buffer 0, and the walk ends
 * with one (its buffers are free again).
 * ATT_DBUF 1, double-buffered: chunk 0 goes into buffer 0, then per chunk
 * the product from buffer b, the next chunk's global loads (before the
 * product with ATT_PREFETCH: they land in registers meanwhile, else after
 * it) and their store into buffer 1 - b, and one barrier: the buffer that
 * a store overwrites was last read before the previous barrier.  Two
 * chunks per loop step, so that b is a constant in each.
 * ATT_DBUF 0, one buffer: per chunk a barrier, the store, a barrier and
 * the product (two barriers a chunk, half the local memory). */
#if ATT_DBUF
#define CHUNK_WALK(n, DCX, FETCH, PUT, PRODUCT)                              \
  do {                                                                       \
    FETCH(0);                                                                \
    PUT(0, 0);                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
    for (int x_ = 0; x_ < (n); x_ += 2 * (DCX)) {                            \
      CHUNK_STEP(n, DCX, FETCH, PUT, PRODUCT, x_, 0);                        \
      if (x_ + (DCX) < (n)) {                                                \
        CHUNK_STEP(n, DCX, FETCH, PUT, PRODUCT, x_ + (DCX), 1);              \
      }                                                                      \
    }                                                                        \
  } while (0)
/* One chunk x of the walk, from buffer b. */
#define CHUNK_STEP(n, DCX, FETCH, PUT, PRODUCT, x, b)                        \
  do {                                                                       \
    const int more_ = (x) + (DCX) < (n);                                     \
    if (ATT_PREFETCH && more_) {                                             \
      FETCH((x) + (DCX));                                                    \
    }                                                                        \
    PRODUCT(x, b);                                                           \
    if (more_) {                                                             \
      if (!ATT_PREFETCH) {                                                   \
        FETCH((x) + (DCX));                                                  \
      }                                                                      \
      PUT((x) + (DCX), 1 - (b));                                             \
    }                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
  } while (0)
#else
#define CHUNK_WALK(n, DCX, FETCH, PUT, PRODUCT)                              \
  do {                                                                       \
    if (ATT_PREFETCH) {                                                      \
      FETCH(0);                                                              \
    }                                                                        \
    for (int x_ = 0; x_ < (n); x_ += (DCX)) {                                \
      if (!ATT_PREFETCH) {                                                   \
        FETCH(x_);                                                           \
      }                                                                      \
      barrier(CLK_LOCAL_MEM_FENCE);                                          \
      PUT(x_, 0);                                                            \
      barrier(CLK_LOCAL_MEM_FENCE);                                          \
      if (ATT_PREFETCH && x_ + (DCX) < (n)) {                                \
        FETCH(x_ + (DCX));                                                   \
      }                                                                      \
      PRODUCT(x_, 0);                                                        \
    }                                                                        \
    barrier(CLK_LOCAL_MEM_FENCE);                                            \
  } while (0)
#endif

/* acc += T R for the transposed score tile T in tile ([row of the other
 * side][owned row], pitch LDM: P or dS) and the rows R of p from t0 on
 * (past T zero), DCX at a time through the two buffers of `half` floats
 * at area (the output products: O += P V, dq += dS K, dv += P^T dout, dk
 * += dS^T q).  A chunk holding a value that is not finite stamps its
 * buffer's flag in bad[2] with the chunk's number (stamps only grow), and
 * its update then skips the terms whose T is 0.  A walk over chunks. */
#define ROWS_PASS(NAME, DCX)                                                 \
  inline void NAME(float acc[ATT_RM][RD], global const real_t *p,           \
                   size_t t0, size_t T, local const float *tile,             \
                   local float *area, int hsz, local int *bad, int *stamp,  \
                   int tx, int ty) {                                         \
    const int n = (int)min((size_t)ATT_BN, T - t0), base = *stamp;           \
    float rr[PF(DCX, DPT)];                                                  \
    int nf = 0;                                                              \
    ROWS_WALK(DCX);                                                          \
    *stamp = base + (n + (DCX) - 1) / (DCX);                                 \
  }
#define ROWS_FETCH(x) nf = fetch_rows(p, t0 + (size_t)(x), T, DCXX, rr,     \
                                      PF(DCXX, DPT))
#define ROWS_PUT(x, b)                                                       \
  put_rows(rr, DCXX, area + (b) * hsz, PF(DCXX, DPT), bad + (b),            \
           base + (x) / DCXX + 1, nf)
#define ROWS_PRODUCT(x, b)                                                   \
  if (bad[b] == base + (x) / DCXX + 1) {                                     \
    RANK1(acc, ATT_RM, RD, tile + (x) * LDM, LDM, area + (b) * hsz, DPT,    \
          DCXX, 1);                                                          \
  } else {                                                                   \
    RANK1(acc, ATT_RM, RD, tile + (x) * LDM, LDM, area + (b) * hsz, DPT,    \
          DCXX, 0);                                                          \
  }
#define ROWS_WALK(DCX) CHUNK_WALK(n, DCX, ROWS_FETCH, ROWS_PUT, ROWS_PRODUCT)

/* sc += A B^T (and dp += C E^T with FOUR) over the head dims, DCX at a
 * time d-major through the two buffers of `half` floats at area: A (and
 * C) are the BM rows from ta (past Ta zero) of pa (pc), A times sa; B
 * (and E) the BN rows from tb (past Tb zero) of pb (pe).  A walk over
 * chunks. */
#define SCORES_PASS(NAME, DCX, FOUR)                                         \
  inline void NAME(float sc[ATT_RM][ATT_RN], float dp[ATT_RM][ATT_RN],      \
                   global const real_t *pa, global const real_t *pc,         \
                   size_t ta, size_t Ta, float sa, global const real_t *pb,  \
                   global const real_t *pe, size_t tb, size_t Tb,            \
                   local float *area, int hsz, int tx, int ty) {            \
    float ra[PF(ATT_BM, DCX)], rb[PF(ATT_BN, DCX)];                          \
    float rc[FOUR ? PF(ATT_BM, DCX) : 1], re[FOUR ? PF(ATT_BN, DCX) : 1];    \
    SCORES_WALK(DCX);                                                        \
  }
#define SC_FETCH(x)                                                          \
  fetch_dmajor(pa, ta, Ta, x, DCXX, ATT_BM, sa, ra, PF(ATT_BM, DCXX));       \
  fetch_dmajor(pb, tb, Tb, x, DCXX, ATT_BN, 1.0f, rb, PF(ATT_BN, DCXX));     \
  if (FOURX) {                                                               \
    fetch_dmajor(pc, ta, Ta, x, DCXX, ATT_BM, 1.0f, rc, PF(ATT_BM, DCXX));   \
    fetch_dmajor(pe, tb, Tb, x, DCXX, ATT_BN, 1.0f, re, PF(ATT_BN, DCXX));   \
  }
/* The buffer: A, B, then C, E, each DCX d-rows of pitch LDB. */
#define SC_SIDE(b, s) (area + (b) * hsz + (s) * DCXX * LDB)
#define SC_PUT(x, b)                                                         \
  put_dmajor(ra, DCXX, ATT_BM, LDM, SC_SIDE(b, 0), PF(ATT_BM, DCXX));        \
  put_dmajor(rb, DCXX, ATT_BN, LDN, SC_SIDE(b, 1), PF(ATT_BN, DCXX));        \
  if (FOURX) {                                                               \
    put_dmajor(rc, DCXX, ATT_BM, LDM, SC_SIDE(b, 2), PF(ATT_BM, DCXX));      \
    put_dmajor(re, DCXX, ATT_BN, LDN, SC_SIDE(b, 3), PF(ATT_BN, DCXX));      \
  }
#define SC_PRODUCT(x, b)                                                     \
  RANK1(sc, ATT_RM, ATT_RN, SC_SIDE(b, 0), LDM, SC_SIDE(b, 1), LDN, DCXX,   \
        0);                                                                  \
  if (FOURX) {                                                               \
    RANK1(dp, ATT_RM, ATT_RN, SC_SIDE(b, 2), LDM, SC_SIDE(b, 3), LDN, DCXX, \
          0);                                                                \
  }
#define SCORES_WALK(DCX)                                                     \
  CHUNK_WALK(HEAD_DIM, DCX, SC_FETCH, SC_PUT, SC_PRODUCT)

/* The passes of each chunk depth (DCXX, FOURX: the depth and the operand
 * count inside the walk macros). */
#define DCXX ATT_DC
#define FOURX 0
SCORES_PASS(scores2_dc, ATT_DC, 0)
#undef FOURX
#define FOURX 1
SCORES_PASS(scores4_dc, ATT_DC, 1)
ROWS_PASS(rows_dc, ATT_DC)
#undef DCXX
#define DCXX ATT_DCKV
SCORES_PASS(scores4_dckv, ATT_DCKV, 1)
ROWS_PASS(rows_dckv, ATT_DCKV)
#undef DCXX
#undef FOURX

/* Floats of one chunk buffer of depth dc: n d-major sides or one row
 * chunk; NBUF buffers. */
#define HALF(n, dc)                                                          \
  ((n) * (dc) * LDB > (dc) * DPT ? (n) * (dc) * LDB : (dc) * DPT)
#define NBUF (ATT_DBUF ? 2 : 1)

/* The forward's online-softmax step for one key tile: scores sc (-inf
 * where invalid) into probabilities in pt[k][q], the running max m of
 * each owned row and the work-item's part ls of its sum (its columns)
 * updated, alpha[r] the rescale of the row's output.  pt is complete
 * after the caller's next barrier. */
inline void fwd_softmax(float sc[ATT_RM][ATT_RN], float *m, float *ls,
                        float *alpha, local float *red_max, local float *pt,
                        int tx, int ty) {
  AUNROLL for (int r = 0; r < ATT_RM; r++) {
    float mx = -INFINITY;
    AUNROLL for (int c = 0; c < ATT_RN; c++) mx = nmax(mx, sc[r][c]);
    red_max[(ty * ATT_RM + r) * NTX + tx] = mx;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  AUNROLL for (int r = 0; r < ATT_RM; r++) {
    const int row = ty * ATT_RM + r;
    float mn = m[r], part[NTX];
    LOCAL_READ(part, NTX, red_max + row * NTX);
    AUNROLL for (int t = 0; t < NTX; t++) mn = nmax(mn, part[t]);
    /* All -inf so far: shift by 0 (probabilities 0, alpha irrelevant). */
    const float sh = mn == -INFINITY ? 0.0f : mn;
    alpha[r] = SEXP(1, m[r] - sh);
    float ps = 0.0f;
    AUNROLL for (int c = 0; c < ATT_RN; c++) {
      sc[r][c] = SEXP(1, sc[r][c] - sh); /* the probability, in place */
      ps += sc[r][c];
    }
    ls[r] = fma(ls[r], alpha[r], ps);
    m[r] = mn;
  }
  AUNROLL for (int c = 0; c < ATT_RN; c++) COLUMN_WRITE(pt, sc, c);
}

/* The row sums l[r] of the owned rows from the work-items' parts ls (tx
 * ascending: deterministic), through red (free: the caller's barrier). */
inline void fwd_row_sums(const float *ls, float *l, local float *red, int tx,
                         int ty) {
  AUNROLL for (int r = 0; r < ATT_RM; r++)
    red[(ty * ATT_RM + r) * NTX + tx] = ls[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  AUNROLL for (int r = 0; r < ATT_RM; r++) {
    float part[NTX], sum = 0.0f;
    LOCAL_READ(part, NTX, red + (ty * ATT_RM + r) * NTX);
    AUNROLL for (int t = 0; t < NTX; t++) sum += part[t];
    l[r] = sum;
  }
}

#if ATT_TILED & 1
__kernel RUMUS_REQD_WG(NTT, 1, 1) void attn_fwd_tile(
    global const real_t *q, ulong q_off, global const real_t *k, ulong k_off,
    global const real_t *v, ulong v_off, global real_t *o, ulong o_off,
    global float *lse, ulong lse_off, int has_lse, ATT_ARGS) {
  local float area[NBUF * HALF(2, ATT_DC)] ALIGN16, pt[ATT_BN * LDM] ALIGN16;
  local float red_max[ATT_BM * NTX] ALIGN16;
  local int bad[2];
  TILE_OWNER(Tq, causal);
  if (get_local_id(0) < 2) bad[get_local_id(0)] = 0;
  global const real_t *qb = q + (size_t)q_off + bh * (size_t)Tq * HEAD_DIM;
  global const real_t *kb = k + (size_t)k_off + bh * (size_t)Tk * HEAD_DIM;
  global const real_t *vb = v + (size_t)v_off + bh * (size_t)Tk * HEAD_DIM;
  global const mask_t *mb = mask_row(mask, m_off, bh, 0, H, msb, msh, msi);
  /* Keys: all, or (causal) up to the tile's last query. */
  const size_t kend =
      causal ? min((size_t)Tk, min((size_t)Tq, o0 + ATT_BM)) : (size_t)Tk;
  float acc[ATT_RM][RD], m[ATT_RM], ls[ATT_RM], alpha[ATT_RM];
  AUNROLL for (int r = 0; r < ATT_RM; r++) {
    m[r] = -INFINITY;
    ls[r] = 0.0f;
    AUNROLL for (int c = 0; c < RD; c++) acc[r][c] = 0.0f;
  }
  int stamp = 0;
  for (size_t j0 = 0; j0 < kend; j0 += ATT_BN) {
    float sc[ATT_RM][ATT_RN];
    AUNROLL for (int r = 0; r < ATT_RM; r++)
      AUNROLL for (int c = 0; c < ATT_RN; c++) sc[r][c] = 0.0f;
    scores2_dc(sc, sc, qb, qb, o0, Tq, scale * SUNIT(1), kb, kb, j0, Tk,
               area, HALF(2, ATT_DC), tx, ty);
    if (!tile_inside(1, o0, ATT_BM, j0, ATT_BN, Tq, kend, causal, has_mask))
      AUNROLL for (int r = 0; r < ATT_RM; r++)
        AUNROLL for (int c = 0; c < ATT_RN; c++)
          sc[r][c] = tile_score(1, sc[r][c], o0 + (size_t)(ty * ATT_RM + r),
                                j0 + (size_t)(tx * ATT_RN + c), Tq, kend,
                                causal, has_mask, mb, msi, msj);
    fwd_softmax(sc, m, ls, alpha, red_max, pt, tx, ty);
    AUNROLL for (int r = 0; r < ATT_RM; r++)
      AUNROLL for (int c = 0; c < RD; c++) acc[r][c] *= alpha[r];
    rows_dc(acc, vb, j0, kend, pt, area, HALF(2, ATT_DC), bad, &stamp, tx,
            ty);
  }
  float f[ATT_RM], l[ATT_RM];
  fwd_row_sums(ls, l, red_max, tx, ty);
  AUNROLL for (int r = 0; r < ATT_RM; r++) {
    const int empty = m[r] == -INFINITY && l[r] == 0.0f;
    f[r] = empty ? 0.0f : 1.0f / l[r];
    const size_t i = o0 + (size_t)(ty * ATT_RM + r);
    if (has_lse && tx == 0 && i < (size_t)Tq)
      lse[(size_t)lse_off + bh * (size_t)Tq + i] =
          empty ? -INFINITY : (m[r] + SLOG(1, l[r])) * (1.0f / SUNIT(1));
  }
  block_store(acc, f, o + (size_t)o_off + bh * (size_t)Tq * HEAD_DIM, o0,
              Tq, tx, ty);
}

#endif /* ATT_TILED & 1 */

#if ATT_TILED & 2
/* P and dS of a (query, key) pair from the scaled, masked score s, the
 * dot product dp = dout_i . v_j, and the query's lse and delta: P = 0
 * where lse is -inf (a fully masked row) or s is -inf; dS = 0 where P is
 * (a NaN in v reaches only rows that attend to its key).  s and ls in
 * SUNIT(2). */
inline float2 tile_grad(float s, float dp, float ls, float de) {
  const float p = ls == -INFINITY ? 0.0f : SEXP(2, s - ls);
  return (float2)(p, p == 0.0f ? 0.0f : p * (dp - de));
}

__kernel RUMUS_REQD_WG(NTT, 1, 1) void attn_dq_tile(DQ_ARGS) {
  local float area[NBUF * HALF(4, ATT_DC)] ALIGN16, dst[ATT_BN * LDM] ALIGN16;
  local int bad[2];
  TILE_OWNER(Tq, causal);
  if (get_local_id(0) < 2) bad[get_local_id(0)] = 0;
  const size_t q0 = bh * (size_t)Tq;
  global const real_t *qb = q + (size_t)q_off + q0 * HEAD_DIM;
  global const real_t *db = dout + (size_t)do_off + q0 * HEAD_DIM;
  global const real_t *kb = k + (size_t)k_off + bh * (size_t)Tk * HEAD_DIM;
  global const real_t *vb = v + (size_t)v_off + bh * (size_t)Tk * HEAD_DIM;
  global const mask_t *mb = mask_row(mask, m_off, bh, 0, H, msb, msh, msi);
  const size_t kend =
      causal ? min((size_t)Tk, min((size_t)Tq, o0 + ATT_BM)) : (size_t)Tk;
  float acc[ATT_RM][RD], ls[ATT_RM], de[ATT_RM];
  AUNROLL for (int r = 0; r < ATT_RM; r++) {
    const size_t i = o0 + (size_t)(ty * ATT_RM + r);
    ls[r] = i < (size_t)Tq ? lse[(size_t)lse_off + q0 + i] * SUNIT(2)
                           : -INFINITY;
    de[r] = i < (size_t)Tq ? delta[q0 + i] : 0.0f;
    AUNROLL for (int c = 0; c < RD; c++) acc[r][c] = 0.0f;
  }
  int stamp = 0;
  for (size_t j0 = 0; j0 < kend; j0 += ATT_BN) {
    float sc[ATT_RM][ATT_RN], dp[ATT_RM][ATT_RN];
    AUNROLL for (int r = 0; r < ATT_RM; r++)
      AUNROLL for (int c = 0; c < ATT_RN; c++) sc[r][c] = dp[r][c] = 0.0f;
    scores4_dc(sc, dp, qb, db, o0, Tq, scale * SUNIT(2), kb, vb, j0, Tk,
               area, HALF(4, ATT_DC), tx, ty);
    const int inside =
        tile_inside(2, o0, ATT_BM, j0, ATT_BN, Tq, kend, causal, has_mask);
    AUNROLL for (int r = 0; r < ATT_RM; r++)
      AUNROLL for (int c = 0; c < ATT_RN; c++) {
        const float s =
            inside ? sc[r][c]
                   : tile_score(2, sc[r][c], o0 + (size_t)(ty * ATT_RM + r),
                                j0 + (size_t)(tx * ATT_RN + c), Tq, kend,
                                causal, has_mask, mb, msi, msj);
        sc[r][c] = tile_grad(s, dp[r][c], ls[r], de[r]).y; /* dS */
      }
    /* dst is free: the walks end with a barrier. */
    AUNROLL for (int c = 0; c < ATT_RN; c++) COLUMN_WRITE(dst, sc, c);
    rows_dc(acc, kb, j0, kend, dst, area, HALF(4, ATT_DC), bad, &stamp, tx,
            ty);
  }
  float f[ATT_RM];
  AUNROLL for (int r = 0; r < ATT_RM; r++) f[r] = scale;
  block_store(acc, f, dq + (size_t)dq_off + q0 * HEAD_DIM, o0, Tq, tx, ty);
}

/* dk and dv: the group owns BM keys (rows ty RM + r of its tile) and
 * walks the queries in tiles of BN (columns tx RN + c).  Per query tile,
 * S^T and dP^T, then dv += P^T dout and dk += dS^T q through one local
 * tile (P, then dS). */
__kernel RUMUS_REQD_WG(NTT, 1, 1) void attn_dkdv_tile(DKDV_ARGS) {
  local float area[NBUF * HALF(4, ATT_DCKV)] ALIGN16, ps[ATT_BN * LDM] ALIGN16;
  local float lt[ATT_BN], et[ATT_BN];
  local int bad[2];
  TILE_OWNER(Tk, 0);
  if (get_local_id(0) < 2) bad[get_local_id(0)] = 0;
  const size_t q0 = bh * (size_t)Tq;
  global const real_t *qb = q + (size_t)q_off + q0 * HEAD_DIM;
  global const real_t *db = dout + (size_t)do_off + q0 * HEAD_DIM;
  global const real_t *kb = k + (size_t)k_off + bh * (size_t)Tk * HEAD_DIM;
  global const real_t *vb = v + (size_t)v_off + bh * (size_t)Tk * HEAD_DIM;
  global const mask_t *mb = mask_row(mask, m_off, bh, 0, H, msb, msh, msi);
  float gk[ATT_RM][RD], gv[ATT_RM][RD];
  AUNROLL for (int r = 0; r < ATT_RM; r++)
    AUNROLL for (int c = 0; c < RD; c++) gk[r][c] = gv[r][c] = 0.0f;
  /* Queries: all, or (causal) from the tile's first key on. */
  const size_t qstart = causal ? o0 : 0;
  int stamp = 0;
  for (size_t i0 = qstart; i0 < (size_t)Tq; i0 += ATT_BN) {
    float sc[ATT_RM][ATT_RN], dp[ATT_RM][ATT_RN];
    AUNROLL for (int r = 0; r < ATT_RM; r++)
      AUNROLL for (int c = 0; c < ATT_RN; c++) sc[r][c] = dp[r][c] = 0.0f;
    /* The last reads of lt and et were before the walks' barriers; the
     * first barrier of the scores' walk publishes them. */
    for (int t = get_local_id(0); t < ATT_BN; t += NTT) {
      const size_t i = i0 + (size_t)t;
      lt[t] = i < (size_t)Tq ? lse[(size_t)lse_off + q0 + i] * SUNIT(2)
                             : -INFINITY;
      et[t] = i < (size_t)Tq ? delta[q0 + i] : 0.0f;
    }
    scores4_dckv(sc, dp, kb, vb, o0, Tk, scale * SUNIT(2), qb, db, i0, Tq,
                 area, HALF(4, ATT_DCKV), tx, ty);
    /* Transposed: score (key row r, query column c). */
    const int inside =
        tile_inside(2, i0, ATT_BN, o0, ATT_BM, Tq, Tk, causal, has_mask);
    AUNROLL for (int r = 0; r < ATT_RM; r++)
      AUNROLL for (int c = 0; c < ATT_RN; c++) {
        const int qi = tx * ATT_RN + c;
        const float s =
            inside ? sc[r][c]
                   : tile_score(2, sc[r][c], i0 + (size_t)qi,
                                o0 + (size_t)(ty * ATT_RM + r), Tq, Tk,
                                causal, has_mask, mb, msi, msj);
        const float2 g = tile_grad(s, dp[r][c], lt[qi], et[qi]);
        sc[r][c] = g.x; /* P and dS, in place */
        dp[r][c] = g.y;
      }
    /* ps is free: the walks end with a barrier. */
    AUNROLL for (int c = 0; c < ATT_RN; c++) COLUMN_WRITE(ps, sc, c);
    rows_dckv(gv, db, i0, Tq, ps, area, HALF(4, ATT_DCKV), bad, &stamp, tx,
              ty);
    AUNROLL for (int c = 0; c < ATT_RN; c++) COLUMN_WRITE(ps, dp, c);
    rows_dckv(gk, qb, i0, Tq, ps, area, HALF(4, ATT_DCKV), bad, &stamp, tx,
              ty);
  }
  float f[ATT_RM];
  AUNROLL for (int r = 0; r < ATT_RM; r++) f[r] = scale;
  const size_t k0b = bh * (size_t)Tk * HEAD_DIM;
  if (has_dk) block_store(gk, f, dk + (size_t)dk_off + k0b, o0, Tk, tx, ty);
  AUNROLL for (int r = 0; r < ATT_RM; r++) f[r] = 1.0f;
  if (has_dv) block_store(gv, f, dv + (size_t)dv_off + k0b, o0, Tk, tx, ty);
}

#endif /* ATT_TILED & 2 */

#endif /* ATT_TILED */
