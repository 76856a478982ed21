/*
 * Host-side parameter folding of elementwise ops shared by the device plugins, so integer inputs get
 * the CPU kernels' results without the device redoing float maths per element. Header-only and free of
 * libweft calls because the plugins cannot link libweft.
 */
#ifndef WF_DEVICE_KUTIL_ELEMENTWISE_H
#define WF_DEVICE_KUTIL_ELEMENTWISE_H

#include <math.h>
#include <stdint.h>

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
