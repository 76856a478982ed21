/* Input pipelines (issue 16): the tf.data stages against what tf.data documents for them (element
 * order, batching, padding, shuffling as a permutation, repeat/take/skip/zip arithmetic), parallel map's
 * determinism at every thread count, autotune's knobs and the RAM budget, iterator checkpoints that
 * resume at the same element, and the errors (naming stage, element and file). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"
#include "core/alloc_hooks.h"
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

/* ---- a parallel map read by a batch: its workers fill the batches (map-and-batch fusion) ------------- */

/* i -> [i * i, the counter's low bits] (i64); mode 1 adds rows a batch cannot take as they are: an error
 * at 13, another length at 50, another dtype at 77, a string at 120; mode 2 gives strings only. */
static wf_status *cb_rows(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)n_in;
    int mode = *(const int *)user;
    int64_t i = *(int64_t *)wf_tensor_data(in[0]);
    volatile double acc = 0; /* a little work, so that the workers finish out of order */
    for (int k = 0; k < (int)(i % 7) * 3000; k++) acc += k * 1e-9;
    *n_out = 1;
    char str[32];
    const char *sp = str;
    snprintf(str, sizeof str, "s%lld", (long long)i);
    if (mode == 2 || (mode == 1 && i == 120)) return wf_tensor_new_strings(0, NULL, &sp, NULL, &out[0]);
    if (mode == 1 && i == 13) return wf_status_new(WF_INVALID_ARGUMENT, "thirteen is unlucky");
    if (mode == 1 && i == 77) {
        float f[2] = {(float)i, 0}; int64_t d = 2;
        return wf_tensor_new(WF_F32, 1, &d, f, &out[0]);
    }
    int64_t v[3] = {i * i, index & ((1ll << 40) - 1), -1}, d = mode == 1 && i == 50 ? 3 : 2;
    return wf_tensor_new(WF_I64, 1, &d, v, &out[0]);
}

/* Every result of an iteration as text: "E <message>" or "B [dims] values", one a line. */
static char *trace(wf_dataset *ds, const wf_iterator_options *io, char *names, size_t names_cap)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = calloc(cap, 1);
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(ds, io, &it));
    for (int guard = 0; it && buf && guard < 1000; guard++) {
        wf_tensor *t = NULL;
        int n = 0;
        wf_status *s = wf_iterator_next(it, &t, 1, &n);
        if (s) {
            len += (size_t)snprintf(buf + len, cap - len, "E %s\n", wf_status_message(s));
            wf_status_free(s);
            continue;
        }
        if (!n) break;
        len += (size_t)snprintf(buf + len, cap - len, "B %s[%lld]", wf_dtype_name(wf_tensor_dtype(t)),
                                (long long)wf_tensor_dims(t)[0]);
        for (int64_t k = 0; k < wf_tensor_size(t) && len < cap - 64; k++) {
            if (wf_tensor_dtype(t) == WF_I64) {
                len += (size_t)snprintf(buf + len, cap - len, " %lld", (long long)((int64_t *)wf_tensor_data(t))[k]);
            } else if (wf_tensor_dtype(t) == WF_STRING) {
                size_t sl = 0;
                const char *str = wf_tensor_string(t, k, &sl);
                len += (size_t)snprintf(buf + len, cap - len, " %.*s", (int)sl, str);
            } else {
                len += (size_t)snprintf(buf + len, cap - len, " %g", (double)((float *)wf_tensor_data(t))[k]);
            }
        }
        len += (size_t)snprintf(buf + len, cap - len, "\n");
        wf_tensor_free(t);
        CHECK(len < cap - 64);
    }
    if (names && it) {
        wf_dataset_stage_stats st[8];
        int ns = wf_dataset_stats(it, st, 8, NULL);
        names[0] = 0;
        for (int i = 0; i < ns && i < 8; i++)
            snprintf(names + strlen(names), names_cap - strlen(names), "%s;", st[i].name);
    }
    wf_iterator_free(it);
    return buf;
}

/* With num_parallel_calls > 1 the map's workers copy their results into the batch (one stage's stats
 * say "into batch"); the batches, and where errors and odd rows fall, are those of the map read one
 * element at a time (num_parallel_calls 1, the unfused path), for clean data, errors, other shapes and
 * dtypes, strings, a short last batch with and without drop_remainder, ignore_errors after the batch,
 * and a RAM budget smaller than one batch. */
