/*
 * Registry entries for the ops the ONNX conformance suite asks for beyond the core set: indexing
 * (GatherElements, ScatterElements, NonZero, Compress, TopK, ...), scans, the remaining normalisations
 * and reductions, Einsum and Resize. Signatures and defaults follow the latest ONNX opset. Kernels are
 * in src/backends/cpu/k_misc*.c.
 */
#include "graph/ops_misc.h"
#include "ops/kutil_resize.h"

#include <math.h>
#include <stdio.h>

#define SB 160

/* An omitted optional input (ONNX "") arrives as a shorter input list or as an input without a dtype. */
static bool in_present(const wf__infer_ctx *c, int i) { return i < c->n_in && c->in[i].dtype != WF_DTYPE_INVALID; }

static const char *tstr(const wf__tinfo *t, char *buf) { return wf__tinfo_str(t, buf); }

static wf_status *need_rank(const wf__infer_ctx *c, int idx, int min, const char *what)
{
    char b[SB];
    if (c->in[idx].rank >= 0 && c->in[idx].rank < min)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must have rank >= %d", what, tstr(&c->in[idx], b), min);
    return NULL;
}

static wf_status *need_index(const wf__infer_ctx *c, int idx, const char *what)
{
    char b[SB];
    if (c->in[idx].dtype != WF_I32 && c->in[idx].dtype != WF_I64)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must be i32 or i64", what, tstr(&c->in[idx], b));
    return NULL;
}

/* A shape-like scalar input (CumSum's axis, Trilu's k, TopK's K): rank 0 or one element. */
static wf_status *need_scalar_int(const wf__infer_ctx *c, int idx, const char *what)
{
    char b[SB];
    WF__TRY(need_index(c, idx, what));
    const wf__tinfo *t = &c->in[idx];
    int64_t n = wf__numel(t->rank, t->dims);
    if (t->rank > 1 || (n >= 0 && n != 1))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must be a scalar or hold one value", what, tstr(t, b));
    return NULL;
}

static bool const_scalar(const wf__infer_ctx *c, int idx, int64_t *v)
{
    int n = 0;
    int64_t vals[1];
    if (!wf__infer_const_ints(c, idx, vals, 1, &n) || n != 1) return false;
    *v = vals[0];
    return true;
}

static wf_status *same_dtype(const wf__infer_ctx *c, int idx, const char *what)
{
    char b0[SB], b1[SB];
    if (c->in[idx].dtype != c->in[0].dtype)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must have the dtype of input 0 %s", what,
                              tstr(&c->in[idx], b1), tstr(&c->in[0], b0));
    return NULL;
}

static void unknown_shape(wf__tinfo *t, int rank)
{
    t->rank = rank;
    for (int i = 0; i < WF_MAX_RANK; i++) t->dims[i] = -1;
}

/* ---- GatherElements / ScatterElements ------------------------------------------------------------- */

/* data and indices have one rank; off the axis, indices may be no longer than data. */
static wf_status *check_elements(wf__infer_ctx *c, const wf__tinfo *x, const wf__tinfo *ix, int *axis)
{
    char b0[SB], b1[SB];
    WF__TRY(need_index(c, 1, "indices"));
    *axis = -1;
    if (x->rank < 0) return NULL;
    int64_t a = WF__IC_I(c, "axis");
    if (!wf__norm_axis(a, x->rank, axis))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for data %s", (long long)a,
                              tstr(x, b0));
    if (ix->rank < 0) return NULL;
    if (ix->rank != x->rank)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "indices %s must have the rank of data %s", tstr(ix, b1),
                              tstr(x, b0));
    for (int d = 0; d < x->rank; d++)
        if (d != *axis && ix->dims[d] >= 0 && x->dims[d] >= 0 && ix->dims[d] > x->dims[d])
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "indices %s is larger than data %s in dim %d",
                                  tstr(ix, b1), tstr(x, b0), d);
    return NULL;
}

static wf_status *infer_gather_elements(wf__infer_ctx *c)
{
    int a;
    WF__TRY(check_elements(c, &c->in[0], &c->in[1], &a));
    c->out[0] = c->in[1];
    c->out[0].dtype = c->in[0].dtype;
    return NULL;
}

