/*
 * Graph building. Every wf_op call validates at once (op, inputs, attributes, shape inference) and
 * either adds a complete node or leaves the graph exactly as it was.
 */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

wf_node *wf__graph_lookup(const wf_graph *g, const char *name)
{
    if (!g->index_cap) return NULL;
    size_t mask = g->index_cap - 1;
    for (size_t i = hash_str(name) & mask;; i = (i + 1) & mask) {
        wf_node *n = g->index[i];
        if (!n) return NULL;
        if (!strcmp(n->name, name)) return n;
    }
}

static bool index_insert(wf_node **index, size_t cap, wf_node *n)
{
    size_t mask = cap - 1;
    for (size_t i = hash_str(n->name) & mask;; i = (i + 1) & mask)
        if (!index[i]) {
            index[i] = n;
            return true;
        }
}

/* Makes room for one more node in both the array and the index. */
static wf_status *graph_reserve(wf_graph *g)
{
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 64;
        wf_node **p = wf__realloc(g->nodes, sizeof *p * (size_t)g->cap, sizeof *p * (size_t)cap);
        if (!p) return wf__oom("the graph's node list", sizeof *p * (size_t)cap);
        g->nodes = p;
        g->cap = cap;
    }
    if ((size_t)(g->n + 1) * 2 > g->index_cap) {
        size_t cap = g->index_cap ? g->index_cap * 2 : 128;
        wf_node **idx = wf__calloc(cap, sizeof *idx);
        if (!idx) return wf__oom("the graph's name index", cap * sizeof *idx);
        for (int i = 0; i < g->n; i++) index_insert(idx, cap, g->nodes[i]);
        wf__free(g->index);
        g->index = idx;
        g->index_cap = cap;
    }
    return NULL;
}

wf_status *wf_graph_new(wf_graph **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_graph_new: out is NULL");
    wf_graph *g = wf__calloc(1, sizeof *g);
    if (!g) return wf__oom("a graph", sizeof *g);
    *out = g;
    return NULL;
}

static void attrs_free(wf__attr *attrs)
{
    for (int k = 0; k < WF__MAX_ATTRS; k++) {
        wf__free(attrs[k].ints);
        wf__free(attrs[k].floats);
        wf__free(attrs[k].s);
        wf_tensor_free(attrs[k].t);
    }
}

static void node_free(wf_node *n)
{
    if (!n) return;
    attrs_free(n->attrs);
    if (n->out_value)
        for (int i = 0; i < n->n_out; i++) wf_tensor_free(n->out_value[i]);
    wf__free(n->out_value);
    wf__free(n->out);
    wf__free(n->in);
    wf__free(n->name);
    wf__free(n->device);
    wf__free(n->coloc);
    wf__free(n);
}

void wf_graph_free(wf_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n; i++) node_free(g->nodes[i]);
    wf__free(g->nodes);
    wf__free(g->index);
    wf__free(g->name_ops);
    wf__free(g->name_next);
    wf__free(g->device_scope);
    wf__free(g);
}

/* A new unique name "Op", "Op_1", ...; per-op counters keep this O(1) for large graphs. */
static wf_status *auto_name(wf_graph *g, const wf__op_def *op, char **out)
{
    int k;
    for (k = 0; k < g->name_n; k++)
        if (g->name_ops[k] == op) break;
    if (k == g->name_n) {
        if (g->name_n == g->name_cap) {
            int cap = g->name_cap ? g->name_cap * 2 : 16;
            const wf__op_def **ops = wf__realloc(g->name_ops, sizeof *ops * (size_t)g->name_cap,
                                                 sizeof *ops * (size_t)cap);
            if (!ops) return wf__oom("node names", sizeof *ops * (size_t)cap);
            g->name_ops = ops;
            int *next = wf__realloc(g->name_next, sizeof *next * (size_t)g->name_cap,
                                    sizeof *next * (size_t)cap);
            if (!next) return wf__oom("node names", sizeof *next * (size_t)cap);
            g->name_next = next;
            g->name_cap = cap;
        }
        g->name_ops[k] = op;
        g->name_next[k] = 0;
        g->name_n++;
    }
    char buf[256];
    for (;;) {
        int c = g->name_next[k]++;
        if (c == 0)
            snprintf(buf, sizeof buf, "%s", op->name);
        else
            snprintf(buf, sizeof buf, "%s_%d", op->name, c);
        if (!wf__graph_lookup(g, buf)) break;
    }
    *out = wf__strdup(buf);
    return *out ? NULL : wf__oom("a node name", strlen(buf) + 1);
}

