/*
 * Host-side planning of Resize shared by shape inference, the CPU kernel and the OpenCL plugin: the
 * output shape from scales or sizes (keep_aspect_ratio_policy) and the per-axis tables of source taps
 * and weights that reproduce the ONNX reference. Header-only and free of libweft calls because the
 * plugins cannot link libweft; tables go into buffers the caller owns.
 */
#ifndef WF_DEVICE_KUTIL_RESIZE_H
#define WF_DEVICE_KUTIL_RESIZE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "weft/weft.h"
#include "core/checked.h"

typedef struct wf__ku_rs_params {
    const char *mode, *ctm, *nearest; /* mode, coordinate_transformation_mode, nearest_mode */
    double cubic_a, extrap;
    bool exclude, antialias;
} wf__ku_rs_params;

/* Resize's axes attribute (n values) normalised for a rank-`rank` input (xstr describes it). */
static inline bool wf__ku_resize_axes(int rank, int n, const int64_t *ints, const char *xstr, int *axes, char *err,
                                      size_t en)
{
    if (n > rank) {
        snprintf(err, en, "%d axes for input %s", n, xstr);
        return false;
    }
    for (int i = 0; i < n; i++) {
        int64_t a = ints[i] < 0 ? ints[i] + rank : ints[i];
        if (a < 0 || a >= rank) {
            snprintf(err, en, "axis %lld is outside input %s", (long long)ints[i], xstr);
            return false;
        }
        axes[i] = (int)a;
    }
    return true;
}

/* The crop window per dim (r0 begin, r1 end; 0 and 1 where not cropped) from the nroi roi values of
 * the `want` resized axes (axes, or all when na is 0), and the check that no empty dim of x grows. */
static inline bool wf__ku_resize_roi(int rank, const int64_t *x, const int64_t *yd, int na, const int *axes, int want,
                                     bool crop, const double *roi, int nroi, const char *xstr, double *r0, double *r1,
                                     char *err, size_t en)
{
    for (int d = 0; d < rank; d++) r0[d] = 0, r1[d] = 1;
    if (crop) {
        if (nroi != 2 * want) {
            snprintf(err, en, "roi has %d values; expected %d for input %s", nroi, 2 * want, xstr);
            return false;
        }
        for (int i = 0; i < want; i++) {
            int d = na ? axes[i] : i;
            r0[d] = roi[i];
            r1[d] = roi[want + i];
        }
    }
    for (int d = 0; d < rank; d++)
        if (x[d] == 0 && yd[d] > 0) {
            snprintf(err, en, "cannot resize the empty dim %d of input %s to %lld", d, xstr, (long long)yd[d]);
            return false;
        }
    return true;
}

/* Output dims and per-axis scales of Resize from scales or sizes over axes (all when n_axes is 0).
 * Returns false with a message in err. */
static inline bool wf__ku_resize_shape(int rank, const int64_t *x, const int *axes, int n_axes, const double *scales,
                                       int n_scales, const int64_t *sizes, int n_sizes, const char *policy,
                                       int64_t *out, double *scale, char *err, size_t errlen)
{
    int ax[WF_MAX_RANK], na = n_axes;
    for (int i = 0; i < n_axes; i++) ax[i] = axes[i];
    if (!n_axes) {
        na = rank;
        for (int i = 0; i < rank; i++) ax[i] = i;
    }
    for (int i = 0; i < rank; i++) {
        out[i] = x[i];
        scale[i] = 1.0;
    }
    if (n_scales) {
        if (n_scales != na) {
            snprintf(err, errlen, "scales has %d values for %d axes", n_scales, na);
            return false;
        }
        for (int i = 0; i < na; i++) {
            if (!(scales[i] > 0)) {
                snprintf(err, errlen, "scale %g for axis %d must be > 0", scales[i], ax[i]);
                return false;
            }
            scale[ax[i]] = scales[i];
            /* a double past int64 has no defined conversion: huge scales are an error, not a wrap */
            if (!wf__f64_to_count(floor(scales[i] * (double)x[ax[i]]), WF__MAX_TENSOR_BYTES - 1, false, &out[ax[i]])) {
                snprintf(err, errlen, "scale %g for axis %d of size %lld gives an output dim past 2^62", scales[i],
                         ax[i], (long long)x[ax[i]]);
                return false;
            }
        }
        return true;
    }
    if (n_sizes != na) {
        snprintf(err, errlen, "sizes has %d values for %d axes", n_sizes, na);
        return false;
    }
    for (int i = 0; i < na; i++) {
        if (sizes[i] < 0) {
            snprintf(err, errlen, "size %lld for axis %d must be >= 0", (long long)sizes[i], ax[i]);
            return false;
        }
        out[ax[i]] = sizes[i];
        scale[ax[i]] = x[ax[i]] ? (double)sizes[i] / (double)x[ax[i]] : 1.0;
    }
    if (!policy) policy = "stretch";
    bool smaller = !strcmp(policy, "not_larger");
    if (smaller || !strcmp(policy, "not_smaller")) {
        double s = scale[ax[0]];
        for (int i = 1; i < na; i++) s = smaller ? fmin(s, scale[ax[i]]) : fmax(s, scale[ax[i]]);
        for (int i = 0; i < na; i++) {
            scale[ax[i]] = s;
            /* round half up, as the ONNX reference */
            if (!wf__f64_to_count(s * (double)x[ax[i]] + 0.5, WF__MAX_TENSOR_BYTES - 1, false, &out[ax[i]])) {
                snprintf(err, errlen, "scale %g for axis %d of size %lld gives an output dim past 2^62", s, ax[i],
                         (long long)x[ax[i]]);
                return false;
            }
        }
    } else if (strcmp(policy, "stretch")) {
        snprintf(err, errlen, "keep_aspect_ratio_policy '%s' is not stretch, not_larger or not_smaller", policy);
        return false;
    }
    return true;
}

