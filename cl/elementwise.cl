/*
 * elementwise.cl - bias add, bias gradient, element-wise arithmetic and
 * activations (forward and backward).  Every tensor arrives as (buffer,
 * ulong element offset); index math is size_t.  The tensors of a call share
 * the program's storage (RUMUS_STORAGE: F32, F16 or BF16), read and written
 * through LOAD / STORE with float arithmetic; the one exception is the bias
 * gradient's dbias, which may also be F32 for 16-bit dy (the *_f32
 * entries).  Conversions between storage types are in cast.cl.
 *
 *   add / sub / mul   out[i] = a[i] + b[i], a[i] - b[i], a[i] * b[i]
 *   scale             out[i] = alpha * x[i]
 *   axpy              y[i]   = alpha * x[i] + y[i]
 *   act fwd           y[i]   = act(x[i])
 *   act bwd           dx[i]  = dy[i] * act'(x[i])     (x: forward input)
 *   bias add          y[r, j] += bias[j]               (y: rows x F, row-major)
 *   bias grad         db[j] = sum over r of dy[r, j]   (fixed order)
 *
 * Activations (p = the op's float parameter):
 *   relu        x > 0 ? x : 0                 relu'(x) = x > 0 ? 1 : 0
 *   leaky relu  x > 0 ? x : p x               x > 0 ? 1 : p   (PyTorch's 0)
 *   sigmoid     1 / (1 + e^-x)                e / (1 + e)^2, e = e^-|x|
 *   tanh        tanh x                        4e / (1 + e)^2, e = e^-2|x|
 *   gelu tanh   0.5 x (1 + tanh u) = x s(2u), u = k (x + c x^3),
 *               s = sigmoid, k = sqrt(2/pi), c = 0.044715
 *               gelu' = s(2u) + x s'(2u) 2k (1 + 3c x^2)
 *   gelu erf    0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2)
 *               gelu' = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi)
 * The sigmoid and erfc forms avoid the cancellation of 1 + tanh / 1 + erf
 * for negative x.  Derivatives are written in e^-|x| so that no inf * 0
 * appears for large |x|.  NaN inputs give NaN, in the backward of relu and
 * leaky relu too (KEEP_NAN; PyTorch's threshold test passes dy there
 * instead, as rumus.h states); act(-inf) is the limit 0 for the GELUs and
 * act'(+-inf) the limits 1 / 0.
 *
 * Transcendentals: exp, tanh and erfc are written here in plain vector
 * arithmetic (ew_exp, ew_tanh, ew_erfc) rather than taken from the
 * builtins, which PoCL compiles to far slower code (its rint alone is a
 * dozen instructions) and NVIDIA's to slower code than these (GELU erf at
 * twice PyTorch's time on the H200); they are within a few ulp (erfc:
 * 1.2e-7 relative).  The GPU variant (EW_GPU_MATH) takes 2^r and one
 * reciprocal from native_exp2 / native_recip.
 * Every exp argument is clamped to [-87, 88] so that no intermediate or
 * result is a denormal (a ~100-cycle microcode assist per instruction on
 * x86; PoCL does not flush them): values that would fall below 1.6e-38 come
 * out as that or as 0, an absolute error below 1e-35 after the callers'
 * arithmetic.  Past the |x| where every term has reached its float limit
 * the GELU forwards return max(x, 0) and their derivatives clamp x, which
 * also keeps x^3 and x^2 from overflowing.

 * Index schemes.  Every work-item handles EW_NV contiguous vectors of
 * EW_VW elements (float4 / float8 / float16 through LOAD4 / LOAD8 /
 * LOAD16; typed, aligned float4 accesses under RUMUS_ALIGN4, see
 * common.cl): work-item g of a flat kernel covers elements
 * [g * EW_VW * EW_NV, (g + 1) * EW_VW * EW_NV).  A vector that would cross
 * the end is handled lane by lane through a private array, so the math is
 * written once, on vectors.  GPUs use EW_VW 4 and EW_NV 1 (neighbouring
 * work-items read neighbouring 16-byte vectors: coalesced); PoCL uses the
 * CPU's native width (float16 with AVX-512, else float8) and several
 * vectors per work-item (one stream per work-item and fewer work-items per
 * byte).  Flat kernels run with local size EW_LS over a
 * padded global size; padding work-items return at the bounds check.
 *
 * bias_add is 2-D: dimension 0 walks column blocks of EW_VW * EW_NV
 * elements of one row, dimension 1 the rows (no division per element).
 *
 * Activations are picked by kernel name (act_fwd_relu, act_bwd_gelu_erf,
 * ...): each thin entry passes a constant id to one inline body, so the
 * switch folds at compile time, one program serves every activation, and
 * PoCL compiles only the entries actually launched.
 *
 * bias_grad variants (rows are cut into chunks of `rc` rows; with more than
 * one chunk each chunk writes a partial row part[chunk, F] of floats, for
 * every storage, and the chunks of each column are summed in chunk order,
 * so the result is the same on every run):
 *   bias_grad_wg   GPU: a work-group of WG work-items covers 4 BG_TC
 *                  columns (a float4 each) x (WG / BG_TC) row lanes of one
 *                  chunk; lane t sums rows t, t + WG/BG_TC, ... (coalesced
 *                  across columns), then a tree over the lanes in local
 *                  memory; the last work-group to finish folds the
 *                  partial rows (one launch).
 *   bias_grad_row  CPU: one work-item per block of bw (at most BG_COLS)
 *                  columns of one chunk, walking its rows with bw / 8
 *                  float8 accumulators (private memory, in L1), no
 *                  barriers.  Long contiguous stretches of each row keep
 *                  the hardware prefetchers on the stream: 1024 columns
 *                  ran at 66-73% of STREAM where 64 ran at 36-45%, and
 *                  4096 columns of F32 rows of 4096 at 63-96% where 1024
 *                  ran at 57-67%.  bias_grad_fold then sums the partial
 *                  rows.
 */

