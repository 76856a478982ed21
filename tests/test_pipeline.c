/* Input pipelines (issue 16): the tf.data stages against what tf.data documents for them (element
 * order, batching, padding, shuffling as a permutation, repeat/take/skip/zip arithmetic), parallel map's
 * determinism at every thread count, autotune's knobs and the RAM budget, iterator checkpoints that
 * resume at the same element, and the errors (naming stage, element and file). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"
#include "core/core.h"

static wf_dataset *range_ds(int64_t a, int64_t b)
{
    wf_dataset *d = NULL;
    CHECK_OK(wf_dataset_range(a, b, 1, &d));
    return d;
}

/* Collects scalar i64 component 0 of every element (up to cap); returns the count. */
static int collect(wf_dataset *ds, const wf_iterator_options *o, int64_t *v, int cap)
{
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(ds, o, &it));
    if (!it) return -1;
    int k = 0;
    for (;;) {
        wf_tensor *t[8];
        int n = 0;
        wf_status *s = wf_iterator_next(it, t, 8, &n);
        if (s) {
            CHECK_FAIL_("next: %s", wf_status_message(s));
            wf_status_free(s);
            break;
        }
        if (!n) break;
        if (k < cap) v[k] = wf_tensor_dtype(t[0]) == WF_I64 ? *(int64_t *)wf_tensor_data(t[0]) : -999;
        k++;
        for (int i = 0; i < n; i++) wf_tensor_free(t[i]);
    }
    wf_iterator_free(it);
    return k;
}

static void test_range_take_skip_repeat(void)
{
    wf_dataset *r = range_ds(0, 10), *t = NULL, *s = NULL, *rep = NULL, *neg = NULL;
    int64_t v[64];
    CHECK_INT(wf_dataset_cardinality(r), 10);
    CHECK_INT(collect(r, NULL, v, 64), 10);
    for (int i = 0; i < 10; i++) CHECK_INT(v[i], i);
    CHECK_OK(wf_dataset_skip(r, 3, &s));
    CHECK_OK(wf_dataset_take(s, 4, &t));
    CHECK_INT(wf_dataset_cardinality(t), 4);
    CHECK_INT(collect(t, NULL, v, 64), 4);
    for (int i = 0; i < 4; i++) CHECK_INT(v[i], 3 + i);
    CHECK_OK(wf_dataset_repeat(t, 3, &rep));
    CHECK_INT(wf_dataset_cardinality(rep), 12);
    CHECK_INT(collect(rep, NULL, v, 64), 12);
    for (int i = 0; i < 12; i++) CHECK_INT(v[i], 3 + i % 4);
    CHECK_OK(wf_dataset_range(5, -5, -3, &neg)); /* 5 2 -1 -4 */
    CHECK_INT(wf_dataset_cardinality(neg), 4);
    CHECK_INT(collect(neg, NULL, v, 64), 4);
    CHECK_INT(v[3], -4);
    wf_dataset *bad = NULL;
    CHECK_ERR(wf_dataset_range(0, 5, 0, &bad), WF_INVALID_ARGUMENT, "step");
    CHECK_ERR(wf_dataset_take(r, -2, &bad), WF_INVALID_ARGUMENT, "count");
    CHECK(!bad);
    /* repeat forever of an empty dataset ends instead of spinning */
    wf_dataset *empty = range_ds(0, 0), *forever = NULL;
    CHECK_OK(wf_dataset_repeat(empty, -1, &forever));
    CHECK_INT(collect(forever, NULL, v, 64), 0);
    wf_dataset_free(forever);
    wf_dataset_free(empty);
    wf_dataset_free(neg);
    wf_dataset_free(rep);
    wf_dataset_free(t);
    wf_dataset_free(s);
    wf_dataset_free(r);
}

static void test_batch_unbatch_padded(void)
{
    wf_dataset *r = range_ds(0, 10), *b = NULL, *bd = NULL, *u = NULL;
    CHECK_OK(wf_dataset_batch(r, 4, 0, &b));
    CHECK_OK(wf_dataset_batch(r, 4, 1, &bd));
    CHECK_INT(wf_dataset_cardinality(b), 3);
    CHECK_INT(wf_dataset_cardinality(bd), 2);
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(b, NULL, &it));
    int sizes[3] = {4, 4, 2};
    for (int k = 0; k < 3; k++) {
        wf_tensor *t = NULL;
        int n = 0;
        CHECK_OK(wf_iterator_next(it, &t, 1, &n));
        CHECK_INT(n, 1);
        if (!n) break;
        CHECK_INT(wf_tensor_rank(t), 1);
        CHECK_INT(wf_tensor_dims(t)[0], sizes[k]);
        CHECK_INT(((int64_t *)wf_tensor_data(t))[0], 4 * k);
        wf_tensor_free(t);
    }
    wf_tensor *t = NULL;
    int n = 7;
    CHECK_OK(wf_iterator_next(it, &t, 1, &n));
    CHECK_INT(n, 0);
    wf_iterator_free(it);
    int64_t v[16];
    CHECK_INT(collect(bd, NULL, v, 16), 2);
    CHECK_OK(wf_dataset_unbatch(b, &u));
    CHECK_INT(collect(u, NULL, v, 16), 10);
    for (int i = 0; i < 10; i++) CHECK_INT(v[i], i);

    /* padded_batch: rows of length i (values i+1), padded to the batch's longest with -1 */
    int64_t lens[5] = {1, 3, 2, 0, 4};
    wf_tensor *rows[5];
    for (int i = 0; i < 5; i++) {
        int64_t d = lens[i], buf[8];
        for (int j = 0; j < d; j++) buf[j] = i + 1;
        CHECK_OK(wf_tensor_new(WF_I64, 1, &d, buf, &rows[i]));
    }
    /* a dataset of variable-length rows: a map callback from the index */
    (void)rows;
    for (int i = 0; i < 5; i++) wf_tensor_free(rows[i]);
    wf_dataset_free(u);
    wf_dataset_free(bd);
    wf_dataset_free(b);
    wf_dataset_free(r);
}

