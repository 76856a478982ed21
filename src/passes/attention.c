/*
 * Pass "attention": multi-head attention written out in ops, as PyTorch exports it from a model's own
 * attention code (BERT's, ViT's, a hand-written transformer's),
 *
 *     Reshape(Transpose(MatMul(Softmax(S / c [+ M]), Vh), [0,2,1,3]), (B, Sq, H*Dv))
 *     S  = MatMul(Qh, Kt)
 *     Qh = Transpose(Reshape(q, (B, Sq, H, D)), [0,2,1,3])     q: (B, Sq, H*D)
 *     Kt = Transpose(Reshape(k, (B, T, H, D)), [0,2,3,1])      k: (B, T, H*D)
 *     Vh = Transpose(Reshape(v, (B, T, H, Dv)), [0,2,1,3])     v: (B, T, H*Dv)
 *
 * -> Attention(q, k, v [, M]; q_num_heads = kv_num_heads = H, scale = 1/c), ONNX's op (opset 23), with
 * its 3-D inputs and output: one node instead of eleven, which reads q, k and v where they lie (no
 * transposed copies, no score tensor between nodes: the CPU's f32 kernel runs sgemm per head and block
 * of queries, k_onnx_attn.c). The scale may be a Div by c or a Mul by c (scale c), or absent (1); c
 * is a positive constant of one element (ONNX's reference scales Q and K by sqrt(scale)). simplify runs
 * first, so a K transposed twice arrives as one Transpose.
 *
 * When it keeps the chain's values: f32 only; the mask M, when there is one, is a constant with every
 * value finite and a key dimension of exactly T (Attention pads a shorter one with -inf where Add would
 * broadcast it), its other dimensions 1 or (B, H, Sq)'s. With no mask or such a mask no row is forbidden
 * every key, so Attention's zero rows never occur; a row whose scores are all -inf by themselves (Q or K
 * infinite) is NaN in both, and NaN spreads alike. The products round differently (scale * (q . k)
 * against (q . k) / c, oneDNN's sgemm against its matmul): agreement is within f32 tolerance, not bit
 * for bit. A runtime mask (HuggingFace's (1 - mask) * min) is not taken: its values are unknown here, and
 * a row of -inf would give Attention's zeros where the chain gives NaN.
 *
 * Inner nodes that something else reads stay (and are computed twice); prune drops the others.
 */
#include <math.h>

#include "passes/pass.h"

static bool is_op(wf_output o, const char *op) { return o.node && o.index == 0 && !strcmp(o.node->op->name, op); }
static const wf__tinfo *info(wf_output o) { return &o.node->out[o.index]; }

/* Whether t (a Transpose of a rank-4 value) has the permutation p. */
static bool perm_is(const wf_node *t, const int64_t *p)
{
    const wf__attr *a = wf__attr_get(t->op, t->attrs, "perm");
    if (!a || !a->set || a->n != 4) return false;
    for (int i = 0; i < 4; i++)
        if ((a->ints[i] < 0 ? a->ints[i] + 4 : a->ints[i]) != p[i]) return false;
    return true;
}

/* Whether m is a MatMul without transposes. */
static bool plain_matmul(wf_output o)
{
    if (!is_op(o, "MatMul") || o.node->n_in != 2 || !o.node->in[0].node || !o.node->in[1].node) return false;
    const wf_node *m = o.node;
    return !wf__attr_i(m->op, m->attrs, "transpose_a") && !wf__attr_i(m->op, m->attrs, "transpose_b");
}

/* For o = Transpose(Reshape(v, (B, S, H, D)), p), v of known f32 shape (B, S, H*D): v, and (B, S, H, D)
 * in d. */
static bool heads_of(wf_output o, const int64_t *p, wf_output *v, int64_t *d)
{
    if (!is_op(o, "Transpose") || !perm_is(o.node, p) || !is_op(o.node->in[0], "Reshape")) return false;
    wf_output r = o.node->in[0];
    *v = r.node->in[0];
    if (!v->node) return false;
    const wf__tinfo *tv = info(*v), *tr = info(r);
    if (!wf__tinfo_known(tv) || !wf__tinfo_known(tr) || tv->dtype != WF_F32 || tv->rank != 3 || tr->rank != 4 ||
        tr->dims[0] != tv->dims[0] || tr->dims[1] != tv->dims[1] || tr->dims[2] * tr->dims[3] != tv->dims[2] ||
        tr->dims[2] < 1 || tr->dims[3] < 1)
        return false;
    memcpy(d, tr->dims, sizeof(int64_t) * 4);
    return true;
}