static void test_map_into_batch(void)
{
    static const int modes[3] = {0, 1, 2};
    wf_dataset *r = range_ds(0, 203);
    for (int mi = 0; mi < 3; mi++) {
        for (int drop = 0; drop < 2; drop++) {
            char *ref = NULL, *ref_ig = NULL;
            int pars[4] = {1, 2, 3, WF_AUTOTUNE};
            for (int pi = 0; pi < 4; pi++) {
                wf_map_options mo;
                wf_map_options_init(&mo);
                mo.num_parallel_calls = pars[pi];
                wf_map_fn fn = {.fn = cb_rows, .user = (void *)&modes[mi]};
                wf_dataset *m = NULL, *b = NULL, *ig = NULL;
                CHECK_OK(wf_dataset_map(r, &fn, &mo, &m));
                CHECK_OK(wf_dataset_batch(m, 8, drop, &b));
                CHECK_OK(wf_dataset_ignore_errors(b, &ig));
                wf_iterator_options io;
                wf_iterator_options_init(&io);
                io.cpu_budget = 2;
                if (pi == 2) io.ram_budget = 100; /* less than one batch: one at a time, no deadlock */
                char names[400];
                char *got = trace(b, &io, names, sizeof names);
                char *got_ig = trace(ig, &io, NULL, 0);
                if (pi == 0) {
                    ref = got;
                    ref_ig = got_ig;
                    got = got_ig = NULL;
                    CHECK(!strstr(names, "into batch"));
                } else {
                    CHECK(strstr(names, "into batch") != NULL);
                }
                if (ref && got && strcmp(ref, got)) {
                    CHECK_FAIL_("mode %d drop %d parallel %d: the batches differ from the unfused map's", modes[mi],
                                drop, pars[pi]);
                    fprintf(stderr, "--- unfused\n%.3000s\n--- fused\n%.3000s\n", ref, got);
                }
                if (ref_ig && got_ig && strcmp(ref_ig, got_ig))
                    CHECK_FAIL_("mode %d drop %d parallel %d: ignore_errors after the batch differs", modes[mi], drop,
                                pars[pi]);
                free(got);
                free(got_ig);
                wf_dataset_free(ig);
                wf_dataset_free(b);
                wf_dataset_free(m);
            }
            /* the reference itself, against what batch documents */
            if (ref && mi == 0) {
                const char *first = "B i64[8] 0 0 1 1 4 2 9 3 16 4 25 5 36 6 49 7\n";
                const char *last = drop ? "38416 196 38809 197 39204 198 39601 199\n" : "\nB i64[3] 40000 200 40401 201 40804 202\n";
                CHECK(!strncmp(ref, first, strlen(first)));
                CHECK(strlen(ref) > strlen(last) && !strcmp(ref + strlen(ref) - strlen(last), last));
                CHECK(!strstr(ref, "E "));
            }
            if (ref && mi == 1) {
                int errors = 0;
                for (const char *q = ref; (q = strstr(q, "E ")); q++) errors++;
                CHECK_INT(errors, 4);
                CHECK(strstr(ref, "E batch stage, batch 1: map stage, element 13: thirteen is unlucky") != NULL);
                CHECK(strstr(ref, "batch needs equal shapes") != NULL);
                /* the batch after the error starts at element 14 */
                CHECK(strstr(ref, "\nB i64[8] 196 14 225 15") != NULL);
            }
            if (ref && mi == 2) CHECK(!strncmp(ref, "B string[8] s0 s1 s2 s3 s4 s5 s6 s7\n", strlen("B string[8] s0 s1 s2 s3 s4 s5 s6 s7\n")));
            free(ref);
            free(ref_ig);
        }
    }
    wf_dataset_free(r);
}

/* Element i's kind for cb_kinds: 0 the usual [i * i, counter], 1 an error, 2 another length, 3 a string,
 * 4 another dtype. */
typedef struct kinds {
    unsigned char k[64];
} kinds;

static wf_status *cb_kinds(void *user, int64_t index, wf_tensor *const *in, int n_in, wf_tensor **out, int *n_out)
{
    (void)n_in;
    const kinds *ks = user;
    int64_t i = *(int64_t *)wf_tensor_data(in[0]);
    int k = i >= 0 && i < 64 ? ks->k[i] : 0;
    volatile double acc = 0;
    for (int w = 0; w < (int)((i * 7) % 5) * 2000; w++) acc += w * 1e-9;
    *n_out = 1;
    char str[32];
    const char *sp = str;
    snprintf(str, sizeof str, "s%lld", (long long)i);
    if (k == 1) return wf_status_new(WF_INVALID_ARGUMENT, "element %lld is bad", (long long)i);
    if (k == 3) return wf_tensor_new_strings(0, NULL, &sp, NULL, &out[0]);
    if (k == 4) {
        float f[2] = {(float)i, 1};
        int64_t d = 2;
        return wf_tensor_new(WF_F32, 1, &d, f, &out[0]);
    }
    int64_t v[3] = {i * i, index & ((1ll << 40) - 1), 5}, d = k == 2 ? 3 : 2;
    return wf_tensor_new(WF_I64, 1, &d, v, &out[0]);
}

static uint64_t rnd_below(uint64_t *st, uint64_t bound)
{
    uint64_t z = (*st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 31)) % bound;
}

/* Random pipelines (a fixed seed): lengths 0 to 63, batches of 1 to 9, odd rows at random places, a RAM
 * budget or none, 2 to 4 calls or AUTOTUNE: the fused map's batches equal the unfused map's. */
static void test_map_into_batch_random(void)
{
    uint64_t st = 12345;
    const char *env = getenv("WEFT_TRIALS"); /* more for a stress run (3,000 passed here, 400 under TSan) */
    int trials = env ? atoi(env) : 40;
    for (int trial = 0; trial < trials; trial++) {
        kinds ks;
        int n = (int)rnd_below(&st, 64), bsz = 1 + (int)rnd_below(&st, 9);
        int drop = (int)rnd_below(&st, 2), odd = (int)rnd_below(&st, 4);
        for (int i = 0; i < 64; i++)
            ks.k[i] = odd && rnd_below(&st, 10) < (uint64_t)odd ? (unsigned char)(1 + rnd_below(&st, 4)) : 0;
        int pars[4] = {2, 3, 4, WF_AUTOTUNE};
        int par = pars[rnd_below(&st, 4)];
        uint64_t budget = rnd_below(&st, 2) ? 1 + rnd_below(&st, 400) : 0;
        wf_dataset *r = range_ds(0, n);
        char *ref = NULL;
        for (int fused = 0; fused < 2; fused++) {
            wf_map_options mo;
            wf_map_options_init(&mo);
            mo.num_parallel_calls = fused ? par : 1;
            wf_map_fn fn = {.fn = cb_kinds, .user = &ks};
            wf_dataset *m = NULL, *b = NULL;
            CHECK_OK(wf_dataset_map(r, &fn, &mo, &m));
            CHECK_OK(wf_dataset_batch(m, bsz, drop, &b));
            wf_iterator_options io;
            wf_iterator_options_init(&io);
            io.cpu_budget = 2;
            io.ram_budget = budget;
            char *got = trace(b, &io, NULL, 0);
            if (!fused) {
                ref = got;
            } else {
                if (ref && got && strcmp(ref, got))
                    CHECK_FAIL_("trial %d (n %d, batch %d, drop %d, parallel %d, budget %llu): fused differs", trial, n,
                                bsz, drop, par, (unsigned long long)budget);
                free(got);
            }
            wf_dataset_free(b);
            wf_dataset_free(m);
        }
        free(ref);
        wf_dataset_free(r);
    }
}