/* map callback: element (i) -> (i * 10, row of length i % 4 filled with i) */
static wf_status *cb_var_rows(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)user, (void)index, (void)n_in;
    int64_t i = *(int64_t *)wf_tensor_data(in[0]), d = i % 4, buf[4], x = i * 10;
    for (int j = 0; j < d; j++) buf[j] = i;
    WF__TRY(wf_tensor_new(WF_I64, 0, NULL, &x, &out[0]));
    WF__TRY(wf_tensor_new(WF_I64, 1, &d, buf, &out[1]));
    *n_out = 2;
    return NULL;
}

static void test_padded_batch(void)
{
    wf_dataset *r = range_ds(0, 6), *m = NULL, *pb = NULL, *pb2 = NULL;
    wf_map_fn fn = {.fn = cb_var_rows, .n_outputs = 2};
    CHECK_OK(wf_dataset_map(r, &fn, NULL, &m));
    wf_dataset *plain = NULL;
    CHECK_OK(wf_dataset_batch(m, 3, 0, &plain));
    wf_iterator *it = NULL;
    wf_tensor *t[2] = {0};
    int n = 0;
    CHECK_OK(wf_dataset_iterator(plain, NULL, &it));
    CHECK_ERR(wf_iterator_next(it, t, 2, &n), WF_INVALID_ARGUMENT, "padded_batch pads");
    wf_iterator_free(it);
    CHECK_OK(wf_dataset_padded_batch(m, 3, 0, NULL, NULL, &pb));
    CHECK_OK(wf_dataset_iterator(pb, NULL, &it));
    /* batch 0: rows of 0, 1, 2 elements -> [3, 2]; batch 1: i = 3,4,5 -> lengths 3,0,1 -> [3, 3] */
    int64_t want0[6] = {0, 0, 1, 0, 2, 2}, want1[9] = {3, 3, 3, 0, 0, 0, 5, 0, 0};
    for (int b = 0; b < 2; b++) {
        CHECK_OK(wf_iterator_next(it, t, 2, &n));
        CHECK_INT(n, 2);
        if (n != 2) break;
        CHECK_INT(wf_tensor_dims(t[1])[0], 3);
        CHECK_INT(wf_tensor_dims(t[1])[1], b ? 3 : 2);
        const int64_t *got = wf_tensor_data(t[1]);
        for (int j = 0; j < (b ? 9 : 6); j++) CHECK_INT(got[j], b ? want1[j] : want0[j]);
        CHECK_INT(((int64_t *)wf_tensor_data(t[0]))[2], (3 * b + 2) * 10);
        wf_tensor_free(t[0]);
        wf_tensor_free(t[1]);
    }
    wf_iterator_free(it);
    /* a fixed padded shape [5] and padding value 7 */
    int64_t five = 5, seven = 7, one = 1;
    wf_tensor *shape = NULL, *padv = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, 1, &one, &five, &shape));
    CHECK_OK(wf_tensor_new(WF_I64, 0, NULL, &seven, &padv));
    wf_tensor *shapes[2] = {NULL, shape}, *pads[2] = {NULL, padv};
    CHECK_OK(wf_dataset_padded_batch(m, 6, 0, shapes, pads, &pb2));
    it = NULL;
    if (pb2) CHECK_OK(wf_dataset_iterator(pb2, NULL, &it));
    n = 0;
    if (it) CHECK_OK(wf_iterator_next(it, t, 2, &n));
    if (n == 2) {
        CHECK_INT(wf_tensor_dims(t[1])[1], 5);
        const int64_t *g = wf_tensor_data(t[1]);
        CHECK_INT(g[0], 7);           /* i = 0: empty row */
        CHECK_INT(g[5 * 3 + 2], 3);   /* i = 3: three 3s */
        CHECK_INT(g[5 * 3 + 3], 7);
        wf_tensor_free(t[0]);
        wf_tensor_free(t[1]);
    }
    wf_iterator_free(it);
    wf_tensor_free(shape);
    wf_tensor_free(padv);
    wf_dataset_free(pb2);
    wf_dataset_free(pb);
    wf_dataset_free(plain);
    wf_dataset_free(m);
    wf_dataset_free(r);
}

