/*
 * Dataflow execution of a plan. Per-run state (slots, remaining uses, pending counts) lives in the run,
 * so one plan serves concurrent runs. A thread that finishes a node runs the successors it made ready
 * itself (work-first: a chain never touches the queue) and hands half of its backlog to the pool only
 * when a worker is idle; a value is freed when its last consumer finishes, and a kernel may write in
 * place into an input whose last use it is. A traced run also records each node's times, bytes and
 * output shapes, and waits for an accelerator after each of its nodes so that times are execution
 * times (the only place the executor ever waits for a device: untraced runs stay asynchronous).
 *
 * Devices with streams and events (device_impl.h) run on events instead, and no inter-op thread ever
 * waits for them. A node there is enqueued (its kernel on the compute stream, an upload or download on
 * the copy stream) and an event recorded after it; the compute stream waits for an upload with a
 * stream wait, not the host. A kernel on the same device as its producer is enqueued as soon as the
 * producer is (the stream keeps the order); every other successor, and the node's own completion
 * (its inputs freed, its blocks given back), waits for the event to fire. Completion comes by event
 * callback (event_notify), which pushes a completion item onto the inter-op queue, so one host thread
 * keeps every device busy; downloads are enqueued only once their producer has completed, so an
 * upload is never stuck behind a download on the in-order copy stream. Traced runs then take device
 * times from the events, and do not wait after each node.
 */
#include <stdio.h>

#include "device/device.h"
#include "exec/exec.h"
#include "core/pool.h"
#include "lower/memplan.h"

#define LOCAL_MAX 256
#define INLINE_ARGS 16

struct wf_trace {
    int n;
    wf_trace_event *ev;
    char *strings;
    int64_t wall_ns;
    int *deps;      /* every event's deps, in event order */
};

struct wf__run {
    wf_context *ctx;
    const wf__plan *p;
    const wf_feed *feeds;
    wf_tensor **slots;
    atomic_int *uses;
    atomic_int *pending;
    atomic_int outstanding;
    atomic_int done;
    atomic_int failed;
    _Atomic(wf_status *) error;
    int64_t t0;
    int64_t *t_start, *t_end;
    int *t_thread;
    /* traced runs only: what each node moved and produced, and whether its times are enqueue times */
    int64_t *t_bytes;
    char **t_shapes;
    unsigned char *t_enqueue;
    int64_t *t_out_bytes;
    struct wf__arena_set *arena; /* this run's arenas (lower/memplan.c); NULL: the plan has none */
    /* devices with streams: per node, its event (NULL: none, or completed synchronously), the device
     * and stream it was recorded on, the blocks its kernel released while enqueueing, and its
     * completion callback's argument; traced runs also record an event before each kernel */
    struct wf__nodeev *nev;
    wf_event **slot_ev;        /* the event of each slot's producer, when on a device's copy stream */
    int64_t *t_dstart, *t_dend;
    wf_tensor **slot_into;     /* per slot: the caller's tensor a fetch is written in (NULL: none) */
};

/* Outputs of a node with a caller's tensor to write in (wf_run_options.into), at most this many */
#define INTO_MAX_OUT 8

typedef struct wf__nodeev {
    wf_event *ev, *begin;
    const struct wf__device *dev;
    int stream;                /* WF_STREAM_COMPUTE or WF_STREAM_COPY */
    wf__defer defer;
    wf__run *run;
    int idx;
    wf_status *err;            /* from the callback */
} wf__nodeev;

static bool has_streams(const struct wf__device *d) { return d && WF_BACKEND_HAS_STREAMS(d->vt); }

static _Thread_local int tl_thread_id = -1;
static atomic_int g_thread_ids;

static int thread_id(void)
{
    if (tl_thread_id < 0) tl_thread_id = atomic_fetch_add(&g_thread_ids, 1);
    return tl_thread_id;
}

/* "f32[2,3], i64[4]" of a node's outputs, for the trace; NULL when out of memory (the event then
 * shows no shapes rather than failing a run that worked). */
static char *shapes_of(wf_tensor *const *out, int n)
{
    wf__str b = {0};
    for (int j = 0; j < n; j++) {
        const wf_tensor *t = out[j];
        wf__str_appendf(&b, "%s%s[", j ? ", " : "", wf_dtype_name(t->dtype));
        for (int d = 0; d < t->rank; d++) wf__str_appendf(&b, "%s%lld", d ? "," : "", (long long)t->dims[d]);
        wf__str_appendf(&b, "]");
    }
    if (b.failed) {
        wf__str_free(&b);
        return NULL;
    }
    return b.p;
}

/* After a traced node on an accelerator: its kernels are only enqueued (an in-order queue), so the
 * trace waits for the device to make the end time that of the execution. Untraced runs never wait. */
