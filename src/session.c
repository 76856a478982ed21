/*
 * Sessions: a plan cache keyed by (feeds, fetches, input shapes) over one graph and context. Planning
 * happens once per key under the session lock; runs execute outside it, so threads run concurrently.
 * The cache is bounded (least recently used evicted first); plans are counted references, so a plan
 * evicted while a run uses it is freed when that run ends. Device copies of constants and variables
 * belong to the session (s->weights), not to a plan: every input shape shares them.
 */
#include <pthread.h>
#include <stdio.h>

#include "device/device.h"
#include "exec/exec.h"
#include "lower/memplan.h"
#include "passes/passes.h"
#include "session_internal.h"

struct wf_session {
    wf_context *ctx;       /* the caller's, or an own copy when the thread options differ */
    wf_context *own_ctx;
    wf_graph *g;
    pthread_mutex_t mu;    /* the plan cache, the variables: held briefly, never while planning */
    pthread_mutex_t build_mu; /* one plan built at a time; runs of cached plans never take it */
    wf__plan **plans;     /* least recently used first */
    int n_plans, cap_plans;
    int max_plans;
    wf__weights *weights;
    wf__place_opts place;
    char *device;
    /* variables: the graph's Variable nodes seen so far and their current values (under mu) */
    const wf_node **var_node;
    wf_tensor **var_value;
    int n_vars, cap_vars, scanned;
    /* graph optimisation: one optimised graph per feed and fetch set (not per shape: the passes read
     * no fed shape), kept until the session goes, since plans built on it name its nodes (under
     * build_mu) */
    wf__opt_options opt;
    char *opt_disabled, *opt_dump, *opt_amp_lists;
    struct opt_entry *opts;
    int n_opts, cap_opts;
};

typedef struct opt_entry {
    wf_output *key;   /* the feeds' outputs, then the fetches */
    int n_feeds, n_fetches;
    wf__optimized *o;
} opt_entry;

void wf_session_options_init(wf_session_options *o)
{
    memset(o, 0, sizeof *o);
    o->opt_level = WF_OPT_LEVEL_DEFAULT;
}

/* Whether plans are built on an optimised graph: a level above 0, or a precision (amp runs at 0). */
static bool optimizes(const wf_session *s)
{
    return s->opt.level > 0 || s->opt.amp == WF_BF16 || s->opt.amp == WF_F16;
}

/* amp's question (passes.h): may n run with these dtypes on the device it would be placed on? That is
 * the device its own request or the session's --device names (the first that matches), else the
 * fastest one that does not share the host's cores by the cost model's dense rate: the placer runs
 * after the passes and favours it for the convolutions and matrix products that decide the matter. */
static bool amp_device(void *arg, const wf_node *n, const wf__tinfo *in, const wf__tinfo *out, bool need_fast,
                       char *why, size_t cap)
{
    wf_session *s = arg;
    const wf_context *c = s->ctx;
    const char *want = n->device && *n->device ? n->device : s->device;
    int pick = -1;
    if (want) {
        uint64_t mask = 0;
        wf_status *e = wf__context_match(c, want, &mask); /* a bad request fails placement later, by name */
        if (!e && mask) pick = __builtin_ctzll(mask);
        wf_status_free(e);
    }
    for (int d = 0; pick < 0 && d < c->n_devices; d++) {
        const struct wf__device *x = &c->devices[d];
        if (x->info.shares_host_cores) continue;
        if (pick < 0 || x->perf.dense_gflops > c->devices[pick].perf.dense_gflops) pick = d;
    }
    if (pick < 0) pick = 0;
    const struct wf__device *d = &c->devices[pick];
    wf_dtype lo = WF_F32;
    for (int j = 0; j < n->n_out && lo == WF_F32; j++)
        if (out[j].dtype == WF_BF16 || out[j].dtype == WF_F16) lo = out[j].dtype;
    for (int k = 0; k < n->n_in && lo == WF_F32; k++)
        if (in[k].dtype == WF_BF16 || in[k].dtype == WF_F16) lo = in[k].dtype;
    if (need_fast && !(d->info.fast_dtypes >> lo & 1)) {
        snprintf(why, cap, "%s does not compute %s natively (%s)", d->short_name, wf_dtype_name(lo),
                 d->info.precision_note[0] ? d->info.precision_note : "it says nothing of it");
        return false;
    }
    if (!d->vt->find_kernel(d->dev, n->op->name, in, n->n_in, out)) {
        snprintf(why, cap, "%s has no %s kernel for %s", d->short_name, wf_dtype_name(lo), n->op->name);
        return false;
    }
    snprintf(why, cap, "%s%s", d->short_name, need_fast ? " computes it natively" : "");
    return true;
}

/* fold's evaluator (passes.h): g run once on CPU:0 of the session's context by a session of its own,
 * without optimisation (fold is already optimising g's one node). */
