/*
 * The static memory plan and the session's weights, on CPU:0, OPENCL:0 (PoCL), the test backend
 * TESTDEV:0 and the emulated GPU:0:
 * - a steady-state run allocates nothing: the device allocator's counts (allocations and backend
 *   chunks) are the same after runs 2 and 100, and every run returns what the first did and what a
 *   plain C reference computes;
 * - one device copy of the weights per session: three batch sizes held at once use weights + the
 *   three arenas; with one plan cached, the peak is weights + the largest plan's arena;
 * - LRU eviction frees the evicted plan's arena, and its shape runs again afterwards;
 * - elementwise kernels marked in place (WF__K_INPLACE) write over their input 0: fewer buffers, and
 *   the same results as a double reference (test_in_place, test_in_place_chain); the CPU's views
 *   (Reshape and kin) take their input's buffer and are not copied (test_view_in_place).
 *
 * The model is a chain x[B,N] -> MatMul(W1) -> Add(h,h) -> Relu -> MatMul(W2) -> Add(h,h), every value
 * B*N floats with one reader. Its expected arena is worked out here from the shapes: in a chain a value
 * can take the bytes of the one before its input, so two buffers of B*N*4 bytes hold every value (on
 * an accelerator: the input's copy and the five results; on the CPU: the five results, the fetched last
 * one keeping its buffer). On an accelerator the result is copied back into CPU:0's arena (one buffer).
 * N*4 is a multiple of every device's alignment (256), so no rounding enters the figures. The CPU's
 * weights are the graph's constants, which its statistics do not count.
 */
#include <stdlib.h>

#include "check.h"

#define N 512

static float *w1v, *w2v;

static void fill(float *p, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 37 + seed * 11) % 23 - 11) / 64.0f;
}

static wf_graph *build(wf_output *x, wf_output *y)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[2] = {-1, N}, wd[2] = {N, N};
    wf_tensor *w1, *w2;
    CHECK_OK(wf_tensor_new(WF_F32, 2, wd, w1v, &w1));
    CHECK_OK(wf_tensor_new(WF_F32, 2, wd, w2v, &w2));
    wf_output c1, c2, m1, a1, r, m2;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, xd, x));
    CHECK_OK(wf_const(g, "w1", w1, &c1));
    CHECK_OK(wf_const(g, "w2", w2, &c2));
    wf_tensor_free(w1);
    wf_tensor_free(w2);
    CHECK_OK(wf_matmul(g, "mm1", *x, c1, 0, 0, &m1));
    CHECK_OK(wf_add(g, "double1", m1, m1, &a1));
    CHECK_OK(wf_relu(g, "relu", a1, &r));
    CHECK_OK(wf_matmul(g, "mm2", r, c2, 0, 0, &m2));
    CHECK_OK(wf_add(g, "double2", m2, m2, y));
    return g;
}

static wf_tensor *input(int64_t b)
{
    int64_t d[2] = {b, N};
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, d, NULL, &t));
    if (t) fill(wf_tensor_data(t), b * N, (int)b);
    return t;
}

/* The model in plain C, in double. */
static double *reference(int64_t b)
{
    float *x = malloc(sizeof(float) * (size_t)(b * N));
    double *h = calloc((size_t)(b * N), sizeof(double)), *y = calloc((size_t)(b * N), sizeof(double));
    fill(x, b * N, (int)b);
    for (int64_t i = 0; i < b; i++)
        for (int k = 0; k < N; k++)
            for (int j = 0; j < N; j++) h[i * N + j] += (double)x[i * N + k] * w1v[k * N + j];
    for (int64_t i = 0; i < b * N; i++) h[i] = 2 * h[i] > 0 ? 2 * h[i] : 0;
    for (int64_t i = 0; i < b; i++)
        for (int k = 0; k < N; k++)
            for (int j = 0; j < N; j++) y[i * N + j] += h[i * N + k] * w2v[k * N + j];
    for (int64_t i = 0; i < b * N; i++) y[i] *= 2;
    free(x);
    free(h);
    return y;
}

static int close_to_reference(const wf_tensor *t, int64_t b)
{
    double *ref = reference(b), worst = 0, scale = 0;
    const float *v = wf_tensor_data(t);
    for (int64_t i = 0; i < b * N; i++) {
        double d = fabs(v[i] - ref[i]);
        if (d > worst) worst = d;
        if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    }
    free(ref);
    return worst <= 1e-4 * (scale > 1 ? scale : 1);
}

static int find_device(wf_context *ctx, const char *spec)
{
    wf_device_spec want, have;
    if (wf_device_spec_parse(spec, &want)) return -1;
    for (int i = 0; i < wf_context_num_devices(ctx); i++) {
        wf_device_info di;
        wf_status *s = wf_context_device(ctx, i, &di);
        if (s) {
            wf_status_free(s);
            continue;
        }
        if (!wf_device_spec_parse(di.name, &have) && wf_device_spec_matches(&want, &have)) return i;
    }
    return -1;
}

static wf_memory_stats stats(wf_context *ctx, int dev)
{
    wf_memory_stats m;
    memset(&m, 0, sizeof m);
    CHECK_OK(wf_context_memory_stats(ctx, dev, &m));
    return m;
}

static wf_tensor *run(wf_session *s, wf_output x, wf_output y, int64_t b)
{
    wf_tensor *xt = input(b), *out = NULL;
    wf_feed f = {x, xt};
    CHECK_OK(wf_session_run(s, &f, 1, &y, 1, &out, NULL));
    wf_tensor_free(xt);
    return out;
}

