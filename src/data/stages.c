/*
 * The synchronous pipeline stages: range and tensor slices (sources), batch, padded_batch, unbatch,
 * shuffle, repeat, take, skip, zip, filter, ignore_errors and cache. Each runs in its consumer's
 * thread; the asynchronous ones (map with parallel calls, prefetch, prefetch_to_device, interleave)
 * are in async.c.
 */
#include <errno.h>
#include <stdio.h>

#include "data/pipeline.h"
#include "data/stages.h"

/* ---- shared ---------------------------------------------------------------------------------------- */

wf_status *wf__stage_init(wf__ds_it *it, const wf__ds_it_vt *vt, wf__pipe *p, const char *name, int depth)
{
    it->vt = vt;
    it->pipe = p;
    wf__stage_stats *st = wf__calloc(1, sizeof *st);
    if (!st) return wf__oom("a pipeline stage's statistics", sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", name);
    st->depth = depth;
    wf_status *s = wf__pipe_register(p, st);
    if (s) {
        wf__free(st);
        return s;
    }
    it->st = st;
    return NULL;
}

void wf__stage_fini(wf__ds_it *it)
{
    if (!it->st) return;
    wf__pipe_unregister(it->pipe, it->st);
    wf__pipe_hold(it->pipe, NULL, -atomic_load(&it->st->buffered));
    wf__free(it->st);
    it->st = NULL;
}

void wf__stage_count(wf__ds_it *it, int64_t busy_ns, const wf__elem *e)
{
    if (!it->st) return;
    atomic_fetch_add(&it->st->elements, 1);
    if (busy_ns > 0) atomic_fetch_add(&it->st->busy_ns, busy_ns);
    if (e) atomic_store(&it->st->elem_bytes, (int64_t)wf__elem_bytes(e));
}

static void shape_txt(const wf_tensor *t, char *b)
{
    char d[160];
    snprintf(b, 200, "%s%s", wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, d));
}

/* Component `c` of elements e[0..k) stacked into [k, ...]; pads to dims `pad` (NULL: no padding; all
 * shapes must then agree) with the scalar `padv` (NULL: zeros). */
wf_status *wf__ds_stack(const char *stage, int64_t first, const wf__elem *e, int k, int c, const int64_t *pad,
                        const wf_tensor *padv, wf_tensor **out)
{
    const wf_tensor *t0 = e[0].t[c];
    if (t0->device)
        return wf__status(WF_INVALID_ARGUMENT, "%s: element %lld's component %d is in device memory; batch before "
                          "prefetch_to_device", stage, (long long)first, c);
    if (t0->dtype == WF_STRING)
        return wf__ds_stack_strings(stage, first, e, k, c, out);
    int r = t0->rank;
    int64_t dims[WF_MAX_RANK];
    if (pad && padv && padv->dtype != t0->dtype)
        return wf__status(WF_INVALID_ARGUMENT, "%s: component %d's padding value is %s but the elements are %s", stage, c,
                          wf_dtype_name(padv->dtype), wf_dtype_name(t0->dtype));
    if (r + 1 > WF_MAX_RANK)
        return wf__status(WF_INVALID_ARGUMENT, "%s: element %lld's component %d has rank %d; batching needs rank < %d",
                          stage, (long long)first, c, r, WF_MAX_RANK);
    dims[0] = k;
    for (int d = 0; d < r; d++) dims[d + 1] = pad ? pad[d] : t0->dims[d];
    for (int i = 0; i < k; i++) {
        const wf_tensor *t = e[i].t[c];
        bool ok = t->dtype == t0->dtype && t->rank == r && !t->device;
        for (int d = 0; ok && d < r; d++) ok = pad ? t->dims[d] <= pad[d] : t->dims[d] == t0->dims[d];
        if (!ok) {
            char a[200], b[200];
            shape_txt(t, a);
            shape_txt(t0, b);
            return wf__status(WF_INVALID_ARGUMENT,
                              "%s: element %lld's component %d is %s but element %lld's is %s; %s", stage,
                              (long long)(first + i), c, a, (long long)first, b,
                              pad ? "it does not fit the padded shape" : "a batch needs equal shapes (padded_batch pads)");
        }
    }
    wf_tensor *o;
    WF__TRY(wf__tensor_alloc(t0->dtype, r + 1, dims, "a batch", &o));
    size_t es = wf_dtype_size(t0->dtype), row = o->bytes / (size_t)(k ? k : 1);
    if (!pad) {
        for (int i = 0; i < k; i++)
            if (row) memcpy((char *)o->data + (size_t)i * row, e[i].t[c]->data, row);
        *out = o;
        return NULL;
    }
    /* fill with the padding value, then copy each element's rows into place */
    uint8_t pv[16] = {0};
    if (padv) memcpy(pv, padv->data, es);
    for (int64_t j = 0; j < o->size; j++) memcpy((char *)o->data + (size_t)j * es, pv, es);
    for (int i = 0; i < k; i++) {
        const wf_tensor *t = e[i].t[c];
        if (!t->size) continue;
        int64_t inner = r ? t->dims[r - 1] : 1, rows = t->size / inner;
        for (int64_t q = 0; q < rows; q++) {
            /* the row's position in the padded block */
            int64_t rem = q, off = 0, stride = r ? pad[r - 1] : 1;
            for (int d = r - 2; d >= 0; d--) {
                off += (rem % t->dims[d]) * stride;
                rem /= t->dims[d];
                stride *= pad[d];
            }
            memcpy((char *)o->data + (size_t)i * row + (size_t)off * es, (const char *)t->data + (size_t)(q * inner) * es,
                   (size_t)inner * es);
        }
    }
    *out = o;
    return NULL;
}

/* Row r of t (first dim) as a new tensor. */
wf_status *wf__ds_row(const wf_tensor *t, int64_t r, wf_tensor **out)
{
    if (t->dtype == WF_STRING) return wf__ds_string_row(t, r, out);
    WF__TRY(wf__tensor_alloc(t->dtype, t->rank - 1, t->dims + 1, "a dataset element", out));
    size_t row = (*out)->bytes;
    if (row) memcpy((*out)->data, (const char *)t->data + (size_t)r * row, row);
    return NULL;
}

/* ---- range ----------------------------------------------------------------------------------------- */

