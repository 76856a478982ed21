/*
 * Gradient checking against central finite differences in f64, shared by the gradient tests. For a
 * node built by `build` over placeholders with the given input values, the scalar
 * L = sum(out * w) (w a fixed pseudo-random weight of out's shape) is differentiated with
 * wf_gradients, and every element of every floating input's gradient is compared with
 * (L(x + h) - L(x - h)) / 2h. Runs on `device` (NULL: the CPU) with strict placement. The input
 * tensors are perturbed in place and restored.
 */
#ifndef WF_TEST_GRADCHECK_H
#define WF_TEST_GRADCHECK_H

#include <math.h>
#include <stdlib.h>

#include "check.h"

#define GC_MAX_IN 8

/* Adds the node under test over in[0..n_in) and sets *out to the output to differentiate. */
typedef wf_status *(*gc_build_fn)(wf_graph *g, const wf_output *in, int n_in, void *arg, wf_output *out);

typedef struct gc_opts {
    const char *device;  /* NULL: CPU */
    double h;            /* step, default 1e-6 */
    double rtol, atol;   /* defaults 1e-5, 1e-7 */
    unsigned skip_mask;  /* bit i: do not check input i (indices, shapes, non-differentiable inputs) */
    wf_context *ctx;     /* NULL: a context of its own (creating one per case loads every plugin) */
} gc_opts;

static double gc_get(const wf_tensor *t, int64_t i)
{
    const void *d = wf_tensor_data(t);
    switch (wf_tensor_dtype(t)) {
    case WF_F64: return ((const double *)d)[i];
    case WF_F32: return ((const float *)d)[i];
    default: return NAN;
    }
}

static void gc_set(wf_tensor *t, int64_t i, double v)
{
    void *d = wf_tensor_data(t);
    if (wf_tensor_dtype(t) == WF_F64) ((double *)d)[i] = v;
    else if (wf_tensor_dtype(t) == WF_F32) ((float *)d)[i] = (float)v;
}

/* Does any device of ctx match spec? (The gradient tests skip a --device that is not there.) */
static inline int gc_device_present(wf_context *ctx, const char *spec)
{
    wf_device_spec want, have;
    int found = 0;
    CHECK_OK(wf_device_spec_parse(spec, &want));
    for (int i = 0; i < wf_context_num_devices(ctx); i++) {
        wf_device_info info;
        if (wf_context_device(ctx, i, &info)) continue;
        if (!wf_device_spec_parse(info.name, &have) && wf_device_spec_matches(&want, &have)) found = 1;
    }
    return found;
}

static int gc_is_float(wf_dtype t) { return t == WF_F64 || t == WF_F32; }

/* Returns the number of mismatching elements (0: the gradient is right); failures are reported
 * through the check.h counters with `name`. */
