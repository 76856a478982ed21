/*
 * Pass "amp": automatic mixed precision, in the manner of TensorFlow's auto_mixed_precision (its
 * allow, infer, clear and deny lists), for any graph: built through the API, imported from ONNX, or a
 * gradient graph. It runs when a session asks for a 16-bit float dtype (wf_session_options.precision,
 * `weft run --precision bf16|f16`), at every optimisation level, after bnfold and matmul_bias (so folded
 * weights convert once) and before fold (so the Casts of constant weights fold into 16-bit constants).
 *
 * Which nodes convert. Only nodes whose float inputs and outputs are f32, decided in graph order:
 *   allow  (MatMul, Gemm, the convolutions and their gradients, Einsum): converted where the device
 *          the node would run on computes that dtype natively (wf_backend_device_info.fast_dtypes: the
 *          CPU's bf16 with AVX512_BF16 or AMX, a GPU's f16 on Tensor Cores) and has a kernel for it. A
 *          16-bit dtype that is not native there is slower than f32 (TensorFlow #48127: Conv2D 20x
 *          slower under mixed_float16), so it is left alone, and the report says why.
 *   infer  (elementwise arithmetic, activations, average pools): converted when every float input
 *          comes from a converted node or a constant or variable (cast at the edge), and at least one
 *          from a converted node, and the device has a kernel for the dtype.
 *   clear  (data movement: Relu, MaxPool, Reshape, Transpose, Concat, ...): as infer. TensorFlow
 *          treats the two alike but for the order of its propagation steps; here both follow their
 *          inputs forward, so a converted region ends where a deny or unlisted op starts.
 *   deny   (Exp, Log, Pow, the reductions, Softmax, the losses, the norms' statistics): stay f32, and
 *          so does what follows them until the next allow op.
 *   An op in no list stays f32 ("not in the lists"), as in TensorFlow.
 * The device is the one the node asks for (or the session's --device), else the fastest device that
 * does not share the host's cores, so the CPU on a machine without an accelerator: the placer runs
 * after this pass, so the pass takes the device the placer would favour, and the report names it.
 *
 * Casts only at boundaries. A converted node keeps its name and reads its float inputs in the 16-bit
 * dtype: a converted producer's value directly, anything else through one Cast per value (shared by
 * every converted reader). Every float output gets a Cast back to f32, which only the unconverted
 * readers read (and which pruning removes when none does), so every value a run fetches keeps its
 * dtype. A Cast(to 16-bit) of a value that is a converted producer's f32 cast is that producer's value
 * (a cancelled pair: 16 -> 32 -> 16 bits is exact); the opposite pair (32 -> 16 -> 32) rounds and is
 * never cancelled.
 *
 * The lists are editable per session: "allow+=Op,Op;deny-=Op" (wf_session_options.amp_lists,
 * `weft run --amp-lists`). L+=ops moves the ops into list L; L-=ops takes them out of L (into no
 * list). Later edits win. Unknown lists and ops are errors when the session is made.
 */
#include <stdio.h>

#include "graph/op.h"
#include "passes/pass.h"

enum { L_NONE, L_ALLOW, L_INFER, L_CLEAR, L_DENY };
static const char *const list_names[] = {"none", "allow", "infer", "clear", "deny"};

static const char *const allow_ops[] = {"MatMul", "Gemm", "Conv2D", "ConvTranspose2D", "Conv2DBackpropInput",
                                        "Conv2DBackpropFilter", "Einsum", NULL};
static const char *const infer_ops[] = {"Add", "Sub", "Mul", "Div", "BiasAdd", "Sigmoid", "Tanh", "Gelu", "Swish",
                                        "Elu", "Selu", "Celu", "LeakyRelu", "PRelu", "HardSigmoid", "Softplus",
                                        "Softsign", "Clip", "Sqrt", "Rsqrt", "Reciprocal", "Neg", "Abs", "Square",
                                        "Erf", "Maximum", "Minimum", "Where", "AvgPool2D", "GlobalAvgPool",
                                        "AvgPool2DGrad", "GlobalAvgPoolGrad", NULL};
static const char *const clear_ops[] = {"Relu", "MaxPool2D", "GlobalMaxPool", "MaxPool2DGrad", "Reshape", "Flatten",
                                        "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Pad",
                                        "Identity", "Gather", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
                                        "ReduceMax", "ReduceMin", NULL};
