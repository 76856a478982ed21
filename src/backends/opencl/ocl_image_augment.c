/*
 * OpenCL kernels of the image conversions and stateless random augmentations (graph/ops_image.c):
 * ConvertImageDtype, StatelessRandomBrightness, StatelessRandomContrast, StatelessRandomFlipLeftRight and
 * StatelessRandomCrop. Semantics are src/backends/cpu/k_image_augment.c's, documented in weft.h.
 */
/* The seed is a host-memory input, so each image's draws (ops/kutil_image.h) are made on the host, in
 * the CPU kernel's arithmetic, and uploaded as one small table per launch: the flips and the crop offsets
 * are the CPU's bit for bit, and so is every output except where the CPU sums in double (contrast's
 * mean), which the device does too where it has double, in the CPU's order. The host arithmetic rounds
 * each operation, as the CPU kernel's does. */
#pragma GCC optimize("fp-contract=off")

#include <stdio.h>

#include "backends/opencl/ocl_image.h"
#include "backends/opencl/ocl_nnr.h"
#include "ops/kutil_image.h"

/* FP_CONTRACT OFF: each operation rounds on its own, as on the CPU. U8F is (float)(1.0 / 255.0) and U8D
 * 1.0 / 255.0, spelled exactly; 255.5 is exact in both. ET moves an element of DT by its bits (half has
 * no arithmetic without cl_khr_fp16). PRM is the type of the per-image brightness delta and contrast
 * factor: double for f64 images, else the f32 the CPU rounds them to. */
