/*
 * embedding.cl - embedding lookup and its weight gradient (PyTorch's
 * F.embedding with padding_idx).
 *
 * weight and dweight are [rows, dim] (row-major), ids are int32 of any
 * shape flattened to n positions, out and dout are [n, dim].  Every tensor
 * arrives as (buffer, ulong element offset); index math is size_t.
 *
 *   forward   out[p, c] = weight[ids[p], c], a bit copy of the element;
 *             an id outside [0, rows) reads nothing, gives a row of
 *             zeros and is reported (DEVERR_EMBED_ID, the id, p).  A
 *             work-group copies a row, 16 bytes per access where aligned
 *             (GPU variant), or a work-item 16 elements (CPU variant).
 *   backward  dweight[r, c] = sum over the positions p with ids[p] == r
 *             (r != padding_idx) of dout[p, c]; 0 for rows never named.
 *
 * The backward is deterministic without float atomics: the positions are
 * sorted by id with a stable LSD radix sort (8-bit digits, integer work
 * only), so the positions of each id lie in one segment of the sorted
 * list, ascending.  Keys are the ids, and `rows` (past every valid id)
 * for padding_idx and bad ids, which sort last and add nothing.
 *   keys      key[p] = id or rows, val[p] = p;
 *   hist      one work-item per block of EMB_BLOCK positions counts the
 *             digit of its keys: hist[digit * blocks + block];
 *   scan      exclusive prefix sum of hist (chunk sums, one work-item
 *             scanning the sums, chunks rescanned): where each block's
 *             keys of each digit go;
 *   scatter   each block moves its keys in order: stable.
 * (On the GPU variant hist, scan and scatter are work-group kernels: a
 * group per block, work-item d walking the block's keys in local memory
 * for digit d; the same integer results.)
 * Then the sorted list is cut into tiles of EMB_TILE entries, fixed by n
 * alone.  Stage 1: a work-item per (tile, column) (work-group variant) or
 * (tile, 8 columns) with float8 accumulators (CPU variant) walks its tile
 * in order; a segment that starts and ends inside the tile is its row's
 * whole sum and is stored to dweight; the part of a segment that began in
 * an earlier tile goes to lead[tile], the first part of one that runs on
 * goes to tail[tile] (float scratch).  Stage 2: a work-item per row
 * finds its segment by binary search (bounds), then a work-item per
 * (row, 8 columns; a group per row on the GPU variant, its work-items
 * along the columns) stores 0 for an empty one, leaves one inside
 * a tile to stage 1, and adds tail[first tile] and lead[next tiles] in
 * tile order for a longer one.  So every element is the float sum of
 * its dout values in ascending position order, grouped by tiles of the
 * sorted list: the same operations on both variants (the same bits),
 * whatever the scheduling, and an id repeated a million times costs 4096
 * tile partials in stage 2, not a million-long walk.  Stage 1 needs no
 * local memory: each work-item's
 * sum is its own sequential walk; the indices it shares with its
 * neighbours (2 KiB per tile) stay in the cache.
 *
 * The flat kernels take (n, base): work-item g handles item base + g of
 * n (the host launches at most 2^30 at a time); padding work-items
 * return.
 */

#ifndef GRAD_STORAGE
#define GRAD_STORAGE F32 /* dweight's storage: F32 or RUMUS_STORAGE */
#endif
#ifndef DEVERR_EMBED_ID
#define DEVERR_EMBED_ID 3 /* the host passes RUMUS__DEVERR_EMBED_ID */
#endif
#ifndef EMB_BLOCK
#define EMB_BLOCK 256 /* positions per work-item of hist and scatter */
#endif
#ifndef EMB_TILE
#define EMB_TILE 256 /* entries of the sorted list per stage-1 tile */
#endif

#define EMB_RADIX 256 /* 8-bit digits */
#define EMB_SCAN 1024 /* entries per group of the work-group scan */

typedef RUMUS_TYPE(GRAD_STORAGE) grad_t;

#define EMB_ITEM(n, base)                                                    \
  const size_t g_ = get_global_id(0);                                        \
  if (g_ >= (size_t)(n)) return;                                             \
  const size_t item = (size_t)(base) + g_

/* ---- Forward ---------------------------------------------------------- */

/* CPU variant: columns [c, c + cw) of out's row p (item = p * blocks +
 * c / cw): bit copies (NaN payloads kept), or zeros for a bad id,
 * reported once per row (by its first block).  The host passes cw = 16:
 * one division per 16 elements, a loop the compiler vectorizes. */
