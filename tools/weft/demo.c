/*
 * `weft demo`: the classic model of TensorFlow's beginner tutorial (Flatten 784 -> Dense 128 relu ->
 * Dense 10 softmax) with random weights, a batch through it, where each node ran, and the time per
 * batch. Training on real data arrives with the training issue.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "demo_model.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cmd_demo(int argc, char **argv)
{
    int batch = 256, iters = 50, threads = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "weft demo: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (batch < 1 || iters < 1 || threads < 0) {
        fprintf(stderr, "weft demo: --batch and --iterations must be >= 1, --threads >= 0\n");
        return 2;
    }
    wf_context_options co;
    wf_context_options_init(&co);
    co.inter_op_threads = co.intra_op_threads = threads;
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_session *sess = NULL;
    wf_tensor *x = NULL, *y = NULL;
    char *placement = NULL;
    int rc = 1;
    wf_status *s = wf_context_new(&co, &ctx);
    demo_model m;
    if (!s) s = wf_graph_new(&g);
    if (!s) s = demo_model_build(g, 42, &m);
    if (!s) s = wf_session_new(ctx, g, NULL, &sess);
    if (s) goto out;

    printf("devices:\n");
    for (int i = 0; i < wf_context_num_devices(ctx); i++) {
        wf_device_info d;
        if (!wf_context_device(ctx, i, &d)) printf("  %s (%s, %d threads)\n", d.name, d.description, d.threads);
    }
    int64_t dims[4] = {batch, 28, 28};
    if ((s = wf_tensor_new(WF_F32, 3, dims, NULL, &x))) goto out;
    float *xp = wf_tensor_data(x);
    srand(7);
    for (int64_t i = 0; i < (int64_t)batch * 784; i++) xp[i] = (float)rand() / (float)RAND_MAX;
    wf_feed feed = {m.input, x};
    if ((s = wf_session_placement(sess, &feed, 1, &m.probs, 1, &placement))) goto out;
    printf("\nmodel: Flatten 784 -> Dense 128 relu -> Dense 10 softmax, batch %d\nplacement:\n%s", batch, placement);

    double *t = malloc(sizeof(double) * (size_t)iters);
    double t_first = 0;
    for (int it = 0; it <= iters && t; it++) {
        double t0 = now_ms();
        wf_tensor_free(y);
        y = NULL;
        if ((s = wf_session_run(sess, &feed, 1, &m.probs, 1, &y, NULL))) {
            free(t);
            goto out;
        }
        double dt = now_ms() - t0;
        if (it == 0) t_first = dt;
        else t[it - 1] = dt;
    }
    if (!t) {
        fprintf(stderr, "weft demo: out of memory\n");
        goto out;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    const float *yp = wf_tensor_data(y);
    double row = 0;
    for (int j = 0; j < 10; j++) row += yp[j];
    printf("\nfirst run (plans the graph): %.3f ms\n", t_first);
    printf("time per batch of %d: median %.3f ms, min %.3f ms over %d runs (%.0f samples/s)\n", batch,
           t[iters / 2], t[0], iters, batch / (t[iters / 2] / 1e3));
    printf("softmax row 0 sums to %.6f; class probabilities:", row);
    for (int j = 0; j < 10; j++) printf(" %.3f", yp[j]);
    printf("\n");
    free(t);
    rc = 0;
out:
    if (s) rc = cli_fail(s);
    wf_free(placement);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_session_free(sess);
    wf_graph_free(g);
    wf_context_free(ctx);
    return rc;
}
