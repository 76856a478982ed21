/* The Sequential model API: every layer's forward pass against a reference computed here in double
 * from the layer's own variables, training behaviour (Dropout, BatchNorm statistics), learning on
 * synthetic and real data on CPU and OpenCL, strict placement across two devices, checkpoint resume,
 * ONNX export, and bad input. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

static wf_context *g_ctx;
static int g_have_ocl;
/* "--device OPENCL:0": the run that also trains on OPENCL:0 (run-tests.sh's OpenCL section). Without
 * it, the tests that need OPENCL:0 run only their CPU part: they belong to that other run, so their
 * absence here is not a skip. With it and no OPENCL:0, they are skipped and say so. */
static const char *g_device;

static int ocl_present(const char *test)
{
    if (g_have_ocl) return 1;
    if (g_device) CHECK_SKIP(test, "no OPENCL:0 device");
    return 0;
}

static wf_tensor *tensor_f32(int rank, const int64_t *dims, const double *v)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, rank, dims, NULL, &t));
    if (!t) return NULL;
    float *p = wf_tensor_data(t);
    for (int64_t i = 0; i < wf_tensor_size(t); i++) p[i] = (float)v[i];
    return t;
}

static double *var_values(wf_model *m, const char *name, int64_t *n)
{
    wf_tensor *t = NULL;
    CHECK_OK(wf_session_get_variable(wf_model_session(m), name, &t));
    if (!t) return NULL;
    double *v = malloc(sizeof(double) * (size_t)(wf_tensor_size(t) + 1));
    for (int64_t i = 0; i < wf_tensor_size(t); i++) v[i] = ((const float *)wf_tensor_data(t))[i];
    if (n) *n = wf_tensor_size(t);
    wf_tensor_free(t);
    return v;
}

static uint64_t rng_state = 12345;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static wf_model *new_model(int rank, const int64_t *shape, uint64_t seed)
{
    wf_model *m = NULL;
    CHECK_OK(wf_model_new(WF_F32, rank, shape, seed, &m));
    return m;
}

static void add(wf_model *m, wf_layer l) { CHECK_OK(wf_model_add(m, &l)); }

static wf_layer layer(wf_layer_kind k)
{
    wf_layer l;
    wf_layer_init(&l, k);
    return l;
}

static void add_dense(wf_model *m, int64_t units, wf_activation act)
{
    wf_layer d = layer(WF_LAYER_DENSE);
    d.units = units;
    d.activation = act;
    add(m, d);
}

static void compile(wf_model *m, wf_loss_kind loss, int accuracy)
{
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.loss = loss;
    o.accuracy = accuracy;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
}

/* predict() of x, as doubles */
static double *predict(wf_model *m, const wf_tensor *x, int64_t *n)
{
    wf_tensor *y = NULL;
    CHECK_OK(wf_model_predict(m, x, 3, &y));
    if (!y) return NULL;
    double *v = malloc(sizeof(double) * (size_t)(wf_tensor_size(y) + 1));
    for (int64_t i = 0; i < wf_tensor_size(y); i++) v[i] = ((const float *)wf_tensor_data(y))[i];
    if (n) *n = wf_tensor_size(y);
    wf_tensor_free(y);
    return v;
}

/* ---- layers' forward passes ------------------------------------------------------------------------ */

static void test_dense_activations(void)
{
    enum { N = 5, IN = 6, U = 4 };
    const wf_activation acts[] = {WF_ACT_NONE, WF_ACT_RELU, WF_ACT_SIGMOID, WF_ACT_TANH, WF_ACT_SOFTMAX,
                                  WF_ACT_ELU, WF_ACT_SELU, WF_ACT_GELU, WF_ACT_SOFTPLUS, WF_ACT_LEAKY_RELU};
    double xv[N * IN];
    for (int i = 0; i < N * IN; i++) xv[i] = urand() * 4 - 2;
    int64_t xd[2] = {N, IN}, in_shape[1] = {IN};
    wf_tensor *x = tensor_f32(2, xd, xv);
    for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
        wf_model *m = new_model(1, in_shape, 7 + a);
        wf_layer l = layer(WF_LAYER_DENSE);
        l.units = U;
        l.activation = acts[a];
        l.bias_init = (wf_init){.kind = WF_INIT_UNIFORM, .minval = -0.5, .maxval = 0.5, .seed = 3};
        add(m, l);
        compile(m, WF_LOSS_MSE, 0);
        double *W = var_values(m, "dense/kernel", NULL), *b = var_values(m, "dense/bias", NULL);
        int64_t ny = 0;
        double *y = predict(m, x, &ny);
        CHECK_INT(ny, N * U);
        for (int n = 0; y && W && b && n < N; n++) {
            double h[U], mx = -INFINITY, sum = 0;
            for (int u = 0; u < U; u++) {
                h[u] = b[u];
                for (int k = 0; k < IN; k++) h[u] += (double)(float)xv[n * IN + k] * W[k * U + u];
                mx = fmax(mx, h[u]);
            }
            for (int u = 0; u < U; u++) sum += exp(h[u] - mx);
            for (int u = 0; u < U; u++) {
                double v = h[u], r;
                switch (acts[a]) {
                case WF_ACT_RELU: r = v > 0 ? v : 0; break;
                case WF_ACT_SIGMOID: r = 1 / (1 + exp(-v)); break;
                case WF_ACT_TANH: r = tanh(v); break;
                case WF_ACT_SOFTMAX: r = exp(v - mx) / sum; break;
                case WF_ACT_ELU: r = v > 0 ? v : exp(v) - 1; break;
                case WF_ACT_SELU: r = 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * (exp(v) - 1)); break;
                case WF_ACT_GELU: r = 0.5 * v * (1 + erf(v / sqrt(2))); break;
                case WF_ACT_SOFTPLUS: r = log1p(exp(v)); break;
                case WF_ACT_LEAKY_RELU: r = v > 0 ? v : 0.2 * v; break;
                default: r = v;
                }
                CHECK_NEAR(y[n * U + u], r, 1e-5);
            }
        }
        free(W);
        free(b);
        free(y);
        wf_model_free(m);
    }
    wf_tensor_free(x);
}

