/*
 * CPU kernels for the unary elementwise ops. f32 Exp/Tanh/Sigmoid/Gelu/Erf/Elu use branch-free
 * polynomial versions of exp, tanh and erf so their loops vectorise (within ~3 ulp); f64 uses libm;
 * f16/bf16 run the f32 loops over blocks converted to f32 and back.
 */
#include "backends/cpu/k_elementwise.h"
#include "backends/cpu/k_isa.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Lets GCC if-convert selects whose arms do floating-point work (tanh's two ranges, the f16 special
 * cases): with trapping math on it refuses to evaluate both arms and the loop stays scalar on AVX2.
 * weft never unmasks floating-point exceptions, so nothing observable changes. */
#pragma GCC optimize("no-trapping-math")

#include "backends/cpu/k_vmath.h" /* after the pragma: its functions inline into these loops */

/* Per-node constants a loop may need. Copied into a local by every loop so that stores through the
 * output pointer cannot be assumed to change them. */
typedef struct un_params {
    double alpha;     /* LeakyRelu, Elu */
    double lo, hi;    /* Clip bounds, float dtypes */
    int64_t ilo, ihi; /* Clip bounds, integer dtypes (already inside the dtype's range) */
} un_params;

#define WF__UNUSED_ __attribute__((unused))

typedef void (*un_fn)(const void *x, void *y, int64_t n, const un_params *p);

typedef struct unop {
    un_fn fn[WF_NUM_DTYPES]; /* f16/bf16 left NULL: they use fn[WF_F32] on converted blocks */
    int64_t grain;
} unop;

/* ---- f16 / bf16 blocks ------------------------------------------------------------------------- */

/* The bulk converters moved to core (dtype_convert.c) so that every f16 path shares them; these names
 * stay for the elementwise kernels' many callers. */
void wf__ew_half_to_f32(const uint16_t *src, float *dst, int64_t n, wf_dtype t) { wf__half_to_f32_n(src, dst, n, t); }
void wf__ew_f32_to_half(const float *src, uint16_t *dst, int64_t n, wf_dtype t) { wf__f32_to_half_n(src, dst, n, t); }

/* ---- f32 math ------------------------------------------------------------------------------------ */

/* expm1 on |r| <= ln2/2: the Taylor series to degree 7 leaves < 2^-26 relative error. */

/* libm's scalar expf made Swish 3x slower than Sigmoid and Mul as two nodes (EfficientNet-B0: 49
 * Swish nodes, 49 ms of an 85 ms run) */
WF__VEC static void swish_plain(const float *x, float *y, int64_t n, float a)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = x[i] * ew_sigmoidf(a * x[i]);
}

WF__VEC static void sigmoid_plain(const float *x, float *y, int64_t n)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = ew_sigmoidf(x[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* ew_sigmoidf's arithmetic on 16 lanes, with two steps that AVX-512 has an instruction for: 2^n is applied
 * by vscalefps (subnormal results included, where ew_exp_nonpos needs two factors), and 1 / (1 + e), e in
 * (0, 1], is a 14-bit reciprocal estimate and one Newton step (about 2^-27 relative) instead of a
 * division. y = x * sigmoid(a x) for Swish, else sigmoid(x) with NaN kept (the clamp makes a NaN lane a
 * number; Swish's product with x restores it). One core: Swish 0.34 ns an element against 0.43 for the
 * portable loop's AVX-512 clone; EfficientNet-B0 (49 Conv2D+Swish) 6.2 against 6.8 ms. Within 3 ulp, as
 * ew_sigmoidf (cases sigmoid_tail, swish_tail_*; scripts/run-tests.sh runs them on every form the CPU has). */
__attribute__((target("avx512f"))) static void sigmoid_avx512(const float *x, float *y, int64_t n, float a, bool swish)
{
    const __m512 va = _mm512_set1_ps(a), lo = _mm512_set1_ps(-104.0f), l2e = _mm512_set1_ps(LOG2E_F);
    const __m512 hi_ln2 = _mm512_set1_ps(-LN2_HI_F), lo_ln2 = _mm512_set1_ps(-LN2_LO_F);
    const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512 t = _mm512_mul_ps(va, v);
        /* u = max(-|t|, -104): the second operand when either is NaN */
        __m512 u = _mm512_max_ps(_mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(t), sign)), lo);
        __m512 nf = _mm512_roundscale_ps(_mm512_mul_ps(u, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fmadd_ps(nf, lo_ln2, _mm512_fmadd_ps(nf, hi_ln2, u));
        __m512 q = _mm512_set1_ps(1.0f / 5040);
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 720));
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 120));
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 24));
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 6));
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
        __m512 e = _mm512_scalef_ps(_mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r), one), nf);
        __m512 d = _mm512_add_ps(one, e), s = _mm512_rcp14_ps(d);
        s = _mm512_mul_ps(s, _mm512_fnmadd_ps(d, s, two));
        s = _mm512_mask_mul_ps(s, _mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_LT_OQ), e, s);
        if (swish) s = _mm512_mul_ps(v, s);
        else s = _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
        _mm512_mask_storeu_ps(y + i, m, s);
    }
}

