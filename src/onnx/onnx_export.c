/*
 * ONNX model export (wf_session_export_onnx): the inference subgraph behind some outputs, written as an
 * IR 8 / opset 17 ModelProto with Consts and the session's current Variable values as initializers.
 * The whole model is built in memory first, so a node that has no ONNX form fails before any file.
 */
#define _GNU_SOURCE /* mkstemp, fsync */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "onnx/onnx_internal.h"
#include "session_internal.h"

#define EXPORT_OPSET 17
#define EXPORT_IR 8

/* ---- arena: every proto struct and string of one export lives here and goes at once -------------- */

typedef struct blk {
    struct blk *next;
    size_t used, cap;
} blk;

typedef struct ex {
    wf_session *s;
    const char *path;
    blk *arena;
    bool oom;
    /* the model being built */
    Onnx__NodeProto **nodes;
    Onnx__TensorProto **inits;
    Onnx__ValueInfoProto **inputs;
    size_t n_nodes, cap_nodes, n_inits, cap_inits, n_inputs, cap_inputs;
    /* tensors whose data the initializers point at (raw_data borrows, no copy) */
    wf_tensor **held;
    size_t n_held, cap_held;
    /* used[id] bit k: output k of node id is read by a needed node or is a model output */
    uint64_t *used;
    bool *need;
    int n_helpers;
} ex;

static void *ar_alloc(ex *x, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    blk *b = x->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = wf__malloc(sizeof(blk) + 16 + cap);
        if (!b) {
            x->oom = true;
            return NULL;
        }
        b->next = x->arena, b->used = 0, b->cap = cap;
        x->arena = b;
    }
    /* the header is padded to 16 so every block starts aligned */
    char *p = (char *)b + ((sizeof(blk) + 15) & ~(size_t)15) + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