/* Conv2D (same and valid, strided), MaxPool2D, AvgPool2D, Flatten against direct loops */
static void test_conv_pool(void)
{
    enum { N = 2, C = 2, H = 7, W = 6, F = 3 };
    double xv[N * C * H * W];
    for (int i = 0; i < N * C * H * W; i++) xv[i] = urand() * 2 - 1;
    int64_t in_shape[3] = {C, H, W}, xd[4] = {N, C, H, W};
    wf_tensor *x = tensor_f32(4, xd, xv);
    for (int same = 0; same < 2; same++)
        for (int pool = 0; pool < 2; pool++) {
            wf_model *m = new_model(3, in_shape, 3);
            wf_layer c = layer(WF_LAYER_CONV2D);
            c.filters = F;
            c.strides[0] = 1 + same; /* same padding with stride 2 rows */
            c.padding_same = same;
            c.activation = WF_ACT_RELU;
            c.bias_init = (wf_init){.kind = WF_INIT_CONSTANT, .value = 0.1};
            add(m, c);
            wf_layer p = layer(pool ? WF_LAYER_AVGPOOL2D : WF_LAYER_MAXPOOL2D);
            p.padding_same = same;
            add(m, p);
            add(m, layer(WF_LAYER_FLATTEN));
            compile(m, WF_LOSS_MSE, 0);
            double *K = var_values(m, "conv2d/kernel", NULL), *b = var_values(m, "conv2d/bias", NULL);
            /* conv output */
            int sh = c.strides[0], oh = same ? (H + sh - 1) / sh : (H - 3) / sh + 1, ow = same ? W : W - 2;
            int pt = same ? ((oh - 1) * sh + 3 - H) / 2 : 0, pl = same ? 1 : 0;
            double conv[N][F][8][8];
            for (int n = 0; n < N; n++)
                for (int f = 0; f < F; f++)
                    for (int i = 0; i < oh; i++)
                        for (int j = 0; j < ow; j++) {
                            double s = b[f];
                            for (int ch = 0; ch < C; ch++)
                                for (int ki = 0; ki < 3; ki++)
                                    for (int kj = 0; kj < 3; kj++) {
                                        int yi = i * sh + ki - pt, xj = j + kj - pl;
                                        if (yi < 0 || yi >= H || xj < 0 || xj >= W) continue;
                                        s += (double)(float)xv[((n * C + ch) * H + yi) * W + xj] *
                                             K[((f * C + ch) * 3 + ki) * 3 + kj];
                                    }
                            conv[n][f][i][j] = s > 0 ? s : 0;
                        }
            int ph = same ? (oh + 1) / 2 : oh / 2, pw = same ? (ow + 1) / 2 : ow / 2;
            int64_t ny = 0;
            double *y = predict(m, x, &ny);
            CHECK_INT(ny, N * F * ph * pw);
            for (int n = 0; y && n < N; n++)
                for (int f = 0; f < F; f++)
                    for (int i = 0; i < ph; i++)
                        for (int j = 0; j < pw; j++) {
                            double mx = -INFINITY, s = 0;
                            int cnt = 0;
                            for (int a = 0; a < 2; a++)
                                for (int bb = 0; bb < 2; bb++) {
                                    int yi = i * 2 + a, xj = j * 2 + bb;
                                    if (yi >= oh || xj >= ow) continue;
                                    mx = fmax(mx, conv[n][f][yi][xj]);
                                    s += conv[n][f][yi][xj];
                                    cnt++;
                                }
                            double want = pool ? s / cnt : mx;
                            CHECK_NEAR(y[((n * F + f) * ph + i) * pw + j], want, 1e-5);
                        }
            free(K);
            free(b);
            free(y);
            wf_model_free(m);
        }
    wf_tensor_free(x);
}

static void test_norms_embedding_reshape(void)
{
    /* BatchNorm (inference: moving statistics) then LayerNorm */
    enum { N = 4, F = 5 };
    int64_t in_shape[1] = {F}, xd[2] = {N, F};
    double xv[N * F];
    for (int i = 0; i < N * F; i++) xv[i] = urand() * 6 - 3;
    wf_tensor *x = tensor_f32(2, xd, xv);
    wf_model *m = new_model(1, in_shape, 5);
    add(m, layer(WF_LAYER_BATCHNORM));
    add(m, layer(WF_LAYER_LAYERNORM));
    compile(m, WF_LOSS_MSE, 0);
    double mm[F], mv[F], g[F], be[F];
    int64_t fd[1] = {F};
    for (int f = 0; f < F; f++) {
        mm[f] = urand() - 0.5;
        mv[f] = 0.5 + urand();
        g[f] = 0.5 + urand();
        be[f] = urand() - 0.5;
    }
    const char *names[4] = {"batch_normalization/moving_mean", "batch_normalization/moving_variance",
                            "batch_normalization/gamma", "layer_normalization/beta"};
    double *vals[4] = {mm, mv, g, be};
    for (int k = 0; k < 4; k++) {
        wf_tensor *t = tensor_f32(1, fd, vals[k]);
        CHECK_OK(wf_session_set_variable(wf_model_session(m), names[k], t));
        wf_tensor_free(t);
    }
    double *y = predict(m, x, NULL);
    for (int n = 0; y && n < N; n++) {
        double h[F], mean = 0, var = 0;
        for (int f = 0; f < F; f++) {
            h[f] = ((double)(float)xv[n * F + f] - mm[f]) / sqrt(mv[f] + 1e-3) * g[f];
            mean += h[f] / F;
        }
        for (int f = 0; f < F; f++) var += (h[f] - mean) * (h[f] - mean) / F;
        for (int f = 0; f < F; f++) CHECK_NEAR(y[n * F + f], (h[f] - mean) / sqrt(var + 1e-3) + be[f], 1e-4);
    }
    free(y);
    wf_model_free(m);
    wf_tensor_free(x);

    /* Embedding of i64 indices, Reshape, Flatten */
    int64_t es[1] = {3};
    m = NULL;
    CHECK_OK(wf_model_new(WF_I64, 1, es, 9, &m));
    wf_layer e = layer(WF_LAYER_EMBEDDING);
    e.input_dim = 10;
    e.output_dim = 4;
    add(m, e);
    wf_layer r = layer(WF_LAYER_RESHAPE);
    r.target_rank = 2;
    r.target[0] = 4;
    r.target[1] = 3;
    add(m, r);
    add(m, layer(WF_LAYER_FLATTEN));
    compile(m, WF_LOSS_MSE, 0);
    double *E = var_values(m, "embedding/embeddings", NULL);
    int64_t id[2] = {2, 3};
    wf_tensor *ix = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, 2, id, (int64_t[]){1, 9, 0, 4, 4, 7}, &ix));
    wf_tensor *out = NULL;
    CHECK_OK(wf_model_predict(m, ix, 8, &out));
    const int64_t idx[6] = {1, 9, 0, 4, 4, 7};
    for (int n = 0; out && E && n < 2; n++)
        for (int k = 0; k < 12; k++) /* [3, 4] row-major flattened; reshape keeps the order */
            CHECK_NEAR(((float *)wf_tensor_data(out))[n * 12 + k], E[idx[n * 3 + k / 4] * 4 + k % 4], 0);
    for (int k = 0; E && k < 40; k++) CHECK(E[k] >= -0.05 && E[k] <= 0.05);
    free(E);
    wf_tensor_free(out);
    wf_tensor_free(ix);
    wf_model_free(m);
}

static void test_summary(void)
{
    int64_t s[2] = {28, 28};
    wf_model *m = new_model(2, s, 1);
    add(m, layer(WF_LAYER_FLATTEN));
    add_dense(m, 128, WF_ACT_NONE);
    add(m, layer(WF_LAYER_BATCHNORM));
    add_dense(m, 10, WF_ACT_NONE);
    char *t = NULL;
    CHECK_OK(wf_model_summary(m, &t));
    CHECK_STR_CONTAINS(t, "flatten (Flatten)");
    CHECK_STR_CONTAINS(t, "(None, 784)");
    CHECK_STR_CONTAINS(t, "dense_1 (Dense)");
    /* 784 * 128 + 128 = 100480; BatchNorm 4 * 128 of which 256 trainable; 128 * 10 + 10 = 1290 */
    CHECK_STR_CONTAINS(t, "100480");
    CHECK_STR_CONTAINS(t, "Total params: 102282");
    CHECK_STR_CONTAINS(t, "Trainable params: 102026");
    CHECK_STR_CONTAINS(t, "Non-trainable params: 256");
    wf_free(t);
    wf_model_free(m);
}

/* ---- training behaviour -------------------------------------------------------------------------------- */

/* Dropout: identity in inference; in training zeros about `rate` of the values and scales the rest
 * by 1 / (1 - rate); a new mask each step. */
