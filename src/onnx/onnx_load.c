/*
 * ONNX model import: parse the file, turn initializers into Const nodes (PlaceholderWithDefault for
 * those that are also graph inputs), graph inputs into Placeholders, and map each node onto weft ops
 * in order. Any failure removes every node the import added, so the caller's graph is unchanged.
 */
#include <stdio.h>
#include <stdlib.h>

#include "onnx/onnx_internal.h"

struct wf_onnx_model {
    int n_in, n_out;
    wf_onnx_value *in, *out;
    wf_onnx_meta meta;
    char **owned; /* every string the records above point to */
    int n_owned, cap_owned;
};

/* A copy of s ("" for NULL) that m owns; NULL when out of memory. */
static const char *keep(wf_onnx_model *m, const char *s)
{
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 16;
        char **v = wf__realloc(m->owned, (size_t)m->cap_owned * sizeof *v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        m->owned = v;
        m->cap_owned = cap;
    }
    char *c = wf__strdup(s ? s : "");
    if (c) m->owned[m->n_owned++] = c;
    return c;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static onnx_value *val_slot(wf__onnx_ctx *c, const char *name)
{
    size_t mask = c->vals_cap - 1;
    for (size_t i = hash_str(name) & mask;; i = (i + 1) & mask)
        if (!c->vals[i].name || !strcmp(c->vals[i].name, name)) return &c->vals[i];
}

static wf_status *val_set(wf__onnx_ctx *c, const char *name, wf_output out)
{
    if ((c->vals_n + 1) * 2 > c->vals_cap) {
        size_t cap = c->vals_cap ? c->vals_cap * 2 : 256;
        onnx_value *old = c->vals;
        size_t old_cap = c->vals_cap;
        c->vals = wf__calloc(cap, sizeof *c->vals);
        if (!c->vals) {
            c->vals = old;
            return wf__oom("the ONNX value table", cap * sizeof *c->vals);
        }
        c->vals_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].name) *val_slot(c, old[i].name) = old[i];
        wf__free(old);
    }
    onnx_value *v = val_slot(c, name);
    if (!v->name) {
        if (!(v->name = wf__strdup(name))) return wf__oom("the ONNX value table", strlen(name));
        c->vals_n++;
    }
    v->out = out;
    return NULL;
}

static const onnx_value *val_get(wf__onnx_ctx *c, const char *name)
{
    if (!c->vals_cap) return NULL;
    onnx_value *v = val_slot(c, name);
    return v->name ? v : NULL;
}

static void ctx_free(wf__onnx_ctx *c)
{
    for (size_t i = 0; i < c->vals_cap; i++) wf__free(c->vals[i].name);
    wf__free(c->vals);
    wf__free(c->dir);
}

/* A weft node name from an ONNX name: ':' is not allowed in weft names; clashes get a suffix. */
static void unique_name(wf_graph *g, const char *want, const char *fallback, char *out, size_t n)
{
    char base[200];
    snprintf(base, sizeof base, "%s", want && *want ? want : fallback);
    for (char *p = base; *p; p++)
        if (*p == ':') *p = '_';
    snprintf(out, n, "%s", base);
    for (int k = 1; wf__graph_lookup(g, out); k++) snprintf(out, n, "%s_%d", base, k);
}

void wf_onnx_model_free(wf_onnx_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) wf__free(m->owned[i]);
    wf__free(m->owned);
    wf__free((void *)m->meta.prop_keys);
    wf__free((void *)m->meta.prop_values);
    wf__free(m->in);
    wf__free(m->out);
    wf__free(m);
}

int wf_onnx_num_inputs(const wf_onnx_model *m) { return m ? m->n_in : 0; }
int wf_onnx_num_outputs(const wf_onnx_model *m) { return m ? m->n_out : 0; }
const wf_onnx_value *wf_onnx_input(const wf_onnx_model *m, int i) { return i >= 0 && i < m->n_in ? &m->in[i] : NULL; }
const wf_onnx_value *wf_onnx_output(const wf_onnx_model *m, int i) { return i >= 0 && i < m->n_out ? &m->out[i] : NULL; }
const wf_onnx_meta *wf_onnx_model_meta(const wf_onnx_model *m) { return m ? &m->meta : NULL; }

