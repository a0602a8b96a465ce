/*
 * gemm.cl - general matrix product C = alpha * op(A) * op(B) + beta * C on
 * row-major matrices, op(X) = X or X^T, for every M, N, K >= 0.
 *
 * Layout: op(A) is M x K, op(B) is K x N, C is M x N.  A is stored [M, K]
 * with row pitch lda (TA = 1: stored [K, M]); B is stored [K, N] with pitch
 * ldb (TB = 1: stored [N, K]); C is [M, N] with pitch ldc.  Every matrix
 * arrives as (buffer, ulong element offset), and batch z of a launch starts
 * at offset + z * stride (stride 0 repeats one matrix over the batch).
 * Index math is size_t: tensors over 2^31 elements are addressed correctly.
 * With beta == 0 the old C is never read, so NaN there does not propagate.
 * K == 0 gives beta * C (the host passes alpha = 0 then).  Where the
 * host passes a bias (rumus_gemm_bias; has_bias 0 and an unread buffer
 * otherwise), bias[n] of C's type joins every element of column n as C
 * is stored, after beta * C.
 *
 * GPU variant (gemm_tiled): one work-group of RTSN x RTSM = (TSN / WPTN) x
 * (TSM / WPTM) work-items computes a TSM x TSN tile of C; each work-item
 * holds a WPTM x WPTN register block.  K is walked in steps of TSK: the
 * work-group copies a TSM x TSK slice of op(A) and a TSK x TSN slice of
 * op(B) into local memory, both stored k-major (As[k][m], Bs[k][n]) so the
 * inner loop reads float4s.  Transposes only change how a slice is read:
 * the contiguous direction of the stored matrix is read as float4 and
 * written straight or transposed into local memory; loads outside the
 * matrix give 0, so edge tiles need no other care.  The next slice is
 * loaded into registers while the current one is multiplied (DBUF = 2:
 * stored into a second local slice too, one barrier per step).  Work-item
 * (tx, ty) owns rows ty * 4 + g * RTSM * 4 + r (g < WPTM / 4, r < 4) and
 * columns tx * 4 + h * RTSN * 4 + c of the tile: float4 reads of local
 * memory without bank conflicts, float4 stores of C.  Grid: dimension 0
 * walks column tiles, 1 row tiles, 2 the batch (local size 1: exact).
 *
 *      K ->             N ->
 *   +-------+        +----------+        +----------+
 * M | A     |  x   K |  B       |   =  M |  C       |
 *   | tile  |        | TSK x TSN|        | TSM x TSN|
 *   +-------+        +----------+        +----------+
 *
 * CPU variant (PoCL runs the work-items of a group as a loop on one core):
 * op(A) and op(B) are first packed by gemm_pack_a / gemm_pack_b into
 * scratch buffers of zero-padded panels,
 *     Ap[q][k][r] = op(A)[q * MR + r][k]     (M rounded up to MR)
 *     Bp[p][k][c] = op(B)[k][p * NR + c]     (N rounded up to NR = 16 NV)
 * so every transpose, pitch and alignment becomes one contiguous stream
 * (unpacked, rows 2048 floats apart fell into the same cache sets and ran
 * at 59 GFLOP/s against 150 packed on 2 busy AVX-512 cores; idle, the
 * packed product reaches 320-340).
 * gemm_packed: work-item (q, p) computes the MR x NR block of C from the
 * panels q and p: per k, NV float16 loads of Bp and MR broadcasts of Ap
 * feed MR x NV float16 accumulators (register blocking, no barriers, no
 * local memory).  Work-items of a group share the B panel (in L2).
 *
 * Storage: A and B are of the program's main storage (RUMUS_STORAGE), C
 * of RUMUS_STORAGE_C (the same, or F32 under 16-bit A and B).  Both
 * variants convert to float where they read the storage (the tiled loads,
 * the packs) and round only where C is stored, so the local slices, the
 * packed panels and every product and sum are float whatever the storage.
 *
 * Accumulation order is fixed (k ascending, fma), so results are
 * deterministic for a given device and variant.
 */

#ifndef RUMUS_STORAGE_C
#define RUMUS_STORAGE_C RUMUS_STORAGE /* storage of C: F32, F16, BF16 */
#endif

