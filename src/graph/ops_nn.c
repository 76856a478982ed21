/*
 * Registry entries for the neural-network ops: MatMul, Gemm, BiasAdd, Conv2D, ConvTranspose2D,
 * MaxPool2D, AvgPool2D, GlobalAvgPool. Shape inference follows numpy (MatMul) and ONNX (the rest);
 * the window geometry helper here is shared with the CPU kernels so both compute the same shapes.
 */
#include "graph/grad.h"
#include "graph/op.h"
#include "ops/nn_window.h"
#include "graph/ops_nn_grad.h"

#include <stdio.h>

/* An omitted optional input (ONNX-style "") reaches inference as an invalid dtype or a short list. */
static bool has_input(const wf__infer_ctx *ctx, int i)
{
    return i < ctx->n_in && ctx->in[i].dtype != WF_DTYPE_INVALID;
}

static double tinfo_bytes(const wf__tinfo *t)
{
    int64_t n = t->rank >= 0 ? wf__numel(t->rank, t->dims) : -1;
    return n > 0 ? (double)n * (double)wf_dtype_size(t->dtype) : 0;
}

double wf__cost_io_bytes(const wf__infer_ctx *ctx)
{
    double b = 0;
    for (int i = 0; i < ctx->n_in; i++)
        if (has_input(ctx, i)) b += tinfo_bytes(&ctx->in[i]);
    for (int i = 0; i < ctx->n_out; i++) b += tinfo_bytes(&ctx->out[i]);
    return b;
}

/* ---- MatMul ------------------------------------------------------------------------------------ */

#define MM_DTYPES (WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64))

static wf_status *infer_matmul(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, MM_DTYPES));
    WF__TRY(wf__infer_check_dtype(ctx, 1, MM_DTYPES));
    const wf__tinfo *a = &ctx->in[0], *b = &ctx->in[1];
    char sa[160], sb[160];
    if (a->dtype != b->dtype)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "A %s and B %s have different dtypes",
                              wf__tinfo_str(a, sa), wf__tinfo_str(b, sb));
    ctx->out[0].dtype = a->dtype;
    if (a->rank == 0 || b->rank == 0)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "A %s and B %s: operands must have rank >= 1",
                              wf__tinfo_str(a, sa), wf__tinfo_str(b, sb));
    if (a->rank < 0 || b->rank < 0) {
        ctx->out[0].rank = -1;
        return NULL;
    }
    int ta = (int)WF__IC_I(ctx, "transpose_a"), tb = (int)WF__IC_I(ctx, "transpose_b");
    /* numpy promotes a 1-D A to [1,K] and a 1-D B to [K,1]; transposes apply to matrices only. */
    int64_t m, ka, kb, n;
    if (a->rank == 1) m = 1, ka = a->dims[0];
    else if (ta) m = a->dims[a->rank - 1], ka = a->dims[a->rank - 2];
    else m = a->dims[a->rank - 2], ka = a->dims[a->rank - 1];
    if (b->rank == 1) kb = b->dims[0], n = 1;
    else if (tb) kb = b->dims[b->rank - 1], n = b->dims[b->rank - 2];
    else kb = b->dims[b->rank - 2], n = b->dims[b->rank - 1];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "A %s and B %s have incompatible inner dims %lld and %lld",
                              wf__tinfo_str(a, sa), wf__tinfo_str(b, sb), (long long)ka, (long long)kb);
    wf__tinfo ba = {a->dtype, a->rank > 2 ? a->rank - 2 : 0, {0}}, bb = {b->dtype, b->rank > 2 ? b->rank - 2 : 0, {0}};
    memcpy(ba.dims, a->dims, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dims, b->dims, sizeof(int64_t) * (size_t)bb.rank);
    int r;
    int64_t dims[WF_MAX_RANK];
    if (!wf__broadcast_tinfo(&ba, &bb, &r, dims))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "A %s and B %s have batch dims that do not broadcast",
                              wf__tinfo_str(a, sa), wf__tinfo_str(b, sb));
    if (a->rank > 1) dims[r++] = m;
    if (b->rank > 1) dims[r++] = n;
    ctx->out[0].rank = r;
    memcpy(ctx->out[0].dims, dims, sizeof(int64_t) * (size_t)r);
    return NULL;
}