/* What the file says of a value: dtype, rank and dims into v (weft's view, which the caller may
 * replace by inference) and file_rank, dim_names, elem_type (the file's own). */
static wf_status *value_info(wf_onnx_model *m, const Onnx__ValueInfoProto *vi, wf_onnx_value *v)
{
    v->dtype = WF_DTYPE_INVALID;
    v->rank = v->file_rank = -1;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return NULL;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type) {
        v->dtype = wf__onnx_dtype(tt->elem_type);
        v->elem_type = tt->elem_type;
    }
    if (tt->shape && tt->shape->n_dim <= WF_MAX_RANK) {
        v->rank = v->file_rank = (int)tt->shape->n_dim;
        for (size_t d = 0; d < tt->shape->n_dim; d++) {
            const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
            v->dims[d] = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0
                             ? dim->dim_value : -1;
            if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
                *dim->dim_param && !(v->dim_names[d] = keep(m, dim->dim_param)))
                return wf__oom("a dim's name", strlen(dim->dim_param));
        }
    }
    return NULL;
}

static wf_status *read_meta(wf_onnx_model *m, const Onnx__ModelProto *mp)
{
    wf_onnx_meta *t = &m->meta;
    const Onnx__GraphProto *gp = mp->graph;
    t->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    t->model_version = mp->has_model_version ? mp->model_version : 0;
    if (!(t->producer_name = keep(m, mp->producer_name)) || !(t->producer_version = keep(m, mp->producer_version)) ||
        !(t->domain = keep(m, mp->domain)) || !(t->doc_string = keep(m, mp->doc_string)) ||
        !(t->graph_name = keep(m, gp ? gp->name : NULL)) || !(t->graph_doc_string = keep(m, gp ? gp->doc_string : NULL)))
        return wf__oom("the model's description", 64);
    size_t n = mp->n_metadata_props;
    const char **k = wf__calloc(n ? n : 1, sizeof *k), **v = wf__calloc(n ? n : 1, sizeof *v);
    t->prop_keys = k;
    t->prop_values = v;
    if (!k || !v) return wf__oom("the model's metadata", n * 2 * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        const Onnx__StringStringEntryProto *e = mp->metadata_props[i];
        if (!(k[i] = keep(m, e ? e->key : NULL)) || !(v[i] = keep(m, e ? e->value : NULL)))
            return wf__oom("the model's metadata", 64);
        t->n_props = (int)i + 1;
    }
    return NULL;
}

static bool is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

static bool same_domain(const char *a, const char *b)
{
    bool da = is_default_domain(a), db = is_default_domain(b);
    return da || db ? da == db : !strcmp(a, b);
}

/* The opset version the model imports for a domain other than the default one; false when its
 * opset_import does not list the domain. */
static bool domain_opset(const Onnx__ModelProto *mp, const char *domain, int64_t *version)
{
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        if (!is_default_domain(o->domain) && same_domain(o->domain, domain)) {
            *version = o->has_version ? o->version : 1;
            return true;
        }
    }
    return false;
}

/* "opset 3", or that the model does not import the domain: the opset is what decides an op's meaning. */
static void append_domain_opset(wf__str *o, const Onnx__ModelProto *mp, const char *domain)
{
    int64_t v;
    if (domain_opset(mp, domain, &v)) wf__str_appendf(o, "opset %lld", (long long)v);
    else wf__str_append(o, "not in the model's opset_import");
}

/* Every op of the graph that weft cannot map, all at once, so a user sees the whole list, each op
 * once; the first one's node is named with its domain and the opset the model imports for it. */
