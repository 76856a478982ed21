/* String tensors and the image ops of input pipelines: strings through tensors and sessions (several
 * threads at once), every place that must refuse them, ReadFile, and DecodeJpeg / DecodePng against
 * Pillow's decoding of the same files (tests/data/make_images.py, run at test time); then the bad
 * inputs: truncated and random data, a missing file, wrong dtypes, each an error naming the node, after
 * which the same session runs again. ConvertImageDtype and the random ops are checked against numpy in
 * tests/ops/cases_image.py. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

#include "core/alloc_hooks.h" /* wf__fault_inject */
#include "core/core.h"        /* wf__tensor_clone */

static char g_root[512];
static int g_have_ref;

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static wf_tensor *str1(const char *s)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new_strings(0, NULL, &s, NULL, &t));
    return t;
}

static bool str_is(const wf_tensor *t, int64_t i, const void *want, size_t n)
{
    size_t len = 0;
    const char *p = wf_tensor_string(t, i, &len);
    return p && len == n && (!n || !memcmp(p, want, n));
}

/* ---- string tensors -------------------------------------------------------------------------------- */

static void test_string_tensors(void)
{
    CHECK_INT(wf_dtype_size(WF_STRING), 16);
    CHECK(!strcmp(wf_dtype_name(WF_STRING), "string"));
    wf_dtype dt = WF_DTYPE_INVALID;
    CHECK_OK(wf_dtype_from_name("string", &dt));
    CHECK_INT(dt, WF_STRING);

    const char *ptrs[3] = {"ab\0cd", "", "hello"};
    size_t lens[3] = {5, 0, 5};
    int64_t dims[2] = {3, 1};
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new_strings(2, dims, ptrs, lens, &t));
    if (!t) return;
    CHECK_INT(wf_tensor_dtype(t), WF_STRING);
    CHECK_INT(wf_tensor_size(t), 3);
    CHECK_INT(wf_tensor_bytes(t), 3 * 16 + 10);
    CHECK(str_is(t, 0, "ab\0cd", 5));
    CHECK(str_is(t, 1, "", 0));
    CHECK(str_is(t, 2, "hello", 5));
    CHECK(!wf_tensor_string(t, 3, NULL));
    CHECK(!wf_tensor_string(t, -1, NULL));
    /* the layout weft.h promises: records {offset, length} from the start of the data, then the bytes */
    uint64_t rec[6];
    memcpy(rec, wf_tensor_data(t), sizeof rec);
    CHECK_INT(rec[0], 48);
    CHECK_INT(rec[1], 5);
    CHECK_INT(rec[3], 0);
    CHECK_INT(rec[4], 53);
    CHECK_INT(rec[5], 5);
    CHECK(!memcmp((char *)wf_tensor_data(t) + rec[4], "hello", 5));
    /* copying `bytes` bytes is a deep copy */
    wf_tensor *c = NULL;
    CHECK_OK(wf__tensor_clone(t, "a test copy", &c));
    wf_tensor_free(t);
    if (c) {
        CHECK(str_is(c, 0, "ab\0cd", 5));
        CHECK(str_is(c, 2, "hello", 5));
    }
    wf_tensor_free(c);

    /* NUL-terminated strings, an empty tensor */
    const char *z[2] = {"x", "yz"};
    int64_t two = 2, zero = 0;
    CHECK_OK(wf_tensor_new_strings(1, &two, z, NULL, &t));
    if (t) CHECK(str_is(t, 1, "yz", 2));
    wf_tensor_free(t);
    CHECK_OK(wf_tensor_new_strings(1, &zero, NULL, NULL, &t));
    if (t) CHECK_INT(wf_tensor_bytes(t), 0);
    wf_tensor_free(t);

    /* what does not know strings says so */
    CHECK_ERR(wf_tensor_new(WF_STRING, 1, &two, NULL, &t), WF_INVALID_ARGUMENT, "wf_tensor_new_strings");
    wf_tensor *f = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, &two, NULL, &f));
    CHECK(!wf_tensor_string(f, 0, NULL));
    wf_tensor_free(f);
    CHECK_ERR(wf_tensor_new_strings(1, &two, NULL, NULL, &t), WF_INVALID_ARGUMENT, "ptrs is NULL");
}

/* ---- strings through graphs and sessions ----------------------------------------------------------- */

