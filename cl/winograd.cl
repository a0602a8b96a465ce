/*
 * winograd.cl - the transforms of the Winograd path of 3x3, stride 1,
 * dilation 1, one-group convolutions (src/ops/conv_winograd.c): F(WM x WM,
 * 3 x 3) with WM = 2 (4 x 4 input tiles, 16 products) or WM = 4 (6 x 6
 * tiles, 36 products; Lavin and Gray's points 0, +-1, +-2).  Between the
 * transforms the host runs WP = WA * WA batched float GEMMs (cl/gemm.cl)
 *   M[xi][o][t] = sum_i U[xi][o][i] V[xi][i][t].
 * The convolution seen here has I input and O output channels and pads
 * PH, PW (negative: a crop; the input gradient runs as such a convolution
 * of dy with the flipped, transposed weights and padding 2 - pad).
 *   wino_weight  U = G g G^T per (o, i), rows of LDU >= I floats (zeros
 *                in the padding columns);
 *   wino_input   V = B^T d B per (i, tile), rows of LDV >= T floats (T
 *                tiles of NB images from image N0; zeros past T), d the
 *                WA x WA input patch, zero outside the image;
 *   wino_output  y = A^T m A (+ bias) per (o, tile), written where it lies
 *                inside the output.
 * The weight gradient (dw = sum over images and tiles of the correlation
 * of the input patch with the dy tile) swaps the roles of A and G in the
 * same identity, sum_xi A^T[i][xi] G[xi][k] B^T[xi][j] = [j == i + k]:
 * per tile, dw = G^T [(A dy A^T) . (B^T d B)] G, so the host runs
 *   M[s][xi][o][i] = sum_t U[s][xi][o][t] V[s][xi][i][t]
 * over pieces s of the images (each its own K: the pieces add parallel
 * work where O x I gives few tiles), and
 *   wino_dy      U = A dy A^T per (o, tile), the WM x WM dy tile zero
 *                outside dy, in wino_input's layout;
 *   wino_wgrad   dw = G^T (sum_s M[s]) G per (o, i), the pieces added in
 *                order.
 * Every transform is a fixed sequence of float operations per element:
 * the results are the same bits run to run.  Storage through real_t /
 * LOAD / STORE (cl/common.cl); the scratch U, V, M is float.  Work-items:
 * dimension 0 walks the padded row (tiles or input channels) in groups
 * of WWG, dimension 1 the channels (local size 1) from the argument c0,
 * so consecutive work-items touch consecutive floats of the scratch.
 */

#ifndef WM
#define WM 2 /* output tile side: 2 or 4 */
#endif
#ifndef WWG
#define WWG 64 /* work-group size along dimension 0 */
#endif

#if WM == 2
#define WA 4
#elif WM == 4
#define WA 6
#else
#error "WM must be 2 or 4"
#endif
#define WP (WA * WA)

/* out = B^T in: one column (or row) of the input transform. */
inline void wino_bt(const float *d, float *o) {
#if WM == 2
  o[0] = d[0] - d[2];
  o[1] = d[1] + d[2];
  o[2] = d[2] - d[1];
  o[3] = d[1] - d[3];
#else
  o[0] = fma(4.0f, d[0], fma(-5.0f, d[2], d[4]));
  o[1] = fma(-4.0f, d[1] + d[2], d[3] + d[4]);
  o[2] = fma(4.0f, d[1] - d[2], d[4] - d[3]);
  o[3] = fma(2.0f, d[3] - d[1], d[4] - d[2]);
  o[4] = fma(2.0f, d[1] - d[3], d[4] - d[2]);
  o[5] = fma(4.0f, d[1], fma(-5.0f, d[3], d[5]));
#endif
}