static const char *attr_type_name(wf_attr_type t)
{
    switch (t) {
    case WF_ATTR_INT: return "int";
    case WF_ATTR_FLOAT: return "float";
    case WF_ATTR_INTS: return "ints";
    case WF_ATTR_FLOATS: return "floats";
    case WF_ATTR_STRING: return "string";
    case WF_ATTR_DTYPE: return "dtype";
    case WF_ATTR_TENSOR: return "tensor";
    }
    return "?";
}

#define NODE_ERR(code, ...) wf__status_wrap(wf__status(code, __VA_ARGS__), "node '%s' (%s)", name, op->name)

/* Copies the user's attributes into dst (defaults first), validating names, types and presence. */
static wf_status *set_attrs(const char *name, const wf__op_def *op, const wf_attr *attrs, int n_attrs,
                            wf__attr *dst)
{
    for (int k = 0; k < WF__MAX_ATTRS && op->attrs[k].name; k++) {
        const wf__attr_def *d = &op->attrs[k];
        dst[k].type = d->type;
        dst[k].i = d->i;
        dst[k].f = d->f;
        if (d->s && !(dst[k].s = wf__strdup(d->s))) return wf__oom("an attribute", strlen(d->s));
    }
    for (int a = 0; a < n_attrs; a++) {
        const wf_attr *in = &attrs[a];
        int k;
        for (k = 0; k < WF__MAX_ATTRS && op->attrs[k].name; k++)
            if (in->name && !strcmp(op->attrs[k].name, in->name)) break;
        if (k == WF__MAX_ATTRS || !op->attrs[k].name) {
            wf__str known = {0};
            for (int j = 0; j < WF__MAX_ATTRS && op->attrs[j].name; j++)
                wf__str_appendf(&known, "%s%s", j ? ", " : "", op->attrs[j].name);
            wf_status *s = NODE_ERR(WF_INVALID_ARGUMENT, "unknown attribute '%s' (the op has: %s)",
                                    in->name ? in->name : "(null)", known.p ? known.p : "none");
            wf__str_free(&known);
            return s;
        }
        wf__attr *d = &dst[k];
        if (d->set)
            return NODE_ERR(WF_INVALID_ARGUMENT, "attribute '%s' given twice", in->name);
        wf_attr_type want = op->attrs[k].type;
        bool ok = in->type == want || (want == WF_ATTR_FLOAT && in->type == WF_ATTR_INT) ||
                  (want == WF_ATTR_FLOATS && in->type == WF_ATTR_INTS);
        if (!ok)
            return NODE_ERR(WF_INVALID_ARGUMENT, "attribute '%s' must be %s, got %s", in->name,
                            attr_type_name(want), attr_type_name(in->type));
        d->set = true;
        switch (want) {
        case WF_ATTR_INT: d->i = in->i; break;
        case WF_ATTR_DTYPE:
            if (!wf__dtype_valid(in->dtype))
                return NODE_ERR(WF_INVALID_ARGUMENT, "attribute '%s' is an invalid dtype %d", in->name,
                                (int)in->dtype);
            d->i = in->dtype;
            break;
        case WF_ATTR_FLOAT: d->f = in->type == WF_ATTR_INT ? (double)in->i : in->f; break;
        case WF_ATTR_INTS:
        case WF_ATTR_FLOATS:
            if (in->n < 0 || (in->n > 0 && !(in->type == WF_ATTR_INTS ? (void *)in->ints : (void *)in->floats)))
                return NODE_ERR(WF_INVALID_ARGUMENT, "attribute '%s' has %d values and no array", in->name, in->n);
            d->n = in->n;
            if (want == WF_ATTR_INTS) {
                d->ints = wf__malloc(sizeof(int64_t) * (size_t)(in->n ? in->n : 1));
                if (!d->ints) return wf__oom("an attribute", sizeof(int64_t) * (size_t)in->n);
                if (in->n) memcpy(d->ints, in->ints, sizeof(int64_t) * (size_t)in->n);
            } else {
                d->floats = wf__malloc(sizeof(double) * (size_t)(in->n ? in->n : 1));
                if (!d->floats) return wf__oom("an attribute", sizeof(double) * (size_t)in->n);
                for (int j = 0; j < in->n; j++)
                    d->floats[j] = in->type == WF_ATTR_INTS ? (double)in->ints[j] : in->floats[j];
            }
            break;
        case WF_ATTR_STRING:
            wf__free(d->s);
            d->s = NULL;
            if (!in->s) return NODE_ERR(WF_INVALID_ARGUMENT, "attribute '%s' is a NULL string", in->name);
            if (!(d->s = wf__strdup(in->s))) return wf__oom("an attribute", strlen(in->s));
            break;
        case WF_ATTR_TENSOR:
            if (!in->tensor) return NODE_ERR(WF_INVALID_ARGUMENT, "attribute '%s' is a NULL tensor", in->name);
            if (in->tensor->device || !in->tensor->data)
                return NODE_ERR(WF_INVALID_ARGUMENT, "attribute '%s' is not a host tensor", in->name);
            WF__TRY(wf__tensor_clone(in->tensor, "an attribute", &d->t));
            d->t->version = wf__tensor_new_version(); /* the graph's copy is never written again */
            break;
        }
    }
    for (int k = 0; k < WF__MAX_ATTRS && op->attrs[k].name; k++)
        if (op->attrs[k].required && !dst[k].set)
            return NODE_ERR(WF_INVALID_ARGUMENT, "missing required attribute '%s'", op->attrs[k].name);
    return NULL;
}

