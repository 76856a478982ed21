/* The tutorial model built through the public API only, as a user would. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "demo_model.h"

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

static wf_status *dense(wf_graph *g, const char *name, wf_output x, int in, int out, uint64_t *rng,
                        wf_output *y)
{
    int64_t wd[2] = {in, out}, bd[1] = {out};
    wf_tensor *w = NULL, *b = NULL;
    wf_status *s = wf_tensor_new(WF_F32, 2, wd, NULL, &w);
    if (!s) s = wf_tensor_new(WF_F32, 1, bd, NULL, &b);
    if (s) goto out;
    float *wp = wf_tensor_data(w);
    double limit = sqrt(6.0 / (in + out));
    for (int i = 0; i < in * out; i++) wp[i] = (float)((rng_next(rng) / 9007199254740992.0 * 2 - 1) * limit);
    char nm[128];
    wf_output wc, bc, mm;
    snprintf(nm, sizeof nm, "%s/kernel", name);
    if ((s = wf_const(g, nm, w, &wc))) goto out;
    snprintf(nm, sizeof nm, "%s/bias", name);
    if ((s = wf_const(g, nm, b, &bc))) goto out;
    snprintf(nm, sizeof nm, "%s/MatMul", name);
    if ((s = wf_matmul(g, nm, x, wc, 0, 0, &mm))) goto out;
    snprintf(nm, sizeof nm, "%s/BiasAdd", name);
    s = wf_bias_add(g, nm, mm, bc, y);
out:
    wf_tensor_free(w);
    wf_tensor_free(b);
    return s;
}

wf_status *demo_model_build(wf_graph *g, unsigned seed, demo_model *m)
{
    uint64_t rng = seed;
    int64_t in_dims[3] = {-1, 28, 28};
    wf_output x, flat, h, hr, logits;
    wf_status *s = wf_placeholder(g, "images", WF_F32, 3, in_dims, &x);
    if (!s) s = wf_flatten(g, "flatten", x, 1, &flat);
    if (!s) s = dense(g, "dense", flat, 784, 128, &rng, &h);
    if (!s) s = wf_relu(g, "dense/Relu", h, &hr);
    if (!s) s = dense(g, "dense_1", hr, 128, 10, &rng, &logits);
    if (!s) s = wf_softmax(g, "dense_1/Softmax", logits, -1, &m->probs);
    if (!s) m->input = x;
    return s;
}
