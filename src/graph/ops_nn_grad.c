/*
 * The backward ops of convolution and pooling (Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool2DGrad,
 * AvgPool2DGrad, GlobalAvgPoolGrad) and the gradient functions of Conv2D, ConvTranspose2D, MaxPool2D,
 * AvgPool2D and GlobalAvgPool that build them. Shapes a backward op must produce travel as an i64 input
 * (TensorFlow's input_sizes / filter_sizes), so gradients work when a shape is only known at run time.
 */
#include "graph/ops_nn_grad.h"

#include <stdio.h>

#include "graph/grad.h"
#include "ops/nn_window.h"

/* ---- shape inference ----------------------------------------------------------------------------- */

/* The shape held by the i32/i64 input idx: *known false when it is not a constant. */
static wf_status *infer_sizes(const wf__infer_ctx *ctx, int idx, const char *what, int min_rank, int max_rank,
                              int64_t *dims, int *n, bool *known)
{
    const wf__tinfo *s = &ctx->in[idx];
    char ss[160];
    if (s->dtype != WF_I64 && s->dtype != WF_I32)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%s %s must be i32 or i64", what, wf__tinfo_str(s, ss));
    if (s->rank >= 0 && s->rank != 1)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%s %s must be 1-D", what, wf__tinfo_str(s, ss));
    *known = wf__infer_const_ints(ctx, idx, dims, WF_MAX_RANK, n);
    if (!*known) {
        *n = s->rank == 1 ? (int)s->dims[0] : -1;
        if (*n > WF_MAX_RANK) *n = -1;
        return NULL;
    }
    if (*n < min_rank || *n > max_rank)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%s has %d values; expected %d", what, *n, min_rank);
    for (int i = 0; i < *n; i++)
        if (dims[i] < 0)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "%s[%d] is %lld; must be >= 0", what, i,
                                  (long long)dims[i]);
    return NULL;
}

/* dy must be a 4-D float tensor of the same dtype as input `like` (when given). */
static wf_status *check_dy(const wf__infer_ctx *ctx, int idy, int like)
{
    WF__TRY(wf__infer_check_dtype(ctx, idy, WF__DT_FLOATS));
    const wf__tinfo *dy = &ctx->in[idy];
    char s1[160], s2[160];
    if (dy->rank >= 0 && dy->rank != 4)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "dy %s must be 4-D NCHW", wf__tinfo_str(dy, s1));
    if (like >= 0 && ctx->in[like].dtype != dy->dtype)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input %d %s and dy %s have different dtypes", like,
                              wf__tinfo_str(&ctx->in[like], s2), wf__tinfo_str(dy, s1));
    if (like >= 0 && ctx->in[like].rank >= 0 && ctx->in[like].rank != 4)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "input %d %s must be 4-D", like,
                              wf__tinfo_str(&ctx->in[like], s2));
    return NULL;
}

/* The forward window over spatial dims in_hw must produce dy's spatial dims. */
static wf_status *check_window(const wf__infer_ctx *ctx, int kind, const int64_t *in_hw, const int64_t *wk,
                               const wf__tinfo *dy)
{
    wf__nn_window w;
    char err[256], sd[160];
    if (wf__nn_window_resolve_with(wf__attr_get, ctx->op, ctx->attrs, kind, in_hw, wk, &w, err, sizeof err))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "forward input spatial [%lld,%lld]: %s", (long long)in_hw[0],
                              (long long)in_hw[1], err);
    for (int i = 0; i < 2 && dy->rank == 4; i++)
        if (w.out[i] >= 0 && dy->dims[2 + i] >= 0 && w.out[i] != dy->dims[2 + i])
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                                  "dy %s does not match the forward output [%lld,%lld] of input spatial [%lld,%lld]",
                                  wf__tinfo_str(dy, sd), (long long)w.out[0], (long long)w.out[1],
                                  (long long)in_hw[0], (long long)in_hw[1]);
    return NULL;
}

