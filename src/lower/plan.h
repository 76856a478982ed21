/*
 * An immutable execution plan: the pruned, re-inferred, fused and placed graph for one
 * (feeds, fetches, input shapes), with a kernel per node, slot numbers for every value, successor
 * lists and initial pending counts. Runs keep their own state, so several may share one plan.
 */
#ifndef WF_LOWER_PLAN_H
#define WF_LOWER_PLAN_H

#include <pthread.h>

#include "device/kernel.h"
#include "graph/graph.h"
#include "place/place.h"

typedef struct wf__device wf__device;

typedef struct wf__pnode {
    const wf_node *gn;            /* graph node */
    const char *name;             /* gn's, copied here so the executor touches one cache line less */
    const wf__op_def *op;
    const wf__attr *attrs;
    const wf__kernel_def *kernel;
    int feed;                     /* index into the run's feeds for a Placeholder, else -1 */
    int n_in;
    int *in_slot;                 /* -1: omitted optional input */
    int n_out;
    int *out_slot;
    wf__tinfo *out_info;          /* planned dtype/shape per output */
    int n_succ;
    int *succ;                    /* distinct successor node indices */
    int pending0;                 /* distinct producer nodes */
    int pending_run;              /* those of them a run executes (pending0 less the bound constants) */
    const wf_tensor *bound;       /* a Const bound when a run starts (WF__K_CONST_VALUE): its value, else NULL */
    bool cheap;                   /* run inline by the executor */
    int fused_bias, fused_act;    /* see wf__kctx */
    int fused_res;                /* see wf__kctx.fused_residual: index of the residual input, 0 none */
    uint32_t out_unused;          /* see wf__kctx.out_unused: bit j, nothing reads output j */
    double fused_alpha, fused_beta; /* see wf__kctx */
    const char *fused_names;      /* "BiasAdd_1+Relu" for logs, or NULL */
    uint32_t in_blocked, out_blocked; /* see wf__kctx (level 3's layout planning) */
    wf__ew_program *ewprog;       /* a generated kernel's program (lower/jit.c), owned; else NULL */
    int device;                   /* index into the context's devices */
    char *reason;                 /* why it runs there */
    void *state;
    pthread_mutex_t state_lock;
    double flops, bytes;          /* cost estimate */
    double est;                   /* the placer's run-time estimate on its device, s; -1: none */
    char *own_name;               /* a copy node's name (gn == NULL) */
} wf__pnode;


typedef struct wf__plan {
    const char *amp_report;       /* the optimised graph's mixed-precision report (the session owns it), or NULL */
    int n_nodes;
    wf__pnode *nodes;
    int n_slots;
    int *slot_uses;               /* consumer input uses + one per fetch of the slot */
    unsigned char *slot_static;   /* 1: a Const or a feed, alive for the whole run: no use counting */
    int n_feeds;
    int n_fetches;
    int *fetch_slot;
    int n_roots;
    int *roots;                   /* the nodes a run starts with (pending_run 0, not bound) */
    int n_bound;                  /* Consts bound at a run's start: a run executes n_nodes - n_bound nodes */
    int *arena_io;                /* every node's in_slot and out_slot, in node order */
    int *arena_succ;              /* every node's succ, in node order */
    double est_makespan;          /* the placer's estimate of one run, seconds */
    double est_lower_bound;       /* critical path on each node's fastest device, no copies */
    bool serial;                  /* too little overlap to hand nodes to other executor threads */
    /* cache key */
    wf_output *key_fetch;
    wf_output *key_feed;
    wf__tinfo *key_feed_info;
    /* the static memory plan (lower/memplan.c) */
    int64_t *slot_off;            /* per slot: byte offset in its device's arena, -1: allocated at run time */
    size_t *slot_cap;             /* per slot: bytes reserved there */
    size_t *arena_bytes;          /* per context device; NULL: the plan has no arenas */
    int n_arena_dev;
    pthread_mutex_t arena_mu;
    struct wf__arena_set *arena_pool; /* arenas of finished runs, for the next */
    struct wf_context *arena_ctx; /* whose devices the arenas are on */
    struct wf__weights *weights;  /* see wf__place_opts */
    atomic_int refs;              /* the session's cache holds one, each run using it one */
} wf__plan;

typedef struct wf_context wf_context;

/* Builds a plan. Errors name the node, feed or fetch at fault. */
wf_status *wf__plan_build(wf_context *ctx, const wf_graph *g, const wf_feed *feeds, int n_feeds,
                          const wf_output *fetches, int n_fetches, const wf__place_opts *opts, wf__plan **out);
/* Makes p match the request (feeds, fetches) of another graph: the session's, when p was built on its
 * optimised graph for that request (same counts, in the same order). */
void wf__plan_rekey(wf__plan *p, const wf_feed *feeds, const wf_output *fetches);
void wf__plan_free(wf__plan *p);
/* Reference counting for a plan cache that evicts: the last reference frees the plan. */
void wf__plan_ref(wf__plan *p);
void wf__plan_unref(wf__plan *p);
/* Does p match this request (same fetches, feeds in the same order, same feed dtypes and shapes)? */
bool wf__plan_matches(const wf__plan *p, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                      int n_fetches);

#endif
