/*
 * Devices and the context. For now the CPU is the only device; the versioned backend vtable and the
 * plugin loader arrive with the devices work (see ARCHITECTURE.md), and this struct becomes the core's
 * view of one device behind it.
 */
#ifndef WF_DEVICE_DEVICE_H
#define WF_DEVICE_DEVICE_H

#include <pthread.h>

#include "core/pool.h"
#include "device/bfc.h"
#include "device/device_impl.h"

/* A loaded (or failed) backend plugin, kept for `weft devices --verbose`. */
typedef struct wf__plugin {
    char *name;          /* "opencl" */
    char *path;          /* where it was found, or the places searched */
    char *status;        /* "loaded", "not found", "unavailable", "failed" */
    char *reason;        /* why it failed or found no device */
    void *handle;        /* dlopen handle */
    const wf_backend_vtable *vt;
    void *backend;
    int n_devices;
} wf__plugin;

/* Accounting of the host memory the CPU device's kernels produce (outputs, intermediates and fetched
 * results until freed): a limit, and the same statistics as an accelerator's allocator. The data
 * itself comes from the tensor allocator; only the bytes are counted here. */
typedef struct wf__memacct {
    _Atomic uint64_t in_use, peak, limit;
    _Atomic int64_t n_allocs, total;
    _Atomic int64_t refs; /* the context's one plus one per live tensor: a fetched result may outlive
                             the context, and the last of them frees this */
} wf__memacct;

wf__memacct *wf__memacct_new(void);
void wf__memacct_unref(wf__memacct *a);
/* Counts `bytes` against the limit: false (nothing counted) when they do not fit. */
bool wf__memacct_reserve(wf__memacct *a, uint64_t bytes);
void wf__memacct_release(wf__memacct *a, uint64_t bytes);

struct wf__device {
    char *name;          /* /job:localhost/replica:0/task:0/device:CPU:0 */
    char *short_name;    /* CPU:0 */
    const char *type;    /* "CPU", "OPENCL", ... (points into info.type for backends) */
    char *description;
    const char *backend; /* "builtin", "opencl", ... */
    int compute_units;
    int threads;
    uint64_t memory_bytes;
    /* the backend: the built-in CPU's (src/backends/cpu/cpu_backend.c) or a plugin's */
    const wf_backend_vtable *vt;
    void *dev;
    wf_backend_device_info info;
    wf__bfc *bfc;        /* device memory */
    uint64_t limit;      /* 0: none */
    wf__memacct *host_acct; /* accounting of a host-memory device (info.host_memory; else NULL) */
    wf_device_perf perf;    /* the placer's cost model of this device */
    _Atomic uint64_t arena_bytes;    /* bytes in plans' arenas (lower/memplan.c) */
    _Atomic int64_t fallback_allocs; /* outputs of arena-planned runs that still came from the allocator */
    /* Backend devices with streams: held by the executor from a node's first enqueue to the record of
     * its event, so that the commands of one node are contiguous on the compute stream and an error a
     * stream reports through the next event is the error of that event's node. Allocated on its own
     * (the device list is reallocated as plugins load). */
    pthread_mutex_t *enqueue_mu;
};

/* Default figures of the CPU device (from /proc/cpuinfo) and of a backend device (from its info). */
void wf__perf_default_cpu(struct wf__device *d);
void wf__perf_default_backend(struct wf__device *d);

/* Intra-op parallelism: at most one parallel region at a time on the cores (others run inline), so
 * our loops and oneDNN's OpenMP threads never oversubscribe the machine. */
struct wf__intra {
    int threads;
    atomic_flag busy;
};

struct wf_context {
    int n_devices;
    struct wf__device *devices;
    int n_plugins;
    wf__plugin *plugins;
    wf__plugin builtin;       /* the CPU backend, opened first (not listed among the plugins) */
    struct wf__intra intra;
    wf__pool *pool;           /* inter-op threads */
    int inter_op_threads;
};

/* The devices of c that the device spec `text` matches (wf_device_spec_matches against each device's
 * full name), as a mask: bit d for device d (placement's masks hold 64 devices; devices past the 64th
 * never match). A malformed spec is its parse error and *mask is not written. */
wf_status *wf__context_match(const wf_context *c, const char *text, uint64_t *mask);

/* Finds and loads the backend plugins, appending their devices to c (plugins.c). Only running out of
 * memory is an error; everything else becomes a plugin diagnostic. */
wf_status *wf__plugins_load(wf_context *c);
/* The device whose memory is the host's (the CPU): where feeds arrive, fetches leave and host-memory
 * arguments are read. The first device with info.host_memory. */
int wf__host_device(const wf_context *c);
/* Opens the built-in CPU backend's device through the same table and checks (first, so it is device 0). */
wf_status *wf__plugins_add_builtin(wf_context *c);
void wf__plugins_unload(wf_context *c);
extern const wf_host_api wf__host_api;
/* The core's kernels that work on any device (device_kernels.c): Copy between devices (its op is
 * graph/registry.c's wf__copy_op), Const uploaded once. */
extern const wf__kernel_def wf__copy_kernel;
extern const wf__kernel_def wf__device_const_kernel;
/* A tensor in device d's memory (device_kernels.c). OUT_OF_MEMORY names the device. */
wf_status *wf__device_tensor_alloc(const struct wf__device *d, wf_dtype dtype, int rank, const int64_t *dims,
                                   wf_tensor **out);
/* src in dst's memory (dst NULL: the host): a new reference when it is there already, else a copy
 * (through the host between two devices). Used for feeds placed on a device and for reading a
 * device-resident variable. */
wf_status *wf__tensor_move(const struct wf__device *dst, const wf_tensor *src, wf_tensor **out);
/* Copies src's bytes into dst (same dtype and byte size), wherever each lives. */
wf_status *wf__tensor_copy_into(wf_tensor *dst, const wf_tensor *src);

/* Device blocks released while a kernel of a device with streams is being enqueued (its temporaries)
 * are held back until the node's event has completed, so that no copy or later kernel on another
 * stream reuses a block the queued kernel still reads (exec/device_kernels.c). */
typedef struct wf__defer {
    const struct wf__device *dev;
    wf__bfc_block *v;
    int n, cap;
    bool lost; /* a block could not be held (no memory): it was released after waiting for the device */
} wf__defer;
/* Between begin and end, releases of dev's blocks on this thread go to *df instead of the allocator. */
void wf__defer_begin(wf__defer *df, const struct wf__device *dev);
void wf__defer_end(void);
/* Gives df's blocks back to the allocator (the work that used them has completed). */
void wf__defer_release(wf__defer *df);

#endif
