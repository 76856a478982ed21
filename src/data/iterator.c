/*
 * Iterators over pipeline datasets: the stage tree, its shared state (budgets, statistics, autotune),
 * checkpoints, and the element helpers every stage uses.
 *
 * A checkpoint is a position, not a copy of the buffers: (fingerprint, iteration, elements produced).
 * Restoring rebuilds the tree for that iteration and skips that many elements. Everything a pipeline
 * does is a function of (seeds, iteration, element index) when it is deterministic, so the skipped
 * iteration passes through exactly the states the saved one did, shuffle buffers included; sources
 * seek instead of reading and 1:1 stages (map, prefetch) pass the skip to their input without
 * computing, so only the stages that must see values (shuffle, filter, batch boundaries) replay.
 */
#include <stdio.h>
#include <unistd.h>

#include "data/pipeline.h"
#include "device/device.h"

uint64_t wf__ds_mix(uint64_t a, uint64_t b)
{
    uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void wf__elem_clear(wf__elem *e)
{
    for (int i = 0; i < e->n; i++) wf_tensor_free(e->t[i]);
    memset(e, 0, sizeof *e);
}

size_t wf__elem_bytes(const wf__elem *e)
{
    size_t b = 0;
    for (int i = 0; i < e->n; i++)
        if (e->t[i] && !e->t[i]->device) b += e->t[i]->bytes;
    return b;
}

/* ---- datasets ------------------------------------------------------------------------------------- */

wf_status *wf__ds_new(const wf__ds_kind *kind, void *params, wf_dataset *in0, wf_dataset *in1, int ncomp,
                      int64_t card, uint64_t fp, wf_dataset **out)
{
    wf_dataset *ds = wf__calloc(1, sizeof *ds);
    if (!ds) {
        if (kind->free_params) kind->free_params(params);
        return wf__oom("a dataset", sizeof *ds);
    }
    atomic_init(&ds->refs, 1);
    ds->kind = kind;
    ds->params = params;
    if (in0) atomic_fetch_add(&in0->refs, 1);
    if (in1) atomic_fetch_add(&in1->refs, 1);
    ds->in[0] = in0;
    ds->in[1] = in1;
    ds->ncomp = ncomp;
    ds->card = card;
    uint64_t f = fp;
    for (const char *c = kind->name; *c; c++) f = wf__ds_mix(f, (uint64_t)(unsigned char)*c);
    if (in0) f = wf__ds_mix(f, in0->fingerprint);
    if (in1) f = wf__ds_mix(f, in1->fingerprint);
    ds->fingerprint = f;
    *out = ds;
    return NULL;
}

int64_t wf_dataset_cardinality(const wf_dataset *ds) { return !ds ? 0 : ds->kind ? ds->card : ds->n; }

wf_status *wf__ds_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    *out = NULL;
    if (!ds->kind) return wf__arrays_make(ds, p, epoch, depth, out);
    return ds->kind->make(ds, p, epoch, depth, out);
}

void wf__ds_it_free(wf__ds_it *it)
{
    if (it) it->vt->free(it);
}

wf_status *wf__ds_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    memset(out, 0, sizeof *out);
    *end = false;
    return it->vt->next(it, out, end);
}

wf_status *wf__ds_next_into(wf__ds_it *it, wf__elem *out, bool *end, const wf__elem *into)
{
    if (!into || !it->vt->next_into) return wf__ds_next(it, out, end);
    memset(out, 0, sizeof *out);
    *end = false;
    return it->vt->next_into(it, out, end, into);
}

wf_status *wf__ds_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    *done = 0;
    if (it->vt->skip) return it->vt->skip(it, n, done);
    while (*done < n) {
        wf__elem e;
        bool end;
        WF__TRY(wf__ds_next(it, &e, &end));
        if (end) break;
        wf__elem_clear(&e);
        (*done)++;
    }
    return NULL;
}

/* ---- the pipe ------------------------------------------------------------------------------------- */

wf_status *wf__pipe_register(wf__pipe *p, wf__stage_stats *st)
{
    pthread_mutex_lock(&p->mu);
    if (p->n_stats == p->cap_stats) {
        int cap = p->cap_stats ? 2 * p->cap_stats : 8;
        wf__stage_stats **v = wf__realloc(p->stats, (size_t)p->cap_stats * sizeof *v, (size_t)cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&p->mu);
            return wf__oom("a pipeline's statistics", (size_t)cap * sizeof *v);
        }
        p->stats = v;
        p->cap_stats = cap;
    }
    p->stats[p->n_stats++] = st;
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void wf__pipe_unregister(wf__pipe *p, wf__stage_stats *st)
{
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->n_stats; i++)
        if (p->stats[i] == st) {
            memmove(p->stats + i, p->stats + i + 1, (size_t)(p->n_stats - i - 1) * sizeof *p->stats);
            p->n_stats--;
            break;
        }
    pthread_mutex_unlock(&p->mu);
}

