/*
 * The Sequential model: Keras-like layers built as ordinary graph nodes over Variables, and compile,
 * which adds the training path, the loss, the accuracy metric and the optimizer step. Training and
 * inference share every node up to the first layer that behaves differently in training (Dropout,
 * BatchNorm); from there the training path has its own nodes over the same variables.
 */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "session_internal.h"
#include "train/optim.h"

#define T(x) WF__TRY(x)

static const char *const kind_names[] = {
    [WF_LAYER_DENSE] = "dense",         [WF_LAYER_CONV2D] = "conv2d",
    [WF_LAYER_MAXPOOL2D] = "max_pooling2d", [WF_LAYER_AVGPOOL2D] = "average_pooling2d",
    [WF_LAYER_FLATTEN] = "flatten",     [WF_LAYER_DROPOUT] = "dropout",
    [WF_LAYER_BATCHNORM] = "batch_normalization", [WF_LAYER_LAYERNORM] = "layer_normalization",
    [WF_LAYER_EMBEDDING] = "embedding", [WF_LAYER_ACTIVATION] = "activation",
    [WF_LAYER_RESHAPE] = "reshape"};
static const char *const kind_titles[] = {
    [WF_LAYER_DENSE] = "Dense",         [WF_LAYER_CONV2D] = "Conv2D",
    [WF_LAYER_MAXPOOL2D] = "MaxPooling2D", [WF_LAYER_AVGPOOL2D] = "AveragePooling2D",
    [WF_LAYER_FLATTEN] = "Flatten",     [WF_LAYER_DROPOUT] = "Dropout",
    [WF_LAYER_BATCHNORM] = "BatchNormalization", [WF_LAYER_LAYERNORM] = "LayerNormalization",
    [WF_LAYER_EMBEDDING] = "Embedding", [WF_LAYER_ACTIVATION] = "Activation",
    [WF_LAYER_RESHAPE] = "Reshape"};

static bool kind_ok(int k) { return k >= WF_LAYER_DENSE && k <= WF_LAYER_RESHAPE; }

void wf_layer_init(wf_layer *l, wf_layer_kind kind)
{
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->use_bias = 1;
    l->kernel[0] = l->kernel[1] = kind == WF_LAYER_CONV2D ? 3 : 2;
    l->strides[0] = l->strides[1] = kind == WF_LAYER_CONV2D ? 1 : 0;
    l->momentum = 0.99;
    l->epsilon = 1e-3;
}

void wf_compile_options_init(wf_compile_options *o)
{
    memset(o, 0, sizeof *o);
    wf_optimizer_options_init(&o->optimizer, WF_OPT_ADAM);
    o->loss = WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
    o->accuracy = 1;
    o->label_dtype = WF_I64;
}

wf_status *wf_model_new(wf_dtype dtype, int rank, const int64_t *input_shape, uint64_t seed, wf_model **out)
{
    if (!out) return wf__status(WF_INVALID_ARGUMENT, "wf_model_new: out is NULL");
    *out = NULL;
    if (rank < 0 || rank + 1 > WF_MAX_RANK || (rank && !input_shape))
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_new: input rank %d must be in [0, %d)", rank, WF_MAX_RANK);
    if (wf_dtype_size(dtype) == 0) return wf__status(WF_INVALID_ARGUMENT, "wf_model_new: unknown input dtype %d", dtype);
    for (int i = 0; i < rank; i++)
        if (input_shape[i] < 1)
            return wf__status(WF_INVALID_ARGUMENT, "wf_model_new: input_shape[%d] is %lld; must be >= 1", i,
                              (long long)input_shape[i]);
    wf_model *m = wf__calloc(1, sizeof *m);
    if (!m) return wf__oom("a model", sizeof *m);
    m->in_dtype = dtype;
    m->in_rank = rank + 1;
    m->in_dims[0] = -1;
    for (int i = 0; i < rank; i++) m->in_dims[i + 1] = input_shape[i];
    m->seed = seed;
    m->policy = wf_global_policy();
    wf_status *s = wf_graph_new(&m->g);
    if (!s) s = wf_placeholder(m->g, "input", dtype, m->in_rank, m->in_dims, &m->input);
    if (s) {
        wf_model_free(m);
        return s;
    }
    m->output = m->input;
    *out = m;
    return NULL;
}

void wf_model_free(wf_model *m)
{
    if (!m) return;
    wf_session_free(m->sess);
    wf_graph_free(m->g);
    wf__free(m->targets);
    wf__free(m->layers);
    wf__free(m);
}

wf_graph *wf_model_graph(wf_model *m) { return m ? m->g : NULL; }
wf_session *wf_model_session(wf_model *m) { return m ? m->sess : NULL; }
wf_output wf_model_input(const wf_model *m) { return m->input; }
wf_output wf_model_output(const wf_model *m) { return m->output; }

/* ---- graph-building helpers ------------------------------------------------------------------------ */

/* "<layer>/<what>" (training-path nodes get a "train/" prefix so both paths can coexist) */
static void nm(char *buf, const model_layer *L, bool training, const char *what)
{
    snprintf(buf, MODEL_NAME_MAX * 2, "%s%s/%s", training ? "train/" : "", L->name, what);
}

static wf_status *op1(wf_graph *g, const char *op, const char *name, const wf_output *in, int n_in,
                      const wf_attr *at, int n_at, wf_output *out)
{
    wf_node *n;
    T(wf_op(g, op, name, in, n_in, at, n_at, &n));
    *out = wf_out(n, 0);
    return NULL;
}

static wf_status *scalar(wf_graph *g, const char *name, wf_dtype dt, double v, wf_output *out)
{
    return wf_const_scalar(g, name, dt, v, out);
}

static wf_status *cast_to(wf_graph *g, const char *name, wf_output x, wf_dtype to, wf_output *y);

/* fit's metrics stay where the step runs: three [1] f32 variables, metrics/loss_sum += loss * n,
 * metrics/accuracy_sum += accuracy * n and metrics/samples += n (n the batch's rows, from the labels'
 * shape), assigned by every step. fit reads them back every steps_per_execution steps instead of
 * fetching the loss after each step, which would be a device-to-host copy and a wait per step. */
