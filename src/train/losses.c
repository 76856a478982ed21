/*
 * Loss builders: softmax cross-entropy (sparse or one-hot), binary cross-entropy (from logits or from
 * probabilities) and mean squared error, each a few ordinary nodes reducing to a scalar mean, in the
 * numerically stable forms, so wf_gradients differentiates them like any other graph.
 */
#include <math.h>
#include <stdio.h>

#include "graph/graph.h"

#define NM_MAX 512

typedef struct lb {
    wf_graph *g;
    const char *name;
    int n0; /* nodes before the builder started: undone on error */
} lb;

static wf_status *node(lb *b, const char *op, const char *sub, const wf_output *in, int n_in, const wf_attr *at,
                       int n_at, wf_output *out)
{
    char nm[NM_MAX];
    if (sub) snprintf(nm, sizeof nm, "%s/%s", b->name, sub);
    else snprintf(nm, sizeof nm, "%s", b->name);
    wf_node *n;
    WF__TRY(wf_op(b->g, op, nm, in, n_in, at, n_at, &n));
    *out = wf_out(n, 0);
    return NULL;
}

static wf_status *bin(lb *b, const char *op, const char *sub, wf_output x, wf_output y, wf_output *out)
{
    wf_output in[2] = {x, y};
    return node(b, op, sub, in, 2, NULL, 0, out);
}

static wf_status *un(lb *b, const char *op, const char *sub, wf_output x, wf_output *out)
{
    return node(b, op, sub, &x, 1, NULL, 0, out);
}

static wf_status *scalar(lb *b, const char *sub, wf_dtype dt, double v, wf_output *out)
{
    char nm[NM_MAX];
    snprintf(nm, sizeof nm, "%s/%s", b->name, sub);
    return wf_const_scalar(b->g, nm, dt, v, out);
}

/* mean over every element, keepdims 0 */
static wf_status *mean_all(lb *b, const char *sub, wf_output x, wf_output *out)
{
    wf_attr k = wf_attr_int("keepdims", 0);
    return node(b, "ReduceMean", sub, &x, 1, &k, 1, out);
}

static const char *desc(wf_output o, char *buf)
{
    int64_t d[WF_MAX_RANK];
    int r = wf_output_shape(o, d);
    char sb[160];
    snprintf(buf, 200, "'%s' %s%s", wf_node_name(o.node), wf_dtype_name(wf_output_dtype(o)),
             r < 0 ? "[?]" : wf__shape_str(r, d, sb));
    return buf;
}

static wf_status *check_args(const char *fn, wf_graph *g, const char *name, wf_output a, wf_output b, wf_output *out)
{
    if (!g || !name || !*name || !out)
        return wf__status(WF_INVALID_ARGUMENT, "%s: NULL graph, name or out", fn);
    if (!a.node || !b.node || a.node->graph != g || b.node->graph != g || a.index < 0 ||
        a.index >= a.node->n_out || b.index < 0 || b.index >= b.node->n_out)
        return wf__status(WF_INVALID_ARGUMENT, "loss '%s': an input is not an output of a node of this graph", name);
    return NULL;
}

/* Equal ranks and dims where both are known, and one float dtype. */
static wf_status *same_shape(const char *name, const char *what_a, wf_output a, const char *what_b, wf_output b)
{
    int64_t da[WF_MAX_RANK], db[WF_MAX_RANK];
    int ra = wf_output_shape(a, da), rb = wf_output_shape(b, db);
    bool ok = wf_output_dtype(a) == wf_output_dtype(b) && (ra < 0 || rb < 0 || ra == rb);
    for (int i = 0; ok && ra >= 0 && rb == ra && i < ra; i++) ok = da[i] < 0 || db[i] < 0 || da[i] == db[i];
    char ba[200], bb[200];
    if (!ok)
        return wf__status(WF_INVALID_ARGUMENT, "loss '%s': %s %s do not match %s %s (same shape and dtype needed)",
                          name, what_b, desc(b, bb), what_a, desc(a, ba));
    if (!wf__dtype_is_float(wf_output_dtype(a)))
        return wf__status(WF_INVALID_ARGUMENT, "loss '%s': %s %s must be f32, f64, f16 or bf16", name, what_a,
                          desc(a, ba));
    return NULL;
}

static wf_status *finish(lb *b, wf_status *s)
{
    if (s) wf__graph_truncate(b->g, b->n0);
    return s;
}

#define T(expr)                                                                                          \
    do {                                                                                                 \
        if ((s = (expr))) return finish(&b, s);                                                          \
    } while (0)

