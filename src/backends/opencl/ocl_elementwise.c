/* OpenCL kernels of the elementwise family. */
#include <stdio.h>

#include "backends/opencl/ocl.h"

static const char *g_src =
    "__kernel void add_f32(__global const float *a, ulong ao, __global const float *b, ulong bo,\n"
    "                      __global float *y, ulong yo, ulong na, ulong nb) {\n"
    "  size_t i = get_global_id(0);\n"
    "  y[yo + i] = a[ao + (na == 1 ? 0 : i)] + b[bo + (nb == 1 ? 0 : i)];\n"
    "}\n"
    "__kernel void relu_f32(__global const float *x, ulong xo, __global float *y, ulong yo) {\n"
    "  size_t i = get_global_id(0);\n"
    "  y[yo + i] = fmax(x[xo + i], 0.0f);\n"
    "}\n";

static wf_status *k_add(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    if (a->size != b->size && a->size != 1 && b->size != 1)
        return ocl_host->kctx_fail(k, WF_UNIMPLEMENTED, "general broadcasting is not implemented on OpenCL yet");
    const wf_tensor *big = a->size >= b->size ? a : b;
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, WF_F32, big->rank, big->dims, &y);
    if (s) return s;
    cl_kernel kern;
    if ((s = ocl_kernel(k, "elementwise", g_src, "", "add_f32", &kern))) return s;
    cl_mem am = ocl_mem(a), bm = ocl_mem(b), ym = ocl_mem(y);
    cl_ulong ao = ocl_off(a), bo = ocl_off(b), yo = ocl_off(y), na = (cl_ulong)a->size, nb = (cl_ulong)b->size;
    ocl_arg args[] = {OCL_ARG(am), OCL_ARG(ao), OCL_ARG(bm), OCL_ARG(bo), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(na), OCL_ARG(nb)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 8, args, 1, &g, NULL);
}

static wf_status *k_relu(wf__kctx *k)
{
    const wf_tensor *x = k->in[0];
    wf_tensor *y;
    wf_status *s = ocl_host->kctx_output(k, 0, WF_F32, x->rank, x->dims, &y);
    if (s) return s;
    cl_kernel kern;
    if ((s = ocl_kernel(k, "elementwise", g_src, "", "relu_f32", &kern))) return s;
    cl_mem xm = ocl_mem(x), ym = ocl_mem(y);
    cl_ulong xo = ocl_off(x), yo = ocl_off(y);
    ocl_arg args[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym), OCL_ARG(yo)};
    size_t g = (size_t)y->size;
    return ocl_launch(k, kern, 4, args, 1, &g, NULL);
}

const wf__kernel_def ocl_kernels_elementwise[] = {
    {"Add", "OPENCL", WF__DT_BIT(WF_F32), 0, k_add},
    {"Relu", "OPENCL", WF__DT_BIT(WF_F32), 0, k_relu},
    {0},
};