typedef struct range_p {
    int64_t start, stop, step;
} range_p;

typedef struct range_it {
    wf__ds_it base;
    range_p r;
    int64_t i, n;
} range_it;

static wf_status *range_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    range_it *r = (range_it *)it;
    if (r->i >= r->n) {
        *end = true;
        return NULL;
    }
    int64_t v = r->r.start + r->i * r->r.step;
    WF__TRY(wf_tensor_new(WF_I64, 0, NULL, &v, &out->t[0]));
    out->n = 1;
    r->i++;
    wf__stage_count(it, 0, NULL);
    return NULL;
}

static wf_status *range_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    range_it *r = (range_it *)it;
    int64_t left = r->n - r->i;
    *done = n < left ? n : left;
    r->i += *done;
    return NULL;
}

static void range_free(wf__ds_it *it)
{
    wf__stage_fini(it);
    wf__free(it);
}

static const wf__ds_it_vt range_vt = {range_next, range_skip, range_free};

static int64_t range_count(const range_p *r)
{
    if (r->step > 0) return r->stop > r->start ? (r->stop - r->start + r->step - 1) / r->step : 0;
    return r->stop < r->start ? (r->start - r->stop + (-r->step) - 1) / (-r->step) : 0;
}

static wf_status *range_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    (void)epoch;
    range_it *r = wf__calloc(1, sizeof *r);
    if (!r) return wf__oom("a range iterator", sizeof *r);
    r->r = *(const range_p *)ds->params;
    r->n = range_count(&r->r);
    wf_status *s = wf__stage_init(&r->base, &range_vt, p, "range", depth);
    if (s) {
        wf__free(r);
        return s;
    }
    *out = &r->base;
    return NULL;
}

static const wf__ds_kind range_kind = {"range", range_make, wf__free};

wf_status *wf_dataset_range(int64_t start, int64_t stop, int64_t step, wf_dataset **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_range: NULL out");
    if (step == 0) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_range: step must not be 0");
    if ((step > 0 && stop > start && (stop - start) / step > INT64_MAX / 2) ||
        (step < 0 && start > stop && (start / 2 - stop / 2) > INT64_MAX / 4))
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_range: [%lld, %lld) is too large", (long long)start,
                          (long long)stop);
    range_p *r = wf__malloc(sizeof *r);
    if (!r) return wf__oom("a range dataset", sizeof *r);
    *r = (range_p){start, stop, step};
    uint64_t fp = wf__ds_mix(wf__ds_mix((uint64_t)start, (uint64_t)stop), (uint64_t)step);
    return wf__ds_new(&range_kind, r, NULL, NULL, 1, range_count(r), fp, out);
}

/* ---- tensor slices --------------------------------------------------------------------------------- */

typedef struct slices_p {
    int n;
    wf_tensor *t[WF__DS_MAXC];
} slices_p;

static void slices_free_p(void *v)
{
    slices_p *p = v;
    if (!p) return;
    for (int i = 0; i < p->n; i++) wf_tensor_free(p->t[i]);
    wf__free(p);
}

typedef struct slices_it {
    wf__ds_it base;
    const slices_p *p;
    int64_t i, n;
} slices_it;

static wf_status *slices_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    slices_it *s = (slices_it *)it;
    if (s->i >= s->n) {
        *end = true;
        return NULL;
    }
    for (int c = 0; c < s->p->n; c++) {
        WF__TRY(wf__ds_row(s->p->t[c], s->i, &out->t[c]));
        out->n = c + 1;
    }
    s->i++;
    wf__stage_count(it, 0, NULL);
    return NULL;
}

static wf_status *slices_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    slices_it *s = (slices_it *)it;
    int64_t left = s->n - s->i;
    *done = n < left ? n : left;
    s->i += *done;
    return NULL;
}

static const wf__ds_it_vt slices_vt = {slices_next, slices_skip, range_free};

static wf_status *slices_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    (void)epoch;
    slices_it *s = wf__calloc(1, sizeof *s);
    if (!s) return wf__oom("a tensor-slices iterator", sizeof *s);
    s->p = ds->params;
    s->n = s->p->t[0]->dims[0];
    wf_status *st = wf__stage_init(&s->base, &slices_vt, p, "from_tensor_slices", depth);
    if (st) {
        wf__free(s);
        return st;
    }
    *out = &s->base;
    return NULL;
}

static const wf__ds_kind slices_kind = {"from_tensor_slices", slices_make, slices_free_p};

bool wf__ds_random_access(const wf_dataset *ds)
{
    return !ds->kind || ds->kind == &slices_kind || ds->kind == &range_kind;
}

wf_status *wf__ds_get(const wf_dataset *ds, int64_t i, wf__elem *out)
{
    memset(out, 0, sizeof *out);
    if (!ds->kind) return wf__arrays_get(ds, i, out);
    if (ds->kind == &range_kind) {
        const range_p *r = ds->params;
        int64_t v = r->start + i * r->step;
        WF__TRY(wf_tensor_new(WF_I64, 0, NULL, &v, &out->t[0]));
        out->n = 1;
        return NULL;
    }
    const slices_p *p = ds->params;
    for (int c = 0; c < p->n; c++) {
        wf_status *s = wf__ds_row(p->t[c], i, &out->t[c]);
        if (s) {
            wf__elem_clear(out);
            return s;
        }
        out->n = c + 1;
    }
    return NULL;
}

wf_status *wf__ds_slices(const char *what, wf_tensor *const *t, int n, wf_dataset **out)
{
    if (n < 1 || n > WF__DS_MAXC)
        return wf__status(WF_INVALID_ARGUMENT, "%s: %d components; an element holds 1 to %d", what, n, WF__DS_MAXC);
    for (int i = 0; i < n; i++) {
        if (!t[i]) return wf__status(WF_INVALID_ARGUMENT, "%s: component %d is NULL", what, i);
        if (t[i]->rank < 1)
            return wf__status(WF_INVALID_ARGUMENT, "%s: component %d is a scalar; slices need a first dim", what, i);
        if (t[i]->device || !t[i]->data)
            return wf__status(WF_INVALID_ARGUMENT, "%s: component %d is not in host memory", what, i);
        if (t[i]->dims[0] != t[0]->dims[0])
            return wf__status(WF_INVALID_ARGUMENT, "%s: component %d has %lld rows but component 0 has %lld", what, i,
                              (long long)t[i]->dims[0], (long long)t[0]->dims[0]);
    }
    slices_p *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("a tensor-slices dataset", sizeof *p);
    p->n = n;
    uint64_t fp = 0x736c69636573ull;
    for (int i = 0; i < n; i++) {
        p->t[i] = wf_tensor_ref(t[i]);
        fp = wf__ds_mix(fp, (uint64_t)t[i]->dtype * 977u + (uint64_t)t[i]->size);
    }
    return wf__ds_new(&slices_kind, p, NULL, NULL, n, t[0]->dims[0], fp, out);
}