/* The same on 8 lanes with AVX2 and FMA, in two forms. sig8_wide is ew_sigmoidf's arithmetic for any
 * lane: no vscalefps, so 2^n, n in [-150, 0], is two normal factors 2^n1 2^n2 built from their exponent
 * bits, as ew_exp_nonpos does, and the division is a reciprocal estimate with two Newton steps.
 * sigmoid_avx2's loop takes the short form while every lane of a vector has -|t| >= -87 (so 2^n is one
 * normal factor; NaN and the far tails go to sig8_wide, a vector at a time), and it was built for the
 * chain's latency, which bound the loop on a Zen 3 (a vector's chain of ~70 cycles against ~8 cycles of
 * issue, and the FP scheduler holds about five vectors' work): n rounded by adding 1.5 * 2^23 (+ 127, so
 * the sum's low bits are the exponent field), the polynomial by Estrin's scheme (three levels instead of
 * six), exp's 1 + r folded into its last FMA, and sigmoid as one division whose numerator (1 for t >= 0,
 * e below) is chosen while the denominator is added: 0.61 against 0.88 ns an element on one Zen 3 core,
 * within the same 3.5 ulp of an f64 reference on x * sigmoid(x) for |x| <= 87 (the wide form: 3.7). The
 * tail (n % 8) goes through the portable loop. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 sig8_wide(__m256 v, __m256 t, bool swish)
{
    const __m256 lo = _mm256_set1_ps(-104.0f), l2e = _mm256_set1_ps(LOG2E_F);
    const __m256 hi_ln2 = _mm256_set1_ps(-LN2_HI_F), lo_ln2 = _mm256_set1_ps(-LN2_LO_F);
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f), zero = _mm256_setzero_ps();
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
    const __m256i k150 = _mm256_set1_epi32(150), k75 = _mm256_set1_epi32(75), k127 = _mm256_set1_epi32(127);
    /* u = max(-|t|, -104): the second operand when either is NaN */
    __m256 u = _mm256_max_ps(_mm256_or_ps(t, sign), lo);
    __m256 nf = _mm256_round_ps(_mm256_mul_ps(u, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(nf, lo_ln2, _mm256_fmadd_ps(nf, hi_ln2, u));
    __m256 q = _mm256_set1_ps(1.0f / 5040);
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 720));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 120));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 24));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 6));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.5f));
    __m256 p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r), one);
    __m256i ni = _mm256_cvtps_epi32(nf);
    __m256i n1 = _mm256_sub_epi32(_mm256_srai_epi32(_mm256_add_epi32(ni, k150), 1), k75);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, k127), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, k127), 23));
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
    __m256 d = _mm256_add_ps(one, e), s = _mm256_rcp_ps(d);
    s = _mm256_mul_ps(s, _mm256_fnmadd_ps(d, s, two));
    s = _mm256_mul_ps(s, _mm256_fnmadd_ps(d, s, two));
    s = _mm256_blendv_ps(s, _mm256_mul_ps(e, s), _mm256_cmp_ps(t, zero, _CMP_LT_OQ));
    if (swish) return _mm256_mul_ps(v, s);
    return _mm256_blendv_ps(s, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* The short form on one vector whose lanes all have -|t| >= -87 (sigmoid_avx2's loop says how it is built) */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 sig8_short(__m256 v, __m256 t, bool swish)
{
    const __m256 l2e = _mm256_set1_ps(LOG2E_F), hi_ln2 = _mm256_set1_ps(-LN2_HI_F), lo_ln2 = _mm256_set1_ps(-LN2_LO_F);
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
    const __m256 magic = _mm256_set1_ps(12582912.0f + 127.0f); /* 1.5 * 2^23 + the exponent bias */
    const __m256 c0 = _mm256_set1_ps(0.5f), c1 = _mm256_set1_ps(1.0f / 6), c2 = _mm256_set1_ps(1.0f / 24);
    const __m256 c3 = _mm256_set1_ps(1.0f / 120), c4 = _mm256_set1_ps(1.0f / 720), c5 = _mm256_set1_ps(1.0f / 5040);
    __m256 u = _mm256_or_ps(t, sign);                   /* -|t| */
    __m256 nt = _mm256_fmadd_ps(u, l2e, magic);         /* n + 127 in the low mantissa bits */
    __m256 nf = _mm256_sub_ps(nt, magic);               /* n = round(u log2 e), exactly */
    __m256 r = _mm256_fmadd_ps(nf, lo_ln2, _mm256_fmadd_ps(nf, hi_ln2, u));
    __m256 r2 = _mm256_mul_ps(r, r), r1 = _mm256_add_ps(r, one);
    __m256 q01 = _mm256_fmadd_ps(c1, r, c0), q23 = _mm256_fmadd_ps(c3, r, c2), q45 = _mm256_fmadd_ps(c5, r, c4);
    __m256 q = _mm256_fmadd_ps(_mm256_mul_ps(r2, r2), q45, _mm256_fmadd_ps(r2, q23, q01));
    __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(nt), 23)); /* 2^n */
    __m256 e = _mm256_mul_ps(_mm256_fmadd_ps(r2, q, r1), f);                        /* exp(-|t|) */
    /* sigmoid(t) = 1 / (1 + e) for t >= 0 and e / (1 + e) below (t's sign bit picks) */
    __m256 s = _mm256_div_ps(_mm256_blendv_ps(one, e, t), _mm256_add_ps(one, e));
    return swish ? _mm256_mul_ps(v, s) : s;
}

