/*
 * OpenCL kernels of resampling and geometry: Resize, GridSample, AffineGrid, RoiAlign, Col2Im, MaxUnpool,
 * CenterCropPad, plus the family's shared host helpers and kernel table (ocl_quant_signal.c adds signal,
 * quantisation, BitCast and RotaryEmbedding). Semantics follow src/backends/cpu/k_misc_resize.c,
 * k_image_sample.c and k_onnx.c; like them, arithmetic runs in double where the device has it.
 */
#include <math.h>
#include <stdio.h>

#include "backends/opencl/ocl_image.h"
#include "backends/opencl/ocl_nnr.h"
#include "ops/kutil_conv.h"
#include "ops/kutil_resize.h"

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
    "#ifdef DT\n"
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
    "}\n"
    /* Shape parameters of the gather kernels, passed by value (longs only: no padding). */
    "typedef struct { long a[8], b[8], c[8], d[8], e[8], f[8]; } p6_t;\n"
    /* BT moves bits: f16 cannot be dereferenced without cl_khr_fp16 */
    "#if DT == 3 || DT == 4\n#define BT ushort\n#else\n#define BT ST\n#endif\n"
    /* GridSample: one work item per output element; the grid is pre-widened to ACC. */
    "ACC gs_reflect(ACC x, ACC lo, ACC hi) {\n"
    "  ACC rng = hi - lo;\n"
    "  if (rng <= 0) return lo;\n"
    "  if (x < lo) { ACC dx = lo - x; long n = (long)(dx / rng); ACC r = dx - (ACC)n * rng; return n % 2 == 0 ? lo + r : hi - r; }\n"
    "  if (x > hi) { ACC dx = x - hi; long n = (long)(dx / rng); ACC r = dx - (ACC)n * rng; return n % 2 == 0 ? hi - r : lo + r; }\n"
    "  return x;\n"
    "}\n"
    "void gs_cubic(ACC t, ACC *w) {\n"
    "  const ACC a = -0.75; ACC x = t + 1;\n"
    "  w[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; x = t;\n"
    "  w[1] = ((a + 2) * x - (a + 3)) * x * x + 1; x = 1 - t;\n"
    "  w[2] = ((a + 2) * x - (a + 3)) * x * x + 1; x = 2 - t;\n"
    "  w[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;\n"
    "}\n"
    "__kernel void k_grid_sample(__global const ST *x, ulong xo, __global const ACC *gr, __global ST *y, ulong yo,\n"
    "    long C, long npts, int nsp, long d0, long d1, long d2, int md, int pad, int ac, int single) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long p = (long)(g % (ulong)npts), nc = (long)(g / (ulong)npts), n = nc / C;\n"
    "  long dims[3] = {d0, d1, d2}, st[3], plane = 1, base[3];\n"
    "  ACC lo[3], hi[3], w[3][4];\n"
    "  for (int i = nsp - 1; i >= 0; i--) { st[i] = plane; plane *= dims[i]; }\n"
    "  __global const ACC *gp = gr + (n * npts + p) * nsp;\n"
    "  for (int i = 0; i < nsp; i++) {\n"
    "    ACC v = gp[nsp - 1 - i], len = (ACC)dims[i], c;\n"
    "    lo[i] = ac ? (ACC)0 : (ACC)-0.5; hi[i] = ac ? len - 1 : len - (ACC)0.5;\n"
    "    if (single) { float f = (float)v; c = ac ? (ACC)((f + 1.0f) / 2.0f * (float)(len - 1)) : (ACC)(((f + 1.0f) * (float)len - 1.0f) / 2.0f); }\n"
    "    else c = ac ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2;\n"
    "    if (md == 0) c = rint(c);\n"
    "    if (c < lo[i] || c > hi[i]) {\n"
    "      if (pad == 1) c = c < 0 ? (ACC)0 : c > len - 1 ? len - 1 : c;\n"
    "      else if (pad == 2) c = gs_reflect(c, lo[i], hi[i]);\n"
    "    }\n"
    "    if (md == 0) { base[i] = (long)c; w[i][0] = 1; }\n"
    "    else { ACC f = floor(c), t = c - f; base[i] = (long)f - (md == 2 ? 1 : 0);\n"
    "      if (md == 1) { w[i][0] = 1 - t; w[i][1] = t; } else gs_cubic(t, w[i]); }\n"
    "  }\n"
    "  int taps = md == 0 ? 1 : md == 1 ? 2 : 4, ncorner = 1;\n"
    "  for (int i = 0; i < nsp; i++) ncorner *= taps;\n"
    "  ulong po = xo + (ulong)(nc * plane);\n"
    "  ACC acc = 0;\n"
    "  for (int cn = 0; cn < ncorner; cn++) {\n"
    "    ACC wt = 1; int q = cn; long off = 0; bool zero = false;\n"
    "    for (int i = nsp - 1; i >= 0; i--) {\n"
    "      int o = q % taps; q /= taps;\n"
    "      long v = base[i] + o, d = dims[i];\n"
    "      wt *= w[i][o];\n"
    "      if (v < 0 || v >= d) {\n"
    "        if (pad == 0) zero = true;\n"
    "        if (pad == 2) v = (long)gs_reflect((ACC)v, lo[i], hi[i]);\n"
    "        v = v < 0 ? 0 : v >= d ? d - 1 : v;\n"
    "      }\n"
    "      off += v * st[i];\n"
    "    }\n"
    "    if (wt != 0) acc += wt * (zero ? (ACC)0 : LDA(x, po + (ulong)off));\n"
    "  }\n"
    "  STA(y, yo + g, acc);\n"
    "}\n"
    /* AffineGrid: one work item per output value (point, row). */
    "__kernel void k_affine_grid(__global const ST *th, ulong to, __global ST *y, ulong yo, long npts, int nsp,\n"
    "    long s0, long s1, long s2, int ac) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long r = (long)(g % (ulong)nsp), pt = (long)(g / (ulong)nsp), p = pt % npts, bn = pt / npts;\n"
    "  long sz[3] = {s0, s1, s2}, q = p;\n"
    "  ACC h[4];\n"
    "  for (int i = nsp - 1; i >= 0; i--) {\n"
    "    long len = sz[i], v = q % len; q /= len;\n"
    "    h[nsp - 1 - i] = ac ? (len > 1 ? (ACC)-1.0 + (ACC)2.0 * (ACC)v / (ACC)(len - 1) : (ACC)-1.0)\n"
    "                        : (ACC)-1.0 + ((ACC)2.0 * (ACC)v + (ACC)1.0) / (ACC)len;\n"
    "  }\n"
    "  h[nsp] = 1;\n"
    "  ulong t0 = to + (ulong)(bn * nsp * (nsp + 1) + r * (nsp + 1));\n"
    "  ACC acc = 0;\n"
    "  for (int j = 0; j <= nsp; j++) acc += LDA(th, t0 + j) * h[j];\n"
    "  STA(y, yo + g, acc);\n"
    "}\n"
    /* RoiAlign: one work item per output element (roi, channel, ph, pw). */
    "__kernel void k_roi_align(__global const ST *x, ulong xo, __global const ST *ro, ulong roo,\n"
    "    __global const int *bi, ulong bio, int bi64, long N, __global ST *y, ulong yo, long C, long H, long W,\n"
    "    long oh, long ow, long sr, ACC scale, int hpx, int is_max) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long pw = (long)(g % (ulong)ow), t = (long)(g / (ulong)ow), ph = t % oh; t /= oh;\n"
    /* a bad batch index has failed the run (ocl_check_ints): clamped, it stays in bounds */
    "  long c = t % C, r = t / C, bn = bi64 ? ((__global const long *)bi)[bio + r] : (long)bi[bio + r];\n"
    "  bn = bn < 0 ? 0 : bn >= N ? N - 1 : bn;\n"
    "  ACC off = hpx ? (ACC)0.5 : (ACC)0;\n"
    "  ACC x0 = LDA(ro, roo + r * 4) * scale - off, y0 = LDA(ro, roo + r * 4 + 1) * scale - off;\n"
    "  ACC rw = LDA(ro, roo + r * 4 + 2) * scale - off - x0, rh = LDA(ro, roo + r * 4 + 3) * scale - off - y0;\n"
    "  if (!hpx) { rw = rw > 1 ? rw : (ACC)1; rh = rh > 1 ? rh : (ACC)1; }\n"
    "  ACC bh = rh / (ACC)oh, bw = rw / (ACC)ow;\n"
    "  long gh = sr > 0 ? sr : (long)ceil(rh / (ACC)oh), gw = sr > 0 ? sr : (long)ceil(rw / (ACC)ow);\n"
    "  ACC count = (ACC)(gh * gw > 1 ? gh * gw : 1);\n"
    "  ulong pl = xo + (ulong)((bn * C + c) * H * W);\n"
    "  ACC acc = 0; bool first = true;\n"
    "  for (long iy = 0; iy < gh; iy++)\n"
    "    for (long ix = 0; ix < gw; ix++) {\n"
    "      ACC yy = y0 + (ACC)ph * bh + ((ACC)iy + (ACC)0.5) * bh / (ACC)gh;\n"
    "      ACC xx = x0 + (ACC)pw * bw + ((ACC)ix + (ACC)0.5) * bw / (ACC)gw;\n"
    "      ACC v[4] = {0, 0, 0, 0};\n"
    "      if (!(yy < -1 || yy > (ACC)H || xx < -1 || xx > (ACC)W)) {\n"
    "        yy = yy > 0 ? yy : (ACC)0; xx = xx > 0 ? xx : (ACC)0;\n"
    "        long yl = (long)yy, xl = (long)xx, yh, xh;\n"
    "        if (yl >= H - 1) { yh = yl = H - 1; yy = (ACC)yl; } else yh = yl + 1;\n"
    "        if (xl >= W - 1) { xh = xl = W - 1; xx = (ACC)xl; } else xh = xl + 1;\n"
    "        ACC ly = yy - (ACC)yl, lx = xx - (ACC)xl, hy = 1 - ly, hx = 1 - lx;\n"
    "        v[0] = hy * hx * LDA(x, pl + yl * W + xl); v[1] = hy * lx * LDA(x, pl + yl * W + xh);\n"
    "        v[2] = ly * hx * LDA(x, pl + yh * W + xl); v[3] = ly * lx * LDA(x, pl + yh * W + xh);\n"
    "      }\n"
    "      if (is_max) {\n"
    "        ACC m = v[0];\n"
    "        for (int q = 1; q < 4; q++) m = v[q] > m ? v[q] : m;\n"
    "        acc = first || m > acc ? m : acc;\n"
    "      } else acc += v[0] + v[1] + v[2] + v[3];\n"
    "      first = false;\n"
    "    }\n"
    "  STA(y, yo + g, is_max ? acc : acc / count);\n"
    "}\n"
    /* Col2Im as a gather: each image element sums, kernel offset by kernel offset (the CPU's order),
     * the one block position per offset that lands on it. a: image, b: block, c: blocks per dim,
     * d: strides, e: leading pads, f: dilations. */
    "__kernel void k_col2im(__global const ST *x, ulong xo, __global ST *y, ulong yo, p6_t P, int n, long isz,\n"
    "    long bsz, long L) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long nc = (long)(g / (ulong)isz), pix = (long)(g % (ulong)isz), pos[8], q = pix;\n"
    "  for (int i = n - 1; i >= 0; i--) { pos[i] = q % P.a[i]; q /= P.a[i]; }\n"
    "  ACC acc = 0;\n"
    "  for (long kb = 0; kb < bsz; kb++) {\n"
    "    long r = kb, l = 0, lm = 1; bool ok = true;\n"
    "    for (int i = n - 1; i >= 0 && ok; i--) {\n"
    "      long kof = r % P.b[i]; r /= P.b[i];\n"
    "      long t = pos[i] + P.e[i] - kof * P.f[i];\n"
    "      if (t < 0 || t % P.d[i]) { ok = false; break; }\n"
    "      long li = t / P.d[i];\n"
    "      if (li >= P.c[i]) { ok = false; break; }\n"
    "      l += li * lm; lm *= P.c[i];\n"
    "    }\n"
    "    if (ok) acc += LDA(x, xo + (ulong)((nc * bsz + kb) * L + l));\n"
    "  }\n"
    "  STA(y, yo + g, acc);\n"
    "}\n"
    /* MaxUnpool: scatter by the indices (i64 when i64, else i32; checked on the device before: a bad one has
     * failed the run and is skipped here) into the zero-filled output. a: unpooled dims, b: their strides,
     * c: output strides; total: the unpooled elements. */
    "__kernel void k_max_unpool(__global const BT *x, ulong xo, __global const uchar *ix, ulong io, int i64,\n"
    "    long total, __global BT *y, ulong yo, p6_t P, int rank) {\n"
    "  ulong e = get_global_id(0);\n"
    "  long v = i64 ? ((__global const long *)ix)[io + e] : (long)((__global const int *)ix)[io + e], off = 0;\n"
    "  if (v < 0 || v >= total) return;\n"
    "  for (int i = 0; i < rank; i++) off += (v / P.b[i]) % P.a[i] * P.c[i];\n"
    "  y[yo + (ulong)off] = x[xo + e];\n"
    "}\n"
    /* CenterCropPad: a: output dims, b: input dims, c: input strides, d: shift (input = output + shift). */
    "__kernel void k_ccp(__global const BT *x, ulong xo, __global BT *y, ulong yo, p6_t P, int rank) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long r = (long)g, off = 0; bool inside = true;\n"
    "  for (int d = rank - 1; d >= 0; d--) {\n"
    "    long c = r % P.a[d] + P.d[d]; r /= P.a[d];\n"
    "    if (c < 0 || c >= P.b[d]) inside = false;\n"
    "    off += c * P.c[d];\n"
    "  }\n"
    "  y[yo + g] = inside ? x[xo + (ulong)off] : (BT)0;\n"
    "}\n"
    "#endif\n";