static wf_status *cb_identity(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)user, (void)index;
    for (int i = 0; i < n_in; i++) out[i] = wf_tensor_ref(in[i]);
    *n_out = n_in;
    return NULL;
}

static void test_shuffle(void)
{
    wf_dataset *r = range_ds(0, 100), *s1 = NULL, *s2 = NULL, *s3 = NULL, *fixed = NULL;
    CHECK_OK(wf_dataset_shuffle(r, 100, 42, 1, &s1));
    CHECK_OK(wf_dataset_shuffle(r, 100, 42, 1, &s2));
    CHECK_OK(wf_dataset_shuffle(r, 10, 42, 0, &fixed));
    int64_t a[100], b[100], c[100], d[100];
    CHECK_INT(collect(s1, NULL, a, 100), 100);
    CHECK_INT(collect(s2, NULL, b, 100), 100);
    CHECK(!memcmp(a, b, sizeof a)); /* same seed, same first iteration */
    int seen[100] = {0}, moved = 0;
    for (int i = 0; i < 100; i++) {
        if (a[i] >= 0 && a[i] < 100) seen[a[i]]++;
        moved += a[i] != i;
    }
    for (int i = 0; i < 100; i++) CHECK_INT(seen[i], 1);
    CHECK(moved > 80);
    CHECK_INT(collect(s1, NULL, c, 100), 100); /* the second iteration reshuffles */
    CHECK(memcmp(a, c, sizeof a) != 0);
    /* without reshuffling every iteration is the same; a buffer of 10 moves no element more than
     * 9 places earlier than it came (it must have entered the buffer first) */
    CHECK_INT(collect(fixed, NULL, c, 100), 100);
    CHECK_INT(collect(fixed, NULL, d, 100), 100);
    CHECK(!memcmp(c, d, sizeof c));
    for (int i = 0; i < 100; i++) CHECK(c[i] <= i + 9);
    /* the same draws over a source read element by element (a map in between) as over indices of a
     * random-access one: the same order */
    {
        wf_map_fn idf = {.fn = cb_identity};
        wf_dataset *m = NULL, *sm = NULL;
        CHECK_OK(wf_dataset_map(r, &idf, NULL, &m));
        CHECK_OK(wf_dataset_shuffle(m, 10, 42, 0, &sm));
        CHECK_INT(collect(sm, NULL, d, 100), 100);
        CHECK(!memcmp(c, d, sizeof c));
        wf_dataset_free(sm);
        wf_dataset_free(m);
    }
    CHECK_OK(wf_dataset_shuffle(r, 100, 43, 1, &s3));
    CHECK_INT(collect(s3, NULL, d, 100), 100);
    CHECK(memcmp(a, d, sizeof a) != 0);
    wf_dataset_free(s3);
    wf_dataset_free(fixed);
    wf_dataset_free(s2);
    wf_dataset_free(s1);
    wf_dataset_free(r);
}

static void test_zip_and_slices(void)
{
    float xs[6] = {0, 1, 2, 3, 4, 5};
    int64_t d[2] = {3, 2};
    wf_tensor *x = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, d, xs, &x));
    wf_dataset *sl = NULL, *r = range_ds(100, 200), *z = NULL;
    CHECK_OK(wf_dataset_from_tensor_slices(&x, 1, &sl));
    wf_dataset *ins[2] = {r, sl};
    CHECK_OK(wf_dataset_zip(ins, 2, &z));
    CHECK_INT(wf_dataset_cardinality(z), 3);
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(z, NULL, &it));
    for (int k = 0; k < 3; k++) {
        wf_tensor *t[2];
        int n = 0;
        CHECK_OK(wf_iterator_next(it, t, 2, &n));
        CHECK_INT(n, 2);
        if (n != 2) break;
        CHECK_INT(*(int64_t *)wf_tensor_data(t[0]), 100 + k);
        CHECK_INT(wf_tensor_rank(t[1]), 1);
        CHECK_NEAR(((float *)wf_tensor_data(t[1]))[1], 2 * k + 1, 0);
        wf_tensor_free(t[0]);
        wf_tensor_free(t[1]);
    }
    wf_tensor *t[1];
    int n = 0;
    CHECK_OK(wf_iterator_next(it, t, 2, &n));
    CHECK_INT(n, 0);
    wf_iterator_free(it);
    /* errors: mismatched first dims, a scalar, too small an output array */
    wf_tensor *y = NULL, *s = NULL;
    int64_t d2 = 4;
    CHECK_OK(wf_tensor_new(WF_F32, 1, &d2, NULL, &y));
    CHECK_OK(wf_tensor_new(WF_F32, 0, NULL, NULL, &s));
    wf_tensor *xy[2] = {x, y};
    wf_dataset *bad = NULL;
    CHECK_ERR(wf_dataset_from_tensor_slices(xy, 2, &bad), WF_INVALID_ARGUMENT, "component 1 has 4 rows");
    CHECK_ERR(wf_dataset_from_tensor_slices(&s, 1, &bad), WF_INVALID_ARGUMENT, "scalar");
    CHECK_OK(wf_dataset_iterator(z, NULL, &it));
    CHECK_ERR(wf_iterator_next(it, t, 1, &n), WF_INVALID_ARGUMENT, "2 components");
    wf_iterator_free(it);
    wf_tensor_free(s);
    wf_tensor_free(y);
    wf_tensor_free(x);
    wf_dataset_free(z);
    wf_dataset_free(r);
    wf_dataset_free(sl);
}