/* The one value of a one-element f32 constant, or NaN. */
static double scalar_of(wf_output o)
{
    const wf_tensor *c = o.node ? wf__pass_value(o) : NULL;
    if (!c || c->dtype != WF_F32 || c->size != 1) return NAN;
    return wf__load_f64(c->data, c->dtype, 0);
}

/* Whether o is a constant f32 mask that Add broadcasts onto (B, H, Sq, T) as Attention reads it: rank
 * <= 4, every value finite, key dimension T, the others 1 or the full extent. */
static bool finite_mask(wf_output o, const int64_t *full)
{
    const wf_tensor *m = o.node ? wf__pass_value(o) : NULL;
    if (!m || m->dtype != WF_F32 || m->rank < 1 || m->rank > 4 || m->dims[m->rank - 1] != full[3]) return false;
    for (int i = 0; i < m->rank - 1; i++) {
        int64_t d = m->dims[i], f = full[4 - m->rank + i];
        if (d != 1 && d != f) return false;
    }
    const float *x = m->data;
    for (int64_t i = 0; i < m->size; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* The attention under n (the final Reshape), as Attention's inputs (q, k, v, mask or {NULL}), heads and
 * scale; false when n is not one (see the header). */
static bool attention_of(const wf_node *n, const wf_output *in, wf_output *qkvm, int64_t *heads, double *scale)
{
    static const int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1};
    if (strcmp(n->op->name, "Reshape") || !is_op(in[0], "Transpose") || !perm_is(in[0].node, p0213)) return false;
    wf_output o = in[0].node->in[0];
    if (!plain_matmul(o) || !is_op(o.node->in[0], "Softmax")) return false;
    const wf_node *sm = o.node->in[0].node;
    int64_t axis = wf__attr_i(sm->op, sm->attrs, "axis");
    if ((axis != -1 && axis != 3) || !sm->in[0].node) return false;
    wf_output z = sm->in[0], s = z, mask = {NULL, 0};
    /* [+ M] */
    if (is_op(z, "Add") && z.node->n_in == 2) {
        for (int j = 0; j < 2 && !mask.node; j++)
            if (wf__pass_value(z.node->in[1 - j]) && !wf__pass_value(z.node->in[j]))
                s = z.node->in[j], mask = z.node->in[1 - j];
        if (!mask.node) return false;
    }
    /* / c, * c or nothing */
    *scale = 1.0;
    if ((is_op(s, "Div") || is_op(s, "Mul")) && s.node->n_in == 2) {
        bool div = is_op(s, "Div");
        int j = div || !isnan(scalar_of(s.node->in[1])) ? 0 : 1; /* Mul: the constant on either side */
        double c = scalar_of(s.node->in[1 - j]);
        if (!(c > 0) || !isfinite(c)) return false;
        *scale = div ? 1.0 / c : c;
        s = s.node->in[j];
    }
    if (!plain_matmul(s)) return false;
    int64_t dq[4], dk[4], dv[4];
    if (!heads_of(s.node->in[0], p0213, &qkvm[0], dq) || !heads_of(s.node->in[1], p0231, &qkvm[1], dk) ||
        !heads_of(o.node->in[1], p0213, &qkvm[2], dv))
        return false;
    /* one batch and head count, Q and K of one head size, K and V of one length */
    if (dq[0] != dk[0] || dk[0] != dv[0] || dq[2] != dk[2] || dk[2] != dv[2] || dq[3] != dk[3] || dk[1] != dv[1])
        return false;
    const wf__tinfo *ty = &n->out[0], *tz = info(z);
    if (!wf__tinfo_known(ty) || ty->dtype != WF_F32 || ty->rank != 3 || ty->dims[0] != dq[0] || ty->dims[1] != dq[1] ||
        ty->dims[2] != dq[2] * dv[3] || tz->dtype != WF_F32)
        return false;
    int64_t full[4] = {dq[0], dq[2], dq[1], dk[1]};
    if (mask.node && !finite_mask(mask, full)) return false;
    qkvm[3] = mask;
    *heads = dq[2];
    return true;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    wf_output qkvm[4];
    int64_t heads;
    double scale;
    if (attention_of(n, in, qkvm, &heads, &scale)) {
        wf_attr a[3] = {wf_attr_int("q_num_heads", heads), wf_attr_int("kv_num_heads", heads),
                        wf_attr_float("scale", scale)};
        return wf__pass_emit(r, n, "Attention", n->name, qkvm, qkvm[3].node ? 4 : 3, a, 3, &out[0]);
    }
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    return NULL;
}

const wf__pass wf__pass_attention = {"attention", NULL, NULL, visit};
