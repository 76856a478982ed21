/*
 * OpenCL backward ops of convolution and pooling (Conv2DBackpropInput, Conv2DBackpropFilter, MaxPool2DGrad,
 * AvgPool2DGrad, GlobalAvgPoolGrad), one output element per work-item: every kernel is a gather, so no two
 * work-items write one element and no atomics are needed. Semantics are the CPU kernels' (k_nn_grad.c).
 */
#include <stdio.h>

#include "backends/opencl/ocl_nnr.h"
#include "ops/nn_window.h"

/* Geometry travels as one long16: n c h w m g kh kw oh ow sh sw dh dw ph pw (pools: m unused, g 1), and
 * the pools' end pads as a long2. Sums accumulate in DBL (double where the device has it). */
static const char *g_src = OCL_NNR_PRELUDE
    "#define GEO long N = g.s0, C = g.s1, H = g.s2, W = g.s3, M = g.s4, G = g.s5, KH = g.s6, KW = g.s7,\\\n"
    "  OH = g.s8, OW = g.s9, SH = g.sa, SW = g.sb, DH = g.sc, DW = g.sd, PH = g.se, PW = g.sf\n"
    /* dx(n, c, ih, iw) gathers tap (a, b) of output (oh, ow) when ih = oh*SH - PH + a*DH exactly */
    "__kernel void conv_bp_input(__global const T *w, ulong wo, __global const T *dy, ulong dyo,\n"
    "                            __global T *dx, ulong dxo, long16 g) {\n"
    "  GEO;\n"
    "  long gid = get_global_id(0), iw = gid % W, t = gid / W, ih = t % H; t /= H;\n"
    "  long c = t % C, n = t / C, icg = C / G, ocg = M / G, grp = c / icg, j = c % icg;\n"
    "  w += wo; dy += dyo; dx += dxo;\n"
    "  DBL acc = 0;\n"
    "  for (long m = grp * ocg; m < (grp + 1) * ocg; m++) {\n"
    "    const __global T *wp = w + (m * icg + j) * KH * KW, *dp = dy + (n * M + m) * OH * OW;\n"
    "    for (long a = 0; a < KH; a++) {\n"
    "      long th = ih + PH - a * DH;\n"
    "      if (th < 0 || th % SH) continue;\n"
    "      long oh = th / SH;\n"
    "      if (oh >= OH) continue;\n"
    "      for (long b = 0; b < KW; b++) {\n"
    "        long tw = iw + PW - b * DW;\n"
    "        if (tw < 0 || tw % SW) continue;\n"
    "        long ow = tw / SW;\n"
    "        if (ow < OW) acc += (DBL)LD(wp, a * KW + b) * (DBL)LD(dp, oh * OW + ow);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  ST(dx, gid, (CT)acc);\n"
    "}\n"
    "__kernel void conv_bp_filter(__global const T *x, ulong xo, __global const T *dy, ulong dyo,\n"
    "                             __global T *dw, ulong dwo, long16 g) {\n"
    "  GEO;\n"
    "  long gid = get_global_id(0), b = gid % KW, t = gid / KW, a = t % KH; t /= KH;\n"
    "  long icg = C / G, ocg = M / G, j = t % icg, m = t / icg, c = (m / ocg) * icg + j;\n"
    "  x += xo; dy += dyo; dw += dwo;\n"
    "  DBL acc = 0;\n"
    "  for (long n = 0; n < N; n++) {\n"
    "    const __global T *xp = x + (n * C + c) * H * W, *dp = dy + (n * M + m) * OH * OW;\n"
    "    for (long oh = 0; oh < OH; oh++) {\n"
    "      long ih = oh * SH - PH + a * DH;\n"
    "      if (ih < 0 || ih >= H) continue;\n"
    "      for (long ow = 0; ow < OW; ow++) {\n"
    "        long iw = ow * SW - PW + b * DW;\n"
    "        if (iw >= 0 && iw < W) acc += (DBL)LD(dp, oh * OW + ow) * (DBL)LD(xp, ih * W + iw);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  ST(dw, gid, (CT)acc);\n"
    "}\n"
    /* the tap of window (yh, yw) that MaxPool2D's loop selects: the first NaN, else the first strict
     * maximum in row-major order; a window of -inf only gives its first valid tap; -1 for none */
    /* scalars, not the long16: a vector argument of a non-kernel function changes the ABI without AVX-512 */
    "long max_tap(const __global T *xp, long yh, long yw, long H, long W, long KH, long KW, long SH, long SW,\n"
    "             long DH, long DW, long PH, long PW) {\n"
    "  DBL acc = -INFINITY;\n"
    "  long arg = -1, first = -1;\n"
    "  for (long a = 0; a < KH; a++) {\n"
    "    long ih = yh * SH - PH + a * DH;\n"
    "    if (ih < 0 || ih >= H) continue;\n"
    "    for (long b = 0; b < KW; b++) {\n"
    "      long iw = yw * SW - PW + b * DW;\n"
    "      if (iw < 0 || iw >= W) continue;\n"
    "      DBL v = (DBL)LD(xp, ih * W + iw);\n"
    "      if (first < 0) first = ih * W + iw;\n"
    "      if ((v > acc || isnan(v)) && !isnan(acc)) { acc = v; arg = ih * W + iw; }\n"
    "    }\n"
    "  }\n"
    "  return arg < 0 ? first : arg;\n"
    "}\n"
    /* dx(p, ih, iw) sums the windows that selected it (is_max) or that cover it with dy / divisor;
     * tap a of window yh covers ih when ih = yh*SH - PH + a*DH, so each window is met once */
    "__kernel void pool_grad(__global const T *x, ulong xo, __global const T *dy, ulong dyo, __global T *dx,\n"
    "                        ulong dxo, long16 g, long2 pe, int is_max, int include_pad) {\n"
    "  GEO;\n"
    "  long gid = get_global_id(0), iw = gid % W, t = gid / W, ih = t % H, p = t / H;\n"
    "  const __global T *xp = x + xo + p * H * W, *dp = dy + dyo + p * OH * OW;\n"
    "  dx += dxo;\n"
    "  DBL acc = 0;\n"
    "  for (long a = 0; a < KH; a++) {\n"
    "    long th = ih + PH - a * DH;\n"
    "    if (th < 0 || th % SH) continue;\n"
    "    long yh = th / SH;\n"
    "    if (yh >= OH) continue;\n"
    "    for (long b = 0; b < KW; b++) {\n"
    "      long tw = iw + PW - b * DW;\n"
    "      if (tw < 0 || tw % SW) continue;\n"
    "      long yw = tw / SW;\n"
    "      if (yw >= OW) continue;\n"
    "      if (is_max) {\n"
    "        if (max_tap(xp, yh, yw, H, W, KH, KW, SH, SW, DH, DW, PH, PW) == ih * W + iw) acc += (DBL)LD(dp, yh * OW + yw);\n"
    "        continue;\n"
    "      }\n"
    "      long n_valid = 0, n_pad = 0;\n"
    "      for (long a2 = 0; a2 < KH; a2++) {\n"
    "        long r = yh * SH - PH + a2 * DH;\n"
    "        if (r < -PH || r >= H + pe.s0) continue;\n"
    "        for (long b2 = 0; b2 < KW; b2++) {\n"
    "          long q = yw * SW - PW + b2 * DW;\n"
    "          if (q < -PW || q >= W + pe.s1) continue;\n"
    "          n_pad++;\n"
    "          n_valid += r >= 0 && r < H && q >= 0 && q < W;\n"
    "        }\n"
    "      }\n"
    "      long div = include_pad ? n_pad : n_valid;\n"
    "      if (div) acc += (DBL)LD(dp, yh * OW + yw) / (DBL)div;\n"
    "    }\n"
    "  }\n"
    "  ST(dx, gid, (CT)acc);\n"
    "}\n"
    "__kernel void gap_grad(__global const T *dy, ulong dyo, __global T *dx, ulong dxo, ulong inner) {\n"
    "  size_t i = get_global_id(0);\n"
    "  dx += dxo;\n"
    "  ST(dx, i, (CT)((DBL)LD(dy + dyo, i / inner) / (DBL)inner));\n"
    "}\n";


