/*
 * Host-memory arguments on a device (issue 13, "no read-backs inside kernels"): a shape, axes, k or
 * bounds that a device kernel reads on the host reach it as a host tensor. With the session's default
 * device OPENCL:0 (strict placement, as `weft run --device OPENCL:0 --strict-placement`), the constants
 * and the Shape node that compute them stay on CPU:0 with the reason said, nothing of them is uploaded,
 * Shape's input is not downloaded for it (only its shape is read), and the run passes with
 * WEFT_OCL_NO_READBACK=1 (any read-back of a kernel's input fails the run) with CPU:0's values. The trace
 * shows the copies: the input up, the outputs down, nothing else. SKIP where there is no OPENCL:0.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "testutil.h"

static wf_context *ctx;

static bool has_opencl(void)
{
    for (int d = 0; d < wf_context_num_devices(ctx); d++) {
        wf_device_info di;
        if (!wf_context_device(ctx, d, &di) && strstr(di.name, "OPENCL:0")) return true;
    }
    return false;
}

static wf_output const_i64(wf_graph *g, const char *name, int rank, int64_t n, const int64_t *v)
{
    wf_tensor *t = NULL;
    wf_output o = {0};
    CHECK_OK(wf_tensor_new(WF_I64, rank, &n, v, &t));
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

static wf_output const_f32(wf_graph *g, const char *name, float v)
{
    wf_tensor *t = NULL;
    wf_output o = {0};
    CHECK_OK(wf_tensor_new(WF_F32, 0, NULL, &v, &t));
    CHECK_OK(wf_const(g, name, t, &o));
    wf_tensor_free(t);
    return o;
}

static void test_host_arguments_stay_on_host(void)
{
    if (!has_opencl()) {
        CHECK_SKIP("test_host_arguments_stay_on_host", "no OPENCL:0 device (PoCL missing?)");
        return;
    }
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    int64_t d[3] = {2, 3, 4};
    wf_output x, r, y[5];
    CHECK_OK(wf_placeholder(g, "x", WF_F32, 3, d, &x));
    CHECK_OK(wf_unary(g, "Relu", "r", x, &r));
    /* Reshape(r, [6, 4]), Reshape(r, Shape(r)) after a Relu, TopK(r, 2), Clip(r, 0.25, 0.75),
     * ReduceSum(r, axes [1]) */
    int64_t shp[2] = {6, 4}, k = 2, axes = 1;
    wf_node *n = NULL;
    wf_output s1 = const_i64(g, "s1", 1, 2, shp), sh;
    CHECK_OK(wf_op(g, "Reshape", "reshape_const", (wf_output[]){r, s1}, 2, NULL, 0, &n));
    y[0] = n ? wf_out(n, 0) : x;
    CHECK_OK(wf_op(g, "Shape", "sh", &r, 1, NULL, 0, &n));
    sh = n ? wf_out(n, 0) : x;
    wf_output r2;
    CHECK_OK(wf_unary(g, "Sigmoid", "r2", r, &r2));
    CHECK_OK(wf_op(g, "Reshape", "reshape_shape", (wf_output[]){r2, sh}, 2, NULL, 0, &n));
    y[1] = n ? wf_out(n, 0) : x;
    wf_output kk = const_i64(g, "k", 1, 1, &k);
    CHECK_OK(wf_op(g, "TopK", "topk", (wf_output[]){r, kk}, 2, NULL, 0, &n));
    y[2] = n ? wf_out(n, 0) : x;
    wf_output lo = const_f32(g, "lo", 0.25f), hi = const_f32(g, "hi", 0.75f);
    CHECK_OK(wf_op(g, "Clip", "clip", (wf_output[]){r, lo, hi}, 3, NULL, 0, &n));
    y[3] = n ? wf_out(n, 0) : x;
    wf_output ax = const_i64(g, "axes", 1, 1, &axes);
    CHECK_OK(wf_op(g, "ReduceSum", "sum", (wf_output[]){r, ax}, 2, NULL, 0, &n));
    y[4] = n ? wf_out(n, 0) : x;

    wf_session_options so;
    wf_session_options_init(&so);
    so.device = "OPENCL:0";
    so.strict_placement = 1;
    so.opt_level = 0; /* Reshape(r2, Shape(r)) returns r2: the simplify pass would drop it and its Shape */
    wf_session *dev = NULL, *cpu = NULL;
    CHECK_OK(wf_session_new(ctx, g, &so, &dev));
    wf_session_options_init(&so);
    so.device = "CPU:0";
    CHECK_OK(wf_session_new(ctx, g, &so, &cpu));
    wf_tensor *xt = NULL;
    CHECK_OK(wf_tensor_new(WF_F32, 3, d, NULL, &xt));
    float *xp = xt ? wf_tensor_data(xt) : NULL;
    for (int i = 0; xp && i < 24; i++) xp[i] = (float)((i * 7) % 11) / 10.0f - 0.3f;
    wf_feed f = {x, xt};
    char *text = NULL;
    if (dev && xt) CHECK_OK(wf_session_placement(dev, &f, 1, y, 5, &text));
    if (text) {
        const char *host[5] = {"s1", "sh", "k", "lo", "axes"};
        for (int i = 0; i < 5; i++) {
            const char *l = line_of(text, host[i]);
            CHECK_STR_CONTAINS(l, "device:CPU:0  # computes a host-memory argument");
        }
        CHECK_STR_CONTAINS(line_of(text, "reshape_const"), "device:OPENCL:0");
        CHECK_STR_CONTAINS(line_of(text, "clip"), "device:OPENCL:0");
        /* no copy of an argument up, and none of r down for Shape */
        const char *no_copy[7] = {"s1:0/Copy_to_OPENCL:0", "sh:0/Copy_to_OPENCL:0", "k:0/Copy_to_OPENCL:0",
                                  "lo:0/Copy_to_OPENCL:0", "hi:0/Copy_to_OPENCL:0", "axes:0/Copy_to_OPENCL:0",
                                  "r:0/Copy_to_CPU:0"};
        for (int i = 0; i < 7; i++) CHECK(!*line_of(text, no_copy[i]));
    }
    wf_free(text);
    wf_tensor *out[5] = {0}, *ref[5] = {0};
    wf_trace *t = NULL;
    if (dev && cpu && xt) {
        CHECK_OK(wf_session_run(dev, &f, 1, y, 5, out, NULL)); /* the first run builds the plan */
        for (int i = 0; i < 5; i++) wf_tensor_free(out[i]);
        wf_run_options ro = {.trace = &t};
        CHECK_OK(wf_session_run(dev, &f, 1, y, 5, out, &ro));
        CHECK_OK(wf_session_run(cpu, &f, 1, y, 5, ref, NULL));
    }
    for (int i = 0; i < 5; i++) {
        CHECK(out[i] && ref[i]);
        if (!out[i] || !ref[i]) continue;
        CHECK_INT(wf_tensor_rank(out[i]), wf_tensor_rank(ref[i]));
        CHECK(wf_tensor_bytes(out[i]) == wf_tensor_bytes(ref[i]));
        if (wf_tensor_bytes(out[i]) != wf_tensor_bytes(ref[i])) continue;
        if (i == 1) {
            /* the Sigmoid: each device's own exp, so an ulp or two apart (the op cases hold both to a reference) */
            const float *a = wf_tensor_data(out[i]), *b = wf_tensor_data(ref[i]);
            for (int j = 0; j < 24; j++) CHECK_NEAR(a[j], b[j], 4e-7f * fabsf(b[j]));
        } else {
            CHECK(!memcmp(wf_tensor_data(out[i]), wf_tensor_data(ref[i]), wf_tensor_bytes(out[i])));
        }
    }
    /* hand-worked: Reshape keeps the values; Clip of relu(x) in [0.25, 0.75]; sum over axis 1 */
    if (out[0] && xp) CHECK(wf_tensor_dims(out[0])[0] == 6 && ((float *)wf_tensor_data(out[0]))[5] == (xp[5] > 0 ? xp[5] : 0));
    if (out[3] && xp)
        for (int i = 0; i < 24; i++) {
            float v = xp[i] > 0 ? xp[i] : 0, c = v < 0.25f ? 0.25f : v > 0.75f ? 0.75f : v;
            CHECK(((float *)wf_tensor_data(out[3]))[i] == c);
        }
    if (out[4] && xp)
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 4; c++) {
                float s = 0;
                for (int b = 0; b < 3; b++) s += xp[a * 12 + b * 4 + c] > 0 ? xp[a * 12 + b * 4 + c] : 0;
                CHECK_NEAR(((float *)wf_tensor_data(out[4]))[a * 4 + c], s, 1e-6);
            }
    /* copies in the traced run: x up (96 bytes), the five outputs down, nothing else */
    int64_t up = 0, down = 0;
    for (int i = 0; t && i < wf_trace_num_events(t); i++) {
        wf_trace_event e = wf_trace_event_at(t, i);
        if (!e.is_copy) continue;
        if (strstr(e.device_short, "OPENCL")) up += e.bytes;
        else down += e.bytes;
    }
    CHECK(t != NULL);
    CHECK_INT(up, 96);
    int64_t want_down = 0;
    for (int i = 0; i < 5; i++) want_down += out[i] ? (int64_t)wf_tensor_bytes(out[i]) : 0;
    CHECK_INT(down, want_down);
    wf_trace_free(t);
    for (int i = 0; i < 5; i++) {
        wf_tensor_free(out[i]);
        wf_tensor_free(ref[i]);
    }
    wf_tensor_free(xt);
    wf_session_free(dev);
    wf_session_free(cpu);
    wf_graph_free(g);
}

int main(void)
{
    /* any read-back of a kernel's input fails (the plugin reads this when it opens the device) */
    setenv("WEFT_OCL_NO_READBACK", "1", 1);
    setenv("WEFT_PLUGIN_PATH", WEFT_TEST_PLUGIN_DIR "/../..", 1);
    CHECK_OK(wf_context_new(NULL, &ctx));
    if (!ctx) return 1;
    RUN_TEST(test_host_arguments_stay_on_host);
    wf_context_free(ctx);
    return check_summary();
}
