/*
 * OpenCL Conv2D, ConvTranspose2D, MaxPool2D, AvgPool2D and GlobalAvgPool as direct kernels, one output
 * element per work-item (a gather, so no two work-items write the same element). The window geometry is
 * resolved from the same attributes and by the same rules as the registry's wf__nn_window_resolve
 * (src/graph/ops_nn.c), which the plugin cannot link.
 */
#include <stdio.h>

#include "backends/opencl/ocl_nnr.h"

/* ---- window geometry ----------------------------------------------------------------------------------- */

typedef struct win {
    int64_t k[2], s[2], d[2];
    int64_t pb[2], pe[2];
    int64_t opad[2];
    int64_t out[2];
} win;

enum { WIN_CONV, WIN_POOL, WIN_CONVT };

static bool has_attr(const wf__op_def *op, const char *name)
{
    for (int a = 0; a < WF__MAX_ATTRS && op->attrs[a].name; a++)
        if (!strcmp(op->attrs[a].name, name)) return true;
    return false;
}

static int get_pair(const wf__attr *a, const char *name, int64_t def, int64_t lo, int64_t *v, char *err, size_t en)
{
    if (!a->n) {
        v[0] = v[1] = def;
        return 0;
    }
    if (a->n != 2) {
        snprintf(err, en, "%s has %d values; expected 2", name, a->n);
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (a->ints[i] < lo) {
            snprintf(err, en, "%s[%d] is %lld; must be >= %lld", name, i, (long long)a->ints[i], (long long)lo);
            return -1;
        }
        v[i] = a->ints[i];
    }
    return 0;
}

/* Kernel, strides, dilations, pads (auto_pad included) and output size of the spatial dims in_hw; wk is
 * the weights' kernel size (NULL for pools). 0, or -1 with a message in err. */
