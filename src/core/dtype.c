/*
 * dtype names and sizes, IEEE half / bfloat16 conversion (round to nearest even), and generic element
 * access used by slow paths, tests and Cast.
 */
#include "core/core.h"

#include <math.h>

static const struct {
    const char *name, *numpy;
    size_t size;
} g_dtypes[WF_NUM_DTYPES] = {
    [WF_DTYPE_INVALID] = {"invalid", "invalid", 0},
    [WF_F32] = {"f32", "float32", 4},   [WF_F64] = {"f64", "float64", 8},
    [WF_F16] = {"f16", "float16", 2},   [WF_BF16] = {"bf16", "bfloat16", 2},
    [WF_I8] = {"i8", "int8", 1},        [WF_U8] = {"u8", "uint8", 1},
    [WF_I16] = {"i16", "int16", 2},     [WF_I32] = {"i32", "int32", 4},
    [WF_I64] = {"i64", "int64", 8},     [WF_BOOL] = {"bool", "bool", 1},
    [WF_STRING] = {"string", "bytes", 16}, /* the per-element record; the payload follows the records */
};

bool wf__dtype_valid(wf_dtype t) { return t > WF_DTYPE_INVALID && t < WF_NUM_DTYPES; }
size_t wf_dtype_size(wf_dtype t) { return wf__dtype_valid(t) ? g_dtypes[t].size : 0; }
const char *wf_dtype_name(wf_dtype t) { return wf__dtype_valid(t) ? g_dtypes[t].name : "invalid"; }
bool wf__dtype_is_float(wf_dtype t) { return wf__dtype_valid(t) && (WF__DT_BIT(t) & WF__DT_FLOATS); }
bool wf__dtype_is_int(wf_dtype t) { return wf__dtype_valid(t) && (WF__DT_BIT(t) & WF__DT_INTS); }

wf_status *wf_dtype_from_name(const char *name, wf_dtype *out)
{
    for (int t = 1; t < WF_NUM_DTYPES; t++) {
        if (name && (!strcmp(name, g_dtypes[t].name) || !strcmp(name, g_dtypes[t].numpy))) {
            *out = (wf_dtype)t;
            return NULL;
        }
    }
    return wf__status(WF_INVALID_ARGUMENT,
                      "unknown dtype '%s' (expected one of f32 f64 f16 bf16 i8 u8 i16 i32 i64 bool string)",
                      name ? name : "(null)");
}

uint16_t wf_f32_to_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00u); /* overflow (>= 65536) or inf */
    if (a < 0x38800000u) {
        /* Subnormal or zero in half: scale into the 10-bit mantissa with round to nearest even. */
        if (a < 0x33000000u) return (uint16_t)sign; /* below half of the smallest subnormal */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14 + (112 - e) ... puts the value in units of 2^-24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t h = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* may carry into the exponent: correct */
    return (uint16_t)(sign | h);
}

