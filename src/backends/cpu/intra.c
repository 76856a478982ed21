/*
 * Intra-op parallelism on the CPU. Our loops and oneDNN share one OpenMP runtime; a context-wide flag
 * lets one large kernel at a time use every core while any other that starts meanwhile runs on its
 * own thread, so concurrent nodes never oversubscribe the cores.
 *
 * A parallel region costs a wake-up of the other threads and a barrier: 1-4 us while libgomp's threads
 * still spin from the last region (its default, GOMP_SPINCOUNT 300000, about 3 ms), 10-90 us once they
 * sleep (OMP_WAIT_POLICY=PASSIVE) on 2 cores. A kernel the placer estimates below WF__INTRA_MIN_EST therefore runs on the calling
 * thread: on the test models' small layers (MLP, LeNet-5, attention) the region cost more than it saved
 * (LeNet-5 0.40 ms a run with regions, 0.20 ms without). The estimates run low: MobileNetV3-small's
 * convolutions take 1.4x their estimate alone (median; 22 us estimates are 34-40 us), so at 30 us they
 * all ran on one thread and a second thread gained that model nothing. At 20 us MobileNetV3-small and
 * ShuffleNetV2 run 8% faster (levels 2 and 3), the MLP, LeNet-5, MobileNetV2, EfficientNet-B0,
 * SqueezeNet and GoogLeNet no faster or slower (interleaved runs, bench_ort.py's models). At 10 us
 * (2026-12-07, Zen 3, level 3, sums of node minima over 6-8 interleaved traced runs, 20 / 10 / 5 us):
 * MobileNetV3-small 1862 / 1612 / 1616 and 1708 / 1513 / 1627 us (its 5x5 depthwise convolutions are
 * estimated at 12-16 us and take 28-37 alone), ShuffleNetV2 3373 / 3480 / 3266 and 3351 / 3228 / 3235,
 * EfficientNet-B0 8574 / 8493 / 8547; `weft demo`'s training step and bench_demo within their noise.
 * WEFT_INTRA_MIN_US overrides it (measurements).
 *
 * On a machine whose cores other processes keep busy, a region waits at its barrier until every one of
 * its threads got a core, up to a scheduler time slice (milliseconds) per region. So before a parallel
 * kernel, at most once per probe interval, an empty region of the same threads is timed: when the other
 * threads took longer than WF__INTRA_LATE_NS to join, kernels run on the calling thread until the next
 * probe, and the interval doubles (up to WF__INTRA_PROBE_MAX_NS) while that lasts, so that probing a busy
 * machine costs little; an idle result halves it again. With the load average at 15 on 2 cores,
 * `weft demo` took 44 ms a step by default (0.7 to 124 ms) before, against 0.49 ms with --threads 1.
 *
 * A probe does not see one core kept busy by one other process: the woken thread preempts it at once,
 * joins in time, and then shares that core for the rest of the region, whose equal halves make it as
 * slow as one thread (ResNet-18 with a busy loop on the other core: 160 ms a run by default against
 * 132 ms with --threads 1). So a region of a kernel estimated at WF__INTRA_WATCH_EST or more reads the
 * process's involuntary context switches and CPU time before and after (getrusage, about 1 us each):
 * preempted threads that steadily lose time (the average in region_done) mean another process wants the
 * cores, handled like a busy probe. An idle machine preempts nobody; imbalance alone preempts nobody.
 */
#include <omp.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "device/device.h"
#include "device/kernel.h"
#include "intra.h"

#define WF__INTRA_MIN_EST 10e-6
#define WF__INTRA_WATCH_EST 200e-6

#define WF__INTRA_LATE_NS 150000
#define WF__INTRA_PROBE_MIN_NS 10000000
#define WF__INTRA_PROBE_MAX_NS 1000000000

/* process-wide: the cores are shared by every context */
static _Atomic int64_t g_next_probe_ns;
static _Atomic int64_t g_probe_interval_ns = WF__INTRA_PROBE_MIN_NS;
static atomic_int g_solo; /* the last probe found the cores busy */

/* Whether `threads` threads may run a region now; probes when the last probe is old. The caller holds
 * the intra-op flag, so regions never overlap a probe. */
/* WEFT_INTRA_SOLO=1 (tests): every kernel runs as if the cores were busy, on its calling thread. */
static int forced_solo(void)
{
    static atomic_int v = -1;
    int x = atomic_load_explicit(&v, memory_order_relaxed);
    if (x < 0) {
        const char *e = getenv("WEFT_INTRA_SOLO");
        x = e && *e && strcmp(e, "0") != 0;
        atomic_store_explicit(&v, x, memory_order_relaxed);
    }
    return x;
}

