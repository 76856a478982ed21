/*
 * Placement quality and speed.
 *  1. Random DAGs over four declared devices (a CPU, two GPUs, an integrated GPU; kernels missing on
 *     some accelerators): the estimated makespan of weft's HEFT placement against (a) everything on the
 *     fastest device, (b) TensorFlow's rule (an accelerator whenever it has a kernel), (c) CPU only, and
 *     (d) a lower bound (critical path on each node's fastest device, no copies).
 *  2. The time to place a 100,000-node random DAG over those four devices, and to plan (place and
 *     partition, copies inserted) a 100,000-node graph over the devices of this machine.
 *  3. For each ONNX model given: the same estimates over this machine's devices, and the measured wall
 *     time of the HEFT-placed run against each single device.
 * usage: bench_place [MODEL.onnx INPUT_NAME]...      numbers only; nothing is asserted
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "device/device.h"
#include "place/place.h"
#include "lower/plan.h"
#include "weft/weft.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double logu(double lo, double hi) { return exp(log(lo) + urand() * (log(hi) - log(lo))); }

typedef struct dag {
    int n;
    int *in_start, *in_src;
    double *flops, *bytes, *out_bytes;
    uint64_t *allowed;
    unsigned char *pinned;
} dag;

static void dag_free(dag *g)
{
    free(g->in_start);
    free(g->in_src);
    free(g->flops);
    free(g->bytes);
    free(g->out_bytes);
    free(g->allowed);
    free(g->pinned);
}

/* n nodes: 8 feeds on the host, then ops reading 1-3 values of the last 64 nodes; a fifth are dense
 * (matmul-like), the rest elementwise over 100 to 10^7 elements. Accelerator kernels: GPU 95%, second
 * GPU 95%, integrated GPU 70%. */
static void dag_random(dag *g, int n)
{
    g->n = n;
    g->in_start = malloc(sizeof(int) * (size_t)(n + 1));
    g->in_src = malloc(sizeof(int) * (size_t)n * 3);
    g->flops = malloc(sizeof(double) * (size_t)n);
    g->bytes = malloc(sizeof(double) * (size_t)n);
    g->out_bytes = malloc(sizeof(double) * (size_t)n);
    g->allowed = malloc(sizeof(uint64_t) * (size_t)n);
    g->pinned = calloc((size_t)n, 1);
    int e = 0;
    for (int v = 0; v < n; v++) {
        g->in_start[v] = e;
        if (v < 8) {
            g->flops[v] = g->bytes[v] = 0;
            g->out_bytes[v] = logu(1e3, 1e7);
            g->allowed[v] = 1;
            g->pinned[v] = 1;
            continue;
        }
        int k = 1 + (int)(urand() * 3);
        for (int i = 0; i < k; i++) {
            int lo = v > 64 ? v - 64 : 0;
            g->in_src[e++] = lo + (int)(urand() * (v - lo));
        }
        double elems = logu(1e2, 1e7);
        if (urand() < 0.2) {
            g->flops[v] = logu(1e6, 1e10);
            g->bytes[v] = 8 * elems;
        } else {
            g->flops[v] = elems;
            g->bytes[v] = 12 * elems;
        }
        g->out_bytes[v] = 4 * elems;
        g->allowed[v] = 1 | (urand() < 0.95 ? 2u : 0) | (urand() < 0.95 ? 4u : 0) | (urand() < 0.7 ? 8u : 0);
    }
    g->in_start[n] = e;
}

static wf__place_dev g_dev[4];
static double g_lat[16], g_bw[16];

static void declare_devices(void)
{
    /* CPU:0 (2 cores here), two data-centre GPUs at realistic efficiency, an integrated GPU */
    g_dev[0] = (wf__place_dev){.dense_flops = 125e9, .vector_flops = 15e9, .mem_bw = 20e9, .launch = 2e-6};
    g_dev[1] = (wf__place_dev){.dense_flops = 30e12, .vector_flops = 3e12, .mem_bw = 3e12, .launch = 8e-6};
    g_dev[2] = g_dev[1];
    g_dev[3] = (wf__place_dev){.dense_flops = 1e12, .vector_flops = 100e9, .mem_bw = 50e9, .launch = 20e-6};
    double link_lat[4] = {0, 10e-6, 10e-6, 20e-6}, link_bw[4] = {0, 25e9, 25e9, 10e9};
    for (int a = 0; a < 4; a++)
        for (int z = 0; z < 4; z++) {
            if (a == z) continue;
            g_lat[a * 4 + z] = link_lat[a] + link_lat[z];
            double inv = (a ? 1 / link_bw[a] : 0) + (z ? 1 / link_bw[z] : 0);
            g_bw[a * 4 + z] = 1 / inv;
        }
}

static wf__place_problem problem(const dag *g)
{
    return (wf__place_problem){.n_nodes = g->n, .n_dev = 4, .in_start = g->in_start, .in_src = g->in_src,
                               .flops = g->flops, .bytes = g->bytes, .out_bytes = g->out_bytes,
                               .allowed = g->allowed, .pinned = g->pinned, .dev = g_dev, .link_lat = g_lat,
                               .link_bw = g_bw};
}

