/* Sessions: planning and plan reuse, feeds and fetches, every run-time error path (each returns its
 * status, leaks nothing, and the next run works), fusion, traces, in-place safety. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "core/core.h"
#include "session_internal.h"

static wf_context *ctx;

static wf_tensor *tensor_f32(int rank, const int64_t *dims, const float *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, rank, dims, v, &t));
    return t;
}

static void test_basic_run_and_errors(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {3};
    wf_output x, y, r, sum;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_placeholder(g, "y", WF_F32, 1, d, &y));
    CHECK_OK(wf_relu(g, "r", x, &r));
    CHECK_OK(wf_add(g, "sum", r, y, &sum));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    float xv[3] = {-1, 2, -3}, yv[3] = {10, 20, 30};
    wf_tensor *xt = tensor_f32(1, d, xv), *yt = tensor_f32(1, d, yv), *out = NULL;
    wf_feed feeds[2] = {{x, xt}, {y, yt}};
    CHECK_OK(wf_session_run(s, feeds, 2, &sum, 1, &out, NULL));
    float *o = wf_tensor_data(out);
    CHECK(o[0] == 10 && o[1] == 22 && o[2] == 30);
    wf_tensor_free(out);
    /* the fed tensors are untouched (no in-place writes into user memory) */
    CHECK(((float *)wf_tensor_data(xt))[0] == -1 && ((float *)wf_tensor_data(yt))[2] == 30);

    /* missing feed */
    CHECK_ERR(wf_session_run(s, feeds, 1, &sum, 1, &out, NULL), WF_FAILED_PRECONDITION,
              "placeholder 'y' (f32[3]) is needed to compute the fetches but was not fed");
    /* feeding a non-placeholder */
    wf_feed bad = {r, xt};
    CHECK_ERR(wf_session_run(s, &bad, 1, &r, 1, &out, NULL), WF_INVALID_ARGUMENT,
              "cannot feed node 'r' (Relu): only Placeholder nodes can be fed");
    /* wrong dtype and shape of a feed */
    int64_t d2[1] = {2};
    wf_tensor *it = NULL, *short_t = tensor_f32(1, d2, xv);
    CHECK_OK(wf_tensor_new(WF_I32, 1, d, NULL, &it));
    wf_feed wrong_dt[2] = {{x, it}, {y, yt}};
    CHECK_ERR(wf_session_run(s, wrong_dt, 2, &sum, 1, &out, NULL), WF_INVALID_ARGUMENT,
              "feed for placeholder 'x' has dtype i32, expected f32");
    wf_feed wrong_sh[2] = {{x, short_t}, {y, yt}};
    CHECK_ERR(wf_session_run(s, wrong_sh, 2, &sum, 1, &out, NULL), WF_INVALID_ARGUMENT,
              "feed for placeholder 'x' has shape [2], expected [3]");
    /* unknown fetch: a node of another graph, an output index out of range */
    wf_graph *other;
    wf_output z;
    CHECK_OK(wf_graph_new(&other));
    CHECK_OK(wf_placeholder(other, "z", WF_F32, 1, d, &z));
    CHECK_ERR(wf_session_run(s, feeds, 2, &z, 1, &out, NULL), WF_NOT_FOUND, "fetch 0 names a node that is not in this graph");
    wf_graph_free(other);
    wf_output bad_idx = {sum.node, 3};
    CHECK_ERR(wf_session_run(s, feeds, 2, &bad_idx, 1, &out, NULL), WF_NOT_FOUND, "asks for output 3 of node 'sum' (Add)");
    /* fed twice */
    wf_feed twice[3] = {{x, xt}, {y, yt}, {x, xt}};
    CHECK_ERR(wf_session_run(s, twice, 3, &sum, 1, &out, NULL), WF_INVALID_ARGUMENT, "placeholder 'x' is fed twice");
    /* after all that, a run works */
    CHECK_OK(wf_session_run(s, feeds, 2, &sum, 1, &out, NULL));
    CHECK(((float *)wf_tensor_data(out))[1] == 22);
    wf_tensor_free(out);
    /* fetching a placeholder returns its feed */
    CHECK_OK(wf_session_run(s, feeds, 2, &x, 1, &out, NULL));
    CHECK(((float *)wf_tensor_data(out))[0] == -1);
    wf_tensor_free(out);
    wf_tensor_free(it);
    wf_tensor_free(short_t);
    wf_tensor_free(xt);
    wf_tensor_free(yt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* A kernel that fails at run time (Gather index out of range) stops the run with the node's name;
 * the session stays usable. */
static void test_kernel_error_then_recovery(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {4}, di[1] = {2};
    wf_output data, idx, gat, neg;
    CHECK_OK(wf_placeholder(g, "data", WF_F32, 1, d, &data));
    CHECK_OK(wf_placeholder(g, "idx", WF_I64, 1, di, &idx));
    wf_output in[2] = {data, idx};
    wf_node *gn;
    CHECK_OK(wf_op(g, "Gather", "gather", in, 2, NULL, 0, &gn));
    gat = wf_out(gn, 0);
    CHECK_OK(wf_unary(g, "Neg", "neg", gat, &neg));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    float dv[4] = {1, 2, 3, 4};
    int64_t good[2] = {3, 0}, badv[2] = {1, 7};
    wf_tensor *dt = tensor_f32(1, d, dv), *gi = NULL, *bi = NULL, *out = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, 1, di, good, &gi));
    CHECK_OK(wf_tensor_new(WF_I64, 1, di, badv, &bi));
    wf_feed fb[2] = {{data, dt}, {idx, bi}}, fg[2] = {{data, dt}, {idx, gi}};
    wf_status *st = wf_session_run(s, fb, 2, &neg, 1, &out, NULL);
    CHECK(st != NULL);
    CHECK_STR_CONTAINS(wf_status_message(st), "node 'gather' (Gather)");
    CHECK_STR_CONTAINS(wf_status_message(st), "7");
    wf_status_free(st);
    CHECK_OK(wf_session_run(s, fg, 2, &neg, 1, &out, NULL));
    CHECK(((float *)wf_tensor_data(out))[0] == -4 && ((float *)wf_tensor_data(out))[1] == -1);
    wf_tensor_free(out);
    wf_tensor_free(dt);
    wf_tensor_free(gi);
    wf_tensor_free(bi);
    wf_session_free(s);
    wf_graph_free(g);
}

