/*
 * OpenCL kernels of signal ops (DFT, the Hann / Hamming / Blackman windows), quantisation (Quantize /
 * Dequantize / DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv), BitCast
 * and RotaryEmbedding. Semantics follow src/backends/cpu/k_signal_misc.c, k_onnx.c, k_onnx_quant.c and
 * k_onnx_attn.c; small per-tensor parameters (zero points, biases, scales) are read back on the host.
 */
#include <math.h>
#include <stdio.h>

#include "backends/opencl/ocl_image.h"
#include "backends/opencl/ocl_nnr.h"
#include "ops/kutil_half.h"
#include "ops/kutil_quant.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const char *g_src =
    OCLIMG_PRELUDE
    "typedef struct { long a[8], b[8], c[8], d[8], e[8], f[8]; } p6_t;\n"
    /* v rounded to float dtype t (wf__ko_round): f16 through a private half slot */
    "ACC rnd(ACC v, int t) {\n"
    "  if (t == 1) return (ACC)(float)v;\n"
    "  if (t == 3) { ushort h; vstore_half_rte((float)v, 0, (__private half *)&h); return (ACC)vload_half(0, (__private half *)&h); }\n"
    "  if (t == 4) return (ACC)bf_ld(bf_st((float)v));\n"
    "  return v;\n"
    "}\n"
    /* stores v to a float output of dtype t through its bytes */
    "void st_f(__global uchar *y, ulong i, int t, ACC v) {\n"
    "  if (t == 1) ((__global float *)y)[i] = (float)v;\n"
    "#ifdef HAS_FP64\n"
    "  else if (t == 2) ((__global double *)y)[i] = v;\n"
    "#endif\n"
    "  else if (t == 3) vstore_half_rte((float)v, i, (__global half *)y);\n"
    "  else if (t == 4) ((__global ushort *)y)[i] = bf_st((float)v);\n"
    "}\n"
    "void st_q(__global uchar *y, ulong i, int t, long q) {\n"
    "  if (t == 6) y[i] = (uchar)q; else if (t == 5) ((__global char *)y)[i] = (char)q;\n"
    "  else if (t == 7) ((__global short *)y)[i] = (short)q; else ((__global int *)y)[i] = (int)q;\n"
    "}\n"
    "long ld_q(__global const uchar *p, ulong i, int sgn) { return sgn ? (long)((__global const char *)p)[i] : (long)p[i]; }\n"
    /* where element i finds its scale / zero point: kind 0 tensor, 1 axis, 2 blocked */
    "long qmap(long i, int kind, long alen, long inner, long block, long nb) {\n"
    "  if (kind == 0) return 0;\n"
    "  long a = (i / inner) % alen;\n"
    "  if (kind == 1) return a;\n"
    "  return ((i / (inner * alen)) * nb + a / block) * inner + i % inner;\n"
    "}\n"
    "__kernel void k_tobool(__global const uchar *x, ulong xo, __global uchar *y, ulong yo) {\n"
    "  ulong i = get_global_id(0); y[yo + i] = x[xo + i] != 0;\n"
    "}\n"
    /* integer matmul over broadcast batches: a: batch dims, b / c: a's / b's batch strides (0 where
     * broadcast). acc = sum (a - za[m]) * (b - zb[n]). */
    "long imm(__global const uchar *a, ulong ao, int sa, __global const uchar *b, ulong bo, int sb,\n"
    "    __global const long *za, int nza, __global const long *zb, int nzb, const p6_t *P, int br,\n"
    "    long M, long K, long N, ulong g) {\n"
    "  long n = (long)(g % (ulong)N), t = (long)(g / (ulong)N), m = t % M, bi = t / M, oa = 0, ob = 0;\n"
    "  for (int d = br - 1; d >= 0; d--) { long c = bi % P->a[d]; bi /= P->a[d]; oa += c * P->b[d]; ob += c * P->c[d]; }\n"
    "  long zA = nza ? za[nza == 1 ? 0 : m] : 0, zB = nzb ? zb[nzb == 1 ? 0 : n] : 0, acc = 0;\n"
    "  ulong pa = ao + (ulong)(oa * M * K + m * K), pb = bo + (ulong)(ob * K * N + n);\n"
    "  for (long q = 0; q < K; q++) acc += (ld_q(a, pa + q, sa) - zA) * (ld_q(b, pb + (ulong)(q * N), sb) - zB);\n"
    "  return acc;\n"
    "}\n"
    "__kernel void k_mmi(__global const uchar *a, ulong ao, int sa, __global const uchar *b, ulong bo, int sb,\n"
    "    __global const long *za, int nza, __global const long *zb, int nzb, p6_t P, int br, long M, long K, long N,\n"
    "    __global int *y, ulong yo) {\n"
    "  ulong g = get_global_id(0);\n"
    "  y[yo + g] = (int)imm(a, ao, sa, b, bo, sb, za, nza, zb, nzb, &P, br, M, K, N, g);\n"
    "}\n"
    "__kernel void k_qlmm(__global const uchar *a, ulong ao, int sa, __global const uchar *b, ulong bo, int sb,\n"
    "    __global const long *za, int nza, __global const long *zb, int nzb, p6_t P, int br, long M, long K, long N,\n"
    "    __global uchar *y, ulong yo, int od, ACC mult, ACC z, long lo, long hi) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long acc = imm(a, ao, sa, b, bo, sb, za, nza, zb, nzb, &P, br, M, K, N, g);\n"
    "  ACC v = rint((ACC)acc * mult + z);\n"
    "  v = v < (ACC)lo ? (ACC)lo : v > (ACC)hi ? (ACC)hi : v;\n"
    "  st_q(y, yo + g, od, (long)v);\n"
    "}\n"
    /* integer convolution, one output element per work item. a: in, b: out, c: kernel, d: strides,
     * e: dilations, f: leading pads (spatial dims). */
    "long iconv(__global const uchar *x, ulong xo, int sx, __global const uchar *w, ulong wo, int sw, long zx,\n"
    "    __global const long *zw, int nzw, const p6_t *P, int ns, long C, long M, long G, ulong g, long *mo) {\n"
    "  long op = 1, kp = 1, ip = 1;\n"
    "  for (int i = 0; i < ns; i++) { op *= P->b[i]; kp *= P->c[i]; ip *= P->a[i]; }\n"
    "  long o = (long)(g % (ulong)op), t = (long)(g / (ulong)op), m = t % M, n = t / M;\n"
    "  long cg = C / G, mg = M / G, gr = m / mg, zW = nzw ? zw[nzw == 1 ? 0 : m] : 0, oc[8], r = o, sum = 0;\n"
    "  *mo = m;\n"
    "  for (int i = ns - 1; i >= 0; i--) { oc[i] = r % P->b[i]; r /= P->b[i]; }\n"
    "  for (long kk = 0; kk < kp; kk++) {\n"
    "    long rr = kk, off = 0, stride = 1; bool inside = true;\n"
    "    for (int i = ns - 1; i >= 0; i--) {\n"
    "      long c = oc[i] * P->d[i] - P->f[i] + (rr % P->c[i]) * P->e[i];\n"
    "      rr /= P->c[i];\n"
    "      if (c < 0 || c >= P->a[i]) inside = false;\n"
    "      off += c * stride; stride *= P->a[i];\n"
    "    }\n"
    "    if (!inside) continue;\n"
    "    for (long c = 0; c < cg; c++)\n"
    "      sum += (ld_q(x, xo + (ulong)((n * C + gr * cg + c) * ip + off), sx) - zx) *\n"
    "             (ld_q(w, wo + (ulong)((m * cg + c) * kp + kk), sw) - zW);\n"
    "  }\n"
    "  return sum;\n"
    "}\n"
    "__kernel void k_convi(__global const uchar *x, ulong xo, int sx, __global const uchar *w, ulong wo, int sw,\n"
    "    long zx, __global const long *zw, int nzw, p6_t P, int ns, long C, long M, long G, __global int *y, ulong yo) {\n"
    "  ulong g = get_global_id(0); long m;\n"
    "  y[yo + g] = (int)iconv(x, xo, sx, w, wo, sw, zx, zw, nzw, &P, ns, C, M, G, g, &m);\n"
    "}\n"
    "__kernel void k_qlconv(__global const uchar *x, ulong xo, int sx, __global const uchar *w, ulong wo, int sw,\n"
    "    long zx, __global const long *zw, int nzw, p6_t P, int ns, long C, long M, long G, __global uchar *y,\n"
    "    ulong yo, __global const long *bias, int has_bias, __global const ACC *mult, ACC z, int od, long lo, long hi) {\n"
    "  ulong g = get_global_id(0); long m;\n"
    "  long acc = iconv(x, xo, sx, w, wo, sw, zx, zw, nzw, &P, ns, C, M, G, g, &m);\n"
    "  if (has_bias) acc += bias[m];\n"
    "  ACC v = (ACC)acc * mult[m] + z;\n"
    "  v = v < (ACC)lo ? (ACC)lo : v > (ACC)hi ? (ACC)hi : v;\n"
    "  st_q(y, yo + g, od, (long)rint(v));\n"
    "}\n"
    /* DynamicQuantizeLinear: one work group finds the range (NaN wins), then every element is quantised
     * in f32 like the reference. */
    "__kernel void k_dq_range(__global const float *x, ulong xo, ulong n, __global float *ys, ulong so,\n"
    "    __global uchar *yz, ulong zo, __global float *par, __local float *lmx, __local float *lmn) {\n"
    "  uint l = get_local_id(0), L = get_local_size(0);\n"
    "  float mx = 0.0f, mn = 0.0f;\n"
    "  for (ulong i = l; i < n; i += L) {\n"
    "    float v = x[xo + i];\n"
    "    if (isnan(v) || isnan(mx)) mx = NAN; else mx = v > mx ? v : mx;\n"
    "    if (isnan(v) || isnan(mn)) mn = NAN; else mn = v < mn ? v : mn;\n"
    "  }\n"
    "  lmx[l] = mx; lmn[l] = mn;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (uint s = L / 2; s > 0; s /= 2) {\n"
    "    if (l < s) {\n"
    "      float a = lmx[l], b = lmx[l + s]; lmx[l] = isnan(a) || isnan(b) ? NAN : a > b ? a : b;\n"
    "      a = lmn[l]; b = lmn[l + s]; lmn[l] = isnan(a) || isnan(b) ? NAN : a < b ? a : b;\n"
    "    }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (l == 0) {\n"
    "    mx = lmx[0]; mn = lmn[0];\n"
    "    float scale = (mx == mn ? 1.0f : (mx - mn)) / 255.0f;\n"
    "    float izp = 0.0f - mn / scale;\n"
    "    float zp = rint(izp < 0.0f ? 0.0f : izp > 255.0f ? 255.0f : izp);\n"
    "    ys[so] = scale; yz[zo] = (uchar)zp; par[0] = scale; par[1] = zp;\n"
    "  }\n"
    "}\n"
    "__kernel void k_dq_apply(__global const float *x, ulong xo, __global const float *par, __global uchar *y, ulong yo) {\n"
    "  ulong i = get_global_id(0);\n"
    "  float v = rint(x[xo + i] / par[0]) + par[1];\n"
    "  y[yo + i] = (uchar)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v);\n"
    "}\n"
    "#ifdef DT\n"
    /* DFT per output (outer, k, inner); tw holds e^{i 2 pi m / L}. */
    "__kernel void k_dft(__global const ST *x, ulong xo, __global const ACC *tw, __global ST *y, ulong yo,\n"
    "    long nin, long L, long olen, long inner, long ic, int inv, int one) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long i = (long)(g % (ulong)inner), t = (long)(g / (ulong)inner), kk = t % olen, o = t / olen;\n"
    "  ulong xs = xo + (ulong)((o * nin * inner + i) * ic);\n"
    "  long xst = inner * ic;\n"
    "  if (inv && one) {\n"
    "    long half_ = (L + 1) / 2;\n"
    "    ACC acc = nin > 0 ? LDA(x, xs) : (ACC)0;\n"
    "    for (long j = 1; j < half_ && j < nin; j++) {\n"
    "      __global const ACC *w = tw + 2 * ((j * kk) % L);\n"
    "      ACC re = LDA(x, xs + j * xst), im = ic == 2 ? LDA(x, xs + j * xst + 1) : (ACC)0;\n"
    "      acc += 2 * (re * w[0] - im * w[1]);\n"
    "    }\n"
    "    if (L % 2 == 0 && L / 2 < nin) acc += LDA(x, xs + (L / 2) * xst) * ((kk % 2) ? -1 : 1);\n"
    "    STA(y, yo + g, acc / (ACC)L);\n"
    "    return;\n"
    "  }\n"
    "  long n = nin < L ? nin : L;\n"
    "  ACC sign = inv ? 1 : -1, scale = inv ? (ACC)1 / (ACC)L : (ACC)1, re = 0, im = 0;\n"
    "  for (long q = 0; q < n; q++) {\n"
    "    __global const ACC *w = tw + 2 * ((kk * q) % L);\n"
    "    ACC xr = LDA(x, xs + q * xst), xi = ic == 2 ? LDA(x, xs + q * xst + 1) : (ACC)0, wi = sign * w[1];\n"
    "    re += xr * w[0] - xi * wi;\n"
    "    im += xr * wi + xi * w[0];\n"
    "  }\n"
    "  STA(y, yo + 2 * g, re * scale);\n"
    "  STA(y, yo + 2 * g + 1, im * scale);\n"
    "}\n"
    "__kernel void k_window(__global ST *y, ulong yo, ACC N1, int kind) {\n"
    "  ulong i = get_global_id(0);\n"
    "  ACC t = (ACC)2.0 * (ACC)M_PI * (ACC)i / N1, v;\n"
    "  if (kind == 0) v = (ACC)0.5 - (ACC)0.5 * cos(t);\n"
    "  else if (kind == 1) v = (ACC)25.0 / (ACC)46.0 - ((ACC)21.0 / (ACC)46.0) * cos(t);\n"
    "  else v = (ACC)0.42 - (ACC)0.5 * cos(t) + (ACC)0.08 * cos((ACC)2.0 * t);\n"
    "  STA(y, yo + i, v);\n"
    "}\n"
    /* QuantizeLinear: x in DT; scale and zero point pre-widened to ACC; q[]: the qmap of each. */
    "__kernel void k_quant(__global const ST *x, ulong xo, __global const ACC *sc, __global const ACC *zp, int has_zp,\n"
    "    __global uchar *y, ulong yo, int od, int pr, long lo, long hi, p6_t Q) {\n"
    "  ulong i = get_global_id(0);\n"
    "  long si = qmap((long)i, (int)Q.a[0], Q.a[1], Q.a[2], Q.a[3], Q.a[4]);\n"
    "  ACC v = rnd(rnd(LDA(x, xo + i), pr) / rnd(sc[si], pr), pr);\n"
    "  ACC r = rint(v);\n"
    "  long q = isnan(r) ? 0 : r > (ACC)4e18 ? LONG_MAX / 2 : r < (ACC)-4e18 ? LONG_MIN / 2 : (long)r;\n"
    "  if (has_zp) q += (long)zp[qmap((long)i, (int)Q.b[0], Q.b[1], Q.b[2], Q.b[3], Q.b[4])];\n"
    "  q = q < lo ? lo : q > hi ? hi : q;\n"
    "  st_q(y, yo + i, od, q);\n"
    "}\n"
    "__kernel void k_dequant(__global const ST *x, ulong xo, __global const ACC *sc, __global const ACC *zp, int has_zp,\n"
    "    __global uchar *y, ulong yo, int od, p6_t Q) {\n"
    "  ulong i = get_global_id(0);\n"
    "  ACC v = (ACC)(float)LDA(x, xo + i);\n" /* LDA: a half needs vload_half without cl_khr_fp16 */
    "  if (has_zp) v -= zp[qmap((long)i, (int)Q.b[0], Q.b[1], Q.b[2], Q.b[3], Q.b[4])];\n"
    "  v *= sc[qmap((long)i, (int)Q.a[0], Q.a[1], Q.a[2], Q.a[3], Q.a[4])];\n"
    "  st_f(y, yo + i, od, rnd(v, 1));\n"
    "}\n"
    /* RotaryEmbedding per element; a: B H S D, b: strides bs hs ss; rows[b * S + s] is the cache row. */
    "__kernel void k_rope(__global const ST *x, ulong xo, __global const ST *cc, ulong co, __global const ST *sn,\n"
    "    ulong so, __global const char *pp, ulong po, int pdt, long np, __global ST *y, ulong yo, p6_t P, long rd,\n"
    "    int inter) {\n"
    "  ulong g = get_global_id(0);\n"
    "  long D = P.a[3], S = P.a[2], H = P.a[1];\n"
    "  long d = (long)(g % (ulong)D), t = (long)(g / (ulong)D), s = t % S; t /= S;\n"
    "  long h = t % H, b = t / H, base = b * P.b[0] + h * P.b[1] + s * P.b[2];\n"
    "  if (d >= rd) { STA(y, yo + base + d, LDA(x, xo + base + d)); return; }\n"
    "  long half_ = rd / 2, i = inter ? d / 2 : d % half_;\n"
    "  bool first = inter ? d % 2 == 0 : d < half_;\n"
    "  long i1 = inter ? 2 * i : i, i2 = inter ? 2 * i + 1 : i + half_, row = b * S + s;\n"
    /* position_ids of integer dtype code pdt (-1: none); a bad one has failed the run, clamped it stays in
     * bounds */
    "  if (pdt >= 0) {\n"
    "    ulong j = po + (ulong)row;\n"
    "    row = pdt == 0 ? (long)pp[j] : pdt == 1 ? (long)((__global const uchar *)pp)[j]\n"
    "        : pdt == 2 ? (long)((__global const short *)pp)[j] : pdt == 3 ? (long)((__global const int *)pp)[j]\n"
    "        : ((__global const long *)pp)[j];\n"
    "    row = row < 0 ? 0 : row >= np ? np - 1 : row;\n"
    "  }\n"
    "  ACC c = LDA(cc, co + row * half_ + i), sv = LDA(sn, so + row * half_ + i);\n"
    "  ACC x1 = LDA(x, xo + base + i1), x2 = LDA(x, xo + base + i2), v;\n"
    "  if (first) v = rnd(rnd(c * x1, DT) - rnd(sv * x2, DT), DT);\n"
    "  else v = rnd(rnd(sv * x1, DT) + rnd(c * x2, DT), DT);\n"
    "  STA(y, yo + base + d, v);\n"
    "}\n"
    "#endif\n";

