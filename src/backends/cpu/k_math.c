/*
 * CPU kernels for the unary ops of ops_math.c (trigonometric, hyperbolic, IsNaN/IsInf, activations,
 * Shrink, BitwiseNot) and the kernel table of the whole math group. f16/bf16 run the f32 loops over
 * blocks converted to f32 and back; f64 uses libm in double.
 */
#include "backends/cpu/k_math.h"

#include <math.h>

/* Selects with floating-point arms (HardSigmoid's clamps, Shrink) only if-convert, and so vectorise,
 * when GCC may evaluate both arms; weft never unmasks floating-point exceptions. */
#pragma GCC optimize("no-trapping-math")

#include "backends/cpu/k_vmath.h" /* after the pragma, or its functions would not inline */

#define UNUSED_ __attribute__((unused))

/* Per-node constants: a, b, c are the op's float attributes; neg/pos IsInf's flags. */
typedef struct mu_params {
    double a, b, c;
    bool neg, pos;
} mu_params;

typedef void (*mu_fn)(const void *x, void *y, int64_t n, const mu_params *p);

typedef struct mu_op {
    mu_fn fn[WF_NUM_DTYPES]; /* f16/bf16 stay NULL: they run fn[WF_F32] on converted blocks */
    int64_t grain;
    bool out_bool;
} mu_op;

/* V: vectorised and cloned per ISA; S: a plain loop for bodies that call libm. The loop copies the
 * parameters so that stores through y cannot be assumed to change them. */
#define MU_V(name, T, TO, EXPR)                                                                   \
    WF__VEC static void name(const void *xv, void *yv, int64_t n, const mu_params *p)            \
    {                                                                                            \
        const mu_params pp = *p;                                                                 \
        const T *x = xv;                                                                         \
        TO *y = yv;                                                                              \
        (void)pp;                                                                                \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) { T v = x[i]; y[i] = (TO)(EXPR); }   \
    }
#define MU_S(name, T, TO, EXPR)                                                                   \
    static void name(const void *xv, void *yv, int64_t n, const mu_params *p)                    \
    {                                                                                            \
        const mu_params pp = *p;                                                                 \
        const T *x = xv;                                                                         \
        TO *y = yv;                                                                              \
        (void)pp;                                                                                \
        for (int64_t i = 0; i < n; i++) { T v = x[i]; y[i] = (TO)(EXPR); }                       \
    }

