/*
 * Shared between the misc op group's inference (ops_misc.c) and its CPU kernels (k_misc_*.c): the
 * Einsum equation parser and Resize's output-shape rule, so building and running agree on both.
 */
#ifndef WF_GRAPH_OPS_MISC_H
#define WF_GRAPH_OPS_MISC_H

#include "graph/op.h"

/* 52 letters plus one label per broadcast (ellipsis) dim. */
#define WF__EINSUM_LABELS (52 + WF_MAX_RANK)
#define WF__EINSUM_MAX_IN 16

typedef struct wf__einsum {
    int n_in;
    int in_rank[WF__EINSUM_MAX_IN];
    int in_label[WF__EINSUM_MAX_IN][WF_MAX_RANK]; /* label of each axis of each input */
    int out_rank;
    int out_label[WF_MAX_RANK];
    int n_labels;                                   /* labels in use are [0, n_labels) */
    int64_t label_dim[WF__EINSUM_LABELS];           /* -1 while unknown */
    bool in_out[WF__EINSUM_LABELS];                 /* label appears in the output */
} wf__einsum;

/* Parses `eq` for n_in inputs with the given ranks and dims (dims may be -1 while building). Ellipsis
 * dims broadcast like numpy; letter dims must agree. On error writes a message into err and returns
 * false. */
bool wf__einsum_parse(const char *eq, int n_in, const int *ranks, const int64_t (*dims)[WF_MAX_RANK],
                      wf__einsum *e, char *err, size_t errlen);

/* Resize's output shape and per-axis scales for input dims x[0..rank). scales (n_scales values) or
 * sizes (n_sizes values) cover every axis, or the axes in `axes` (n_axes, already normalised) when
 * n_axes > 0. policy is keep_aspect_ratio_policy. Fills out[rank] and scale[rank]; returns false with
 * a message in err on bad values. */
bool wf__resize_shape(int rank, const int64_t *x, const int *axes, int n_axes, const double *scales,
                      int n_scales, const int64_t *sizes, int n_sizes, const char *policy, int64_t *out,
                      double *scale, char *err, size_t errlen);

#endif