/* A shape input (input_sizes, filter_sizes), read back to the host. */
static wf_status *read_sizes(wf__kctx *k, int idx, const char *what, int min_n, int max_n, int64_t *v, int *n)
{
    const wf_tensor *t = k->in[idx];
    char s[160];
    if (!wf__nn_sizes_form_ok(t, min_n, max_n))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be a 1-D i32/i64 tensor of %d values", what,
                                   ocl_nnr_tstr(t, s), min_n);
    int64_t raw[WF_MAX_RANK];
    *n = (int)t->dims[0];
    wf_status *st = ocl_nnr_read(k, t, raw, (size_t)*n * ocl_size(t->dtype));
    if (st) return st;
    for (int i = 0; i < *n; i++) v[i] = ocl_nnr_int_at(raw, t->dtype, i);
    int i = wf__nn_sizes_negative(v, *n);
    if (i >= 0)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s[%d] is %lld; must be >= 0", what, i, (long long)v[i]);
    return NULL;
}

static wf_status *check_float4(wf__kctx *k, const wf_tensor *t, const char *what, wf_dtype dt)
{
    char s[160];
    if (t->rank != 4 || t->dtype != dt)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be 4-D %s", what, ocl_nnr_tstr(t, s),
                                   ocl_nnr_dtname(dt));
    return NULL;
}

