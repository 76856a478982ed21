/*
 * Generated elementwise kernels: the "jit" pass of optimisation level 2, after placement and epilogue
 * fusion (jit.c). Internal to planning.
 */
#ifndef WF_LOWER_JIT_H
#define WF_LOWER_JIT_H

#include "place/placement.h"

/* One cluster, kept on its root's wf__plan_fusion until lowering makes its plan node. */
typedef struct wf__jit_cluster {
    int n_ext;
    wf_output *ext;       /* the inputs, in the program's order */
    int n_members;
    int *members;         /* graph ids in topological order; the last is the root */
    wf__ew_program *prog; /* handed to the plan node (lowering then sets this to NULL) */
    char *names;          /* "Mul+Add+Relu", the members' ops (handed over too) */
    double build_s;       /* time to make the program */
} wf__jit_cluster;

/* Finds the clusters, marks their members fused into the root (b->fused_away, b->fuse_into) and sets
 * fu[root].cl. */
wf_status *wf__plan_jit(wf__plan_builder *b, wf__plan_fusion *fu);
void wf__jit_cluster_free(wf__jit_cluster *c);

#endif
