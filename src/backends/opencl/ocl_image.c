/*
 * OpenCL kernels of resampling and geometry: Resize, GridSample, AffineGrid, RoiAlign, Col2Im, MaxUnpool,
 * CenterCropPad, plus the family's shared host helpers and kernel table (ocl_image2.c adds signal,
 * quantisation, BitCast and RotaryEmbedding). Semantics follow src/backends/cpu/k_misc_resize.c,
 * k_onnx2_sample.c and k_onnx.c; like them, arithmetic runs in double where the device has it.
 */
#include <math.h>
#include <stdio.h>

#include "backends/opencl/ocl_image.h"

#define MAXSP 3 /* spatial dims GridSample handles */

/* ---- shared host helpers ----------------------------------------------------------------------------- */

wf_status *oclimg_kernel(wf__kctx *k, const char *prog, const char *src, wf_dtype t, const char *name,
                         cl_kernel *out)
{
    return oclew_kernel(k, prog, src, t, name, out);
}

wf_status *oclimg_buffer(wf__kctx *k, size_t n, const void *init, cl_mem *out)
{
    cl_int st;
    *out = clCreateBuffer(ocl_of(k)->ctx, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), n ? n : 1,
                          (void *)init, &st);
    return *out ? NULL : ocl_fail(k, st, "scratch buffer allocation");
}

wf_status *oclimg_run(wf__kctx *k, cl_kernel kern, int n_args, const ocl_arg *args, size_t n)
{
    if (n == 0) return NULL;
    return ocl_launch(k, kern, n_args, args, 1, &n, NULL);
}

static wf_status *read_small(wf__kctx *k, int idx, const char *what, bool want_float, int max, void **buf)
{
    const wf_tensor *t = k->in[idx];
    bool is_f = oclew_is_float(t->dtype), is_i = t->dtype == WF_I32 || t->dtype == WF_I64;
    if (t->rank > 1 || t->size > max || (want_float ? !is_f : !is_i))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s (input %d) must be a 1-D %s tensor with at most %d values",
                                   what, idx, want_float ? "float" : "i32 or i64", max);
    return oclew_read(k, t, buf);
}

wf_status *oclimg_ints(wf__kctx *k, int idx, const char *what, int64_t *vals, int max, int *n)
{
    void *buf;
    wf_status *s = read_small(k, idx, what, false, max, &buf);
    if (s) return s;
    const wf_tensor *t = k->in[idx];
    for (int64_t i = 0; i < t->size; i++) vals[i] = oclew_load_i64(buf, t->dtype, i);
    *n = (int)t->size;
    ocl_host->free(buf);
    return NULL;
}

wf_status *oclimg_floats(wf__kctx *k, int idx, const char *what, double *vals, int max, int *n)
{
    void *buf;
    wf_status *s = read_small(k, idx, what, true, max, &buf);
    if (s) return s;
    const wf_tensor *t = k->in[idx];
    for (int64_t i = 0; i < t->size; i++) vals[i] = oclew_load_f64(buf, t->dtype, i);
    *n = (int)t->size;
    ocl_host->free(buf);
    return NULL;
}

int64_t oclimg_attr_i(const wf__kctx *k, const char *name) { return ocl_host->attr_get(k->op, k->attrs, name)->i; }
double oclimg_attr_f(const wf__kctx *k, const char *name) { return ocl_host->attr_get(k->op, k->attrs, name)->f; }
const char *oclimg_attr_s(const wf__kctx *k, const char *name)
{
    const char *s = ocl_host->attr_get(k->op, k->attrs, name)->s;
    return s ? s : "";
}

static int64_t numel(int rank, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= d[i];
    return n;
}

/* ---- kernel source ------------------------------------------------------------------------------------ */

