/*
 * A test backend, "TESTDEV": two devices whose memory is host memory behind the device interface, with
 * a few kernels written here (Add, Mul, Relu, Identity, MatMul for f32). It exercises everything the
 * core does for a real accelerator (plugin loading, device memory, copies, kernel lookup) without one.
 *
 * Streams and events are real: each device has a compute and a copy stream, each a worker thread with
 * a queue of commands, so a transfer overlaps a kernel as on a GPU. A kernel allocates its outputs on
 * the caller's thread and enqueues its arithmetic on the compute stream; Sqrt checks its input on the
 * stream and reports a negative value through the next event (an error raised asynchronously).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h" /* k->device->dev, as the OpenCL plugin does */

static const wf_host_api *H;

/* An event: refcounted by the stream that will complete it and by its holder. */
struct wf_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int refs;
    int done;
    int64_t t0, t1;
    wf_status *err;
    void (*fn)(void *, wf_status *);
    void *arg;
};

enum { CMD_RUN, CMD_MARK, CMD_WAIT, CMD_COPY };

typedef struct tcmd {
    struct tcmd *next;
    int kind;
    wf_status *(*fn)(void *arg); /* CMD_RUN; arg freed with H->free after */
    void *arg;
    wf_event *ev;                /* CMD_MARK, CMD_COPY: completed; CMD_WAIT: waited for */
    void *dst;
    const void *src;
    size_t n;
} tcmd;

typedef struct tstream {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tcmd *head, *tail;
    int busy;        /* a command is running */
    int stop;
    wf_status *err;  /* the first error since the last event, reported by the next one */
} tstream;

typedef struct tdev {
    int index;
    int v1; /* opened by a context that loaded the plugin with WEFT_TESTDEV_V1=1 */
    tstream st[WF_STREAM_COUNT];
} tdev;

static wf_event *ev_new(void)
{
    wf_event *e = H->malloc(sizeof *e);
    if (!e) return NULL;
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    atomic_init(&e->refs, 2); /* the stream's and the caller's */
    return e;
}

static void ev_unref(wf_event *e)
{
    if (atomic_fetch_sub(&e->refs, 1) != 1) return;
    if (e->err) H->status_free(e->err);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    H->free(e);
}

static void ev_complete(wf_event *e, int64_t t0, int64_t t1, wf_status *err)
{
    pthread_mutex_lock(&e->mu);
    e->t0 = t0;
    e->t1 = t1;
    e->done = 1;
    void (*fn)(void *, wf_status *) = e->fn;
    void *arg = e->arg;
    e->fn = NULL;
    /* the callback gets its own copy of the error; the event keeps one for event_query / event_sync */
    wf_status *mine = err && fn ? H->status(WF_INTERNAL, "%s", H->status_message(err)) : NULL;
    e->err = err;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (fn) fn(arg, mine);
    ev_unref(e);
}