wf_status *wf_dataset_from_tensor_slices(wf_tensor *const *components, int n, wf_dataset **out)
{
    if (!components || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_from_tensor_slices: NULL argument");
    return wf__ds_slices("wf_dataset_from_tensor_slices", components, n, out);
}

/* ---- batch and padded_batch ------------------------------------------------------------------------ */

typedef struct batch_p {
    int64_t n;
    bool drop;
    bool padded;
    int ncomp;
    bool has_shape[WF__DS_MAXC];
    int64_t shape[WF__DS_MAXC][WF_MAX_RANK];
    wf_tensor *padv[WF__DS_MAXC];
} batch_p;

static void batch_free_p(void *v)
{
    batch_p *p = v;
    if (!p) return;
    for (int i = 0; i < WF__DS_MAXC; i++) wf_tensor_free(p->padv[i]);
    wf__free(p);
}

typedef struct batch_it {
    wf__ds_it base;
    const batch_p *p;
    wf__ds_it *in;
    wf__elem *buf;
    int64_t index; /* batches made */
    bool ended;
} batch_it;

static wf_status *make_batch(batch_it *b, int k, wf__elem *out)
{
    const wf__elem *e = b->buf;
    const char *name = b->base.st->name;
    for (int i = 1; i < k; i++)
        if (e[i].n != e[0].n)
            return wf__status(WF_INVALID_ARGUMENT, "%s: batch %lld mixes elements of %d and %d components", name,
                              (long long)b->index, e[0].n, e[i].n);
    for (int c = 0; c < e[0].n; c++) {
        int64_t pad[WF_MAX_RANK];
        const int64_t *pd = NULL;
        if (b->p->padded) {
            int r = e[0].t[c]->rank;
            for (int d = 0; d < r; d++) {
                int64_t m = 0;
                for (int i = 0; i < k; i++)
                    if (e[i].t[c]->rank == r && e[i].t[c]->dims[d] > m) m = e[i].t[c]->dims[d];
                pad[d] = b->p->has_shape[c] && b->p->shape[c][d] >= 0 ? b->p->shape[c][d] : m;
            }
            pd = pad;
        }
        wf_status *s = wf__ds_stack(name, b->index * b->p->n, e, k, c, pd, b->p->padv[c], &out->t[c]);
        if (s) return s;
        out->n = c + 1;
    }
    return NULL;
}

/* A batch of plain host tensors is filled as its elements arrive: the output is allocated at the first
 * one and each element is copied into its row and dropped, so the copy overlaps the wait for the next
 * element instead of following the last (a batch of 32 decoded images is 19 MB to copy). Strings,
 * device tensors and padded batches take the general path (make_batch over the collected elements). */
bool wf__elem_plain(const wf__elem *e)
{
    for (int c = 0; c < e->n; c++)
        if (!e->t[c] || e->t[c]->device || e->t[c]->dtype == WF_STRING || e->t[c]->rank + 1 > WF_MAX_RANK) return false;
    return e->n > 0;
}

static wf_status *row_into(batch_it *b, const wf__elem *first, const wf__elem *e, int64_t k, wf__elem *out)
{
    const char *name = b->base.st->name;
    if (e->n != first->n)
        return wf__status(WF_INVALID_ARGUMENT, "%s: batch %lld mixes elements of %d and %d components", name,
                          (long long)b->index, first->n, e->n);
    for (int c = 0; c < e->n; c++) {
        const wf_tensor *t = e->t[c], *t0 = out->t[c];
        bool ok = !t->device && t->dtype == t0->dtype && t->rank + 1 == t0->rank;
        for (int d = 0; ok && d < t->rank; d++) ok = t->dims[d] == t0->dims[d + 1];
        if (!ok) {
            char a[200], w[200];
            shape_txt(t, a);
            shape_txt(first->t[c], w);
            return wf__status(WF_INVALID_ARGUMENT,
                              "%s: element %lld's component %d is %s but element %lld's is %s; a batch needs equal "
                              "shapes (padded_batch pads)", name, (long long)(b->index * b->p->n + k), c, a,
                              (long long)(b->index * b->p->n), w);
        }
        char *dst = (char *)out->t[c]->data + (size_t)k * t->bytes;
        if (t->bytes && t->data != dst) memcpy(dst, t->data, t->bytes); /* else the map wrote it there */
    }
    return NULL;
}

wf_status *wf__ds_row_views(const wf__elem *batch, int64_t r, wf__elem *views)
{
    memset(views, 0, sizeof *views);
    for (int c = 0; c < batch->n; c++) {
        wf_tensor *t = batch->t[c];
        size_t row = t->rank && t->dims[0] ? t->bytes / (size_t)t->dims[0] : 0;
        wf_status *s = wf__tensor_view_at(t, (size_t)r * row, t->rank - 1, t->dims + 1, &views->t[c]);
        if (s) {
            wf__elem_clear(views);
            return s;
        }
        views->n = c + 1;
    }
    return NULL;
}

static wf_status *batch_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    batch_it *b = (batch_it *)it;
    if (b->ended) {
        *end = true;
        return NULL;
    }
    int k = 0;
    int64_t t0 = wf__ds_now(), in_ns = 0;
    if (b->in->vt->take_batch && !b->p->padded) {
        /* a parallel map filled the whole batch (async.c's batch mode) */
        bool got = b->in->vt->take_batch(b->in, b->p->n, out);
        in_ns = wf__ds_now() - t0;
        if (got) {
            wf__stage_count(it, 0, out);
            b->index++;
            return NULL;
        }
    }
    wf_status *s = NULL;
    bool direct = false; /* rows are copied into *out as they come (b->buf[0] keeps the first's shapes) */
    while (k < b->p->n) {
        bool e_end;
        int64_t a = wf__ds_now();
        wf__elem *slot = direct && k > 0 ? &b->buf[1] : &b->buf[k];
        /* a map writes the element straight into its row when it can (row_into then copies nothing) */
        wf__elem into = {0};
        if (direct && k > 0 && b->in->vt->next_into) {
            wf_status *vs = wf__ds_row_views(out, k, &into);
            wf_status_free(vs); /* without views the element is copied */
        }
        s = wf__ds_next_into(b->in, slot, &e_end, into.n ? &into : NULL);
        wf__elem_clear(&into);
        in_ns += wf__ds_now() - a;
        if (s) break;
        if (e_end) {
            b->ended = true;
            break;
        }
        if (k == 0 && !b->p->padded && wf__elem_plain(&b->buf[0])) {
            direct = true;
            for (int c = 0; c < b->buf[0].n && !s; c++) {
                const wf_tensor *t = b->buf[0].t[c];
                int64_t dims[WF_MAX_RANK];
                dims[0] = b->p->n;
                memcpy(dims + 1, t->dims, (size_t)t->rank * sizeof dims[0]);
                s = wf__tensor_alloc(t->dtype, t->rank + 1, dims, "a batch", &out->t[c]);
                out->n = c + 1;
            }
            if (!s) s = row_into(b, &b->buf[0], &b->buf[0], 0, out);
        } else if (direct) {
            s = row_into(b, &b->buf[0], slot, k, out);
            wf__elem_clear(slot);
        }
        if (s) break;
        k++;
    }
    if (direct && !s) {
        if (b->ended && b->p->drop && k < b->p->n) {
            wf__elem_clear(out);
            *end = true;
        } else if (k < b->p->n) {
            /* the last, smaller batch: its k rows into a tensor of that size */
            wf__elem full = *out;
            memset(out, 0, sizeof *out);
            for (int c = 0; c < full.n && !s; c++) {
                const wf_tensor *t = full.t[c];
                int64_t dims[WF_MAX_RANK];
                memcpy(dims, t->dims, (size_t)t->rank * sizeof dims[0]);
                dims[0] = k;
                s = wf__tensor_alloc(t->dtype, t->rank, dims, "a batch", &out->t[c]);
                out->n = c + 1;
                if (!s && out->t[c]->bytes) memcpy(out->t[c]->data, t->data, out->t[c]->bytes);
            }
            wf__elem_clear(&full);
        }
    } else if (!s && k && !(b->ended && b->p->drop && k < b->p->n)) {
        s = make_batch(b, k, out);
    } else if (!s) {
        *end = true;
    }
    for (int i = 0; i <= k && i < b->p->n; i++) wf__elem_clear(&b->buf[i]);
    if (b->p->n > 1) wf__elem_clear(&b->buf[1]);
    if (s) {
        wf__elem_clear(out);
        s = wf__status_wrap(s, "%s stage, batch %lld", b->base.st->name, (long long)b->index);
    } else if (!*end) {
        wf__stage_count(it, wf__ds_now() - t0 - in_ns, out);
    }
    b->index++;
    return s;
}