static wf_status *eval_graph(void *arg, wf_graph *g, const wf_output *outputs, int n, wf_tensor **values)
{
    wf_session *s = arg;
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "CPU:0";
    so.strict_placement = 1;
    so.opt_level = 0;
    so.plan_cache_size = 1;
    wf_session *e = NULL;
    WF__TRY(wf_session_new(s->ctx, g, &so, &e));
    wf_status *st = wf_session_run(e, NULL, 0, outputs, n, values, NULL);
    wf_session_free(e);
    return st;
}

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
        uint64_t matched = 0;
        wf_status *st = wf__context_match(s->ctx, opts->device, &matched);
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
    s->max_plans = opts && opts->plan_cache_size > 0 ? opts->plan_cache_size : 16;
    wf_status *ws = wf__weights_new(&s->weights);
    if (ws) {
        wf_context_free(s->own_ctx);
        wf__free(s->device);
        wf__free(s);
        return ws;
    }
    s->place.weights = s->weights;
    s->opt.level = opts ? opts->opt_level : WF_OPT_LEVEL_DEFAULT;
    if (opts && opts->disable_passes && !(s->opt.disabled = s->opt_disabled = wf__strdup(opts->disable_passes)))
        ws = wf__oom("a session", strlen(opts->disable_passes));
    if (!ws && opts && opts->dump_graph_dir && !(s->opt.dump_dir = s->opt_dump = wf__strdup(opts->dump_graph_dir)))
        ws = wf__oom("a session", strlen(opts->dump_graph_dir));
    if (opts && (opts->precision == WF_BF16 || opts->precision == WF_F16)) s->opt.amp = opts->precision;
    else if (opts && opts->precision && opts->precision != WF_F32 && !ws)
        ws = wf__status(WF_INVALID_ARGUMENT, "wf_session_new: precision %s is not f32, bf16 or f16",
                        wf_dtype_name(opts->precision));
    if (!ws && opts && opts->amp_lists && !(s->opt.amp_lists = s->opt_amp_lists = wf__strdup(opts->amp_lists)))
        ws = wf__oom("a session", strlen(opts->amp_lists));
    s->opt.amp_device = amp_device;
    s->opt.amp_arg = s;
    if (!ws) ws = wf__opt_check(&s->opt);
    s->place.no_fusion = !wf__opt_fuses(&s->opt);
    s->place.layout = wf__opt_layout(&s->opt);
    s->place.no_jit = !wf__opt_jit(&s->opt);
    s->place.no_residual = !wf__opt_residual(&s->opt);
    s->opt.eval = eval_graph;
    s->opt.eval_arg = s;
    if (ws) {
        wf__weights_free(s->weights);
        wf__free(s->opt_disabled);
        wf__free(s->opt_dump);
        wf__free(s->opt_amp_lists);
        wf_context_free(s->own_ctx);
        wf__free(s->device);
        wf__free(s);
        return ws;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->build_mu, NULL);
    *out = s;
    return NULL;
}

void wf_session_free(wf_session *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) wf__plan_unref(s->plans[i]);
    for (int i = 0; i < s->n_vars; i++) wf_tensor_free(s->var_value[i]);
    wf__weights_free(s->weights); /* after the plans: their Const states hold references into it */
    for (int i = 0; i < s->n_opts; i++) { /* after the plans: they name the optimised graphs' nodes */
        wf__free(s->opts[i].key);
        wf__optimized_free(s->opts[i].o);
    }
    wf__free(s->opts);
    wf__free(s->opt_disabled);
    wf__free(s->opt_dump);
    wf__free(s->opt_amp_lists);
    wf__free(s->var_node);
    wf__free(s->var_value);
    wf__free(s->plans);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->build_mu);
    wf_context_free(s->own_ctx);
    wf__free(s->device);
    wf__free(s);
}

/* The cached plan for (feeds, fetches), most recently used moved last, with a reference for the
 * caller; NULL when there is none (caller holds mu). */
static wf__plan *cached_plan(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                             int n_fetches)
{
    for (int i = s->n_plans - 1; i >= 0; i--)
        if (wf__plan_matches(s->plans[i], feeds, n_feeds, fetches, n_fetches)) {
            wf__plan *p = s->plans[i];
            memmove(&s->plans[i], &s->plans[i + 1], sizeof *s->plans * (size_t)(s->n_plans - 1 - i));
            s->plans[s->n_plans - 1] = p;
            wf__plan_ref(p);
            return p;
        }
    return NULL;
}

