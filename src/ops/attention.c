/*
 * attention.c - scaled dot-product attention, forward and backward, flash
 * style (kernels in cl/attention.cl).  q, k, v, out, dout, dq, dk and dv
 * share one floating storage type (the program's RUMUS_STORAGE), the mask
 * has any floating type (MASK_STORAGE), lse and the backward's delta
 * scratch are F32.  Every program is specialised on the head dim
 * (HEAD_DIM), so a head's rows live in private arrays of fixed size.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const FILE_CL = "attention.cl";

/* The head dims rumus_cache_fill() builds (the common ones); any other D
 * in 1 .. RUMUS_ATTENTION_MAX_D builds its programs at first use. */
static const size_t WARM_D[] = {32, 64, 96, 128};

/* A call's geometry: q [B, H, Tq, D], k and v [B, H, Tk, D], and the
 * mask's element strides along (b, h, i, j), 0 where it is broadcast. */
typedef struct {
  size_t B, H, Tq, Tk, D;
  cl_ulong ms[4];
} att_shape;

/* Work-items (rows) per group of the work-group kernels (ATT_WG). */
#define ATT_WG 64
/* attn_delta_wg's work-items per row and per group (cl/attention.cl). */
#define DELTA_LANES 16
#define DELTA_WG 256

/* Rows per local-memory tile of the work-group kernels (ATT_BT): two
 * tiles of DPAD floats per row, and two floats per row, fit the device's
 * local memory (less 1 KiB), 32 at most, a multiple of 8; 0 if not even
 * 8 fit (the row kernels then run). */
static size_t tile_rows(const rumus_ctx *ctx, size_t D) {
  const size_t dpad = (D + 7) / 8 * 8;
  const size_t avail = ctx->local_mem > 1024 ? (size_t)ctx->local_mem - 1024 : 0;
  size_t bt = avail / (8 * dpad + 8);
  bt = bt > 32 ? 32 : bt / 8 * 8;
  return bt;
}

/* ---- Tiles of the GPU variant's *_tile kernels ------------------------ */

/* cl/attention.cl's ATT_BM, ATT_BN, ATT_RM, ATT_RN, ATT_DC, ATT_DCKV. */
typedef struct {
  int bm, bn, rm, rn, dc, dckv;
} att_tiles;

/* 8 x 4 score blocks (128 work-items a group), head-dim chunks of 16 for
 * the forward and dq and of 8 for dk / dv: on the H100 at B = 8, H = 16,
 * D = 64, T = 1024 and 4096, 1.01-1.04 times the forward speed and
 * 1.08-1.14 times the forward + backward speed of 64 x 64 x 4 x 4 x 8 x 8
 * (two float4 reads of local memory per 32 fmas instead of per 16), where
 * 8 x 8 blocks (64 work-items) and 4 x 8 were slower than both, with a
 * 128- or a 255-register cap (bench/results/h100/session-1302). */
static const att_tiles DEFAULT_TILES = {64, 64, 8, 4, 16, 8};

/* The backward's first choice: dk / dv's head-dim chunks of 16 as well
 * (half the chunk barriers), where the device's local memory takes them:
 * on the H100 at the shapes above, 1.05-1.06 times the forward + backward
 * speed of DEFAULT_TILES (bench/results/h100/session-2249). */
static const att_tiles DEFAULT_BWD_TILES = {64, 64, 8, 4, 16, 16};

/* Floats of one chunk buffer (cl/attention.cl's HALF): n d-major sides
 * of dc rows of pitch ldb, or one chunk of dc rows of dpt floats. */
static size_t att_half(size_t n, size_t dc, size_t ldb, size_t dpt) {
  return n * dc * ldb > dc * dpt ? n * dc * ldb : dc * dpt;
}

/* Largest head dim the tiled kernels take (their output block lives in
 * registers: RD = D / (BN / RN) floats per owned row and output). */
#define TILE_MAX_D 128

static size_t tiles_wgs(const att_tiles *t) {
  return (size_t)(t->bm / t->rm) * (size_t)(t->bn / t->rn);
}

/* The two sets of tiled kernels, tiled separately: the forward, and the
 * backward's dq and dk / dv. */
enum { ATT_FWD = 0, ATT_BWD = 1 };

/* A tuning switch of the tiled kernels: 1 when the variable `name` is
 * "1", 0 when it is "0", else the default. */
static int env_switch(const char *name, int dflt) {
  const char *v = getenv(name);
  if (v != NULL && strcmp(v, "1") == 0) return 1;
  if (v != NULL && strcmp(v, "0") == 0) return 0;
  return dflt;
}

/* ATT_DBUF of the tiled kernels: RUMUS_ATTENTION_DBUF=1 stages each
 * chunk in one of two local buffers (one barrier a chunk, twice the
 * chunk memory), anything else or unset in one (two barriers a chunk:
 * the default, as it needs fewer registers; ptxas puts the forward and
 * dq at D = 64 within 128 registers without spills only so). */