static void test_dropout(void)
{
    enum { N = 50, F = 200 };
    int64_t s[1] = {F}, xd[2] = {N, F};
    wf_model *m = new_model(1, s, 2);
    wf_layer d = layer(WF_LAYER_DROPOUT);
    d.rate = 0.3;
    add(m, d);
    add_dense(m, 1, WF_ACT_NONE);
    compile(m, WF_LOSS_MSE, 0);
    double *xv = malloc(sizeof(double) * N * F);
    for (int i = 0; i < N * F; i++) xv[i] = 1 + urand();
    wf_tensor *x = tensor_f32(2, xd, xv), *dropped[2] = {NULL, NULL};
    /* inference: the Dense sees x itself */
    wf_output flat;
    CHECK_OK(wf_graph_output(wf_model_graph(m), "train/dropout/dropped", &flat));
    for (int k = 0; k < 2; k++) {
        /* the training path's dropout output at step k (a target run advances the step) */
        wf_feed f = {wf_model_input(m), x};
        CHECK_OK(wf_session_run(wf_model_session(m), &f, 1, &flat, 1, &dropped[k], NULL));
        wf_tensor *yb = NULL;
        int64_t yd[2] = {N, 1};
        CHECK_OK(wf_tensor_new(WF_F32, 2, yd, NULL, &yb));
        memset(wf_tensor_data(yb), 0, wf_tensor_bytes(yb));
        CHECK_OK(wf_model_train_step(m, x, yb, NULL, NULL));
        wf_tensor_free(yb);
    }
    int zeros = 0, same = 0;
    for (int i = 0; dropped[0] && dropped[1] && i < N * F; i++) {
        float a = ((float *)wf_tensor_data(dropped[0]))[i], b = ((float *)wf_tensor_data(dropped[1]))[i];
        if (a == 0) zeros++;
        else CHECK_NEAR(a, (float)xv[i] / 0.7, 1e-5);
        same += (a == 0) == (b == 0);
    }
    /* 10000 draws of p = 0.3: sd 46; 6 sd bounds */
    CHECK(zeros > 3000 - 280 && zeros < 3000 + 280);
    /* the masks of two steps are independent draws: they agree with p = 0.7^2 + 0.3^2 = 0.58 (sd 49, 6 sd) */
    CHECK(same > 5800 - 300 && same < 5800 + 300);
    /* inference ignores dropout: predict = x @ W + b */
    double *W = var_values(m, "dense/kernel", NULL), *b = var_values(m, "dense/bias", NULL);
    double *y = predict(m, x, NULL);
    for (int n = 0; y && W && b && n < N; n++) {
        double r = b[0];
        for (int k = 0; k < F; k++) r += (double)(float)xv[n * F + k] * W[k];
        CHECK_NEAR(y[n], r, 1e-3);
    }
    free(W);
    free(b);
    free(y);
    free(xv);
    wf_tensor_free(dropped[0]);
    wf_tensor_free(dropped[1]);
    wf_tensor_free(x);
    wf_model_free(m);
}

/* BatchNorm in training: the output uses the batch's statistics, the moving statistics move toward
 * them by (1 - momentum). */
static void test_batchnorm_training(void)
{
    enum { N = 8, F = 3 };
    int64_t s[1] = {F}, xd[2] = {N, F}, yd[2] = {N, F};
    wf_model *m = new_model(1, s, 4);
    wf_layer bn = layer(WF_LAYER_BATCHNORM);
    bn.momentum = 0.9;
    add(m, bn);
    compile(m, WF_LOSS_MSE, 0);
    double xv[N * F], yv[N * F] = {0};
    for (int i = 0; i < N * F; i++) xv[i] = urand() * 4 + (i % F);
    wf_tensor *x = tensor_f32(2, xd, xv), *y = tensor_f32(2, yd, yv), *out = NULL;
    wf_output tr;
    CHECK_OK(wf_graph_output(wf_model_graph(m), "train/batch_normalization/BatchNormalization", &tr));
    wf_feed f = {wf_model_input(m), x};
    CHECK_OK(wf_session_run(wf_model_session(m), &f, 1, &tr, 1, &out, NULL));
    double mean[F] = {0}, var[F] = {0};
    for (int n = 0; n < N; n++)
        for (int c = 0; c < F; c++) mean[c] += (double)(float)xv[n * F + c] / N;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < F; c++) var[c] += pow((double)(float)xv[n * F + c] - mean[c], 2) / N;
    for (int n = 0; out && n < N; n++)
        for (int c = 0; c < F; c++)
            CHECK_NEAR(((float *)wf_tensor_data(out))[n * F + c], ((float)xv[n * F + c] - mean[c]) / sqrt(var[c] + 1e-3), 1e-4);
    CHECK_OK(wf_model_train_step(m, x, y, NULL, NULL));
    double *mm = var_values(m, "batch_normalization/moving_mean", NULL);
    double *mv = var_values(m, "batch_normalization/moving_variance", NULL);
    for (int c = 0; mm && mv && c < F; c++) {
        CHECK_NEAR(mm[c], 0.1 * mean[c], 1e-5);
        CHECK_NEAR(mv[c], 0.9 + 0.1 * var[c], 1e-5);
    }
    free(mm);
    free(mv);
    wf_tensor_free(out);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_model_free(m);
}

/* fit learns: two interleaved spirals-free blobs problem (XOR of signs) with an MLP */
typedef struct cb_rec {
    int calls;
    double first_loss, last_loss;
} cb_rec;

static int record(void *user, const wf_epoch_logs *lg)
{
    cb_rec *r = user;
    if (r->calls++ == 0) r->first_loss = lg->loss;
    r->last_loss = lg->loss;
    return 0;
}

/* n points uniform in [-1, 1]^2 (f32 [n, 2]) labelled by XOR of their signs (i64 [n]). */
static void xor_data(int64_t n, wf_tensor **x, wf_tensor **y)
{
    int64_t xd[2] = {n, 2}, yd[1] = {n};
    CHECK_OK(wf_tensor_new(WF_F32, 2, xd, NULL, x));
    CHECK_OK(wf_tensor_new(WF_I64, 1, yd, NULL, y));
    if (!*x || !*y) return;
    float *xp = wf_tensor_data(*x);
    int64_t *yp = wf_tensor_data(*y);
    for (int64_t i = 0; i < n; i++) {
        xp[2 * i] = (float)(urand() * 2 - 1);
        xp[2 * i + 1] = (float)(urand() * 2 - 1);
        yp[i] = (xp[2 * i] > 0) != (xp[2 * i + 1] > 0);
    }
}

static void test_fit_xor(void)
{
    enum { N = 1024 };
    int64_t s[1] = {2};
    wf_tensor *x = NULL, *y = NULL;
    xor_data(N, &x, &y);
    if (!x || !y) return;
    const int64_t *yp = wf_tensor_data(y);
    wf_model *m = new_model(1, s, 11);
    add_dense(m, 32, WF_ACT_TANH);
    add_dense(m, 2, WF_ACT_SOFTMAX);
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.optimizer.learning_rate = 0.01;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    wf_dataset *ds = NULL;
    CHECK_OK(wf_dataset_from_tensors(x, y, &ds));
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.epochs = 30;
    fo.verbose = 0;
    fo.validation_split = 0.25;
    cb_rec rec = {0};
    fo.on_epoch_end = record;
    fo.user = &rec;
    wf_epoch_logs last;
    CHECK_OK(wf_model_fit(m, ds, &fo, &last));
    CHECK_INT(rec.calls, 30);
    CHECK(rec.last_loss < rec.first_loss * 0.5);
    CHECK(last.has_validation);
    CHECK_INT(last.samples, 768);
    CHECK(last.val_accuracy > 0.93);
    double l, a;
    CHECK_OK(wf_model_evaluate(m, ds, 100, &l, &a));
    CHECK(a > 0.93);
    /* evaluate = the mean of predict's cross-entropy and argmax match, computed here */
    wf_tensor *p = NULL;
    CHECK_OK(wf_model_predict(m, x, 100, &p));
    double ce = 0, acc = 0;
    for (int i = 0; p && i < N; i++) {
        const float *r = (const float *)wf_tensor_data(p) + 2 * i;
        ce -= log(r[yp[i]]) / N;
        acc += ((r[1] > r[0]) == (yp[i] == 1)) / (double)N;
    }
    CHECK_NEAR(l, ce, 1e-4);
    CHECK_NEAR(a, acc, 1e-6);
    wf_tensor_free(p);
    wf_dataset_free(ds);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_model_free(m);
}

/* Binary cross-entropy with a sigmoid output: the loss reads the logits, accuracy thresholds the
 * probabilities at 0.5; both equal what predict's probabilities give. */
