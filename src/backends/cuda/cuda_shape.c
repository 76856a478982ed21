/*
 * Host side of the CUDA shape ops: zero-copy views (Identity, Reshape, Flatten, Squeeze, Unsqueeze) and
 * the data movers Transpose, Concat, Slice and Gather, which all run as one generic strided-copy kernel
 * (Gather as an indexed copy). Shape arguments given as tensors are read back from the device; the rules
 * follow src/backends/cpu/k_shape.c and src/graph/ops_shape.c.
 */
#include <stdio.h>

#include "backends/cuda/cuda.h"

static bool norm_axis(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

static void contiguous(int rank, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= dims[i];
    }
}

/* dst[coord * dst_st] = src[coord * src_st] for every coord in dims (strides in elements). */
static wf_status *strided_copy(wf__kctx *k, size_t es, const void *src, void *dst, int rank, const int64_t *dims,
                               const int64_t *dst_st, const int64_t *src_st)
{
    cuk_walk w;
    memset(&w, 0, sizeof w);
    int64_t total = 1;
    int r = 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 1) continue; /* contributes no offset */
        w.dims[r] = dims[i];
        w.st[0][r] = dst_st[i];
        w.st[1][r] = src_st[i];
        total *= dims[i];
        r++;
    }
    if (!total) return NULL;
    if (r == 0) {
        w.dims[0] = 1;
        r = 1;
    }
    w.rank = r;
    w.small = total <= (int64_t)UINT32_MAX;
    /* rank 1 walks index * stride on the fast path, which needs nothing else */
    return cu_check(k, cuk_copy(cu_of(k)->compute, (int)es, src, dst, &w, total), "strided copy kernel");
}

/* ---- views -------------------------------------------------------------------------------------------- */

static wf_status *k_identity(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    return cu_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
}

static wf_status *k_flatten(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    char b[160];
    if (axis < -x->rank || axis > x->rank)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b));
    int a = (int)(axis < 0 ? axis + x->rank : axis);
    int64_t d[2] = {1, 1};
    for (int i = 0; i < x->rank; i++) d[i >= a] *= x->dims[i];
    return cu_host->kctx_output_view(k, 0, 0, 2, d);
}

static wf_status *k_reshape(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t shape[WF_MAX_RANK];
    int n;
    char b[160];
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], shape, WF_MAX_RANK, &n, "shape"))) return s;
    bool allowzero = cu_host->attr_get(k->op, k->attrs, "allowzero")->i != 0;
    int neg = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        if (shape[i] == 0 && !allowzero) {
            if (i >= x->rank)
                return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape entry %d is 0 but input %s has no dim %d", i,
                                          cu_tstr(x, b), i);
            shape[i] = x->dims[i];
        }
        if (shape[i] == -1) {
            if (neg >= 0) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape has more than one -1");
            neg = i;
        } else if (shape[i] < 0) {
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape entry %d is %lld", i, (long long)shape[i]);
        } else {
            known *= shape[i];
        }
    }
    if (neg >= 0) {
        if (known == 0 || x->size % known)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reshape input %s: -1 cannot be inferred", cu_tstr(x, b));
        shape[neg] = x->size / known;
        known *= shape[neg];
    }
    if (known != x->size)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reshape input %s of %lld elements to %d dims of %lld",
                                  cu_tstr(x, b), (long long)x->size, n, (long long)known);
    return cu_host->kctx_output_view(k, 0, 0, n, shape);
}

static wf_status *k_squeeze(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    bool drop[WF_MAX_RANK] = {0};
    char b[160];
    if (k->n_in > 1 && k->in[1]) {
        int64_t axes[WF_MAX_RANK];
        int n;
        wf_status *s = cu_enter(k);
        if (s || (s = cu_read_ints(k, k->in[1], axes, WF_MAX_RANK, &n, "axes"))) return s;
        for (int i = 0; i < n; i++) {
            int a;
            if (!norm_axis(axes[i], x->rank, &a) || x->dims[a] != 1)
                return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot squeeze axis %lld of input %s",
                                          (long long)axes[i], cu_tstr(x, b));
            drop[a] = true;
        }
    } else {
        for (int i = 0; i < x->rank; i++) drop[i] = x->dims[i] == 1;
    }
    int64_t d[WF_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) d[r++] = x->dims[i];
    return cu_host->kctx_output_view(k, 0, 0, r, d);
}

