/*
 * OpenCL kernels of the unary elementwise ops (elementwise group: Neg ... Clip, Not) and of the math
 * group's unary ops (trigonometric, hyperbolic, IsNaN/IsInf, activations, Shrink, BitwiseNot). Two
 * programs, each built once per dtype; semantics follow src/backends/cpu/k_elementwise_unary.c and
 * k_math.c, with OpenCL's built-in math (never the native_ or fast-relaxed variants).
 */
#include <math.h>
#include <stdio.h>

#include "backends/opencl/ocl_elementwise.h"
#include "ops/kutil_elementwise.h"

/* Every unary kernel takes the same arguments: float parameters a, b, c (in PT) and integer ones
 * i0..i3, so one host path launches them all. v is the element in CT. */
#define UN_HEAD                                                                                                    \
    "#define UN(n, E) __kernel void k_##n(__global const ST *px, ulong xo, __global ST *py, ulong yo, "             \
    "PT pa, PT pb, PT pc, long i0, long i1, long i2, long i3) { ulong i = get_global_id(0); "                      \
    "CT v = LD(px, xo + i); STO(py, yo + i, (E)); }\n"                                                             \
    "#define UNB(n, E) __kernel void k_##n(__global const ST *px, ulong xo, __global uchar *py, ulong yo, "         \
    "PT pa, PT pb, PT pc, long i0, long i1, long i2, long i3) { ulong i = get_global_id(0); "                      \
    "CT v = LD(px, xo + i); py[yo + i] = (uchar)(E); }\n"

#define UN_LINE_(n, op, e) "UN(" #n ", " e ")\n"

static const char *g_un_src =
    OCLEW_PRELUDE UN_HEAD
    OCLEW_FLT_HELPERS /* CLIPV serves the integer dtypes too */
    "#ifdef IS_FLT\n"
    OCLEW_UN_FLT(UN_LINE_)
    "#endif\n"
    "#ifdef IS_SINT\n"
    "UN(neg, (UT)0 - (UT)v)\n"
    "UN(abs, v < 0 ? (UT)0 - (UT)v : (UT)v)\n" /* the most negative value stays, as in numpy */
    "UN(sign, (v > 0) - (v < 0))\n"
    "UN(square, (UT)v * (UT)v)\n"
    "UN(relu, v < 0 ? (ST)0 : v)\n"
    "UN(clip, CLIPV(v, (ST)i0, (ST)i1))\n"
    "#endif\n"
    "#ifdef IS_U8\n"
    "UN(neg, 0u - (uint)v)\n"
    "UN(abs, v)\n"
    "UN(sign, v != 0)\n"
    "UN(square, (uint)v * (uint)v)\n"
    "UN(relu, v)\n"
    "UN(clip, CLIPV(v, (ST)i0, (ST)i1))\n"
    "#endif\n"
    "#ifdef IS_BOOL\n"
    "UN(not, v == 0)\n"
    "#endif\n";

static const char *g_math_src =
    OCLEW_PRELUDE UN_HEAD
    "#ifdef IS_FLT\n"
    "UN(sin, sin(v))\n"
    "UN(cos, cos(v))\n"
    "UN(tan, tan(v))\n"
    "UN(asin, asin(v))\n"
    "UN(acos, acos(v))\n"
    "UN(atan, atan(v))\n"
    "UN(sinh, sinh(v))\n"
    "UN(cosh, cosh(v))\n"
    "UN(asinh, asinh(v))\n"
    "UN(acosh, acosh(v))\n"
    "UN(atanh, atanh(v))\n"
    "UNB(isnan, v != v)\n"
    "UNB(isinf, (i0 && v == (CT)INFINITY) || (i1 && v == -(CT)INFINITY))\n"
    OCLEW_FLT_HELPERS
    OCLEW_ACT_FLT(UN_LINE_)
    /* pa = gamma, pb = gamma * alpha (the product rounded once, in double, as on the CPU) */
    "UN(selu, v > 0 ? pa * v : pb * expm1(v))\n"
    "UN(celu, v > 0 ? v : pa * expm1(v / pa))\n"
    "CT mish(CT v) { CT sp = (v > 0 ? v : (CT)0) + log1p(exp(-fabs(v))); return v * tanh(sp); }\n"
    "UN(mish, mish(v))\n"
    "UN(softsign, v / ((CT)1 + fabs(v)))\n"
    "UN(threlu, v > pa ? v : (CT)0)\n" /* NaN fails the comparison and gives 0 */
    "UN(shrink, v < -pa ? v + pb : v > pa ? v - pb : (CT)0)\n"
    "#endif\n"
    "#ifdef IS_INT\n"
    "UN(bnot, ~v)\n"
    /* Integer Shrink: trunc(v - b) exactly, with b = bi + f split on the host into its integer part
     * and the sign s of its fraction; the result saturates to the dtype like the CPU's conversion. */
    "long sub_frac(long v, long bi, long s) {\n"
    "  long w = sub_sat(v, bi);\n"
    "  if (s > 0 && w > 0) w -= 1;\n"
    "  if (s < 0 && w < 0) w += 1;\n"
    "  return w;\n"
    "}\n"
    /* i0: v < -lambd iff v < i0; i1: v > lambd iff v > i1 */
    "ST ishrink(long v, long lo, long hi, long bi, long s) {\n"
    "  long r = v < lo ? sub_frac(v, -bi, -s) : v > hi ? sub_frac(v, bi, s) : 0;\n"
    "  return (ST)(r < (long)TMIN ? (long)TMIN : r > (long)TMAX ? (long)TMAX : r);\n"
    "}\n"
    "UN(shrink, ishrink((long)v, i0, i1, i2, i3))\n"
    "#endif\n";

