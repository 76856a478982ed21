/*
 * CPU kernel for Resize (opset 19): nearest, linear and cubic on any rank, every coordinate transformation
 * mode, antialiased downsampling and exclude_outside. Resampling is separable, so it runs one axis at a
 * time: each resized axis gets a table of source taps and weights per output position, which
 * reproduces the ONNX reference's neighbour choice (edge padding, ties to the left pixel).
 */
#include "backends/cpu/k_misc.h"
#include "ops/kutil_resize.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define SB WF__KM_SB

typedef struct {
    int n;            /* taps per output position */
    int64_t *idx;     /* [out][n] source positions, clamped */
    double *w;        /* [out][n] */
    uint8_t *ext;     /* [out]: use the extrapolation value (tf_crop_and_resize outside the roi) */
} taps;

typedef struct {
    const double *src;
    double *dst;
    const taps *T;
    int64_t in_len, out_len, inner;
    double extrap;
} pass_job;

static void pass_range(void *arg, int64_t b, int64_t e)
{
    const pass_job *j = arg;
    int n = j->T->n;
    for (int64_t q = b; q < e; q++) {
        int64_t o = q / j->out_len, p = q % j->out_len;
        double *d = j->dst + q * j->inner;
        if (j->T->ext[p]) {
            for (int64_t i = 0; i < j->inner; i++) d[i] = j->extrap;
            continue;
        }
        for (int64_t i = 0; i < j->inner; i++) d[i] = 0;
        for (int t = 0; t < n; t++) {
            double w = j->T->w[p * n + t];
            if (w == 0) continue;
            const double *s = j->src + (o * j->in_len + j->T->idx[p * n + t]) * j->inner;
            for (int64_t i = 0; i < j->inner; i++) d[i] += w * s[i];
        }
    }
}

static wf_status *read_floats(wf__kctx *k, int idx, const char *what, double *v, int max, int *n)
{
    const wf_tensor *t = k->in[idx];
    if (!wf__dtype_is_float(t->dtype) || t->rank != 1 || t->size > max)
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s must be a 1-D float tensor with at most %d values", what, max);
    for (int64_t i = 0; i < t->size; i++) v[i] = wf__load_f64(t->data, t->dtype, i);
    *n = (int)t->size;
    return NULL;
}

