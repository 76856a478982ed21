/* The kernel registry: (op, device type, key dtype) -> kernel, over the backends' tables. */
#include "device/kernel.h"

static const wf__kernel_def *const g_cpu_tables[] = {
    wf__cpu_kernels_core,   wf__cpu_kernels_elementwise, wf__cpu_kernels_shape, wf__cpu_kernels_nn,
    wf__cpu_kernels_reduce, wf__cpu_kernels_math,        wf__cpu_kernels_misc,  wf__cpu_kernels_onnx,
    wf__cpu_kernels_rnn_image, wf__cpu_kernels_nn_grad, wf__cpu_kernels_train, wf__cpu_kernels_fused,
    wf__cpu_kernels_image_io, wf__cpu_kernels_image_augment};

const wf__kernel_def *wf__kernel_lookup(const char *op, const char *device_type, wf_dtype key)
{
    if (strcmp(device_type, "CPU") != 0) return NULL;
    for (size_t t = 0; t < sizeof g_cpu_tables / sizeof g_cpu_tables[0]; t++)
        for (const wf__kernel_def *k = g_cpu_tables[t]; k->op; k++)
            if (!strcmp(k->op, op) && wf__dtype_valid(key) && (k->dtypes & WF__DT_BIT(key))) return k;
    return NULL;
}

uint32_t wf__kernel_dtypes(const char *op, const char *device_type)
{
    uint32_t mask = 0;
    if (strcmp(device_type, "CPU") != 0) return 0;
    for (size_t t = 0; t < sizeof g_cpu_tables / sizeof g_cpu_tables[0]; t++)
        for (const wf__kernel_def *k = g_cpu_tables[t]; k->op; k++)
            if (!strcmp(k->op, op)) mask |= k->dtypes;
    return mask;
}

const wf__kernel_def *wf__kernel_find(const char *op, const char *device_type, const wf__tinfo *in,
                                      int n_in, const wf__tinfo *out)
{
    if (strcmp(device_type, "CPU") != 0) return NULL;
    for (size_t t = 0; t < sizeof g_cpu_tables / sizeof g_cpu_tables[0]; t++)
        for (const wf__kernel_def *k = g_cpu_tables[t]; k->op; k++) {
            if (strcmp(k->op, op) != 0) continue;
            wf_dtype key = k->key_input >= 0 ? (k->key_input < n_in ? in[k->key_input].dtype : WF_DTYPE_INVALID)
                                             : out[0].dtype;
            if (wf__dtype_valid(key) && (k->dtypes & WF__DT_BIT(key))) return k;
        }
    return NULL;
}
