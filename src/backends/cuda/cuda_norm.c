/*
 * Host side of the CUDA normalisations and selections: Reduce{L1,L2,SumSquare,LogSum,LogSumExp},
 * Group/Instance/RMS/MeanVariance normalisation, LRN, LpNormalization, Hardmax, TopK, GlobalMaxPool,
 * LpPool, MaxUnpool, Det, Unique, Compress, NonMaxSuppression and BitCast. Input checks and shape logic
 * follow the OpenCL host code (ocl_norm*.c, ocl_seq.c, ocl_image*.c), semantics the CPU kernels; the
 * device code is cuda_kernels_norm.cu. Values that decide output shapes are read back.
 */
#include <inttypes.h>
#include <stdio.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/cuda_norm.h"
#include "ops/kutil_conv.h"
#include "ops/kutil_half.h"
#include "ops/kutil_reduce.h"
#include "ops/kutil_select.h"
#include "ops/kutil_shape.h"

/* Stream-ordered scratch on the compute stream: freed after the kernels queued before the free. */
static wf_status *scratch(wf__kctx *k, size_t bytes, void **p)
{
    *p = NULL;
    return cu_check(k, (int)cudaMallocAsync(p, bytes ? bytes : 1, cu_of(k)->compute), "scratch allocation");
}

static void scratch_free(wf__kctx *k, void *p)
{
    if (p) cudaFreeAsync(p, cu_of(k)->compute);
}

static wf_status *oom(wf__kctx *k, size_t bytes)
{
    return cu_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %zu bytes of host memory", bytes);
}

static void geom_of(const wf__ku_red_plan *p, cun_geom *g)
{
    memset(g, 0, sizeof *g);
    g->nk = p->nk;
    g->nr = p->nr;
    g->count = p->count;
    for (int i = 0; i < CUN_MAX_RANK; i++) {
        g->kd[i] = i < p->nk ? p->kd[i] : 1;
        g->ks[i] = i < p->nk ? p->ks[i] : 0;
        g->rd[i] = i < p->nr ? p->rd[i] : 1;
        g->rs[i] = i < p->nr ? p->rs[i] : 0;
    }
}

/* ---- Reduce{L1,L2,SumSquare,LogSum,LogSumExp} -------------------------------------------------------- */

static wf_status *k_reduce(wf__kctx *k)
{
    static const struct {
        const char *op;
        int code;
    } ops[] = {{"ReduceL1", CUN_L1}, {"ReduceSumSquare", CUN_SUMSQ}, {"ReduceLogSum", CUN_LOGSUM},
               {"ReduceLogSumExp", CUN_LOGSUMEXP}, {"ReduceL2", CUN_L2}};
    int op = CUN_L1;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(k->op->name, ops[i].op)) op = ops[i].code;
    const wf_tensor *x = k->in[0];
    bool red[WF_MAX_RANK], none = true;
    wf_status *s = cu_enter(k);
    if (s || (s = cu_read_axes(k, x, red, &none))) return s;
    if (none) {
        /* no axes with noop_with_empty_axes: ReduceL2 is the identity (as k_reduce.c), the others fold
         * one element each (as k_misc_norm.c: |x|, x^2, log x) */
        bool noop = cu_host->attr_get(k->op, k->attrs, "noop_with_empty_axes")->i != 0;
        if (noop && op == CUN_L2) return cu_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
        for (int i = 0; i < x->rank; i++) red[i] = !noop;
    }
    bool keep = cu_host->attr_get(k->op, k->attrs, "keepdims")->i != 0;
    int64_t yd[WF_MAX_RANK], count;
    int yr;
    wf__ku_reduce_out(x->rank, x->dims, red, keep, yd, &yr, &count);
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, yr, yd, &y)) || !y->size) return s;
    wf__ku_red_plan p;
    wf__ku_reduce_plan(x->rank, x->dims, red, &p);
    cun_geom g;
    geom_of(&p, &g);
    return cu_check(k, cun_reduce(cu_of(k)->compute, x->dtype, op, cu_ptr(x), cu_ptr(y), y->size, &g), "reduction kernel");
}

