/*
 * Gradient functions of the elementwise, math, matrix, reduction and normalisation ops, each composed
 * from existing forward ops so every backend that runs the forward ops runs the backward graph too.
 * Shape ops are in grad_ops_shape.c; the walk that calls these is grad.c.
 */
#include "graph/grad.h"

#include <math.h>
#include <stdio.h>

#define T(expr) WF__TRY(expr)
#define IN(i) (c->node->in[i])
#define OUT(j) wf_out((wf_node *)c->node, j)
#define DT(o) (wf__g_info(o)->dtype)
#define HAS(i) ((i) < c->node->n_in && c->node->in[i].node)

static int64_t attr_i(const wf__grad_ctx *c, const char *nm) { return wf__attr_i(c->node->op, c->node->attrs, nm); }
static double attr_f(const wf__grad_ctx *c, const char *nm) { return wf__attr_f(c->node->op, c->node->attrs, nm); }
static const char *attr_s(const wf__grad_ctx *c, const char *nm) { return wf__attr_s(c->node->op, c->node->attrs, nm); }

static wf_status *mul(wf__grad_ctx *c, wf_output a, wf_output b, wf_output *o) { return wf__g_bin(c, "Mul", "Mul", a, b, o); }
static wf_status *divide(wf__grad_ctx *c, wf_output a, wf_output b, wf_output *o) { return wf__g_bin(c, "Div", "Div", a, b, o); }
static wf_status *add(wf__grad_ctx *c, wf_output a, wf_output b, wf_output *o) { return wf__g_bin(c, "Add", "Add", a, b, o); }
static wf_status *sub(wf__grad_ctx *c, wf_output a, wf_output b, wf_output *o) { return wf__g_bin(c, "Sub", "Sub", a, b, o); }
static wf_status *un(wf__grad_ctx *c, const char *op, wf_output a, wf_output *o) { return wf__g_un(c, op, op, a, o); }
static wf_status *scal(wf__grad_ctx *c, wf_dtype dt, double v, wf_output *o) { return wf__g_scalar(c, "c", dt, v, o); }

/* v * k for a constant k */
static wf_status *mul_k(wf__grad_ctx *c, wf_output v, double k, wf_output *o)
{
    wf_output kk;
    T(scal(c, DT(v), k, &kk));
    return mul(c, v, kk, o);
}

/* Where(cond, a, 0) */
static wf_status *where0(wf__grad_ctx *c, wf_output cond, wf_output a, bool zero_first, wf_output *o)
{
    wf_output z, in[3];
    T(scal(c, DT(a), 0, &z));
    in[0] = cond;
    in[1] = zero_first ? z : a;
    in[2] = zero_first ? a : z;
    return wf__g_op(c, "Where", "Where", in, 3, NULL, 0, o);
}

/* Operand i of a broadcasting op: sums v to its shape, given all operands. */
static wf_status *to_operand(wf__grad_ctx *c, int i, wf_output v, wf_output *o)
{
    wf_output others[8];
    int n = 0;
    for (int k = 0; k < c->node->n_in && n < 8; k++)
        if (k != i && HAS(k)) others[n++] = IN(k);
    return wf__g_sum_to(c, "sum_to", v, IN(i), others, n, 0, o);
}

/* ---- elementwise ------------------------------------------------------------------------------------ */

wf_status *wf__grad_identity(wf__grad_ctx *c)
{
    c->dx[0] = c->dy[0];
    return NULL;
}

wf_status *wf__grad_none(wf__grad_ctx *c)
{
    (void)c;
    return NULL;
}

wf_status *wf__grad_add(wf__grad_ctx *c)
{
    T(to_operand(c, 0, c->dy[0], &c->dx[0]));
    return to_operand(c, 1, c->dy[0], &c->dx[1]);
}

wf_status *wf__grad_sub(wf__grad_ctx *c)
{
    wf_output n;
    T(to_operand(c, 0, c->dy[0], &c->dx[0]));
    T(un(c, "Neg", c->dy[0], &n));
    return to_operand(c, 1, n, &c->dx[1]);
}

wf_status *wf__grad_mul(wf__grad_ctx *c)
{
    wf_output a, b;
    T(mul(c, c->dy[0], IN(1), &a));
    T(to_operand(c, 0, a, &c->dx[0]));
    T(mul(c, c->dy[0], IN(0), &b));
    return to_operand(c, 1, b, &c->dx[1]);
}

wf_status *wf__grad_div(wf__grad_ctx *c)
{
    wf_output a, b, d, n;
    T(divide(c, c->dy[0], IN(1), &a));
    T(to_operand(c, 0, a, &c->dx[0]));
    /* d(a/b)/db = -(a/b)/b */
    T(mul(c, c->dy[0], OUT(0), &b));
    T(divide(c, b, IN(1), &d));
    T(un(c, "Neg", d, &n));
    return to_operand(c, 1, n, &c->dx[1]);
}

