/*
 * The CUDA backend end to end: the plugin's device shows up as GPU:0, and a small model (MatMul with a
 * broadcast bias, Relu, Softmax) and a broadcasting Add run on it under strict placement and match a
 * double-precision reference computed here; the backward conv and pool ops, the loss and the indexing
 * ops of training graphs match CPU:0, and Adam steps of a small MLP on GPU:0 give the CPU's losses and
 * weights. Index checks run on the device: a bad index of Gather, GatherElements, GatherND, ScatterND,
 * ScatterElements or MaxUnpool, a bad ReverseSequence or RNN length, RoiAlign batch index, RotaryEmbedding
 * position id or loss target, a zero integer divisor or a negative integer exponent fails the run naming
 * the node, and no index is read back (on the emulator, which counts the copies to the host). Without a
 * CUDA device (no driver, no GPU, plugin not built) it prints why and counts itself skipped, so CI
 * machines without a GPU pass.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static wf_context *g_ctx;

/* The plugin is built beside the weft binary, one folder above this test. */
static void plugin_path_default(void)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    strcpy(slash, "/..");
    setenv("WEFT_PLUGIN_PATH", exe, 0);
}

static int gpu_index(void)
{
    for (int i = 0; i < wf_context_num_devices(g_ctx); i++) {
        wf_device_info d;
        if (!wf_context_device(g_ctx, i, &d) && !strcmp(d.type, "GPU") && !strcmp(d.backend, "cuda")) return i;
    }
    return -1;
}

static float frand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static wf_status *run_on_gpu(wf_graph *g, const wf_feed *feeds, int n_feeds, wf_output fetch, wf_tensor **out)
{
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "GPU:0";
    so.strict_placement = 1;
    wf_session *s;
    wf_status *st = wf_session_new(g_ctx, g, &so, &s);
    if (st) return st;
    st = wf_session_run(s, feeds, n_feeds, &fetch, 1, out, NULL);
    wf_session_free(s);
    return st;
}

static void test_device_listed(void)
{
    wf_device_info d;
    CHECK_OK(wf_context_device(g_ctx, gpu_index(), &d));
    CHECK_STR_CONTAINS(d.name, "/device:GPU:0");
    CHECK(d.memory_bytes > 0);
    CHECK(d.compute_units > 0);
}

/* softmax(relu(x @ w + b)) over the last axis, against a double reference */
static void test_mlp_layer(void)
{
    enum { M = 37, K = 129, N = 67 };
    static float x[M * K], w[K * N], b[N];
    unsigned seed = 7;
    for (int i = 0; i < M * K; i++) x[i] = frand(&seed);
    for (int i = 0; i < K * N; i++) w[i] = frand(&seed) * 0.2f;
    for (int i = 0; i < N; i++) b[i] = frand(&seed);
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[2] = {M, K}, wd[2] = {K, N}, bd[1] = {N};
    wf_tensor *xt, *wt, *bt, *y = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, xd, x, &xt));
    CHECK_OK(wf_tensor_new(WF_F32, 2, wd, w, &wt));
    CHECK_OK(wf_tensor_new(WF_F32, 1, bd, b, &bt));
    wf_output xp, wc, bc, mm, ad, re, sm;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, xd, &xp));
    CHECK_OK(wf_const(g, "w", wt, &wc));
    CHECK_OK(wf_const(g, "b", bt, &bc));
    CHECK_OK(wf_matmul(g, "mm", xp, wc, 0, 0, &mm));
    CHECK_OK(wf_add(g, "add", mm, bc, &ad));
    CHECK_OK(wf_relu(g, "relu", ad, &re));
    CHECK_OK(wf_softmax(g, "softmax", re, -1, &sm));
    wf_feed feed = {xp, xt};
    CHECK_OK(run_on_gpu(g, &feed, 1, sm, &y));
    if (y) {
        CHECK_INT(wf_tensor_dtype(y), WF_F32);
        CHECK_INT(wf_tensor_size(y), M * N);
        const float *got = wf_tensor_data(y);
        double worst = 0;
        for (int i = 0; i < M; i++) {
            double row[N], mx = -1e300, sum = 0;
            for (int j = 0; j < N; j++) {
                double acc = b[j];
                for (int k = 0; k < K; k++) acc += (double)x[i * K + k] * w[k * N + j];
                row[j] = acc < 0 ? 0 : acc;
                if (row[j] > mx) mx = row[j];
            }
            for (int j = 0; j < N; j++) sum += exp(row[j] - mx);
            for (int j = 0; j < N; j++) {
                double e = fabs(got[i * N + j] - exp(row[j] - mx) / sum);
                if (e > worst) worst = e;
            }
        }
        CHECK(worst < 1e-5);
        if (worst >= 1e-5) fprintf(stderr, "worst error %g\n", worst);
    }
    wf_tensor_free(y);
    wf_tensor_free(xt);
    wf_tensor_free(wt);
    wf_tensor_free(bt);
    wf_graph_free(g);
}

/* [3,1,5] + [4,1] -> [3,4,5], exact */
static void test_broadcast_add(void)
{
    float a[15], b[4];
    for (int i = 0; i < 15; i++) a[i] = (float)i * 0.5f;
    for (int i = 0; i < 4; i++) b[i] = (float)(i * 100);
    int64_t ad[3] = {3, 1, 5}, bd[2] = {4, 1};
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    wf_tensor *at, *bt, *y = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 3, ad, a, &at));
    CHECK_OK(wf_tensor_new(WF_F32, 2, bd, b, &bt));
    wf_output ap, bp, sum;
    CHECK_OK(wf_placeholder(g, "a", WF_F32, 3, ad, &ap));
    CHECK_OK(wf_placeholder(g, "b", WF_F32, 2, bd, &bp));
    CHECK_OK(wf_add(g, "add", ap, bp, &sum));
    wf_feed feeds[2] = {{ap, at}, {bp, bt}};
    CHECK_OK(run_on_gpu(g, feeds, 2, sum, &y));
    if (y) {
        CHECK_INT(wf_tensor_size(y), 60);
        const float *got = wf_tensor_data(y);
        int bad = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++) bad += got[(i * 4 + j) * 5 + k] != a[i * 5 + k] + b[j];
        CHECK_INT(bad, 0);
    }
    wf_tensor_free(y);
    wf_tensor_free(at);
    wf_tensor_free(bt);
    wf_graph_free(g);
}

/* ---- the training path against the CPU ----------------------------------------------------------------- */