wf_status *wf_loss_softmax_cross_entropy(wf_graph *g, const char *name, wf_output logits, wf_output labels,
                                         int sparse, wf_output *out)
{
    WF__TRY(check_args("wf_loss_softmax_cross_entropy", g, name, logits, labels, out));
    char bl[200], bt[200];
    int64_t dl[WF_MAX_RANK], dt[WF_MAX_RANK];
    int rl = wf_output_shape(logits, dl), rt = wf_output_shape(labels, dt);
    if (rl != 2 || !wf__dtype_is_float(wf_output_dtype(logits)))
        return wf__status(WF_INVALID_ARGUMENT, "loss '%s': logits %s must be [N, C] of f32, f64, f16 or bf16", name,
                          desc(logits, bl));
    lb b = {g, name, g->n};
    wf_status *s;
    if (sparse) {
        wf_dtype lt = wf_output_dtype(labels);
        if (rt != 1 || (lt != WF_I32 && lt != WF_I64) || (dl[0] >= 0 && dt[0] >= 0 && dl[0] != dt[0]))
            return wf__status(WF_INVALID_ARGUMENT,
                              "loss '%s': sparse labels %s do not match logits %s (labels must be i32 or i64 [N] "
                              "for logits [N, C])",
                              name, desc(labels, bt), desc(logits, bl));
        /* one node: its CPU and OpenCL kernels check every label on the host, naming the bad one */
        wf_output in[2] = {logits, labels};
        wf_attr red = wf_attr_string("reduction", "mean");
        T(node(&b, "SoftmaxCrossEntropyLoss", NULL, in, 2, &red, 1, out));
        return NULL;
    }
    WF__TRY(same_shape(name, "logits", logits, "labels", labels));
    wf_output lsm, prod, sum, mean;
    wf_attr ax = wf_attr_int("axis", 1);
    int64_t one = 1;
    wf_attr at[2] = {wf_attr_int("keepdims", 0), wf_attr_ints("axes", &one, 1)};
    T(node(&b, "LogSoftmax", "log_softmax", &logits, 1, &ax, 1, &lsm));
    T(bin(&b, "Mul", "labels_log_p", labels, lsm, &prod));
    T(node(&b, "ReduceSum", "sum", &prod, 1, at, 2, &sum));
    T(mean_all(&b, "mean", sum, &mean));
    T(un(&b, "Neg", NULL, mean, out));
    return NULL;
}

wf_status *wf_loss_binary_cross_entropy(wf_graph *g, const char *name, wf_output x, wf_output z, int from_logits,
                                        wf_output *out)
{
    WF__TRY(check_args("wf_loss_binary_cross_entropy", g, name, x, z, out));
    WF__TRY(same_shape(name, from_logits ? "logits" : "probabilities", x, "targets", z));
    wf_dtype dt = wf_output_dtype(x);
    lb b = {g, name, g->n};
    wf_status *s;
    wf_output l;
    if (from_logits) {
        /* TensorFlow's form: the Wheres (not Relu and Abs) give x = 0 the gradient 0.5 - z */
        wf_output zero, cond, relu, negx, negabs, sp, xz, a;
        T(scalar(&b, "zero", dt, 0, &zero));
        T(bin(&b, "GreaterEqual", "nonneg", x, zero, &cond));
        wf_output w1[3] = {cond, x, zero};
        T(node(&b, "Where", "relu_logits", w1, 3, NULL, 0, &relu));
        T(un(&b, "Neg", "neg_logits", x, &negx));
        wf_output w2[3] = {cond, negx, x};
        T(node(&b, "Where", "neg_abs_logits", w2, 3, NULL, 0, &negabs));
        T(un(&b, "Softplus", "log1p_exp", negabs, &sp)); /* log1p(exp(.)) of a value <= 0 */
        T(bin(&b, "Mul", "logits_targets", x, z, &xz));
        T(bin(&b, "Sub", "sub", relu, xz, &a));
        T(bin(&b, "Add", "elementwise", a, sp, &l));
        T(mean_all(&b, NULL, l, out));
        return NULL;
    }
    /* Keras clips to [eps, 1 - eps]; where 1 - eps rounds to 1 in a narrow dtype, the largest value below */
    double eps = 1e-7, hi = 1 - eps;
    if (dt == WF_F16) hi = 1 - 0x1p-11;
    if (dt == WF_BF16) hi = 1 - 0x1p-8;
    wf_output lo_c, hi_c, one, c, lc, omz, omc, l1mc, a, bb, sum, mean;
    T(scalar(&b, "clip_min", dt, eps, &lo_c));
    T(scalar(&b, "clip_max", dt, hi, &hi_c));
    T(scalar(&b, "one", dt, 1, &one));
    wf_output ci[3] = {x, lo_c, hi_c};
    T(node(&b, "Clip", "clipped", ci, 3, NULL, 0, &c));
    T(un(&b, "Log", "log_p", c, &lc));
    T(bin(&b, "Sub", "one_minus_targets", one, z, &omz));
    T(bin(&b, "Sub", "one_minus_p", one, c, &omc));
    T(un(&b, "Log", "log_one_minus_p", omc, &l1mc));
    T(bin(&b, "Mul", "pos", z, lc, &a));
    T(bin(&b, "Mul", "neg", omz, l1mc, &bb));
    T(bin(&b, "Add", "sum", a, bb, &sum));
    T(mean_all(&b, "mean", sum, &mean));
    T(un(&b, "Neg", NULL, mean, out));
    return NULL;
}

wf_status *wf_loss_mse(wf_graph *g, const char *name, wf_output p, wf_output t, wf_output *out)
{
    WF__TRY(check_args("wf_loss_mse", g, name, p, t, out));
    WF__TRY(same_shape(name, "predictions", p, "targets", t));
    lb b = {g, name, g->n};
    wf_status *s;
    wf_output d, sq;
    T(bin(&b, "Sub", "diff", p, t, &d));
    T(bin(&b, "Mul", "square", d, d, &sq));
    T(mean_all(&b, NULL, sq, out));
    return NULL;
}
