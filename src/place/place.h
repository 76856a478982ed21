/*
 * Cost-based placement: HEFT (heterogeneous earliest finish time) list scheduling over an abstract
 * graph whose constraints are already folded into a mask of allowed devices per node. The planner
 * (placement.c) builds the problem from a graph and formats the reasons; tests and benchmarks build it
 * by hand, with declared device speeds and links.
 */
#ifndef WF_PLACE_PLACE_H
#define WF_PLACE_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "weft/weft.h"

#define WF__PLACE_MAX_DEV 64

/* A device as the cost model sees it. */
typedef struct wf__place_dev {
    double dense_flops;  /* flop/s on dense ops (matmul, convolution: flops >= 4 x bytes) */
    double vector_flops; /* flop/s on everything else */
    double mem_bw;       /* bytes/s of memory traffic */
    double launch;       /* seconds per node */
    double mem_limit;    /* bytes the plan may hold there at once; 0: no limit */
    int shares_with;     /* 1 + the index of the device whose cores this one computes on (an OpenCL
                            CPU device beside CPU:0): the two share one timeline, one node at a
                            time; 0: its own timeline */
} wf__place_dev;

typedef struct wf__place_problem {
    int n_nodes;                   /* in topological order: a node's inputs come before it */
    int n_dev;
    const int *in_start;           /* n_nodes + 1 offsets into in_src */
    const int *in_src;             /* producer node of each input (its outputs travel together) */
    const double *flops, *bytes;   /* per node: the op's cost */
    const double *out_bytes;       /* per node: the bytes of its outputs */
    const uint64_t *allowed;       /* per node: devices it may run on (kernel, request); non-zero */
    const uint64_t *fallback;      /* per node: devices to try when every allowed one would pass its
                                      memory limit (soft placement: those with a kernel); NULL: none */
    const int *group;              /* per node: colocation group or -1; NULL: none */
    const unsigned char *resident; /* per node: a constant, uploaded once and kept for the session (no
                                      per-run copy; its bytes stay on every device that reads it);
                                      it is not scheduled and ends on its first consumer's device */
    const unsigned char *pinned;   /* per node: keep on the first allowed device, no cost decision */
    const wf__place_dev *dev;
    const double *link_lat;        /* [from * n_dev + to]: seconds per copy */
    const double *link_bw;         /* bytes/s */
} wf__place_problem;

/* What the placer decided for one node, for the reasons. Times in seconds. */
typedef struct wf__place_choice {
    int dev;
    int alt;                /* the runner-up device, or -1 when only one was possible */
    float est, copy;        /* run time on dev, and the copies into it that this node waits for */
    float alt_est, alt_copy;
    float start, finish;
    uint64_t mem_excluded;  /* allowed devices left out because the plan would pass their limit */
} wf__place_choice;

typedef struct wf__place_result {
    wf__place_choice *node; /* n_nodes */
    double makespan;
    double peak[WF__PLACE_MAX_DEV]; /* estimated peak bytes per device */
} wf__place_result;

/* Seconds to run an op of this cost on d. */
double wf__place_exec_time(const wf__place_dev *d, double flops, double bytes);

/* HEFT: nodes by upward rank, each on the allowed device where it finishes first, counting the copies
 * of its inputs (one per value and device, shared by later readers) and keeping every device under its
 * memory limit while another device can take the node. r->node must hold n_nodes entries. */
wf_status *wf__place_heft(const wf__place_problem *p, wf__place_result *r);

/* The estimated makespan of a given assignment (dev_of per node), scheduled in the same order. */
wf_status *wf__place_evaluate(const wf__place_problem *p, const int *dev_of, wf__place_result *r);

/* A lower bound: the critical path with every node on its fastest allowed device and no copies. */
double wf__place_lower_bound(const wf__place_problem *p);

/* How a session wants nodes placed. */
typedef struct wf__place_opts {
    const char *device;           /* every node on this device spec (NULL: each node's own request) */
    bool strict;                  /* an unsatisfiable request is an error instead of a fallback */
    int policy;                   /* WF__POLICY_*: benchmarks compare other rules under the same costs */
    struct wf__weights *weights;  /* the session's device copies of constants and variables (NULL: each
                                     plan uploads its own) */
    bool no_fusion;               /* lowering fuses no epilogue (optimisation levels 0 and 1) */
    bool layout;                  /* lowering plans channel-blocked layouts (level 3, lower/layout.c) */
    bool no_jit;                  /* lowering generates no elementwise kernels (lower/jit.c) */
    bool no_residual;             /* lowering takes no residual Add into a Conv2D or MatMul (lower/plan.c) */
} wf__place_opts;

enum {
    WF__POLICY_HEFT = 0,          /* weft's: earliest estimated finish, copies included */
    WF__POLICY_CPU_ONLY = 1,      /* every node on CPU:0 where it has a kernel */
    WF__POLICY_ACCEL_FIRST = 2,   /* TensorFlow's rule: an accelerator whenever it has a kernel */
    WF__POLICY_FASTEST = 3        /* every node on the device with the highest dense rate, if it can */
};

#endif