float wf_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {
        if (m == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int shift = 0;
            while (!(m & 0x400u)) {
                m <<= 1;
                shift++;
            }
            u = sign | ((uint32_t)(113 - shift) << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        u = sign | 0x7f800000u | (m << 13);
    } else {
        u = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t wf_f32_to_bf16(float x) { return wf__f2bf(x); }
float wf_bf16_to_f32(uint16_t h) { return wf__bf2f(h); }

static inline __attribute__((always_inline)) double load_f64_c(const void *p, wf_dtype t, int64_t i);
static inline __attribute__((always_inline)) void store_f64_c(void *p, wf_dtype t, int64_t i, double v);

double wf__load_f64(const void *p, wf_dtype t, int64_t i) { return load_f64_c(p, t, i); }
void wf__store_f64(void *p, wf_dtype t, int64_t i, double v) { store_f64_c(p, t, i, v); }

static inline __attribute__((always_inline)) double load_f64_c(const void *p, wf_dtype t, int64_t i)
{
    switch (t) {
    case WF_F32: return ((const float *)p)[i];
    case WF_F64: return ((const double *)p)[i];
    case WF_F16: return wf__h2f(((const uint16_t *)p)[i]);
    case WF_BF16: return wf__bf2f(((const uint16_t *)p)[i]);
    case WF_I8: return ((const int8_t *)p)[i];
    case WF_U8: return ((const uint8_t *)p)[i];
    case WF_I16: return ((const int16_t *)p)[i];
    case WF_I32: return ((const int32_t *)p)[i];
    case WF_I64: return (double)((const int64_t *)p)[i];
    case WF_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0;
    }
}

int64_t wf__load_i64(const void *p, wf_dtype t, int64_t i)
{
    switch (t) {
    case WF_I8: return ((const int8_t *)p)[i];
    case WF_U8: return ((const uint8_t *)p)[i];
    case WF_I16: return ((const int16_t *)p)[i];
    case WF_I32: return ((const int32_t *)p)[i];
    case WF_I64: return ((const int64_t *)p)[i];
    case WF_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: {
        double d = wf__load_f64(p, t, i);
        if (d != d) return 0;
        if (d >= 9.2233720368547758e18) return INT64_MAX;
        if (d <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)d;
    }
    }
}

static inline __attribute__((always_inline)) void store_f64_c(void *p, wf_dtype t, int64_t i, double v)
{
    switch (t) {
    case WF_F32: ((float *)p)[i] = (float)v; break;
    case WF_F64: ((double *)p)[i] = v; break;
    case WF_F16: ((uint16_t *)p)[i] = wf__f2h((float)v); break;
    case WF_BF16: ((uint16_t *)p)[i] = wf__f2bf((float)v); break;
    case WF_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: {
        /* float -> int truncates toward zero; out-of-range values wrap through int64 like C casts
         * of in-range int64 values do. NaN becomes 0. */
        int64_t x = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX
                               : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
        switch (t) {
        case WF_I8: ((int8_t *)p)[i] = (int8_t)x; break;
        case WF_U8: ((uint8_t *)p)[i] = (uint8_t)x; break;
        case WF_I16: ((int16_t *)p)[i] = (int16_t)x; break;
        case WF_I32: ((int32_t *)p)[i] = (int32_t)x; break;
        case WF_I64: ((int64_t *)p)[i] = x; break;
        default: break;
        }
    }
    }
}

static void store_i64(void *p, wf_dtype t, int64_t i, int64_t x)
{
    switch (t) {
    case WF_I8: ((int8_t *)p)[i] = (int8_t)x; break;
    case WF_U8: ((uint8_t *)p)[i] = (uint8_t)x; break;
    case WF_I16: ((int16_t *)p)[i] = (int16_t)x; break;
    case WF_I32: ((int32_t *)p)[i] = (int32_t)x; break;
    case WF_I64: ((int64_t *)p)[i] = x; break;
    case WF_BOOL: ((uint8_t *)p)[i] = x != 0; break;
    default: wf__store_f64(p, t, i, (double)x); break;
    }
}

/* The common pairs through double as one loop each (the element functions' switches folded away, so
 * the loops vectorise), the same values as the element by element form: the f64 copies that the general
 * CPU kernels widen into and narrow from took a call and two switches an element (TopK's widening of
 * 256 x 1024 f32 cost 1 ms, its sort 0.5). */
#define CONV_PAIR(S, D)                                                                                     \
    case S:                                                                                                \
        for (int64_t i = 0; i < n; i++) store_f64_c(dst, D, i, load_f64_c(src, S, i));                     \
        return true
#define CONV_TO(D)                                                                                          \
    switch (st) {                                                                                          \
        CONV_PAIR(WF_F32, D);                                                                              \
        CONV_PAIR(WF_F64, D);                                                                              \
        CONV_PAIR(WF_F16, D);                                                                              \
        CONV_PAIR(WF_BF16, D);                                                                             \
        CONV_PAIR(WF_I8, D);                                                                             \
        CONV_PAIR(WF_U8, D);                                                                               \
        CONV_PAIR(WF_I16, D);                                                                              \
        CONV_PAIR(WF_I32, D);                                                                              \
    default: return false;                                                                                 \
    }
#define CONV_FROM(S)                                                                                        \
    case S:                                                                                                \
        switch (dt) {                                                                                      \
            CONV_PAIR_D(S, WF_F16);                                                                        \
            CONV_PAIR_D(S, WF_BF16);                                                                       \
            CONV_PAIR_D(S, WF_I8);                                                                         \
            CONV_PAIR_D(S, WF_I16);                                                                        \
            CONV_PAIR_D(S, WF_I64);                                                                        \
        default: return false;                                                                             \
        }
#define CONV_PAIR_D(S, D)                                                                                   \
    case D:                                                                                                \
        for (int64_t i = 0; i < n; i++) store_f64_c(dst, D, i, load_f64_c(src, S, i));                     \
        return true
static bool convert_typed(const void *src, wf_dtype st, void *dst, wf_dtype dt, int64_t n)
{
    switch (dt) {
    case WF_F32: CONV_TO(WF_F32);
    case WF_F64: CONV_TO(WF_F64);
    case WF_I32: CONV_TO(WF_I32);
    case WF_U8: CONV_TO(WF_U8);
    default: break;
    }
    switch (st) {
        CONV_FROM(WF_F32);
        CONV_FROM(WF_F64);
    default: return false;
    }
}
#undef CONV_FROM
#undef CONV_PAIR_D
#undef CONV_PAIR
#undef CONV_TO

void wf__convert(const void *src, wf_dtype st, void *dst, wf_dtype dt, int64_t n)
{
    if (st == dt) {
        memcpy(dst, src, (size_t)n * wf_dtype_size(st));
        return;
    }
    if (st == WF_F32 && (dt == WF_F16 || dt == WF_BF16)) {
        wf__f32_to_half_n(src, dst, n, dt);
    } else if ((st == WF_F16 || st == WF_BF16) && dt == WF_F32) {
        wf__half_to_f32_n(src, dst, n, st);
    } else if (!wf__dtype_is_float(st) && !wf__dtype_is_float(dt)) {
        /* integer <-> integer/bool without a trip through double (exact for int64) */
        for (int64_t i = 0; i < n; i++) store_i64(dst, dt, i, wf__load_i64(src, st, i));
    } else if (dt == WF_BOOL) {
        for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = wf__load_f64(src, st, i) != 0;
    } else if (!wf__dtype_is_float(st) && wf__dtype_is_float(dt) && st == WF_I64) {
        for (int64_t i = 0; i < n; i++) wf__store_f64(dst, dt, i, (double)wf__load_i64(src, st, i));
    } else if (!convert_typed(src, st, dst, dt, n)) {
        for (int64_t i = 0; i < n; i++) wf__store_f64(dst, dt, i, wf__load_f64(src, st, i));
    }
}
