/*
 * The pipeline stages with threads: map (and filter, which shares its function runner), prefetch,
 * prefetch_to_device, and interleave.
 *
 * Parallel map keeps TensorFlow's ParallelMapDataset contract: up to `parallelism` calls in flight,
 * results handed over in input order when deterministic (else as they finish), and the element index
 * (the random ops' counter) fixed by input order, not by which thread ran it, so a deterministic
 * pipeline gives the same elements at every thread count. Its workers pull input themselves, one at a
 * time and in sequence order (in_mu), so no runner thread sits between them and the input.
 *
 * Buffers respect the iterator's RAM budget: a stage that holds at least one element waits rather
 * than take another that would cross the budget (one element is always allowed, so the pipeline
 * cannot deadlock on a budget smaller than an element).
 */
#include <stdio.h>

#include "data/pipeline.h"
#include "data/stages.h"
#include "device/device.h"

/* ---- the map function ------------------------------------------------------------------------------ */

typedef struct fn_p {
    wf_map_fn fn;
    wf_output in[WF__DS_MAXC], out[WF__DS_MAXC];
    wf_session *sess;
    wf_context *own_ctx;
    wf_map_options o;
    const char *what; /* "map" or "filter" */
} fn_p;

static void fn_free_p(void *v)
{
    fn_p *f = v;
    if (!f) return;
    wf_session_free(f->sess);
    wf_context_free(f->own_ctx);
    wf__free(f);
}

static uint64_t counter_of(uint64_t epoch, int64_t index) { return (uint64_t)index + (epoch << 40); }

/* Runs the function on `in` (not consumed) into out; a graph's outputs are written in into's tensors
 * where the session can (into may be NULL; see wf_run_options.into). */
static wf_status *fn_call(const fn_p *f, uint64_t counter, int64_t index, const wf__elem *in, wf__elem *out,
                          const wf__elem *into)
{
    memset(out, 0, sizeof *out);
    wf_status *s;
    if (f->fn.fn) {
        int n = 0;
        s = f->fn.fn(f->fn.user, (int64_t)counter, in->t, in->n, out->t, &n);
        out->n = n < 0 ? 0 : n > WF__DS_MAXC ? WF__DS_MAXC : n;
        if (!s && (n < 1 || n > WF__DS_MAXC))
            s = wf__status(WF_INVALID_ARGUMENT, "the callback returned %d components (1 to %d)", n, WF__DS_MAXC);
        else if (!s && f->fn.n_outputs > 0 && n != f->fn.n_outputs)
            s = wf__status(WF_INVALID_ARGUMENT, "the callback returned %d components; it declared %d (n_outputs)", n,
                           f->fn.n_outputs);
    } else {
        if (in->n != f->fn.n_inputs)
            return wf__status(WF_INVALID_ARGUMENT, "%s stage, element %lld: the element has %d components; the "
                              "function takes %d", f->what, (long long)index, in->n, f->fn.n_inputs);
        wf_feed feeds[WF__DS_MAXC + 1];
        int nf = 0;
        for (int i = 0; i < in->n; i++) feeds[nf++] = (wf_feed){f->in[i], in->t[i]};
        wf_tensor *seed = NULL;
        if (f->fn.seed_input.node) {
            int64_t v[2] = {(int64_t)f->o.seed, (int64_t)counter}, d = 2;
            WF__TRY(wf_tensor_new(WF_I64, 1, &d, v, &seed));
            feeds[nf++] = (wf_feed){f->fn.seed_input, seed};
        }
        wf_run_options ro = {.into = into && into->n == f->fn.n_outputs ? into->t : NULL};
        s = wf_session_run(f->sess, feeds, nf, f->out, f->fn.n_outputs, out->t, &ro);
        wf_tensor_free(seed);
        if (!s) out->n = f->fn.n_outputs;
    }
    if (s) {
        wf__elem_clear(out);
        /* name the element by its first short scalar string (a path, a line) when it has one */
        for (int i = 0; i < in->n; i++) {
            const wf_tensor *t = in->t[i];
            size_t len = 0;
            const char *str = t && t->dtype == WF_STRING && t->rank == 0 ? wf_tensor_string(t, 0, &len) : NULL;
            if (str && len < 400 && !memchr(str, 0, len))
                return wf__status_wrap(s, "%s stage, element %lld ('%.*s')", f->what, (long long)index, (int)len, str);
        }
        return wf__status_wrap(s, "%s stage, element %lld", f->what, (long long)index);
    }
    return NULL;
}

static wf_status *fn_prepare(const char *what, const wf_map_fn *fn, int want_outputs, const wf_map_options *mo,
                             fn_p **out)
{
    *out = NULL;
    if (!fn) return wf__status(WF_INVALID_ARGUMENT, "%s: NULL function", what);
    if (!fn->fn == !fn->graph)
        return wf__status(WF_INVALID_ARGUMENT, "%s: give either a graph or a callback (fn), not %s", what,
                          fn->fn ? "both" : "neither");
    if (fn->graph) {
        if (fn->n_inputs < 0 || fn->n_inputs > WF__DS_MAXC || (fn->n_inputs && !fn->inputs))
            return wf__status(WF_INVALID_ARGUMENT, "%s: %d graph inputs (0 to %d)", what, fn->n_inputs, WF__DS_MAXC);
        if (fn->n_outputs < 1 || fn->n_outputs > WF__DS_MAXC || !fn->outputs)
            return wf__status(WF_INVALID_ARGUMENT, "%s: %d graph outputs (1 to %d)", what, fn->n_outputs, WF__DS_MAXC);
        if (want_outputs && fn->n_outputs != want_outputs)
            return wf__status(WF_INVALID_ARGUMENT, "%s: the predicate has %d outputs; it needs one scalar", what,
                              fn->n_outputs);
    }
    fn_p *f = wf__calloc(1, sizeof *f);
    if (!f) return wf__oom("a map function", sizeof *f);
    f->fn = *fn;
    f->what = what;
    wf_map_options_init(&f->o);
    if (mo) f->o = *mo;
    if (fn->graph) {
        memcpy(f->in, fn->inputs, (size_t)fn->n_inputs * sizeof f->in[0]);
        memcpy(f->out, fn->outputs, (size_t)fn->n_outputs * sizeof f->out[0]);
        f->fn.inputs = f->in;
        f->fn.outputs = f->out;
        /* one element per call on one thread, as tf.data's max_intra_op_parallelism = 1: the parallelism
         * is between elements (num_parallel_calls), which scales better than inside small kernels */
        int intra = f->o.intra_op_threads > 0 ? f->o.intra_op_threads : 1;
        wf_context *ctx = fn->ctx;
        wf_status *s = NULL;
        if (!ctx) {
            wf_context_options co = {1, intra};
            s = wf_context_new(&co, &f->own_ctx);
            ctx = f->own_ctx;
        }
        wf_session_options so;
        wf_session_options_init(&so);
        so.inter_op_threads = 1;
        so.intra_op_threads = intra;
        so.device = fn->device ? fn->device : "CPU:0";
        if (!s) s = wf_session_new(ctx, fn->graph, &so, &f->sess);
        if (s) {
            fn_free_p(f);
            return wf__status_wrap(s, "%s: making the function's session", what);
        }
    }
    *out = f;
    return NULL;
}

