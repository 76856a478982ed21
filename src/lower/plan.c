/*
 * Planning: validate feeds and fetches, prune to what the fetches need, re-run shape inference with
 * the fed shapes, fuse MatMul/Conv2D with a following BiasAdd and activation, place every node, pick
 * kernels, and lay out slots, successor lists and pending counts for the executor.
 */
#include <math.h>
#include <stdio.h>

#include "device/device.h"
#include "lower/jit.h"
#include "lower/layout.h"
#include "lower/memplan.h"
#include "lower/plan.h"
#include "place/placement.h"

typedef wf__plan_builder builder;

static bool same_graph(const wf_graph *g, const wf_node *n)
{
    return n && n->graph == g && n->id < g->n && g->nodes[n->id] == n;
}

static wf_status *check_feeds(builder *b, const wf_feed *feeds, int n_feeds)
{
    char s1[160], s2[160];
    for (int i = 0; i < n_feeds; i++) {
        const wf_node *n = feeds[i].output.node;
        if (!same_graph(b->g, n))
            return wf__status(WF_INVALID_ARGUMENT, "feed %d names a node that is not in this graph", i);
        bool with_default = !strcmp(n->op->name, "PlaceholderWithDefault");
        bool variable = !strcmp(n->op->name, "Variable"); /* the session feeds a variable's value */
        if (strcmp(n->op->name, "Placeholder") != 0 && !with_default && !variable)
            return wf__status(WF_INVALID_ARGUMENT,
                              "cannot feed node '%s' (%s): only Placeholder nodes can be fed", n->name,
                              n->op->name);
        const wf_tensor *t = feeds[i].tensor;
        if (!t) return wf__status(WF_INVALID_ARGUMENT, "feed for placeholder '%s' is a NULL tensor", n->name);
        if (b->feed_of[n->id] >= 0)
            return wf__status(WF_INVALID_ARGUMENT, "placeholder '%s' is fed twice", n->name);
        b->feed_of[n->id] = i;
        const wf__tinfo *want = &n->out[0];
        if (t->dtype != want->dtype)
            return wf__status(WF_INVALID_ARGUMENT, "feed for placeholder '%s' has dtype %s, expected %s",
                              n->name, wf_dtype_name(t->dtype), wf_dtype_name(want->dtype));
        /* A default's shape is only an example: the fed value's shape is checked by re-inference. */
        bool ok = with_default || want->rank < 0 || want->rank == t->rank;
        for (int d = 0; ok && want->rank > 0 && d < want->rank; d++)
            ok = want->dims[d] < 0 || want->dims[d] == t->dims[d];
        if (!ok)
            return wf__status(WF_INVALID_ARGUMENT, "feed for placeholder '%s' has shape %s, expected %s",
                              n->name, wf__shape_str(t->rank, t->dims, s1),
                              wf__shape_str(want->rank, want->dims, s2));
    }
    return NULL;
}

static wf_status *mark_live(builder *b, const wf_output *fetches, int n_fetches)
{
    int *stack = wf__malloc(sizeof(int) * (size_t)(b->n ? b->n : 1));
    if (!stack) return wf__oom("planning", sizeof(int) * (size_t)b->n);
    int top = 0;
    for (int i = 0; i < n_fetches; i++) {
        const wf_node *n = fetches[i].node;
        if (!b->live[n->id]) {
            b->live[n->id] = true;
            stack[top++] = n->id;
        }
    }
    while (top) {
        const wf_node *n = b->g->nodes[stack[--top]];
        if (b->feed_of[n->id] >= 0) continue; /* a fed PlaceholderWithDefault does not need its input */
        for (int i = 0; i < n->n_in; i++) {
            const wf_node *src = n->in[i].node;
            if (src && !b->live[src->id]) {
                b->live[src->id] = true;
                stack[top++] = src->id;
            }
        }
    }
    wf__free(stack);
    for (int id = 0; id < b->n; id++) {
        const wf_node *n = b->g->nodes[id];
        if (b->live[id] && !strcmp(n->op->name, "Variable") && b->feed_of[id] < 0)
            return wf__status(WF_FAILED_PRECONDITION,
                              "variable '%s' has no value here: variables are read through a session", n->name);
        if (b->live[id] && !strcmp(n->op->name, "Placeholder") && b->feed_of[id] < 0) {
            char sh[160];
            return wf__status(WF_FAILED_PRECONDITION,
                              "placeholder '%s' (%s) is needed to compute the fetches but was not fed", n->name,
                              wf__tinfo_str(&n->out[0], sh));
        }
    }
    return NULL;
}

/* Shape inference again, now with the fed shapes, so kernels and costs see concrete shapes. */
static wf_status *reinfer(builder *b, const wf_feed *feeds)
{
    wf__tinfo in_buf[16];
    wf_tensor *val_buf[16];
    for (int id = 0; id < b->n; id++) {
        if (!b->live[id]) continue;
        const wf_node *n = b->g->nodes[id];
        b->info[id] = wf__calloc((size_t)(n->n_out ? n->n_out : 1), sizeof(wf__tinfo));
        b->value[id] = wf__calloc((size_t)(n->n_out ? n->n_out : 1), sizeof(wf_tensor *));
        if (!b->info[id] || !b->value[id]) return wf__oom("planning", sizeof(wf__tinfo) * (size_t)n->n_out);
        if (b->feed_of[id] >= 0) {
            const wf_tensor *t = feeds[b->feed_of[id]].tensor;
            b->info[id][0].dtype = t->dtype;
            b->info[id][0].rank = t->rank;
            memcpy(b->info[id][0].dims, t->dims, sizeof t->dims);
            continue;
        }
        wf__tinfo *in = n->n_in <= 16 ? in_buf : wf__calloc((size_t)n->n_in, sizeof *in);
        wf_tensor **val = n->n_in <= 16 ? val_buf : wf__calloc((size_t)n->n_in, sizeof *val);
        wf_status *s = NULL;
        if (!in || !val) {
            s = wf__oom("planning", sizeof *in * (size_t)n->n_in);
        } else {
            for (int i = 0; i < n->n_in; i++) {
                const wf_node *src = n->in[i].node;
                if (src) {
                    in[i] = b->info[src->id][n->in[i].index];
                    val[i] = b->value[src->id][n->in[i].index];
                } else {
                    in[i].dtype = WF_DTYPE_INVALID;
                    in[i].rank = -1;
                    val[i] = NULL;
                }
            }
            s = wf__node_infer(n, in, val, b->info[id], b->value[id]);
        }
        if (in != in_buf) wf__free(in);
        if (val != val_buf) wf__free(val);
        if (s) return s;
    }
    return NULL;
}

static bool attr_str_is(const wf_node *n, const char *attr, const char *want)
{
    for (int k = 0; k < WF__MAX_ATTRS && n->op->attrs[k].name; k++)
        if (!strcmp(n->op->attrs[k].name, attr)) return n->attrs[k].s && !strcmp(n->attrs[k].s, want);
    return false;
}

