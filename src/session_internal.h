/* Session entry points the library's own layers (the model API) use but the public API does not
 * offer. */
#ifndef WEFT_SESSION_INTERNAL_H
#define WEFT_SESSION_INTERNAL_H

#include "weft/weft.h"

/* wf_session_placement_get for a run that also computes `targets` (the Assigns of a training step). */
wf_status *wf__session_placement_get(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                     int n_fetches, const wf_output *targets, int n_targets, wf_placement **out);

/* The graph a session runs (export checks that outputs belong to it). */
const wf_graph *wf__session_graph(const wf_session *s);

/* The outputs that stand for fetches[0..n_fetches) in the graph the session runs for (feeds, fetches):
 * its optimised graph (made now if it is not made yet), or the session's own graph at level 0. The
 * optimised graph is the session's, alive until the session is freed. */
wf_status *wf__session_optimized_outputs(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                         int n_fetches, wf_output *out);

/* Tests only: called (when set) by the thread that builds a new plan, just before it builds, with no
 * session lock but the build lock held; test_session blocks in it to show that runs of cached plans
 * do not wait for a build. */
extern void (*wf__session_build_hook)(void *arg);
extern void *wf__session_build_hook_arg;

#endif