static wf_status *check_ops(wf__onnx_ctx *c, const Onnx__ModelProto *mp, const Onnx__GraphProto *gp)
{
    wf__str list = {0};
    const Onnx__NodeProto *first = NULL;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n->op_type || !*n->op_type) {
            wf__str_free(&list);
            return wf__status(WF_INVALID_ARGUMENT, "%s: node %zu ('%s') has no op_type", c->path, i,
                              n->name ? n->name : "");
        }
        bool ok = is_default_domain(n->domain) && wf__onnx_supported(n->op_type);
        if (ok) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            const Onnx__NodeProto *m = gp->node[j];
            seen = m->op_type && !strcmp(m->op_type, n->op_type) && same_domain(m->domain, n->domain);
        }
        if (!first) first = n;
        if (!seen)
            wf__str_appendf(&list, "%s%s%s%s", list.len ? ", " : "", is_default_domain(n->domain) ? "" : n->domain,
                            is_default_domain(n->domain) ? "" : ".", n->op_type);
    }
    if (!first) return NULL;
    wf__str where = {0};
    if (is_default_domain(first->domain)) wf__str_appendf(&where, "domain 'ai.onnx', opset %lld", (long long)c->opset);
    else {
        wf__str_appendf(&where, "domain '%s', ", first->domain);
        append_domain_opset(&where, mp, first->domain);
    }
    wf_status *s = list.failed || where.failed
                       ? wf__oom("the list of unsupported ops", list.len + where.len)
                       : wf__status(WF_UNIMPLEMENTED,
                                    "%s: node '%s' uses op %s%s%s (%s), which weft does not support; "
                                    "unsupported ops in this model: %s",
                                    c->path, first->name && *first->name ? first->name : "(unnamed)",
                                    is_default_domain(first->domain) ? "" : first->domain,
                                    is_default_domain(first->domain) ? "" : ".", first->op_type,
                                    where.p ? where.p : "", list.p ? list.p : "");
    wf__str_free(&list);
    wf__str_free(&where);
    return s;
}

