/*
 * Branch-free f32 exp, tanh and sigmoid, written so that a loop over them vectorises (`omp simd`, or
 * GCC's auto-vectoriser with no-trapping-math) in every ISA clone: the unary elementwise kernels
 * (k_elementwise_unary.c) and the LSTM cell (k_rnn_lstm.c) use them. Accuracy within ~3 ulp; NaN stays
 * NaN, +-Inf saturate as libm's do. Include it after `#pragma GCC optimize("no-trapping-math")`: a
 * function compiled with other optimisation options does not inline into the loops.
 */
#ifndef WF_BACKENDS_CPU_K_VMATH_H
#define WF_BACKENDS_CPU_K_VMATH_H

#include <math.h>
#include <stdint.h>

#include "core/core.h" /* wf__f32_bits, wf__f32_from_bits */

static inline float expm1_poly(float r)
{
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    return r + r * r * p;
}

#define LOG2E_F 1.44269504088896341f
#define LN2_HI_F 0.693359375f      /* few bits, so n * LN2_HI_F is exact */
#define LN2_LO_F -2.12194440e-4f

/* exp(x) = 2^n * exp(r). 2^n is applied as two factors so that results down in the subnormal range
 * and up to overflow need no branches. */
static inline float ew_expf(float x)
{
    float c = x == x ? x : 0.0f;
    c = c > 88.8f ? 88.8f : c;
    c = c < -104.0f ? -104.0f : c;
    float nf = nearbyintf(c * LOG2E_F);
    float r = c - nf * LN2_HI_F;
    r = r - nf * LN2_LO_F;
    int32_t n = (int32_t)nf;
    int32_t n1 = n / 2, n2 = n - n1;
    float y = (1.0f + expm1_poly(r)) * wf__f32_from_bits((uint32_t)(n1 + 127) << 23) *
              wf__f32_from_bits((uint32_t)(n2 + 127) << 23);
    return x == x ? y : x;
}

/* expm1 without the cancellation of exp(x) - 1 near 0; for x <= 88 (Elu only needs x < 0). */
static inline float ew_expm1f(float x)
{
    float c = x < -30.0f ? -30.0f : x; /* expm1(-30) is -1 in f32 */
    c = c > 88.0f ? 88.0f : c;
    float nf = nearbyintf(c * LOG2E_F);
    float r = c - nf * LN2_HI_F;
    r = r - nf * LN2_LO_F;
    float s = wf__f32_from_bits((uint32_t)((int32_t)nf + 127) << 23);
    return s * expm1_poly(r) + (s - 1.0f);
}

/* tanh: an odd polynomial (least-squares fit, < 1 ulp) below 0.625, where 1 - 2/(e^2x + 1) would
 * lose bits to cancellation; that formula above it. */
static inline float ew_tanhf(float x)
{
    float a = fabsf(x);
    float s = x * x;
    float q = -5.775799997e-03f;
    q = q * s + 2.070451210e-02f;
    q = q * s - 5.376072439e-02f;
    q = q * s + 1.333171255e-01f;
    q = q * s - 3.333329316e-01f;
    float small = x + x * s * q;
    float big = copysignf(1.0f - 2.0f / (ew_expf(2.0f * a) + 1.0f), x);
    return a < 0.625f ? small : big;
}

/* exp(u) for u in [-104, 0] (no NaN): the range sigmoid needs. 2^n, n in [-150, 0], is applied as two
 * factors 2^n1 * 2^n2 as in ew_expf, each a normal number; (n + 150) >> 1 halves a non-negative value,
 * so the split needs no signed shift. */
static inline float ew_exp_nonpos(float u)
{
    float nf = nearbyintf(u * LOG2E_F);
    float r = u - nf * LN2_HI_F;
    r = r - nf * LN2_LO_F;
    int32_t n = (int32_t)nf, n1 = ((n + 150) >> 1) - 75, n2 = n - n1;
    return (1.0f + expm1_poly(r)) * wf__f32_from_bits((uint32_t)(n1 + 127) << 23) *
           wf__f32_from_bits((uint32_t)(n2 + 127) << 23);
}

/* sigmoid(t) from e = exp(-|t|), which lies in (0, 1]: 1 / (1 + e) for t >= 0 and e / (1 + e) below. No
 * clamp at the overflow end and no overflow to guard (1 / (1 + exp(-t)) needed both), and the tiny
 * values of large negative t come out right instead of 0. Within ~3 ulp; NaN stays NaN; -Inf gives 0,
 * +Inf 1. */
static inline float ew_sigmoidf(float t)
{
    float u = -fabsf(t);
    u = u > -104.0f ? u : -104.0f; /* NaN too: it must not reach the int conversion */
    float e = ew_exp_nonpos(u), s = 1.0f / (1.0f + e);
    float y = t >= 0 ? s : e * s;
    return t == t ? y : t;
}