/* ---- small integer values ------------------------------------------------------------------------
 * Shape inference knows the value of a Shape of a known shape and of a constant. Models compute the
 * shapes they reshape to from those values (PyTorch: x.view(x.size(0), x.size(1), H, D) is
 * Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), ...)), ShuffleNetV2's x.size(1) // 2), so the
 * integer ops between a Shape and a Reshape compute their value here too, where every input's value is
 * known and small: Gather along axis 0, the view ops (Unsqueeze, Squeeze, Reshape, Flatten, Identity:
 * the same elements), Concat of vectors, Slice of a vector, Add, Sub, Mul and Div (truncating, as the
 * kernels; not by 0), Neg, Cast between integer types. At build time that lets fold take the whole
 * chain; at plan time (lower/plan.c reinfer, with the fed shapes) it gives a dynamic batch's Reshapes
 * concrete shapes, so lowering fuses what a static model's would. Anything else (an index out of range,
 * overflow, a result the inferred shape does not hold) leaves the value unknown, for the kernel to
 * compute or to report. */
#define SMALL_VALUE_MAX 64

static bool small_int(const wf_tensor *t)
{
    return t && (t->dtype == WF_I64 || t->dtype == WF_I32) && t->rank <= 1 && t->size <= SMALL_VALUE_MAX;
}

