/*
 * Intra-op parallelism on the CPU. Our loops and oneDNN share one OpenMP runtime; a context-wide flag
 * lets one large kernel at a time use every core while any other that starts meanwhile runs on its
 * own thread, so concurrent nodes never oversubscribe the cores.
 */
#include <omp.h>

#include "device/device.h"
#include "device/kernel.h"

int wf__kctx_threads(const wf__kctx *k) { return k->intra ? k->intra->threads : 1; }

typedef struct {
    wf__range_fn fn;
    void *arg;
    int64_t n, chunk;
} par_job;

void wf__parallel_for(wf__kctx *k, int64_t n, int64_t grain, wf__range_fn fn, void *arg)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    wf__intra *in = k ? k->intra : NULL;
    int threads = in ? in->threads : 1;
    if (threads <= 1 || n < 2 * grain || atomic_flag_test_and_set_explicit(&in->busy, memory_order_acquire)) {
        fn(arg, 0, n);
        return;
    }
    int64_t max_tasks = n / grain;
    int nt = max_tasks < threads ? (int)max_tasks : threads;
    /* Contiguous equal blocks, one per thread: the loops we run are uniform in cost. */
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t b = n * t / T, e = n * (t + 1) / T;
        if (b < e) fn(arg, b, e);
    }
    atomic_flag_clear_explicit(&in->busy, memory_order_release);
}

int wf__intra_begin(wf__kctx *k)
{
    wf__intra *in = k ? k->intra : NULL;
    if (in && in->threads > 1 && !atomic_flag_test_and_set_explicit(&in->busy, memory_order_acquire)) {
        omp_set_num_threads(in->threads);
        return 1;
    }
    omp_set_num_threads(1);
    return 0;
}

int wf__intra_begin_create(wf__kctx *k)
{
    omp_set_num_threads(k && k->intra && k->intra->threads > 0 ? k->intra->threads : 1);
    return 0;
}

void wf__intra_end(wf__kctx *k, int token)
{
    omp_set_num_threads(1);
    if (token && k && k->intra) atomic_flag_clear_explicit(&k->intra->busy, memory_order_release);
}
