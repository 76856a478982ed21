/* The executor: long chains, wide fan-outs, diamonds, several inter-op thread counts, cancellation on
 * the first error, unused outputs, in-place reuse that never corrupts a value someone else holds.
 * Built also with ThreadSanitizer. */
#include <string.h>

#include "check.h"
#include "core/core.h"

static wf_tensor *scalar(float v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 0, NULL, &v, &t));
    return t;
}

static float as_f(const wf_tensor *t) { return ((const float *)wf_tensor_data(t))[0]; }

static wf_context *make_ctx(int inter)
{
    wf_context_options o;
    wf_context_options_init(&o);
    o.inter_op_threads = inter;
    o.intra_op_threads = 2;
    wf_context *c = NULL;
    CHECK_OK(wf_context_new(&o, &c));
    return c;
}

static void chain(wf_context *ctx)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, one, cur;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 0, NULL, &x));
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1, &one));
    cur = x;
    for (int i = 0; i < 5000; i++) CHECK_OK(wf_add(g, NULL, cur, one, &cur));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *xt = scalar(0.5f), *out = NULL;
    wf_feed f = {x, xt};
    for (int r = 0; r < 3; r++) {
        CHECK_OK(wf_session_run(s, &f, 1, &cur, 1, &out, NULL));
        if (out) CHECK(as_f(out) == 5000.5f);
        wf_tensor_free(out);
        out = NULL;
    }
    CHECK(as_f(xt) == 0.5f);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* x fans out to N independent nodes; every result is fetched. */
static void fanout(wf_context *ctx)
{
    enum { N = 2000 };
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, outs[N];
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 0, NULL, &x));
    for (int i = 0; i < N; i++) {
        wf_output c;
        CHECK_OK(wf_const_scalar(g, NULL, WF_F32, i, &c));
        CHECK_OK(wf_mul(g, NULL, x, c, &outs[i]));
    }
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *xt = scalar(2), *res[N] = {0};
    wf_feed f = {x, xt};
    CHECK_OK(wf_session_run(s, &f, 1, outs, N, res, NULL));
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (!res[i] || as_f(res[i]) != 2.0f * i) bad++;
        wf_tensor_free(res[i]);
    }
    CHECK_INT(bad, 0);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* A diamond lattice: each layer's node adds two nodes of the layer before. Checks ordering. */
static void lattice(wf_context *ctx)
{
    enum { W = 16, L = 40 };
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    wf_output x, layer[W], next[W];
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 0, NULL, &x));
    for (int i = 0; i < W; i++) layer[i] = x;
    double ref[W], nref[W];
    for (int i = 0; i < W; i++) ref[i] = 1;
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < W; i++) {
            CHECK_OK(wf_add(g, NULL, layer[i], layer[(i + 1) % W], &next[i]));
            nref[i] = ref[i] + ref[(i + 1) % W];
        }
        for (int i = 0; i < W; i++) {
            layer[i] = next[i];
            ref[i] = nref[i] / 2;
        }
        /* keep values bounded: halve every layer */
        wf_output half;
        CHECK_OK(wf_const_scalar(g, NULL, WF_F32, 0.5, &half));
        for (int i = 0; i < W; i++) CHECK_OK(wf_mul(g, NULL, layer[i], half, &layer[i]));
    }
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *xt = scalar(1), *res[W] = {0};
    wf_feed f = {x, xt};
    CHECK_OK(wf_session_run(s, &f, 1, layer, W, res, NULL));
    for (int i = 0; i < W; i++) {
        if (res[i]) CHECK_NEAR(as_f(res[i]), ref[i], 1e-4);
        wf_tensor_free(res[i]);
    }
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* One failing node among many parallel ones: the run returns that node's error; the next run works. */
static void cancellation(wf_context *ctx)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d4[1] = {4}, d1[1] = {1};
    wf_output data, idx, gat, outs[201];
    CHECK_OK(wf_placeholder(g, "data", WF_F32, 1, d4, &data));
    CHECK_OK(wf_placeholder(g, "idx", WF_I64, 1, d1, &idx));
    for (int i = 0; i < 200; i++) CHECK_OK(wf_unary(g, "Neg", NULL, data, &outs[i]));
    wf_output in[2] = {data, idx};
    wf_node *gn;
    CHECK_OK(wf_op(g, "Gather", "the_gather", in, 2, NULL, 0, &gn));
    gat = wf_out(gn, 0);
    CHECK_OK(wf_unary(g, "Neg", "after_gather", gat, &outs[200]));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    float dv[4] = {1, 2, 3, 4};
    int64_t bad_i = 9, good_i = 2;
    wf_tensor *dt = NULL, *bi = NULL, *gi = NULL, *res[201] = {0};
    CHECK_OK(wf_tensor_new(WF_F32, 1, d4, dv, &dt));
    CHECK_OK(wf_tensor_new(WF_I64, 1, d1, &bad_i, &bi));
    CHECK_OK(wf_tensor_new(WF_I64, 1, d1, &good_i, &gi));
    wf_feed fb[2] = {{data, dt}, {idx, bi}}, fg[2] = {{data, dt}, {idx, gi}};
    for (int r = 0; r < 3; r++) {
        wf_status *st = wf_session_run(s, fb, 2, outs, 201, res, NULL);
        CHECK(st != NULL);
        CHECK_STR_CONTAINS(wf_status_message(st), "node 'the_gather' (Gather)");
        wf_status_free(st);
        for (int i = 0; i < 201; i++) CHECK(res[i] == NULL);
        CHECK_OK(wf_session_run(s, fg, 2, outs, 201, res, NULL));
        if (res[200]) CHECK(((float *)wf_tensor_data(res[200]))[0] == -3);
        for (int i = 0; i < 201; i++) {
            wf_tensor_free(res[i]);
            res[i] = NULL;
        }
    }
    wf_tensor_free(dt);
    wf_tensor_free(bi);
    wf_tensor_free(gi);
    wf_session_free(s);
    wf_graph_free(g);
}