static wf_status *k_global_max_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank < 3) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 3", cu_tstr(x, b));
    bool red[WF_MAX_RANK];
    int64_t yd[WF_MAX_RANK], count;
    int yr;
    for (int i = 0; i < x->rank; i++) red[i] = i >= 2;
    wf__ku_reduce_out(x->rank, x->dims, red, true, yd, &yr, &count);
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, yr, yd, &y)) || !y->size) return s;
    wf__ku_red_plan p;
    wf__ku_reduce_plan(x->rank, x->dims, red, &p);
    /* max with NaN winning over the spatial dims: the plain reduction's max (an empty window gives -inf) */
    return cu_check(k, cuk_reduce(cu_of(k)->compute, x->dtype, CUK_RMAX, cu_ptr(x), cu_ptr(y), y->size, p.nk, p.kd, p.ks,
                                  p.nr, p.rd, p.rs, p.count),
                    "GlobalMaxPool kernel");
}

/* ---- MeanVarianceNormalization -------------------------------------------------------------------- */

static wf_status *k_mvn(wf__kctx *k)
{
    static const int64_t def[3] = {0, 2, 3};
    const wf_tensor *x = k->in[0];
    const wf__attr *ax = cu_host->attr_get(k->op, k->attrs, "axes");
    bool red[WF_MAX_RANK];
    int bad = 0;
    if (wf__ku_axes_mark(ax->n ? ax->ints : def, ax->n ? ax->n : 3, x->rank, red, &bad))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for rank %d",
                                  (long long)(ax->n ? ax->ints : def)[bad], x->rank);
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !x->size) return s;
    wf__ku_red_plan p;
    wf__ku_reduce_plan(x->rank, x->dims, red, &p);
    cun_geom g;
    geom_of(&p, &g);
    return cu_check(k, cun_mvn(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), x->size / p.count, &g),
                    "MeanVarianceNormalization kernel");
}

/* ---- Group/InstanceNormalization, RMSNormalization, LRN ---------------------------------------------- */

/* Input idx must be 1-D with n or n2 values of X's dtype. */
static wf_status *channel_vec(wf__kctx *k, int idx, const char *what, int64_t n, int64_t n2)
{
    const wf_tensor *p = k->in[idx], *x = k->in[0];
    char b0[160], b1[160];
    if (!p || p->rank != 1 || (p->dims[0] != n && p->dims[0] != n2) || p->dtype != x->dtype)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be 1-D with %lld values of input %s", what,
                                  p ? cu_tstr(p, b1) : "(missing)", (long long)n, cu_tstr(x, b0));
    return NULL;
}

static wf_status *k_groupnorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    bool group = !strcmp(k->op->name, "GroupNormalization");
    int min_rank = group ? 2 : 3;
    if (x->rank < min_rank)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= %d", cu_tstr(x, b), min_rank);
    int64_t N = x->dims[0], C = x->dims[1], S = 1;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    int64_t G = group ? cu_host->attr_get(k->op, k->attrs, "num_groups")->i : C;
    if (G < 1 || C % G)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "num_groups %lld must divide the channels of input %s",
                                  (long long)G, cu_tstr(x, b));
    wf_status *s = channel_vec(k, 1, "scale", C, group ? G : C);
    if (!s) s = channel_vec(k, 2, group ? "bias" : "B", k->in[1]->dims[0], k->in[1]->dims[0]);
    if (!s) s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !x->size) return s;
    /* opset 18 GroupNormalization: one scale and bias per group */
    int per_group = k->in[1]->dims[0] != C;
    double eps = cu_host->attr_get(k->op, k->attrs, "epsilon")->f;
    return cu_check(k, cun_groupnorm(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), cu_ptr(k->in[1]),
                                     cu_ptr(k->in[2]), N * G, (C / G) * S, S, C, G, per_group, eps),
                    "normalization kernel");
}

