/*
 * Shape and data-movement ops: their signatures, attributes and shape inference. Shape-like inputs
 * (Reshape's shape, Slice's starts/ends, Pad's pads...) are read here when they are constants; otherwise
 * the dims they decide stay unknown and the CPU kernels (k_shape*.c) work them out at run time.
 */
#include "ops/kutil_shape.h"
#include "graph/grad.h"
#include "graph/op.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define SB 160 /* wf__shape_str buffer */

/* ---- helpers ------------------------------------------------------------------------------------ */

/* An omitted optional input arrives either past n_in or with an invalid dtype. */
static bool has_in(const wf__infer_ctx *c, int i)
{
    return i < c->n_in && c->in[i].dtype != WF_DTYPE_INVALID;
}

static void set_unknown(wf__tinfo *o, wf_dtype dt, int rank)
{
    o->dtype = dt;
    o->rank = rank;
    for (int i = 0; i < WF_MAX_RANK; i++) o->dims[i] = -1;
}

static void set_shape(wf__tinfo *o, wf_dtype dt, int rank, const int64_t *dims)
{
    o->dtype = dt;
    o->rank = rank;
    for (int i = 0; i < rank; i++) o->dims[i] = dims[i];
}

/* An integer vector input (shape, axes, pads...): i32 or i64, rank 0 or 1, at most max values.
 * *len gets its length when the shape says so, else -1. */
static wf_status *check_int_vec(const wf__infer_ctx *c, int idx, const char *what, int max, int64_t *len)
{
    const wf__tinfo *t = &c->in[idx];
    char b[SB];
    if (t->dtype != WF_I32 && t->dtype != WF_I64)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input '%s' must be i32 or i64, got %s", what,
                              wf__tinfo_str(t, b));
    if (t->rank > 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input '%s' must be 1-D, got %s", what,
                              wf__tinfo_str(t, b));
    int64_t n = t->rank == 0 ? 1 : t->rank == 1 ? t->dims[0] : -1;
    if (n > max)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input '%s' has %" PRId64 " values, at most %d allowed",
                              what, n, max);
    if (len) *len = n;
    return NULL;
}

/* Reads a constant scalar-like input as a double; false if its value is unknown. */
static bool const_f64(const wf__infer_ctx *c, int idx, double *v)
{
    if (!has_in(c, idx) || !c->in_value || !c->in_value[idx]) return false;
    const wf_tensor *t = c->in_value[idx];
    if (t->size != 1) return false;
    *v = wf__load_f64(t->data, t->dtype, 0);
    return true;
}

/* Optional const int vector: *present says whether the input exists, the return whether values are known. */
static bool opt_const_ints(const wf__infer_ctx *c, int idx, int64_t *v, int max, int *n, bool *present)
{
    *present = has_in(c, idx);
    if (!*present) return true;
    return wf__infer_const_ints(c, idx, v, max, n);
}

static int64_t numel_or_unknown(const wf__tinfo *t)
{
    return t->rank < 0 ? -1 : wf__numel(t->rank, t->dims);
}

static wf_status *store_i64_value(wf__infer_ctx *c, int rank, int64_t n, const int64_t *vals)
{
    if (!c->out_value) return NULL;
    wf_tensor *t = NULL;
    wf_status *s = wf_tensor_new(WF_I64, rank, &n, vals, &t);
    if (s) return s;
    c->out_value[0] = t;
    return NULL;
}

static void cost_view(const wf__infer_ctx *c, double *flops, double *bytes)
{
    *flops = 0;
    *bytes = 0;
}

/* Pure data movement: read and write every output byte once. */
static void cost_move(const wf__infer_ctx *c, double *flops, double *bytes)
{
    double b = 0;
    for (int i = 0; i < c->n_out; i++) {
        int64_t n = numel_or_unknown(&c->out[i]);
        if (n > 0) b += (double)n * (double)wf_dtype_size(c->out[i].dtype);
    }
    *flops = 0;
    *bytes = 2 * b;
}

/* ---- Reshape ------------------------------------------------------------------------------------ */

static wf_status *infer_reshape(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    wf__tinfo *o = &c->out[0];
    char b1[SB], b2[SB];
    int64_t len;
    WF__TRY(check_int_vec(c, 1, "shape", WF_MAX_RANK, &len));
    if (c->in[1].rank == 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input 'shape' must be 1-D, got a scalar");
    bool allowzero = WF__IC_I(c, "allowzero") != 0;
    int64_t v[WF_MAX_RANK];
    int n = 0;
    if (!wf__infer_const_ints(c, 1, v, WF_MAX_RANK, &n)) {
        set_unknown(o, x->dtype, len >= 0 ? (int)len : -1);
        return NULL;
    }
    o->dtype = x->dtype;
    o->rank = n;
    int neg = -1;
    bool zero = false, known = true;
    int64_t prod = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] == -1) {
            if (neg >= 0)
                return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape %s has more than one -1",
                                      wf__shape_str(n, v, b1));
            neg = i;
            continue;
        }
        if (v[i] < -1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape %s has a negative dim %" PRId64,
                                  wf__shape_str(n, v, b1), v[i]);
        int64_t d = v[i];
        if (d == 0) {
            zero = true;
            if (!allowzero) {
                if (x->rank >= 0 && i >= x->rank)
                    return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                          "shape %s copies dim %d (0) from input %s, which has rank %d",
                                          wf__shape_str(n, v, b1), i, wf__tinfo_str(x, b2), x->rank);
                d = x->rank >= 0 ? x->dims[i] : -1;
            }
        }
        o->dims[i] = d;
        if (d < 0) known = false;
        else if (wf__mul_overflow_i64(prod, d, &prod))
            return wf__infer_overflow(c, "shape %s overflows int64", wf__shape_str(n, v, b1));
    }
    if (allowzero && zero && neg >= 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape %s has both 0 and -1 with allowzero=1",
                              wf__shape_str(n, v, b1));
    int64_t total = numel_or_unknown(x);
    if (neg >= 0) {
        o->dims[neg] = -1;
        if (total >= 0 && known) {
            if (prod == 0 || total % prod != 0)
                return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                      "cannot reshape %s (%" PRId64 " elements) to shape %s",
                                      wf__tinfo_str(x, b1), total, wf__shape_str(n, v, b2));
            o->dims[neg] = total / prod;
        }
    } else if (total >= 0 && known && total != prod) {
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "cannot reshape %s (%" PRId64 " elements) to shape %s (%" PRId64 " elements)",
                              wf__tinfo_str(x, b1), total, wf__shape_str(n, o->dims, b2), prod);
    }
    return NULL;
}

