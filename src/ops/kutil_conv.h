/*
 * Host-side checks of Conv2D / ConvTranspose2D shared by the device plugins: how X's channels, W and
 * group fit together and the output channel count they give; and LpPool's N-d window plan. The 2-D
 * window itself is ops/nn_window.h.
 * Header-only and free of libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_CONV_H
#define WF_DEVICE_KUTIL_CONV_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops/attr.h"

/* W is [OC, C/g, kh, kw] for Conv2D and [C, OC/g, kh, kw] for ConvTranspose2D. Sets *oc and returns
 * whether the input channels c, W's dims and group g agree. */
static inline bool wf__ku_conv_channels(int64_t c, const int64_t *wdims, int64_t g, bool transposed, int64_t *oc)
{
    bool bad = g < 1 || c % g;
    if (!transposed) {
        *oc = wdims[0];
        bad = bad || *oc % g || wdims[1] * g != c;
    } else {
        *oc = wdims[1] * g;
        bad = bad || wdims[0] != c;
    }
    return !bad;
}

/* LpPool over the ns = rank - 2 spatial dims: sizes, begin pads, and the plane / window element counts. */
typedef struct wf__ku_pool_plan {
    int ns;
    int64_t in[8], out[8], k[8], s[8], d[8], pb[8];
    int64_t in_plane, out_plane, win;
} wf__ku_pool_plan;

/* ks, st, dl, pd: the kernel_shape, strides, dilations and pads attributes; auto_pad NULL means NOTSET;
 * xstr describes the input. Returns false with a message in err. */
static inline bool wf__ku_lppool_plan(int rank, const int64_t *dims, const char *xstr, const wf__attr *ks,
                                      const wf__attr *st, const wf__attr *dl, const wf__attr *pd, const char *auto_pad,
                                      bool ceil_mode, wf__ku_pool_plan *P, char *err, size_t en)
{
    const char *ap = auto_pad ? auto_pad : "NOTSET";
    memset(P, 0, sizeof *P);
    int ns = P->ns = rank - 2;
    P->in_plane = P->out_plane = P->win = 1;
    if (ns < 1 || ks->n != ns || ns > 8) {
        snprintf(err, en, "input %s does not fit kernel_shape (%d values)", xstr, ks->n);
        return false;
    }
    for (int i = 0; i < ns; i++) {
        int64_t xi = dims[i + 2], ki = ks->ints[i], si = st->n ? st->ints[i] : 1, di = dl->n ? dl->ints[i] : 1, oi, bi;
        int64_t ext = (ki - 1) * di + 1;
        if (ki < 1 || si < 1 || di < 1) {
            snprintf(err, en, "kernel_shape, strides and dilations must be positive");
            return false;
        }
        if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            oi = (xi + si - 1) / si;
            int64_t tot = (oi - 1) * si + ext - xi;
            if (tot < 0) tot = 0;
            bi = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
        } else {
            bool valid = !strcmp(ap, "VALID");
            bi = valid || !pd->n ? 0 : pd->ints[i];
            int64_t span = xi + (valid || !pd->n ? 0 : pd->ints[i] + pd->ints[i + ns]) - ext;
            if (span < 0) {
                snprintf(err, en, "kernel is larger than padded input %s", xstr);
                return false;
            }
            oi = (ceil_mode ? (span + si - 1) / si : span / si) + 1;
            /* the last window must start inside the input or its begin padding */
            if (ceil_mode && (oi - 1) * si >= xi + bi) oi--;
        }
        P->in[i] = xi, P->out[i] = oi, P->k[i] = ki, P->s[i] = si, P->d[i] = di, P->pb[i] = bi;
        P->in_plane *= xi;
        P->out_plane *= oi;
        P->win *= ki;
    }
    return true;
}

/* MaxUnpool's default output dims inf from X's dims xd (rank ks->n + 2) and its kernel_shape, strides and
 * pads attributes. */
static inline void wf__ku_unpool_dims(const int64_t *xd, const wf__attr *ks, const wf__attr *st, const wf__attr *pd,
                                      int64_t *inf)
{
    int nsp = ks->n;
    inf[0] = xd[0], inf[1] = xd[1];
    for (int i = 0; i < nsp; i++)
        inf[2 + i] = (xd[2 + i] - 1) * (st->n ? st->ints[i] : 1) + ks->ints[i] - (pd->n ? pd->ints[i] + pd->ints[nsp + i] : 0);
}

#endif
