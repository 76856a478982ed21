/*
 * Placement, the planner's second stage (after pruning and shape inference in lower/plan.c): the
 * constraints of every live node (kernels, requests soft or strict, host-memory arguments, colocation),
 * then HEFT (place.c) over what they leave open, and resident variables. Moved whole from plan.c.
 */
#include <stdio.h>

#include "place/placement.h"

typedef wf__plan_builder builder;

/* ---- placement ------------------------------------------------------------------------------------ */

/* The planned input types of graph node n (omitted inputs invalid). buf holds 16; larger lists are
 * allocated into *heap, which the caller frees. */
static const wf__tinfo *node_in_info(builder *b, const wf_node *n, wf__tinfo *buf, wf__tinfo **heap)
{
    wf__tinfo *in = buf;
    *heap = NULL;
    if (n->n_in > 16 && !(in = *heap = wf__calloc((size_t)n->n_in, sizeof *in))) return NULL;
    for (int i = 0; i < n->n_in; i++) {
        if (n->in[i].node && b->info[n->in[i].node->id]) {
            in[i] = b->info[n->in[i].node->id][n->in[i].index];
        } else {
            in[i].dtype = WF_DTYPE_INVALID;
            in[i].rank = -1;
        }
    }
    return in;
}

const wf__kernel_def *wf__plan_kernel_on(builder *b, int dev, const wf_node *n, const wf__tinfo *in)
{
    const struct wf__device *d = &b->ctx->devices[dev];
    /* Assign passes its value through: Identity's kernel, on every device */
    if (!strcmp(n->op->name, "Assign")) return d->vt->find_kernel(d->dev, "Identity", in, 1, b->info[n->id]);
    /* a constant off host memory is the session's shared device copy (device_kernels.c) */
    if (!strcmp(n->op->name, "Const") && !d->info.host_memory) return &wf__device_const_kernel;
    return d->vt->find_kernel(d->dev, n->op->name, in, n->n_in, b->info[n->id]);
}

static void device_list(wf_context *c, wf__str *out)
{
    for (int i = 0; i < c->n_devices; i++) wf__str_appendf(out, "%s%s", i ? ", " : "", c->devices[i].name);
}

static wf_status *set_reason(builder *b, int id, const char *fmt, ...) WF__PRINTF(3, 4);
static wf_status *set_reason(builder *b, int id, const char *fmt, ...)
{
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    wf__free(b->reason_of[id]);
    b->reason_of[id] = wf__strdup(buf);
    return b->reason_of[id] ? NULL : wf__oom("planning", strlen(buf));
}

static void node_cost(builder *b, const wf_node *n, const wf__tinfo *in, double *flops, double *bytes)
{
    if (n->op->cost) {
        wf__infer_ctx ic = {.node = n->name, .op = n->op, .attrs = n->attrs, .n_in = n->n_in, .in = in,
                            .in_value = NULL, .n_out = n->n_out, .out = b->info[n->id]};
        n->op->cost(&ic, flops, bytes);
    } else {
        wf__plan_default_cost(n, in, b->info[n->id], flops, bytes);
    }
}

static double out_bytes_of(builder *b, const wf_node *n)
{
    double t = 0;
    for (int j = 0; j < n->n_out; j++) {
        int64_t e = wf__numel(b->info[n->id][j].rank, b->info[n->id][j].dims);
        if (e > 0) t += (double)e * (double)wf_dtype_size(b->info[n->id][j].dtype);
    }
    return t;
}

static const char *ms(double sec, char *buf)
{
    double m = sec * 1e3;
    snprintf(buf, 32, m >= 100 ? "%.0f ms" : m >= 0.01 ? "%.3g ms" : "%.2g ms", m);
    return buf;
}

static const char *mib(double bytes, char *buf)
{
    snprintf(buf, 32, bytes >= 1 << 20 ? "%.1f MiB" : "%.1f KiB", bytes / (bytes >= 1 << 20 ? 1 << 20 : 1 << 10));
    return buf;
}

