/*
 * ONNX importer on bad input: every malformed or unsupported model gives a status naming the file and
 * the problem, leaves the caller's graph as it was, leaks nothing, and a good model loads afterwards.
 * Self-contained: the models are written byte by byte here, so no Python or data folder is needed.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"

/* ---- a minimal protobuf writer ---------------------------------------------------------------------
 * The generated protobuf-c structs are not on the tests' include path, and writing the wire format by
 * hand lets a test produce exactly the malformed bytes it wants (fields protobuf-c would refuse to
 * pack, lengths that lie). Field numbers are those of onnx.proto. */

typedef struct pb {
    uint8_t *p;
    size_t n, cap;
} pb;

static void put(pb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_varint(pb *b, uint64_t v)
{
    uint8_t c[10];
    int n = 0;
    do {
        c[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, c, (size_t)n);
}

static void f_int(pb *b, int field, int64_t v)
{
    put_varint(b, (uint64_t)field << 3);
    put_varint(b, (uint64_t)v);
}

static void f_bytes(pb *b, int field, const void *d, size_t n)
{
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, n);
    put(b, d, n);
}

static void f_str(pb *b, int field, const char *s) { f_bytes(b, field, s, strlen(s)); }

static void f_float(pb *b, int field, float v)
{
    put_varint(b, (uint64_t)field << 3 | 5);
    put(b, &v, 4); /* little-endian hosts only, like the rest of weft */
}

/* Embeds sub as a length-delimited field and frees it. */
static void f_msg(pb *b, int field, pb sub)
{
    f_bytes(b, field, sub.p, sub.n);
    free(sub.p);
}

/* ---- ONNX messages ---------------------------------------------------------------------------------- */

enum { T_FLOAT = 1, T_INT32 = 6, T_INT64 = 7, T_STRING = 8 };                       /* TensorProto.DataType */
enum { A_FLOAT = 1, A_INT = 2, A_STRING = 3, A_INTS = 7 };                          /* AttributeProto.type */
enum { M_IR = 1, M_GRAPH = 7, M_OPSET = 8 };                                        /* ModelProto */
enum { G_NODE = 1, G_NAME = 2, G_INIT = 5, G_INPUT = 11, G_OUTPUT = 12 };           /* GraphProto */
enum { N_INPUT = 1, N_OUTPUT = 2, N_NAME = 3, N_OP = 4, N_ATTR = 5, N_DOMAIN = 7 }; /* NodeProto */

static pb tensor_head(const char *name, int dtype, int rank, const int64_t *dims)
{
    pb t = {0};
    for (int i = 0; i < rank; i++) f_int(&t, 1, dims[i]);
    f_int(&t, 2, dtype);
    if (name) f_str(&t, 8, name);
    return t;
}

static pb tensor_raw(const char *name, int dtype, int rank, const int64_t *dims, const void *raw, size_t n)
{
    pb t = tensor_head(name, dtype, rank, dims);
    f_bytes(&t, 9, raw, n);
    return t;
}

static pb tensor_floats(const char *name, int rank, const int64_t *dims, const float *v, int n)
{
    pb t = tensor_head(name, T_FLOAT, rank, dims);
    f_bytes(&t, 4, v, (size_t)n * sizeof *v); /* packed float_data */
    return t;
}

static pb string_entry(const char *k, const char *v)
{
    pb e = {0};
    f_str(&e, 1, k);
    f_str(&e, 2, v);
    return e;
}

/* A float tensor whose data lives in `location` (NULL: no location entry) at offset 0. */
static pb tensor_external(const char *name, int rank, const int64_t *dims, const char *location)
{
    pb t = tensor_head(name, T_FLOAT, rank, dims);
    if (location) f_msg(&t, 13, string_entry("location", location));
    f_msg(&t, 13, string_entry("offset", "0"));
    f_int(&t, 14, 1); /* data_location = EXTERNAL */
    return t;
}

/* ValueInfoProto of a tensor; rank < 0: no shape. */
static pb value_info(const char *name, int elem, int rank, const int64_t *dims)
{
    pb shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (int i = 0; i < rank; i++) {
        pb dim = {0};
        f_int(&dim, 1, dims[i]);
        f_msg(&shape, 1, dim);
    }
    f_int(&tt, 1, elem);
    if (rank >= 0) f_msg(&tt, 2, shape);
    else free(shape.p);
    f_msg(&type, 1, tt);
    f_str(&vi, 1, name);
    f_msg(&vi, 2, type);
    return vi;
}

/* Repeated string field from a comma-separated list; empty items ("x,,y") are written as "". */
static void f_list(pb *b, int field, const char *list)
{
    if (!list) return;
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        f_bytes(b, field, p, n);
        if (!e) break;
        p = e + 1;
    }
}

static pb node(const char *name, const char *op, const char *ins, const char *outs)
{
    pb n = {0};
    f_list(&n, N_INPUT, ins);
    f_list(&n, N_OUTPUT, outs);
    if (name) f_str(&n, N_NAME, name);
    if (op) f_str(&n, N_OP, op);
    return n;
}

