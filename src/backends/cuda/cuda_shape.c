/*
 * Host side of the CUDA shape ops: zero-copy views (Identity, Reshape, Flatten, Squeeze, Unsqueeze) and
 * the data movers Transpose, Concat, Split, Slice, Expand, DepthToSpace/SpaceToDepth and Gather, which run
 * as one generic strided-copy kernel (Gather as an indexed copy), and Pad / Tile (one padding kernel). Shape arguments given as tensors are read back from the device; the rules
 * follow src/backends/cpu/k_shape.c and src/graph/ops_shape.c.
 */
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "ops/kutil_shape.h"

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
    int64_t d[WF_MAX_RANK], known;
    int bad = 0;
    switch (wf__ku_reshape_dims(x->rank, x->dims, x->size, n, shape, allowzero, d, &known, &bad)) {
    case WF__KU_RESHAPE_TWO_NEG: return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape has more than one -1");
    case WF__KU_RESHAPE_NEG_DIM: return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape has an entry below -1");
    case WF__KU_RESHAPE_COPY_OOR:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape entry %d is 0 but input %s has no dim %d", bad,
                                  cu_tstr(x, b), bad);
    case WF__KU_RESHAPE_ZERO_NEG:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape has both 0 and -1 with allowzero=1");
    case WF__KU_RESHAPE_INFER:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reshape input %s: -1 cannot be inferred",
                                  cu_tstr(x, b));
    case WF__KU_RESHAPE_COUNT:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reshape input %s of %lld elements to %d dims of %lld",
                                  cu_tstr(x, b), (long long)x->size, n, (long long)known);
    default: break;
    }
    return cu_host->kctx_output_view(k, 0, 0, n, d);
}

static wf_status *k_squeeze(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    int64_t axes[WF_MAX_RANK], d[WF_MAX_RANK];
    int n = 0, r, bad = 0;
    bool has = k->n_in > 1 && k->in[1];
    if (has) {
        wf_status *s = cu_enter(k);
        if (s || (s = cu_read_ints(k, k->in[1], axes, WF_MAX_RANK, &n, "axes"))) return s;
    }
    switch (wf__ku_squeeze_dims(x->rank, x->dims, n, has ? axes : NULL, d, &r, &bad)) {
    case 1:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axes of input %s are out of range or repeated", cu_tstr(x, b));
    case 2:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot squeeze axis %d of input %s: its size is not 1", bad,
                                  cu_tstr(x, b));
    default: break;
    }
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
    int64_t d[WF_MAX_RANK];
    int bad = wf__ku_unsqueeze_dims(x->rank, x->dims, n, axes, d);
    if (bad >= 0)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for output rank %d",
                                  (long long)axes[bad], r);
    return cu_host->kctx_output_view(k, 0, 0, r, d);
}

/* ---- movers -------------------------------------------------------------------------------------------- */

static wf_status *k_transpose(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    const wf__attr *pa = cu_host->attr_get(k->op, k->attrs, "perm");
    int r = x->rank, perm[WF_MAX_RANK];
    char b[160];
    switch (wf__ku_perm(pa->n, pa->ints, r, perm)) {
    case 1: return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "perm has %d entries for input %s", pa->n, cu_tstr(x, b));
    case 2:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "perm is not a permutation of the axes of input %s",
                                  cu_tstr(x, b));
    default: break;
    }
    int64_t d[WF_MAX_RANK], xst[WF_MAX_RANK], yst[WF_MAX_RANK], sst[WF_MAX_RANK];
    for (int i = 0; i < r; i++) d[i] = x->dims[perm[i]];
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    wf__ku_strides(r, x->dims, xst);
    wf__ku_strides(r, d, yst);
    for (int i = 0; i < r; i++) sst[i] = xst[perm[i]];
    return strided_copy(k, cu_size(x->dtype), cu_ptr(x), cu_ptr(y), r, d, yst, sst);
}

