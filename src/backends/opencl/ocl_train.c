/*
 * OpenCL kernels of the training ops (graph/ops_train.c): ApplyAdam in f32 and f64, one work-item per
 * element reading the four scalars from their device buffers (no read-back), and StatelessRandomUniform
 * in every float dtype through the counter hash of ops/kutil_random.h, so that the values equal the
 * CPU's bit for bit. Semantics are src/backends/cpu/k_train.c's.
 */
#include <stdio.h>

#include "backends/opencl/ocl_nnr.h"
#include "ops/kutil_random.h"
#include "ops/kutil_train.h"

/* FP_CONTRACT OFF and correctly rounded sqrt and division (the build option): ApplyAdam rounds once per
 * operation, as the CPU and the composite graph do. The hash constants are kutil_random.h's. The
 * random floats divide by a power of two, which is exact, like the CPU's multiplication by its inverse. */
static const char *g_src =
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "#ifdef HAS_F64\n"
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#endif\n"
    "ulong mix(ulong z) {\n"
    "  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;\n"
    "  z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;\n"
    "  return z ^ (z >> 31);\n"
    "}\n"
    "ulong rbits(ulong key, ulong i) { return mix(key + (i + 1) * 0x9E3779B97F4A7C15UL); }\n"
    "float rf32(ulong b) { return (float)(uint)(b >> 40) / 16777216.0f; }\n"
    "__kernel void rng_f32(__global float *y, ulong yo, ulong key) {\n"
    "  ulong i = get_global_id(0);\n"
    "  y[yo + i] = rf32(rbits(key, i));\n"
    "}\n"
    /* f16 and bf16 round toward zero, so no value reaches 1 */
    "__kernel void rng_f16(__global ushort *y, ulong yo, ulong key) {\n"
    "  ulong i = get_global_id(0);\n"
    "  float f = rf32(rbits(key, i));\n"
    "  uint u = as_uint(f);\n"
    "  y[yo + i] = f < 6.103515625e-05f ? (ushort)(f * 16777216.0f)\n"
    "                                   : (ushort)(((((u >> 23) & 0xffu) - 112u) << 10) | ((u >> 13) & 0x3ffu));\n"
    "}\n"
    "__kernel void rng_bf16(__global ushort *y, ulong yo, ulong key) {\n"
    "  ulong i = get_global_id(0);\n"
    "  y[yo + i] = (ushort)(as_uint(rf32(rbits(key, i))) >> 16);\n"
    "}\n"
    "#ifdef HAS_F64\n"
    "__kernel void rng_f64(__global double *y, ulong yo, ulong key) {\n"
    "  ulong i = get_global_id(0);\n"
    "  y[yo + i] = (double)(rbits(key, i) >> 11) / 9007199254740992.0;\n"
    "}\n"
    "#endif\n"
    "#define ADAM(n, T) \\\n"
    "__kernel void n(__global const T *w, ulong wo, __global const T *m, ulong mo, __global const T *v, ulong vo,\\\n"
    "                __global const T *g, ulong go, __global const T *plr, ulong lro, __global const T *pb1,\\\n"
    "                ulong b1o, __global const T *pb2, ulong b2o, __global const T *peps, ulong epso,\\\n"
    "                __global T *wn, ulong wno, __global T *mn, ulong mno, __global T *vn, ulong vno) {\\\n"
    "  ulong i = get_global_id(0);\\\n"
    "  T lr = plr[lro], b1 = pb1[b1o], b2 = pb2[b2o], eps = peps[epso];\\\n"
    "  T gi = g[go + i], mi = m[mo + i], vi = v[vo + i], wi = w[wo + i];\\\n"
    "  T a = gi - mi, b = a * b1; T m2 = mi + b;\\\n"
    "  T g2 = gi * gi, c = g2 - vi, d = c * b2; T v2 = vi + d;\\\n"
    "  T num = m2 * lr, den = sqrt(v2) + eps, st = num / den;\\\n"
    "  mn[mno + i] = m2; vn[vno + i] = v2; wn[wno + i] = wi - st;\\\n"
    "}\n"
    "ADAM(adam_f32, float)\n"
    "#ifdef HAS_F64\n"
    "ADAM(adam_f64, double)\n"
    "#endif\n";