static int tiles_dbuf(void) { return env_switch("RUMUS_ATTENTION_DBUF", 0); }

/* Bytes of local memory of the set's largest tiled kernel at head dim D
 * (the sizes of cl/attention.cl's local arrays: NBUF chunk buffers of
 * HALF floats, the score tile, the forward's row partials, dk / dv's
 * lse and delta, the stamps). */
static size_t tiles_local(const att_tiles *t, size_t D, int set) {
  const size_t ntx = (size_t)(t->bn / t->rn);
  const size_t dpt = (D + ntx - 1) / ntx * ntx;
  const size_t ldb = (size_t)(t->bm > t->bn ? t->bm : t->bn) + 4;
  const size_t ptile = (size_t)t->bn * ((size_t)t->bm + 4);
  const size_t nbuf = tiles_dbuf() ? 2 : 1;
  size_t m;
  if (set == ATT_FWD) {
    m = nbuf * att_half(2, (size_t)t->dc, ldb, dpt) + ptile +
        (size_t)t->bm * ntx;
  } else {
    const size_t dq = nbuf * att_half(4, (size_t)t->dc, ldb, dpt) + ptile;
    const size_t kv = nbuf * att_half(4, (size_t)t->dckv, ldb, dpt) + ptile +
                      2 * (size_t)t->bn;
    m = dq > kv ? dq : kv;
  }
  return m * sizeof(float) + 4 * sizeof(cl_int);
}

/* Whether cl/attention.cl takes t (whole blocks and chunks, a work-group
 * the device allows) and the set's local arrays at head dim D fit the
 * device. */
static int tiles_ok(const rumus_ctx *ctx, const att_tiles *t, size_t D,
                    int set) {
  if (t->rm < 1 || t->rn < 1 || t->rm > 8 || t->rn > 8 || t->bm < 1 ||
      t->bn < 1 || t->bm > 256 || t->bn > 256 || t->bm % t->rm ||
      t->bn % t->rn || t->dc < 1 || t->dckv < 1 || t->bn % t->dc ||
      t->bn % t->dckv)
    return 0;
  const size_t wgs = tiles_wgs(t), ntx = (size_t)(t->bn / t->rn);
  if (wgs > ctx->max_wg || wgs > 1024 || D > TILE_MAX_D ||
      (D + ntx - 1) / ntx > 16)
    return 0;
  const size_t avail =
      ctx->local_mem > 1024 ? (size_t)ctx->local_mem - 1024 : 0;
  return tiles_local(t, D, set) <= avail;
}

/* Tile sizes from the environment variable `name`: "BMxBNxRMxRN",
 * optionally "xDC" and "xDCKV" more (DEFAULT_TILES' if not given).  1 with *t
 * set if it is there and valid for the set on this device at head dim D;
 * anything else is ignored (0). */
static int tiles_from_env(const rumus_ctx *ctx, const char *name, size_t D,
                          int set, att_tiles *t) {
  long f[6] = {0, 0, 0, 0, DEFAULT_TILES.dc, DEFAULT_TILES.dckv};
  if (!rumus__env_tiling(name, f, 4, 6)) return 0;
  const att_tiles e = {(int)f[0], (int)f[1], (int)f[2],
                       (int)f[3], (int)f[4], (int)f[5]};
  if (!tiles_ok(ctx, &e, D, set)) return 0;
  *t = e;
  return 1;
}

/* The set's tiles at head dim D for storage st on the GPU variant, 0 if the
 * *_wg and *_row kernels run instead.  A tiling in RUMUS_ATTENTION_FWD_TILE
 * or RUMUS_ATTENTION_BWD_TILE (else RUMUS_ATTENTION_TILE) replaces the
 * choice; "off" there keeps the work-group kernels, "default" takes the
 * default tiles for every storage.  Without either, F32 takes the default
 * tiles (the backward DEFAULT_BWD_TILES where they fit, else DEFAULT_TILES)
 * where the device takes them (D <= TILE_MAX_D, local memory): on the H200
 * they ran 1.3-1.9 times the work-group kernels' speed and passed
 * check_attention's F32 shapes, while its first 16-bit case at D = 128 did
 * not finish within a minute (building or running, not yet known), so 16-bit
 * storage keeps the work-group kernels until that is found. */
static int pick_tiles(const rumus_ctx *ctx, rumus_dtype st, size_t D, int set,
                      att_tiles *t) {
  static const char *const NAMES[2] = {"RUMUS_ATTENTION_FWD_TILE",
                                       "RUMUS_ATTENTION_BWD_TILE"};
  if (!rumus__gpu_variant(ctx)) return 0;
  if (tiles_from_env(ctx, NAMES[set], D, set, t) ||
      tiles_from_env(ctx, "RUMUS_ATTENTION_TILE", D, set, t))
    return 1;
  const char *v = getenv(NAMES[set]);
  if (v == NULL || *v == '\0') v = getenv("RUMUS_ATTENTION_TILE");
  const int forced = v != NULL && strcmp(v, "default") == 0;
  if (v != NULL && strcmp(v, "off") == 0) return 0;
  if (!forced && st != RUMUS_F32) return 0;
  *t = DEFAULT_BWD_TILES;
  if (set == ATT_BWD && tiles_ok(ctx, t, D, set)) return 1;
  *t = DEFAULT_TILES;
  return tiles_ok(ctx, t, D, set);
}