static wf_status *build_metric_sums(wf_model *m)
{
    wf_graph *g = m->g;
    wf_output nb, nf;
    wf_attr sa[2] = {wf_attr_int("start", 0), wf_attr_int("end", 1)};
    wf_node *node;
    T(wf_op(g, "Shape", "metrics/batch_rows", &m->labels, 1, sa, 2, &node));
    nb = (wf_output){node, 0};
    T(cast_to(g, "metrics/batch_rows_f", nb, WF_F32, &nf));
    const char *names[3] = {"metrics/loss_sum", "metrics/accuracy_sum", "metrics/samples"};
    wf_output vals[3] = {m->train_loss, m->has_acc ? m->train_acc : m->train_loss, nf};
    int64_t one = 1;
    wf_tensor *z;
    T(wf_tensor_new(WF_F32, 1, &one, NULL, &z));
    wf_status *s = NULL;
    for (int i = 0; i < 3 && !s; i++) {
        char nm[96];
        wf_output v, term, sum, asg;
        s = wf_variable(g, names[i], z, &v);
        if (!s && i < 2) {
            wf_output val;
            snprintf(nm, sizeof nm, "%s/value_f32", names[i]);
            s = cast_to(g, nm, vals[i], WF_F32, &val);
            snprintf(nm, sizeof nm, "%s/term", names[i]);
            if (!s) s = wf_mul(g, nm, val, nf, &term);
        } else {
            term = nf;
        }
        snprintf(nm, sizeof nm, "%s/add", names[i]);
        if (!s) s = wf_add(g, nm, v, term, &sum);
        snprintf(nm, sizeof nm, "%s/assign", names[i]);
        if (!s) s = wf_assign(g, nm, v, sum, &asg);
        if (!s) {
            wf_output *nt = wf__realloc(m->targets, sizeof *nt * (size_t)m->n_targets, sizeof *nt * (size_t)(m->n_targets + 1));
            if (!nt) s = wf__oom("the model's targets", sizeof *nt * (size_t)(m->n_targets + 1));
            else {
                m->targets = nt;
                m->targets[m->n_targets++] = asg;
                m->metric_sum[i] = v;
            }
        }
    }
    wf_tensor_free(z);
    return s;
}

/* ---- dtype policies ---------------------------------------------------------------------------------- */

/* The variables' dtype: the master weights every policy keeps. */
static wf_dtype var_dtype(const wf_model *m) { return m->in_dtype == WF_F64 ? WF_F64 : WF_F32; }

static bool is_lowp(wf_dtype t) { return t == WF_F16 || t == WF_BF16; }

/* The dtype layer L computes in. */
static wf_dtype compute_dtype(const wf_model *m, const model_layer *L)
{
    switch (L->policy) {
    case WF_POLICY_MIXED_FLOAT16: return WF_F16;
    case WF_POLICY_MIXED_BFLOAT16: return WF_BF16;
    default: return var_dtype(m);
    }
}

/* x as dtype `to`: x itself when it already is, else a Cast node `name`. */
static wf_status *cast_to(wf_graph *g, const char *name, wf_output x, wf_dtype to, wf_output *y)
{
    if (wf_output_dtype(x) == to) {
        *y = x;
        return NULL;
    }
    wf_attr a = wf_attr_dtype("to", to);
    return op1(g, "Cast", name, &x, 1, &a, 1, y);
}

static wf_status *activation(wf_graph *g, const model_layer *L, bool training, wf_activation act, wf_output x,
                             wf_output *y)
{
    char n[MODEL_NAME_MAX * 2];
    static const char *const names[] = {[WF_ACT_RELU] = "Relu",     [WF_ACT_SIGMOID] = "Sigmoid",
                                        [WF_ACT_TANH] = "Tanh",     [WF_ACT_SOFTMAX] = "Softmax",
                                        [WF_ACT_ELU] = "Elu",       [WF_ACT_SELU] = "Selu",
                                        [WF_ACT_GELU] = "Gelu",     [WF_ACT_SOFTPLUS] = "Softplus",
                                        [WF_ACT_LEAKY_RELU] = "LeakyRelu"};
    if (act == WF_ACT_NONE) {
        *y = x;
        return NULL;
    }
    if (act == WF_ACT_SOFTMAX && is_lowp(wf_output_dtype(x))) {
        /* Softmax's exponentials and sum run in f32 under a mixed policy, and the probabilities stay
         * f32: they feed the loss or a later layer, which casts them to its own compute dtype */
        nm(n, L, training, "Softmax_input_f32");
        T(cast_to(g, n, x, WF_F32, &x));
    }
    nm(n, L, training, names[act]);
    if (act == WF_ACT_SOFTMAX) return wf_softmax(g, n, x, -1, y);
    if (act == WF_ACT_LEAKY_RELU) {
        wf_attr a = wf_attr_float("alpha", 0.2);
        return op1(g, "LeakyRelu", n, &x, 1, &a, 1, y);
    }
    return op1(g, names[act], n, &x, 1, NULL, 0, y);
}

static bool act_ok(int a) { return a >= WF_ACT_NONE && a <= WF_ACT_LEAKY_RELU; }

/* A new Variable "<layer>/<what>" of shape dims filled by spec (kind 0: dflt). */
static wf_status *make_var(wf_model *m, model_layer *L, const char *what, wf_init spec, wf_init dflt, int rank,
                           const int64_t *dims, wf_output *out)
{
    if (spec.kind == 0) spec = dflt;
    if (spec.seed == 0) spec.seed = L->seed * 131 + (uint64_t)L->n_vars + 1;
    wf_tensor *t;
    T(wf_init_tensor(&spec, var_dtype(m), rank, dims, &t));
    char n[MODEL_NAME_MAX * 2];
    nm(n, L, false, what);
    wf_status *s = wf_variable(m->g, n, t, out);
    if (!s) {
        L->params += wf_tensor_size(t);
        L->vars[L->n_vars++] = *out;
    }
    wf_tensor_free(t);
    return s;
}

static void shape_str(char *buf, size_t cap, int r, const int64_t *d, const char *open, const char *close,
                      const char *unknown)
{
    size_t k = (size_t)snprintf(buf, cap, "%s", open);
    for (int i = 0; i < r && k + 24 < cap; i++) {
        if (i) k += (size_t)snprintf(buf + k, cap - k, ", ");
        k += d[i] < 0 ? (size_t)snprintf(buf + k, cap - k, "%s", unknown)
                      : (size_t)snprintf(buf + k, cap - k, "%lld", (long long)d[i]);
    }
    if (k < cap) snprintf(buf + k, cap - k, "%s", close);
}