/* The only live consumer of node id's output 0, if there is exactly one and nobody fetches it. */
static const wf_node *sole_consumer(builder *b, int id)
{
    if (b->consumers[id] != 1 || b->fetched[id]) return NULL;
    const wf_node *src = b->g->nodes[id];
    for (int c = id + 1; c < b->n; c++) {
        if (!b->live[c]) continue;
        const wf_node *n = b->g->nodes[c];
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i].node == src && n->in[i].index == 0) return b->dev_of[c] == b->dev_of[id] ? n : NULL;
    }
    return NULL;
}

/* One bound of a Clip: input i absent (the bound is `none`), or a constant f32 scalar that is not NaN. */
static bool clip_bound(const builder *b, const wf_node *n, int i, double none, double *v)
{
    *v = none;
    if (n->n_in <= i || !n->in[i].node) return true;
    const wf_tensor *t = b->value[n->in[i].node->id] ? b->value[n->in[i].node->id][n->in[i].index] : NULL;
    if (!t || t->dtype != WF_F32 || t->size != 1) return false;
    *v = wf__load_f64(t->data, t->dtype, 0);
    return !isnan(*v);
}

/* Clip(x, lo, hi) with constant bounds (lo absent: -inf, hi absent: +inf), f32: its bounds; else false.
 * The epilogue computes the node's own expression, min(max(x, lo), hi) with NaN passing both compares,
 * so lo > hi gives hi everywhere, as the node (and ONNX) does. */
static bool clip_bounds(const builder *b, const wf_node *n, double *lo, double *hi)
{
    return !strcmp(n->op->name, "Clip") && clip_bound(b, n, 1, -INFINITY, lo) && clip_bound(b, n, 2, INFINITY, hi);
}

static int act_of(const wf_node *n)
{
    const char *op = n->op->name;
    if (!strcmp(op, "Relu")) return WF__ACT_RELU;
    if (!strcmp(op, "LeakyRelu")) return WF__ACT_LEAKY_RELU;
    if (!strcmp(op, "Sigmoid")) return WF__ACT_SIGMOID;
    if (!strcmp(op, "Tanh")) return WF__ACT_TANH;
    if (!strcmp(op, "Swish")) return WF__ACT_SWISH;
    if (!strcmp(op, "HardSwish")) return WF__ACT_HARDSWISH;
    if (!strcmp(op, "Gelu") && attr_str_is(n, "approximate", "none")) return WF__ACT_GELU;
    if (!strcmp(op, "Gelu") && attr_str_is(n, "approximate", "tanh")) return WF__ACT_GELU_TANH;
    if (!strcmp(op, "Clip")) return WF__ACT_CLIP; /* fusable with constant bounds (clip_bounds) */
    return WF__ACT_NONE;
}

/* Epilogue fusion: MatMul -> BiasAdd(last dim) -> act, Conv2D -> BiasAdd(NCHW) -> act and
 * BatchNormalization (inference) -> Relu, when each intermediate value has a single consumer and is not
 * fetched. */
typedef wf__plan_fusion fusion;

static void plan_fusion(builder *b, fusion *fu)
{
    for (int id = 0; id < b->n; id++) {
        fu[id].bias_node = fu[id].act_node = fu[id].res_node = -1;
        const wf_node *n = b->g->nodes[id];
        if (!b->live[id] || b->fused_away[id] || b->feed_of[id] >= 0 || (b->po && b->po->no_fusion)) continue;
        bool mm = !strcmp(n->op->name, "MatMul"), conv = !strcmp(n->op->name, "Conv2D");
        /* an inference BatchNormalization takes a following Relu into its affine pass (DenseNet's
         * pre-activation BN -> Relu -> Conv: one pass over the feature map instead of two) */
        bool bn = !strcmp(n->op->name, "BatchNormalization") && n->n_in == 5;
        if (!mm && !conv && !bn) continue;
        if (b->dev_of[id] != 0) continue; /* epilogues are a CPU kernel feature for now */
        wf_dtype dt = b->info[id][0].dtype;
        /* f32, and bf16 (mixed precision): the CPU's oneDNN kernels apply the bias and activation in the
         * primitive (or one pass after it) in either */
        if (dt != WF_F32 && dt != WF_BF16) continue;
        /* Conv2D with its own bias input takes only an activation; BatchNormalization only Relu. */
        bool has_bias = (conv && n->n_in > 2 && n->in[2].node) || bn;
        const wf_node *c = sole_consumer(b, id);
        int last = id;
        if (c && !has_bias && !strcmp(c->op->name, "BiasAdd") && c->in[0].node == n && c->n_in == 2 &&
            c->in[1].node && b->info[c->in[1].node->id][c->in[1].index].rank == 1 &&
            attr_str_is(c, "data_format", mm ? "NHWC" : "NCHW") && b->info[c->id][0].dtype == dt) {
            fu[id].bias_node = c->id;
            last = c->id;
            c = sole_consumer(b, c->id);
        }
        /* A residual Add (a ResNet block's shortcut, a transformer's x + attention(x)): the convolution's
         * or product's value plus another value of its own shape, f32 only. The CPU kernel adds it inside
         * the primitive (oneDNN's sum post-op, over the residual copied to, or planned in place in, the
         * output's bytes), so the sum is written once instead of the result being written, read back and
         * written again. Only Relu may follow it (applied after the sum, as the graph says). Where both
         * operands are convolutions (a downsampling block's shortcut), the first in graph order takes the
         * Add; the other must not (each would wait for the other). */
        if (c && (conv || mm) && dt == WF_F32 && !strcmp(c->op->name, "Add") && c->n_in == 2 && !b->fused_away[c->id] &&
            !(b->po && b->po->no_residual)) {
            const wf_node *ln = b->g->nodes[last];
            int mine = c->in[0].node == ln && c->in[0].index == 0 ? 0 : c->in[1].node == ln && c->in[1].index == 0 ? 1 : -1;
            wf_output o = mine >= 0 ? c->in[1 - mine] : (wf_output){0};
            const wf__tinfo *to = &b->info[c->id][0], *tl = &b->info[last][0];
            const wf__tinfo *tr = o.node && b->live[o.node->id] ? &b->info[o.node->id][o.index] : NULL;
            bool same = tr && to->dtype == dt && tr->dtype == dt && to->rank >= 1 && tr->rank == to->rank &&
                        tl->rank == to->rank && (!conv || to->rank == 4);
            for (int d = 0; same && d < to->rank; d++)
                same = to->dims[d] == tr->dims[d] && to->dims[d] == tl->dims[d] && to->dims[d] >= 0;
            if (same && o.node != ln) {
                fu[id].res_node = c->id;
                fu[id].res = o;
                last = c->id;
                c = sole_consumer(b, c->id);
                if (c && act_of(c) != WF__ACT_RELU) c = NULL;
            }
        }
        /* swish and hardswish run as the CPU kernels' own pass after the primitive (k_dnnl.c
         * wf__dn_act_in_prim: oneDNN 2.6's post-ops for them were slow), in f32 */
        bool gated = c && (act_of(c) == WF__ACT_SWISH || act_of(c) == WF__ACT_HARDSWISH || act_of(c) == WF__ACT_GELU ||
                           act_of(c) == WF__ACT_CLIP || act_of(c) == WF__ACT_GELU_TANH);
        double clip_lo, clip_hi;
        if (c && act_of(c) == WF__ACT_CLIP && !clip_bounds(b, c, &clip_lo, &clip_hi)) c = NULL;
        if (c && act_of(c) != WF__ACT_NONE && !(gated && dt != WF_F32) && !(bn && act_of(c) != WF__ACT_RELU) &&
            c->in[0].node == b->g->nodes[last] &&
            b->info[c->id][0].dtype == dt) {
            fu[id].act_node = c->id;
            last = c->id;
        }
        if (fu[id].bias_node >= 0) {
            b->fused_away[fu[id].bias_node] = true;
            b->fuse_into[fu[id].bias_node] = id;
        }
        if (fu[id].act_node >= 0) {
            b->fused_away[fu[id].act_node] = true;
            b->fuse_into[fu[id].act_node] = id;
        }
        if (fu[id].res_node >= 0) {
            b->fused_away[fu[id].res_node] = true;
            b->fuse_into[fu[id].res_node] = id;
        }
    }
}