/* C's storage: its element type and LOAD / STORE forms (common.cl). */
typedef RUMUS_TYPE(RUMUS_STORAGE_C) c_t;
#define LOADC(p, i) RUMUS_LOAD(RUMUS_STORAGE_C, p, i)
#define STOREC(v, p, i) RUMUS_STORE(RUMUS_STORAGE_C, v, p, i)
#if RUMUS_ALIGN4
#define LOADC4(p, i) RUMUS_LOADA(RUMUS_STORAGE_C, 4, p, i)
#define STOREC4(v, p, i) RUMUS_STOREA(RUMUS_STORAGE_C, 4, v, p, i)
#else
#define LOADC4(p, i) RUMUS_LOADN(RUMUS_STORAGE_C, 4, p, i)
#define STOREC4(v, p, i) RUMUS_STOREN(RUMUS_STORAGE_C, 4, v, p, i)
#endif
#define LOADC16(p, i) RUMUS_LOADN(RUMUS_STORAGE_C, 16, p, i)
#define STOREC16(v, p, i) RUMUS_STOREN(RUMUS_STORAGE_C, 16, v, p, i)

#ifndef TA
#define TA 0 /* 1: A is stored [K, M] and op(A) = A^T */
#endif
#ifndef TB
#define TB 0 /* 1: B is stored [N, K] and op(B) = B^T */
#endif

/* GPU variant tunables. */
#ifndef TSM
#define TSM 128 /* rows of C per work-group */
#endif
#ifndef TSN
#define TSN 128 /* columns of C per work-group */
#endif
#ifndef TSK
#define TSK 8 /* depth of the slices staged in local memory */
#endif
#ifndef WPTM
#define WPTM 8 /* rows of C per work-item (multiple of 4) */
#endif
#ifndef WPTN
#define WPTN 8 /* columns of C per work-item (multiple of 4) */
#endif
#ifndef LPAD
#define LPAD 4 /* padding of local rows, in floats (multiple of 4) */
#endif
#ifndef DBUF
#define DBUF 1 /* local slices per operand: 1, or 2 (one barrier per step) */
#endif

/* CPU variant tunables. */
#ifndef MR
#define MR 6 /* rows of C per work-item */
#endif
#ifndef NV
#define NV 4 /* float16 vectors per row of a work-item's block */
#endif
#define NR (16 * NV) /* columns of C per work-item */

#define RTSM (TSM / WPTM) /* work-group extent along rows (local id 1) */
#define RTSN (TSN / WPTN) /* work-group extent along columns (local id 0) */
#define WGS (RTSM * RTSN)
#define LPTA (TSM * TSK / (4 * WGS)) /* float4 loads of A per work-item */
#define LPTB (TSN * TSK / (4 * WGS)) /* float4 loads of B per work-item */
#define LSA (TSK * (TSM + LPAD)) /* floats of one local slice of A */
#define LSB (TSK * (TSN + LPAD))

#if (WPTM % 4) || (WPTN % 4) || (TSK % 4) || (LPAD % 4)
#error "WPTM, WPTN, TSK and LPAD must be multiples of 4"
#endif
#if (TSM * TSK) % (4 * WGS) || (TSN * TSK) % (4 * WGS)
#error "a slice of A or B must split into whole float4s per work-item"
#endif

#define UNROLL _Pragma("unroll")

/* Element (i, k) of op(A) and (k, j) of op(B) in storage with pitch ld. */
#if TA
#define A_IDX(i, k, ld) ((size_t)(k) * (ld) + (size_t)(i))
#else
#define A_IDX(i, k, ld) ((size_t)(i) * (ld) + (size_t)(k))
#endif
#if TB
#define B_IDX(k, j, ld) ((size_t)(j) * (ld) + (size_t)(k))
#else
#define B_IDX(k, j, ld) ((size_t)(k) * (ld) + (size_t)(j))
#endif

/* ---- GPU variant --------------------------------------------------------- */

/* Loads the work-item's share of the TSM x TSK slice of op(A) at (m0, k0)
 * into registers; elements outside M x K are 0.  float4 s covers four
 * consecutive elements along the stored matrix's contiguous direction. */
