/*
 * ONNX op -> weft op mapping. Most ONNX ops have a weft op of the same name and the same attributes
 * (weft follows the latest opset), so the default copies attributes by name and converts their
 * types. Handlers cover renamed ops and the older opsets' forms (attributes that later became
 * inputs, Softmax's 2-D coercion before opset 13, ...).
 */
#include <math.h>
#include <stdio.h>

#include "onnx/onnx_internal.h"

/* ---- helpers -------------------------------------------------------------------------------------- */

static const Onnx__AttributeProto *attr(const onnx_node *nc, const char *name)
{
    for (size_t i = 0; i < nc->n->n_attribute; i++)
        if (nc->n->attribute[i]->name && !strcmp(nc->n->attribute[i]->name, name)) return nc->n->attribute[i];
    return NULL;
}

/* Is input i given (present in the node and not the empty name of an omitted optional input)? */
static bool has_in(const onnx_node *nc, int i) { return i < nc->n_in && nc->in[i].node; }

static wf_status *fail(const onnx_node *nc, wf_code code, const char *fmt, ...) WF__PRINTF(3, 4);
static wf_status *fail(const onnx_node *nc, wf_code code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* an unnamed ONNX node is shown by the name weft gave it (from its first output) */
    return wf__status(code, "node '%s' (%s): %s", nc->n->name && *nc->n->name ? nc->n->name : nc->name,
                      nc->n->op_type, msg);
}

/* A weft node of this ONNX node: the first takes the node's name, helpers get "<name>/<k>". */
static wf_status *add(onnx_node *nc, const char *op, const wf_output *in, int n_in, const wf_attr *attrs, int n_attrs,
                      wf_node **out)
{
    char name[300];
    if (nc->n_helpers == 0)
        snprintf(name, sizeof name, "%s", nc->name);
    else
        snprintf(name, sizeof name, "%s/%d", nc->name, nc->n_helpers);
    for (int k = 1; wf__graph_lookup(nc->c->g, name); k++) snprintf(name, sizeof name, "%s/%d_%d", nc->name, nc->n_helpers, k);
    nc->n_helpers++;
    return wf_op(nc->c->g, op, name, in, n_in, attrs, n_attrs, out);
}

static wf_status *const_tensor(onnx_node *nc, wf_tensor *t, wf_output *out)
{
    wf_attr a = wf_attr_tensor("value", t);
    wf_node *n;
    wf_status *s = add(nc, "Const", NULL, 0, &a, 1, &n);
    wf_tensor_free(t);
    if (!s) *out = wf_out(n, 0);
    return s;
}

static wf_status *const_i64(onnx_node *nc, const int64_t *v, int n, wf_output *out)
{
    wf_tensor *t;
    int64_t d = n;
    WF__TRY(wf_tensor_new(WF_I64, 1, &d, v, &t));
    return const_tensor(nc, t, out);
}

static wf_status *const_scalar(onnx_node *nc, wf_dtype dt, double v, wf_output *out)
{
    wf_tensor *t;
    WF__TRY(wf_tensor_new(dt, 0, NULL, NULL, &t));
    wf__store_f64(t->data, dt, 0, v);
    return const_tensor(nc, t, out);
}