void wf_map_options_init(wf_map_options *o)
{
    memset(o, 0, sizeof *o);
    o->num_parallel_calls = 1;
    o->deterministic = 1;
}

/* ---- map, sequential ------------------------------------------------------------------------------- */

typedef struct smap_it {
    wf__ds_it base;
    const fn_p *f;
    wf__ds_it *in;
    uint64_t epoch;
    int64_t index;
    bool filter;
} smap_it;

static wf_status *smap_next_into(wf__ds_it *it, wf__elem *out, bool *end, const wf__elem *into)
{
    smap_it *m = (smap_it *)it;
    for (;;) {
        wf__elem e;
        WF__TRY(wf__ds_next(m->in, &e, end));
        if (*end) return NULL;
        int64_t t0 = wf__ds_now(), idx = m->index++;
        wf_status *s = fn_call(m->f, counter_of(m->epoch, idx), idx, &e, out, m->filter ? NULL : into);
        if (!m->filter) {
            wf__elem_clear(&e);
            if (!s) wf__stage_count(it, wf__ds_now() - t0, out);
            return s;
        }
        /* filter: out holds the predicate's value */
        bool keep = false;
        if (!s) {
            const wf_tensor *p = out->t[0];
            if (p->size != 1 || p->device || p->dtype == WF_STRING)
                s = wf__status(WF_INVALID_ARGUMENT, "filter stage, element %lld: the predicate gave %lld values of %s; "
                               "it needs one number or bool", (long long)idx, (long long)p->size, wf_dtype_name(p->dtype));
            else {
                double v = 0;
                wf__convert(p->data, p->dtype, &v, WF_F64, 1);
                keep = v != 0;
            }
        }
        wf__elem_clear(out);
        if (s) {
            wf__elem_clear(&e);
            return s;
        }
        wf__stage_count(it, wf__ds_now() - t0, NULL);
        if (keep) {
            *out = e;
            return NULL;
        }
        wf__elem_clear(&e);
    }
}

static wf_status *smap_next(wf__ds_it *it, wf__elem *out, bool *end) { return smap_next_into(it, out, end, NULL); }

static wf_status *smap_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    smap_it *m = (smap_it *)it;
    if (m->filter) {
        /* a filter must see values: replay */
        while (*done < n) {
            wf__elem e;
            bool end;
            WF__TRY(smap_next(it, &e, &end));
            if (end) break;
            wf__elem_clear(&e);
            ++*done;
        }
        return NULL;
    }
    WF__TRY(wf__ds_skip(m->in, n, done));
    m->index += *done;
    return NULL;
}

static void smap_free(wf__ds_it *it)
{
    smap_it *m = (smap_it *)it;
    wf__ds_it_free(m->in);
    wf__stage_fini(it);
    wf__free(m);
}

static const wf__ds_it_vt smap_vt = {smap_next, smap_skip, smap_free, NULL, smap_next_into};

/* ---- map, parallel --------------------------------------------------------------------------------- */

enum { SLOT_FREE, SLOT_BUSY, SLOT_DONE, SLOT_TAKEN };

typedef struct slot {
    int state;
    int64_t index;
    wf__elem e;
    wf_status *err;
    int64_t bytes;
} slot;

/* Batch mode (wf__ds_make_for_batch: a batch stage reads the map directly): the workers copy each
 * result straight into its row of the batch's tensors, as TensorFlow's map_and_batch fusion does, so the
 * copy runs in parallel while the result is still in the worker's cache, and the batch stage takes
 * whole batches (take_batch). A row that cannot be copied (an error, a string, a device tensor, another
 * shape than the batch's) is kept as it is, and the batch stage then reads that batch element by
 * element through next(), exactly as it reads an unfused map: same batches, same errors. */
enum { ROW_FREE, ROW_BUSY, ROW_DONE, ROW_KEPT };

typedef struct brow {
    int state;
    wf__elem e;        /* ROW_KEPT: the element (empty with err) */
    wf_status *err;
    int64_t bytes;
} brow;

typedef struct bslot {
    int64_t b;         /* the batch held here, -1: none */
    wf__elem out;      /* [bn, ...] tensors, shaped after the batch's first plain result */
    int64_t bytes;     /* out's and the kept rows' bytes, held in the RAM budget */
    int64_t done;      /* rows finished */
    bool irregular;    /* a row was kept */
    brow *rows;        /* bn */
} bslot;