/* MatMul -> BiasAdd -> Relu runs as one fused node and matches a plain loop computed here. */
static void test_fusion(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    enum { M = 5, K = 7, N = 3 };
    int64_t dx[2] = {M, K}, dw[2] = {K, N}, db[1] = {N};
    float xv[M * K], wv[K * N], bv[N];
    for (int i = 0; i < M * K; i++) xv[i] = (float)((i * 37) % 11) - 5;
    for (int i = 0; i < K * N; i++) wv[i] = (float)((i * 13) % 7) - 3;
    for (int i = 0; i < N; i++) bv[i] = (float)i - 1;
    wf_tensor *wt = tensor_f32(2, dw, wv), *bt = tensor_f32(1, db, bv), *xt = tensor_f32(2, dx, xv), *out = NULL;
    wf_output x, w, b, mm, ba, r;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, dx, &x));
    CHECK_OK(wf_const(g, "w", wt, &w));
    CHECK_OK(wf_const(g, "b", bt, &b));
    CHECK_OK(wf_matmul(g, "mm", x, w, 0, 0, &mm));
    CHECK_OK(wf_bias_add(g, "ba", mm, b, &ba));
    CHECK_OK(wf_relu(g, "relu", ba, &r));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    wf_feed f = {x, xt};
    char *text = NULL;
    CHECK_OK(wf_session_placement(s, &f, 1, &r, 1, &text));
    CHECK_STR_CONTAINS(text, "mm: (MatMul+BiasAdd+Relu): /job:localhost/replica:0/task:0/device:CPU:0");
    CHECK(!strstr(text, "relu: "));
    wf_free(text);
    wf_trace *trace = NULL;
    wf_run_options ro = {&trace};
    CHECK_OK(wf_session_run(s, &f, 1, &r, 1, &out, &ro));
    const float *o = wf_tensor_data(out);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = bv[j];
            for (int k = 0; k < K; k++) acc += xv[i * K + k] * wv[k * N + j];
            if (acc < 0) acc = 0;
            if (o[i * N + j] != acc) bad++;
        }
    CHECK_INT(bad, 0);
    /* the trace has one event per plan node: x, w, b and the fused mm */
    CHECK_INT(wf_trace_num_events(trace), 4);
    int found = 0;
    for (int i = 0; i < wf_trace_num_events(trace); i++) {
        wf_trace_event e = wf_trace_event_at(trace, i);
        CHECK(e.end_ns >= e.start_ns);
        if (!strcmp(e.node, "mm")) found = !strcmp(e.op, "MatMul+BiasAdd+Relu");
    }
    CHECK(found);
    wf_trace_free(trace);
    wf_tensor_free(out);
    /* fetching the intermediate value disables the fusion of what follows it, and both are right */
    wf_output two[2] = {ba, r};
    wf_tensor *outs[2] = {0};
    CHECK_OK(wf_session_run(s, &f, 1, two, 2, outs, NULL));
    const float *o0 = wf_tensor_data(outs[0]), *o1 = wf_tensor_data(outs[1]);
    for (int i = 0; i < M * N; i++) CHECK(o1[i] == (o0[i] > 0 ? o0[i] : 0));
    wf_tensor_free(outs[0]);
    wf_tensor_free(outs[1]);
    wf_tensor_free(wt);
    wf_tensor_free(bt);
    wf_tensor_free(xt);
    wf_session_free(s);
    wf_graph_free(g);
}

/* NaN and +-Inf through the fused epilogues: MatMul -> BiasAdd -> act, Conv2D -> BiasAdd -> act and
 * Conv2D(X, W, B) -> act (the ONNX Conv + Relu of issue 12), with NaN/Inf in the input and in the weights
 * and bias, for Relu, LeakyRelu, Sigmoid and Tanh. The placement records must show the fusion taken; the
 * output is compared with a plain double loop here (numpy's rule: NaN in, NaN out; relu(NaN) is NaN). */
