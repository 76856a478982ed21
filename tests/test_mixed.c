/* Mixed precision in the Sequential model: dtype policies (names, the global policy, errors), the casts
 * a mixed model builds and the dtypes its layers compute in, f32 master variables, the summary's
 * policy column, training under mixed_bfloat16 and mixed_float16 against the same model in f32 (MLP,
 * CNN, Dropout, BatchNorm), gradients through Cast, f32 accumulation of bf16/f16 reductions, and
 * dynamic loss scaling step by step against Keras's rules with a checkpoint round trip. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static wf_context *g_ctx;

static wf_layer layer(wf_layer_kind k)
{
    wf_layer l;
    wf_layer_init(&l, k);
    return l;
}

static wf_layer dense(int64_t units, wf_activation act)
{
    wf_layer l = layer(WF_LAYER_DENSE);
    l.units = units;
    l.activation = act;
    return l;
}

static void add(wf_model *m, wf_layer l) { CHECK_OK(wf_model_add(m, &l)); }

static wf_model *new_model(int rank, const int64_t *shape, uint64_t seed, wf_dtype_policy p)
{
    wf_model *m = NULL;
    CHECK_OK(wf_model_new(WF_F32, rank, shape, seed, &m));
    if (m) CHECK_OK(wf_model_set_policy(m, p));
    return m;
}

static wf_tensor *tensor_f32(int rank, const int64_t *dims, const float *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, rank, dims, v, &t));
    return t;
}

static wf_tensor *labels_i64(int64_t n, const int64_t *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, 1, &n, v, &t));
    return t;
}

static uint64_t rng_state = 99;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* The dtype of node `name`'s first output; WF_DTYPE_INVALID (and a failure) when absent. */
static wf_dtype node_dtype(wf_model *m, const char *name)
{
    wf_node *n = NULL;
    wf_status *s = wf_graph_find(wf_model_graph(m), name, &n);
    if (s) {
        CHECK_FAIL_("no node '%s': %s", name, wf_status_message(s));
        wf_status_free(s);
        return WF_DTYPE_INVALID;
    }
    return wf_output_dtype(wf_out(n, 0));
}

static int count_op(wf_model *m, const char *op)
{
    int c = 0;
    for (int i = 0; i < wf_graph_num_nodes(wf_model_graph(m)); i++)
        c += !strcmp(wf_node_op(wf_graph_node(wf_model_graph(m), i)), op);
    return c;
}

/* A variable's current value as a malloc'd float array of *n. */
static float *var_f32(wf_model *m, const char *name, int64_t *n)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_session_get_variable(wf_model_session(m), name, &t));
    if (!t) return NULL;
    CHECK_INT(wf_tensor_dtype(t), WF_F32);
    float *v = malloc(wf_tensor_bytes(t) + 4);
    memcpy(v, wf_tensor_data(t), wf_tensor_bytes(t));
    if (n) *n = wf_tensor_size(t);
    wf_tensor_free(t);
    return v;
}

static int64_t var_i64(wf_model *m, const char *name)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_session_get_variable(wf_model_session(m), name, &t));
    if (!t) return -1;
    int64_t v = *(const int64_t *)wf_tensor_data(t);
    wf_tensor_free(t);
    return v;
}

/* ---- policies ------------------------------------------------------------------------------------ */

static void test_policy_names(void)
{
    const char *names[] = {"float32", "mixed_float16", "mixed_bfloat16"};
    const wf_dtype_policy want[] = {WF_POLICY_FLOAT32, WF_POLICY_MIXED_FLOAT16, WF_POLICY_MIXED_BFLOAT16};
    for (int i = 0; i < 3; i++) {
        wf_dtype_policy p = WF_POLICY_DEFAULT;
        CHECK_OK(wf_policy_from_name(names[i], &p));
        CHECK_INT(p, want[i]);
        CHECK(!strcmp(wf_policy_name(p), names[i]));
    }
    CHECK(!strcmp(wf_policy_name(WF_POLICY_DEFAULT), "default"));
    CHECK(wf_policy_name((wf_dtype_policy)7) == NULL);
    wf_dtype_policy p = WF_POLICY_MIXED_FLOAT16;
    CHECK_ERR(wf_policy_from_name("mixed_float64", &p), WF_INVALID_ARGUMENT, "'mixed_float64'");
    CHECK_ERR(wf_policy_from_name("float16", &p), WF_INVALID_ARGUMENT,
              "float32, mixed_float16 and mixed_bfloat16");
    CHECK_ERR(wf_policy_from_name("default", &p), WF_INVALID_ARGUMENT, "unknown dtype policy");
    CHECK_ERR(wf_policy_from_name(NULL, &p), WF_INVALID_ARGUMENT, "(null)");
    CHECK_INT(p, WF_POLICY_MIXED_FLOAT16); /* unchanged on error */
    CHECK_ERR(wf_policy_from_name("float32", NULL), WF_INVALID_ARGUMENT, "out is NULL");

    /* the global policy: what a new model takes, at wf_model_new */
    CHECK_INT(wf_global_policy(), WF_POLICY_FLOAT32);
    CHECK_OK(wf_set_global_policy(WF_POLICY_MIXED_BFLOAT16));
    CHECK_INT(wf_global_policy(), WF_POLICY_MIXED_BFLOAT16);
    CHECK_ERR(wf_set_global_policy((wf_dtype_policy)9), WF_INVALID_ARGUMENT, "unknown dtype policy 9");
    CHECK_INT(wf_global_policy(), WF_POLICY_MIXED_BFLOAT16);
    int64_t s[1] = {4};
    wf_model *m = NULL;
    CHECK_OK(wf_model_new(WF_F32, 1, s, 1, &m));
    CHECK_OK(wf_set_global_policy(WF_POLICY_DEFAULT)); /* DEFAULT: back to float32 */
    CHECK_INT(wf_global_policy(), WF_POLICY_FLOAT32);
    CHECK_INT(wf_model_policy(m), WF_POLICY_MIXED_BFLOAT16);
    add(m, dense(3, WF_ACT_NONE));
    CHECK_INT(node_dtype(m, "dense/MatMul"), WF_BF16);
    wf_model_free(m);
}

