/*
 * Pass "bnfold": BatchNormalization (inference: weft refuses training mode at build) folded into the
 * Conv2D before it, when the convolution's only reader is the BatchNormalization and the weight, the
 * bias if any and the four statistics are constants of one float dtype (f32 or f64). With
 * s = scale / sqrt(var + epsilon), per output channel o:
 *     W'[o, ...] = W[o, ...] * s[o]        b'[o] = (b[o] - mean[o]) * s[o] + B[o]
 * computed in double and stored in the weight's dtype. The Conv2D keeps its name and attributes and
 * gets the new constants (named after it, "/bn_folded_weight" and "/bn_folded_bias"); readers of the
 * BatchNormalization read the Conv2D. NaN and Inf propagate as unfused: a NaN statistic makes s or b'
 * NaN, so the channel's outputs are NaN either way; an infinite input gives NaN where a zero s meets
 * it (0 * Inf), as BatchNormalization's (Inf - mean) * 0 does.
 */
#include <math.h>
#include <stdio.h>

#include "passes/pass.h"

typedef struct bn_state {
    int *sole;          /* per source node: the id of the only live reader of output 0, -1 none, -2 several */
    wf_output *folded;  /* per source node: for a BatchNormalization folded away, the Conv2D's output */
} bn_state;

static bool is_const_node(const wf_node *n) { return n && !strcmp(n->op->name, "Const"); }

static const wf_tensor *const_value(const wf_node *n)
{
    const wf__attr *v = wf__attr_get(n->op, n->attrs, "value");
    return v ? v->t : NULL;
}

static double get(const wf_tensor *t, int64_t i)
{
    return t->dtype == WF_F64 ? ((const double *)t->data)[i] : (double)((const float *)t->data)[i];
}

static void put(wf_tensor *t, int64_t i, double v)
{
    if (t->dtype == WF_F64) ((double *)t->data)[i] = v;
    else ((float *)t->data)[i] = (float)v;
}

static wf_status *begin(wf__pass_run *r)
{
    int n = r->src->n;
    bn_state *b = wf__calloc(1, sizeof *b);
    if (b) {
        b->sole = wf__malloc(sizeof *b->sole * (size_t)(n ? n : 1));
        b->folded = wf__calloc((size_t)(n ? n : 1), sizeof *b->folded);
    }
    if (!b || !b->sole || !b->folded) {
        if (b) {
            wf__free(b->sole);
            wf__free(b->folded);
        }
        wf__free(b);
        return wf__oom("bnfold", sizeof(int) * (size_t)n * 3);
    }
    for (int i = 0; i < n; i++) b->sole[i] = -1;
    for (int i = 0; i < n; i++) {
        if (!r->live[i]) continue;
        const wf_node *x = r->src->nodes[i];
        for (int k = 0; k < x->n_in; k++) {
            const wf_node *p = x->in[k].node;
            if (!p || x->in[k].index != 0) continue;
            b->sole[p->id] = b->sole[p->id] == -1 || b->sole[p->id] == i ? i : -2;
        }
    }
    r->state = b;
    return NULL;
}

static void end(wf__pass_run *r)
{
    bn_state *b = r->state;
    if (!b) return;
    wf__free(b->sole);
    wf__free(b->folded);
    wf__free(b);
}