static wf_status *k_unsqueeze(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int64_t axes[WF_MAX_RANK];
    int n;
    char b[160];
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], axes, WF_MAX_RANK, &n, "axes"))) return s;
    int r = x->rank + n;
    if (r > WF_MAX_RANK)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "unsqueezing input %s by %d axes exceeds rank %d", cu_tstr(x, b), n,
                                  WF_MAX_RANK);
    bool ins[WF_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int a;
        if (!norm_axis(axes[i], r, &a) || ins[a])
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for output rank %d",
                                      (long long)axes[i], r);
        ins[a] = true;
    }
    int64_t d[WF_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) d[i] = ins[i] ? 1 : x->dims[j++];
    return cu_host->kctx_output_view(k, 0, 0, r, d);
}

/* ---- movers -------------------------------------------------------------------------------------------- */

static wf_status *k_transpose(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    const wf__attr *pa = cu_host->attr_get(k->op, k->attrs, "perm");
    int r = x->rank, perm[WF_MAX_RANK];
    bool seen[WF_MAX_RANK] = {0};
    char b[160];
    if (pa->n == 0) {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
    } else {
        if (pa->n != r)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "perm has %d entries for input %s", pa->n, cu_tstr(x, b));
        for (int i = 0; i < r; i++) {
            int a;
            if (!norm_axis(pa->ints[i], r, &a) || seen[a])
                return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "perm is not a permutation of the axes of input %s",
                                          cu_tstr(x, b));
            seen[a] = true;
            perm[i] = a;
        }
    }
    int64_t d[WF_MAX_RANK], xst[WF_MAX_RANK], yst[WF_MAX_RANK], sst[WF_MAX_RANK];
    for (int i = 0; i < r; i++) d[i] = x->dims[perm[i]];
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    contiguous(r, x->dims, xst);
    contiguous(r, d, yst);
    for (int i = 0; i < r; i++) sst[i] = xst[perm[i]];
    return strided_copy(k, cu_size(x->dtype), cu_ptr(x), cu_ptr(y), r, d, yst, sst);
}

static wf_status *k_concat(wf__kctx *k)
{
    const wf_tensor *x0 = k->in[0];
    int r = x0->rank, a;
    char b0[160], b1[160];
    if (!norm_axis(cu_host->attr_get(k->op, k->attrs, "axis")->i, r, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                                  (long long)cu_host->attr_get(k->op, k->attrs, "axis")->i, cu_tstr(x0, b0));
    int64_t d[WF_MAX_RANK];
    memcpy(d, x0->dims, sizeof(int64_t) * (size_t)r);
    d[a] = 0;
    for (int i = 0; i < k->n_in; i++) {
        const wf_tensor *x = k->in[i];
        bool ok = x->rank == r && x->dtype == x0->dtype;
        for (int j = 0; j < r && ok; j++) ok = j == a || x->dims[j] == x0->dims[j];
        if (!ok)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %d %s does not match input 0 %s outside axis %d", i,
                                      cu_tstr(x, b1), cu_tstr(x0, b0), a);
        d[a] += x->dims[a];
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x0->dtype, r, d, &y)) || !y->size) return s;
    int64_t yst[WF_MAX_RANK], xst[WF_MAX_RANK], at = 0;
    size_t es = cu_size(x0->dtype);
    contiguous(r, d, yst);
    for (int i = 0; i < k->n_in && !s; i++) {
        const wf_tensor *x = k->in[i];
        contiguous(r, x->dims, xst);
        s = strided_copy(k, es, cu_ptr(x), (char *)cu_ptr(y) + (size_t)(at * yst[a]) * es, r, x->dims, yst, xst);
        at += x->dims[a];
    }
    return s;
}