/* A graph map under a batch writes its results straight into the batch's rows (wf_run_options.into),
 * sequential or parallel; an output the session cannot write there (the fed element itself) is
 * copied. The batches are the elements' values, a short last one included. */
static void test_graph_map_into_batch(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, sq, outs[2];
    CHECK_OK(wf_placeholder(g, "x", WF_I64, 0, NULL, &x));
    CHECK_OK(wf_mul(g, "sq", x, x, &sq));
    outs[0] = sq;
    outs[1] = x;
    wf_map_fn fn = {.graph = g, .inputs = &x, .n_inputs = 1, .outputs = outs, .n_outputs = 2};
    wf_dataset *r = range_ds(0, 203);
    int pars[4] = {1, 2, 4, WF_AUTOTUNE};
    for (int pi = 0; pi < 4; pi++) {
        wf_map_options mo;
        wf_map_options_init(&mo);
        mo.num_parallel_calls = pars[pi];
        wf_dataset *m = NULL, *b = NULL;
        CHECK_OK(wf_dataset_map(r, &fn, &mo, &m));
        CHECK_OK(wf_dataset_batch(m, 8, 0, &b));
        wf_iterator_options io;
        wf_iterator_options_init(&io);
        io.cpu_budget = 2;
        wf_iterator *it = NULL;
        CHECK_OK(wf_dataset_iterator(b, &io, &it));
        int64_t want = 0;
        for (; it;) {
            wf_tensor *t[2] = {0};
            int n = 0;
            CHECK_OK(wf_iterator_next(it, t, 2, &n));
            if (!n) break;
            CHECK_INT(n, 2);
            int64_t rows = wf_tensor_dims(t[0])[0];
            CHECK_INT(rows, want + 8 <= 203 ? 8 : 203 - want);
            const int64_t *a = wf_tensor_data(t[0]), *v = wf_tensor_data(t[1]);
            for (int64_t i = 0; i < rows; i++, want++)
                if (a[i] != want * want || v[i] != want) {
                    CHECK_FAIL_("parallel %d, element %lld: %lld, %lld", pars[pi], (long long)want, (long long)a[i],
                                (long long)v[i]);
                    break;
                }
            wf_tensor_free(t[0]);
            wf_tensor_free(t[1]);
        }
        CHECK_INT(want, 203);
        wf_iterator_free(it);
        wf_dataset_free(b);
        wf_dataset_free(m);
    }
    wf_dataset_free(r);
    wf_graph_free(g);
}

/* A checkpoint of a fused map and batch restores to the next batch: the workers' batches in flight are
 * dropped and the input skipped. */