static const char *g_src =
    OCLIMG_PRELUDE
    /* Resize: widen to ACC, one separable pass per resized axis over host-built tap tables, narrow. */
    "__kernel void k_widen(__global const ST *x, ulong xo, __global ACC *y) {\n"
    "  ulong i = get_global_id(0); y[i] = LDA(x, xo + i);\n"
    "}\n"
    "__kernel void k_narrow(__global const ACC *x, __global ST *y, ulong yo) {\n"
    "  ulong i = get_global_id(0); STA(y, yo + i, x[i]);\n"
    "}\n"
    "__kernel void k_rs_pass(__global const ACC *src, __global ACC *dst, __global const long *idx,\n"
    "    __global const ACC *w, __global const uchar *ext, long in_len, long out_len, long inner, int n, ACC extrap) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long i = (long)(g % (ulong)inner), q = (long)(g / (ulong)inner);\n"
    "  long o = q / out_len, p = q % out_len;\n"
    "  if (ext[p]) { dst[g] = extrap; return; }\n"
    "  ACC acc = 0;\n"
    "  for (int t = 0; t < n; t++) {\n"
    "    ACC wt = w[p * n + t];\n"
    "    if (wt == 0) continue;\n"
    "    acc += wt * src[(o * in_len + idx[p * n + t]) * inner + i];\n"
    "  }\n"
    "  dst[g] = acc;\n"
    "}\n";

/* ---- Resize ------------------------------------------------------------------------------------------- */

typedef struct {
    const char *mode, *ctm, *nearest;
    double cubic_a, extrap;
    bool exclude, antialias;
} rs_params;

static double cubic_w(double x, double A)
{
    x = fabs(x);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* The source coordinate of output position o (ONNX coordinate_transformation_mode); *ext: outside the
 * crop box of tf_crop_and_resize. */
static double source_coord(const rs_params *P, int64_t o, double scale, int64_t in_len, int64_t out_len, double r0,
                           double r1, bool *ext)
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
    return (x + 0.5) / scale - 0.5;
}

static int tap_count(const rs_params *P, double scale)
{
    if (!strcmp(P->mode, "nearest")) return 2;
    double s = scale < 1 ? scale : 1;
    if (!strcmp(P->mode, "linear")) return P->antialias ? 2 - 2 * (int)(floor(-1 / s) + 1) : 2;
    return P->antialias ? 2 - 2 * (int)(floor(-2 / s) + 1) : 4;
}

/* Fills the tap table of one axis: n source positions (clamped) and weights per output position, with
 * the reference's neighbour choice (the left pixel is ceil(x) - 1, so integral x sits at ratio 1). */
static void axis_taps(const rs_params *P, int n, int64_t in_len, int64_t out_len, double scale, double r0, double r1,
                      cl_long *idx, double *w, cl_uchar *ext)
{
    double s = scale < 1 ? scale : 1;
    for (int64_t o = 0; o < out_len; o++) {
        bool e;
        double x = source_coord(P, o, scale, in_len, out_len, r0, r1, &e);
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
            for (int t = 0; t < n; t++) wo[t] = cubic_w(s * ((double)(start + t) - ratio), P->cubic_a);
        } else {
            start = -1;
            for (int t = 0; t < n; t++) wo[t] = cubic_w((double)(start + t) - ratio, P->cubic_a);
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

/* Output shape and per-axis scales from scales or sizes (ONNX Resize, keep_aspect_ratio_policy), as
 * wf__resize_shape in src/graph/ops_misc.c. */
static wf_status *resize_shape(wf__kctx *k, int rank, const int64_t *x, const int *ax, int na, const double *sc,
                               int nsc, const int64_t *sz, int nsz, int64_t *out, double *scale)
{
    const char *policy = oclimg_attr_s(k, "keep_aspect_ratio_policy");
    for (int i = 0; i < rank; i++) out[i] = x[i], scale[i] = 1.0;
    if (nsc) {
        if (nsc != na) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "scales has %d values for %d axes", nsc, na);
        for (int i = 0; i < na; i++) {
            if (!(sc[i] > 0))
                return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "scale %g for axis %d must be > 0", sc[i], ax[i]);
            scale[ax[i]] = sc[i];
            out[ax[i]] = (int64_t)floor(sc[i] * (double)x[ax[i]]);
        }
        return NULL;
    }
    if (nsz != na) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "sizes has %d values for %d axes", nsz, na);
    for (int i = 0; i < na; i++) {
        if (sz[i] < 0)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "size %lld for axis %d must be >= 0", (long long)sz[i],
                                       ax[i]);
        out[ax[i]] = sz[i];
        scale[ax[i]] = x[ax[i]] ? (double)sz[i] / (double)x[ax[i]] : 1.0;
    }
    bool smaller = !strcmp(policy, "not_larger");
    if (smaller || !strcmp(policy, "not_smaller")) {
        double s = scale[ax[0]];
        for (int i = 1; i < na; i++) s = smaller ? fmin(s, scale[ax[i]]) : fmax(s, scale[ax[i]]);
        for (int i = 0; i < na; i++) {
            scale[ax[i]] = s;
            out[ax[i]] = (int64_t)(s * (double)x[ax[i]] + 0.5); /* round half up, as the ONNX reference */
        }
    } else if (strcmp(policy, "stretch")) {
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "keep_aspect_ratio_policy '%s' is not stretch, not_larger or not_smaller", policy);
    }
    return NULL;
}