__attribute__((target("avx2,fma"))) static void sigmoid_avx2(const float *x, float *y, int64_t n, float a, bool swish)
{
    const __m256 va = _mm256_set1_ps(a), lo = _mm256_set1_ps(-87.0f);
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
    int64_t n8 = n / 8 * 8, i = 0;
    /* two vectors a step: their chains interleave (the scheduler sees twice the independent work) */
    for (; i + 16 <= n8; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), t0 = _mm256_mul_ps(va, v0);
        __m256 v1 = _mm256_loadu_ps(x + i + 8), t1 = _mm256_mul_ps(va, v1);
        /* not (-|t| >= -87): a NaN lane too */
        __m256 far0 = _mm256_cmp_ps(_mm256_or_ps(t0, sign), lo, _CMP_NGE_UQ);
        __m256 far1 = _mm256_cmp_ps(_mm256_or_ps(t1, sign), lo, _CMP_NGE_UQ);
        if (__builtin_expect(_mm256_movemask_ps(_mm256_or_ps(far0, far1)) != 0, 0)) {
            _mm256_storeu_ps(y + i, _mm256_movemask_ps(far0) ? sig8_wide(v0, t0, swish) : sig8_short(v0, t0, swish));
            _mm256_storeu_ps(y + i + 8, _mm256_movemask_ps(far1) ? sig8_wide(v1, t1, swish) : sig8_short(v1, t1, swish));
            continue;
        }
        _mm256_storeu_ps(y + i, sig8_short(v0, t0, swish));
        _mm256_storeu_ps(y + i + 8, sig8_short(v1, t1, swish));
    }
    for (; i < n8; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), t = _mm256_mul_ps(va, v);
        bool far = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_or_ps(t, sign), lo, _CMP_NGE_UQ)) != 0;
        _mm256_storeu_ps(y + i, far ? sig8_wide(v, t, swish) : sig8_short(v, t, swish));
    }
    if (n8 < n) {
        if (swish) swish_plain(x + n8, y + n8, n - n8, a);
        else sigmoid_plain(x + n8, y + n8, n - n8);
    }
}
#endif

/* The loop for this CPU: AVX-512's or AVX2's above, else the portable one; WEFT_CPU_VMATH=plain picks the
 * portable loops and =avx2 the AVX2 one on an AVX-512 machine (tests). */
static int sigmoid_form(void)
{
    static atomic_int pick = -1;
    int f = wf__cpu_form(&pick, "WEFT_CPU_VMATH", "plain");
#if defined(__x86_64__) && defined(__GNUC__)
    if (f == WF__FORM_AVX2 && !__builtin_cpu_supports("fma")) f = WF__FORM_PLAIN;
#endif
    return f;
}

void wf__ew_swish_f32(const float *x, float *y, int64_t n, float a)
{
#if defined(__x86_64__) && defined(__GNUC__)
    int f = sigmoid_form();
    if (f == WF__FORM_AVX512) {
        sigmoid_avx512(x, y, n, a, true);
        return;
    }
    if (f == WF__FORM_AVX2) {
        sigmoid_avx2(x, y, n, a, true);
        return;
    }
#endif
    swish_plain(x, y, n, a);
}

/* y = x * clamp(x / 6 + 1/2, 0, 1) in place, the HardSwish node's arithmetic (k_math.c), for the fused
 * Conv2D+HardSwish pass. GCC turned the portable loop's two selects into three compares and three blends
 * per vector (it distributed the product over the selects; MobileNetV3-small spent 7.5% of a one-thread
 * run in that pass), so AVX2 gets vminps / vmaxps: a NaN g (only from a NaN x) becomes a number there,
 * and x * g is NaN all the same; +-Inf give +Inf and -0 (x * 0) as before. */
WF__VEC static void hardswish_plain(float *p, int64_t n)
{
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {
        float v = p[i], g = v * (1.0f / 6.0f) + 0.5f;
        g = g > 1.0f ? 1.0f : g;
        g = g < 0.0f ? 0.0f : g;
        p[i] = v * g;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void hardswish_avx2(float *p, int64_t n)
{
    const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8) {
        __m256 v = _mm256_loadu_ps(p + i);
        /* no FMA: v * (1/6) rounded, then + 1/2, as the node computes it */
        __m256 g = _mm256_add_ps(_mm256_mul_ps(v, sixth), half);
        g = _mm256_max_ps(_mm256_min_ps(g, one), zero);
        _mm256_storeu_ps(p + i, _mm256_mul_ps(v, g));
    }
    hardswish_plain(p + n8, n - n8);
}
#endif

void wf__ew_hardswish_f32(float *p, int64_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (sigmoid_form() != WF__FORM_PLAIN) {
        hardswish_avx2(p, n);
        return;
    }
#endif
    hardswish_plain(p, n);
}

static void sigmoid_f32(const void *x, void *y, int64_t n, const un_params *p)
{
    (void)p;
#if defined(__x86_64__) && defined(__GNUC__)
    int f = sigmoid_form();
    if (f == WF__FORM_AVX512) {
        sigmoid_avx512(x, y, n, 1.0f, false);
        return;
    }
    if (f == WF__FORM_AVX2) {
        sigmoid_avx2(x, y, n, 1.0f, false);
        return;
    }
#endif
    sigmoid_plain(x, y, n);
}

/* erf: x * P(x^2) below 1; a degree-12 polynomial in |x| - 2.46 on [1, 3.92] (both least-squares
 * fits, < 2.5 ulp); exactly +-1 beyond, where erf rounds to 1 in f32. */
static inline float ew_erff(float x)
{
    float a = fabsf(x);
    float s = x * x;
    float p = -5.624679732659926e-04f;
    p = p * s + 4.915734732133303e-03f;
    p = p * s - 2.670955074191328e-02f;
    p = p * s + 1.128010705816815e-01f;
    p = p * s - 3.761231443177850e-01f;
    p = p * s + 1.128379118069294e+00f;
    float small = x * p;
    float u = (a > 3.92f ? 3.92f : a) - 2.46f; /* NaN must pass through */
    float b = -9.114846352e-06f;
    b = b * u + 2.541991920e-05f;
    b = b * u + 5.160683547e-05f;
    b = b * u - 3.016725392e-04f;
    b = b * u + 3.912664512e-04f;
    b = b * u + 4.621617977e-04f;
    b = b * u - 2.963648592e-03f;
    b = b * u + 6.797658053e-03f;
    b = b * u - 9.904763131e-03f;
    b = b * u + 9.832994669e-03f;
    b = b * u - 6.535773928e-03f;
    b = b * u + 2.656193455e-03f;
    b = b * u + 9.994966735e-01f;
    b = a >= 3.92f ? 1.0f : b;
    float big = copysignf(b, x);
    return a < 1.0f ? small : big;
}

/* Gelu's tanh form, rewritten: 0.5 * (1 + tanh(z)) == 1 / (1 + e^-2z), which keeps full relative
 * precision for large negative x where 1 + tanh cancels. */
static inline float ew_gelu_tanhf(float x)
{
    float z = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x * ew_sigmoidf(2.0f * z);
}

static inline double gelu_tanh_d(double x)
{
    double z = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * z));
}