/* ---- Transpose ---------------------------------------------------------------------------------- */

static wf_status *infer_transpose(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    const wf__attr *pa = WF__IC_A(c, "perm");
    char b1[SB], b2[SB];
    int n = pa->n;
    if (n == 0) {
        if (x->rank < 0) {
            set_unknown(&c->out[0], x->dtype, -1);
            return NULL;
        }
        int64_t d[WF_MAX_RANK];
        for (int i = 0; i < x->rank; i++) d[i] = x->dims[x->rank - 1 - i];
        set_shape(&c->out[0], x->dtype, x->rank, d);
        return NULL;
    }
    if (n > WF_MAX_RANK || (x->rank >= 0 && n != x->rank))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "perm %s has %d entries but the input is %s",
                              wf__shape_str(n < WF_MAX_RANK ? n : WF_MAX_RANK, pa->ints, b1), n,
                              wf__tinfo_str(x, b2));
    bool seen[WF_MAX_RANK] = {0};
    int64_t d[WF_MAX_RANK];
    for (int i = 0; i < n; i++) {
        int ax;
        if (!wf__norm_axis(pa->ints[i], n, &ax) || seen[ax])
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "perm %s is not a permutation of 0..%d",
                                  wf__shape_str(n, pa->ints, b1), n - 1);
        seen[ax] = true;
        d[i] = x->rank >= 0 ? x->dims[ax] : -1;
    }
    set_shape(&c->out[0], x->dtype, n, d);
    return NULL;
}

/* ---- Squeeze / Unsqueeze / Flatten -------------------------------------------------------------- */

static wf_status *infer_squeeze(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b1[SB], b2[SB];
    int64_t len = -1;
    bool present = has_in(c, 1);
    if (present) WF__TRY(check_int_vec(c, 1, "axes", WF_MAX_RANK, &len));
    int64_t v[WF_MAX_RANK];
    int n = 0;
    if (!present) {
        if (x->rank < 0 || !wf__tinfo_known(x)) {
            set_unknown(&c->out[0], x->dtype, -1);
            return NULL;
        }
        int64_t d[WF_MAX_RANK];
        int r = 0;
        for (int i = 0; i < x->rank; i++)
            if (x->dims[i] != 1) d[r++] = x->dims[i];
        set_shape(&c->out[0], x->dtype, r, d);
        return NULL;
    }
    if (!wf__infer_const_ints(c, 1, v, WF_MAX_RANK, &n) || x->rank < 0) {
        int r = (x->rank >= 0 && len >= 0) ? x->rank - (int)len : -1;
        set_unknown(&c->out[0], x->dtype, r < 0 ? -1 : r);
        return NULL;
    }
    bool drop[WF_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int ax;
        if (!wf__norm_axis(v[i], x->rank, &ax))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s",
                                  v[i], wf__tinfo_str(x, b1));
        if (drop[ax])
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axes %s repeat axis %d", wf__shape_str(n, v, b1), ax);
        if (x->dims[ax] >= 0 && x->dims[ax] != 1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "cannot squeeze axis %d of input %s: its size is not 1",
                                  ax, wf__tinfo_str(x, b2));
        drop[ax] = true;
    }
    int64_t d[WF_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) d[r++] = x->dims[i];
    set_shape(&c->out[0], x->dtype, r, d);
    return NULL;
}

static wf_status *infer_unsqueeze(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b1[SB], b2[SB];
    int64_t len = -1;
    WF__TRY(check_int_vec(c, 1, "axes", WF_MAX_RANK, &len));
    if (x->rank >= 0 && len >= 0 && x->rank + len > WF_MAX_RANK)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "unsqueezing %s by %" PRId64 " axes exceeds rank %d",
                              wf__tinfo_str(x, b1), len, WF_MAX_RANK);
    int64_t v[WF_MAX_RANK];
    int n = 0;
    if (!wf__infer_const_ints(c, 1, v, WF_MAX_RANK, &n) || x->rank < 0) {
        set_unknown(&c->out[0], x->dtype, (x->rank >= 0 && len >= 0) ? x->rank + (int)len : -1);
        return NULL;
    }
    int r = x->rank + n;
    bool ins[WF_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int ax;
        if (!wf__norm_axis(v[i], r, &ax))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                  "axis %" PRId64 " is out of range for an output of rank %d (input %s)", v[i], r,
                                  wf__tinfo_str(x, b1));
        if (ins[ax])
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axes %s repeat axis %d", wf__shape_str(n, v, b2), ax);
        ins[ax] = true;
    }
    int64_t d[WF_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) d[i] = ins[i] ? 1 : x->dims[j++];
    set_shape(&c->out[0], x->dtype, r, d);
    return NULL;
}

