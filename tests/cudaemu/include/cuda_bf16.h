/*
 * weft's CUDA emulator (tests/cudaemu): __nv_bfloat16 as the device code sees it: storage with
 * round-to-nearest-even conversions from float (NaN kept quiet) and arithmetic through float.
 */
#ifndef WF_CUDAEMU_CUDA_BF16_H
#define WF_CUDAEMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

#include "cuda_fp16.h"

#ifdef __cplusplus

static inline uint16_t __cuemu_f2bf_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float __cuemu_bf2f_bits(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(__cuemu_f2bf_bits(f)) {}
    __nv_bfloat16(double f) : __x(__cuemu_f2bf_bits((float)f)) {}
    operator float() const { return __cuemu_bf2f_bits(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;

static inline __nv_bfloat16 __float2bfloat16(float f) { __nv_bfloat16 b; b.__x = __cuemu_f2bf_bits(f); return b; }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 b) { return __cuemu_bf2f_bits(b.__x); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 b; b.__x = u; return b; }

#endif

#endif