static const char *const k_reductions[] = {"none", "add", "mul", "max", "min", NULL};

static bool in_list(const char *s, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(s, list[i])) return true;
    return false;
}

static wf_status *infer_scatter_elements(wf__infer_ctx *c)
{
    char b1[SB], b2[SB];
    int a;
    WF__TRY(check_elements(c, &c->in[0], &c->in[1], &a));
    WF__TRY(same_dtype(c, 2, "updates"));
    const char *red = WF__IC_S(c, "reduction");
    if (!in_list(red, k_reductions))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "reduction '%s' is not one of none, add, mul, max, min", red);
    if (c->in[0].dtype == WF_BOOL && strcmp(red, "none"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "reduction '%s' needs numeric data, got bool", red);
    const wf__tinfo *ix = &c->in[1], *u = &c->in[2];
    if (ix->rank >= 0 && u->rank >= 0) {
        bool ok = ix->rank == u->rank;
        for (int d = 0; ok && d < ix->rank; d++)
            if (ix->dims[d] >= 0 && u->dims[d] >= 0 && ix->dims[d] != u->dims[d]) ok = false;
        if (!ok)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "updates %s must have the shape of indices %s",
                                  tstr(u, b2), tstr(ix, b1));
    }
    c->out[0] = c->in[0];
    return NULL;
}

/* ---- Trilu, CumSum/CumProd, ReverseSequence ---------------------------------------------------------- */

static wf_status *infer_trilu(wf__infer_ctx *c)
{
    WF__TRY(need_rank(c, 0, 2, "input"));
    if (in_present(c, 1)) WF__TRY(need_scalar_int(c, 1, "k"));
    int64_t up = WF__IC_I(c, "upper");
    if (up != 0 && up != 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "upper must be 0 or 1, got %lld", (long long)up);
    c->out[0] = c->in[0];
    return NULL;
}

static wf_status *infer_cum(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_NUMERIC));
    WF__TRY(need_scalar_int(c, 1, "axis"));
    int64_t a;
    int ax;
    if (c->in[0].rank >= 0 && const_scalar(c, 1, &a) && !wf__norm_axis(a, c->in[0].rank, &ax))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)a,
                              tstr(&c->in[0], b));
    for (int i = 0; i < 2; i++) {
        const char *nm = i ? "reverse" : "exclusive";
        int64_t v = WF__IC_I(c, nm);
        if (v != 0 && v != 1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s must be 0 or 1, got %lld", nm, (long long)v);
    }
    c->out[0] = c->in[0];
    return NULL;
}

static wf_status *infer_reverse_sequence(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    const wf__tinfo *x = &c->in[0], *l = &c->in[1];
    WF__TRY(need_rank(c, 0, 2, "input"));
    WF__TRY(need_index(c, 1, "sequence_lens"));
    int64_t ba = WF__IC_I(c, "batch_axis"), ta = WF__IC_I(c, "time_axis");
    if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "batch_axis %lld and time_axis %lld must be 0 and 1 in some order",
                              (long long)ba, (long long)ta);
    if (l->rank >= 0 && (l->rank != 1 || (x->rank >= 2 && x->dims[ba] >= 0 && l->dims[0] >= 0 && l->dims[0] != x->dims[ba])))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "sequence_lens %s must be 1-D with one length per batch of input %s",
                              tstr(l, b1), tstr(x, b0));
    c->out[0] = *x;
    return NULL;
}

/* ---- TopK ------------------------------------------------------------------------------------------ */

static wf_status *infer_topk(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_NUMERIC));
    WF__TRY(need_scalar_int(c, 1, "K"));
    const wf__tinfo *x = &c->in[0];
    int64_t flags[2] = {WF__IC_I(c, "largest"), WF__IC_I(c, "sorted")};
    for (int i = 0; i < 2; i++)
        if (flags[i] != 0 && flags[i] != 1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s must be 0 or 1, got %lld", i ? "sorted" : "largest",
                                  (long long)flags[i]);
    c->out[0] = *x;
    if (x->rank >= 0) {
        int64_t a = WF__IC_I(c, "axis"), kv;
        int ax;
        if (!wf__norm_axis(a, x->rank, &ax))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)a,
                                  tstr(x, b));
        if (const_scalar(c, 1, &kv)) {
            if (kv < 0 || (x->dims[ax] >= 0 && kv > x->dims[ax]))
                return wf__infer_fail(c, WF_INVALID_ARGUMENT, "K = %lld is out of range for axis %d of input %s",
                                      (long long)kv, ax, tstr(x, b));
            c->out[0].dims[ax] = kv;
        } else {
            c->out[0].dims[ax] = -1;
        }
    }
    c->out[1] = c->out[0];
    c->out[1].dtype = WF_I64;
    return NULL;
}

