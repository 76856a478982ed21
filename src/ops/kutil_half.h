/*
 * Host-side f16 / bf16 conversions and rounding shared by the device plugins: bits to float, float to
 * bits (nearest even, as the CPU's wf_f32_to_f16 / bf16 store), a double rounded to a float dtype (the
 * CPU's wf__ko_round, for scales formed on the host) and one element of any numeric dtype as a double.
 * Header-only and free of libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_HALF_H
#define WF_DEVICE_KUTIL_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "weft/weft.h"

static inline float wf__ku_h2f(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400u), (int)e - 25);
    return h & 0x8000u ? -v : v;
}

/* f32 to f16 bits, nearest even */
static inline uint16_t wf__ku_f2h(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) return (uint16_t)(sign | (uint16_t)rintf(fabsf(f) * 16777216.0f)); /* units of 2^-24 */
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float wf__ku_bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f32 to bf16 bits, nearest even, NaN kept quiet with its sign */
static inline uint16_t wf__ku_f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u)
                                           : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* v rounded to float dtype t; f64 and other dtypes keep it */
static inline double wf__ku_round_to(double v, wf_dtype t)
{
    if (t == WF_F32) return (double)(float)v;
    if (t == WF_F16) return (double)wf__ku_h2f(wf__ku_f2h((float)v));
    if (t == WF_BF16) return (double)wf__ku_bf2f(wf__ku_f2bf((float)v));
    return v;
}

/* Element i of a host buffer of any numeric dtype (bool as 0 / 1) as a double. */
static inline double wf__ku_load_f64(const void *p, wf_dtype t, int64_t i)
{
    switch (t) {
    case WF_F32: return ((const float *)p)[i];
    case WF_F64: return ((const double *)p)[i];
    case WF_F16: return wf__ku_h2f(((const uint16_t *)p)[i]);
    case WF_BF16: return wf__ku_bf2f(((const uint16_t *)p)[i]);
    case WF_I8: return ((const int8_t *)p)[i];
    case WF_U8: case WF_BOOL: return ((const uint8_t *)p)[i];
    case WF_I16: return ((const int16_t *)p)[i];
    case WF_I32: return ((const int32_t *)p)[i];
    case WF_I64: return (double)((const int64_t *)p)[i];
    default: return 0;
    }
}

#endif