#ifndef EW_VW
#define EW_VW 8 /* elements per vector: 4, 8 or 16 (floatN) */
#endif
#ifndef EW_NV
#define EW_NV 4 /* contiguous vectors per work-item */
#endif
#ifndef EW_LS
#define EW_LS 64 /* local size of the flat kernels */
#endif
#ifndef EW_GPU_MATH
/* 1 (GPU variant): exp through native_exp2 and erfc's reciprocal through
 * native_recip, special-function instructions on GPUs; 0: plain vector
 * arithmetic, which PoCL vectorises.  The device's own exp and erfc were
 * slower on both: scalar calls per lane on PoCL, and on the H200 GELU erf
 * took twice PyTorch's time with them. */
#define EW_GPU_MATH 0
#endif
#ifndef EW_SHORT_MATH
/* 1 (16-bit storage, whose results keep 11 or 8 significant bits): GELU
 * erf in the shorter forms gelu_erf_*_short and, with EW_GPU_MATH, e^x as
 * one native_exp2 of x log2 e (the rounding of the product, |x log2 e| <=
 * 127, adds at most 5.3e-6 relative), all far below half an ulp of F16
 * (2^-11 = 4.9e-4).  16-bit GELU is bound by arithmetic, not bytes: on
 * the H200 F16 GELU ran at 54-58% of copy with the F32 math, 1.4 times
 * PyTorch's time. */
#define EW_SHORT_MATH 0
#endif
#ifndef BG_TC
/* float4 columns per work-group of bias_grad_wg: 8 read 128 contiguous
 * bytes of each row, and leave WG / 8 row lanes */
#define BG_TC (WG >= 8 ? 8 : WG)
#endif
#define BG_TR (WG / BG_TC)         /* row lanes per work-group */
#ifndef BG_COLS
#define BG_COLS 1024 /* most columns per work-item of bias_grad_row (multiple of 8) */
#endif

#define EW_SPAN (EW_VW * EW_NV) /* elements per work-item */

#if EW_VW == 8
typedef float8 vec_t;
typedef int8 ivec_t;
#define VLOAD(p, i) LOAD8(p, i)
#define VSTORE(v, p, i) STORE8(v, p, i)
#define VLOAD_PRIV(a) vload8(0, a)
#define VSTORE_PRIV(v, a) vstore8(v, 0, a)
#define AS_VEC(v) as_float8(v)
#define AS_IVEC(v) as_int8(v)
#elif EW_VW == 16
typedef float16 vec_t;
typedef int16 ivec_t;
#define VLOAD(p, i) LOAD16(p, i)
#define VSTORE(v, p, i) STORE16(v, p, i)
#define VLOAD_PRIV(a) vload16(0, a)
#define VSTORE_PRIV(v, a) vstore16(v, 0, a)
#define AS_VEC(v) as_float16(v)
#define AS_IVEC(v) as_int16(v)
#elif EW_VW == 4
typedef float4 vec_t;
typedef int4 ivec_t;
#define VLOAD(p, i) LOAD4(p, i)
#define VSTORE(v, p, i) STORE4(v, p, i)
#define VLOAD_PRIV(a) vload4(0, a)
#define VSTORE_PRIV(v, a) vstore4(v, 0, a)
#define AS_VEC(v) as_float4(v)
#define AS_IVEC(v) as_int4(v)
#else
#error "EW_VW must be 4, 8 or 16"
#endif

/* Every helper is forced inline: PoCL otherwise calls ew_span once per
 * work-item and act_fwd with a run-time activation id (a switch per
 * vector, vectors passed through memory). */
#define EW_INLINE inline __attribute__((always_inline))

/* ---- The math, on vectors --------------------------------------------- */

enum {
  OP_ADD = 0, OP_SUB, OP_MUL, OP_SCALE, OP_AXPY, /* out = f(a, b) */
  OP_FWD, /* out = act(a) */
  OP_BWD  /* out = b * act'(a), a = x, b = dy */
};
/* Activation ids: rumus_activation's values. */
enum {
  ACT_RELU = 0, ACT_LEAKY_RELU, ACT_SIGMOID, ACT_TANH, ACT_GELU_TANH,
  ACT_GELU_ERF
};