typedef struct pmap_it {
    wf__ds_it base;
    const fn_p *f;
    wf__ds_it *in;
    uint64_t epoch;
    bool deterministic;
    pthread_mutex_t mu, in_mu;
    pthread_cond_t work, done;
    slot *ring;
    int cap;                /* ring slots: results in flight or waiting for the consumer (4 per thread) */
    int64_t head, tail;     /* sequence numbers: next to hand over, next to claim */
    int reserved, active;   /* workers between claiming and numbering / running a call */
    bool in_end, stop, paused;
    pthread_t *th;
    int nth;
    int64_t bn;             /* batch mode: rows per batch (0: elements) */
    bslot *bat;             /* nbat slots: batch b in bat[b % nbat] */
    int nbat;
    int64_t hb;             /* the oldest batch still held */
} pmap_it;

static bool same_rows(const wf__elem *batch, const wf__elem *e)
{
    if (batch->n != e->n) return false;
    for (int c = 0; c < e->n; c++) {
        const wf_tensor *t = e->t[c], *b = batch->t[c];
        if (t->dtype != b->dtype || t->rank + 1 != b->rank ||
            memcmp(t->dims, b->dims + 1, (size_t)t->rank * sizeof t->dims[0]))
            return false;
    }
    return true;
}

/* Batch mode, mu held: the batch's tensors, shaped after e (false when they cannot be made: the row is
 * then kept, and the batch stage's own allocation reports the failure) */
static bool bslot_alloc(pmap_it *m, bslot *bs, const wf__elem *e)
{
    for (int c = 0; c < e->n; c++) {
        const wf_tensor *t = e->t[c];
        int64_t dims[WF_MAX_RANK];
        dims[0] = m->bn;
        memcpy(dims + 1, t->dims, (size_t)t->rank * sizeof dims[0]);
        wf_status *s = wf__tensor_alloc(t->dtype, t->rank + 1, dims, "a batch", &bs->out.t[c]);
        if (s) {
            wf_status_free(s);
            wf__elem_clear(&bs->out);
            return false;
        }
        bs->out.n = c + 1;
    }
    int64_t bytes = (int64_t)wf__elem_bytes(&bs->out);
    bs->bytes += bytes;
    wf__pipe_hold(m->base.pipe, m->base.st, bytes);
    return true;
}

/* Batch mode, mu held: element seq's result into its row (copied, or kept), mu held again on return;
 * whether that made the batch whole or irregular (what take_batch waits for). */
static bool bmap_store(pmap_it *m, int64_t seq, wf__elem *out, wf_status *s)
{
    bslot *bs = &m->bat[(seq / m->bn) % m->nbat];
    brow *r = &bs->rows[seq % m->bn];
    if (!s && wf__elem_plain(out) && (bs->out.n ? same_rows(&bs->out, out) : bslot_alloc(m, bs, out))) {
        /* the rows are disjoint and the batch's tensors stay put until every row is done */
        wf__elem dst = bs->out;
        pthread_mutex_unlock(&m->mu);
        for (int c = 0; c < out->n; c++) {
            char *row = (char *)dst.t[c]->data + (size_t)(seq % m->bn) * out->t[c]->bytes;
            if (out->t[c]->bytes && out->t[c]->data != row) memcpy(row, out->t[c]->data, out->t[c]->bytes);
        }
        wf__elem_clear(out);
        pthread_mutex_lock(&m->mu);
        r->state = ROW_DONE;
    } else {
        r->e = *out;
        r->err = s;
        r->bytes = (int64_t)wf__elem_bytes(out);
        bs->bytes += r->bytes;
        wf__pipe_hold(m->base.pipe, m->base.st, r->bytes);
        bs->irregular = true;
        r->state = ROW_KEPT;
    }
    return ++bs->done == m->bn || r->state == ROW_KEPT;
}

static void pmap_worker_step(pmap_it *m)
{
    /* called with mu held and a reservation taken: pull the next input element in order */
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_lock(&m->in_mu);
    wf__elem e;
    bool end = false;
    wf_status *s = NULL;
    if (!m->in_end) s = wf__ds_next(m->in, &e, &end);
    else end = true;
    pthread_mutex_lock(&m->mu);
    m->reserved--;
    if (end && !s) {
        m->in_end = true;
        pthread_mutex_unlock(&m->in_mu);
        pthread_cond_broadcast(&m->done);
        pthread_cond_broadcast(&m->work);
        return;
    }
    int64_t seq = m->tail++;
    slot *sl = NULL;
    wf__elem into = {0};
    if (m->bn) {
        bslot *bs = &m->bat[(seq / m->bn) % m->nbat];
        bs->b = seq / m->bn; /* the slot is free or already this batch's (pmap_worker's room test) */
        bs->rows[seq % m->bn].state = ROW_BUSY;
        /* once the batch's tensors exist the function writes its result straight into its row */
        if (bs->out.n && !s) wf_status_free(wf__ds_row_views(&bs->out, seq % m->bn, &into));
    } else {
        sl = &m->ring[seq % m->cap];
        sl->state = SLOT_BUSY;
        sl->index = seq;
    }
    m->active++;
    pthread_mutex_unlock(&m->in_mu);
    pthread_mutex_unlock(&m->mu);

    wf__elem out;
    memset(&out, 0, sizeof out);
    int64_t t0 = wf__ds_now();
    if (!s) {
        s = fn_call(m->f, counter_of(m->epoch, seq), seq, &e, &out, into.n ? &into : NULL);
        wf__elem_clear(&e);
        wf__elem_clear(&into);
    } else {
        wf__elem_clear(&e);
    }
    if (m->bn) {
        if (!s) wf__stage_count(&m->base, 0, &out);
        pthread_mutex_lock(&m->mu);
        bool ready = bmap_store(m, seq, &out, s);
        atomic_fetch_add(&m->base.st->busy_ns, wf__ds_now() - t0); /* the copy is this stage's work now */
        m->active--;
        /* the consumer waits for a whole batch, an odd row, the element it reads next (bmap_next), the
         * end, or the workers to stop (skip): waking it for any other row would only take a core from a
         * worker for nothing */
        if (ready || seq == m->head || m->paused || m->in_end) pthread_cond_broadcast(&m->done);
        return;
    }
    int64_t busy = wf__ds_now() - t0;
    int64_t bytes = (int64_t)wf__elem_bytes(&out);
    if (!s) wf__stage_count(&m->base, busy, &out);
    wf__pipe_hold(m->base.pipe, m->base.st, bytes);

    pthread_mutex_lock(&m->mu);
    sl->e = out;
    sl->err = s;
    sl->bytes = bytes;
    sl->state = SLOT_DONE;
    m->active--;
    pthread_cond_broadcast(&m->done);
}