static wf_status *infer_flatten(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b[SB];
    int64_t axis = WF__IC_I(c, "axis");
    if (x->rank < 0) {
        set_unknown(&c->out[0], x->dtype, 2);
        return NULL;
    }
    if (axis < -x->rank || axis > x->rank)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range [%d, %d] for input %s",
                              axis, -x->rank, x->rank, wf__tinfo_str(x, b));
    int a = (int)(axis < 0 ? axis + x->rank : axis);
    int64_t d[2] = {wf__numel(a, x->dims), wf__numel(x->rank - a, x->dims + a)};
    set_shape(&c->out[0], x->dtype, 2, d);
    return NULL;
}

/* ---- Concat / Split ----------------------------------------------------------------------------- */

static wf_status *infer_concat(wf__infer_ctx *c)
{
    char b1[SB], b2[SB];
    const wf__tinfo *x0 = &c->in[0];
    int rank = -1;
    for (int i = 0; i < c->n_in; i++) {
        const wf__tinfo *t = &c->in[i];
        if (t->dtype != x0->dtype)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %d is %s but input 0 is %s", i,
                                  wf__tinfo_str(t, b1), wf__tinfo_str(x0, b2));
        if (t->rank >= 0) {
            if (rank >= 0 && t->rank != rank)
                return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input %d is %s but an earlier input has rank %d", i,
                                      wf__tinfo_str(t, b1), rank);
            rank = t->rank;
        }
    }
    int64_t axis = WF__IC_I(c, "axis");
    if (rank < 0) {
        set_unknown(&c->out[0], x0->dtype, -1);
        return NULL;
    }
    int ax;
    if (!wf__norm_axis(axis, rank, &ax))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for inputs of rank %d",
                              axis, rank);
    int64_t d[WF_MAX_RANK];
    for (int j = 0; j < rank; j++) d[j] = -1;
    int64_t sum = 0;
    for (int i = 0; i < c->n_in; i++) {
        const wf__tinfo *t = &c->in[i];
        if (t->rank < 0) {
            sum = -1;
            continue;
        }
        for (int j = 0; j < rank; j++) {
            if (j == ax) continue;
            if (t->dims[j] >= 0 && d[j] >= 0 && t->dims[j] != d[j]) {
                int k = 0;
                while (k < i && (c->in[k].rank < 0 || c->in[k].dims[j] < 0)) k++;
                return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                      "input %d %s and input %d %s differ in dim %d (concatenating on axis %d)", k,
                                      wf__tinfo_str(&c->in[k], b1), i, wf__tinfo_str(t, b2), j, ax);
            }
            if (t->dims[j] >= 0) d[j] = t->dims[j];
        }
        if (sum >= 0 && t->dims[ax] < 0) sum = -1;
        else if (sum >= 0 && wf__add_overflow_i64(sum, t->dims[ax], &sum))
            return wf__infer_overflow(c, "the sizes of axis %d sum past int64", ax);
    }
    d[ax] = sum;
    set_shape(&c->out[0], x0->dtype, rank, d);
    return NULL;
}

/* Attribute order of Split below: axis, num_outputs. */
static int split_num_outputs(const wf__attr *attrs, int n_in)
{
    int64_t n = attrs[1].i;
    return n >= 1 && n <= 1024 ? (int)n : 1;
}

static wf_status *infer_split(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b1[SB], b2[SB];
    int64_t nout = WF__IC_I(c, "num_outputs");
    if (nout < 1 || nout > 1024 || nout != c->n_out)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "num_outputs must be in [1, 1024], got %" PRId64, nout);
    int64_t axis = WF__IC_I(c, "axis");
    int ax = 0;
    if (x->rank >= 0 && !wf__norm_axis(axis, x->rank, &ax))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", axis,
                              wf__tinfo_str(x, b1));
    int64_t len = -1;
    bool present = has_in(c, 1);
    if (present) {
        WF__TRY(check_int_vec(c, 1, "split", 1024, &len));
        if (len >= 0 && len != nout)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input 'split' has %" PRId64 " sizes but num_outputs is %"
                                  PRId64, len, nout);
    }
    for (int i = 0; i < c->n_out; i++) {
        set_unknown(&c->out[i], x->dtype, x->rank);
        for (int j = 0; j < x->rank; j++) c->out[i].dims[j] = j == ax ? -1 : x->dims[j];
    }
    if (x->rank < 0) return NULL;
    int64_t dim = x->dims[ax];
    if (present) {
        int64_t *v = wf__malloc(sizeof(int64_t) * (size_t)nout);
        if (!v) return wf__oom("Split sizes", sizeof(int64_t) * (size_t)nout);
        int n = 0;
        wf_status *s = NULL;
        if (wf__infer_const_ints(c, 1, v, (int)nout, &n)) {
            int64_t sum = 0;
            for (int i = 0; i < n && !s; i++) {
                if (v[i] < 0)
                    s = wf__infer_fail(c, WF_INVALID_ARGUMENT, "split size %d is negative (%" PRId64 ")", i, v[i]);
                else if (wf__add_overflow_i64(sum, v[i], &sum))
                    s = wf__infer_overflow(c, "split sizes sum past int64 at size %d (%" PRId64 ")", i, v[i]);
                c->out[i].dims[ax] = v[i];
            }
            if (!s && dim >= 0 && sum != dim)
                s = wf__infer_fail(c, WF_INVALID_ARGUMENT,
                                   "split sizes sum to %" PRId64 " but axis %d of input %s has size %" PRId64, sum,
                                   ax, wf__tinfo_str(x, b2), dim);
        }
        wf__free(v);
        return s;
    }
    if (dim < 0) return NULL;
    /* ONNX: chunks of ceil(dim / n), the last one takes what is left. */
    int64_t chunk = (dim + nout - 1) / nout;
    int64_t last = dim - chunk * (nout - 1);
    if (last < 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "cannot split axis %d of input %s into %" PRId64 " outputs",
                              ax, wf__tinfo_str(x, b1), nout);
    for (int i = 0; i < c->n_out; i++) c->out[i].dims[ax] = i == c->n_out - 1 ? last : chunk;
    return NULL;
}