typedef struct str_job {
    wf_session *s;
    wf_output ph, id, cst;
    int id_no;
    int bad;
} str_job;

static void *str_worker(void *arg)
{
    str_job *j = arg;
    for (int it = 0; it < 200; it++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "thread %d run %d", j->id_no, it);
        snprintf(b, sizeof b, "%d", it * 7919);
        const char *p[2] = {a, b};
        int64_t two = 2;
        wf_tensor *in = NULL, *out[3] = {NULL, NULL, NULL};
        wf_status *s = wf_tensor_new_strings(1, &two, p, NULL, &in);
        wf_feed fd = {j->ph, in};
        wf_output fetch[3] = {j->id, j->ph, j->cst};
        if (!s) s = wf_session_run(j->s, &fd, 1, fetch, 3, out, NULL);
        if (s || !str_is(out[0], 0, a, strlen(a)) || !str_is(out[0], 1, b, strlen(b)) ||
            !str_is(out[1], 0, a, strlen(a)) || !str_is(out[2], 0, "constant", 8))
            j->bad++;
        wf_status_free(s);
        wf_tensor_free(in);
        for (int k = 0; k < 3; k++) wf_tensor_free(out[k]);
    }
    return NULL;
}

static void test_string_session(void)
{
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_context_new(NULL, &ctx));
    CHECK_OK(wf_graph_new(&g));
    int64_t two = 2;
    wf_output ph, id, cst;
    CHECK_OK(wf_placeholder(g, "names", WF_STRING, 1, &two, &ph));
    CHECK_OK(wf_unary(g, "Identity", "same", ph, &id));
    CHECK_INT(wf_output_dtype(id), WF_STRING);
    wf_tensor *c = str1("constant");
    CHECK_OK(wf_const(g, "c", c, &cst));
    wf_tensor_free(c);
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    if (!s) goto out;
    str_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (str_job){s, ph, id, cst, i, 0};
        pthread_create(&th[i], NULL, str_worker, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(jobs[i].bad, 0);
    }
out:
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

static void test_string_refused(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    wf_output ph, y;
    CHECK_OK(wf_placeholder(g, "s", WF_STRING, 0, NULL, &ph));
    /* one check in graph building for every op that does not declare strings */
    CHECK_ERR(wf_relu(g, "r", ph, &y), WF_INVALID_ARGUMENT, "node 'r' (Relu): input 0 is a string tensor");
    CHECK_ERR(wf_add(g, "a", ph, ph, &y), WF_INVALID_ARGUMENT, "node 'a' (Add)");
    wf_attr to = wf_attr_dtype("to", WF_STRING);
    wf_output x;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 0, NULL, &x));
    CHECK_ERR(wf_op(g, "Cast", "cast", &x, 1, &to, 1, NULL), WF_INVALID_ARGUMENT, "node 'cast' (Cast): output 0 would be a string");
    wf_tensor *v = str1("state");
    CHECK_ERR(wf_variable(g, "var", v, &y), WF_INVALID_ARGUMENT, "node 'var' (Variable)");
    /* a non-string input where a string is expected */
    CHECK_ERR(wf_decode_jpeg(g, "dj", x, 3, &y), WF_INVALID_ARGUMENT, "node 'dj' (DecodeJpeg): input 'contents' f32[]");
    CHECK_ERR(wf_read_file(g, "rf", x, &y), WF_INVALID_ARGUMENT, "node 'rf' (ReadFile)");
    CHECK_ERR(wf_decode_png(g, "dp", ph, 2, &y), WF_INVALID_ARGUMENT, "attribute 'channels' is 2");
    /* the file writers */
    CHECK_ERR(wf_npy_write(path_in("s.npy"), v), WF_INVALID_ARGUMENT, "string");
    const char *names[1] = {"s"};
    CHECK_ERR(wf_safetensors_write(path_in("s.safetensors"), 1, names, &v, NULL), WF_INVALID_ARGUMENT, "string");
    wf_context *ctx = NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_context_new(NULL, &ctx));
    wf_output id;
    CHECK_OK(wf_unary(g, "Identity", "id", ph, &id));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    CHECK_ERR(wf_session_export_onnx(s, &id, NULL, 1, path_in("s.onnx")), WF_UNIMPLEMENTED, "string output");
    wf_session_free(s);
    wf_context_free(ctx);
    wf_tensor_free(v);
    wf_graph_free(g);
}