/* floor/ceil through round-to-nearest: the plain floorf/ceilf calls only vectorise with
 * -fno-trapping-math, and this is exact (the adjustment is by 1, never rounded). */
static inline float floor_f(float v) { float r = nearbyintf(v); return r > v ? r - 1.0f : r; }
static inline float ceil_f(float v) { float r = nearbyintf(v); return r < v ? r + 1.0f : r; }
static inline double floor_d(double v) { double r = nearbyint(v); return r > v ? r - 1.0 : r; }
static inline double ceil_d(double v) { double r = nearbyint(v); return r < v ? r + 1.0 : r; }

/* ---- loops ----------------------------------------------------------------------------------------- */

/* V: vectorised (cloned per ISA); S: plain loop, for bodies that call libm or divide integers. U is an
 * unsigned type at least as wide as unsigned int, so wrapping integer arithmetic has no UB. */
#define UN_V(name, T, U, EXPR)                                                                    \
    WF__VEC static void name(const void *xv, void *yv, int64_t n, const un_params *p)            \
    {                                                                                            \
        typedef T T_;                                                                            \
        typedef U U_ WF__UNUSED_;                                                                          \
        const un_params pp = *p;                                                                 \
        const T_ *x = xv;                                                                        \
        T_ *y = yv;                                                                              \
        (void)pp;                                                                                \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                      \
        {                                                                                        \
            T_ v = x[i];                                                                         \
            y[i] = (T_)(EXPR);                                                                   \
        }                                                                                        \
    }
#define UN_S(name, T, U, EXPR)                                                                    \
    static void name(const void *xv, void *yv, int64_t n, const un_params *p)                    \
    {                                                                                            \
        typedef T T_;                                                                            \
        typedef U U_ WF__UNUSED_;                                                                          \
        const un_params pp = *p;                                                                 \
        const T_ *x = xv;                                                                        \
        T_ *y = yv;                                                                              \
        (void)pp;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                        \
            T_ v = x[i];                                                                         \
            y[i] = (T_)(EXPR);                                                                   \
        }                                                                                        \
    }

