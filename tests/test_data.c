/* Datasets and checkpoints: IDX files (plain and gzip) against numpy's arrays, batching, seeded shuffling
 * against an independent Python implementation of the documented generator, validation splits, the
 * safetensors format both ways against the reference `safetensors` package, and every malformed-file
 * error, written byte by byte. Fashion-MNIST is checked when its Debian package is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "testutil.h"
#include "core/core.h"

static char g_root[512];  /* the source tree, for the Python helpers */
static int g_have_ref;    /* make_idx.py ran: IDX references exist */

static int file_exists(const char *p) { return access(p, F_OK) == 0; }

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* ---- IDX -------------------------------------------------------------------------------------------- */

static void expect_same(const wf_tensor *got, const wf_tensor *want, const char *what)
{
    CHECK_INT(wf_tensor_dtype(got), wf_tensor_dtype(want));
    CHECK_INT(wf_tensor_rank(got), wf_tensor_rank(want));
    for (int i = 0; i < wf_tensor_rank(got) && i < wf_tensor_rank(want); i++)
        CHECK_INT(wf_tensor_dims(got)[i], wf_tensor_dims(want)[i]);
    if (wf_tensor_bytes(got) != wf_tensor_bytes(want) ||
        memcmp(wf_tensor_data(got), wf_tensor_data(want), wf_tensor_bytes(got)))
        CHECK_FAIL_("%s: data differs from numpy's", what);
}

static void test_idx_values(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_idx_values", "/usr/bin/python3 with numpy is not available");
        return;
    }
    static const char *names[] = {"u8", "i8", "i16", "i32", "f32", "f64"};
    for (int i = 0; i < 6; i++) {
        char base[64], f[80];
        wf_tensor *want = NULL, *got = NULL;
        snprintf(base, sizeof base, "a_%s", names[i]);
        snprintf(f, sizeof f, "%s.npy", base);
        CHECK_OK(wf_npy_read(path_in(f), &want));
        for (int gz = 0; gz < 2 && want; gz++) {
            snprintf(f, sizeof f, "%s.idx%s", base, gz ? ".gz" : "");
            got = NULL;
            CHECK_OK(wf_idx_read(path_in(f), &got));
            if (got) expect_same(got, want, f);
            wf_tensor_free(got);
        }
        wf_tensor_free(want);
    }
}

/* Writes an IDX header of `type` with dims, then `data_bytes` zero bytes. */
static const char *idx_file(const char *name, unsigned type, int rank, const uint32_t *dims, size_t data_bytes)
{
    unsigned char buf[256] = {0, 0, (unsigned char)type, (unsigned char)rank};
    size_t n = 4;
    for (int i = 0; i < rank; i++, n += 4) {
        buf[n] = (unsigned char)(dims[i] >> 24);
        buf[n + 1] = (unsigned char)(dims[i] >> 16);
        buf[n + 2] = (unsigned char)(dims[i] >> 8);
        buf[n + 3] = (unsigned char)dims[i];
    }
    n += data_bytes;
    return write_file(name, buf, n);
}

static const char *gz_file(const char *name, const unsigned char *bytes, size_t n)
{
    const char *p = path_in(name);
    gzFile g = gzopen(p, "wb");
    gzwrite(g, bytes, (unsigned)n);
    gzclose(g);
    return p;
}

static void test_idx_errors(void)
{
    wf_tensor *t = (wf_tensor *)0x1;
    CHECK_ERR(wf_idx_read("/nonexistent/train-images.gz", &t), WF_NOT_FOUND, "/nonexistent/train-images.gz");
    const char *p = write_file("empty.idx", NULL, 0);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "not an IDX file (empty)");
    CHECK_STR_CONTAINS(p, "empty.idx");
    p = write_file("magic.idx", "\x01\x00\x08\x01\x00\x00\x00\x01\x05", 9);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "magic.idx: not an IDX file (bad magic");
    p = write_file("type.idx", "\x00\x00\x0a\x01\x00\x00\x00\x01\x05", 9);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "IDX element type 0x0a is unknown");
    p = write_file("rank0.idx", "\x00\x00\x08\x00", 4);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "IDX rank 0 is not supported");
    p = write_file("hdr.idx", "\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00", 10);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "hdr.idx: truncated IDX header: 3 dims need 12 bytes, found 6");
    uint32_t d[3] = {3, 2, 2};
    p = idx_file("short.idx", 0x0C, 3, d, 47); /* i32 [3,2,2] needs 48 bytes */
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "short.idx: truncated IDX data: i32 [3,2,2] needs 48 bytes, the file holds 47");
    p = idx_file("long.idx", 0x08, 3, d, 13);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "long.idx: IDX dims [3,2,2] of u8 need 12 bytes of data, but the file holds 13 (1 extra)");
    CHECK(t == (wf_tensor *)0x1); /* no output written on failure */

    /* gzip: a good file, then the same stream cut short and with a damaged byte */
    unsigned char raw[4 + 4 + 200];
    memcpy(raw, "\x00\x00\x08\x01\x00\x00\x00\xc8", 8);
    for (int i = 0; i < 200; i++) raw[8 + i] = (unsigned char)(i * 31 + 7);
    p = gz_file("ok.idx.gz", raw, sizeof raw);
    CHECK_OK(wf_idx_read(p, &t));
    if (t != (wf_tensor *)0x1) {
        CHECK_INT(wf_tensor_size(t), 200);
        CHECK(memcmp(wf_tensor_data(t), raw + 8, 200) == 0);
        wf_tensor_free(t);
    }
    unsigned char gz[1024];
    size_t n = read_all(p, gz, sizeof gz);
    CHECK(n > 30);
    p = write_file("cut.idx.gz", gz, n - 12);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "cut.idx.gz: gzip stream is truncated");
    unsigned char bad[1024];
    memcpy(bad, gz, n);
    bad[n - 8] ^= 0x55; /* the CRC of the trailer */
    p = write_file("crc.idx.gz", bad, n);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "crc.idx.gz: gzip stream is corrupt");
    memcpy(bad, gz, n);
    for (int i = 10; i < 16; i++) bad[i] = 0xff; /* the first deflate block header */
    p = write_file("deflate.idx.gz", bad, n);
    CHECK_ERR(wf_idx_read(p, &t), WF_INVALID_ARGUMENT, "deflate.idx.gz: gzip stream is corrupt");
}

