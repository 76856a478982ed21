/*
 * Layout planning, the "layout" pass of optimisation level 3, after placement and fusion.
 *
 * oneDNN's fast convolutions work on channel-blocked tensors (nChw16c with AVX-512, nChw8c with AVX2:
 * [N][C/b][H][W][b]); on plain NCHW a Conv2D either reorders its source in and its result out, or
 * takes oneDNN's im2col GEMM path. ResNet-50 spent 9 of its 52 ms in those reorders and 29 ms in the
 * GEMM path (ONEDNN_VERBOSE, 2 threads, AVX-512). This pass keeps a value blocked when everything
 * around it can take it that way, so a chain of convolutions reorders only at its ends:
 *
 * - a value can be blocked when it is 4-D f32 with a channel count that is a multiple of the device's
 *   block (wf_backend_device_info.channel_block), is not fetched, and its producer is
 *     - a Conv2D whose kernel has WF__K_BLOCKED (with its fused bias and activation), or
 *     - a generated elementwise kernel (lower/jit.c) whose inputs are blocked values or scalars, or
 *     - an elementwise op (a unary one, or a binary one whose two inputs have its own shape, as the
 *       residual Add of a ResNet block) whose inputs are all blocked values; or an Add, Sub, Mul or
 *       Div of a blocked value and one value per channel ([N or 1, C, 1, 1]: the scale of a
 *       squeeze-and-excitation block), whose CPU kernels (WF__K_BLOCKED) take that pair;
 * - and every consumer is on the same device and is such a Conv2D or a GlobalAvgPool (WF__K_BLOCKED
 *   too) reading it as its input X, or such an elementwise op whose own output is blocked; a Conv2D that
 *   absorbed a residual Add (lower/plan.c) reads the residual in its output's layout, so the two are
 *   blocked together or not at all.
 *
 * The decision is the largest set of values that satisfies both rules: start from every value that
 * could be blocked and drop the ones whose producer or consumers break a rule until nothing changes.
 * Elementwise kernels need no change: two operands in the same layout and of the same size hold the
 * same elements at the same offsets. A MaxPool2D or AvgPool2D, and a Concat along the channels of 4-D
 * values whose channel counts are whole blocks (at most 32 inputs), whose kernels have WF__K_BLOCKED
 * (the CPU's, k_pool.c and k_shape.c), are kept blocked like elementwise ops: when all their inputs are
 * and every consumer takes it, so a SqueezeNet fire module, an inception module or a max pool between
 * two stages stays in one region; so is an inference BatchNormalization left unfolded (DenseNet's
 * pre-activation BN after each Concat), whose per-channel parameters are read plain. Whatever leaves the set (a Reshape, a Transpose, a fetch)
 * gets a plain value, because its producer writes plain; a Conv2D reading a plain value reorders it
 * itself, as at level 2. Values do not change size, because the channel count divides by the block,
 * so the memory plan is unchanged.
 */
#include "lower/layout.h"

static bool unary_eltwise(const char *op)
{
    static const char *const ops[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Swish", "HardSwish", "HardSigmoid",
                                      "Elu", "Selu", "Celu", "Softplus", "Gelu", "Mish", "Abs", "Neg", "Exp",
                                      "Identity", NULL};
    for (int i = 0; ops[i]; i++)
        if (!strcmp(op, ops[i])) return true;
    return false;
}

static bool binary_eltwise(const char *op)
{
    return !strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") ||
           !strcmp(op, "Maximum") || !strcmp(op, "Minimum");
}

