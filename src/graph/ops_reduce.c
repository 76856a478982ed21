/*
 * Registry entries for reductions (Reduce*, ArgMax/ArgMin), softmax and the normalisations
 * (BatchNormalization, FusedBatchNorm and its gradient, LayerNormalization) plus inference-only Dropout: signatures, ONNX attribute
 * defaults and shape/dtype inference. Kernels are in src/backends/cpu/k_reduce.c and k_norm.c.
 */
#include "graph/grad.h"
#include "graph/op.h"

#include <stdio.h>

/* An omitted optional input (ONNX "") arrives either as a shorter input list or as an input without a
 * dtype; both mean absent. */
static bool in_present(const wf__infer_ctx *c, int i)
{
    return i < c->n_in && c->in[i].dtype != WF_DTYPE_INVALID;
}

static const char *tstr(const wf__tinfo *t, char *buf) { return wf__tinfo_str(t, buf); }

/* ---- Reduce* ------------------------------------------------------------------------------------ */

/* Which axes a Reduce* node reduces, as far as building time knows. */
typedef struct reduce_axes {
    bool known;               /* the axes values are known (attribute, constant input, or none given) */
    int n;                    /* number of axes given (0: all, or none with noop_with_empty_axes) */
    int64_t axes[WF_MAX_RANK];
} reduce_axes;

static wf_status *get_reduce_axes(wf__infer_ctx *ctx, reduce_axes *ra)
{
    const wf__attr *attr = WF__IC_A(ctx, "axes");
    bool has_in = in_present(ctx, 1);
    char b0[160], b1[160];
    ra->known = true;
    ra->n = 0;
    if (attr->set && has_in)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                              "axes given both as an attribute and as input 1; give one of them");
    if (attr->set) {
        if (attr->n > WF_MAX_RANK)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%d axes given for input %s", attr->n,
                                  tstr(&ctx->in[0], b0));
        ra->n = attr->n;
        for (int i = 0; i < attr->n; i++) ra->axes[i] = attr->ints[i];
        return NULL;
    }
    if (!has_in) return NULL;
    const wf__tinfo *ax = &ctx->in[1];
    if (ax->dtype != WF_I64 && ax->dtype != WF_I32)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axes input %s must be i64 or i32", tstr(ax, b1));
    if (ax->rank > 1)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axes input %s must be 1-D", tstr(ax, b1));
    if (ax->rank == 1 && ax->dims[0] > WF_MAX_RANK)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axes input %s has more axes than rank %d allows",
                              tstr(ax, b1), WF_MAX_RANK);
    int n = 0;
    if (!wf__infer_const_ints(ctx, 1, ra->axes, WF_MAX_RANK, &n)) {
        ra->known = false;
        return NULL;
    }
    ra->n = n;
    return NULL;
}

static wf_status *infer_reduce(wf__infer_ctx *ctx)
{
    /* ReduceMax / ReduceMin of bool are any / all (ONNX opset 20) */
    bool minmax = !strcmp(ctx->op->name, "ReduceMax") || !strcmp(ctx->op->name, "ReduceMin");
    WF__TRY(wf__infer_check_dtype(ctx, 0, minmax ? WF__DT_ALL : WF__DT_NUMERIC));
    const wf__tinfo *x = &ctx->in[0];
    wf__tinfo *y = &ctx->out[0];
    char b0[160];
    reduce_axes ra;
    WF__TRY(get_reduce_axes(ctx, &ra));
    int64_t keepdims = WF__IC_I(ctx, "keepdims");
    int64_t noop = WF__IC_I(ctx, "noop_with_empty_axes");
    if (keepdims != 0 && keepdims != 1)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "keepdims must be 0 or 1, got %lld", (long long)keepdims);
    if (noop != 0 && noop != 1)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "noop_with_empty_axes must be 0 or 1, got %lld",
                              (long long)noop);
    y->dtype = x->dtype;
    if (!ra.known || x->rank < 0) {
        y->rank = (keepdims && x->rank >= 0) ? x->rank : -1;
        for (int i = 0; i < WF_MAX_RANK; i++) y->dims[i] = -1;
        /* With known axes and keepdims, the kept dims are still known. */
        if (ra.known && y->rank >= 0) memcpy(y->dims, x->dims, sizeof y->dims);
        return NULL;
    }
    bool red[WF_MAX_RANK] = {0};
    for (int i = 0; i < ra.n; i++) {
        int a;
        if (!wf__norm_axis(ra.axes[i], x->rank, &a))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                                  (long long)ra.axes[i], tstr(x, b0));
        if (red[a])
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axis %lld is repeated in axes for input %s",
                                  (long long)ra.axes[i], tstr(x, b0));
        red[a] = true;
    }
    if (ra.n == 0) {
        if (noop) {
            *y = *x;
            return NULL;
        }
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) y->dims[r++] = x->dims[i];
        else if (keepdims) y->dims[r++] = 1;
    }
    y->rank = r;
    return NULL;
}