/* map callback: i -> i * i + the counter's low bits checked against the index */
static wf_status *cb_square(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)user, (void)n_in;
    int64_t i = *(int64_t *)wf_tensor_data(in[0]);
    if (i == 13) return wf_status_new(WF_INVALID_ARGUMENT, "thirteen is unlucky");
    /* a little work so that threads overlap */
    volatile double acc = 0;
    for (int k = 0; k < 2000; k++) acc += k * 1e-9;
    int64_t v[2] = {i * i, index & ((1ll << 40) - 1)}, d = 2;
    WF__TRY(wf_tensor_new(WF_I64, 1, &d, v, &out[0]));
    *n_out = 1;
    return NULL;
}

static void test_parallel_map_deterministic(void)
{
    wf_dataset *r = range_ds(0, 200), *sh = NULL;
    CHECK_OK(wf_dataset_shuffle(r, 50, 7, 0, &sh));
    int64_t ref[200];
    int nref = -1;
    int pars[4] = {1, 2, 4, WF_AUTOTUNE};
    for (int pi = 0; pi < 4; pi++) {
        wf_map_options mo;
        wf_map_options_init(&mo);
        mo.num_parallel_calls = pars[pi];
        wf_map_fn fn = {.fn = cb_square};
        wf_dataset *m = NULL, *ig = NULL;
        CHECK_OK(wf_dataset_map(sh, &fn, &mo, &m));
        CHECK_OK(wf_dataset_ignore_errors(m, &ig));
        wf_iterator *it = NULL;
        CHECK_OK(wf_dataset_iterator(ig, NULL, &it));
        int64_t got[200];
        int k = 0;
        for (;;) {
            wf_tensor *t = NULL;
            int n = 0;
            CHECK_OK(wf_iterator_next(it, &t, 1, &n));
            if (!n) break;
            const int64_t *v = wf_tensor_data(t);
            if (k < 200) got[k] = v[0];
            k++;
            wf_tensor_free(t);
        }
        wf_iterator_free(it);
        CHECK_INT(k, 199); /* 13 was dropped */
        if (nref < 0) {
            nref = k;
            memcpy(ref, got, sizeof ref);
        } else if (memcmp(ref, got, (size_t)k * sizeof got[0])) {
            CHECK_FAIL_("num_parallel_calls %d gave another order than 1", pars[pi]);
        }
        /* without ignore_errors the error names the stage and the element, and iteration goes on */
        CHECK_OK(wf_dataset_iterator(m, NULL, &it));
        int errors = 0, ok = 0;
        for (;;) {
            wf_tensor *t = NULL;
            int n = 0;
            wf_status *s = wf_iterator_next(it, &t, 1, &n);
            if (s) {
                errors++;
                CHECK_STR_CONTAINS(wf_status_message(s), "map stage, element");
                CHECK_STR_CONTAINS(wf_status_message(s), "thirteen is unlucky");
                wf_status_free(s);
                continue;
            }
            if (!n) break;
            ok++;
            wf_tensor_free(t);
        }
        CHECK_INT(errors, 1);
        CHECK_INT(ok, 199);
        wf_iterator_free(it);
        wf_dataset_free(ig);
        wf_dataset_free(m);
    }
    wf_dataset_free(sh);
    wf_dataset_free(r);
}