static double evaluate(const wf__place_problem *p, int rule, wf__place_result *r, int *fixed)
{
    for (int v = 0; v < p->n_nodes; v++) {
        uint64_t a = p->allowed[v];
        int want = rule == 0 ? 1 : rule == 2 ? 0 : (a & ~1ull ? __builtin_ctzll(a & ~1ull) : 0);
        fixed[v] = a >> want & 1 ? want : 0;
    }
    wf_status *s = wf__place_evaluate(p, fixed, r);
    if (s) {
        fprintf(stderr, "bench_place: %s\n", wf_status_message(s));
        wf_status_free(s);
        return NAN;
    }
    return r->makespan;
}

static void random_dags(void)
{
    printf("== random DAGs over CPU + 2 GPUs + an integrated GPU (declared figures), estimated makespan\n");
    printf("%7s %5s %11s %9s %9s %9s %9s\n", "nodes", "seeds", "weft ms", "fastest", "TF rule", "CPU only",
           "bound");
    int sizes[3] = {100, 1000, 10000};
    for (int si = 0; si < 3; si++) {
        double sum[5] = {0};
        int seeds = 5;
        for (int seed = 0; seed < seeds; seed++) {
            rng = 0x9e3779b97f4a7c15ull + (uint64_t)seed * 7919 + (uint64_t)sizes[si];
            dag g;
            dag_random(&g, sizes[si]);
            wf__place_problem p = problem(&g);
            wf__place_result r = {.node = malloc(sizeof(wf__place_choice) * (size_t)g.n)};
            int *fixed = malloc(sizeof(int) * (size_t)g.n);
            wf_status *s = wf__place_heft(&p, &r);
            if (s) {
                fprintf(stderr, "bench_place: %s\n", wf_status_message(s));
                exit(1);
            }
            double heft = r.makespan;
            sum[0] += heft;
            sum[1] += evaluate(&p, 0, &r, fixed) / heft;
            sum[2] += evaluate(&p, 1, &r, fixed) / heft;
            sum[3] += evaluate(&p, 2, &r, fixed) / heft;
            sum[4] += wf__place_lower_bound(&p) / heft;
            free(r.node);
            free(fixed);
            dag_free(&g);
        }
        printf("%7d %5d %11.3f %9.2f %9.2f %9.2f %9.2f\n", sizes[si], seeds, 1e3 * sum[0] / seeds, sum[1] / seeds,
               sum[2] / seeds, sum[3] / seeds, sum[4] / seeds);
    }
    printf("(columns after weft: that rule's makespan / weft's, mean over seeds; bound < 1 is the lower bound)\n");
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void placement_speed(wf_context *ctx)
{
    printf("\n== placement speed\n");
    rng = 12345;
    dag g;
    dag_random(&g, 100000);
    wf__place_problem p = problem(&g);
    wf__place_result r = {.node = malloc(sizeof(wf__place_choice) * (size_t)g.n)};
    double t[3];
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        wf_status *s = wf__place_heft(&p, &r);
        t[i] = now_s() - t0;
        if (s) {
            fprintf(stderr, "bench_place: %s\n", wf_status_message(s));
            exit(1);
        }
    }
    qsort(t, 3, sizeof *t, cmpd);
    printf("HEFT, 100000-node random DAG (%d edges), 4 declared devices: %.1f ms (median of 3)\n",
           g.in_start[g.n], t[1] * 1e3);
    free(r.node);
    dag_free(&g);

    /* a real graph: 100000 Adds over [64] f32 values, each reading two of the last 64 nodes */
    wf_graph *gr;
    wf_graph_new(&gr);
    int n = 100000;
    wf_output *o = malloc(sizeof(wf_output) * (size_t)n);
    int64_t dims[1] = {64};
    rng = 777;
    for (int i = 0; i < n; i++) {
        wf_status *s;
        if (i < 8) {
            s = wf_placeholder(gr, NULL, WF_F32, 1, dims, &o[i]);
        } else {
            int lo = i > 64 ? i - 64 : 0;
            s = wf_add(gr, NULL, o[lo + (int)(urand() * (i - lo))], o[lo + (int)(urand() * (i - lo))], &o[i]);
            /* every fourth node asks for the second device, so the partition inserts copies */
            if (!s && wf_context_num_devices(ctx) > 1 && i % 4 == 0)
                s = wf_node_set_device(o[i].node, "/device:OPENCL:0");
        }
        if (s) {
            fprintf(stderr, "bench_place: %s\n", wf_status_message(s));
            exit(1);
        }
    }
    wf_tensor *x;
    wf_tensor_new(WF_F32, 1, dims, NULL, &x);
    wf_feed f[8];
    for (int i = 0; i < 8; i++) f[i] = (wf_feed){o[i], x};
    wf__place_opts po = {0};
    for (int i = 0; i < 3; i++) {
        wf__plan *plan;
        double t0 = now_s();
        wf_status *s = wf__plan_build(ctx, gr, f, 8, &o[n - 1], 1, &po, &plan);
        t[i] = now_s() - t0;
        if (s) {
            fprintf(stderr, "bench_place: %s\n", wf_status_message(s));
            exit(1);
        }
        if (i == 2) {
            int copies = 0;
            for (int k = 0; k < plan->n_nodes; k++) copies += plan->nodes[k].op == &wf__copy_op;
            qsort(t, 3, sizeof *t, cmpd);
            printf("plan (prune, infer, place, partition) of a %d-node graph over %d devices: %.1f ms (median of 3), "
                   "%d live nodes, %d copies\n", n, wf_context_num_devices(ctx), t[1] * 1e3, plan->n_nodes - copies,
                   copies);
        }
        wf__plan_free(plan);
    }
    wf_tensor_free(x);
    free(o);
    wf_graph_free(gr);
}