static int same_tiles(const att_tiles *a, const att_tiles *b) {
  return a->bm == b->bm && a->bn == b->bn && a->rm == b->rm &&
         a->rn == b->rn && a->dc == b->dc && a->dckv == b->dckv;
}

/* ATT_PREFETCH of the tiled kernels: RUMUS_ATTENTION_PREFETCH=1 overlaps
 * a chunk's global loads with the previous chunk's product (the values
 * wait in registers: more of them live), anything else or unset does not
 * (the default: fewer registers, see DEFAULT_TILES). */
static int tiles_prefetch(void) {
  return env_switch("RUMUS_ATTENTION_PREFETCH", 0);
}

/* A bit set of the two kernel sets (bit 1 the forward, bit 2 the
 * backward) from environment variable `name` ("0" to "3"), else dflt. */
static int env_sets(const char *name, int dflt) {
  const char *v = getenv(name);
  if (v != NULL && v[0] >= '0' && v[0] <= '3' && v[1] == '\0')
    return v[0] - '0';
  return dflt;
}

/* ATT_INTERIOR of the tiled kernels (cl/attention.cl), the sets that skip
 * the per-score test against the matrix, the diagonal and the mask on
 * tiles wholly inside (the same bits either way).  ATT_EXP2, the sets
 * whose scores are in log2 units with exp2 per probability (else natural
 * log and exp).  Default 2 for both, the backward alone: on the H100 the
 * backward ran 4-5% faster with the skip and 4% faster with exp2
 * (session-2249), while the forward ran fastest with neither (8x16x4096x64:
 * 20.1 ms, 21.1 with the skip, 24.1 with exp2, 20.7 with both;
 * bench/results/h100/session-0153/b/).  RUMUS_ATTENTION_INTERIOR and
 * RUMUS_ATTENTION_EXP2 = 0..3 replace them. */
static int tiles_interior(void) {
  return env_sets("RUMUS_ATTENTION_INTERIOR", 2);
}
static int tiles_exp2(void) { return env_sets("RUMUS_ATTENTION_EXP2", 2); }

/* ATT_V4 of the tiled kernels: float4 staging where the head dim, the
 * chunk depths and the tile's float4 columns allow it (cl/attention.cl);
 * RUMUS_ATTENTION_V4=0 keeps the scalar staging (the same bits: only the
 * loads change). */
static int tiles_v4(const att_tiles *t, size_t D) {
  const char *v = getenv("RUMUS_ATTENTION_V4");
  if (v != NULL && strcmp(v, "0") == 0) return 0;
  return D % 4 == 0 && t->dc % 4 == 0 && t->dckv % 4 == 0 &&
         (t->bn / t->rn) % 4 == 0;
}

/* Rows per work-item of the CPU variant's row kernels (cl/attention.cl's
 * ATT_ROWS: the *_rows kernels for 2 or 4, each key or query chunk loaded
 * once for that many rows; the one-row kernels for 1, and always on the
 * GPU variant, whose row kernels are a fallback).  2: on 2 AVX2 cores
 * (PoCL) at D = 64 and 128 it ran the forward 1.1-1.7 times and forward
 * plus backward 1.5-1.6 times the speed of one row, and 4 rows (whose
 * accumulators and rows outgrow the 16 vector registers) the forward at
 * one row's speed and the backward slower.  RUMUS_ATTENTION_CPU_ROWS = 1,
 * 2 or 4 replaces the choice; every choice gives the same bits. */
static int cpu_rows(const rumus_ctx *ctx) {
  if (rumus__gpu_variant(ctx)) return 1;
  const char *v = getenv("RUMUS_ATTENTION_CPU_ROWS");
  if (v != NULL && (!strcmp(v, "1") || !strcmp(v, "2") || !strcmp(v, "4")))
    return atoi(v);
  return 2;
}

/* The options of the family's program for storage `st`, mask storage `mt`
 * and head dim D, for the launches of `set` (warm-up and launches);
 * align4: the staged tensors allow RUMUS_ALIGN4 (warm-up: offset 0).  One
 * program holds the row and work-group kernels and the tiled kernels
 * (ATT_TILED) of the sets whose tiles pick_tiles() gives: both sets when
 * their tiles agree (the usual case: one program), else the one set.  A
 * tiling that the device cannot run would fail the whole build. */