static wf_status *import_graph(wf__onnx_ctx *c, const Onnx__ModelProto *mp, wf_onnx_model *m)
{
    const Onnx__GraphProto *gp = mp->graph;
    WF__TRY(check_ops(c, mp, gp));
    char name[256], what[300];
    /* initializers */
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t->name || !*t->name)
            return wf__status(WF_INVALID_ARGUMENT, "%s: initializer %zu has no name", c->path, i);
        snprintf(what, sizeof what, "initializer '%s'", t->name);
        wf_tensor *v;
        WF__TRY(wf__onnx_tensor(t, c->dir, c->path, what, &v));
        unique_name(c->g, t->name, "initializer", name, sizeof name);
        wf_output o;
        wf_status *s = wf_const(c->g, name, v, &o);
        wf_tensor_free(v);
        if (s) return wf__status_wrap(s, "%s", c->path);
        WF__TRY(val_set(c, t->name, o));
    }
    /* graph inputs */
    m->in = wf__calloc(gp->n_input ? gp->n_input : 1, sizeof *m->in);
    if (!m->in) return wf__oom("the model's inputs", gp->n_input * sizeof *m->in);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        wf_onnx_value *v = &m->in[m->n_in];
        if (!vi->name || !*vi->name) return wf__status(WF_INVALID_ARGUMENT, "%s: graph input %zu has no name", c->path, i);
        if (!(v->name = keep(m, vi->name))) return wf__oom("the model's inputs", strlen(vi->name));
        m->n_in++;
        WF__TRY(value_info(m, vi, v));
        const onnx_value *init = val_get(c, vi->name);
        unique_name(c->g, vi->name, "input", name, sizeof name);
        if (init) {
            /* An input that is also an initializer: the initializer is its default, feeding is optional. */
            v->has_default = 1;
            wf_node *pn;
            WF__TRY(wf_op(c->g, "PlaceholderWithDefault", name, &init->out, 1, NULL, 0, &pn));
            v->output = wf_out(pn, 0);
            v->dtype = wf_output_dtype(v->output);
            v->rank = wf_output_shape(v->output, v->dims);
        } else {
            if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
                return wf__status(WF_UNIMPLEMENTED, "%s: graph input '%s' is not a tensor (sequences, maps and "
                                  "optionals are not supported)", c->path, vi->name);
            if (!v->dtype)
                return wf__status(WF_UNIMPLEMENTED, "%s: graph input '%s' has element type %s, which weft does not support",
                                  c->path, vi->name,
                                  wf__onnx_dtype_name(vi->type->tensor_type ? vi->type->tensor_type->elem_type : 0));
            WF__TRY(wf_placeholder(c->g, name, v->dtype, v->rank, v->rank >= 0 ? v->dims : NULL, &v->output));
        }
        WF__TRY(val_set(c, vi->name, v->output));
    }
    /* nodes, in the file's (topological) order */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n->op_type || !*n->op_type)
            return wf__status(WF_INVALID_ARGUMENT, "%s: node %zu ('%s') has no op_type", c->path, i,
                              n->name ? n->name : "");
        onnx_node nc = {.c = c, .n = n, .n_in = (int)n->n_input, .n_out = (int)n->n_output};
        wf_output in_buf[32] = {{0}}, out_buf[32] = {{0}};
        nc.in = n->n_input <= 32 ? in_buf : wf__calloc(n->n_input, sizeof *nc.in);
        nc.out = n->n_output <= 32 ? out_buf : wf__calloc(n->n_output, sizeof *nc.out);
        wf_status *s = NULL;
        if (!nc.in || !nc.out) s = wf__oom("a node's inputs", (n->n_input + n->n_output) * sizeof(wf_output));
        for (int k = 0; !s && k < nc.n_in; k++) {
            const char *vn = n->input[k];
            nc.in[k] = (wf_output){NULL, 0};
            if (!vn || !*vn) continue; /* omitted optional input */
            const onnx_value *v = val_get(c, vn);
            if (!v)
                s = wf__status(WF_INVALID_ARGUMENT, "%s: node '%s' (%s): input '%s' is not produced by any earlier "
                               "node, initializer or graph input", c->path, n->name ? n->name : "", n->op_type, vn);
            else
                nc.in[k] = v->out;
        }
        for (int k = 0; k < nc.n_out && nc.out; k++) nc.out[k] = (wf_output){NULL, 0};
        if (!s) {
            unique_name(c->g, n->name, n->n_output && n->output[0] && *n->output[0] ? n->output[0] : n->op_type,
                        nc.name, sizeof nc.name);
            s = wf__onnx_map_node(&nc);
            if (s) s = wf__status_wrap(s, "%s: opset %lld", c->path, (long long)c->opset);
        }
        for (int k = 0; !s && k < nc.n_out; k++) {
            const char *vn = n->output[k];
            if (!vn || !*vn) continue;
            if (!nc.out[k].node)
                s = wf__status(WF_UNIMPLEMENTED, "%s: node '%s' (%s): output %d ('%s') is not supported by weft",
                               c->path, n->name ? n->name : "", n->op_type, k, vn);
            else
                s = val_set(c, vn, nc.out[k]);
        }
        if (nc.in != in_buf) wf__free(nc.in);
        if (nc.out != out_buf) wf__free(nc.out);
        if (s) return s;
    }
    /* graph outputs */
    m->out = wf__calloc(gp->n_output ? gp->n_output : 1, sizeof *m->out);
    if (!m->out) return wf__oom("the model's outputs", gp->n_output * sizeof *m->out);
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        const onnx_value *v = vi->name ? val_get(c, vi->name) : NULL;
        if (!v)
            return wf__status(WF_INVALID_ARGUMENT, "%s: graph output '%s' is not produced by any node", c->path,
                              vi->name ? vi->name : "");
        wf_onnx_value *o = &m->out[m->n_out];
        if (!(o->name = keep(m, vi->name))) return wf__oom("the model's outputs", strlen(vi->name));
        m->n_out++;
        WF__TRY(value_info(m, vi, o)); /* the file's names and type; dtype and shape: weft's, next */
        o->output = v->out;
        o->dtype = wf_output_dtype(v->out);
        o->rank = wf_output_shape(v->out, o->dims);
    }
    return NULL;
}

