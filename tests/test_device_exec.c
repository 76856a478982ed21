/*
 * Running on a backend device (the test backend TESTDEV, host memory behind the device interface):
 * a session pinned to TESTDEV:0 computes what the CPU computes; nodes without a TESTDEV kernel fall
 * back to the CPU with the reason recorded and exactly one copy per (value, destination device);
 * strict placement fails in TensorFlow's words; a spec matching no device is an error listing the
 * devices; a memory limit gives OUT_OF_MEMORY naming the device, the next run works, and the
 * allocator's statistics return to zero.
 */
#include <stdlib.h>

#include "check.h"

static wf_context *ctx;
static wf_graph *g;
static wf_output x, probs;

static void build(void)
{
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[2] = {4, 8}, wd[2] = {8, 6};
    wf_tensor *w;
    CHECK_OK(wf_tensor_new(WF_F32, 2, wd, NULL, &w));
    for (int i = 0; i < 48; i++) ((float *)wf_tensor_data(w))[i] = (float)((i * 7) % 11 - 5) / 8;
    wf_output wc, mm, r, one, a;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, xd, &x));
    CHECK_OK(wf_const(g, "w", w, &wc));
    wf_tensor_free(w);
    CHECK_OK(wf_matmul(g, "mm", x, wc, 0, 0, &mm));
    CHECK_OK(wf_relu(g, "relu", mm, &r));
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1, &one));
    CHECK_OK(wf_add(g, "add", r, one, &a));
    CHECK_OK(wf_softmax(g, "softmax", a, -1, &probs)); /* TESTDEV has no Softmax: falls back */
}

static wf_tensor *input(void)
{
    int64_t xd[2] = {4, 8};
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, xd, NULL, &t));
    for (int i = 0; i < 32; i++) ((float *)wf_tensor_data(t))[i] = (float)(i % 5) - 2;
    return t;
}

static int count_lines(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) n++;
    return n;
}

static void test_same_results_as_cpu(void)
{
    wf_session *cpu, *dev;
    wf_session_options o;
    wf_session_options_init(&o);
    CHECK_OK(wf_session_new(ctx, g, NULL, &cpu));
    o.device = "TESTDEV:0";
    CHECK_OK(wf_session_new(ctx, g, &o, &dev));
    wf_tensor *xt = input(), *a = NULL, *b = NULL;
    wf_feed f = {x, xt};
    CHECK_OK(wf_session_run(cpu, &f, 1, &probs, 1, &a, NULL));
    for (int rep = 0; rep < 3; rep++) {
        CHECK_OK(wf_session_run(dev, &f, 1, &probs, 1, &b, NULL));
        if (a && b)
            for (int i = 0; i < 24; i++)
                CHECK_NEAR(((float *)wf_tensor_data(b))[i], ((float *)wf_tensor_data(a))[i], 1e-6);
        wf_tensor_free(b);
        b = NULL;
    }
    char *text = NULL;
    CHECK_OK(wf_session_placement(dev, &f, 1, &probs, 1, &text));
    if (text) {
        CHECK_STR_CONTAINS(text, "mm: (MatMul): /job:localhost/replica:0/task:0/device:TESTDEV:0");
        CHECK_STR_CONTAINS(text, "w: (Const): /job:localhost/replica:0/task:0/device:TESTDEV:0");
        CHECK_STR_CONTAINS(text, "softmax: (Softmax): /job:localhost/replica:0/task:0/device:CPU:0  # soft placement: no TESTDEV kernel for Softmax (f32)");
        /* x goes to the device once, add's result comes back once */
        CHECK_STR_CONTAINS(text, "x:0/Copy_to_TESTDEV:0: (Copy): /job:localhost/replica:0/task:0/device:TESTDEV:0");
        CHECK_STR_CONTAINS(text, "add:0/Copy_to_CPU:0: (Copy): /job:localhost/replica:0/task:0/device:CPU:0");
        CHECK_INT(count_lines(text, "(Copy)"), 2);
    }
    wf_free(text);
    wf_tensor_free(a);
    wf_tensor_free(xt);
    wf_session_free(cpu);
    wf_session_free(dev);
    wf_memory_stats st;
    CHECK_OK(wf_context_memory_stats(ctx, 1, &st));
    CHECK_INT(st.in_use, 0);
    CHECK_INT(st.n_allocs, 0);
    CHECK(st.peak > 0);
}