/* Strings stay in host memory: with every node asked onto another device, placement keeps the string
 * nodes on the CPU (soft) or refuses, naming the node, the device and the dtype (strict). */
static void test_string_placement(void)
{
#ifdef WEFT_TEST_PLUGIN_DIR
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR, 1);
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    CHECK_OK(wf_context_new(NULL, &ctx));
    CHECK_OK(wf_graph_new(&g));
    int has_dev = 0;
    for (int i = 0; ctx && i < wf_context_num_devices(ctx); i++) {
        wf_device_info info;
        if (!wf_context_device(ctx, i, &info) && !strcmp(info.type, "TESTDEV")) has_dev = 1;
    }
    if (!has_dev) {
        CHECK_SKIP("test_string_placement", "the TESTDEV plugin did not load from %s", WEFT_TEST_PLUGIN_DIR);
        wf_graph_free(g);
        wf_context_free(ctx);
        return;
    }
    wf_output ph, id, cst, cid;
    CHECK_OK(wf_placeholder(g, "p", WF_STRING, 0, NULL, &ph));
    CHECK_OK(wf_unary(g, "Identity", "id", ph, &id));
    wf_tensor *c = str1("kept on the host");
    CHECK_OK(wf_const(g, "c", c, &cst));
    CHECK_OK(wf_unary(g, "Identity", "cid", cst, &cid));
    wf_tensor_free(c);
    for (int strict = 0; strict < 2; strict++) {
        wf_session_options o;
        wf_session_options_init(&o);
        o.device = "TESTDEV:0";
        o.strict_placement = strict;
        o.opt_level = 0; /* keep the Identity nodes (the identity pass would fetch their inputs) */
        wf_session *s = NULL;
        CHECK_OK(wf_session_new(ctx, g, &o, &s));
        wf_tensor *in = str1("fed"), *out[2] = {NULL, NULL};
        wf_feed fd = {ph, in};
        wf_output fetch[2] = {id, cid};
        wf_status *st = s ? wf_session_run(s, &fd, 1, fetch, 2, out, NULL) : NULL;
        if (!strict) {
            CHECK_OK(st);
            if (out[0]) CHECK(str_is(out[0], 0, "fed", 3));
            if (out[1]) CHECK(str_is(out[1], 0, "kept on the host", 16));
        } else {
            CHECK(st != NULL);
            CHECK_STR_CONTAINS(wf_status_message(st), "TESTDEV");
            CHECK_STR_CONTAINS(wf_status_message(st), "dtype string");
            wf_status_free(st);
        }
        for (int k = 0; k < 2; k++) wf_tensor_free(out[k]);
        wf_tensor_free(in);
        wf_session_free(s);
    }
    wf_graph_free(g);
    wf_context_free(ctx);
    unsetenv("WEFT_PLUGIN_PATH");
#else
    CHECK_SKIP("test_string_placement", "built without WEFT_TEST_PLUGIN_DIR");
#endif
}

/* ---- ReadFile and decoding ------------------------------------------------------------------------- */

/* A graph: path placeholder -> ReadFile -> DecodeJpeg(channels) and DecodePng(channels), and a
 * contents placeholder for bytes fed directly. */
typedef struct dec_graph {
    wf_context *ctx;
    wf_graph *g;
    wf_session *s;
    wf_output path, file, bytes, jpeg[4], png[5];
} dec_graph;

static void dec_open(dec_graph *d)
{
    memset(d, 0, sizeof *d);
    CHECK_OK(wf_context_new(NULL, &d->ctx));
    CHECK_OK(wf_graph_new(&d->g));
    CHECK_OK(wf_placeholder(d->g, "path", WF_STRING, 0, NULL, &d->path));
    CHECK_OK(wf_placeholder(d->g, "bytes", WF_STRING, 0, NULL, &d->bytes));
    CHECK_OK(wf_read_file(d->g, "read", d->path, &d->file));
    CHECK_INT(wf_output_dtype(d->file), WF_STRING);
    int jc[4] = {0, 1, 3, 0}, pc[5] = {0, 1, 3, 4, 0};
    char name[32];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "jpeg%d", i);
        CHECK_OK(wf_decode_jpeg(d->g, name, i < 3 ? d->file : d->bytes, jc[i], &d->jpeg[i]));
    }
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "png%d", i);
        CHECK_OK(wf_decode_png(d->g, name, i < 4 ? d->file : d->bytes, pc[i], &d->png[i]));
    }
    int64_t dims[WF_MAX_RANK];
    CHECK_INT(wf_output_shape(d->jpeg[2], dims), 3);
    CHECK_INT(dims[0], -1);
    CHECK_INT(dims[2], 3);
    CHECK_OK(wf_session_new(d->ctx, d->g, NULL, &d->s));
}

