/*
 * OpenCL kernels of the reduce family: Reduce{Sum,Mean,Max,Min,Prod,L2}, ArgMax/ArgMin, Softmax and
 * LogSoftmax, BatchNormalization (inference), FusedBatchNorm and its gradient (training), LayerNormalization (with Mean and InvStdDev) and inference
 * Dropout. Semantics are the CPU's (src/backends/cpu/k_reduce.c, k_norm.c): floats accumulate in double
 * where the device has it, integers in 64 bits wrapping like numpy, max/min propagate NaN.
 */
#include <stdio.h>

#include "backends/opencl/ocl_nnr.h"
#include "ops/kutil_reduce.h"

/* ---- kernels ----------------------------------------------------------------------------------------- */

/* A reduction after merging axes: outputs enumerate the kept groups (dims kd, strides ks, nk of them),
 * each output folds the reduced groups (rd, rs, nr >= 1). NAME: one output per work-item, the innermost
 * group in a plain strided loop. NAME_wg: one output per work-group of RWG, for few long reductions:
 * each work-item folds every RWG-th element, then a tree in local memory combines the partials.
 * STEP folds an element v (CT) into acc; COMBINE folds a partial v (ACC). */
#define RED_KERNEL(NAME, ACC, INIT, STEP, COMBINE, FINAL)                                                     \
    "__kernel void " NAME "(__global const T *x, ulong xo, __global T *y, ulong yo, int nk, ulong8 kd,\n"      \
    "                       ulong8 ks, int nr, ulong8 rd, ulong8 rs, ulong count) {\n"                         \
    "  ulong kda[8], ksa[8], rda[8], rsa[8];\n"                                                               \
    "  UNPACK8(kd, kda); UNPACK8(ks, ksa); UNPACK8(rd, rda); UNPACK8(rs, rsa);\n"                             \
    "  ulong o = get_global_id(0), rem = o, base = 0;\n"                                                      \
    "  for (int d = nk - 1; d >= 0; d--) { base += (rem % kda[d]) * ksa[d]; rem /= kda[d]; }\n"              \
    "  x += xo; y += yo;\n"                                                                                   \
    "  " ACC " acc = " INIT ";\n"                                                                             \
    "  ulong L = rda[nr - 1], sL = rsa[nr - 1], outer = count ? count / L : 0;\n"                             \
    "  for (ulong ro = 0; ro < outer; ro++) {\n"                                                              \
    "    ulong off = base, r = ro;\n"                                                                         \
    "    for (int d = nr - 2; d >= 0; d--) { off += (r % rda[d]) * rsa[d]; r /= rda[d]; }\n"                  \
    "    for (ulong l = 0; l < L; l++) { CT v = LD(x, off + l * sL); " STEP "; }\n"                           \
    "  }\n"                                                                                                   \
    "  " FINAL ";\n"                                                                                          \
    "}\n"                                                                                                     \
    "__kernel __attribute__((reqd_work_group_size(RWG, 1, 1)))\n"                                             \
    "void " NAME "_wg(__global const T *x, ulong xo, __global T *y, ulong yo, int nk, ulong8 kd,\n"           \
    "                 ulong8 ks, int nr, ulong8 rd, ulong8 rs, ulong count) {\n"                               \
    "  __local " ACC " part[RWG];\n"                                                                          \
    "  ulong kda[8], ksa[8], rda[8], rsa[8];\n"                                                               \
    "  UNPACK8(kd, kda); UNPACK8(ks, ksa); UNPACK8(rd, rda); UNPACK8(rs, rsa);\n"                             \
    "  ulong o = get_group_id(0), lid = get_local_id(0), rem = o, base = 0;\n"                                \
    "  for (int d = nk - 1; d >= 0; d--) { base += (rem % kda[d]) * ksa[d]; rem /= kda[d]; }\n"              \
    "  x += xo; y += yo;\n"                                                                                   \
    "  " ACC " acc = " INIT ";\n"                                                                             \
    "  for (ulong i = lid; i < count; i += RWG) {\n"                                                          \
    "    ulong off = base, r = i;\n"                                                                          \
    "    for (int d = nr - 1; d >= 0; d--) { off += (r % rda[d]) * rsa[d]; r /= rda[d]; }\n"                  \
    "    { CT v = LD(x, off); " STEP "; }\n"                                                                  \
    "  }\n"                                                                                                   \
    "  part[lid] = acc;\n"                                                                                    \
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"                                                                       \
    "  for (ulong w = RWG / 2; w > 0; w >>= 1) {\n"                                                           \
    "    if (lid < w) { " ACC " v = part[lid + w]; acc = part[lid]; " COMBINE "; part[lid] = acc; }\n"        \
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"                                                                     \
    "  }\n"                                                                                                   \
    "  if (lid == 0) { acc = part[0]; " FINAL "; }\n"                                                         \
    "}\n"

/* work-group size of the *_wg reductions (a power of two), and when they pay: few outputs, long folds */
#define RWG 256
#define RWG_MAX_OUT 256
#define RWG_MIN_COUNT 8192
#define STR_(x) #x
#define STR(x) STR_(x)

static const char *g_src = OCL_NNR_PRELUDE
    /* component by component: vstore8 to private memory passes the vector by value, which PoCL warns
     * changes the ABI without AVX-512 */
    "#define UNPACK8(v, a) a[0] = v.s0; a[1] = v.s1; a[2] = v.s2; a[3] = v.s3; a[4] = v.s4; a[5] = v.s5; \\\n"
    "  a[6] = v.s6; a[7] = v.s7\n"
    "#define RWG " STR(RWG) "\n"
    "#ifdef IS_INT\n"
    RED_KERNEL("r_sum", "ulong", "0", "acc += (ulong)v", "acc += v", "ST(y, o, (long)acc)")
    RED_KERNEL("r_mean", "ulong", "0", "acc += (ulong)v", "acc += v", "ST(y, o, count ? (long)acc / (long)count : 0)")
    RED_KERNEL("r_prod", "ulong", "1", "acc *= (ulong)v", "acc *= v", "ST(y, o, (long)acc)")
    RED_KERNEL("r_max", "long", "LONG_MIN", "acc = v > acc ? v : acc", "acc = v > acc ? v : acc",
               "ST(y, o, count ? acc : (long)TMIN)")
    RED_KERNEL("r_min", "long", "LONG_MAX", "acc = v < acc ? v : acc", "acc = v < acc ? v : acc",
               "ST(y, o, count ? acc : (long)TMAX)")
    RED_KERNEL("r_l2", "DBL", "0", "acc += (DBL)v * (DBL)v", "acc += v", "ST(y, o, (long)sqrt(acc))")
    "#else\n"
    RED_KERNEL("r_sum", "DBL", "0", "acc += (DBL)v", "acc += v", "ST(y, o, (CT)acc)")
    RED_KERNEL("r_mean", "DBL", "0", "acc += (DBL)v", "acc += v", "ST(y, o, (CT)(acc / (DBL)count))")
    RED_KERNEL("r_prod", "DBL", "1", "acc *= (DBL)v", "acc *= v", "ST(y, o, (CT)acc)")
    RED_KERNEL("r_max", "CT", "-INFINITY", "acc = (v > acc || isnan(v)) ? v : acc",
               "acc = (v > acc || isnan(v)) ? v : acc", "ST(y, o, acc)")
    RED_KERNEL("r_min", "CT", "INFINITY", "acc = (v < acc || isnan(v)) ? v : acc",
               "acc = (v < acc || isnan(v)) ? v : acc", "ST(y, o, acc)")
    RED_KERNEL("r_l2", "DBL", "0", "acc += (DBL)v * (DBL)v", "acc += v", "ST(y, o, (CT)sqrt(acc))")
    "#endif\n"
    /* ArgMax/ArgMin over R rows `inner` apart; a NaN counts as the extreme (numpy: the first NaN) */
    "__kernel void argext(__global const T *x, ulong xo, __global long *y, ulong yo, ulong R, ulong inner,\n"
    "                     int is_max, int last) {\n"
    "  ulong g = get_global_id(0), o = g / inner, i = g % inner;\n"
    "  const __global T *p = x + xo + o * R * inner + i;\n"
    "  CT best = LD(p, 0); long idx = 0;\n"
    "  for (ulong r = 1; r < R; r++) {\n"
    "    CT v = LD(p, r * inner);\n"
    "    bool vn = ISNAN(v), bn = ISNAN(best), take;\n"
    "    if (vn) take = last || !bn;\n"
    "    else take = !bn && (is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best));\n"
    "    if (take) { best = v; idx = (long)r; }\n"
    "  }\n"
    "  y[yo + g] = idx;\n"
    "}\n"
    "#ifndef IS_INT\n"
    /* Softmax over R rows `inner` apart: max, then the sum of exp in DBL, then the scaled (or log) values */
    "__kernel void softmax(__global const T *x, ulong xo, __global T *y, ulong yo, ulong R, ulong inner,\n"
    "                      int is_log) {\n"
    "  ulong g = get_global_id(0), o = g / inner, i = g % inner, base = o * R * inner + i;\n"
    "  x += xo + base; y += yo + base;\n"
    "  CT m = -INFINITY;\n"
    "  for (ulong r = 0; r < R; r++) { CT v = LD(x, r * inner); m = (v > m || isnan(v)) ? v : m; }\n"
    "  DBL s = 0;\n"
    "  for (ulong r = 0; r < R; r++) s += (DBL)exp(LD(x, r * inner) - m);\n"
    "  if (is_log) {\n"
    "    CT ls = (CT)log(s);\n"
    "    for (ulong r = 0; r < R; r++) ST(y, r * inner, (LD(x, r * inner) - m) - ls);\n"
    "  } else {\n"
    "    CT inv = (CT)(1 / s);\n"
    "    for (ulong r = 0; r < R; r++) ST(y, r * inner, exp(LD(x, r * inner) - m) * inv);\n"
    "  }\n"
    "}\n"
    /* y = x * a + b with a = scale / sqrt(var + eps), b = bias - mean * a per channel (i / S) % C */
    "__kernel void batchnorm(__global const T *x, ulong xo, __global T *y, ulong yo,\n"
    "                        __global const T *sc, ulong so, __global const T *bi, ulong bo,\n"
    "                        __global const T *mean, ulong mo, __global const T *var, ulong vo,\n"
    "                        ulong C, ulong S, DBL eps) {\n"
    "  ulong i = get_global_id(0), c = (i / S) % C;\n"
    "  x += xo; y += yo; sc += so; bi += bo; mean += mo; var += vo;\n"
    "  DBL a = (DBL)LD(sc, c) / sqrt((DBL)LD(var, c) + eps);\n"
    "  DBL b = (DBL)LD(bi, c) - (DBL)LD(mean, c) * a;\n"
    "  ST(y, i, LD(x, i) * (CT)a + (CT)b);\n"
    "}\n"
    /* FusedBatchNorm over x [N, C, S]: one work-item per channel for the statistics (the mean, then the
     * centred sum of squares, in DBL; the biased variance); then y = (x - mean) a + offset per element
     * (centred first, as the CPU does: x a - mean a cancels when the variance is near 0). The
     * gradient: the two sums per channel, then dx per element (src/graph/ops_reduce.c has the formulas). */
    "__kernel void fbn_stats(__global const T *x, ulong xo, __global T *mean, ulong mo, __global T *var, ulong vo,\n"
    "                        ulong N, ulong C, ulong S) {\n"
    "  ulong c = get_global_id(0);\n"
    "  x += xo; mean += mo; var += vo;\n"
    "  DBL sum = 0, sq = 0, M = (DBL)(N * S);\n"
    "  for (ulong n = 0; n < N; n++)\n"
    "    for (ulong s = 0; s < S; s++) sum += (DBL)LD(x, (n * C + c) * S + s);\n"
    "  DBL m = sum / M;\n"
    "  for (ulong n = 0; n < N; n++)\n"
    "    for (ulong s = 0; s < S; s++) { DBL d = (DBL)LD(x, (n * C + c) * S + s) - m; sq += d * d; }\n"
    "  ST(mean, c, (CT)m); ST(var, c, (CT)(sq / M));\n"
    "}\n"
    "__kernel void fbn_apply(__global const T *x, ulong xo, __global T *y, ulong yo,\n"
    "                        __global const T *sc, ulong so, __global const T *bi, ulong bo,\n"
    "                        __global const T *mean, ulong mo, __global const T *var, ulong vo,\n"
    "                        ulong C, ulong S, DBL eps) {\n"
    "  ulong i = get_global_id(0), c = (i / S) % C;\n"
    "  x += xo; y += yo; sc += so; bi += bo; mean += mo; var += vo;\n"
    "  CT a = (CT)((DBL)LD(sc, c) / sqrt((DBL)LD(var, c) + eps));\n"
    "  ST(y, i, (LD(x, i) - LD(mean, c)) * a + LD(bi, c));\n"
    "}\n"
    "__kernel void fbn_grad_red(__global const T *dy, ulong dyo, __global const T *x, ulong xo,\n"
    "                           __global const T *mean, ulong mo, __global const T *var, ulong vo,\n"
    "                           __global T *dsc, ulong dso, __global T *dof, ulong doo, ulong N, ulong C,\n"
    "                           ulong S, DBL eps) {\n"
    "  ulong c = get_global_id(0);\n"
    "  dy += dyo; x += xo; mean += mo; var += vo; dsc += dso; dof += doo;\n"
    "  DBL m = (DBL)LD(mean, c), r = 1 / sqrt((DBL)LD(var, c) + eps), so = 0, ss = 0;\n"
    "  for (ulong n = 0; n < N; n++)\n"
    "    for (ulong s = 0; s < S; s++) {\n"
    "      ulong i = (n * C + c) * S + s;\n"
    "      DBL g = (DBL)LD(dy, i);\n"
    "      so += g; ss += g * ((DBL)LD(x, i) - m) * r;\n"
    "    }\n"
    "  ST(dof, c, (CT)so); ST(dsc, c, (CT)ss);\n"
    "}\n"
    "__kernel void fbn_grad_dx(__global const T *dy, ulong dyo, __global const T *x, ulong xo,\n"
    "                          __global T *dx, ulong dxo, __global const T *sc, ulong sco,\n"
    "                          __global const T *mean, ulong mo, __global const T *var, ulong vo,\n"
    "                          __global const T *dsc, ulong dso, __global const T *dof, ulong doo,\n"
    "                          __global const T *dm, ulong dmo, __global const T *dv, ulong dvo, int has_dm,\n"
    "                          int has_dv, ulong C, ulong S, ulong M, DBL eps) {\n"
    "  ulong i = get_global_id(0), c = (i / S) % C;\n"
    "  dy += dyo; x += xo; dx += dxo; sc += sco; mean += mo; var += vo; dsc += dso; dof += doo;\n"
    "  dm += dmo; dv += dvo;\n"
    "  DBL Md = (DBL)M, r = 1 / sqrt((DBL)LD(var, c) + eps), xc = (DBL)LD(x, i) - (DBL)LD(mean, c);\n"
    "  DBL g = (DBL)LD(sc, c) * r * ((DBL)LD(dy, i) - (DBL)LD(dof, c) / Md - xc * r * (DBL)LD(dsc, c) / Md);\n"
    "  if (has_dm) g += (DBL)LD(dm, c) / Md;\n"
    "  if (has_dv) g += (DBL)LD(dv, c) * 2 * xc / Md;\n"
    "  ST(dx, i, (CT)g);\n"
    "}\n"
    /* One row of D per work-item; Scale and B broadcast over the normalised dims nd (strides ss/bs, 0
     * where broadcast; *_direct when the parameter is exactly D contiguous values). */
    "ulong pidx(ulong d, int nr, const ulong *nd, const ulong *ps) {\n"
    "  ulong off = 0;\n"
    "  for (int i = nr - 1; i >= 0; i--) { off += (d % nd[i]) * ps[i]; d /= nd[i]; }\n"
    "  return off;\n"
    "}\n"
    "__kernel void layernorm(__global const T *x, ulong xo, __global T *y, ulong yo,\n"
    "                        __global const T *sc, ulong so, __global const T *bi, ulong bo, int has_b,\n"
    "                        __global float *mo, ulong moo, __global float *io, ulong ioo, int stats,\n"
    "                        ulong D, DBL eps, int nr, ulong8 nd8, ulong8 ss8, ulong8 bs8, int s_direct,\n"
    "                        int b_direct) {\n"
    "  ulong row = get_global_id(0), nd[8], ss[8], bs[8];\n"
    "  UNPACK8(nd8, nd); UNPACK8(ss8, ss); UNPACK8(bs8, bs);\n"
    "  x += xo + row * D; y += yo + row * D; sc += so; bi += bo;\n"
    "  DBL sum = 0, sq = 0;\n"
    "  for (ulong i = 0; i < D; i++) sum += (DBL)LD(x, i);\n"
    "  DBL mean = sum / (DBL)D;\n"
    "  for (ulong i = 0; i < D; i++) { DBL d = (DBL)LD(x, i) - mean; sq += d * d; }\n"
    "  CT inv = (CT)(1 / sqrt(sq / (DBL)D + eps)), mf = (CT)mean;\n"
    "  for (ulong i = 0; i < D; i++) {\n"
    "    CT s = LD(sc, s_direct ? i : pidx(i, nr, nd, ss));\n"
    "    CT v = (LD(x, i) - mf) * inv * s;\n"
    "    if (has_b) v += LD(bi, b_direct ? i : pidx(i, nr, nd, bs));\n"
    "    ST(y, i, v);\n"
    "  }\n"
    "  if (stats & 1) mo[moo + row] = (float)mean;\n"
    "  if (stats & 2) io[ioo + row] = (float)inv;\n"
    "}\n"
    "#endif\n";

static wf_status *get_kernel(wf__kctx *k, wf_dtype t, const char *name, cl_kernel *out)
{
    return ocl_nnr_kernel(k, "reduce", g_src, t, name, out);
}

/* A plan's group array as the kernels' ulong8 (unused lanes 0). */
static void ocl_reduce_u8(const int64_t *v, cl_ulong8 *out)
{
    for (int i = 0; i < 8; i++) out->s[i] = i < WF_MAX_RANK ? (cl_ulong)v[i] : 0;
}

/* ---- Reduce* ------------------------------------------------------------------------------------------ */

/* Reads the node's axes (attribute or input 1, read back from the device) into red[]; *none when none
 * were given. */
static wf_status *read_axes(wf__kctx *k, const wf_tensor *x, bool *red, bool *none)
{
    const wf__attr *attr = ocl_host->attr_get(k->op, k->attrs, "axes");
    int64_t axes[WF_MAX_RANK];
    int n = 0;
    const wf_tensor *at = k->n_in > 1 ? k->in[1] : NULL;
    char b0[160];
    if (!wf__ku_axes_attr(attr, at != NULL, axes, &n, b0, sizeof b0))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", b0);
    if (!attr->set && at) {
        if ((at->dtype != WF_I64 && at->dtype != WF_I32) || at->rank > 1 || at->size > WF_MAX_RANK)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axes must be a 1-D i64 tensor of at most %d values, got %s",
                                       WF_MAX_RANK, ocl_nnr_tstr(at, b0));
        n = (int)at->size;
        int64_t raw[WF_MAX_RANK];
        wf_status *s = ocl_nnr_read(k, at, raw, (size_t)n * ocl_size(at->dtype));
        if (s) return s;
        for (int i = 0; i < n; i++) axes[i] = ocl_nnr_int_at(raw, at->dtype, i);
    }
    *none = n == 0;
    int bad = 0, fault = wf__ku_axes_mark(axes, n, x->rank, red, &bad);
    if (fault == WF__KU_AXES_RANGE)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axes[bad],
                                   ocl_nnr_tstr(x, b0));
    if (fault) return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is repeated in axes", (long long)axes[bad]);
    return NULL;
}