static int64_t sv_at(const wf_tensor *t, int64_t i)
{
    return t->dtype == WF_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

/* The value of n's output 0 in v (count in *nv), or false. */
static bool small_eval(const wf_node *n, wf_tensor *const *iv, int64_t *v, int64_t *nv)
{
    const char *op = n->op->name;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i].node && !small_int(iv[i])) return false;
    if (n->n_in < 1 || !iv[0]) return false;
    const wf_tensor *a = iv[0], *b = n->n_in > 1 ? iv[1] : NULL;
    if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") || !strcmp(op, "Reshape") || !strcmp(op, "Flatten") ||
        !strcmp(op, "Identity") || !strcmp(op, "Cast")) {
        *nv = a->size;
        for (int64_t i = 0; i < a->size; i++) v[i] = sv_at(a, i);
        return true;
    }
    if (!strcmp(op, "Neg") && n->n_in == 1) {
        *nv = a->size;
        for (int64_t i = 0; i < a->size; i++) {
            if (sv_at(a, i) == INT64_MIN) return false;
            v[i] = -sv_at(a, i);
        }
        return true;
    }
    if (!strcmp(op, "Gather") && b && a->rank == 1 && !wf__attr_i(n->op, n->attrs, "axis")) {
        *nv = b->size;
        for (int64_t i = 0; i < b->size; i++) {
            int64_t k = sv_at(b, i);
            if (k < 0) k += a->size;
            if (k < 0 || k >= a->size) return false;
            v[i] = sv_at(a, k);
        }
        return true;
    }
    if (!strcmp(op, "Concat")) {
        int64_t ax = wf__attr_i(n->op, n->attrs, "axis");
        if (ax != 0 && ax != -1) return false;
        *nv = 0;
        for (int i = 0; i < n->n_in; i++) {
            if (!iv[i] || iv[i]->rank != 1) return false;
            for (int64_t j = 0; j < iv[i]->size; j++) v[(*nv)++] = sv_at(iv[i], j);
        }
        return true;
    }
    if (!strcmp(op, "Slice") && a->rank == 1 && n->n_in >= 3 && b && iv[2] && b->size == 1 && iv[2]->size == 1) {
        if (n->n_in > 3 && iv[3] && (iv[3]->size != 1 || (sv_at(iv[3], 0) != 0 && sv_at(iv[3], 0) != -1))) return false;
        int64_t step = n->n_in > 4 && iv[4] ? (iv[4]->size == 1 ? sv_at(iv[4], 0) : 0) : 1;
        if (step < 1) return false; /* forward slices only */
        int64_t len = a->size, st = sv_at(b, 0), en = sv_at(iv[2], 0);
        st = st < 0 ? (st + len < 0 ? 0 : st + len) : st > len ? len : st;
        en = en < 0 ? (en + len < 0 ? 0 : en + len) : en > len ? len : en;
        *nv = 0;
        for (int64_t i = st; i < en; i += step) v[(*nv)++] = sv_at(a, i);
        return true;
    }
    bool add = !strcmp(op, "Add"), sub = !strcmp(op, "Sub"), mul = !strcmp(op, "Mul"), div = !strcmp(op, "Div");
    if ((add || sub || mul || div) && b && n->n_in == 2) {
        if (a->size != b->size && a->size != 1 && b->size != 1) return false;
        *nv = a->size > b->size ? a->size : b->size;
        for (int64_t i = 0; i < *nv; i++) {
            int64_t x = sv_at(a, a->size == 1 ? 0 : i), y = sv_at(b, b->size == 1 ? 0 : i), r;
            if (add ? __builtin_add_overflow(x, y, &r) : sub ? __builtin_sub_overflow(x, y, &r)
                : mul ? __builtin_mul_overflow(x, y, &r) : (y == 0 || (x == INT64_MIN && y == -1)))
                return false;
            v[i] = div ? x / y : r;
        }
        return true;
    }
    return false;
}

