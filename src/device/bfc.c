/*
 * Best-fit with coalescing. Each chunk is cut into blocks kept in address order (a doubly linked list
 * per chunk); free blocks also sit in size-ordered bins. Allocation takes the smallest free block that
 * fits from the bins, splitting off the rest; release merges a block with free neighbours. When nothing
 * fits, a new chunk of max(request, the last chunk's size * 2) is taken (exactly the request under a
 * limit), within the limit; if the device refuses, empty chunks are returned and the request retried once.
 */
#include <pthread.h>
#include <stdio.h>

#include "device/bfc.h"

#define NBINS 48

typedef struct blk {
    struct blk *prev, *next;         /* address order within the chunk */
    struct blk *bin_prev, *bin_next; /* free list of its bin */
    struct chunk *chunk;
    size_t offset, size;
    bool free;
} blk;

typedef struct chunk {
    struct chunk *next;
    void *handle;
    size_t size;
    blk *first;
} chunk;

struct wf__bfc {
    pthread_mutex_t mu;
    char *device;
    size_t align, limit, next_chunk;
    wf__bfc_backend be;
    chunk *chunks;
    blk *bins[NBINS];
    wf__bfc_stats st;
};

static int bin_of(size_t size)
{
    int b = 0;
    while (b < NBINS - 1 && ((size_t)256 << b) <= size) b++;
    return b;
}

static void bin_insert(wf__bfc *a, blk *b)
{
    int i = bin_of(b->size);
    b->bin_prev = NULL;
    b->bin_next = a->bins[i];
    if (a->bins[i]) a->bins[i]->bin_prev = b;
    a->bins[i] = b;
}

static void bin_remove(wf__bfc *a, blk *b)
{
    if (b->bin_prev) b->bin_prev->bin_next = b->bin_next;
    else a->bins[bin_of(b->size)] = b->bin_next;
    if (b->bin_next) b->bin_next->bin_prev = b->bin_prev;
    b->bin_prev = b->bin_next = NULL;
}

wf_status *wf__bfc_new(const char *device, size_t limit, size_t alignment, wf__bfc_backend backend, wf__bfc **out)
{
    wf__bfc *a = wf__calloc(1, sizeof *a);
    if (!a) return wf__oom("a device allocator", sizeof *a);
    if (!(a->device = wf__strdup(device ? device : "device"))) {
        wf__free(a);
        return wf__oom("a device allocator", 64);
    }
    pthread_mutex_init(&a->mu, NULL);
    a->align = alignment >= 16 ? alignment : 256;
    a->limit = limit;
    a->st.limit = limit;
    a->next_chunk = (size_t)1 << 20;
    a->be = backend;
    *out = a;
    return NULL;
}

void wf__bfc_free(wf__bfc *a)
{
    if (!a) return;
    for (chunk *c = a->chunks, *cn; c; c = cn) {
        cn = c->next;
        for (blk *b = c->first, *bn; b; b = bn) {
            bn = b->next;
            wf__free(b);
        }
        a->be.chunk_free(a->be.user, c->handle);
        wf__free(c);
    }
    pthread_mutex_destroy(&a->mu);
    wf__free(a->device);
    wf__free(a);
}

static blk *best_fit(wf__bfc *a, size_t size)
{
    for (int i = bin_of(size); i < NBINS; i++) {
        blk *best = NULL;
        for (blk *b = a->bins[i]; b; b = b->bin_next)
            if (b->size >= size && (!best || b->size < best->size)) best = b;
        if (best) return best;
    }
    return NULL;
}

static bool grow(wf__bfc *a, size_t size)
{
    /* Under a limit, reserve exactly what is asked: a growth step's unused tail would count against
     * the limit and could refuse a later block that fits (a small arena in a 1 MiB chunk, then 1 MiB). */
    size_t want = a->limit ? size : size > a->next_chunk ? size : a->next_chunk;
    if (a->limit && a->st.reserved + want > a->limit) {
        want = a->limit - a->st.reserved; /* whatever is left under the limit */
        if (want < size) return false;
    }
    chunk *c = wf__calloc(1, sizeof *c);
    blk *b = wf__calloc(1, sizeof *b);
    void *h = c && b ? a->be.chunk_alloc(a->be.user, want) : NULL;
    /* the device may still hold this block but not a whole growth step: take just the block */
    bool step = true;
    if (!h && c && b && want > size && (h = a->be.chunk_alloc(a->be.user, size))) want = size, step = false;
    if (!h) {
        wf__free(c);
        wf__free(b);
        return false;
    }
    c->handle = h;
    c->size = want;
    c->first = b;
    c->next = a->chunks;
    a->chunks = c;
    b->chunk = c;
    b->size = want;
    b->free = true;
    bin_insert(a, b);
    a->st.reserved += want;
    a->st.chunk_allocs++;
    if (step && a->next_chunk < ((size_t)1 << 32)) a->next_chunk = want * 2;
    return true;
}

