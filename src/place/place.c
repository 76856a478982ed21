/*
 * HEFT placement (Topcuoglu et al., 2002) with the copies weft really makes: one per (value, device),
 * shared by every later reader there, and a memory estimate per device from the liveness of the values
 * it holds in schedule order. The same list scheduler evaluates a given assignment, so benchmarks can
 * compare other placement rules under one cost model.
 */
#include <math.h>
#include <stdlib.h>

#include "core/core.h"
#include "place/place.h"

double wf__place_exec_time(const wf__place_dev *d, double flops, double bytes)
{
    bool dense = flops >= 4 * bytes && flops > 0;
    double rate = dense ? d->dense_flops : d->vector_flops;
    double bw = d->mem_bw;
    double tc = flops > 0 ? flops / (rate > 0 ? rate : 1e9) : 0;
    double tm = bytes > 0 ? bytes / (bw > 0 ? bw : 1e9) : 0;
    return d->launch + (tc > tm ? tc : tm);
}

typedef struct ranked {
    double rank;
    int id;
} ranked;

static int by_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static inline double copy_time(const wf__place_problem *p, int from, int to, double bytes)
{
    int k = from * p->n_dev + to;
    double bw = p->link_bw[k];
    return p->link_lat[k] + (bw > 0 ? bytes / bw : 0);
}

static inline bool is_resident(const wf__place_problem *p, int v)
{
    return p->resident && p->resident[v] && p->in_start[v + 1] == p->in_start[v];
}

/* The priority order: upward rank with mean run times over each node's allowed devices and mean copy
 * times over device pairs. Ties go to the lower id, so the order is topological even when a node costs
 * nothing (rank(u) = w(u) + c + rank(v) >= rank(v) for every edge u -> v). */
static wf_status *priority_order(const wf__place_problem *p, int *order)
{
    int n = p->n_nodes, D = p->n_dev;
    double *rank = wf__calloc((size_t)(n ? n : 1), sizeof *rank);
    ranked *rk = wf__malloc(sizeof *rk * (size_t)(n ? n : 1));
    if (!rank || !rk) {
        wf__free(rank);
        wf__free(rk);
        return wf__oom("placement", sizeof *rk * (size_t)n);
    }
    double mean_lat = 0, mean_inv_bw = 0;
    int pairs = 0;
    for (int a = 0; a < D; a++)
        for (int b = 0; b < D; b++) {
            if (a == b) continue;
            mean_lat += p->link_lat[a * D + b];
            mean_inv_bw += p->link_bw[a * D + b] > 0 ? 1.0 / p->link_bw[a * D + b] : 0;
            pairs++;
        }
    if (pairs) {
        mean_lat /= pairs;
        mean_inv_bw /= pairs;
    }
    /* Walk backwards, pushing each node's rank into its producers. */
    for (int v = n - 1; v >= 0; v--) {
        double w = 0;
        int k = 0;
        for (int d = 0; d < D; d++)
            if (p->allowed[v] >> d & 1) {
                w += wf__place_exec_time(&p->dev[d], p->flops[v], p->bytes[v]);
                k++;
            }
        rank[v] += k ? w / k : 0; /* rank[v] held the best successor term so far */
        for (int e = p->in_start[v]; e < p->in_start[v + 1]; e++) {
            int u = p->in_src[e];
            if (u < 0) continue;
            double c = pairs ? mean_lat + p->out_bytes[u] * mean_inv_bw : 0;
            if (c + rank[v] > rank[u]) rank[u] = c + rank[v];
        }
    }
    for (int v = 0; v < n; v++) rk[v] = (ranked){rank[v], v};
    qsort(rk, (size_t)n, sizeof *rk, by_rank);
    for (int v = 0; v < n; v++) order[v] = rk[v].id;
    wf__free(rank);
    wf__free(rk);
    return NULL;
}

