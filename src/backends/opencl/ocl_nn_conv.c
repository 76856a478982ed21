/*
 * OpenCL Conv2D, ConvTranspose2D, MaxPool2D, AvgPool2D and GlobalAvgPool as direct kernels, one output
 * element per work-item (a gather, so no two work-items write the same element). The window geometry
 * comes from ops/nn_window.h, the header the registry's shape inference uses too.
 */
#include <stdio.h>

#include "backends/opencl/ocl_nnr.h"
#include "ops/kutil_conv.h"
#include "ops/nn_window.h"

/* The window geometry: the same header the registry's shape inference uses, read through the host table. */
static int window_resolve(const wf__kctx *k, int kind, const int64_t *in_hw, const int64_t *wk, wf__nn_window *w,
                          char *err, size_t en)
{
    return wf__nn_window_resolve_with(ocl_host->attr_get, k->op, k->attrs, kind, in_hw, wk, w, err, en);
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
    if (!wf__ku_conv_channels(c, w->dims, g, transposed, &oc))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "X %s, W %s and group %lld do not match", ocl_nnr_tstr(x, sx),
                                   ocl_nnr_tstr(w, sw), (long long)g);
    if (b && (b->rank != 1 || b->dims[0] != oc))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "B must be 1-D with %lld elements", (long long)oc);
    wf__nn_window wn;
    char err[256];
    int64_t in_hw[2] = {x->dims[2], x->dims[3]}, wk[2] = {w->dims[2], w->dims[3]};
    if (window_resolve(k, transposed ? WF__WIN_CONVT : WF__WIN_CONV, in_hw, wk, &wn, err, sizeof err))
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
    wf__nn_window wn;
    int64_t in_hw[2] = {x->dims[2], x->dims[3]};
    if (window_resolve(k, WF__WIN_POOL, in_hw, NULL, &wn, err, sizeof err))
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