static wf_status *bad_shape(const model_layer *L, wf_output x, const char *want)
{
    int64_t d[WF_MAX_RANK];
    int r = wf_output_shape(x, d);
    char buf[200];
    if (r < 0) snprintf(buf, sizeof buf, "of unknown rank");
    else shape_str(buf, sizeof buf, r, d, "[", "]", "N");
    return wf__status(WF_INVALID_ARGUMENT, "layer '%s' (%s): input %s %s; %s", L->name, kind_titles[L->spec.kind],
                      wf_dtype_name(wf_output_dtype(x)), buf, want);
}

static const char *pad_mode(const wf_layer *l) { return l->padding_same ? "SAME_UPPER" : "VALID"; }

/* Variable k of L (named "<layer>/<what>") in L's compute dtype: a Cast "<layer>/Cast_<what>" under a
 * mixed policy, whose gradient brings the update back to the f32 variable as f32. */
static wf_status *wvar(wf_model *m, const model_layer *L, bool training, int k, const char *what, wf_output *out)
{
    char n[MODEL_NAME_MAX * 2], w[64];
    snprintf(w, sizeof w, "Cast_%s", what);
    nm(n, L, training, w);
    return cast_to(m->g, n, L->vars[k], compute_dtype(m, L), out);
}

/* The layer's own graph on x, which build_layer has already cast to the layer's dtype. */
static wf_status *build_core(wf_model *m, model_layer *L, bool training, wf_output x, wf_output counter,
                             wf_output *y, wf_output *pre)
{
    wf_graph *g = m->g;
    const wf_layer *l = &L->spec;
    bool create = !training;
    char n[MODEL_NAME_MAX * 2];
    int64_t d[WF_MAX_RANK];
    int r = wf_output_shape(x, d);
    wf_dtype dt = wf_output_dtype(x);
    bool is_float = dt == WF_F32 || dt == WF_F64 || dt == WF_F16 || dt == WF_BF16;
    *pre = x;
    switch (l->kind) {
    case WF_LAYER_DENSE: {
        if (r < 2 || d[r - 1] < 1 || !is_float) return bad_shape(L, x, "Dense wants float [N, ..., features]");
        if (create) {
            int64_t wd[2] = {d[r - 1], l->units}, bd[1] = {l->units};
            T(make_var(m, L, "kernel", l->kernel_init, (wf_init){.kind = WF_INIT_GLOROT_UNIFORM}, 2, wd, &L->vars[0]));
            if (l->use_bias) T(make_var(m, L, "bias", l->bias_init, (wf_init){.kind = WF_INIT_ZEROS}, 1, bd, &L->vars[1]));
            L->n_trainable = L->n_vars;
        }
        wf_output h, k, b;
        T(wvar(m, L, training, 0, "kernel", &k));
        nm(n, L, training, "MatMul");
        T(wf_matmul(g, n, x, k, 0, 0, &h));
        if (l->use_bias) {
            T(wvar(m, L, training, 1, "bias", &b));
            nm(n, L, training, "BiasAdd");
            T(wf_add(g, n, h, b, &h));
        }
        *pre = h;
        return activation(g, L, training, l->activation, h, y);
    }
    case WF_LAYER_CONV2D: {
        if (r != 4 || d[1] < 1 || !is_float) return bad_shape(L, x, "Conv2D wants float NCHW [N, C, H, W]");
        if (create) {
            int64_t wd[4] = {l->filters, d[1], l->kernel[0], l->kernel[1]}, bd[1] = {l->filters};
            T(make_var(m, L, "kernel", l->kernel_init, (wf_init){.kind = WF_INIT_GLOROT_UNIFORM}, 4, wd, &L->vars[0]));
            if (l->use_bias) T(make_var(m, L, "bias", l->bias_init, (wf_init){.kind = WF_INIT_ZEROS}, 1, bd, &L->vars[1]));
            L->n_trainable = L->n_vars;
        }
        wf_output in[3] = {x};
        T(wvar(m, L, training, 0, "kernel", &in[1]));
        if (l->use_bias) T(wvar(m, L, training, 1, "bias", &in[2]));
        wf_attr at[3] = {wf_attr_ints("kernel_shape", l->kernel, 2), wf_attr_ints("strides", l->strides, 2),
                         wf_attr_string("auto_pad", pad_mode(l))};
        wf_output h;
        nm(n, L, training, "Conv2D");
        T(op1(g, "Conv2D", n, in, l->use_bias ? 3 : 2, at, 3, &h));
        *pre = h;
        return activation(g, L, training, l->activation, h, y);
    }
    case WF_LAYER_MAXPOOL2D:
    case WF_LAYER_AVGPOOL2D: {
        if (r != 4 || !is_float) return bad_shape(L, x, "pooling wants float NCHW [N, C, H, W]");
        int64_t st[2] = {l->strides[0] ? l->strides[0] : l->kernel[0], l->strides[1] ? l->strides[1] : l->kernel[1]};
        wf_attr at[3] = {wf_attr_ints("kernel_shape", l->kernel, 2), wf_attr_ints("strides", st, 2),
                         wf_attr_string("auto_pad", pad_mode(l))};
        const char *op = l->kind == WF_LAYER_MAXPOOL2D ? "MaxPool2D" : "AvgPool2D";
        nm(n, L, training, op);
        return op1(g, op, n, &x, 1, at, 3, y);
    }
    case WF_LAYER_FLATTEN:
        if (r < 1) return bad_shape(L, x, "Flatten wants [N, ...]");
        nm(n, L, training, "Flatten");
        return wf_flatten(g, n, x, 1, y);
    case WF_LAYER_RESHAPE: {
        int64_t td[WF_MAX_RANK];
        td[0] = 0; /* keep the batch */
        for (int i = 0; i < l->target_rank; i++) td[i + 1] = l->target[i];
        nm(n, L, training, "Reshape");
        return wf_reshape(g, n, x, l->target_rank + 1, td, y);
    }
    case WF_LAYER_ACTIVATION:
        if (!is_float) return bad_shape(L, x, "activations want float tensors");
        return activation(g, L, training, l->activation, x, y);
    case WF_LAYER_DROPOUT: {
        if (!is_float) return bad_shape(L, x, "Dropout wants a float tensor");
        if (!training || l->rate == 0) {
            *y = x;
            return NULL;
        }
        /* keep = (u > rate), y = x * keep / (1 - rate), u uniform in [0, 1) from (seed, step) */
        wf_output u, rate, keep, scale, ks, in[2] = {x, counter};
        wf_attr sa = wf_attr_int("seed", (int64_t)(L->seed & 0x7fffffffffffffffull));
        nm(n, L, training, "uniform");
        T(op1(g, "StatelessRandomUniform", n, in, 2, &sa, 1, &u));
        nm(n, L, training, "rate");
        T(scalar(g, n, dt, l->rate, &rate));
        nm(n, L, training, "keep");
        T(wf_binary(g, "Greater", n, u, rate, &keep));
        wf_attr to = wf_attr_dtype("to", dt);
        nm(n, L, training, "keep_float");
        T(op1(g, "Cast", n, &keep, 1, &to, 1, &keep));
        nm(n, L, training, "scale");
        T(scalar(g, n, dt, 1.0 / (1.0 - l->rate), &scale));
        nm(n, L, training, "keep_scaled");
        T(wf_mul(g, n, keep, scale, &ks));
        nm(n, L, training, "dropped");
        return wf_mul(g, n, x, ks, y);
    }
    case WF_LAYER_BATCHNORM: {
        if (r < 2 || d[1] < 1 || !is_float) return bad_shape(L, x, "BatchNorm wants float [N, C, ...]");
        int64_t c = d[1];
        if (create) {
            int64_t cd[1] = {c};
            T(make_var(m, L, "gamma", (wf_init){0}, (wf_init){.kind = WF_INIT_ONES}, 1, cd, &L->vars[0]));
            T(make_var(m, L, "beta", (wf_init){0}, (wf_init){.kind = WF_INIT_ZEROS}, 1, cd, &L->vars[1]));
            L->n_trainable = 2;
            T(make_var(m, L, "moving_mean", (wf_init){0}, (wf_init){.kind = WF_INIT_ZEROS}, 1, cd, &L->vars[2]));
            T(make_var(m, L, "moving_variance", (wf_init){0}, (wf_init){.kind = WF_INIT_ONES}, 1, cd, &L->vars[3]));
        }
        if (!training) {
            wf_output in[5] = {x, L->vars[0], L->vars[1], L->vars[2], L->vars[3]};
            wf_attr at = wf_attr_float("epsilon", l->epsilon);
            nm(n, L, training, "BatchNormalization");
            return op1(g, "BatchNormalization", n, in, 5, &at, 1, y);
        }
        /* the batch's statistics over every axis but 1: one FusedBatchNorm node (its gradient is one
         * FusedBatchNormGrad), as TensorFlow's Keras layer trains through FusedBatchNormV3 */
        wf_output in[3] = {x, L->vars[0], L->vars[1]};
        wf_attr at = wf_attr_float("epsilon", l->epsilon);
        wf_node *bn;
        nm(n, L, true, "BatchNormalization");
        T(wf_op(g, "FusedBatchNorm", n, in, 3, &at, 1, &bn));
        *y = wf_out(bn, 0);
        /* moving = moving * momentum + batch * (1 - momentum), outside the gradient's path */
        for (int k = 0; k < 2; k++) {
            wf_output flat = wf_out(bn, 1 + k), mom, omm, a, b, upd, asg;
            const char *what = k ? "variance" : "mean";
            char w[64];
            snprintf(w, sizeof w, "momentum_%s", what);
            nm(n, L, true, w);
            T(scalar(g, n, dt, l->momentum, &mom));
            snprintf(w, sizeof w, "one_minus_momentum_%s", what);
            nm(n, L, true, w);
            T(scalar(g, n, dt, 1 - l->momentum, &omm));
            snprintf(w, sizeof w, "moving_%s_decayed", what);
            nm(n, L, true, w);
            T(wf_mul(g, n, L->vars[2 + k], mom, &a));
            snprintf(w, sizeof w, "moving_%s_batch", what);
            nm(n, L, true, w);
            T(wf_mul(g, n, flat, omm, &b));
            snprintf(w, sizeof w, "moving_%s_new", what);
            nm(n, L, true, w);
            T(wf_add(g, n, a, b, &upd));
            snprintf(w, sizeof w, "moving_%s_assign", what);
            nm(n, L, true, w);
            T(wf_assign(g, n, L->vars[2 + k], upd, &asg));
            wf_output *nt = wf__realloc(m->targets, sizeof *nt * (size_t)m->n_targets, sizeof *nt * (size_t)(m->n_targets + 1));
            if (!nt) return wf__oom("the model's targets", sizeof *nt * (size_t)(m->n_targets + 1));
            m->targets = nt;
            m->targets[m->n_targets++] = asg;
        }
        return NULL;
    }
    case WF_LAYER_LAYERNORM: {
        if (r < 1 || d[r - 1] < 1 || !is_float) return bad_shape(L, x, "LayerNorm wants float [N, ..., features]");
        if (create) {
            int64_t cd[1] = {d[r - 1]};
            T(make_var(m, L, "gamma", (wf_init){0}, (wf_init){.kind = WF_INIT_ONES}, 1, cd, &L->vars[0]));
            T(make_var(m, L, "beta", (wf_init){0}, (wf_init){.kind = WF_INIT_ZEROS}, 1, cd, &L->vars[1]));
            L->n_trainable = 2;
        }
        wf_output in[3] = {x, L->vars[0], L->vars[1]};
        wf_attr at[2] = {wf_attr_int("axis", -1), wf_attr_float("epsilon", l->epsilon)};
        nm(n, L, training, "LayerNormalization");
        return op1(g, "LayerNormalization", n, in, 3, at, 2, y);
    }
    case WF_LAYER_EMBEDDING: {
        if (dt != WF_I32 && dt != WF_I64) return bad_shape(L, x, "Embedding wants integer indices");
        if (create) {
            int64_t wd[2] = {l->input_dim, l->output_dim};
            T(make_var(m, L, "embeddings", l->kernel_init,
                       (wf_init){.kind = WF_INIT_UNIFORM, .minval = -0.05, .maxval = 0.05}, 2, wd, &L->vars[0]));
            L->n_trainable = 1;
        }
        /* the rows from the f32 table, then cast (Keras 3's Embedding): a mixed policy casts only the
         * rows a batch reads, and repeated indices sum their gradients in f32 */
        wf_output in[2] = {L->vars[0], x};
        wf_attr at = wf_attr_int("axis", 0);
        nm(n, L, training, "Gather");
        T(op1(g, "Gather", n, in, 2, &at, 1, y));
        nm(n, L, training, "Cast_output");
        return cast_to(g, n, *y, compute_dtype(m, L), y);
    }
    }
    return wf__status(WF_INVALID_ARGUMENT, "layer '%s': unknown kind %d", L->name, (int)l->kind);
}

