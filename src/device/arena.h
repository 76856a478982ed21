/*
 * The device half of the static memory plan: a run's arena on one device, what the kernel context
 * needs to put an output in it, and the session's weights (one device copy of each constant and
 * variable per device per session, shared by all of its plans). Lowering lays the arenas out
 * (src/lower/memplan.h); this part only needs the device contract.
 */
#ifndef WF_DEVICE_ARENA_H
#define WF_DEVICE_ARENA_H

#include "core/core.h"

struct wf__device;

#define WF__ARENA_ALIGN 256

/* One device's arena of one run: host memory (CPU) or a block of the device's allocator. */
typedef struct wf__arena_dev {
    char *host;          /* CPU: the bytes */
    void *chunk;         /* backend device: the allocator's chunk and the block's offset in it */
    size_t off;
    size_t bytes;
    void *priv;          /* the allocator's record of the block */
} wf__arena_dev;

/* A slot's offset when the memory plan leaves it to the allocator on purpose: its value outlives the run
 * (a variable's next value) or is handed to the caller as it is (a large fetched value). Such an output
 * is no fallback; -1 (not planned: size known only at run time, or no arena) still is. */
#define WF__SLOT_OWN (-2)

/* What kctx_output needs to place an output in the run's arena (see wf__kctx.mem). */
typedef struct wf__kmem {
    const wf__arena_dev *arena;  /* the node's device's arena in this run */
    const int *out_slot;         /* the node's output slots */
    const int64_t *slot_off;     /* plan: offset per slot, -1 / WF__SLOT_OWN: not in an arena */
    const size_t *slot_cap;      /* plan: bytes reserved per slot */
    _Atomic int64_t *fallbacks;  /* the device's count of outputs that still came from the allocator */
} wf__kmem;

/* Is t (or the tensor it views) in an arena? */
bool wf__tensor_in_arena(const wf_tensor *t);
/* A header over arena bytes at slot `slot` of a; NULL status on success. */
wf_status *wf__arena_tensor(const struct wf__device *d, const wf__arena_dev *a, int64_t off, wf_dtype dtype,
                            int rank, const int64_t *dims, wf_tensor **out);
/* Does output j (t) alias another value's arena bytes, so that wf__arena_fix_output would copy it? */
bool wf__arena_needs_fix(const wf__kmem *m, int j, const wf_tensor *t);
/* After a kernel: an output that aliases another value's arena bytes (a view or a reference of an
 * input) is copied into the output's own slot, or into allocator memory when it has none, so the
 * plan's sharing stays correct. */
wf_status *wf__arena_fix_output(const struct wf__device *d, const wf__kmem *m, int j, wf_tensor **out);
/* A copy of t in ordinary host memory (the heap, outside the devices' accounting): fetched values
 * never alias an arena that the next run overwrites. */
wf_status *wf__arena_copy_out(const wf_tensor *t, wf_tensor **out);

/* ---- the session's weights ---- */
typedef struct wf__weights wf__weights;
wf_status *wf__weights_new(wf__weights **out);
void wf__weights_free(wf__weights *w);
/* The device copy of host tensor h on d, uploaded on first use; a new reference. */
wf_status *wf__weights_get(wf__weights *w, const struct wf__device *d, const wf_tensor *h, wf_tensor **out);
/* Variables: the session marks its host values (which it never writes in place) so that feeding one
 * to a device reuses the copy there; forgetting a replaced value frees its device copies. */
wf_status *wf__weights_track(wf__weights *w, const wf_tensor *h);
void wf__weights_forget(wf__weights *w, const wf_tensor *h);
/* true and *out set when h is tracked (uploading it to d on first use). */
bool wf__weights_get_tracked(wf__weights *w, const struct wf__device *d, const wf_tensor *h, wf_tensor **out,
                             wf_status **err);

#endif