/* ---- EyeLike, DepthToSpace, SpaceToDepth ------------------------------------------------------------ */

static wf_status *infer_eyelike(wf__infer_ctx *c)
{
    char b[SB];
    if (c->in[0].rank >= 0 && c->in[0].rank != 2)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s must be 2-D", tstr(&c->in[0], b));
    const wf__attr *dt = WF__IC_A(c, "dtype");
    c->out[0] = c->in[0];
    if (dt->set) {
        if (!wf__dtype_valid((wf_dtype)dt->i))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'dtype' is not a valid dtype (%d)", (int)dt->i);
        c->out[0].dtype = (wf_dtype)dt->i;
    }
    return NULL;
}

static wf_status *infer_d2s(wf__infer_ctx *c)
{
    char b[SB];
    const wf__tinfo *x = &c->in[0];
    bool d2s = !strcmp(c->op->name, "DepthToSpace");
    int64_t bs = WF__IC_I(c, "blocksize");
    if (bs < 1) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "blocksize must be >= 1, got %lld", (long long)bs);
    const char *m = WF__IC_S(c, "mode");
    if (strcmp(m, "DCR") && strcmp(m, "CRD"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "mode '%s' is not DCR or CRD", m);
    c->out[0] = *x;
    if (x->rank < 0) return NULL;
    if (x->rank != 4) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %s must be 4-D (N, C, H, W)", tstr(x, b));
    wf__tinfo *y = &c->out[0];
    int64_t bb;
    if (wf__mul_overflow_i64(bs, bs, &bb))
        return wf__infer_overflow(c, "blocksize^2 (%lld^2) overflows int64", (long long)bs);
    if (d2s) {
        if (x->dims[1] >= 0 && x->dims[1] % bb)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "channels of input %s are not a multiple of blocksize^2 = %lld",
                                  tstr(x, b), (long long)bb);
        y->dims[1] = x->dims[1] >= 0 ? x->dims[1] / bb : -1;
        for (int d = 2; d < 4; d++)
            if (x->dims[d] >= 0 && wf__mul_overflow_i64(x->dims[d], bs, &y->dims[d]))
                return wf__infer_overflow(c, "dim %d (%lld) x blocksize %lld overflows int64", d, (long long)x->dims[d],
                                          (long long)bs);
    } else {
        for (int d = 2; d < 4; d++)
            if (x->dims[d] >= 0 && x->dims[d] % bs)
                return wf__infer_fail(c, WF_INVALID_ARGUMENT, "dim %d of input %s is not a multiple of blocksize %lld",
                                      d, tstr(x, b), (long long)bs);
        if (x->dims[1] >= 0 && wf__mul_overflow_i64(x->dims[1], bb, &y->dims[1]))
            return wf__infer_overflow(c, "channels (%lld) x blocksize^2 %lld overflow int64", (long long)x->dims[1],
                                      (long long)bb);
        if (x->dims[1] < 0) y->dims[1] = -1;
        for (int d = 2; d < 4; d++) y->dims[d] = x->dims[d] >= 0 ? x->dims[d] / bs : -1;
    }
    return NULL;
}

/* ---- normalisations ---------------------------------------------------------------------------------- */

static wf_status *check_eps(wf__infer_ctx *c)
{
    double e = WF__IC_F(c, "epsilon");
    if (!(e >= 0)) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "epsilon must be >= 0, got %g", e);
    return NULL;
}