static void test_strict_and_unknown(void)
{
    wf_session *s;
    wf_session_options o;
    wf_session_options_init(&o);
    o.device = "TESTDEV:0";
    o.strict_placement = 1;
    CHECK_OK(wf_session_new(ctx, g, &o, &s));
    wf_tensor *xt = input(), *out = NULL;
    wf_feed f = {x, xt};
    CHECK_ERR(wf_session_run(s, &f, 1, &probs, 1, &out, NULL), WF_INVALID_ARGUMENT,
              "Cannot assign a device for operation softmax: Could not satisfy explicit device specification 'TESTDEV:0'");
    wf_session_free(s);
    o.device = "/device:GPU:0";
    o.strict_placement = 0;
    s = NULL;
    wf_status *st = wf_session_new(ctx, g, &o, &s);
    CHECK_INT(wf_status_code(st), WF_NOT_FOUND);
    CHECK_STR_CONTAINS(wf_status_message(st), "device spec '/device:GPU:0' matches no device");
    CHECK_STR_CONTAINS(wf_status_message(st), "/job:localhost/replica:0/task:0/device:TESTDEV:1");
    wf_status_free(st);
    CHECK(s == NULL);
    o.device = "/device:GPU:0/bogus";
    CHECK_ERR(wf_session_new(ctx, g, &o, &s), WF_INVALID_ARGUMENT, "/device:GPU:0/bogus");
    /* a node's own request of a device that does not exist falls back softly, with the reason */
    wf_graph *g2;
    wf_output y, z;
    CHECK_OK(wf_graph_new(&g2));
    CHECK_OK(wf_placeholder(g2, "y", WF_F32, 0, NULL, &y));
    CHECK_OK(wf_graph_set_device(g2, "/device:GPU:0"));
    CHECK_OK(wf_relu(g2, "r", y, &z));
    CHECK_OK(wf_session_new(ctx, g2, NULL, &s));
    float v = -1;
    wf_tensor *yt;
    CHECK_OK(wf_tensor_new(WF_F32, 0, NULL, &v, &yt));
    wf_feed fy = {y, yt};
    char *text = NULL;
    CHECK_OK(wf_session_placement(s, &fy, 1, &z, 1, &text));
    if (text) CHECK_STR_CONTAINS(text, "r: (Relu): /job:localhost/replica:0/task:0/device:CPU:0  # soft placement: requested '/device:GPU:0' matches no device");
    wf_free(text);
    CHECK_OK(wf_session_run(s, &fy, 1, &z, 1, &out, NULL));
    wf_tensor_free(out);
    wf_tensor_free(yt);
    wf_session_free(s);
    wf_graph_free(g2);
    wf_tensor_free(xt);
}

