/*
 * Sessions: a plan cache keyed by (feeds, fetches, input shapes) over one graph and context. Planning
 * happens once per key under the session lock; runs execute outside it, so threads run concurrently.
 */
#include <pthread.h>
#include <stdio.h>

#include "device/device.h"
#include "exec/exec.h"

struct wf_session {
    wf_context *ctx;       /* the caller's, or an own copy when the thread options differ */
    wf_context *own_ctx;
    wf_graph *g;
    pthread_mutex_t mu;
    wf__plan **plans;
    int n_plans, cap_plans;
    wf__place_opts place;
    char *device;
};

void wf_session_options_init(wf_session_options *o) { memset(o, 0, sizeof *o); }

wf_status *wf_session_new(wf_context *ctx, wf_graph *g, const wf_session_options *opts, wf_session **out)
{
    if (!ctx || !g || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_session_new: NULL context, graph or out");
    wf_session *s = wf__calloc(1, sizeof *s);
    if (!s) return wf__oom("a session", sizeof *s);
    s->ctx = ctx;
    s->g = g;
    if (opts && ((opts->inter_op_threads && opts->inter_op_threads != ctx->inter_op_threads) ||
                 (opts->intra_op_threads && opts->intra_op_threads != ctx->intra.threads))) {
        /* Different thread counts from the context's: the session gets pools of its own. */
        wf_context_options co = {opts->inter_op_threads ? opts->inter_op_threads : ctx->inter_op_threads,
                                 opts->intra_op_threads ? opts->intra_op_threads : ctx->intra.threads};
        wf_status *st = wf_context_new(&co, &s->own_ctx);
        if (st) {
            wf__free(s);
            return st;
        }
        s->ctx = s->own_ctx;
    }
    if (opts && opts->device && *opts->device) {
        /* a device that does not exist is an error now, listing the ones that do */
        wf_device_spec spec;
        wf_status *st = wf_device_spec_parse(opts->device, &spec);
        int matched = 0;
        for (int d = 0; !st && d < s->ctx->n_devices; d++) {
            wf_device_spec ds;
            if (!(st = wf_device_spec_parse(s->ctx->devices[d].name, &ds))) matched += wf_device_spec_matches(&spec, &ds);
        }
        if (!st && !matched) {
            wf__str devs = {0};
            for (int d = 0; d < s->ctx->n_devices; d++)
                wf__str_appendf(&devs, "%s  %s (%s)\n", d ? "" : "", s->ctx->devices[d].name, s->ctx->devices[d].description);
            st = wf__status(WF_NOT_FOUND, "device spec '%s' matches no device; the devices are:\n%s", opts->device,
                            devs.p ? devs.p : "");
            wf__str_free(&devs);
        }
        if (!st && !(s->device = wf__strdup(opts->device))) st = wf__oom("a session", strlen(opts->device));
        if (st) {
            wf_context_free(s->own_ctx);
            wf__free(s);
            return st;
        }
    }
    s->place.device = s->device;
    s->place.strict = opts && opts->strict_placement;
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return NULL;
}

void wf_session_free(wf_session *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) wf__plan_free(s->plans[i]);
    wf__free(s->plans);
    pthread_mutex_destroy(&s->mu);
    wf_context_free(s->own_ctx);
    wf__free(s->device);
    wf__free(s);
}