static bool same_dims(const wf__tinfo *a, const wf__tinfo *b)
{
    if (a->rank != b->rank || a->dtype != b->dtype) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

typedef struct lay {
    const wf__plan_builder *b;
    const wf__plan_fusion *fu;
    wf__plan *p;
    int *head;    /* graph node -> the node whose plan node computes its output (itself, or what absorbs it) */
    int *last;    /* head -> the graph node whose output is the group's value */
    int *cfirst;  /* head -> first index of its value's consumers in cons (CSR) */
    int *cons;    /* consumer heads */
    bool *blk;    /* head -> its value is blocked */
} lay;

/* A node whose kernel reads its input X blocked (WF__K_BLOCKED): a Conv2D, which can also write its
 * result blocked, or a GlobalAvgPool (its N x C x 1 x 1 result is the same in every layout). Grouped
 * convolutions only when each group's channels fill whole blocks, or depthwise ones (one channel per
 * group), which oneDNN's blocked kernels cover. */
static bool reads_blocked(const lay *L, int h)
{
    const wf__plan_builder *b = L->b;
    const wf_node *n = b->g->nodes[h];
    const wf__pnode *pn = &L->p->nodes[b->pidx[h]];
    if (!pn->kernel || !(pn->kernel->flags & WF__K_BLOCKED) || n->n_in < 1 || !n->in[0].node) return false;
    if (!strcmp(n->op->name, "GlobalAvgPool")) return b->info[h][0].dtype == WF_F32;
    if (strcmp(n->op->name, "Conv2D")) return false;
    int64_t g = wf__attr_i(n->op, n->attrs, "group"), cb = b->ctx->devices[b->dev_of[h]].info.channel_block;
    int64_t c = b->info[n->in[0].node->id][n->in[0].index].dims[1], oc = b->info[L->last[h]][0].dims[1];
    if (c <= 0) return false; /* no input channels: the kernel writes the bias plainly */
    if (g <= 1) return true;
    if (g == c && g == oc) return true;
    return cb > 0 && c > 0 && oc > 0 && c % g == 0 && oc % g == 0 && (c / g) % cb == 0 && (oc / g) % cb == 0;
}

/* u is one value per channel of t: [N or 1, C, 1, 1] (its bytes are the same in every layout) */
static bool per_channel_of(const wf__tinfo *u, const wf__tinfo *t)
{
    return u->dtype == t->dtype && u->rank == 4 && (u->dims[0] == 1 || u->dims[0] == t->dims[0]) &&
           u->dims[1] == t->dims[1] && u->dims[2] == 1 && u->dims[3] == 1 && (t->dims[2] != 1 || t->dims[3] != 1);
}

/* How many leading inputs of h must be blocked for h to pass the layout through (-1: h cannot): a pool
 * or a channel Concat, which read their inputs and write their result in the same layout, and an
 * inference BatchNormalization, whose per-channel parameters (inputs 1-4) are read plain. Their kernels
 * have WF__K_BLOCKED (the CPU's MaxPool2D, AvgPool2D, Concat and BatchNormalization). */
static int blocked_inputs(const lay *L, int h)
{
    const wf__plan_builder *b = L->b;
    const wf_node *n = b->g->nodes[h];
    const wf__pnode *pn = &L->p->nodes[b->pidx[h]];
    if (!pn->kernel || !(pn->kernel->flags & WF__K_BLOCKED) || n->n_in < 1 || !n->in[0].node) return -1;
    const char *op = n->op->name;
    if (!strcmp(op, "MaxPool2D") || !strcmp(op, "AvgPool2D")) return n->n_in == 1 ? 1 : -1;
    if (!strcmp(op, "BatchNormalization")) return n->n_in == 5 ? 1 : -1;
    if (strcmp(op, "Concat") || n->n_in > 32) return -1;
    int64_t axis = wf__attr_i(n->op, n->attrs, "axis");
    if (axis != 1 && axis != -3) return -1;
    int cb = b->ctx->devices[b->dev_of[h]].info.channel_block;
    if (cb <= 0) return -1; /* a device without blocked layouts (could_block says so first) */
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i].node) return -1;
        const wf__tinfo *u = &b->info[n->in[i].node->id][n->in[i].index];
        if (u->dtype != WF_F32 || u->rank != 4 || u->dims[1] <= 0 || u->dims[1] % cb) return -1;
    }
    return n->n_in;
}