static void cost_matmul(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    const wf__tinfo *a = &ctx->in[0], *o = &ctx->out[0];
    int64_t k = a->rank == 1 ? a->dims[0]
                : WF__IC_I(ctx, "transpose_a") ? a->dims[a->rank - 2] : a->dims[a->rank - 1];
    int64_t n_out = wf__numel(o->rank, o->dims);
    /* 2*M*N*K per batch = 2*K per output element */
    *flops = n_out > 0 && k > 0 ? 2.0 * (double)n_out * (double)k : 0;
    *bytes = wf__cost_io_bytes(ctx);
}

/* ---- Gemm -------------------------------------------------------------------------------------- */

static wf_status *infer_gemm(wf__infer_ctx *ctx)
{
    uint32_t mask = WF__DT_FLOATS | WF__DT_BIT(WF_I32) | WF__DT_BIT(WF_I64);
    WF__TRY(wf__infer_check_dtype(ctx, 0, mask));
    const wf__tinfo *a = &ctx->in[0], *b = &ctx->in[1];
    char sa[160], sb[160];
    for (int i = 1; i < 3; i++)
        if (has_input(ctx, i) && ctx->in[i].dtype != a->dtype)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input %d %s has a different dtype than A %s", i,
                                  wf__tinfo_str(&ctx->in[i], sb), wf__tinfo_str(a, sa));
    ctx->out[0].dtype = a->dtype;
    ctx->out[0].rank = 2;
    if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "A %s and B %s must both be 2-D",
                              wf__tinfo_str(a, sa), wf__tinfo_str(b, sb));
    int ta = (int)WF__IC_I(ctx, "transA"), tb = (int)WF__IC_I(ctx, "transB");
    int64_t m = a->rank == 2 ? a->dims[ta ? 1 : 0] : -1, ka = a->rank == 2 ? a->dims[ta ? 0 : 1] : -1;
    int64_t kb = b->rank == 2 ? b->dims[tb ? 1 : 0] : -1, n = b->rank == 2 ? b->dims[tb ? 0 : 1] : -1;
    if (ka >= 0 && kb >= 0 && ka != kb)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "A %s and B %s have incompatible inner dims %lld and %lld",
                              wf__tinfo_str(a, sa), wf__tinfo_str(b, sb), (long long)ka, (long long)kb);
    ctx->out[0].dims[0] = m;
    ctx->out[0].dims[1] = n;
    if (has_input(ctx, 2)) {
        const wf__tinfo *c = &ctx->in[2];
        wf__tinfo y = {a->dtype, 2, {m, n}};
        int r;
        int64_t d[WF_MAX_RANK];
        /* C broadcasts one way only: to (M,N), never the reverse. */
        bool ok = c->rank <= 2 && wf__broadcast_tinfo(c, &y, &r, d);
        for (int i = 0; ok && c->rank >= 0 && i < c->rank; i++) {
            int64_t cd = c->dims[i], yd = y.dims[2 - c->rank + i];
            if (cd >= 0 && yd >= 0 && cd != yd && cd != 1) ok = false;
        }
        if (!ok)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "C %s does not broadcast to the output [%lld,%lld]",
                                  wf__tinfo_str(c, sa), (long long)m, (long long)n);
    }
    return NULL;
}

static void cost_gemm(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    const wf__tinfo *a = &ctx->in[0], *o = &ctx->out[0];
    int64_t k = a->rank == 2 ? a->dims[WF__IC_I(ctx, "transA") ? 0 : 1] : 0;
    int64_t n_out = wf__numel(o->rank, o->dims);
    *flops = n_out > 0 && k > 0 ? 2.0 * (double)n_out * (double)k + 3.0 * (double)n_out : 0;
    *bytes = wf__cost_io_bytes(ctx);
}

/* ---- BiasAdd ----------------------------------------------------------------------------------- */

