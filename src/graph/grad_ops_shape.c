/*
 * Gradient functions of the shape ops (Reshape and its kin, Transpose, Concat, Split, Slice, Gather,
 * Pad, Expand, Tile). Each one routes the incoming gradient back to the positions its input came
 * from, composed from forward ops (Slice, Pad, Concat, ScatterND with reduction add).
 */
#include "graph/grad.h"

#include <stdio.h>

#define T(expr) WF__TRY(expr)
#define IN(i) (c->node->in[i])
#define OUT(j) wf_out((wf_node *)c->node, j)
#define DT(o) (wf__g_info(o)->dtype)
#define HAS(i) ((i) < c->node->n_in && c->node->in[i].node)

static int64_t attr_i(const wf__grad_ctx *c, const char *nm) { return wf__attr_i(c->node->op, c->node->attrs, nm); }

wf_status *wf__grad_reshape_like(wf__grad_ctx *c)
{
    return wf__g_reshape_like(c, "Reshape", c->dy[0], IN(0), &c->dx[0]);
}

wf_status *wf__grad_expand(wf__grad_ctx *c)
{
    return wf__g_sum_to(c, "sum_to", c->dy[0], IN(0), NULL, 0, 0, &c->dx[0]);
}

wf_status *wf__grad_transpose(wf__grad_ctx *c)
{
    int r = wf__g_info(IN(0))->rank;
    if (r < 0) return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's rank must be known");
    const wf__attr *p = wf__attr_get(c->node->op, c->node->attrs, "perm");
    int64_t inv[WF_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int64_t pi = p->n ? p->ints[i] : r - 1 - i;
        if (pi < 0) pi += r;
        inv[pi] = i;
    }
    wf_attr a = wf_attr_ints("perm", inv, r);
    return wf__g_op(c, "Transpose", "Transpose", &c->dy[0], 1, &a, 1, &c->dx[0]);
}

static wf_status *slice(wf__grad_ctx *c, wf_output v, int n, const int64_t *starts, const int64_t *ends,
                        const int64_t *axes, wf_output *o)
{
    wf_output in[4] = {v};
    T(wf__g_ints(c, "starts", n, starts, &in[1]));
    T(wf__g_ints(c, "ends", n, ends, &in[2]));
    T(wf__g_ints(c, "axes", n, axes, &in[3]));
    return wf__g_op(c, "Slice", "Slice", in, 4, NULL, 0, o);
}

wf_status *wf__grad_concat(wf__grad_ctx *c)
{
    int r = wf__g_info(OUT(0))->rank, a;
    if (r < 0 || !wf__norm_axis(attr_i(c, "axis"), r, &a))
        return wf__g_fail(c, WF_UNIMPLEMENTED, "the output's rank must be known");
    int64_t off = 0, ax = a;
    for (int i = 0; i < c->node->n_in; i++) {
        int64_t d = wf__g_info(IN(i))->dims[a];
        if (d < 0) return wf__g_fail(c, WF_UNIMPLEMENTED, "input %d's size along axis %d must be known", i, a);
        int64_t end = off + d;
        if (wf__dtype_is_float(DT(IN(i)))) T(slice(c, c->dy[0], 1, &off, &end, &ax, &c->dx[i]));
        off = end;
    }
    return NULL;
}

wf_status *wf__grad_split(wf__grad_ctx *c)
{
    int r = wf__g_info(IN(0))->rank, a;
    if (r < 0 || !wf__norm_axis(attr_i(c, "axis"), r, &a))
        return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's rank must be known");
    int n = c->node->n_out;
    wf_output parts[64], *ps = n <= 64 ? parts : wf__calloc((size_t)n, sizeof *ps);
    if (!ps) return wf__oom("gradient parts", sizeof *ps * (size_t)n);
    wf_status *s = NULL;
    for (int j = 0; j < n && !s; j++) {
        if (c->dy[j].node) ps[j] = c->dy[j];
        else s = wf__g_fill_like(c, "zeros", OUT(j), 0, &ps[j]); /* an unused piece */
    }
    wf_attr at = wf_attr_int("axis", a);
    if (!s) s = wf__g_op(c, "Concat", "Concat", ps, n, &at, 1, &c->dx[0]);
    if (ps != parts) wf__free(ps);
    return s;
}

/* ONNX Slice's index arithmetic for one axis: the first index and the count. */
static void slice_range(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *count)
{
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        *count = end > start ? (end - start + step - 1) / step : 0;
    } else {
        start = start < 0 ? -1 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        *count = start > end ? (start - end - step - 1) / -step : 0;
    }
    *first = start;
}