#define GELU_K2 1.5957691216057308f  /* 2 sqrt(2 / pi) */
#define GELU_K2C 0.0713548162726f    /* 2 sqrt(2 / pi) * 0.044715 */
#define GELU_K2C3 0.2140644488178f   /* 3 * GELU_K2C */
#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT2PI 0.39894228040143268f
#define LN2 0.69314718056f
#define GELU_CLAMP 20.0f /* |x| beyond which gelu_tanh' is 0 or 1 */

/* e^x for x in [-87, 88]: the polynomial of common.cl (rumus_exp_poly*). */
#if EW_VW == 16
#define ew_exp_poly(x) rumus_exp_poly16(x)
#elif EW_VW == 8
#define ew_exp_poly(x) rumus_exp_poly8(x)
#else
#define ew_exp_poly(x) rumus_exp_poly4(x)
#endif

/* The same reduction with e^r = 2^(r log2 e) from native_exp2, which GPUs
 * evaluate in one special-function instruction (about 2 ulp on NVIDIA for
 * |r log2 e| <= 0.5; the product's rounding adds 2e-8): fewer instructions
 * than the polynomial where arithmetic, not memory, limits GELU. */
EW_INLINE vec_t ew_exp_sfu(vec_t x) {
  const vec_t t = fma(x, 1.44269504088896341f, 12582912.0f);
  const vec_t k = t - 12582912.0f;
  vec_t r = fma(k, -0.693145751953125f, x);
  r = fma(k, -1.42860682030941723e-6f, r);
  return native_exp2(r * 1.44269504088896341f) *
         AS_VEC((AS_IVEC(t) - 0x4B400000 + 127) << 23);
}

/* exp as the kernels call it (same range and result class either way). */
#if EW_GPU_MATH && EW_SHORT_MATH
#define ew_exp(x) native_exp2((x) * 1.44269504088896341f)
#elif EW_GPU_MATH
#define ew_exp(x) ew_exp_sfu(x)
#else
#define ew_exp(x) ew_exp_poly(x)
#endif

/* tanh: (1 - e) / (1 + e), e = e^-2|x|, with the sign of x; below 0.25,
 * where 1 - e would cancel, the odd Taylor series to x^9 (truncation
 * < 1e-8 relative). */
EW_INLINE vec_t ew_tanh(vec_t x) {
  const vec_t a = fabs(x), a2 = a * a;
  const vec_t e = ew_exp(fmax(-2.0f * a, -87.0f));
  const vec_t big = (1.0f - e) / (1.0f + e);
  vec_t q = fma(a2, 62.0f / 2835.0f, -17.0f / 315.0f);
  q = fma(q, a2, 2.0f / 15.0f);
  q = fma(q, a2, -1.0f / 3.0f);
  const vec_t small = fma(a * a2, q, a);
  return select(copysign(select(big, small, a < 0.25f), x), x, isnan(x));
}

/* P(t) = ln(erfc(a) e^(a^2) / t) for t = 1 / (1 + a / 2), a >= 0, to
 * 1.2e-7 (the Chebyshev fit of Press et al., Numerical Recipes): sum c_i
 * t^i, i = 0..9, in Estrin's scheme (a chain of 4 instead of 9 dependent
 * fma). */
EW_INLINE vec_t erfc_poly(vec_t t) {
  const vec_t t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
  const vec_t q0 = fma(t, 1.00002368f, -1.26551223f);
  const vec_t q1 = fma(t, 0.09678418f, 0.37409196f);
  const vec_t q2 = fma(t, 0.27886807f, -0.18628806f);
  const vec_t q3 = fma(t, 1.48851587f, -1.13520398f);
  const vec_t q4 = fma(t, 0.17087277f, -0.82215223f);
  return fma(q4, t8, fma(fma(q3, t2, q2), t4, fma(q1, t2, q0)));
}

/* 1 / (1 + a / 2) for a in [0, 9.2]: native_recip's 1 ulp or so on the
 * GPU variant stays within the fits' error after the polynomial. */
#if EW_GPU_MATH
#define ERFC_T(a) native_recip(fma(0.5f, (a), 1.0f))
#else
#define ERFC_T(a) (1.0f / fma(0.5f, (a), 1.0f))
#endif

/* erfc(z) = t e^(-z^2 + P(t)), t = 1 / (1 + |z| / 2), for z >= 0 (the
 * Chebyshev fit of Press et al., Numerical Recipes, fractional error
 * < 1.2e-7 everywhere), and 2 - erfc(-z) for z < 0.  |z| is capped at 9
 * (erfc(9) = 4.1e-37, still normal), so callers fix larger |z| and NaN
 * themselves.  The rounding of z^2 adds a relative error of z^2 * 6e-8, at
 * most 2.7e-7 where GELU's values exceed 1e-6 (|z| < 2.1... 3.4). */