wf_status *wf__grad_pow(wf__grad_ctx *c)
{
    wf_output one, e1, p, t, g, l, t2, g2;
    wf_dtype dt = DT(IN(0));
    if (wf__dtype_is_float(DT(IN(0)))) {
        T(scal(c, DT(IN(1)), 1, &one));
        T(sub(c, IN(1), one, &e1));
        if (DT(IN(1)) != dt) {
            wf_attr to = wf_attr_dtype("to", dt);
            T(wf__g_op(c, "Cast", "Cast", &e1, 1, &to, 1, &e1));
        }
        T(wf__g_bin(c, "Pow", "Pow", IN(0), e1, &p));
        wf_output yk = IN(1);
        if (DT(yk) != dt) {
            wf_attr to = wf_attr_dtype("to", dt);
            T(wf__g_op(c, "Cast", "Cast", &yk, 1, &to, 1, &yk));
        }
        T(mul(c, p, yk, &t));
        T(mul(c, c->dy[0], t, &g));
        T(to_operand(c, 0, g, &c->dx[0]));
    }
    if (wf__dtype_is_float(DT(IN(1))) && DT(IN(1)) == dt) {
        /* d(x^y)/dy = x^y log x, defined for x > 0 */
        T(un(c, "Log", IN(0), &l));
        T(mul(c, OUT(0), l, &t2));
        T(mul(c, c->dy[0], t2, &g2));
        T(to_operand(c, 1, g2, &c->dx[1]));
    }
    return NULL;
}

/* Ties go to the first operand, as TensorFlow does. */
static wf_status *grad_minmax(wf__grad_ctx *c, const char *cmp)
{
    wf_output m, a, b;
    T(wf__g_bin(c, cmp, cmp, IN(0), IN(1), &m));
    T(where0(c, m, c->dy[0], false, &a));
    T(to_operand(c, 0, a, &c->dx[0]));
    T(where0(c, m, c->dy[0], true, &b));
    return to_operand(c, 1, b, &c->dx[1]);
}

wf_status *wf__grad_maximum(wf__grad_ctx *c) { return grad_minmax(c, "GreaterEqual"); }
wf_status *wf__grad_minimum(wf__grad_ctx *c) { return grad_minmax(c, "LessEqual"); }

wf_status *wf__grad_where(wf__grad_ctx *c)
{
    wf_output a, b;
    T(where0(c, IN(0), c->dy[0], false, &a));
    T(to_operand(c, 1, a, &c->dx[1]));
    T(where0(c, IN(0), c->dy[0], true, &b));
    return to_operand(c, 2, b, &c->dx[2]);
}

wf_status *wf__grad_clip(wf__grad_ctx *c)
{
    wf_output x = IN(0), g = c->dy[0], m;
    if (HAS(1)) {
        T(wf__g_bin(c, "GreaterEqual", "GreaterEqual", x, IN(1), &m));
        T(where0(c, m, g, false, &g));
    }
    if (HAS(2)) {
        T(wf__g_bin(c, "LessEqual", "LessEqual", x, IN(2), &m));
        T(where0(c, m, g, false, &g));
    }
    c->dx[0] = g;
    /* a bound gets the gradient of the elements it clipped */
    for (int i = 1; i < 3; i++) {
        if (!HAS(i)) continue;
        wf_output cl, v, r;
        T(wf__g_bin(c, i == 1 ? "Less" : "Greater", "clipped", x, IN(i), &cl));
        T(where0(c, cl, c->dy[0], false, &v));
        wf_attr k = wf_attr_int("keepdims", 0);
        T(wf__g_op(c, "ReduceSum", "ReduceSum", &v, 1, &k, 1, &r));
        T(wf__g_reshape_like(c, "bound", r, IN(i), &c->dx[i]));
    }
    return NULL;
}

wf_status *wf__grad_cast(wf__grad_ctx *c)
{
    if (!wf__dtype_is_float(DT(IN(0))) || !wf__dtype_is_float(DT(OUT(0)))) return NULL; /* no gradient */
    if (DT(IN(0)) == DT(OUT(0))) {
        c->dx[0] = c->dy[0];
        return NULL;
    }
    wf_attr to = wf_attr_dtype("to", DT(IN(0)));
    return wf__g_op(c, "Cast", "Cast", &c->dy[0], 1, &to, 1, &c->dx[0]);
}

wf_status *wf__grad_prelu(wf__grad_ctx *c)
{
    wf_output z, pos, a, s, b, xs;
    T(scal(c, DT(IN(0)), 0, &z));
    T(wf__g_bin(c, "Greater", "Greater", IN(0), z, &pos));
    T(mul(c, c->dy[0], IN(1), &s));
    wf_output in[3] = {pos, c->dy[0], s};
    T(wf__g_op(c, "Where", "Where", in, 3, NULL, 0, &a));
    T(to_operand(c, 0, a, &c->dx[0]));
    T(mul(c, c->dy[0], IN(0), &xs));
    T(where0(c, pos, xs, true, &b));
    return to_operand(c, 1, b, &c->dx[1]);
}

/* d/dx of the one-input ops, as the factor f(x, y) with dx = dy * f; NULL factor: dx = dy * (result
 * written to *o directly). */