static wf_status *trace_node_done(wf__run *r, int idx, wf_tensor **in, wf_tensor **out)
{
    const wf__pnode *pn = &r->p->nodes[idx];
    const struct wf__device *d = &r->ctx->devices[pn->device];
    int64_t bytes = 0;
    for (int i = 0; i < pn->n_in; i++)
        if (in[i] && pn->op != &wf__copy_op) bytes += (int64_t)in[i]->bytes;
    int64_t out_bytes = 0;
    for (int j = 0; j < pn->n_out; j++) out_bytes += (int64_t)out[j]->bytes;
    r->t_bytes[idx] = bytes + out_bytes;
    r->t_out_bytes[idx] = out_bytes;
    r->t_shapes[idx] = shapes_of(out, pn->n_out);
    if (d->info.host_memory || pn->feed >= 0 || (r->nev && r->nev[idx].ev)) return NULL;
    if (!d->vt->synchronize) {
        r->t_enqueue[idx] = 1;
        return NULL;
    }
    wf_status *s = d->vt->synchronize(d->dev);
    return s ? wf__status_wrap(s, "node '%s' (%s): waiting for %s", pn->name, pn->op->name, d->short_name) : NULL;
}

static void record_error(wf__run *r, wf_status *s)
{
    wf_status *expected = NULL;
    if (!atomic_compare_exchange_strong(&r->error, &expected, s)) wf_status_free(s);
    atomic_store_explicit(&r->failed, 1, memory_order_release);
}

/* Waits (on the host) for an event after a failed enqueue, so that blocks are never released under
 * queued work, and drops it. */
static void drain_event(const struct wf__device *d, int stream)
{
    wf_event *e = NULL;
    if (d->vt->event_record(d->dev, stream, &e)) return;
    wf_status_free(d->vt->event_sync(d->dev, e));
    d->vt->event_release(d->dev, e);
}

/* A kernel on a device with streams: waits for uploads of its inputs on the compute stream, enqueues,
 * and records the node's event. */
static wf_status *kernel_async(wf__run *r, int idx, const wf__pnode *pn, wf__kctx *k, const struct wf__device *d)
{
    wf__nodeev *ne = &r->nev[idx];
    wf_status *s = NULL;
    ne->dev = d;
    ne->stream = WF_STREAM_COMPUTE;
    for (int i = 0; i < pn->n_in && !s; i++) {
        int sl = pn->in_slot[i];
        wf_event *e = sl >= 0 ? r->slot_ev[sl] : NULL;
        if (!e) continue;
        bool seen = false; /* one wait per distinct upload */
        for (int j = 0; j < i; j++) seen |= pn->in_slot[j] >= 0 && r->slot_ev[pn->in_slot[j]] == e;
        if (!seen) s = d->vt->stream_wait(d->dev, WF_STREAM_COMPUTE, e);
    }
    if (!s && r->t_start) s = d->vt->event_record(d->dev, WF_STREAM_COMPUTE, &ne->begin);
    if (s) return wf__status_wrap(s, "node '%s' (%s): ordering after its inputs on %s", pn->name, pn->op->name, d->short_name);
    wf__defer_begin(&ne->defer, d);
    s = pn->kernel->compute(k);
    wf__defer_end();
    if (!s) {
        s = d->vt->event_record(d->dev, WF_STREAM_COMPUTE, &ne->ev);
        if (s) s = wf__status_wrap(s, "node '%s' (%s): recording its event on %s", pn->name, pn->op->name, d->short_name);
    }
    if (s) {
        /* what it enqueued may still use its outputs and temporaries */
        drain_event(d, WF_STREAM_COMPUTE);
        wf__defer_release(&ne->defer);
    }
    return s;
}

/* A Copy between the host and a device with streams, on that device's copy stream. Its input is
 * complete (a host value, or a device value whose producer has completed), and stays alive until the
 * node completes. */
static wf_status *copy_async(wf__run *r, int idx, const wf__pnode *pn, wf__kctx *k, const struct wf__device *d,
                             bool up)
{
    wf__nodeev *ne = &r->nev[idx];
    const wf_tensor *src = k->in[0];
    wf_tensor *dst;
    WF__TRY(wf__kctx_output(k, 0, src->dtype, src->rank, src->dims, &dst));
    wf_status *s = up ? d->vt->copy_to_device_async(d->dev, dst->dev_chunk, dst->dev_offset, src->data, src->bytes, &ne->ev)
                      : d->vt->copy_to_host_async(d->dev, dst->data, src->dev_chunk, src->dev_offset, src->bytes, &ne->ev);
    ne->dev = d;
    ne->stream = WF_STREAM_COPY;
    if (s) {
        ne->ev = NULL;
        drain_event(d, WF_STREAM_COPY);
        return wf__status_wrap(s, "node '%s' (Copy): enqueueing the transfer %s %s", pn->name, up ? "to" : "from",
                               d->short_name);
    }
    return NULL;
}

/* The outputs of a node enqueued on a device with streams (its event recorded): each one checked, and a
 * view of an arena value given its own bytes by a copy on the compute stream, after the kernel and its
 * waits for its inputs; the node's event is then recorded again, so that the node completes after it. */
