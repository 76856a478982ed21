/*
 * Host-side elementwise planning shared by the CPU kernels and the device plugins: numpy broadcasting and
 * the coalesced broadcast walk, and parameter folding so integer inputs get the CPU kernels' results
 * without the device redoing float maths per element. Header-only and free of
 * libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_ELEMENTWISE_H
#define WF_DEVICE_KUTIL_ELEMENTWISE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "weft/weft.h"

/* numpy broadcasting of n shapes (ranks[i], dims[i]) into (*rank, out); false when they are incompatible
 * (out is then incomplete). */
static inline bool wf__ku_bcast_dims(int n, const int *ranks, const int64_t *const *dims, int *rank, int64_t *out)
{
    int r = 0;
    for (int i = 0; i < n; i++)
        if (ranks[i] > r) r = ranks[i];
    *rank = r;
    for (int d = 0; d < r; d++) {
        int64_t v = 1;
        for (int i = 0; i < n; i++) {
            int j = d - (r - ranks[i]);
            int64_t e = j >= 0 ? dims[i][j] : 1;
            if (e == 1) continue;
            if (v != 1 && v != e) return false;
            v = e;
        }
        out[d] = v;
    }
    return true;
}

/* The walk of n (at most 3) inputs broadcast over the output (orank, odims): dims of 1 dropped and
 * neighbours merged wherever every input walks them as one stretch, so same shapes and scalars become
 * rank 1. dims: innermost last; st[i][d]: input i's stride in elements (0: broadcast). Returns the rank
 * (at least 1). */
static inline int wf__ku_bcast_walk(int n, const int *ranks, const int64_t *const *idims, int orank,
                                    const int64_t *odims, int64_t *dims, int64_t st[][WF_MAX_RANK])
{
    int64_t cst[3][WF_MAX_RANK]; /* contiguous strides aligned to the output's dims; 0 where broadcast */
    for (int i = 0; i < n; i++) {
        int64_t s = 1;
        for (int d = orank - 1; d >= 0; d--) {
            int j = d - (orank - ranks[i]);
            int64_t v = j >= 0 ? idims[i][j] : 1;
            cst[i][d] = v == 1 ? 0 : s;
            s *= v;
        }
    }
    /* built innermost first, then flipped */
    int64_t rd[WF_MAX_RANK], rs[3][WF_MAX_RANK];
    int r = 0;
    for (int d = orank - 1; d >= 0; d--) {
        if (odims[d] == 1) continue;
        bool merge = r > 0;
        for (int i = 0; i < n && merge; i++) merge = cst[i][d] == rs[i][r - 1] * rd[r - 1];
        if (merge) {
            rd[r - 1] *= odims[d];
        } else {
            rd[r] = odims[d];
            for (int i = 0; i < n; i++) rs[i][r] = cst[i][d];
            r++;
        }
    }
    if (r == 0) {
        rd[0] = 1;
        for (int i = 0; i < n; i++) rs[i][0] = 0;
        r = 1;
    }
    for (int d = 0; d < r; d++) {
        dims[d] = rd[r - 1 - d];
        for (int i = 0; i < n; i++) st[i][d] = rs[i][r - 1 - d];
    }
    return r;
}

/* Element i of host buffer p as an integer when t is an integer dtype (bool included); false otherwise. */
static inline bool wf__ku_load_int(const void *p, wf_dtype t, int64_t i, int64_t *v)
{
    switch (t) {
    case WF_I8: *v = ((const int8_t *)p)[i]; return true;
    case WF_U8: case WF_BOOL: *v = ((const uint8_t *)p)[i]; return true;
    case WF_I16: *v = ((const int16_t *)p)[i]; return true;
    case WF_I32: *v = ((const int32_t *)p)[i]; return true;
    case WF_I64: *v = ((const int64_t *)p)[i]; return true;
    default: return false;
    }
}

/* A double to int64, saturating; NaN never reaches here. */
static inline int64_t wf__ku_sat_i64(double v)
{
    return v <= -9.2233720368547758e18 ? INT64_MIN : v >= 9.2233720368547758e18 ? INT64_MAX : (int64_t)v;
}

/* Shrink (lambd l, bias b) for integer inputs as four integers: v < i[0] and v > i[1] are the shrunk
 * ranges, and b is i[2] plus a fraction of sign i[3]. */
static inline void wf__ku_shrink_int(double l, double b, int64_t *i)
{
    if (l != l || b != b) {
        /* NaN: the CPU's comparisons all fail (l) or its conversions give 0 (b): every result is 0 */
        i[0] = INT64_MIN;
        i[1] = INT64_MAX;
        i[2] = i[3] = 0;
        return;
    }
    /* for an integer v: v < -l iff v < ceil(-l), and v > l iff v > floor(l) */
    i[0] = wf__ku_sat_i64(ceil(-l));
    i[1] = wf__ku_sat_i64(floor(l));
    double bi = trunc(b);
    i[2] = bi <= -9.2233720368547758e18 ? -INT64_MAX : wf__ku_sat_i64(bi);
    i[3] = b > bi ? 1 : b < bi ? -1 : 0;
}

#endif