/* ---- Resize ------------------------------------------------------------------------------------------- */

/* Output shape and per-axis scales from scales or sizes (ONNX Resize, keep_aspect_ratio_policy). */
static wf_status *resize_shape(wf__kctx *k, int rank, const int64_t *x, const int *ax, int na, const double *sc,
                               int nsc, const int64_t *sz, int nsz, int64_t *out, double *scale)
{
    char err[256];
    if (!wf__ku_resize_shape(rank, x, ax, na, sc, nsc, sz, nsz, oclimg_attr_s(k, "keep_aspect_ratio_policy"), out, scale,
                             err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    return NULL;
}

/* One pass over axis d: cur (dims cd) -> a new buffer with cd[d] = out_len. */
static wf_status *resize_pass(wf__kctx *k, wf_dtype dt, const wf__ku_rs_params *P, int rank, int64_t *cd, int d,
                              int64_t out_len, double scale, double r0, double r1, cl_mem *cur)
{
    bool f64 = ocl_of(k)->fp64;
    int n = wf__ku_rs_tap_count(P, scale);
    size_t nt = (size_t)(out_len * n + 1);
    int64_t *idx = ocl_host->malloc(sizeof(int64_t) * nt);
    double *w = ocl_host->malloc(sizeof(double) * nt);
    uint8_t *ext = ocl_host->malloc((size_t)out_len + 1);
    wf_status *s = NULL;
    cl_mem bi = NULL, bw = NULL, be = NULL, next = NULL;
    if (!idx || !w || !ext) s = ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for the taps of axis %d", d);
    if (!s) {
        wf__ku_rs_axis_taps(P, n, cd[d], out_len, scale, r0, r1, idx, w, ext);
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
    if (!s) s = oclimg_kernel(k, "image", g_src, dt, "rs_pass", &kern);
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
    wf__ku_rs_params P = {.mode = oclimg_attr_s(k, "mode"),
                             .ctm = oclimg_attr_s(k, "coordinate_transformation_mode"),
                             .nearest = oclimg_attr_s(k, "nearest_mode"),
                             .cubic_a = oclimg_attr_f(k, "cubic_coeff_a"),
                             .extrap = oclimg_attr_f(k, "extrapolation_value"),
                             .exclude = oclimg_attr_i(k, "exclude_outside") != 0};
    P.antialias = oclimg_attr_i(k, "antialias") != 0 && strcmp(P.mode, "nearest");
    const wf__attr *axa = ocl_host->attr_get(k->op, k->attrs, "axes");
    int axes[WF_MAX_RANK], na = axa->n, rank = x->rank;
    char b[160], err[256];
    ocl_nnr_tstr(x, b);
    if (!wf__ku_resize_axes(rank, na, axa->ints, b, axes, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
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
    if (crop) {
        if (!oclimg_has(k, 1))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "tf_crop_and_resize needs roi (input 1)");
        if ((s = oclimg_floats(k, 1, "roi", roi, 2 * WF_MAX_RANK, &nroi))) return s;
    }
    if (!wf__ku_resize_roi(rank, x->dims, yd, na, axes, want, crop, roi, nroi, b, r0, r1, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
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
        if (!identity) s = resize_pass(k, x->dtype, &P, rank, cd, d, yd[d], scale[d], r0[d], r1[d], &cur);
    }
    if (!s && !(s = oclimg_kernel(k, "image", g_src, x->dtype, "narrow", &kern))) {
        ocl_arg args[] = {OCL_ARG(cur), OCL_ARG(ym), OCL_ARG(yo)};
        s = oclimg_run(k, kern, 3, args, (size_t)y->size);
    }
    clReleaseMemObject(cur);
    return s;
}

/* ---- GridSample, AffineGrid ----------------------------------------------------------------------------- */

/* Matches p6_t in the kernel source. */
typedef struct {
    cl_long a[8], b[8], c[8], d[8], e[8], f[8];
} p6_t;

wf_status *oclimg_widen(wf__kctx *k, const wf_tensor *t, cl_mem *out)
{
    cl_kernel kern;
    wf_status *s = oclimg_buffer(k, oclimg_acc_size(k) * (size_t)t->size, NULL, out);
    if (s) return s;
    cl_mem tm = ocl_mem(t);
    cl_ulong to = ocl_off(t);
    if (!(s = oclimg_kernel(k, "image", g_src, t->dtype, "widen", &kern))) {
        ocl_arg args[] = {OCL_ARG(tm), OCL_ARG(to), OCL_ARG(*out)};
        s = oclimg_run(k, kern, 3, args, (size_t)t->size);
    }
    if (s) clReleaseMemObject(*out);
    return s;
}

static wf_status *k_GridSample(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *G = k->in[1];
    int nsp = X->rank - 2;
    if (nsp < 1 || nsp > MAXSP || G->rank != X->rank || G->dims[0] != X->dims[0] || G->dims[G->rank - 1] != nsp ||
        !oclew_is_float(G->dtype))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "grid must be float [N, out spatial..., %d] for X of rank %d (1 to 3 spatial dims)",
                                   nsp, X->rank);
    const char *mode = oclimg_attr_s(k, "mode"), *pad = oclimg_attr_s(k, "padding_mode");
    cl_int md = !strcmp(mode, "nearest") ? 0 : (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) ? 2 : 1;
    cl_int pd = !strcmp(pad, "border") ? 1 : !strcmp(pad, "reflection") ? 2 : 0;
    cl_int ac = oclimg_attr_i(k, "align_corners") != 0, single = G->dtype != WF_F64, ns = nsp;
    int64_t odims[WF_MAX_RANK] = {X->dims[0], X->dims[1]};
    cl_long d[3] = {1, 1, 1}, C = X->dims[1], npts = numel(nsp, G->dims + 1);
    for (int i = 0; i < nsp; i++) odims[2 + i] = G->dims[1 + i], d[i] = X->dims[2 + i];
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, X->dtype, X->rank, odims, &y);
    if (s || !y->size) return s;
    cl_mem gm;
    if ((s = oclimg_widen(k, G, &gm))) return s;
    cl_kernel kern;
    cl_mem xm = ocl_mem(X), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(X), yo = ocl_off(y);
    if (!(s = oclimg_kernel(k, "image", g_src, X->dtype, "grid_sample", &kern))) {
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo),   OCL_ARG(gm), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(C),
                          OCL_ARG(npts), OCL_ARG(ns), OCL_ARG(d[0]), OCL_ARG(d[1]), OCL_ARG(d[2]), OCL_ARG(md),
                          OCL_ARG(pd), OCL_ARG(ac), OCL_ARG(single)};
        s = oclimg_run(k, kern, 15, args, (size_t)y->size);
    }
    clReleaseMemObject(gm);
    return s;
}

static wf_status *k_AffineGrid(wf__kctx *k)
{
    const wf_tensor *T = k->in[0];
    int64_t sz[5];
    int n = 0;
    wf_status *s = oclimg_ints(k, 1, "size", sz, 5, &n);
    if (s) return s;
    int nsp = n - 2;
    if ((nsp != 2 && nsp != 3) || T->rank != 3 || T->dims[0] != sz[0] || T->dims[1] != nsp || T->dims[2] != nsp + 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "theta must be [N, 2, 3] with a size of 4 values or [N, 3, 4] with 5 (got %d)", n);
    for (int i = 0; i < n; i++)
        if (sz[i] < 0) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "size holds a negative value %lld", (long long)sz[i]);
    int64_t odims[5] = {sz[0]};
    cl_long npts = 1, sp[3] = {1, 1, 1};
    for (int i = 0; i < nsp; i++) odims[1 + i] = sz[2 + i], npts *= sz[2 + i], sp[i] = sz[2 + i];
    odims[nsp + 1] = nsp;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, T->dtype, nsp + 2, odims, &y)) || !y->size) return s;
    cl_kernel kern;
    if ((s = oclimg_kernel(k, "image", g_src, T->dtype, "affine_grid", &kern))) return s;
    cl_mem tm = ocl_mem(T), ym = ocl_mem(y);
    cl_ulong to = ocl_off(T), yo = ocl_off(y);
    cl_int ns = nsp, ac = oclimg_attr_i(k, "align_corners") != 0;
    ocl_arg args[] = {OCL_ARG(tm), OCL_ARG(to), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(npts), OCL_ARG(ns),
                      OCL_ARG(sp[0]), OCL_ARG(sp[1]), OCL_ARG(sp[2]), OCL_ARG(ac)};
    return oclimg_run(k, kern, 10, args, (size_t)y->size);
}

