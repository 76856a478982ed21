/* Graph and node internals shared by the graph builder, the planner and the ONNX importer. */
#ifndef WF_GRAPH_GRAPH_H
#define WF_GRAPH_GRAPH_H

#include "graph/op.h"

struct wf_node {
    wf_graph *graph;
    int id;                  /* index in graph->nodes, creation order (a topological order) */
    char *name;
    const wf__op_def *op;
    int n_in;
    wf_output *in;           /* in[i].node == NULL: omitted optional input */
    int n_out;
    wf__tinfo *out;          /* inferred at build time; dims -1 where unknown */
    wf_tensor **out_value;   /* values known at build time (Const, folded shapes), else NULL */
    wf__attr attrs[WF__MAX_ATTRS];
    char *device;            /* requested device spec, "" if none */
    char *coloc;             /* colocation group, NULL if none */
};

struct wf_graph {
    wf_node **nodes;
    int n, cap;
    /* name -> node, open addressing on a power-of-two table */
    wf_node **index;
    size_t index_cap;
    /* per-op counters for automatic names */
    const wf__op_def **name_ops;
    int *name_next;
    int name_n, name_cap;
    char *device_scope;
};

/* Removes the most recently added node (a builder undoing its helper nodes after a failure). */
void wf__graph_pop(wf_graph *g);
/* Removes every node added after the first n (an importer undoing a failed import). */
void wf__graph_truncate(wf_graph *g, int n);
wf_node *wf__graph_lookup(const wf_graph *g, const char *name);
/* Runs the op's shape function over the node's inputs; used at build and again by the planner with
 * concrete input info. `in`/`in_value` describe the inputs; out/out_value receive results. */
wf_status *wf__node_infer(const wf_node *n, const wf__tinfo *in, wf_tensor *const *in_value,
                          wf__tinfo *out, wf_tensor **out_value);

#endif