static void test_memory_limit(void)
{
    wf_session *s;
    wf_session_options o;
    wf_session_options_init(&o);
    o.device = "TESTDEV:1";
    CHECK_OK(wf_context_set_memory_limit(ctx, "TESTDEV:1", 64));
    wf_tensor *xt = input(), *out = NULL;
    wf_feed f = {x, xt};
    /* soft placement plans around the limit: what does not fit moves to the CPU, with the reason */
    CHECK_OK(wf_session_new(ctx, g, &o, &s));
    char *text = NULL;
    CHECK_OK(wf_session_placement(s, &f, 1, &probs, 1, &text));
    CHECK_STR_CONTAINS(text, "soft placement: moved to CPU:0 for memory");
    CHECK_STR_CONTAINS(text, "TESTDEV:1 left out: the plan would pass its memory limit");
    wf_free(text);
    CHECK_OK(wf_session_run(s, &f, 1, &probs, 1, &out, NULL));
    wf_tensor_free(out);
    out = NULL;
    wf_session_free(s);
    /* strict placement keeps the request, and running out is a status naming the device (the fetch
     * stops before the Softmax, which TESTDEV cannot run) */
    o.strict_placement = 1;
    wf_output added;
    CHECK_OK(wf_graph_output(g, "add", &added));
    CHECK_OK(wf_session_new(ctx, g, &o, &s));
    wf_status *st = wf_session_run(s, &f, 1, &added, 1, &out, NULL);
    CHECK_INT(wf_status_code(st), WF_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(wf_status_message(st), "out of memory on TESTDEV:1: cannot allocate");
    wf_status_free(st);
    CHECK(out == NULL);
    wf_memory_stats ms;
    CHECK_OK(wf_context_memory_stats(ctx, 2, &ms));
    CHECK_INT(ms.in_use, 0); /* the failed run freed what it held */
    CHECK_INT(ms.limit, 64);
    CHECK_OK(wf_context_set_memory_limit(ctx, "TESTDEV:1", 1 << 20));
    CHECK_OK(wf_session_run(s, &f, 1, &added, 1, &out, NULL));
    wf_tensor_free(out);
    wf_session_free(s);
    CHECK_OK(wf_context_memory_stats(ctx, 2, &ms));
    CHECK_INT(ms.in_use, 0);
    CHECK_ERR(wf_context_set_memory_limit(ctx, "GPU:3", 1 << 20), WF_NOT_FOUND, "'GPU:3' matches no device");
    wf_tensor_free(xt);
}

/* The CPU device counts the host tensors its kernels produce: a limit gives an out-of-memory status
 * naming CPU:0, the failed run frees what it held, and the counts fall back to zero. */
static void test_cpu_memory_limit(void)
{
    wf_session *s;
    CHECK_OK(wf_context_set_memory_limit(ctx, "CPU:0", 16));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *xt = input(), *out = NULL;
    wf_feed f = {x, xt};
    wf_status *st = wf_session_run(s, &f, 1, &probs, 1, &out, NULL);
    CHECK_INT(wf_status_code(st), WF_OUT_OF_MEMORY);
    CHECK_STR_CONTAINS(wf_status_message(st), "on CPU:0");
    CHECK_STR_CONTAINS(wf_status_message(st), "16-byte limit");
    wf_status_free(st);
    CHECK(out == NULL);
    wf_memory_stats ms;
    CHECK_OK(wf_context_memory_stats(ctx, 0, &ms));
    CHECK_INT(ms.in_use, 0);
    CHECK_INT(ms.n_allocs, 0);
    CHECK_INT(ms.limit, 16);
    CHECK_OK(wf_context_set_memory_limit(ctx, "CPU:0", 0));
    CHECK_OK(wf_session_run(s, &f, 1, &probs, 1, &out, NULL));
    CHECK_OK(wf_context_memory_stats(ctx, 0, &ms));
    /* the fetched result is still counted until the caller frees it */
    CHECK(ms.in_use >= wf_tensor_bytes(out));
    CHECK_INT(ms.n_allocs, 1);
    CHECK(ms.peak >= ms.in_use && ms.total_allocs > 1);
    wf_tensor_free(out);
    wf_session_free(s);
    CHECK_OK(wf_context_memory_stats(ctx, 0, &ms));
    CHECK_INT(ms.in_use, 0);
    CHECK_INT(ms.n_allocs, 0);
    CHECK_INT(ms.limit, 0);

    /* a result may outlive its context */
    wf_context *c2;
    CHECK_OK(wf_context_new(NULL, &c2));
    CHECK_OK(wf_session_new(c2, g, NULL, &s));
    CHECK_OK(wf_session_run(s, &f, 1, &probs, 1, &out, NULL));
    wf_session_free(s);
    wf_context_free(c2);
    CHECK(((float *)wf_tensor_data(out))[0] >= 0.0f);
    wf_tensor_free(out);
    wf_tensor_free(xt);
}

int main(void)
{
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR, 1);
    CHECK_OK(wf_context_new(NULL, &ctx));
    build();
    RUN_TEST(test_same_results_as_cpu);
    RUN_TEST(test_strict_and_unknown);
    RUN_TEST(test_memory_limit);
    RUN_TEST(test_cpu_memory_limit);
    wf_graph_free(g);
    wf_context_free(ctx);
    return check_summary();
}