/* Signed and unsigned integer variants of one body. */
#define UN_SINTS(mac, base, EXPR)                                                                 \
    mac(base##_i8, int8_t, uint32_t, EXPR) mac(base##_i16, int16_t, uint32_t, EXPR)               \
        mac(base##_i32, int32_t, uint32_t, EXPR) mac(base##_i64, int64_t, uint64_t, EXPR)
#define SINT_FNS(base)                                                                            \
    [WF_I8] = base##_i8, [WF_I16] = base##_i16, [WF_I32] = base##_i32, [WF_I64] = base##_i64
#define FLT_FNS(base) [WF_F32] = base##_f32, [WF_F64] = base##_f64

static void copy_u8(const void *x, void *y, int64_t n, const un_params *p)
{
    if (x != y) memcpy(y, x, (size_t)n);
}

UN_V(neg_f32, float, uint32_t, -v)
UN_V(neg_f64, double, uint64_t, -v)
UN_SINTS(UN_V, neg, (U_)0 - (U_)v)
UN_V(neg_u8, uint8_t, uint32_t, 0u - (uint32_t)v)
static const unop op_neg = {{FLT_FNS(neg), SINT_FNS(neg), [WF_U8] = neg_u8}, WF__EW_GRAIN};

UN_V(abs_f32, float, uint32_t, fabsf(v))
UN_V(abs_f64, double, uint64_t, fabs(v))
UN_SINTS(UN_V, abs, v < 0 ? (U_)0 - (U_)v : (U_)v) /* the most negative value stays, as in numpy */
static const unop op_abs = {{FLT_FNS(abs), SINT_FNS(abs), [WF_U8] = copy_u8}, WF__EW_GRAIN};

UN_V(sign_f32, float, uint32_t, v > 0 ? 1.0f : v < 0 ? -1.0f : v) /* 0, -0 and NaN map to themselves */
UN_V(sign_f64, double, uint64_t, v > 0 ? 1.0 : v < 0 ? -1.0 : v)
UN_SINTS(UN_V, sign, (v > 0) - (v < 0))
UN_V(sign_u8, uint8_t, uint32_t, v != 0)
static const unop op_sign = {{FLT_FNS(sign), SINT_FNS(sign), [WF_U8] = sign_u8}, WF__EW_GRAIN};

UN_V(square_f32, float, uint32_t, v * v)
UN_V(square_f64, double, uint64_t, v * v)
UN_SINTS(UN_V, square, (U_)v * (U_)v)
UN_V(square_u8, uint8_t, uint32_t, (uint32_t)v * v)
static const unop op_square = {{FLT_FNS(square), SINT_FNS(square), [WF_U8] = square_u8}, WF__EW_GRAIN};

UN_V(relu_f32, float, uint32_t, v < 0 ? 0.0f : v) /* NaN passes, like numpy.maximum(x, 0) */
UN_V(relu_f64, double, uint64_t, v < 0 ? 0.0 : v)
UN_SINTS(UN_V, relu, v < 0 ? 0 : v)
static const unop op_relu = {{FLT_FNS(relu), SINT_FNS(relu), [WF_U8] = copy_u8}, WF__EW_GRAIN};

UN_V(exp_f32, float, uint32_t, ew_expf(v))
UN_S(exp_f64, double, uint64_t, exp(v))
static const unop op_exp = {{FLT_FNS(exp)}, WF__EW_GRAIN_HEAVY};

UN_V(log_f32, float, uint32_t, ew_logf(v))
UN_S(log_f64, double, uint64_t, log(v))
static const unop op_log = {{FLT_FNS(log)}, WF__EW_GRAIN_HEAVY};

/* sqrtf stays scalar in C: without -fno-math-errno GCC keeps the errno path (one sqrtss an element, 256 x
 * 1024 f32 in 0.21 ms on 2 Zen 3 threads, ONNX Runtime 0.07). With AVX, vsqrtps: IEEE's correctly rounded
 * root, the same value as sqrtf's, a negative input's NaN too; Rsqrt divides 1 by it as the scalar form. */
UN_S(sqrt_plain, float, uint32_t, sqrtf(v))
UN_S(rsqrt_plain, float, uint32_t, 1.0f / sqrtf(v))
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx"))) static void sqrt_avx(const float *x, float *y, int64_t n, bool recip)
{
    static const un_params none;
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8) {
        __m256 r = _mm256_sqrt_ps(_mm256_loadu_ps(x + i));
        _mm256_storeu_ps(y + i, recip ? _mm256_div_ps(one, r) : r);
    }
    if (n8 < n) (recip ? rsqrt_plain : sqrt_plain)(x + n8, y + n8, n - n8, &none);
}
#endif
static void sqrt_family(const void *x, void *y, int64_t n, const un_params *p, bool recip)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (sigmoid_form() != WF__FORM_PLAIN) {
        sqrt_avx(x, y, n, recip);
        return;
    }
#endif
    (recip ? rsqrt_plain : sqrt_plain)(x, y, n, p);
}
static void sqrt_f32(const void *x, void *y, int64_t n, const un_params *p) { sqrt_family(x, y, n, p, false); }
static void rsqrt_f32(const void *x, void *y, int64_t n, const un_params *p) { sqrt_family(x, y, n, p, true); }
UN_S(sqrt_f64, double, uint64_t, sqrt(v))
static const unop op_sqrt = {{FLT_FNS(sqrt)}, WF__EW_GRAIN_HEAVY};

UN_S(rsqrt_f64, double, uint64_t, 1.0 / sqrt(v))
static const unop op_rsqrt = {{FLT_FNS(rsqrt)}, WF__EW_GRAIN_HEAVY};

UN_V(recip_f32, float, uint32_t, 1.0f / v)
UN_V(recip_f64, double, uint64_t, 1.0 / v)
static const unop op_recip = {{FLT_FNS(recip)}, WF__EW_GRAIN};

UN_V(tanh_plain, float, uint32_t, ew_tanhf(v))

#if defined(__x86_64__) && defined(__GNUC__)
/* Tanh on 8 lanes with FMA (WF__VEC's AVX2 clone of the loop above has none): ew_tanhf's two forms, the odd
 * polynomial below 0.625 and (1 - e) / (1 + e) with e = exp(-2|x|) above, e from sig8_short's exp (every
 * lane in range: -2|x| is clamped to -87, where (1 - e) / (1 + e) is already 1 in f32), the sign put back,
 * NaN passed through. 256 x 1024 f32 on 2 Zen 3 threads: 0.23-0.48 ms in the portable loop (ONNX Runtime
 * 0.09-0.12). */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 tanh8(__m256 x)
{
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)), one = _mm256_set1_ps(1.0f);
    const __m256 l2e = _mm256_set1_ps(LOG2E_F), hi_ln2 = _mm256_set1_ps(-LN2_HI_F), lo_ln2 = _mm256_set1_ps(-LN2_LO_F);
    const __m256 magic = _mm256_set1_ps(12582912.0f + 127.0f);
    __m256 a = _mm256_andnot_ps(sign, x), s = _mm256_mul_ps(x, x);
    __m256 q = _mm256_set1_ps(-5.775799997e-03f);
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(2.070451210e-02f));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(-5.376072439e-02f));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(1.333171255e-01f));
    q = _mm256_fmadd_ps(q, s, _mm256_set1_ps(-3.333329316e-01f));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, s), q, x);
    /* u = max(-2|x|, -87) (-87 for NaN: vmaxps gives its second operand), e = exp(u) */
    __m256 u = _mm256_max_ps(_mm256_mul_ps(a, _mm256_set1_ps(-2.0f)), _mm256_set1_ps(-87.0f));
    __m256 nt = _mm256_fmadd_ps(u, l2e, magic), nf = _mm256_sub_ps(nt, magic);
    __m256 r = _mm256_fmadd_ps(nf, lo_ln2, _mm256_fmadd_ps(nf, hi_ln2, u));
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(nt), 23));
    __m256 e = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_mul_ps(r, r), p, _mm256_add_ps(r, one)), f);
    __m256 big = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
    __m256 y = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