static bool cores_free(int threads)
{
    if (forced_solo()) return false;
    int64_t now = wf__now_ns(), next = atomic_load_explicit(&g_next_probe_ns, memory_order_relaxed);
    if (now < next ||
        !atomic_compare_exchange_strong_explicit(&g_next_probe_ns, &next, INT64_MAX, memory_order_relaxed,
                                                 memory_order_relaxed))
        return !atomic_load_explicit(&g_solo, memory_order_relaxed);
    /* Two regions, the second timed. The first starts the thread's team (at a process's first region:
     * thread creation, 170-200 us here) or wakes it (after a spell on one thread libgomp's threads sleep,
     * and waking a sleeping vCPU took 80-250 us in a VM), neither of which says anything about the cores:
     * timed, it found them "busy" and sent MobileNetV3-small's first 10-40 ms of kernels to one thread. */
#pragma omp parallel num_threads(threads)
    {
        (void)omp_get_thread_num();
    }
    int64_t t0 = wf__now_ns();
#pragma omp parallel num_threads(threads)
    {
        (void)omp_get_thread_num();
    }
    int64_t took = wf__now_ns() - t0;
    bool busy = took > WF__INTRA_LATE_NS;
    int64_t iv = atomic_load_explicit(&g_probe_interval_ns, memory_order_relaxed);
    /* halved, not reset, by a free probe: a region found the last busy spell, which a probe cannot see */
    iv = busy ? (iv * 2 < WF__INTRA_PROBE_MAX_NS ? iv * 2 : WF__INTRA_PROBE_MAX_NS)
              : (iv / 2 > WF__INTRA_PROBE_MIN_NS ? iv / 2 : WF__INTRA_PROBE_MIN_NS);
    atomic_store_explicit(&g_probe_interval_ns, iv, memory_order_relaxed);
    atomic_store_explicit(&g_solo, busy, memory_order_relaxed);
    atomic_store_explicit(&g_next_probe_ns, wf__now_ns() + iv, memory_order_relaxed);
    return !busy;
}

/* A parallel region in flight: when it began, its threads, and when watched the process's involuntary
 * context switches and CPU time then (preempt0 -1: not watched). */
typedef struct {
    int64_t t0, cpu0;
    long preempt0;
    double est;
    int threads;
} region;