typedef struct sched {
    int *order, *dev, *uses, *group_dev;
    double *finish;
    float *arrive;      /* [u * D + d]: when u's copy reaches d; < 0: none */
    uint64_t *copied, *res_on, *group_mask;
    int n_groups;
} sched;

static void sched_free(sched *s)
{
    wf__free(s->order);
    wf__free(s->dev);
    wf__free(s->uses);
    wf__free(s->group_dev);
    wf__free(s->finish);
    wf__free(s->arrive);
    wf__free(s->copied);
    wf__free(s->res_on);
    wf__free(s->group_mask);
}

static wf_status *sched_init(const wf__place_problem *p, sched *s)
{
    int n = p->n_nodes, D = p->n_dev;
    size_t nn = (size_t)(n ? n : 1);
    memset(s, 0, sizeof *s);
    if (D < 1 || D > WF__PLACE_MAX_DEV)
        return wf__status(WF_INVALID_ARGUMENT, "placement: %d devices (1 to %d are supported)", D, WF__PLACE_MAX_DEV);
    for (int v = 0; p->group && v < n; v++)
        if (p->group[v] >= s->n_groups) s->n_groups = p->group[v] + 1;
    s->order = wf__malloc(sizeof(int) * nn);
    s->dev = wf__malloc(sizeof(int) * nn);
    s->uses = wf__calloc(nn, sizeof(int));
    s->finish = wf__calloc(nn, sizeof(double));
    s->arrive = wf__malloc(sizeof(float) * nn * (size_t)D);
    s->copied = wf__calloc(nn, sizeof(uint64_t));
    s->res_on = wf__calloc(nn, sizeof(uint64_t));
    s->group_dev = wf__malloc(sizeof(int) * (size_t)(s->n_groups ? s->n_groups : 1));
    s->group_mask = wf__malloc(sizeof(uint64_t) * (size_t)(s->n_groups ? s->n_groups : 1));
    if (!s->order || !s->dev || !s->uses || !s->finish || !s->arrive || !s->copied || !s->res_on ||
        !s->group_dev || !s->group_mask) {
        sched_free(s);
        return wf__oom("placement", sizeof(float) * nn * (size_t)D);
    }
    for (int v = 0; v < n; v++) s->dev[v] = -1;
    for (size_t i = 0; i < nn * (size_t)D; i++) s->arrive[i] = -1;
    for (int g = 0; g < s->n_groups; g++) {
        s->group_dev[g] = -1;
        s->group_mask[g] = ~(uint64_t)0;
    }
    for (int v = 0; v < n; v++) {
        if (p->group && p->group[v] >= 0) s->group_mask[p->group[v]] &= p->allowed[v];
        for (int e = p->in_start[v]; e < p->in_start[v + 1]; e++)
            if (p->in_src[e] >= 0) s->uses[p->in_src[e]]++;
    }
    wf_status *st = priority_order(p, s->order);
    if (st) sched_free(s);
    return st;
}

/* What running v on d would cost now: start, run time, the longest copy it waits for, new bytes. */
typedef struct trial {
    double ready, est, copy, start, eft, new_bytes;
} trial;

/* The device whose timeline device d's nodes occupy. */
static int timeline(const wf__place_problem *p, int d) { return p->dev[d].shares_with ? p->dev[d].shares_with - 1 : d; }

static trial try_device(const wf__place_problem *p, const sched *s, const double *avail, int v, int d)
{
    int D = p->n_dev;
    trial t = {0};
    t.new_bytes = p->out_bytes[v];
    for (int e = p->in_start[v]; e < p->in_start[v + 1]; e++) {
        int u = p->in_src[e];
        if (u < 0) continue;
        if (is_resident(p, u)) {
            if (!(s->res_on[u] >> d & 1)) t.new_bytes += p->out_bytes[u];
            continue;
        }
        double at;
        if (s->dev[u] == d) {
            at = s->finish[u];
        } else if (s->arrive[(size_t)u * D + d] >= 0) {
            at = s->arrive[(size_t)u * D + d];
        } else {
            double c = copy_time(p, s->dev[u], d, p->out_bytes[u]);
            if (c > t.copy) t.copy = c;
            at = s->finish[u] + c;
            t.new_bytes += p->out_bytes[u];
        }
        if (at > t.ready) t.ready = at;
    }
    t.est = wf__place_exec_time(&p->dev[d], p->flops[v], p->bytes[v]);
    double free_at = avail[timeline(p, d)];
    t.start = t.ready > free_at ? t.ready : free_at;
    t.eft = t.start + t.est;
    return t;
}