/* ---- host --------------------------------------------------------------------------------------------- */

typedef struct un_par {
    double a, b, c;
    int64_t i[4];
} un_par;

static wf_status *unary(wf__kctx *k, bool math, const char *name, bool out_bool, const un_par *p)
{
    const wf_tensor *x = k->in[0];
    wf_dtype t = x->dtype;
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, out_bool ? WF_BOOL : t, x->rank, x->dims, &y);
    if (s) return s;
    cl_kernel kern;
    if ((s = oclew_kernel(k, math ? "elementwise-math" : "elementwise-unary", math ? g_math_src : g_un_src, t, name,
                          &kern)))
        return s;
    un_par none = {0};
    if (!p) p = &none;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    /* PT is double in f64 programs and float everywhere else */
    cl_double da = p->a, db = p->b, dc = p->c;
    cl_float fa = (cl_float)p->a, fb = (cl_float)p->b, fc = (cl_float)p->c;
    cl_long i0 = p->i[0], i1 = p->i[1], i2 = p->i[2], i3 = p->i[3];
    bool dbl = t == WF_F64;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo),
                      dbl ? OCL_ARG(da) : OCL_ARG(fa), dbl ? OCL_ARG(db) : OCL_ARG(fb), dbl ? OCL_ARG(dc) : OCL_ARG(fc),
                      OCL_ARG(i0), OCL_ARG(i1), OCL_ARG(i2), OCL_ARG(i3)};
    size_t n = (size_t)y->size;
    return ocl_launch(k, kern, 11, args, 1, &n, NULL);
}

static double attr_f(const wf__kctx *k, const char *name)
{
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, name);
    return a ? a->f : 0.0;
}

static int64_t attr_i(const wf__kctx *k, const char *name)
{
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, name);
    return a ? a->i : 0;
}

#define PLAIN_(Op, math, name, out_bool)                                                                           \
    wf_status *oclew_k_##Op(wf__kctx *k) { return unary(k, math, name, out_bool, NULL); }
PLAIN_(Neg, false, "neg", false)
PLAIN_(Abs, false, "abs", false)
PLAIN_(Sign, false, "sign", false)
PLAIN_(Square, false, "square", false)
PLAIN_(Relu, false, "relu", false)
PLAIN_(Exp, false, "exp", false)
PLAIN_(Log, false, "log", false)
PLAIN_(Sqrt, false, "sqrt", false)
PLAIN_(Rsqrt, false, "rsqrt", false)
PLAIN_(Reciprocal, false, "recip", false)
PLAIN_(Tanh, false, "tanh", false)
PLAIN_(Sigmoid, false, "sigmoid", false)
PLAIN_(Erf, false, "erf", false)
PLAIN_(Softplus, false, "softplus", false)
PLAIN_(Floor, false, "floor", false)
PLAIN_(Ceil, false, "ceil", false)
PLAIN_(Round, false, "round", false)
PLAIN_(Not, false, "not", false)
PLAIN_(Sin, true, "sin", false)
PLAIN_(Cos, true, "cos", false)
PLAIN_(Tan, true, "tan", false)
PLAIN_(Asin, true, "asin", false)
PLAIN_(Acos, true, "acos", false)
PLAIN_(Atan, true, "atan", false)
PLAIN_(Sinh, true, "sinh", false)
PLAIN_(Cosh, true, "cosh", false)
PLAIN_(Asinh, true, "asinh", false)
PLAIN_(Acosh, true, "acosh", false)
PLAIN_(Atanh, true, "atanh", false)
PLAIN_(IsNaN, true, "isnan", true)
PLAIN_(HardSwish, true, "hswish", false)
PLAIN_(Mish, true, "mish", false)
PLAIN_(Softsign, true, "softsign", false)
PLAIN_(BitwiseNot, true, "bnot", false)
#undef PLAIN_