static void *pmap_worker(void *arg)
{
    pmap_it *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        int par = atomic_load(&m->base.st->knob);
        int64_t ahead = m->tail - m->head + m->reserved;
        int64_t eb = atomic_load(&m->base.st->elem_bytes);
        bool room;
        if (m->bn) {
            /* the next element's batch has a slot (the consumer's batch and the nbat - 1 after it), and a
             * batch not begun yet fits the budget */
            int64_t b = m->tail / m->bn;
            bool begun = m->bat[b % m->nbat].b == b;
            room = b < m->hb + m->nbat && (begun || ahead == 0 || wf__pipe_fits(m->base.pipe, eb * m->bn));
        } else {
            /* results may wait for the consumer in up to 4 * par slots, so a consumer that is briefly
             * late does not idle the workers */
            room = ahead < 4 * par && ahead < m->cap && (ahead == 0 || wf__pipe_fits(m->base.pipe, eb));
        }
        /* at most `par` calls at once */
        if (m->paused || m->in_end || m->reserved > 0 || !room || m->active + m->reserved >= par) {
            pthread_cond_wait(&m->work, &m->mu);
            continue;
        }
        m->reserved++;
        pmap_worker_step(m);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

/* Batch mode, mu held: gives back the slots of the batches before the consumer's. */
static void bmap_advance(pmap_it *m)
{
    for (; m->hb < m->head / m->bn; m->hb++) {
        bslot *bs = &m->bat[m->hb % m->nbat];
        if (bs->b != m->hb) continue;
        for (int64_t i = 0; i < m->bn; i++) {
            wf__elem_clear(&bs->rows[i].e);
            wf_status_free(bs->rows[i].err);
            memset(&bs->rows[i], 0, sizeof bs->rows[i]);
        }
        wf__elem_clear(&bs->out);
        wf__pipe_hold(m->base.pipe, m->base.st, -bs->bytes);
        bs->bytes = 0;
        bs->done = 0;
        bs->irregular = false;
        bs->b = -1;
    }
}

/* mu held: the consumer waits for the workers (recorded for autotune) */
static void pmap_wait(pmap_it *m, int64_t *waited0)
{
    if (!*waited0) {
        *waited0 = wf__ds_now();
        atomic_store(&m->base.st->wants_more, true);
    }
    pthread_cond_broadcast(&m->work);
    pthread_cond_wait(&m->done, &m->mu);
}

/* mu held: at the end (everything handed over, nothing more coming) sets *end and unlocks; else waits */
static bool pmap_end_or_wait(pmap_it *m, int64_t *waited0, bool *end)
{
    if (m->in_end && m->head == m->tail && m->reserved == 0) {
        *end = true;
        pthread_mutex_unlock(&m->mu);
        return true;
    }
    pmap_wait(m, waited0);
    return false;
}

/* mu held: lets the workers on and unlocks */
static void pmap_handed(pmap_it *m, int64_t waited0)
{
    pthread_cond_broadcast(&m->work);
    pthread_mutex_unlock(&m->mu);
    if (waited0) atomic_fetch_add(&m->base.st->wait_ns, wf__ds_now() - waited0);
}

/* Batch mode: the next n elements as one batch, when they make a whole one the workers filled. */
static bool pmap_take_batch(wf__ds_it *it, int64_t n, wf__elem *out)
{
    pmap_it *m = (pmap_it *)it;
    int64_t waited0 = 0;
    bool got = false;
    pthread_mutex_lock(&m->mu);
    while (n == m->bn && m->head % m->bn == 0) {
        bslot *bs = &m->bat[(m->head / m->bn) % m->nbat];
        bool mine = bs->b == m->head / m->bn;
        if (mine && bs->irregular) break;
        if (mine && bs->done == m->bn) {
            *out = bs->out;
            memset(&bs->out, 0, sizeof bs->out);
            wf__pipe_hold(m->base.pipe, m->base.st, -bs->bytes);
            bs->bytes = 0;
            m->head += m->bn;
            bmap_advance(m);
            got = true;
            break;
        }
        if (m->in_end && m->tail - m->head < m->bn) break; /* the short last batch, or the end */
        pmap_wait(m, &waited0);
    }
    pmap_handed(m, waited0);
    return got;
}

/* Batch mode: the next element by itself (after an irregular row, an error, a skip, at the end). */
static wf_status *bmap_next(pmap_it *m, wf__elem *out, bool *end)
{
    int64_t waited0 = 0;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        bslot *bs = &m->bat[(m->head / m->bn) % m->nbat];
        brow *r = &bs->rows[m->head % m->bn];
        if (m->head < m->tail && bs->b == m->head / m->bn && (r->state == ROW_DONE || r->state == ROW_KEPT)) {
            wf_status *s = NULL;
            if (r->state == ROW_KEPT) {
                *out = r->e;
                s = r->err;
                memset(&r->e, 0, sizeof r->e);
                r->err = NULL;
                bs->bytes -= r->bytes;
                wf__pipe_hold(m->base.pipe, m->base.st, -r->bytes);
                r->bytes = 0;
            } else {
                for (int c = 0; c < bs->out.n && !s; c++) {
                    s = wf__ds_row(bs->out.t[c], m->head % m->bn, &out->t[c]);
                    out->n = c + 1;
                }
                if (s) wf__elem_clear(out);
            }
            r->state = ROW_FREE;
            m->head++;
            bmap_advance(m);
            pmap_handed(m, waited0);
            return s;
        }
        if (pmap_end_or_wait(m, &waited0, end)) return NULL;
    }
}

