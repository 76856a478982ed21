/*
 * Helpers shared by the pipeline's stage files (stages.c, async.c, sources.c).
 */
#ifndef WF_DATA_STAGES_H
#define WF_DATA_STAGES_H

#include "data/pipeline.h"

/* Sets up it's vtable and pipe and registers its statistics under `name`. */
wf_status *wf__stage_init(wf__ds_it *it, const wf__ds_it_vt *vt, wf__pipe *p, const char *name, int depth);
/* Unregisters and frees the statistics (and gives back what the stage still had buffered). */
void wf__stage_fini(wf__ds_it *it);
/* One element produced, busy_ns of the stage's own work; e (may be NULL) updates the element size. */
void wf__stage_count(wf__ds_it *it, int64_t busy_ns, const wf__elem *e);

/* Whether a batch stacks e by copying each component's bytes: host tensors of fixed-size elements. */
bool wf__elem_plain(const wf__elem *e);
/* ds's iterator as the input of a batch stage of n rows: a parallel map fills the batches itself (async.c's
 * batch mode, its take_batch), any other stage is made as usual. */
wf_status *wf__ds_make_for_batch(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, int64_t n,
                                 wf__ds_it **out);

/* Component c of e[0..k) stacked into [k, ...] (padded to pad with the scalar padv when pad != NULL);
 * errors name `stage` and the element index first + i. */
wf_status *wf__ds_stack(const char *stage, int64_t first, const wf__elem *e, int k, int c, const int64_t *pad,
                        const wf_tensor *padv, wf_tensor **out);
/* Views of row r of each of batch's tensors (for wf__ds_next_into). */
wf_status *wf__ds_row_views(const wf__elem *batch, int64_t r, wf__elem *views);
/* Row r of t along its first dim, as a new tensor. */
wf_status *wf__ds_row(const wf_tensor *t, int64_t r, wf_tensor **out);
/* The WF_STRING forms of the two above (strings.c). */
wf_status *wf__ds_stack_strings(const char *stage, int64_t first, const wf__elem *e, int k, int c, wf_tensor **out);
wf_status *wf__ds_string_row(const wf_tensor *t, int64_t r, wf_tensor **out);
/* An uninitialised WF_STRING tensor of `bytes` bytes (records and payload), for reading one back. */
wf_status *wf__ds_string_alloc(int rank, const int64_t *dims, size_t bytes, wf_tensor **out);
/* A scalar WF_STRING tensor of bytes s[0..n). */
wf_status *wf__ds_string_scalar(const char *s, size_t n, wf_tensor **out);

/* Uniform in [0, bound) from the generator state (advanced), by rejection: shuffle's and
 * list_files' draws. */
uint64_t wf__ds_draw_below(uint64_t *state, uint64_t bound);

/* A tensor-slices dataset over t[0..n) (references taken); `what` names the caller in errors. */
wf_status *wf__ds_slices(const char *what, wf_tensor *const *t, int n, wf_dataset **out);

#endif