/* List scheduling in priority order: each node on fixed[v] when given, else on its best device. */
static wf_status *schedule(const wf__place_problem *p, const int *fixed, wf__place_result *r)
{
    sched s;
    WF__TRY(sched_init(p, &s));
    int n = p->n_nodes, D = p->n_dev;
    double avail[WF__PLACE_MAX_DEV] = {0}, mem[WF__PLACE_MAX_DEV] = {0};
    memset(r->peak, 0, sizeof r->peak);
    r->makespan = 0;
    wf_status *st = NULL;
    for (int i = 0; i < n && !st; i++) {
        int v = s.order[i];
        wf__place_choice *ch = &r->node[v];
        memset(ch, 0, sizeof *ch);
        ch->alt = -1;
        if (is_resident(p, v)) {
            ch->dev = -1; /* set by its first consumer */
            continue;
        }
        for (int e = p->in_start[v]; e < p->in_start[v + 1]; e++) {
            int u = p->in_src[e];
            if (u >= 0 && !is_resident(p, u) && s.dev[u] < 0) {
                st = wf__status(WF_INTERNAL, "placement: node %d scheduled before its input %d", v, u);
                break;
            }
        }
        if (st) break;
        uint64_t cand = fixed ? (uint64_t)1 << fixed[v] : p->allowed[v];
        int g = p->group ? p->group[v] : -1;
        if (!fixed && g >= 0) {
            if (s.group_dev[g] >= 0) cand = (uint64_t)1 << s.group_dev[g];
            else if (cand & s.group_mask[g]) cand &= s.group_mask[g];
        }
        if (!fixed && p->pinned && p->pinned[v] && cand) cand &= ~cand + 1; /* lowest set bit */
        int best = -1, second = -1, over = -1;
        trial tb = {0}, ts = {0}, to = {0};
        uint64_t extra = !fixed && p->fallback ? p->fallback[v] & ~cand : 0;
        for (int pass = 0; pass < 2 && best < 0; pass++)
        for (int d = 0; d < D; d++) {
            /* the second pass: soft placement's other devices, when no allowed one has the memory */
            if (!((pass ? extra : cand) >> d & 1)) continue;
            trial t = try_device(p, &s, avail, v, d);
            double lim = p->dev[d].mem_limit;
            if (!fixed && lim > 0 && mem[d] + t.new_bytes > lim) {
                ch->mem_excluded |= (uint64_t)1 << d;
                if (over < 0 || t.eft < to.eft) {
                    over = d;
                    to = t;
                }
                continue;
            }
            if (best < 0 || t.eft < tb.eft) {
                second = best;
                ts = tb;
                best = d;
                tb = t;
            } else if (second < 0 || t.eft < ts.eft) {
                second = d;
                ts = t;
            }
        }
        if (best < 0) { /* every candidate is over its limit: the least bad one, and say so */
            best = over;
            tb = to;
        }
        if (best < 0) {
            st = wf__status(WF_INTERNAL, "placement: node %d has no device to run on", v);
            break;
        }
        ch->dev = best;
        ch->est = (float)tb.est;
        ch->copy = (float)tb.copy;
        ch->start = (float)tb.start;
        ch->finish = (float)tb.eft;
        if (second >= 0) {
            ch->alt = second;
            ch->alt_est = (float)ts.est;
            ch->alt_copy = (float)ts.copy;
        } else if (over >= 0 && over != best) {
            ch->alt = over;
            ch->alt_est = (float)to.est;
            ch->alt_copy = (float)to.copy;
        }
        /* commit: copies, resident inputs, the output, then release inputs read for the last time */
        for (int e = p->in_start[v]; e < p->in_start[v + 1]; e++) {
            int u = p->in_src[e];
            if (u < 0) continue;
            if (is_resident(p, u)) {
                if (!(s.res_on[u] >> best & 1)) {
                    s.res_on[u] |= (uint64_t)1 << best;
                    mem[best] += p->out_bytes[u];
                }
                if (r->node[u].dev < 0) r->node[u].dev = best;
                continue;
            }
            if (s.dev[u] != best && s.arrive[(size_t)u * D + best] < 0) {
                s.arrive[(size_t)u * D + best] = (float)(s.finish[u] + copy_time(p, s.dev[u], best, p->out_bytes[u]));
                s.copied[u] |= (uint64_t)1 << best;
                mem[best] += p->out_bytes[u];
            }
        }
        mem[best] += p->out_bytes[v];
        if (mem[best] > r->peak[best]) r->peak[best] = mem[best];
        for (int e = p->in_start[v]; e < p->in_start[v + 1]; e++) {
            int u = p->in_src[e];
            if (u < 0 || is_resident(p, u) || --s.uses[u] > 0) continue;
            mem[s.dev[u]] -= p->out_bytes[u];
            for (int d = 0; d < D; d++)
                if (s.copied[u] >> d & 1) mem[d] -= p->out_bytes[u];
        }
        s.dev[v] = best;
        s.finish[v] = tb.eft;
        avail[timeline(p, best)] = tb.eft;
        if (g >= 0 && s.group_dev[g] < 0) s.group_dev[g] = best;
        if (tb.eft > r->makespan) r->makespan = tb.eft;
    }
    /* a constant nobody scheduled reads stays on the first allowed device */
    for (int v = 0; v < n && !st; v++)
        if (is_resident(p, v) && r->node[v].dev < 0) {
            uint64_t a = fixed ? (uint64_t)1 << fixed[v] : p->allowed[v];
            int d = 0;
            while (d < D - 1 && !(a >> d & 1)) d++;
            r->node[v].dev = d;
        }
    sched_free(&s);
    return st;
}