inline void tiled_load_a(float4 *ra, global const real_t *A, size_t lda,
                         size_t M, size_t K, size_t m0, size_t k0, int tid) {
  UNROLL for (int s = 0; s < LPTA; s++) {
    const int idx = tid + s * WGS;
#if TA
    const size_t gm = m0 + (size_t)(idx % (TSM / 4)) * 4;
    const size_t gk = k0 + (size_t)(idx / (TSM / 4));
    if (gk < K && gm + 3 < M) {
      ra[s] = LOAD4(A, A_IDX(gm, gk, lda));
    } else {
      float4 v = 0.0f;
      if (gk < K) {
        if (gm < M) v.x = LOAD(A, A_IDX(gm, gk, lda));
        if (gm + 1 < M) v.y = LOAD(A, A_IDX(gm + 1, gk, lda));
        if (gm + 2 < M) v.z = LOAD(A, A_IDX(gm + 2, gk, lda));
      }
      ra[s] = v;
    }
#else
    const size_t gk = k0 + (size_t)(idx % (TSK / 4)) * 4;
    const size_t gm = m0 + (size_t)(idx / (TSK / 4));
    if (gm < M && gk + 3 < K) {
      ra[s] = LOAD4(A, A_IDX(gm, gk, lda));
    } else {
      float4 v = 0.0f;
      if (gm < M) {
        if (gk < K) v.x = LOAD(A, A_IDX(gm, gk, lda));
        if (gk + 1 < K) v.y = LOAD(A, A_IDX(gm, gk + 1, lda));
        if (gk + 2 < K) v.z = LOAD(A, A_IDX(gm, gk + 2, lda));
      }
      ra[s] = v;
    }
#endif
  }
}

/* The same for the TSK x TSN slice of op(B) at (k0, n0). */
inline void tiled_load_b(float4 *rb, global const real_t *B, size_t ldb,
                         size_t N, size_t K, size_t n0, size_t k0, int tid) {
  UNROLL for (int s = 0; s < LPTB; s++) {
    const int idx = tid + s * WGS;
#if TB
    const size_t gk = k0 + (size_t)(idx % (TSK / 4)) * 4;
    const size_t gn = n0 + (size_t)(idx / (TSK / 4));
    if (gn < N && gk + 3 < K) {
      rb[s] = LOAD4(B, B_IDX(gk, gn, ldb));
    } else {
      float4 v = 0.0f;
      if (gn < N) {
        if (gk < K) v.x = LOAD(B, B_IDX(gk, gn, ldb));
        if (gk + 1 < K) v.y = LOAD(B, B_IDX(gk + 1, gn, ldb));
        if (gk + 2 < K) v.z = LOAD(B, B_IDX(gk + 2, gn, ldb));
      }
      rb[s] = v;
    }
#else
    const size_t gn = n0 + (size_t)(idx % (TSN / 4)) * 4;
    const size_t gk = k0 + (size_t)(idx / (TSN / 4));
    if (gk < K && gn + 3 < N) {
      rb[s] = LOAD4(B, B_IDX(gk, gn, ldb));
    } else {
      float4 v = 0.0f;
      if (gk < K) {
        if (gn < N) v.x = LOAD(B, B_IDX(gk, gn, ldb));
        if (gn + 1 < N) v.y = LOAD(B, B_IDX(gk, gn + 1, ldb));
        if (gn + 2 < N) v.z = LOAD(B, B_IDX(gk, gn + 2, ldb));
      }
      rb[s] = v;
    }
#endif
  }
}

/* Writes the registers of tiled_load_a / tiled_load_b into the k-major
 * local slices As[k][m] and Bs[k][n] (row pitch TSM + LPAD, TSN + LPAD). */
inline void tiled_store_a(local float *As, const float4 *ra, int tid) {
  UNROLL for (int s = 0; s < LPTA; s++) {
    const int idx = tid + s * WGS;
#if TA
    const int m = (idx % (TSM / 4)) * 4, k = idx / (TSM / 4);
    *(local float4 *)(As + k * (TSM + LPAD) + m) = ra[s];
#else
    const int k = (idx % (TSK / 4)) * 4, m = idx / (TSK / 4);
    As[(k + 0) * (TSM + LPAD) + m] = ra[s].x;
    As[(k + 1) * (TSM + LPAD) + m] = ra[s].y;
    As[(k + 2) * (TSM + LPAD) + m] = ra[s].z;
    As[(k + 3) * (TSM + LPAD) + m] = ra[s].w;
#endif
  }
}

