/*
 * interleave, cache (in memory or in a file) and the .npy source.
 *
 * The cache file: "WFCACHE1", the u64 fingerprint of the cached pipeline, then per element a u32
 * component count and per component u32 dtype, u32 rank, i64 dims[rank], u64 bytes and the bytes
 * (string tensors as their records and payload, which are position-independent), all little-endian
 * as the machine writes them (the file is a cache for this machine, not an exchange format). It is
 * written to PATH.tmp.PID during the first complete iteration and renamed to PATH at its end, so a
 * half-written cache is never read; an iteration that stops early leaves no file.
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/pipeline.h"
#include "data/stages.h"

/* ---- interleave ------------------------------------------------------------------------------------ */

typedef struct il_p {
    wf_interleave_fn fn;
    void *user;
    int cycle, block, parallel;
} il_p;

typedef struct il_slot {
    wf_dataset *ds;
    wf__ds_it *it;
} il_slot;

typedef struct il_it {
    wf__ds_it base;
    const il_p *p;
    wf__ds_it *in;
    uint64_t epoch;
    int depth;
    il_slot *slots;
    int cur, in_block;
    int64_t opened; /* input elements turned into datasets */
    bool in_end;
} il_it;

static void il_close(il_slot *s)
{
    wf__ds_it_free(s->it);
    wf_dataset_free(s->ds);
    s->it = NULL;
    s->ds = NULL;
}

/* Opens the next input element's dataset in slot s (nothing when the input has ended). */
static wf_status *il_open(il_it *v, il_slot *s)
{
    wf__elem e;
    bool end;
    WF__TRY(wf__ds_next(v->in, &e, &end));
    if (end) {
        v->in_end = true;
        return NULL;
    }
    int64_t idx = v->opened++;
    wf_dataset *ds = NULL;
    wf_status *st = v->p->fn(v->p->user, e.t, e.n, &ds);
    wf__elem_clear(&e);
    if (!st && !ds) st = wf__status(WF_INVALID_ARGUMENT, "the function returned no dataset");
    if (!st && v->p->parallel != 1) {
        /* read ahead on a thread: a prefetch of two elements in front of each open dataset */
        wf_dataset *pf = NULL;
        st = wf_dataset_prefetch(ds, 2, &pf);
        wf_dataset_free(ds);
        ds = pf;
    }
    if (!st) st = wf__ds_make(ds, v->base.pipe, wf__ds_mix(v->epoch, (uint64_t)idx), v->depth + 1, &s->it);
    if (st) {
        wf_dataset_free(ds);
        return wf__status_wrap(st, "interleave stage, input element %lld", (long long)idx);
    }
    s->ds = ds;
    return NULL;
}

static wf_status *il_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    il_it *v = (il_it *)it;
    int idle = 0; /* consecutive slots found empty with the input ended */
    for (;;) {
        il_slot *s = &v->slots[v->cur];
        if (!s->it && !v->in_end) WF__TRY(il_open(v, s));
        if (!s->it) {
            if (v->in_end && ++idle >= v->p->cycle) {
                *end = true;
                return NULL;
            }
            v->cur = (v->cur + 1) % v->p->cycle;
            v->in_block = 0;
            continue;
        }
        idle = 0;
        bool e_end;
        wf_status *st = wf__ds_next(s->it, out, &e_end);
        if (st) return st;
        if (e_end) {
            il_close(s);
            v->cur = (v->cur + 1) % v->p->cycle;
            v->in_block = 0;
            continue;
        }
        if (++v->in_block >= v->p->block) {
            v->cur = (v->cur + 1) % v->p->cycle;
            v->in_block = 0;
        }
        wf__stage_count(it, 0, NULL);
        return NULL;
    }
}

static void il_free(wf__ds_it *it)
{
    il_it *v = (il_it *)it;
    for (int i = 0; v->slots && i < v->p->cycle; i++) il_close(&v->slots[i]);
    wf__free(v->slots);
    wf__ds_it_free(v->in);
    wf__stage_fini(it);
    wf__free(v);
}

