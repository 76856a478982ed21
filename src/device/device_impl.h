/*
 * The backend ABI: what a device plugin (libweft-opencl.so, libweft-cuda.so, a test backend) and the
 * core offer each other. A plugin links nothing of libweft; the core hands it a table of host
 * functions and receives a versioned table of backend functions. Both tables only grow at the end;
 * `size` tells how much of it the other side knows, and slots marked (optional) may be NULL, in which
 * case the core supplies the default.
 */
#ifndef WF_DEVICE_DEVICE_IMPL_H
#define WF_DEVICE_DEVICE_IMPL_H

#include "device/kernel.h"

#define WF_BACKEND_ABI_VERSION 1
#define WF_BACKEND_ENTRY "wf_backend_entry"

/* Functions of the core a backend may call. */
typedef struct wf_host_api {
    uint32_t abi_version;
    uint32_t size;
    wf_status *(*status)(wf_code code, const char *fmt, ...);
    void *(*malloc)(size_t n);
    void (*free)(void *p);
    /* kernel context (see kernel.h) */
    wf_status *(*kctx_output)(wf__kctx *k, int idx, wf_dtype dtype, int rank, const int64_t *dims, wf_tensor **out);
    wf_status *(*kctx_output_view)(wf__kctx *k, int idx, int in_idx, int rank, const int64_t *dims);
    wf_status *(*kctx_fail)(const wf__kctx *k, wf_code code, const char *fmt, ...);
    void (*kctx_lock_state)(wf__kctx *k);
    void (*kctx_unlock_state)(wf__kctx *k);
    const wf__attr *(*attr_get)(const wf__op_def *op, const wf__attr *attrs, const char *name);
    int64_t (*now_ns)(void);
    wf_tensor *(*tensor_ref)(wf_tensor *t);
    void (*tensor_free)(wf_tensor *t);
    void (*status_free)(wf_status *s);
    const char *(*status_message)(const wf_status *s);
    /* (size >= this field) output idx, written in place into input in_idx where allowed: outside a run
     * with an arena when this node holds the input's last use; in a run with an arena (lower/memplan.c)
     * the output goes to the slot the memory plan gave it. *reused (may be NULL) says which. */
    wf_status *(*kctx_output_reuse)(wf__kctx *k, int idx, int in_idx, wf_dtype dtype, int rank, const int64_t *dims,
                                    wf_tensor **out, bool *reused);
} wf_host_api;

/* What a backend says about one of its devices. */
typedef struct wf_backend_device_info {
    char type[16];            /* "OPENCL", "GPU", or a test type */
    char description[160];    /* hardware name */
    int compute_units;
    uint64_t memory_bytes;
    double peak_gflops;       /* f32 */
    double mem_gbps;          /* device memory bandwidth */
    double link_gbps;         /* host <-> device */
    double link_latency_us;
    size_t alignment;         /* of sub-allocations inside a chunk */
    int shares_host_cores;    /* 1: the device computes on the host's CPU cores (an OpenCL CPU device),
                                 so it cannot run at the same time as CPU:0 without slowing it */
} wf_backend_device_info;

typedef struct wf_backend_vtable {
    uint32_t abi_version;     /* WF_BACKEND_ABI_VERSION the backend was built for */
    uint32_t size;            /* sizeof(wf_backend_vtable) the backend was built with */
    const char *name;         /* "opencl" */
    int (*device_count)(void *backend);
    wf_status *(*device_info)(void *backend, int index, wf_backend_device_info *out);
    /* Opens device `index`; *dev is the backend's per-device state. */
    wf_status *(*device_open)(void *backend, int index, void **dev);
    void (*device_close)(void *dev);
    /* memory: chunks the core's allocator carves up */
    void *(*chunk_alloc)(void *dev, size_t bytes);
    void (*chunk_free)(void *dev, void *chunk);
    wf_status *(*copy_to_device)(void *dev, void *chunk, size_t offset, const void *src, size_t n);
    wf_status *(*copy_to_host)(void *dev, void *dst, const void *chunk, size_t offset, size_t n);
    /* (optional) device-to-device copy inside one device */
    wf_status *(*copy_on_device)(void *dev, void *dst_chunk, size_t dst_off, const void *src_chunk, size_t src_off,
                                 size_t n);
    /* kernels: the kernel for op with these input/output types, or NULL */
    const wf__kernel_def *(*find_kernel)(void *dev, const char *op, const wf__tinfo *in, int n_in,
                                         const wf__tinfo *out);
    /* (optional) waits until queued work is done */
    wf_status *(*synchronize)(void *dev);
    void (*destroy)(void *backend);
} wf_backend_vtable;

/* The one symbol a plugin exports. On success *vt and *backend are set; a status is a diagnostic, and
 * the core goes on without this backend: UNAVAILABLE (no driver or device, e.g. "libcuda.so.1 not
 * found") is reported as "unavailable", any other code as "failed". Probe for the driver before
 * loading anything large: every weft process pays for what the entry point loads. */
typedef wf_status *(*wf_backend_entry_fn)(const wf_host_api *host, const wf_backend_vtable **vt, void **backend);

#endif
