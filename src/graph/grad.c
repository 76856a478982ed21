/*
 * Reverse-mode autodiff (wf_gradients): finds the nodes between xs and ys, walks them in reverse
 * creation order (a topological order), sums the gradients reaching each output and calls each op's
 * gradient function, which adds ordinary backward nodes. Also the helpers those functions build with.
 */
#include "graph/grad.h"

#include <stdarg.h>
#include <stdio.h>

#define NAME_MAX_ 1024

/* ---- helpers for gradient functions --------------------------------------------------------------- */

wf_status *wf__g_fail(const wf__grad_ctx *c, wf_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wf__status(code, "node '%s' (%s): gradient: %s", c->node->name, c->node->op->name, msg);
}

/* prefix + nm, with _1, _2, ... until no node has the name. */
static wf_status *unique_name(wf__grad_ctx *c, const char *nm, char *buf)
{
    int k = snprintf(buf, NAME_MAX_, "%s%s", c->prefix, nm);
    if (k >= NAME_MAX_ - 16) return wf__g_fail(c, WF_INVALID_ARGUMENT, "node name too long");
    for (int i = 1; wf__graph_lookup(c->g, buf); i++) snprintf(buf, NAME_MAX_, "%s%s_%d", c->prefix, nm, i);
    return NULL;
}

wf_status *wf__g_op(wf__grad_ctx *c, const char *op, const char *nm, const wf_output *in, int n_in,
                    const wf_attr *at, int n_at, wf_output *out)
{
    char name[NAME_MAX_];
    WF__TRY(unique_name(c, nm, name));
    wf_node *n;
    WF__TRY(wf_op(c->g, op, name, in, n_in, at, n_at, &n));
    if (out) *out = wf_out(n, 0);
    return NULL;
}

wf_status *wf__g_un(wf__grad_ctx *c, const char *op, const char *nm, wf_output x, wf_output *out)
{
    return wf__g_op(c, op, nm, &x, 1, NULL, 0, out);
}

wf_status *wf__g_bin(wf__grad_ctx *c, const char *op, const char *nm, wf_output a, wf_output b, wf_output *out)
{
    wf_output in[2] = {a, b};
    return wf__g_op(c, op, nm, in, 2, NULL, 0, out);
}

wf_status *wf__g_scalar(wf__grad_ctx *c, const char *nm, wf_dtype dt, double v, wf_output *out)
{
    wf_tensor *t;
    WF__TRY(wf_tensor_new(dt, 0, NULL, NULL, &t));
    wf__store_f64(t->data, dt, 0, v);
    wf_attr a = wf_attr_tensor("value", t);
    wf_status *s = wf__g_op(c, "Const", nm, NULL, 0, &a, 1, out);
    wf_tensor_free(t);
    return s;
}

wf_status *wf__g_ints(wf__grad_ctx *c, const char *nm, int n, const int64_t *v, wf_output *out)
{
    wf_tensor *t;
    int64_t d = n;
    WF__TRY(wf_tensor_new(WF_I64, 1, &d, n ? v : NULL, &t));
    wf_attr a = wf_attr_tensor("value", t);
    wf_status *s = wf__g_op(c, "Const", nm, NULL, 0, &a, 1, out);
    wf_tensor_free(t);
    return s;
}

wf_status *wf__g_shape_of(wf__grad_ctx *c, const char *nm, wf_output x, wf_output *out)
{
    const wf__tinfo *t = wf__g_info(x);
    if (wf__tinfo_known(t)) return wf__g_ints(c, nm, t->rank, t->dims, out);
    return wf__g_un(c, "Shape", nm, x, out);
}

