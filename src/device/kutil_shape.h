/*
 * Host-side shape planning shared by the CPU kernels and the device plugins: axis normalisation,
 * DepthToSpace / SpaceToDepth as one 6-D transposing copy, and Compress's output dims. Header-only and
 * free of libweft calls because the plugins cannot link libweft (the core has wf__norm_axis).
 */
#ifndef WF_DEVICE_KUTIL_SHAPE_H
#define WF_DEVICE_KUTIL_SHAPE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* axis in [-rank, rank) as an index in [0, rank); false when out of range. */
static inline bool wf__ku_norm_axis(int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank) return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

/* DepthToSpace (d2s) or SpaceToDepth of the 4-D dims xd with block bs, mode DCR (dcr) or CRD. od: the
 * 6-D walk over the output in order, st: the input's element strides along it, yd: the output dims.
 * Returns false when xd does not divide into blocks of bs. */
static inline bool wf__ku_d2s_plan(bool d2s, bool dcr, int64_t bs, const int64_t *xd, int64_t *od, int64_t *st,
                                   int64_t *yd)
{
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3];
    if (bs < 1 || (d2s && C % (bs * bs)) || (!d2s && (H % bs || W % bs))) return false;
    int64_t sd[6];
    int perm[6];
    if (d2s) {
        int64_t c2 = C / (bs * bs);
        int64_t s_dcr[6] = {N, bs, bs, c2, H, W}, s_crd[6] = {N, c2, bs, bs, H, W};
        int p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3};
        memcpy(sd, dcr ? s_dcr : s_crd, sizeof sd);
        memcpy(perm, dcr ? p_dcr : p_crd, sizeof perm);
        int64_t o[4] = {N, c2, H * bs, W * bs};
        memcpy(yd, o, sizeof o);
    } else {
        int64_t s6[6] = {N, C, H / bs, bs, W / bs, bs};
        /* DCR puts the block offset outermost in the new channel dim, CRD innermost */
        int pd[6] = {0, 3, 5, 1, 2, 4}, pc[6] = {0, 1, 3, 5, 2, 4};
        memcpy(sd, s6, sizeof sd);
        memcpy(perm, dcr ? pd : pc, sizeof perm);
        int64_t o[4] = {N, C * bs * bs, H / bs, W / bs};
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

#endif
