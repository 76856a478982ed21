/*
 * Pass "bnfold": BatchNormalization (inference: weft refuses training mode at build) folded into the
 * Conv2D, MatMul or Gemm before it, when that node's only reader is the BatchNormalization and its
 * weight, its bias if any and the four statistics are constants of one float dtype (f32 or f64). With
 * s = scale / sqrt(var + epsilon), per output channel o (a convolution's output channel; for a MatMul
 * or Gemm, whose output must then be 2-D [M, N], the column n, which is BatchNormalization's channel
 * dim 1):
 *     Conv2D  W'[o, ...] = W[o, ...] s[o]       b'[o] = (b[o] - mean[o]) s[o] + B[o]
 *     MatMul  W'[k, n] = W[k, n] s[n]           then BiasAdd(b'[n] = B[n] - mean[n] s[n])
 *     Gemm    B'[k, n] = B[k, n] s[n]           C'[n] = (beta C[n] - mean[n]) s[n] + B[n], beta 1
 * (the weight's layout as transpose_b / transB say; a Gemm's C must be absent or hold one value per
 * column, [N] or [1, N]), computed in double and stored in the weight's dtype. The node keeps its
 * name and other attributes and gets the new constants (named after it, "/bn_folded_weight" and
 * "/bn_folded_bias"); readers of the BatchNormalization read the Conv2D or Gemm, or the MatMul's new
 * BiasAdd (named as the BatchNormalization was, which level 2 fuses into the MatMul). NaN and Inf
 * propagate as unfused: a NaN statistic makes s or b' NaN, so the channel's outputs are NaN either
 * way; an infinite input gives NaN where a zero s meets it (0 * Inf), as BatchNormalization's
 * (Inf - mean) * 0 does.
 */
#include <math.h>
#include <stdio.h>

#include "passes/pass.h"

