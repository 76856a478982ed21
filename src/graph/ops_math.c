/*
 * More math ops under their ONNX names and semantics (latest opset): trigonometric and hyperbolic
 * functions, IsNaN/IsInf, the extra activations, PRelu, bitwise ops, Hardmax, LpNormalization, the
 * variadic Sum/Mean/Max/Min and Det. Their CPU kernels are in backends/cpu/k_math*.c.
 */
#include "graph/grad.h"
#include "graph/op.h"

#include <stdio.h>

#define SB 160 /* wf__shape_str buffer */

static const char *family(uint32_t mask)
{
    if (mask == WF__DT_FLOATS) return "floating-point (f32, f64, f16, bf16)";
    if (mask == WF__DT_NUMERIC) return "numeric (floating-point or integer, not bool)";
    if (mask == WF__DT_INTS) return "integer (i8, u8, i16, i32, i64)";
    return "the listed";
}

static wf_status *need_dtype(const wf__infer_ctx *c, int idx, uint32_t mask)
{
    wf_dtype t = c->in[idx].dtype;
    if (wf__dtype_valid(t) && (WF__DT_BIT(t) & mask)) return NULL;
    return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s is defined for %s inputs only; input %d is %s",
                          c->op->name, family(mask), idx, wf_dtype_name(t));
}

/* Every input must have input 0's dtype, which must be in mask. */
static wf_status *same_dtypes(const wf__infer_ctx *c, uint32_t mask)
{
    WF__TRY(need_dtype(c, 0, mask));
    for (int i = 1; i < c->n_in; i++)
        if (c->in[i].dtype != c->in[0].dtype)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                  "input dtypes differ: %s and %s (inputs 0 and %d must have the same dtype)",
                                  wf_dtype_name(c->in[0].dtype), wf_dtype_name(c->in[i].dtype), i);
    return NULL;
}

static wf_status *check_01(const wf__infer_ctx *c, const char *attr)
{
    int64_t v = WF__IC_I(c, attr);
    if (v == 0 || v == 1) return NULL;
    return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute '%s' must be 0 or 1, got %lld", attr, (long long)v);
}

/* ---- elementwise -------------------------------------------------------------------------------- */

static wf_status *unary(wf__infer_ctx *c, uint32_t mask)
{
    WF__TRY(need_dtype(c, 0, mask));
    c->out[0] = c->in[0];
    return NULL;
}

static wf_status *infer_un_float(wf__infer_ctx *c) { return unary(c, WF__DT_FLOATS); }
static wf_status *infer_un_numeric(wf__infer_ctx *c) { return unary(c, WF__DT_NUMERIC); }
static wf_status *infer_un_int(wf__infer_ctx *c) { return unary(c, WF__DT_INTS); }

static wf_status *infer_isnan(wf__infer_ctx *c)
{
    WF__TRY(unary(c, WF__DT_FLOATS));
    c->out[0].dtype = WF_BOOL;
    return NULL;
}

static wf_status *infer_isinf(wf__infer_ctx *c)
{
    WF__TRY(check_01(c, "detect_negative"));
    WF__TRY(check_01(c, "detect_positive"));
    return infer_isnan(c);
}

/* Celu divides by alpha. */
static wf_status *infer_celu(wf__infer_ctx *c)
{
    if (WF__IC_F(c, "alpha") == 0.0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'alpha' must not be 0");
    return unary(c, WF__DT_FLOATS);
}

/* X and a slope that broadcasts to X in one direction (ONNX "unidirectional"): the output is X's shape. */
static wf_status *infer_prelu(wf__infer_ctx *c)
{
    WF__TRY(same_dtypes(c, WF__DT_NUMERIC));
    const wf__tinfo *x = &c->in[0], *s = &c->in[1];
    if (x->rank >= 0 && s->rank >= 0) {
        bool ok = s->rank <= x->rank;
        for (int d = 0; ok && d < s->rank; d++) {
            int64_t sd = s->dims[d], xd = x->dims[d + x->rank - s->rank];
            ok = sd == 1 || sd < 0 || xd < 0 || sd == xd;
        }
        if (!ok) {
            char a[SB], b[SB];
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "slope of shape %s does not broadcast to X of shape %s",
                                  wf__shape_str(s->rank, s->dims, b), wf__shape_str(x->rank, x->dims, a));
        }
    }
    c->out[0] = c->in[0];
    return NULL;
}