static int window_resolve(const wf__kctx *k, int kind, const int64_t *in_hw, const int64_t *wk, win *w, char *err,
                          size_t en)
{
    const wf__op_def *op = k->op;
    const wf__attr *attrs = k->attrs;
    memset(w, 0, sizeof *w);
    const wf__attr *ks = ocl_host->attr_get(op, attrs, "kernel_shape");
    if (kind == WIN_POOL && ks->n == 0) {
        snprintf(err, en, "kernel_shape is required");
        return -1;
    }
    if (get_pair(ks, "kernel_shape", -1, 1, w->k, err, en)) return -1;
    for (int i = 0; i < 2 && wk; i++) {
        if (w->k[i] < 0) w->k[i] = wk[i];
        else if (wk[i] != w->k[i]) {
            snprintf(err, en, "kernel_shape [%lld,%lld] does not match the weights' spatial dims [%lld,%lld]",
                     (long long)w->k[0], (long long)w->k[1], (long long)wk[0], (long long)wk[1]);
            return -1;
        }
    }
    if (get_pair(ocl_host->attr_get(op, attrs, "strides"), "strides", 1, 1, w->s, err, en)) return -1;
    w->d[0] = w->d[1] = 1;
    if (has_attr(op, "dilations") &&
        get_pair(ocl_host->attr_get(op, attrs, "dilations"), "dilations", 1, 1, w->d, err, en))
        return -1;
    const wf__attr *pads = ocl_host->attr_get(op, attrs, "pads");
    if (pads->n != 0 && pads->n != 4) {
        snprintf(err, en, "pads has %d values; expected 4 [top,left,bottom,right]", pads->n);
        return -1;
    }
    for (int i = 0; i < 4 && pads->n; i++)
        if (pads->ints[i] < 0) {
            snprintf(err, en, "pads[%d] is %lld; must be >= 0", i, (long long)pads->ints[i]);
            return -1;
        }
    const char *ap = ocl_host->attr_get(op, attrs, "auto_pad")->s;
    int mode; /* 0 NOTSET, 1 SAME_UPPER, 2 SAME_LOWER, 3 VALID */
    if (!ap || !*ap || !strcmp(ap, "NOTSET")) mode = 0;
    else if (!strcmp(ap, "SAME_UPPER")) mode = 1;
    else if (!strcmp(ap, "SAME_LOWER")) mode = 2;
    else if (!strcmp(ap, "VALID")) mode = 3;
    else {
        snprintf(err, en, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
        return -1;
    }
    int ceil_mode = kind == WIN_POOL ? (int)ocl_host->attr_get(op, attrs, "ceil_mode")->i : 0;
    const wf__attr *oshape = NULL;
    if (kind == WIN_CONVT) {
        if (get_pair(ocl_host->attr_get(op, attrs, "output_padding"), "output_padding", 0, 0, w->opad, err, en))
            return -1;
        for (int i = 0; i < 2; i++)
            if (w->opad[i] >= w->s[i] && w->opad[i] >= w->d[i]) {
                snprintf(err, en, "output_padding[%d] = %lld must be smaller than the stride or the dilation", i,
                         (long long)w->opad[i]);
                return -1;
            }
        oshape = ocl_host->attr_get(op, attrs, "output_shape");
        if (oshape->n != 0 && oshape->n != 2 && oshape->n != 4) {
            snprintf(err, en, "output_shape has %d values; expected 2 (or 4 with N and C)", oshape->n);
            return -1;
        }
        if (!oshape->n) oshape = NULL;
    }
    for (int i = 0; i < 2; i++) {
        int64_t eff = (w->k[i] - 1) * w->d[i] + 1, in = in_hw[i], s = w->s[i];
        w->pb[i] = pads->n ? pads->ints[i] : 0;
        w->pe[i] = pads->n ? pads->ints[i + 2] : 0;
        if (kind == WIN_CONVT) {
            int64_t want = -1;
            if (oshape) want = oshape->ints[oshape->n - 2 + i];
            else if (mode == 1 || mode == 2) want = in * s;
            if (mode == 3) w->pb[i] = w->pe[i] = 0;
            if (want >= 0) {
                int64_t total = s * (in - 1) + w->opad[i] + eff - want;
                /* floor division when output_shape asks for more than the natural size */
                int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
                if (mode == 1) w->pb[i] = half, w->pe[i] = total - half;
                else w->pb[i] = total - half, w->pe[i] = half;
            }
            w->out[i] = s * (in - 1) + w->opad[i] + eff - w->pb[i] - w->pe[i];
            if (w->out[i] < 0) {
                snprintf(err, en, "output size %lld along spatial dim %d is negative", (long long)w->out[i], i);
                return -1;
            }
            continue;
        }
        if (mode == 3) w->pb[i] = w->pe[i] = 0;
        if (mode == 1 || mode == 2) {
            int64_t out = (in + s - 1) / s;
            int64_t total = (out - 1) * s + eff - in;
            if (total < 0) total = 0;
            if (mode == 1) w->pb[i] = total / 2, w->pe[i] = total - total / 2;
            else w->pb[i] = total - total / 2, w->pe[i] = total / 2;
            w->out[i] = out;
            continue;
        }
        int64_t span = in + w->pb[i] + w->pe[i] - eff;
        if (span < 0) {
            snprintf(err, en, "kernel extent %lld along spatial dim %d exceeds the padded input %lld", (long long)eff, i,
                     (long long)(in + w->pb[i] + w->pe[i]));
            return -1;
        }
        int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        /* a window that would start inside the end padding is dropped (ONNX, PyTorch) */
        if (ceil_mode && (out - 1) * s >= in + w->pb[i]) out--;
        w->out[i] = out;
    }
    return 0;
}

/* ---- kernels ----------------------------------------------------------------------------------------- */

/* Geometry travels as one long16: n c h w oc g kh kw oh ow sh sw dh dw ph pw. */
static const char *g_src = OCL_NNR_PRELUDE
    "#define GEO long N = g.s0, C = g.s1, H = g.s2, W = g.s3, OC = g.s4, G = g.s5, KH = g.s6, KW = g.s7,\\\n"
    "  OH = g.s8, OW = g.s9, SH = g.sa, SW = g.sb, DH = g.sc, DW = g.sd, PH = g.se, PW = g.sf\n"
    "__kernel void conv2d(__global const T *x, ulong xo, __global const T *w, ulong wo, __global const T *bias,\n"
    "                     ulong bo, int has_bias, __global T *y, ulong yo, long16 g) {\n"
    "  GEO;\n"
    "  long gid = get_global_id(0), ow = gid % OW, t = gid / OW, oh = t % OH; t /= OH;\n"
    "  long o = t % OC, n = t / OC, icg = C / G, ocg = OC / G, grp = o / ocg;\n"
    "  x += xo; w += wo; bias += bo; y += yo;\n"
    "  CT acc = has_bias ? LD(bias, o) : (CT)0;\n"
    "  for (long j = 0; j < icg; j++) {\n"
    "    const __global T *xp = x + ((n * C + grp * icg + j) * H) * W;\n"
    "    const __global T *wp = w + (o * icg + j) * KH * KW;\n"
    "    for (long a = 0; a < KH; a++) {\n"
    "      long ih = oh * SH - PH + a * DH;\n"
    "      if (ih < 0 || ih >= H) continue;\n"
    "      for (long b = 0; b < KW; b++) {\n"
    "        long iw = ow * SW - PW + b * DW;\n"
    "        if (iw >= 0 && iw < W) acc += LD(wp, a * KW + b) * LD(xp, ih * W + iw);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  ST(y, gid, acc);\n"
    "}\n"
    /* the transpose as a gather: output (yh, yw) receives input (ih, iw) through tap (a, b) when
     * yh = ih*SH - PH + a*DH, so ih = (yh + PH - a*DH) / SH where that divides exactly */
    "__kernel void convt2d(__global const T *x, ulong xo, __global const T *w, ulong wo, __global const T *bias,\n"
    "                      ulong bo, int has_bias, __global T *y, ulong yo, long16 g) {\n"
    "  GEO;\n"
    "  long gid = get_global_id(0), yw = gid % OW, t = gid / OW, yh = t % OH; t /= OH;\n"
    "  long o = t % OC, n = t / OC, icg = C / G, ocg = OC / G, grp = o / ocg, oo = o % ocg;\n"
    "  x += xo; w += wo; bias += bo; y += yo;\n"
    "  CT acc = has_bias ? LD(bias, o) : (CT)0;\n"
    "  for (long j = 0; j < icg; j++) {\n"
    "    long ic = grp * icg + j;\n"
    "    const __global T *xp = x + (n * C + ic) * H * W;\n"
    "    const __global T *wp = w + (ic * ocg + oo) * KH * KW;\n"
    "    for (long a = 0; a < KH; a++) {\n"
    "      long th = yh + PH - a * DH;\n"
    "      if (th < 0 || th % SH) continue;\n"
    "      long ih = th / SH;\n"
    "      if (ih >= H) continue;\n"
    "      for (long b = 0; b < KW; b++) {\n"
    "        long tw = yw + PW - b * DW;\n"
    "        if (tw < 0 || tw % SW) continue;\n"
    "        long iw = tw / SW;\n"
    "        if (iw < W) acc += LD(wp, a * KW + b) * LD(xp, ih * W + iw);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  ST(y, gid, acc);\n"
    "}\n"
    /* pools exactly as the CPU's direct loop: max propagates the first NaN; avg divides by the taps
     * inside the padded extent (count_include_pad) or inside the input, NaN over none. g: n c h w - - kh kw
     * oh ow sh sw dh dw ph pw, pe: end pads */
    "__kernel void pool2d(__global const T *x, ulong xo, __global T *y, ulong yo, long16 g, long2 pe,\n"
    "                     int is_max, int include_pad) {\n"
    "  GEO;\n"
    "  long gid = get_global_id(0), yw = gid % OW, t = gid / OW, yh = t % OH, p = t / OH;\n"
    "  const __global T *xp = x + xo + p * H * W;\n"
    "  y += yo;\n"
    "  DBL acc = is_max ? -INFINITY : 0;\n"
    "  long n_valid = 0, n_pad = 0;\n"
    "  for (long a = 0; a < KH; a++) {\n"
    "    long ih = yh * SH - PH + a * DH;\n"
    "    if (ih < -PH || ih >= H + pe.s0) continue;\n"
    "    for (long b = 0; b < KW; b++) {\n"
    "      long iw = yw * SW - PW + b * DW;\n"
    "      if (iw < -PW || iw >= W + pe.s1) continue;\n"
    "      n_pad++;\n"
    "      if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;\n"
    "      n_valid++;\n"
    "      DBL v = (DBL)LD(xp, ih * W + iw);\n"
    "      if (is_max) { if (v > acc || isnan(v)) acc = isnan(acc) ? acc : v; }\n"
    "      else acc += v;\n"
    "    }\n"
    "  }\n"
    "  if (!is_max) { long div = include_pad ? n_pad : n_valid; acc = div ? acc / (DBL)div : (DBL)NAN; }\n"
    "  ST(y, gid, (CT)acc);\n"
    "}\n"
    "__kernel void gap(__global const T *x, ulong xo, __global T *y, ulong yo, ulong inner) {\n"
    "  size_t p = get_global_id(0);\n"
    "  const __global T *xp = x + xo + p * inner;\n"
    "  DBL acc = 0;\n"
    "  for (ulong i = 0; i < inner; i++) acc += (DBL)LD(xp, i);\n"
    "  y += yo;\n"
    "  ST(y, p, (CT)(inner ? acc / (DBL)inner : (DBL)NAN));\n"
    "}\n";

/* ---- Conv2D / ConvTranspose2D ---------------------------------------------------------------------------- */

static wf_status *conv_common(wf__kctx *k, bool transposed)
{
    const wf_tensor *x = k->in[0], *w = k->in[1], *b = k->n_in > 2 ? k->in[2] : NULL;
    char sx[160], sw[160];
    if (x->rank != 4 || w->rank != 4)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s and W %s must be 4-D", ocl_nnr_tstr(x, sx),
                                   ocl_nnr_tstr(w, sw));
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s and B have different dtypes", ocl_nnr_tstr(x, sx),
                                   ocl_nnr_tstr(w, sw));
    int64_t n = x->dims[0], c = x->dims[1], g = ocl_host->attr_get(k->op, k->attrs, "group")->i, oc;
    bool bad = g < 1 || c % g;
    if (!transposed) {
        oc = w->dims[0];
        bad = bad || oc % g || w->dims[1] * g != c;
    } else {
        oc = w->dims[1] * g;
        bad = bad || w->dims[0] != c;
    }
    if (bad)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s and group %lld do not match", ocl_nnr_tstr(x, sx),
                                   ocl_nnr_tstr(w, sw), (long long)g);
    if (b && (b->rank != 1 || b->dims[0] != oc))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "B must be 1-D with %lld elements", (long long)oc);
    win wn;
    char err[256];
    int64_t in_hw[2] = {x->dims[2], x->dims[3]}, wk[2] = {w->dims[2], w->dims[3]};
    if (window_resolve(k, transposed ? WIN_CONVT : WIN_CONV, in_hw, wk, &wn, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s: %s", ocl_nnr_tstr(x, sx), ocl_nnr_tstr(w, sw), err);
    int64_t od[4] = {n, oc, wn.out[0], wn.out[1]};
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, 4, od, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_nnr_kernel(k, "nn_conv", g_src, x->dtype, transposed ? "convt2d" : "conv2d", &kern))) return s;
    cl_long16 geo;
    const int64_t gv[16] = {n, c, x->dims[2], x->dims[3], oc, g, wk[0], wk[1], wn.out[0], wn.out[1], wn.s[0], wn.s[1],
                            wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    for (int i = 0; i < 16; i++) geo.s[i] = gv[i];
    cl_mem xm = ocl_mem(x), wm = ocl_mem(w), bm = b ? ocl_mem(b) : wm, ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), wo = ocl_off(w), bo = b ? ocl_off(b) : 0, yo = ocl_off(y);
    cl_int has_b = b != NULL;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(wm), OCL_ARG(wo), OCL_ARG(bm),
                      OCL_ARG(bo), OCL_ARG(has_b), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(geo)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 10, args, 1, &gsz, NULL);
}

