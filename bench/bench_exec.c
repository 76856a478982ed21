/*
 * Executor overhead: a chain of 10,000 scalar Adds and a fan-out of 10,000 independent scalar ops,
 * nanoseconds per op on 1 and 2 inter-op threads (median of repeated runs after a warm-up run that
 * also plans). Reference figure: PyTorch eager needs about 880 ns per scalar op on these machines.
 * The chain runs twice: one node per Add (the executor's own cost), and with level 2's generated
 * kernels, which fuse the chain 16 Adds to a node.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "weft/weft.h"

#define N 10000
#define REPS 30

static void die(wf_status *s)
{
    if (!s) return;
    fprintf(stderr, "bench_exec: %s\n", wf_status_message(s));
    exit(1);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double time_runs(wf_session *s, const wf_feed *f, const wf_output *fetch, int n_fetch, wf_tensor **out)
{
    double t[REPS];
    for (int r = -1; r < REPS; r++) {
        double t0 = now_ns();
        die(wf_session_run(s, f, 1, fetch, n_fetch, out, NULL));
        double dt = now_ns() - t0;
        for (int i = 0; i < n_fetch; i++) wf_tensor_free(out[i]);
        if (r >= 0) t[r] = dt;
    }
    qsort(t, REPS, sizeof t[0], cmp);
    return t[REPS / 2];
}

int main(void)
{
    static wf_output outs[N];
    static wf_tensor *res[N];
    printf("executor overhead (median of %d runs, ns per op; PyTorch eager ~880 ns/op here)\n", REPS);
    for (int threads = 1; threads <= 2; threads++) {
        wf_context_options o;
        wf_context_options_init(&o);
        o.inter_op_threads = threads;
        o.intra_op_threads = threads;
        wf_context *ctx;
        die(wf_context_new(&o, &ctx));
        float v = 1;
        wf_tensor *xt;
        die(wf_tensor_new(WF_F32, 0, NULL, &v, &xt));

        /* chain: y = ((x + 1) + 1) + ... */
        wf_graph *g;
        wf_session *s;
        wf_output x, one, cur;
        die(wf_graph_new(&g));
        die(wf_placeholder(g, "x", WF_F32, 0, NULL, &x));
        die(wf_const_scalar(g, "one", WF_F32, 1, &one));
        cur = x;
        for (int i = 0; i < N; i++) die(wf_add(g, NULL, cur, one, &cur));
        /* the executor alone, one node per Add (--disable-pass jit), then as level 2 runs it: the
         * generated kernels take 16 Adds per node (lower/jit.c) */
        wf_feed f = {x, xt};
        double t = 0;
        for (int jit = 0; jit < 2; jit++) {
            wf_session_options so;
            wf_session_options_init(&so);
            so.disable_passes = jit ? NULL : "jit";
            die(wf_session_new(ctx, g, &so, &s));
            t = time_runs(s, &f, &cur, 1, res);
            printf("  chain of %d scalar Adds,   %d thread%s: %7.1f ns/op%s\n", N, threads, threads > 1 ? "s" : " ",
                   t / N, jit ? " (generated kernels, level 2's default)" : " (one node per Add: --disable-pass jit)");
            wf_session_free(s);
        }
        wf_graph_free(g);

        /* fan-out: N independent x + c_i, all fetched */
        die(wf_graph_new(&g));
        die(wf_placeholder(g, "x", WF_F32, 0, NULL, &x));
        die(wf_const_scalar(g, "one", WF_F32, 1, &one));
        for (int i = 0; i < N; i++) die(wf_add(g, NULL, x, one, &outs[i]));
        die(wf_session_new(ctx, g, NULL, &s));
        f.output = x;
        t = time_runs(s, &f, outs, N, res);
        printf("  fan-out of %d scalar Adds, %d thread%s: %7.1f ns/op\n", N, threads, threads > 1 ? "s" : " ", t / N);
        wf_session_free(s);
        wf_graph_free(g);
        wf_tensor_free(xt);
        wf_context_free(ctx);
    }
    return 0;
}