/* The forward window of input spatial in_hw; dy must be its output. */
static wf_status *window(wf__kctx *k, int kind, const int64_t *in_hw, const int64_t *wk, const wf_tensor *dy,
                         wf__nn_window *w)
{
    char err[320];
    if (wf__nn_grad_window(ocl_host->attr_get, k->op, k->attrs, kind, in_hw, wk, dy->dims + 2, w, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    return NULL;
}

static cl_long16 geo16(const int64_t *v)
{
    cl_long16 g;
    for (int i = 0; i < 16; i++) g.s[i] = v[i];
    return g;
}

/* Runs kernel `name` over out's elements with (a, dy, out, geometry) arguments. */
static wf_status *launch3(wf__kctx *k, const char *name, const wf_tensor *a, const wf_tensor *dy, wf_tensor *out,
                          cl_long16 geo)
{
    cl_kernel kern;
    wf_status *s = ocl_nnr_kernel(k, "nn_grad", g_src, out->dtype, name, &kern);
    if (s) return s;
    cl_mem am = ocl_mem(a), dm = ocl_mem(dy), om = ocl_mem(out);
    cl_ulong ao = ocl_off(a), dof = ocl_off(dy), oo = ocl_off(out);
    ocl_arg args[] = {OCL_ARG(am), OCL_ARG(ao), OCL_ARG(dm), OCL_ARG(dof), OCL_ARG(om), OCL_ARG(oo), OCL_ARG(geo)};
    size_t gsz = (size_t)out->size;
    return ocl_launch(k, kern, 7, args, 1, &gsz, NULL);
}

static wf_status *k_conv_bp_input(wf__kctx *k)
{
    const wf_tensor *w = k->in[1], *dy = k->in[2];
    int64_t xs[WF_MAX_RANK];
    int nx;
    char sw[160], sd[160];
    wf_status *s;
    if ((s = read_sizes(k, 0, "input_sizes", 4, 4, xs, &nx)) || (s = check_float4(k, dy, "dy", dy->dtype)) ||
        (s = check_float4(k, w, "W", dy->dtype)))
        return s;
    int64_t g = ocl_host->attr_get(k->op, k->attrs, "group")->i, m = w->dims[0];
    if (g < 1 || m % g || w->dims[1] * g != xs[1] || dy->dims[1] != m || dy->dims[0] != xs[0])
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "W %s, dy %s, group %lld and input_sizes [%lld,%lld,%lld,%lld] "
                                   "do not match", ocl_nnr_tstr(w, sw), ocl_nnr_tstr(dy, sd), (long long)g,
                                   (long long)xs[0], (long long)xs[1], (long long)xs[2], (long long)xs[3]);
    wf__nn_window wn;
    if ((s = window(k, WF__WIN_CONV, xs + 2, w->dims + 2, dy, &wn))) return s;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, dy->dtype, 4, xs, &y)) || !y->size) return s;
    const int64_t gv[16] = {xs[0], xs[1], xs[2], xs[3], m, g, w->dims[2], w->dims[3], wn.out[0], wn.out[1], wn.s[0],
                            wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    return launch3(k, "conv_bp_input", w, dy, y, geo16(gv));
}

static wf_status *k_conv_bp_filter(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *dy = k->in[2];
    int64_t fs[WF_MAX_RANK];
    int nf;
    char sx[160], sd[160];
    wf_status *s;
    if ((s = read_sizes(k, 1, "filter_sizes", 4, 4, fs, &nf)) || (s = check_float4(k, x, "x", x->dtype)) ||
        (s = check_float4(k, dy, "dy", x->dtype)))
        return s;
    int64_t g = ocl_host->attr_get(k->op, k->attrs, "group")->i;
    if (g < 1 || fs[0] % g || fs[1] * g != x->dims[1] || dy->dims[1] != fs[0] || dy->dims[0] != x->dims[0])
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "x %s, dy %s, group %lld and filter_sizes [%lld,%lld,%lld,%lld] "
                                   "do not match", ocl_nnr_tstr(x, sx), ocl_nnr_tstr(dy, sd), (long long)g,
                                   (long long)fs[0], (long long)fs[1], (long long)fs[2], (long long)fs[3]);
    wf__nn_window wn;
    if ((s = window(k, WF__WIN_CONV, x->dims + 2, fs + 2, dy, &wn))) return s;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, 4, fs, &y)) || !y->size) return s;
    /* an empty batch still launches: every work-item sums nothing and stores 0 */
    const int64_t gv[16] = {x->dims[0], x->dims[1], x->dims[2], x->dims[3], fs[0], g, fs[2], fs[3], wn.out[0],
                            wn.out[1], wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    return launch3(k, "conv_bp_filter", x, dy, y, geo16(gv));
}

