/*
 * An attribute value as shape inference and kernels read it. The graph stores one per declared
 * attribute of a node (graph/op.h declares the op table that names them); the op-math helpers in
 * src/ops/ take these values without knowing the graph.
 */
#ifndef WF_OPS_ATTR_H
#define WF_OPS_ATTR_H

#include "core/core.h"

typedef struct wf__op_def wf__op_def;

/* An attribute value on a node; index k matches op->attrs[k]. */
typedef struct wf__attr {
    bool set;        /* given by the user (else the default is in place) */
    wf_attr_type type;
    int64_t i;
    double f;
    int n;
    int64_t *ints;
    double *floats;
    char *s;
    wf_tensor *t;
} wf__attr;

#endif
