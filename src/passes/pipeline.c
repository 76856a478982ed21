/*
 * The pass driver (see passes.h): liveness, the copy of a node into the new graph, the maps between
 * graphs, --dump-graph's text files, and the order of the passes.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "passes/pass.h"

/* The graph passes in order ("amp" only with a precision, at any level), then "fuse", lowering's epilogue fusion after placement (level 2),
 * "residual", the residual Adds it takes into Conv2D and MatMul (level 2, lower/plan.c), "jit",
 * its generated elementwise kernels (level 2, lower/jit.c), and "layout", lowering's channel-blocked
 * layouts between convolutions (level 3, lower/layout.c). */
const char *const wf__pass_names[] = {"identity", "simplify", "bnfold", "matmul_bias", "amp", "fold", "cse",
                                      "attention", "conv_crop", "conv_pool", "conv_scale", "fuse", "residual", "jit", "layout", NULL};
static const wf__pass *const g_passes[] = {&wf__pass_identity, &wf__pass_simplify, &wf__pass_bnfold,
                                           &wf__pass_matmul_bias, &wf__pass_amp, &wf__pass_fold, &wf__pass_cse,
                                           &wf__pass_attention, &wf__pass_conv_crop, &wf__pass_conv_pool,
                                           &wf__pass_conv_scale};

bool wf__pass_must_keep(const wf_node *n) { return n->op->flags & (WF__OP_SOURCE | WF__OP_STATEFUL); }

/* Sources (placeholders, variables, constants) are copied as they are, whatever the pass. */
static bool is_source(const wf_node *n) { return n->op->flags & WF__OP_SOURCE; }

int wf__pass_uses(const wf__pass_run *r, const wf_node *n, int j) { return r->uses[r->off[n->id] + j]; }

int *wf__pass_sole_readers(const wf__pass_run *r)
{
    int n = r->src->n, *sole = wf__malloc(sizeof *sole * (size_t)(n ? n : 1));
    if (!sole) return NULL;
    for (int i = 0; i < n; i++) sole[i] = -1;
    for (int i = 0; i < n; i++) {
        if (!r->live[i]) continue;
        const wf_node *x = r->src->nodes[i];
        for (int k = 0; k < x->n_in; k++) {
            const wf_node *p = x->in[k].node;
            if (!p || x->in[k].index != 0) continue;
            sole[p->id] = sole[p->id] == -1 || sole[p->id] == i ? i : -2;
        }
    }
    return sole;
}

wf_status *wf__pass_copy(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_node **out)
{
    return wf__pass_copy_to(r->dst, n, in, out);
}

wf_status *wf__pass_copy_to(wf_graph *dst, const wf_node *n, const wf_output *in, wf_node **out)
{
    wf_attr a[WF__MAX_ATTRS];
    int na = 0;
    for (int k = 0; k < WF__MAX_ATTRS && n->op->attrs[k].name; k++) {
        const wf__attr *v = &n->attrs[k];
        if (!v->set) continue; /* the default again */
        wf_attr x = {.name = n->op->attrs[k].name, .type = v->type};
        switch (v->type) {
        case WF_ATTR_INT: x.i = v->i; break;
        case WF_ATTR_FLOAT: x.f = v->f; break;
        case WF_ATTR_INTS: x.ints = v->ints; x.n = v->n; break;
        case WF_ATTR_FLOATS: x.floats = v->floats; x.n = v->n; break;
        case WF_ATTR_STRING: x.s = v->s; break;
        case WF_ATTR_DTYPE: x.dtype = (wf_dtype)v->i; break;
        case WF_ATTR_TENSOR: x.tensor = v->t; break;
        }
        a[na++] = x;
    }
    wf_node *c = NULL;
    wf_status *s = wf_op(dst, n->op->name, n->name, in, n->n_in, a, na, &c);
    if (s) return wf__status_wrap(s, "optimising: copying node '%s' (%s)", n->name, n->op->name);
    /* share the source's tensors (a constant's weights, a variable's initial value): wf_op copied them */
    for (int k = 0; k < WF__MAX_ATTRS; k++)
        if (c->attrs[k].t && n->attrs[k].t) {
            wf_tensor_free(c->attrs[k].t);
            c->attrs[k].t = wf_tensor_ref(n->attrs[k].t);
        }
    if (n->device && *n->device && (s = wf_node_set_device(c, n->device))) return s;
    if (n->coloc && (s = wf_node_set_colocation(c, n->coloc))) return s;
    *out = c;
    return NULL;
}