static void test_graph_map_and_filter(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, two, y, c5, keep;
    CHECK_OK(wf_placeholder(g, "x", WF_I64, 0, NULL, &x));
    CHECK_OK(wf_const_scalar(g, "two", WF_I64, 2, &two));
    CHECK_OK(wf_mul(g, "y", x, two, &y));
    CHECK_OK(wf_const_scalar(g, "five", WF_I64, 5, &c5));
    CHECK_OK(wf_binary(g, "Greater", "keep", x, c5, &keep));
    wf_map_fn fn = {.graph = g, .inputs = &x, .n_inputs = 1, .outputs = &y, .n_outputs = 1};
    wf_map_fn pred = {.graph = g, .inputs = &x, .n_inputs = 1, .outputs = &keep, .n_outputs = 1};
    wf_dataset *r = range_ds(0, 10), *m = NULL, *f = NULL, *mf = NULL;
    wf_map_options mo;
    wf_map_options_init(&mo);
    mo.num_parallel_calls = 2;
    CHECK_OK(wf_dataset_map(r, &fn, &mo, &m));
    CHECK_OK(wf_dataset_filter(r, &pred, &f));
    CHECK_INT(wf_dataset_cardinality(f), WF_DATASET_UNKNOWN);
    CHECK_OK(wf_dataset_map(f, &fn, NULL, &mf));
    int64_t v[16];
    CHECK_INT(collect(m, NULL, v, 16), 10);
    for (int i = 0; i < 10; i++) CHECK_INT(v[i], 2 * i);
    CHECK_INT(collect(mf, NULL, v, 16), 4);
    for (int i = 0; i < 4; i++) CHECK_INT(v[i], 2 * (6 + i));
    /* a function of two inputs given one-component elements: the error names the stage */
    wf_output xs[2] = {x, x};
    wf_map_fn two_in = {.graph = g, .inputs = xs, .n_inputs = 2, .outputs = &y, .n_outputs = 1};
    wf_dataset *bad = NULL;
    CHECK_OK(wf_dataset_map(r, &two_in, NULL, &bad));
    wf_iterator *it = NULL;
    wf_tensor *t = NULL;
    int n = 0;
    CHECK_OK(wf_dataset_iterator(bad, NULL, &it));
    CHECK_ERR(wf_iterator_next(it, &t, 1, &n), WF_INVALID_ARGUMENT, "map stage, element 0: the element has 1 components");
    wf_iterator_free(it);
    wf_dataset *none = NULL;
    wf_map_fn neither = {0};
    CHECK_ERR(wf_dataset_map(r, &neither, NULL, &none), WF_INVALID_ARGUMENT, "either a graph or a callback");
    wf_dataset_free(bad);
    wf_dataset_free(mf);
    wf_dataset_free(f);
    wf_dataset_free(m);
    wf_dataset_free(r);
    wf_graph_free(g);
}

static void test_prefetch_and_stats(void)
{
    wf_dataset *r = range_ds(0, 300), *m = NULL, *b = NULL, *p = NULL;
    wf_map_options mo;
    wf_map_options_init(&mo);
    mo.num_parallel_calls = WF_AUTOTUNE;
    wf_map_fn fn = {.fn = cb_square};
    CHECK_OK(wf_dataset_map(r, &fn, &mo, &m));
    wf_dataset *ig = NULL;
    CHECK_OK(wf_dataset_ignore_errors(m, &ig));
    CHECK_OK(wf_dataset_batch(ig, 8, 0, &b));
    CHECK_OK(wf_dataset_prefetch(b, WF_AUTOTUNE, &p));
    wf_iterator_options io;
    wf_iterator_options_init(&io);
    io.cpu_budget = 2;
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(p, &io, &it));
    int64_t total = 0, elems = 0;
    for (;;) {
        wf_tensor *t = NULL;
        int n = 0;
        CHECK_OK(wf_iterator_next(it, &t, 1, &n));
        if (!n) break;
        const int64_t *v = wf_tensor_data(t);
        for (int64_t i = 0; i < wf_tensor_dims(t)[0]; i++) total += v[2 * i], elems++;
        wf_tensor_free(t);
    }
    CHECK_INT(elems, 299);
    int64_t want = 0;
    for (int64_t i = 0; i < 300; i++) want += i == 13 ? 0 : i * i;
    CHECK_INT(total, want);
    wf_dataset_stage_stats st[8];
    int64_t peak = -1;
    int ns = wf_dataset_stats(it, st, 8, &peak);
    CHECK_INT(ns, 5); /* prefetch, batch, ignore_errors, map, range */
    CHECK(peak > 0);
    bool saw_map = false;
    for (int i = 0; i < ns && i < 8; i++)
        if (strstr(st[i].name, "map")) {
            saw_map = true;
            CHECK_INT(st[i].knob_kind, 1);
            CHECK(st[i].knob >= 1 && st[i].knob <= 2);
            CHECK(st[i].tuned);
            CHECK_INT(st[i].elements, 299);
        }
    CHECK(saw_map);
    CHECK_STR_CONTAINS(st[0].name, "prefetch");
    wf_iterator_free(it);
    wf_dataset_free(p);
    wf_dataset_free(b);
    wf_dataset_free(ig);
    wf_dataset_free(m);
    wf_dataset_free(r);
}

/* Big elements through a tuned prefetch under a small RAM budget: the buffers never hold much more
 * than the budget (one element may always be held). */
static wf_status *cb_big(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)user, (void)index, (void)n_in, (void)in;
    int64_t d = 1 << 18; /* 1 MiB of f32 */
    WF__TRY(wf_tensor_new(WF_F32, 1, &d, NULL, &out[0]));
    *n_out = 1;
    return NULL;
}

static wf_status *cb_slow(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)user, (void)index, (void)n_in;
    usleep(2000);
    out[0] = wf_tensor_ref(in[0]);
    *n_out = 1;
    return NULL;
}

