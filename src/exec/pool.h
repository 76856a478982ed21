/* Inter-op thread pool internals shared by pool.c and executor.c. */
#ifndef WF_EXEC_POOL_H
#define WF_EXEC_POOL_H

#include "core/core.h"

typedef struct wf__pool wf__pool;
typedef struct wf__run wf__run;

typedef struct wf__work {
    wf__run *run;
    int node;
} wf__work;

/* Runs nodes[0..n) of one run and everything they make ready (executor.c). */
void wf__exec_batch(wf__run *run, const int *nodes, int n);
bool wf__pool_push(wf__pool *p, const wf__work *w, int n); /* false when out of memory */
/* The calling thread executes queued items until *done becomes non-zero. */
void wf__pool_help_until(wf__pool *p, atomic_int *done);
void wf__pool_notify_all(wf__pool *p);
int wf__pool_workers(const wf__pool *p);
int wf__pool_idle(wf__pool *p);

#endif