static void peak_max(_Atomic int64_t *peak, int64_t v)
{
    int64_t cur = atomic_load(peak);
    while (v > cur && !atomic_compare_exchange_weak(peak, &cur, v)) {
    }
}

void wf__pipe_hold(wf__pipe *p, wf__stage_stats *st, int64_t bytes)
{
    int64_t all = atomic_fetch_add(&p->buffered, bytes) + bytes;
    if (bytes > 0) peak_max(&p->peak_buffered, all);
    if (st) {
        int64_t mine = atomic_fetch_add(&st->buffered, bytes) + bytes;
        if (bytes > 0) peak_max(&st->peak_buffered, mine);
    }
}

bool wf__pipe_fits(const wf__pipe *p, int64_t bytes)
{
    if (!p->ram_budget) return true;
    int64_t now = atomic_load(&p->buffered);
    return now == 0 || (uint64_t)(now + bytes) <= p->ram_budget;
}

/* ---- iterators ------------------------------------------------------------------------------------ */

void wf_iterator_options_init(wf_iterator_options *o)
{
    memset(o, 0, sizeof *o);
    o->autotune = 1;
}

static int cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static uint64_t half_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 2 : 0;
}

/* Tears the tree down: the stages stop their threads before their buffers go. */
static void it_stop(wf_iterator *it)
{
    atomic_store(&it->pipe.stopping, true);
    wf__autotune_stop(&it->pipe);
    wf__ds_it_free(it->root);
    it->root = NULL;
    atomic_store(&it->pipe.stopping, false);
}

static wf_status *it_build(wf_iterator *it)
{
    WF__TRY(wf__ds_make(it->ds, &it->pipe, it->epoch, 0, &it->root));
    if (it->pipe.autotune) {
        wf_status *s = wf__autotune_start(&it->pipe);
        if (s) {
            it_stop(it);
            return s;
        }
    }
    return NULL;
}

void wf_iterator_free(wf_iterator *it)
{
    if (!it) return;
    it_stop(it);
    if (!it->weak) wf_dataset_free(it->ds);
    wf__free(it->pipe.stats);
    pthread_mutex_destroy(&it->pipe.mu);
    pthread_mutex_destroy(&it->pipe.tmu);
    pthread_cond_destroy(&it->pipe.tcv);
    wf__free(it);
}