static const wf__ds_it_vt il_vt = {il_next, NULL, il_free};

static wf_status *il_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    il_it *v = wf__calloc(1, sizeof *v);
    if (!v) return wf__oom("an interleave iterator", sizeof *v);
    v->p = ds->params;
    v->epoch = epoch;
    v->depth = depth;
    v->slots = wf__calloc((size_t)v->p->cycle, sizeof *v->slots);
    wf_status *s = v->slots ? NULL : wf__oom("interleave's cycle", (size_t)v->p->cycle * sizeof *v->slots);
    if (!s) s = wf__stage_init(&v->base, &il_vt, p, v->p->parallel != 1 ? "interleave(parallel)" : "interleave", depth);
    if (!s) s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &v->in);
    if (s) {
        v->base.vt = &il_vt;
        il_free(&v->base);
        return s;
    }
    *out = &v->base;
    return NULL;
}

static const wf__ds_kind il_kind = {"interleave", il_make, wf__free};

wf_status *wf_dataset_interleave(wf_dataset *in, wf_interleave_fn fn, void *user, int cycle_length, int block_length,
                                 int num_parallel_calls, wf_dataset **out)
{
    if (!in || !out || !fn) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_interleave: NULL dataset, function or out");
    *out = NULL;
    if (cycle_length < 1 || cycle_length > 4096 || block_length < 1)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_interleave: cycle_length %d (1 to 4096) and block_length %d "
                          "(>= 1)", cycle_length, block_length);
    if (num_parallel_calls < 1 && num_parallel_calls != WF_AUTOTUNE)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_interleave: num_parallel_calls %d (>= 1 or WF_AUTOTUNE)",
                          num_parallel_calls);
    il_p *p = wf__malloc(sizeof *p);
    if (!p) return wf__oom("an interleave dataset", sizeof *p);
    *p = (il_p){fn, user, cycle_length, block_length, num_parallel_calls};
    return wf__ds_new(&il_kind, p, in, NULL, 0, WF_DATASET_UNKNOWN,
                      wf__ds_mix((uint64_t)cycle_length, (uint64_t)block_length), out);
}

/* ---- cache ----------------------------------------------------------------------------------------- */

typedef struct cache_p {
    char *path;                /* NULL: memory */
    pthread_mutex_t mu;
    wf__elem *v;               /* memory: the cached elements */
    int64_t n, cap;
    bool complete, filling;
} cache_p;

static void cache_free_p(void *vp)
{
    cache_p *c = vp;
    if (!c) return;
    for (int64_t i = 0; i < c->n; i++) wf__elem_clear(&c->v[i]);
    wf__free(c->v);
    wf__free(c->path);
    pthread_mutex_destroy(&c->mu);
    wf__free(c);
}

enum { C_PASS, C_FILL, C_REPLAY, C_FWRITE, C_FREAD };

typedef struct cache_it {
    wf__ds_it base;
    cache_p *c;
    uint64_t fp;
    wf__ds_it *in;
    int mode;
    int64_t pos;
    FILE *f;
    char *tmp;
    bool done;
    int64_t file_size; /* reading: the cache file's size */
} cache_it;

#define CACHE_MAGIC "WFCACHE1"

static wf_status *wr(cache_it *ci, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, ci->f) != n)
        return wf__status(WF_IO_ERROR, "cache: writing %s failed (disk full?)", ci->tmp);
    return NULL;
}

static wf_status *write_elem(cache_it *ci, const wf__elem *e)
{
    uint32_t n = (uint32_t)e->n;
    WF__TRY(wr(ci, &n, 4));
    for (int i = 0; i < e->n; i++) {
        const wf_tensor *t = e->t[i];
        if (t->device)
            return wf__status(WF_INVALID_ARGUMENT, "cache: component %d is in device memory; cache before "
                              "prefetch_to_device", i);
        uint32_t h[2] = {(uint32_t)t->dtype, (uint32_t)t->rank};
        uint64_t b = t->bytes;
        WF__TRY(wr(ci, h, sizeof h));
        WF__TRY(wr(ci, t->dims, (size_t)t->rank * sizeof t->dims[0]));
        WF__TRY(wr(ci, &b, 8));
        WF__TRY(wr(ci, t->data, t->bytes));
    }
    return NULL;
}