static wf_status *unary_factor(wf__grad_ctx *c, const char *op, wf_output *f)
{
    wf_output x = IN(0), y = OUT(0), t, u, v, w;
    wf_dtype dt = DT(x);
    if (!strcmp(op, "Neg")) return scal(c, dt, -1, f);
    if (!strcmp(op, "Abs")) return un(c, "Sign", x, f);
    if (!strcmp(op, "Square")) return mul_k(c, x, 2, f);
    if (!strcmp(op, "Exp")) {
        *f = y;
        return NULL;
    }
    if (!strcmp(op, "Log") || !strcmp(op, "Reciprocal") || !strcmp(op, "Rsqrt") || !strcmp(op, "Sqrt")) {
        if (!strcmp(op, "Log")) return un(c, "Reciprocal", x, f);
        if (!strcmp(op, "Reciprocal")) {
            T(mul(c, y, y, &t));
            return mul_k(c, t, -1, f);
        }
        if (!strcmp(op, "Sqrt")) { /* 0.5 / y */
            T(un(c, "Reciprocal", y, &t));
            return mul_k(c, t, 0.5, f);
        }
        T(divide(c, y, x, &t)); /* Rsqrt: -0.5 y / x */
        return mul_k(c, t, -0.5, f);
    }
    if (!strcmp(op, "Tanh") || !strcmp(op, "Tan")) { /* 1 - y^2, 1 + y^2 */
        T(mul(c, y, y, &t));
        T(scal(c, dt, 1, &u));
        return !strcmp(op, "Tanh") ? sub(c, u, t, f) : add(c, u, t, f);
    }
    if (!strcmp(op, "Sigmoid")) { /* y (1 - y) */
        T(scal(c, dt, 1, &u));
        T(sub(c, u, y, &t));
        return mul(c, y, t, f);
    }
    if (!strcmp(op, "Softplus")) return un(c, "Sigmoid", x, f);
    if (!strcmp(op, "Sin")) return un(c, "Cos", x, f);
    if (!strcmp(op, "Cos")) {
        T(un(c, "Sin", x, &t));
        return un(c, "Neg", t, f);
    }
    if (!strcmp(op, "Sinh")) return un(c, "Cosh", x, f);
    if (!strcmp(op, "Cosh")) return un(c, "Sinh", x, f);
    if (!strcmp(op, "Erf")) { /* 2/sqrt(pi) exp(-x^2) */
        T(mul(c, x, x, &t));
        T(mul_k(c, t, -1, &t));
        T(un(c, "Exp", t, &t));
        return mul_k(c, t, 2.0 / sqrt(M_PI), f);
    }
    if (!strcmp(op, "Atan") || !strcmp(op, "Asin") || !strcmp(op, "Acos") || !strcmp(op, "Asinh") ||
        !strcmp(op, "Acosh") || !strcmp(op, "Atanh")) {
        /* 1/(1+x^2), 1/sqrt(1-x^2), -1/sqrt(1-x^2), 1/sqrt(x^2+1), 1/sqrt(x^2-1), 1/(1-x^2) */
        T(mul(c, x, x, &t));
        T(scal(c, dt, 1, &u));
        bool plus = !strcmp(op, "Atan") || !strcmp(op, "Asinh");
        if (!strcmp(op, "Acosh")) T(sub(c, t, u, &v));
        else if (plus) T(add(c, u, t, &v));
        else T(sub(c, u, t, &v));
        if (strcmp(op, "Atan") && strcmp(op, "Atanh")) T(un(c, "Sqrt", v, &v));
        T(un(c, "Reciprocal", v, &w));
        return !strcmp(op, "Acos") ? mul_k(c, w, -1, f) : (*f = w, NULL);
    }
    if (!strcmp(op, "Softsign")) { /* 1 / (1 + |x|)^2 */
        T(un(c, "Abs", x, &t));
        T(scal(c, dt, 1, &u));
        T(add(c, u, t, &v));
        T(mul(c, v, v, &w));
        return un(c, "Reciprocal", w, f);
    }
    if (!strcmp(op, "Gelu")) {
        if (!strcmp(attr_s(c, "approximate"), "tanh")) {
            /* y = 0.5 x (1 + tanh(u)), u = k (x + 0.044715 x^3):
             * y' = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2) */
            const double k = sqrt(2.0 / M_PI);
            wf_output x2, x3, in, th, one, a, b, d, e;
            T(mul(c, x, x, &x2));
            T(mul(c, x2, x, &x3));
            T(mul_k(c, x3, 0.044715, &x3));
            T(add(c, x, x3, &in));
            T(mul_k(c, in, k, &in));
            T(un(c, "Tanh", in, &th));
            T(scal(c, dt, 1, &one));
            T(add(c, one, th, &a));
            T(mul_k(c, a, 0.5, &a));
            T(mul(c, th, th, &b));
            T(sub(c, one, b, &b));
            T(mul_k(c, x2, 3 * 0.044715, &d));
            T(add(c, one, d, &d));
            T(mul(c, b, d, &e));
            T(mul(c, e, x, &e));
            T(mul_k(c, e, 0.5 * k, &e));
            return add(c, a, e, f);
        }
        /* Phi(x) + x phi(x) */
        wf_output s, er, one, phi, x2, g;
        T(mul_k(c, x, 1 / sqrt(2.0), &s));
        T(un(c, "Erf", s, &er));
        T(scal(c, dt, 1, &one));
        T(add(c, one, er, &phi));
        T(mul_k(c, phi, 0.5, &phi));
        T(mul(c, x, x, &x2));
        T(mul_k(c, x2, -0.5, &x2));
        T(un(c, "Exp", x2, &g));
        T(mul(c, g, x, &g));
        T(mul_k(c, g, 1 / sqrt(2 * M_PI), &g));
        return add(c, phi, g, f);
    }
    if (!strcmp(op, "Swish")) { /* s + a x s (1 - s), s = sigmoid(a x) */
        double al = attr_f(c, "alpha");
        wf_output ax, s, one, oms, d;
        T(mul_k(c, x, al, &ax));
        T(un(c, "Sigmoid", ax, &s));
        T(scal(c, dt, 1, &one));
        T(sub(c, one, s, &oms));
        T(mul(c, ax, s, &d));
        T(mul(c, d, oms, &d));
        return add(c, s, d, f);
    }
    return wf__g_fail(c, WF_UNIMPLEMENTED, "no gradient is defined for %s", op);
}