/* out = G g: one column (or row) of the weight transform. */
inline void wino_g(const float *g, float *o) {
#if WM == 2
  o[0] = g[0];
  o[1] = 0.5f * (g[0] + g[1] + g[2]);
  o[2] = 0.5f * (g[0] - g[1] + g[2]);
  o[3] = g[2];
#else
  const float s = g[0] + g[2];
  o[0] = 0.25f * g[0];
  o[1] = (-1.0f / 6.0f) * (s + g[1]);
  o[2] = (-1.0f / 6.0f) * (s - g[1]);
  const float p = fma(1.0f / 24.0f, g[0], (1.0f / 6.0f) * g[2]);
  o[3] = fma(1.0f / 12.0f, g[1], p);
  o[4] = fma(-1.0f / 12.0f, g[1], p);
  o[5] = g[2];
#endif
}

/* out = A^T m: one column (or row) of the output transform. */
inline void wino_at(const float *m, float *o) {
#if WM == 2
  o[0] = m[0] + m[1] + m[2];
  o[1] = m[1] - m[2] - m[3];
#else
  const float a = m[1] + m[2], b = m[1] - m[2];
  const float c = m[3] + m[4], d = m[3] - m[4];
  o[0] = m[0] + a + c;
  o[1] = fma(2.0f, d, b);
  o[2] = fma(4.0f, c, a);
  o[3] = fma(8.0f, d, b) + m[5];
#endif
}

/* out = A m: one column (or row) of the dy transform (A^T's transpose:
 * out[xi] = sum_i A^T[i][xi] m[i], m of WM values). */
inline void wino_a(const float *m, float *o) {
#if WM == 2
  o[0] = m[0];
  o[1] = m[0] + m[1];
  o[2] = m[0] - m[1];
  o[3] = -m[1];
#else
  const float e = m[0] + m[2], f = m[1] + m[3];
  const float g = fma(4.0f, m[2], m[0]), h = fma(4.0f, m[3], m[1]);
  o[0] = m[0];
  o[1] = e + f;
  o[2] = e - f;
  o[3] = fma(2.0f, h, g);
  o[4] = fma(-2.0f, h, g);
  o[5] = m[3];
#endif
}

/* out = G^T m: one column (or row) of the weight gradient's output
 * transform (out[k] = sum_xi G[xi][k] m[xi], k < 3). */
inline void wino_gt(const float *m, float *o) {
#if WM == 2
  const float s = m[1] + m[2];
  o[0] = fma(0.5f, s, m[0]);
  o[1] = 0.5f * (m[1] - m[2]);
  o[2] = fma(0.5f, s, m[3]);
#else
  const float s = m[1] + m[2], d = m[1] - m[2];
  const float p = m[3] + m[4], q = m[3] - m[4];
  o[0] = fma(0.25f, m[0], fma(-1.0f / 6.0f, s, (1.0f / 24.0f) * p));
  o[1] = fma(-1.0f / 6.0f, d, (1.0f / 12.0f) * q);
  o[2] = fma(1.0f / 6.0f, p - s, m[5]);
#endif
}

/* U[xi][o][i] = (G g G^T)[xi] for the 3 x 3 kernel g of output channel o
 * and input channel i: w[o][i] (flip 0, w is [O, I, 3, 3]) or w[i][o]
 * rotated by 180 degrees (flip 1, w is [I, O, 3, 3]). */