static void test_fit_binary(void)
{
    enum { N = 512 };
    int64_t s[1] = {2}, xd[2] = {N, 2}, yd[2] = {N, 1};
    wf_tensor *x = NULL, *y = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 2, xd, NULL, &x));
    CHECK_OK(wf_tensor_new(WF_F32, 2, yd, NULL, &y));
    float *xp = wf_tensor_data(x), *yp = wf_tensor_data(y);
    for (int i = 0; i < N; i++) {
        xp[2 * i] = (float)(urand() * 2 - 1);
        xp[2 * i + 1] = (float)(urand() * 2 - 1);
        yp[i] = xp[2 * i] + 0.5f * xp[2 * i + 1] > 0.1f ? 1.0f : 0.0f;
    }
    wf_model *m = new_model(1, s, 5);
    add_dense(m, 8, WF_ACT_TANH);
    add_dense(m, 1, WF_ACT_SIGMOID);
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.loss = WF_LOSS_BINARY_CROSSENTROPY;
    o.optimizer.learning_rate = 0.02;
    CHECK_OK(wf_model_compile(m, g_ctx, &o));
    wf_dataset *ds = NULL;
    CHECK_OK(wf_dataset_from_tensors(x, y, &ds));
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.epochs = 15;
    fo.verbose = 0;
    CHECK_OK(wf_model_fit(m, ds, &fo, NULL));
    double l = NAN, a = NAN;
    CHECK_OK(wf_model_evaluate(m, ds, 64, &l, &a));
    CHECK(a > 0.9);
    wf_tensor *p = NULL;
    CHECK_OK(wf_model_predict(m, x, 64, &p));
    double bce = 0, acc = 0;
    for (int i = 0; p && i < N; i++) {
        double q = ((const float *)wf_tensor_data(p))[i];
        bce -= (yp[i] * log(q) + (1 - yp[i]) * log(1 - q)) / N;
        acc += ((q > 0.5) == (yp[i] > 0.5)) / (double)N;
    }
    CHECK_NEAR(l, bce, 1e-4);
    CHECK_NEAR(a, acc, 1e-6);
    wf_tensor_free(p);
    wf_dataset_free(ds);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_model_free(m);
}

/* fit over a pipeline dataset (slices -> batch -> prefetch): the epoch's loss and accuracy, kept on the
 * device and read back every steps_per_execution steps, equal the per-step values wf_model_train_step
 * fetches from an identical model on the same batches. validation_split is refused for a pipeline;
 * evaluate and fit's validation read a pipeline's own batches. */
static void test_fit_pipeline(void)
{
    enum { N = 1024, B = 64 };
    int64_t s[1] = {2};
    wf_tensor *x = NULL, *y = NULL;
    xor_data(N, &x, &y);
    wf_model *ms[2];
    for (int k = 0; k < 2; k++) {
        ms[k] = new_model(1, s, 11);
        add_dense(ms[k], 16, WF_ACT_TANH);
        add_dense(ms[k], 2, WF_ACT_SOFTMAX);
        compile(ms[k], WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1);
    }
    wf_tensor *comps[2] = {x, y};
    wf_dataset *sl = NULL, *b = NULL, *pf = NULL;
    CHECK_OK(wf_dataset_from_tensor_slices(comps, 2, &sl));
    CHECK_OK(wf_dataset_batch(sl, B, 0, &b));
    CHECK_OK(wf_dataset_prefetch(b, 2, &pf));
    /* the reference: train_step on each batch, mean of the fetched losses */
    double ref_loss = 0;
    int steps = 0;
    for (;;) {
        wf_tensor *bx = NULL, *by = NULL;
        CHECK_OK(wf_dataset_next_batch(b, &bx, &by));
        if (!bx) break;
        double l = NAN;
        CHECK_OK(wf_model_train_step(ms[1], bx, by, &l, NULL));
        ref_loss += l;
        steps++;
        wf_tensor_free(bx);
        wf_tensor_free(by);
    }
    CHECK_INT(steps, N / B);
    ref_loss /= steps;
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.verbose = 0;
    fo.steps_per_execution = 3;
    wf_epoch_logs lg = {0};
    CHECK_OK(wf_model_fit(ms[0], pf, &fo, &lg));
    CHECK_INT(lg.steps, N / B);
    CHECK_INT(lg.samples, N);
    CHECK_NEAR(lg.loss, ref_loss, 1e-5 * fabs(ref_loss) + 1e-6);
    CHECK(lg.accuracy >= 0 && lg.accuracy <= 1);
    /* both models saw the same batches: the same weights */
    int64_t n0 = 0, n1 = 0;
    double *w0 = var_values(ms[0], "dense/kernel", &n0), *w1 = var_values(ms[1], "dense/kernel", &n1);
    CHECK_INT(n0, n1);
    for (int64_t i = 0; w0 && w1 && i < n0; i++) CHECK_NEAR(w0[i], w1[i], 1e-6);
    free(w0);
    free(w1);
    fo.validation_split = 0.2;
    CHECK_ERR(wf_model_fit(ms[0], pf, &fo, NULL), WF_INVALID_ARGUMENT, "validation_data");
    /* evaluate over the pipeline (its own batches of 64) equals evaluate over the same rows as an array
     * dataset (batches of 100), and again (each evaluation is one iteration); fit takes it as validation */
    wf_dataset *arr = NULL;
    CHECK_OK(wf_dataset_from_tensors(x, y, &arr));
    double la = NAN, aa = NAN;
    CHECK_OK(wf_model_evaluate(ms[0], arr, 100, &la, &aa));
    for (int rep = 0; rep < 2; rep++) {
        double lp = NAN, ap = NAN;
        CHECK_OK(wf_model_evaluate(ms[0], pf, 100, &lp, &ap));
        CHECK_NEAR(lp, la, 1e-5 * fabs(la) + 1e-6);
        CHECK_NEAR(ap, aa, 1e-9);
    }
    fo.validation_split = 0;
    fo.validation_data = pf;
    CHECK_OK(wf_model_fit(ms[0], pf, &fo, &lg));
    CHECK(lg.has_validation && isfinite(lg.val_loss) && lg.val_accuracy >= 0 && lg.val_accuracy <= 1);
    wf_dataset_free(arr);
    wf_dataset_free(pf);
    wf_dataset_free(b);
    wf_dataset_free(sl);
    wf_model_free(ms[0]);
    wf_model_free(ms[1]);
    wf_tensor_free(x);
    wf_tensor_free(y);
}

/* prefetch_to_device onto OPENCL:0: the consumer gets device tensors (no host data), every batch's
 * copy is logged, and a model trained on OPENCL:0 from it ends with the weights of the same training
 * from host batches. Device specs that match nothing and string elements are refused. */
