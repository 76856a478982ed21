/*
 * AUTOTUNE for input pipelines, after tf.data's model (TensorFlow core/framework/model.cc): every stage
 * records its processing time, elements and buffered bytes (pipeline.h's wf__stage_stats); a
 * background thread models the pipeline and turns the knobs with the best modelled gain, within the
 * iterator's CPU budget (threads) and RAM budget (bytes).
 *
 * The model. A parallel stage with per-element cost c (its busy time over its elements, all threads
 * summed) and parallelism p produces at most p / c elements per second; the pipeline's output time
 * per element is the largest c / p among them (the bottleneck). Raising stage i's p by one gains
 * T - T_i' where T_i' is the output time with that change. Each round the optimiser takes the raise
 * with the largest gain while the sum of parallelism stays within the CPU budget, and only when the
 * stage's consumer actually waited on it since the last round (no wait: more threads would only sit
 * in the buffer). A prefetch buffer grows by one when, since the last round, its consumer waited
 * and its producer found it full (a burst it could have absorbed), and one more element of the
 * measured size fits the RAM budget; when the buffers together exceed the budget, the largest
 * tuned buffer shrinks. TensorFlow's optimiser does gradient steps on the same model; the hill
 * climb is simpler and converges in a few rounds for pipelines of a few stages.
 *
 * Rounds run every 10 ms for the first 50 rounds, then every 100 ms.
 */
#include <errno.h>
#include <time.h>

#include "data/pipeline.h"

static void knob_set(wf__stage_stats *st, int v)
{
    if (st->mu) pthread_mutex_lock(st->mu);
    atomic_store(&st->knob, v);
    if (st->cv) pthread_cond_broadcast(st->cv);
    if (st->mu) pthread_mutex_unlock(st->mu);
}

/* Per-element cost of a stage in ns, or 0 before it has produced anything. */
static double cost_ns(const wf__stage_stats *st)
{
    int64_t n = atomic_load(&st->elements);
    return n ? (double)atomic_load(&st->busy_ns) / (double)n : 0;
}

void wf__autotune_step(wf__pipe *p)
{
    pthread_mutex_lock(&p->mu);
    int used = 0;
    double worst = 0;
    for (int i = 0; i < p->n_stats; i++) {
        wf__stage_stats *st = p->stats[i];
        if (st->knob_kind != 1) continue;
        used += atomic_load(&st->knob);
        double c = cost_ns(st) / atomic_load(&st->knob);
        if (c > worst) worst = c;
    }
    /* parallelism: the raise with the largest modelled gain */
    wf__stage_stats *best = NULL;
    double best_gain = 0;
    for (int i = 0; i < p->n_stats; i++) {
        wf__stage_stats *st = p->stats[i];
        if (st->knob_kind != 1 || !st->tuned) continue;
        int k = atomic_load(&st->knob);
        double c = cost_ns(st);
        if (k >= st->knob_max || used + 1 > p->cpu_budget || c <= 0 || !atomic_load(&st->wants_more)) continue;
        /* the output time after raising this one: the largest c/p with this p + 1 */
        double t = c / (k + 1);
        for (int j = 0; j < p->n_stats; j++) {
            wf__stage_stats *o = p->stats[j];
            if (o == st || o->knob_kind != 1) continue;
            double oc = cost_ns(o) / atomic_load(&o->knob);
            if (oc > t) t = oc;
        }
        double gain = worst - t;
        if (gain > best_gain * 1.0001 || (!best && gain >= 0)) {
            best = st;
            best_gain = gain;
        }
    }
    if (best) knob_set(best, atomic_load(&best->knob) + 1);
    /* buffers: grow where the consumer waited and RAM allows; shrink the largest when over budget */
    int64_t buffered = atomic_load(&p->buffered);
    wf__stage_stats *largest = NULL;
    for (int i = 0; i < p->n_stats; i++) {
        wf__stage_stats *st = p->stats[i];
        if (st->knob_kind != 2 || !st->tuned) continue;
        int k = atomic_load(&st->knob);
        int64_t eb = atomic_load(&st->elem_bytes);
        if (!largest || (int64_t)k * eb > (int64_t)atomic_load(&largest->knob) * atomic_load(&largest->elem_bytes))
            largest = st;
        bool fits = !p->ram_budget || (uint64_t)(buffered + eb) <= p->ram_budget;
        /* a bigger buffer helps only when the producer outran the consumer at times (it filled the
         * buffer) and the consumer still waited at others; a producer that is simply slower never
         * fills it, and growing would only hold memory (tf.data grows buffers on the same signal) */
        if (atomic_load(&st->wants_more) && atomic_load(&st->saturated) && k < st->knob_max && fits) {
            knob_set(st, k + 1);
            buffered += eb;
        }
    }
    if (p->ram_budget && (uint64_t)atomic_load(&p->buffered) > p->ram_budget && largest && atomic_load(&largest->knob) > 1)
        knob_set(largest, atomic_load(&largest->knob) - 1);
    for (int i = 0; i < p->n_stats; i++) {
        atomic_store(&p->stats[i]->wants_more, false);
        atomic_store(&p->stats[i]->saturated, false);
    }
    pthread_mutex_unlock(&p->mu);
}

static bool any_tuned(wf__pipe *p)
{
    pthread_mutex_lock(&p->mu);
    bool t = false;
    for (int i = 0; i < p->n_stats && !t; i++) t = p->stats[i]->tuned;
    pthread_mutex_unlock(&p->mu);
    return t;
}

static void *tuner(void *arg)
{
    wf__pipe *p = arg;
    pthread_mutex_lock(&p->tmu);
    for (int round = 0; p->tuner_running; round++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ms = round < 50 ? 10 : 100;
        ts.tv_nsec += ms * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        int rc = pthread_cond_timedwait(&p->tcv, &p->tmu, &ts);
        if (!p->tuner_running) break;
        if (rc == ETIMEDOUT) {
            pthread_mutex_unlock(&p->tmu);
            wf__autotune_step(p);
            pthread_mutex_lock(&p->tmu);
        }
    }
    pthread_mutex_unlock(&p->tmu);
    return NULL;
}

wf_status *wf__autotune_start(wf__pipe *p)
{
    if (!any_tuned(p)) return NULL;
    pthread_mutex_lock(&p->tmu);
    p->tuner_running = true;
    int rc = pthread_create(&p->tuner, NULL, tuner, p);
    if (rc) p->tuner_running = false;
    pthread_mutex_unlock(&p->tmu);
    return rc ? wf__status(WF_UNAVAILABLE, "autotune: cannot start its thread") : NULL;
}

void wf__autotune_stop(wf__pipe *p)
{
    pthread_mutex_lock(&p->tmu);
    bool was = p->tuner_running;
    p->tuner_running = false;
    pthread_cond_broadcast(&p->tcv);
    pthread_mutex_unlock(&p->tmu);
    if (was) pthread_join(p->tuner, NULL);
}