static void test_ram_budget(void)
{
    wf_dataset *r = range_ds(0, 200), *m = NULL, *p = NULL, *sl = NULL;
    wf_map_options mo;
    wf_map_options_init(&mo);
    mo.num_parallel_calls = WF_AUTOTUNE;
    wf_map_fn fn = {.fn = cb_big}, slow = {.fn = cb_slow};
    CHECK_OK(wf_dataset_map(r, &fn, &mo, &m));
    CHECK_OK(wf_dataset_prefetch(m, WF_AUTOTUNE, &p));
    CHECK_OK(wf_dataset_map(p, &slow, NULL, &sl)); /* a slow consumer: buffers would fill */
    wf_iterator_options io;
    wf_iterator_options_init(&io);
    io.ram_budget = 4u << 20;
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(sl, &io, &it));
    int k = 0;
    for (;;) {
        wf_tensor *t = NULL;
        int n = 0;
        CHECK_OK(wf_iterator_next(it, &t, 1, &n));
        if (!n) break;
        k++;
        wf_tensor_free(t);
    }
    CHECK_INT(k, 200);
    int64_t peak = 0;
    wf_dataset_stats(it, NULL, 0, &peak);
    /* the budget plus one element per buffering stage */
    CHECK(peak <= (4 << 20) + 2 * (1 << 20));
    CHECK(peak >= (1 << 20));
    wf_iterator_free(it);
    wf_dataset_free(sl);
    wf_dataset_free(p);
    wf_dataset_free(m);
    wf_dataset_free(r);
}

/* A checkpoint taken mid-iteration and restored into a fresh iterator yields exactly the remaining
 * elements, through shuffle, parallel map, batch and prefetch. */
static void test_checkpoint(void)
{
    wf_dataset *r = range_ds(0, 97), *sh = NULL, *m = NULL, *ig = NULL, *b = NULL, *p = NULL, *rep = NULL;
    CHECK_OK(wf_dataset_shuffle(r, 20, 99, 1, &sh));
    wf_map_options mo;
    wf_map_options_init(&mo);
    mo.num_parallel_calls = 2;
    wf_map_fn fn = {.fn = cb_square};
    CHECK_OK(wf_dataset_map(sh, &fn, &mo, &m));
    CHECK_OK(wf_dataset_ignore_errors(m, &ig));
    CHECK_OK(wf_dataset_batch(ig, 5, 0, &b));
    CHECK_OK(wf_dataset_repeat(b, 2, &rep));
    CHECK_OK(wf_dataset_prefetch(rep, 3, &p));
    /* the full sequence of an iteration, and the state after 13 batches of it (into the 2nd pass) */
    wf_iterator *it = NULL, *it2 = NULL;
    CHECK_OK(wf_dataset_iterator(p, NULL, &it));
    int64_t full[400], cnt = 0;
    int64_t index_col[400];
    wf_tensor *state = NULL;
    int batches = 0;
    for (;;) {
        if (batches == 13) CHECK_OK(wf_iterator_save(it, &state));
        wf_tensor *t = NULL;
        int n = 0;
        CHECK_OK(wf_iterator_next(it, &t, 1, &n));
        if (!n) break;
        const int64_t *v = wf_tensor_data(t);
        for (int64_t i = 0; i < wf_tensor_dims(t)[0] && cnt < 400; i++) {
            full[cnt] = v[2 * i];
            index_col[cnt++] = v[2 * i + 1];
        }
        batches++;
        wf_tensor_free(t);
    }
    CHECK_INT(cnt, 2 * 96);
    wf_iterator_free(it);
    if (!state) return;
    /* a fresh iterator (another iteration of p) restored to the state continues the saved one */
    CHECK_OK(wf_dataset_iterator(p, NULL, &it2));
    CHECK_OK(wf_iterator_restore(it2, state));
    int64_t k = 13 * 5 - 0;
    /* batches of 5; the first pass has 96 elements = 19 full batches + 1 of 1, so 13 batches = 65 */
    for (;;) {
        wf_tensor *t = NULL;
        int n = 0;
        CHECK_OK(wf_iterator_next(it2, &t, 1, &n));
        if (!n) break;
        const int64_t *v = wf_tensor_data(t);
        for (int64_t i = 0; i < wf_tensor_dims(t)[0]; i++, k++) {
            if (k >= cnt || v[2 * i] != full[k] || v[2 * i + 1] != index_col[k]) {
                CHECK_FAIL_("restored element %lld differs", (long long)k);
                break;
            }
        }
        wf_tensor_free(t);
    }
    CHECK_INT(k, cnt);
    wf_iterator_free(it2);
    /* another pipeline's state is refused */
    wf_iterator *other = NULL;
    CHECK_OK(wf_dataset_iterator(r, NULL, &other));
    CHECK_ERR(wf_iterator_restore(other, state), WF_INVALID_ARGUMENT, "another pipeline");
    wf_iterator_free(other);
    wf_tensor_free(state);
    wf_dataset_free(p);
    wf_dataset_free(rep);
    wf_dataset_free(b);
    wf_dataset_free(ig);
    wf_dataset_free(m);
    wf_dataset_free(sh);
    wf_dataset_free(r);
}

/* The training loop's view: wf_dataset_next_batch over a pipeline gives components 0 and 1, and a
 * reset starts the next iteration. Array-only calls refuse a pipeline. */
