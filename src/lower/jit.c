/*
 * Generated elementwise kernels, the "jit" pass of optimisation level 2: after placement and epilogue
 * fusion, clusters of elementwise ops become one FusedElementwise node each, whose program
 * (wf__ew_program, device/kernel.h) the device's kernel runs over the output in one pass: the inputs
 * are read once and the output written once, where the unfused chain reads and writes every
 * intermediate value in full.
 *
 * Clustering, after XLA's rules:
 * - union-find contraction in reverse topological order: a node joins the cluster of its consumers
 *   when they all belong to one cluster, so every value made inside a cluster is read only inside it
 *   (single exit). Contraction of such clusters cannot create a cycle: a path that leaves a cluster
 *   and comes back would leave it through a value read outside, and there is none but the root's.
 *   (XLA needs its cycle check for multi-output fusion, which this does not do.)
 * - no cluster across devices, and only on a device with a FusedElementwise kernel (the CPU's
 *   backends/cpu/k_fused.c, OpenCL's ocl_fused.c, CUDA's cuda_fused.c where NVRTC loads);
 * - a minimum size of two ops (one op gains nothing), and at most WF__EW_MAX_REGS instructions and
 *   broadcast inputs together;
 * - every member is f32 with the root's output shape; a value from outside may have that shape, be a
 *   scalar, or broadcast as one run (a bias over the last dims, one value per channel);
 * - a fetched value, or one read outside the cluster, ends it there (it becomes the root of its own).
 *
 * The ops: Add, Sub, Mul, Div, Maximum, Minimum; Neg, Abs, Square, Sign, Relu, LeakyRelu, Elu, Exp,
 * Log, Sqrt, Rsqrt, Reciprocal, Tanh, Sigmoid, Erf, Gelu, Softplus, Floor, Ceil, Round, Swish,
 * HardSwish, HardSigmoid, and Clip with constant bounds.
 */
#include <stdio.h>
#include <time.h>

#include "lower/jit.h"
#include "ops/kutil_elementwise.h"

static const char *const k_binary[] = {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", NULL};
static const char *const k_unary[] = {"Neg",     "Abs",     "Square",     "Sign",  "Relu",    "LeakyRelu", "Elu",
                                      "Exp",     "Log",     "Sqrt",       "Rsqrt", "Reciprocal", "Tanh",   "Sigmoid",
                                      "Erf",     "Gelu",    "Softplus",   "Floor", "Ceil",    "Round",     "Swish",
                                      "HardSwish", "HardSigmoid", "Clip", NULL};

static bool in_list(const char *const *l, const char *op)
{
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], op)) return true;
    return false;
}

static const wf__tinfo *info_of(const wf__plan_builder *b, wf_output o) { return &b->info[o.node->id][o.index]; }