static wf_status *batch_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    batch_it *b = (batch_it *)it;
    if (b->ended) return NULL;
    int64_t want = n * b->p->n, got = 0;
    WF__TRY(wf__ds_skip(b->in, want, &got));
    *done = got / b->p->n;
    if (got < want) {
        b->ended = true;
        if (got % b->p->n && !b->p->drop) ++*done;
    }
    b->index += *done;
    return NULL;
}

static void batch_free(wf__ds_it *it)
{
    batch_it *b = (batch_it *)it;
    wf__ds_it_free(b->in);
    wf__free(b->buf);
    wf__stage_fini(it);
    wf__free(b);
}

static const wf__ds_it_vt batch_vt = {batch_next, batch_skip, batch_free};

static wf_status *batch_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    const batch_p *bp = ds->params;
    batch_it *b = wf__calloc(1, sizeof *b);
    if (!b) return wf__oom("a batch iterator", sizeof *b);
    b->p = bp;
    b->buf = wf__calloc((size_t)bp->n + 1, sizeof *b->buf);
    wf_status *s = b->buf ? NULL : wf__oom("a batch's elements", ((size_t)bp->n + 1) * sizeof *b->buf);
    if (!s) s = wf__stage_init(&b->base, &batch_vt, p, bp->padded ? "padded_batch" : "batch", depth);
    if (!s && !bp->padded) s = wf__ds_make_for_batch(ds->in[0], p, epoch, depth + 1, bp->n, &b->in);
    else if (!s) s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &b->in);
    if (s) {
        b->base.vt = &batch_vt;
        batch_free(&b->base);
        return s;
    }
    *out = &b->base;
    return NULL;
}

static const wf__ds_kind batch_kind = {"batch", batch_make, batch_free_p};

static int64_t batched_card(int64_t c, int64_t n, bool drop)
{
    if (c < 0) return c;
    return drop ? c / n : (c + n - 1) / n;
}

static wf_status *need_in(const wf_dataset *in, wf_dataset **out, const char *fn)
{
    if (!in || !out) return wf__status(WF_INVALID_ARGUMENT, "%s: NULL dataset or out", fn);
    *out = NULL;
    return NULL;
}

/* Batches of up to 2^31 elements: the element buffer is allocated per iterator. */
#define MAX_BATCH ((int64_t)1 << 24)

wf_status *wf_dataset_batch(wf_dataset *in, int64_t n, int drop_remainder, wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_batch"));
    if (n < 1 || n > MAX_BATCH)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_batch: batch size %lld must be in [1, %lld]", (long long)n,
                          (long long)MAX_BATCH);
    batch_p *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("a batch dataset", sizeof *p);
    p->n = n;
    p->drop = drop_remainder != 0;
    return wf__ds_new(&batch_kind, p, in, NULL, in->ncomp, batched_card(wf_dataset_cardinality(in), n, p->drop),
                      wf__ds_mix((uint64_t)n, p->drop), out);
}