/* In-place reuse must not write into a value that another fetch or an Identity still holds. */
static void inplace_safety(wf_context *ctx)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {1000};
    wf_output x, a, id, b, c, one;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1, &one));
    CHECK_OK(wf_add(g, "a", x, one, &a));        /* fresh buffer */
    CHECK_OK(wf_unary(g, "Identity", "id", a, &id)); /* shares a's tensor */
    CHECK_OK(wf_add(g, "b", a, one, &b));        /* a dies here, but id shares it */
    CHECK_OK(wf_add(g, "c", b, one, &c));        /* b dies here: may be reused */
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *xt = NULL, *res[3] = {0};
    CHECK_OK(wf_tensor_new(WF_F32, 1, d, NULL, &xt));
    wf_feed f = {x, xt};
    wf_output fetch[3] = {id, c, x};
    CHECK_OK(wf_session_run(s, &f, 1, fetch, 3, res, NULL));
    if (res[0] && res[1] && res[2]) {
        CHECK(((float *)wf_tensor_data(res[0]))[7] == 1);
        CHECK(((float *)wf_tensor_data(res[1]))[7] == 3);
        CHECK(((float *)wf_tensor_data(res[2]))[7] == 0);
    }
    for (int i = 0; i < 3; i++) wf_tensor_free(res[i]);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* A dying value used twice by one node must not be overwritten before its second read:
 * Sum(a, y, a) with a = x + 1 computed here and dying at the Sum. */
static void inplace_repeated_input(wf_context *ctx)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {256};
    wf_output x, y, one, a, sum;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_placeholder(g, "y", WF_F32, 1, d, &y));
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1, &one));
    CHECK_OK(wf_add(g, "a", x, one, &a));
    wf_output in3[3] = {a, y, a};
    wf_node *sn;
    CHECK_OK(wf_op(g, "Sum", "sum", in3, 3, NULL, 0, &sn));
    sum = wf_out(sn, 0);
    wf_output in2[2] = {a, a};
    wf_node *an;
    wf_output twice;
    CHECK_OK(wf_op(g, "Add", "twice", in2, 2, NULL, 0, &an));
    twice = wf_out(an, 0);
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_tensor *xt = NULL, *yt = NULL, *out = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, d, NULL, &xt));
    CHECK_OK(wf_tensor_new(WF_F32, 1, d, NULL, &yt));
    for (int i = 0; i < 256; i++) {
        ((float *)wf_tensor_data(xt))[i] = (float)i;
        ((float *)wf_tensor_data(yt))[i] = 1000.0f;
    }
    wf_feed f[2] = {{x, xt}, {y, yt}};
    CHECK_OK(wf_session_run(s, f, 2, &sum, 1, &out, NULL));
    if (out) CHECK(((float *)wf_tensor_data(out))[10] == 11 + 1000 + 11);
    wf_tensor_free(out);
    out = NULL;
    CHECK_OK(wf_session_run(s, f, 2, &twice, 1, &out, NULL));
    if (out) CHECK(((float *)wf_tensor_data(out))[10] == 22);
    wf_tensor_free(out);
    wf_tensor_free(xt);
    wf_tensor_free(yt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* Split with an unused output: the value nobody reads is released at once. */
static void unused_outputs(wf_context *ctx)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {6};
    wf_output x;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    wf_attr a[2] = {wf_attr_int("axis", 0), wf_attr_int("num_outputs", 3)};
    wf_node *sp;
    CHECK_OK(wf_op(g, "Split", "split", &x, 1, a, 2, &sp));
    wf_output mid = wf_out(sp, 1);
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    float v[6] = {0, 1, 2, 3, 4, 5};
    wf_tensor *xt = NULL, *out = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, d, v, &xt));
    wf_feed f = {x, xt};
    CHECK_OK(wf_session_run(s, &f, 1, &mid, 1, &out, NULL));
    if (out) {
        CHECK_INT(wf_tensor_size(out), 2);
        CHECK(((float *)wf_tensor_data(out))[1] == 3);
    }
    wf_tensor_free(out);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* Constants the CPU hands out by reference are bound when a run starts, not run: their consumers start
 * at once, a fetched constant comes back, a graph of nothing but a constant runs, and a trace shows
 * them as events at the run's start that took no time, with their shapes. */