static wf_status *pmap_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    pmap_it *m = (pmap_it *)it;
    if (m->bn) return bmap_next(m, out, end);
    int64_t waited0 = 0;
    pthread_mutex_lock(&m->mu);
    for (;;) {
        /* drop handed-over slots at the head (non-deterministic order leaves them behind) */
        while (m->head < m->tail && m->ring[m->head % m->cap].state == SLOT_TAKEN) {
            m->ring[m->head % m->cap].state = SLOT_FREE;
            m->head++;
        }
        slot *pick = NULL;
        if (m->head < m->tail) {
            if (m->ring[m->head % m->cap].state == SLOT_DONE) pick = &m->ring[m->head % m->cap];
            else if (!m->deterministic)
                for (int64_t q = m->head + 1; q < m->tail && !pick; q++)
                    if (m->ring[q % m->cap].state == SLOT_DONE) pick = &m->ring[q % m->cap];
        }
        if (pick) {
            *out = pick->e;
            wf_status *s = pick->err;
            memset(&pick->e, 0, sizeof pick->e);
            pick->err = NULL;
            pick->state = SLOT_TAKEN;
            wf__pipe_hold(m->base.pipe, m->base.st, -pick->bytes);
            while (m->head < m->tail && m->ring[m->head % m->cap].state == SLOT_TAKEN) {
                m->ring[m->head % m->cap].state = SLOT_FREE;
                m->head++;
            }
            pmap_handed(m, waited0);
            return s;
        }
        if (pmap_end_or_wait(m, &waited0, end)) return NULL;
    }
}

/* Stops new calls, waits for those in flight, and drops what is buffered (counted as skipped). */
static int64_t pmap_quiesce(pmap_it *m, int64_t n)
{
    int64_t taken = 0;
    m->paused = true;
    while (m->active || m->reserved) pthread_cond_wait(&m->done, &m->mu);
    if (m->bn) {
        taken = m->tail - m->head < n ? m->tail - m->head : n;
        m->head += taken;
        bmap_advance(m);
        return taken;
    }
    while (m->head < m->tail) {
        slot *sl = &m->ring[m->head % m->cap];
        if (sl->state == SLOT_DONE && taken < n) {
            wf__elem_clear(&sl->e);
            wf_status_free(sl->err);
            sl->err = NULL;
            wf__pipe_hold(m->base.pipe, m->base.st, -sl->bytes);
            taken++;
        } else if (sl->state == SLOT_DONE) {
            break;
        }
        sl->state = SLOT_FREE;
        m->head++;
    }
    return taken;
}

static wf_status *pmap_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    pmap_it *m = (pmap_it *)it;
    pthread_mutex_lock(&m->mu);
    int64_t taken = pmap_quiesce(m, n);
    wf_status *s = NULL;
    if (taken < n && m->head == m->tail && !m->in_end) {
        /* nothing buffered is left: skip the input itself, keeping the element numbering. Paused, no
         * worker reads the input; in_mu is taken without mu, in the workers' order. */
        pthread_mutex_unlock(&m->mu);
        pthread_mutex_lock(&m->in_mu);
        int64_t got = 0;
        s = wf__ds_skip(m->in, n - taken, &got);
        pthread_mutex_unlock(&m->in_mu);
        pthread_mutex_lock(&m->mu);
        taken += got;
        m->head += got;
        m->tail += got;
        if (m->bn) bmap_advance(m);
        if (!s && taken < n) m->in_end = true;
    }
    *done = taken;
    m->paused = false;
    pthread_cond_broadcast(&m->work);
    pthread_mutex_unlock(&m->mu);
    return s;
}

static void pmap_free(wf__ds_it *it)
{
    pmap_it *m = (pmap_it *)it;
    if (m->th) {
        pthread_mutex_lock(&m->mu);
        m->stop = true;
        pthread_cond_broadcast(&m->work);
        pthread_mutex_unlock(&m->mu);
        for (int i = 0; i < m->nth; i++) pthread_join(m->th[i], NULL);
    }
    for (int i = 0; m->ring && i < m->cap; i++) {
        wf__elem_clear(&m->ring[i].e);
        wf_status_free(m->ring[i].err);
    }
    for (int i = 0; m->bat && i < m->nbat; i++) {
        for (int64_t r = 0; m->bat[i].rows && r < m->bn; r++) {
            wf__elem_clear(&m->bat[i].rows[r].e);
            wf_status_free(m->bat[i].rows[r].err);
        }
        wf__elem_clear(&m->bat[i].out);
        wf__free(m->bat[i].rows);
    }
    wf__free(m->bat);
    wf__ds_it_free(m->in);
    wf__stage_fini(it);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->in_mu);
    pthread_cond_destroy(&m->work);
    pthread_cond_destroy(&m->done);
    wf__free(m->ring);
    wf__free(m->th);
    wf__free(m);
}

static const wf__ds_it_vt pmap_vt = {pmap_next, pmap_skip, pmap_free, NULL};
static const wf__ds_it_vt bmap_vt = {pmap_next, pmap_skip, pmap_free, pmap_take_batch};