/* Conv2DBackpropInput(input_sizes, W, dy) -> dx of input_sizes' shape */
static wf_status *infer_conv_bp_input(wf__infer_ctx *ctx)
{
    WF__TRY(check_dy(ctx, 2, 1));
    int64_t sz[WF_MAX_RANK];
    int n;
    bool known;
    WF__TRY(infer_sizes(ctx, 0, "input_sizes", 4, 4, sz, &n, &known));
    const wf__tinfo *w = &ctx->in[1], *dy = &ctx->in[2];
    int64_t group = WF__IC_I(ctx, "group");
    char sw[160], sd[160];
    if (group < 1) return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "group %lld must be >= 1", (long long)group);
    if (!known) {
        sz[0] = dy->rank == 4 ? dy->dims[0] : -1;
        if (w->rank == 4 && w->dims[1] >= 0 && wf__mul_overflow_i64(w->dims[1], group, &sz[1]))
            return wf__infer_overflow(ctx, "W's %lld input channels x group %lld overflow int64", (long long)w->dims[1],
                                      (long long)group);
        if (w->rank != 4 || w->dims[1] < 0) sz[1] = -1;
        sz[2] = sz[3] = -1;
    }
    if (w->rank == 4 && dy->rank == 4 && w->dims[0] >= 0 && dy->dims[1] >= 0 && w->dims[0] != dy->dims[1])
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "W %s has %lld output channels but dy %s has %lld",
                              wf__tinfo_str(w, sw), (long long)w->dims[0], wf__tinfo_str(dy, sd),
                              (long long)dy->dims[1]);
    if (w->rank == 4 && w->dims[0] >= 0 && w->dims[0] % group)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "W %s: %lld output channels not divisible by group %lld",
                              wf__tinfo_str(w, sw), (long long)w->dims[0], (long long)group);
    int64_t wg;
    if (known && w->rank == 4 && w->dims[1] >= 0 && (wf__mul_overflow_i64(w->dims[1], group, &wg) || wg != sz[1]))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "W %s x group %lld does not give input_sizes' %lld channels",
                              wf__tinfo_str(w, sw), (long long)group, (long long)sz[1]);
    if (known && dy->rank == 4 && dy->dims[0] >= 0 && dy->dims[0] != sz[0])
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "dy %s and input_sizes' batch %lld differ",
                              wf__tinfo_str(dy, sd), (long long)sz[0]);
    int64_t wk[2] = {w->rank == 4 ? w->dims[2] : -1, w->rank == 4 ? w->dims[3] : -1};
    WF__TRY(check_window(ctx, WF__WIN_CONV, sz + 2, wk, dy));
    ctx->out[0].dtype = dy->dtype;
    ctx->out[0].rank = 4;
    memcpy(ctx->out[0].dims, sz, 4 * sizeof sz[0]);
    return NULL;
}

/* Conv2DBackpropFilter(x, filter_sizes, dy) -> dW of filter_sizes' shape */
static wf_status *infer_conv_bp_filter(wf__infer_ctx *ctx)
{
    WF__TRY(check_dy(ctx, 2, 0));
    int64_t sz[WF_MAX_RANK];
    int n;
    bool known;
    WF__TRY(infer_sizes(ctx, 1, "filter_sizes", 4, 4, sz, &n, &known));
    const wf__tinfo *x = &ctx->in[0], *dy = &ctx->in[2];
    int64_t group = WF__IC_I(ctx, "group");
    char sx[160], sd[160];
    if (group < 1) return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "group %lld must be >= 1", (long long)group);
    if (!known) {
        sz[0] = dy->rank == 4 ? dy->dims[1] : -1;
        sz[1] = x->rank == 4 && x->dims[1] >= 0 ? x->dims[1] / group : -1;
        sz[2] = sz[3] = -1;
    }
    int64_t sg;
    if (x->rank == 4 && x->dims[1] >= 0 &&
        (x->dims[1] % group || (known && (wf__mul_overflow_i64(sz[1], group, &sg) || sg != x->dims[1]))))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "x %s does not have filter_sizes' %lld x group %lld channels",
                              wf__tinfo_str(x, sx), (long long)sz[1], (long long)group);
    if (dy->rank == 4 && dy->dims[1] >= 0 && sz[0] >= 0 && (dy->dims[1] != sz[0] || sz[0] % group))
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                              "dy %s channels do not match filter_sizes' %lld output channels (group %lld)",
                              wf__tinfo_str(dy, sd), (long long)sz[0], (long long)group);
    if (x->rank == 4 && dy->rank == 4 && x->dims[0] >= 0 && dy->dims[0] >= 0 && x->dims[0] != dy->dims[0])
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "x %s and dy %s have different batch sizes",
                              wf__tinfo_str(x, sx), wf__tinfo_str(dy, sd));
    int64_t in_hw[2] = {x->rank == 4 ? x->dims[2] : -1, x->rank == 4 ? x->dims[3] : -1};
    WF__TRY(check_window(ctx, WF__WIN_CONV, in_hw, sz + 2, dy));
    ctx->out[0].dtype = x->dtype;
    ctx->out[0].rank = 4;
    memcpy(ctx->out[0].dims, sz, 4 * sizeof sz[0]);
    return NULL;
}