/* ---- RoiAlign ------------------------------------------------------------------------------------------- */

static wf_status *k_RoiAlign(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *rois = k->in[1], *bi = k->in[2];
    if (X->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || bi->rank != 1 || bi->dims[0] != rois->dims[0] ||
        rois->dtype != X->dtype || (bi->dtype != WF_I64 && bi->dtype != WF_I32))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "X, rois and batch_indices must be [N,C,H,W], [R,4] (X's dtype) and [R] (i32/i64)");
    cl_long N = X->dims[0], C = X->dims[1], H = X->dims[2], W = X->dims[3], R = rois->dims[0];
    cl_long oh = oclimg_attr_i(k, "output_height"), ow = oclimg_attr_i(k, "output_width");
    cl_long sr = oclimg_attr_i(k, "sampling_ratio");
    double scale = oclimg_attr_f(k, "spatial_scale");
    cl_int half = !strcmp(oclimg_attr_s(k, "coordinate_transformation_mode"), "half_pixel");
    cl_int is_max = !strcmp(oclimg_attr_s(k, "mode"), "max");
    /* a batch index outside [0, N) fails the run, as on the CPU: checked on the device, not read back */
    wf_status *s = ocl_check_ints(k, bi, OCL_SITE_ROI_BATCH, 0, N - 1, false, NULL, N, "");
    int64_t odims[4] = {R, C, oh, ow};
    wf_tensor *y = NULL;
    if (!s) s = ocl_host->kctx_output(k, 0, X->dtype, 4, odims, &y);
    if (s || !y->size || !N) return s; /* no batch: every index is bad, the run fails */
    cl_kernel kern;
    if ((s = oclimg_kernel(k, "image", g_src, X->dtype, "roi_align", &kern))) return s;
    cl_mem xm = ocl_mem(X), rm = ocl_mem(rois), bm = ocl_mem(bi), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(X), ro = ocl_off(rois), bo = ocl_off(bi), yo = ocl_off(y);
    cl_int b64 = bi->dtype == WF_I64;
    cl_double sd = scale;
    cl_float sf = (cl_float)scale;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(rm), OCL_ARG(ro),   OCL_ARG(bm), OCL_ARG(bo),
                      OCL_ARG(b64), OCL_ARG(N), OCL_ARG(ym), OCL_ARG(yo),   OCL_ARG(C),  OCL_ARG(H),
                      OCL_ARG(W),  OCL_ARG(oh), OCL_ARG(ow), OCL_ARG(sr),   ocl_of(k)->fp64 ? OCL_ARG(sd) : OCL_ARG(sf),
                      OCL_ARG(half), OCL_ARG(is_max)};
    return oclimg_run(k, kern, 19, args, (size_t)y->size);
}