static void att_options(const rumus_ctx *ctx, rumus_dtype st, rumus_dtype mt,
                        size_t D, int set, int align4, char *buf,
                        size_t len) {
  char head[96], tiles[240] = "";
  const size_t bt = tile_rows(ctx, D);
  att_tiles tf, tb;
  const int f = pick_tiles(ctx, st, D, ATT_FWD, &tf);
  const int b = pick_tiles(ctx, st, D, ATT_BWD, &tb);
  int bits = 0;
  if (f && b && same_tiles(&tf, &tb))
    bits = 3;
  else if (set == ATT_FWD && f)
    bits = 1;
  else if (set == ATT_BWD && b)
    bits = 2;
  const att_tiles *t = set == ATT_FWD ? &tf : &tb;
  const int v4 = bits && tiles_v4(t, D); /* bits 3: tf and tb agree */
  rumus__options_head(head, sizeof head, st, 1, v4 && align4);
  if (bits) {
    /* 128 registers: four groups of 128 work-items per compute unit
     * (65536 registers), where ptxas alone gives the tiled kernels up to
     * 250 and fewer groups (whose barriers then idle the unit); at the
     * default tiles a 255 cap ran within 1% (session-1302). */
    char nv[40];
    rumus__nv_maxrreg(ctx, "RUMUS_ATTENTION_MAXRREG", 128, nv, sizeof nv);
    snprintf(tiles, sizeof tiles, " -DATT_TILED=%d -DATT_BM=%d -DATT_BN=%d "
             "-DATT_RM=%d -DATT_RN=%d -DATT_DC=%d -DATT_DCKV=%d "
             "-DATT_PREFETCH=%d -DATT_DBUF=%d -DATT_V4=%d "
             "-DATT_INTERIOR=%d -DATT_EXP2=%d%s", bits, t->bm, t->bn, t->rm,
             t->rn, t->dc, t->dckv, tiles_prefetch(), tiles_dbuf(), v4,
             tiles_interior(), tiles_exp2(), nv);
  }
  const int nr = cpu_rows(ctx);
  char rows[24] = "";
  if (nr > 1) snprintf(rows, sizeof rows, " -DATT_ROWS=%d", nr);
  snprintf(buf, len, "%s -DHEAD_DIM=%zu -DMASK_STORAGE=%s -DATT_WG=%d "
           "-DATT_BT=%zu%s%s", head, D, rumus__storage_tag(mt), ATT_WG,
           bt ? bt : 8, rows, tiles);
}

/* 1 if the staged tensors ts[0 .. n) all start at a multiple of 4
 * elements (with D % 4 == 0 every staged row then does: RUMUS_ALIGN4). */
static int staged_aligned4(const rumus_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    if (!rumus__aligned(ts[i], 0, 4)) return 0;
  return 1;
}

/* ---- Argument checks --------------------------------------------------- */

/* The scale the kernels use: p->scale, or 1 / sqrt(D) for 0. */
static int check_params(rumus_ctx *ctx, const char *op,
                        const rumus_attention_params *p, size_t D,
                        float *scale) {
  RUMUS__FAIL_IF(!(isfinite(p->scale) && p->scale >= 0.0f), ctx, RUMUS_EINVAL,
                 "%s: scale %g must be finite and > 0 (0: 1 / sqrt(D))", op,
                 (double)p->scale);
  *scale = p->scale > 0.0f ? p->scale : (float)(1.0 / sqrt((double)D));
  return RUMUS_OK;
}

/* t is 4-D [B, H, T, D] of type `dtype`, with B, H, D those of s. */
static int check_bhtd(rumus_ctx *ctx, const char *op, const char *name,
                      const rumus_tensor *t, rumus_dtype dtype,
                      const att_shape *s, size_t *T) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, dtype));
  char b[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(t->ndim != 4, ctx, RUMUS_ESHAPE,
                 "%s: %s %s must be 4-D [B, H, T, D]", op, name,
                 rumus__shape_str(t, b, sizeof b));
  RUMUS__FAIL_IF(t->shape[0] != s->B || t->shape[1] != s->H ||
                     t->shape[3] != s->D,
                 ctx, RUMUS_ESHAPE,
                 "%s: %s %s must have q's B = %zu, H = %zu and D = %zu", op,
                 name, rumus__shape_str(t, b, sizeof b), s->B, s->H, s->D);
  *T = t->shape[2];
  return RUMUS_OK;
}