/* The process's involuntary context switches and CPU time (all threads, ns). */
static long usage(int64_t *cpu_ns)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u)) return -1;
    *cpu_ns = ((int64_t)u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000000 +
              ((int64_t)u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1000;
    return u.ru_nivcsw;
}

static region region_begin(double est, int threads)
{
    region g = {.est = est, .threads = threads, .preempt0 = -1};
    if (est >= WF__INTRA_WATCH_EST) g.preempt0 = usage(&g.cpu0);
    g.t0 = wf__now_ns();
    return g;
}

/* The share of watched regions' thread time lost to preemption, a moving average in thousandths. */
static atomic_int g_lost_permille;

int wf__intra_lost_avg(int avg_permille, long preempted, int64_t cpu_ns, int threads, int64_t wall_ns)
{
    double share = preempted > 0 && threads > 0 && wall_ns > 0
                       ? 1.0 - (double)cpu_ns / ((double)threads * (double)wall_ns) : 0.0;
    int pm = share <= 0 ? 0 : share >= 1 ? 1000 : (int)(share * 1000 + 0.5);
    return (3 * avg_permille + pm) / 4;
}

/* After a region: far slower than its estimate, or preempted threads that lose a steady share of their
 * regions' time (threads x wall against the process's CPU time), mean threads wait for a core: handled
 * like a busy probe. The average keeps a process that preempts us now and then (a low-priority build, a
 * timer) from sending every kernel to one thread for a probe interval. */
static atomic_int g_slow_streak; /* how many regions in a row were slow */

/*
 * The window over which the share lost to preemption is judged: watched regions' thread time (threads x
 * wall) adds up to WF__INTRA_LOST_WINDOW_NS first. getrusage's CPU time is exact only to a scheduler tick
 * for the threads that are running on other cores, and adjusted between user and system time by tick
 * samples: over one region of a millisecond it read 5.1 ms of CPU for 2 threads x 1.07 ms, or 1.06 ms
 * ("half lost") on an idle VM, and judged region by region that sent ResNet-50's kernels to one thread
 * every 30 ms or so. Over 100 ms of thread time a tick's error is a few percent; a core kept busy by
 * another process (a quarter to a half lost) still shows within a window or two.
 */
#define WF__INTRA_LOST_WINDOW_NS 100000000
static _Atomic int64_t g_win_thr, g_win_cpu;
static atomic_long g_win_pre;

static void region_done(const region *g)
{
    int64_t took = wf__now_ns() - g->t0, cpu = 0;
    /* Slow twice in a row: one slow region is as often a team woken from sleep (the first region after a
     * spell on one thread, 2-3 ms in a VM) as a busy core. */
    bool slow1 = g->est > 0 && took > (int64_t)(4 * g->est * 1e9) + WF__INTRA_LATE_NS;
    int streak = slow1 ? atomic_fetch_add_explicit(&g_slow_streak, 1, memory_order_relaxed) + 1 : 0;
    if (!slow1) atomic_store_explicit(&g_slow_streak, 0, memory_order_relaxed);
    bool slow = streak >= 2;
    bool lost = false;
    if (g->preempt0 >= 0 && took > 0) {
        long n = usage(&cpu);
        /* judged over windows of watched regions (WF__INTRA_LOST_WINDOW_NS), not region by region */
        int64_t thr_ns = took * g->threads;
        atomic_fetch_add_explicit(&g_win_pre, n - g->preempt0, memory_order_relaxed);
        atomic_fetch_add_explicit(&g_win_cpu, cpu - g->cpu0, memory_order_relaxed);
        int64_t w = atomic_fetch_add_explicit(&g_win_thr, thr_ns, memory_order_relaxed) + thr_ns;
        if (w >= WF__INTRA_LOST_WINDOW_NS && atomic_compare_exchange_strong_explicit(&g_win_thr, &w, 0, memory_order_relaxed,
                                                                                      memory_order_relaxed)) {
            long pre = atomic_exchange_explicit(&g_win_pre, 0, memory_order_relaxed);
            int64_t wcpu = atomic_exchange_explicit(&g_win_cpu, 0, memory_order_relaxed);
            int avg = wf__intra_lost_avg(atomic_load_explicit(&g_lost_permille, memory_order_relaxed), pre, wcpu, 1, w);
            atomic_store_explicit(&g_lost_permille, avg, memory_order_relaxed);
            lost = avg > WF__INTRA_LOST_PERMILLE;
        }
    }
    if (!slow && !lost) return;
    int64_t iv = atomic_load_explicit(&g_probe_interval_ns, memory_order_relaxed);
    iv = iv * 2 < WF__INTRA_PROBE_MAX_NS ? iv * 2 : WF__INTRA_PROBE_MAX_NS;
    atomic_store_explicit(&g_probe_interval_ns, iv, memory_order_relaxed);
    atomic_store_explicit(&g_solo, 1, memory_order_relaxed);
    atomic_store_explicit(&g_next_probe_ns, wf__now_ns() + iv, memory_order_relaxed);
}

static _Thread_local region tl_region;

/* Worth a parallel region: no estimate (kernels run outside a plan) or one of at least the minimum. */
/* WF__INTRA_MIN_EST, or WEFT_INTRA_MIN_US (read once) */
static double min_est(void)
{
    static _Atomic double v = -1;
    double x = atomic_load_explicit(&v, memory_order_relaxed);
    if (x < 0) {
        const char *e = getenv("WEFT_INTRA_MIN_US");
        x = e ? atof(e) * 1e-6 : WF__INTRA_MIN_EST;
        atomic_store_explicit(&v, x, memory_order_relaxed);
    }
    return x;
}

static bool big_enough(const wf__kctx *k) { return !(k->est > 0) || k->est >= min_est(); }

int wf__kctx_threads(const wf__kctx *k) { return k->intra && big_enough(k) ? k->intra->threads : 1; }

/* The team's hand-over. libgomp passes a region's data to its pooled threads through its own futexes,
 * which ThreadSanitizer does not see: it took the workers' reads of a region's arguments, written by the
 * caller just before, for races (an intermittent failure of tsan:test_overlap). So the region itself is not
 * instrumented (GCC's outlined body inherits the attribute), and each member first acquires g_fork, which
 * the caller released before the region, and last releases the job's `joined`, which the caller acquires
 * after it: the order libgomp guarantees, in a form TSan checks. Two atomics a thread per region. */
typedef struct {
    wf__team_fn body;
    void *arg;
    atomic_int joined;
} team_job;

static atomic_int g_fork;

__attribute__((noinline)) static void team_member(team_job *j, int t, int T)
{
    (void)atomic_load_explicit(&g_fork, memory_order_acquire);
    j->body(j->arg, t, T);
    atomic_fetch_add_explicit(&j->joined, 1, memory_order_release);
}

__attribute__((no_sanitize_thread)) static void team_region(team_job *j, int threads)
{
#pragma omp parallel num_threads(threads)
    team_member(j, omp_get_thread_num(), omp_get_num_threads());
}

void wf__omp_team(int threads, wf__team_fn body, void *arg)
{
    team_job j = {body, arg, 0};
    atomic_fetch_add_explicit(&g_fork, 1, memory_order_release);
    team_region(&j, threads);
    (void)atomic_load_explicit(&j.joined, memory_order_acquire);
}

typedef struct {
    wf__range_fn fn;
    void *arg;
    int64_t n;
} par_job;

/* Contiguous equal blocks, one per thread: the loops we run are uniform in cost. */
static void par_block(void *arg, int t, int T)
{
    const par_job *p = arg;
    int64_t b = p->n * t / T, e = p->n * (t + 1) / T;
    if (b < e) p->fn(p->arg, b, e);
}

int wf__intra_threads(const wf__kctx *k) { return k && k->intra && k->intra->threads > 1 ? k->intra->threads : 1; }

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
    region g = region_begin(k->est, nt);
    par_job p = {fn, arg, n};
    wf__omp_team(nt, par_block, &p);
    region_done(&g);
    atomic_flag_clear_explicit(&in->busy, memory_order_release);
}