/* Prologue fusion: a Cast from u8 to f32 whose only consumer is a CPU Resize's image input is read by
 * the Resize itself (its kernel converts while it interpolates: k_misc_resize.c), so the f32 copy of the
 * image is never written. Exact: the Cast is, and the Resize computes from the same values. The image
 * pipelines' decode -> cast -> resize spent 8% of their time in that Cast. */
static wf_status *plan_cast_prologue(builder *b, fusion *fu)
{
    for (int id = 0; id < b->n; id++) {
        const wf_node *n = b->g->nodes[id];
        if (!b->live[id] || b->fused_away[id] || b->feed_of[id] >= 0 || (b->po && b->po->no_fusion)) continue;
        if (strcmp(n->op->name, "Resize") || fu[id].ext || b->dev_of[id] != 0 || !n->in[0].node) continue;
        const wf_node *c = n->in[0].node;
        int cid = c->id;
        if (n->in[0].index != 0 || strcmp(c->op->name, "Cast") || !b->live[cid] || b->fused_away[cid] ||
            b->feed_of[cid] >= 0 || fu[cid].ext || !c->in[0].node || sole_consumer(b, cid) != n)
            continue;
        if (b->info[c->in[0].node->id][c->in[0].index].dtype != WF_U8 || b->info[cid][0].dtype != WF_F32) continue;
        wf_output *ext = wf__malloc(sizeof *ext * (size_t)n->n_in);
        if (!ext) return wf__oom("planning", sizeof *ext * (size_t)n->n_in);
        memcpy(ext, n->in, sizeof *ext * (size_t)n->n_in);
        ext[0] = c->in[0];
        fu[id].own_ext = ext;
        fu[id].ext = ext;
        fu[id].n_ext = n->n_in;
        b->fused_away[cid] = true;
        b->fuse_into[cid] = id;
    }
    return NULL;
}

/* Whether Add a adds to its operand j, row by row from `axis` on, the other operand as the Softmax mask
 * and LayerNorm skip kernels read it (k_norm.c): f32 or f64 like a, broadcast right-aligned, of operand
 * j's own known dims from `axis` on and 1 or operand j's dims before it, so it never broadcasts operand
 * j (whose unknown outer dims, a dynamic batch, are allowed only where the operand is 1 or absent). */
static bool row_operand(const builder *b, const wf_node *a, int j, int axis)
{
    if (!a->in[0].node || !a->in[1].node) return false;
    const wf__tinfo *tx = &b->info[a->in[j].node->id][a->in[j].index];
    const wf__tinfo *ts = &b->info[a->in[1 - j].node->id][a->in[1 - j].index], *to = &b->info[a->id][0];
    if (tx->rank < 1 || !wf__tinfo_known(ts) || tx->dtype != to->dtype || ts->dtype != to->dtype ||
        (to->dtype != WF_F32 && to->dtype != WF_F64) || tx->rank != to->rank || ts->rank > tx->rank)
        return false;
    int ax = axis < 0 ? axis + tx->rank : axis;
    if (ax < 0 || ax >= tx->rank || ts->rank < tx->rank - ax) return false;
    for (int d = 0; d < tx->rank; d++) {
        if (tx->dims[d] != to->dims[d]) return false;
        int sd = d - (tx->rank - ts->rank);
        int64_t m = sd < 0 ? 1 : ts->dims[sd];
        if (d >= ax ? tx->dims[d] < 0 || m != tx->dims[d] : m != 1 && (tx->dims[d] < 0 || m != tx->dims[d]))
            return false;
    }
    return true;
}

/* Prologue fusion: Softmax(x / c), c of one element (attention's QK^T / sqrt(d)), and Softmax(x [/ c] +
 * m) over the last axis, m a mask that broadcasts onto x with x's last dimension (attention's mask when
 * it is computed at run time: passes/attention.c takes only constant ones), on the CPU in f32 or f64.
 * The Softmax reads x, c and m and forms each row in cache before its max (k_norm.c): the same quotients
 * and sums as the Div and Add nodes, which no longer write their results out and read them back. */
static bool softmax_last_axis(const builder *b, const wf_node *n)
{
    int rank = b->info[n->id][0].rank;
    int64_t axis = wf__attr_i(n->op, n->attrs, "axis");
    return rank >= 1 && (axis == -1 || axis == rank - 1);
}

/* Whether the Softmax's input (d, the node behind x) may be absorbed: live, not fed or fused, and read
 * by consumer alone. */
static bool absorbable(builder *b, const wf_node *d, const wf_node *consumer)
{
    int id = d->id;
    return b->live[id] && !b->fused_away[id] && b->feed_of[id] < 0 && sole_consumer(b, id) == consumer;
}

static wf_status *plan_softmax_prologue(builder *b, fusion *fu)
{
    for (int id = 0; id < b->n; id++) {
        const wf_node *n = b->g->nodes[id];
        if (!b->live[id] || b->fused_away[id] || b->feed_of[id] >= 0 || (b->po && b->po->no_fusion)) continue;
        if ((strcmp(n->op->name, "Softmax") && strcmp(n->op->name, "LogSoftmax")) || n->n_in != 1 || fu[id].ext ||
            b->dev_of[id] != 0 || !n->in[0].node || n->in[0].index != 0)
            continue;
        wf_output x = n->in[0], mask = {NULL, 0};
        const wf_node *add = NULL, *consumer = n;
        /* [+ m]: an Add read by the Softmax alone, over the last axis */
        if (!strcmp(x.node->op->name, "Add") && x.node->n_in == 2 && absorbable(b, x.node, n) && !fu[x.node->id].ext &&
            softmax_last_axis(b, n)) {
            for (int j = 0; j < 2 && !add; j++)
                if (row_operand(b, x.node, j, -1)) {
                    add = x.node;
                    mask = add->in[1 - j];
                    x = add->in[j];
                }
            if (add) consumer = add;
        }
        /* [/ c] */
        const wf_node *d = x.node;
        bool div = d && x.index == 0 && !strcmp(d->op->name, "Div") && d->n_in == 2 && d->in[0].node && d->in[1].node &&
                   absorbable(b, d, consumer) && !fu[d->id].ext;
        if (div) {
            const wf__tinfo *tx = &b->info[d->in[0].node->id][d->in[0].index];
            const wf__tinfo *tc = &b->info[d->in[1].node->id][d->in[1].index], *to = &b->info[d->id][0];
            div = (tx->dtype == WF_F32 || tx->dtype == WF_F64) && tc->dtype == tx->dtype && to->dtype == tx->dtype &&
                  wf__numel(tc->rank, tc->dims) == 1 && tc->rank <= tx->rank && tx->rank == to->rank;
        }
        if (!div && !add) continue;
        wf_output *ext = wf__malloc(sizeof *ext);
        if (!ext) return wf__oom("planning", sizeof *ext);
        ext[0] = div ? d->in[0] : x;
        fu[id].own_ext = ext;
        fu[id].ext = ext;
        fu[id].n_ext = 1;
        if (div) {
            fu[id].pre_div = d->in[1];
            b->fused_away[d->id] = true;
            b->fuse_into[d->id] = id;
        }
        if (add) {
            fu[id].pre_mask = mask;
            b->fused_away[add->id] = true;
            b->fuse_into[add->id] = id;
        }
    }
    return NULL;
}