/* ---- Slice -------------------------------------------------------------------------------------- */

static wf_status *infer_slice(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b1[SB];
    static const char *names[5] = {"data", "starts", "ends", "axes", "steps"};
    int64_t lens[5] = {0};
    int64_t n = -1;
    for (int i = 1; i < 5; i++) {
        if (!has_in(c, i)) continue;
        WF__TRY(check_int_vec(c, i, names[i], WF_MAX_RANK, &lens[i]));
        if (lens[i] < 0) continue;
        if (n >= 0 && lens[i] != n)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input '%s' has %" PRId64 " values but '%s' has %" PRId64,
                                  names[i], lens[i], names[1], n);
        n = lens[i];
    }
    set_unknown(&c->out[0], x->dtype, x->rank);
    if (x->rank < 0) return NULL;
    int64_t st[WF_MAX_RANK], en[WF_MAX_RANK], ax[WF_MAX_RANK], sp[WF_MAX_RANK];
    int ns = 0, ne = 0, na = 0, np_ = 0;
    bool pa, pp;
    bool kst = wf__infer_const_ints(c, 1, st, WF_MAX_RANK, &ns);
    bool ken = wf__infer_const_ints(c, 2, en, WF_MAX_RANK, &ne);
    bool kax = opt_const_ints(c, 3, ax, WF_MAX_RANK, &na, &pa);
    bool ksp = opt_const_ints(c, 4, sp, WF_MAX_RANK, &np_, &pp);
    bool touched[WF_MAX_RANK] = {0};
    int cnt = kst ? ns : ken ? ne : -1;
    if (kax && pa) {
        for (int i = 0; i < na; i++) {
            int a;
            if (!wf__norm_axis(ax[i], x->rank, &a))
                return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for input %s", ax[i],
                                      wf__tinfo_str(x, b1));
            if (touched[a])
                return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axes repeat axis %d", a);
            touched[a] = true;
            ax[i] = a;
        }
    } else if (kax && cnt >= 0) {
        if (cnt > x->rank)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%d starts without axes but input %s has rank %d", cnt,
                                  wf__tinfo_str(x, b1), x->rank);
        for (int i = 0; i < cnt; i++) {
            ax[i] = i;
            touched[i] = true;
        }
    }
    if (ksp && pp)
        for (int i = 0; i < np_; i++)
            if (sp[i] == 0) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "step %d is 0", i);
    if (!kax) return NULL; /* any axis may change */
    for (int j = 0; j < x->rank; j++)
        if (!touched[j]) c->out[0].dims[j] = x->dims[j];
    if (!kst || !ken || !ksp) return NULL;
    for (int i = 0; i < ns; i++) {
        int a = (int)ax[i];
        int64_t dim = x->dims[a];
        if (dim < 0) continue;
        int64_t step = pp ? sp[i] : 1, s = st[i], e = en[i];
        c->out[0].dims[a] = wf__ku_slice_span(dim, step, &s, e);
    }
    return NULL;
}

/* ---- Gather / GatherND / ScatterND -------------------------------------------------------------- */

static wf_status *check_index_dtype(const wf__infer_ctx *c, int idx, const char *what)
{
    char b[SB];
    wf_dtype t = c->in[idx].dtype;
    if (t != WF_I32 && t != WF_I64)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "input '%s' must be i32 or i64, got %s", what,
                              wf__tinfo_str(&c->in[idx], b));
    return NULL;
}

static wf_status *infer_gather(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0], *ix = &c->in[1];
    char b1[SB], b2[SB];
    WF__TRY(check_index_dtype(c, 1, "indices"));
    int64_t axis = WF__IC_I(c, "axis");
    if (x->rank < 0 || ix->rank < 0) {
        if (x->rank >= 0 && (axis < -x->rank || axis >= x->rank))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", axis,
                                  wf__tinfo_str(x, b1));
        set_unknown(&c->out[0], x->dtype, -1);
        return NULL;
    }
    int ax;
    if (!wf__norm_axis(axis, x->rank, &ax))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", axis,
                              wf__tinfo_str(x, b1));
    int r = x->rank - 1 + ix->rank;
    if (r > WF_MAX_RANK)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "gathering %s from %s gives rank %d, above %d",
                              wf__tinfo_str(ix, b1), wf__tinfo_str(x, b2), r, WF_MAX_RANK);
    int64_t d[WF_MAX_RANK];
    int k = 0;
    for (int i = 0; i < ax; i++) d[k++] = x->dims[i];
    for (int i = 0; i < ix->rank; i++) d[k++] = ix->dims[i];
    for (int i = ax + 1; i < x->rank; i++) d[k++] = x->dims[i];
    set_shape(&c->out[0], x->dtype, r, d);
    return NULL;
}

