/*
 * The op registry: the group tables, lookup by name, attribute getters, shared inference helpers, and
 * the core ops every graph needs (Const, Placeholder, Identity).
 */
#include "graph/grad.h" /* wf__grad_identity */
#include "graph/op.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

static const wf__op_def *const g_tables[] = {wf__ops_core, wf__ops_elementwise, wf__ops_shape,
                                             wf__ops_nn,   wf__ops_reduce,      wf__ops_math,
                                             wf__ops_misc, wf__ops_onnx,        wf__ops_rnn_image,
                                             wf__ops_nn_grad, wf__ops_train, wf__ops_image};

const wf__op_def *wf__op_lookup(const char *name)
{
    if (!name) return NULL;
    for (size_t t = 0; t < sizeof g_tables / sizeof g_tables[0]; t++)
        for (const wf__op_def *op = g_tables[t]; op->name; op++)
            if (!strcmp(op->name, name)) return op;
    return NULL;
}

void wf__op_foreach(void (*fn)(const wf__op_def *op, void *user), void *user)
{
    for (size_t t = 0; t < sizeof g_tables / sizeof g_tables[0]; t++)
        for (const wf__op_def *op = g_tables[t]; op->name; op++) fn(op, user);
}

wf_status *wf__infer_fail(const wf__infer_ctx *ctx, wf_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wf__status(code, "node '%s' (%s): %s", ctx->node, ctx->op->name, msg);
}

/* "inputs f32[4,3], i64[2] = [1,4611686018427387904]": each input's static info, and the values of the
 * small integer inputs known while building (shapes, repeats, pads), which are what overflow usually. */
static void inputs_str(const wf__infer_ctx *c, char *buf, size_t cap)
{
    size_t off = 0;
    off += (size_t)snprintf(buf, cap, "input%s ", c->n_in == 1 ? "" : "s");
    for (int i = 0; i < c->n_in && off < cap; i++) {
        char b[160];
        if (c->in[i].dtype == WF_DTYPE_INVALID) {
            off += (size_t)snprintf(buf + off, cap - off, "%s(omitted)", i ? ", " : "");
            continue;
        }
        off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? ", " : "", wf__tinfo_str(&c->in[i], b));
        const wf_tensor *v = c->in_value ? c->in_value[i] : NULL;
        if (off < cap && v && v->data && wf__dtype_is_int(v->dtype) && v->rank <= 1 && v->size <= 2 * WF_MAX_RANK) {
            off += (size_t)snprintf(buf + off, cap - off, " = [");
            for (int64_t j = 0; j < v->size && off < cap; j++)
                off += (size_t)snprintf(buf + off, cap - off, "%s%" PRId64, j ? "," : "", wf__load_i64(v->data, v->dtype, j));
            if (off < cap) off += (size_t)snprintf(buf + off, cap - off, "]");
        }
    }
}

wf_status *wf__infer_overflow(const wf__infer_ctx *ctx, const char *fmt, ...)
{
    char msg[512], ins[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    inputs_str(ctx, ins, sizeof ins);
    return wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): %s: %s", ctx->node, ctx->op->name, msg, ins);
}

wf_status *wf__infer_check_sizes(const wf__infer_ctx *ctx)
{
    for (int i = 0; i < ctx->n_out; i++) {
        const wf__tinfo *o = &ctx->out[i];
        if (o->rank < 0 || o->rank > WF_MAX_RANK || !wf__dtype_valid(o->dtype)) continue;
        bool known = true;
        for (int j = 0; j < o->rank; j++) known = known && o->dims[j] >= 0;
        if (!known) continue;
        char b[160];
        int64_t n;
        if (!wf__shape_numel_checked(o->rank, o->dims, &n))
            return wf__infer_overflow(ctx, "output %d shape %s overflows int64", i, wf__tinfo_str(o, b));
        if (!wf__shape_bytes_checked(o->rank, o->dims, wf_dtype_size(o->dtype), NULL, NULL))
            return wf__infer_overflow(ctx, "output %d shape %s (%" PRId64 " elements) exceeds the 2^62-byte limit of a "
                                      "tensor", i, wf__tinfo_str(o, b), n);
    }
    return NULL;
}

wf_status *wf__infer_same_as_input0(wf__infer_ctx *ctx)
{
    ctx->out[0] = ctx->in[0];
    return NULL;
}

wf_status *wf__infer_check_dtype(const wf__infer_ctx *ctx, int idx, uint32_t mask)
{
    wf_dtype t = ctx->in[idx].dtype;
    if (wf__dtype_valid(t) && (WF__DT_BIT(t) & mask)) return NULL;
    wf__str ok = {0};
    for (int d = 1; d < WF_NUM_DTYPES; d++)
        if (mask & WF__DT_BIT(d)) wf__str_appendf(&ok, "%s%s", ok.len ? ", " : "", wf_dtype_name((wf_dtype)d));
    wf_status *s = wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input %d has dtype %s; expected one of %s",
                                  idx, wf_dtype_name(t), ok.p ? ok.p : "");
    wf__str_free(&ok);
    return s;
}

bool wf__infer_const_ints(const wf__infer_ctx *ctx, int idx, int64_t *vals, int max, int *n)
{
    if (idx >= ctx->n_in || !ctx->in_value[idx]) return false;
    const wf_tensor *t = ctx->in_value[idx];
    if (t->rank > 1 || t->size > max || (t->dtype != WF_I64 && t->dtype != WF_I32)) return false;
    for (int64_t i = 0; i < t->size; i++) vals[i] = wf__load_i64(t->data, t->dtype, i);
    *n = (int)t->size;
    return true;
}