wf_status *wf_dataset_padded_batch(wf_dataset *in, int64_t n, int drop_remainder, wf_tensor *const *padded_shapes,
                                   wf_tensor *const *padding_values, wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_padded_batch"));
    if (n < 1 || n > MAX_BATCH)
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_padded_batch: batch size %lld must be in [1, %lld]",
                          (long long)n, (long long)MAX_BATCH);
    if ((padded_shapes || padding_values) && in->ncomp < 1)
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_dataset_padded_batch: padded shapes or values need the input's component count, which "
                          "is not known before running (a map graph fixes it)");
    batch_p *p = wf__calloc(1, sizeof *p);
    if (!p) return wf__oom("a padded_batch dataset", sizeof *p);
    p->n = n;
    p->drop = drop_remainder != 0;
    p->padded = true;
    p->ncomp = in->ncomp;
    uint64_t fp = wf__ds_mix((uint64_t)n, p->drop + 2);
    for (int c = 0; c < p->ncomp; c++) {
        if (padded_shapes && padded_shapes[c]) {
            const wf_tensor *sh = padded_shapes[c];
            if (sh->dtype != WF_I64 || sh->rank != 1 || sh->dims[0] > WF_MAX_RANK || !sh->data) {
                batch_free_p(p);
                return wf__status(WF_INVALID_ARGUMENT,
                                  "wf_dataset_padded_batch: padded shape %d must be an i64 vector in host memory (-1: "
                                  "the batch's largest)", c);
            }
            p->has_shape[c] = true;
            for (int d = 0; d < WF_MAX_RANK; d++) p->shape[c][d] = d < sh->dims[0] ? ((const int64_t *)sh->data)[d] : -1;
            for (int d = 0; d < sh->dims[0]; d++) fp = wf__ds_mix(fp, (uint64_t)p->shape[c][d]);
        }
        if (padding_values && padding_values[c]) {
            const wf_tensor *v = padding_values[c];
            if (v->rank != 0 || v->device || v->dtype == WF_STRING) {
                batch_free_p(p);
                return wf__status(WF_INVALID_ARGUMENT,
                                  "wf_dataset_padded_batch: padding value %d must be a numeric scalar in host memory", c);
            }
            p->padv[c] = wf_tensor_ref(padding_values[c]);
        }
    }
    p->ncomp = in->ncomp;
    wf_status *s = wf__ds_new(&batch_kind, p, in, NULL, in->ncomp, batched_card(wf_dataset_cardinality(in), n, p->drop),
                              fp, out);
    return s;
}

/* ---- unbatch --------------------------------------------------------------------------------------- */

typedef struct unbatch_it {
    wf__ds_it base;
    wf__ds_it *in;
    wf__elem cur;
    int64_t row, rows;
} unbatch_it;

static wf_status *unbatch_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    unbatch_it *u = (unbatch_it *)it;
    while (u->row >= u->rows) {
        wf__elem_clear(&u->cur);
        u->row = u->rows = 0;
        WF__TRY(wf__ds_next(u->in, &u->cur, end));
        if (*end) return NULL;
        for (int c = 0; c < u->cur.n; c++) {
            const wf_tensor *t = u->cur.t[c];
            if (t->rank < 1 || t->device || (c && t->dims[0] != u->cur.t[0]->dims[0])) {
                wf__elem_clear(&u->cur);
                return wf__status(WF_INVALID_ARGUMENT,
                                  "unbatch: component %d is %s; every component needs the same first dim in host memory",
                                  c, t->rank < 1 ? "a scalar" : t->device ? "in device memory" : "of another length");
            }
        }
        u->rows = u->cur.n ? u->cur.t[0]->dims[0] : 0;
    }
    int64_t t0 = wf__ds_now();
    for (int c = 0; c < u->cur.n; c++) {
        wf_status *s = wf__ds_row(u->cur.t[c], u->row, &out->t[c]);
        if (s) {
            wf__elem_clear(out);
            return s;
        }
        out->n = c + 1;
    }
    u->row++;
    wf__stage_count(it, wf__ds_now() - t0, out);
    return NULL;
}

static void unbatch_free(wf__ds_it *it)
{
    unbatch_it *u = (unbatch_it *)it;
    wf__ds_it_free(u->in);
    wf__elem_clear(&u->cur);
    wf__stage_fini(it);
    wf__free(u);
}

static const wf__ds_it_vt unbatch_vt = {unbatch_next, NULL, unbatch_free};

static wf_status *unbatch_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    unbatch_it *u = wf__calloc(1, sizeof *u);
    if (!u) return wf__oom("an unbatch iterator", sizeof *u);
    wf_status *s = wf__stage_init(&u->base, &unbatch_vt, p, "unbatch", depth);
    if (!s) s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &u->in);
    if (s) {
        u->base.vt = &unbatch_vt;
        unbatch_free(&u->base);
        return s;
    }
    *out = &u->base;
    return NULL;
}

static const wf__ds_kind unbatch_kind = {"unbatch", unbatch_make, NULL};

wf_status *wf_dataset_unbatch(wf_dataset *in, wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_unbatch"));
    return wf__ds_new(&unbatch_kind, NULL, in, NULL, in->ncomp, WF_DATASET_UNKNOWN, 0x756e62ull, out);
}

/* ---- shuffle --------------------------------------------------------------------------------------- */

typedef struct shuffle_p {
    int64_t buffer;
    uint64_t seed;
    bool reshuffle;
} shuffle_p;

typedef struct shuffle_it {
    wf__ds_it base;
    const shuffle_p *p;
    wf__ds_it *in;
    wf__elem *buf;
    int64_t count, cap;
    uint64_t rng;
    bool in_end;
    /* over a random-access source: the buffer holds element indices (see pipeline.h) */
    const wf_dataset *direct;
    int64_t *ibuf, next_index, n_src;
} shuffle_it;

uint64_t wf__ds_draw_below(uint64_t *state, uint64_t bound)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound, r;
    do {
        *state += 0x9E3779B97F4A7C15ull;
        r = wf__ds_mix(*state, 0);
    } while (r >= limit);
    return r % bound;
}

