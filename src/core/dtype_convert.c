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
WF__VEC void wf__half_to_f32_n(const uint16_t *src, float *dst, int64_t n, wf_dtype t)
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

WF__VEC void wf__f32_to_half_n(const float *src, uint16_t *dst, int64_t n, wf_dtype t)
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
