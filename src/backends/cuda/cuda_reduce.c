/*
 * Host side of the CUDA reductions (ReduceSum/Mean/Max/Min/Prod over any axes, given as an attribute or
 * as input 1), Softmax / LogSoftmax over any axis, ArgMax/ArgMin, BatchNormalization (inference),
 * LayerNormalization and inference-mode Dropout. Semantics follow src/backends/cpu/k_reduce.c:
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

/* ---- ArgMax / ArgMin ------------------------------------------------------------------------------------ */

static wf_status *k_arg(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160];
    int a;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b0));
    bool keepdims = cu_host->attr_get(k->op, k->attrs, "keepdims")->i != 0;
    int last = cu_host->attr_get(k->op, k->attrs, "select_last_index")->i != 0;
    int is_max = !strcmp(k->op->name, "ArgMax");
    int64_t ydims[WF_MAX_RANK], outer = 1, inner = 1, R = x->dims[a];
    int yr = 0;
    for (int i = 0; i < x->rank; i++) {
        if (i < a) outer *= x->dims[i];
        if (i > a) inner *= x->dims[i];
        if (i != a) ydims[yr++] = x->dims[i];
        else if (keepdims) ydims[yr++] = 1;
    }
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

/* ---- LayerNormalization ---------------------------------------------------------------------------------- */

static bool param_fits(const wf_tensor *p, const wf_tensor *x, int a)
{
    int nr = x->rank - a;
    if (p->rank > nr) return false;
    for (int d = 0; d < p->rank; d++) {
        int64_t pd = p->dims[p->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
        if (pd != xd && pd != 1) return false;
    }
    return true;
}

/* A parameter's element strides over the normalised dims x.dims[a:] (0 where it broadcasts). */
static void param_strides(const wf_tensor *p, const wf_tensor *x, int a, int64_t *st)
{
    int nr = x->rank - a;
    int64_t acc = 1, ps[WF_MAX_RANK];
    for (int i = p->rank - 1; i >= 0; i--) {
        ps[i] = acc;
        acc *= p->dims[i];
    }
    for (int i = 0; i < nr; i++) {
        int pi = i - (nr - p->rank);
        st[i] = pi >= 0 && p->dims[pi] != 1 ? ps[pi] : 0;
    }
}

static wf_status *k_layernorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *sc = k->in[1], *bi = k->n_in > 2 ? k->in[2] : NULL;
    char b0[160], b1[160];
    int a;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b0));
    for (int i = 0; i < 2; i++) {
        const wf_tensor *p = i ? bi : sc;
        if (p && (p->dtype != x->dtype || !param_fits(p, x, a)))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s does not match X %s from axis %d", i ? "B" : "Scale",
                                      cu_tstr(p, b1), cu_tstr(x, b0), a);
    }
    int64_t rows = 1, D = 1, mdims[WF_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        if (i < a) rows *= x->dims[i];
        else D *= x->dims[i];
        mdims[i] = i < a ? x->dims[i] : 1;
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y, *mt = NULL, *it = NULL;
    if (!s) s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (!s && k->n_out > 1) s = cu_host->kctx_output(k, 1, WF_F32, x->rank, mdims, &mt);
    if (!s && k->n_out > 2) s = cu_host->kctx_output(k, 2, WF_F32, x->rank, mdims, &it);
    if (s || rows == 0) return s;
    int nr = x->rank - a;
    int64_t nd[WF_MAX_RANK], ss[WF_MAX_RANK], bs[WF_MAX_RANK] = {0};
    for (int i = 0; i < nr; i++) nd[i] = x->dims[a + i];
    param_strides(sc, x, a, ss);
    if (bi) param_strides(bi, x, a, bs);
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
    {"ReduceMax", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceMin", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"ReduceProd", "GPU", RED_DT, 0, k_reduce, NULL, 0},
    {"Softmax", "GPU", WF__DT_FLOATS, 0, k_softmax, NULL, 0},
    {"LogSoftmax", "GPU", WF__DT_FLOATS, 0, k_softmax, NULL, 0},
    {"ArgMax", "GPU", WF__DT_NUMERIC, 0, k_arg, NULL, 0},
    {"ArgMin", "GPU", WF__DT_NUMERIC, 0, k_arg, NULL, 0},
    {"BatchNormalization", "GPU", WF__DT_FLOATS, 0, k_batchnorm, NULL, 0},
    {"LayerNormalization", "GPU", WF__DT_FLOATS, 0, k_layernorm, NULL, 0},
    {"Dropout", "GPU", WF__DT_NUMERIC, 0, k_dropout, NULL, 0},
    {0},
};
