/*
 * Gradients of Conv2D, ConvTranspose2D, MaxPool2D, AvgPool2D and GlobalAvgPool (and so of their backward
 * ops) against f64 central differences (gradcheck.h), over strides, pads, dilations, groups, auto_pad,
 * ceil_mode and count_include_pad, plus a small CNN end to end.
 * Usage: test_grad_nn [--device SPEC]; a SPEC that no device matches is skipped.
 */
#include <stdarg.h>

#include "gradcheck.h"

static const char *g_device;
static wf_context *g_ctx;
static int g_cases, g_bad_cases;

static uint64_t g_seed = 777;

static double rnd01(void)
{
    g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_seed >> 11) / 9007199254740992.0;
}

/* An f64 tensor of uniform values in [-1, 1]: continuous, so no two pool taps tie within the step. */
static wf_tensor *F(int rank, ...)
{
    int64_t dims[WF_MAX_RANK];
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++) dims[i] = va_arg(ap, int);
    va_end(ap);
    wf_tensor *t = NULL;
    CHECK_OK(wf_tensor_new(WF_F64, rank, dims, NULL, &t));
    if (!t) return NULL;
    double *p = wf_tensor_data(t);
    for (int64_t i = 0; i < wf_tensor_size(t); i++) p[i] = 2 * rnd01() - 1;
    return t;
}

/* One node of `op` over every input, with up to 6 attributes. */
typedef struct spec {
    const char *op;
    wf_attr attrs[6];
    int n_attrs;
} spec;

static wf_status *build_spec(wf_graph *g, const wf_output *in, int n_in, void *arg, wf_output *out)
{
    spec *s = arg;
    wf_node *node;
    wf_status *st = wf_op(g, s->op, "node", in, n_in, s->attrs, s->n_attrs, &node);
    if (st) return st;
    *out = wf_out(node, 0);
    return NULL;
}

static void run(const char *name, gc_build_fn build, void *arg, int n_in, wf_tensor **in)
{
    gc_opts o = {.device = g_device, .ctx = g_ctx};
    g_cases++;
    if (gradcheck(name, build, arg, n_in, in, &o)) {
        g_bad_cases++;
        fprintf(stderr, "  case %s failed\n", name);
    }
    for (int i = 0; i < n_in; i++) wf_tensor_free(in[i]);
}

static void run_spec(const char *name, spec s, int n_in, ...)
{
    wf_tensor *in[GC_MAX_IN];
    va_list ap;
    va_start(ap, n_in);
    for (int i = 0; i < n_in; i++) in[i] = va_arg(ap, wf_tensor *);
    va_end(ap);
    run(name, build_spec, &s, n_in, in);
}

/* INTS attributes whose storage outlives the case (a ring of slots). */
static wf_attr AIS(const char *nm, int n, ...)
{
    static int64_t store[32][8];
    static int k;
    int64_t *v = store[k++ % 32];
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) v[i] = va_arg(ap, int);
    va_end(ap);
    return wf_attr_ints(nm, v, n);
}

#define S(OP, ...) ((spec){.op = OP, .attrs = {__VA_ARGS__}, .n_attrs = sizeof((wf_attr[]){__VA_ARGS__}) / sizeof(wf_attr)})
#define S0(OP) ((spec){.op = OP})
#define STRIDES(a, b) AIS("strides", 2, a, b)
#define PADS(a, b, c, d) AIS("pads", 4, a, b, c, d)
#define DIL(a, b) AIS("dilations", 2, a, b)
#define KS(a, b) AIS("kernel_shape", 2, a, b)

static void test_conv2d(void)
{
    run_spec("conv_basic_bias", S0("Conv2D"), 3, F(4, 2, 3, 5, 5), F(4, 4, 3, 3, 3), F(1, 4));
    run_spec("conv_stride_pad", S("Conv2D", STRIDES(2, 2), PADS(1, 1, 1, 1)), 2, F(4, 1, 2, 6, 7), F(4, 3, 2, 3, 3));
    /* the stride leaves the last rows of x outside every window: their gradient is 0 */
    run_spec("conv_stride_rem_asym", S("Conv2D", STRIDES(3, 2), PADS(0, 1, 2, 0)), 3, F(4, 1, 2, 8, 7),
             F(4, 3, 2, 3, 2), F(1, 3));
    run_spec("conv_dilation", S("Conv2D", DIL(2, 3), PADS(2, 1, 1, 2)), 2, F(4, 1, 2, 7, 8), F(4, 2, 2, 3, 2));
    run_spec("conv_group2", S("Conv2D", wf_attr_int("group", 2), PADS(1, 1, 1, 1)), 3, F(4, 2, 4, 5, 5),
             F(4, 6, 2, 3, 3), F(1, 6));
    run_spec("conv_depthwise_stride", S("Conv2D", wf_attr_int("group", 3), STRIDES(2, 2), PADS(1, 1, 1, 1)), 2,
             F(4, 1, 3, 7, 6), F(4, 3, 1, 3, 3));
    run_spec("conv_same_upper", S("Conv2D", wf_attr_string("auto_pad", "SAME_UPPER"), STRIDES(2, 3)), 2,
             F(4, 1, 2, 7, 8), F(4, 2, 2, 4, 3));
    run_spec("conv_same_lower", S("Conv2D", wf_attr_string("auto_pad", "SAME_LOWER"), STRIDES(2, 1)), 2,
             F(4, 1, 2, 6, 5), F(4, 2, 2, 2, 3));
    run_spec("conv_1x1_stride", S("Conv2D", STRIDES(2, 2)), 3, F(4, 2, 3, 5, 4), F(4, 2, 3, 1, 1), F(1, 2));
    run_spec("conv_group_dil_stride",
             S("Conv2D", wf_attr_int("group", 3), STRIDES(2, 3), DIL(2, 1), PADS(1, 0, 0, 2)), 2, F(4, 1, 6, 7, 8),
             F(4, 6, 2, 2, 3));
}