/* Prologue fusion, ONNX Runtime's SkipLayerNormalization: LayerNormalization(a + b) on the CPU, f32 or
 * f64, the Add read by the LayerNormalization alone and not already taken (by a MatMul's residual, say):
 * the kernel reads a and b and sums each row in cache before its statistics (k_norm.c), the Add's sums
 * exactly, which are no longer written out and read back. b (the skip) may broadcast over the outer
 * dimensions (a position embedding added to every batch); over the normalised ones it is a's shape. */

static wf_status *plan_layernorm_prologue(builder *b, fusion *fu)
{
    for (int id = 0; id < b->n; id++) {
        const wf_node *n = b->g->nodes[id];
        if (!b->live[id] || b->fused_away[id] || b->feed_of[id] >= 0 || (b->po && b->po->no_fusion)) continue;
        if (strcmp(n->op->name, "LayerNormalization") || n->n_in < 2 || fu[id].ext || b->dev_of[id] != 0 ||
            !n->in[0].node || n->in[0].index != 0)
            continue;
        const wf_node *add = n->in[0].node;
        if (strcmp(add->op->name, "Add") || add->n_in != 2 || !absorbable(b, add, n) || fu[add->id].ext) continue;
        int axis = (int)wf__attr_i(n->op, n->attrs, "axis");
        for (int j = 0; j < 2; j++) {
            if (!row_operand(b, add, j, axis)) continue;
            wf_output *ext = wf__malloc(sizeof *ext * (size_t)n->n_in);
            if (!ext) return wf__oom("planning", sizeof *ext * (size_t)n->n_in);
            memcpy(ext, n->in, sizeof *ext * (size_t)n->n_in);
            ext[0] = add->in[j];
            fu[id].own_ext = ext;
            fu[id].ext = ext;
            fu[id].n_ext = n->n_in;
            fu[id].pre_skip = add->in[1 - j];
            b->fused_away[add->id] = true;
            b->fuse_into[add->id] = id;
            break;
        }
    }
    return NULL;
}

static void fusion_free(const builder *b, fusion *fu)
{
    for (int id = 0; id < b->n; id++) {
        wf__jit_cluster_free(fu[id].cl);
        wf__free(fu[id].own_ext);
    }
    wf__free(fu);
}

/* The rest of a generated kernel's plan node (its inputs are routed): the program, the kernel, the
 * members' names and the placer's estimates summed, and the reason line with the program's size,
 * hash and build time (what `weft run --explain` shows). */
static wf_status *lower_cluster(builder *b, fusion *fu, int id, wf__pnode *pn)
{
    wf__jit_cluster *cl = fu[id].cl;
    pn->device = b->dev_of[id];
    pn->reason = b->reason_of[id];
    b->reason_of[id] = NULL;
    const struct wf__device *d = &b->ctx->devices[pn->device];
    wf__tinfo in_info[2 * WF__EW_MAX_REGS];
    for (int i = 0; i < cl->n_ext && i < 2 * WF__EW_MAX_REGS; i++)
        in_info[i] = b->info[cl->ext[i].node->id][cl->ext[i].index];
    pn->kernel = d->vt->find_kernel(d->dev, "FusedElementwise", in_info, cl->n_ext, b->info[id]);
    if (!pn->kernel)
        return wf__status(WF_INTERNAL, "planning: node '%s' (%s): %s lost its FusedElementwise kernel", pn->name,
                          pn->op->name, d->name);
    pn->op = &wf__fused_elementwise_op;
    pn->attrs = NULL;
    pn->ewprog = cl->prog;
    cl->prog = NULL;
    pn->fused_names = cl->names;
    cl->names = NULL;
    pn->cheap = true; /* run inline when every member would be */
    double est = 0;
    for (int m = 0; m < cl->n_members; m++) {
        double e = b->est_of[cl->members[m]];
        if (e > 0) est += e;
        pn->cheap &= (b->g->nodes[cl->members[m]]->op->flags & WF__OP_CHEAP) != 0;
    }
    pn->est = est > 0 ? est : -1;
    int64_t n = pn->ewprog->n, bytes = n;
    for (int i = 0; i < cl->n_ext; i++) bytes += pn->ewprog->in[i].period == n ? n : pn->ewprog->in[i].period;
    pn->flops = (double)n * cl->n_members;
    pn->bytes = 4.0 * (double)bytes;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s; generated kernel of %d ops (program %016llx), built in %.3f ms",
             pn->reason ? pn->reason : "", cl->n_members, (unsigned long long)pn->ewprog->hash, cl->build_s * 1e3);
    char *r = wf__strdup(buf);
    if (!r) return wf__oom("planning", sizeof buf);
    wf__free(pn->reason);
    pn->reason = r;
    return NULL;
}

/* How much a plan can overlap: its estimated work over its critical path (nodes without an estimate
 * count 1 us). Below 1.5, handing ready nodes to other executor threads costs more than it saves: a
 * wake-up per hand-off, and two kernels that each run on every core through their intra-op threads
 * oversubscribe them (the demo model's training step took 0.43 ms with hand-offs and 0.28 ms
 * without, on 2 cores). The same holds when all the work off the critical path is less than
 * WF__HANDOFF_MIN_GAIN: a hand-off's wake-up and the caller's wait for the last node cost 10-30 us
 * (the MLP test model, 25 us a run, took 0.040 ms by default against 0.024 ms with --threads 1, and a
 * small attention model 0.058 against 0.024 ms with the other core busy). Such a plan, if it is all
 * on the CPU, runs on the calling thread; its kernels still use every core. */
#define WF__HANDOFF_MIN_GAIN 50e-6
static bool plan_is_serial(const wf_context *ctx, const wf__plan *p)
{
    int n = p->n_nodes;
    if (n < 2) return true;
    /* an accelerator's nodes and copies overlap the host's: keep the hand-offs */
    for (int v = 0; v < n; v++)
        if (!ctx->devices[p->nodes[v].device].info.host_memory) return false;
    int *indeg = wf__malloc(sizeof(int) * (size_t)n), *queue = wf__malloc(sizeof(int) * (size_t)n);
    double *start = wf__calloc((size_t)n, sizeof(double));
    bool serial = false;
    if (indeg && queue && start) {
        int head = 0, tail = 0;
        for (int v = 0; v < n; v++) {
            indeg[v] = p->nodes[v].pending0;
            if (!indeg[v]) queue[tail++] = v;
        }
        double work = 0, cp = 0;
        while (head < tail) {
            int v = queue[head++];
            const wf__pnode *pn = &p->nodes[v];
            double c = pn->est > 0 ? pn->est : 1e-6, fin = start[v] + c;
            work += c;
            if (fin > cp) cp = fin;
            for (int k = 0; k < pn->n_succ; k++) {
                int w = pn->succ[k];
                if (fin > start[w]) start[w] = fin;
                if (--indeg[w] == 0) queue[tail++] = w;
            }
        }
        serial = tail == n && (work < 1.5 * cp || work - cp < WF__HANDOFF_MIN_GAIN);
    }
    wf__free(indeg);
    wf__free(queue);
    wf__free(start);
    return serial;
}