__kernel RUMUS_WG_ATTR
void embedding_fwd(ulong n, ulong base, global const real_t *w, ulong wo,
                   global const int *ids, ulong io, global real_t *out,
                   ulong oo, ulong rows, ulong dim, ulong blocks, uint cw,
                   volatile global int *status) {
  EMB_ITEM(n, base);
  const size_t p = item / blocks, c = (item - p * blocks) * cw;
  const size_t end = min((size_t)dim, c + cw);
  const int id = ids[io + p];
  const size_t o = oo + p * dim;
  if (id < 0 || (ulong)id >= rows) {
    if (c == 0) rumus_report(status, DEVERR_EMBED_ID, id, (int)p);
    for (size_t j = c; j < end; j++) STORE(0.0f, out, o + j);
    return;
  }
  const size_t i = wo + (size_t)id * dim;
  global uint *o32 = (global uint *)out + o;
  global const uint *w32 = (global const uint *)w + i;
  global ushort *o16 = (global ushort *)out + o;
  global const ushort *w16 = (global const ushort *)w + i;
  if (end - c == 16) { /* whole blocks: one vector move */
    if (sizeof(real_t) == 4) vstore16(vload16(0, w32 + c), 0, o32 + c);
    else /* one store, not 16 (common.cl's packed structs) */
      ((global rumus_u16x16 *)(o16 + c))->bits = vload16(0, w16 + c);
    return;
  }
  for (size_t j = c; j < end; j++) {
    if (sizeof(real_t) == 4) o32[j] = w32[j];
    else o16[j] = w16[j];
  }
}

/* Work-group variant: group g of the launch copies out's row base + g of
 * n, its work-items taking every WG-th piece of the row (coalesced), the
 * id read once per row.  vec: the host checked that w's and out's element
 * offsets and the row's bytes are multiples of 16 bytes (rumus__aligned),
 * so the row moves as uint4 (one 16-byte access per piece); else as
 * single elements.  A bad id gives zeros, reported by work-item 0. */
__kernel RUMUS_WG_ATTR
void embedding_fwd_wg(ulong n, ulong base, global const real_t *w, ulong wo,
                      global const int *ids, ulong io, global real_t *out,
                      ulong oo, ulong rows, ulong dim, uint vec,
                      volatile global int *status) {
  const size_t gi = get_group_id(0);
  if (gi >= n) return; /* the whole group */
  const size_t p = (size_t)base + gi, l = get_local_id(0);
  const int id = ids[io + p];
  const size_t o = oo + p * dim;
  if (id < 0 || (ulong)id >= rows) {
    if (l == 0) rumus_report(status, DEVERR_EMBED_ID, id, (int)p);
    for (size_t j = l; j < dim; j += WG) STORE(0.0f, out, o + j);
    return;
  }
  const size_t i = wo + (size_t)id * dim;
  if (vec) {
    global const uint4 *src = (global const uint4 *)(w + i);
    global uint4 *dst = (global uint4 *)(out + o);
    const size_t nv = dim * sizeof(real_t) / 16;
    for (size_t j = l; j < nv; j += WG) dst[j] = src[j];
    return;
  }
  for (size_t j = l; j < dim; j += WG) {
    if (sizeof(real_t) == 4)
      ((global uint *)out)[o + j] = ((global const uint *)w)[i + j];
    else
      ((global ushort *)out)[o + j] = ((global const ushort *)w)[i + j];
  }
}

/* ---- Backward: the sort ----------------------------------------------- */

/* key[p] = ids[p] if it is a valid id other than pad, else rows (bad ids
 * reported); val[p] = p. */
__kernel RUMUS_WG_ATTR
void embedding_keys(ulong n, ulong base, global const int *ids, ulong io,
                    uint rows, int pad, global uint *key, global uint *val,
                    volatile global int *status) {
  EMB_ITEM(n, base);
  const int id = ids[io + item];
  const int bad = id < 0 || (uint)id >= rows;
  if (bad) rumus_report(status, DEVERR_EMBED_ID, id, (int)item);
  key[item] = bad || id == pad ? rows : (uint)id;
  val[item] = (uint)item;
}