static double fnan_act(int a, double v)
{
    switch (a) {
    case 0: return v < 0 ? 0 : v; /* Relu keeps NaN, as numpy.maximum(x, 0) */
    case 1: return v < 0 ? 0.1 * v : v;
    case 4: return v < 0 ? 0 * v : v; /* LeakyRelu alpha 0: -inf * 0 is NaN, as numpy */
    case 2: return 1.0 / (1.0 + exp(-v));
    case 5: return v * (1.0 / (1.0 + exp(-v))); /* -inf * 0 is NaN */
    case 6: return v * (v / 6 + 0.5 < 0 ? 0 : v / 6 + 0.5 > 1 ? 1 : v / 6 + 0.5);
    default: return tanh(v);
    }
}

static unsigned fnan_seed = 12345;
static float fnan_rand(void)
{
    fnan_seed = fnan_seed * 1103515245u + 12345u;
    return (float)((fnan_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void test_fusion_nan(void)
{
    /* the last is LeakyRelu with alpha 0, which oneDNN would run as its NaN-dropping relu */
    static const char *const acts[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "LeakyRelu", "Swish", "HardSwish"};
    enum { MM, CONV, CONV_B };
    enum { M = 33, K = 64, N = 40 };                         /* MatMul */
    enum { BN = 2, C = 8, H = 10, W = 10, OC = 16, KH = 3 }; /* Conv2D */
    int total_nan = 0, total_fin = 0;
    for (int kind = MM; kind <= CONV_B; kind++)
        for (int where = 0; where < 2; where++) /* 0: specials in the input, 1: in the weights and bias */
            for (int a = 0; a < 7; a++) {
                int pad = where == 0 && kind != MM ? 1 : 0; /* Inf weights only unpadded: padding adds nothing */
                int64_t oh = H + 2 * pad - KH + 1, ow = W + 2 * pad - KH + 1;
                int64_t dx2[2] = {M, K}, dw2[2] = {K, N}, db[1] = {kind == MM ? N : OC};
                int64_t dx4[4] = {BN, C, H, W}, dw4[4] = {OC, C, KH, KH};
                int64_t nx = kind == MM ? M * K : BN * C * H * W, nw = kind == MM ? K * N : OC * C * KH * KH;
                int64_t nb = db[0], ny = kind == MM ? M * N : BN * OC * oh * ow;
                float *xv = malloc(sizeof(float) * (size_t)nx), *wv = malloc(sizeof(float) * (size_t)nw);
                float bv[64]; /* OC and N are at most 64 */
                double *want = malloc(sizeof(double) * (size_t)ny);
                CHECK(xv && wv && want);
                if (!xv || !wv || !want) return;
                for (int64_t i = 0; i < nx; i++) xv[i] = fnan_rand() * 2;
                for (int64_t i = 0; i < nw; i++) wv[i] = fnan_rand();
                for (int64_t i = 0; i < nb; i++) bv[i] = fnan_rand();
                const float sp[3] = {NAN, INFINITY, -INFINITY};
                if (where == 0) {
                    /* one special per few rows / pixels, so most outputs stay finite */
                    for (int j = 0; j < 3; j++) xv[(j * 7919 + 13) % nx] = sp[j];
                    xv[nx - 1] = NAN;
                } else {
                    for (int j = 0; j < 3; j++) wv[(j * 104729 + 5) % nw] = sp[j];
                    bv[nb - 2] = NAN;
                    bv[nb - 1] = INFINITY;
                }
                wf_graph *g;
                wf_session *s;
                CHECK_OK(wf_graph_new(&g));
                wf_tensor *wt = NULL, *bt = NULL, *xt = NULL, *out = NULL;
                CHECK_OK(wf_tensor_new(WF_F32, kind == MM ? 2 : 4, kind == MM ? dw2 : dw4, wv, &wt));
                CHECK_OK(wf_tensor_new(WF_F32, 1, db, bv, &bt));
                CHECK_OK(wf_tensor_new(WF_F32, kind == MM ? 2 : 4, kind == MM ? dx2 : dx4, xv, &xt));
                wf_output x, w, b, y, r;
                wf_node *nd;
                CHECK_OK(wf_placeholder(g, "x", WF_F32, kind == MM ? 2 : 4, kind == MM ? dx2 : dx4, &x));
                CHECK_OK(wf_const(g, "w", wt, &w));
                CHECK_OK(wf_const(g, "b", bt, &b));
                if (kind == MM) {
                    CHECK_OK(wf_matmul(g, "mm", x, w, 0, 0, &y));
                    CHECK_OK(wf_bias_add(g, "ba", y, b, &y));
                } else {
                    int64_t pads[4] = {pad, pad, pad, pad};
                    wf_attr at[1] = {wf_attr_ints("pads", pads, 4)};
                    wf_output in[3] = {x, w, b};
                    CHECK_OK(wf_op(g, "Conv2D", "mm", in, kind == CONV_B ? 3 : 2, at, 1, &nd));
                    y = wf_out(nd, 0);
                    if (kind == CONV) {
                        wf_attr fmt = wf_attr_string("data_format", "NCHW");
                        wf_output bin[2] = {y, b};
                        CHECK_OK(wf_op(g, "BiasAdd", "ba", bin, 2, &fmt, 1, &nd));
                        y = wf_out(nd, 0);
                    }
                }
                wf_attr alpha = wf_attr_float("alpha", a == 1 ? 0.1 : 0.0);
                CHECK_OK(wf_op(g, acts[a], "act", &y, 1, &alpha, a == 1 || a == 4, &nd));
                r = wf_out(nd, 0);
                CHECK_OK(wf_session_new(ctx, g, NULL, &s));
                wf_feed f = {x, xt};
                /* the fusion is taken: one plan node "mm" carrying the bias and the activation */
                wf_placement *pl = NULL;
                CHECK_OK(wf_session_placement_get(s, &f, 1, &r, 1, &pl));
                /* every activation fuses, Swish and HardSwish into convolutions too (as weft's own pass
                 * after the primitive: oneDNN's post-ops for them are slow, k_dnnl.c) */
                bool act_fused = true;
                char fused_want[64];
                snprintf(fused_want, sizeof fused_want, "%s%s%s", kind == CONV_B ? "" : "BiasAdd",
                         kind != CONV_B && act_fused ? "+" : "", act_fused ? acts[a] : "");
                int fused_ok = 0;
                for (int i = 0; pl && i < wf_placement_num_entries(pl); i++) {
                    wf_placement_entry e = wf_placement_entry_at(pl, i);
                    CHECK(!act_fused || strcmp(e.node, "act") != 0);
                    if (!strcmp(e.node, "mm"))
                        fused_ok = (*fused_want ? e.fused && !strcmp(e.fused, fused_want) : !e.fused || !*e.fused) &&
                                   !strcmp(e.device, "/job:localhost/replica:0/task:0/device:CPU:0");
                }
                CHECK(fused_ok);
                if (!fused_ok) fprintf(stderr, "  kind %d act %s: fusion %s not taken\n", kind, acts[a], fused_want);
                wf_placement_free(pl);
                CHECK_OK(wf_session_run(s, &f, 1, &r, 1, &out, NULL));
                /* the plain loop */
                if (kind == MM) {
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            double acc = 0;
                            for (int k = 0; k < K; k++) acc += (double)xv[i * K + k] * wv[k * N + j];
                            want[i * N + j] = fnan_act(a, acc + bv[j]);
                        }
                } else {
                    for (int n = 0; n < BN; n++)
                        for (int o = 0; o < OC; o++)
                            for (int64_t yh = 0; yh < oh; yh++)
                                for (int64_t yw = 0; yw < ow; yw++) {
                                    double acc = 0;
                                    for (int c = 0; c < C; c++)
                                        for (int kh = 0; kh < KH; kh++)
                                            for (int kw = 0; kw < KH; kw++) {
                                                int64_t ih = yh - pad + kh, iw = yw - pad + kw;
                                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                                acc += (double)xv[((n * C + c) * H + ih) * W + iw] *
                                                       wv[((o * C + c) * KH + kh) * KH + kw];
                                            }
                                    want[((n * OC + o) * oh + yh) * ow + yw] = fnan_act(a, acc + bv[o]);
                                }
                }
                int bad = 0, nan_want = 0, nan_got = 0, fin = 0;
                const float *o = out ? wf_tensor_data(out) : NULL;
                CHECK(out && wf_tensor_size(out) == ny);
                for (int64_t i = 0; o && i < ny; i++) {
                    double wv_ = want[i], gv = o[i];
                    nan_want += isnan(wv_) != 0;
                    nan_got += isnan(gv) != 0;
                    fin += isfinite(wv_) != 0;
                    int ok = isnan(wv_) ? isnan(gv) != 0 : isinf(wv_) ? gv == wv_ : fabs(gv - wv_) <= 1e-4 + 1e-4 * fabs(wv_);
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "  kind %d where %d %s: [%lld] got %g, want %g\n", kind, where, acts[a], (long long)i,
                                gv, wv_);
                }
                CHECK_INT(bad, 0);
                CHECK_INT(nan_got, nan_want);
                total_nan += nan_want;
                total_fin += fin;
                wf_tensor_free(out);
                wf_tensor_free(wt);
                wf_tensor_free(bt);
                wf_tensor_free(xt);
                wf_session_free(s);
                wf_graph_free(g);
                free(xv);
                free(wv);
                free(want);
            }
    /* the cases are not vacuous: NaN and finite outputs both occur */
    CHECK(total_nan > 0 && total_fin > 0);
}

/* Concurrent runs of one session with different inputs each get their own right answer. */
typedef struct {
    wf_session *s;
    wf_output x, y;
    int id;
    int bad;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    int64_t d[1] = {64};
    for (int it = 0; it < 30; it++) {
        float v[64];
        for (int i = 0; i < 64; i++) v[i] = (float)(a->id * 1000 + it * 64 + i);
        wf_tensor *t = NULL, *o = NULL;
        if (wf_tensor_new(WF_F32, 1, d, v, &t)) { a->bad++; continue; }
        wf_feed f = {a->x, t};
        wf_status *st = wf_session_run(a->s, &f, 1, &a->y, 1, &o, NULL);
        if (st) { a->bad++; wf_status_free(st); }
        else {
            const float *ov = wf_tensor_data(o);
            for (int i = 0; i < 64; i++) if (ov[i] != v[i] * 2 + 1) a->bad++;
        }
        wf_tensor_free(o);
        wf_tensor_free(t);
    }
    return NULL;
}

static void test_concurrent_runs(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {64};
    wf_output x, two, one, m, y;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_const_scalar(g, "two", WF_F32, 2, &two));
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1, &one));
    CHECK_OK(wf_mul(g, "m", x, two, &m));
    CHECK_OK(wf_add(g, "y", m, one, &y));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    pthread_t th[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){s, x, y, i, 0};
        pthread_create(&th[i], NULL, worker, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(args[i].bad, 0);
    }
    wf_session_free(s);
    wf_graph_free(g);
}