/* Unit steps: pad the gradient back; other steps: scatter it to the positions read. */
wf_status *wf__grad_slice(wf__grad_ctx *c)
{
    const wf__tinfo *tx = wf__g_info(IN(0));
    int r = tx->rank;
    if (!wf__tinfo_known(tx)) return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's shape must be known");
    int64_t st[WF_MAX_RANK], en[WF_MAX_RANK], ax[WF_MAX_RANK], sp[WF_MAX_RANK];
    int ns, ne, na = 0, nsp = 0;
    if (!wf__g_const_ints(c, 1, st, WF_MAX_RANK, &ns) || !wf__g_const_ints(c, 2, en, WF_MAX_RANK, &ne) ||
        (HAS(3) && !wf__g_const_ints(c, 3, ax, WF_MAX_RANK, &na)) ||
        (HAS(4) && !wf__g_const_ints(c, 4, sp, WF_MAX_RANK, &nsp)) || ne != ns)
        return wf__g_fail(c, WF_UNIMPLEMENTED, "starts, ends, axes and steps must be constants");
    int64_t first[WF_MAX_RANK], count[WF_MAX_RANK], step[WF_MAX_RANK];
    for (int i = 0; i < r; i++) first[i] = 0, count[i] = tx->dims[i], step[i] = 1;
    bool unit = true;
    for (int k = 0; k < ns; k++) {
        int a;
        if (!wf__norm_axis(HAS(3) ? ax[k] : k, r, &a)) return wf__g_fail(c, WF_INVALID_ARGUMENT, "axis out of range");
        step[a] = HAS(4) ? sp[k] : 1;
        slice_range(tx->dims[a], st[k], en[k], step[a], &first[a], &count[a]);
        if (step[a] != 1) unit = false;
    }
    if (unit) {
        int64_t pads[2 * WF_MAX_RANK];
        for (int i = 0; i < r; i++) {
            pads[i] = first[i];
            pads[r + i] = tx->dims[i] - first[i] - count[i];
        }
        wf_output in[2] = {c->dy[0]};
        T(wf__g_ints(c, "pads", 2 * r, pads, &in[1]));
        return wf__g_op(c, "Pad", "Pad", in, 2, NULL, 0, &c->dx[0]);
    }
    /* indices [count..., r] of every element read */
    int64_t n = 1;
    for (int i = 0; i < r; i++) n *= count[i];
    int64_t idims[WF_MAX_RANK + 1];
    for (int i = 0; i < r; i++) idims[i] = count[i];
    idims[r] = r;
    wf_tensor *t;
    T(wf_tensor_new(WF_I64, r + 1, idims, NULL, &t));
    int64_t *p = t->data, pos[WF_MAX_RANK] = {0};
    for (int64_t e = 0; e < n; e++) {
        for (int i = 0; i < r; i++) p[e * r + i] = first[i] + pos[i] * step[i];
        for (int i = r - 1; i >= 0; i--) {
            if (++pos[i] < count[i]) break;
            pos[i] = 0;
        }
    }
    wf_output in[3];
    wf_attr a = wf_attr_tensor("value", t);
    wf_status *s = wf__g_op(c, "Const", "indices", NULL, 0, &a, 1, &in[1]);
    wf_tensor_free(t);
    if (s) return s;
    T(wf__g_fill_like(c, "zeros", IN(0), 0, &in[0]));
    in[2] = c->dy[0];
    return wf__g_op(c, "ScatterND", "ScatterND", in, 3, NULL, 0, &c->dx[0]);
}

/* Gather along axis a: the gradient rows are added into zeros at the gathered indices. ScatterND
 * indexes the leading axis, so axis a is moved to the front and back. */
wf_status *wf__grad_gather(wf__grad_ctx *c)
{
    const wf__tinfo *tx = wf__g_info(IN(0)), *ti = wf__g_info(IN(1));
    int rx = tx->rank, ri = ti->rank, a;
    if (!wf__tinfo_known(tx) || ri < 0) return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's shape must be known");
    if (!wf__norm_axis(attr_i(c, "axis"), rx, &a)) return wf__g_fail(c, WF_INVALID_ARGUMENT, "axis out of range");
    wf_output dy = c->dy[0], idx = IN(1), upd = dy, zeros, lt, z, nn, wrapped, s;
    int ry = a + ri + rx - a - 1;
    if (a > 0 && ri > 0) { /* dy: x[:a] + idx + x[a+1:] -> idx + x[:a] + x[a+1:] */
        int64_t perm[WF_MAX_RANK];
        int k = 0;
        for (int i = 0; i < ri; i++) perm[k++] = a + i;
        for (int i = 0; i < a; i++) perm[k++] = i;
        for (int i = a + ri; i < ry; i++) perm[k++] = i;
        wf_attr at = wf_attr_ints("perm", perm, ry);
        T(wf__g_op(c, "Transpose", "Transpose", &dy, 1, &at, 1, &upd));
    }
    int64_t zd[WF_MAX_RANK];
    zd[0] = tx->dims[a];
    for (int i = 0, k = 1; i < rx; i++)
        if (i != a) zd[k++] = tx->dims[i];
    {
        wf_output shp;
        wf_tensor *val;
        int64_t one = 1;
        T(wf__g_ints(c, "zeros_shape", rx, zd, &shp));
        T(wf_tensor_new(DT(dy), 1, &one, NULL, &val));
        wf_attr at = wf_attr_tensor("value", val);
        wf_status *st = wf__g_op(c, "ConstantOfShape", "zeros", &shp, 1, &at, 1, &zeros);
        wf_tensor_free(val);
        if (st) return st;
    }
    /* negative indices count from the end */
    T(wf__g_scalar(c, "zero", ti->dtype, 0, &z));
    T(wf__g_bin(c, "Less", "negative", idx, z, &lt));
    T(wf__g_scalar(c, "n", ti->dtype, (double)tx->dims[a], &nn));
    T(wf__g_bin(c, "Add", "wrapped", idx, nn, &wrapped));
    {
        wf_output in[3] = {lt, wrapped, idx};
        T(wf__g_op(c, "Where", "index", in, 3, NULL, 0, &idx));
    }
    {
        int64_t last = ri;
        wf_output in[2] = {idx, {0}};
        T(wf__g_ints(c, "last", 1, &last, &in[1]));
        T(wf__g_op(c, "Unsqueeze", "Unsqueeze", in, 2, NULL, 0, &idx));
    }
    {
        wf_output in[3] = {zeros, idx, upd};
        wf_attr at = wf_attr_string("reduction", "add");
        T(wf__g_op(c, "ScatterND", "ScatterND", in, 3, &at, 1, &s));
    }
    if (a == 0) {
        c->dx[0] = s;
        return NULL;
    }
    int64_t back[WF_MAX_RANK];
    for (int i = 0; i < a; i++) back[i] = i + 1;
    back[a] = 0;
    for (int i = a + 1; i < rx; i++) back[i] = i;
    wf_attr at = wf_attr_ints("perm", back, rx);
    return wf__g_op(c, "Transpose", "Transpose", &s, 1, &at, 1, &c->dx[0]);
}