/* Opens a context; -1 (after SKIP) when the device is not there. */
static int open_device(const char *spec, const char *test, wf_context **ctx)
{
    *ctx = NULL;
    CHECK_OK(wf_context_new(NULL, ctx));
    if (!*ctx) return -1;
    int dev = find_device(*ctx, spec);
    if (dev < 0) {
        char why[512] = "";
        for (int i = 0; i < wf_context_num_plugins(*ctx); i++) {
            wf_plugin_info pi;
            wf_status *s = wf_context_plugin(*ctx, i, &pi);
            if (s) {
                wf_status_free(s);
                continue;
            }
            size_t l = strlen(why);
            snprintf(why + l, sizeof why - l, "%s%s: %s%s%s", l ? "; " : "", pi.name, pi.status,
                     pi.reason && *pi.reason ? " - " : "", pi.reason ? pi.reason : "");
        }
        CHECK_SKIP(test, "no device matches %s here (plugins: %s)", spec, *why ? why : "none found");
        wf_context_free(*ctx);
        *ctx = NULL;
    }
    return dev;
}

static const char *g_spec;
static char g_name[64];

static uint64_t arena_of(int64_t b) { return 2 * (uint64_t)b * N * 4; }

/* A session on the device under test with room for `cache` plans (0: the default), or NULL. */
static wf_session *session_on(wf_context *ctx, wf_graph *g, int cache)
{
    wf_session_options o;
    wf_session_options_init(&o);
    o.device = g_spec;
    /* these tests count the buffers of single elementwise kernels working in place: without the
     * generated kernels, which would make one node of each chain (test_in_place checks that too) */
    o.disable_passes = "jit";
    if (cache) o.plan_cache_size = cache;
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(ctx, g, &o, &s));
    return s;
}

/* A constant node holding a copy of data. */
static wf_output constant(wf_graph *g, const char *name, wf_dtype dt, int rank, const int64_t *dims, const void *data)
{
    wf_tensor *t = NULL;
    wf_output o = {0};
    CHECK_OK(wf_tensor_new(dt, rank, dims, data, &t));
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

/* A graph with the placeholder x[?, N] and m = x @ W (W: N x N floats). */
static wf_graph *graph_xw(wf_output *x, const float *w, wf_output *m)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    int64_t xd[2] = {-1, N}, wd[2] = {N, N};
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, xd, x));
    CHECK_OK(wf_matmul(g, "mm1", *x, constant(g, "w1", WF_F32, 2, wd, w), 0, 0, m));
    return g;
}

/* x @ W in double for the input of batch b (input(b)'s values), B*N values to free. */
static double *xw_ref(int64_t b, const float *w)
{
    float *xs = malloc(sizeof(float) * (size_t)(b * N));
    double *r = calloc((size_t)(b * N), sizeof(double));
    fill(xs, b * N, (int)b);
    for (int64_t i = 0; i < b; i++)
        for (int k = 0; k < N; k++)
            for (int j = 0; j < N; j++) r[i * N + j] += (double)xs[i * N + k] * w[k * N + j];
    free(xs);
    return r;
}

/* Three runs at batch b: how many outputs were off want (B*N values) by more than tol*(1+|want|). */
static int runs_off(wf_session *s, wf_output x, wf_output y, int64_t b, const double *want, double tol)
{
    int bad = 0;
    for (int rep = 0; s && rep < 3; rep++) {
        wf_tensor *t = run(s, x, y, b);
        if (!t) return -1;
        const float *out = wf_tensor_data(t);
        for (int64_t i = 0; i < b * N; i++)
            if (fabs(out[i] - want[i]) > tol * (1 + fabs(want[i]))) bad++;
        wf_tensor_free(t);
    }
    return bad;
}

/* One run at `batch`, checked against the double reference. */
static void run_checked(wf_session *s, wf_output x, wf_output y, int64_t batch)
{
    wf_tensor *t = run(s, x, y, batch);
    CHECK(t && close_to_reference(t, batch));
    wf_tensor_free(t);
}