static wf_status *async_outputs(wf__run *r, int idx, const wf__pnode *pn, const wf__kctx *k, wf_tensor **out)
{
    wf_status *s;
    bool fix = false;
    for (int j = 0; j < pn->n_out; j++) {
        if (!out[j])
            return wf__status(WF_INTERNAL, "node '%s' (%s): kernel produced no output %d", pn->name, pn->op->name, j);
        fix |= k->mem && wf__arena_needs_fix(k->mem, j, out[j]);
        if (k->mem && (s = wf__arena_fix_output(k->device, k->mem, j, &out[j])))
            return wf__status_wrap(s, "node '%s' (%s): output %d", pn->name, pn->op->name, j);
    }
    if (fix) {
        wf__nodeev *ne = &r->nev[idx];
        k->device->vt->event_release(k->device->dev, ne->ev);
        ne->ev = NULL;
        if ((s = k->device->vt->event_record(k->device->dev, WF_STREAM_COMPUTE, &ne->ev)))
            return wf__status_wrap(s, "node '%s' (%s): recording its event on %s", pn->name, pn->op->name,
                                   k->device->short_name);
    }
    return NULL;
}

/* Where the node's outputs live, as kernels see it: NULL for host memory. */
static const struct wf__device *kernel_device(const wf__run *r, const wf__pnode *pn)
{
    const struct wf__device *d = &r->ctx->devices[pn->device];
    return d->info.host_memory ? NULL : d;
}

static wf_status *compute(wf__run *r, int idx, const wf__pnode *pn, wf_tensor **in, wf_tensor **out)
{
    if (pn->feed >= 0) {
        /* Fed values are host tensors, except variables a session keeps on their device: a feed
         * placed on a device (a resident variable) is uploaded unless it is there already. */
        const wf_tensor *t = r->feeds[pn->feed].tensor;
        const struct wf__device *d = kernel_device(r, pn);
        if (t->device == d) {
            out[0] = wf_tensor_ref((wf_tensor *)t);
            return NULL;
        }
        wf_status *s = NULL;
        /* a session's variable: its device copy is uploaded once and shared by the session's plans */
        if (!wf__weights_get_tracked(r->p->weights, d, t, &out[0], &s)) s = wf__tensor_move(d, t, &out[0]);
        return s ? wf__status_wrap(s, "feeding node '%s' (%s)", pn->name, pn->op->name) : NULL;
    }
    uint32_t owned = 0;
    for (int i = 0; i < pn->n_in; i++) {
        int s = pn->in_slot[i];
        in[i] = s >= 0 ? r->slots[s] : NULL;
        if (s < 0 || i >= 32 || r->p->slot_static[s]) continue;
        /* All other consumers of the slot have finished when the remaining uses are this node's own. */
        int mine = 0;
        for (int j = 0; j < pn->n_in; j++) mine += pn->in_slot[j] == s;
        if (atomic_load_explicit(&r->uses[s], memory_order_acquire) == mine) owned |= 1u << i;
    }
    wf__kctx k = {
        .node = pn->name, .op = pn->op, .attrs = pn->attrs, .n_in = pn->n_in, .in = in,
        .n_out = pn->n_out, .out = out, .out_info = pn->out_info, .in_owned = owned,
        .state = (void **)&pn->state, .state_lock = (void *)&pn->state_lock, .intra = &r->ctx->intra,
        .fused_bias = pn->fused_bias, .fused_act = pn->fused_act, .fused_alpha = pn->fused_alpha,
        .in_blocked = pn->in_blocked, .out_blocked = pn->out_blocked, .ewprog = pn->ewprog,
        .device = kernel_device(r, pn),
        .host_acct = r->ctx->devices[pn->device].host_acct, .est = pn->est,
        .weights = r->p->weights, .fused_residual = pn->fused_res, .out_unused = pn->out_unused,
        .fused_beta = pn->fused_beta,
    };
    wf_tensor *into[INTO_MAX_OUT];
    if (r->slot_into && !k.device && pn->n_out <= INTO_MAX_OUT) {
        bool any = false;
        for (int j = 0; j < pn->n_out; j++) any |= (into[j] = r->slot_into[pn->out_slot[j]]) != NULL;
        if (any) k.out_into = into;
    }
    wf__kmem mem;
    if (r->arena) {
        mem = (wf__kmem){&r->arena->dev[pn->device], pn->out_slot, r->p->slot_off, r->p->slot_cap,
                         &r->ctx->devices[pn->device].fallback_allocs};
        k.mem = &mem;
    }
    if (r->nev) {
        const struct wf__device *d = k.device;
        if (pn->op == &wf__copy_op && in[0] && in[0]->bytes) {
            if (!in[0]->device && has_streams(d)) WF__TRY(copy_async(r, idx, pn, &k, d, true));
            else if (!d && has_streams(in[0]->device)) WF__TRY(copy_async(r, idx, pn, &k, in[0]->device, false));
        } else if (pn->op != &wf__copy_op && has_streams(d)) {
            /* the node's commands and its event stay contiguous on the compute stream (see enqueue_mu) */
            pthread_mutex_lock(d->enqueue_mu);
            wf_status *s = kernel_async(r, idx, pn, &k, d);
            if (!s && r->nev[idx].ev) s = async_outputs(r, idx, pn, &k, out);
            pthread_mutex_unlock(d->enqueue_mu);
            return s;
        }
        if (r->nev[idx].ev) return async_outputs(r, idx, pn, &k, out);
    }
    wf_status *s = pn->kernel->compute(&k);
    if (s) return s;
    for (int j = 0; j < pn->n_out; j++) {
        if (!out[j])
            return wf__status(WF_INTERNAL, "node '%s' (%s): kernel produced no output %d", pn->name,
                              pn->op->name, j);
        /* a view or reference of another value's arena bytes gets bytes of its own */
        if (k.mem && (s = wf__arena_fix_output(k.device, k.mem, j, &out[j])))
            return wf__status_wrap(s, "node '%s' (%s): output %d", pn->name, pn->op->name, j);
    }
    return NULL;
}