static void cost_reduce(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    int64_t n = wf__numel(ctx->in[0].rank, ctx->in[0].dims);
    int64_t m = wf__numel(ctx->out[0].rank, ctx->out[0].dims);
    size_t es = wf_dtype_size(ctx->in[0].dtype);
    *flops = n > 0 ? (double)n : 0;
    *bytes = (double)es * ((n > 0 ? (double)n : 0) + (m > 0 ? (double)m : 0));
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------------------ */

static wf_status *infer_arg(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_NUMERIC));
    const wf__tinfo *x = &ctx->in[0];
    wf__tinfo *y = &ctx->out[0];
    char b0[160];
    int64_t keepdims = WF__IC_I(ctx, "keepdims");
    int64_t last = WF__IC_I(ctx, "select_last_index");
    if (keepdims != 0 && keepdims != 1)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "keepdims must be 0 or 1, got %lld", (long long)keepdims);
    if (last != 0 && last != 1)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "select_last_index must be 0 or 1, got %lld",
                              (long long)last);
    y->dtype = WF_I64;
    if (x->rank < 0) {
        y->rank = -1;
        return NULL;
    }
    int64_t axis = WF__IC_I(ctx, "axis");
    int a;
    /* ONNX requires rank >= 1; a scalar has no axis to pick from. */
    if (!wf__norm_axis(axis, x->rank, &a))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                              (long long)axis, tstr(x, b0));
    if (x->dims[a] == 0)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "cannot take %s over the empty axis %d of input %s",
                              ctx->op->name, a, tstr(x, b0));
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i != a) y->dims[r++] = x->dims[i];
        else if (keepdims) y->dims[r++] = 1;
    }
    y->rank = r;
    return NULL;
}

/* ---- Softmax / LogSoftmax ------------------------------------------------------------------------- */

static wf_status *infer_softmax(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_FLOATS));
    const wf__tinfo *x = &ctx->in[0];
    char b0[160];
    if (x->rank >= 0) {
        int a;
        int64_t axis = WF__IC_I(ctx, "axis");
        /* A scalar is a single row of one element: axis -1 and 0 both mean it. */
        if (!(x->rank == 0 && (axis == 0 || axis == -1)) && !wf__norm_axis(axis, x->rank, &a))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                                  (long long)axis, tstr(x, b0));
    }
    ctx->out[0] = *x;
    return NULL;
}

static void cost_softmax(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    int64_t n = wf__numel(ctx->in[0].rank, ctx->in[0].dims);
    size_t es = wf_dtype_size(ctx->in[0].dtype);
    *flops = n > 0 ? 10.0 * (double)n : 0;
    *bytes = n > 0 ? 2.0 * (double)es * (double)n : 0;
}

/* ---- BatchNormalization --------------------------------------------------------------------------- */

static wf_status *infer_batchnorm(wf__infer_ctx *ctx)
{
    static const char *const pname[5] = {"X", "scale", "B", "input_mean", "input_var"};
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_FLOATS));
    const wf__tinfo *x = &ctx->in[0];
    char b0[160], b1[160];
    if (WF__IC_I(ctx, "training_mode") != 0)
        return wf__infer_fail(ctx, WF_UNIMPLEMENTED, "training mode not supported yet");
    if (WF__IC_F(ctx, "epsilon") < 0)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "epsilon must be >= 0, got %g", WF__IC_F(ctx, "epsilon"));
    if (x->rank >= 0 && x->rank < 2)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input X %s must have rank >= 2 (N, C, ...)",
                              tstr(x, b0));
    int64_t c = x->rank >= 2 ? x->dims[1] : -1;
    for (int i = 1; i < 5; i++) {
        const wf__tinfo *p = &ctx->in[i];
        if (p->dtype != x->dtype)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%s %s must have the dtype of X %s", pname[i],
                                  tstr(p, b1), tstr(x, b0));
        if (p->rank >= 0 && (p->rank != 1 || (c >= 0 && p->dims[0] >= 0 && p->dims[0] != c)))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                                  "%s %s must be 1-D with one value per channel of X %s", pname[i],
                                  tstr(p, b1), tstr(x, b0));
    }
    ctx->out[0] = *x;
    return NULL;
}

