/*
 * wf_session_export_onnx: graphs built through the public API are exported, loaded back with
 * wf_onnx_load and compared with the original, and (when build/venv exists) checked by onnx's checker
 * and reference evaluator against weft's outputs. Bad exports must fail with a status and no file.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h" /* wf__fault_inject */

static char g_root[512]; /* the source tree, for the Python checker */
static char g_dir[256];  /* scratch folder */
static char g_py[700];
static int g_have_py;
static wf_context *g_ctx;

static const char *path_in(const char *name)
{
    static char buf[8][400];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* No model and no temporary file of the exporter are left in the scratch folder. */
static int leftovers(void)
{
    DIR *d = opendir(g_dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static uint64_t g_seed = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_seed >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static wf_tensor *rand_f32(int rank, const int64_t *dims, float scale, float offset)
{
    wf_tensor *t = NULL;
    if (wf_tensor_new(WF_F32, rank, dims, NULL, &t)) return NULL;
    float *p = wf_tensor_data(t);
    for (int64_t i = 0; i < wf_tensor_size(t); i++) p[i] = frand() * scale + offset;
    return t;
}

static wf_output var_rand(wf_graph *g, const char *name, int rank, const int64_t *dims, float scale, float off)
{
    wf_tensor *t = rand_f32(rank, dims, scale, off);
    wf_output o = {0};
    CHECK_OK(wf_variable(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

static wf_output const_rand(wf_graph *g, const char *name, int rank, const int64_t *dims, float scale, float off)
{
    wf_tensor *t = rand_f32(rank, dims, scale, off);
    wf_output o = {0};
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

static wf_output op(wf_graph *g, const char *type, const char *name, const wf_output *in, int n_in,
                    const wf_attr *at, int n_at)
{
    wf_node *n = NULL;
    CHECK_OK(wf_op(g, type, name, in, n_in, at, n_at, &n));
    return wf_out(n, 0);
}

static void expect_close(const wf_tensor *a, const wf_tensor *b, double tol, const char *what)
{
    CHECK(a && b);
    if (!a || !b) return;
    CHECK_INT(wf_tensor_dtype(a), wf_tensor_dtype(b));
    CHECK_INT(wf_tensor_size(a), wf_tensor_size(b));
    if (wf_tensor_dtype(a) != WF_F32 || wf_tensor_size(a) != wf_tensor_size(b)) return;
    const float *pa = wf_tensor_data(a), *pb = wf_tensor_data(b);
    double worst = 0;
    for (int64_t i = 0; i < wf_tensor_size(a); i++) {
        double d = fabs((double)pa[i] - pb[i]);
        if (!(d <= worst)) worst = d;
    }
    if (!(worst <= tol)) CHECK_FAIL_("%s: max |diff| %g > %g", what, worst, tol);
}

/* Loads the model into a fresh graph, feeds x to its one input and compares its outputs with want. */
static void reload_and_compare(const char *path, const wf_tensor *x, wf_tensor *const *want, int n_want,
                               const char *const *names)
{
    wf_graph *g = NULL;
    wf_onnx_model *m = NULL;
    wf_session *s = NULL;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_onnx_load(path, g, &m));
    if (!m) goto done;
    CHECK_INT(wf_onnx_num_inputs(m), 1);
    CHECK_INT(wf_onnx_num_outputs(m), n_want);
    if (wf_onnx_num_inputs(m) != 1 || wf_onnx_num_outputs(m) != n_want) goto done;
    CHECK_INT(wf_onnx_input(m, 0)->dims[0], -1); /* the symbolic batch dim "N" */
    /* the file's own description of the values and the model, as the exporter wrote it */
    const wf_onnx_value *in0 = wf_onnx_input(m, 0);
    CHECK(in0->file_rank >= 1 && in0->dim_names[0] && !strcmp(in0->dim_names[0], "N"));
    for (int d = 1; d < in0->file_rank; d++) CHECK(in0->dim_names[d] == NULL);
    CHECK_INT(in0->elem_type, in0->dtype == WF_I64 ? 7 : 1); /* INT64 (token ids) or FLOAT */
    for (int i = 0; i < n_want; i++) CHECK(wf_onnx_output(m, i)->elem_type != 0);
    const wf_onnx_meta *meta = wf_onnx_model_meta(m);
    CHECK(!strcmp(meta->producer_name, "weft") && !strcmp(meta->producer_version, wf_version()));
    CHECK_INT(meta->ir_version, 8);
    CHECK(meta->domain && meta->doc_string && meta->graph_name && meta->graph_doc_string);
    CHECK_INT(meta->n_props, 0);
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
    wf_feed f = {wf_onnx_input(m, 0)->output, x};
    wf_output fetch[4];
    wf_tensor *got[4] = {0};
    for (int i = 0; i < n_want; i++) {
        fetch[i] = wf_onnx_output(m, i)->output;
        if (names) CHECK(strcmp(wf_onnx_output(m, i)->name, names[i]) == 0);
    }
    CHECK_OK(wf_session_run(s, &f, 1, fetch, n_want, got, NULL));
    for (int i = 0; i < n_want; i++) {
        expect_close(got[i], want[i], 1e-5, "reloaded model");
        wf_tensor_free(got[i]);
    }
done:
    wf_session_free(s);
    wf_onnx_model_free(m);
    wf_graph_free(g);
}

/* onnx.checker (full) and onnx.reference on the file, against weft's outputs. */
static void python_check(const char *model, const wf_tensor *x, wf_tensor *const *want, int n_want, const char *tol)
{
    if (!g_have_py) {
        CHECK_SKIP("onnx reference check", "%s: %s is missing (sh scripts/venv.sh)", model, g_py);
        return;
    }
    char cmd[4096];
    const char *xin = path_in("input.npy");
    CHECK_OK(wf_npy_write(xin, x));
    int len = snprintf(cmd, sizeof cmd, "%s %s/tests/onnx/check_export.py %s %s", g_py, g_root, model, xin);
    for (int i = 0; i < n_want; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "expected%d.npy", i);
        const char *p = path_in(nm);
        CHECK_OK(wf_npy_write(p, want[i]));
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", p);
    }
    snprintf(cmd + len, sizeof cmd - (size_t)len, " %s >&2", tol ? tol : "");
    int rc = system(cmd);
    if (rc != 0) CHECK_FAIL_("%s failed (%d)", cmd, rc);
}

static wf_tensor *run1(wf_session *s, wf_output in, const wf_tensor *x, wf_output out)
{
    wf_feed f = {in, x};
    wf_tensor *y = NULL;
    CHECK_OK(wf_session_run(s, &f, 1, &out, 1, &y, NULL));
    return y;
}

/* ---- models ---------------------------------------------------------------------------------------- */

/* Flatten -> MatMul+BiasAdd -> Relu -> MatMul+BiasAdd -> Softmax, weights in Variables; the export must
 * carry the value set after the session started, not the initial one. */
static void test_mlp(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[3] = {-1, 4, 4};
    wf_output x, h, y;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 3, xd, &x));
    CHECK_OK(wf_flatten(g, "flat", x, 1, &h));
    int64_t d1[2] = {16, 8}, d2[2] = {8, 5}, b1d = 8, b2d = 5;
    wf_output w1 = var_rand(g, "w1", 2, d1, 0.5f, 0), b1 = var_rand(g, "b1", 1, &b1d, 0.1f, 0);
    wf_output w2 = var_rand(g, "w2", 2, d2, 0.5f, 0), b2 = var_rand(g, "b2", 1, &b2d, 0.1f, 0);
    CHECK_OK(wf_matmul(g, "mm1", h, w1, 0, 0, &h));
    CHECK_OK(wf_bias_add(g, "ba1", h, b1, &h));
    CHECK_OK(wf_relu(g, "relu", h, &h));
    CHECK_OK(wf_matmul(g, "mm2", h, w2, 0, 0, &h));
    CHECK_OK(wf_bias_add(g, "ba2", h, b2, &h));
    CHECK_OK(wf_softmax(g, "probs", h, -1, &y));
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
    int64_t in_d[3] = {3, 4, 4};
    wf_tensor *in = rand_f32(3, in_d, 1.0f, 0);
    wf_tensor *before = run1(s, x, in, y);
    wf_tensor *nw1 = rand_f32(2, d1, 2.0f, 0.25f);
    CHECK_OK(wf_session_set_variable(s, "w1", nw1));
    wf_tensor *after = run1(s, x, in, y);
    /* the new weights change the output, so a file with the old ones would not match */
    double moved = 0;
    for (int64_t i = 0; i < wf_tensor_size(after); i++)
        moved += fabs(((float *)wf_tensor_data(after))[i] - ((float *)wf_tensor_data(before))[i]);
    CHECK(moved > 1e-2);

    const char *p = path_in("mlp.onnx");
    CHECK_OK(wf_session_export_onnx(s, &y, NULL, 1, p));
    const char *names[1] = {"probs"};
    reload_and_compare(p, in, &after, 1, names);
    python_check(p, in, &after, 1, NULL);

    /* the exported initializer is the current value, byte for byte */
    wf_graph *g2;
    wf_onnx_model *m = NULL;
    CHECK_OK(wf_graph_new(&g2));
    CHECK_OK(wf_onnx_load(p, g2, &m));
    wf_node *wn = NULL;
    CHECK_OK(wf_graph_find(g2, "w1", &wn));
    if (wn) {
        wf_session *s2;
        CHECK_OK(wf_session_new(g_ctx, g2, NULL, &s2));
        wf_output wo = wf_out(wn, 0);
        wf_tensor *wv = NULL;
        CHECK_OK(wf_session_run(s2, NULL, 0, &wo, 1, &wv, NULL));
        CHECK(wv && memcmp(wf_tensor_data(wv), wf_tensor_data(nw1), wf_tensor_bytes(nw1)) == 0);
        wf_tensor_free(wv);
        wf_session_free(s2);
    }
    wf_onnx_model_free(m);
    wf_graph_free(g2);

    /* a requested output name: the value is renamed through an Identity */
    const char *on[1] = {"class_probabilities"};
    p = path_in("mlp_named.onnx");
    CHECK_OK(wf_session_export_onnx(s, &y, on, 1, p));
    reload_and_compare(p, in, &after, 1, on);
    python_check(p, in, &after, 1, NULL);

    wf_tensor_free(in);
    wf_tensor_free(before);
    wf_tensor_free(after);
    wf_tensor_free(nw1);
    wf_session_free(s);
    wf_graph_free(g);
}

/* Conv2D + NCHW BiasAdd, MaxPool2D, AvgPool2D, BatchNormalization, Flatten, a transposed Dense; a
 * second output through GlobalAvgPool. */
static void test_cnn(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[4] = {-1, 3, 8, 8};
    wf_output x, h, y, gap;
    CHECK_OK(wf_placeholder(g, "image", WF_F32, 4, xd, &x));
    int64_t wd[4] = {4, 3, 3, 3}, c = 4;
    wf_output w = const_rand(g, "conv_w", 4, wd, 0.4f, 0), b = var_rand(g, "conv_b", 1, &c, 0.2f, 0);
    int64_t pads[4] = {1, 1, 1, 1}, k2[2] = {2, 2}, s2[2] = {2, 2};
    wf_attr ca[1] = {wf_attr_ints("pads", pads, 4)};
    wf_output ci[2] = {x, w};
    h = op(g, "Conv2D", "conv", ci, 2, ca, 1);
    wf_attr fmt = wf_attr_string("data_format", "NCHW");
    wf_output bi[2] = {h, b};
    h = op(g, "BiasAdd", "conv_bias", bi, 2, &fmt, 1);
    CHECK_OK(wf_relu(g, "conv_relu", h, &h));
    wf_output relu = h;
    wf_attr pa[2] = {wf_attr_ints("kernel_shape", k2, 2), wf_attr_ints("strides", s2, 2)};
    h = op(g, "MaxPool2D", "maxpool", &h, 1, pa, 2);
    h = op(g, "AvgPool2D", "avgpool", &h, 1, pa, 2);
    wf_output bn[5] = {h, var_rand(g, "bn_scale", 1, &c, 0.3f, 1.0f), var_rand(g, "bn_bias", 1, &c, 0.2f, 0),
                       const_rand(g, "bn_mean", 1, &c, 0.1f, 0), const_rand(g, "bn_var", 1, &c, 0.2f, 1.0f)};
    wf_attr eps = wf_attr_float("epsilon", 1e-3);
    h = op(g, "BatchNormalization", "bn", bn, 5, &eps, 1);
    CHECK_OK(wf_flatten(g, "flat", h, 1, &h));
    int64_t dd[2] = {3, 16}, n3 = 3;
    CHECK_OK(wf_matmul(g, "dense", h, var_rand(g, "dense_w", 2, dd, 0.3f, 0), 0, 1, &h));
    CHECK_OK(wf_bias_add(g, "logits", h, const_rand(g, "dense_b", 1, &n3, 0.1f, 0), &y));
    gap = op(g, "GlobalAvgPool", "gap", &relu, 1, NULL, 0);
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
    int64_t in_d[4] = {2, 3, 8, 8};
    wf_tensor *in = rand_f32(4, in_d, 1.0f, 0);
    wf_feed f = {x, in};
    wf_output outs[2] = {y, gap};
    wf_tensor *want[2] = {0};
    CHECK_OK(wf_session_run(s, &f, 1, outs, 2, want, NULL));
    const char *p = path_in("cnn.onnx");
    CHECK_OK(wf_session_export_onnx(s, outs, NULL, 2, p));
    const char *names[2] = {"logits", "gap"};
    reload_and_compare(p, in, want, 2, names);
    python_check(p, in, want, 2, NULL);

    /* every allocation failing in turn: OUT_OF_MEMORY, no file, nothing leaked (ASan) */
    const char *q = path_in("cnn_oom.onnx");
    int ok = 0;
    for (long nth = 1; nth < 2000 && !ok; nth++) {
        wf__fault_inject(nth);
        wf_status *st = wf_session_export_onnx(s, outs, NULL, 2, q);
        wf__fault_inject(0);
        if (!st) {
            ok = 1;
        } else {
            if (wf_status_code(st) != WF_OUT_OF_MEMORY)
                CHECK_FAIL_("allocation %ld failing: %s", nth, wf_status_message(st));
            wf_status_free(st);
            CHECK(!file_exists(q));
        }
    }
    CHECK(ok);
    reload_and_compare(q, in, want, 2, names);
    CHECK_INT(leftovers(), 0);

    wf_tensor_free(want[0]);
    wf_tensor_free(want[1]);
    wf_tensor_free(in);
    wf_session_free(s);
    wf_graph_free(g);
}

/* One model, one output: a session runs y on a random x of in_d, exports it to `file`, and the file
 * reloaded and onnx's reference give the same values. */
static void roundtrip_one(wf_graph *g, wf_output x, wf_output y, int rank, const int64_t *in_d, const char *file)
{
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
    wf_tensor *in = rand_f32(rank, in_d, 2.0f, 0.5f);
    wf_tensor *want = run1(s, x, in, y);
    const char *p = path_in(file);
    CHECK_OK(wf_session_export_onnx(s, &y, NULL, 1, p));
    reload_and_compare(p, in, &want, 1, NULL);
    python_check(p, in, &want, 1, NULL);
    wf_tensor_free(want);
    wf_tensor_free(in);
    wf_session_free(s);
}

/* LayerNormalization (3 outputs, the first read) then Gelu, which opset 17 only has as a formula. */
static void test_layernorm_gelu(void)
{
    for (int approx = 0; approx < 2; approx++) {
        wf_graph *g;
        CHECK_OK(wf_graph_new(&g));
        int64_t xd[3] = {-1, 6, 8}, c = 8;
        wf_output x, y;
        CHECK_OK(wf_placeholder(g, "x", WF_F32, 3, xd, &x));
        wf_output li[3] = {x, var_rand(g, "ln_scale", 1, &c, 0.3f, 1.0f), const_rand(g, "ln_bias", 1, &c, 0.2f, 0)};
        wf_attr la[2] = {wf_attr_int("axis", -1), wf_attr_float("epsilon", 1e-5)};
        wf_output h = op(g, "LayerNormalization", "ln", li, 3, la, 2);
        wf_attr ga = wf_attr_string("approximate", approx ? "tanh" : "none");
        y = op(g, "Gelu", "gelu", &h, 1, &ga, 1);
        roundtrip_one(g, x, y, 3, (int64_t[]){2, 6, 8}, approx ? "ln_gelu_tanh.onnx" : "ln_gelu.onnx");
        wf_graph_free(g);
    }
}

/* RMSNormalization (opset 23) is written as its formula, over the last axis and over the last two. */
static void test_rmsnorm(void)
{
    for (int two = 0; two < 2; two++) {
        wf_graph *g;
        CHECK_OK(wf_graph_new(&g));
        int64_t xd[3] = {-1, 6, 8}, sd[2] = {6, 8};
        wf_output x, y;
        CHECK_OK(wf_placeholder(g, "x", WF_F32, 3, xd, &x));
        wf_output ri[2] = {x, var_rand(g, "rms_scale", two ? 2 : 1, two ? sd : sd + 1, 0.3f, 1.0f)};
        wf_attr ra[2] = {wf_attr_int("axis", two ? 1 : -1), wf_attr_float("epsilon", 1e-5)};
        y = op(g, "RMSNormalization", "rms", ri, 2, ra, 2);
        roundtrip_one(g, x, y, 3, (int64_t[]){2, 6, 8}, two ? "rms2.onnx" : "rms.onnx");
        wf_graph_free(g);
    }
}

/* Attention (opset 23) is written as its formula: 3-D inputs with three heads, a scale and a finite
 * constant mask (what passes/attention.c makes of a model's attention), a causal bool mask under
 * mask_replaces (a GPT's Where-masked attention, written back as the Where), and 4-D without either; a
 * causal one, a mask that is not a constant, a bool mask that adds -inf (ONNX's) and a read present key
 * are refused, naming the node. */
static void test_attention(void)
{
    for (int four = 0; four < 2; four++) {
        wf_graph *g;
        wf_session *s;
        CHECK_OK(wf_graph_new(&g));
        int64_t xd3[3] = {-1, 5, 12}, xd4[4] = {-1, 3, 5, 4}, wkd[2] = {12, 12}, wvd[2] = {12, 9}, md[2] = {5, 5};
        wf_output x, k, v, y;
        CHECK_OK(wf_placeholder(g, "x", WF_F32, four ? 4 : 3, four ? xd4 : xd3, &x));
        if (four) {
            wf_output ai[3] = {x, x, x};
            y = op(g, "Attention", "attn", ai, 3, NULL, 0);
        } else {
            CHECK_OK(wf_matmul(g, "k", x, const_rand(g, "wk", 2, wkd, 0.5f, 0), 0, 0, &k));
            CHECK_OK(wf_matmul(g, "v", x, const_rand(g, "wv", 2, wvd, 0.5f, 0), 0, 0, &v));
            wf_output ai[4] = {x, k, v, const_rand(g, "mask", 2, md, 3.0f, -1.0f)};
            wf_attr aa[3] = {wf_attr_int("q_num_heads", 3), wf_attr_int("kv_num_heads", 3), wf_attr_float("scale", 0.3)};
            y = op(g, "Attention", "attn", ai, 4, aa, 3);
        }
        int64_t in3[3] = {2, 5, 12}, in4[4] = {2, 3, 5, 4};
        const char *p = path_in(four ? "attention4.onnx" : "attention3.onnx");
        roundtrip_one(g, x, y, four ? 4 : 3, four ? in4 : in3, four ? "attention4.onnx" : "attention3.onnx");
        if (!four) { /* a causal bool mask under mask_replaces: written as Where(mask, scores, -inf) */
            wf_graph *gw;
            CHECK_OK(wf_graph_new(&gw));
            wf_output xw, kw, vw, yw, mc;
            CHECK_OK(wf_placeholder(gw, "x", WF_F32, 3, xd3, &xw));
            CHECK_OK(wf_matmul(gw, "k", xw, const_rand(gw, "wk", 2, wkd, 0.5f, 0), 0, 0, &kw));
            CHECK_OK(wf_matmul(gw, "v", xw, const_rand(gw, "wv", 2, wvd, 0.5f, 0), 0, 0, &vw));
            uint8_t causal[25];
            for (int i = 0; i < 25; i++) causal[i] = i % 5 <= i / 5;
            wf_tensor *mt = NULL;
            CHECK_OK(wf_tensor_new(WF_BOOL, 2, md, causal, &mt));
            CHECK_OK(wf_const(gw, "causal", mt, &mc));
            wf_tensor_free(mt);
            wf_output ai[4] = {xw, kw, vw, mc};
            wf_attr aa[4] = {wf_attr_int("q_num_heads", 3), wf_attr_int("kv_num_heads", 3), wf_attr_float("scale", 0.3),
                             wf_attr_int("mask_replaces", 1)};
            yw = op(gw, "Attention", "attn", ai, 4, aa, 4);
            roundtrip_one(gw, xw, yw, 3, in3, "attention_where.onnx");
            /* the same mask without mask_replaces (ONNX's -inf added) has no opset-17 formula here */
            wf_output yb = op(gw, "Attention", "added", ai, 4, aa, 3);
            wf_session *sw = NULL;
            CHECK_OK(wf_session_new(g_ctx, gw, NULL, &sw));
            CHECK_ERR(wf_session_export_onnx(sw, &yb, NULL, 1, path_in("bad_attention.onnx")), WF_UNIMPLEMENTED,
                      "node 'added' (Attention): Attention needs opset 23");
            wf_session_free(sw);
            wf_graph_free(gw);
        }
        if (!four) { /* refused: a hidden size the graph does not know (the heads' Reshapes need it) */
            wf_output z, yz;
            CHECK_OK(wf_placeholder(g, "z", WF_F32, 3, (int64_t[]){-1, 5, -1}, &z));
            wf_attr ha[2] = {wf_attr_int("q_num_heads", 3), wf_attr_int("kv_num_heads", 3)};
            yz = op(g, "Attention", "unknown_heads", (wf_output[]){z, z, z}, 3, ha, 2);
            wf_session *s = NULL;
            CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
            CHECK_ERR(wf_session_export_onnx(s, &yz, NULL, 1, path_in("bad_attention.onnx")), WF_UNIMPLEMENTED,
                      "node 'unknown_heads' (Attention): Attention needs opset 23");
            wf_session_free(s);
        }
        /* refused (4-D): causal; a mask fed at run time; present_key read */
        if (four) {
            wf_output ai[4] = {x, x, x, x};
            wf_attr causal = wf_attr_int("is_causal", 1);
            wf_output yc = op(g, "Attention", "causal", ai, 3, &causal, 1);
            wf_output ym = op(g, "Attention", "fed_mask", ai, 4, NULL, 0);
            wf_node *an = NULL;
            CHECK_OK(wf_op(g, "Attention", "present", ai, 3, NULL, 0, &an));
            CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
            CHECK_ERR(wf_session_export_onnx(s, &yc, NULL, 1, p), WF_UNIMPLEMENTED, "node 'causal' (Attention)");
            CHECK_ERR(wf_session_export_onnx(s, &ym, NULL, 1, p), WF_UNIMPLEMENTED, "Attention needs opset 23");
            wf_output both[2] = {wf_out(an, 0), wf_out(an, 1)};
            if (an) CHECK_ERR(wf_session_export_onnx(s, both, NULL, 2, p), WF_UNIMPLEMENTED, "node 'present'");
            wf_session_free(s);
        }
        wf_graph_free(g);
    }
}

/* An embedding lookup (Gather of i64 ids into a Variable table) averaged over the sequence, with
 * ReduceMean's axes given as a weft attribute (an attribute at opset 17 too) and ReduceSum's as an
 * input, then Maximum, Square and Rsqrt, which ONNX spells differently. */
static void test_embedding(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[2] = {-1, 5}, td[2] = {10, 4};
    wf_output ids, y;
    CHECK_OK(wf_placeholder(g, "ids", WF_I64, 2, xd, &ids));
    wf_output gi[2] = {var_rand(g, "table", 2, td, 1.0f, 0), ids};
    wf_attr ax0 = wf_attr_int("axis", 0);
    wf_output e = op(g, "Gather", "embed", gi, 2, &ax0, 1);
    int64_t one = 1;
    wf_attr ra[2] = {wf_attr_ints("axes", &one, 1), wf_attr_int("keepdims", 0)};
    wf_output mean = op(g, "ReduceMean", "mean", &e, 1, ra, 2);
    wf_tensor *axt;
    CHECK_OK(wf_tensor_new(WF_I64, 1, &one, &one, &axt));
    wf_output axc;
    CHECK_OK(wf_const(g, "sum_axes", axt, &axc));
    wf_tensor_free(axt);
    wf_output si[2] = {e, axc};
    wf_attr kd = wf_attr_int("keepdims", 0);
    wf_output sum = op(g, "ReduceSum", "sum", si, 2, &kd, 1);
    wf_output sq = op(g, "Square", "sq", &sum, 1, NULL, 0);
    wf_output mi[2] = {mean, sq};
    wf_output mx = op(g, "Maximum", "max", mi, 2, NULL, 0);
    wf_output half;
    CHECK_OK(wf_const_scalar(g, "half", WF_F32, 0.5, &half));
    wf_output ai[2] = {mx, half};
    wf_output pos = op(g, "Add", "pos", ai, 2, NULL, 0);
    y = op(g, "Rsqrt", "out", &pos, 1, NULL, 0);
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
    int64_t in_d[2] = {3, 5};
    wf_tensor *in;
    CHECK_OK(wf_tensor_new(WF_I64, 2, in_d, NULL, &in));
    for (int i = 0; i < 15; i++) ((int64_t *)wf_tensor_data(in))[i] = (i * 7 + 3) % 10;
    wf_tensor *want = run1(s, ids, in, y);
    const char *p = path_in("embed.onnx");
    CHECK_OK(wf_session_export_onnx(s, &y, NULL, 1, p));
    reload_and_compare(p, in, &want, 1, NULL);
    python_check(p, in, &want, 1, NULL);
    wf_tensor_free(want);
    wf_tensor_free(in);
    wf_session_free(s);
    wf_graph_free(g);
}

static wf_output const_i64(wf_graph *g, const char *name, const int64_t *v, int n)
{
    wf_tensor *t;
    int64_t d = n;
    wf_output o = {0};
    CHECK_OK(wf_tensor_new(WF_I64, 1, &d, v, &t));
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

/* The rest of the ops a builder reaches for, chained: Reshape, Gemm, the activations, Concat, Dropout,
 * Transpose, Slice, Clip, the arithmetic, ArgMax, Equal/NotEqual, Where, Cast, ReduceMax, Squeeze,
 * Unsqueeze, LogSoftmax, Identity; and ConvTranspose2D as a second output. */
static void test_misc_ops(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[3] = {-1, 4, 6};
    wf_output x, r, h;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 3, xd, &x));
    int64_t rs[2] = {-1, 24};
    CHECK_OK(wf_reshape(g, "rows", x, 2, rs, &r));
    int64_t wd[2] = {24, 6}, six = 6;
    wf_output gi[3] = {r, const_rand(g, "gemm_w", 2, wd, 0.4f, 0), var_rand(g, "gemm_c", 1, &six, 0.2f, 0)};
    wf_attr alpha = wf_attr_float("alpha", 0.5);
    wf_output gm = op(g, "Gemm", "gemm", gi, 3, &alpha, 1);
    static const char *const acts[6] = {"Sigmoid", "Tanh", "Elu", "Selu", "LeakyRelu", "Softplus"};
    wf_output cat_in[6];
    for (int i = 0; i < 6; i++) {
        wf_attr la = wf_attr_float("alpha", 0.2);
        cat_in[i] = op(g, acts[i], NULL, &gm, 1, &la, i == 4);
    }
    wf_attr ax1 = wf_attr_int("axis", 1);
    h = op(g, "Concat", "cat", cat_in, 6, &ax1, 1);
    h = op(g, "Dropout", "drop", &h, 1, NULL, 0);
    int64_t sq6[3] = {-1, 6, 6};
    CHECK_OK(wf_reshape(g, "square", h, 3, sq6, &h));
    int64_t perm[3] = {0, 2, 1};
    wf_attr pa = wf_attr_ints("perm", perm, 3);
    h = op(g, "Transpose", "tr", &h, 1, &pa, 1);
    int64_t st = 1, en = 5, ax2 = 2;
    wf_output si[4] = {h, const_i64(g, "starts", &st, 1), const_i64(g, "ends", &en, 1), const_i64(g, "axes", &ax2, 1)};
    wf_output sl = op(g, "Slice", "slice", si, 4, NULL, 0);
    wf_output lo, hi, one, two;
    CHECK_OK(wf_const_scalar(g, "lo", WF_F32, -0.5, &lo));
    CHECK_OK(wf_const_scalar(g, "hi", WF_F32, 0.8, &hi));
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1.0, &one));
    CHECK_OK(wf_const_scalar(g, "two", WF_F32, 2.0, &two));
    wf_output cli[3] = {sl, lo, hi};
    wf_output cl = op(g, "Clip", "clip", cli, 3, NULL, 0);
    wf_output e = op(g, "Exp", "exp", &cl, 1, NULL, 0), ep1, lg, sq, ng, pw, den, dv;
    CHECK_OK(wf_add(g, "exp1", e, one, &ep1));
    lg = op(g, "Log", "log", &ep1, 1, NULL, 0);
    sq = op(g, "Sqrt", "sqrt", &lg, 1, NULL, 0);
    ng = op(g, "Neg", "neg", &sq, 1, NULL, 0);
    wf_output pin[2] = {sq, two};
    pw = op(g, "Pow", "pow", pin, 2, NULL, 0);
    CHECK_OK(wf_binary(g, "Sub", "den", e, ng, &den));
    CHECK_OK(wf_binary(g, "Div", "div", pw, den, &dv));
    wf_attr am[2] = {wf_attr_int("axis", 2), wf_attr_int("keepdims", 1)};
    wf_output a1 = op(g, "ArgMax", "am1", &cl, 1, am, 2), a2 = op(g, "ArgMax", "am2", &sl, 1, am, 2);
    wf_output ab[2] = {a1, a2};
    wf_output eq = op(g, "Equal", "eq", ab, 2, NULL, 0), ne = op(g, "NotEqual", "ne", ab, 2, NULL, 0);
    wf_output w1[3] = {eq, dv, ng};
    h = op(g, "Where", "where_eq", w1, 3, NULL, 0);
    wf_output w2[3] = {ne, h, cl};
    h = op(g, "Where", "where_ne", w2, 3, NULL, 0);
    wf_attr to64 = wf_attr_dtype("to", WF_F64), to32 = wf_attr_dtype("to", WF_F32);
    h = op(g, "Cast", "to_f64", &h, 1, &to64, 1);
    wf_attr ra[2] = {wf_attr_ints("axes", &ax2, 1), wf_attr_int("keepdims", 1)};
    h = op(g, "ReduceMax", "rmax", &h, 1, ra, 2);
    h = op(g, "Cast", "to_f32", &h, 1, &to32, 1);
    wf_output sqi[2] = {h, const_i64(g, "sq_axes", &ax2, 1)};
    h = op(g, "Squeeze", "squeeze", sqi, 2, NULL, 0);
    int64_t ax_1 = 1;
    wf_output usi[2] = {h, const_i64(g, "us_axes", &ax_1, 1)};
    h = op(g, "Unsqueeze", "unsqueeze", usi, 2, NULL, 0);
    wf_attr lsa = wf_attr_int("axis", -1);
    h = op(g, "LogSoftmax", "lsm", &h, 1, &lsa, 1);
    wf_output y = op(g, "Identity", "y", &h, 1, NULL, 0);
    /* ConvTranspose2D on the input as an image */
    int64_t imd[4] = {-1, 1, 4, 6}, ctw[4] = {1, 2, 3, 3}, s2[2] = {2, 2};
    wf_output img;
    CHECK_OK(wf_reshape(g, "img", x, 4, imd, &img));
    wf_output cti[2] = {img, const_rand(g, "ct_w", 4, ctw, 0.5f, 0)};
    wf_attr cta = wf_attr_ints("strides", s2, 2);
    wf_output ct = op(g, "ConvTranspose2D", "deconv", cti, 2, &cta, 1);
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
    int64_t in_d[3] = {3, 4, 6};
    wf_tensor *in = rand_f32(3, in_d, 1.5f, 0);
    wf_feed f = {x, in};
    wf_output outs[2] = {y, ct};
    wf_tensor *want[2] = {0};
    CHECK_OK(wf_session_run(s, &f, 1, outs, 2, want, NULL));
    const char *p = path_in("misc.onnx");
    CHECK_OK(wf_session_export_onnx(s, outs, NULL, 2, p));
    reload_and_compare(p, in, want, 2, NULL);
    python_check(p, in, want, 2, NULL);
    wf_tensor_free(want[0]);
    wf_tensor_free(want[1]);
    wf_tensor_free(in);
    wf_session_free(s);
    wf_graph_free(g);
}