inline void tiled_store_b(local float *Bs, const float4 *rb, int tid) {
  UNROLL for (int s = 0; s < LPTB; s++) {
    const int idx = tid + s * WGS;
#if TB
    const int k = (idx % (TSK / 4)) * 4, n = idx / (TSK / 4);
    Bs[(k + 0) * (TSN + LPAD) + n] = rb[s].x;
    Bs[(k + 1) * (TSN + LPAD) + n] = rb[s].y;
    Bs[(k + 2) * (TSN + LPAD) + n] = rb[s].z;
    Bs[(k + 3) * (TSN + LPAD) + n] = rb[s].w;
#else
    const int n = (idx % (TSN / 4)) * 4, k = idx / (TSN / 4);
    *(local float4 *)(Bs + k * (TSN + LPAD) + n) = rb[s];
#endif
  }
}

/* C[m][n .. n + 3] = alpha * acc + beta * C + bias[n .. n + 3] (bias
 * NULL: none), guarded against N. */
inline void tiled_store_c(global c_t *C, size_t ldc, size_t m, size_t n,
                          size_t N, float4 acc, float alpha, float beta,
                          global const c_t *bias) {
  const size_t at = m * ldc + n;
  float4 v = alpha * acc;
  if (n + 3 < N) {
    if (beta != 0.0f) v += beta * LOADC4(C, at);
    if (bias) v += RUMUS_LOADN(RUMUS_STORAGE_C, 4, bias, n);
    STOREC4(v, C, at);
  } else {
    float e[4] = {v.x, v.y, v.z, v.w};
    for (int c = 0; c < 4 && n + c < N; c++) {
      float r = e[c];
      if (beta != 0.0f) r += beta * LOADC(C, at + c);
      if (bias) r += LOADC(bias, n + c);
      STOREC(r, C, at + c);
    }
  }
}

/* acc += the products of one TSK-deep pair of local slices. */
inline void tiled_multiply(float acc[WPTM][WPTN], local const float *As,
                           local const float *Bs, int tx, int ty) {
  UNROLL for (int k = 0; k < TSK; k++) {
    float a[WPTM], b[WPTN];
    UNROLL for (int g = 0; g < WPTM / 4; g++) {
      float4 v = *(local const float4 *)(As + k * (TSM + LPAD) + ty * 4 +
                                         g * RTSM * 4);
      a[g * 4 + 0] = v.x;
      a[g * 4 + 1] = v.y;
      a[g * 4 + 2] = v.z;
      a[g * 4 + 3] = v.w;
    }
    UNROLL for (int h = 0; h < WPTN / 4; h++) {
      float4 v = *(local const float4 *)(Bs + k * (TSN + LPAD) + tx * 4 +
                                         h * RTSN * 4);
      b[h * 4 + 0] = v.x;
      b[h * 4 + 1] = v.y;
      b[h * 4 + 2] = v.z;
      b[h * 4 + 3] = v.w;
    }
    UNROLL for (int i = 0; i < WPTM; i++)
      UNROLL for (int j = 0; j < WPTN; j++)
        acc[i][j] = fma(a[i], b[j], acc[i][j]);
  }
}