/* Whether h's output could be blocked, from itself alone. */
static bool could_block(const lay *L, int h)
{
    const wf__plan_builder *b = L->b;
    const wf_node *n = b->g->nodes[h];
    int l = L->last[h], dev = b->dev_of[h], cb = b->ctx->devices[dev].info.channel_block;
    const wf__tinfo *t = &b->info[l][0];
    if (cb <= 0 || !b->ctx->devices[dev].info.host_memory || b->feed_of[h] >= 0 || b->fetched[l] || n->n_out != 1)
        return false;
    if (t->dtype != WF_F32 || t->rank != 4 || t->dims[1] <= 0 || t->dims[1] % cb || t->dims[0] <= 0 ||
        t->dims[2] <= 0 || t->dims[3] <= 0)
        return false;
    if (!strcmp(n->op->name, "Conv2D")) return reads_blocked(L, h);
    if (blocked_inputs(L, h) >= 0) return true;
    if (L->fu[h].cl) {
        /* a generated kernel (lower/jit.c) reads its inputs by position only when they broadcast */
        int full = 0;
        for (int i = 0; i < L->fu[h].n_ext; i++) {
            const wf__tinfo *u = &b->info[L->fu[h].ext[i].node->id][L->fu[h].ext[i].index];
            if (same_dims(u, t)) full++;
            else if (wf__numel(u->rank, u->dims) != 1) return false;
        }
        return full >= 1;
    }
    if (unary_eltwise(n->op->name)) return n->n_in == 1 && n->in[0].node;
    if (!binary_eltwise(n->op->name) || n->n_in != 2 || !n->in[0].node || !n->in[1].node) return false;
    int full = 0;
    for (int i = 0; i < 2; i++) {
        const wf__tinfo *u = &b->info[n->in[i].node->id][n->in[i].index];
        if (same_dims(u, t)) full++;
        else if (!per_channel_of(u, t) || !(L->p->nodes[b->pidx[h]].kernel->flags & WF__K_BLOCKED)) return false;
    }
    return full >= 1;
}

/* The head whose value o is, or -1 when it is no group's value. */
static int value_of(const lay *L, wf_output o)
{
    const wf_node *src = o.node;
    if (!src || o.index != 0 || !L->b->live[src->id]) return -1;
    int h = L->head[src->id];
    return L->last[h] == src->id ? h : -1;
}

/* The head whose blocked value input i of node n reads, or -1 when it reads no group's value. */
static int input_value(const lay *L, const wf_node *n, int i) { return value_of(L, n->in[i]); }

/* A Conv2D's absorbed residual (lower/plan.c): the head whose value it adds, -1 when that is no group's
 * value, -2 when h has none. It is added in the output's own layout, so the two are blocked together. */
static int residual_of(const lay *L, int h) { return L->fu[h].res_node >= 0 ? value_of(L, L->fu[h].res) : -2; }

/* The heads of the values a node's prologue reads besides its inputs (lower/plan.c: a Softmax's divisor
 * and mask, a LayerNormalization's skip), k = 0, 1, 2; -1 (none, or no group's) or -2 (k past the end).
 * They count as plain reads, so a value one of them reads is never left blocked. */
static int prologue_value(const lay *L, int h, int k)
{
    const wf__plan_fusion *f = &L->fu[h];
    const wf_output o = k == 0 ? f->pre_div : k == 1 ? f->pre_mask : k == 2 ? f->pre_skip : (wf_output){NULL, 0};
    return k > 2 ? -2 : o.node ? value_of(L, o) : -1;
}

/* Whether h, blocked, still satisfies both rules against the current set. */
static bool still_blocked(const lay *L, int h)
{
    const wf__plan_builder *b = L->b;
    const wf_node *n = b->g->nodes[h];
    int rv = residual_of(L, h);
    if (rv != -2 && (rv < 0 || !L->blk[rv])) return false;
    int nb = blocked_inputs(L, h);
    if (nb >= 0) {
        /* those inputs blocked, whatever their shape */
        for (int i = 0; i < nb; i++) {
            int v = input_value(L, n, i);
            if (v < 0 || !L->blk[v]) return false;
        }
    } else if (strcmp(n->op->name, "Conv2D")) {
        const wf_output *in;
        int n_in = wf__plan_inputs(L->fu, n, &in);
        for (int i = 0; i < n_in; i++) {
            /* a per-channel operand may come in any layout: its bytes are the same */
            if (!same_dims(&b->info[in[i].node->id][in[i].index], &b->info[L->last[h]][0])) continue;
            int v = value_of(L, in[i]);
            if (v < 0 || !L->blk[v]) return false;
        }
    }
    for (int k = L->cfirst[h]; k < L->cfirst[h + 1]; k++) {
        int c = L->cons[k];
        const wf_node *cn = b->g->nodes[c];
        if (b->dev_of[c] != b->dev_of[h]) return false;
        if (residual_of(L, c) == h && !L->blk[c]) return false;
        if (reads_blocked(L, c)) {
            /* only as X: weights and bias are read plain */
            for (int i = 1; i < cn->n_in; i++)
                if (input_value(L, cn, i) == h) return false;
            if (b->info[L->last[c]][0].dtype != WF_F32) return false;
        } else if (!L->blk[c]) {
            return false;
        }
    }
    return true;
}

