/*
 * A test backend, "TESTDEV": two devices whose memory is host memory behind the device interface, with
 * a few kernels written here (Add, Mul, Relu, Identity, MatMul for f32). It exercises everything the
 * core does for a real accelerator (plugin loading, device memory, copies, kernel lookup) without one.
 */
#include <stdlib.h>
#include <string.h>

#include "device/device_impl.h"

static const wf_host_api *H;

typedef struct tdev {
    int index;
} tdev;

static int device_count(void *b) { return 2; }

static wf_status *device_info(void *b, int i, wf_backend_device_info *out)
{
    memset(out, 0, sizeof *out);
    strcpy(out->type, "TESTDEV");
    strcpy(out->description, i == 0 ? "weft test device (fast)" : "weft test device (slow)");
    out->compute_units = 4;
    out->memory_bytes = (uint64_t)1 << 30;
    out->peak_gflops = i == 0 ? 1000 : 10;
    out->mem_gbps = 100;
    out->link_gbps = 10;
    out->link_latency_us = 10;
    out->alignment = 256;
    return NULL;
}

static wf_status *device_open(void *b, int i, void **dev)
{
    tdev *d = H->malloc(sizeof *d);
    if (!d) return H->status(WF_OUT_OF_MEMORY, "testdev: out of memory");
    d->index = i;
    *dev = d;
    return NULL;
}

static void device_close(void *dev) { H->free(dev); }
/* "Device" memory is host memory from the core's allocation funnel, so fault injection reaches it. */
static void *chunk_alloc(void *dev, size_t bytes) { return H->malloc(bytes); }
static void chunk_free(void *dev, void *chunk) { H->free(chunk); }

static wf_status *copy_to_device(void *dev, void *chunk, size_t off, const void *src, size_t n)
{
    memcpy((char *)chunk + off, src, n);
    return NULL;
}

static wf_status *copy_to_host(void *dev, void *dst, const void *chunk, size_t off, size_t n)
{
    memcpy(dst, (const char *)chunk + off, n);
    return NULL;
}

static float *fptr(const wf_tensor *t) { return (float *)((char *)t->dev_chunk + t->dev_offset); }

static wf_status *k_binary(wf__kctx *k, int op)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    if (a->size != b->size && b->size != 1 && a->size != 1)
        return H->kctx_fail(k, WF_UNIMPLEMENTED, "testdev broadcasts only scalars");
    const wf_tensor *big = a->size >= b->size ? a : b;
    wf_tensor *o;
    wf_status *s = H->kctx_output(k, 0, WF_F32, big->rank, big->dims, &o);
    if (s) return s;
    float *x = fptr(a), *y = fptr(b), *z = fptr(o);
    for (int64_t i = 0; i < o->size; i++) {
        float u = x[a->size == 1 ? 0 : i], v = y[b->size == 1 ? 0 : i];
        z[i] = op == 0 ? u + v : u * v;
    }
    return NULL;
}

static wf_status *k_add(wf__kctx *k) { return k_binary(k, 0); }
static wf_status *k_mul(wf__kctx *k) { return k_binary(k, 1); }

static wf_status *k_relu(wf__kctx *k)
{
    wf_tensor *o;
    /* in place where the core allows it (the host API's output reuse) */
    wf_status *s = H->kctx_output_reuse(k, 0, 0, WF_F32, k->in[0]->rank, k->in[0]->dims, &o, NULL);
    if (s) return s;
    float *x = fptr(k->in[0]), *z = fptr(o);
    for (int64_t i = 0; i < o->size; i++) z[i] = x[i] > 0 ? x[i] : 0;
    return NULL;
}

static wf_status *k_identity(wf__kctx *k) { return H->kctx_output_view(k, 0, 0, k->in[0]->rank, k->in[0]->dims); }

static wf_status *k_matmul(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    if (a->rank != 2 || b->rank != 2) return H->kctx_fail(k, WF_UNIMPLEMENTED, "testdev MatMul is 2-D only");
    int64_t m = a->dims[0], kk = a->dims[1], n = b->dims[1], dims[2] = {m, n};
    wf_tensor *o;
    wf_status *s = H->kctx_output(k, 0, WF_F32, 2, dims, &o);
    if (s) return s;
    float *x = fptr(a), *y = fptr(b), *z = fptr(o);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0;
            for (int64_t p = 0; p < kk; p++) acc += x[i * kk + p] * y[p * n + j];
            z[i * n + j] = acc;
        }
    return NULL;
}

static const wf__kernel_def g_kernels[] = {
    {"Add", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_add},        {"Mul", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_mul},
    {"Relu", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_relu},      {"Identity", "TESTDEV", WF__DT_ALL, 0, k_identity},
    {"MatMul", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_matmul},
};

static const wf__kernel_def *find_kernel(void *dev, const char *op, const wf__tinfo *in, int n_in, const wf__tinfo *out)
{
    for (size_t i = 0; i < sizeof g_kernels / sizeof g_kernels[0]; i++)
        if (!strcmp(g_kernels[i].op, op) && n_in > 0 && (g_kernels[i].dtypes & WF__DT_BIT(in[0].dtype)))
            return &g_kernels[i];
    return NULL;
}

static void destroy(void *b) {}

static const wf_backend_vtable g_vt = {
    .abi_version = WF_BACKEND_ABI_VERSION, .size = sizeof(wf_backend_vtable), .name = "testdev",
    .device_count = device_count, .device_info = device_info, .device_open = device_open,
    .device_close = device_close, .chunk_alloc = chunk_alloc, .chunk_free = chunk_free,
    .copy_to_device = copy_to_device, .copy_to_host = copy_to_host, .find_kernel = find_kernel, .destroy = destroy,
};

__attribute__((visibility("default"))) wf_status *wf_backend_entry(const wf_host_api *host, const wf_backend_vtable **vt,
                                                                  void **backend)
{
    if (host->abi_version != WF_BACKEND_ABI_VERSION) return NULL;
    H = host;
    *vt = &g_vt;
    *backend = NULL;
    return NULL;
}