static inline double wf__ku_rs_cubic_w(double x, double A)
{
    x = fabs(x);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* The source coordinate of output position o (ONNX coordinate_transformation_mode); *ext: outside the
 * crop box of tf_crop_and_resize. */
static inline double wf__ku_rs_source_coord(const wf__ku_rs_params *P, int64_t o, double scale, int64_t in_len,
                                            int64_t out_len, double r0, double r1, bool *ext)
{
    double x = (double)o, out_w = scale * (double)in_len;
    const char *m = P->ctm;
    *ext = false;
    if (!strcmp(m, "align_corners")) return out_w == 1 ? 0.0 : x * (double)(in_len - 1) / (out_w - 1);
    if (!strcmp(m, "asymmetric")) return x / scale;
    if (!strcmp(m, "pytorch_half_pixel")) return out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    if (!strcmp(m, "half_pixel_symmetric")) {
        double adj = (double)out_len / out_w, center = (double)in_len / 2;
        return center * (1 - adj) + (x + 0.5) / scale - 0.5;
    }
    if (!strcmp(m, "tf_crop_and_resize")) {
        double v = out_w == 1 ? (r1 - r0) * (double)(in_len - 1) / 2
                              : x * (r1 - r0) * (double)(in_len - 1) / (out_w - 1);
        v += r0 * (double)(in_len - 1);
        *ext = v < 0 || v > (double)(in_len - 1);
        return v;
    }
    return (x + 0.5) / scale - 0.5; /* half_pixel */
}

/* Taps per output position along an axis resized by scale. */
static inline int wf__ku_rs_tap_count(const wf__ku_rs_params *P, double scale)
{
    if (!strcmp(P->mode, "nearest")) return 2;
    double s = scale < 1 ? scale : 1;
    if (!strcmp(P->mode, "linear")) return P->antialias ? 2 - 2 * (int)(floor(-1 / s) + 1) : 2;
    return P->antialias ? 2 - 2 * (int)(floor(-2 / s) + 1) : 4;
}

/* Fills the tap table of one axis: n (wf__ku_rs_tap_count) source positions, clamped, and weights per
 * output position in idx[out_len * n] and w[out_len * n]; ext[out_len] flags the positions that take the
 * extrapolation value. The left neighbour is ceil(x) - 1, so an integral x sits at ratio 1 (the
 * reference prefers the pixel on the left). */
static inline void wf__ku_rs_axis_taps(const wf__ku_rs_params *P, int n, int64_t in_len, int64_t out_len, double scale,
                                       double r0, double r1, int64_t *idx, double *w, uint8_t *ext)
{
    double s = scale < 1 ? scale : 1;
    for (int64_t o = 0; o < out_len; o++) {
        bool e;
        double x = wf__ku_rs_source_coord(P, o, scale, in_len, out_len, r0, r1, &e);
        ext[o] = e;
        double base = ceil(x) - 1, ratio = x - base, *wo = w + o * n;
        int start;
        if (!strcmp(P->mode, "nearest")) {
            start = 0;
            bool right;
            const char *nm = P->nearest;
            if (ratio == 1) right = true;
            else if (!strcmp(nm, "round_prefer_floor")) right = ratio > 0.5;
            else if (!strcmp(nm, "round_prefer_ceil")) right = ratio >= 0.5;
            else right = !strcmp(nm, "ceil");
            wo[0] = right ? 0 : 1;
            wo[1] = right ? 1 : 0;
        } else if (!strcmp(P->mode, "linear")) {
            if (P->antialias) {
                start = (int)(floor(-1 / s) + 1);
                for (int t = 0; t < n; t++) {
                    double a = fabs(((double)(start + t) - ratio) * s);
                    wo[t] = a < 1 ? 1 - a : 0;
                }
            } else {
                start = 0;
                wo[0] = 1 - ratio;
                wo[1] = ratio;
            }
        } else if (P->antialias) {
            start = (int)(floor(-2 / s) + 1);
            for (int t = 0; t < n; t++) wo[t] = wf__ku_rs_cubic_w(s * ((double)(start + t) - ratio), P->cubic_a);
        } else {
            start = -1;
            for (int t = 0; t < n; t++) wo[t] = wf__ku_rs_cubic_w((double)(start + t) - ratio, P->cubic_a);
        }
        double sum = 0;
        for (int t = 0; t < n; t++) {
            int64_t p = (int64_t)base + start + t;
            if (P->exclude && (p < 0 || p >= in_len)) wo[t] = 0;
            sum += wo[t];
            idx[o * n + t] = p < 0 ? 0 : p >= in_len ? in_len - 1 : p;
        }
        if (P->antialias || P->exclude)
            for (int t = 0; t < n && sum != 0; t++) wo[t] /= sum;
    }
}

#endif