static int gradcheck(const char *name, gc_build_fn build, void *arg, int n_in, wf_tensor *const *inputs,
                     const gc_opts *opts)
{
    gc_opts o = {0};
    if (opts) o = *opts;
    if (o.h <= 0) o.h = 1e-6;
    if (o.rtol <= 0) o.rtol = 1e-5;
    if (o.atol <= 0) o.atol = 1e-7;
    int bad = 0;
    wf_context *ctx = NULL;
    wf_graph *g = NULL;
    wf_session *s = NULL;
    wf_tensor *wt = NULL, *grads[GC_MAX_IN] = {0}, *fwd = NULL;
    wf_output in[GC_MAX_IN], out, wph, prod, loss, dx[GC_MAX_IN];
    wf_feed feeds[GC_MAX_IN + 1];
    if (o.ctx) ctx = o.ctx;
    else CHECK_OK(wf_context_new(NULL, &ctx));
    CHECK_OK(wf_graph_new(&g));
    if (!ctx || !g || n_in > GC_MAX_IN) goto done;
    for (int i = 0; i < n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        CHECK_OK(wf_placeholder(g, nm, wf_tensor_dtype(inputs[i]), wf_tensor_rank(inputs[i]),
                                wf_tensor_dims(inputs[i]), &in[i]));
        feeds[i] = (wf_feed){in[i], inputs[i]};
    }
    wf_status *st = build(g, in, n_in, arg, &out);
    if (st) {
        CHECK_FAIL_("%s: building the node: %s", name, wf_status_message(st));
        wf_status_free(st);
        bad = 1;
        goto done;
    }
    /* L = ReduceSum(out * w) over every axis */
    {
        int64_t dims[WF_MAX_RANK];
        int rank = wf_output_shape(out, dims);
        for (int d = 0; d < rank; d++)
            if (dims[d] < 0) {
                CHECK_FAIL_("%s: output shape not known at build time", name);
                bad = 1;
                goto done;
            }
        CHECK_OK(wf_tensor_new(wf_output_dtype(out), rank < 0 ? 0 : rank, dims, NULL, &wt));
        if (!wt) goto done;
        for (int64_t i = 0; i < wf_tensor_size(wt); i++) gc_set(wt, i, 0.5 + 0.25 * (double)((i * 7919) % 13) / 13.0);
        CHECK_OK(wf_placeholder(g, "w", wf_output_dtype(out), rank < 0 ? 0 : rank, dims, &wph));
        CHECK_OK(wf_mul(g, "gc_prod", out, wph, &prod));
        wf_attr keep = {.name = "keepdims", .type = WF_ATTR_INT, .i = 0};
        CHECK_OK(wf_op(g, "ReduceSum", "gc_loss", &prod, 1, &keep, 1, NULL));
        CHECK_OK(wf_graph_output(g, "gc_loss", &loss));
        feeds[n_in] = (wf_feed){wph, wt};
    }
    st = wf_gradients(g, &loss, 1, NULL, in, n_in, dx);
    if (st) {
        CHECK_FAIL_("%s: wf_gradients: %s", name, wf_status_message(st));
        wf_status_free(st);
        bad = 1;
        goto done;
    }
    wf_session_options so;
    wf_session_options_init(&so);
    so.device = o.device;
    so.strict_placement = o.device != NULL;
    CHECK_OK(wf_session_new(ctx, g, &so, &s));
    if (!s) goto done;
    for (int i = 0; i < n_in; i++) {
        if ((o.skip_mask >> i & 1) || !gc_is_float(wf_tensor_dtype(inputs[i]))) continue;
        if (!dx[i].node) {
            CHECK_FAIL_("%s: input %d has no gradient", name, i);
            bad++;
            continue;
        }
        st = wf_session_run(s, feeds, n_in + 1, &dx[i], 1, &grads[i], NULL);
        if (st) {
            CHECK_FAIL_("%s: running the gradient of input %d: %s", name, i, wf_status_message(st));
            wf_status_free(st);
            bad++;
            continue;
        }
        if (wf_tensor_size(grads[i]) != wf_tensor_size(inputs[i])) {
            CHECK_FAIL_("%s: gradient of input %d has %lld elements, the input %lld", name, i,
                        (long long)wf_tensor_size(grads[i]), (long long)wf_tensor_size(inputs[i]));
            bad++;
            continue;
        }
        wf_tensor *x = (wf_tensor *)inputs[i];
        for (int64_t e = 0; e < wf_tensor_size(x); e++) {
            double v = gc_get(x, e), lp = 0, lm = 0;
            for (int side = 0; side < 2; side++) {
                gc_set(x, e, side ? v - o.h : v + o.h);
                st = wf_session_run(s, feeds, n_in + 1, &loss, 1, &fwd, NULL);
                if (st) {
                    CHECK_FAIL_("%s: forward run: %s", name, wf_status_message(st));
                    wf_status_free(st);
                    bad++;
                    break;
                }
                if (side) lm = gc_get(fwd, 0);
                else lp = gc_get(fwd, 0);
                wf_tensor_free(fwd);
                fwd = NULL;
            }
            gc_set(x, e, v);
            double num = (lp - lm) / (2 * o.h), ana = gc_get(grads[i], e);
            if (!(fabs(num - ana) <= o.atol + o.rtol * fabs(num))) {
                if (bad < 5)
                    CHECK_FAIL_("%s: d/d in%d[%lld]: wf_gradients %.10g, finite differences %.10g", name, i,
                                (long long)e, ana, num);
                bad++;
            }
        }
    }
done:
    for (int i = 0; i < GC_MAX_IN; i++) wf_tensor_free(grads[i]);
    wf_tensor_free(wt);
    wf_session_free(s);
    wf_graph_free(g);
    if (ctx != o.ctx) wf_context_free(ctx);
    return bad;
}

#endif