/* The ready nodes a thread holds: a stack that starts inline and grows on the heap. */
typedef struct lstack {
    int *v;
    int n, cap;
    int finished; /* nodes this thread completed, subtracted from the run's count in one go */
    int inl[LOCAL_MAX];
} lstack;

static void exec_node(wf__run *r, int idx, lstack *ls);

static void lstack_push(wf__run *r, lstack *ls, int idx)
{
    if (ls->n == ls->cap) {
        int cap = ls->cap * 2;
        int *v = wf__malloc(sizeof *v * (size_t)cap);
        if (!v) {
            /* No memory to hold it: queue it, or as a last resort run it right here. */
            wf__work w = {r, idx};
            if (!wf__pool_push(r->ctx->pool, wf__exec_batch, &w, 1)) exec_node(r, idx, ls);
            return;
        }
        memcpy(v, ls->v, sizeof *v * (size_t)ls->n);
        if (ls->v != ls->inl) wf__free(ls->v);
        ls->v = v;
        ls->cap = cap;
    }
    ls->v[ls->n++] = idx;
}

static void finish_node(wf__run *r, int idx, lstack *ls, bool chained_done);

/* Whether successor sidx was made ready when node ne's work was enqueued: a kernel on the same device
 * with streams (the in-order compute stream, or a stream wait on the upload, orders it). Not when ne's
 * value is in host memory (a download): a device kernel reads such a value (a host-memory argument) on
 * the host when it is enqueued, so it waits for the download's event like any host node. */
static bool chained(const wf__run *r, const wf__nodeev *ne, int sidx)
{
    const wf__pnode *sn = &r->p->nodes[sidx];
    return ne->ev && ne->dev == &r->ctx->devices[sn->device] && sn->op != &wf__copy_op && sn->feed < 0 &&
           !r->ctx->devices[r->p->nodes[ne->idx].device].info.host_memory;
}

/* A node's event fired (any thread): its completion goes onto the inter-op queue. */
static void on_event(void *arg, wf_status *err)
{
    wf__nodeev *ne = arg;
    wf__run *r = ne->run;
    ne->err = err;
    wf__work w = {r, -1 - ne->idx};
    if (!wf__pool_push(r->ctx->pool, wf__exec_batch, &w, 1)) wf__exec_batch(r, &w.node, 1); /* no memory: complete it here */
}

/* The completion of an enqueued node: its error (naming it), its device times, then as any node. */
static void complete_async(wf__run *r, int idx, lstack *ls)
{
    const wf__pnode *pn = &r->p->nodes[idx];
    wf__nodeev *ne = &r->nev[idx];
    wf_status *err = ne->err;
    ne->err = NULL;
    if (err)
        record_error(r, wf__status_wrap(err, "node '%s' (%s) on %s", pn->name, pn->op->name, ne->dev->short_name));
    wf__defer_release(&ne->defer);
    if (r->t_start) {
        int64_t a = 0, b = 0, c = 0, d = 0;
        const wf_backend_vtable *vt = ne->dev->vt;
        wf_status *s = vt->event_times(ne->dev->dev, ne->ev, &c, &d);
        if (!s && ne->begin) s = vt->event_times(ne->dev->dev, ne->begin, &a, &b);
        else a = b = c;
        wf_status_free(s);
        r->t_dstart[idx] = ne->begin ? b : c;
        r->t_dend[idx] = d;
    }
    finish_node(r, idx, ls, true);
}