static wf_status *k_rmsnorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *p = k->in[1];
    char b0[160], b1[160];
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    int a;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b0));
    int nr = x->rank - a;
    bool ok = p->rank <= nr && p->dtype == x->dtype;
    for (int d = 0; ok && d < p->rank; d++)
        if (p->dims[p->rank - 1 - d] != 1 && p->dims[p->rank - 1 - d] != x->dims[x->rank - 1 - d]) ok = false;
    if (!ok)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "scale %s does not broadcast to the normalised dims of X %s",
                                  cu_tstr(p, b1), cu_tstr(x, b0));
    int64_t M = 1, rows = 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < a) rows *= x->dims[d];
        else M *= x->dims[d];
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !x->size) return s;
    /* the scale's element strides over x.dims[a:], 0 where it broadcasts */
    int64_t nd[WF_MAX_RANK], ss[WF_MAX_RANK], pst[WF_MAX_RANK], acc = 1;
    for (int i = p->rank - 1; i >= 0; i--) {
        pst[i] = acc;
        acc *= p->dims[i];
    }
    for (int i = 0; i < nr; i++) {
        nd[i] = x->dims[a + i];
        int pi = i - (nr - p->rank);
        ss[i] = pi >= 0 && p->dims[pi] != 1 ? pst[pi] : 0;
    }
    double eps = cu_host->attr_get(k->op, k->attrs, "epsilon")->f;
    return cu_check(k, cun_rmsnorm(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), cu_ptr(p), rows, M, nr, nd, ss, eps),
                    "RMSNormalization kernel");
}

static wf_status *k_lrn(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank < 3) return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input %s must have rank >= 3", cu_tstr(x, b));
    int64_t size = cu_host->attr_get(k->op, k->attrs, "size")->i, S = 1;
    for (int d = 2; d < x->rank; d++) S *= x->dims[d];
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !x->size) return s;
    double alpha = cu_host->attr_get(k->op, k->attrs, "alpha")->f, beta = cu_host->attr_get(k->op, k->attrs, "beta")->f,
           bias = cu_host->attr_get(k->op, k->attrs, "bias")->f;
    /* the window is c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2) */
    return cu_check(k, cun_lrn(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), x->size, x->dims[1], S, (size - 1) / 2,
                               size / 2, alpha, beta, bias, (double)size),
                    "LRN kernel");
}

/* ---- Hardmax, LpNormalization ------------------------------------------------------------------------- */

static wf_status *k_line(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    bool lp = !strcmp(k->op->name, "LpNormalization");
    int p = lp ? (int)cu_host->attr_get(k->op, k->attrs, "p")->i : 0;
    if (lp && p != 1 && p != 2)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "attribute 'p' must be 1 or 2, got %d", p);
    int64_t a = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    int axis;
    if (x->rank == 0 || !wf__ku_norm_axis(a, x->rank, &axis))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for rank %d", (long long)a, x->rank);
    int64_t outer, n, inner;
    wf__ku_axis_split(x->rank, x->dims, axis, &outer, &n, &inner);
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !x->size) return s;
    return cu_check(k, cun_line(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), outer, n, inner, p),
                    lp ? "LpNormalization kernel" : "Hardmax kernel");
}

/* ---- TopK ----------------------------------------------------------------------------------------------- */

static wf_status *k_topk(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *kt = k->in[1];
    char b[160];
    int64_t axis = cu_host->attr_get(k->op, k->attrs, "axis")->i;
    int a;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  cu_tstr(x, b));
    if ((kt->dtype != WF_I64 && kt->dtype != WF_I32) || kt->size != 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "K must be a single i64 value, got %s", cu_tstr(kt, b));
    wf_status *s = cu_enter(k);
    int64_t raw = 0;
    if (s || (s = cu_read(k, kt, &raw, cu_size(kt->dtype)))) return s;
    int64_t K = cu_int_at(&raw, kt->dtype, 0);
    if (K < 0 || K > x->dims[a])
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "K = %lld is out of range for axis %d of input %s", (long long)K, a,
                                  cu_tstr(x, b));
    int64_t yd[WF_MAX_RANK], outer, D, inner;
    wf__ku_axis_split(x->rank, x->dims, a, &outer, &D, &inner);
    memcpy(yd, x->dims, sizeof(int64_t) * (size_t)x->rank);
    yd[a] = K;
    wf_tensor *y, *yi;
    if ((s = cu_host->kctx_output(k, 0, x->dtype, x->rank, yd, &y))) return s;
    if ((s = cu_host->kctx_output(k, 1, WF_I64, x->rank, yd, &yi)) || !y->size) return s;
    int largest = cu_host->attr_get(k->op, k->attrs, "largest")->i != 0;
    return cu_check(k, cun_topk(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), cu_ptr(yi), outer, D, K, inner, largest),
                    "TopK kernel");
}

/* ---- LpPool --------------------------------------------------------------------------------------------- */

