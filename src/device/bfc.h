/*
 * A best-fit allocator with coalescing over large chunks (the design of TensorFlow's BFC allocator),
 * for device memory where each real allocation is expensive. It manages offsets inside opaque chunks
 * that a backend allocates (a CUDA pointer range, an OpenCL buffer), grows lazily one chunk at a time,
 * honours an optional limit, and keeps statistics.
 */
#ifndef WF_DEVICE_BFC_H
#define WF_DEVICE_BFC_H

#include "core/core.h"

typedef struct wf__bfc wf__bfc;

typedef struct wf__bfc_backend {
    /* Allocates a chunk of `bytes` device bytes; NULL when the device has no more. */
    void *(*chunk_alloc)(void *user, size_t bytes);
    void (*chunk_free)(void *user, void *chunk);
    void *user;
} wf__bfc_backend;

typedef struct wf__bfc_stats {
    size_t in_use;        /* bytes handed out (rounded sizes) */
    size_t peak_in_use;
    size_t reserved;      /* bytes in chunks obtained from the device */
    size_t limit;         /* 0: none */
    long n_allocs;        /* live allocations */
    long total_allocs;
    long chunk_allocs;    /* chunks taken from the backend so far */
} wf__bfc_stats;

/* A block handed out: chunk plus byte offset. */
typedef struct wf__bfc_block {
    void *chunk;
    size_t offset;
    size_t size;          /* rounded size */
    void *priv;           /* the allocator's own record */
} wf__bfc_block;

/* device names the device in out-of-memory messages; limit 0 means none; alignment a power of two. */
wf_status *wf__bfc_new(const char *device, size_t limit, size_t alignment, wf__bfc_backend backend, wf__bfc **out);
/* Frees every chunk; blocks still out are a caller bug (reported by wf__bfc_stats first). */
void wf__bfc_free(wf__bfc *a);
/* OUT_OF_MEMORY naming the device, the request and the limit when it cannot be satisfied. */
wf_status *wf__bfc_alloc(wf__bfc *a, size_t bytes, wf__bfc_block *out);
void wf__bfc_release(wf__bfc *a, const wf__bfc_block *b);
wf__bfc_stats wf__bfc_get_stats(wf__bfc *a);
/* 0: none. Lowering it below what is in use only affects later allocations. */
void wf__bfc_set_limit(wf__bfc *a, size_t limit);
/* Returns empty chunks to the device (e.g. before retrying a failed allocation). */
void wf__bfc_trim(wf__bfc *a);

#endif