static wf_status *k_slice(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    int r = x->rank;
    int64_t st[WF_MAX_RANK], en[WF_MAX_RANK], ax[WF_MAX_RANK], sp[WF_MAX_RANK];
    int ns, ne, na, nsp;
    char b[160];
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], st, WF_MAX_RANK, &ns, "starts")) ||
        (s = cu_read_ints(k, k->in[2], en, WF_MAX_RANK, &ne, "ends")))
        return s;
    if (k->n_in > 3 && k->in[3]) {
        if ((s = cu_read_ints(k, k->in[3], ax, WF_MAX_RANK, &na, "axes"))) return s;
    } else {
        na = ns;
        for (int i = 0; i < na; i++) ax[i] = i;
    }
    if (k->n_in > 4 && k->in[4]) {
        if ((s = cu_read_ints(k, k->in[4], sp, WF_MAX_RANK, &nsp, "steps"))) return s;
    } else {
        nsp = ns;
        for (int i = 0; i < nsp; i++) sp[i] = 1;
    }
    if (ne != ns || na != ns || nsp != ns)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "starts, ends, axes and steps have %d, %d, %d and %d values", ns,
                                  ne, na, nsp);
    int64_t d[WF_MAX_RANK], xst[WF_MAX_RANK], sst[WF_MAX_RANK], off = 0;
    bool touched[WF_MAX_RANK] = {0};
    contiguous(r, x->dims, xst);
    for (int i = 0; i < r; i++) {
        d[i] = x->dims[i];
        sst[i] = xst[i];
    }
    for (int i = 0; i < ns; i++) {
        int a;
        if (!norm_axis(ax[i], r, &a) || touched[a])
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for input %s",
                                      (long long)ax[i], cu_tstr(x, b));
        touched[a] = true;
        int64_t dim = x->dims[a], step = sp[i], s0 = st[i], e = en[i], sz;
        if (step == 0) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "step %d is 0", i);
        if (s0 < 0) s0 += dim;
        if (e < 0) e += dim;
        if (step > 0) {
            s0 = s0 < 0 ? 0 : s0 > dim ? dim : s0;
            e = e < 0 ? 0 : e > dim ? dim : e;
            sz = e > s0 ? (e - s0 + step - 1) / step : 0;
        } else {
            s0 = s0 < 0 ? 0 : s0 > dim - 1 ? dim - 1 : s0;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            sz = s0 > e ? (s0 - e + (-step) - 1) / (-step) : 0;
        }
        d[a] = sz;
        if (sz > 0) off += s0 * xst[a];
        sst[a] = xst[a] * step;
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    int64_t yst[WF_MAX_RANK];
    contiguous(r, d, yst);
    size_t es = cu_size(x->dtype);
    return strided_copy(k, es, (const char *)cu_ptr(x) + (size_t)off * es, cu_ptr(y), r, d, yst, sst);
}

static wf_status *k_gather(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *idx = k->in[1];
    char b0[160], b1[160];
    int a;
    if (idx->dtype != WF_I64 && idx->dtype != WF_I32)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s must be i32 or i64", cu_tstr(idx, b1));
    if (!norm_axis(cu_host->attr_get(k->op, k->attrs, "axis")->i, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                                  (long long)cu_host->attr_get(k->op, k->attrs, "axis")->i, cu_tstr(x, b0));
    if (x->rank + idx->rank - 1 > WF_MAX_RANK)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output of data %s and indices %s exceeds rank %d", cu_tstr(x, b0),
                                  cu_tstr(idx, b1), WF_MAX_RANK);
    int64_t dim = x->dims[a];
    wf_status *s = cu_enter(k);
    if (s) return s;
    /* the range check needs the values on the host: a kernel cannot fail per element */
    if (idx->size) {
        size_t bytes = (size_t)idx->size * cu_size(idx->dtype);
        void *buf = cu_host->malloc(bytes);
        if (!buf) return cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory reading back %zu bytes of indices", bytes);
        s = cu_read(k, idx, buf, bytes);
        for (int64_t i = 0; i < idx->size && !s; i++) {
            int64_t v = cu_int_at(buf, idx->dtype, i);
            if (v < -dim || v >= dim)
                s = cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "index %lld (element %lld of indices %s) is out of range for axis %d of data %s",
                                       (long long)v, (long long)i, cu_tstr(idx, b1), a, cu_tstr(x, b0));
        }
        cu_host->free(buf);
        if (s) return s;
    }
    int64_t d[WF_MAX_RANK], outer = 1, inner = 1;
    int r = 0;
    for (int i = 0; i < a; i++) d[r++] = x->dims[i], outer *= x->dims[i];
    for (int i = 0; i < idx->rank; i++) d[r++] = idx->dims[i];
    for (int i = a + 1; i < x->rank; i++) d[r++] = x->dims[i], inner *= x->dims[i];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    return cu_check(k, cuk_gather(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(idx), idx->dtype == WF_I64,
                                  cu_ptr(y), outer, idx->size, inner, dim),
                    "Gather kernel");
}

const wf__kernel_def cu_kernels_shape[] = {
    {"Identity", "GPU", WF__DT_ALL, 0, k_identity, NULL, 0},
    {"Reshape", "GPU", WF__DT_ALL, 0, k_reshape, NULL, 0},
    {"Flatten", "GPU", WF__DT_ALL, 0, k_flatten, NULL, 0},
    {"Squeeze", "GPU", WF__DT_ALL, 0, k_squeeze, NULL, 0},
    {"Unsqueeze", "GPU", WF__DT_ALL, 0, k_unsqueeze, NULL, 0},
    {"Transpose", "GPU", WF__DT_ALL, 0, k_transpose, NULL, 0},
    {"Concat", "GPU", WF__DT_ALL, 0, k_concat, NULL, 0},
    {"Slice", "GPU", WF__DT_ALL, 0, k_slice, NULL, 0},
    {"Gather", "GPU", WF__DT_ALL, 0, k_gather, NULL, 0},
    {0},
};