/* ---- runs of cached plans do not wait for a plan being built (issue 13): a thread building a new
 * shape's plan is held inside the build (the test hook) while another thread runs the cached shape;
 * those runs must all finish while the build is still held. The 60 s waits only turn a deadlock into a
 * failure; nothing is timed. ------------------------------------------------------------------------ */

typedef struct build_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, release, cached_done;
} build_gate;

static void gate_hook(void *arg)
{
    build_gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->release) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

typedef struct shape_run {
    wf_session *s;
    wf_output x, y;
    int64_t n;
    int runs, bad;
    build_gate *gate; /* set: signal cached_done at the end */
} shape_run;

static void *run_shape(void *p)
{
    shape_run *a = p;
    for (int it = 0; it < a->runs; it++) {
        float *v = malloc(sizeof *v * (size_t)a->n);
        for (int64_t i = 0; i < a->n; i++) v[i] = (float)(it * 7 + i);
        wf_tensor *t = NULL, *o = NULL;
        if (wf_tensor_new(WF_F32, 1, &a->n, v, &t)) { a->bad++; free(v); continue; }
        wf_feed f = {a->x, t};
        wf_status *st = wf_session_run(a->s, &f, 1, &a->y, 1, &o, NULL);
        if (st) { a->bad++; wf_status_free(st); }
        else {
            const float *ov = wf_tensor_data(o);
            for (int64_t i = 0; i < a->n; i++) if (ov[i] != v[i] * 2 + 1) a->bad++;
        }
        wf_tensor_free(o);
        wf_tensor_free(t);
        free(v);
    }
    if (a->gate) {
        pthread_mutex_lock(&a->gate->mu);
        a->gate->cached_done = 1;
        pthread_cond_broadcast(&a->gate->cv);
        pthread_mutex_unlock(&a->gate->mu);
    }
    return NULL;
}

