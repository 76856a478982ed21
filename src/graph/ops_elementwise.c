/*
 * Elementwise ops: signatures, attributes and shape/dtype inference for the numpy-broadcasting binary
 * ops, comparisons, logic, Where, the unary ops and Cast. Their CPU kernels are in
 * backends/cpu/k_elementwise*.c.
 */
#include "graph/grad.h"
#include "graph/op.h"

#include <stdio.h>

#define SB 160 /* wf__shape_str buffer */

/* An omitted optional input arrives either past n_in or with an invalid dtype. */
static bool has_in(const wf__infer_ctx *c, int i)
{
    return i < c->n_in && c->in[i].dtype != WF_DTYPE_INVALID;
}

static const char *family(uint32_t mask)
{
    if (mask == WF__DT_FLOATS) return "floating-point (f32, f64, f16, bf16)";
    if (mask == WF__DT_NUMERIC) return "numeric (floating-point or integer, not bool)";
    if (mask == WF__DT_BIT(WF_BOOL)) return "bool";
    return "the listed";
}

/* Input idx must have a dtype in mask; the message says what the op accepts and what it got. */
static wf_status *need_dtype(const wf__infer_ctx *c, int idx, uint32_t mask, const char *what)
{
    wf_dtype t = c->in[idx].dtype;
    if (wf__dtype_valid(t) && (WF__DT_BIT(t) & mask)) return NULL;
    return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s is defined for %s inputs only; %s is %s", c->op->name,
                          family(mask), what, wf_dtype_name(t));
}

static void set_out(wf__tinfo *o, wf_dtype dt, int rank, const int64_t *dims)
{
    o->dtype = dt;
    o->rank = rank;
    for (int i = 0; i < WF_MAX_RANK; i++) o->dims[i] = i < rank ? dims[i] : -1;
}

static wf_status *same_dtypes(const wf__infer_ctx *c, int i, int j)
{
    if (c->in[i].dtype == c->in[j].dtype) return NULL;
    return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                          "input dtypes differ: %s and %s (inputs %d and %d must have the same dtype)",
                          wf_dtype_name(c->in[i].dtype), wf_dtype_name(c->in[j].dtype), i, j);
}

/* out = broadcast(in[0], in[1]) with dtype dt. */
static wf_status *broadcast2(wf__infer_ctx *c, wf_dtype dt)
{
    int rank;
    int64_t dims[WF_MAX_RANK];
    if (!wf__broadcast_tinfo(&c->in[0], &c->in[1], &rank, dims)) {
        char a[SB], b[SB];
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shapes %s and %s cannot be broadcast together",
                              wf__shape_str(c->in[0].rank, c->in[0].dims, a),
                              wf__shape_str(c->in[1].rank, c->in[1].dims, b));
    }
    set_out(&c->out[0], dt, rank, dims);
    return NULL;
}

/* ---- binary ------------------------------------------------------------------------------------- */

static wf_status *infer_arith(wf__infer_ctx *c)
{
    WF__TRY(same_dtypes(c, 0, 1));
    WF__TRY(need_dtype(c, 0, WF__DT_NUMERIC, "input 0"));
    return broadcast2(c, c->in[0].dtype);
}

static wf_status *infer_mod(wf__infer_ctx *c)
{
    int64_t f = WF__IC_I(c, "fmod");
    if (f != 0 && f != 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'fmod' must be 0 or 1, got %lld", (long long)f);
    return infer_arith(c);
}

static wf_status *infer_compare(wf__infer_ctx *c)
{
    WF__TRY(same_dtypes(c, 0, 1));
    WF__TRY(need_dtype(c, 0, WF__DT_ALL, "input 0"));
    return broadcast2(c, WF_BOOL);
}

static wf_status *infer_logic(wf__infer_ctx *c)
{
    WF__TRY(need_dtype(c, 0, WF__DT_BIT(WF_BOOL), "input 0"));
    WF__TRY(need_dtype(c, 1, WF__DT_BIT(WF_BOOL), "input 1"));
    return broadcast2(c, WF_BOOL);
}

static wf_status *infer_where(wf__infer_ctx *c)
{
    WF__TRY(need_dtype(c, 0, WF__DT_BIT(WF_BOOL), "the condition (input 0)"));
    WF__TRY(same_dtypes(c, 1, 2));
    WF__TRY(need_dtype(c, 1, WF__DT_ALL, "input 1"));
    wf__tinfo xy = {c->in[1].dtype, -1, {0}};
    wf__tinfo out = xy;
    if (!wf__broadcast_tinfo(&c->in[1], &c->in[2], &xy.rank, xy.dims) ||
        !wf__broadcast_tinfo(&c->in[0], &xy, &out.rank, out.dims)) {
        char a[SB], b[SB], d[SB];
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "shapes %s (condition), %s and %s cannot be broadcast together",
                              wf__shape_str(c->in[0].rank, c->in[0].dims, a),
                              wf__shape_str(c->in[1].rank, c->in[1].dims, b),
                              wf__shape_str(c->in[2].rank, c->in[2].dims, d));
    }
    set_out(&c->out[0], c->in[1].dtype, out.rank, out.dims);
    return NULL;
}