wf_status *wf_dataset_iterator(wf_dataset *ds, const wf_iterator_options *opts, wf_iterator **out)
{
    if (!ds || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_iterator: NULL dataset or out");
    *out = NULL;
    wf_iterator_options o;
    wf_iterator_options_init(&o);
    if (opts) o = *opts;
    if (o.cpu_budget < 0)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_iterator: cpu_budget %d must be >= 0", o.cpu_budget);
    wf_iterator *it = wf__calloc(1, sizeof *it);
    if (!it) return wf__oom("a dataset iterator", sizeof *it);
    pthread_mutex_init(&it->pipe.mu, NULL);
    pthread_mutex_init(&it->pipe.tmu, NULL);
    pthread_cond_init(&it->pipe.tcv, NULL);
    it->pipe.cpu_budget = o.cpu_budget ? o.cpu_budget : cores();
    it->pipe.ram_budget = o.ram_budget ? o.ram_budget : half_ram();
    it->pipe.autotune = o.autotune != 0;
    it->opts = o;
    atomic_fetch_add(&ds->refs, 1);
    it->ds = ds;
    it->epoch = atomic_fetch_add(&ds->iterations, 1);
    wf_status *s = it_build(it);
    if (s) {
        wf_iterator_free(it);
        return s;
    }
    *out = it;
    return NULL;
}

wf_status *wf_iterator_next(wf_iterator *it, wf_tensor **out, int cap, int *n)
{
    if (!it || !out || !n) return wf__status(WF_INVALID_ARGUMENT, "wf_iterator_next: NULL argument");
    *n = 0;
    if (!it->root) return wf__status(WF_FAILED_PRECONDITION, "wf_iterator_next: the iterator could not be restored");
    wf__elem e;
    bool end;
    wf_status *s = wf__ds_next(it->root, &e, &end);
    if (s) {
        wf__elem_clear(&e);
        return s;
    }
    if (end) return NULL;
    if (e.n > cap) {
        int have = e.n;
        wf__elem_clear(&e);
        return wf__status(WF_INVALID_ARGUMENT, "wf_iterator_next: the element has %d components; out holds %d", have,
                          cap);
    }
    for (int i = 0; i < e.n; i++) out[i] = e.t[i];
    *n = e.n;
    it->produced++;
    return NULL;
}

#define STATE_MAGIC 0x77667374617465ll /* "wfstate" */

wf_status *wf_iterator_save(const wf_iterator *it, wf_tensor **state)
{
    if (!it || !state) return wf__status(WF_INVALID_ARGUMENT, "wf_iterator_save: NULL argument");
    int64_t v[4] = {STATE_MAGIC, (int64_t)it->ds->fingerprint, (int64_t)it->epoch, it->produced};
    int64_t d = 4;
    return wf_tensor_new(WF_I64, 1, &d, v, state);
}

wf_status *wf_iterator_restore(wf_iterator *it, const wf_tensor *state)
{
    if (!it || !state) return wf__status(WF_INVALID_ARGUMENT, "wf_iterator_restore: NULL argument");
    if (state->dtype != WF_I64 || state->rank != 1 || state->dims[0] != 4 || !state->data ||
        ((const int64_t *)state->data)[0] != STATE_MAGIC)
        return wf__status(WF_INVALID_ARGUMENT, "wf_iterator_restore: the state is not an iterator position "
                                               "(wf_iterator_save gives an i64[4] tensor)");
    const int64_t *v = state->data;
    if ((uint64_t)v[1] != it->ds->fingerprint)
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_iterator_restore: the state was saved from another pipeline (fingerprint %016llx, "
                          "this one's %016llx)",
                          (unsigned long long)v[1], (unsigned long long)it->ds->fingerprint);
    if (v[3] < 0) return wf__status(WF_INVALID_ARGUMENT, "wf_iterator_restore: negative position %lld", (long long)v[3]);
    it_stop(it);
    it->epoch = (uint64_t)v[2];
    it->produced = 0;
    /* later iterations of the dataset come after the restored one */
    uint64_t next = it->epoch + 1, cur = atomic_load(&it->ds->iterations);
    while (cur < next && !atomic_compare_exchange_weak(&it->ds->iterations, &cur, next)) {
    }
    WF__TRY(it_build(it));
    int64_t done = 0;
    wf_status *s = wf__ds_skip(it->root, v[3], &done);
    if (!s && done < v[3])
        s = wf__status(WF_INVALID_ARGUMENT, "wf_iterator_restore: the pipeline ended after %lld elements; the state is at %lld",
                       (long long)done, (long long)v[3]);
    if (s) {
        it_stop(it);
        return wf__status_wrap(s, "restoring a dataset iterator");
    }
    it->produced = done;
    return NULL;
}

int wf_dataset_stats(wf_iterator *it, wf_dataset_stage_stats *out, int cap, int64_t *peak_bytes)
{
    if (!it) return 0;
    if (peak_bytes) *peak_bytes = atomic_load(&it->pipe.peak_buffered);
    pthread_mutex_lock(&it->pipe.mu);
    int n = it->pipe.n_stats;
    for (int i = 0; i < n && i < cap && out; i++) {
        const wf__stage_stats *st = it->pipe.stats[i];
        wf_dataset_stage_stats *o = &out[i];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", st->name);
        o->depth = st->depth;
        o->elements = atomic_load(&st->elements);
        o->busy_s = (double)atomic_load(&st->busy_ns) * 1e-9;
        o->wait_s = (double)atomic_load(&st->wait_ns) * 1e-9;
        o->knob_kind = st->knob_kind;
        o->knob = atomic_load(&st->knob);
        int par = st->knob_kind == 1 && o->knob > 0 ? o->knob : 1;
        o->elements_per_s = o->busy_s > 0 ? (double)o->elements / (o->busy_s / par) : 0;
        o->buffered_bytes = atomic_load(&st->buffered);
        o->peak_buffered_bytes = atomic_load(&st->peak_buffered);
        o->tuned = st->tuned;
    }
    pthread_mutex_unlock(&it->pipe.mu);
    return n;
}

wf_status *wf__ds_find_device(wf_context *ctx, const char *spec_text, const struct wf__device **out)
{
    uint64_t mask;
    WF__TRY(wf__context_match(ctx, spec_text, &mask));
    if (mask) {
        *out = &ctx->devices[__builtin_ctzll(mask)];
        return NULL;
    }
    char list[512];
    size_t k = 0;
    list[0] = 0;
    for (int d = 0; d < ctx->n_devices && k + 40 < sizeof list; d++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", d ? ", " : "", ctx->devices[d].short_name);
    return wf__status(WF_NOT_FOUND, "prefetch_to_device: device '%s' matches no device of the context (%s)", spec_text,
                      list);
}

int wf_iterator_copy_events(wf_iterator *it, wf_dataset_event *out, int cap)
{
    return it ? wf__ds_copy_events(it->root, out, cap) : 0;
}