static void *stream_main(void *arg)
{
    tstream *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        tcmd *c = q->head;
        if (!c) {
            if (q->stop) break;
            pthread_cond_wait(&q->cv, &q->mu);
            continue;
        }
        q->head = c->next;
        if (!q->head) q->tail = NULL;
        q->busy = 1;
        wf_status *err = NULL;
        if (c->kind == CMD_MARK) {
            err = q->err;
            q->err = NULL;
        }
        pthread_mutex_unlock(&q->mu);
        int64_t t0 = H->now_ns();
        switch (c->kind) {
        case CMD_RUN: err = c->fn(c->arg); H->free(c->arg); break;
        case CMD_MARK: ev_complete(c->ev, t0, t0, err); err = NULL; break;
        case CMD_WAIT:
            pthread_mutex_lock(&c->ev->mu);
            while (!c->ev->done) pthread_cond_wait(&c->ev->cv, &c->ev->mu);
            pthread_mutex_unlock(&c->ev->mu);
            ev_unref(c->ev);
            break;
        case CMD_COPY:
            memcpy(c->dst, c->src, c->n);
            ev_complete(c->ev, t0, H->now_ns(), NULL);
            break;
        }
        H->free(c);
        pthread_mutex_lock(&q->mu);
        if (err) {
            if (!q->err) q->err = err;
            else H->status_free(err);
        }
        q->busy = 0;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void stream_push(tstream *q, tcmd *c)
{
    c->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = c;
    else q->head = c;
    q->tail = c;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static tcmd *cmd_new(int kind)
{
    tcmd *c = H->malloc(sizeof *c);
    if (c) {
        memset(c, 0, sizeof *c);
        c->kind = kind;
    }
    return c;
}

/* Waits until the stream has run everything enqueued; returns (and clears) its pending error. */
static wf_status *stream_drain(tstream *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->head || q->busy) pthread_cond_wait(&q->cv, &q->mu);
    wf_status *err = q->err;
    q->err = NULL;
    pthread_mutex_unlock(&q->mu);
    return err;
}

/* WEFT_TESTDEV_V1=1 at load: the backend of before streams (a vtable without the stream slots nor a
 * synchronize entry, kernels computed when called), to test the core's path for such plugins. It is a
 * property of the context that loaded it (its backend handle is &g_v1_backend), not of the process:
 * a context opened with it must not turn the devices of an earlier one into computing at enqueue
 * while their vtable has streams (a test of two devices then read a value before its upload). */
static int g_v1_backend;

/* Enqueues fn(arg) on the compute stream; arg (from H->malloc) is freed after it ran. */
static wf_status *launch(wf__kctx *k, wf_status *(*fn)(void *), void *arg)
{
    if (((tdev *)k->device->dev)->v1) {
        wf_status *e = fn(arg);
        H->free(arg);
        if (!e) return NULL;
        wf_status *s = H->kctx_fail(k, WF_INVALID_ARGUMENT, "%s", H->status_message(e));
        H->status_free(e);
        return s;
    }
    tdev *d = (tdev *)k->device->dev;
    tcmd *c = cmd_new(CMD_RUN);
    if (!c) {
        H->free(arg);
        return H->kctx_fail(k, WF_OUT_OF_MEMORY, "testdev: out of memory enqueueing a kernel");
    }
    c->fn = fn;
    c->arg = arg;
    stream_push(&d->st[WF_STREAM_COMPUTE], c);
    return NULL;
}

static int device_count(void *b) { return 2; }

static wf_status *device_info(void *b, int i, wf_backend_device_info *out)
{
    memset(out, 0, sizeof *out);
    strcpy(out->type, "TESTDEV");
    strcpy(out->description, i == 0 ? "weft test device (fast)" : "weft test device (slow)");
    out->compute_units = 4;
    out->memory_bytes = (uint64_t)1 << 30;
    out->peak_gflops = i == 0 ? 1000 : 10;
    out->mem_gbps = 100;
    out->link_gbps = 10;
    out->link_latency_us = 10;
    out->alignment = 256;
    return NULL;
}

static wf_status *device_open(void *b, int i, void **dev)
{
    tdev *d = H->malloc(sizeof *d);
    if (!d) return H->status(WF_OUT_OF_MEMORY, "testdev: out of memory");
    memset(d, 0, sizeof *d);
    d->index = i;
    d->v1 = b == &g_v1_backend;
    int started = 0;
    for (; started < WF_STREAM_COUNT; started++) {
        tstream *q = &d->st[started];
        pthread_mutex_init(&q->mu, NULL);
        pthread_cond_init(&q->cv, NULL);
        if (pthread_create(&q->thread, NULL, stream_main, q) != 0) break;
    }
    if (started < WF_STREAM_COUNT) {
        for (int j = 0; j <= started && j < WF_STREAM_COUNT; j++) {
            tstream *q = &d->st[j];
            if (j < started) {
                pthread_mutex_lock(&q->mu);
                q->stop = 1;
                pthread_cond_broadcast(&q->cv);
                pthread_mutex_unlock(&q->mu);
                pthread_join(q->thread, NULL);
            }
            pthread_mutex_destroy(&q->mu);
            pthread_cond_destroy(&q->cv);
        }
        H->free(d);
        return H->status(WF_UNAVAILABLE, "testdev: could not start the stream threads");
    }
    *dev = d;
    return NULL;
}

static void device_close(void *dev)
{
    tdev *d = dev;
    for (int j = 0; j < WF_STREAM_COUNT; j++) {
        tstream *q = &d->st[j];
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
        if (q->err) H->status_free(q->err);
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv);
    }
    H->free(d);
}
/* "Device" memory is host memory from the core's allocation funnel, so fault injection reaches it. */
static void *chunk_alloc(void *dev, size_t bytes) { return H->malloc(bytes); }
static void chunk_free(void *dev, void *chunk) { H->free(chunk); }

/* The synchronous copies come after everything enqueued before them (errors found there stay for the
 * next event). */
static void drain_all(tdev *d)
{
    for (int j = 0; j < WF_STREAM_COUNT; j++) {
        wf_status *err = stream_drain(&d->st[j]);
        if (err) {
            pthread_mutex_lock(&d->st[j].mu);
            if (!d->st[j].err) d->st[j].err = err;
            else H->status_free(err);
            pthread_mutex_unlock(&d->st[j].mu);
        }
    }
}

