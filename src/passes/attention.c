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
 * With a dynamic batch or sequence the heads' shapes are read from the Reshapes' shape inputs (see
 * "shapes a run computes"), and q, k and v must then be projections of one tensor.
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
 * GPT's forms: q, k and v may be the three outputs of a Split of one packed projection along its last
 * axis (GPT-2's c_attn), and the mask may be a Where with a constant bool condition and -inf:
 * Where(allowed, S, -inf) or masked_fill's Where(forbidden, -inf, S), which becomes Attention's bool mask
 * (true = allowed; masked_fill's negated into a new constant) when every row allows some key. Where
 * replaces a forbidden score by -inf, where ONNX's Attention adds -inf (a NaN or +inf score would then
 * spread NaN over its row), so such an Attention carries weft's attribute mask_replaces = 1, which
 * every device's kernel honours. A Where filled with float's lowest (HuggingFace's GPT-2) is not taken:
 * where a row's allowed scores are all -inf the chain gives weight to the forbidden keys.
 *
 * Inner nodes that something else reads stay (and are computed twice); prune drops the others.
 */
#include <math.h>

#include "passes/pass.h"


/* Whether t (a Transpose of a rank-4 value) has the permutation p. */
static bool perm_is(const wf_node *t, const int64_t *p)
{
    int64_t q[4];
    return wf__pass_perm(t, 4, q) && !memcmp(q, p, sizeof q);
}

/* Whether m is a MatMul without transposes. */
static bool plain_matmul(wf_output o)
{
    if (!wf__pass_is_op(o, "MatMul") || o.node->n_in != 2 || !o.node->in[0].node || !o.node->in[1].node) return false;
    const wf_node *m = o.node;
    return !wf__attr_i(m->op, m->attrs, "transpose_a") && !wf__attr_i(m->op, m->attrs, "transpose_b");
}

/* ---- shapes a run computes ------------------------------------------------------------------------
 * With a dynamic batch or sequence PyTorch writes t.view(b, s, H, D) as Reshape(t, Concat(Unsqueeze(
 * Gather(Shape(t), 0)), Unsqueeze(Gather(Shape(t), 1)), H, D)) and x.reshape(x.shape) as Reshape(.,
 * Shape(x)), which shape inference leaves unknown while a dim is (fold makes the known ones constants).
 * Element i of such a shape is read here as a known value or as "dim k of tensor t"; a dim of t is the
 * same as v's when t is v or v comes from t through ops that keep the leading dims (MatMul by a matrix,
 * BiasAdd, the normalisations, the unary activations, a packed projection's Split along its last axis,
 * an elementwise op with a constant that broadcasts onto the other operand without growing it, a sum of
 * two values that both keep them, an earlier 3-D Attention): the projections of the attention's input. */

typedef struct {
    int64_t value; /* >= 0 known (0 also "copy" in a Reshape's shape), -1 "infer", or < -1 unknown */
    wf_output t;   /* when set: dim k of t */
    int k;
} dim_ref;

/* Element i of shape tensor sh (1-D i64), or false when it is neither known nor a dim of a tensor. */
static bool shape_elem(wf_output sh, int i, dim_ref *e)
{
    e->t = (wf_output){NULL, 0};
    e->value = -2;
    const wf_tensor *c = wf__pass_value(sh);
    if (c) {
        if (!wf__dtype_is_int(c->dtype) || c->rank != 1 || i >= c->size) return false;
        e->value = wf__load_i64(c->data, c->dtype, i);
        return true;
    }
    if (wf__pass_is_op(sh, "Shape") && sh.node->in[0].node && !wf__attr_i(sh.node->op, sh.node->attrs, "start")) {
        e->t = sh.node->in[0], e->k = i;
        return true;
    }
    if (!wf__pass_is_op(sh, "Concat")) return false;
    /* the piece holding element i: constants of any length, others of one element */
    wf_output pc = {NULL, 0};
    int at = 0;
    for (int j = 0; j < sh.node->n_in && !pc.node; j++) {
        wf_output q = sh.node->in[j];
        if (!q.node || wf__pass_info(q)->rank != 1) return false;
        int64_t len = wf__pass_info(q)->dims[0];
        if (len < 0 || (len != 1 && !wf__pass_value(q))) return false;
        if (i < at + len) pc = q;
        else at += (int)len;
    }
    if (!pc.node) return false;
    if ((c = wf__pass_value(pc))) {
        if (!wf__dtype_is_int(c->dtype) || c->rank != 1 || i - at >= c->size) return false;
        e->value = wf__load_i64(c->data, c->dtype, i - at);
        return true;
    }
    /* Unsqueeze(k) of a constant (fold's static dim, where nothing evaluated the Unsqueeze), or
     * Unsqueeze(Gather(Shape(t), k)) */
    if (!wf__pass_is_op(pc, "Unsqueeze") || !pc.node->in[0].node) return false;
    if ((c = wf__pass_value(pc.node->in[0]))) {
        if (!wf__dtype_is_int(c->dtype) || c->size != 1 || i - at != 0) return false;
        e->value = wf__load_i64(c->data, c->dtype, 0);
        return true;
    }
    if (!wf__pass_is_op(pc.node->in[0], "Gather")) return false;
    const wf_node *g = pc.node->in[0].node;
    const wf_tensor *ix = g->n_in == 2 && g->in[1].node ? wf__pass_value(g->in[1]) : NULL;
    if (!ix || ix->size != 1 || !wf__dtype_is_int(ix->dtype) || wf__attr_i(g->op, g->attrs, "axis") ||
        !wf__pass_is_op(g->in[0], "Shape") || !g->in[0].node->in[0].node ||
        wf__attr_i(g->in[0].node->op, g->in[0].node->attrs, "start"))
        return false;
    e->t = g->in[0].node->in[0];
    e->k = (int)wf__load_i64(ix->data, ix->dtype, 0);
    return e->k >= 0;
}

/* Whether a constant c, broadcast onto x (rank rx, dims dx) by an elementwise op, leaves x's dims as they
 * are: rank at most x's, each of its dims 1 or x's known dim (a position table added to the embeddings). */
static bool bcast_keeps(wf_output c, int rx, const int64_t *dx)
{
    const wf_tensor *v = wf__pass_value(c);
    if (!v || v->rank > rx) return false;
    for (int i = 0; i < v->rank; i++) {
        int64_t d = v->dims[i], e = dx[rx - v->rank + i];
        if (d != 1 && d != e) return false;
    }
    return true;
}

/* Whether v has t's leading dims 0 .. 2 (see above), within *budget steps (each residual Add walks both
 * of its operands). */
static bool leads_within(wf_output v, wf_output t, int *budget)
{
    while (v.node && --*budget > 0) {
        if (v.node == t.node && v.index == t.index) return true;
        const wf_node *n = v.node;
        const char *op = n->op->name;
        /* a packed projection split in three along its last axis (GPT-2's c_attn): any of its outputs */
        if (!strcmp(op, "Split") && n->n_in >= 1 && n->in[0].node) {
            int64_t ax = wf__attr_i(n->op, n->attrs, "axis");
            int rk = wf__pass_info(n->in[0])->rank;
            if (rk < 3 || (ax != -1 && ax != rk - 1)) return false;
            v = n->in[0];
            continue;
        }
        if (v.index != 0 || n->n_in < 1 || !n->in[0].node) return false;
        /* an elementwise op with a constant that keeps the other operand's dims, or a sum of two values
         * that both have t's leading dims (a residual connection) */
        if ((!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div")) && n->n_in == 2 &&
            n->in[1].node) {
            const wf__tinfo *ti = wf__pass_info(v);
            int c = wf__pass_value(n->in[1]) ? 1 : wf__pass_value(n->in[0]) ? 0 : -1;
            if (c >= 0) {
                if (!bcast_keeps(n->in[c], ti->rank, ti->dims)) return false;
                v = n->in[1 - c];
                continue;
            }
            if (strcmp(op, "Add") || !leads_within(n->in[1], t, budget)) return false;
            v = n->in[0];
            continue;
        }
        bool through = (!strcmp(op, "MatMul") && n->n_in == 2 && n->in[1].node && wf__pass_info(n->in[1])->rank == 2 &&
                        !wf__attr_i(n->op, n->attrs, "transpose_a")) ||
                       /* a 3-D Attention's Y has Q's batch and sequence (this pass's own, earlier layers) */
                       (!strcmp(op, "Attention") && wf__pass_info(n->in[0])->rank == 3) ||
                       !strcmp(op, "BiasAdd") || !strcmp(op, "LayerNormalization") || !strcmp(op, "RMSNormalization") ||
                       !strcmp(op, "Gelu") || !strcmp(op, "Relu") || !strcmp(op, "Swish") || !strcmp(op, "Identity");
        if (!through) return false;
        v = n->in[0];
    }
    return false;
}

static bool leads_from(wf_output v, wf_output t)
{
    int budget = 256;
    return leads_within(v, t, &budget);
}

/* Whether element e gives dim k of v (rank 3, dims dv, -1 unknown) in a Reshape of a tensor whose dim k
 * is v's (a 0 copies it: the callers take only Reshapes without allowzero). */
static bool dim_matches(const dim_ref *e, wf_output v, const int64_t *dv, int k)
{
    if (e->t.node) {
        const wf__tinfo *tt = wf__pass_info(e->t);
        if (e->k != k || tt->rank <= k) return false;
        if (tt->dims[k] >= 0 && dv[k] >= 0) return tt->dims[k] == dv[k];
        return leads_from(v, e->t);
    }
    return e->value == 0 || (e->value > 0 && e->value == dv[k]);
}

/* For o = Transpose(Reshape(v, (B, S, H, D)), p), v f32 of rank 3 (B, S, H*D) with H*D known: v, and
 * (B, S, H, D) in d, B and S -1 where a run gives them. The Reshape's shape is known, or its first two
 * elements are v's own dims (see above) and the last two H and D. */
static bool heads_of(wf_output o, const int64_t *p, wf_output *v, int64_t *d)
{
    if (!wf__pass_is_op(o, "Transpose") || !perm_is(o.node, p) || !wf__pass_is_op(o.node->in[0], "Reshape")) return false;
    wf_output r = o.node->in[0];
    *v = r.node->in[0];
    if (!v->node || r.node->n_in != 2 || !r.node->in[1].node || wf__attr_i(r.node->op, r.node->attrs, "allowzero"))
        return false;
    const wf__tinfo *tv = wf__pass_info(*v), *tr = wf__pass_info(r);
    if (tv->dtype != WF_F32 || tv->rank != 3 || tr->rank != 4 || tv->dims[2] < 1) return false;
    if (wf__tinfo_known(tv) && wf__tinfo_known(tr)) {
        if (tr->dims[0] != tv->dims[0] || tr->dims[1] != tv->dims[1] || tr->dims[2] * tr->dims[3] != tv->dims[2] ||
            tr->dims[2] < 1 || tr->dims[3] < 1)
            return false;
        memcpy(d, tr->dims, sizeof(int64_t) * 4);
        return true;
    }
    dim_ref e[4];
    for (int i = 0; i < 4; i++)
        if (!shape_elem(r.node->in[1], i, &e[i])) return false;
    if (!dim_matches(&e[0], *v, tv->dims, 0) || !dim_matches(&e[1], *v, tv->dims, 1) || e[2].t.node || e[3].t.node ||
        e[2].value < 1 || e[3].value < 1 || e[2].value * e[3].value != tv->dims[2])
        return false;
    d[0] = tv->dims[0], d[1] = tv->dims[1], d[2] = e[2].value, d[3] = e[3].value;
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

/* Whether o is a constant bool mask that Where broadcasts onto (B, H, Sq, T) (shape as finite_mask's),
 * read as "key allowed" when its value is `allow`, with at least one key allowed in every row: Attention
 * zeros a row that allows none, where the chain's Softmax over -inf alone gives NaN. */
static bool bool_mask(wf_output o, const int64_t *full, bool allow)
{
    const wf_tensor *m = o.node ? wf__pass_value(o) : NULL;
    if (!m || m->dtype != WF_BOOL || m->rank < 1 || m->rank > 4 || m->dims[m->rank - 1] != full[3] || full[3] < 1)
        return false;
    for (int i = 0; i < m->rank - 1; i++) {
        int64_t d = m->dims[i], f = full[4 - m->rank + i];
        if (d != 1 && d != f) return false;
    }
    const uint8_t *x = m->data;
    for (int64_t row = 0; row < m->size / full[3]; row++) {
        bool any = false;
        for (int64_t j = 0; j < full[3] && !any; j++) any = (x[row * full[3] + j] != 0) == allow;
        if (!any) return false;
    }
    return true;
}

/* Whether q, k and v (qkvm[0..2]) are projections of one tensor (the attention's input): an ancestor of
 * q's that all three lead from. */
static bool common_root(const wf_output *qkvm)
{
    wf_output t = qkvm[0];
    for (int depth = 0; depth < 16 && t.node; depth++) {
        if (leads_from(qkvm[0], t) && leads_from(qkvm[1], t) && leads_from(qkvm[2], t)) return true;
        if (t.index != 0 || t.node->n_in < 1) return false;
        t = t.node->in[0];
    }
    return false;
}

/* The attention under n (the final Reshape), as Attention's inputs (q, k, v, mask or {NULL}), heads and
 * scale; false when n is not one (see the header). */
static bool attention_of(const wf_node *n, const wf_output *in, wf_output *qkvm, int64_t *heads, double *scale,
                         int *fill)
{
    static const int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1};
    if (strcmp(n->op->name, "Reshape") || !wf__pass_is_op(in[0], "Transpose") || !perm_is(in[0].node, p0213)) return false;
    wf_output o = in[0].node->in[0];
    if (!plain_matmul(o) || !wf__pass_is_op(o.node->in[0], "Softmax")) return false;
    const wf_node *sm = o.node->in[0].node;
    int64_t axis = wf__attr_i(sm->op, sm->attrs, "axis");
    if ((axis != -1 && axis != 3) || !sm->in[0].node) return false;
    wf_output z = sm->in[0], s = z, mask = {NULL, 0};
    *fill = 0;
    /* [+ M], or Where(M, S, -inf) (torch.where(allowed, s, -inf)) or Where(M, -inf, S)
     * (s.masked_fill(forbidden, -inf)): *fill 1 or 2 */
    if (wf__pass_is_op(z, "Add") && z.node->n_in == 2) {
        for (int j = 0; j < 2 && !mask.node; j++)
            if (wf__pass_value(z.node->in[1 - j]) && !wf__pass_value(z.node->in[j]))
                s = z.node->in[j], mask = z.node->in[1 - j];
        if (!mask.node) return false;
    } else if (wf__pass_is_op(z, "Where") && z.node->n_in == 3 && z.node->in[0].node && z.node->in[1].node &&
               z.node->in[2].node) {
        const wf_output *w = z.node->in;
        if (scalar_of(w[2]) == -INFINITY && !wf__pass_value(w[1])) s = w[1], *fill = 1;
        else if (scalar_of(w[1]) == -INFINITY && !wf__pass_value(w[2])) s = w[2], *fill = 2;
        else return false;
        mask = w[0];
    }
    /* / c, * c or nothing */
    *scale = 1.0;
    if ((wf__pass_is_op(s, "Div") || wf__pass_is_op(s, "Mul")) && s.node->n_in == 2) {
        bool div = wf__pass_is_op(s, "Div");
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
    /* one batch and head count, Q and K of one head size, K and V of one length; a batch or length a run
     * gives must come from one tensor for all three (self-attention), so they agree at run time */
    if (dq[0] != dk[0] || dk[0] != dv[0] || dq[2] != dk[2] || dk[2] != dv[2] || dq[3] != dk[3] || dk[1] != dv[1])
        return false;
    bool dynamic = dq[0] < 0 || dq[1] < 0 || dk[1] < 0;
    if (dynamic && !common_root(qkvm)) return false;
    const wf__tinfo *ty = &n->out[0], *tz = wf__pass_info(z);
    if (ty->dtype != WF_F32 || ty->rank != 3 || tz->dtype != WF_F32) return false;
    if (wf__tinfo_known(ty)) {
        if (ty->dims[0] != dq[0] || ty->dims[1] != dq[1] || ty->dims[2] != dq[2] * dv[3]) return false;
    } else { /* the merge's shape from a run: (B, Sq, H*Dv) by dims of q's input, copies, or -1 last */
        dim_ref e[3];
        int64_t want[3] = {dq[0], dq[1], dq[2] * dv[3]};
        if (n->n_in != 2 || !n->in[1].node || wf__attr_i(n->op, n->attrs, "allowzero")) return false;
        for (int i = 0; i < 3; i++)
            if (!shape_elem(in[1], i, &e[i])) return false;
        if (!dim_matches(&e[0], qkvm[0], want, 0) || !dim_matches(&e[1], qkvm[0], want, 1)) return false;
        bool last = e[2].t.node ? e[2].k == 2 && wf__pass_info(e[2].t)->rank > 2 && wf__pass_info(e[2].t)->dims[2] == want[2]
                                : e[2].value == want[2] || e[2].value == -1;
        if (!last) return false;
    }
    int64_t full[4] = {dq[0], dq[2], dq[1], dk[1]};
    if (mask.node && !(*fill ? bool_mask(mask, full, *fill == 1) : finite_mask(mask, full))) return false;
    qkvm[3] = mask;
    *heads = dq[2];
    return true;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    wf_output qkvm[4];
    int64_t heads;
    double scale;
    int fill;
    if (attention_of(n, in, qkvm, &heads, &scale, &fill)) {
        wf_attr a[4] = {wf_attr_int("q_num_heads", heads), wf_attr_int("kv_num_heads", heads),
                        wf_attr_float("scale", scale), wf_attr_int("mask_replaces", 1)};
        if (fill == 2) { /* masked_fill's mask says which keys are forbidden: Attention's, which are allowed */
            const wf_tensor *m = wf__pass_value(qkvm[3]);
            wf_tensor *t = NULL;
            char name[600];
            WF__TRY(wf__tensor_alloc(WF_BOOL, m->rank, m->dims, "the attention's mask", &t));
            for (int64_t i = 0; i < m->size; i++) ((uint8_t *)t->data)[i] = !((const uint8_t *)m->data)[i];
            wf__pass_fresh_name(r->dst, n->name, "_allowed", name, sizeof name);
            wf_status *s = wf_const(r->dst, name, t, &qkvm[3]);
            wf_tensor_free(t);
            WF__TRY(s);
        }
        return wf__pass_emit(r, n, "Attention", n->name, qkvm, qkvm[3].node ? 4 : 3, a, fill ? 4 : 3, &out[0]);
    }
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    return NULL;
}

const wf__pass wf__pass_attention = {"attention", NULL, NULL, visit};