static wf_status *no_kernel(const wf_node *n, const wf__tinfo *in, const wf__tinfo *out)
{
    uint32_t mask = wf__kernel_dtypes(n->op->name, "CPU");
    wf__str have = {0};
    for (int d = 1; d < WF_NUM_DTYPES; d++)
        if (mask & WF__DT_BIT(d)) wf__str_appendf(&have, "%s%s", have.len ? ", " : "", wf_dtype_name((wf_dtype)d));
    wf_dtype shown = n->n_in && in[0].dtype ? in[0].dtype : out[0].dtype;
    wf_status *s = wf__status(WF_UNIMPLEMENTED, "node '%s' (%s): no CPU kernel for dtype %s (%s%s)", n->name,
                              n->op->name, wf_dtype_name(shown), mask ? "kernels exist for " : "no kernels at all",
                              have.p ? have.p : "");
    wf__str_free(&have);
    return s;
}

static wf_status *build(builder *b, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                        int n_fetches, wf__plan *p)
{
    const wf_graph *g = b->g;
    for (int i = 0; i < n_fetches; i++) {
        if (!same_graph(g, fetches[i].node))
            return wf__status(WF_NOT_FOUND, "fetch %d names a node that is not in this graph", i);
        if (fetches[i].index < 0 || fetches[i].index >= fetches[i].node->n_out)
            return wf__status(WF_NOT_FOUND, "fetch %d asks for output %d of node '%s' (%s), which has %d", i,
                              fetches[i].index, fetches[i].node->name, fetches[i].node->op->name,
                              fetches[i].node->n_out);
    }
    WF__TRY(check_feeds(b, feeds, n_feeds));
    WF__TRY(mark_live(b, fetches, n_fetches));
    WF__TRY(reinfer(b, feeds));

    for (int id = 0; id < b->n; id++) {
        if (!b->live[id]) continue;
        const wf_node *n = g->nodes[id];
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i].node && n->in[i].index == 0) b->consumers[n->in[i].node->id]++;
    }
    for (int i = 0; i < n_fetches; i++)
        if (fetches[i].index == 0) b->fetched[fetches[i].node->id]++;

    WF__TRY(wf__place_nodes(b));
    WF__TRY(wf__place_variables(b));
    fusion *fu = wf__calloc((size_t)(b->n ? b->n : 1), sizeof *fu);
    if (!fu) return wf__oom("planning", sizeof *fu * (size_t)b->n);
    plan_fusion(b, fu);
    /* the Softmax's prologue before the generated kernels, which would otherwise take its Div and Add */
    wf_status *js = plan_softmax_prologue(b, fu);
    if (!js) js = plan_layernorm_prologue(b, fu);
    if (!js && (!b->po || (!b->po->no_fusion && !b->po->no_jit))) js = wf__plan_jit(b, fu);
    if (!js) js = plan_cast_prologue(b, fu);
    if (js) {
        fusion_free(b, fu);
        return js;
    }

    /* plan nodes and slots */
    int n_nodes = 0, n_slots = 0;
    for (int id = 0; id < b->n; id++) {
        if (!b->live[id]) continue;
        const wf_node *n = g->nodes[id];
        b->slot[id] = wf__malloc(sizeof(int) * (size_t)(n->n_out ? n->n_out : 1));
        if (!b->slot[id]) {
            fusion_free(b, fu);
            return wf__oom("planning", sizeof(int) * (size_t)n->n_out);
        }
        if (b->fused_away[id]) continue;
        b->pidx[id] = n_nodes++;
        for (int j = 0; j < n->n_out; j++) b->slot[id][j] = n_slots++;
    }
    /* a fused node's value is its absorber's (which comes after it, for a generated kernel's members) */
    for (int id = 0; id < b->n; id++)
        if (b->live[id] && b->fused_away[id]) b->slot[id][0] = b->slot[b->fuse_into[id]][0];
    /* Partition (place/partition.c): one copy node per (value, destination device). */
    int n_graph_nodes = n_nodes, n_graph_slots = n_slots;
    wf__partition pt;
    wf_status *ps = wf__partition_copies(b, fu, fetches, n_fetches, n_slots, &pt);
    if (ps) {
        fusion_free(b, fu);
        return ps;
    }
    int n_copies = pt.n_copies, *slot_dev = pt.slot_dev, *slot_gid = pt.slot_gid, *slot_out = pt.slot_out,
        *copy_base = pt.copy_base;
    uint64_t *copy_mask = pt.copy_mask;
    n_nodes += n_copies;
    n_slots += n_copies;