/* WEFT_TESTDEV_NO_SYNC_COPY=1 (read at each call, for tests): a synchronous copy fails, so that a test
 * can show that a run's transfers all go through the streams. */
static wf_status *sync_copy_forbidden(const char *what, size_t n)
{
    const char *v = getenv("WEFT_TESTDEV_NO_SYNC_COPY");
    if (!v || strcmp(v, "1") != 0) return NULL;
    return H->status(WF_FAILED_PRECONDITION, "testdev: synchronous %s of %zu bytes (WEFT_TESTDEV_NO_SYNC_COPY=1)",
                     what, n);
}

static wf_status *copy_to_device(void *dev, void *chunk, size_t off, const void *src, size_t n)
{
    wf_status *no = sync_copy_forbidden("upload", n);
    if (no) return no;
    drain_all(dev);
    memcpy((char *)chunk + off, src, n);
    return NULL;
}

static wf_status *copy_to_host(void *dev, void *dst, const void *chunk, size_t off, size_t n)
{
    wf_status *no = sync_copy_forbidden("download", n);
    if (no) return no;
    drain_all(dev);
    memcpy(dst, (const char *)chunk + off, n);
    return NULL;
}

static wf_status *synchronize(void *dev)
{
    tdev *d = dev;
    wf_status *s = NULL;
    for (int j = 0; j < WF_STREAM_COUNT; j++) {
        wf_status *e = stream_drain(&d->st[j]);
        if (e && !s) s = e;
        else if (e) H->status_free(e);
    }
    return s;
}

/* ---- streams and events ---- */

static wf_status *event_record(void *dev, int stream, wf_event **ev)
{
    tdev *d = dev;
    if (stream < 0 || stream >= WF_STREAM_COUNT) return H->status(WF_INVALID_ARGUMENT, "testdev: no stream %d", stream);
    wf_event *e = ev_new();
    tcmd *c = e ? cmd_new(CMD_MARK) : NULL;
    if (!c) {
        if (e) {
            ev_unref(e);
            ev_unref(e);
        }
        return H->status(WF_OUT_OF_MEMORY, "testdev: out of memory recording an event");
    }
    c->ev = e;
    stream_push(&d->st[stream], c);
    *ev = e;
    return NULL;
}

static wf_status *stream_wait(void *dev, int stream, wf_event *ev)
{
    tdev *d = dev;
    tcmd *c = cmd_new(CMD_WAIT);
    if (!c) return H->status(WF_OUT_OF_MEMORY, "testdev: out of memory enqueueing a wait");
    atomic_fetch_add(&ev->refs, 1);
    c->ev = ev;
    stream_push(&d->st[stream], c);
    return NULL;
}

static wf_status *event_query(void *dev, wf_event *ev, int *done)
{
    pthread_mutex_lock(&ev->mu);
    *done = ev->done;
    wf_status *s = ev->done && ev->err ? H->status(WF_INTERNAL, "%s", H->status_message(ev->err)) : NULL;
    pthread_mutex_unlock(&ev->mu);
    return s;
}

static wf_status *event_sync(void *dev, wf_event *ev)
{
    pthread_mutex_lock(&ev->mu);
    while (!ev->done) pthread_cond_wait(&ev->cv, &ev->mu);
    wf_status *s = ev->err ? H->status(WF_INTERNAL, "%s", H->status_message(ev->err)) : NULL;
    pthread_mutex_unlock(&ev->mu);
    return s;
}

static wf_status *event_notify(void *dev, wf_event *ev, void (*fn)(void *, wf_status *), void *arg)
{
    pthread_mutex_lock(&ev->mu);
    if (!ev->done) {
        ev->fn = fn;
        ev->arg = arg;
        pthread_mutex_unlock(&ev->mu);
        return NULL;
    }
    wf_status *err = ev->err ? H->status(WF_INTERNAL, "%s", H->status_message(ev->err)) : NULL;
    pthread_mutex_unlock(&ev->mu);
    fn(arg, err);
    return NULL;
}

static wf_status *event_times(void *dev, wf_event *ev, int64_t *t0, int64_t *t1)
{
    pthread_mutex_lock(&ev->mu);
    int done = ev->done;
    *t0 = ev->t0;
    *t1 = ev->t1;
    pthread_mutex_unlock(&ev->mu);
    return done ? NULL : H->status(WF_FAILED_PRECONDITION, "testdev: times of an event that has not completed");
}

static void event_release(void *dev, wf_event *ev) { ev_unref(ev); }

