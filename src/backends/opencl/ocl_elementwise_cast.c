/*
 * OpenCL kernel for Cast: one program per source dtype holding a kernel per destination. Semantics of
 * src/backends/cpu/k_elementwise_cast.c: float to integer truncates toward zero, NaN gives 0 and the
 * rest saturate; integers wrap; f16/bf16 on either side go through f32. Same dtype is a view.
 */
#include <stdio.h>

#include "backends/opencl/ocl_elementwise.h"

static const char *g_cast_src =
    OCLEW_PRELUDE
    "#define CV(n, DTY, E) __kernel void k_##n(__global const ST *px, ulong xo, __global DTY *py, ulong yo) { "
    "ulong i = get_global_id(0); CT v = LD(px, xo + i); py[yo + i] = (E); }\n"
    "#ifdef IS_FLT\n"
    "#define TOI(T, MN, MX) (v != v ? (T)0 : v <= (CT)(MN) ? (T)(MN) : v >= (CT)(MX) ? (T)(MX) : (T)v)\n"
    "#else\n"
    "#define TOI(T, MN, MX) ((T)v)\n"
    "#endif\n"
    "CV(to_f32, float, (float)v)\n"
    "#ifdef HAS_FP64\n"
    "CV(to_f64, double, (double)v)\n"
    "#endif\n"
    /* through f32, as the CPU: f64 and large i64 sources round twice */
    "__kernel void k_to_f16(__global const ST *px, ulong xo, __global half *py, ulong yo) {\n"
    "  ulong i = get_global_id(0);\n"
    "  CT v = LD(px, xo + i);\n"
    "  vstore_half_rte((float)v, yo + i, py);\n"
    "}\n"
    "CV(to_bf16, ushort, bf_st((float)v))\n"
    "CV(to_i8, char, TOI(char, -128, 127))\n"
    "CV(to_u8, uchar, TOI(uchar, 0, 255))\n"
    "CV(to_i16, short, TOI(short, -32768, 32767))\n"
    "CV(to_i32, int, TOI(int, (-2147483647 - 1), 2147483647))\n"
    "CV(to_i64, long, TOI(long, (-9223372036854775807L - 1), 9223372036854775807L))\n"
    "CV(to_bool, uchar, (uchar)(v != 0))\n";

static const char *kernel_name(wf_dtype to)
{
    switch (to) {
    case WF_F32: return "to_f32";
    case WF_F64: return "to_f64";
    case WF_F16: return "to_f16";
    case WF_BF16: return "to_bf16";
    case WF_I8: return "to_i8";
    case WF_U8: return "to_u8";
    case WF_I16: return "to_i16";
    case WF_I32: return "to_i32";
    case WF_I64: return "to_i64";
    case WF_BOOL: return "to_bool";
    default: return NULL;
    }
}

wf_status *oclew_k_Cast(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    const wf__attr *a = ocl_host->attr_get(k->op, k->attrs, "to");
    wf_dtype to = a ? (wf_dtype)a->i : WF_DTYPE_INVALID;
    const char *name = kernel_name(to);
    if (!name || !kernel_name(x->dtype))
        return ocl_host->kctx_fail(k, WF_INVALID_ARGUMENT, "cannot cast dtype %d to dtype %d", (int)x->dtype, (int)to);
    if (to == x->dtype) return ocl_host->kctx_output_view(k, 0, 0, x->rank, x->dims);
    if (to == WF_F64 && !ocl_of(k)->fp64)
        return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "%s has no double precision", k->device->short_name);
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, to, x->rank, x->dims, &y);
    if (s) return s;
    cl_kernel kern;
    if ((s = oclew_kernel(k, "elementwise-cast", g_cast_src, x->dtype, name, &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo)};
    size_t n = (size_t)y->size;
    return ocl_launch(k, kern, 4, args, 1, &n, NULL);
}