/* bn > 0: made for a batch stage of bn rows (batch mode, when the map is parallel) */
static wf_status *map_make_for(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, int64_t bn,
                               wf__ds_it **out)
{
    const fn_p *f = ds->params;
    int req = f->o.num_parallel_calls;
    bool filter = f->what[0] == 'f';
    /* AUTOTUNE within a budget of one thread can only ever run one call at a time: in the consumer's
     * thread, without the hand-over to a worker (which cost 15% on one core) */
    if (req == 1 || filter || (req == WF_AUTOTUNE && p->cpu_budget <= 1)) {
        smap_it *m = wf__calloc(1, sizeof *m);
        if (!m) return wf__oom("a map iterator", sizeof *m);
        m->f = f;
        m->epoch = epoch;
        m->filter = filter;
        wf_status *s = wf__stage_init(&m->base, &smap_vt, p, filter ? "filter" : "map", depth);
        if (!s) s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &m->in);
        if (s) {
            m->base.vt = &smap_vt;
            smap_free(&m->base);
            return s;
        }
        *out = &m->base;
        return NULL;
    }
    pmap_it *m = wf__calloc(1, sizeof *m);
    if (!m) return wf__oom("a parallel map iterator", sizeof *m);
    m->f = f;
    m->epoch = epoch;
    m->deterministic = f->o.deterministic != 0;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->in_mu, NULL);
    pthread_cond_init(&m->work, NULL);
    pthread_cond_init(&m->done, NULL);
    bool tune = req == WF_AUTOTUNE;
    int threads = tune ? p->cpu_budget : req;
    m->cap = 4 * threads;
    m->bn = bn;
    const wf__ds_it_vt *vt = bn ? &bmap_vt : &pmap_vt;
    wf_status *s = wf__stage_init(&m->base, vt, p, bn ? tune ? "map(parallel, autotune) into batch" :
                                  "map(parallel) into batch" : tune ? "map(parallel, autotune)" : "map(parallel)",
                                  depth);
    if (!s) {
        m->base.st->knob_kind = 1;
        m->base.st->knob_max = threads;
        m->base.st->tuned = tune && p->autotune;
        /* autotune starts at one call and climbs (autotune.c); without it, at the budget */
        atomic_store(&m->base.st->knob, tune && p->autotune ? 1 : threads);
        m->base.st->mu = &m->mu;
        m->base.st->cv = &m->work;
        s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &m->in);
    }
    if (!s && bn) {
        /* the consumer's batch and enough after it for 4 results a thread, as in element mode */
        m->nbat = 1 + (int)((4 * (int64_t)threads + bn - 1) / bn);
        m->bat = wf__calloc((size_t)m->nbat, sizeof *m->bat);
        if (!m->bat) s = wf__oom("a parallel map's batches", (size_t)m->nbat * sizeof *m->bat);
        for (int i = 0; !s && i < m->nbat; i++) {
            m->bat[i].b = -1;
            m->bat[i].rows = wf__calloc((size_t)bn, sizeof *m->bat[i].rows);
            if (!m->bat[i].rows) s = wf__oom("a parallel map's batch rows", (size_t)bn * sizeof *m->bat[i].rows);
        }
    }
    if (!s) {
        m->ring = bn ? NULL : wf__calloc((size_t)m->cap, sizeof *m->ring);
        m->th = wf__calloc((size_t)threads, sizeof *m->th);
        if ((!bn && !m->ring) || !m->th) s = wf__oom("a parallel map's buffers", (size_t)m->cap * sizeof *m->ring);
    }
    for (int i = 0; !s && i < threads; i++) {
        if (pthread_create(&m->th[i], NULL, pmap_worker, m)) s = wf__status(WF_UNAVAILABLE, "map: cannot start a thread");
        else m->nth++;
    }
    if (s) {
        m->base.vt = vt;
        pmap_free(&m->base);
        return s;
    }
    *out = &m->base;
    return NULL;
}

static wf_status *map_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    return map_make_for(ds, p, epoch, depth, 0, out);
}

static const wf__ds_kind map_kind = {"map", map_make, fn_free_p};

wf_status *wf__ds_make_for_batch(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, int64_t n,
                                 wf__ds_it **out)
{
    if (ds->kind == &map_kind) return map_make_for(ds, p, epoch, depth, n, out);
    return wf__ds_make(ds, p, epoch, depth, out);
}

wf_status *wf_dataset_map(wf_dataset *in, const wf_map_fn *fn, const wf_map_options *o, wf_dataset **out)
{
    if (!in || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_map: NULL dataset or out");
    *out = NULL;
    wf_map_options mo;
    wf_map_options_init(&mo);
    if (o) mo = *o;
    if (mo.num_parallel_calls < 1 && mo.num_parallel_calls != WF_AUTOTUNE)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_map: num_parallel_calls %d (>= 1 or WF_AUTOTUNE)",
                          mo.num_parallel_calls);
    if (mo.num_parallel_calls > 1024)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_map: num_parallel_calls %d is more than 1024 threads",
                          mo.num_parallel_calls);
    fn_p *f;
    WF__TRY(fn_prepare("map", fn, 0, &mo, &f));
    int nc = fn->graph || (fn->n_outputs > 0 && fn->n_outputs <= WF__DS_MAXC) ? fn->n_outputs : 0;
    uint64_t fp = wf__ds_mix(wf__ds_mix(mo.seed, (uint64_t)(fn->graph ? fn->n_outputs : 77)), (uint64_t)mo.deterministic);
    return wf__ds_new(&map_kind, f, in, NULL, nc, wf_dataset_cardinality(in), fp, out);
}

static const wf__ds_kind filter_kind = {"filter", map_make, fn_free_p};

