/*
 * What an op is, as shape inference and kernels both read it: its name, signature, declared attributes
 * with their defaults, and the hooks the graph calls (infer, cost, grad). The graph's registry
 * (graph/op.h, graph/registry.c) lists the tables and defines the contexts the hooks receive; a
 * kernel sees only this, the op's definition and its node's attribute values, never the graph.
 */
#ifndef WF_OPS_OP_H
#define WF_OPS_OP_H

#include "core/core.h"
#include "ops/attr.h"

#define WF__MAX_ATTRS 12

typedef struct wf__attr_def {
    const char *name;
    wf_attr_type type;
    bool required;   /* no default: must be given */
    int64_t i;       /* default for INT and DTYPE (a wf_dtype) */
    double f;        /* default for FLOAT */
    const char *s;   /* default for STRING */
    /* INTS / FLOATS default to empty (n == 0); kernels treat empty as "use the op's default". */
} wf__attr_def;

/* Defined by the graph (graph/op.h). */
typedef struct wf__infer_ctx wf__infer_ctx;
typedef struct wf__grad_ctx wf__grad_ctx;

enum {
    WF__OP_SOURCE = 1u << 0,   /* no inputs: Const, Placeholder */
    WF__OP_STATEFUL = 1u << 1, /* never folded or deduplicated */
    WF__OP_CHEAP = 1u << 2,    /* tiny work per element: run inline by the executor */
    WF__OP_STRINGS = 1u << 3   /* may take or make WF_STRING values; every other op refuses them when
                                  the graph is built (graph.c, wf__node_infer) */
};

struct wf__op_def {
    const char *name;
    int min_in, max_in;      /* max_in -1: any number (Concat) */
    int n_out;               /* -1: num_outputs() decides (Split) */
    wf__attr_def attrs[WF__MAX_ATTRS]; /* terminated by name == NULL */
    /* Checks inputs and attributes and fills ctx->out. Errors come from wf__infer_fail. */
    wf_status *(*infer)(wf__infer_ctx *ctx);
    /* Optional: FLOPs and bytes moved for known shapes; NULL = one flop per output element and
     * the bytes of inputs and outputs. */
    void (*cost)(const wf__infer_ctx *ctx, double *flops, double *bytes);
    /* Optional, for n_out == -1. */
    int (*num_outputs)(const wf__attr *attrs, int n_in);
    unsigned flags;
    /* Inputs that kernels read on the host (shapes, axes, sizes: bit i for input i). The placer keeps
     * the nodes that only compute such arguments on the CPU, next to the host. */
    uint32_t host_in;
    /* Inputs whose dtype and shape alone kernels read, never their data (Shape, Size: bit i for input
     * i): consumed where they are, so they are never copied to the node's device. */
    uint32_t meta_in;
    /* Optional: reverse-mode gradient (graph/grad.c builds the backward graph with it). */
    wf_status *(*grad)(wf__grad_ctx *ctx);
};

/* Attribute getters by name (the op's table must declare it; asserts otherwise). */
const wf__attr *wf__attr_get(const wf__op_def *op, const wf__attr *attrs, const char *name);
int64_t wf__attr_i(const wf__op_def *op, const wf__attr *attrs, const char *name);
double wf__attr_f(const wf__op_def *op, const wf__attr *attrs, const char *name);
const char *wf__attr_s(const wf__op_def *op, const wf__attr *attrs, const char *name);

#endif