static bool same_dims(const wf__tinfo *a, const wf__tinfo *b)
{
    if (a->rank != b->rank || a->rank < 0) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

/* A Clip bound: absent, or a known f32 scalar. */
static bool clip_bound(const wf__plan_builder *b, const wf_node *n, int i, double dflt, double *v)
{
    *v = dflt;
    if (i >= n->n_in || !n->in[i].node) return true;
    const wf_tensor *t = b->value[n->in[i].node->id] ? b->value[n->in[i].node->id][n->in[i].index] : NULL;
    if (!t || t->dtype != WF_F32 || t->size != 1) return false;
    *v = ((const float *)t->data)[0];
    return true;
}

static bool pattern(const wf__tinfo *u, const wf__tinfo *t, int64_t *inner, int64_t *period);

/* Whether node id can be an instruction, and its attributes. */
static bool candidate(const wf__plan_builder *b, int id, double *alpha, double *beta)
{
    const wf_node *n = b->g->nodes[id];
    if (!b->live[id] || b->fused_away[id] || b->feed_of[id] >= 0 || n->n_out != 1 || !b->info[id]) return false;
    const wf__tinfo *t = &b->info[id][0];
    if (t->dtype != WF_F32 || t->rank < 0) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d] < 0) return false;
    const char *op = n->op->name;
    *alpha = *beta = 0;
    int n_ops;
    if (in_list(k_binary, op)) n_ops = 2;
    else if (in_list(k_unary, op)) n_ops = 1;
    else return false;
    if (n->n_in < n_ops) return false;
    for (int i = 0; i < n_ops; i++) {
        if (!n->in[i].node || !b->info[n->in[i].node->id]) return false;
        const wf__tinfo *u = info_of(b, n->in[i]);
        if (u->dtype != WF_F32) return false;
        if (n_ops == 1 && !same_dims(u, t)) return false;
        int64_t inner, period; /* an operand broadcast in more than one run stays out (Softmax's on a middle axis) */
        if (!pattern(u, t, &inner, &period)) return false;
    }
    if (!strcmp(op, "Clip")) return clip_bound(b, n, 1, -INFINITY, alpha) && clip_bound(b, n, 2, INFINITY, beta);
    if (n_ops == 2 && n->n_in != 2) return false;
    if (n_ops == 1 && n->n_in != 1) return false;
    if (!strcmp(op, "LeakyRelu") || !strcmp(op, "Elu") || !strcmp(op, "Swish"))
        *alpha = wf__attr_f(n->op, n->attrs, "alpha");
    if (!strcmp(op, "HardSigmoid")) {
        *alpha = wf__attr_f(n->op, n->attrs, "alpha");
        *beta = wf__attr_f(n->op, n->attrs, "beta");
    }
    if (!strcmp(op, "Gelu")) *alpha = !strcmp(wf__attr_s(n->op, n->attrs, "approximate"), "tanh");
    return true;
}

/* How input u broadcasts over the output t: *inner and *period as in wf__ew_input; false when it takes
 * more than one run. */
static bool pattern(const wf__tinfo *u, const wf__tinfo *t, int64_t *inner, int64_t *period)
{
    int64_t n = wf__numel(t->rank, t->dims);
    if (same_dims(u, t)) {
        *inner = 1;
        *period = n;
        return true;
    }
    int ranks[1] = {u->rank};
    const int64_t *d[1] = {u->dims};
    int64_t dims[WF_MAX_RANK], st[3][WF_MAX_RANK];
    int r = wf__ku_bcast_walk(1, ranks, d, t->rank, t->dims, dims, st);
    int run = -1;
    for (int k = 0; k < r; k++)
        if (st[0][k]) {
            if (run >= 0) return false;
            run = k;
        }
    *inner = 1;
    *period = 1;
    if (run < 0) return true;
    for (int k = run + 1; k < r; k++) *inner *= dims[k];
    *period = dims[run];
    return true;
}

/* The registers a node adds to its cluster: one, plus one per operand that is neither the output's
 * size nor a scalar (it is gathered). */
static int cost_of(const wf__plan_builder *b, int id)
{
    const wf_node *n = b->g->nodes[id];
    const wf__tinfo *t = &b->info[id][0];
    int c = 1, n_ops = in_list(k_binary, n->op->name) ? 2 : 1;
    for (int i = 0; i < n_ops; i++) {
        const wf__tinfo *u = info_of(b, n->in[i]);
        if (!same_dims(u, t) && wf__numel(u->rank, u->dims) != 1) c++;
    }
    return c;
}