static void dec_close(dec_graph *d)
{
    wf_session_free(d->s);
    wf_graph_free(d->g);
    wf_context_free(d->ctx);
}

/* Runs fetch with the path (or bytes) fed; the output or NULL, the status in *st (caller frees). */
static wf_tensor *dec_run(dec_graph *d, wf_output fetch, const char *path, wf_status **st)
{
    wf_tensor *p = str1(path), *out = NULL;
    wf_feed fd[2] = {{d->path, p}, {d->bytes, p}};
    *st = wf_session_run(d->s, fd, 2, &fetch, 1, &out, NULL);
    wf_tensor_free(p);
    return out;
}

/* Element-wise comparison with Pillow's reference: returns the largest difference (-1: shapes differ). */
static int compare_ref(const wf_tensor *got, const char *ref_name, int *n_diff)
{
    wf_tensor *ref = NULL;
    char p[300];
    snprintf(p, sizeof p, "%s/%s.npy", g_dir, ref_name);
    CHECK_OK(wf_npy_read(p, &ref));
    *n_diff = 0;
    if (!ref || !got) {
        wf_tensor_free(ref);
        return -1;
    }
    int maxd = -1;
    if (wf_tensor_dtype(got) == WF_U8 && wf_tensor_rank(got) == 3 && wf_tensor_rank(ref) == 3 &&
        !memcmp(wf_tensor_dims(got), wf_tensor_dims(ref), 3 * sizeof(int64_t))) {
        maxd = 0;
        const uint8_t *a = wf_tensor_data(got), *b = wf_tensor_data(ref);
        for (int64_t i = 0; i < wf_tensor_size(got); i++) {
            int d = abs((int)a[i] - (int)b[i]);
            if (d) (*n_diff)++;
            if (d > maxd) maxd = d;
        }
    }
    wf_tensor_free(ref);
    return maxd;
}

static void expect_decode(dec_graph *d, wf_output fetch, const char *file, const char *ref, int tol)
{
    char p[300];
    snprintf(p, sizeof p, "%s/%s", g_dir, file);
    wf_status *st;
    wf_tensor *y = dec_run(d, fetch, p, &st);
    if (st) {
        CHECK_FAIL_("decoding %s for %s: %s", file, ref, wf_status_message(st));
        wf_status_free(st);
        return;
    }
    int n_diff, maxd = compare_ref(y, ref, &n_diff);
    if (maxd < 0 || maxd > tol)
        CHECK_FAIL_("%s vs Pillow's %s: %s, %d elements differ, by at most %d (tolerance %d)", file, ref,
                    maxd < 0 ? "dtype or shape differs" : "values differ", n_diff, maxd, tol);
    else
        printf("  %-12s -> %-14s %d of %lld elements differ from Pillow (max %d)\n", file, ref, n_diff,
               (long long)wf_tensor_size(y), maxd);
    wf_tensor_free(y);
}

static void test_read_file(void)
{
    dec_graph d;
    dec_open(&d);
    if (!d.s) {
        dec_close(&d);
        return;
    }
    static const unsigned char bytes[7] = {'a', 0, 'b', 0xff, '\n', 0, 'z'};
    const char *p = write_file("blob.bin", bytes, sizeof bytes);
    wf_status *st;
    wf_tensor *y = dec_run(&d, d.file, p, &st);
    CHECK_OK(st);
    if (y) {
        CHECK_INT(wf_tensor_rank(y), 0);
        CHECK(str_is(y, 0, bytes, sizeof bytes));
    }
    wf_tensor_free(y);
    y = dec_run(&d, d.file, write_file("empty.bin", "", 0), &st);
    CHECK_OK(st);
    if (y) CHECK(str_is(y, 0, "", 0));
    wf_tensor_free(y);
    /* a missing file, a directory: errors naming the node and the path; the session runs again */
    y = dec_run(&d, d.file, path_in("no/such/file.jpg"), &st);
    CHECK(!y);
    CHECK_INT(wf_status_code(st), WF_NOT_FOUND);
    CHECK_STR_CONTAINS(wf_status_message(st), "node 'read' (ReadFile)");
    CHECK_STR_CONTAINS(wf_status_message(st), "no/such/file.jpg");
    wf_status_free(st);
    y = dec_run(&d, d.file, g_dir, &st);
    CHECK_INT(wf_status_code(st), WF_IO_ERROR);
    CHECK_STR_CONTAINS(wf_status_message(st), "is a directory");
    wf_status_free(st);
    wf_tensor_free(y);
    y = dec_run(&d, d.file, p, &st);
    CHECK_OK(st);
    if (y) CHECK(str_is(y, 0, bytes, sizeof bytes));
    wf_tensor_free(y);
    dec_close(&d);
}

