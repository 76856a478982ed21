/*
 * Gradients of the class losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, so the sparse
 * cross-entropy of wf_loss_softmax_cross_entropy trains: for SCE, d/dx = (softmax(x) - onehot(t))
 * scaled by the reduction; for NLL, -onehot(t) scaled the same way.
 */
#include <string.h>

#include "graph/grad.h"
#include "graph/grad_losses.h"

#define T(expr) WF__TRY(expr)
#define OUT(j) wf_out((wf_node *)c->node, j)

wf_status *wf__grad_class_loss(wf__grad_ctx *c)
{
    const wf_node *n = c->node;
    bool sce = !strcmp(n->op->name, "SoftmaxCrossEntropyLoss");
    if (n->n_in > 2 && n->in[2].node)
        return wf__g_fail(c, WF_UNIMPLEMENTED, "the gradient with class weights is not implemented");
    if (wf__attr_get(n->op, n->attrs, "ignore_index")->set)
        return wf__g_fail(c, WF_UNIMPLEMENTED, "the gradient with ignore_index is not implemented");
    const char *red = wf__attr_s(n->op, n->attrs, "reduction");
    wf_output x = n->in[0], t = n->in[1];
    const wf__tinfo *tx = wf__g_info(x), *tt = wf__g_info(t);
    if (tx->rank < 2) return wf__g_fail(c, WF_UNIMPLEMENTED, "the rank of the input must be known while building");
    wf_dtype dt = tx->dtype;
    wf_output depth, values, onehot, dx = {0};
    if (tx->dims[1] >= 0) {
        T(wf__g_scalar(c, "depth", WF_I64, (double)tx->dims[1], &depth));
    } else {
        wf_output shp, one;
        T(wf__g_un(c, "Shape", "shape", x, &shp));
        T(wf__g_scalar(c, "class_axis", WF_I64, 1, &one));
        wf_attr ax = wf_attr_int("axis", 0);
        wf_output in[2] = {shp, one};
        T(wf__g_op(c, "Gather", "depth", in, 2, &ax, 1, &depth));
    }
    {
        wf_tensor *v;
        int64_t two = 2;
        T(wf_tensor_new(dt, 1, &two, NULL, &v));
        wf__store_f64(wf_tensor_data(v), dt, 1, 1.0);
        wf_attr a = wf_attr_tensor("value", v);
        wf_status *s = wf__g_op(c, "Const", "onehot_values", NULL, 0, &a, 1, &values);
        wf_tensor_free(v);
        if (s) return s;
    }
    {
        wf_output in[3] = {t, depth, values};
        wf_attr ax = wf_attr_int("axis", 1);
        T(wf__g_op(c, "OneHot", "onehot", in, 3, &ax, 1, &onehot));
    }
    if (c->dy[0].node) {
        /* d loss_i / d x_i = p_i - onehot_i (SCE) or -onehot_i (NLL), times d out / d loss_i */
        wf_output base, scale;
        if (sce) {
            wf_output p;
            T(wf__g_un(c, "Exp", "softmax", OUT(1), &p));
            T(wf__g_bin(c, "Sub", "p_minus_onehot", p, onehot, &base));
        } else {
            T(wf__g_un(c, "Neg", "neg_onehot", onehot, &base));
        }
        if (!strcmp(red, "none")) {
            int64_t axis = 1;
            wf_output in[2] = {c->dy[0], {0}};
            T(wf__g_ints(c, "axes", 1, &axis, &in[1]));
            T(wf__g_op(c, "Unsqueeze", "dy", in, 2, NULL, 0, &scale));
        } else if (!strcmp(red, "sum")) {
            scale = c->dy[0];
        } else {
            /* mean: every element of t counts (no weights, no ignore_index) */
            wf_output count;
            int64_t numel = wf__numel(tt->rank, tt->dims);
            if (tt->rank >= 0 && numel >= 0) {
                T(wf__g_scalar(c, "count", dt, (double)numel, &count));
            } else {
                wf_output sz;
                T(wf__g_un(c, "Size", "size", t, &sz));
                wf_attr to = wf_attr_dtype("to", dt);
                T(wf__g_op(c, "Cast", "count", &sz, 1, &to, 1, &count));
            }
            T(wf__g_bin(c, "Div", "dy_mean", c->dy[0], count, &scale));
        }
        T(wf__g_bin(c, "Mul", "dx", base, scale, &dx));
    }
    if (sce && n->n_out > 1 && c->dy[1].node) {
        /* through the log-probabilities output: LogSoftmax's gradient */
        wf_output s, p, ps, d;
        int64_t axis = 1;
        wf_attr at[2] = {wf_attr_int("keepdims", 1), wf_attr_ints("axes", &axis, 1)};
        T(wf__g_op(c, "ReduceSum", "log_prob_sum", &c->dy[1], 1, at, 2, &s));
        T(wf__g_un(c, "Exp", "log_prob_exp", OUT(1), &p));
        T(wf__g_bin(c, "Mul", "log_prob_ps", p, s, &ps));
        T(wf__g_bin(c, "Sub", "log_prob_dx", c->dy[1], ps, &d));
        if (dx.node) T(wf__g_bin(c, "Add", "dx_sum", dx, d, &dx));
        else dx = d;
    }
    c->dx[0] = dx;
    return NULL;
}
