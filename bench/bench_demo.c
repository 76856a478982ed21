/* The demo model's forward pass (Flatten 784 -> Dense 128 relu -> Dense 10 softmax) at batch 256:
 * milliseconds per batch and samples per second, median of repeated runs. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../tools/weft/demo_model.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(wf_status *s)
{
    if (!s) return;
    fprintf(stderr, "bench_demo: %s\n", wf_status_message(s));
    exit(1);
}

int main(void)
{
    enum { BATCH = 256, REPS = 200 };
    wf_context *ctx;
    wf_graph *g;
    wf_session *s;
    demo_model m;
    die(wf_context_new(NULL, &ctx));
    die(wf_graph_new(&g));
    die(demo_model_build(g, 42, &m));
    die(wf_session_new(ctx, g, NULL, &s));
    int64_t dims[3] = {BATCH, 28, 28};
    wf_tensor *x, *y;
    die(wf_tensor_new(WF_F32, 3, dims, NULL, &x));
    float *xp = wf_tensor_data(x);
    for (int i = 0; i < BATCH * 784; i++) xp[i] = (float)(i % 255) / 255.0f;
    wf_feed f = {m.input, x};
    static double t[REPS];
    for (int r = -3; r < REPS; r++) {
        double t0 = now_ms();
        die(wf_session_run(s, &f, 1, &m.probs, 1, &y, NULL));
        if (r >= 0) t[r] = now_ms() - t0;
        wf_tensor_free(y);
    }
    qsort(t, REPS, sizeof t[0], cmp);
    double flops = 2.0 * BATCH * (784 * 128 + 128 * 10);
    printf("demo model forward, batch %d: median %.3f ms (min %.3f), %.0f samples/s, %.1f GFLOP/s\n", BATCH,
           t[REPS / 2], t[0], BATCH / (t[REPS / 2] / 1e3), flops / (t[REPS / 2] / 1e3) / 1e9);
    wf_tensor_free(x);
    wf_session_free(s);
    wf_graph_free(g);
    wf_context_free(ctx);
    return 0;
}