static void test_dataset_from_idx(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_dataset_from_idx", "/usr/bin/python3 with numpy is not available");
        return;
    }
    wf_dataset *ds = NULL;
    wf_dataset_options o;
    wf_dataset_options_init(&o);
    o.scale = 1;
    o.label_dtype = WF_I64;
    CHECK_OK(wf_dataset_from_idx(path_in("images.idx.gz"), path_in("labels.idx"), &o, &ds));
    if (!ds) return;
    CHECK_INT(wf_dataset_num_samples(ds), 10);
    wf_tensor *x = NULL, *y = NULL, *want = NULL;
    CHECK_OK(wf_dataset_rows(ds, 0, 10, &x, &y));
    CHECK_OK(wf_npy_read(path_in("images_scaled.npy"), &want));
    if (x && want) expect_same(x, want, "scaled images");
    CHECK_INT(wf_tensor_dtype(y), WF_I64);
    for (int i = 0; i < 10; i++) CHECK_INT(((int64_t *)wf_tensor_data(y))[i], i);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_tensor_free(want);
    wf_dataset_free(ds);

    /* unscaled: the stored u8 */
    CHECK_OK(wf_dataset_from_idx(path_in("images.idx"), NULL, NULL, &ds));
    CHECK_OK(wf_npy_read(path_in("images.npy"), &want));
    x = NULL;
    y = (wf_tensor *)0x1;
    CHECK_OK(wf_dataset_rows(ds, 0, 10, &x, &y));
    if (x && want) expect_same(x, want, "u8 images");
    CHECK(y == NULL); /* no labels */
    wf_tensor_free(x);
    wf_tensor_free(want);
    wf_dataset_free(ds);

    /* a failed open leaves no dataset */
    ds = (wf_dataset *)0x1;
    CHECK_ERR(wf_dataset_from_idx(path_in("images.idx.gz"), path_in("labels9.idx.gz"), NULL, &ds), WF_INVALID_ARGUMENT,
              "labels9.idx.gz holds 9 labels but");
    CHECK_ERR(wf_dataset_from_idx(path_in("images.idx.gz"), path_in("labels9.idx.gz"), NULL, &ds), WF_INVALID_ARGUMENT,
              "images.idx.gz holds 10 images");
    CHECK_ERR(wf_dataset_from_idx(path_in("images.idx.gz"), path_in("nope.idx"), NULL, &ds), WF_NOT_FOUND, "nope.idx");
    CHECK_ERR(wf_dataset_from_idx(path_in("crc.idx.gz"), NULL, NULL, &ds), WF_INVALID_ARGUMENT, "crc.idx.gz: gzip stream is corrupt");
    CHECK(ds == (wf_dataset *)0x1);

    /* every allocation failing in turn: OUT_OF_MEMORY, nothing leaked (ASan), no dataset */
    int ok = 0;
    for (long nth = 1; nth < 200 && !ok; nth++) {
        wf__fault_inject(nth);
        ds = NULL;
        wf_status *s = wf_dataset_from_idx(path_in("images.idx.gz"), path_in("labels.idx.gz"), &o, &ds);
        wf__fault_inject(0);
        if (!s) {
            ok = 1;
            CHECK_INT(wf_dataset_num_samples(ds), 10);
            wf_dataset_free(ds);
        } else {
            CHECK_INT(wf_status_code(s), WF_OUT_OF_MEMORY);
            CHECK(ds == NULL);
            wf_status_free(s);
        }
    }
    CHECK(ok);
}

/* ---- datasets over tensors ------------------------------------------------------------------------- */

/* 10 samples: features f32 [10,3] with row r = (10r, 10r+1, 10r+2), labels i64 [10] = r. */
static wf_dataset *small_dataset(int64_t n)
{
    int64_t fd[2] = {n, 3}, ld[1] = {n};
    wf_tensor *x, *y;
    wf_dataset *ds = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, fd, NULL, &x));
    CHECK_OK(wf_tensor_new(WF_I64, 1, ld, NULL, &y));
    for (int64_t r = 0; r < n; r++) {
        for (int c = 0; c < 3; c++) ((float *)wf_tensor_data(x))[r * 3 + c] = (float)(10 * r + c);
        ((int64_t *)wf_tensor_data(y))[r] = r;
    }
    CHECK_OK(wf_dataset_from_tensors(x, y, &ds));
    wf_tensor_free(x); /* the dataset keeps its own references */
    wf_tensor_free(y);
    return ds;
}

/* Runs one epoch; writes the label sequence into order (cap entries) and the batch sizes into sizes.
 * Checks that every feature row belongs to its label. Returns the number of samples. */
