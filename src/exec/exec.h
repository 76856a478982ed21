/* The executor: runs a plan over the inter-op pool. */
#ifndef WF_EXEC_EXEC_H
#define WF_EXEC_EXEC_H

#include "core/pool.h"
#include "lower/plan.h"

/* Runs plan p with feeds (in the plan's feed order). On success outputs[i] receives a reference to
 * fetch i. On failure returns the first error (naming its node); nothing is written to outputs.
 * into (may be NULL): wf_run_options.into, host tensors the kernels computing fetches write in when
 * their dtype and shape match. */
wf_status *wf__execute(wf_context *ctx, const wf__plan *p, const wf_feed *feeds, wf_tensor **outputs,
                       wf_tensor *const *into, wf_trace **trace);

/* Runs nodes[0..n) of one run and everything they make ready: the pool's batch function. */
void wf__exec_batch(wf__run *run, const int *nodes, int n);

#endif