/* The pool rules of ops_nn.c's infer_pool: pads smaller than the kernel extent. */
static wf_status *check_pool_window(const wf__infer_ctx *ctx, const int64_t *in_hw, const wf__tinfo *dy)
{
    WF__TRY(check_window(ctx, WF__WIN_POOL, in_hw, NULL, dy));
    wf__nn_window w;
    char err[256];
    wf__nn_window_resolve_with(wf__attr_get, ctx->op, ctx->attrs, WF__WIN_POOL, in_hw, NULL, &w, err, sizeof err);
    for (int i = 0; i < 2; i++)
        if (w.pb[i] >= (w.k[i] - 1) * w.d[i] + 1 || w.pe[i] >= (w.k[i] - 1) * w.d[i] + 1)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT,
                                  "pads along spatial dim %d (%lld, %lld) must be smaller than the kernel extent", i,
                                  (long long)w.pb[i], (long long)w.pe[i]);
    return NULL;
}

/* MaxPool2DGrad(x, dy) -> dx like x */
static wf_status *infer_max_pool_grad(wf__infer_ctx *ctx)
{
    WF__TRY(check_dy(ctx, 1, 0));
    const wf__tinfo *x = &ctx->in[0], *dy = &ctx->in[1];
    char sx[160], sd[160];
    for (int i = 0; i < 2 && x->rank == 4 && dy->rank == 4; i++)
        if (x->dims[i] >= 0 && dy->dims[i] >= 0 && x->dims[i] != dy->dims[i])
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "x %s and dy %s differ in N or C", wf__tinfo_str(x, sx),
                                  wf__tinfo_str(dy, sd));
    int64_t in_hw[2] = {x->rank == 4 ? x->dims[2] : -1, x->rank == 4 ? x->dims[3] : -1};
    WF__TRY(check_pool_window(ctx, in_hw, dy));
    ctx->out[0] = *x;
    return NULL;
}

/* AvgPool2DGrad(input_sizes, dy) -> dx of input_sizes' shape */
static wf_status *infer_avg_pool_grad(wf__infer_ctx *ctx)
{
    WF__TRY(check_dy(ctx, 1, -1));
    int64_t sz[WF_MAX_RANK];
    int n;
    bool known;
    WF__TRY(infer_sizes(ctx, 0, "input_sizes", 4, 4, sz, &n, &known));
    const wf__tinfo *dy = &ctx->in[1];
    char sd[160];
    if (!known) {
        sz[0] = dy->rank == 4 ? dy->dims[0] : -1;
        sz[1] = dy->rank == 4 ? dy->dims[1] : -1;
        sz[2] = sz[3] = -1;
    }
    for (int i = 0; i < 2 && dy->rank == 4; i++)
        if (dy->dims[i] >= 0 && sz[i] >= 0 && dy->dims[i] != sz[i])
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "dy %s and input_sizes differ in N or C",
                                  wf__tinfo_str(dy, sd));
    WF__TRY(check_pool_window(ctx, sz + 2, dy));
    ctx->out[0].dtype = dy->dtype;
    ctx->out[0].rank = 4;
    memcpy(ctx->out[0].dims, sz, 4 * sizeof sz[0]);
    return NULL;
}