static wf_status *get_plan(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                           int n_fetches, wf__plan **out)
{
    pthread_mutex_lock(&s->mu);
    for (int i = s->n_plans - 1; i >= 0; i--)
        if (wf__plan_matches(s->plans[i], feeds, n_feeds, fetches, n_fetches)) {
            *out = s->plans[i];
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
    wf__plan *p = NULL;
    wf_status *st = wf__plan_build(s->ctx, s->g, feeds, n_feeds, fetches, n_fetches, &s->place, &p);
    if (!st && s->n_plans == s->cap_plans) {
        int cap = s->cap_plans ? s->cap_plans * 2 : 4;
        wf__plan **pl = wf__realloc(s->plans, sizeof *pl * (size_t)s->cap_plans, sizeof *pl * (size_t)cap);
        if (!pl) {
            st = wf__oom("the session's plan cache", sizeof *pl * (size_t)cap);
            wf__plan_free(p);
        } else {
            s->plans = pl;
            s->cap_plans = cap;
        }
    }
    if (!st) {
        s->plans[s->n_plans++] = p;
        *out = p;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

wf_status *wf_session_run(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                          int n_fetches, wf_tensor **outputs, const wf_run_options *opts)
{
    if (!s) return wf__status(WF_INVALID_ARGUMENT, "wf_session_run: session is NULL");
    if (n_fetches && !outputs) return wf__status(WF_INVALID_ARGUMENT, "wf_session_run: outputs is NULL");
    wf__plan *p;
    WF__TRY(get_plan(s, feeds, n_feeds, fetches, n_fetches, &p));
    return wf__execute(s->ctx, p, feeds, outputs, opts ? opts->trace : NULL);
}

wf_status *wf_session_placement(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                int n_fetches, char **text)
{
    wf__plan *p;
    WF__TRY(get_plan(s, feeds, n_feeds, fetches, n_fetches, &p));
    wf__str out = {0};
    for (int i = 0; i < p->n_nodes; i++) {
        const wf__pnode *pn = &p->nodes[i];
        wf__str_appendf(&out, "%s: (%s%s%s): %s  # %s\n", pn->name, pn->op->name,
                        pn->fused_names ? "+" : "", pn->fused_names ? pn->fused_names : "",
                        s->ctx->devices[pn->device].name, pn->reason);
    }
    if (out.failed || !out.p) {
        wf__str_free(&out);
        if (p->n_nodes == 0) {
            *text = wf__strdup("");
            return *text ? NULL : wf__oom("placement text", 1);
        }
        return wf__oom("placement text", 4096);
    }
    *text = out.p;
    return NULL;
}

struct wf_placement {
    int n;
    wf_placement_entry *e;
    char *strings; /* every entry's strings, NUL-separated */
    double makespan_ms;
};

wf_status *wf_session_placement_get(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                    int n_fetches, wf_placement **out)
{
    if (!s || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_session_placement_get: NULL argument");
    *out = NULL;
    wf__plan *p;
    WF__TRY(get_plan(s, feeds, n_feeds, fetches, n_fetches, &p));
    size_t chars = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const wf__pnode *pn = &p->nodes[i];
        chars += strlen(pn->name) + strlen(pn->op->name) + strlen(s->ctx->devices[pn->device].name) +
                 strlen(pn->reason ? pn->reason : "") + (pn->fused_names ? strlen(pn->fused_names) : 0) + 5;
    }
    wf_placement *pl = wf__calloc(1, sizeof *pl);
    if (pl) {
        pl->e = wf__calloc((size_t)(p->n_nodes ? p->n_nodes : 1), sizeof *pl->e);
        pl->strings = wf__malloc(chars ? chars : 1);
    }
    if (!pl || !pl->e || !pl->strings) {
        wf_placement_free(pl);
        return wf__oom("a placement", chars);
    }
    char *w = pl->strings;
#define PUT(dst, src)                                                                                        \
    do {                                                                                                     \
        size_t l_ = strlen(src) + 1;                                                                         \
        memcpy(w, (src), l_);                                                                                \
        (dst) = w;                                                                                           \
        w += l_;                                                                                             \
    } while (0)
    for (int i = 0; i < p->n_nodes; i++) {
        const wf__pnode *pn = &p->nodes[i];
        wf_placement_entry *e = &pl->e[pl->n++];
        PUT(e->node, pn->name);
        PUT(e->op, pn->op->name);
        if (pn->fused_names) PUT(e->fused, pn->fused_names);
        e->device_index = pn->device;
        PUT(e->device, s->ctx->devices[pn->device].name);
        PUT(e->reason, pn->reason ? pn->reason : "");
        e->is_copy = pn->op == &wf__copy_op;
        e->est_ms = pn->est >= 0 ? pn->est * 1e3 : -1;
    }
#undef PUT
    pl->makespan_ms = p->est_makespan * 1e3;
    *out = pl;
    return NULL;
}

int wf_placement_num_entries(const wf_placement *p) { return p ? p->n : 0; }
wf_placement_entry wf_placement_entry_at(const wf_placement *p, int i) { return p->e[i]; }
double wf_placement_est_makespan_ms(const wf_placement *p) { return p ? p->makespan_ms : 0; }

void wf_placement_free(wf_placement *p)
{
    if (!p) return;
    wf__free(p->e);
    wf__free(p->strings);
    wf__free(p);
}