static wf_status *k_reduce(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    bool red[WF_MAX_RANK], none = true;
    wf_status *s = read_axes(k, x, red, &none);
    if (s) return s;
    bool keepdims = ocl_host->attr_get(k->op, k->attrs, "keepdims")->i != 0;
    if (none) {
        if (ocl_host->attr_get(k->op, k->attrs, "noop_with_empty_axes")->i)
            return ocl_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
        for (int i = 0; i < x->rank; i++) red[i] = true;
    }
    int64_t ydims[WF_MAX_RANK], count;
    int yr;
    wf__ku_reduce_out(x->rank, x->dims, red, keepdims, ydims, &yr, &count);
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, yr, ydims, &y)) || !y->size) return s;
    wf__ku_red_plan p;
    wf__ku_reduce_plan(x->rank, x->dims, red, &p);
    cl_ulong8 kd, ks, rd, rs;
    cl_int nk = p.nk, nr = p.nr;
    ocl_reduce_u8(p.kd, &kd);
    ocl_reduce_u8(p.ks, &ks);
    ocl_reduce_u8(p.rd, &rd);
    ocl_reduce_u8(p.rs, &rs);
    static const char *const ops[][2] = {{"ReduceSum", "r_sum"},   {"ReduceMean", "r_mean"}, {"ReduceMax", "r_max"},
                                         {"ReduceMin", "r_min"},   {"ReduceProd", "r_prod"}, {"ReduceL2", "r_l2"}};
    const char *kname = "r_sum";
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(k->op->name, ops[i][0])) kname = ops[i][1];
    cl_kernel kern;
    char wgname[16];
    bool wg = y->size <= RWG_MAX_OUT && count >= RWG_MIN_COUNT && ocl_of(k)->max_wg >= RWG;
    if (wg) {
        snprintf(wgname, sizeof wgname, "%s_wg", kname);
        if ((s = get_kernel(k, x->dtype, wgname, &kern))) return s;
        size_t kwg = 0;
        /* the kernel's own limit (registers, local memory) may be below the device's */
        wg = clGetKernelWorkGroupInfo(kern, ocl_of(k)->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) ==
                 CL_SUCCESS &&
             kwg >= RWG;
    }
    if (!wg && (s = get_kernel(k, x->dtype, kname, &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), cnt = (cl_ulong)count;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(nk), OCL_ARG(kd),
                      OCL_ARG(ks), OCL_ARG(nr), OCL_ARG(rd), OCL_ARG(rs), OCL_ARG(cnt)};
    size_t gsz = (size_t)y->size * (wg ? RWG : 1), lsz = RWG;
    return ocl_launch(k, kern, 11, args, 1, &gsz, wg ? &lsz : NULL);
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------------------------ */

static wf_status *k_arg(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160];
    int a;
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                   ocl_nnr_tstr(x, b0));
    bool keepdims = ocl_host->attr_get(k->op, k->attrs, "keepdims")->i != 0;
    cl_int last = ocl_host->attr_get(k->op, k->attrs, "select_last_index")->i != 0;
    cl_int is_max = !strcmp(k->op->name, "ArgMax");
    int64_t ydims[WF_MAX_RANK], outer, inner, R;
    int yr;
    wf__ku_arg_plan(x->rank, x->dims, a, keepdims, ydims, &yr, &outer, &R, &inner);
    if (R == 0 && outer * inner > 0)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot take %s over the empty axis %d of input %s", k->op->name,
                                   a, ocl_nnr_tstr(x, b0));
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, WF_I64, yr, ydims, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = get_kernel(k, x->dtype, "argext", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), r = (cl_ulong)R, in = (cl_ulong)inner;
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(r), OCL_ARG(in), OCL_ARG(is_max), OCL_ARG(last)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 8, args, 1, &gsz, NULL);
}