/* The piecewise ops: dx = Where(x > threshold, dy * a, dy * b(x)). */
static wf_status *grad_piecewise(wf__grad_ctx *c, const char *op, wf_output *o)
{
    wf_output x = IN(0), dy = c->dy[0], z, pos, lo, hi, t;
    wf_dtype dt = DT(x);
    hi = dy;
    T(scal(c, dt, !strcmp(op, "ThresholdedRelu") ? attr_f(c, "alpha") : 0, &z));
    /* Relu's mask reads its output: y > 0 exactly where x > 0 (NaN stays NaN, so both are false), and the
     * input then has no reader but the Relu, which lets a convolution or matmul before it take the Relu as
     * its epilogue in training graphs too (TensorFlow's ReluGrad reads the output likewise) */
    T(wf__g_bin(c, "Greater", "Greater", !strcmp(op, "Relu") ? OUT(0) : x, z, &pos));
    if (!strcmp(op, "Relu") || !strcmp(op, "ThresholdedRelu")) return where0(c, pos, dy, false, o);
    if (!strcmp(op, "LeakyRelu")) {
        T(mul_k(c, dy, attr_f(c, "alpha"), &lo));
    } else if (!strcmp(op, "Elu")) { /* x <= 0: y + alpha */
        T(scal(c, dt, attr_f(c, "alpha"), &t));
        T(add(c, OUT(0), t, &t));
        T(mul(c, dy, t, &lo));
    } else if (!strcmp(op, "Selu")) { /* gamma; x <= 0: y + gamma alpha */
        double g = attr_f(c, "gamma"), a = attr_f(c, "alpha");
        T(mul_k(c, dy, g, &hi));
        T(scal(c, dt, g * a, &t));
        T(add(c, OUT(0), t, &t));
        T(mul(c, dy, t, &lo));
    } else if (!strcmp(op, "Celu")) { /* x <= 0: exp(x / alpha) */
        T(mul_k(c, x, 1 / attr_f(c, "alpha"), &t));
        T(un(c, "Exp", t, &t));
        T(mul(c, dy, t, &lo));
    } else {
        return wf__g_fail(c, WF_UNIMPLEMENTED, "no gradient is defined for %s", op);
    }
    wf_output in[3] = {pos, hi, lo};
    return wf__g_op(c, "Where", "Where", in, 3, NULL, 0, o);
}

wf_status *wf__grad_unary(wf__grad_ctx *c)
{
    const char *op = c->node->op->name;
    static const char *const piecewise[] = {"Relu", "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu"};
    for (size_t i = 0; i < sizeof piecewise / sizeof piecewise[0]; i++)
        if (!strcmp(op, piecewise[i])) return grad_piecewise(c, op, &c->dx[0]);
    if (!strcmp(op, "HardSigmoid")) { /* alpha where 0 < alpha x + beta < 1 */
        double a = attr_f(c, "alpha"), b = attr_f(c, "beta");
        wf_output lo, hi, m1, m2, m, g;
        T(scal(c, DT(IN(0)), -b / a, &lo));
        T(scal(c, DT(IN(0)), (1 - b) / a, &hi));
        bool neg = a < 0;
        T(wf__g_bin(c, neg ? "Less" : "Greater", "above", IN(0), lo, &m1));
        T(wf__g_bin(c, neg ? "Greater" : "Less", "below", IN(0), hi, &m2));
        T(wf__g_bin(c, "And", "And", m1, m2, &m));
        T(mul_k(c, c->dy[0], a, &g));
        return where0(c, m, g, false, &c->dx[0]);
    }
    wf_output f;
    T(unary_factor(c, op, &f));
    return mul(c, c->dy[0], f, &c->dx[0]);
}