static wf_status *infer_bias_add(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_NUMERIC));
    const wf__tinfo *x = &ctx->in[0], *b = &ctx->in[1];
    char sx[160], sb[160];
    if (b->dtype != x->dtype)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "x %s and bias %s have different dtypes",
                              wf__tinfo_str(x, sx), wf__tinfo_str(b, sb));
    const char *fmt = WF__IC_S(ctx, "data_format");
    bool nchw = !strcmp(fmt, "NCHW");
    if (!nchw && strcmp(fmt, "NHWC"))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "data_format '%s' is not NHWC or NCHW", fmt);
    if (b->rank >= 0 && b->rank != 1)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "bias %s must be 1-D", wf__tinfo_str(b, sb));
    if (x->rank >= 0 && x->rank < (nchw ? 2 : 1))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "x %s has too low a rank for data_format %s",
                              wf__tinfo_str(x, sx), fmt);
    if (x->rank >= 0 && b->rank == 1) {
        int64_t c = x->dims[nchw ? 1 : x->rank - 1];
        if (c >= 0 && b->dims[0] >= 0 && c != b->dims[0])
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "bias %s does not match channel dim %lld of x %s",
                                  wf__tinfo_str(b, sb), (long long)c, wf__tinfo_str(x, sx));
    }
    ctx->out[0] = *x;
    return NULL;
}

/* Shared with the CPU kernels (src/backends/cpu/k_dnnl*.c); the rules live in ops/nn_window.h. */
int wf__nn_window_resolve(const wf__op_def *op, const wf__attr *attrs, int kind, const int64_t *in_hw,
                          const int64_t *wk, wf__nn_window *w, char *err, size_t en)
{
    return wf__nn_window_resolve_with(wf__attr_get, op, attrs, kind, in_hw, wk, w, err, en);
}

/* ---- Conv2D / ConvTranspose2D -------------------------------------------------------------------- */

static wf_status *infer_conv_common(wf__infer_ctx *ctx, bool transposed)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_FLOATS));
    const wf__tinfo *x = &ctx->in[0], *wt = &ctx->in[1];
    char sx[160], sw[160], sbias[160];
    for (int i = 1; i < 3; i++)
        if (has_input(ctx, i) && ctx->in[i].dtype != x->dtype)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input %d %s has a different dtype than X %s", i,
                                  wf__tinfo_str(&ctx->in[i], sw), wf__tinfo_str(x, sx));
    if (x->rank >= 0 && x->rank != 4)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s must be 4-D NCHW", wf__tinfo_str(x, sx));
    if (wt->rank >= 0 && wt->rank != 4)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "W %s must be 4-D", wf__tinfo_str(wt, sw));
    int64_t group = WF__IC_I(ctx, "group");
    if (group < 1) return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "group %lld must be >= 1", (long long)group);
    int64_t n = x->rank == 4 ? x->dims[0] : -1, c = x->rank == 4 ? x->dims[1] : -1;
    int64_t w0 = wt->rank == 4 ? wt->dims[0] : -1, w1 = wt->rank == 4 ? wt->dims[1] : -1;
    int64_t oc;
    if (!transposed) {
        /* W is (M, C/group, kH, kW) */
        if (c >= 0 && c % group)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s has %lld channels, not divisible by group %lld",
                                  wf__tinfo_str(x, sx), (long long)c, (long long)group);
        if (w0 >= 0 && w0 % group)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "W %s has %lld output channels, not divisible by group %lld",
                                  wf__tinfo_str(wt, sw), (long long)w0, (long long)group);
        int64_t want;
        if (c >= 0 && w1 >= 0 && (wf__mul_overflow_i64(w1, group, &want) || want != c))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                                  "W %s expects W dim 1 (%lld) x group %lld input channels but X %s has %lld",
                                  wf__tinfo_str(wt, sw), (long long)w1, (long long)group, wf__tinfo_str(x, sx),
                                  (long long)c);
        oc = w0;
    } else {
        /* W is (C, M/group, kH, kW) */
        if (c >= 0 && c % group)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s has %lld channels, not divisible by group %lld",
                                  wf__tinfo_str(x, sx), (long long)c, (long long)group);
        if (c >= 0 && w0 >= 0 && w0 != c)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "W %s has %lld input channels but X %s has %lld",
                                  wf__tinfo_str(wt, sw), (long long)w0, wf__tinfo_str(x, sx), (long long)c);
        oc = -1;
        if (w1 >= 0 && wf__mul_overflow_i64(w1, group, &oc))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "W %s dim 1 (%lld) x group %lld overflows",
                                  wf__tinfo_str(wt, sw), (long long)w1, (long long)group);
    }
    if (has_input(ctx, 2)) {
        const wf__tinfo *b = &ctx->in[2];
        if (b->rank >= 0 && (b->rank != 1 || (oc >= 0 && b->dims[0] >= 0 && b->dims[0] != oc)))
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "B %s must be 1-D with %lld output channels",
                                  wf__tinfo_str(b, sbias), (long long)oc);
    }
    int64_t in_hw[2] = {x->rank == 4 ? x->dims[2] : -1, x->rank == 4 ? x->dims[3] : -1};
    int64_t wk[2] = {wt->rank == 4 ? wt->dims[2] : -1, wt->rank == 4 ? wt->dims[3] : -1};
    wf__nn_window w;
    char err[256];
    if (wf__nn_window_resolve(ctx->op, ctx->attrs, transposed ? WF__WIN_CONVT : WF__WIN_CONV, in_hw, wk, &w, err,
                              sizeof err))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s, W %s: %s", wf__tinfo_str(x, sx),
                              wf__tinfo_str(wt, sw), err);
    ctx->out[0].dtype = x->dtype;
    ctx->out[0].rank = 4;
    ctx->out[0].dims[0] = n;
    ctx->out[0].dims[1] = oc;
    ctx->out[0].dims[2] = w.out[0];
    ctx->out[0].dims[3] = w.out[1];
    return NULL;
}