static wf_status *parse_model(const char *path, Onnx__ModelProto **out)
{
    uint8_t *buf;
    size_t len;
    WF__TRY(wf__read_file(path, &buf, &len));
    if (len == 0) {
        wf__free(buf);
        return wf__status(WF_INVALID_ARGUMENT, "%s: empty file, not an ONNX model", path);
    }
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&wf__onnx_pb_alloc, len, buf);
    wf__free(buf);
    if (!mp) return wf__status(WF_INVALID_ARGUMENT, "%s: not a valid ONNX model (truncated or corrupt protobuf)", path);
    if (!mp->graph) {
        onnx__model_proto__free_unpacked(mp, &wf__onnx_pb_alloc);
        return wf__status(WF_INVALID_ARGUMENT, "%s: ONNX model has no graph", path);
    }
    if (!mp->has_ir_version || mp->ir_version < 3) {
        long long v = mp->has_ir_version ? (long long)mp->ir_version : 0;
        onnx__model_proto__free_unpacked(mp, &wf__onnx_pb_alloc);
        return wf__status(WF_UNIMPLEMENTED, "%s: ONNX IR version %lld is not supported (3 or later is)", path, v);
    }
    *out = mp;
    return NULL;
}

static int64_t default_opset(const Onnx__ModelProto *mp)
{
    for (size_t i = 0; i < mp->n_opset_import; i++)
        if (is_default_domain(mp->opset_import[i]->domain) && mp->opset_import[i]->has_version)
            return mp->opset_import[i]->version;
    return 1;
}

wf_status *wf_onnx_load(const char *path, wf_graph *g, wf_onnx_model **out)
{
    if (!path || !g || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_onnx_load: NULL path, graph or out");
    Onnx__ModelProto *mp;
    WF__TRY(parse_model(path, &mp));
    wf__onnx_ctx c = {.g = g, .path = path};
    wf_onnx_model *m = wf__calloc(1, sizeof *m);
    const char *slash = strrchr(path, '/');
    c.dir = slash ? wf__strndup(path, (size_t)(slash - path)) : wf__strdup(".");
    c.opset = default_opset(mp);
    int first_node = g->n;
    wf_status *s = NULL;
    if (!m || !c.dir) s = wf__oom("an ONNX import", sizeof *m);
    else if (c.opset < 7)
        s = wf__status(WF_UNIMPLEMENTED, "%s: default-domain opset %lld is not supported (7 or later is)", path,
                       (long long)c.opset);
    else
        s = import_graph(&c, mp, m);
    if (!s) s = read_meta(m, mp);
    ctx_free(&c);
    onnx__model_proto__free_unpacked(mp, &wf__onnx_pb_alloc);
    if (s) {
        wf_onnx_model_free(m);
        wf__graph_truncate(g, first_node);
        /* every failure names the file (most messages begin with it; an allocation's does not) */
        return strstr(wf_status_message(s), path) ? s : wf__status_wrap(s, "%s", path);
    }
    *out = m;
    return NULL;
}

/* ---- inspect ------------------------------------------------------------------------------------- */

static void print_value(wf__str *o, const Onnx__ValueInfoProto *vi)
{
    wf__str_appendf(o, "  %s: ", vi->name ? vi->name : "");
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
        wf__str_append(o, "(not a tensor)\n");
        return;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    wf__str_appendf(o, "%s", wf__onnx_dtype_name(tt->has_elem_type ? tt->elem_type : 0));
    if (!tt->shape) {
        wf__str_append(o, " [?...]\n");
        return;
    }
    wf__str_append(o, " [");
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            wf__str_appendf(o, "%s%lld", d ? "," : "", (long long)dim->dim_value);
        else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            wf__str_appendf(o, "%s%s", d ? "," : "", dim->dim_param);
        else
            wf__str_appendf(o, "%s?", d ? "," : "");
    }
    wf__str_append(o, "]\n");
}

/* One line of the op histogram: an op type of one domain (NULL: the default one) and its count. */
typedef struct op_count {
    const char *domain, *op;
    int n;
} op_count;

static int cmp_count(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    if (y->n != x->n) return y->n - x->n;
    int c = strcmp(x->op, y->op);
    return c ? c : strcmp(x->domain ? x->domain : "", y->domain ? y->domain : "");
}