__kernel RUMUS_REQD_WG(WWG, 1, 1)
void wino_weight(global const real_t *w, ulong w_off, global float *U,
                 ulong O, ulong I, ulong LDU, int flip, ulong c0) {
  const size_t i = get_global_id(0), o = get_global_id(1) + (size_t)c0;
  if (i >= (size_t)LDU) return;
  global float *u = U + o * (size_t)LDU + i;
  const size_t plane = (size_t)O * (size_t)LDU;
  if (i >= (size_t)I) {
    #pragma unroll
    for (int k = 0; k < WP; k++) u[k * plane] = 0.0f;
    return;
  }
  const size_t base = (size_t)w_off + (flip ? (i * (size_t)O + o) * 9
                                            : (o * (size_t)I + i) * 9);
  float g[9], t[3 * WA], r[WA * WA];
  #pragma unroll
  for (int k = 0; k < 9; k++)
    g[k] = LOAD(w, base + (size_t)(flip ? 8 - k : k));
  /* Columns: t[c][*] = G g[*][c] (t stored column-major: WA per column). */
  #pragma unroll
  for (int c = 0; c < 3; c++) {
    const float col[3] = {g[c], g[3 + c], g[6 + c]};
    wino_g(col, t + c * WA);
  }
  /* Rows: r[a][*] = G t[a][*]. */
  #pragma unroll
  for (int a = 0; a < WA; a++) {
    const float row[3] = {t[a], t[WA + a], t[2 * WA + a]};
    wino_g(row, r + a * WA);
  }
  #pragma unroll
  for (int k = 0; k < WP; k++) u[k * plane] = r[k];
}

/* Tile t of a launch over NP pieces of NBS images from image N0 (NT
 * images in all, the last piece short), each piece LDV tiles wide: its
 * piece *s, its image *n (past the images: not a tile) and its place
 * (*y0, *x0) in tile units; 0 when t is padding.  t < 2^31 (the host's
 * chunks): 32-bit divisions. */
inline int wino_tile(size_t t, ulong TH, ulong TW, ulong N0, ulong NT,
                     ulong NBS, ulong LDV, size_t *s, size_t *tl, size_t *n,
                     uint *ty, uint *tx) {
  const uint per = (uint)TH * (uint)TW, tu = (uint)t;
  *s = tu / (uint)LDV;
  *tl = tu - (uint)*s * (uint)LDV;
  const uint img = (uint)*tl / per, r = (uint)*tl - img * per;
  *n = (size_t)N0 + *s * (size_t)NBS + img;
  *ty = r / (uint)TW;
  *tx = r - *ty * (uint)TW;
  return img < (uint)NBS && *s * (size_t)NBS + img < (size_t)NT;
}

/* The column of tile t of channel ch in a pieces' scratch (V or U: rows
 * of LDV floats, CH channels, WP planes a piece) for a launch as
 * wino_tile's; zeros written there and NULL returned where t is padding
 * or past the launch's pieces. */
inline global float *wino_column(global float *base, size_t t, size_t ch,
                                 ulong CH, ulong TH, ulong TW, ulong N0,
                                 ulong NT, ulong NBS, ulong LDV, size_t *n,
                                 uint *ty, uint *tx) {
  const size_t np = ((size_t)NT + (size_t)NBS - 1) / (size_t)NBS;
  if (t >= np * (size_t)LDV) return NULL;
  size_t s, tl;
  const int ok = wino_tile(t, TH, TW, N0, NT, NBS, LDV, &s, &tl, n, ty, tx);
  const size_t plane = (size_t)CH * (size_t)LDV;
  global float *v = base + s * WP * plane + ch * (size_t)LDV + tl;
  if (ok) return v;
  #pragma unroll
  for (int k = 0; k < WP; k++) v[k * plane] = 0.0f;
  return NULL;
}

/* V[s][xi][i][t] = (B^T d B)[xi] for the input patch d of tile t of piece
 * s (wino_tile) of input channel i; x is [N, I, H, W].  The forward and
 * the input gradient run one piece (NBS = NT). */
