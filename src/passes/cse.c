/*
 * Pass "cse": common subexpression elimination. A node with the same op, the same inputs (outputs of
 * the new graph, so merges cascade) and the same attribute values as one already in the new graph,
 * and the same device request and colocation group, is replaced by it. Sources and stateful ops
 * (random ops, Assign) are never merged: each must run.
 */
#include "passes/pass.h"

typedef struct cse_state {
    const wf_node **slot; /* open addressing over the new graph's nodes */
    uint64_t *hash;
    size_t cap;
} cse_state;

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static uint64_t node_hash(const wf__op_def *op, const wf_output *in, int n_in)
{
    uint64_t h = mix(0xcbf29ce484222325ull, (uint64_t)(uintptr_t)op);
    for (int i = 0; i < n_in; i++) h = mix(mix(h, (uint64_t)(uintptr_t)in[i].node), (uint64_t)in[i].index);
    return h;
}

static bool same_attrs(const wf_node *a, const wf_node *b)
{
    for (int k = 0; k < WF__MAX_ATTRS && a->op->attrs[k].name; k++) {
        const wf__attr *x = &a->attrs[k], *y = &b->attrs[k];
        if (x->type != y->type || x->i != y->i || x->n != y->n || !wf__pass_same_str(x->s, y->s) || x->t != y->t)
            return false;
        if (memcmp(&x->f, &y->f, sizeof x->f)) return false; /* bitwise: NaN attributes match themselves */
        if (x->n && x->ints && (!y->ints || memcmp(x->ints, y->ints, sizeof *x->ints * (size_t)x->n))) return false;
        if (x->n && x->floats && (!y->floats || memcmp(x->floats, y->floats, sizeof *x->floats * (size_t)x->n)))
            return false;
    }
    return true;
}

/* a: the candidate in the new graph; n: the source node with inputs `in` (mapped). */
static bool same_node(const wf_node *a, const wf_node *n, const wf_output *in)
{
    if (a->op != n->op || a->n_in != n->n_in || a->n_out != n->n_out) return false;
    for (int i = 0; i < n->n_in; i++)
        if (a->in[i].node != in[i].node || (in[i].node && a->in[i].index != in[i].index)) return false;
    return same_attrs(a, n) && wf__pass_same_str(a->device, n->device) && wf__pass_same_str(a->coloc, n->coloc);
}

static wf_status *begin(wf__pass_run *r)
{
    cse_state *c = wf__calloc(1, sizeof *c);
    size_t cap = 64;
    while (cap < 2 * (size_t)r->src->n) cap *= 2;
    if (c) {
        c->slot = wf__calloc(cap, sizeof *c->slot);
        c->hash = wf__calloc(cap, sizeof *c->hash);
        c->cap = cap;
    }
    if (!c || !c->slot || !c->hash) {
        if (c) {
            wf__free(c->slot);
            wf__free(c->hash);
        }
        wf__free(c);
        return wf__oom("cse", cap * sizeof(void *) * 2);
    }
    r->state = c;
    return NULL;
}

static void end(wf__pass_run *r)
{
    cse_state *c = r->state;
    if (!c) return;
    wf__free(c->slot);
    wf__free(c->hash);
    wf__free(c);
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    cse_state *c = r->state;
    bool mergeable = !wf__pass_must_keep(n);
    uint64_t h = node_hash(n->op, in, n->n_in);
    size_t i = (size_t)h & (c->cap - 1);
    for (; mergeable && c->slot[i]; i = (i + 1) & (c->cap - 1))
        if (c->hash[i] == h && same_node(c->slot[i], n, in)) {
            for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){(wf_node *)c->slot[i], j};
            return NULL;
        }
    wf_node *x;
    WF__TRY(wf__pass_copy(r, n, in, &x));
    for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){x, j};
    if (mergeable) { /* i is the free slot the probe ended on; the table holds at most src->n of 2x */
        c->slot[i] = x;
        c->hash[i] = h;
    }
    return NULL;
}

const wf__pass wf__pass_cse = {"cse", begin, end, visit};