static const char *const deny_ops[] = {"Exp", "Log", "Pow", "ReduceSum", "ReduceMean", "ReduceSumSquare",
                                       "ReduceLogSumExp", "ReduceL1", "ReduceL2", "ReduceProd", "CumSum", "CumProd",
                                       "Softmax", "LogSoftmax", "SoftmaxCrossEntropyLoss",
                                       "NegativeLogLikelihoodLoss", "BatchNormalization", "FusedBatchNorm",
                                       "FusedBatchNormGrad", "LayerNormalization", "GroupNormalization",
                                       "InstanceNormalization", "RMSNormalization", "MeanVarianceNormalization",
                                       "LpNormalization", NULL};

static bool in_table(const char *const *t, const char *op)
{
    for (; *t; t++)
        if (!strcmp(*t, op)) return true;
    return false;
}

/* Calls fn(list, op, op_len, arg) for each op of each edit; a nonzero return stops. Returns that, or -1
 * for a malformed edit (with the edit's text in bad). */
static int each_edit(const char *edits, int (*fn)(int list, bool add, const char *op, size_t len, void *arg),
                     void *arg, const char **bad, size_t *bad_len)
{
    for (const char *p = edits; p && *p;) {
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        int list = 0;
        bool add = false;
        if (eq && eq > p && (eq[-1] == '+' || eq[-1] == '-')) {
            add = eq[-1] == '+';
            for (int l = L_ALLOW; l <= L_DENY; l++)
                if ((size_t)(eq - 1 - p) == strlen(list_names[l]) && !strncmp(p, list_names[l], (size_t)(eq - 1 - p)))
                    list = l;
        }
        if (len && !list) {
            *bad = p;
            *bad_len = len;
            return -1;
        }
        for (const char *q = eq ? eq + 1 : p + len; list && q < p + len;) {
            const char *c = memchr(q, ',', (size_t)(p + len - q));
            size_t ol = c ? (size_t)(c - q) : (size_t)(p + len - q);
            int r = ol ? fn(list, add, q, ol, arg) : 0;
            if (r) return r;
            q += ol + 1;
        }
        p = e ? e + 1 : p + len;
    }
    return 0;
}

typedef struct lookup {
    const char *op;
    int list;
} lookup;

static int edit_applies(int list, bool add, const char *op, size_t len, void *arg)
{
    lookup *l = arg;
    if (strlen(l->op) == len && !strncmp(l->op, op, len)) {
        if (add) l->list = list;
        else if (l->list == list) l->list = L_NONE;
    }
    return 0;
}

/* The list op is in, after the session's edits. */
static int list_of(const char *op, const char *edits)
{
    lookup l = {op, in_table(allow_ops, op)   ? L_ALLOW
                    : in_table(infer_ops, op) ? L_INFER
                    : in_table(clear_ops, op) ? L_CLEAR
                    : in_table(deny_ops, op)  ? L_DENY
                                              : L_NONE};
    const char *bad;
    size_t bad_len;
    each_edit(edits, edit_applies, &l, &bad, &bad_len);
    return l.list;
}

static int edit_known(int list, bool add, const char *op, size_t len, void *arg)
{
    (void)list;
    (void)add;
    char name[128];
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, op, len);
    name[len] = 0;
    if (wf__op_lookup(name)) return 0;
    *(const char **)arg = op;
    return (int)len + 1;
}

wf_status *wf__amp_check(wf_dtype amp, const char *edits)
{
    if (amp != 0 && amp != WF_F32 && amp != WF_BF16 && amp != WF_F16)
        return wf__status(WF_INVALID_ARGUMENT, "precision %s is not f32, bf16 or f16", wf_dtype_name(amp));
    const char *bad = NULL, *unknown = NULL;
    size_t bad_len = 0;
    int r = each_edit(edits, edit_known, &unknown, &bad, &bad_len);
    if (r < 0)
        return wf__status(WF_INVALID_ARGUMENT,
                          "amp lists: '%.*s' is not LIST+=OPS or LIST-=OPS (lists: allow, infer, clear, deny)",
                          (int)bad_len, bad);
    if (r > 0) return wf__status(WF_INVALID_ARGUMENT, "amp lists: unknown op '%.*s'", r - 1, unknown);
    return NULL;
}

/* ---- the pass -------------------------------------------------------------------------------------- */

typedef struct cast_entry {
    int index;           /* the output of the new graph's node this entry is chained under */
    int next;            /* the node's next entry, -1: none */
    wf_output lo;        /* its 16-bit value */
} cast_entry;

typedef struct amp_state {
    wf_dtype lo;
    bool *low;           /* per source node: converted */
    cast_entry *casts;   /* values of r->dst with a known 16-bit form: our f32 casts (-> the converted
                            value) and our casts to 16 bits (-> themselves) */
    int n_casts, cap_casts;
    int *head;           /* per node id of r->dst: its first entry, -1: none (a lookup per input, so no
                            scan over every cast of a large graph) */
    int cap_head;
    int converted, kept_allow, inserted;
} amp_state;

