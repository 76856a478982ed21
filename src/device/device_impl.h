/*
 * The backend ABI: what a device plugin (libweft-opencl.so, libweft-cuda.so, a test backend) and the
 * core offer each other. A plugin links nothing of libweft; the core hands it a table of host
 * functions and receives a versioned table of backend functions. Both tables only grow at the end;
 * `size` tells how much of it the other side knows, and slots marked (optional) may be NULL, in which
 * case the core supplies the default.
 */
#ifndef WF_DEVICE_DEVICE_IMPL_H
#define WF_DEVICE_DEVICE_IMPL_H

#include <stddef.h>

#include "device/kernel.h"

#define WF_BACKEND_ABI_VERSION 1
#define WF_BACKEND_ENTRY "wf_backend_entry"

/* A backend's event (streams and events, below): opaque to the core. */
typedef struct wf_event wf_event;

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
    int host_memory;          /* 1: the device computes in host memory: its kernels read and write
                                 ordinary host tensors (kctx.device NULL), the core accounts its memory,
                                 and values reach it without copies (the built-in CPU backend). 0 (what a
                                 backend built before this field leaves): chunks of its own memory */
    int channel_block;        /* > 0: the device's WF__K_BLOCKED kernels (the CPU's Conv2D and
                                 GlobalAvgPool) read and write 4-D f32 tensors whose channel count is a
                                 multiple of this in the device's own activation layout, the same size
                                 as plain NCHW, when lowering asks through wf__kctx.in_blocked /
                                 out_blocked (optimisation level 3, lower/layout.c). The layout is the
                                 backend's business; the CPU's is the one oneDNN picks (channels-last
                                 with block 1, or nChw8c / nChw16c). 0 (what a backend built before this
                                 field leaves): plain layouts only */
    uint32_t fast_dtypes;     /* bit (1u << dtype) set for each 16-bit float dtype (WF_F16, WF_BF16) the
                                 device computes natively, at least for MatMul and convolution (the CPU
                                 with AVX512_BF16 or AMX: bf16; a CUDA GPU with Tensor Cores: f16, and
                                 bf16 from sm_80). The mixed-precision pass (passes/amp.c) converts an
                                 allow-list op to a 16-bit dtype only on a device with its bit. 0 (what a
                                 backend built before this field leaves): none */
    char precision_note[96];  /* why, for `weft devices --verbose`: "bf16: AVX512_BF16, AMX" or "no
                                 native bf16 (no AVX512_BF16 or AMX)"; "" when the backend says nothing */
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

    /* ---- (optional, all or none) streams and events: see "Streams and events" below ---------------- */
    /* A new event marking everything enqueued on `stream` so far; it completes when that work has. */
    wf_status *(*event_record)(void *dev, int stream, wf_event **ev);
    /* Work enqueued on `stream` after this call starts only once ev (of this device, recorded on
     * another stream) has completed. The host does not wait. */
    wf_status *(*stream_wait)(void *dev, int stream, wf_event *ev);
    /* *done = 1 once ev has completed; the status is the error of the work it marks, if any. */
    wf_status *(*event_query)(void *dev, wf_event *ev, int *done);
    /* The host waits for ev; returns the error of the work it marks, if any. */
    wf_status *(*event_sync)(void *dev, wf_event *ev);
    /* fn(arg, err) is called exactly once when ev completes, from any thread (a backend thread, or
     * this one if it has already completed); err (owned by fn) is the error of the work it marks or
     * NULL. fn must not block nor call into the backend. At most one callback per event. */
    wf_status *(*event_notify)(void *dev, wf_event *ev, void (*fn)(void *arg, wf_status *err), void *arg);
    /* Device-side timestamps of a completed event, in ns of the device's clock (comparable between
     * events of one device only): for a copy's event the transfer's start and end, for a recorded
     * event the moment the stream reached it (start == end or nearly). */
    wf_status *(*event_times)(void *dev, wf_event *ev, int64_t *start_ns, int64_t *end_ns);
    void (*event_release)(void *dev, wf_event *ev);
    /* Asynchronous transfers on WF_STREAM_COPY, in order with each other and with nothing else: the
     * caller orders them against compute with events. *ev completes when the data has arrived. src
     * (to_device) and dst (to_host) must stay valid until then; the backend may stage through
     * pinned memory it owns. */
    wf_status *(*copy_to_device_async)(void *dev, void *chunk, size_t offset, const void *src, size_t n,
                                       wf_event **ev);
    wf_status *(*copy_to_host_async)(void *dev, void *dst, const void *chunk, size_t offset, size_t n,
                                     wf_event **ev);
} wf_backend_vtable;

/* Streams and events (the slots after `destroy`). A device with them has in-order streams:
 * WF_STREAM_COMPUTE, where a kernel's compute() enqueues all its work (it returns once enqueued, and
 * an error found while running is reported by the next event recorded on the stream), and
 * WF_STREAM_COPY for the *_async transfers. The core then never waits on a device in a run: it
 * records an event after each node, makes the compute stream wait for uploads with stream_wait, takes
 * a node as complete when its event fires (event_notify), and frees a device block only once compute
 * work enqueued before its release has completed (so a copy may never land in a block a queued kernel
 * still reads). The synchronous copy_to_device / copy_to_host stay ordered after all work enqueued
 * before them. A backend without these slots (size short of them, or event_record NULL) runs as
 * before: kernels are taken as done once enqueued, copies are synchronous. */
enum { WF_STREAM_COUNT = 2 }; /* WF_STREAM_COMPUTE and WF_STREAM_COPY are in weft.h (trace events carry them) */

/* Whether vt has the streams-and-events slots. */
#define WF_BACKEND_HAS_STREAMS(vt)                                                                             \
    ((vt)->size >= offsetof(wf_backend_vtable, copy_to_host_async) + sizeof(void *) && (vt)->event_record &&    \
     (vt)->stream_wait && (vt)->event_query && (vt)->event_sync && (vt)->event_notify && (vt)->event_times &&   \
     (vt)->event_release && (vt)->copy_to_device_async && (vt)->copy_to_host_async)

/* The one symbol a plugin exports. On success *vt and *backend are set; a status is a diagnostic, and
 * the core goes on without this backend: UNAVAILABLE (no driver or device, e.g. "libcuda.so.1 not
 * found") is reported as "unavailable", any other code as "failed". Probe for the driver before
 * loading anything large: every weft process pays for what the entry point loads. */
typedef wf_status *(*wf_backend_entry_fn)(const wf_host_api *host, const wf_backend_vtable **vt, void **backend);

/* The built-in CPU backend (src/backends/cpu/cpu_backend.c): linked into libweft, and opened through
 * this same entry and table before any plugin, so that the CPU is device 0 by order, not by rule. */
wf_status *wf__cpu_backend_entry(const wf_host_api *host, const wf_backend_vtable **vt, void **backend);

#endif