/* ---- core ops ----------------------------------------------------------------------------------- */

static wf_status *infer_const(wf__infer_ctx *ctx)
{
    const wf__attr *v = WF__IC_A(ctx, "value");
    wf_tensor *t = v->t;
    ctx->out[0].dtype = t->dtype;
    ctx->out[0].rank = t->rank;
    memcpy(ctx->out[0].dims, t->dims, sizeof t->dims);
    if (ctx->out_value) ctx->out_value[0] = wf_tensor_ref(t);
    return NULL;
}

/* A variable's value changes between runs: its shape and dtype are known, its value never is (so
 * nothing downstream is constant-folded). */
static wf_status *infer_variable(wf__infer_ctx *ctx)
{
    const wf_tensor *t = WF__IC_A(ctx, "value")->t;
    ctx->out[0].dtype = t->dtype;
    ctx->out[0].rank = t->rank;
    memcpy(ctx->out[0].dims, t->dims, sizeof t->dims);
    return NULL;
}

static wf_status *infer_placeholder(wf__infer_ctx *ctx)
{
    wf_dtype dt = (wf_dtype)WF__IC_I(ctx, "dtype");
    if (!wf__dtype_valid(dt)) return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "invalid dtype %d", (int)dt);
    const wf__attr *sh = WF__IC_A(ctx, "shape");
    ctx->out[0].dtype = dt;
    if (!sh->set) {
        ctx->out[0].rank = -1;
        return NULL;
    }
    if (sh->n > WF_MAX_RANK)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "shape has rank %d > %d", sh->n, WF_MAX_RANK);
    ctx->out[0].rank = sh->n;
    for (int i = 0; i < sh->n; i++) {
        if (sh->ints[i] < -1)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "shape dim %d is %lld (use -1 for unknown)",
                                  i, (long long)sh->ints[i]);
        ctx->out[0].dims[i] = sh->ints[i];
    }
    return NULL;
}

static wf_status *infer_identity(wf__infer_ctx *ctx)
{
    ctx->out[0] = ctx->in[0];
    if (ctx->out_value && ctx->in_value[0]) ctx->out_value[0] = wf_tensor_ref(ctx->in_value[0]);
    return NULL;
}

static void cost_free(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    *flops = 0;
    *bytes = 0;
}

const wf__op_def wf__ops_core[] = {
    {.name = "Const", .min_in = 0, .max_in = 0, .n_out = 1,
     .attrs = {{"value", WF_ATTR_TENSOR, .required = true}},
     .infer = infer_const, .cost = cost_free, .flags = WF__OP_SOURCE | WF__OP_CHEAP | WF__OP_STRINGS},
    {.name = "Placeholder", .min_in = 0, .max_in = 0, .n_out = 1,
     .attrs = {{"dtype", WF_ATTR_DTYPE, .required = true}, {"shape", WF_ATTR_INTS}},
     .infer = infer_placeholder, .cost = cost_free, .flags = WF__OP_SOURCE | WF__OP_CHEAP | WF__OP_STRINGS},
    {.name = "Identity", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_identity,
     .cost = cost_free, .flags = WF__OP_CHEAP | WF__OP_STRINGS, .grad = wf__grad_identity},
    /* State kept by the session between runs: its initial value, replaced by the Assign nodes a run
     * computes (session.c). Stateful: never folded, never deduplicated. */
    {.name = "Variable", .min_in = 0, .max_in = 0, .n_out = 1,
     .attrs = {{"value", WF_ATTR_TENSOR, .required = true}},
     .infer = infer_variable, .cost = cost_free, .flags = WF__OP_SOURCE | WF__OP_STATEFUL | WF__OP_CHEAP},
    /* Assign(value), attribute "variable": the named Variable's next value, committed when the run that
     * computes it ends; its output is the value. The variable is named, not an input, so the update
     * does not wait for (or copy) the old value. Runs on any device (the kernel is Identity's). */
    {.name = "Assign", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"variable", WF_ATTR_STRING, .required = true}},
     .infer = infer_identity, .cost = cost_free, .flags = WF__OP_STATEFUL | WF__OP_CHEAP},
    /* A value that may be fed and otherwise is its input (ONNX graph inputs backed by initializers).
     * Stateful for the passes: a feed may replace it, so its input is not its value (never folded into
     * a constant nor merged with another). */
    {.name = "PlaceholderWithDefault", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_identity,
     .cost = cost_free, .flags = WF__OP_STATEFUL | WF__OP_CHEAP | WF__OP_STRINGS, .grad = wf__grad_identity},
    {0},
};

/* The op of the copy nodes that partitioning inserts between devices (its kernel is the device
 * layer's wf__copy_kernel, device/device_kernels.c); not in the lookup tables. */
static wf_status *infer_copy(wf__infer_ctx *ic) { return wf__infer_same_as_input0(ic); }

const wf__op_def wf__copy_op = {.name = "Copy", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_copy,
                                .flags = WF__OP_STRINGS /* host to host only: partition.c */};

/* The op of a generated elementwise kernel's plan node (lower/jit.c), which runs a program rather than
 * attributes; never in a graph, nor in the lookup tables. */
const wf__op_def wf__fused_elementwise_op = {.name = "FusedElementwise", .min_in = 1, .max_in = 64, .n_out = 1};
