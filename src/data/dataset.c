/*
 * Datasets: samples from in-memory tensors or IDX files, visited in batches, in a seeded order that is
 * the same on every machine (splitmix64 + Fisher-Yates), one epoch after another; and validation splits.
 *
 * Where the input pipeline grows: every batch is made by gather_batch() from the epoch's order. A
 * parallel map and prefetching to a device go between the two: a producer stage that runs gather_batch
 * (and the map, per sample, on a thread pool) for batches cursor+1..cursor+k into a ring of ready
 * batches, copying them to the device, while wf_dataset_next_batch pops from the ring. The order
 * depends only on (seed, epoch), so a producer running ahead computes exactly what the caller will see.
 */
#include <math.h>
#include <stdio.h>

#include "data/pipeline.h"

/* ---- the generator: splitmix64 (Steele, Lea, Flood 2014), chosen because it is a few lines of
 * 64-bit integer arithmetic, so the order of a seed does not depend on the platform or a libc. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) by rejection: a plain modulo would favour small values. */
static uint64_t below(uint64_t *state, uint64_t bound)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do r = splitmix64(state);
    while (r >= limit);
    return r % bound;
}

/* Epoch e starts the generator at splitmix64(seed) + e, so any epoch's order can be recomputed without
 * replaying the earlier ones. The seed is hashed first because with plain seed + e, seed 1's epochs would
 * be seed 0's shifted by one: two runs meant to differ would train on the same orders. */
static void make_order(wf_dataset *ds)
{
    if (ds->n) memcpy(ds->order, ds->index, (size_t)ds->n * sizeof(int64_t));
    if (!ds->shuffled) return;
    uint64_t state = ds->seed;
    state = splitmix64(&state) + (uint64_t)ds->epoch;
    for (int64_t i = ds->n - 1; i > 0; i--) {
        int64_t j = (int64_t)below(&state, (uint64_t)i + 1);
        int64_t t = ds->order[i];
        ds->order[i] = ds->order[j];
        ds->order[j] = t;
    }
}

void wf_dataset_free(wf_dataset *ds)
{
    if (!ds || atomic_fetch_sub(&ds->refs, 1) != 1) return;
    wf_iterator_free(ds->legacy);
    if (ds->kind && ds->kind->free_params) ds->kind->free_params(ds->params);
    wf_dataset_free(ds->in[0]);
    wf_dataset_free(ds->in[1]);
    wf_tensor_free(ds->x);
    wf_tensor_free(ds->y);
    wf__free(ds->index);
    wf__free(ds->order);
    wf__free(ds);
}

/* Takes new references to x and y and the rows `rows` (NULL: all of x's). */
static wf_status *make_dataset(wf_tensor *x, wf_tensor *y, const int64_t *rows, int64_t n, wf_dataset **out)
{
    wf_dataset *ds = wf__calloc(1, sizeof *ds);
    if (!ds) return wf__oom("a dataset", sizeof *ds);
    atomic_init(&ds->refs, 1); /* before anything can fail: wf_dataset_free drops this reference */
    size_t bytes = (size_t)(n ? n : 1) * sizeof(int64_t);
    ds->index = wf__malloc(bytes);
    ds->order = wf__malloc(bytes);
    if (!ds->index || !ds->order) {
        wf_dataset_free(ds);
        return wf__oom("a dataset's sample order", 2 * bytes);
    }
    for (int64_t i = 0; i < n; i++) ds->index[i] = rows ? rows[i] : i;
    ds->x = wf_tensor_ref(x);
    ds->y = y ? wf_tensor_ref(y) : NULL;
    ds->n = n;
    ds->batch = 32;
    ds->ncomp = y ? 2 : 1;
    ds->card = n;
    ds->fingerprint = wf__ds_mix(wf__ds_mix(0x617272617973ull, (uint64_t)n), (uint64_t)x->dtype * 131u + (uint64_t)x->rank);
    make_order(ds);
    *out = ds;
    return NULL;
}

