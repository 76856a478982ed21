/*
 * CPU kernel for Cast: one vectorised loop per (source, destination) pair among f32, f64, the
 * integers and bool; f16/bf16 on either side go through f32 blocks. Casting to the same dtype is a
 * view of the input, not a copy.
 */
#include "backends/cpu/k_elementwise.h"

/* See k_elementwise_unary.c: lets the saturating float->int selects vectorise on AVX2. */
#pragma GCC optimize("no-trapping-math")

typedef void (*cast_fn)(const void *x, void *y, int64_t n);

/* Float to integer truncates toward zero. C leaves NaN and out-of-range values undefined (and numpy's
 * results for them differ by platform); here NaN gives 0 and the rest saturate to the dtype's range. */
#define CONV_FLT_INT(v, ST, DT, MIN, MAX)                                                         \
    ((v) != (v) ? (DT)0 : (v) <= (ST)(MIN) ? (DT)(MIN) : (v) >= (ST)(MAX) ? (DT)(MAX) : (DT)(v))
#define CONV_PLAIN_(v, ST, DT, MIN, MAX) ((DT)(v))
#define CONV_TO_BOOL_(v, ST, DT, MIN, MAX) ((DT)((v) != 0))
#define CONV_FLT_FLT CONV_PLAIN_
#define CONV_INT_FLT CONV_PLAIN_
#define CONV_INT_INT CONV_PLAIN_ /* two's complement wrap, as numpy's astype */
#define CONV_BOOL_FLT CONV_PLAIN_
#define CONV_BOOL_INT CONV_PLAIN_
#define CONV_FLT_BOOL CONV_TO_BOOL_
#define CONV_INT_BOOL CONV_TO_BOOL_
#define CONV_BOOL_BOOL CONV_TO_BOOL_

#define CAST_ONE_(sn, ST, sk, dn, DT, dk, DMIN, DMAX)                                             \
    WF__VEC static void cast_##sn##_##dn(const void *xv, void *yv, int64_t n)                    \
    {                                                                                            \
        const ST *x = xv;                                                                        \
        DT *y = yv;                                                                              \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                      \
        {                                                                                        \
            ST v = x[i];                                                                         \
            y[i] = CONV_##sk##_##dk(v, ST, DT, DMIN, DMAX);                                      \
        }                                                                                        \
    }
#define CAST_ENTRY_(sn, ST, sk, dn, DT, dk, DMIN, DMAX) [DT_##sn][DT_##dn] = cast_##sn##_##dn,

#define DT_f32 WF_F32
#define DT_f64 WF_F64
#define DT_i8 WF_I8
#define DT_u8 WF_U8
#define DT_i16 WF_I16
#define DT_i32 WF_I32
#define DT_i64 WF_I64
#define DT_b WF_BOOL

#define DSTS_(X, sn, ST, sk)                                                                      \
    X(sn, ST, sk, f32, float, FLT, 0, 0)                                                         \
    X(sn, ST, sk, f64, double, FLT, 0, 0)                                                        \
    X(sn, ST, sk, i8, int8_t, INT, INT8_MIN, INT8_MAX)                                           \
    X(sn, ST, sk, u8, uint8_t, INT, 0, UINT8_MAX)                                                \
    X(sn, ST, sk, i16, int16_t, INT, INT16_MIN, INT16_MAX)                                       \
    X(sn, ST, sk, i32, int32_t, INT, INT32_MIN, INT32_MAX)                                       \
    X(sn, ST, sk, i64, int64_t, INT, INT64_MIN, INT64_MAX)                                       \
    X(sn, ST, sk, b, uint8_t, BOOL, 0, 1)
#define SRCS_(X)                                                                                  \
    DSTS_(X, f32, float, FLT)                                                                    \
    DSTS_(X, f64, double, FLT)                                                                   \
    DSTS_(X, i8, int8_t, INT)                                                                    \
    DSTS_(X, u8, uint8_t, INT)                                                                   \
    DSTS_(X, i16, int16_t, INT)                                                                  \
    DSTS_(X, i32, int32_t, INT)                                                                  \
    DSTS_(X, i64, int64_t, INT)                                                                  \
    DSTS_(X, b, uint8_t, BOOL)

SRCS_(CAST_ONE_)

static const cast_fn g_cast[WF_NUM_DTYPES][WF_NUM_DTYPES] = {SRCS_(CAST_ENTRY_)};

typedef struct cast_job {
    const char *x;
    char *y;
    wf_dtype xt, yt;
} cast_job;

static bool is_half(wf_dtype t) { return t == WF_F16 || t == WF_BF16; }

#define CAST_BLOCK 1024

static void cast_range(void *arg, int64_t b, int64_t e)
{
    const cast_job *j = arg;
    size_t ex = wf_dtype_size(j->xt), ey = wf_dtype_size(j->yt);
    if (!is_half(j->xt) && !is_half(j->yt)) {
        g_cast[j->xt][j->yt](j->x + (size_t)b * ex, j->y + (size_t)b * ey, e - b);
        return;
    }
    /* Through f32: exact from f16/bf16, and to them it rounds twice only for f64 and large i64
     * sources (off by one half-ulp in rare ties). */
    float tmp[CAST_BLOCK];
    for (int64_t i = b; i < e; i += CAST_BLOCK) {
        int64_t m = e - i < CAST_BLOCK ? e - i : CAST_BLOCK;
        const char *xs = j->x + (size_t)i * ex;
        char *ys = j->y + (size_t)i * ey;
        if (is_half(j->xt))
            wf__ew_half_to_f32((const uint16_t *)xs, tmp, m, j->xt);
        else
            g_cast[j->xt][WF_F32](xs, tmp, m);
        if (is_half(j->yt))
            wf__ew_f32_to_half(tmp, (uint16_t *)ys, m, j->yt);
        else
            g_cast[WF_F32][j->yt](tmp, ys, m);
    }
}

wf_status *wf__ew_k_Cast(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_dtype to = (wf_dtype)wf__attr_i(k->op, k->attrs, "to");
    if (!wf__dtype_valid(to) || !wf__dtype_valid(x->dtype))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot cast %s to dtype %d", wf_dtype_name(x->dtype),
                             (int)to);
    if (to == x->dtype) return wf__kctx_output_view(k, 0, 0, x->rank, x->dims);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, to, x->rank, x->dims, &y));
    cast_job j = {x->data, y->data, x->dtype, to};
    if (x->size >= 2 * WF__EW_GRAIN)
        wf__parallel_for(k, x->size, WF__EW_GRAIN, cast_range, &j);
    else if (x->size > 0)
        cast_range(&j, 0, x->size);
    return NULL;
}