/* A model imported from PyTorch's export goes back out and still gives PyTorch's output. */
static void test_model_roundtrip(void)
{
    char dir[700], model[800], inp[800], exp[800];
    snprintf(dir, sizeof dir, "%s/build/models/lenet5", g_root);
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    snprintf(inp, sizeof inp, "%s/input.npy", dir);
    snprintf(exp, sizeof exp, "%s/expected.npy", dir);
    if (!file_exists(model) || !file_exists(inp) || !file_exists(exp)) {
        CHECK_SKIP("test_model_roundtrip", "%s is missing (tests/models/export_models.py makes it)", model);
        return;
    }
    wf_graph *g;
    wf_onnx_model *m = NULL;
    wf_session *s = NULL;
    wf_tensor *x = NULL, *ref = NULL, *y = NULL;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_onnx_load(model, g, &m));
    CHECK_OK(wf_npy_read(inp, &x));
    CHECK_OK(wf_npy_read(exp, &ref));
    if (m && x && ref) {
        CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
        wf_output in = wf_onnx_input(m, 0)->output, out = wf_onnx_output(m, 0)->output;
        y = run1(s, in, x, out);
        expect_close(y, ref, 1e-4, "lenet5 in weft");
        const char *p = path_in("lenet5.onnx");
        const char *name = wf_onnx_output(m, 0)->name;
        CHECK_OK(wf_session_export_onnx(s, &out, &name, 1, p));
        reload_and_compare(p, x, &ref, 1, &name);
        python_check(p, x, &ref, 1, "--atol 1e-4");
    }
    wf_tensor_free(y);
    wf_tensor_free(x);
    wf_tensor_free(ref);
    wf_session_free(s);
    wf_onnx_model_free(m);
    wf_graph_free(g);
}

