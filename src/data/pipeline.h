/*
 * The input pipeline's insides (issue 16): a dataset is an immutable description (a stage kind, its
 * parameters and its input datasets), shared by reference; an iterator is a tree of running stages
 * made from it, one per wf_dataset_iterator call. Elements are tuples of up to
 * WF_DATASET_MAX_COMPONENTS host (or, after prefetch_to_device, device) tensors.
 *
 * A stage's iterator pulls from its inputs' iterators (next) on the caller's thread, except the
 * asynchronous stages (parallel map, prefetch, prefetch_to_device, parallel interleave), which run
 * their own threads and hand results over through a bounded buffer. Every stage records what
 * autotune's model needs (stats below); tunable stages expose their knob (parallelism or buffer
 * size), which autotune.c's optimiser turns within the iterator's CPU and RAM budgets.
 */
#ifndef WF_DATA_PIPELINE_H
#define WF_DATA_PIPELINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/core.h"

#define WF__DS_MAXC WF_DATASET_MAX_COMPONENTS

typedef struct wf__elem {
    int n;
    wf_tensor *t[WF__DS_MAXC];
} wf__elem;

void wf__elem_clear(wf__elem *e);
/* Host bytes held by e's tensors (device tensors count 0: they are not in the RAM budget). */
size_t wf__elem_bytes(const wf__elem *e);

typedef struct wf__pipe wf__pipe;
typedef struct wf__ds_it wf__ds_it;

/* What a stage records; read by autotune and wf_dataset_stats. Counters are atomics because the
 * asynchronous stages update them from their threads while the optimiser reads them. */
typedef struct wf__stage_stats {
    char name[48];
    int depth;                    /* 0: the stage the consumer pulls from */
    _Atomic int64_t elements;     /* produced */
    _Atomic int64_t busy_ns;      /* time spent producing (summed over its threads), inputs excluded */
    _Atomic int64_t wait_ns;      /* time its consumer waited for it (asynchronous stages) */
    _Atomic int64_t buffered;     /* bytes held in its buffer now */
    _Atomic int64_t peak_buffered;
    _Atomic int64_t elem_bytes;   /* bytes of the last element produced: the model's element size */
    /* the knob: parallelism (map, interleave) or buffer size (prefetch); 0 for a stage without one */
    int knob_kind;                /* 0 none, 1 parallelism, 2 buffer */
    _Atomic int knob;             /* current value */
    int knob_max;
    bool tuned;                   /* AUTOTUNE: the optimiser may change knob */
    _Atomic bool wants_more;      /* its consumer waited on an empty buffer since the last look */
    _Atomic bool saturated;       /* its producer waited on a full buffer (the knob's limit) since then */
    pthread_mutex_t *mu;          /* the stage's lock, when it has threads (signalled after knob changes) */
    pthread_cond_t *cv;
} wf__stage_stats;

struct wf__ds_it {
    const struct wf__ds_it_vt *vt;
    wf__pipe *pipe;
    wf__stage_stats *st;          /* registered with the pipe; NULL for stages that record nothing */
};

typedef struct wf__ds_it_vt {
    /* The next element into *out (*end = true and *out empty at the end). An error for one element
     * does not end the iteration: the next call tries the element after it (ignore_errors relies on
     * this); stages that cannot continue keep returning their error. */
    wf_status *(*next)(wf__ds_it *it, wf__elem *out, bool *end);
    /* Skips up to n elements as if next() had returned them and they were dropped (*done: how many);
     * NULL: next() n times. Used to restore a checkpointed position. */
    wf_status *(*skip)(wf__ds_it *it, int64_t n, int64_t *done);
    void (*free)(wf__ds_it *it);
    /* Optional (a parallel map made for a batch stage, wf__ds_make_for_batch): the next n elements as
     * one batch of [n, ...] tensors, waiting for them, when they make a whole batch of plain elements
     * of one shape and no error; false (nothing taken) otherwise, and the batch stage reads them with
     * next() as from any stage. */
    bool (*take_batch)(wf__ds_it *it, int64_t n, wf__elem *out);
    /* Optional (a map): next(), with tensors the element's components may be written in (a batch's
     * row: into's component c gets component c when its dtype and shape match, and out->t[c] is then
     * into->t[c] itself). */
    wf_status *(*next_into)(wf__ds_it *it, wf__elem *out, bool *end, const wf__elem *into);
} wf__ds_it_vt;

/* A dataset kind: how to make its iterator. epoch counts the iterations of this dataset (each
 * wf_dataset_iterator, each pass of an enclosing repeat): shuffles draw their order from it. */
typedef struct wf__ds_kind {
    const char *name;
    wf_status *(*make)(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out);
    void (*free_params)(void *params);
} wf__ds_kind;

