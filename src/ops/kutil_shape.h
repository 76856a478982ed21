/*
 * Host-side shape planning shared by the CPU kernels and the device plugins: axis normalisation,
 * strides, Reshape / Squeeze / Unsqueeze / Expand output dims, Transpose perms, Slice and Split plans,
 * DepthToSpace / SpaceToDepth as one 6-D transposing copy, and Compress's output dims. Header-only and
 * free of libweft calls because the plugins cannot link libweft (the core has wf__norm_axis).
 */
#ifndef WF_DEVICE_KUTIL_SHAPE_H
#define WF_DEVICE_KUTIL_SHAPE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"

/* axis in [-rank, rank) as an index in [0, rank); false when out of range. */
static inline bool wf__ku_norm_axis(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

/* Row-major strides (in elements) of dims. */
static inline void wf__ku_strides(int rank, const int64_t *dims, int64_t *st) { wf__strides_wrapping(rank, dims, st); }

/* What wf__ku_reshape_dims found wrong, in the order the entries are checked. */
enum {
    WF__KU_RESHAPE_OK,
    WF__KU_RESHAPE_TWO_NEG,   /* more than one -1 */
    WF__KU_RESHAPE_NEG_DIM,   /* an entry below -1 */
    WF__KU_RESHAPE_COPY_OOR,  /* a 0 copies input dim *bad, which does not exist */
    WF__KU_RESHAPE_ZERO_NEG,  /* 0 and -1 together with allowzero */
    WF__KU_RESHAPE_INFER,     /* -1 cannot be inferred */
    WF__KU_RESHAPE_COUNT,     /* the element counts differ; *prod holds the shape's */
};

/* Reshape's output dims d from the n-entry shape v (ONNX: 0 copies the input dim unless allowzero, one
 * -1 is inferred). Returns a WF__KU_RESHAPE_* code. */
static inline int wf__ku_reshape_dims(int xrank, const int64_t *xdims, int64_t xsize, int n, const int64_t *v,
                                      bool allowzero, int64_t *d, int64_t *prod, int *bad)
{
    int neg = -1;
    bool zero = false;
    *prod = 1;
    for (int i = 0; i < n; i++) {
        d[i] = v[i];
        if (v[i] == -1) {
            if (neg >= 0) return WF__KU_RESHAPE_TWO_NEG;
            neg = i;
            continue;
        }
        if (v[i] < -1) return WF__KU_RESHAPE_NEG_DIM;
        if (v[i] == 0) {
            zero = true;
            if (!allowzero) {
                if (i >= xrank) {
                    *bad = i;
                    return WF__KU_RESHAPE_COPY_OOR;
                }
                d[i] = xdims[i];
            }
        }
        *prod *= d[i];
    }
    if (allowzero && zero && neg >= 0) return WF__KU_RESHAPE_ZERO_NEG;
    if (neg >= 0) {
        if (*prod == 0 || xsize % *prod) return WF__KU_RESHAPE_INFER;
        d[neg] = xsize / *prod;
    } else if (*prod != xsize) {
        return WF__KU_RESHAPE_COUNT;
    }
    return WF__KU_RESHAPE_OK;
}

/* Squeeze's output dims: drop the n axes v (v NULL: every size-1 dim). Returns 0, 1 when the axes are out
 * of range or repeated, 2 when axis *bad is not of size 1. */
static inline int wf__ku_squeeze_dims(int xrank, const int64_t *xdims, int n, const int64_t *v, int64_t *d, int *rank,
                                      int *bad)
{
    bool drop[64] = {0};
    if (v) {
        for (int i = 0; i < n; i++) {
            int a;
            if (!wf__ku_norm_axis(v[i], xrank, &a) || drop[a]) return 1;
            if (xdims[a] != 1) {
                *bad = a;
                return 2;
            }
            drop[a] = true;
        }
    } else {
        for (int i = 0; i < xrank; i++) drop[i] = xdims[i] == 1;
    }
    int r = 0;
    for (int i = 0; i < xrank; i++)
        if (!drop[i]) d[r++] = xdims[i];
    *rank = r;
    return 0;
}

/* Unsqueeze's output dims (rank xrank + n, which the caller has bounded): -1, or the index in v of an axis
 * out of range or repeated. */
static inline int wf__ku_unsqueeze_dims(int xrank, const int64_t *xdims, int n, const int64_t *v, int64_t *d)
{
    int r = xrank + n;
    bool ins[64] = {0};
    for (int i = 0; i < n; i++) {
        int a;
        if (!wf__ku_norm_axis(v[i], r, &a) || ins[a]) return i;
        ins[a] = true;
    }
    for (int i = 0, j = 0; i < r; i++) d[i] = ins[i] ? 1 : xdims[j++];
    return -1;
}

/* Transpose's perm from the n-entry attribute ints (n == 0: reversed axes). Returns 0, 1 when n is not r,
 * 2 when ints is not a permutation. */
static inline int wf__ku_perm(int n, const int64_t *ints, int r, int *perm)
{
    bool seen[64] = {0};
    if (n == 0) {
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
        return 0;
    }
    if (n != r) return 1;
    for (int i = 0; i < r; i++) {
        int a;
        if (!wf__ku_norm_axis(ints[i], r, &a) || seen[a]) return 2;
        seen[a] = true;
        perm[i] = a;
    }
    return 0;
}

/* Expand's output dims d (rank returned) of x broadcast to the n-entry shape v, and the source stride st of
 * each output axis (0 where it broadcasts) from x's strides xst in the caller's unit (xst NULL: no st).
 * *same: the output has x's shape. Returns -1 when v does not broadcast with x. */
static inline int wf__ku_expand_dims(int xrank, const int64_t *xdims, const int64_t *xst, int n, const int64_t *v,
                                     int64_t *d, int64_t *st, bool *same)
{
    int r = n > xrank ? n : xrank;
    *same = r == xrank;
    for (int i = 0; i < r; i++) {
        int xi = i - (r - xrank), si = i - (r - n);
        int64_t a = xi >= 0 ? xdims[xi] : 1, s = si >= 0 ? v[si] : 1;
        if (s < 0 || (a != s && a != 1 && s != 1)) return -1;
        d[i] = a == 1 ? s : a;
        if (xst) st[i] = (xi >= 0 && a != 1) ? xst[xi] : 0;
        if (d[i] != a) *same = false;
    }
    return r;
}

/* Slice's omitted optional inputs: axes 0..ns-1 when !has_ax, steps of 1 when !has_sp (na / nsp then
 * count ns). False when starts (ns), ends (ne), axes (*na) and steps (*nsp) differ in length. */
static inline bool wf__ku_slice_defaults(int ns, int ne, bool has_ax, int64_t *ax, int *na, bool has_sp, int64_t *sp,
                                         int *nsp)
{
    if (!has_ax) {
        *na = ns;
        for (int i = 0; i < ns; i++) ax[i] = i;
    }
    if (!has_sp) {
        *nsp = ns;
        for (int i = 0; i < ns; i++) sp[i] = 1;
    }
    return ne == ns && *na == ns && *nsp == ns;
}

/* One axis of Slice: the number of elements from start *s to end e (exclusive) by step (!= 0) over an
 * axis of dim elements, ONNX's clamping included; *s becomes the clamped start. Any int64 start, end
 * and step are accepted without overflow. */
static inline int64_t wf__ku_slice_span(int64_t dim, int64_t step, int64_t *s, int64_t e)
{
    int64_t b = *s;
    if (b < 0) b += dim; /* dim >= 0: a negative plus a non-negative cannot overflow */
    if (e < 0) e += dim;
    int64_t n;
    if (step > 0) {
        b = b < 0 ? 0 : b > dim ? dim : b;
        e = e < 0 ? 0 : e > dim ? dim : e;
        n = e > b ? (e - b - 1) / step + 1 : 0;
    } else if (dim == 0) {
        b = 0;
        n = 0;
    } else {
        b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
        e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
        int64_t mag = step == INT64_MIN ? INT64_MAX : -step; /* b - e - 1 < dim, so the quotient is the same */
        n = b > e ? (b - e - 1) / mag + 1 : 0;
    }
    *s = b;
    return n;
}

/* Range's length for integer start s, limit l and delta d (!= 0): false when it does not fit in int64. */
static inline bool wf__ku_range_count_i64(int64_t s, int64_t l, int64_t d, int64_t *n)
{
    if (d == 0) return false;
    /* unsigned differences: l - s of two int64 always fits in uint64 when l > s */
    uint64_t diff, mag = d > 0 ? (uint64_t)d : (uint64_t)0 - (uint64_t)d;
    if (d > 0 ? l <= s : s <= l) {
        *n = 0;
        return true;
    }
    diff = d > 0 ? (uint64_t)l - (uint64_t)s : (uint64_t)s - (uint64_t)l;
    uint64_t c = (diff - 1) / mag + 1;
    if (c > (uint64_t)INT64_MAX) return false;
    *n = (int64_t)c;
    return true;
}

/* Element i of an integer Range, computed without signed overflow (s + i*d lies between s and the limit). */
static inline int64_t wf__ku_range_at_i64(int64_t s, int64_t d, int64_t i)
{
    return (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d);
}

/* Range's length for floating start, limit and delta: false when it is not finite or reaches 2^62
 * elements (no tensor that long exists) or delta is 0. */
static inline bool wf__ku_range_count_f64(double s, double l, double d, int64_t *n)
{
    if (d == 0) return false;
    return wf__f64_to_count(ceil((l - s) / d), WF__MAX_TENSOR_BYTES - 1, true, n);
}

/* Tile's output dims: d[i] = xdims[i] * rep[i]. Returns 0, 1 when rep[*bad] is negative, 2 when the
 * product of axis *bad overflows int64. */
static inline int wf__ku_tile_dims(int r, const int64_t *xdims, const int64_t *rep, int64_t *d, int *bad)
{
    for (int i = 0; i < r; i++) {
        *bad = i;
        if (rep[i] < 0) return 1;
        if (wf__mul_overflow_i64(xdims[i], rep[i], &d[i])) return 2;
    }
    return 0;
}

/* Slice's output dims d and source walk: so holds x's strides (any unit) on entry and the stepped strides
 * on return, *off the start offset in that unit. Returns 0, 1 when axis ax[*bad] is out of range or
 * repeated, 2 when step *bad is 0. */
static inline int wf__ku_slice_plan(int r, const int64_t *xdims, int ns, const int64_t *st, const int64_t *en,
                                    const int64_t *ax, const int64_t *sp, int64_t *d, int64_t *so, int64_t *off,
                                    int *bad)
{
    bool touched[64] = {0};
    memcpy(d, xdims, sizeof(int64_t) * (size_t)r);
    *off = 0;
    for (int i = 0; i < ns; i++) {
        int a;
        *bad = i;
        if (!wf__ku_norm_axis(ax[i], r, &a) || touched[a]) return 1;
        touched[a] = true;
        int64_t dim = xdims[a], step = sp[i], s = st[i], sz;
        if (step == 0) return 2;
        sz = wf__ku_slice_span(dim, step, &s, en[i]);
        d[a] = sz;
        if (sz > 0) *off += s * so[a];
        /* one element never steps; otherwise |step| * (sz - 1) < dim keeps the product in range */
        so[a] = sz > 1 ? so[a] * step : 0;
    }
    return 0;
}

/* Pad's output dims d and begin pads pb over x's dims from the 2*na pads p of axes ax. Returns 0, 1 when
 * axis ax[*bad] is out of range or repeated, 2 when the pads crop axis *bad below zero, 3 when a mode
 * other than constant would pad the empty axis *bad, 4 when the padded size of axis *bad overflows int64. */
static inline int wf__ku_pad_plan(int r, const int64_t *xdims, int na, const int64_t *ax, const int64_t *p,
                                  bool constant, int64_t *d, int64_t *pb, int *bad)
{
    bool touched[64] = {0};
    memcpy(d, xdims, sizeof(int64_t) * (size_t)r);
    for (int i = 0; i < r; i++) pb[i] = 0;
    for (int i = 0; i < na; i++) {
        int a;
        *bad = i;
        if (!wf__ku_norm_axis(ax[i], r, &a) || touched[a]) return 1;
        touched[a] = true;
        pb[a] = p[i];
        *bad = a;
        if (wf__add_overflow_i64(xdims[a], p[i], &d[a]) || wf__add_overflow_i64(d[a], p[i + na], &d[a])) return 4;
        if (d[a] < 0) return 2;
        if (!constant && xdims[a] == 0 && d[a] > 0) return 3;
    }
    return 0;
}

/* Split's sizes without a 'split' input: n near-equal parts of dim, the last one smaller. False when dim
 * cannot give n parts that way. */
static inline bool wf__ku_split_even(int64_t dim, int n, int64_t *sizes)
{
    int64_t chunk = (dim + n - 1) / n, last = dim - chunk * (n - 1);
    if (last < 0) return false;
    for (int i = 0; i < n; i++) sizes[i] = i == n - 1 ? last : chunk;
    return true;
}

/* DepthToSpace (d2s) or SpaceToDepth of the 4-D dims xd with block bs, mode DCR (dcr) or CRD. od: the
 * 6-D walk over the output in order, st: the input's element strides along it, yd: the output dims.
 * Returns false when xd does not divide into blocks of bs. */
static inline bool wf__ku_d2s_plan(bool d2s, bool dcr, int64_t bs, const int64_t *xd, int64_t *od, int64_t *st,
                                   int64_t *yd)
{
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], bb, hb, wb, cb;
    /* a block size whose products overflow cannot describe any tensor */
    if (bs < 1 || wf__mul_overflow_i64(bs, bs, &bb)) return false;
    if ((d2s && C % bb) || (!d2s && (H % bs || W % bs))) return false;
    if (d2s && (wf__mul_overflow_i64(H, bs, &hb) || wf__mul_overflow_i64(W, bs, &wb))) return false;
    if (!d2s && wf__mul_overflow_i64(C, bb, &cb)) return false;
    int64_t sd[6];
    int perm[6];
    if (d2s) {
        int64_t c2 = C / bb;
        int64_t s_dcr[6] = {N, bs, bs, c2, H, W}, s_crd[6] = {N, c2, bs, bs, H, W};
        int p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3};
        memcpy(sd, dcr ? s_dcr : s_crd, sizeof sd);
        memcpy(perm, dcr ? p_dcr : p_crd, sizeof perm);
        int64_t o[4] = {N, c2, hb, wb};
        memcpy(yd, o, sizeof o);
    } else {
        int64_t s6[6] = {N, C, H / bs, bs, W / bs, bs};
        /* DCR puts the block offset outermost in the new channel dim, CRD innermost */
        int pd[6] = {0, 3, 5, 1, 2, 4}, pc[6] = {0, 1, 3, 5, 2, 4};
        memcpy(sd, s6, sizeof sd);
        memcpy(perm, dcr ? pd : pc, sizeof perm);
        int64_t o[4] = {N, cb, H / bs, W / bs};
        memcpy(yd, o, sizeof o);
    }
    int64_t sst[6], acc = 1;
    for (int i = 5; i >= 0; i--) {
        sst[i] = acc;
        acc *= sd[i];
    }
    for (int i = 0; i < 6; i++) {
        od[i] = sd[perm[i]];
        st[i] = sst[perm[i]];
    }
    return true;
}