typedef struct bn_state {
    int *sole;          /* per source node: its only live reader (wf__pass_sole_readers) */
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
        b->sole = wf__pass_sole_readers(r);
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

enum { K_CONV, K_MATMUL, K_GEMM };

/* Where the output channels of node n's weight w are: the channel count, and the element strides of
 * the channel and of the rest (W[o, ...] for a convolution; W[k, n] or W[n, k] for a matrix). */
typedef struct chan {
    int kind;
    int64_t oc, per;         /* channels, elements per channel */
    int64_t o_stride, i_stride;
} chan;

static bool channels(const wf_node *n, const wf_tensor *w, chan *c)
{
    const char *op = n->op->name;
    if (!strcmp(op, "Conv2D")) {
        if (w->rank < 1 || w->dims[0] <= 0) return false;
        *c = (chan){K_CONV, w->dims[0], w->size / w->dims[0], w->size / w->dims[0], 1};
        return true;
    }
    bool mm = !strcmp(op, "MatMul"), gemm = !strcmp(op, "Gemm");
    if ((!mm && !gemm) || w->rank != 2 || n->out[0].rank != 2) return false;
    bool tb = wf__attr_i(n->op, n->attrs, mm ? "transpose_b" : "transB") != 0;
    int64_t k = w->dims[tb ? 1 : 0], nn = w->dims[tb ? 0 : 1];
    if (nn <= 0) return false;
    /* W[k][n] = data[k * nn + n]; transposed: data[n * k + kk] */
    *c = (chan){mm ? K_MATMUL : K_GEMM, nn, k, tb ? k : 1, tb ? 1 : nn};
    return true;
}

/* The BatchNormalization that x (a source Conv2D, MatMul or Gemm) can absorb, or NULL. */
static const wf_node *foldable(const wf__pass_run *r, const bn_state *b, const wf_node *x, chan *c)
{
    const char *op = x->op->name;
    if (strcmp(op, "Conv2D") != 0 && strcmp(op, "MatMul") != 0 && strcmp(op, "Gemm") != 0) return NULL;
    if (wf__pass_uses(r, x, 0) != 1 || b->sole[x->id] < 0) return NULL;
    const wf_node *bn = r->src->nodes[b->sole[x->id]];
    if (strcmp(bn->op->name, "BatchNormalization") != 0 || bn->in[0].node != x) return NULL;
    if (wf__attr_i(bn->op, bn->attrs, "training_mode") != 0) return NULL;
    bool has_bias = x->n_in > 2 && x->in[2].node;
    if (!is_const_node(x->in[1].node) || (has_bias && !is_const_node(x->in[2].node))) return NULL;
    const wf_tensor *w = const_value(x->in[1].node);
    if (!w || (w->dtype != WF_F32 && w->dtype != WF_F64) || !channels(x, w, c)) return NULL;
    for (int i = 1; i < 5; i++) {
        if (!is_const_node(bn->in[i].node)) return NULL;
        const wf_tensor *p = const_value(bn->in[i].node);
        if (!p || p->dtype != w->dtype || p->size != c->oc) return NULL;
    }
    if (has_bias) {
        const wf_tensor *cb = const_value(x->in[2].node);
        if (!cb || cb->dtype != w->dtype || cb->size != c->oc) return NULL;
        if (c->kind == K_GEMM && cb->rank == 2 && cb->dims[0] != 1) return NULL; /* [N, 1] runs down rows */
    }
    return bn;
}

static wf_status *fold(wf__pass_run *r, const wf_node *x, const wf_node *bn, const chan *ch, const wf_output *in,
                       wf_output *out)
{
    const wf_tensor *w = const_value(x->in[1].node);
    const wf_tensor *cb = x->n_in > 2 && x->in[2].node ? const_value(x->in[2].node) : NULL;
    const wf_tensor *sc = const_value(bn->in[1].node), *bb = const_value(bn->in[2].node);
    const wf_tensor *mean = const_value(bn->in[3].node), *var = const_value(bn->in[4].node);
    double eps = wf__attr_f(bn->op, bn->attrs, "epsilon");
    double beta = ch->kind == K_GEMM ? wf__attr_f(x->op, x->attrs, "beta") : 1.0;
    int64_t oc = ch->oc;
    wf_tensor *nw = NULL, *nb = NULL;
    WF__TRY(wf__tensor_alloc(w->dtype, w->rank, w->dims, "a folded weight", &nw));
    wf_status *s = wf__tensor_alloc(w->dtype, 1, &oc, "a folded bias", &nb);
    if (s) {
        wf_tensor_free(nw);
        return s;
    }
    for (int64_t o = 0; o < oc; o++) {
        double k = get(sc, o) / sqrt(get(var, o) + eps);
        for (int64_t i = 0; i < ch->per; i++) {
            int64_t at = o * ch->o_stride + i * ch->i_stride;
            put(nw, at, get(w, at) * k);
        }
        put(nb, o, ((cb ? beta * get(cb, o) : 0.0) - get(mean, o)) * k + get(bb, o));
    }
    char name[600];
    wf_output cin[3] = {in[0], {NULL, 0}, {NULL, 0}};
    wf__pass_fresh_name(r->dst, x->name, "/bn_folded_weight", name, sizeof name);
    s = wf_const(r->dst, name, nw, &cin[1]);
    if (!s) {
        wf__pass_fresh_name(r->dst, x->name, "/bn_folded_bias", name, sizeof name);
        s = wf_const(r->dst, name, nb, &cin[2]);
    }
    wf_tensor_free(nw);
    wf_tensor_free(nb);
    wf_node *c = NULL;
    if (!s && ch->kind == K_CONV) { /* the Conv2D again, with the folded inputs */
        wf_node tmp = *x; /* its op, name, attributes and requests, with three inputs */
        tmp.n_in = 3;
        if (!(s = wf__pass_copy(r, &tmp, cin, &c))) out[0] = (wf_output){c, 0};
    } else if (!s && ch->kind == K_MATMUL) { /* the MatMul on the new weight, then the bias */
        wf_node tmp = *x;
        tmp.n_in = 2;
        if (!(s = wf__pass_copy(r, &tmp, cin, &c))) {
            wf_output bin[2] = {{c, 0}, cin[2]};
            s = wf__pass_emit(r, bn, "BiasAdd", bn->name, bin, 2, NULL, 0, &out[0]);
        }
    } else if (!s) { /* the Gemm with beta 1 */
        wf_attr a[4] = {wf_attr_float("alpha", wf__attr_f(x->op, x->attrs, "alpha")), wf_attr_float("beta", 1.0),
                        wf_attr_int("transA", wf__attr_i(x->op, x->attrs, "transA")),
                        wf_attr_int("transB", wf__attr_i(x->op, x->attrs, "transB"))};
        s = wf__pass_emit(r, x, "Gemm", x->name, cin, 3, a, 4, &out[0]);
    }
    if (s) return wf__status_wrap(s, "bnfold: node '%s' (%s) with '%s' (BatchNormalization)", x->name, x->op->name, bn->name);
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
    chan ch;
    const wf_node *bn = foldable(r, b, n, &ch);
    if (bn) return fold(r, n, bn, &ch, in, out);
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    return NULL;
}

const wf__pass wf__pass_bnfold = {"bnfold", begin, end, visit};