wf_status *ocl_nn_k_conv(wf__kctx *k) { return conv_common(k, false); }
wf_status *ocl_nn_k_convt(wf__kctx *k) { return conv_common(k, true); }

/* ---- pools ------------------------------------------------------------------------------------------- */

wf_status *ocl_nn_k_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char sx[160], err[256];
    if (x->rank != 4) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s must be 4-D", ocl_nnr_tstr(x, sx));
    win wn;
    int64_t in_hw[2] = {x->dims[2], x->dims[3]};
    if (window_resolve(k, WIN_POOL, in_hw, NULL, &wn, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s: %s", ocl_nnr_tstr(x, sx), err);
    int64_t od[4] = {x->dims[0], x->dims[1], wn.out[0], wn.out[1]};
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, 4, od, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_nnr_kernel(k, "nn_conv", g_src, x->dtype, "pool2d", &kern))) return s;
    cl_long16 geo;
    const int64_t gv[16] = {od[0], od[1], x->dims[2], x->dims[3], 0, 1, wn.k[0], wn.k[1], wn.out[0], wn.out[1],
                            wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    for (int i = 0; i < 16; i++) geo.s[i] = gv[i];
    cl_long2 pe;
    pe.s[0] = wn.pe[0];
    pe.s[1] = wn.pe[1];
    cl_int is_max = !strcmp(k->op->name, "MaxPool2D");
    cl_int include_pad = !is_max && ocl_host->attr_get(k->op, k->attrs, "count_include_pad")->i != 0;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(geo), OCL_ARG(pe), OCL_ARG(is_max),
                      OCL_ARG(include_pad)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 8, args, 1, &gsz, NULL);
}

wf_status *ocl_nn_k_global_avg_pool(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char sx[160];
    if (x->rank < 3) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s must have rank >= 3", ocl_nnr_tstr(x, sx));
    int64_t od[WF_MAX_RANK], inner = 1;
    for (int i = 0; i < x->rank; i++) {
        od[i] = i < 2 ? x->dims[i] : 1;
        if (i >= 2) inner *= x->dims[i];
    }
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, od, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_nnr_kernel(k, "nn_conv", g_src, x->dtype, "gap", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), in = (cl_ulong)inner;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(in)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 5, args, 1, &gsz, NULL);
}