/* One pass over axis d: cur (dims cd) -> a new buffer with cd[d] = out_len. */
static wf_status *resize_pass(wf__kctx *k, const rs_params *P, int rank, int64_t *cd, int d, int64_t out_len,
                              double scale, double r0, double r1, cl_mem *cur)
{
    bool f64 = ocl_of(k)->fp64;
    int n = tap_count(P, scale);
    size_t nt = (size_t)(out_len * n + 1);
    cl_long *idx = ocl_host->malloc(sizeof(cl_long) * nt);
    double *w = ocl_host->malloc(sizeof(double) * nt);
    cl_uchar *ext = ocl_host->malloc((size_t)out_len + 1);
    wf_status *s = NULL;
    cl_mem bi = NULL, bw = NULL, be = NULL, next = NULL;
    if (!idx || !w || !ext) s = ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the taps of axis %d", d);
    if (!s) {
        axis_taps(P, n, cd[d], out_len, scale, r0, r1, idx, w, ext);
        if (!f64)
            for (size_t i = 0; i < nt; i++) ((float *)w)[i] = (float)w[i];
    }
    int64_t outer = numel(d, cd), inner = numel(rank - d - 1, cd + d + 1), total = outer * out_len * inner;
    size_t as = oclimg_acc_size(k);
    if (!s) s = oclimg_buffer(k, sizeof(cl_long) * nt, idx, &bi);
    if (!s) s = oclimg_buffer(k, as * nt, w, &bw);
    if (!s) s = oclimg_buffer(k, (size_t)out_len + 1, ext, &be);
    if (!s) s = oclimg_buffer(k, as * (size_t)total, NULL, &next);
    cl_kernel kern;
    if (!s) s = oclimg_kernel(k, "image", g_src, WF_DTYPE_INVALID, "rs_pass", &kern);
    if (!s) {
        cl_long in_len = cd[d], ol = out_len, in = inner;
        cl_int nn = n;
        cl_double ed = P->extrap;
        cl_float ef = (cl_float)P->extrap;
        ocl_arg args[] = {OCL_ARG(*cur), OCL_ARG(next), OCL_ARG(bi), OCL_ARG(bw), OCL_ARG(be), OCL_ARG(in_len),
                          OCL_ARG(ol), OCL_ARG(in), OCL_ARG(nn), f64 ? OCL_ARG(ed) : OCL_ARG(ef)};
        s = oclimg_run(k, kern, 10, args, (size_t)total);
    }
    ocl_host->free(idx), ocl_host->free(w), ocl_host->free(ext);
    if (bi) clReleaseMemObject(bi);
    if (bw) clReleaseMemObject(bw);
    if (be) clReleaseMemObject(be);
    if (s) {
        if (next) clReleaseMemObject(next);
        return s;
    }
    clReleaseMemObject(*cur);
    *cur = next;
    cd[d] = out_len;
    return NULL;
}