static int run_epoch(wf_dataset *ds, int64_t *order, int cap, int *sizes, int *n_batches)
{
    int got = 0;
    *n_batches = 0;
    wf_tensor *x, *y;
    wf_status *s;
    while (!(s = wf_dataset_next_batch(ds, &x, &y)) && x) {
        int64_t b = wf_tensor_dims(x)[0];
        CHECK_INT(wf_tensor_rank(x), 2);
        CHECK_INT(wf_tensor_dims(x)[1], 3);
        CHECK_INT(wf_tensor_dims(y)[0], b);
        for (int64_t i = 0; i < b; i++) {
            int64_t r = ((int64_t *)wf_tensor_data(y))[i];
            for (int c = 0; c < 3; c++) CHECK_NEAR(((float *)wf_tensor_data(x))[i * 3 + c], 10 * r + c, 0);
            if (got < cap) order[got] = r;
            got++;
        }
        sizes[(*n_batches)++] = (int)b;
        wf_tensor_free(x);
        wf_tensor_free(y);
    }
    CHECK_OK(s);
    return got;
}

static void test_batching(void)
{
    wf_dataset *ds = small_dataset(10);
    int64_t order[16];
    int sizes[16], nb;
    /* default batch 32: one batch of everything, in stored order */
    CHECK_INT(run_epoch(ds, order, 16, sizes, &nb), 10);
    CHECK_INT(nb, 1);
    for (int i = 0; i < 10; i++) CHECK_INT(order[i], i);
    /* the end of the epoch repeats until reset */
    wf_tensor *x = (wf_tensor *)0x1, *y = (wf_tensor *)0x1;
    CHECK_OK(wf_dataset_next_batch(ds, &x, &y));
    CHECK(x == NULL && y == NULL);
    CHECK_OK(wf_dataset_set_batch(ds, 4, 0));
    wf_dataset_reset(ds);
    CHECK_INT(wf_dataset_epoch(ds), 1);
    CHECK_INT(run_epoch(ds, order, 16, sizes, &nb), 10);
    CHECK_INT(nb, 3);
    CHECK_INT(sizes[0], 4);
    CHECK_INT(sizes[1], 4);
    CHECK_INT(sizes[2], 2); /* last partial batch */
    for (int i = 0; i < 10; i++) CHECK_INT(order[i], i);
    CHECK_OK(wf_dataset_set_batch(ds, 4, 1));
    wf_dataset_reset(ds);
    CHECK_INT(run_epoch(ds, order, 16, sizes, &nb), 8);
    CHECK_INT(nb, 2); /* remainder dropped */
    CHECK_OK(wf_dataset_set_batch(ds, 5, 1));
    wf_dataset_reset(ds);
    CHECK_INT(run_epoch(ds, order, 16, sizes, &nb), 10); /* exact multiple: nothing dropped */
    CHECK_INT(nb, 2);
    CHECK_ERR(wf_dataset_set_batch(ds, 0, 0), WF_INVALID_ARGUMENT, "batch size must be at least 1, got 0");
    /* labels not wanted */
    wf_dataset_reset(ds);
    x = NULL;
    CHECK_OK(wf_dataset_next_batch(ds, &x, NULL));
    CHECK(x != NULL);
    wf_tensor_free(x);
    /* take: stored order, range checked */
    CHECK_OK(wf_dataset_rows(ds, 7, 3, &x, &y));
    CHECK_INT(((int64_t *)wf_tensor_data(y))[0], 7);
    CHECK_INT(wf_tensor_dims(x)[0], 3);
    wf_tensor_free(x);
    wf_tensor_free(y);
    CHECK_ERR(wf_dataset_rows(ds, 8, 3, &x, &y), WF_INVALID_ARGUMENT, "samples [8, 11) are out of range: it holds 10");
    /* an out-of-memory batch does not advance the epoch */
    wf_dataset_reset(ds);
    wf__tensor_cache_flush(); /* else the batch may come from the small-tensor cache, not the funnel */
    wf__fault_inject(1);
    wf_status *s = wf_dataset_next_batch(ds, &x, &y);
    wf__fault_inject(0);
    CHECK_INT(wf_status_code(s), WF_OUT_OF_MEMORY);
    wf_status_free(s);
    CHECK_INT(run_epoch(ds, order, 16, sizes, &nb), 10);
    wf_dataset_free(ds);

    /* mismatched and malformed arrays */
    int64_t d2[2] = {4, 2}, d1[1] = {5};
    wf_tensor *f, *l, *sc;
    CHECK_OK(wf_tensor_new(WF_F32, 2, d2, NULL, &f));
    CHECK_OK(wf_tensor_new(WF_I32, 1, d1, NULL, &l));
    CHECK_OK(wf_tensor_new(WF_F32, 0, NULL, NULL, &sc));
    wf_dataset *bad = (wf_dataset *)0x1;
    CHECK_ERR(wf_dataset_from_tensors(f, l, &bad), WF_INVALID_ARGUMENT,
              "labels i32[5] and features f32[4,2] have different sample counts");
    CHECK_ERR(wf_dataset_from_tensors(sc, NULL, &bad), WF_INVALID_ARGUMENT, "must have a samples dim");
    CHECK(bad == (wf_dataset *)0x1);
    /* no labels: y comes back NULL */
    CHECK_OK(wf_dataset_from_tensors(f, NULL, &ds));
    x = NULL;
    y = (wf_tensor *)0x1;
    CHECK_OK(wf_dataset_next_batch(ds, &x, &y));
    CHECK(y == NULL);
    CHECK_INT(wf_tensor_dims(x)[0], 4);
    wf_tensor_free(x);
    wf_dataset_free(ds);
    wf_tensor_free(f);
    wf_tensor_free(l);
    wf_tensor_free(sc);
}