static bool is_float(wf_dtype t) { return t == WF_F32 || t == WF_F16 || t == WF_BF16 || t == WF_F64; }

static const wf_output *lo_lookup(const amp_state *st, wf_output x)
{
    int id = x.node->id;
    for (int e = id < st->cap_head ? st->head[id] : -1; e >= 0; e = st->casts[e].next)
        if (st->casts[e].index == x.index) return &st->casts[e].lo;
    return NULL;
}

static wf_status *lo_remember(amp_state *st, wf_output x, wf_output lo)
{
    int id = x.node->id;
    if (id >= st->cap_head) {
        int cap = st->cap_head ? st->cap_head : 64;
        while (cap <= id) cap *= 2;
        int *h = wf__realloc(st->head, sizeof *h * (size_t)st->cap_head, sizeof *h * (size_t)cap);
        if (!h) return wf__oom("the amp pass", sizeof *h * (size_t)cap);
        for (int i = st->cap_head; i < cap; i++) h[i] = -1;
        st->head = h;
        st->cap_head = cap;
    }
    if (st->n_casts == st->cap_casts) {
        int cap = st->cap_casts ? st->cap_casts * 2 : 64;
        cast_entry *c = wf__realloc(st->casts, sizeof *c * (size_t)st->cap_casts, sizeof *c * (size_t)cap);
        if (!c) return wf__oom("the amp pass", sizeof *c * (size_t)cap);
        st->casts = c;
        st->cap_casts = cap;
    }
    st->casts[st->n_casts] = (cast_entry){x.index, st->head[id], lo};
    st->head[id] = st->n_casts++;
    return NULL;
}

static bool is_constant_like(const wf_node *p)
{
    return !strcmp(p->op->name, "Const") || !strcmp(p->op->name, "Variable");
}

/* The f32 float inputs and outputs of n, and whether n has any (the nodes this pass may convert). Other
 * float dtypes (f64, already 16-bit) leave the node alone. */
static bool all_f32(const wf_node *n, bool *any)
{
    *any = false;
    for (int k = 0; k < n->n_in; k++) {
        if (!n->in[k].node) continue;
        wf_dtype t = n->in[k].node->out[n->in[k].index].dtype;
        if (is_float(t) && t != WF_F32) return false;
        *any |= t == WF_F32;
    }
    for (int j = 0; j < n->n_out; j++) {
        if (is_float(n->out[j].dtype) && n->out[j].dtype != WF_F32) return false;
        *any |= n->out[j].dtype == WF_F32;
    }
    return true;
}

/* Asks the session whether n may run in lo on its device (kernel; natively when need_fast). */
static bool device_ok(const wf__pass_run *r, const wf_node *n, wf_dtype lo, bool need_fast, char *why, size_t cap)
{
    const wf__opt_options *o = r->opt;
    if (!o->amp_device) {
        snprintf(why, cap, "no device to ask");
        return false;
    }
    wf__tinfo in_buf[16], out_buf[8];
    if (n->n_in > 16 || n->n_out > 8) {
        snprintf(why, cap, "too many inputs or outputs to convert");
        return false;
    }
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k].node) in_buf[k] = n->in[k].node->out[n->in[k].index];
        else in_buf[k] = (wf__tinfo){.dtype = WF_DTYPE_INVALID, .rank = -1};
        if (in_buf[k].dtype == WF_F32) in_buf[k].dtype = lo;
    }
    for (int j = 0; j < n->n_out; j++) {
        out_buf[j] = n->out[j];
        if (out_buf[j].dtype == WF_F32) out_buf[j].dtype = lo;
    }
    return o->amp_device(o->amp_arg, n, in_buf, out_buf, need_fast, why, cap);
}

