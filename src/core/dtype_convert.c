/*
 * Bulk f16 / bf16 <-> f32 conversion, vectorised: Cast, the elementwise kernels' half blocks and every
 * kernel that computes a half op in f32 (MatMul, Conv, pooling through wf__convert) go through these.
 * The scalar converters in dtype.c are the reference.
 */
#include "core/core.h"

/* Lets GCC if-convert the selects of the special cases (subnormal, overflow, NaN) so the loops stay
 * vectorised on AVX2; weft never unmasks floating-point exceptions, so nothing observable changes. */
#pragma GCC optimize("no-trapping-math")

/* Branch-free so the loops vectorise; the library's scalar converters (dtype.c) are the reference and
 * these agree with them bit for bit (round to nearest even, NaN stays NaN). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* f16 through F16C's vcvtph2ps / vcvtps2ph (round to nearest even), 8 at a time: the same bits as the loops
 * below (test_core's test_bulk_half_convert checks every half pattern and every rounding boundary), and the
 * f32 -> f16 Cast of 256 x 1024 values 0.14 -> 0.05 ms on 2 Zen 3 threads (ONNX Runtime 0.04; the rest is the run's fixed cost). */
__attribute__((target("avx,f16c"))) static int64_t f16c_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    return i;
}
__attribute__((target("avx,f16c"))) static int64_t f16c_from_f32(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
/* F16C by AVX2 (every x86 core with AVX2 has F16C; clang's __builtin_cpu_supports knows no "f16c") */
static bool have_f16c(void)
{
    static int v = -1; /* a benign race: every thread computes the same answer */
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2");
    }
    return v;
}
#endif

WF__VEC static void half_to_f32_loop(const uint16_t *src, float *dst, int64_t n, wf_dtype t);
WF__VEC static void f32_to_half_loop(const float *src, uint16_t *dst, int64_t n, wf_dtype t);

void wf__half_to_f32_n(const uint16_t *src, float *dst, int64_t n, wf_dtype t)
{
    int64_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (t == WF_F16 && have_f16c()) i = f16c_to_f32(src, dst, n);
#endif
    if (i < n) half_to_f32_loop(src + i, dst + i, n - i, t);
}

void wf__f32_to_half_n(const float *src, uint16_t *dst, int64_t n, wf_dtype t)
{
    int64_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (t == WF_F16 && have_f16c()) i = f16c_from_f32(src, dst, n);
#endif
    if (i < n) f32_to_half_loop(src + i, dst + i, n - i, t);
}

WF__VEC static void half_to_f32_loop(const uint16_t *src, float *dst, int64_t n, wf_dtype t)
{
    if (t == WF_BF16) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) dst[i] = wf__f32_from_bits((uint32_t)src[i] << 16);
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        uint32_t h = src[i];
        uint32_t em = (h & 0x7fffu) << 13;
        /* Exponent and mantissa land in an f32 whose value is 2^-112 times the half's (subnormal
         * halves become f32 subnormals), so one multiply rebiases every finite case. */
        uint32_t u = wf__f32_bits(wf__f32_from_bits(em) * 0x1p112f);
        u = (h & 0x7c00u) == 0x7c00u ? (em | 0x7f800000u) : u;
        dst[i] = wf__f32_from_bits(u | ((h & 0x8000u) << 16));
    }
}

WF__VEC static void f32_to_half_loop(const float *src, uint16_t *dst, int64_t n, wf_dtype t)
{
    if (t == WF_BF16) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            uint32_t u = wf__f32_bits(src[i]);
            uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
            dst[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r);
        }
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = wf__f32_bits(src[i]);
        uint32_t sign = (u >> 16) & 0x8000u;
        uint32_t a = u & 0x7fffffffu;
        /* Normal halves: rebias and round the 13 dropped bits to nearest even; a carry into the
         * exponent is the right answer, up to and including infinity. */
        uint32_t h = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
        /* Subnormal halves: adding 0.5 puts the value in units of 2^-24 and the FPU rounds. */
        uint32_t sub = wf__f32_bits(wf__f32_from_bits(a) + 0.5f) - 0x3f000000u;
        h = a < 0x38800000u ? sub : h;
        h = a >= 0x47800000u ? 0x7c00u : h;
        h = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : h;
        dst[i] = (uint16_t)(sign | h);
    }
}