/* ---- Col2Im --------------------------------------------------------------------------------------------- */

static wf_status *k_Col2Im(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    int64_t img[WF_MAX_RANK], blk[WF_MAX_RANK];
    int ni = 0, nb = 0;
    wf_status *s;
    if ((s = oclimg_ints(k, 1, "image_shape", img, WF_MAX_RANK - 2, &ni))) return s;
    if ((s = oclimg_ints(k, 2, "block_shape", blk, WF_MAX_RANK - 2, &nb))) return s;
    const wf__attr *da = ocl_host->attr_get(k->op, k->attrs, "dilations"),
                   *pa = ocl_host->attr_get(k->op, k->attrs, "pads"),
                   *sa = ocl_host->attr_get(k->op, k->attrs, "strides");
    int n = ni;
    if (ni != nb || ni < 1 || (da->n && da->n != n) || (sa->n && sa->n != n) || (pa->n && pa->n != 2 * n))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "image_shape (%d values), block_shape (%d), dilations (%d), strides (%d) and pads "
                                   "(%d) disagree", ni, nb, da->n, sa->n, pa->n);
    p6_t P;
    memset(&P, 0, sizeof P);
    cl_long bsz = 1, L = 1, isz = 1;
    for (int i = 0; i < n; i++) {
        int64_t d = da->n ? da->ints[i] : 1, st = sa->n ? sa->ints[i] : 1;
        int64_t p = pa->n ? pa->ints[i] + pa->ints[n + i] : 0;
        if (blk[i] < 1 || d < 1 || st < 1 || img[i] < 0)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "block_shape, dilations and strides must be positive");
        P.a[i] = img[i], P.b[i] = blk[i], P.c[i] = (img[i] + p - d * (blk[i] - 1) - 1) / st + 1;
        P.d[i] = st, P.e[i] = pa->n ? pa->ints[i] : 0, P.f[i] = d;
        bsz *= blk[i], L *= P.c[i], isz *= img[i];
    }
    if (X->rank != 3 || X->dims[1] % bsz || X->dims[2] != L)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "input must be [N, C * %lld, %lld] for these image and block shapes",
                                   (long long)bsz, (long long)L);
    int64_t odims[WF_MAX_RANK] = {X->dims[0], X->dims[1] / bsz};
    for (int i = 0; i < n; i++) odims[2 + i] = img[i];
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, X->dtype, n + 2, odims, &y)) || !y->size) return s;
    cl_kernel kern;
    if ((s = oclimg_kernel(k, "image", g_src, X->dtype, "col2im", &kern))) return s;
    cl_mem xm = ocl_mem(X), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(X), yo = ocl_off(y);
    cl_int nn = n;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(P),
                      OCL_ARG(nn), OCL_ARG(isz), OCL_ARG(bsz), OCL_ARG(L)};
    return oclimg_run(k, kern, 9, args, (size_t)y->size);
}

