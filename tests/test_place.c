/*
 * The placer: HEFT on small abstract graphs whose best placement is worked out by hand (declared device
 * speeds and links), memory limits, colocation, devices sharing cores; then the same decisions through
 * sessions on the TESTDEV plugin with declared performance: cost reasons, soft fallback, the strict
 * error, colocation and host-memory arguments.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"
#include "place/place.h"
#include "weft/weft.h"

/* ---- the abstract placer ------------------------------------------------------------------------- */

#define MAXN 16

typedef struct prob {
    int n;
    int in_start[MAXN + 1], in_src[MAXN * 4];
    double flops[MAXN], bytes[MAXN], out_bytes[MAXN];
    uint64_t allowed[MAXN];
    int group[MAXN];
    unsigned char resident[MAXN], pinned[MAXN];
    wf__place_dev dev[4];
    double lat[16], bw[16];
    wf__place_problem p;
    wf__place_choice ch[MAXN];
    wf__place_result r;
} prob;

/* nodes are added in topological order; ins terminated by -1 */
static int node(prob *q, double flops, double bytes, double out_bytes, uint64_t allowed, const int *ins)
{
    int v = q->n++;
    q->in_start[v + 1] = q->in_start[v];
    for (int i = 0; ins && ins[i] >= 0; i++) q->in_src[q->in_start[v + 1]++] = ins[i];
    q->flops[v] = flops;
    q->bytes[v] = bytes;
    q->out_bytes[v] = out_bytes;
    q->allowed[v] = allowed;
    q->group[v] = -1;
    return v;
}

/* n_dev devices: device 0 is the host; links between 0 and k: latency 10 us, 1 GB/s */
static void devices(prob *q, int n_dev, const double *dense)
{
    for (int d = 0; d < n_dev; d++)
        q->dev[d] = (wf__place_dev){.dense_flops = dense[d], .vector_flops = dense[d] / 10, .mem_bw = 1e10,
                                    .launch = 0};
    for (int a = 0; a < n_dev; a++)
        for (int z = 0; z < n_dev; z++) {
            q->lat[a * n_dev + z] = a == z ? 0 : 10e-6;
            q->bw[a * n_dev + z] = a == z ? 0 : 1e9;
        }
    q->p = (wf__place_problem){.n_dev = n_dev, .in_start = q->in_start, .in_src = q->in_src, .flops = q->flops,
                               .bytes = q->bytes, .out_bytes = q->out_bytes, .allowed = q->allowed,
                               .group = q->group, .resident = q->resident, .pinned = q->pinned, .dev = q->dev,
                               .link_lat = q->lat, .link_bw = q->bw};
    q->r.node = q->ch;
}

static void solve(prob *q)
{
    q->p.n_nodes = q->n;
    CHECK_OK(wf__place_heft(&q->p, &q->r));
}

/* A big matmul goes where it finishes first, copies included; a tiny op next to its data stays. */
static void test_heft_big_and_small(void)
{
    prob q = {0};
    const double dense[2] = {1e10, 1e12}; /* host 10 GFLOP/s, accelerator 1 TFLOP/s */
    devices(&q, 2, dense);
    int x = node(&q, 0, 0, 4e6, 1, NULL); /* a feed on the host: 4 MB */
    q.pinned[x] = 1;
    int in1[] = {x, -1};
    int mm = node(&q, 1e10, 1.2e7, 4e6, 3, in1); /* 1 s on the host, 10 ms + 4 ms copy on the device */
    int small[] = {x, -1};
    int add = node(&q, 1e3, 8e3, 4e3, 3, small); /* 1e3 flops: the copy alone (4 ms) dwarfs it */
    solve(&q);
    CHECK_INT(q.ch[mm].dev, 1);
    CHECK_INT(q.ch[mm].alt, 0);
    CHECK_NEAR(q.ch[mm].est, 0.01, 1e-4);
    CHECK_NEAR(q.ch[mm].copy, 10e-6 + 4e6 / 1e9, 1e-7);
    CHECK_NEAR(q.ch[mm].alt_est, 1.0, 1e-3);
    CHECK_INT(q.ch[add].dev, 0);
    CHECK_INT(q.ch[x].dev, 0);
    /* makespan: the matmul's copy then run on the device */
    CHECK_NEAR(q.r.makespan, 10e-6 + 4e-3 + 0.01, 1e-5);
    CHECK(wf__place_lower_bound(&q.p) <= q.r.makespan + 1e-12);
}

