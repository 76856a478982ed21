/*
 * Host-side planning of the reduce family shared by the CPU kernels and the device plugins: Reduce*
 * axes and output shape, the merged kept/reduced groups a device reduction walks, the outer/axis/inner
 * split of Softmax and ArgMax, LayerNormalization's rows and Scale/B broadcasting, and FusedBatchNorm's
 * input checks and channel geometry.
 * Header-only and free of libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_REDUCE_H
#define WF_DEVICE_KUTIL_REDUCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/kutil_shape.h"
#include "ops/attr.h"
#include "weft/weft.h"

enum { WF__KU_AXES_OK = 0, WF__KU_AXES_RANGE = 1, WF__KU_AXES_REPEATED = 2 };

/* Marks the n axes in red[0..rank) (cleared first). Returns WF__KU_AXES_OK, or the fault with *bad the
 * index into axes of the offending value. */
static inline int wf__ku_axes_mark(const int64_t *axes, int n, int rank, bool *red, int *bad)
{
    for (int i = 0; i < rank; i++) red[i] = false;
    for (int i = 0; i < n; i++) {
        int a;
        *bad = i;
        if (!wf__ku_norm_axis(axes[i], rank, &a)) return WF__KU_AXES_RANGE;
        if (red[a]) return WF__KU_AXES_REPEATED;
        red[a] = true;
    }
    return WF__KU_AXES_OK;
}

/* The axes of a Reduce* node when given as the attribute: copies them to axes[*n] (*n = 0 when the
 * attribute is not set; the caller then reads input 1 if has_input). Returns false with a message in err
 * when both are given or there are too many. */
static inline bool wf__ku_axes_attr(const wf__attr *attr, bool has_input, int64_t *axes, int *n, char *err, size_t en)
{
    *n = 0;
    if (!attr || !attr->set) return true;
    if (has_input) {
        snprintf(err, en, "axes given both as an attribute and as input 1; give one of them");
        return false;
    }
    if (attr->n > WF_MAX_RANK) {
        snprintf(err, en, "too many axes (%d)", attr->n);
        return false;
    }
    *n = attr->n;
    memcpy(axes, attr->ints, (size_t)attr->n * sizeof *axes);
    return true;
}

/* Output dims of a reduction over red[] (keepdims: reduced axes stay as 1) and the number of elements
 * each output folds. */
static inline void wf__ku_reduce_out(int rank, const int64_t *dims, const bool *red, bool keepdims, int64_t *ydims,
                                     int *yr, int64_t *count)
{
    *yr = 0;
    *count = 1;
    for (int i = 0; i < rank; i++) {
        if (!red[i]) ydims[(*yr)++] = dims[i];
        else {
            *count *= dims[i];
            if (keepdims) ydims[(*yr)++] = 1;
        }
    }
}

/* A reduction as the device kernels walk it: the kept groups (dims kd, element strides ks, nk of them)
 * enumerate the outputs, each output folds the reduced groups (rd, rs, nr >= 1), count elements. */
typedef struct wf__ku_red_plan {
    int nk, nr;
    int64_t kd[WF_MAX_RANK], ks[WF_MAX_RANK], rd[WF_MAX_RANK], rs[WF_MAX_RANK];
    int64_t count;
} wf__ku_red_plan;

/* Adjacent axes of the same role merge into one group and size-1 axes play no part, so the kernels
 * index as few dims as possible. With only size-1 axes reduced each output folds one element (still
 * finalised, e.g. ReduceL2's sqrt). */
static inline void wf__ku_reduce_plan(int rank, const int64_t *dims, const bool *red, wf__ku_red_plan *p)
{
    int64_t strides[WF_MAX_RANK], acc = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = acc;
        acc *= dims[i];
    }
    memset(p, 0, sizeof *p);
    p->count = 1;
    int last = -1; /* role of the previous group: 0 kept, 1 reduced */
    for (int i = 0; i < rank; i++) {
        int role = red[i];
        if (role) p->count *= dims[i];
        if (dims[i] == 1) continue;
        int64_t *dd = role ? p->rd : p->kd, *ss = role ? p->rs : p->ks;
        int *cnt = role ? &p->nr : &p->nk;
        if (last == role) {
            dd[*cnt - 1] *= dims[i];
            ss[*cnt - 1] = strides[i];
        } else {
            dd[*cnt] = dims[i];
            ss[*cnt] = strides[i];
            (*cnt)++;
        }
        last = role;
    }
    if (p->nr == 0) {
        p->rd[0] = 1;
        p->rs[0] = 1;
        p->nr = 1;
    }
}

/* dims as outer x dims[a] x inner around axis a (R = 1 for a scalar). */
static inline void wf__ku_axis_split(int rank, const int64_t *dims, int a, int64_t *outer, int64_t *R, int64_t *inner)
{
    *outer = *R = *inner = 1;
    for (int i = 0; i < rank; i++) {
        if (i < a) *outer *= dims[i];
        else if (i == a) *R = dims[i];
        else *inner *= dims[i];
    }
}

