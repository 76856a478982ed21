/*
 * Arena tensors and the session's weights (see arena.h): the device half of the static memory plan,
 * used by the kernel context and the device kernels. The layout itself is lowering's
 * (src/lower/memplan.c).
 */
#include <pthread.h>
#include <stdio.h>

#include "device/arena.h"
#include "device/device.h"

static void arena_noop_release(wf_tensor *t) { (void)t; }

bool wf__tensor_in_arena(const wf_tensor *t)
{
    if (t && t->base) t = t->base;
    return t && t->dev_release == arena_noop_release;
}

wf_status *wf__arena_tensor(const struct wf__device *d, const wf__arena_dev *a, int64_t off, wf_dtype dtype,
                            int rank, const int64_t *dims, wf_tensor **out)
{
    wf_tensor *t;
    WF__TRY(wf__tensor_alloc_header(dtype, rank, dims, &t));
    if (a->host) {
        t->data = a->host + off;
    } else {
        t->dev_chunk = a->chunk;
        t->dev_offset = a->off + (size_t)off;
        t->device = d;
    }
    t->dev_release = arena_noop_release;
    *out = t;
    return NULL;
}

/* Whether t's bytes start at the slot's: a comparable address for host and device tensors. A view (t->base)
 * may be at its slot's bytes too: the plan gave a view's output its input's buffer (WF__K_INPLACE), which it
 * does only where the view's node is that value's last reader; slots of different buffers never share an
 * offset, so the address alone says so. */
static bool same_bytes(const wf_tensor *t, const wf__arena_dev *a, int64_t off)
{
    if (a->host) return t->data == a->host + off;
    return t->dev_chunk == a->chunk && t->dev_offset == a->off + (size_t)off;
}

bool wf__arena_needs_fix(const wf__kmem *m, int j, const wf_tensor *t)
{
    if (!wf__tensor_in_arena(t)) return false;
    int64_t off = m->slot_off[m->out_slot[j]];
    return !(off >= 0 && same_bytes(t, m->arena, off));
}

wf_status *wf__arena_fix_output(const struct wf__device *d, const wf__kmem *m, int j, wf_tensor **out)
{
    wf_tensor *t = *out;
    if (!wf__arena_needs_fix(m, j, t)) return NULL;
    int sl = m->out_slot[j];
    int64_t off = m->slot_off[sl];
    wf_tensor *c;
    if (off >= 0 && t->bytes <= m->slot_cap[sl]) {
        WF__TRY(wf__arena_tensor(d, m->arena, off, t->dtype, t->rank, t->dims, &c));
    } else {
        if (d) WF__TRY(wf__device_tensor_alloc(d, t->dtype, t->rank, t->dims, &c));
        else WF__TRY(wf__tensor_alloc(t->dtype, t->rank, t->dims, "a copy of a view", &c));
        atomic_fetch_add(m->fallbacks, 1);
    }
    wf_status *s = wf__tensor_copy_into(c, t);
    if (s) {
        wf_tensor_free(c);
        return s;
    }
    wf_tensor_free(t);
    *out = c;
    return NULL;
}

wf_status *wf__arena_copy_out(const wf_tensor *t, wf_tensor **out)
{
    if (t->device) return wf__tensor_move(NULL, t, out);
    wf_tensor *c;
    WF__TRY(wf__tensor_alloc(t->dtype, t->rank, t->dims, "a fetched value", &c));
    if (t->bytes) memcpy(c->data, t->data, t->bytes);
    *out = c;
    return NULL;
}

/* ---- weights ---- */

typedef struct wentry {
    wf_tensor *host;             /* a reference: the key stays valid */
    const struct wf__device *dev; /* NULL: tracked, no device copy yet */
    wf_tensor *copy;
    wf_event *up;                /* the upload of copy while it may still be in flight (dev's), else NULL */
} wentry;

struct wf__weights {
    pthread_mutex_t mu;
    wentry *e;
    int n, cap;
};

wf_status *wf__weights_new(wf__weights **out)
{
    wf__weights *w = wf__calloc(1, sizeof *w);
    if (!w) return wf__oom("the session's weights", sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    *out = w;
    return NULL;
}

/* Waits for an entry's upload, if any: its host bytes are read until it completes. */
static void upload_done(wentry *e)
{
    if (!e->up) return;
    wf_status_free(e->dev->vt->event_sync(e->dev->dev, e->up));
    e->dev->vt->event_release(e->dev->dev, e->up);
    e->up = NULL;
}

void wf__weights_free(wf__weights *w)
{
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        upload_done(&w->e[i]);
        wf_tensor_free(w->e[i].host);
        wf_tensor_free(w->e[i].copy);
    }
    wf__free(w->e);
    pthread_mutex_destroy(&w->mu);
    wf__free(w);
}