EW_INLINE vec_t ew_erfc(vec_t z) {
  const vec_t a = fmin(fabs(z), 9.0f);
  const vec_t t = ERFC_T(a);
  const vec_t r = t * ew_exp(erfc_poly(t) - a * a); /* >= -82.3 */
  return select(r, 2.0f - r, z < 0.0f);
}

#if EW_SHORT_MATH
/* GELU erf for 16-bit storage, in Phi(-|x|) = erfc(a) / 2 = M(a) E(a),
 * a = |x| / sqrt 2, E = e^-a^2 = e^(-x^2 / 2) and M = erfc(a) e^(a^2) / 2
 * = t e^(P(t) - ln 2) (Mills' ratio, no cancellation).
 *   forward   x Phi(x) = x (1 - M E) for x >= 0, x M E below, M E in one
 *             exp of a degree-5 fit (7.6e-6 relative; minimax by
 *             iteratively reweighted least squares over a in [0, 9])
 *   backward  Phi(x) + x phi(x) = 1 + E (x / sqrt(2 pi) - M) for x >= 0,
 *             E (M + x / sqrt(2 pi)) below: one reciprocal and two exps
 *             where the F32 form takes ew_erfc and a third exp.  Below 0
 *             the bracket cancels near the minimum of GELU (x = -0.75,
 *             two terms of 0.3 to a sum of 1e-3), so M keeps the degree-9
 *             fit: the short one put 5 F16 ulp of error there. */
EW_INLINE vec_t gelu_erf_fwd_short(vec_t x) {
  const vec_t a = fmin(fabs(x) * INV_SQRT2, 9.0f);
  const vec_t t = ERFC_T(a);
  vec_t P = fma(t, 0.2287887807f, -0.7091853435f);
  P = fma(P, t, 0.4744854341f);
  P = fma(P, t, 0.2544484541f);
  P = fma(P, t, 1.018011836f);
  P = fma(P, t, -1.266541547f - LN2); /* - ln 2: halves */
  const vec_t h = t * ew_exp(fma(-a, a, P)); /* Phi(-|x|), >= -81.7 */
  return select(x * select(1.0f - h, h, x < 0.0f), fmax(x, 0.0f),
                fabs(x) > 12.7f);
}

EW_INLINE vec_t gelu_erf_bwd_short(vec_t xc) {
  const vec_t a = fabs(xc) * INV_SQRT2; /* xc in [-13, 13]: a <= 9.2 */
  const vec_t t = ERFC_T(a);
  const vec_t M = t * ew_exp(erfc_poly(t) - LN2);
  const vec_t E = ew_exp(-a * a); /* >= -84.5 */
  const vec_t neg = select(-M, M, xc < 0.0f);
  return select((vec_t)1.0f, (vec_t)0.0f, xc < 0.0f) +
         E * fma(xc, INV_SQRT2PI, neg);
}
#endif

/* sigmoid'(z) = e / (1 + e)^2 with e = exp(-|z|): finite for every z
 * (NaN z gives a finite value: callers select NaN themselves). */
EW_INLINE vec_t dsigmoid(vec_t z) {
  const vec_t e = ew_exp(fmax(-fabs(z), -87.0f));
  const vec_t d = 1.0f + e;
  return e / (d * d);
}

/* NaN in x gives NaN (the exp arguments are clamped, which drops NaN). */
#define KEEP_NAN(v, x) select((v), (x), isnan(x))

EW_INLINE vec_t act_fwd(vec_t x, float p, int act) {
  switch (act) {
  case ACT_RELU:
    return select(x, (vec_t)0.0f, x <= 0.0f); /* NaN: x <= 0 is false */
  case ACT_LEAKY_RELU:
    return select(x, x * p, x <= 0.0f);
  case ACT_SIGMOID: /* e^-x capped at e^87: the result stays normal */
    return KEEP_NAN(1.0f / (1.0f + ew_exp(clamp(-x, -87.0f, 87.0f))), x);
  case ACT_TANH:
    return ew_tanh(x);
  case ACT_GELU_TANH: {
    /* x s(2u) = x / (1 + e^-2u), with e^-2u capped at e^80 so that the
     * result stays normal; past |x| = 10 (2u = -87.3) the value is
     * max(x, 0) in float (this also covers +-inf and x^3 overflowing);
     * NaN passes through x. */
    const vec_t z = x * (GELU_K2 + GELU_K2C * (x * x));
    const vec_t y = x / (1.0f + ew_exp(clamp(-z, -87.0f, 80.0f)));
    return select(y, fmax(x, 0.0f), fabs(x) > 10.0f);
  }
  default: { /* ACT_GELU_ERF: past |x| = 12.7 (erfc's cap) the value is
              * max(x, 0) in float; NaN passes through x */
#if EW_SHORT_MATH
    return gelu_erf_fwd_short(x);
#else
    const vec_t t = ew_erfc(-x * INV_SQRT2); /* 2 Phi(x) */
    return select(0.5f * x * t, fmax(x, 0.0f), fabs(x) > 12.7f);
#endif
  }
  }
}