/* One float attribute into a. */
#define ALPHA_(Op, math, name, attr)                                                                               \
    wf_status *oclew_k_##Op(wf__kctx *k)                                                                           \
    {                                                                                                              \
        un_par p = {.a = attr_f(k, attr)};                                                                         \
        return unary(k, math, name, false, &p);                                                                    \
    }
ALPHA_(LeakyRelu, false, "leaky", "alpha")
ALPHA_(Elu, false, "elu", "alpha")
ALPHA_(Celu, true, "celu", "alpha")
ALPHA_(ThresholdedRelu, true, "threlu", "alpha")
ALPHA_(Swish, true, "swish", "alpha")
#undef ALPHA_

wf_status *oclew_k_Gelu(wf__kctx *k)
{
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, "approximate");
    bool tanh_form = a && a->s && !strcmp(a->s, "tanh");
    return unary(k, false, tanh_form ? "gelut" : "gelu", false, NULL);
}

wf_status *oclew_k_IsInf(wf__kctx *k)
{
    un_par p = {.i = {attr_i(k, "detect_positive") != 0, attr_i(k, "detect_negative") != 0}};
    return unary(k, true, "isinf", true, &p);
}

wf_status *oclew_k_HardSigmoid(wf__kctx *k)
{
    un_par p = {.a = attr_f(k, "alpha"), .b = attr_f(k, "beta")};
    return unary(k, true, "hsig", false, &p);
}

wf_status *oclew_k_Selu(wf__kctx *k)
{
    double alpha = attr_f(k, "alpha"), gamma = attr_f(k, "gamma");
    un_par p = {.a = gamma, .b = gamma * alpha};
    return unary(k, true, "selu", false, &p);
}

wf_status *oclew_k_Shrink(wf__kctx *k)
{
    double l = attr_f(k, "lambd"), b = attr_f(k, "bias");
    un_par p = {.a = l, .b = b};
    if (oclew_is_int(k->in[0]->dtype)) wf__ku_shrink_int(l, b, p.i);
    return unary(k, true, "shrink", false, &p);
}

/* Reads Clip's optional scalar bound i (inference has checked its dtype and shape). */
static wf_status *clip_bound(wf__kctx *k, int i, bool *given, double *d, int64_t *v)
{
    const wf_tensor *b = i < k->n_in ? k->in[i] : NULL;
    *given = b != NULL && b->size == 1;
    if (!*given) return NULL;
    void *buf;
    wf_status *s = oclew_read(k, b, &buf);
    if (s) return s;
    *d = oclew_load_f64(buf, b->dtype, 0);
    *v = oclew_load_i64(buf, b->dtype, 0);
    ocl_host->free(buf);
    return NULL;
}

wf_status *oclew_k_Clip(wf__kctx *k)
{
    wf_dtype t = k->in[0]->dtype;
    un_par p = {.a = -INFINITY, .b = INFINITY};
    switch (t) {
    case WF_I8: p.i[0] = INT8_MIN; p.i[1] = INT8_MAX; break;
    case WF_U8: p.i[0] = 0; p.i[1] = UINT8_MAX; break;
    case WF_I16: p.i[0] = INT16_MIN; p.i[1] = INT16_MAX; break;
    case WF_I32: p.i[0] = INT32_MIN; p.i[1] = INT32_MAX; break;
    default: p.i[0] = INT64_MIN; p.i[1] = INT64_MAX; break;
    }
    bool given;
    double d;
    int64_t v;
    wf_status *s = clip_bound(k, 1, &given, &d, &v);
    if (s) return s;
    if (given) {
        p.a = d;
        p.i[0] = v;
    }
    if ((s = clip_bound(k, 2, &given, &d, &v))) return s;
    if (given) {
        p.b = d;
        p.i[1] = v;
    }
    return unary(k, false, "clip", false, &p);
}