static void test_policy_errors(void)
{
    int64_t s[1] = {4};
    wf_model *m = new_model(1, s, 1, WF_POLICY_MIXED_BFLOAT16);
    if (!m) return;
    CHECK_ERR(wf_model_set_policy(m, (wf_dtype_policy)-1), WF_INVALID_ARGUMENT, "unknown dtype policy -1");
    CHECK_INT(wf_model_policy(m), WF_POLICY_MIXED_BFLOAT16);
    CHECK_OK(wf_model_set_policy(m, WF_POLICY_DEFAULT)); /* the global one */
    CHECK_INT(wf_model_policy(m), WF_POLICY_FLOAT32);
    CHECK_OK(wf_model_set_policy(m, WF_POLICY_MIXED_FLOAT16));
    wf_layer bad = dense(3, WF_ACT_NONE);
    bad.policy = (wf_dtype_policy)5;
    int n0 = wf_graph_num_nodes(wf_model_graph(m));
    CHECK_ERR(wf_model_add(m, &bad), WF_INVALID_ARGUMENT, "Dense layer: unknown dtype policy 5");
    CHECK_INT(wf_graph_num_nodes(wf_model_graph(m)), n0);
    add(m, dense(3, WF_ACT_NONE));
    CHECK_ERR(wf_model_set_policy(m, WF_POLICY_FLOAT32), WF_FAILED_PRECONDITION,
              "already has 1 layer (the first is 'dense')");
    CHECK_INT(wf_model_policy(m), WF_POLICY_MIXED_FLOAT16);
    CHECK_ERR(wf_model_set_policy(NULL, WF_POLICY_FLOAT32), WF_INVALID_ARGUMENT, "model is NULL");
    double sc = 0;
    CHECK_ERR(wf_model_loss_scale(m, &sc, NULL), WF_FAILED_PRECONDITION, "compile the model first");

    /* bad loss-scale figures: the model stays as it was and compiles afterwards */
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.loss = WF_LOSS_MSE;
    o.accuracy = 0;
    n0 = wf_graph_num_nodes(wf_model_graph(m));
    o.initial_loss_scale = 0.5;
    CHECK_ERR(wf_model_compile(m, g_ctx, &o), WF_INVALID_ARGUMENT, "initial_loss_scale is 0.5");
    o.initial_loss_scale = INFINITY;
    CHECK_ERR(wf_model_compile(m, g_ctx, &o), WF_INVALID_ARGUMENT, "initial_loss_scale is inf");
    o.initial_loss_scale = 0;
    o.loss_scale_growth_interval = -2;
    CHECK_ERR(wf_model_compile(m, g_ctx, &o), WF_INVALID_ARGUMENT, "loss_scale_growth_interval is -2");
    CHECK_INT(wf_graph_num_nodes(wf_model_graph(m)), n0);
    CHECK_INT(wf_output_dtype(wf_model_output(m)), WF_F16);
    o.loss_scale_growth_interval = 0;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    CHECK_INT(wf_output_dtype(wf_model_output(m)), WF_F32);
    int64_t good = -1;
    CHECK_OK(wf_model_loss_scale(m, &sc, &good));
    CHECK(sc == 32768.0);
    CHECK_INT(good, 0);
    wf_model_free(m);

    /* no f16 layer: no loss scaling, scale 1 */
    m = new_model(1, s, 1, WF_POLICY_MIXED_BFLOAT16);
    add(m, dense(3, WF_ACT_NONE));
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    CHECK_OK(wf_model_loss_scale(m, &sc, &good));
    CHECK(sc == 1.0);
    CHECK_INT(good, 0);
    wf_node *n = NULL;
    CHECK_ERR(wf_graph_find(wf_model_graph(m), "optimizer/loss_scale", &n), WF_NOT_FOUND, "loss_scale");
    wf_model_free(m);
}