EW_INLINE vec_t act_bwd(vec_t x, vec_t dy, float p, int act) {
  switch (act) {
  case ACT_RELU: /* x <= 0 gives 0, even for NaN dy (PyTorch's threshold);
                  * NaN x gives NaN, where PyTorch passes dy through */
    return KEEP_NAN(select(dy, (vec_t)0.0f, x <= 0.0f), x);
  case ACT_LEAKY_RELU:
    return KEEP_NAN(select(dy, dy * p, x <= 0.0f), x);
  case ACT_SIGMOID:
    return KEEP_NAN(dy * dsigmoid(x), x);
  case ACT_TANH:
    return KEEP_NAN(dy * (4.0f * dsigmoid(2.0f * x)), x);
  case ACT_GELU_TANH: {
    /* One exp and one division: with e = e^-z, s = 1 / (1 + e) and
     * s'(z) = e s^2; z is capped at +-40 (s' < 4.3e-18 beyond) so that e
     * stays finite and e s^2 normal. */
    const vec_t xc = clamp(x, -GELU_CLAMP, GELU_CLAMP);
    const vec_t x2 = xc * xc;
    const vec_t z = clamp(xc * (GELU_K2 + GELU_K2C * x2), -40.0f, 40.0f);
    const vec_t e = ew_exp(-z);
    const vec_t s = 1.0f / (1.0f + e);
    const vec_t g = fma(xc * (e * s * s), GELU_K2 + GELU_K2C3 * x2, s);
    return KEEP_NAN(dy * g, x);
  }
  default: { /* ACT_GELU_ERF: beyond |x| = 13, Phi is 0 or 1 and x phi(x)
              * < 1e-36, still normal */
    const vec_t xc = clamp(x, -13.0f, 13.0f);
#if EW_SHORT_MATH
    const vec_t g = gelu_erf_bwd_short(xc);
#else
    const vec_t g = 0.5f * ew_erfc(-xc * INV_SQRT2) +
                    xc * (INV_SQRT2PI * ew_exp(-0.5f * (xc * xc)));
#endif
    return KEEP_NAN(dy * g, x);
  }
  }
}

EW_INLINE vec_t ew_apply(vec_t a, vec_t b, float alpha, int op, int act) {
  switch (op) {
  case OP_ADD: return a + b;
  case OP_SUB: return a - b;
  case OP_MUL: return a * b;
  case OP_SCALE: return alpha * a;
  case OP_AXPY: return alpha * a + b;
  case OP_FWD: return act_fwd(a, alpha, act);
  default: return act_bwd(a, b, alpha, act);
  }
}

#define OP_READS_B(op) ((op) != OP_SCALE && (op) != OP_FWD)

/* ---- Flat kernels ------------------------------------------------------ */

/* Elements [i, i + n) with n < EW_VW, through private arrays. */
EW_INLINE void ew_tail(global const real_t *a, global const real_t *b,
                    global real_t *out, size_t i, size_t n, float alpha,
                    int op, int act) {
  float pa[EW_VW], pb[EW_VW], po[EW_VW];
  for (int k = 0; k < EW_VW; k++) {
    pa[k] = (size_t)k < n ? LOAD(a, i + k) : 0.0f;
    pb[k] = ((size_t)k < n && OP_READS_B(op)) ? LOAD(b, i + k) : 0.0f;
  }
  VSTORE_PRIV(ew_apply(VLOAD_PRIV(pa), VLOAD_PRIV(pb), alpha, op, act), po);
  for (int k = 0; k < EW_VW; k++)
    if ((size_t)k < n) STORE(po[k], out, i + k);
}

/* One work-item's EW_SPAN elements of n, starting at `base`. */
EW_INLINE void ew_span(global const real_t *a, global const real_t *b,
                    global real_t *out, size_t base, size_t n, float alpha,
                    int op, int act) {
  if (base + EW_SPAN <= n) {
    for (int v = 0; v < EW_NV; v++) {
      const size_t i = base + (size_t)v * EW_VW;
      const vec_t vb = OP_READS_B(op) ? VLOAD(b, i) : (vec_t)0.0f;
      VSTORE(ew_apply(VLOAD(a, i), vb, alpha, op, act), out, i);
    }
  } else {
    size_t i = base;
    for (; i + EW_VW <= n; i += EW_VW) {
      const vec_t vb = OP_READS_B(op) ? VLOAD(b, i) : (vec_t)0.0f;
      VSTORE(ew_apply(VLOAD(a, i), vb, alpha, op, act), out, i);
    }
    if (i < n) ew_tail(a, b, out, i, n - i, alpha, op, act);
  }
}

EW_INLINE void ew_body(global const real_t *a, global const real_t *b,
                    global real_t *out, ulong n, float alpha, int op,
                    int act) {
  const size_t base = get_global_id(0) * (size_t)EW_SPAN;
  if (base >= (size_t)n) return;
  ew_span(a, b, out, base, (size_t)n, alpha, op, act);
}