/* Matches p6_t in the kernel source. */
typedef struct {
    cl_long a[8], b[8], c[8], d[8], e[8], f[8];
} p6_t;

static wf_status *kern(wf__kctx *k, wf_dtype t, const char *name, cl_kernel *out)
{
    return oclimg_kernel(k, "image2", g_src, t, name, out);
}

static int64_t numel(int rank, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= d[i];
    return n;
}

/* ACC-typed scalar argument: double or float by the device. */
typedef struct {
    cl_double d;
    cl_float f;
} accv;
static accv acc_of(double v) { return (accv){v, (cl_float)v}; }
#define ACC_ARG(k, a) (ocl_of(k)->fp64 ? OCL_ARG((a).d) : OCL_ARG((a).f))

/* ---- DFT ---------------------------------------------------------------------------------------------- */

wf_status *oclimg_k_DFT(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    int r = X->rank;
    if (r < 2 || (X->dims[r - 1] != 1 && X->dims[r - 1] != 2))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input must be [..., 1] (real) or [..., 2] (complex)");
    bool inv = oclimg_attr_i(k, "inverse") != 0, one = oclimg_attr_i(k, "onesided") != 0;
    const wf__attr *axa = ocl_host->attr_get(k->op, k->attrs, "axis");
    int64_t axis = axa->set ? axa->i : -2, v[1];
    int nv = 0;
    wf_status *s;
    if (oclimg_has(k, 2)) {
        if ((s = oclimg_ints(k, 2, "axis", v, 1, &nv))) return s;
        if (nv == 1) axis = v[0];
    }
    int64_t ax = axis < 0 ? axis + r : axis;
    if (ax < 0 || ax >= r - 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is not a signal axis of a rank-%d input",
                                   (long long)axis, r);
    int64_t nin = X->dims[ax], L = inv && one ? 2 * (nin - 1) : nin;
    if (oclimg_has(k, 1)) {
        if ((s = oclimg_ints(k, 1, "dft_length", v, 1, &nv))) return s;
        if (nv == 1) L = v[0];
    }
    if (L < 1) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "the DFT length %lld must be positive", (long long)L);
    int64_t oc = inv && one ? 1 : 2, olen = one && !inv ? L / 2 + 1 : L;
    int64_t od[WF_MAX_RANK];
    memcpy(od, X->dims, sizeof(int64_t) * (size_t)r);
    od[ax] = olen;
    od[r - 1] = oc;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, X->dtype, r, od, &y)) || !y->size) return s;
    /* twiddles e^{i 2 pi m / L}: (k * t) mod L indexes them exactly, as on the CPU */
    bool f64 = ocl_of(k)->fp64;
    double *tw = ocl_host->malloc(sizeof(double) * (size_t)(2 * L));
    if (!tw) return ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %lld twiddles", (long long)L);
    for (int64_t m = 0; m < L; m++)
        tw[2 * m] = cos(2 * M_PI * (double)m / (double)L), tw[2 * m + 1] = sin(2 * M_PI * (double)m / (double)L);
    if (!f64)
        for (int64_t m = 0; m < 2 * L; m++) ((float *)tw)[m] = (float)tw[m];
    cl_mem twm;
    s = oclimg_buffer(k, oclimg_acc_size(k) * (size_t)(2 * L), tw, &twm);
    ocl_host->free(tw);
    if (s) return s;
    cl_kernel kk;
    if (!(s = kern(k, X->dtype, "dft", &kk))) {
        cl_mem xm = ocl_mem(X), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(X), yo = ocl_off(y);
        cl_long a_nin = nin, a_L = L, a_olen = olen, inner = numel(r - 2 - (int)ax, X->dims + ax + 1),
                ic = X->dims[r - 1];
        cl_int a_inv = inv, a_one = one;
        ocl_arg args[] = {OCL_ARG(xm),     OCL_ARG(xo),    OCL_ARG(twm), OCL_ARG(ym),    OCL_ARG(yo),   OCL_ARG(a_nin),
                          OCL_ARG(a_L),    OCL_ARG(a_olen), OCL_ARG(inner), OCL_ARG(ic), OCL_ARG(a_inv), OCL_ARG(a_one)};
        s = oclimg_run(k, kk, 12, args, (size_t)(y->size / oc));
    }
    clReleaseMemObject(twm);
    return s;
}