/* ---- FusedBatchNorm, FusedBatchNormGrad (training) ------------------------------------------------ */

/* In training BatchNorm normalises by the batch's own statistics over every axis but 1 (TensorFlow's
 * FusedBatchNormV3 with is_training, ONNX BatchNormalization's training_mode):
 *     FusedBatchNorm(x, scale, offset) -> y, batch_mean, batch_variance
 *     FusedBatchNormGrad(dy, x, scale, batch_mean, batch_variance[, d_mean, d_variance]) -> dx, d_scale, d_offset
 * The variance is the biased one (divided by the M values of a channel), the one y uses; a layer that
 * keeps an unbiased moving variance scales it itself. The gradient op takes the forward's statistics and
 * the gradients that reach them (optional inputs; absent means zero), so differentiating through
 * batch_mean or batch_variance is exact too. An empty batch (M = 0) gives NaN statistics, as ReduceMean
 * of nothing does, and zero parameter gradients. */
static wf_status *check_channel_params(wf__infer_ctx *ctx, const wf__tinfo *x, int first, int last,
                                       const char *const *pname)
{
    char b0[160], b1[160];
    int64_t c = x->rank >= 2 ? x->dims[1] : -1;
    for (int i = first; i <= last; i++) {
        if (!in_present(ctx, i)) continue;
        const wf__tinfo *p = &ctx->in[i];
        if (p->dtype != x->dtype)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%s %s must have the dtype of x %s", pname[i],
                                  tstr(p, b1), tstr(x, b0));
        if (p->rank >= 0 && (p->rank != 1 || (c >= 0 && p->dims[0] >= 0 && p->dims[0] != c)))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                                  "%s %s must be 1-D with one value per channel (dim 1) of x %s", pname[i],
                                  tstr(p, b1), tstr(x, b0));
    }
    return NULL;
}

static wf_status *check_bn_x(wf__infer_ctx *ctx, int ix)
{
    char b0[160];
    WF__TRY(wf__infer_check_dtype(ctx, ix, WF__DT_FLOATS));
    if (!(WF__IC_F(ctx, "epsilon") >= 0))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "epsilon must be >= 0, got %g", WF__IC_F(ctx, "epsilon"));
    const wf__tinfo *x = &ctx->in[ix];
    if (x->rank >= 0 && x->rank < 2)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input x %s must have rank >= 2 (N, C, ...)", tstr(x, b0));
    return NULL;
}

/* one value per channel of x, x's dtype */
static void channel_out(const wf__tinfo *x, wf__tinfo *o)
{
    o->dtype = x->dtype;
    o->rank = 1;
    for (int d = 0; d < WF_MAX_RANK; d++) o->dims[d] = -1;
    o->dims[0] = x->rank >= 2 ? x->dims[1] : -1;
}

static wf_status *infer_fused_bn(wf__infer_ctx *ctx)
{
    static const char *const pname[3] = {"x", "scale", "offset"};
    WF__TRY(check_bn_x(ctx, 0));
    const wf__tinfo *x = &ctx->in[0];
    WF__TRY(check_channel_params(ctx, x, 1, 2, pname));
    ctx->out[0] = *x;
    for (int k = 1; k < ctx->n_out; k++) channel_out(x, &ctx->out[k]);
    return NULL;
}