/* Orders from shuffle_ref.txt: "seed epoch n order..." computed by make_idx.py's own implementation. */
static void test_shuffle_reference(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_shuffle_reference", "/usr/bin/python3 with numpy is not available");
        return;
    }
    FILE *f = fopen(path_in("shuffle_ref.txt"), "r");
    CHECK(f != NULL);
    if (!f) return;
    unsigned long long seed;
    long long epoch, n;
    int lines = 0;
    static int64_t want[1000], got[1000];
    while (fscanf(f, "%llu %lld %lld", &seed, &epoch, &n) == 3) {
        for (long long i = 0; i < n; i++)
            if (fscanf(f, "%" SCNd64, &want[i]) != 1) CHECK_FAIL_("shuffle_ref.txt is malformed");
        wf_dataset *ds = small_dataset(n);
        wf_dataset_set_shuffle(ds, (uint64_t)seed);
        for (long long e = 0; e < epoch; e++) wf_dataset_reset(ds);
        int sizes[64], nb;
        CHECK_OK(wf_dataset_set_batch(ds, 64, 0));
        CHECK_INT(run_epoch(ds, got, 1000, sizes, &nb), n);
        int same = 1;
        for (long long i = 0; i < n; i++) same &= got[i] == want[i];
        if (!same) CHECK_FAIL_("seed %llu epoch %lld n %lld: order differs from the Python reference (first %lld vs %lld)",
                               seed, epoch, n, (long long)got[0], (long long)want[0]);
        wf_dataset_free(ds);
        lines++;
    }
    fclose(f);
    CHECK_INT(lines, 6);
}

static int is_permutation(const int64_t *o, int n)
{
    int seen[1000] = {0};
    for (int i = 0; i < n; i++) {
        if (o[i] < 0 || o[i] >= n || seen[o[i]]) return 0;
        seen[o[i]] = 1;
    }
    return 1;
}

static void test_shuffle(void)
{
    enum { N = 100 };
    int64_t a0[N], a1[N], b0[N], c0[N];
    int sizes[64], nb;
    wf_dataset *a = small_dataset(N), *b = small_dataset(N), *c = small_dataset(N);
    CHECK_OK(wf_dataset_set_batch(a, 7, 0));
    CHECK_OK(wf_dataset_set_batch(b, 16, 0)); /* the batch size does not change the order */
    CHECK_OK(wf_dataset_set_batch(c, 7, 0));
    wf_dataset_set_shuffle(a, 1234);
    wf_dataset_set_shuffle(b, 1234);
    wf_dataset_set_shuffle(c, 1235);
    CHECK_INT(run_epoch(a, a0, N, sizes, &nb), N);
    CHECK_INT(nb, 15);
    CHECK_INT(sizes[14], 2);
    CHECK_INT(run_epoch(b, b0, N, sizes, &nb), N);
    CHECK_INT(run_epoch(c, c0, N, sizes, &nb), N);
    CHECK(is_permutation(a0, N));
    CHECK(is_permutation(c0, N));
    CHECK(memcmp(a0, b0, sizeof a0) == 0);          /* same seed, same order */
    CHECK(memcmp(a0, c0, sizeof a0) != 0);          /* another seed, another order */
    int in_place = 0;
    for (int i = 0; i < N; i++) in_place += a0[i] == i;
    CHECK(in_place < 10);                           /* actually shuffled */
    wf_dataset_reset(a);
    CHECK_INT(run_epoch(a, a1, N, sizes, &nb), N);
    CHECK(is_permutation(a1, N));
    CHECK(memcmp(a0, a1, sizeof a0) != 0);          /* each epoch its own order */
    /* seed 1235's first epoch is not seed 1234's second (the seed is hashed, not offset) */
    CHECK(memcmp(a1, c0, sizeof a1) != 0);
    /* shuffling again with the same seed restarts the current epoch in the same order */
    wf_dataset_set_shuffle(a, 1234);
    CHECK_INT(run_epoch(a, b0, N, sizes, &nb), N);
    CHECK(memcmp(a1, b0, sizeof a1) == 0);
    wf_dataset_free(a);
    wf_dataset_free(b);
    wf_dataset_free(c);
}