/* ---- windows ------------------------------------------------------------------------------------------ */

static wf_status *window(wf__kctx *k, int kind)
{
    int64_t n;
    int nv = 0;
    if (k->in[0]->size != 1 || k->in[0]->rank > 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "size must be a scalar");
    wf_status *s = oclimg_ints(k, 0, "size", &n, 1, &nv);
    if (s) return s;
    if (n < 0) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "size %lld must be >= 0", (long long)n);
    wf_dtype dt = (wf_dtype)oclimg_attr_i(k, "output_datatype");
    accv N1 = acc_of((double)(oclimg_attr_i(k, "periodic") ? n : n - 1));
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, dt, 1, &n, &y)) || !y->size) return s;
    cl_kernel kk;
    if ((s = kern(k, dt, "window", &kk))) return s;
    cl_mem ym = ocl_mem(y);
    cl_ulong yo = ocl_off(y);
    cl_int kd = kind;
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), ACC_ARG(k, N1), OCL_ARG(kd)};
    return oclimg_run(k, kk, 4, args, (size_t)n);
}

wf_status *oclimg_k_HannWindow(wf__kctx *k) { return window(k, 0); }
wf_status *oclimg_k_HammingWindow(wf__kctx *k) { return window(k, 1); }
wf_status *oclimg_k_BlackmanWindow(wf__kctx *k) { return window(k, 2); }

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------------------------------------ */