static wf_status *k_concat(wf__kctx *k)
{
    const wf_tensor *x0 = k->in[0];
    int r = x0->rank, a;
    char b0[160], b1[160];
    if (!wf__ku_norm_axis(cu_host->attr_get(k->op, k->attrs, "axis")->i, r, &a))
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
        if (wf__add_overflow_i64(d[a], x->dims[a], &d[a]))
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "the sizes of axis %d sum past int64 at input %d %s", a, i,
                                      cu_tstr(x, b1));
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x0->dtype, r, d, &y)) || !y->size) return s;
    int64_t yst[WF_MAX_RANK], xst[WF_MAX_RANK], at = 0;
    size_t es = cu_size(x0->dtype);
    wf__ku_strides(r, d, yst);
    for (int i = 0; i < k->n_in && !s; i++) {
        const wf_tensor *x = k->in[i];
        wf__ku_strides(r, x->dims, xst);
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
    int ns, ne, na = 0, nsp = 0;
    char b[160];
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], st, WF_MAX_RANK, &ns, "starts")) ||
        (s = cu_read_ints(k, k->in[2], en, WF_MAX_RANK, &ne, "ends")))
        return s;
    bool has_ax = k->n_in > 3 && k->in[3], has_sp = k->n_in > 4 && k->in[4];
    if ((has_ax && (s = cu_read_ints(k, k->in[3], ax, WF_MAX_RANK, &na, "axes"))) ||
        (has_sp && (s = cu_read_ints(k, k->in[4], sp, WF_MAX_RANK, &nsp, "steps"))))
        return s;
    if (!wf__ku_slice_defaults(ns, ne, has_ax, ax, &na, has_sp, sp, &nsp))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "starts, ends, axes and steps have %d, %d, %d and %d values", ns,
                                  ne, na, nsp);
    int64_t d[WF_MAX_RANK], sst[WF_MAX_RANK], off;
    int bad = 0;
    wf__ku_strides(r, x->dims, sst);
    switch (wf__ku_slice_plan(r, x->dims, ns, st, en, ax, sp, d, sst, &off, &bad)) {
    case 1:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for input %s",
                                  (long long)ax[bad], cu_tstr(x, b));
    case 2: return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "step %d is 0", bad);
    default: break;
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    int64_t yst[WF_MAX_RANK];
    wf__ku_strides(r, d, yst);
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
    if (!wf__ku_norm_axis(cu_host->attr_get(k->op, k->attrs, "axis")->i, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s",
                                  (long long)cu_host->attr_get(k->op, k->attrs, "axis")->i, cu_tstr(x, b0));
    if (x->rank + idx->rank - 1 > WF_MAX_RANK)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output of data %s and indices %s exceeds rank %d", cu_tstr(x, b0),
                                  cu_tstr(idx, b1), WF_MAX_RANK);
    int64_t dim = x->dims[a];
    wf_status *s = cu_enter(k);
    if (s) return s;
    /* the range check runs in the kernel, which reports the first bad index through the device's error
     * record (cu_err_site): no read-back here; an empty axis makes every index bad */
    if (idx->size && dim == 0)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "indices %s are out of range for the empty axis %d of data %s",
                                  cu_tstr(idx, b1), a, cu_tstr(x, b0));
    int64_t d[WF_MAX_RANK], outer = 1, inner = 1;
    int r = 0;
    for (int i = 0; i < a; i++) d[r++] = x->dims[i], outer *= x->dims[i];
    for (int i = 0; i < idx->rank; i++) d[r++] = idx->dims[i];
    for (int i = a + 1; i < x->rank; i++) d[r++] = x->dims[i], inner *= x->dims[i];
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    cuk_err *err;
    unsigned long long site;
    if ((s = cu_err_site(k, CU_SITE_GATHER, a, idx, x, &err, &site))) return s;
    return cu_check(k, cuk_gather(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(idx), idx->dtype == WF_I64,
                                  cu_ptr(y), outer, idx->size, inner, dim, err, site),
                    "Gather kernel");
}

static bool has_in(const wf__kctx *k, int i) { return i < k->n_in && k->in[i] != NULL; }