static void test_split(void)
{
    wf_dataset *ds = small_dataset(10), *tr = NULL, *va = NULL;
    int64_t o[16];
    int sizes[16], nb;
    CHECK_OK(wf_dataset_set_batch(ds, 4, 1));
    CHECK_OK(wf_dataset_split(ds, 0.3, &tr, &va));
    CHECK_INT(wf_dataset_num_samples(tr), 7);
    CHECK_INT(wf_dataset_num_samples(va), 3);
    /* unshuffled: the last samples are the validation set (Keras's validation_split) */
    CHECK_OK(wf_dataset_set_batch(va, 10, 0));
    CHECK_INT(run_epoch(va, o, 16, sizes, &nb), 3);
    CHECK_INT(o[0], 7);
    CHECK_INT(o[2], 9);
    CHECK_INT(run_epoch(tr, o, 16, sizes, &nb), 4); /* inherits batch 4, drop remainder */
    wf_dataset_free(tr);
    wf_dataset_free(va);

    /* shuffled: a reproducible random subset; together the two hold every sample once */
    wf_dataset_set_shuffle(ds, 99);
    CHECK_OK(wf_dataset_split(ds, 0.25, &tr, &va)); /* round(2.5) = 3 */
    wf_dataset_free(ds);                            /* the splits keep the arrays */
    CHECK_INT(wf_dataset_num_samples(tr), 7);
    CHECK_INT(wf_dataset_num_samples(va), 3);
    CHECK_OK(wf_dataset_set_batch(tr, 10, 0));
    CHECK_OK(wf_dataset_set_batch(va, 10, 0));
    int64_t all[10];
    CHECK_INT(run_epoch(tr, all, 7, sizes, &nb), 7);
    CHECK_INT(run_epoch(va, all + 7, 3, sizes, &nb), 3);
    CHECK(is_permutation(all, 10));
    int sorted_tail = all[7] == 7 && all[8] == 8 && all[9] == 9;
    wf_dataset *ds2 = small_dataset(10), *tr2, *va2;
    wf_dataset_set_shuffle(ds2, 99);
    CHECK_OK(wf_dataset_split(ds2, 0.25, &tr2, &va2));
    CHECK_OK(wf_dataset_set_batch(va2, 10, 0));
    int64_t o2[3];
    CHECK_INT(run_epoch(va2, o2, 3, sizes, &nb), 3);
    CHECK(memcmp(o2, all + 7, sizeof o2) == 0);      /* same seed, same split */
    CHECK(!sorted_tail);
    /* a split dataset shuffles within itself */
    wf_dataset_set_shuffle(tr, 5);
    CHECK_INT(run_epoch(tr, o, 16, sizes, &nb), 7);
    for (int i = 0; i < 7; i++) {
        int found = 0;
        for (int j = 0; j < 7; j++) found |= o[i] == all[j];
        CHECK(found);
    }
    CHECK_ERR(wf_dataset_split(ds2, 0, &tr, &va), WF_INVALID_ARGUMENT, "must be in (0, 1), got 0");
    CHECK_ERR(wf_dataset_split(ds2, 1.5, &tr, &va), WF_INVALID_ARGUMENT, "must be in (0, 1)");
    CHECK_ERR(wf_dataset_split(ds2, 0.01, &tr, &va), WF_INVALID_ARGUMENT, "leaves the validation set empty");
    CHECK_ERR(wf_dataset_split(ds2, 0.99, &tr, &va), WF_INVALID_ARGUMENT, "leaves the training set empty");
    wf_dataset_free(tr);
    wf_dataset_free(va);
    wf_dataset_free(tr2);
    wf_dataset_free(va2);
    wf_dataset_free(ds2);
}

static void test_fashion_mnist(void)
{
    const char *d = "/usr/share/datasets/fashion-mnist";
    if (!file_exists(d)) {
        CHECK_SKIP("test_fashion_mnist", "%s is missing (Debian package dataset-fashion-mnist)", d);
        return;
    }
    static const struct { const char *images, *labels; int64_t n; } sets[] = {
        {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 60000},
        {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 10000},
    };
    for (int k = 0; k < 2; k++) {
        char ip[256], lp[256];
        snprintf(ip, sizeof ip, "%s/%s", d, sets[k].images);
        snprintf(lp, sizeof lp, "%s/%s", d, sets[k].labels);
        wf_dataset *ds = NULL;
        CHECK_OK(wf_dataset_from_idx(ip, lp, NULL, &ds));
        if (!ds) continue;
        CHECK_INT(wf_dataset_num_samples(ds), sets[k].n);
        wf_tensor *x = NULL, *y = NULL;
        CHECK_OK(wf_dataset_rows(ds, 0, sets[k].n, &x, &y));
        if (x && y) {
            CHECK_INT(wf_tensor_dtype(x), WF_U8);
            CHECK_INT(wf_tensor_rank(x), 3);
            CHECK_INT(wf_tensor_dims(x)[1], 28);
            CHECK_INT(wf_tensor_dims(x)[2], 28);
            int64_t hist[10] = {0}, out_of_range = 0;
            const uint8_t *l = wf_tensor_data(y);
            for (int64_t i = 0; i < sets[k].n; i++) {
                if (l[i] > 9) out_of_range++;
                else hist[l[i]]++;
            }
            CHECK_INT(out_of_range, 0);
            for (int c = 0; c < 10; c++) CHECK_INT(hist[c], sets[k].n / 10); /* the classes are balanced */
            if (k == 1 && g_have_ref) {
                char cmd[1024];
                snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/data/make_idx.py fashion %s", g_root, g_dir);
                wf_tensor *wi = NULL, *wl = NULL;
                if (sh(cmd) == 0 && !wf_npy_read(path_in("fashion_t10k_images.npy"), &wi) &&
                    !wf_npy_read(path_in("fashion_t10k_labels.npy"), &wl)) {
                    expect_same(x, wi, "Fashion-MNIST t10k images");
                    expect_same(y, wl, "Fashion-MNIST t10k labels");
                } else {
                    CHECK_FAIL_("numpy could not read Fashion-MNIST's test set");
                }
                wf_tensor_free(wi);
                wf_tensor_free(wl);
            }
        }
        wf_tensor_free(x);
        wf_tensor_free(y);
        /* batched and shuffled as training will use it */
        wf_dataset_set_shuffle(ds, 1);
        CHECK_OK(wf_dataset_set_batch(ds, 256, 1));
        int64_t batches = 0;
        wf_status *s;
        while (!(s = wf_dataset_next_batch(ds, &x, &y)) && x) {
            batches++;
            wf_tensor_free(x);
            wf_tensor_free(y);
        }
        CHECK_OK(s);
        CHECK_INT(batches, sets[k].n / 256);
        wf_dataset_free(ds);
    }
}