/* MaxPool2DGrad (x, dy) and AvgPool2DGrad (input_sizes, dy). */
static wf_status *k_pool_grad(wf__kctx *k)
{
    bool is_max = !strcmp(k->op->name, "MaxPool2DGrad");
    const wf_tensor *dy = k->in[1], *x = is_max ? k->in[0] : NULL;
    int64_t xs[WF_MAX_RANK];
    int nx;
    char s1[160], s2[160];
    wf_status *s;
    if (is_max) {
        if ((s = check_float4(k, x, "x", x->dtype))) return s;
        memcpy(xs, x->dims, 4 * sizeof xs[0]);
    } else if ((s = read_sizes(k, 0, "input_sizes", 4, 4, xs, &nx))) {
        return s;
    }
    if ((s = check_float4(k, dy, "dy", is_max ? x->dtype : dy->dtype))) return s;
    if (xs[0] != dy->dims[0] || xs[1] != dy->dims[1])
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "x %s and dy %s differ in N or C",
                                   x ? ocl_nnr_tstr(x, s1) : "(input_sizes)", ocl_nnr_tstr(dy, s2));
    wf__nn_window wn;
    if ((s = window(k, WF__WIN_POOL, xs + 2, NULL, dy, &wn))) return s;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, dy->dtype, 4, xs, &y)) || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_nnr_kernel(k, "nn_grad", g_src, dy->dtype, "pool_grad", &kern))) return s;
    const int64_t gv[16] = {xs[0], xs[1], xs[2], xs[3], 0, 1, wn.k[0], wn.k[1], wn.out[0], wn.out[1],
                            wn.s[0], wn.s[1], wn.d[0], wn.d[1], wn.pb[0], wn.pb[1]};
    cl_long16 geo = geo16(gv);
    cl_long2 pe;
    pe.s[0] = wn.pe[0];
    pe.s[1] = wn.pe[1];
    cl_int im = is_max, include_pad = !is_max && ocl_host->attr_get(k->op, k->attrs, "count_include_pad")->i != 0;
    /* AvgPool2DGrad reads no x: dy's buffer stands in for the unused argument */
    cl_mem xm = ocl_mem(x ? x : dy), dm = ocl_mem(dy), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x ? x : dy), dof = ocl_off(dy), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(dm), OCL_ARG(dof), OCL_ARG(ym),
                      OCL_ARG(yo), OCL_ARG(geo), OCL_ARG(pe), OCL_ARG(im), OCL_ARG(include_pad)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 10, args, 1, &gsz, NULL);
}

static wf_status *k_gap_grad(wf__kctx *k)
{
    const wf_tensor *dy = k->in[1];
    int64_t xs[WF_MAX_RANK];
    int nx;
    char sd[160];
    wf_status *s = read_sizes(k, 0, "input_sizes", 3, WF_MAX_RANK, xs, &nx);
    if (s) return s;
    bool ok = dy->rank == nx;
    for (int i = 0; ok && i < nx; i++) ok = dy->dims[i] == (i < 2 ? xs[i] : 1);
    if (!ok)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "dy %s is not the GlobalAvgPool output of an input of %d dims",
                                   ocl_nnr_tstr(dy, sd), nx);
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, dy->dtype, nx, xs, &y)) || !y->size) return s;
    cl_kernel kern;
    if ((s = ocl_nnr_kernel(k, "nn_grad", g_src, dy->dtype, "gap_grad", &kern))) return s;
    cl_mem dm = ocl_mem(dy), ym = ocl_mem(y);
    cl_ulong dof = ocl_off(dy), yo = ocl_off(y), inner = (cl_ulong)(y->size / dy->size);
    ocl_arg args[] = {OCL_ARG(dm), OCL_ARG(dof), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(inner)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 5, args, 1, &gsz, NULL);
}

const wf__kernel_def ocl_kernels_nngrad[] = {
    {"Conv2DBackpropInput", "OPENCL", WF__DT_FLOATS, 2, k_conv_bp_input},
    {"Conv2DBackpropFilter", "OPENCL", WF__DT_FLOATS, 0, k_conv_bp_filter},
    {"MaxPool2DGrad", "OPENCL", WF__DT_FLOATS, 0, k_pool_grad},
    {"AvgPool2DGrad", "OPENCL", WF__DT_FLOATS, 1, k_pool_grad},
    {"GlobalAvgPoolGrad", "OPENCL", WF__DT_FLOATS, 1, k_gap_grad},
    {0},
};