/* The BatchNormalization that conv (a source Conv2D) can absorb, or NULL. */
static const wf_node *foldable(const wf__pass_run *r, const bn_state *b, const wf_node *conv)
{
    if (strcmp(conv->op->name, "Conv2D") != 0 || wf__pass_uses(r, conv, 0) != 1 || b->sole[conv->id] < 0) return NULL;
    const wf_node *bn = r->src->nodes[b->sole[conv->id]];
    if (strcmp(bn->op->name, "BatchNormalization") != 0 || bn->in[0].node != conv) return NULL;
    if (wf__attr_i(bn->op, bn->attrs, "training_mode") != 0) return NULL;
    if (!is_const_node(conv->in[1].node) || (conv->n_in > 2 && conv->in[2].node && !is_const_node(conv->in[2].node)))
        return NULL;
    const wf_tensor *w = const_value(conv->in[1].node);
    if (!w || (w->dtype != WF_F32 && w->dtype != WF_F64) || w->rank < 1 || w->dims[0] <= 0) return NULL;
    for (int i = 1; i < 5; i++) {
        if (!is_const_node(bn->in[i].node)) return NULL;
        const wf_tensor *p = const_value(bn->in[i].node);
        if (!p || p->dtype != w->dtype || p->size != w->dims[0]) return NULL;
    }
    if (conv->n_in > 2 && conv->in[2].node) {
        const wf_tensor *cb = const_value(conv->in[2].node);
        if (!cb || cb->dtype != w->dtype || cb->size != w->dims[0]) return NULL;
    }
    return bn;
}

static wf_status *fold_conv(wf__pass_run *r, const wf_node *conv, const wf_node *bn, const wf_output *in,
                            wf_output *out)
{
    const wf_tensor *w = const_value(conv->in[1].node);
    const wf_tensor *cb = conv->n_in > 2 && conv->in[2].node ? const_value(conv->in[2].node) : NULL;
    const wf_tensor *sc = const_value(bn->in[1].node), *bb = const_value(bn->in[2].node);
    const wf_tensor *mean = const_value(bn->in[3].node), *var = const_value(bn->in[4].node);
    double eps = wf__attr_f(bn->op, bn->attrs, "epsilon");
    int64_t oc = w->dims[0], per = w->size / oc;
    wf_tensor *nw = NULL, *nb = NULL;
    WF__TRY(wf__tensor_alloc(w->dtype, w->rank, w->dims, "a folded convolution weight", &nw));
    wf_status *s = wf__tensor_alloc(w->dtype, 1, &oc, "a folded convolution bias", &nb);
    if (s) {
        wf_tensor_free(nw);
        return s;
    }
    for (int64_t o = 0; o < oc; o++) {
        double k = get(sc, o) / sqrt(get(var, o) + eps);
        for (int64_t i = 0; i < per; i++) put(nw, o * per + i, get(w, o * per + i) * k);
        put(nb, o, ((cb ? get(cb, o) : 0.0) - get(mean, o)) * k + get(bb, o));
    }
    char name[600];
    wf_output cin[3] = {in[0], {NULL, 0}, {NULL, 0}};
    wf__pass_fresh_name(r->dst, conv->name, "/bn_folded_weight", name, sizeof name);
    s = wf_const(r->dst, name, nw, &cin[1]);
    if (!s) {
        wf__pass_fresh_name(r->dst, conv->name, "/bn_folded_bias", name, sizeof name);
        s = wf_const(r->dst, name, nb, &cin[2]);
    }
    wf_tensor_free(nw);
    wf_tensor_free(nb);
    /* the Conv2D again, with the folded inputs (its attributes and requests through the copy) */
    wf_node *c = NULL;
    if (!s) {
        wf_node tmp = *conv; /* its op, name, attributes and requests, with three inputs */
        tmp.n_in = 3;
        s = wf__pass_copy(r, &tmp, cin, &c);
    }
    if (s) return wf__status_wrap(s, "bnfold: node '%s' (Conv2D) with '%s' (BatchNormalization)", conv->name, bn->name);
    out[0] = (wf_output){c, 0};
    ((bn_state *)r->state)->folded[bn->id] = out[0];
    return NULL;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    bn_state *b = r->state;
    if (b->folded[n->id].node) { /* a BatchNormalization its Conv2D absorbed */
        out[0] = b->folded[n->id];
        return NULL;
    }
    const wf_node *bn = foldable(r, b, n);
    if (bn) return fold_conv(r, n, bn, in, out);
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    return NULL;
}

const wf__pass wf__pass_bnfold = {"bnfold", begin, end, visit};