/* ---- errors ---------------------------------------------------------------------------------------- */

static void test_errors(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[2] = {-1, 3}, d3 = 3, wd[2] = {3, 3};
    wf_output x, v, a, y, cp, loss, dw;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, xd, &x));
    v = var_rand(g, "v", 1, &d3, 1.0f, 0);
    wf_output one;
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1.0, &one));
    CHECK_OK(wf_add(g, "v_plus_one", v, one, &a));
    CHECK_OK(wf_assign(g, "bump", v, a, &a));
    CHECK_OK(wf_mul(g, "uses_assign", x, a, &y));
    wf_output axis;
    CHECK_OK(wf_const_scalar(g, "axis", WF_I64, 1, &axis));
    wf_output ci[2] = {x, axis};
    cp = op(g, "CumProd", "cumprod", ci, 2, NULL, 0);
    wf_output w = var_rand(g, "w", 2, wd, 1.0f, 0), mm;
    CHECK_OK(wf_matmul(g, "mm", x, w, 0, 0, &mm));
    wf_output li[1] = {mm};
    loss = op(g, "ReduceSum", "loss", li, 1, NULL, 0);
    CHECK_OK(wf_gradients(g, &loss, 1, NULL, &w, 1, &dw));
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));

    const char *p = path_in("bad.onnx");
    CHECK_ERR(wf_session_export_onnx(s, &y, NULL, 1, p), WF_INVALID_ARGUMENT, "node 'bump' (Assign)");
    CHECK(!file_exists(p));
    CHECK_ERR(wf_session_export_onnx(s, &cp, NULL, 1, p), WF_UNIMPLEMENTED, "node 'cumprod' (CumProd)");
    CHECK(!file_exists(p));
    CHECK(dw.node != NULL);
    if (dw.node) {
        CHECK_ERR(wf_session_export_onnx(s, &dw, NULL, 1, p), WF_INVALID_ARGUMENT, "training-only");
        CHECK(!file_exists(p));
    }
    /* the failing output among good ones still writes nothing */
    wf_output both[2] = {mm, cp};
    CHECK_ERR(wf_session_export_onnx(s, both, NULL, 2, p), WF_UNIMPLEMENTED, "CumProd");
    CHECK(!file_exists(p));
    CHECK_ERR(wf_session_export_onnx(s, &mm, NULL, 1, "/nonexistent/dir/x.onnx"), WF_IO_ERROR, "/nonexistent/dir/x.onnx");
    CHECK(!file_exists("/nonexistent/dir/x.onnx"));
    /* a folder in the way of the rename: the temporary file goes again */
    const char *d = path_in("a_folder.onnx");
    CHECK(mkdir(d, 0700) == 0);
    CHECK_ERR(wf_session_export_onnx(s, &mm, NULL, 1, d), WF_IO_ERROR, "a_folder.onnx");
    rmdir(d);
    /* names: duplicates and a clash with another value */
    wf_output two[2] = {mm, loss};
    const char *dup[2] = {"out", "out"}, *clash[2] = {"x", NULL};
    CHECK_ERR(wf_session_export_onnx(s, two, dup, 2, p), WF_INVALID_ARGUMENT, "both named 'out'");
    CHECK_ERR(wf_session_export_onnx(s, two, clash, 2, p), WF_INVALID_ARGUMENT, "'x'");
    CHECK(!file_exists(p));
    CHECK_ERR(wf_session_export_onnx(s, &mm, NULL, 0, p), WF_INVALID_ARGUMENT, "no outputs");
    /* an output of another graph than the session's */
    wf_graph *g2;
    wf_output x2;
    CHECK_OK(wf_graph_new(&g2));
    CHECK_OK(wf_placeholder(g2, "other_x", WF_F32, 2, xd, &x2));
    wf_output mixed[2] = {mm, x2};
    CHECK_ERR(wf_session_export_onnx(s, &x2, NULL, 1, p), WF_INVALID_ARGUMENT, "output 0 ('other_x') is not from the session's graph");
    CHECK_ERR(wf_session_export_onnx(s, mixed, NULL, 2, p), WF_INVALID_ARGUMENT, "output 1 ('other_x')");
    CHECK(!file_exists(p));
    wf_graph_free(g2);
    CHECK_INT(leftovers(), 0);
    /* the session is still usable and a good export works afterwards */
    CHECK_OK(wf_session_export_onnx(s, two, NULL, 2, p));
    CHECK(file_exists(p));
    wf_session_free(s);
    wf_graph_free(g);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    snprintf(g_root, sizeof g_root, "%s", __FILE__);
    char *cut = strstr(g_root, "/tests/test_onnx_export.c");
    if (cut) *cut = 0;
    else snprintf(g_root, sizeof g_root, ".");
    snprintf(g_dir, sizeof g_dir, "/tmp/weft_test_onnx_export_%d", (int)getpid());
    if (mkdir(g_dir, 0700) != 0) {
        perror(g_dir);
        return 1;
    }
    snprintf(g_py, sizeof g_py, "%s/build/venv/bin/python", g_root);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "%s -c 'import onnx.reference, numpy' 2>/dev/null", g_py);
    g_have_py = file_exists(g_py) && system(cmd) == 0;
    wf_context_options o;
    wf_context_options_init(&o);
    o.inter_op_threads = 2;
    o.intra_op_threads = 2;
    wf_status *st = wf_context_new(&o, &g_ctx);
    if (st) {
        fprintf(stderr, "context: %s\n", wf_status_message(st));
        wf_status_free(st);
        return 1;
    }
    RUN_TEST(test_mlp);
    RUN_TEST(test_cnn);
    RUN_TEST(test_layernorm_gelu);
    RUN_TEST(test_attention);
    RUN_TEST(test_rmsnorm);
    RUN_TEST(test_embedding);
    RUN_TEST(test_misc_ops);
    RUN_TEST(test_model_roundtrip);
    RUN_TEST(test_errors);
    wf_context_free(g_ctx);
    nftw(g_dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}