/* Builds layer L on x under its policy (Keras's autocast): a floating input in another dtype is cast
 * to the layer's compute dtype first; the normalisations take theirs in the variables' dtype and give
 * their result back in the compute dtype. Under float32, f32 and f64 inputs pass as they are. Creates
 * L's variables the first time (the inference build, at wf_model_add); the training build reuses them.
 * counter: the model's step (Dropout in training). */
static wf_status *build_layer(wf_model *m, model_layer *L, bool training, wf_output x, wf_output counter,
                              wf_output *y, wf_output *pre)
{
    char n[MODEL_NAME_MAX * 2];
    wf_dtype dt = wf_output_dtype(x), cdt = compute_dtype(m, L);
    bool stats = L->spec.kind == WF_LAYER_BATCHNORM || L->spec.kind == WF_LAYER_LAYERNORM;
    wf_dtype want = stats ? var_dtype(m) : cdt;
    if (wf__dtype_is_float(dt) && dt != want && (is_lowp(dt) || is_lowp(want))) {
        nm(n, L, training, "Cast");
        T(cast_to(m->g, n, x, want, &x));
    }
    T(build_core(m, L, training, x, counter, y, pre));
    if (stats && is_lowp(cdt)) {
        nm(n, L, training, "Cast_output");
        T(cast_to(m->g, n, *y, cdt, y));
    }
    return NULL;
}