static void test_map_into_batch_checkpoint(void)
{
    static const int clean = 0;
    wf_dataset *r = range_ds(0, 100), *m = NULL, *b = NULL;
    wf_map_options mo;
    wf_map_options_init(&mo);
    mo.num_parallel_calls = 2;
    wf_map_fn fn = {.fn = cb_rows, .user = (void *)&clean};
    CHECK_OK(wf_dataset_map(r, &fn, &mo, &m));
    CHECK_OK(wf_dataset_batch(m, 8, 0, &b));
    for (int at = 0; at < 14; at += 3) {
        wf_iterator *it = NULL, *it2 = NULL;
        wf_tensor *state = NULL;
        CHECK_OK(wf_dataset_iterator(b, NULL, &it));
        for (int k = 0; k < at && it; k++) {
            wf_tensor *t = NULL;
            int n = 0;
            CHECK_OK(wf_iterator_next(it, &t, 1, &n));
            wf_tensor_free(t);
        }
        if (it) CHECK_OK(wf_iterator_save(it, &state));
        wf_iterator_free(it);
        CHECK_OK(wf_dataset_iterator(b, NULL, &it2));
        if (it2 && state) CHECK_OK(wf_iterator_restore(it2, state));
        int64_t want = 8 * at, rows = 0;
        for (; it2;) {
            wf_tensor *t = NULL;
            int n = 0;
            CHECK_OK(wf_iterator_next(it2, &t, 1, &n));
            if (!n) break;
            const int64_t *v = wf_tensor_data(t);
            for (int64_t i = 0; i < wf_tensor_dims(t)[0]; i++, want++, rows++)
                if (v[2 * i] != want * want || v[2 * i + 1] != want) {
                    CHECK_FAIL_("restored at batch %d: row %lld is %lld, %lld", at, (long long)rows,
                                (long long)v[2 * i], (long long)v[2 * i + 1]);
                    break;
                }
            wf_tensor_free(t);
        }
        CHECK_INT(want, at < 13 ? 100 : 8 * at);
        wf_iterator_free(it2);
        wf_tensor_free(state);
    }
    wf_dataset_free(b);
    wf_dataset_free(m);
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

/* interleave's function failing, or returning no dataset: the error names the stage and the input
 * element. */
static wf_status *il_bad(void *user, wf_tensor *const *elem, int n, wf_dataset **out)
{
    (void)n;
    int64_t i = *(int64_t *)wf_tensor_data(elem[0]);
    if (user) return wf_status_new(WF_NOT_FOUND, "no shard %lld", (long long)i);
    *out = NULL;
    return NULL;
}

static void test_interleave_errors(void)
{
    wf_dataset *r = range_ds(0, 2);
    for (int k = 0; k < 2; k++) {
        wf_dataset *il = NULL;
        CHECK_OK(wf_dataset_interleave(r, il_bad, k ? (void *)1 : NULL, 2, 1, 1, &il));
        wf_iterator *it = NULL;
        CHECK_OK(wf_dataset_iterator(il, NULL, &it));
        wf_tensor *t = NULL;
        int n = 0;
        CHECK_ERR(wf_iterator_next(it, &t, 1, &n), k ? WF_NOT_FOUND : WF_INVALID_ARGUMENT,
                  k ? "interleave stage, input element 0: no shard 0" : "interleave stage, input element 0: the function returned no dataset");
        wf_iterator_free(it);
        wf_dataset_free(il);
    }
    wf_dataset *bad = NULL;
    CHECK_ERR(wf_dataset_interleave(r, il_bad, NULL, 0, 1, 1, &bad), WF_INVALID_ARGUMENT, "cycle_length");
    wf_dataset_free(r);
}

/* A state that is not an iterator position is refused and the iterator keeps working. */
static void test_restore_bad_state(void)
{
    wf_dataset *r = range_ds(0, 5);
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(r, NULL, &it));
    int64_t v[4] = {1, 2, 3, 4}, d = 4, d3 = 3;
    wf_tensor *t4 = NULL, *t3 = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, 1, &d, v, &t4));
    CHECK_OK(wf_tensor_new(WF_I64, 1, &d3, v, &t3));
    CHECK_ERR(wf_iterator_restore(it, t4), WF_INVALID_ARGUMENT, "not an iterator position");
    CHECK_ERR(wf_iterator_restore(it, t3), WF_INVALID_ARGUMENT, "not an iterator position");
    wf_tensor *e = NULL;
    int n = 0;
    CHECK_OK(wf_iterator_next(it, &e, 1, &n));
    CHECK_INT(n, 1);
    if (n) {
        CHECK_INT(*(int64_t *)wf_tensor_data(e), 0);
        wf_tensor_free(e);
    }
    wf_tensor_free(t4);
    wf_tensor_free(t3);
    wf_iterator_free(it);
    wf_dataset_free(r);
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

/* Every allocation of building and running a pipeline (slices -> shuffle -> map -> batch -> cache ->
 * take, run twice so the cache replays) fails once in turn: each step fails with OUT_OF_MEMORY or gives
 * the unfaulted elements, and nothing stays allocated afterwards. Single-threaded stages only, so the
 * n-th allocation is the same one on every run. */
static int g_oom_parallel; /* the map's num_parallel_calls: 2 makes it fill the batches (map into batch) */

static int64_t oom_run(long nth, int64_t *sum, wf_code *code)
{
    *sum = 0;
    *code = WF_OK;
    float xs[24];
    for (int i = 0; i < 24; i++) xs[i] = (float)i;
    int64_t d[2] = {12, 2};
    wf_tensor *x = NULL;
    wf_dataset *sl = NULL, *sh = NULL, *m = NULL, *b = NULL, *c = NULL, *t = NULL;
    wf_iterator *it = NULL;
    int64_t n = 0;
    wf__fault_inject(nth);
    wf_status *s = wf_tensor_new(WF_F32, 2, d, xs, &x);
    wf_map_fn fn = {.fn = cb_identity};
    if (!s) s = wf_dataset_from_tensor_slices(&x, 1, &sl);
    if (!s) s = wf_dataset_shuffle(sl, 5, 9, 1, &sh);
    wf_map_options mo;
    wf_map_options_init(&mo);
    mo.num_parallel_calls = g_oom_parallel ? g_oom_parallel : 1;
    if (!s) s = wf_dataset_map(sh, &fn, &mo, &m);
    if (!s) s = wf_dataset_batch(m, 5, 0, &b);
    if (!s) s = wf_dataset_cache(b, NULL, &c);
    if (!s) s = wf_dataset_take(c, 10, &t);
    wf_iterator_options io;
    wf_iterator_options_init(&io);
    io.autotune = 0;
    for (int pass = 0; pass < 2 && !s; pass++) {
        s = wf_dataset_iterator(t, &io, &it);
        while (!s) {
            wf_tensor *e = NULL;
            int k = 0;
            s = wf_iterator_next(it, &e, 1, &k);
            if (s || !k) break;
            for (int64_t i = 0; i < wf_tensor_size(e); i++) *sum += (int64_t)((float *)wf_tensor_data(e))[i];
            n += wf_tensor_dims(e)[0];
            wf_tensor_free(e);
        }
        wf_iterator_free(it);
        it = NULL;
    }
    wf__fault_inject(0);
    if (s) *code = wf_status_code(s);
    wf_status_free(s);
    wf_dataset_free(t);
    wf_dataset_free(c);
    wf_dataset_free(b);
    wf_dataset_free(m);
    wf_dataset_free(sh);
    wf_dataset_free(sl);
    wf_tensor_free(x);
    return n;
}