/* GlobalAvgPoolGrad(input_sizes, dy) -> dx of input_sizes' shape (rank >= 3) */
static wf_status *infer_gap_grad(wf__infer_ctx *ctx)
{
    WF__TRY(wf__infer_check_dtype(ctx, 1, WF__DT_FLOATS));
    int64_t sz[WF_MAX_RANK];
    int n;
    bool known;
    WF__TRY(infer_sizes(ctx, 0, "input_sizes", 3, WF_MAX_RANK, sz, &n, &known));
    const wf__tinfo *dy = &ctx->in[1];
    char sd[160];
    if (dy->rank >= 0 && dy->rank < 3)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "dy %s must have rank >= 3", wf__tinfo_str(dy, sd));
    ctx->out[0].dtype = dy->dtype;
    if (!known) {
        ctx->out[0].rank = n >= 0 ? n : dy->rank;
        for (int i = 0; i < ctx->out[0].rank; i++) ctx->out[0].dims[i] = i < 2 && dy->rank > i ? dy->dims[i] : -1;
        return NULL;
    }
    if (dy->rank >= 0 && dy->rank != n)
        return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "dy %s and input_sizes (%d values) differ in rank",
                              wf__tinfo_str(dy, sd), n);
    for (int i = 0; i < dy->rank; i++) {
        int64_t want = i < 2 ? sz[i] : 1;
        if (dy->dims[i] >= 0 && dy->dims[i] != want)
            return wf__infer_fail(ctx, WF_INVALID_ARGUMENT, "dy %s is not the GlobalAvgPool output of input_sizes",
                                  wf__tinfo_str(dy, sd));
    }
    ctx->out[0].rank = n;
    memcpy(ctx->out[0].dims, sz, (size_t)n * sizeof sz[0]);
    return NULL;
}

static void cost_conv_bp(const wf__infer_ctx *ctx, double *flops, double *bytes)
{
    /* as the forward convolution: 2 * |dy| * (C/g)*kH*kW; the filter is W (input 1) or the output */
    const wf__tinfo *dy = &ctx->in[2], *w = !strcmp(ctx->op->name, "Conv2DBackpropInput") ? &ctx->in[1] : &ctx->out[0];
    int64_t n = wf__numel(dy->rank, dy->dims), per = w->rank == 4 ? w->dims[1] * w->dims[2] * w->dims[3] : -1;
    *flops = n > 0 && per > 0 ? 2.0 * (double)n * (double)per : 0;
    *bytes = 0;
    for (int i = 0; i < ctx->n_in; i++) {
        int64_t e = wf__numel(ctx->in[i].rank, ctx->in[i].dims);
        if (e > 0) *bytes += (double)e * (double)wf_dtype_size(ctx->in[i].dtype);
    }
    int64_t e = wf__numel(ctx->out[0].rank, ctx->out[0].dims);
    if (e > 0) *bytes += (double)e * (double)wf_dtype_size(ctx->out[0].dtype);
}

/* ---- gradient functions ---------------------------------------------------------------------------- */

/* The forward node's attributes that were set and that op `to` declares, as public attributes. */
static int copy_attrs(const wf_node *n, const wf__op_def *to, wf_attr *out)
{
    int m = 0;
    for (int k = 0; k < WF__MAX_ATTRS && n->op->attrs[k].name; k++) {
        const wf__attr *a = &n->attrs[k];
        if (!a->set) continue;
        bool declared = false;
        for (int j = 0; j < WF__MAX_ATTRS && to->attrs[j].name; j++)
            if (!strcmp(to->attrs[j].name, n->op->attrs[k].name)) declared = true;
        if (!declared) continue;
        wf_attr v = {0};
        v.name = n->op->attrs[k].name;
        v.type = n->op->attrs[k].type;
        v.i = a->i;
        v.f = a->f;
        v.ints = a->ints;
        v.floats = a->floats;
        v.n = a->n;
        v.s = a->s;
        v.dtype = (wf_dtype)a->i;
        v.tensor = a->t;
        out[m++] = v;
    }
    return m;
}