/* ---- unary -------------------------------------------------------------------------------------- */

static wf_status *unary(wf__infer_ctx *c, uint32_t mask)
{
    WF__TRY(need_dtype(c, 0, mask, "input 0"));
    c->out[0] = c->in[0];
    return NULL;
}

static wf_status *infer_un_numeric(wf__infer_ctx *c) { return unary(c, WF__DT_NUMERIC); }
static wf_status *infer_un_float(wf__infer_ctx *c) { return unary(c, WF__DT_FLOATS); }
static wf_status *infer_un_bool(wf__infer_ctx *c) { return unary(c, WF__DT_BIT(WF_BOOL)); }

static wf_status *infer_gelu(wf__infer_ctx *c)
{
    const char *a = WF__IC_S(c, "approximate");
    if (strcmp(a, "none") && strcmp(a, "tanh"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "attribute 'approximate' must be \"none\" or \"tanh\", got \"%s\"", a);
    return unary(c, WF__DT_FLOATS);
}

/* Clip(input, min?, max?): ONNX bounds are scalars of the input's dtype; a one-element 1-D tensor is
 * accepted too, since exporters produce them. */
static wf_status *infer_clip(wf__infer_ctx *c)
{
    WF__TRY(unary(c, WF__DT_NUMERIC));
    for (int i = 1; i < 3; i++) {
        if (!has_in(c, i)) continue;
        const char *what = i == 1 ? "min" : "max";
        if (c->in[i].dtype != c->in[0].dtype)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s has dtype %s but the input is %s", what,
                                  wf_dtype_name(c->in[i].dtype), wf_dtype_name(c->in[0].dtype));
        int64_t n = wf__numel(c->in[i].rank, c->in[i].dims);
        if (c->in[i].rank > 1 || (n >= 0 && n != 1)) {
            char b[SB];
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s must be a scalar, got shape %s", what,
                                  wf__shape_str(c->in[i].rank, c->in[i].dims, b));
        }
    }
    return NULL;
}

static wf_status *infer_cast(wf__infer_ctx *c)
{
    wf_dtype to = (wf_dtype)WF__IC_I(c, "to");
    if (!wf__dtype_valid(to))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'to' is not a valid dtype (%d)", (int)to);
    WF__TRY(need_dtype(c, 0, WF__DT_ALL, "input 0"));
    c->out[0] = c->in[0];
    c->out[0].dtype = to;
    return NULL;
}

/* ---- cost --------------------------------------------------------------------------------------- */

static double known_bytes(const wf__tinfo *t)
{
    int64_t n = wf__numel(t->rank, t->dims);
    return n > 0 ? (double)n * (double)wf_dtype_size(t->dtype) : 0;
}

/* exp, log, tanh, erf, pow... take a polynomial or a libm call: about ten flops per element. */
static void cost_transcendental(const wf__infer_ctx *c, double *flops, double *bytes)
{
    int64_t n = wf__numel(c->out[0].rank, c->out[0].dims);
    *flops = n > 0 ? 10.0 * (double)n : 0;
    *bytes = known_bytes(&c->out[0]);
    for (int i = 0; i < c->n_in; i++)
        if (has_in(c, i)) *bytes += known_bytes(&c->in[i]);
}

/* ---- table -------------------------------------------------------------------------------------- */

#define BIN_(nm, fn) {.name = nm, .min_in = 2, .max_in = 2, .n_out = 1, .infer = fn, .flags = WF__OP_CHEAP}
#define UN_(nm, fn) {.name = nm, .min_in = 1, .max_in = 1, .n_out = 1, .infer = fn, .flags = WF__OP_CHEAP}
#define UNX_(nm, fn)                                                                              \
    {.name = nm, .min_in = 1, .max_in = 1, .n_out = 1, .infer = fn, .cost = cost_transcendental,  \
     .flags = WF__OP_CHEAP}