static void test_oom_once(void)
{
    wf__tensor_cache_flush();
    wf__tensor_large_cache_flush();
    long live0 = wf__alloc_live();
    int64_t ref_sum = 0, sum;
    wf_code code;
    CHECK_INT(oom_run(0, &ref_sum, &code), 24);
    CHECK_INT(code, WF_OK);
    CHECK_INT(ref_sum, 2 * 276);
    long fired_before = wf__faults_fired(), nth;
    bool completed = false;
    for (nth = 1; nth < 2000 && !completed; nth++) {
        long f0 = wf__faults_fired();
        int64_t n = oom_run(nth, &sum, &code);
        if (wf__faults_fired() == f0) {
            completed = true; /* past the last allocation: the unfaulted result */
            CHECK_INT(n, 24);
            CHECK_INT(sum, ref_sum);
        } else if (code != WF_OK) {
            if (code != WF_OUT_OF_MEMORY) CHECK_FAIL_("allocation %ld: code %s, not OUT_OF_MEMORY", nth, wf_code_name(code));
        } else if (sum != ref_sum || n != 24) {
            CHECK_FAIL_("allocation %ld failed, yet the run succeeded with other elements", nth);
        }
        wf__tensor_cache_flush();
        wf__tensor_large_cache_flush();
        if (wf__alloc_live() != live0) {
            CHECK_FAIL_("allocation %ld: %ld blocks left allocated", nth, wf__alloc_live() - live0);
            break;
        }
    }
    CHECK(completed);
    CHECK(wf__faults_fired() > fired_before);
}

/* Every allocation of a pipeline run fails in turn: the run reports OUT_OF_MEMORY or, where the failure
 * had a fallback, gives the right result; nothing leaks. Sequential map, then parallel (map into batch). */
static void test_oom(void)
{
    for (g_oom_parallel = 1; g_oom_parallel <= 2; g_oom_parallel++) test_oom_once();
    g_oom_parallel = 0;
}

/* ---- the seeds' image pipeline against Pillow + numpy, and its determinism --------------------------- */

enum { IMG_N = 40, IMG_H = 48, IMG_W = 56, IMG_SEED = 1234, IMG_BATCH = 8 };
#define IMG_DELTA 32.0
static char g_root[512];
static int g_have_imgs;

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* The seeds' map as a graph: path -> ReadFile -> DecodeJpeg(3) -> f32 -> Resize(H, W) bilinear
 * half-pixel -> brightness(IMG_DELTA) -> flip left-right -> / 255. */
typedef struct img_fn {
    wf_graph *g;
    wf_output path, seed, out;
} img_fn;

static void img_fn_build(img_fn *f)
{
    memset(f, 0, sizeof *f);
    CHECK_OK(wf_graph_new(&f->g));
    wf_graph *g = f->g;
    int64_t two = 2, three = 3, zero = 0, sizes[3] = {IMG_H, IMG_W, 3};
    wf_output bytes, img, fimg, roi, scales, sz, rs, br, fl, inv;
    wf_tensor *e = NULL, *szt = NULL;
    CHECK_OK(wf_placeholder(g, "path", WF_STRING, 0, NULL, &f->path));
    CHECK_OK(wf_placeholder(g, "seed", WF_I64, 1, &two, &f->seed));
    CHECK_OK(wf_read_file(g, "read", f->path, &bytes));
    CHECK_OK(wf_decode_jpeg(g, "decode", bytes, 3, &img));
    CHECK_OK(wf_convert_image_dtype(g, "to_f32_255", img, WF_F32, &fimg)); /* [0, 1] */
    CHECK_OK(wf_const_scalar(g, "c255", WF_F32, 255.0, &inv));
    CHECK_OK(wf_mul(g, "scale255", fimg, inv, &fimg)); /* back to [0, 255] as decode_jpeg + cast */
    CHECK_OK(wf_tensor_new(WF_F32, 1, &zero, NULL, &e));
    CHECK_OK(wf_tensor_new(WF_I64, 1, &three, sizes, &szt));
    CHECK_OK(wf_const(g, "roi", e, &roi));
    CHECK_OK(wf_const(g, "scales", e, &scales));
    CHECK_OK(wf_const(g, "sizes", szt, &sz));
    wf_output rin[4] = {fimg, roi, scales, sz};
    wf_attr ra[2] = {wf_attr_string("mode", "linear"), wf_attr_string("coordinate_transformation_mode", "half_pixel")};
    wf_node *rn = NULL;
    CHECK_OK(wf_op(g, "Resize", "resize", rin, 4, ra, 2, &rn));
    rs = (wf_output){rn, 0};
    CHECK_OK(wf_random_brightness(g, "brightness", rs, f->seed, IMG_DELTA, &br));
    CHECK_OK(wf_random_flip_left_right(g, "flip", br, f->seed, &fl));
    wf_output k;
    CHECK_OK(wf_const_scalar(g, "inv255", WF_F32, 1.0 / 255.0, &k));
    CHECK_OK(wf_mul(g, "out", fl, k, &f->out));
    wf_tensor_free(e);
    wf_tensor_free(szt);
}

static wf_dataset *img_pipeline(img_fn *f, const char *dir, int shuffle, int parallel, int ignore)
{
    char pat[700];
    snprintf(pat, sizeof pat, "%s/*.jpg", dir);
    wf_dataset *files = NULL, *m = NULL, *ig = NULL, *b = NULL, *p = NULL;
    CHECK_OK(wf_dataset_list_files(pat, shuffle, 77, &files));
    wf_map_fn fn = {.graph = f->g, .inputs = &f->path, .n_inputs = 1, .outputs = &f->out, .n_outputs = 1,
                    .seed_input = f->seed};
    wf_map_options mo;
    wf_map_options_init(&mo);
    mo.num_parallel_calls = parallel;
    mo.seed = IMG_SEED;
    if (files) CHECK_OK(wf_dataset_map(files, &fn, &mo, &m));
    if (m && ignore) CHECK_OK(wf_dataset_ignore_errors(m, &ig));
    if (m) CHECK_OK(wf_dataset_batch(ig ? ig : m, IMG_BATCH, 0, &b));
    if (b) CHECK_OK(wf_dataset_prefetch(b, WF_AUTOTUNE, &p));
    wf_dataset_free(files);
    wf_dataset_free(m);
    wf_dataset_free(ig);
    wf_dataset_free(b);
    return p;
}