/* Runs node idx and pushes the successors it makes ready onto the thread's stack. */
static void exec_node(wf__run *r, int idx, lstack *ls)
{
    const wf__plan *p = r->p;
    const wf__pnode *pn = &p->nodes[idx];
    wf_tensor *in_buf[INLINE_ARGS], *out_buf[INLINE_ARGS];
    wf_tensor **in = in_buf, **out = out_buf;
    int64_t t_start = r->t_start ? wf__now_ns() : 0;
    wf__nodeev *ne = r->nev ? &r->nev[idx] : NULL;

    if (!atomic_load_explicit(&r->failed, memory_order_acquire)) {
        wf_status *s = NULL;
        if (pn->n_in > INLINE_ARGS) in = wf__calloc((size_t)pn->n_in, sizeof *in);
        if (pn->n_out > INLINE_ARGS) out = wf__calloc((size_t)pn->n_out, sizeof *out);
        if (!in || !out) {
            s = wf__status(WF_OUT_OF_MEMORY, "node '%s' (%s): out of memory for its argument list",
                           pn->name, pn->op->name);
        } else {
            memset(out, 0, sizeof *out * (size_t)pn->n_out);
            s = compute(r, idx, pn, in, out);
            if (s && ne && ne->ev) {
                drain_event(ne->dev, ne->stream);
                ne->dev->vt->event_release(ne->dev->dev, ne->ev);
                ne->ev = NULL;
            }
            if (!s && r->t_start) s = trace_node_done(r, idx, in, out);
        }
        if (s) {
            record_error(r, s);
            for (int j = 0; out && j < pn->n_out; j++) wf_tensor_free(out[j]);
        } else {
            for (int j = 0; j < pn->n_out; j++) {
                int slot = pn->out_slot[j];
                if (p->slot_uses[slot] == 0 && !p->slot_static[slot] && !(ne && ne->ev))
                    wf_tensor_free(out[j]); /* nobody reads it (an unused Split output) */
                else
                    r->slots[slot] = out[j];
                if (ne && ne->ev && ne->stream == WF_STREAM_COPY) r->slot_ev[slot] = ne->ev;
            }
        }
        if (in != in_buf) wf__free(in);
        if (out != out_buf) wf__free(out);
    }
    if (r->t_start) {
        r->t_start[idx] = t_start - r->t0;
        r->t_thread[idx] = thread_id();
    }
    if (ne && ne->ev) {
        ne->run = r;
        ne->idx = idx; /* before chained(), which reads it */
        /* enqueued: kernels after it on its device go now, everything else when its event fires */
        for (int k = pn->n_succ - 1; k >= 0; k--) {
            int sidx = pn->succ[k];
            if (chained(r, ne, sidx) && atomic_fetch_sub_explicit(&r->pending[sidx], 1, memory_order_acq_rel) == 1)
                lstack_push(r, ls, sidx);
        }
        const struct wf__device *d = ne->dev;
        wf_status *s = d->vt->event_notify(d->dev, ne->ev, on_event, ne);
        if (s) {
            /* no callback to be had: wait for it here */
            wf_status_free(s);
            ne->err = d->vt->event_sync(d->dev, ne->ev);
            complete_async(r, idx, ls);
        }
        return;
    }
    finish_node(r, idx, ls, false);
}

/* A node is done (run, failed, skipped, or its event fired): its inputs' uses, its times, and the
 * successors it makes ready (those made ready at enqueue excepted). */
static void finish_node(wf__run *r, int idx, lstack *ls, bool chained_done)
{
    const wf__plan *p = r->p;
    const wf__pnode *pn = &p->nodes[idx];
    for (int i = 0; i < pn->n_in; i++) {
        int s = pn->in_slot[i];
        if (s >= 0 && !p->slot_static[s] && atomic_fetch_sub_explicit(&r->uses[s], 1, memory_order_acq_rel) == 1) {
            wf_tensor_free(r->slots[s]);
            r->slots[s] = NULL;
        }
    }
    if (chained_done)
        for (int j = 0; j < pn->n_out; j++) {
            int slot = pn->out_slot[j];
            if (p->slot_uses[slot] == 0 && !p->slot_static[slot]) {
                wf_tensor_free(r->slots[slot]); /* nobody reads it: kept only until its writer finished */
                r->slots[slot] = NULL;
            }
        }
    if (r->t_start) r->t_end[idx] = wf__now_ns() - r->t0;
    const wf__nodeev *ne = chained_done ? &r->nev[idx] : NULL;
    /* Pushed last to first so they pop in plan order, which walks the plan's memory forwards. */
    for (int k = pn->n_succ - 1; k >= 0; k--) {
        int sidx = pn->succ[k];
        if (ne && chained(r, ne, sidx)) continue;
        if (atomic_fetch_sub_explicit(&r->pending[sidx], 1, memory_order_acq_rel) == 1) lstack_push(r, ls, sidx);
    }
    ls->finished++;
}