static void trim_locked(wf__bfc *a)
{
    for (chunk **pc = &a->chunks; *pc;) {
        chunk *c = *pc;
        if (c->first->free && !c->first->next) {
            bin_remove(a, c->first);
            wf__free(c->first);
            a->be.chunk_free(a->be.user, c->handle);
            a->st.reserved -= c->size;
            *pc = c->next;
            wf__free(c);
        } else {
            pc = &c->next;
        }
    }
}

void wf__bfc_trim(wf__bfc *a)
{
    pthread_mutex_lock(&a->mu);
    trim_locked(a);
    pthread_mutex_unlock(&a->mu);
}

wf_status *wf__bfc_alloc(wf__bfc *a, size_t bytes, wf__bfc_block *out)
{
    size_t size = (bytes + a->align - 1) / a->align * a->align;
    if (size == 0) size = a->align;
    pthread_mutex_lock(&a->mu);
    blk *b = best_fit(a, size);
    if (!b && !grow(a, size)) {
        trim_locked(a);
        if (!grow(a, size)) {
            wf__bfc_stats st = a->st;
            pthread_mutex_unlock(&a->mu);
            if (a->limit)
                return wf__status(WF_OUT_OF_MEMORY,
                                  "out of memory on %s: cannot allocate %zu bytes (%zu in use, limit %zu)", a->device,
                                  bytes, st.in_use, a->limit);
            return wf__status(WF_OUT_OF_MEMORY, "out of memory on %s: cannot allocate %zu bytes (%zu in use)",
                              a->device, bytes, st.in_use);
        }
    }
    if (!b) b = best_fit(a, size);
    bin_remove(a, b);
    if (b->size - size >= a->align) {
        /* split: the tail stays free */
        blk *t = wf__calloc(1, sizeof *t);
        if (t) {
            t->chunk = b->chunk;
            t->offset = b->offset + size;
            t->size = b->size - size;
            t->free = true;
            t->prev = b;
            t->next = b->next;
            if (b->next) b->next->prev = t;
            b->next = t;
            b->size = size;
            bin_insert(a, t);
        }
    }
    b->free = false;
    a->st.in_use += b->size;
    if (a->st.in_use > a->st.peak_in_use) a->st.peak_in_use = a->st.in_use;
    a->st.n_allocs++;
    a->st.total_allocs++;
    out->chunk = b->chunk->handle;
    out->offset = b->offset;
    out->size = b->size;
    out->priv = b;
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

void wf__bfc_release(wf__bfc *a, const wf__bfc_block *ob)
{
    pthread_mutex_lock(&a->mu);
    blk *b = ob->priv;
    if (!b || b->free) {
        pthread_mutex_unlock(&a->mu);
        return;
    }
    a->st.in_use -= b->size;
    a->st.n_allocs--;
    b->free = true;
    if (b->next && b->next->free) { /* absorb the free block after */
        blk *n = b->next;
        bin_remove(a, n);
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        wf__free(n);
    }
    if (b->prev && b->prev->free) { /* merge into the free block before */
        blk *p = b->prev;
        bin_remove(a, p);
        p->size += b->size;
        p->next = b->next;
        if (b->next) b->next->prev = p;
        wf__free(b);
        b = p;
    }
    bin_insert(a, b);
    pthread_mutex_unlock(&a->mu);
}

wf__bfc_stats wf__bfc_get_stats(wf__bfc *a)
{
    pthread_mutex_lock(&a->mu);
    wf__bfc_stats s = a->st;
    pthread_mutex_unlock(&a->mu);
    return s;
}

void wf__bfc_set_limit(wf__bfc *a, size_t limit)
{
    pthread_mutex_lock(&a->mu);
    a->limit = limit;
    a->st.limit = limit;
    if (limit) trim_locked(a); /* give back what is not in use, so the new limit can be honoured */
    pthread_mutex_unlock(&a->mu);
}