wf_status *wf_dataset_filter(wf_dataset *in, const wf_map_fn *pred, wf_dataset **out)
{
    if (!in || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_filter: NULL dataset or out");
    *out = NULL;
    fn_p *f;
    WF__TRY(fn_prepare("filter", pred, 1, NULL, &f));
    int64_t c = wf_dataset_cardinality(in);
    return wf__ds_new(&filter_kind, f, in, NULL, in->ncomp, c == WF_DATASET_INFINITE ? c : WF_DATASET_UNKNOWN,
                      0x66696cull, out);
}

/* ---- prefetch and prefetch_to_device --------------------------------------------------------------- */

typedef struct pf_p {
    int64_t n;
    wf_context *ctx;          /* prefetch_to_device */
    const struct wf__device *dev;
    char device[24];
} pf_p;

typedef struct pf_item {
    wf__elem e;
    wf_status *err;
    bool end;
    int64_t bytes;
} pf_item;

typedef struct pf_it {
    wf__ds_it base;
    const pf_p *p;
    wf__ds_it *in;
    pthread_mutex_t mu;
    pthread_cond_t cv_prod, cv_cons;
    pf_item *q;
    int cap, head, count;
    bool stop, pulling, paused, ended;
    pthread_t th;
    bool started;
    /* prefetch_to_device's latest copies (a ring of COPY_LOG), for wf_iterator_copy_events */
    wf_dataset_event *log;
    int64_t n_log, produced;
} pf_it;

#define COPY_LOG 4096

/* Moves e's tensors to the device: on a device with streams, every component's upload is queued on its
 * copy stream (WF_STREAM_COPY, which the backend stages through pinned memory it owns), then this
 * thread waits for the last one, so the uploads overlap each other and whatever the device's compute
 * stream runs meanwhile (the consumer's step); else through the backend's blocking copy. */
static wf_status *to_device(const pf_p *p, wf__elem *e)
{
    const struct wf__device *dev = p->dev;
    wf_tensor *d[WF__DS_MAXC] = {0};
    wf_event *ev[WF__DS_MAXC] = {0};
    bool async = WF_BACKEND_HAS_STREAMS(dev->vt);
    wf_status *s = NULL;
    for (int i = 0; i < e->n && !s; i++) {
        const wf_tensor *t = e->t[i];
        if (t->dtype == WF_STRING)
            s = wf__status(WF_INVALID_ARGUMENT, "prefetch_to_device(%s): component %d is a string; strings stay on "
                           "the host", p->device, i);
        else if (t->device || !async || !t->bytes)
            s = wf__tensor_move(dev, t, &d[i]);
        else if (!(s = wf__device_tensor_alloc(dev, t->dtype, t->rank, t->dims, &d[i])))
            s = dev->vt->copy_to_device_async(dev->dev, d[i]->dev_chunk, d[i]->dev_offset, t->data, t->bytes, &ev[i]);
    }
    /* the host tensors stay alive (in e) until their uploads completed */
    for (int i = 0; i < e->n; i++) {
        if (!ev[i]) continue;
        wf_status *w = dev->vt->event_sync(dev->dev, ev[i]);
        if (w && !s) s = w;
        else wf_status_free(w);
        dev->vt->event_release(dev->dev, ev[i]);
    }
    if (s) {
        for (int i = 0; i < e->n; i++) wf_tensor_free(d[i]);
        return wf__status_wrap(s, "prefetch_to_device(%s)", p->device);
    }
    for (int i = 0; i < e->n; i++) {
        wf_tensor_free(e->t[i]);
        e->t[i] = d[i];
    }
    return NULL;
}

static void *pf_thread(void *arg)
{
    pf_it *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        int lim = atomic_load(&f->base.st->knob);
        if (lim > f->cap) lim = f->cap;
        int64_t eb = atomic_load(&f->base.st->elem_bytes);
        bool room = f->count < lim && (f->count == 0 || wf__pipe_fits(f->base.pipe, eb));
        if (f->stop) break;
        if (f->paused || f->ended || !room) {
            if (!f->paused && !f->ended && f->count >= lim) atomic_store(&f->base.st->saturated, true);
            pthread_cond_wait(&f->cv_prod, &f->mu);
            continue;
        }
        f->pulling = true;
        pthread_mutex_unlock(&f->mu);
        pf_item it = {0};
        int64_t t0 = wf__ds_now();
        it.err = wf__ds_next(f->in, &it.e, &it.end);
        int64_t t1 = wf__ds_now(), t2 = t1;
        if (!it.err && !it.end && f->p->dev) {
            it.err = to_device(f->p, &it.e);
            t2 = wf__ds_now();
            if (it.err) wf__elem_clear(&it.e);
        }
        it.bytes = (int64_t)wf__elem_bytes(&it.e);
        if (!it.err && !it.end) wf__stage_count(&f->base, t2 - t1, &it.e);
        (void)t0;
        wf__pipe_hold(f->base.pipe, f->base.st, it.bytes);
        pthread_mutex_lock(&f->mu);
        f->pulling = false;
        if (f->log && !it.end) {
            if (!it.err) f->log[f->n_log++ % COPY_LOG] = (wf_dataset_event){f->produced, t1, t2};
            f->produced++;
        }
        if (it.end) f->ended = true;
        f->q[(f->head + f->count) % f->cap] = it;
        f->count++;
        pthread_cond_broadcast(&f->cv_cons);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static wf_status *pf_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    pf_it *f = (pf_it *)it;
    int64_t w0 = 0;
    pthread_mutex_lock(&f->mu);
    while (!f->count) {
        if (!w0) {
            w0 = wf__ds_now();
            atomic_store(&f->base.st->wants_more, true);
        }
        pthread_cond_broadcast(&f->cv_prod);
        pthread_cond_wait(&f->cv_cons, &f->mu);
    }
    pf_item item = f->q[f->head];
    if (item.end) {
        /* keep the end marker for later calls */
        pthread_mutex_unlock(&f->mu);
        *end = true;
        return NULL;
    }
    memset(&f->q[f->head], 0, sizeof f->q[0]);
    f->head = (f->head + 1) % f->cap;
    f->count--;
    pthread_cond_broadcast(&f->cv_prod);
    pthread_mutex_unlock(&f->mu);
    if (w0) atomic_fetch_add(&f->base.st->wait_ns, wf__ds_now() - w0);
    wf__pipe_hold(f->base.pipe, f->base.st, -item.bytes);
    *out = item.e;
    return item.err;
}

static wf_status *pf_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    pf_it *f = (pf_it *)it;
    pthread_mutex_lock(&f->mu);
    f->paused = true;
    while (f->pulling) pthread_cond_wait(&f->cv_cons, &f->mu);
    bool ended = false;
    while (f->count && *done < n) {
        pf_item *q = &f->q[f->head];
        if (q->end) {
            ended = true;
            break;
        }
        wf__elem_clear(&q->e);
        wf_status_free(q->err);
        wf__pipe_hold(f->base.pipe, f->base.st, -q->bytes);
        memset(q, 0, sizeof *q);
        f->head = (f->head + 1) % f->cap;
        f->count--;
        ++*done;
    }
    wf_status *s = NULL;
    if (!ended && *done < n && !f->count) {
        int64_t got = 0;
        s = wf__ds_skip(f->in, n - *done, &got);
        *done += got;
    }
    f->paused = false;
    pthread_cond_broadcast(&f->cv_prod);
    pthread_mutex_unlock(&f->mu);
    return s;
}