__kernel RUMUS_REQD_WG(WWG, 1, 1)
void wino_input(global const real_t *x, ulong x_off, global float *V,
                ulong I, ulong H, ulong W, long PH, long PW, ulong TH,
                ulong TW, ulong N0, ulong NT, ulong NBS, ulong LDV,
                ulong c0) {
  const size_t t = get_global_id(0), i = get_global_id(1) + (size_t)c0;
  size_t n;
  uint ty, tx;
  global float *v =
      wino_column(V, t, i, I, TH, TW, N0, NT, NBS, LDV, &n, &ty, &tx);
  if (v == NULL) return;
  const size_t plane = (size_t)I * (size_t)LDV;
  const long y0 = (long)ty * WM - PH, x0 = (long)tx * WM - PW;
  global const real_t *src =
      x + (size_t)x_off + (n * (size_t)I + i) * (size_t)H * (size_t)W;
  float d[WP], c[WP];
  #pragma unroll
  for (int a = 0; a < WA; a++) {
    const long yy = y0 + a;
    const int rin = yy >= 0 && yy < (long)H;
    #pragma unroll
    for (int b = 0; b < WA; b++) {
      const long xx = x0 + b;
      d[a * WA + b] = rin && xx >= 0 && xx < (long)W
                          ? LOAD(src, (size_t)yy * (size_t)W + (size_t)xx)
                          : 0.0f;
    }
  }
  /* Columns, then rows (c holds B^T d column-major). */
  #pragma unroll
  for (int b = 0; b < WA; b++) {
    float col[WA];
    #pragma unroll
    for (int a = 0; a < WA; a++) col[a] = d[a * WA + b];
    wino_bt(col, c + b * WA);
  }
  #pragma unroll
  for (int a = 0; a < WA; a++) {
    float row[WA], out[WA];
    #pragma unroll
    for (int b = 0; b < WA; b++) row[b] = c[b * WA + a];
    wino_bt(row, out);
    #pragma unroll
    for (int b = 0; b < WA; b++) v[(a * WA + b) * plane] = out[b];
  }
}

/* y[n][o] of tile t = (A^T m A) + bias[o] (has_bias), where m is tile t's
 * column of M[*][o]; y is [N, O, OH, OW]. */
__kernel RUMUS_REQD_WG(WWG, 1, 1)
void wino_output(global const float *M, global const real_t *bias,
                 ulong b_off, int has_bias, global real_t *y, ulong y_off,
                 ulong O, ulong OH, ulong OW, ulong TH, ulong TW, ulong N0,
                 ulong T, ulong LDM, ulong c0) {
  const size_t t = get_global_id(0), o = get_global_id(1) + (size_t)c0;
  if (t >= (size_t)T) return;
  global const float *m = M + o * (size_t)LDM + t;
  const size_t plane = (size_t)O * (size_t)LDM;
  float c[WM * WA];
  /* Columns: c[b][*] = A^T m[*][b] (column-major, WM per column). */
  #pragma unroll
  for (int b = 0; b < WA; b++) {
    float col[WA];
    #pragma unroll
    for (int a = 0; a < WA; a++) col[a] = m[(a * WA + b) * plane];
    wino_at(col, c + b * WM);
  }
  const float bv = has_bias ? LOAD(bias, (size_t)b_off + o) : 0.0f;
  const uint per = (uint)TH * (uint)TW, tu = (uint)t, r = tu % per;
  const size_t n = (size_t)N0 + tu / per;
  const size_t y0 = (size_t)(r / (uint)TW * WM),
               x0 = (size_t)(r % (uint)TW * WM);
  global real_t *dst =
      y + (size_t)y_off + (n * (size_t)O + o) * (size_t)OH * (size_t)OW;
  #pragma unroll
  for (int a = 0; a < WM; a++) {
    float row[WA], out[WM];
    #pragma unroll
    for (int b = 0; b < WA; b++) row[b] = c[b * WM + a];
    wino_at(row, out);
    if (y0 + a >= (size_t)OH) break;
    #pragma unroll
    for (int b = 0; b < WM; b++)
      if (x0 + b < (size_t)OW)
        STORE(out[b] + bv, dst, (y0 + a) * (size_t)OW + x0 + b);
  }
}

/* U[s][xi][o][t] = (A dy A^T)[xi] for the WM x WM tile of dy (zero outside
 * it) of tile t of piece s (wino_tile) of output channel o; dy is [N, O,
 * OH, OW]. */