static pb attr_int(const char *name, int64_t v)
{
    pb a = {0};
    if (name) f_str(&a, 1, name);
    f_int(&a, 20, A_INT);
    f_int(&a, 3, v);
    return a;
}

static pb attr_ints(const char *name, int n, const int64_t *v)
{
    pb a = {0};
    f_str(&a, 1, name);
    f_int(&a, 20, A_INTS);
    for (int i = 0; i < n; i++) f_int(&a, 8, v[i]);
    return a;
}

static pb attr_float(const char *name, float v)
{
    pb a = {0};
    f_str(&a, 1, name);
    f_int(&a, 20, A_FLOAT);
    f_float(&a, 2, v);
    return a;
}

static pb attr_string(const char *name, const char *v)
{
    pb a = {0};
    f_str(&a, 1, name);
    f_int(&a, 20, A_STRING);
    f_bytes(&a, 4, v, strlen(v));
    return a;
}

/* ir < 0 / opset < 0: leave the field out. */
static pb model(int64_t ir, int64_t opset, pb graph)
{
    pb m = {0};
    if (ir >= 0) f_int(&m, M_IR, ir);
    if (opset >= 0) {
        pb o = {0};
        f_str(&o, 1, "");
        f_int(&o, 2, opset);
        f_msg(&m, M_OPSET, o);
    }
    f_str(&m, 2, "weft-test");
    f_msg(&m, M_GRAPH, graph);
    return m;
}

/* ---- files ------------------------------------------------------------------------------------------ */

static char g_dir[256];

/* g_dir/name in one of a few rotating buffers: valid until eight more calls. */
static const char *path_of(const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static void write_file(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(d, 1, n, f) != n)) {
        perror(path);
        abort();
    }
    fclose(f);
}

/* Writes the model to g_dir/name, frees it and returns the path. */
static const char *save(const char *name, pb m)
{
    const char *p = path_of(name);
    write_file(p, m.p, m.n);
    free(m.p);
    return p;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* ---- the reference model ------------------------------------------------------------------------------
 * y = Relu(x + w) with x: f32[2,3] a graph input, w: f32[2,3] a raw-data initializer, and b: f32[3] an
 * initializer that is also an input (so it has a default), added as z = y + b. */

static const float W_VALS[6] = {0.5f, -1.0f, 2.0f, -0.25f, 3.0f, -4.0f};
static const float B_VALS[3] = {1.0f, 2.0f, 3.0f};
static const int64_t D23[2] = {2, 3}, D3[1] = {3};

static pb good_graph(void)
{
    pb g = {0};
    f_msg(&g, G_NODE, node("add", "Add", "x,w", "s"));
    f_msg(&g, G_NODE, node("relu", "Relu", "s", "y"));
    f_msg(&g, G_NODE, node("bias", "Add", "y,b", "z"));
    f_str(&g, G_NAME, "good");
    f_msg(&g, G_INIT, tensor_raw("w", T_FLOAT, 2, D23, W_VALS, sizeof W_VALS));
    f_msg(&g, G_INIT, tensor_floats("b", 1, D3, B_VALS, 3));
    f_msg(&g, G_INPUT, value_info("x", T_FLOAT, 2, D23));
    f_msg(&g, G_INPUT, value_info("b", T_FLOAT, 1, D3));
    f_msg(&g, G_OUTPUT, value_info("z", T_FLOAT, 2, D23));
    return g;
}

static char g_good[512]; /* path of the reference model */

/* Feeds x into the imported model and checks z = relu(x + w) + b. */
static void check_runs(wf_graph *g, const wf_onnx_model *m)
{
    CHECK_INT(wf_onnx_num_inputs(m), 2);
    CHECK_INT(wf_onnx_num_outputs(m), 1);
    if (wf_onnx_num_inputs(m) != 2 || wf_onnx_num_outputs(m) != 1) return;
    const wf_onnx_value *x = wf_onnx_input(m, 0), *b = wf_onnx_input(m, 1), *z = wf_onnx_output(m, 0);
    CHECK(!strcmp(x->name, "x") && !strcmp(b->name, "b") && !strcmp(z->name, "z"));
    CHECK(x->dtype == WF_F32 && x->rank == 2 && x->dims[0] == 2 && x->dims[1] == 3 && !x->has_default);
    CHECK(b->has_default && b->rank == 1 && b->dims[0] == 3);
    CHECK(z->dtype == WF_F32 && z->rank == 2);
    float xv[6] = {-1, 2, -3, 4, -5, 6};
    wf_tensor *xt = NULL, *out = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, D23, xv, &xt));
    wf_context *ctx = NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_context_new(NULL, &ctx));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_feed feed = {x->output, xt};
    CHECK_OK(wf_session_run(s, &feed, 1, &z->output, 1, &out, NULL));
    if (out) {
        const float *o = wf_tensor_data(out);
        for (int i = 0; i < 6; i++) {
            float r = xv[i] + W_VALS[i];
            CHECK_NEAR(o[i], (r > 0 ? r : 0) + B_VALS[i % 3], 1e-6);
        }
    }
    wf_tensor_free(out);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_context_free(ctx);
}