/* Two equal independent matmuls and two equal devices: one each, the makespan halves; a value read by
 * both consumers on the other device is copied once. */
static void test_heft_parallel_and_one_copy(void)
{
    prob q = {0};
    const double dense[2] = {1e11, 1e11};
    devices(&q, 2, dense);
    int x = node(&q, 0, 0, 1e3, 1, NULL);
    q.pinned[x] = 1;
    int in[] = {x, -1};
    int a = node(&q, 1e9, 1e3, 1e3, 3, in); /* 10 ms each */
    int b = node(&q, 1e9, 1e3, 1e3, 3, in);
    int ab[] = {a, b, -1};
    int join = node(&q, 1e3, 1e3, 1e3, 3, ab);
    solve(&q);
    CHECK(q.ch[a].dev != q.ch[b].dev);
    CHECK(q.r.makespan < 0.0205 + 1e-3); /* not 20 ms serialised plus the join */
    CHECK(q.r.makespan > 0.01);
    (void)join;
    /* the same graph with everything on device 0, evaluated: the two matmuls serialise */
    int all0[MAXN] = {0};
    wf__place_choice ch2[MAXN];
    wf__place_result r2 = {.node = ch2};
    CHECK_OK(wf__place_evaluate(&q.p, all0, &r2));
    CHECK(r2.makespan >= 0.02);
    CHECK(r2.makespan > q.r.makespan);
}

/* When device 1 computes on device 0's cores (an OpenCL CPU device), the branches cannot overlap. */
static void test_shared_cores(void)
{
    prob q = {0};
    const double dense[2] = {1e11, 1e11};
    devices(&q, 2, dense);
    q.dev[1].shares_with = 1; /* device 0's cores */
    int x = node(&q, 0, 0, 1e3, 1, NULL);
    q.pinned[x] = 1;
    int in[] = {x, -1};
    int a = node(&q, 1e9, 1e3, 1e3, 3, in);
    int b = node(&q, 1e9, 1e3, 1e3, 3, in);
    solve(&q);
    /* no gain from the second device: both stay next to their data on device 0 */
    CHECK_INT(q.ch[a].dev, 0);
    CHECK_INT(q.ch[b].dev, 0);
    CHECK_NEAR(q.r.makespan, 0.02, 1e-6);
}

/* A device whose memory limit the node's output would pass is left out, with the bit recorded. */
static void test_memory_limit(void)
{
    prob q = {0};
    const double dense[2] = {1e10, 1e12};
    devices(&q, 2, dense);
    q.dev[1].mem_limit = 1e6; /* 1 MB */
    int x = node(&q, 0, 0, 4e5, 1, NULL);
    q.pinned[x] = 1;
    int in[] = {x, -1};
    int mm = node(&q, 1e10, 1e7, 2e6, 3, in); /* 2 MB output: over the limit */
    int in2[] = {x, -1};
    int mm2 = node(&q, 1e10, 1e7, 4e5, 3, in2); /* 0.4 MB out + 0.4 MB copied in: fits */
    solve(&q);
    CHECK_INT(q.ch[mm].dev, 0);
    CHECK(q.ch[mm].mem_excluded == 2);
    CHECK_INT(q.ch[mm2].dev, 1);
    CHECK(q.ch[mm2].mem_excluded == 0);
    CHECK(q.r.peak[1] <= 1e6);
}