static void test_conv_transpose2d(void)
{
    run_spec("convt_basic_bias", S0("ConvTranspose2D"), 3, F(4, 2, 3, 3, 4), F(4, 3, 2, 3, 3), F(1, 2));
    run_spec("convt_stride_pad_opad", S("ConvTranspose2D", STRIDES(2, 3), PADS(1, 0, 1, 1),
                                        AIS("output_padding", 2, 1, 2)), 2, F(4, 1, 2, 3, 3), F(4, 2, 3, 3, 3));
    run_spec("convt_group_dil", S("ConvTranspose2D", wf_attr_int("group", 2), DIL(2, 2), STRIDES(2, 1)), 3,
             F(4, 1, 4, 3, 3), F(4, 4, 1, 2, 3), F(1, 2));
    run_spec("convt_output_shape", S("ConvTranspose2D", STRIDES(2, 2), AIS("output_shape", 2, 6, 7)), 2,
             F(4, 1, 2, 3, 4), F(4, 2, 2, 3, 3));
}

static void test_max_pool2d(void)
{
    run_spec("maxpool_basic", S("MaxPool2D", KS(2, 2), STRIDES(2, 2)), 1, F(4, 2, 2, 4, 6));
    run_spec("maxpool_overlap", S("MaxPool2D", KS(3, 3), STRIDES(2, 2)), 1, F(4, 1, 2, 7, 7));
    run_spec("maxpool_pads", S("MaxPool2D", KS(3, 2), PADS(1, 0, 1, 1), STRIDES(1, 2)), 1, F(4, 1, 2, 5, 6));
    run_spec("maxpool_ceil", S("MaxPool2D", KS(3, 3), STRIDES(2, 3), wf_attr_int("ceil_mode", 1)), 1,
             F(4, 1, 2, 7, 8));
    run_spec("maxpool_dilation", S("MaxPool2D", KS(2, 3), DIL(2, 2), PADS(1, 1, 1, 1)), 1, F(4, 1, 2, 7, 7));
    run_spec("maxpool_same_upper", S("MaxPool2D", KS(3, 2), STRIDES(2, 2), wf_attr_string("auto_pad", "SAME_UPPER")),
             1, F(4, 1, 2, 7, 6));
}

static void test_avg_pool2d(void)
{
    run_spec("avgpool_basic", S("AvgPool2D", KS(2, 2), STRIDES(2, 2)), 1, F(4, 2, 2, 4, 6));
    run_spec("avgpool_pads", S("AvgPool2D", KS(3, 3), PADS(1, 1, 1, 1)), 1, F(4, 1, 2, 5, 6));
    run_spec("avgpool_pads_cip", S("AvgPool2D", KS(3, 3), PADS(1, 2, 2, 1), wf_attr_int("count_include_pad", 1)), 1,
             F(4, 1, 2, 5, 6));
    run_spec("avgpool_ceil", S("AvgPool2D", KS(3, 3), STRIDES(2, 2), PADS(1, 1, 1, 1), wf_attr_int("ceil_mode", 1)),
             1, F(4, 1, 2, 6, 6));
    run_spec("avgpool_ceil_cip", S("AvgPool2D", KS(3, 3), STRIDES(2, 3), wf_attr_int("ceil_mode", 1),
                                   wf_attr_int("count_include_pad", 1)), 1, F(4, 1, 2, 7, 8));
    run_spec("avgpool_dilation_same", S("AvgPool2D", KS(2, 3), DIL(2, 1), STRIDES(2, 2),
                                        wf_attr_string("auto_pad", "SAME_LOWER")), 1, F(4, 1, 2, 7, 6));
}