static wf_status *infer_fused_bn_grad(wf__infer_ctx *ctx)
{
    static const char *const pname[7] = {"dy", "x", "scale", "batch_mean", "batch_variance", "d_mean",
                                         "d_variance"};
    WF__TRY(check_bn_x(ctx, 1));
    const wf__tinfo *x = &ctx->in[1], *dy = &ctx->in[0];
    char b0[160], b1[160];
    bool same = dy->dtype == x->dtype && (dy->rank < 0 || x->rank < 0 || dy->rank == x->rank);
    for (int d = 0; same && dy->rank >= 0 && x->rank >= 0 && d < x->rank; d++)
        same = dy->dims[d] < 0 || x->dims[d] < 0 || dy->dims[d] == x->dims[d];
    if (!same)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "dy %s must have the dtype and shape of x %s", tstr(dy, b0),
                              tstr(x, b1));
    WF__TRY(check_channel_params(ctx, x, 2, 6, pname));
    ctx->out[0] = *x;
    for (int k = 1; k < ctx->n_out; k++) channel_out(x, &ctx->out[k]);
    return NULL;
}

static void cost_fused_bn(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    const wf__tinfo *x = &ctx->in[ctx->n_in >= 5 ? 1 : 0];
    int64_t n = wf__numel(x->rank, x->dims);
    size_t es = wf_dtype_size(x->dtype);
    *flops = n > 0 ? 8.0 * (double)n : 0;
    *bytes = n > 0 ? (ctx->n_in >= 5 ? 5.0 : 4.0) * (double)es * (double)n : 0;
}

/* ---- LayerNormalization --------------------------------------------------------------------------- */

static wf_status *infer_layernorm(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_FLOATS));
    const wf__tinfo *x = &ctx->in[0];
    char b0[160], b1[160];
    if (WF__IC_F(ctx, "epsilon") < 0)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "epsilon must be >= 0, got %g", WF__IC_F(ctx, "epsilon"));
    int a = -1;
    if (x->rank >= 0) {
        int64_t axis = WF__IC_I(ctx, "axis");
        if (!wf__norm_axis(axis, x->rank, &a))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                                  (long long)axis, tstr(x, b0));
    }
    for (int i = 1; i < 3; i++) {
        if (!in_present(ctx, i)) {
            if (i == 1) return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input Scale is required");
            continue;
        }
        const wf__tinfo *p = &ctx->in[i];
        const char *nm = i == 1 ? "Scale" : "B";
        if (p->dtype != x->dtype)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%s %s must have the dtype of X %s", nm,
                                  tstr(p, b1), tstr(x, b0));
        if (a < 0 || p->rank < 0) continue;
        /* Scale and B broadcast (one way) to the normalised shape X.shape[axis:]. */
        int nr = x->rank - a;
        bool ok = p->rank <= nr;
        for (int d = 0; ok && d < p->rank; d++) {
            int64_t pd = p->dims[p->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
            if (pd >= 0 && xd >= 0 && pd != xd && pd != 1) ok = false;
        }
        if (!ok)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                                  "%s %s does not broadcast to the normalised dims (from axis %d) of X %s", nm,
                                  tstr(p, b1), a, tstr(x, b0));
    }
    ctx->out[0] = *x;
    /* Mean and InvStdDev keep X's leading dims and have 1s over the normalised ones (stash type f32). */
    for (int k = 1; k < ctx->n_out; k++) {
        wf__tinfo *m = &ctx->out[k];
        m->dtype = WF_F32;
        m->rank = x->rank;
        for (int d = 0; d < WF_MAX_RANK; d++) m->dims[d] = d < x->rank ? (d < a ? x->dims[d] : 1) : -1;
    }
    return NULL;
}

/* ---- Dropout ---------------------------------------------------------------------------------------- */

static wf_status *infer_dropout(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_NUMERIC));
    const wf__tinfo *x = &ctx->in[0];
    char b1[160];
    if (in_present(ctx, 1)) {
        const wf__tinfo *r = &ctx->in[1];
        if (!wf__dtype_is_float(r->dtype) || (r->rank > 0 && wf__numel(r->rank, r->dims) > 1))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "ratio %s must be a float scalar", tstr(r, b1));
        if (ctx->in_value[1]) {
            double v = wf__load_f64(ctx->in_value[1]->data, ctx->in_value[1]->dtype, 0);
            if (!(v >= 0 && v < 1))
                return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "ratio must be in [0, 1), got %g", v);
        }
    }
    if (in_present(ctx, 2)) {
        const wf__tinfo *t = &ctx->in[2];
        if (t->dtype != WF_BOOL || (t->rank > 0 && wf__numel(t->rank, t->dims) > 1))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "training_mode %s must be a bool scalar",
                                  tstr(t, b1));
        if (ctx->in_value[2] && ctx->in_value[2]->size == 1 && ((const uint8_t *)ctx->in_value[2]->data)[0])
            return wf__infer_fail(ctx, WF_UNIMPLEMENTED, "training mode not supported yet");
    }
    ctx->out[0] = *x;
    if (ctx->n_out > 1) {
        ctx->out[1] = *x;
        ctx->out[1].dtype = WF_BOOL;
    }
    return NULL;
}