static wf_status *infer_gathernd(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0], *ix = &c->in[1];
    char b1[SB], b2[SB];
    WF__TRY(check_index_dtype(c, 1, "indices"));
    int64_t bd = WF__IC_I(c, "batch_dims");
    if (bd < 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "batch_dims must be >= 0, got %" PRId64, bd);
    if ((x->rank >= 0 && bd >= x->rank) || (ix->rank >= 0 && bd >= ix->rank) || x->rank == 0 || ix->rank == 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "data %s and indices %s need rank >= 1 and above batch_dims %" PRId64,
                              wf__tinfo_str(x, b1), wf__tinfo_str(ix, b2), bd);
    if (x->rank < 0 || ix->rank < 0 || ix->dims[ix->rank - 1] < 0) {
        set_unknown(&c->out[0], x->dtype, -1);
        return NULL;
    }
    if (bd >= x->rank || bd >= ix->rank)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "data %s and indices %s need rank >= 1 and above batch_dims %" PRId64,
                              wf__tinfo_str(x, b1), wf__tinfo_str(ix, b2), bd);
    int64_t last = ix->dims[ix->rank - 1];
    if (last < 1 || last > x->rank - bd)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "the last dim of indices %s must be in [1, %" PRId64 "] for data %s", wf__tinfo_str(ix, b1),
                              x->rank - bd, wf__tinfo_str(x, b2));
    for (int i = 0; i < bd; i++)
        if (x->dims[i] >= 0 && ix->dims[i] >= 0 && x->dims[i] != ix->dims[i])
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "batch dim %d differs between data %s and indices %s", i,
                                  wf__tinfo_str(x, b1), wf__tinfo_str(ix, b2));
    int r = ix->rank - 1 + x->rank - (int)bd - (int)last;
    if (r > WF_MAX_RANK)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "output rank %d is above %d", r, WF_MAX_RANK);
    int64_t d[WF_MAX_RANK];
    int k = 0;
    for (int i = 0; i < ix->rank - 1; i++) d[k++] = ix->dims[i];
    for (int i = (int)(bd + last); i < x->rank; i++) d[k++] = x->dims[i];
    set_shape(&c->out[0], x->dtype, r, d);
    return NULL;
}

static wf_status *infer_scatternd(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0], *ix = &c->in[1], *u = &c->in[2];
    char b1[SB], b2[SB], b3[SB];
    WF__TRY(check_index_dtype(c, 1, "indices"));
    const char *red = WF__IC_S(c, "reduction");
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "reduction must be none, add, mul, max or min, got '%s'", red);
    if (u->dtype != x->dtype)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "updates %s must have the dtype of data %s",
                              wf__tinfo_str(u, b1), wf__tinfo_str(x, b2));
    set_unknown(&c->out[0], x->dtype, x->rank);
    for (int i = 0; i < x->rank; i++) c->out[0].dims[i] = x->dims[i];
    if (x->rank < 0 || ix->rank < 0 || u->rank < 0) return NULL;
    if (ix->rank < 1)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "indices %s must have rank >= 1", wf__tinfo_str(ix, b1));
    int64_t last = ix->dims[ix->rank - 1];
    if (last < 0) return NULL;
    if (last < 1 || last > x->rank)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "the last dim of indices %s must be in [1, rank of data %s]",
                              wf__tinfo_str(ix, b1), wf__tinfo_str(x, b2));
    int ur = ix->rank - 1 + x->rank - (int)last;
    bool ok = u->rank == ur;
    for (int i = 0; ok && i < ur; i++) {
        int64_t want = i < ix->rank - 1 ? ix->dims[i] : x->dims[last + i - (ix->rank - 1)];
        if (want >= 0 && u->dims[i] >= 0 && want != u->dims[i]) ok = false;
    }
    if (!ok)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT,
                              "updates %s do not match indices %s and data %s (want indices.shape[:-1] + "
                              "data.shape[indices.shape[-1]:])",
                              wf__tinfo_str(u, b1), wf__tinfo_str(ix, b2), wf__tinfo_str(x, b3));
    return NULL;
}

/* ---- Pad / Tile / Expand ------------------------------------------------------------------------ */

