/*
 * The TensorFlow tutorial's model (Flatten 784 -> Dense 128 relu -> Dense 10 softmax) built through
 * weft's installed public API, as an application would:
 *     cc mlp.c $(pkg-config --cflags --libs weft)
 * Runs one batch and checks that every softmax row sums to 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <weft/weft.h>

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        wf_status *s_ = (expr);                                                                    \
        if (s_) {                                                                                  \
            fprintf(stderr, "%s failed: %s\n", #expr, wf_status_message(s_));                      \
            wf_status_free(s_);                                                                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static float frand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return ((*seed >> 8) & 0xffff) / 65535.0f - 0.5f;
}

static int dense(wf_graph *g, const char *name, wf_output x, int in, int out, unsigned *seed, wf_output *y)
{
    int64_t wd[2] = {in, out}, bd[1] = {out};
    wf_tensor *w, *b;
    TRY(wf_tensor_new(WF_F32, 2, wd, NULL, &w));
    TRY(wf_tensor_new(WF_F32, 1, bd, NULL, &b));
    float *wp = wf_tensor_data(w);
    for (int i = 0; i < in * out; i++) wp[i] = frand(seed) * 0.1f;
    char nm[64];
    wf_output wc, bc, mm;
    snprintf(nm, sizeof nm, "%s/kernel", name);
    TRY(wf_const(g, nm, w, &wc));
    snprintf(nm, sizeof nm, "%s/bias", name);
    TRY(wf_const(g, nm, b, &bc));
    wf_tensor_free(w); /* the graph keeps its own copy */
    wf_tensor_free(b);
    snprintf(nm, sizeof nm, "%s/MatMul", name);
    TRY(wf_matmul(g, nm, x, wc, 0, 0, &mm));
    snprintf(nm, sizeof nm, "%s/BiasAdd", name);
    TRY(wf_bias_add(g, nm, mm, bc, y));
    return 0;
}

int main(void)
{
    wf_context *ctx;
    wf_graph *g;
    wf_session *sess;
    TRY(wf_context_new(NULL, &ctx));
    TRY(wf_graph_new(&g));

    unsigned seed = 1;
    int64_t in_dims[3] = {-1, 28, 28};
    wf_output x, flat, h, hr, logits, probs;
    TRY(wf_placeholder(g, "images", WF_F32, 3, in_dims, &x));
    TRY(wf_flatten(g, "flatten", x, 1, &flat));
    if (dense(g, "dense", flat, 784, 128, &seed, &h)) return 1;
    TRY(wf_relu(g, "dense/Relu", h, &hr));
    if (dense(g, "dense_1", hr, 128, 10, &seed, &logits)) return 1;
    TRY(wf_softmax(g, "dense_1/Softmax", logits, -1, &probs));

    TRY(wf_session_new(ctx, g, NULL, &sess));
    int64_t batch_dims[3] = {32, 28, 28};
    wf_tensor *images, *out;
    TRY(wf_tensor_new(WF_F32, 3, batch_dims, NULL, &images));
    float *ip = wf_tensor_data(images);
    for (int i = 0; i < 32 * 784; i++) ip[i] = frand(&seed) + 0.5f;
    wf_feed feed = {x, images};
    TRY(wf_session_run(sess, &feed, 1, &probs, 1, &out, NULL));

    const float *p = wf_tensor_data(out);
    int ok = wf_tensor_rank(out) == 2 && wf_tensor_dims(out)[0] == 32 && wf_tensor_dims(out)[1] == 10;
    for (int r = 0; ok && r < 32; r++) {
        double sum = 0;
        for (int c = 0; c < 10; c++) sum += p[r * 10 + c];
        ok = fabs(sum - 1.0) < 1e-5;
    }
    printf("example mlp: output [%lld, %lld], rows sum to 1: %s\n", (long long)wf_tensor_dims(out)[0],
           (long long)wf_tensor_dims(out)[1], ok ? "yes" : "NO");
    wf_tensor_free(out);
    wf_tensor_free(images);
    wf_session_free(sess);
    wf_graph_free(g);
    wf_context_free(ctx);
    return ok ? 0 : 1;
}