/* Compress's output dims: x's with dims[ax] = nnz, or [nnz] when ax < 0 (flattened). Returns the rank. */
static inline int wf__ku_compress_dims(int rank, const int64_t *dims, int ax, int64_t nnz, int64_t *d)
{
    if (ax < 0) {
        d[0] = nnz;
        return 1;
    }
    memcpy(d, dims, sizeof(int64_t) * (size_t)rank);
    d[ax] = nnz;
    return rank;
}

/* GatherElements / ScatterElements: turns the n index values v (indices of dims idims, along axis ax of
 * data of dims xdims) into element offsets in data, in place. Returns -1, or the position of the first
 * value outside [-D, D) for D = xdims[ax] (that value is left as it was). */
static inline int64_t wf__ku_elements_offsets(int rank, const int64_t *xdims, const int64_t *idims, int ax, int64_t *v,
                                              int64_t n)
{
    int64_t xst[64], D = xdims[ax];
    wf__ku_strides(rank, xdims, xst);
    for (int64_t i = 0; i < n; i++) {
        int64_t val = v[i], r = i, o = 0;
        if (val < -D || val >= D) return i;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t c = r % idims[d];
            r /= idims[d];
            o += (d == ax ? (val < 0 ? val + D : val) : c) * xst[d];
        }
        v[i] = o;
    }
    return -1;
}

static inline int wf__ku_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether the n offsets are all distinct (sorts them): a scatter without duplicates may run in parallel. */
static inline bool wf__ku_all_distinct(int64_t *off, int64_t n)
{
    qsort(off, (size_t)n, sizeof(int64_t), wf__ku_cmp_i64);
    for (int64_t i = 1; i < n; i++)
        if (off[i] == off[i - 1]) return false;
    return true;
}

#endif