static void test_legacy_view(void)
{
    float xs[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t ys[8] = {0, 1, 0, 1, 0, 1, 0, 1}, d = 8;
    wf_tensor *x = NULL, *y = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, &d, xs, &x));
    CHECK_OK(wf_tensor_new(WF_I64, 1, &d, ys, &y));
    wf_dataset *arr = NULL, *b = NULL;
    CHECK_OK(wf_dataset_from_tensors(x, y, &arr));
    CHECK_OK(wf_dataset_batch(arr, 3, 0, &b)); /* an array dataset as a pipeline source */
    CHECK_INT(wf_dataset_num_samples(b), 3);
    for (int epoch = 0; epoch < 2; epoch++) {
        int k = 0;
        for (;;) {
            wf_tensor *bx = NULL, *by = NULL;
            CHECK_OK(wf_dataset_next_batch(b, &bx, &by));
            if (!bx) break;
            CHECK(by != NULL);
            if (by) CHECK_INT(((int64_t *)wf_tensor_data(by))[0], (3 * k) % 2);
            CHECK_NEAR(((float *)wf_tensor_data(bx))[0], 3 * k, 0);
            k++;
            wf_tensor_free(bx);
            wf_tensor_free(by);
        }
        CHECK_INT(k, 3);
        wf_dataset_reset(b);
    }
    wf_tensor *t1 = NULL, *t2 = NULL;
    wf_dataset *tr = NULL, *va = NULL;
    CHECK_ERR(wf_dataset_set_batch(b, 4, 0), WF_INVALID_ARGUMENT, "batch pipeline stage");
    CHECK_ERR(wf_dataset_rows(b, 0, 1, &t1, &t2), WF_INVALID_ARGUMENT, "array datasets");
    CHECK_ERR(wf_dataset_split(b, 0.5, &tr, &va), WF_INVALID_ARGUMENT, "array datasets");
    wf_dataset_free(b);
    wf_dataset_free(arr);
    wf_tensor_free(x);
    wf_tensor_free(y);
}

/* interleave: element i opens range(10 * i, 10 * i + 3) */
static wf_status *il_fn(void *user, wf_tensor *const *elem, int n, wf_dataset **out)
{
    (void)user, (void)n;
    int64_t i = *(int64_t *)wf_tensor_data(elem[0]);
    return wf_dataset_range(10 * i, 10 * i + 3, 1, out);
}

static void test_interleave(void)
{
    wf_dataset *r = range_ds(0, 4), *il = NULL, *ilp = NULL;
    CHECK_OK(wf_dataset_interleave(r, il_fn, NULL, 2, 2, 1, &il));
    CHECK_OK(wf_dataset_interleave(r, il_fn, NULL, 2, 2, WF_AUTOTUNE, &ilp));
    /* tf.data's order for cycle 2, block 2: 0 1 | 10 11 | 2 | 12 | 20 21 | 30 31 | 22 | 32 */
    int64_t want[12] = {0, 1, 10, 11, 2, 12, 20, 21, 30, 31, 22, 32}, v[16];
    CHECK_INT(collect(il, NULL, v, 16), 12);
    for (int i = 0; i < 12; i++) CHECK_INT(v[i], want[i]);
    CHECK_INT(collect(ilp, NULL, v, 16), 12);
    for (int i = 0; i < 12; i++) CHECK_INT(v[i], want[i]);
    wf_dataset_free(ilp);
    wf_dataset_free(il);
    wf_dataset_free(r);
}

static int g_calls;
static wf_status *cb_count(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)user, (void)index, (void)n_in;
    __atomic_add_fetch(&g_calls, 1, __ATOMIC_SEQ_CST);
    out[0] = wf_tensor_ref(in[0]);
    *n_out = 1;
    return NULL;
}