typedef struct consumer_ref {
    int node, input;
} consumer_ref;

/* Per live node: the constraints' verdict before costs decide. */
typedef struct pconstr {
    uint64_t allowed;
    uint64_t kernels;  /* devices with a kernel for it */
    bool pinned;       /* fed, or no choice to make */
    bool own_request;  /* the node's own device request (not the session's default) */
    char *why;         /* the constraint's reason, or NULL */
} pconstr;

static wf_status *why(pconstr *pc, const char *fmt, ...) WF__PRINTF(2, 3);
static wf_status *why(pconstr *pc, const char *fmt, ...)
{
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    wf__free(pc->why);
    pc->why = wf__strdup(buf);
    return pc->why ? NULL : wf__oom("planning", strlen(buf));
}

/* Constraints of one node: kernels for its dtypes, then the request (the session's device, else the
 * node's own), softly or strictly. */
static wf_status *constrain(builder *b, const wf_node *n, pconstr *pc)
{
    wf_context *c = b->ctx;
    wf__tinfo buf[16], *heap;
    const wf__tinfo *in = node_in_info(b, n, buf, &heap);
    if (!in) return wf__oom("planning", sizeof(wf__tinfo) * (size_t)n->n_in);
    uint64_t kern = 0;
    for (int d = 0; d < c->n_devices; d++)
        if (wf__plan_kernel_on(b, d, n, in)) kern |= (uint64_t)1 << d;
    wf_dtype kd = n->n_in && in[0].dtype ? in[0].dtype : b->info[n->id][0].dtype;
    wf__free(heap);
    /* no kernel anywhere: the CPU, where kernel selection reports it */
    pc->allowed = pc->kernels = kern ? kern : 1;
    const char *req = b->po && b->po->device && *b->po->device ? b->po->device : n->device;
    if (!req || !*req) {
        if (kern && !(kern & (kern - 1)) && c->n_devices > 1)
            return why(pc, "only %s has a kernel for %s (%s)", c->devices[__builtin_ctzll(kern)].short_name,
                       n->op->name, wf_dtype_name(kd));
        return NULL;
    }
    uint64_t match;
    wf_device_spec spec; /* its type names the request in the messages below */
    WF__TRY(wf__context_match(c, req, &match));
    WF__TRY(wf_device_spec_parse(req, &spec));
    if (match & kern) {
        pc->allowed = match & kern;
        pc->own_request = !(b->po && b->po->device && *b->po->device);
        return why(pc, "requested '%s'", req);
    }
    wf__str devs = {0};
    device_list(c, &devs);
    wf_status *s;
    if (b->po && b->po->strict) {
        if (!match)
            s = wf__status(WF_INVALID_ARGUMENT,
                           "Cannot assign a device for operation %s: %s was explicitly assigned to %s but "
                           "available devices are [ %s ]. Make sure the device specification refers to a "
                           "valid device.", n->name, n->name, req, devs.p ? devs.p : "");
        else
            s = wf__status(WF_INVALID_ARGUMENT,
                           "Cannot assign a device for operation %s: Could not satisfy explicit device "
                           "specification '%s' because no supported kernel for %s devices is available "
                           "(op %s, dtype %s)", n->name, req, spec.has_type ? spec.type : "the requested",
                           n->op->name, wf_dtype_name(kd));
    } else if (!match) {
        s = why(pc, "soft placement: requested '%s' matches no device (devices: %s)", req, devs.p ? devs.p : "");
    } else {
        s = why(pc, "soft placement: no %s kernel for %s (%s) on the devices matching '%s'",
                spec.has_type ? spec.type : "", n->op->name, wf_dtype_name(kd), req);
    }
    wf__str_free(&devs);
    return s;
}