static wf_status *infer_pad(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b1[SB], b2[SB];
    const char *mode = WF__IC_S(c, "mode");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "mode must be constant, reflect, edge or wrap, got '%s'", mode);
    int64_t plen, alen = -1;
    WF__TRY(check_int_vec(c, 1, "pads", 2 * WF_MAX_RANK, &plen));
    if (has_in(c, 2)) {
        const wf__tinfo *cv = &c->in[2];
        if (cv->dtype != x->dtype)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "constant_value %s must have the dtype of data %s",
                                  wf__tinfo_str(cv, b1), wf__tinfo_str(x, b2));
        int64_t ne = numel_or_unknown(cv);
        if (cv->rank > 1 || (ne >= 0 && ne > 1))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "constant_value %s must be a scalar", wf__tinfo_str(cv, b1));
    }
    if (has_in(c, 3)) WF__TRY(check_int_vec(c, 3, "axes", WF_MAX_RANK, &alen));
    set_unknown(&c->out[0], x->dtype, x->rank);
    if (x->rank < 0) return NULL;
    int64_t naxes = has_in(c, 3) ? alen : x->rank;
    if (naxes >= 0 && plen >= 0 && plen != 2 * naxes)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "pads has %" PRId64 " values; data %s needs %" PRId64, plen,
                              wf__tinfo_str(x, b1), 2 * naxes);
    int64_t p[2 * WF_MAX_RANK], ax[WF_MAX_RANK];
    int np_ = 0, na = 0;
    bool pa;
    bool kax = opt_const_ints(c, 3, ax, WF_MAX_RANK, &na, &pa);
    if (!kax) return NULL;
    if (!pa) {
        na = x->rank;
        for (int i = 0; i < na; i++) ax[i] = i;
    }
    bool touched[WF_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int a;
        if (!wf__norm_axis(ax[i], x->rank, &a))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for data %s", ax[i],
                                  wf__tinfo_str(x, b1));
        if (touched[a]) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axes repeat axis %d", a);
        touched[a] = true;
        ax[i] = a;
    }
    for (int j = 0; j < x->rank; j++)
        if (!touched[j]) c->out[0].dims[j] = x->dims[j];
    if (!wf__infer_const_ints(c, 1, p, 2 * WF_MAX_RANK, &np_)) return NULL;
    for (int i = 0; i < na; i++) {
        int a = (int)ax[i];
        if (x->dims[a] < 0) continue;
        int64_t d;
        if (wf__add_overflow_i64(x->dims[a], p[i], &d) || wf__add_overflow_i64(d, p[i + na], &d))
            return wf__infer_overflow(c, "padding axis %d of data %s by %" PRId64 " and %" PRId64 " overflows int64", a,
                                      wf__tinfo_str(x, b1), p[i], p[i + na]);
        if (d < 0)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "pads %s crop axis %d of data %s below zero",
                                  wf__shape_str(np_ <= WF_MAX_RANK ? np_ : WF_MAX_RANK, p, b1), a, wf__tinfo_str(x, b2));
        if (strcmp(mode, "constant") && x->dims[a] == 0 && d > 0)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "mode '%s' cannot pad the empty axis %d of data %s", mode,
                                  a, wf__tinfo_str(x, b1));
        c->out[0].dims[a] = d;
    }
    return NULL;
}

static wf_status *infer_tile(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b1[SB], b2[SB];
    int64_t len;
    WF__TRY(check_int_vec(c, 1, "repeats", WF_MAX_RANK, &len));
    if (x->rank >= 0 && len >= 0 && len != x->rank)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "repeats has %" PRId64 " values but data %s has rank %d", len,
                              wf__tinfo_str(x, b1), x->rank);
    set_unknown(&c->out[0], x->dtype, x->rank >= 0 ? x->rank : len >= 0 ? (int)len : -1);
    int64_t v[WF_MAX_RANK];
    int n;
    if (x->rank < 0 || !wf__infer_const_ints(c, 1, v, WF_MAX_RANK, &n)) return NULL;
    for (int i = 0; i < n; i++) {
        if (v[i] < 0)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "repeats %s has a negative value", wf__shape_str(n, v, b2));
        if (x->dims[i] < 0) continue;
        if (wf__mul_overflow_i64(x->dims[i], v[i], &c->out[0].dims[i]))
            return wf__infer_overflow(c, "output dim %d (%" PRId64 " x %" PRId64 ") overflows int64", i, x->dims[i],
                                      v[i]);
    }
    return NULL;
}

static wf_status *infer_expand(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    char b1[SB], b2[SB];
    int64_t len;
    WF__TRY(check_int_vec(c, 1, "shape", WF_MAX_RANK, &len));
    wf__tinfo s;
    int n = 0;
    if (!wf__infer_const_ints(c, 1, s.dims, WF_MAX_RANK, &n)) {
        int r = (x->rank >= 0 && len >= 0) ? (x->rank > len ? x->rank : (int)len) : -1;
        set_unknown(&c->out[0], x->dtype, r);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (s.dims[i] < 0)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape %s has a negative dim", wf__shape_str(n, s.dims, b1));
    s.dtype = x->dtype;
    s.rank = n;
    if (x->rank < 0) {
        set_unknown(&c->out[0], x->dtype, -1);
        return NULL;
    }
    int r;
    int64_t d[WF_MAX_RANK];
    if (!wf__broadcast_tinfo(x, &s, &r, d))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "cannot broadcast input %s to shape %s", wf__tinfo_str(x, b1),
                              wf__shape_str(n, s.dims, b2));
    set_shape(&c->out[0], x->dtype, r, d);
    return NULL;
}

/* ---- OneHot / Range ----------------------------------------------------------------------------- */

