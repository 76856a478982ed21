/* What a pass is, as the driver (pipeline.c) runs it: see passes.h. */
#ifndef WF_PASSES_PASS_H
#define WF_PASSES_PASS_H

#include "passes/passes.h"

typedef struct wf__pass_run {
    wf_graph *dst;          /* the graph being built */
    const wf_graph *src;    /* the graph being read */
    const int *uses;        /* per source node: live readers of each output, uses[off[id] + j] */
    const int *off;
    const bool *live;       /* per source node: needed by the roots or kept */
    void *state;            /* the pass's own, from begin() */
    const wf__opt_options *opt;
    wf__str *report;        /* what the pass decided, for --explain (amp's lines), or NULL */
} wf__pass_run;

typedef struct wf__pass {
    const char *name;
    /* Optional: state for one run over a graph (freed by end()). */
    wf_status *(*begin)(wf__pass_run *r);
    void (*end)(wf__pass_run *r);
    /* Node n of the source graph, its inputs already mapped into r->dst (in[i].node NULL: omitted).
     * Fills out[j] for each of its outputs: with wf__pass_copy's node, or outputs that exist in r->dst.
     * NULL as a visit means "copy every node". */
    wf_status *(*visit)(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out);
} wf__pass;

/* Copies n into r->dst with inputs `in`: its op, name, attributes (tensors shared, not copied),
 * device request and colocation group. */
wf_status *wf__pass_copy(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_node **out);
/* A new node of op `op` in r->dst named `name` (a source node's name is free once the pass replaces that
 * node), with `like`'s device request and colocation group; its output 0 in *out. */
wf_status *wf__pass_emit(wf__pass_run *r, const wf_node *like, const char *op, const char *name, const wf_output *in,
                         int n_in, const wf_attr *a, int na, wf_output *out);
/* A node name not yet in dst: base + suffix, then with _1, _2, ... */
void wf__pass_fresh_name(const wf_graph *dst, const char *base, const char *suffix, char *out, size_t cap);
/* The value of output o when the graph knows it when built (a constant, a folded shape), else NULL. */
const wf_tensor *wf__pass_value(wf_output o);
/* The same into any graph (fold's one-node graphs). */
wf_status *wf__pass_copy_to(wf_graph *dst, const wf_node *n, const wf_output *in, wf_node **out);
/* Live readers of source output (n, j). */
int wf__pass_uses(const wf__pass_run *r, const wf_node *n, int j);
/* Per source node: the id of the only live reader of its output 0, -1 when none, -2 when several (a
 * reader of another output counts as none). A wf__malloc'd array the pass frees; NULL when out of memory. */
int *wf__pass_sole_readers(const wf__pass_run *r);
/* Whether a pass must leave n as it is: a source (the driver never shows those to a pass) or a stateful
 * op (an Assign, a random op), which is never merged or folded. */
bool wf__pass_must_keep(const wf_node *n);

/* Whether two optional strings (device requests, colocation groups, attribute strings) are the same,
 * NULL and "" alike. */
static inline bool wf__pass_same_str(const char *a, const char *b) { return !strcmp(a ? a : "", b ? b : ""); }

/* Pattern-matching helpers of the passes that read chains of nodes (simplify.c, attention.c). */
/* Whether o is output 0 of an `op` node. */
static inline bool wf__pass_is_op(wf_output o, const char *op)
{
    return o.node && o.index == 0 && !strcmp(o.node->op->name, op);
}
/* The inferred dtype and shape of o (o.node set). */
static inline const wf__tinfo *wf__pass_info(wf_output o) { return &o.node->out[o.index]; }
/* The permutation of Transpose node t over rank dims (its perm, or the reversal when unset). */
bool wf__pass_perm(const wf_node *t, int rank, int64_t *p);

extern const wf__pass wf__pass_identity; /* identity.c */
extern const wf__pass wf__pass_simplify; /* simplify.c */
extern const wf__pass wf__pass_bnfold;   /* bnfold.c */
extern const wf__pass wf__pass_matmul_bias; /* matmul_bias.c */
extern const wf__pass wf__pass_fold;     /* fold.c */
extern const wf__pass wf__pass_cse;      /* cse.c */
extern const wf__pass wf__pass_conv_crop; /* conv_crop.c */
extern const wf__pass wf__pass_conv_pool; /* conv_pool.c */
extern const wf__pass wf__pass_conv_scale; /* conv_scale.c */
extern const wf__pass wf__pass_attention; /* attention.c */
extern const wf__pass wf__pass_amp;      /* amp.c */

#endif