static wf_status *check_layer(const wf_layer *l)
{
#define BAD(...) return wf__status(WF_INVALID_ARGUMENT, __VA_ARGS__)
    const char *k = kind_titles[l->kind];
    if (!act_ok(l->activation)) BAD("%s layer: unknown activation %d", k, (int)l->activation);
    if (!wf__policy_valid((int)l->policy)) BAD("%s layer: unknown dtype policy %d", k, (int)l->policy);
    switch (l->kind) {
    case WF_LAYER_DENSE:
        if (l->units < 1) BAD("Dense layer: units is %lld; must be >= 1", (long long)l->units);
        break;
    case WF_LAYER_CONV2D:
        if (l->filters < 1) BAD("Conv2D layer: filters is %lld; must be >= 1", (long long)l->filters);
        /* fall through */
    case WF_LAYER_MAXPOOL2D:
    case WF_LAYER_AVGPOOL2D:
        for (int i = 0; i < 2; i++) {
            if (l->kernel[i] < 1) BAD("%s layer: kernel[%d] is %lld; must be >= 1", k, i, (long long)l->kernel[i]);
            if (l->strides[i] < 0 || (l->kind == WF_LAYER_CONV2D && l->strides[i] < 1))
                BAD("%s layer: strides[%d] is %lld; must be >= 1", k, i, (long long)l->strides[i]);
        }
        break;
    case WF_LAYER_DROPOUT:
        if (!(l->rate >= 0 && l->rate < 1)) BAD("Dropout layer: rate is %g; must be in [0, 1)", l->rate);
        break;
    case WF_LAYER_BATCHNORM:
        if (!(l->momentum >= 0 && l->momentum <= 1)) BAD("BatchNorm layer: momentum is %g; must be in [0, 1]", l->momentum);
        /* fall through */
    case WF_LAYER_LAYERNORM:
        if (!(l->epsilon > 0)) BAD("%s layer: epsilon is %g; must be > 0", k, l->epsilon);
        break;
    case WF_LAYER_EMBEDDING:
        if (l->input_dim < 1 || l->output_dim < 1)
            BAD("Embedding layer: input_dim %lld and output_dim %lld must be >= 1", (long long)l->input_dim,
                (long long)l->output_dim);
        break;
    case WF_LAYER_RESHAPE:
        if (l->target_rank < 1 || l->target_rank + 1 > WF_MAX_RANK)
            BAD("Reshape layer: target_rank %d must be in [1, %d)", l->target_rank, WF_MAX_RANK);
        break;
    default:
        break;
    }
    return NULL;
#undef BAD
}

wf_status *wf_model_add(wf_model *m, const wf_layer *layer)
{
    if (!m || !layer) return wf__status(WF_INVALID_ARGUMENT, "wf_model_add: NULL argument");
    if (!kind_ok(layer->kind)) return wf__status(WF_INVALID_ARGUMENT, "wf_model_add: unknown layer kind %d", (int)layer->kind);
    if (m->compiled) return wf__status(WF_FAILED_PRECONDITION, "wf_model_add: the model is already compiled");
    T(check_layer(layer));
    if (m->n_layers == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        model_layer *nl = wf__realloc(m->layers, sizeof *nl * (size_t)m->cap, sizeof *nl * (size_t)cap);
        if (!nl) return wf__oom("the model's layers", sizeof *nl * (size_t)cap);
        m->layers = nl;
        m->cap = cap;
    }
    model_layer *L = &m->layers[m->n_layers];
    memset(L, 0, sizeof *L);
    L->spec = *layer;
    if (layer->name && *layer->name) {
        if (strlen(layer->name) >= MODEL_NAME_MAX - 32)
            return wf__status(WF_INVALID_ARGUMENT, "wf_model_add: layer name '%s' is too long", layer->name);
        snprintf(L->name, sizeof L->name, "%s", layer->name);
    } else {
        int c = m->kind_count[layer->kind];
        if (c) snprintf(L->name, sizeof L->name, "%s_%d", kind_names[layer->kind], c);
        else snprintf(L->name, sizeof L->name, "%s", kind_names[layer->kind]);
    }
    L->spec.name = NULL;
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].name, L->name))
            return wf__status(WF_ALREADY_EXISTS, "wf_model_add: the model already has a layer named '%s'", L->name);
    L->seed = layer->seed ? layer->seed : m->seed * 1000003ull + (uint64_t)m->n_layers + 1;
    L->policy = layer->policy ? layer->policy : m->policy;
    /* build the inference path; on failure take every node it added back out of the graph */
    int before = wf_graph_num_nodes(m->g);
    wf_status *s = build_layer(m, L, false, m->output, (wf_output){0}, &L->infer_out, &L->infer_pre);
    if (s) {
        wf__graph_truncate(m->g, before);
        return s;
    }
    L->out_rank = wf_output_shape(L->infer_out, L->out_dims);
    m->output = L->infer_out;
    m->kind_count[layer->kind]++;
    m->n_layers++;
    return NULL;
}