static wf_status *infer_onehot(wf__infer_ctx *c)
{
    const wf__tinfo *ix = &c->in[0], *dp = &c->in[1], *vals = &c->in[2];
    char b1[SB];
    if (!(WF__DT_BIT(ix->dtype) & WF__DT_NUMERIC))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "indices must be numeric, got %s", wf__tinfo_str(ix, b1));
    if (!(WF__DT_BIT(dp->dtype) & WF__DT_NUMERIC))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "depth must be numeric, got %s", wf__tinfo_str(dp, b1));
    int64_t dn = numel_or_unknown(dp);
    if (dp->rank > 1 || (dn >= 0 && dn != 1))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "depth must hold one value, got %s", wf__tinfo_str(dp, b1));
    int64_t vn = numel_or_unknown(vals);
    if (vals->rank > 1 || (vn >= 0 && vn != 2))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "values must be [off, on], got %s", wf__tinfo_str(vals, b1));
    int64_t axis = WF__IC_I(c, "axis");
    if (ix->rank < 0) {
        set_unknown(&c->out[0], vals->dtype, -1);
        return NULL;
    }
    int r = ix->rank + 1;
    if (r > WF_MAX_RANK)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "indices %s: output rank above %d", wf__tinfo_str(ix, b1),
                              WF_MAX_RANK);
    int ax;
    if (!wf__norm_axis(axis, r, &ax))
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "axis %" PRId64 " is out of range for indices %s", axis,
                              wf__tinfo_str(ix, b1));
    double depth;
    int64_t dd = -1;
    if (const_f64(c, 1, &depth)) {
        if (!(depth >= 1) || depth > 1e15)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "depth must be positive, got %g", depth);
        dd = (int64_t)depth;
    }
    int64_t d[WF_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) d[i] = i == ax ? dd : ix->dims[j++];
    set_shape(&c->out[0], vals->dtype, r, d);
    return NULL;
}

static wf_status *infer_range(wf__infer_ctx *c)
{
    char b1[SB], b2[SB];
    static const char *names[3] = {"start", "limit", "delta"};
    wf_dtype dt = c->in[0].dtype;
    for (int i = 0; i < 3; i++) {
        const wf__tinfo *t = &c->in[i];
        if (!(WF__DT_BIT(t->dtype) & WF__DT_NUMERIC))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s must be numeric, got %s", names[i], wf__tinfo_str(t, b1));
        if (t->dtype != dt)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s is %s but start is %s", names[i], wf__tinfo_str(t, b1),
                                  wf__tinfo_str(&c->in[0], b2));
        int64_t n = numel_or_unknown(t);
        if (t->rank > 1 || (n >= 0 && n != 1))
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "%s must be a scalar, got %s", names[i],
                                  wf__tinfo_str(t, b1));
    }
    set_unknown(&c->out[0], dt, 1);
    double v[3];
    if (!const_f64(c, 0, &v[0]) || !const_f64(c, 1, &v[1]) || !const_f64(c, 2, &v[2])) return NULL;
    if (v[2] == 0) return wf__infer_fail(c, WF_INVALID_ARGUMENT, "delta is 0");
    if (wf__dtype_is_int(dt)) {
        int64_t s = wf__load_i64(c->in_value[0]->data, dt, 0), l = wf__load_i64(c->in_value[1]->data, dt, 0),
                d = wf__load_i64(c->in_value[2]->data, dt, 0);
        if (!wf__ku_range_count_i64(s, l, d, &c->out[0].dims[0]))
            return wf__infer_overflow(c, "range(%" PRId64 ", %" PRId64 ", %" PRId64 ") has more elements than int64 holds",
                                      s, l, d);
    } else if (!wf__ku_range_count_f64(v[0], v[1], v[2], &c->out[0].dims[0])) {
        return wf__infer_overflow(c, "range(%g, %g, %g) is too long", v[0], v[1], v[2]);
    }
    return NULL;
}

/* ---- Shape / Size / Fill / ConstantOfShape ------------------------------------------------------ */

static void shape_bounds(int64_t start, int64_t end, int rank, int *s, int *e)
{
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    *s = (int)start;
    *e = (int)(end > start ? end : start);
}

static wf_status *infer_shape(wf__infer_ctx *c)
{
    const wf__tinfo *x = &c->in[0];
    if (x->rank < 0) {
        set_unknown(&c->out[0], WF_I64, 1);
        return NULL;
    }
    int s, e;
    shape_bounds(WF__IC_I(c, "start"), WF__IC_I(c, "end"), x->rank, &s, &e);
    int64_t n = e - s;
    set_shape(&c->out[0], WF_I64, 1, &n);
    for (int i = s; i < e; i++)
        if (x->dims[i] < 0) return NULL;
    return store_i64_value(c, 1, n, x->dims + s);
}

static wf_status *infer_size(wf__infer_ctx *c)
{
    set_shape(&c->out[0], WF_I64, 0, NULL);
    int64_t n = numel_or_unknown(&c->in[0]);
    if (n < 0) return NULL;
    return store_i64_value(c, 0, 1, &n);
}

/* The output of Fill and ConstantOfShape: dims from input 0. */
static wf_status *infer_dims_input(wf__infer_ctx *c, wf_dtype dt)
{
    char b[SB];
    int64_t len;
    WF__TRY(check_int_vec(c, 0, "shape", WF_MAX_RANK, &len));
    int64_t v[WF_MAX_RANK];
    int n;
    if (!wf__infer_const_ints(c, 0, v, WF_MAX_RANK, &n)) {
        set_unknown(&c->out[0], dt, len >= 0 ? (int)len : -1);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (v[i] < 0)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "shape %s has a negative dim", wf__shape_str(n, v, b));
    set_shape(&c->out[0], dt, n, v);
    return NULL;
}