static void test_decode_jpeg(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_decode_jpeg", "no reference images (tests/data/make_images.py needs /usr/bin/python3 with numpy and Pillow)");
        return;
    }
    dec_graph d;
    dec_open(&d);
    if (!d.s) {
        dec_close(&d);
        return;
    }
    /* bit for bit: the same libjpeg-turbo with the same settings (islow IDCT, fancy upsampling) */
    for (int i = 0; i < 2; i++) {
        const char *f = i ? "rgb444.jpg" : "rgb.jpg";
        char r0[32], r1[32], r3[32];
        snprintf(r0, sizeof r0, "%s_c0", i ? "rgb444" : "rgb");
        snprintf(r1, sizeof r1, "%s_c1", i ? "rgb444" : "rgb");
        snprintf(r3, sizeof r3, "%s_c3", i ? "rgb444" : "rgb");
        expect_decode(&d, d.jpeg[0], f, r0, 0);
        expect_decode(&d, d.jpeg[1], f, r1, 0);
        expect_decode(&d, d.jpeg[2], f, r3, 0);
    }
    expect_decode(&d, d.jpeg[0], "progressive.jpg", "progressive_c0", 0);
    expect_decode(&d, d.jpeg[1], "progressive.jpg", "progressive_c1", 0);
    expect_decode(&d, d.jpeg[0], "gray.jpg", "gray_c0", 0);
    expect_decode(&d, d.jpeg[1], "gray.jpg", "gray_c1", 0);
    expect_decode(&d, d.jpeg[2], "gray.jpg", "gray_c3", 0);
    dec_close(&d);
}

static void test_decode_png(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_decode_png", "no reference images (tests/data/make_images.py needs /usr/bin/python3 with numpy and Pillow)");
        return;
    }
    dec_graph d;
    dec_open(&d);
    if (!d.s) {
        dec_close(&d);
        return;
    }
    expect_decode(&d, d.png[0], "gray.png", "gray_png_c0", 0);
    expect_decode(&d, d.png[2], "gray.png", "gray_png_c3", 0);
    expect_decode(&d, d.png[3], "gray.png", "gray_png_c4", 0);
    expect_decode(&d, d.png[0], "rgb.png", "rgb_png_c0", 0);
    expect_decode(&d, d.png[3], "rgb.png", "rgb_png_c4", 0);
    /* RGB to gray: ITU-R 601 luma, rounded as Pillow's convert("L") rounds it */
    expect_decode(&d, d.png[1], "rgb.png", "rgb_png_c1", 0);
    expect_decode(&d, d.png[0], "rgba.png", "rgba_png_c0", 0);
    expect_decode(&d, d.png[2], "rgba.png", "rgba_png_c3", 0);
    expect_decode(&d, d.png[0], "rgb16.png", "rgb16_png_c0", 0);
    expect_decode(&d, d.png[0], "palette.png", "palette_png_c0", 0);
    expect_decode(&d, d.png[2], "palette.png", "palette_png_c3", 0);
    dec_close(&d);
}

/* A failed decode names the node and quotes the library, and the session runs again afterwards. */
static void expect_bad(dec_graph *d, wf_output fetch, const char *file, const char *node, const char *lib)
{
    char p[300];
    snprintf(p, sizeof p, "%s/%s", g_dir, file);
    wf_status *st;
    wf_tensor *y = dec_run(d, fetch, p, &st);
    CHECK(!y);
    wf_tensor_free(y);
    if (!st) {
        CHECK_FAIL_("%s decoded by %s without an error", file, node);
        return;
    }
    CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(st), node);
    CHECK_STR_CONTAINS(wf_status_message(st), lib);
    printf("  %-14s: %s\n", file, wf_status_message(st));
    wf_status_free(st);
}