static wf_status *run_on(const char *dev, wf_graph *g, const wf_feed *feeds, int n_feeds, const wf_output *fetch, int n,
                         wf_tensor **out)
{
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = dev;
    so.strict_placement = 1;
    wf_session *s;
    wf_status *st = wf_session_new(g_ctx, g, &so, &s);
    if (st) return st;
    st = wf_session_run(s, feeds, n_feeds, fetch, n, out, NULL);
    wf_session_free(s);
    return st;
}

/* The fetches on GPU:0 against CPU:0: same dtype and shape, floats within tol (relative to 1), the rest
 * exact. */
static void compare_devices(wf_graph *g, const wf_feed *feeds, int n_feeds, const wf_output *fetch, int n, double tol)
{
    wf_tensor *c[8] = {0}, *d[8] = {0};
    CHECK_OK(run_on("CPU:0", g, feeds, n_feeds, fetch, n, c));
    CHECK_OK(run_on("GPU:0", g, feeds, n_feeds, fetch, n, d));
    for (int i = 0; i < n; i++) {
        if (!c[i] || !d[i]) continue;
        CHECK_INT(wf_tensor_dtype(d[i]), wf_tensor_dtype(c[i]));
        CHECK_INT(wf_tensor_rank(d[i]), wf_tensor_rank(c[i]));
        CHECK_INT(wf_tensor_size(d[i]), wf_tensor_size(c[i]));
        if (wf_tensor_dtype(d[i]) != wf_tensor_dtype(c[i]) || wf_tensor_size(d[i]) != wf_tensor_size(c[i])) continue;
        int64_t bad = 0;
        double worst = 0;
        if (wf_tensor_dtype(c[i]) == WF_F32) {
            const float *a = wf_tensor_data(c[i]), *b = wf_tensor_data(d[i]);
            for (int64_t j = 0; j < wf_tensor_size(c[i]); j++) {
                double e = fabs((double)a[j] - b[j]) / (1 + fabs((double)a[j]));
                if (e > worst) worst = e;
            }
            bad = worst > tol;
        } else {
            bad = memcmp(wf_tensor_data(c[i]), wf_tensor_data(d[i]), wf_tensor_bytes(c[i])) != 0;
        }
        if (bad) fprintf(stderr, "fetch %d (%s) differs between CPU:0 and GPU:0 (worst %g)\n", i,
                         wf_node_name(fetch[i].node), worst);
        CHECK(!bad);
    }
    for (int i = 0; i < n; i++) {
        wf_tensor_free(c[i]);
        wf_tensor_free(d[i]);
    }
}

static wf_output op1(wf_graph *g, const char *type, const char *name, const wf_output *in, int n_in, const wf_attr *at,
                     int n_at)
{
    wf_node *nd = NULL;
    CHECK_OK(wf_op(g, type, name, in, n_in, at, n_at, &nd));
    return wf_out(nd, 0);
}

static wf_output const_i64(wf_graph *g, const char *name, int rank, const int64_t *dims, const int64_t *v)
{
    wf_tensor *t = NULL;
    wf_output o = {0};
    CHECK_OK(wf_tensor_new(WF_I64, rank, dims, v, &t));
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

static wf_tensor *rand_f32(int rank, const int64_t *dims, unsigned seed)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, rank, dims, NULL, &t));
    if (!t) return NULL;
    float *p = wf_tensor_data(t);
    for (int64_t i = 0; i < wf_tensor_size(t); i++) p[i] = frand(&seed);
    return t;
}

/* The backward conv and pool ops, the loss, OneHot, ScatterND with duplicates, NonZero, CumSum and
 * Trilu: GPU:0 computes what CPU:0 does. */
static void test_kernels_match_cpu(void)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[4] = {2, 3, 7, 7}, wd[4] = {4, 3, 3, 3}, dyd[4] = {2, 4, 4, 4}, pd[4] = {2, 3, 3, 3}, ld[2] = {5, 4};
    wf_tensor *xt = rand_f32(4, xd, 1), *wt = rand_f32(4, wd, 2), *dyt = rand_f32(4, dyd, 3), *pt = rand_f32(4, pd, 4),
              *lt = rand_f32(2, ld, 5);
    wf_output x, w, dy, dp, lg;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 4, xd, &x));
    CHECK_OK(wf_placeholder(g, "w", WF_F32, 4, wd, &w));
    CHECK_OK(wf_placeholder(g, "dy", WF_F32, 4, dyd, &dy));
    CHECK_OK(wf_placeholder(g, "dp", WF_F32, 4, pd, &dp));
    CHECK_OK(wf_placeholder(g, "logits", WF_F32, 2, ld, &lg));
    int64_t four = 4, two2[2] = {2, 2}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
    wf_attr conv_at[2] = {wf_attr_ints("strides", s2, 2), wf_attr_ints("pads", p1, 4)};
    wf_output in_bi[3] = {const_i64(g, "xs", 1, &four, xd), w, dy};
    wf_output f[10];
    f[0] = op1(g, "Conv2DBackpropInput", "bpi", in_bi, 3, conv_at, 2);
    wf_output in_bf[3] = {x, const_i64(g, "ws", 1, &four, wd), dy};
    f[1] = op1(g, "Conv2DBackpropFilter", "bpf", in_bf, 3, conv_at, 2);
    wf_attr pool_at[2] = {wf_attr_ints("kernel_shape", two2, 2), wf_attr_ints("strides", s2, 2)};
    wf_output in_mp[2] = {x, dp};
    f[2] = op1(g, "MaxPool2DGrad", "mpg", in_mp, 2, pool_at, 2);
    wf_output in_ap[2] = {const_i64(g, "xs2", 1, &four, xd), dp};
    f[3] = op1(g, "AvgPool2DGrad", "apg", in_ap, 2, pool_at, 2);
    int64_t five = 5, labels[5] = {0, 3, 1, 3, 2};
    wf_output lab = const_i64(g, "labels", 1, &five, labels);
    wf_output in_l[2] = {lg, lab};
    wf_node *sce = NULL;
    CHECK_OK(wf_op(g, "SoftmaxCrossEntropyLoss", "sce", in_l, 2, NULL, 0, &sce));
    f[4] = wf_out(sce, 0);
    f[5] = wf_out(sce, 1);
    int64_t one = 1, dep = 4, two = 2, vals_v[2] = {0, 1};
    wf_output in_oh[3] = {lab, const_i64(g, "depth", 0, NULL, &dep), const_i64(g, "vals", 1, &two, vals_v)};
    f[6] = op1(g, "OneHot", "onehot", in_oh, 3, NULL, 0);
    /* rows 3 and 1 twice: the add reduction must keep every update */
    int64_t idd[2] = {6, 1}, idx_v[6] = {3, 1, 3, 0, -1, 1}, ud[2] = {6, 4}, dd[2] = {5, 4};
    wf_tensor *ut = rand_f32(2, ud, 6), *zt = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, dd, NULL, &zt));
    memset(wf_tensor_data(zt), 0, wf_tensor_bytes(zt));
    wf_output zc, uc;
    CHECK_OK(wf_const(g, "zeros", zt, &zc));
    CHECK_OK(wf_const(g, "updates", ut, &uc));
    wf_output in_sc[3] = {zc, const_i64(g, "sidx", 2, idd, idx_v), uc};
    wf_attr red = wf_attr_string("reduction", "add");
    f[7] = op1(g, "ScatterND", "scatter", in_sc, 3, &red, 1);
    wf_output zero_f, gt;
    CHECK_OK(wf_const_scalar(g, "zero", WF_F32, 0, &zero_f));
    CHECK_OK(wf_binary(g, "Greater", "gt", lg, zero_f, &gt));
    f[8] = op1(g, "NonZero", "nonzero", &gt, 1, NULL, 0);
    wf_output in_cs[2] = {lg, const_i64(g, "axis", 0, NULL, &one)};
    f[9] = op1(g, "CumSum", "cumsum", in_cs, 2, NULL, 0);
    wf_feed feeds[5] = {{x, xt}, {w, wt}, {dy, dyt}, {dp, pt}, {lg, lt}};
    compare_devices(g, feeds, 5, f, 8, 1e-5);
    compare_devices(g, feeds, 5, f + 8, 2, 1e-5);
    wf_tensor_free(xt);
    wf_tensor_free(wt);
    wf_tensor_free(dyt);
    wf_tensor_free(pt);
    wf_tensor_free(lt);
    wf_tensor_free(ut);
    wf_tensor_free(zt);
    wf_graph_free(g);
}