static void test_good_model_loads_and_runs(void)
{
    wf_graph *g;
    wf_onnx_model *m = NULL, *m2 = NULL;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_onnx_load(g_good, g, &m));
    if (m) check_runs(g, m);
    /* a second import into the same graph gets fresh node names and leaves the first intact */
    int n = wf_graph_num_nodes(g);
    CHECK_OK(wf_onnx_load(g_good, g, &m2));
    CHECK_INT(wf_graph_num_nodes(g), 2 * n);
    if (m2) check_runs(g, m2);
    wf_onnx_model_free(m2);
    wf_onnx_model_free(m);
    wf_graph_free(g);
    char *text = NULL;
    CHECK_OK(wf_onnx_inspect(g_good, &text));
    CHECK_STR_CONTAINS(text, "IR version: 7");
    CHECK_STR_CONTAINS(text, "unsupported ops: none");
    wf_free(text);
}

/* Loads `path` into a graph that already holds a node, expects `code` and a message naming the file
 * and containing `text` (and `text2` if given), then checks the graph is unchanged and that the
 * reference model still loads into it and runs. Also runs inspect on the file, which may succeed or
 * fail but must not crash or leak. */
static void expect_fail(const char *path, wf_code code, const char *text, const char *text2)
{
    int before = check_failures_;
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t d = 3;
    wf_output keep;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, &d, &keep));
    wf_onnx_model *m = NULL;
    wf_status *s = wf_onnx_load(path, g, &m);
    CHECK(s != NULL);
    if (s) {
        const char *msg = wf_status_message(s);
        if (wf_status_code(s) != code)
            CHECK_FAIL_("code %s, expected %s (%s)", wf_code_name(wf_status_code(s)), wf_code_name(code), msg);
        CHECK_STR_CONTAINS(msg, path);
        CHECK_STR_CONTAINS(msg, text);
        if (text2) CHECK_STR_CONTAINS(msg, text2);
        CHECK(!strchr(msg, '\n'));
        CHECK(!strstr(msg, "(null)"));
        wf_status_free(s);
    } else {
        wf_onnx_model_free(m);
    }
    CHECK_INT(wf_graph_num_nodes(g), 1);
    wf_node *x = NULL;
    CHECK_OK(wf_graph_find(g, "x", &x));
    CHECK(x == keep.node);
    /* the graph is still usable: the good model loads beside the placeholder and runs */
    m = NULL;
    CHECK_OK(wf_onnx_load(g_good, g, &m));
    if (m) check_runs(g, m);
    wf_onnx_model_free(m);
    wf_graph_free(g);
    char *text_out = NULL;
    s = wf_onnx_inspect(path, &text_out);
    if (s) CHECK_STR_CONTAINS(wf_status_message(s), path);
    wf_status_free(s);
    wf_free(text_out);
    if (check_failures_ != before) fprintf(stderr, "  (the model above: %s)\n", path);
}

/* ---- files that are not models ------------------------------------------------------------------------ */

static void test_missing_file(void)
{
    expect_fail(path_of("no-such-model.onnx"), WF_NOT_FOUND, "No such file", NULL);
    char *text = NULL;
    CHECK_ERR(wf_onnx_inspect(path_of("no-such-model.onnx"), &text), WF_NOT_FOUND, "no-such-model.onnx");
    wf_tensor *t = NULL;
    CHECK_ERR(wf_onnx_read_tensor(path_of("no-such.pb"), &t), WF_NOT_FOUND, "no-such.pb");
    /* a folder is not a model */
    expect_fail(g_dir, WF_IO_ERROR, "not a regular file", NULL);
}

static void test_empty_file(void)
{
    const char *p = path_of("empty.onnx");
    write_file(p, "", 0);
    expect_fail(p, WF_INVALID_ARGUMENT, "empty file", NULL);
}

/* Every prefix of a good model fails cleanly (or, cut at a field boundary, loads what it has); the
 * first half in particular is a corrupt protobuf. */
static void test_truncated_model(void)
{
    pb m = model(7, 13, good_graph());
    const char *p = path_of("truncated.onnx");
    write_file(p, m.p, m.n / 2);
    expect_fail(p, WF_INVALID_ARGUMENT, "truncated or corrupt", NULL);
    for (size_t n = 1; n < m.n; n++) {
        write_file(p, m.p, n);
        wf_graph *g;
        CHECK_OK(wf_graph_new(&g));
        wf_onnx_model *om = NULL;
        wf_status *s = wf_onnx_load(p, g, &om);
        if (s) {
            CHECK_STR_CONTAINS(wf_status_message(s), p);
            CHECK_INT(wf_graph_num_nodes(g), 0);
        }
        wf_status_free(s);
        wf_onnx_model_free(om);
        wf_graph_free(g);
        char *text = NULL;
        wf_status_free(wf_onnx_inspect(p, &text));
        wf_free(text);
    }
    free(m.p);
}

