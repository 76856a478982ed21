/*
 * Host side of the CUDA ops that only training graphs need: the backward ops of convolution and pooling
 * (Conv2DBackpropInput / Filter, MaxPool2DGrad, AvgPool2DGrad, GlobalAvgPoolGrad) and the classification
 * losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss). Direct kernels, not cuDNN: they mirror the
 * OpenCL port of the CPU kernels line for line (same tap order, sums in double), so the GPU's gradients
 * agree with the CPU's to rounding; the device code is cuda_kernels_grad.cu.
 */
#include <inttypes.h>
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_kern_ext.h"
#include "ops/nn_window.h"

/* A shape input (input_sizes, filter_sizes), read back to the host. */
static wf_status *read_sizes(wf__kctx *k, int idx, const char *what, int min_n, int max_n, int64_t *v, int *n)
{
    const wf_tensor *t = k->in[idx];
    char s[160];
    if (!wf__nn_sizes_form_ok(t, min_n, max_n))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be a 1-D i32/i64 tensor of %d values", what,
                                  cu_tstr(t, s), min_n);
    wf_status *st = cu_read_ints(k, t, v, max_n, n, what);
    int i = st ? -1 : wf__nn_sizes_negative(v, *n);
    if (i >= 0)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s[%d] is %lld; must be >= 0", what, i, (long long)v[i]);
    return st;
}

static wf_status *check_float4(wf__kctx *k, const wf_tensor *t, const char *what, wf_dtype dt)
{
    char s[160];
    if (t->rank != 4 || t->dtype != dt)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be 4-D %s", what, cu_tstr(t, s), cu_dtype_name(dt));
    return NULL;
}

/* The forward window of input spatial in_hw; dy must be its output. */
static wf_status *window(wf__kctx *k, int kind, const int64_t *in_hw, const int64_t *wk, const wf_tensor *dy,
                         wf__nn_window *w)
{
    char err[320];
    if (wf__nn_grad_window(cu_host->attr_get, k->op, k->attrs, kind, in_hw, wk, dy->dims + 2, w, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    return NULL;
}

static wf_status *k_conv_bp_input(wf__kctx *k)
{
    const wf_tensor *w = k->in[1], *dy = k->in[2];
    int64_t xs[WF_MAX_RANK];
    int nx;
    char sw[160], sd[160];
    wf_status *s = cu_enter(k);
    if (s || (s = read_sizes(k, 0, "input_sizes", 4, 4, xs, &nx)) || (s = check_float4(k, dy, "dy", dy->dtype)) ||
        (s = check_float4(k, w, "W", dy->dtype)))
        return s;
    int64_t g = cu_host->attr_get(k->op, k->attrs, "group")->i, m = w->dims[0];
    if (g < 1 || m % g || w->dims[1] * g != xs[1] || dy->dims[1] != m || dy->dims[0] != xs[0])
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "W %s, dy %s, group %lld and input_sizes [%lld,%lld,%lld,%lld] do not match",
                                  cu_tstr(w, sw), cu_tstr(dy, sd), (long long)g, (long long)xs[0], (long long)xs[1],
                                  (long long)xs[2], (long long)xs[3]);
    wf__nn_window wn;
    if ((s = window(k, WF__WIN_CONV, xs + 2, w->dims + 2, dy, &wn))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, dy->dtype, 4, xs, &y)) || !y->size) return s;
    cuk_conv geo = {xs[0], xs[1], xs[2], xs[3], m, g, w->dims[2], w->dims[3], wn.out[0], wn.out[1],
                    wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    return cu_check(k, cuk_conv_bp_input(cu_of(k)->compute, dy->dtype, cu_ptr(w), cu_ptr(dy), cu_ptr(y), &geo),
                    "Conv2DBackpropInput kernel");
}