static wf_status *k_split(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    int ax, n = k->n_out;
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!wf__ku_norm_axis(axis, x->rank, &ax))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b));
    int64_t *sizes = cu_host->malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!sizes) return cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %d outputs", n);
    wf_status *s = cu_enter(k);
    int64_t dim = x->dims[ax];
    if (!s && has_in(k, 1)) {
        const wf_tensor *sp = k->in[1];
        char b1[160];
        if ((sp->dtype != WF_I32 && sp->dtype != WF_I64) || sp->rank > 1 || sp->size != n) {
            s = cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'split' %s must hold %d i32/i64 sizes", cu_tstr(sp, b1), n);
        } else {
            void *raw = cu_host->malloc((size_t)(n + 1) * 8);
            if (!raw) s = cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory reading %d split sizes", n);
            else s = cu_read(k, sp, raw, (size_t)n * cu_size(sp->dtype));
            int64_t sum = 0;
            bool neg = false;
            for (int i = 0; i < n && !s; i++) {
                sizes[i] = cu_int_at(raw, sp->dtype, i);
                neg = neg || sizes[i] < 0;
                sum += sizes[i];
            }
            cu_host->free(raw);
            if (!s && (neg || sum != dim))
                s = cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                       "split sizes must be %d non-negative sizes summing to %lld, axis %d of input %s", n,
                                       (long long)dim, ax, cu_tstr(x, b));
        }
    } else if (!s) {
        if (!wf__ku_split_even(dim, n, sizes))
            s = cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot split axis %d of input %s into %d outputs", ax,
                                   cu_tstr(x, b), n);
    }
    int64_t xst[WF_MAX_RANK], at = 0;
    size_t es = cu_size(x->dtype);
    wf__ku_strides(x->rank, x->dims, xst);
    for (int i = 0; i < n && !s; i++) {
        int64_t d[WF_MAX_RANK], yst[WF_MAX_RANK];
        memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
        d[ax] = sizes[i];
        wf_tensor *y;
        if ((s = cu_host->kctx_output(k, i, x->dtype, x->rank, d, &y))) break;
        wf__ku_strides(x->rank, d, yst);
        if (y->size)
            s = strided_copy(k, es, (const char *)cu_ptr(x) + (size_t)(at * xst[ax]) * es, cu_ptr(y), x->rank, d, yst, xst);
        at += sizes[i];
    }
    cu_host->free(sizes);
    return s;
}

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

static wf_status *pad_launch(wf__kctx *k, const wf_tensor *x, const wf_tensor *y, const int64_t *pb, int mode,
                             uint64_t pat)
{
    int64_t ist[WF_MAX_RANK];
    wf__ku_strides(x->rank, x->dims, ist);
    return cu_check(k, cuk_pad(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(y), y->size, x->rank, y->dims,
                               x->dims, pb, ist, mode, pat),
                    "Pad kernel");
}

static wf_status *k_pad(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[160], b2[160];
    const char *ms = cu_host->attr_get(k->op, k->attrs, "mode")->s;
    if (!ms) ms = "constant";
    int mode = !strcmp(ms, "reflect") ? PAD_REFLECT : !strcmp(ms, "edge") ? PAD_EDGE : !strcmp(ms, "wrap") ? PAD_WRAP
             : PAD_CONSTANT;
    int r = x->rank, np_, na;
    int64_t p[2 * WF_MAX_RANK], ax[WF_MAX_RANK];
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], p, 2 * WF_MAX_RANK, &np_, "pads"))) return s;
    if (has_in(k, 3)) {
        if ((s = cu_read_ints(k, k->in[3], ax, WF_MAX_RANK, &na, "axes"))) return s;
    } else {
        na = r;
        for (int i = 0; i < r; i++) ax[i] = i;
    }
    if (np_ != 2 * na)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "pads has %d values; data %s with %d padded axes needs %d", np_,
                                  cu_tstr(x, b1), na, 2 * na);
    uint64_t pat = 0;
    size_t es = cu_size(x->dtype);
    if (has_in(k, 2) && mode == PAD_CONSTANT) {
        const wf_tensor *cv = k->in[2];
        if (cv->dtype != x->dtype || cv->size > 1)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "constant_value %s must be a scalar of data's dtype %s",
                                      cu_tstr(cv, b1), cu_dtype_name(x->dtype));
        /* little-endian: the element's bytes are the low bytes of pat */
        if (cv->size && (s = cu_read(k, cv, &pat, es))) return s;
    }
    int64_t d[WF_MAX_RANK], pb[WF_MAX_RANK];
    int bad = 0;
    switch (wf__ku_pad_plan(r, x->dims, na, ax, p, mode == PAD_CONSTANT, d, pb, &bad)) {
    case 1:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for data %s",
                                  (long long)ax[bad], cu_tstr(x, b1));
    case 2:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "pads crop axis %d of data %s below zero", bad, cu_tstr(x, b1));
    case 3:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "mode '%s' cannot pad the empty axis %d of data %s", ms, bad,
                                  cu_tstr(x, b2));
    case 4:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "padding axis %d of data %s overflows int64", bad,
                                  cu_tstr(x, b1));
    default: break;
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    return pad_launch(k, x, y, pb, mode, pat);
}