/* waits until *flag, at most 60 s; returns *flag */
static int gate_wait(build_gate *g, int *flag)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&g->mu);
    while (!*flag && pthread_cond_timedwait(&g->cv, &g->mu, &until) == 0) {}
    int v = *flag;
    pthread_mutex_unlock(&g->mu);
    return v;
}

static void test_cached_runs_during_build(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {-1};
    wf_output x, two, one, m, y;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_const_scalar(g, "two", WF_F32, 2, &two));
    CHECK_OK(wf_const_scalar(g, "one", WF_F32, 1, &one));
    CHECK_OK(wf_mul(g, "m", x, two, &m));
    CHECK_OK(wf_add(g, "y", m, one, &y));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    shape_run warm = {s, x, y, 64, 1, 0, NULL};
    run_shape(&warm); /* the 64-element plan is now cached */
    CHECK_INT(warm.bad, 0);

    build_gate gate = {.entered = 0};
    pthread_mutex_init(&gate.mu, NULL);
    pthread_cond_init(&gate.cv, NULL);
    wf__session_build_hook_arg = &gate;
    wf__session_build_hook = gate_hook;
    shape_run fresh = {s, x, y, 128, 1, 0, NULL}, cached = {s, x, y, 64, 20, 0, &gate};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_shape, &fresh);
    CHECK(gate_wait(&gate, &gate.entered)); /* the 128-element plan is being built, and held there */
    pthread_create(&tb, NULL, run_shape, &cached);
    int done_during_build = gate_wait(&gate, &gate.cached_done);
    CHECK(done_during_build); /* 20 runs of the cached plan finished while the build was held */
    pthread_mutex_lock(&gate.mu);
    gate.release = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    wf__session_build_hook = NULL;
    wf__session_build_hook_arg = NULL;
    CHECK_INT(cached.bad, 0);
    CHECK_INT(fresh.bad, 0);
    pthread_cond_destroy(&gate.cv);
    pthread_mutex_destroy(&gate.mu);
    wf_session_free(s);
    wf_graph_free(g);
}