/* ONNX attribute -> weft attribute of type `want`. Arrays are borrowed from the proto. */
static wf_status *convert_attr(onnx_node *nc, const Onnx__AttributeProto *a, wf_attr_type want, wf_attr *out,
                               wf_tensor **owned)
{
    const char *nm = a->name;
    switch (want) {
    case WF_ATTR_INT:
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) { *out = wf_attr_int(nm, a->i); return NULL; }
        break;
    case WF_ATTR_FLOAT:
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) { *out = wf_attr_float(nm, a->f); return NULL; }
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) { *out = wf_attr_float(nm, (double)a->i); return NULL; }
        break;
    case WF_ATTR_INTS:
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) { *out = wf_attr_ints(nm, a->ints, (int)a->n_ints); return NULL; }
        break;
    case WF_ATTR_FLOATS:
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
            /* weft keeps doubles; the caller frees the copy with the tensor slot */
            wf_tensor *t;
            int64_t n = (int64_t)a->n_floats;
            WF__TRY(wf_tensor_new(WF_F64, 1, &n, NULL, &t));
            for (size_t i = 0; i < a->n_floats; i++) ((double *)t->data)[i] = a->floats[i];
            *owned = t;
            *out = wf_attr_floats(nm, t->data, (int)n);
            return NULL;
        }
        break;
    case WF_ATTR_STRING:
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS) {
            /* weft has no list-of-strings attribute: ops that take one (RNN's activations) take the
             * entries joined by commas */
            size_t len = 1;
            for (size_t i = 0; i < a->n_strings; i++) len += a->strings[i].len + 1;
            wf_tensor *t;
            int64_t n = (int64_t)len;
            WF__TRY(wf_tensor_new(WF_U8, 1, &n, NULL, &t));
            char *p = t->data;
            for (size_t i = 0; i < a->n_strings; i++) {
                if (i) *p++ = ',';
                if (a->strings[i].len) memcpy(p, a->strings[i].data, a->strings[i].len);
                p += a->strings[i].len;
            }
            *owned = t;
            *out = wf_attr_string(nm, t->data);
            return NULL;
        }
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) {
            wf_tensor *t;
            int64_t n = (int64_t)a->s.len + 1;
            WF__TRY(wf_tensor_new(WF_U8, 1, &n, NULL, &t));
            if (a->s.len) memcpy(t->data, a->s.data, a->s.len);
            *owned = t;
            *out = wf_attr_string(nm, t->data);
            return NULL;
        }
        break;
    case WF_ATTR_DTYPE:
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
            wf_dtype dt = wf__onnx_dtype((int32_t)a->i);
            if (!dt)
                return fail(nc, WF_UNIMPLEMENTED, "attribute '%s' names data type %s, which weft does not support", nm,
                            wf__onnx_dtype_name((int32_t)a->i));
            *out = wf_attr_dtype(nm, dt);
            return NULL;
        }
        break;
    case WF_ATTR_TENSOR:
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR && a->t) {
            char what[300];
            snprintf(what, sizeof what, "attribute '%s' of node '%s'", nm, nc->n->name ? nc->n->name : "");
            WF__TRY(wf__onnx_tensor(a->t, nc->c->dir, nc->c->path, what, owned));
            *out = wf_attr_tensor(nm, *owned);
            return NULL;
        }
        break;
    }
    return fail(nc, WF_INVALID_ARGUMENT, "attribute '%s' has ONNX type %d, which does not fit weft's", nm, (int)a->type);
}

/* Attributes ONNX defines that weft ignores when they hold their default (or always, for hints). */
static bool ignorable(const char *op, const Onnx__AttributeProto *a)
{
    if (!a->name) return false;
    static const struct { const char *op, *attr; int64_t only_if; bool any; } table[] = {
        {"MaxPool", "storage_order", 0, false}, {"BatchNormalization", "spatial", 1, false},
        {"BatchNormalization", "momentum", 0, true}, {"BatchNormalization", "is_test", 0, true},
        {"BatchNormalization", "consumed_inputs", 0, true}, {"Dropout", "is_test", 0, true},
        {"Dropout", "ratio", 0, true}, {"Dropout", "seed", 0, true}, {"Cast", "saturate", 1, true},
        {"Cast", "round_mode", 0, true}, {"CastLike", "saturate", 1, true}, {"CastLike", "round_mode", 0, true},
        {"LayerNormalization", "stash_type", 1, false}, {"Gemm", "broadcast", 0, true},
        {"Add", "broadcast", 0, true}, {"Sub", "broadcast", 0, true}, {"Mul", "broadcast", 0, true},
        {"Div", "broadcast", 0, true}, {"Pow", "broadcast", 0, true}, {"Equal", "broadcast", 0, true},
        {"Less", "broadcast", 0, true}, {"Greater", "broadcast", 0, true}, {"And", "broadcast", 0, true},
        {"Or", "broadcast", 0, true}, {"Xor", "broadcast", 0, true},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].op, op) && !strcmp(table[i].attr, a->name))
            return table[i].any || (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && a->i == table[i].only_if);
    return false;
}

