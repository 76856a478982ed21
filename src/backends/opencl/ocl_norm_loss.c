/*
 * OpenCL host side of Group/InstanceNormalization, RMSNormalization, MeanVarianceNormalization, LRN and
 * the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss); their kernels are in ocl_norm.c's
 * program. Semantics are the CPU's (k_misc_norm.c, k_onnx.c).
 */
#include <stdio.h>

#include "backends/opencl/ocl_norm.h"

static bool norm_axis(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

/* ---- Group/InstanceNormalization ------------------------------------------------------------------------ */

/* Input idx must be 1-D with n or n2 values of X's dtype. */
static wf_status *channel_vec(wf__kctx *k, int idx, const char *what, int64_t n, int64_t n2)
{
    const wf_tensor *p = k->in[idx], *x = k->in[0];
    char b0[160], b1[160];
    if (p->rank != 1 || (p->dims[0] != n && p->dims[0] != n2) || p->dtype != x->dtype)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be 1-D with %lld values of input %s", what,
                                   ocl_nnr_tstr(p, b1), (long long)n, ocl_nnr_tstr(x, b0));
    return NULL;
}

wf_status *ocl_norm_k_groupnorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    bool group = !strcmp(k->op->name, "GroupNormalization");
    int min_rank = group ? 2 : 3;
    if (x->rank < min_rank)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= %d", ocl_nnr_tstr(x, b), min_rank);
    int64_t N = x->dims[0], C = x->dims[1], S = 1;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    int64_t G = group ? ocl_host->attr_get(k->op, k->attrs, "num_groups")->i : C;
    if (G < 1 || C % G)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "num_groups %lld must divide the channels of input %s",
                                   (long long)G, ocl_nnr_tstr(x, b));
    wf_status *s = channel_vec(k, 1, "scale", C, group ? G : C);
    if (!s) s = channel_vec(k, 2, group ? "bias" : "B", k->in[1]->dims[0], k->in[1]->dims[0]);
    wf_tensor *y;
    if (s || (s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !x->size) return s;
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, "gnorm", &kern))) return s;
    const wf_tensor *sc = k->in[1], *bi = k->in[2];
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y), sm = ocl_mem(sc), bm = ocl_mem(bi);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), so = ocl_off(sc), bo = ocl_off(bi), len = (cl_ulong)((C / G) * S),
             Su = (cl_ulong)S, Cu = (cl_ulong)C, Gu = (cl_ulong)G;
    /* opset 18 GroupNormalization: one scale and bias per group */
    cl_int per_group = sc->dims[0] != C;
    ocl_nnr_dbl eps = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "epsilon")->f);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(sm), OCL_ARG(so), OCL_ARG(bm),
                      OCL_ARG(bo), OCL_ARG(len), OCL_ARG(Su), OCL_ARG(Cu), OCL_ARG(Gu), OCL_ARG(per_group), OCL_DBL(eps)};
    size_t gsz = (size_t)(N * G);
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, NULL);
}

/* ---- RMSNormalization ----------------------------------------------------------------------------------- */

wf_status *ocl_norm_k_rmsnorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *p = k->in[1];
    char b0[160], b1[160];
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    int a;
    if (!norm_axis(axis, x->rank, &a))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                   ocl_nnr_tstr(x, b0));
    int nr = x->rank - a;
    bool ok = p->rank <= nr && p->dtype == x->dtype;
    for (int d = 0; ok && d < p->rank; d++)
        if (p->dims[p->rank - 1 - d] != 1 && p->dims[p->rank - 1 - d] != x->dims[x->rank - 1 - d]) ok = false;
    if (!ok)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "scale %s does not broadcast to the normalised dims of X %s",
                                   ocl_nnr_tstr(p, b1), ocl_nnr_tstr(x, b0));
    int64_t M = 1, rows = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < a) rows *= x->dims[d];
        else M *= x->dims[d];
    }
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (s || !x->size) return s;
    /* the scale's element strides over x.dims[a:], 0 where it broadcasts */
    cl_ulong8 nd, ss;
    memset(&nd, 0, sizeof nd);
    memset(&ss, 0, sizeof ss);
    int64_t pst[WF_MAX_RANK], acc = 1;
    for (int i = p->rank - 1; i >= 0; i--) {
        pst[i] = acc;
        acc *= p->dims[i];
    }
    for (int i = 0; i < nr; i++) {
        nd.s[i] = (cl_ulong)x->dims[a + i];
        int pi = i - (nr - p->rank);
        if (pi >= 0 && p->dims[pi] != 1) ss.s[i] = (cl_ulong)pst[pi];
    }
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, "rmsnorm", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y), pm = ocl_mem(p);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), po = ocl_off(p), Mu = (cl_ulong)M;
    cl_int nri = nr;
    ocl_nnr_dbl eps = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "epsilon")->f);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym),  OCL_ARG(yo), OCL_ARG(pm), OCL_ARG(po),
                      OCL_ARG(Mu), OCL_ARG(nri), OCL_ARG(nd), OCL_ARG(ss), OCL_DBL(eps)};
    size_t gsz = (size_t)rows;
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, NULL);
}