static wf_status *infer_conv(wf__infer_ctx *ctx) { return infer_conv_common(ctx, false); }
static wf_status *infer_convt(wf__infer_ctx *ctx) { return infer_conv_common(ctx, true); }

static void cost_conv(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    const wf__tinfo *w = &ctx->in[1], *o = &ctx->out[0];
    /* 2 * N*OC*OH*OW * (IC/g)*KH*KW; W dim 1 is IC/g */
    int64_t n_out = wf__numel(o->rank, o->dims), per = w->rank == 4 ? w->dims[1] * w->dims[2] * w->dims[3] : -1;
    *flops = n_out > 0 && per > 0 ? 2.0 * (double)n_out * (double)per : 0;
    *bytes = wf__cost_io_bytes(ctx);
}

static void cost_convt(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    const wf__tinfo *x = &ctx->in[0], *w = &ctx->in[1];
    /* every input element meets (OC/g)*KH*KW weights */
    int64_t n_in = wf__numel(x->rank, x->dims), per = w->rank == 4 ? w->dims[1] * w->dims[2] * w->dims[3] : -1;
    *flops = n_in > 0 && per > 0 ? 2.0 * (double)n_in * (double)per : 0;
    *bytes = wf__cost_io_bytes(ctx);
}

/* ---- pools ------------------------------------------------------------------------------------- */

static wf_status *infer_pool(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_FLOATS));
    const wf__tinfo *x = &ctx->in[0];
    char sx[160];
    if (x->rank >= 0 && x->rank != 4)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s must be 4-D NCHW", wf__tinfo_str(x, sx));
    int64_t in_hw[2] = {x->rank == 4 ? x->dims[2] : -1, x->rank == 4 ? x->dims[3] : -1};
    wf__nn_window w;
    char err[256];
    if (wf__nn_window_resolve(ctx->op, ctx->attrs, WF__WIN_POOL, in_hw, NULL, &w, err, sizeof err))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s: %s", wf__tinfo_str(x, sx), err);
    for (int i = 0; i < 2; i++)
        if (w.pb[i] >= (w.k[i] - 1) * w.d[i] + 1 || w.pe[i] >= (w.k[i] - 1) * w.d[i] + 1)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s: pads along spatial dim %d (%lld, %lld) must be "
                                  "smaller than the kernel extent", wf__tinfo_str(x, sx), i,
                                  (long long)w.pb[i], (long long)w.pe[i]);
    ctx->out[0].dtype = x->dtype;
    ctx->out[0].rank = 4;
    ctx->out[0].dims[0] = x->rank == 4 ? x->dims[0] : -1;
    ctx->out[0].dims[1] = x->rank == 4 ? x->dims[1] : -1;
    ctx->out[0].dims[2] = w.out[0];
    ctx->out[0].dims[3] = w.out[1];
    return NULL;
}