static void test_steady_state(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    wf_output x, y;
    wf_graph *g = build(&x, &y);
    wf_session *s = session_on(ctx, g, 0);
    if (!s) goto out;
    wf_tensor *first = run(s, x, y, 2);
    CHECK(first && close_to_reference(first, 2));
    wf_memory_stats d2 = {0}, c2 = {0}, d100, c100;
    int same = 1;
    for (int r = 2; r <= 100 && first; r++) {
        wf_tensor *t = run(s, x, y, 2);
        if (!t || memcmp(wf_tensor_data(t), wf_tensor_data(first), wf_tensor_bytes(first))) same = 0;
        wf_tensor_free(t);
        if (r == 2) d2 = stats(ctx, dev), c2 = stats(ctx, 0);
    }
    d100 = stats(ctx, dev);
    c100 = stats(ctx, 0);
    CHECK(same);
    CHECK_INT(d100.total_allocs, d2.total_allocs);
    CHECK_INT(d100.chunk_allocs, d2.chunk_allocs);
    CHECK_INT(c100.total_allocs, c2.total_allocs);
    CHECK_INT(d100.fallback_allocs, 0);
    CHECK_INT(d100.arena_bytes, arena_of(2));
    if (dev != 0) CHECK_INT(c100.arena_bytes, arena_of(2) / 2);
    printf("%s steady state: allocations after run 2: %lld (chunks %lld), after run 100: %lld (chunks %lld); "
           "CPU:0 %lld -> %lld; arena %llu bytes, in use %llu bytes, fallbacks %lld\n",
           g_spec, (long long)d2.total_allocs, (long long)d2.chunk_allocs, (long long)d100.total_allocs,
           (long long)d100.chunk_allocs, (long long)c2.total_allocs, (long long)c100.total_allocs,
           (unsigned long long)d100.arena_bytes, (unsigned long long)d100.in_use, (long long)d100.fallback_allocs);
    wf_tensor_free(first);
out:
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* Three batch sizes in one session: one copy of the weights, and each plan's own arena. */
static void test_weights_once(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    uint64_t weights = dev == 0 ? 0 : 2ull * N * N * 4;
    wf_output x, y;
    wf_graph *g = build(&x, &y);
    /* one plan cached at a time: the peak is the weights and the largest arena */
    wf_session *s = session_on(ctx, g, 1);
    int64_t batches[3] = {1, 4, 2};
    for (int i = 0; s && i < 3; i++)
        for (int rep = 0; rep < 2; rep++) run_checked(s, x, y, batches[i]);
    wf_memory_stats m = stats(ctx, dev);
    CHECK_INT(m.peak, weights + arena_of(4));
    CHECK_INT(m.in_use, weights + arena_of(2));
    printf("%s one plan cached, batches 1, 4, 2: peak %llu bytes = weights %llu + largest arena %llu; in use %llu\n",
           g_spec, (unsigned long long)m.peak, (unsigned long long)weights, (unsigned long long)arena_of(4),
           (unsigned long long)m.in_use);
    wf_session_free(s);
    s = NULL;
    m = stats(ctx, dev);
    CHECK_INT(m.in_use, 0); /* the session's weights and arenas go with it */

    /* three plans cached: still one copy of the weights */
    s = session_on(ctx, g, 3);
    for (int i = 0; s && i < 3; i++) run_checked(s, x, y, batches[i]);
    m = stats(ctx, dev);
    CHECK_INT(m.in_use, weights + arena_of(1) + arena_of(2) + arena_of(4));
    printf("%s three plans cached: in use %llu bytes = weights %llu + arenas %llu + %llu + %llu\n", g_spec,
           (unsigned long long)m.in_use, (unsigned long long)weights, (unsigned long long)arena_of(1),
           (unsigned long long)arena_of(4), (unsigned long long)arena_of(2));
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* LRU eviction frees the evicted plan's arena, never the weights; the evicted shape runs again. */
static void test_lru_eviction(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    uint64_t weights = dev == 0 ? 0 : 2ull * N * N * 4;
    wf_output x, y;
    wf_graph *g = build(&x, &y);
    wf_session *s = session_on(ctx, g, 2);
    if (!s) goto out;
    run_checked(s, x, y, 1);
    run_checked(s, x, y, 2);
    wf_memory_stats before = stats(ctx, dev);
    CHECK_INT(before.in_use, weights + arena_of(1) + arena_of(2));
    run_checked(s, x, y, 4); /* evicts batch 1's plan */
    wf_memory_stats after = stats(ctx, dev);
    CHECK_INT(after.in_use, weights + arena_of(2) + arena_of(4));
    CHECK_INT(after.arena_bytes, arena_of(2) + arena_of(4));
    run_checked(s, x, y, 1); /* built again; evicts batch 2's */
    wf_memory_stats again = stats(ctx, dev);
    CHECK_INT(again.in_use, weights + arena_of(4) + arena_of(1));
    printf("%s LRU of 2: in use %llu (batches 1, 2) -> %llu (4 evicts 1) -> %llu (1 again evicts 2)\n", g_spec,
           (unsigned long long)before.in_use, (unsigned long long)after.in_use, (unsigned long long)again.in_use);
out:
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* A view of an arena value outlives the value's last reader: y = relu(v) + v with v = Identity(x @ W1).
 * The plan gives relu's output the bytes of x @ W1 (whose only reader, Identity, has run); v (a view
 * of them on TESTDEV, a reference on the CPU) must have been given bytes of its own, or the Add reads
 * relu(v) twice. */
static void test_view_alias(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    wf_output x, m1, r, y;
    wf_graph *g = graph_xw(&x, w1v, &m1);
    wf_node *id = NULL;
    CHECK_OK(wf_op(g, "Identity", "view", &m1, 1, NULL, 0, &id));
    wf_output v = wf_out(id, 0);
    CHECK_OK(wf_relu(g, "relu", v, &r));
    CHECK_OK(wf_add(g, "sum", r, v, &y));
    wf_session *s = session_on(ctx, g, 0);
    double *want = xw_ref(2, w1v);
    for (int i = 0; i < 2 * N; i++) want[i] += want[i] > 0 ? want[i] : 0; /* relu(m) + m */
    CHECK_INT(runs_off(s, x, y, 2, want, 1e-3), 0);
    free(want);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* A view in place (CPU:0, whose Reshape, Flatten, Squeeze and Unsqueeze kernels are WF__K_INPLACE):
 * m = x @ W1, v = Reshape(m, [-1, N/2]), r = Relu(v), y = Reshape(r, [-1, N]), fetched. Each node is the
 * last reader of its input, so every value takes m's buffer: one buffer of B*N*4 bytes, and the views
 * need no copy. Before, the executor copied each view of an arena value into a slot of its own, which the
 * plan had given another buffer (3 in all). The values are checked against relu(x @ W1) in double. */
static void test_view_in_place(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    wf_output x, m, v, r, y;
    wf_graph *g = graph_xw(&x, w1v, &m);
    CHECK_OK(wf_reshape(g, "halves", m, 2, (int64_t[]){-1, N / 2}, &v));
    CHECK_OK(wf_relu(g, "relu", v, &r));
    CHECK_OK(wf_reshape(g, "rows", r, 2, (int64_t[]){-1, N}, &y));
    wf_session *s = session_on(ctx, g, 0);
    const int64_t B = 2;
    double *want = xw_ref(B, w1v);
    for (int64_t i = 0; i < B * N; i++) want[i] = want[i] > 0 ? want[i] : 0;
    CHECK_INT(runs_off(s, x, y, B, want, 1e-3), 0);
    wf_memory_stats d = stats(ctx, dev);
    CHECK_INT(d.arena_bytes, (uint64_t)B * N * 4);
    printf("%s views in place: arena %llu bytes = %llu buffer(s) of %llu\n", g_spec, (unsigned long long)d.arena_bytes,
           (unsigned long long)(d.arena_bytes / (uint64_t)(B * N * 4)), (unsigned long long)B * N * 4);
    free(want);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* Working in place: m = x @ W1, q = m * m, r = relu(q), s = sqrt(r), y = s + m. Relu, Sqrt and the Add
 * take the bytes of their input 0 (every backend's elementwise kernels allow it), while m stays live to
 * the end: two buffers of B*N*4 bytes hold every value (on an accelerator the input's copy and q share
 * one), where a plan without in-place outputs needs three (r would need one while q and m are
 * live). Mul(m, m) reads m twice and is not in place, nor is any node whose input has a later reader:
 * the results against a double reference catch an output written over a value still to be read. */
static void test_in_place(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    wf_output x, m, q, r, sq, y;
    wf_graph *g = graph_xw(&x, w1v, &m);
    CHECK_OK(wf_mul(g, "square", m, m, &q));
    CHECK_OK(wf_relu(g, "relu", q, &r));
    CHECK_OK(wf_unary(g, "Sqrt", "sqrt", r, &sq));
    CHECK_OK(wf_add(g, "plus_m", sq, m, &y));
    wf_session *s = session_on(ctx, g, 0);
    const int64_t B = 2;
    double *want = xw_ref(B, w1v);
    for (int64_t i = 0; i < B * N; i++) want[i] += fabs(want[i]); /* sqrt(relu(m * m)) + m */
    CHECK_INT(runs_off(s, x, y, B, want, 1e-3), 0);
    wf_memory_stats d = stats(ctx, dev);
    CHECK_INT(d.arena_bytes, 2 * (uint64_t)B * N * 4);
    printf("%s in place: arena %llu bytes = 2 buffers of %llu (3 without in-place outputs)\n", g_spec,
           (unsigned long long)d.arena_bytes, (unsigned long long)B * N * 4);
    wf_session_free(s);
    /* With the generated kernels (level 2's "jit", on the CPU), the four elementwise ops are one node
     * that reads m and writes y over it: one buffer. */
    if (!strcmp(g_spec, "CPU:0")) {
        wf_session_options o;
        wf_session_options_init(&o);
        o.device = g_spec;
        s = NULL;
        CHECK_OK(wf_session_new(ctx, g, &o, &s));
        CHECK_INT(runs_off(s, x, y, B, want, 1e-3), 0);
        char *pl = NULL;
        wf_tensor *xt = NULL;
        CHECK_OK(wf_tensor_new(WF_F32, 2, (int64_t[]){B, N}, NULL, &xt));
        wf_feed f = {x, xt};
        if (xt) CHECK_OK(wf_session_placement(s, &f, 1, &y, 1, &pl));
        if (pl) CHECK_STR_CONTAINS(pl, "plus_m: (FusedElementwise+Mul+Relu+Sqrt+Add)");
        wf_free(pl);
        wf_tensor_free(xt);
        d = stats(ctx, dev);
        CHECK_INT(d.arena_bytes, (uint64_t)B * N * 4);
        printf("%s in place, generated kernel: arena %llu bytes = 1 buffer\n", g_spec, (unsigned long long)d.arena_bytes);
        wf_session_free(s);
    }
    free(want);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* More kernels in place, on every device whose kernels have them: m = x @ W1, w = x @ W2,
 * a = sigmoid(m), t = tanh(a), n = -t, u = Sum(n), b = BiasAdd(u, bias), p = b * w, y = Where(c, p, k)
 * with c (bool) and bias, k (f32) constants of N elements broadcast over the rows. Sigmoid, Tanh, Neg,
 * the one-input Sum (a copy, which the kernel must then skip: OpenCL has no overlapping copies),
 * BiasAdd and the Mul each take the bytes of their input 0 (its only reader); the Where cannot (its input 0 is the
 * bool condition, a constant) and takes a buffer that is dead by then. The arena, in buffers of
 * B*N*4 bytes (one per f32 value of [B, N]):
 * - CPU:0 (x is the feed itself): m -> 1, w -> 2 (m is live), a, t, n, u, b, p -> 1 (in place), y -> 2
 *   (w's only reader, the Mul, has run): 2 buffers. Without in-place outputs a needs a 3rd (m and w
 *   are live), and t, n, u, b, p alternate between it and m's.
 * - an accelerator: x's copy -> 1, m -> 2, w -> 3 (x's copy is read by the second MatMul), a ... p -> 2,
 *   y -> 1 or 3 (both dead): 3 buffers; without in-place outputs a needs a 4th (x's copy still has
 *   the second MatMul to come, which is no ancestor of a). The result's copy back takes one buffer
 *   in CPU:0's arena.
 * The results are checked against a double reference, so an output written over a value still to be
 * read shows. TESTDEV:0 has none of these kernels but Mul (its plugin links no libm), so main() runs
 * this on the other three devices only. */
static void test_in_place_chain(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    int64_t wd[2] = {N, N}, vd[1] = {N};
    float bias[N], kv[N];
    uint8_t cv[N];
    for (int j = 0; j < N; j++) {
        bias[j] = (float)(j % 7 - 3) / 8.0f;
        kv[j] = (float)j / N - 0.5f;
        cv[j] = j % 3 != 0;
    }
    wf_output x, m, w, a, t, n, b, p, y;
    wf_graph *g = graph_xw(&x, w1v, &m);
    wf_output cb = constant(g, "bias", WF_F32, 1, vd, bias), ck = constant(g, "k", WF_F32, 1, vd, kv),
              cc = constant(g, "c", WF_BOOL, 1, vd, cv);
    CHECK_OK(wf_matmul(g, "mm2", x, constant(g, "w2", WF_F32, 2, wd, w2v), 0, 0, &w));
    CHECK_OK(wf_unary(g, "Sigmoid", "sigmoid", m, &a));
    CHECK_OK(wf_unary(g, "Tanh", "tanh", a, &t));
    CHECK_OK(wf_unary(g, "Neg", "neg", t, &n));
    wf_node *sn = NULL;
    CHECK_OK(wf_op(g, "Sum", "sum_of_one", &n, 1, NULL, 0, &sn)); /* a copy of n: skipped in place */
    CHECK_OK(wf_bias_add(g, "bias_add", wf_out(sn, 0), cb, &b));
    CHECK_OK(wf_mul(g, "times_w", b, w, &p));
    wf_output wi[3] = {cc, p, ck};
    wf_node *wn = NULL;
    CHECK_OK(wf_op(g, "Where", "where", wi, 3, NULL, 0, &wn));
    y = wf_out(wn, 0);
    wf_session *s = session_on(ctx, g, 0);
    const int64_t B = 2;
    double *want = xw_ref(B, w1v), *ww = xw_ref(B, w2v);
    for (int64_t i = 0; i < B * N; i++) {
        int64_t j = i % N;
        double pv = (-tanh(1 / (1 + exp(-want[i]))) + bias[j]) * ww[i];
        want[i] = cv[j] ? pv : kv[j];
    }
    CHECK_INT(runs_off(s, x, y, B, want, 1e-4), 0);
    uint64_t buf = (uint64_t)B * N * 4, bufs = dev == 0 ? 2 : 3;
    wf_memory_stats d = stats(ctx, dev);
    CHECK_INT(d.arena_bytes, bufs * buf);
    if (dev != 0) CHECK_INT(stats(ctx, 0).arena_bytes, buf);
    printf("%s in place chain: arena %llu bytes = %llu buffers of %llu (%llu without in-place outputs)\n", g_spec,
           (unsigned long long)d.arena_bytes, (unsigned long long)bufs, (unsigned long long)buf,
           (unsigned long long)bufs + 1);
    free(want);
    free(ww);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* A variable's next value (ApplyAdam's or any kernel's output read by an Assign that commits it) is
 * allocated for itself, not planned into the arena: the Assign passes its buffer on, and from the arena
 * it was copied out at every run (a fallback allocation each time; ResNet-18's training step copied its
 * 135 MB of weights and Adam slots so). The value, and a value computed from it, stay right. */
static void test_assign_not_planned(void)
{
    wf_context *ctx;
    int dev = open_device(g_spec, g_name, &ctx);
    if (dev < 0) return;
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {300};
    float v0[300];
    for (int i = 0; i < 300; i++) v0[i] = (float)(i % 7) - 3.0f;
    wf_tensor *init = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, d, v0, &init));
    wf_output v, three, one, y, a, w;
    CHECK_OK(wf_variable(g, "v", init, &v));
    CHECK_OK(wf_const_scalar(g, NULL, WF_F32, 3, &three));
    CHECK_OK(wf_const_scalar(g, NULL, WF_F32, 1, &one));
    CHECK_OK(wf_mul(g, "y", v, three, &y));
    CHECK_OK(wf_assign(g, "a", v, y, &a));
    CHECK_OK(wf_add(g, "w", y, one, &w));
    wf_session *s = session_on(ctx, g, 0);
    int bad = 0;
    float scale = 1;
    for (int r = 0; s && r < 4; r++) {
        wf_tensor *out = NULL;
        wf_run_options ro = {.targets = &a, .n_targets = 1};
        CHECK_OK(wf_session_run(s, NULL, 0, &w, 1, &out, &ro));
        scale *= 3;
        for (int i = 0; out && i < 300; i++) bad += ((float *)wf_tensor_data(out))[i] != v0[i] * scale + 1;
        bad += !out;
        wf_tensor_free(out);
    }
    wf_tensor *vt = NULL;
    if (s) CHECK_OK(wf_session_get_variable(s, "v", &vt));
    for (int i = 0; vt && i < 300; i++) bad += ((float *)wf_tensor_data(vt))[i] != v0[i] * scale;
    CHECK_INT(bad, 0);
    CHECK_INT(stats(ctx, dev).fallback_allocs, 0);
    wf_tensor_free(vt);
    wf_tensor_free(init);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
}

/* A convolution with a fused residual (lowering's "residual") writes its sum over the residual's buffer:
 * a = conv1(x), b = conv2(a), y = relu(conv3(b) + a), all [1, 16, 8, 8] (4096 bytes) on CPU:0. a's other
 * reader (conv2) runs before conv3, so y takes a's buffer: 2 buffers (a, b). Without the fusion, conv3's
 * result needs a third (a is still live), which the Add and Relu then work in. Values against a double
 * reference, NaN included, on both plans. */
static void test_residual_in_place(void)
{
    enum { C = 16, S = 8, E = C * S * S };
    static float wv[3][C * C], xv[E];
    for (int k = 0; k < 3; k++) fill(wv[k], C * C, k + 3);
    fill(xv, E, 9);
    xv[5] = NAN;
    static double a[E], b[E], c[E], want[E];
    double *ins[3] = {NULL, a, b}, *outs[3] = {a, b, c};
    for (int k = 0; k < 3; k++)
        for (int o = 0; o < C; o++)
            for (int p = 0; p < S * S; p++) {
                double acc = 0;
                for (int i = 0; i < C; i++) acc += (double)wv[k][o * C + i] * (k ? ins[k][i * S * S + p] : xv[i * S * S + p]);
                outs[k][o * S * S + p] = acc;
            }
    for (int i = 0; i < E; i++) want[i] = isnan(c[i] + a[i]) ? NAN : c[i] + a[i] > 0 ? c[i] + a[i] : 0;
    uint64_t arena[2] = {0, 0};
    for (int fused = 1; fused >= 0; fused--) {
        wf_context *ctx = NULL;
        CHECK_OK(wf_context_new(NULL, &ctx));
        if (!ctx) return;
        wf_graph *g = NULL;
        CHECK_OK(wf_graph_new(&g));
        wf_output x, v, y, t;
        int64_t xd[4] = {1, C, S, S}, wd[4] = {C, C, 1, 1};
        CHECK_OK(wf_placeholder(g, "x", WF_F32, 4, xd, &x));
        v = x;
        wf_output av = {0};
        for (int k = 0; k < 3; k++) {
            char nm[8];
            snprintf(nm, sizeof nm, "w%d", k);
            wf_output in[2] = {v, constant(g, nm, WF_F32, 4, wd, wv[k])};
            snprintf(nm, sizeof nm, "c%d", k);
            CHECK_OK(wf_op(g, "Conv2D", nm, in, 2, NULL, 0, &v.node));
            v.index = 0;
            if (k == 0) av = v;
        }
        wf_output ad[2] = {v, av};
        CHECK_OK(wf_op(g, "Add", "add", ad, 2, NULL, 0, &t.node));
        t.index = 0;
        CHECK_OK(wf_relu(g, "relu", t, &y));
        wf_session_options o;
        wf_session_options_init(&o);
        o.device = "CPU:0";
        o.disable_passes = fused ? "jit" : "jit,residual";
        wf_session *s = NULL;
        CHECK_OK(wf_session_new(ctx, g, &o, &s));
        wf_tensor *xt = NULL, *out = NULL;
        CHECK_OK(wf_tensor_new(WF_F32, 4, xd, xv, &xt));
        wf_feed f = {x, xt};
        for (int rep = 0; s && xt && rep < 2; rep++) {
            wf_tensor_free(out);
            out = NULL;
            CHECK_OK(wf_session_run(s, &f, 1, &y, 1, &out, NULL));
        }
        int bad = 0;
        for (int i = 0; out && i < E; i++) {
            float gv = ((const float *)wf_tensor_data(out))[i];
            bad += isnan(want[i]) ? !isnan(gv) : fabs(gv - want[i]) > 1e-4 * (1 + fabs(want[i]));
        }
        CHECK(out != NULL);
        CHECK_INT(bad, 0);
        arena[fused] = stats(ctx, 0).arena_bytes;
        wf_tensor_free(out);
        wf_tensor_free(xt);
        wf_session_free(s);
        wf_graph_free(g);
        wf_context_free(ctx);
    }
    CHECK_INT(arena[1], 2 * E * 4);
    CHECK(arena[0] > arena[1]);
    printf("CPU:0 residual in place: arena %llu bytes = 2 buffers of %d (%llu bytes unfused)\n",
           (unsigned long long)arena[1], E * 4, (unsigned long long)arena[0]);
}

/* A CPU:0 session of g at opt level `level`, x (dims xd, values xv) fed, fetch[0 .. nf - 1] into out[],
 * run twice (the second run is the steady state); returns CPU:0's arena bytes while the session lives.
 * The session is freed, the outputs are the caller's. */
static uint64_t run_twice(wf_context *ctx, wf_graph *g, int level, wf_output x, const int64_t *xd, const float *xv,
                          const wf_output *fetch, int nf, wf_tensor **out)
{
    wf_session_options o;
    wf_session_options_init(&o);
    o.device = "CPU:0";
    o.opt_level = level;
    wf_session *s = NULL;
    CHECK_OK(wf_session_new(ctx, g, &o, &s));
    wf_tensor *xt = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 4, xd, xv, &xt));
    wf_feed f = {x, xt};
    for (int j = 0; j < nf; j++) out[j] = NULL;
    for (int rep = 0; s && xt && rep < 2; rep++) {
        for (int j = 0; j < nf; j++) wf_tensor_free(out[j]), out[j] = NULL;
        CHECK_OK(wf_session_run(s, &f, 1, fetch, nf, out, NULL));
    }
    uint64_t arena = stats(ctx, 0).arena_bytes;
    wf_tensor_free(xt);
    wf_session_free(s);
    return arena;
}

/* A Concat's inputs laid out in its output (WF__K_PARTS_IN_PLACE): three 1x1 convolutions of x [B, 16,
 * S, S] with 16, 16 and 32 output channels, concatenated along the channels, then Relu. At batch 1 the
 * convolutions write straight into their places in the Concat's buffer and the Relu works in place
 * over it: the arena is that one buffer (64 x S x S floats), at level 2 (plain NCHW) and at level 3
 * (the channel-blocked layout, whole blocks per part). Not in place, and still right: at batch 2 (the
 * parts interleave in the output) and when a part has a second reader (here a Neg of the first
 * convolution, also fetched), where the arena needs a buffer per live part as well. Every result
 * against a double reference, a NaN in x included. */
static void test_concat_in_place(void)
{
    enum { CI = 16, S = 8, CT = 64 };
    static const int co[3] = {16, 16, 32};
    static float wv[3][32 * CI], xv[2 * CI * S * S];
    for (int k = 0; k < 3; k++) fill(wv[k], co[k] * CI, k + 5);
    fill(xv, 2 * CI * S * S, 4);
    xv[7] = NAN;
    for (int level = 2; level <= 3; level++)
        for (int variant = 0; variant < 3; variant++) { /* 0: in place, 1: batch 2, 2: a second reader */
            int64_t B = variant == 1 ? 2 : 1;
            wf_context *ctx = NULL;
            CHECK_OK(wf_context_new(NULL, &ctx));
            if (!ctx) return;
            wf_graph *g = NULL;
            CHECK_OK(wf_graph_new(&g));
            wf_output x, parts[3], cat, y, neg = {0};
            int64_t xd[4] = {B, CI, S, S};
            CHECK_OK(wf_placeholder(g, "x", WF_F32, 4, xd, &x));
            for (int k = 0; k < 3; k++) {
                char nm[8];
                int64_t wd[4] = {co[k], CI, 1, 1};
                snprintf(nm, sizeof nm, "w%d", k);
                wf_output in[2] = {x, constant(g, nm, WF_F32, 4, wd, wv[k])};
                snprintf(nm, sizeof nm, "c%d", k);
                CHECK_OK(wf_op(g, "Conv2D", nm, in, 2, NULL, 0, &parts[k].node));
                parts[k].index = 0;
            }
            wf_attr ax = wf_attr_int("axis", 1);
            CHECK_OK(wf_op(g, "Concat", "cat", parts, 3, &ax, 1, &cat.node));
            cat.index = 0;
            CHECK_OK(wf_relu(g, "relu", cat, &y));
            if (variant == 2) CHECK_OK(wf_unary(g, "Neg", "neg", parts[0], &neg));
            wf_tensor *out[2] = {NULL, NULL};
            wf_output fetch[2] = {y, neg};
            uint64_t arena = run_twice(ctx, g, level, x, xd, xv, fetch, variant == 2 ? 2 : 1, out);
            int bad = 0;
            for (int64_t n = 0; out[0] && n < B; n++)
                for (int c = 0, base = 0, k = 0; c < CT; c++) {
                    if (c - base == co[k]) base += co[k], k++;
                    for (int p = 0; p < S * S; p++) {
                        double acc = 0;
                        for (int i = 0; i < CI; i++) acc += (double)wv[k][(c - base) * CI + i] * xv[(n * CI + i) * S * S + p];
                        double want = isnan(acc) ? NAN : acc > 0 ? acc : 0;
                        float gv = ((const float *)wf_tensor_data(out[0]))[(n * CT + c) * S * S + p];
                        bad += isnan(want) ? !isnan(gv) : fabs(gv - want) > 1e-4 * (1 + fabs(want));
                        if (variant == 2 && k == 0 && out[1]) {
                            float nv = ((const float *)wf_tensor_data(out[1]))[c * S * S + p];
                            bad += isnan(acc) ? !isnan(nv) : fabs(nv + acc) > 1e-4 * (1 + fabs(acc));
                        }
                    }
                }
            CHECK(out[0] != NULL);
            CHECK_INT(bad, 0);
            uint64_t one = (uint64_t)B * CT * S * S * 4;
            if (variant == 0) CHECK_INT(arena, one);
            else CHECK(arena > one);
            printf("CPU:0 Concat at level %d, %s: arena %llu bytes (the result: %llu)\n", level,
                   variant == 0 ? "in place" : variant == 1 ? "batch 2" : "a part with a second reader",
                   (unsigned long long)arena, (unsigned long long)one);
            for (int j = 0; j < 2; j++) wf_tensor_free(out[j]);
            wf_graph_free(g);
            wf_context_free(ctx);
        }
}

/* A chain of Concats whose inputs are prefixes of the last one's (DenseNet's dense block): p = conv(x)
 * [16 ch], c1 = Concat(p), f1 = conv(relu(c1)) [16], c2 = Concat(p, f1), f2 = conv(c2) [32],
 * c3 = Concat(p, f1, f2), y = relu(c3). p, f1 and f2 are written in c3's buffer, c1 and c2 are its first
 * bytes, y is in place over c3: the arena is that buffer (64 x S x S floats) and one for relu(c1),
 * which cannot take c1's bytes (c1 is part of c3). At levels 2 and 3, against a double reference with
 * a NaN in x. */
static void test_concat_chain_in_place(void)
{
    enum { CI = 16, S = 8, P = S * S };
    static float wa[16 * CI], wb[16 * 16], wc[32 * 32], xv[CI * P];
    fill(wa, 16 * CI, 7);
    fill(wb, 16 * 16, 8);
    fill(wc, 32 * 32, 9);
    fill(xv, CI * P, 10);
    xv[9] = NAN;
    static double pv[16 * P], f1[16 * P], f2[32 * P];
    for (int o = 0; o < 16; o++)
        for (int q = 0; q < P; q++) {
            double a = 0;
            for (int i = 0; i < CI; i++) a += (double)wa[o * CI + i] * xv[i * P + q];
            pv[o * P + q] = a;
        }
    for (int o = 0; o < 16; o++)
        for (int q = 0; q < P; q++) {
            double a = 0;
            for (int i = 0; i < 16; i++) a += (double)wb[o * 16 + i] * (isnan(pv[i * P + q]) ? NAN : pv[i * P + q] > 0 ? pv[i * P + q] : 0);
            f1[o * P + q] = a;
        }
    for (int o = 0; o < 32; o++)
        for (int q = 0; q < P; q++) {
            double a = 0;
            for (int i = 0; i < 32; i++) a += (double)wc[o * 32 + i] * (i < 16 ? pv[i * P + q] : f1[(i - 16) * P + q]);
            f2[o * P + q] = a;
        }
    for (int level = 2; level <= 3; level++) {
        wf_context *ctx = NULL;
        CHECK_OK(wf_context_new(NULL, &ctx));
        if (!ctx) return;
        wf_graph *g = NULL;
        CHECK_OK(wf_graph_new(&g));
        int64_t xd[4] = {1, CI, S, S};
        wf_output x, p, c1, r1, fo1, c2, fo2, c3, y;
        CHECK_OK(wf_placeholder(g, "x", WF_F32, 4, xd, &x));
        wf_attr ax = wf_attr_int("axis", 1);
        wf_output in[3];
        in[0] = x, in[1] = constant(g, "wa", WF_F32, 4, (int64_t[]){16, CI, 1, 1}, wa);
        CHECK_OK(wf_op(g, "Conv2D", "p", in, 2, NULL, 0, &p.node));
        p.index = 0;
        CHECK_OK(wf_op(g, "Concat", "c1", &p, 1, &ax, 1, &c1.node));
        c1.index = 0;
        CHECK_OK(wf_relu(g, "r1", c1, &r1));
        in[0] = r1, in[1] = constant(g, "wb", WF_F32, 4, (int64_t[]){16, 16, 1, 1}, wb);
        CHECK_OK(wf_op(g, "Conv2D", "f1", in, 2, NULL, 0, &fo1.node));
        fo1.index = 0;
        in[0] = p, in[1] = fo1;
        CHECK_OK(wf_op(g, "Concat", "c2", in, 2, &ax, 1, &c2.node));
        c2.index = 0;
        in[0] = c2, in[1] = constant(g, "wc", WF_F32, 4, (int64_t[]){32, 32, 1, 1}, wc);
        CHECK_OK(wf_op(g, "Conv2D", "f2", in, 2, NULL, 0, &fo2.node));
        fo2.index = 0;
        in[0] = p, in[1] = fo1, in[2] = fo2;
        CHECK_OK(wf_op(g, "Concat", "c3", in, 3, &ax, 1, &c3.node));
        c3.index = 0;
        CHECK_OK(wf_relu(g, "y", c3, &y));
        wf_tensor *out = NULL;
        uint64_t arena = run_twice(ctx, g, level, x, xd, xv, &y, 1, &out);
        int bad = 0;
        for (int c = 0; out && c < 64; c++)
            for (int q = 0; q < P; q++) {
                double v = c < 16 ? pv[c * P + q] : c < 32 ? f1[(c - 16) * P + q] : f2[(c - 32) * P + q];
                double want = isnan(v) ? NAN : v > 0 ? v : 0;
                float gv = ((const float *)wf_tensor_data(out))[c * P + q];
                bad += isnan(want) ? !isnan(gv) : fabs(gv - want) > 1e-4 * (1 + fabs(want));
            }
        CHECK(out != NULL);
        CHECK_INT(bad, 0);
        CHECK_INT(arena, (64 + 16) * P * 4);
        printf("CPU:0 Concat chain at level %d: arena %llu bytes (c3's buffer %d + relu(c1)'s %d)\n", level,
               (unsigned long long)arena, 64 * P * 4, 16 * P * 4);
        wf_tensor_free(out);
        wf_graph_free(g);
        wf_context_free(ctx);
    }
}

int main(void)
{
    /* the emulated CUDA plugin first, then the OpenCL plugin of this build, then the test backend */
    char path[4096];
    snprintf(path, sizeof path, "%s/cudaemu:%s:%s", WEFT_BUILD_DIR, WEFT_BUILD_DIR, WEFT_TEST_PLUGIN_DIR);
    setenv("WEFT_PLUGIN_PATH", path, 1);
    w1v = malloc(sizeof(float) * N * N);
    w2v = malloc(sizeof(float) * N * N);
    fill(w1v, (int64_t)N * N, 1);
    fill(w2v, (int64_t)N * N, 2);
    const char *specs[] = {"CPU:0", "OPENCL:0", "TESTDEV:0", "GPU:0"};
    for (int i = 0; i < 4; i++) {
        g_spec = specs[i];
        snprintf(g_name, sizeof g_name, "memplan on %s", specs[i]);
        RUN_TEST(test_steady_state);
        RUN_TEST(test_weights_once);
        RUN_TEST(test_lru_eviction);
        RUN_TEST(test_view_alias);
        RUN_TEST(test_in_place);
        if (!strcmp(g_spec, "CPU:0")) RUN_TEST(test_view_in_place); /* the other devices' views are not in place */
        RUN_TEST(test_assign_not_planned);
        if (strcmp(g_spec, "TESTDEV:0")) RUN_TEST(test_in_place_chain); /* see its comment */
    }
    g_spec = "CPU:0";
    snprintf(g_name, sizeof g_name, "memplan on CPU:0");
    RUN_TEST(test_residual_in_place);
    RUN_TEST(test_concat_in_place);
    RUN_TEST(test_concat_chain_in_place);
    free(w1v);
    free(w2v);
    return check_summary();
}