static wf_status *rd_fail(cache_it *ci, const char *what)
{
    return wf__status(WF_INVALID_ARGUMENT, "cache file %s: %s at byte %ld (element %lld); delete it to rebuild the cache",
                      ci->c->path, what, ftell(ci->f), (long long)ci->pos);
}

static wf_status *read_elem(cache_it *ci, wf__elem *out, bool *end)
{
    uint32_t n;
    size_t got = fread(&n, 1, 4, ci->f);
    if (got == 0 && feof(ci->f)) {
        *end = true;
        return NULL;
    }
    if (got != 4 || n < 1 || n > WF__DS_MAXC) return rd_fail(ci, "a damaged element header");
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h[2];
        int64_t dims[WF_MAX_RANK];
        uint64_t b;
        if (fread(h, 1, sizeof h, ci->f) != sizeof h || !wf__dtype_valid((wf_dtype)h[0]) || h[1] > WF_MAX_RANK)
            return rd_fail(ci, "a damaged tensor header");
        if (fread(dims, sizeof dims[0], h[1], ci->f) != h[1] || fread(&b, 1, 8, ci->f) != 8)
            return rd_fail(ci, "a truncated tensor header");
        int64_t size = 1;
        for (uint32_t d = 0; d < h[1]; d++) {
            if (dims[d] < 0 || (dims[d] && size > INT64_MAX / dims[d])) return rd_fail(ci, "bad dims");
            size *= dims[d];
        }
        /* a size the rest of the file cannot hold is damage, not something to allocate */
        long here = ftell(ci->f);
        if (here < 0 || b > (uint64_t)(ci->file_size - here))
            return rd_fail(ci, "truncated or damaged: a tensor larger than the rest of the file");
        /* the dims' product without the zeros must fit too: an empty tensor with absurd other dims is
         * not something this writer makes */
        int64_t nz = 1;
        for (uint32_t d = 0; d < h[1]; d++) {
            if (dims[d] && nz > INT64_MAX / dims[d]) return rd_fail(ci, "bad dims");
            if (dims[d]) nz *= dims[d];
        }
        wf_tensor *t = NULL;
        wf_status *as;
        if ((wf_dtype)h[0] == WF_STRING) {
            if (b < (uint64_t)size * 16 || b > ((uint64_t)1 << 40)) return rd_fail(ci, "a bad string tensor size");
            as = wf__ds_string_alloc((int)h[1], dims, (size_t)b, &t);
        } else {
            if (b != (uint64_t)size * wf_dtype_size((wf_dtype)h[0])) return rd_fail(ci, "a size that does not match the dims");
            as = wf__tensor_alloc((wf_dtype)h[0], (int)h[1], dims, "a cached element", &t);
        }
        if (as) return wf__status_wrap(as, "cache file %s, element %lld", ci->c->path, (long long)ci->pos);
        out->t[out->n++] = t;
        if (b && fread(t->data, 1, (size_t)b, ci->f) != (size_t)b) return rd_fail(ci, "truncated data");
    }
    return NULL;
}