static void pf_free(wf__ds_it *it)
{
    pf_it *f = (pf_it *)it;
    if (f->started) {
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_broadcast(&f->cv_prod);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->th, NULL);
    }
    for (int i = 0; f->q && i < f->count; i++) {
        pf_item *q = &f->q[(f->head + i) % f->cap];
        wf__elem_clear(&q->e);
        wf_status_free(q->err);
    }
    wf__ds_it_free(f->in);
    wf__stage_fini(it);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv_prod);
    pthread_cond_destroy(&f->cv_cons);
    wf__free(f->q);
    wf__free(f->log);
    wf__free(f);
}

static const wf__ds_it_vt pf_vt = {pf_next, pf_skip, pf_free};

/* The most elements a tuned prefetch buffer may grow to (the RAM budget may stop it sooner). */
#define PF_TUNE_MAX 64

static wf_status *pf_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    const pf_p *pp = ds->params;
    pf_it *f = wf__calloc(1, sizeof *f);
    if (!f) return wf__oom("a prefetch iterator", sizeof *f);
    f->p = pp;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv_prod, NULL);
    pthread_cond_init(&f->cv_cons, NULL);
    bool tune = pp->n == WF_AUTOTUNE;
    char name[96];
    if (pp->dev) snprintf(name, sizeof name, "prefetch_to_device(%s)", pp->device);
    else snprintf(name, sizeof name, "%s", tune ? "prefetch(autotune)" : "prefetch");
    /* one slot more than the limit holds the end marker */
    f->cap = (int)(tune ? (pp->dev ? 2 : PF_TUNE_MAX) : pp->n) + 1;
    wf_status *s = wf__stage_init(&f->base, &pf_vt, p, name, depth);
    if (!s) {
        f->base.st->knob_kind = 2;
        f->base.st->knob_max = f->cap - 1;
        f->base.st->tuned = tune && !pp->dev && p->autotune;
        atomic_store(&f->base.st->knob, tune ? (pp->dev ? 2 : 1) : (int)pp->n);
        f->base.st->mu = &f->mu;
        f->base.st->cv = &f->cv_prod;
        s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &f->in);
    }
    if (!s && !(f->q = wf__calloc((size_t)f->cap, sizeof *f->q))) s = wf__oom("a prefetch buffer", (size_t)f->cap * sizeof *f->q);
    if (!s && pp->dev && !(f->log = wf__calloc(COPY_LOG, sizeof *f->log))) s = wf__oom("a copy log", COPY_LOG * sizeof *f->log);
    if (!s) {
        if (pthread_create(&f->th, NULL, pf_thread, f)) s = wf__status(WF_UNAVAILABLE, "prefetch: cannot start a thread");
        else f->started = true;
    }
    if (s) {
        f->base.vt = &pf_vt;
        pf_free(&f->base);
        return s;
    }
    *out = &f->base;
    return NULL;
}

static const wf__ds_kind pf_kind = {"prefetch", pf_make, wf__free};

wf_status *wf_dataset_prefetch(wf_dataset *in, int64_t n, wf_dataset **out)
{
    if (!in || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_prefetch: NULL dataset or out");
    *out = NULL;
    if ((n < 1 && n != WF_AUTOTUNE) || n > 65536)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_prefetch: buffer %lld (1 to 65536, or WF_AUTOTUNE)", (long long)n);
    pf_p *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("a prefetch dataset", sizeof *p);
    p->n = n;
    return wf__ds_new(&pf_kind, p, in, NULL, in->ncomp, wf_dataset_cardinality(in), (uint64_t)n, out);
}

static const wf__ds_kind pfd_kind = {"prefetch_to_device", pf_make, wf__free};

wf_status *wf_dataset_prefetch_to_device(wf_dataset *in, wf_context *ctx, const char *device, int64_t n, wf_dataset **out)
{
    if (!in || !out || !ctx || !device)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_prefetch_to_device: NULL dataset, context, device or out");
    *out = NULL;
    if ((n < 1 && n != WF_AUTOTUNE) || n > 1024)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_prefetch_to_device: buffer %lld (1 to 1024, or WF_AUTOTUNE)",
                          (long long)n);
    const struct wf__device *dev = NULL;
    WF__TRY(wf__ds_find_device(ctx, device, &dev));
    pf_p *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("a prefetch_to_device dataset", sizeof *p);
    p->n = n;
    p->ctx = ctx;
    p->dev = dev;
    snprintf(p->device, sizeof p->device, "%s", device);
    uint64_t fp = (uint64_t)n;
    for (const char *c = device; *c; c++) fp = wf__ds_mix(fp, (uint64_t)(unsigned char)*c);
    return wf__ds_new(&pfd_kind, p, in, NULL, in->ncomp, wf_dataset_cardinality(in), fp, out);
}

int wf__ds_copy_events(wf__ds_it *root, wf_dataset_event *out, int cap)
{
    if (!root || root->vt != &pf_vt) return 0;
    pf_it *f = (pf_it *)root;
    if (!f->log) return 0;
    pthread_mutex_lock(&f->mu);
    int64_t first = f->n_log > COPY_LOG ? f->n_log - COPY_LOG : 0;
    int n = (int)(f->n_log - first);
    for (int i = 0; i < n && i < cap && out; i++) out[i] = f->log[(first + i) % COPY_LOG];
    pthread_mutex_unlock(&f->mu);
    return n;
}