static double run_ms(wf_session *s, wf_feed *f, wf_output out, int reps)
{
    double t[16];
    for (int i = 0; i < reps + 1; i++) {
        wf_tensor *y = NULL;
        double t0 = now_s();
        wf_status *st = wf_session_run(s, f, 1, &out, 1, &y, NULL);
        double dt = now_s() - t0;
        wf_tensor_free(y);
        if (st) {
            fprintf(stderr, "  run failed: %s\n", wf_status_message(st));
            wf_status_free(st);
            return NAN;
        }
        if (i) t[i - 1] = dt;
    }
    qsort(t, (size_t)reps, sizeof *t, cmpd);
    return t[reps / 2] * 1e3;
}

static void model(wf_context *ctx, const char *path, const char *input)
{
    wf_graph *g;
    wf_onnx_model *m;
    wf_graph_new(&g);
    wf_status *s = wf_onnx_load(path, g, &m);
    if (s) {
        printf("%s: %s\n", path, wf_status_message(s));
        wf_status_free(s);
        wf_graph_free(g);
        return;
    }
    wf_output in;
    if ((s = wf_graph_output(g, input, &in))) {
        printf("%s: %s\n", path, wf_status_message(s));
        wf_status_free(s);
        wf_onnx_model_free(m);
        wf_graph_free(g);
        return;
    }
    int64_t dims[WF_MAX_RANK];
    int rank = wf_output_shape(in, dims);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) dims[i] = 1;
    wf_tensor *x;
    wf_tensor_new(WF_F32, rank, dims, NULL, &x);
    for (int64_t i = 0; i < wf_tensor_size(x); i++) ((float *)wf_tensor_data(x))[i] = (float)((i * 37) % 17) / 17;
    wf_feed f = {in, x};
    wf_output out = wf_onnx_output(m, 0)->output;
    printf("\n== %s: estimated makespan over this machine's %d devices (ms)\n", path, wf_context_num_devices(ctx));
    const char *names[4] = {"weft (HEFT)", "CPU only", "TF rule", "fastest"};
    double est[4], bound = 0;
    for (int pol = 0; pol < 4; pol++) {
        wf__place_opts po = {.policy = pol};
        wf__plan *plan;
        if ((s = wf__plan_build(ctx, g, &f, 1, &out, 1, &po, &plan))) {
            printf("  %s: %s\n", names[pol], wf_status_message(s));
            wf_status_free(s);
            est[pol] = NAN;
            continue;
        }
        est[pol] = plan->est_makespan * 1e3;
        bound = plan->est_lower_bound * 1e3;
        wf__plan_free(plan);
    }
    for (int pol = 0; pol < 4; pol++) printf("  %-12s %10.3f  (%.2f x weft)\n", names[pol], est[pol], est[pol] / est[0]);
    printf("  %-12s %10.3f\n", "lower bound", bound);
    printf("measured wall time, median of 5 runs (ms):\n");
    for (int d = -1; d < wf_context_num_devices(ctx); d++) {
        wf_session_options so;
        wf_session_options_init(&so);
        wf_device_info di;
        if (d >= 0) {
            wf_context_device(ctx, d, &di);
            so.device = di.name;
        }
        wf_session *ss;
        if ((s = wf_session_new(ctx, g, &so, &ss))) {
            wf_status_free(s);
            continue;
        }
        double ms = run_ms(ss, &f, out, 5);
        printf("  %-48s %10.2f\n", d < 0 ? "weft placement" : di.name, ms);
        wf_session_free(ss);
    }
    wf_tensor_free(x);
    wf_onnx_model_free(m);
    wf_graph_free(g);
}

int main(int argc, char **argv)
{
    declare_devices();
    random_dags();
    wf_context *ctx;
    wf_status *s = wf_context_new(NULL, &ctx);
    if (s) {
        fprintf(stderr, "bench_place: %s\n", wf_status_message(s));
        return 1;
    }
    placement_speed(ctx);
    for (int i = 1; i + 1 < argc; i += 2) model(ctx, argv[i], argv[i + 1]);
    wf_context_free(ctx);
    return 0;
}