static wf_status *cache_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    cache_it *ci = (cache_it *)it;
    cache_p *c = ci->c;
    if (ci->mode == C_REPLAY) {
        pthread_mutex_lock(&c->mu);
        if (ci->pos >= c->n) *end = true;
        else {
            *out = c->v[ci->pos++];
            for (int i = 0; i < out->n; i++) wf_tensor_ref(out->t[i]);
        }
        pthread_mutex_unlock(&c->mu);
        if (!*end) wf__stage_count(it, 0, NULL);
        return NULL;
    }
    if (ci->mode == C_FREAD) {
        int64_t t0 = wf__ds_now();
        wf_status *s = read_elem(ci, out, end);
        if (s) {
            wf__elem_clear(out);
            return s;
        }
        if (!*end) ci->pos++, wf__stage_count(it, wf__ds_now() - t0, out);
        return NULL;
    }
    WF__TRY(wf__ds_next(ci->in, out, end));
    if (*end) {
        if (ci->mode == C_FILL) {
            pthread_mutex_lock(&c->mu);
            c->complete = true;
            c->filling = false;
            pthread_mutex_unlock(&c->mu);
            ci->mode = C_PASS;
        } else if (ci->mode == C_FWRITE && !ci->done) {
            ci->done = true;
            int rc = fclose(ci->f);
            ci->f = NULL;
            if (rc || rename(ci->tmp, c->path)) {
                remove(ci->tmp);
                return wf__status(WF_IO_ERROR, "cache: cannot finish %s (from %s)", c->path, ci->tmp);
            }
        }
        return NULL;
    }
    ci->pos++;
    if (ci->mode == C_FILL) {
        pthread_mutex_lock(&c->mu);
        wf_status *s = NULL;
        if (c->n == c->cap) {
            int64_t cap = c->cap ? 2 * c->cap : 256;
            wf__elem *v = wf__realloc(c->v, (size_t)c->cap * sizeof *v, (size_t)cap * sizeof *v);
            if (!v) s = wf__oom("an in-memory cache", (size_t)cap * sizeof *v);
            else c->v = v, c->cap = cap;
        }
        if (!s) {
            c->v[c->n] = *out;
            for (int i = 0; i < out->n; i++) wf_tensor_ref(out->t[i]);
            c->n++;
        }
        pthread_mutex_unlock(&c->mu);
        if (s) {
            wf__elem_clear(out);
            return s;
        }
    } else if (ci->mode == C_FWRITE) {
        wf_status *s = write_elem(ci, out);
        if (s) {
            wf__elem_clear(out);
            return s;
        }
    }
    wf__stage_count(it, 0, NULL);
    return NULL;
}

static void cache_free(wf__ds_it *it)
{
    cache_it *ci = (cache_it *)it;
    cache_p *c = ci->c;
    if (ci->mode == C_FILL) {
        /* stopped before the end: the partial cache is dropped; the next iteration fills again */
        pthread_mutex_lock(&c->mu);
        for (int64_t i = 0; i < c->n; i++) wf__elem_clear(&c->v[i]);
        c->n = 0;
        c->filling = false;
        pthread_mutex_unlock(&c->mu);
    }
    if (ci->f) fclose(ci->f);
    if (ci->mode == C_FWRITE && !ci->done) remove(ci->tmp);
    if (ci->mode == C_FWRITE) {
        pthread_mutex_lock(&c->mu);
        c->filling = false;
        pthread_mutex_unlock(&c->mu);
    }
    wf__free(ci->tmp);
    wf__ds_it_free(ci->in);
    wf__stage_fini(it);
    wf__free(ci);
}

static const wf__ds_it_vt cache_vt = {cache_next, NULL, cache_free};