wf_status *wf__place_heft(const wf__place_problem *p, wf__place_result *r) { return schedule(p, NULL, r); }

wf_status *wf__place_evaluate(const wf__place_problem *p, const int *dev_of, wf__place_result *r)
{
    for (int v = 0; v < p->n_nodes; v++)
        if (dev_of[v] < 0 || dev_of[v] >= p->n_dev)
            return wf__status(WF_INVALID_ARGUMENT, "placement: node %d is assigned device %d of %d", v, dev_of[v],
                              p->n_dev);
    return schedule(p, dev_of, r);
}

double wf__place_lower_bound(const wf__place_problem *p)
{
    int n = p->n_nodes;
    double *lb = wf__calloc((size_t)(n ? n : 1), sizeof *lb), best = 0;
    if (!lb) return 0;
    for (int v = 0; v < n; v++) {
        double w = INFINITY;
        for (int d = 0; d < p->n_dev; d++)
            if (p->allowed[v] >> d & 1) {
                double t = wf__place_exec_time(&p->dev[d], p->flops[v], p->bytes[v]);
                if (t < w) w = t;
            }
        if (is_resident(p, v) || w == INFINITY) w = 0;
        double in = 0;
        for (int e = p->in_start[v]; e < p->in_start[v + 1]; e++)
            if (p->in_src[e] >= 0 && lb[p->in_src[e]] > in) in = lb[p->in_src[e]];
        lb[v] = in + w;
        if (lb[v] > best) best = lb[v];
    }
    wf__free(lb);
    return best;
}