static wf_status *k_tile(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    int64_t rep[WF_MAX_RANK];
    int n, r = x->rank;
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], rep, WF_MAX_RANK, &n, "repeats"))) return s;
    if (n != r)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "repeats has %d values but data %s has rank %d", n, cu_tstr(x, b),
                                  r);
    int64_t d[WF_MAX_RANK], pb[WF_MAX_RANK] = {0};
    int bad = 0;
    switch (wf__ku_tile_dims(r, x->dims, rep, d, &bad)) {
    case 1:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "repeats has a negative value (%lld at %d)",
                                  (long long)rep[bad], bad);
    case 2:
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output dim %d (%lld x %lld) overflows int64: data %s", bad,
                                  (long long)x->dims[bad], (long long)rep[bad], cu_tstr(x, b));
    default: break;
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    /* output coordinate c reads source coordinate c % dim: a wrap-mode pad with no begin padding */
    return pad_launch(k, x, y, pb, PAD_WRAP, 0);
}

static wf_status *k_expand(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b1[160];
    int64_t v[WF_MAX_RANK];
    int n;
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_ints(k, k->in[1], v, WF_MAX_RANK, &n, "shape"))) return s;
    int64_t d[WF_MAX_RANK];
    bool same;
    int r = wf__ku_expand_dims(x->rank, x->dims, NULL, n, v, d, NULL, &same);
    if (r < 0)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot broadcast input %s to a shape of %d dims", cu_tstr(x, b1),
                                  n);
    if (same) return cu_host->kctx_output_view(k, 0, 0, r, d);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) || !y->size) return s;
    /* operand 0 the output itself (its full shape), operand 1 the broadcast input */
    int ranks[2] = {r, x->rank};
    const int64_t *dims[2] = {d, x->dims};
    cuk_walk w;
    cu_walk_bcast(&w, 2, ranks, dims, r, d);
    return cu_check(k, cuk_copy(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), cu_ptr(y), &w, y->size),
                    "Expand kernel");
}

/* DepthToSpace / SpaceToDepth as one 6-D transposing copy (the OpenCL backend's decomposition). */
static wf_status *k_d2s(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    bool d2s = !strcmp(k->op->name, "DepthToSpace");
    int64_t bs = cu_host->attr_get(k->op, k->attrs, "blocksize")->i;
    if (x->rank != 4) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must be 4-D", cu_tstr(x, b));
    const wf__attr *ma = cu_host->attr_get(k->op, k->attrs, "mode");
    bool dcr = !ma || !ma->s || !strcmp(ma->s, "DCR");
    int64_t od[6], st[6], yd[4], yst[6];
    if (!wf__ku_d2s_plan(d2s, dcr, bs, x->dims, od, st, yd))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s does not divide into blocks of %lld", cu_tstr(x, b),
                                  (long long)bs);
    wf__ku_strides(6, od, yst);
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, 4, yd, &y)) || !y->size) return s;
    return strided_copy(k, cu_size(x->dtype), cu_ptr(x), cu_ptr(y), 6, od, yst, st);
}

const wf__kernel_def cu_kernels_shape[] = {
    {"Identity", "GPU", WF__DT_ALL, 0, k_identity, NULL, 0},
    {"PlaceholderWithDefault", "GPU", WF__DT_ALL, 0, k_identity, NULL, 0}, /* its default, when not fed */
    {"Reshape", "GPU", WF__DT_ALL, 0, k_reshape, NULL, 0},
    {"Flatten", "GPU", WF__DT_ALL, 0, k_flatten, NULL, 0},
    {"Squeeze", "GPU", WF__DT_ALL, 0, k_squeeze, NULL, 0},
    {"Unsqueeze", "GPU", WF__DT_ALL, 0, k_unsqueeze, NULL, 0},
    {"Transpose", "GPU", WF__DT_ALL, 0, k_transpose, NULL, 0},
    {"Concat", "GPU", WF__DT_ALL, 0, k_concat, NULL, 0},
    {"Slice", "GPU", WF__DT_ALL, 0, k_slice, NULL, 0},
    {"Gather", "GPU", WF__DT_ALL, 0, k_gather, NULL, 0},
    {"Split", "GPU", WF__DT_ALL, 0, k_split, NULL, 0},
    {"Pad", "GPU", WF__DT_ALL, 0, k_pad, NULL, 0},
    {"Tile", "GPU", WF__DT_ALL, 0, k_tile, NULL, 0},
    {"Expand", "GPU", WF__DT_ALL, 0, k_expand, NULL, 0},
    {"DepthToSpace", "GPU", WF__DT_ALL, 0, k_d2s, NULL, 0},
    {"SpaceToDepth", "GPU", WF__DT_ALL, 0, k_d2s, NULL, 0},
    {0},
};