static wf_status *k_lppool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    const wf__attr *ks = cu_host->attr_get(k->op, k->attrs, "kernel_shape"),
                   *st = cu_host->attr_get(k->op, k->attrs, "strides"),
                   *dl = cu_host->attr_get(k->op, k->attrs, "dilations"), *pd = cu_host->attr_get(k->op, k->attrs, "pads");
    bool ceil_mode = cu_host->attr_get(k->op, k->attrs, "ceil_mode")->i != 0;
    char err[480];
    wf__ku_pool_plan L;
    if (!wf__ku_lppool_plan(x->rank, x->dims, cu_tstr(x, b), ks, st, dl, pd,
                            cu_host->attr_get(k->op, k->attrs, "auto_pad")->s, ceil_mode, &L, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    cun_pool P;
    memset(&P, 0, sizeof P);
    P.ns = L.ns, P.in_plane = L.in_plane, P.out_plane = L.out_plane, P.win = L.win;
    int64_t yd[WF_MAX_RANK] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < L.ns; i++) {
        P.xd[i] = L.in[i], P.od[i] = L.out[i], P.k[i] = L.k[i], P.st[i] = L.s[i], P.dl[i] = L.d[i], P.pb[i] = L.pb[i];
        yd[i + 2] = L.out[i];
    }
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank, yd, &y)) || !y->size) return s;
    double p = (double)cu_host->attr_get(k->op, k->attrs, "p")->i;
    return cu_check(k, cun_lppool(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), y->size, &P, p), "LpPool kernel");
}

/* ---- MaxUnpool ------------------------------------------------------------------------------------------ */

/* Indices address the unpooled tensor of the default shape; with output_shape it sits at the start of
 * each axis of the larger output (as the ONNX reference has it). The kernel checks the indices: a bad one
 * is not written and goes to the device's error record, which fails the run naming the node. */
static wf_status *k_max_unpool(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *I = k->in[1];
    const wf__attr *ks = cu_host->attr_get(k->op, k->attrs, "kernel_shape"),
                   *st = cu_host->attr_get(k->op, k->attrs, "strides"), *pd = cu_host->attr_get(k->op, k->attrs, "pads");
    int nsp = ks->n, rank = nsp + 2;
    if (rank > CUN_MAX_RANK || X->rank != rank || I->rank != rank ||
        memcmp(X->dims, I->dims, sizeof(int64_t) * (size_t)rank) || (I->dtype != WF_I64 && I->dtype != WF_I32))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                  "X and indices must have one shape of rank %d (indices i32 or i64)", rank);
    int64_t inf[WF_MAX_RANK] = {0}, out[WF_MAX_RANK];
    wf__ku_unpool_dims(X->dims, ks, st, pd, inf);
    memcpy(out, inf, sizeof inf);
    wf_status *s = cu_enter(k);
    if (s) return s;
    if (k->n_in > 2 && k->in[2]) {
        int n = 0;
        if ((s = cu_read_ints(k, k->in[2], out, WF_MAX_RANK, &n, "output_shape"))) return s;
        bool ok = n == rank;
        for (int i = 0; ok && i < rank; i++) ok = out[i] >= inf[i] && (i >= 2 || out[i] == inf[i]);
        if (!ok)
            return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "output_shape must have rank %d and hold the unpooled shape",
                                      rank);
    }
    int64_t ud[WF_MAX_RANK], us[WF_MAX_RANK], os[WF_MAX_RANK], so = 1, si = 1;
    for (int i = rank - 1; i >= 0; i--) {
        ud[i] = inf[i], us[i] = si, os[i] = so;
        si *= inf[i], so *= out[i];
    }
    wf_tensor *y;
    if ((s = cu_host->kctx_output(k, 0, X->dtype, rank, out, &y)) || !y->size) return s;
    /* an index outside the unpooled elements fails the run, as on the CPU: the kernel reports it */
    cuk_err *err;
    unsigned long long site;
    if ((s = cu_err_site(k, CU_SITE_UNPOOL, 0, I, X, &err, &site))) return s;
    size_t es = cu_size(X->dtype);
    if ((s = cu_check(k, (int)cudaMemsetAsync(cu_ptr(y), 0, (size_t)y->size * es, cu_of(k)->compute), "output fill")))
        return s;
    return cu_check(k, cun_max_unpool(cu_of(k)->compute, (int)es, cu_ptr(X), cu_ptr(I), I->dtype == WF_I64, cu_ptr(y),
                                      X->size, rank, ud, us, os, err, site),
                    "MaxUnpool kernel");
}

/* ---- Det ------------------------------------------------------------------------------------------------ */