/* Inputs idx.. are 1-D per-channel vectors of X's dtype with `n` values (n2 also accepted, if >= 0). */
static wf_status *check_channel_vec(wf__infer_ctx *c, int idx, const char *what, int64_t n, int64_t n2)
{
    char b0[SB], b1[SB];
    const wf__tinfo *p = &c->in[idx];
    WF__TRY(same_dtype(c, idx, what));
    if (p->rank < 0) return NULL;
    if (p->rank != 1 || (n >= 0 && p->dims[0] >= 0 && p->dims[0] != n && p->dims[0] != n2))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must be 1-D with %lld values for input %s", what,
                              tstr(p, b1), (long long)n, tstr(&c->in[0], b0));
    return NULL;
}

static wf_status *infer_instancenorm(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_rank(c, 0, 3, "input"));
    WF__TRY(check_eps(c));
    int64_t ch = c->in[0].rank >= 2 ? c->in[0].dims[1] : -1;
    WF__TRY(check_channel_vec(c, 1, "scale", ch, -2));
    WF__TRY(check_channel_vec(c, 2, "B", ch, -2));
    c->out[0] = c->in[0];
    return NULL;
}

static wf_status *infer_groupnorm(wf__infer_ctx *c)
{
    char b[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_rank(c, 0, 2, "input"));
    WF__TRY(check_eps(c));
    int64_t g = WF__IC_I(c, "num_groups");
    int64_t ch = c->in[0].rank >= 2 ? c->in[0].dims[1] : -1;
    if (g < 1 || (ch >= 0 && ch % g))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "num_groups %lld must be >= 1 and divide the channels of input %s",
                              (long long)g, tstr(&c->in[0], b));
    /* Opset 21 has one scale per channel; opset 18 models carry one per group, which we also accept. */
    WF__TRY(check_channel_vec(c, 1, "scale", ch, g));
    WF__TRY(check_channel_vec(c, 2, "bias", ch, g));
    if (c->in[1].rank == 1 && c->in[2].rank == 1 && c->in[1].dims[0] >= 0 && c->in[2].dims[0] >= 0 &&
        c->in[1].dims[0] != c->in[2].dims[0])
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "scale and bias have different lengths (%lld, %lld)",
                              (long long)c->in[1].dims[0], (long long)c->in[2].dims[0]);
    c->out[0] = c->in[0];
    return NULL;
}

static wf_status *infer_lrn(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_rank(c, 0, 3, "input"));
    int64_t size = WF__IC_I(c, "size");
    if (size < 1) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "size must be >= 1, got %lld", (long long)size);
    c->out[0] = c->in[0];
    return NULL;
}

/* Normalised axes as a bitmask; axes empty means def[0..n_def). */
static wf_status *axes_mask(wf__infer_ctx *c, const wf__attr *a, const int64_t *def, int n_def, unsigned *mask)
{
    char b[SB];
    const int64_t *v = a->n ? a->ints : def;
    int n = a->n ? a->n : n_def;
    *mask = 0;
    if (c->in[0].rank < 0) return NULL;
    for (int i = 0; i < n; i++) {
        int ax;
        if (!wf__norm_axis(v[i], c->in[0].rank, &ax))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)v[i],
                                  tstr(&c->in[0], b));
        if (*mask & (1u << ax))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is repeated in axes", (long long)v[i]);
        *mask |= 1u << ax;
    }
    return NULL;
}

static wf_status *infer_mvn(wf__infer_ctx *c)
{
    static const int64_t def[3] = {0, 2, 3};
    unsigned m;
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(axes_mask(c, WF__IC_A(c, "axes"), def, 3, &m));
    c->out[0] = c->in[0];
    return NULL;
}

static wf_status *infer_rmsnorm(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(check_eps(c));
    WF__TRY(same_dtype(c, 1, "scale"));
    const wf__tinfo *x = &c->in[0], *p = &c->in[1];
    if (x->rank >= 0) {
        int64_t axis = WF__IC_I(c, "axis");
        int a;
        if (!wf__norm_axis(axis, x->rank, &a))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                  tstr(x, b0));
        if (p->rank >= 0) {
            /* scale broadcasts (one way) to the normalised dims X.shape[axis:] */
            bool ok = p->rank <= x->rank - a;
            for (int d = 0; ok && d < p->rank; d++) {
                int64_t pd = p->dims[p->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
                if (pd >= 0 && xd >= 0 && pd != xd && pd != 1) ok = false;
            }
            if (!ok)
                return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                      "scale %s does not broadcast to the normalised dims (from axis %d) of X %s",
                                      tstr(p, b1), a, tstr(x, b0));
        }
    }
    c->out[0] = *x;
    return NULL;
}