wf_status *wf_dataset_from_tensors(wf_tensor *features, wf_tensor *labels, wf_dataset **out)
{
    if (!features || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_from_tensors: NULL features or out");
    char a[160], b[160];
    if (features->rank < 1)
        return wf__status(WF_INVALID_ARGUMENT, "dataset features must have a samples dim, got a scalar (%s)",
                          wf_dtype_name(features->dtype));
    if (!features->data || (labels && !labels->data))
        return wf__status(WF_INVALID_ARGUMENT, "dataset %s must be in host memory",
                          !features->data ? "features" : "labels");
    if (labels && (labels->rank < 1 || labels->dims[0] != features->dims[0]))
        return wf__status(WF_INVALID_ARGUMENT,
                          "dataset labels %s%s and features %s%s have different sample counts (first dims)",
                          wf_dtype_name(labels->dtype), wf__shape_str(labels->rank, labels->dims, a),
                          wf_dtype_name(features->dtype), wf__shape_str(features->rank, features->dims, b));
    return make_dataset(features, labels, NULL, features->dims[0], out);
}

void wf_dataset_options_init(wf_dataset_options *o)
{
    memset(o, 0, sizeof *o);
    o->label_dtype = WF_DTYPE_INVALID;
}

/* u8 pixels to f32 in [0, 1]. */
static wf_status *scale_u8(const char *path, wf_tensor **t)
{
    wf_tensor *f;
    WF__TRY(wf__tensor_alloc(WF_F32, (*t)->rank, (*t)->dims, path, &f));
    const uint8_t *src = (*t)->data;
    float *dst = f->data;
    for (int64_t i = 0; i < f->size; i++) dst[i] = (float)src[i] / 255.0f;
    wf_tensor_free(*t);
    *t = f;
    return NULL;
}

static wf_status *convert(const char *path, wf_tensor **t, wf_dtype dt)
{
    if ((*t)->dtype == dt) return NULL;
    if (!wf__dtype_valid(dt)) return wf__status(WF_INVALID_ARGUMENT, "%s: label_dtype %d is not a dtype", path, (int)dt);
    wf_tensor *c;
    WF__TRY(wf__tensor_alloc(dt, (*t)->rank, (*t)->dims, path, &c));
    wf__convert((*t)->data, (*t)->dtype, c->data, dt, c->size);
    wf_tensor_free(*t);
    *t = c;
    return NULL;
}

wf_status *wf_dataset_from_idx(const char *images_path, const char *labels_path, const wf_dataset_options *opts,
                               wf_dataset **out)
{
    if (!images_path || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_from_idx: NULL images path or out");
    wf_dataset_options o;
    wf_dataset_options_init(&o);
    if (opts) o = *opts;
    wf_tensor *x = NULL, *y = NULL;
    wf_status *s = wf_idx_read(images_path, &x);
    if (!s && labels_path) s = wf_idx_read(labels_path, &y);
    if (!s && y && y->dims[0] != x->dims[0])
        s = wf__status(WF_INVALID_ARGUMENT, "%s holds %lld labels but %s holds %lld images", labels_path,
                       (long long)y->dims[0], images_path, (long long)x->dims[0]);
    if (!s && o.scale && x->dtype == WF_U8) s = scale_u8(images_path, &x);
    if (!s && y && o.label_dtype != WF_DTYPE_INVALID) s = convert(labels_path, &y, o.label_dtype);
    if (!s) s = wf_dataset_from_tensors(x, y, out);
    /* the dataset holds its own references */
    wf_tensor_free(x);
    wf_tensor_free(y);
    return s;
}

int64_t wf_dataset_num_samples(const wf_dataset *ds) { return !ds ? 0 : ds->kind ? ds->card : ds->n; }

/* The array-only calls on a pipeline. */
static wf_status *arrays_only(const wf_dataset *ds, const char *fn)
{
    return wf__status(WF_INVALID_ARGUMENT,
                      "%s works on array datasets (wf_dataset_from_tensors, wf_dataset_from_idx); this is a %s "
                      "pipeline stage: use wf_dataset_batch, wf_dataset_shuffle and wf_dataset_take on pipelines",
                      fn, ds->kind->name);
}
int64_t wf_dataset_epoch(const wf_dataset *ds) { return ds ? ds->epoch : 0; }

wf_status *wf_dataset_set_batch(wf_dataset *ds, int64_t batch_size, int drop_remainder)
{
    if (!ds) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_set_batch: NULL dataset");
    if (ds->kind) return arrays_only(ds, "wf_dataset_set_batch");
    if (batch_size < 1)
        return wf__status(WF_INVALID_ARGUMENT, "dataset batch size must be at least 1, got %lld", (long long)batch_size);
    ds->batch = batch_size;
    ds->drop_remainder = drop_remainder != 0;
    return NULL;
}

void wf_dataset_set_shuffle(wf_dataset *ds, uint64_t seed)
{
    if (!ds || ds->kind) return;
    ds->shuffled = 1;
    ds->seed = seed;
    ds->cursor = 0;
    make_order(ds);
}

void wf_dataset_reset(wf_dataset *ds)
{
    if (!ds) return;
    ds->epoch++;
    if (ds->kind) {
        wf_iterator_free(ds->legacy);
        ds->legacy = NULL;
        return;
    }
    ds->cursor = 0;
    make_order(ds);
}

/* Copies rows rows[0..count) of t into a new tensor [count, t's other dims]. */
static wf_status *gather(const wf_tensor *t, const int64_t *rows, int64_t count, wf_tensor **out)
{
    int64_t dims[WF_MAX_RANK];
    memcpy(dims, t->dims, (size_t)t->rank * sizeof dims[0]);
    dims[0] = count;
    wf_tensor *b;
    WF__TRY(wf__tensor_alloc(t->dtype, t->rank, dims, "a dataset batch", &b));
    size_t row = t->dims[0] ? t->bytes / (size_t)t->dims[0] : 0;
    for (int64_t i = 0; i < count; i++)
        memcpy((char *)b->data + (size_t)i * row, (const char *)t->data + (size_t)rows[i] * row, row);
    *out = b;
    return NULL;
}

/* The one place batches are made (see the top of the file for the pipeline that will wrap it). */
static wf_status *gather_batch(const wf_dataset *ds, const int64_t *rows, int64_t count, wf_tensor **x,
                               wf_tensor **y)
{
    wf_tensor *bx = NULL, *by = NULL;
    WF__TRY(gather(ds->x, rows, count, &bx));
    if (ds->y && y) {
        wf_status *s = gather(ds->y, rows, count, &by);
        if (s) {
            wf_tensor_free(bx);
            return s;
        }
    }
    *x = bx;
    if (y) *y = by;
    return NULL;
}

wf_iterator *wf_dataset_current_iterator(wf_dataset *ds) { return ds ? ds->legacy : NULL; }
int wf_dataset_is_pipeline(const wf_dataset *ds) { return ds && ds->kind; }

/* A pipeline's (x, y): components 0 and 1 of its next element, from an iterator made at the first
 * call after a reset. The iterator is the dataset's next iteration, so shuffles reshuffle per epoch. */
static wf_status *pipeline_next_batch(wf_dataset *ds, wf_tensor **x, wf_tensor **y)
{
    *x = NULL;
    if (y) *y = NULL;
    if (!ds->legacy) {
        WF__TRY(wf_dataset_iterator(ds, NULL, &ds->legacy));
        /* the dataset owns this iterator: a reference back would keep both alive forever */
        ds->legacy->weak = true;
        atomic_fetch_sub(&ds->refs, 1);
    }
    wf_tensor *t[WF_DATASET_MAX_COMPONENTS];
    int n = 0;
    WF__TRY(wf_iterator_next(ds->legacy, t, WF_DATASET_MAX_COMPONENTS, &n));
    if (n == 0) return NULL;
    *x = t[0];
    if (y && n > 1) *y = t[1];
    else if (n > 1) wf_tensor_free(t[1]);
    for (int i = 2; i < n; i++) wf_tensor_free(t[i]);
    return NULL;
}

wf_status *wf_dataset_next_batch(wf_dataset *ds, wf_tensor **x, wf_tensor **y)
{
    if (!ds || !x) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_next_batch: NULL dataset or x");
    if (ds->kind) return pipeline_next_batch(ds, x, y);
    int64_t left = ds->n - ds->cursor;
    int64_t count = left < ds->batch ? left : ds->batch;
    if (count <= 0 || (ds->drop_remainder && count < ds->batch)) {
        *x = NULL;
        if (y) *y = NULL;
        return NULL;
    }
    WF__TRY(gather_batch(ds, ds->order + ds->cursor, count, x, y));
    ds->cursor += count;
    return NULL;
}

wf_status *wf_dataset_rows(const wf_dataset *ds, int64_t start, int64_t count, wf_tensor **x, wf_tensor **y)
{
    if (!ds || !x) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_rows: NULL dataset or x");
    if (ds->kind) return arrays_only(ds, "wf_dataset_rows");
    if (start < 0 || count < 0 || start > ds->n || count > ds->n - start)
        return wf__status(WF_INVALID_ARGUMENT, "dataset samples [%lld, %lld) are out of range: it holds %lld",
                          (long long)start, (long long)start + (long long)count, (long long)ds->n);
    return gather_batch(ds, ds->index + start, count, x, y);
}

wf_status *wf_dataset_split(const wf_dataset *ds, double val_fraction, wf_dataset **train, wf_dataset **val)
{
    if (!ds || !train || !val) return wf__status(WF_INVALID_ARGUMENT, "wf_dataset_split: NULL argument");
    if (ds->kind) return arrays_only(ds, "wf_dataset_split");
    if (!(val_fraction > 0 && val_fraction < 1))
        return wf__status(WF_INVALID_ARGUMENT, "validation fraction must be in (0, 1), got %g", val_fraction);
    int64_t n_val = (int64_t)llround((double)ds->n * val_fraction);
    if (n_val < 1 || n_val >= ds->n)
        return wf__status(WF_INVALID_ARGUMENT,
                          "a validation fraction of %g of %lld samples leaves %s set empty", val_fraction,
                          (long long)ds->n, n_val < 1 ? "the validation" : "the training");
    wf_dataset *t = NULL, *v = NULL;
    WF__TRY(make_dataset(ds->x, ds->y, ds->order, ds->n - n_val, &t));
    wf_status *s = make_dataset(ds->x, ds->y, ds->order + (ds->n - n_val), n_val, &v);
    if (s) {
        wf_dataset_free(t);
        return s;
    }
    t->batch = v->batch = ds->batch;
    t->drop_remainder = v->drop_remainder = ds->drop_remainder;
    *train = t;
    *val = v;
    return NULL;
}

/* ---- array datasets as pipeline sources ----------------------------------------------------------- */

typedef struct arrays_it {
    wf__ds_it base;
    const wf_dataset *ds;
    int64_t pos;
} arrays_it;

/* Row r of t as a new tensor of t's other dims. */
static wf_status *row_of(const wf_tensor *t, int64_t r, wf_tensor **out)
{
    WF__TRY(wf__tensor_alloc(t->dtype, t->rank - 1, t->dims + 1, "a dataset element", out));
    size_t row = (*out)->bytes;
    if (row) memcpy((*out)->data, (const char *)t->data + (size_t)r * row, row);
    return NULL;
}

wf_status *wf__arrays_get(const wf_dataset *ds, int64_t i, wf__elem *out)
{
    int64_t r = ds->index[i];
    wf__elem e = {0};
    wf_status *s = row_of(ds->x, r, &e.t[0]);
    e.n = 1;
    if (!s && ds->y) {
        s = row_of(ds->y, r, &e.t[1]);
        e.n = 2;
    }
    if (s) {
        wf__elem_clear(&e);
        return s;
    }
    *out = e;
    return NULL;
}

static wf_status *arrays_next(wf__ds_it *it, wf__elem *out, bool *end)
{
    arrays_it *a = (arrays_it *)it;
    if (a->pos >= a->ds->n) {
        *end = true;
        return NULL;
    }
    WF__TRY(wf__arrays_get(a->ds, a->pos, out));
    a->pos++;
    return NULL;
}

static wf_status *arrays_skip(wf__ds_it *it, int64_t n, int64_t *done)
{
    arrays_it *a = (arrays_it *)it;
    int64_t left = a->ds->n - a->pos;
    *done = n < left ? n : left;
    a->pos += *done;
    return NULL;
}

static void arrays_free(wf__ds_it *it) { wf__free(it); }

static const wf__ds_it_vt arrays_vt = {arrays_next, arrays_skip, arrays_free};

wf_status *wf__arrays_make(const wf_dataset *ds, wf__pipe *p, uint64_t epoch, int depth, wf__ds_it **out)
{
    (void)epoch;
    (void)depth;
    arrays_it *a = wf__calloc(1, sizeof *a);
    if (!a) return wf__oom("an array dataset's iterator", sizeof *a);
    a->base.vt = &arrays_vt;
    a->base.pipe = p;
    a->ds = ds;
    *out = &a->base;
    return NULL;
}
