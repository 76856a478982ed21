/*
 * Pass "fold": a node of one output whose inputs are all constants becomes a constant.
 *   - When shape inference computed its value while the node was built (Shape of a constant,
 *     arithmetic on shape constants, Concat of them, ...), that value.
 *   - Otherwise, when the session gave an evaluator (wf__opt_options.eval), the node is run once on
 *     the CPU by its kernel (a Transpose or Cast of a weight, a DequantizeLinear of int8 weights, a
 *     MatMul of two constants, ...), if its output shape is known and holds at most
 *     WF__FOLD_MAX_BYTES: a cap like TensorFlow Grappler's (10 MB), so that the graph never grows by
 *     a large tensor that the run would compute from smaller ones. A node the CPU cannot run, or
 *     whose kernel fails on these values, is left as it is, so the run reports its error as before.
 * Stateful ops (random ops, Assign) and sources are never folded. Nodes whose inputs include a
 * placeholder or a variable are left alone even when their shapes are static: a feed may change them.
 * One exception, the static dims of a value: Gather(Shape(t), i) with constant indices i becomes a
 * constant where t's dims at i are known. A plan refuses a feed of a Placeholder or Variable whose
 * shape contradicts a known dim (lower/plan.c), so such a dim holds on every run; a PlaceholderWithDefault's
 * shape is only its default's, so nothing that depends on one is folded this way. PyTorch writes
 * x.size(1) so even where only the batch is dynamic (`self.mask[:, :, :T, :T]` of a causal decoder,
 * ShuffleNetV2's channel split), and the chain behind it (Unsqueeze, Slice of a constant, arithmetic)
 * then folds as usual.
 */
#include <stdio.h>

#include "core/checked.h"
#include "passes/pass.h"

#define WF__FOLD_MAX_BYTES ((size_t)16 << 20)
#define WF__FOLD_MAX_IN 16 /* inputs of a node fold runs (more: left as it is) */

static bool is_const(wf_output o) { return o.node && !strcmp(o.node->op->name, "Const"); }

/* Runs c (a node of r->dst whose inputs are constants) on the CPU through the session's evaluator:
 * its value, or NULL when it cannot be folded. */
static wf_tensor *evaluate(wf__pass_run *r, const wf_node *c)
{
    const wf__opt_options *o = r->opt;
    const wf__tinfo *t = &c->out[0];
    if (!o || !o->eval || !wf__tinfo_known(t)) return NULL;
    int64_t bytes = 0;
    if (!wf__shape_bytes_checked(t->rank, t->dims, wf_dtype_size(t->dtype), NULL, &bytes) ||
        bytes > (int64_t)WF__FOLD_MAX_BYTES)
        return NULL;
    wf_graph *g = NULL;
    wf_tensor *v = NULL;
    wf_output in[WF__FOLD_MAX_IN], y = {NULL, 0};
    if (c->n_in > WF__FOLD_MAX_IN) return NULL;
    wf_status *s = wf_graph_new(&g);
    for (int i = 0; !s && i < c->n_in; i++) {
        in[i] = (wf_output){NULL, 0};
        if (!c->in[i].node) continue;
        const wf__attr *a = wf__attr_get(c->in[i].node->op, c->in[i].node->attrs, "value");
        char name[32];
        snprintf(name, sizeof name, "in%d", i);
        s = a && a->t ? wf_const(g, name, a->t, &in[i]) : wf__status(WF_INTERNAL, "no value");
    }
    wf_node *n = NULL;
    if (!s) s = wf__pass_copy_to(g, c, in, &n);
    if (!s) {
        y = (wf_output){n, 0};
        s = o->eval(o->eval_arg, g, &y, 1, &v);
    }
    bool failed = s != NULL;
    wf_status_free(s); /* not folded: the run meets the same problem and reports it */
    wf_graph_free(g);
    return failed ? NULL : v;
}