static void cost_dropout(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    int64_t n = wf__numel(ctx->in[0].rank, ctx->in[0].dims);
    *flops = 0;
    *bytes = n > 0 ? (double)n : 0; /* the mask */
}

/* ---- the table ------------------------------------------------------------------------------------ */

#define REDUCE_OP(NAME)                                                                                    \
    {.name = NAME, .host_in = 1u << 1, .min_in = 1, .max_in = 2, .n_out = 1,                               \
     .attrs = {{"keepdims", WF_ATTR_INT, .i = 1}, {"noop_with_empty_axes", WF_ATTR_INT, .i = 0},            \
               {"axes", WF_ATTR_INTS}},                                                                   \
     .infer = infer_reduce, .cost = cost_reduce, .grad = wf__grad_reduce}

#define ARG_OP(NAME)                                                                                       \
    {.name = NAME, .min_in = 1, .max_in = 1, .n_out = 1,                                                   \
     .attrs = {{"axis", WF_ATTR_INT, .i = 0}, {"keepdims", WF_ATTR_INT, .i = 1},                            \
               {"select_last_index", WF_ATTR_INT, .i = 0}},                                               \
     .infer = infer_arg, .cost = cost_reduce}

const wf__op_def wf__ops_reduce[] = {
    REDUCE_OP("ReduceSum"),
    REDUCE_OP("ReduceMean"),
    REDUCE_OP("ReduceMax"),
    REDUCE_OP("ReduceMin"),
    REDUCE_OP("ReduceProd"),
    REDUCE_OP("ReduceL2"),
    ARG_OP("ArgMax"),
    ARG_OP("ArgMin"),
    {.name = "Softmax", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"axis", WF_ATTR_INT, .i = -1}},
     .infer = infer_softmax, .cost = cost_softmax, .grad = wf__grad_softmax},
    {.name = "LogSoftmax", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"axis", WF_ATTR_INT, .i = -1}},
     .infer = infer_softmax, .cost = cost_softmax, .grad = wf__grad_log_softmax},
    {.name = "BatchNormalization", .min_in = 5, .max_in = 5, .n_out = 1,
     .attrs = {{"epsilon", WF_ATTR_FLOAT, .f = 1e-5}, {"momentum", WF_ATTR_FLOAT, .f = 0.9},
               {"training_mode", WF_ATTR_INT, .i = 0}},
     .infer = infer_batchnorm, .cost = cost_softmax, .grad = wf__grad_batch_norm},
    {.name = "FusedBatchNorm", .min_in = 3, .max_in = 3, .n_out = 3, .attrs = {{"epsilon", WF_ATTR_FLOAT, .f = 1e-5}},
     .infer = infer_fused_bn, .cost = cost_fused_bn, .grad = wf__grad_fused_batch_norm},
    {.name = "FusedBatchNormGrad", .min_in = 5, .max_in = 7, .n_out = 3,
     .attrs = {{"epsilon", WF_ATTR_FLOAT, .f = 1e-5}}, .infer = infer_fused_bn_grad, .cost = cost_fused_bn},
    {.name = "LayerNormalization", .min_in = 2, .max_in = 3, .n_out = 3,
     .attrs = {{"axis", WF_ATTR_INT, .i = -1}, {"epsilon", WF_ATTR_FLOAT, .f = 1e-5},
               {"stash_type", WF_ATTR_INT, .i = 1}},
     .infer = infer_layernorm, .cost = cost_softmax, .grad = wf__grad_layer_norm},
    {.name = "Dropout", .host_in = 0x6u, .min_in = 1, .max_in = 3, .n_out = 2, .attrs = {{"seed", WF_ATTR_INT, .i = 0}},
     .infer = infer_dropout, .cost = cost_dropout, .flags = WF__OP_CHEAP, .grad = wf__grad_dropout},
    {0},
};