/* Creates weft op `op` over `in` with the ONNX node's attributes copied by name, minus `skip` (a
 * NULL-terminated list of names a handler turned into inputs), plus `extra`. Maps outputs 1:1. */
static wf_status *emit(onnx_node *nc, const char *op, const wf_output *in, int n_in, const char *const *skip,
                       const wf_attr *extra, int n_extra, wf_node **out_node)
{
    const wf__op_def *def = wf__op_lookup(op);
    if (!def) return fail(nc, WF_UNIMPLEMENTED, "weft has no op '%s'", op);
    size_t na = nc->n->n_attribute;
    wf_attr *attrs = wf__calloc(na + (size_t)n_extra + 1, sizeof *attrs);
    wf_tensor **owned = wf__calloc(na + 1, sizeof *owned);
    int n = 0;
    wf_status *s = NULL;
    if (!attrs || !owned) s = wf__oom("attributes", na * sizeof *attrs);
    for (size_t i = 0; !s && i < na; i++) {
        const Onnx__AttributeProto *a = nc->n->attribute[i];
        if (!a->name || !*a->name) {
            s = fail(nc, WF_INVALID_ARGUMENT, "attribute %zu has no name", i);
            break;
        }
        bool skipped = false;
        for (int k = 0; skip && skip[k] && !skipped; k++) skipped = !strcmp(skip[k], a->name);
        for (int k = 0; k < n_extra && !skipped; k++) skipped = !strcmp(extra[k].name, a->name);
        if (skipped) continue;
        int k;
        for (k = 0; k < WF__MAX_ATTRS && def->attrs[k].name && strcmp(def->attrs[k].name, a->name); k++) {}
        if (k == WF__MAX_ATTRS || !def->attrs[k].name) {
            if (ignorable(nc->n->op_type, a)) continue;
            s = fail(nc, WF_UNIMPLEMENTED, "attribute '%s' is not supported by weft's %s", a->name, op);
            break;
        }
        s = convert_attr(nc, a, def->attrs[k].type, &attrs[n], &owned[i]);
        if (!s) n++;
    }
    for (int k = 0; !s && k < n_extra; k++) attrs[n++] = extra[k];
    wf_node *node = NULL;
    if (!s) s = add(nc, op, in, n_in, attrs, n, &node);
    for (size_t i = 0; owned && i < na; i++) wf_tensor_free(owned[i]);
    wf__free(owned);
    wf__free(attrs);
    if (s) return s;
    int outs = node->n_out < nc->n_out ? node->n_out : nc->n_out;
    for (int k = 0; k < outs; k++) nc->out[k] = wf_out(node, k);
    if (out_node) *out_node = node;
    return NULL;
}

static wf_status *emit_same(onnx_node *nc) { return emit(nc, nc->n->op_type, nc->in, nc->n_in, NULL, NULL, 0, NULL); }

/* ---- handlers ------------------------------------------------------------------------------------- */

static wf_status *map_renamed(onnx_node *nc, const char *op) { return emit(nc, op, nc->in, nc->n_in, NULL, NULL, 0, NULL); }
static wf_status *map_greater_equal(onnx_node *nc) { return map_renamed(nc, "GreaterEqual"); }
static wf_status *map_less_equal(onnx_node *nc) { return map_renamed(nc, "LessEqual"); }
static wf_status *map_gap(onnx_node *nc) { return map_renamed(nc, "GlobalAvgPool"); }