/* Every batch of one iteration, concatenated: [N, H, W, 3] f32 (NULL on failure). */
static float *img_run(wf_dataset *p, int64_t *n_out)
{
    float *all = calloc((size_t)IMG_N * IMG_H * IMG_W * 3, sizeof(float));
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(p, NULL, &it));
    int64_t n = 0, per = (int64_t)IMG_H * IMG_W * 3;
    for (; it;) {
        wf_tensor *t = NULL;
        int k = 0;
        CHECK_OK(wf_iterator_next(it, &t, 1, &k));
        if (!k) break;
        int64_t rows = wf_tensor_dims(t)[0];
        CHECK_INT(wf_tensor_rank(t), 4);
        if (n + rows <= IMG_N) memcpy(all + n * per, wf_tensor_data(t), (size_t)(rows * per) * sizeof(float));
        n += rows;
        wf_tensor_free(t);
    }
    wf_iterator_free(it);
    *n_out = n;
    return all;
}

static void test_image_pipeline(void)
{
    if (!g_have_imgs) {
        CHECK_SKIP("test_image_pipeline", "no reference (tests/data/make_pipeline_ref.py needs /usr/bin/python3 with "
                   "numpy and Pillow)");
        return;
    }
    img_fn f;
    img_fn_build(&f);
    char p[700];
    snprintf(p, sizeof p, "%s/ref.npy", g_dir);
    wf_tensor *ref = NULL;
    CHECK_OK(wf_npy_read(p, &ref));
    if (!ref) return;
    const float *rv = wf_tensor_data(ref);
    int64_t per = (int64_t)IMG_H * IMG_W * 3;
    /* in file order at several thread counts: the Pillow + numpy reference, and bit-identical runs */
    int pars[4] = {1, 2, 4, WF_AUTOTUNE};
    float *first = NULL;
    for (int pi = 0; pi < 4; pi++) {
        wf_dataset *pl = img_pipeline(&f, g_dir, 0, pars[pi], 0);
        if (!pl) break;
        int64_t n = 0;
        float *got = img_run(pl, &n);
        CHECK_INT(n, IMG_N);
        double worst = 0;
        for (int64_t i = 0; n == IMG_N && i < IMG_N * per; i++) {
            double d = fabs((double)got[i] - (double)rv[i]);
            if (!(d <= worst)) worst = d;
        }
        /* the decode is bit-exact (same IDCT); the resize differs by f32 rounding */
        if (!(worst <= 2e-6)) CHECK_FAIL_("parallel %d: max |weft - Pillow/numpy| = %g > 2e-6", pars[pi], worst);
        if (pi == 0) printf("  image pipeline, %d JPEGs: max |weft - Pillow+numpy| = %.3g (on [0, 1])\n", IMG_N, worst);
        if (!first) first = got;
        else {
            if (memcmp(first, got, (size_t)(IMG_N * per) * sizeof(float)))
                CHECK_FAIL_("parallel %d gave other bytes than parallel 1", pars[pi]);
            free(got);
        }
        wf_dataset_free(pl);
    }
    /* shuffled files: the same order and augmentations at 1 and at 4 threads and on a new pipeline */
    wf_dataset *s1 = img_pipeline(&f, g_dir, 1, 1, 0), *s4 = img_pipeline(&f, g_dir, 1, 4, 0);
    int64_t n1 = 0, n4 = 0;
    float *a = s1 ? img_run(s1, &n1) : NULL, *b = s4 ? img_run(s4, &n4) : NULL;
    CHECK_INT(n1, IMG_N);
    CHECK(a && b && !memcmp(a, b, (size_t)(IMG_N * per) * sizeof(float)));
    CHECK(a && first && memcmp(a, first, (size_t)(IMG_N * per) * sizeof(float)) != 0); /* shuffled */
    free(a);
    free(b);
    free(first);
    wf_dataset_free(s1);
    wf_dataset_free(s4);
    wf_tensor_free(ref);
    wf_graph_free(f.g);
}

/* A corrupt JPEG among good ones: the error names the file (and the stage and element), the iteration
 * goes on; ignore_errors drops it. */