static wf_status *shuffle_fill(shuffle_it *sh, int64_t *in_ns)
{
    while (!sh->in_end && sh->count < sh->p->buffer) {
        if (sh->count == sh->cap) {
            int64_t cap = sh->cap ? 2 * sh->cap : 64;
            if (cap > sh->p->buffer) cap = sh->p->buffer;
            wf__elem *v = wf__realloc(sh->buf, (size_t)sh->cap * sizeof *v, (size_t)cap * sizeof *v);
            if (!v) return wf__oom("a shuffle buffer", (size_t)cap * sizeof *v);
            sh->buf = v;
            sh->cap = cap;
        }
        bool end;
        int64_t a = wf__ds_now();
        wf_status *s = wf__ds_next(sh->in, &sh->buf[sh->count], &end);
        *in_ns += wf__ds_now() - a;
        if (s) return s;
        if (end) {
            sh->in_end = true;
            break;
        }
        wf__pipe_hold(sh->base.pipe, sh->base.st, (int64_t)wf__elem_bytes(&sh->buf[sh->count]));
        sh->count++;
    }
    return NULL;
}

static wf_status *shuffle_direct(shuffle_it *sh, wf__elem *out, bool *end)
{
    int64_t t0 = wf__ds_now();
    while (sh->count < sh->p->buffer && sh->next_index < sh->n_src) {
        if (sh->count == sh->cap) {
            int64_t cap = sh->cap ? 2 * sh->cap : 1024;
            if (cap > sh->p->buffer) cap = sh->p->buffer;
            int64_t *v = wf__realloc(sh->ibuf, (size_t)sh->cap * sizeof *v, (size_t)cap * sizeof *v);
            if (!v) return wf__oom("a shuffle buffer", (size_t)cap * sizeof *v);
            wf__pipe_hold(sh->base.pipe, sh->base.st, (cap - sh->cap) * (int64_t)sizeof *v);
            sh->ibuf = v;
            sh->cap = cap;
        }
        sh->ibuf[sh->count++] = sh->next_index++;
    }
    if (!sh->count) {
        *end = true;
        return NULL;
    }
    int64_t j = (int64_t)wf__ds_draw_below(&sh->rng, (uint64_t)sh->count);
    int64_t i = sh->ibuf[j];
    sh->ibuf[j] = sh->ibuf[--sh->count];
    WF__TRY(wf__ds_get(sh->direct, i, out));
    wf__stage_count(&sh->base, wf__ds_now() - t0, out);
    return NULL;
}

static wf_status *shuffle_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    shuffle_it *sh = (shuffle_it *)it;
    if (sh->direct) return shuffle_direct(sh, out, end);
    int64_t t0 = wf__ds_now(), in_ns = 0;
    WF__TRY(shuffle_fill(sh, &in_ns));
    if (!sh->count) {
        *end = true;
        return NULL;
    }
    int64_t j = (int64_t)wf__ds_draw_below(&sh->rng, (uint64_t)sh->count);
    *out = sh->buf[j];
    sh->buf[j] = sh->buf[--sh->count];
    memset(&sh->buf[sh->count], 0, sizeof sh->buf[0]);
    wf__pipe_hold(sh->base.pipe, sh->base.st, -(int64_t)wf__elem_bytes(out));
    wf__stage_count(it, wf__ds_now() - t0 - in_ns, out);
    return NULL;
}

static void shuffle_free(wf__ds_it *it)
{
    shuffle_it *sh = (shuffle_it *)it;
    wf__ds_it_free(sh->in);
    for (int64_t i = 0; sh->buf && i < sh->count; i++) wf__elem_clear(&sh->buf[i]);
    wf__free(sh->buf);
    wf__free(sh->ibuf);
    wf__stage_fini(it);
    wf__free(sh);
}

static const wf__ds_it_vt shuffle_vt = {shuffle_next, NULL, shuffle_free};

static wf_status *shuffle_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    shuffle_it *sh = wf__calloc(1, sizeof *sh);
    if (!sh) return wf__oom("a shuffle iterator", sizeof *sh);
    sh->p = ds->params;
    sh->rng = wf__ds_mix(sh->p->seed, sh->p->reshuffle ? epoch : 0);
    wf_status *s = wf__stage_init(&sh->base, &shuffle_vt, p, "shuffle", depth);
    if (!s && wf__ds_random_access(ds->in[0])) {
        sh->direct = ds->in[0];
        sh->n_src = wf_dataset_cardinality(ds->in[0]);
    } else if (!s) {
        s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &sh->in);
    }
    if (s) {
        sh->base.vt = &shuffle_vt;
        shuffle_free(&sh->base);
        return s;
    }
    *out = &sh->base;
    return NULL;
}

static const wf__ds_kind shuffle_kind = {"shuffle", shuffle_make, wf__free};

wf_status *wf_dataset_shuffle(wf_dataset *in, int64_t buffer, uint64_t seed, int reshuffle_each_iteration,
                              wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_shuffle"));
    if (buffer < 1 || buffer > ((int64_t)1 << 40))
        return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_shuffle: buffer size %lld must be in [1, 2^40]",
                          (long long)buffer);
    shuffle_p *p = wf__malloc(sizeof *p);
    if (!p) return wf__oom("a shuffle dataset", sizeof *p);
    *p = (shuffle_p){buffer, seed, reshuffle_each_iteration != 0};
    return wf__ds_new(&shuffle_kind, p, in, NULL, in->ncomp, wf_dataset_cardinality(in),
                      wf__ds_mix(wf__ds_mix((uint64_t)buffer, seed), p->reshuffle), out);
}

/* ---- repeat ---------------------------------------------------------------------------------------- */

typedef struct repeat_it {
    wf__ds_it base;
    const wf_dataset *src;
    int64_t count, pass;
    uint64_t epoch;
    int depth;
    wf__ds_it *in;
    bool pass_empty; /* the current pass has produced nothing yet */
} repeat_it;

static wf_status *repeat_open(repeat_it *r)
{
    wf__ds_it_free(r->in);
    r->in = NULL;
    r->pass_empty = true;
    return wf__ds_make(r->src, r->base.pipe, wf__ds_mix(r->epoch, (uint64_t)r->pass), r->depth + 1, &r->in);
}