/* n's output 0 as a small integer value where small_eval computes one that fits out's dtype and shape. */
static wf_status *small_value(const wf_node *n, wf_tensor *const *in_value, const wf__tinfo *out, wf_tensor **out_value)
{
    int64_t v[SMALL_VALUE_MAX], nv = 0;
    const wf__tinfo *o = &out[0];
    if (n->n_out != 1 || out_value[0] || (o->dtype != WF_I64 && o->dtype != WF_I32) || o->rank < 0 || o->rank > 1 ||
        !wf__tinfo_known(o) || !small_eval(n, in_value, v, &nv) || nv != wf__numel(o->rank, o->dims))
        return NULL;
    for (int64_t i = 0; i < nv; i++)
        if (o->dtype == WF_I32 && (v[i] < INT32_MIN || v[i] > INT32_MAX)) return NULL;
    wf_tensor *t = NULL;
    WF__TRY(wf_tensor_new(o->dtype, o->rank, o->dims, NULL, &t));
    for (int64_t i = 0; i < nv; i++) {
        if (o->dtype == WF_I64) ((int64_t *)t->data)[i] = v[i];
        else ((int32_t *)t->data)[i] = (int32_t)v[i];
    }
    out_value[0] = t;
    return NULL;
}

wf_status *wf__node_infer(const wf_node *n, const wf__tinfo *in, wf_tensor *const *in_value,
                          wf__tinfo *out, wf_tensor **out_value)
{
    for (int i = 0; i < n->n_out; i++) {
        out[i].dtype = WF_DTYPE_INVALID;
        out[i].rank = -1;
        if (out_value) out_value[i] = NULL;
    }
    wf__infer_ctx ic = {.node = n->name, .op = n->op, .attrs = n->attrs, .n_in = n->n_in, .in = in,
                        .in_value = in_value, .n_out = n->n_out, .out = out, .out_value = out_value};
    wf_status *s = NULL;
    /* Strings reach only the ops that declare them: one check here instead of one in every shape
     * function and kernel that would read 16-byte records as numbers (or copy them without their payload). */
    if (!(n->op->flags & WF__OP_STRINGS))
        for (int i = 0; i < n->n_in && !s; i++)
            if (in[i].dtype == WF_STRING)
                s = wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): input %d is a string tensor, and %s does not take strings",
                               n->name, n->op->name, i, n->op->name);
    if (!s) s = n->op->infer ? n->op->infer(&ic) : NULL;
    if (!s && !(n->op->flags & WF__OP_STRINGS))
        for (int i = 0; i < n->n_out && !s; i++)
            if (out[i].dtype == WF_STRING)
                s = wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): output %d would be a string tensor, and %s does not "
                               "make strings", n->name, n->op->name, i, n->op->name);
    if (!s) s = wf__infer_check_sizes(&ic);
    if (!s)
        for (int i = 0; i < n->n_out; i++)
            if (!wf__dtype_valid(out[i].dtype))
                s = wf__status(WF_INTERNAL, "node '%s' (%s): shape function left output %d without a dtype",
                               n->name, n->op->name, i);
    if (!s && out_value && in_value) s = small_value(n, in_value, out, out_value);
    if (s && out_value)
        for (int i = 0; i < n->n_out; i++) {
            wf_tensor_free(out_value[i]);
            out_value[i] = NULL;
        }
    return s;
}