/* As and Bs hold DBUF slices each (LSA, LSB floats apart). */
inline void gemm_tiled_body(global const real_t *A, size_t lda,
                            global const real_t *B, size_t ldb,
                            global c_t *C, size_t ldc, size_t M, size_t N,
                            size_t K, float alpha, float beta,
                            global const c_t *bias, local float *As,
                            local float *Bs) {
  const int tx = (int)get_local_id(0), ty = (int)get_local_id(1);
  const int tid = ty * RTSN + tx;
  const size_t m0 = get_group_id(1) * (size_t)TSM;
  const size_t n0 = get_group_id(0) * (size_t)TSN;

  float acc[WPTM][WPTN];
  UNROLL for (int i = 0; i < WPTM; i++)
    UNROLL for (int j = 0; j < WPTN; j++) acc[i][j] = 0.0f;

  float4 ra[LPTA], rb[LPTB];
  tiled_load_a(ra, A, lda, M, K, m0, 0, tid);
  tiled_load_b(rb, B, ldb, N, K, n0, 0, tid);
  const size_t ntiles = (K + TSK - 1) / TSK;
#if DBUF == 2
  /* Two local slices: slice t is multiplied while t + 1 is stored into the
   * other one, one barrier per step. */
  tiled_store_a(As, ra, tid);
  tiled_store_b(Bs, rb, tid);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t t = 0; t < ntiles; t++) {
    const int cur = (int)(t & 1);
    if (t + 1 < ntiles) {
      tiled_load_a(ra, A, lda, M, K, m0, (t + 1) * TSK, tid);
      tiled_load_b(rb, B, ldb, N, K, n0, (t + 1) * TSK, tid);
    }
    tiled_multiply(acc, As + cur * LSA, Bs + cur * LSB, tx, ty);
    if (t + 1 < ntiles) {
      tiled_store_a(As + (1 - cur) * LSA, ra, tid);
      tiled_store_b(Bs + (1 - cur) * LSB, rb, tid);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#else
  /* One local slice; the next one waits in registers. */
  for (size_t t = 0; t < ntiles; t++) {
    tiled_store_a(As, ra, tid);
    tiled_store_b(Bs, rb, tid);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t + 1 < ntiles) { /* the next slice travels during the products */
      tiled_load_a(ra, A, lda, M, K, m0, (t + 1) * TSK, tid);
      tiled_load_b(rb, B, ldb, N, K, n0, (t + 1) * TSK, tid);
    }
    tiled_multiply(acc, As, Bs, tx, ty);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif

  UNROLL for (int g = 0; g < WPTM / 4; g++)
    UNROLL for (int r = 0; r < 4; r++) {
      const size_t m = m0 + (size_t)(ty * 4 + g * RTSM * 4 + r);
      if (m < M) {
        UNROLL for (int h = 0; h < WPTN / 4; h++) {
          const size_t n = n0 + (size_t)(tx * 4 + h * RTSN * 4);
          const int i = g * 4 + r, j = h * 4;
          if (n < N)
            tiled_store_c(C, ldc, m, n, N,
                          (float4)(acc[i][j], acc[i][j + 1], acc[i][j + 2],
                                   acc[i][j + 3]),
                          alpha, beta, bias);
        }
      }
    }
}

__kernel RUMUS_REQD_WG(RTSN, RTSM, 1)
void gemm_tiled(
    global const real_t *A, ulong a_off, ulong lda, ulong stride_a,
    global const real_t *B, ulong b_off, ulong ldb, ulong stride_b,
    global c_t *C, ulong c_off, ulong ldc, ulong stride_c, ulong M,
    ulong N, ulong K, float alpha, float beta, global const c_t *bias,
    ulong bias_off, int has_bias) {
  /* float4 arrays: the slices are read and written as float4, which needs
   * 16-byte alignment (a float array is only 4-byte aligned). */
  local float4 As[DBUF * LSA / 4];
  local float4 Bs[DBUF * LSB / 4];
  const size_t z = get_global_id(2); /* exact: local size 1 along the batch */
  gemm_tiled_body(A + (size_t)a_off + z * (size_t)stride_a, lda,
                  B + (size_t)b_off + z * (size_t)stride_b, ldb,
                  C + (size_t)c_off + z * (size_t)stride_c, ldc, M, N, K,
                  alpha, beta, has_bias ? bias + (size_t)bias_off : 0,
                  (local float *)As, (local float *)Bs);
}

/* Split-K's second pass (GPU variant, src/ops/gemm.c): C = the sum of
 * the S float partials P[s][m][n] (pitch ldp, slices sp apart; alpha is
 * in them) in slice order + beta * C + bias[n], one work-item per
 * element. */
__kernel void gemm_splitk_sum(global const float *P, ulong ldp, ulong sp,
                              ulong S, global c_t *C, ulong c_off, ulong ldc,
                              ulong M, ulong N, float beta,
                              global const c_t *bias, ulong bias_off,
                              int has_bias) {
  const size_t n = get_global_id(0), m = get_global_id(1);
  if (n >= N || m >= M) return;
  global const float *p = P + m * (size_t)ldp + n;
  float acc = 0.0f;
  for (size_t s = 0; s < S; s++) acc += p[s * (size_t)sp];
  global c_t *c = C + (size_t)c_off + m * (size_t)ldc + n;
  if (beta != 0.0f) acc += beta * LOADC(c, 0);
  if (has_bias) acc += LOADC(bias, (size_t)bias_off + n);
  STOREC(acc, c, 0);
}

/* ---- CPU variant --------------------------------------------------------- */

/* The pack kernels: work-item (kb, panel, z) (gemm_pack_a with TA:
 * (panel, kb, z)) packs the PKB steps of k from kb * PKB of one panel,
 * reading the stored matrix along its contiguous direction (float16 runs
 * of k, or rows of the panel) and writing one contiguous block of
 * PKB * MR (PKB * NR) floats.  At 2048^3 on 2 cores the packs take 3-7%
 * of the product's time. */
#define PKB 16

/* Ap[z][q][k][r] = op(A_z)[q * MR + r][k], 0 past M. */
__kernel void gemm_pack_a(global const real_t *restrict A, ulong a_off,
                          ulong lda, ulong stride_a, global float *restrict Ap,
                          ulong M, ulong K) {
#if TA /* work-items in a row read neighbouring stretches of the same rows */
  const size_t q = get_global_id(0), kb = get_global_id(1), z = get_global_id(2);
#else
  const size_t kb = get_global_id(0), q = get_global_id(1), z = get_global_id(2);
#endif
  const size_t nq = ((size_t)M + MR - 1) / MR, k0 = kb * PKB;
  if (k0 >= K || q >= nq) return;
  const size_t kn = min((size_t)PKB, (size_t)K - k0);
  const size_t i0 = q * MR, rows = min((size_t)MR, (size_t)M - i0);
  global const real_t *src = A + (size_t)a_off + z * (size_t)stride_a;
  global float *dst = Ap + ((z * nq + q) * (size_t)K + k0) * MR;
#if TA
  for (size_t kk = 0; kk < kn; kk++) {
    global const real_t *row = src + A_IDX(i0, k0 + kk, lda);
    if (rows == MR) {
      UNROLL for (int r = 0; r < MR; r++) dst[kk * MR + r] = LOAD(row, r);
    } else {
      for (size_t r = 0; r < MR; r++)
        dst[kk * MR + r] = r < rows ? LOAD(row, r) : 0.0f;
    }
  }
#else
  if (kn == PKB) {
    UNROLL for (int r = 0; r < MR; r++) {
      float16 v = (size_t)r < rows ? LOAD16(src, A_IDX(i0 + r, k0, lda)) : 0.0f;
      const float *e = (const float *)&v;
      UNROLL for (int kk = 0; kk < PKB; kk++) dst[kk * MR + r] = e[kk];
    }
  } else {
    for (size_t kk = 0; kk < kn; kk++)
      for (size_t r = 0; r < MR; r++)
        dst[kk * MR + r] = r < rows ? LOAD(src, A_IDX(i0 + r, k0 + kk, lda)) : 0.0f;
  }
#endif
}

/* Bp[z][p][k][c] = op(B_z)[k][p * NR + c], 0 past N.  With TB the
 * work-item is (kb, p * NV + v, z) and packs a 16 x 16 block (columns
 * 16 v .. 16 v + 15 of the panel): 16 float16 runs of rows of B^T in, 16
 * float16 runs of the panel out, transposed through private memory. */
__kernel void gemm_pack_b(global const real_t *restrict B, ulong b_off,
                          ulong ldb, ulong stride_b, global float *restrict Bp,
                          ulong N, ulong K) {
  const size_t kb = get_global_id(0), z = get_global_id(2);
  const size_t np = ((size_t)N + NR - 1) / NR, k0 = kb * PKB;
#if TB
  const size_t p = get_global_id(1) / NV, v = get_global_id(1) % NV;
#else
  const size_t p = get_global_id(1);
#endif
  if (k0 >= K || p >= np) return;
  const size_t kn = min((size_t)PKB, (size_t)K - k0);
  global const real_t *src = B + (size_t)b_off + z * (size_t)stride_b;
  global float *dst = Bp + ((z * np + p) * (size_t)K + k0) * NR;
#if TB
  const size_t j0 = p * NR + 16 * v;
  const size_t cols = j0 < N ? min((size_t)16, (size_t)N - j0) : 0;
  dst += 16 * v;
  if (kn == PKB) {
    float t[16 * 16];
    UNROLL for (int c = 0; c < 16; c++)
      vstore16((size_t)c < cols ? LOAD16(src, B_IDX(k0, j0 + c, ldb)) : 0.0f,
               c, t);
    UNROLL for (int kk = 0; kk < 16; kk++) {
      float16 o;
      float *e = (float *)&o;
      UNROLL for (int c = 0; c < 16; c++) e[c] = t[c * 16 + kk];
      vstore16(o, 0, dst + kk * NR);
    }
  } else {
    for (size_t kk = 0; kk < kn; kk++)
      for (size_t c = 0; c < 16; c++)
        dst[kk * NR + c] = c < cols ? LOAD(src, B_IDX(k0 + kk, j0 + c, ldb)) : 0.0f;
  }
#else
  const size_t j0 = p * NR, cols = min((size_t)NR, (size_t)N - j0);
  for (size_t kk = 0; kk < kn; kk++) {
    global const real_t *row = src + B_IDX(k0 + kk, j0, ldb);
    if (cols == NR) {
      UNROLL for (int v = 0; v < NV; v++)
        vstore16(LOAD16(row, 16 * v), v, dst + kk * NR);
    } else {
      for (size_t c = 0; c < NR; c++)
        dst[kk * NR + c] = c < cols ? LOAD(row, c) : 0.0f;
    }
  }
#endif
}

/* C[z][q * MR + r][p * NR + c] = alpha * sum_k Ap[.][q][k][r] Bp[.][p][k][c]
 * + beta * C.  Work-item (q, p, z); the packed operands of batch z start at
 * z * stride_ap and z * stride_bp (0: one packed matrix for every batch). */
__kernel void gemm_packed(global const float *restrict Ap, ulong stride_ap,
                          global const float *restrict Bp, ulong stride_bp,
                          global c_t *restrict C, ulong c_off, ulong ldc,
                          ulong stride_c, ulong M, ulong N, ulong K,
                          float alpha, float beta, global const c_t *bias,
                          ulong bias_off, int has_bias) {
  const size_t q = get_global_id(0), p = get_global_id(1), z = get_global_id(2);
  const size_t i0 = q * MR, j0 = p * NR;
  if (i0 >= M || j0 >= N) return;
  global const float *ap = Ap + z * (size_t)stride_ap + q * (size_t)K * MR;
  global const float *bp = Bp + z * (size_t)stride_bp + p * (size_t)K * NR;
  C += (size_t)c_off + z * (size_t)stride_c;

  float16 acc[MR][NV];
  UNROLL for (int r = 0; r < MR; r++)
    UNROLL for (int v = 0; v < NV; v++) acc[r][v] = 0.0f;
  for (size_t k = 0; k < K; k++) {
    float16 b[NV];
    UNROLL for (int v = 0; v < NV; v++) b[v] = vload16(v, bp);
    UNROLL for (int r = 0; r < MR; r++) {
      const float16 a = ap[r];
      UNROLL for (int v = 0; v < NV; v++) acc[r][v] = fma(a, b[v], acc[r][v]);
    }
    ap += MR;
    bp += NR;
  }

  UNROLL for (int r = 0; r < MR; r++) {
    if (i0 + r >= M) break;
    global c_t *c = C + (i0 + r) * (size_t)ldc + j0;
    global const c_t *bj = bias + (size_t)bias_off + j0;
    if (j0 + NR <= N) {
      UNROLL for (int v = 0; v < NV; v++) {
        float16 y = alpha * acc[r][v];
        if (beta != 0.0f) y += beta * LOADC16(c, 16 * v);
        if (has_bias) y += LOADC16(bj, 16 * v);
        STOREC16(y, c, 16 * v);
      }
    } else {
      float row[NR];
      UNROLL for (int v = 0; v < NV; v++) vstore16(acc[r][v], v, row);
      for (size_t j = 0; j < NR && j0 + j < N; j++) {
        float y = alpha * row[j];
        if (beta != 0.0f) y += beta * LOADC(c, j);
        if (has_bias) y += LOADC(bj, j);
        STOREC(y, c, j);
      }
    }
  }
}