/* ---- safetensors ------------------------------------------------------------------------------------ */

/* The tensors check_safetensors.py expects (the same table and formula). */
static const struct { const char *name; wf_dtype dtype; int rank; int64_t dims[3]; } g_st[] = {
    {"w.f64", WF_F64, 2, {2, 3}}, {"w.f32", WF_F32, 2, {3, 4}}, {"h.f16", WF_F16, 1, {5}}, {"b.bf16", WF_BF16, 2, {2, 2}},
    {"i64", WF_I64, 1, {4}}, {"i32", WF_I32, 3, {2, 2, 2}}, {"i16", WF_I16, 1, {3}}, {"i8", WF_I8, 1, {6}},
    {"u8", WF_U8, 1, {7}}, {"mask", WF_BOOL, 1, {5}}, {"scalar", WF_F32, 0, {0}}, {"empty", WF_F32, 2, {0, 3}},
    {"quote\"\\name \xc3\xa9", WF_F32, 1, {1}},
};
#define N_ST ((int)(sizeof g_st / sizeof g_st[0]))
static const char *g_meta = "{\"format\": \"pt\", \"note\": \"a \\\"quoted\\\" value \\u00e9\"}";

static double st_value(wf_dtype t, int64_t i)
{
    if (t == WF_U8) return (double)((37 * i + 3) % 256);
    if (t == WF_BOOL) return i % 3 == 0;
    double v = (double)((7 * i) % 11 - 5);
    return wf__dtype_is_float(t) ? v * 0.5 : v;
}

static void make_st_tensors(wf_tensor **ts, const char **names)
{
    for (int k = 0; k < N_ST; k++) {
        CHECK_OK(wf_tensor_new(g_st[k].dtype, g_st[k].rank, g_st[k].dims, NULL, &ts[k]));
        for (int64_t i = 0; i < wf_tensor_size(ts[k]); i++)
            wf__store_f64(wf_tensor_data(ts[k]), g_st[k].dtype, i, st_value(g_st[k].dtype, i));
        names[k] = g_st[k].name;
    }
}

/* Checks that a file read by weft holds exactly the table's tensors (any order). */
static void check_st_tensors(int n, char **names, wf_tensor **ts, int expect_bf16, const char *what)
{
    CHECK_INT(n, expect_bf16 ? N_ST : N_ST - 1);
    for (int k = 0; k < N_ST; k++) {
        if (!expect_bf16 && g_st[k].dtype == WF_BF16) continue;
        int j = 0;
        while (j < n && strcmp(names[j], g_st[k].name)) j++;
        if (j == n) {
            CHECK_FAIL_("%s: tensor '%s' missing", what, g_st[k].name);
            continue;
        }
        CHECK_INT(wf_tensor_dtype(ts[j]), g_st[k].dtype);
        CHECK_INT(wf_tensor_rank(ts[j]), g_st[k].rank);
        for (int d = 0; d < g_st[k].rank; d++) CHECK_INT(wf_tensor_dims(ts[j])[d], g_st[k].dims[d]);
        int bad = 0;
        for (int64_t i = 0; i < wf_tensor_size(ts[j]); i++)
            bad += wf__load_f64(wf_tensor_data(ts[j]), g_st[k].dtype, i) != st_value(g_st[k].dtype, i);
        if (bad) CHECK_FAIL_("%s: tensor '%s': %d values differ", what, g_st[k].name, bad);
    }
}