__kernel RUMUS_REQD_WG(WWG, 1, 1)
void wino_dy(global const real_t *dy, ulong dy_off, global float *U, ulong O,
             ulong OH, ulong OW, ulong TH, ulong TW, ulong N0, ulong NT,
             ulong NBS, ulong LDV, ulong c0) {
  const size_t t = get_global_id(0), o = get_global_id(1) + (size_t)c0;
  size_t n;
  uint ty, tx;
  global float *u =
      wino_column(U, t, o, O, TH, TW, N0, NT, NBS, LDV, &n, &ty, &tx);
  if (u == NULL) return;
  const size_t plane = (size_t)O * (size_t)LDV;
  const size_t y0 = (size_t)ty * WM, x0 = (size_t)tx * WM;
  global const real_t *src =
      dy + (size_t)dy_off + (n * (size_t)O + o) * (size_t)OH * (size_t)OW;
  float d[WM * WM], c[WM * WA];
  #pragma unroll
  for (int a = 0; a < WM; a++) {
    const int rin = y0 + a < (size_t)OH;
    #pragma unroll
    for (int b = 0; b < WM; b++)
      d[a * WM + b] = rin && x0 + b < (size_t)OW
                          ? LOAD(src, (y0 + a) * (size_t)OW + x0 + b)
                          : 0.0f;
  }
  /* Columns (c holds A d column-major: WA per column), then rows. */
  #pragma unroll
  for (int b = 0; b < WM; b++) {
    float col[WM];
    #pragma unroll
    for (int a = 0; a < WM; a++) col[a] = d[a * WM + b];
    wino_a(col, c + b * WA);
  }
  #pragma unroll
  for (int a = 0; a < WA; a++) {
    float row[WM], out[WA];
    #pragma unroll
    for (int b = 0; b < WM; b++) row[b] = c[b * WA + a];
    wino_a(row, out);
    #pragma unroll
    for (int b = 0; b < WA; b++) u[(a * WA + b) * plane] = out[b];
  }
}

/* dw[o][i] = G^T m G, m = sum over the S pieces of M[s][*][o][i] in order
 * of s; M's rows are LDM floats, dw is [O, I, 3, 3]. */
__kernel RUMUS_REQD_WG(WWG, 1, 1)
void wino_wgrad(global const float *M, global real_t *dw, ulong dw_off,
                ulong O, ulong I, ulong LDM, ulong S, ulong c0) {
  const size_t i = get_global_id(0), o = get_global_id(1) + (size_t)c0;
  if (i >= (size_t)I) return;
  const size_t plane = (size_t)O * (size_t)LDM, piece = WP * plane;
  global const float *m = M + o * (size_t)LDM + i;
  float v[WP], c[3 * WA];
  #pragma unroll
  for (int k = 0; k < WP; k++) v[k] = m[k * plane];
  for (size_t s = 1; s < (size_t)S; s++) {
    #pragma unroll
    for (int k = 0; k < WP; k++) v[k] += m[s * piece + k * plane];
  }
  /* Columns: c[b][*] = G^T v[*][b] (column-major, 3 per column). */
  #pragma unroll
  for (int b = 0; b < WA; b++) {
    float col[WA];
    #pragma unroll
    for (int a = 0; a < WA; a++) col[a] = v[a * WA + b];
    wino_gt(col, c + b * 3);
  }
  global real_t *dst = dw + (size_t)dw_off + (o * (size_t)I + i) * 9;
  #pragma unroll
  for (int a = 0; a < 3; a++) {
    float row[WA], out[3];
    #pragma unroll
    for (int b = 0; b < WA; b++) row[b] = c[b * 3 + a];
    wino_gt(row, out);
    #pragma unroll
    for (int b = 0; b < 3; b++) STORE(out[b], dst, (size_t)(a * 3 + b));
  }
}