static const char *g_src =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    OCLIMG_PRELUDE
    "#define U8F 0x1.010102p-8f\n"
    "#define U8D 0x1.0101010101010p-8\n"
    "uchar sat_u8(float v) { return !(v > 0.0f) ? (uchar)0 : v >= 255.0f ? (uchar)255 : (uchar)v; }\n"
    "#ifdef HAS_FP64\n"
    "uchar sat_u8d(double v) { return !(v > 0.0) ? (uchar)0 : v >= 255.0 ? (uchar)255 : (uchar)v; }\n"
    "#endif\n"
    "#ifdef DT\n"
    "#if DT == 2 || DT == 9\n#define ET ulong\n#elif DT == 1 || DT == 8\n#define ET uint\n"
    "#elif DT == 3 || DT == 4 || DT == 7\n#define ET ushort\n#else\n#define ET uchar\n#endif\n"
    "#if DT == 2\n#define PRM double\n#else\n#define PRM float\n#endif\n"
    /* ConvertImageDtype from DT: u8 scales by 1/255 in f32 (f64: in double); floats convert as Cast */
    "#ifdef IS_U8\n#define VAL(p, i) ((float)(p)[i] * U8F)\n#else\n#define VAL(p, i) LD(p, i)\n#endif\n"
    "__kernel void k_cid_f32(__global const ST *x, ulong xo, __global float *y, ulong yo) {\n"
    "  ulong i = get_global_id(0); y[yo + i] = (float)VAL(x, xo + i);\n"
    "}\n"
    "__kernel void k_cid_f16(__global const ST *x, ulong xo, __global half *y, ulong yo) {\n"
    "  ulong i = get_global_id(0); vstore_half_rte((float)VAL(x, xo + i), yo + i, y);\n"
    "}\n"
    "__kernel void k_cid_bf16(__global const ST *x, ulong xo, __global ushort *y, ulong yo) {\n"
    "  ulong i = get_global_id(0); y[yo + i] = bf_st((float)VAL(x, xo + i));\n"
    "}\n"
    "#ifdef HAS_FP64\n"
    "__kernel void k_cid_f64(__global const ST *x, ulong xo, __global double *y, ulong yo) {\n"
    "  ulong i = get_global_id(0);\n"
    "#ifdef IS_U8\n"
    "  y[yo + i] = (double)x[xo + i] * U8D;\n"
    "#else\n"
    "  y[yo + i] = (double)LD(x, xo + i);\n"
    "#endif\n"
    "}\n"
    "#endif\n"
    "#ifdef IS_FLT\n"
    "__kernel void k_cid_u8(__global const ST *x, ulong xo, __global uchar *y, ulong yo) {\n"
    "  ulong i = get_global_id(0);\n"
    "#if DT == 2\n"
    "  y[yo + i] = sat_u8d(x[xo + i] * 255.5);\n"
    "#else\n"
    "  y[yo + i] = sat_u8((float)LD(x, xo + i) * 255.5f);\n"
    "#endif\n"
    "}\n"
    "#endif\n"
    /* Brightness and contrast (u8, f32, f64): `per` elements per image */
    "#if DT == 1 || DT == 2 || DT == 6\n"
    "__kernel void k_bright(__global const ST *x, ulong xo, __global ST *y, ulong yo, __global const PRM *d, long per) {\n"
    "  ulong g = get_global_id(0);\n"
    "  PRM dl = d[g / (ulong)per];\n"
    "#ifdef IS_U8\n"
    "  float v = (float)x[xo + g] * U8F;\n"
    "  v = v + dl;\n"
    "  y[yo + g] = sat_u8(v * 255.5f);\n"
    "#else\n"
    "  y[yo + g] = x[xo + g] + dl;\n"
    "#endif\n"
    "}\n"
    /* the mean of each (image, channel): one work item each, summing in the CPU's order and precision */
    "__kernel void k_cmean(__global const ST *x, ulong xo, __global ACC *mean, long hw, long c) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long n = (long)g / c, ch = (long)g % c;\n"
    "  ACC s = 0;\n"
    "  for (long p = 0; p < hw; p++) {\n"
    "    ulong e = xo + (ulong)((n * hw + p) * c + ch);\n"
    "#ifdef IS_U8\n"
    "    s += (ACC)((float)x[e] * U8F);\n"
    "#else\n"
    "    s += (ACC)x[e];\n"
    "#endif\n"
    "  }\n"
    "  mean[g] = hw ? s / (ACC)hw : (ACC)0;\n"
    "}\n"
    "__kernel void k_contrast(__global const ST *x, ulong xo, __global ST *y, ulong yo, __global const ACC *mean,\n"
    "                         __global const PRM *factor, long hw, long c) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long n = (long)g / (hw * c), ch = (long)g % c;\n"
    "#if DT == 2\n"
    "  double m = mean[n * c + ch];\n"
    "  y[yo + g] = (x[xo + g] - m) * factor[n] + m;\n"
    "#else\n"
    "  float mf = (float)mean[n * c + ch], ff = factor[n];\n"
    "#ifdef IS_U8\n"
    "  float v = (float)x[xo + g] * U8F;\n"
    "#else\n"
    "  float v = x[xo + g];\n"
    "#endif\n"
    "  v = (v - mf) * ff;\n"
    "  v = v + mf;\n"
    "#ifdef IS_U8\n"
    "  y[yo + g] = sat_u8(v * 255.5f);\n"
    "#else\n"
    "  y[yo + g] = v;\n"
    "#endif\n"
    "#endif\n"
    "}\n"
    "#endif\n"
    /* Flip and crop move elements: one work item per output element of [N, h, w, c] */
    "__kernel void k_flip(__global const ET *x, ulong xo, __global ET *y, ulong yo, __global const uchar *flip,\n"
    "                     long h, long w, long c) {\n"
    "  long g = (long)get_global_id(0);\n"
    "  long col = g / c % w, n = g / (c * w * h);\n"
    "  y[yo + (ulong)g] = x[xo + (ulong)(flip[n] ? g + (w - 1 - 2 * col) * c : g)];\n"
    "}\n"
    "__kernel void k_crop(__global const ET *x, ulong xo, __global ET *y, ulong yo, __global const long *off,\n"
    "                     long H, long W, long C, long h, long w, long c) {\n"
    "  long g = (long)get_global_id(0);\n"
    "  long ch = g % c, q = g / c, col = q % w; q /= w;\n"
    "  long r = q % h, n = q / h;\n"
    "  __global const long *o = off + 3 * n;\n"
    "  y[yo + (ulong)g] = x[xo + (ulong)(((n * H + o[0] + r) * W + o[1] + col) * C + o[2] + ch)];\n"
    "}\n"
    "#endif\n";

/* ---- ConvertImageDtype --------------------------------------------------------------------------- */

static wf_status *k_ConvertImageDtype(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_dtype to = (wf_dtype)oclimg_attr_i(k, "dtype");
    if (to == x->dtype) return ocl_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
    const char *name = to == WF_F32 ? "cid_f32" : to == WF_F64 ? "cid_f64" : to == WF_F16 ? "cid_f16"
                       : to == WF_BF16 ? "cid_bf16" : to == WF_U8 ? "cid_u8" : NULL;
    if (!name)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot convert an image from %s to %s",
                                   ocl_nnr_dtname(x->dtype), ocl_nnr_dtname(to));
    if (to == WF_F64 && !ocl_of(k)->fp64)
        return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "%s has no double precision", k->device->short_name);
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, to, x->rank, x->dims, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = oclimg_kernel(k, "image-augment", g_src, x->dtype, name, &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo)};
    return oclimg_run(k, kern, 4, args, (size_t)y->size);
}