static void test_safetensors_roundtrip(void)
{
    wf_tensor *ts[N_ST];
    const char *names[N_ST];
    make_st_tensors(ts, names);
    const char *p = path_in("weft.safetensors");
    CHECK_OK(wf_safetensors_write(p, N_ST, names, ts, g_meta));
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    CHECK(!file_exists(tmp)); /* renamed into place */
    int n = 0;
    char **rn = NULL;
    wf_tensor **rt = NULL;
    CHECK_OK(wf_safetensors_read(p, &n, &rn, &rt));
    if (rn) check_st_tensors(n, rn, rt, 1, "weft round trip");
    /* in file order: the order written */
    for (int k = 0; k < n && k < N_ST; k++) CHECK(strcmp(rn[k], g_st[k].name) == 0);
    wf_safetensors_free(n, rn, rt);
    char *meta = NULL;
    CHECK_OK(wf_safetensors_metadata(p, &meta));
    CHECK_STR_CONTAINS(meta, "\"note\":\"a \\\"quoted\\\" value \xc3\xa9\"");
    wf_free(meta);
    /* the header pads the data to an 8-byte boundary */
    unsigned char head[8];
    CHECK_INT(read_all(p, head, 8), 8);
    CHECK_INT(head[0] % 8, 0);

    /* no metadata, no tensors */
    const char *q = path_in("none.safetensors");
    CHECK_OK(wf_safetensors_write(q, 0, NULL, NULL, NULL));
    CHECK_OK(wf_safetensors_read(q, &n, &rn, &rt));
    CHECK_INT(n, 0);
    wf_safetensors_free(n, rn, rt);
    meta = (char *)0x1;
    CHECK_OK(wf_safetensors_metadata(q, &meta));
    CHECK(meta == NULL);

    /* overwriting replaces the file whole */
    CHECK_OK(wf_safetensors_write(q, 2, names, ts, NULL));
    CHECK_OK(wf_safetensors_read(q, &n, &rn, &rt));
    CHECK_INT(n, 2);
    wf_safetensors_free(n, rn, rt);

    /* write errors: nothing is left behind */
    const char *dup[2] = {"a", "a"};
    const char *r = path_in("bad.safetensors");
    CHECK_ERR(wf_safetensors_write(r, 2, dup, ts, NULL), WF_INVALID_ARGUMENT, "tensor name 'a' appears twice");
    const char *md[1] = {"__metadata__"};
    CHECK_ERR(wf_safetensors_write(r, 1, md, ts, NULL), WF_INVALID_ARGUMENT, "'__metadata__' is reserved");
    CHECK_ERR(wf_safetensors_write(r, 1, names, ts, "{\"a\": 1}"), WF_INVALID_ARGUMENT, "__metadata__ value of 'a' must be a string");
    CHECK_ERR(wf_safetensors_write(r, 1, names, ts, "{\"a\": \"x\""), WF_INVALID_ARGUMENT, "the metadata is not valid JSON");
    CHECK_ERR(wf_safetensors_write(r, 1, names, ts, "[\"a\"]"), WF_INVALID_ARGUMENT, "must be a JSON object");
    CHECK(!file_exists(r));
    CHECK_ERR(wf_safetensors_write("/nonexistent/dir/m.safetensors", 1, names, ts, NULL), WF_IO_ERROR,
              "/nonexistent/dir/m.safetensors");

    /* out of memory at every step of a write and a read: a status, no leak, no partial output */
    int ok = 0;
    for (long nth = 1; nth < 500 && !ok; nth++) {
        wf__fault_inject(nth);
        wf_status *s = wf_safetensors_write(r, N_ST, names, ts, g_meta);
        wf__fault_inject(0);
        if (!s) ok = 1;
        else {
            CHECK_INT(wf_status_code(s), WF_OUT_OF_MEMORY);
            CHECK(!file_exists(r));
            wf_status_free(s);
        }
    }
    CHECK(ok);
    ok = 0;
    for (long nth = 1; nth < 500 && !ok; nth++) {
        wf__fault_inject(nth);
        rn = NULL;
        wf_status *s = wf_safetensors_read(p, &n, &rn, &rt);
        wf__fault_inject(0);
        if (!s) {
            ok = 1;
            wf_safetensors_free(n, rn, rt);
        } else {
            CHECK_INT(wf_status_code(s), WF_OUT_OF_MEMORY);
            CHECK(rn == NULL);
            wf_status_free(s);
        }
    }
    CHECK(ok);
    for (int k = 0; k < N_ST; k++) wf_tensor_free(ts[k]);
}

/* A safetensors file from a header text and `data_len` data bytes; hlen_override != 0 lies about the size. */
static const char *st_file(const char *name, const char *header, size_t data_len, uint64_t hlen_override)
{
    static unsigned char buf[4096];
    size_t hl = strlen(header);
    uint64_t h = hlen_override ? hlen_override : hl;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(h >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, 0x3f, data_len);
    return write_file(name, buf, 8 + hl + data_len);
}