wf_status *wf__grad_variadic(wf__grad_ctx *c)
{
    const char *op = c->node->op->name;
    int n = c->node->n_in;
    for (int i = 0; i < n; i++) {
        if (!wf__dtype_is_float(DT(IN(i)))) continue;
        wf_output g = c->dy[0], m;
        if (!strcmp(op, "Mean")) {
            T(mul_k(c, g, 1.0 / n, &g));
        } else if (!strcmp(op, "Max") || !strcmp(op, "Min")) {
            T(wf__g_bin(c, "Equal", "Equal", IN(i), OUT(0), &m));
            T(where0(c, m, g, false, &g));
        }
        T(to_operand(c, i, g, &c->dx[i]));
    }
    return NULL;
}

/* ---- matrices ----------------------------------------------------------------------------------- */

static wf_status *mm(wf__grad_ctx *c, wf_output a, wf_output b, int ta, int tb, wf_output *o)
{
    wf_output in[2] = {a, b};
    wf_attr at[2] = {wf_attr_int("transpose_a", ta), wf_attr_int("transpose_b", tb)};
    return wf__g_op(c, "MatMul", "MatMul", in, 2, at, 2, o);
}

/* Y = op(A) op(B) (op: transpose or not) -> dA, dB as matrix products of dY, A and B. */
static wf_status *matmul_grads(wf__grad_ctx *c, wf_output a, wf_output b, wf_output dy, int ta, int tb,
                               wf_output *da, wf_output *db)
{
    if (!ta && !tb) {
        T(mm(c, dy, b, 0, 1, da));
        return mm(c, a, dy, 1, 0, db);
    }
    if (ta && !tb) {
        T(mm(c, b, dy, 0, 1, da));
        return mm(c, a, dy, 0, 0, db);
    }
    if (!ta && tb) {
        T(mm(c, dy, b, 0, 0, da));
        return mm(c, dy, a, 1, 0, db);
    }
    T(mm(c, b, dy, 1, 1, da));
    return mm(c, dy, a, 1, 1, db);
}

static wf_status *unsqueeze(wf__grad_ctx *c, wf_output x, int64_t axis, wf_output *o)
{
    wf_output in[2] = {x, {0}};
    T(wf__g_ints(c, "axes", 1, &axis, &in[1]));
    return wf__g_op(c, "Unsqueeze", "Unsqueeze", in, 2, NULL, 0, o);
}

wf_status *wf__grad_matmul(wf__grad_ctx *c)
{
    wf_output a = IN(0), b = IN(1), dy = c->dy[0], da, db;
    int ra = wf__g_info(a)->rank, rb = wf__g_info(b)->rank, ry = wf__g_info(dy)->rank;
    if (ra < 0 || rb < 0 || ry < 0) return wf__g_fail(c, WF_UNIMPLEMENTED, "the operands' ranks must be known");
    int ta = ra > 1 ? (int)attr_i(c, "transpose_a") : 0, tb = rb > 1 ? (int)attr_i(c, "transpose_b") : 0;
    if (ra == 1 && rb == 1) {
        T(mul(c, dy, b, &c->dx[0]));
        return mul(c, dy, a, &c->dx[1]);
    }
    /* numpy's promotion of 1-D operands, made explicit so the matrix rules apply */
    if (ra == 1) {
        T(unsqueeze(c, a, 0, &a));
        T(unsqueeze(c, dy, ry - 1, &dy));
    } else if (rb == 1) {
        T(unsqueeze(c, b, 1, &b));
        T(unsqueeze(c, dy, ry, &dy));
    }
    T(matmul_grads(c, a, b, dy, ta, tb, &da, &db));
    T(wf__g_sum_to(c, "sum_to", da, a, &b, 1, 2, &da));
    T(wf__g_sum_to(c, "sum_to", db, b, &a, 1, 2, &db));
    T(wf__g_reshape_like(c, "dA", da, IN(0), &c->dx[0]));
    return wf__g_reshape_like(c, "dB", db, IN(1), &c->dx[1]);
}

wf_status *wf__grad_gemm(wf__grad_ctx *c)
{
    double alpha = attr_f(c, "alpha"), beta = attr_f(c, "beta");
    wf_output dy = c->dy[0], g = dy;
    if (alpha != 1) T(mul_k(c, dy, alpha, &g));
    T(matmul_grads(c, IN(0), IN(1), g, (int)attr_i(c, "transA"), (int)attr_i(c, "transB"), &c->dx[0], &c->dx[1]));
    if (HAS(2)) {
        wf_output gc = dy;
        if (beta != 1) T(mul_k(c, dy, beta, &gc));
        wf_output y = OUT(0);
        T(wf__g_sum_to(c, "sum_to", gc, IN(2), &y, 1, 0, &c->dx[2]));
    }
    return NULL;
}

wf_status *wf__grad_bias_add(wf__grad_ctx *c)
{
    int r = wf__g_info(c->dy[0])->rank;
    if (r < 0) return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's rank must be known");
    int ch = !strcmp(attr_s(c, "data_format"), "NCHW") ? 1 : r - 1;
    int64_t axes[WF_MAX_RANK];
    int na = 0;
    for (int i = 0; i < r; i++)
        if (i != ch) axes[na++] = i;
    c->dx[0] = c->dy[0];
    if (!na) {
        c->dx[1] = c->dy[0];
        return NULL;
    }
    wf_attr at[2] = {wf_attr_int("keepdims", 0), wf_attr_ints("axes", axes, na)};
    return wf__g_op(c, "ReduceSum", "ReduceSum", &c->dy[0], 1, at, 2, &c->dx[1]);
}