__kernel RUMUS_REQD_WG(EW_LS, 1, 1)
void ew_add(global const real_t *a, ulong a_off,
            global const real_t *b, ulong b_off,
            global real_t *out, ulong out_off, ulong n) {
  ew_body(a + a_off, b + b_off, out + out_off, n, 0.0f, OP_ADD, 0);
}

__kernel RUMUS_REQD_WG(EW_LS, 1, 1)
void ew_sub(global const real_t *a, ulong a_off,
            global const real_t *b, ulong b_off,
            global real_t *out, ulong out_off, ulong n) {
  ew_body(a + a_off, b + b_off, out + out_off, n, 0.0f, OP_SUB, 0);
}

__kernel RUMUS_REQD_WG(EW_LS, 1, 1)
void ew_mul(global const real_t *a, ulong a_off,
            global const real_t *b, ulong b_off,
            global real_t *out, ulong out_off, ulong n) {
  ew_body(a + a_off, b + b_off, out + out_off, n, 0.0f, OP_MUL, 0);
}

__kernel RUMUS_REQD_WG(EW_LS, 1, 1)
void ew_scale(global const real_t *x, ulong x_off,
              global real_t *out, ulong out_off, ulong n,
              float alpha) {
  ew_body(x + x_off, x + x_off, out + out_off, n, alpha, OP_SCALE, 0);
}

/* y = alpha x + y: y is read through b and written through out. */
__kernel RUMUS_REQD_WG(EW_LS, 1, 1)
void ew_axpy(global const real_t *x, ulong x_off,
             global real_t *y, ulong y_off, ulong n,
             float alpha) {
  ew_body(x + x_off, y + y_off, y + y_off, n, alpha, OP_AXPY, 0);
}

/* act_fwd_NAME(x, x_off, y, y_off, n, param) and
 * act_bwd_NAME(x, x_off, dy, dy_off, dx, dx_off, n, param). */
#define ACT_KERNELS(name, id)                                                 \
  __kernel RUMUS_REQD_WG(EW_LS, 1, 1)                                         \
  void act_fwd_##name(global const real_t *x, ulong x_off, global real_t *y,  \
                      ulong y_off, ulong n, float param) {                    \
    ew_body(x + x_off, x + x_off, y + y_off, n, param, OP_FWD, id);           \
  }                                                                           \
  __kernel RUMUS_REQD_WG(EW_LS, 1, 1)                                         \
  void act_bwd_##name(global const real_t *x, ulong x_off,                    \
                      global const real_t *dy, ulong dy_off,                  \
                      global real_t *dx, ulong dx_off, ulong n,               \
                      float param) {                                          \
    ew_body(x + x_off, dy + dy_off, dx + dx_off, n, param, OP_BWD, id);       \
  }

ACT_KERNELS(relu, ACT_RELU)
ACT_KERNELS(leaky_relu, ACT_LEAKY_RELU)
ACT_KERNELS(sigmoid, ACT_SIGMOID)
ACT_KERNELS(tanh, ACT_TANH)
ACT_KERNELS(gelu_tanh, ACT_GELU_TANH)
ACT_KERNELS(gelu_erf, ACT_GELU_ERF)

/* ---- Bias add ---------------------------------------------------------- */

/* Global (ceil(F / EW_SPAN), rows): work-item (c, r) adds bias[c * EW_SPAN
 * ...] to the same columns of row r. */
__kernel void bias_add(global real_t *y, ulong y_off, global const real_t *bias,
                       ulong b_off, ulong rows, ulong cols) {
  const size_t c0 = get_global_id(0) * (size_t)EW_SPAN;
  const size_t r = get_global_id(1);
  if (c0 >= (size_t)cols || r >= (size_t)rows) return;
  global real_t *yr = y + (size_t)y_off + r * (size_t)cols;
  ew_span(yr, bias + b_off, yr, c0, (size_t)cols, 0.0f, OP_ADD, 0);
}

/* ---- Bias gradient ------------------------------------------------------ */

/* The dbias entries come in two kinds, picked by name: `bias_grad_*`
 * store into the program's storage (dbias of dy's type) and
 * `bias_grad_*_f32` into float (dbias of F32 for 16-bit dy: gradients summed
 * into float master gradients; also the partial rows).  Sums and partial
 * rows are float for every storage.  With F32 storage the two are the same
 * code. */
#if RUMUS_ALIGN4
#define BG_STORE4(T, v, p, i) RUMUS_STOREA(T, 4, v, p, i)
#else
#define BG_STORE4(T, v, p, i) RUMUS_STOREN(T, 4, v, p, i)
#endif
/* The lanes of v that lie inside n elements from column c0, in tag T. */
#define BG_STORE4_PART(T, v, p, c0, n)                                        \
  do {                                                                        \
    if ((c0) + 4 <= (n)) {                                                    \
      BG_STORE4(T, v, p, c0);                                                 \
    } else {                                                                  \
      RUMUS_STORE(T, (v).x, p, c0);                                           \
      if ((c0) + 1 < (n)) RUMUS_STORE(T, (v).y, p, (c0) + 1);                 \
      if ((c0) + 2 < (n)) RUMUS_STORE(T, (v).z, p, (c0) + 2);                 \
    }                                                                         \
  } while (0)