wf_status *wf__plan_layout(const wf__plan_builder *b, const wf__plan_fusion *fu, wf__plan *p)
{
    int n = b->n;
    lay L = {b, fu, p, NULL, NULL, NULL, NULL, NULL};
    size_t nn = (size_t)(n ? n : 1);
    L.head = wf__malloc(sizeof(int) * nn);
    L.last = wf__malloc(sizeof(int) * nn);
    L.cfirst = wf__calloc(nn + 1, sizeof(int));
    L.blk = wf__calloc(nn, sizeof(bool));
    wf_status *s = NULL;
    if (!L.head || !L.last || !L.cfirst || !L.blk) {
        s = wf__oom("layout planning", sizeof(int) * nn);
        goto out;
    }
    for (int id = 0; id < n; id++) {
        L.head[id] = !b->live[id] ? -1 : b->fused_away[id] ? b->fuse_into[id] : id;
        L.last[id] = fu[id].act_node >= 0   ? fu[id].act_node
                     : fu[id].res_node >= 0 ? fu[id].res_node
                     : fu[id].bias_node >= 0 ? fu[id].bias_node
                                             : id;
    }
    /* the consumers of each group's value, as heads (CSR): count, then fill */
    size_t n_edges = 0;
    for (int pass = 0; pass < 2; pass++) {
        int *fill = NULL;
        if (pass == 1) {
            for (int h = 0; h < n; h++) L.cfirst[h + 1] += L.cfirst[h];
            n_edges = (size_t)L.cfirst[n];
            L.cons = wf__malloc(sizeof(int) * (n_edges ? n_edges : 1));
            fill = wf__malloc(sizeof(int) * nn);
            if (!L.cons || !fill) {
                wf__free(fill);
                s = wf__oom("layout planning", sizeof(int) * n_edges);
                goto out;
            }
            memcpy(fill, L.cfirst, sizeof(int) * nn);
        }
        for (int c = 0; c < n; c++) {
            if (!b->live[c] || b->fused_away[c]) continue;
            const wf_output *in;
            int n_in = wf__plan_inputs(fu, b->g->nodes[c], &in);
            for (int i = 0; i <= n_in + 3; i++) {
                int v = i < n_in ? value_of(&L, in[i]) : i == n_in ? residual_of(&L, c) : prologue_value(&L, c, i - n_in - 1);
                if (v < 0 || v == c) continue;
                if (pass == 0) L.cfirst[v + 1]++;
                else L.cons[fill[v]++] = c;
            }
        }
        wf__free(fill);
    }
    for (int h = 0; h < n; h++) L.blk[h] = b->live[h] && !b->fused_away[h] && b->pidx[h] >= 0 && could_block(&L, h);
    for (bool changed = true; changed;) {
        changed = false;
        for (int h = 0; h < n; h++)
            if (L.blk[h] && !still_blocked(&L, h)) {
                L.blk[h] = false;
                changed = true;
            }
    }
    for (int c = 0; c < n; c++) {
        if (!b->live[c] || b->fused_away[c] || b->pidx[c] < 0) continue;
        wf__pnode *pn = &p->nodes[b->pidx[c]];
        const wf_output *in;
        int n_in = wf__plan_inputs(fu, b->g->nodes[c], &in);
        pn->out_blocked = L.blk[c] ? 1u : 0u;
        for (int i = 0; i < n_in && i < 32; i++) {
            int v = value_of(&L, in[i]);
            if (v >= 0 && L.blk[v]) pn->in_blocked |= 1u << i;
        }
        int rv = residual_of(&L, c);
        if (rv >= 0 && L.blk[rv] && pn->fused_res > 0 && pn->fused_res < 32) pn->in_blocked |= 1u << pn->fused_res;
    }
out:
    wf__free(L.head);
    wf__free(L.last);
    wf__free(L.cfirst);
    wf__free(L.cons);
    wf__free(L.blk);
    return s;
}