static wf_status *begin(wf__pass_run *r)
{
    amp_state *st = wf__calloc(1, sizeof *st);
    if (!st) return wf__oom("the amp pass", sizeof *st);
    r->state = st;
    st->lo = r->opt->amp;
    const wf_graph *g = r->src;
    if (!(st->low = wf__calloc((size_t)(g->n ? g->n : 1), sizeof *st->low)))
        return wf__oom("the amp pass", (size_t)g->n);
    const char *tn = wf_dtype_name(st->lo);
    wf__str *rep = r->report;
    for (int i = 0; i < g->n; i++) {
        const wf_node *n = g->nodes[i];
        bool any;
        if (!r->live[i] || (n->op->flags & WF__OP_SOURCE) || wf__pass_must_keep(n) || !all_f32(n, &any) || !any)
            continue;
        int list = list_of(n->op->name, r->opt->amp_lists);
        char why[256] = "";
        bool low = false;
        if (list == L_ALLOW) {
            low = device_ok(r, n, st->lo, true, why, sizeof why);
            st->kept_allow += !low;
        } else if (list == L_INFER || list == L_CLEAR) {
            int from_low = 0;
            const wf_node *f32_from = NULL;
            for (int k = 0; k < n->n_in && !f32_from; k++) {
                const wf_node *p = n->in[k].node;
                if (!p || p->out[n->in[k].index].dtype != WF_F32) continue;
                if (st->low[p->id]) from_low++;
                else if (!is_constant_like(p)) f32_from = p;
            }
            if (f32_from) snprintf(why, sizeof why, "input '%s' (%s) stays f32", f32_from->name, f32_from->op->name);
            else if (!from_low) snprintf(why, sizeof why, "no input is %s", tn);
            else low = device_ok(r, n, st->lo, false, why, sizeof why);
        } else {
            snprintf(why, sizeof why, "%s", list == L_DENY ? "deny list" : "not in the lists");
        }
        st->low[i] = low;
        st->converted += low;
        if (!rep) continue;
        if (low) wf__str_appendf(rep, "  %-4s %s (%s): %s list%s%s\n", tn, n->name, n->op->name, list_names[list],
                                 *why ? ", " : "", why);
        else wf__str_appendf(rep, "  f32  %s (%s): %s%s%s\n", n->name, n->op->name,
                             list == L_NONE || list == L_DENY ? "" : list_names[list],
                             list == L_NONE || list == L_DENY ? "" : " list, ", why);
    }
    return NULL;
}

static void end(wf__pass_run *r)
{
    amp_state *st = r->state;
    if (!st) return;
    if (r->report)
        wf__str_appendf(r->report, "  %d ops in %s, %d casts to %s inserted; %d allow-list ops left in f32\n", st->converted,
                        wf_dtype_name(st->lo), st->inserted, wf_dtype_name(st->lo), st->kept_allow);
    wf__free(st->low);
    wf__free(st->casts);
    wf__free(st->head);
    wf__free(st);
    r->state = NULL;
}

/* x (f32, of r->dst) in the 16-bit dtype: a converted value, or one shared Cast per value. */
static wf_status *as_low(wf__pass_run *r, amp_state *st, const wf_node *reader, wf_output x, wf_output *out)
{
    const wf_output *known = lo_lookup(st, x);
    if (known) {
        *out = *known;
        return NULL;
    }
    char name[512];
    wf__pass_fresh_name(r->dst, x.node->name, st->lo == WF_BF16 ? "/to_bf16" : "/to_f16", name, sizeof name);
    wf_attr to = wf_attr_dtype("to", st->lo);
    WF__TRY(wf__pass_emit(r, reader, "Cast", name, &x, 1, &to, 1, out));
    st->inserted++;
    WF__TRY(lo_remember(st, x, *out));
    return lo_remember(st, *out, *out);
}

static wf_status *visit(wf__pass_run *r, const wf_node *n, const wf_output *in, wf_output *out)
{
    amp_state *st = r->state;
    wf_node *c;
    if (!st->low[n->id]) {
        /* a user's Cast to the 16-bit dtype of a converted value: that value (the exact pair) */
        if (!strcmp(n->op->name, "Cast") && in[0].node && (wf_dtype)wf__attr_i(n->op, n->attrs, "to") == st->lo) {
            const wf_output *known = lo_lookup(st, in[0]);
            if (known && known->node->out[known->index].dtype == st->lo) {
                out[0] = *known;
                return NULL;
            }
        }
        WF__TRY(wf__pass_copy(r, n, in, &c));
        for (int j = 0; j < n->n_out; j++) out[j] = (wf_output){c, j};
        return NULL;
    }
    wf_output buf[16];
    for (int k = 0; k < n->n_in; k++) {
        buf[k] = in[k];
        if (in[k].node && in[k].node->out[in[k].index].dtype == WF_F32) WF__TRY(as_low(r, st, n, in[k], &buf[k]));
    }
    WF__TRY(wf__pass_copy(r, n, buf, &c));
    for (int j = 0; j < n->n_out; j++) {
        out[j] = (wf_output){c, j};
        if (c->out[j].dtype != st->lo) continue;
        char name[512];
        wf__pass_fresh_name(r->dst, n->name, "/to_f32", name, sizeof name);
        wf_attr to = wf_attr_dtype("to", WF_F32);
        WF__TRY(wf__pass_emit(r, n, "Cast", name, &out[j], 1, &to, 1, &out[j]));
        WF__TRY(lo_remember(st, out[j], (wf_output){c, j}));
    }
    return NULL;
}

const wf__pass wf__pass_amp = {"amp", begin, end, visit};