#define ROUTE(sl, dest)                                                                                          \
    ((sl) >= 0 && slot_dev[(sl)] != (dest)                                                                       \
         ? n_graph_slots + copy_base[(sl)] + __builtin_popcountll(copy_mask[(sl)] & ((1ull << (dest)) - 1))    \
         : (sl))
    p->n_nodes = n_nodes;
    p->n_slots = n_slots;
    p->nodes = wf__calloc((size_t)(n_nodes ? n_nodes : 1), sizeof *p->nodes);
    p->slot_uses = wf__calloc((size_t)(n_slots ? n_slots : 1), sizeof *p->slot_uses);
    p->slot_static = wf__calloc((size_t)(n_slots ? n_slots : 1), 1);
    int *producer = wf__malloc(sizeof(int) * (size_t)(n_slots ? n_slots : 1));
    int *seen = wf__malloc(sizeof(int) * (size_t)(n_nodes ? n_nodes : 1));
    int *n_succ = wf__calloc((size_t)(n_nodes ? n_nodes : 1), sizeof(int));
    wf_status *s = NULL;
    if (!p->nodes || !p->slot_uses || !p->slot_static || !producer || !seen || !n_succ) {
        s = wf__oom("planning", sizeof *p->nodes * (size_t)n_nodes);
        goto out;
    }
    /* Per-node int arrays live in two arenas in node order: the executor walks them sequentially. */
    size_t io_total = 0;
    for (int id = 0; id < b->n; id++)
        if (b->live[id] && !b->fused_away[id]) {
            const wf_output *in_;
            io_total += (size_t)wf__plan_inputs(fu, g->nodes[id], &in_) + 2 + (size_t)g->nodes[id]->n_out;
        }
    io_total += 2 * (size_t)n_copies;
    int *io_next = p->arena_io = wf__malloc(sizeof(int) * (io_total ? io_total : 1));
    if (!p->arena_io) {
        s = wf__oom("planning", sizeof(int) * io_total);
        goto out;
    }
    for (int i = 0; i < n_nodes; i++) {
        seen[i] = -1;
        pthread_mutex_init(&p->nodes[i].state_lock, NULL);
        p->nodes[i].feed = -1;
        p->nodes[i].fused_bias = -1;
    }
    for (int id = 0; id < b->n; id++) {
        if (!b->live[id] || b->fused_away[id]) continue;
        const wf_node *n = g->nodes[id];
        wf__pnode *pn = &p->nodes[b->pidx[id]];
        pn->gn = n;
        pn->name = n->name;
        pn->op = n->op;
        pn->attrs = n->attrs;
        pn->feed = b->feed_of[id];
        pn->n_out = n->n_out;
        /* a Softmax's prologue: the divisor, then the mask (the divisor's slot -1 without a Div) */
        int extra = (fu[id].bias_node >= 0) + (fu[id].res_node >= 0) + (fu[id].pre_skip.node != NULL) +
                    (fu[id].pre_mask.node ? 2 : fu[id].pre_div.node != NULL);
        const wf__jit_cluster *cl = fu[id].cl;
        pn->n_in = cl ? cl->n_ext : n->n_in + extra;
        pn->in_slot = io_next;
        io_next += pn->n_in;
        pn->out_slot = io_next;
        io_next += n->n_out;
        pn->out_info = wf__malloc(sizeof(wf__tinfo) * (size_t)(n->n_out ? n->n_out : 1));
        if (!pn->out_info) {
            s = wf__oom("planning", sizeof(int) * (size_t)pn->n_in);
            goto out;
        }
        /* A Const's value belongs to the graph and a feed's to the caller: holding them until the
         * run ends frees nothing early, and skipping their use counts spares the shared atomics. */
        bool is_static = pn->feed >= 0 || !strcmp(n->op->name, "Const");
        for (int j = 0; j < n->n_out; j++) {
            pn->out_slot[j] = b->slot[id][j];
            p->slot_static[pn->out_slot[j]] = is_static;
            producer[pn->out_slot[j]] = b->pidx[id];
            pn->out_info[j] = b->info[id][j];
        }
        if (fu[id].act_node >= 0) pn->out_info[0] = b->info[fu[id].act_node][0];
        else if (fu[id].res_node >= 0) pn->out_info[0] = b->info[fu[id].res_node][0];
        else if (fu[id].bias_node >= 0) pn->out_info[0] = b->info[fu[id].bias_node][0];
        if (pn->feed >= 0) pn->n_in = 0; /* fed: its default input is not computed */
        int dest = b->dev_of[id];
        if (cl) {
            for (int i = 0; i < pn->n_in; i++)
                pn->in_slot[i] = ROUTE(b->slot[cl->ext[i].node->id][cl->ext[i].index], dest);
            if ((s = lower_cluster(b, fu, id, pn))) goto out;
            continue;
        }
        const wf_output *nin;
        wf__plan_inputs(fu, n, &nin); /* n's own, or with a prologue's input in place of its Cast */
        for (int i = 0; i < pn->n_in && i < n->n_in; i++)
            pn->in_slot[i] = nin[i].node ? ROUTE(b->slot[nin[i].node->id][nin[i].index], wf__input_device(b, n, i)) : -1;
        wf__str names = {0};
        if (fu[id].own_ext && !fu[id].pre_skip.node)
            wf__str_appendf(&names, "%s", fu[id].pre_div.node && fu[id].pre_mask.node ? "Div+Add"
                                          : fu[id].pre_div.node                     ? "Div"
                                          : fu[id].pre_mask.node                    ? "Add"
                                                                                    : "Cast");
        if (fu[id].pre_div.node || fu[id].pre_mask.node)
            pn->in_slot[n->n_in] =
                fu[id].pre_div.node ? ROUTE(b->slot[fu[id].pre_div.node->id][fu[id].pre_div.index], dest) : -1;
        if (fu[id].pre_mask.node)
            pn->in_slot[n->n_in + 1] = ROUTE(b->slot[fu[id].pre_mask.node->id][fu[id].pre_mask.index], dest);
        if (fu[id].pre_skip.node) {
            pn->in_slot[n->n_in] = ROUTE(b->slot[fu[id].pre_skip.node->id][fu[id].pre_skip.index], dest);
            pn->fused_res = n->n_in;
            wf__str_appendf(&names, "Add");
        }
        if (fu[id].bias_node >= 0) {
            const wf_node *ba = g->nodes[fu[id].bias_node];
            pn->in_slot[n->n_in] = ROUTE(b->slot[ba->in[1].node->id][ba->in[1].index], dest);
            pn->fused_bias = n->n_in;
            wf__str_appendf(&names, "%s", ba->op->name);
        }
        if (fu[id].res_node >= 0) {
            int at = n->n_in + (fu[id].bias_node >= 0);
            pn->in_slot[at] = ROUTE(b->slot[fu[id].res.node->id][fu[id].res.index], dest);
            pn->fused_res = at;
            wf__str_appendf(&names, "%s%s", names.len ? "+" : "", g->nodes[fu[id].res_node]->op->name);
        }
        if (fu[id].act_node >= 0) {
            const wf_node *an = g->nodes[fu[id].act_node];
            pn->fused_act = act_of(an);
            if (pn->fused_act == WF__ACT_LEAKY_RELU || pn->fused_act == WF__ACT_SWISH)
                pn->fused_alpha = wf__attr_f(an->op, an->attrs, "alpha");
            if (pn->fused_act == WF__ACT_CLIP) (void)clip_bounds(b, an, &pn->fused_beta, &pn->fused_alpha); /* true: fuse took it so */
            wf__str_appendf(&names, "%s%s", names.len ? "+" : "", an->op->name);
        }
        if (names.failed) {
            wf__str_free(&names);
            s = wf__oom("planning", 64);
            goto out;
        }
        pn->fused_names = names.p;
        pn->cheap = (n->op->flags & WF__OP_CHEAP) != 0;
        pn->device = dest;
        pn->est = b->est_of[id];
        /* A host-memory device's 16-bit kernels (the CPU's, but for oneDNN's bf16 products) compute in f32:
         * they move three times the bytes the 16-bit estimate counts (read, widen, narrow). The estimate
         * is what the intra-op gate's slow-region check holds a kernel to (backends/cpu/intra.c), and an
         * underestimate there sent every kernel of a bf16 training step to one thread. */
        if (pn->est > 0 && b->ctx->devices[dest].info.host_memory && n->n_out > 0 &&
            (b->info[id][0].dtype == WF_BF16 || b->info[id][0].dtype == WF_F16))
            pn->est *= 3;
        pn->reason = b->reason_of[id];
        b->reason_of[id] = NULL;
        /* cost and kernel */
        wf__tinfo in_info[16];
        const wf__tinfo *ini = in_info;
        wf__tinfo *heap_in = NULL;
        if (n->n_in > 16 && !(ini = heap_in = wf__calloc((size_t)n->n_in, sizeof *heap_in))) {
            s = wf__oom("planning", sizeof *heap_in * (size_t)n->n_in);
            goto out;
        }
        for (int i = 0; i < n->n_in; i++) {
            if (nin[i].node && b->info[nin[i].node->id]) {
                ((wf__tinfo *)ini)[i] = b->info[nin[i].node->id][nin[i].index];
            } else {
                ((wf__tinfo *)ini)[i].dtype = WF_DTYPE_INVALID;
                ((wf__tinfo *)ini)[i].rank = -1;
            }
        }
        if (n->op->cost) {
            wf__infer_ctx ic = {.node = n->name, .op = n->op, .attrs = n->attrs, .n_in = n->n_in, .in = ini,
                                .in_value = NULL, .n_out = n->n_out, .out = b->info[id]};
            n->op->cost(&ic, &pn->flops, &pn->bytes);
        } else {
            wf__plan_default_cost(n, ini, b->info[id], &pn->flops, &pn->bytes);
        }
        if (pn->feed < 0) {
            pn->kernel = wf__plan_kernel_on(b, dest, n, ini);
            if (!pn->kernel) s = no_kernel(n, ini, b->info[id]);
        }
        wf__free(heap_in);
        if (s) goto out;
    }
    if (b->po && b->po->layout && !b->po->no_fusion && (s = wf__plan_layout(b, fu, p))) goto out;
    /* the copy nodes */
    for (int sl = 0; sl < n_graph_slots; sl++) {
        uint64_t m = copy_mask[sl];
        for (int d = 0, k = 0; m >> d; d++) {
            if (!(m >> d & 1)) continue;
            int idx = n_graph_nodes + copy_base[sl] + k, cs = n_graph_slots + copy_base[sl] + k;
            k++;
            wf__pnode *pn = &p->nodes[idx];
            const wf_node *src = g->nodes[slot_gid[sl]];
            const struct wf__device *dv = &b->ctx->devices[d];
            char nm[600];
            snprintf(nm, sizeof nm, "%s:%d/Copy_to_%s", src->name, slot_out[sl], dv->short_name);
            pn->own_name = wf__strdup(nm);
            /* between two devices: from the value's host copy (place/partition.c), asynchronously */
            int from = sl, host = wf__host_device(b->ctx);
            if (d != host && slot_dev[sl] != host && (m >> host & 1) && host < d)
                from = n_graph_slots + copy_base[sl] + __builtin_popcountll(copy_mask[sl] & ((1ull << host) - 1));
            if (from != sl)
                snprintf(nm, sizeof nm, "copy of %s:%d from %s, through %s", src->name, slot_out[sl],
                         b->ctx->devices[slot_dev[sl]].short_name, b->ctx->devices[host].short_name);
            else
                snprintf(nm, sizeof nm, "copy of %s:%d from %s", src->name, slot_out[sl],
                         b->ctx->devices[slot_dev[sl]].short_name);
            pn->reason = wf__strdup(nm);
            pn->out_info = wf__malloc(sizeof(wf__tinfo));
            if (!pn->own_name || !pn->reason || !pn->out_info) {
                s = wf__oom("planning", sizeof nm);
                goto out;
            }
            pn->name = pn->own_name;
            pn->op = &wf__copy_op;
            pn->est = -1;
            pn->kernel = &wf__copy_kernel;
            pn->device = d;
            pn->n_in = 1;
            pn->in_slot = io_next++;
            pn->in_slot[0] = from;
            pn->n_out = 1;
            pn->out_slot = io_next++;
            pn->out_slot[0] = cs;
            pn->out_info[0] = b->info[slot_gid[sl]][slot_out[sl]];
            producer[cs] = idx;
            int64_t e = wf__numel(pn->out_info[0].rank, pn->out_info[0].dims);
            pn->bytes = e > 0 ? (double)e * (double)wf_dtype_size(pn->out_info[0].dtype) : 0;
        }
    }
    /* uses, producers, successors */
    for (int v = 0; v < n_nodes; v++) {
        wf__pnode *pn = &p->nodes[v];
        for (int i = 0; i < pn->n_in; i++) {
            int sl = pn->in_slot[i];
            if (sl < 0) continue;
            p->slot_uses[sl]++;
            int u = producer[sl];
            if (seen[u] != v) {
                seen[u] = v;
                pn->pending0++;
                n_succ[u]++;
            }
        }
    }
    size_t n_edges = 0;
    for (int u = 0; u < n_nodes; u++) n_edges += (size_t)n_succ[u];
    int *succ_next = p->arena_succ = wf__malloc(sizeof(int) * (n_edges ? n_edges : 1));
    if (!p->arena_succ) {
        s = wf__oom("planning", sizeof(int) * n_edges);
        goto out;
    }
    for (int u = 0; u < n_nodes; u++) {
        p->nodes[u].succ = succ_next;
        succ_next += n_succ[u];
        seen[u] = -1;
    }
    for (int v = 0; v < n_nodes; v++) {
        wf__pnode *pn = &p->nodes[v];
        for (int i = 0; i < pn->n_in; i++) {
            if (pn->in_slot[i] < 0) continue;
            int u = producer[pn->in_slot[i]];
            if (seen[u] != v) {
                seen[u] = v;
                p->nodes[u].succ[p->nodes[u].n_succ++] = v;
            }
        }
    }
    p->n_fetches = n_fetches;
    p->est_makespan = b->est_makespan;
    p->est_lower_bound = b->est_lower_bound;
    p->fetch_slot = wf__malloc(sizeof(int) * (size_t)(n_fetches ? n_fetches : 1));
    p->roots = wf__malloc(sizeof(int) * (size_t)(n_nodes ? n_nodes : 1));
    p->key_fetch = wf__malloc(sizeof(wf_output) * (size_t)(n_fetches ? n_fetches : 1));
    p->key_feed = wf__malloc(sizeof(wf_output) * (size_t)(n_feeds ? n_feeds : 1));
    p->key_feed_info = wf__malloc(sizeof(wf__tinfo) * (size_t)(n_feeds ? n_feeds : 1));
    if (!p->fetch_slot || !p->roots || !p->key_fetch || !p->key_feed || !p->key_feed_info) {
        s = wf__oom("planning", sizeof(int) * (size_t)n_nodes);
        goto out;
    }
    for (int i = 0; i < n_fetches; i++) {
        int sl = b->slot[fetches[i].node->id][fetches[i].index];
        p->fetch_slot[i] = wf__keep_on_device(&fetches[i]) ? sl : ROUTE(sl, wf__host_device(b->ctx));
        p->slot_uses[p->fetch_slot[i]]++;
        p->key_fetch[i] = fetches[i];
    }
    p->n_feeds = n_feeds;
    for (int i = 0; i < n_feeds; i++) {
        const wf_tensor *t = feeds[i].tensor;
        p->key_feed[i] = feeds[i].output;
        p->key_feed_info[i].dtype = t->dtype;
        p->key_feed_info[i].rank = t->rank;
        memcpy(p->key_feed_info[i].dims, t->dims, sizeof t->dims);
    }
    /* Constants whose kernel only hands out their value (the CPU's) are bound to their slots when a run
     * starts instead of being run: ShuffleNetV2 has 198 of them, and each cost an executor round (about
     * 1 us traced) for a reference count. Their consumers do not wait for them. */
    for (int v = 0; v < n_nodes; v++) {
        wf__pnode *pn = &p->nodes[v];
        pn->pending_run = pn->pending0;
        const wf__attr *val = pn->kernel && (pn->kernel->flags & WF__K_CONST_VALUE) && pn->n_out == 1 && pn->feed < 0
                                  ? wf__attr_get(pn->op, pn->attrs, "value")
                                  : NULL;
        if (val && val->t && p->slot_static[pn->out_slot[0]]) pn->bound = val->t;
    }
    for (int v = 0; v < n_nodes; v++) {
        const wf__pnode *pn = &p->nodes[v];
        if (!pn->bound) continue;
        p->n_bound++;
        for (int k = 0; k < pn->n_succ; k++) p->nodes[pn->succ[k]].pending_run--;
    }
    for (int v = 0; v < n_nodes; v++) {
        wf__pnode *pn = &p->nodes[v];
        if (pn->pending_run == 0 && !pn->bound) p->roots[p->n_roots++] = v;
        /* outputs nothing reads (the executor frees them unread): the kernel may leave them unwritten */
        for (int j = 0; j < pn->n_out && j < 32; j++)
            if (p->slot_uses[pn->out_slot[j]] == 0 && !p->slot_static[pn->out_slot[j]]) pn->out_unused |= 1u << j;
    }
    p->serial = plan_is_serial(b->ctx, p);
    p->weights = b->po ? b->po->weights : NULL;
    s = wf__memplan_build(b->ctx, p);