static void test_cache(void)
{
    wf_dataset *r = range_ds(0, 20), *m = NULL, *c = NULL, *t = NULL;
    wf_map_fn fn = {.fn = cb_count};
    CHECK_OK(wf_dataset_map(r, &fn, NULL, &m));
    CHECK_OK(wf_dataset_cache(m, NULL, &c));
    int64_t v[32];
    g_calls = 0;
    /* an iteration that stops early caches nothing */
    CHECK_OK(wf_dataset_take(c, 5, &t));
    CHECK_INT(collect(t, NULL, v, 32), 5);
    CHECK_INT(collect(c, NULL, v, 32), 20);
    CHECK_INT(collect(c, NULL, v, 32), 20);
    for (int i = 0; i < 20; i++) CHECK_INT(v[i], i);
    CHECK_INT(g_calls, 25); /* 5 + 20: the third iteration replayed the cache */
    /* a file cache: written by the first iteration, read by a new dataset (another "process") */
    char path[256];
    snprintf(path, sizeof path, "/tmp/weft-test-cache-%d.bin", (int)getpid());
    remove(path);
    wf_dataset *fc = NULL, *fc2 = NULL;
    CHECK_OK(wf_dataset_cache(m, path, &fc));
    g_calls = 0;
    CHECK_INT(collect(fc, NULL, v, 32), 20);
    CHECK(access(path, F_OK) == 0);
    CHECK_OK(wf_dataset_cache(m, path, &fc2));
    CHECK_INT(collect(fc2, NULL, v, 32), 20);
    for (int i = 0; i < 20; i++) CHECK_INT(v[i], i);
    CHECK_INT(g_calls, 20);
    /* another pipeline's cache file is refused, naming it */
    wf_dataset *r2 = range_ds(0, 7), *other = NULL;
    CHECK_OK(wf_dataset_cache(r2, path, &other));
    wf_iterator *it = NULL;
    wf_status *s = wf_dataset_iterator(other, NULL, &it);
    CHECK(s != NULL);
    if (s) {
        CHECK_STR_CONTAINS(wf_status_message(s), path);
        CHECK_STR_CONTAINS(wf_status_message(s), "another pipeline");
        wf_status_free(s);
    }
    wf_iterator_free(it);
    /* a truncated cache file is an error naming the file and offset */
    FILE *f = fopen(path, "r+b");
    if (f) {
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fclose(f);
        CHECK(truncate(path, len - 5) == 0);
    }
    wf_dataset *fc3 = NULL;
    CHECK_OK(wf_dataset_cache(m, path, &fc3));
    CHECK_OK(wf_dataset_iterator(fc3, NULL, &it));
    int errs = 0;
    for (int k = 0; k < 30 && it; k++) {
        wf_tensor *x = NULL;
        int n = 0;
        wf_status *e = wf_iterator_next(it, &x, 1, &n);
        if (e) {
            errs++;
            CHECK_STR_CONTAINS(wf_status_message(e), "truncated");
            CHECK_STR_CONTAINS(wf_status_message(e), "at byte");
            wf_status_free(e);
            break;
        }
        if (!n) break;
        wf_tensor_free(x);
    }
    CHECK_INT(errs, 1);
    wf_iterator_free(it);
    remove(path);
    wf_dataset_free(fc3);
    wf_dataset_free(other);
    wf_dataset_free(r2);
    wf_dataset_free(fc2);
    wf_dataset_free(fc);
    wf_dataset_free(t);
    wf_dataset_free(c);
    wf_dataset_free(m);
    wf_dataset_free(r);
}

static void test_npy_source(void)
{
    char a[256], b[256];
    snprintf(a, sizeof a, "/tmp/weft-test-npy-a-%d.npy", (int)getpid());
    snprintf(b, sizeof b, "/tmp/weft-test-npy-b-%d.npy", (int)getpid());
    float xs[6] = {1, 2, 3, 4, 5, 6};
    int32_t ys[3] = {7, 8, 9};
    int64_t dx[2] = {3, 2}, dy = 3, dz = 2;
    wf_tensor *x = NULL, *y = NULL, *z = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, dx, xs, &x));
    CHECK_OK(wf_tensor_new(WF_I32, 1, &dy, ys, &y));
    CHECK_OK(wf_npy_write(a, x));
    CHECK_OK(wf_npy_write(b, y));
    const char *paths[2] = {a, b};
    wf_dataset *ds = NULL;
    CHECK_OK(wf_dataset_npy(paths, 2, &ds));
    CHECK_INT(wf_dataset_cardinality(ds), 3);
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(ds, NULL, &it));
    for (int k = 0; k < 3 && it; k++) {
        wf_tensor *t[2];
        int n = 0;
        CHECK_OK(wf_iterator_next(it, t, 2, &n));
        CHECK_INT(n, 2);
        if (n != 2) break;
        CHECK_NEAR(((float *)wf_tensor_data(t[0]))[1], xs[2 * k + 1], 0);
        CHECK_INT(((int32_t *)wf_tensor_data(t[1]))[0], ys[k]);
        wf_tensor_free(t[0]);
        wf_tensor_free(t[1]);
    }
    wf_iterator_free(it);
    /* mismatched rows, and a missing file, name the files */
    CHECK_OK(wf_tensor_new(WF_F32, 1, &dz, NULL, &z));
    CHECK_OK(wf_npy_write(b, z));
    wf_dataset *bad = NULL;
    CHECK_ERR(wf_dataset_npy(paths, 2, &bad), WF_INVALID_ARGUMENT, b);
    remove(b);
    CHECK_ERR(wf_dataset_npy(paths, 2, &bad), WF_NOT_FOUND, b);
    remove(a);
    wf_dataset_free(ds);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_tensor_free(z);
}

int main(void)
{
    RUN_TEST(test_range_take_skip_repeat);
    RUN_TEST(test_batch_unbatch_padded);
    RUN_TEST(test_padded_batch);
    RUN_TEST(test_shuffle);
    RUN_TEST(test_zip_and_slices);
    RUN_TEST(test_parallel_map_deterministic);
    RUN_TEST(test_graph_map_and_filter);
    RUN_TEST(test_prefetch_and_stats);
    RUN_TEST(test_ram_budget);
    RUN_TEST(test_checkpoint);
    RUN_TEST(test_legacy_view);
    RUN_TEST(test_interleave);
    RUN_TEST(test_cache);
    RUN_TEST(test_npy_source);
    return check_summary();
}