/* Digit counts of block b of the keys. */
__kernel RUMUS_WG_ATTR
void embedding_hist(uint n, uint blocks, uint shift,
                    global const uint *key, global uint *hist) {
  const uint b = get_global_id(0);
  if (b >= blocks) return;
  uint cnt[EMB_RADIX];
  for (uint d = 0; d < EMB_RADIX; d++) cnt[d] = 0;
  const uint end = min(n, (b + 1) * EMB_BLOCK);
  for (uint i = b * EMB_BLOCK; i < end; i++) cnt[(key[i] >> shift) & 255u]++;
  for (uint d = 0; d < EMB_RADIX; d++) hist[d * blocks + b] = cnt[d];
}

/* Sum of chunk k (chunk entries) of a[0 .. m). */
__kernel RUMUS_WG_ATTR
void embedding_scan_sums(uint m, uint chunk, uint chunks,
                         global const uint *a, global uint *sums) {
  const uint k = get_global_id(0);
  if (k >= chunks) return;
  const uint end = min(m, (k + 1) * chunk);
  uint s = 0;
  for (uint i = k * chunk; i < end; i++) s += a[i];
  sums[k] = s;
}

/* Exclusive prefix sums of sums[0 .. chunks), in place, by work-item 0. */
__kernel RUMUS_WG_ATTR
void embedding_scan_top(uint chunks, global uint *sums) {
  if (get_global_id(0) != 0) return;
  uint s = 0;
  for (uint k = 0; k < chunks; k++) {
    const uint v = sums[k];
    sums[k] = s;
    s += v;
  }
}

/* Chunk k of a becomes its exclusive prefix sums from sums[k]. */
__kernel RUMUS_WG_ATTR
void embedding_scan_apply(uint m, uint chunk, uint chunks, global uint *a,
                          global const uint *sums) {
  const uint k = get_global_id(0);
  if (k >= chunks) return;
  const uint end = min(m, (k + 1) * chunk);
  uint s = sums[k];
  for (uint i = k * chunk; i < end; i++) {
    const uint v = a[i];
    a[i] = s;
    s += v;
  }
}

/* Block b moves its (key, val) pairs, in order, to the places the scanned
 * histogram gives: a stable pass. */
__kernel RUMUS_WG_ATTR
void embedding_scatter(uint n, uint blocks, uint shift,
                       global const uint *offs, global const uint *kin,
                       global const uint *vin, global uint *kout,
                       global uint *vout) {
  const uint b = get_global_id(0);
  if (b >= blocks) return;
  uint dst[EMB_RADIX];
  for (uint d = 0; d < EMB_RADIX; d++) dst[d] = offs[d * blocks + b];
  const uint end = min(n, (b + 1) * EMB_BLOCK);
  for (uint i = b * EMB_BLOCK; i < end; i++) {
    const uint k = kin[i], j = dst[(k >> shift) & 255u]++;
    kout[j] = k;
    vout[j] = vin[i];
  }
}

/* ---- Backward: the sort, work-group kernels (GPU variant) ------------- */

/* The same histogram, scan and scatter as above, by groups of EMB_RADIX
 * work-items (the host uses them when the device allows such groups): the
 * block's keys are read once, coalesced, into local memory, and work-item
 * d walks them for digit d (every work-item reads the same local word, a
 * broadcast).  Counts and prefix sums are integers, and a pass is stable,
 * so the sorted list is the one the serial kernels give. */

/* Block b's keys (or their digits when shift < 32) into lk; returns its
 * length. */