static wf_status *k_conv_bp_filter(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *dy = k->in[2];
    int64_t fs[WF_MAX_RANK];
    int nf;
    char sx[160], sd[160];
    wf_status *s = cu_enter(k);
    if (s || (s = read_sizes(k, 1, "filter_sizes", 4, 4, fs, &nf)) || (s = check_float4(k, x, "x", x->dtype)) ||
        (s = check_float4(k, dy, "dy", x->dtype)))
        return s;
    int64_t g = cu_host->attr_get(k->op, k->attrs, "group")->i;
    if (g < 1 || fs[0] % g || fs[1] * g != x->dims[1] || dy->dims[1] != fs[0] || dy->dims[0] != x->dims[0])
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "x %s, dy %s, group %lld and filter_sizes [%lld,%lld,%lld,%lld] do not match",
                                  cu_tstr(x, sx), cu_tstr(dy, sd), (long long)g, (long long)fs[0], (long long)fs[1],
                                  (long long)fs[2], (long long)fs[3]);
    wf__nn_window wn;
    if ((s = window(k, WF__WIN_CONV, x->dims + 2, fs + 2, dy, &wn))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, 4, fs, &y)) || !y->size) return s;
    /* an empty batch still launches: every block sums nothing and stores 0 */
    cuk_conv geo = {x->dims[0], x->dims[1], x->dims[2], x->dims[3], fs[0], g, fs[2], fs[3], wn.out[0], wn.out[1],
                    wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    return cu_check(k, cuk_conv_bp_filter(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(dy), cu_ptr(y), &geo),
                    "Conv2DBackpropFilter kernel");
}

/* MaxPool2DGrad (x, dy) and AvgPool2DGrad (input_sizes, dy). */
static wf_status *k_pool_grad(wf__kctx *k)
{
    bool is_max = !strcmp(k->op->name, "MaxPool2DGrad");
    const wf_tensor *dy = k->in[1], *x = is_max ? k->in[0] : NULL;
    int64_t xs[WF_MAX_RANK];
    int nx;
    char s1[160], s2[160];
    wf_status *s = cu_enter(k);
    if (s) return s;
    if (is_max) {
        if ((s = check_float4(k, x, "x", x->dtype))) return s;
        memcpy(xs, x->dims, 4 * sizeof xs[0]);
    } else if ((s = read_sizes(k, 0, "input_sizes", 4, 4, xs, &nx))) {
        return s;
    }
    if ((s = check_float4(k, dy, "dy", is_max ? x->dtype : dy->dtype))) return s;
    if (xs[0] != dy->dims[0] || xs[1] != dy->dims[1])
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "x %s and dy %s differ in N or C",
                                  x ? cu_tstr(x, s1) : "(input_sizes)", cu_tstr(dy, s2));
    wf__nn_window wn;
    if ((s = window(k, WF__WIN_POOL, xs + 2, NULL, dy, &wn))) return s;
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, dy->dtype, 4, xs, &y)) || !y->size) return s;
    int include_pad = !is_max && cu_host->attr_get(k->op, k->attrs, "count_include_pad")->i != 0;
    cuk_conv geo = {xs[0], xs[1], xs[2], xs[3], 0, 1, wn.k[0], wn.k[1], wn.out[0], wn.out[1],
                    wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    /* AvgPool2DGrad reads no x: dy stands in for the unused pointer */
    return cu_check(k, cuk_pool_grad(cu_of(k)->compute, dy->dtype, cu_ptr(x ? x : dy), cu_ptr(dy), cu_ptr(y), &geo,
                                     wn.pe[0], wn.pe[1], is_max, include_pad),
                    "pooling gradient kernel");
}

static wf_status *k_gap_grad(wf__kctx *k)
{
    const wf_tensor *dy = k->in[1];
    int64_t xs[WF_MAX_RANK];
    int nx;
    char sd[160];
    wf_status *s = cu_enter(k);
    if (s || (s = read_sizes(k, 0, "input_sizes", 3, WF_MAX_RANK, xs, &nx))) return s;
    bool ok = dy->rank == nx;
    for (int i = 0; ok && i < nx; i++) ok = dy->dims[i] == (i < 2 ? xs[i] : 1);
    if (!ok)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "dy %s is not the GlobalAvgPool output of an input of %d dims",
                                  cu_tstr(dy, sd), nx);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, dy->dtype, nx, xs, &y)) || !y->size) return s;
    return cu_check(k, cuk_gap_grad(cu_of(k)->compute, dy->dtype, cu_ptr(dy), cu_ptr(y), y->size, y->size / dy->size),
                    "GlobalAvgPoolGrad kernel");
}

