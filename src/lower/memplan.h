/*
 * The static memory plan: after placement, lowering gives every value whose size is known a slot (a
 * byte offset) in a per-device arena. Two values share bytes only when every reader of the first is
 * an ancestor of the second's producer, so the sharing holds under any schedule the executor picks.
 * Each run takes a set of arenas (one per device) from its plan's pool, so concurrent runs of one plan
 * never share bytes; a steady-state run makes no device allocations at all.
 *
 * Also the session's weights: one device copy of each constant and variable per device per session,
 * shared by all of its plans.
 */
#ifndef WF_LOWER_MEMPLAN_H
#define WF_LOWER_MEMPLAN_H

#include "lower/plan.h"

#include "device/arena.h"

typedef struct wf__arena_set {
    struct wf__arena_set *next; /* in the plan's pool */
    int n_dev;
    wf__arena_dev *dev;
} wf__arena_set;

/* Lays out the arenas of p (called at the end of lowering). Plans too large for the liveness
 * analysis get no arena (every output then comes from the allocator, as before). */
wf_status *wf__memplan_build(wf_context *ctx, wf__plan *p);
/* A set of arenas for one run (from the pool, or new: counted as allocations of each device). */
wf_status *wf__arena_acquire(wf_context *ctx, const wf__plan *p, wf__arena_set **out);
void wf__arena_release(const wf__plan *p, wf__arena_set *a);
/* Frees the pool (plan free). */
void wf__arena_pool_free(wf__plan *p);

#endif