wf_status *wf_op(wf_graph *g, const char *op_type, const char *name, const wf_output *inputs,
                 int n_inputs, const wf_attr *attrs, int n_attrs, wf_node **out)
{
    if (!g) return wf__status(WF_INVALID_ARGUMENT, "wf_op: graph is NULL");
    const wf__op_def *op = wf__op_lookup(op_type);
    if (!op)
        return wf__status(WF_NOT_FOUND, "node '%s': unknown op '%s'", name ? name : "(unnamed)",
                          op_type ? op_type : "(null)");
    if (name && (!*name || strchr(name, ':')))
        return wf__status(WF_INVALID_ARGUMENT, "node name '%s' (%s) is empty or contains ':'", name, op->name);
    if (name && wf__graph_lookup(g, name))
        return wf__status(WF_ALREADY_EXISTS, "node '%s' (%s): a node with this name already exists",
                          name, op->name);
    const char *shown = name ? name : op->name;
    if (n_inputs < op->min_in || (op->max_in >= 0 && n_inputs > op->max_in) || (n_inputs && !inputs)) {
        if (op->max_in < 0)
            return wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): takes at least %d inputs, got %d",
                              shown, op->name, op->min_in, n_inputs);
        return wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): takes %d to %d inputs, got %d", shown,
                          op->name, op->min_in, op->max_in, n_inputs);
    }
    for (int i = 0; i < n_inputs; i++) {
        wf_node *src = inputs[i].node;
        if (!src) {
            if (i < op->min_in)
                return wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): required input %d is missing",
                                  shown, op->name, i);
            continue;
        }
        if (src->graph != g || src->id >= g->n || g->nodes[src->id] != src)
            return wf__status(WF_INVALID_ARGUMENT, "node '%s' (%s): input %d comes from another graph",
                              shown, op->name, i);
        if (inputs[i].index < 0 || inputs[i].index >= src->n_out)
            return wf__status(WF_INVALID_ARGUMENT,
                              "node '%s' (%s): input %d asks for output %d of '%s', which has %d",
                              shown, op->name, i, inputs[i].index, src->name, src->n_out);
    }

    wf_status *s = graph_reserve(g);
    if (s) return s;
    wf_node *n = wf__calloc(1, sizeof *n);
    wf__tinfo *in_info = NULL;
    wf_tensor **in_value = NULL;
    if (!n) return wf__oom("a node", sizeof *n);
    n->graph = g;
    n->op = op;
    n->id = g->n;
    if (name) {
        if (!(n->name = wf__strdup(name))) {
            s = wf__oom("a node name", strlen(name));
            goto fail;
        }
    } else if ((s = auto_name(g, op, &n->name))) {
        goto fail;
    }
    name = n->name;
    if ((s = set_attrs(name, op, attrs, n_attrs, n->attrs))) goto fail;
    n->n_in = n_inputs;
    n->n_out = op->n_out >= 0 ? op->n_out : op->num_outputs ? op->num_outputs(n->attrs, n_inputs) : 1;
    if (n->n_out < 0 || n->n_out > 4096) {
        s = NODE_ERR(WF_INVALID_ARGUMENT, "invalid number of outputs %d", n->n_out);
        goto fail;
    }
    n->in = wf__calloc((size_t)(n_inputs ? n_inputs : 1), sizeof *n->in);
    n->out = wf__calloc((size_t)(n->n_out ? n->n_out : 1), sizeof *n->out);
    n->out_value = wf__calloc((size_t)(n->n_out ? n->n_out : 1), sizeof *n->out_value);
    in_info = wf__calloc((size_t)(n_inputs ? n_inputs : 1), sizeof *in_info);
    in_value = wf__calloc((size_t)(n_inputs ? n_inputs : 1), sizeof *in_value);
    n->device = wf__strdup(g->device_scope ? g->device_scope : "");
    if (!n->in || !n->out || !n->out_value || !in_info || !in_value || !n->device) {
        s = wf__oom("a node", sizeof *n);
        goto fail;
    }
    for (int i = 0; i < n_inputs; i++) {
        n->in[i] = inputs[i];
        if (inputs[i].node) {
            in_info[i] = inputs[i].node->out[inputs[i].index];
            in_value[i] = inputs[i].node->out_value[inputs[i].index];
        } else {
            in_info[i].dtype = WF_DTYPE_INVALID;
            in_info[i].rank = -1;
            n->in[i].index = 0;
        }
    }
    if ((s = wf__node_infer(n, in_info, in_value, n->out, n->out_value))) goto fail;
    wf__free(in_info);
    wf__free(in_value);
    g->nodes[g->n++] = n;
    index_insert(g->index, g->index_cap, n);
    if (out) *out = n;
    return NULL;
fail:
    wf__free(in_info);
    wf__free(in_value);
    node_free(n);
    return s;
}

void wf__graph_truncate(wf_graph *g, int n)
{
    if (n < 0 || n >= g->n) return;
    while (g->n > n) node_free(g->nodes[--g->n]);
    memset(g->index, 0, g->index_cap * sizeof *g->index);
    for (int i = 0; i < g->n; i++) index_insert(g->index, g->index_cap, g->nodes[i]);
}