/* ---- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ------------------------------------------------- */

static wf_status *k_loss(wf__kctx *k)
{
    char b0[160], b1[160];
    const wf_tensor *x = k->in[0], *t = k->in[1], *w = k->n_in > 2 ? k->in[2] : NULL;
    const wf__attr *ia = cu_host->attr_get(k->op, k->attrs, "ignore_index");
    const char *red = cu_host->attr_get(k->op, k->attrs, "reduction")->s;
    bool softmax = !strcmp(k->op->name, "SoftmaxCrossEntropyLoss"), none = red && !strcmp(red, "none");
    if (x->rank < 2 || t->rank != x->rank - 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must have input %s's shape without dim 1",
                                  cu_tstr(t, b1), cu_tstr(x, b0));
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] != x->dims[d ? d + 1 : 0])
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must have input %s's shape without dim 1",
                                      cu_tstr(t, b1), cu_tstr(x, b0));
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must be i32 or i64", cu_tstr(t, b1));
    int64_t N = x->dims[0], C = x->dims[1], D = 1;
    for (int d = 2; d < x->rank; d++) D *= x->dims[d];
    if (w && (w->rank != 1 || w->dims[0] != C || w->dtype != x->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "weight %s must have one value per class (%lld) of X's dtype",
                                  cu_tstr(w, b1), (long long)C);
    wf_status *s = cu_enter(k);
    if (s) return s;
    wf_tensor *y, *lp = NULL;
    if (softmax && k->n_out > 1 && (s = cu_host->kctx_output(k, 1, x->dtype, x->rank, x->dims, &lp))) return s;
    if ((s = none ? cu_host->kctx_output(k, 0, x->dtype, t->rank, t->dims, &y)
                  : cu_host->kctx_output(k, 0, x->dtype, 0, NULL, &y)))
        return s;
    int reduction = none ? 0 : red && !strcmp(red, "sum") ? 1 : 2;
    /* a target outside [0, C) that is not ignore_index fails the run, as on the CPU: the kernel reports it */
    cuk_err *err;
    unsigned long long site;
    if ((s = cu_err_site(k, CU_SITE_TARGET, 1, t, x, &err, &site))) return s;
    return cu_check(k, cuk_class_loss(cu_of(k)->compute, x->dtype, softmax, cu_ptr(x), cu_ptr(t), t->dtype == WF_I64,
                                      w ? cu_ptr(w) : NULL, ia->set, ia->i, lp && lp->size ? cu_ptr(lp) : NULL,
                                      cu_ptr(y), reduction, N, C, D, err, site),
                    "loss kernel");
}

const wf__kernel_def cu_kernels_grad[] = {
    {"Conv2DBackpropInput", "GPU", WF__DT_FLOATS, 2, k_conv_bp_input, NULL, 0},
    {"Conv2DBackpropFilter", "GPU", WF__DT_FLOATS, 0, k_conv_bp_filter, NULL, 0},
    {"MaxPool2DGrad", "GPU", WF__DT_FLOATS, 0, k_pool_grad, NULL, 0},
    {"AvgPool2DGrad", "GPU", WF__DT_FLOATS, 1, k_pool_grad, NULL, 0},
    {"GlobalAvgPoolGrad", "GPU", WF__DT_FLOATS, 1, k_gap_grad, NULL, 0},
    {"SoftmaxCrossEntropyLoss", "GPU", WF__DT_FLOATS, 0, k_loss, NULL, 0},
    {"NegativeLogLikelihoodLoss", "GPU", WF__DT_FLOATS, 0, k_loss, NULL, 0},
    {0},
};