/* Weights (resident constants) count once per device and are never copied per run. */
static void test_resident_weights(void)
{
    prob q = {0};
    const double dense[2] = {1e10, 1e12};
    devices(&q, 2, dense);
    q.dev[1].mem_limit = 3e6;
    int x = node(&q, 0, 0, 1e3, 1, NULL);
    q.pinned[x] = 1;
    int w = node(&q, 0, 0, 2e6, 3, NULL);
    q.resident[w] = 1;
    int in[] = {x, w, -1};
    int mm = node(&q, 1e10, 1e6, 1e3, 3, in);
    int w2 = node(&q, 0, 0, 2e6, 3, NULL);
    q.resident[w2] = 1;
    int in2[] = {mm, w2, -1};
    int mm2 = node(&q, 1e10, 1e6, 1e3, 3, in2); /* its weights would make 4 MB on device 1 */
    solve(&q);
    CHECK_INT(q.ch[mm].dev, 1);
    CHECK_INT(q.ch[w].dev, 1);
    CHECK_INT(q.ch[mm2].dev, 0);
    CHECK(q.ch[mm2].mem_excluded == 2);
    CHECK_INT(q.ch[w2].dev, 0);
}

/* A colocation group runs where all its members can; the first member decides for the rest. */
static void test_colocation_group(void)
{
    prob q = {0};
    const double dense[3] = {1e10, 1e12, 1e11};
    devices(&q, 3, dense);
    int x = node(&q, 0, 0, 1e3, 1, NULL);
    q.pinned[x] = 1;
    int in[] = {x, -1};
    int a = node(&q, 1e10, 1e3, 1e3, 7, in); /* would pick device 1 alone */
    int in2[] = {a, -1};
    int b = node(&q, 1e3, 1e3, 1e3, 5, in2); /* devices 0 and 2 only */
    q.group[a] = q.group[b] = 0;
    solve(&q);
    CHECK_INT(q.ch[a].dev, 2); /* the fastest device both can use */
    CHECK_INT(q.ch[b].dev, 2);
}

/* The order is topological even when nothing costs anything (ties by id). */
static void test_zero_costs(void)
{
    prob q = {0};
    const double dense[2] = {1e10, 1e10};
    devices(&q, 2, dense);
    int prev = node(&q, 0, 0, 0, 3, NULL);
    for (int i = 1; i < MAXN; i++) {
        int in[] = {prev, -1};
        prev = node(&q, 0, 0, 0, 3, in);
    }
    solve(&q);
    for (int i = 0; i < MAXN; i++) CHECK_INT(q.ch[i].dev, 0);
    int bad[MAXN] = {0};
    bad[3] = 7;
    wf__place_choice ch2[MAXN];
    wf__place_result r2 = {.node = ch2};
    q.p.n_nodes = q.n;
    CHECK_ERR(wf__place_evaluate(&q.p, bad, &r2), WF_INVALID_ARGUMENT, "node 3 is assigned device 7");
}

/* ---- through sessions, on TESTDEV ---------------------------------------------------------------- */

static wf_context *ctx;

static void declare(const char *spec, double dense, double link_gbps)
{
    wf_device_perf p = {.dense_gflops = dense, .vector_gflops = dense / 10, .mem_gbps = 10, .launch_us = 1,
                        .link_gbps = link_gbps, .link_latency_us = 10};
    CHECK_OK(wf_context_set_device_perf(ctx, spec, &p));
}

static char *placement(wf_graph *g, wf_session_options *o, wf_feed *f, int nf, wf_output *fetch, wf_status **err)
{
    wf_session *s = NULL;
    char *text = NULL;
    wf_status *st = wf_session_new(ctx, g, o, &s);
    if (!st) st = wf_session_placement(s, f, nf, fetch, 1, &text);
    if (!st) {
        wf_tensor *out = NULL;
        st = wf_session_run(s, f, nf, fetch, 1, &out, NULL);
        wf_tensor_free(out);
    }
    wf_session_free(s);
    if (err) *err = st;
    else CHECK_OK(st);
    return text;
}

