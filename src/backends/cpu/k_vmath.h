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

#endif
