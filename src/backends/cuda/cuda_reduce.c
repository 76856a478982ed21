/*
 * Host side of the CUDA reductions (ReduceSum/Mean/Max/Min/Prod over any axes, given as an attribute or
 * as input 1), Softmax / LogSoftmax over any axis, ArgMax/ArgMin, BatchNormalization (inference),
 * FusedBatchNorm and its gradient (training), LayerNormalization and inference-mode Dropout. Semantics follow src/backends/cpu/k_reduce.c:
 * float sums accumulate in double, NaN wins Max/Min, integer sums wrap, bool Max/Min are any/all.
 */
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "ops/kutil_reduce.h"

/* The node's axes (attribute or input 1, read back from the device) as flags in red[]; *none when none
 * were given. */
wf_status *cu_read_axes(wf__kctx *k, const wf_tensor *x, bool *red, bool *none)
{
    const wf__attr *attr = cu_host->attr_get(k->op, k->attrs, "axes");
    const wf_tensor *at = k->n_in > 1 ? k->in[1] : NULL;
    int64_t axes[WF_MAX_RANK];
    int n = 0;
    char b0[160];
    if (!wf__ku_axes_attr(attr, at != NULL, axes, &n, b0, sizeof b0))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", b0);
    if (!(attr && attr->set) && at) {
        wf_status *s = cu_read_ints(k, at, axes, WF_MAX_RANK, &n, "axes");
        if (s) return s;
    }
    *none = n == 0;
    int bad = 0, fault = wf__ku_axes_mark(axes, n, x->rank, red, &bad);
    if (fault == WF__KU_AXES_RANGE)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axes[bad],
                                  cu_tstr(x, b0));
    if (fault) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is repeated in axes", (long long)axes[bad]);
    return NULL;
}

static wf_status *k_reduce(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_status *s = cu_enter(k);
    bool red[WF_MAX_RANK], none = true;
    if (s || (s = cu_read_axes(k, x, red, &none))) return s;
    bool keepdims = cu_host->attr_get(k->op, k->attrs, "keepdims")->i != 0;
    if (none) {
        const wf__attr *noop = cu_host->attr_get(k->op, k->attrs, "noop_with_empty_axes");
        if (noop && noop->i) return cu_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    int64_t ydims[WF_MAX_RANK], count;
    int yr;
    wf__ku_reduce_out(x->rank, x->dims, red, keepdims, ydims, &yr, &count);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, yr, ydims, &y)) || !y->size) return s;
    wf__ku_red_plan p;
    wf__ku_reduce_plan(x->rank, x->dims, red, &p);
    static const struct {
        const char *op;
        int code;
    } ops[] = {{"ReduceSum", CUK_RSUM}, {"ReduceMean", CUK_RMEAN}, {"ReduceMax", CUK_RMAX}, {"ReduceMin", CUK_RMIN},
               {"ReduceProd", CUK_RPROD}};
    int code = CUK_RSUM;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(k->op->name, ops[i].op)) code = ops[i].code;
    wf_dtype t = x->dtype;
    if (t == WF_BOOL) {
        /* bool Max / Min are any / all: the bytes (0 / 1) reduced as u8, except over an empty set, where
         * u8's identities (0, 255) would not be bools: any() of nothing is false, all() true */
        if (!count)
            return cu_check(k, (int)cudaMemsetAsync(cu_ptr(y), code == CUK_RMIN, (size_t)y->size, cu_of(k)->compute),
                            "bool reduction fill");
        t = WF_U8;
    }
    return cu_check(k, cuk_reduce(cu_of(k)->compute, t, code, cu_ptr(x), cu_ptr(y), y->size, p.nk, p.kd, p.ks,
                                  p.nr, p.rd, p.rs, count),
                    "reduction kernel");
}

static wf_status *k_softmax(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160];
    int a = 0;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (x->rank > 0 && !wf__ku_norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b0));
    int64_t outer, R, inner;
    wf__ku_axis_split(x->rank, x->dims, a, &outer, &R, &inner);
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    return cu_check(k, cuk_softmax(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), outer, R, inner,
                                   !strcmp(k->op->name, "LogSoftmax")),
                    "softmax kernel");
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------------------------ */

static wf_status *k_arg(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160];
    int a;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b0));
    bool keepdims = cu_host->attr_get(k->op, k->attrs, "keepdims")->i != 0;
    int last = cu_host->attr_get(k->op, k->attrs, "select_last_index")->i != 0;
    int is_max = !strcmp(k->op->name, "ArgMax");
    int64_t ydims[WF_MAX_RANK], outer, inner, R;
    int yr;
    wf__ku_arg_plan(x->rank, x->dims, a, keepdims, ydims, &yr, &outer, &R, &inner);
    if (R == 0 && outer * inner > 0)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot take %s over the empty axis %d of input %s", k->op->name,
                                  a, cu_tstr(x, b0));
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, WF_I64, yr, ydims, &y)) || !y->size) return s;
    return cu_check(k, cuk_argext(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), outer, R, inner, is_max, last),
                    "ArgMax/ArgMin kernel");
}

