/*
 * The inter-op thread pool: one queue of (run, node) items shared by every run of the context, served
 * by worker threads and by the threads that called wf_session_run (a caller helps until its run is
 * done, so one inter-op thread means no worker at all).
 */
#include <pthread.h>

#include "core/pool.h"

struct wf__pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    wf__work *items;
    size_t head, count, cap;
    int n_threads;
    pthread_t *threads;
    int idle;          /* workers waiting for work */
    atomic_int idle_hint; /* idle, readable without the lock */
    atomic_int helpers;   /* callers inside wf__pool_help_until */
    bool stop;
    wf__pool_batch_fn batch; /* set by the pushes, read under mu */
};

#define BATCH 32

/* Pops up to BATCH items of the same run as the first one: per-item locking would cost more than the
 * small nodes it hands out. */
static int pop_locked(wf__pool *p, wf__run **run, int *nodes)
{
    int n = 0;
    while (p->count && n < BATCH) {
        wf__work *w = &p->items[p->head];
        if (n && w->run != *run) break;
        *run = w->run;
        nodes[n++] = w->node;
        p->head = (p->head + 1) % p->cap;
        p->count--;
    }
    return n;
}

static void *worker_main(void *arg)
{
    wf__pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        wf__run *run;
        int nodes[BATCH];
        int n = pop_locked(p, &run, nodes);
        if (n) {
            wf__pool_batch_fn fn = p->batch;
            pthread_mutex_unlock(&p->mu);
            fn(run, nodes, n);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        if (p->stop) break;
        p->idle++;
        atomic_store_explicit(&p->idle_hint, p->idle, memory_order_relaxed);
        pthread_cond_wait(&p->cv, &p->mu);
        p->idle--;
        atomic_store_explicit(&p->idle_hint, p->idle, memory_order_relaxed);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

wf_status *wf__pool_new(int threads, wf__pool **out)
{
    wf__pool *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("the thread pool", sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int workers = threads > 1 ? threads - 1 : 0;
    p->threads = wf__calloc((size_t)(workers ? workers : 1), sizeof *p->threads);
    if (!p->threads) {
        wf__pool_free(p);
        return wf__oom("the thread pool", sizeof *p->threads * (size_t)workers);
    }
    for (int i = 0; i < workers; i++) {
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) {
            wf__pool_free(p);
            return wf__status(WF_UNAVAILABLE, "could not start inter-op thread %d of %d", i + 1, workers);
        }
        p->n_threads++;
    }
    *out = p;
    return NULL;
}

void wf__pool_free(wf__pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    wf__free(p->items);
    wf__free(p->threads);
    wf__free(p);
}

int wf__pool_workers(const wf__pool *p) { return p->n_threads; }
int wf__pool_idle(wf__pool *p) { return atomic_load_explicit(&p->idle_hint, memory_order_relaxed); }

bool wf__pool_push(wf__pool *p, wf__pool_batch_fn fn, const wf__work *w, int n)
{
    pthread_mutex_lock(&p->mu);
    p->batch = fn;
    if (p->count + (size_t)n > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->count + (size_t)n) cap *= 2;
        wf__work *items = wf__malloc(cap * sizeof *items);
        if (!items) {
            pthread_mutex_unlock(&p->mu);
            return false;
        }
        for (size_t i = 0; i < p->count; i++) items[i] = p->items[(p->head + i) % p->cap];
        wf__free(p->items);
        p->items = items;
        p->head = 0;
        p->cap = cap;
    }
    for (int i = 0; i < n; i++) p->items[(p->head + p->count++) % p->cap] = w[i];
    if (n == 1)
        pthread_cond_signal(&p->cv);
    else
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return true;
}

void wf__pool_help_until(wf__pool *p, wf__pool_batch_fn fn, atomic_int *done)
{
    pthread_mutex_lock(&p->mu);
    /* counted before done is read, and done is set before helpers is read (both sequentially
     * consistent): either this thread sees done, or wf__pool_notify_helpers sees it and broadcasts
     * under the lock this thread holds until it waits */
    atomic_fetch_add(&p->helpers, 1);
    while (!atomic_load(done)) {
        wf__run *run;
        int nodes[BATCH];
        int n = pop_locked(p, &run, nodes);
        if (n) {
            pthread_mutex_unlock(&p->mu);
            fn(run, nodes, n);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        pthread_cond_wait(&p->cv, &p->mu);
    }
    atomic_fetch_sub(&p->helpers, 1);
    pthread_mutex_unlock(&p->mu);
}

void wf__pool_notify_helpers(wf__pool *p)
{
    if (atomic_load(&p->helpers) > 0) wf__pool_notify_all(p);
}

void wf__pool_notify_all(wf__pool *p)
{
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}