static int count_lines(const char *text, const char *needle)
{
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) k++;
    return k;
}

static void test_session_costs(void)
{
    declare("CPU:0", 10, 0);
    declare("TESTDEV:0", 10000, 10);
    declare("TESTDEV:1", 1, 10);
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[2] = {256, 256};
    wf_tensor *w;
    CHECK_OK(wf_tensor_new(WF_F32, 2, d, NULL, &w));
    memset(wf_tensor_data(w), 0, wf_tensor_bytes(w));
    wf_output x, wc, mm, r, sm, a, b, tiny;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, d, &x));
    CHECK_OK(wf_const(g, "w", w, &wc));
    CHECK_OK(wf_matmul(g, "mm", x, wc, 0, 0, &mm));
    CHECK_OK(wf_relu(g, "relu", mm, &r));
    CHECK_OK(wf_softmax(g, "softmax", r, -1, &sm)); /* no TESTDEV kernel */
    CHECK_OK(wf_const_scalar(g, "a", WF_F32, 1, &a));
    CHECK_OK(wf_const_scalar(g, "b", WF_F32, 2, &b));
    CHECK_OK(wf_add(g, "tiny", a, b, &tiny));
    wf_tensor *xt;
    CHECK_OK(wf_tensor_new(WF_F32, 2, d, NULL, &xt));
    memset(wf_tensor_data(xt), 0, wf_tensor_bytes(xt));
    wf_feed f = {x, xt};
    char *t = placement(g, NULL, &f, 1, &sm, NULL);
    CHECK(t != NULL);
    if (t) {
        /* 33.5 MFLOP: 3.4 ms on CPU:0 at 10 GFLOP/s, 3.4 us on TESTDEV:0 plus a 262 KB copy */
        CHECK_STR_CONTAINS(line_of(t, "mm"), "device:TESTDEV:0  # est ");
        CHECK_STR_CONTAINS(line_of(t, "mm"), " on TESTDEV:0 + ");
        CHECK_STR_CONTAINS(line_of(t, "mm"), " vs ");
        CHECK_STR_CONTAINS(line_of(t, "relu"), "device:TESTDEV:0");
        CHECK_STR_CONTAINS(line_of(t, "softmax"), "device:CPU:0  # only CPU:0 has a kernel for Softmax (f32)");
        CHECK_STR_CONTAINS(line_of(t, "x"), "# fed from host memory");
        CHECK_STR_CONTAINS(line_of(t, "w"), "device:TESTDEV:0  # a constant, colocated with its consumer mm");
        /* exactly one copy per (value, destination) */
        CHECK_INT(count_lines(t, "x:0/Copy_to_TESTDEV:0: (Copy)"), 1);
        CHECK_INT(count_lines(t, "relu:0/Copy_to_CPU:0: (Copy)"), 1);
        CHECK_INT(count_lines(t, "(Copy)"), 2);
    }
    wf_free(t);
    /* the same placement as records */
    {
        wf_session *ss;
        wf_placement *pl = NULL;
        CHECK_OK(wf_session_new(ctx, g, NULL, &ss));
        CHECK_OK(wf_session_placement_get(ss, &f, 1, &sm, 1, &pl));
        int copies = 0, seen_mm = 0;
        for (int i = 0; i < wf_placement_num_entries(pl); i++) {
            wf_placement_entry e = wf_placement_entry_at(pl, i);
            copies += e.is_copy;
            if (e.is_copy) {
                CHECK_STR_CONTAINS(e.op, "Copy");
                CHECK(e.est_ms < 0);
            }
            if (!strcmp(e.node, "mm")) {
                seen_mm = 1;
                CHECK_STR_CONTAINS(e.device, "device:TESTDEV:0");
                CHECK(e.est_ms > 0 && e.est_ms < 1);
                CHECK_STR_CONTAINS(e.reason, "est ");
                CHECK_STR_CONTAINS(e.op, "MatMul");
            }
        }
        CHECK_INT(copies, 2);
        CHECK(seen_mm);
        CHECK(wf_placement_est_makespan_ms(pl) > 0);
        wf_placement_free(pl);
        CHECK_ERR(wf_session_placement_get(ss, &f, 1, &sm, 1, NULL), WF_INVALID_ARGUMENT, "NULL");
        wf_session_free(ss);
    }
    /* a tiny op next to its (host) data stays there (without optimisation: fold would make the op of
     * constants a constant) */
    {
        wf_session_options o0;
        wf_session_options_init(&o0);
        o0.opt_level = 0;
        t = placement(g, &o0, NULL, 0, &tiny, NULL);
    }
    if (t) CHECK_STR_CONTAINS(line_of(t, "tiny"), "device:CPU:0  # est ");
    wf_free(t);

    /* memory: TESTDEV:0 limited below the matmul's 256 KiB output */
    CHECK_OK(wf_context_set_memory_limit(ctx, "TESTDEV:0", 200 << 10));
    t = placement(g, NULL, &f, 1, &sm, NULL);
    if (t) {
        CHECK_STR_CONTAINS(line_of(t, "mm"), "TESTDEV:0 left out: the plan would pass its memory limit (200.0 KiB)");
        CHECK(!strstr(line_of(t, "mm"), "device:TESTDEV:0 "));
    }
    wf_free(t);
    CHECK_OK(wf_context_set_memory_limit(ctx, "TESTDEV:0", 0));

    /* colocation with a node only the CPU can run pulls the matmul to the CPU */
    wf_node *mmn, *smn;
    CHECK_OK(wf_graph_find(g, "mm", &mmn));
    CHECK_OK(wf_graph_find(g, "softmax", &smn));
    CHECK_OK(wf_node_set_colocation(mmn, "var"));
    CHECK_OK(wf_node_set_colocation(smn, "var"));
    CHECK_STR_CONTAINS(wf_node_colocation(mmn), "var");
    t = placement(g, NULL, &f, 1, &sm, NULL);
    if (t) {
        CHECK_STR_CONTAINS(line_of(t, "mm"), "device:CPU:0  # colocation group 'var': softmax runs only on CPU:0");
        CHECK_STR_CONTAINS(line_of(t, "softmax"), "colocated with mm (group 'var')");
    }
    wf_free(t);
    /* strict placement refuses a group no device can run whole */
    CHECK_OK(wf_node_set_device(mmn, "TESTDEV:0"));
    wf_session_options o;
    wf_session_options_init(&o);
    o.strict_placement = 1;
    wf_status *st;
    t = placement(g, &o, &f, 1, &sm, &st);
    CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(st), "Cannot colocate nodes in group 'var'");
    wf_status_free(st);
    wf_free(t);
    /* soft: the group is dropped with the reason, the request honoured */
    t = placement(g, NULL, &f, 1, &sm, NULL);
    if (t) {
        CHECK_STR_CONTAINS(line_of(t, "mm"), "device:TESTDEV:0  # requested 'TESTDEV:0'; colocation group 'var' dropped");
    }
    wf_free(t);
    CHECK_OK(wf_node_set_colocation(mmn, NULL));
    CHECK_OK(wf_node_set_colocation(smn, NULL));
    CHECK(wf_node_colocation(mmn) == NULL);

    /* requests: soft fallback says why; strict fails in TensorFlow's words */
    CHECK_OK(wf_node_set_device(mmn, "/device:GPU:0"));
    t = placement(g, NULL, &f, 1, &sm, NULL);
    if (t) CHECK_STR_CONTAINS(line_of(t, "mm"), "# soft placement: requested '/device:GPU:0' matches no device");
    wf_free(t);
    t = placement(g, &o, &f, 1, &sm, &st);
    CHECK_INT(wf_status_code(st), WF_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(wf_status_message(st), "Cannot assign a device for operation mm: mm was explicitly assigned "
                                              "to /device:GPU:0 but available devices are [ ");
    wf_status_free(st);
    wf_free(t);
    CHECK_OK(wf_node_set_device(smn, "TESTDEV:1"));
    CHECK_OK(wf_node_set_device(mmn, NULL));
    t = placement(g, &o, &f, 1, &sm, &st);
    CHECK_STR_CONTAINS(wf_status_message(st), "Could not satisfy explicit device specification 'TESTDEV:1' because no "
                                              "supported kernel for TESTDEV devices is available (op Softmax, dtype f32)");
    wf_status_free(st);
    wf_free(t);
    CHECK_ERR(wf_node_set_device(smn, "/device:"), WF_INVALID_ARGUMENT, "/device:");
    CHECK_ERR(wf_context_set_device_perf(ctx, "NOPE:3", &(wf_device_perf){1, 1, 1, 1, 1, 1, 0}), WF_NOT_FOUND,
              "'NOPE:3' matches no device");
    CHECK_ERR(wf_context_set_device_perf(ctx, "CPU:0", &(wf_device_perf){0, 1, 1, 1, 1, 1, 0}),
              WF_INVALID_ARGUMENT, "rates must be > 0");
    wf_tensor_free(xt);
    wf_tensor_free(w);
    wf_graph_free(g);
}