static wentry *add_entry(wf__weights *w, const wf_tensor *h, const struct wf__device *d)
{
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 32;
        wentry *e = wf__realloc(w->e, sizeof *e * (size_t)w->cap, sizeof *e * (size_t)cap);
        if (!e) return NULL;
        w->e = e;
        w->cap = cap;
    }
    wentry *e = &w->e[w->n++];
    e->host = wf_tensor_ref((wf_tensor *)h);
    e->dev = d;
    e->copy = NULL;
    e->up = NULL;
    return e;
}

/* The first upload of h to d. On a device with streams and events it is asynchronous: a transfer on
 * the copy stream that the compute stream waits for, so the first run does not block on it. Every
 * reader of the copy is ordered after it: kernels on the compute stream (enqueued after the wait),
 * downloads on the copy stream (after the upload, in stream order), synchronous copies (after all
 * work). The host bytes stay alive (the entry holds h) until the event is seen complete. */
static wf_status *upload(wentry *e, const struct wf__device *d, const wf_tensor *h)
{
    if (!h->bytes || !WF_BACKEND_HAS_STREAMS(d->vt)) return wf__tensor_move(d, h, &e->copy);
    wf_tensor *t;
    WF__TRY(wf__device_tensor_alloc(d, h->dtype, h->rank, h->dims, &t));
    wf_event *ev = NULL;
    wf_status *s = d->vt->copy_to_device_async(d->dev, t->dev_chunk, t->dev_offset, h->data, h->bytes, &ev);
    if (!s) {
        s = d->vt->stream_wait(d->dev, WF_STREAM_COMPUTE, ev);
        e->up = ev;
        if (s) upload_done(e);
    }
    if (s) {
        wf_tensor_free(t);
        return s;
    }
    e->copy = t;
    return NULL;
}

/* Caller holds mu. */
static wf_status *get_locked(wf__weights *w, const struct wf__device *d, const wf_tensor *h, wf_tensor **out)
{
    wentry *e = NULL;
    for (int i = 0; i < w->n && !e; i++)
        if (w->e[i].host == h && w->e[i].dev == d) e = &w->e[i];
    if (!e && !(e = add_entry(w, h, d))) return wf__oom("the session's weights", sizeof *e * (size_t)w->n);
    if (e->up) { /* release a completed upload's event */
        int done = 0;
        wf_status_free(d->vt->event_query(d->dev, e->up, &done));
        if (done) upload_done(e);
    }
    if (!e->copy) {
        wf_status *s = upload(e, d, h);
        if (s) {
            e->copy = NULL;
            return s;
        }
    }
    *out = wf_tensor_ref(e->copy);
    return NULL;
}

wf_status *wf__weights_get(wf__weights *w, const struct wf__device *d, const wf_tensor *h, wf_tensor **out)
{
    pthread_mutex_lock(&w->mu);
    wf_status *s = get_locked(w, d, h, out);
    pthread_mutex_unlock(&w->mu);
    return s;
}

wf_status *wf__weights_track(wf__weights *w, const wf_tensor *h)
{
    if (!w || !h || h->device) return NULL;
    pthread_mutex_lock(&w->mu);
    bool have = false;
    for (int i = 0; i < w->n && !have; i++) have = w->e[i].host == h && !w->e[i].dev;
    wf_status *s = have || add_entry(w, h, NULL) ? NULL : wf__oom("the session's weights", sizeof(wentry));
    pthread_mutex_unlock(&w->mu);
    return s;
}

void wf__weights_forget(wf__weights *w, const wf_tensor *h)
{
    if (!w || !h) return;
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < w->n;) {
        if (w->e[i].host == h) {
            upload_done(&w->e[i]);
            wf_tensor_free(w->e[i].host);
            wf_tensor_free(w->e[i].copy);
            w->e[i] = w->e[--w->n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&w->mu);
}

bool wf__weights_get_tracked(wf__weights *w, const struct wf__device *d, const wf_tensor *h, wf_tensor **out,
                             wf_status **err)
{
    *err = NULL;
    if (!w || !d || h->device) return false;
    pthread_mutex_lock(&w->mu);
    bool tracked = false;
    for (int i = 0; i < w->n && !tracked; i++) tracked = w->e[i].host == h && !w->e[i].dev;
    if (tracked) *err = get_locked(w, d, h, out);
    pthread_mutex_unlock(&w->mu);
    return tracked;
}