wf_status *wf__k_resize(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b[SB], err[256];
    wf__ku_rs_params P = {.mode = wf__attr_s(k->op, k->attrs, "mode"),
                             .ctm = wf__attr_s(k->op, k->attrs, "coordinate_transformation_mode"),
                             .nearest = wf__attr_s(k->op, k->attrs, "nearest_mode"),
                             .cubic_a = wf__attr_f(k->op, k->attrs, "cubic_coeff_a"),
                             .extrap = wf__attr_f(k->op, k->attrs, "extrapolation_value"),
                             .exclude = wf__attr_i(k->op, k->attrs, "exclude_outside") != 0};
    P.antialias = wf__attr_i(k->op, k->attrs, "antialias") != 0 && strcmp(P.mode, "nearest");
    const wf__attr *axa = wf__attr_get(k->op, k->attrs, "axes");
    int axes[WF_MAX_RANK], na = axa->n;
    for (int i = 0; i < na; i++)
        if (na > x->rank || !wf__norm_axis(axa->ints[i], x->rank, &axes[i]))
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "axes do not fit input %s", wf__shape_str(x->rank, x->dims, b));
    int want = na ? na : x->rank;
    double sc[WF_MAX_RANK], roi[2 * WF_MAX_RANK], scale[WF_MAX_RANK];
    int64_t sz[WF_MAX_RANK], yd[WF_MAX_RANK];
    int nsc = 0, nsz = 0, nroi = 0;
    if (wf__km_has(k, 2) && k->in[2]->size) WF__TRY(read_floats(k, 2, "scales", sc, WF_MAX_RANK, &nsc));
    if (wf__km_has(k, 3) && k->in[3]->size) {
        const wf_tensor *t = k->in[3];
        if (t->dtype != WF_I64 || t->rank != 1 || t->size > WF_MAX_RANK)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "sizes must be a 1-D i64 tensor");
        nsz = (int)t->size;
        for (int i = 0; i < nsz; i++) sz[i] = ((const int64_t *)t->data)[i];
    }
    if (!nsc == !nsz) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "give exactly one of scales (input 2) and sizes (input 3)");
    if (!wf__ku_resize_shape(x->rank, x->dims, axes, na, sc, nsc, sz, nsz,
                          wf__attr_s(k->op, k->attrs, "keep_aspect_ratio_policy"), yd, scale, err, sizeof err))
        return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    bool crop = !strcmp(P.ctm, "tf_crop_and_resize");
    double r0[WF_MAX_RANK], r1[WF_MAX_RANK];
    for (int d = 0; d < x->rank; d++) {
        r0[d] = 0;
        r1[d] = 1;
    }
    if (crop) {
        if (!wf__km_has(k, 1)) return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "tf_crop_and_resize needs roi (input 1)");
        WF__TRY(read_floats(k, 1, "roi", roi, 2 * WF_MAX_RANK, &nroi));
        if (nroi != 2 * want)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "roi has %d values; expected %d for input %s", nroi, 2 * want,
                                 wf__shape_str(x->rank, x->dims, b));
        for (int i = 0; i < want; i++) {
            int d = na ? axes[i] : i;
            r0[d] = roi[i];
            r1[d] = roi[want + i];
        }
    }
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] == 0 && yd[d] > 0)
            return wf__kctx_fail(k, WF_INVALID_ARGUMENT, "cannot resize the empty dim %d of input %s to %" PRId64, d,
                                 wf__shape_str(x->rank, x->dims, b), yd[d]);
    wf_tensor *y;
    WF__TRY(wf__kctx_output(k, 0, x->dtype, x->rank, yd, &y));
    if (!y->size) return NULL;
    double *cur = NULL, *next = NULL;
    wf_status *s = wf__km_widen(k, x, false, (void **)&cur);
    int64_t cd[WF_MAX_RANK];
    memcpy(cd, x->dims, sizeof(int64_t) * (size_t)x->rank);
    for (int d = 0; d < x->rank && !s; d++) {
        bool identity = yd[d] == x->dims[d] && fabs(scale[d] - 1.0) < 1e-12 && (!crop || (r0[d] == 0 && r1[d] == 1));
        if (identity) continue;
        taps T = {.n = wf__ku_rs_tap_count(&P, scale[d])};
        int64_t outer = wf__numel(d, cd), inner = wf__numel(x->rank - d - 1, cd + d + 1);
        T.idx = wf__malloc(sizeof(int64_t) * (size_t)(yd[d] * T.n + 1));
        T.w = wf__malloc(sizeof(double) * (size_t)(yd[d] * T.n + 1));
        T.ext = wf__malloc((size_t)yd[d] + 1);
        if (!T.idx || !T.w || !T.ext) s = wf__kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the resize taps of axis %d", d);
        if (!s) s = wf__km_alloc8(k, outer * yd[d] * inner, "a resize pass", (void **)&next);
        if (!s) {
            wf__ku_rs_axis_taps(&P, T.n, x->dims[d], yd[d], scale[d], r0[d], r1[d], T.idx, T.w, T.ext);
            pass_job j = {.src = cur, .dst = next, .T = &T, .in_len = cd[d], .out_len = yd[d], .inner = inner,
                          .extrap = P.extrap};
            int64_t work = inner * T.n, grain = WF__KM_GRAIN / (work > 0 ? work : 1);
            wf__parallel_for(k, outer * yd[d], grain > 0 ? grain : 1, pass_range, &j);
            wf__free(cur);
            cur = next;
            next = NULL;
            cd[d] = yd[d];
        }
        wf__free(T.idx);
        wf__free(T.w);
        wf__free(T.ext);
    }
    if (!s) wf__convert(cur, WF_F64, y->data, y->dtype, y->size);
    wf__free(cur);
    return s;
}