/* ---- the graph a policy builds ------------------------------------------------------------------- */

static void test_mixed_graph(void)
{
    int64_t s[2] = {6, 6};
    wf_model *m = new_model(2, s, 3, WF_POLICY_MIXED_BFLOAT16);
    if (!m) return;
    add(m, layer(WF_LAYER_FLATTEN));
    add(m, dense(8, WF_ACT_RELU));
    add(m, dense(4, WF_ACT_SOFTMAX));
    /* the input, two kernels, two biases, and the softmax's input to f32: nothing else */
    CHECK_INT(count_op(m, "Cast"), 6);
    CHECK_INT(node_dtype(m, "flatten/Cast"), WF_BF16);
    CHECK_INT(node_dtype(m, "flatten/Flatten"), WF_BF16);
    CHECK_INT(node_dtype(m, "dense/Cast_kernel"), WF_BF16);
    CHECK_INT(node_dtype(m, "dense/Cast_bias"), WF_BF16);
    CHECK_INT(node_dtype(m, "dense/MatMul"), WF_BF16);
    CHECK_INT(node_dtype(m, "dense/BiasAdd"), WF_BF16);
    CHECK_INT(node_dtype(m, "dense/Relu"), WF_BF16);
    CHECK_INT(node_dtype(m, "dense_1/MatMul"), WF_BF16);
    CHECK_INT(node_dtype(m, "dense_1/Softmax_input_f32"), WF_F32);
    CHECK_INT(node_dtype(m, "dense_1/Softmax"), WF_F32);
    /* the master variables stay f32 */
    const char *vars[4] = {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"};
    for (int i = 0; i < 4; i++) {
        CHECK(!strcmp(wf_node_op(wf_graph_node(wf_model_graph(m), 0)), "Placeholder"));
        CHECK_INT(node_dtype(m, vars[i]), WF_F32);
    }
    wf_compile_options o;
    wf_compile_options_init(&o);
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    /* the loss reads the logits in f32; the output is already f32 (softmax) so needs no cast */
    CHECK_INT(node_dtype(m, "loss/logits_f32"), WF_F32);
    CHECK_INT(node_dtype(m, "loss"), WF_F32);
    CHECK_INT(wf_output_dtype(wf_model_output(m)), WF_F32);
    wf_node *n = NULL;
    CHECK_ERR(wf_graph_find(wf_model_graph(m), "model/output_f32", &n), WF_NOT_FOUND, "output_f32");
    for (int i = 0; i < 4; i++) CHECK_INT(node_dtype(m, vars[i]), WF_F32);
    /* the optimizer updates f32 variables with f32 gradients (Cast's gradient casts back) */
    CHECK_INT(node_dtype(m, "gradients/dense/Cast_kernel/Cast"), WF_F32);
    CHECK_INT(node_dtype(m, "optimizer/dense/kernel/apply_adam"), WF_F32);
    /* bf16 trains without loss scaling */
    CHECK_ERR(wf_graph_find(wf_model_graph(m), "optimizer/scaled_loss", &n), WF_NOT_FOUND, "scaled_loss");
    /* predict gives f32 */
    int64_t xd[3] = {2, 6, 6};
    float xv[72];
    for (int i = 0; i < 72; i++) xv[i] = (float)urand();
    wf_tensor *x = tensor_f32(3, xd, xv), *y = NULL;
    CHECK_OK(wf_model_predict(m, x, 2, &y));
    if (y) {
        CHECK_INT(wf_tensor_dtype(y), WF_F32);
        const float *p = wf_tensor_data(y);
        for (int r = 0; r < 2; r++) CHECK_NEAR(p[4 * r] + p[4 * r + 1] + p[4 * r + 2] + p[4 * r + 3], 1, 1e-5);
    }
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_model_free(m);

    /* per-layer policies: a float32 layer after mixed ones casts back; the normalisations compute in
     * f32 and hand the compute dtype on; an output in f16 is cast to f32 at compile */
    int64_t s1[1] = {5};
    m = new_model(1, s1, 4, WF_POLICY_MIXED_FLOAT16);
    add(m, dense(6, WF_ACT_TANH));
    add(m, layer(WF_LAYER_BATCHNORM));
    add(m, layer(WF_LAYER_LAYERNORM));
    wf_layer f32 = dense(3, WF_ACT_NONE);
    f32.policy = WF_POLICY_FLOAT32;
    add(m, f32);
    add(m, dense(2, WF_ACT_NONE));
    CHECK_INT(node_dtype(m, "dense/Tanh"), WF_F16);
    CHECK_INT(node_dtype(m, "batch_normalization/Cast"), WF_F32);
    CHECK_INT(node_dtype(m, "batch_normalization/BatchNormalization"), WF_F32);
    CHECK_INT(node_dtype(m, "batch_normalization/Cast_output"), WF_F16);
    CHECK_INT(node_dtype(m, "layer_normalization/LayerNormalization"), WF_F32);
    CHECK_INT(node_dtype(m, "layer_normalization/Cast_output"), WF_F16);
    CHECK_INT(node_dtype(m, "dense_1/Cast"), WF_F32);
    CHECK_INT(node_dtype(m, "dense_1/MatMul"), WF_F32);
    CHECK_ERR(wf_graph_find(wf_model_graph(m), "dense_1/Cast_kernel", &n), WF_NOT_FOUND, "Cast_kernel");
    CHECK_INT(node_dtype(m, "dense_2/Cast"), WF_F16);
    CHECK_INT(node_dtype(m, "dense_2/MatMul"), WF_F16);
    CHECK_INT(node_dtype(m, "batch_normalization/moving_mean"), WF_F32);
    wf_compile_options_init(&o);
    o.loss = WF_LOSS_MSE;
    o.accuracy = 0;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    CHECK_INT(node_dtype(m, "model/output_f32"), WF_F32);
    CHECK_INT(node_dtype(m, "train/model/output_f32"), WF_F32); /* BatchNorm trains on its own path */
    CHECK_INT(node_dtype(m, "train/batch_normalization/BatchNormalization"), WF_F32);
    CHECK_INT(node_dtype(m, "train/batch_normalization/moving_mean_new"), WF_F32);
    CHECK_INT(node_dtype(m, "optimizer/scaled_loss"), WF_F32);
    int64_t xd2[2] = {4, 5}, yd[2] = {4, 2};
    float xv2[20], yv[8];
    for (int i = 0; i < 20; i++) xv2[i] = (float)(urand() * 2 - 1);
    for (int i = 0; i < 8; i++) yv[i] = (float)urand();
    wf_tensor *x2 = tensor_f32(2, xd2, xv2), *yt = tensor_f32(2, yd, yv);
    double l0 = NAN, l1 = NAN;
    CHECK_OK(wf_model_train_step(m, x2, yt, &l0, NULL));
    for (int i = 0; i < 20; i++) CHECK_OK(wf_model_train_step(m, x2, yt, &l1, NULL));
    CHECK(isfinite(l0) && l1 < l0);
    wf_tensor_free(x2);
    wf_tensor_free(yt);
    wf_model_free(m);
}

/* Embedding under mixed_bfloat16 gathers from the f32 table and casts the rows (Keras 3), so its
 * gradient is summed in f32; the model trains. */
static void test_embedding(void)
{
    int64_t s[1] = {3};
    wf_model *m = NULL;
    CHECK_OK(wf_model_new(WF_I64, 1, s, 2, &m));
    if (!m) return;
    CHECK_OK(wf_model_set_policy(m, WF_POLICY_MIXED_BFLOAT16));
    wf_layer e = layer(WF_LAYER_EMBEDDING);
    e.input_dim = 10;
    e.output_dim = 4;
    add(m, e);
    add(m, layer(WF_LAYER_FLATTEN));
    add(m, dense(2, WF_ACT_SOFTMAX));
    CHECK_INT(node_dtype(m, "embedding/Gather"), WF_F32);
    CHECK_INT(node_dtype(m, "embedding/Cast_output"), WF_BF16);
    CHECK_INT(node_dtype(m, "flatten/Flatten"), WF_BF16);
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.optimizer.learning_rate = 0.05;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    CHECK_INT(node_dtype(m, "gradients/embedding/Cast_output/Cast"), WF_F32);
    int64_t xd[2] = {6, 3}, iv[18] = {1, 1, 2, 3, 3, 3, 4, 1, 5, 6, 6, 7, 8, 9, 1, 2, 2, 2}, yv[6] = {0, 1, 0, 1, 0, 1};
    wf_tensor *x = NULL, *y = labels_i64(6, yv);
    CHECK_OK(wf_tensor_new(WF_I64, 2, xd, iv, &x));
    double l0 = NAN, l1 = NAN;
    CHECK_OK(wf_model_train_step(m, x, y, &l0, NULL));
    for (int i = 0; i < 30; i++) CHECK_OK(wf_model_train_step(m, x, y, &l1, NULL));
    CHECK(isfinite(l0) && l1 < l0 - 0.1);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_model_free(m);
}

static void test_summary_policy(void)
{
    int64_t s[1] = {4};
    wf_model *m = new_model(1, s, 1, WF_POLICY_MIXED_FLOAT16);
    if (!m) return;
    add(m, dense(3, WF_ACT_RELU));
    wf_layer l = dense(2, WF_ACT_SOFTMAX);
    l.policy = WF_POLICY_FLOAT32;
    add(m, l);
    char *t = NULL;
    CHECK_OK(wf_model_summary(m, &t));
    CHECK_STR_CONTAINS(t, "Param #  Policy");
    CHECK_STR_CONTAINS(t, "15  mixed_float16\n");
    CHECK_STR_CONTAINS(t, "8  float32\n");
    wf_free(t);
    wf_model_free(m);
    m = new_model(1, s, 1, WF_POLICY_FLOAT32);
    add(m, dense(3, WF_ACT_RELU));
    CHECK_OK(wf_model_summary(m, &t));
    CHECK(t && !strstr(t, "Policy") && !strstr(t, "float32"));
    wf_free(t);
    wf_model_free(m);
}

/* ---- training agrees with f32 ------------------------------------------------------------------- */

typedef enum { NET_MLP, NET_CNN, NET_DROPOUT_BN } net_kind;

static wf_model *build_net(net_kind k, wf_dtype_policy p, double initial_scale)
{
    int64_t s2[2] = {8, 8}, s1[1] = {12};
    wf_model *m = k == NET_DROPOUT_BN ? new_model(1, s1, 11, p) : new_model(2, s2, 11, p);
    if (!m) return NULL;
    if (k == NET_CNN) {
        wf_layer r = layer(WF_LAYER_RESHAPE);
        r.target_rank = 3;
        r.target[0] = 1, r.target[1] = 8, r.target[2] = 8;
        add(m, r);
        wf_layer c = layer(WF_LAYER_CONV2D);
        c.filters = 4;
        c.activation = WF_ACT_RELU;
        add(m, c);
        add(m, layer(WF_LAYER_MAXPOOL2D));
    }
    if (k == NET_DROPOUT_BN) {
        add(m, dense(16, WF_ACT_RELU));
        add(m, layer(WF_LAYER_BATCHNORM));
        wf_layer d = layer(WF_LAYER_DROPOUT);
        d.rate = 0.25;
        add(m, d);
    } else {
        add(m, layer(WF_LAYER_FLATTEN));
        add(m, dense(16, WF_ACT_RELU));
    }
    add(m, dense(3, WF_ACT_SOFTMAX));
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.optimizer.learning_rate = 0.01;
    o.initial_loss_scale = initial_scale;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    return m;
}

/* Trains the same network, from the same initial weights, under float32, mixed_bfloat16 and
 * mixed_float16 on the same batches: each step's loss and the final weights agree within the compute
 * dtype's precision (bf16 keeps 8 significant bits, f16 11), and training lowers the loss. */
static void train_agrees(net_kind k, const char *what)
{
    enum { N = 32, STEPS = 8 };
    int64_t feat = k == NET_DROPOUT_BN ? 12 : 64;
    float *xv = malloc(sizeof(float) * (size_t)(N * feat));
    int64_t yv[N];
    for (int i = 0; i < N; i++) {
        yv[i] = i % 3;
        for (int j = 0; j < feat; j++) xv[i * feat + j] = (float)(urand() + (j % 3 == yv[i] ? 0.5 : 0));
    }
    int64_t xd3[3] = {N, 8, 8}, xd2[2] = {N, 12};
    wf_tensor *x = k == NET_DROPOUT_BN ? tensor_f32(2, xd2, xv) : tensor_f32(3, xd3, xv), *y = labels_i64(N, yv);
    free(xv);
    const wf_dtype_policy pol[3] = {WF_POLICY_FLOAT32, WF_POLICY_MIXED_BFLOAT16, WF_POLICY_MIXED_FLOAT16};
    const double tol[3] = {0, 0.03, 0.005};
    double loss[3][STEPS];
    float *w[3] = {NULL, NULL, NULL};
    int64_t nw = 0;
    for (int p = 0; p < 3; p++) {
        wf_model *m = build_net(k, pol[p], 0);
        if (!m) continue;
        for (int st = 0; st < STEPS; st++) {
            loss[p][st] = NAN;
            CHECK_OK(wf_model_train_step(m, x, y, &loss[p][st], NULL));
        }
        w[p] = var_f32(m, "dense_1/kernel", &nw);
        if (pol[p] == WF_POLICY_MIXED_FLOAT16) {
            double sc = 0;
            int64_t good = -1;
            CHECK_OK(wf_model_loss_scale(m, &sc, &good));
            CHECK(sc == 32768.0);
            CHECK_INT(good, STEPS);
        }
        wf_model_free(m);
    }
    for (int p = 1; p < 3; p++)
        for (int st = 0; st < STEPS; st++)
            if (!(fabs(loss[p][st] - loss[0][st]) <= tol[p] * (1 + fabs(loss[0][st]))))
                CHECK_FAIL_("%s, %s, step %d: loss %.6f vs f32 %.6f", what, wf_policy_name(pol[p]), st, loss[p][st],
                            loss[0][st]);
    CHECK(loss[0][STEPS - 1] < loss[0][0] - 0.05);
    for (int p = 1; p < 3 && w[0]; p++)
        for (int64_t i = 0; w[p] && i < nw; i++)
            if (!(fabs(w[p][i] - w[0][i]) <= 4 * tol[p] * (0.1 + fabs(w[0][i])))) {
                CHECK_FAIL_("%s, %s: dense_1/kernel[%lld] %.6f vs f32 %.6f", what, wf_policy_name(pol[p]),
                            (long long)i, w[p][i], w[0][i]);
                break;
            }
    for (int p = 0; p < 3; p++) free(w[p]);
    wf_tensor_free(x);
    wf_tensor_free(y);
}

static void test_train_mlp(void) { train_agrees(NET_MLP, "MLP"); }
static void test_train_cnn(void) { train_agrees(NET_CNN, "CNN"); }
static void test_train_dropout_batchnorm(void)
{
    /* Dropout draws its mask in the compute dtype: the same (seed, step) hash rounded to bf16/f16
     * keeps the same units but for draws within a rounding of the rate, so the losses still agree */
    train_agrees(NET_DROPOUT_BN, "Dense-BatchNorm-Dropout");
    wf_model *m = build_net(NET_DROPOUT_BN, WF_POLICY_MIXED_BFLOAT16, 0);
    if (!m) return;
    CHECK_INT(node_dtype(m, "train/dropout/uniform"), WF_BF16);
    CHECK_INT(node_dtype(m, "train/dropout/keep_scaled"), WF_BF16);
    CHECK_INT(node_dtype(m, "train/dropout/dropped"), WF_BF16);
    wf_model_free(m);
}

/* ---- gradients through Cast, reductions ---------------------------------------------------------- */

static wf_tensor *run1(wf_graph *g, wf_output fetch)
{
    wf_session *s = NULL;
    wf_tensor *t = NULL;
    CHECK_OK(wf_session_new(g_ctx, g, NULL, &s));
    if (s) CHECK_OK(wf_session_run(s, NULL, 0, &fetch, 1, &t, NULL));
    wf_session_free(s);
    return t;
}

/* d/dw sum(Cast(Cast(x, lowp) * Cast(w, lowp), f32)) = Cast(x, lowp) as f32, in w's dtype */
static void test_gradient_through_cast(void)
{
    const wf_dtype lowp[2] = {WF_BF16, WF_F16};
    for (int k = 0; k < 2; k++) {
        wf_graph *g = NULL;
        CHECK_OK(wf_graph_new(&g));
        if (!g) return;
        int64_t d[1] = {5};
        float xv[5] = {1.0f / 3, -2.7182818f, 1000.1f, 1e-3f, 7}, wv[5] = {0.5f, 2, -1, 3, 0.25f};
        wf_tensor *xt = tensor_f32(1, d, xv), *wt = tensor_f32(1, d, wv);
        wf_output x, w, xc, wc, p, pf, sum, dw;
        wf_attr tl = wf_attr_dtype("to", lowp[k]), tf = wf_attr_dtype("to", WF_F32), kd = wf_attr_int("keepdims", 0);
        wf_node *n;
        CHECK_OK(wf_const(g, "x", xt, &x));
        CHECK_OK(wf_variable(g, "w", wt, &w));
        CHECK_OK(wf_op(g, "Cast", "xc", &x, 1, &tl, 1, &n));
        xc = wf_out(n, 0);
        CHECK_OK(wf_op(g, "Cast", "wc", &w, 1, &tl, 1, &n));
        wc = wf_out(n, 0);
        CHECK_OK(wf_mul(g, "p", xc, wc, &p));
        CHECK_OK(wf_op(g, "Cast", "pf", &p, 1, &tf, 1, &n));
        pf = wf_out(n, 0);
        CHECK_OK(wf_op(g, "ReduceSum", "sum", &pf, 1, &kd, 1, &n));
        sum = wf_out(n, 0);
        CHECK_OK(wf_gradients(g, &sum, 1, NULL, &w, 1, &dw));
        CHECK(dw.node && wf_output_dtype(dw) == WF_F32);
        wf_tensor *t = dw.node ? run1(g, dw) : NULL;
        if (t) {
            const float *v = wf_tensor_data(t);
            for (int i = 0; i < 5; i++) {
                float want = k ? wf_f16_to_f32(wf_f32_to_f16(xv[i])) : wf_bf16_to_f32(wf_f32_to_bf16(xv[i]));
                CHECK(v[i] == want);
            }
        }
        wf_tensor_free(t);
        wf_tensor_free(xt);
        wf_tensor_free(wt);
        wf_graph_free(g);
    }
}

/* ReduceSum and ReduceMean of bf16/f16 accumulate in f32 or wider: 3000 ones sum to 3000 (rounded
 * once), where a bf16 running sum stalls at 256 and an f16 one at 2048. Both along the reduced axis
 * (horizontal) and across rows (vertical, as BiasAdd's gradient sums over the batch). */
static void test_lowp_reductions(void)
{
    const wf_dtype lowp[2] = {WF_BF16, WF_F16};
    for (int k = 0; k < 2; k++)
        for (int axis = 0; axis < 2; axis++) {
            wf_graph *g = NULL;
            CHECK_OK(wf_graph_new(&g));
            if (!g) return;
            int64_t d[2] = {axis ? 2 : 3000, axis ? 3000 : 2};
            wf_tensor *t = NULL;
            CHECK_OK(wf_tensor_new(lowp[k], 2, d, NULL, &t));
            uint16_t one = k ? wf_f32_to_f16(1) : wf_f32_to_bf16(1);
            for (int64_t i = 0; i < 6000; i++) ((uint16_t *)wf_tensor_data(t))[i] = one;
            wf_output c, r, mean;
            int64_t ax[1] = {axis};
            wf_attr at[2] = {wf_attr_ints("axes", ax, 1), wf_attr_int("keepdims", 0)};
            wf_node *n;
            CHECK_OK(wf_const(g, "c", t, &c));
            CHECK_OK(wf_op(g, "ReduceSum", "sum", &c, 1, at, 2, &n));
            r = wf_out(n, 0);
            CHECK_OK(wf_op(g, "ReduceMean", "mean", &c, 1, at, 2, &n));
            mean = wf_out(n, 0);
            wf_tensor *o = run1(g, r), *om = run1(g, mean);
            if (o && om) {
                const uint16_t *v = wf_tensor_data(o), *vm = wf_tensor_data(om);
                for (int i = 0; i < 2; i++) {
                    double got = k ? wf_f16_to_f32(v[i]) : wf_bf16_to_f32(v[i]);
                    double gm = k ? wf_f16_to_f32(vm[i]) : wf_bf16_to_f32(vm[i]);
                    CHECK_NEAR(got, 3000, k ? 0 : 8); /* bf16 holds 3008 or 2992 next to 3000 */
                    CHECK(gm == 1);
                }
            }
            wf_tensor_free(o);
            wf_tensor_free(om);
            wf_tensor_free(t);
            wf_graph_free(g);
        }
}

/* ---- dynamic loss scaling -------------------------------------------------------------------------- */

static const char *const g_ls_vars[] = {"dense/kernel", "dense/bias", "optimizer/dense/kernel/m",
                                        "optimizer/dense/kernel/v"};

/* mixed_float16 with initial scale 2 and growth interval 3, step by step: finite steps count, the
 * third in a row doubles the scale; a step whose input holds a huge value (inf in f16, NaN gradients)
 * changes no variable, slot or counter, halves the scale (not below 1) and restarts the count. The
 * state survives a checkpoint round trip into a fresh model, which then continues identically. */
static void test_loss_scale_rules(void)
{
    enum { N = 4, F = 3 };
    int64_t s[1] = {F};
    wf_model *m = new_model(1, s, 5, WF_POLICY_MIXED_FLOAT16);
    if (!m) return;
    add(m, dense(2, WF_ACT_NONE));
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.loss = WF_LOSS_MSE;
    o.accuracy = 0;
    o.optimizer.learning_rate = 0.05;
    o.initial_loss_scale = 2;
    o.loss_scale_growth_interval = 3;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    float xv[N * F], bad[N * F], yv[N * 2];
    for (int i = 0; i < N * F; i++) xv[i] = bad[i] = (float)(urand() * 2 - 1);
    for (int i = 0; i < N * 2; i++) yv[i] = (float)urand();
    bad[4] = 1e30f; /* inf once cast to f16 */
    int64_t xd[2] = {N, F}, yd[2] = {N, 2};
    wf_tensor *x = tensor_f32(2, xd, xv), *xb = tensor_f32(2, xd, bad), *y = tensor_f32(2, yd, yv);
    /* step: finite?, then the expected scale and good-step count after it (TF's DynamicLossScale) */
    static const struct { bool finite; double scale; int64_t good; } seq[] = {
        {false, 1, 0}, {false, 1, 0}, /* halved, then held at 1 */
        {true, 1, 1},  {true, 1, 2},  {true, 2, 0}, /* the third finite step doubles */
        {true, 2, 1},  {false, 1, 0}, {true, 1, 1}, {true, 1, 2}, {true, 2, 0}, {true, 2, 1},
    };
    int64_t adam_steps = 0;
    char path[] = "/tmp/weft-test-mixed-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    for (size_t st = 0; st < sizeof seq / sizeof *seq && x && xb && y; st++) {
        float *before[4], *after[4];
        int64_t nv[4];
        for (int v = 0; v < 4; v++) before[v] = var_f32(m, g_ls_vars[v], &nv[v]);
        double loss = 0;
        CHECK_OK(wf_model_train_step(m, seq[st].finite ? x : xb, y, &loss, NULL));
        CHECK(seq[st].finite ? isfinite(loss) : !isfinite(loss));
        adam_steps += seq[st].finite;
        double sc = 0;
        int64_t good = -1;
        CHECK_OK(wf_model_loss_scale(m, &sc, &good));
        if (sc != seq[st].scale || good != seq[st].good)
            CHECK_FAIL_("step %zu: scale %g, good steps %lld; want %g, %lld", st, sc, (long long)good, seq[st].scale,
                        (long long)seq[st].good);
        CHECK_INT(var_i64(m, "optimizer/step"), adam_steps);
        for (int v = 0; v < 4; v++) {
            after[v] = var_f32(m, g_ls_vars[v], NULL);
            bool same = before[v] && after[v] && !memcmp(before[v], after[v], sizeof(float) * (size_t)nv[v]);
            bool finite = true;
            for (int64_t i = 0; after[v] && i < nv[v]; i++) finite &= isfinite(after[v][i]);
            CHECK(finite);
            /* a skipped step leaves every bit; a taken one moves the kernel and its slots */
            if (!seq[st].finite && !same) CHECK_FAIL_("step %zu skipped but '%s' changed", st, g_ls_vars[v]);
            if (seq[st].finite && v != 1 && same) CHECK_FAIL_("step %zu taken but '%s' did not change", st, g_ls_vars[v]);
            free(before[v]);
            free(after[v]);
        }
        if (st == 7) CHECK_OK(wf_session_save(wf_model_session(m), path));
    }
    /* the checkpoint after step 7 (scale 1, 1 good step) into a fresh model: the same state, and the
     * next three steps as the original's (scale doubles at step 9) */
    wf_model *r = new_model(1, s, 77, WF_POLICY_MIXED_FLOAT16);
    if (r) {
        add(r, dense(2, WF_ACT_NONE));
        CHECK_OK(wf_model_compile(r, g_ctx, &o));
        double sc = 0;
        int64_t good = -1;
        CHECK_OK(wf_model_loss_scale(r, &sc, &good));
        CHECK(sc == 2 && good == 0); /* before the restore: the initial figures */
        CHECK_OK(wf_session_restore(wf_model_session(r), path));
        CHECK_OK(wf_model_loss_scale(r, &sc, &good));
        CHECK(sc == 1 && good == 1);
        for (int st = 8; st < 11; st++) {
            double loss = 0;
            CHECK_OK(wf_model_train_step(r, x, y, &loss, NULL));
            CHECK_OK(wf_model_loss_scale(r, &sc, &good));
            CHECK(sc == seq[st].scale && good == seq[st].good);
        }
        int64_t n1 = 0, n2 = 0;
        float *a = var_f32(m, "dense/kernel", &n1), *b = var_f32(r, "dense/kernel", &n2);
        CHECK(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * (size_t)n1));
        CHECK_INT(var_i64(r, "optimizer/step"), adam_steps);
        free(a);
        free(b);
        wf_model_free(r);
    }
    unlink(path);
    wf_tensor_free(x);
    wf_tensor_free(xb);
    wf_tensor_free(y);
    wf_model_free(m);
}

