/*
 * Shared between the misc op group's inference (ops_misc.c) and its CPU kernels (k_misc_*.c): Resize's
 * output-shape rule, so building and running agree on it (Einsum's parser is ops/kutil_einsum.h).
 */
#ifndef WF_GRAPH_OPS_MISC_H
#define WF_GRAPH_OPS_MISC_H

#include "ops/kutil_einsum.h"
#include "graph/op.h"

/* Resize's output shape and per-axis scales for input dims x[0..rank). scales (n_scales values) or
 * sizes (n_sizes values) cover every axis, or the axes in `axes` (n_axes, already normalised) when
 * n_axes > 0. policy is keep_aspect_ratio_policy. Fills out[rank] and scale[rank]; returns false with
 * a message in err on bad values. */
bool wf__resize_shape(int rank, const int64_t *x, const int *axes, int n_axes, const double *scales,
                      int n_scales, const int64_t *sizes, int n_sizes, const char *policy, int64_t *out,
                      double *scale, char *err, size_t errlen);

#endif
