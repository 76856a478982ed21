/*
 * The CPU as a backend like any other: the table the core opens its device through (plugins.c,
 * wf__plugins_add_builtin), with the same calls a plugin answers. Its one device computes in host
 * memory (info.host_memory): kernels read and write host tensors, the core accounts the bytes, and its
 * "chunks" (asked for only by code written for device memory) are aligned host blocks. It has no
 * streams: a kernel is done when it returns.
 */
#include <stdio.h>
#include <sys/sysinfo.h>

#include "device/device_impl.h"
#include "k_dnnl.h"

static int g_backend; /* the backend's (and its device's) handle: nothing to hold */

static int cpu_device_count(void *backend)
{
    (void)backend;
    return 1;
}

/* "model name" of /proc/cpuinfo into out. */
static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *c = strchr(line, ':');
        if (c) {
            c++;
            while (*c == ' ') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(out, n, "%s", c);
        }
        break;
    }
    if (f) fclose(f);
}

static wf_status *cpu_device_info(void *backend, int index, wf_backend_device_info *out)
{
    (void)backend;
    if (index != 0) return wf__status(WF_INVALID_ARGUMENT, "the CPU backend has one device, not %d", index + 1);
    memset(out, 0, sizeof *out);
    snprintf(out->type, sizeof out->type, "CPU");
    cpu_model(out->description, sizeof out->description);
    out->compute_units = wf__num_cores();
    struct sysinfo si;
    out->memory_bytes = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
    out->alignment = WF__ALIGN;
    out->host_memory = 1;
    out->channel_block = wf__dn_channel_block(); /* Conv2D's blocked layout (k_dnnl_conv.c) */
    out->fast_dtypes = wf__dn_fast_dtypes(out->precision_note, sizeof out->precision_note);
    return NULL;
}

static wf_status *cpu_device_open(void *backend, int index, void **dev)
{
    (void)backend;
    if (index != 0) return wf__status(WF_INVALID_ARGUMENT, "the CPU backend has one device, not %d", index + 1);
    *dev = &g_backend;
    return NULL;
}

static void cpu_device_close(void *dev) { (void)dev; }

static void *cpu_chunk_alloc(void *dev, size_t bytes)
{
    (void)dev;
    return wf__aligned_alloc(bytes ? bytes : 1, WF__ALIGN);
}

static void cpu_chunk_free(void *dev, void *chunk)
{
    (void)dev;
    wf__aligned_free(chunk);
}

static wf_status *cpu_copy_to_device(void *dev, void *chunk, size_t off, const void *src, size_t n)
{
    (void)dev;
    if (n) memcpy((char *)chunk + off, src, n);
    return NULL;
}

static wf_status *cpu_copy_to_host(void *dev, void *dst, const void *chunk, size_t off, size_t n)
{
    (void)dev;
    if (n) memcpy(dst, (const char *)chunk + off, n);
    return NULL;
}

static wf_status *cpu_copy_on_device(void *dev, void *dst, size_t doff, const void *src, size_t soff, size_t n)
{
    (void)dev;
    if (n) memmove((char *)dst + doff, (const char *)src + soff, n);
    return NULL;
}

static const wf__kernel_def *cpu_find_kernel(void *dev, const char *op, const wf__tinfo *in, int n_in,
                                             const wf__tinfo *out)
{
    (void)dev;
    return wf__kernel_find(op, "CPU", in, n_in, out);
}

static void cpu_destroy(void *backend) { (void)backend; }

static const wf_backend_vtable g_cpu_vt = {
    .abi_version = WF_BACKEND_ABI_VERSION,
    .size = sizeof(wf_backend_vtable),
    .name = "builtin",
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .device_open = cpu_device_open,
    .device_close = cpu_device_close,
    .chunk_alloc = cpu_chunk_alloc,
    .chunk_free = cpu_chunk_free,
    .copy_to_device = cpu_copy_to_device,
    .copy_to_host = cpu_copy_to_host,
    .copy_on_device = cpu_copy_on_device,
    .find_kernel = cpu_find_kernel,
    .destroy = cpu_destroy,
};

wf_status *wf__cpu_backend_entry(const wf_host_api *host, const wf_backend_vtable **vt, void **backend)
{
    (void)host;
    *vt = &g_cpu_vt;
    *backend = &g_backend;
    return NULL;
}