static void test_random_bytes(void)
{
    const char *p = path_of("random.onnx");
    uint64_t st = 12345;
    for (int round = 0; round < 64; round++) {
        uint8_t buf[512];
        size_t n = 1 + (size_t)round * 8;
        for (size_t i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (uint8_t)(st >> 56);
        }
        write_file(p, buf, n);
        wf_graph *g;
        CHECK_OK(wf_graph_new(&g));
        wf_onnx_model *om = NULL;
        wf_status *s = wf_onnx_load(p, g, &om);
        CHECK(s != NULL); /* none of these seeds makes a model with a graph */
        if (s) CHECK_STR_CONTAINS(wf_status_message(s), p);
        CHECK_INT(wf_graph_num_nodes(g), 0);
        wf_status_free(s);
        wf_onnx_model_free(om);
        wf_graph_free(g);
        char *text = NULL;
        wf_status_free(wf_onnx_inspect(p, &text));
        wf_free(text);
        wf_tensor *t = NULL;
        wf_status_free(wf_onnx_read_tensor(p, &t));
        wf_tensor_free(t);
    }
}

/* ---- model-level problems ----------------------------------------------------------------------------- */

static void test_versions(void)
{
    expect_fail(save("ir2.onnx", model(2, 13, good_graph())), WF_UNIMPLEMENTED, "IR version 2 is not supported",
                NULL);
    expect_fail(save("no-ir.onnx", model(-1, 13, good_graph())), WF_UNIMPLEMENTED, "IR version 0", NULL);
    expect_fail(save("opset6.onnx", model(7, 6, good_graph())), WF_UNIMPLEMENTED, "opset 6 is not supported", NULL);
    /* no default-domain opset_import at all counts as opset 1 */
    expect_fail(save("no-opset.onnx", model(7, -1, good_graph())), WF_UNIMPLEMENTED, "opset 1 is not supported",
                NULL);
    pb no_graph = {0};
    f_int(&no_graph, M_IR, 7);
    expect_fail(save("no-graph.onnx", no_graph), WF_INVALID_ARGUMENT, "has no graph", NULL);
}

static void test_unsupported_ops(void)
{
    pb g = good_graph();
    f_msg(&g, G_NODE, node("first_bad", "NoSuchOpA", "z", "u1"));
    pb custom = node("custom", "Custom", "u1", "u2");
    f_str(&custom, N_DOMAIN, "com.example");
    f_msg(&g, G_NODE, custom);
    f_msg(&g, G_NODE, node("again", "NoSuchOpA", "u2", "u3")); /* listed once */
    const char *p = save("unsupported.onnx", model(7, 13, g));
    expect_fail(p, WF_UNIMPLEMENTED, "node 'first_bad' uses op NoSuchOpA",
                "unsupported ops in this model: NoSuchOpA, com.example.Custom");
    char *text = NULL;
    CHECK_OK(wf_onnx_inspect(p, &text));
    CHECK_STR_CONTAINS(text, "NoSuchOpA");
    CHECK_STR_CONTAINS(text, "com.example.Custom");
    wf_free(text);
    /* weft-internal op names are not ONNX ops */
    g = good_graph();
    f_msg(&g, G_NODE, node("c", "Conv2D", "z,z", "u"));
    expect_fail(save("weft-only-op.onnx", model(7, 13, g)), WF_UNIMPLEMENTED, "uses op Conv2D", NULL);
    /* ops of another domain, several times and one named like an ONNX op, under com.example opset 3:
     * the error quotes that opset (not ai.onnx's 13), inspect lists each op once with it; "ai.onnx"
     * written out is the default domain, so its NoSuchOpB is the same op as the unqualified one */
    g = good_graph();
    const char *ops[][4] = {{"c1", "Custom", "z", "v1"}, {"c2", "Custom", "v1", "v2"}, {"c3", "Relu", "v2", "v3"},
                            {"c4", "Custom", "v3", "v4"}, {"b1", "NoSuchOpB", "v4", "v5"}, {"b2", "NoSuchOpB", "v5", "v6"}};
    for (int i = 0; i < 6; i++) {
        pb n = node(ops[i][0], ops[i][1], ops[i][2], ops[i][3]);
        if (i < 4) f_str(&n, N_DOMAIN, "com.example");
        if (i == 5) f_str(&n, N_DOMAIN, "ai.onnx");
        f_msg(&g, G_NODE, n);
    }
    pb m = model(7, 13, g), imp = {0};
    f_str(&imp, 1, "com.example");
    f_int(&imp, 2, 3);
    f_msg(&m, M_OPSET, imp);
    p = save("custom-domain.onnx", m);
    expect_fail(p, WF_UNIMPLEMENTED, "node 'c1' uses op com.example.Custom (domain 'com.example', opset 3)",
                "unsupported ops in this model: com.example.Custom, com.example.Relu, NoSuchOpB");
    text = NULL;
    CHECK_OK(wf_onnx_inspect(p, &text));
    CHECK_STR_CONTAINS(text, "unsupported ops: com.example.Custom (domain com.example, opset 3), NoSuchOpB, "
                             "com.example.Relu (domain com.example, opset 3)\n");
    CHECK_STR_CONTAINS(text, "  com.example.Relu             1\n");
    wf_free(text);
}