/* Fills q[0..4] (kind, axis_len, inner, block, n_blocks) for parameter p of input x. */
static wf_status *qmap_init(wf__kctx *k, const wf_tensor *x, const wf_tensor *p, const char *what, cl_long *q)
{
    char b0[160], b1[160], err[480];
    wf__ku_qmap m;
    if (!wf__ku_qmap_plan(x->rank, x->dims, ocl_nnr_tstr(x, b0), p->rank, p->dims, p->size, what, ocl_nnr_tstr(p, b1),
                          oclimg_attr_i(k, "axis"), oclimg_attr_i(k, "block_size"), &m, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    memset(q, 0, sizeof(cl_long) * 8);
    q[0] = m.kind, q[1] = m.alen, q[2] = m.inner, q[3] = m.block, q[4] = m.nb;
    return NULL;
}

/* The range of quantised dtype t as kernel arguments. */
static void qrange(wf_dtype t, cl_long *lo, cl_long *hi)
{
    int64_t l, h;
    wf__ku_qrange(t, &l, &h);
    *lo = l, *hi = h;
}

static wf_status *quant(wf__kctx *k, bool deq)
{
    const wf_tensor *x = k->in[0], *sc = k->in[1], *zp = oclimg_has(k, 2) ? k->in[2] : NULL;
    wf_dtype od = (wf_dtype)oclimg_attr_i(k, "output_dtype");
    if (deq) {
        if (od == WF_DTYPE_INVALID) od = sc->dtype;
        if (!oclew_is_float(od) || (od == WF_F64 && !ocl_of(k)->fp64))
            return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "dequantizing to %s is not supported", oclew_dtype_name(od));
    } else {
        if (zp) od = zp->dtype;
        if (od == WF_DTYPE_INVALID) od = WF_U8;
        if (od != WF_U8 && od != WF_I8 && od != WF_I16)
            return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "quantizing to %s is not supported", oclew_dtype_name(od));
    }
    if (!oclew_is_float(sc->dtype) || (zp && !oclew_is_int(zp->dtype)))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "scale must be float and the zero point an integer");
    p6_t Q;
    memset(&Q, 0, sizeof Q);
    wf_status *s = qmap_init(k, x, sc, deq ? "x_scale" : "y_scale", Q.a);
    if (!s && zp) s = qmap_init(k, x, zp, deq ? "x_zero_point" : "y_zero_point", Q.b);
    wf_tensor *y;
    if (s || (s = ocl_host->kctx_output(k, 0, od, x->rank, x->dims, &y)) || !y->size) return s;
    cl_mem scm = NULL, zpm = NULL;
    if ((s = oclimg_widen(k, sc, &scm))) return s;
    if (zp) s = oclimg_widen(k, zp, &zpm);
    else s = oclimg_buffer(k, 8, NULL, &zpm);
    cl_kernel kk;
    if (!s && !(s = kern(k, x->dtype, deq ? "dequant" : "quant", &kk))) {
        cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(x), yo = ocl_off(y);
        cl_int has = zp != NULL, odi = (cl_int)od;
        if (deq) {
            ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(scm), OCL_ARG(zpm), OCL_ARG(has),
                              OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(odi), OCL_ARG(Q)};
            s = oclimg_run(k, kk, 9, args, (size_t)y->size);
        } else {
            /* x / scale is computed in x's dtype, or in `precision` when given, like the reference */
            wf_dtype pr = (wf_dtype)oclimg_attr_i(k, "precision");
            if (pr == WF_DTYPE_INVALID) pr = oclew_is_float(x->dtype) ? x->dtype : sc->dtype;
            cl_int pri = (cl_int)pr;
            cl_long lo, hi;
            qrange(od, &lo, &hi);
            ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo),  OCL_ARG(scm), OCL_ARG(zpm), OCL_ARG(has), OCL_ARG(ym),
                              OCL_ARG(yo), OCL_ARG(odi), OCL_ARG(pri), OCL_ARG(lo),  OCL_ARG(hi),  OCL_ARG(Q)};
            s = oclimg_run(k, kk, 12, args, (size_t)y->size);
        }
    }
    if (scm) clReleaseMemObject(scm);
    if (zpm) clReleaseMemObject(zpm);
    return s;
}