static void test_prefetch_to_device(void)
{
    wf_dataset *r = NULL, *bad = NULL;
    CHECK_OK(wf_dataset_range(0, 4, 1, &r));
    CHECK_ERR(wf_dataset_prefetch_to_device(r, g_ctx, "GPU:7", 2, &bad), WF_NOT_FOUND, "matches no device");
    CHECK_ERR(wf_dataset_prefetch_to_device(r, g_ctx, "CPU:0", 0, &bad), WF_INVALID_ARGUMENT, "buffer");
    CHECK(!bad);
    wf_dataset_free(r);
    if (!ocl_present("test_prefetch_to_device")) return;
    enum { N = 512, B = 32 };
    int64_t s[1] = {2};
    wf_tensor *x = NULL, *y = NULL;
    xor_data(N, &x, &y);
    wf_tensor *comps[2] = {x, y};
    wf_dataset *sl = NULL, *b = NULL, *pd = NULL;
    CHECK_OK(wf_dataset_from_tensor_slices(comps, 2, &sl));
    CHECK_OK(wf_dataset_batch(sl, B, 0, &b));
    CHECK_OK(wf_dataset_prefetch_to_device(b, g_ctx, "OPENCL:0", 2, &pd));
    /* the elements: device tensors of the host batches' shapes */
    wf_iterator *it = NULL;
    CHECK_OK(wf_dataset_iterator(pd, NULL, &it));
    int batches = 0;
    for (; it;) {
        wf_tensor *t[2] = {0};
        int n = 0;
        CHECK_OK(wf_iterator_next(it, t, 2, &n));
        if (!n) break;
        CHECK_INT(n, 2);
        CHECK(wf_tensor_data(t[0]) == NULL);
        CHECK_INT(wf_tensor_dims(t[0])[0], B);
        CHECK_INT(wf_tensor_dims(t[0])[1], 2);
        batches++;
        wf_tensor_free(t[0]);
        wf_tensor_free(t[1]);
    }
    CHECK_INT(batches, N / B);
    wf_dataset_event ev[64];
    int ne = wf_iterator_copy_events(it, ev, 64);
    CHECK_INT(ne, N / B);
    for (int i = 0; i < ne && i < 64; i++) {
        CHECK_INT(ev[i].element, i);
        CHECK(ev[i].end_ns >= ev[i].start_ns);
    }
    wf_iterator_free(it);
    /* the same training from device batches and from host batches */
    wf_model *ms[2];
    for (int k = 0; k < 2; k++) {
        ms[k] = new_model(1, s, 21);
        add_dense(ms[k], 8, WF_ACT_TANH);
        add_dense(ms[k], 2, WF_ACT_SOFTMAX);
        wf_compile_options o;
        wf_compile_options_init(&o);
        o.device = "OPENCL:0";
        o.strict_placement = 1;
        CHECK_OK(wf_model_compile(ms[k], g_ctx, &o));
    }
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.verbose = 0;
    fo.epochs = 2;
    wf_epoch_logs l0 = {0}, l1 = {0};
    CHECK_OK(wf_model_fit(ms[0], pd, &fo, &l0));
    CHECK_OK(wf_model_fit(ms[1], b, &fo, &l1));
    CHECK_INT(l0.samples, N);
    CHECK_NEAR(l0.loss, l1.loss, 1e-6);
    int64_t n0 = 0, n1 = 0;
    double *w0 = var_values(ms[0], "dense/kernel", &n0), *w1 = var_values(ms[1], "dense/kernel", &n1);
    CHECK_INT(n0, n1);
    for (int64_t i = 0; w0 && w1 && i < n0; i++) CHECK_NEAR(w0[i], w1[i], 1e-6);
    free(w0);
    free(w1);
    wf_model_free(ms[0]);
    wf_model_free(ms[1]);
    wf_dataset_free(pd);
    wf_dataset_free(b);
    wf_dataset_free(sl);
    wf_tensor_free(x);
    wf_tensor_free(y);
}

/* A checkpoint holding the variables and the training iterator's position mid-epoch: a new model
 * restored from it continues with the same batches (a shuffle in the pipeline) and the same losses as
 * the run that saved it. */
static void test_checkpoint_with_iterator(void)
{
    enum { N = 640, B = 32, K = 5 };
    int64_t s[1] = {2};
    wf_tensor *x = NULL, *y = NULL;
    xor_data(N, &x, &y);
    wf_tensor *comps[2] = {x, y};
    wf_dataset *sl = NULL, *sh = NULL, *b = NULL, *pf = NULL;
    CHECK_OK(wf_dataset_from_tensor_slices(comps, 2, &sl));
    CHECK_OK(wf_dataset_shuffle(sl, 100, 3, 1, &sh));
    CHECK_OK(wf_dataset_batch(sh, B, 0, &b));
    CHECK_OK(wf_dataset_prefetch(b, 2, &pf));
    wf_model *ms[2];
    for (int k = 0; k < 2; k++) {
        ms[k] = new_model(1, s, 31 + (uint64_t)k); /* different initial weights: the checkpoint sets them */
        add_dense(ms[k], 8, WF_ACT_TANH);
        add_dense(ms[k], 2, WF_ACT_SOFTMAX);
        compile(ms[k], WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1);
    }
    char path[256];
    snprintf(path, sizeof path, "/tmp/weft-test-ckpt-iter-%d.safetensors", (int)getpid());
    wf_iterator *it = NULL, *it2 = NULL;
    CHECK_OK(wf_dataset_iterator(pf, NULL, &it));
    double after[K];
    for (int step = 0; it && step < 2 * K; step++) {
        if (step == K) {
            const char *nm[1] = {"train"};
            CHECK_OK(wf_session_save_iterators(wf_model_session(ms[0]), path, &it, nm, 1));
        }
        wf_tensor *t[2] = {0};
        int n = 0;
        CHECK_OK(wf_iterator_next(it, t, 2, &n));
        CHECK_INT(n, 2);
        double l = NAN;
        if (n == 2) CHECK_OK(wf_model_train_step(ms[0], t[0], t[1], &l, NULL));
        if (step >= K) after[step - K] = l;
        wf_tensor_free(t[0]);
        wf_tensor_free(t[1]);
    }
    /* restore into the other model and a fresh iterator (another iteration of the dataset) */
    CHECK_OK(wf_dataset_iterator(pf, NULL, &it2));
    const char *nm[1] = {"train"};
    CHECK_OK(wf_session_restore_iterators(wf_model_session(ms[1]), path, &it2, nm, 1));
    for (int step = 0; it2 && step < K; step++) {
        wf_tensor *t[2] = {0};
        int n = 0;
        CHECK_OK(wf_iterator_next(it2, t, 2, &n));
        double l = NAN;
        if (n == 2) CHECK_OK(wf_model_train_step(ms[1], t[0], t[1], &l, NULL));
        CHECK_NEAR(l, after[step], 1e-6);
        wf_tensor_free(t[0]);
        wf_tensor_free(t[1]);
    }
    /* a plain restore ignores the position; a missing iterator name is NOT_FOUND */
    CHECK_OK(wf_session_restore(wf_model_session(ms[1]), path));
    const char *other[1] = {"validation"};
    CHECK_ERR(wf_session_restore_iterators(wf_model_session(ms[1]), path, &it2, other, 1), WF_NOT_FOUND, "validation");
    remove(path);
    wf_iterator_free(it);
    wf_iterator_free(it2);
    wf_model_free(ms[0]);
    wf_model_free(ms[1]);
    wf_dataset_free(pf);
    wf_dataset_free(b);
    wf_dataset_free(sh);
    wf_dataset_free(sl);
    wf_tensor_free(x);
    wf_tensor_free(y);
}

/* ---- the demo's model on real data: CPU and OpenCL, strict across two devices, resume ----------- */

static wf_status *load_fmnist(const char *split, wf_dataset **ds)
{
    char im[256], lb[256];
    snprintf(im, sizeof im, FMNIST "/%s-images-idx3-ubyte.gz", split);
    snprintf(lb, sizeof lb, FMNIST "/%s-labels-idx1-ubyte.gz", split);
    wf_dataset_options o;
    wf_dataset_options_init(&o);
    o.scale = 1;
    o.label_dtype = WF_I64;
    return wf_dataset_from_idx(im, lb, &o, ds);
}

/* The first n samples of ds as a new in-memory dataset. */
static wf_dataset *subset(wf_dataset *ds, int64_t n)
{
    wf_tensor *x = NULL, *y = NULL;
    wf_dataset *out = NULL;
    CHECK_OK(wf_dataset_rows(ds, 0, n, &x, &y));
    if (x) CHECK_OK(wf_dataset_from_tensors(x, y, &out));
    wf_tensor_free(x);
    wf_tensor_free(y);
    return out;
}

static wf_model *demo_model(const char *device, int strict, double dropout)
{
    int64_t s[2] = {28, 28};
    wf_model *m = new_model(2, s, 42);
    add(m, layer(WF_LAYER_FLATTEN));
    add_dense(m, 128, WF_ACT_RELU);
    if (dropout > 0) {
        wf_layer dr = layer(WF_LAYER_DROPOUT);
        dr.rate = dropout;
        add(m, dr);
    }
    add_dense(m, 10, WF_ACT_SOFTMAX);
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.device = device;
    o.strict_placement = strict;
    wf_status *s_ = wf_model_compile(m, g_ctx, &o);
    if (s_) {
        CHECK_OK(s_);
        wf_model_free(m);
        return NULL;
    }
    return m;
}