/* ---- Softmax / LogSoftmax -------------------------------------------------------------------------------- */

static wf_status *k_softmax(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160];
    int a = 0;
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    if (x->rank > 0 && !wf__ku_norm_axis(axis, x->rank, &a))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                   ocl_nnr_tstr(x, b0));
    int64_t outer, R, inner;
    wf__ku_axis_split(x->rank, x->dims, a, &outer, &R, &inner);
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = get_kernel(k, x->dtype, "softmax", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), r = (cl_ulong)R, in = (cl_ulong)inner;
    cl_int is_log = !strcmp(k->op->name, "LogSoftmax");
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(r), OCL_ARG(in), OCL_ARG(is_log)};
    size_t gsz = (size_t)(outer * inner);
    return ocl_launch(k, kern, 7, args, 1, &gsz, NULL);
}

/* ---- BatchNormalization ------------------------------------------------------------------------------------ */

static wf_status *k_batchnorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    char b0[160], b1[160];
    static const char *const pname[5] = {"X", "scale", "B", "input_mean", "input_var"};
    if (x->rank < 2)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input X %s must have rank >= 2 (N, C, ...)", ocl_nnr_tstr(x, b0));
    int64_t C = x->dims[1];
    for (int i = 1; i < 5; i++) {
        const wf_tensor *p = k->in[i];
        if (p->dtype != x->dtype || p->rank != 1 || p->dims[0] != C)
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s must be 1-D of length %lld with X's dtype %s", pname[i],
                                       ocl_nnr_tstr(p, b1), (long long)C, ocl_nnr_dtname(x->dtype));
    }
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (s || !y->size) return s;
    cl_kernel kern;
    if ((s = get_kernel(k, x->dtype, "batchnorm", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y), pm[4];
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), po[4];
    for (int i = 0; i < 4; i++) {
        pm[i] = ocl_mem(k->in[i + 1]);
        po[i] = ocl_off(k->in[i + 1]);
    }
    cl_ulong Cu = (cl_ulong)C, S = (cl_ulong)(x->size / (x->dims[0] * C));
    ocl_nnr_dbl eps = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "epsilon")->f);
    ocl_arg args[] = {OCL_ARG(xm),    OCL_ARG(xo),    OCL_ARG(ym),    OCL_ARG(yo),    OCL_ARG(pm[0]),
                      OCL_ARG(po[0]), OCL_ARG(pm[1]), OCL_ARG(po[1]), OCL_ARG(pm[2]), OCL_ARG(po[2]),
                      OCL_ARG(pm[3]), OCL_ARG(po[3]), OCL_ARG(Cu),    OCL_ARG(S),     OCL_DBL(eps)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 15, args, 1, &gsz, NULL);
}