/* ---- BatchNormalization (inference) ------------------------------------------------------------------------ */

static wf_status *k_batchnorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160], b1[160];
    static const char *const pname[5] = {"X", "scale", "B", "input_mean", "input_var"};
    if (x->rank < 2)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input X %s must have rank >= 2 (N, C, ...)", cu_tstr(x, b0));
    if (k->n_in < 5)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "needs 5 inputs (X, scale, B, mean, var), got %d", k->n_in);
    int64_t C = x->dims[1];
    for (int i = 1; i < 5; i++) {
        const wf_tensor *p = k->in[i];
        if (!p || p->dtype != x->dtype || p->rank != 1 || p->dims[0] != C)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be 1-D of length %lld with X's dtype %s", pname[i],
                                      p ? cu_tstr(p, b1) : "(missing)", (long long)C, cu_dtype_name(x->dtype));
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    int64_t S = x->size / (x->dims[0] * C);
    double eps = cu_host->attr_get(k->op, k->attrs, "epsilon")->f;
    return cu_check(k, cuk_batchnorm(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), cu_ptr(k->in[1]),
                                     cu_ptr(k->in[2]), cu_ptr(k->in[3]), cu_ptr(k->in[4]), y->size, C, S, eps),
                    "BatchNormalization kernel");
}

/* ---- FusedBatchNorm, FusedBatchNormGrad (training) --------------------------------------------------------- */

static wf_status *fbn_check(wf__kctx *k, bool grad, const char *const *pname)
{
    int bad = wf__ku_fbn_bad_input((const wf_tensor *const *)k->in, k->n_in, grad);
    if (bad < 0) return NULL;
    const wf_tensor *x = k->in[grad ? 1 : 0], *p = k->in[bad];
    char b0[160], b1[160], msg[480];
    cu_tstr(x, b0);
    cu_tstr(p, b1);
    wf__ku_fbn_message((const wf_tensor *const *)k->in, bad, grad, pname, b0, b1, msg, sizeof msg);
    return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", msg);
}

static int64_t fbn_inner(const wf_tensor *x)
{
    int64_t N, C, S;
    wf__ku_fbn_geom(x, &N, &C, &S);
    return S;
}

static wf_status *k_fused_bn(wf__kctx *k)
{
    static const char *const pname[3] = {"x", "scale", "offset"};
    wf_status *s = fbn_check(k, false, pname);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    int64_t C = x->dims[1];
    wf_tensor *y, *mt, *vt;
    if ((s = cu_enter(k)) || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) ||
        (s = cu_host->kctx_output(k, 1, x->dtype, 1, &C, &mt)) || (s = cu_host->kctx_output(k, 2, x->dtype, 1, &C, &vt)) ||
        C == 0)
        return s;
    /* an empty batch: 0/0 in the kernel, NaN statistics */
    double eps = cu_host->attr_get(k->op, k->attrs, "epsilon")->f;
    return cu_check(k, cuk_fused_bn(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), cu_ptr(k->in[1]), cu_ptr(k->in[2]),
                                    cu_ptr(mt), cu_ptr(vt), x->dims[0], C, fbn_inner(x), eps),
                    "FusedBatchNorm kernel");
}

static wf_status *k_fused_bn_grad(wf__kctx *k)
{
    static const char *const pname[7] = {"dy", "x", "scale", "batch_mean", "batch_variance", "d_mean", "d_variance"};
    wf_status *s = fbn_check(k, true, pname);
    if (s) return s;
    const wf_tensor *dy = k->in[0], *x = k->in[1];
    const wf_tensor *dmt = k->n_in > 5 ? k->in[5] : NULL, *dvt = k->n_in > 6 ? k->in[6] : NULL;
    int64_t C = x->dims[1];
    wf_tensor *dx, *ds, *dof;
    if ((s = cu_enter(k)) || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &dx)) ||
        (s = cu_host->kctx_output(k, 1, x->dtype, 1, &C, &ds)) || (s = cu_host->kctx_output(k, 2, x->dtype, 1, &C, &dof)) ||
        C == 0)
        return s;
    /* an empty batch: no terms, zero parameter gradients and an empty dx */
    double eps = cu_host->attr_get(k->op, k->attrs, "epsilon")->f;
    return cu_check(k, cuk_fused_bn_grad(cu_of(k)->compute, x->dtype, cu_ptr(dy), cu_ptr(x), cu_ptr(dx), cu_ptr(k->in[2]),
                                         cu_ptr(k->in[3]), cu_ptr(k->in[4]), dmt ? cu_ptr(dmt) : NULL,
                                         dvt ? cu_ptr(dvt) : NULL, cu_ptr(ds), cu_ptr(dof), x->dims[0], C, fbn_inner(x),
                                         eps),
                    "FusedBatchNormGrad kernel");
}