wf_status *oclimg_k_QuantizeLinear(wf__kctx *k) { return quant(k, false); }
wf_status *oclimg_k_DequantizeLinear(wf__kctx *k) { return quant(k, true); }

wf_status *oclimg_k_DynamicQuantizeLinear(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_tensor *y, *ys, *yz;
    wf_status *s;
    if ((s = ocl_host->kctx_output(k, 0, WF_U8, x->rank, x->dims, &y)) ||
        (s = ocl_host->kctx_output(k, 1, WF_F32, 0, NULL, &ys)) || (s = ocl_host->kctx_output(k, 2, WF_U8, 0, NULL, &yz)))
        return s;
    cl_mem par;
    if ((s = oclimg_buffer(k, 2 * sizeof(cl_float), NULL, &par))) return s;
    cl_kernel kr, ka;
    if (!(s = kern(k, WF_DTYPE_INVALID, "dq_range", &kr)) && !(s = kern(k, WF_DTYPE_INVALID, "dq_apply", &ka))) {
        size_t L = 256;
        while (L > ocl_of(k)->max_wg) L /= 2;
        cl_mem xm = ocl_mem(x), ym = ocl_mem(y), sm = ocl_mem(ys), zm = ocl_mem(yz);
        cl_ulong xo = ocl_off(x), yo = ocl_off(y), so = ocl_off(ys), zo = ocl_off(yz), n = (cl_ulong)x->size;
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(n), OCL_ARG(sm), OCL_ARG(so), OCL_ARG(zm), OCL_ARG(zo),
                          OCL_ARG(par), {L * sizeof(cl_float), NULL}, {L * sizeof(cl_float), NULL}};
        s = ocl_launch(k, kr, 10, args, 1, &L, &L);
        if (!s) {
            ocl_arg a2[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(par), OCL_ARG(ym), OCL_ARG(yo)};
            s = oclimg_run(k, ka, 5, a2, (size_t)x->size);
        }
    }
    clReleaseMemObject(par);
    return s;
}

/* ---- integer matmul and convolution ---------------------------------------------------------------------- */

/* A zero point (scalar or n values) read back as i64 into a device buffer; *cnt: 0 (none), 1 or n. */
static wf_status *zp_buf(wf__kctx *k, int idx, int64_t n, const char *what, cl_mem *out, cl_int *cnt)
{
    const wf_tensor *z = oclimg_has(k, idx) ? k->in[idx] : NULL;
    *cnt = 0;
    if (!z) return oclimg_buffer(k, 8, NULL, out);
    if (z->size != 1 && !(z->rank == 1 && z->dims[0] == n))
        return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "%s must be a scalar or have %lld values", what, (long long)n);
    if (!oclew_is_int(z->dtype)) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s must be an integer", what);
    void *buf;
    wf_status *s = oclew_read(k, z, &buf);
    if (s) return s;
    cl_long *v = ocl_host->malloc(sizeof(cl_long) * (size_t)(z->size + 1));
    if (!v) s = ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for %s", what);
    for (int64_t i = 0; !s && i < z->size; i++) v[i] = oclew_load_i64(buf, z->dtype, i);
    ocl_host->free(buf);
    if (!s) s = oclimg_buffer(k, sizeof(cl_long) * (size_t)(z->size + 1), v, out);
    ocl_host->free(v);
    *cnt = (cl_int)z->size;
    return s;
}