static void test_dangling_value(void)
{
    pb g = good_graph();
    f_msg(&g, G_NODE, node("late", "Relu", "nobody_makes_this", "u"));
    expect_fail(save("dangling.onnx", model(7, 13, g)), WF_INVALID_ARGUMENT,
                "node 'late' (Relu): input 'nobody_makes_this' is not produced", NULL);
    /* a value used before the node that makes it (not topologically sorted) */
    g = good_graph();
    f_msg(&g, G_NODE, node("early", "Relu", "later_value", "u"));
    f_msg(&g, G_NODE, node("maker", "Relu", "z", "later_value"));
    expect_fail(save("unsorted.onnx", model(7, 13, g)), WF_INVALID_ARGUMENT, "input 'later_value'", NULL);
    /* a graph output nothing produces */
    g = good_graph();
    f_msg(&g, G_OUTPUT, value_info("ghost", T_FLOAT, -1, NULL));
    expect_fail(save("ghost-output.onnx", model(7, 13, g)), WF_INVALID_ARGUMENT,
                "graph output 'ghost' is not produced", NULL);
}

static void test_bad_graph_values(void)
{
    /* an initializer without a name */
    pb g = good_graph();
    float one = 1;
    int64_t d1 = 1;
    f_msg(&g, G_INIT, tensor_raw(NULL, T_FLOAT, 1, &d1, &one, 4));
    expect_fail(save("init-noname.onnx", model(7, 13, g)), WF_INVALID_ARGUMENT, "has no name", NULL);
    /* a graph input of an element type weft lacks */
    g = good_graph();
    f_msg(&g, G_INPUT, value_info("text", T_STRING, 1, D3));
    expect_fail(save("string-input.onnx", model(7, 13, g)), WF_UNIMPLEMENTED,
                "graph input 'text' has element type STRING", NULL);
    /* a graph input that is not a tensor (no tensor_type) */
    g = good_graph();
    pb vi = {0};
    f_str(&vi, 1, "seq");
    f_msg(&g, G_INPUT, vi);
    expect_fail(save("no-type-input.onnx", model(7, 13, g)), WF_UNIMPLEMENTED, "graph input 'seq' is not a tensor",
                NULL);
}

/* ---- initializer data ---------------------------------------------------------------------------------- */

static pb graph_with_init(pb init)
{
    pb g = good_graph();
    f_msg(&g, G_INIT, init);
    return g;
}

static void test_raw_data_size(void)
{
    float v[7] = {0};
    expect_fail(save("raw-short.onnx", model(7, 13, graph_with_init(tensor_raw("r", T_FLOAT, 2, D23, v, 20)))),
                WF_INVALID_ARGUMENT, "initializer 'r' declares shape [2,3] of f32 (24 bytes)",
                "raw_data holds 20 bytes");
    expect_fail(save("raw-long.onnx", model(7, 13, graph_with_init(tensor_raw("r", T_FLOAT, 2, D23, v, 28)))),
                WF_INVALID_ARGUMENT, "initializer 'r'", "raw_data holds 28 bytes");
    expect_fail(save("float-data-short.onnx", model(7, 13, graph_with_init(tensor_floats("r", 2, D23, v, 5)))),
                WF_INVALID_ARGUMENT, "initializer 'r' declares 6 elements", "float_data holds 5");
    /* no data at all: 0 typed elements */
    expect_fail(save("no-data.onnx", model(7, 13, graph_with_init(tensor_head("r", T_INT64, 2, D23)))),
                WF_INVALID_ARGUMENT, "declares 6 elements", "int64_data holds 0");
    int64_t neg[2] = {2, -3}, big[2] = {INT64_C(1) << 40, INT64_C(1) << 20}, r9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    expect_fail(save("neg-dim.onnx", model(7, 13, graph_with_init(tensor_raw("r", T_FLOAT, 2, neg, v, 24)))),
                WF_INVALID_ARGUMENT, "initializer 'r' has a negative dim -3", NULL);
    expect_fail(save("huge-dims.onnx", model(7, 13, graph_with_init(tensor_raw("r", T_FLOAT, 2, big, v, 4)))),
                WF_INVALID_ARGUMENT, "initializer 'r'", "too large");
    expect_fail(save("rank9.onnx", model(7, 13, graph_with_init(tensor_raw("r", T_FLOAT, 9, r9, v, 4)))),
                WF_INVALID_ARGUMENT, "initializer 'r' has 9 dims", NULL);
    expect_fail(save("string-init.onnx", model(7, 13, graph_with_init(tensor_head("r", T_STRING, 1, D3)))),
                WF_UNIMPLEMENTED, "initializer 'r' has data type STRING", NULL);
    expect_fail(save("dtype-99.onnx", model(7, 13, graph_with_init(tensor_raw("r", 99, 1, D3, v, 12)))),
                WF_UNIMPLEMENTED, "initializer 'r' has data type unknown", NULL);
}