static wf_status *repeat_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    repeat_it *r = (repeat_it *)it;
    for (;;) {
        if (!r->in) {
            *end = true;
            return NULL;
        }
        WF__TRY(wf__ds_next(r->in, out, end));
        if (!*end) {
            r->pass_empty = false;
            wf__stage_count(it, 0, NULL);
            return NULL;
        }
        *end = false;
        bool was_empty = r->pass_empty;
        r->pass++;
        if ((r->count >= 0 && r->pass >= r->count) || was_empty) {
            wf__ds_it_free(r->in);
            r->in = NULL;
            continue;
        }
        WF__TRY(repeat_open(r));
    }
}

static wf_status *repeat_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    repeat_it *r = (repeat_it *)it;
    while (*done < n && r->in) {
        int64_t got = 0;
        WF__TRY(wf__ds_skip(r->in, n - *done, &got));
        *done += got;
        if (got) r->pass_empty = false;
        if (*done == n) break;
        bool was_empty = r->pass_empty;
        r->pass++;
        if ((r->count >= 0 && r->pass >= r->count) || was_empty) {
            wf__ds_it_free(r->in);
            r->in = NULL;
            break;
        }
        WF__TRY(repeat_open(r));
    }
    return NULL;
}

static void repeat_free(wf__ds_it *it)
{
    repeat_it *r = (repeat_it *)it;
    wf__ds_it_free(r->in);
    wf__stage_fini(it);
    wf__free(r);
}

static const wf__ds_it_vt repeat_vt = {repeat_next, repeat_skip, repeat_free};

static wf_status *repeat_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    repeat_it *r = wf__calloc(1, sizeof *r);
    if (!r) return wf__oom("a repeat iterator", sizeof *r);
    r->src = ds->in[0];
    r->count = *(const int64_t *)ds->params;
    r->epoch = epoch;
    r->depth = depth;
    wf_status *s = wf__stage_init(&r->base, &repeat_vt, p, "repeat", depth);
    if (!s && r->count != 0) s = repeat_open(r);
    if (s) {
        r->base.vt = &repeat_vt;
        repeat_free(&r->base);
        return s;
    }
    *out = &r->base;
    return NULL;
}

static const wf__ds_kind repeat_kind = {"repeat", repeat_make, wf__free};

wf_status *wf_dataset_repeat(wf_dataset *in, int64_t count, wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_repeat"));
    if (count < -1) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_repeat: count %lld (use -1 for forever)", (long long)count);
    int64_t *p = wf__malloc(sizeof *p);
    if (!p) return wf__oom("a repeat dataset", sizeof *p);
    *p = count;
    int64_t c = wf_dataset_cardinality(in), card;
    if (count == 0 || c == 0) card = 0;
    else if (count < 0) card = WF_DATASET_INFINITE;
    else if (c < 0) card = c;
    else card = c > INT64_MAX / count ? WF_DATASET_INFINITE : c * count;
    return wf__ds_new(&repeat_kind, p, in, NULL, in->ncomp, card, (uint64_t)count, out);
}

/* ---- take and skip --------------------------------------------------------------------------------- */

typedef struct take_it {
    wf__ds_it base;
    wf__ds_it *in;
    int64_t count, seen;
    bool is_skip;
} take_it;

static wf_status *take_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    take_it *t = (take_it *)it;
    if (t->is_skip && t->seen < t->count) {
        int64_t got = 0;
        WF__TRY(wf__ds_skip(t->in, t->count - t->seen, &got));
        t->seen += got;
        if (t->seen < t->count) {
            *end = true;
            return NULL;
        }
    }
    if (!t->is_skip && t->count >= 0 && t->seen >= t->count) {
        *end = true;
        return NULL;
    }
    WF__TRY(wf__ds_next(t->in, out, end));
    if (!*end && !t->is_skip) t->seen++;
    if (!*end) wf__stage_count(it, 0, NULL);
    return NULL;
}

static wf_status *take_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    take_it *t = (take_it *)it;
    if (t->is_skip) {
        int64_t got = 0;
        if (t->seen < t->count) {
            WF__TRY(wf__ds_skip(t->in, t->count - t->seen, &got));
            t->seen += got;
            if (t->seen < t->count) return NULL;
        }
        return wf__ds_skip(t->in, n, done);
    }
    int64_t left = t->count < 0 ? n : t->count - t->seen;
    WF__TRY(wf__ds_skip(t->in, n < left ? n : left, done));
    t->seen += *done;
    return NULL;
}

static void take_free(wf__ds_it *it)
{
    take_it *t = (take_it *)it;
    wf__ds_it_free(t->in);
    wf__stage_fini(it);
    wf__free(t);
}

static const wf__ds_it_vt take_vt = {take_next, take_skip, take_free};

static wf_status *take_make_common(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out,
                                   bool is_skip)
{
    take_it *t = wf__calloc(1, sizeof *t);
    if (!t) return wf__oom("a take/skip iterator", sizeof *t);
    t->count = *(const int64_t *)ds->params;
    t->is_skip = is_skip;
    wf_status *s = wf__stage_init(&t->base, &take_vt, p, is_skip ? "skip" : "take", depth);
    if (!s) s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &t->in);
    if (s) {
        t->base.vt = &take_vt;
        take_free(&t->base);
        return s;
    }
    *out = &t->base;
    return NULL;
}

static wf_status *take_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    return take_make_common(ds, p, epoch, depth, out, false);
}

static wf_status *skip_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    return take_make_common(ds, p, epoch, depth, out, true);
}

static const wf__ds_kind take_kind = {"take", take_make, wf__free};
static const wf__ds_kind skip_kind = {"skip", skip_make, wf__free};

wf_status *wf_dataset_take(wf_dataset *in, int64_t count, wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_take"));
    if (count < -1) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_take: count %lld (use -1 for all)", (long long)count);
    int64_t *p = wf__malloc(sizeof *p);
    if (!p) return wf__oom("a take dataset", sizeof *p);
    *p = count;
    int64_t c = wf_dataset_cardinality(in), card = count < 0 ? c : c == WF_DATASET_INFINITE ? count : c < 0 ? c : c < count ? c : count;
    return wf__ds_new(&take_kind, p, in, NULL, in->ncomp, card, (uint64_t)count, out);
}