static wf_dataset *g_train, *g_test;

static double train_eval(const char *device, int64_t n_train, int epochs)
{
    wf_model *m = demo_model(device, 1, 0);
    if (!m) return -1;
    wf_dataset *tr = subset(g_train, n_train), *te = subset(g_test, 2000);
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.epochs = epochs;
    fo.verbose = 0;
    CHECK_OK(wf_model_fit(m, tr, &fo, NULL));
    double l = NAN, a = NAN;
    CHECK_OK(wf_model_evaluate(m, te, 500, &l, &a));
    wf_dataset_free(tr);
    wf_dataset_free(te);
    wf_model_free(m);
    return a;
}

static void test_fmnist_cpu_opencl(void)
{
    if (!g_train) {
        CHECK_SKIP("test_fmnist_cpu_opencl", "no Fashion-MNIST in " FMNIST);
        return;
    }
    double cpu = train_eval("CPU:0", 6000, 2);
    printf("  Fashion-MNIST, 6000 samples, 2 epochs: CPU:0 test accuracy %.4f\n", cpu);
    CHECK(cpu > 0.76);
    if (!ocl_present("test_fmnist_cpu_opencl:OPENCL:0")) return;
    double ocl = train_eval("OPENCL:0", 6000, 2);
    printf("  Fashion-MNIST, 6000 samples, 2 epochs: OPENCL:0 test accuracy %.4f\n", ocl);
    CHECK(ocl > 0.76);
    CHECK(fabs(ocl - cpu) < 0.03);
}

/* Strict placement across two devices: the first Dense layer and its gradients on CPU:0, everything
 * else that computes on OPENCL:0. Same losses and weights as the CPU alone. */
static void test_two_devices_strict(void)
{
    if (!g_train) {
        CHECK_SKIP("test_two_devices_strict", "no Fashion-MNIST in " FMNIST);
        return;
    }
    if (!ocl_present("test_two_devices_strict")) return;
    wf_model *a = demo_model("CPU:0", 1, 0), *b = demo_model(NULL, 1, 0);
    if (!a || !b) goto out;
    wf_graph *g = wf_model_graph(b);
    int on_cpu = 0, on_ocl = 0;
    for (int i = 0; i < wf_graph_num_nodes(g); i++) {
        wf_node *n = wf_graph_node(g, i);
        const char *op = wf_node_op(n), *nm = wf_node_name(n);
        if (!strcmp(op, "Placeholder") || !strcmp(op, "Variable") || !strcmp(op, "Const")) continue;
        bool first = strstr(nm, "dense/") && !strstr(nm, "dense_1");
        CHECK_OK(wf_node_set_device(n, first ? "CPU:0" : "OPENCL:0"));
        if (first) on_cpu++;
        else on_ocl++;
    }
    CHECK(on_cpu > 3 && on_ocl > 10);
    wf_placement *p = NULL;
    CHECK_OK(wf_model_placement(b, 32, &p));
    int devs[2] = {0, 0}, copies = 0;
    for (int i = 0; p && i < wf_placement_num_entries(p); i++) {
        wf_placement_entry e = wf_placement_entry_at(p, i);
        copies += e.is_copy;
        if (!e.is_copy) devs[strstr(e.device, "OPENCL") ? 1 : 0]++;
    }
    CHECK(devs[0] > 0 && devs[1] > 0 && copies > 0);
    wf_placement_free(p);
    for (int step = 0; step < 3; step++) {
        wf_tensor *x = NULL, *y = NULL;
        CHECK_OK(wf_dataset_rows(g_train, step * 32, 32, &x, &y));
        double la = NAN, lb = NAN;
        CHECK_OK(wf_model_train_step(a, x, y, &la, NULL));
        CHECK_OK(wf_model_train_step(b, x, y, &lb, NULL));
        CHECK_NEAR(la, lb, 1e-4);
        wf_tensor_free(x);
        wf_tensor_free(y);
    }
    const char *vars[4] = {"dense/kernel", "dense/bias", "dense_1/kernel", "optimizer/dense_1/kernel/v"};
    for (int k = 0; k < 4; k++) {
        int64_t n = 0;
        double *va = var_values(a, vars[k], &n), *vb = var_values(b, vars[k], NULL);
        double worst = 0;
        for (int64_t i = 0; va && vb && i < n; i++) worst = fmax(worst, fabs(va[i] - vb[i]));
        CHECK(worst < 1e-4);
        free(va);
        free(vb);
    }
out:
    wf_model_free(a);
    wf_model_free(b);
}

/* Variables stay on the accelerator that updates them: a traced step copies only the batch in and the
 * loss and accuracy out; reading, saving and restoring them works as on the CPU. */
static void test_resident_variables(void)
{
    if (!g_train) {
        CHECK_SKIP("test_resident_variables", "no Fashion-MNIST in " FMNIST);
        return;
    }
    if (!ocl_present("test_resident_variables")) return;
    wf_model *m = demo_model("OPENCL:0", 1, 0), *c = demo_model("CPU:0", 1, 0);
    if (!m || !c) goto out;
    wf_tensor *x = NULL, *y = NULL;
    CHECK_OK(wf_dataset_rows(g_train, 0, 32, &x, &y));
    for (int i = 0; i < 3 && x; i++) {
        CHECK_OK(wf_model_train_step(m, x, y, NULL, NULL));
        CHECK_OK(wf_model_train_step(c, x, y, NULL, NULL));
    }
    wf_trace *t = NULL;
    CHECK_OK(wf_model_train_step(m, x, y, NULL, &t));
    CHECK_OK(wf_model_train_step(c, x, y, NULL, NULL));
    int64_t to_dev = 0, to_host = 0;
    for (int i = 0; t && i < wf_trace_num_events(t); i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        if (!e.is_copy) continue;
        if (strstr(e.device_short, "OPENCL")) to_dev += e.bytes;
        else to_host += e.bytes;
    }
    CHECK_INT(to_dev, 32 * 784 * 4 + 32 * 8); /* the batch only: no weight goes up */
    CHECK_INT(to_host, 2 * 4);                /* loss and accuracy: no weight comes down */
    wf_trace_free(t);
    wf_placement *p = NULL;
    CHECK_OK(wf_model_placement(m, 32, &p));
    int vars = 0;
    for (int i = 0; p && i < wf_placement_num_entries(p); i++) {
        wf_placement_entry e = wf_placement_entry_at(p, i);
        if (strcmp(e.op, "Variable")) continue;
        vars++;
        CHECK_STR_CONTAINS(e.device, "OPENCL:0");
        CHECK_STR_CONTAINS(e.reason, "a variable, resident on OPENCL:0");
    }
    CHECK_INT(vars, 4 + 8 + 2 + 3); /* kernels and biases, Adam's m and v, the two step counters, fit's 3 metric sums */
    wf_placement_free(p);
    /* read back from the device: the CPU model after the same steps */
    const char *names[3] = {"dense/kernel", "optimizer/dense_1/bias/m", "optimizer/step"};
    for (int k = 0; k < 3; k++) {
        wf_tensor *a = NULL, *b = NULL;
        CHECK_OK(wf_session_get_variable(wf_model_session(m), names[k], &a));
        CHECK_OK(wf_session_get_variable(wf_model_session(c), names[k], &b));
        CHECK(a && b && wf_tensor_data(a) && wf_tensor_size(a) == wf_tensor_size(b));
        double worst = 0;
        for (int64_t i = 0; a && b && wf_tensor_data(a) && i < wf_tensor_size(a); i++)
            worst = fmax(worst, wf_tensor_dtype(a) == WF_F32
                                    ? fabs(((float *)wf_tensor_data(a))[i] - ((float *)wf_tensor_data(b))[i])
                                    : fabs((double)(((int64_t *)wf_tensor_data(a))[i] - ((int64_t *)wf_tensor_data(b))[i])));
        CHECK(worst < 1e-5);
        wf_tensor_free(a);
        wf_tensor_free(b);
    }
    /* a checkpoint of the device-resident state restores into the CPU model; one more step agrees */
    char path[] = "/tmp/weft-test-resident-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    CHECK_OK(wf_session_save(wf_model_session(m), path));
    CHECK_OK(wf_session_restore(wf_model_session(c), path));
    double la = NAN, lb = NAN;
    CHECK_OK(wf_model_train_step(m, x, y, &la, NULL));
    CHECK_OK(wf_model_train_step(c, x, y, &lb, NULL));
    CHECK_NEAR(la, lb, 1e-5);
    unlink(path);
    wf_tensor_free(x);
    wf_tensor_free(y);
out:
    wf_model_free(m);
    wf_model_free(c);
}