wf_status *wf__pass_emit(wf__pass_run *r, const wf_node *like, const char *op, const char *name, const wf_output *in,
                         int n_in, const wf_attr *a, int na, wf_output *out)
{
    wf_node *c = NULL;
    wf_status *s = wf_op(r->dst, op, name, in, n_in, a, na, &c);
    if (!s && like->device && *like->device) s = wf_node_set_device(c, like->device);
    if (!s && like->coloc) s = wf_node_set_colocation(c, like->coloc);
    if (s) return wf__status_wrap(s, "optimising: node '%s' (%s) as %s", like->name, like->op->name, op);
    *out = (wf_output){c, 0};
    return NULL;
}

void wf__pass_fresh_name(const wf_graph *dst, const char *base, const char *suffix, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", base, suffix);
    for (int k = 1; wf__graph_lookup(dst, out); k++) snprintf(out, cap, "%s%s_%d", base, suffix, k);
}

const wf_tensor *wf__pass_value(wf_output o)
{
    return o.node && o.node->out_value && o.index >= 0 && o.index < o.node->n_out ? o.node->out_value[o.index] : NULL;
}

/* Marks the ancestors of roots and keep. */
static wf_status *liveness(const wf_graph *g, const wf_output *roots, int nr, const wf_output *keep, int nk, bool *live)
{
    int *stack = wf__malloc(sizeof(int) * (size_t)(g->n ? g->n : 1)), top = 0;
    if (!stack) return wf__oom("optimising", sizeof(int) * (size_t)g->n);
    for (int i = 0; i < nr + nk; i++) {
        const wf_node *n = i < nr ? roots[i].node : keep[i - nr].node;
        if (n && !live[n->id]) {
            live[n->id] = true;
            stack[top++] = n->id;
        }
    }
    while (top) {
        const wf_node *n = g->nodes[stack[--top]];
        for (int i = 0; i < n->n_in; i++) {
            const wf_node *p = n->in[i].node;
            if (p && !live[p->id]) {
                live[p->id] = true;
                stack[top++] = p->id;
            }
        }
    }
    wf__free(stack);
    return NULL;
}

static void map_free(wf_output **map, int n)
{
    if (!map) return;
    for (int i = 0; i < n; i++) wf__free(map[i]);
    wf__free(map);
}

static wf_output **map_new(const wf_graph *g)
{
    wf_output **m = wf__calloc((size_t)(g->n ? g->n : 1), sizeof *m);
    for (int i = 0; m && i < g->n; i++)
        if (!(m[i] = wf__calloc((size_t)(g->nodes[i]->n_out ? g->nodes[i]->n_out : 1), sizeof **m))) {
            map_free(m, i);
            return NULL;
        }
    return m;
}

/* One pass over src into a new graph; *map_out: src outputs -> the new graph's. */
static wf_status *run_pass(const wf__pass *p, const wf__opt_options *o, wf__str *report, const wf_graph *src,
                           const wf_output *roots, int nr, const wf_output *keep, int nk, wf_graph **dst_out,
                           wf_output ***map_out)
{
    int n = src->n, n_outs = 0;
    bool *live = wf__calloc((size_t)(n ? n : 1), sizeof *live);
    int *off = wf__malloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) n_outs += src->nodes[i]->n_out;
    int *uses = wf__calloc((size_t)(n_outs ? n_outs : 1), sizeof *uses);
    wf_output **map = map_new(src);
    wf_graph *dst = NULL;
    wf__pass_run r = {.src = src, .uses = uses, .off = off, .opt = o, .report = report};
    bool begun = false;
    wf_status *s = NULL;
    if (!live || !off || !uses || !map) {
        s = wf__oom("optimising", sizeof(int) * (size_t)(n + n_outs));
        goto out;
    }
    if ((s = liveness(src, roots, nr, keep, nk, live)) || (s = wf_graph_new(&dst))) goto out;
    r.dst = dst;
    r.live = live;
    for (int i = 0, o = 0; i <= n; i++) {
        off[i] = o;
        if (i < n) o += src->nodes[i]->n_out;
    }
    for (int i = 0; i < n; i++) {
        if (!live[i]) continue;
        const wf_node *x = src->nodes[i];
        for (int k = 0; k < x->n_in; k++)
            if (x->in[k].node) uses[off[x->in[k].node->id] + x->in[k].index]++;
    }
    for (int i = 0; i < nr; i++)
        if (roots[i].node) uses[off[roots[i].node->id] + roots[i].index]++;
    if (p->begin && (s = p->begin(&r))) goto out;
    begun = true;
    for (int i = 0; i < n && !s; i++) {
        if (!live[i]) continue;
        const wf_node *x = src->nodes[i];
        wf_output in_buf[8], *in = x->n_in <= 8 ? in_buf : wf__malloc(sizeof *in * (size_t)x->n_in);
        if (!in) {
            s = wf__oom("optimising", sizeof *in * (size_t)x->n_in);
            break;
        }
        for (int k = 0; k < x->n_in; k++) {
            in[k] = x->in[k].node ? map[x->in[k].node->id][x->in[k].index] : (wf_output){NULL, 0};
            if (x->in[k].node && !in[k].node)
                s = wf__status(WF_INTERNAL, "optimising (%s): input %d of node '%s' (%s) was not kept", p->name, k,
                               x->name, x->op->name);
        }
        if (!s && (!p->visit || is_source(x))) {
            wf_node *c;
            if (!(s = wf__pass_copy(&r, x, in, &c)))
                for (int j = 0; j < x->n_out; j++) map[i][j] = (wf_output){c, j};
        } else if (!s) {
            s = p->visit(&r, x, in, map[i]);
            for (int j = 0; !s && j < x->n_out; j++)
                if (!map[i][j].node)
                    s = wf__status(WF_INTERNAL, "optimising (%s): node '%s' (%s) left output %d without a value",
                                   p->name, x->name, x->op->name, j);
        }
        if (in != in_buf) wf__free(in);
    }