/* ---- FusedBatchNorm, FusedBatchNormGrad (training) --------------------------------------------------------- */

static wf_status *fbn_check(wf__kctx *k, bool grad, const char *const *pname)
{
    int bad = wf__ku_fbn_bad_input((const wf_tensor *const *)k->in, k->n_in, grad);
    if (bad < 0) return NULL;
    const wf_tensor *x = k->in[grad ? 1 : 0], *p = k->in[bad];
    char b0[160], b1[160], msg[480];
    ocl_nnr_tstr(x, b0);
    ocl_nnr_tstr(p, b1);
    wf__ku_fbn_message((const wf_tensor *const *)k->in, bad, grad, pname, b0, b1, msg, sizeof msg);
    return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", msg);
}

static void fbn_geom(const wf_tensor *x, cl_ulong *N, cl_ulong *C, cl_ulong *S)
{
    int64_t n, c, s;
    wf__ku_fbn_geom(x, &n, &c, &s);
    *N = (cl_ulong)n, *C = (cl_ulong)c, *S = (cl_ulong)s;
}

static wf_status *k_fused_bn(wf__kctx *k)
{
    static const char *const pname[3] = {"x", "scale", "offset"};
    wf_status *s = fbn_check(k, false, pname);
    if (s) return s;
    const wf_tensor *x = k->in[0];
    cl_ulong N, C, S;
    fbn_geom(x, &N, &C, &S);
    int64_t c64 = (int64_t)C;
    wf_tensor *y, *mt, *vt;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y)) ||
        (s = ocl_host->kctx_output(k, 1, x->dtype, 1, &c64, &mt)) ||
        (s = ocl_host->kctx_output(k, 2, x->dtype, 1, &c64, &vt)) || C == 0)
        return s;
    cl_kernel ks, kb;
    if ((s = get_kernel(k, x->dtype, "fbn_stats", &ks)) || (s = get_kernel(k, x->dtype, "fbn_apply", &kb))) return s;
    /* an empty batch: 0/0 in the kernel, NaN statistics */
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y), mm = ocl_mem(mt), vm = ocl_mem(vt), sm = ocl_mem(k->in[1]),
           bm = ocl_mem(k->in[2]);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), mo = ocl_off(mt), vo = ocl_off(vt), so = ocl_off(k->in[1]),
             bo = ocl_off(k->in[2]);
    ocl_arg a1[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(mm), OCL_ARG(mo), OCL_ARG(vm),
                    OCL_ARG(vo), OCL_ARG(N),  OCL_ARG(C),  OCL_ARG(S)};
    size_t gc = (size_t)C;
    if ((s = ocl_launch(k, ks, 9, a1, 1, &gc, NULL)) || !y->size) return s;
    ocl_nnr_dbl eps = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "epsilon")->f);
    ocl_arg a2[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(sm), OCL_ARG(so), OCL_ARG(bm), OCL_ARG(bo),
                    OCL_ARG(mm), OCL_ARG(mo), OCL_ARG(vm), OCL_ARG(vo), OCL_ARG(C),  OCL_ARG(S),  OCL_DBL(eps)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kb, 15, a2, 1, &gsz, NULL);
}

