/* The inter-op thread pool: a queue of (run, node) items served by worker threads. It knows nothing of
 * the executor: whoever pushes work names the function that runs a batch of it (exec/executor.c's
 * wf__exec_batch), so the context (device/context.c) can own the pool without depending on exec/. */
#ifndef WF_CORE_POOL_H
#define WF_CORE_POOL_H

#include "core/core.h"

typedef struct wf__pool wf__pool;
typedef struct wf__run wf__run;

typedef struct wf__work {
    wf__run *run;
    int node;
} wf__work;

/* Runs nodes[0..n) of one run and everything they make ready. */
typedef void (*wf__pool_batch_fn)(wf__run *run, const int *nodes, int n);

wf_status *wf__pool_new(int threads, wf__pool **out);
void wf__pool_free(wf__pool *p);
/* Queues w[0..n); workers run them with fn. False when out of memory. */
bool wf__pool_push(wf__pool *p, wf__pool_batch_fn fn, const wf__work *w, int n);
/* The calling thread executes queued items with fn until *done becomes non-zero. */
void wf__pool_help_until(wf__pool *p, wf__pool_batch_fn fn, atomic_int *done);
void wf__pool_notify_all(wf__pool *p);
/* After storing (sequentially consistent) a flag some wf__pool_help_until may wait for: wakes the
 * waiting callers, if there are any. A run that ends on its caller's own thread before it waited
 * wakes nobody (a broadcast per run woke the idle workers for nothing: 16 us of a 24 us MLP run). */
void wf__pool_notify_helpers(wf__pool *p);
int wf__pool_workers(const wf__pool *p);
int wf__pool_idle(wf__pool *p);

#endif