/* ---- summary --------------------------------------------------------------------------------------- */

wf_status *wf_model_summary(const wf_model *m, char **text)
{
    if (!m || !text) return wf__status(WF_INVALID_ARGUMENT, "wf_model_summary: NULL argument");
    wf__str o = {0};
    int64_t total = 0, trainable = 0;
    /* the Policy column only for a model with a mixed layer, so a float32 summary reads as Keras's */
    bool mixed = false;
    for (int i = 0; i < m->n_layers; i++) mixed |= m->layers[i].policy != WF_POLICY_FLOAT32;
    static const char rule[] = "=====================================================================================";
    int width = mixed ? 87 : 70;
    wf__str_appendf(&o, "%-34s %-22s %12s", "Layer (type)", "Output Shape", "Param #");
    if (mixed) wf__str_appendf(&o, "  %s", "Policy");
    wf__str_appendf(&o, "\n");
    wf__str_appendf(&o, "%.*s\n", width, rule);
    for (int i = 0; i < m->n_layers; i++) {
        const model_layer *L = &m->layers[i];
        char lt[160], sh[96];
        snprintf(lt, sizeof lt, "%s (%s)", L->name, kind_titles[L->spec.kind]);
        shape_str(sh, sizeof sh, L->out_rank, L->out_dims, "(", ")", "None");
        wf__str_appendf(&o, "%-34s %-22s %12lld", lt, sh, (long long)L->params);
        if (mixed) wf__str_appendf(&o, "  %s", wf_policy_name(L->policy));
        wf__str_appendf(&o, "\n");
        total += L->params;
        for (int v = 0; v < L->n_trainable; v++) {
            int64_t d[WF_MAX_RANK], n = 1;
            int r = wf_output_shape(L->vars[v], d);
            for (int k = 0; k < r; k++) n *= d[k];
            trainable += n;
        }
    }
    wf__str_appendf(&o, "%.*s\n", width, rule);
    wf__str_appendf(&o, "Total params: %lld\nTrainable params: %lld\nNon-trainable params: %lld\n", (long long)total,
                    (long long)trainable, (long long)(total - trainable));
    if (o.failed || !o.p) {
        wf__str_free(&o);
        return wf__oom("a model summary", 4096);
    }
    *text = o.p;
    return NULL;
}

/* ---- compile --------------------------------------------------------------------------------------- */

/* "<prefix>_accuracy": the fraction of positions where pred equals truth. */
static wf_status *accuracy(wf_graph *g, const char *prefix, wf_output pred, wf_output truth, wf_output *acc)
{
    char n[MODEL_NAME_MAX * 2];
    wf_output eq, f;
    snprintf(n, sizeof n, "%s_accuracy/match", prefix);
    T(wf_binary(g, "Equal", n, pred, truth, &eq));
    wf_attr to = wf_attr_dtype("to", WF_F32);
    snprintf(n, sizeof n, "%s_accuracy/match_float", prefix);
    T(op1(g, "Cast", n, &eq, 1, &to, 1, &f));
    wf_attr kd = wf_attr_int("keepdims", 0);
    snprintf(n, sizeof n, "%s_accuracy", prefix);
    return op1(g, "ReduceMean", n, &f, 1, &kd, 1, acc);
}

/* The loss and accuracy of output `out` (pre: the last layer before its activation) against m->labels.
 * out is already in the variables' dtype (compile casts it); pre is cast here when the loss reads it. */
static wf_status *build_loss(wf_model *m, wf_output out, wf_output pre, const char *prefix, wf_output *loss,
                             wf_output *acc)
{
    wf_graph *g = m->g;
    const wf_compile_options *o = &m->co;
    wf_activation last = m->n_layers ? m->layers[m->n_layers - 1].spec.activation : WF_ACT_NONE;
    wf_layer_kind lastk = m->n_layers ? m->layers[m->n_layers - 1].spec.kind : 0;
    bool has_act = lastk == WF_LAYER_DENSE || lastk == WF_LAYER_CONV2D || lastk == WF_LAYER_ACTIVATION;
    char n[MODEL_NAME_MAX * 2];
    wf_dtype dt = wf_output_dtype(out);
    switch (o->loss) {
    case WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
    case WF_LOSS_CATEGORICAL_CROSSENTROPY: {
        wf_output logits = out;
        if (!o->from_logits) {
            if (has_act && last == WF_ACT_SOFTMAX) {
                snprintf(n, sizeof n, "%s/logits_f32", prefix);
                T(cast_to(g, n, pre, dt, &logits));
            } else {
                /* probabilities p summing to 1: LogSoftmax(log p) = log p, so the cross-entropy of
                 * logits log(clip(p)) is Keras's -sum(y log clip(p)) */
                wf_output lo, hi, cl;
                snprintf(n, sizeof n, "%s/clip_min", prefix);
                T(scalar(g, n, dt, 1e-7, &lo));
                snprintf(n, sizeof n, "%s/clip_max", prefix);
                T(scalar(g, n, dt, 1 - 1e-7, &hi));
                wf_output in[3] = {out, lo, hi};
                snprintf(n, sizeof n, "%s/clipped", prefix);
                T(op1(g, "Clip", n, in, 3, NULL, 0, &cl));
                snprintf(n, sizeof n, "%s/log_probs", prefix);
                T(wf_unary(g, "Log", n, cl, &logits));
            }
        }
        int sparse = o->loss == WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
        T(wf_loss_softmax_cross_entropy(g, prefix, logits, m->labels, sparse, loss));
        if (!m->has_acc) return NULL;
        wf_attr am[2] = {wf_attr_int("axis", -1), wf_attr_int("keepdims", 0)};
        wf_output pred, truth = m->labels;
        snprintf(n, sizeof n, "%s_accuracy/predicted", prefix);
        T(op1(g, "ArgMax", n, &out, 1, am, 2, &pred));
        if (!sparse) {
            snprintf(n, sizeof n, "%s_accuracy/true", prefix);
            T(op1(g, "ArgMax", n, &truth, 1, am, 2, &truth));
        } else if (wf_output_dtype(truth) != WF_I64) {
            wf_attr to = wf_attr_dtype("to", WF_I64);
            snprintf(n, sizeof n, "%s_accuracy/true", prefix);
            T(op1(g, "Cast", n, &truth, 1, &to, 1, &truth));
        }
        return accuracy(g, prefix, pred, truth, acc);
    }
    case WF_LOSS_BINARY_CROSSENTROPY: {
        bool logits = o->from_logits || (has_act && last == WF_ACT_SIGMOID);
        wf_output in = out;
        if (logits && !o->from_logits) {
            snprintf(n, sizeof n, "%s/logits_f32", prefix);
            T(cast_to(g, n, pre, dt, &in));
        }
        T(wf_loss_binary_cross_entropy(g, prefix, in, m->labels, logits, loss));
        if (!m->has_acc) return NULL;
        wf_output th, half, p, t;
        snprintf(n, sizeof n, "%s_accuracy/threshold", prefix);
        T(scalar(g, n, dt, o->from_logits ? 0.0 : 0.5, &th));
        snprintf(n, sizeof n, "%s_accuracy/half", prefix);
        T(scalar(g, n, wf_output_dtype(m->labels), 0.5, &half));
        snprintf(n, sizeof n, "%s_accuracy/predicted", prefix);
        T(wf_binary(g, "Greater", n, out, th, &p));
        snprintf(n, sizeof n, "%s_accuracy/true", prefix);
        T(wf_binary(g, "Greater", n, m->labels, half, &t));
        return accuracy(g, prefix, p, t, acc);
    }
    case WF_LOSS_MSE:
        return wf_loss_mse(g, prefix, out, m->labels, loss);
    }
    return wf__status(WF_INVALID_ARGUMENT, "wf_model_compile: unknown loss %d", (int)o->loss);
}