static wf_status *k_fused_bn_grad(wf__kctx *k)
{
    static const char *const pname[7] = {"dy", "x", "scale", "batch_mean", "batch_variance", "d_mean", "d_variance"};
    wf_status *s = fbn_check(k, true, pname);
    if (s) return s;
    const wf_tensor *dy = k->in[0], *x = k->in[1];
    const wf_tensor *dmt = k->n_in > 5 ? k->in[5] : NULL, *dvt = k->n_in > 6 ? k->in[6] : NULL;
    cl_ulong N, C, S;
    fbn_geom(x, &N, &C, &S);
    int64_t c64 = (int64_t)C;
    wf_tensor *dx, *ds, *dof;
    if ((s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &dx)) ||
        (s = ocl_host->kctx_output(k, 1, x->dtype, 1, &c64, &ds)) ||
        (s = ocl_host->kctx_output(k, 2, x->dtype, 1, &c64, &dof)) || C == 0)
        return s;
    cl_kernel kr, kd;
    if ((s = get_kernel(k, x->dtype, "fbn_grad_red", &kr)) || (s = get_kernel(k, x->dtype, "fbn_grad_dx", &kd))) return s;
    cl_mem dym = ocl_mem(dy), xm = ocl_mem(x), dxm = ocl_mem(dx), scm = ocl_mem(k->in[2]), mm = ocl_mem(k->in[3]),
           vm = ocl_mem(k->in[4]), dsm = ocl_mem(ds), dom = ocl_mem(dof), dmm = dmt ? ocl_mem(dmt) : mm,
           dvm = dvt ? ocl_mem(dvt) : vm;
    cl_ulong dyo = ocl_off(dy), xo = ocl_off(x), dxo = ocl_off(dx), sco = ocl_off(k->in[2]), mo = ocl_off(k->in[3]),
             vo = ocl_off(k->in[4]), dso = ocl_off(ds), doo = ocl_off(dof), dmo = dmt ? ocl_off(dmt) : mo,
             dvo = dvt ? ocl_off(dvt) : vo, M = N * S;
    cl_int has_dm = dmt != NULL, has_dv = dvt != NULL;
    ocl_nnr_dbl eps = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "epsilon")->f);
    /* an empty batch: no terms, zero parameter gradients and an empty dx */
    ocl_arg a1[] = {OCL_ARG(dym), OCL_ARG(dyo), OCL_ARG(xm),  OCL_ARG(xo), OCL_ARG(mm), OCL_ARG(mo),
                    OCL_ARG(vm),  OCL_ARG(vo),  OCL_ARG(dsm), OCL_ARG(dso), OCL_ARG(dom), OCL_ARG(doo),
                    OCL_ARG(N),   OCL_ARG(C),   OCL_ARG(S),   OCL_DBL(eps)};
    size_t gc = (size_t)C;
    if ((s = ocl_launch(k, kr, 16, a1, 1, &gc, NULL)) || !dx->size) return s;
    ocl_arg a2[] = {OCL_ARG(dym), OCL_ARG(dyo), OCL_ARG(xm),  OCL_ARG(xo),  OCL_ARG(dxm),    OCL_ARG(dxo),
                    OCL_ARG(scm), OCL_ARG(sco), OCL_ARG(mm),  OCL_ARG(mo),  OCL_ARG(vm),     OCL_ARG(vo),
                    OCL_ARG(dsm), OCL_ARG(dso), OCL_ARG(dom), OCL_ARG(doo), OCL_ARG(dmm),    OCL_ARG(dmo),
                    OCL_ARG(dvm), OCL_ARG(dvo), OCL_ARG(has_dm), OCL_ARG(has_dv), OCL_ARG(C), OCL_ARG(S),
                    OCL_ARG(M),   OCL_DBL(eps)};
    size_t gsz = (size_t)dx->size;
    return ocl_launch(k, kd, (int)(sizeof a2 / sizeof a2[0]), a2, 1, &gsz, NULL);
}

