/*
 * Ops that training builds rather than models: ApplyAdam, the whole Adam update of one variable in one
 * pass (train/optim.c emits it instead of a dozen elementwise nodes), and StatelessRandomUniform, the
 * reproducible uniform draw behind training-mode dropout masks.
 *
 * ApplyAdam(w, m, v, g, lr_t, one_minus_beta1, one_minus_beta2, epsilon) -> (w_new, m_new, v_new), per
 * element and in this order, each operation rounded in the dtype (no fused multiply-add), so that it
 * equals the composite graph of optim.c bit for bit:
 *     m_new = m + (g - m) * one_minus_beta1
 *     v_new = v + (g * g - v) * one_minus_beta2
 *     w_new = w - (m_new * lr_t) / (sqrt(v_new) + epsilon)
 *
 * StatelessRandomUniform(like, counter; seed) -> values in [0, 1) of like's shape and dtype, the value at
 * flat index i a pure function of (seed, counter, i): a splitmix64-style counter-based hash, spelled out
 * in ops/kutil_random.h, which every backend shares so that CPU and devices agree bit for bit. Only
 * like's shape and dtype are read. counter is an i64 scalar read on the host; training feeds the
 * optimizer's step so each step draws a new mask and a resumed run draws the same ones.
 */
#include "graph/grad.h"
#include "graph/op.h"

/* ---- ApplyAdam ------------------------------------------------------------------------------------- */

static const char *const g_adam_in[] = {"w", "m", "v", "g", "lr_t", "one_minus_beta1", "one_minus_beta2", "epsilon"};

static wf_status *infer_apply_adam(wf__infer_ctx *ctx)
{
    const wf__tinfo *w = &ctx->in[0];
    char s1[160], s2[160];
    if (!wf__dtype_valid(w->dtype) || !wf__dtype_is_float(w->dtype))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input 'w' %s must be a float tensor", wf__tinfo_str(w, s1));
    wf__tinfo out = *w;
    for (int i = 1; i < 8; i++) {
        const wf__tinfo *t = &ctx->in[i];
        if (t->dtype != w->dtype)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input '%s' %s must have w's dtype %s", g_adam_in[i],
                                  wf__tinfo_str(t, s1), wf_dtype_name(w->dtype));
        if (i >= 4) {
            if (t->rank > 0)
                return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input '%s' %s must be a rank-0 scalar", g_adam_in[i],
                                      wf__tinfo_str(t, s1));
            continue;
        }
        /* same shape as w; an unknown dim on one side is taken from the other */
        if (t->rank < 0) continue;
        if (out.rank < 0) {
            out = *t;
            continue;
        }
        bool ok = t->rank == out.rank;
        for (int d = 0; ok && d < t->rank; d++) {
            if (t->dims[d] >= 0 && out.dims[d] >= 0 && t->dims[d] != out.dims[d]) ok = false;
            else if (out.dims[d] < 0) out.dims[d] = t->dims[d];
        }
        if (!ok)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input '%s' %s must have the shape of w %s", g_adam_in[i],
                                  wf__tinfo_str(t, s1), wf__tinfo_str(w, s2));
    }
    out.dtype = w->dtype;
    for (int j = 0; j < 3; j++) ctx->out[j] = out;
    return NULL;
}

static void cost_apply_adam(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    int64_t n = wf__numel(ctx->in[0].rank, ctx->in[0].dims);
    double e = n > 0 ? (double)n : 0;
    *flops = 11 * e;
    *bytes = 7 * e * (double)wf_dtype_size(ctx->in[0].dtype); /* four tensors read, three written */
}

/* ---- StatelessRandomUniform ----------------------------------------------------------------------- */

static wf_status *infer_random_uniform(wf__infer_ctx *ctx)
{
    const wf__tinfo *like = &ctx->in[0], *c = &ctx->in[1];
    char s1[160];
    if (!wf__dtype_valid(like->dtype) || !wf__dtype_is_float(like->dtype))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input 'like' %s must be a float tensor",
                              wf__tinfo_str(like, s1));
    if (c->dtype != WF_I64 || c->rank > 0)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input 'counter' %s must be an i64 rank-0 scalar",
                              wf__tinfo_str(c, s1));
    ctx->out[0] = *like;
    return NULL;
}

static void cost_random_uniform(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    int64_t n = wf__numel(ctx->in[0].rank, ctx->in[0].dims);
    double e = n > 0 ? (double)n : 0;
    *flops = 12 * e; /* the integer mixing */
    *bytes = e * (double)wf_dtype_size(ctx->in[0].dtype);
}

/* ---- the table ------------------------------------------------------------------------------------ */

const wf__op_def wf__ops_train[] = {
    /* no gradient: it is the update, not a function anything differentiates through */
    {.name = "ApplyAdam", .min_in = 8, .max_in = 8, .n_out = 3, .infer = infer_apply_adam,
     .cost = cost_apply_adam},
    /* dropout masks multiply activations, so autodiff walks through this node back towards `like`;
     * wf__grad_none leaves both inputs without a gradient (the draw does not depend on like's values) */
    {.name = "StatelessRandomUniform", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"seed", WF_ATTR_INT, .i = 0}}, .infer = infer_random_uniform, .cost = cost_random_uniform,
     .host_in = 1u << 1, .grad = wf__grad_none},
    {0},
};