static wf_status *copy_async(tdev *d, void *dst, const void *src, size_t n, wf_event **ev)
{
    wf_event *e = ev_new();
    tcmd *c = e ? cmd_new(CMD_COPY) : NULL;
    if (!c) {
        if (e) {
            ev_unref(e);
            ev_unref(e);
        }
        return H->status(WF_OUT_OF_MEMORY, "testdev: out of memory enqueueing a copy");
    }
    c->ev = e;
    c->dst = dst;
    c->src = src;
    c->n = n;
    stream_push(&d->st[WF_STREAM_COPY], c);
    *ev = e;
    return NULL;
}

static wf_status *copy_to_device_async(void *dev, void *chunk, size_t off, const void *src, size_t n, wf_event **ev)
{
    return copy_async(dev, (char *)chunk + off, src, n, ev);
}

static wf_status *copy_to_host_async(void *dev, void *dst, const void *chunk, size_t off, size_t n, wf_event **ev)
{
    return copy_async(dev, dst, (const char *)chunk + off, n, ev);
}

static float *fptr(const wf_tensor *t) { return (float *)((char *)t->dev_chunk + t->dev_offset); }

/* The arguments of a kernel's arithmetic, captured when it is enqueued (the core keeps the buffers
 * alive until the node's event has completed). */
typedef struct kargs {
    int op;
    const float *x, *y;
    float *z;
    int64_t nx, ny, n, m, kk, nn;
} kargs;

static kargs *kargs_new(wf__kctx *k)
{
    kargs *a = H->malloc(sizeof *a);
    if (a) memset(a, 0, sizeof *a);
    return a;
}

static wf_status *run_binary(void *arg)
{
    kargs *a = arg;
    for (int64_t i = 0; i < a->n; i++) {
        float u = a->x[a->nx == 1 ? 0 : i], v = a->y[a->ny == 1 ? 0 : i];
        a->z[i] = a->op == 0 ? u + v : u * v;
    }
    return NULL;
}

static wf_status *k_binary(wf__kctx *k, int op)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    if (a->size != b->size && b->size != 1 && a->size != 1)
        return H->kctx_fail(k, WF_UNIMPLEMENTED, "testdev broadcasts only scalars");
    const wf_tensor *big = a->size >= b->size ? a : b;
    wf_tensor *o;
    wf_status *s = H->kctx_output(k, 0, WF_F32, big->rank, big->dims, &o);
    if (s) return s;
    kargs *g = kargs_new(k);
    if (!g) return H->kctx_fail(k, WF_OUT_OF_MEMORY, "testdev: out of memory");
    *g = (kargs){.op = op, .x = fptr(a), .y = fptr(b), .z = fptr(o), .nx = a->size, .ny = b->size, .n = o->size};
    return launch(k, run_binary, g);
}

static wf_status *k_add(wf__kctx *k) { return k_binary(k, 0); }
static wf_status *k_mul(wf__kctx *k) { return k_binary(k, 1); }

static wf_status *run_unary(void *arg)
{
    kargs *a = arg;
    for (int64_t i = 0; i < a->n; i++) {
        float x = a->x[i];
        if (a->op == 0) {
            a->z[i] = x > 0 ? x : 0;
        } else {
            /* a check made on the device: reported through the node's event, not by the enqueue */
            if (x < 0)
                return H->status(WF_INVALID_ARGUMENT, "testdev Sqrt: negative input %g at index %lld (found on the device)",
                                 (double)x, (long long)i);
            float r = x, prev = 0;
            for (int it = 0; it < 64 && r != prev; it++) { /* Newton: the plugin links no libm */
                prev = r;
                r = r > 0 ? 0.5f * (r + x / r) : 0;
            }
            a->z[i] = r;
        }
    }
    return NULL;
}

static wf_status *k_unary(wf__kctx *k, int op)
{
    wf_tensor *o;
    /* in place where the core allows it (the host API's output reuse) */
    wf_status *s = H->kctx_output_reuse(k, 0, 0, WF_F32, k->in[0]->rank, k->in[0]->dims, &o, NULL);
    if (s) return s;
    kargs *g = kargs_new(k);
    if (!g) return H->kctx_fail(k, WF_OUT_OF_MEMORY, "testdev: out of memory");
    g->op = op;
    g->x = fptr(k->in[0]);
    g->z = fptr(o);
    g->n = o->size;
    return launch(k, run_unary, g);
}

static wf_status *k_relu(wf__kctx *k) { return k_unary(k, 0); }
static wf_status *k_sqrt(wf__kctx *k) { return k_unary(k, 1); }