/* dtype: a float output is the u8 decode scaled by 1/255, exactly as ConvertImageDtype makes it (JPEG,
 * and PNG through its gray conversion); a dtype that is not an image dtype is refused, naming the node. */
static void test_decode_dtype(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_decode_dtype", "no reference images (tests/data/make_images.py needs /usr/bin/python3 with numpy and Pillow)");
        return;
    }
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_context_new(NULL, &ctx));
    CHECK_OK(wf_graph_new(&g));
    wf_output path, bytes;
    CHECK_OK(wf_placeholder(g, "path", WF_STRING, 0, NULL, &path));
    CHECK_OK(wf_read_file(g, "read", path, &bytes));
    const char *ops[2] = {"DecodeJpeg", "DecodePng"};
    const char *files[2] = {"rgb.jpg", "rgb.png"};
    int chans[2] = {3, 1};
    wf_dtype dts[4] = {WF_F32, WF_F64, WF_F16, WF_BF16};
    wf_output u8[2], fl[2][4], conv[2][4];
    for (int o = 0; o < 2; o++) {
        wf_node *n = NULL;
        char nm[64];
        wf_attr a[2] = {wf_attr_int("channels", chans[o]), wf_attr_dtype("dtype", WF_U8)};
        snprintf(nm, sizeof nm, "%s_u8", ops[o]);
        CHECK_OK(wf_op(g, ops[o], nm, &bytes, 1, a, 2, &n));
        u8[o] = (wf_output){n, 0};
        for (int k = 0; k < 4; k++) {
            a[1] = wf_attr_dtype("dtype", dts[k]);
            snprintf(nm, sizeof nm, "%s_%s", ops[o], wf_dtype_name(dts[k]));
            CHECK_OK(wf_op(g, ops[o], nm, &bytes, 1, a, 2, &n));
            fl[o][k] = (wf_output){n, 0};
            CHECK_INT(wf_output_dtype(fl[o][k]), dts[k]);
            snprintf(nm, sizeof nm, "%s_conv_%s", ops[o], wf_dtype_name(dts[k]));
            CHECK_OK(wf_convert_image_dtype(g, nm, u8[o], dts[k], &conv[o][k]));
        }
    }
    wf_attr bad[1] = {wf_attr_dtype("dtype", WF_I32)};
    CHECK_ERR(wf_op(g, "DecodeJpeg", "bad_dtype", &bytes, 1, bad, 1, NULL), WF_INVALID_ARGUMENT, "bad_dtype");
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    for (int o = 0; o < 2 && s; o++) {
        char p[300];
        snprintf(p, sizeof p, "%s/%s", g_dir, files[o]);
        wf_tensor *pt = str1(p);
        wf_feed fd = {path, pt};
        for (int k = 0; k < 4; k++) {
            wf_output f[2] = {fl[o][k], conv[o][k]};
            wf_tensor *out[2] = {0};
            CHECK_OK(wf_session_run(s, &fd, 1, f, 2, out, NULL));
            if (out[0] && out[1]) {
                CHECK_INT(wf_tensor_dtype(out[0]), dts[k]);
                CHECK_INT(wf_tensor_bytes(out[0]), wf_tensor_bytes(out[1]));
                CHECK_INT(wf_tensor_dims(out[0])[2], chans[o]);
                CHECK(wf_tensor_bytes(out[0]) == wf_tensor_bytes(out[1]) &&
                      !memcmp(wf_tensor_data(out[0]), wf_tensor_data(out[1]), wf_tensor_bytes(out[0])));
            }
            wf_tensor_free(out[0]);
            wf_tensor_free(out[1]);
        }
        wf_tensor_free(pt);
    }
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