/* The nodes computing a shape argument stay on the host, next to where kernels read it. */
static void test_host_memory_argument(void)
{
    wf_graph *g;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[2] = {4, 6}, sd[1] = {2};
    wf_output x, shp, one, shp2, r;
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 2, d, &x));
    wf_tensor *st;
    int64_t sv[2] = {3, 8};
    CHECK_OK(wf_tensor_new(WF_I64, 1, sd, sv, &st));
    CHECK_OK(wf_const(g, "shape", st, &shp));
    wf_tensor_free(st);
    CHECK_OK(wf_const_scalar(g, "zero", WF_I64, 0, &one));
    CHECK_OK(wf_add(g, "shape_calc", shp, one, &shp2));
    CHECK_OK(wf_op(g, "Reshape", "r", (wf_output[]){x, shp2}, 2, NULL, 0, NULL));
    CHECK_OK(wf_graph_output(g, "r", &r));
    wf_tensor *xt;
    CHECK_OK(wf_tensor_new(WF_F32, 2, d, NULL, &xt));
    memset(wf_tensor_data(xt), 0, wf_tensor_bytes(xt));
    wf_feed f = {x, xt};
    wf_session_options so;
    wf_session_options_init(&so);
    so.opt_level = 0; /* shape + 0 is the point here: the simplify pass would remove it */
    char *t = placement(g, &so, &f, 1, &r, NULL);
    if (t) CHECK_STR_CONTAINS(line_of(t, "shape_calc"), "device:CPU:0  # computes a host-memory argument (input 1 of r, Reshape)");
    wf_free(t);
    wf_tensor_free(xt);
    wf_graph_free(g);
}

int main(void)
{
    RUN_TEST(test_heft_big_and_small);
    RUN_TEST(test_heft_parallel_and_one_copy);
    RUN_TEST(test_shared_cores);
    RUN_TEST(test_memory_limit);
    RUN_TEST(test_resident_weights);
    RUN_TEST(test_colocation_group);
    RUN_TEST(test_zero_costs);
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR, 1);
    CHECK_OK(wf_context_new(NULL, &ctx));
    RUN_TEST(test_session_costs);
    RUN_TEST(test_host_memory_argument);
    wf_context_free(ctx);
    return check_summary();
}