static void run_local(wf__run *r, const int *first, int n_first)
{
    lstack ls;
    ls.v = ls.inl;
    ls.n = 0;
    ls.cap = LOCAL_MAX;
    ls.finished = 0;
    wf__pool *pool = r->ctx->pool;
    bool share = wf__pool_workers(pool) > 0 && !r->p->serial;
    for (int i = n_first - 1; i >= 0; i--) lstack_push(r, &ls, first[i]);
    while (ls.n > 0) {
        /* LIFO keeps a producer's value hot in cache for its consumer. */
        int idx = ls.v[--ls.n];
        if (idx < 0) complete_async(r, -1 - idx, &ls);
        else exec_node(r, idx, &ls);
        if (share && ls.n > 1 && wf__pool_idle(pool) > 0) {
            /* Hand the oldest half to idle workers in one batch. */
            int give = ls.n / 2;
            wf__work wbuf[LOCAL_MAX];
            wf__work *w = give <= LOCAL_MAX ? wbuf : wf__malloc(sizeof *w * (size_t)give);
            if (w) {
                for (int i = 0; i < give; i++) w[i] = (wf__work){r, ls.v[i]};
                if (wf__pool_push(pool, wf__exec_batch, w, give)) {
                    memmove(ls.v, ls.v + give, sizeof *ls.v * (size_t)(ls.n - give));
                    ls.n -= give;
                }
                if (w != wbuf) wf__free(w);
            }
        }
    }
    if (ls.v != ls.inl) wf__free(ls.v);
    /* One atomic per batch instead of per node: the thread that brings the count to zero ends the
     * run. r may be freed by its caller as soon as done is visible, so nothing of it is touched after. */
    if (ls.finished && atomic_fetch_sub_explicit(&r->outstanding, ls.finished, memory_order_acq_rel) == ls.finished) {
        atomic_store(&r->done, 1);
        /* with streams, a run's last node may complete on a thread other than its caller's, which then
         * waits in wf__pool_help_until */
        wf__pool_notify_helpers(pool);
    }
}

void wf__exec_batch(wf__run *run, const int *nodes, int n) { run_local(run, nodes, n); }

static bool is_host(const struct wf__device *d) { return d->info.host_memory; }

/* The trace's streams, dependencies (the reverse of the plan's successor lists) and value lifetimes. */
static bool trace_links(const wf__run *r, wf_trace *t)
{
    const wf__plan *p = r->p;
    int n = p->n_nodes, total = 0;
    for (int i = 0; i < n; i++) total += p->nodes[i].n_succ;
    t->deps = wf__malloc(sizeof *t->deps * (size_t)(total ? total : 1));
    int *fill = wf__calloc((size_t)(n ? n : 1), sizeof *fill);
    if (!t->deps || !fill) {
        wf__free(fill);
        return false;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p->nodes[i].n_succ; k++) t->ev[p->nodes[i].succ[k]].n_deps++;
    for (int i = 0, off = 0; i < n; off += t->ev[i].n_deps, i++) t->ev[i].deps = t->deps + off;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p->nodes[i].n_succ; k++) {
            int sidx = p->nodes[i].succ[k];
            ((int *)t->ev[sidx].deps)[fill[sidx]++] = i;
        }
    wf__free(fill);
    for (int i = 0; i < n; i++) {
        const wf__pnode *pn = &p->nodes[i];
        wf_trace_event *e = &t->ev[i];
        e->out_bytes = r->t_out_bytes[i];
        e->stream = e->is_copy ? WF_STREAM_COPY : WF_STREAM_COMPUTE;
        e->stream_device = e->device_index;
        if (e->is_copy && e->n_deps == 1 && is_host(&r->ctx->devices[pn->device]))
            e->stream_device = p->nodes[e->deps[0]].device;
        /* outputs are released when their last reader ends, except those alive for the whole run */
        bool kept = false;
        for (int j = 0; j < pn->n_out; j++) {
            int slot = pn->out_slot[j];
            kept |= p->slot_static[slot] != 0;
            for (int f = 0; f < p->n_fetches; f++) kept |= p->fetch_slot[f] == slot;
        }
        e->release_ns = kept ? -1 : e->end_ns;
        for (int k = 0; !kept && k < pn->n_succ; k++)
            if (r->t_end[pn->succ[k]] > e->release_ns) e->release_ns = r->t_end[pn->succ[k]];
    }
    return true;
}