/* ---- overflowing and huge sizes at run time (issue 12): shape inputs fed at run time reach the kernels,
 * which must return INVALID_ARGUMENT for an overflow and OUT_OF_MEMORY (naming the node and the bytes)
 * for a size larger than the machine, and the session stays usable. ---------------------------------- */

static wf_tensor *tensor_i64(int n, const int64_t *v)
{
    wf_tensor *t = NULL;
    int64_t d[1] = {n};
    CHECK_OK(wf_tensor_new(WF_I64, 1, d, v, &t));
    return t;
}

static void run_fails(wf_session *s, wf_output in, wf_tensor *value, wf_output fetch, wf_code code, const char *t1,
                      const char *t2)
{
    wf_feed f = {in, value};
    wf_tensor *out = NULL;
    wf_status *st = wf_session_run(s, &f, 1, &fetch, 1, &out, NULL);
    if (!st) {
        CHECK_FAIL_("run succeeded, expected %s (%s)", wf_code_name(code), t1);
        wf_tensor_free(out);
        return;
    }
    if (wf_status_code(st) != code)
        CHECK_FAIL_("code %s, expected %s: %s", wf_code_name(wf_status_code(st)), wf_code_name(code),
                    wf_status_message(st));
    CHECK_STR_CONTAINS(wf_status_message(st), t1);
    if (t2) CHECK_STR_CONTAINS(wf_status_message(st), t2);
    CHECK(out == NULL);
    wf_status_free(st);
}

static void test_overflow_at_run_time(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d43[2] = {4, 3}, d2[1] = {2}, d1[1] = {1}, d11[2] = {1, 1};
    float xv[12] = {0}, one = 1;
    wf_tensor *xt = tensor_f32(2, d43, xv), *ot = tensor_f32(2, d11, &one);
    wf_output x, xo, rep, shp, cs_shape, t, e, cs, lo, hi, dl, rg;
    CHECK_OK(wf_const(g, "x", xt, &x));
    CHECK_OK(wf_const(g, "xo", ot, &xo));
    wf_tensor_free(xt);
    wf_tensor_free(ot);
    CHECK_OK(wf_placeholder(g, "rep", WF_I64, 1, d2, &rep));
    CHECK_OK(wf_placeholder(g, "shp", WF_I64, 1, d2, &shp));
    CHECK_OK(wf_placeholder(g, "cs_shape", WF_I64, 1, d1, &cs_shape));
    wf_output tin[2] = {x, rep}, ein[2] = {xo, shp};
    CHECK_OK(wf_op(g, "Tile", "t", tin, 2, NULL, 0, &t.node));
    CHECK_OK(wf_op(g, "Expand", "e", ein, 2, NULL, 0, &e.node));
    CHECK_OK(wf_op(g, "ConstantOfShape", "cs", &cs_shape, 1, NULL, 0, &cs.node));
    t.index = e.index = cs.index = 0;
    CHECK_OK(wf_placeholder(g, "lo", WF_I64, 0, NULL, &lo));
    CHECK_OK(wf_placeholder(g, "hi", WF_I64, 0, NULL, &hi));
    CHECK_OK(wf_placeholder(g, "dl", WF_I64, 0, NULL, &dl));
    wf_output rin[3] = {lo, hi, dl};
    CHECK_OK(wf_op(g, "Range", "rg", rin, 3, NULL, 0, &rg.node));
    rg.index = 0;
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));

    /* 3 x 2^62 overflows int64 */
    wf_tensor *v = tensor_i64(2, (int64_t[]){1, INT64_C(1) << 62});
    run_fails(s, rep, v, t, WF_INVALID_ARGUMENT, "node 't' (Tile): output dim 1 (3 x 4611686018427387904) overflows int64",
              "input [4,3], repeats [1,4611686018427387904]");
    wf_tensor_free(v);
    /* 4 x 2^61 = 2^63 elements: the element count overflows */
    v = tensor_i64(2, (int64_t[]){1, INT64_C(1) << 61});
    run_fails(s, rep, v, t, WF_INVALID_ARGUMENT, "node 't' (Tile)", "overflows int64");
    wf_tensor_free(v);
    /* [2^20, 2^20] of f32 is 2^42 bytes (4 TiB): representable, larger than any test machine's memory */
    v = tensor_i64(2, (int64_t[]){INT64_C(1) << 20, INT64_C(1) << 20});
    run_fails(s, shp, v, e, WF_OUT_OF_MEMORY, "node 'e' (Expand)", "4398046511104 bytes");
    wf_tensor_free(v);
    v = tensor_i64(1, (int64_t[]){INT64_C(1) << 40});
    run_fails(s, cs_shape, v, cs, WF_OUT_OF_MEMORY, "node 'cs' (ConstantOfShape)", "4398046511104 bytes");
    wf_tensor_free(v);
    /* Range over the whole int64 line by 1: 2^64 - 1 elements */
    wf_tensor *lt, *ht, *dt;
    CHECK_OK(wf_tensor_new(WF_I64, 0, NULL, &(int64_t){INT64_MIN}, &lt));
    CHECK_OK(wf_tensor_new(WF_I64, 0, NULL, &(int64_t){INT64_MAX}, &ht));
    CHECK_OK(wf_tensor_new(WF_I64, 0, NULL, &(int64_t){1}, &dt));
    wf_feed rf[3] = {{lo, lt}, {hi, ht}, {dl, dt}};
    wf_tensor *out = NULL;
    CHECK_ERR(wf_session_run(s, rf, 3, &rg, 1, &out, NULL), WF_INVALID_ARGUMENT,
              "node 'rg' (Range): range(-9223372036854775808, 9223372036854775807, 1) has more elements than int64");
    /* extremes that fit: INT64_MAX down to INT64_MIN by INT64_MIN is {2^63 - 1, -1} (hand-worked) */
    wf_tensor_free(lt), wf_tensor_free(ht), wf_tensor_free(dt);
    CHECK_OK(wf_tensor_new(WF_I64, 0, NULL, &(int64_t){INT64_MAX}, &lt));
    CHECK_OK(wf_tensor_new(WF_I64, 0, NULL, &(int64_t){INT64_MIN}, &ht));
    CHECK_OK(wf_tensor_new(WF_I64, 0, NULL, &(int64_t){INT64_MIN}, &dt));
    wf_feed rf2[3] = {{lo, lt}, {hi, ht}, {dl, dt}};
    CHECK_OK(wf_session_run(s, rf2, 3, &rg, 1, &out, NULL));
    if (out) {
        CHECK_INT(wf_tensor_size(out), 2);
        const int64_t *o = wf_tensor_data(out);
        CHECK(o[0] == INT64_MAX && o[1] == -1);
        wf_tensor_free(out);
        out = NULL;
    }
    wf_tensor_free(lt), wf_tensor_free(ht), wf_tensor_free(dt);

    /* the session still runs good feeds: Tile by [2, 1] gives [8, 3] */
    v = tensor_i64(2, (int64_t[]){2, 1});
    wf_feed f = {rep, v};
    CHECK_OK(wf_session_run(s, &f, 1, &t, 1, &out, NULL));
    if (out) {
        CHECK_INT(wf_tensor_dims(out)[0], 8);
        CHECK_INT(wf_tensor_dims(out)[1], 3);
        wf_tensor_free(out);
    }
    wf_tensor_free(v);
    wf_session_free(s);
    wf_graph_free(g);
}