static char *ar_strf(ex *x, const char *fmt, ...) WF__PRINTF(2, 3);
static char *ar_strf(ex *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n >= 0 ? ar_alloc(x, (size_t)n + 1) : NULL;
    if (!p) return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

static bool grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = wf__realloc(*arr, *cap * elem, nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

static void ex_free(ex *x)
{
    while (x->arena) {
        blk *n = x->arena->next;
        wf__free(x->arena);
        x->arena = n;
    }
    for (size_t i = 0; i < x->n_held; i++) wf_tensor_free(x->held[i]);
    wf__free(x->held);
    wf__free(x->nodes);
    wf__free(x->inits);
    wf__free(x->inputs);
    wf__free(x->used);
    wf__free(x->need);
}

static wf_status *oom(void) { return wf__oom("an ONNX export", 65536); }

static wf_status *fail(ex *x, const wf_node *n, wf_code code, const char *fmt, ...) WF__PRINTF(4, 5);
static wf_status *fail(ex *x, const wf_node *n, wf_code code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wf__status(code, "%s: node '%s' (%s): %s; nothing was written", x->path, n->name, n->op->name, msg);
}

/* ---- dtypes and values ----------------------------------------------------------------------------- */

static int32_t onnx_dtype(wf_dtype t)
{
    switch (t) {
    case WF_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case WF_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case WF_F16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case WF_BF16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    case WF_I8: return ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    case WF_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case WF_I16: return ONNX__TENSOR_PROTO__DATA_TYPE__INT16;
    case WF_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case WF_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case WF_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    default: return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    }
}

/* The ONNX value name of a weft output: the node's name, or "name:k" for its other outputs. */
static const char *vname(ex *x, wf_output o)
{
    if (!o.node) return "";
    if (o.index == 0) return o.node->name;
    return ar_strf(x, "%s:%d", o.node->name, o.index);
}

/* A name for a value or node the exporter adds, unlike any weft node's. */
static const char *helper_name(ex *x, const wf_node *n, const char *tag)
{
    for (;;) {
        const char *nm = ar_strf(x, "%s/onnx_%s_%d", n->name, tag, x->n_helpers++);
        if (!nm || !wf__graph_lookup(n->graph, nm)) return nm;
    }
}

static const wf_tensor *known_value(wf_output o)
{
    if (!o.node) return NULL;
    if (!strcmp(o.node->op->name, "Const")) return wf__attr_get(o.node->op, o.node->attrs, "value")->t;
    return o.node->out_value ? o.node->out_value[o.index] : NULL;
}

/* An initializer over t's data (borrowed: a reference is held until the export ends). */
static wf_status *add_init(ex *x, const char *name, wf_tensor *t, const wf_node *n)
{
    if (!t->data && t->bytes)
        return fail(x, n, WF_UNIMPLEMENTED, "its value is not in host memory");
    if (!grow((void **)&x->held, &x->cap_held, x->n_held, sizeof *x->held) ||
        !grow((void **)&x->inits, &x->cap_inits, x->n_inits, sizeof *x->inits))
        return oom();
    Onnx__TensorProto *tp = ar_alloc(x, sizeof *tp);
    int64_t *dims = ar_alloc(x, sizeof(int64_t) * (size_t)(t->rank ? t->rank : 1));
    if (!tp || !dims || !name) return oom();
    onnx__tensor_proto__init(tp);
    x->held[x->n_held++] = wf_tensor_ref(t);
    memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    tp->n_dims = (size_t)t->rank;
    tp->dims = dims;
    tp->has_data_type = 1;
    tp->data_type = onnx_dtype(t->dtype);
    tp->name = (char *)name;
    tp->has_raw_data = 1;
    tp->raw_data.len = t->bytes;
    tp->raw_data.data = t->data;
    x->inits[x->n_inits++] = tp;
    return NULL;
}

static wf_status *new_tensor_init(ex *x, const wf_node *n, const char *tag, wf_dtype dt, int rank,
                                  const int64_t *dims, const void *data, const char **name)
{
    wf_tensor *t;
    WF__TRY(wf_tensor_new(dt, rank, dims, data, &t));
    *name = helper_name(x, n, tag);
    wf_status *s = add_init(x, *name, t, n);
    wf_tensor_free(t);
    return s;
}

static wf_status *i64_init(ex *x, const wf_node *n, const char *tag, const int64_t *v, int count, const char **name)
{
    int64_t d = count;
    return new_tensor_init(x, n, tag, WF_I64, 1, &d, v, name);
}

/* A scalar of dtype dt (for the constants of a decomposition). */
static wf_status *scalar_init(ex *x, const wf_node *n, const char *tag, wf_dtype dt, double v, const char **name)
{
    wf_tensor *t;
    WF__TRY(wf_tensor_new(dt, 0, NULL, NULL, &t));
    wf__store_f64(t->data, dt, 0, v);
    *name = helper_name(x, n, tag);
    wf_status *s = add_init(x, *name, t, n);
    wf_tensor_free(t);
    return s;
}

/* ---- nodes and attributes ---------------------------------------------------------------------------- */

static Onnx__NodeProto *add_node(ex *x, const char *op, const char *name, const char *const *in, int n_in,
                                 const char *const *out, int n_out)
{
    if (!grow((void **)&x->nodes, &x->cap_nodes, x->n_nodes, sizeof *x->nodes)) return NULL;
    Onnx__NodeProto *p = ar_alloc(x, sizeof *p);
    char **ins = ar_alloc(x, sizeof(char *) * (size_t)(n_in ? n_in : 1));
    char **outs = ar_alloc(x, sizeof(char *) * (size_t)(n_out ? n_out : 1));
    Onnx__AttributeProto **attrs = ar_alloc(x, sizeof *attrs * (WF__MAX_ATTRS + 4));
    if (!p || !ins || !outs || !attrs || !name) return NULL;
    onnx__node_proto__init(p);
    /* trailing omitted optional inputs are dropped; inner ones stay as "" */
    while (n_in > 0 && !*in[n_in - 1]) n_in--;
    for (int i = 0; i < n_in; i++) ins[i] = (char *)in[i];
    for (int i = 0; i < n_out; i++) outs[i] = (char *)out[i];
    p->op_type = (char *)op;
    p->name = (char *)name;
    p->n_input = (size_t)n_in;
    p->input = ins;
    p->n_output = (size_t)n_out;
    p->output = outs;
    p->attribute = attrs;
    x->nodes[x->n_nodes++] = p;
    return p;
}

static Onnx__AttributeProto *new_attr(ex *x, Onnx__NodeProto *p, const char *name, Onnx__AttributeProto__AttributeType t)
{
    if (p->n_attribute >= WF__MAX_ATTRS + 4) return NULL;
    Onnx__AttributeProto *a = ar_alloc(x, sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = t;
    p->attribute[p->n_attribute++] = a;
    return a;
}

static wf_status *attr_int(ex *x, Onnx__NodeProto *p, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = new_attr(x, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return oom();
    a->has_i = 1;
    a->i = v;
    return NULL;
}

static wf_status *attr_ints(ex *x, Onnx__NodeProto *p, const char *name, const int64_t *v, int n)
{
    Onnx__AttributeProto *a = new_attr(x, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = ar_alloc(x, sizeof *c * (size_t)(n ? n : 1));
    if (!a || !c) return oom();
    if (n) memcpy(c, v, sizeof *c * (size_t)n);
    a->n_ints = (size_t)n;
    a->ints = c;
    return NULL;
}

static wf_status *attr_str(ex *x, Onnx__NodeProto *p, const char *name, const char *s)
{
    Onnx__AttributeProto *a = new_attr(x, p, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return oom();
    a->has_s = 1;
    a->s.data = (uint8_t *)s;
    a->s.len = strlen(s);
    return NULL;
}

/* Attributes ONNX added after opset 17: dropped when they hold the value that means the opset-17
 * behaviour, otherwise the node cannot be written at opset 17. */
static const struct {
    const char *op, *attr;
} g_newer[] = {
    {"Resize", "antialias"}, {"Resize", "axes"}, {"Resize", "keep_aspect_ratio_policy"},
    {"QuantizeLinear", "saturate"}, {"QuantizeLinear", "block_size"}, {"QuantizeLinear", "output_dtype"},
    {"QuantizeLinear", "precision"}, {"DequantizeLinear", "block_size"}, {"DequantizeLinear", "output_dtype"},
    {"LpPool", "ceil_mode"}, {"LpPool", "dilations"}, {"SpaceToDepth", "mode"},
    {"ReduceMean", "noop_with_empty_axes"}, {"ReduceMax", "noop_with_empty_axes"},
    {"ReduceMin", "noop_with_empty_axes"}, {"ReduceProd", "noop_with_empty_axes"},
    {"ReduceL1", "noop_with_empty_axes"}, {"ReduceL2", "noop_with_empty_axes"},
    {"ReduceSumSquare", "noop_with_empty_axes"}, {"ReduceLogSum", "noop_with_empty_axes"},
    {"ReduceLogSumExp", "noop_with_empty_axes"},
};

static bool attr_is_default(const wf__attr_def *d, const wf__attr *a)
{
    switch (d->type) {
    case WF_ATTR_INT:
    case WF_ATTR_DTYPE: return a->i == d->i;
    case WF_ATTR_FLOAT: return a->f == d->f;
    case WF_ATTR_STRING: return a->s && d->s && !strcmp(a->s, d->s);
    case WF_ATTR_INTS:
    case WF_ATTR_FLOATS: return a->n == 0;
    default: return false;
    }
}

static bool in_list(const char *const *list, const char *s)
{
    for (int k = 0; list && list[k]; k++)
        if (!strcmp(list[k], s)) return true;
    return false;
}

/* Copies the attributes the node was given (defaults stay implicit: weft's are ONNX's) except `skip`. */
static wf_status *copy_attrs(ex *x, const wf_node *n, Onnx__NodeProto *p, const char *const *skip)
{
    const wf__op_def *op = n->op;
    for (int k = 0; k < WF__MAX_ATTRS && op->attrs[k].name; k++) {
        const wf__attr_def *d = &op->attrs[k];
        const wf__attr *a = &n->attrs[k];
        if (!a->set || in_list(skip, d->name)) continue;
        bool newer = false;
        for (size_t i = 0; i < sizeof g_newer / sizeof g_newer[0] && !newer; i++)
            newer = !strcmp(g_newer[i].op, p->op_type) && !strcmp(g_newer[i].attr, d->name);
        if (newer) {
            if (attr_is_default(d, a)) continue;
            return fail(x, n, WF_UNIMPLEMENTED, "attribute '%s' of %s is newer than opset %d", d->name,
                        p->op_type, EXPORT_OPSET);
        }
        Onnx__AttributeProto *o;
        switch (d->type) {
        case WF_ATTR_INT: WF__TRY(attr_int(x, p, d->name, a->i)); break;
        case WF_ATTR_DTYPE: WF__TRY(attr_int(x, p, d->name, onnx_dtype((wf_dtype)a->i))); break;
        case WF_ATTR_FLOAT:
            if (!(o = new_attr(x, p, d->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))) return oom();
            o->has_f = 1;
            o->f = (float)a->f;
            break;
        case WF_ATTR_INTS:
            if (a->n) WF__TRY(attr_ints(x, p, d->name, a->ints, a->n));
            break;
        case WF_ATTR_FLOATS:
            if (!a->n) break;
            if (!(o = new_attr(x, p, d->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))) return oom();
            if (!(o->floats = ar_alloc(x, sizeof(float) * (size_t)a->n))) return oom();
            for (int i = 0; i < a->n; i++) o->floats[i] = (float)a->floats[i];
            o->n_floats = (size_t)a->n;
            break;
        case WF_ATTR_STRING:
            if (!strcmp(d->name, "activations")) {
                /* the importer joined the recurrent ops' list of strings with commas */
                if (!(o = new_attr(x, p, d->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS))) return oom();
                const char *s = a->s ? a->s : "";
                size_t cnt = *s ? 1 : 0;
                for (const char *q = s; *q; q++) cnt += *q == ',';
                if (!(o->strings = ar_alloc(x, sizeof *o->strings * (cnt ? cnt : 1)))) return oom();
                for (const char *q = s; cnt && o->n_strings < cnt;) {
                    const char *e = strchr(q, ',');
                    size_t len = e ? (size_t)(e - q) : strlen(q);
                    o->strings[o->n_strings].data = (uint8_t *)q;
                    o->strings[o->n_strings++].len = len;
                    q = e ? e + 1 : q + len;
                }
            } else {
                WF__TRY(attr_str(x, p, d->name, a->s ? a->s : ""));
            }
            break;
        case WF_ATTR_TENSOR: {
            if (!a->t) break;
            if (!(o = new_attr(x, p, d->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR))) return oom();
            /* built as an initializer, then moved into the attribute */
            WF__TRY(add_init(x, "", a->t, n));
            o->t = x->inits[--x->n_inits];
            o->t->name = NULL;
            break;
        }
        }
    }
    return NULL;
}

/* ---- translation of one weft node ------------------------------------------------------------------ */

typedef struct tr {
    ex *x;
    const wf_node *n;
    const char *in[WF_MAX_RANK * 2 + 8]; /* ONNX value names of the inputs ("" when omitted) */
    const char **out;                    /* of the outputs */
} tr;

/* The node as ONNX op `op` over the given inputs, with its outputs and attributes minus `skip`. */
static wf_status *emit(tr *t, const char *op, const char *const *in, int n_in, const char *const *skip,
                       Onnx__NodeProto **pn)
{
    Onnx__NodeProto *p = add_node(t->x, op, t->n->name, in, n_in, t->out, t->n->n_out);
    if (!p) return oom();
    WF__TRY(copy_attrs(t->x, t->n, p, skip));
    if (pn) *pn = p;
    return NULL;
}

/* A helper node with one output, named after the weft node. */
static wf_status *helper(tr *t, const char *op, const char *const *in, int n_in, const char **out, Onnx__NodeProto **pn)
{
    const char *nm = helper_name(t->x, t->n, op);
    /* `out` may alias an input: the node copies its inputs before the name is stored */
    Onnx__NodeProto *p = add_node(t->x, op, nm, in, n_in, &nm, 1);
    if (!p) return oom();
    *out = nm;
    if (pn) *pn = p;
    return NULL;
}

static int in_rank(tr *t, int i, int64_t *dims)
{
    int64_t d[WF_MAX_RANK];
    return wf_output_shape(t->n->in[i], dims ? dims : d);
}

static wf_status *tr_same(tr *t) { return emit(t, t->n->op->name, t->in, t->n->n_in, NULL, NULL); }

static wf_status *tr_rename(tr *t, const char *op) { return emit(t, op, t->in, t->n->n_in, NULL, NULL); }

static wf_status *tr_bias_add(tr *t)
{
    const char *fmt = wf__attr_s(t->n->op, t->n->attrs, "data_format");
    int r = in_rank(t, 0, NULL);
    const char *bias = t->in[1];
    if (!strcmp(fmt, "NCHW") && r != 2) {
        if (r < 2) return fail(t->x, t->n, WF_UNIMPLEMENTED, "NCHW BiasAdd of an input of unknown rank");
        /* [C] -> [C,1,...,1] so it broadcasts over dim 1 */
        int64_t axes[WF_MAX_RANK];
        for (int i = 0; i < r - 2; i++) axes[i] = i + 1;
        const char *ax, *in[2];
        WF__TRY(i64_init(t->x, t->n, "bias_axes", axes, r - 2, &ax));
        in[0] = bias, in[1] = ax;
        WF__TRY(helper(t, "Unsqueeze", in, 2, &bias, NULL));
    }
    const char *in[2] = {t->in[0], bias};
    static const char *const skip[] = {"data_format", NULL};
    return emit(t, "Add", in, 2, skip, NULL);
}

/* MatMul's transpose_a/transpose_b become Transposes of the operands' last two dims. */
static wf_status *tr_matmul(tr *t)
{
    const char *in[2] = {t->in[0], t->in[1]};
    static const char *const attr[2] = {"transpose_a", "transpose_b"};
    for (int i = 0; i < 2; i++) {
        if (!wf__attr_i(t->n->op, t->n->attrs, attr[i])) continue;
        int r = in_rank(t, i, NULL);
        if (r < 0) return fail(t->x, t->n, WF_UNIMPLEMENTED, "%s of an operand of unknown rank", attr[i]);
        if (r < 2) continue; /* transposes apply to matrices only */
        int64_t perm[WF_MAX_RANK];
        for (int d = 0; d < r; d++) perm[d] = d;
        perm[r - 2] = r - 1, perm[r - 1] = r - 2;
        Onnx__NodeProto *p;
        WF__TRY(helper(t, "Transpose", &in[i], 1, &in[i], &p));
        WF__TRY(attr_ints(t->x, p, "perm", perm, r));
    }
    static const char *const skip[] = {"transpose_a", "transpose_b", NULL};
    return emit(t, "MatMul", in, 2, skip, NULL);
}

static wf_status *tr_avg_pool(tr *t)
{
    const wf__attr *d = wf__attr_get(t->n->op, t->n->attrs, "dilations");
    for (int i = 0; i < d->n; i++)
        if (d->ints[i] != 1)
            return fail(t->x, t->n, WF_UNIMPLEMENTED, "AveragePool with dilations needs opset 19 (export writes %d)",
                        EXPORT_OPSET);
    static const char *const skip[] = {"dilations", NULL};
    return emit(t, "AveragePool", t->in, 1, skip, NULL);
}

static wf_status *tr_not_equal(tr *t)
{
    const char *eq;
    WF__TRY(helper(t, "Equal", t->in, 2, &eq, NULL));
    return emit(t, "Not", &eq, 1, NULL, NULL);
}

static wf_status *tr_square(tr *t)
{
    const char *in[2] = {t->in[0], t->in[0]};
    return emit(t, "Mul", in, 2, NULL, NULL);
}

static wf_status *tr_rsqrt(tr *t)
{
    const char *sq;
    WF__TRY(helper(t, "Sqrt", t->in, 1, &sq, NULL));
    return emit(t, "Reciprocal", &sq, 1, NULL, NULL);
}

static wf_status *tr_binary_helper(tr *t, const char *op, const char *a, const char *b, const char **out)
{
    const char *in[2] = {a, b};
    return helper(t, op, in, 2, out, NULL);
}

/* Gelu is opset 20: written as its formula. */
static wf_status *tr_gelu(tr *t)
{
    wf_dtype dt = wf_output_dtype(t->n->in[0]);
    const char *x = t->in[0], *half, *one, *inner, *act, *tmp;
    WF__TRY(scalar_init(t->x, t->n, "half", dt, 0.5, &half));
    WF__TRY(scalar_init(t->x, t->n, "one", dt, 1.0, &one));
    if (!strcmp(wf__attr_s(t->n->op, t->n->attrs, "approximate"), "tanh")) {
        /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        const char *c0, *c1, *x3;
        WF__TRY(scalar_init(t->x, t->n, "k", dt, 0.044715, &c0));
        WF__TRY(scalar_init(t->x, t->n, "sqrt_2_over_pi", dt, sqrt(2.0 / M_PI), &c1));
        WF__TRY(tr_binary_helper(t, "Mul", x, x, &x3));
        WF__TRY(tr_binary_helper(t, "Mul", x3, x, &x3));
        WF__TRY(tr_binary_helper(t, "Mul", x3, c0, &x3));
        WF__TRY(tr_binary_helper(t, "Add", x, x3, &inner));
        WF__TRY(tr_binary_helper(t, "Mul", inner, c1, &inner));
        WF__TRY(helper(t, "Tanh", &inner, 1, &act, NULL));
    } else {
        /* 0.5 x (1 + erf(x / sqrt 2)) */
        const char *r2;
        WF__TRY(scalar_init(t->x, t->n, "inv_sqrt2", dt, 1.0 / sqrt(2.0), &r2));
        WF__TRY(tr_binary_helper(t, "Mul", x, r2, &inner));
        WF__TRY(helper(t, "Erf", &inner, 1, &act, NULL));
    }
    WF__TRY(tr_binary_helper(t, "Add", act, one, &tmp));
    WF__TRY(tr_binary_helper(t, "Mul", x, tmp, &tmp));
    const char *in[2] = {tmp, half};
    static const char *const skip[] = {"approximate", NULL};
    return emit(t, "Mul", in, 2, skip, NULL);
}

/* Attention is opset 23: written as its formula where that gives the same values, the form
 * passes/attention.c makes of a model's attention: Q, K and V 3-D with one head count (or 4-D), no
 * cache, causality, window, softcap or padded lengths, a mask that is absent or a constant with every
 * value finite and a key dimension of K's length, and only Y read. Then
 *   Y = Reshape(Transpose(Softmax(Qh Kt * scale [+ mask]) Vh, [0,2,1,3]), (0, 0, -1))
 * with the heads split by Reshape (0, 0, H, D) and Transpose; a mask that might forbid a whole row is
 * refused (Attention gives that row zeros, the formula NaN). A constant bool mask under weft's
 * mask_replaces (a Where-masked attention, passes/attention.c) with a key allowed in every row is written
 * as the Where it came from, Where(mask, scores, -inf), instead of the Add. */
static bool finite_const(wf_output o, int64_t keys)
{
    const wf_tensor *m = o.node && o.node->out_value ? o.node->out_value[o.index] : NULL;
    if (!m || m->dtype != WF_F32 || m->rank < 1 || m->dims[m->rank - 1] != keys) return false;
    for (int64_t i = 0; i < m->size; i++)
        if (!isfinite(((const float *)m->data)[i])) return false;
    return true;
}

static bool open_bool_const(wf_output o, int64_t keys)
{
    const wf_tensor *m = o.node && o.node->out_value ? o.node->out_value[o.index] : NULL;
    if (!m || m->dtype != WF_BOOL || m->rank < 1 || m->dims[m->rank - 1] != keys) return false;
    const uint8_t *v = m->data;
    for (int64_t row = 0; row < m->size / keys; row++) {
        bool any = false;
        for (int64_t j = 0; j < keys && !any; j++) any = v[row * keys + j] != 0;
        if (!any) return false;
    }
    return true;
}

static wf_status *tr_attention(tr *t)
{
    const wf_node *n = t->n;
#define A_I(nm) wf__attr_i(n->op, n->attrs, nm)
    int64_t dq[WF_MAX_RANK], dk[WF_MAX_RANK], dv[WF_MAX_RANK];
    int r = in_rank(t, 0, dq);
    int64_t hq = A_I("q_num_heads"), hk = A_I("kv_num_heads");
    bool simple = r == in_rank(t, 1, dk) && r == in_rank(t, 2, dv) && (r == 4 || (r == 3 && hq > 0 && hq == hk)) &&
                  (n->n_in < 5 || (!n->in[4].node && !n->in[5].node && (n->n_in < 7 || !n->in[6].node))) &&
                  !A_I("is_causal") && A_I("left_window_size") < 0 && A_I("right_window_size") < 0 &&
                  wf__attr_f(n->op, n->attrs, "softcap") == 0.0 &&
                  (wf_dtype)A_I("softmax_precision") == WF_DTYPE_INVALID && !(t->x->used[n->id] & 0xe);
    /* the head sizes the formula's Reshapes and default scale need, known */
    if (simple && r == 4) simple = dq[1] == dk[1] && dk[3] > 0;
    if (simple && r == 3)
        for (int i = 0; i < 3 && simple; i++) {
            int64_t e = i == 0 ? dq[2] : i == 1 ? dk[2] : dv[2];
            simple = e > 0 && e % hq == 0;
        }
    int64_t keys = r == 4 ? dk[2] : r == 3 ? dk[1] : -1;
    bool where = false; /* the mask a bool one written as Where */
    if (simple && n->n_in > 3 && n->in[3].node) {
        where = A_I("mask_replaces") && open_bool_const(n->in[3], keys);
        simple = keys > 0 && (finite_const(n->in[3], keys) || where);
    }
    if (!simple)
        return fail(t->x, n, WF_UNIMPLEMENTED, "Attention needs opset 23 (export writes %d); only the plain form (one "
                    "head count, known head sizes, no cache, causality, window or softcap, a finite constant mask or "
                    "a replacing bool one, Y alone) is written as its formula", EXPORT_OPSET);
#undef A_I
    wf_dtype dt = wf_output_dtype(n->in[0]);
    const char *q = t->in[0], *k = t->in[1], *v = t->in[2], *sc, *s, *p, *o;
    Onnx__NodeProto *pn;
    static const int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1}, p0132[4] = {0, 1, 3, 2};
    int64_t dk_head = r == 4 ? dk[3] : dk[2] / hk;
    if (r == 3) {
        const char **io[3] = {&q, &k, &v};
        const int64_t *dd[3] = {dq, dk, dv};
        for (int i = 0; i < 3; i++) {
            int64_t shape[4] = {0, 0, hq, dd[i][2] / hq};
            const char *sh, *in[2] = {*io[i], NULL};
            WF__TRY(i64_init(t->x, n, "heads", shape, 4, &sh));
            in[1] = sh;
            WF__TRY(helper(t, "Reshape", in, 2, io[i], NULL));
            WF__TRY(helper(t, "Transpose", io[i], 1, io[i], &pn));
            WF__TRY(attr_ints(t->x, pn, "perm", i == 1 ? p0231 : p0213, 4));
        }
    } else {
        WF__TRY(helper(t, "Transpose", &k, 1, &k, &pn));
        WF__TRY(attr_ints(t->x, pn, "perm", p0132, 4));
    }
    double scale = wf__attr_get(n->op, n->attrs, "scale")->set ? wf__attr_f(n->op, n->attrs, "scale")
                                                               : 1.0 / sqrt((double)dk_head);
    WF__TRY(scalar_init(t->x, n, "scale", dt, scale, &sc));
    WF__TRY(tr_binary_helper(t, "MatMul", q, k, &s));
    WF__TRY(tr_binary_helper(t, "Mul", s, sc, &s));
    if (where) {
        const char *fill;
        WF__TRY(scalar_init(t->x, n, "fill", dt, -INFINITY, &fill));
        const char *in[3] = {t->in[3], s, fill};
        WF__TRY(helper(t, "Where", in, 3, &s, NULL));
    } else if (n->n_in > 3 && n->in[3].node) {
        WF__TRY(tr_binary_helper(t, "Add", s, t->in[3], &s));
    }
    WF__TRY(helper(t, "Softmax", &s, 1, &p, &pn));
    WF__TRY(attr_int(t->x, pn, "axis", -1));
    WF__TRY(tr_binary_helper(t, "MatMul", p, v, &o));
    const char *y[1] = {t->out[0]};
    if (r == 4) {
        Onnx__NodeProto *id = add_node(t->x, "Identity", n->name, &o, 1, y, 1);
        return id ? NULL : oom();
    }
    WF__TRY(helper(t, "Transpose", &o, 1, &o, &pn));
    WF__TRY(attr_ints(t->x, pn, "perm", p0213, 4));
    const char *sh, *in[2] = {o, NULL};
    WF__TRY(i64_init(t->x, n, "merge", (const int64_t[]){0, 0, -1}, 3, &sh));
    in[1] = sh;
    Onnx__NodeProto *last = add_node(t->x, "Reshape", n->name, in, 2, y, 1);
    return last ? NULL : oom();
}

/* RMSNormalization is opset 23: x * Reciprocal(Sqrt(ReduceMean(x * x) + epsilon)) * scale over the axes
 * from `axis` on (ReduceMean's axes an attribute at opset 17), computed in x's dtype. */
static wf_status *tr_rmsnorm(tr *t)
{
    const wf_node *n = t->n;
    int r = in_rank(t, 0, NULL);
    int64_t axis = wf__attr_i(n->op, n->attrs, "axis");
    if (r < 1 || axis < -r || axis >= r)
        return fail(t->x, n, WF_UNIMPLEMENTED, "RMSNormalization of an input of unknown rank or axis %lld", (long long)axis);
    if (axis < 0) axis += r;
    int64_t axes[WF_MAX_RANK];
    for (int64_t d = axis; d < r; d++) axes[d - axis] = d;
    const char *x = t->in[0], *sq, *ms, *ep, *rt;
    Onnx__NodeProto *p;
    WF__TRY(tr_binary_helper(t, "Mul", x, x, &sq));
    WF__TRY(helper(t, "ReduceMean", &sq, 1, &ms, &p));
    WF__TRY(attr_ints(t->x, p, "axes", axes, (int)(r - axis)));
    WF__TRY(attr_int(t->x, p, "keepdims", 1));
    WF__TRY(scalar_init(t->x, n, "epsilon", wf_output_dtype(n->in[0]), wf__attr_f(n->op, n->attrs, "epsilon"), &ep));
    WF__TRY(tr_binary_helper(t, "Add", ms, ep, &ms));
    WF__TRY(helper(t, "Sqrt", &ms, 1, &rt, NULL));
    WF__TRY(helper(t, "Reciprocal", &rt, 1, &rt, NULL));
    WF__TRY(tr_binary_helper(t, "Mul", x, rt, &rt));
    const char *in[2] = {rt, t->in[1]};
    Onnx__NodeProto *last = add_node(t->x, "Mul", n->name, in, 2, t->out, 1);
    return last ? NULL : oom();
}

/* Mish (opset 18) = x tanh(softplus(x)); Swish (opset 24) = x sigmoid(alpha x). */
static wf_status *tr_mish(tr *t)
{
    const char *sp, *th;
    WF__TRY(helper(t, "Softplus", t->in, 1, &sp, NULL));
    WF__TRY(helper(t, "Tanh", &sp, 1, &th, NULL));
    const char *in[2] = {t->in[0], th};
    return emit(t, "Mul", in, 2, NULL, NULL);
}

static wf_status *tr_swish(tr *t)
{
    const char *ax = t->in[0], *sg, *al;
    double alpha = wf__attr_f(t->n->op, t->n->attrs, "alpha");
    if (alpha != 1.0) {
        WF__TRY(scalar_init(t->x, t->n, "alpha", wf_output_dtype(t->n->in[0]), alpha, &al));
        WF__TRY(tr_binary_helper(t, "Mul", t->in[0], al, &ax));
    }
    WF__TRY(helper(t, "Sigmoid", &ax, 1, &sg, NULL));
    const char *in[2] = {t->in[0], sg};
    static const char *const skip[] = {"alpha", NULL};
    return emit(t, "Mul", in, 2, skip, NULL);
}

/* Fill(dims, value) is Expand(value, dims). */
static wf_status *tr_fill(tr *t)
{
    const char *dims = t->in[0];
    if (wf_output_dtype(t->n->in[0]) != WF_I64) {
        Onnx__NodeProto *p;
        WF__TRY(helper(t, "Cast", &dims, 1, &dims, &p));
        WF__TRY(attr_int(t->x, p, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64));
    }
    const char *in[2] = {t->in[1], dims};
    return emit(t, "Expand", in, 2, NULL, NULL);
}

/* Dropout at inference is the identity; its mask output, when read, is all true. */
static wf_status *tr_dropout(tr *t)
{
    const wf_node *n = t->n;
    if (n->n_in > 2 && n->in[2].node) {
        const wf_tensor *tm = known_value(n->in[2]);
        if (!tm || (tm->size == 1 && ((const uint8_t *)tm->data)[0]))
            return fail(t->x, n, WF_INVALID_ARGUMENT, "training_mode is not a constant false: dropout in training "
                        "mode is training-only");
    }
    if (!(t->x->used[n->id] & 2)) {
        Onnx__NodeProto *p = add_node(t->x, "Identity", n->name, t->in, 1, t->out, 1);
        return p ? NULL : oom();
    }
    return emit(t, "Dropout", t->in, n->n_in > 2 ? 2 : n->n_in, NULL, NULL);
}

static wf_status *tr_batchnorm(tr *t)
{
    if (wf__attr_i(t->n->op, t->n->attrs, "training_mode"))
        return fail(t->x, t->n, WF_INVALID_ARGUMENT, "training_mode=1 (batch statistics) is training-only");
    static const char *const skip[] = {"training_mode", NULL};
    return emit(t, "BatchNormalization", t->in, t->n->n_in, skip, NULL);
}

/* Reductions: weft takes axes as an attribute or an input; opset 17 wants an input for ReduceSum and
 * an attribute for the others. */
static wf_status *tr_reduce(tr *t)
{
    const wf_node *n = t->n;
    const wf__attr *aa = wf__attr_get(n->op, n->attrs, "axes");
    int64_t axes[WF_MAX_RANK * 2];
    int n_axes = -1;
    if (aa->set && aa->n) {
        n_axes = aa->n < WF_MAX_RANK * 2 ? aa->n : WF_MAX_RANK * 2;
        memcpy(axes, aa->ints, sizeof *axes * (size_t)n_axes);
    }
    bool sum = !strcmp(n->op->name, "ReduceSum");
    static const char *const skip[] = {"axes", NULL};
    if (sum) {
        const char *in[2] = {t->in[0], n->n_in > 1 ? t->in[1] : ""};
        if (n_axes > 0 && !*in[1]) WF__TRY(i64_init(t->x, n, "axes", axes, n_axes, &in[1]));
        return emit(t, "ReduceSum", in, 2, skip, NULL);
    }
    if (n->n_in > 1 && n->in[1].node) {
        const wf_tensor *v = known_value(n->in[1]);
        if (!v || v->rank > 1 || v->size > WF_MAX_RANK * 2)
            return fail(t->x, n, WF_UNIMPLEMENTED, "axes from a computed input: opset %d takes them as an attribute",
                        EXPORT_OPSET);
        n_axes = (int)v->size;
        for (int64_t i = 0; i < v->size; i++) axes[i] = wf__load_i64(v->data, v->dtype, i);
    }
    if (n_axes <= 0 && wf__attr_i(n->op, n->attrs, "noop_with_empty_axes"))
        return fail(t->x, n, WF_UNIMPLEMENTED, "noop_with_empty_axes needs opset 18");
    static const char *const skip2[] = {"axes", "noop_with_empty_axes", NULL};
    Onnx__NodeProto *p;
    WF__TRY(emit(t, n->op->name, t->in, 1, skip2, &p));
    if (n_axes > 0) WF__TRY(attr_ints(t->x, p, "axes", axes, n_axes));
    return NULL;
}

static wf_status *tr_split(tr *t)
{
    static const char *const skip[] = {"num_outputs", NULL};
    return emit(t, "Split", t->in, t->n->n_in, skip, NULL);
}

static wf_status *tr_pad(tr *t)
{
    if (t->n->n_in > 3 && t->n->in[3].node)
        return fail(t->x, t->n, WF_UNIMPLEMENTED, "Pad's axes input needs opset 18");
    const char *mode = wf__attr_s(t->n->op, t->n->attrs, "mode");
    if (!strcmp(mode, "wrap")) return fail(t->x, t->n, WF_UNIMPLEMENTED, "Pad mode 'wrap' needs opset 19");
    return emit(t, "Pad", t->in, t->n->n_in < 3 ? t->n->n_in : 3, NULL, NULL);
}

static wf_status *tr_scatter(tr *t)
{
    const char *red = wf__attr_s(t->n->op, t->n->attrs, "reduction");
    if (!strcmp(red, "max") || !strcmp(red, "min"))
        return fail(t->x, t->n, WF_UNIMPLEMENTED, "reduction '%s' needs opset 18", red);
    return tr_same(t);
}

/* opset 16's GridSample names the modes bilinear and bicubic (linear and cubic since 20). */
static wf_status *tr_grid_sample(tr *t)
{
    if (in_rank(t, 0, NULL) != 4) return fail(t->x, t->n, WF_UNIMPLEMENTED, "GridSample before opset 20 is 2-D only");
    const char *mode = wf__attr_s(t->n->op, t->n->attrs, "mode");
    static const char *const skip[] = {"mode", NULL};
    Onnx__NodeProto *p;
    WF__TRY(emit(t, "GridSample", t->in, 2, skip, &p));
    const char *m = !strcmp(mode, "linear") ? "bilinear" : !strcmp(mode, "cubic") ? "bicubic" : mode;
    return attr_str(t->x, p, "mode", m);
}

/* DFT's axis is an attribute at opset 17 (default 1, weft's -2 is opset 20's): always written. */
static wf_status *tr_dft(tr *t)
{
    const wf_node *n = t->n;
    int64_t axis = wf__attr_i(n->op, n->attrs, "axis");
    if (n->n_in > 2 && n->in[2].node) {
        const wf_tensor *v = known_value(n->in[2]);
        if (!v || v->size != 1) return fail(t->x, n, WF_UNIMPLEMENTED, "a computed DFT axis needs opset 20");
        axis = wf__load_i64(v->data, v->dtype, 0);
    }
    static const char *const skip[] = {"axis", NULL};
    Onnx__NodeProto *p;
    WF__TRY(emit(t, "DFT", t->in, n->n_in < 2 ? n->n_in : 2, skip, &p));
    return attr_int(t->x, p, "axis", axis);
}

/* Same-named ONNX ops (opset <= 17) whose weft form is written as is. */
static const char *const g_same[] = {
    "Identity", "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "Greater", "And", "Or", "Xor", "Not",
    "Where", "Neg", "Abs", "Sign", "Relu", "Exp", "Log", "Sqrt", "Reciprocal", "Tanh", "Sigmoid", "LeakyRelu",
    "Elu", "Erf", "Softplus", "Floor", "Ceil", "Round", "Clip", "Cast", "Reshape", "Transpose", "Squeeze",
    "Unsqueeze", "Flatten", "Concat", "Slice", "Gather", "GatherND", "Tile", "Expand", "OneHot", "Range", "Shape",
    "Size", "ConstantOfShape", "Gemm", "ArgMax", "ArgMin", "Softmax", "LogSoftmax", "LayerNormalization", "Sin",
    "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsNaN", "IsInf",
    "HardSigmoid", "HardSwish", "Selu", "Celu", "Softsign", "ThresholdedRelu", "Shrink", "PRelu", "BitShift",
    "Hardmax", "LpNormalization", "Sum", "Mean", "Max", "Min", "Det", "GatherElements", "Trilu", "CumSum", "TopK",
    "EyeLike", "DepthToSpace", "SpaceToDepth", "InstanceNormalization", "LRN", "MeanVarianceNormalization",
    "GlobalMaxPool", "NonZero", "Compress", "ReverseSequence", "Einsum", "Resize", "NegativeLogLikelihoodLoss",
    "SoftmaxCrossEntropyLoss", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
    "QLinearMatMul", "ConvInteger", "QLinearConv", "LpPool", "HannWindow", "HammingWindow", "BlackmanWindow", "RNN",
    "GRU", "LSTM", "RoiAlign", "MaxUnpool", "NonMaxSuppression", "Unique", NULL};

static wf_status *tr_conv(tr *t) { return tr_rename(t, "Conv"); }
static wf_status *tr_convt(tr *t) { return tr_rename(t, "ConvTranspose"); }
static wf_status *tr_max_pool(tr *t) { return tr_rename(t, "MaxPool"); }
static wf_status *tr_gap(tr *t) { return tr_rename(t, "GlobalAveragePool"); }
static wf_status *tr_maximum(tr *t) { return tr_rename(t, "Max"); }
static wf_status *tr_minimum(tr *t) { return tr_rename(t, "Min"); }
static wf_status *tr_less_equal(tr *t) { return tr_rename(t, "LessOrEqual"); }
static wf_status *tr_greater_equal(tr *t) { return tr_rename(t, "GreaterOrEqual"); }

static const struct {
    const char *op;
    wf_status *(*fn)(tr *t);
} g_tr[] = {
    {"BiasAdd", tr_bias_add},         {"MatMul", tr_matmul},
    {"Conv2D", tr_conv},              {"ConvTranspose2D", tr_convt},
    {"MaxPool2D", tr_max_pool},       {"AvgPool2D", tr_avg_pool},
    {"GlobalAvgPool", tr_gap},        {"Maximum", tr_maximum},
    {"Minimum", tr_minimum},          {"LessEqual", tr_less_equal},
    {"GreaterEqual", tr_greater_equal}, {"NotEqual", tr_not_equal},
    {"Square", tr_square},            {"Rsqrt", tr_rsqrt},
    {"Gelu", tr_gelu},                {"Mish", tr_mish},
    {"Attention", tr_attention},       {"RMSNormalization", tr_rmsnorm},
    {"Swish", tr_swish},              {"Fill", tr_fill},
    {"Dropout", tr_dropout},          {"BatchNormalization", tr_batchnorm},
    {"ReduceSum", tr_reduce},         {"ReduceMean", tr_reduce},
    {"ReduceMax", tr_reduce},         {"ReduceMin", tr_reduce},
    {"ReduceProd", tr_reduce},        {"ReduceL1", tr_reduce},
    {"ReduceL2", tr_reduce},          {"ReduceSumSquare", tr_reduce},
    {"ReduceLogSum", tr_reduce},      {"ReduceLogSumExp", tr_reduce},
    {"Split", tr_split},              {"Pad", tr_pad},
    {"ScatterElements", tr_scatter},  {"ScatterND", tr_scatter},
    {"GridSample", tr_grid_sample},   {"DFT", tr_dft},
};

/* Ops that only exist to train: state updates and the backward ops wf_gradients adds. */
static bool training_only(const wf_node *n)
{
    const char *op = n->op->name;
    size_t len = strlen(op);
    return !strcmp(op, "Assign") || (len > 4 && !strcmp(op + len - 4, "Grad")) || strstr(op, "Backprop") ||
           strstr(op, "Apply") == op || strstr(op, "Random") || !strncmp(n->name, "gradients/", 10);
}

static wf_status *translate(ex *x, const wf_node *n)
{
    const char *op = n->op->name;
    if (training_only(n))
        return fail(x, n, WF_INVALID_ARGUMENT, "%s is a training-only op (the model would update state or compute "
                    "gradients); export the inference outputs instead", op);
    tr t = {.x = x, .n = n};
    if (n->n_in > (int)(sizeof t.in / sizeof t.in[0]))
        return fail(x, n, WF_UNIMPLEMENTED, "%d inputs is more than the exporter handles", n->n_in);
    for (int i = 0; i < n->n_in; i++)
        if (!(t.in[i] = vname(x, n->in[i]))) return oom();
    t.out = ar_alloc(x, sizeof *t.out * (size_t)(n->n_out ? n->n_out : 1));
    if (!t.out) return oom();
    for (int k = 0; k < n->n_out; k++)
        if (!(t.out[k] = vname(x, wf_out((wf_node *)n, k)))) return oom();
    for (size_t i = 0; i < sizeof g_tr / sizeof g_tr[0]; i++)
        if (!strcmp(g_tr[i].op, op)) return g_tr[i].fn(&t);
    if (in_list(g_same, op)) return tr_same(&t);
    return fail(x, n, WF_UNIMPLEMENTED, "op %s has no ONNX opset %d form that weft can write", op, EXPORT_OPSET);
}

/* ---- graph inputs and outputs ------------------------------------------------------------------------ */

static Onnx__ValueInfoProto *value_info(ex *x, const char *name, wf_dtype dt, int rank, const int64_t *dims,
                                        bool symbolic)
{
    Onnx__ValueInfoProto *vi = ar_alloc(x, sizeof *vi);
    Onnx__TypeProto *tp = ar_alloc(x, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ar_alloc(x, sizeof *tt);
    if (!vi || !tp || !tt || !name) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = (char *)name;
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = onnx_dtype(dt);
    if (rank < 0) return vi;
    Onnx__TensorShapeProto *sh = ar_alloc(x, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dv = ar_alloc(x, sizeof *dv * (size_t)(rank ? rank : 1));
    if (!sh || !dv) return NULL;
    onnx__tensor_shape_proto__init(sh);
    for (int d = 0; d < rank; d++) {
        Onnx__TensorShapeProto__Dimension *dim = ar_alloc(x, sizeof *dim);
        if (!dim) return NULL;
        onnx__tensor_shape_proto__dimension__init(dim);
        if (dims[d] >= 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = dims[d];
        } else if (symbolic) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = "N";
        }
        dv[d] = dim;
    }
    sh->n_dim = (size_t)rank;
    sh->dim = dv;
    tt->shape = sh;
    return vi;
}

static wf_status *add_input(ex *x, const wf_node *n, const char *name)
{
    int64_t dims[WF_MAX_RANK];
    int r = wf_output_shape(wf_out((wf_node *)n, 0), dims);
    Onnx__ValueInfoProto *vi = value_info(x, name, wf_output_dtype(wf_out((wf_node *)n, 0)), r, dims, true);
    if (!vi || !grow((void **)&x->inputs, &x->cap_inputs, x->n_inputs, sizeof *x->inputs)) return oom();
    x->inputs[x->n_inputs++] = vi;
    return NULL;
}

/* Sources become initializers or graph inputs; everything else a node. */
static wf_status *export_node(ex *x, const wf_node *n)
{
    const char *op = n->op->name;
    if (!strcmp(op, "Const")) return add_init(x, n->name, wf__attr_get(n->op, n->attrs, "value")->t, n);
    if (!strcmp(op, "Variable")) {
        wf_tensor *v;
        wf_status *s = wf_session_get_variable(x->s, n->name, &v);
        if (s) return wf__status_wrap(s, "%s: variable '%s'", x->path, n->name);
        s = add_init(x, n->name, v, n);
        wf_tensor_free(v);
        return s;
    }
    if (!strcmp(op, "Placeholder")) return add_input(x, n, n->name);
    if (!strcmp(op, "PlaceholderWithDefault")) {
        /* an input whose initializer of the same name is its default, as ONNX writes it */
        const wf_node *src = n->in[0].node;
        if (src && (!strcmp(src->op->name, "Const") || !strcmp(src->op->name, "Variable")) && n->in[0].index == 0) {
            wf_tensor *v = NULL;
            if (!strcmp(src->op->name, "Const")) {
                v = wf_tensor_ref(wf__attr_get(src->op, src->attrs, "value")->t);
            } else {
                wf_status *s = wf_session_get_variable(x->s, src->name, &v);
                if (s) return wf__status_wrap(s, "%s: variable '%s'", x->path, src->name);
            }
            wf_status *s = add_init(x, n->name, v, n);
            wf_tensor_free(v);
            return s ? s : add_input(x, n, n->name);
        }
        /* a computed default cannot be an ONNX input: it stays the value it computes */
        const char *in = vname(x, n->in[0]);
        return add_node(x, "Identity", n->name, &in, 1, (const char *const[]){n->name}, 1) ? NULL : oom();
    }
    return translate(x, n);
}

/* ---- writing ------------------------------------------------------------------------------------------ */

/* Written beside the target and renamed over it, so a reader never sees half a model and a failure
 * leaves no file behind. */
static wf_status *write_atomic(const char *path, const uint8_t *buf, size_t len)
{
    size_t pl = strlen(path);
    char *tmp = wf__malloc(pl + 16);
    if (!tmp) return wf__oom(path, pl + 16);
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        wf_status *s = wf__status(WF_IO_ERROR, "%s: cannot create the model file: %s", path, strerror(errno));
        wf__free(tmp);
        return s;
    }
    FILE *f = fdopen(fd, "wb");
    int err = 0;
    if (!f) {
        err = errno;
        close(fd);
    } else {
        if (len && fwrite(buf, 1, len, f) != len) err = errno ? errno : EIO;
        if (!err && fflush(f) != 0) err = errno;
        if (!err && fsync(fileno(f)) != 0) err = errno;
        if (fclose(f) != 0 && !err) err = errno;
    }
    if (!err && rename(tmp, path) != 0) err = errno;
    wf_status *s = NULL;
    if (err) {
        unlink(tmp);
        s = wf__status(WF_IO_ERROR, "%s: writing the model failed: %s", path, strerror(err));
    }
    wf__free(tmp);
    return s;
}

static wf_status *build_and_write(ex *x, wf_graph *g, const wf_output *outputs, const char *const *names, int n_out)
{
    /* what the outputs depend on */
    x->need = wf__calloc((size_t)g->n + 1, sizeof *x->need);
    x->used = wf__calloc((size_t)g->n + 1, sizeof *x->used);
    int *stack = wf__malloc(sizeof(int) * ((size_t)g->n + 1));
    if (!x->need || !x->used || !stack) {
        wf__free(stack);
        return oom();
    }
    int sp = 0;
    for (int i = 0; i < n_out; i++) {
        const wf_node *n = outputs[i].node;
        if (outputs[i].index < 64) x->used[n->id] |= 1ull << outputs[i].index;
        if (!x->need[n->id]) x->need[n->id] = true, stack[sp++] = n->id;
    }
    while (sp) {
        const wf_node *n = g->nodes[stack[--sp]];
        for (int k = 0; k < n->n_in; k++) {
            const wf_node *m = n->in[k].node;
            if (!m) continue;
            if (n->in[k].index < 64) x->used[m->id] |= 1ull << n->in[k].index;
            if (!x->need[m->id]) x->need[m->id] = true, stack[sp++] = m->id;
        }
    }
    wf__free(stack);
    /* weft's strings (records, then payload) are not ONNX's string tensors, and nothing that takes them
     * (ReadFile, the image decoders) has an ONNX op */
    for (int id = 0; id < g->n; id++)
        for (int j = 0; x->need[id] && j < g->nodes[id]->n_out; j++)
            if (g->nodes[id]->out[j].dtype == WF_STRING)
                return wf__status(WF_UNIMPLEMENTED, "%s: node '%s' (%s) has a string output, which the ONNX export "
                                  "does not write", x->path, g->nodes[id]->name, g->nodes[id]->op->name);
    /* creation order is a topological order */
    for (int id = 0; id < g->n; id++)
        if (x->need[id]) WF__TRY(export_node(x, g->nodes[id]));
    /* graph outputs: a node's output under its own name, else an Identity under the requested one */
    Onnx__ValueInfoProto **gout = ar_alloc(x, sizeof *gout * (size_t)n_out);
    if (!gout) return oom();
    for (int i = 0; i < n_out; i++) {
        wf_output o = outputs[i];
        const char *internal = vname(x, o);
        const char *want = names && names[i] ? names[i] : internal;
        if (!internal || !want) return oom();
        if (!*want) return wf__status(WF_INVALID_ARGUMENT, "%s: output %d has an empty name", x->path, i);
        for (int j = 0; j < i; j++)
            if (!strcmp(gout[j]->name, want))
                return wf__status(WF_INVALID_ARGUMENT, "%s: outputs %d and %d are both named '%s'", x->path, j, i, want);
        bool direct = !strcmp(want, internal);
        for (int j = 0; j < i && direct; j++) direct = strcmp(gout[j]->name, internal) != 0;
        if (!direct) {
            /* the requested name must not be a value of the graph already */
            bool clash = false;
            for (size_t k = 0; k < x->n_nodes && !clash; k++)
                for (size_t m = 0; m < x->nodes[k]->n_output && !clash; m++) clash = !strcmp(x->nodes[k]->output[m], want);
            for (size_t k = 0; k < x->n_inits && !clash; k++) clash = !strcmp(x->inits[k]->name, want);
            for (size_t k = 0; k < x->n_inputs && !clash; k++) clash = !strcmp(x->inputs[k]->name, want);
            if (clash)
                return wf__status(WF_INVALID_ARGUMENT, "%s: output %d's name '%s' is already the name of another value "
                                  "in the graph", x->path, i, want);
            const char *oname = ar_strf(x, "%s", want), *nname = ar_strf(x, "%s/onnx_output", want);
            if (!oname || !nname || !add_node(x, "Identity", nname, &internal, 1, &oname, 1)) return oom();
            want = oname;
        }
        int64_t dims[WF_MAX_RANK];
        int r = wf_output_shape(o, dims);
        if (!(gout[i] = value_info(x, want, wf_output_dtype(o), r, dims, false))) return oom();
    }
    if (x->oom) return oom();

    Onnx__ModelProto m;
    Onnx__GraphProto gp;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    onnx__model_proto__init(&m);
    onnx__graph_proto__init(&gp);
    onnx__operator_set_id_proto__init(&opset);
    opset.domain = "";
    opset.has_version = 1;
    opset.version = EXPORT_OPSET;
    m.has_ir_version = 1;
    m.ir_version = EXPORT_IR;
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.producer_name = "weft";
    m.producer_version = (char *)wf_version();
    m.graph = &gp;
    gp.name = "weft";
    gp.n_node = x->n_nodes;
    gp.node = x->nodes;
    gp.n_initializer = x->n_inits;
    gp.initializer = x->inits;
    gp.n_input = x->n_inputs;
    gp.input = x->inputs;
    gp.n_output = (size_t)n_out;
    gp.output = gout;
    size_t len = onnx__model_proto__get_packed_size(&m);
    if (len > (size_t)INT32_MAX)
        return wf__status(WF_UNIMPLEMENTED, "%s: the model is %zu bytes, over protobuf's 2 GB limit (external data "
                          "is not written)", x->path, len);
    uint8_t *buf = wf__malloc(len ? len : 1);
    if (!buf) return wf__oom(x->path, len);
    size_t packed = onnx__model_proto__pack(&m, buf);
    wf_status *s = packed == len ? write_atomic(x->path, buf, len)
                                 : wf__status(WF_INTERNAL, "%s: protobuf packed %zu of %zu bytes", x->path, packed, len);
    wf__free(buf);
    return s;
}

/* Writes the graph behind outputs (all of one graph: the session's, or an optimised graph it owns),
 * with the session's current Variable values. */
static wf_status *export_outputs(wf_session *s, const wf_output *outputs, const char *const *output_names,
                                 int n_outputs, const char *path, bool session_graph)
{
    wf_graph *g = NULL;
    for (int i = 0; i < n_outputs; i++) {
        const wf_node *n = outputs[i].node;
        if (!n || outputs[i].index < 0 || outputs[i].index >= n->n_out)
            return wf__status(WF_INVALID_ARGUMENT, "%s: output %d is not a node's output", path, i);
        if (session_graph && n->graph != wf__session_graph(s))
            return wf__status(WF_INVALID_ARGUMENT, "%s: output %d ('%s') is not from the session's graph", path, i,
                              n->name);
        if (g && n->graph != g)
            return wf__status(WF_INVALID_ARGUMENT, "%s: output %d ('%s') is from another graph", path, i, n->name);
        g = n->graph;
    }
    ex x = {.s = s, .path = path};
    wf_status *st = build_and_write(&x, g, outputs, output_names, n_outputs);
    ex_free(&x);
    return st;
}

wf_status *wf_session_export_onnx(wf_session *s, const wf_output *outputs, const char *const *output_names,
                                  int n_outputs, const char *path)
{
    if (!s || !outputs || n_outputs <= 0 || !path || !*path)
        return wf__status(WF_INVALID_ARGUMENT, "wf_session_export_onnx: NULL session, outputs or path, or no outputs");
    return export_outputs(s, outputs, output_names, n_outputs, path, true);
}

wf_status *wf_session_export_optimized_onnx(wf_session *s, const wf_feed *feeds, int n_feeds, const wf_output *fetches,
                                            const char *const *output_names, int n_fetches, const char *path)
{
    if (!s || (n_feeds > 0 && !feeds) || n_feeds < 0 || !fetches || n_fetches <= 0 || !path || !*path)
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_session_export_optimized_onnx: NULL session, feeds, fetches or path, or no fetches");
    wf_output *mapped = wf__malloc(sizeof *mapped * (size_t)n_fetches);
    if (!mapped) return wf__oom("an ONNX export", sizeof *mapped * (size_t)n_fetches);
    wf_status *st = wf__session_optimized_outputs(s, feeds, n_feeds, fetches, n_fetches, mapped);
    if (st) st = wf__status_wrap(st, "%s: optimising", path);
    else st = export_outputs(s, mapped, output_names, n_fetches, path, false);
    wf__free(mapped);
    return st;
}
