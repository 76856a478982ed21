/*
 * weft's half of the ResNet-18 training row (bench/bench_train_cnn.py --model resnet18 runs it beside
 * TensorFlow and PyTorch): torchvision's resnet18 with 10 classes (7x7/2 stem, BatchNorm, 3x3/2 max
 * pool, four stages of two basic blocks at 64, 128, 256 and 512 channels, global average pool, one
 * dense layer) on 3x32x32 inputs, built through the public graph API and trained with Adam (Keras's
 * defaults) on sparse cross-entropy.
 *
 * BatchNorm trains on the batch's statistics through one FusedBatchNorm node (its gradient is one
 * FusedBatchNormGrad), as wf_model's BatchNorm layer does, and updates its moving mean and variance every step (momentum 0.9, PyTorch's), so the
 * step does everything the peers' steps do. The data are fixed pseudo-random images and labels: the
 * time of a step does not depend on the values.
 *
 * usage: bench_train_resnet [--batch B] [--steps N] [--warmup W] [--threads T] [--trace F.json]
 * (--trace: one more step, traced, written as a Chrome trace) prints "train step: batch B, N steps, median X ms, p10 X ms, p90 X ms" (the line weft demo prints)
 * and the first and last losses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <math.h>

#include "core/core.h" /* wf__status */
#include "weft/weft.h"

#define T(x)                                                                                               \
    do {                                                                                                   \
        if ((s = (x))) return s;                                                                           \
    } while (0)

enum { MAX_VARS = 128, MAX_ASSIGNS = 128 };

typedef struct net {
    wf_graph *g;
    uint64_t seed;
    int nv, na;
    wf_output vars[MAX_VARS];
    wf_output assigns[MAX_ASSIGNS];
    int layer;
} net;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* A variable of `dims` with values uniform in [-bound, bound] (bound 0: all `fill`). */
static wf_status *var(net *n, const char *name, int rank, const int64_t *dims, double bound, double fill, bool train,
                      wf_output *out)
{
    wf_tensor *t = NULL;
    wf_status *s = wf_tensor_new(WF_F32, rank, dims, NULL, &t);
    if (s) return s;
    float *p = wf_tensor_data(t);
    for (int64_t i = 0; i < wf_tensor_size(t); i++) p[i] = (float)(bound > 0 ? (2 * uniform(&n->seed) - 1) * bound : fill);
    s = wf_variable(n->g, name, t, out);
    wf_tensor_free(t);
    if (!s && train) {
        if (n->nv == MAX_VARS) return wf__status(WF_INTERNAL, "too many variables");
        n->vars[n->nv++] = *out;
    }
    return s;
}

static wf_status *op(net *n, const char *type, const char *name, const wf_output *in, int n_in, const wf_attr *at,
                     int n_at, wf_output *out)
{
    wf_node *node;
    wf_status *s = wf_op(n->g, type, name, in, n_in, at, n_at, &node);
    if (!s) *out = wf_out(node, 0);
    return s;
}

/* conv (no bias, He-uniform weights) -> BatchNorm on the batch's statistics -> relu (when `relu`) */
static wf_status *conv_bn(net *n, wf_output x, int64_t cin, int64_t cout, int64_t k, int64_t stride, bool relu,
                          wf_output *out)
{
    wf_status *s;
    char nm[64];
    int id = n->layer++;
    int64_t wd[4] = {cout, cin, k, k}, cd[1] = {cout}, pad = k / 2;
    int64_t pads[4] = {pad, pad, pad, pad}, strides[2] = {stride, stride};
    wf_output w, y, gamma, beta, mm, mv;
    snprintf(nm, sizeof nm, "conv%d/kernel", id);
    T(var(n, nm, 4, wd, sqrt(6.0 / (double)(cin * k * k)), 0, true, &w));
    wf_attr ca[2] = {wf_attr_ints("pads", pads, 4), wf_attr_ints("strides", strides, 2)};
    wf_output ci[2] = {x, w};
    snprintf(nm, sizeof nm, "conv%d", id);
    T(op(n, "Conv2D", nm, ci, 2, ca, 2, &y));
    snprintf(nm, sizeof nm, "bn%d/gamma", id);
    T(var(n, nm, 1, cd, 0, 1, true, &gamma));
    snprintf(nm, sizeof nm, "bn%d/beta", id);
    T(var(n, nm, 1, cd, 0, 0, true, &beta));
    snprintf(nm, sizeof nm, "bn%d/moving_mean", id);
    T(var(n, nm, 1, cd, 0, 0, false, &mm));
    snprintf(nm, sizeof nm, "bn%d/moving_variance", id);
    T(var(n, nm, 1, cd, 0, 1, false, &mv));
    wf_output bi[3] = {y, gamma, beta};
    wf_attr eps = wf_attr_float("epsilon", 1e-5);
    wf_node *bn;
    T(wf_op(n->g, "FusedBatchNorm", NULL, bi, 3, &eps, 1, &bn));
    y = wf_out(bn, 0);
    /* moving statistics: m = 0.9 m + 0.1 batch (PyTorch's momentum 0.1; the biased variance here) */
    wf_output keep, take, mov[2] = {mm, mv};
    T(wf_const_scalar(n->g, NULL, WF_F32, 0.9, &keep));
    T(wf_const_scalar(n->g, NULL, WF_F32, 0.1, &take));
    for (int i = 0; i < 2; i++) {
        wf_output flat = wf_out(bn, 1 + i), a, b, asg;
        T(wf_mul(n->g, NULL, mov[i], keep, &a));
        T(wf_mul(n->g, NULL, flat, take, &b));
        T(wf_add(n->g, NULL, a, b, &a));
        T(wf_assign(n->g, NULL, mov[i], a, &asg));
        if (n->na == MAX_ASSIGNS) return wf__status(WF_INTERNAL, "too many assigns");
        n->assigns[n->na++] = asg;
    }
    if (relu) T(wf_relu(n->g, NULL, y, &y));
    *out = y;
    return NULL;
}