/* Resume: 2 epochs straight equal 1 epoch, a checkpoint, a new model restored from it, 1 more epoch.
 * With dropout, so the mask stream must resume too. */
typedef struct saver {
    wf_model *m;
    const char *path;
} saver;

static int save_after_first(void *user, const wf_epoch_logs *lg)
{
    saver *s = user;
    if (lg->epoch == 0) CHECK_OK(wf_session_save(wf_model_session(s->m), s->path));
    return 0;
}

static void test_resume(void)
{
    if (!g_train) {
        CHECK_SKIP("test_resume", "no Fashion-MNIST in " FMNIST);
        return;
    }
    char path[] = "/tmp/weft-test-model-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    wf_dataset *tr = subset(g_train, 1000);
    wf_model *a = demo_model(NULL, 0, 0.2), *b = demo_model(NULL, 0, 0.2);
    saver sv = {a, path};
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.epochs = 2;
    fo.verbose = 0;
    fo.on_epoch_end = save_after_first;
    fo.user = &sv;
    wf_epoch_logs la, lb;
    if (a && b && tr) {
        CHECK_OK(wf_model_fit(a, tr, &fo, &la));
        CHECK_OK(wf_session_restore(wf_model_session(b), path));
        wf_dataset *tr2 = subset(g_train, 1000);
        fo.on_epoch_end = NULL;
        fo.initial_epoch = 1;
        CHECK_OK(wf_model_fit(b, tr2, &fo, &lb));
        CHECK(la.loss == lb.loss);
        const char *vars[5] = {"dense/kernel", "dense_1/bias", "optimizer/dense/kernel/m", "optimizer/step", "model/step"};
        for (int k = 0; k < 5; k++) {
            wf_tensor *ta = NULL, *tb = NULL;
            CHECK_OK(wf_session_get_variable(wf_model_session(a), vars[k], &ta));
            CHECK_OK(wf_session_get_variable(wf_model_session(b), vars[k], &tb));
            CHECK(ta && tb && wf_tensor_bytes(ta) == wf_tensor_bytes(tb) &&
                  !memcmp(wf_tensor_data(ta), wf_tensor_data(tb), wf_tensor_bytes(ta)));
            wf_tensor_free(ta);
            wf_tensor_free(tb);
        }
        wf_dataset_free(tr2);
    }
    unlink(path);
    wf_dataset_free(tr);
    wf_model_free(a);
    wf_model_free(b);
}

static void test_export(void)
{
    int64_t s[2] = {4, 4};
    wf_model *m = new_model(2, s, 8);
    add(m, layer(WF_LAYER_FLATTEN));
    add_dense(m, 6, WF_ACT_RELU);
    wf_layer dr = layer(WF_LAYER_DROPOUT);
    dr.rate = 0.5;
    add(m, dr);
    add_dense(m, 3, WF_ACT_SOFTMAX);
    compile(m, WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1);
    int64_t xd[3] = {5, 4, 4}, yd[1] = {5};
    double xv[80];
    for (int i = 0; i < 80; i++) xv[i] = urand();
    wf_tensor *x = tensor_f32(3, xd, xv), *y = NULL;
    CHECK_OK(wf_tensor_new(WF_I64, 1, yd, (int64_t[]){0, 1, 2, 1, 0}, &y));
    CHECK_OK(wf_model_train_step(m, x, y, NULL, NULL)); /* exported weights are the trained ones */
    char path[] = "/tmp/weft-test-export-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    CHECK_OK(wf_model_export_onnx(m, path));
    wf_graph *g = NULL;
    wf_onnx_model *om = NULL;
    wf_session *s2 = NULL;
    CHECK_OK(wf_graph_new(&g));
    CHECK_OK(wf_onnx_load(path, g, &om));
    double *want = predict(m, x, NULL);
    if (om) {
        CHECK_INT(wf_onnx_num_inputs(om), 1);
        CHECK_OK(wf_session_new(g_ctx, g, NULL, &s2));
        wf_feed f = {wf_onnx_input(om, 0)->output, x};
        wf_output o = wf_onnx_output(om, 0)->output;
        wf_tensor *got = NULL;
        CHECK_OK(wf_session_run(s2, &f, 1, &o, 1, &got, NULL));
        for (int i = 0; got && want && i < 15; i++) CHECK_NEAR(((float *)wf_tensor_data(got))[i], want[i], 1e-6);
        wf_tensor_free(got);
    }
    free(want);
    wf_session_free(s2);
    wf_onnx_model_free(om);
    wf_graph_free(g);
    unlink(path);
    wf_tensor_free(x);
    wf_tensor_free(y);
    wf_model_free(m);
}

/* ---- bad input ---------------------------------------------------------------------------------------- */

static void test_bad_layers(void)
{
    int64_t s[2] = {28, 28};
    wf_model *m = new_model(2, s, 1);
    int before = wf_graph_num_nodes(wf_model_graph(m));
    wf_layer l = layer(WF_LAYER_DENSE);
    CHECK_ERR(wf_model_add(m, &l), WF_INVALID_ARGUMENT, "units is 0");
    l = layer(WF_LAYER_DROPOUT);
    l.rate = 1;
    CHECK_ERR(wf_model_add(m, &l), WF_INVALID_ARGUMENT, "rate is 1");
    l = layer(WF_LAYER_CONV2D);
    l.filters = 4;
    CHECK_ERR(wf_model_add(m, &l), WF_INVALID_ARGUMENT, "layer 'conv2d' (Conv2D): input f32 [N, 28, 28]");
    l = layer(WF_LAYER_EMBEDDING);
    l.input_dim = l.output_dim = 3;
    CHECK_ERR(wf_model_add(m, &l), WF_INVALID_ARGUMENT, "Embedding wants integer indices");
    l = layer(WF_LAYER_DENSE);
    l.units = 4;
    l.activation = (wf_activation)99;
    CHECK_ERR(wf_model_add(m, &l), WF_INVALID_ARGUMENT, "unknown activation 99");
    CHECK_INT(wf_graph_num_nodes(wf_model_graph(m)), before); /* nothing left behind */
    /* a valid layer still goes in, under the first automatic name */
    add(m, layer(WF_LAYER_FLATTEN));
    l = layer(WF_LAYER_DENSE);
    l.units = 10;
    l.name = "flatten";
    CHECK_ERR(wf_model_add(m, &l), WF_ALREADY_EXISTS, "'flatten'");
    l.name = NULL;
    add(m, l);
    wf_compile_options o;
    wf_compile_options_init(&o);
    o.loss = WF_LOSS_MSE;
    CHECK_ERR(wf_model_compile(m, g_ctx, &o), WF_INVALID_ARGUMENT, "accuracy metric needs a classification loss");
    o = (wf_compile_options){0};
    wf_compile_options_init(&o);
    o.device = "GPU:7";
    CHECK_ERR(wf_model_compile(m, g_ctx, &o), WF_NOT_FOUND, "GPU:7");
    wf_tensor *x = NULL;
    int64_t xd[3] = {2, 28, 28};
    CHECK_OK(wf_tensor_new(WF_F32, 3, xd, NULL, &x));
    wf_tensor *y = NULL;
    CHECK_ERR(wf_model_predict(m, x, 2, &y), WF_FAILED_PRECONDITION, "compile the model first");
    wf_compile_options_init(&o);
    CHECK_OK(wf_model_compile(m, g_ctx, &o)); /* the failed compiles left the model usable */
    CHECK_ERR(wf_model_add(m, &l), WF_FAILED_PRECONDITION, "already compiled");
    CHECK_ERR(wf_model_predict(m, x, 2, NULL), WF_INVALID_ARGUMENT, "NULL");
    CHECK_ERR(wf_model_predict(m, x, 0, &y), WF_INVALID_ARGUMENT, "batch_size must be >= 1");
    wf_tensor_free(x);
    wf_model_free(m);
}