static void test_decode_errors(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_decode_errors", "no reference images (tests/data/make_images.py needs /usr/bin/python3 with numpy and Pillow)");
        return;
    }
    dec_graph d;
    dec_open(&d);
    if (!d.s) {
        dec_close(&d);
        return;
    }
    expect_bad(&d, d.jpeg[2], "truncated.jpg", "node 'jpeg2' (DecodeJpeg)", "libjpeg: ");
    expect_bad(&d, d.jpeg[0], "random.bin", "node 'jpeg0' (DecodeJpeg)", "libjpeg: ");
    expect_bad(&d, d.png[0], "truncated.png", "node 'png0' (DecodePng)", "libpng: ");
    expect_bad(&d, d.png[3], "random.bin", "node 'png3' (DecodePng)", "libpng: ");
    expect_bad(&d, d.png[0], "rgb.jpg", "node 'png0' (DecodePng)", "libpng: ");
    expect_bad(&d, d.jpeg[0], "rgb.png", "node 'jpeg0' (DecodeJpeg)", "libjpeg: ");
    /* bytes fed directly: an empty string and a lone SOI marker */
    wf_status *st;
    wf_tensor *y = dec_run(&d, d.jpeg[3], "", &st);
    CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(st), "node 'jpeg3' (DecodeJpeg)");
    wf_status_free(st);
    wf_tensor_free(y);
    y = dec_run(&d, d.png[4], "\x89PNG", &st);
    CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(st), "node 'png4' (DecodePng)");
    wf_status_free(st);
    wf_tensor_free(y);
    /* and the same session still decodes */
    expect_decode(&d, d.jpeg[2], "rgb.jpg", "rgb_c3", 0);
    expect_decode(&d, d.png[0], "rgba.png", "rgba_png_c0", 0);
    dec_close(&d);
}

/* A decoded size over the CPU's memory limit fails before anything that size is allocated. */
static void test_decode_memory_limit(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_decode_memory_limit", "no reference images");
        return;
    }
    dec_graph d;
    dec_open(&d);
    if (!d.s) {
        dec_close(&d);
        return;
    }
    CHECK_OK(wf_context_set_memory_limit(d.ctx, "CPU:0", 2000)); /* the RGB image needs 37 * 23 * 3 = 2553 */
    char p[300];
    snprintf(p, sizeof p, "%s/rgb.jpg", g_dir);
    wf_status *st;
    wf_tensor *y = dec_run(&d, d.jpeg[2], p, &st);
    CHECK_INT(wf_status_code(st), WF_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(wf_status_message(st), "node 'jpeg2' (DecodeJpeg)");
    wf_status_free(st);
    wf_tensor_free(y);
    CHECK_OK(wf_context_set_memory_limit(d.ctx, "CPU:0", 0));
    expect_decode(&d, d.jpeg[2], "rgb.jpg", "rgb_c3", 0);
    dec_close(&d);
}

/* Every allocation of a decode run fails once in turn (weft's own: the output, row pointers, RGB rows
 * for gray, the file's bytes; libjpeg's and libpng's go to malloc): each run fails with OUT_OF_MEMORY or
 * gives the reference, the session runs again, and nothing leaks (the ASan build checks). */
static void test_decode_faults(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_decode_faults", "no reference images");
        return;
    }
    dec_graph d;
    dec_open(&d);
    if (!d.s) {
        dec_close(&d);
        return;
    }
    struct { wf_output out; const char *file, *ref; } runs[3] = {
        {d.jpeg[2], "rgb.jpg", "rgb_c3"}, {d.png[1], "rgba.png", NULL}, {d.file, "rgb.png", NULL}};
    for (int r = 0; r < 3; r++) {
        char p[300];
        snprintf(p, sizeof p, "%s/%s", g_dir, runs[r].file);
        wf_status *st;
        wf_tensor *y = dec_run(&d, runs[r].out, p, &st); /* plans once before faults are injected */
        CHECK_OK(st);
        wf_tensor_free(y);
        int failed = 0, bad = 0;
        bool end = false;
        for (long k = 1; k < 500 && !end; k++) {
            long fired0 = wf__faults_fired();
            wf__fault_inject(k);
            y = dec_run(&d, runs[r].out, p, &st);
            end = wf__faults_fired() == fired0;
            wf__fault_inject(0);
            if (st) {
                failed++;
                if (wf_status_code(st) != WF_OUT_OF_MEMORY && bad++ < 3)
                    fprintf(stderr, "  fault %ld: %s\n", k, wf_status_message(st));
                wf_status_free(st);
            } else if (runs[r].ref) {
                int n_diff;
                CHECK_INT(compare_ref(y, runs[r].ref, &n_diff), 0);
            }
            wf_tensor_free(y);
        }
        CHECK(end);
        CHECK(failed > 0);
        CHECK_INT(bad, 0);
        printf("  %s: %d injected allocation failures, each OUT_OF_MEMORY\n", runs[r].file, failed);
    }
    expect_decode(&d, d.jpeg[2], "rgb.jpg", "rgb_c3", 0);
    dec_close(&d);
}