/* ---- the random ops' common part ------------------------------------------------------------------ */

typedef wf__ki_geom img_geom; /* ops/kutil_image.h */

/* The image's geometry and the seed, checked as the CPU kernel does. */
static wf_status *image_and_seed(wf__kctx *k, img_geom *g)
{
    const wf_tensor *x = k->in[0], *sd = k->in[1];
    char s1[160];
    if (x->rank != 3 && x->rank != 4)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'image' %s must be [height, width, channels] or "
                                   "[batch, height, width, channels]", ocl_nnr_tstr(x, s1));
    if (sd->dtype != WF_I64 || sd->size != 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'seed' %s must be an i64 [2] tensor {seed, counter}",
                                   ocl_nnr_tstr(sd, s1));
    int64_t v[2];
    wf_status *s = ocl_nnr_read(k, sd, v, sizeof v);
    if (s) return s;
    *g = wf__ki_geom_of(x->dims, x->rank, v);
    return NULL;
}


static wf_status *host_table(wf__kctx *k, size_t bytes, void **out)
{
    *out = ocl_host->malloc(bytes ? bytes : 1);
    return *out ? NULL : ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %zu bytes of draws", bytes);
}

/* Each image's brightness delta (max_delta a) or contrast factor (lower a, upper b), drawn by
 * ops/kutil_image.h as the CPU draws it, stored as PRM: double for f64 images, else rounded to f32 as the
 * CPU rounds it there. */
static wf_status *image_params(wf__kctx *k, const img_geom *g, bool f64, bool bright, double a, double b, cl_mem *out)
{
    size_t es = f64 ? sizeof(cl_double) : sizeof(cl_float);
    void *p;
    wf_status *s = host_table(k, es * (size_t)g->n, &p);
    if (s) return s;
    for (int64_t i = 0; i < g->n; i++) {
        double v = bright ? wf__ki_delta(g, i, a) : wf__ki_factor(g, i, a, b);
        if (f64) ((cl_double *)p)[i] = v;
        else ((cl_float *)p)[i] = (cl_float)v;
    }
    s = oclimg_buffer(k, es * (size_t)g->n, p, out);
    ocl_host->free(p);
    return s;
}

/* ---- StatelessRandomBrightness -------------------------------------------------------------------- */

static wf_status *k_StatelessRandomBrightness(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    double max_delta = oclimg_attr_f(k, "max_delta");
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    cl_mem pm = NULL;
    s = image_params(k, &g, x->dtype == WF_F64, true, max_delta, 0, &pm);
    cl_kernel kern;
    if (!s) s = oclimg_kernel(k, "image-augment", g_src, x->dtype, "bright", &kern);
    if (!s) {
        cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(x), yo = ocl_off(y);
        cl_long per = g.h * g.w * g.c;
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(pm), OCL_ARG(per)};
        s = oclimg_run(k, kern, 6, args, (size_t)y->size);
    }
    if (pm) clReleaseMemObject(pm);
    return s;
}

/* ---- StatelessRandomContrast ---------------------------------------------------------------------- */

static wf_status *k_StatelessRandomContrast(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    double lo = oclimg_attr_f(k, "lower"), hi = oclimg_attr_f(k, "upper");
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    cl_mem fm = NULL, mm = NULL;
    cl_kernel kmean, kapply;
    s = image_params(k, &g, x->dtype == WF_F64, false, lo, hi, &fm);
    if (!s) s = oclimg_buffer(k, oclimg_acc_size(k) * (size_t)(g.n * g.c), NULL, &mm);
    if (!s) s = oclimg_kernel(k, "image-augment", g_src, x->dtype, "cmean", &kmean);
    if (!s) s = oclimg_kernel(k, "image-augment", g_src, x->dtype, "contrast", &kapply);
    if (!s) {
        cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(x), yo = ocl_off(y);
        cl_long hw = g.h * g.w, c = g.c;
        ocl_arg margs[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(mm), OCL_ARG(hw), OCL_ARG(c)};
        s = oclimg_run(k, kmean, 5, margs, (size_t)(g.n * g.c));
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(mm), OCL_ARG(fm),
                          OCL_ARG(hw), OCL_ARG(c)};
        if (!s) s = oclimg_run(k, kapply, 8, args, (size_t)y->size);
    }
    if (fm) clReleaseMemObject(fm);
    if (mm) clReleaseMemObject(mm);
    return s;
}