/* Global (ceil(F / (4 BG_TC)) * WG, chunks), local (WG, 1).  Work-item
 * (tx, ty) sums columns 4 c .. 4 c + 3, c = group * BG_TC + tx, over rows
 * r0 + ty, r0 + ty + BG_TR, ... in two chains (loads in flight), then a
 * tree over the ty lanes.  One chunk (rc >= rows): the sums go to db.
 * Several: chunk k's sums go to part[k * cols + j] (float scratch), and
 * the last of the chunks of each column block to finish (its ticket:
 * status word RUMUS_STATUS_SETS + block, rumus_last_group in common.cl)
 * folds them into db: lane ty adds chunks ty, ty + BG_TR, ... in order,
 * then the same tree over the lanes.  One launch; the order depends only
 * on the shape, so the bits are the same on every run.
 * bg_wg_sums is the whole but the store: 1 in the work-items that hold the
 * sums of columns *c0 .. in *out. */
EW_INLINE int bg_wg_sums(global const real_t *dy, global float *part,
                         ulong rows, ulong cols, ulong rc,
                         volatile global int *status, local float4 *acc,
                         local int *last, float4 *out, size_t *c0_out) {
  const size_t lid = get_local_id(0);
  const size_t tx = lid % BG_TC, ty = lid / BG_TC;
  const size_t n = (size_t)cols;
  const size_t c0 = (get_group_id(0) * (size_t)BG_TC + tx) * 4;
  const size_t chunk = get_group_id(1), nc = get_num_groups(1);
  const size_t r0 = chunk * (size_t)rc;
  const size_t r1 = min(r0 + (size_t)rc, (size_t)rows);
  float4 a = 0.0f, b = 0.0f;
  global const real_t *p = dy + c0;
  *c0_out = c0;
  if (c0 + 4 <= n) {
    size_t r = r0 + ty;
    for (; r + BG_TR < r1; r += 2 * BG_TR) {
      a += LOAD4(p, r * n);
      b += LOAD4(p, (r + BG_TR) * n);
    }
    if (r < r1) a += LOAD4(p, r * n);
  } else if (c0 < n) { /* the last 1 to 3 columns */
    for (size_t r = r0 + ty; r < r1; r += BG_TR) {
      a.x += LOAD(p, r * n);
      if (c0 + 1 < n) a.y += LOAD(p, r * n + 1);
      if (c0 + 2 < n) a.z += LOAD(p, r * n + 2);
    }
  }
  /* Tree over the row lanes: lane ty folds lane ty + step (same columns). */
#define BG_LANE_TREE(v)                                                     \
  acc[lid] = (v);                                                           \
  barrier(CLK_LOCAL_MEM_FENCE);                                             \
  for (size_t step = BG_TR / 2; step > 0; step /= 2) {                      \
    if (ty < step) acc[lid] += acc[lid + step * BG_TC];                     \
    barrier(CLK_LOCAL_MEM_FENCE);                                           \
  }
  BG_LANE_TREE(a + b);
  volatile global float *pv = part;
  if (nc > 1) {
    if (ty == 0 && c0 < n) {
      const float4 v = acc[tx];
      volatile global float *o = pv + chunk * n + c0;
      o[0] = v.x;
      if (c0 + 1 < n) o[1] = v.y;
      if (c0 + 2 < n) o[2] = v.z;
      if (c0 + 3 < n) o[3] = v.w;
    }
    volatile global int *ticket = status + RUMUS_STATUS_SETS + get_group_id(0);
    if (!rumus_last_group(ticket, nc, last)) return 0;
    /* acc was last read by the ty == 0 lanes, before the barrier inside
     * rumus_last_group. */
    a = 0.0f;
    if (c0 < n) {
      for (size_t k = ty; k < nc; k += BG_TR) {
        volatile global float *o = pv + k * n + c0;
        a.x += o[0];
        if (c0 + 1 < n) a.y += o[1];
        if (c0 + 2 < n) a.z += o[2];
        if (c0 + 3 < n) a.w += o[3];
      }
    }
    BG_LANE_TREE(a);
    rumus_ticket_reset(ticket);
  }
#undef BG_LANE_TREE
  if (ty != 0 || c0 >= n) return 0;
  *out = acc[tx];
  return 1;
}