__attribute__((target("avx2,fma"))) static void tanh_avx2(const float *x, float *y, int64_t n)
{
    static const un_params none;
    int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8) _mm256_storeu_ps(y + i, tanh8(_mm256_loadu_ps(x + i)));
    if (n8 < n) tanh_plain(x + n8, y + n8, n - n8, &none);
}
#endif

static void tanh_f32(const void *x, void *y, int64_t n, const un_params *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (sigmoid_form() != WF__FORM_PLAIN) {
        tanh_avx2(x, y, n);
        return;
    }
#endif
    tanh_plain(x, y, n, p);
}
UN_S(tanh_f64, double, uint64_t, tanh(v))
static const unop op_tanh = {{FLT_FNS(tanh)}, WF__EW_GRAIN_HEAVY};

UN_S(sigmoid_f64, double, uint64_t, 1.0 / (1.0 + exp(-v)))
static const unop op_sigmoid = {{FLT_FNS(sigmoid)}, WF__EW_GRAIN_HEAVY};

UN_V(leaky_f32, float, uint32_t, v < 0 ? (float)pp.alpha * v : v)
UN_V(leaky_f64, double, uint64_t, v < 0 ? pp.alpha * v : v)
static const unop op_leaky = {{FLT_FNS(leaky)}, WF__EW_GRAIN};

UN_V(elu_f32, float, uint32_t, v < 0 ? (float)pp.alpha * ew_expm1f(v) : v)
UN_S(elu_f64, double, uint64_t, v < 0 ? pp.alpha * expm1(v) : v)
static const unop op_elu = {{FLT_FNS(elu)}, WF__EW_GRAIN_HEAVY};

UN_V(gelu_plain, float, uint32_t, 0.5f * v * (1.0f + ew_erff(v * 0.70710678118654752f)))
UN_S(gelu_f64, double, uint64_t, 0.5 * v * erfc(-v * 0.70710678118654752)) /* no cancellation */
UN_V(erf_plain, float, uint32_t, ew_erff(v))

/* ew_erff on 8 lanes with FMA: WF__VEC's AVX2 clone has none (and ISO C's contraction is off), so its
 * two Horner chains took a multiply and an add a step: Gelu 1.14 against 0.74 ns an element on one Zen 3
 * core (BERT's four feed-forward Gelu passes, 131072 elements each). The same polynomials and selects,
 * each step rounded once instead of twice; NaN takes the same arms as in ew_erff (vminps returns its
 * second operand, |x|, when it is NaN; the compares are false for it). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 erf8(__m256 x)
{
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)), one = _mm256_set1_ps(1.0f);
    const __m256 top = _mm256_set1_ps(3.92f);
    __m256 a = _mm256_andnot_ps(sign, x), s = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.624679732659926e-04f);
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(4.915734732133303e-03f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-2.670955074191328e-02f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(1.128010705816815e-01f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-3.761231443177850e-01f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(1.128379118069294e+00f));
    __m256 small = _mm256_mul_ps(x, p);
    __m256 u = _mm256_sub_ps(_mm256_min_ps(top, a), _mm256_set1_ps(2.46f));
    __m256 b = _mm256_set1_ps(-9.114846352e-06f);
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(2.541991920e-05f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(5.160683547e-05f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(-3.016725392e-04f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(3.912664512e-04f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(4.621617977e-04f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(-2.963648592e-03f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(6.797658053e-03f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(-9.904763131e-03f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(9.832994669e-03f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(-6.535773928e-03f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(2.656193455e-03f));
    b = _mm256_fmadd_ps(b, u, _mm256_set1_ps(9.994966735e-01f));
    b = _mm256_blendv_ps(b, one, _mm256_cmp_ps(a, top, _CMP_GE_OQ));
    __m256 big = _mm256_or_ps(_mm256_andnot_ps(sign, b), _mm256_and_ps(sign, x));
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, one, _CMP_LT_OQ));
}

/* Gelu (gelu true) or Erf over n values; the tail (n % 8) through the portable loop */
__attribute__((target("avx2,fma"))) static void erf_avx2(const float *x, float *y, int64_t n, bool gelu)
{
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f), rs2 = _mm256_set1_ps(0.70710678118654752f);
    static const un_params none;
    int64_t n8 = n / 8 * 8;
    for (int64_t i = 0; i < n8; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (gelu) v = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, erf8(_mm256_mul_ps(v, rs2))));
        else v = erf8(v);
        _mm256_storeu_ps(y + i, v);
    }
    if (n8 < n) (gelu ? gelu_plain : erf_plain)(x + n8, y + n8, n - n8, &none);
}
#endif

/* Gelu or Erf: AVX2's FMA loop where sigmoid_form picks AVX2, else the portable loop's clone */
static void erf_family(const void *x, void *y, int64_t n, const un_params *p, bool gelu)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (sigmoid_form() == WF__FORM_AVX2) {
        erf_avx2(x, y, n, gelu);
        return;
    }
#endif
    (gelu ? gelu_plain : erf_plain)(x, y, n, p);
}

static void gelu_f32(const void *x, void *y, int64_t n, const un_params *p) { erf_family(x, y, n, p, true); }
static void erf_f32(const void *x, void *y, int64_t n, const un_params *p) { erf_family(x, y, n, p, false); }