static void test_safetensors_errors(void)
{
    int n = -1;
    char **names = (char **)0x1;
    wf_tensor **ts = NULL;
    const char *p;
#define READ_ERR(code, text) CHECK_ERR(wf_safetensors_read(p, &n, &names, &ts), code, text)
    CHECK_ERR(wf_safetensors_read("/nonexistent/model.safetensors", &n, &names, &ts), WF_NOT_FOUND,
              "/nonexistent/model.safetensors");
    p = write_file("tiny.safetensors", "\x02\x00\x00", 3);
    READ_ERR(WF_INVALID_ARGUMENT, "tiny.safetensors: not a safetensors file: 3 bytes");
    p = st_file("bigheader.safetensors", "{}", 0, 1000);
    READ_ERR(WF_INVALID_ARGUMENT, "bigheader.safetensors: header size 1000 is larger than the file (10 bytes)");
    p = st_file("huge.safetensors", "{}", 0, UINT64_MAX);
    READ_ERR(WF_INVALID_ARGUMENT, "larger than the file");
    p = st_file("json.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], ", 4, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "json.safetensors: the header is not valid JSON: expected a string key at byte 37");
    p = st_file("json1.safetensors", "{\"w\": {\"dtype\": \"F32\"", 4, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "json1.safetensors: the header is not valid JSON: expected ',' or '}' at byte 21");
    p = st_file("json2.safetensors", "{\"w\": {\"dtype\": F32}}", 4, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "not valid JSON: unexpected character at byte 16");
    p = st_file("json3.safetensors", "{\"w\": \"a\\qb\"}", 4, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "bad escape");
    p = st_file("array.safetensors", "[1, 2]", 0, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "the header is not a JSON object");
    p = st_file("dtype.safetensors", "{\"w\": {\"dtype\": \"U16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4, 0);
    READ_ERR(WF_UNIMPLEMENTED, "dtype.safetensors: tensor 'w' has dtype 'U16', which weft does not support");
    p = st_file("nodtype.safetensors", "{\"w\": {\"shape\": [2], \"data_offsets\": [0, 4]}}", 4, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "tensor 'w' has no \"dtype\" string");
    p = st_file("size.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 12]}}", 12, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "size.safetensors: tensor 'w': F32 [2,2] needs 16 bytes but data_offsets [0, 12) hold 12");
    p = st_file("shape.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "tensor 'w': shape entry 0 is not a non-negative integer");
    p = st_file("shape2.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 8]}}", 8, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "shape entry 0 is not a non-negative integer");
    p = st_file("overflow.safetensors", "{\"w\": {\"dtype\": \"F64\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]}}", 8, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "tensor 'w': F64 [4294967296,4294967296] is too large (2^62 bytes or more)");
    p = st_file("offsets.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0]}}", 8, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "tensor 'w' has no \"data_offsets\" pair");
    p = st_file("reversed.safetensors", "{\"w\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [8, 4]}}", 8, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "tensor 'w': data_offsets [8, 4) end before they begin");
    p = st_file("range.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                "\"b\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}}", 20, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "range.safetensors: tensor 'b': data_offsets [8, 24) run past the end of the data (20 bytes)");
    p = st_file("overlap.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                "\"b\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "overlap.safetensors: tensors 'a' [0, 8) and 'b' [4, 12) overlap");
    p = st_file("twice.safetensors", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 8, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "tensor 'a' appears twice in the header");
    p = st_file("meta.safetensors", "{\"__metadata__\": {\"k\": 3}}", 0, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "__metadata__ value of 'k' must be a string");
    p = st_file("deep.safetensors", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 0, 0);
    READ_ERR(WF_INVALID_ARGUMENT, "nesting too deep");
    CHECK_INT(n, -1); /* nothing written on failure */
    CHECK(names == (char **)0x1);

    /* a well-formed file built by hand: escapes, surrogate pairs, an empty tensor, padding (no holes:
     * the reference package refuses data that belongs to no tensor, see test_io.c) */
    p = st_file("hand.safetensors", "{\"\\u00e9\\ud83d\\ude00\\n\": {\"dtype\": \"I16\", \"shape\": [2], \"data_offsets\": [0, 4]}, "
                "\"z\": {\"dtype\": \"BOOL\", \"shape\": [0, 2], \"data_offsets\": [4, 4]}, \"__metadata__\": {}}   ", 4, 0);
    CHECK_OK(wf_safetensors_read(p, &n, &names, &ts));
    if (names != (char **)0x1) {
        CHECK_INT(n, 2);
        CHECK(strcmp(names[0], "\xc3\xa9\xf0\x9f\x98\x80\n") == 0);
        CHECK_INT(((int16_t *)wf_tensor_data(ts[0]))[1], 0x3f3f);
        CHECK_INT(wf_tensor_size(ts[1]), 0);
        wf_safetensors_free(n, names, ts);
    }
#undef READ_ERR
}

/* Files weft writes load in the reference package, and files it writes load in weft. */
static void test_safetensors_reference(void)
{
    char py[700], cmd[1800];
    snprintf(py, sizeof py, "%s/build/venv/bin/python", g_root);
    snprintf(cmd, sizeof cmd, "%s -c 'import safetensors, numpy' 2>/dev/null", py);
    if (!file_exists(py) || sh(cmd) != 0) {
        CHECK_SKIP("test_safetensors_reference", "%s with safetensors is missing (sh scripts/venv.sh)", py);
        return;
    }
    wf_tensor *ts[N_ST];
    const char *names[N_ST];
    make_st_tensors(ts, names);
    const char *p = path_in("for_ref.safetensors");
    CHECK_OK(wf_safetensors_write(p, N_ST, names, ts, g_meta));
    for (int k = 0; k < N_ST; k++) wf_tensor_free(ts[k]);
    snprintf(cmd, sizeof cmd, "%s %s/tests/data/check_safetensors.py verify %s >&2", py, g_root, p);
    CHECK_INT(sh(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s %s/tests/data/check_safetensors.py write %s >&2", py, g_root, g_dir);
    CHECK_INT(sh(cmd), 0);
    for (int bf = 0; bf < 2; bf++) {
        const char *q = path_in(bf ? "ref_bf16.safetensors" : "ref.safetensors");
        int n = 0;
        char **rn = NULL;
        wf_tensor **rt = NULL;
        CHECK_OK(wf_safetensors_read(q, &n, &rn, &rt));
        if (rn) check_st_tensors(n, rn, rt, bf, q);
        wf_safetensors_free(n, rn, rt);
        char *meta = NULL;
        CHECK_OK(wf_safetensors_metadata(q, &meta));
        CHECK_STR_CONTAINS(meta, "\"format\":\"pt\"");
        CHECK_STR_CONTAINS(meta, "a \\\"quoted\\\" value \xc3\xa9");
        wf_free(meta);
    }
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/weft_test_data_%d", (int)getpid());
    if (mkdir(g_dir, 0700) != 0) {
        perror(g_dir);
        return 1;
    }
    /* the source tree, from this file's path (CMake compiles it by absolute path) */
    snprintf(g_root, sizeof g_root, "%s", __FILE__);
    char *cut = strstr(g_root, "/tests/test_data.c");
    if (cut) *cut = 0;
    else snprintf(g_root, sizeof g_root, ".");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/data/make_idx.py %s", g_root, g_dir);
    g_have_ref = file_exists("/usr/bin/python3") && sh(cmd) == 0;

    RUN_TEST(test_idx_values);
    RUN_TEST(test_idx_errors);
    RUN_TEST(test_dataset_from_idx);
    RUN_TEST(test_batching);
    RUN_TEST(test_shuffle_reference);
    RUN_TEST(test_shuffle);
    RUN_TEST(test_split);
    RUN_TEST(test_fashion_mnist);
    RUN_TEST(test_safetensors_roundtrip);
    RUN_TEST(test_safetensors_errors);
    RUN_TEST(test_safetensors_reference);

    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    sh(cmd);
    return check_summary();
}