/* ArgMax / ArgMin over axis a: the output dims (the axis dropped, or kept as 1) and the split around it. */
static inline void wf__ku_arg_plan(int rank, const int64_t *dims, int a, bool keepdims, int64_t *ydims, int *yr,
                                   int64_t *outer, int64_t *R, int64_t *inner)
{
    *yr = 0;
    for (int i = 0; i < rank; i++)
        if (i != a) ydims[(*yr)++] = dims[i];
        else if (keepdims) ydims[(*yr)++] = 1;
    wf__ku_axis_split(rank, dims, a, outer, R, inner);
}

/* LayerNormalization from axis a: rows normalised, each of D elements, and the dims of Mean/InvStdDev
 * (x's with the normalised dims as 1). */
static inline void wf__ku_ln_split(int rank, const int64_t *dims, int a, int64_t *rows, int64_t *D, int64_t *mdims)
{
    *rows = *D = 1;
    for (int i = 0; i < rank; i++) {
        if (i < a) *rows *= dims[i];
        else *D *= dims[i];
        mdims[i] = i < a ? dims[i] : 1;
    }
}

/* Whether LayerNormalization's Scale or B (p) broadcasts to x's normalised dims x.dims[a:]. */
static inline bool wf__ku_ln_param_fits(const wf_tensor *p, const wf_tensor *x, int a)
{
    int nr = x->rank - a;
    if (p->rank > nr) return false;
    for (int d = 0; d < p->rank; d++) {
        int64_t pd = p->dims[p->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
        if (pd != xd && pd != 1) return false;
    }
    return true;
}

/* p's element strides over x.dims[a:] (0 where it broadcasts). Returns whether p holds exactly those
 * dims, so element d of a row is at d. */
static inline bool wf__ku_ln_param_strides(const wf_tensor *p, const wf_tensor *x, int a, int64_t *st)
{
    int nr = x->rank - a;
    int64_t acc = 1, ps[WF_MAX_RANK];
    for (int i = p->rank - 1; i >= 0; i--) {
        ps[i] = acc;
        acc *= p->dims[i];
    }
    bool same = true;
    for (int i = 0; i < nr; i++) {
        int pi = i - (nr - p->rank);
        st[i] = pi >= 0 && p->dims[pi] != 1 ? ps[pi] : 0;
        if (pi < 0 ? x->dims[a + i] != 1 : p->dims[pi] != x->dims[a + i]) same = false;
    }
    return same;
}

/* FusedBatchNorm (x = in[0], per-channel inputs 1..2) and FusedBatchNormGrad (dy = in[0], x = in[1],
 * per-channel inputs 2..6, the last two optional): the index of the first input at fault, or -1. x
 * needs rank >= 2, dy x's dtype and shape, and each per-channel input present x's dtype and one value
 * per channel (x's dim 1). Graph inference checks this first; a kernel never trusts it. */
static inline int wf__ku_fbn_bad_input(const wf_tensor *const *in, int n_in, bool grad)
{
    int ix = grad ? 1 : 0;
    const wf_tensor *x = in[ix], *dy = in[0];
    if (x->rank < 2) return ix;
    if (grad) {
        bool same = dy->dtype == x->dtype && dy->rank == x->rank;
        for (int d = 0; same && d < x->rank; d++) same = dy->dims[d] == x->dims[d];
        if (!same) return 0;
    }
    for (int i = ix + 1; i < n_in; i++) {
        const wf_tensor *p = in[i];
        if (p && (p->dtype != x->dtype || p->rank != 1 || p->dims[0] != x->dims[1])) return i;
    }
    return -1;
}

/* The message for wf__ku_fbn_bad_input's answer bad: xs and ps describe x and the input at fault
 * (dtype then shape, as the backend prints them); pname names the inputs. The wording is graph
 * inference's (src/graph/ops_reduce.c), which a run also applies to the fed shapes first. */
static inline void wf__ku_fbn_message(const wf_tensor *const *in, int bad, bool grad, const char *const *pname,
                                      const char *xs, const char *ps, char *msg, size_t n)
{
    const wf_tensor *x = in[grad ? 1 : 0];
    if (in[bad] == x) snprintf(msg, n, "input x %s must have rank >= 2 (N, C, ...)", xs);
    else if (grad && bad == 0) snprintf(msg, n, "dy %s must have the dtype and shape of x %s", ps, xs);
    else if (in[bad]->dtype != x->dtype) snprintf(msg, n, "%s %s must have the dtype of x %s", pname[bad], ps, xs);
    else snprintf(msg, n, "%s %s must be 1-D with one value per channel (dim 1) of x %s", pname[bad], ps, xs);
}

/* x [N, C, S...] as N, C and S, the product of the dims after the channel */
static inline void wf__ku_fbn_geom(const wf_tensor *x, int64_t *N, int64_t *C, int64_t *S)
{
    *N = x->dims[0];
    *C = x->dims[1];
    *S = 1;
    for (int d = 2; d < x->rank; d++) *S *= x->dims[d];
}

#endif