/* The calling thread's max-active-levels before a solo call, restored by wf__intra_end; -1: not changed.
 * oneDNN fixes a primitive's thread count at creation (jcp.nthr) and opens `omp parallel num_threads(nthr)`
 * whatever omp_set_num_threads said since, so the thread count alone does not keep a solo call on its
 * thread: a conv run "solo" still used every core (ResNet-18 forced solo: 55-70 ms, against 100-128 ms
 * at --threads 1). With max-active-levels 0 on the calling thread (an ICV of the thread's task in libgomp,
 * so other threads are unaffected) every region it opens is inactive: oneDNN's kernels are then called as
 * thread 0 of 1, the path they take inside a user's parallel region. */
static _Thread_local int tl_saved_levels = -1;

static void solo_enter(void)
{
    omp_set_num_threads(1);
    if (tl_saved_levels < 0) {
        tl_saved_levels = omp_get_max_active_levels();
        omp_set_max_active_levels(0);
    }
}

int wf__intra_begin(wf__kctx *k)
{
    wf__intra *in = k ? k->intra : NULL;
    if (in && in->threads > 1 && big_enough(k) && !atomic_flag_test_and_set_explicit(&in->busy, memory_order_acquire)) {
        if (cores_free(in->threads)) {
            omp_set_num_threads(in->threads);
            tl_region = region_begin(k->est, in->threads);
            return 1;
        }
        atomic_flag_clear_explicit(&in->busy, memory_order_release);
    }
    solo_enter();
    return 0;
}

int wf__intra_begin_exact(wf__kctx *k, int threads)
{
    wf__intra *in = k ? k->intra : NULL;
    if (threads <= 1 || !in) {
        solo_enter();
        return 0;
    }
    /* a concurrent kernel's region lasts at most milliseconds; yielding lets its threads have the cores */
    while (atomic_flag_test_and_set_explicit(&in->busy, memory_order_acquire)) sched_yield();
    omp_set_num_threads(threads);
    tl_region = region_begin(k->est, threads);
    return 1;
}

int wf__intra_begin_create(wf__kctx *k)
{
    /* a kernel too small for a region is built for one thread, as with --threads 1: oneDNN may pick
     * another implementation and work split for two threads, which this kernel would never use */
    omp_set_num_threads(k && k->intra && k->intra->threads > 0 && big_enough(k) ? k->intra->threads : 1);
    return 0;
}

void wf__intra_end(wf__kctx *k, int token)
{
    omp_set_num_threads(1);
    if (tl_saved_levels >= 0) {
        omp_set_max_active_levels(tl_saved_levels);
        tl_saved_levels = -1;
    }
    if (token) region_done(&tl_region);
    if (token && k && k->intra) atomic_flag_clear_explicit(&k->intra->busy, memory_order_release);
}