static void test_external_data(void)
{
    /* the model sits in sub/, a file one level up must stay out of reach */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/sub", g_dir);
    mkdir(sub, 0700);
    float secret[6] = {1, 2, 3, 4, 5, 6};
    write_file(path_of("secret.bin"), secret, sizeof secret);
    write_file(path_of("sub/w.bin"), secret, sizeof secret);
    write_file(path_of("sub/short.bin"), secret, 8);
    char link[600];
    snprintf(link, sizeof link, "%s/sub/link.bin", g_dir);
    CHECK(symlink("../secret.bin", link) == 0);

    const char *p = save("sub/ext-up.onnx", model(7, 13, graph_with_init(tensor_external("e", 2, D23, "../secret.bin"))));
    expect_fail(p, WF_INVALID_ARGUMENT, "initializer 'e': external data path '../secret.bin' leaves the model's folder",
                "refused");
    p = save("sub/ext-abs.onnx", model(7, 13, graph_with_init(tensor_external("e", 2, D23, path_of("secret.bin")))));
    expect_fail(p, WF_INVALID_ARGUMENT, "leaves the model's folder", "refused");
    p = save("sub/ext-abs2.onnx", model(7, 13, graph_with_init(tensor_external("e", 2, D23, "/etc/passwd"))));
    expect_fail(p, WF_INVALID_ARGUMENT, "external data path '/etc/passwd' leaves the model's folder", NULL);
    p = save("sub/ext-link.onnx", model(7, 13, graph_with_init(tensor_external("e", 2, D23, "link.bin"))));
    expect_fail(p, WF_INVALID_ARGUMENT, "resolves outside the model's folder", "refused");
    p = save("sub/ext-missing.onnx", model(7, 13, graph_with_init(tensor_external("e", 2, D23, "missing.bin"))));
    expect_fail(p, WF_NOT_FOUND, "initializer 'e': external data file", "missing.bin");
    p = save("sub/ext-noloc.onnx", model(7, 13, graph_with_init(tensor_external("e", 2, D23, NULL))));
    expect_fail(p, WF_INVALID_ARGUMENT, "initializer 'e' has external data without a location", NULL);
    p = save("sub/ext-short.onnx", model(7, 13, graph_with_init(tensor_external("e", 2, D23, "short.bin"))));
    expect_fail(p, WF_INVALID_ARGUMENT, "external data file 'short.bin' holds 8 bytes, fewer than 0 + 24", NULL);

    /* the good case reads the bytes beside the model: w comes from w.bin instead of raw_data */
    pb g = {0};
    f_msg(&g, G_NODE, node("add", "Add", "x,w", "y"));
    f_msg(&g, G_INIT, tensor_external("w", 2, D23, "w.bin"));
    f_msg(&g, G_INPUT, value_info("x", T_FLOAT, 2, D23));
    f_msg(&g, G_OUTPUT, value_info("y", T_FLOAT, 2, D23));
    p = save("sub/ext-good.onnx", model(7, 13, g));
    wf_graph *gr;
    wf_onnx_model *m = NULL;
    CHECK_OK(wf_graph_new(&gr));
    CHECK_OK(wf_onnx_load(p, gr, &m));
    if (m) {
        wf_context *ctx = NULL;
        wf_session *s = NULL;
        wf_tensor *xt = NULL, *out = NULL;
        float xv[6] = {10, 20, 30, 40, 50, 60};
        CHECK_OK(wf_tensor_new(WF_F32, 2, D23, xv, &xt));
        CHECK_OK(wf_context_new(NULL, &ctx));
        CHECK_OK(wf_session_new(ctx, gr, NULL, &s));
        wf_feed feed = {wf_onnx_input(m, 0)->output, xt};
        CHECK_OK(wf_session_run(s, &feed, 1, &wf_onnx_output(m, 0)->output, 1, &out, NULL));
        for (int i = 0; out && i < 6; i++) CHECK_NEAR(((float *)wf_tensor_data(out))[i], xv[i] + secret[i], 0);
        wf_tensor_free(out);
        wf_tensor_free(xt);
        wf_session_free(s);
        wf_context_free(ctx);
    }
    wf_onnx_model_free(m);
    wf_graph_free(gr);
}

/* ---- nodes and attributes ----------------------------------------------------------------------------- */