/* log(x) = e ln2 + log(m), m = x / 2^e in [sqrt(1/2), sqrt(2)): log(1 + f), f = m - 1 (exact), as
 * f - f^2/2 + f^3 P(f) with the degree-8 polynomial of Cephes' logf (Moshier; within ~1 ulp there) and ln2
 * in two parts. Subnormal x is scaled by 2^23 first. 0 gives -inf, a negative x NaN, +inf +inf, NaN NaN.
 * The libm call it replaces kept Log scalar (256 x 1024 f32: 1.6 ms on 2 Zen 3 threads, ONNX Runtime 0.33). */
static inline float ew_logf(float x)
{
    float xs = x < 1.17549435e-38f ? x * 8388608.0f : x;
    uint32_t u = wf__f32_bits(xs);
    int32_t e = (int32_t)((u >> 23) & 0xffu) - 127 - (x < 1.17549435e-38f ? 23 : 0);
    float m = wf__f32_from_bits((u & 0x7fffffu) | 0x3f800000u);
    bool hi = m > 1.41421356f;
    m = hi ? m * 0.5f : m;
    float ef = (float)(e + (hi ? 1 : 0));
    float f = m - 1.0f, z = f * f;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z;
    y += ef * -2.12194440e-4f;
    y += -0.5f * z;
    float r = (f + y) + ef * 0.693359375f;
    r = x == INFINITY ? x : r;
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    return x == x ? r : x;
}

/* log(1 + u) for u >= 0 (or NaN): log(w) u / (w - 1) with w = 1 + u rounded, which cancels w's rounding
 * (Goldberg); u itself where w rounds to 1. */
static inline float ew_log1pf(float u)
{
    float w = 1.0f + u, d = w - 1.0f;
    float r = ew_logf(w) * (u / (d == 0.0f ? 1.0f : d));
    return d == 0.0f ? u : r;
}

/* softplus(x) = max(x, 0) + log1p(exp(-|x|)): never overflows, exact at both ends */
static inline float ew_softplusf(float x)
{
    float a = fabsf(x);
    float e = ew_exp_nonpos(-(a < 104.0f ? a : 104.0f)); /* NaN: a < 104 is false, 104 is used, then x */
    float r = (x > 0.0f ? x : 0.0f) + ew_log1pf(e);
    return x == x ? r : x;
}

/* ---- trigonometric ----------------------------------------------------------------------------------
 * Cephes' single-precision polynomials (Moshier, "Methods and Programs for Mathematical Functions"; the
 * coefficients are his published numbers), written branch-free so that
 * they vectorise. The libm calls these replace kept weft scalar: 256 x 1024 f32 on 2 Zen 5 threads
 * (bench_ops.py), Sin 2.0 -> 0.26 ms, Cos 1.86 -> 0.26, Atan 3.5 -> 0.053, Acos 2.8 -> 0.064; ONNX Runtime
 * 0.72, 0.70, 0.29, 0.23. Accuracy over every 97th f32 against double libm: Sin/Cos 1.56 ulp (to |x| = 2^19),
 * Atan 2.82, Asin 2.40, Acos 1.28 (tests/ops/cases_math.py sweeps them at 4 ulp).
 */

/* |x| = j pi/4 + r is reduced in double with pi/4 in three parts (Cody and Waite): the first two have 33
 * bits, so j * part is exact for j < 2^20 and r keeps its bits even next to a multiple of pi (Cephes' float
 * reduction loses them there: sin(4476.77f) was 688 ulp off, 7e-12 absolute). */
#define SC_FOPI 1.2732395447351628           /* 4 / pi */
#define SC_PIO4_A 0.7853981633670628         /* pi/4 = A + B + C */
#define SC_PIO4_B 3.038550253151983e-11
#define SC_PIO4_C 1.0111331243979753e-21
/* j < 2^20 with a margin: past this |x|, and for Inf and NaN, callers use libm (ew_sincos_ok says which) */
#define SC_LIMIT 524288.0f

static inline bool ew_sincos_ok(float x) { return fabsf(x) <= SC_LIMIT; }

/* sin(r) and cos(r) on [-pi/4, pi/4] */
static inline float sc_sin_poly(float r)
{
    float z = r * r;
    float p = -1.9515295891e-4f;
    p = p * z + 8.3321608736e-3f;
    p = p * z - 1.6666654611e-1f;
    return r + r * z * p;
}
static inline float sc_cos_poly(float r)
{
    float z = r * r;
    float p = 2.443315711809948e-5f;
    p = p * z - 1.388731625493765e-3f;
    p = p * z + 4.166664568298827e-2f;
    return 1.0f - 0.5f * z + z * z * p;
}