/* ---- Reduce{L1,SumSquare,LogSum,LogSumExp}: the conventions of ops_reduce.c ------------------------ */

static wf_status *infer_reduce(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_NUMERIC));
    const wf__tinfo *x = &c->in[0];
    wf__tinfo *y = &c->out[0];
    const wf__attr *attr = WF__IC_A(c, "axes");
    int64_t keepdims = WF__IC_I(c, "keepdims"), noop = WF__IC_I(c, "noop_with_empty_axes");
    if (keepdims != 0 && keepdims != 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "keepdims must be 0 or 1, got %lld", (long long)keepdims);
    if (noop != 0 && noop != 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "noop_with_empty_axes must be 0 or 1, got %lld", (long long)noop);
    int64_t axes[WF_MAX_RANK];
    int n = 0;
    bool known = true;
    if (attr->set && in_present(c, 1))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axes given both as an attribute and as input 1; give one of them");
    if (attr->set) {
        if (attr->n > WF_MAX_RANK) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%d axes given", attr->n);
        n = attr->n;
        memcpy(axes, attr->ints, sizeof(int64_t) * (size_t)n);
    } else if (in_present(c, 1)) {
        const wf__tinfo *ax = &c->in[1];
        if ((ax->dtype != WF_I64 && ax->dtype != WF_I32) || ax->rank > 1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axes input %s must be 1-D i64 or i32", tstr(ax, b1));
        known = wf__infer_const_ints(c, 1, axes, WF_MAX_RANK, &n);
    }
    y->dtype = x->dtype;
    if (!known || x->rank < 0) {
        unknown_shape(y, keepdims && x->rank >= 0 ? x->rank : -1);
        if (known && y->rank >= 0) memcpy(y->dims, x->dims, sizeof y->dims);
        return NULL;
    }
    bool red[WF_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int a;
        if (!wf__norm_axis(axes[i], x->rank, &a))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axes[i],
                                  tstr(x, b0));
        if (red[a])
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is repeated in axes for input %s",
                                  (long long)axes[i], tstr(x, b0));
        red[a] = true;
    }
    if (n == 0) {
        if (noop) {
            *y = *x;
            return NULL;
        }
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!red[i]) y->dims[r++] = x->dims[i];
        else if (keepdims) y->dims[r++] = 1;
    }
    y->rank = r;
    return NULL;
}

static wf_status *infer_global_max_pool(wf__infer_ctx *c)
{
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_FLOATS));
    WF__TRY(need_rank(c, 0, 3, "input"));
    c->out[0] = c->in[0];
    for (int d = 2; d < c->in[0].rank; d++) c->out[0].dims[d] = 1;
    return NULL;
}

/* ---- NonZero, Compress ------------------------------------------------------------------------------- */

static wf_status *infer_nonzero(wf__infer_ctx *c)
{
    /* A scalar has no coordinates: [0, nnz], as the ONNX reference. */
    unknown_shape(&c->out[0], 2);
    c->out[0].dtype = WF_I64;
    if (c->in[0].rank >= 0) c->out[0].dims[0] = c->in[0].rank;
    return NULL;
}