/* ---- StatelessRandomFlipLeftRight ----------------------------------------------------------------- */

static wf_status *k_StatelessRandomFlipLeftRight(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) || !y->size) return s;
    cl_uchar *flip;
    if ((s = host_table(k, (size_t)g.n, (void **)&flip))) return s;
    for (int64_t i = 0; i < g.n; i++) flip[i] = wf__ki_flip(&g, i);
    cl_mem fm = NULL;
    s = oclimg_buffer(k, (size_t)g.n, flip, &fm);
    ocl_host->free(flip);
    cl_kernel kern;
    if (!s) s = oclimg_kernel(k, "image-augment", g_src, x->dtype, "flip", &kern);
    if (!s) {
        cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(x), yo = ocl_off(y);
        cl_long h = g.h, w = g.w, c = g.c;
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(fm),
                          OCL_ARG(h),  OCL_ARG(w),  OCL_ARG(c)};
        s = oclimg_run(k, kern, 8, args, (size_t)y->size);
    }
    if (fm) clReleaseMemObject(fm);
    return s;
}

/* ---- StatelessRandomCrop -------------------------------------------------------------------------- */

static wf_status *k_StatelessRandomCrop(wf__kctx *k)
{
    img_geom g;
    wf_status *s = image_and_seed(k, &g);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    const wf__attr *sz = ocl_host->attr_get(k->op, k->attrs, "size");
    int64_t h = sz->ints[0], w = sz->ints[1], c = sz->ints[2];
    char s1[160];
    if (h > g.h || w > g.w || c > g.c)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "crop size [%lld,%lld,%lld] is larger than the image %s",
                                   (long long)h, (long long)w, (long long)c, ocl_nnr_tstr(x, s1));
    int64_t dims[4] = {g.n, h, w, c};
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->rank == 4 ? dims : dims + 1, &y)) || !y->size)
        return s;
    cl_long *off;
    if ((s = host_table(k, sizeof(cl_long) * 3 * (size_t)g.n, (void **)&off))) return s;
    for (int64_t i = 0; i < g.n; i++) {
        int64_t o3[3];
        wf__ki_crop(&g, i, h, w, c, o3);
        for (int j = 0; j < 3; j++) off[3 * i + j] = (cl_long)o3[j];
    }
    cl_mem om = NULL;
    s = oclimg_buffer(k, sizeof(cl_long) * 3 * (size_t)g.n, off, &om);
    ocl_host->free(off);
    cl_kernel kern;
    if (!s) s = oclimg_kernel(k, "image-augment", g_src, x->dtype, "crop", &kern);
    if (!s) {
        cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(x), yo = ocl_off(y);
        cl_long H = g.h, W = g.w, C = g.c, ch = h, cw = w, cc = c;
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(om), OCL_ARG(H),
                          OCL_ARG(W),  OCL_ARG(C),  OCL_ARG(ch), OCL_ARG(cw), OCL_ARG(cc)};
        s = oclimg_run(k, kern, 11, args, (size_t)y->size);
    }
    if (om) clReleaseMemObject(om);
    return s;
}

#define IMG_RANDOM (WF__DT_BIT(WF_U8) | WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64))

const wf__kernel_def ocl_kernels_image_augment[] = {
    {"ConvertImageDtype", "OPENCL", WF__DT_BIT(WF_U8) | WF__DT_FLOATS, 0, k_ConvertImageDtype, NULL, 0},
    {"StatelessRandomBrightness", "OPENCL", IMG_RANDOM, 0, k_StatelessRandomBrightness, NULL, 0},
    {"StatelessRandomContrast", "OPENCL", IMG_RANDOM, 0, k_StatelessRandomContrast, NULL, 0},
    {"StatelessRandomFlipLeftRight", "OPENCL", WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL), 0,
     k_StatelessRandomFlipLeftRight, NULL, 0},
    {"StatelessRandomCrop", "OPENCL", WF__DT_NUMERIC | WF__DT_BIT(WF_BOOL), 0, k_StatelessRandomCrop, NULL, 0},
    {NULL},
};