/* ---- MaxUnpool ------------------------------------------------------------------------------------------ */

/* Indices address the unpooled tensor of the default shape; with output_shape it sits at the start of
 * each axis of the larger output (as the ONNX reference has it). */
static wf_status *k_MaxUnpool(wf__kctx *k)
{
    const wf_tensor *X = k->in[0], *I = k->in[1];
    const wf__attr *ks = ocl_host->attr_get(k->op, k->attrs, "kernel_shape"),
                   *st = ocl_host->attr_get(k->op, k->attrs, "strides"),
                   *pd = ocl_host->attr_get(k->op, k->attrs, "pads");
    int nsp = ks->n, rank = nsp + 2;
    if (X->rank != rank || I->rank != rank || memcmp(X->dims, I->dims, sizeof(int64_t) * (size_t)rank) ||
        (I->dtype != WF_I64 && I->dtype != WF_I32))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "X and indices must have one shape of rank %d (indices i32 or i64)", rank);
    int64_t inf[WF_MAX_RANK] = {0}, out[WF_MAX_RANK];
    wf__ku_unpool_dims(X->dims, ks, st, pd, inf);
    memcpy(out, inf, sizeof inf);
    wf_status *s;
    if (oclimg_has(k, 2)) {
        int n = 0;
        if ((s = oclimg_ints(k, 2, "output_shape", out, WF_MAX_RANK, &n))) return s;
        bool ok = n == rank;
        for (int i = 0; ok && i < rank; i++) ok = out[i] >= inf[i] && (i >= 2 || out[i] == inf[i]);
        if (!ok)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                       "output_shape must have rank %d and hold the unpooled shape", rank);
    }
    int64_t total = numel(rank, inf);
    p6_t P;
    memset(&P, 0, sizeof P);
    int64_t so = 1, si = 1;
    for (int i = rank - 1; i >= 0; i--) {
        P.a[i] = inf[i], P.b[i] = si, P.c[i] = so;
        si *= inf[i], so *= out[i];
    }
    /* an index outside the unpooled elements fails the run, in the CPU's words: checked on the device */
    if ((s = ocl_check_ints(k, I, OCL_SITE_UNPOOL, 0, total - 1, false, NULL, total, ""))) return s;
    wf_tensor *y = NULL;
    if ((s = ocl_host->kctx_output(k, 0, X->dtype, rank, out, &y))) return s;
    if (y->size) {
        cl_uchar zero = 0;
        cl_int e = clEnqueueFillBuffer(ocl_of(k)->q, ocl_mem(y), &zero, 1, y->dev_offset,
                                       (size_t)y->size * ocl_size(y->dtype), 0, NULL, NULL);
        if (e != CL_SUCCESS) return ocl_fail(k, e, "output fill");
    }
    if (!X->size) return NULL;
    cl_kernel kern;
    if (!(s = oclimg_kernel(k, "image", g_src, X->dtype, "max_unpool", &kern))) {
        cl_mem xm = ocl_mem(X), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(X), yo = ocl_off(y);
        cl_mem im = ocl_mem(I);
        cl_ulong io = ocl_off(I);
        cl_int r = rank, i64 = I->dtype == WF_I64;
        cl_long tl = total;
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(im), OCL_ARG(io), OCL_ARG(i64), OCL_ARG(tl),
                          OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(P),  OCL_ARG(r)};
        s = oclimg_run(k, kern, 10, args, (size_t)X->size);
    }
    return s;
}