out:
    if (begun && p->end) p->end(&r);
    wf__free(live);
    wf__free(off);
    wf__free(uses);
    if (s) {
        wf_graph_free(dst);
        map_free(map, n);
        return s;
    }
    *dst_out = dst;
    *map_out = map;
    return NULL;
}

static bool is_disabled(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return true;
        p = e ? e + 1 : p + len;
    }
    return false;
}

/* DIR/NN-NAME.txt: one line per node, "name = Op(inputs) @device". */
static wf_status *dump(const char *dir, int step, const char *name, const wf_graph *g)
{
    char path[4096];
    /* the folder itself is made when missing (not its parents) */
    if (step == 0 && mkdir(dir, 0777) != 0 && errno != EEXIST)
        return wf__status(WF_INVALID_ARGUMENT, "--dump-graph: cannot make folder '%s': %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/%02d-%s.txt", dir, step, name);
    FILE *f = fopen(path, "w");
    if (!f) return wf__status(WF_INVALID_ARGUMENT, "--dump-graph: cannot write '%s': %s", path, strerror(errno));
    for (int i = 0; i < g->n; i++) {
        const wf_node *n = g->nodes[i];
        fprintf(f, "%s = %s(", n->name, n->op->name);
        for (int k = 0; k < n->n_in; k++)
            fprintf(f, "%s%s:%d", k ? ", " : "", n->in[k].node ? n->in[k].node->name : "-", n->in[k].index);
        fprintf(f, ")%s%s\n", n->device && *n->device ? " @" : "", n->device ? n->device : "");
    }
    bool bad = ferror(f);
    if (fclose(f) || bad) return wf__status(WF_INVALID_ARGUMENT, "--dump-graph: error writing '%s'", path);
    return NULL;
}

wf_output wf__optimized_map(const wf__optimized *o, wf_output x)
{
    if (!x.node || x.node->graph != o->src || x.node->id >= o->n_src || x.index < 0 || x.index >= x.node->n_out)
        return (wf_output){NULL, 0};
    return o->map[x.node->id][x.index];
}

void wf__optimized_free(wf__optimized *o)
{
    if (!o) return;
    map_free(o->map, o->n_src);
    wf__free(o->amp_report);
    wf_graph_free(o->g);
    wf__free(o);
}

bool wf__opt_fuses(const wf__opt_options *o) { return o->level >= 2 && !is_disabled(o->disabled, "fuse"); }

bool wf__opt_jit(const wf__opt_options *o) { return wf__opt_fuses(o) && !is_disabled(o->disabled, "jit"); }

bool wf__opt_residual(const wf__opt_options *o) { return wf__opt_fuses(o) && !is_disabled(o->disabled, "residual"); }

bool wf__opt_layout(const wf__opt_options *o)
{
    return o->level >= 3 && wf__opt_fuses(o) && !is_disabled(o->disabled, "layout");
}

static bool amp_on(const wf__opt_options *o) { return o->amp == WF_BF16 || o->amp == WF_F16; }