/* The result shape of numpy matmul and the batch plan P (a: dims, b / c: a's / b's batch strides). */
static wf_status *mm_plan(wf__kctx *k, const wf_tensor *a, const wf_tensor *b, int *rank, int64_t *dims, p6_t *P,
                          cl_int *br, cl_long *M, cl_long *K, cl_long *N)
{
    if (a->rank < 1 || b->rank < 1) goto bad;
    *M = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    *K = a->dims[a->rank - 1];
    *N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if ((b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0]) != *K) goto bad;
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, r = ra > rb ? ra : rb;
    memset(P, 0, sizeof *P);
    for (int d = 0; d < r; d++) {
        int64_t da = d - (r - ra) >= 0 ? a->dims[d - (r - ra)] : 1, db = d - (r - rb) >= 0 ? b->dims[d - (r - rb)] : 1;
        if (da != db && da != 1 && db != 1) goto bad;
        dims[d] = da == 1 ? db : da;
        P->a[d] = dims[d];
    }
    int64_t sa = 1, sb = 1;
    for (int d = r - 1; d >= 0; d--) {
        int ia = d - (r - ra), ib = d - (r - rb);
        if (ia >= 0) P->b[d] = a->dims[ia] == 1 ? 0 : sa, sa *= a->dims[ia];
        if (ib >= 0) P->c[d] = b->dims[ib] == 1 ? 0 : sb, sb *= b->dims[ib];
    }
    *br = r;
    *rank = r;
    if (a->rank >= 2) dims[(*rank)++] = *M;
    if (b->rank >= 2) dims[(*rank)++] = *N;
    return NULL;
bad:
    return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "operands of ranks %d and %d do not multiply", a->rank, b->rank);
}

static wf_status *matmul_int(wf__kctx *k, bool qlinear)
{
    const wf_tensor *a = k->in[0], *b = k->in[qlinear ? 3 : 1];
    int rank = 0;
    int64_t dims[WF_MAX_RANK];
    p6_t P;
    cl_int br, nza = 0, nzb = 0;
    cl_long M, K, N;
    wf_status *s = mm_plan(k, a, b, &rank, dims, &P, &br, &M, &K, &N);
    if (s) return s;
    if (!(b->dtype == WF_U8 || b->dtype == WF_I8))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "b must be u8 or i8");
    wf_dtype od = WF_I32;
    double mult = 0, z = 0;
    if (qlinear) {
        static const int si[3] = {1, 4, 6};
        double sc[3];
        for (int i = 0; i < 3 && !s; i++) {
            const wf_tensor *t = k->in[si[i]];
            int n = 0;
            if (t->size != 1)
                return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "scale input %d: only per-tensor scales are supported",
                                           si[i]);
            s = oclimg_floats(k, si[i], "scale", &sc[i], 1, &n);
        }
        const wf_tensor *yzp = oclimg_has(k, 7) ? k->in[7] : NULL;
        if (!s && yzp) {
            if (yzp->size != 1)
                return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "y_zero_point: only a per-tensor zero point is supported");
            if (yzp->rank > 1 || !(yzp->dtype == WF_U8 || yzp->dtype == WF_I8))
                return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "y_zero_point must be u8 or i8");
            void *buf;
            if (!(s = oclew_read(k, yzp, &buf))) {
                z = (double)oclew_load_i64(buf, yzp->dtype, 0);
                ocl_host->free(buf);
            }
        }
        if (s) return s;
        wf_dtype st = k->in[1]->dtype;
        /* the reference forms a_scale * b_scale / y_scale in the scales' dtype */
        mult = wf__ku_round_to(wf__ku_round_to(sc[0] * sc[1], st) / sc[2], st);
        od = yzp ? yzp->dtype : a->dtype;
    }
    wf_tensor *y;
    cl_mem zam = NULL, zbm = NULL;
    if ((s = ocl_host->kctx_output(k, 0, od, rank, dims, &y)) || !y->size) return s;
    if (!(s = zp_buf(k, 2, M, "a_zero_point", &zam, &nza))) s = zp_buf(k, qlinear ? 5 : 3, N, "b_zero_point", &zbm, &nzb);
    cl_kernel kk;
    if (!s && !(s = kern(k, WF_DTYPE_INVALID, qlinear ? "qlmm" : "mmi", &kk))) {
        cl_mem am = ocl_mem(a), bm = ocl_mem(b), ym = ocl_mem(y);
        cl_ulong ao = ocl_off(a), bo = ocl_off(b), yo = ocl_off(y);
        cl_int sa = a->dtype == WF_I8, sb = b->dtype == WF_I8, odi = (cl_int)od;
        accv am_ = acc_of(mult), z_ = acc_of(z);
        cl_long lo, hi;
        qrange(od, &lo, &hi);
        ocl_arg args[] = {OCL_ARG(am),  OCL_ARG(ao), OCL_ARG(sa),  OCL_ARG(bm),  OCL_ARG(bo),  OCL_ARG(sb),
                          OCL_ARG(zam), OCL_ARG(nza), OCL_ARG(zbm), OCL_ARG(nzb), OCL_ARG(P),   OCL_ARG(br),
                          OCL_ARG(M),   OCL_ARG(K),  OCL_ARG(N),   OCL_ARG(ym),  OCL_ARG(yo),  OCL_ARG(odi),
                          ACC_ARG(k, am_), ACC_ARG(k, z_), OCL_ARG(lo), OCL_ARG(hi)};
        s = oclimg_run(k, kk, qlinear ? 22 : 17, args, (size_t)y->size);
    }
    if (zam) clReleaseMemObject(zam);
    if (zbm) clReleaseMemObject(zbm);
    return s;
}