/* ---- reductions ----------------------------------------------------------------------------------- */

/* The reduced axes, sorted and non-negative; *all: every axis; *noop: the reduction is an identity. */
static wf_status *reduce_axes(wf__grad_ctx *c, int64_t *axes, int *na, bool *noop)
{
    int r = wf__g_info(IN(0))->rank;
    if (r < 0) return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's rank must be known");
    const wf__attr *a = wf__attr_get(c->node->op, c->node->attrs, "axes");
    int64_t v[WF_MAX_RANK];
    int n = 0;
    if (a && a->n > 0) {
        if (a->n > WF_MAX_RANK) return wf__g_fail(c, WF_INVALID_ARGUMENT, "too many axes");
        n = a->n;
        memcpy(v, a->ints, sizeof *v * (size_t)n);
    } else if (HAS(1)) {
        if (!wf__g_const_ints(c, 1, v, WF_MAX_RANK, &n))
            return wf__g_fail(c, WF_UNIMPLEMENTED, "the axes must be a constant");
    }
    *noop = false;
    if (n == 0) {
        if (attr_i(c, "noop_with_empty_axes")) {
            *noop = true;
            *na = 0;
            return NULL;
        }
        for (int i = 0; i < r; i++) v[i] = i;
        n = r;
    }
    bool seen[WF_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int ax;
        if (!wf__norm_axis(v[i], r, &ax)) return wf__g_fail(c, WF_INVALID_ARGUMENT, "axis out of range");
        seen[ax] = true;
    }
    *na = 0;
    for (int i = 0; i < r; i++)
        if (seen[i]) axes[(*na)++] = i;
    return NULL;
}

/* v (a reduction's output or its gradient) with the reduced axes kept as 1. */
static wf_status *keep_dims(wf__grad_ctx *c, wf_output v, const int64_t *axes, int na, wf_output *o)
{
    if (attr_i(c, "keepdims") || na == 0) {
        *o = v;
        return NULL;
    }
    wf_output in[2] = {v, {0}};
    T(wf__g_ints(c, "axes", na, axes, &in[1]));
    return wf__g_op(c, "Unsqueeze", "Unsqueeze", in, 2, NULL, 0, o);
}

wf_status *wf__grad_reduce(wf__grad_ctx *c)
{
    const char *op = c->node->op->name;
    int64_t axes[WF_MAX_RANK];
    int na;
    bool noop;
    T(reduce_axes(c, axes, &na, &noop));
    wf_output x = IN(0), dyk, yk, t, sh;
    if (noop) {
        c->dx[0] = c->dy[0];
        return NULL;
    }
    T(keep_dims(c, c->dy[0], axes, na, &dyk));
    if (!strcmp(op, "ReduceSum") || !strcmp(op, "ReduceMean")) {
        T(wf__g_shape_of(c, "shape", x, &sh));
        if (!strcmp(op, "ReduceMean")) {
            const wf__tinfo *tx = wf__g_info(x);
            int64_t cnt = 1;
            for (int i = 0; i < na; i++) cnt = cnt < 0 || tx->dims[axes[i]] < 0 ? -1 : cnt * tx->dims[axes[i]];
            if (cnt > 0) {
                T(mul_k(c, dyk, 1.0 / (double)cnt, &dyk));
            } else { /* the count at run time: Size(x) / Size(y) */
                wf_output sx, sy, r;
                wf_attr to = wf_attr_dtype("to", DT(x));
                T(wf__g_un(c, "Size", "size_x", x, &sx));
                T(wf__g_un(c, "Size", "size_y", OUT(0), &sy));
                T(wf__g_op(c, "Cast", "Cast", &sx, 1, &to, 1, &sx));
                T(wf__g_op(c, "Cast", "Cast", &sy, 1, &to, 1, &sy));
                T(divide(c, sy, sx, &r));
                T(mul(c, dyk, r, &dyk));
            }
        }
        return wf__g_bin(c, "Expand", "Expand", dyk, sh, &c->dx[0]);
    }
    T(keep_dims(c, OUT(0), axes, na, &yk));
    if (!strcmp(op, "ReduceMax") || !strcmp(op, "ReduceMin")) {
        /* to the positions of the extreme, shared equally among ties */
        wf_output eq, ind, cnt, d;
        wf_attr to = wf_attr_dtype("to", DT(x));
        wf_attr at[2] = {wf_attr_int("keepdims", 1), wf_attr_ints("axes", axes, na)};
        T(wf__g_bin(c, "Equal", "Equal", x, yk, &eq));
        T(wf__g_op(c, "Cast", "Cast", &eq, 1, &to, 1, &ind));
        T(wf__g_op(c, "ReduceSum", "count", &ind, 1, at, 2, &cnt));
        T(divide(c, dyk, cnt, &d));
        return mul(c, ind, d, &c->dx[0]);
    }
    if (!strcmp(op, "ReduceProd")) { /* y / x: x must have no zeros */
        T(mul(c, dyk, yk, &t));
        return divide(c, t, x, &c->dx[0]);
    }
    if (!strcmp(op, "ReduceL2")) { /* x / y */
        T(mul(c, dyk, x, &t));
        return divide(c, t, yk, &c->dx[0]);
    }
    if (!strcmp(op, "ReduceLogSumExp")) { /* exp(x - y) */
        T(sub(c, x, yk, &t));
        T(un(c, "Exp", t, &t));
        return mul(c, dyk, t, &c->dx[0]);
    }
    if (!strcmp(op, "ReduceSumSquare")) { /* 2 x */
        T(mul(c, dyk, x, &t));
        return mul_k(c, t, 2, &c->dx[0]);
    }
    return wf__g_fail(c, WF_UNIMPLEMENTED, "no gradient is defined for %s", op);
}