/* The bias gradient of a convolution: dy summed over N, H and W. */
static wf_status *bias_grad(wf__grad_ctx *c, wf_output *out)
{
    static const int64_t axes[3] = {0, 2, 3};
    wf_attr at[2] = {wf_attr_ints("axes", axes, 3), wf_attr_int("keepdims", 0)};
    return wf__g_op(c, "ReduceSum", "bias_grad", &c->dy[0], 1, at, 2, out);
}

static bool has_in(const wf_node *n, int i) { return i < n->n_in && n->in[i].node; }

wf_status *wf__grad_conv2d(wf__grad_ctx *c)
{
    const wf_node *n = c->node;
    if (!c->dy[0].node) return NULL;
    wf_attr at[WF__MAX_ATTRS];
    wf_output xs, ws, in[3];
    int na = copy_attrs(n, wf__op_lookup("Conv2DBackpropInput"), at);
    WF__TRY(wf__g_shape_of(c, "input_sizes", n->in[0], &xs));
    in[0] = xs, in[1] = n->in[1], in[2] = c->dy[0];
    WF__TRY(wf__g_op(c, "Conv2DBackpropInput", "Conv2DBackpropInput", in, 3, at, na, &c->dx[0]));
    WF__TRY(wf__g_shape_of(c, "filter_sizes", n->in[1], &ws));
    in[0] = n->in[0], in[1] = ws, in[2] = c->dy[0];
    WF__TRY(wf__g_op(c, "Conv2DBackpropFilter", "Conv2DBackpropFilter", in, 3, at, na, &c->dx[1]));
    if (has_in(n, 2)) WF__TRY(bias_grad(c, &c->dx[2]));
    return NULL;
}

/* ConvTranspose2D's input gradient is the forward convolution of dy with the same W, and its filter
 * gradient a Conv2DBackpropFilter with x and dy swapped. Both need the transpose's resolved pads as
 * explicit ones (output_shape and auto_pad are rules of the transpose only), so x's and W's spatial dims
 * must be known when the gradient is built. */
wf_status *wf__grad_conv_transpose2d(wf__grad_ctx *c)
{
    const wf_node *n = c->node;
    if (!c->dy[0].node) return NULL;
    int64_t xd[WF_MAX_RANK], wd[WF_MAX_RANK];
    int xr = wf_output_shape(n->in[0], xd), wr = wf_output_shape(n->in[1], wd);
    if (xr != 4 || wr != 4 || xd[2] < 0 || xd[3] < 0 || wd[2] < 0 || wd[3] < 0)
        return wf__g_fail(c, WF_UNIMPLEMENTED, "needs X's and W's spatial dims while building");
    wf__nn_window w;
    char err[256];
    if (wf__nn_window_resolve_with(wf__attr_get, n->op, n->attrs, WF__WIN_CONVT, xd + 2, wd + 2, &w, err, sizeof err))
        return wf__g_fail(c, WF_INVALID_ARGUMENT, "%s", err);
    for (int i = 0; i < 2; i++)
        if (w.pb[i] < 0 || w.pe[i] < 0 || w.opad[i] >= w.s[i])
            return wf__g_fail(c, WF_UNIMPLEMENTED,
                              "none for negative pads (%lld, %lld) or an output_padding %lld not below the stride "
                              "%lld along spatial dim %d", (long long)w.pb[i], (long long)w.pe[i], (long long)w.opad[i],
                              (long long)w.s[i], i);
    int64_t pads[4] = {w.pb[0], w.pb[1], w.pe[0], w.pe[1]}, st[2] = {w.s[0], w.s[1]}, dl[2] = {w.d[0], w.d[1]};
    int64_t group = wf__attr_i(n->op, n->attrs, "group");
    wf_attr at[4] = {wf_attr_ints("pads", pads, 4), wf_attr_ints("strides", st, 2), wf_attr_ints("dilations", dl, 2),
                     wf_attr_int("group", group)};
    wf_output in[3], ws;
    in[0] = c->dy[0], in[1] = n->in[1];
    WF__TRY(wf__g_op(c, "Conv2D", "Conv2D", in, 2, at, 4, &c->dx[0]));
    WF__TRY(wf__g_shape_of(c, "filter_sizes", n->in[1], &ws));
    in[0] = c->dy[0], in[1] = ws, in[2] = n->in[0];
    WF__TRY(wf__g_op(c, "Conv2DBackpropFilter", "Conv2DBackpropFilter", in, 3, at, 4, &c->dx[1]));
    if (has_in(n, 2)) WF__TRY(bias_grad(c, &c->dx[2]));
    return NULL;
}