wf_status *oclimg_k_MatMulInteger(wf__kctx *k) { return matmul_int(k, false); }
wf_status *oclimg_k_QLinearMatMul(wf__kctx *k) { return matmul_int(k, true); }

/* Convolution geometry (kutil_quant.h): P.a in, b out, c kernel, d strides, e dilations, f pads. */
static wf_status *conv_init(wf__kctx *k, const wf_tensor *x, const wf_tensor *w, p6_t *P, cl_long *G,
                            int64_t *dims)
{
    char b0[160], b1[160], err[480];
    wf__ku_iconv g;
    if (!wf__ku_iconv_plan(x->rank, x->dims, ocl_nnr_tstr(x, b0), w->rank, w->dims, ocl_nnr_tstr(w, b1),
                           oclimg_attr_i(k, "group"), ocl_host->attr_get(k->op, k->attrs, "kernel_shape"),
                           ocl_host->attr_get(k->op, k->attrs, "strides"),
                           ocl_host->attr_get(k->op, k->attrs, "dilations"), ocl_host->attr_get(k->op, k->attrs, "pads"),
                           oclimg_attr_s(k, "auto_pad"), &g, dims, err, sizeof err))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", err);
    memset(P, 0, sizeof *P);
    *G = g.G;
    for (int i = 0; i < g.ns; i++)
        P->a[i] = g.in[i], P->b[i] = g.out[i], P->c[i] = g.k[i], P->d[i] = g.s[i], P->e[i] = g.d[i], P->f[i] = g.pb[i];
    return NULL;
}

static wf_status *conv_int(wf__kctx *k, bool qlinear)
{
    const wf_tensor *x = k->in[0], *w = k->in[qlinear ? 3 : 1];
    const wf_tensor *xzp = oclimg_has(k, 2) ? k->in[2] : NULL;
    p6_t P;
    cl_long G;
    int64_t dims[WF_MAX_RANK];
    wf_status *s = conv_init(k, x, w, &P, &G, dims);
    if (s) return s;
    if (!(w->dtype == WF_U8 || w->dtype == WF_I8)) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "w must be u8 or i8");
    if (xzp && xzp->size != 1)
        return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "x_zero_point: only a per-tensor zero point is supported");
    cl_long M = w->dims[0], C = x->dims[1], zx = 0;
    if (xzp) {
        void *buf;
        if ((s = oclew_read(k, xzp, &buf))) return s;
        zx = oclew_load_i64(buf, xzp->dtype, 0);
        ocl_host->free(buf);
    }
    wf_dtype od = WF_I32;
    double *mult = NULL, z = 0;
    cl_long *bias = NULL;
    bool has_bias = false;
    if (qlinear) {
        const wf_tensor *xs = k->in[1], *ws = k->in[4], *ys = k->in[6], *yzp = oclimg_has(k, 7) ? k->in[7] : NULL;
        const wf_tensor *bt = oclimg_has(k, 8) ? k->in[8] : NULL;
        if (xs->size != 1 || ys->size != 1 || (yzp && yzp->size != 1))
            return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "x and y scales and zero points must be per tensor");
        if (ws->size != 1 && !(ws->rank == 1 && ws->dims[0] == M))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "w_scale must be a scalar or have one value per output channel");
        if (bt && (bt->rank != 1 || bt->dims[0] != M || !oclew_is_int(bt->dtype)))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "B must have one integer per output channel (%lld)",
                                       (long long)M);
        double xsv, ysv;
        int n;
        if ((s = oclimg_floats(k, 1, "x_scale", &xsv, 1, &n)) || (s = oclimg_floats(k, 6, "y_scale", &ysv, 1, &n)))
            return s;
        mult = ocl_host->malloc(sizeof(double) * (size_t)(M + 1));
        bias = ocl_host->malloc(sizeof(cl_long) * (size_t)(M + 1));
        void *wb = NULL, *bb = NULL, *zb = NULL;
        if (!mult || !bias) s = ocl_host->kctx_fail(k, WF_OUT_OF_MEMORY, "out of memory for QLinearConv's scales");
        if (!s) s = oclew_read(k, ws, &wb);
        if (!s && bt) s = oclew_read(k, bt, &bb);
        if (!s && yzp) s = oclew_read(k, yzp, &zb);
        if (!s) {
            wf_dtype st = xs->dtype;
            /* x_scale * w_scale / y_scale in the scales' dtype, as the reference forms it */
            for (int64_t m = 0; m < M; m++) {
                double wv = oclew_load_f64(wb, ws->dtype, ws->size == 1 ? 0 : m);
                mult[m] = wf__ku_round_to(wf__ku_round_to(xsv * wv, st) / ysv, st);
                bias[m] = bb ? oclew_load_i64(bb, bt->dtype, m) : 0;
            }
            if (!ocl_of(k)->fp64)
                for (int64_t m = 0; m < M; m++) ((float *)mult)[m] = (float)mult[m];
            z = zb ? (double)oclew_load_i64(zb, yzp->dtype, 0) : 0.0;
            has_bias = bt != NULL;
            od = yzp ? yzp->dtype : x->dtype;
        }
        ocl_host->free(wb), ocl_host->free(bb), ocl_host->free(zb);
    }
    wf_tensor *y = NULL;
    cl_mem zwm = NULL, mm = NULL, bm = NULL;
    cl_int nzw = 0;
    if (!s) s = ocl_host->kctx_output(k, 0, od, x->rank, dims, &y);
    if (!s && y->size) s = zp_buf(k, qlinear ? 5 : 3, M, "w_zero_point", &zwm, &nzw);
    if (!s && y->size && qlinear) {
        if (!(s = oclimg_buffer(k, oclimg_acc_size(k) * (size_t)(M + 1), mult, &mm)))
            s = oclimg_buffer(k, sizeof(cl_long) * (size_t)(M + 1), bias, &bm);
    }
    ocl_host->free(mult), ocl_host->free(bias);
    cl_kernel kk;
    if (!s && y->size && !(s = kern(k, WF_DTYPE_INVALID, qlinear ? "qlconv" : "convi", &kk))) {
        cl_mem xm = ocl_mem(x), wm = ocl_mem(w), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(x), wo = ocl_off(w), yo = ocl_off(y);
        cl_int sx = x->dtype == WF_I8, sw = w->dtype == WF_I8, ns = x->rank - 2, hb = has_bias, odi = (cl_int)od;
        accv z_ = acc_of(z);
        cl_long lo, hi;
        qrange(od, &lo, &hi);
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(sx), OCL_ARG(wm), OCL_ARG(wo),  OCL_ARG(sw),
                          OCL_ARG(zx), OCL_ARG(zwm), OCL_ARG(nzw), OCL_ARG(P), OCL_ARG(ns),  OCL_ARG(C),
                          OCL_ARG(M),  OCL_ARG(G),  OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(bm),  OCL_ARG(hb),
                          OCL_ARG(mm), ACC_ARG(k, z_), OCL_ARG(odi), OCL_ARG(lo), OCL_ARG(hi)};
        s = oclimg_run(k, kk, qlinear ? 23 : 16, args, (size_t)y->size);
    }
    if (zwm) clReleaseMemObject(zwm);
    if (mm) clReleaseMemObject(mm);
    if (bm) clReleaseMemObject(bm);
    return s;
}