static wf_status *cache_open(const wf_dataset *ds, cache_it *ci, wf__pipe *p, uint64_t epoch, int depth)
{
    cache_p *c = ci->c;
    pthread_mutex_lock(&c->mu);
    if (!c->path) ci->mode = c->complete ? C_REPLAY : c->filling ? C_PASS : C_FILL;
    else if (access(c->path, F_OK) == 0) ci->mode = C_FREAD;
    else ci->mode = c->filling ? C_PASS : C_FWRITE;
    if (ci->mode == C_FILL || ci->mode == C_FWRITE) c->filling = true;
    pthread_mutex_unlock(&c->mu);
    if (ci->mode == C_FREAD) {
        ci->f = fopen(c->path, "rb");
        if (!ci->f) return wf__status(WF_IO_ERROR, "cache: cannot open %s", c->path);
        struct stat sb;
        if (fstat(fileno(ci->f), &sb) != 0) return wf__status(WF_IO_ERROR, "cache: cannot stat %s", c->path);
        ci->file_size = (int64_t)sb.st_size;
        char magic[8];
        uint64_t fp = 0;
        if (fread(magic, 1, 8, ci->f) != 8 || memcmp(magic, CACHE_MAGIC, 8) || fread(&fp, 1, 8, ci->f) != 8)
            return wf__status(WF_INVALID_ARGUMENT, "cache file %s is not a weft cache file (delete it to rebuild)", c->path);
        if (fp != ci->fp)
            return wf__status(WF_INVALID_ARGUMENT, "cache file %s was written by another pipeline (fingerprint %016llx, "
                              "this one's %016llx); delete it to rebuild", c->path, (unsigned long long)fp,
                              (unsigned long long)ci->fp);
        return NULL;
    }
    if (ci->mode == C_FWRITE) {
        size_t n = strlen(c->path) + 32;
        if (!(ci->tmp = wf__malloc(n))) return wf__oom("a cache file name", n);
        snprintf(ci->tmp, n, "%s.tmp.%ld", c->path, (long)getpid());
        ci->f = fopen(ci->tmp, "wb");
        if (!ci->f) return wf__status(WF_IO_ERROR, "cache: cannot create %s", ci->tmp);
        WF__TRY(wr(ci, CACHE_MAGIC, 8));
        WF__TRY(wr(ci, &ci->fp, 8));
    }
    if (ci->mode != C_REPLAY) WF__TRY(wf__ds_make(ds->in[0], p, epoch, depth + 1, &ci->in));
    return NULL;
}

static wf_status *cache_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    cache_it *ci = wf__calloc(1, sizeof *ci);
    if (!ci) return wf__oom("a cache iterator", sizeof *ci);
    ci->c = ds->params;
    ci->fp = ds->in[0]->fingerprint;
    wf_status *s = wf__stage_init(&ci->base, &cache_vt, p, ci->c->path ? "cache(file)" : "cache(memory)", depth);
    ci->mode = C_PASS;
    if (!s) s = cache_open(ds, ci, p, epoch, depth);
    if (s) {
        ci->base.vt = &cache_vt;
        cache_free(&ci->base);
        return s;
    }
    *out = &ci->base;
    return NULL;
}

static const wf__ds_kind cache_kind = {"cache", cache_make, cache_free_p};

wf_status *wf_dataset_cache(wf_dataset *in, const char *path, wf_dataset **out)
{
    if (!in || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_cache: NULL dataset or out");
    *out = NULL;
    cache_p *c = wf__calloc(1, sizeof *c);
    if (!c) return wf__oom("a cache dataset", sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    if (path && *path && !(c->path = wf__strdup(path))) {
        cache_free_p(c);
        return wf__oom("a cache path", strlen(path));
    }
    return wf__ds_new(&cache_kind, c, in, NULL, in->ncomp, wf_dataset_cardinality(in), 0x63616368ull, out);
}

/* ---- .npy files ------------------------------------------------------------------------------------ */

wf_status *wf_dataset_npy(const char *const *paths, int n_paths, wf_dataset **out)
{
    if (!paths || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_npy: NULL paths or out");
    *out = NULL;
    if (n_paths < 1 || n_paths > WF__DS_MAXC)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_npy: %d files (1 to %d, one per component)", n_paths, WF__DS_MAXC);
    wf_tensor *t[WF__DS_MAXC] = {0};
    wf_status *s = NULL;
    for (int i = 0; i < n_paths && !s; i++) {
        s = wf_npy_read(paths[i], &t[i]);
        if (!s && t[i]->rank < 1)
            s = wf__status(WF_INVALID_ARGUMENT, "%s holds a scalar; a dataset slices along the first dim", paths[i]);
        if (!s && i && t[i]->dims[0] != t[0]->dims[0])
            s = wf__status(WF_INVALID_ARGUMENT, "%s has %lld rows but %s has %lld", paths[i], (long long)t[i]->dims[0],
                           paths[0], (long long)t[0]->dims[0]);
    }
    if (!s) s = wf__ds_slices("wf_dataset_npy", t, n_paths, out);
    for (int i = 0; i < n_paths; i++) wf_tensor_free(t[i]);
    return s;
}