wf_status *wf__grad_max_pool2d(wf__grad_ctx *c)
{
    const wf_node *n = c->node;
    if (!c->dy[0].node) return NULL;
    wf_attr at[WF__MAX_ATTRS];
    int na = copy_attrs(n, wf__op_lookup("MaxPool2DGrad"), at);
    wf_output in[2] = {n->in[0], c->dy[0]};
    return wf__g_op(c, "MaxPool2DGrad", "MaxPool2DGrad", in, 2, at, na, &c->dx[0]);
}

wf_status *wf__grad_avg_pool2d(wf__grad_ctx *c)
{
    const wf_node *n = c->node;
    if (!c->dy[0].node) return NULL;
    wf_attr at[WF__MAX_ATTRS];
    int na = copy_attrs(n, wf__op_lookup("AvgPool2DGrad"), at);
    wf_output in[2];
    WF__TRY(wf__g_shape_of(c, "input_sizes", n->in[0], &in[0]));
    in[1] = c->dy[0];
    return wf__g_op(c, "AvgPool2DGrad", "AvgPool2DGrad", in, 2, at, na, &c->dx[0]);
}

wf_status *wf__grad_global_avg_pool(wf__grad_ctx *c)
{
    const wf_node *n = c->node;
    if (!c->dy[0].node) return NULL;
    wf_output in[2];
    WF__TRY(wf__g_shape_of(c, "input_sizes", n->in[0], &in[0]));
    in[1] = c->dy[0];
    return wf__g_op(c, "GlobalAvgPoolGrad", "GlobalAvgPoolGrad", in, 2, NULL, 0, &c->dx[0]);
}

/* ---- the table ----------------------------------------------------------------------------------------- */

#define WINDOW_ATTRS                                                                                   \
    {"auto_pad", WF_ATTR_STRING, .s = "NOTSET"}, {"kernel_shape", WF_ATTR_INTS}, {"pads", WF_ATTR_INTS}, \
        {"strides", WF_ATTR_INTS}

const wf__op_def wf__ops_nn_grad[] = {
    {.name = "Conv2DBackpropInput", .min_in = 3, .max_in = 3, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"group", WF_ATTR_INT, .i = 1}},
     .infer = infer_conv_bp_input, .cost = cost_conv_bp, .host_in = 1u << 0},
    {.name = "Conv2DBackpropFilter", .min_in = 3, .max_in = 3, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"group", WF_ATTR_INT, .i = 1}},
     .infer = infer_conv_bp_filter, .cost = cost_conv_bp, .host_in = 1u << 1},
    {.name = "MaxPool2DGrad", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"ceil_mode", WF_ATTR_INT, .i = 0},
               {"storage_order", WF_ATTR_INT, .i = 0}},
     .infer = infer_max_pool_grad},
    {.name = "AvgPool2DGrad", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {WINDOW_ATTRS, {"dilations", WF_ATTR_INTS}, {"ceil_mode", WF_ATTR_INT, .i = 0},
               {"count_include_pad", WF_ATTR_INT, .i = 0}},
     .infer = infer_avg_pool_grad, .host_in = 1u << 0},
    {.name = "GlobalAvgPoolGrad", .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_gap_grad,
     .host_in = 1u << 0},
    {0},
};