wf_status *wf__g_fill_like(wf__grad_ctx *c, const char *nm, wf_output x, double v, wf_output *out)
{
    const wf__tinfo *t = wf__g_info(x);
    if (t->rank == 0) return wf__g_scalar(c, nm, t->dtype, v, out);
    wf_output shape;
    char snm[NAME_MAX_];
    snprintf(snm, sizeof snm, "%s_shape", nm);
    WF__TRY(wf__g_shape_of(c, snm, x, &shape));
    wf_tensor *val;
    int64_t one = 1;
    WF__TRY(wf_tensor_new(t->dtype, 1, &one, NULL, &val));
    wf__store_f64(val->data, t->dtype, 0, v);
    wf_attr a = wf_attr_tensor("value", val);
    wf_status *s = wf__g_op(c, "ConstantOfShape", nm, &shape, 1, &a, 1, out);
    wf_tensor_free(val);
    return s;
}

static bool same_known_shape(const wf__tinfo *a, const wf__tinfo *b)
{
    if (!wf__tinfo_known(a) || !wf__tinfo_known(b) || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

wf_status *wf__g_reshape_like(wf__grad_ctx *c, const char *nm, wf_output v, wf_output x, wf_output *out)
{
    if (same_known_shape(wf__g_info(v), wf__g_info(x))) {
        *out = v;
        return NULL;
    }
    wf_output in[2] = {v, {0}};
    char snm[NAME_MAX_];
    snprintf(snm, sizeof snm, "%s_shape", nm);
    WF__TRY(wf__g_shape_of(c, snm, x, &in[1]));
    wf_attr a = wf_attr_int("allowzero", 1); /* the target shape is exact, zeros included */
    return wf__g_op(c, "Reshape", nm, in, 2, &a, 1, out);
}

/* The broadcast axes found at run time: the axes where x, padded with leading 1s, is 1. Summing over
 * an axis where the result is 1 too is harmless, so no comparison with v is needed. */
static wf_status *sum_to_dynamic(wf__grad_ctx *c, const char *nm, wf_output v, wf_output x, int lead,
                                 wf_output *out)
{
    wf_output sx, one, mask, nz, axes, r;
    WF__TRY(wf__g_un(c, "Shape", "sum_to_shape", x, &sx));
    if (lead > 0) {
        int64_t ones[WF_MAX_RANK];
        for (int i = 0; i < lead; i++) ones[i] = 1;
        wf_output in[2];
        WF__TRY(wf__g_ints(c, "sum_to_lead", lead, ones, &in[0]));
        in[1] = sx;
        wf_attr ax = wf_attr_int("axis", 0);
        WF__TRY(wf__g_op(c, "Concat", "sum_to_padded", in, 2, &ax, 1, &sx));
    }
    WF__TRY(wf__g_scalar(c, "sum_to_one", WF_I64, 1, &one));
    WF__TRY(wf__g_bin(c, "Equal", "sum_to_mask", sx, one, &mask));
    WF__TRY(wf__g_un(c, "NonZero", "sum_to_nonzero", mask, &nz));
    int64_t flat = -1;
    wf_output shp;
    WF__TRY(wf__g_ints(c, "sum_to_flat", 1, &flat, &shp));
    WF__TRY(wf__g_bin(c, "Reshape", "sum_to_axes", nz, shp, &axes));
    wf_output in[2] = {v, axes};
    wf_attr at[2] = {wf_attr_int("keepdims", 1), wf_attr_int("noop_with_empty_axes", 1)};
    WF__TRY(wf__g_op(c, "ReduceSum", nm, in, 2, at, 2, &r));
    if (lead > 0) {
        int64_t sq[WF_MAX_RANK];
        for (int i = 0; i < lead; i++) sq[i] = i;
        wf_output in2[2] = {r, {0}};
        WF__TRY(wf__g_ints(c, "sum_to_squeeze_axes", lead, sq, &in2[1]));
        WF__TRY(wf__g_op(c, "Squeeze", "sum_to_squeeze", in2, 2, NULL, 0, &r));
    }
    *out = r;
    return NULL;
}

wf_status *wf__g_sum_to(wf__grad_ctx *c, const char *nm, wf_output v, wf_output x, const wf_output *others,
                        int n_others, int exact_tail, wf_output *out)
{
    const wf__tinfo *tv = wf__g_info(v), *tx = wf__g_info(x);
    if (tv->rank < 0 || tx->rank < 0)
        return wf__g_fail(c, WF_UNIMPLEMENTED, "the ranks of the operands must be known while building");
    if (tx->rank > tv->rank)
        return wf__g_fail(c, WF_INTERNAL, "cannot sum a rank-%d gradient to rank %d", tv->rank, tx->rank);
    int lead = tv->rank - tx->rank;
    int64_t axes[WF_MAX_RANK];
    int na = 0;
    bool dynamic = false;
    for (int a = 0; a < lead; a++) axes[na++] = a;
    for (int i = 0; i < tx->rank - exact_tail; i++) {
        int64_t dx = tx->dims[i], dv = tv->dims[lead + i];
        if (dx == 1) {
            if (dv != 1) axes[na++] = lead + i;
        } else if (dx < 0 && dv != 1) {
            /* x's dim is unknown: it was not broadcast if nothing else had a dim > 1 there */
            for (int k = 0; k < n_others; k++) {
                const wf__tinfo *to = wf__g_info(others[k]);
                int pos = to->rank - (tx->rank - i);
                if (to->rank < 0 || (pos >= 0 && to->dims[pos] != 1)) dynamic = true;
            }
            if (!others) dynamic = true;
        }
    }
    if (dynamic) return sum_to_dynamic(c, nm, v, x, lead, out);
    wf_output r = v;
    if (na > 0) {
        wf_attr at[2] = {wf_attr_int("keepdims", 1), wf_attr_ints("axes", axes, na)};
        WF__TRY(wf__g_op(c, "ReduceSum", nm, &v, 1, at, 2, &r));
    }
    if (lead > 0) {
        int64_t sq[WF_MAX_RANK];
        for (int i = 0; i < lead; i++) sq[i] = i;
        wf_output in2[2] = {r, {0}};
        WF__TRY(wf__g_ints(c, "sum_to_squeeze_axes", lead, sq, &in2[1]));
        WF__TRY(wf__g_op(c, "Squeeze", "sum_to_squeeze", in2, 2, NULL, 0, &r));
    }
    *out = r;
    return NULL;
}

bool wf__g_const_ints(const wf__grad_ctx *c, int idx, int64_t *vals, int max, int *n)
{
    if (idx >= c->node->n_in || !c->node->in[idx].node) return false;
    wf_output o = c->node->in[idx];
    const wf_tensor *t = o.node->out_value ? o.node->out_value[o.index] : NULL;
    if (!t || t->rank > 1 || t->size > max || (t->dtype != WF_I64 && t->dtype != WF_I32)) return false;
    for (int64_t i = 0; i < t->size; i++) vals[i] = wf__load_i64(t->data, t->dtype, i);
    *n = (int)t->size;
    return true;
}

/* ---- the walk ------------------------------------------------------------------------------------- */

/* One gradient reaching output `out` of a node; a node's contributions form a list through next. */
typedef struct contrib {
    int out;
    wf_output g;
    int next;
} contrib;

typedef struct walk {
    wf_graph *g;
    int n0;            /* nodes before wf_gradients started */
    char root[64];     /* "gradients", or "gradients_N" when that is taken */
    unsigned char *fwd, *bwd;
    int *head;         /* per node: first contribution, -1 none */
    contrib *c;
    int nc, capc;
} walk;

static bool is_float_out(wf_output o) { return o.node && wf__dtype_is_float(o.node->out[o.index].dtype); }

static wf_status *add_contrib(walk *w, int id, int out, wf_output g)
{
    if (w->nc == w->capc) {
        int cap = w->capc ? w->capc * 2 : 64;
        contrib *p = wf__realloc(w->c, sizeof *p * (size_t)w->capc, sizeof *p * (size_t)cap);
        if (!p) return wf__oom("gradient bookkeeping", sizeof *p * (size_t)cap);
        w->c = p;
        w->capc = cap;
    }
    w->c[w->nc] = (contrib){out, g, w->head[id]};
    w->head[id] = w->nc++;
    return NULL;
}

/* The summed gradient of output j of node id (node NULL: none). Several contributions become one Sum
 * node, which then replaces them, so asking twice builds nothing new. */
static wf_status *aggregate(walk *w, int id, int j, wf_output *out)
{
    wf_output parts[64], *many = parts;
    int n = 0, cap = 64;
    wf_status *s = NULL;
    out->node = NULL;
    out->index = 0;
    for (int k = w->head[id]; k >= 0; k = w->c[k].next) {
        if (w->c[k].out != j) continue;
        if (n == cap) {
            wf_output *p = wf__malloc(sizeof *p * (size_t)cap * 2);
            if (!p) {
                s = wf__oom("gradient bookkeeping", sizeof *p * (size_t)cap * 2);
                goto done;
            }
            memcpy(p, many, sizeof *p * (size_t)n);
            if (many != parts) wf__free(many);
            many = p;
            cap *= 2;
        }
        many[n++] = w->c[k].g;
    }
    if (n == 0) goto done;
    if (n == 1) {
        *out = many[0];
        goto done;
    }
    wf_node *node = w->g->nodes[id];
    char prefix[NAME_MAX_];
    snprintf(prefix, sizeof prefix, "%s/%s/", w->root, node->name);
    wf__grad_ctx gc = {.g = w->g, .node = node, .prefix = prefix};
    char nm[32];
    if (j) snprintf(nm, sizeof nm, "AddN_%d", j);
    else snprintf(nm, sizeof nm, "AddN");
    /* Sum takes the contributions in the order they arrived, so the result does not depend on hashes */
    for (int a = 0, b = n - 1; a < b; a++, b--) {
        wf_output t = many[a];
        many[a] = many[b];
        many[b] = t;
    }
    if ((s = wf__g_op(&gc, "Sum", nm, many, n, NULL, 0, out))) goto done;
    /* the summed entries now belong to no output; the sum stands in for them */
    for (int k = w->head[id]; k >= 0; k = w->c[k].next)
        if (w->c[k].out == j) w->c[k].out = -1;
    s = add_contrib(w, id, j, *out);
done:
    if (many != parts) wf__free(many);
    return s;
}

static bool belongs(const wf_graph *g, wf_output o, int n0)
{
    return o.node && o.node->graph == g && o.node->id < n0 && g->nodes[o.node->id] == o.node &&
           o.index >= 0 && o.index < o.node->n_out;
}

static void pick_root(walk *w)
{
    for (int k = 0;; k++) {
        if (k) snprintf(w->root, sizeof w->root, "gradients_%d", k);
        else snprintf(w->root, sizeof w->root, "gradients");
        size_t len = strlen(w->root);
        bool taken = false;
        for (int i = 0; i < w->g->n && !taken; i++) {
            const char *nm = w->g->nodes[i]->name;
            taken = !strncmp(nm, w->root, len) && (nm[len] == '/' || nm[len] == 0);
        }
        if (!taken) return;
    }
}

/* Calls node id's gradient function with the summed gradients of its outputs and files what it
 * returns as contributions to the nodes that feed it. */
static wf_status *backprop_node(walk *w, int id)
{
    wf_node *n = w->g->nodes[id];
    bool needed = false;
    for (int i = 0; i < n->n_in; i++)
        if (is_float_out(n->in[i]) && w->fwd[n->in[i].node->id]) needed = true;
    if (!needed) return NULL; /* only an xs source: nothing upstream asks for its inputs */
    wf_output dy_small[4], dx_small[8];
    wf_output *dy = n->n_out <= 4 ? dy_small : wf__calloc((size_t)n->n_out, sizeof *dy);
    wf_output *dx = n->n_in <= 8 ? dx_small : wf__calloc((size_t)n->n_in, sizeof *dx);
    wf_status *s = NULL;
    if (!dy || !dx) {
        s = wf__oom("gradient bookkeeping", sizeof *dy * (size_t)(n->n_out + n->n_in));
        goto done;
    }
    memset(dx, 0, sizeof *dx * (size_t)n->n_in);
    bool any = false;
    for (int j = 0; j < n->n_out; j++) {
        if ((s = aggregate(w, id, j, &dy[j]))) goto done;
        any |= dy[j].node != NULL;
    }
    if (!any) goto done;
    if (!n->op->grad) {
        s = wf__status(WF_UNIMPLEMENTED, "node '%s' (%s): no gradient is defined for %s", n->name, n->op->name,
                       n->op->name);
        goto done;
    }
    char prefix[NAME_MAX_];
    snprintf(prefix, sizeof prefix, "%s/%s/", w->root, n->name);
    wf__grad_ctx gc = {.g = w->g, .node = n, .dy = dy, .dx = dx, .prefix = prefix};
    if ((s = n->op->grad(&gc))) goto done;
    for (int i = 0; i < n->n_in; i++) {
        wf_output src = n->in[i];
        if (!dx[i].node || !is_float_out(src)) continue; /* integer, bool and absent inputs carry none */
        wf_dtype want = src.node->out[src.index].dtype, got = wf_output_dtype(dx[i]);
        if (got != want) {
            s = wf__status(WF_INTERNAL, "node '%s' (%s): gradient of input %d has dtype %s, the input %s", n->name,
                           n->op->name, i, wf_dtype_name(got), wf_dtype_name(want));
            goto done;
        }
        if (src.node->id < w->n0 && w->fwd[src.node->id] && (s = add_contrib(w, src.node->id, src.index, dx[i])))
            goto done;
    }
done:
    if (dy != dy_small) wf__free(dy);
    if (dx != dx_small) wf__free(dx);
    return s;
}

static wf_status *gradients(walk *w, const wf_output *ys, int n_ys, const wf_output *grad_ys, const wf_output *xs,
                            int n_xs, wf_output *res)
{
    wf_graph *g = w->g;
    for (int i = 0; i < n_xs; i++) w->fwd[xs[i].node->id] = 1;
    for (int id = 0; id < w->n0; id++) {
        wf_node *n = g->nodes[id];
        for (int i = 0; i < n->n_in && !w->fwd[id]; i++)
            if (is_float_out(n->in[i]) && w->fwd[n->in[i].node->id]) w->fwd[id] = 1;
    }
    for (int k = 0; k < n_ys; k++) w->bwd[ys[k].node->id] = 1;
    for (int id = w->n0 - 1; id >= 0; id--) {
        wf_node *n = g->nodes[id];
        if (!w->bwd[id] || !w->fwd[id]) continue; /* gradients only travel through nodes below some x */
        for (int i = 0; i < n->n_in; i++)
            if (is_float_out(n->in[i])) w->bwd[n->in[i].node->id] = 1;
    }
    pick_root(w);
    char prefix[NAME_MAX_];
    snprintf(prefix, sizeof prefix, "%s/", w->root);
    for (int k = 0; k < n_ys; k++) {
        if (!is_float_out(ys[k]) || !w->fwd[ys[k].node->id]) continue;
        wf_output gy;
        if (grad_ys && grad_ys[k].node) {
            gy = grad_ys[k];
        } else {
            wf__grad_ctx gc = {.g = g, .node = ys[k].node, .prefix = prefix};
            char nm[48];
            snprintf(nm, sizeof nm, "ys_%d_ones", k);
            WF__TRY(wf__g_fill_like(&gc, nm, ys[k], 1.0, &gy));
        }
        WF__TRY(add_contrib(w, ys[k].node->id, ys[k].index, gy));
    }
    for (int id = w->n0 - 1; id >= 0; id--)
        if (w->fwd[id] && w->bwd[id]) WF__TRY(backprop_node(w, id));
    for (int i = 0; i < n_xs; i++) {
        res[i].node = NULL;
        res[i].index = 0;
        if (is_float_out(xs[i])) WF__TRY(aggregate(w, xs[i].node->id, xs[i].index, &res[i]));
    }
    return NULL;
}

wf_status *wf_gradients(wf_graph *g, const wf_output *ys, int n_ys, const wf_output *grad_ys, const wf_output *xs,
                        int n_xs, wf_output *dxs)
{
    if (!g) return wf__status(WF_INVALID_ARGUMENT, "wf_gradients: graph is NULL");
    if (n_ys < 0 || n_xs < 0 || (n_ys && !ys) || (n_xs && (!xs || !dxs)))
        return wf__status(WF_INVALID_ARGUMENT, "wf_gradients: %d ys at %p, %d xs at %p, dxs at %p", n_ys,
                          (const void *)ys, n_xs, (const void *)xs, (void *)dxs);
    for (int k = 0; k < n_ys; k++) {
        if (!belongs(g, ys[k], g->n))
            return wf__status(WF_INVALID_ARGUMENT, "wf_gradients: ys[%d] is not an output of a node of this graph", k);
        if (grad_ys && grad_ys[k].node) {
            if (!belongs(g, grad_ys[k], g->n))
                return wf__status(WF_INVALID_ARGUMENT,
                                  "wf_gradients: grad_ys[%d] is not an output of a node of this graph", k);
            const wf__tinfo *a = wf__g_info(ys[k]), *b = wf__g_info(grad_ys[k]);
            char sa[160], sb[160];
            bool shape_bad = a->rank >= 0 && b->rank >= 0 && a->rank != b->rank;
            for (int d = 0; !shape_bad && a->rank >= 0 && d < a->rank && b->rank == a->rank; d++)
                shape_bad = a->dims[d] >= 0 && b->dims[d] >= 0 && a->dims[d] != b->dims[d];
            if (a->dtype != b->dtype || shape_bad)
                return wf__status(WF_INVALID_ARGUMENT,
                                  "wf_gradients: grad_ys[%d] ('%s', %s) does not match ys[%d] ('%s', %s)", k,
                                  grad_ys[k].node->name, wf__tinfo_str(b, sb), k, ys[k].node->name,
                                  wf__tinfo_str(a, sa));
        }
    }
    for (int i = 0; i < n_xs; i++)
        if (!belongs(g, xs[i], g->n))
            return wf__status(WF_INVALID_ARGUMENT, "wf_gradients: xs[%d] is not an output of a node of this graph", i);
    walk w = {.g = g, .n0 = g->n};
    w.fwd = wf__calloc((size_t)(w.n0 ? w.n0 : 1), 1);
    w.bwd = wf__calloc((size_t)(w.n0 ? w.n0 : 1), 1);
    w.head = wf__malloc(sizeof *w.head * (size_t)(w.n0 ? w.n0 : 1));
    wf_output *res = wf__calloc((size_t)(n_xs ? n_xs : 1), sizeof *res);
    wf_status *s = NULL;
    if (!w.fwd || !w.bwd || !w.head || !res) {
        s = wf__oom("gradient bookkeeping", (size_t)w.n0 * (2 + sizeof *w.head));
    } else {
        for (int i = 0; i < w.n0; i++) w.head[i] = -1;
        s = gradients(&w, ys, n_ys, grad_ys, xs, n_xs, res);
    }
    if (s) {
        wf__graph_truncate(g, w.n0); /* on any error the graph is as it was */
    } else {
        for (int i = 0; i < n_xs; i++) dxs[i] = res[i];
    }
    wf__free(res);
    wf__free(w.fwd);
    wf__free(w.bwd);
    wf__free(w.head);
    wf__free(w.c);
    return s;
}
