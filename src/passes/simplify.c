/*
 * Pass "simplify": algebra that gives back an input unchanged, and chains that collapse into one node.
 *   x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 -> x, when the constant (any value the graph knows when
 *       built) is all zeros (ones), has x's dtype, and its broadcast cannot grow x: each of its
 *       dimensions is 1 or x's same known dimension. NaN and Inf come back as the op gives them. One
 *       difference, which no comparison sees: x = -0 stays -0 where Add gives +0 (IEEE -0 + +0).
 *   Neg(Neg(x)) -> x.
 *   x * Sigmoid(x) -> Swish(x) (SiLU, as PyTorch exports it); x * HardSigmoid(x) with alpha 1/6 and
 *       beta 1/2 -> HardSwish(x) (PyTorch's export below opset 14). One node instead of two, which
 *       lowering then fuses into a MatMul before it (not a Conv2D: see plan.c). x / (1 + exp(-x))
 *       and x * clamp(x / 6 + 1/2, 0, 1) give NaN for NaN and for -inf (-inf * 0) and +inf for +inf,
 *       as the pair does.
 *   x * (1 + erf(x / sqrt(2))) * 0.5, in any order of its products and operands and with x * (1 /
 *       sqrt(2)) for the division -> Gelu(x) (PyTorch's export of nn.GELU() below opset 20, as in
 *       BERT), f32 only; x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) * 0.5 with x^3 as Pow(x, 3) or
 *       x * x * x -> Gelu(x, approximate "tanh") (GPT-2's gelu_new, nn.GELU("tanh")). One vectorised
 *       node, which lowering then fuses into the MatMul + BiasAdd before it, instead of five (or a
 *       generated kernel of five). Gelu computes 0.5 x (1 + erf(x sqrt(1/2))) with the same erf as the
 *       Erf node on the CPU: within a few ulp of the chain, NaN for NaN and -inf (-inf * 0), +inf for
 *       +inf, as the chain gives them; on a large negative x both round to 0 on the CPU (1 + erf is 0
 *       there), where the CUDA Gelu (erfc) gives a tiny product.
 *   (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * scale (+ bias) over the last axis ->
 *       LayerNormalization(x, scale, bias; epsilon eps) (PyTorch's export of nn.LayerNorm below opset
 *       17, nine nodes), f32 and f64 with 1-D scale and bias: the Div becomes LayerNormalization(x,
 *       ones), then LN(x, ones) * s -> LN(x, s) and LN(x, s) + b -> LN(x, s, b), the same arithmetic
 *       as the separate Mul and Add (so a scale of ones or a zero bias that x * 1 and x + 0 removed
 *       leaves no gap). The kernel's mean and two-pass variance agree with the chain within a few ulp,
 *       and a row with a NaN or an infinity is NaN in both.
 *   x * rsqrt(mean(x^2) + eps) over the last axis (x * (1 / Sqrt(v)), x * Reciprocal(Sqrt(v)) or x /
 *       Sqrt(v): PyTorch's export of LLaMA's and T5's RMSNorm) -> RMSNormalization(x, ones; epsilon
 *       eps), then RMS(x, ones) * s -> RMS(x, s), f32 and f64: one row pass instead of six nodes. The
 *       kernel keeps the mean of squares in double where the chain rounds it to f32, so the two agree
 *       within a few ulp, not bit for bit; a row with a NaN or an infinity is NaN in both (inf / inf),
 *       and an all-zero row is 0 in both (0 * rsqrt(eps)).
 *   Transpose(Transpose(x, q), p) -> Transpose(x, q∘p), or x when that is the identity; a Transpose by
 *       the identity -> x.
 *   A chain of Reshape, Flatten, Squeeze and Unsqueeze -> one Reshape to the last one's shape when
 *       that is known when the graph is built, or x when it is x's own known shape. With a dynamic
 *       dimension: Squeeze(Unsqueeze(x, a), a) -> x, Unsqueeze(Squeeze(x, a), a) -> x, and
 *       Reshape(R(x), s) -> Reshape(x, s) when s has no 0 (a 0 copies a dimension of R(x), not x's).
 * An inner node stays while something else reads it. A collapsed chain checks at run time only the
 * last reshape's element count against x's, not the inner ones' (which the last check implies when
 * every shape is known; on a dynamic dimension an inner reshape that would fail no longer does, as
 * with ONNX Runtime's reshape fusion).
 */