/* ---- MeanVarianceNormalization ------------------------------------------------------------------------------ */

wf_status *ocl_norm_k_mvn(wf__kctx *k)
{
    static const int64_t def[3] = {0, 2, 3};
    const wf_tensor *x = k->in[0];
    const wf__attr *ax = ocl_host->attr_get(k->op, k->attrs, "axes");
    const int64_t *axes = ax->n ? ax->ints : def;
    int n = ax->n ? ax->n : 3;
    unsigned mask = 0;
    for (int i = 0; i < n; i++) {
        int a;
        if (!norm_axis(axes[i], x->rank, &a) || (mask & (1u << a)))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for rank %d",
                                       (long long)axes[i], x->rank);
        mask |= 1u << a;
    }
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (s || !x->size) return s;
    ocl_norm_plan p;
    ocl_norm_plan_make(x, mask, &p);
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, "mvn", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm),   OCL_ARG(xo),   OCL_ARG(ym),   OCL_ARG(yo),   OCL_ARG(p.nk),   OCL_ARG(p.kd),
                      OCL_ARG(p.ks), OCL_ARG(p.nr), OCL_ARG(p.rd), OCL_ARG(p.rs), OCL_ARG(p.count)};
    size_t gsz = (size_t)((cl_ulong)x->size / p.count);
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, NULL);
}

/* ---- LRN ---------------------------------------------------------------------------------------------------- */

wf_status *ocl_norm_k_lrn(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank < 3)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 3", ocl_nnr_tstr(x, b));
    int64_t size = ocl_host->attr_get(k->op, k->attrs, "size")->i, S = 1;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (s || !x->size) return s;
    cl_kernel kern;
    if ((s = ocl_norm_kernel(k, x->dtype, "lrn", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), C = (cl_ulong)x->dims[1], Su = (cl_ulong)S;
    cl_long lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size - 1) / 2 */
    ocl_nnr_dbl alpha = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "alpha")->f),
                beta = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "beta")->f),
                bias = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "bias")->f),
                sz = ocl_nnr_dbl_of(k, (double)size);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(C), OCL_ARG(Su),
                      OCL_ARG(lo), OCL_ARG(hi), OCL_DBL(alpha), OCL_DBL(beta), OCL_DBL(bias), OCL_DBL(sz)};
    size_t gsz = (size_t)x->size;
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, NULL);
}

/* ---- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss -------------------------------------------------- */

/* A target outside [0, C) that is not ignore_index fails the run, as on the CPU (whose message names
 * it): a kernel checks them on the device and reports to the error record, nothing is read back; the
 * loss kernel gives such a target a zero loss and weight. */
static wf_status *check_targets(wf__kctx *k, const wf_tensor *t, int64_t C, const wf__attr *ia)
{
    int64_t ign = ia->i;
    return ocl_check_ints(k, t, OCL_SITE_TARGET, 0, C - 1, false, ia->set ? &ign : NULL, C, "");
}