static void test_bad_attributes(void)
{
    pb g = good_graph();
    pb n = node("r", "Relu", "z", "u");
    f_msg(&n, N_ATTR, attr_int("bogus", 1));
    f_msg(&g, G_NODE, n);
    expect_fail(save("attr-unknown.onnx", model(7, 13, g)), WF_UNIMPLEMENTED,
                "node 'r' (Relu): attribute 'bogus' is not supported", NULL);
    /* an attribute of the wrong ONNX type: Concat's axis as a string */
    g = good_graph();
    n = node("cat", "Concat", "z,z", "u");
    f_msg(&n, N_ATTR, attr_string("axis", "zero"));
    f_msg(&g, G_NODE, n);
    expect_fail(save("attr-type.onnx", model(7, 13, g)), WF_INVALID_ARGUMENT, "node 'cat' (Concat): attribute 'axis'",
                NULL);
    /* shape inference rejects what the weft op cannot do: Concat along an axis z does not have */
    g = good_graph();
    n = node("cat", "Concat", "z,z", "u");
    f_msg(&n, N_ATTR, attr_int("axis", 5));
    f_msg(&g, G_NODE, n);
    expect_fail(save("concat-axis.onnx", model(7, 13, g)), WF_INVALID_ARGUMENT, "cat", NULL);
    /* a Constant with no value */
    g = good_graph();
    f_msg(&g, G_NODE, node("k", "Constant", NULL, "u"));
    expect_fail(save("constant-empty.onnx", model(7, 13, g)), WF_UNIMPLEMENTED, "node 'k' (Constant)", NULL);
    /* wrong input count for Relu */
    g = good_graph();
    f_msg(&g, G_NODE, node("r2", "Relu", "z,z", "u"));
    expect_fail(save("relu-2-inputs.onnx", model(7, 13, g)), WF_INVALID_ARGUMENT, "r2", NULL);
    /* Reshape at opset 9 with a shape whose element count differs */
    g = good_graph();
    int64_t shp[1] = {4};
    n = node("k", "Constant", NULL, "shape4");
    pb a = {0};
    f_str(&a, 1, "value");
    f_int(&a, 20, 4 /* TENSOR */);
    f_msg(&a, 5, tensor_raw("v", T_INT64, 1, (int64_t[]){1}, shp, 8));
    f_msg(&n, N_ATTR, a);
    f_msg(&g, G_NODE, n);
    f_msg(&g, G_NODE, node("rs", "Reshape", "z,shape4", "u"));
    expect_fail(save("reshape-count.onnx", model(7, 9, g)), WF_INVALID_ARGUMENT, "rs", NULL);
}

/* The whole test runs on this allocator: it refuses (and records) any request over 1 GiB, so a test
 * can tell whether the importer sized a buffer from a declared shape before checking the data. */
static size_t g_biggest_refused;

static void *test_alloc(void *user, size_t size, size_t align)
{
    (void)user;
    if (size > ((size_t)1 << 30)) {
        if (size > g_biggest_refused) g_biggest_refused = size;
        return NULL;
    }
    void *p = NULL;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) ? NULL : p;
}

static void test_dealloc(void *user, void *p)
{
    (void)user;
    free(p);
}

/* ---- crash candidates ------------------------------------------------------------------------------------
 * Models that reached undefined behaviour in the importer when this test was written (fuzzing and
 * review). Each runs in a child process, so a crash is reported as this test's failure and the other
 * tests still run; the child must load (fail or succeed) and inspect the file and exit normally. */