/* One f32 and one f64 body; the f32 body sees `F(name)` as the float libm function. */
#define MU_FLT(mac, base, EXPR_F, EXPR_D)                                                         \
    mac(base##_f32, float, float, EXPR_F)                                                        \
    mac(base##_f64, double, double, EXPR_D)
#define FLT_FNS(base) [WF_F32] = base##_f32, [WF_F64] = base##_f64

/* ---- trigonometric and hyperbolic ------------------------------------------------------------- */

#define LIBM_(base, fnf, fnd)                                                                     \
    MU_FLT(MU_S, base, fnf(v), fnd(v))                                                           \
    static const mu_op op_##base = {{FLT_FNS(base)}, WF__EW_GRAIN_HEAVY, false};
LIBM_(tan, tanf, tan)
LIBM_(sinh, sinhf, sinh)
LIBM_(cosh, coshf, cosh)
LIBM_(asinh, asinhf, asinh)
LIBM_(acosh, acoshf, acosh)
LIBM_(atanh, atanhf, atanh)
#undef LIBM_

/* Sin and Cos in f32: the vector forms of k_vmath.h over blocks, then libm for the elements past their
 * reduction's range (|x| > 2^19, Inf, NaN), read from x before the block is stored (y may be x). */
#define SC_BLOCK 256
#define SINCOS_(base, vf, lf)                                                                     \
    WF__VEC static void base##_blk(const float *x, float *t, int64_t n)                          \
    {                                                                                            \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) t[i] = vf(x[i]);                     \
    }                                                                                            \
    static void base##_f32(const void *xv, void *yv, int64_t n, const mu_params *p)              \
    {                                                                                            \
        const float *x = xv;                                                                     \
        float *y = yv, t[SC_BLOCK];                                                              \
        (void)p;                                                                                 \
        for (int64_t b = 0; b < n; b += SC_BLOCK) {                                              \
            int64_t m = n - b < SC_BLOCK ? n - b : SC_BLOCK;                                     \
            base##_blk(x + b, t, m);                                                             \
            for (int64_t i = 0; i < m; i++)                                                      \
                if (!ew_sincos_ok(x[b + i])) t[i] = lf(x[b + i]);                                \
            memcpy(y + b, t, (size_t)m * sizeof *t);                                             \
        }                                                                                        \
    }                                                                                            \
    MU_S(base##_f64, double, double, base(v))                                                    \
    static const mu_op op_##base = {{FLT_FNS(base)}, WF__EW_GRAIN_HEAVY, false};
SINCOS_(sin, ew_sinf, sinf)
SINCOS_(cos, ew_cosf, cosf)
#undef SINCOS_

/* Asin, Acos and Atan in f32: the vector forms of k_vmath.h, valid for every input */
#define VTRIG_(base, vf)                                                                          \
    MU_V(base##_f32, float, float, vf(v))                                                        \
    MU_S(base##_f64, double, double, base(v))                                                    \
    static const mu_op op_##base = {{FLT_FNS(base)}, WF__EW_GRAIN_HEAVY, false};
VTRIG_(asin, ew_asinf)
VTRIG_(acos, ew_acosf)
VTRIG_(atan, ew_atanf)
#undef VTRIG_

/* ---- classification ------------------------------------------------------------------------------ */

MU_V(isnan_f32, float, uint8_t, v != v)
MU_V(isnan_f64, double, uint8_t, v != v)
static const mu_op op_isnan = {{FLT_FNS(isnan)}, WF__EW_GRAIN, true};

MU_V(isinf_f32, float, uint8_t, (pp.pos && v == INFINITY) || (pp.neg && v == -INFINITY))
MU_V(isinf_f64, double, uint8_t, (pp.pos && v == INFINITY) || (pp.neg && v == -INFINITY))
static const mu_op op_isinf = {{FLT_FNS(isinf)}, WF__EW_GRAIN, true};

/* ---- activations --------------------------------------------------------------------------------- */

/* Clamps written as selects so that NaN passes through, as numpy.maximum/minimum do in ONNX's
 * reference. */
static inline float clamp01_f(float t) { t = t > 1.0f ? 1.0f : t; return t < 0.0f ? 0.0f : t; }
static inline double clamp01_d(double t) { t = t > 1.0 ? 1.0 : t; return t < 0.0 ? 0.0 : t; }

MU_FLT(MU_V, hsig, clamp01_f((float)pp.a * v + (float)pp.b), clamp01_d(pp.a * v + pp.b))
static const mu_op op_hsig = {{FLT_FNS(hsig)}, WF__EW_GRAIN, false};

MU_FLT(MU_V, hswish, v * clamp01_f(v * (1.0f / 6.0f) + 0.5f), v * clamp01_d(v * (1.0 / 6.0) + 0.5))
static const mu_op op_hswish = {{FLT_FNS(hswish)}, WF__EW_GRAIN, false};

/* gamma * alpha * (e^x - 1) through expm1: no cancellation for small negative x. */
MU_V(selu_f32, float, float, v > 0 ? (float)pp.c * v : (float)(pp.c * pp.a) * ew_expm1f(v))
MU_S(selu_f64, double, double, v > 0 ? pp.c * v : pp.c * pp.a * expm1(v))
static const mu_op op_selu = {{FLT_FNS(selu)}, WF__EW_GRAIN_HEAVY, false};

/* max(0, x) + min(0, alpha * (e^(x/alpha) - 1)) is x for x > 0 and the second term otherwise, for
 * either sign of alpha; NaN takes the second arm and stays NaN. */
MU_V(celu_vf32, float, float, v > 0 ? v : (float)pp.a * ew_expm1f(v / (float)pp.a))
MU_FLT(MU_S, celu, v > 0 ? v : (float)pp.a * expm1f(v / (float)pp.a), v > 0 ? v : pp.a * expm1(v / pp.a))
/* the vector expm1 takes arguments up to 0 here: alpha > 0 (a negative alpha sends positive x / alpha to it) */
static void celu_any_f32(const void *x, void *y, int64_t n, const mu_params *p)
{
    if (p->a > 0) celu_vf32(x, y, n, p);
    else celu_f32(x, y, n, p);
}
static const mu_op op_celu = {{[WF_F32] = celu_any_f32, [WF_F64] = celu_f64}, WF__EW_GRAIN_HEAVY, false};

/* softplus as max(x, 0) + log1p(e^-|x|): never overflows, exact at both ends. */
static inline float mish_f(float v) { return v * ew_tanhf(ew_softplusf(v)); }
static inline double mish_d(double v)
{
    double sp = (v > 0 ? v : 0.0) + log1p(exp(-fabs(v)));
    return v * tanh(sp);
}
MU_V(mish_f32, float, float, mish_f(v))
MU_S(mish_f64, double, double, mish_d(v))
static const mu_op op_mish = {{FLT_FNS(mish)}, WF__EW_GRAIN_HEAVY, false};

MU_FLT(MU_V, softsign, v / (1.0f + fabsf(v)), v / (1.0 + fabs(v)))
static const mu_op op_softsign = {{FLT_FNS(softsign)}, WF__EW_GRAIN, false};

/* NaN fails the comparison and gives 0, as np.where(x > alpha, x, 0). */
MU_FLT(MU_V, threlu, v > (float)pp.a ? v : 0.0f, v > pp.a ? v : 0.0)
static const mu_op op_threlu = {{FLT_FNS(threlu)}, WF__EW_GRAIN, false};

/* x * sigmoid(alpha * x) as x / (1 + e^(-alpha x)): e^... overflowing to inf gives -0 or 0, the limit. */
static void swish_f32(const void *xv, void *yv, int64_t n, const mu_params *p)
{
    wf__ew_swish_f32(xv, yv, n, (float)p->a);
}
MU_S(swish_f64, double, double, v / (1.0 + exp(-pp.a * v)))
static const mu_op op_swish = {{FLT_FNS(swish)}, WF__EW_GRAIN_HEAVY, false};

/* Shrink: a = lambd, b = bias. Integer inputs compute in double and convert back like ONNX's
 * reference (.astype), saturating instead of the undefined out-of-range conversion; with bias 0 the
 * kept values are returned exactly (i64 beyond 2^53 included). */
MU_FLT(MU_V, shrink, v < -(float)pp.a ? v + (float)pp.b : v > (float)pp.a ? v - (float)pp.b : 0.0f,
       v < -pp.a ? v + pp.b : v > pp.a ? v - pp.b : 0.0)

static inline int64_t sat_i64(double r, int64_t lo, int64_t hi)
{
    if (r != r) return 0;
    if (r <= (double)lo) return lo;
    if (r >= (double)hi) return hi; /* (double)INT64_MAX rounds up to 2^63, so >= catches it */
    return (int64_t)r;
}
#define SHRINK_INT_(name, T, LO, HI)                                                              \
    static void name(const void *xv, void *yv, int64_t n, const mu_params *p)                    \
    {                                                                                            \
        const double l = p->a, b = p->b;                                                         \
        const T *x = xv;                                                                         \
        T *y = yv;                                                                               \
        for (int64_t i = 0; i < n; i++) {                                                        \
            T v = x[i];                                                                          \
            double d = (double)v;                                                                \
            if (d < -l) y[i] = b == 0 ? v : (T)sat_i64(d + b, LO, HI);                          \
            else if (d > l) y[i] = b == 0 ? v : (T)sat_i64(d - b, LO, HI);                      \
            else y[i] = 0;                                                                       \
        }                                                                                        \
    }
SHRINK_INT_(shrink_i8, int8_t, INT8_MIN, INT8_MAX)
SHRINK_INT_(shrink_u8, uint8_t, 0, UINT8_MAX)
SHRINK_INT_(shrink_i16, int16_t, INT16_MIN, INT16_MAX)
SHRINK_INT_(shrink_i32, int32_t, INT32_MIN, INT32_MAX)
SHRINK_INT_(shrink_i64, int64_t, INT64_MIN, INT64_MAX)
static const mu_op op_shrink = {{FLT_FNS(shrink), [WF_I8] = shrink_i8, [WF_U8] = shrink_u8, [WF_I16] = shrink_i16,
                                 [WF_I32] = shrink_i32, [WF_I64] = shrink_i64},
                                WF__EW_GRAIN, false};

/* ---- bitwise ------------------------------------------------------------------------------------- */

MU_V(bnot_1, uint8_t, uint8_t, ~v)
MU_V(bnot_2, uint16_t, uint16_t, ~v)
MU_V(bnot_4, uint32_t, uint32_t, ~v)
MU_V(bnot_8, uint64_t, uint64_t, ~v)
static const mu_op op_bnot = {{[WF_I8] = bnot_1, [WF_U8] = bnot_1, [WF_I16] = bnot_2, [WF_I32] = bnot_4,
                               [WF_I64] = bnot_8},
                              WF__EW_GRAIN, false};

/* ---- driver -------------------------------------------------------------------------------------- */

typedef struct mu_job {
    const mu_op *op;
    mu_fn fn;
    mu_params p;
    const char *x;
    char *y;
    wf_dtype t;
    size_t es, eo;
} mu_job;

#define HALF_BLOCK 1024

static void mu_range(void *arg, int64_t b, int64_t e)
{
    const mu_job *j = arg;
    if (j->t != WF_F16 && j->t != WF_BF16) {
        j->fn(j->x + (size_t)b * j->es, j->y + (size_t)b * j->eo, e - b, &j->p);
        return;
    }
    float tmp[HALF_BLOCK];
    for (int64_t i = b; i < e; i += HALF_BLOCK) {
        int64_t m = e - i < HALF_BLOCK ? e - i : HALF_BLOCK;
        wf__ew_half_to_f32((const uint16_t *)j->x + i, tmp, m, j->t);
        if (j->op->out_bool) {
            j->fn(tmp, (uint8_t *)j->y + i, m, &j->p);
        } else {
            j->fn(tmp, tmp, m, &j->p);
            wf__ew_f32_to_half(tmp, (uint16_t *)j->y + i, m, j->t);
        }
    }
}

static wf_status *run_unary(wf__kctx *k, const mu_op *op, const mu_params *p)
{
    const wf_tensor *x = k->in[0];
    wf_dtype t = x->dtype;
    bool half = t == WF_F16 || t == WF_BF16;
    mu_fn fn = wf__dtype_valid(t) ? op->fn[half ? WF_F32 : t] : NULL;
    if (!fn) return wf__kctx_fail(k, WF_UNIMPLEMENTED, "no CPU kernel for dtype %s", wf_dtype_name(t));
    wf_dtype ot = op->out_bool ? WF_BOOL : t;
    wf_tensor *y;
    WF__TRY(wf__kctx_output_reuse(k, 0, op->out_bool ? -1 : 0, ot, x->rank, x->dims, &y, NULL));
    mu_job j = {op, fn, {0}, x->data, y->data, t, wf_dtype_size(t), wf_dtype_size(ot)};
    if (p) j.p = *p;
    if (x->size >= 2 * op->grain)
        wf__parallel_for(k, x->size, op->grain, mu_range, &j);
    else if (x->size > 0)
        mu_range(&j, 0, x->size);
    return NULL;
}

static double attr_f(const wf__kctx *k, const char *name) { return wf__attr_f(k->op, k->attrs, name); }

#define PLAIN_(Op, tbl) static wf_status *k_##Op(wf__kctx *k) { return run_unary(k, &tbl, NULL); }
PLAIN_(Sin, op_sin)
PLAIN_(Cos, op_cos)
PLAIN_(Tan, op_tan)
PLAIN_(Asin, op_asin)
PLAIN_(Acos, op_acos)
PLAIN_(Atan, op_atan)
PLAIN_(Sinh, op_sinh)
PLAIN_(Cosh, op_cosh)
PLAIN_(Asinh, op_asinh)
PLAIN_(Acosh, op_acosh)
PLAIN_(Atanh, op_atanh)
PLAIN_(IsNaN, op_isnan)
PLAIN_(HardSwish, op_hswish)
PLAIN_(Mish, op_mish)
PLAIN_(Softsign, op_softsign)
PLAIN_(BitwiseNot, op_bnot)
#undef PLAIN_

/* One float attribute into p.a. */
#define ALPHA_(Op, tbl, attr)                                                                     \
    static wf_status *k_##Op(wf__kctx *k)                                                        \
    {                                                                                            \
        mu_params p = {.a = attr_f(k, attr)};                                                    \
        return run_unary(k, &tbl, &p);                                                           \
    }
ALPHA_(Celu, op_celu, "alpha")
ALPHA_(ThresholdedRelu, op_threlu, "alpha")
ALPHA_(Swish, op_swish, "alpha")
#undef ALPHA_

static wf_status *k_IsInf(wf__kctx *k)
{
    mu_params p = {.neg = wf__attr_i(k->op, k->attrs, "detect_negative") != 0,
                   .pos = wf__attr_i(k->op, k->attrs, "detect_positive") != 0};
    return run_unary(k, &op_isinf, &p);
}

static wf_status *k_HardSigmoid(wf__kctx *k)
{
    mu_params p = {.a = attr_f(k, "alpha"), .b = attr_f(k, "beta")};
    return run_unary(k, &op_hsig, &p);
}

static wf_status *k_Selu(wf__kctx *k)
{
    mu_params p = {.a = attr_f(k, "alpha"), .c = attr_f(k, "gamma")};
    return run_unary(k, &op_selu, &p);
}

static wf_status *k_Shrink(wf__kctx *k)
{
    mu_params p = {.a = attr_f(k, "lambd"), .b = attr_f(k, "bias")};
    return run_unary(k, &op_shrink, &p);
}

/* ---- the loops for generated kernels (k_fused.c) --------------------------------------------------- */

_Static_assert(sizeof(mu_params) <= sizeof(((wf__ew_unary *)0)->p), "mu_params fits wf__ew_unary");

static void mu_call(const wf__ew_unary *u, const float *x, float *y, int64_t n)
{
    mu_params p;
    memcpy(&p, u->p, sizeof p);
    ((mu_fn)u->impl)(x, y, n, &p);
}

bool wf__km_unary_f32(const char *op, double alpha, double beta, wf__ew_unary *u)
{
    const mu_op *f = !strcmp(op, "Swish")         ? &op_swish
                     : !strcmp(op, "HardSwish")   ? &op_hswish
                     : !strcmp(op, "HardSigmoid") ? &op_hsig
                                                  : NULL;
    if (!f) return false;
    mu_params p = {.a = alpha, .b = beta};
    memset(u, 0, sizeof *u);
    memcpy(u->p, &p, sizeof p);
    u->impl = (void (*)(void))f->fn[WF_F32];
    u->call = mu_call;
    return true;
}

/* ---- table ---------------------------------------------------------------------------------------- */

#define KU_(Op, mask) {#Op, "CPU", mask, 0, k_##Op, NULL, WF__K_INPLACE},
#define KX_(Op, mask, fl) {#Op, "CPU", mask, 0, wf__km_k_##Op, NULL, fl},

const wf__kernel_def wf__cpu_kernels_math[] = {
    KU_(Sin, WF__DT_FLOATS)
    KU_(Cos, WF__DT_FLOATS)
    KU_(Tan, WF__DT_FLOATS)
    KU_(Asin, WF__DT_FLOATS)
    KU_(Acos, WF__DT_FLOATS)
    KU_(Atan, WF__DT_FLOATS)
    KU_(Sinh, WF__DT_FLOATS)
    KU_(Cosh, WF__DT_FLOATS)
    KU_(Asinh, WF__DT_FLOATS)
    KU_(Acosh, WF__DT_FLOATS)
    KU_(Atanh, WF__DT_FLOATS)
    {"IsNaN", "CPU", WF__DT_FLOATS, 0, k_IsNaN, NULL, 0},
    {"IsInf", "CPU", WF__DT_FLOATS, 0, k_IsInf, NULL, 0},
    KU_(HardSigmoid, WF__DT_FLOATS)
    KU_(HardSwish, WF__DT_FLOATS)
    KU_(Selu, WF__DT_FLOATS)
    KU_(Celu, WF__DT_FLOATS)
    KU_(Mish, WF__DT_FLOATS)
    KU_(Softsign, WF__DT_FLOATS)
    KU_(ThresholdedRelu, WF__DT_FLOATS)
    KU_(Shrink, WF__DT_NUMERIC)
    KU_(Swish, WF__DT_FLOATS)
    KU_(BitwiseNot, WF__DT_INTS)
    KX_(PRelu, WF__DT_NUMERIC, WF__K_INPLACE)
    KX_(BitShift, WF__DT_INTS, WF__K_INPLACE)
    KX_(BitwiseAnd, WF__DT_INTS, WF__K_INPLACE)
    KX_(BitwiseOr, WF__DT_INTS, WF__K_INPLACE)
    KX_(BitwiseXor, WF__DT_INTS, WF__K_INPLACE)
    KX_(Sum, WF__DT_FLOATS, WF__K_INPLACE)
    KX_(Mean, WF__DT_FLOATS, WF__K_INPLACE)
    KX_(Max, WF__DT_NUMERIC, WF__K_INPLACE)
    KX_(Min, WF__DT_NUMERIC, WF__K_INPLACE)
    KX_(Hardmax, WF__DT_FLOATS, 0)
    KX_(LpNormalization, WF__DT_FLOATS, 0)
    KX_(Det, WF__DT_FLOATS, 0)
    {0},
};