void wf__graph_pop(wf_graph *g)
{
    if (!g->n) return;
    node_free(g->nodes[--g->n]);
    /* Open addressing cannot delete in place; this path is rare, so rebuild the index. */
    memset(g->index, 0, g->index_cap * sizeof *g->index);
    for (int i = 0; i < g->n; i++) index_insert(g->index, g->index_cap, g->nodes[i]);
}

wf_status *wf_graph_set_device(wf_graph *g, const char *spec)
{
    wf_device_spec parsed;
    WF__TRY(wf_device_spec_parse(spec, &parsed)); /* a malformed spec fails here, not at run time */
    char *d = NULL;
    if (spec && *spec && !(d = wf__strdup(spec))) return wf__oom("a device spec", strlen(spec));
    wf__free(g->device_scope);
    g->device_scope = d;
    return NULL;
}

wf_status *wf_node_set_device(wf_node *n, const char *spec)
{
    if (!n) return wf__status(WF_INVALID_ARGUMENT, "wf_node_set_device: node is NULL");
    wf_device_spec parsed;
    WF__TRY(wf_device_spec_parse(spec, &parsed));
    char *d = wf__strdup(spec ? spec : "");
    if (!d) return wf__oom("a device spec", spec ? strlen(spec) : 0);
    wf__free(n->device);
    n->device = d;
    return NULL;
}

wf_status *wf_node_set_colocation(wf_node *n, const char *group)
{
    if (!n) return wf__status(WF_INVALID_ARGUMENT, "wf_node_set_colocation: node is NULL");
    char *c = NULL;
    if (group && *group && !(c = wf__strdup(group))) return wf__oom("a colocation group", strlen(group));
    wf__free(n->coloc);
    n->coloc = c;
    return NULL;
}

const char *wf_node_colocation(const wf_node *n) { return n ? n->coloc : NULL; }

int wf_graph_num_nodes(const wf_graph *g) { return g ? g->n : 0; }
wf_node *wf_graph_node(const wf_graph *g, int i) { return g && i >= 0 && i < g->n ? g->nodes[i] : NULL; }

wf_status *wf_graph_find(const wf_graph *g, const char *name, wf_node **out)
{
    wf_node *n = name ? wf__graph_lookup(g, name) : NULL;
    if (!n) return wf__status(WF_NOT_FOUND, "no node named '%s' in the graph", name ? name : "(null)");
    *out = n;
    return NULL;
}

wf_status *wf_graph_output(const wf_graph *g, const char *name, wf_output *out)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", name ? name : "");
    int idx = 0;
    char *colon = strrchr(buf, ':');
    wf_node *n = wf__graph_lookup(g, buf);
    if (!n && colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end == 0 && end != colon + 1) {
            *colon = 0;
            n = wf__graph_lookup(g, buf);
            idx = (int)v;
        }
    }
    if (!n) return wf__status(WF_NOT_FOUND, "no node named '%s' in the graph", name ? name : "(null)");
    if (idx < 0 || idx >= n->n_out)
        return wf__status(WF_NOT_FOUND, "node '%s' (%s) has %d outputs; '%s' asks for output %d", n->name,
                          n->op->name, n->n_out, name, idx);
    out->node = n;
    out->index = idx;
    return NULL;
}

const char *wf_node_name(const wf_node *n) { return n->name; }
const char *wf_node_op(const wf_node *n) { return n->op->name; }
const char *wf_node_device(const wf_node *n) { return n->device; }
int wf_node_num_inputs(const wf_node *n) { return n->n_in; }
wf_output wf_node_input(const wf_node *n, int i) { return n->in[i]; }
int wf_node_num_outputs(const wf_node *n) { return n->n_out; }
wf_dtype wf_output_dtype(wf_output o) { return o.node->out[o.index].dtype; }

int wf_output_shape(wf_output o, int64_t *dims)
{
    const wf__tinfo *t = &o.node->out[o.index];
    if (t->rank > 0 && dims) memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    return t->rank;
}