/* numpy broadcasting over all inputs. */
static wf_status *broadcast_all(wf__infer_ctx *c, wf_dtype dt)
{
    wf__tinfo acc = c->in[0];
    for (int i = 1; i < c->n_in; i++) {
        wf__tinfo next = {dt, -1, {0}};
        if (!wf__broadcast_tinfo(&acc, &c->in[i], &next.rank, next.dims)) {
            char a[SB], b[SB];
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shapes %s and %s (input %d) cannot be broadcast together",
                                  wf__shape_str(acc.rank, acc.dims, a),
                                  wf__shape_str(c->in[i].rank, c->in[i].dims, b), i);
        }
        for (int d = next.rank < 0 ? 0 : next.rank; d < WF_MAX_RANK; d++) next.dims[d] = -1;
        acc = next;
    }
    acc.dtype = dt;
    c->out[0] = acc;
    return NULL;
}

static wf_status *infer_bitwise(wf__infer_ctx *c)
{
    WF__TRY(same_dtypes(c, WF__DT_INTS));
    return broadcast_all(c, c->in[0].dtype);
}

static wf_status *infer_bitshift(wf__infer_ctx *c)
{
    const char *d = WF__IC_S(c, "direction");
    if (strcmp(d, "LEFT") && strcmp(d, "RIGHT"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"%s\"",
                              d);
    return infer_bitwise(c);
}

static wf_status *infer_variadic_float(wf__infer_ctx *c)
{
    WF__TRY(same_dtypes(c, WF__DT_FLOATS));
    return broadcast_all(c, c->in[0].dtype);
}

static wf_status *infer_variadic_numeric(wf__infer_ctx *c)
{
    WF__TRY(same_dtypes(c, WF__DT_NUMERIC));
    return broadcast_all(c, c->in[0].dtype);
}

/* ---- along an axis ------------------------------------------------------------------------------ */

static wf_status *check_axis(wf__infer_ctx *c)
{
    int64_t axis = WF__IC_I(c, "axis");
    int r = c->in[0].rank, norm;
    if (r == 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input must have rank >= 1 (it is a scalar)");
    if (r > 0 && !wf__norm_axis(axis, r, &norm))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for rank %d", (long long)axis, r);
    return NULL;
}

static wf_status *infer_hardmax(wf__infer_ctx *c)
{
    WF__TRY(unary(c, WF__DT_FLOATS));
    return check_axis(c);
}

static wf_status *infer_lpnorm(wf__infer_ctx *c)
{
    int64_t p = WF__IC_I(c, "p");
    if (p != 1 && p != 2)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'p' must be 1 or 2, got %lld", (long long)p);
    WF__TRY(unary(c, WF__DT_FLOATS));
    return check_axis(c);
}

static wf_status *infer_det(wf__infer_ctx *c)
{
    WF__TRY(need_dtype(c, 0, WF__DT_FLOATS));
    const wf__tinfo *x = &c->in[0];
    wf__tinfo *o = &c->out[0];
    o->dtype = x->dtype;
    o->rank = -1;
    for (int d = 0; d < WF_MAX_RANK; d++) o->dims[d] = -1;
    if (x->rank < 0) return NULL;
    char b[SB];
    if (x->rank < 2)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input must have shape [..., M, M], got %s",
                              wf__shape_str(x->rank, x->dims, b));
    int64_t m = x->dims[x->rank - 2], n = x->dims[x->rank - 1];
    if (m >= 0 && n >= 0 && m != n)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input must have square matrices [..., M, M], got %s",
                              wf__shape_str(x->rank, x->dims, b));
    o->rank = x->rank - 2;
    for (int d = 0; d < o->rank; d++) o->dims[d] = x->dims[d];
    return NULL;
}

/* ---- cost --------------------------------------------------------------------------------------- */

static double known_bytes(const wf__tinfo *t)
{
    int64_t n = wf__numel(t->rank, t->dims);
    return n > 0 ? (double)n * (double)wf_dtype_size(t->dtype) : 0;
}

/* sin, exp, log... cost a polynomial or a libm call: about ten flops per element. */
static void cost_transcendental(const wf__infer_ctx *c, double *flops, double *bytes)
{
    int64_t n = wf__numel(c->out[0].rank, c->out[0].dims);
    *flops = n > 0 ? 10.0 * (double)n : 0;
    *bytes = known_bytes(&c->out[0]) + known_bytes(&c->in[0]);
}

/* An LU factorisation per matrix: 2/3 M^3. */
static void cost_det(const wf__infer_ctx *c, double *flops, double *bytes)
{
    const wf__tinfo *x = &c->in[0];
    int64_t n = wf__numel(x->rank, x->dims);
    double m = x->rank >= 2 && x->dims[x->rank - 1] > 0 ? (double)x->dims[x->rank - 1] : 0;
    *flops = n > 0 && m > 0 ? (double)n * m * 2.0 / 3.0 : 0;
    *bytes = known_bytes(x) + known_bytes(&c->out[0]);
}

/* ---- table -------------------------------------------------------------------------------------- */

#define UN_(nm, fn) {.name = nm, .min_in = 1, .max_in = 1, .n_out = 1, .infer = fn, .flags = WF__OP_CHEAP}
#define UNX_(nm, fn)                                                                              \
    {.name = nm, .min_in = 1, .max_in = 1, .n_out = 1, .infer = fn, .cost = cost_transcendental,  \
     .flags = WF__OP_CHEAP}