void wf__jit_cluster_free(wf__jit_cluster *c)
{
    if (!c) return;
    wf__free(c->ext);
    wf__free(c->members);
    if (c->prog) {
        wf__free((void *)c->prog->in);
        wf__free((void *)c->prog->insn);
        wf__free(c->prog);
    }
    wf__free(c->names);
    wf__free(c);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* The cluster rooted at root, members[0..nm) in topological order (the root last). */
static wf_status *build(const wf__plan_builder *b, const int *members, int nm, wf__jit_cluster **out)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const wf_graph *g = b->g;
    int root = members[nm - 1];
    const wf__tinfo *t = &b->info[root][0];
    wf__jit_cluster *c = wf__calloc(1, sizeof *c);
    wf__ew_program *pg = wf__calloc(1, sizeof *pg);
    wf__ew_insn *insn = wf__calloc((size_t)nm, sizeof *insn);
    wf__ew_input *pin = wf__calloc((size_t)(2 * nm), sizeof *pin);
    if (c) c->prog = pg;
    if (!c || !pg || !insn || !pin || !(c->ext = wf__calloc((size_t)(2 * nm), sizeof *c->ext)) ||
        !(c->members = wf__malloc(sizeof(int) * (size_t)nm))) {
        wf__free(insn);
        wf__free(pin);
        if (c) c->prog = NULL;
        wf__free(pg);
        wf__jit_cluster_free(c);
        return wf__oom("planning a generated kernel", sizeof *insn * (size_t)nm);
    }
    pg->in = pin;
    pg->insn = insn;
    memcpy(c->members, members, sizeof(int) * (size_t)nm);
    c->n_members = nm;
    /* the inputs first: every operand made outside the cluster, once each */
    for (int m = 0; m < nm; m++) {
        const wf_node *n = g->nodes[members[m]];
        int n_ops = in_list(k_binary, n->op->name) ? 2 : 1;
        for (int i = 0; i < n_ops; i++) {
            wf_output o = n->in[i];
            bool inside = false;
            for (int k = 0; k < m && !inside; k++) inside = o.node->id == members[k];
            for (int k = 0; k < c->n_ext && !inside; k++) inside = c->ext[k].node == o.node && c->ext[k].index == o.index;
            if (!inside) c->ext[c->n_ext++] = o;
        }
    }
    pg->n_in = c->n_ext;
    pg->n_insn = nm;
    pg->n = wf__numel(t->rank, t->dims);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < c->n_ext; i++) {
        pattern(info_of(b, c->ext[i]), t, &pin[i].inner, &pin[i].period);
        h = fnv(h, &pin[i], sizeof pin[i]);
    }
    wf__str names = {0};
    for (int m = 0; m < nm; m++) {
        const wf_node *n = g->nodes[members[m]];
        double alpha, beta;
        candidate(b, members[m], &alpha, &beta);
        int n_ops = in_list(k_binary, n->op->name) ? 2 : 1, v[2] = {-1, -1};
        for (int i = 0; i < n_ops; i++) {
            wf_output o = n->in[i];
            for (int k = 0; k < m && v[i] < 0; k++)
                if (o.node->id == members[k]) v[i] = c->n_ext + k;
            for (int k = 0; k < c->n_ext && v[i] < 0; k++)
                if (c->ext[k].node == o.node && c->ext[k].index == o.index) v[i] = k;
        }
        insn[m] = (wf__ew_insn){n->op->name, v[0], v[1], alpha, beta};
        h = fnv(h, n->op->name, strlen(n->op->name) + 1);
        h = fnv(h, v, sizeof v);
        h = fnv(h, &alpha, sizeof alpha);
        h = fnv(h, &beta, sizeof beta);
        wf__str_appendf(&names, "%s%s", m ? "+" : "", n->op->name);
    }
    pg->hash = h;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    c->build_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (names.failed) {
        wf__str_free(&names);
        wf__jit_cluster_free(c);
        return wf__oom("planning a generated kernel", 64);
    }
    c->names = names.p;
    *out = c;
    return NULL;
}