/* The optimised graph for (feeds, fetches), made on first use (caller holds build_mu). */
static wf_status *optimized_for(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                int n_fetches, const wf__optimized **out)
{
    for (int i = 0; i < s->n_opts; i++) {
        const opt_entry *e = &s->opts[i];
        bool same = e->n_feeds == n_feeds && e->n_fetches == n_fetches;
        for (int j = 0; same && j < n_feeds; j++)
            same = e->key[j].node == feeds[j].output.node && e->key[j].index == feeds[j].output.index;
        for (int j = 0; same && j < n_fetches; j++)
            same = e->key[n_feeds + j].node == fetches[j].node && e->key[n_feeds + j].index == fetches[j].index;
        if (same) {
            *out = e->o;
            return NULL;
        }
    }
    for (int j = 0; j < n_feeds; j++) { /* before the passes, which could remove what is fed */
        const wf_node *n = feeds[j].output.node;
        if (!n || n->graph != s->g || n->id >= s->g->n || s->g->nodes[n->id] != n || feeds[j].output.index != 0)
            return wf__status(WF_INVALID_ARGUMENT, "feed %d names a node that is not in this graph", j);
        if (strcmp(n->op->name, "Placeholder") && strcmp(n->op->name, "PlaceholderWithDefault") &&
            strcmp(n->op->name, "Variable"))
            return wf__status(WF_INVALID_ARGUMENT, "cannot feed node '%s' (%s): only Placeholder nodes can be fed",
                              n->name, n->op->name);
    }
    for (int j = 0; j < n_fetches; j++) { /* the planner's checks, on what the user named */
        const wf_node *n = fetches[j].node;
        if (!n || n->graph != s->g || n->id >= s->g->n || s->g->nodes[n->id] != n)
            return wf__status(WF_NOT_FOUND, "fetch %d names a node that is not in this graph", j);
        if (fetches[j].index < 0 || fetches[j].index >= n->n_out)
            return wf__status(WF_NOT_FOUND, "fetch %d asks for output %d of node '%s' (%s), which has %d", j,
                              fetches[j].index, n->name, n->op->name, n->n_out);
    }
    if (s->n_opts == s->cap_opts) {
        int cap = s->cap_opts ? s->cap_opts * 2 : 4;
        opt_entry *e = wf__realloc(s->opts, sizeof *e * (size_t)s->cap_opts, sizeof *e * (size_t)cap);
        if (!e) return wf__oom("the session's optimised graphs", sizeof *e * (size_t)cap);
        s->opts = e;
        s->cap_opts = cap;
    }
    opt_entry e = {.n_feeds = n_feeds, .n_fetches = n_fetches};
    e.key = wf__malloc(sizeof *e.key * (size_t)(n_feeds + n_fetches + 1));
    if (!e.key) return wf__oom("the session's optimised graphs", sizeof *e.key * (size_t)(n_feeds + n_fetches));
    for (int j = 0; j < n_feeds; j++) e.key[j] = feeds[j].output;
    for (int j = 0; j < n_fetches; j++) e.key[n_feeds + j] = fetches[j];
    wf_status *st = wf__optimize(s->g, fetches, n_fetches, e.key, n_feeds, &s->opt, &e.o);
    if (st) {
        wf__free(e.key);
        return st;
    }
    s->opts[s->n_opts++] = e;
    *out = e.o;
    return NULL;
}

/* Builds the plan for (feeds, fetches) of the session's graph: on its optimised graph when the
 * session optimises, keyed by the session graph's outputs all the same (caller holds build_mu). */
static wf_status *build_plan(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                             int n_fetches, wf__plan **p)
{
    if (!optimizes(s)) return wf__plan_build(s->ctx, s->g, feeds, n_feeds, fetches, n_fetches, &s->place, p);
    const wf__optimized *o = NULL;
    WF__TRY(optimized_for(s, feeds, n_feeds, fetches, n_fetches, &o));
    wf_feed *mf = wf__malloc(sizeof *mf * (size_t)(n_feeds + 1));
    wf_output *mx = wf__malloc(sizeof *mx * (size_t)(n_fetches + 1));
    wf_status *st = mf && mx ? NULL : wf__oom("planning", sizeof *mf * (size_t)(n_feeds + n_fetches));
    for (int j = 0; !st && j < n_feeds; j++) {
        mf[j] = (wf_feed){wf__optimized_map(o, feeds[j].output), feeds[j].tensor};
        if (!mf[j].output.node)
            st = wf__status(WF_INTERNAL, "optimising: feed %d ('%s') is not in the optimised graph", j,
                            feeds[j].output.node->name);
    }
    for (int j = 0; !st && j < n_fetches; j++) {
        mx[j] = wf__optimized_map(o, fetches[j]);
        if (!mx[j].node)
            st = wf__status(WF_INTERNAL, "optimising: fetch %d ('%s') is not in the optimised graph", j,
                            fetches[j].node->name);
    }
    if (!st && !(st = wf__plan_build(s->ctx, o->g, mf, n_feeds, mx, n_fetches, &s->place, p))) {
        wf__plan_rekey(*p, feeds, fetches);
        (*p)->amp_report = o->amp_report;
    }
    wf__free(mf);
    wf__free(mx);
    return st;
}

wf_status *wf__session_optimized_outputs(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                         int n_fetches, wf_output *out)
{
    if (!optimizes(s)) {
        for (int j = 0; j < n_fetches; j++) {
            const wf_node *n = fetches[j].node;
            if (!n || n->graph != s->g || fetches[j].index < 0 || fetches[j].index >= n->n_out)
                return wf__status(WF_NOT_FOUND, "fetch %d is not an output of this session's graph", j);
            out[j] = fetches[j];
        }
        return NULL;
    }
    pthread_mutex_lock(&s->build_mu);
    const wf__optimized *o = NULL;
    wf_status *st = optimized_for(s, feeds, n_feeds, fetches, n_fetches, &o);
    for (int j = 0; !st && j < n_fetches; j++) {
        out[j] = wf__optimized_map(o, fetches[j]);
        if (!out[j].node)
            st = wf__status(WF_INTERNAL, "optimising: fetch %d ('%s') is not in the optimised graph", j,
                            fetches[j].node->name);
    }
    pthread_mutex_unlock(&s->build_mu);
    return st;
}