wf_status *wf__opt_check(const wf__opt_options *o)
{
    if (o->level < 0 || o->level > 3)
        return wf__status(WF_INVALID_ARGUMENT, "optimisation level %d is not 0, 1, 2 or 3", o->level);
    WF__TRY(wf__amp_check(o->amp, o->amp_lists));
    for (const char *p = o->disabled; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool known = false;
        char all[200] = "";
        for (int i = 0; wf__pass_names[i]; i++) {
            known |= strlen(wf__pass_names[i]) == len && !strncmp(p, wf__pass_names[i], len);
            snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? ", " : "", wf__pass_names[i]);
        }
        if (!known && len)
            return wf__status(WF_INVALID_ARGUMENT, "unknown pass '%.*s' to disable (passes: %s)", (int)len, p, all);
        p = e ? e + 1 : p + len;
    }
    return NULL;
}

wf_status *wf__optimize(const wf_graph *g, const wf_output *roots, int n_roots, const wf_output *keep, int n_keep,
                        const wf__opt_options *o, wf__optimized **out)
{
    WF__TRY(wf__opt_check(o));
    wf__optimized *r = wf__calloc(1, sizeof *r);
    wf_output *cr = wf__malloc(sizeof *cr * (size_t)(n_roots + n_keep + 1));
    if (!r || !cr) {
        wf__free(r);
        wf__free(cr);
        return wf__oom("optimising", sizeof *cr * (size_t)(n_roots + n_keep));
    }
    r->src = g;
    r->n_src = g->n;
    wf_status *s = NULL;
    if (o->dump_dir) s = dump(o->dump_dir, 0, "input", g);
    /* the identity map of g, then each pass's composed onto it */
    if (!s && !(r->map = map_new(g))) s = wf__oom("optimising", sizeof(wf_output) * (size_t)g->n);
    for (int i = 0; !s && i < g->n; i++)
        for (int j = 0; j < g->nodes[i]->n_out; j++) r->map[i][j] = (wf_output){g->nodes[i], j};
    for (int i = 0; i < n_roots + n_keep; i++) cr[i] = i < n_roots ? roots[i] : keep[i - n_roots];
    const wf_graph *cur = g;
    wf_graph *own = NULL; /* cur when it is ours */
    int n_pass = (int)(sizeof g_passes / sizeof *g_passes), step = 0;
    bool amp = amp_on(o) && !is_disabled(o->disabled, "amp");
    wf__str report = {0};
    /* the first step always runs, copy-only when every pass is off: the result never aliases g; amp
     * runs at level 0 too (it was asked for by itself), followed there by a second prune that drops
     * the f32 casts nothing reads */
    for (int pi = -1; !s && pi <= n_pass; pi++) {
        static const wf__pass prune = {"prune", NULL, NULL, NULL};
        const wf__pass *p = pi < 0 || pi == n_pass ? &prune : g_passes[pi];
        if (pi == n_pass && !(amp && o->level < 1)) continue;
        if (pi >= 0 && pi < n_pass && p == &wf__pass_amp && !amp) continue;
        if (pi >= 0 && pi < n_pass && p != &wf__pass_amp && (o->level < 1 || is_disabled(o->disabled, p->name))) continue;
        wf_graph *next = NULL;
        wf_output **m = NULL;
        if ((s = run_pass(p, o, p == &wf__pass_amp ? &report : NULL, cur, cr, n_roots, cr + n_roots, n_keep, &next,
                          &m)))
            break;
        for (int i = 0; i < g->n; i++)
            for (int j = 0; j < g->nodes[i]->n_out; j++) {
                wf_output x = r->map[i][j];
                r->map[i][j] = x.node ? m[x.node->id][x.index] : (wf_output){NULL, 0};
            }
        for (int i = 0; i < n_roots + n_keep; i++) cr[i] = cr[i].node ? m[cr[i].node->id][cr[i].index] : cr[i];
        map_free(m, cur->n);
        wf_graph_free(own);
        cur = own = next;
        if (o->dump_dir) s = dump(o->dump_dir, ++step, p->name, cur);
    }
    wf__free(cr);
    if (!s && report.failed) s = wf__oom("the amp report", report.cap);
    r->amp_report = report.p;
    if (s) {
        if (own != NULL) wf_graph_free(own);
        r->g = NULL;
        wf__optimized_free(r);
        return s;
    }
    r->g = own;
    r->removed = g->n - r->g->n;
    *out = r;
    return NULL;
}