/* Per source node: its value depends on a PlaceholderWithDefault (whose shape a feed may change). */
static wf_status *begin(wf__pass_run *r)
{
    bool *dep = wf__calloc(r->src->n ? (size_t)r->src->n : 1, sizeof *dep);
    if (!dep) return wf__oom("fold", (size_t)r->src->n);
    for (int id = 0; id < r->src->n; id++) { /* inputs come before their readers */
        const wf_node *n = r->src->nodes[id];
        dep[id] = !strcmp(n->op->name, "PlaceholderWithDefault");
        for (int i = 0; !dep[id] && i < n->n_in; i++) dep[id] = n->in[i].node && dep[n->in[i].node->id];
    }
    r->state = dep;
    return NULL;
}

static void end(wf__pass_run *r) { wf__free(r->state); }

/* Gather(Shape(t), i) of source node n with constant indices whose dims of t are known (see the header):
 * their values, or NULL. */
static wf_tensor *static_dims(const wf__pass_run *r, const wf_node *n)
{
    const bool *dep = r->state;
    if (strcmp(n->op->name, "Gather") || n->n_in != 2 || wf__attr_i(n->op, n->attrs, "axis") != 0 ||
        !wf__pass_is_op(n->in[0], "Shape") || !n->in[1].node || !n->in[0].node->in[0].node)
        return NULL;
    const wf_node *sh = n->in[0].node;
    wf_output t = sh->in[0];
    const wf_tensor *ix = wf__pass_value(n->in[1]);
    const wf__tinfo *ti = wf__pass_info(t);
    if (dep[t.node->id] || !ix || (ix->dtype != WF_I64 && ix->dtype != WF_I32) || ix->rank > 1 || ti->rank < 0)
        return NULL;
    int64_t start = wf__attr_i(sh->op, sh->attrs, "start"), stop = wf__attr_i(sh->op, sh->attrs, "end");
    if (start < 0) start += ti->rank;
    if (stop < 0) stop += ti->rank;
    start = start < 0 ? 0 : start > ti->rank ? ti->rank : start;
    stop = stop < start ? start : stop > ti->rank ? ti->rank : stop;
    int64_t len = stop - start;
    wf_tensor *v = NULL;
    wf_status *s = wf__tensor_alloc(WF_I64, ix->rank, ix->dims, "a static dim", &v);
    for (int64_t k = 0; !s && k < ix->size; k++) {
        int64_t i = wf__load_i64(ix->data, ix->dtype, k);
        if (i < 0) i += len;
        int64_t d = i >= 0 && i < len ? ti->dims[start + i] : -1;
        if (d < 0) break;
        ((int64_t *)v->data)[k] = d;
        if (k == ix->size - 1) return v;
    }
    wf_status_free(s);
    wf_tensor_free(v);
    return NULL;
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    wf_tensor *dims = static_dims(r, n);
    if (dims) {
        wf_status *s = wf_const(r->dst, n->name, dims, &out[0]);
        wf_tensor_free(dims);
        return s ? wf__status_wrap(s, "fold: node '%s' (%s)", n->name, n->op->name) : NULL;
    }
    bool all_const = !wf__pass_must_keep(n) && n->n_in > 0;
    for (int i = 0; all_const && i < n->n_in; i++) all_const = !in[i].node || is_const(in[i]);
    wf_node *c;
    WF__TRY(wf__pass_copy(r, n, in, &c));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
    if (!all_const || c->n_out != 1) return NULL; /* one constant per node: no names to invent */
    wf_tensor *v = c->out_value && c->out_value[0] ? wf_tensor_ref(c->out_value[0]) : evaluate(r, c);
    if (!v) return NULL;
    /* the value outlives the copy, which goes; its name goes to the constant */
    wf__graph_pop(r->dst);
    wf_status *s = wf_const(r->dst, n->name, v, &out[0]);
    wf_tensor_free(v);
    return s ? wf__status_wrap(s, "fold: node '%s' (%s)", n->name, n->op->name) : NULL;
}

const wf__pass wf__pass_fold = {"fold", begin, end, visit};