out:
#undef ROUTE
    wf__free(slot_dev);
    wf__free(slot_gid);
    wf__free(slot_out);
    wf__free(copy_base);
    wf__free(copy_mask);
    wf__free(producer);
    wf__free(seen);
    wf__free(n_succ);
    fusion_free(b, fu);
    return s;
}

void wf__plan_rekey(wf__plan *p, const wf_feed *feeds, const wf_output *fetches)
{
    for (int i = 0; i < p->n_fetches; i++) p->key_fetch[i] = fetches[i];
    for (int i = 0; i < p->n_feeds; i++) p->key_feed[i] = feeds[i].output;
}

wf_status *wf__plan_build(wf_context *ctx, const wf_graph *g, const wf_feed *feeds, int n_feeds,
                          const wf_output *fetches, int n_fetches, const wf__place_opts *opts, wf__plan **out)
{
    if (n_feeds < 0 || n_fetches < 0 || (n_feeds && !feeds) || (n_fetches && !fetches))
        return wf__status(WF_INVALID_ARGUMENT, "run: invalid feed or fetch arrays");
    builder b = {.ctx = ctx, .g = g, .n = g->n, .po = opts};
    size_t n = (size_t)(g->n ? g->n : 1);
    b.live = wf__calloc(n, sizeof *b.live);
    b.fused_away = wf__calloc(n, sizeof *b.fused_away);
    b.feed_of = wf__malloc(n * sizeof *b.feed_of);
    b.info = wf__calloc(n, sizeof *b.info);
    b.value = wf__calloc(n, sizeof *b.value);
    b.slot = wf__calloc(n, sizeof *b.slot);
    b.consumers = wf__calloc(n, sizeof *b.consumers);
    b.fetched = wf__calloc(n, sizeof *b.fetched);
    b.pidx = wf__malloc(n * sizeof *b.pidx);
    b.fuse_into = wf__malloc(n * sizeof *b.fuse_into);
    b.dev_of = wf__calloc(n, sizeof *b.dev_of);
    b.reason_of = wf__calloc(n, sizeof *b.reason_of);
    b.est_of = wf__calloc(n, sizeof *b.est_of);
    wf__plan *p = wf__calloc(1, sizeof *p);
    wf_status *s = NULL;
    if (!b.live || !b.fused_away || !b.feed_of || !b.info || !b.value || !b.slot || !b.consumers ||
        !b.fetched || !b.pidx || !b.fuse_into || !b.dev_of || !b.reason_of || !b.est_of || !p) {
        s = wf__oom("planning", n * 64);
    } else {
        for (size_t i = 0; i < n; i++) b.feed_of[i] = b.pidx[i] = b.fuse_into[i] = -1;
        s = build(&b, feeds, n_feeds, fetches, n_fetches, p);
    }
    for (int id = 0; id < g->n; id++) {
        if (b.value && b.value[id])
            for (int j = 0; j < g->nodes[id]->n_out; j++) wf_tensor_free(b.value[id][j]);
        if (b.value) wf__free(b.value[id]);
        if (b.info) wf__free(b.info[id]);
        if (b.slot) wf__free(b.slot[id]);
        if (b.reason_of) wf__free(b.reason_of[id]);
    }
    wf__free(b.dev_of);
    wf__free(b.reason_of);
    wf__free(b.est_of);
    wf__free(b.live);
    wf__free(b.fused_away);
    wf__free(b.feed_of);
    wf__free(b.info);
    wf__free(b.value);
    wf__free(b.slot);
    wf__free(b.consumers);
    wf__free(b.fetched);
    wf__free(b.pidx);
    wf__free(b.fuse_into);
    if (s) {
        wf__plan_free(p);
        return s;
    }
    atomic_init(&p->refs, 1);
    *out = p;
    return NULL;
}