static wf_status *k_identity(wf__kctx *k) { return H->kctx_output_view(k, 0, 0, k->in[0]->rank, k->in[0]->dims); }

static wf_status *run_matmul(void *arg)
{
    kargs *a = arg;
    for (int64_t i = 0; i < a->m; i++)
        for (int64_t j = 0; j < a->nn; j++) {
            float acc = 0;
            for (int64_t p = 0; p < a->kk; p++) acc += a->x[i * a->kk + p] * a->y[p * a->nn + j];
            a->z[i * a->nn + j] = acc;
        }
    return NULL;
}

static wf_status *k_matmul(wf__kctx *k)
{
    const wf_tensor *a = k->in[0], *b = k->in[1];
    if (a->rank != 2 || b->rank != 2) return H->kctx_fail(k, WF_UNIMPLEMENTED, "testdev MatMul is 2-D only");
    int64_t m = a->dims[0], kk = a->dims[1], n = b->dims[1], dims[2] = {m, n};
    wf_tensor *o;
    wf_status *s = H->kctx_output(k, 0, WF_F32, 2, dims, &o);
    if (s) return s;
    kargs *g = kargs_new(k);
    if (!g) return H->kctx_fail(k, WF_OUT_OF_MEMORY, "testdev: out of memory");
    *g = (kargs){.x = fptr(a), .y = fptr(b), .z = fptr(o), .m = m, .kk = kk, .nn = n};
    return launch(k, run_matmul, g);
}

static const wf__kernel_def g_kernels[] = {
    /* the elementwise kernels write element i after reading element i: the memory plan may give their
     * output the bytes of input 0 (WF__K_INPLACE) */
    {"Add", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_add, NULL, WF__K_INPLACE},
    {"Mul", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_mul, NULL, WF__K_INPLACE},
    {"Relu", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_relu, NULL, WF__K_INPLACE},
    {"Sqrt", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_sqrt, NULL, WF__K_INPLACE},
    {"Identity", "TESTDEV", WF__DT_ALL, 0, k_identity},
    {"MatMul", "TESTDEV", WF__DT_BIT(WF_F32), 0, k_matmul},
};

static const wf__kernel_def *find_kernel(void *dev, const char *op, const wf__tinfo *in, int n_in, const wf__tinfo *out)
{
    for (size_t i = 0; i < sizeof g_kernels / sizeof g_kernels[0]; i++)
        if (!strcmp(g_kernels[i].op, op) && n_in > 0 && (g_kernels[i].dtypes & WF__DT_BIT(in[0].dtype)))
            return &g_kernels[i];
    return NULL;
}

static void destroy(void *b) {}

static const wf_backend_vtable g_vt = {
    .abi_version = WF_BACKEND_ABI_VERSION, .size = sizeof(wf_backend_vtable), .name = "testdev",
    .device_count = device_count, .device_info = device_info, .device_open = device_open,
    .device_close = device_close, .chunk_alloc = chunk_alloc, .chunk_free = chunk_free,
    .copy_to_device = copy_to_device, .copy_to_host = copy_to_host, .find_kernel = find_kernel,
    .synchronize = synchronize, .destroy = destroy,
    .event_record = event_record, .stream_wait = stream_wait, .event_query = event_query, .event_sync = event_sync,
    .event_notify = event_notify, .event_times = event_times, .event_release = event_release,
    .copy_to_device_async = copy_to_device_async, .copy_to_host_async = copy_to_host_async,
};

static const wf_backend_vtable g_vt_v1 = {
    .abi_version = WF_BACKEND_ABI_VERSION, .size = offsetof(wf_backend_vtable, destroy) + sizeof(void *),
    .name = "testdev", .device_count = device_count, .device_info = device_info, .device_open = device_open,
    .device_close = device_close, .chunk_alloc = chunk_alloc, .chunk_free = chunk_free,
    .copy_to_device = copy_to_device, .copy_to_host = copy_to_host, .find_kernel = find_kernel, .destroy = destroy,
};

__attribute__((visibility("default"))) wf_status *wf_backend_entry(const wf_host_api *host, const wf_backend_vtable **vt,
                                                                  void **backend)
{
    if (host->abi_version != WF_BACKEND_ABI_VERSION) return NULL;
    /* loaded again by every context: written only when it changes, since the stream threads of an
     * earlier context read these */
    if (H != host) H = host;
    const char *v1 = getenv("WEFT_TESTDEV_V1");
    bool is_v1 = v1 && !strcmp(v1, "1");
    *vt = is_v1 ? &g_vt_v1 : &g_vt;
    *backend = is_v1 ? &g_v1_backend : NULL;
    return NULL;
}