/* q, k, v: the geometry into *s. */
static int check_qkv(rumus_ctx *ctx, const char *op, const rumus_tensor *q,
                     const rumus_tensor *k, const rumus_tensor *v,
                     att_shape *s) {
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "q", q));
  char b[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(q->ndim != 4, ctx, RUMUS_ESHAPE,
                 "%s: q %s must be 4-D [B, H, Tq, D]", op,
                 rumus__shape_str(q, b, sizeof b));
  s->B = q->shape[0];
  s->H = q->shape[1];
  s->Tq = q->shape[2];
  s->D = q->shape[3];
  RUMUS__FAIL_IF(s->D < 1 || s->D > RUMUS_ATTENTION_MAX_D, ctx, RUMUS_ESHAPE,
                 "%s: head dim D = %zu of q %s must be 1 to %d", op, s->D,
                 rumus__shape_str(q, b, sizeof b), RUMUS_ATTENTION_MAX_D);
  size_t Tv;
  RUMUS__FORWARD(check_bhtd(ctx, op, "k", k, q->dtype, s, &s->Tk));
  RUMUS__FORWARD(check_bhtd(ctx, op, "v", v, q->dtype, s, &Tv));
  RUMUS__FAIL_IF(Tv != s->Tk, ctx, RUMUS_ESHAPE,
                 "%s: v %s must have k's length Tk = %zu", op,
                 rumus__shape_str(v, b, sizeof b), s->Tk);
  return RUMUS_OK;
}

/* t (not NULL) has ref's type and shape. */
static int check_like(rumus_ctx *ctx, const char *op, const char *name,
                      const rumus_tensor *t, const char *ref_name,
                      const rumus_tensor *ref) {
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, name, t, ref->dtype));
  return rumus__check_same_shape(ctx, op, ref_name, ref, name, t);
}

/* The mask (NULL: none): floating, 2 to 4 dims, broadcastable to [B, H,
 * Tq, Tk] by PyTorch's rules; its strides into s->ms. */