void wf__plan_ref(wf__plan *p) { atomic_fetch_add(&p->refs, 1); }

void wf__plan_unref(wf__plan *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) wf__plan_free(p);
}

void wf__plan_free(wf__plan *p)
{
    if (!p) return;
    wf__arena_pool_free(p);
    wf__free(p->slot_off);
    wf__free(p->slot_cap);
    wf__free(p->arena_bytes);
    for (int i = 0; p->nodes && i < p->n_nodes; i++) {
        wf__pnode *pn = &p->nodes[i];
        if (pn->state && pn->kernel && pn->kernel->free_state) pn->kernel->free_state(pn->state);
        pthread_mutex_destroy(&pn->state_lock);
        wf__free(pn->out_info);
        wf__free(pn->reason);
        wf__free((void *)pn->fused_names);
        wf__free(pn->own_name);
        if (pn->ewprog) {
            wf__free((void *)pn->ewprog->in);
            wf__free((void *)pn->ewprog->insn);
            wf__free(pn->ewprog);
        }
    }
    wf__free(p->nodes);
    wf__free(p->arena_io);
    wf__free(p->arena_succ);
    wf__free(p->slot_uses);
    wf__free(p->slot_static);
    wf__free(p->fetch_slot);
    wf__free(p->roots);
    wf__free(p->key_fetch);
    wf__free(p->key_feed);
    wf__free(p->key_feed_info);
    wf__free(p);
}

bool wf__plan_matches(const wf__plan *p, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                      int n_fetches)
{
    if (p->n_feeds != n_feeds || p->n_fetches != n_fetches) return false;
    for (int i = 0; i < n_fetches; i++)
        if (p->key_fetch[i].node != fetches[i].node || p->key_fetch[i].index != fetches[i].index) return false;
    for (int i = 0; i < n_feeds; i++) {
        const wf_tensor *t = feeds[i].tensor;
        const wf__tinfo *k = &p->key_feed_info[i];
        if (p->key_feed[i].node != feeds[i].output.node || p->key_feed[i].index != feeds[i].output.index ||
            !t || k->dtype != t->dtype || k->rank != t->rank ||
            (t->rank && memcmp(k->dims, t->dims, sizeof(int64_t) * (size_t)t->rank)))
            return false;
    }
    return true;
}