static wf_status *k_Resize(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    rs_params P = {.mode = oclimg_attr_s(k, "mode"),
                   .ctm = oclimg_attr_s(k, "coordinate_transformation_mode"),
                   .nearest = oclimg_attr_s(k, "nearest_mode"),
                   .cubic_a = oclimg_attr_f(k, "cubic_coeff_a"),
                   .extrap = oclimg_attr_f(k, "extrapolation_value"),
                   .exclude = oclimg_attr_i(k, "exclude_outside") != 0};
    P.antialias = oclimg_attr_i(k, "antialias") != 0 && strcmp(P.mode, "nearest");
    const wf__attr *axa = ocl_host->attr_get(k->op, k->attrs, "axes");
    int axes[WF_MAX_RANK], na = axa->n, rank = x->rank;
    if (na > rank) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%d axes for an input of rank %d", na, rank);
    for (int i = 0; i < na; i++) {
        int64_t a = axa->ints[i] < 0 ? axa->ints[i] + rank : axa->ints[i];
        if (a < 0 || a >= rank)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is outside rank %d", (long long)axa->ints[i],
                                       rank);
        axes[i] = (int)a;
    }
    int want = na ? na : rank;
    int all[WF_MAX_RANK];
    for (int i = 0; i < rank; i++) all[i] = i;
    double sc[WF_MAX_RANK], roi[2 * WF_MAX_RANK], scale[WF_MAX_RANK];
    int64_t sz[WF_MAX_RANK], yd[WF_MAX_RANK];
    int nsc = 0, nsz = 0, nroi = 0;
    wf_status *s;
    if (oclimg_has(k, 2) && k->in[2]->size && (s = oclimg_floats(k, 2, "scales", sc, WF_MAX_RANK, &nsc))) return s;
    if (oclimg_has(k, 3) && k->in[3]->size) {
        if (k->in[3]->dtype != WF_I64)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "sizes must be a 1-D i64 tensor");
        if ((s = oclimg_ints(k, 3, "sizes", sz, WF_MAX_RANK, &nsz))) return s;
    }
    if (!nsc == !nsz)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "give exactly one of scales (input 2) and sizes (input 3)");
    if ((s = resize_shape(k, rank, x->dims, na ? axes : all, want, sc, nsc, sz, nsz, yd, scale))) return s;
    bool crop = !strcmp(P.ctm, "tf_crop_and_resize");
    double r0[WF_MAX_RANK], r1[WF_MAX_RANK];
    for (int d = 0; d < rank; d++) r0[d] = 0, r1[d] = 1;
    if (crop) {
        if (!oclimg_has(k, 1))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "tf_crop_and_resize needs roi (input 1)");
        if ((s = oclimg_floats(k, 1, "roi", roi, 2 * WF_MAX_RANK, &nroi))) return s;
        if (nroi != 2 * want)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "roi has %d values; expected %d for rank %d", nroi,
                                       2 * want, rank);
        for (int i = 0; i < want; i++) {
            int d = na ? axes[i] : i;
            r0[d] = roi[i];
            r1[d] = roi[want + i];
        }
    }
    for (int d = 0; d < rank; d++)
        if (x->dims[d] == 0 && yd[d] > 0)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot resize the empty dim %d to %lld", d,
                                       (long long)yd[d]);
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, rank, yd, &y))) return s;
    if (!y->size) return NULL;
    cl_mem cur = NULL;
    cl_kernel kern;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    if ((s = oclimg_buffer(k, oclimg_acc_size(k) * (size_t)x->size, NULL, &cur))) return s;
    if (!(s = oclimg_kernel(k, "image", g_src, x->dtype, "widen", &kern))) {
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(cur)};
        s = oclimg_run(k, kern, 3, args, (size_t)x->size);
    }
    int64_t cd[WF_MAX_RANK];
    memcpy(cd, x->dims, sizeof(int64_t) * (size_t)rank);
    for (int d = 0; d < rank && !s; d++) {
        bool identity = yd[d] == x->dims[d] && fabs(scale[d] - 1.0) < 1e-12 && (!crop || (r0[d] == 0 && r1[d] == 1));
        if (!identity) s = resize_pass(k, &P, rank, cd, d, yd[d], scale[d], r0[d], r1[d], &cur);
    }
    if (!s && !(s = oclimg_kernel(k, "image", g_src, x->dtype, "narrow", &kern))) {
        ocl_arg args[] = {OCL_ARG(cur), OCL_ARG(ym), OCL_ARG(yo)};
        s = oclimg_run(k, kern, 3, args, (size_t)y->size);
    }
    clReleaseMemObject(cur);
    return s;
}

/* ---- table -------------------------------------------------------------------------------------------- */

#define KI_(Op, mask, key) {#Op, "OPENCL", mask, key, k_##Op, NULL, 0},
#define KI2_(Op) {#Op, "OPENCL", 0, 0, oclimg_k_##Op, NULL, 0},

const wf__kernel_def ocl_kernels_image[] = {
    KI_(Resize, WF__DT_NUMERIC, 0)
    {NULL},
};