wf_status *ocl_norm_k_loss(wf__kctx *k)
{
    char b0[160], b1[160];
    const wf_tensor *x = k->in[0], *t = k->in[1], *w = k->n_in > 2 ? k->in[2] : NULL;
    const wf__attr *ia = ocl_host->attr_get(k->op, k->attrs, "ignore_index");
    const char *red = ocl_host->attr_get(k->op, k->attrs, "reduction")->s;
    bool softmax = !strcmp(k->op->name, "SoftmaxCrossEntropyLoss"), none = red && !strcmp(red, "none");
    if (x->rank < 2 || t->rank != x->rank - 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must have input %s's shape without dim 1",
                                   ocl_nnr_tstr(t, b1), ocl_nnr_tstr(x, b0));
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] != x->dims[d ? d + 1 : 0])
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must have input %s's shape without dim 1",
                                       ocl_nnr_tstr(t, b1), ocl_nnr_tstr(x, b0));
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "target %s must be i32 or i64", ocl_nnr_tstr(t, b1));
    int64_t N = x->dims[0], C = x->dims[1], D = 1;
    for (int d = 2; d < x->rank; d++) D *= x->dims[d];
    if (w && (w->rank != 1 || w->dims[0] != C || w->dtype != x->dtype))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "weight %s must have one value per class (%lld) of X's dtype",
                                   ocl_nnr_tstr(w, b1), (long long)C);
    wf_status *s = check_targets(k, t, C, ia);
    if (s) return s;
    size_t es = ocl_size(x->dtype), dbl = ocl_of(k)->fp64 ? sizeof(cl_double) : sizeof(cl_float);
    int64_t ND = N * D;
    cl_mem lpm = ocl_mem(x), lm = NULL, wsm = NULL, lsm = NULL;
    cl_ulong lpo = ocl_off(x), lo = 0;
    wf_tensor *y, *yl = NULL;
    cl_kernel kern;
    if (softmax) {
        /* the log-probabilities go to output 1 when it is wanted, else to a scratch buffer */
        if (k->n_out > 1) {
            if ((s = ocl_host->kctx_output(k, 1, x->dtype, x->rank, x->dims, &yl))) return s;
            lpm = ocl_mem(yl);
            lpo = ocl_off(yl);
        } else {
            if ((s = ocl_norm_scratch(k, (size_t)x->size * es, &lsm))) return s;
            lpm = lsm;
            lpo = 0;
        }
    }
    if (none) {
        if ((s = ocl_host->kctx_output(k, 0, x->dtype, t->rank, t->dims, &y))) goto done;
        lm = ocl_mem(y);
        lo = ocl_off(y);
    } else {
        if ((s = ocl_host->kctx_output(k, 0, x->dtype, 0, NULL, &y))) goto done;
        if ((s = ocl_norm_scratch(k, (size_t)ND * es, &lm))) goto done;
    }
    if ((s = ocl_norm_scratch(k, (size_t)ND * dbl, &wsm))) goto done;
    if (softmax && ND > 0 && C > 0) {
        if ((s = ocl_norm_kernel(k, x->dtype, "logsm", &kern))) goto done;
        cl_mem xm = ocl_mem(x);
        cl_ulong xo = ocl_off(x), Cu = (cl_ulong)C, Du = (cl_ulong)D;
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(lpm), OCL_ARG(lpo), OCL_ARG(Cu), OCL_ARG(Du)};
        size_t gsz = (size_t)ND;
        if ((s = ocl_launch(k, kern, 6, args, 1, &gsz, NULL))) goto done;
    }
    if (ND > 0) {
        if ((s = ocl_norm_kernel(k, x->dtype, "nll", &kern))) goto done;
        cl_mem tm = ocl_mem(t), wm = w ? ocl_mem(w) : lpm;
        cl_ulong to = ocl_off(t), wo = w ? ocl_off(w) : 0, Cu = (cl_ulong)C, Du = (cl_ulong)D;
        cl_int t64 = t->dtype == WF_I64, has_w = w != NULL, has_ign = ia->set;
        cl_long ign = ia->i;
        ocl_arg args[] = {OCL_ARG(lpm), OCL_ARG(lpo),  OCL_ARG(tm),      OCL_ARG(to),  OCL_ARG(t64),
                          OCL_ARG(wm),  OCL_ARG(wo),   OCL_ARG(has_w),   OCL_ARG(has_ign), OCL_ARG(ign),
                          OCL_ARG(lm),  OCL_ARG(lo),   OCL_ARG(wsm),     OCL_ARG(Cu),  OCL_ARG(Du)};
        size_t gsz = (size_t)ND;
        if ((s = ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, NULL))) goto done;
    }
    if (!none) {
        if ((s = ocl_norm_kernel(k, x->dtype, "nll_red", &kern))) goto done;
        cl_mem ym = ocl_mem(y);
        cl_ulong yo = ocl_off(y), n = (cl_ulong)ND;
        cl_int mean = !red || strcmp(red, "sum") != 0;
        ocl_arg args[] = {OCL_ARG(lm), OCL_ARG(lo), OCL_ARG(wsm), OCL_ARG(n), OCL_ARG(mean), OCL_ARG(ym), OCL_ARG(yo)};
        size_t gsz = 64, lsz = 64;
        s = ocl_launch(k, kern, 7, args, 1, &gsz, &lsz);
    }
done:
    /* queued kernels keep released buffers alive until they finish */
    if (lsm) clReleaseMemObject(lsm);
    if (lm && !none) clReleaseMemObject(lm);
    if (wsm) clReleaseMemObject(wsm);
    return s;
}