/* The map function: path -> ReadFile -> DecodeJpeg -> ConvertImageDtype f32 -> flip -> brightness
 * (max_delta 0: the values are Pillow's / 255 whatever the draw, flipped or not). */
static void test_pipeline(void)
{
    if (!g_have_ref) {
        CHECK_SKIP("test_pipeline", "no reference images");
        return;
    }
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_context_new(NULL, &ctx));
    CHECK_OK(wf_graph_new(&g));
    wf_output path, seed, f, img, x, fl, y;
    int64_t two = 2;
    CHECK_OK(wf_placeholder(g, "path", WF_STRING, 0, NULL, &path));
    CHECK_OK(wf_placeholder(g, "seed", WF_I64, 1, &two, &seed));
    CHECK_OK(wf_read_file(g, NULL, path, &f));
    CHECK_OK(wf_decode_jpeg(g, NULL, f, 3, &img));
    CHECK_OK(wf_convert_image_dtype(g, NULL, img, WF_F32, &x));
    CHECK_OK(wf_random_flip_left_right(g, NULL, x, seed, &fl));
    CHECK_OK(wf_random_brightness(g, "bright", fl, seed, 0.0, &y));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *ref = NULL;
    char p[300];
    snprintf(p, sizeof p, "%s/rgb_c3.npy", g_dir);
    CHECK_OK(wf_npy_read(p, &ref));
    snprintf(p, sizeof p, "%s/rgb.jpg", g_dir);
    int flips = 0;
    for (int64_t c = 0; s && ref && c < 16; c++) {
        wf_tensor *pt = str1(p), *sd = NULL, *out = NULL;
        int64_t sv[2] = {99, c};
        CHECK_OK(wf_tensor_new(WF_I64, 1, &two, sv, &sd));
        wf_feed fd[2] = {{path, pt}, {seed, sd}};
        CHECK_OK(wf_session_run(s, fd, 2, &y, 1, &out, NULL));
        if (out) {
            const float *v = wf_tensor_data(out);
            const uint8_t *r = wf_tensor_data(ref);
            bool same = true, mirrored = true;
            for (int64_t h = 0; h < 23; h++)
                for (int64_t w = 0; w < 37; w++)
                    for (int64_t k = 0; k < 3; k++) {
                        float got = v[(h * 37 + w) * 3 + k];
                        same &= got == (float)r[(h * 37 + w) * 3 + k] * (float)(1.0 / 255.0);
                        mirrored &= got == (float)r[(h * 37 + 36 - w) * 3 + k] * (float)(1.0 / 255.0);
                    }
            CHECK(same || mirrored);
            flips += mirrored && !same;
        }
        wf_tensor_free(pt);
        wf_tensor_free(sd);
        wf_tensor_free(out);
    }
    CHECK(flips > 0 && flips < 16); /* 16 counters: both outcomes (a 2^-15 chance of failing by luck) */
    wf_tensor_free(ref);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/weft_test_image_%d", (int)getpid());
    if (mkdir(g_dir, 0700) != 0) {
        perror(g_dir);
        return 1;
    }
    snprintf(g_root, sizeof g_root, "%s", __FILE__);
    char *cut = strstr(g_root, "/tests/test_image.c");
    if (cut) *cut = 0;
    else snprintf(g_root, sizeof g_root, ".");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/data/make_images.py %s >/dev/null", g_root, g_dir);
    g_have_ref = access("/usr/bin/python3", X_OK) == 0 && sh(cmd) == 0;

    RUN_TEST(test_string_tensors);
    RUN_TEST(test_string_session);
    RUN_TEST(test_string_refused);
    RUN_TEST(test_string_placement);
    RUN_TEST(test_read_file);
    RUN_TEST(test_decode_jpeg);
    RUN_TEST(test_decode_png);
    RUN_TEST(test_decode_dtype);
    RUN_TEST(test_decode_errors);
    RUN_TEST(test_decode_memory_limit);
    RUN_TEST(test_decode_faults);
    RUN_TEST(test_pipeline);

    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    sh(cmd);
    return check_summary();
}