wf_status *wf_dataset_skip(wf_dataset *in, int64_t count, wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_skip"));
    if (count < 0) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_skip: count %lld must be >= 0", (long long)count);
    int64_t *p = wf__malloc(sizeof *p);
    if (!p) return wf__oom("a skip dataset", sizeof *p);
    *p = count;
    int64_t c = wf_dataset_cardinality(in), card = c < 0 ? c : c > count ? c - count : 0;
    return wf__ds_new(&skip_kind, p, in, NULL, in->ncomp, card, (uint64_t)count, out);
}

/* ---- zip ------------------------------------------------------------------------------------------- */

typedef struct zip_it {
    wf__ds_it base;
    wf__ds_it *a, *b;
} zip_it;

static wf_status *zip_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    zip_it *z = (zip_it *)it;
    wf__elem ea, eb;
    bool enda, endb;
    WF__TRY(wf__ds_next(z->a, &ea, &enda));
    wf_status *s = wf__ds_next(z->b, &eb, &endb);
    if (s || enda || endb) {
        wf__elem_clear(&ea);
        wf__elem_clear(&eb);
        if (!s) *end = true;
        return s;
    }
    if (ea.n + eb.n > WF__DS_MAXC) {
        int na = ea.n, nb = eb.n;
        wf__elem_clear(&ea);
        wf__elem_clear(&eb);
        return wf__status(WF_INVALID_ARGUMENT, "zip: %d + %d components; an element holds at most %d", na, nb, WF__DS_MAXC);
    }
    *out = ea;
    for (int i = 0; i < eb.n; i++) out->t[out->n++] = eb.t[i];
    wf__stage_count(it, 0, NULL);
    return NULL;
}

static wf_status *zip_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    zip_it *z = (zip_it *)it;
    int64_t da = 0, db = 0;
    WF__TRY(wf__ds_skip(z->a, n, &da));
    WF__TRY(wf__ds_skip(z->b, n, &db));
    *done = da < db ? da : db;
    return NULL;
}

static void zip_free(wf__ds_it *it)
{
    zip_it *z = (zip_it *)it;
    wf__ds_it_free(z->a);
    wf__ds_it_free(z->b);
    wf__stage_fini(it);
    wf__free(z);
}

static const wf__ds_it_vt zip_vt = {zip_next, zip_skip, zip_free};

static wf_status *zip_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    zip_it *z = wf__calloc(1, sizeof *z);
    if (!z) return wf__oom("a zip iterator", sizeof *z);
    wf_status *s = wf__stage_init(&z->base, &zip_vt, p, "zip", depth);
    if (!s) s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &z->a);
    if (!s) s = wf__ds_make(ds->in[1], p, epoch, depth + 1, &z->b);
    if (s) {
        z->base.vt = &zip_vt;
        zip_free(&z->base);
        return s;
    }
    *out = &z->base;
    return NULL;
}

static const wf__ds_kind zip_kind = {"zip", zip_make, NULL};

static int64_t min_card(int64_t a, int64_t b)
{
    if (a == WF_DATASET_INFINITE) return b;
    if (b == WF_DATASET_INFINITE) return a;
    if (a < 0 || b < 0) return WF_DATASET_UNKNOWN;
    return a < b ? a : b;
}

wf_status *wf_dataset_zip(wf_dataset *const *ins, int n, wf_dataset **out)
{
    if (!ins || !out || n < 1) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_zip: needs 1 or more datasets and out");
    *out = NULL;
    for (int i = 0; i < n; i++)
        if (!ins[i]) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_zip: dataset %d is NULL", i);
    /* zip(a, b, c) is zip(zip(a, b), c): components concatenate in order */
    wf_dataset *acc = ins[0];
    atomic_fetch_add(&acc->refs, 1);
    for (int i = 1; i < n; i++) {
        int nc = acc->ncomp && ins[i]->ncomp ? acc->ncomp + ins[i]->ncomp : 0;
        if (nc > WF__DS_MAXC) {
            wf_dataset_free(acc);
            return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_zip: %d components; an element holds at most %d", nc,
                              WF__DS_MAXC);
        }
        wf_dataset *z = NULL;
        wf_status *s = wf__ds_new(&zip_kind, NULL, acc, ins[i], nc,
                                  min_card(wf_dataset_cardinality(acc), wf_dataset_cardinality(ins[i])), 0x7a6970ull, &z);
        wf_dataset_free(acc);
        if (s) return s;
        acc = z;
    }
    *out = acc;
    return NULL;
}

/* ---- ignore_errors --------------------------------------------------------------------------------- */

typedef struct pass_it {
    wf__ds_it base;
    wf__ds_it *in;
    int64_t dropped;
} pass_it;

static wf_status *ignore_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    pass_it *g = (pass_it *)it;
    for (;;) {
        wf_status *s = wf__ds_next(g->in, out, end);
        if (!s) {
            if (!*end) wf__stage_count(it, 0, NULL);
            return NULL;
        }
        if (wf_status_code(s) == WF_OUT_OF_MEMORY) return s;
        wf__elem_clear(out);
        wf_status_free(s);
        g->dropped++;
    }
}

static void pass_free(wf__ds_it *it)
{
    pass_it *g = (pass_it *)it;
    wf__ds_it_free(g->in);
    wf__stage_fini(it);
    wf__free(g);
}

static const wf__ds_it_vt ignore_vt = {ignore_next, NULL, pass_free};

static wf_status *ignore_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    pass_it *g = wf__calloc(1, sizeof *g);
    if (!g) return wf__oom("an ignore_errors iterator", sizeof *g);
    wf_status *s = wf__stage_init(&g->base, &ignore_vt, p, "ignore_errors", depth);
    if (!s) s = wf__ds_make(ds->in[0], p, epoch, depth + 1, &g->in);
    if (s) {
        g->base.vt = &ignore_vt;
        pass_free(&g->base);
        return s;
    }
    *out = &g->base;
    return NULL;
}

static const wf__ds_kind ignore_kind = {"ignore_errors", ignore_make, NULL};

wf_status *wf_dataset_ignore_errors(wf_dataset *in, wf_dataset **out)
{
    WF__TRY(need_in(in, out, "wf_dataset_ignore_errors"));
    return wf__ds_new(&ignore_kind, NULL, in, NULL, in->ncomp, WF_DATASET_UNKNOWN, 0x69676eull, out);
}