/* |x| = j pi/4 + r, j even, |r| <= pi/4 (a little past it where j * 4/pi rounds across an integer: the
 * polynomials hold there); returns r and the quadrant j/2 mod 4. Only for |x| <= SC_LIMIT (anything
 * else, NaN included, is reduced as 0 and must be replaced by the caller). */
static inline float sc_reduce(float x, int32_t *q)
{
    float a = fabsf(x);
    double d = a <= SC_LIMIT ? (double)a : 0.0;
    int32_t j = (int32_t)(d * SC_FOPI);
    j = (j + 1) & ~1;
    double y = (double)j;
    *q = (j >> 1) & 3;
    return (float)(((d - y * SC_PIO4_A) - y * SC_PIO4_B) - y * SC_PIO4_C);
}

/* sin(x) for |x| <= SC_LIMIT: quadrant 0 sin r, 1 cos r, 2 -sin r, 3 -cos r, then x's sign */
static inline float ew_sinf(float x)
{
    int32_t q;
    float r = sc_reduce(x, &q);
    float s = sc_sin_poly(r), c = sc_cos_poly(r);
    float v = (q & 1) ? c : s;
    v = (q & 2) ? -v : v;
    return x < 0.0f ? -v : v;
}

/* cos(x) for |x| <= SC_LIMIT: quadrant 0 cos r, 1 -sin r, 2 -cos r, 3 sin r */
static inline float ew_cosf(float x)
{
    int32_t q;
    float r = sc_reduce(x, &q);
    float s = sc_sin_poly(r), c = sc_cos_poly(r);
    float v = (q & 1) ? s : c;
    return ((q + 1) & 2) ? -v : v;
}

/* atan: |x| reduced to [0, tan(pi/8)] by atan(x) = pi/2 + atan(-1/x) above tan(3pi/8) and pi/4 +
 * atan((x-1)/(x+1)) above tan(pi/8); Cephes' degree-4 polynomial in x^2. +-Inf give +-pi/2 (-1/Inf is -0),
 * NaN stays NaN. */
static inline float ew_atanf(float x)
{
    float a = fabsf(x);
    bool big = a > 2.414213562373095f, mid = a > 0.4142135623730950f;
    float t = big ? -1.0f / a : mid ? (a - 1.0f) / (a + 1.0f) : a;
    float y0 = big ? 1.5707963267948966f : mid ? 0.7853981633974483f : 0.0f;
    float z = t * t;
    float p = 8.05374449538e-2f;
    p = p * z - 1.38776856032e-1f;
    p = p * z + 1.99777106478e-1f;
    p = p * z - 3.33329491539e-1f;
    float y = y0 + (t + t * z * p);
    y = x < 0.0f ? -y : y;
    return x == x ? y : x;
}

/* asin(t) for t in [0, 0.5] (Cephes' asinf polynomial) */
static inline float as_poly(float t)
{
    float z = t * t;
    float p = 4.2163199048e-2f;
    p = p * z + 2.4181311049e-2f;
    p = p * z + 4.5470025998e-2f;
    p = p * z + 7.4953002686e-2f;
    p = p * z + 1.6666752422e-1f;
    return t + t * z * p;
}

/* asin(a) for a = |x| <= 1/2 (*hi false), else asin(sqrt((1 - a)/2)) (*hi true) */
static inline float as_half(float a, bool *hi)
{
    *hi = a > 0.5f;
    float w = 0.5f * (1.0f - a);
    return as_poly(*hi ? sqrtf(w > 0.0f ? w : 0.0f) : a);
}

/* asin: |x| > 1/2 through asin(a) = pi/2 - 2 asin(sqrt((1 - a)/2)); |x| > 1 and NaN give NaN */
static inline float ew_asinf(float x)
{
    float a = fabsf(x);
    bool hi;
    float p = as_half(a, &hi);
    float y = hi ? 1.5707963267948966f - 2.0f * p : p;
    y = x < 0.0f ? -y : y;
    return a <= 1.0f ? y : NAN + x;
}

/* acos: 2 asin(sqrt((1 - x)/2)) above 1/2, pi - 2 asin(sqrt((1 + x)/2)) below -1/2, pi/2 - asin(x) between */
static inline float ew_acosf(float x)
{
    float a = fabsf(x);
    bool hi;
    float p = as_half(a, &hi);
    float y = hi ? (x > 0.0f ? 2.0f * p : 3.14159265358979f - 2.0f * p)
                 : 1.5707963267948966f - (x < 0.0f ? -p : p);
    return a <= 1.0f ? y : NAN + x;
}

#endif