static wf_status *infer_compress(wf__infer_ctx *c)
{
    char b0[SB], b1[SB];
    const wf__tinfo *x = &c->in[0], *cond = &c->in[1];
    if (cond->dtype != WF_BOOL || cond->rank > 1 || cond->rank == 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "condition %s must be a 1-D bool tensor", tstr(cond, b1));
    const wf__attr *ax = WF__IC_A(c, "axis");
    int a = -1;
    if (ax->set && x->rank >= 0 && !wf__norm_axis(ax->i, x->rank, &a))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)ax->i,
                              tstr(x, b0));
    int64_t len = ax->set ? (a >= 0 ? x->dims[a] : -1) : wf__numel(x->rank, x->dims);
    if (cond->rank == 1 && cond->dims[0] >= 0 && len >= 0 && cond->dims[0] > len)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "condition %s is longer than the %lld entries of input %s it selects from",
                              tstr(cond, b1), (long long)len, tstr(x, b0));
    int64_t nnz = -1;
    if (c->in_value[1]) {
        nnz = 0;
        for (int64_t i = 0; i < c->in_value[1]->size; i++) nnz += ((const uint8_t *)c->in_value[1]->data)[i] != 0;
    }
    c->out[0].dtype = x->dtype;
    if (!ax->set) {
        unknown_shape(&c->out[0], 1);
        c->out[0].dims[0] = nnz;
    } else {
        c->out[0] = *x;
        if (a >= 0) c->out[0].dims[a] = nnz;
    }
    return NULL;
}

/* ---- Einsum ------------------------------------------------------------------------------------------- */

static wf_status *infer_einsum(wf__infer_ctx *c)
{
    char err[256];
    int ranks[WF__EINSUM_MAX_IN];
    int64_t dims[WF__EINSUM_MAX_IN][WF_MAX_RANK];
    if (c->n_in > WF__EINSUM_MAX_IN)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%d inputs; at most %d", c->n_in, WF__EINSUM_MAX_IN);
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_NUMERIC));
    for (int i = 0; i < c->n_in; i++) {
        if (i) WF__TRY(same_dtype(c, i, "input"));
        if (c->in[i].rank < 0) {
            unknown_shape(&c->out[0], -1);
            c->out[0].dtype = c->in[0].dtype;
            return NULL;
        }
        ranks[i] = c->in[i].rank;
        memcpy(dims[i], c->in[i].dims, sizeof dims[i]);
    }
    wf__einsum e;
    if (!wf__einsum_parse(WF__IC_S(c, "equation"), c->n_in, ranks, (const int64_t(*)[WF_MAX_RANK])dims, &e, err,
                          sizeof err))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s", err);
    c->out[0].dtype = c->in[0].dtype;
    c->out[0].rank = e.out_rank;
    for (int j = 0; j < e.out_rank; j++) c->out[0].dims[j] = e.label_dim[e.out_label[j]];
    return NULL;
}

/* ---- Resize --------------------------------------------------------------------------------------------- */

bool wf__resize_shape(int rank, const int64_t *x, const int *axes, int n_axes, const double *scales,
                      int n_scales, const int64_t *sizes, int n_sizes, const char *policy, int64_t *out,
                      double *scale, char *err, size_t errlen)
{
    return wf__ku_resize_shape(rank, x, axes, n_axes, scales, n_scales, sizes, n_sizes, policy, out, scale, err,
                               errlen);
}

static const char *const k_ctm[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                     "asymmetric", "tf_crop_and_resize", NULL};
static const char *const k_nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
static const char *const k_modes[] = {"nearest", "linear", "cubic", NULL};