static wf_trace *make_trace(const wf__run *r)
{
    const wf__plan *p = r->p;
    size_t chars = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const wf__pnode *pn = &p->nodes[i];
        chars += strlen(pn->name) + strlen(pn->op->name) + 2 + (pn->fused_names ? strlen(pn->fused_names) + 1 : 0);
        chars += strlen(r->ctx->devices[pn->device].name) + 1;
        chars += strlen(r->ctx->devices[pn->device].short_name) + 1;
        chars += (r->t_shapes[i] ? strlen(r->t_shapes[i]) : 0) + 1;
        chars += (pn->reason ? strlen(pn->reason) : 0) + 1;
    }
    wf_trace *t = wf__calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ev = wf__calloc((size_t)(p->n_nodes ? p->n_nodes : 1), sizeof *t->ev);
    t->strings = wf__malloc(chars + 1);
    if (!t->ev || !t->strings) {
        wf_trace_free(t);
        return NULL;
    }
    char *s = t->strings;
    for (int i = 0; i < p->n_nodes; i++) {
        const wf__pnode *pn = &p->nodes[i];
        wf_trace_event *e = &t->ev[t->n++];
        e->node = s;
        s += sprintf(s, "%s", pn->name) + 1;
        e->op = s;
        s += sprintf(s, "%s%s%s", pn->op->name, pn->fused_names ? "+" : "",
                     pn->fused_names ? pn->fused_names : "") + 1;
        e->device = s;
        s += sprintf(s, "%s", r->ctx->devices[pn->device].name) + 1;
        e->thread = r->t_thread[i];
        e->start_ns = r->t_start[i];
        e->end_ns = r->t_end[i];
        e->device_short = s;
        s += sprintf(s, "%s", r->ctx->devices[pn->device].short_name) + 1;
        e->device_index = pn->device;
        e->shapes = s;
        s += sprintf(s, "%s", r->t_shapes[i] ? r->t_shapes[i] : "") + 1;
        e->reason = s;
        s += sprintf(s, "%s", pn->reason ? pn->reason : "") + 1;
        e->bytes = r->t_bytes[i];
        e->is_copy = pn->op == &wf__copy_op;
        e->enqueue_only = r->t_enqueue[i];
        e->device_start_ns = r->t_dstart && r->nev[i].ev ? r->t_dstart[i] : 0;
        e->device_end_ns = r->t_dend && r->nev[i].ev ? r->t_dend[i] : 0;
        if (e->end_ns > t->wall_ns) t->wall_ns = e->end_ns;
    }
    return trace_links(r, t) ? t : (wf_trace_free(t), NULL);
}

/* Whether two host tensors share bytes (NULL or empty ones share none). */
static bool bytes_overlap(const wf_tensor *x, const wf_tensor *t)
{
    const char *a = x && !x->device ? x->data : NULL, *b = t->data;
    return a && b && x->bytes && t->bytes && a < b + t->bytes && b < a + x->bytes;
}

