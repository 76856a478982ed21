/*
 * The planner's state shared by its stages: placement (place/placement.c), partition and lowering
 * (lower/plan.c). Internal to planning.
 */
#ifndef WF_PLACE_PLACEMENT_H
#define WF_PLACE_PLACEMENT_H

#include "device/device.h"
#include "graph/graph.h"
#include "place/place.h"

typedef struct wf__plan_builder {
    wf_context *ctx;
    const wf_graph *g;
    int n;                  /* graph nodes */
    bool *live;             /* reachable from the fetches */
    bool *fused_away;       /* folded into a producer's epilogue */
    int *feed_of;           /* feed index per graph node or -1 */
    wf__tinfo **info;       /* per graph node: planned output info */
    wf_tensor ***value;     /* per graph node: known values */
    int **slot;             /* per graph node: slot per output */
    int *consumers;         /* per graph node: number of live consumer inputs of output 0 */
    int *fetched;           /* per graph node: how many fetches name output 0 */
    int *pidx;              /* graph node -> plan node index, -1 */
    int *fuse_into;         /* fused-away node -> the graph node that absorbs it */
    int *dev_of;            /* graph node -> device index */
    char **reason_of;       /* graph node -> why it runs there */
    double *est_of;         /* graph node -> the placer's run-time estimate, s (-1: none) */
    const wf__place_opts *po;
    double est_makespan, est_lower_bound;
} wf__plan_builder;

/* Epilogue fusion chosen by lowering, per graph node (partition copies a fused bias too). */
typedef struct wf__plan_fusion {
    int bias_node;   /* graph id of the absorbed BiasAdd or -1 */
    int act_node;    /* graph id of the absorbed activation or -1 */
    /* A residual Add absorbed by a Conv2D or MatMul (lower/plan.c): its graph id or -1, and its other
     * operand, the value added to the node's result (read as one more input, after a fused bias). */
    int res_node;
    wf_output res;
    /* A Softmax's prologue (lower/plan.c): the one-element divisor of the Div it absorbed (read as one
     * more input after its own), or {NULL}. */
    wf_output pre_div;
    /* ... and the mask of the Add it absorbed (read after the divisor, whose slot is -1 without a Div),
     * or {NULL} */
    wf_output pre_mask;
    /* A LayerNormalization's prologue (lower/plan.c, SkipLayerNormalization): the other operand of the Add
     * it absorbed, added to its X (read as one more input, its index in wf__pnode.fused_res), or {NULL} */
    wf_output pre_skip;
    /* On a generated kernel's root (lowering's "jit", lower/jit.c): its cluster, and the inputs its
     * plan node reads in place of the root's own; else NULL. */
    struct wf__jit_cluster *cl;
    int n_ext;
    const wf_output *ext;
    /* A prologue, lower/plan.c: a u8 -> f32 Cast absorbed by the Resize it feeds. When set, ext points
     * here: the Resize's inputs with the Cast's input in place of the Cast. */
    wf_output *own_ext;
} wf__plan_fusion;

/* The inputs the plan node of graph node n reads: a generated kernel's, or n's own. */
static inline int wf__plan_inputs(const wf__plan_fusion *fu, const wf_node *n, const wf_output **in)
{
    if (fu[n->id].ext) {
        *in = fu[n->id].ext;
        return fu[n->id].n_ext;
    }
    *in = n->in;
    return n->n_in;
}

/* Where each slot lives and which copies partitioning inserts: copy_mask[sl] has bit d when slot sl
 * (a graph slot) is needed on device d; its copies are numbered from copy_base[sl]. Freed by the
 * caller (wf__free of each array). */
typedef struct wf__partition {
    int n_copies;
    int *slot_dev, *slot_gid, *slot_out, *copy_base;
    uint64_t *copy_mask;
} wf__partition;

/* Fetched Assigns stay where they ran: they are a resident variable's next value. */
bool wf__keep_on_device(const wf_output *f);
/* The device where node n reads input i: its own, the host for a host-memory argument, the producer's
 * for an input of which only the shape is read. */
int wf__input_device(const wf__plan_builder *b, const wf_node *n, int i);
/* Partition (partition.c): the copies the placed graph needs, for n_slots graph slots. */
wf_status *wf__partition_copies(wf__plan_builder *b, const wf__plan_fusion *fu, const wf_output *fetches,
                                int n_fetches, int n_slots, wf__partition *pt);

/* Decides the device of every live node (dev_of, reason_of, est_of). */
wf_status *wf__place_nodes(wf__plan_builder *b);
/* Fed Variables move to the device of the Assign that updates them (or of all their consumers). */
wf_status *wf__place_variables(wf__plan_builder *b);
/* The kernel for graph node n on device dev, for planned input types in; NULL if none. */
const wf__kernel_def *wf__plan_kernel_on(wf__plan_builder *b, int dev, const wf_node *n, const wf__tinfo *in);
/* One flop per output element and the bytes of the inputs and outputs (ops without a cost function). */
void wf__plan_default_cost(const wf_node *n, const wf__tinfo *in, const wf__tinfo *out, double *flops,
                           double *bytes);

#endif