void (*wf__session_build_hook)(void *arg);
void *wf__session_build_hook_arg;

/* A cached plan costs one short hold of mu. A new one is built under build_mu only, so runs of cached
 * plans on other threads go on meanwhile; two threads missing on the same key build it once (the
 * second finds it in the cache after waiting for build_mu). */
static wf_status *get_plan(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                           int n_fetches, wf__plan **out)
{
    pthread_mutex_lock(&s->mu);
    *out = cached_plan(s, feeds, n_feeds, fetches, n_fetches);
    pthread_mutex_unlock(&s->mu);
    if (*out) return NULL;
    pthread_mutex_lock(&s->build_mu);
    pthread_mutex_lock(&s->mu);
    *out = cached_plan(s, feeds, n_feeds, fetches, n_fetches);
    pthread_mutex_unlock(&s->mu);
    if (*out) {
        pthread_mutex_unlock(&s->build_mu);
        return NULL;
    }
    if (wf__session_build_hook) wf__session_build_hook(wf__session_build_hook_arg);
    wf__plan *p = NULL;
    wf_status *st = build_plan(s, feeds, n_feeds, fetches, n_fetches, &p);
    pthread_mutex_lock(&s->mu);
    if (!st && s->n_plans >= s->max_plans) {
        /* evict the least recently used: its arenas go now, or when the last run using it ends */
        wf__plan_unref(s->plans[0]);
        memmove(&s->plans[0], &s->plans[1], sizeof *s->plans * (size_t)(s->n_plans - 1));
        s->n_plans--;
    }
    if (!st && s->n_plans == s->cap_plans) {
        int cap = s->cap_plans ? s->cap_plans * 2 : 4;
        wf__plan **pl = wf__realloc(s->plans, sizeof *pl * (size_t)s->cap_plans, sizeof *pl * (size_t)cap);
        if (!pl) {
            st = wf__oom("the session's plan cache", sizeof *pl * (size_t)cap);
            wf__plan_unref(p);
        } else {
            s->plans = pl;
            s->cap_plans = cap;
        }
    }
    if (!st) {
        s->plans[s->n_plans++] = p;
        wf__plan_ref(p); /* the caller's */
        *out = p;
    }
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->build_mu);
    return st;
}

/* Picks up Variable nodes added to the graph since the last look (caller holds mu). */
static wf_status *scan_variables(wf_session *s)
{
    for (; s->scanned < s->g->n; s->scanned++) {
        const wf_node *n = s->g->nodes[s->scanned];
        if (strcmp(n->op->name, "Variable") != 0) continue;
        if (s->n_vars == s->cap_vars) {
            int cap = s->cap_vars ? s->cap_vars * 2 : 16;
            const wf_node **vn = wf__realloc(s->var_node, sizeof *vn * (size_t)s->cap_vars, sizeof *vn * (size_t)cap);
            if (!vn) return wf__oom("the session's variables", sizeof *vn * (size_t)cap);
            s->var_node = vn;
            wf_tensor **vv = wf__realloc(s->var_value, sizeof *vv * (size_t)s->cap_vars, sizeof *vv * (size_t)cap);
            if (!vv) return wf__oom("the session's variables", sizeof *vv * (size_t)cap);
            s->var_value = vv;
            s->cap_vars = cap;
        }
        /* the initial value is the graph's; runs never write into a fed tensor, so sharing it is safe */
        s->var_node[s->n_vars] = n;
        s->var_value[s->n_vars++] = wf_tensor_ref(wf__attr_get(n->op, n->attrs, "value")->t);
        WF__TRY(wf__weights_track(s->weights, s->var_value[s->n_vars - 1]));
    }
    return NULL;
}

static int var_index(const wf_session *s, const char *name)
{
    for (int i = 0; i < s->n_vars; i++)
        if (!strcmp(s->var_node[i]->name, name)) return i;
    return -1;
}