/* The same with a gradient function. */
#define BING_(nm, fn, gr) {.name = nm, .min_in = 2, .max_in = 2, .n_out = 1, .infer = fn, .flags = WF__OP_CHEAP, .grad = gr}
#define UNG_(nm, fn) {.name = nm, .min_in = 1, .max_in = 1, .n_out = 1, .infer = fn, .flags = WF__OP_CHEAP, .grad = wf__grad_unary}
#define UNXG_(nm, fn)                                                                             \
    {.name = nm, .min_in = 1, .max_in = 1, .n_out = 1, .infer = fn, .cost = cost_transcendental,  \
     .flags = WF__OP_CHEAP, .grad = wf__grad_unary}

const wf__op_def wf__ops_elementwise[] = {
    BING_("Add", infer_arith, wf__grad_add),
    BING_("Sub", infer_arith, wf__grad_sub),
    BING_("Mul", infer_arith, wf__grad_mul),
    BING_("Div", infer_arith, wf__grad_div),
    {.name = "Pow", .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_arith, .cost = cost_transcendental,
     .flags = WF__OP_CHEAP, .grad = wf__grad_pow},
    BING_("Maximum", infer_arith, wf__grad_maximum),
    BING_("Minimum", infer_arith, wf__grad_minimum),
    {.name = "Mod", .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {{"fmod", WF_ATTR_INT, .i = 0}},
     .infer = infer_mod, .flags = WF__OP_CHEAP},
    BIN_("Equal", infer_compare),
    BIN_("NotEqual", infer_compare),
    BIN_("Less", infer_compare),
    BIN_("LessEqual", infer_compare),
    BIN_("Greater", infer_compare),
    BIN_("GreaterEqual", infer_compare),
    BIN_("And", infer_logic),
    BIN_("Or", infer_logic),
    BIN_("Xor", infer_logic),
    UN_("Not", infer_un_bool),
    {.name = "Where", .min_in = 3, .max_in = 3, .n_out = 1, .infer = infer_where, .flags = WF__OP_CHEAP,
     .grad = wf__grad_where},
    UNG_("Neg", infer_un_numeric),
    UNG_("Abs", infer_un_numeric),
    {.name = "Sign", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_un_numeric, .flags = WF__OP_CHEAP,
     .grad = wf__grad_none},
    UNG_("Square", infer_un_numeric),
    UNG_("Relu", infer_un_numeric),
    UNXG_("Exp", infer_un_float),
    UNXG_("Log", infer_un_float),
    UNXG_("Sqrt", infer_un_float),
    UNXG_("Rsqrt", infer_un_float),
    UNG_("Reciprocal", infer_un_float),
    UNXG_("Tanh", infer_un_float),
    UNXG_("Sigmoid", infer_un_float),
    {.name = "LeakyRelu", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"alpha", WF_ATTR_FLOAT, .f = 0.01}},
     .infer = infer_un_float, .flags = WF__OP_CHEAP, .grad = wf__grad_unary},
    {.name = "Elu", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"alpha", WF_ATTR_FLOAT, .f = 1.0}},
     .infer = infer_un_float, .cost = cost_transcendental, .flags = WF__OP_CHEAP, .grad = wf__grad_unary},
    {.name = "Gelu", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"approximate", WF_ATTR_STRING, .s = "none"}}, .infer = infer_gelu,
     .cost = cost_transcendental, .flags = WF__OP_CHEAP, .grad = wf__grad_unary},
    UNXG_("Erf", infer_un_float),
    UNXG_("Softplus", infer_un_float),
    {.name = "Floor", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_un_float, .flags = WF__OP_CHEAP,
     .grad = wf__grad_none},
    {.name = "Ceil", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_un_float, .flags = WF__OP_CHEAP,
     .grad = wf__grad_none},
    {.name = "Round", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_un_float, .flags = WF__OP_CHEAP,
     .grad = wf__grad_none},
    {.name = "Clip", .host_in = 0x6u, .min_in = 1, .max_in = 3, .n_out = 1, .infer = infer_clip, .flags = WF__OP_CHEAP,
     .grad = wf__grad_clip},
    {.name = "Cast", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"to", WF_ATTR_DTYPE, .required = true}},
     .infer = infer_cast, .flags = WF__OP_CHEAP, .grad = wf__grad_cast},
    {0},
};