static wf_status *sum_axis(wf__grad_ctx *c, wf_output v, int64_t axis, wf_output *o)
{
    wf_attr at[2] = {wf_attr_int("keepdims", 1), wf_attr_ints("axes", &axis, 1)};
    return wf__g_op(c, "ReduceSum", "ReduceSum", &v, 1, at, 2, o);
}

wf_status *wf__grad_softmax(wf__grad_ctx *c)
{
    wf_output y = OUT(0), p, s, d;
    T(mul(c, c->dy[0], y, &p));
    T(sum_axis(c, p, attr_i(c, "axis"), &s));
    T(sub(c, c->dy[0], s, &d));
    return mul(c, y, d, &c->dx[0]);
}

wf_status *wf__grad_log_softmax(wf__grad_ctx *c)
{
    wf_output s, e, t;
    T(sum_axis(c, c->dy[0], attr_i(c, "axis"), &s));
    T(un(c, "Exp", OUT(0), &e));
    T(mul(c, e, s, &t));
    return sub(c, c->dy[0], t, &c->dx[0]);
}

/* ---- normalisation ---------------------------------------------------------------------------------- */

static wf_status *mean_keep(wf__grad_ctx *c, wf_output v, const int64_t *axes, int na, wf_output *o)
{
    wf_attr at[2] = {wf_attr_int("keepdims", 1), wf_attr_ints("axes", axes, na)};
    return wf__g_op(c, "ReduceMean", "ReduceMean", &v, 1, at, 2, o);
}

/* Recomputes the statistics from X in X's dtype rather than reading the node's Mean/InvStdDev outputs,
 * which are optional and follow stash_type. */
wf_status *wf__grad_layer_norm(wf__grad_ctx *c)
{
    wf_output x = IN(0), sc = IN(1);
    const wf__tinfo *tx = wf__g_info(x);
    int r = tx->rank, a;
    if (r < 0) return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's rank must be known");
    if (!wf__norm_axis(attr_i(c, "axis"), r, &a)) return wf__g_fail(c, WF_INVALID_ARGUMENT, "axis out of range");
    int64_t axes[WF_MAX_RANK];
    int na = 0;
    int64_t cnt = 1;
    for (int i = a; i < r; i++) {
        axes[na++] = i;
        cnt = cnt < 0 || tx->dims[i] < 0 ? -1 : cnt * tx->dims[i];
    }
    wf_dtype dt = tx->dtype;
    wf_output mu, xc, var, eps, rstd, xhat, dx = {0};
    T(mean_keep(c, x, axes, na, &mu));
    T(sub(c, x, mu, &xc));
    T(mul(c, xc, xc, &var));
    T(mean_keep(c, var, axes, na, &var));
    T(scal(c, dt, attr_f(c, "epsilon"), &eps));
    T(add(c, var, eps, &var));
    T(un(c, "Rsqrt", var, &rstd));
    T(mul(c, xc, rstd, &xhat));
    wf_output outs[1] = {OUT(0)};
    if (c->dy[0].node) {
        wf_output dy = c->dy[0], gg, m1, m2, t, u, ds;
        T(mul(c, dy, sc, &gg));
        T(mean_keep(c, gg, axes, na, &m1));
        T(mul(c, gg, xhat, &t));
        T(mean_keep(c, t, axes, na, &m2));
        T(sub(c, gg, m1, &u));
        T(mul(c, xhat, m2, &t));
        T(sub(c, u, t, &u));
        T(mul(c, rstd, u, &dx));
        T(mul(c, dy, xhat, &ds));
        T(wf__g_sum_to(c, "sum_to", ds, sc, outs, 1, 0, &c->dx[1]));
        if (HAS(2)) T(wf__g_sum_to(c, "sum_to", dy, IN(2), outs, 1, 0, &c->dx[2]));
    }
    if ((c->dy[1].node || (c->node->n_out > 2 && c->dy[2].node)) && cnt <= 0)
        return wf__g_fail(c, WF_UNIMPLEMENTED, "gradients of Mean and InvStdDev need the normalised dims known");
    /* Mean and InvStdDev follow stash_type, which may differ from X's dtype */
    wf_output dstat[3] = {{0}};
    for (int j = 1; j < 3 && j < c->node->n_out; j++) {
        dstat[j] = c->dy[j];
        if (dstat[j].node && DT(dstat[j]) != dt) {
            wf_attr to = wf_attr_dtype("to", dt);
            T(wf__g_op(c, "Cast", "Cast", &dstat[j], 1, &to, 1, &dstat[j]));
        }
    }
    if (dstat[1].node) { /* d mean / dx = 1/n */
        wf_output t, sh;
        T(mul_k(c, dstat[1], 1.0 / (double)cnt, &t));
        T(wf__g_shape_of(c, "shape", x, &sh));
        T(wf__g_bin(c, "Expand", "Expand", t, sh, &t));
        if (dx.node) T(add(c, dx, t, &dx));
        else dx = t;
    }
    if (dstat[2].node) { /* d rstd / dx = -rstd^3 (x - mean) / n */
        wf_output r3, t;
        T(mul(c, rstd, rstd, &r3));
        T(mul(c, r3, rstd, &r3));
        T(mul(c, dstat[2], r3, &t));
        T(mul(c, t, xc, &t));
        T(mul_k(c, t, -1.0 / (double)cnt, &t));
        if (dx.node) T(add(c, dx, t, &dx));
        else dx = t;
    }
    c->dx[0] = dx;
    return NULL;
}