wf_status *oclimg_k_ConvInteger(wf__kctx *k) { return conv_int(k, false); }
wf_status *oclimg_k_QLinearConv(wf__kctx *k) { return conv_int(k, true); }

/* ---- BitCast ------------------------------------------------------------------------------------------- */

wf_status *oclimg_k_BitCast(wf__kctx *k)
{
    const wf_tensor *X = k->in[0];
    wf_dtype to = (wf_dtype)oclimg_attr_i(k, "to");
    if (ocl_size(to) != ocl_size(X->dtype) || to == WF_DTYPE_INVALID)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot reinterpret %s as %s: the sizes differ",
                                   oclew_dtype_name(X->dtype), oclew_dtype_name(to));
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, to, X->rank, X->dims, &y);
    if (s || !y->size) return s;
    if (to == WF_BOOL) {
        /* weft's bool is one byte holding 0 or 1; other bytes reinterpreted as bool become 1 */
        cl_kernel kk;
        if ((s = kern(k, WF_DTYPE_INVALID, "tobool", &kk))) return s;
        cl_mem xm = ocl_mem(X), ym = ocl_mem(y);
        cl_ulong xo = ocl_off(X), yo = ocl_off(y);
        ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo)};
        return oclimg_run(k, kk, 4, args, (size_t)y->size);
    }
    cl_int e = clEnqueueCopyBuffer(ocl_of(k)->q, ocl_mem(X), ocl_mem(y), X->dev_offset, y->dev_offset,
                                   (size_t)X->size * ocl_size(X->dtype), 0, NULL, NULL);
    return e == CL_SUCCESS ? NULL : ocl_fail(k, e, "buffer copy");
}

/* ---- RotaryEmbedding ----------------------------------------------------------------------------------- */

wf_status *oclimg_k_RotaryEmbedding(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *cc = k->in[1], *sc = k->in[2], *pos = oclimg_has(k, 3) ? k->in[3] : NULL;
    p6_t P;
    memset(&P, 0, sizeof P);
    int64_t heads = oclimg_attr_i(k, "num_heads"), B, H, S, D;
    if (x->rank == 4) {
        B = x->dims[0], H = x->dims[1], S = x->dims[2], D = x->dims[3];
        P.b[2] = D, P.b[1] = S * D, P.b[0] = H * S * D;
    } else if (x->rank == 3 && heads > 0 && x->dims[2] % heads == 0) {
        B = x->dims[0], H = heads, S = x->dims[1], D = x->dims[2] / heads;
        P.b[1] = D, P.b[2] = heads * D, P.b[0] = S * heads * D;
    } else {
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT,
                                   "input must be 4-D, or 3-D with a hidden size that num_heads divides");
    }
    P.a[0] = B, P.a[1] = H, P.a[2] = S, P.a[3] = D;
    cl_long rd = oclimg_attr_i(k, "rotary_embedding_dim");
    if (rd == 0) rd = D;
    cl_int inter = oclimg_attr_i(k, "interleaved") != 0;
    int64_t half = rd / 2;
    if (rd < 0 || rd > D || rd % 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "rotary_embedding_dim %lld must be even and <= head size %lld",
                                   (long long)rd, (long long)D);
    bool ok = cc->rank == sc->rank && cc->dims[cc->rank - 1] == half && sc->dims[sc->rank - 1] == half &&
              cc->dtype == x->dtype && sc->dtype == x->dtype;
    if (pos)
        ok = ok && cc->rank == 2 && sc->dims[0] == cc->dims[0] && pos->rank == 2 && pos->dims[0] == B &&
             pos->dims[1] == S && oclew_is_int(pos->dtype);
    else
        ok = ok && cc->rank == 3 && cc->dims[0] == B && cc->dims[1] == S && sc->dims[0] == B && sc->dims[1] == S;
    if (!ok)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cos_cache and sin_cache do not fit the input (%s, %lld rotated dims)",
                                   pos ? "with position_ids" : "without position_ids", (long long)rd);
    /* a position id outside the caches fails the run, as on the CPU: checked on the device, not read back */
    wf_status *s = pos ? ocl_check_ints(k, pos, OCL_SITE_POSITION, 0, cc->dims[0] - 1, false, NULL, cc->dims[0], "")
                       : NULL;
    wf_tensor *y = NULL;
    if (!s) s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (s || !y->size || (pos && !cc->dims[0])) return s; /* no cache rows: every position id is bad */
    cl_kernel kk;
    if ((s = kern(k, x->dtype, "rope", &kk))) return s;
    cl_mem xm = ocl_mem(x), cm = ocl_mem(cc), sm = ocl_mem(sc), ym = ocl_mem(y), pm = pos ? ocl_mem(pos) : xm;
    cl_ulong xo = ocl_off(x), co = ocl_off(cc), so = ocl_off(sc), yo = ocl_off(y), po = pos ? ocl_off(pos) : 0;
    cl_int pdt = pos ? ocl_int_code(pos->dtype) : -1;
    cl_long np = cc->dims[0];
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(cm), OCL_ARG(co), OCL_ARG(sm),  OCL_ARG(so),
                      OCL_ARG(pm), OCL_ARG(po), OCL_ARG(pdt), OCL_ARG(np), OCL_ARG(ym), OCL_ARG(yo),
                      OCL_ARG(P),  OCL_ARG(rd), OCL_ARG(inter)};
    return oclimg_run(k, kk, 15, args, (size_t)y->size);
}