static wf_model *mlp_model(const char *device)
{
    int64_t in[1] = {12};
    wf_model *m = NULL;
    CHECK_OK(wf_model_new(WF_F32, 1, in, 42, &m));
    if (!m) return NULL;
    wf_layer l;
    wf_layer_init(&l, WF_LAYER_DENSE);
    l.units = 16;
    l.activation = WF_ACT_RELU;
    CHECK_OK(wf_model_add(m, &l));
    wf_layer_init(&l, WF_LAYER_DENSE);
    l.units = 5;
    l.activation = WF_ACT_SOFTMAX;
    CHECK_OK(wf_model_add(m, &l));
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.device = device;
    o.strict_placement = 1;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    return m;
}

/* A few Adam steps of a small MLP with sparse cross-entropy entirely on GPU:0 (strict placement) give the
 * CPU's losses and weights. */
static void test_mlp_training_matches_cpu(void)
{
    enum { N = 32, F = 12 };
    wf_model *gm = mlp_model("GPU:0"), *cm = mlp_model("CPU:0");
    int64_t xd[2] = {N, F}, yd[1] = {N};
    wf_tensor *x = rand_f32(2, xd, 11), *y = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, 1, yd, NULL, &y));
    for (int i = 0; y && i < N; i++) ((int64_t *)wf_tensor_data(y))[i] = (i * 7) % 5;
    for (int step = 0; gm && cm && x && y && step < 3; step++) {
        double lg = 0, lc = 0;
        CHECK_OK(wf_model_train_step(gm, x, y, &lg, NULL));
        CHECK_OK(wf_model_train_step(cm, x, y, &lc, NULL));
        CHECK_NEAR(lg, lc, 1e-4);
    }
    const char *vars[2] = {"dense/kernel", "dense_1/bias"};
    for (int v = 0; gm && cm && v < 2; v++) {
        wf_tensor *a = NULL, *b = NULL;
        CHECK_OK(wf_session_get_variable(wf_model_session(gm), vars[v], &a));
        CHECK_OK(wf_session_get_variable(wf_model_session(cm), vars[v], &b));
        if (a && b && wf_tensor_size(a) == wf_tensor_size(b)) {
            double worst = 0;
            for (int64_t i = 0; i < wf_tensor_size(a); i++) {
                double e = fabs((double)((const float *)wf_tensor_data(a))[i] - ((const float *)wf_tensor_data(b))[i]);
                if (e > worst) worst = e;
            }
            if (worst >= 1e-4) fprintf(stderr, "%s differs by %g\n", vars[v], worst);
            CHECK(worst < 1e-4);
        }
        wf_tensor_free(a);
        wf_tensor_free(b);
    }
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_model_free(gm);
    wf_model_free(cm);
}

/* One index op on GPU:0 fed x and idx; *y its output (NULL on failure, whose status is returned). */
static wf_status *index_op_on_gpu(const char *op, const char *name, const wf_tensor *x, const wf_tensor *idx,
                                  const wf_attr *at, int n_at, bool relu_after, wf_tensor **y)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    wf_output xo, io, out;
    CHECK_OK(wf_placeholder(g, "x", wf_tensor_dtype(x), wf_tensor_rank(x), wf_tensor_dims(x), &xo));
    CHECK_OK(wf_placeholder(g, "idx", wf_tensor_dtype(idx), wf_tensor_rank(idx), wf_tensor_dims(idx), &io));
    wf_output in[2] = {xo, io};
    wf_node *n;
    CHECK_OK(wf_op(g, op, name, in, 2, at, n_at, &n));
    out = wf_out(n, 0);
    if (relu_after) CHECK_OK(wf_unary(g, "Relu", "after", out, &out));
    wf_feed f[2] = {{xo, (wf_tensor *)x}, {io, (wf_tensor *)idx}};
    *y = NULL;
    wf_status *st = run_on_gpu(g, f, 2, out, y);
    wf_graph_free(g);
    return st;
}

/* want is "node 'x' (Op): what": the error starts with it, or (the error found by the node's own event,
 * named by the executor's wrapper) with "node 'x' (Op) on GPU:0: what"; either way the node is named
 * once, at the start. */
static void expect_index_error(wf_status *st, const char *want)
{
    CHECK(st != NULL);
    if (!st) return;
    CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
    const char *m = wf_status_message(st), *cut = strstr(want, "): ");
    char on_dev[512] = "";
    if (cut) snprintf(on_dev, sizeof on_dev, "%.*s) on GPU:0: %s", (int)(cut - want), want, cut + 3);
    if (strncmp(m, want, strlen(want)) != 0 && (!cut || strncmp(m, on_dev, strlen(on_dev)) != 0))
        CHECK_FAIL_("error '%s' starts neither with '%s' nor with '%s'", m, want, on_dev);
    wf_status_free(st);
}