wf_status *wf__execute(wf_context *ctx, const wf__plan *p, const wf_feed *feeds, wf_tensor **outputs,
                       wf_tensor *const *into, wf_trace **trace)
{
    wf__run r = {.ctx = ctx, .p = p, .feeds = feeds};
    size_t n = (size_t)p->n_nodes, ns = (size_t)p->n_slots;
    for (int i = 0; into && i < p->n_fetches; i++) {
        const wf_tensor *t = into[i];
        if (!t || t->device || t->dtype == WF_STRING || !t->data || p->fetch_slot[i] < 0 ||
            p->slot_static[p->fetch_slot[i]])
            continue;
        /* never over a fed value (the caller's tensor may share its bytes): kernels still read it */
        bool overlaps = false;
        for (int f = 0; f < p->n_feeds && !overlaps; f++) overlaps = bytes_overlap(feeds[f].tensor, t);
        /* nor over another fetch's (both would be written) */
        for (int j = 0; j < i && !overlaps; j++)
            overlaps = r.slot_into && p->fetch_slot[j] >= 0 && bytes_overlap(r.slot_into[p->fetch_slot[j]], t);
        if (overlaps) continue;
        if (!r.slot_into && !(r.slot_into = wf__calloc(ns ? ns : 1, sizeof *r.slot_into))) break; /* then no into */
        if (!r.slot_into[p->fetch_slot[i]]) r.slot_into[p->fetch_slot[i]] = into[i];
    }
    r.slots = wf__calloc(ns ? ns : 1, sizeof *r.slots);
    r.uses = wf__malloc((ns ? ns : 1) * sizeof *r.uses);
    r.pending = wf__malloc((n ? n : 1) * sizeof *r.pending);
    if (trace) {
        r.t_start = wf__calloc(n ? n : 1, sizeof *r.t_start);
        r.t_end = wf__calloc(n ? n : 1, sizeof *r.t_end);
        r.t_thread = wf__calloc(n ? n : 1, sizeof *r.t_thread);
        r.t_bytes = wf__calloc(n ? n : 1, sizeof *r.t_bytes);
        r.t_shapes = wf__calloc(n ? n : 1, sizeof *r.t_shapes);
        r.t_enqueue = wf__calloc(n ? n : 1, sizeof *r.t_enqueue);
        r.t_out_bytes = wf__calloc(n ? n : 1, sizeof *r.t_out_bytes);
    }
    bool streams = false;
    for (int i = 0; i < ctx->n_devices; i++) streams |= has_streams(&ctx->devices[i]);
    if (streams) {
        r.nev = wf__calloc(n ? n : 1, sizeof *r.nev);
        r.slot_ev = wf__calloc(ns ? ns : 1, sizeof *r.slot_ev);
        if (trace) {
            r.t_dstart = wf__calloc(n ? n : 1, sizeof *r.t_dstart);
            r.t_dend = wf__calloc(n ? n : 1, sizeof *r.t_dend);
        }
    }
    wf_status *s = wf__arena_acquire(ctx, p, &r.arena);
    if (wf_status_code(s) == WF_OUT_OF_MEMORY) {
        /* An arena that does not fit (a memory limit, a hostile shape): this run allocates each output
         * as it is produced and frees it at its last use, so it needs only what is live at once, and an
         * output that cannot fit fails naming its node. */
        wf_status_free(s);
        s = NULL;
    }
    if (s) goto done;
    if (!r.slots || !r.uses || !r.pending || (streams && (!r.nev || !r.slot_ev || (trace && (!r.t_dstart || !r.t_dend)))) ||
        (trace && (!r.t_start || !r.t_end || !r.t_thread || !r.t_bytes || !r.t_shapes || !r.t_enqueue || !r.t_out_bytes))) {
        s = wf__oom("the run's state", (n + ns) * 16);
        goto done;
    }
    for (size_t i = 0; i < ns; i++) atomic_init(&r.uses[i], p->slot_uses[i]);
    for (size_t i = 0; i < n; i++) {
        const wf__pnode *pn = &p->nodes[i];
        atomic_init(&r.pending[i], pn->pending_run);
        if (!pn->bound) continue;
        r.slots[pn->out_slot[0]] = wf_tensor_ref((wf_tensor *)pn->bound);
        /* traced as an event at the run's start that took no time, on the caller's thread */
        if (trace) {
            r.t_thread[i] = thread_id();
            wf_status_free(trace_node_done(&r, (int)i, NULL, &r.slots[pn->out_slot[0]]));
        }
    }
    atomic_init(&r.outstanding, p->n_nodes - p->n_bound);
    atomic_init(&r.done, p->n_nodes == p->n_bound);
    atomic_init(&r.failed, 0);
    atomic_init(&r.error, NULL);
    r.t0 = wf__now_ns();
    if (p->n_nodes > p->n_bound) {
        run_local(&r, p->roots, p->n_roots);
        if (!atomic_load_explicit(&r.done, memory_order_acquire)) wf__pool_help_until(ctx->pool, wf__exec_batch, &r.done);
    }
    s = atomic_load(&r.error);
    if (!s) {
        /* fetched values in an arena are copied out: the next run overwrites the arena */
        for (int i = 0; i < p->n_fetches && !s; i++) {
            wf_tensor *t = r.slots[p->fetch_slot[i]];
            if (!wf__tensor_in_arena(t)) outputs[i] = wf_tensor_ref(t);
            else if ((s = wf__arena_copy_out(t, &outputs[i])))
                for (int j = 0; j < i; j++) wf_tensor_free(outputs[j]);
        }
        if (!s && trace && !(*trace = make_trace(&r))) {
            for (int i = 0; i < p->n_fetches; i++) wf_tensor_free(outputs[i]);
            s = wf__oom("the run's trace", n * sizeof(wf_trace_event));
        }
    }
done:
    /* every node has completed: its events can go */
    for (size_t i = 0; r.nev && i < n; i++) {
        wf__nodeev *ne = &r.nev[i];
        if (ne->ev) ne->dev->vt->event_release(ne->dev->dev, ne->ev);
        if (ne->begin) ne->dev->vt->event_release(ne->dev->dev, ne->begin);
        wf__defer_release(&ne->defer);
        wf_status_free(ne->err);
    }
    wf__free(r.nev);
    wf__free(r.slot_ev);
    wf__free(r.slot_into);
    wf__free(r.t_dstart);
    wf__free(r.t_dend);
    if (r.slots)
        for (size_t i = 0; i < ns; i++) wf_tensor_free(r.slots[i]);
    wf__free(r.slots);
    wf__arena_release(p, r.arena); /* after the slots: nothing of this run points into it any more */
    wf__free((void *)r.uses);
    wf__free((void *)r.pending);
    wf__free(r.t_start);
    wf__free(r.t_end);
    wf__free(r.t_thread);
    wf__free(r.t_bytes);
    if (r.t_shapes)
        for (size_t i = 0; i < n; i++) wf__free(r.t_shapes[i]);
    wf__free(r.t_shapes);
    wf__free(r.t_enqueue);
    wf__free(r.t_out_bytes);
    return s;
}

int wf_trace_num_events(const wf_trace *t) { return t ? t->n : 0; }
wf_trace_event wf_trace_event_at(const wf_trace *t, int i) { return t->ev[i]; }
int64_t wf_trace_wall_ns(const wf_trace *t) { return t ? t->wall_ns : 0; }

void wf_trace_free(wf_trace *t)
{
    if (!t) return;
    wf__free(t->ev);
    wf__free(t->strings);
    wf__free(t->deps);
    wf__free(t);
}