/* bias_grad_wg and bias_grad_wg_f32 (db in tag T). */
#define BG_WG_KERNEL(name, T)                                                 \
  __kernel RUMUS_WG_ATTR void name(                                           \
      global const real_t *dy, ulong dy_off, global RUMUS_TYPE(T) *db,        \
      ulong db_off, global float *part, ulong rows, ulong cols, ulong rc,     \
      volatile global int *status) {                                          \
    local float4 acc[WG];                                                     \
    local int last;                                                           \
    float4 v;                                                                 \
    size_t c0;                                                                \
    if (bg_wg_sums(dy + (size_t)dy_off, part, rows, cols, rc, status, acc,    \
                   &last, &v, &c0))                                           \
      BG_STORE4_PART(T, v, db + (size_t)db_off, c0, (size_t)cols);            \
  }
BG_WG_KERNEL(bias_grad_wg, RUMUS_STORAGE)
BG_WG_KERNEL(bias_grad_wg_f32, F32)

/* Global (ceil(F / bw), chunks): work-item (b, chunk) sums columns
 * [bw b, bw b + bw) of the chunk's rows into
 * out[chunk * cols + j], row by row (each row's block is read front to
 * back: a stream the prefetchers follow), into float8 accumulators and up
 * to 7 single ones for the last columns.  bg_row_sums does the sums into
 * a and t and returns the block's width (0: no work). */
EW_INLINE size_t bg_row_sums(global const real_t *dy, ulong rows, ulong cols,
                             ulong rc, size_t c0, size_t bw, size_t chunk,
                             float8 *a, float *t) {
  const size_t n = (size_t)cols;
  const size_t r0 = chunk * (size_t)rc;
  if (c0 >= n || r0 >= (size_t)rows) return 0;
  const size_t r1 = min(r0 + (size_t)rc, (size_t)rows);
  const size_t w = min(bw, n - c0), g8 = w / 8, rest = w % 8;
  global const real_t *p = dy + c0;
  for (size_t k = 0; k < g8; k++) a[k] = 0.0f;
  for (int k = 0; k < 8; k++) t[k] = 0.0f;
  for (size_t r = r0; r < r1; r++) {
    global const real_t *row = p + r * n;
    for (size_t k = 0; k < g8; k++) a[k] += LOAD8(row, 8 * k);
    for (size_t k = 0; k < rest; k++) t[k] += LOAD(row, 8 * g8 + k);
  }
  return w;
}

/* bias_grad_row (out in the storage: dbias) and bias_grad_row_f32 (out
 * float: an F32 dbias or the partial rows). */
#define BG_ROW_KERNEL(name, T)                                                \
  __kernel void name(global const real_t *dy, ulong dy_off,                   \
                     global RUMUS_TYPE(T) *out, ulong out_off, ulong rows,    \
                     ulong cols, ulong rc, ulong bw) {                        \
    const size_t c0 = get_global_id(0) * (size_t)bw;                          \
    const size_t chunk = get_global_id(1);                                    \
    float8 a[BG_COLS / 8];                                                    \
    float t[8];                                                               \
    const size_t w = bg_row_sums(dy + (size_t)dy_off, rows, cols, rc, c0,     \
                                 (size_t)bw, chunk, a, t);                    \
    const size_t g8 = w / 8, rest = w % 8;                                    \
    global RUMUS_TYPE(T) *o =                                                 \
        out + (size_t)out_off + chunk * (size_t)cols + c0;                    \
    for (size_t k = 0; k < g8; k++) RUMUS_STOREN(T, 8, a[k], o, 8 * k);           \
    for (size_t k = 0; k < rest; k++) RUMUS_STORE(T, t[k], o, 8 * g8 + k);    \
  }
BG_ROW_KERNEL(bias_grad_row, RUMUS_STORAGE)
BG_ROW_KERNEL(bias_grad_row_f32, F32)

/* Global F: db[j] = sum over chunks k of part[k * cols + j] (the fold of
 * bias_grad_row's float partials), stored in tag T. */
EW_INLINE float bg_fold(global const float *part, size_t nc, size_t n,
                        size_t j) {
  /* Four chains (chunks k = i mod 4), added in a fixed order: four loads
   * in flight. */
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  size_t k = 0;
  for (; k + 4 <= nc; k += 4) {
    s0 += part[k * n + j];
    s1 += part[(k + 1) * n + j];
    s2 += part[(k + 2) * n + j];
    s3 += part[(k + 3) * n + j];
  }
  for (; k < nc; k++) s0 += part[k * n + j];
  return (s0 + s1) + (s2 + s3);
}

#define BG_FOLD_KERNEL(name, T)                                               \
  __kernel RUMUS_REQD_WG(EW_LS, 1, 1)                                         \
  void name(global const float *part, ulong chunks,                           \
            global RUMUS_TYPE(T) *db, ulong db_off, ulong cols) {             \
    const size_t j = get_global_id(0);                                        \
    if (j >= (size_t)cols) return;                                            \
    RUMUS_STORE(T, bg_fold(part, (size_t)chunks, (size_t)cols, j),            \
                db + (size_t)db_off, j);                                      \
  }
BG_FOLD_KERNEL(bias_grad_fold, RUMUS_STORAGE)
BG_FOLD_KERNEL(bias_grad_fold_f32, F32)