/* Decides the device of every live node. Constraints first (feeds on the host, kernels, requests
 * soft or strict, host-memory arguments, colocation groups), then HEFT over what they leave open,
 * with each device's memory limit; every node gets its reason. */
wf_status *wf__place_nodes(builder *b)
{
    wf_context *c = b->ctx;
    const wf_graph *g = b->g;
    int D = c->n_devices, nl = 0;
    if (D > WF__PLACE_MAX_DEV) return wf__status(WF_UNIMPLEMENTED, "planning: more than %d devices", WF__PLACE_MAX_DEV);
    int *idx = wf__malloc(sizeof(int) * (size_t)(b->n ? b->n : 1));
    pconstr *pc = wf__calloc((size_t)(b->n ? b->n : 1), sizeof *pc);
    if (!idx || !pc) {
        wf__free(idx);
        wf__free(pc);
        return wf__oom("planning", sizeof *pc * (size_t)b->n);
    }
    wf_status *s = NULL;
    int *cons_start = NULL;
    consumer_ref *cons = NULL;
    for (int id = 0; id < b->n; id++) idx[id] = b->live[id] ? nl++ : -1;
    /* per live node arrays of the problem, and the group names */
    int n_edges = 0;
    for (int id = 0; id < b->n; id++)
        if (b->live[id] && b->feed_of[id] < 0) n_edges += g->nodes[id]->n_in;
    size_t L = (size_t)(nl ? nl : 1);
    int *in_start = wf__malloc(sizeof(int) * (L + 1)), *in_src = wf__malloc(sizeof(int) * (size_t)(n_edges ? n_edges : 1));
    double *flops = wf__calloc(L, sizeof(double)), *bytes = wf__calloc(L, sizeof(double)),
           *obytes = wf__calloc(L, sizeof(double));
    uint64_t *allowed = wf__calloc(L, sizeof(uint64_t)), *fallback = wf__calloc(L, sizeof(uint64_t));
    int *group = wf__malloc(sizeof(int) * L);
    unsigned char *resident = wf__calloc(L, 1), *pinned = wf__calloc(L, 1);
    const char **gname = wf__calloc(L, sizeof(char *));
    bool *host_bound = wf__calloc((size_t)(b->n ? b->n : 1), sizeof(bool));
    wf__place_dev dev[WF__PLACE_MAX_DEV];
    double *lat = wf__calloc((size_t)D * (size_t)D, sizeof(double)), *bw = wf__calloc((size_t)D * (size_t)D, sizeof(double));
    wf__place_result res = {.node = wf__calloc(L, sizeof(wf__place_choice))};
    if (!in_start || !in_src || !flops || !bytes || !obytes || !allowed || !fallback || !group || !resident || !pinned ||
        !gname || !host_bound || !lat || !bw || !res.node) {
        s = wf__oom("planning", sizeof(double) * L * 8);
        goto out;
    }
    const uint64_t host_bit = (uint64_t)1 << wf__host_device(c);
    int n_groups = 0, e = 0;
    for (int id = 0; id < b->n && !s; id++) {
        if (!b->live[id]) continue;
        const wf_node *n = g->nodes[id];
        int v = idx[id];
        in_start[v] = e;
        group[v] = -1;
        if (b->feed_of[id] >= 0) {
            allowed[v] = host_bit;
            pinned[v] = 1;
            obytes[v] = out_bytes_of(b, n);
            continue;
        }
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i].node && idx[n->in[i].node->id] >= 0) in_src[e++] = idx[n->in[i].node->id];
        obytes[v] = out_bytes_of(b, n);
        if (!strcmp(n->op->name, "Const") && b->info[id][0].dtype == WF_STRING) {
            allowed[v] = host_bit; /* strings live in host memory only */
            pinned[v] = 1;
            continue;
        }
        if (!strcmp(n->op->name, "Const")) {
            allowed[v] = ((uint64_t)1 << (D - 1) << 1) - 1; /* a Const runs anywhere: uploaded once */
            resident[v] = 1;
            continue;
        }
        if ((s = constrain(b, n, &pc[id]))) break;
        allowed[v] = pc[id].allowed;
        if (!(b->po && b->po->strict)) fallback[v] = pc[id].kernels;
        wf__tinfo buf[16], *heap;
        const wf__tinfo *in = node_in_info(b, n, buf, &heap);
        if (!in) {
            s = wf__oom("planning", sizeof(wf__tinfo) * (size_t)n->n_in);
            break;
        }
        node_cost(b, n, in, &flops[v], &bytes[v]);
        wf__free(heap);
        if (n->coloc) {
            int k = 0;
            while (k < n_groups && strcmp(gname[k], n->coloc) != 0) k++;
            if (k == n_groups) gname[n_groups++] = n->coloc;
            group[v] = k;
        }
    }
    if (s) goto out;
    in_start[nl] = e;
    /* every live node's consumers (graph id and input index), in id order */
    cons_start = wf__calloc((size_t)b->n + 1, sizeof(int));
    cons = wf__malloc(sizeof *cons * (size_t)(n_edges ? n_edges : 1));
    if (!cons_start || !cons) {
        s = wf__oom("planning", sizeof *cons * (size_t)n_edges);
        goto out;
    }
    for (int id = 0; id < b->n; id++) {
        if (!b->live[id] || b->feed_of[id] >= 0) continue;
        const wf_node *n = g->nodes[id];
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i].node && b->live[n->in[i].node->id]) cons_start[n->in[i].node->id + 1]++;
    }
    for (int id = 0; id < b->n; id++) cons_start[id + 1] += cons_start[id];
    {
        int *fill = wf__malloc(sizeof(int) * (size_t)(b->n ? b->n : 1));
        if (!fill) {
            s = wf__oom("planning", sizeof(int) * (size_t)b->n);
            goto out;
        }
        memcpy(fill, cons_start, sizeof(int) * (size_t)b->n);
        for (int id = 0; id < b->n; id++) {
            if (!b->live[id] || b->feed_of[id] >= 0) continue;
            const wf_node *n = g->nodes[id];
            for (int i = 0; i < n->n_in; i++)
                if (n->in[i].node && b->live[n->in[i].node->id])
                    cons[fill[n->in[i].node->id]++] = (consumer_ref){id, i};
        }
        wf__free(fill);
    }
    /* Host-memory arguments: a node whose every use is a host-memory input, or feeds only such nodes,
     * stays on the host unless it asked for a device itself (the session's default device does not
     * count: a shape computed on the device would be copied back for its consumer). A constant used
     * only so stays on the host too, instead of being uploaded to be read back (lowering hands host
     * arguments to device kernels in host memory, place/partition.c). */
    for (int id = b->n - 1; id >= 0; id--) {
        if (!b->live[id] || b->feed_of[id] >= 0) continue;
        int uses = 0, host_uses = 0;
        const wf_node *first = NULL;
        int first_in = -1;
        for (int k = cons_start[id]; k < cons_start[id + 1]; k++) {
            int cid = cons[k].node, i = cons[k].input;
            const wf_node *cn = g->nodes[cid];
            uses++;
            if ((i < 32 && (cn->op->host_in >> i & 1)) || host_bound[cid]) {
                host_uses++;
                if (!first) {
                    first = cn;
                    first_in = i;
                }
            }
        }
        if (!uses || host_uses != uses || b->fetched[id]) continue;
        host_bound[id] = true;
        int v = idx[id];
        if (pc[id].own_request) continue;
        /* the session's default device gives way where the host has a kernel */
        if (!((allowed[v] | pc[id].kernels) & host_bit)) continue;
        allowed[v] = host_bit;
        pinned[v] = 1;
        resident[v] = 0; /* a constant: an ordinary host node now, no device copy */
        if ((s = why(&pc[id], "computes a host-memory argument (input %d of %s, %s)", first_in, first->name,
                     first->op->name)))
            goto out;
    }
    /* Colocation groups that no device can run whole are dropped (soft) or refused (strict). */
    for (int k = 0; k < n_groups; k++) {
        uint64_t m = ~(uint64_t)0;
        const char *a = NULL, *z = NULL;
        for (int id = 0; id < b->n; id++)
            if (b->live[id] && group[idx[id]] == k) {
                if (m & allowed[idx[id]]) a = a ? a : g->nodes[id]->name;
                else z = g->nodes[id]->name;
                m &= allowed[idx[id]];
            }
        if (m) continue;
        if (b->po && b->po->strict) {
            s = wf__status(WF_INVALID_ARGUMENT,
                           "Cannot colocate nodes in group '%s': no device can run both %s and %s (their kernels "
                           "and requests leave no common device)", gname[k], a ? a : "?", z ? z : "?");
            goto out;
        }
        for (int id = 0; id < b->n; id++)
            if (b->live[id] && group[idx[id]] == k) {
                group[idx[id]] = -1;
                if ((s = why(&pc[id], "%s%scolocation group '%s' dropped: no device runs all of it (%s and %s)",
                             pc[id].why ? pc[id].why : "", pc[id].why ? "; " : "", gname[k], a ? a : "?",
                             z ? z : "?")))
                    goto out;
            }
    }
    /* the devices and links the cost model sees */
    /* the device in host memory (the CPU) whose cores a device that shares_host_cores computes on */
    int host = -1;
    for (int d = 0; d < D && host < 0; d++)
        if (c->devices[d].info.host_memory) host = d;
    for (int d = 0; d < D; d++) {
        const struct wf__device *dv = &c->devices[d];
        dev[d] = (wf__place_dev){.dense_flops = dv->perf.dense_gflops * 1e9, .vector_flops = dv->perf.vector_gflops * 1e9,
                                 .mem_bw = dv->perf.mem_gbps * 1e9, .launch = dv->perf.launch_us * 1e-6,
                                 .mem_limit = (double)dv->limit,
                                 .shares_with = !dv->info.host_memory && dv->info.shares_host_cores && host >= 0 ? host + 1 : 0};
    }
    for (int a = 0; a < D; a++)
        for (int z = 0; z < D; z++) {
            if (a == z) continue;
            /* through host memory: each accelerator's own link, in series */
            const wf_device_perf *pa = &c->devices[a].perf, *pz = &c->devices[z].perf;
            double l = 0, inv = 0;
            if (!c->devices[a].info.host_memory) {
                l += pa->link_latency_us * 1e-6;
                inv += 1 / (pa->link_gbps * 1e9);
            }
            if (!c->devices[z].info.host_memory) {
                l += pz->link_latency_us * 1e-6;
                inv += 1 / (pz->link_gbps * 1e9);
            }
            lat[a * D + z] = l;
            bw[a * D + z] = inv > 0 ? 1 / inv : 0;
        }
    wf__place_problem pr = {.n_nodes = nl, .n_dev = D, .in_start = in_start, .in_src = in_src, .flops = flops,
                            .bytes = bytes, .out_bytes = obytes, .allowed = allowed, .fallback = fallback, .group = group,
                            .resident = resident, .pinned = pinned, .dev = dev, .link_lat = lat, .link_bw = bw};
    int policy = b->po ? b->po->policy : WF__POLICY_HEFT;
    if (policy == WF__POLICY_HEFT) {
        if ((s = wf__place_heft(&pr, &res))) goto out;
    } else {
        int fastest = 0;
        for (int d = 1; d < D; d++)
            if (dev[d].dense_flops > dev[fastest].dense_flops) fastest = d;
        int *fixed = wf__malloc(sizeof(int) * L);
        if (!fixed) {
            s = wf__oom("planning", sizeof(int) * L);
            goto out;
        }
        for (int v = 0; v < nl; v++) {
            uint64_t a = allowed[v];
            int want = policy == WF__POLICY_CPU_ONLY ? 0 : policy == WF__POLICY_FASTEST ? fastest : -1;
            if (want < 0) /* the first accelerator with a kernel, else the CPU */
                want = a & ~(uint64_t)1 ? __builtin_ctzll(a & ~(uint64_t)1) : 0;
            fixed[v] = a >> want & 1 ? want : __builtin_ctzll(a);
        }
        s = wf__place_evaluate(&pr, fixed, &res);
        wf__free(fixed);
        if (s) goto out;
    }
    b->est_makespan = res.makespan;
    b->est_lower_bound = wf__place_lower_bound(&pr);
    /* devices and reasons */
    int *first_member = wf__malloc(sizeof(int) * (size_t)(n_groups ? n_groups : 1));
    if (!first_member) {
        s = wf__oom("planning", sizeof(int) * (size_t)n_groups);
        goto out;
    }
    for (int k = 0; k < n_groups; k++) first_member[k] = -1;
    for (int id = 0; id < b->n && !s; id++) {
        if (!b->live[id]) continue;
        int v = idx[id];
        const wf__place_choice *ch = &res.node[v];
        b->dev_of[id] = ch->dev < 0 ? 0 : ch->dev;
        b->est_of[id] = b->feed_of[id] >= 0 || resident[v] ? -1 : ch->est;
        const char *dn = c->devices[b->dev_of[id]].short_name;
        if (b->feed_of[id] >= 0) {
            s = set_reason(b, id, "fed from host memory");
            continue;
        }
        if (resident[v]) {
            const char *by = NULL;
            for (int k = cons_start[id]; k < cons_start[id + 1] && !by; k++)
                if (b->dev_of[id] == res.node[idx[cons[k].node]].dev) by = g->nodes[cons[k].node]->name;
            s = by ? set_reason(b, id, "a constant, colocated with its consumer %s", by)
                   : set_reason(b, id, "a constant on %s", dn);
            continue;
        }
        wf__str r = {0};
        if (pc[id].why) wf__str_appendf(&r, "%s", pc[id].why);
        if (ch->dev >= 0 && !(allowed[v] >> ch->dev & 1))
            wf__str_appendf(&r, "%ssoft placement: moved to %s for memory", r.len ? "; " : "", dn);
        int k = group[v];
        char t1[32], t2[32], t3[32], t4[32];
        uint64_t gm = ~(uint64_t)0;
        const char *limiter = NULL;
        for (int j = 0; k >= 0 && first_member[k] < 0 && j < b->n; j++)
            if (b->live[j] && group[idx[j]] == k) {
                if (!limiter && (allowed[v] & ~allowed[idx[j]])) limiter = g->nodes[j]->name;
                gm &= allowed[idx[j]];
            }
        if (k >= 0 && first_member[k] >= 0) {
            wf__str_appendf(&r, "%scolocated with %s (group '%s')", r.len ? "; " : "", g->nodes[first_member[k]]->name,
                            gname[k]);
        } else if (limiter && !(gm & (gm - 1))) {
            wf__str_appendf(&r, "%scolocation group '%s': %s runs only on %s", r.len ? "; " : "", gname[k], limiter,
                            c->devices[__builtin_ctzll(gm)].short_name);
        } else if (ch->alt >= 0) {
            wf__str_appendf(&r, "%sest %s on %s", r.len ? "; " : "", ms(ch->est, t1), dn);
            if (ch->copy > 0) wf__str_appendf(&r, " + %s copy", ms(ch->copy, t2));
            wf__str_appendf(&r, " vs %s on %s", ms(ch->alt_est, t3), c->devices[ch->alt].short_name);
            if (ch->alt_copy > 0) wf__str_appendf(&r, " + %s copy", ms(ch->alt_copy, t4));
        } else if (!r.len) {
            wf__str_appendf(&r, "%s", D > 1 ? "the only device allowed" : "the only device");
        }
        if (k >= 0 && first_member[k] < 0) first_member[k] = id;
        for (int d = 0; d < D; d++)
            if (ch->mem_excluded >> d & 1)
                wf__str_appendf(&r, "; %s %s its memory limit (%s)", c->devices[d].short_name,
                                d == ch->dev ? "is over" : "left out: the plan would pass", mib(dev[d].mem_limit, t1));
        if (r.failed) {
            wf__str_free(&r);
            s = wf__oom("planning", 256);
            break;
        }
        wf__free(b->reason_of[id]);
        b->reason_of[id] = r.p ? r.p : wf__strdup("");
        if (!b->reason_of[id]) s = wf__oom("planning", 1);
    }
    wf__free(first_member);