/* ---- LayerNormalization ---------------------------------------------------------------------------------- */

/* A parameter's strides as the kernel's ulong8; *direct when it holds exactly the normalised dims. */
static void param_strides(const wf_tensor *p, const wf_tensor *x, int a, cl_ulong8 *st, cl_int *direct)
{
    int64_t v[WF_MAX_RANK] = {0};
    *direct = wf__ku_ln_param_strides(p, x, a, v);
    ocl_reduce_u8(v, st);
}

static wf_status *k_layernorm(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *sc = k->in[1], *bi = k->n_in > 2 ? k->in[2] : NULL;
    char b0[160], b1[160];
    int a;
    int64_t axis = ocl_host->attr_get(k->op, k->attrs, "axis")->i;
    if (!wf__ku_norm_axis(axis, x->rank, &a))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "axis %lld is out of range for input %s", (long long)axis,
                                   ocl_nnr_tstr(x, b0));
    for (int i = 0; i < 2; i++) {
        const wf_tensor *p = i ? bi : sc;
        if (p && (p->dtype != x->dtype || !wf__ku_ln_param_fits(p, x, a)))
            return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "%s %s does not match X %s from axis %d", i ? "B" : "Scale",
                                       ocl_nnr_tstr(p, b1), ocl_nnr_tstr(x, b0), a);
    }
    int64_t rows, D, mdims[WF_MAX_RANK];
    wf__ku_ln_split(x->rank, x->dims, a, &rows, &D, mdims);
    wf_tensor *y, *mt = NULL, *it = NULL;
    wf_status *s = ocl_host->kctx_output(k, 0, x->dtype, x->rank, x->dims, &y);
    if (!s && k->n_out > 1) s = ocl_host->kctx_output(k, 1, WF_F32, x->rank, mdims, &mt);
    if (!s && k->n_out > 2) s = ocl_host->kctx_output(k, 2, WF_F32, x->rank, mdims, &it);
    if (s || rows == 0) return s;
    cl_kernel kern;
    if ((s = get_kernel(k, x->dtype, "layernorm", &kern))) return s;
    /* D == 0: no elements to normalise, and the statistics of an empty set are NaN (0/0 in the kernel) */
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y), sm = ocl_mem(sc), bm = bi ? ocl_mem(bi) : sm;
    cl_mem mm = mt ? ocl_mem(mt) : ym, im = it ? ocl_mem(it) : ym;
    cl_ulong xo = ocl_off(x), yo = ocl_off(y), so = ocl_off(sc), bo = bi ? ocl_off(bi) : 0;
    cl_ulong mo = mt ? ocl_off(mt) : 0, io = it ? ocl_off(it) : 0, Du = (cl_ulong)D;
    cl_int has_b = bi != NULL, stats = (mt ? 1 : 0) | (it ? 2 : 0), nr = x->rank - a, sdir, bdir = 1;
    cl_ulong8 nd, ss, bs;
    memset(&nd, 0, sizeof nd);
    for (int i = 0; i < nr; i++) nd.s[i] = (cl_ulong)x->dims[a + i];
    param_strides(sc, x, a, &ss, &sdir);
    if (bi) param_strides(bi, x, a, &bs, &bdir);
    else memset(&bs, 0, sizeof bs);
    ocl_nnr_dbl eps = ocl_nnr_dbl_of(k, ocl_host->attr_get(k->op, k->attrs, "epsilon")->f);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym),    OCL_ARG(yo), OCL_ARG(sm), OCL_ARG(so),   OCL_ARG(bm),
                      OCL_ARG(bo), OCL_ARG(has_b), OCL_ARG(mm), OCL_ARG(mo), OCL_ARG(im), OCL_ARG(io),   OCL_ARG(stats),
                      OCL_ARG(Du), OCL_DBL(eps), OCL_ARG(nr),   OCL_ARG(nd), OCL_ARG(ss), OCL_ARG(bs),   OCL_ARG(sdir),
                      OCL_ARG(bdir)};
    size_t gsz = (size_t)rows;
    return ocl_launch(k, kern, (int)(sizeof args / sizeof args[0]), args, 1, &gsz, NULL);
}