static wf_status *compile(wf_model *m, wf_context *ctx, const wf_compile_options *o)
{
    wf_graph *g = m->g;
    if (m->n_layers == 0) return wf__status(WF_FAILED_PRECONDITION, "wf_model_compile: the model has no layers");
    if (o->loss < WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY || o->loss > WF_LOSS_MSE)
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_compile: unknown loss %d", (int)o->loss);
    if (o->accuracy && o->loss == WF_LOSS_MSE)
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_model_compile: the accuracy metric needs a classification loss, not mean squared error");
    if (o->loss == WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY && o->label_dtype != WF_I64 && o->label_dtype != WF_I32)
        return wf__status(WF_INVALID_ARGUMENT, "wf_model_compile: sparse labels must be i32 or i64, not %s",
                          wf_dtype_name(o->label_dtype));
    if (o->initial_loss_scale != 0 && (!(o->initial_loss_scale >= 1) || !isfinite(o->initial_loss_scale) ||
                                       o->initial_loss_scale > 3.0e38))
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_model_compile: initial_loss_scale is %g; must be 0 (2^15) or finite, >= 1 and < 3e38",
                          o->initial_loss_scale);
    if (o->loss_scale_growth_interval < 0)
        return wf__status(WF_INVALID_ARGUMENT,
                          "wf_model_compile: loss_scale_growth_interval is %lld; must be 0 (2000) or >= 1",
                          (long long)o->loss_scale_growth_interval);
    m->co = *o;
    m->has_acc = o->accuracy != 0;
    /* a mixed policy's output in the variables' dtype, so that the loss, the metrics and predict are
     * f32 (Keras leaves a mixed model's output in the compute dtype unless its last layer is float32;
     * weft's loss kernels and users' buffers want f32) */
    if (wf__dtype_is_float(wf_output_dtype(m->output)))
        T(cast_to(g, "model/output_f32", m->output, var_dtype(m), &m->output));
    int64_t od[WF_MAX_RANK];
    int orank = wf_output_shape(m->output, od);
    wf_dtype odt = wf_output_dtype(m->output);
    if (o->loss == WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) {
        int64_t ld[1] = {-1};
        T(wf_placeholder(g, "labels", o->label_dtype, 1, ld, &m->labels));
    } else {
        T(wf_placeholder(g, "labels", odt, orank, od, &m->labels));
    }
    /* the step counter Dropout draws from */
    wf_output step, one, next, asg;
    {
        wf_tensor *z;
        T(wf_tensor_new(WF_I64, 0, NULL, NULL, &z));
        *(int64_t *)wf_tensor_data(z) = 0;
        wf_status *s = wf_variable(g, "model/step", z, &step);
        wf_tensor_free(z);
        if (s) return s;
    }
    T(scalar(g, "model/step_one", WF_I64, 1, &one));
    T(wf_add(g, "model/step_next", step, one, &next));
    T(wf_assign(g, "model/step_assign", step, next, &asg));
    m->targets = wf__malloc(sizeof *m->targets);
    if (!m->targets) return wf__oom("the model's targets", sizeof *m->targets);
    m->targets[m->n_targets++] = asg;
    /* the training path: shared with inference until the first layer that differs */
    wf_output x = m->input, pre = m->input;
    bool diverged = false;
    for (int i = 0; i < m->n_layers; i++) {
        model_layer *L = &m->layers[i];
        bool differs = (L->spec.kind == WF_LAYER_DROPOUT && L->spec.rate > 0) || L->spec.kind == WF_LAYER_BATCHNORM;
        if (!diverged && !differs) {
            x = L->infer_out;
            pre = L->infer_pre;
            continue;
        }
        diverged = true;
        T(build_layer(m, L, true, x, step, &x, &pre));
    }
    if (!diverged) x = m->output;
    else if (wf__dtype_is_float(wf_output_dtype(x))) T(cast_to(g, "train/model/output_f32", x, var_dtype(m), &x));
    T(build_loss(m, x, pre, "loss", &m->train_loss, &m->train_acc));
    const model_layer *last = &m->layers[m->n_layers - 1];
    if (diverged) {
        T(build_loss(m, m->output, last->infer_pre, "eval/loss", &m->eval_loss, &m->eval_acc));
    } else {
        m->eval_loss = m->train_loss;
        m->eval_acc = m->train_acc;
    }
    /* the optimizer over every trainable variable */
    wf_output vars[256];
    int nv = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int v = 0; v < m->layers[i].n_trainable; v++) {
            if (nv == 256) return wf__status(WF_UNIMPLEMENTED, "wf_model_compile: more than 256 trainable variables");
            vars[nv++] = m->layers[i].vars[v];
        }
    if (nv == 0) return wf__status(WF_FAILED_PRECONDITION, "wf_model_compile: the model has no trainable variables");
    /* f16's five exponent bits lose small gradients and overflow on large ones: dynamic loss scaling
     * whenever a layer computes in f16 (Keras wraps the optimizer when the model's policy is
     * mixed_float16); bf16 has f32's range and needs none */
    bool f16 = false;
    for (int i = 0; i < m->n_layers; i++) f16 |= m->layers[i].policy == WF_POLICY_MIXED_FLOAT16;
    wf__loss_scale ls = {.initial = o->initial_loss_scale ? o->initial_loss_scale : 32768.0,
                         .growth_interval = o->loss_scale_growth_interval ? o->loss_scale_growth_interval : 2000};
    wf_output *ot = NULL;
    int no = 0;
    T(wf__optimizer_minimize_scaled(g, "optimizer", &o->optimizer, m->train_loss, vars, nv, f16 ? &ls : NULL, &ot,
                                    &no));
    if (f16) {
        m->loss_scale = ls.scale;
        m->loss_scale_good_steps = ls.good_steps;
    }
    wf_output *all = wf__realloc(m->targets, sizeof *all * (size_t)m->n_targets, sizeof *all * (size_t)(m->n_targets + no));
    if (!all) {
        wf_free(ot);
        return wf__oom("the model's targets", sizeof *all * (size_t)(m->n_targets + no));
    }
    memcpy(all + m->n_targets, ot, sizeof *all * (size_t)no);
    wf_free(ot);
    m->targets = all;
    m->n_targets += no;
    m->n_step_targets = m->n_targets;
    T(build_metric_sums(m));
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = o->device;
    so.strict_placement = o->strict_placement;
    so.inter_op_threads = o->inter_op_threads;
    so.intra_op_threads = o->intra_op_threads;
    T(wf_session_new(ctx, g, &so, &m->sess));
    m->ctx = ctx;
    return NULL;
}