struct wf_dataset {
    atomic_int refs;
    /* Array datasets (wf_dataset_from_tensors / _from_idx, kind NULL): the original loader's fields. */
    wf_tensor *x, *y;
    int64_t n;
    int64_t *index;
    int64_t *order;
    int64_t batch;
    int drop_remainder;
    int shuffled;
    uint64_t seed;
    int64_t epoch;
    int64_t cursor;
    /* Pipeline stages. */
    const wf__ds_kind *kind;
    void *params;
    wf_dataset *in[2];
    int ncomp;                    /* components of an element; 0 when unknown until run (a map) */
    int64_t card;                 /* WF_DATASET_INFINITE, WF_DATASET_UNKNOWN or a count */
    uint64_t fingerprint;         /* of the description: a checkpoint restores only into the same one */
    _Atomic uint64_t iterations;  /* iterators made so far: the next one's epoch */
    wf_iterator *legacy;          /* wf_dataset_next_batch's iterator over a pipeline */
};

/* The running iterator: the stage tree plus what its stages share. */
struct wf__pipe {
    int cpu_budget;               /* threads the asynchronous stages may run at once, in all */
    uint64_t ram_budget;          /* bytes their buffers may hold, in all (0: unlimited) */
    bool autotune;
    pthread_mutex_t mu;           /* guards the stats list */
    wf__stage_stats **stats;
    int n_stats, cap_stats;
    _Atomic bool stopping;
    _Atomic int64_t buffered;     /* bytes in all buffers now */
    _Atomic int64_t peak_buffered;
    /* autotune's thread */
    pthread_t tuner;
    bool tuner_running;
    pthread_mutex_t tmu;
    pthread_cond_t tcv;
};

struct wf_iterator {
    wf__pipe pipe;
    wf_dataset *ds;
    wf__ds_it *root;
    uint64_t epoch;
    int64_t produced;
    wf_iterator_options opts;
    bool weak; /* the dataset's own (wf_dataset_next_batch's): holds no reference to ds, which owns it */
};

/* A new dataset of `kind` over inputs (references taken); params owned on success and on failure. */
wf_status *wf__ds_new(const wf__ds_kind *kind, void *params, wf_dataset *in0, wf_dataset *in1, int ncomp,
                      int64_t card, uint64_t fp, wf_dataset **out);
/* Makes ds's iterator for `epoch` at `depth` in the tree. */
wf_status *wf__ds_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out);
void wf__ds_it_free(wf__ds_it *it);
wf_status *wf__ds_next(wf__ds_it *it, wf__elem *out, bool *end);
/* next() with tensors to write the element in where the stage can (vt.next_into); into may be NULL. */
wf_status *wf__ds_next_into(wf__ds_it *it, wf__elem *out, bool *end, const wf__elem *into);
wf_status *wf__ds_skip(wf__ds_it *it, int64_t n, int64_t *done);

/* Registers a stage's stats with the pipe (the pipe keeps the pointer; the stage frees it after
 * wf__pipe_unregister). */
wf_status *wf__pipe_register(wf__pipe *p, wf__stage_stats *st);
void wf__pipe_unregister(wf__pipe *p, wf__stage_stats *st);
/* Buffer accounting: a stage adds what it holds and removes what it hands over. */
void wf__pipe_hold(wf__pipe *p, wf__stage_stats *st, int64_t bytes);
/* Whether `bytes` more fit in the RAM budget (always with no budget, or with nothing buffered). */
bool wf__pipe_fits(const wf__pipe *p, int64_t bytes);
/* Starts and stops autotune's optimiser (autotune.c). */
wf_status *wf__autotune_start(wf__pipe *p);
void wf__autotune_stop(wf__pipe *p);
/* One optimiser round on the stats gathered so far (the thread calls it; tests may too). */
void wf__autotune_step(wf__pipe *p);

/* Array datasets as pipeline sources (dataset.c). */
wf_status *wf__arrays_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out);
/* Element i of an array dataset (its stored order). */
wf_status *wf__arrays_get(const wf_dataset *ds, int64_t i, wf__elem *out);
/* Sources whose element i can be made directly (arrays, tensor slices, range): shuffle then keeps
 * indices in its buffer instead of elements, with the same draws, so the order is the same and the
 * buffer costs 8 bytes an element instead of a copy of the data. */
bool wf__ds_random_access(const wf_dataset *ds);
wf_status *wf__ds_get(const wf_dataset *ds, int64_t i, wf__elem *out);

/* The context's device matching a spec ("OPENCL:0"); NOT_FOUND lists the devices. */
struct wf__device;
wf_status *wf__ds_find_device(wf_context *ctx, const char *spec, const struct wf__device **out);
/* prefetch_to_device's latest copies when root is that stage (wf_iterator_copy_events). */
int wf__ds_copy_events(wf__ds_it *root, wf_dataset_event *out, int cap);

/* Mixes two 64-bit values into one (splitmix64's finaliser over a sum). */
uint64_t wf__ds_mix(uint64_t a, uint64_t b);

static inline int64_t wf__ds_now(void) { return wf__now_ns(); }

#endif