static void cost_pool(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    const wf__tinfo *o = &ctx->out[0];
    const wf__attr *ks = WF__IC_A(ctx, "kernel_shape");
    int64_t n_out = wf__numel(o->rank, o->dims);
    double win = ks->n == 2 ? (double)(ks->ints[0] * ks->ints[1]) : 1;
    *flops = n_out > 0 ? (double)n_out * win : 0;
    *bytes = wf__cost_io_bytes(ctx);
}

static wf_status *infer_global_avg_pool(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 0, WF__DT_FLOATS));
    const wf__tinfo *x = &ctx->in[0];
    char sx[160];
    if (x->rank >= 0 && x->rank < 3)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "X %s must have rank >= 3 (N, C, spatial...)",
                              wf__tinfo_str(x, sx));
    ctx->out[0] = *x;
    for (int i = 2; i < x->rank; i++) ctx->out[0].dims[i] = 1;
    return NULL;
}

static void cost_global_avg_pool(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    int64_t n = wf__numel(ctx->in[0].rank, ctx->in[0].dims);
    *flops = n > 0 ? (double)n : 0;
    *bytes = wf__cost_io_bytes(ctx);
}

#define WINDOW_ATTRS                                                                                   \
    {"auto_pad", WF_ATTR_STRING, .s = "NOTSET"}, {"kernel_shape", WF_ATTR_INTS}, {"pads", WF_ATTR_INTS}, \
        {"strides", WF_ATTR_INTS}

const wf__op_def wf__ops_nn[] = {
    {.name = "MatMul", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"transpose_a", WF_ATTR_INT, .i = 0}, {"transpose_b", WF_ATTR_INT, .i = 0}},
     .infer = infer_matmul, .cost = cost_matmul, .grad = wf__grad_matmul},
    {.name = "Gemm", .min_in = 2, .max_in = 3, .n_out = 1,
     .attrs = {{"alpha", WF_ATTR_FLOAT, .f = 1.0}, {"beta", WF_ATTR_FLOAT, .f = 1.0},
               {"transA", WF_ATTR_INT, .i = 0}, {"transB", WF_ATTR_INT, .i = 0}},
     .infer = infer_gemm, .cost = cost_gemm, .grad = wf__grad_gemm},
    {.name = "BiasAdd", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"data_format", WF_ATTR_STRING, .s = "NHWC"}},
     .infer = infer_bias_add, .grad = wf__grad_bias_add},
    {.name = "Conv2D", .min_in = 2, .max_in = 3, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"group", WF_ATTR_INT, .i = 1}},
     .infer = infer_conv, .cost = cost_conv, .grad = wf__grad_conv2d},
    {.name = "ConvTranspose2D", .min_in = 2, .max_in = 3, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"group", WF_ATTR_INT, .i = 1},
               {"output_padding", WF_ATTR_INTS}, {"output_shape", WF_ATTR_INTS}},
     .infer = infer_convt, .cost = cost_convt, .grad = wf__grad_conv_transpose2d},
    {.name = "MaxPool2D", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"ceil_mode", WF_ATTR_INT, .i = 0},
               {"storage_order", WF_ATTR_INT, .i = 0}},
     .infer = infer_pool, .cost = cost_pool, .grad = wf__grad_max_pool2d},
    {.name = "AvgPool2D", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"ceil_mode", WF_ATTR_INT, .i = 0},
               {"count_include_pad", WF_ATTR_INT, .i = 0}},
     .infer = infer_pool, .cost = cost_pool, .grad = wf__grad_avg_pool2d},
    {.name = "GlobalAvgPool", .min_in = 1, .max_in = 1, .n_out = 1,
     .infer = infer_global_avg_pool, .cost = cost_global_avg_pool, .grad = wf__grad_global_avg_pool},
    {0},
};