/* Constant mode: the gradient is the slice of dy where the input went. */
wf_status *wf__grad_pad(wf__grad_ctx *c)
{
    const char *mode = wf__attr_s(c->node->op, c->node->attrs, "mode");
    if (strcmp(mode, "constant")) return wf__g_fail(c, WF_UNIMPLEMENTED, "only mode 'constant' has a gradient, not '%s'", mode);
    int r = wf__g_info(IN(0))->rank;
    int64_t pads[2 * WF_MAX_RANK], axv[WF_MAX_RANK];
    int np, na = r;
    if (r < 0 || !wf__g_const_ints(c, 1, pads, 2 * WF_MAX_RANK, &np))
        return wf__g_fail(c, WF_UNIMPLEMENTED, "the rank and the pads must be known while building");
    if (HAS(3)) {
        if (!wf__g_const_ints(c, 3, axv, WF_MAX_RANK, &na))
            return wf__g_fail(c, WF_UNIMPLEMENTED, "the axes must be a constant");
    } else {
        for (int i = 0; i < r; i++) axv[i] = i;
    }
    if (np != 2 * na) return wf__g_fail(c, WF_INVALID_ARGUMENT, "%d pads for %d axes", np, na);
    int64_t st[WF_MAX_RANK], en[WF_MAX_RANK], ax[WF_MAX_RANK];
    for (int k = 0; k < na; k++) {
        if (pads[k] < 0 || pads[na + k] < 0)
            return wf__g_fail(c, WF_UNIMPLEMENTED, "negative pads (cropping) have no gradient yet");
        st[k] = pads[k];
        en[k] = pads[na + k] ? -pads[na + k] : INT64_MAX;
        ax[k] = axv[k];
    }
    return slice(c, c->dy[0], na, st, en, ax, &c->dx[0]);
}

/* The tiles are summed: dy reshaped to [r0, d0, r1, d1, ...] and reduced over the repeat axes. */
wf_status *wf__grad_tile(wf__grad_ctx *c)
{
    const wf__tinfo *tx = wf__g_info(IN(0));
    int r = tx->rank, n;
    int64_t rep[WF_MAX_RANK];
    if (!wf__tinfo_known(tx) || !wf__g_const_ints(c, 1, rep, WF_MAX_RANK, &n) || n != r)
        return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's shape and the repeats must be known while building");
    if (2 * r > WF_MAX_RANK) return wf__g_fail(c, WF_UNIMPLEMENTED, "rank %d is above %d", r, WF_MAX_RANK / 2);
    int64_t dims[WF_MAX_RANK], axes[WF_MAX_RANK];
    for (int i = 0; i < r; i++) {
        dims[2 * i] = rep[i];
        dims[2 * i + 1] = tx->dims[i];
        axes[i] = 2 * i;
    }
    if (r == 0) {
        c->dx[0] = c->dy[0];
        return NULL;
    }
    wf_output in[2] = {c->dy[0]}, v;
    T(wf__g_ints(c, "split_shape", 2 * r, dims, &in[1]));
    T(wf__g_op(c, "Reshape", "Reshape", in, 2, NULL, 0, &v));
    wf_attr at[2] = {wf_attr_int("keepdims", 0), wf_attr_ints("axes", axes, r)};
    return wf__g_op(c, "ReduceSum", "ReduceSum", &v, 1, at, 2, &c->dx[0]);
}