wf_status *wf_onnx_inspect(const char *path, char **text)
{
    if (!path || !text) return wf__status(WF_INVALID_ARGUMENT, "wf_onnx_inspect: NULL path or text");
    Onnx__ModelProto *mp;
    WF__TRY(parse_model(path, &mp));
    const Onnx__GraphProto *gp = mp->graph;
    wf__str o = {0};
    wf__str_appendf(&o, "model: %s\nIR version: %lld\nproducer: %s %s\nopsets:", path, (long long)mp->ir_version,
                    mp->producer_name ? mp->producer_name : "", mp->producer_version ? mp->producer_version : "");
    for (size_t i = 0; i < mp->n_opset_import; i++)
        wf__str_appendf(&o, " %s=%lld", mp->opset_import[i]->domain && *mp->opset_import[i]->domain
                                            ? mp->opset_import[i]->domain : "ai.onnx",
                        (long long)mp->opset_import[i]->version);
    wf__str_append(&o, "\ninputs:\n");
    for (size_t i = 0; i < gp->n_input; i++) {
        bool init = false;
        for (size_t j = 0; j < gp->n_initializer && !init; j++)
            init = gp->input[i]->name && gp->initializer[j]->name && !strcmp(gp->input[i]->name, gp->initializer[j]->name);
        if (!init) print_value(&o, gp->input[i]);
    }
    wf__str_append(&o, "outputs:\n");
    for (size_t i = 0; i < gp->n_output; i++) print_value(&o, gp->output[i]);
    /* parameters */
    /* A lying file may declare dims whose products or sums overflow: the totals saturate at INT64_MAX. */
    int64_t params = 0, bytes = 0;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        int64_t n = 1, b;
        for (size_t d = 0; d < t->n_dims && n; d++)
            if (wf__mul_overflow_i64(n, t->dims[d] > 0 ? t->dims[d] : 0, &n)) n = INT64_MAX;
        wf_dtype dt = wf__onnx_dtype(t->data_type);
        if (wf__mul_overflow_i64(n, dt ? (int64_t)wf_dtype_size(dt) : 0, &b)) b = INT64_MAX;
        if (wf__add_overflow_i64(params, n, &params)) params = INT64_MAX;
        if (wf__add_overflow_i64(bytes, b, &bytes)) bytes = INT64_MAX;
    }
    wf__str_appendf(&o, "parameters: %lld in %zu initializers, %lld bytes (%.2f MB)\n", (long long)params,
                    gp->n_initializer, (long long)bytes, (double)bytes / 1e6);
    /* op histogram: an op of another domain is its own line even when its name is an ONNX op's */
    op_count *h = wf__calloc(gp->n_node ? gp->n_node : 1, sizeof *h);
    int nh = 0;
    if (!h) o.failed = true;
    for (size_t i = 0; h && i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        const char *op = n->op_type ? n->op_type : "?", *dom = is_default_domain(n->domain) ? NULL : n->domain;
        int k;
        for (k = 0; k < nh && (strcmp(h[k].op, op) || !same_domain(h[k].domain, dom)); k++) {}
        if (k == nh) {
            h[nh].op = op;
            h[nh++].domain = dom;
        }
        h[k].n++;
    }
    if (h) qsort(h, (size_t)nh, sizeof *h, cmp_count);
    wf__str_appendf(&o, "nodes: %zu\nops:\n", gp->n_node);
    char label[512];
    for (int k = 0; k < nh; k++) {
        snprintf(label, sizeof label, "%s%s%s", h[k].domain ? h[k].domain : "", h[k].domain ? "." : "", h[k].op);
        wf__str_appendf(&o, "  %-28s %d\n", label, h[k].n);
    }
    /* each unsupported op once; one of another domain with the opset the model imports for it */
    wf__str_append(&o, "unsupported ops:");
    int bad = 0;
    for (int k = 0; k < nh; k++) {
        if (!h[k].domain) {
            if (!wf__onnx_supported(h[k].op)) wf__str_appendf(&o, "%s %s", bad++ ? "," : "", h[k].op);
            continue;
        }
        wf__str_appendf(&o, "%s %s.%s (domain %s, ", bad++ ? "," : "", h[k].domain, h[k].op, h[k].domain);
        append_domain_opset(&o, mp, h[k].domain);
        wf__str_append(&o, ")");
    }
    wf__str_append(&o, bad ? "\n" : " none\n");
    wf__free(h);
    onnx__model_proto__free_unpacked(mp, &wf__onnx_pb_alloc);
    if (o.failed || !o.p) {
        wf__str_free(&o);
        return wf__oom("the inspect report", 4096);
    }
    *text = o.p;
    return NULL;
}