static void bound_constants(wf_context *ctx)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {4};
    float cv[4] = {1, 2, 3, 4};
    wf_tensor *ct = NULL, *xt = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 1, d, cv, &ct));
    CHECK_OK(wf_tensor_new(WF_F32, 1, d, cv, &xt));
    wf_output x, c, k, sum;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_const(g, "c", ct, &c));
    CHECK_OK(wf_const_scalar(g, "k", WF_F32, 10, &k));
    CHECK_OK(wf_add(g, "xc", x, c, &sum));
    CHECK_OK(wf_add(g, "xck", sum, k, &sum));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_feed f = {x, xt};
    wf_output fetch[2] = {sum, c};
    for (int r = 0; r < 3; r++) {
        wf_tensor *out[2] = {NULL, NULL};
        wf_trace *trace = NULL;
        wf_run_options ro = {0};
        ro.trace = r == 2 ? &trace : NULL;
        CHECK_OK(wf_session_run(s, &f, 1, fetch, 2, out, &ro));
        if (out[0] && out[1])
            for (int i = 0; i < 4; i++) {
                CHECK(((float *)wf_tensor_data(out[0]))[i] == 2 * cv[i] + 10);
                CHECK(((float *)wf_tensor_data(out[1]))[i] == cv[i]);
            }
        int seen_c = 0, seen_add = 0;
        for (int i = 0; trace && i < wf_trace_num_events(trace); i++) {
            wf_trace_event e = wf_trace_event_at(trace, i);
            if (!strcmp(e.node, "c") || !strcmp(e.node, "k")) {
                seen_c++;
                CHECK(e.start_ns == 0 && e.end_ns == 0);
                CHECK(e.shapes[0] == 'f' && strchr(e.shapes, '['));
            } else if (!strcmp(e.node, "xck")) {
                seen_add++;
                CHECK(e.end_ns > 0);
            }
        }
        if (r == 2) {
            CHECK_INT(seen_c, 2);
            CHECK_INT(seen_add, 1);
        }
        wf_trace_free(trace);
        wf_tensor_free(out[0]);
        wf_tensor_free(out[1]);
    }
    /* the constant's own tensor is untouched (nobody may write into a bound value) */
    CHECK(((float *)wf_tensor_data(ct))[0] == 1 && ((float *)wf_tensor_data(xt))[3] == 4);
    wf_session_free(s);
    /* a run whose every node is a bound constant */
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    for (int r = 0; r < 2; r++) {
        wf_tensor *out = NULL;
        CHECK_OK(wf_session_run(s, NULL, 0, &k, 1, &out, NULL));
        if (out) CHECK(as_f(out) == 10);
        wf_tensor_free(out);
    }
    wf_session_free(s);
    wf_tensor_free(ct);
    wf_tensor_free(xt);
    wf_graph_free(g);
}

static void test_one_thread(void)
{
    wf_context *c = make_ctx(1);
    chain(c); fanout(c); lattice(c); cancellation(c); inplace_safety(c); inplace_repeated_input(c); unused_outputs(c); bound_constants(c);
    wf_context_free(c);
}

static void test_two_threads(void)
{
    wf_context *c = make_ctx(2);
    chain(c); fanout(c); lattice(c); cancellation(c); inplace_safety(c); inplace_repeated_input(c); unused_outputs(c); bound_constants(c);
    wf_context_free(c);
}

static void test_four_threads(void)
{
    wf_context *c = make_ctx(4);
    chain(c); fanout(c); lattice(c); cancellation(c); inplace_safety(c); inplace_repeated_input(c); unused_outputs(c); bound_constants(c);
    wf_context_free(c);
}

int main(void)
{
    RUN_TEST(test_one_thread);
    RUN_TEST(test_two_threads);
    RUN_TEST(test_four_threads);
    return check_summary();
}