static int run_in_child(const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        alarm(60);
        wf_graph *g;
        if (wf_graph_new(&g)) _exit(3);
        wf_onnx_model *m = NULL;
        wf_status *s = wf_onnx_load(path, g, &m);
        if (s && (!strstr(wf_status_message(s), path) || strstr(wf_status_message(s), "(null)"))) {
            fprintf(stderr, "message does not name the file or prints a NULL string: %s\n", wf_status_message(s));
            _exit(4);
        }
        if (s) fprintf(stderr, "  -> %s\n", wf_status_message(s));
        wf_status_free(s);
        wf_onnx_model_free(m);
        wf_graph_free(g);
        char *text = NULL;
        wf_status_free(wf_onnx_inspect(path, &text));
        wf_free(text);
        exit(0); /* exit, not _exit: the sanitizers' leak check runs at exit */
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static void expect_no_crash(const char *path)
{
    int rc = run_in_child(path);
    if (rc != 0) CHECK_FAIL_("%s: the importer crashed or failed a sanitizer check (child exit %d)", path, rc);
}

/* A graph whose only node is `n` over input x: f32[1,1,4,4], at `opset`. */
static const char *one_node(const char *file, pb n, int64_t opset)
{
    static const int64_t d4[4] = {1, 1, 4, 4};
    pb g = {0};
    f_msg(&g, G_NODE, n);
    f_msg(&g, G_INPUT, value_info("x", T_FLOAT, 4, d4));
    f_msg(&g, G_OUTPUT, value_info("y", T_FLOAT, -1, NULL));
    return save(file, model(7, opset, g));
}

static void test_no_crash_missing_inputs(void)
{
    /* handlers that look at input 0 (or 1) before anyone checked it exists */
    expect_no_crash(one_node("softmax-no-input.onnx", node("s", "Softmax", NULL, "y"), 11));
    expect_no_crash(one_node("softmax-omitted-input.onnx", node("s", "Softmax", "", "y"), 11));
    expect_no_crash(one_node("conv-one-input.onnx", node("c", "Conv", "x", "y"), 13));
    expect_no_crash(one_node("maxpool-no-input.onnx", node("p", "MaxPool", NULL, "y"), 13));
    expect_no_crash(one_node("split-no-input.onnx", node("s", "Split", NULL, "y,y2"), 13));
    pb n = node("c", "Clip", "", "y");
    f_msg(&n, N_ATTR, attr_float("min", 0));
    expect_no_crash(one_node("clip-omitted-input.onnx", n, 10));
    n = node("p", "Pad", NULL, "y");
    f_msg(&n, N_ATTR, attr_ints("pads", 2, (int64_t[]){0, 0}));
    f_msg(&n, N_ATTR, attr_float("value", 1));
    expect_no_crash(one_node("pad-no-input.onnx", n, 10));
    expect_no_crash(one_node("pow-omitted.onnx", node("p", "Pow", ",", "y"), 13));
    expect_no_crash(one_node("castlike-omitted.onnx", node("c", "CastLike", ",x", "y"), 13));
    expect_no_crash(one_node("unsqueeze-no-input.onnx", node("u", "Unsqueeze", NULL, "y"), 11));
}

static void test_no_crash_odd_fields(void)
{
    /* an attribute without a name on an op that has attributes */
    pb n = node("g", "Gemm", "x,x", "y");
    f_msg(&n, N_ATTR, attr_int(NULL, 1));
    expect_no_crash(one_node("attr-noname.onnx", n, 13));
    /* a node without an op_type */
    expect_no_crash(one_node("no-op-type.onnx", node("n", NULL, "x", "y"), 13));
    /* an empty string attribute (protobuf-c leaves its data NULL) */
    n = node("p", "MaxPool", "x", "y");
    f_msg(&n, N_ATTR, attr_ints("kernel_shape", 2, (int64_t[]){1, 1}));
    f_msg(&n, N_ATTR, attr_string("auto_pad", ""));
    expect_no_crash(one_node("attr-empty-string.onnx", n, 13));
    /* an empty initializer with empty raw_data */
    pb g = {0};
    int64_t d0 = 0;
    f_msg(&g, G_NODE, node("i", "Identity", "w", "y"));
    f_msg(&g, G_INIT, tensor_raw("w", T_FLOAT, 1, &d0, NULL, 0));
    f_msg(&g, G_OUTPUT, value_info("y", T_FLOAT, -1, NULL));
    expect_no_crash(save("empty-raw.onnx", model(7, 13, g)));
    /* inspect multiplies the dims of every initializer */
    g = good_graph();
    int64_t big[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 16};
    f_msg(&g, G_INIT, tensor_raw("huge", T_FLOAT, 3, big, NULL, 0));
    expect_no_crash(save("inspect-overflow.onnx", model(7, 13, g)));
    /* a 16 GiB initializer declared in a hundred bytes is refused before it is allocated */
    g = good_graph();
    int64_t large[2] = {INT64_C(1) << 28, 16};
    float four = 4;
    f_msg(&g, G_INIT, tensor_raw("large", T_FLOAT, 2, large, &four, 4));
    const char *p = save("large-init.onnx", model(7, 13, g));
    g_biggest_refused = 0;
    expect_fail(p, WF_INVALID_ARGUMENT, "initializer 'large'", "raw_data holds 4 bytes");
    if (g_biggest_refused)
        CHECK_FAIL_("%s: the importer asked for %zu bytes for a tensor the file holds 4 bytes of", p, g_biggest_refused);
}

/* ---- allocation failures --------------------------------------------------------------------------------
 * SQLite-style fault injection: make the Nth allocation fail for every N until the load succeeds; each
 * failure must be a status (not a crash), leave the graph as it was, and leak nothing. */

static void test_out_of_memory(void)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t d = 3;
    wf_output keep;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, &d, &keep));
    int n;
    for (n = 1; n < 5000; n++) {
        wf_onnx_model *m = NULL;
        wf__fault_inject(n);
        wf_status *s = wf_onnx_load(g_good, g, &m);
        wf__fault_inject(0);
        if (!s) {
            CHECK_INT(wf_graph_num_nodes(g), 1 + 7); /* x, then w, b, x_1, b_1 (default), add, relu, bias */
            wf_onnx_model_free(m);
            break;
        }
        CHECK_INT(wf_graph_num_nodes(g), 1);
        if (!strstr(wf_status_message(s), g_good)) CHECK_FAIL_("allocation %d: '%s' does not name the file", n,
                                                                 wf_status_message(s));
        if (wf_graph_num_nodes(g) != 1) {
            fprintf(stderr, "  after failing allocation %d: %s\n", n, wf_status_message(s));
            wf_status_free(s);
            break;
        }
        wf_status_free(s);
    }
    CHECK(n > 1 && n < 5000);
    wf_graph_free(g);
}

int main(void)
{
    wf_set_allocator(test_alloc, test_dealloc, NULL);
    snprintf(g_dir, sizeof g_dir, "%s/weft-test-onnx-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_good, sizeof g_good, "%s", save("good.onnx", model(7, 13, good_graph())));
    /* the children first, before any context starts threads */
    RUN_TEST(test_no_crash_missing_inputs);
    RUN_TEST(test_no_crash_odd_fields);
    RUN_TEST(test_good_model_loads_and_runs);
    RUN_TEST(test_missing_file);
    RUN_TEST(test_empty_file);
    RUN_TEST(test_truncated_model);
    RUN_TEST(test_random_bytes);
    RUN_TEST(test_versions);
    RUN_TEST(test_unsupported_ops);
    RUN_TEST(test_dangling_value);
    RUN_TEST(test_bad_graph_values);
    RUN_TEST(test_raw_data_size);
    RUN_TEST(test_external_data);
    RUN_TEST(test_bad_attributes);
    RUN_TEST(test_out_of_memory);
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