/* The default scale, 2^15, overflows f16 when the loss's gradient is large: the first steps are
 * skipped and halve the scale until the gradients fit, then training proceeds (Keras's behaviour on a
 * fresh model). */
static void test_loss_scale_overflow_recovers(void)
{
    enum { N = 8, F = 4 };
    int64_t s[1] = {F};
    float xv[N * F], yv[N];
    for (int i = 0; i < N * F; i++) xv[i] = (float)(urand() * 40 - 20);
    for (int i = 0; i < N; i++) yv[i] = 3000; /* MSE gradient ~6000 at the output: 2^15 times that overflows f16 */
    int64_t xd[2] = {N, F}, yd[2] = {N, 1};
    wf_tensor *x = tensor_f32(2, xd, xv), *y = tensor_f32(2, yd, yv);
    wf_model *m = new_model(1, s, 8, WF_POLICY_MIXED_FLOAT16);
    if (!m || !x || !y) goto out;
    add(m, dense(1, WF_ACT_NONE));
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.loss = WF_LOSS_MSE;
    o.accuracy = 0;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    double sc = 0;
    int64_t good = 0;
    int skipped = 0;
    for (int st = 0; st < 20; st++) {
        double before = 0;
        CHECK_OK(wf_model_loss_scale(m, &before, NULL));
        CHECK_OK(wf_model_train_step(m, x, y, NULL, NULL));
        CHECK_OK(wf_model_loss_scale(m, &sc, &good));
        if (sc < before) skipped++;
    }
    CHECK(skipped >= 1);
    CHECK(sc < 32768 && sc >= 1);
    CHECK_INT(var_i64(m, "optimizer/step"), 20 - skipped);
    CHECK(good >= 1);
out:
    wf_model_free(m);
    wf_tensor_free(x);
    wf_tensor_free(y);
}

int main(void)
{
    wf_status *s = wf_context_new(NULL, &g_ctx);
    if (s) {
        fprintf(stderr, "context: %s\n", wf_status_message(s));
        wf_status_free(s);
        return 1;
    }
    RUN_TEST(test_policy_names);
    RUN_TEST(test_policy_errors);
    RUN_TEST(test_mixed_graph);
    RUN_TEST(test_embedding);
    RUN_TEST(test_summary_policy);
    RUN_TEST(test_train_mlp);
    RUN_TEST(test_train_cnn);
    RUN_TEST(test_train_dropout_batchnorm);
    RUN_TEST(test_gradient_through_cast);
    RUN_TEST(test_lowp_reductions);
    RUN_TEST(test_loss_scale_rules);
    RUN_TEST(test_loss_scale_overflow_recovers);
    wf_context_free(g_ctx);
    return check_summary();
}