static wf_status *unsqueeze_h(onnx_node *nc, wf_output x, const char *op, wf_output *out)
{
    int64_t axis = 2;
    wf_output in[2] = {x};
    WF__TRY(const_i64(nc, &axis, 1, &in[1]));
    wf_node *n;
    WF__TRY(add(nc, op, in, 2, NULL, 0, &n));
    *out = wf_out(n, 0);
    return NULL;
}

/* A 1-D Conv/ConvTranspose/pool runs as the 2-D op over a height of 1: inputs get a unit H axis, the
 * per-axis attributes get an H entry (kernel 1, stride 1, dilation 1, padding 0), the output loses it. */
static wf_status *map_1d_as_2d(onnx_node *nc, const char *op, bool weight)
{
    static const char *const names[] = {"kernel_shape", "strides", "dilations", "pads", "output_padding",
                                        "output_shape", NULL};
    wf_output in[3] = {{NULL, 0}, {NULL, 0}, {NULL, 0}};
    WF__TRY(unsqueeze_h(nc, nc->in[0], "Unsqueeze", &in[0]));
    if (weight && nc->n_in > 1 && nc->in[1].node) WF__TRY(unsqueeze_h(nc, nc->in[1], "Unsqueeze", &in[1]));
    for (int i = weight ? 2 : 1; i < nc->n_in && i < 3; i++) in[i] = nc->in[i];
    int64_t vals[6][4];
    wf_attr extra[6];
    int n_extra = 0;
    for (int k = 0; names[k]; k++) {
        const Onnx__AttributeProto *a = attr(nc, names[k]);
        if (!a) continue;
        int64_t *v = vals[n_extra];
        if (!strcmp(names[k], "pads")) {
            if (a->n_ints != 2) return fail(nc, WF_INVALID_ARGUMENT, "1-D pads must have 2 values, not %zu", a->n_ints);
            v[0] = 0, v[1] = a->ints[0], v[2] = 0, v[3] = a->ints[1];
            extra[n_extra] = wf_attr_ints("pads", v, 4);
        } else {
            if (a->n_ints != 1) return fail(nc, WF_INVALID_ARGUMENT, "1-D %s must have 1 value, not %zu", names[k], a->n_ints);
            bool zero_h = !strcmp(names[k], "output_padding");
            v[0] = zero_h ? 0 : 1, v[1] = a->ints[0];
            extra[n_extra] = wf_attr_ints(names[k], v, 2);
        }
        n_extra++;
    }
    wf_node *node;
    WF__TRY(emit(nc, op, in, nc->n_in < 3 ? nc->n_in : 3, NULL, extra, n_extra, &node));
    wf_output y;
    WF__TRY(unsqueeze_h(nc, wf_out(node, 0), "Squeeze", &y));
    nc->out[0] = y;
    return NULL;
}

/* Conv, ConvTranspose and the pools map onto weft's 2-D ops (1-D through a unit height). */
static wf_status *map_2d(onnx_node *nc, const char *op, int spatial_input)
{
    int64_t dims[WF_MAX_RANK];
    int r = nc->in[spatial_input].node ? wf_output_shape(nc->in[spatial_input], dims) : -1;
    if (r == 3) return map_1d_as_2d(nc, op, spatial_input == 1);
    if (r != 4)
        return fail(nc, WF_UNIMPLEMENTED, "only 1-D and 2-D %s are supported (input %d has rank %d)", nc->n->op_type,
                    spatial_input, r);
    return map_renamed(nc, op);
}
static wf_status *map_conv(onnx_node *nc) { return map_2d(nc, "Conv2D", 1); }
static wf_status *map_convt(onnx_node *nc) { return map_2d(nc, "ConvTranspose2D", 1); }
static wf_status *map_maxpool(onnx_node *nc)
{
    if (nc->n_out > 1 && nc->n->output[1] && *nc->n->output[1])
        return fail(nc, WF_UNIMPLEMENTED, "MaxPool's Indices output is not supported");
    return map_2d(nc, "MaxPool2D", 0);
}
static wf_status *map_avgpool(onnx_node *nc) { return map_2d(nc, "AvgPool2D", 0); }