#define ATTR_F(nm, v) {nm, WF_ATTR_FLOAT, .f = v}
#define BIN_(nm, fn) {.name = nm, .min_in = 2, .max_in = 2, .n_out = 1, .infer = fn, .flags = WF__OP_CHEAP}
#define VAR_(nm, fn) {.name = nm, .min_in = 1, .max_in = -1, .n_out = 1, .infer = fn, .flags = WF__OP_CHEAP, \
                      .grad = wf__grad_variadic}
#define UNXG_(nm, fn)                                                                             \
    {.name = nm, .min_in = 1, .max_in = 1, .n_out = 1, .infer = fn, .cost = cost_transcendental,  \
     .flags = WF__OP_CHEAP, .grad = wf__grad_unary}

const wf__op_def wf__ops_math[] = {
    UNXG_("Sin", infer_un_float),
    UNXG_("Cos", infer_un_float),
    UNXG_("Tan", infer_un_float),
    UNXG_("Asin", infer_un_float),
    UNXG_("Acos", infer_un_float),
    UNXG_("Atan", infer_un_float),
    UNXG_("Sinh", infer_un_float),
    UNXG_("Cosh", infer_un_float),
    UNXG_("Asinh", infer_un_float),
    UNXG_("Acosh", infer_un_float),
    UNXG_("Atanh", infer_un_float),
    UN_("IsNaN", infer_isnan),
    {.name = "IsInf", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"detect_negative", WF_ATTR_INT, .i = 1}, {"detect_positive", WF_ATTR_INT, .i = 1}},
     .infer = infer_isinf, .flags = WF__OP_CHEAP},
    {.name = "HardSigmoid", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {ATTR_F("alpha", 0.2), ATTR_F("beta", 0.5)}, .infer = infer_un_float, .flags = WF__OP_CHEAP,
     .grad = wf__grad_unary},
    UN_("HardSwish", infer_un_float),
    /* ONNX's defaults, which are the f32 values of the constants in the SELU paper. */
    {.name = "Selu", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {ATTR_F("alpha", 1.67326319217681884765625), ATTR_F("gamma", 1.05070102214813232421875)},
     .infer = infer_un_float, .cost = cost_transcendental, .flags = WF__OP_CHEAP, .grad = wf__grad_unary},
    {.name = "Celu", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {ATTR_F("alpha", 1.0)}, .infer = infer_celu,
     .cost = cost_transcendental, .flags = WF__OP_CHEAP, .grad = wf__grad_unary},
    UNX_("Mish", infer_un_float),
    {.name = "Softsign", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_un_float, .flags = WF__OP_CHEAP,
     .grad = wf__grad_unary},
    {.name = "ThresholdedRelu", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {ATTR_F("alpha", 1.0)},
     .infer = infer_un_float, .flags = WF__OP_CHEAP, .grad = wf__grad_unary},
    {.name = "Shrink", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {ATTR_F("bias", 0.0), ATTR_F("lambd", 0.5)},
     .infer = infer_un_numeric, .flags = WF__OP_CHEAP},
    {.name = "Swish", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {ATTR_F("alpha", 1.0)},
     .infer = infer_un_float, .cost = cost_transcendental, .flags = WF__OP_CHEAP, .grad = wf__grad_unary},
    {.name = "PRelu", .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_prelu, .flags = WF__OP_CHEAP,
     .grad = wf__grad_prelu},
    /* BitShift follows opset 28, which added the signed types: u8 shifts logically, i8..i64 shift
     * left through the sign bit and right arithmetically, and an amount < 0 or >= the width gives the
     * sign fill (-1 for RIGHT of a negative x, else 0). weft has no u16/u32/u64. */
    {.name = "BitShift", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"direction", WF_ATTR_STRING, .required = true}}, .infer = infer_bitshift, .flags = WF__OP_CHEAP},
    BIN_("BitwiseAnd", infer_bitwise),
    BIN_("BitwiseOr", infer_bitwise),
    BIN_("BitwiseXor", infer_bitwise),
    UN_("BitwiseNot", infer_un_int),
    {.name = "Hardmax", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"axis", WF_ATTR_INT, .i = -1}},
     .infer = infer_hardmax},
    {.name = "LpNormalization", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"axis", WF_ATTR_INT, .i = -1}, {"p", WF_ATTR_INT, .i = 2}}, .infer = infer_lpnorm},
    VAR_("Sum", infer_variadic_float),
    VAR_("Mean", infer_variadic_float),
    VAR_("Max", infer_variadic_numeric),
    VAR_("Min", infer_variadic_numeric),
    {.name = "Det", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_det, .cost = cost_det},
    {0},
};
