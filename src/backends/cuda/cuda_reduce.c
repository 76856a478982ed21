/*
 * Host side of the CUDA reductions (ReduceSum/Mean/Max/Min/Prod over any axes, given as an attribute or
 * as input 1) and of Softmax / LogSoftmax over any axis. Semantics follow src/backends/cpu/k_reduce.c:
 * float sums accumulate in double, NaN wins Max/Min, integer sums wrap.
 */
#include <stdio.h>

#include "backends/cuda/cuda.h"

static bool norm_axis(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

/* The node's axes (attribute or input 1, read back from the device) as flags in red[]; *none when none
 * were given. */
static wf_status *read_axes(wf__kctx *k, const wf_tensor *x, bool *red, bool *none)
{
    const wf__attr *attr = cu_host->attr_get(k->op, k->attrs, "axes");
    const wf_tensor *at = k->n_in > 1 ? k->in[1] : NULL;
    int64_t axes[WF_MAX_RANK];
    int n = 0;
    char b0[160];
    if (attr && attr->set && at)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axes given both as an attribute and as input 1; give one of them");
    if (attr && attr->set) {
        if (attr->n > WF_MAX_RANK) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "too many axes (%d)", attr->n);
        n = attr->n;
        memcpy(axes, attr->ints, (size_t)n * sizeof *axes);
    } else if (at) {
        wf_status *s = cu_read_ints(k, at, axes, WF_MAX_RANK, &n, "axes");
        if (s) return s;
    }
    for (int i = 0; i < x->rank; i++) red[i] = false;
    *none = n == 0;
    for (int i = 0; i < n; i++) {
        int a;
        if (!norm_axis(axes[i], x->rank, &a))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axes[i],
                                      cu_tstr(x, b0));
        if (red[a]) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is repeated in axes", (long long)axes[i]);
        red[a] = true;
    }
    return NULL;
}

static wf_status *k_reduce(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_status *s = cu_enter(k);
    bool red[WF_MAX_RANK], none = true;
    if (s || (s = read_axes(k, x, red, &none))) return s;
    bool keepdims = cu_host->attr_get(k->op, k->attrs, "keepdims")->i != 0;
    if (none) {
        const wf__attr *noop = cu_host->attr_get(k->op, k->attrs, "noop_with_empty_axes");
        if (noop && noop->i) return cu_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    int64_t ydims[WF_MAX_RANK], count = 1;
    int yr = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) ydims[yr++] = x->dims[i];
        else {
            count *= x->dims[i];
            if (keepdims) ydims[yr++] = 1;
        }
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, yr, ydims, &y)) || !y->size) return s;
    /* adjacent axes of the same role merge; size-1 axes play no part */
    int64_t strides[WF_MAX_RANK], acc = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        strides[i] = acc;
        acc *= x->dims[i];
    }
    int64_t kd[WF_MAX_RANK], ks[WF_MAX_RANK], rd[WF_MAX_RANK], rs[WF_MAX_RANK];
    int nk = 0, nr = 0, last = -1;
    for (int i = 0; i < x->rank; i++) {
        if (x->dims[i] == 1) continue;
        int role = red[i];
        int64_t *dd = role ? rd : kd, *ss = role ? rs : ks;
        int *cnt = role ? &nr : &nk;
        if (last == role) {
            dd[*cnt - 1] *= x->dims[i];
            ss[*cnt - 1] = strides[i];
        } else {
            dd[*cnt] = x->dims[i];
            ss[*cnt] = strides[i];
            (*cnt)++;
        }
        last = role;
    }
    if (nr == 0) { /* only size-1 axes reduced: each output folds one element (still finalised) */
        rd[0] = 1;
        rs[0] = 1;
        nr = 1;
    }
    static const struct {
        const char *op;
        int code;
    } ops[] = {{"ReduceSum", CUK_RSUM}, {"ReduceMean", CUK_RMEAN}, {"ReduceMax", CUK_RMAX}, {"ReduceMin", CUK_RMIN},
               {"ReduceProd", CUK_RPROD}};
    int code = CUK_RSUM;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(k->op->name, ops[i].op)) code = ops[i].code;
    return cu_check(k, cuk_reduce(cu_of(k)->compute, x->dtype, code, cu_ptr(x), cu_ptr(y), y->size, nk, kd, ks, nr, rd, rs,
                                  count),
                    "reduction kernel");
}

static wf_status *k_softmax(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160];
    int a = 0;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (x->rank > 0 && !norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b0));
    int64_t outer = 1, R = 1, inner = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < a) outer *= x->dims[i];
        else if (i == a) R = x->dims[i];
        else inner *= x->dims[i];
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    return cu_check(k, cuk_softmax(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), outer, R, inner,
                                   !strcmp(k->op->name, "LogSoftmax")),
                    "softmax kernel");
}

#define RED_DT (WF__DT_NUMERIC)

const wf__kernel_def cu_kernels_reduce[] = {
    {"ReduceSum", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceMean", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceMax", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceMin", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceProd", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"Softmax", "GPU", WF__DT_FLOATS, 0, k_softmax, NULL, 0},
    {"LogSoftmax", "GPU", WF__DT_FLOATS, 0, k_softmax, NULL, 0},
    {0},
};