/* Inference form: Y = (X - mean) / sqrt(var + eps) * scale + B over channel axis 1. */
wf_status *wf__grad_batch_norm(wf__grad_ctx *c)
{
    wf_output x = IN(0), dy = c->dy[0];
    int r = wf__g_info(x)->rank;
    if (r < 2) return wf__g_fail(c, WF_UNIMPLEMENTED, "the input's rank must be known");
    wf_dtype dt = DT(x);
    int64_t bshape[WF_MAX_RANK], axes[WF_MAX_RANK];
    int na = 0;
    for (int i = 0; i < r; i++) {
        bshape[i] = i == 1 ? -1 : 1;
        if (i != 1) axes[na++] = i;
    }
    wf_output shp, p[5];
    T(wf__g_ints(c, "bshape", r, bshape, &shp));
    for (int i = 1; i < 5; i++) T(wf__g_bin(c, "Reshape", "bcast", IN(i), shp, &p[i]));
    wf_output eps, rstd, k, xc, xhat, t, u;
    T(scal(c, dt, attr_f(c, "epsilon"), &eps));
    T(add(c, p[4], eps, &rstd));
    T(un(c, "Rsqrt", rstd, &rstd));
    T(mul(c, p[1], rstd, &k));
    T(mul(c, dy, k, &c->dx[0]));
    wf_attr at[2] = {wf_attr_int("keepdims", 0), wf_attr_ints("axes", axes, na)};
    T(wf__g_op(c, "ReduceSum", "dB", &dy, 1, at, 2, &c->dx[2]));
    T(sub(c, x, p[3], &xc));
    T(mul(c, xc, rstd, &xhat));
    T(mul(c, dy, xhat, &t));
    T(wf__g_op(c, "ReduceSum", "dscale", &t, 1, at, 2, &c->dx[1]));
    T(mul(c, dy, k, &t));
    T(wf__g_op(c, "ReduceSum", "dmean", &t, 1, at, 2, &t));
    T(un(c, "Neg", t, &c->dx[3]));
    /* d/dvar = -0.5 scale rstd^3 (x - mean) */
    T(mul(c, rstd, rstd, &u));
    T(mul(c, u, k, &u));
    T(mul_k(c, u, -0.5, &u));
    T(mul(c, dy, xc, &t));
    T(mul(c, t, u, &t));
    return wf__g_op(c, "ReduceSum", "dvar", &t, 1, at, 2, &c->dx[4]);
}

/* FusedBatchNorm (training): one FusedBatchNormGrad node over the forward's own statistics, with the
 * gradients that reach batch_mean and batch_variance as its optional inputs. */
wf_status *wf__grad_fused_batch_norm(wf__grad_ctx *c)
{
    wf_output dy = c->dy[0];
    if (!dy.node) T(wf__g_fill_like(c, "zeros", IN(0), 0, &dy));
    wf_output in[7] = {dy, IN(0), IN(1), OUT(1), OUT(2), c->dy[1], c->dy[2]};
    int n_in = c->dy[2].node ? 7 : c->dy[1].node ? 6 : 5;
    wf_attr at = wf_attr_float("epsilon", attr_f(c, "epsilon"));
    wf_output g;
    T(wf__g_op(c, "FusedBatchNormGrad", "FusedBatchNormGrad", in, n_in, &at, 1, &g));
    for (int i = 0; i < 3; i++) c->dx[i] = (wf_output){.node = g.node, .index = i};
    return NULL;
}

/* Dropout is the identity in inference, the only form weft runs. */
wf_status *wf__grad_dropout(wf__grad_ctx *c)
{
    c->dx[0] = c->dy[0];
    return NULL;
}
