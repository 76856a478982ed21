/*
 * The CUDA backend end to end: the plugin's device shows up as GPU:0, and a small model (MatMul with a
 * broadcast bias, Relu, Softmax) and a broadcasting Add run on it under strict placement and match a
 * double-precision reference computed here. Without a CUDA device (no driver, no GPU, plugin not built)
 * it prints why and counts itself skipped, so CI machines without a GPU pass.
 */
#include <limits.h>
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
        printf("skipped: no CUDA device (%s)\n", why);
        printf("0 passed, 0 failed, 1 skipped\n");
        wf_context_free(g_ctx);
        return 0;
    }
    RUN_TEST(test_device_listed);
    RUN_TEST(test_mlp_layer);
    RUN_TEST(test_broadcast_add);
    wf_context_free(g_ctx);
    return check_summary();
}