/* Bad batches stop fit with an error naming the epoch and step, and leave the variables unchanged. */
static void test_bad_batches(void)
{
    wf_model *m = demo_model(NULL, 0, 0);
    if (!m) return;
    /* features of the wrong shape */
    int64_t xd[3] = {4, 28, 27}, yd[1] = {4}, yd3[1] = {3};
    wf_tensor *x = NULL, *y = NULL, *y3 = NULL, *xg = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 3, xd, NULL, &x));
    memset(wf_tensor_data(x), 0, wf_tensor_bytes(x));
    CHECK_OK(wf_tensor_new(WF_I64, 1, yd, (int64_t[]){1, 2, 3, 4}, &y));
    CHECK_OK(wf_tensor_new(WF_I64, 1, yd3, (int64_t[]){1, 2, 3}, &y3));
    CHECK_ERR(wf_model_train_step(m, x, y, NULL, NULL), WF_INVALID_ARGUMENT,
              "features are f32[4, 28, 27]; the model's input is f32[N, 28, 28]");
    xd[2] = 28;
    CHECK_OK(wf_tensor_new(WF_F32, 3, xd, NULL, &xg));
    memset(wf_tensor_data(xg), 0, wf_tensor_bytes(xg));
    CHECK_ERR(wf_model_train_step(m, xg, y3, NULL, NULL), WF_INVALID_ARGUMENT, "4 samples of features but 3 of labels");
    /* a label out of range in the middle of an epoch */
    int64_t bd[3] = {64, 28, 28}, bl[1] = {64};
    wf_tensor *bx = NULL, *by = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 3, bd, NULL, &bx));
    memset(wf_tensor_data(bx), 0, wf_tensor_bytes(bx));
    CHECK_OK(wf_tensor_new(WF_I64, 1, bl, NULL, &by));
    for (int i = 0; i < 64; i++) ((int64_t *)wf_tensor_data(by))[i] = i % 10;
    ((int64_t *)wf_tensor_data(by))[40] = 10;
    wf_dataset *ds = NULL;
    CHECK_OK(wf_dataset_from_tensors(bx, by, &ds));
    wf_fit_options fo;
    wf_fit_options_init(&fo);
    fo.verbose = 0;
    fo.shuffle = 0;
    wf_status *st = wf_model_fit(m, ds, &fo, NULL);
    CHECK(st != NULL);
    if (st) {
        CHECK_STR_CONTAINS(wf_status_message(st), "epoch 1, step 2");
        CHECK_STR_CONTAINS(wf_status_message(st), "target 10 at position 8");
        wf_status_free(st);
    }
    /* step 1 was applied, step 2 was not */
    wf_tensor *after = NULL;
    CHECK_OK(wf_session_get_variable(wf_model_session(m), "optimizer/step", &after));
    CHECK(after && *(int64_t *)wf_tensor_data(after) == 1);
    wf_tensor_free(after);
    wf_dataset_free(ds);
    wf_tensor_free(bx);
    wf_tensor_free(by);
    wf_tensor_free(x);
    wf_tensor_free(xg);
    wf_tensor_free(y);
    wf_tensor_free(y3);
    wf_model_free(m);
}

/* A checkpoint of another model or a truncated one: a clear error, the variables unchanged. */
static void test_bad_checkpoints(void)
{
    int64_t s[2] = {28, 28};
    wf_model *m = demo_model(NULL, 0, 0);
    wf_model *other = new_model(2, s, 1);
    add(other, layer(WF_LAYER_FLATTEN));
    add_dense(other, 64, WF_ACT_NONE);
    compile(other, WF_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, 1);
    char p1[] = "/tmp/weft-test-ckpt-XXXXXX", p2[] = "/tmp/weft-test-ckpt2-XXXXXX";
    int f1 = mkstemp(p1), f2 = mkstemp(p2);
    if (f1 >= 0) close(f1);
    if (m && other) {
        CHECK_OK(wf_session_save(wf_model_session(other), p1));
        wf_tensor *before = NULL, *after = NULL;
        CHECK_OK(wf_session_get_variable(wf_model_session(m), "dense/kernel", &before));
        CHECK_ERR(wf_session_restore(wf_model_session(m), p1), WF_INVALID_ARGUMENT, "dense/kernel");
        /* truncated: the first half of a real checkpoint */
        CHECK_OK(wf_session_save(wf_model_session(m), p2));
        FILE *f = fopen(p2, "rb");
        char *buf = malloc(1 << 20);
        size_t n = f ? fread(buf, 1, 1 << 20, f) : 0;
        if (f) fclose(f);
        f = fopen(p2, "wb");
        if (f) {
            fwrite(buf, 1, n / 2, f);
            fclose(f);
        }
        free(buf);
        wf_status *st = wf_session_restore(wf_model_session(m), p2);
        CHECK(st != NULL);
        if (st) {
            CHECK_STR_CONTAINS(wf_status_message(st), p2);
            wf_status_free(st);
        }
        CHECK_OK(wf_session_get_variable(wf_model_session(m), "dense/kernel", &after));
        CHECK(before && after && !memcmp(wf_tensor_data(before), wf_tensor_data(after), wf_tensor_bytes(before)));
        wf_tensor_free(before);
        wf_tensor_free(after);
    }
    if (f2 >= 0) close(f2);
    unlink(p1);
    unlink(p2);
    wf_model_free(m);
    wf_model_free(other);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--device")) g_device = argv[2];
    wf_status *s = wf_context_new(NULL, &g_ctx);
    if (s) {
        fprintf(stderr, "context: %s\n", wf_status_message(s));
        return 1;
    }
    for (int i = 0; i < wf_context_num_devices(g_ctx); i++) {
        wf_device_info d;
        if (!wf_context_device(g_ctx, i, &d) && strstr(d.name, "OPENCL:0")) g_have_ocl = 1;
    }
    if ((s = load_fmnist("train", &g_train)) || (s = load_fmnist("t10k", &g_test))) {
        printf("Fashion-MNIST unavailable: %s\n", wf_status_message(s));
        wf_status_free(s);
    }
    RUN_TEST(test_dense_activations);
    RUN_TEST(test_conv_pool);
    RUN_TEST(test_norms_embedding_reshape);
    RUN_TEST(test_summary);
    RUN_TEST(test_dropout);
    RUN_TEST(test_batchnorm_training);
    RUN_TEST(test_fit_xor);
    RUN_TEST(test_fit_binary);
    RUN_TEST(test_fit_pipeline);
    RUN_TEST(test_prefetch_to_device);
    RUN_TEST(test_checkpoint_with_iterator);
    RUN_TEST(test_fmnist_cpu_opencl);
    RUN_TEST(test_two_devices_strict);
    RUN_TEST(test_resident_variables);
    RUN_TEST(test_resume);
    RUN_TEST(test_export);
    RUN_TEST(test_bad_layers);
    RUN_TEST(test_bad_batches);
    RUN_TEST(test_bad_checkpoints);
    wf_dataset_free(g_train);
    wf_dataset_free(g_test);
    wf_context_free(g_ctx);
    return check_summary();
}