/* ---- CenterCropPad -------------------------------------------------------------------------------------- */

static wf_status *k_CenterCropPad(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *sh = k->in[1];
    const wf__attr *ax = ocl_host->attr_get(k->op, k->attrs, "axes");
    int na = ax->n ? ax->n : x->rank, rank = x->rank;
    if (sh->rank != 1 || sh->dims[0] != na)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape must have one value per axis (%d)", na);
    int64_t v[WF_MAX_RANK], yd[WF_MAX_RANK];
    int nv = 0;
    wf_status *s = oclimg_ints(k, 1, "shape", v, WF_MAX_RANK, &nv);
    if (s) return s;
    p6_t P;
    memset(&P, 0, sizeof P);
    for (int d = 0; d < rank; d++) yd[d] = x->dims[d];
    for (int i = 0; i < na; i++) {
        int64_t a = !ax->n ? i : ax->ints[i] < 0 ? ax->ints[i] + rank : ax->ints[i];
        if (a < 0 || a >= rank)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                                       (long long)(ax->n ? ax->ints[i] : i), rank);
        if (v[i] < 0) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "shape value %lld must be >= 0", (long long)v[i]);
        /* cropping takes the centre, padding centres the input; an odd difference goes to the end */
        P.d[a] = v[i] <= x->dims[a] ? (x->dims[a] - v[i]) / 2 : -((v[i] - x->dims[a]) / 2);
        yd[a] = v[i];
    }
    int64_t str = 1;
    for (int d = rank - 1; d >= 0; d--) P.a[d] = yd[d], P.b[d] = x->dims[d], P.c[d] = str, str *= x->dims[d];
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, rank, yd, &y)) || !y->size) return s;
    cl_kernel kern;
    if ((s = oclimg_kernel(k, "image", g_src, x->dtype, "ccp", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    cl_int r = rank;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(P), OCL_ARG(r)};
    return oclimg_run(k, kern, 6, args, (size_t)y->size);
}

/* ---- table -------------------------------------------------------------------------------------------- */

#define KI_(Op, mask, key) {#Op, "OPENCL", mask, key, k_##Op, NULL, 0},

const wf__kernel_def ocl_kernels_image[] = {
    KI_(Resize, WF__DT_NUMERIC, 0)
    KI_(GridSample, WF__DT_FLOATS, 0)
    KI_(AffineGrid, WF__DT_FLOATS, 0)
    KI_(RoiAlign, WF__DT_FLOATS, 0)
    KI_(Col2Im, WF__DT_NUMERIC, 0)
    KI_(MaxUnpool, WF__DT_NUMERIC, 0)
    KI_(CenterCropPad, WF__DT_ALL, 0)
    OCLIMG2_OPS(OCLIMG2_DEF)
    {NULL},
};