static wf_status *train_kernel(wf__kctx *k, const char *name, cl_kernel *out)
{
    /* the option is only defined where the device can round f32 sqrt and division correctly; elsewhere
     * f32 ApplyAdam may differ from the CPU in the last bit */
    cl_device_fp_config fp = 0;
    bool exact = clGetDeviceInfo(ocl_of(k)->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS &&
                 (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT);
    char opts[96];
    snprintf(opts, sizeof opts, "%s%s", exact ? "-cl-fp32-correctly-rounded-divide-sqrt" : "",
             ocl_of(k)->fp64 ? " -DHAS_F64" : "");
    return ocl_kernel(k, "train", g_src, opts, name, out);
}

/* ---- ApplyAdam ------------------------------------------------------------------------------------- */

static wf_status *k_apply_adam(wf__kctx *k)
{
    const wf_tensor *w = k->in[0];
    char s1[160], s2[160];
    int i = wf__ku_adam_bad_input(k->in);
    if (i >= 0) {
        const wf_tensor *t = k->in[i];
        return i < 4 ? ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' %s must match w %s", wf__ku_adam_inputs[i],
                                           ocl_nnr_tstr(t, s1), ocl_nnr_tstr(w, s2))
                     : ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input '%s' %s must be a %s scalar",
                                           wf__ku_adam_inputs[i], ocl_nnr_tstr(t, s1), ocl_nnr_dtname(w->dtype));
    }
    wf_tensor *o[3];
    wf_status *s;
    for (int j = 0; j < 3; j++)
        if ((s = ocl_host->kctx_output(k, j, w->dtype, w->rank, w->dims, &o[j]))) return s;
    if (!w->size) return NULL;
    cl_kernel kern;
    if ((s = train_kernel(k, w->dtype == WF_F64 ? "adam_f64" : "adam_f32", &kern))) return s;
    cl_mem mem[11];
    cl_ulong off[11];
    ocl_arg args[22];
    for (int i = 0; i < 11; i++) {
        const wf_tensor *t = i < 8 ? k->in[i] : o[i - 8];
        mem[i] = ocl_mem(t);
        off[i] = ocl_off(t);
        args[2 * i] = OCL_ARG(mem[i]);
        args[2 * i + 1] = OCL_ARG(off[i]);
    }
    size_t gsz = (size_t)w->size;
    return ocl_launch(k, kern, 22, args, 1, &gsz, NULL);
}

/* ---- StatelessRandomUniform ---------------------------------------------------------------------- */

static wf_status *k_random_uniform(wf__kctx *k)
{
    const wf_tensor *like = k->in[0], *c = k->in[1];
    char s1[160];
    if (c->dtype != WF_I64 || c->size != 1)
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "input 'counter' %s must be an i64 scalar",
                                   ocl_nnr_tstr(c, s1));
    int64_t counter;
    wf_status *s = ocl_nnr_read(k, c, &counter, sizeof counter);
    if (s) return s;
    wf_tensor *y;
    if ((s = ocl_host->kctx_output(k, 0, like->dtype, like->rank, like->dims, &y)) || !y->size) return s;
    const char *name = like->dtype == WF_F64 ? "rng_f64" : like->dtype == WF_F16 ? "rng_f16"
                       : like->dtype == WF_BF16 ? "rng_bf16" : "rng_f32";
    cl_kernel kern;
    if ((s = train_kernel(k, name, &kern))) return s;
    cl_mem ym = ocl_mem(y);
    cl_ulong yo = ocl_off(y);
    cl_ulong key = wf__rng_key(ocl_host->attr_get(k->op, k->attrs, "seed")->i, counter);
    ocl_arg args[] = {OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(key)};
    size_t gsz = (size_t)y->size;
    return ocl_launch(k, kern, 3, args, 1, &gsz, NULL);
}

const wf__kernel_def ocl_kernels_train[] = {
    {"ApplyAdam", "OPENCL", WF__DT_BIT(WF_F32) | WF__DT_BIT(WF_F64), 0, k_apply_adam},
    {"StatelessRandomUniform", "OPENCL", WF__DT_FLOATS, 0, k_random_uniform},
    {0},
};