static int check_mask(rumus_ctx *ctx, const char *op, const rumus_tensor *m,
                      att_shape *s) {
  for (int a = 0; a < 4; a++) s->ms[a] = 0;
  if (m == NULL) return RUMUS_OK;
  RUMUS__FORWARD(rumus__check_float_tensor(ctx, op, "mask", m));
  char b[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(m->ndim < 2 || m->ndim > 4, ctx, RUMUS_ESHAPE,
                 "%s: mask %s must have 2 to 4 dimensions", op,
                 rumus__shape_str(m, b, sizeof b));
  const size_t want[4] = {s->B, s->H, s->Tq, s->Tk};
  static const char *const AXIS[4] = {"B", "H", "Tq", "Tk"};
  size_t stride = 1;
  for (int d = m->ndim - 1; d >= 0; d--) {
    const int a = 4 - m->ndim + d;
    const size_t e = m->shape[d];
    RUMUS__FAIL_IF(e != want[a] && e != 1, ctx, RUMUS_ESHAPE,
                   "%s: mask %s does not broadcast to [%zu, %zu, %zu, %zu]: "
                   "extent %zu against %s = %zu", op,
                   rumus__shape_str(m, b, sizeof b), s->B, s->H, s->Tq,
                   s->Tk, e, AXIS[a], want[a]);
    s->ms[a] = e == 1 ? 0 : (cl_ulong)stride;
    stride *= e;
  }
  return RUMUS_OK;
}

/* lse (NULL passes when optional): F32 [B, H, Tq]. */
static int check_lse(rumus_ctx *ctx, const char *op, const rumus_tensor *lse,
                     const att_shape *s, int optional) {
  if (lse == NULL && optional) return RUMUS_OK;
  RUMUS__FORWARD(rumus__check_tensor(ctx, op, "lse", lse, RUMUS_F32));
  char b[RUMUS__SHAPE_BUF];
  RUMUS__FAIL_IF(lse->ndim != 3 || lse->shape[0] != s->B ||
                     lse->shape[1] != s->H || lse->shape[2] != s->Tq,
                 ctx, RUMUS_ESHAPE, "%s: lse %s must be [B, H, Tq] = [%zu, "
                 "%zu, %zu]", op, rumus__shape_str(lse, b, sizeof b), s->B,
                 s->H, s->Tq);
  return RUMUS_OK;
}

/* ---- Launches ------------------------------------------------------------ */

/* The arguments every kernel takes after its tensors (ATT_ARGS in
 * cl/attention.cl); the values live here while the launch sets them. */
typedef struct {
  cl_mem mask;
  cl_ulong m_off, ms[4], rows, H, Tq, Tk;
  cl_int has_mask, causal;
  cl_float scale;
} att_tail;

static att_tail tail_of(const att_shape *s, const rumus_tensor *mask,
                        const rumus_tensor *stand_in, float scale,
                        int causal) {
  att_tail t;
  t.mask = mask ? mask->mem : stand_in->mem;
  t.m_off = mask ? rumus__off(mask) : 0;
  t.has_mask = mask != NULL;
  for (int a = 0; a < 4; a++) t.ms[a] = s->ms[a];
  t.rows = 0;
  t.H = s->H;
  t.Tq = s->Tq;
  t.Tk = s->Tk;
  t.scale = scale;
  t.causal = causal != 0;
  return t;
}

static size_t push_tail(rumus__arg *args, size_t na, const att_tail *t) {
  args[na++] = RUMUS__ARG(t->mask);
  args[na++] = RUMUS__ARG(t->m_off);
  args[na++] = RUMUS__ARG(t->has_mask);
  for (int a = 0; a < 4; a++) args[na++] = RUMUS__ARG(t->ms[a]);
  args[na++] = RUMUS__ARG(t->rows);
  args[na++] = RUMUS__ARG(t->H);
  args[na++] = RUMUS__ARG(t->Tq);
  args[na++] = RUMUS__ARG(t->Tk);
  args[na++] = RUMUS__ARG(t->scale);
  args[na++] = RUMUS__ARG(t->causal);
  return na;
}

/* A tensor's buffer and element offset as two kernel arguments (a NULL
 * tensor passes stand_in's buffer, which the kernel does not touch). */
typedef struct {
  cl_mem mem;
  cl_ulong off;
} att_arg;

static att_arg arg_of(const rumus_tensor *t, const rumus_tensor *stand_in) {
  att_arg a = {t ? t->mem : stand_in->mem, t ? rumus__off(t) : 0};
  return a;
}

static size_t push_t(rumus__arg *args, size_t na, const att_arg *a) {
  args[na++] = RUMUS__ARG(a->mem);
  args[na++] = RUMUS__ARG(a->off);
  return na;
}

/* Launches one row kernel over `rows` work-items. */
static int launch_rows(rumus_ctx *ctx, const char *op, const char *opts,
                       const char *kernel, size_t rows, size_t na,
                       const rumus__arg *args) {
  const rumus__kernel_ref k = {FILE_CL, opts, kernel};
  const size_t local = rumus__row_local(ctx, rows);
  return rumus__launch(ctx, op, &k, 1, &rows, &local, na, args);
}

/* 1 if `base` runs as its work-group kernel (base_wg): the GPU variant, on
 * a device whose local memory holds tiles of 8 rows and that runs the
 * kernel with ATT_WG work-items; else its row kernel (base_row). */
static int use_wg(rumus_ctx *ctx, const char *op, const char *opts,
                  const char *base, size_t D, int *wg) {
  *wg = 0;
  if (!rumus__gpu_variant(ctx) || ctx->max_wg < ATT_WG ||
      tile_rows(ctx, D) == 0)
    return RUMUS_OK;
  char name[32];
  snprintf(name, sizeof name, "%s_wg", base);
  const rumus__kernel_ref k = {FILE_CL, opts, name};
  size_t limit;
  RUMUS__FORWARD(rumus__kernel_wg_limit(ctx, op, &k, &limit));
  *wg = limit >= ATT_WG;
  return RUMUS_OK;
}

/* Launches kernel `base`_tile (tiles of `set` from pick_tiles(), where
 * the kernel runs with their work-group), else `base`_wg or _row (use_wg),
 * over `per_head` owned rows of each of bh heads. */
static int launch(rumus_ctx *ctx, const char *op, const char *opts,
                  const char *base, rumus_dtype st, size_t D, int set,
                  size_t bh, size_t per_head, size_t na,
                  const rumus__arg *args) {
  char name[32];
  att_tiles t;
  if (pick_tiles(ctx, st, D, set, &t)) {
    snprintf(name, sizeof name, "%s_tile", base);
    const rumus__kernel_ref k = {FILE_CL, opts, name};
    const size_t local = tiles_wgs(&t);
    size_t limit;
    RUMUS__FORWARD(rumus__kernel_wg_limit(ctx, op, &k, &limit));
    if (limit >= local) {
      const size_t blocks = (per_head + (size_t)t.bm - 1) / (size_t)t.bm;
      const size_t global = bh * blocks * local;
      return rumus__launch(ctx, op, &k, 1, &global, &local, na, args);
    }
  }
  int wg;
  RUMUS__FORWARD(use_wg(ctx, op, opts, base, D, &wg));
  const size_t nr = wg ? 1 : (size_t)cpu_rows(ctx);
  snprintf(name, sizeof name, "%s_%s", base,
           wg ? "wg" : nr > 1 ? "rows" : "row");
  if (!wg)
    return launch_rows(ctx, op, opts, name, bh * ((per_head + nr - 1) / nr),
                       na, args);
  const rumus__kernel_ref k = {FILE_CL, opts, name};
  const size_t local = ATT_WG;
  const size_t global = bh * ((per_head + ATT_WG - 1) / ATT_WG) * ATT_WG;
  return rumus__launch(ctx, op, &k, 1, &global, &local, na, args);
}

/* ---- Forward ------------------------------------------------------------- */

int rumus_attention_fwd(rumus_ctx *ctx, const rumus_attention_params *params,
                        const rumus_tensor *q, const rumus_tensor *k,
                        const rumus_tensor *v, const rumus_tensor *mask,
                        rumus_tensor *out, rumus_tensor *lse) {
  static const char *const op = "rumus_attention_fwd";
  if (ctx == NULL) return RUMUS_ENULL;
  const rumus_attention_params p =
      params ? *params : (rumus_attention_params)RUMUS_ATTENTION_DEFAULTS;
  att_shape s;
  float scale = 0.0f;
  RUMUS__FORWARD(check_qkv(ctx, op, q, k, v, &s));
  RUMUS__FORWARD(check_params(ctx, op, &p, s.D, &scale));
  RUMUS__FORWARD(check_mask(ctx, op, mask, &s));
  RUMUS__FORWARD(check_like(ctx, op, "out", out, "q", q));
  RUMUS__FORWARD(check_lse(ctx, op, lse, &s, 1));
  const char *names[6] = {"out", "lse", "q", "k", "v", "mask"};
  const rumus_tensor *all[6] = {out, lse, q, k, v, mask};
  RUMUS__FORWARD(rumus__check_overlaps(ctx, op, names, all, 6, 2, -1));
  const size_t rows = s.B * s.H * s.Tq;
  if (rows == 0) return RUMUS_OK;
  char opts[400];
  const rumus_tensor *staged[3] = {q, k, v};
  att_options(ctx, q->dtype, mask ? mask->dtype : RUMUS_F32, s.D, ATT_FWD,
              staged_aligned4(staged, 3), opts, sizeof opts);
  const att_arg ts[5] = {arg_of(q, q), arg_of(k, q), arg_of(v, q),
                         arg_of(out, q), arg_of(lse, q)};
  att_tail t = tail_of(&s, mask, q, scale, p.causal);
  t.rows = rows;
  const cl_int has_lse = lse != NULL;
  rumus__arg args[32];
  size_t na = 0;
  for (int i = 0; i < 5; i++) na = push_t(args, na, &ts[i]);
  args[na++] = RUMUS__ARG(has_lse);
  na = push_tail(args, na, &t);
  return launch(ctx, op, opts, "attn_fwd", q->dtype, s.D, ATT_FWD, s.B * s.H,
                s.Tq, na, args);
}

/* ---- Backward ------------------------------------------------------------ */

typedef struct {
  const rumus_tensor *q, *k, *v, *mask, *out, *lse, *dout;
  rumus_tensor *dq, *dk, *dv;
} att_bwd;

static int check_bwd(rumus_ctx *ctx, const char *op, const att_bwd *a,
                     att_shape *s) {
  RUMUS__FORWARD(check_qkv(ctx, op, a->q, a->k, a->v, s));
  RUMUS__FORWARD(check_mask(ctx, op, a->mask, s));
  RUMUS__FORWARD(check_like(ctx, op, "out", a->out, "q", a->q));
  RUMUS__FORWARD(check_lse(ctx, op, a->lse, s, 0));
  RUMUS__FORWARD(check_like(ctx, op, "dout", a->dout, "q", a->q));
  if (a->dq) RUMUS__FORWARD(check_like(ctx, op, "dq", a->dq, "q", a->q));
  if (a->dk) RUMUS__FORWARD(check_like(ctx, op, "dk", a->dk, "k", a->k));
  if (a->dv) RUMUS__FORWARD(check_like(ctx, op, "dv", a->dv, "v", a->v));
  const char *names[10] = {"dq", "dk", "dv", "q", "k",
                           "v", "mask", "out", "lse", "dout"};
  const rumus_tensor *all[10] = {a->dq, a->dk, a->dv,  a->q,   a->k,
                                 a->v,  a->mask, a->out, a->lse, a->dout};
  return rumus__check_overlaps(ctx, op, names, all, 10, 3, -1);
}

/* delta = rowsum(dout * out) into the F32 scratch `delta`: attn_delta_wg
 * on the work-group variant, else attn_delta_row (a work-item per row
 * read out and dout at a third of the copy bandwidth on an H100: 263 us
 * at 8x16x4096x64, bench/results/h100/session-2249/a/attn_kernels.txt). */
static int run_delta(rumus_ctx *ctx, const char *op, const char *opts,
                     const att_bwd *a, cl_mem delta, size_t rows) {
  const att_arg o = arg_of(a->out, a->q), d = arg_of(a->dout, a->q);
  const cl_ulong nrows = rows;
  rumus__arg args[6];
  size_t na = push_t(args, 0, &o);
  na = push_t(args, na, &d);
  args[na++] = RUMUS__ARG(delta);
  args[na++] = RUMUS__ARG(nrows);
  if (rumus__gpu_variant(ctx) && ctx->max_wg >= DELTA_WG) {
    const rumus__kernel_ref k = {FILE_CL, opts, "attn_delta_wg"};
    size_t limit;
    RUMUS__FORWARD(rumus__kernel_wg_limit(ctx, op, &k, &limit));
    if (limit >= DELTA_WG) {
      const size_t local = DELTA_WG,
                   global = rumus__round_up(rows * DELTA_LANES, DELTA_WG);
      return rumus__launch(ctx, op, &k, 1, &global, &local, na, args);
    }
  }
  return launch_rows(ctx, op, opts, "attn_delta_row", rows, na, args);
}

/* The inputs of the dk / dv and dq kernels, in their order: q, k, v, dout,
 * lse, then delta. */
static size_t push_inputs(rumus__arg *args, const att_arg *in, cl_mem *delta) {
  size_t na = 0;
  for (int i = 0; i < 5; i++) na = push_t(args, na, &in[i]);
  args[na++] = RUMUS__ARG(*delta);
  return na;
}

static int run_grads(rumus_ctx *ctx, const char *op, const char *opts,
                     const att_bwd *a, const att_shape *s, float scale,
                     int causal, cl_mem delta) {
  const att_arg in[5] = {arg_of(a->q, a->q), arg_of(a->k, a->q),
                         arg_of(a->v, a->q), arg_of(a->dout, a->q),
                         arg_of(a->lse, a->q)};
  att_tail t = tail_of(s, a->mask, a->q, scale, causal);
  rumus__arg args[40];
  if ((a->dk || a->dv) && s->B * s->H * s->Tk > 0) {
    const att_arg dk = arg_of(a->dk, a->q), dv = arg_of(a->dv, a->q);
    const cl_int has_dk = a->dk != NULL, has_dv = a->dv != NULL;
    t.rows = s->B * s->H * s->Tk;
    size_t na = push_inputs(args, in, &delta);
    na = push_t(args, na, &dk);
    na = push_t(args, na, &dv);
    args[na++] = RUMUS__ARG(has_dk);
    args[na++] = RUMUS__ARG(has_dv);
    na = push_tail(args, na, &t);
    RUMUS__FORWARD(launch(ctx, op, opts, "attn_dkdv", a->q->dtype, s->D, ATT_BWD,
                          s->B * s->H, s->Tk, na, args));
  }
  if (a->dq && s->B * s->H * s->Tq > 0) {
    const att_arg dq = arg_of(a->dq, a->q);
    t.rows = s->B * s->H * s->Tq;
    size_t na = push_inputs(args, in, &delta);
    na = push_t(args, na, &dq);
    na = push_tail(args, na, &t);
    RUMUS__FORWARD(launch(ctx, op, opts, "attn_dq", a->q->dtype, s->D, ATT_BWD,
                          s->B * s->H, s->Tq, na, args));
  }
  return RUMUS_OK;
}

int rumus_attention_bwd(rumus_ctx *ctx, const rumus_attention_params *params,
                        const rumus_tensor *q, const rumus_tensor *k,
                        const rumus_tensor *v, const rumus_tensor *mask,
                        const rumus_tensor *out, const rumus_tensor *lse,
                        const rumus_tensor *dout, rumus_tensor *dq,
                        rumus_tensor *dk, rumus_tensor *dv) {
  static const char *const op = "rumus_attention_bwd";
  if (ctx == NULL) return RUMUS_ENULL;
  const rumus_attention_params p =
      params ? *params : (rumus_attention_params)RUMUS_ATTENTION_DEFAULTS;
  const att_bwd a = {q, k, v, mask, out, lse, dout, dq, dk, dv};
  att_shape s;
  float scale = 0.0f;
  RUMUS__FORWARD(check_bwd(ctx, op, &a, &s));
  RUMUS__FORWARD(check_params(ctx, op, &p, s.D, &scale));
  const size_t rows = s.B * s.H * s.Tq;
  if (dq == NULL && dk == NULL && dv == NULL) return RUMUS_OK;
  char opts[400];
  const rumus_tensor *staged[4] = {q, k, v, dout};
  att_options(ctx, q->dtype, mask ? mask->dtype : RUMUS_F32, s.D, ATT_BWD,
              staged_aligned4(staged, 4), opts, sizeof opts);
  /* delta of every query row; a stand-in of one float without queries
   * (dk and dv are then 0: the kernels read no delta). */
  cl_mem delta;
  rumus__scratch_begin(ctx);
  int st = rumus__scratch_slot(ctx, op, RUMUS__SCRATCH_PARTIALS,
                               (rows ? rows : 1) * sizeof(float), &delta);
  if (st == RUMUS_OK && rows) st = run_delta(ctx, op, opts, &a, delta, rows);
  if (st == RUMUS_OK)
    st = run_grads(ctx, op, opts, &a, &s, scale, p.causal, delta);
  rumus__scratch_end(ctx);
  return st;
}

/* F32 programs (no mask or an F32 mask) of the common head dims, as
 * rumus.h documents, for both sets (one program when their tiles agree);
 * other types and head dims build at first use. */
int rumus__attention_warm(rumus_ctx *ctx) {
  for (size_t i = 0; i < sizeof WARM_D / sizeof WARM_D[0]; i++)
    for (int set = ATT_FWD; set <= ATT_BWD; set++) {
      char opts[400];
      cl_program prog;
      att_options(ctx, RUMUS_F32, RUMUS_F32, WARM_D[i], set, 1, opts,
                  sizeof opts);
      RUMUS__FORWARD(rumus__program_get(ctx, "rumus_cache_fill", FILE_CL,
                                        opts, &prog));
    }
  return RUMUS_OK;
}