/* Host tensors: the checked element count and the allocation cap, straight through the public API. */
/* wf_run_options.into: a fetch is written into the caller's tensor (a row of the caller's buffer here)
 * when its kernel runs on the CPU and gives that dtype and shape, including after an in-place chain;
 * otherwise (another shape, a fed value, a graph with variables) a new tensor comes back and the
 * caller's is untouched. Results are those of a run without into. */
static void test_run_into(void)
{
    wf_graph *g;
    wf_session *s;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[1] = {4};
    wf_output x, r, two, y, z;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 1, d, &x));
    CHECK_OK(wf_relu(g, "r", x, &r));
    CHECK_OK(wf_const_scalar(g, "two", WF_F32, 2, &two));
    CHECK_OK(wf_mul(g, "y", r, two, &y)); /* may reuse r's buffer in place */
    CHECK_OK(wf_unary(g, "Neg", "z", y, &z));
    float xv[4] = {-1, 2, -3, 4}, buf[12], want_y[4] = {0, 4, 0, 8};
    for (int i = 0; i < 12; i++) buf[i] = 100 + (float)i;
    wf_tensor *xt = tensor_f32(1, d, xv), *row1 = NULL, *row2 = NULL, *wrong = NULL, *ref[2] = {0}, *out[2] = {0};
    int64_t d5 = 5;
    CHECK_OK(wf_tensor_wrap(WF_F32, 1, d, buf + 4, NULL, NULL, &row1));
    CHECK_OK(wf_tensor_wrap(WF_F32, 1, d, buf + 8, NULL, NULL, &row2));
    CHECK_OK(wf_tensor_wrap(WF_F32, 1, &d5, buf + 4, NULL, NULL, &wrong));
    wf_feed feed = {x, xt};
    wf_output fetch[2] = {y, z};
    wf_tensor *into[2];
    wf_run_options ro = {.into = into};
    for (int level = 0; level <= 2; level += 2) { /* plain kernels (Mul in place), then fused ones */
        wf_session_options so;
        wf_session_options_init(&so);
        so.opt_level = level;
        CHECK_OK(wf_session_new(ctx, g, &so, &s));
        for (int i = 0; i < 12; i++) buf[i] = 100 + (float)i;
        CHECK_OK(wf_session_run(s, &feed, 1, fetch, 2, ref, NULL));
        into[0] = row1;
        into[1] = row2;
        for (int rep = 0; rep < 2; rep++) { /* the plan's first run and a cached one */
            CHECK_OK(wf_session_run(s, &feed, 1, fetch, 2, out, &ro));
            CHECK(out[0] == row1 && out[1] == row2);
            for (int i = 0; i < 4; i++) {
                CHECK(buf[4 + i] == want_y[i] && buf[8 + i] == -want_y[i]);
                if (ref[0] && ref[1]) CHECK(((float *)wf_tensor_data(ref[0]))[i] == buf[4 + i]);
            }
            CHECK(buf[0] == 100 && buf[3] == 103); /* outside the rows: untouched */
            wf_tensor_free(out[0]);
            wf_tensor_free(out[1]);
        }
        /* a tensor of another shape is not written */
        for (int i = 0; i < 12; i++) buf[i] = 100 + (float)i;
        into[0] = wrong;
        into[1] = NULL;
        CHECK_OK(wf_session_run(s, &feed, 1, fetch, 2, out, &ro));
        CHECK(out[0] != wrong && out[0] && ((float *)wf_tensor_data(out[0]))[1] == 4);
        for (int i = 0; i < 12; i++) CHECK(buf[i] == 100 + (float)i);
        wf_tensor_free(out[0]);
        wf_tensor_free(out[1]);
        /* a caller's tensor over the fed bytes is not written (the kernels still read them) */
        wf_tensor *over_x = NULL;
        CHECK_OK(wf_tensor_wrap(WF_F32, 1, d, xv, NULL, NULL, &over_x));
        into[0] = over_x;
        wf_feed feed_x = {x, over_x};
        CHECK_OK(wf_session_run(s, &feed_x, 1, fetch, 2, out, &ro));
        CHECK(out[0] != over_x && xv[0] == -1 && xv[1] == 2 && ((float *)wf_tensor_data(out[1]))[3] == -8);
        wf_tensor_free(out[0]);
        wf_tensor_free(out[1]);
        wf_tensor_free(over_x);
        /* two fetches' tensors over the same bytes: only the first is written there */
        into[0] = row1;
        into[1] = row1;
        CHECK_OK(wf_session_run(s, &feed, 1, fetch, 2, out, &ro));
        CHECK(out[0] == row1 && out[1] != row1 && buf[5] == 4 && ((float *)wf_tensor_data(out[1]))[1] == -4);
        wf_tensor_free(out[0]);
        wf_tensor_free(out[1]);
        for (int i = 0; i < 12; i++) buf[i] = 100 + (float)i;
        /* a fetched feed is the fed tensor, never written into the caller's */
        into[0] = row1;
        CHECK_OK(wf_session_run(s, &feed, 1, &x, 1, out, &ro));
        CHECK(out[0] == xt && buf[4] == 104);
        wf_tensor_free(out[0]);
        wf_session_free(s);
        wf_tensor_free(ref[0]);
        wf_tensor_free(ref[1]);
    }
    /* with variables the run commits state first: into is not used */
    wf_tensor *init = tensor_f32(1, d, xv);
    wf_output v, vy;
    CHECK_OK(wf_variable(g, "v", init, &v));
    CHECK_OK(wf_add(g, "vy", v, y, &vy));
    CHECK_OK(wf_session_new(ctx, g, NULL, &s));
    CHECK_OK(wf_session_run(s, &feed, 1, &vy, 1, out, &ro));
    CHECK(out[0] != row1 && buf[4] == 104 && ((float *)wf_tensor_data(out[0]))[1] == 6);
    wf_tensor_free(out[0]);
    wf_session_free(s);
    wf_tensor_free(init);
    wf_tensor_free(wrong);
    wf_tensor_free(row2);
    wf_tensor_free(row1);
    wf_tensor_free(xt);
    wf_graph_free(g);
}

