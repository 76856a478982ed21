/*
 * Pass "identity": nodes that return their input. Identity; Dropout in inference mode (its mask is not
 * read, and training_mode is absent or a constant false: ONNX's Dropout is then the identity whatever
 * the ratio; weft refuses training mode when the graph is built, so the test is for when it comes);
 * Cast to the dtype its input already has; Pad whose pads are a constant of zeros. Their readers read
 * the input instead.
 */
#include "passes/pass.h"

/* A constant of only zero bytes in the new graph, of one element (a false boolean scalar) or any
 * number of them (max_size -1: all-zero pads). */
static bool const_zeros(wf_output o, int64_t max_size)
{
    const wf_node *c = o.node;
    if (!c || strcmp(c->op->name, "Const") != 0) return false;
    const wf__attr *v = wf__attr_get(c->op, c->attrs, "value");
    if (!v || !v->t || (max_size >= 0 ? v->t->size != max_size : v->t->size < 1)) return false;
    const unsigned char *b = v->t->data;
    for (size_t i = 0; i < v->t->bytes; i++)
        if (b[i]) return false;
    return true;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    const char *op = n->op->name;
    bool same = false;
    if (!strcmp(op, "Identity")) {
        same = true;
    } else if (!strcmp(op, "Dropout")) {
        same = wf__pass_uses(r, n, 1) == 0 && (n->n_in < 3 || !in[2].node || const_zeros(in[2], 1));
    } else if (!strcmp(op, "Pad") && n->n_in >= 2) {
        /* no padding on any axis, whatever the mode and value (PyTorch exports AvgPool2d so) */
        same = const_zeros(in[1], -1);
    } else if (!strcmp(op, "Cast") && in[0].node) {
        same = in[0].node->out[in[0].index].dtype == (wf_dtype)wf__attr_i(n->op, n->attrs, "to");
    }
    if (same && in[0].node) {
        out[0] = in[0];
        for (int j = 1; j < n->n_out; j++) out[j] = in[0]; /* never read (Dropout's mask) */
        return NULL;
    }
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    return NULL;
}

const wf__pass wf__pass_identity = {"identity", NULL, NULL, visit};