/* The Assign nodes among the outputs' ancestors (the outputs included), in graph order. */
static wf_status *find_assigns(const wf_graph *g, const wf_output *outs, int n_outs, int **ids, int *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    unsigned char *seen = wf__calloc((size_t)(g->n ? g->n : 1), 1);
    int *stack = wf__malloc(sizeof(int) * (size_t)(g->n ? g->n : 1));
    if (!seen || !stack) {
        wf__free(seen);
        wf__free(stack);
        return wf__oom("a run", (size_t)g->n * 5);
    }
    int top = 0, n = 0;
    for (int i = 0; i < n_outs; i++) {
        const wf_node *nd = outs[i].node;
        if (nd && nd->graph == g && nd->id < g->n && !seen[nd->id]) {
            seen[nd->id] = 1;
            stack[top++] = nd->id;
        }
    }
    while (top) {
        const wf_node *nd = g->nodes[stack[--top]];
        if (!strcmp(nd->op->name, "Assign")) n++;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i].node && !seen[nd->in[i].node->id]) {
                seen[nd->in[i].node->id] = 1;
                stack[top++] = nd->in[i].node->id;
            }
    }
    if (n) {
        *ids = wf__malloc(sizeof(int) * (size_t)n);
        if (!*ids) {
            wf__free(seen);
            wf__free(stack);
            return wf__oom("a run", sizeof(int) * (size_t)n);
        }
        for (int id = 0; id < g->n; id++)
            if (seen[id] && !strcmp(g->nodes[id]->op->name, "Assign")) (*ids)[(*n_ids)++] = id;
    }
    wf__free(seen);
    wf__free(stack);
    return NULL;
}

/* What a run with state needs beyond the caller's feeds and fetches: every variable fed its current
 * value (a snapshot: concurrent runs commit under mu), and the Assigns the fetches and targets
 * reach added to the fetches so they can be committed. */
typedef struct stateful {
    int *assign, n_assign;
    int n_all;           /* fetches + targets + assigns */
    wf_output *all, *fx; /* fx: what the plan computes */
    wf_feed *fd;         /* the caller's feeds, then the variables */
    int nf;
    wf_tensor **snap;
    int n_vars;
} stateful;

static void stateful_free(stateful *st)
{
    for (int v = 0; st->snap && v < st->n_vars; v++) wf_tensor_free(st->snap[v]);
    wf__free(st->snap);
    wf__free(st->fd);
    wf__free(st->fx);
    wf__free(st->all);
    wf__free(st->assign);
    memset(st, 0, sizeof *st);
}