static wf_status *map_constant(onnx_node *nc)
{
    const Onnx__AttributeProto *a;
    wf_tensor *t = NULL;
    if ((a = attr(nc, "value")) && a->t) {
        char what[300];
        snprintf(what, sizeof what, "value of Constant '%s'", nc->n->name ? nc->n->name : "");
        WF__TRY(wf__onnx_tensor(a->t, nc->c->dir, nc->c->path, what, &t));
    } else if ((a = attr(nc, "value_float"))) {
        float f = a->f;
        WF__TRY(wf_tensor_new(WF_F32, 0, NULL, &f, &t));
    } else if ((a = attr(nc, "value_int"))) {
        WF__TRY(wf_tensor_new(WF_I64, 0, NULL, &a->i, &t));
    } else if ((a = attr(nc, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        WF__TRY(wf_tensor_new(WF_F32, 1, &n, a->floats, &t));
    } else if ((a = attr(nc, "value_ints"))) {
        int64_t n = (int64_t)a->n_ints;
        WF__TRY(wf_tensor_new(WF_I64, 1, &n, a->ints, &t));
    } else {
        return fail(nc, WF_UNIMPLEMENTED, "only tensor, float(s) and int(s) Constants are supported");
    }
    wf_output o;
    WF__TRY(const_tensor(nc, t, &o));
    nc->out[0] = o;
    return NULL;
}

static wf_status *map_castlike(onnx_node *nc)
{
    if (!has_in(nc, 1)) return fail(nc, WF_INVALID_ARGUMENT, "CastLike needs 2 inputs");
    wf_attr to = wf_attr_dtype("to", wf_output_dtype(nc->in[1]));
    static const char *const skip[] = {"saturate", "round_mode", NULL};
    return emit(nc, "Cast", nc->in, 1, skip, &to, 1, NULL);
}

/* ONNX Pow allows an exponent of another type; weft's needs the base's. */
static wf_status *map_pow(onnx_node *nc)
{
    if (nc->n_in == 2 && nc->in[0].node && nc->in[1].node && wf_output_dtype(nc->in[0]) != wf_output_dtype(nc->in[1])) {
        wf_attr to = wf_attr_dtype("to", wf_output_dtype(nc->in[0]));
        wf_node *cast;
        WF__TRY(add(nc, "Cast", &nc->in[1], 1, &to, 1, &cast));
        wf_output in[2] = {nc->in[0], wf_out(cast, 0)};
        return emit(nc, "Pow", in, 2, NULL, NULL, 0, NULL);
    }
    return emit_same(nc);
}

/* An INTS attribute that later opsets take as an input: appended as a Const input. */
static wf_status *attr_to_input(onnx_node *nc, const char *name, int index, wf_output *in, int *n_in)
{
    const Onnx__AttributeProto *a = attr(nc, name);
    while (*n_in < index) in[(*n_in)++] = (wf_output){NULL, 0};
    if (!a) return NULL;
    WF__TRY(const_i64(nc, a->ints, (int)a->n_ints, &in[index]));
    if (*n_in <= index) *n_in = index + 1;
    return NULL;
}

static wf_status *map_reshape(onnx_node *nc)
{
    if (nc->c->opset >= 5) return emit_same(nc);
    wf_output in[2] = {nc->in[0]};
    int n = 1;
    WF__TRY(attr_to_input(nc, "shape", 1, in, &n));
    static const char *const skip[] = {"shape", "consumed_inputs", NULL};
    return emit(nc, "Reshape", in, n, skip, NULL, 0, NULL);
}

static wf_status *map_slice(onnx_node *nc)
{
    if (nc->c->opset >= 10) return emit_same(nc);
    wf_output in[4] = {nc->in[0]};
    int n = 1;
    WF__TRY(attr_to_input(nc, "starts", 1, in, &n));
    WF__TRY(attr_to_input(nc, "ends", 2, in, &n));
    WF__TRY(attr_to_input(nc, "axes", 3, in, &n));
    static const char *const skip[] = {"starts", "ends", "axes", NULL};
    return emit(nc, "Slice", in, n, skip, NULL, 0, NULL);
}

static wf_status *map_squeeze_like(onnx_node *nc)
{
    if (nc->c->opset >= 13) return emit_same(nc);
    wf_output in[2] = {nc->in[0]};
    int n = 1;
    WF__TRY(attr_to_input(nc, "axes", 1, in, &n));
    static const char *const skip[] = {"axes", NULL};
    return emit(nc, nc->n->op_type, in, n, skip, NULL, 0, NULL);
}

static wf_status *map_split(onnx_node *nc)
{
    wf_output in[2] = {nc->in[0], nc->n_in > 1 ? nc->in[1] : (wf_output){NULL, 0}};
    int n = nc->n_in > 1 ? 2 : 1;
    if (nc->c->opset < 13) WF__TRY(attr_to_input(nc, "split", 1, in, &n));
    wf_attr extra[1];
    int n_extra = 0;
    if (!attr(nc, "num_outputs")) extra[n_extra++] = wf_attr_int("num_outputs", nc->n_out);
    static const char *const skip[] = {"split", NULL};
    return emit(nc, "Split", in, n, nc->c->opset < 13 ? skip : NULL, extra, n_extra, NULL);
}

static wf_status *map_pad(onnx_node *nc)
{
    if (nc->c->opset >= 11) return emit_same(nc);
    wf_output in[3] = {nc->in[0]};
    int n = 1;
    WF__TRY(attr_to_input(nc, "pads", 1, in, &n));
    const Onnx__AttributeProto *v = attr(nc, "value");
    if (v) {
        WF__TRY(const_scalar(nc, wf_output_dtype(nc->in[0]), v->f, &in[2]));
        n = 3;
    }
    static const char *const skip[] = {"pads", "value", NULL};
    return emit(nc, "Pad", in, n, skip, NULL, 0, NULL);
}

static wf_status *map_clip(onnx_node *nc)
{
    if (nc->c->opset >= 11) return emit_same(nc);
    wf_output in[3] = {nc->in[0], {NULL, 0}, {NULL, 0}};
    int n = 1;
    wf_dtype dt = wf_output_dtype(nc->in[0]);
    const Onnx__AttributeProto *lo = attr(nc, "min"), *hi = attr(nc, "max");
    if (lo) {
        WF__TRY(const_scalar(nc, dt, lo->f, &in[1]));
        n = 2;
    }
    if (hi) {
        WF__TRY(const_scalar(nc, dt, hi->f, &in[2]));
        n = 3;
    }
    static const char *const skip[] = {"min", "max", NULL};
    return emit(nc, "Clip", in, n, skip, NULL, 0, NULL);
}

/* Before opset 13 Softmax, LogSoftmax and Hardmax coerce the input to 2-D at `axis` (default 1) and
 * normalise over the whole trailing block. */
static wf_status *map_softmax_like(onnx_node *nc)
{
    if (nc->c->opset >= 13) return emit_same(nc);
    const Onnx__AttributeProto *a = attr(nc, "axis");
    int64_t axis = a ? a->i : 1;
    int64_t dims[WF_MAX_RANK];
    int r = wf_output_shape(nc->in[0], dims);
    if (r >= 0 && axis < 0) axis += r;
    wf_attr last = wf_attr_int("axis", -1);
    static const char *const skip[] = {"axis", NULL};
    if (r >= 0 && axis == r - 1) return emit(nc, nc->n->op_type, nc->in, 1, skip, &last, 1, NULL);
    wf_attr fa = wf_attr_int("axis", axis);
    wf_node *flat, *sm, *shape;
    WF__TRY(add(nc, "Flatten", nc->in, 1, &fa, 1, &flat));
    WF__TRY(add(nc, nc->n->op_type, &(wf_output){flat, 0}, 1, &last, 1, &sm));
    WF__TRY(add(nc, "Shape", nc->in, 1, NULL, 0, &shape));
    wf_output rin[2] = {wf_out(sm, 0), wf_out(shape, 0)};
    wf_node *rs;
    WF__TRY(add(nc, "Reshape", rin, 2, NULL, 0, &rs));
    nc->out[0] = wf_out(rs, 0);
    return NULL;
}

/* DFT's axis was an attribute defaulting to 1 before opset 20 (an input defaulting to -2 since). */
static wf_status *map_dft(onnx_node *nc)
{
    if (nc->c->opset < 20 && !attr(nc, "axis") && wf__op_lookup("DFT")) {
        const wf__op_def *def = wf__op_lookup("DFT");
        bool has_axis_attr = false;
        for (int k = 0; k < WF__MAX_ATTRS && def->attrs[k].name; k++) has_axis_attr |= !strcmp(def->attrs[k].name, "axis");
        if (has_axis_attr) {
            wf_attr axis = wf_attr_int("axis", 1);
            return emit(nc, "DFT", nc->in, nc->n_in, NULL, &axis, 1, NULL);
        }
    }
    return emit_same(nc);
}

static const struct {
    const char *op;
    onnx_map_fn fn;
} g_handlers[] = {
    {"DFT", map_dft},
    {"Constant", map_constant},       {"CastLike", map_castlike},       {"Pow", map_pow},
    {"Conv", map_conv},               {"ConvTranspose", map_convt},     {"MaxPool", map_maxpool},
    {"AveragePool", map_avgpool},     {"GlobalAveragePool", map_gap},   {"GreaterOrEqual", map_greater_equal},
    {"LessOrEqual", map_less_equal},  {"Reshape", map_reshape},         {"Slice", map_slice},
    {"Squeeze", map_squeeze_like},    {"Unsqueeze", map_squeeze_like},  {"Split", map_split},
    {"Pad", map_pad},                 {"Clip", map_clip},               {"Softmax", map_softmax_like},
    {"LogSoftmax", map_softmax_like}, {"Hardmax", map_softmax_like},
};

onnx_map_fn wf__onnx_handler(const char *op_type)
{
    for (size_t i = 0; i < sizeof g_handlers / sizeof g_handlers[0]; i++)
        if (!strcmp(g_handlers[i].op, op_type)) return g_handlers[i].fn;
    return NULL;
}

/* weft-internal ops that are not ONNX ops even where the names would match */
static bool weft_only(const char *op)
{
    return !strcmp(op, "Placeholder") || !strcmp(op, "PlaceholderWithDefault") || !strcmp(op, "Const") ||
           !strcmp(op, "Fill") || !strcmp(op, "BiasAdd") || !strcmp(op, "Maximum") || !strcmp(op, "Minimum") ||
           !strcmp(op, "Conv2D") || !strcmp(op, "ConvTranspose2D") || !strcmp(op, "MaxPool2D") ||
           !strcmp(op, "AvgPool2D") || !strcmp(op, "GlobalAvgPool");
}

bool wf__onnx_supported(const char *op_type)
{
    if (wf__onnx_handler(op_type)) {
        if (!strcmp(op_type, "Hardmax") || !strcmp(op_type, "DFT")) return wf__op_lookup(op_type) != NULL;
        return true;
    }
    return !weft_only(op_type) && wf__op_lookup(op_type) != NULL;
}

wf_status *wf__onnx_map_node(onnx_node *nc)
{
    onnx_map_fn fn = wf__onnx_handler(nc->n->op_type);
    /* every handler but Constant's reads input 0 (and the 2-D ops' weight input 1) before weft's own
     * validation of the node could say it is missing */
    if (fn && fn != map_constant && !has_in(nc, 0)) return fail(nc, WF_INVALID_ARGUMENT, "input 0 is missing");
    if ((fn == map_conv || fn == map_convt) && !has_in(nc, 1)) return fail(nc, WF_INVALID_ARGUMENT, "input 1 (the weights) is missing");
    return fn ? fn(nc) : emit_same(nc);
}