/* ---- Dropout (inference) --------------------------------------------------------------------------------- */

static wf_status *k_dropout(wf__kctx *k)
{
    const wf_tensor *x = k->in[0], *tm = k->n_in > 2 ? k->in[2] : NULL;
    if (tm && tm->size >= 1) {
        unsigned char on = 0;
        wf_status *s = ocl_nnr_read(k, tm, &on, 1);
        if (s) return s;
        if (on) return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "training mode not supported yet");
    }
    wf_status *s = ocl_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
    if (s || k->n_out < 2) return s;
    wf_tensor *mask;
    if ((s = ocl_host->kctx_output(k, 1, WF_BOOL, x->rank, x->dims, &mask)) || !mask->size) return s;
    cl_uchar one = 1;
    cl_int st = clEnqueueFillBuffer(ocl_of(k)->q, ocl_mem(mask), &one, 1, mask->dev_offset, (size_t)mask->size, 0, NULL,
                                    NULL);
    return st == CL_SUCCESS ? NULL : ocl_fail(k, st, "mask fill");
}

/* ---- the table ------------------------------------------------------------------------------------------- */

const wf__kernel_def ocl_kernels_reduce[] = {
    {"ReduceSum", "OPENCL", WF__DT_NUMERIC, 0, k_reduce},
    {"ReduceMean", "OPENCL", WF__DT_NUMERIC, 0, k_reduce},
    {"ReduceMax", "OPENCL", WF__DT_NUMERIC, 0, k_reduce},
    {"ReduceMin", "OPENCL", WF__DT_NUMERIC, 0, k_reduce},
    {"ReduceProd", "OPENCL", WF__DT_NUMERIC, 0, k_reduce},
    {"ReduceL2", "OPENCL", WF__DT_NUMERIC, 0, k_reduce},
    {"ArgMax", "OPENCL", WF__DT_NUMERIC, 0, k_arg},
    {"ArgMin", "OPENCL", WF__DT_NUMERIC, 0, k_arg},
    {"Softmax", "OPENCL", WF__DT_FLOATS, 0, k_softmax},
    {"LogSoftmax", "OPENCL", WF__DT_FLOATS, 0, k_softmax},
    {"BatchNormalization", "OPENCL", WF__DT_FLOATS, 0, k_batchnorm},
    {"FusedBatchNorm", "OPENCL", WF__DT_FLOATS, 0, k_fused_bn},
    {"FusedBatchNormGrad", "OPENCL", WF__DT_FLOATS, 0, k_fused_bn_grad},
    {"LayerNormalization", "OPENCL", WF__DT_FLOATS, 0, k_layernorm},
    {"Dropout", "OPENCL", WF__DT_NUMERIC, 0, k_dropout},
    {0},
};