static void test_image_bad_file(void)
{
    if (!g_have_imgs) {
        CHECK_SKIP("test_image_bad_file", "no images (tests/data/make_pipeline_ref.py needs /usr/bin/python3)");
        return;
    }
    char dir[700], cmd[4000], bad[800];
    snprintf(dir, sizeof dir, "%s/bad", g_dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/img_000.jpg %s/img_002.jpg %s/ && head -c 300 %s/img_001.jpg > %s/img_001.jpg",
             dir, g_dir, g_dir, dir, g_dir, dir);
    CHECK_INT(sh(cmd), 0);
    snprintf(bad, sizeof bad, "%s/img_001.jpg", dir);
    img_fn f;
    img_fn_build(&f);
    for (int ignore = 0; ignore < 2; ignore++) {
        wf_dataset *files = NULL, *m = NULL, *ig = NULL;
        char pat[800];
        snprintf(pat, sizeof pat, "%s/*.jpg", dir);
        CHECK_OK(wf_dataset_list_files(pat, 0, 0, &files));
        wf_map_fn fn = {.graph = f.g, .inputs = &f.path, .n_inputs = 1, .outputs = &f.out, .n_outputs = 1,
                        .seed_input = f.seed};
        wf_map_options mo;
        wf_map_options_init(&mo);
        mo.num_parallel_calls = 2;
        CHECK_OK(wf_dataset_map(files, &fn, &mo, &m));
        if (ignore) CHECK_OK(wf_dataset_ignore_errors(m, &ig));
        wf_iterator *it = NULL;
        CHECK_OK(wf_dataset_iterator(ig ? ig : m, NULL, &it));
        int good = 0, errors = 0;
        for (int k = 0; k < 10 && it; k++) {
            wf_tensor *t = NULL;
            int n = 0;
            wf_status *s = wf_iterator_next(it, &t, 1, &n);
            if (s) {
                errors++;
                CHECK_STR_CONTAINS(wf_status_message(s), "map stage, element 1");
                CHECK_STR_CONTAINS(wf_status_message(s), bad);
                CHECK_STR_CONTAINS(wf_status_message(s), "DecodeJpeg");
                wf_status_free(s);
                continue;
            }
            if (!n) break;
            good++;
            wf_tensor_free(t);
        }
        CHECK_INT(good, 2);
        CHECK_INT(errors, ignore ? 0 : 1);
        wf_iterator_free(it);
        wf_dataset_free(ig);
        wf_dataset_free(m);
        wf_dataset_free(files);
    }
    /* a glob that matches nothing */
    wf_dataset *none = NULL;
    char pat[800];
    snprintf(pat, sizeof pat, "%s/*.png", dir);
    CHECK_ERR(wf_dataset_list_files(pat, 0, 0, &none), WF_NOT_FOUND, "No files matched pattern");
    wf_graph_free(f.g);
}

/* Text lines, TFRecord (a bad CRC names the file and offset), CSV (typed columns, a string column, a
 * selection in any order, a row with the wrong column count skipped by ignore_errors). */
static void test_file_sources(void)
{
    char a[700], b[700], tfr[700], csv[700];
    snprintf(a, sizeof a, "%s/a.txt", g_dir);
    snprintf(b, sizeof b, "%s/b.txt", g_dir);
    FILE *fa = fopen(a, "w"), *fb = fopen(b, "w");
    if (!fa || !fb) {
        CHECK_FAIL_("cannot write under %s", g_dir);
        if (fa) fclose(fa);
        if (fb) fclose(fb);
        return;
    }
    fputs("one\ntwo\r\n\nthree", fa);
    fputs("four\n", fb);
    fclose(fa);
    fclose(fb);
    const char *paths[2] = {a, b};
    wf_dataset *tl = NULL;
    CHECK_OK(wf_dataset_text_lines(paths, 2, &tl));
    const char *want[5] = {"one", "two", "", "three", "four"};
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(tl, NULL, &it));
    for (int i = 0; i < 6 && it; i++) {
        wf_tensor *t = NULL;
        int n = 0;
        CHECK_OK(wf_iterator_next(it, &t, 1, &n));
        if (i == 5) {
            CHECK_INT(n, 0);
            break;
        }
        CHECK_INT(n, 1);
        if (!n) break;
        size_t len = 0;
        const char *sv = wf_tensor_string(t, 0, &len);
        CHECK(sv && len == strlen(want[i]) && !memcmp(sv, want[i], len));
        wf_tensor_free(t);
    }
    wf_iterator_free(it);
    wf_dataset_free(tl);

    /* TFRecord: written by wf_tfrecord_write, read back; one flipped data byte is DATA_LOSS */
    snprintf(tfr, sizeof tfr, "%s/r.tfrecord", g_dir);
    const char *recs[3] = {"alpha", "", "gamma-gamma"};
    const void *rp[3] = {recs[0], recs[1], recs[2]};
    size_t rl[3] = {5, 0, 11};
    CHECK_OK(wf_tfrecord_write(tfr, rp, rl, 3));
    const char *tp[1] = {tfr};
    wf_dataset *tr = NULL, *trb = NULL;
    CHECK_OK(wf_dataset_tfrecord(tp, 1, &tr));
    CHECK_OK(wf_dataset_batch(tr, 3, 0, &trb));
    CHECK_OK(wf_dataset_iterator(trb, NULL, &it));
    wf_tensor *t = NULL;
    int n = 0;
    CHECK_OK(wf_iterator_next(it, &t, 1, &n));
    if (n) {
        CHECK_INT(wf_tensor_dtype(t), WF_STRING);
        CHECK_INT(wf_tensor_dims(t)[0], 3);
        for (int i = 0; i < 3; i++) {
            size_t len = 9;
            const char *sv = wf_tensor_string(t, i, &len);
            CHECK(sv && len == rl[i] && !memcmp(sv, recs[i], len));
        }
        wf_tensor_free(t);
    }
    wf_iterator_free(it);
    FILE *fr = fopen(tfr, "r+b");
    if (fr) {
        fseek(fr, 12 + 2, SEEK_SET); /* inside record 0's data */
        fputc('X', fr);
        fclose(fr);
    }
    CHECK_OK(wf_dataset_iterator(tr, NULL, &it));
    n = 0;
    wf_status *s = wf_iterator_next(it, &t, 1, &n);
    CHECK(s != NULL);
    if (s) {
        CHECK_INT(wf_status_code(s), WF_DATA_LOSS);
        CHECK_STR_CONTAINS(wf_status_message(s), tfr);
        CHECK_STR_CONTAINS(wf_status_message(s), "at byte 0");
        CHECK_STR_CONTAINS(wf_status_message(s), "tfrecord stage");
        wf_status_free(s);
    } else if (n) {
        wf_tensor_free(t);
    }
    wf_iterator_free(it);
    wf_dataset_free(trb);
    wf_dataset_free(tr);

    /* CSV */
    snprintf(csv, sizeof csv, "%s/t.csv", g_dir);
    FILE *fc = fopen(csv, "w");
    if (fc) {
        fputs("id,name,score\n1,\"Smith, J\",2.5\n2,bad row\n3,\"O\"\"Neil\",\n", fc);
        fclose(fc);
    }
    wf_dtype dts[3] = {WF_I64, WF_STRING, WF_F32};
    const char *defs[3] = {NULL, NULL, "-1"};
    int sel[3] = {2, 0, 1};
    wf_csv_options co = {.n_columns = 3, .dtypes = dts, .defaults = defs, .header = 1, .select = sel, .n_select = 3};
    const char *cp[1] = {csv};
    wf_dataset *cs = NULL, *ci = NULL;
    CHECK_OK(wf_dataset_csv(cp, 1, &co, &cs));
    CHECK_OK(wf_dataset_iterator(cs, NULL, &it));
    int rows = 0, errors = 0;
    for (int k = 0; k < 6 && it; k++) {
        wf_tensor *r3[3];
        n = 0;
        s = wf_iterator_next(it, r3, 3, &n);
        if (s) {
            errors++;
            CHECK_STR_CONTAINS(wf_status_message(s), csv);
            CHECK_STR_CONTAINS(wf_status_message(s), "line 3");
            CHECK_STR_CONTAINS(wf_status_message(s), "expected 3 fields, found 2");
            wf_status_free(s);
            continue;
        }
        if (!n) break;
        CHECK_INT(n, 3);
        /* selected order: score, id, name */
        float score = *(float *)wf_tensor_data(r3[0]);
        int64_t id = *(int64_t *)wf_tensor_data(r3[1]);
        size_t len = 0;
        const char *name = wf_tensor_string(r3[2], 0, &len);
        if (rows == 0) {
            CHECK_INT(id, 1);
            CHECK_NEAR(score, 2.5, 0);
            CHECK(name && len == 8 && !memcmp(name, "Smith, J", 8));
        } else {
            CHECK_INT(id, 3);
            CHECK_NEAR(score, -1, 0); /* the default of an empty field */
            CHECK(name && len == 6 && !memcmp(name, "O\"Neil", 6));
        }
        rows++;
        for (int i = 0; i < n; i++) wf_tensor_free(r3[i]);
    }
    CHECK_INT(rows, 2);
    CHECK_INT(errors, 1);
    wf_iterator_free(it);
    CHECK_OK(wf_dataset_ignore_errors(cs, &ci));
    int64_t v[8];
    CHECK_INT(collect(ci, NULL, v, 8), 2);
    /* strings stay on the host: prefetch_to_device names the component */
    {
        wf_context *ctx = NULL;
        wf_dataset *pd = NULL;
        CHECK_OK(wf_context_new(NULL, &ctx));
        const char *tp1[1] = {a};
        wf_dataset *lines = NULL;
        CHECK_OK(wf_dataset_text_lines(tp1, 1, &lines));
        if (ctx && lines) CHECK_OK(wf_dataset_prefetch_to_device(lines, ctx, "CPU:0", 2, &pd));
        it = NULL;
        if (pd) CHECK_OK(wf_dataset_iterator(pd, NULL, &it));
        wf_tensor *x = NULL;
        n = 0;
        if (it) CHECK_ERR(wf_iterator_next(it, &x, 1, &n), WF_INVALID_ARGUMENT, "component 0 is a string");
        wf_iterator_free(it);
        wf_dataset_free(pd);
        wf_dataset_free(lines);
        wf_context_free(ctx);
    }
    wf_dataset_free(ci);
    wf_dataset_free(cs);
}