out:
    wf__free(cons_start);
    wf__free(cons);
    for (int id = 0; id < b->n; id++) wf__free(pc[id].why);
    wf__free(pc);
    wf__free(idx);
    wf__free(in_start);
    wf__free(in_src);
    wf__free(flops);
    wf__free(bytes);
    wf__free(obytes);
    wf__free(allowed);
    wf__free(fallback);
    wf__free(group);
    wf__free(resident);
    wf__free(pinned);
    wf__free(gname);
    wf__free(host_bound);
    wf__free(lat);
    wf__free(bw);
    wf__free(res.node);
    return s;
}

/* A fed Variable lives where its update runs: on the device of the Assign that writes it in this plan,
 * else of its consumers when they all run on one accelerator. The Assign's output is fetched without a
 * copy to the host (see the fetches in build), the session keeps it as the variable's value and feeds
 * it back, so a training loop on an accelerator leaves its weights and optimizer state there. */
wf_status *wf__place_variables(builder *b)
{
    const wf_graph *g = b->g;
    for (int id = 0; id < b->n; id++) {
        if (!b->live[id] || b->feed_of[id] < 0 || strcmp(g->nodes[id]->op->name, "Variable")) continue;
        const char *vname = g->nodes[id]->name, *by = NULL;
        int dev = -1;
        for (int j = 0; j < b->n && dev < 0; j++) {
            const wf_node *a = g->nodes[j];
            if (!b->live[j] || strcmp(a->op->name, "Assign")) continue;
            const wf__attr *v = wf__attr_get(a->op, a->attrs, "variable");
            if (v && v->s && !strcmp(v->s, vname)) {
                dev = b->dev_of[j];
                by = a->name;
            }
        }
        if (dev < 0) {
            for (int j = 0; j < b->n && dev != -2; j++) {
                const wf_node *c = g->nodes[j];
                if (!b->live[j]) continue;
                for (int i = 0; i < c->n_in && dev != -2; i++)
                    if (c->in[i].node == g->nodes[id]) {
                        if (dev == -1) {
                            dev = b->dev_of[j];
                            by = c->name;
                        } else if (dev != b->dev_of[j]) {
                            dev = -2;
                        }
                    }
            }
        }
        if (dev <= 0) continue;
        b->dev_of[id] = dev;
        WF__TRY(set_reason(b, id, "a variable, resident on %s with %s", b->ctx->devices[dev].short_name, by));
    }
    return NULL;
}

void wf__plan_default_cost(const wf_node *n, const wf__tinfo *in, const wf__tinfo *out, double *flops,
                           double *bytes)
{
    *flops = 0;
    *bytes = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t e = wf__numel(in[i].rank, in[i].dims);
        if (e > 0) *bytes += (double)e * (double)wf_dtype_size(in[i].dtype);
    }
    for (int j = 0; j < n->n_out; j++) {
        int64_t e = wf__numel(out[j].rank, out[j].dims);
        if (e > 0) {
            *bytes += (double)e * (double)wf_dtype_size(out[j].dtype);
            *flops += (double)e;
        }
    }
}
