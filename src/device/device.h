/*
 * Devices and the context. For now the CPU is the only device; the versioned backend vtable and the
 * plugin loader arrive with the devices work (see ARCHITECTURE.md), and this struct becomes the core's
 * view of one device behind it.
 */
#ifndef WF_DEVICE_DEVICE_H
#define WF_DEVICE_DEVICE_H

#include "core/core.h"

typedef struct wf__pool wf__pool;

struct wf__device {
    char *name;          /* /job:localhost/replica:0/task:0/device:CPU:0 */
    char *short_name;    /* CPU:0 */
    const char *type;    /* "CPU" */
    char *description;
    int compute_units;
    int threads;
    uint64_t memory_bytes;
};

/* Intra-op parallelism: at most one parallel region at a time on the cores (others run inline), so
 * our loops and oneDNN's OpenMP threads never oversubscribe the machine. */
struct wf__intra {
    int threads;
    atomic_flag busy;
};

struct wf_context {
    int n_devices;
    struct wf__device *devices;
    struct wf__intra intra;
    wf__pool *pool;           /* inter-op threads */
    int inter_op_threads;
};

wf_status *wf__pool_new(int threads, wf__pool **out);
void wf__pool_free(wf__pool *p);

#endif