/* ---- LayerNormalization ---------------------------------------------------------------------------------- */

static wf_status *k_layernorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *sc = k->in[1], *bi = k->n_in > 2 ? k->in[2] : NULL;
    char b0[160], b1[160];
    int a;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b0));
    for (int i = 0; i < 2; i++) {
        const wf_tensor *p = i ? bi : sc;
        if (p && (p->dtype != x->dtype || !wf__ku_ln_param_fits(p, x, a)))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s does not match X %s from axis %d", i ? "B" : "Scale",
                                      cu_tstr(p, b1), cu_tstr(x, b0), a);
    }
    int64_t rows, D, mdims[WF_MAX_RANK];
    wf__ku_ln_split(x->rank, x->dims, a, &rows, &D, mdims);
    wf_status *s = cu_enter(k);
    wf_tensor *y, *mt = NULL, *it = NULL;
    if (!s) s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (!s && k->n_out > 1) s = cu_host->kctx_output(k, 1, WF_F32, x->rank, mdims, &mt);
    if (!s && k->n_out > 2) s = cu_host->kctx_output(k, 2, WF_F32, x->rank, mdims, &it);
    if (s || rows == 0) return s;
    int nr = x->rank - a;
    int64_t nd[WF_MAX_RANK], ss[WF_MAX_RANK], bs[WF_MAX_RANK] = {0};
    for (int i = 0; i < nr; i++) nd[i] = x->dims[a + i];
    wf__ku_ln_param_strides(sc, x, a, ss);
    if (bi) wf__ku_ln_param_strides(bi, x, a, bs);
    /* D == 0: no elements to normalise, and the statistics of an empty set are NaN (0/0 in the kernel) */
    double eps = cu_host->attr_get(k->op, k->attrs, "epsilon")->f;
    return cu_check(k, cuk_layernorm(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), cu_ptr(sc), bi ? cu_ptr(bi) : NULL,
                                     mt ? cu_ptr(mt) : NULL, it ? cu_ptr(it) : NULL, rows, D, eps, nr, nd, ss, bs),
                    "LayerNormalization kernel");
}

/* ---- Dropout (inference) --------------------------------------------------------------------------------- */

static wf_status *k_dropout(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *tm = k->n_in > 2 ? k->in[2] : NULL;
    wf_status *s = cu_enter(k);
    if (s) return s;
    if (tm && tm->size >= 1) {
        unsigned char on = 0;
        if ((s = cu_read(k, tm, &on, 1))) return s;
        if (on) return cu_host->kctx_fail(k, WF_UNIMPLEMENTED, "training mode not supported yet");
    }
    if ((s = cu_host->kctx_output_view(k, 0, 0, x->rank, x->dims)) || k->n_out < 2) return s;
    wf_tensor *mask;
    if ((s = cu_host->kctx_output(k, 1, WF_BOOL, x->rank, x->dims, &mask)) || !mask->size) return s;
    return cu_check(k, (int)cudaMemsetAsync(cu_ptr(mask), 1, (size_t)mask->size, cu_of(k)->compute), "mask fill");
}

#define RED_DT (WF__DT_NUMERIC)

const wf__kernel_def cu_kernels_reduce[] = {
    {"ReduceSum", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceMean", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceMax", "GPU", WF__DT_ALL, 0, k_reduce, NULL, 0},
    {"ReduceMin", "GPU", WF__DT_ALL, 0, k_reduce, NULL, 0},
    {"ReduceProd", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"Softmax", "GPU", WF__DT_FLOATS, 0, k_softmax, NULL, 0},
    {"LogSoftmax", "GPU", WF__DT_FLOATS, 0, k_softmax, NULL, 0},
    {"ArgMax", "GPU", WF__DT_NUMERIC, 0, k_arg, NULL, 0},
    {"ArgMin", "GPU", WF__DT_NUMERIC, 0, k_arg, NULL, 0},
    {"BatchNormalization", "GPU", WF__DT_FLOATS, 0, k_batchnorm, NULL, 0},
    {"FusedBatchNorm", "GPU", WF__DT_FLOATS, 0, k_fused_bn, NULL, 0},
    {"FusedBatchNormGrad", "GPU", WF__DT_FLOATS, 0, k_fused_bn_grad, NULL, 0},
    {"LayerNormalization", "GPU", WF__DT_FLOATS, 0, k_layernorm, NULL, 0},
    {"Dropout", "GPU", WF__DT_NUMERIC, 0, k_dropout, NULL, 0},
    {0},
};