wf_status *wf__plan_jit(wf__plan_builder *b, wf__plan_fusion *fu)
{
    int n = b->n;
    const wf_graph *g = b->g;
    size_t nn = (size_t)(n ? n : 1);
    int *root = wf__malloc(sizeof(int) * nn), *size = wf__calloc(nn, sizeof(int));
    int *cfirst = wf__calloc(nn + 1, sizeof(int)), *cons = NULL, *fill = NULL, *members = NULL;
    bool *cand = wf__calloc(nn, sizeof(bool));
    wf_status *s = NULL;
    if (!root || !size || !cfirst || !cand) {
        s = wf__oom("planning generated kernels", sizeof(int) * nn * 3);
        goto out;
    }
    /* every live consumer of each node, as a CSR list (one entry per use) */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int v = 0; v < n; v++) cfirst[v + 1] += cfirst[v];
            cons = wf__malloc(sizeof(int) * (size_t)(cfirst[n] ? cfirst[n] : 1));
            fill = wf__malloc(sizeof(int) * nn);
            if (!cons || !fill) {
                s = wf__oom("planning generated kernels", sizeof(int) * (size_t)cfirst[n]);
                goto out;
            }
            memcpy(fill, cfirst, sizeof(int) * nn);
        }
        for (int c = 0; c < n; c++) {
            if (!b->live[c] || b->feed_of[c] >= 0) continue;
            const wf_node *cn = g->nodes[c];
            for (int i = 0; i < cn->n_in; i++) {
                if (!cn->in[i].node) continue;
                int v = cn->in[i].node->id;
                if (pass == 0) cfirst[v + 1]++;
                else cons[fill[v]++] = c;
            }
        }
    }
    for (int id = 0; id < n; id++) {
        double a, be;
        cand[id] = b->dev_of[id] >= 0 && candidate(b, id, &a, &be);
        root[id] = -1;
    }
    for (int id = n - 1; id >= 0; id--) {
        if (!cand[id]) continue;
        int r = -1;
        bool join = !b->fetched[id] && cfirst[id + 1] > cfirst[id];
        for (int k = cfirst[id]; k < cfirst[id + 1] && join; k++) {
            int c = cons[k];
            if (!cand[c] || root[c] < 0 || (r >= 0 && root[c] != r)) join = false;
            else r = root[c];
        }
        int cost = cost_of(b, id);
        join = join && b->dev_of[r] == b->dev_of[id] && same_dims(&b->info[id][0], &b->info[r][0]) &&
               size[r] + cost <= WF__EW_MAX_REGS;
        root[id] = join ? r : id;
        size[root[id]] += cost;
    }
    /* each root of two or more members and a kernel for it becomes a generated kernel */
    int *count = fill; /* reused: members per root */
    for (int id = 0; id < n; id++) count[id] = 0;
    for (int id = 0; id < n; id++)
        if (root[id] >= 0) count[root[id]]++;
    members = wf__malloc(sizeof(int) * nn);
    if (!members) {
        s = wf__oom("planning generated kernels", sizeof(int) * nn);
        goto out;
    }
    for (int r = 0; r < n && !s; r++) {
        if (root[r] != r || count[r] < 2) continue;
        int nm = 0;
        for (int id = 0; id <= r; id++)
            if (root[id] == r) members[nm++] = id;
        wf__jit_cluster *c = NULL;
        if ((s = build(b, members, nm, &c))) break;
        /* the device must have the kernel for these inputs */
        wf__tinfo in_info[2 * WF__EW_MAX_REGS];
        for (int i = 0; i < c->n_ext && i < 2 * WF__EW_MAX_REGS; i++) in_info[i] = *info_of(b, c->ext[i]);
        const struct wf__device *d = &b->ctx->devices[b->dev_of[r]];
        if (c->n_ext > 2 * WF__EW_MAX_REGS ||
            !d->vt->find_kernel(d->dev, "FusedElementwise", in_info, c->n_ext, b->info[r])) {
            wf__jit_cluster_free(c);
            continue;
        }
        fu[r].cl = c;
        fu[r].ext = c->ext;
        fu[r].n_ext = c->n_ext;
        for (int k = 0; k < nm - 1; k++) {
            b->fused_away[members[k]] = true;
            b->fuse_into[members[k]] = r;
        }
    }
out:
    wf__free(root);
    wf__free(size);
    wf__free(cfirst);
    wf__free(cons);
    wf__free(fill);
    wf__free(members);
    wf__free(cand);
    return s;
}
