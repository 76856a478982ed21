/*
 * Host-side checks of Conv2D / ConvTranspose2D shared by the device plugins: how X's channels, W and
 * group fit together and the output channel count they give. The window itself is graph/nn_window.h.
 * Header-only and free of libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_CONV_H
#define WF_DEVICE_KUTIL_CONV_H

#include <stdbool.h>
#include <stdint.h>

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

#endif
