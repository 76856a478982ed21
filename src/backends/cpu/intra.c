/*
 * Intra-op parallelism on the CPU. Our loops and oneDNN share one OpenMP runtime; a context-wide flag
 * lets one large kernel at a time use every core while any other that starts meanwhile runs on its
 * own thread, so concurrent nodes never oversubscribe the cores.
 *
 * A parallel region costs a wake-up of the other threads and a barrier: with libgomp waiting passively
 * (OMP_WAIT_POLICY=PASSIVE, which the weft executables set, see tools/weft/omp_passive.c) about 10-30 us
 * on 2 cores. A kernel the placer estimates below WF__INTRA_MIN_EST therefore runs on the calling
 * thread: on the test models' small layers (MLP, LeNet-5, attention) the region cost more than it saved
 * (LeNet-5 0.40 ms a run with regions, 0.20 ms without).
 *
 * On a machine whose cores other processes keep busy, a region waits at its barrier until every one of
 * its threads got a core, up to a scheduler time slice (milliseconds) per region. So before a parallel
 * kernel, at most once per probe interval, an empty region of the same threads is timed: when the other
 * threads took longer than WF__INTRA_LATE_NS to join, kernels run on the calling thread until the next
 * probe, and the interval doubles (up to WF__INTRA_PROBE_MAX_NS) while that lasts, so that probing a busy
 * machine costs little; an idle result restores every thread and the shortest interval. With the load
 * average at 15 on 2 cores, `weft demo` took 44 ms a step by default (0.7 to 124 ms) before, against
 * 0.49 ms with --threads 1.
 */
#include <omp.h>
#include <stdatomic.h>

#include "device/device.h"
#include "device/kernel.h"

#define WF__INTRA_MIN_EST 30e-6

#define WF__INTRA_LATE_NS 150000
#define WF__INTRA_PROBE_MIN_NS 10000000
#define WF__INTRA_PROBE_MAX_NS 1000000000

/* process-wide: the cores are shared by every context */
static _Atomic int64_t g_next_probe_ns;
static _Atomic int64_t g_probe_interval_ns = WF__INTRA_PROBE_MIN_NS;
static atomic_int g_solo; /* the last probe found the cores busy */

/* Whether `threads` threads may run a region now; probes when the last probe is old. The caller holds
 * the intra-op flag, so regions never overlap a probe. */
static bool cores_free(int threads)
{
    int64_t now = wf__now_ns(), next = atomic_load_explicit(&g_next_probe_ns, memory_order_relaxed);
    if (now < next ||
        !atomic_compare_exchange_strong_explicit(&g_next_probe_ns, &next, INT64_MAX, memory_order_relaxed,
                                                 memory_order_relaxed))
        return !atomic_load_explicit(&g_solo, memory_order_relaxed);
    int64_t t0 = wf__now_ns();
#pragma omp parallel num_threads(threads)
    {
        (void)omp_get_thread_num();
    }
    int64_t took = wf__now_ns() - t0;
    bool busy = took > WF__INTRA_LATE_NS;
    int64_t iv = atomic_load_explicit(&g_probe_interval_ns, memory_order_relaxed);
    iv = busy ? (iv * 2 < WF__INTRA_PROBE_MAX_NS ? iv * 2 : WF__INTRA_PROBE_MAX_NS) : WF__INTRA_PROBE_MIN_NS;
    atomic_store_explicit(&g_probe_interval_ns, iv, memory_order_relaxed);
    atomic_store_explicit(&g_solo, busy, memory_order_relaxed);
    atomic_store_explicit(&g_next_probe_ns, wf__now_ns() + iv, memory_order_relaxed);
    return !busy;
}

/* After a region of a kernel estimated at est s that took `took` ns: far slower than its estimate means
 * a thread waited for a core, handled like a busy probe. */
static void region_done(double est, int64_t took)
{
    if (!(est > 0) || took <= (int64_t)(4 * est * 1e9) + WF__INTRA_LATE_NS) return;
    int64_t iv = atomic_load_explicit(&g_probe_interval_ns, memory_order_relaxed);
    iv = iv * 2 < WF__INTRA_PROBE_MAX_NS ? iv * 2 : WF__INTRA_PROBE_MAX_NS;
    atomic_store_explicit(&g_probe_interval_ns, iv, memory_order_relaxed);
    atomic_store_explicit(&g_solo, 1, memory_order_relaxed);
    atomic_store_explicit(&g_next_probe_ns, wf__now_ns() + iv, memory_order_relaxed);
}

static _Thread_local int64_t tl_region_t0;
static _Thread_local double tl_region_est;

/* Worth a parallel region: no estimate (kernels run outside a plan) or one of at least the minimum. */
static bool big_enough(const wf__kctx *k) { return !(k->est > 0) || k->est >= WF__INTRA_MIN_EST; }

int wf__kctx_threads(const wf__kctx *k) { return k->intra && big_enough(k) ? k->intra->threads : 1; }

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
    if (threads <= 1 || n < 2 * grain || !big_enough(k) || atomic_flag_test_and_set_explicit(&in->busy, memory_order_acquire)) {
        fn(arg, 0, n);
        return;
    }
    int64_t max_tasks = n / grain;
    int nt = max_tasks < threads ? (int)max_tasks : threads;
    if (!cores_free(nt)) {
        atomic_flag_clear_explicit(&in->busy, memory_order_release);
        fn(arg, 0, n);
        return;
    }
    /* Contiguous equal blocks, one per thread: the loops we run are uniform in cost. */
    int64_t t0 = wf__now_ns();
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int64_t b = n * t / T, e = n * (t + 1) / T;
        if (b < e) fn(arg, b, e);
    }
    region_done(k->est, wf__now_ns() - t0);
    atomic_flag_clear_explicit(&in->busy, memory_order_release);
}

int wf__intra_begin(wf__kctx *k)
{
    wf__intra *in = k ? k->intra : NULL;
    if (in && in->threads > 1 && big_enough(k) && !atomic_flag_test_and_set_explicit(&in->busy, memory_order_acquire)) {
        if (cores_free(in->threads)) {
            omp_set_num_threads(in->threads);
            tl_region_t0 = wf__now_ns();
            tl_region_est = k->est;
            return 1;
        }
        atomic_flag_clear_explicit(&in->busy, memory_order_release);
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
    if (token) region_done(tl_region_est, wf__now_ns() - tl_region_t0);
    if (token && k && k->intra) atomic_flag_clear_explicit(&k->intra->busy, memory_order_release);
}