wf_status *wf_model_compile(wf_model *m, wf_context *ctx, const wf_compile_options *o)
{
    if (!m || !ctx) return wf__status(WF_INVALID_ARGUMENT, "wf_model_compile: NULL argument");
    if (m->compiled) return wf__status(WF_FAILED_PRECONDITION, "wf_model_compile: the model is already compiled");
    wf_compile_options d;
    if (!o) {
        wf_compile_options_init(&d);
        o = &d;
    }
    int before = wf_graph_num_nodes(m->g);
    wf_output output = m->output;
    wf_status *s = compile(m, ctx, o);
    if (s) {
        m->output = output;
        m->loss_scale = m->loss_scale_good_steps = (wf_output){0};
        wf_session_free(m->sess);
        m->sess = NULL;
        wf__free(m->targets);
        m->targets = NULL;
        m->n_targets = 0;
        wf__graph_truncate(m->g, before);
        return s;
    }
    m->compiled = true;
    return NULL;
}

wf_status *wf_model_placement(wf_model *m, int64_t batch_size, wf_placement **out)
{
    if (!m || !out) return wf__status(WF_INVALID_ARGUMENT, "wf_model_placement: NULL argument");
    if (!m->compiled) return wf__status(WF_FAILED_PRECONDITION, "wf_model_placement: compile the model first");
    if (batch_size < 1) return wf__status(WF_INVALID_ARGUMENT, "wf_model_placement: batch_size must be >= 1");
    int64_t xd[WF_MAX_RANK], ld[WF_MAX_RANK];
    int lr = wf_output_shape(m->labels, ld);
    for (int i = 0; i < m->in_rank; i++) xd[i] = m->in_dims[i];
    xd[0] = ld[0] = batch_size;
    wf_tensor *x = NULL, *y = NULL;
    wf_status *s = wf_tensor_new(m->in_dtype, m->in_rank, xd, NULL, &x);
    if (!s) s = wf_tensor_new(wf_output_dtype(m->labels), lr, ld, NULL, &y);
    if (!s) {
        memset(wf_tensor_data(x), 0, wf_tensor_bytes(x));
        memset(wf_tensor_data(y), 0, wf_tensor_bytes(y));
        wf_feed f[2] = {{m->input, x}, {m->labels, y}};
        wf_output fetch[2] = {m->train_loss, m->train_acc};
        s = wf__session_placement_get(m->sess, f, 2, fetch, m->has_acc ? 2 : 1, m->targets, m->n_targets, out);
    }
    wf_tensor_free(x);
    wf_tensor_free(y);
    return s;
}

wf_status *wf_model_export_onnx(wf_model *m, const char *path)
{
    if (!m || !path) return wf__status(WF_INVALID_ARGUMENT, "wf_model_export_onnx: NULL argument");
    if (!m->compiled) return wf__status(WF_FAILED_PRECONDITION, "wf_model_export_onnx: compile the model first");
    const char *names[1] = {"output"};
    return wf_session_export_onnx(m->sess, &m->output, names, 1, path);
}

wf_status *wf_model_loss_scale(wf_model *m, double *scale, int64_t *good_steps)
{
    if (!m) return wf__status(WF_INVALID_ARGUMENT, "wf_model_loss_scale: model is NULL");
    if (!m->compiled) return wf__status(WF_FAILED_PRECONDITION, "wf_model_loss_scale: compile the model first");
    double sc = 1;
    int64_t gs = 0;
    if (m->loss_scale.node) {
        wf_tensor *a = NULL, *b = NULL;
        wf_status *s = wf_session_get_variable(m->sess, wf_node_name(m->loss_scale.node), &a);
        if (!s) s = wf_session_get_variable(m->sess, wf_node_name(m->loss_scale_good_steps.node), &b);
        if (!s) {
            sc = *(const float *)wf_tensor_data(a);
            gs = *(const int64_t *)wf_tensor_data(b);
        }
        wf_tensor_free(a);
        wf_tensor_free(b);
        if (s) return s;
    }
    if (scale) *scale = sc;
    if (good_steps) *good_steps = gs;
    return NULL;
}
