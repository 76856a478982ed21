/*
 * Pass "fold": a node whose inputs are all constants and whose every output value shape inference
 * computed when the node was built (the graph's build-time values: Shape of a constant, arithmetic on
 * shape constants, Concat of them, ...) becomes a constant (nodes of one output only). Only such values are folded
 * (shape inference computes them for small integer tensors), so the graph never grows by a large
 * folded tensor. Stateful ops are never folded. Nodes whose inputs include a placeholder or a
 * variable are left alone even when their shapes are static: a feed may change them.
 */
#include "passes/pass.h"

static bool is_const(wf_output o) { return o.node && !strcmp(o.node->op->name, "Const"); }

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    bool all_const = !wf__pass_must_keep(n) && n->n_in > 0;
    for (int i = 0; all_const && i < n->n_in; i++) all_const = !in[i].node || is_const(in[i]);
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    bool known = all_const && c->out_value;
    for (int j = 0; known && j < c->n_out; j++) known = c->out_value[j] != NULL;
    if (!known) {
        for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
        return NULL;
    }
    if (c->n_out != 1) { /* one constant per node: no names to invent */
        for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
        return NULL;
    }
    /* the value outlives the copy, which goes; its name goes to the constant */
    wf_tensor *v = wf_tensor_ref(c->out_value[0]);
    wf__graph_pop(r->dst);
    wf_status *s = wf_const(r->dst, n->name, v, &out[0]);
    wf_tensor_free(v);
    return s ? wf__status_wrap(s, "fold: node '%s' (%s)", n->name, n->op->name) : NULL;
}

const wf__pass wf__pass_fold = {"fold", NULL, NULL, visit};