static void test_global_avg_pool(void)
{
    run_spec("gap_4d", S0("GlobalAvgPool"), 1, F(4, 2, 3, 4, 5));
    run_spec("gap_3d", S0("GlobalAvgPool"), 1, F(3, 2, 3, 7));
}

/* Conv2D(+B) -> Relu -> MaxPool2D -> Conv2D (stride 2) -> AvgPool2D -> GlobalAvgPool: every gradient
 * composes through the others. */
static wf_status *build_cnn(wf_graph *g, const wf_output *in, int n_in, void *arg, wf_output *out)
{
    (void)n_in, (void)arg;
    wf_status *s;
    wf_node *n;
    wf_output c1[3] = {in[0], in[1], in[2]}, r, c2[2];
    wf_attr p1 = AIS("pads", 4, 1, 1, 1, 1);
    if ((s = wf_op(g, "Conv2D", "c1", c1, 3, &p1, 1, &n))) return s;
    if ((s = wf_relu(g, "r1", wf_out(n, 0), &r))) return s;
    wf_attr mp[2] = {AIS("kernel_shape", 2, 2, 2), AIS("strides", 2, 1, 1)};
    if ((s = wf_op(g, "MaxPool2D", "mp", &r, 1, mp, 2, &n))) return s;
    c2[0] = wf_out(n, 0), c2[1] = in[3];
    wf_attr st[2] = {AIS("strides", 2, 2, 2), AIS("pads", 4, 0, 1, 1, 0)};
    if ((s = wf_op(g, "Conv2D", "c2", c2, 2, st, 2, &n))) return s;
    wf_output a = wf_out(n, 0);
    wf_attr ap[3] = {AIS("kernel_shape", 2, 2, 2), AIS("pads", 4, 1, 1, 0, 0), wf_attr_int("count_include_pad", 1)};
    if ((s = wf_op(g, "AvgPool2D", "ap", &a, 1, ap, 3, &n))) return s;
    a = wf_out(n, 0);
    if ((s = wf_op(g, "GlobalAvgPool", "gap", &a, 1, NULL, 0, &n))) return s;
    *out = wf_out(n, 0);
    return NULL;
}

static void test_small_cnn(void)
{
    /* keep the Relu input away from 0, where finite differences straddle the kink */
    wf_tensor *in[4] = {F(4, 2, 2, 6, 6), F(4, 3, 2, 3, 3), F(1, 3), F(4, 4, 3, 2, 2)};
    double *b = wf_tensor_data(in[2]);
    for (int i = 0; i < 3; i++) b[i] = 3.0 + i; /* a bias that keeps every Conv2D output positive */
    run("small_cnn", build_cnn, NULL, 4, in);
}

/* ConvTranspose2D pads that output_shape makes negative have no gradient: a status, not a crash. */
static void test_convt_negative_pads(void)
{
    wf_graph *g = NULL;
    CHECK_OK(wf_graph_new(&g));
    if (!g) return;
    int64_t xd[4] = {1, 1, 2, 2}, wd[4] = {1, 1, 2, 2};
    wf_output x, w, in[2], dx[2];
    CHECK_OK(wf_placeholder(g, "x", WF_F64, 4, xd, &x));
    CHECK_OK(wf_placeholder(g, "w", WF_F64, 4, wd, &w));
    in[0] = x, in[1] = w;
    wf_attr os = AIS("output_shape", 2, 6, 6);
    wf_node *n = NULL;
    CHECK_OK(wf_op(g, "ConvTranspose2D", "ct", in, 2, &os, 1, &n));
    if (!n) goto done;
    int before = wf_graph_num_nodes(g);
    wf_output y = wf_out(n, 0);
    CHECK_ERR(wf_gradients(g, &y, 1, NULL, in, 2, dx), WF_UNIMPLEMENTED, "negative pads");
    CHECK_INT(wf_graph_num_nodes(g), before);
done:
    wf_graph_free(g);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--device")) g_device = argv[2];
    CHECK_OK(wf_context_new(NULL, &g_ctx));
    if (!g_ctx) return 1;
    if (g_device && !gc_device_present(g_ctx, g_device)) {
        CHECK_SKIP("test_grad_nn", "no device matches %s", g_device);
        check_skipped_++;
        check_summary();
        wf_context_free(g_ctx);
        return 0;
    }
    RUN_TEST(test_conv2d);
    RUN_TEST(test_conv_transpose2d);
    RUN_TEST(test_max_pool2d);
    RUN_TEST(test_avg_pool2d);
    RUN_TEST(test_global_avg_pool);
    RUN_TEST(test_small_cnn);
    RUN_TEST(test_convt_negative_pads);
    printf("nn gradient cases%s%s: %d passed, %d failed\n", g_device ? " on " : "", g_device ? g_device : "",
           g_cases - g_bad_cases, g_bad_cases);
    wf_context_free(g_ctx);
    return check_summary();
}