static void test_huge_tensor_new(void)
{
    wf_tensor *t = NULL;
    int64_t over[2] = {INT64_C(1) << 40, INT64_C(1) << 40}, limit[1] = {INT64_C(1) << 61}, ram[1] = {INT64_C(1) << 40},
            zero_big[3] = {0, INT64_C(1) << 62, INT64_C(1) << 62};
    CHECK_ERR(wf_tensor_new(WF_F32, 2, over, NULL, &t), WF_INVALID_ARGUMENT, "overflows int64");
    CHECK_ERR(wf_tensor_new(WF_F32, 1, limit, NULL, &t), WF_INVALID_ARGUMENT, "2^62-byte limit");
    /* 2^42 bytes of data plus the tensor's header */
    CHECK_ERR(wf_tensor_new(WF_F32, 1, ram, NULL, &t), WF_OUT_OF_MEMORY, "out of memory allocating 43980465");
    /* a zero-size tensor whose other dims multiply past int64 is refused too (their strides would overflow) */
    CHECK_ERR(wf_tensor_new(WF_F32, 3, zero_big, NULL, &t), WF_INVALID_ARGUMENT, "overflows int64");
    CHECK(t == NULL);
}

int main(void)
{
    CHECK_OK(wf_context_new(NULL, &ctx));
    RUN_TEST(test_basic_run_and_errors);
    RUN_TEST(test_kernel_error_then_recovery);
    RUN_TEST(test_fusion);
    RUN_TEST(test_fusion_nan);
    RUN_TEST(test_concurrent_runs);
    RUN_TEST(test_cached_runs_during_build);
    RUN_TEST(test_overflow_at_run_time);
    RUN_TEST(test_huge_tensor_new);
    RUN_TEST(test_run_into);
    wf_context_free(ctx);
    return check_summary();
}