static wf_status *infer_resize(wf__infer_ctx *c)
{
    char b0[SB], b1[SB], err[256];
    WF__TRY(wf__infer_check_dtype(c, 0, WF__DT_NUMERIC));
    const wf__tinfo *x = &c->in[0];
    const char *mode = WF__IC_S(c, "mode"), *ctm = WF__IC_S(c, "coordinate_transformation_mode");
    const char *nm = WF__IC_S(c, "nearest_mode"), *pol = WF__IC_S(c, "keep_aspect_ratio_policy");
    if (!in_list(mode, k_modes)) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "mode '%s' is not nearest, linear or cubic", mode);
    if (!in_list(ctm, k_ctm))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "coordinate_transformation_mode '%s' is not supported", ctm);
    if (!in_list(nm, k_nearest)) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "nearest_mode '%s' is not supported", nm);
    bool has_scales = in_present(c, 2) && c->in[2].rank != 0 && !(c->in[2].rank == 1 && c->in[2].dims[0] == 0);
    bool has_sizes = in_present(c, 3) && c->in[3].rank != 0 && !(c->in[3].rank == 1 && c->in[3].dims[0] == 0);
    if (has_scales == has_sizes)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "give exactly one of scales (input 2) and sizes (input 3)");
    if (has_scales && (!wf__dtype_is_float(c->in[2].dtype) || c->in[2].rank != 1))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "scales %s must be a 1-D float tensor", tstr(&c->in[2], b1));
    if (has_sizes && (c->in[3].dtype != WF_I64 || c->in[3].rank != 1))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "sizes %s must be a 1-D i64 tensor", tstr(&c->in[3], b1));
    if (in_present(c, 1) && !wf__dtype_is_float(c->in[1].dtype))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "roi %s must be a float tensor", tstr(&c->in[1], b1));
    c->out[0].dtype = x->dtype;
    if (x->rank < 0) {
        unknown_shape(&c->out[0], -1);
        return NULL;
    }
    const wf__attr *axa = WF__IC_A(c, "axes");
    int axes[WF_MAX_RANK];
    unsigned seen = 0;
    if (axa->n > x->rank)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%d axes for input %s", axa->n, tstr(x, b0));
    for (int i = 0; i < axa->n; i++) {
        if (!wf__norm_axis(axa->ints[i], x->rank, &axes[i]) || (seen & (1u << axes[i])))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %lld is out of range or repeated for input %s",
                                  (long long)axa->ints[i], tstr(x, b0));
        seen |= 1u << axes[i];
    }
    int want = axa->n ? axa->n : x->rank;
    int vi = has_scales ? 2 : 3;
    if (c->in[vi].dims[0] >= 0 && c->in[vi].dims[0] != want)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s %s must have %d values for input %s",
                              has_scales ? "scales" : "sizes", tstr(&c->in[vi], b1), want, tstr(x, b0));
    unknown_shape(&c->out[0], x->rank);
    const wf_tensor *v = c->in_value[vi];
    if (!v || !wf__tinfo_known(x)) {
        /* Axes that are not resized keep their dims. */
        if (axa->n)
            for (int d = 0; d < x->rank; d++)
                if (!(seen & (1u << d))) c->out[0].dims[d] = x->dims[d];
        return NULL;
    }
    double sc[WF_MAX_RANK], scale[WF_MAX_RANK];
    int64_t sz[WF_MAX_RANK];
    for (int64_t i = 0; i < v->size && i < WF_MAX_RANK; i++) {
        if (has_scales) sc[i] = wf__load_f64(v->data, v->dtype, i);
        else sz[i] = wf__load_i64(v->data, v->dtype, i);
    }
    if (!wf__resize_shape(x->rank, x->dims, axes, axa->n, sc, has_scales ? (int)v->size : 0, sz,
                          has_sizes ? (int)v->size : 0, pol, c->out[0].dims, scale, err, sizeof err))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s", err);
    return NULL;
}

/* ---- the table ------------------------------------------------------------------------------------ */

#define REDUCE_OP(NAME)                                                                                    \
    {.name = NAME, .host_in = 1u << 1, .min_in = 1, .max_in = 2, .n_out = 1,                               \
     .attrs = {{"keepdims", WF_ATTR_INT, .i = 1}, {"noop_with_empty_axes", WF_ATTR_INT, .i = 0},            \
               {"axes", WF_ATTR_INTS}},                                                                   \
     .infer = infer_reduce}