int main(void)
{
    snprintf(g_root, sizeof g_root, "%s", __FILE__);
    char *cut = strstr(g_root, "/tests/test_pipeline.c");
    if (cut) *cut = 0;
    else snprintf(g_root, sizeof g_root, ".");
    snprintf(g_dir, sizeof g_dir, "/tmp/weft_test_pipeline_%d", (int)getpid());
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && /usr/bin/python3 %s/tests/data/make_pipeline_ref.py %s %d %d %d %d %g",
             g_dir, g_root, g_dir, IMG_N, IMG_H, IMG_W, IMG_SEED, IMG_DELTA);
    g_have_imgs = access("/usr/bin/python3", X_OK) == 0 && sh(cmd) == 0;

    RUN_TEST(test_range_take_skip_repeat);
    RUN_TEST(test_batch_unbatch_padded);
    RUN_TEST(test_padded_batch);
    RUN_TEST(test_shuffle);
    RUN_TEST(test_zip_and_slices);
    RUN_TEST(test_parallel_map_deterministic);
    RUN_TEST(test_graph_map_and_filter);
    RUN_TEST(test_map_into_batch);
    RUN_TEST(test_map_into_batch_checkpoint);
    RUN_TEST(test_graph_map_into_batch);
    RUN_TEST(test_map_into_batch_random);
    RUN_TEST(test_prefetch_and_stats);
    RUN_TEST(test_ram_budget);
    RUN_TEST(test_checkpoint);
    RUN_TEST(test_legacy_view);
    RUN_TEST(test_interleave);
    RUN_TEST(test_interleave_errors);
    RUN_TEST(test_restore_bad_state);
    RUN_TEST(test_cache);
    RUN_TEST(test_npy_source);
    RUN_TEST(test_oom);
    RUN_TEST(test_image_pipeline);
    RUN_TEST(test_image_bad_file);
    RUN_TEST(test_file_sources);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    sh(cmd);
    return check_summary();
}