static wf_status *k_det(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[160];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input must have square matrices [..., M, M], got %s",
                                  cu_tstr(x, b));
    int64_t m = x->dims[x->rank - 1];
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, x->dtype, x->rank - 2, x->dims, &y)) || !y->size) return s;
    void *a;
    if ((s = scratch(k, (size_t)x->size * sizeof(double), &a))) return s;
    s = cu_check(k, cun_det(cu_of(k)->compute, x->dtype, cu_ptr(x), cu_ptr(y), a, y->size, m), "Det kernel");
    scratch_free(k, a);
    return s;
}

/* ---- BitCast -------------------------------------------------------------------------------------------- */

static wf_status *k_bitcast(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    wf_dtype to = (wf_dtype)cu_host->attr_get(k->op, k->attrs, "to")->i;
    if (to == WF_DTYPE_INVALID || cu_size(to) != cu_size(X->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reinterpret %s as %s: the sizes differ",
                                  cu_dtype_name(X->dtype), cu_dtype_name(to));
    wf_status *s = cu_enter(k);
    wf_tensor *y;
    if (s || (s = cu_host->kctx_output(k, 0, to, X->rank, X->dims, &y)) || !y->size) return s;
    /* weft's bool is one byte holding 0 or 1; other bytes reinterpreted as bool become 1 */
    if (to == WF_BOOL && X->dtype != WF_BOOL)
        return cu_check(k, cun_to_bool(cu_of(k)->compute, cu_ptr(X), cu_ptr(y), y->size), "BitCast kernel");
    return cu_check(k,
                    (int)cudaMemcpyAsync(cu_ptr(y), cu_ptr(X), (size_t)X->size * cu_size(X->dtype), cudaMemcpyDeviceToDevice,
                                         cu_of(k)->compute),
                    "BitCast copy");
}

/* ---- Compress ------------------------------------------------------------------------------------------- */

static wf_status *k_compress(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *cond = k->in[1];
    if (cond->dtype != WF_BOOL || cond->rank != 1)
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "condition must be a 1-D bool tensor");
    const wf__attr *axa = cu_host->attr_get(k->op, k->attrs, "axis");
    int ax;
    int64_t D, outer, inner;
    char err[256];
    if (!wf__ku_compress_plan(x->rank, x->dims, x->size, axa && axa->set, axa ? axa->i : 0, cond->size, &ax, &D, &outer,
                              &inner, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    wf_status *s = cu_enter(k);
    if (s) return s;
    /* the condition is a small 1-D mask: its selected indices are found here, the data moves on the device */
    size_t n = (size_t)cond->size;
    uint8_t *cv = cu_host->malloc(n ? n : 1);
    int64_t *sel = cu_host->malloc((n ? n : 1) * sizeof(int64_t)), nnz = 0;
    if (!cv || !sel) {
        cu_host->free(cv);
        cu_host->free(sel);
        return oom(k, n * 9);
    }
    if (!(s = cu_read(k, cond, cv, n)))
        for (size_t i = 0; i < n; i++)
            if (cv[i]) sel[nnz++] = (int64_t)i;
    cu_host->free(cv);
    int64_t d[WF_MAX_RANK];
    int r = wf__ku_compress_dims(x->rank, x->dims, ax, nnz, d);
    wf_tensor *y;
    void *ds = NULL;
    if (!s && !(s = cu_host->kctx_output(k, 0, x->dtype, r, d, &y)) && y->size > 0 &&
        !(s = scratch(k, (size_t)nnz * sizeof(int64_t), &ds)) &&
        !(s = cu_check(k,
                       (int)cudaMemcpyAsync(ds, sel, (size_t)nnz * sizeof(int64_t), cudaMemcpyHostToDevice,
                                            cu_of(k)->compute),
                       "upload of the selection")))
        s = cu_check(k, cun_compress(cu_of(k)->compute, (int)cu_size(x->dtype), cu_ptr(x), ds, cu_ptr(y), outer, nnz,
                                     inner, D),
                     "Compress kernel");
    /* pageable memory is staged before cudaMemcpyAsync returns, so sel may go now */
    scratch_free(k, ds);
    cu_host->free(sel);
    return s;
}

/* ---- Unique --------------------------------------------------------------------------------------------- */

static wf_status *k_unique(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    const wf__attr *axa = cu_host->attr_get(k->op, k->attrs, "axis"), *sa = cu_host->attr_get(k->op, k->attrs, "sorted");
    int sorted = !sa || sa->i != 0, a;
    int64_t n, len, inner;
    char err[256];
    if (!wf__ku_unique_plan(X->rank, X->dims, X->size, axa && axa->set, axa ? axa->i : 0, &a, &n, &len, &inner, err,
                            sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    wf_status *s = cu_enter(k);
    if (s) return s;
    int64_t *sc = NULL, ng = 0; /* first, cnt, rank [n each], then the group count */
    if (n > 0) {
        if ((s = scratch(k, (size_t)(3 * n + 1) * sizeof(int64_t), (void **)&sc))) return s;
        s = cu_check(k, cun_unique_plan(cu_of(k)->compute, X->dtype, cu_ptr(X), n, len, inner, sorted, sc, sc + n,
                                        sc + 2 * n, sc + 3 * n),
                     "Unique kernel");
        if (!s)
            s = cu_check(k,
                         (int)cudaMemcpyAsync(&ng, sc + 3 * n, sizeof ng, cudaMemcpyDeviceToHost, cu_of(k)->compute),
                         "read-back of the group count");
        if (!s) s = cu_check(k, (int)cudaStreamSynchronize(cu_of(k)->compute), "read-back of the group count");
    }
    int64_t yd[WF_MAX_RANK], d_ng = ng, d_n = n;
    int yr = wf__ku_unique_dims(X->rank, X->dims, a, ng, yd);
    wf_tensor *y, *t1, *t2, *t3;
    if (!s && !(s = cu_host->kctx_output(k, 0, X->dtype, yr, yd, &y)) &&
        !(s = cu_host->kctx_output(k, 1, WF_I64, 1, &d_ng, &t1)) && !(s = cu_host->kctx_output(k, 2, WF_I64, 1, &d_n, &t2)) &&
        !(s = cu_host->kctx_output(k, 3, WF_I64, 1, &d_ng, &t3)) && n > 0)
        s = cu_check(k, cun_unique_fill(cu_of(k)->compute, (int)cu_size(X->dtype), cu_ptr(X), n, len, inner, ng, sc,
                                        sc + n, sc + 2 * n, cu_ptr(y), cu_ptr(t1), cu_ptr(t2), cu_ptr(t3)),
                     "Unique kernel");
    scratch_free(k, sc);
    return s;
}

/* ---- NonMaxSuppression ---------------------------------------------------------------------------------- */

/* Optional scalar input idx as a double (*has false when omitted or empty); i64 exactly in *iv. */
static wf_status *scalar_in(wf__kctx *k, int idx, bool *has, double *v, int64_t *iv)
{
    *has = false;
    if (idx >= k->n_in || !k->in[idx] || k->in[idx]->size == 0) return NULL;
    const wf_tensor *t = k->in[idx];
    uint64_t raw = 0;
    wf_status *s = cu_read(k, t, &raw, cu_size(t->dtype));
    if (s) return s;
    *v = wf__ku_load_f64(&raw, t->dtype, 0);
    if (iv) *iv = cu_is_int(t->dtype) ? cu_int_at(&raw, t->dtype, 0) : (int64_t)*v;
    *has = true;
    return NULL;
}

static wf_status *k_nms(wf__kctx *k)
{
    const wf_tensor *B = k->in[0], *S = k->in[1];
    if (!wf__ku_nms_shapes(B->rank, B->dims, S->rank, S->dims, S->dtype == B->dtype))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "boxes and scores must be [B, S, 4] and [B, C, S] of one dtype");
    int64_t nb = B->dims[0], ns = B->dims[1], nc = S->dims[1], max_out = 0;
    double mo = 0, iou = 0, sthr = 0;
    bool has_mo, has_iou, use_thr;
    wf_status *s = cu_enter(k);
    if (s || (s = scalar_in(k, 2, &has_mo, &mo, &max_out)) || (s = scalar_in(k, 3, &has_iou, &iou, NULL)) ||
        (s = scalar_in(k, 4, &use_thr, &sthr, NULL)))
        return s;
    char err[128];
    if (!wf__ku_nms_limits(has_mo, max_out, iou, ns, &max_out, err, sizeof err))
        return cu_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    int center = cu_host->attr_get(k->op, k->attrs, "center_point_box")->i != 0;
    int64_t nbc = nb * nc, od[2] = {0, 3};
    wf_tensor *y;
    if (nbc == 0 || ns == 0 || max_out == 0) return cu_host->kctx_output(k, 0, WF_I64, 2, od, &y);
    /* order, sel [nbc * ns each], nsel, start [nbc each] */
    int64_t *sc = NULL, *cnt = cu_host->malloc((size_t)nbc * sizeof(int64_t));
    if (!cnt) return oom(k, (size_t)nbc * sizeof(int64_t));
    int64_t *order, *sel, *nsel, *start;
    if ((s = scratch(k, (size_t)(2 * nbc * ns + 2 * nbc) * sizeof(int64_t), (void **)&sc))) goto done;
    order = sc, sel = sc + nbc * ns, nsel = sel + nbc * ns, start = nsel + nbc;
    if ((s = cu_check(k, cun_nms(cu_of(k)->compute, B->dtype, cu_ptr(B), cu_ptr(S), nbc, ns, nc, use_thr, sthr, iou, center,
                                 max_out, order, sel, nsel),
                      "NonMaxSuppression kernel")))
        goto done;
    if ((s = cu_check(k, (int)cudaMemcpyAsync(cnt, nsel, (size_t)nbc * sizeof(int64_t), cudaMemcpyDeviceToHost,
                                              cu_of(k)->compute),
                      "read-back of the counts")) ||
        (s = cu_check(k, (int)cudaStreamSynchronize(cu_of(k)->compute), "read-back of the counts")))
        goto done;
    int64_t nout = wf__ku_exclusive_scan(cnt, nbc);
    od[0] = nout;
    if ((s = cu_host->kctx_output(k, 0, WF_I64, 2, od, &y)) || nout == 0) goto done;
    if ((s = cu_check(k, (int)cudaMemcpyAsync(start, cnt, (size_t)nbc * sizeof(int64_t), cudaMemcpyHostToDevice,
                                              cu_of(k)->compute),
                      "upload of the row starts")))
        goto done;
    s = cu_check(k, cun_nms_out(cu_of(k)->compute, sel, nsel, start, nbc, ns, nc, cu_ptr(y)), "NonMaxSuppression kernel");
done:
    scratch_free(k, sc);
    cu_host->free(cnt);
    return s;
}

const wf__kernel_def cu_kernels_norm[] = {
    {"ReduceL1", "GPU", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"ReduceL2", "GPU", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"ReduceSumSquare", "GPU", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"ReduceLogSum", "GPU", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"ReduceLogSumExp", "GPU", WF__DT_NUMERIC, 0, k_reduce, NULL, 0},
    {"GroupNormalization", "GPU", WF__DT_FLOATS, 0, k_groupnorm, NULL, 0},
    {"InstanceNormalization", "GPU", WF__DT_FLOATS, 0, k_groupnorm, NULL, 0},
    {"LRN", "GPU", WF__DT_FLOATS, 0, k_lrn, NULL, 0},
    {"LpNormalization", "GPU", WF__DT_FLOATS, 0, k_line, NULL, 0},
    {"MeanVarianceNormalization", "GPU", WF__DT_FLOATS, 0, k_mvn, NULL, 0},
    {"RMSNormalization", "GPU", WF__DT_FLOATS, 0, k_rmsnorm, NULL, 0},
    {"Hardmax", "GPU", WF__DT_FLOATS, 0, k_line, NULL, 0},
    {"TopK", "GPU", WF__DT_NUMERIC, 0, k_topk, NULL, 0},
    {"GlobalMaxPool", "GPU", WF__DT_FLOATS, 0, k_global_max_pool, NULL, 0},
    {"LpPool", "GPU", WF__DT_FLOATS, 0, k_lppool, NULL, 0},
    {"MaxUnpool", "GPU", WF__DT_NUMERIC, 0, k_max_unpool, NULL, 0},
    {"Det", "GPU", WF__DT_FLOATS, 0, k_det, NULL, 0},
    {"Unique", "GPU", WF__DT_ALL, 0, k_unique, NULL, 0},
    {"Compress", "GPU", WF__DT_ALL, 0, k_compress, NULL, 0},
    {"NonMaxSuppression", "GPU", WF__DT_FLOATS, 0, k_nms, NULL, 0},
    {"BitCast", "GPU", WF__DT_ALL, 0, k_bitcast, NULL, 0},
    {0},
};