static const unop op_gelu = {{FLT_FNS(gelu)}, WF__EW_GRAIN_HEAVY};

void wf__ew_gelu_f32(const float *x, float *y, int64_t n)
{
    static const un_params none; /* Gelu reads no parameter */
    gelu_f32(x, y, n, &none);
}

UN_V(gelut_f32, float, uint32_t, ew_gelu_tanhf(v))
UN_S(gelut_f64, double, uint64_t, gelu_tanh_d(v))
static const unop op_gelu_tanh = {{FLT_FNS(gelut)}, WF__EW_GRAIN_HEAVY};

void wf__ew_gelu_tanh_f32(const float *x, float *y, int64_t n)
{
    static const un_params none; /* Gelu reads no parameter */
    gelut_f32(x, y, n, &none);
}

UN_S(erf_f64, double, uint64_t, erf(v))
static const unop op_erf = {{FLT_FNS(erf)}, WF__EW_GRAIN_HEAVY};

/* max(x, 0) + log1p(e^-|x|) never overflows and keeps precision at both ends. */
UN_V(softplus_f32, float, uint32_t, ew_softplusf(v))
UN_S(softplus_f64, double, uint64_t, (v > 0 ? v : 0.0) + log1p(exp(-fabs(v))))
static const unop op_softplus = {{FLT_FNS(softplus)}, WF__EW_GRAIN_HEAVY};

UN_V(floor_f32, float, uint32_t, floor_f(v))
UN_V(floor_f64, double, uint64_t, floor_d(v))
static const unop op_floor = {{FLT_FNS(floor)}, WF__EW_GRAIN};

UN_V(ceil_f32, float, uint32_t, ceil_f(v))
UN_V(ceil_f64, double, uint64_t, ceil_d(v))
static const unop op_ceil = {{FLT_FNS(ceil)}, WF__EW_GRAIN};

/* The default rounding mode is to nearest, ties to even: ONNX Round and numpy.round both. */
UN_V(round_f32, float, uint32_t, nearbyintf(v))
UN_V(round_f64, double, uint64_t, nearbyint(v))
static const unop op_round = {{FLT_FNS(round)}, WF__EW_GRAIN};

/* numpy.clip order: max with lo first, then min with hi, so lo > hi gives hi and NaN passes. */
UN_V(clip_f32, float, uint32_t, (v < (float)pp.lo ? (float)pp.lo : v) > (float)pp.hi ? (float)pp.hi
                                    : (v < (float)pp.lo ? (float)pp.lo : v))
UN_V(clip_f64, double, uint64_t, (v < pp.lo ? pp.lo : v) > pp.hi ? pp.hi : (v < pp.lo ? pp.lo : v))
UN_SINTS(UN_V, clip, (v < (T_)pp.ilo ? (T_)pp.ilo : v) > (T_)pp.ihi ? (T_)pp.ihi
                                                                    : (v < (T_)pp.ilo ? (T_)pp.ilo : v))
UN_V(clip_u8, uint8_t, uint32_t, (v < (T_)pp.ilo ? (T_)pp.ilo : v) > (T_)pp.ihi ? (T_)pp.ihi
                                     : (v < (T_)pp.ilo ? (T_)pp.ilo : v))
static const unop op_clip = {{FLT_FNS(clip), SINT_FNS(clip), [WF_U8] = clip_u8}, WF__EW_GRAIN};

UN_V(not_b, uint8_t, uint32_t, v == 0)
static const unop op_not = {{[WF_BOOL] = not_b}, WF__EW_GRAIN};

/* ---- the loops for generated kernels (k_fused.c) --------------------------------------------------- */

_Static_assert(sizeof(un_params) <= sizeof(((wf__ew_unary *)0)->p), "un_params fits wf__ew_unary");

static void un_call(const wf__ew_unary *u, const float *x, float *y, int64_t n)
{
    un_params p;
    memcpy(&p, u->p, sizeof p);
    ((un_fn)u->impl)(x, y, n, &p);
}

bool wf__ew_unary_f32(const char *op, double alpha, double beta, wf__ew_unary *u)
{
    static const struct {
        const char *op;
        const unop *u;
    } t[] = {{"Neg", &op_neg},        {"Abs", &op_abs},         {"Square", &op_square}, {"Relu", &op_relu},
             {"Exp", &op_exp},        {"Log", &op_log},         {"Sqrt", &op_sqrt},     {"Rsqrt", &op_rsqrt},
             {"Reciprocal", &op_recip}, {"Tanh", &op_tanh},     {"Sigmoid", &op_sigmoid}, {"LeakyRelu", &op_leaky},
             {"Elu", &op_elu},        {"Erf", &op_erf},         {"Softplus", &op_softplus}, {"Floor", &op_floor},
             {"Ceil", &op_ceil},      {"Round", &op_round},     {"Clip", &op_clip},     {"Sign", &op_sign}};
    const unop *f = NULL;
    if (!strcmp(op, "Gelu")) f = alpha != 0 ? &op_gelu_tanh : &op_gelu;
    for (size_t i = 0; !f && i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(op, t[i].op)) f = t[i].u;
    if (!f || !f->fn[WF_F32]) return false;
    un_params p = {.alpha = alpha, .lo = alpha, .hi = beta};
    memset(u, 0, sizeof *u);
    memcpy(u->p, &p, sizeof p);
    u->impl = (void (*)(void))f->fn[WF_F32];
    u->call = un_call;
    return true;
}

