/*
 * Host-side plans of the ops whose output size depends on the data, shared by the device plugins:
 * Compress's and Unique's axis split, the exclusive scan that turns per-chunk counts into output
 * offsets, and NonMaxSuppression's input checks and limits. Header-only and free of libweft calls
 * because the plugins cannot link libweft; messages go to a caller's buffer.
 */
#ifndef WF_DEVICE_KUTIL_SELECT_H
#define WF_DEVICE_KUTIL_SELECT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* An optional axis attribute normalised for a rank-`rank` input: *ax -1 when unset. */
static inline bool wf__ku_sel_axis(bool has_axis, int64_t axis, int rank, int *ax, char *err, size_t en)
{
    *ax = -1;
    if (!has_axis) return true;
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
        snprintf(err, en, "axis %" PRId64 " is out of range for a rank-%d input", axis, rank);
        return false;
    }
    *ax = (int)a;
    return true;
}

/* Compress of a cond_n-entry condition along the optional axis: D the entries selected from (all of x
 * when flattened), outer / inner the extents around the axis. */
static inline bool wf__ku_compress_plan(int rank, const int64_t *dims, int64_t size, bool has_axis, int64_t axis,
                                        int64_t cond_n, int *ax, int64_t *D, int64_t *outer, int64_t *inner, char *err,
                                        size_t en)
{
    if (!wf__ku_sel_axis(has_axis, axis, rank, ax, err, en)) return false;
    *D = *ax >= 0 ? dims[*ax] : size;
    *outer = *inner = 1;
    for (int d = 0; *ax >= 0 && d < rank; d++) {
        if (d < *ax) *outer *= dims[d];
        if (d > *ax) *inner *= dims[d];
    }
    if (cond_n > *D) {
        snprintf(err, en,
                 "condition of %" PRId64 " entries is longer than the %" PRId64 " entries of the input it selects from",
                 cond_n, *D);
        return false;
    }
    return true;
}

/* Unique along the optional axis: n slices of len elements, inner the extent after the axis (x flat: n
 * elements of length 1). */
static inline bool wf__ku_unique_plan(int rank, const int64_t *dims, int64_t size, bool has_axis, int64_t axis, int *ax,
                                      int64_t *n, int64_t *len, int64_t *inner, char *err, size_t en)
{
    if (!wf__ku_sel_axis(has_axis, axis, rank, ax, err, en)) return false;
    *inner = 1;
    if (*ax < 0) {
        *n = size, *len = 1;
    } else {
        *n = dims[*ax];
        for (int d = *ax + 1; d < rank; d++) *inner *= dims[d];
        *len = *n ? size / *n : 0;
    }
    return true;
}

/* Unique's first output: ng values (flat) or x with ng slices along ax. Returns its rank. */
static inline int wf__ku_unique_dims(int rank, const int64_t *dims, int ax, int64_t ng, int64_t *yd)
{
    if (ax < 0) {
        yd[0] = ng;
        return 1;
    }
    memcpy(yd, dims, sizeof(int64_t) * (size_t)rank);
    yd[ax] = ng;
    return rank;
}

/* Replaces the n counts in v by their exclusive prefix sums; returns the total. */
static inline int64_t wf__ku_exclusive_scan(int64_t *v, int64_t n)
{
    int64_t t = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = v[i];
        v[i] = t;
        t += c;
    }
    return t;
}

/* NonMaxSuppression: boxes [B, S, 4] and scores [B, C, S] of one dtype. */
static inline bool wf__ku_nms_shapes(int brank, const int64_t *bd, int srank, const int64_t *sd, bool same_dtype)
{
    return brank == 3 && bd[2] == 4 && srank == 3 && sd[0] == bd[0] && sd[2] == bd[1] && same_dtype;
}

/* The per-class output limit (absent: 0, clamped to [0, ns]) and the IoU threshold check. */
static inline bool wf__ku_nms_limits(bool has_max, int64_t max_in, double iou, int64_t ns, int64_t *max_out, char *err,
                                     size_t en)
{
    int64_t m = has_max ? max_in : 0;
    *max_out = m < 0 ? 0 : m > ns ? ns : m;
    if (iou < 0 || iou > 1) {
        snprintf(err, en, "iou_threshold %g is outside [0, 1]", iou);
        return false;
    }
    return true;
}

#endif