static wf_status *basic_block(net *n, wf_output x, int64_t cin, int64_t cout, int64_t stride, wf_output *out)
{
    wf_status *s;
    wf_output a, b, sc = x;
    T(conv_bn(n, x, cin, cout, 3, stride, true, &a));
    T(conv_bn(n, a, cout, cout, 3, 1, false, &b));
    if (stride != 1 || cin != cout) T(conv_bn(n, x, cin, cout, 1, stride, false, &sc));
    T(wf_add(n->g, NULL, b, sc, &b));
    return wf_relu(n->g, NULL, b, out);
}

static wf_status *build(net *n, int64_t batch, wf_output *x, wf_output *labels, wf_output *loss)
{
    wf_status *s;
    int64_t xd[4] = {batch, 3, 32, 32}, ld[1] = {batch};
    T(wf_placeholder(n->g, "x", WF_F32, 4, xd, x));
    T(wf_placeholder(n->g, "labels", WF_I64, 1, ld, labels));
    wf_output y;
    T(conv_bn(n, *x, 3, 64, 7, 2, true, &y));
    int64_t k[2] = {3, 3}, st[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
    wf_attr pa[3] = {wf_attr_ints("kernel_shape", k, 2), wf_attr_ints("strides", st, 2), wf_attr_ints("pads", pads, 4)};
    T(op(n, "MaxPool2D", "maxpool", &y, 1, pa, 3, &y));
    int64_t c = 64;
    for (int stage = 0; stage < 4; stage++) {
        int64_t co = 64 << stage;
        T(basic_block(n, y, c, co, stage ? 2 : 1, &y));
        T(basic_block(n, y, co, co, 1, &y));
        c = co;
    }
    T(op(n, "GlobalAvgPool", "avgpool", &y, 1, NULL, 0, &y));
    T(wf_flatten(n->g, NULL, y, 1, &y));
    int64_t wd[2] = {512, 10}, bd[1] = {10};
    wf_output w, b;
    T(var(n, "fc/kernel", 2, wd, 1 / sqrt(512.0), 0, true, &w));
    T(var(n, "fc/bias", 1, bd, 0, 0, true, &b));
    T(wf_matmul(n->g, "fc", y, w, 0, 0, &y));
    T(wf_bias_add(n->g, NULL, y, b, &y));
    return wf_loss_softmax_cross_entropy(n->g, "loss", y, *labels, 1, loss);
}

int main(int argc, char **argv)
{
    int64_t batch = 32;
    int steps = 30, warmup = 5, threads = 0;
    const char *trace_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--batch")) batch = atoll(v), i++;
        else if (v && !strcmp(a, "--steps")) steps = atoi(v), i++;
        else if (v && !strcmp(a, "--warmup")) warmup = atoi(v), i++;
        else if (v && !strcmp(a, "--threads")) threads = atoi(v), i++;
        else if (v && !strcmp(a, "--trace")) trace_path = v, i++;
        else {
            fprintf(stderr, "usage: bench_train_resnet [--batch B] [--steps N] [--warmup W] [--threads T] [--trace F.json]\n");
            return 2;
        }
    }
    if (batch < 1 || batch > 4096 || steps < 1 || warmup < 0 || threads < 0) {
        fprintf(stderr, "bench_train_resnet: --batch 1..4096, --steps >= 1, --warmup >= 0, --threads >= 0\n");
        return 2;
    }
    net n = {.seed = 42};
    wf_context *ctx = NULL;
    wf_session *sess = NULL;
    wf_tensor *xt = NULL, *lt = NULL;
    wf_output *opt = NULL, *targets = NULL;
    double *t = calloc((size_t)steps, sizeof *t);
    int n_opt = 0, rc = 1;
    wf_output x, labels, loss;
    wf_context_options co;
    wf_context_options_init(&co);
    co.inter_op_threads = co.intra_op_threads = threads;
    wf_optimizer_options oo;
    wf_optimizer_options_init(&oo, WF_OPT_ADAM);
    wf_status *s = t ? NULL : wf__status(WF_OUT_OF_MEMORY, "step times");
    if (!s) s = wf_context_new(&co, &ctx);
    if (!s) s = wf_graph_new(&n.g);
    if (!s) s = build(&n, batch, &x, &labels, &loss);
    if (!s) s = wf_optimizer_minimize(n.g, "optimizer", &oo, loss, n.vars, n.nv, &opt, &n_opt);
    if (!s && !(targets = malloc(sizeof *targets * (size_t)(n_opt + n.na))))
        s = wf__status(WF_OUT_OF_MEMORY, "targets");
    if (!s) {
        memcpy(targets, opt, sizeof *opt * (size_t)n_opt);
        memcpy(targets + n_opt, n.assigns, sizeof *targets * (size_t)n.na);
        s = wf_session_new(ctx, n.g, NULL, &sess);
    }
    int64_t xd[4] = {batch, 3, 32, 32}, ld[1] = {batch};
    if (!s) s = wf_tensor_new(WF_F32, 4, xd, NULL, &xt);
    if (!s) s = wf_tensor_new(WF_I64, 1, ld, NULL, &lt);
    if (!s) {
        uint64_t ds = 7;
        float *xp = wf_tensor_data(xt);
        int64_t *lp = wf_tensor_data(lt);
        for (int64_t i = 0; i < wf_tensor_size(xt); i++) xp[i] = (float)uniform(&ds);
        for (int64_t i = 0; i < batch; i++) lp[i] = (int64_t)(uniform(&ds) * 10) % 10;
    }
    double first = 0, last = 0;
    for (int i = -warmup; i < steps && !s; i++) {
        wf_feed f[2] = {{x, xt}, {labels, lt}};
        wf_tensor *lv = NULL;
        wf_run_options ro = {.targets = targets, .n_targets = n_opt + n.na};
        double t0 = now_ms();
        s = wf_session_run(sess, f, 2, &loss, 1, &lv, &ro);
        if (i >= 0) t[i] = now_ms() - t0;
        if (!s) {
            last = *(float *)wf_tensor_data(lv);
            if (i == -warmup) first = last;
        }
        wf_tensor_free(lv);
    }
    if (!s && trace_path) {
        wf_feed f[2] = {{x, xt}, {labels, lt}};
        wf_tensor *lv = NULL;
        wf_trace *tr = NULL;
        wf_run_options ro = {.trace = &tr, .targets = targets, .n_targets = n_opt + n.na};
        if (!(s = wf_session_run(sess, f, 2, &loss, 1, &lv, &ro))) s = wf_trace_write_chrome(tr, ctx, trace_path);
        wf_tensor_free(lv);
        wf_trace_free(tr);
    }
    if (!s) {
        qsort(t, (size_t)steps, sizeof *t, cmp_d);
        printf("train step: batch %lld, %d steps, median %.3f ms, p10 %.3f ms, p90 %.3f ms\n", (long long)batch, steps,
               t[steps / 2], t[steps / 10], t[(steps * 9) / 10 < steps ? (steps * 9) / 10 : steps - 1]);
        printf("loss: first step %.6f, last step %.6f (one batch, repeated)\n", first, last);
        rc = 0;
    } else {
        fprintf(stderr, "bench_train_resnet: %s\n", wf_status_message(s));
        wf_status_free(s);
    }
    wf_free(opt);
    free(targets);
    free(t);
    wf_tensor_free(xt);
    wf_tensor_free(lt);
    wf_session_free(sess);
    wf_graph_free(n.g);
    wf_context_free(ctx);
    return rc;
}