inline uint emb_block_load(uint n, uint b, uint shift, global const uint *key,
                           local uint *lk) {
  const uint a = b * EMB_BLOCK, m = min(n - a, (uint)EMB_BLOCK);
  for (uint i = get_local_id(0); i < m; i += EMB_RADIX) {
    const uint k = key[a + i];
    lk[i] = shift < 32 ? (k >> shift) & 255u : k;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  return m;
}

__kernel RUMUS_REQD_WG(EMB_RADIX, 1, 1)
void embedding_hist_wg(uint n, uint blocks, uint shift,
                       global const uint *key, global uint *hist) {
  local uint lk[EMB_BLOCK];
  const uint b = get_group_id(0), d = get_local_id(0);
  const uint m = emb_block_load(n, b, shift, key, lk);
  uint c = 0;
  for (uint i = 0; i < m; i++) c += lk[i] == d;
  hist[d * blocks + b] = c;
}

__kernel RUMUS_REQD_WG(EMB_RADIX, 1, 1)
void embedding_scatter_wg(uint n, uint blocks, uint shift,
                          global const uint *offs, global const uint *kin,
                          global const uint *vin, global uint *kout,
                          global uint *vout) {
  local uint lk[EMB_BLOCK], lv[EMB_BLOCK];
  const uint b = get_group_id(0), d = get_local_id(0);
  emb_block_load(n, b, 32, vin, lv);
  const uint m = emb_block_load(n, b, 32, kin, lk);
  uint j = offs[d * blocks + b];
  for (uint i = 0; i < m; i++) {
    const uint k = lk[i];
    if (((k >> shift) & 255u) == d) {
      kout[j] = k;
      vout[j] = lv[i];
      j++;
    }
  }
}

/* Exclusive prefix sum of v over the group (EMB_RADIX work-items, s
 * EMB_RADIX words of local scratch); *total gets the group's sum. */
inline uint emb_group_scan(uint v, local uint *s, uint *total) {
  const uint l = get_local_id(0);
  s[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint o = 1; o < EMB_RADIX; o <<= 1) {
    const uint t = l >= o ? s[l - o] : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    s[l] += t;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *total = s[EMB_RADIX - 1];
  const uint r = s[l] - v;
  barrier(CLK_LOCAL_MEM_FENCE); /* s is reused by the caller */
  return r;
}

/* Work-item l's 4 entries [i, i + 4) of chunk k (EMB_SCAN entries) of
 * a[0 .. m): their index i. */
inline uint emb_scan_first(uint k) {
  return k * EMB_SCAN + get_local_id(0) * (EMB_SCAN / EMB_RADIX);
}

/* sums[k] = the sum of chunk k (group k). */
__kernel RUMUS_REQD_WG(EMB_RADIX, 1, 1)
void embedding_scan_sums_wg(uint m, global const uint *a,
                            global uint *sums) {
  local uint s[EMB_RADIX];
  const uint k = get_group_id(0), i = emb_scan_first(k);
  uint t = 0, total;
  for (uint q = i; q < min(m, i + EMB_SCAN / EMB_RADIX); q++) t += a[q];
  emb_group_scan(t, s, &total);
  if (get_local_id(0) == 0) sums[k] = total;
}

/* Exclusive prefix sums of sums[0 .. chunks), in place, by one group. */
__kernel RUMUS_REQD_WG(EMB_RADIX, 1, 1)
void embedding_scan_top_wg(uint chunks, global uint *sums) {
  local uint s[EMB_RADIX];
  const uint l = get_local_id(0);
  uint carry = 0, total;
  for (uint b = 0; b < chunks; b += EMB_RADIX) {
    const uint v = b + l < chunks ? sums[b + l] : 0u;
    const uint e = emb_group_scan(v, s, &total);
    if (b + l < chunks) sums[b + l] = carry + e;
    carry += total;
  }
}

/* Chunk k of a becomes its exclusive prefix sums from sums[k]. */
__kernel RUMUS_REQD_WG(EMB_RADIX, 1, 1)
void embedding_scan_apply_wg(uint m, global uint *a,
                             global const uint *sums) {
  local uint s[EMB_RADIX];
  const uint k = get_group_id(0), i = emb_scan_first(k),
             e = min(m, i + EMB_SCAN / EMB_RADIX);
  uint t = 0, total;
  for (uint q = i; q < e; q++) t += a[q];
  uint run = sums[k] + emb_group_scan(t, s, &total);
  for (uint q = i; q < e; q++) {
    const uint v = a[q];
    a[q] = run;
    run += v;
  }
}

/* ---- Backward: the sums ----------------------------------------------- */

/* Where the part [i, j) of segment k in tile [a, b) of the sorted list of
 * n goes: 0 dweight (whole segment), 1 lead (began earlier), 2 tail (runs
 * on), -1 nowhere (the sentinel key). */
inline int emb_place(global const uint *key, uint n, uint rows, uint a,
                     uint b, uint i, uint j, uint k) {
  if (k >= rows) return -1;
  if (i == a && a > 0 && key[a - 1] == k) return 1;
  if (j == b && b < n && key[b] == k) return 2;
  return 0;
}

/* First index of the sorted key[0 .. n) whose key is >= k. */
inline uint emb_lower(global const uint *key, uint n, uint k) {
  uint lo = 0, hi = n;
  while (lo < hi) {
    const uint mid = lo + (hi - lo) / 2;
    if (key[mid] < k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* dy[val[i] * dim] + ... + dy[val[j - 1] * dim] (g at the column) added
 * left to right from 0, as embedding_tile_row's lanes add: the loads of 8
 * entries are issued before their adds, so a work-item has 8 in flight
 * (the adds, in order, give the same bits). */
inline float emb_col_sum(global const real_t *g, global const uint *val,
                         ulong dim, uint i, uint j) {
  float s = 0.0f;
  for (; i + 8 <= j; i += 8) {
    float v[8];
    for (uint q = 0; q < 8; q++) v[q] = LOAD(g, (size_t)val[i + q] * dim);
    for (uint q = 0; q < 8; q++) s += v[q];
  }
  for (; i < j; i++) s += LOAD(g, (size_t)val[i] * dim);
  return s;
}

/* The end of the segment of key k that starts at i, in [i + 1, b]: a
 * look at the next 3 keys (most segments of a large table are short),
 * then a binary search of the rest of the tile. */
inline uint emb_seg_end(global const uint *key, uint i, uint b, uint k) {
  uint j = i + 1;
  while (j < i + 4 && j < b && key[j] == k) j++;
  if (j == i + 4 && j < b) j += emb_lower(key + j, b - j, k + 1);
  return j;
}

/* Stage 1, one column: item = tile * dim + c.  The tile's keys are shared
 * by the group's work-items (cached). */
__kernel RUMUS_WG_ATTR
void embedding_tile_col(ulong cnt, ulong base, uint n, uint rows, ulong dim,
                        global const uint *key, global const uint *val,
                        global const real_t *dy, ulong dyo, global grad_t *dw,
                        ulong dwo, global float *lead, global float *tail) {
  EMB_ITEM(cnt, base);
  const size_t t = item / dim, c = item - t * dim;
  const uint a = (uint)t * EMB_TILE, b = min(n, a + EMB_TILE);
  global const real_t *g = dy + dyo + c;
  for (uint i = a; i < b;) {
    const uint k = key[i];
    const uint j = emb_seg_end(key, i, b, k);
    const float s = k < rows ? emb_col_sum(g, val, dim, i, j) : 0.0f;
    const int where = emb_place(key, n, rows, a, b, i, j, k);
    if (where == 0) RUMUS_STORE(GRAD_STORAGE, s, dw, dwo + k * dim + c);
    else if (where == 1) lead[item] = s;
    else if (where == 2) tail[item] = s;
    i = j;
  }
}

/* Columns [c, c + w) of row p of dy as a float8 (w <= 8; lanes past w
 * hold 0). */
inline float8 emb_load8(global const real_t *row, size_t c, uint w) {
  if (w == 8) return LOAD8(row, c);
  float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint l = 0; l < w; l++) v[l] = LOAD(row, c + l);
  return vload8(0, v);
}

/* The first w lanes of s into p[0 .. w) (dweight, then float scratch). */
inline void emb_store8(float8 s, global grad_t *p, uint w) {
  if (w == 8) {
    RUMUS_STOREN(GRAD_STORAGE, 8, s, p, 0);
    return;
  }
  float v[8];
  vstore8(s, 0, v);
  for (uint l = 0; l < w; l++) RUMUS_STORE(GRAD_STORAGE, v[l], p, l);
}
inline void emb_store8_f(float8 s, global float *p, uint w) {
  if (w == 8) {
    vstore8(s, 0, p);
    return;
  }
  float v[8];
  vstore8(s, 0, v);
  for (uint l = 0; l < w; l++) p[l] = v[l];
}
inline float8 emb_load8_f(global const float *p, uint w) {
  if (w == 8) return vload8(0, p);
  float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (uint l = 0; l < w; l++) v[l] = p[l];
  return vload8(0, v);
}

/* The CPU kernels' work-items take EMB_RB blocks of 8 columns each (of
 * c8 in all; the host passes its value): the per-key work of a segment
 * (its bounds and place) is shared by up to 512 columns instead of 8, and
 * a row of dy or dweight is walked whole.  With a work-item per block,
 * the backward of 16384 ids into a 32000 x 512 table ran at a third of
 * the STREAM copy on 2 AVX2 cores; 8 to 32 blocks per work-item took it
 * to 41-47%, 64 to 48-50% (a row of dy read per key, latency-bound).  The
 * sums add in the same order either way. */
#ifndef EMB_RB
#define EMB_RB 64
#endif

#ifndef EMB_SEGS
/* Segments whose rows a CPU work-item walks at once: the backward of 16384
 * ids into a 32000 x 512 table took 5.2-5.5 ms with 1 on 2 AVX-512 EPYC
 * vCPUs, 4.1-4.3 with 4, 8 or 16. */
#define EMB_SEGS 4
#endif

/* Segments [si, sj) of keys sk with places sp (s < ns), blocks [b0, b1):
 * block by block, each segment's sum into dweight, lead or tail, so that
 * ns rows of dy and of dweight are in flight at once (most segments of a
 * large table are one position: a row copied).  Each segment's sum adds
 * its positions in order. */
inline void emb_tile_segs(global const real_t *g, global const uint *val,
                          size_t dim, const uint *si, const uint *sj,
                          const uint *sk, const int *sp, int ns, size_t b0,
                          size_t b1, global grad_t *dw, global float *lead,
                          global float *tail) {
  for (size_t cb = b0; cb < b1; cb++) {
    const size_t c = cb * 8;
    const uint w = (uint)min((size_t)8, dim - c);
    for (int e = 0; e < ns; e++) {
      float8 s = (float8)(0.0f);
      for (uint q = si[e]; q < sj[e]; q++)
        s += emb_load8(g, (size_t)val[q] * dim + c, w);
      if (sp[e] == 0) emb_store8(s, dw + (size_t)sk[e] * dim + c, w);
      else if (sp[e] == 1) emb_store8_f(s, lead + c, w);
      else emb_store8_f(s, tail + c, w);
    }
  }
}

/* Stage 1, CPU: item = tile * nb + group of EMB_RB column blocks; the
 * tile's segments EMB_SEGS at a time (one at a time, a row of dy read per
 * key was latency-bound). */
__kernel void embedding_tile_row(ulong cnt, ulong base, uint n, uint rows,
                                 ulong dim,
                        ulong c8, global const uint *key,
                        global const uint *val, global const real_t *dy,
                        ulong dyo, global grad_t *dw, ulong dwo,
                        global float *lead, global float *tail) {
  EMB_ITEM(cnt, base);
  const size_t nb = (c8 + EMB_RB - 1) / EMB_RB, t = item / nb;
  const size_t b0 = (item - t * nb) * EMB_RB;
  const size_t b1 = min((size_t)c8, b0 + EMB_RB);
  const uint a = (uint)t * EMB_TILE, b = min(n, a + EMB_TILE);
  const size_t po = t * dim; /* lead / tail: [tiles, dim] */
  uint si[EMB_SEGS], sj[EMB_SEGS], sk[EMB_SEGS];
  int sp[EMB_SEGS], ns = 0;
  for (uint i = a; i < b;) {
    const uint k = key[i];
    uint j = i + 1;
    while (j < b && key[j] == k) j++;
    const int where = emb_place(key, n, rows, a, b, i, j, k);
    if (where >= 0) {
      si[ns] = i;
      sj[ns] = j;
      sk[ns] = k;
      sp[ns++] = where;
    }
    if (ns == EMB_SEGS || (j == b && ns > 0)) {
      emb_tile_segs(dy + dyo, val, dim, si, sj, sk, sp, ns, b0, b1,
                    dw + dwo, lead + po, tail + po);
      ns = 0;
    }
    i = j;
  }
}

/* Stage 2's segments: range[2 r], range[2 r + 1] = the first and last
 * tile of row r's segment in the sorted keys, or (1, 0) when it is empty;
 * t0 == t1 when stage 1 stored the row. */
__kernel RUMUS_WG_ATTR
void embedding_bounds(ulong cnt, ulong base, uint n, global const uint *key,
                      global uint *range) {
  EMB_ITEM(cnt, base);
  const uint r = (uint)item, s = emb_lower(key, n, r),
             e = emb_lower(key, n, r + 1);
  range[2 * item] = s == e ? 1u : s / EMB_TILE;
  range[2 * item + 1] = s == e ? 0u : (e - 1) / EMB_TILE;
}

/* embedding_bounds for the CPU variant: item = a run of EMB_BR rows, one
 * binary search for its first row, then a walk up the sorted keys (the
 * same ranges; a search per row, latency-bound, took 0.75-1.4 ms for
 * 32000 rows on 2 AVX2 cores). */
#ifndef EMB_BR
#define EMB_BR 256
#endif
__kernel void embedding_bounds_row(ulong cnt, ulong base, uint n, uint rows,
                                   global const uint *key,
                                   global uint *range) {
  EMB_ITEM(cnt, base);
  const size_t r0 = item * EMB_BR, r1 = min(r0 + EMB_BR, (size_t)rows);
  uint s = emb_lower(key, n, (uint)r0);
  for (size_t r = r0; r < r1; r++) {
    uint e = s;
    while (e < n && key[e] == (uint)r) e++;
    range[2 * r] = s == e ? 1u : s / EMB_TILE;
    range[2 * r + 1] = s == e ? 0u : (e - 1) / EMB_TILE;
    s = e;
  }
}

/* Stage 2, work-group variant: group g of the launch does row base + g
 * of cnt, its work-items every WG-th column (coalesced), the row's range
 * read once; the same sums as embedding_fold_col. */
__kernel RUMUS_WG_ATTR
void embedding_fold_wg(ulong cnt, ulong base, ulong dim,
                       global const uint *range, global const float *lead,
                       global const float *tail, global grad_t *dw,
                       ulong dwo) {
  const size_t gi = get_group_id(0);
  if (gi >= cnt) return; /* the whole group */
  const size_t r = (size_t)base + gi;
  const uint t0 = range[2 * r], t1 = range[2 * r + 1];
  if (t0 == t1) return; /* stored by stage 1 */
  global grad_t *out = dw + dwo + r * dim;
  for (size_t c = get_local_id(0); c < dim; c += WG) {
    float acc = 0.0f;
    if (t0 < t1) {
      acc = tail[t0 * dim + c];
      for (uint t = t0 + 1; t <= t1; t++) acc += lead[t * dim + c];
    }
    RUMUS_STORE(GRAD_STORAGE, acc, out, c);
  }
}

/* Stage 2, CPU: item = r * nb + group of EMB_RB column blocks. */
__kernel void embedding_fold_row(ulong cnt, ulong base, ulong dim, ulong c8,
                        global const uint *range, global const float *lead,
                        global const float *tail, global grad_t *dw,
                        ulong dwo) {
  EMB_ITEM(cnt, base);
  const size_t nb = (c8 + EMB_RB - 1) / EMB_RB, r = item / nb;
  const size_t b0 = (item - r * nb) * EMB_RB;
  const size_t b1 = min((size_t)c8, b0 + EMB_RB);
  global grad_t *out = dw + dwo + r * dim;
  const uint t0 = range[2 * r], t1 = range[2 * r + 1];
  if (t0 == t1) return; /* stored by stage 1 */
  for (size_t cb = b0; cb < b1; cb++) {
    const size_t c = cb * 8;
    const uint w = (uint)min((size_t)8, dim - c);
    float8 acc = (float8)(0.0f);
    if (t0 < t1) {
      acc = emb_load8_f(tail + t0 * dim + c, w);
      for (uint t = t0 + 1; t <= t1; t++)
        acc += emb_load8_f(lead + t * dim + c, w);
    }
    emb_store8(acc, out + c, w);
  }
}

/* ---- Backward for few rows (the dense scheme) ---------------------------
 * When a table has at most EMB_DENSE_ROWS rows (the host also checks that
 * rows * EMB_DCOLS floats fit local memory), sorting the positions costs
 * more than it saves: the positions are cut into chunks of `len` (fixed by
 * the shape alone), each chunk's sums for every row go to float partials
 * part[chunk][rows][dim], and embedding_dense_fold adds the chunks in
 * order.  Each column's chunk sum runs over the chunk's positions in
 * ascending order on both variants, so they give the same bits:
 *   GPU  a group of EMB_DCOLS work-items per (column block, chunk), a
 *        work-item per column, its rows' sums in local memory (a column
 *        of its own: no barrier, no bank conflicts), dy read once in
 *        coalesced rows;
 *   CPU  a work-item per (chunk, EMB_SLAB columns), summing into the
 *        chunk's partials in place.
 * Bad ids are reported (by the first column) and, like padding_idx, add
 * nothing. */
#define EMB_DCOLS 64
#ifndef EMB_DENSE_ROWS
#define EMB_DENSE_ROWS 128 /* src/ops/embedding.c's limit */
#endif

/* Whether position p adds to a row; reports a bad id when `report`. */
inline int emb_dense_id(global const int *ids, size_t p, uint rows, int pad,
                        int report, volatile global int *status) {
  const int id = ids[p];
  if (id < 0 || (uint)id >= rows) {
    if (report) rumus_report(status, DEVERR_EMBED_ID, id, (int)p);
    return -1;
  }
  return id == pad ? -1 : id;
}

__kernel __attribute__((reqd_work_group_size(EMB_DCOLS, 1, 1)))
void embedding_dense_wg(ulong len, ulong n, uint rows, int pad, ulong dim,
                        global const int *ids, ulong io,
                        global const real_t *dy, ulong dyo,
                        global float *part, local float *acc,
                        volatile global int *status) {
  const uint l = (uint)get_local_id(0);
  const size_t c = get_group_id(0) * EMB_DCOLS + l, chunk = get_group_id(1);
  if (c >= dim) return; /* a column of its own: nothing shared */
  for (uint r = 0; r < rows; r++) acc[r * EMB_DCOLS + l] = 0.0f;
  const size_t p0 = chunk * len, p1 = min((size_t)n, p0 + (size_t)len);
  global const real_t *g = dy + dyo + c;
  global const int *id = ids + io;
  size_t p = p0;
  /* Four positions' loads ahead of their sums (in order). */
  for (; p + 4 <= p1; p += 4) {
    const float v0 = LOAD(g, p * dim), v1 = LOAD(g, (p + 1) * dim),
                v2 = LOAD(g, (p + 2) * dim), v3 = LOAD(g, (p + 3) * dim);
    const int i0 = emb_dense_id(id, p, rows, pad, c == 0, status),
              i1 = emb_dense_id(id, p + 1, rows, pad, c == 0, status),
              i2 = emb_dense_id(id, p + 2, rows, pad, c == 0, status),
              i3 = emb_dense_id(id, p + 3, rows, pad, c == 0, status);
    if (i0 >= 0) acc[i0 * EMB_DCOLS + l] += v0;
    if (i1 >= 0) acc[i1 * EMB_DCOLS + l] += v1;
    if (i2 >= 0) acc[i2 * EMB_DCOLS + l] += v2;
    if (i3 >= 0) acc[i3 * EMB_DCOLS + l] += v3;
  }
  for (; p < p1; p++) {
    const int i = emb_dense_id(id, p, rows, pad, c == 0, status);
    if (i >= 0) acc[i * EMB_DCOLS + l] += LOAD(g, p * dim);
  }
  global float *out = part + chunk * rows * (size_t)dim + c;
  for (uint r = 0; r < rows; r++) out[r * (size_t)dim] = acc[r * EMB_DCOLS + l];
}

/* Work-item (chunk, slab of EMB_SLAB columns; w of them), one per group:
 * the chunk's sums accumulate in place in its partials' rows (at most
 * EMB_DENSE_ROWS x EMB_SLAB floats: they stay in the core's cache) while
 * the chunk's rows of dy stream through in order, which the hardware
 * prefetchers follow (a work-item per 64 columns walked the same rows
 * six times at a stride and waited on every load). */
#define EMB_SLAB 1024
__kernel void embedding_dense_slab(ulong len, ulong n, uint rows, int pad,
                                   ulong dim, ulong slabs,
                                   global const int *ids, ulong io,
                                   global const real_t *dy, ulong dyo,
                                   global float *part,
                                   volatile global int *status) {
  const size_t item = get_global_id(0);
  const size_t chunk = item / slabs, c = (item - chunk * slabs) * EMB_SLAB;
  const uint w = (uint)min((size_t)EMB_SLAB, dim - c);
  global float *out = part + chunk * rows * (size_t)dim + c;
  for (uint r = 0; r < rows; r++)
    for (uint k = 0; k < w; k++) out[r * (size_t)dim + k] = 0.0f;
  const size_t p0 = chunk * len, p1 = min((size_t)n, p0 + (size_t)len);
  for (size_t p = p0; p < p1; p++) {
    const int i = emb_dense_id(ids + io, p, rows, pad, c == 0, status);
    if (i < 0) continue;
    global const real_t *src = dy + dyo + p * dim + c;
    global float *dst = out + (size_t)i * dim;
    uint k = 0;
    for (; k + 8 <= w; k += 8)
      vstore8(vload8(0, dst + k) + LOAD8(src, k), 0, dst + k);
    for (; k < w; k++) dst[k] += LOAD(src, k);
  }
}

/* dweight = the chunks' partials added in chunk order; item = r * dim + c. */
__kernel RUMUS_WG_ATTR
void embedding_dense_fold(ulong cnt, ulong base, ulong chunks, ulong numel,
                          global const float *part, global grad_t *dw,
                          ulong dwo) {
  EMB_ITEM(cnt, base);
  float s = 0.0f;
  for (size_t k = 0; k < chunks; k++) s += part[k * numel + item];
  RUMUS_STORE(GRAD_STORAGE, s, dw, dwo + item);
}