/* Gather, GatherElements and GatherND check their indices in the kernel (no read-back): a bad index sets
 * the device's error record, read when the run downloads its results, and the status names the node and
 * the index in the words of the old host check, also when the bad output only fed another kernel. The
 * record is cleared once read: the next run with good indices gives numpy's values. */
static void test_index_errors_on_device(void)
{
    int64_t xd[2] = {4, 2}, id[1] = {3};
    float xv[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t bad[3] = {0, 5, 1}, good[3] = {3, -4, 1};
    wf_tensor *x, *ib, *ig, *y;
    CHECK_OK(wf_tensor_new(WF_F32, 2, xd, xv, &x));
    CHECK_OK(wf_tensor_new(WF_I64, 1, id, bad, &ib));
    CHECK_OK(wf_tensor_new(WF_I64, 1, id, good, &ig));
    expect_index_error(index_op_on_gpu("Gather", "g", x, ib, NULL, 0, false, &y),
                       "node 'g' (Gather): index 5 (element 1 of indices i64[3]) is out of range for axis 0 of data f32[4,2]");
    expect_index_error(index_op_on_gpu("Gather", "g2", x, ib, NULL, 0, true, &y),
                       "node 'g2' (Gather): index 5 (element 1 of indices i64[3])");
    CHECK_OK(index_op_on_gpu("Gather", "g3", x, ig, NULL, 0, false, &y));
    const float want_g[6] = {6, 7, 0, 1, 2, 3}; /* numpy: x[[3, -4, 1]] */
    CHECK(y && wf_tensor_size(y) == 6 && !memcmp(wf_tensor_data(y), want_g, sizeof want_g));
    wf_tensor_free(y);

    /* GatherElements on axis 1 of [[0,1,2],[3,4,5]] */
    int64_t ed[2] = {2, 3};
    float ev[6] = {0, 1, 2, 3, 4, 5};
    int64_t ebad[6] = {0, 1, -7, 2, 2, 2}, egood[6] = {2, -1, 0, 1, 0, -3};
    wf_tensor *ex, *eb, *eg;
    CHECK_OK(wf_tensor_new(WF_F32, 2, ed, ev, &ex));
    CHECK_OK(wf_tensor_new(WF_I64, 2, ed, ebad, &eb));
    CHECK_OK(wf_tensor_new(WF_I64, 2, ed, egood, &eg));
    wf_attr ax1 = wf_attr_int("axis", 1);
    expect_index_error(index_op_on_gpu("GatherElements", "ge", ex, eb, &ax1, 1, false, &y),
                       "node 'ge' (GatherElements): index -7 (at position 2) is out of range for axis 1 of data f32[2,3]");
    CHECK_OK(index_op_on_gpu("GatherElements", "ge2", ex, eg, &ax1, 1, false, &y));
    const float want_e[6] = {2, 2, 0, 4, 3, 3}; /* numpy: np.take_along_axis(x, idx, 1) */
    CHECK(y && wf_tensor_size(y) == 6 && !memcmp(wf_tensor_data(y), want_e, sizeof want_e));
    wf_tensor_free(y);

    /* GatherND: tuples (row, col) into [2,3] */
    int64_t nd[2] = {2, 2};
    int64_t nbad[4] = {1, 0, 0, 3}, ngood[4] = {1, 2, -2, -1};
    wf_tensor *nb, *ng;
    CHECK_OK(wf_tensor_new(WF_I64, 2, nd, nbad, &nb));
    CHECK_OK(wf_tensor_new(WF_I64, 2, nd, ngood, &ng));
    expect_index_error(index_op_on_gpu("GatherND", "gn", ex, nb, NULL, 0, false, &y),
                       "node 'gn' (GatherND): index 3 (tuple 1, entry 1) is out of range for dim 1 of data f32[2,3]");
    CHECK_OK(index_op_on_gpu("GatherND", "gn2", ex, ng, NULL, 0, false, &y));
    const float want_n[2] = {5, 2}; /* x[1, 2], x[-2, -1] */
    CHECK(y && wf_tensor_size(y) == 2 && !memcmp(wf_tensor_data(y), want_n, sizeof want_n));
    wf_tensor_free(y);
    wf_tensor *all[] = {x, ib, ig, ex, eb, eg, nb, ng};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

/* ---- the scatters, OneHot and ReverseSequence: checks on the device, no read-back ---------------------- */

/* A test hook of the emulator (in the plugin it is linked into), or NULL on a real GPU: the plugin is
 * found, already loaded, on WEFT_PLUGIN_PATH. cuemu_d2h_copies counts the device-to-host copies,
 * cuemu_reverse_order runs blocks and threads in reverse order. */
typedef unsigned long long (*d2h_fn)(unsigned long long *bytes);
typedef void (*order_fn)(int reverse);
static void *emu_sym(const char *name)
{
    const char *pp = getenv("WEFT_PLUGIN_PATH");
    char dir[PATH_MAX], path[PATH_MAX + 32];
    for (const char *p = pp; p && *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = 0;
            snprintf(path, sizeof path, "%s/libweft-cuda.so", dir);
            void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
            if (h) {
                void *f = dlsym(h, name);
                dlclose(h);
                return f;
            }
        }
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

static d2h_fn emu_d2h(void)
{
    d2h_fn f;
    *(void **)&f = emu_sym("cuemu_d2h_copies");
    return f;
}

/* One op of n_in placeholders (x[i] NULL: an omitted input) on a device, in a session kept for several
 * runs. */
typedef struct gpu_op {
    wf_graph *g;
    wf_session *s;
    wf_output in[5], out;
} gpu_op;

static bool op_new_on(gpu_op *o, const char *device, const char *op, const char *name, const wf_tensor *const *x,
                      int n_in, const wf_attr *at, int n_at)
{
    memset(o, 0, sizeof *o);
    CHECK_OK(wf_graph_new(&o->g));
    if (!o->g) return false;
    static const char *names[5] = {"in0", "in1", "in2", "in3", "in4"};
    for (int i = 0; i < n_in; i++)
        if (x[i])
            CHECK_OK(wf_placeholder(o->g, names[i], wf_tensor_dtype(x[i]), wf_tensor_rank(x[i]), wf_tensor_dims(x[i]),
                                    &o->in[i]));
    wf_node *n = NULL;
    CHECK_OK(wf_op(o->g, op, name, o->in, n_in, at, n_at, &n));
    if (!n) return false;
    o->out = wf_out(n, 0);
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = device;
    so.strict_placement = 1;
    CHECK_OK(wf_session_new(g_ctx, o->g, &so, &o->s));
    return o->s != NULL;
}

static bool gpu_op_new(gpu_op *o, const char *op, const char *name, const wf_tensor *const *x, int n_in,
                       const wf_attr *at, int n_at)
{
    return op_new_on(o, "GPU:0", op, name, x, n_in, at, n_at);
}

/* Runs it on the feeds; *y the output, *d2h_bytes (when the emulator counts) the bytes copied to the host. */
static wf_status *gpu_op_run(gpu_op *o, const wf_tensor *const *x, int n_in, wf_tensor **y, long long *d2h_bytes)
{
    wf_feed f[5];
    int nf = 0;
    for (int i = 0; i < n_in; i++)
        if (x[i]) f[nf++] = (wf_feed){o->in[i], (wf_tensor *)x[i]};
    d2h_fn cnt = emu_d2h();
    unsigned long long b0 = 0, b1 = 0;
    if (cnt) cnt(&b0);
    *y = NULL;
    wf_status *st = wf_session_run(o->s, f, nf, &o->out, 1, y, NULL);
    if (cnt) cnt(&b1);
    if (d2h_bytes) *d2h_bytes = cnt ? (long long)(b1 - b0) : -1;
    return st;
}

static void gpu_op_free(gpu_op *o)
{
    wf_session_free(o->s);
    wf_graph_free(o->g);
}

static wf_tensor *tens(wf_dtype dt, int rank, const int64_t *dims, const void *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(dt, rank, dims, v, &t));
    return t;
}

static void check_f32(const wf_tensor *y, const float *want, int64_t n, const char *what)
{
    CHECK(y != NULL);
    if (!y) return;
    CHECK_INT(wf_tensor_size(y), n);
    bool same = wf_tensor_size(y) == n && !memcmp(wf_tensor_data(y), want, sizeof(float) * (size_t)n);
    if (!same) {
        fprintf(stderr, "%s: got", what);
        for (int64_t i = 0; i < wf_tensor_size(y); i++) fprintf(stderr, " %g", ((const float *)wf_tensor_data(y))[i]);
        fprintf(stderr, "\n");
    }
    CHECK(same);
}

/* Bytes a good run may download: its output, and the error record (cuk_err, 4 x 8 bytes) when a
 * checking kernel ran; an index read back would add the index tensor's bytes. */
static void check_no_readback(long long got, const wf_tensor *y, long long extra, const char *what)
{
    if (got < 0) return; /* a real GPU: nothing counts the copies */
    long long want = (long long)wf_tensor_size(y) * 4 + extra;
    if (got != want) fprintf(stderr, "%s: %lld bytes copied to the host, want %lld\n", what, got, want);
    CHECK(got == want);
}

/* ScatterND, ScatterElements and ReverseSequence check their indices (lengths) in a kernel, and the
 * scatters find duplicate targets on the device: a bad index fails the run with the node, op and index in
 * the CPU's words, the same session then runs good indices (duplicates in index order, as numpy's loop
 * over the indices, and reductions), and a good run copies only its output and the error record to the
 * host (counted by the emulator). OneHot needs no check: an index outside [-depth, depth) gives a row of
 * off values, as on the CPU. On the emulator, blocks and threads start in reverse order here, so a
 * scatter of duplicates run one thread per index (the detection missed them) gives the wrong winner. */
static void test_scatter_errors_on_device(void)
{
    order_fn rev;
    *(void **)&rev = emu_sym("cuemu_reverse_order");
    if (!emu_d2h() || !rev)
        printf("note: not the emulator; the read-back counts and the reversed order are not checked\n");
    if (rev) rev(1);
    const long long REC = 32;
    /* ScatterElements, axis 1, into [[0,1,2],[3,4,5]] */
    {
        int64_t d[2] = {2, 3}, id[2] = {2, 2};
        float xv[6] = {0, 1, 2, 3, 4, 5}, uv[4] = {10, 20, 30, 40};
        /* i32 indices: their 16 bytes differ from the record's 32, so a read-back shows in the count */
        int32_t bad[4] = {0, 3, 1, 0}, dup[4] = {2, 2, -1, 0}, perm[4] = {1, 0, 2, 1};
        wf_tensor *x = tens(WF_F32, 2, d, xv), *u = tens(WF_F32, 2, id, uv), *ib = tens(WF_I32, 2, id, bad),
                  *idup = tens(WF_I32, 2, id, dup), *iperm = tens(WF_I32, 2, id, perm), *y = NULL;
        wf_attr at[2] = {wf_attr_int("axis", 1), wf_attr_string("reduction", "add")};
        const wf_tensor *fb[3] = {x, ib, u}, *fd[3] = {x, idup, u}, *fp[3] = {x, iperm, u};
        gpu_op o, oa;
        long long nb = 0;
        if (x && u && ib && idup && iperm && gpu_op_new(&o, "ScatterElements", "se", fb, 3, at, 1)) {
            expect_index_error(gpu_op_run(&o, fb, 3, &y, NULL),
                               "node 'se' (ScatterElements): index 3 (at position 1) is out of range for axis 1 of data f32[2,3]");
            CHECK(y == NULL);
            CHECK_OK(gpu_op_run(&o, fd, 3, &y, &nb));
            const float want_dup[6] = {0, 1, 20, 40, 4, 30}; /* y[0,2] = 10 then 20; y[1,2] = 30, y[1,0] = 40 */
            check_f32(y, want_dup, 6, "ScatterElements duplicates");
            if (y) check_no_readback(nb, y, REC, "ScatterElements");
            wf_tensor_free(y);
            CHECK_OK(gpu_op_run(&o, fp, 3, &y, NULL));
            const float want_perm[6] = {20, 10, 2, 3, 40, 30};
            check_f32(y, want_perm, 6, "ScatterElements distinct");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        if (x && u && idup && gpu_op_new(&oa, "ScatterElements", "sea", fd, 3, at, 2)) {
            CHECK_OK(gpu_op_run(&oa, fd, 3, &y, NULL));
            const float want_add[6] = {0, 1, 32, 43, 4, 35}; /* 2 + 10 + 20; 3 + 40, 5 + 30 */
            check_f32(y, want_add, 6, "ScatterElements add");
            wf_tensor_free(y);
            gpu_op_free(&oa);
        }
        wf_tensor *all[] = {x, u, ib, idup, iperm};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
    /* ScatterND of rows into [[0,1],[2,3],[4,5],[6,7]] */
    {
        int64_t d[2] = {4, 2}, id[2] = {3, 1}, ud[2] = {3, 2};
        float xv[8] = {0, 1, 2, 3, 4, 5, 6, 7}, uv[6] = {10, 11, 20, 21, 30, 31};
        int64_t bad[3] = {1, 4, 0}, dup[3] = {1, -3, 3};
        wf_tensor *x = tens(WF_F32, 2, d, xv), *u = tens(WF_F32, 2, ud, uv), *ib = tens(WF_I64, 2, id, bad),
                  *idup = tens(WF_I64, 2, id, dup), *y = NULL;
        wf_attr red = wf_attr_string("reduction", "add");
        const wf_tensor *fb[3] = {x, ib, u}, *fd[3] = {x, idup, u};
        gpu_op o, oa;
        long long nb = 0;
        if (x && u && ib && idup && gpu_op_new(&o, "ScatterND", "sn", fb, 3, NULL, 0)) {
            expect_index_error(gpu_op_run(&o, fb, 3, &y, NULL),
                               "node 'sn' (ScatterND): index 4 (tuple 1, entry 0) is out of range for dim 0 of data f32[4,2]");
            CHECK_OK(gpu_op_run(&o, fd, 3, &y, &nb));
            const float want_dup[8] = {0, 1, 20, 21, 4, 5, 30, 31}; /* row 1 gets [10,11] then [20,21] (-3 is 1) */
            check_f32(y, want_dup, 8, "ScatterND duplicates");
            if (y) check_no_readback(nb, y, REC, "ScatterND");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        if (x && u && idup && gpu_op_new(&oa, "ScatterND", "sna", fd, 3, &red, 1)) {
            CHECK_OK(gpu_op_run(&oa, fd, 3, &y, NULL));
            const float want_add[8] = {0, 1, 32, 35, 4, 5, 36, 38};
            check_f32(y, want_add, 8, "ScatterND add");
            wf_tensor_free(y);
            gpu_op_free(&oa);
        }
        wf_tensor *all[] = {x, u, ib, idup};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
    /* ReverseSequence of [[0,1,2],[3,4,5]], batch axis 0 */
    {
        int64_t d[2] = {2, 3}, ld[1] = {2};
        float xv[6] = {0, 1, 2, 3, 4, 5};
        int64_t bad[2] = {2, 4}, good[2] = {2, 3};
        wf_tensor *x = tens(WF_F32, 2, d, xv), *lb = tens(WF_I64, 1, ld, bad), *lg = tens(WF_I64, 1, ld, good),
                  *y = NULL;
        wf_attr at[2] = {wf_attr_int("batch_axis", 0), wf_attr_int("time_axis", 1)};
        const wf_tensor *fb[2] = {x, lb}, *fg[2] = {x, lg};
        gpu_op o;
        long long nb = 0;
        if (x && lb && lg && gpu_op_new(&o, "ReverseSequence", "rs", fb, 2, at, 2)) {
            expect_index_error(gpu_op_run(&o, fb, 2, &y, NULL),
                               "node 'rs' (ReverseSequence): sequence length 4 of batch 1 is outside [0, 3] for input f32[2,3]");
            CHECK_OK(gpu_op_run(&o, fg, 2, &y, &nb));
            const float want[6] = {1, 0, 2, 5, 4, 3};
            check_f32(y, want, 6, "ReverseSequence");
            if (y) check_no_readback(nb, y, REC, "ReverseSequence");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        wf_tensor *all[] = {x, lb, lg};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
    /* OneHot, depth 3, values [0, 5]: 3 and -4 are out of range (rows of 0), -1 is 2 */
    {
        int64_t id[1] = {4}, vd[1] = {2};
        int64_t iv[4] = {1, -1, 3, -4}, dv = 3;
        float vv[2] = {0, 5};
        wf_tensor *ix = tens(WF_I64, 1, id, iv), *dp = tens(WF_I64, 0, NULL, &dv), *vals = tens(WF_F32, 1, vd, vv),
                  *y = NULL;
        const wf_tensor *f[3] = {ix, dp, vals};
        gpu_op o;
        long long nb = 0;
        if (ix && dp && vals && gpu_op_new(&o, "OneHot", "oh", f, 3, NULL, 0)) {
            CHECK_OK(gpu_op_run(&o, f, 3, &y, &nb));
            const float want[12] = {0, 5, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0};
            check_f32(y, want, 12, "OneHot");
            if (y) check_no_readback(nb, y, 0, "OneHot"); /* the depth is a host-memory argument: nothing read back */
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        wf_tensor *all[] = {ix, dp, vals};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
    if (rev) rev(0);
}

/* NegativeLogLikelihoodLoss's targets and MaxUnpool's indices are checked in their kernels too: a target
 * that is no class (and not ignore_index) or an index outside the unpooled image fails the run naming
 * the node, the same session then gives hand-worked values, and a good run reads nothing back but its
 * output and the error record. */
static void test_target_errors_on_device(void)
{
    const long long REC = 32;
    {
        int64_t xd[2] = {2, 3}, td[1] = {2};
        float xv[6] = {-1, -2, -3, -4, -5, -6};
        int64_t bad[2] = {1, 3}, good[2] = {2, 0}, ign[2] = {-1, 1};
        wf_tensor *x = tens(WF_F32, 2, xd, xv), *tb = tens(WF_I64, 1, td, bad), *tg = tens(WF_I64, 1, td, good),
                  *ti = tens(WF_I64, 1, td, ign), *y = NULL;
        wf_attr at = wf_attr_int("ignore_index", -1);
        const wf_tensor *fb[2] = {x, tb}, *fg[2] = {x, tg}, *fi[2] = {x, ti};
        gpu_op o;
        long long nb = 0;
        if (x && tb && tg && ti && gpu_op_new(&o, "NegativeLogLikelihoodLoss", "nll", fb, 2, &at, 1)) {
            expect_index_error(gpu_op_run(&o, fb, 2, &y, NULL),
                               "node 'nll' (NegativeLogLikelihoodLoss): target 3 at position 1 is not a class in [0, 3) "
                               "nor ignore_index");
            CHECK_OK(gpu_op_run(&o, fg, 2, &y, &nb));
            const float want = 3.5f; /* mean of -x[0,2] and -x[1,0] */
            check_f32(y, &want, 1, "NegativeLogLikelihoodLoss");
            if (y) check_no_readback(nb, y, REC, "NegativeLogLikelihoodLoss");
            wf_tensor_free(y);
            CHECK_OK(gpu_op_run(&o, fi, 2, &y, NULL));
            const float want_ign = 5.0f; /* -1 ignored: -x[1,1] over one weight */
            check_f32(y, &want_ign, 1, "NegativeLogLikelihoodLoss ignore_index");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        wf_tensor *all[] = {x, tb, tg, ti};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
    {
        int64_t xd[4] = {1, 1, 2, 2}, ks[2] = {2, 2};
        float xv[4] = {1, 2, 3, 4};
        int32_t bad[4] = {0, 16, 9, 14}, good[4] = {0, 3, 9, 14}; /* i32: 16 bytes, not the record's 32 */
        wf_tensor *x = tens(WF_F32, 4, xd, xv), *ib = tens(WF_I32, 4, xd, bad), *ig = tens(WF_I32, 4, xd, good),
                  *y = NULL;
        wf_attr at[2] = {wf_attr_ints("kernel_shape", ks, 2), wf_attr_ints("strides", ks, 2)};
        const wf_tensor *fb[2] = {x, ib}, *fg[2] = {x, ig};
        gpu_op o;
        long long nb = 0;
        if (x && ib && ig && gpu_op_new(&o, "MaxUnpool", "mu", fb, 2, at, 2)) {
            expect_index_error(gpu_op_run(&o, fb, 2, &y, NULL),
                               "node 'mu' (MaxUnpool): index 16 (at position 1) is outside the 16 unpooled elements");
            CHECK_OK(gpu_op_run(&o, fg, 2, &y, &nb));
            const float want[16] = {1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0};
            check_f32(y, want, 16, "MaxUnpool");
            if (y) check_no_readback(nb, y, REC, "MaxUnpool");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        wf_tensor *all[] = {x, ib, ig};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
}

/* The same op on CPU:0: the reference a GPU run is compared with (within rtol 1e-5). */
static void check_like_cpu(const wf_tensor *y, const char *op, const wf_tensor *const *x, int n_in, const wf_attr *at,
                           int n_at, const char *what)
{
    gpu_op c;
    wf_tensor *r = NULL;
    if (!y || !op_new_on(&c, "CPU:0", op, "ref", x, n_in, at, n_at)) return;
    CHECK_OK(gpu_op_run(&c, x, n_in, &r, NULL));
    CHECK(r && wf_tensor_size(r) == wf_tensor_size(y) && wf_tensor_size(r) > 0);
    double worst = 0;
    for (int64_t i = 0; r && i < wf_tensor_size(r) && i < wf_tensor_size(y); i++) {
        double a = ((const float *)wf_tensor_data(y))[i], b = ((const float *)wf_tensor_data(r))[i];
        double e = fabs(a - b) / (1e-6 + fabs(b));
        if (e > worst) worst = e;
    }
    if (worst >= 1e-5) fprintf(stderr, "%s: differs from CPU:0 by %g (relative)\n", what, worst);
    CHECK(worst < 1e-5);
    wf_tensor_free(r);
    gpu_op_free(&c);
}

/* RoiAlign's batch indices, RotaryEmbedding's position ids and the RNNs' sequence_lens are checked by a
 * kernel too (the ops' kernels clamp them): a bad one fails the run naming the node, the same session then
 * gives the CPU's (RoiAlign, RNN) or hand-worked (RotaryEmbedding) values, with nothing read back. */
static void test_batch_position_lens_on_device(void)
{
    const long long REC = 32;
    {
        int64_t xd[4] = {2, 1, 2, 2}, rd[2] = {2, 4}, bd[1] = {2};
        float xv[8] = {1, 2, 3, 4, 10, 20, 30, 40}, rv[8] = {0, 0, 1, 1, 0.5f, 0, 1.5f, 1};
        int64_t bad[2] = {0, 2}, good[2] = {1, 0};
        wf_tensor *x = tens(WF_F32, 4, xd, xv), *ro = tens(WF_F32, 2, rd, rv), *bb = tens(WF_I64, 1, bd, bad),
                  *bg = tens(WF_I64, 1, bd, good), *y = NULL;
        wf_attr at[3] = {wf_attr_int("output_height", 2), wf_attr_int("output_width", 2),
                         wf_attr_int("sampling_ratio", 2)};
        const wf_tensor *fb[3] = {x, ro, bb}, *fg[3] = {x, ro, bg};
        gpu_op o;
        long long nb = 0;
        if (x && ro && bb && bg && gpu_op_new(&o, "RoiAlign", "roi", fb, 3, at, 3)) {
            expect_index_error(gpu_op_run(&o, fb, 3, &y, NULL),
                               "node 'roi' (RoiAlign): batch_indices[1] = 2 is outside [0, 2)");
            CHECK_OK(gpu_op_run(&o, fg, 3, &y, &nb));
            check_like_cpu(y, "RoiAlign", fg, 3, at, 3, "RoiAlign");
            if (y) check_no_readback(nb, y, REC, "RoiAlign");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        wf_tensor *all[] = {x, ro, bb, bg};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
    {
        /* x [B 1, H 1, S 2, D 2]; cache rows 0..2 are angles 0, pi/2, pi: cos, sin exact */
        int64_t xd[4] = {1, 1, 2, 2}, cd[2] = {3, 1}, pd[2] = {1, 2};
        float xv[4] = {1, 2, 3, 4}, cv[3] = {1, 0, -1}, sv[3] = {0, 1, 0};
        int64_t bad[2] = {1, 3}, good[2] = {2, 1};
        wf_tensor *x = tens(WF_F32, 4, xd, xv), *cc = tens(WF_F32, 2, cd, cv), *sc = tens(WF_F32, 2, cd, sv),
                  *pb = tens(WF_I64, 2, pd, bad), *pg = tens(WF_I64, 2, pd, good), *y = NULL;
        const wf_tensor *fb[4] = {x, cc, sc, pb}, *fg[4] = {x, cc, sc, pg};
        gpu_op o;
        long long nb = 0;
        if (x && cc && sc && pb && pg && gpu_op_new(&o, "RotaryEmbedding", "rot", fb, 4, NULL, 0)) {
            expect_index_error(gpu_op_run(&o, fb, 4, &y, NULL),
                               "node 'rot' (RotaryEmbedding): position id 3 (at position 1) is outside the caches' 3 "
                               "positions");
            CHECK_OK(gpu_op_run(&o, fg, 4, &y, &nb));
            /* row 2 (cos -1, sin 0): [-1, -2]; row 1 (cos 0, sin 1): [c x1 - s x2, s x1 + c x2] = [-4, 3] */
            const float want[4] = {-1, -2, -4, 3};
            check_f32(y, want, 4, "RotaryEmbedding");
            if (y) check_no_readback(nb, y, REC, "RotaryEmbedding");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        wf_tensor *all[] = {x, cc, sc, pb, pg};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
    {
        /* RNN, X [S 2, B 1, I 1], hidden 1, no bias; sequence_lens i32 (4 bytes) */
        int64_t xd[3] = {2, 1, 1}, wd[3] = {1, 1, 1}, ld[1] = {1};
        float xv[2] = {1, 2}, wv[1] = {0.5f}, rv[1] = {0.25f};
        int32_t bad[1] = {3}, good[1] = {1};
        wf_tensor *x = tens(WF_F32, 3, xd, xv), *w = tens(WF_F32, 3, wd, wv), *r = tens(WF_F32, 3, wd, rv),
                  *lb = tens(WF_I32, 1, ld, bad), *lg = tens(WF_I32, 1, ld, good), *y = NULL;
        wf_attr at = wf_attr_int("hidden_size", 1);
        const wf_tensor *fb[5] = {x, w, r, NULL, lb}, *fg[5] = {x, w, r, NULL, lg};
        gpu_op o;
        long long nb = 0;
        if (x && w && r && lb && lg && gpu_op_new(&o, "RNN", "rnn", fb, 5, &at, 1)) {
            expect_index_error(gpu_op_run(&o, fb, 5, &y, NULL),
                               "node 'rnn' (RNN): sequence_lens[0] = 3 is outside [0, 2]");
            CHECK_OK(gpu_op_run(&o, fg, 5, &y, &nb));
            if (y) {
                CHECK_INT(wf_tensor_size(y), 2);
                /* numpy: y[0] = tanh(0.5 * 1), y[1] = 0 (past the sequence's length) */
                if (wf_tensor_size(y) == 2) {
                    CHECK_NEAR(((const float *)wf_tensor_data(y))[0], tanh(0.5), 1e-6);
                    CHECK_NEAR(((const float *)wf_tensor_data(y))[1], 0.0, 0);
                }
            }
            check_like_cpu(y, "RNN", fg, 5, &at, 1, "RNN");
            if (y) check_no_readback(nb, y, REC, "RNN");
            wf_tensor_free(y);
            gpu_op_free(&o);
        }
        wf_tensor *all[] = {x, w, r, lb, lg};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
    }
}

/* Integer Div's zero divisors and Pow's negative exponents are found by a checking kernel: the run fails
 * naming the node and the element, the same session then gives numpy's values (np.int32 // and ** of
 * positive operands), and a good run reads back only its output and the error record. */
static void test_int_operands_on_device(void)
{
    const long long REC = 32;
    int64_t d[1] = {3};
    int32_t av[3] = {7, 9, 4}, zero[3] = {2, 0, 4}, dv[3] = {2, 3, 4}, neg[3] = {1, -1, 2}, ev[3] = {3, 2, 0};
    wf_tensor *a = tens(WF_I32, 1, d, av), *bz = tens(WF_I32, 1, d, zero), *bd = tens(WF_I32, 1, d, dv),
              *bn = tens(WF_I32, 1, d, neg), *be = tens(WF_I32, 1, d, ev), *y = NULL;
    const wf_tensor *fz[2] = {a, bz}, *fd[2] = {a, bd}, *fn[2] = {a, bn}, *fe[2] = {a, be};
    gpu_op o;
    long long nb = 0;
    if (a && bz && bd && gpu_op_new(&o, "Div", "dv", fz, 2, NULL, 0)) {
        expect_index_error(gpu_op_run(&o, fz, 2, &y, NULL),
                           "node 'dv' (Div): integer division by zero (element 1 of divisor i32[3])");
        CHECK_OK(gpu_op_run(&o, fd, 2, &y, &nb));
        const int32_t want[3] = {3, 3, 1};
        CHECK(y && wf_tensor_size(y) == 3 && !memcmp(wf_tensor_data(y), want, sizeof want));
        if (y) check_no_readback(nb, y, REC, "Div");
        wf_tensor_free(y);
        gpu_op_free(&o);
    }
    if (a && bn && be && gpu_op_new(&o, "Pow", "pw", fn, 2, NULL, 0)) {
        expect_index_error(gpu_op_run(&o, fn, 2, &y, NULL),
                           "node 'pw' (Pow): integers to negative integer powers are not allowed (exponent -1 at "
                           "element 1)");
        CHECK_OK(gpu_op_run(&o, fe, 2, &y, &nb));
        const int32_t want[3] = {343, 81, 1};
        CHECK(y && wf_tensor_size(y) == 3 && !memcmp(wf_tensor_data(y), want, sizeof want));
        if (y) check_no_readback(nb, y, REC, "Pow");
        wf_tensor_free(y);
        gpu_op_free(&o);
    }
    wf_tensor *all[] = {a, bz, bd, bn, be};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wf_tensor_free(all[i]);
}

int main(void)
{
    plugin_path_default();
    wf_status *s = wf_context_new(NULL, &g_ctx);
    if (s) {
        fprintf(stderr, "wf_context_new: %s\n", wf_status_message(s));
        wf_status_free(s);
        return 1;
    }
    if (gpu_index() < 0) {
        const char *why = "the CUDA plugin was not found (built only where nvcc exists)";
        for (int i = 0; i < wf_context_num_plugins(g_ctx); i++) {
            wf_plugin_info p;
            if (!wf_context_plugin(g_ctx, i, &p) && !strcmp(p.name, "cuda") && strcmp(p.status, "not found"))
                why = *p.reason ? p.reason : p.status;
        }
        CHECK_SKIP("test_cuda", "no CUDA device (%s)", why);
        check_skipped_++;
        check_summary();
        wf_context_free(g_ctx);
        return 0;
    }
    RUN_TEST(test_device_listed);
    RUN_TEST(test_mlp_layer);
    RUN_TEST(test_broadcast_add);
    RUN_TEST(test_kernels_match_cpu);
    RUN_TEST(test_mlp_training_matches_cpu);
    RUN_TEST(test_index_errors_on_device);
    RUN_TEST(test_scatter_errors_on_device);
    RUN_TEST(test_target_errors_on_device);
    RUN_TEST(test_batch_position_lens_on_device);
    RUN_TEST(test_int_operands_on_device);
    wf_context_free(g_ctx);
    return check_summary();
}