const wf__op_def wf__ops_misc[] = {
    {.name = "GatherElements", .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {{"axis", WF_ATTR_INT, .i = 0}},
     .infer = infer_gather_elements},
    {.name = "ScatterElements", .min_in = 3, .max_in = 3, .n_out = 1,
     .attrs = {{"axis", WF_ATTR_INT, .i = 0}, {"reduction", WF_ATTR_STRING, .s = "none"}},
     .infer = infer_scatter_elements},
    {.name = "Trilu", .host_in = 1u << 1, .min_in = 1, .max_in = 2, .n_out = 1, .attrs = {{"upper", WF_ATTR_INT, .i = 1}},
     .infer = infer_trilu},
    {.name = "CumSum", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"exclusive", WF_ATTR_INT, .i = 0}, {"reverse", WF_ATTR_INT, .i = 0}}, .infer = infer_cum},
    {.name = "CumProd", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"exclusive", WF_ATTR_INT, .i = 0}, {"reverse", WF_ATTR_INT, .i = 0}}, .infer = infer_cum},
    {.name = "TopK", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 2,
     .attrs = {{"axis", WF_ATTR_INT, .i = -1}, {"largest", WF_ATTR_INT, .i = 1}, {"sorted", WF_ATTR_INT, .i = 1}},
     .infer = infer_topk},
    {.name = "EyeLike", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"dtype", WF_ATTR_DTYPE, .i = WF_DTYPE_INVALID}, {"k", WF_ATTR_INT, .i = 0}}, .infer = infer_eyelike},
    {.name = "DepthToSpace", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"blocksize", WF_ATTR_INT, .required = true}, {"mode", WF_ATTR_STRING, .s = "DCR"}},
     .infer = infer_d2s},
    {.name = "SpaceToDepth", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"blocksize", WF_ATTR_INT, .required = true}, {"mode", WF_ATTR_STRING, .s = "DCR"}},
     .infer = infer_d2s},
    {.name = "InstanceNormalization", .min_in = 3, .max_in = 3, .n_out = 1,
     .attrs = {{"epsilon", WF_ATTR_FLOAT, .f = 1e-5}}, .infer = infer_instancenorm},
    {.name = "GroupNormalization", .min_in = 3, .max_in = 3, .n_out = 1,
     .attrs = {{"num_groups", WF_ATTR_INT, .required = true}, {"epsilon", WF_ATTR_FLOAT, .f = 1e-5},
               {"stash_type", WF_ATTR_INT, .i = 1}},
     .infer = infer_groupnorm},
    {.name = "LRN", .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{"size", WF_ATTR_INT, .required = true}, {"alpha", WF_ATTR_FLOAT, .f = 1e-4},
               {"beta", WF_ATTR_FLOAT, .f = 0.75}, {"bias", WF_ATTR_FLOAT, .f = 1.0}},
     .infer = infer_lrn},
    {.name = "MeanVarianceNormalization", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {{"axes", WF_ATTR_INTS}},
     .infer = infer_mvn},
    {.name = "RMSNormalization", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"axis", WF_ATTR_INT, .i = -1}, {"epsilon", WF_ATTR_FLOAT, .f = 1e-5},
               {"stash_type", WF_ATTR_INT, .i = 1}},
     .infer = infer_rmsnorm},
    REDUCE_OP("ReduceL1"),
    REDUCE_OP("ReduceSumSquare"),
    REDUCE_OP("ReduceLogSum"),
    REDUCE_OP("ReduceLogSumExp"),
    {.name = "GlobalMaxPool", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_global_max_pool},
    {.name = "NonZero", .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_nonzero},
    {.name = "Compress", .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {{"axis", WF_ATTR_INT, .i = 0}},
     .infer = infer_compress},
    {.name = "ReverseSequence", .min_in = 2, .max_in = 2, .n_out = 1,
     .attrs = {{"batch_axis", WF_ATTR_INT, .i = 1}, {"time_axis", WF_ATTR_INT, .i = 0}},
     .infer = infer_reverse_sequence},
    {.name = "Einsum", .min_in = 1, .max_in = WF__EINSUM_MAX_IN, .n_out = 1,
     .attrs = {{"equation", WF_ATTR_STRING, .required = true}}, .infer = infer_einsum},
    {.name = "Resize", .host_in = 0xeu, .min_in = 1, .max_in = 4, .n_out = 1,
     .attrs = {{"mode", WF_ATTR_STRING, .s = "nearest"},
               {"coordinate_transformation_mode", WF_ATTR_STRING, .s = "half_pixel"},
               {"nearest_mode", WF_ATTR_STRING, .s = "round_prefer_floor"},
               {"cubic_coeff_a", WF_ATTR_FLOAT, .f = -0.75},
               {"exclude_outside", WF_ATTR_INT, .i = 0},
               {"extrapolation_value", WF_ATTR_FLOAT, .f = 0.0},
               {"keep_aspect_ratio_policy", WF_ATTR_STRING, .s = "stretch"},
               {"antialias", WF_ATTR_INT, .i = 0},
               {"axes", WF_ATTR_INTS}},
     .infer = infer_resize},
    {0},
};