/* ---- driver -------------------------------------------------------------------------------------- */

typedef struct un_job {
    un_fn fn;
    const un_params *p;
    const void *x;
    void *y;
    wf_dtype t;
} un_job;

static void un_range(void *arg, int64_t b, int64_t e)
{
    const un_job *j = arg;
    if (j->t == WF_F16 || j->t == WF_BF16) {
        float tmp[1024];
        for (int64_t i = b; i < e; i += 1024) {
            int64_t m = e - i < 1024 ? e - i : 1024;
            wf__ew_half_to_f32((const uint16_t *)j->x + i, tmp, m, j->t);
            j->fn(tmp, tmp, m, j->p);
            wf__ew_f32_to_half(tmp, (uint16_t *)j->y + i, m, j->t);
        }
        return;
    }
    size_t es = wf_dtype_size(j->t);
    j->fn((const char *)j->x + (size_t)b * es, (char *)j->y + (size_t)b * es, e - b, j->p);
}

static wf_status *run_unary(wf__kctx *k, const unop *op, const un_params *p)
{
    const wf_tensor *x = k->in[0];
    wf_dtype t = x->dtype;
    bool half = t == WF_F16 || t == WF_BF16;
    un_fn fn = wf__dtype_valid(t) ? op->fn[half ? WF_F32 : t] : NULL;
    if (!fn) return wf__kctx_fail(k, WF_UNIMPLEMENTED, "no CPU kernel for dtype %s", wf_dtype_name(t));
    wf_tensor *y;
    WF__TRY(wf__kctx_output_reuse(k, 0, 0, t, x->rank, x->dims, &y, NULL));
    un_params none = {0};
    un_job j = {fn, p ? p : &none, x->data, y->data, t};
    if (x->size >= 2 * op->grain)
        wf__parallel_for(k, x->size, op->grain, un_range, &j);
    else if (x->size > 0)
        un_range(&j, 0, x->size);
    return NULL;
}

#define SIMPLE_(Op, tbl)                                                                          \
    wf_status *wf__ew_k_##Op(wf__kctx *k) { return run_unary(k, &tbl, NULL); }
SIMPLE_(Neg, op_neg)
SIMPLE_(Abs, op_abs)
SIMPLE_(Sign, op_sign)
SIMPLE_(Square, op_square)
SIMPLE_(Relu, op_relu)
SIMPLE_(Exp, op_exp)
SIMPLE_(Log, op_log)
SIMPLE_(Sqrt, op_sqrt)
SIMPLE_(Rsqrt, op_rsqrt)
SIMPLE_(Reciprocal, op_recip)
SIMPLE_(Tanh, op_tanh)
SIMPLE_(Sigmoid, op_sigmoid)
SIMPLE_(Erf, op_erf)
SIMPLE_(Softplus, op_softplus)
SIMPLE_(Floor, op_floor)
SIMPLE_(Ceil, op_ceil)
SIMPLE_(Round, op_round)
SIMPLE_(Not, op_not)
#undef SIMPLE_

wf_status *wf__ew_k_LeakyRelu(wf__kctx *k)
{
    un_params p = {.alpha = wf__attr_f(k->op, k->attrs, "alpha")};
    return run_unary(k, &op_leaky, &p);
}

wf_status *wf__ew_k_Elu(wf__kctx *k)
{
    un_params p = {.alpha = wf__attr_f(k->op, k->attrs, "alpha")};
    return run_unary(k, &op_elu, &p);
}

wf_status *wf__ew_k_Gelu(wf__kctx *k)
{
    bool tanh_form = !strcmp(wf__attr_s(k->op, k->attrs, "approximate"), "tanh");
    return run_unary(k, tanh_form ? &op_gelu_tanh : &op_gelu, NULL);
}

static void int_range(wf_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case WF_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case WF_U8: *lo = 0; *hi = UINT8_MAX; break;
    case WF_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case WF_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    default: *lo = INT64_MIN; *hi = INT64_MAX; break;
    }
}

/* Reads Clip's optional scalar bound i into *d / *v; false when the input is omitted. */
static wf_status *clip_bound(wf__kctx *k, int i, bool *given, double *d, int64_t *v)
{
    const wf_tensor *b = i < k->n_in ? k->in[i] : NULL;
    *given = b != NULL;
    if (!b) return NULL;
    if (b->dtype != k->in[0]->dtype)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s has dtype %s but the input is %s",
                             i == 1 ? "min" : "max", wf_dtype_name(b->dtype), wf_dtype_name(k->in[0]->dtype));
    if (b->size != 1 || b->rank > 1) {
        char sh[160];
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s must be a scalar, got shape %s",
                             i == 1 ? "min" : "max", wf__shape_str(b->rank, b->dims, sh));
    }
    *d = wf__load_f64(b->data, b->dtype, 0);
    *v = wf__load_i64(b->data, b->dtype, 0);
    return NULL;
}

wf_status *wf__ew_k_Clip(wf__kctx *k)
{
    un_params p = {.lo = -INFINITY, .hi = INFINITY};
    wf_dtype t = k->in[0]->dtype;
    int_range(t, &p.ilo, &p.ihi);
    bool given;
    double d;
    int64_t v;
    WF__TRY(clip_bound(k, 1, &given, &d, &v));
    if (given) {
        p.lo = d;
        p.ilo = v;
    }
    WF__TRY(clip_bound(k, 2, &given, &d, &v));
    if (given) {
        p.hi = d;
        p.ihi = v;
    }
    return run_unary(k, &op_clip, &p);
}