static wf_status *infer_fill(wf__infer_ctx *c)
{
    char b[SB];
    const wf__tinfo *v = &c->in[1];
    if (v->rank > 0)
        return wf__infer_fail(c, WF_INVALID_ARGUMENT, "value must be a scalar, got %s", wf__tinfo_str(v, b));
    return infer_dims_input(c, v->dtype);
}

static wf_status *infer_constant_of_shape(wf__infer_ctx *c)
{
    const wf__attr *a = WF__IC_A(c, "value");
    wf_dtype dt = WF_F32;
    if (a->set && a->t) {
        char b[SB];
        if (a->t->size != 1)
            return wf__infer_fail(c, WF_INVALID_ARGUMENT, "attribute 'value' must hold one element, got %s[%s]",
                                  wf_dtype_name(a->t->dtype), wf__shape_str(a->t->rank, a->t->dims, b));
        dt = a->t->dtype;
    }
    return infer_dims_input(c, dt);
}

/* ---- the table ---------------------------------------------------------------------------------- */

#define A_INT(nm, def) {.name = nm, .type = WF_ATTR_INT, .i = (def)}
#define A_REQ_INT(nm) {.name = nm, .type = WF_ATTR_INT, .required = true}
#define A_INTS(nm) {.name = nm, .type = WF_ATTR_INTS}
#define A_STR(nm, def) {.name = nm, .type = WF_ATTR_STRING, .s = (def)}

const wf__op_def wf__ops_shape[] = {
    {.name = "Reshape", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {A_INT("allowzero", 0)},
     .infer = infer_reshape, .cost = cost_view, .flags = WF__OP_CHEAP, .grad = wf__grad_reshape_like},
    {.name = "Transpose", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {A_INTS("perm")},
     .infer = infer_transpose, .cost = cost_move, .grad = wf__grad_transpose},
    {.name = "Squeeze", .host_in = 1u << 1, .min_in = 1, .max_in = 2, .n_out = 1, .infer = infer_squeeze, .cost = cost_view,
     .flags = WF__OP_CHEAP, .grad = wf__grad_reshape_like},
    {.name = "Unsqueeze", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_unsqueeze, .cost = cost_view,
     .flags = WF__OP_CHEAP, .grad = wf__grad_reshape_like},
    {.name = "Flatten", .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {A_INT("axis", 1)},
     .infer = infer_flatten, .cost = cost_view, .flags = WF__OP_CHEAP, .grad = wf__grad_reshape_like},
    {.name = "Concat", .min_in = 1, .max_in = -1, .n_out = 1, .attrs = {A_REQ_INT("axis")},
     .infer = infer_concat, .cost = cost_move, .grad = wf__grad_concat},
    /* num_outputs is required: the output count must be known when the node is built. */
    {.name = "Split", .host_in = 1u << 1, .min_in = 1, .max_in = 2, .n_out = -1, .attrs = {A_INT("axis", 0), A_REQ_INT("num_outputs")},
     .infer = infer_split, .cost = cost_move, .num_outputs = split_num_outputs, .grad = wf__grad_split},
    {.name = "Slice", .host_in = 0x1eu, .min_in = 3, .max_in = 5, .n_out = 1, .infer = infer_slice, .cost = cost_move,
     .grad = wf__grad_slice},
    {.name = "Gather", .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {A_INT("axis", 0)}, .infer = infer_gather,
     .cost = cost_move, .grad = wf__grad_gather},
    {.name = "GatherND", .min_in = 2, .max_in = 2, .n_out = 1, .attrs = {A_INT("batch_dims", 0)},
     .infer = infer_gathernd, .cost = cost_move},
    {.name = "ScatterND", .min_in = 3, .max_in = 3, .n_out = 1, .attrs = {A_STR("reduction", "none")},
     .infer = infer_scatternd, .cost = cost_move},
    {.name = "Pad", .host_in = 0xeu, .min_in = 2, .max_in = 4, .n_out = 1, .attrs = {A_STR("mode", "constant")}, .infer = infer_pad,
     .cost = cost_move, .grad = wf__grad_pad},
    {.name = "Tile", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_tile, .cost = cost_move,
     .grad = wf__grad_tile},
    {.name = "Expand", .host_in = 1u << 1, .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_expand, .cost = cost_move,
     .grad = wf__grad_expand},
    {.name = "OneHot", .host_in = 1u << 1, .min_in = 3, .max_in = 3, .n_out = 1, .attrs = {A_INT("axis", -1)}, .infer = infer_onehot,
     .cost = cost_move},
    {.name = "Range", .host_in = 0x7u, .min_in = 3, .max_in = 3, .n_out = 1, .infer = infer_range},
    {.name = "Shape", .meta_in = 1u, .min_in = 1, .max_in = 1, .n_out = 1, .attrs = {A_INT("start", 0), A_INT("end", INT64_MAX)},
     .infer = infer_shape, .cost = cost_view, .flags = WF__OP_CHEAP},
    {.name = "Size", .meta_in = 1u, .min_in = 1, .max_in = 1, .n_out = 1, .infer = infer_size, .cost = cost_view,
     .flags = WF__OP_CHEAP},
    {.name = "Fill", .host_in = 0x3u, .min_in = 2, .max_in = 2, .n_out = 1, .infer = infer_fill, .cost = cost_move},
    {.name = "ConstantOfShape", .host_in = 1u, .min_in = 1, .max_in = 1, .n_out = 1,
     .attrs = {{.name = "value", .type = WF_ATTR_TENSOR}}, .infer = infer_constant_of_shape, .cost = cost_move},
    {.name = NULL},
};