static wf_status *stateful_prepare(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                   int n_fetches, const wf_output *targets, int n_targets, int n_vars, stateful *st)
{
    memset(st, 0, sizeof *st);
    st->n_vars = n_vars;
    wf_status *e;
    st->all = wf__malloc(sizeof *st->all * (size_t)(n_fetches + n_targets + 1));
    if (!st->all) return wf__oom("a run", sizeof *st->all * (size_t)(n_fetches + n_targets + 1));
    for (int i = 0; i < n_fetches; i++) st->all[i] = fetches[i];
    for (int i = 0; i < n_targets; i++) st->all[n_fetches + i] = targets[i];
    if ((e = find_assigns(s->g, st->all, n_fetches + n_targets, &st->assign, &st->n_assign))) {
        stateful_free(st);
        return e;
    }
    st->n_all = n_fetches + n_targets + st->n_assign;
    st->fx = wf__malloc(sizeof *st->fx * (size_t)(st->n_all ? st->n_all : 1));
    st->fd = wf__malloc(sizeof *st->fd * (size_t)(n_feeds + n_vars + 1));
    st->snap = wf__calloc((size_t)(n_vars ? n_vars : 1), sizeof *st->snap);
    if (!st->fx || !st->fd || !st->snap) {
        stateful_free(st);
        return wf__oom("a run", sizeof(wf_feed) * (size_t)(n_feeds + n_vars));
    }
    if (n_fetches + n_targets) memcpy(st->fx, st->all, sizeof *st->fx * (size_t)(n_fetches + n_targets));
    for (int i = 0; i < st->n_assign; i++) st->fx[n_fetches + n_targets + i] = wf_out(s->g->nodes[st->assign[i]], 0);
    if (n_feeds) memcpy(st->fd, feeds, sizeof *st->fd * (size_t)n_feeds);
    st->nf = n_feeds;
    pthread_mutex_lock(&s->mu);
    for (int v = 0; v < n_vars; v++) {
        bool fed = false; /* a variable the caller feeds reads the fed value in this run */
        for (int i = 0; i < n_feeds && !fed; i++) fed = feeds[i].output.node == s->var_node[v];
        if (fed) continue;
        st->snap[v] = wf_tensor_ref(s->var_value[v]);
        st->fd[st->nf++] = (wf_feed){wf_out((wf_node *)s->var_node[v], 0), st->snap[v]};
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The plan a run of (feeds, fetches, targets) uses, variables included. */
static wf_status *plan_for(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                           int n_fetches, const wf_output *targets, int n_targets, wf__plan **p)
{
    pthread_mutex_lock(&s->mu);
    wf_status *e = scan_variables(s);
    int n_vars = s->n_vars;
    pthread_mutex_unlock(&s->mu);
    if (e) return e;
    if (!n_vars && !n_targets) return get_plan(s, feeds, n_feeds, fetches, n_fetches, p);
    stateful st;
    WF__TRY(stateful_prepare(s, feeds, n_feeds, fetches, n_fetches, targets, n_targets, n_vars, &st));
    e = get_plan(s, st.fd, st.nf, st.fx, st.n_all, p);
    stateful_free(&st);
    return e;
}

wf_status *wf_session_run(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                          int n_fetches, wf_tensor **outputs, const wf_run_options *opts)
{
    if (!s) return wf__status(WF_INVALID_ARGUMENT, "wf_session_run: session is NULL");
    if (n_fetches && !outputs) return wf__status(WF_INVALID_ARGUMENT, "wf_session_run: outputs is NULL");
    int n_targets = opts && opts->targets ? opts->n_targets : 0;
    pthread_mutex_lock(&s->mu);
    wf_status *st = scan_variables(s);
    int n_vars = s->n_vars;
    pthread_mutex_unlock(&s->mu);
    if (st) return st;
    if (!n_vars && !n_targets) {
        wf__plan *p;
        WF__TRY(get_plan(s, feeds, n_feeds, fetches, n_fetches, &p));
        st = wf__execute(s->ctx, p, feeds, outputs, opts ? opts->into : NULL, opts ? opts->trace : NULL);
        wf__plan_unref(p);
        return st;
    }
    /* With state: compute the fetches, the targets and the Assigns they need, then commit the
     * Assigns. */
    stateful sf;
    WF__TRY(stateful_prepare(s, feeds, n_feeds, fetches, n_fetches, n_targets ? opts->targets : NULL, n_targets,
                             n_vars, &sf));
    wf_tensor **outs = wf__calloc((size_t)(sf.n_all ? sf.n_all : 1), sizeof *outs);
    if (!outs) {
        stateful_free(&sf);
        return wf__oom("a run", sizeof *outs * (size_t)sf.n_all);
    }
    wf__plan *p;
    if ((st = get_plan(s, sf.fd, sf.nf, sf.fx, sf.n_all, &p))) goto out;
    st = wf__execute(s->ctx, p, sf.fd, outs, NULL, opts ? opts->trace : NULL);
    wf__plan_unref(p);
    if (st) goto out;
    /* the caller's fetches in host memory (an Assign it fetches may be a resident variable's value),
     * before anything is committed */
    for (int i = 0; i < n_fetches; i++) {
        if (outs[i] && outs[i]->device) {
            wf_tensor *h;
            if ((st = wf__tensor_move(NULL, outs[i], &h))) goto out;
            wf_tensor_free(outs[i]);
            outs[i] = h;
        }
    }
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < sf.n_assign; i++) {
        const wf_node *a = s->g->nodes[sf.assign[i]];
        int v = var_index(s, wf__attr_get(a->op, a->attrs, "variable")->s);
        if (v < 0) continue; /* wf_assign checked it; a variable is never removed */
        wf_tensor *nv = outs[n_fetches + n_targets + i];
        outs[n_fetches + n_targets + i] = NULL;
        /* the committed value is final: stamp it (see wf_tensor.version) unless someone else holds it too
         * (an Assign of a Const keeps the Const's stamp; of a caller's tensor or a view of one, none) */
        if (nv && !nv->base && wf__tensor_refs(nv) == 1) nv->version = wf__tensor_new_version();
        wf__weights_forget(s->weights, s->var_value[v]);
        wf_tensor_free(s->var_value[v]);
        s->var_value[v] = nv;
        if (!st) st = wf__weights_track(s->weights, nv);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n_fetches; i++) {
        outputs[i] = outs[i];
        outs[i] = NULL;
    }
out:
    for (int i = 0; i < sf.n_all; i++) wf_tensor_free(outs[i]);
    wf__free(outs);
    stateful_free(&sf);
    return st;
}

/* t in host memory: a resident variable's value is read back from its device. Consumes the reference. */
static wf_status *to_host(wf_tensor **t)
{
    if (!*t || !(*t)->device) return NULL;
    wf_tensor *h;
    wf_status *st = wf__tensor_move(NULL, *t, &h);
    wf_tensor_free(*t);
    *t = st ? NULL : h;
    return st;
}

wf_status *wf_session_get_variable(wf_session *s, const char *name, wf_tensor **value)
{
    if (!s || !name || !value) return wf__status(WF_INVALID_ARGUMENT, "wf_session_get_variable: NULL argument");
    pthread_mutex_lock(&s->mu);
    wf_status *st = scan_variables(s);
    int v = st ? -1 : var_index(s, name);
    if (v >= 0) *value = wf_tensor_ref(s->var_value[v]);
    pthread_mutex_unlock(&s->mu);
    if (st) return st;
    if (v < 0) return wf__status(WF_NOT_FOUND, "the graph has no variable named '%s'", name);
    return to_host(value);
}

/* Checks that t may be variable v's value. */
static wf_status *fits_variable(const wf_session *s, int v, const wf_tensor *t, const char *what)
{
    const wf_tensor *cur = s->var_value[v];
    char a[160], b[160];
    if (t->dtype != cur->dtype || t->rank != cur->rank ||
        (t->rank && memcmp(t->dims, cur->dims, sizeof(int64_t) * (size_t)t->rank)))
        return wf__status(WF_INVALID_ARGUMENT, "%s: variable '%s' is %s%s but the value is %s%s", what,
                          s->var_node[v]->name, wf_dtype_name(cur->dtype), wf__shape_str(cur->rank, cur->dims, a),
                          wf_dtype_name(t->dtype), wf__shape_str(t->rank, t->dims, b));
    return NULL;
}

wf_status *wf_session_set_variable(wf_session *s, const char *name, const wf_tensor *value)
{
    if (!s || !name || !value) return wf__status(WF_INVALID_ARGUMENT, "wf_session_set_variable: NULL argument");
    wf_tensor *copy;
    WF__TRY(wf_tensor_new(value->dtype, value->rank, value->dims, value->data, &copy));
    copy->version = wf__tensor_new_version();
    pthread_mutex_lock(&s->mu);
    wf_status *st = scan_variables(s);
    int v = st ? -1 : var_index(s, name);
    if (!st && v < 0) st = wf__status(WF_NOT_FOUND, "the graph has no variable named '%s'", name);
    if (!st) st = fits_variable(s, v, copy, "wf_session_set_variable");
    if (!st) {
        wf__weights_forget(s->weights, s->var_value[v]);
        wf_tensor_free(s->var_value[v]);
        s->var_value[v] = copy;
        copy = NULL;
        st = wf__weights_track(s->weights, s->var_value[v]);
    }
    pthread_mutex_unlock(&s->mu);
    wf_tensor_free(copy);
    return st;
}

/* Checkpoint entries for input-pipeline positions: "__iterator__/NAME" (an i64 tensor from
 * wf_iterator_save). No graph node can have that name ("/" after "__iterator__" is legal, but the
 * prefix is reserved here), so restore tells them from variables. */
#define ITER_PREFIX "__iterator__/"

wf_status *wf_session_save_iterators(wf_session *s, const char *path, wf_iterator *const *its,
                                     const char *const *it_names, int n_its)
{
    if (!s || !path || (n_its && (!its || !it_names)) || n_its < 0)
        return wf__status(WF_INVALID_ARGUMENT, "wf_session_save: NULL argument");
    pthread_mutex_lock(&s->mu);
    wf_status *st = scan_variables(s);
    int n = s->n_vars, taken = 0, total = n + n_its;
    const char **names = wf__calloc((size_t)(total ? total : 1), sizeof *names);
    char **owned = wf__calloc((size_t)(n_its ? n_its : 1), sizeof *owned);
    wf_tensor **vals = wf__calloc((size_t)(total ? total : 1), sizeof *vals);
    if (!st && (!names || !vals || !owned)) st = wf__oom("a checkpoint", sizeof *vals * (size_t)total);
    for (; !st && taken < n; taken++) {
        names[taken] = s->var_node[taken]->name; /* nodes live as long as the graph */
        vals[taken] = wf_tensor_ref(s->var_value[taken]);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; !st && i < taken; i++) st = to_host(&vals[i]);
    for (int k = 0; !st && k < n_its; k++) {
        if (!its[k] || !it_names[k] || !*it_names[k]) {
            st = wf__status(WF_INVALID_ARGUMENT, "wf_session_save_iterators: iterator %d or its name is missing", k);
            break;
        }
        size_t len = strlen(ITER_PREFIX) + strlen(it_names[k]) + 1;
        if (!(owned[k] = wf__malloc(len))) st = wf__oom("a checkpoint name", len);
        else {
            snprintf(owned[k], len, ITER_PREFIX "%s", it_names[k]);
            names[n + k] = owned[k];
            st = wf_iterator_save(its[k], &vals[n + k]);
        }
    }
    if (!st) st = wf_safetensors_write(path, total, (const char *const *)names, vals, "{\"format\":\"weft variables\"}");
    for (int i = 0; vals && i < total; i++) wf_tensor_free(vals[i]);
    for (int k = 0; owned && k < n_its; k++) wf__free(owned[k]);
    wf__free(owned);
    wf__free(names);
    wf__free(vals);
    return st;
}

wf_status *wf_session_save(wf_session *s, const char *path)
{
    return wf_session_save_iterators(s, path, NULL, NULL, 0);
}

wf_status *wf_session_restore_iterators(wf_session *s, const char *path, wf_iterator *const *its,
                                        const char *const *it_names, int n_its)
{
    if (!s || !path || (n_its && (!its || !it_names)) || n_its < 0)
        return wf__status(WF_INVALID_ARGUMENT, "wf_session_restore: NULL argument");
    int n = 0;
    char **names = NULL;
    wf_tensor **vals = NULL;
    WF__TRY(wf_safetensors_read(path, &n, &names, &vals));
    /* the iterators' positions first (each is checked against its pipeline before anything changes),
     * then the variables; the positions are kept out of the variables' check */
    int *slot = wf__calloc((size_t)(n_its ? n_its : 1), sizeof *slot);
    wf_status *ist = slot ? NULL : wf__oom("a restore", sizeof *slot * (size_t)n_its);
    for (int k = 0; !ist && k < n_its; k++) {
        slot[k] = -1;
        for (int i = 0; i < n; i++)
            if (!strncmp(names[i], ITER_PREFIX, strlen(ITER_PREFIX)) && it_names[k] &&
                !strcmp(names[i] + strlen(ITER_PREFIX), it_names[k]))
                slot[k] = i;
        if (slot[k] < 0)
            ist = wf__status(WF_NOT_FOUND, "%s: the checkpoint has no position for iterator '%s'", path,
                             it_names[k] ? it_names[k] : "(null)");
    }
    for (int k = 0; !ist && k < n_its; k++) ist = wf_iterator_restore(its[k], vals[slot[k]]);
    wf__free(slot);
    if (ist) {
        wf_safetensors_free(n, names, vals);
        return ist;
    }
    /* drop the positions from the list the variables are matched against */
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (!strncmp(names[i], ITER_PREFIX, strlen(ITER_PREFIX))) {
            wf__free(names[i]);
            wf_tensor_free(vals[i]);
            continue;
        }
        names[kept] = names[i];
        vals[kept++] = vals[i];
    }
    n = kept;
    pthread_mutex_lock(&s->mu);
    wf_status *st = scan_variables(s);
    int *map = wf__malloc(sizeof(int) * (size_t)(s->n_vars ? s->n_vars : 1));
    if (!st && !map) st = wf__oom("a restore", sizeof(int) * (size_t)s->n_vars);
    /* check everything first: all or nothing */
    for (int v = 0; !st && v < s->n_vars; v++) {
        map[v] = -1;
        for (int i = 0; i < n && map[v] < 0; i++)
            if (!strcmp(names[i], s->var_node[v]->name)) map[v] = i;
        if (map[v] < 0)
            st = wf__status(WF_NOT_FOUND, "%s: the checkpoint has no tensor for variable '%s'", path,
                            s->var_node[v]->name);
        else
            st = fits_variable(s, v, vals[map[v]], path);
    }
    for (int i = 0; !st && i < n; i++)
        if (var_index(s, names[i]) < 0)
            st = wf__status(WF_INVALID_ARGUMENT, "%s: tensor '%s' is not a variable of this graph", path, names[i]);
    for (int v = 0; !st && v < s->n_vars; v++) {
        wf__weights_forget(s->weights, s->var_value[v]);
        wf_tensor_free(s->var_value[v]);
        s->var_value[v] = vals[map[v]];
        vals[map[v]] = NULL;
        if (wf__tensor_refs(s->var_value[v]) == 1) s->var_value[v]->version = wf__tensor_new_version();
        st = wf__weights_track(s->weights, s->var_value[v]);
    }
    pthread_mutex_unlock(&s->mu);
    wf__free(map);
    wf_safetensors_free(n, names, vals);
    return st;
}