#include <math.h>

#include "passes/pass.h"


static bool same_known_shape(const wf__tinfo *a, const wf__tinfo *b)
{
    if (!wf__tinfo_known(a) || !wf__tinfo_known(b) || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* Whether every element of c is v (numeric dtypes; -0 counts as 0). */
static bool all_equal(const wf_tensor *c, double v)
{
    if (!c || !(wf__dtype_is_float(c->dtype) || wf__dtype_is_int(c->dtype)) || c->size <= 0) return false;
    for (int64_t i = 0; i < c->size; i++)
        if (wf__load_f64(c->data, c->dtype, i) != v) return false;
    return true;
}

/* Whether x op c has x's shape and dtype (out: the op's inferred output). */
static bool keeps_x(const wf__tinfo *x, const wf_tensor *c, const wf__tinfo *out)
{
    if (x->rank < 0 || c->rank > x->rank || c->dtype != x->dtype || out->dtype != x->dtype) return false;
    for (int i = 0; i < c->rank; i++) {
        int64_t cd = c->dims[c->rank - 1 - i], xd = x->dims[x->rank - 1 - i];
        if (cd != 1 && (xd < 0 || cd != xd)) return false;
    }
    return true;
}

/* x when n (Add, Sub, Mul, Div) is x op neutral, else {NULL}. */
static wf_output neutral_binary(const wf_node *n, const wf_output *in)
{
    const char *op = n->op->name;
    wf_output none = {NULL, 0};
    double v;
    bool commutes;
    if (!strcmp(op, "Add")) v = 0, commutes = true;
    else if (!strcmp(op, "Sub")) v = 0, commutes = false;
    else if (!strcmp(op, "Mul")) v = 1, commutes = true;
    else if (!strcmp(op, "Div")) v = 1, commutes = false;
    else return none;
    if (n->n_in != 2 || !in[0].node || !in[1].node) return none;
    for (int k = 0; k < (commutes ? 2 : 1); k++) {
        const wf_tensor *c = wf__pass_value(in[1 - k]);
        if (c && all_equal(c, v) && keeps_x(wf__pass_info(in[k]), c, &n->out[0])) return in[k];
    }
    return none;
}

bool wf__pass_perm(const wf_node *t, int rank, int64_t *p)
{
    const wf__attr *a = wf__attr_get(t->op, t->attrs, "perm");
    if (a && a->set && a->n > 0) {
        if (a->n != rank) return false;
        for (int i = 0; i < rank; i++) {
            p[i] = a->ints[i] < 0 ? a->ints[i] + rank : a->ints[i];
            if (p[i] < 0 || p[i] >= rank) return false;
        }
    } else {
        for (int i = 0; i < rank; i++) p[i] = rank - 1 - i;
    }
    return true;
}

static bool is_identity(const int64_t *p, int rank)
{
    for (int i = 0; i < rank; i++)
        if (p[i] != i) return false;
    return true;
}

static wf_status *transpose(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out, bool *done)
{
    int rank = in[0].node ? wf__pass_info(in[0])->rank : -1;
    int64_t p[WF_MAX_RANK], q[WF_MAX_RANK], c[WF_MAX_RANK];
    if (rank < 0 || !wf__pass_perm(n, rank, p)) return NULL;
    if (!wf__pass_is_op(in[0], "Transpose")) {
        if (is_identity(p, rank)) *out = in[0], *done = true;
        return NULL;
    }
    const wf_node *t = in[0].node;
    if (!wf__pass_perm(t, rank, q)) return NULL;
    for (int i = 0; i < rank; i++) c[i] = q[p[i]]; /* y[i] = t[p[i]] = x[q[p[i]]] */
    *done = true;
    if (is_identity(c, rank)) {
        *out = t->in[0];
        return NULL;
    }
    wf_attr a = wf_attr_ints("perm", c, rank);
    return wf__pass_emit(r, n, "Transpose", n->name, &t->in[0], 1, &a, 1, out);
}

static bool reshape_like(wf_output o)
{
    return wf__pass_is_op(o, "Reshape") || wf__pass_is_op(o, "Flatten") || wf__pass_is_op(o, "Squeeze") ||
           wf__pass_is_op(o, "Unsqueeze");
}

/* The axes input of Squeeze/Unsqueeze node x as a bit set over rank dims; false when unknown. */
static bool axes_of(const wf_node *x, const wf_output *in, int rank, unsigned *set)
{
    const wf_tensor *a = x->n_in > 1 ? wf__pass_value(in[1]) : NULL;
    if (!a || rank < 0 || !wf__dtype_is_int(a->dtype)) return false;
    *set = 0;
    for (int64_t i = 0; i < a->size; i++) {
        int64_t v = wf__load_i64(a->data, a->dtype, i);
        if (v < 0) v += rank;
        if (v < 0 || v >= rank || (*set >> v & 1)) return false;
        *set |= 1u << v;
    }
    return true;
}

static wf_status *reshape(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out, bool *done)
{
    wf_output x0 = in[0];
    if (!x0.node) return NULL;
    bool chain = reshape_like(x0);
    wf_output root = chain ? x0.node->in[0] : x0;
    const wf__tinfo *o = &n->out[0];
    const char *op = n->op->name;
    if (wf__tinfo_known(o)) {
        if (same_known_shape(o, wf__pass_info(root))) {
            *out = root, *done = true;
            return NULL;
        }
        if (!chain || o->rank == 0) return NULL;
        wf_tensor *shape = NULL;
        int64_t len = o->rank;
        WF__TRY(wf__tensor_alloc(WF_I64, 1, &len, "a reshape's shape", &shape));
        memcpy(shape->data, o->dims, sizeof(int64_t) * (size_t)o->rank);
        char name[600];
        wf__pass_fresh_name(r->dst, n->name, "/shape", name, sizeof name);
        wf_output sin[2] = {root, {NULL, 0}};
        wf_status *s = wf_const(r->dst, name, shape, &sin[1]);
        wf_tensor_free(shape);
        if (s) return wf__status_wrap(s, "simplify: node '%s' (%s)", n->name, op);
        *done = true;
        return wf__pass_emit(r, n, "Reshape", n->name, sin, 2, NULL, 0, out);
    }
    if (!chain) return NULL;
    const wf_node *p = x0.node;
    unsigned a, b;
    if (!strcmp(op, "Squeeze") && wf__pass_is_op(x0, "Unsqueeze")) {
        int rank = wf__pass_info(x0)->rank; /* both axes count in the unsqueezed rank */
        if (axes_of(n, in, rank, &a) && axes_of(p, p->in, rank, &b) && a == b) *out = root, *done = true;
    } else if (!strcmp(op, "Unsqueeze") && wf__pass_is_op(x0, "Squeeze")) {
        int rank = wf__pass_info(root)->rank; /* the squeezed input's rank is the unsqueezed output's */
        if (axes_of(n, in, rank, &a) && axes_of(p, p->in, rank, &b) && a == b) *out = root, *done = true;
    } else if (!strcmp(op, "Reshape") && !wf__attr_i(n->op, n->attrs, "allowzero")) {
        const wf_tensor *s = wf__pass_value(in[1]);
        if (!s || !wf__dtype_is_int(s->dtype)) return NULL;
        for (int64_t i = 0; i < s->size; i++)
            if (wf__load_i64(s->data, s->dtype, i) == 0) return NULL;
        wf_output sin[2] = {root, in[1]};
        wf_node *c;
        WF__TRY(wf__pass_copy(r, n, sin, &c));
        *out = (wf_output){c, 0}, *done = true;
    }
    return NULL;
}

/* Swish or HardSwish for a Mul of x by Sigmoid(x) or by HardSigmoid(x; 1/6, 1/2), else NULL. */
static const char *gated(const wf_node *n, const wf_output *in, wf_output *x)
{
    if (strcmp(n->op->name, "Mul") || n->n_in != 2) return NULL;
    for (int k = 0; k < 2; k++) {
        wf_output g = in[k], v = in[1 - k];
        if (!g.node || g.index != 0 || g.node->n_in != 1 || g.node->in[0].node != v.node ||
            g.node->in[0].index != v.index || !v.node || !wf__dtype_is_float(wf__pass_info(v)->dtype))
            continue;
        *x = v;
        if (!strcmp(g.node->op->name, "Sigmoid")) return "Swish";
        if (!strcmp(g.node->op->name, "HardSigmoid") &&
            fabs(wf__attr_f(g.node->op, g.node->attrs, "alpha") - 1.0 / 6.0) < 1e-7 &&
            wf__attr_f(g.node->op, g.node->attrs, "beta") == 0.5)
            return "HardSwish";
    }
    return NULL;
}

/* Whether o is a constant of one element, v within tol (float dtypes). */
static bool const_near(wf_output o, double v, double tol)
{
    const wf_tensor *c = o.node ? wf__pass_value(o) : NULL;
    return c && wf__dtype_is_float(c->dtype) && c->size == 1 && fabs(wf__load_f64(c->data, c->dtype, 0) - v) <= tol;
}

/* The other operand of binary node b when one of its operands is o, else {NULL}. */
static wf_output other_operand(const wf_node *b, wf_output o)
{
    for (int k = 0; k < 2; k++)
        if (b->in[k].node == o.node && b->in[k].index == o.index) return b->in[1 - k];
    return (wf_output){NULL, 0};
}

static bool same_output(wf_output a, wf_output b) { return a.node == b.node && a.index == b.index; }

/* Whether c is x^3: Pow(x, 3) or a product of three x's (x * x) * x in any order. */
static bool cube_of(wf_output c, wf_output x)
{
    if (wf__pass_is_op(c, "Pow") && c.node->n_in == 2 && same_output(c.node->in[0], x) &&
        const_near(c.node->in[1], 3.0, 0))
        return true;
    if (!wf__pass_is_op(c, "Mul") || c.node->n_in != 2) return false;
    for (int k = 0; k < 2; k++) {
        wf_output sq = c.node->in[k];
        if (same_output(c.node->in[1 - k], x) && wf__pass_is_op(sq, "Mul") && sq.node->n_in == 2 &&
            same_output(sq.node->in[0], x) &&
            same_output(sq.node->in[1], x))
            return true;
    }
    return false;
}

/* Whether d is tanh's argument in the tanh form of GELU: sqrt(2/pi) * (x + 0.044715 x^3), in any order. */
static bool gelu_tanh_arg(wf_output d, wf_output x)
{
    if (!wf__pass_is_op(d, "Mul") || d.node->n_in != 2) return false;
    for (int k = 0; k < 2; k++) {
        wf_output s = d.node->in[k];
        if (!const_near(d.node->in[1 - k], 0.7978845608028654, 1e-6) || !wf__pass_is_op(s, "Add") || s.node->n_in != 2)
            continue;
        wf_output t = other_operand(s.node, x);
        if (!t.node || !wf__pass_is_op(t, "Mul") || t.node->n_in != 2) continue;
        for (int q = 0; q < 2; q++)
            if (const_near(t.node->in[q], 0.044715, 1e-7) && cube_of(t.node->in[1 - q], x)) return true;
    }
    return false;
}

/* x for n = x * (1 + erf(x / sqrt(2))) * 0.5 (PyTorch's exact GELU; *tanh_form false) or x * (1 +
 * tanh(sqrt(2/pi) (x + 0.044715 x^3))) * 0.5 (its tanh form, GPT-2's; *tanh_form true), else {NULL}: n is a
 * Mul of three factors, two of them in a Mul of their own, one the constant 0.5, one s = 1 + Erf(d) (d is
 * x / sqrt(2) or x * sqrt(1/2)) or 1 + Tanh(d), and one x. The constants within 1e-6 of those (what f32
 * rounding gives). */
static wf_output gelu_of(const wf_node *n, const wf_output *in, bool *tanh_form)
{
    wf_output none = {NULL, 0};
    if (strcmp(n->op->name, "Mul") || n->n_in != 2 || !in[0].node || !in[1].node) return none;
    for (int k = 0; k < 2; k++) { /* in[k] the inner Mul, in[1 - k] the third factor */
        const wf_node *m = in[k].node;
        if (!wf__pass_is_op(in[k], "Mul") || m->n_in != 2 || !m->in[0].node || !m->in[1].node) continue;
        wf_output f[3] = {m->in[0], m->in[1], in[1 - k]};
        for (int h = 0; h < 3; h++) {   /* f[h]: the 0.5 */
            if (!const_near(f[h], 0.5, 1e-6)) continue;
            for (int j = 0; j < 3; j++) { /* f[j]: 1 + erf(d); the remaining one is x */
                if (j == h || !wf__pass_is_op(f[j], "Add") || f[j].node->n_in != 2) continue;
                wf_output x = f[3 - h - j], e = {NULL, 0};
                const wf_node *a = f[j].node;
                for (int q = 0; q < 2 && !e.node; q++)
                    if ((wf__pass_is_op(a->in[q], "Erf") || wf__pass_is_op(a->in[q], "Tanh")) &&
                        const_near(a->in[1 - q], 1.0, 1e-6))
                        e = a->in[q];
                if (!e.node || !x.node || wf__pass_info(x)->dtype != WF_F32 || e.node->n_in != 1) continue;
                wf_output d = e.node->in[0];
                if (!d.node || d.index != 0 || d.node->n_in != 2) continue;
                const wf_node *dn = d.node;
                *tanh_form = !strcmp(e.node->op->name, "Tanh");
                if (*tanh_form) {
                    if (!gelu_tanh_arg(d, x)) continue;
                } else {
                    bool div = !strcmp(dn->op->name, "Div") && same_output(dn->in[0], x) &&
                               const_near(dn->in[1], 1.4142135623730951, 1e-6);
                    bool mul = !strcmp(dn->op->name, "Mul") && other_operand(dn, x).node &&
                               const_near(other_operand(dn, x), 0.7071067811865476, 1e-6);
                    if (!div && !mul) continue;
                }
                /* x's own shape and dtype come out: constants of one element broadcast nothing bigger
                 * unless they have more dimensions, which the rank shows */
                if (n->out[0].rank < 0 || n->out[0].rank != wf__pass_info(x)->rank || n->out[0].dtype != WF_F32)
                    continue;
                return x;
            }
        }
    }
    return none;
}

/* Whether o is ReduceMean(v) over v's last axis only, keeping it; v in *v. */
static bool mean_last(wf_output o, wf_output *v)
{
    if (!wf__pass_is_op(o, "ReduceMean") || !o.node->in[0].node) return false;
    const wf_node *m = o.node;
    int rank = wf__pass_info(m->in[0])->rank;
    if (rank < 1 || wf__attr_i(m->op, m->attrs, "keepdims") != 1) return false;
    const wf__attr *ax = wf__attr_get(m->op, m->attrs, "axes");
    int64_t a;
    if (m->n_in > 1 && m->in[1].node) {
        const wf_tensor *t = wf__pass_value(m->in[1]);
        if (!t || t->size != 1 || !wf__dtype_is_int(t->dtype)) return false;
        a = wf__load_i64(t->data, t->dtype, 0);
    } else if (ax && ax->n == 1) {
        a = ax->ints[0];
    } else {
        return false;
    }
    if (a != -1 && a != rank - 1) return false;
    *v = m->in[0];
    return true;
}

/* Whether ve = ReduceMean(sq) + eps over the last axis (the sum in either order, eps a float constant of
 * one element) with sq = u^2 (Pow(u, 2) or u * u): u in *u, eps in *eps. LayerNorm's variance and
 * RMSNorm's mean square as PyTorch exports them. */
static bool mean_square_eps(wf_output ve, wf_output *u, double *eps)
{
    if (!wf__pass_is_op(ve, "Add") || ve.node->n_in != 2) return false;
    wf_output var = {NULL, 0}, sq;
    const wf_tensor *e = NULL;
    for (int j = 0; j < 2 && !var.node; j++) {
        const wf_tensor *c = wf__pass_value(ve.node->in[1 - j]);
        if (wf__pass_is_op(ve.node->in[j], "ReduceMean") && c && c->size == 1 && wf__dtype_is_float(c->dtype))
            var = ve.node->in[j], e = c;
    }
    if (!var.node || !mean_last(var, &sq) || sq.node->n_in != 2) return false;
    *u = sq.node->in[0];
    bool squared = (wf__pass_is_op(sq, "Pow") && const_near(sq.node->in[1], 2.0, 0)) ||
                   (wf__pass_is_op(sq, "Mul") && same_output(sq.node->in[1], *u));
    *eps = wf__load_f64(e->data, e->dtype, 0);
    return squared;
}

/* Whether n, normalising x over its last axis, gives x's f32 or f64 shape with a known last dimension. */
static bool norm_fits(const wf_node *n, wf_output x)
{
    const wf__tinfo *tx = wf__pass_info(x);
    return (tx->dtype == WF_F32 || tx->dtype == WF_F64) && tx->rank >= 1 && tx->dims[tx->rank - 1] >= 1 &&
           n->out[0].rank == tx->rank && n->out[0].dtype == tx->dtype;
}

/* x and epsilon for n = (x - mean) / sqrt(var + eps), a LayerNorm's normalisation over the last axis as
 * PyTorch exports nn.LayerNorm below opset 17: mean = ReduceMean(x), d = x - mean, var =
 * ReduceMean(d^2) (Pow(d, 2) or d * d), the sum in either order, eps a constant of one element; f32 or
 * f64 with a known last dimension. */
static bool layernorm_of(const wf_node *n, const wf_output *in, wf_output *x, double *eps)
{
    if (strcmp(n->op->name, "Div") || n->n_in != 2 || !wf__pass_is_op(in[1], "Sqrt") || !in[0].node) return false;
    wf_output d = in[0], u, mv;
    if (!wf__pass_is_op(d, "Sub") || d.node->n_in != 2 || !mean_square_eps(in[1].node->in[0], &u, eps) ||
        !same_output(u, d) || !mean_last(d.node->in[1], &mv) || !same_output(mv, d.node->in[0]) ||
        !norm_fits(n, d.node->in[0]))
        return false;
    *x = d.node->in[0];
    return true;
}

/* x and epsilon for n = x * rsqrt(mean(x^2) + eps), an RMS normalisation over the last axis as PyTorch
 * exports LLaMA's and T5's RMSNorm: x * (1 / Sqrt(v)), x * Reciprocal(Sqrt(v)) or x / Sqrt(v), with v =
 * ReduceMean(x^2) + eps (Pow(x, 2) or x * x, the sum in either order, eps a constant of one element);
 * f32 or f64 with a known last dimension. */
static bool rmsnorm_of(const wf_node *n, const wf_output *in, wf_output *x, double *eps)
{
    bool mul = !strcmp(n->op->name, "Mul"), div = !strcmp(n->op->name, "Div");
    if ((!mul && !div) || n->n_in != 2 || !in[0].node || !in[1].node) return false;
    for (int k = div; k < 2; k++) { /* x / Sqrt(v): the root is the divisor */
        wf_output r = in[k], xx = in[1 - k], u;
        if (mul) { /* r = 1 / Sqrt(v) or Reciprocal(Sqrt(v)) */
            if (wf__pass_is_op(r, "Reciprocal") && r.node->n_in == 1) r = r.node->in[0];
            else if (wf__pass_is_op(r, "Div") && r.node->n_in == 2 && const_near(r.node->in[0], 1.0, 0))
                r = r.node->in[1];
            else continue;
        }
        if (wf__pass_is_op(r, "Sqrt") && r.node->n_in == 1 && mean_square_eps(r.node->in[0], &u, eps) &&
            same_output(u, xx) && norm_fits(n, xx)) {
            *x = xx;
            return true;
        }
    }
    return false;
}

/* For n = LN(x, scale) * s (scale all ones) or LN(x, s) + b, a LayerNormalization over the last axis
 * without a bias: the LN's index among in[] and the new scale or bias operand (1-D of the last
 * dimension's size, the LN's dtype); -1 when n is not one. The kernel computes (x - mean) * inv * s + b:
 * the same products and sum as the separate Mul and Add. */
static int layernorm_then(const wf_node *n, const wf_output *in, bool *is_bias, wf_output *v)
{
    bool mul = !strcmp(n->op->name, "Mul"), add = !strcmp(n->op->name, "Add");
    if ((!mul && !add) || n->n_in != 2) return -1;
    for (int k = 0; k < 2; k++) {
        const wf_node *l = in[k].node;
        bool rms = wf__pass_is_op(in[k], "RMSNormalization");
        if ((!wf__pass_is_op(in[k], "LayerNormalization") && !rms) || l->n_in < 2 || (l->n_in > 2 && l->in[2].node) ||
            !in[1 - k].node || (rms && !mul))
            continue;
        const wf__tinfo *tx = wf__pass_info(l->in[0]), *to = wf__pass_info(in[1 - k]);
        int64_t axis = wf__attr_i(l->op, l->attrs, "axis");
        if (tx->rank < 1 || (axis != -1 && axis != tx->rank - 1) || to->dtype != tx->dtype || to->rank != 1 ||
            to->dims[0] != tx->dims[tx->rank - 1] || n->out[0].rank != tx->rank || n->out[0].dtype != tx->dtype)
            continue;
        if (mul && !all_equal(wf__pass_value(l->in[1]), 1.0)) continue;
        *is_bias = add;
        *v = in[1 - k];
        return k;
    }
    return -1;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    const char *op = n->op->name;
    bool done = false;
    wf_output x = neutral_binary(n, in);
    if (x.node) {
        out[0] = x;
        return NULL;
    }
    if (!strcmp(op, "Neg") && wf__pass_is_op(in[0], "Neg")) {
        out[0] = in[0].node->in[0];
        return NULL;
    }
    const char *fused = gated(n, in, &x);
    if (fused) return wf__pass_emit(r, n, fused, n->name, &x, 1, NULL, 0, &out[0]);
    double eps;
    bool rms = false;
    if (layernorm_of(n, in, &x, &eps) || (rms = rmsnorm_of(n, in, &x, &eps))) { /* the normalisation alone: a scale of ones */
        const wf__tinfo *tx = wf__pass_info(x);
        int64_t dd = tx->dims[tx->rank - 1];
        wf_tensor *ones = NULL;
        wf_status *st = wf_tensor_new(tx->dtype, 1, &dd, NULL, &ones);
        for (int64_t i = 0; !st && i < dd; i++) wf__store_f64(ones->data, ones->dtype, i, 1.0);
        char name[600];
        wf_output ln[2] = {x, {NULL, 0}};
        wf__pass_fresh_name(r->dst, n->name, rms ? "/rms_scale" : "/ln_scale", name, sizeof name);
        if (!st) st = wf_const(r->dst, name, ones, &ln[1]);
        wf_tensor_free(ones);
        if (st) return st;
        wf_attr la[2] = {wf_attr_int("axis", -1), wf_attr_float("epsilon", eps)};
        return wf__pass_emit(r, n, rms ? "RMSNormalization" : "LayerNormalization", n->name, ln, 2, la, 2, &out[0]);
    }
    bool is_bias;
    wf_output v;
    int lk = layernorm_then(n, in, &is_bias, &v);
    if (lk >= 0) { /* LN(x, 1) * s -> LN(x, s); LN(x, s) + b -> LN(x, s, b); RMS(x, 1) * s -> RMS(x, s) */
        const wf_node *l = in[lk].node;
        wf_output ln[3] = {l->in[0], is_bias ? l->in[1] : v, v};
        wf_attr la[2] = {wf_attr_int("axis", -1), wf_attr_float("epsilon", wf__attr_f(l->op, l->attrs, "epsilon"))};
        return wf__pass_emit(r, n, l->op->name, n->name, ln, is_bias ? 3 : 2, la, 2, &out[0]);
    }
    bool tanh_form = false;
    x = gelu_of(n, in, &tanh_form);
    if (x.node) {
        wf_attr ap = wf_attr_string("approximate", "tanh");
        return wf__pass_emit(r, n, "Gelu", n->name, &x, 1, &ap, tanh_form, &out[0]);
    }
    if (!strcmp(op, "Transpose")) WF__TRY(transpose(r, n, in, &out[0], &done));
    else if (n->n_out == 1 && (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
                               !strcmp(op, "Unsqueeze")))
        WF__TRY(reshape(r, n, in, &out[0], &done));
    if (done) return NULL;
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    return NULL;
}

const wf__pass wf__pass_simplify = {"simplify", NULL, NULL, visit};
