/*
 * weft's CUDA emulator (tests/cudaemu): __half as the device code sees it, with float <-> half
 * conversions that round to nearest even (subnormals, overflow to infinity and quiet NaNs as the
 * hardware's cvt.rn.f16.f32) and arithmetic through float, as sm_53+ computes single half operations.
 */
#ifndef WF_CUDAEMU_CUDA_FP16_H
#define WF_CUDAEMU_CUDA_FP16_H

#include <stdint.h>
#include <string.h>

#include "cuda_runtime.h"

#ifdef __cplusplus

static inline uint16_t __cuemu_f2h_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* NaN, quieted */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                       /* >= 65520: inf */
    if (ax >= 0x38800000u) {                                                          /* normal half */
        uint32_t r = ax - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax <= 0x33000000u) return sign; /* at most 2^-25: ties to the even zero */
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24: the subnormal's unit is 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline float __cuemu_h2f_bits(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
        float f = (float)m * 0x1p-24f;
        return sign ? -f : f;
    } else
        x = sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

struct __half_raw {
    unsigned short x;
};

struct __half {
    unsigned short __x;
    __half() = default;
    __half(const __half_raw &r) : __x(r.x) {}
    __half(float f) : __x(__cuemu_f2h_bits(f)) {}
    __half(double f) : __x(__cuemu_f2h_bits((float)f)) {}
    __half(int i) : __x(__cuemu_f2h_bits((float)i)) {}
    operator float() const { return __cuemu_h2f_bits(__x); }
    operator __half_raw() const { return __half_raw{__x}; }
};

struct __half2 {
    __half x, y;
};
typedef __half half;
typedef __half2 half2;

static inline __half __cuemu_mkh(uint16_t b) { __half h; h.__x = b; return h; }
static inline __half __float2half(float f) { return __cuemu_mkh(__cuemu_f2h_bits(f)); }
static inline __half __float2half_rn(float f) { return __cuemu_mkh(__cuemu_f2h_bits(f)); }
static inline __half __double2half(double d) { return __cuemu_mkh(__cuemu_f2h_bits((float)d)); }
static inline float __half2float(__half h) { return __cuemu_h2f_bits(h.__x); }
static inline __half __int2half_rn(int i) { return __float2half_rn((float)i); }
static inline int __half2int_rz(__half h) { return (int)__half2float(h); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline __half __ushort_as_half(unsigned short u) { return __cuemu_mkh(u); }
static inline __half __short_as_half(short s) { return __cuemu_mkh((uint16_t)s); }
static inline __half __hadd(__half a, __half b) { return __float2half_rn(__half2float(a) + __half2float(b)); }
static inline __half __hsub(__half a, __half b) { return __float2half_rn(__half2float(a) - __half2float(b)); }
static inline __half __hmul(__half a, __half b) { return __float2half_rn(__half2float(a) * __half2float(b)); }
static inline __half __hdiv(__half a, __half b) { return __float2half_rn(__half2float(a) / __half2float(b)); }
static inline __half __hfma(__half a, __half b, __half c)
{
    return __float2half_rn((float)((double)__half2float(a) * __half2float(b) + __half2float(c)));
}
static inline __half __hneg(__half a) { return __cuemu_mkh((uint16_t)(a.__x ^ 0x8000u)); }
static inline __half __habs(__half a) { return __cuemu_mkh((uint16_t)(a.__x & 0x7fffu)); }
static inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static inline int __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u ? (a.__x & 0x8000u ? -1 : 1) : 0; }
static inline bool __heq(__half a, __half b) { return __half2float(a) == __half2float(b); }
static inline bool __hne(__half a, __half b) { return __half2float(a) != __half2float(b); }
static inline bool __hlt(__half a, __half b) { return __half2float(a) < __half2float(b); }
static inline bool __hle(__half a, __half b) { return __half2float(a) <= __half2float(b); }
static inline bool __hgt(__half a, __half b) { return __half2float(a) > __half2float(b); }
static inline bool __hge(__half a, __half b) { return __half2float(a) >= __half2float(b); }
static inline __half __hmax(__half a, __half b) { return __hisnan(a) ? b : __hisnan(b) ? a : __hgt(a, b) ? a : b; }
static inline __half __hmin(__half a, __half b) { return __hisnan(a) ? b : __hisnan(b) ? a : __hlt(a, b) ? a : b; }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }
static inline __half2 __float2half2_rn(float a) { return __half2{__float2half_rn(a), __float2half_rn(a)}; }
static inline float __low2float(__half2 h) { return __half2float(h.x); }
static inline float __high2float(__half2 h) { return __half2float(h.y); }

static inline __half operator+(__half a, __half b) { return __hadd(a, b); }
static inline __half operator-(__half a, __half b) { return __hsub(a, b); }
static inline __half operator*(__half a, __half b) { return __hmul(a, b); }
static inline __half operator/(__half a, __half b) { return __hdiv(a, b); }
static inline __half operator-(__half a) { return __hneg(a); }
static inline __half &operator+=(__half &a, __half b) { return a = __hadd(a, b); }
static inline __half &operator-=(__half &a, __half b) { return a = __hsub(a, b); }
static inline __half &operator*=(__half &a, __half b) { return a = __hmul(a, b); }
static inline __half &operator/=(__half &a, __half b) { return a = __hdiv(a, b); }
static inline bool operator==(__half a, __half b) { return __heq(a, b); }
static inline bool operator!=(__half a, __half b) { return __hne(a, b); }
static inline bool operator<(__half a, __half b) { return __hlt(a, b); }
static inline bool operator<=(__half a, __half b) { return __hle(a, b); }
static inline bool operator>(__half a, __half b) { return __hgt(a, b); }
static inline bool operator>=(__half a, __half b) { return __hge(a, b); }

#else /* C: storage only */
typedef struct __half {
    unsigned short __x;
} __half;
#endif

#endif