wf_status *wf_session_restore(wf_session *s, const char *path)
{
    return wf_session_restore_iterators(s, path, NULL, NULL, 0);
}

wf_status *wf_session_placement(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                int n_fetches, char **text)
{
    wf__plan *p;
    WF__TRY(plan_for(s, feeds, n_feeds, fetches, n_fetches, NULL, 0, &p));
    wf__str out = {0};
    for (int i = 0; i < p->n_nodes; i++) {
        const wf__pnode *pn = &p->nodes[i];
        /* level 3's layout: "; blocked in, out" (lower/layout.c) */
        const char *lay = pn->out_blocked ? (pn->in_blocked ? "; blocked in, out" : "; blocked out")
                          : pn->in_blocked ? "; blocked in" : "";
        wf__str_appendf(&out, "%s: (%s%s%s%s): %s  # %s\n", pn->name, pn->op->name,
                        pn->fused_names ? "+" : "", pn->fused_names ? pn->fused_names : "", lay,
                        s->ctx->devices[pn->device].name, pn->reason);
    }
    int n_nodes = p->n_nodes;
    wf__plan_unref(p);
    if (out.failed || !out.p) {
        wf__str_free(&out);
        if (n_nodes == 0) {
            *text = wf__strdup("");
            return *text ? NULL : wf__oom("placement text", 1);
        }
        return wf__oom("placement text", 4096);
    }
    *text = out.p;
    return NULL;
}

wf_status *wf_session_precision_report(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                       int n_fetches, char **text)
{
    if (!s || !text) return wf__status(WF_INVALID_ARGUMENT, "wf_session_precision_report: NULL argument");
    *text = NULL;
    wf__plan *p;
    WF__TRY(plan_for(s, feeds, n_feeds, fetches, n_fetches, NULL, 0, &p));
    *text = wf__strdup(p->amp_report ? p->amp_report : "");
    wf__plan_unref(p);
    return *text ? NULL : wf__oom("the precision report", 4096);
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
    return wf__session_placement_get(s, feeds, n_feeds, fetches, n_fetches, NULL, 0, out);
}

const wf_graph *wf__session_graph(const wf_session *s) { return s->g; }

wf_status *wf__session_placement_get(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                     int n_fetches, const wf_output *targets, int n_targets, wf_placement **out)
{
    if (!s || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_session_placement_get: NULL argument");
    *out = NULL;
    wf__plan *p;
    WF__TRY(plan_for(s, feeds, n_feeds, fetches, n_fetches, targets, n_targets, &p));
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
        wf__plan_unref(p);
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
    wf__plan_unref(p);
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
